/* The requester: turns send WQEs into request packets, one per call, in
 * PSN order. Its state says why it is not sending (window, fence, RNR
 * wait, pacing...); the completer moves it back (go-back-N) when packets
 * were lost. */
#include "transport/qp.h"
#include "uroce/uroce.h"

const char *const uroce_req_state_names[REQST_COUNT] = {
    [REQST_IDLE] = "IDLE",
    [REQST_SEND] = "SEND",
    [REQST_WAIT_WINDOW] = "WAIT_WINDOW",
    [REQST_WAIT_FENCE] = "WAIT_FENCE",
    [REQST_WAIT_RD_ATOMIC] = "WAIT_RD_ATOMIC",
    [REQST_WAIT_RNR] = "WAIT_RNR",
    [REQST_WAIT_PACE] = "WAIT_PACE",
    [REQST_DRAIN] = "DRAIN",
    [REQST_ERROR] = "ERROR",
};

uint64_t rto_ns(const struct uroce_qp *qp) {
  /* 4.096 us * 2^timeout; 0 means the timer never fires. */
  return qp->timeout ? 4096ull << qp->timeout : UINT64_MAX;
}

void req_reset(struct uroce_qp *qp) {
  struct req *r = &qp->req;
  r->state = REQST_IDLE;
  r->idx = qp->sq_tail;
  r->psn = r->max_psn = qp->attr_sq_psn;
  r->off = r->sge_i = r->sge_off = 0;
  r->pkts_since_ackreq = 0;
  r->rto_deadline = r->rnr_deadline = r->pace_deadline = UINT64_MAX;
  r->retry_left = qp->retry_cnt;
  r->rnr_left = qp->rnr_retry;
  r->probe = false;
  r->back = 0;
}

/* Places the gather cursor at byte off of w. */
static void seek(struct req *r, const struct swqe *w, uint32_t off) {
  uint32_t i = 0;
  while (i < w->nsge && off >= w->sge[i].length) {
    off -= w->sge[i].length;
    i++;
  }
  r->sge_i = i;
  r->sge_off = off;
}

void req_rewind(struct uroce_qp *qp, uint32_t psn) {
  struct req *r = &qp->req;
  uint32_t i;
  for (i = qp->sq_tail; i != qp->sq_head; i++) {
    struct swqe *w = sq_at(qp, i);
    if (w->state == WQE_POSTED)
      break;
    if (w->state != WQE_DONE && uroce_psn_cmp(psn, w->first_psn) >= 0 &&
        uroce_psn_cmp(psn, w->last_psn) <= 0) {
      r->idx = i;
      r->psn = psn;
      r->off = (uint32_t)uroce_psn_diff(psn, w->first_psn) * qp->mtu;
      if (r->off > w->length)
        r->off = w->length;
      seek(r, w, r->off);
      r->pkts_since_ackreq = 0;
      r->back = 0;
      return;
    }
  }
  r->idx = i;
  r->psn = psn;
  r->off = r->sge_i = r->sge_off = 0;
  r->pkts_since_ackreq = 0;
  r->back = 0;
}

static uint32_t rd_atomic_outstanding(struct uroce_qp *qp) {
  uint32_t n = 0;
  for (uint32_t i = qp->sq_tail; i != qp->req.idx; i++) {
    struct swqe *w = sq_at(qp, i);
    if (wr_is_rd_atomic(w->opcode) && w->state != WQE_DONE)
      n++;
  }
  return n;
}

/* Checks the local keys of a WQE the first time it starts. READ and atomic
 * results are written into its SGEs, which then need local write. */
static bool check_lkeys(struct uroce_qp *qp, struct swqe *w) {
  uint32_t need = wr_is_rd_atomic(w->opcode) ? UROCE_ACCESS_LOCAL_WRITE : 0;
  for (uint32_t i = 0; i < w->nsge; i++) {
    struct uroce_mr *mr;
    if (uroce_mr_check(&qp->eng->mrs, false, w->sge[i].lkey, qp->pd,
                       w->sge[i].addr, w->sge[i].length, need, &mr))
      return false;
  }
  return true;
}

