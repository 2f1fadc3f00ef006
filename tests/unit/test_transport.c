/* Transport engine: every operation between two engines over the
 * in-memory network, clean and impaired, for RC, UC and UD. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netsim.h"
#include "t.h"
#include "tphelp.h"
#include "transport/cc_swift.h"
#include "transport/qp.h"
#include "uroce/uroce.h"

static struct netsim ns;
static struct tp_end A, B;
/* The tests of the standard transport's own behaviour run the engines in
 * standard mode; between two uroce engines multipath is the default. */
static uint32_t eng_flags = UROCE_ENG_STANDARD;

/* Two engines made from cfg, one QP pair (o) between them connected, and
 * their memory filled with known patterns. */
static void setup_cfg(const struct uroce_eng_cfg *cfg, const struct tp_opts *o,
                      uint64_t seed) {
  CHECK_EQ(ns_init(&ns, 2, seed, cfg), 0);
  CHECK_EQ(tp_end_init(&A, ns.eng[0], ns.gid[0], o), 0);
  CHECK_EQ(tp_end_init(&B, ns.eng[1], ns.gid[1], o), 0);
  if (o->type != UROCE_QPT_UD)
    CHECK_EQ(tp_connect(&A, &B, o), 0);
  for (size_t i = 0; A.mem && i < A.memlen; i++)
    A.mem[i] = (uint8_t)(i * 7 + 1);
  for (size_t i = 0; B.mem && i < B.memlen; i++)
    B.mem[i] = (uint8_t)(i * 13 + 5);
}

static void setup(const struct tp_opts *o, uint64_t seed) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.flags = eng_flags;
  setup_cfg(&cfg, o, seed);
}

static void teardown(void) {
  tp_end_free(&A);
  tp_end_free(&B);
  ns_free(&ns);
}

static int wait_cq(struct uroce_cq *cq, struct uroce_wc *wc, int n) {
  return ns_wait_cq(&ns, cq, wc, n);
}

/* Binds window mw to [off, off + len) of e's MR for e's QP with a new
 * key portion; returns the completion status (or -1: none came). */
static int bind_mw(struct tp_end *e, struct uroce_mw *mw, uint64_t off,
                   uint64_t len, uint32_t access) {
  struct uroce_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = 0xB1D;
  wr.opcode = UROCE_WR_BIND_MW;
  wr.send_flags = UROCE_SEND_SIGNALED;
  wr.wr.bind_mw.mw = mw;
  wr.wr.bind_mw.mr = len ? e->mr : NULL;
  wr.wr.bind_mw.addr = e->mr->iova + off;
  wr.wr.bind_mw.length = len;
  wr.wr.bind_mw.access = access;
  uint32_t k = uroce_mw_rkey(mw);
  wr.wr.bind_mw.rkey = (k & ~0xFFu) | ((k + 1) & 0xFFu);
  int rc = uroce_eng_qp_post_send(e->qp, &wr, &bad);
  if (rc)
    return rc;
  struct uroce_wc wc;
  if (wait_cq(e->scq, &wc, 1) != 1 || wc.wr_id != 0xB1D)
    return -1;
  CHECK_EQ(wc.opcode, UROCE_WC_BIND_MW);
  return (int)wc.status;
}

static void test_send_recv(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  setup(&o, 1);
  struct uroce_wc wc[4];
  CHECK_EQ(tp_post_recv(&B, 77, 0, 10000), 0);
  CHECK_EQ(
      tp_post_send(&A, UROCE_WR_SEND, 5, 100, 5000, UROCE_SEND_SIGNALED, 0, 0),
      0);
  CHECK_EQ(wait_cq(A.scq, wc, 1), 1);
  CHECK_EQ(wc[0].wr_id, 5);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc[0].opcode, UROCE_WC_SEND);
  CHECK_EQ(wait_cq(B.rcq, wc, 1), 1);
  CHECK_EQ(wc[0].wr_id, 77);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc[0].opcode, UROCE_WC_RECV);
  CHECK_EQ(wc[0].byte_len, 5000);
  CHECK_EQ(wc[0].src_qp, uroce_qp_num(A.qp));
  CHECK_EQ(wc[0].qp_num, uroce_qp_num(B.qp));
  CHECK(memcmp(B.mem, A.mem + 100, 5000) == 0);
  teardown();
}

static void test_write_read_atomic(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  setup(&o, 2);
  struct uroce_wc wc[8];
  uint64_t bva = B.mr->iova;
  uint32_t rkey = B.mr->rkey;
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 70000,
                        UROCE_SEND_SIGNALED, bva + 1000, rkey),
           0);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_READ, 2, 200000, 30001,
                        UROCE_SEND_SIGNALED, bva + 500000, rkey),
           0);
  uint64_t word;
  memcpy(&word, B.mem + 800000, 8);
  struct uroce_sge sge = {
      .addr = A.mr->iova + 300000, .length = 8, .lkey = A.mr->lkey};
  struct uroce_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = 3;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = UROCE_WR_ATOMIC_FETCH_AND_ADD;
  wr.send_flags = UROCE_SEND_SIGNALED;
  wr.wr.atomic.remote_addr = bva + 800000;
  wr.wr.atomic.rkey = rkey;
  wr.wr.atomic.compare_add = 42;
  CHECK_EQ(uroce_eng_qp_post_send(A.qp, &wr, &bad), 0);
  wr.wr_id = 4;
  wr.opcode = UROCE_WR_ATOMIC_CMP_AND_SWP;
  wr.wr.atomic.compare_add = word + 42;
  wr.wr.atomic.swap = 0x1122334455667788ull;
  sge.addr += 8;
  CHECK_EQ(uroce_eng_qp_post_send(A.qp, &wr, &bad), 0);
  CHECK_EQ(wait_cq(A.scq, wc, 4), 4);
  for (int i = 0; i < 4; i++) {
    CHECK_EQ(wc[i].wr_id, i + 1);
    CHECK_EQ(wc[i].status, UROCE_WC_SUCCESS);
  }
  CHECK_EQ(wc[0].opcode, UROCE_WC_RDMA_WRITE);
  CHECK_EQ(wc[1].opcode, UROCE_WC_RDMA_READ);
  CHECK_EQ(wc[1].byte_len, 30001);
  CHECK_EQ(wc[2].opcode, UROCE_WC_FETCH_ADD);
  CHECK_EQ(wc[3].opcode, UROCE_WC_COMP_SWAP);
  CHECK(memcmp(B.mem + 1000, A.mem, 70000) == 0);
  CHECK(memcmp(A.mem + 200000, B.mem + 500000, 30001) == 0);
  uint64_t r0, r1, now;
  memcpy(&r0, A.mem + 300000, 8);
  memcpy(&r1, A.mem + 300008, 8);
  memcpy(&now, B.mem + 800000, 8);
  CHECK(r0 == word);
  CHECK(r1 == word + 42);
  CHECK(now == 0x1122334455667788ull);
  teardown();
}

/* UC: a message that lost a packet is dropped; the next one is delivered
 * into the same receive WQE. */
static void test_uc_loss(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.type = UROCE_QPT_UC;
  setup(&o, 3);
  ns.link[0][1].every_nth = 3; /* the LAST packet of message 1 */
  CHECK_EQ(tp_post_recv(&B, 10, 0, 8192), 0);
  CHECK_EQ(tp_post_recv(&B, 11, 8192, 8192), 0);
  CHECK_EQ(
      tp_post_send(&A, UROCE_WR_SEND, 1, 0, 3000, UROCE_SEND_SIGNALED, 0, 0),
      0);
  CHECK_EQ(
      tp_post_send(&A, UROCE_WR_SEND, 2, 4000, 100, UROCE_SEND_SIGNALED, 0, 0),
      0);
  ns_run_idle(&ns, 100000000);
  struct uroce_wc wc[4];
  CHECK_EQ(tp_poll(A.scq, wc, 4), 2); /* UC completes once sent */
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc[1].status, UROCE_WC_SUCCESS);
  CHECK_EQ(tp_poll(B.rcq, wc, 4), 1);
  CHECK_EQ(wc[0].wr_id, 10);
  CHECK_EQ(wc[0].byte_len, 100);
  CHECK(memcmp(B.mem, A.mem + 4000, 100) == 0);
  CHECK_EQ(ns.stats.lost, 1);
  teardown();
}

