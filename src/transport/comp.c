/* The completer (RC): consumes ACKs, NAKs, READ responses and atomic
 * acknowledgements, completes send WQEs in order, and drives recovery:
 * go-back-N on a sequence NAK, a READ-response gap or a timeout; waiting
 * on an RNR NAK; and the retry and RNR-retry counters. */
#include "transport/qp.h"
#include "uroce/errors.h"

const char *const uroce_comp_state_names[COMPST_COUNT] = {
    [COMPST_GET_WQE] = "GET_WQE",
    [COMPST_CHECK_PSN] = "CHECK_PSN",
    [COMPST_CHECK_ACK] = "CHECK_ACK",
    [COMPST_ACK] = "ACK",
    [COMPST_RNR_NAK] = "RNR_NAK",
    [COMPST_NAK] = "NAK",
    [COMPST_CHECK_RESP] = "CHECK_RESP",
    [COMPST_READ] = "READ",
    [COMPST_ATOMIC] = "ATOMIC",
    [COMPST_COMP_WQE] = "COMP_WQE",
    [COMPST_UPDATE] = "UPDATE",
    [COMPST_ERROR_RETRY] = "ERROR_RETRY",
    [COMPST_RNR_RETRY] = "RNR_RETRY",
    [COMPST_ERROR] = "ERROR",
    [COMPST_MP_ACK] = "MP_ACK",
    [COMPST_MP_READ] = "MP_READ",
    [COMPST_MP_ATOMIC] = "MP_ATOMIC",
    [COMPST_MP_NAK] = "MP_NAK",
    [COMPST_MP_UPDATE] = "MP_UPDATE",
    [COMPST_DROP] = "DROP",
    [COMPST_DONE] = "DONE",
};

void comp_reset(struct uroce_qp *qp) {
  qp->comp.psn = qp->comp.gb_psn = qp->comp.gb_hi = qp->attr_sq_psn;
  qp->comp.rereqs = 0;
  qp->comp.has_last = qp->comp.answer = false;
  qp->comp.back_wait = qp->comp.free_retry = false;
  qp->comp.refusals = 0;
  qp->comp.back_heard = qp->comp.back_silent = 0;
  qp->comp.back_n = 0;
}

/* Something sent waits for its answer. WQEs completed in this pass but
 * not yet drained (qp_drain_sq runs last) are answered: counting them
 * left a ping-pong's timer armed from each message into the next, where
 * a multipath probe timeout of a few RTTs fired on a message sent
 * microseconds before (11% of 64 B round trips on an idle loopback). */
static bool outstanding(struct uroce_qp *qp) {
  uint32_t i = qp->sq_tail;
  while (i != qp->req.idx && sq_at(qp, i)->state == WQE_DONE)
    i++;
  return i != qp->req.idx || qp->req.off != 0 || qp->comp.psn != qp->req.psn;
}

/* The oldest WQE still waiting for its response, or NULL. */
static struct swqe *oldest(struct uroce_qp *qp) {
  for (uint32_t i = qp->sq_tail; i != qp->sq_head; i++) {
    struct swqe *w = sq_at(qp, i);
    if (w->state != WQE_DONE)
      return w->state == WQE_SENDING || w->state == WQE_PENDING ? w : 0;
  }
  return 0;
}

/* comp.psn is the first PSN of a READ or atomic whose request the latest
 * go-back has sent again: its answer is on its way, and what arrives
 * before it (a duplicate's ACK naming the responder's latest PSN, a
 * response of a later READ) tells nothing new. Counted as re-requested
 * once, and any of its responses starts that answer: asking again at the
 * first of those asked twice for one loss (READ-loss seed 99092, which
 * then spent retry_cnt 3). */
static bool resent_head(struct uroce_qp *qp) {
  struct comp *c = &qp->comp;
  if (uroce_psn_cmp(c->psn, c->gb_psn) <= 0 ||
      uroce_psn_cmp(c->psn, c->gb_hi) >= 0 ||
      uroce_psn_cmp(qp->req.psn, c->psn) <= 0)
    return false;
  struct swqe *w = oldest(qp);
  if (!w || !wr_is_rd_atomic(w->opcode) || w->first_psn != c->psn)
    return false;
  c->last = w->last_psn;
  c->has_last = true;
  return true;
}

static void progress(struct uroce_qp *qp, uint64_t now, uint64_t bytes) {
  req_rtt(qp, now);
  qp->req.retry_left = qp->retry_cnt;
  qp->req.rnr_left = qp->rnr_retry;
  qp->req.probe = false;
  qp->comp.rereqs = resent_head(qp) ? 1 : 0;
  qp->comp.answer = false;
  qp->comp.back_wait = false; /* the READ moved on: no verdict needed */
  qp->req.rto_deadline = outstanding(qp) && rto_ns(qp) != UINT64_MAX
                             ? now + rto_ns(qp)
                             : UINT64_MAX;
  qp->eng->cc->on_ack(qp->cc_state, now, bytes);
  qp_trace_cc(qp, now, UROCE_TRC_ACK);
}

/* The responder has executed every request before psn + 1: completes the
 * SEND/WRITE WQEs that ends covers and moves comp.psn. Returns false if a
 * READ or atomic lies in that range without its response: then those
 * responses were lost and the requester must go back to comp.psn. */
