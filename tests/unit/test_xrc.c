/* XRC (transport/xrc.c): an initiator QP on one engine, a target QP and
 * XRC SRQs of a domain on the other, over the in-memory network; SENDs
 * choose their SRQ, RDMA runs against the SRQ's PD, and every wrong SRQ
 * number ends in a NAK invalid request, never in a receive. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netsim.h"
#include "t.h"
#include "tphelp.h"
#include "transport/qp.h"
#include "uroce/uroce.h"

#define MEM (1u << 20)

static struct netsim ns;

/* The initiator's side. */
static struct {
  struct uroce_pd *pd;
  struct uroce_cq *cq;
  struct uroce_qp *qp;
  uint8_t *mem;
  struct uroce_mr *mr;
} I;

/* The target's side: one domain, two XRC SRQs sharing one CQ, the target
 * QP; a second domain with an SRQ of its own; an ordinary SRQ. */
static struct {
  struct uroce_pd *pd;
  struct uroce_cq *cq;
  struct uroce_xrcd *xrcd, *xrcd2;
  struct uroce_srq *s1, *s2, *other, *plain;
  struct uroce_qp *qp;
  uint8_t *mem;
  struct uroce_mr *mr;
} T;

static void connect_pair(void) {
  struct uroce_qp_attr a = {.qp_state = UROCE_QPS_RTS,
                            .port_num = 1,
                            .qp_access_flags = UROCE_ACCESS_REMOTE_WRITE |
                                               UROCE_ACCESS_REMOTE_READ |
                                               UROCE_ACCESS_REMOTE_ATOMIC,
                            .path_mtu = UROCE_MTU_1024,
                            .rq_psn = 0xFFFFF0,
                            .sq_psn = 0xFFFFF0,
                            .max_dest_rd_atomic = 16,
                            .min_rnr_timer = 1,
                            .ah_attr.is_global = 1,
                            .timeout = 10,
                            .retry_cnt = 7,
                            .rnr_retry = 7,
                            .max_rd_atomic = 4};
  a.dest_qp_num = uroce_qp_num(T.qp);
  memcpy(a.ah_attr.dgid, ns.gid[1], 16);
  CHECK_EQ(uroce_eng_qp_connect(I.qp, &a), 0);
  a.dest_qp_num = uroce_qp_num(I.qp);
  memcpy(a.ah_attr.dgid, ns.gid[0], 16);
  CHECK_EQ(uroce_eng_qp_connect(T.qp, &a), 0);
}

static void setup(uint64_t seed) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  CHECK_EQ(ns_init(&ns, 2, seed, &cfg), 0);
  memset(&I, 0, sizeof(I));
  memset(&T, 0, sizeof(T));
  struct uroce_eng *ei = ns.eng[0], *et = ns.eng[1];
  I.mem = calloc(1, MEM);
  T.mem = calloc(1, MEM);
  for (uint32_t i = 0; i < MEM; i++)
    I.mem[i] = (uint8_t)(i * 7 + 1);
  CHECK_EQ(uroce_eng_pd_new(ei, &I.pd), 0);
  CHECK_EQ(uroce_eng_cq_new(ei, 256, &I.cq), 0);
  CHECK_EQ(uroce_eng_mr_reg(I.pd, I.mem, MEM, UROCE_ACCESS_ALL, &I.mr), 0);
  struct uroce_qp_init_attr ia = {.send_cq = I.cq,
                                  .cap = {.max_send_wr = 64, .max_send_sge = 2},
                                  .qp_type = UROCE_QPT_XRC_SEND};
  CHECK_EQ(uroce_eng_qp_new(I.pd, &ia, &I.qp), 0);

  CHECK_EQ(uroce_eng_pd_new(et, &T.pd), 0);
  CHECK_EQ(uroce_eng_cq_new(et, 256, &T.cq), 0);
  CHECK_EQ(uroce_eng_mr_reg(T.pd, T.mem, MEM, UROCE_ACCESS_ALL, &T.mr), 0);
  CHECK_EQ(uroce_eng_xrcd_new(et, &T.xrcd), 0);
  CHECK_EQ(uroce_eng_xrcd_new(et, &T.xrcd2), 0);
  struct uroce_srq_attr sa = {.max_wr = 32, .max_sge = 2};
  CHECK_EQ(uroce_eng_srq_new_xrc(T.pd, T.xrcd, T.cq, &sa, &T.s1), 0);
  CHECK_EQ(uroce_eng_srq_new_xrc(T.pd, T.xrcd, T.cq, &sa, &T.s2), 0);
  CHECK_EQ(uroce_eng_srq_new_xrc(T.pd, T.xrcd2, T.cq, &sa, &T.other), 0);
  CHECK_EQ(uroce_eng_srq_new(T.pd, &sa, &T.plain), 0);
  struct uroce_qp_init_attr ta = {.qp_type = UROCE_QPT_XRC_RECV,
                                  .xrcd = T.xrcd};
  CHECK_EQ(uroce_eng_qp_new(NULL, &ta, &T.qp), 0);
  connect_pair();
}

