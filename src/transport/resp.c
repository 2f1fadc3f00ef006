/* The responder: checks each request packet (PSN, opcode sequence, rights,
 * keys, lengths), executes it (copy into a receive WQE or an MR, READ and
 * atomic into responder resources), and owes the requester ACKs, NAKs,
 * READ responses and atomic acknowledgements, which resp_make_pkt() emits
 * in PSN order. */
#include "transport/qp.h"
#include "uroce/errors.h"

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
    [RESPST_MP_CHK] = "MP_CHK",
    [RESPST_MP_PLACE] = "MP_PLACE",
    [RESPST_MP_DEFER] = "MP_DEFER",
    [RESPST_MP_ADVANCE] = "MP_ADVANCE",
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
  r->any_pending = false;
  r->mp_hi = r->epsn;
  r->mp_ssn = 0;
  r->dup = false;
  r->trim_n = 0;
  if (r->mp_st) {
    memset(r->mp_st, 0, (size_t)r->mp_mask + 1);
    memset(r->runs, 0, MP_RUNS * sizeof(*r->runs));
  }
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

/* Checks a receive WQE's keys and sums its capacity, once; false if the
 * keys are bad. */
static bool rwqe_keys(struct uroce_qp *qp, struct rwqe *w) {
  if (w->keys == RWQE_KEYS_UNCHECKED) {
    uint64_t cap = 0;
    w->keys = RWQE_KEYS_OK;
    for (uint32_t i = 0; i < w->nsge; i++) {
      struct uroce_mr *mr;
      struct uroce_sge *s = &w->sge[i];
      if (uroce_mr_check(&qp->eng->mrs, false, s->lkey, qp->pd, NULL, s->addr,
                         s->length, UROCE_ACCESS_LOCAL_WRITE, &mr))
        w->keys = RWQE_KEYS_BAD;
      else
        s->addr = uroce_mr_host(mr, s->addr); /* where it lies, from now */
      cap += s->length;
    }
    w->cap = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
  }
  return w->keys == RWQE_KEYS_OK;
}