/* Gathers n bytes at the cursor into tx segments. */
static void gather(struct uroce_qp *qp, struct swqe *w, struct uroce_tx_pkt *tx,
                   uint32_t n) {
  struct req *r = &qp->req;
  bool phantom = qp->eng->phantom;
  tx->nseg = 0;
  while (n && r->sge_i < w->nsge) {
    const struct uroce_sge *s = &w->sge[r->sge_i];
    uint32_t take = s->length - r->sge_off;
    if (take > n)
      take = n;
    if (take) {
      struct uroce_tx_seg *g = &tx->seg[tx->nseg++];
      g->addr = phantom ? 0 : (const void *)(uintptr_t)(s->addr + r->sge_off);
      g->len = take;
    }
    n -= take;
    r->sge_off += take;
    if (r->sge_off == s->length) {
      r->sge_i++;
      r->sge_off = 0;
    }
  }
}

static uint8_t send_opcode(const struct swqe *w, bool first, bool last) {
  bool imm = w->opcode == UROCE_WR_SEND_WITH_IMM;
  bool inv = w->opcode == UROCE_WR_SEND_WITH_INV;
  if (first && last)
    return imm   ? UROCE_OP_SEND_ONLY_IMM
           : inv ? UROCE_OP_SEND_ONLY_INV
                 : UROCE_OP_SEND_ONLY;
  if (first)
    return UROCE_OP_SEND_FIRST;
  if (last)
    return imm   ? UROCE_OP_SEND_LAST_IMM
           : inv ? UROCE_OP_SEND_LAST_INV
                 : UROCE_OP_SEND_LAST;
  return UROCE_OP_SEND_MIDDLE;
}

static uint8_t write_opcode(const struct swqe *w, bool first, bool last) {
  bool imm = w->opcode == UROCE_WR_RDMA_WRITE_WITH_IMM;
  if (first && last)
    return imm ? UROCE_OP_WRITE_ONLY_IMM : UROCE_OP_WRITE_ONLY;
  if (first)
    return UROCE_OP_WRITE_FIRST;
  if (last)
    return imm ? UROCE_OP_WRITE_LAST_IMM : UROCE_OP_WRITE_LAST;
  return UROCE_OP_WRITE_MIDDLE;
}

/* Decides whether the requester can send now; returns its state. */
static enum req_state req_check(struct uroce_qp *qp, uint64_t now) {
  struct req *r = &qp->req;
  if (!qp_can_send(qp) || r->state == REQST_ERROR)
    return qp->state == UROCE_QPS_ERR || qp->state == UROCE_QPS_SQE ||
                   r->state == REQST_ERROR
               ? REQST_ERROR
               : REQST_IDLE;
  if (r->rnr_deadline != UINT64_MAX)
    return REQST_WAIT_RNR;
  if (r->idx == qp->sq_head)
    return REQST_IDLE;
  struct swqe *w = sq_at(qp, r->idx);
  bool rc = qp->type == UROCE_QPT_RC;
  if (w->state == WQE_POSTED) {
    if (qp->state == UROCE_QPS_SQD)
      return REQST_DRAIN;
    if (rc && (w->flags & UROCE_SEND_FENCE) && rd_atomic_outstanding(qp))
      return REQST_WAIT_FENCE;
    if (rc && wr_is_rd_atomic(w->opcode) &&
        rd_atomic_outstanding(qp) >= qp->max_rd_atomic)
      return REQST_WAIT_RD_ATOMIC;
  }
  if (rc && r->probe && uroce_psn_diff(r->psn, qp->comp.psn) > 0)
    return REQST_WAIT_WINDOW;
  if (rc &&
      (uint32_t)uroce_psn_diff(r->psn, qp->comp.psn) >=
          qp->eng->cfg.max_unacked_psn &&
      uroce_psn_diff(r->psn, qp->comp.psn) >= 0)
    return REQST_WAIT_WINDOW;
  uint64_t t = qp->eng->cc->next_tx_time(qp->cc_state, now);
  if (t > now) {
    r->pace_deadline = t;
    return REQST_WAIT_PACE;
  }
  return REQST_SEND;
}

