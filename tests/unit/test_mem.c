/* Memory regions: unpredictable keys, O(1) lookup, bounds with overflow,
 * rights, PD membership, and stale keys after deregistration. */
#include <string.h>

#include "mem/mr.h"
#include "t.h"
#include "transport/engine.h"
#include "uroce/uroce.h"

static void test_keys(void) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.seed = 5;
  cfg.max_mr = 64;
  struct uroce_eng *eng;
  CHECK_EQ(uroce_eng_new(&eng, &cfg), 0);
  struct uroce_pd *pd;
  CHECK_EQ(uroce_eng_pd_new(eng, &pd), 0);
  static uint8_t buf[4096];
  struct uroce_mr *mr[64];
  for (int i = 0; i < 64; i++)
    CHECK_EQ(uroce_eng_mr_reg(pd, buf, sizeof(buf), UROCE_ACCESS_ALL, &mr[i]),
             0);
  struct uroce_mr *extra;
  CHECK_EQ(uroce_eng_mr_reg(pd, buf, 1, 0, &extra), UROCE_ERR_CAPS);
  /* Keys are distinct, lkey != rkey, and consecutive keys are not a
   * counter: their differences vary. */
  int same_step = 0;
  for (int i = 0; i < 64; i++) {
    CHECK(mr[i]->lkey != mr[i]->rkey);
    for (int j = 0; j < i; j++) {
      CHECK(mr[i]->lkey != mr[j]->lkey);
      CHECK(mr[i]->rkey != mr[j]->rkey);
    }
    if (i >= 2 &&
        mr[i]->rkey - mr[i - 1]->rkey == mr[i - 1]->rkey - mr[i - 2]->rkey)
      same_step++;
  }
  CHECK(same_step < 3);
  /* Deregistered keys never open the region that reuses the slot. */
  uint32_t old_l = mr[7]->lkey, old_r = mr[7]->rkey;
  CHECK_EQ(uroce_eng_mr_dereg(mr[7]), 0);
  CHECK(uroce_eng_mr_dereg(mr[7]) != 0);
  struct uroce_mr *again;
  CHECK_EQ(uroce_eng_mr_reg(pd, buf, 16, UROCE_ACCESS_ALL, &again), 0);
  CHECK(again->lkey != old_l && again->rkey != old_r);
  CHECK_EQ(pd != 0, 1);
  CHECK_EQ(uroce_eng_pd_del(pd), UROCE_ERR_BUSY);
  uroce_eng_del(eng);
}

static void test_checks(void) {
  static uint8_t mem[4 * 4096];
  struct uroce_mr_table t;
  CHECK_EQ(uroce_mr_table_init(&t, mem, 4), 4);
  struct uroce_mr *mr, *out;
  int pd1, pd2;
  CHECK_EQ(
      uroce_mr_table_add(&t, &pd1, 0x1000, 0x100,
                         UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_READ,
                         0x123456789abcdefull, &mr),
      0);
  /* remote write without local write is refused at registration */
  CHECK_EQ(
      uroce_mr_table_add(&t, &pd1, 0, 1, UROCE_ACCESS_REMOTE_WRITE, 1, &out),
      UROCE_ERR_INVALID_ARGUMENT);
  CHECK_EQ(uroce_mr_table_add(&t, &pd1, UINT64_MAX - 4, 100, 0, 1, &out),
           UROCE_ERR_INVALID_ARGUMENT);
  CHECK_EQ(uroce_mr_check(&t, true, mr->rkey, &pd1, NULL, 0x1000, 0x100,
                          UROCE_ACCESS_REMOTE_READ, &out),
           UROCE_MR_OK);
  CHECK(out == mr);
  CHECK_EQ(uroce_mr_check(&t, true, mr->rkey, &pd1, NULL, 0x10FF, 1,
                          UROCE_ACCESS_REMOTE_READ, &out),
           UROCE_MR_OK);
  CHECK_EQ(uroce_mr_check(&t, true, mr->rkey, &pd1, NULL, 0x10FF, 2,
                          UROCE_ACCESS_REMOTE_READ, &out),
           UROCE_MR_BAD_BOUNDS);
  CHECK_EQ(uroce_mr_check(&t, true, mr->rkey, &pd1, NULL, 0xFFF, 1,
                          UROCE_ACCESS_REMOTE_READ, &out),
           UROCE_MR_BAD_BOUNDS);
  /* Overflowing va + len must not wrap into bounds. */
  CHECK_EQ(uroce_mr_check(&t, true, mr->rkey, &pd1, NULL, 0x1001, UINT64_MAX,
                          UROCE_ACCESS_REMOTE_READ, &out),
           UROCE_MR_BAD_BOUNDS);
  CHECK_EQ(uroce_mr_check(&t, true, mr->rkey, &pd1, NULL, UINT64_MAX, 2,
                          UROCE_ACCESS_REMOTE_READ, &out),
           UROCE_MR_BAD_BOUNDS);
  CHECK_EQ(uroce_mr_check(&t, true, mr->rkey, &pd1, NULL, 0x1000, 8,
                          UROCE_ACCESS_REMOTE_WRITE, &out),
           UROCE_MR_BAD_ACCESS);
  CHECK_EQ(uroce_mr_check(&t, true, mr->rkey, &pd2, NULL, 0x1000, 8,
                          UROCE_ACCESS_REMOTE_READ, &out),
           UROCE_MR_BAD_PD);
  CHECK_EQ(uroce_mr_check(&t, true, mr->lkey, &pd1, NULL, 0x1000, 8, 0, &out),
           UROCE_MR_BAD_KEY); /* an lkey is not an rkey */
  CHECK_EQ(uroce_mr_check(&t, false, mr->lkey, &pd1, NULL, 0x1000, 8,
                          UROCE_ACCESS_LOCAL_WRITE, &out),
           UROCE_MR_OK);
  CHECK_EQ(uroce_mr_check(&t, false, mr->lkey ^ 0x80000000u, &pd1, NULL, 0x1000,
                          8, 0, &out),
           UROCE_MR_BAD_KEY);
  uroce_mr_table_remove(&t, mr);
  CHECK_EQ(uroce_mr_check(&t, false, mr->lkey, &pd1, NULL, 0x1000, 8, 0, &out),
           UROCE_MR_BAD_KEY);
}

int main(void) {
  T_RUN(test_keys);
  T_RUN(test_checks);
  return T_DONE();
}
