/* Transport error scenarios, one test each: remote access errors (bad
 * rkey, out of bounds, missing right) with the responder's side, RNR retry
 * exhausted, a silent peer exhausting retry_cnt after the configured
 * timeouts, local protection errors, and flushing of everything after. */
#include <string.h>

#include "netsim.h"
#include "t.h"
#include "tphelp.h"
#include "transport/qp.h"
#include "uroce/uroce.h"
#include "wire/hdr.h"

static struct netsim ns;
static struct tp_end A, B;

static void setup_flags(struct tp_opts *o, uint32_t flags) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.flags = flags;
  CHECK_EQ(ns_init(&ns, 2, 99, &cfg), 0);
  CHECK_EQ(tp_end_init(&A, ns.eng[0], ns.gid[0], o), 0);
  CHECK_EQ(tp_end_init(&B, ns.eng[1], ns.gid[1], o), 0);
  CHECK_EQ(tp_connect(&A, &B, o), 0);
}

static void setup(struct tp_opts *o) {
  setup_flags(o, 0);
}

static void teardown(void) {
  tp_end_free(&A);
  tp_end_free(&B);
  ns_free(&ns);
}

static int drain(struct uroce_cq *cq, struct uroce_wc *wc, int max) {
  return tp_poll(cq, wc, max);
}

static int qp_state(struct uroce_qp *qp) {
  struct uroce_qp_attr a;
  uroce_eng_qp_query(qp, &a, 0);
  return (int)a.qp_state;
}

/* A bad remote access: the failing WR gets REM_ACCESS_ERR, the WR before it
 * succeeds, the ones after are flushed; the responder NAKs, goes to ERR and
 * flushes its receive queue; memory past the failure is untouched. */
static void remote_access_case(int kind) {
  struct tp_opts o;
  tp_opts_default(&o);
  setup(&o);
  memset(A.mem, 0xAA, 4096);
  struct uroce_mr *ro = 0;
  CHECK_EQ(uroce_eng_mr_reg(B.pd, B.mem + 8192, 4096,
                            UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_READ,
                            &ro),
           0);
  CHECK_EQ(tp_post_recv(&B, 900, 0, 64), 0);
  CHECK_EQ(tp_post_recv(&B, 901, 64, 64), 0);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 100, UROCE_SEND_SIGNALED,
                        B.mr->iova + 100, B.mr->rkey),
           0);
  uint64_t va = B.mr->iova + 1000;
  uint32_t rkey = B.mr->rkey;
  if (kind == 0)
    rkey ^= 0x12345600; /* bad key */
  else if (kind == 1)
    va = B.mr->iova + B.memlen - 50; /* 100 bytes do not fit */
  else {
    rkey = ro->rkey; /* registered without remote write */
    va = ro->iova;
  }
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 2, 0, 100, UROCE_SEND_SIGNALED,
                        va, rkey),
           0);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_SEND, 3, 0, 10, UROCE_SEND_SIGNALED, 0, 0),
           0);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_SEND, 4, 0, 10, 0, 0, 0), 0);
  ns_run_idle(&ns, 100000000);
  struct uroce_wc wc[8];
  int n = drain(A.scq, wc, 8);
  CHECK_EQ(n, 4);
  CHECK_EQ(wc[0].wr_id, 1);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc[1].wr_id, 2);
  CHECK_EQ(wc[1].status, UROCE_WC_REM_ACCESS_ERR);
  CHECK_EQ(wc[2].status, UROCE_WC_WR_FLUSH_ERR);
  CHECK_EQ(wc[3].wr_id, 4); /* unsignaled, but flushed: it completes */
  CHECK_EQ(wc[3].status, UROCE_WC_WR_FLUSH_ERR);
  CHECK_EQ(qp_state(A.qp), UROCE_QPS_ERR);
  /* Responder: NAKed, in ERR, receive WQEs flushed, memory untouched. */
  CHECK_EQ(qp_state(B.qp), UROCE_QPS_ERR);
  CHECK_EQ(uroce_eng_stats(ns.eng[1])->naks_tx, 1);
  n = drain(B.rcq, wc, 8);
  CHECK_EQ(n, 2);
  CHECK_EQ(wc[0].status, UROCE_WC_WR_FLUSH_ERR);
  CHECK_EQ(wc[1].status, UROCE_WC_WR_FLUSH_ERR);
  CHECK_EQ(B.mem[100], 0xAA);
  CHECK(B.mem[1000] != 0xAA);
  /* Later requests flush at once. */
  CHECK_EQ(tp_post_send(&A, UROCE_WR_SEND, 5, 0, 10, 0, 0, 0), 0);
  CHECK_EQ(drain(A.scq, wc, 8), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_WR_FLUSH_ERR);
  CHECK_EQ(tp_post_recv(&A, 6, 0, 10), 0);
  CHECK_EQ(drain(A.rcq, wc, 8), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_WR_FLUSH_ERR);
  uroce_eng_mr_dereg(ro);
  teardown();
}

