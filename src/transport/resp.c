/* The responder: checks each request packet (PSN, opcode sequence, rights,
 * keys, lengths), executes it (copy into a receive WQE or an MR, READ and
 * atomic into responder resources), and owes the requester ACKs, NAKs,
 * READ responses and atomic acknowledgements, which resp_make_pkt() emits
 * in PSN order. */
#include "transport/qp.h"
#include "uroce/uroce.h"

const char *const uroce_resp_state_names[RESPST_COUNT] = {
    [RESPST_CHK_PSN] = "CHK_PSN",
    [RESPST_CHK_OP_SEQ] = "CHK_OP_SEQ",
    [RESPST_CHK_OP_VALID] = "CHK_OP_VALID",
    [RESPST_GET_RECV_WQE] = "GET_RECV_WQE",
    [RESPST_CHK_LENGTH] = "CHK_LENGTH",
    [RESPST_CHK_RKEY] = "CHK_RKEY",
    [RESPST_EXECUTE] = "EXECUTE",
    [RESPST_COMPLETE] = "COMPLETE",
    [RESPST_ACKNOWLEDGE] = "ACKNOWLEDGE",
    [RESPST_DUPLICATE] = "DUPLICATE",
    [RESPST_OOO] = "OOO",
    [RESPST_ERR_RNR] = "ERR_RNR",
    [RESPST_ERR_SEQ] = "ERR_SEQ",
    [RESPST_ERR_INVALID] = "ERR_INVALID",
    [RESPST_ERR_ACCESS] = "ERR_ACCESS",
    [RESPST_ERR_LOCAL] = "ERR_LOCAL",
    [RESPST_ERR_LENGTH] = "ERR_LENGTH",
    [RESPST_DROP] = "DROP",
    [RESPST_DONE] = "DONE",
};

#define GRH_LEN 40

void resp_reset(struct uroce_qp *qp) {
  struct resp *r = &qp->resp;
  r->epsn = qp->attr_rq_psn;
  r->msn = 0;
  r->in_msg = 0;
  r->drop_msg = false;
  r->have_rwqe = false;
  r->rcv_len = r->rcv_cap = 0;
  r->wr_va = 0;
  r->wr_left = r->wr_len = 0;
  r->ack_pending = r->ack_now = false;
  r->unacked = 0;
  r->ack_deadline = UINT64_MAX;
  r->nak_pending = r->seq_nak_sent = r->fatal = false;
  memset(r->res, 0, UROCE_MAX_RD_ATOMIC * sizeof(*r->res));
  r->nres = qp->max_dest_rd_atomic;
  r->res_next = 0;
  r->msg_first = r->msg_last = 0;
  r->msg_va = 0;
  r->ooo_drop = false;
  if (r->ooo_map)
    memset(r->ooo_map, 0, ((size_t)r->ooo_mask + 1) / 8);
}

static bool ooo_test(const struct resp *r, uint32_t psn) {
  uint32_t b = psn & r->ooo_mask;
  return r->ooo_map[b / 64] >> (b % 64) & 1;
}

/* epsn moved: consumes the packets already placed after it, as if they
 * arrived now in order (they are all of the WRITE in progress). */
static void ooo_advance(struct uroce_qp *qp) {
  struct resp *r = &qp->resp;
  bool moved = false;
  while (ooo_test(r, r->epsn)) {
    uint32_t b = r->epsn & r->ooo_mask;
    r->ooo_map[b / 64] &= ~(1ull << (b % 64));
    bool last = r->epsn == r->msg_last;
    uint32_t n = last || r->wr_left < qp->mtu ? r->wr_left : qp->mtu;
    r->wr_va += n;
    r->wr_left -= n;
    if (last) {
      r->in_msg = 0;
      r->msn = (r->msn + 1) & UROCE_PSN_MASK;
    }
    r->epsn = uroce_psn_add(r->epsn, 1);
    r->unacked++;
    moved = true;
  }
  if (moved)
    r->ack_pending = r->ack_now = true;
  if (r->ooo_drop && uroce_psn_cmp(r->epsn, r->ooo_drop_psn) >= 0) {
    r->ooo_drop = false;
    if (r->epsn == r->ooo_drop_psn) { /* dropped earlier: ask for it now */
      r->nak_pending = true;
      r->nak_syn = uroce_aeth_syn(UROCE_AETH_NAK, UROCE_NAK_PSN_SEQ_ERR);
      r->nak_psn = r->epsn;
      r->seq_nak_sent = true;
    }
  }
}