/* The receive WQE in progress: its keys, and its capacity in rcv_cap. */
static bool rwqe_check(struct uroce_qp *qp) {
  struct resp *r = &qp->resp;
  if (!rwqe_keys(qp, &r->rwqe))
    return false;
  r->rcv_cap = r->rwqe.cap;
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

/* Multipath READs answer from runs instead: a READ is repeatable and a
 * re-request (any part of it) is answered from the MR again, so a run is
 * free as soon as its responses are out. NULL if all are busy. */
static struct resp_res *run_alloc(struct uroce_qp *qp) {
  for (uint32_t i = 0; i < MP_RUNS; i++) {
    struct resp_res *res = &qp->resp.runs[i];
    if (!res->pending && !res->deferred) {
      memset(res, 0, sizeof(*res));
      return res;
    }
  }
  return 0;
}

/* All runs busy: a READ at or nearer epsn than some deferred one takes
 * the farthest deferred one's run (which is forgotten, and asked for
 * again when its turn comes). NULL if none is farther than psn. */
static struct resp_res *run_evict(struct uroce_qp *qp, uint32_t psn) {
  struct resp *r = &qp->resp;
  struct resp_res *far = 0;
  for (uint32_t i = 0; i < MP_RUNS; i++) {
    struct resp_res *res = &r->runs[i];
    if (res->deferred && uroce_psn_cmp(res->first_psn, psn) > 0 &&
        (!far || uroce_psn_cmp(res->first_psn, far->first_psn) > 0))
      far = res;
  }
  if (!far)
    return 0;
  for (uint32_t p = far->first_psn; uroce_psn_cmp(p, far->last_psn) <= 0;
       p = uroce_psn_add(p, 1))
    r->mp_st[p & r->mp_mask] = 0;
  memset(far, 0, sizeof(*far));
  return far;
}

static struct resp_res *read_alloc(struct uroce_qp *qp, uint32_t psn) {
  if (!qp_mp(qp))
    return res_alloc(qp);
  struct resp_res *res = run_alloc(qp);
  return res ? res : run_evict(qp, psn);
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
  bool completed; /* it completed a receive WQE */
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
  if ((p->mask & UROCE_OPM_MP) && !qp_mp(p->qp))
    return drop(p, UROCE_DROP_TRANSPORT);
  if (qp_mp(p->qp) && d >= 0)
    return RESPST_MP_CHK;
  if (d > 0)
    return RESPST_ERR_PSN_SEQ;
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
  /* Multipath: the message began in multipath opcodes (a resent first
   * packet), which the standard cursor never saw: drop the standard one,
   * it comes again in a multipath opcode. */
  if (qp_mp(p->qp) && !in_msg && !start)
    return drop(p, UROCE_DROP_OPCODE_SEQ);
  if (p->uc && start) {
    uc_abandon(p->qp); /* a new message after a lost LAST */
    return RESPST_CHK_OP_VALID;
  }
  return reject(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_OPCODE_SEQ);
}

/* The QP allows the operation; UD's Q_Key; SEND with invalidate names a
 * bound type 2 memory window of the QP's PD (mem/mr.h: nothing else may
 * be invalidated remotely). */
static enum resp_state chk_op_valid(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  if (qp->xrc && !xrc_tgt_bind(qp, p->pi)) /* XRCETH: an SRQ of its domain */
    return RESPST_ERR_INVALID_REQ;
  uint32_t need = (p->mask & UROCE_OPM_WRITE)    ? UROCE_ACCESS_REMOTE_WRITE
                  : (p->mask & UROCE_OPM_READ)   ? UROCE_ACCESS_REMOTE_READ
                  : (p->mask & UROCE_OPM_ATOMIC) ? UROCE_ACCESS_REMOTE_ATOMIC
                                                 : 0;
  if ((qp->access & need) != need)
    return reject(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_ACCESS);
  if (p->ud &&
      uroce_deth_qkey(uroce_pkt_hdr(p->pi, UROCE_HDR_DETH)) != qp->qkey)
    return drop(p, UROCE_DROP_QKEY);
  if ((p->mask & UROCE_OPM_INV) &&
      !uroce_mw_inv_target(
          &qp->eng->mrs, uroce_ieth_rkey(uroce_pkt_hdr(p->pi, UROCE_HDR_IETH)),
          qp->pd))
    return RESPST_ERR_INVALID_REQ;
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
  if (!qp->resp.have_rwqe && !rq_take(qp))
    return reject(p, RESPST_ERR_RNR, UROCE_DROP_NO_RWQE);
  if (!rwqe_check(qp)) /* (once: the result is kept) */
    return RESPST_ERR_REM_OP;
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
      uroce_mr_check(&qp->eng->mrs, true, rkey, qp->pd, qp, va, len, need, &mr))
    return reject(p, RESPST_ERR_REM_ACCESS, UROCE_DROP_ACCESS);
  if (p->mask & UROCE_OPM_WRITE) {
    r->wr_va = va;
    r->wr_rkey = rkey;
    r->wr_left = r->wr_len = len;
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
  if (uroce_mr_check(&qp->eng->mrs, true, uroce_atmeth_rkey(p->atm), qp->pd, qp,
                     va, 8, UROCE_ACCESS_REMOTE_ATOMIC, &mr))
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
  if (n && uroce_mr_check(&qp->eng->mrs, true, r->wr_rkey, qp->pd, qp, r->wr_va,
                          n, UROCE_ACCESS_REMOTE_WRITE, &mr))
    return reject(p, RESPST_ERR_REM_ACCESS, UROCE_DROP_ACCESS);
  if (n)
    eng_copy(qp->eng, (void *)(uintptr_t)uroce_mr_host(mr, r->wr_va),
             uroce_pkt_payload(p->pi), n);
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

/* Multipath: epsn jumped over [from, to] (a READ ran that covers them).
 * What was recorded there is done with: READs deferred inside it are
 * answered by it, one reaching beyond it keeps only its rest. */
static void mp_skipped(struct uroce_qp *qp, uint32_t from, uint32_t to) {
  struct resp *r = &qp->resp;
  for (uint32_t p = from; uroce_psn_cmp(p, to) <= 0; p = uroce_psn_add(p, 1))
    r->mp_st[p & r->mp_mask] = 0;
  for (uint32_t i = 0; i < MP_RUNS; i++) {
    struct resp_res *res = &r->runs[i];
    if (!res->deferred || uroce_psn_cmp(res->first_psn, from) < 0 ||
        uroce_psn_cmp(res->first_psn, to) > 0)
      continue;
    if (uroce_psn_cmp(res->last_psn, to) <= 0) {
      res->deferred = false;
      continue;
    }
    uint32_t skip = (uint32_t)uroce_psn_diff(to, res->first_psn) + 1;
    res->va += (uint64_t)skip * qp->mtu;
    res->left -= skip * qp->mtu;
    res->first_psn = res->cur_psn = uroce_psn_add(to, 1);
    r->mp_st[res->first_psn & r->mp_mask] |= RX_DEFER;
  }
}

/* Queues the READ's responses (resp_make_pkt sends them). */
static enum resp_state exec_read(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp_res *res = read_alloc(qp, p->psn);
  if (!res) /* every run busy: as if it were lost */
    return drop(p, UROCE_DROP_PSN);
  uint32_t len = uroce_reth_len(p->reth);
  res->type = RES_READ;
  res->first_psn = res->cur_psn = p->psn;
  res->last_psn = uroce_psn_add(p->psn, qp_npkts(qp, len) - 1);
  res->rkey = uroce_reth_rkey(p->reth);
  res->va = uroce_reth_va(p->reth);
  res->left = len;
  res->pending = qp->resp.any_pending = true;
  answered(&qp->resp, uroce_psn_add(res->last_psn, 1));
  if (!qp_mp(qp))
    return RESPST_DONE;
  mp_skipped(qp, uroce_psn_add(p->psn, 1), res->last_psn);
  return RESPST_MP_ADVANCE;
}

/* The atomic res describes, on memory: once. */
static void atomic_run(struct uroce_qp *qp, struct resp_res *res) {
  uint64_t orig = 0;
  if (!qp->eng->phantom && res->a_va) {
    uint64_t *v = (uint64_t *)(uintptr_t)res->a_va;
    orig = *v;
    if (res->aop == UROCE_OP_CMP_SWAP) {
      if (orig == res->a_cmp)
        *v = res->a_swap_add;
    } else {
      *v = orig + res->a_swap_add;
    }
  }
  res->orig = orig;
  res->deferred = false;
  res->pending = qp->resp.any_pending = true;
}

/* An atomic's res, its operands from the request. */
static struct resp_res *atomic_res(struct resp_pkt *p) {
  struct resp_res *res = res_alloc(p->qp);
  res->type = RES_ATOMIC;
  res->first_psn = res->last_psn = res->cur_psn = p->psn;
  res->aop = p->pi->opcode & 0x1F; /* RC's, whatever the transport */
  /* Its key was checked with this packet (chk_atmeth): where it lies. */
  struct uroce_mr *e =
      uroce_mr_by_rkey(&p->qp->eng->mrs, uroce_atmeth_rkey(p->atm));
  res->a_va = e ? uroce_mr_host(e, uroce_atmeth_va(p->atm)) : 0;
  res->a_swap_add = uroce_atmeth_swap_add(p->atm);
  res->a_cmp = uroce_atmeth_compare(p->atm);
  return res;
}

/* Executes the atomic once and keeps its result for a duplicate. */
static enum resp_state exec_atomic(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  atomic_run(qp, atomic_res(p));
  answered(&qp->resp, uroce_psn_add(p->psn, 1));
  return qp_mp(qp) ? RESPST_MP_ADVANCE : RESPST_DONE;
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
    struct uroce_mr *mw = uroce_mw_inv_target(&qp->eng->mrs, rkey, qp->pd);
    if (mw)
      uroce_mw_invalidate(mw);
    wc.imm_data = rkey;
    wc.wc_flags |= UROCE_WC_WITH_INV;
  }
  recv_complete(qp, UROCE_WC_SUCCESS, &wc);
  p->completed = true;
  r->rcv_len = 0;
  r->msn = (r->msn + 1) & UROCE_PSN_MASK;
  r->mp_ssn++;
  return RESPST_ACKNOWLEDGE;
}

/* Whether an ACK asked for now may wait for the reply (cfg.ack_hold_ns):
 * the packet completed a receive, so the application is likely to answer
 * within microseconds, and its answer and the ACK then leave in one
 * batch (one system call, not two; the receiver sees its completion
 * before the ACK is sent). Never a selective ACK, which loss recovery
 * waits for, nor past ack_every packets; and only towards a uroce peer
 * (multipath mode): a standard peer gets its ACKs as before (against the
 * kernel's rxe, uroce as the pingpong server, a held ACK was followed by
 * rxe ignoring uroce's next SEND for 67 ms retransmission after
 * retransmission, docs/transport.md). */
static bool may_hold_ack(const struct resp_pkt *p) {
  const struct uroce_qp *qp = p->qp;
  const struct resp *r = &qp->resp;
  return p->completed && qp->eng->cfg.ack_hold_ns && !r->ack_now &&
         r->unacked < qp->eng->cfg.ack_every && qp_mp(qp) && !r->dup &&
         !r->trim_n && uroce_psn_cmp(r->mp_hi, r->epsn) <= 0;
}

static void hold_ack(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  uint64_t t = p->now + qp->eng->cfg.ack_hold_ns;
  r->ack_held = true;
  if (t < r->ack_deadline)
    r->ack_deadline = t;
  if (!qp->in_held) {
    ulist_add_tail(&qp->eng->held, &qp->held);
    qp->in_held = true;
  }
}

/* One more packet to acknowledge: at once on AckReq or every ack_every
 * (unless held for the reply), else within ack_delay_ns. */
static void owe_ack(struct resp_pkt *p) {
  struct resp *r = &p->qp->resp;
  r->ack_pending = true;
  r->unacked++;
  if (uroce_bth_ackreq(p->pi->bth) || r->unacked >= p->qp->eng->cfg.ack_every) {
    if (may_hold_ack(p))
      hold_ack(p);
    else
      r->ack_now = true;
  } else if (r->ack_deadline == UINT64_MAX) {
    r->ack_deadline = p->now + p->qp->eng->cfg.ack_delay_ns;
  }
}

int resp_release_held(struct uroce_qp *qp) {
  struct resp *r = &qp->resp;
  bool due = r->ack_held && r->ack_pending && !r->ack_now;
  r->ack_held = false;
  if (due)
    r->ack_now = true;
  return due;
}

/* epsn moves past the packet; RC owes an ACK, now or after coalescing. */
static enum resp_state acknowledge(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  r->epsn = uroce_psn_add(p->psn, 1);
  if (!p->rc)
    return RESPST_DONE;
  r->seq_nak_sent = false;
  owe_ack(p);
  return qp_mp(qp) ? RESPST_MP_ADVANCE : RESPST_DONE;
}

/* A requester that asks for a READ again went back to its PSN and sends
 * every request after it again (go-back-N): the responses still owed to
 * later READs and atomics would come ahead of its answers and be dropped.
 * Worse, they look like that answer's: the completer took their PSNs as a
 * new loss and asked twice for one lost response (READ-loss seed 99092,
 * which then spent retry_cnt 3). They are sent when asked for again. */
static void drop_later(struct uroce_qp *qp, uint32_t psn) {
  for (uint32_t i = 0; i < qp->resp.nres; i++) {
    struct resp_res *res = &qp->resp.res[i];
    if (res->pending && uroce_psn_cmp(res->first_psn, psn) > 0)
      res->pending = false;
  }
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
      (len && uroce_mr_check(&qp->eng->mrs, true, res->rkey, qp->pd, qp, va,
                             len, UROCE_ACCESS_REMOTE_READ, &mr)))
    return;
  res->cur_psn = p->psn;
  res->va = va;
  res->left = len;
  res->first_sent = false;
  res->pending = qp->resp.any_pending = true;
  drop_later(qp, p->psn);
}

