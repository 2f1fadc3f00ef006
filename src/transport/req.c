/* The requester: turns send WQEs into request packets, one per call, in
 * PSN order. Its state says why it is not sending (window, fence, RNR
 * wait, pacing...); the completer moves it back (go-back-N) when packets
 * were lost. In multipath mode it sends the PSNs the completer marked lost
 * first, one gap at a time, and new packets after them. */
#include "transport/qp.h"
#include "uroce/errors.h"

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
  r->off = 0;
  r->cur = (struct gcur){0, 0};
  r->pkts_since_ackreq = 0;
  r->rto_deadline = r->rnr_deadline = r->pace_deadline = UINT64_MAX;
  r->retry_left = qp->retry_cnt;
  r->rnr_left = qp->rnr_retry;
  r->probe = false;
  r->back = 0;
  r->sampling = false;
  mp_tx_reset(qp);
}

/* The gather cursor at byte off of w. */
static struct gcur seek(const struct swqe *w, uint32_t off) {
  uint32_t i = 0;
  while (i < w->nsge && off >= w->sge[i].length) {
    off -= w->sge[i].length;
    i++;
  }
  return (struct gcur){i, off};
}

void req_rtt(struct uroce_qp *qp, uint64_t now) {
  struct req *r = &qp->req;
  if (r->sampling && uroce_psn_cmp(qp->comp.psn, r->sample_psn) > 0) {
    r->sampling = false;
    qp->eng->cc->on_rtt(qp->cc_state, now, now - r->sample_ts);
    qp_trace_cc(qp, now, UROCE_TRC_RTT);
  }
}

void req_rewind(struct uroce_qp *qp, uint32_t psn) {
  struct req *r = &qp->req;
  if (r->sampling && uroce_psn_cmp(psn, r->sample_psn) <= 0)
    r->sampling = false; /* it goes again: no sample (Karn) */
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
      r->cur = seek(w, r->off);
      r->pkts_since_ackreq = 0;
      r->back = 0;
      return;
    }
  }
  r->idx = i;
  r->psn = psn;
  r->off = 0;
  r->cur = (struct gcur){0, 0};
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
    if (uroce_mr_check(&qp->eng->mrs, false, w->sge[i].lkey, qp->pd, NULL,
                       w->sge[i].addr, w->sge[i].length, need, &mr))
      return false;
    /* From now on the SGE says where its bytes lie (not iova-based). */
    w->sge[i].addr = uroce_mr_host(mr, w->sge[i].addr);
  }
  return true;
}