static void recv_complete(struct uroce_qp *qp, uint8_t status,
                          const struct uroce_wc *base) {
  struct uroce_wc wc = {0};
  if (base)
    wc = *base;
  wc.wr_id = qp->resp.rwqe.wr_id;
  wc.status = status;
  wc.qp_num = qp->qpn;
  if (!base)
    wc.opcode = UROCE_WC_RECV;
  cq_push(qp->rcq, &wc);
  qp->resp.have_rwqe = false;
}

void resp_flush(struct uroce_qp *qp) {
  if (qp->resp.have_rwqe)
    recv_complete(qp, UROCE_WC_WR_FLUSH_ERR, 0);
  qp->resp.in_msg = 0;
  if (qp->srq)
    return;
  struct rq *q = &qp->rq;
  while (rq_count(q)) {
    struct rwqe *w = &q->wqe[q->tail & q->mask];
    struct uroce_wc wc = {.wr_id = w->wr_id,
                          .status = UROCE_WC_WR_FLUSH_ERR,
                          .opcode = UROCE_WC_RECV,
                          .qp_num = qp->qpn};
    cq_push(qp->rcq, &wc);
    q->tail++;
  }
}

/* Checks the receive WQE's keys and sums its capacity. */
static bool rwqe_check(struct uroce_qp *qp) {
  struct resp *r = &qp->resp;
  uint64_t cap = 0;
  for (uint32_t i = 0; i < r->rwqe.nsge; i++) {
    struct uroce_mr *mr;
    const struct uroce_sge *s = &r->rwqe.sge[i];
    if (uroce_mr_check(&qp->eng->mrs, false, s->lkey, qp->pd, s->addr,
                       s->length, UROCE_ACCESS_LOCAL_WRITE, &mr))
      return false;
    cap += s->length;
  }
  r->rcv_cap = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
  return true;
}

/* The 40 bytes a UD receive buffer starts with: the IPv6 header, or for an
 * IPv4-mapped source 20 zero bytes and then the IPv4 header (the layout
 * RoCEv2 NICs use). */
static void make_grh(uint8_t grh[GRH_LEN], const struct uroce_rx_pkt *rx) {
  static const uint8_t v4pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  uint32_t udp_len = 8 + rx->pi.len;
  memset(grh, 0, GRH_LEN);
  if (memcmp(rx->sgid, v4pfx, 12) == 0) {
    uint8_t *ip = grh + 20;
    ip[0] = 0x45;
    put_be16(ip + 2, (uint16_t)(20 + udp_len));
    ip[6] = 0x40; /* DF */
    ip[8] = 64;
    ip[9] = 17;
    memcpy(ip + 12, rx->sgid + 12, 4);
    memcpy(ip + 16, rx->dgid + 12, 4);
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2)
      sum += get_be16(ip + i);
    while (sum >> 16)
      sum = (sum & 0xFFFF) + (sum >> 16);
    put_be16(ip + 10, (uint16_t)~sum);
  } else {
    grh[0] = 0x60;
    put_be16(grh + 4, (uint16_t)udp_len);
    grh[6] = 17;
    grh[7] = 64;
    memcpy(grh + 8, rx->sgid, 16);
    memcpy(grh + 24, rx->dgid, 16);
  }
}

static struct resp_res *res_find(struct uroce_qp *qp, uint8_t type,
                                 uint32_t psn) {
  for (uint32_t i = 0; i < qp->resp.nres; i++) {
    struct resp_res *res = &qp->resp.res[i];
    if (res->type == type && uroce_psn_cmp(psn, res->first_psn) >= 0 &&
        uroce_psn_cmp(psn, res->last_psn) <= 0)
      return res;
  }
  return 0;
}

static struct resp_res *res_alloc(struct uroce_qp *qp) {
  struct resp *r = &qp->resp;
  struct resp_res *res = &r->res[r->res_next++ % r->nres];
  memset(res, 0, sizeof(*res));
  return res;
}

/* An error that ends the QP: completes the receive WQE in progress with
 * wc_status; RC NAKs it and goes to ERR once the NAK is out (after the
 * responses still owed for earlier READs and atomics); UC and UD go to ERR
 * at once. Later requests are dropped meanwhile. */