static bool ack_through(struct uroce_qp *qp, uint32_t psn, uint64_t now) {
  uint64_t bytes = 0;
  bool ok = true;
  if (uroce_psn_cmp(psn, qp->comp.psn) < 0)
    return true; /* acks nothing new */
  for (uint32_t i = qp->sq_tail; i != qp->sq_head; i++) {
    struct swqe *w = sq_at(qp, i);
    if (w->state == WQE_DONE && wr_is_local(w->opcode))
      continue; /* a window bound or invalidated: no PSN */
    if (w->state == WQE_POSTED || w->state == WQE_DONE)
      break;
    if (uroce_psn_cmp(psn, w->first_psn) < 0)
      break;
    if (wr_is_rd_atomic(w->opcode)) {
      ok = false; /* executed, but the data never came */
      break;
    }
    if (uroce_psn_cmp(psn, w->last_psn) < 0) {
      /* Part of a multi-packet message: the window moves on. */
      qp->comp.psn = uroce_psn_add(psn, 1);
      break;
    }
    w->state = WQE_DONE;
    w->status = UROCE_WC_SUCCESS;
    bytes += w->length;
    qp->comp.psn = uroce_psn_add(w->last_psn, 1);
  }
  if (bytes || uroce_psn_cmp(psn, qp->comp.psn) < 0)
    progress(qp, now, bytes);
  return ok;
}

static void fail_wqe(struct uroce_qp *qp, struct swqe *w, uint8_t status) {
  w->state = WQE_DONE;
  w->status = status;
  qp->req.state = REQST_ERROR;
  qp->req.rto_deadline = UINT64_MAX;
  qp_drain_sq(qp);
}

static void go_back(struct uroce_qp *qp, uint32_t psn, uint64_t now,
                    enum uroce_trace_cause why) {
  qp->eng->stats.go_backs++;
  qp_trace(qp, UROCE_TR_GO_BACK, psn, why, 0);
  qp->comp.answer = false; /* gap_retry waits for this one's */
  qp->comp.gb_psn = psn; /* [psn, gb_hi) is sent again */
  qp->comp.gb_hi = qp->req.max_psn;
  req_rewind(qp, psn);
  qp->req.rto_deadline =
      rto_ns(qp) != UINT64_MAX ? now + rto_ns(qp) : UINT64_MAX;
}

/* One retry: false if the retry counter is spent (7 = unlimited). */
static bool use_retry(struct uroce_qp *qp) {
  if (qp->retry_cnt == 7)
    return true;
  if (!qp->req.retry_left)
    return false;
  qp->req.retry_left--;
  return true;
}

/* A READ re-requested again because the answer lost comp.psn again: the
 * loss may be periodic and the answer (the rest of the READ) as long as its
 * period, which takes the same packet each time. Starting the answer one
 * PSN earlier per failure (a few duplicate responses) moves comp.psn to
 * another place in that pattern. Not every responder takes it: rxe
 * (rxe_resp.c duplicate_request) moves a READ's start address to each
 * re-request's and drops, unanswered, one that starts before it. So each
 * such re-request waits for the responder's verdict (back_seen) before
 * the next, and once one was ignored the QP backs off again only after
 * 8, then 16, 32 ... 128 failed re-requests of one PSN: a verdict can be
 * wrong (two requests lost in a row look ignored; mixed seed 88178 then
 * re-requested one PSN for ever), and against rxe a stall that long is
 * one anyway. Not once the retries are spent: a back-off costs its retry
 * only at the verdict, and the next go-back must fail the QP. */
static bool back_off(struct uroce_qp *qp) {
  struct swqe *w = oldest(qp);
  struct comp *c = &qp->comp;
  uint32_t again = c->refusals > 5 ? 128 : 4u << c->refusals;
  if (c->rereqs < 2 || (c->refusals && c->rereqs < again) || c->back_wait ||
      !w || w->opcode != UROCE_WR_RDMA_READ ||
      uroce_psn_cmp(c->psn, w->first_psn) <= 0 ||
      (qp->retry_cnt != 7 && !qp->req.retry_left))
    return false;
  c->back_wait = true;
  c->back_paid = false;
  c->back_heard = BACK_NONE;
  c->back_silent = 0;
  c->back_n = c->rereqs - 1u;
  return true;
}

/* The responder ignored a re-request that started before an earlier one
 * (it cost no retry: the network lost nothing). */
static void refused(struct uroce_qp *qp) {
  qp->comp.back_wait = false;
  qp->comp.free_retry = true;
  if (!qp->comp.refusals)
    qp->eng->stats.back_refused++;
  if (qp->comp.refusals < UINT8_MAX)
    qp->comp.refusals++;
}

/* The verdict on a re-request that started before an earlier one, from
 * the first response of the answer after it (beyond: past the oldest
 * READ). A response inside the READ is the responder sending it again
 * from there on: taken, and comp.psn lost again costs a retry. An answer
 * that starts beyond the READ is the responder going on without it:
 * ignored, as rxe does. */
static void back_seen(struct uroce_qp *qp, bool beyond) {
  if (beyond) {
    refused(qp);
    return;
  }
  qp->comp.back_wait = false;
  if (!qp->comp.back_paid)
    (void)use_retry(qp);
}

