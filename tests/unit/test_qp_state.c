/* QP state machine: the transitions and attribute rules of ibv_modify_qp,
 * value ranges, posting rules per state, and allocation failures at every
 * step of object creation unwinding cleanly. */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "tphelp.h"
#include "transport/engine.h"
#include "uroce/uroce.h"
#include "wire/hdr.h"
#include "wire/opcode.h"

static struct uroce_eng *eng;
static struct tp_end E;
static const uint8_t gid[16] = {[10] = 0xFF, [11] = 0xFF, [12] = 10, [15] = 1};

static void setup_mtu(uint32_t type, uint8_t port_mtu) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.port_mtu = port_mtu;
  CHECK_EQ(uroce_eng_new(&eng, &cfg), 0);
  struct tp_opts o;
  tp_opts_default(&o);
  o.type = type;
  o.memlen = 4096;
  CHECK_EQ(tp_end_init(&E, eng, gid, &o), 0);
}

static void setup(uint32_t type) {
  setup_mtu(type, 0);
}

static void teardown(void) {
  tp_end_free(&E);
  uroce_eng_del(eng);
}

static int state(void) {
  struct uroce_qp_attr a;
  uroce_eng_qp_query(E.qp, &a, 0);
  return (int)a.qp_state;
}

static void test_rc_transitions(void) {
  setup(UROCE_QPT_RC);
  struct uroce_qp_attr a;
  memset(&a, 0, sizeof(a));
  /* RESET -> RTR skips INIT: refused. */
  a.qp_state = UROCE_QPS_RTR;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, UROCE_QP_STATE), UROCE_ERR_BAD_STATE);
  /* RESET -> INIT without the required attributes. */
  a.qp_state = UROCE_QPS_INIT;
  a.port_num = 1;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, UROCE_QP_STATE | UROCE_QP_PORT),
           UROCE_ERR_INVALID_ARGUMENT);
  /* An attribute not allowed in this transition. */
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a,
                               UROCE_QP_STATE | UROCE_QP_PORT |
                                   UROCE_QP_PKEY_INDEX | UROCE_QP_ACCESS_FLAGS |
                                   UROCE_QP_SQ_PSN),
           UROCE_ERR_INVALID_ARGUMENT);
  /* Q_Key is for UD. */
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a,
                               UROCE_QP_STATE | UROCE_QP_PORT |
                                   UROCE_QP_PKEY_INDEX | UROCE_QP_QKEY),
           UROCE_ERR_INVALID_ARGUMENT);
  a.port_num = 2;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a,
                               UROCE_QP_STATE | UROCE_QP_PORT |
                                   UROCE_QP_PKEY_INDEX | UROCE_QP_ACCESS_FLAGS),
           UROCE_ERR_INVALID_ARGUMENT);
  a.port_num = 1;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a,
                               UROCE_QP_STATE | UROCE_QP_PORT |
                                   UROCE_QP_PKEY_INDEX | UROCE_QP_ACCESS_FLAGS),
           0);
  CHECK_EQ(state(), UROCE_QPS_INIT);
  /* Posting sends before RTS is refused, receives are fine. */
  CHECK_EQ(tp_post_send(&E, UROCE_WR_SEND, 1, 0, 1, 0, 0, 0),
           UROCE_ERR_BAD_STATE);
  CHECK_EQ(tp_post_recv(&E, 1, 0, 16), 0);
  /* INIT -> RTR: every value range. */
  int rtr = UROCE_QP_STATE | UROCE_QP_AV | UROCE_QP_PATH_MTU |
            UROCE_QP_DEST_QPN | UROCE_QP_RQ_PSN | UROCE_QP_MAX_DEST_RD_ATOMIC |
            UROCE_QP_MIN_RNR_TIMER;
  memset(&a, 0, sizeof(a));
  a.qp_state = UROCE_QPS_RTR;
  a.path_mtu = UROCE_MTU_1024;
  a.dest_qp_num = 0x123;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr & ~UROCE_QP_MIN_RNR_TIMER),
           UROCE_ERR_INVALID_ARGUMENT);
  a.ah_attr.is_global = 0; /* RoCE needs a GRH */
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr), UROCE_ERR_INVALID_ARGUMENT);
  a.ah_attr.is_global = 1;
  a.path_mtu = 6;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr), UROCE_ERR_INVALID_ARGUMENT);
  a.path_mtu = 0;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr), UROCE_ERR_INVALID_ARGUMENT);
  a.path_mtu = UROCE_MTU_4096;
  a.rq_psn = 0x1000000;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr), UROCE_ERR_INVALID_ARGUMENT);
  a.rq_psn = 5;
  a.max_dest_rd_atomic = 17;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr), UROCE_ERR_INVALID_ARGUMENT);
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 32;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr), UROCE_ERR_INVALID_ARGUMENT);
  a.min_rnr_timer = 12;
  a.dest_qp_num = 0x1000000;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr), UROCE_ERR_INVALID_ARGUMENT);
  a.dest_qp_num = 0x123;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr), 0);
  CHECK_EQ(state(), UROCE_QPS_RTR);
  /* RTR -> RTS. */
  int rts = UROCE_QP_STATE | UROCE_QP_TIMEOUT | UROCE_QP_RETRY_CNT |
            UROCE_QP_RNR_RETRY | UROCE_QP_SQ_PSN | UROCE_QP_MAX_QP_RD_ATOMIC;
  memset(&a, 0, sizeof(a));
  a.qp_state = UROCE_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 8;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rts), UROCE_ERR_INVALID_ARGUMENT);
  a.retry_cnt = 7;
  a.rnr_retry = 8;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rts), UROCE_ERR_INVALID_ARGUMENT);
  a.rnr_retry = 7;
  a.timeout = 32;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rts), UROCE_ERR_INVALID_ARGUMENT);
  a.timeout = 14;
  a.cur_qp_state = UROCE_QPS_INIT; /* wrong current state */
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rts | UROCE_QP_CUR_STATE),
           UROCE_ERR_BAD_STATE);
  a.cur_qp_state = UROCE_QPS_RTR;
  a.sq_psn = 0xABCDEF;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rts | UROCE_QP_CUR_STATE), 0);
  CHECK_EQ(state(), UROCE_QPS_RTS);
  struct uroce_qp_attr q;
  struct uroce_qp_init_attr qi;
  CHECK_EQ(uroce_eng_qp_query(E.qp, &q, &qi), 0);
  CHECK_EQ(q.sq_psn, 0xABCDEF);
  CHECK_EQ(q.rq_psn, 5);
  CHECK_EQ(q.path_mtu, UROCE_MTU_4096);
  CHECK_EQ(q.timeout, 14);
  CHECK_EQ(q.dest_qp_num, 0x123);
  CHECK_EQ(qi.qp_type, UROCE_QPT_RC);
  /* RTS -> RTS may change min_rnr_timer, not the path MTU. */
  memset(&a, 0, sizeof(a));
  a.min_rnr_timer = 3;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, UROCE_QP_MIN_RNR_TIMER), 0);
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, UROCE_QP_PATH_MTU),
           UROCE_ERR_INVALID_ARGUMENT);
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, UROCE_QP_CAP),
           UROCE_ERR_NOT_SUPPORTED);
  /* RTS -> SQD -> RTS, with the drained event. */
  a.qp_state = UROCE_QPS_SQD;
  a.en_sqd_async_notify = 1;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a,
                               UROCE_QP_STATE | UROCE_QP_EN_SQD_ASYNC_NOTIFY),
           0);
  struct uroce_async_event ev;
  CHECK_EQ(uroce_eng_get_async_event(eng, &ev), 1);
  CHECK_EQ(ev.type, UROCE_EVENT_SQ_DRAINED);
  a.qp_state = UROCE_QPS_RTS;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, UROCE_QP_STATE), 0);
  /* RTS -> INIT is not a transition. */
  a.qp_state = UROCE_QPS_INIT;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, UROCE_QP_STATE), UROCE_ERR_BAD_STATE);
  /* ERR flushes the posted receive; ERR -> RESET -> INIT works. */
  a.qp_state = UROCE_QPS_ERR;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, UROCE_QP_STATE), 0);
  struct uroce_wc wc[4];
  CHECK_EQ(tp_poll(E.rcq, wc, 4), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_WR_FLUSH_ERR);
  CHECK_EQ(wc[0].wr_id, 1);
  a.qp_state = UROCE_QPS_RTS;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, UROCE_QP_STATE), UROCE_ERR_BAD_STATE);
  a.qp_state = UROCE_QPS_RESET;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, UROCE_QP_STATE), 0);
  CHECK_EQ(tp_post_recv(&E, 1, 0, 16), UROCE_ERR_BAD_STATE);
  teardown();
}