static void fatal(struct uroce_qp *qp, uint8_t nak_code, uint32_t psn,
                  uint8_t wc_status) {
  if (qp->resp.have_rwqe)
    recv_complete(qp, wc_status, 0);
  qp->resp.in_msg = 0;
  if (qp->type != UROCE_QPT_RC) {
    qp_to_error(qp);
    return;
  }
  qp->resp.nak_pending = true;
  qp->resp.nak_syn = uroce_aeth_syn(UROCE_AETH_NAK, nak_code);
  qp->resp.nak_psn = psn;
  qp->resp.fatal = true;
}

static bool is_start(uint32_t mask) {
  return (mask & UROCE_OPM_FIRST) != 0;
}

/* UC: abandons the message in progress; its receive WQE is reused. */
static void uc_abandon(struct uroce_qp *qp) {
  qp->resp.in_msg = 0;
  qp->resp.rcv_len = 0;
}

void resp_rx(struct uroce_qp *qp, const struct uroce_rx_pkt *rx, uint64_t now) {
  const struct uroce_pkt_info *pi = &rx->pi;
  struct resp *r = &qp->resp;
  struct uroce_eng *eng = qp->eng;
  uint32_t mask = pi->op->mask;
  uint32_t psn = pi->psn;
  uint32_t n = pi->payload_len;
  bool rc = qp->type == UROCE_QPT_RC, ud = qp->type == UROCE_QPT_UD;
  uint32_t cls = mask & (UROCE_OPM_SEND | UROCE_OPM_WRITE | UROCE_OPM_READ |
                         UROCE_OPM_ATOMIC);
  bool last = (mask & UROCE_OPM_LAST) != 0;
  bool need_rwqe = (mask & UROCE_OPM_SEND) || ((mask & UROCE_OPM_IMM) && last);
  enum uroce_drop why = UROCE_DROP_PSN;
  struct uroce_mr *mr = 0;
  const uint8_t *reth = uroce_pkt_hdr(pi, UROCE_HDR_RETH);
  const uint8_t *atm = uroce_pkt_hdr(pi, UROCE_HDR_ATMETH);
  enum resp_state st = RESPST_CHK_PSN;

  while (st != RESPST_DONE) {
    switch (st) {
    case RESPST_CHK_PSN: {
      if (r->fatal) {
        why = UROCE_DROP_QP_STATE;
        st = RESPST_DROP;
        break;
      }
      if (ud) {
        st = RESPST_CHK_OP_VALID;
        break;
      }
      int32_t d = uroce_psn_diff(psn, r->epsn);
      if (rc) {
        st = d > 0 && r->ooo_map ? RESPST_OOO
             : d > 0             ? RESPST_ERR_SEQ
             : d < 0             ? RESPST_DUPLICATE
                                 : RESPST_CHK_OP_SEQ;
        break;
      }
      /* UC: a duplicate is dropped; a loss drops the rest of its message;
       * any FIRST/ONLY after it starts the next one. */
      if (d < 0) {
        why = UROCE_DROP_DUPLICATE;
        st = RESPST_DROP;
        break;
      }
      if (d != 0 || r->drop_msg) {
        if (is_start(mask)) {
          uc_abandon(qp);
          r->drop_msg = false;
          r->epsn = psn;
        } else {
          uc_abandon(qp);
          r->drop_msg = true;
          r->epsn = uroce_psn_add(psn, 1);
          why = UROCE_DROP_UC_MSG;
          st = RESPST_DROP;
          break;
        }
      }
      st = RESPST_CHK_OP_SEQ;
      break;
    }

    case RESPST_CHK_OP_SEQ: {
      bool ok =
          r->in_msg ? (cls == r->in_msg && !is_start(mask)) : is_start(mask);
      if (!ok && !rc && is_start(mask)) {
        uc_abandon(qp); /* UC: a new message after a lost LAST */
        ok = true;
      }
      if (!ok) {
        why = UROCE_DROP_OPCODE_SEQ;
        st = rc ? RESPST_ERR_INVALID : RESPST_DROP;
        if (!rc)
          r->drop_msg = true;
        break;
      }
      st = RESPST_CHK_OP_VALID;
      break;
    }

    case RESPST_CHK_OP_VALID: {
      uint32_t need = (mask & UROCE_OPM_WRITE)    ? UROCE_ACCESS_REMOTE_WRITE
                      : (mask & UROCE_OPM_READ)   ? UROCE_ACCESS_REMOTE_READ
                      : (mask & UROCE_OPM_ATOMIC) ? UROCE_ACCESS_REMOTE_ATOMIC
                                                  : 0;
      if ((qp->access & need) != need) {
        why = UROCE_DROP_ACCESS;
        st = rc ? RESPST_ERR_INVALID : RESPST_DROP;
        if (!rc)
          r->drop_msg = true;
        break;
      }
      if (ud &&
          uroce_deth_qkey(uroce_pkt_hdr(pi, UROCE_HDR_DETH)) != qp->qkey) {
        why = UROCE_DROP_QKEY;
        st = RESPST_DROP;
        break;
      }
      if (mask & UROCE_OPM_INV) {
        struct uroce_mr *imr = uroce_mr_by_rkey(
            &eng->mrs, uroce_ieth_rkey(uroce_pkt_hdr(pi, UROCE_HDR_IETH)));
        if (!imr || imr->pd != qp->pd) {
          st = RESPST_ERR_INVALID;
          break;
        }
      }
      st = RESPST_CHK_LENGTH;
      break;
    }

    case RESPST_CHK_LENGTH: {
      bool ok;
      if (mask & (UROCE_OPM_READ | UROCE_OPM_ATOMIC))
        ok = n == 0;
      else if (!last) /* FIRST, MIDDLE: exactly one MTU */
        ok = n == qp->mtu;
      else if (is_start(mask)) /* ONLY */
        ok = n <= qp->mtu;
      else /* LAST */
        ok = n >= 1 && n <= qp->mtu;
      if (!ok) {
        why = UROCE_DROP_LENGTH;
        st = rc ? RESPST_ERR_INVALID : RESPST_DROP;
        if (!rc)
          r->drop_msg = true;
        break;
      }
      st = need_rwqe ? RESPST_GET_RECV_WQE : RESPST_CHK_RKEY;
      break;
    }

    case RESPST_GET_RECV_WQE:
      if (!r->have_rwqe) {
        if (!rq_take(qp)) {
          why = UROCE_DROP_NO_RWQE;
          st = rc ? RESPST_ERR_RNR : RESPST_DROP;
          if (!rc && !ud)
            r->drop_msg = true;
          break;
        }
        if (!rwqe_check(qp)) {
          st = RESPST_ERR_LOCAL;
          break;
        }
      }
      st = (mask & UROCE_OPM_SEND) ? RESPST_EXECUTE : RESPST_CHK_RKEY;
      break;

    case RESPST_CHK_RKEY:
      if (reth && ((mask & UROCE_OPM_READ) || is_start(mask))) {
        uint64_t va = uroce_reth_va(reth);
        uint32_t len = uroce_reth_len(reth);
        uint32_t need = (mask & UROCE_OPM_READ) ? UROCE_ACCESS_REMOTE_READ
                                                : UROCE_ACCESS_REMOTE_WRITE;
        if (len > UROCE_MAX_MSG) {
          st = RESPST_ERR_INVALID;
          break;
        }
        if (len && uroce_mr_check(&eng->mrs, true, uroce_reth_rkey(reth),
                                  qp->pd, va, len, need, &mr)) {
          why = UROCE_DROP_ACCESS;
          st = RESPST_ERR_ACCESS;
          break;
        }
        if (mask & UROCE_OPM_WRITE) {
          r->wr_va = va;
          r->wr_rkey = uroce_reth_rkey(reth);
          r->wr_left = r->wr_len = len;
          r->msg_first = psn;
          r->msg_last = uroce_psn_add(psn, qp_npkts(qp, len) - 1);
          r->msg_va = va;
        }
      } else if (atm) {
        uint64_t va = uroce_atmeth_va(atm);
        if (va & 7) {
          st = RESPST_ERR_INVALID;
          break;
        }
        if (uroce_mr_check(&eng->mrs, true, uroce_atmeth_rkey(atm), qp->pd, va,
                           8, UROCE_ACCESS_REMOTE_ATOMIC, &mr)) {
          why = UROCE_DROP_ACCESS;
          st = RESPST_ERR_ACCESS;
          break;
        }
      }
      st = RESPST_EXECUTE;
      break;

    case RESPST_EXECUTE:
      if (mask & UROCE_OPM_SEND) {
        uint32_t off = r->rcv_len + (ud ? GRH_LEN : 0);
        if ((uint64_t)off + n > r->rcv_cap) {
          st = RESPST_ERR_LENGTH;
          break;
        }
        if (ud && !eng->phantom) {
          uint8_t grh[GRH_LEN];
          make_grh(grh, rx);
          sge_scatter(qp->eng, qp->resp.rwqe.sge, qp->resp.rwqe.nsge, 0, grh,
                      GRH_LEN);
        }
        sge_scatter(qp->eng, qp->resp.rwqe.sge, qp->resp.rwqe.nsge, off,
                    uroce_pkt_payload(pi), n);
        r->rcv_len += n;
        r->in_msg = last ? 0 : UROCE_OPM_SEND;
        st = last ? RESPST_COMPLETE : RESPST_ACKNOWLEDGE;
      } else if (mask & UROCE_OPM_WRITE) {
        if (n > r->wr_left || (last && n != r->wr_left)) {
          why = UROCE_DROP_LENGTH;
          st = rc ? RESPST_ERR_INVALID : RESPST_DROP;
          if (!rc)
            r->drop_msg = true;
          break;
        }
        /* Checked again per packet: the MR may have gone meanwhile. */
        if (n && uroce_mr_check(&eng->mrs, true, r->wr_rkey, qp->pd, r->wr_va,
                                n, UROCE_ACCESS_REMOTE_WRITE, &mr)) {
          why = UROCE_DROP_ACCESS;
          st = RESPST_ERR_ACCESS;
          break;
        }
        eng_copy(eng, (void *)(uintptr_t)r->wr_va, uroce_pkt_payload(pi), n);
        r->wr_va += n;
        r->wr_left -= n;
        r->in_msg = last ? 0 : UROCE_OPM_WRITE;
        st = (last && (mask & UROCE_OPM_IMM)) ? RESPST_COMPLETE
                                              : RESPST_ACKNOWLEDGE;
        if (last && st == RESPST_ACKNOWLEDGE)
          r->msn = (r->msn + 1) & UROCE_PSN_MASK;
      } else if (mask & UROCE_OPM_READ) {
        struct resp_res *res = res_alloc(qp);
        uint32_t len = uroce_reth_len(reth);
        res->type = RES_READ;
        res->first_psn = res->cur_psn = psn;
        res->last_psn = uroce_psn_add(psn, qp_npkts(qp, len) - 1);
        res->rkey = uroce_reth_rkey(reth);
        res->va = uroce_reth_va(reth);
        res->left = len;
        res->pending = qp->resp.any_pending = true;
        r->epsn = uroce_psn_add(res->last_psn, 1);
        r->msn = (r->msn + 1) & UROCE_PSN_MASK;
        r->ack_pending = r->ack_now = false; /* the response acks */
        r->unacked = 0;
        r->ack_deadline = UINT64_MAX;
        r->seq_nak_sent = false;
        st = RESPST_DONE;
      } else {
        struct resp_res *res = res_alloc(qp);
        uint64_t orig = 0;
        if (!eng->phantom) {
          uint64_t *p = (uint64_t *)(uintptr_t)uroce_atmeth_va(atm);
          orig = *p;
          if (pi->opcode == UROCE_OP_CMP_SWAP) {
            if (orig == uroce_atmeth_compare(atm))
              *p = uroce_atmeth_swap_add(atm);
          } else {
            *p = orig + uroce_atmeth_swap_add(atm);
          }
        }
        res->type = RES_ATOMIC;
        res->first_psn = res->last_psn = res->cur_psn = psn;
        res->orig = orig;
        res->pending = qp->resp.any_pending = true;
        r->epsn = uroce_psn_add(psn, 1);
        r->msn = (r->msn + 1) & UROCE_PSN_MASK;
        r->ack_pending = r->ack_now = false;
        r->unacked = 0;
        r->ack_deadline = UINT64_MAX;
        r->seq_nak_sent = false;
        st = RESPST_DONE;
      }
      break;

    case RESPST_COMPLETE: {
      struct uroce_wc wc = {0};
      wc.opcode = (mask & UROCE_OPM_WRITE) ? UROCE_WC_RECV_RDMA_WITH_IMM
                                           : UROCE_WC_RECV;
      wc.byte_len = (mask & UROCE_OPM_WRITE) ? r->wr_len
                                             : r->rcv_len + (ud ? GRH_LEN : 0);
      wc.src_qp =
          ud ? uroce_deth_sqp(uroce_pkt_hdr(pi, UROCE_HDR_DETH)) : qp->dest_qpn;
      if (ud)
        wc.wc_flags |= UROCE_WC_GRH;
      if (mask & UROCE_OPM_IMM) {
        memcpy(&wc.imm_data, uroce_pkt_hdr(pi, UROCE_HDR_IMMDT), 4);
        wc.wc_flags |= UROCE_WC_WITH_IMM;
      }
      if (mask & UROCE_OPM_INV) {
        uint32_t rkey = uroce_ieth_rkey(uroce_pkt_hdr(pi, UROCE_HDR_IETH));
        struct uroce_mr *imr = uroce_mr_by_rkey(&eng->mrs, rkey);
        if (imr)
          imr->state = MR_INVALID;
        wc.imm_data = rkey;
        wc.wc_flags |= UROCE_WC_WITH_INV;
      }
      recv_complete(qp, UROCE_WC_SUCCESS, &wc);
      r->rcv_len = 0;
      r->msn = (r->msn + 1) & UROCE_PSN_MASK;
      st = RESPST_ACKNOWLEDGE;
      break;
    }

    case RESPST_ACKNOWLEDGE:
      r->epsn = uroce_psn_add(psn, 1);
      if (rc) {
        r->seq_nak_sent = false;
        if (r->ooo_map)
          ooo_advance(qp);
        r->ack_pending = true;
        r->unacked++;
        if (uroce_bth_ackreq(pi->bth) || r->unacked >= eng->cfg.ack_every)
          r->ack_now = true;
        else if (r->ack_deadline == UINT64_MAX)
          r->ack_deadline = now + eng->cfg.ack_delay_ns;
      }
      st = RESPST_DONE;
      break;

    case RESPST_OOO: {
      /* Only the WRITE in progress can be placed: its first packet gave
       * the address; anything else ahead waits for go-back-N. */
      uint32_t d = (uint32_t)uroce_psn_diff(psn, r->epsn);
      bool write = (mask & UROCE_OPM_WRITE) && !(mask & UROCE_OPM_IMM) &&
                   !is_start(mask) && r->in_msg == UROCE_OPM_WRITE &&
                   uroce_psn_cmp(psn, r->msg_last) <= 0;
      if (d >= eng->cfg.max_unacked_psn || !write) {
        /* It will have to come again: NAK once epsn reaches it. */
        if (!r->ooo_drop || uroce_psn_cmp(psn, r->ooo_drop_psn) < 0)
          r->ooo_drop_psn = psn;
        r->ooo_drop = true;
        st = d >= eng->cfg.ooo_nak_gap ? RESPST_ERR_SEQ : RESPST_DROP;
        break;
      }
      if (ooo_test(r, psn)) {
        st = RESPST_DUPLICATE;
        break;
      }
      uint64_t off = (uint64_t)uroce_psn_diff(psn, r->msg_first) * qp->mtu;
      bool is_last = psn == r->msg_last;
      if (off >= r->wr_len || n != (is_last ? r->wr_len - off : qp->mtu) ||
          is_last != last) {
        why = UROCE_DROP_LENGTH;
        st = RESPST_ERR_INVALID;
        break;
      }
      if (uroce_mr_check(&eng->mrs, true, r->wr_rkey, qp->pd, r->msg_va + off,
                         n, UROCE_ACCESS_REMOTE_WRITE, &mr)) {
        why = UROCE_DROP_ACCESS;
        st = RESPST_ERR_ACCESS;
        break;
      }
      eng_copy(eng, (void *)(uintptr_t)(r->msg_va + off), uroce_pkt_payload(pi),
               n);
      uint32_t b = psn & r->ooo_mask;
      r->ooo_map[b / 64] |= 1ull << (b % 64);
      if (uroce_bth_ackreq(pi->bth))
        r->ack_pending = r->ack_now = true;
      /* epsn is this far behind: more than reordering, it was lost (or
       * dropped for coming before its message's first packet). */
      if (d >= eng->cfg.ooo_nak_gap && !r->seq_nak_sent) {
        r->nak_pending = true;
        r->nak_syn = uroce_aeth_syn(UROCE_AETH_NAK, UROCE_NAK_PSN_SEQ_ERR);
        r->nak_psn = r->epsn;
        r->seq_nak_sent = true;
      }
      st = RESPST_DONE;
      break;
    }

    case RESPST_DUPLICATE:
      eng->stats.drops[UROCE_DROP_DUPLICATE]++;
      if (mask & UROCE_OPM_READ) {
        struct resp_res *res = res_find(qp, RES_READ, psn);
        uint64_t va = uroce_reth_va(reth);
        uint32_t len = uroce_reth_len(reth);
        if (!res || len > UROCE_MAX_MSG ||
            uroce_psn_add(psn, qp_npkts(qp, len) - 1) != res->last_psn ||
            uroce_reth_rkey(reth) != res->rkey ||
            (len && uroce_mr_check(&eng->mrs, true, res->rkey, qp->pd, va, len,
                                   UROCE_ACCESS_REMOTE_READ, &mr))) {
          st = RESPST_DONE;
          break;
        }
        /* Answer again from psn on: reads are repeatable. */
        res->cur_psn = psn;
        res->va = va;
        res->left = len;
        res->first_sent = false;
        res->pending = qp->resp.any_pending = true;
      } else if (mask & UROCE_OPM_ATOMIC) {
        struct resp_res *res = res_find(qp, RES_ATOMIC, psn);
        if (res) /* resend the saved result, never execute twice */
          res->pending = qp->resp.any_pending = true;
      } else {
        r->ack_pending = r->ack_now = true; /* the ACK may have been lost */
      }
      st = RESPST_DONE;
      break;

    case RESPST_ERR_SEQ:
      if (!r->seq_nak_sent) {
        r->nak_pending = true;
        r->nak_syn = uroce_aeth_syn(UROCE_AETH_NAK, UROCE_NAK_PSN_SEQ_ERR);
        r->nak_psn = r->epsn;
        r->seq_nak_sent = true;
      }
      why = UROCE_DROP_PSN;
      st = RESPST_DROP;
      break;

    case RESPST_ERR_RNR:
      r->nak_pending = true;
      r->nak_syn = uroce_aeth_syn(UROCE_AETH_RNR_NAK, qp->min_rnr_timer);
      r->nak_psn = psn;
      r->seq_nak_sent = true; /* no sequence NAKs until it comes again */
      eng->stats.rnr_naks_tx++;
      st = RESPST_DROP;
      break;

    case RESPST_ERR_INVALID:
      fatal(qp, UROCE_NAK_INVALID_REQ, psn, UROCE_WC_REM_INV_REQ_ERR);
      st = RESPST_DONE;
      break;

    case RESPST_ERR_ACCESS:
      if (!rc) {
        r->drop_msg = true;
        st = RESPST_DROP;
        break;
      }
      fatal(qp, UROCE_NAK_REM_ACCESS_ERR, psn, UROCE_WC_REM_ACCESS_ERR);
      st = RESPST_DONE;
      break;

    case RESPST_ERR_LOCAL:
      fatal(qp, UROCE_NAK_REM_OP_ERR, psn, UROCE_WC_LOC_PROT_ERR);
      st = RESPST_DONE;
      break;

    case RESPST_ERR_LENGTH:
      if (rc) {
        fatal(qp, UROCE_NAK_INVALID_REQ, psn, UROCE_WC_LOC_LEN_ERR);
      } else {
        /* UC, UD: the receive WQE fails, the QP carries on. */
        recv_complete(qp, UROCE_WC_LOC_LEN_ERR, 0);
        r->in_msg = 0;
        r->rcv_len = 0;
        if (!ud)
          r->drop_msg = !last;
        eng->stats.drops[UROCE_DROP_TOO_LONG]++;
      }
      st = RESPST_DONE;
      break;

    case RESPST_DROP:
      eng->stats.drops[why]++;
      st = RESPST_DONE;
      break;

    default:
      st = RESPST_DONE;
      break;
    }
  }
}