/* Multipath: a READ again, or any part of it, is answered from the MR
 * again (unless it is still waiting to run). */
static void mp_dup_read(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct uroce_mr *mr;
  uint64_t va = uroce_reth_va(p->reth);
  uint32_t len = uroce_reth_len(p->reth);
  if (uroce_psn_diff(p->psn, qp->resp.epsn) >= 0 || len > UROCE_MAX_MSG ||
      !(qp->access & UROCE_ACCESS_REMOTE_READ) ||
      (len &&
       uroce_mr_check(&qp->eng->mrs, true, uroce_reth_rkey(p->reth), qp->pd, qp,
                      va, len, UROCE_ACCESS_REMOTE_READ, &mr)))
    return;
  /* Only what already ran: a READ beyond epsn must wait for the requests
   * before it (it would read ahead of their WRITEs). */
  uint64_t ran = (uint64_t)uroce_psn_diff(qp->resp.epsn, p->psn) * qp->mtu;
  if (len > ran)
    len = (uint32_t)ran;
  struct resp_res *res = read_alloc(qp, p->psn);
  if (!res)
    return;
  res->type = RES_READ;
  res->first_psn = res->cur_psn = p->psn;
  res->last_psn = uroce_psn_add(p->psn, qp_npkts(qp, len) - 1);
  res->rkey = uroce_reth_rkey(p->reth);
  res->va = va;
  res->left = len;
  res->pending = qp->resp.any_pending = true;
}