static void test_ud(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.type = UROCE_QPT_UD;
  setup(&o, 4);
  CHECK_EQ(tp_bring_up(&A, 0, &o), 0);
  CHECK_EQ(tp_bring_up(&B, 0, &o), 0);
  struct uroce_ah_attr aa = {.is_global = 1};
  memcpy(aa.dgid, ns.gid[1], 16);
  struct uroce_ah *ah;
  CHECK_EQ(uroce_eng_ah_new(A.pd, &aa, &ah), 0);
  CHECK_EQ(tp_post_recv(&B, 20, 0, 40 + 1000), 0);
  CHECK_EQ(tp_post_recv(&B, 21, 2000, 40 + 1000), 0);
  struct uroce_sge sge = {
      .addr = A.mr->iova + 64, .length = 1000, .lkey = A.mr->lkey};
  struct uroce_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = UROCE_WR_SEND_WITH_IMM;
  wr.imm_data = 0x01020304;
  wr.send_flags = UROCE_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = uroce_qp_num(B.qp);
  wr.wr.ud.remote_qkey = o.qkey;
  CHECK_EQ(uroce_eng_qp_post_send(A.qp, &wr, &bad), 0);
  wr.wr_id = 2;
  wr.wr.ud.remote_qkey = o.qkey + 1; /* wrong Q_Key: dropped */
  CHECK_EQ(uroce_eng_qp_post_send(A.qp, &wr, &bad), 0);
  ns_run_idle(&ns, 100000000);
  struct uroce_wc wc[4];
  CHECK_EQ(tp_poll(A.scq, wc, 4), 2);
  CHECK_EQ(tp_poll(B.rcq, wc, 4), 1);
  CHECK_EQ(wc[0].wr_id, 20);
  CHECK_EQ(wc[0].byte_len, 1040);
  CHECK_EQ(wc[0].wc_flags, UROCE_WC_GRH | UROCE_WC_WITH_IMM);
  CHECK_EQ(wc[0].imm_data, 0x01020304);
  CHECK_EQ(wc[0].src_qp, uroce_qp_num(A.qp));
  CHECK(memcmp(B.mem + 40, A.mem + 64, 1000) == 0);
  CHECK_EQ(B.mem[20], 0x45); /* IPv4 header in the GRH's last 20 bytes */
  CHECK(memcmp(B.mem + 32, ns.gid[0] + 12, 4) == 0);
  CHECK_EQ(uroce_eng_stats(ns.eng[1])->drops[UROCE_DROP_QKEY], 1);
  uroce_eng_ah_del(ah);
  teardown();
}

/* Go-back-N under every-Nth and burst loss, reordering, duplication. */
static void test_lossy_bulk(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_4096;
  setup(&o, 5);
  ns.link[0][1].every_nth = 7;
  ns.link[0][1].ge_good_bad = 0.02;
  ns.link[0][1].ge_bad_good = 0.3;
  ns.link[0][1].ge_bad_loss = 0.9;
  ns.link[1][0].loss = 0.1;
  ns.link[0][1].reorder = 0.1;
  ns.link[0][1].reorder_ns = 3000;
  ns.link[0][1].dup = 0.05;
  ns.link[1][0].dup = 0.05;
  for (int i = 0; i < 8; i++)
    CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, (uint64_t)i,
                          (uint64_t)i * 100000, 100000, UROCE_SEND_SIGNALED,
                          B.mr->iova + (uint64_t)i * 100000, B.mr->rkey),
             0);
  struct uroce_wc wc[8];
  CHECK_EQ(wait_cq(A.scq, wc, 8), 8);
  for (int i = 0; i < 8; i++)
    CHECK_EQ(wc[i].status, UROCE_WC_SUCCESS);
  CHECK(memcmp(B.mem, A.mem, 800000) == 0);
  CHECK(uroce_eng_stats(ns.eng[0])->go_backs > 0);
  teardown();
}

/* retx_pkts counts packets sent again, go_backs the times the sender
 * went back: every request packet is a first send or a resend. */
static void test_retx_counts(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_4096;
  setup(&o, 9);
  ns.link[0][1].every_nth = 7;
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 40960,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  struct uroce_wc wc[1];
  CHECK_EQ(wait_cq(A.scq, wc, 1), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  const struct uroce_eng_stats *st = uroce_eng_stats(ns.eng[0]);
  CHECK(st->go_backs > 0);
  CHECK(st->retx_pkts >= st->go_backs);
  CHECK_EQ(st->tx_pkts, 10 + st->retx_pkts);
  teardown();
}

/* WRITEs over a path that reorders heavily (and, in the last run, loses)
 * land byte-exact, a READ among them. The standard transport NAKs every
 * early packet and goes back N; multipath places them and resends only
 * what was lost. */
static void ooo_run(uint32_t flags, double loss, uint64_t *retx,
                    uint64_t *naks) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.flags = flags;
  CHECK_EQ(ns_init(&ns, 2, 21, &cfg), 0);
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_1024;
  CHECK_EQ(tp_end_init(&A, ns.eng[0], ns.gid[0], &o), 0);
  CHECK_EQ(tp_end_init(&B, ns.eng[1], ns.gid[1], &o), 0);
  CHECK_EQ(tp_connect(&A, &B, &o), 0);
  for (size_t i = 0; i < A.memlen; i++)
    A.mem[i] = (uint8_t)(i * 7 + 1);
  for (size_t i = 0; i < B.memlen; i++)
    B.mem[i] = (uint8_t)(i * 13 + 5);
  ns.link[0][1].reorder = 0.3;
  ns.link[0][1].reorder_ns = 20000;
  ns.link[0][1].loss = loss;
  for (int i = 0; i < 4; i++) {
    if (i == 2)
      CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_READ, 9, 600000, 100000,
                            UROCE_SEND_SIGNALED, B.mr->iova + 500000,
                            B.mr->rkey),
               0);
    CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, (uint64_t)i,
                          (uint64_t)i * 100000, 100000 - (uint64_t)i * 333,
                          UROCE_SEND_SIGNALED,
                          B.mr->iova + (uint64_t)i * 100000, B.mr->rkey),
             0);
  }
  struct uroce_wc wc[5];
  CHECK_EQ(wait_cq(A.scq, wc, 5), 5);
  for (int i = 0; i < 5; i++)
    CHECK_EQ(wc[i].status, UROCE_WC_SUCCESS);
  for (int i = 0; i < 4; i++)
    CHECK(memcmp(B.mem + i * 100000, A.mem + i * 100000, 100000 - i * 333) ==
          0);
  for (size_t i = 0; i < 100000; i++)
    if (A.mem[600000 + i] != (uint8_t)((500000 + i) * 13 + 5)) {
      CHECK(0);
      break;
    }
  CHECK_EQ(uroce_eng_qp_multipath(A.qp), !(flags & UROCE_ENG_STANDARD));
  *retx = uroce_eng_stats(ns.eng[0])->retx_pkts;
  *naks = uroce_eng_stats(ns.eng[1])->naks_tx;
  teardown();
}

/* Negotiation: two engines in the default mode use multipath after their
 * first exchange; against one forced standard, the other falls back and
 * the standard one never sees a multipath opcode. The announcement bit
 * is on the auto side's packets only until it hears from its peer. */
static void nego_run(uint32_t fa, uint32_t fb, bool want_mp, uint64_t *bits_b,
                     uint64_t *mp_ops, uint64_t *bits_after) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.flags = fa;
  CHECK_EQ(ns_init(&ns, 2, 31, &cfg), 0);
  cfg.flags = fb;
  CHECK_EQ(ns_eng_remake(&ns, 1, &cfg), 0);
  struct tp_opts o;
  tp_opts_default(&o);
  CHECK_EQ(tp_end_init(&A, ns.eng[0], ns.gid[0], &o), 0);
  CHECK_EQ(tp_end_init(&B, ns.eng[1], ns.gid[1], &o), 0);
  CHECK_EQ(tp_connect(&A, &B, &o), 0);
  for (size_t i = 0; i < A.memlen; i++)
    A.mem[i] = (uint8_t)(i * 7 + 1);
  ns.link[0][1].loss = 0.02;
  ns.tap = true;
  CHECK_EQ(tp_post_recv(&B, 1, 0, 100000), 0);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_SEND, 2, 0, 100000, UROCE_SEND_SIGNALED,
                        0, 0),
           0);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_READ, 3, 200000, 50000,
                        UROCE_SEND_SIGNALED, B.mr->iova + 300000, B.mr->rkey),
           0);
  struct uroce_wc wc[2];
  CHECK_EQ(wait_cq(A.scq, wc, 2), 2);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc[1].status, UROCE_WC_SUCCESS);
  CHECK(memcmp(B.mem, A.mem, 100000) == 0);
  CHECK(memcmp(A.mem + 200000, B.mem + 300000, 50000) == 0);
  CHECK_EQ(uroce_eng_qp_multipath(A.qp), want_mp);
  CHECK_EQ(uroce_eng_qp_multipath(B.qp), want_mp);
  *bits_b = ns.tap_mp_bit[1];
  *mp_ops = ns.tap_mp_op[0] + ns.tap_mp_op[1];
  *bits_after = ns.tap_mp_bit_late[0];
  teardown();
}

static void test_negotiation(void) {
  uint64_t bits_b, ops, late;
  nego_run(0, 0, true, &bits_b, &ops, &late);
  CHECK(bits_b > 0 && ops > 0);
  /* A standard peer: no bit and no multipath opcode from it, none to it
   * either, and the auto end stops announcing once it heard the peer. */
  nego_run(0, UROCE_ENG_STANDARD, false, &bits_b, &ops, &late);
  CHECK_EQ(bits_b, 0);
  CHECK_EQ(ops, 0);
  CHECK_EQ(late, 0);
  /* The auto end answers a standard requester: it learnt before sending
   * anything, so it never announces at all. */
  nego_run(UROCE_ENG_STANDARD, 0, false, &bits_b, &ops, &late);
  CHECK_EQ(bits_b, 0);
  CHECK_EQ(ops, 0);
}

/* Each engine's heap bytes, through the allocator hooks; an engine whose
 * fail flag is set gets nothing. */
struct heap_acct {
  int64_t bytes;
  bool fail;
};
static void *acct_alloc(void *ctx, size_t n) {
  struct heap_acct *h = ctx;
  if (h->fail)
    return 0;
  size_t *p = malloc(n + sizeof(size_t));
  if (!p)
    return 0;
  *p = n;
  h->bytes += (int64_t)n;
  return p + 1;
}
static void acct_free(void *ctx, void *q) {
  struct heap_acct *h = ctx;
  if (!q)
    return;
  size_t *p = (size_t *)q - 1;
  h->bytes -= (int64_t)*p;
  free(p);
}