static void test_ud_and_posting(void) {
  setup(UROCE_QPT_UD);
  struct tp_opts o;
  tp_opts_default(&o);
  o.type = UROCE_QPT_UD;
  CHECK_EQ(tp_bring_up(&E, 0, &o), 0);
  CHECK_EQ(state(), UROCE_QPS_RTS);
  /* UD: RDMA opcodes and messages over the MTU are refused. */
  struct uroce_ah_attr aa = {.is_global = 1};
  struct uroce_ah *ah;
  CHECK_EQ(uroce_eng_ah_new(E.pd, &aa, &ah), 0);
  struct uroce_sge sge = {.addr = E.mr->iova, .length = 16, .lkey = E.mr->lkey};
  struct uroce_send_wr wr[3], *bad;
  memset(wr, 0, sizeof(wr));
  for (int i = 0; i < 3; i++) {
    wr[i].wr_id = (uint64_t)i;
    wr[i].sg_list = &sge;
    wr[i].num_sge = 1;
    wr[i].opcode = UROCE_WR_SEND;
    wr[i].wr.ud.ah = ah;
    if (i < 2)
      wr[i].next = &wr[i + 1];
  }
  wr[1].opcode = UROCE_WR_RDMA_WRITE;
  CHECK_EQ(uroce_eng_qp_post_send(E.qp, wr, &bad), UROCE_ERR_INVALID_ARGUMENT);
  CHECK(bad == &wr[1]); /* the first bad WR is reported */
  wr[1].opcode = UROCE_WR_SEND;
  sge.length = 4097;
  CHECK_EQ(uroce_eng_qp_post_send(E.qp, &wr[2], &bad),
           UROCE_ERR_INVALID_ARGUMENT);
  sge.length = 16;
  wr[2].num_sge = 17; /* more than max_send_sge */
  CHECK_EQ(uroce_eng_qp_post_send(E.qp, &wr[2], &bad),
           UROCE_ERR_INVALID_ARGUMENT);
  uroce_eng_ah_del(ah);
  teardown();
}

