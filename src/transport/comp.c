/* The completer (RC): consumes ACKs, NAKs, READ responses and atomic
 * acknowledgements, completes send WQEs in order, and drives recovery:
 * go-back-N on a sequence NAK, a READ-response gap or a timeout; waiting
 * on an RNR NAK; and the retry and RNR-retry counters. */
#include "transport/qp.h"
#include "uroce/uroce.h"

const char *const uroce_comp_state_names[COMPST_COUNT] = {
    [COMPST_GET_WQE] = "GET_WQE",     [COMPST_CHECK_PSN] = "CHECK_PSN",
    [COMPST_CHECK_ACK] = "CHECK_ACK", [COMPST_READ] = "READ",
    [COMPST_ATOMIC] = "ATOMIC",       [COMPST_WRITE_SEND] = "WRITE_SEND",
    [COMPST_COMP_WQE] = "COMP_WQE",   [COMPST_UPDATE] = "UPDATE",
    [COMPST_DONE] = "DONE",           [COMPST_ERROR_RETRY] = "ERROR_RETRY",
    [COMPST_RNR_RETRY] = "RNR_RETRY", [COMPST_ERROR] = "ERROR",
};

void comp_reset(struct uroce_qp *qp) {
  qp->comp.psn = qp->attr_sq_psn;
  qp->comp.gap_events = 0;
}

static bool is_rd_atomic(uint32_t op) {
  return op == UROCE_WR_RDMA_READ || op == UROCE_WR_ATOMIC_CMP_AND_SWP ||
         op == UROCE_WR_ATOMIC_FETCH_AND_ADD;
}

static bool outstanding(const struct uroce_qp *qp) {
  return qp->sq_tail != qp->req.idx || qp->req.off != 0 ||
         qp->comp.psn != qp->req.psn;
}