/* A multipath QP holds the requester's rings (a state byte and two
 * timestamps per PSN of four windows: 17 KB at the default window of 256)
 * only once it posts, and the responder's only once a request reaches it:
 * a QP that only answers, or only asks, does not carry the other side's.
 * Without memory for its rings a post fails and nothing is queued; a
 * request that finds none is dropped ("no-memory") and resent. */
static void test_mp_state_on_first_use(void) {
  struct heap_acct ha = {0}, hb = {0};
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.flags = UROCE_ENG_MULTIPATH;
  cfg.alloc = acct_alloc;
  cfg.free = acct_free;
  cfg.alloc_ctx = &ha;
  struct tp_opts o;
  tp_opts_default(&o);
  o.memlen = 256 << 10;
  CHECK_EQ(ns_init(&ns, 2, 61, &cfg), 0);
  ns.eng[1]->cfg.alloc_ctx = &hb; /* before anything of B's is made */
  CHECK_EQ(tp_end_init(&A, ns.eng[0], ns.gid[0], &o), 0);
  CHECK_EQ(tp_end_init(&B, ns.eng[1], ns.gid[1], &o), 0);
  CHECK_EQ(tp_connect(&A, &B, &o), 0);
  for (size_t i = 0; i < A.memlen; i++)
    A.mem[i] = (uint8_t)(i * 7 + 1);
  CHECK(uroce_eng_qp_multipath(A.qp) && uroce_eng_qp_multipath(B.qp));
  const int64_t ring = 1024 * 17; /* 4 x 256 PSNs: st, ts, sent */
  int64_t a0 = ha.bytes, b0 = hb.bytes;
  /* No memory for A's rings: the post fails, and queues nothing. */
  ha.fail = true;
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 64 << 10,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           -12);
  ha.fail = false;
  CHECK_EQ(ha.bytes, a0);
  CHECK(!ns_step(&ns)); /* nothing to send */
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 2, 0, 64 << 10,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  CHECK_EQ(ha.bytes - a0, ring);
  CHECK_EQ(hb.bytes, b0);
  /* No memory at B when the first requests arrive: they are dropped and
   * counted, then resent once it has memory again. */
  hb.fail = true;
  while (uroce_eng_stats(ns.eng[1])->drops[UROCE_DROP_NO_MEM] < 3 &&
         ns_step(&ns))
    ;
  CHECK(uroce_eng_stats(ns.eng[1])->drops[UROCE_DROP_NO_MEM] >= 3);
  CHECK_EQ(hb.bytes, b0);
  CHECK(!strcmp(uroce_eng_drop_name(UROCE_DROP_NO_MEM), "no-memory"));
  hb.fail = false;
  struct uroce_wc wc[2];
  CHECK_EQ(wait_cq(A.scq, wc, 1), 1);
  CHECK_EQ(wc[0].wr_id, 2);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK(memcmp(B.mem, A.mem, 64 << 10) == 0);
  CHECK_EQ(wait_cq(A.scq, wc, 2), 0); /* one completion, the failed post none */
  /* B answered without the requester's rings: its growth is the
   * responder's ring and READ runs, well under the requester's. */
  CHECK(hb.bytes > b0);
  CHECK(hb.bytes - b0 < ring / 2);
  teardown();
}

/* A WRITE of 256 packets over a 5 us link: the time it takes, from post
 * to completion, on a QP whose first WRITE (standard opcodes: the peer
 * was not known yet) met a silent peer and timed out before the peer's
 * first answer turned it multipath. */
static uint64_t after_timeout_run(bool blackout, uint64_t *timeouts) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg)); /* auto: multipath once both speak it */
  struct tp_opts o;
  tp_opts_default(&o);
  setup_cfg(&cfg, &o, 43);
  ns.link[0][1].delay_ns = ns.link[1][0].delay_ns = 5000;
  ns.silent[1] = blackout;
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 20000,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  while (ns.now < 6000000 && ns_step(&ns)) /* past one 4.2 ms timeout */
    ;
  ns.silent[1] = false;
  struct uroce_wc wc;
  CHECK_EQ(wait_cq(A.scq, &wc, 1), 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  CHECK(uroce_eng_qp_multipath(A.qp));
  *timeouts = uroce_eng_stats(ns.eng[0])->timeouts;
  uint64_t t0 = ns.now;
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 2, 0, 256 << 10,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  CHECK_EQ(wait_cq(A.scq, &wc, 1), 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  uint64_t took = ns.now - t0;
  CHECK(memcmp(B.mem, A.mem, 256 << 10) == 0);
  teardown();
  return took;
}

/* The standard transport's recovery after a timeout (one packet out until
 * something is acknowledged) ends when the QP turns multipath: the next
 * WRITE goes out at full speed, not one packet per round trip (which it
 * did: every later WRITE of a loopback QP whose first burst overflowed a
 * socket took 256 round trips for 256 packets). */
static void test_timeout_then_multipath(void) {
  uint64_t to_clean, to_black;
  uint64_t clean = after_timeout_run(false, &to_clean);
  uint64_t black = after_timeout_run(true, &to_black);
  CHECK_EQ(to_clean, 0);
  CHECK(to_black >= 1);
  printf("256-packet WRITE after a clean start %llu us, after a timeout "
         "%llu us\n",
         (unsigned long long)clean / 1000, (unsigned long long)black / 1000);
  CHECK(black < 2 * clean);
}

/* A ping-pong of SENDs with the answer 100 us after each ping (the
 * responder "thinks"): no QP keeps a retransmission timer once everything
 * it sent is answered, and no timer fires. The completer used to count a
 * WQE it had just completed (not yet taken off the send queue) as still
 * outstanding, so every ACK re-armed the timer; the next ping, posted
 * more than a probe timeout later, met that old timer: 11% of 64 B round
 * trips between two uroce processes on an idle loopback were sent twice. */
static void pingpong_case(uint32_t flags) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.flags = flags;
  struct tp_opts o;
  tp_opts_default(&o);
  setup_cfg(&cfg, &o, 47);
  ns.link[0][1].delay_ns = ns.link[1][0].delay_ns = 5000;
  struct uroce_wc wc;
  for (int i = 0; i < 50; i++) {
    struct tp_end *from = i % 2 ? &B : &A, *to = i % 2 ? &A : &B;
    CHECK_EQ(tp_post_recv(to, (uint64_t)i, 0, 64), 0);
    CHECK_EQ(tp_post_send(from, UROCE_WR_SEND, (uint64_t)i, 0, 64,
                          UROCE_SEND_SIGNALED, 0, 0),
             0);
    CHECK_EQ(wait_cq(to->rcq, &wc, 1), 1);
    CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
    CHECK_EQ(wait_cq(from->scq, &wc, 1), 1);
    CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
    CHECK_EQ(from->qp->req.rto_deadline, UINT64_MAX);
    ns.now += 100000; /* the other side thinks */
  }
  CHECK_EQ(uroce_eng_qp_multipath(A.qp), !(flags & UROCE_ENG_STANDARD));
  CHECK_EQ(uroce_eng_stats(ns.eng[0])->timeouts, 0);
  CHECK_EQ(uroce_eng_stats(ns.eng[1])->timeouts, 0);
  CHECK_EQ(uroce_eng_stats(ns.eng[0])->retx_pkts, 0);
  CHECK_EQ(uroce_eng_stats(ns.eng[1])->retx_pkts, 0);
  teardown();
}

static void test_pingpong_no_stray_timer(void) {
  pingpong_case(0);
  pingpong_case(UROCE_ENG_STANDARD);
}

/* One path, no reordering, 2% loss both ways (data and ACKs): a stream of
 * WRITEs lands; nothing the requester learns makes it think the path
 * reorders, and a resend of a gap is never of a packet still on its way.
 * (A resend used to carry its due-back time as its send time, so that its
 * delivery marked as gaps every packet sent after it and still in flight;
 * a probe's copy of a PSN once resent for a gap, D-SACKed, passed for a
 * gap resend the first copy had made spurious. Either taught the QP that
 * the path reorders and grew its reorder window to milliseconds: a 2%
 * lossy loopback's ib_write_bw ran at 0.24x its lossless rate.) */
static void test_fifo_loss_no_reordering(void) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_4096;
  o.memlen = 4 << 20;
  setup_cfg(&cfg, &o, 47);
  ns.link[0][1].delay_ns = ns.link[1][0].delay_ns = 5000;
  ns.link[0][1].gbps = ns.link[1][0].gbps = 25;
  ns.link[0][1].loss = ns.link[1][0].loss = 0.02;
  enum { N = 64, LEN = 64 << 10 };
  for (int i = 0; i < N; i++)
    CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, (uint64_t)i,
                          (uint64_t)i * LEN, LEN, UROCE_SEND_SIGNALED,
                          B.mr->iova + (uint64_t)i * LEN, B.mr->rkey),
             0);
  static struct uroce_wc wc[N];
  CHECK_EQ(wait_cq(A.scq, wc, N), N);
  for (int i = 0; i < N; i++)
    CHECK_EQ(wc[i].status, UROCE_WC_SUCCESS);
  CHECK(memcmp(B.mem, A.mem, (size_t)N * LEN) == 0);
  const struct uroce_eng_stats *st = uroce_eng_stats(ns.eng[0]);
  printf("FIFO, 2%% loss both ways: %llu lost, %llu gap resends, %llu "
         "spurious, %llu probes, reordered %d\n",
         (unsigned long long)ns.stats.lost,
         (unsigned long long)st->mp_retx_pkts,
         (unsigned long long)st->mp_spurious,
         (unsigned long long)st->mp_probes, A.qp->mp.reordered);
  CHECK(ns.stats.lost > 0);
  CHECK(uroce_eng_qp_multipath(A.qp));
  CHECK(!A.qp->mp.reordered);
  CHECK_EQ(st->mp_spurious, 0);
  teardown();
}

