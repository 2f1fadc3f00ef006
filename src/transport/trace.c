/* The engine's trace: events as named JSON members (docs/transport.md
 * "Trace"). Where the events come from is in qp.h (eng_trace and the
 * calls next to each counter they mirror). */
#include <inttypes.h>
#include <stdio.h>

#include "transport/qp.h"

static const char *const kind_names[UROCE_TR_COUNT] = {
    [UROCE_TR_QP_STATE] = "qp_state", [UROCE_TR_REQ] = "req",
    [UROCE_TR_RESP] = "resp",         [UROCE_TR_COMP] = "comp",
    [UROCE_TR_GO_BACK] = "go_back",   [UROCE_TR_RESEND] = "resend",
    [UROCE_TR_NAK_TX] = "nak_tx",     [UROCE_TR_NAK_RX] = "nak_rx",
    [UROCE_TR_TIMEOUT] = "timeout",   [UROCE_TR_CNP_TX] = "cnp_tx",
    [UROCE_TR_CNP_RX] = "cnp_rx",     [UROCE_TR_CC] = "cc",
    [UROCE_TR_DROP] = "drop",
};

static const char *const cause_names[UROCE_TRC_COUNT] = {
    [UROCE_TRC_NAK] = "nak",         [UROCE_TRC_RNR] = "rnr",
    [UROCE_TRC_TIMEOUT] = "timeout", [UROCE_TRC_GAP] = "gap",
    [UROCE_TRC_PROBE] = "probe",     [UROCE_TRC_CNP] = "cnp",
    [UROCE_TRC_ACK] = "ack",         [UROCE_TRC_RTT] = "rtt",
    [UROCE_TRC_TIMER] = "timer",     [UROCE_TRC_TRIM] = "trim",
};

static const char *name_of(const char *const *names, unsigned n, unsigned i) {
  return i < n && names[i] ? names[i] : "?";
}

const char *uroce_eng_trace_kind_name(int kind) {
  return name_of(kind_names, UROCE_TR_COUNT, (unsigned)kind);
}

static const char *qp_type_name(uint8_t t) {
  return t == UROCE_QPT_RC    ? "RC"
         : t == UROCE_QPT_UC  ? "UC"
         : t == UROCE_QPT_UD  ? "UD"
         : t == UROCE_QPT_GSI ? "GSI"
                              : "?";
}

static const char *syndrome_name(uint8_t syn) {
  switch (uroce_aeth_kind(syn)) {
  case UROCE_AETH_RNR_NAK:
    return "RNR";
  case UROCE_AETH_NAK:
    return uroce_nak_name(syn & 31);
  default:
    return "?";
  }
}

/* The members after "ev", "qpn", "type", "psn" that the kind carries. */
static int kind_json(const struct uroce_trace_ev *ev, char *b, size_t n) {
  switch ((enum uroce_trace_kind)ev->kind) {
  case UROCE_TR_QP_STATE:
    return snprintf(b, n, ", \"from\": \"%s\", \"to\": \"%s\"",
                    uroce_qp_state_name(ev->a), uroce_qp_state_name(ev->b));
  case UROCE_TR_REQ:
    return snprintf(b, n, ", \"from\": \"%s\", \"to\": \"%s\"",
                    name_of(uroce_req_state_names, REQST_COUNT, ev->a),
                    name_of(uroce_req_state_names, REQST_COUNT, ev->b));
  case UROCE_TR_RESP:
    return snprintf(b, n, ", \"state\": \"%s\"",
                    name_of(uroce_resp_state_names, RESPST_COUNT, ev->a));
  case UROCE_TR_COMP:
    return snprintf(b, n, ", \"state\": \"%s\"",
                    name_of(uroce_comp_state_names, COMPST_COUNT, ev->a));
  case UROCE_TR_GO_BACK:
  case UROCE_TR_RESEND:
    return snprintf(b, n, ", \"cause\": \"%s\"",
                    name_of(cause_names, UROCE_TRC_COUNT, ev->a));
  case UROCE_TR_NAK_TX:
  case UROCE_TR_NAK_RX:
    return snprintf(b, n, ", \"nak\": \"%s\"", syndrome_name(ev->a));
  case UROCE_TR_TIMEOUT:
    return snprintf(b, n, ", \"cause\": \"%s\", \"retries_left\": %u",
                    name_of(cause_names, UROCE_TRC_COUNT, ev->a), ev->b);
  case UROCE_TR_CC:
    return snprintf(
        b, n,
        ", \"cause\": \"%s\", \"rate_bps\": %" PRIu64 ", \"cwnd\": %" PRIu64,
        name_of(cause_names, UROCE_TRC_COUNT, ev->a), ev->rate, ev->cwnd);
  case UROCE_TR_DROP:
    return snprintf(b, n, ", \"why\": \"%s\"", uroce_eng_drop_name(ev->a));
  case UROCE_TR_CNP_TX:
  case UROCE_TR_CNP_RX:
  case UROCE_TR_COUNT:
    break;
  }
  return 0;
}

