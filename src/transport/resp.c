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
    [RESPST_CHK_LENGTH] = "CHK_LENGTH",
    [RESPST_GET_RECV_WQE] = "GET_RECV_WQE",
    [RESPST_CHK_RKEY] = "CHK_RKEY",
    [RESPST_EXEC_SEND] = "EXEC_SEND",
    [RESPST_EXEC_WRITE] = "EXEC_WRITE",
    [RESPST_EXEC_READ] = "EXEC_READ",
    [RESPST_EXEC_ATOMIC] = "EXEC_ATOMIC",
    [RESPST_COMPLETE] = "COMPLETE",
    [RESPST_ACKNOWLEDGE] = "ACKNOWLEDGE",
    [RESPST_DUPLICATE] = "DUPLICATE",
    [RESPST_OOO] = "OOO",
    [RESPST_ERR_PSN_SEQ] = "ERR_PSN_SEQ",
    [RESPST_ERR_RNR] = "ERR_RNR",
    [RESPST_ERR_INVALID_REQ] = "ERR_INVALID_REQ",
    [RESPST_ERR_REM_ACCESS] = "ERR_REM_ACCESS",
    [RESPST_ERR_REM_OP] = "ERR_REM_OP",
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

/* Asks the requester to go back to epsn: a PSN sequence error NAK, once
 * per epsn (acknowledge() clears seq_nak_sent when epsn moves). */