/* Multipath's window bounds what is in flight, not the span from the
 * oldest hole: over a 1 ms path (a window-limited QP) with 1% loss, the
 * requester sends past a hole up to four windows on while it repairs it,
 * never with more than a window unacknowledged (neither acknowledged nor
 * selectively); the data lands. */
static void test_window_is_in_flight(void) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_4096;
  o.memlen = 16 << 20;
  o.timeout = 14;
  setup_cfg(&cfg, &o, 53);
  ns.link[0][1].delay_ns = ns.link[1][0].delay_ns = 500000;
  ns.link[0][1].loss = 0.01;
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 16 << 20,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  uint32_t window = ns.eng[0]->cfg.max_unacked_psn, span = 0, pipe = 0;
  struct uroce_wc wc;
  int got = 0;
  bool more = true;
  while (!got && more && ns.now < 10000000000ull) {
    more = ns_step(&ns); /* false once the last event ran */
    got = tp_poll(A.scq, &wc, 1);
    if (!uroce_eng_qp_multipath(A.qp))
      continue;
    uint32_t s = (uint32_t)uroce_psn_diff(A.qp->req.max_psn, A.qp->comp.psn);
    if (s > span)
      span = s;
    if (s - A.qp->mp.sacked > pipe)
      pipe = s - A.qp->mp.sacked;
  }
  CHECK_EQ(got, 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  CHECK(memcmp(B.mem, A.mem, 16 << 20) == 0);
  printf("window %u PSNs, 1%% loss: span from the oldest hole up to %u, in "
         "flight up to %u\n",
         window, span, pipe);
  CHECK(span > window);
  CHECK(span <= 4 * window);
  CHECK(pipe <= window);
  teardown();
}

/* tx_burst: two QPs of one engine, each with a 32-packet WRITE, take
 * turns of tx_burst packets; with the default, of one packet each. */
static void burst_order(uint32_t burst, uint32_t *runs) {
  struct uroce_eng_cfg cfg = {.flags = eng_flags, .tx_burst = burst};
  struct tp_opts o;
  tp_opts_default(&o);
  setup_cfg(&cfg, &o, 21);
  struct tp_end C, D;
  CHECK_EQ(tp_end_init(&C, ns.eng[0], ns.gid[0], &o), 0);
  CHECK_EQ(tp_end_init(&D, ns.eng[1], ns.gid[1], &o), 0);
  CHECK_EQ(tp_connect(&C, &D, &o), 0);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 32 * 1024, 0, B.mr->iova,
                        B.mr->rkey),
           0);
  CHECK_EQ(tp_post_send(&C, UROCE_WR_RDMA_WRITE, 2, 0, 32 * 1024, 0, D.mr->iova,
                        D.mr->rkey),
           0);
  struct uroce_tx_pkt tx;
  uint32_t last = 0, run = 0, n = 0;
  *runs = 0;
  while (n < 64 && uroce_eng_write_pkt(ns.eng[0], &tx, ns.now) == 1) {
    if (tx.qpn != last && run) {
      CHECK_EQ(run, burst ? burst : 1); /* full turns while both have data */
      (*runs)++;
      run = 0;
    }
    last = tx.qpn;
    run++;
    n++;
  }
  CHECK_EQ(n, 64);
  (*runs)++;
  tp_end_free(&C);
  tp_end_free(&D);
  teardown();
}

static void test_tx_burst(void) {
  uint32_t runs;
  burst_order(0, &runs); /* default: one packet a turn */
  CHECK_EQ(runs, 64);
  burst_order(4, &runs);
  CHECK_EQ(runs, 16);
  burst_order(16, &runs);
  CHECK_EQ(runs, 4);
}

/* 64 QPs of engine 0 each post msgs WRITEs of len bytes to engine 1 at
 * once, over links of delay_ns, and run to the end; the peak of what they
 * had in flight and reserved together, and the writes completed. The
 * data is checked and the QPs freed. */
enum { BOUND_NQP = 64 };
static int bound_run(const struct uroce_eng_cfg *cfg, uint64_t delay_ns,
                     uint32_t len, int msgs, uint64_t *peak) {
  static struct tp_end a[BOUND_NQP], b[BOUND_NQP];
  CHECK_EQ(ns_init(&ns, 2, 41, cfg), 0);
  ns.link[0][1].delay_ns = ns.link[1][0].delay_ns = delay_ns;
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_4096;
  o.memlen = len;
  for (int i = 0; i < BOUND_NQP; i++) {
    CHECK_EQ(tp_end_init(&a[i], ns.eng[0], ns.gid[0], &o), 0);
    CHECK_EQ(tp_end_init(&b[i], ns.eng[1], ns.gid[1], &o), 0);
    CHECK_EQ(tp_connect(&a[i], &b[i], &o), 0);
    memset(a[i].mem, i + 1, len);
    for (int m = 0; m < msgs; m++)
      CHECK_EQ(tp_post_send(&a[i], UROCE_WR_RDMA_WRITE, (uint64_t)m, 0, len,
                            UROCE_SEND_SIGNALED, b[i].mr->iova,
                            b[i].mr->rkey),
               0);
  }
  *peak = 0;
  int done = 0;
  struct uroce_wc wc;
  bool more = true;
  while (done < BOUND_NQP * msgs && more && ns.now < 1000000000ull) {
    more = ns_step(&ns); /* false once the last event ran */
    uint64_t used = ns.eng[0]->inflight + ns.eng[0]->reserved;
    if (used > *peak)
      *peak = used;
    for (int i = 0; i < BOUND_NQP; i++)
      done += tp_poll(a[i].scq, &wc, 1);
  }
  CHECK_EQ(ns.eng[0]->inflight, 0);
  CHECK_EQ(ns.eng[0]->reserved, 0);
  for (int i = 0; i < BOUND_NQP; i++) {
    CHECK(b[i].mem[0] == i + 1 && b[i].mem[len - 1] == i + 1);
    tp_end_free(&a[i]);
    tp_end_free(&b[i]);
  }
  return done;
}

/* The device's in-flight bound: 64 QPs of one engine each write 256 KiB
 * at once into a 1.2 MB bandwidth-delay product; what they have
 * unacknowledged together stays within the bound (turns are granted out
 * of it), every QP completes, and the data lands. */
static void test_inflight_bound(void) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.max_inflight = 256 << 10;
  uint64_t peak;
  CHECK_EQ(bound_run(&cfg, 50000, 256 << 10, 1, &peak), BOUND_NQP);
  CHECK(peak <= cfg.max_inflight);
  CHECK(uroce_eng_stats(ns.eng[0])->inflight_waits > 0);
  printf("in-flight bound 256 KiB, 64 QPs: peak %llu KiB, %llu waits\n",
         (unsigned long long)peak >> 10,
         (unsigned long long)uroce_eng_stats(ns.eng[0])->inflight_waits);
  ns_free(&ns);
}

/* Turns: 64 QPs of an engine that sends in bursts of 16 packets each
 * write 4 x 64 KiB (16 packets each) through a 256 KiB bound. A QP woken
 * by room gets a turn of a burst, so the responder acknowledges a few
 * times a message (768 ACKs for the 4,096 packets); before turns, a QP
 * with nothing in flight went past the bound one packet at a time and
 * was acknowledged nearly packet by packet (3,077 ACKs, and 496 KiB in
 * flight). The bound holds, and every write completes. */
static void test_inflight_turns(void) {
  enum { MSGS = 4 };
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.max_inflight = 256 << 10;
  cfg.tx_burst = 16;
  uint64_t peak;
  CHECK_EQ(bound_run(&cfg, 20000, 64 << 10, MSGS, &peak), BOUND_NQP * MSGS);
  CHECK(peak <= cfg.max_inflight);
  const struct uroce_eng_stats *st = uroce_eng_stats(ns.eng[1]);
  uint64_t acks = st->acks_tx + st->sacks_tx;
  CHECK(acks <= (uint64_t)BOUND_NQP * MSGS * 4);
  CHECK(uroce_eng_stats(ns.eng[0])->inflight_waits > 0);
  printf("turns of 16 packets, 64 QPs x 4 x 64 KiB, 256 KiB bound: peak "
         "%llu KiB, %llu ACKs for %d packets\n",
         (unsigned long long)peak >> 10, (unsigned long long)acks,
         BOUND_NQP * MSGS * 16);
  ns_free(&ns);
}


/* The resends and congestion-control decisions of engine 0, for
 * test_trimmed_packet. */
static struct {
  uint32_t n, psn[8];
  uint8_t cause[8];
  uint32_t cc_trim;
  uint64_t cwnd;
} trim_tr;

static void trim_trace(void *ctx, const struct uroce_trace_ev *ev) {
  (void)ctx;
  if (ev->kind == UROCE_TR_RESEND && trim_tr.n < 8) {
    trim_tr.psn[trim_tr.n] = ev->psn;
    trim_tr.cause[trim_tr.n++] = ev->a;
  } else if (ev->kind == UROCE_TR_CC && ev->a == UROCE_TRC_TRIM) {
    trim_tr.cc_trim++;
    trim_tr.cwnd = ev->cwnd;
  }
}