int uroce_eng_trace_json(const struct uroce_trace_ev *ev, char *buf, size_t n) {
  /* QP states, CNPs and CC decisions concern no packet of a PSN. */
  bool psn = ev->kind != UROCE_TR_QP_STATE && ev->kind != UROCE_TR_CC &&
             ev->kind != UROCE_TR_CNP_TX && ev->kind != UROCE_TR_CNP_RX;
  int k = snprintf(buf, n, "\"ev\": \"%s\", \"qpn\": %" PRIu32,
                   uroce_eng_trace_kind_name(ev->kind), ev->qpn);
  if (ev->qp_type && k >= 0 && (size_t)k < n) /* 0: the packet named no QP */
    k += snprintf(buf + k, n - (size_t)k, ", \"type\": \"%s\"",
                  qp_type_name(ev->qp_type));
  if (psn && k >= 0 && (size_t)k < n)
    k += snprintf(buf + k, n - (size_t)k, ", \"psn\": %" PRIu32, ev->psn);
  if (k < 0 || (size_t)k >= n)
    return -1;
  int m = kind_json(ev, buf + k, n - (size_t)k);
  if (m < 0 || (size_t)m >= n - (size_t)k)
    return -1;
  return k + m;
}

int uroce_eng_trace_line(const struct uroce_trace_ev *ev, uint64_t t_ns,
                         const char *who, char *buf, size_t n) {
  int k = snprintf(buf, n, "{\"t_us\": %" PRIu64 ".%03u, %s, ", t_ns / 1000,
                   (unsigned)(t_ns % 1000), who);
  if (k < 0 || (size_t)k >= n)
    return -1;
  int m = uroce_eng_trace_json(ev, buf + k, n - (size_t)k - 1);
  if (m < 0)
    return -1;
  buf[k + m] = '}';
  buf[k + m + 1] = 0;
  return k + m + 1;
}

void uroce_eng_set_trace(struct uroce_eng *eng, uroce_trace_fn fn, void *ctx) {
  eng->trace = fn;
  eng->trace_ctx = ctx;
}

void eng_trace_ev(struct uroce_eng *eng, const struct uroce_qp *qp,
                  uint32_t qpn, uint8_t kind, uint32_t psn, uint8_t a,
                  uint8_t b) {
  struct uroce_trace_ev ev = {
      .t_ns = eng->now,
      .qpn = qp ? qp->qpn : qpn,
      .qp_type = qp ? qp->type : 0,
      .psn = psn,
      .kind = kind,
      .a = a,
      .b = b,
  };
  eng->trace(eng->trace_ctx, &ev);
}

static uint64_t cc_rate(const struct uroce_qp *qp) {
  const struct uroce_cc_ops *cc = qp->eng->cc;
  return cc->rate ? cc->rate(qp->cc_state) : 0;
}

static uint64_t cc_cwnd(const struct uroce_qp *qp) {
  const struct uroce_cc_ops *cc = qp->eng->cc;
  return cc->cwnd ? cc->cwnd(qp->cc_state) : 0;
}

/* A cut, or a rise of 1/64 or more: Swift's window grows a little on every
 * acknowledgement, which would otherwise be an event each. */
static bool moved(uint64_t told, uint64_t now) {
  return now < told || now - told >= (told >> 6) + (told == 0);
}

void eng_trace_cc(struct uroce_qp *qp, uint64_t now, uint8_t cause) {
  uint64_t rate = cc_rate(qp), cwnd = cc_cwnd(qp);
  if (!moved(qp->tr_rate, rate) && !moved(qp->tr_cwnd, cwnd))
    return;
  qp->tr_rate = rate;
  qp->tr_cwnd = cwnd;
  struct uroce_trace_ev ev = {
      .t_ns = now,
      .qpn = qp->qpn,
      .qp_type = qp->type,
      .kind = UROCE_TR_CC,
      .a = cause,
      .rate = rate,
      .cwnd = cwnd,
  };
  qp->eng->trace(qp->eng->trace_ctx, &ev);
}