static enum resp_state duplicate(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  qp_dropped(qp, UROCE_DROP_DUPLICATE, p->psn);
  /* Told in the next SACK (D-SACK): a SEND or WRITE packet again means a
   * needless resend; a READ or atomic again is how their lost responses
   * are asked for. */
  if (qp_mp(qp) && !(p->mask & (UROCE_OPM_READ | UROCE_OPM_ATOMIC))) {
    qp->resp.dup = true;
    qp->resp.dup_psn = p->psn;
  }
  if (p->mask & UROCE_OPM_READ) {
    if (qp_mp(qp))
      mp_dup_read(p);
    else
      dup_read(p);
  } else if (p->mask & UROCE_OPM_ATOMIC) {
    struct resp_res *res = res_find(qp, RES_ATOMIC, p->psn);
    if (res && !res->deferred) /* resend the saved result, never twice */
      res->pending = qp->resp.any_pending = true;
  } else {
    qp->resp.ack_pending = qp->resp.ack_now = true; /* the ACK was lost? */
  }
  return RESPST_DONE;
}

/* ---- multipath: requests placed in any order, run in order ---- */

/* Inside the window, the responder takes anything: SEND and WRITE packets
 * in multipath opcodes are placed where they say (MPETH, RETH); READs and
 * atomics that arrive ahead are recorded and run when epsn reaches them,
 * so that they see every earlier WRITE. A packet ahead that cannot be
 * taken now is dropped silently (no NAK): the requester sends it again
 * when it sees the gap, and at epsn it meets the spec's checks in order. */
static enum resp_state mp_chk(struct resp_pkt *p) {
  struct resp *r = &p->qp->resp;
  uint32_t d = (uint32_t)uroce_psn_diff(p->psn, r->epsn);
  if (d > r->mp_mask)
    return drop(p, UROCE_DROP_PSN);
  if (r->mp_st[p->psn & r->mp_mask] & RX_RCVD)
    return RESPST_DUPLICATE;
  if (p->mask & (UROCE_OPM_READ | UROCE_OPM_ATOMIC))
    return d ? RESPST_MP_DEFER : RESPST_CHK_OP_SEQ;
  if (p->mask & UROCE_OPM_MP)
    return RESPST_MP_PLACE;
  /* A standard SEND or WRITE (sent before the requester knew this end):
   * without its message's first packet it cannot be placed. */
  return d ? drop(p, UROCE_DROP_PSN) : RESPST_CHK_OP_SEQ;
}

/* At epsn an error takes its spec exit; ahead of it the packet is dropped
 * (it comes again, and fails in order). */
static enum resp_state mp_err(struct resp_pkt *p, enum resp_state err,
                              enum uroce_drop why) {
  return p->psn == p->qp->resp.epsn ? err : drop(p, why);
}

/* The receive WQE of receive sequence number ssn: the RQ's, in place, or
 * an SRQ's, taken only for the next one; NULL if not posted yet. */
static struct rwqe *mp_rwqe(struct uroce_qp *qp, uint32_t ssn) {
  struct resp *r = &qp->resp;
  uint32_t k = ssn - r->mp_ssn;
  if (r->have_rwqe && k == 0)
    return &r->rwqe;
  if (qp->srq)
    return !r->have_rwqe && k == 0 && rq_take(qp) ? &r->rwqe : 0;
  if (r->have_rwqe) /* the RQ's tail is already the next one's */
    k--;
  if (k >= rq_count(&qp->rq))
    return 0;
  return &qp->rq.wqe[(qp->rq.tail + k) & qp->rq.mask];
}

/* At epsn a failing message's receive WQE is the one the error completes
 * (fatal() completes resp.rwqe). */
static enum resp_state mp_rwqe_err(struct resp_pkt *p, enum resp_state err,
                                   enum uroce_drop why) {
  struct uroce_qp *qp = p->qp;
  if (p->psn == qp->resp.epsn && !qp->resp.have_rwqe && !qp->srq &&
      rq_count(&qp->rq))
    rq_take(qp);
  return mp_err(p, err, why);
}