/* Evidence for the verdict, kept until the next re-request or timeout
 * asks for it: the first response of an answer (beyond: past the oldest
 * READ), or a READ response below comp.psn, which only the re-request
 * that started further back asked for again. */
static void back_heard(struct uroce_qp *qp, bool beyond) {
  if (qp->comp.back_wait && qp->comp.back_heard == BACK_NONE)
    qp->comp.back_heard = beyond ? BACK_BEYOND : BACK_IN;
}

/* The timer ran out on a re-request that started further back. An answer
 * inside the READ: taken, and the timeout is its failure (the retry it
 * costs is the verdict's). One beyond the READ: ignored. None at all is
 * what rxe gives one it ignores, but also what a lost request (or a lost
 * answer) gives: the same is sent once more, and only a second silence is
 * taken as ignored (a lost request once made the QP stop backing off for
 * good, and a periodic loss then took the same response of every
 * re-request: mixed seeds 13463, 16813); the first silence costs its
 * retry, given back at the second (against rxe a refusal otherwise spent
 * one: READ-loss seed 39877 failed after three losses with retry count
 * 3). Returns true if this timeout costs no retry (ignored: the network
 * lost nothing) and sets *again to send the same. */
static bool back_timeout(struct uroce_qp *qp, bool *again) {
  struct comp *c = &qp->comp;
  *again = false;
  if (c->back_heard == BACK_BEYOND ||
      (c->back_heard == BACK_NONE && ++c->back_silent >= 2)) {
    /* The first silence cost a retry: it was the same refusal. */
    if (c->back_silent >= 2 && qp->req.retry_left < qp->retry_cnt)
      qp->req.retry_left++;
    refused(qp);
    return true;
  }
  if (c->back_heard == BACK_IN)
    c->back_wait = false;
  else
    *again = true;
  return false;
}

/* Evidence at psn (a later response, or an ACK or NAK beyond the READ or
 * atomic; resp: a READ response or atomic ack) that the response at
 * comp.psn was lost. The first since comp.psn moved asks again at once.
 * After that, every packet the responder sent before the re-request is the
 * same evidence again, and re-requesting on each restarts its stream again
 * and again. The responder answers requests in order, so each answer to a
 * go-back (the oldest READ from comp.psn, then every request resent after
 * it) carries responses in climbing PSN order, and the next answer starts
 * below where the one before it got to: a response at or below the latest
 * one seen is the answer to the latest re-request, and it lacks comp.psn.
 * Only that asks again, on its 1st response after the 1st re-request,
 * its 2nd after the 2nd, then the 4th ... (up to 64): a periodic loss that
 * took the first answer's first packet would take the same packet of
 * answers sent at the same phase (mixed seeds 39359, 73139: every 3rd or
 * 12th packet lost). ACKs tell nothing of which answer they belong to (a
 * duplicate's ACK names the latest PSN, whatever was resent), so they
 * neither start nor count; a re-request whose answer shows no response at
 * all, or too few to count, waits for the timer. */
static bool gap_retry(struct uroce_qp *qp, uint32_t psn, bool resp,
                      bool beyond) {
  struct comp *c = &qp->comp;
  bool restart = resp && c->has_last && uroce_psn_cmp(psn, c->last) <= 0;
  if (restart)
    back_heard(qp, beyond);
  if (resp) {
    c->last = psn;
    c->has_last = true;
  }
  if (c->rereqs) {
    if (restart && !c->answer) {
      uint32_t shift = c->rereqs - 1u < 6 ? c->rereqs - 1u : 6;
      c->answer = true;
      c->answer_ev = 1u << shift;
    }
    if (!c->answer || !resp || --c->answer_ev)
      return false;
  }
  c->answer = false;
  if (c->back_wait) /* the verdict on a re-request that started earlier */
    back_seen(qp, c->back_heard ? c->back_heard == BACK_BEYOND : beyond);
  if (c->rereqs < UINT8_MAX)
    c->rereqs++;
  return true;
}

/* ---- response packets in: one function per state ---- */

/* One response packet as the completer's steps see it. */
struct comp_pkt {
  struct uroce_qp *qp;
  const struct uroce_pkt_info *pi;
  uint64_t now;
  uint32_t mask, psn;
  const uint8_t *aeth; /* NULL for a READ response MIDDLE */
  uint8_t syn;         /* the AETH syndrome, 0 without one */
  struct swqe *w;      /* the READ or atomic WQE a response is for */
  uint8_t status;      /* the completion status COMPST_ERROR gives */
  bool delivered;      /* multipath: a PSN arrived that had not */
  enum uroce_drop why; /* counted by COMPST_DROP */
};

static enum comp_state drop(struct comp_pkt *c, enum uroce_drop why) {
  c->why = why;
  return COMPST_DROP;
}

/* Evidence that a READ response or atomic ack was lost: go back now
 * (gap_retry), or else carry on with the state otherwise. */
static enum comp_state on_gap(struct comp_pkt *c, enum comp_state otherwise) {
  return gap_retry(c->qp, c->psn, false, true) ? COMPST_ERROR_RETRY
                                                : otherwise;
}