static void progress(struct uroce_qp *qp, uint64_t now, uint64_t bytes) {
  qp->req.retry_left = qp->retry_cnt;
  qp->req.rnr_left = qp->rnr_retry;
  qp->req.probe = false;
  qp->comp.gap_events = 0;
  qp->req.rto_deadline = outstanding(qp) && rto_ns(qp) != UINT64_MAX
                             ? now + rto_ns(qp)
                             : UINT64_MAX;
  qp->eng->cc->on_ack(qp->cc_state, now, bytes);
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
    if (w->state == WQE_POSTED || w->state == WQE_DONE)
      break;
    if (uroce_psn_cmp(psn, w->first_psn) < 0)
      break;
    if (is_rd_atomic(w->opcode)) {
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

/* The oldest WQE still waiting for its response, or NULL. */
static struct swqe *oldest(struct uroce_qp *qp) {
  for (uint32_t i = qp->sq_tail; i != qp->sq_head; i++) {
    struct swqe *w = sq_at(qp, i);
    if (w->state != WQE_DONE)
      return w->state == WQE_SENDING || w->state == WQE_PENDING ? w : 0;
  }
  return 0;
}

static void fail_wqe(struct uroce_qp *qp, struct swqe *w, uint8_t status) {
  w->state = WQE_DONE;
  w->status = status;
  qp->req.state = REQST_ERROR;
  qp->req.rto_deadline = UINT64_MAX;
  qp_drain_sq(qp);
}

static void go_back(struct uroce_qp *qp, uint32_t psn, uint64_t now) {
  qp->eng->stats.retransmits++;
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

/* Evidence that a READ response or atomic ack before comp.psn's successor
 * was lost: a later response, or an ACK beyond the READ. Every packet
 * still in flight after the loss brings the same evidence, and going back
 * on each one restarts the responder's stream again and again (hundreds of
 * times per loss on a long READ). Going back on the first only hangs on the
 * timeout when that one re-request is lost too. So go back on the 1st,
 * 2nd, 4th, 8th ... piece of evidence for the same comp.psn: a handful of
 * re-requests per loss, spread over the stream. comp.psn only moves
 * through progress(), which starts the count again. */
static bool gap_retry(struct uroce_qp *qp) {
  if (qp->comp.gap_events == UINT32_MAX)
    return false;
  uint32_t n = ++qp->comp.gap_events;
  return (n & (n - 1)) == 0;
}

void comp_rx(struct uroce_qp *qp, const struct uroce_rx_pkt *rx, uint64_t now) {
  const struct uroce_pkt_info *pi = &rx->pi;
  struct uroce_eng *eng = qp->eng;
  uint32_t mask = pi->op->mask;
  uint32_t psn = pi->psn;
  const uint8_t *aeth = uroce_pkt_hdr(pi, UROCE_HDR_AETH);
  uint8_t syn = aeth ? uroce_aeth_syndrome(aeth) : 0;
  struct swqe *w = 0;
  uint8_t status = 0;
  enum comp_state st = COMPST_GET_WQE;

  while (st != COMPST_DONE) {
    switch (st) {
    case COMPST_GET_WQE:
      if (qp->type != UROCE_QPT_RC || qp->req.state == REQST_ERROR ||
          !oldest(qp)) {
        eng->stats.drops[UROCE_DROP_RESPONSE]++;
        st = COMPST_DONE;
        break;
      }
      st = COMPST_CHECK_PSN;
      break;

    case COMPST_CHECK_PSN:
      /* Only PSNs from comp.psn up to the last one sent mean anything. */
      if (uroce_psn_cmp(psn, qp->req.max_psn) >= 0) {
        eng->stats.drops[UROCE_DROP_RESPONSE]++;
        st = COMPST_DONE;
      } else if (uroce_psn_cmp(psn, qp->comp.psn) < 0) {
        eng->stats.drops[UROCE_DROP_DUPLICATE]++;
        st = COMPST_DONE;
      } else {
        st = COMPST_CHECK_ACK;
      }
      break;

    case COMPST_CHECK_ACK:
      if (mask & UROCE_OPM_ACK) {
        switch (uroce_aeth_kind(syn)) {
        case UROCE_AETH_ACK:
          st = ack_through(qp, psn, now) ? COMPST_UPDATE
               : gap_retry(qp)           ? COMPST_ERROR_RETRY
                                         : COMPST_UPDATE;
          break;
        case UROCE_AETH_RNR_NAK:
          st = ack_through(qp, uroce_psn_add(psn, UROCE_PSN_MASK), now)
                   ? COMPST_RNR_RETRY
               : gap_retry(qp) ? COMPST_ERROR_RETRY
                               : COMPST_UPDATE;
          break;
        case UROCE_AETH_NAK:
          if (!ack_through(qp, uroce_psn_add(psn, UROCE_PSN_MASK), now)) {
            st = gap_retry(qp) ? COMPST_ERROR_RETRY : COMPST_UPDATE;
            break;
          }
          switch (uroce_aeth_value(syn)) {
          case UROCE_NAK_PSN_SEQ_ERR:
            st = COMPST_ERROR_RETRY;
            break;
          case UROCE_NAK_INVALID_REQ:
            status = UROCE_WC_REM_INV_REQ_ERR;
            st = COMPST_ERROR;
            break;
          case UROCE_NAK_REM_ACCESS_ERR:
            status = UROCE_WC_REM_ACCESS_ERR;
            st = COMPST_ERROR;
            break;
          case UROCE_NAK_REM_OP_ERR:
            status = UROCE_WC_REM_OP_ERR;
            st = COMPST_ERROR;
            break;
          default:
            status = UROCE_WC_BAD_RESP_ERR;
            st = COMPST_ERROR;
            break;
          }
          break;
        default:
          eng->stats.drops[UROCE_DROP_RESPONSE]++;
          st = COMPST_DONE;
          break;
        }
        break;
      }
      if (aeth && uroce_aeth_kind(syn) != UROCE_AETH_ACK) {
        eng->stats.drops[UROCE_DROP_RESPONSE]++;
        st = COMPST_DONE;
        break;
      }
      /* A READ response or atomic ack implies all before it arrived: the
       * requests before its own WQE (a response inside the oldest READ
       * acknowledges nothing, and a gap there is handled below). */
      w = oldest(qp);
      if (!(w && is_rd_atomic(w->opcode) &&
            uroce_psn_cmp(psn, w->last_psn) <= 0) &&
          !ack_through(qp, uroce_psn_add(psn, UROCE_PSN_MASK), now)) {
        if (gap_retry(qp)) {
          st = COMPST_ERROR_RETRY;
        } else {
          eng->stats.drops[UROCE_DROP_PSN]++;
          st = COMPST_UPDATE;
        }
        break;
      }
      w = oldest(qp);
      if (!w || !is_rd_atomic(w->opcode) ||
          uroce_psn_cmp(psn, w->first_psn) < 0 ||
          uroce_psn_cmp(psn, w->last_psn) > 0 ||
          ((mask & UROCE_OPM_READ) != 0) != (w->opcode == UROCE_WR_RDMA_READ)) {
        eng->stats.drops[UROCE_DROP_RESPONSE]++;
        st = COMPST_DONE;
        break;
      }
      if (psn != qp->comp.psn) {
        /* A gap inside a READ's responses. */
        if (gap_retry(qp)) {
          st = COMPST_ERROR_RETRY;
        } else {
          eng->stats.drops[UROCE_DROP_PSN]++;
          st = COMPST_DONE;
        }
        break;
      }
      st = (mask & UROCE_OPM_READ) ? COMPST_READ : COMPST_ATOMIC;
      break;

    case COMPST_READ: {
      uint32_t off = (uint32_t)uroce_psn_diff(psn, w->first_psn) * qp->mtu;
      bool last = psn == w->last_psn;
      uint32_t want = last ? w->length - off : qp->mtu;
      bool op_ok = last ? (mask & UROCE_OPM_LAST) : !(mask & UROCE_OPM_LAST);
      if (!op_ok || pi->payload_len != want || off > w->length) {
        eng->stats.drops[UROCE_DROP_LENGTH]++;
        st = COMPST_DONE;
        break;
      }
      sge_scatter(qp->eng, w->sge, w->nsge, off, uroce_pkt_payload(pi), want);
      qp->comp.psn = uroce_psn_add(psn, 1);
      st = last ? COMPST_COMP_WQE : COMPST_UPDATE;
      if (!last)
        progress(qp, now, want);
      break;
    }

    case COMPST_ATOMIC: {
      uint64_t orig = uroce_atmack_orig(uroce_pkt_hdr(pi, UROCE_HDR_ATMACK));
      w->atomic_orig = orig;
      if (!eng->phantom)
        memcpy((void *)(uintptr_t)w->sge[0].addr, &orig, 8);
      qp->comp.psn = uroce_psn_add(psn, 1);
      st = COMPST_COMP_WQE;
      break;
    }

    case COMPST_COMP_WQE:
      w->state = WQE_DONE;
      w->status = UROCE_WC_SUCCESS;
      progress(qp, now, w->length);
      st = COMPST_UPDATE;
      break;

    case COMPST_WRITE_SEND:
    case COMPST_UPDATE:
      /* The requester may be behind comp.psn after a go-back; skip it
       * over what is acknowledged. */
      if (uroce_psn_cmp(qp->comp.psn, qp->req.psn) > 0)
        req_rewind(qp, qp->comp.psn);
      qp_drain_sq(qp);
      st = COMPST_DONE;
      break;

    case COMPST_ERROR_RETRY:
      if (!use_retry(qp)) {
        status = UROCE_WC_RETRY_EXC_ERR;
        w = oldest(qp);
        st = w ? COMPST_ERROR : COMPST_DONE;
        break;
      }
      go_back(qp, qp->comp.psn, now);
      qp_drain_sq(qp);
      st = COMPST_DONE;
      break;

    case COMPST_RNR_RETRY:
      if (qp->rnr_retry != 7) {
        if (!qp->req.rnr_left) {
          status = UROCE_WC_RNR_RETRY_EXC_ERR;
          st = COMPST_ERROR;
          break;
        }
        qp->req.rnr_left--;
      }
      qp_drain_sq(qp);
      qp->eng->stats.retransmits++;
      req_rewind(qp, psn);
      qp->req.rnr_deadline = now + uroce_rnr_timer_ns(uroce_aeth_value(syn));
      qp->req.rto_deadline = UINT64_MAX;
      st = COMPST_DONE;
      break;

    case COMPST_ERROR:
      qp_drain_sq(qp);
      w = oldest(qp);
      if (w)
        fail_wqe(qp, w, status);
      st = COMPST_DONE;
      break;

    default:
      st = COMPST_DONE;
      break;
    }
  }
}

void comp_timeout(struct uroce_qp *qp, uint64_t now) {
  qp->req.rto_deadline = UINT64_MAX;
  if (qp->type != UROCE_QPT_RC || !outstanding(qp) || !oldest(qp))
    return;
  qp->eng->stats.timeouts++;
  if (!use_retry(qp)) {
    fail_wqe(qp, oldest(qp), UROCE_WC_RETRY_EXC_ERR);
    return;
  }
  qp->comp.gap_events = 0;
  /* Probe with one packet before resending a whole window into a path
   * that may be down (and so that the resent rounds do not line up with a
   * periodic loss pattern). */
  qp->req.probe = true;
  go_back(qp, qp->comp.psn, now);
}

void comp_rnr_expired(struct uroce_qp *qp, uint64_t now) {
  qp->req.rnr_deadline = UINT64_MAX;
}
