/* The engine's trace (docs/transport.md "Trace"): every counter the
 * engine keeps for a protocol event has its events, one each, on the
 * engine and QP it concerns; QP and requester states come in the order
 * they are taken; congestion control's cuts are told with their cause;
 * every event has a name and formats as JSON; no hook, no events. */
#include <stdio.h>
#include <string.h>

#include "netsim.h"
#include "t.h"
#include "tphelp.h"
#include "transport/cc_dcqcn.h"
#include "transport/qp.h"

#define MAX_EV 200000

struct log {
  int node;
  uint64_t n[UROCE_TR_COUNT];
  uint64_t drops[UROCE_DROP_COUNT];
  uint64_t nak_rnr, nak_seq, go_back[UROCE_TRC_COUNT];
  uint64_t cc_cuts, cc_cnp, last_t;
  bool time_backwards, bad_json, unnamed;
  uint32_t nstates;
  uint8_t states[16][2];
  uint32_t qpn;
};

static struct netsim ns;
static struct tp_end A, B;
static struct log la = {.node = 0}, lb = {.node = 1};

static void hook(void *ctx, const struct uroce_trace_ev *ev) {
  struct log *l = ctx;
  CHECK(ev->kind < UROCE_TR_COUNT);
  if (ev->kind >= UROCE_TR_COUNT)
    return;
  l->n[ev->kind]++;
  if (ev->t_ns < l->last_t)
    l->time_backwards = true;
  l->last_t = ev->t_ns;
  char buf[512];
  int n = uroce_eng_trace_json(ev, buf, sizeof buf);
  if (n <= 0 || (size_t)n != strlen(buf))
    l->bad_json = true;
  if (strstr(buf, "\"?\""))
    l->unnamed = true;
  /* Too short a buffer is refused, never overrun. */
  char small[8];
  if (uroce_eng_trace_json(ev, small, sizeof small) != -1)
    l->bad_json = true;
  switch (ev->kind) {
  case UROCE_TR_QP_STATE:
    if (l->nstates < 16) {
      l->states[l->nstates][0] = ev->a;
      l->states[l->nstates][1] = ev->b;
      l->nstates++;
    }
    l->qpn = ev->qpn;
    break;
  case UROCE_TR_DROP:
    if (ev->a < UROCE_DROP_COUNT)
      l->drops[ev->a]++;
    break;
  case UROCE_TR_NAK_TX:
    if (uroce_aeth_kind(ev->a) == UROCE_AETH_RNR_NAK)
      l->nak_rnr++;
    else if (uroce_aeth_kind(ev->a) == UROCE_AETH_NAK)
      l->nak_seq++;
    break;
  case UROCE_TR_GO_BACK:
    if (ev->a < UROCE_TRC_COUNT)
      l->go_back[ev->a]++;
    break;
  case UROCE_TR_CC:
    l->cc_cnp += ev->a == UROCE_TRC_CNP;
    l->cc_cuts += ev->rate && ev->rate < 100000000000ull;
    break;
  default:
    break;
  }
}