/* Fails the Nth allocation: every failure path must unwind (LSan checks
 * that nothing leaks) and return -ENOMEM. */
static int fail_at, n_alloc;
static void *fail_alloc(void *ctx, size_t n) {
  if (++n_alloc == fail_at)
    return 0;
  return malloc(n);
}
static void fail_free(void *ctx, void *p) {
  free(p);
}

static void test_alloc_failures(void) {
  int failures = 0;
  for (fail_at = 1; fail_at < 100; fail_at++) {
    n_alloc = 0;
    struct uroce_eng_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.alloc = fail_alloc;
    cfg.free = fail_free;
    struct uroce_eng *e = 0;
    struct tp_end t;
    struct tp_opts o;
    tp_opts_default(&o);
    o.use_srq = fail_at % 2;
    o.memlen = 64;
    int rc = uroce_eng_new(&e, &cfg);
    if (rc == 0) {
      rc = tp_end_init(&t, e, gid, &o);
      if (rc == 0)
        rc = tp_bring_up(&t, &t, &o);
      tp_end_free(&t);
      uroce_eng_del(e);
    }
    if (rc) {
      failures++;
      CHECK_EQ(rc, -12);
    } else {
      break; /* past the last allocation */
    }
  }
  CHECK(failures > 5);
}

/* rxe's rule: with the port's active MTU 1024 (a 1500-byte link), a path
 * MTU up to the max MTU 4096 is accepted, and nothing above it. */