/* The packet's offset and length agree with its opcode and the MTU. */
static bool mp_shape_ok(const struct resp_pkt *p, uint32_t off) {
  uint32_t mtu = p->qp->mtu, n = p->n;
  bool first = is_start(p->mask);
  if (off % mtu || first != (off == 0) || n > mtu)
    return false;
  return p->last ? first || n >= 1 : n == mtu;
}

/* The packet's message begins at or before epsn: its turn to take an
 * SRQ's WQE, as the standard responder takes it at the first packet. One
 * taken for a later message would be lost to the SRQ if an earlier one
 * failed the QP. */
static bool srq_turn(const struct resp_pkt *p, uint32_t off) {
  uint32_t first =
      uroce_psn_add(p->psn, UROCE_PSN_MASK + 1 - off / p->qp->mtu);
  return uroce_psn_cmp(first, p->qp->resp.epsn) <= 0;
}

/* A WRITE packet: its RETH is the whole message's. */
static enum resp_state mp_place_write(struct resp_pkt *p, uint32_t off,
                                      struct rwqe **cqe) {
  struct uroce_qp *qp = p->qp;
  struct uroce_mr *mr;
  uint64_t va = uroce_reth_va(p->reth);
  uint32_t len = uroce_reth_len(p->reth), n = p->n;
  if (!(qp->access & UROCE_ACCESS_REMOTE_WRITE))
    return mp_err(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_ACCESS);
  if (len > UROCE_MAX_MSG || (uint64_t)off + n > len ||
      (p->last && off + n != len))
    return mp_err(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_LENGTH);
  /* Key, rights and bounds for the whole message, as the standard
   * responder checks them at the first packet: no byte lands unless all of
   * them may. That the pages are still mapped is checked for this
   * packet's bytes, just before they are copied (as exec_write does):
   * probing the whole message at every packet cost O(pages) per packet,
   * 16 atomic probes per 4 KiB packet of a 64 KiB WRITE (8% of both
   * processes' CPU in `uroce perf write bw`), 256 of a 1 MiB one. */
  if (len &&
      (uroce_mr_check(&qp->eng->mrs, true, uroce_reth_rkey(p->reth), qp->pd, qp,
                      va + off, n, UROCE_ACCESS_REMOTE_WRITE, &mr) ||
       !uroce_mr_in_bounds(mr, va, len)))
    return mp_err(p, RESPST_ERR_REM_ACCESS, UROCE_DROP_ACCESS);
  if (p->last && (p->mask & UROCE_OPM_IMM)) {
    if (qp->srq && !qp->resp.have_rwqe && !srq_turn(p, off))
      return drop(p, UROCE_DROP_NO_RWQE);
    struct rwqe *w =
        mp_rwqe(qp, uroce_mpeth_ssn(uroce_pkt_hdr(p->pi, UROCE_HDR_MPETH)));
    if (!w)
      return mp_err(p, RESPST_ERR_RNR, UROCE_DROP_NO_RWQE);
    if (!rwqe_keys(qp, w))
      return mp_rwqe_err(p, RESPST_ERR_REM_OP, UROCE_DROP_ACCESS);
    w->wc_op = UROCE_WC_RECV_RDMA_WITH_IMM;
    w->byte_len = len;
    *cqe = w;
  }
  if (n)
    eng_copy(qp->eng, (void *)(uintptr_t)uroce_mr_host(mr, va + off),
             uroce_pkt_payload(p->pi), n);
  return RESPST_DONE;
}

/* A SEND packet: into its receive WQE at its offset (an SRQ's only once
 * it is the message's turn). */
static enum resp_state mp_place_send(struct resp_pkt *p, uint32_t off,
                                     struct rwqe **cqe) {
  struct uroce_qp *qp = p->qp;
  if (qp->srq && !qp->resp.have_rwqe && !srq_turn(p, off))
    return drop(p, UROCE_DROP_NO_RWQE);
  struct rwqe *w =
      mp_rwqe(qp, uroce_mpeth_ssn(uroce_pkt_hdr(p->pi, UROCE_HDR_MPETH)));
  if (!w)
    return mp_err(p, RESPST_ERR_RNR, UROCE_DROP_NO_RWQE);
  if (!rwqe_keys(qp, w))
    return mp_rwqe_err(p, RESPST_ERR_REM_OP, UROCE_DROP_ACCESS);
  if ((uint64_t)off + p->n > w->cap)
    return mp_rwqe_err(p, RESPST_ERR_LENGTH, UROCE_DROP_TOO_LONG);
  if ((p->mask & UROCE_OPM_INV) &&
      !uroce_mw_inv_target(
          &qp->eng->mrs, uroce_ieth_rkey(uroce_pkt_hdr(p->pi, UROCE_HDR_IETH)),
          qp->pd))
    return mp_rwqe_err(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_ACCESS);
  sge_scatter(qp->eng, w->sge, w->nsge, off, uroce_pkt_payload(p->pi), p->n);
  if (p->last) {
    w->wc_op = UROCE_WC_RECV;
    w->byte_len = off + p->n;
    *cqe = w;
  }
  return RESPST_DONE;
}