/* A WRITE of len bytes from A to B, to its completion. */
static void write_a_to_b(uint32_t len) {
  CHECK_EQ(tp_post_send(&A, UROCE_WR_RDMA_WRITE, 1, 0, len, UROCE_SEND_SIGNALED,
                        B.mr->iova, B.mr->rkey),
           0);
  struct uroce_wc wc[1];
  CHECK_EQ(ns_wait_cq(&ns, A.scq, wc, 1), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
}

/* Two engines traced from before their QPs exist. */
static void setup(uint32_t flags, const struct uroce_cc_ops *cc,
                  const void *cc_params) {
  memset(&la, 0, sizeof la);
  memset(&lb, 0, sizeof lb);
  lb.node = 1;
  struct uroce_eng_cfg cfg = {.flags = flags, .cc = cc, .cc_params = cc_params};
  CHECK_EQ(ns_init(&ns, 2, 5, &cfg), 0);
  uroce_eng_set_trace(ns.eng[0], hook, &la);
  uroce_eng_set_trace(ns.eng[1], hook, &lb);
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_1024;
  o.timeout = 8;
  CHECK_EQ(tp_end_init(&A, ns.eng[0], ns.gid[0], &o), 0);
  CHECK_EQ(tp_end_init(&B, ns.eng[1], ns.gid[1], &o), 0);
  CHECK_EQ(tp_connect(&A, &B, &o), 0);
}

static void teardown(void) {
  tp_end_free(&A);
  tp_end_free(&B);
  ns_free(&ns);
}

/* Each counter the engine keeps for an event, and the events traced. */
static void check_mirrors(const struct log *l, struct uroce_eng *eng) {
  const struct uroce_eng_stats *st = uroce_eng_stats(eng);
  CHECK_EQ(l->n[UROCE_TR_GO_BACK], st->go_backs);
  CHECK_EQ(l->n[UROCE_TR_TIMEOUT], st->timeouts);
  CHECK_EQ(l->nak_seq, st->naks_tx);
  CHECK_EQ(l->nak_rnr, st->rnr_naks_tx);
  CHECK_EQ(l->n[UROCE_TR_CNP_TX], st->cnps_tx);
  CHECK_EQ(l->n[UROCE_TR_CNP_RX], st->cnps_rx);
  CHECK_EQ(l->n[UROCE_TR_RESEND], st->mp_retx_pkts);
  for (int d = 0; d < UROCE_DROP_COUNT; d++)
    CHECK_EQ(l->drops[d], st->drops[d]);
  CHECK(!l->time_backwards);
  CHECK(!l->bad_json);
  CHECK(!l->unnamed);
}

/* A 200 KB WRITE over a link losing every 9th request, every request
 * CE-marked, DCQCN at the requester: go-back-N after sequence NAKs (and a
 * timeout when a last packet is lost), CNPs both ways, rate cuts. */
static void test_standard_loss_and_cc(void) {
  struct uroce_dcqcn_params p;
  uroce_dcqcn_params_mlx(&p, 100000000000ull);
  setup(UROCE_ENG_STANDARD, &uroce_cc_dcqcn, &p);
  ns.link[0][1].every_nth = 9;
  ns.link[0][1].ce = 1.0;
  write_a_to_b(200000);
  check_mirrors(&la, ns.eng[0]);
  check_mirrors(&lb, ns.eng[1]);
  CHECK(la.n[UROCE_TR_GO_BACK] > 0);
  CHECK_EQ(la.go_back[UROCE_TRC_NAK] + la.go_back[UROCE_TRC_TIMEOUT] +
               la.go_back[UROCE_TRC_GAP],
           la.n[UROCE_TR_GO_BACK]);
  CHECK(la.go_back[UROCE_TRC_NAK] > 0);
  CHECK(lb.n[UROCE_TR_NAK_TX] > 0);
  CHECK_EQ(la.n[UROCE_TR_NAK_RX], lb.n[UROCE_TR_NAK_TX]);
  CHECK(lb.n[UROCE_TR_CNP_TX] > 0);
  CHECK(la.cc_cnp > 0 && la.cc_cuts > 0);
  /* the responder steps through every request it gets */
  CHECK(lb.n[UROCE_TR_RESP] >= 200000 / 1024);
  CHECK(la.n[UROCE_TR_COMP] > 0);
  /* the connect: RESET -> INIT -> RTR -> RTS, in that order */
  CHECK(la.nstates >= 3);
  CHECK(la.states[0][0] == UROCE_QPS_RESET &&
        la.states[0][1] == UROCE_QPS_INIT);
  CHECK(la.states[1][0] == UROCE_QPS_INIT && la.states[1][1] == UROCE_QPS_RTR);
  CHECK(la.states[2][0] == UROCE_QPS_RTR && la.states[2][1] == UROCE_QPS_RTS);
  CHECK_EQ(la.qpn, uroce_qp_num(A.qp));
  /* an error moves it once more, and says so */
  struct uroce_qp_attr a = {.qp_state = UROCE_QPS_ERR};
  uint32_t before = la.nstates;
  CHECK_EQ(uroce_eng_qp_modify(A.qp, &a, UROCE_QP_STATE), 0);
  CHECK_EQ(la.nstates, before + 1);
  CHECK(la.states[before][0] == UROCE_QPS_RTS &&
        la.states[before][1] == UROCE_QPS_ERR);
  teardown();
}

/* Multipath with loss: resends of the gaps, each counted. A receive
 * queue left empty for a SEND: RNR NAKs and go-backs for them. */
static void test_multipath_and_rnr(void) {
  setup(UROCE_ENG_MULTIPATH, 0, 0);
  ns.link[0][1].loss = 0.05;
  write_a_to_b(400000);
  CHECK(la.n[UROCE_TR_RESEND] > 0);
  check_mirrors(&la, ns.eng[0]);
  check_mirrors(&lb, ns.eng[1]);
  teardown();

  setup(UROCE_ENG_STANDARD, 0, 0);
  CHECK_EQ(tp_post_send(&A, UROCE_WR_SEND, 2, 0, 64, UROCE_SEND_SIGNALED, 0, 0),
           0);
  for (int i = 0; i < 2000 && !lb.nak_rnr; i++)
    ns_step(&ns);
  CHECK(lb.nak_rnr > 0);
  CHECK_EQ(tp_post_recv(&B, 3, 0, 64), 0);
  struct uroce_wc wc[1];
  CHECK_EQ(ns_wait_cq(&ns, A.scq, wc, 1), 1);
  CHECK_EQ(wc[0].status, UROCE_WC_SUCCESS);
  CHECK(la.go_back[UROCE_TRC_RNR] > 0);
  check_mirrors(&la, ns.eng[0]);
  check_mirrors(&lb, ns.eng[1]);
  teardown();
}

/* Packets naming no QP, or the wrong peer: drops, traced with the QPN the
 * packet named. Without a hook nothing is called. */
static void test_drops_and_no_hook(void) {
  setup(UROCE_ENG_STANDARD, 0, 0);
  uint8_t bth[16] = {0}; /* BTH, then the ICRC's room */
  uroce_bth_put(bth, UROCE_OP_SEND_ONLY, false, false, 0, 0xFFFF, false, false,
                0x123456, false, 7);
  struct uroce_rx_pkt rx = {0};
  CHECK_EQ(uroce_pkt_parse(bth, sizeof bth, &rx.pi), 0);
  memcpy(rx.sgid, ns.gid[0], 16);
  uint64_t before = lb.drops[UROCE_DROP_NO_QP];
  uroce_eng_read_pkt(ns.eng[1], &rx, ns.now);
  CHECK_EQ(lb.drops[UROCE_DROP_NO_QP], before + 1);
  check_mirrors(&lb, ns.eng[1]);

  uroce_eng_set_trace(ns.eng[1], 0, 0);
  uint64_t all = 0;
  for (int k = 0; k < UROCE_TR_COUNT; k++)
    all += lb.n[k];
  uroce_eng_read_pkt(ns.eng[1], &rx, ns.now);
  uint64_t after = 0;
  for (int k = 0; k < UROCE_TR_COUNT; k++)
    after += lb.n[k];
  CHECK_EQ(after, all);
  teardown();
}

static void test_names(void) {
  for (int k = 0; k < UROCE_TR_COUNT; k++)
    CHECK(strcmp(uroce_eng_trace_kind_name(k), "?") != 0);
  CHECK(!strcmp(uroce_eng_trace_kind_name(UROCE_TR_COUNT), "?"));
  CHECK(!strcmp(uroce_eng_trace_kind_name(-1), "?"));
  /* a QP-state event carries no PSN; a drop does */
  struct uroce_trace_ev ev = {.kind = UROCE_TR_QP_STATE, .qpn = 9, .b = 3};
  char buf[256];
  CHECK(uroce_eng_trace_json(&ev, buf, sizeof buf) > 0);
  CHECK(!strstr(buf, "psn"));
  CHECK(strstr(buf, "\"to\": \"RTS\""));
  ev = (struct uroce_trace_ev){
      .kind = UROCE_TR_DROP, .psn = 42, .a = UROCE_DROP_PSN};
  CHECK(uroce_eng_trace_json(&ev, buf, sizeof buf) > 0);
  CHECK(strstr(buf, "\"psn\": 42") && strstr(buf, "\"why\": \"psn\""));
}

int main(void) {
  T_RUN(test_names);
  T_RUN(test_standard_loss_and_cc);
  T_RUN(test_multipath_and_rnr);
  T_RUN(test_drops_and_no_hook);
  return T_DONE();
}