static void test_bad_rkey(void) {
  remote_access_case(0);
}
static void test_out_of_bounds(void) {
  remote_access_case(1);
}
static void test_missing_rights(void) {
  remote_access_case(2);
}

static void test_read_atomic_access(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.mr_access = UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_WRITE;
  setup(&o);
  /* B's MR allows no remote read: the READ fails. */
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_READ, 1, 0, 64, UROCE_SEND_SIGNALED,
                        B.mr->iova, B.mr->rkey),
           0);
  ns_run_idle(&ns, 100000000);
  struct uroce_wc wc[4];
  CHECK_EQ(drain(A.scq, wc, 4), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_REM_ACCESS_ERR);
  teardown();
  /* A misaligned atomic is an invalid request. */
  tp_opts_default(&o);
  setup(&o);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_ATOMIC_FETCH_AND_ADD, 1, 0, 8,
                        UROCE_SEND_SIGNALED, B.mr->iova + 4, B.mr->rkey),
           0);
  ns_run_idle(&ns, 100000000);
  CHECK_EQ(drain(A.scq, wc, 4), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_REM_INV_REQ_ERR);
  teardown();
}

static void test_rnr_retry_exceeded(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.rnr_retry = 3;
  o.min_rnr_timer = 4; /* 40 us */
  setup(&o);
  CHECK_EQ(
      tp_post_send(&A, UROCE_WR_SEND, 1, 0, 100, UROCE_SEND_SIGNALED, 0, 0), 0);
  CHECK_EQ(
      tp_post_send(&A, UROCE_WR_SEND, 2, 0, 100, UROCE_SEND_SIGNALED, 0, 0), 0);
  ns_run_idle(&ns, 1000000000);
  struct uroce_wc wc[4];
  CHECK_EQ(drain(A.scq, wc, 4), 2);
  CHECK_EQ(wc[0].status, UROCE_WC_RNR_RETRY_EXC_ERR);
  CHECK_EQ(wc[1].status, UROCE_WC_WR_FLUSH_ERR);
  /* One first try plus rnr_retry retries, each NAKed. */
  CHECK_EQ(uroce_eng_stats(ns.eng[1])->rnr_naks_tx, 4);
  /* Each retry waited the encoded timer (3 x 40 us at least). */
  CHECK(ns.now >= 3 * 40000);
  CHECK_EQ(qp_state(A.qp), UROCE_QPS_ERR);
  teardown();
}

static void test_rnr_then_success(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.rnr_retry = 7; /* infinite */
  setup(&o);
  CHECK_EQ(
      tp_post_send(&A, UROCE_WR_SEND, 1, 0, 3000, UROCE_SEND_SIGNALED, 0, 0),
      0);
  ns_run_idle(&ns, 50000);
  CHECK(uroce_eng_stats(ns.eng[1])->rnr_naks_tx >= 1);
  CHECK_EQ(tp_post_recv(&B, 9, 0, 4000), 0);
  ns_run_idle(&ns, ns.now + 100000000);
  struct uroce_wc wc[4];
  CHECK_EQ(drain(A.scq, wc, 4), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(drain(B.rcq, wc, 4), 1);
  CHECK_EQ(wc[0].byte_len, 3000);
  teardown();
}

static void test_silent_peer_retry_exceeded(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.timeout = 12; /* 4.096 us * 4096 = 16.8 ms */
  o.retry_cnt = 3;
  setup(&o);
  ns.silent[1] = true;
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, 5000,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_READ, 2, 0, 5000, UROCE_SEND_SIGNALED,
                        B.mr->iova, B.mr->rkey),
           0);
  ns_run_idle(&ns, 10000000000ull);
  struct uroce_wc wc[4];
  CHECK_EQ(drain(A.scq, wc, 4), 2);
  CHECK_EQ(wc[0].wr_id, 1);
  CHECK_EQ(wc[0].status, UROCE_WC_RETRY_EXC_ERR);
  CHECK_EQ(wc[1].status, UROCE_WC_WR_FLUSH_ERR);
  /* First try and 3 retries, each after a full timeout: 4 timeouts. */
  uint64_t rto = 4096ull << 12;
  CHECK_EQ(uroce_eng_stats(ns.eng[0])->timeouts, 4);
  CHECK(ns.now >= 4 * rto);
  CHECK(ns.now < 5 * rto);
  CHECK_EQ(qp_state(A.qp), UROCE_QPS_ERR);
  teardown();
}