static void teardown(void) {
  uroce_eng_qp_del(I.qp);
  uroce_eng_qp_del(T.qp);
  uroce_eng_srq_del(T.s1);
  uroce_eng_srq_del(T.s2);
  uroce_eng_srq_del(T.other);
  uroce_eng_srq_del(T.plain);
  CHECK_EQ(uroce_eng_xrcd_del(T.xrcd), 0);
  CHECK_EQ(uroce_eng_xrcd_del(T.xrcd2), 0);
  ns_free(&ns); /* the rest goes with the engines */
  free(I.mem);
  free(T.mem);
}

static int srq_recv(struct uroce_srq *srq, uint64_t wr_id, uint64_t off,
                    uint32_t len) {
  struct uroce_sge sge = {
      .addr = T.mr->iova + off, .length = len, .lkey = T.mr->lkey};
  struct uroce_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1};
  struct uroce_recv_wr *bad;
  return uroce_eng_srq_post_recv(srq, &wr, &bad);
}

static int xsend(uint32_t op, uint64_t wr_id, uint32_t srqn, uint64_t off,
                 uint32_t len, uint64_t raddr, uint64_t add) {
  struct uroce_sge sge = {
      .addr = I.mr->iova + off, .length = len, .lkey = I.mr->lkey};
  struct uroce_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = UROCE_SEND_SIGNALED;
  wr.xrc_remote_srqn = srqn;
  if (op == UROCE_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = T.mr->rkey;
    wr.wr.atomic.compare_add = add;
  } else {
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = T.mr->rkey;
  }
  return uroce_eng_qp_post_send(I.qp, &wr, &bad);
}

/* Two SENDs through one initiator QP, each into the SRQ it names; the
 * completions come on the SRQs' CQ with the target QP's number. */
static void test_send_two_srqs(void) {
  setup(1);
  struct uroce_wc wc[4];
  CHECK(uroce_eng_srq_num(T.s1) != uroce_eng_srq_num(T.s2));
  CHECK(uroce_eng_srq_num(T.s1) && uroce_eng_srq_num(T.s1) <= 0xFFFFFF);
  CHECK_EQ(srq_recv(T.s1, 11, 0, 8192), 0);
  CHECK_EQ(srq_recv(T.s2, 22, 100000, 8192), 0);
  CHECK_EQ(xsend(UROCE_WR_SEND, 1, uroce_eng_srq_num(T.s2), 1000, 5000, 0, 0),
           0);
  CHECK_EQ(xsend(UROCE_WR_SEND, 2, uroce_eng_srq_num(T.s1), 7000, 300, 0, 0),
           0);
  CHECK_EQ(ns_wait_cq(&ns, I.cq, wc, 2), 2);
  CHECK_EQ(wc[0].wr_id, 1);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc[1].wr_id, 2);
  CHECK_EQ(wc[1].status, UROCE_WC_SUCCESS);
  CHECK_EQ(ns_wait_cq(&ns, T.cq, wc, 2), 2);
  CHECK_EQ(wc[0].wr_id, 22); /* s2 got the first message */
  CHECK_EQ(wc[0].byte_len, 5000);
  CHECK_EQ(wc[0].opcode, UROCE_WC_RECV);
  CHECK_EQ(wc[0].qp_num, uroce_qp_num(T.qp));
  CHECK_EQ(wc[0].src_qp, uroce_qp_num(I.qp));
  CHECK_EQ(wc[1].wr_id, 11);
  CHECK_EQ(wc[1].byte_len, 300);
  CHECK(memcmp(T.mem + 100000, I.mem + 1000, 5000) == 0);
  CHECK(memcmp(T.mem, I.mem + 7000, 300) == 0);
  CHECK_EQ(uroce_eng_cq_poll(T.cq, 4, wc), 0); /* nothing twice */
  teardown();
}