/* ---- packets out ---- */

static void put_ack_hdr(struct uroce_qp *qp, struct uroce_tx_pkt *tx,
                        uint8_t opcode, uint32_t psn, uint8_t syn,
                        uint8_t pad) {
  const struct uroce_opcode_info *op = uroce_opcode(opcode);
  memset(tx->hdr, 0, UROCE_TX_HDR_MAX);
  qp_put_bth(qp, tx->hdr, opcode, false, pad, qp->dest_qpn, false, psn);
  if (op->mask & UROCE_OPM_HDR(UROCE_HDR_AETH))
    uroce_aeth_put(tx->hdr + op->offset[UROCE_HDR_AETH], syn, qp->resp.msn);
  tx->hdr_len = op->length;
  tx->pad = pad;
  tx->nseg = 0;
  tx->payload_len = 0;
  qp_tx_addr(qp, tx);
}

static struct resp_res *oldest_pending(struct uroce_qp *qp) {
  struct resp_res *best = 0;
  if (!qp->resp.any_pending) /* the common case: nothing to answer */
    return 0;
  for (uint32_t i = 0; i < qp->resp.nres; i++) {
    struct resp_res *res = &qp->resp.res[i];
    if (res->pending &&
        (!best || uroce_psn_cmp(res->cur_psn, best->cur_psn) < 0))
      best = res;
  }
  if (!best)
    qp->resp.any_pending = false;
  return best;
}