static enum comp_state get_wqe(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  if (qp->type != UROCE_QPT_RC || qp->req.state == REQST_ERROR || !oldest(qp))
    return drop(c, UROCE_DROP_RESPONSE);
  return COMPST_CHECK_PSN;
}

/* Only PSNs from comp.psn up to the last one sent mean anything (a
 * selective ACK's bitmap may, whatever its acknowledged PSN). */
static enum comp_state check_psn(struct comp_pkt *c) {
  if (uroce_psn_cmp(c->psn, c->qp->req.max_psn) >= 0)
    return drop(c, UROCE_DROP_RESPONSE);
  if (uroce_psn_cmp(c->psn, c->qp->comp.psn) < 0 &&
      !(qp_mp(c->qp) && c->pi->opcode == UROCE_OP_MP_SACK)) {
    if ((c->mask & UROCE_OPM_READ) &&
        uroce_psn_diff(c->qp->comp.psn, c->psn) <= (int32_t)c->qp->comp.back_n)
      back_heard(c->qp, false);
    return drop(c, UROCE_DROP_DUPLICATE);
  }
  return COMPST_CHECK_ACK;
}

static enum comp_state mp_check_ack(struct comp_pkt *c);

/* Sorts the packet: an ACK, RNR NAK or NAK, or a READ response or atomic
 * ack (whose AETH, when it has one, must be a plain ACK). */
static enum comp_state check_ack(struct comp_pkt *c) {
  if (qp_mp(c->qp))
    return mp_check_ack(c);
  if (!(c->mask & UROCE_OPM_ACK)) {
    if (c->aeth && uroce_aeth_kind(c->syn) != UROCE_AETH_ACK)
      return drop(c, UROCE_DROP_RESPONSE);
    return COMPST_CHECK_RESP;
  }
  switch (uroce_aeth_kind(c->syn)) {
  case UROCE_AETH_ACK:
    return COMPST_ACK;
  case UROCE_AETH_RNR_NAK:
    return COMPST_RNR_NAK;
  case UROCE_AETH_NAK:
    return COMPST_NAK;
  default:
    return drop(c, UROCE_DROP_RESPONSE);
  }
}

/* Every request through psn executed. */
static enum comp_state ack(struct comp_pkt *c) {
  if (!ack_through(c->qp, c->psn, c->now))
    return on_gap(c, COMPST_UPDATE);
  return COMPST_UPDATE;
}

/* A NAK, or a READ response or atomic ack, acknowledges the requests
 * before its PSN. */
static bool ack_before(struct comp_pkt *c) {
  return ack_through(c->qp, uroce_psn_add(c->psn, UROCE_PSN_MASK), c->now);
}

static enum comp_state rnr_nak(struct comp_pkt *c) {
  if (!ack_before(c))
    return on_gap(c, COMPST_UPDATE);
  return COMPST_RNR_RETRY;
}

/* The completion status a fatal NAK code gives the WQE it names. */
static uint8_t nak_wc_status(uint8_t code) {
  switch (code) {
  case UROCE_NAK_INVALID_REQ:
    return UROCE_WC_REM_INV_REQ_ERR;
  case UROCE_NAK_REM_ACCESS_ERR:
    return UROCE_WC_REM_ACCESS_ERR;
  case UROCE_NAK_REM_OP_ERR:
    return UROCE_WC_REM_OP_ERR;
  default:
    return UROCE_WC_BAD_RESP_ERR;
  }
}

static enum comp_state nak(struct comp_pkt *c) {
  if (!ack_before(c))
    return on_gap(c, COMPST_UPDATE);
  uint8_t code = uroce_aeth_value(c->syn);
  if (code == UROCE_NAK_PSN_SEQ_ERR)
    return COMPST_ERROR_RETRY;
  c->status = nak_wc_status(code);
  return COMPST_ERROR;
}

/* A READ response or atomic ack: it implies all before it arrived (the
 * requests before its own WQE: a response inside the oldest READ
 * acknowledges nothing, and a gap there is handled below); it must be the
 * next response the oldest READ or atomic WQE expects. */
static enum comp_state check_resp(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  struct swqe *w = oldest(qp);
  if (!(w && wr_is_rd_atomic(w->opcode) &&
        uroce_psn_cmp(c->psn, w->last_psn) <= 0) &&
      !ack_before(c)) {
    if (gap_retry(qp, c->psn, true, true))
      return COMPST_ERROR_RETRY;
    qp_dropped(qp, UROCE_DROP_PSN, c->psn);
    return COMPST_UPDATE;
  }
  w = oldest(qp);
  bool read = (c->mask & UROCE_OPM_READ) != 0;
  if (!w || !wr_is_rd_atomic(w->opcode) ||
      uroce_psn_cmp(c->psn, w->first_psn) < 0 ||
      uroce_psn_cmp(c->psn, w->last_psn) > 0 ||
      read != (w->opcode == UROCE_WR_RDMA_READ))
    return drop(c, UROCE_DROP_RESPONSE);
  if (c->psn != qp->comp.psn) { /* a gap inside a READ's responses */
    if (gap_retry(qp, c->psn, true, false))
      return COMPST_ERROR_RETRY;
    return drop(c, UROCE_DROP_PSN);
  }
  qp->comp.last = c->psn;
  qp->comp.has_last = true;
  c->w = w;
  return read ? COMPST_READ : COMPST_ATOMIC;
}