/* One packet of a 64 KiB WRITE arrives trimmed (a UET switch's full queue
 * cut its payload off). Multipath: the responder NACKs that PSN in its
 * next selective ACK and the requester resends exactly it, at once (one
 * resend, cause "trim": no gap timer, probe or timeout), and Swift takes
 * it as congestion (one cut, as for a CNP); the data is byte-exact. Standard
 * mode: a loss like any other, one PSN sequence NAK and one go-back-N. */
/* Multipath engines with Swift, the nth packet one way trimmed (back:
 * B to A, READ responses), a 64 KiB op posted at A and completed,
 * the data byte-exact; engine 0's resends traced. */
static void trim_run(const struct tp_opts *o, uint64_t seed, int back,
                     uint32_t nth, uint32_t opcode) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.flags = UROCE_ENG_MULTIPATH;
  cfg.cc = &uroce_cc_swift;
  setup_cfg(&cfg, o, seed);
  ns.link[back][!back].trim_nth = nth;
  ns.link[0][1].delay_ns = ns.link[1][0].delay_ns = 5000;
  memset(&trim_tr, 0, sizeof(trim_tr));
  uroce_eng_set_trace(ns.eng[0], trim_trace, 0);
  CHECK_EQ(tp_post_send(&A, opcode, 1, 0, 64 << 10, UROCE_SEND_SIGNALED,
                        B.mr->iova, B.mr->rkey),
           0);
  struct uroce_wc wc;
  CHECK_EQ(wait_cq(A.scq, &wc, 1), 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  CHECK(memcmp(B.mem, A.mem, 64 << 10) == 0);
  CHECK_EQ(ns.stats.trimmed, 1);
  /* Exactly the trimmed PSN went again, once, for its trim. */
  CHECK_EQ(trim_tr.n, 1);
  CHECK_EQ(trim_tr.psn[0], ns.link[back][!back].trimmed_psn);
  CHECK_EQ(trim_tr.cause[0], UROCE_TRC_TRIM);
  const struct uroce_eng_stats *sa = uroce_eng_stats(ns.eng[0]);
  CHECK_EQ(sa->mp_trim_naks, 1);
  CHECK_EQ(sa->mp_probes + sa->timeouts + sa->go_backs, 0);
}

static void test_trimmed_packet(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  /* The very first packet: the responder has no multipath state yet. */
  trim_run(&o, 31, 0, 1, UROCE_WR_RDMA_WRITE);
  const struct uroce_eng_stats *sa = uroce_eng_stats(ns.eng[0]),
                               *sb = uroce_eng_stats(ns.eng[1]);
  CHECK_EQ(sb->trims_rx, 1);
  CHECK_EQ(sb->drops[UROCE_DROP_TRIMMED], 1);
  CHECK(!strcmp(uroce_eng_drop_name(UROCE_DROP_TRIMMED), "trimmed"));
  CHECK_EQ(sa->mp_retx_pkts, 1);
  CHECK_EQ(trim_tr.cc_trim, 1);
  CHECK_EQ(trim_tr.cwnd, (uint64_t)(uroce_swift_defaults.init_cwnd *
                                    (1 - uroce_swift_defaults.ecn_beta)));
  teardown();

  /* A READ response trimmed on its way back: asked for again at once. */
  trim_run(&o, 32, 1, 7, UROCE_WR_RDMA_READ);
  CHECK_EQ(uroce_eng_stats(ns.eng[0])->trims_rx, 1);
  teardown();

  /* Standard mode: a loss like any other, NAKed by the next packet. */
  struct uroce_wc wc;
  uint32_t flags = eng_flags;
  eng_flags = UROCE_ENG_STANDARD;
  setup(&o, 31);
  eng_flags = flags;
  ns.link[0][1].trim_nth = 5;
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 64 << 10,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  CHECK_EQ(wait_cq(A.scq, &wc, 1), 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  CHECK(memcmp(B.mem, A.mem, 64 << 10) == 0);
  sa = uroce_eng_stats(ns.eng[0]);
  sb = uroce_eng_stats(ns.eng[1]);
  CHECK_EQ(sb->trims_rx, 1);
  CHECK_EQ(sb->naks_tx, 1);
  CHECK_EQ(sa->go_backs, 1);
  CHECK_EQ(sa->timeouts, 0);
  teardown();
}

/* The delay/ECN window: found by name; over target the window shrinks in
 * proportion to the excess, at most once per RTT; under it, it grows by
 * ai per window acknowledged; a CNP cuts it by ecn_beta. Through the
 * engine: a QP over a path whose RTT (100 us) is four times the target
 * keeps fewer bytes in flight than the window without it, and its WRITE
 * lands. */
static void test_cc_swift(void) {
  const struct uroce_cc_ops *cc = uroce_cc_find("swift");
  CHECK(cc == &uroce_cc_swift);
  CHECK(uroce_cc_find("dcqcn") && uroce_cc_find("none") && !uroce_cc_find("x"));
  uint64_t st[64] = {0};
  CHECK(cc->state_size <= sizeof(st));
  cc->init(st, 0);
  uint64_t w0 = cc->cwnd(st);
  CHECK_EQ(w0, uroce_swift_defaults.init_cwnd);
  cc->on_rtt(st, 1000, 50000); /* twice the target: 1 - 0.8 x 0.5 = 0.6 */
  CHECK_EQ(cc->cwnd(st), w0 * 6 / 10);
  cc->on_rtt(st, 2000, 50000); /* within one RTT of that cut: none */
  CHECK_EQ(cc->cwnd(st), w0 * 6 / 10);
  cc->on_rtt(st, 60000, 10000); /* under target: grows with acks */
  uint64_t w1 = cc->cwnd(st);
  cc->on_ack(st, 60000, w1);
  CHECK_EQ(cc->cwnd(st), w1 + uroce_swift_defaults.ai);
  cc->on_cnp_rx(st, 80000);
  CHECK(cc->cwnd(st) < w1);

  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.cc = &uroce_cc_swift;
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_4096;
  setup_cfg(&cfg, &o, 51);
  ns.link[0][1].delay_ns = ns.link[1][0].delay_ns = 50000;
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 1 << 20,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  uint64_t peak = 0;
  struct uroce_wc wc;
  int got = 0;
  bool more = true;
  while (!got && more && ns.now < 100000000ull) {
    more = ns_step(&ns); /* false once the last event ran */
    uint64_t f = (uint64_t)uroce_psn_diff(A.qp->req.max_psn, A.qp->comp.psn) *
                 4096;
    peak = f > peak ? f : peak;
    got = tp_poll(A.scq, &wc, 1);
  }
  CHECK_EQ(got, 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  CHECK(memcmp(A.mem, B.mem, 1 << 20) == 0);
  printf("swift, 100 us RTT: peak %llu KiB in flight, window %llu KiB "
         "(without: 256 PSNs, 1024 KiB)\n",
         (unsigned long long)peak >> 10,
         (unsigned long long)uroce_cc_swift_cwnd(uroce_eng_qp_cc_state(A.qp)) >>
             10);
  CHECK(peak <= uroce_swift_defaults.init_cwnd + 4096);
  teardown();
}

static void test_reorder(void) {
  uint64_t r0, n0, r1, n1, r2, n2;
  ooo_run(UROCE_ENG_STANDARD, 0, &r0, &n0);
  ooo_run(0, 0, &r1, &n1);
  ooo_run(0, 0.02, &r2, &n2);
  printf("reordering: standard %llu packets resent (%llu NAKs), multipath "
         "%llu (%llu); with 2%% loss %llu (%llu)\n",
         (unsigned long long)r0, (unsigned long long)n0, (unsigned long long)r1,
         (unsigned long long)n1, (unsigned long long)r2,
         (unsigned long long)n2);
  CHECK(n1 == 0 && n2 == 0);
  CHECK(r1 * 10 < r0);
  CHECK(r2 > 0);
}

/* n READs of size bytes each from B into A, posted at once: all complete
 * in order, successfully, byte-exact, and nothing more completes. Returns
 * when the last one completed (ns). */
static uint64_t reads_whole(int n, uint32_t size) {
  for (int i = 0; i < n; i++)
    CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_READ, (uint64_t)i,
                          (uint64_t)i * size, size, UROCE_SEND_SIGNALED,
                          B.mr->iova + (uint64_t)i * size, B.mr->rkey),
             0);
  struct uroce_wc wc[64];
  CHECK(n <= 64);
  CHECK_EQ(wait_cq(A.scq, wc, n), n);
  for (int i = 0; i < n; i++) {
    CHECK_EQ(wc[i].wr_id, (uint64_t)i);
    CHECK_EQ(wc[i].status, UROCE_WC_SUCCESS);
  }
  CHECK(memcmp(A.mem, B.mem, (size_t)n * size) == 0);
  uint64_t t = ns.now;
  ns_run_idle(&ns, ns.now + 100000000);
  CHECK_EQ(tp_poll(A.scq, wc, 1), 0);
  return t;
}

/* READ responses lost at random: each loss costs one re-request (two when
 * the re-request's own first response is lost), not one per response
 * still in flight behind it (every one of those is evidence of the same
 * gap). Data byte-exact, one completion per READ. */