static void nak_psn_seq(struct resp *r) {
  if (r->seq_nak_sent)
    return;
  r->nak_pending = true;
  r->nak_syn = uroce_aeth_syn(UROCE_AETH_NAK, UROCE_NAK_PSN_SEQ_ERR);
  r->nak_psn = r->epsn;
  r->seq_nak_sent = true;
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
    if (r->epsn == r->ooo_drop_psn) /* dropped earlier: ask for it now */
      nak_psn_seq(r);
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

static bool gid_is_v4(const uint8_t gid[16]) {
  static const uint8_t v4pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return memcmp(gid, v4pfx, 12) == 0;
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

/* ---- request packets in: one function per state ---- */

/* One request packet as the responder's steps see it. */
struct resp_pkt {
  struct uroce_qp *qp;
  const struct uroce_rx_pkt *rx;
  const struct uroce_pkt_info *pi;
  uint64_t now;
  uint32_t mask, psn;
  uint32_t n; /* payload bytes */
  bool rc, uc, ud;
  bool last; /* LAST or ONLY */
  const uint8_t *reth, *atm;
  enum uroce_drop why; /* counted by RESPST_DROP */
};

static enum resp_state drop(struct resp_pkt *p, enum uroce_drop why) {
  p->why = why;
  return RESPST_DROP;
}

/* A request the QP will not execute: RC answers it through the error state
 * err (a NAK that ends the QP, or an RNR NAK); UC drops the rest of its
 * message, UD just this packet. */
static enum resp_state reject(struct resp_pkt *p, enum resp_state err,
                              enum uroce_drop why) {
  if (p->rc)
    return err;
  if (p->uc)
    p->qp->resp.drop_msg = true;
  return drop(p, why);
}

/* UC: a duplicate is dropped; a loss drops the rest of its message; any
 * FIRST/ONLY after it starts the next one. */
static enum resp_state uc_chk_psn(struct resp_pkt *p, int32_t d) {
  struct resp *r = &p->qp->resp;
  if (d < 0)
    return drop(p, UROCE_DROP_DUPLICATE);
  if (d == 0 && !r->drop_msg)
    return RESPST_CHK_OP_SEQ;
  uc_abandon(p->qp);
  if (is_start(p->mask)) {
    r->drop_msg = false;
    r->epsn = p->psn;
    return RESPST_CHK_OP_SEQ;
  }
  r->drop_msg = true;
  r->epsn = uroce_psn_add(p->psn, 1);
  return drop(p, UROCE_DROP_UC_MSG);
}

static enum resp_state chk_psn(struct resp_pkt *p) {
  struct resp *r = &p->qp->resp;
  if (r->fatal)
    return drop(p, UROCE_DROP_QP_STATE);
  if (p->ud)
    return RESPST_CHK_OP_VALID;
  int32_t d = uroce_psn_diff(p->psn, r->epsn);
  if (p->uc)
    return uc_chk_psn(p, d);
  if (d > 0)
    return r->ooo_map ? RESPST_OOO : RESPST_ERR_PSN_SEQ;
  return d < 0 ? RESPST_DUPLICATE : RESPST_CHK_OP_SEQ;
}

/* The opcode continues the message in progress, or starts one. */
static enum resp_state chk_op_seq(struct resp_pkt *p) {
  uint32_t in_msg = p->qp->resp.in_msg;
  uint32_t cls = p->mask & (UROCE_OPM_SEND | UROCE_OPM_WRITE | UROCE_OPM_READ |
                            UROCE_OPM_ATOMIC);
  bool start = is_start(p->mask);
  if (in_msg ? cls == in_msg && !start : start)
    return RESPST_CHK_OP_VALID;
  if (p->uc && start) {
    uc_abandon(p->qp); /* a new message after a lost LAST */
    return RESPST_CHK_OP_VALID;
  }
  return reject(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_OPCODE_SEQ);
}

/* The QP allows the operation; UD's Q_Key; SEND with invalidate names an
 * MR of the QP's PD. */
static enum resp_state chk_op_valid(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  uint32_t need = (p->mask & UROCE_OPM_WRITE)    ? UROCE_ACCESS_REMOTE_WRITE
                  : (p->mask & UROCE_OPM_READ)   ? UROCE_ACCESS_REMOTE_READ
                  : (p->mask & UROCE_OPM_ATOMIC) ? UROCE_ACCESS_REMOTE_ATOMIC
                                                 : 0;
  if ((qp->access & need) != need)
    return reject(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_ACCESS);
  if (p->ud &&
      uroce_deth_qkey(uroce_pkt_hdr(p->pi, UROCE_HDR_DETH)) != qp->qkey)
    return drop(p, UROCE_DROP_QKEY);
  if (p->mask & UROCE_OPM_INV) {
    struct uroce_mr *imr = uroce_mr_by_rkey(
        &qp->eng->mrs, uroce_ieth_rkey(uroce_pkt_hdr(p->pi, UROCE_HDR_IETH)));
    if (!imr || imr->pd != qp->pd)
      return RESPST_ERR_INVALID_REQ;
  }
  return RESPST_CHK_LENGTH;
}

static enum resp_state chk_length(struct resp_pkt *p) {
  uint32_t n = p->n, mtu = p->qp->mtu;
  bool ok;
  if (p->mask & (UROCE_OPM_READ | UROCE_OPM_ATOMIC))
    ok = n == 0;
  else if (!p->last) /* FIRST, MIDDLE: exactly one MTU */
    ok = n == mtu;
  else if (is_start(p->mask)) /* ONLY */
    ok = n <= mtu;
  else /* LAST */
    ok = n >= 1 && n <= mtu;
  if (!ok)
    return reject(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_LENGTH);
  bool need_rwqe =
      (p->mask & UROCE_OPM_SEND) || ((p->mask & UROCE_OPM_IMM) && p->last);
  return need_rwqe ? RESPST_GET_RECV_WQE : RESPST_CHK_RKEY;
}

/* The execute state for the packet's operation. */
static enum resp_state exec_state(uint32_t mask) {
  return (mask & UROCE_OPM_SEND)    ? RESPST_EXEC_SEND
         : (mask & UROCE_OPM_WRITE) ? RESPST_EXEC_WRITE
         : (mask & UROCE_OPM_READ)  ? RESPST_EXEC_READ
                                    : RESPST_EXEC_ATOMIC;
}

static enum resp_state get_recv_wqe(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  if (!qp->resp.have_rwqe) {
    if (!rq_take(qp))
      return reject(p, RESPST_ERR_RNR, UROCE_DROP_NO_RWQE);
    if (!rwqe_check(qp))
      return RESPST_ERR_REM_OP;
  }
  return (p->mask & UROCE_OPM_SEND) ? RESPST_EXEC_SEND : RESPST_CHK_RKEY;
}

/* READ, or the first packet of a WRITE: the RETH's range lies in an MR
 * that allows it. A WRITE remembers where it goes. */
static enum resp_state chk_reth(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  struct uroce_mr *mr;
  uint64_t va = uroce_reth_va(p->reth);
  uint32_t len = uroce_reth_len(p->reth);
  uint32_t rkey = uroce_reth_rkey(p->reth);
  uint32_t need = (p->mask & UROCE_OPM_READ) ? UROCE_ACCESS_REMOTE_READ
                                             : UROCE_ACCESS_REMOTE_WRITE;
  if (len > UROCE_MAX_MSG)
    return RESPST_ERR_INVALID_REQ;
  if (len &&
      uroce_mr_check(&qp->eng->mrs, true, rkey, qp->pd, va, len, need, &mr))
    return reject(p, RESPST_ERR_REM_ACCESS, UROCE_DROP_ACCESS);
  if (p->mask & UROCE_OPM_WRITE) {
    r->wr_va = va;
    r->wr_rkey = rkey;
    r->wr_left = r->wr_len = len;
    r->msg_first = p->psn;
    r->msg_last = uroce_psn_add(p->psn, qp_npkts(qp, len) - 1);
    r->msg_va = va;
  }
  return exec_state(p->mask);
}

/* An atomic's target is aligned and in an MR that allows atomics. */
static enum resp_state chk_atmeth(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct uroce_mr *mr;
  uint64_t va = uroce_atmeth_va(p->atm);
  if (va & 7)
    return RESPST_ERR_INVALID_REQ;
  if (uroce_mr_check(&qp->eng->mrs, true, uroce_atmeth_rkey(p->atm), qp->pd, va,
                     8, UROCE_ACCESS_REMOTE_ATOMIC, &mr))
    return reject(p, RESPST_ERR_REM_ACCESS, UROCE_DROP_ACCESS);
  return exec_state(p->mask);
}

static enum resp_state chk_rkey(struct resp_pkt *p) {
  if (p->reth && ((p->mask & UROCE_OPM_READ) || is_start(p->mask)))
    return chk_reth(p);
  if (p->atm)
    return chk_atmeth(p);
  return exec_state(p->mask); /* WRITE after its first packet */
}

static enum resp_state exec_send(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  uint32_t off = r->rcv_len + (p->ud ? GRH_LEN : 0);
  if ((uint64_t)off + p->n > r->rcv_cap)
    return RESPST_ERR_LENGTH;
  if (p->ud && !qp->eng->phantom) {
    uint8_t grh[GRH_LEN];
    make_grh(grh, p->rx);
    sge_scatter(qp->eng, r->rwqe.sge, r->rwqe.nsge, 0, grh, GRH_LEN);
  }
  sge_scatter(qp->eng, r->rwqe.sge, r->rwqe.nsge, off, uroce_pkt_payload(p->pi),
              p->n);
  r->rcv_len += p->n;
  r->in_msg = p->last ? 0 : UROCE_OPM_SEND;
  return p->last ? RESPST_COMPLETE : RESPST_ACKNOWLEDGE;
}

static enum resp_state exec_write(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  struct uroce_mr *mr;
  uint32_t n = p->n;
  if (n > r->wr_left || (p->last && n != r->wr_left))
    return reject(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_LENGTH);
  /* Checked again per packet: the MR may have gone meanwhile. */
  if (n && uroce_mr_check(&qp->eng->mrs, true, r->wr_rkey, qp->pd, r->wr_va, n,
                          UROCE_ACCESS_REMOTE_WRITE, &mr))
    return reject(p, RESPST_ERR_REM_ACCESS, UROCE_DROP_ACCESS);
  eng_copy(qp->eng, (void *)(uintptr_t)r->wr_va, uroce_pkt_payload(p->pi), n);
  r->wr_va += n;
  r->wr_left -= n;
  r->in_msg = p->last ? 0 : UROCE_OPM_WRITE;
  if (p->last && (p->mask & UROCE_OPM_IMM))
    return RESPST_COMPLETE; /* which counts the message */
  if (p->last)
    r->msn = (r->msn + 1) & UROCE_PSN_MASK;
  return RESPST_ACKNOWLEDGE;
}

/* A READ or atomic was executed up to epsn - 1: its response acknowledges
 * it and everything before, so no ACK is owed. */
static void answered(struct resp *r, uint32_t epsn) {
  r->epsn = epsn;
  r->msn = (r->msn + 1) & UROCE_PSN_MASK;
  r->ack_pending = r->ack_now = false;
  r->unacked = 0;
  r->ack_deadline = UINT64_MAX;
  r->seq_nak_sent = false;
}

/* Queues the READ's responses (resp_make_pkt sends them). */
static enum resp_state exec_read(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp_res *res = res_alloc(qp);
  uint32_t len = uroce_reth_len(p->reth);
  res->type = RES_READ;
  res->first_psn = res->cur_psn = p->psn;
  res->last_psn = uroce_psn_add(p->psn, qp_npkts(qp, len) - 1);
  res->rkey = uroce_reth_rkey(p->reth);
  res->va = uroce_reth_va(p->reth);
  res->left = len;
  res->pending = qp->resp.any_pending = true;
  answered(&qp->resp, uroce_psn_add(res->last_psn, 1));
  return RESPST_DONE;
}

/* Executes the atomic once and keeps its result for a duplicate. */
static enum resp_state exec_atomic(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp_res *res = res_alloc(qp);
  uint64_t orig = 0;
  if (!qp->eng->phantom) {
    uint64_t *v = (uint64_t *)(uintptr_t)uroce_atmeth_va(p->atm);
    orig = *v;
    if (p->pi->opcode == UROCE_OP_CMP_SWAP) {
      if (orig == uroce_atmeth_compare(p->atm))
        *v = uroce_atmeth_swap_add(p->atm);
    } else {
      *v = orig + uroce_atmeth_swap_add(p->atm);
    }
  }
  res->type = RES_ATOMIC;
  res->first_psn = res->last_psn = res->cur_psn = p->psn;
  res->orig = orig;
  res->pending = qp->resp.any_pending = true;
  answered(&qp->resp, uroce_psn_add(p->psn, 1));
  return RESPST_DONE;
}

/* The message that consumed a receive WQE is whole: completes it. */
static enum resp_state complete(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  const struct uroce_pkt_info *pi = p->pi;
  bool write = (p->mask & UROCE_OPM_WRITE) != 0;
  struct uroce_wc wc = {0};
  wc.opcode = write ? UROCE_WC_RECV_RDMA_WITH_IMM : UROCE_WC_RECV;
  wc.byte_len = write ? r->wr_len : r->rcv_len + (p->ud ? GRH_LEN : 0);
  wc.src_qp =
      p->ud ? uroce_deth_sqp(uroce_pkt_hdr(pi, UROCE_HDR_DETH)) : qp->dest_qpn;
  if (p->ud) {
    wc.wc_flags |= UROCE_WC_GRH;
    /* RoCE's remote address information: the network header type in sl,
     * as mlx5 reports it (2 IPv4, 1 IPv6) and UCX reads it. */
    wc.sl = gid_is_v4(p->rx->sgid) ? 2 : 1;
  }
  if (p->mask & UROCE_OPM_IMM) {
    memcpy(&wc.imm_data, uroce_pkt_hdr(pi, UROCE_HDR_IMMDT), 4);
    wc.wc_flags |= UROCE_WC_WITH_IMM;
  }
  if (p->mask & UROCE_OPM_INV) {
    uint32_t rkey = uroce_ieth_rkey(uroce_pkt_hdr(pi, UROCE_HDR_IETH));
    struct uroce_mr *imr = uroce_mr_by_rkey(&qp->eng->mrs, rkey);
    if (imr)
      imr->state = MR_INVALID;
    wc.imm_data = rkey;
    wc.wc_flags |= UROCE_WC_WITH_INV;
  }
  recv_complete(qp, UROCE_WC_SUCCESS, &wc);
  r->rcv_len = 0;
  r->msn = (r->msn + 1) & UROCE_PSN_MASK;
  return RESPST_ACKNOWLEDGE;
}

/* epsn moves past the packet; RC owes an ACK, now or after coalescing. */
static enum resp_state acknowledge(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  r->epsn = uroce_psn_add(p->psn, 1);
  if (!p->rc)
    return RESPST_DONE;
  r->seq_nak_sent = false;
  if (r->ooo_map)
    ooo_advance(qp);
  r->ack_pending = true;
  r->unacked++;
  if (uroce_bth_ackreq(p->pi->bth) || r->unacked >= qp->eng->cfg.ack_every)
    r->ack_now = true;
  else if (r->ack_deadline == UINT64_MAX)
    r->ack_deadline = p->now + qp->eng->cfg.ack_delay_ns;
  return RESPST_DONE;
}

/* A READ again: answered again from its PSN on, if it matches the one
 * executed (reads are repeatable). */
static void dup_read(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp_res *res = res_find(qp, RES_READ, p->psn);
  struct uroce_mr *mr;
  uint64_t va = uroce_reth_va(p->reth);
  uint32_t len = uroce_reth_len(p->reth);
  if (!res || len > UROCE_MAX_MSG ||
      uroce_psn_add(p->psn, qp_npkts(qp, len) - 1) != res->last_psn ||
      uroce_reth_rkey(p->reth) != res->rkey ||
      (len && uroce_mr_check(&qp->eng->mrs, true, res->rkey, qp->pd, va, len,
                             UROCE_ACCESS_REMOTE_READ, &mr)))
    return;
  res->cur_psn = p->psn;
  res->va = va;
  res->left = len;
  res->first_sent = false;
  res->pending = qp->resp.any_pending = true;
}

static enum resp_state duplicate(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  qp->eng->stats.drops[UROCE_DROP_DUPLICATE]++;
  if (p->mask & UROCE_OPM_READ) {
    dup_read(p);
  } else if (p->mask & UROCE_OPM_ATOMIC) {
    struct resp_res *res = res_find(qp, RES_ATOMIC, p->psn);
    if (res) /* resend the saved result, never execute twice */
      res->pending = qp->resp.any_pending = true;
  } else {
    qp->resp.ack_pending = qp->resp.ack_now = true; /* the ACK was lost? */
  }
  return RESPST_DONE;
}

/* Only the WRITE in progress can be placed ahead of epsn: its first packet
 * gave the address. */
static bool ooo_placeable(const struct resp_pkt *p) {
  const struct resp *r = &p->qp->resp;
  return (p->mask & UROCE_OPM_WRITE) && !(p->mask & UROCE_OPM_IMM) &&
         !is_start(p->mask) && r->in_msg == UROCE_OPM_WRITE &&
         uroce_psn_cmp(p->psn, r->msg_last) <= 0;
}

/* RC, ahead of epsn with UROCE_ENG_OOO_WRITE: placed if it can be; the
 * rest waits for go-back-N. */
static enum resp_state ooo(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  const struct uroce_eng_cfg *cfg = &qp->eng->cfg;
  struct uroce_mr *mr;
  uint32_t d = (uint32_t)uroce_psn_diff(p->psn, r->epsn);
  if (d >= cfg->max_unacked_psn || !ooo_placeable(p)) {
    /* It will have to come again: NAK once epsn reaches it. */
    if (!r->ooo_drop || uroce_psn_cmp(p->psn, r->ooo_drop_psn) < 0)
      r->ooo_drop_psn = p->psn;
    r->ooo_drop = true;
    return d >= cfg->ooo_nak_gap ? RESPST_ERR_PSN_SEQ : drop(p, UROCE_DROP_PSN);
  }
  if (ooo_test(r, p->psn))
    return RESPST_DUPLICATE;
  uint64_t off = (uint64_t)uroce_psn_diff(p->psn, r->msg_first) * qp->mtu;
  bool is_last = p->psn == r->msg_last;
  if (off >= r->wr_len || p->n != (is_last ? r->wr_len - off : qp->mtu) ||
      is_last != p->last)
    return reject(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_LENGTH);
  if (uroce_mr_check(&qp->eng->mrs, true, r->wr_rkey, qp->pd, r->msg_va + off,
                     p->n, UROCE_ACCESS_REMOTE_WRITE, &mr))
    return reject(p, RESPST_ERR_REM_ACCESS, UROCE_DROP_ACCESS);
  eng_copy(qp->eng, (void *)(uintptr_t)(r->msg_va + off),
           uroce_pkt_payload(p->pi), p->n);
  uint32_t b = p->psn & r->ooo_mask;
  r->ooo_map[b / 64] |= 1ull << (b % 64);
  if (uroce_bth_ackreq(p->pi->bth))
    r->ack_pending = r->ack_now = true;
  /* epsn is this far behind: more than reordering, it was lost (or
   * dropped for coming before its message's first packet). */
  if (d >= cfg->ooo_nak_gap)
    nak_psn_seq(r);
  return RESPST_DONE;
}

/* ---- error exits, by the NAK the spec answers each class with ---- */

static enum resp_state err_psn_seq(struct resp_pkt *p) {
  nak_psn_seq(&p->qp->resp);
  return drop(p, UROCE_DROP_PSN);
}

static enum resp_state err_rnr(struct resp_pkt *p) {
  struct resp *r = &p->qp->resp;
  r->nak_pending = true;
  r->nak_syn = uroce_aeth_syn(UROCE_AETH_RNR_NAK, p->qp->min_rnr_timer);
  r->nak_psn = p->psn;
  r->seq_nak_sent = true; /* no sequence NAKs until it comes again */
  p->qp->eng->stats.rnr_naks_tx++;
  return RESPST_DROP;
}

static enum resp_state err_invalid_req(struct resp_pkt *p) {
  fatal(p->qp, UROCE_NAK_INVALID_REQ, p->psn, UROCE_WC_REM_INV_REQ_ERR);
  return RESPST_DONE;
}

static enum resp_state err_rem_access(struct resp_pkt *p) {
  fatal(p->qp, UROCE_NAK_REM_ACCESS_ERR, p->psn, UROCE_WC_REM_ACCESS_ERR);
  return RESPST_DONE;
}

/* The receive WQE is bad (its keys): the requester sees a remote
 * operational error, the receive side a local protection error. */
static enum resp_state err_rem_op(struct resp_pkt *p) {
  fatal(p->qp, UROCE_NAK_REM_OP_ERR, p->psn, UROCE_WC_LOC_PROT_ERR);
  return RESPST_DONE;
}

/* The message is longer than its receive WQE. */
static enum resp_state err_length(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  if (p->rc) {
    fatal(qp, UROCE_NAK_INVALID_REQ, p->psn, UROCE_WC_LOC_LEN_ERR);
    return RESPST_DONE;
  }
  /* UC, UD: the receive WQE fails, the QP carries on. */
  recv_complete(qp, UROCE_WC_LOC_LEN_ERR, 0);
  r->in_msg = 0;
  r->rcv_len = 0;
  if (p->uc)
    r->drop_msg = !p->last;
  qp->eng->stats.drops[UROCE_DROP_TOO_LONG]++;
  return RESPST_DONE;
}

static enum resp_state drop_pkt(struct resp_pkt *p) {
  p->qp->eng->stats.drops[p->why]++;
  return RESPST_DONE;
}

static enum resp_state resp_step(struct resp_pkt *p, enum resp_state st) {
  switch (st) {
  case RESPST_CHK_PSN:
    return chk_psn(p);
  case RESPST_CHK_OP_SEQ:
    return chk_op_seq(p);
  case RESPST_CHK_OP_VALID:
    return chk_op_valid(p);
  case RESPST_CHK_LENGTH:
    return chk_length(p);
  case RESPST_GET_RECV_WQE:
    return get_recv_wqe(p);
  case RESPST_CHK_RKEY:
    return chk_rkey(p);
  case RESPST_EXEC_SEND:
    return exec_send(p);
  case RESPST_EXEC_WRITE:
    return exec_write(p);
  case RESPST_EXEC_READ:
    return exec_read(p);
  case RESPST_EXEC_ATOMIC:
    return exec_atomic(p);
  case RESPST_COMPLETE:
    return complete(p);
  case RESPST_ACKNOWLEDGE:
    return acknowledge(p);
  case RESPST_DUPLICATE:
    return duplicate(p);
  case RESPST_OOO:
    return ooo(p);
  case RESPST_ERR_PSN_SEQ:
    return err_psn_seq(p);
  case RESPST_ERR_RNR:
    return err_rnr(p);
  case RESPST_ERR_INVALID_REQ:
    return err_invalid_req(p);
  case RESPST_ERR_REM_ACCESS:
    return err_rem_access(p);
  case RESPST_ERR_REM_OP:
    return err_rem_op(p);
  case RESPST_ERR_LENGTH:
    return err_length(p);
  case RESPST_DROP:
    return drop_pkt(p);
  case RESPST_DONE:
  case RESPST_COUNT:
    break;
  }
  return RESPST_DONE;
}

void resp_rx(struct uroce_qp *qp, const struct uroce_rx_pkt *rx, uint64_t now) {
  const struct uroce_pkt_info *pi = &rx->pi;
  struct resp_pkt p = {
      .qp = qp,
      .rx = rx,
      .pi = pi,
      .now = now,
      .mask = pi->op->mask,
      .psn = pi->psn,
      .n = pi->payload_len,
      .rc = qp->type == UROCE_QPT_RC,
      .uc = qp->type == UROCE_QPT_UC,
      .ud = qp->type == UROCE_QPT_UD,
      .last = (pi->op->mask & UROCE_OPM_LAST) != 0,
      .reth = uroce_pkt_hdr(pi, UROCE_HDR_RETH),
      .atm = uroce_pkt_hdr(pi, UROCE_HDR_ATMETH),
      .why = UROCE_DROP_PSN,
  };
  enum resp_state st = RESPST_CHK_PSN;
  while (st != RESPST_DONE)
    st = resp_step(&p, st);
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