static void test_local_protection(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  setup(&o);
  struct uroce_sge sge = {
      .addr = A.mr->iova, .length = 16, .lkey = A.mr->lkey ^ 0x100};
  struct uroce_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = UROCE_WR_SEND;
  wr.send_flags = UROCE_SEND_SIGNALED;
  CHECK_EQ(uroce_eng_qp_post_send(A.qp, &wr, &bad), 0);
  ns_run_idle(&ns, 100000000);
  struct uroce_wc wc[4];
  CHECK_EQ(drain(A.scq, wc, 4), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_LOC_PROT_ERR);
  CHECK_EQ(qp_state(A.qp), UROCE_QPS_ERR);
  teardown();
}

static void test_recv_too_short(void) {
  struct tp_opts o;
  tp_opts_default(&o);
  setup(&o);
  CHECK_EQ(tp_post_recv(&B, 1, 0, 100), 0);
  CHECK_EQ(
      tp_post_send(&A, UROCE_WR_SEND, 2, 0, 3000, UROCE_SEND_SIGNALED, 0, 0),
      0);
  ns_run_idle(&ns, 100000000);
  struct uroce_wc wc[4];
  CHECK_EQ(drain(A.scq, wc, 4), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_REM_INV_REQ_ERR);
  CHECK_EQ(drain(B.rcq, wc, 4), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_LOC_LEN_ERR);
  teardown();
}

static void test_garbage_headers(void) {
  /* Bit flips in every header field reach the engines: whatever they
   * decide, nothing crashes (ASan/UBSan watch) and nothing leaks. */
  struct tp_opts o;
  tp_opts_default(&o);
  setup(&o);
  for (int d = 0; d < 2; d++)
    ns.link[d][1 - d].flip = 0.3;
  for (int i = 0; i < 40; i++) {
    tp_post_recv(&B, 100 + i, (uint64_t)i * 1000, 1000);
    tp_post_send(&A, (uint32_t)(i % 7), (uint64_t)i, (uint64_t)i * 64,
                 i % 5 == 0 ? 8 : 900, UROCE_SEND_SIGNALED,
                 B.mr->iova + (uint64_t)i * 8, B.mr->rkey);
  }
  ns_run_idle(&ns, 2000000000);
  CHECK(ns.stats.flipped > 0);
  struct uroce_wc wc[64];
  drain(A.scq, wc, 64);
  drain(B.rcq, wc, 64);
  teardown();
}

/* Hands B a multipath SEND packet as if A sent it: PSN epsn + k, offset
 * off in message ssn, n payload bytes (a multiple of 4). */
static void mp_send_pkt(uint8_t op, uint32_t k, uint32_t ssn, uint32_t off,
                        uint32_t n) {
  static uint8_t buf[UROCE_TX_HDR_MAX + 4096];
  struct uroce_hdr_fields h = {
      .opcode = (uint8_t)(UROCE_OP_MP_BASE + op),
      .pkey = 0xFFFF,
      .dqpn = uroce_qp_num(B.qp),
      .psn = uroce_psn_add(B.qp->resp.epsn, k),
      .resv7 = UROCE_BTH_MP,
      .ssn = ssn,
      .mp_off = off};
  int hl = uroce_hdr_encode(buf, &h);
  CHECK(hl > 0);
  memset(buf + hl, 0x5A, n);
  struct uroce_rx_pkt rx;
  memset(&rx, 0, sizeof(rx));
  CHECK_EQ(uroce_pkt_parse(buf, (size_t)hl + n + UROCE_ICRC_LEN, &rx.pi), 0);
  memcpy(rx.sgid, ns.gid[0], 16);
  memcpy(rx.dgid, ns.gid[1], 16);
  rx.sport = 0xC000;
  uroce_eng_read_pkt(ns.eng[1], &rx, ns.now);
}

/* A peer marks two ends of one multipath SEND (a FIRST, then a LAST at
 * PSN + 1 and another at PSN + 2): the first end completes the SRQ's
 * receive WQE and the second has none. The responder fails the QP with an
 * invalid-request NAK; it neither completes a WQE nobody handed it nor
 * reads one that is not there (an engine fuzzer found it reading through
 * the RQ an SRQ-fed QP does not have). With a plain RQ the second end
 * does not complete the next WQE either: nothing was placed in it. */