static void test_read_loss(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_1024;
  setup(&o, 8);
  ns.link[1][0].loss = 0.02;
  ns.link[0][1].delay_ns = 5000;
  for (size_t i = 0; i < B.memlen; i++)
    B.mem[i] = (uint8_t)(i * 29 + 3);
  reads_whole(4, 200000);
  uint64_t lost = ns.stats.lost;
  uint64_t retx = uroce_eng_stats(ns.eng[0])->go_backs;
  printf("READ with 2%% response loss: %llu lost, %llu restarts, %llu "
         "packets sent\n",
         (unsigned long long)lost, (unsigned long long)retx,
         (unsigned long long)ns.stats.sent);
  CHECK(lost > 0);
  CHECK(retx > 0);
  CHECK(retx <= 2 * lost + 2);
  teardown();
}

/* Multipath READ requests lost on their way: the responder stands at the
 * lost one and holds the READs after it, so no response shows the hole;
 * its selective ACK does (base at the lost request, later ones reported),
 * and the requester asks again after the reorder window instead of after
 * a probe timeout each. Every 5th request of 40 lost: at most the last
 * one needs a probe; data byte-exact, one completion per READ. */
static void test_read_request_loss(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_1024;
  uint32_t flags = eng_flags;
  eng_flags = UROCE_ENG_MULTIPATH;
  setup(&o, 12);
  eng_flags = flags;
  ns.link[0][1].every_nth = 5;
  ns.link[0][1].delay_ns = ns.link[1][0].delay_ns = 5000;
  uint64_t t = reads_whole(40, 8192);
  const struct uroce_eng_stats *st = uroce_eng_stats(ns.eng[0]);
  printf("multipath READ, every 5th request lost: %llu lost, %llu probe "
         "timeouts, %llu packets resent, done at %.0f us\n",
         (unsigned long long)ns.stats.lost,
         (unsigned long long)st->mp_probes,
         (unsigned long long)st->mp_retx_pkts, (double)t / 1000);
  CHECK(ns.stats.lost >= 8);
  CHECK(st->mp_probes <= 1);
  teardown();
}

/* Atomic acks lost: the requester retries, the responder answers from its
 * saved result and never adds twice. */
static void test_atomic_once(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  setup(&o, 6);
  ns.link[1][0].loss = 0.5;
  memset(B.mem, 0, 8);
  struct uroce_sge sge = {.lkey = A.mr->lkey, .length = 8};
  struct uroce_send_wr wr, *bad;
  for (int i = 0; i < 20; i++) {
    memset(&wr, 0, sizeof(wr));
    sge.addr = A.mr->iova + 8 * (uint64_t)i;
    wr.wr_id = (uint64_t)i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = UROCE_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = UROCE_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = B.mr->iova;
    wr.wr.atomic.rkey = B.mr->rkey;
    wr.wr.atomic.compare_add = 1;
    CHECK_EQ(uroce_eng_qp_post_send(A.qp, &wr, &bad), 0);
  }
  struct uroce_wc wc[20];
  CHECK_EQ(wait_cq(A.scq, wc, 20), 20);
  uint64_t v;
  memcpy(&v, B.mem, 8);
  CHECK_EQ(v, 20);
  for (int i = 0; i < 20; i++) {
    memcpy(&v, A.mem + 8 * i, 8);
    CHECK_EQ(v, i); /* fetch results in order */
  }
  CHECK(uroce_eng_stats(ns.eng[0])->go_backs > 0);
  teardown();
}

static void test_sge_inline_inv_zero(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  setup(&o, 7);
  /* 16 SGEs each side, inline data, a zero-length send, invalidate. */
  struct uroce_sge s[16], r[16];
  for (int i = 0; i < 16; i++) {
    s[i] = (struct uroce_sge){A.mr->iova + 1000 * (uint64_t)i, 100 + i,
                              A.mr->lkey};
    r[i] = (struct uroce_sge){B.mr->iova + 50000 + 200 * (uint64_t)i, 150,
                              B.mr->lkey};
  }
  struct uroce_recv_wr rw = {.wr_id = 1, .sg_list = r, .num_sge = 16}, *rbad;
  CHECK_EQ(uroce_eng_qp_post_recv(B.qp, &rw, &rbad), 0);
  rw.wr_id = 2;
  rw.num_sge = 0;
  CHECK_EQ(uroce_eng_qp_post_recv(B.qp, &rw, &rbad), 0);
  rw.wr_id = 3;
  rw.num_sge = 1;
  CHECK_EQ(uroce_eng_qp_post_recv(B.qp, &rw, &rbad), 0);
  struct uroce_mw *victim;
  CHECK_EQ(uroce_eng_mw_alloc(B.pd, UROCE_MW_TYPE_2, &victim), 0);
  CHECK_EQ(bind_mw(&B, victim, 0, 64, UROCE_ACCESS_REMOTE_WRITE), 0);
  struct uroce_send_wr w[3], *bad;
  memset(w, 0, sizeof(w));
  w[0].sg_list = s;
  w[0].num_sge = 16;
  w[0].opcode = UROCE_WR_SEND;
  w[0].send_flags = UROCE_SEND_SIGNALED | UROCE_SEND_INLINE;
  w[0].next = &w[1];
  w[1].wr_id = 1;
  w[1].opcode = UROCE_WR_SEND; /* zero length, unsignaled */
  w[1].next = &w[2];
  w[2].wr_id = 2;
  w[2].sg_list = s;
  w[2].num_sge = 1;
  w[2].opcode = UROCE_WR_SEND_WITH_INV;
  w[2].invalidate_rkey = uroce_mw_rkey(victim);
  w[2].send_flags = UROCE_SEND_SIGNALED;
  o.max_inline = 256;
  /* 16 SGEs of 100..115 bytes = 1720 bytes: too long for inline. */
  CHECK_EQ(uroce_eng_qp_post_send(A.qp, w, &bad), UROCE_ERR_INVALID_ARGUMENT);
  CHECK(bad == &w[0]);
  w[0].send_flags = UROCE_SEND_SIGNALED;
  CHECK_EQ(uroce_eng_qp_post_send(A.qp, w, &bad), 0);
  uint8_t saved[1720];
  for (int i = 0, off = 0; i < 16; i++) {
    memcpy(saved + off, A.mem + 1000 * i, 100 + i);
    off += 100 + i;
  }
  struct uroce_wc wc[4];
  CHECK_EQ(wait_cq(A.scq, wc, 2), 2);
  CHECK_EQ(wait_cq(B.rcq, wc, 3), 3);
  CHECK_EQ(wc[0].byte_len, 1720);
  CHECK_EQ(wc[1].byte_len, 0);
  CHECK_EQ(wc[2].wc_flags, UROCE_WC_WITH_INV);
  CHECK_EQ(wc[2].imm_data, uroce_mw_rkey(victim));
  CHECK_EQ(mw_entry(victim)->state, MR_INVALID);
  for (int i = 0, off = 0; i < 16 && off < 1720; i++) {
    uint32_t n = 1720 - off < 150 ? 1720 - off : 150;
    CHECK(memcmp(B.mem + 50000 + 200 * i, saved + off, n) == 0);
    off += n;
  }
  CHECK_EQ(uroce_eng_mw_dealloc(victim), 0);
  teardown();
}

static void test_srq_limit_and_cq_overflow(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.use_srq = true;
  o.srq_limit = 2;
  o.cqe = 3;
  setup(&o, 8);
  for (int i = 0; i < 5; i++)
    CHECK_EQ(tp_post_recv(&B, (uint64_t)i, 100 * (uint64_t)i, 100), 0);
  for (int i = 0; i < 4; i++)
    CHECK_EQ(tp_post_send(&A, UROCE_WR_SEND, (uint64_t)i, 0, 10,
                          i == 3 ? UROCE_SEND_SIGNALED : 0, 0, 0),
             0);
  ns_run_idle(&ns, 100000000);
  struct uroce_async_event ev;
  int seen_limit = 0, seen_cq = 0;
  while (uroce_eng_get_async_event(ns.eng[1], &ev)) {
    seen_limit += ev.type == UROCE_EVENT_SRQ_LIMIT_REACHED;
    seen_cq += ev.type == UROCE_EVENT_CQ_ERR;
  }
  CHECK_EQ(seen_limit, 1); /* once: the limit disarms itself */
  CHECK_EQ(seen_cq, 1);    /* 4 receive completions into 3 entries */
  struct uroce_wc wc[8];
  CHECK_EQ(uroce_eng_cq_poll(B.rcq, 8, wc), 3);
  CHECK_EQ(uroce_eng_cq_poll(B.rcq, 8, wc), UROCE_ERR_CQ_OVERFLOW);
  teardown();
}

static void test_ecn_cnp(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  setup(&o, 9);
  ns.link[0][1].ce = 1.0; /* every request arrives CE-marked */
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 500000,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  struct uroce_wc wc[1];
  CHECK_EQ(wait_cq(A.scq, wc, 1), 1);
  const struct uroce_eng_stats *sb = uroce_eng_stats(ns.eng[1]);
  CHECK(sb->ce_rx >= 400);
  /* One CNP at most per 50 us per QP. */
  CHECK(sb->cnps_tx >= 1);
  CHECK(sb->cnps_tx <= 1 + ns.now / 50000);
  CHECK_EQ(uroce_eng_stats(ns.eng[0])->cnps_rx, sb->cnps_tx);
  teardown();
}