/* Gathers n bytes at the cursor into tx segments. */
static void gather(struct uroce_qp *qp, const struct swqe *w,
                   struct uroce_tx_pkt *tx, struct gcur *c, uint32_t n) {
  bool phantom = qp->eng->phantom;
  tx->nseg = 0;
  while (n && c->i < w->nsge) {
    const struct uroce_sge *s = &w->sge[c->i];
    uint32_t take = s->length - c->off;
    if (take > n)
      take = n;
    if (take) {
      struct uroce_tx_seg *g = &tx->seg[tx->nseg++];
      g->addr = phantom ? 0 : (const void *)(uintptr_t)(s->addr + c->off);
      g->len = take;
    }
    n -= take;
    c->off += take;
    if (c->off == s->length) {
      c->i++;
      c->off = 0;
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

/* READ requests in multipath mode ask for at most a quarter of the window
 * each, so that the responses of one fit the window with room to spare. */
static uint32_t read_seg(const struct uroce_qp *qp) {
  uint32_t n = qp->eng->cfg.max_unacked_psn / 4;
  return n ? n : 1;
}

/* PSNs the request of w at psn takes: 1, or a READ's responses. */
static uint32_t req_psns(const struct uroce_qp *qp, const struct swqe *w,
                         uint32_t psn, bool mp) {
  if (w->opcode != UROCE_WR_RDMA_READ)
    return 1;
  uint32_t n = w->state == WQE_POSTED
                   ? qp_npkts(qp, w->length)
                   : (uint32_t)uroce_psn_diff(w->last_psn, psn) + 1;
  return mp && n > read_seg(qp) ? read_seg(qp) : n;
}

/* Congestion control lets a packet go now; else the requester waits. */
static bool paced(struct uroce_qp *qp, uint64_t now) {
  uint64_t t = qp->eng->cc->next_tx_time(qp->cc_state, now);
  if (t <= now)
    return true;
  qp->req.pace_deadline = t;
  return false;
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
  int32_t inflight = uroce_psn_diff(r->psn, qp->comp.psn);
  uint32_t window = qp->eng->cfg.max_unacked_psn;
  if (rc && inflight >= 0 && qp_mp(qp)) {
    /* Multipath: what is in flight (sent, neither acknowledged nor
     * selectively) within the window; the span from the oldest hole
     * within the ring, which SACKs describe. */
    uint32_t n = req_psns(qp, w, r->psn, w->state == WQE_POSTED ? true : w->mp);
    if ((uint32_t)inflight + n > qp->mp.mask + 1 ||
        (uint32_t)inflight - qp->mp.sacked + n > window)
      return REQST_WAIT_WINDOW;
  } else if (rc && inflight >= 0 && (uint32_t)inflight >= window) {
    return REQST_WAIT_WINDOW;
  }
  if (rc && qp->eng->cc->cwnd && inflight > 0 &&
      uroce_psn_cmp(r->psn, r->max_psn) >= 0 &&
      (uint64_t)inflight * qp->mtu >= qp->eng->cc->cwnd(qp->cc_state))
    return REQST_WAIT_WINDOW;
  if (!paced(qp, now))
    return REQST_WAIT_PACE;
  /* Last, as it takes from the QP's turn: new PSNs only (resending adds
   * nothing to what is in flight). */
  if (rc && uroce_psn_cmp(r->psn, r->max_psn) >= 0 &&
      !eng_room(qp->eng, qp,
                (uint64_t)req_psns(qp, w, r->psn,
                                   w->state == WQE_POSTED ? qp_mp(qp) : w->mp) *
                    qp->mtu))
    return REQST_WAIT_WINDOW;
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
  w->mp = qp_mp(qp);
  if (w->opcode == UROCE_WR_SEND || w->opcode == UROCE_WR_SEND_WITH_IMM ||
      w->opcode == UROCE_WR_SEND_WITH_INV ||
      w->opcode == UROCE_WR_RDMA_WRITE_WITH_IMM)
    w->ssn = qp->mp.ssn++;
  r->off = 0;
  r->cur = (struct gcur){0, 0};
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

/* One request packet of a WQE: where it is, what it takes. */
struct req_pkt {
  uint32_t psn;  /* its PSN */
  uint32_t off;  /* its payload's (a READ: its range's) offset in w */
  uint32_t psns; /* PSNs it takes (a READ: its responses) */
  uint32_t back; /* a READ re-request: start this many PSNs earlier */
  bool ackreq;
  /* set by build() */
  uint32_t n; /* payload bytes */
  bool last;  /* the WQE's last packet */
};

static uint8_t req_opcode(const struct uroce_qp *qp, const struct swqe *w,
                          bool first, bool last) {
  switch (w->opcode) {
  case UROCE_WR_SEND:
  case UROCE_WR_SEND_WITH_IMM:
  case UROCE_WR_SEND_WITH_INV:
    if (qp->type == UROCE_QPT_UD)
      return w->opcode == UROCE_WR_SEND_WITH_IMM ? UROCE_OP_UD_SEND_ONLY_IMM
                                                 : UROCE_OP_UD_SEND_ONLY;
    return (uint8_t)((qp_mp(qp) ? UROCE_OP_MP_BASE : qp_opcode_base(qp)) +
                     send_opcode(w, first, last));
  case UROCE_WR_RDMA_WRITE:
  case UROCE_WR_RDMA_WRITE_WITH_IMM:
    return (uint8_t)((qp_mp(qp) ? UROCE_OP_MP_BASE : qp_opcode_base(qp)) +
                     write_opcode(w, first, last));
  case UROCE_WR_RDMA_READ:
    return (uint8_t)(qp_opcode_base(qp) + UROCE_OP_READ_REQ);
  case UROCE_WR_ATOMIC_CMP_AND_SWP:
    return (uint8_t)(qp_opcode_base(qp) + UROCE_OP_CMP_SWAP);
  default:
    return (uint8_t)(qp_opcode_base(qp) + UROCE_OP_FETCH_ADD);
  }
}

/* Writes the packet k of w into tx, gathering its payload at cur. Once
 * the peer is known to speak multipath every SEND and WRITE packet uses
 * its opcodes, those of a message begun before included (they can be
 * placed wherever they arrive; standard ones only at epsn). */
static void build(struct uroce_qp *qp, const struct swqe *w,
                  struct req_pkt *k, struct gcur *cur,
                  struct uroce_tx_pkt *tx) {
  uint32_t left = w->length - k->off, mtu = qp->mtu;
  bool data = w->opcode != UROCE_WR_RDMA_READ && !wr_is_rd_atomic(w->opcode);
  k->n = data ? (left < mtu ? left : mtu) : 0;
  k->last = data ? k->n == left
                 : uroce_psn_cmp(uroce_psn_add(k->psn, k->psns - 1),
                                 w->last_psn) >= 0;
  uint8_t opcode = req_opcode(qp, w, k->off == 0, k->n == left);
  bool se = data && k->n == left && (w->flags & UROCE_SEND_SOLICITED) &&
            w->opcode != UROCE_WR_RDMA_WRITE;
  const struct uroce_opcode_info *op = uroce_opcode(opcode);
  uint8_t *h = tx->hdr;
  memset(h, 0, UROCE_TX_HDR_MAX); /* constant: a few vector stores */
  uint8_t pad = (uint8_t)((4 - (k->n & 3)) & 3);
  uint32_t dqpn = qp->type == UROCE_QPT_UD ? w->dqpn : qp->dest_qpn;
  uint32_t back = k->back * mtu;
  qp_put_bth(qp, h, opcode, se, pad, dqpn, k->ackreq,
             uroce_psn_add(k->psn, UROCE_PSN_MASK + 1 - k->back));
  uint32_t m = op->mask;
  if (m & UROCE_OPM_HDR(UROCE_HDR_DETH))
    uroce_deth_put(h + op->offset[UROCE_HDR_DETH], w->qkey, qp->qpn);
  if (m & UROCE_OPM_HDR(UROCE_HDR_XRCETH))
    uroce_xrceth_put(h + op->offset[UROCE_HDR_XRCETH], w->xrc_srqn);
  if (m & UROCE_OPM_HDR(UROCE_HDR_RETH)) {
    if (w->opcode == UROCE_WR_RDMA_READ) {
      uint64_t span = (uint64_t)k->psns * mtu;
      uroce_reth_put(h + op->offset[UROCE_HDR_RETH],
                     w->raddr + k->off - back, w->rkey,
                     (span < left ? (uint32_t)span : left) + back);
    } else {
      uroce_reth_put(h + op->offset[UROCE_HDR_RETH], w->raddr, w->rkey,
                     w->length);
    }
  }
  if (m & UROCE_OPM_HDR(UROCE_HDR_ATMETH)) {
    bool cas = w->opcode == UROCE_WR_ATOMIC_CMP_AND_SWP;
    uroce_atmeth_put(h + op->offset[UROCE_HDR_ATMETH], w->raddr, w->rkey,
                     cas ? w->swap : w->cmp_add, cas ? w->cmp_add : 0);
  }
  if (m & UROCE_OPM_HDR(UROCE_HDR_MPETH))
    uroce_mpeth_put(h + op->offset[UROCE_HDR_MPETH], w->ssn, k->off);
  if (m & UROCE_OPM_HDR(UROCE_HDR_IMMDT))
    memcpy(h + op->offset[UROCE_HDR_IMMDT], &w->imm, 4);
  if (m & UROCE_OPM_HDR(UROCE_HDR_IETH))
    put_be32(h + op->offset[UROCE_HDR_IETH], w->inv_rkey);
  tx->hdr_len = op->length;
  tx->pad = pad;
  tx->payload_len = k->n;
  if (k->n)
    gather(qp, w, tx, cur, k->n);
  else
    tx->nseg = 0;
  qp_tx_addr(qp, tx);
  if (qp->type == UROCE_QPT_UD) {
    memcpy(tx->dgid, w->dgid, 16);
    tx->sport = w->sport;
    tx->dport = w->dport;
  } else if (qp_mp(qp)) {
    tx->sport = mp_sport(qp);
  }
}

/* Multipath: sends the lowest PSN marked lost again (for a READ, its run
 * of lost responses, as one request), with AckReq so that the answer says
 * at once what is still missing. Returns 1, or 0 if there is none. */
static int retx_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx,
                    uint64_t now) {
  uint32_t p;
  while (mp_next_lost(qp, &p)) {
    if (!mp_trim_clock(qp, p))
      return 0; /* a trimmed PSN waits for a delivery to clock it */
    struct swqe *w = sq_wqe_at(qp, p);
    if (!w) { /* completed meanwhile (an error): nothing to resend */
      mp_sent(qp, p, 1, false, now);
      continue;
    }
    uint64_t off = (uint64_t)uroce_psn_diff(p, w->first_psn) * qp->mtu;
    struct req_pkt k = {.psn = p,
                        .off = off < w->length ? (uint32_t)off : w->length,
                        .psns = 1,
                        .ackreq = true};
    if (w->opcode == UROCE_WR_RDMA_READ) {
      uint32_t max = read_seg(qp);
      while (k.psns < max && uroce_psn_cmp(uroce_psn_add(p, k.psns),
                                           w->last_psn) <= 0 &&
             (*mp_tx_st(qp, uroce_psn_add(p, k.psns)) & TX_LOST))
        k.psns++;
    }
    struct gcur cur = seek(w, k.off);
    build(qp, w, &k, &cur, tx);
    uint8_t st = *mp_tx_st(qp, p);
    qp_trace(qp, UROCE_TR_RESEND, p,
             st & TX_TRIM    ? UROCE_TRC_TRIM
             : st & TX_PROBE ? UROCE_TRC_PROBE
                             : UROCE_TRC_GAP,
             0);
    mp_sent(qp, p, k.psns, wr_is_rd_atomic(w->opcode), now);
    qp->eng->stats.retx_pkts++;
    qp->eng->stats.mp_retx_pkts++;
    if (qp->req.rto_deadline == UINT64_MAX && rto_ns(qp) != UINT64_MAX)
      qp->req.rto_deadline = now + mp_pto(qp);
    return 1;
  }
  return 0;
}

/* A work request with no packet: binds or invalidates a memory window.
 * Returns its completion status. */
static uint8_t exec_local(struct uroce_qp *qp, struct swqe *w) {
  struct uroce_mr_table *t = &qp->eng->mrs;
  if (w->opcode == UROCE_WR_BIND_MW)
    return uroce_mw_bind(w->bind.mw, qp->pd, qp, w->bind.mr, w->raddr,
                         w->bind.len, w->imm, w->rkey)
               ? UROCE_WC_MW_BIND_ERR
               : UROCE_WC_SUCCESS;
  struct uroce_mr *mw = uroce_mw_inv_target(t, w->inv_rkey, qp->pd);
  if (!mw)
    return UROCE_WC_LOC_QP_OP_ERR;
  uroce_mw_invalidate(mw);
  return UROCE_WC_SUCCESS;
}

/* Local work requests at the requester's position run in order, once all
 * before them is sent (a fenced one also waits for earlier READs and
 * atomics, as any WQE), and complete in order with the rest; going back
 * over one already done passes it. One that fails stops the requester,
 * and the completer takes the QP down when its turn comes. */
static void run_local(struct uroce_qp *qp) {
  struct req *r = &qp->req;
  bool done = false;
  while (r->idx != qp->sq_head && qp_can_send(qp) && r->state != REQST_ERROR &&
         r->rnr_deadline == UINT64_MAX) {
    struct swqe *w = sq_at(qp, r->idx);
    if (!wr_is_local(w->opcode))
      break;
    if (w->state == WQE_POSTED) {
      if (qp->state == UROCE_QPS_SQD ||
          ((w->flags & UROCE_SEND_FENCE) && rd_atomic_outstanding(qp)))
        break;
      w->status = exec_local(qp, w);
      w->state = WQE_DONE;
      if (w->status != UROCE_WC_SUCCESS)
        r->state = REQST_ERROR;
      done = true;
    }
    r->idx++;
  }
  if (done)
    qp_drain_sq(qp);
}

/* Resending a gap is allowed when sending is, window or not. */
static bool can_retx(struct uroce_qp *qp, uint64_t now) {
  struct req *r = &qp->req;
  return qp_mp(qp) && qp->mp.lost && qp_can_send(qp) &&
         r->state != REQST_ERROR && r->rnr_deadline == UINT64_MAX &&
         paced(qp, now);
}

int req_make_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx, uint64_t now) {
  struct req *r = &qp->req;
  if (can_retx(qp, now) && retx_pkt(qp, tx, now))
    return 1;
  run_local(qp);
  enum req_state st = req_check(qp, now);
  if (r->state != REQST_ERROR && r->state != st) {
    qp_trace(qp, UROCE_TR_REQ, r->psn, r->state, (uint8_t)st);
    r->state = (uint8_t)st;
  }
  if (st != REQST_SEND)
    return 0;
  struct swqe *w = sq_at(qp, r->idx);
  if (wr_is_local(w->opcode))
    return 0; /* (run_local decides when it runs) */
  if (w->state == WQE_POSTED && !start_wqe(qp, w)) {
    qp_drain_sq(qp);
    return 0;
  }

  bool rc = qp->type == UROCE_QPT_RC;
  struct req_pkt k = {.psn = r->psn,
                      .off = r->off,
                      .psns = req_psns(qp, w, r->psn, w->mp)};
  if (w->opcode == UROCE_WR_RDMA_READ) {
    k.back = r->back < r->off / qp->mtu ? r->back : r->off / qp->mtu;
    r->back = 0;
  }
  if (rc) {
    r->pkts_since_ackreq++;
    uint32_t inflight = (uint32_t)uroce_psn_diff(r->psn, qp->comp.psn) + k.psns;
    bool last = uroce_psn_cmp(uroce_psn_add(r->psn, k.psns - 1),
                              w->last_psn) >= 0;
    k.ackreq = last || r->probe ||
               r->pkts_since_ackreq >= qp->eng->cfg.ackreq_every ||
               inflight >= qp->eng->cfg.max_unacked_psn;
    if (k.ackreq)
      r->pkts_since_ackreq = 0;
  }
  build(qp, w, &k, &r->cur, tx);
  if (rc && !r->sampling && qp->eng->cc->on_rtt &&
      uroce_psn_cmp(r->psn, r->max_psn) >= 0) {
    r->sampling = true;
    r->sample_psn = r->psn;
    r->sample_ts = now;
  }
  if (rc && qp_mp_track(qp)) {
    /* Idle until now: the retry count's clock starts here. */
    if (qp->comp.psn == r->max_psn)
      qp->mp.last_prog = now;
    mp_sent(qp, r->psn, k.psns, wr_is_rd_atomic(w->opcode), now);
  }

  /* Below the highest PSN sent: this packet goes out again. */
  if (uroce_psn_cmp(r->psn, r->max_psn) < 0)
    qp->eng->stats.retx_pkts++;
  r->psn = uroce_psn_add(r->psn, k.psns);
  if (uroce_psn_cmp(r->psn, r->max_psn) > 0)
    r->max_psn = r->psn;
  r->off += w->opcode == UROCE_WR_RDMA_READ ? k.psns * qp->mtu : k.n;
  if (k.last) {
    r->idx++;
    r->off = 0;
    r->cur = (struct gcur){0, 0};
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
    r->rto_deadline = now + (qp_mp(qp) ? mp_pto(qp) : rto_ns(qp));
  return 1;
}