static enum resp_state mp_place(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  uint32_t off = uroce_mpeth_off(uroce_pkt_hdr(p->pi, UROCE_HDR_MPETH));
  struct rwqe *cqe = 0;
  if (!mp_shape_ok(p, off))
    return mp_err(p, RESPST_ERR_INVALID_REQ, UROCE_DROP_LENGTH);
  enum resp_state st = (p->mask & UROCE_OPM_WRITE)
                           ? mp_place_write(p, off, &cqe)
                           : mp_place_send(p, off, &cqe);
  if (st != RESPST_DONE)
    return st;
  uint8_t f = RX_RCVD | (p->last ? RX_LAST : 0);
  if (cqe) {
    const struct uroce_pkt_info *pi = p->pi;
    cqe->whole = true;
    cqe->wc_flags = 0;
    if (p->mask & UROCE_OPM_IMM) {
      memcpy(&cqe->imm, uroce_pkt_hdr(pi, UROCE_HDR_IMMDT), 4);
      cqe->wc_flags = UROCE_WC_WITH_IMM;
    } else if (p->mask & UROCE_OPM_INV) {
      cqe->imm = uroce_ieth_rkey(uroce_pkt_hdr(pi, UROCE_HDR_IETH));
      cqe->wc_flags = UROCE_WC_WITH_INV;
    }
    f |= RX_CQE;
  }
  r->mp_st[p->psn & r->mp_mask] = f;
  if (uroce_psn_cmp(p->psn, r->mp_hi) >= 0)
    r->mp_hi = uroce_psn_add(p->psn, 1);
  if (p->psn == r->epsn)
    return RESPST_MP_ADVANCE;
  owe_ack(p);
  return RESPST_DONE;
}

/* A READ or atomic ahead of epsn: checked now, run when epsn gets there. */
static enum resp_state mp_defer(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  struct uroce_mr *mr;
  uint32_t npkts = 1;
  struct resp_res *res;
  if (p->n)
    return drop(p, UROCE_DROP_LENGTH);
  if (p->mask & UROCE_OPM_READ) {
    uint64_t va = uroce_reth_va(p->reth);
    uint32_t len = uroce_reth_len(p->reth);
    npkts = len > UROCE_MAX_MSG ? 0 : qp_npkts(qp, len);
    if (!npkts || !(qp->access & UROCE_ACCESS_REMOTE_READ) ||
        (uint32_t)uroce_psn_diff(p->psn, r->epsn) + npkts > r->mp_mask + 1 ||
        (len &&
         uroce_mr_check(&qp->eng->mrs, true, uroce_reth_rkey(p->reth), qp->pd,
                        qp, va, len, UROCE_ACCESS_REMOTE_READ, &mr)))
      return drop(p, UROCE_DROP_ACCESS);
    /* Part of it already recorded (a re-request of a part arrived before
     * the request): the rest is asked for again. */
    for (uint32_t i = 1; i < npkts; i++)
      if (r->mp_st[uroce_psn_add(p->psn, i) & r->mp_mask] & RX_RCVD)
        return drop(p, UROCE_DROP_DUPLICATE);
    if (!(res = read_alloc(qp, p->psn)))
      return drop(p, UROCE_DROP_PSN);
    res->type = RES_READ;
    res->rkey = uroce_reth_rkey(p->reth);
    res->va = va;
    res->left = len;
  } else {
    uint64_t va = uroce_atmeth_va(p->atm);
    if (!(qp->access & UROCE_ACCESS_REMOTE_ATOMIC) || (va & 7) ||
        uroce_mr_check(&qp->eng->mrs, true, uroce_atmeth_rkey(p->atm), qp->pd,
                       qp, va, 8, UROCE_ACCESS_REMOTE_ATOMIC, &mr))
      return drop(p, UROCE_DROP_ACCESS);
    res = atomic_res(p);
  }
  res->first_psn = res->cur_psn = p->psn;
  res->last_psn = uroce_psn_add(p->psn, npkts - 1);
  res->deferred = true;
  for (uint32_t i = 0; i < npkts; i++)
    r->mp_st[uroce_psn_add(p->psn, i) & r->mp_mask] = RX_RCVD;
  r->mp_st[p->psn & r->mp_mask] = RX_RCVD | RX_DEFER;
  if (uroce_psn_cmp(res->last_psn, r->mp_hi) >= 0)
    r->mp_hi = uroce_psn_add(res->last_psn, 1);
  owe_ack(p);
  return RESPST_DONE;
}

/* The deferred READ or atomic at epsn runs; epsn moves past it. */
static void mp_run_deferred(struct uroce_qp *qp) {
  struct resp *r = &qp->resp;
  struct resp_res *res = 0;
  for (uint32_t i = 0; i < MP_RUNS && !res; i++)
    if (r->runs[i].deferred && r->runs[i].first_psn == r->epsn)
      res = &r->runs[i];
  for (uint32_t i = 0; i < r->nres && !res; i++)
    if (r->res[i].deferred && r->res[i].first_psn == r->epsn)
      res = &r->res[i];
  uint32_t last = res ? res->last_psn : r->epsn;
  if (res && res->type == RES_ATOMIC) {
    atomic_run(qp, res);
  } else if (res) {
    res->deferred = false;
    res->pending = r->any_pending = true;
  }
  for (uint32_t p = r->epsn; uroce_psn_cmp(p, last) <= 0;
       p = uroce_psn_add(p, 1))
    r->mp_st[p & r->mp_mask] = 0;
  r->epsn = uroce_psn_add(last, 1);
  r->msn = (r->msn + 1) & UROCE_PSN_MASK;
}

/* The receive WQE at the head of the queue is whole: completes it. False
 * when there is none or it is not whole: the peer marked two ends of one
 * message (two LAST packets, say), and the first end consumed the WQE. */