/* Starts a WQE: assigns its PSNs and checks its keys. Returns false if it
 * failed locally (it is then completed with an error). */
static bool start_wqe(struct uroce_qp *qp, struct swqe *w) {
  struct req *r = &qp->req;
  w->first_psn = r->psn;
  uint32_t npkts = (w->opcode == UROCE_WR_ATOMIC_CMP_AND_SWP ||
                    w->opcode == UROCE_WR_ATOMIC_FETCH_AND_ADD)
                       ? 1
                       : qp_npkts(qp, w->length);
  w->last_psn = uroce_psn_add(r->psn, npkts - 1);
  w->state = WQE_SENDING;
  r->off = r->sge_i = r->sge_off = 0;
  if (!w->checked) {
    if (!check_lkeys(qp, w)) {
      w->state = WQE_DONE;
      w->status = UROCE_WC_LOC_PROT_ERR;
      r->state = REQST_ERROR; /* nothing more starts; the completer
                                 moves the QP to ERR in order */
      r->idx++;
      return false;
    }
    w->checked = true;
  }
  return true;
}

int req_make_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx, uint64_t now) {
  struct req *r = &qp->req;
  enum req_state st = req_check(qp, now);
  if (r->state != REQST_ERROR)
    r->state = (uint8_t)st;
  if (st != REQST_SEND)
    return 0;
  struct swqe *w = sq_at(qp, r->idx);
  if (w->state == WQE_POSTED && !start_wqe(qp, w)) {
    qp_drain_sq(qp);
    return 0;
  }

  bool rc = qp->type == UROCE_QPT_RC;
  uint8_t base = qp_opcode_base(qp);
  uint32_t left = w->length - r->off;
  uint32_t n = 0, psns = 1, back = 0;
  bool first = r->off == 0 && uroce_psn_cmp(r->psn, w->first_psn) == 0;
  bool last = true, se = false;
  uint8_t opcode;
  switch (w->opcode) {
  case UROCE_WR_SEND:
  case UROCE_WR_SEND_WITH_IMM:
  case UROCE_WR_SEND_WITH_INV:
    n = left < qp->mtu ? left : qp->mtu;
    last = n == left;
    if (qp->type == UROCE_QPT_UD)
      opcode = w->opcode == UROCE_WR_SEND_WITH_IMM ? UROCE_OP_UD_SEND_ONLY_IMM
                                                   : UROCE_OP_UD_SEND_ONLY;
    else
      opcode = (uint8_t)(base + send_opcode(w, first, last));
    se = last && (w->flags & UROCE_SEND_SOLICITED);
    break;
  case UROCE_WR_RDMA_WRITE:
  case UROCE_WR_RDMA_WRITE_WITH_IMM:
    n = left < qp->mtu ? left : qp->mtu;
    last = n == left;
    opcode = (uint8_t)(base + write_opcode(w, first, last));
    se = last && w->opcode == UROCE_WR_RDMA_WRITE_WITH_IMM &&
         (w->flags & UROCE_SEND_SOLICITED);
    break;
  case UROCE_WR_RDMA_READ:
    opcode = UROCE_OP_READ_REQ;
    psns = (uint32_t)uroce_psn_diff(w->last_psn, r->psn) + 1;
    back = r->back < r->off / qp->mtu ? r->back : r->off / qp->mtu;
    r->back = 0;
    break;
  case UROCE_WR_ATOMIC_CMP_AND_SWP:
    opcode = UROCE_OP_CMP_SWAP;
    break;
  default:
    opcode = UROCE_OP_FETCH_ADD;
    break;
  }

  const struct uroce_opcode_info *op = uroce_opcode(opcode);
  uint8_t *h = tx->hdr;
  memset(h, 0, UROCE_TX_HDR_MAX); /* constant: a few vector stores */
  uint8_t pad = (uint8_t)((4 - (n & 3)) & 3);
  bool ackreq = false;
  if (rc) {
    r->pkts_since_ackreq++;
    uint32_t inflight = (uint32_t)uroce_psn_diff(r->psn, qp->comp.psn) + psns;
    ackreq = last || r->probe ||
             r->pkts_since_ackreq >= qp->eng->cfg.ackreq_every ||
             inflight >= qp->eng->cfg.max_unacked_psn;
    if (ackreq)
      r->pkts_since_ackreq = 0;
  }
  uint32_t dqpn = qp->type == UROCE_QPT_UD ? w->dqpn : qp->dest_qpn;
  qp_put_bth(qp, h, opcode, se, pad, dqpn, ackreq,
             uroce_psn_add(r->psn, UROCE_PSN_MASK + 1 - back));
  if (op->mask & UROCE_OPM_HDR(UROCE_HDR_DETH))
    uroce_deth_put(h + op->offset[UROCE_HDR_DETH], w->qkey, qp->qpn);
  if (op->mask & UROCE_OPM_HDR(UROCE_HDR_RETH)) {
    if (w->opcode == UROCE_WR_RDMA_READ)
      uroce_reth_put(h + op->offset[UROCE_HDR_RETH],
                     w->raddr + r->off - back * qp->mtu, w->rkey,
                     w->length - r->off + back * qp->mtu);
    else
      uroce_reth_put(h + op->offset[UROCE_HDR_RETH], w->raddr, w->rkey,
                     w->length);
  }
  if (op->mask & UROCE_OPM_HDR(UROCE_HDR_ATMETH)) {
    bool cas = w->opcode == UROCE_WR_ATOMIC_CMP_AND_SWP;
    uroce_atmeth_put(h + op->offset[UROCE_HDR_ATMETH], w->raddr, w->rkey,
                     cas ? w->swap : w->cmp_add, cas ? w->cmp_add : 0);
  }
  if (op->mask & UROCE_OPM_HDR(UROCE_HDR_IMMDT))
    memcpy(h + op->offset[UROCE_HDR_IMMDT], &w->imm, 4);
  if (op->mask & UROCE_OPM_HDR(UROCE_HDR_IETH))
    put_be32(h + op->offset[UROCE_HDR_IETH], w->inv_rkey);
  tx->hdr_len = op->length;
  tx->pad = pad;
  tx->payload_len = n;
  if (n)
    gather(qp, w, tx, n);
  else
    tx->nseg = 0;
  qp_tx_addr(qp, tx);
  if (qp->type == UROCE_QPT_UD) {
    memcpy(tx->dgid, w->dgid, 16);
    tx->sport = w->sport;
  }

  /* Below the highest PSN sent: this packet goes out again. */
  if (uroce_psn_cmp(r->psn, r->max_psn) < 0)
    qp->eng->stats.retx_pkts++;
  r->psn = uroce_psn_add(r->psn, psns);
  if (uroce_psn_cmp(r->psn, r->max_psn) > 0)
    r->max_psn = r->psn;
  r->off += n;
  if (last) {
    r->idx++;
    r->off = r->sge_i = r->sge_off = 0;
    if (rc) {
      if (w->state == WQE_SENDING)
        w->state = WQE_PENDING;
    } else {
      w->state = WQE_DONE; /* unreliable: done once sent */
      w->status = UROCE_WC_SUCCESS;
      qp_drain_sq(qp);
    }
  }
  if (rc && r->rto_deadline == UINT64_MAX && rto_ns(qp) != UINT64_MAX)
    r->rto_deadline = now + rto_ns(qp);
  return 1;
}