static void test_path_mtu_above_active(void) {
  setup_mtu(UROCE_QPT_RC, UROCE_MTU_1024);
  struct uroce_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = UROCE_QPS_INIT;
  a.port_num = 1;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a,
                               UROCE_QP_STATE | UROCE_QP_PORT |
                                   UROCE_QP_PKEY_INDEX | UROCE_QP_ACCESS_FLAGS),
           0);
  int rtr = UROCE_QP_STATE | UROCE_QP_AV | UROCE_QP_PATH_MTU |
            UROCE_QP_DEST_QPN | UROCE_QP_RQ_PSN | UROCE_QP_MAX_DEST_RD_ATOMIC |
            UROCE_QP_MIN_RNR_TIMER;
  memset(&a, 0, sizeof(a));
  a.qp_state = UROCE_QPS_RTR;
  a.ah_attr.is_global = 1;
  a.dest_qp_num = 0x123;
  a.path_mtu = 6;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr), UROCE_ERR_INVALID_ARGUMENT);
  a.path_mtu = UROCE_MTU_4096;
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &a, rtr), 0);
  struct uroce_qp_attr q;
  struct uroce_qp_init_attr qi;
  CHECK_EQ(uroce_eng_qp_query(E.qp, &q, &qi), 0);
  CHECK_EQ(q.path_mtu, UROCE_MTU_4096);
  teardown();
}

/* Hands the engine an RC SEND for qpn; true if it was dropped as addressed
 * to no QP (a QP in RESET drops it for its state instead). */
static bool no_such_qp(struct uroce_eng *e, uint32_t qpn) {
  uint8_t buf[UROCE_TX_HDR_MAX + 8];
  struct uroce_hdr_fields h = {
      .opcode = UROCE_OP_SEND_ONLY, .pkey = 0xFFFF, .dqpn = qpn};
  int hl = uroce_hdr_encode(buf, &h);
  CHECK(hl > 0);
  memset(buf + hl, 0, 8);
  struct uroce_rx_pkt rx;
  memset(&rx, 0, sizeof(rx));
  CHECK_EQ(uroce_pkt_parse(buf, (size_t)hl + 4 + UROCE_ICRC_LEN, &rx.pi), 0);
  memcpy(rx.dgid, gid, 16);
  uint64_t before = uroce_eng_stats(e)->drops[UROCE_DROP_NO_QP];
  uroce_eng_read_pkt(e, &rx, 1);
  return uroce_eng_stats(e)->drops[UROCE_DROP_NO_QP] != before;
}

/* The QPN table starts small and grows with the QPs: up to max_qp QPs,
 * each found by its number after growth and after its neighbours in the
 * probe sequence are destroyed; a destroyed one is no longer found. */