static bool mp_complete_recv(struct uroce_qp *qp) {
  struct resp *r = &qp->resp;
  if (!r->have_rwqe && (qp->srq || !rq_count(&qp->rq)))
    return false;
  struct rwqe *w = r->have_rwqe ? &r->rwqe : &qp->rq.wqe[qp->rq.tail & qp->rq.mask];
  if (!w->whole)
    return false;
  struct uroce_wc wc = {.wr_id = w->wr_id,
                        .status = UROCE_WC_SUCCESS,
                        .opcode = w->wc_op,
                        .byte_len = w->byte_len,
                        .qp_num = qp->qpn,
                        .src_qp = qp->dest_qpn,
                        .wc_flags = w->wc_flags,
                        .imm_data = w->imm};
  if (w->wc_flags & UROCE_WC_WITH_INV) {
    struct uroce_mr *mw = uroce_mw_inv_target(&qp->eng->mrs, w->imm, qp->pd);
    if (mw)
      uroce_mw_invalidate(mw);
  }
  cq_push(qp->rcq, &wc);
  if (w == &r->rwqe)
    r->have_rwqe = false;
  else
    qp->rq.tail++;
  r->mp_ssn++;
  return true;
}

static enum resp_state err_invalid_req(struct resp_pkt *p);

/* epsn moves over everything that arrived in order: messages end, receive
 * WQEs complete, deferred READs and atomics run. */
static enum resp_state mp_walk(struct resp_pkt *p) {
  struct uroce_qp *qp = p->qp;
  struct resp *r = &qp->resp;
  uint32_t moved = 0;
  for (;;) {
    uint8_t *st = &r->mp_st[r->epsn & r->mp_mask];
    if (!(*st & RX_RCVD))
      break;
    moved++;
    if (*st & RX_DEFER) {
      mp_run_deferred(qp);
      continue;
    }
    uint8_t f = *st;
    *st = 0;
    if ((f & RX_CQE) && !mp_complete_recv(qp))
      return err_invalid_req(p);
    p->completed |= (f & RX_CQE) != 0;
    if (f & RX_LAST) {
      r->msn = (r->msn + 1) & UROCE_PSN_MASK;
      r->in_msg = 0;
    } else if (r->in_msg) {
      /* A message begun in standard opcodes goes on in multipath ones:
       * keep the standard cursor in step for a standard packet later. */
      r->rcv_len += qp->mtu;
      r->wr_va += qp->mtu;
      r->wr_left -= qp->mtu < r->wr_left ? qp->mtu : r->wr_left;
    }
    r->epsn = uroce_psn_add(r->epsn, 1);
  }
  if (uroce_psn_cmp(r->mp_hi, r->epsn) < 0)
    r->mp_hi = r->epsn;
  if (moved)
    owe_ack(p);
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
  qp_dropped(qp, UROCE_DROP_TOO_LONG, p->psn);
  return RESPST_DONE;
}

static enum resp_state drop_pkt(struct resp_pkt *p) {
  qp_dropped(p->qp, p->why, p->psn);
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
  case RESPST_MP_CHK:
    return mp_chk(p);
  case RESPST_MP_PLACE:
    return mp_place(p);
  case RESPST_MP_DEFER:
    return mp_defer(p);
  case RESPST_MP_ADVANCE:
    return mp_walk(p);
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
  if (qp_mp(qp) && !qp->resp.mp_st && mp_rx_alloc(qp))
    st = drop(&p, UROCE_DROP_NO_MEM); /* as if lost: it is sent again */
  while (st != RESPST_DONE) {
    qp_trace(qp, UROCE_TR_RESP, p.psn, (uint8_t)st, 0);
    st = resp_step(&p, st);
  }
}

/* A switch cut the payload off (packet trimming): nothing of the packet
 * is used, its PSN says what was lost. Multipath: the SEND or WRITE
 * packet is told lost in the next selective ACK (UROCE_SACK_TRIM), sent
 * at once, so the requester resends it without waiting for a gap or a
 * probe (a READ or atomic request carries no payload to trim). Standard:
 * a loss like any other, and the next packet's PSN sequence NAK asks
 * for it. NAKing at once made go-back-N resend whole windows into the
 * queue that had just trimmed, before it drained: a 16-to-1 incast took
 * 5.5 ms with 895 NAKs, against 3.9 ms with 11 dropping. */
void resp_trimmed(struct uroce_qp *qp, const struct uroce_pkt_info *pi) {
  struct resp *r = &qp->resp;
  qp_dropped(qp, UROCE_DROP_TRIMMED, pi->psn);
  if (qp->type != UROCE_QPT_RC || r->fatal || !qp_mp(qp))
    return;
  /* The first packets of a QP may all be trimmed (an incast's first
   * window): its state is made as for a request that arrived whole. */
  if (!r->mp_st && mp_rx_alloc(qp))
    return;
  int32_t d = uroce_psn_diff(pi->psn, r->epsn);
  if (d < 0 || (uint32_t)d > r->mp_mask ||
      (r->mp_st[pi->psn & r->mp_mask] & RX_RCVD) ||
      !(pi->op->mask & (UROCE_OPM_SEND | UROCE_OPM_WRITE)) ||
      r->trim_n == RESP_TRIMS)
    return;
  r->trim_psn[r->trim_n++] = pi->psn;
  r->ack_pending = r->ack_now = true;
}

/* ---- packets out ---- */