/* WRITE, READ and an atomic over XRC, keys checked in the SRQ's PD. */
static void test_rdma_atomic(void) {
  setup(2);
  struct uroce_wc wc[4];
  uint32_t n = uroce_eng_srq_num(T.s1);
  uint64_t tva = T.mr->iova;
  CHECK_EQ(xsend(UROCE_WR_RDMA_WRITE, 1, n, 0, 70000, tva + 1000, 0), 0);
  CHECK_EQ(xsend(UROCE_WR_RDMA_READ, 2, n, 200000, 30001, tva + 500, 0), 0);
  uint64_t v = 40;
  memcpy(T.mem + 800000, &v, 8);
  CHECK_EQ(
      xsend(UROCE_WR_ATOMIC_FETCH_AND_ADD, 3, n, 300000, 8, tva + 800000, 2),
      0);
  CHECK_EQ(ns_wait_cq(&ns, I.cq, wc, 3), 3);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ(wc[i].wr_id, i + 1);
    CHECK_EQ(wc[i].status, UROCE_WC_SUCCESS);
  }
  CHECK_EQ(wc[1].opcode, UROCE_WC_RDMA_READ);
  CHECK_EQ(wc[2].opcode, UROCE_WC_FETCH_ADD);
  CHECK(memcmp(T.mem + 1000, I.mem, 70000) == 0);
  CHECK(memcmp(I.mem + 200000, T.mem + 500, 30001) == 0);
  uint64_t orig, now;
  memcpy(&orig, I.mem + 300000, 8);
  memcpy(&now, T.mem + 800000, 8);
  CHECK(orig == 40 && now == 42);
  CHECK_EQ(uroce_eng_cq_poll(T.cq, 4, wc), 0); /* RDMA completes nothing */
  teardown();
}

/* RC's recovery under XRC: 5% loss both ways, SENDs alternating between
 * the two SRQs, WRITEs and READs; every WR completes once, in order, and
 * the bytes are right (each resent packet carries its XRCETH again). */
static void test_loss(void) {
  setup(8);
  ns.link[0][1].loss = ns.link[1][0].loss = 0.05;
  struct uroce_wc wc[64];
  uint32_t n[2] = {uroce_eng_srq_num(T.s1), uroce_eng_srq_num(T.s2)};
  struct uroce_srq *s[2] = {T.s1, T.s2};
  for (int i = 0; i < 16; i++) {
    CHECK_EQ(srq_recv(s[i & 1], 100 + i, (uint64_t)i * 20000, 20000), 0);
    CHECK_EQ(
        xsend(UROCE_WR_SEND, i, n[i & 1], (uint64_t)i * 9000, 9000 - i, 0, 0),
        0);
  }
  CHECK_EQ(xsend(UROCE_WR_RDMA_WRITE, 16, n[0], 500000, 50000,
                 T.mr->iova + 500000, 0),
           0);
  CHECK_EQ(xsend(UROCE_WR_RDMA_READ, 17, n[1], 600000, 40000,
                 T.mr->iova + 320000, 0),
           0);
  CHECK_EQ(ns_wait_cq(&ns, I.cq, wc, 18), 18);
  for (int i = 0; i < 18; i++) {
    CHECK_EQ(wc[i].wr_id, i);
    CHECK_EQ(wc[i].status, UROCE_WC_SUCCESS);
  }
  CHECK_EQ(ns_wait_cq(&ns, T.cq, wc, 16), 16);
  for (int i = 0; i < 16; i++) {
    /* In order per SRQ; the two interleave as the SENDs do. */
    CHECK_EQ(wc[i].wr_id, 100 + i);
    CHECK_EQ(wc[i].byte_len, 9000 - i);
    CHECK(memcmp(T.mem + i * 20000, I.mem + i * 9000, 9000 - i) == 0);
  }
  CHECK(memcmp(T.mem + 500000, I.mem + 500000, 50000) == 0);
  CHECK(memcmp(I.mem + 600000, T.mem + 320000, 40000) == 0);
  ns_run_idle(&ns, ns.now + 1000000000ull);
  CHECK_EQ(uroce_eng_cq_poll(T.cq, 4, wc), 0);
  CHECK_EQ(uroce_eng_cq_poll(I.cq, 4, wc), 0);
  CHECK(uroce_eng_stats(ns.eng[0])->retx_pkts > 0);
  teardown();
}