/* Scatters one READ response into the WQE's buffers. */
static enum comp_state do_read(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  struct swqe *w = c->w;
  uint32_t off = (uint32_t)uroce_psn_diff(c->psn, w->first_psn) * qp->mtu;
  bool last = c->psn == w->last_psn;
  uint32_t want = last ? w->length - off : qp->mtu;
  bool op_ok = last == ((c->mask & UROCE_OPM_LAST) != 0);
  if (!op_ok || c->pi->payload_len != want || off > w->length)
    return drop(c, UROCE_DROP_LENGTH);
  sge_scatter(qp->eng, w->sge, w->nsge, off, uroce_pkt_payload(c->pi), want);
  qp->comp.psn = uroce_psn_add(c->psn, 1);
  if (last)
    return COMPST_COMP_WQE;
  progress(qp, c->now, want);
  return COMPST_UPDATE;
}

static enum comp_state do_atomic(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  uint64_t orig = uroce_atmack_orig(uroce_pkt_hdr(c->pi, UROCE_HDR_ATMACK));
  c->w->atomic_orig = orig;
  if (!qp->eng->phantom)
    memcpy((void *)(uintptr_t)c->w->sge[0].addr, &orig, 8);
  qp->comp.psn = uroce_psn_add(c->psn, 1);
  return COMPST_COMP_WQE;
}

static enum comp_state comp_wqe(struct comp_pkt *c) {
  c->w->state = WQE_DONE;
  c->w->status = UROCE_WC_SUCCESS;
  progress(c->qp, c->now, c->w->length);
  return COMPST_UPDATE;
}

/* The requester may be behind comp.psn after a go-back: skips it over
 * what is acknowledged; completions go to the CQ in order. */
static enum comp_state update(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  if (uroce_psn_cmp(qp->comp.psn, qp->req.psn) > 0)
    req_rewind(qp, qp->comp.psn);
  qp_drain_sq(qp);
  return COMPST_DONE;
}

/* Go back to comp.psn, or fail the oldest WQE once retries are spent. */
static enum comp_state error_retry(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  /* A re-request that starts further back costs a retry only once the
   * responder is seen to take it (back_seen). */
  bool back = back_off(qp), free = qp->comp.free_retry;
  qp->comp.free_retry = false;
  if (!back && !free && !use_retry(qp)) {
    c->status = UROCE_WC_RETRY_EXC_ERR;
    return oldest(qp) ? COMPST_ERROR : COMPST_DONE;
  }
  bool nak = c->aeth && uroce_aeth_kind(c->syn) == UROCE_AETH_NAK;
  go_back(qp, qp->comp.psn, c->now, nak ? UROCE_TRC_NAK : UROCE_TRC_GAP);
  if (back)
    qp->req.back = qp->comp.back_n;
  qp_drain_sq(qp);
  return COMPST_DONE;
}

/* Resend from the NAKed PSN once the RNR timer the NAK names expires. */
static enum comp_state rnr_retry(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  if (qp->rnr_retry != 7) { /* 7 = unlimited */
    if (!qp->req.rnr_left) {
      c->status = UROCE_WC_RNR_RETRY_EXC_ERR;
      return COMPST_ERROR;
    }
    qp->req.rnr_left--;
  }
  qp_drain_sq(qp);
  qp->eng->stats.go_backs++;
  qp_trace(qp, UROCE_TR_GO_BACK, c->psn, UROCE_TRC_RNR, 0);
  req_rewind(qp, c->psn);
  qp->req.rnr_deadline = c->now + uroce_rnr_timer_ns(uroce_aeth_value(c->syn));
  qp->req.rto_deadline = UINT64_MAX;
  return COMPST_DONE;
}

/* Completes what is done, then fails the oldest WQE with c->status. */
static enum comp_state do_error(struct comp_pkt *c) {
  qp_drain_sq(c->qp);
  struct swqe *w = oldest(c->qp);
  if (w)
    fail_wqe(c->qp, w, c->status);
  return COMPST_DONE;
}

static enum comp_state drop_pkt(struct comp_pkt *c) {
  qp_dropped(c->qp, c->why, c->psn);
  return COMPST_DONE;
}

/* ---- multipath: responses in any order ---- */

/* What arrived tells the gaps before it; the newest delivery (by send
 * time) among those of one packet is the evidence. */
struct mp_ev {
  bool any, clean;
  uint32_t psn;
  uint64_t ts;
};

static void mp_deliver(struct comp_pkt *c, uint32_t psn, struct mp_ev *ev) {
  struct uroce_qp *qp = c->qp;
  uint64_t ts = qp->mp.sent[psn & qp->mp.mask];
  bool clean;
  if (!mp_done(qp, psn, &clean))
    return;
  c->delivered = true;
  if (!ev->any || ts > ev->ts ||
      (ts == ev->ts && uroce_psn_cmp(psn, ev->psn) > 0)) {
    ev->any = true;
    ev->clean = clean;
    ev->psn = psn;
    ev->ts = ts;
  }
}