/* A 1 GiB RDMA WRITE and READ in phantom mode (lengths only). */
static void test_one_gib_phantom(void) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.flags = UROCE_ENG_PHANTOM;
  cfg.max_unacked_psn = 1024;
  CHECK_EQ(ns_init(&ns, 2, 10, &cfg), 0);
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_4096;
  o.phantom_mem = true;
  o.memlen = 1u << 30;
  CHECK_EQ(tp_end_init(&A, ns.eng[0], ns.gid[0], &o), 0);
  CHECK_EQ(tp_end_init(&B, ns.eng[1], ns.gid[1], &o), 0);
  CHECK_EQ(tp_connect(&A, &B, &o), 0);
  for (int d = 0; d < 2; d++) {
    ns.link[d][1 - d].gbps = 400;
    ns.link[d][1 - d].delay_ns = 500;
  }
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 1u << 30,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_READ, 2, 0, 1u << 30,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  struct uroce_wc wc[2];
  CHECK_EQ(wait_cq(A.scq, wc, 2), 2);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc[1].status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc[1].byte_len, 1u << 30);
  teardown();
}

/* One WQE on e's send queue: LOCAL_INV of rkey, or SEND_WITH_INV of it to
 * the peer (a receive posted there first). Returns the status. */
static int invalidate(struct tp_end *e, struct tp_end *peer, uint32_t op,
                      uint32_t rkey) {
  struct uroce_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = 0x1BB;
  wr.opcode = op;
  wr.send_flags = UROCE_SEND_SIGNALED;
  wr.invalidate_rkey = rkey;
  if (op == UROCE_WR_SEND_WITH_INV)
    CHECK_EQ(tp_post_recv(peer, 0x2BB, 0, 64), 0);
  int rc = uroce_eng_qp_post_send(e->qp, &wr, &bad);
  if (rc)
    return rc;
  struct uroce_wc wc;
  if (wait_cq(e->scq, &wc, 1) != 1 || wc.wr_id != 0x1BB)
    return -1;
  if (wc.status == UROCE_WC_SUCCESS)
    CHECK_EQ(wc.opcode,
             op == UROCE_WR_LOCAL_INV ? UROCE_WC_LOCAL_INV : UROCE_WC_SEND);
  if (op == UROCE_WR_SEND_WITH_INV && wc.status == UROCE_WC_SUCCESS) {
    CHECK_EQ(wait_cq(peer->rcq, &wc, 1), 1);
    CHECK_EQ(wc.wc_flags & UROCE_WC_WITH_INV, UROCE_WC_WITH_INV);
    CHECK_EQ(wc.imm_data, rkey);
  }
  return (int)wc.status;
}

/* A's one-WQE RDMA operation on B's memory at off through rkey; returns
 * its status. */
static int rdma_at(uint32_t op, uint64_t off, uint32_t len, uint32_t rkey) {
  CHECK_EQ(tp_post_send(&A, op, 0x3BB, 0, len, UROCE_SEND_SIGNALED,
                        B.mr->iova + off, rkey),
           0);
  struct uroce_wc wc;
  if (wait_cq(A.scq, &wc, 1) != 1)
    return -1;
  return (int)wc.status;
}

/* Memory windows, both transports: type 2 bound by a work request on the
 * responder's QP grants exactly its range and rights to that QP; a local
 * or remote invalidation, or freeing it, ends that; a bound region cannot
 * be deregistered; type 1 binds, rebinds and unbinds with length 0;
 * regions themselves cannot be invalidated remotely (SEND with invalidate
 * naming one fails the sender with a remote invalid request). */
static void test_memory_windows(void) {
  uint32_t flags[2] = {UROCE_ENG_STANDARD, UROCE_ENG_MULTIPATH};
  for (int f = 0; f < 2; f++) {
    struct tp_opts o;
    tp_opts_default(&o);
    uint32_t saved = eng_flags;
    eng_flags = flags[f];
    setup(&o, 40 + (uint64_t)f);
    eng_flags = saved;
    struct uroce_mw *w2, *w1;
    CHECK_EQ(uroce_eng_mw_alloc(B.pd, UROCE_MW_TYPE_2, &w2), 0);
    CHECK_EQ(uroce_eng_mw_alloc(B.pd, UROCE_MW_TYPE_1, &w1), 0);
    CHECK_EQ(uroce_mw_type(w2), UROCE_MW_TYPE_2);
    CHECK(uroce_mw_rkey(w2) != B.mr->rkey && uroce_mw_rkey(w2) != 0);
    CHECK_EQ(uroce_eng_pd_del(B.pd), UROCE_ERR_BUSY);
    uint32_t before = uroce_mw_rkey(w2);
    CHECK_EQ(bind_mw(&B, w2, 4096, 8192,
                     UROCE_ACCESS_REMOTE_WRITE | UROCE_ACCESS_REMOTE_READ),
             UROCE_WC_SUCCESS);
    uint32_t k2 = uroce_mw_rkey(w2);
    CHECK_EQ(k2 & ~0xFFu, before & ~0xFFu); /* only the key portion moved */
    CHECK(k2 != before);
    CHECK_EQ(bind_mw(&B, w1, 0, 4096, UROCE_ACCESS_REMOTE_READ),
             UROCE_WC_SUCCESS);
    uint32_t k1 = uroce_mw_rkey(w1);
    /* Inside the windows: WRITE through the type 2, READ through type 1. */
    CHECK_EQ(rdma_at(UROCE_WR_RDMA_WRITE, 4096, 8192, k2), UROCE_WC_SUCCESS);
    CHECK(memcmp(B.mem + 4096, A.mem, 8192) == 0);
    CHECK_EQ(rdma_at(UROCE_WR_RDMA_READ, 0, 4096, k1), UROCE_WC_SUCCESS);
    CHECK(memcmp(A.mem, B.mem, 4096) == 0);
    CHECK_EQ(uroce_eng_mr_dereg(B.mr), UROCE_ERR_BUSY);
    /* Local invalidation, then bound again (free again), then invalidated
     * by the peer's SEND. A type 1 cannot be invalidated. */
    CHECK_EQ(invalidate(&B, &A, UROCE_WR_LOCAL_INV, k2), UROCE_WC_SUCCESS);
    CHECK_EQ(mw_entry(w2)->state, MR_INVALID);
    CHECK_EQ(bind_mw(&B, w2, 0, 64, UROCE_ACCESS_REMOTE_WRITE),
             UROCE_WC_SUCCESS);
    k2 = uroce_mw_rkey(w2);
    CHECK_EQ(invalidate(&A, &B, UROCE_WR_SEND_WITH_INV, k2), UROCE_WC_SUCCESS);
    CHECK_EQ(mw_entry(w2)->state, MR_INVALID);
    /* Type 1: rebinding moves it; length 0 unbinds (nothing is open). */
    CHECK_EQ(bind_mw(&B, w1, 8192, 100, UROCE_ACCESS_REMOTE_READ),
             UROCE_WC_SUCCESS);
    CHECK(uroce_mw_rkey(w1) != k1);
    CHECK_EQ(rdma_at(UROCE_WR_RDMA_READ, 8192, 100, uroce_mw_rkey(w1)),
             UROCE_WC_SUCCESS);
    CHECK_EQ(bind_mw(&B, w1, 0, 0, 0), UROCE_WC_SUCCESS);
    CHECK_EQ(mw_entry(w1)->length, 0);
    CHECK_EQ(B.mr->binds, 0);
    /* The window's old key no longer opens anything: the QP fails. */
    CHECK_EQ(rdma_at(UROCE_WR_RDMA_WRITE, 0, 64, k2), UROCE_WC_REM_ACCESS_ERR);
    CHECK_EQ(uroce_eng_mw_dealloc(w2), 0);
    CHECK_EQ(uroce_eng_mw_dealloc(w1), 0);
    CHECK_EQ(uroce_eng_mw_dealloc(w1), UROCE_ERR_INVALID_ARGUMENT);
    teardown();
  }
}

/* What a window does not allow, each on a fresh pair (an error takes the
 * QP down): access outside its range or beyond its rights, through
 * another QP (type 2), after it was freed; binding a bound type 2, or to
 * a region without bind rights; invalidating a type 1, or an MR. */