static int res_make_pkt(struct uroce_qp *qp, struct resp_res *res,
                        struct uroce_tx_pkt *tx) {
  uint8_t ack = uroce_aeth_syn(UROCE_AETH_ACK, UROCE_AETH_CREDITS_INVALID);
  if (res->type == RES_ATOMIC) {
    put_ack_hdr(qp, tx, UROCE_OP_ATOMIC_ACK, res->first_psn, ack, 0);
    const struct uroce_opcode_info *op = uroce_opcode(UROCE_OP_ATOMIC_ACK);
    uroce_atmack_put(tx->hdr + op->offset[UROCE_HDR_ATMACK], res->orig);
    res->pending = false;
    return 1;
  }
  uint32_t n = res->left < qp->mtu ? res->left : qp->mtu;
  bool first = !res->first_sent, last = n == res->left;
  /* Every response is checked against the MR again: it may be gone. */
  struct uroce_mr *mr;
  if (n && uroce_mr_check(&qp->eng->mrs, true, res->rkey, qp->pd, res->va, n,
                          UROCE_ACCESS_REMOTE_READ, &mr)) {
    res->pending = false;
    fatal(qp, UROCE_NAK_REM_ACCESS_ERR, res->cur_psn, UROCE_WC_REM_ACCESS_ERR);
    return 0;
  }
  uint8_t opcode = first && last ? UROCE_OP_READ_RESP_ONLY
                   : first       ? UROCE_OP_READ_RESP_FIRST
                   : last        ? UROCE_OP_READ_RESP_LAST
                                 : UROCE_OP_READ_RESP_MIDDLE;
  put_ack_hdr(qp, tx, opcode, res->cur_psn, ack, (uint8_t)((4 - (n & 3)) & 3));
  if (n) {
    tx->nseg = 1;
    tx->seg[0].addr = qp->eng->phantom ? 0 : (const void *)(uintptr_t)res->va;
    tx->seg[0].len = n;
    tx->payload_len = n;
  }
  res->first_sent = true;
  res->va += n;
  res->left -= n;
  res->cur_psn = uroce_psn_add(res->cur_psn, 1);
  if (last)
    res->pending = false;
  return 1;
}