/* The latest sent of what one packet delivered gives the RTT sample and
 * the evidence of gaps before it. */
static void mp_evidence(struct comp_pkt *c, const struct mp_ev *ev) {
  if (!ev->any)
    return;
  if (ev->clean && c->now >= ev->ts)
    mp_rtt(c->qp, ev->psn, c->now - ev->ts);
  mp_gaps_before(c->qp, ev->psn, ev->ts, c->now);
}

/* ACKs and requests through psn delivered (what a response never says). */
static void mp_ack_through(struct comp_pkt *c, uint32_t psn,
                           struct mp_ev *ev) {
  struct uroce_qp *qp = c->qp;
  for (uint32_t p = qp->comp.psn; uroce_psn_cmp(p, psn) <= 0;
       p = uroce_psn_add(p, 1)) {
    int32_t d = uroce_psn_diff(p, qp->comp.psn);
    if ((uint32_t)d > qp->mp.mask)
      break;
    if (!(*mp_tx_st(qp, p) & TX_RESP))
      mp_deliver(c, p, ev);
  }
}

static enum comp_state mp_check_ack(struct comp_pkt *c) {
  if (c->mask & UROCE_OPM_ACK) {
    enum uroce_aeth_kind k = uroce_aeth_kind(c->syn);
    if (k == UROCE_AETH_ACK)
      return COMPST_MP_ACK;
    return k == UROCE_AETH_RESERVED ? drop(c, UROCE_DROP_RESPONSE)
                                    : COMPST_MP_NAK;
  }
  if (c->aeth && uroce_aeth_kind(c->syn) != UROCE_AETH_ACK)
    return drop(c, UROCE_DROP_RESPONSE);
  struct swqe *w = sq_wqe_at(c->qp, c->psn);
  bool read = (c->mask & UROCE_OPM_READ) != 0;
  if (!w || !wr_is_rd_atomic(w->opcode) ||
      read != (w->opcode == UROCE_WR_RDMA_READ))
    return drop(c, UROCE_DROP_RESPONSE);
  c->w = w;
  return read ? COMPST_MP_READ : COMPST_MP_ATOMIC;
}

/* An ACK acknowledges every request through its PSN; a selective ACK's
 * bitmap, the requests after that which arrived. */
static enum comp_state mp_ack(struct comp_pkt *c) {
  struct mp_ev ev = {0};
  mp_ack_through(c, c->psn, &ev);
  const uint8_t *se = uroce_pkt_hdr(c->pi, UROCE_HDR_SACKETH);
  if (se) {
    uint32_t words = uroce_sacketh_words(se), base = uroce_sacketh_base(se);
    const uint8_t *bm = uroce_pkt_payload(c->pi);
    if (words > UROCE_SACK_MAX_WORDS || c->pi->payload_len != words * 8u)
      return drop(c, UROCE_DROP_LENGTH);
    if (uroce_sacketh_flags(se) & UROCE_SACK_DUP)
      mp_dsack(c->qp, uroce_sacketh_dup(se));
    else if (uroce_sacketh_flags(se) & UROCE_SACK_TRIM)
      mp_trimmed(c->qp, uroce_sacketh_dup(se), c->now);
    uint64_t req_ts = 0; /* the latest sent READ/atomic request reported */
    uint32_t hole = 0;   /* PSNs from base before the first reported */
    for (uint32_t i = 0; i < words; i++) {
      uint64_t v = get_be64(bm + 8 * i);
      if (hole == 64 * i)
        hole += v ? (uint32_t)__builtin_ctzll(v) : 64;
      for (; v; v &= v - 1) {
        uint32_t p = uroce_psn_add(base, 64 * i + (uint32_t)__builtin_ctzll(v));
        int32_t d = uroce_psn_diff(p, c->qp->comp.psn);
        if (d < 0 || (uint32_t)d > c->qp->mp.mask)
          continue;
        if (!(*mp_tx_st(c->qp, p) & TX_RESP))
          mp_deliver(c, p, &ev);
        else if (c->qp->mp.sent[p & c->qp->mp.mask] > req_ts)
          req_ts = c->qp->mp.sent[p & c->qp->mp.mask];
      }
    }
    /* The responder stands at base and holds a READ or atomic sent after
     * it: the request at base never arrived (it would have run there).
     * No response will show that hole, as nothing is answered past it. */
    if (req_ts && hole < 64 * words)
      mp_request_gap(c->qp, base, hole, req_ts, c->now);
  }
  mp_evidence(c, &ev);
  return COMPST_MP_UPDATE;
}

/* A READ response goes where its PSN says, whatever came before it. */
static enum comp_state mp_read(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  struct swqe *w = c->w;
  uint32_t off = (uint32_t)uroce_psn_diff(c->psn, w->first_psn) * qp->mtu;
  bool last = c->psn == w->last_psn;
  if (off > w->length || c->pi->payload_len != (last ? w->length - off
                                                      : qp->mtu))
    return drop(c, UROCE_DROP_LENGTH);
  int32_t d = uroce_psn_diff(c->psn, qp->comp.psn);
  if (d < 0 || (uint32_t)d > qp->mp.mask ||
      (*mp_tx_st(qp, c->psn) & TX_DONE))
    return drop(c, UROCE_DROP_DUPLICATE);
  sge_scatter(qp->eng, w->sge, w->nsge, off, uroce_pkt_payload(c->pi),
              c->pi->payload_len);
  struct mp_ev ev = {0};
  mp_deliver(c, c->psn, &ev);
  mp_evidence(c, &ev);
  return COMPST_MP_UPDATE;
}