static void test_qpn_table_grows(void) {
  enum { N = 600 };
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.max_qp = N;
  struct uroce_eng *e;
  struct uroce_pd *pd;
  struct uroce_cq *cq;
  CHECK_EQ(uroce_eng_new(&e, &cfg), 0);
  CHECK_EQ(uroce_eng_pd_new(e, &pd), 0);
  CHECK_EQ(uroce_eng_cq_new(e, 16, &cq), 0);
  struct uroce_qp_init_attr ia = {
      .send_cq = cq,
      .recv_cq = cq,
      .cap = {.max_send_wr = 1, .max_recv_wr = 1},
      .qp_type = UROCE_QPT_RC,
  };
  static struct uroce_qp *qp[N];
  static uint32_t num[N];
  for (int i = 0; i < N; i++) {
    CHECK_EQ(uroce_eng_qp_new(pd, &ia, &qp[i]), 0);
    num[i] = uroce_qp_num(qp[i]);
  }
  struct uroce_qp *extra;
  CHECK_EQ(uroce_eng_qp_new(pd, &ia, &extra), UROCE_ERR_CAPS);
  for (int i = 0; i < N; i++)
    CHECK(!no_such_qp(e, num[i]));
  for (int i = 0; i < N; i += 2)
    CHECK_EQ(uroce_eng_qp_del(qp[i]), 0);
  for (int i = 0; i < N; i++)
    CHECK_EQ(no_such_qp(e, num[i]), i % 2 == 0);
  for (int i = 1; i < N; i += 2)
    CHECK_EQ(uroce_eng_qp_del(qp[i]), 0);
  CHECK_EQ(uroce_eng_cq_del(cq), 0);
  CHECK_EQ(uroce_eng_pd_del(pd), 0);
  uroce_eng_del(e);
}

/* uroce_eng_qp_connect: up from where the QP is to attr->qp_state, each step
 * with what it requires; a failing step leaves the QP where it got. */
static void test_connect_helper(void) {
  setup(UROCE_QPT_RC);
  struct uroce_qp_attr a = {.qp_state = UROCE_QPS_RESET,
                            .port_num = 1,
                            .qp_access_flags = UROCE_ACCESS_REMOTE_WRITE,
                            .path_mtu = UROCE_MTU_1024,
                            .dest_qp_num = uroce_qp_num(E.qp),
                            .ah_attr.is_global = 1,
                            .timeout = 10,
                            .retry_cnt = 7,
                            .rnr_retry = 7};
  memcpy(a.ah_attr.dgid, gid, 16);
  CHECK_EQ(uroce_eng_qp_connect(E.qp, &a), UROCE_ERR_INVALID_ARGUMENT);
  a.qp_state = UROCE_QPS_SQD;
  CHECK_EQ(uroce_eng_qp_connect(E.qp, &a), UROCE_ERR_INVALID_ARGUMENT);
  a.qp_state = UROCE_QPS_INIT;
  CHECK_EQ(uroce_eng_qp_connect(E.qp, &a), 0);
  CHECK_EQ(state(), UROCE_QPS_INIT);
  a.qp_state = UROCE_QPS_INIT; /* there already: nothing to do */
  CHECK_EQ(uroce_eng_qp_connect(E.qp, &a), 0);
  /* A bad value in the RTR step: stays in INIT. */
  a.qp_state = UROCE_QPS_RTS;
  a.path_mtu = 9;
  CHECK_EQ(uroce_eng_qp_connect(E.qp, &a), UROCE_ERR_INVALID_ARGUMENT);
  CHECK_EQ(state(), UROCE_QPS_INIT);
  a.path_mtu = UROCE_MTU_1024;
  CHECK_EQ(uroce_eng_qp_connect(E.qp, &a), 0);
  CHECK_EQ(state(), UROCE_QPS_RTS);
  a.qp_state = UROCE_QPS_RTR; /* past it */
  CHECK_EQ(uroce_eng_qp_connect(E.qp, &a), UROCE_ERR_BAD_STATE);
  struct uroce_qp_attr e = {.qp_state = UROCE_QPS_ERR};
  CHECK_EQ(uroce_eng_qp_modify(E.qp, &e, UROCE_QP_STATE), 0);
  a.qp_state = UROCE_QPS_RTS; /* off the path */
  CHECK_EQ(uroce_eng_qp_connect(E.qp, &a), UROCE_ERR_BAD_STATE);
  teardown();
}

int main(void) {
  T_RUN(test_rc_transitions);
  T_RUN(test_connect_helper);
  T_RUN(test_ud_and_posting);
  T_RUN(test_alloc_failures);
  T_RUN(test_path_mtu_above_active);
  T_RUN(test_qpn_table_grows);
  return T_DONE();
}