static void double_end_case(bool srq) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.use_srq = srq;
  setup_flags(&o, UROCE_ENG_MULTIPATH);
  CHECK_EQ(tp_post_recv(&B, 1, 0, 4096), 0);
  CHECK_EQ(tp_post_recv(&B, 2, 4096, 4096), 0);
  uint32_t mtu = B.qp->mtu;
  mp_send_pkt(UROCE_OP_SEND_LAST, 2, 0, 2 * mtu, 12);
  mp_send_pkt(UROCE_OP_SEND_LAST, 1, 0, mtu, 20);
  mp_send_pkt(UROCE_OP_SEND_FIRST, 0, 0, 0, mtu);
  const struct uroce_eng_stats *st = uroce_eng_stats(ns.eng[1]);
  CHECK_EQ(st->naks_tx, 0);
  ns_run_idle(&ns, 100000000ull);
  struct uroce_wc wc[4];
  int n = drain(B.rcq, wc, 4);
  CHECK_EQ(n, srq ? 1 : 2); /* the message's WQE, once */
  CHECK_EQ(wc[0].wr_id, 1);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc[0].byte_len, mtu + 20);
  if (!srq) { /* the next one received nothing: flushed with the QP */
    CHECK_EQ(wc[1].wr_id, 2);
    CHECK_EQ(wc[1].status, UROCE_WC_WR_FLUSH_ERR);
  }
  CHECK_EQ(st->naks_tx, 1);
  CHECK_EQ(qp_state(B.qp), UROCE_QPS_ERR);
  teardown();
}

static void test_mp_double_end_srq(void) {
  double_end_case(true);
}
static void test_mp_double_end_rq(void) {
  double_end_case(false);
}

/* A third host that knows B's QPN, PSN and rkey (a QP of its own aimed at
 * B) writes into B's region: B drops every packet as not from its peer
 * (RC and UC), the memory stays as it was, the intruder gets no answer
 * and so runs out of retries, and A's own write still lands. */
static void peer_case(uint32_t type) {
  struct tp_opts o;
  tp_opts_default(&o);
  o.type = type;
  o.retry_cnt = 2;
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  CHECK_EQ(ns_init(&ns, 3, 7, &cfg), 0);
  struct tp_end C;
  CHECK_EQ(tp_end_init(&A, ns.eng[0], ns.gid[0], &o), 0);
  CHECK_EQ(tp_end_init(&B, ns.eng[1], ns.gid[1], &o), 0);
  CHECK_EQ(tp_end_init(&C, ns.eng[2], ns.gid[2], &o), 0);
  CHECK_EQ(tp_connect(&A, &B, &o), 0);
  CHECK_EQ(tp_bring_up(&C, &B, &o), 0);
  memset(B.mem, 0x11, 8192);
  memset(C.mem, 0xEE, 8192);
  memset(A.mem, 0xAA, 8192);
  CHECK_EQ(tp_post_send(&C, UROCE_WR_RDMA_WRITE, 7, 0, 5000,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  ns_run_idle(&ns, 2000000000ull);
  const struct uroce_eng_stats *st = uroce_eng_stats(ns.eng[1]);
  CHECK(st->drops[UROCE_DROP_PEER] >= 5); /* 5 packets at MTU 1024 */
  CHECK_EQ(st->acks_tx + st->naks_tx, 0);
  for (int i = 0; i < 8192; i++)
    if (B.mem[i] != 0x11) {
      CHECK_EQ(B.mem[i], 0x11);
      break;
    }
  struct uroce_wc wc[4];
  if (type == UROCE_QPT_RC) {
    CHECK_EQ(drain(C.scq, wc, 4), 1);
    CHECK_EQ(wc[0].status, UROCE_WC_RETRY_EXC_ERR);
  }
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 8, 0, 5000,
                        UROCE_SEND_SIGNALED, B.mr->iova, B.mr->rkey),
           0);
  ns_run_idle(&ns, 2000000000ull);
  CHECK_EQ(drain(A.scq, wc, 4), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(memcmp(B.mem, A.mem, 5000), 0);
  CHECK_EQ(B.mem[5000], 0x11);
  tp_end_free(&C);
  teardown();
}

static void test_foreign_peer_rc(void) {
  peer_case(UROCE_QPT_RC);
}
static void test_foreign_peer_uc(void) {
  peer_case(UROCE_QPT_UC);
}

int main(void) {
  T_RUN(test_bad_rkey);
  T_RUN(test_out_of_bounds);
  T_RUN(test_missing_rights);
  T_RUN(test_read_atomic_access);
  T_RUN(test_rnr_retry_exceeded);
  T_RUN(test_rnr_then_success);
  T_RUN(test_silent_peer_retry_exceeded);
  T_RUN(test_local_protection);
  T_RUN(test_recv_too_short);
  T_RUN(test_garbage_headers);
  T_RUN(test_foreign_peer_rc);
  T_RUN(test_foreign_peer_uc);
  T_RUN(test_mp_double_end_srq);
  T_RUN(test_mp_double_end_rq);
  return T_DONE();
}