static enum comp_state mp_atomic(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  if (*mp_tx_st(qp, c->psn) & TX_DONE)
    return drop(c, UROCE_DROP_DUPLICATE);
  uint64_t orig = uroce_atmack_orig(uroce_pkt_hdr(c->pi, UROCE_HDR_ATMACK));
  c->w->atomic_orig = orig;
  if (!qp->eng->phantom)
    memcpy((void *)(uintptr_t)c->w->sge[0].addr, &orig, 8);
  struct mp_ev ev = {0};
  mp_deliver(c, c->psn, &ev);
  mp_evidence(c, &ev);
  return COMPST_MP_UPDATE;
}

/* A NAK acknowledges what precedes it. RNR: the rest goes again after the
 * timer it names. A fatal code fails its WQE once everything before it is
 * complete (responses for earlier READs may still be on their way). */
static enum comp_state mp_nak(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  struct mp_ev ev = {0};
  mp_ack_through(c, uroce_psn_add(c->psn, UROCE_PSN_MASK), &ev);
  mp_evidence(c, &ev);
  uint8_t code = uroce_aeth_value(c->syn);
  if (uroce_aeth_kind(c->syn) == UROCE_AETH_RNR_NAK) {
    if (qp->rnr_retry != 7) {
      if (!qp->req.rnr_left) {
        c->status = UROCE_WC_RNR_RETRY_EXC_ERR;
        return COMPST_ERROR;
      }
      qp->req.rnr_left--;
    }
    qp->eng->stats.go_backs++;
    qp_trace(qp, UROCE_TR_GO_BACK, c->psn, UROCE_TRC_RNR, 0);
    for (uint32_t p = c->psn; uroce_psn_cmp(p, qp->req.max_psn) < 0;
         p = uroce_psn_add(p, 1)) {
      int32_t d = uroce_psn_diff(p, qp->comp.psn);
      if (d < 0 || (uint32_t)d > qp->mp.mask)
        break;
      uint8_t *st = mp_tx_st(qp, p);
      if ((*st & (TX_SENT | TX_DONE | TX_LOST)) == TX_SENT) {
        *st = (uint8_t)((*st & ~TX_GAP) | TX_LOST | TX_PROBE);
        qp->mp.lost++;
      }
    }
    qp->req.rnr_deadline = c->now + uroce_rnr_timer_ns(code);
    qp->req.rto_deadline = UINT64_MAX;
    return COMPST_MP_UPDATE;
  }
  if (code != UROCE_NAK_PSN_SEQ_ERR && !qp->mp.fatal) {
    qp->mp.fatal = true;
    qp->mp.fatal_psn = c->psn;
    qp->mp.fatal_status = nak_wc_status(code);
  }
  return COMPST_MP_UPDATE;
}

/* comp.psn over what arrived; the WQEs it passed complete, in order. Any
 * arrival is progress: the probe timer is for when nothing arrives. */
static enum comp_state mp_update(struct comp_pkt *c) {
  struct uroce_qp *qp = c->qp;
  if (c->delivered) {
    qp->mp.last_prog = c->now;
    qp->mp.probes = 0;
  }
  if (mp_advance(qp)) {
    uint64_t bytes = 0;
    for (uint32_t i = qp->sq_tail; i != qp->sq_head; i++) {
      struct swqe *w = sq_at(qp, i);
      if (w->state == WQE_DONE)
        continue;
      if (w->state == WQE_POSTED ||
          uroce_psn_cmp(w->last_psn, qp->comp.psn) >= 0)
        break;
      w->state = WQE_DONE;
      w->status = UROCE_WC_SUCCESS;
      bytes += w->length;
    }
    /* Behind comp.psn only if it was going back (standard) when the peer
     * turned out to speak multipath. */
    if (uroce_psn_cmp(qp->comp.psn, qp->req.psn) > 0)
      req_rewind(qp, qp->comp.psn);
    req_rtt(qp, c->now);
    qp->req.retry_left = qp->retry_cnt;
    qp->req.rnr_left = qp->rnr_retry;
    qp->eng->cc->on_ack(qp->cc_state, c->now, bytes);
    qp_trace_cc(qp, c->now, UROCE_TRC_ACK);
  }
  if (qp->mp.fatal && qp->mp.fatal_psn == qp->comp.psn) {
    qp_drain_sq(qp);
    struct swqe *w = oldest(qp);
    if (w)
      fail_wqe(qp, w, qp->mp.fatal_status);
    return COMPST_DONE;
  }
  if (c->delivered || !outstanding(qp))
    qp->req.rto_deadline = outstanding(qp) && rto_ns(qp) != UINT64_MAX
                               ? c->now + mp_pto(qp)
                               : UINT64_MAX;
  if (qp->req.rnr_deadline != UINT64_MAX)
    qp->req.rto_deadline = UINT64_MAX;
  qp_drain_sq(qp);
  return COMPST_DONE;
}