/* An empty XRC SRQ answers RNR; a receive posted later lets the SEND in. */
static void test_rnr(void) {
  setup(9);
  struct uroce_wc wc[2];
  CHECK_EQ(xsend(UROCE_WR_SEND, 1, uroce_eng_srq_num(T.s1), 0, 100, 0, 0), 0);
  ns_run_idle(&ns, ns.now + 200000);
  CHECK(uroce_eng_stats(ns.eng[1])->rnr_naks_tx > 0);
  CHECK_EQ(uroce_eng_cq_poll(I.cq, 2, wc), 0);
  CHECK_EQ(srq_recv(T.s1, 7, 0, 100), 0);
  CHECK_EQ(ns_wait_cq(&ns, I.cq, wc, 1), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK_EQ(ns_wait_cq(&ns, T.cq, wc, 1), 1);
  CHECK_EQ(wc[0].wr_id, 7);
  teardown();
}

/* A request naming srqn: the initiator's WR fails with a remote invalid
 * request, the target QP goes to ERR, nothing reaches any SRQ. */
static void bad_srqn_case(uint64_t seed, int which) {
  setup(seed);
  struct uroce_wc wc[4];
  uint32_t srqn = which == 0   ? 0x00ABCD
                  : which == 1 ? uroce_eng_srq_num(T.other)
                               : uroce_eng_srq_num(T.plain);
  if (srqn == uroce_eng_srq_num(T.s1) || srqn == uroce_eng_srq_num(T.s2))
    srqn ^= 0x800000;
  CHECK_EQ(srq_recv(T.s1, 11, 0, 8192), 0);
  CHECK_EQ(srq_recv(T.other, 33, 0, 8192), 0);
  CHECK_EQ(srq_recv(T.plain, 44, 0, 8192), 0);
  CHECK_EQ(xsend(UROCE_WR_SEND, 1, srqn, 0, 100, 0, 0), 0);
  CHECK_EQ(ns_wait_cq(&ns, I.cq, wc, 1), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_REM_INV_REQ_ERR);
  struct uroce_qp_attr qa;
  struct uroce_qp_init_attr qi;
  CHECK_EQ(uroce_eng_qp_query(T.qp, &qa, &qi), 0);
  CHECK_EQ(qa.qp_state, UROCE_QPS_ERR);
  CHECK_EQ(qi.qp_type, UROCE_QPT_XRC_RECV);
  CHECK(qi.xrcd == T.xrcd);
  ns_run_idle(&ns, ns.now + 1000000000ull);
  CHECK_EQ(uroce_eng_cq_poll(T.cq, 4, wc), 0); /* no SRQ's WQE touched */
  teardown();
}

static void test_bad_srqn(void) {
  bad_srqn_case(3, 0); /* no such SRQ */
  bad_srqn_case(4, 1); /* an XRC SRQ of another domain */
  bad_srqn_case(5, 2); /* an ordinary SRQ */
}

/* The initiator's packets carry the XRC opcode and the SRQ number; the
 * target answers in XRC opcodes; a request with another number gets the
 * NAK. Driven by hand, packet by packet. */
static void test_wire(void) {
  setup(6);
  uint32_t n = uroce_eng_srq_num(T.s2);
  CHECK_EQ(srq_recv(T.s2, 5, 0, 100), 0);
  CHECK_EQ(xsend(UROCE_WR_SEND, 1, n, 0, 64, 0, 0), 0);
  static struct uroce_tx_pkt tx;
  CHECK_EQ(uroce_eng_write_pkt(ns.eng[0], &tx, ns.now), 1);
  CHECK_EQ(tx.hdr[0], UROCE_OP_XRC_BASE + UROCE_OP_SEND_ONLY);
  CHECK_EQ(tx.hdr_len, UROCE_BTH_LEN + UROCE_XRCETH_LEN);
  CHECK_EQ(uroce_xrceth_srqn(tx.hdr + UROCE_BTH_LEN), n);
  /* Deliver it to the target with the number of s1's sibling in the
   * other domain. */
  static uint8_t buf[256];
  memcpy(buf, tx.hdr, tx.hdr_len);
  memcpy(buf + tx.hdr_len, tx.seg[0].addr, 64);
  struct uroce_rx_pkt rx;
  memset(&rx, 0, sizeof(rx));
  uroce_xrceth_put(buf + UROCE_BTH_LEN, uroce_eng_srq_num(T.other));
  CHECK_EQ(uroce_pkt_parse(buf, tx.hdr_len + 64 + 4, &rx.pi), 0);
  memcpy(rx.sgid, ns.gid[0], 16);
  memcpy(rx.dgid, ns.gid[1], 16);
  CHECK_EQ(uroce_eng_read_pkt(ns.eng[1], &rx, ns.now), 0);
  CHECK_EQ(uroce_eng_write_pkt(ns.eng[1], &tx, ns.now), 1);
  CHECK_EQ(tx.hdr[0], UROCE_OP_XRC_BASE + UROCE_OP_ACK);
  CHECK_EQ(uroce_aeth_syndrome(tx.hdr + UROCE_BTH_LEN),
           uroce_aeth_syn(UROCE_AETH_NAK, UROCE_NAK_INVALID_REQ));
  /* An XRC request to an RC QP, or a response to a target, is dropped. */
  uint64_t drops = uroce_eng_stats(ns.eng[1])->drops[UROCE_DROP_TRANSPORT];
  buf[0] = UROCE_OP_XRC_BASE + UROCE_OP_ACK;
  CHECK_EQ(uroce_pkt_parse(buf, 16 + 4, &rx.pi), 0);
  CHECK_EQ(uroce_eng_read_pkt(ns.eng[1], &rx, ns.now), 0);
  CHECK_EQ(uroce_eng_stats(ns.eng[1])->drops[UROCE_DROP_TRANSPORT], drops + 1);
  teardown();
}

/* What the API refuses, and destroying objects in use. */
static void test_objects(void) {
  setup(7);
  struct uroce_wc wc[4];
  struct uroce_qp *q;
  struct uroce_qp_init_attr bad = {.qp_type = UROCE_QPT_XRC_RECV};
  CHECK_EQ(uroce_eng_qp_new(T.pd, &bad, &q), UROCE_ERR_INVALID_ARGUMENT);
  bad = (struct uroce_qp_init_attr){
      .qp_type = UROCE_QPT_XRC_SEND, .send_cq = I.cq, .cap.max_recv_wr = 4};
  CHECK_EQ(uroce_eng_qp_new(I.pd, &bad, &q), UROCE_ERR_INVALID_ARGUMENT);
  bad = (struct uroce_qp_init_attr){
      .qp_type = UROCE_QPT_RC, .send_cq = T.cq, .recv_cq = T.cq, .srq = T.s1};
  CHECK_EQ(uroce_eng_qp_new(T.pd, &bad, &q), UROCE_ERR_INVALID_ARGUMENT);
  struct uroce_srq_attr sa = {.max_wr = 4, .max_sge = 1};
  struct uroce_srq *s;
  CHECK_EQ(uroce_eng_srq_new_xrc(T.pd, T.xrcd, NULL, &sa, &s),
           UROCE_ERR_INVALID_ARGUMENT);
  /* No receive queue on either end, no send queue on the target. */
  struct uroce_sge sge = {.addr = T.mr->iova, .length = 8, .lkey = T.mr->lkey};
  struct uroce_recv_wr rwr = {.sg_list = &sge, .num_sge = 1}, *rbad;
  CHECK_EQ(uroce_eng_qp_post_recv(T.qp, &rwr, &rbad),
           UROCE_ERR_INVALID_ARGUMENT);
  CHECK_EQ(uroce_eng_qp_post_recv(I.qp, &rwr, &rbad),
           UROCE_ERR_INVALID_ARGUMENT);
  struct uroce_send_wr swr = {.opcode = UROCE_WR_SEND}, *sbad;
  CHECK_EQ(uroce_eng_qp_post_send(T.qp, &swr, &sbad),
           UROCE_ERR_INVALID_ARGUMENT);
  swr.xrc_remote_srqn = 0x1000000;
  CHECK_EQ(uroce_eng_qp_post_send(I.qp, &swr, &sbad),
           UROCE_ERR_INVALID_ARGUMENT);
  /* In use: the domain by its SRQs and QP, the CQ by the SRQs. */
  CHECK_EQ(uroce_eng_xrcd_del(T.xrcd), UROCE_ERR_BUSY);
  CHECK_EQ(uroce_eng_cq_del(T.cq), UROCE_ERR_BUSY);
  CHECK(uroce_eng_srq_xrcd(T.s1) == T.xrcd);
  CHECK(uroce_eng_srq_xrcd(T.plain) == NULL);
  CHECK(uroce_eng_qp_xrcd(T.qp) == T.xrcd);
  /* An SRQ destroyed after the target used it: the next request naming
   * its number is refused; nothing completes twice or late. */
  uint32_t n1 = uroce_eng_srq_num(T.s1);
  CHECK_EQ(srq_recv(T.s1, 1, 0, 100), 0);
  CHECK_EQ(srq_recv(T.s1, 2, 0, 100), 0);
  CHECK_EQ(xsend(UROCE_WR_SEND, 1, n1, 0, 50, 0, 0), 0);
  CHECK_EQ(ns_wait_cq(&ns, T.cq, wc, 1), 1);
  CHECK_EQ(ns_wait_cq(&ns, I.cq, wc, 1), 1);
  CHECK_EQ(uroce_eng_srq_del(T.s1), 0);
  T.s1 = NULL;
  CHECK_EQ(xsend(UROCE_WR_SEND, 2, n1, 0, 50, 0, 0), 0);
  CHECK_EQ(ns_wait_cq(&ns, I.cq, wc, 1), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_REM_INV_REQ_ERR);
  CHECK_EQ(uroce_eng_cq_poll(T.cq, 4, wc), 0);
  /* The QPs go; then the domain is free once its SRQs are. */
  uroce_eng_qp_del(T.qp);
  T.qp = NULL;
  uroce_eng_srq_del(T.s2);
  T.s2 = NULL;
  CHECK_EQ(uroce_eng_xrcd_del(T.xrcd), 0);
  T.xrcd = NULL;
  uroce_eng_qp_del(I.qp);
  uroce_eng_srq_del(T.other);
  uroce_eng_srq_del(T.plain);
  CHECK_EQ(uroce_eng_xrcd_del(T.xrcd2), 0);
  CHECK_EQ(uroce_eng_cq_del(T.cq), 0);
  ns_free(&ns);
  free(I.mem);
  free(T.mem);
}

int main(void) {
  T_RUN(test_send_two_srqs);
  T_RUN(test_rdma_atomic);
  T_RUN(test_loss);
  T_RUN(test_rnr);
  T_RUN(test_bad_srqn);
  T_RUN(test_wire);
  T_RUN(test_objects);
  return T_DONE();
}