/* A due NAK or ACK. */
static int ack_make_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx) {
  struct resp *r = &qp->resp;
  if (r->nak_pending) {
    put_ack_hdr(qp, tx, UROCE_OP_ACK, r->nak_psn, r->nak_syn, 0);
    r->nak_pending = false;
    r->ack_pending = r->ack_now = false;
    r->unacked = 0;
    r->ack_deadline = UINT64_MAX;
    if (uroce_aeth_kind(r->nak_syn) == UROCE_AETH_NAK)
      qp->eng->stats.naks_tx++;
    if (r->fatal)
      qp_to_error(qp); /* tx is complete; the QP is done */
    return 1;
  }
  if (r->ack_pending && r->ack_now) {
    put_ack_hdr(qp, tx, UROCE_OP_ACK, uroce_psn_add(r->epsn, UROCE_PSN_MASK),
                uroce_aeth_syn(UROCE_AETH_ACK, UROCE_AETH_CREDITS_INVALID), 0);
    r->ack_pending = r->ack_now = false;
    r->unacked = 0;
    r->ack_deadline = UINT64_MAX;
    qp->eng->stats.acks_tx++;
    return 1;
  }
  return 0;
}

int resp_make_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx, uint64_t now) {
  if (qp->type != UROCE_QPT_RC || !qp_can_recv(qp))
    return 0;
  /* READ responses and atomic acks precede any ACK or NAK: those carry
   * later PSNs and would imply the responses were lost. */
  struct resp_res *res = oldest_pending(qp);
  if (res && res_make_pkt(qp, res, tx))
    return 1;
  return ack_make_pkt(qp, tx);
}

int resp_make_ctl_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx) {
  if (qp->type != UROCE_QPT_RC || !qp_can_recv(qp) || oldest_pending(qp))
    return 0;
  return ack_make_pkt(qp, tx);
}