static void put_ack_hdr(struct uroce_qp *qp, struct uroce_tx_pkt *tx,
                        uint8_t opcode, uint32_t psn, uint8_t syn,
                        uint8_t pad) {
  opcode = (uint8_t)(opcode + qp_opcode_base(qp)); /* XRC: 0xA0 + RC's */
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

static struct resp_res *oldest_in(struct resp_res *res, uint32_t n,
                                  struct resp_res *best) {
  for (uint32_t i = 0; i < n; i++)
    if (res[i].pending &&
        (!best || uroce_psn_cmp(res[i].cur_psn, best->cur_psn) < 0))
      best = &res[i];
  return best;
}

static struct resp_res *oldest_pending(struct uroce_qp *qp) {
  struct resp *r = &qp->resp;
  if (!r->any_pending) /* the common case: nothing to answer */
    return 0;
  struct resp_res *best = oldest_in(r->res, r->nres, 0);
  if (r->runs)
    best = oldest_in(r->runs, MP_RUNS, best);
  if (!best)
    r->any_pending = false;
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
  if (n && uroce_mr_check(&qp->eng->mrs, true, res->rkey, qp->pd, qp, res->va,
                          n, UROCE_ACCESS_REMOTE_READ, &mr)) {
    res->pending = false;
    fatal(qp, UROCE_NAK_REM_ACCESS_ERR, res->cur_psn, UROCE_WC_REM_ACCESS_ERR);
    return 0;
  }
  uint8_t opcode = first && last ? UROCE_OP_READ_RESP_ONLY
                   : first       ? UROCE_OP_READ_RESP_FIRST
                   : last        ? UROCE_OP_READ_RESP_LAST
                                 : UROCE_OP_READ_RESP_MIDDLE;
  put_ack_hdr(qp, tx, opcode, res->cur_psn, ack, (uint8_t)((4 - (n & 3)) & 3));
  if (qp_mp(qp)) /* responses are sprayed as requests are */
    tx->sport = mp_sport(qp);
  if (n) {
    tx->nseg = 1;
    tx->seg[0].addr = qp->eng->phantom
                          ? 0
                          : (const void *)(uintptr_t)uroce_mr_host(mr, res->va);
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

/* Multipath: an ACK of everything before epsn, and a bitmap of what
 * arrived after it (up to UROCE_SACK_MAX_WORDS x 64 PSNs), as payload
 * from the QP's own buffer. */
static void sack_make_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx) {
  struct resp *r = &qp->resp;
  uint32_t span = (uint32_t)uroce_psn_diff(r->mp_hi, r->epsn);
  uint32_t words = (span + 63) / 64;
  if (words > UROCE_SACK_MAX_WORDS)
    words = UROCE_SACK_MAX_WORDS;
  put_ack_hdr(qp, tx, UROCE_OP_MP_SACK, uroce_psn_add(r->epsn, UROCE_PSN_MASK),
              uroce_aeth_syn(UROCE_AETH_ACK, UROCE_AETH_CREDITS_INVALID), 0);
  const struct uroce_opcode_info *op = uroce_opcode(UROCE_OP_MP_SACK);
  if (r->trim_n) { /* a trim NACK first; a D-SACK waits for the next */
    uroce_sacketh_put(tx->hdr + op->offset[UROCE_HDR_SACKETH], (uint8_t)words,
                      r->epsn, UROCE_SACK_TRIM, r->trim_psn[0]);
    memmove(r->trim_psn, r->trim_psn + 1, --r->trim_n * sizeof(uint32_t));
  } else {
    uroce_sacketh_put(tx->hdr + op->offset[UROCE_HDR_SACKETH], (uint8_t)words,
                      r->epsn, r->dup ? UROCE_SACK_DUP : 0, r->dup_psn);
    r->dup = false;
  }
  for (uint32_t i = 0; i < words; i++) {
    uint64_t v = 0;
    for (uint32_t b = 0; b < 64 && 64 * i + b < span; b++)
      if (r->mp_st[(r->epsn + 64 * i + b) & r->mp_mask] & RX_RCVD)
        v |= 1ull << b;
    put_be64(r->sack + 8 * i, v);
  }
  tx->nseg = words ? 1 : 0;
  tx->seg[0].addr = r->sack;
  tx->seg[0].len = 8 * words;
  tx->payload_len = 8 * words;
  qp->eng->stats.sacks_tx++;
}

/* A due NAK or ACK. */
static int ack_make_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx) {
  struct resp *r = &qp->resp;
  if (r->nak_pending) {
    put_ack_hdr(qp, tx, UROCE_OP_ACK, r->nak_psn, r->nak_syn, 0);
    qp_trace(qp, UROCE_TR_NAK_TX, r->nak_psn, r->nak_syn, 0);
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
    if (qp_mp(qp) &&
        (r->dup || r->trim_n || uroce_psn_cmp(r->mp_hi, r->epsn) > 0))
      sack_make_pkt(qp, tx);
    else
      put_ack_hdr(qp, tx, UROCE_OP_ACK, uroce_psn_add(r->epsn, UROCE_PSN_MASK),
                  uroce_aeth_syn(UROCE_AETH_ACK, UROCE_AETH_CREDITS_INVALID),
                  0);
    /* More trim NACKs (or a D-SACK behind one) go in the next, at once. */
    r->ack_pending = r->ack_now = r->trim_n || (r->dup && qp_mp(qp));
    r->ack_held = false;
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