static enum comp_state comp_step(struct comp_pkt *c, enum comp_state st) {
  switch (st) {
  case COMPST_GET_WQE:
    return get_wqe(c);
  case COMPST_CHECK_PSN:
    return check_psn(c);
  case COMPST_CHECK_ACK:
    return check_ack(c);
  case COMPST_ACK:
    return ack(c);
  case COMPST_RNR_NAK:
    return rnr_nak(c);
  case COMPST_NAK:
    return nak(c);
  case COMPST_CHECK_RESP:
    return check_resp(c);
  case COMPST_READ:
    return do_read(c);
  case COMPST_ATOMIC:
    return do_atomic(c);
  case COMPST_COMP_WQE:
    return comp_wqe(c);
  case COMPST_UPDATE:
    return update(c);
  case COMPST_ERROR_RETRY:
    return error_retry(c);
  case COMPST_RNR_RETRY:
    return rnr_retry(c);
  case COMPST_ERROR:
    return do_error(c);
  case COMPST_DROP:
    return drop_pkt(c);
  case COMPST_MP_ACK:
    return mp_ack(c);
  case COMPST_MP_READ:
    return mp_read(c);
  case COMPST_MP_ATOMIC:
    return mp_atomic(c);
  case COMPST_MP_NAK:
    return mp_nak(c);
  case COMPST_MP_UPDATE:
    return mp_update(c);
  case COMPST_DONE:
  case COMPST_COUNT:
    break;
  }
  return COMPST_DONE;
}

void comp_rx(struct uroce_qp *qp, const struct uroce_rx_pkt *rx, uint64_t now) {
  const struct uroce_pkt_info *pi = &rx->pi;
  const uint8_t *aeth = uroce_pkt_hdr(pi, UROCE_HDR_AETH);
  struct comp_pkt c = {
      .qp = qp,
      .pi = pi,
      .now = now,
      .mask = pi->op->mask,
      .psn = pi->psn,
      .aeth = aeth,
      .syn = aeth ? uroce_aeth_syndrome(aeth) : 0,
  };
  if (c.aeth && uroce_aeth_kind(c.syn) != UROCE_AETH_ACK)
    qp_trace(qp, UROCE_TR_NAK_RX, c.psn, c.syn, 0);
  enum comp_state st = COMPST_GET_WQE;
  while (st != COMPST_DONE) {
    qp_trace(qp, UROCE_TR_COMP, c.psn, (uint8_t)st, 0);
    st = comp_step(&c, st);
  }
}

/* Multipath: a probe timeout. The QP fails once retry_cnt + 1 of its
 * timeouts passed without progress (7: never). */
static void mp_comp_timeout(struct uroce_qp *qp, uint64_t now) {
  qp->eng->stats.timeouts++;
  qp_trace(qp, UROCE_TR_TIMEOUT, qp->comp.psn, UROCE_TRC_PROBE, qp->retry_cnt);
  if (qp->retry_cnt != 7 &&
      now - qp->mp.last_prog > (qp->retry_cnt + 1u) * rto_ns(qp)) {
    fail_wqe(qp, oldest(qp), UROCE_WC_RETRY_EXC_ERR);
    return;
  }
  mp_timeout(qp, now);
  qp->req.rto_deadline = now + mp_pto(qp);
}

void comp_timeout(struct uroce_qp *qp, uint64_t now) {
  qp->req.rto_deadline = UINT64_MAX;
  if (qp->type != UROCE_QPT_RC || !outstanding(qp) || !oldest(qp))
    return;
  if (qp_mp(qp)) {
    mp_comp_timeout(qp, now);
    return;
  }
  qp->eng->stats.timeouts++;
  qp_trace(qp, UROCE_TR_TIMEOUT, qp->comp.psn, UROCE_TRC_TIMEOUT,
           qp->retry_cnt == 7 ? 7 : qp->req.retry_left);
  struct comp *c = &qp->comp;
  bool again = false, free = c->free_retry;
  if (c->back_wait)
    free |= back_timeout(qp, &again);
  c->free_retry = false;
  if (!free && !use_retry(qp)) {
    fail_wqe(qp, oldest(qp), UROCE_WC_RETRY_EXC_ERR);
    return;
  }
  /* The answer to it is what gap_retry looks for. A timeout is a failed
   * re-request too, and the next one starts further back, as gap_retry's
   * do (else a periodic loss whose period divides the rest of the READ
   * takes the first response of every timeout's answer: mixed seed 13463).
   * Unlike theirs, it costs its retry now, as every timeout does. */
  if (c->rereqs < UINT8_MAX)
    c->rereqs++;
  bool back = again || back_off(qp);
  /* Probe with one packet before resending a whole window into a path
   * that may be down (and so that the resent rounds do not line up with a
   * periodic loss pattern). */
  qp->req.probe = true;
  go_back(qp, c->psn, now, UROCE_TRC_TIMEOUT);
  if (back) {
    qp->req.back = c->back_n;
    c->back_paid = true; /* this timeout's retry */
  }
}

void comp_rnr_expired(struct uroce_qp *qp, uint64_t now) {
  qp->req.rnr_deadline = UINT64_MAX;
}