static void test_memory_window_errors(void) {
  struct tp_opts o;
  for (int c = 0; c < 9; c++) {
    tp_opts_default(&o);
    setup(&o, 50 + (uint64_t)c);
    struct uroce_mw *w2, *w1;
    CHECK_EQ(uroce_eng_mw_alloc(B.pd, UROCE_MW_TYPE_2, &w2), 0);
    CHECK_EQ(uroce_eng_mw_alloc(B.pd, UROCE_MW_TYPE_1, &w1), 0);
    CHECK_EQ(bind_mw(&B, w2, 4096, 4096, UROCE_ACCESS_REMOTE_WRITE),
             UROCE_WC_SUCCESS);
    uint32_t k2 = uroce_mw_rkey(w2);
    switch (c) {
    case 0: /* one byte past the window (inside the region) */
      CHECK_EQ(rdma_at(UROCE_WR_RDMA_WRITE, 4097, 4096, k2),
               UROCE_WC_REM_ACCESS_ERR);
      break;
    case 1: /* a right the window lacks (the region has it) */
      CHECK_EQ(rdma_at(UROCE_WR_RDMA_READ, 4096, 64, k2),
               UROCE_WC_REM_ACCESS_ERR);
      break;
    case 2: /* freed */
      CHECK_EQ(uroce_eng_mw_dealloc(w2), 0);
      w2 = NULL;
      CHECK_EQ(rdma_at(UROCE_WR_RDMA_WRITE, 4096, 64, k2),
               UROCE_WC_REM_ACCESS_ERR);
      break;
    case 3: /* a bound type 2 cannot be bound again */
      CHECK_EQ(bind_mw(&B, w2, 0, 64, UROCE_ACCESS_REMOTE_WRITE),
               UROCE_WC_MW_BIND_ERR);
      break;
    case 4: { /* a region without bind rights */
      struct uroce_mr *plain;
      CHECK_EQ(
          uroce_eng_mr_reg(B.pd, B.mem, 64, UROCE_ACCESS_LOCAL_WRITE, &plain),
          0);
      struct uroce_mr *keep = B.mr;
      B.mr = plain;
      CHECK_EQ(bind_mw(&B, w1, 0, 64, UROCE_ACCESS_REMOTE_READ),
               UROCE_WC_MW_BIND_ERR);
      B.mr = keep;
      CHECK_EQ(uroce_eng_mr_dereg(plain), 0);
      break;
    }
    case 5: /* a type 1 cannot be invalidated */
      CHECK_EQ(bind_mw(&B, w1, 0, 64, UROCE_ACCESS_REMOTE_READ),
               UROCE_WC_SUCCESS);
      CHECK_EQ(invalidate(&B, &A, UROCE_WR_LOCAL_INV, uroce_mw_rkey(w1)),
               UROCE_WC_LOC_QP_OP_ERR);
      break;
    case 6: /* a region cannot be invalidated by the peer */
      CHECK_EQ(invalidate(&A, &B, UROCE_WR_SEND_WITH_INV, B.mr->rkey),
               UROCE_WC_REM_INV_REQ_ERR);
      CHECK_EQ(B.mr->state, MR_VALID);
      break;
    case 7: { /* a type 2 window serves only the QP that bound it */
      struct tp_end C, D;
      CHECK_EQ(tp_end_init(&C, ns.eng[0], ns.gid[0], &o), 0);
      CHECK_EQ(tp_end_init(&D, ns.eng[1], ns.gid[1], &o), 0);
      CHECK_EQ(tp_connect(&C, &D, &o), 0);
      CHECK_EQ(tp_post_send(&C, UROCE_WR_RDMA_WRITE, 9, 0, 64,
                            UROCE_SEND_SIGNALED, B.mr->iova + 4096, k2),
               0);
      struct uroce_wc wc;
      CHECK_EQ(wait_cq(C.scq, &wc, 1), 1);
      CHECK_EQ(wc.status, UROCE_WC_REM_ACCESS_ERR);
      CHECK_EQ(rdma_at(UROCE_WR_RDMA_WRITE, 4096, 64, k2), UROCE_WC_SUCCESS);
      tp_end_free(&C);
      tp_end_free(&D);
      break;
    }
    default: /* the QP that bound it goes: the window opens nothing */
      uroce_eng_qp_del(B.qp);
      B.qp = NULL;
      CHECK_EQ(mw_entry(w2)->state, MR_INVALID);
      CHECK_EQ(uroce_eng_mr_dereg(B.mr), 0);
      B.mr = NULL;
      break;
    }
    if (w2)
      CHECK_EQ(uroce_eng_mw_dealloc(w2), 0);
    CHECK_EQ(uroce_eng_mw_dealloc(w1), 0);
    teardown();
  }
}

/* The trace names every state: a state added without a name shows here. */
static void test_state_names(void) {
  for (int i = 0; i < REQST_COUNT; i++)
    CHECK(uroce_req_state_names[i] && *uroce_req_state_names[i]);
  for (int i = 0; i < COMPST_COUNT; i++)
    CHECK(uroce_comp_state_names[i] && *uroce_comp_state_names[i]);
  for (int i = 0; i < RESPST_COUNT; i++)
    CHECK(uroce_resp_state_names[i] && *uroce_resp_state_names[i]);
}

/* The engine's timer heap follows a QP's state: a SEND goes out (its
 * retransmit timer armed), the application moves the QP to ERR or RESET
 * (its timers cleared without a packet for it), and the engine then has
 * no deadline; a QP destroyed with a timer armed leaves none behind. */
static void test_timers_follow_modify(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  for (int how = 0; how < 3; how++) { /* ERR, RESET, destroy */
    setup(&o, 7);
    CHECK_EQ(uroce_eng_next_expiry(A.eng), UINT64_MAX);
    CHECK_EQ(
        tp_post_send(&A, UROCE_WR_SEND, 1, 0, 64, UROCE_SEND_SIGNALED, 0, 0),
        0);
    struct uroce_tx_pkt tx;
    CHECK_EQ(uroce_eng_write_pkt(A.eng, &tx, ns.now), 1); /* never delivered */
    CHECK(uroce_eng_next_expiry(A.eng) != UINT64_MAX);
    if (how == 2) {
      CHECK_EQ(uroce_eng_qp_del(A.qp), 0);
      A.qp = 0;
    } else {
      struct uroce_qp_attr a = {.qp_state =
                                    how ? UROCE_QPS_RESET : UROCE_QPS_ERR};
      CHECK_EQ(uroce_eng_qp_modify(A.qp, &a, UROCE_QP_STATE), 0);
    }
    CHECK_EQ(uroce_eng_next_expiry(A.eng), UINT64_MAX);
    teardown();
  }
}

/* An ACK that a receive completion asked for waits for the reply
 * (cfg.ack_hold_ns) and leaves beside it; with no reply it leaves when
 * the hold ends, never later; one for a WRITE, which completes nothing
 * at the responder, leaves at once. Multipath only: the standard
 * transport (what a standard peer gets) acknowledges at once, as it did
 * before holding existed. 5 us each way. */
static void ack_hold_case(uint32_t flags) {
  bool holds = !(flags & UROCE_ENG_STANDARD);
  const uint64_t d = 5000, hold = 20000;
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.flags = flags;
  cfg.ack_hold_ns = hold;
  struct tp_opts o;
  tp_opts_default(&o);
  setup_cfg(&cfg, &o, 53);
  ns.link[0][1].delay_ns = ns.link[1][0].delay_ns = d;
  ns.tick_ns = 100; /* the application answers within 100 ns */
  struct uroce_wc wc;
  for (int round = 0; round < 6; round++) {
    int kind = round % 3; /* 0: no reply, 1: a reply, 2: a WRITE */
    uint64_t acks = uroce_eng_stats(B.eng)->acks_tx;
    uint64_t t0 = ns.now;
    if (kind != 2) {
      CHECK_EQ(tp_post_recv(&B, 1, 0, 64), 0);
      CHECK_EQ(tp_post_send(&A, UROCE_WR_SEND, 2, 0, 64, UROCE_SEND_SIGNALED,
                            0, 0),
               0);
      CHECK_EQ(wait_cq(B.rcq, &wc, 1), 1);
      CHECK(B.qp->resp.ack_held == holds);
      if (holds)
        CHECK_EQ(tp_poll(A.scq, &wc, 1), 0);
      if (kind == 1) {
        CHECK_EQ(tp_post_recv(&A, 3, 0, 64), 0);
        CHECK_EQ(tp_post_send(&B, UROCE_WR_SEND, 4, 0, 64, 0, 0, 0), 0);
      }
    } else {
      CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 2, 0, 64,
                            UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
               0);
    }
    CHECK_EQ(wait_cq(A.scq, &wc, 1), 1);
    CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
    uint64_t took = ns.now - t0;
    if (kind == 0 && holds)
      CHECK(took >= hold && took <= 2 * d + hold + 1000);
    else
      CHECK(took <= 2 * d + 1000); /* beside the reply, or at once */
    if (kind == 1) {
      CHECK_EQ(wait_cq(A.rcq, &wc, 1), 1);
      CHECK(ns.now - t0 <= 2 * d + 1000);
    }
    CHECK_EQ(uroce_eng_stats(B.eng)->acks_tx, acks + 1);
    CHECK(!B.qp->resp.ack_held);
    CHECK(ns_run_idle(&ns, ns.now + 1000000));
  }
  CHECK_EQ(uroce_eng_stats(ns.eng[0])->timeouts, 0);
  CHECK_EQ(uroce_eng_stats(ns.eng[0])->retx_pkts, 0);
  teardown();
}

static void test_ack_hold(void) {
  ack_hold_case(0);
  ack_hold_case(UROCE_ENG_STANDARD);
}

int main(void) {
  T_RUN(test_state_names);
  T_RUN(test_send_recv);
  T_RUN(test_write_read_atomic);
  T_RUN(test_uc_loss);
  T_RUN(test_ud);
  T_RUN(test_lossy_bulk);
  T_RUN(test_retx_counts);
  T_RUN(test_read_loss);
  T_RUN(test_read_request_loss);
  T_RUN(test_atomic_once);
  T_RUN(test_sge_inline_inv_zero);
  T_RUN(test_memory_windows);
  T_RUN(test_memory_window_errors);
  T_RUN(test_srq_limit_and_cq_overflow);
  T_RUN(test_ecn_cnp);
  T_RUN(test_one_gib_phantom);
  T_RUN(test_negotiation);
  T_RUN(test_timeout_then_multipath);
  T_RUN(test_mp_state_on_first_use);
  T_RUN(test_pingpong_no_stray_timer);
  T_RUN(test_ack_hold);
  T_RUN(test_fifo_loss_no_reordering);
  T_RUN(test_window_is_in_flight);
  T_RUN(test_reorder);
  T_RUN(test_inflight_bound);
  T_RUN(test_inflight_turns);
  T_RUN(test_tx_burst);
  T_RUN(test_cc_swift);
  T_RUN(test_trimmed_packet);
  T_RUN(test_timers_follow_modify);
  return T_DONE();
}
