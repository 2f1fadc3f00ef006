/* Queue pairs: creation, the RESET..ERR state machine with the attribute
 * rules of ibv_modify_qp (IBA 11.2.4.2 / the kernel's qp_state_table),
 * posting work requests, and flushing. */
#include <errno.h>
#include <string.h>

#include "transport/qp.h"
#include "uroce/errors.h"
#include "util/bits.h"

const char *uroce_qp_state_name(int state) {
  static const char *const names[] = {"RESET", "INIT", "RTR", "RTS",
                                      "SQD",   "SQE",  "ERR"};
  return state >= 0 && state <= UROCE_QPS_ERR ? names[state] : "?";
}

/* ---- creation ---- */

static void qp_free_mem(struct uroce_eng *eng, struct uroce_qp *qp) {
  eng_free(eng, qp->sq);
  eng_free(eng, qp->sq_sge);
  eng_free(eng, qp->sq_inl);
  rq_release(eng, &qp->rq);
  eng_free(eng, qp->resp.rwqe_sge);
  eng_free(eng, qp->resp.res);
  mp_free(qp);
  eng_free(eng, qp->cc_state);
  eng_free(eng, qp);
}

static void qp_reset(struct uroce_qp *qp) {
  qp->sq_head = qp->sq_tail = 0;
  for (uint32_t i = 0; i <= qp->sq_mask; i++)
    qp->sq[i].state = WQE_POSTED;
  qp->rq.head = qp->rq.tail = 0;
  qp->peer = qp->mp_cap && (qp->eng->cfg.flags & UROCE_ENG_MULTIPATH)
                 ? PEER_MP
                 : PEER_UNKNOWN;
  req_reset(qp);
  comp_reset(qp);
  resp_reset(qp);
  qp->cnp_pending = false;
  qp->last_cnp = UINT64_MAX;
}

/* Which XRC end attr asks for, or -1 if its objects do not fit its type:
 * an initiator has a PD and a send CQ and nothing to receive with, a
 * target a domain and nothing else of its own. */
static int xrc_end(const struct uroce_pd *pd,
                   const struct uroce_qp_init_attr *a) {
  if (a->qp_type == UROCE_QPT_XRC_SEND)
    return pd && a->send_cq && !a->srq && !a->xrcd && !a->cap.max_recv_wr &&
                   !a->cap.max_recv_sge
               ? XRC_INI
               : -1;
  if (a->qp_type == UROCE_QPT_XRC_RECV)
    return a->xrcd && (!pd || pd->eng == a->xrcd->eng) && !a->srq &&
                   !a->cap.max_send_wr && !a->cap.max_recv_wr
               ? XRC_TGT
               : -1;
  return pd && a->send_cq && a->recv_cq ? XRC_NONE : -1;
}

int uroce_eng_qp_new(struct uroce_pd *pd, const struct uroce_qp_init_attr *attr,
                     struct uroce_qp **out) {
  if (!attr || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (attr->qp_type != UROCE_QPT_RC && attr->qp_type != UROCE_QPT_UC &&
      attr->qp_type != UROCE_QPT_UD && attr->qp_type != UROCE_QPT_GSI &&
      attr->qp_type != UROCE_QPT_XRC_SEND &&
      attr->qp_type != UROCE_QPT_XRC_RECV)
    return UROCE_ERR_INVALID_ARGUMENT;
  int xrc = xrc_end(pd, attr);
  if (xrc < 0)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (xrc == XRC_TGT)
    pd = 0; /* it takes the PD of each request's SRQ */
  bool gsi = attr->qp_type == UROCE_QPT_GSI;
  const struct uroce_qp_cap *cap = &attr->cap;
  if (cap->max_send_wr > 65536 || cap->max_recv_wr > 65536 ||
      cap->max_send_sge > UROCE_MAX_SGE || cap->max_recv_sge > UROCE_MAX_SGE ||
      cap->max_inline_data > UROCE_MAX_INLINE)
    return UROCE_ERR_CAPS;
  if (attr->srq && (attr->srq->pd->eng != pd->eng || attr->srq->xrcd))
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_eng *eng = xrc == XRC_TGT ? attr->xrcd->eng : pd->eng;
  struct uroce_qp *qp = eng_alloc(eng, sizeof(*qp));
  if (!qp)
    return -ENOMEM;
  uint32_t n = pow2_at_least(cap->max_send_wr ? cap->max_send_wr : 1);
  uint32_t nsge = cap->max_send_sge ? cap->max_send_sge : 1;
  qp->sq = eng_alloc(eng, (size_t)n * sizeof(*qp->sq));
  qp->sq_sge = eng_alloc(eng, (size_t)n * nsge * sizeof(*qp->sq_sge));
  if (cap->max_inline_data)
    qp->sq_inl = eng_alloc(eng, (size_t)n * cap->max_inline_data);
  qp->resp.rwqe_sge = eng_alloc(eng, UROCE_MAX_SGE * sizeof(struct uroce_sge));
  qp->resp.res = eng_alloc(eng, UROCE_MAX_RD_ATOMIC * sizeof(struct resp_res));
  if (eng->cc->state_size)
    qp->cc_state = eng_alloc(eng, eng->cc->state_size);
  qp->eng = eng;
  qp->mp_cap = !(eng->cfg.flags & UROCE_ENG_STANDARD) &&
               attr->qp_type == UROCE_QPT_RC; /* XRC: standard only */
  int rc = 0;
  if (!qp->sq || !qp->sq_sge || (cap->max_inline_data && !qp->sq_inl) ||
      !qp->resp.rwqe_sge || !qp->resp.res ||
      (eng->cc->state_size && !qp->cc_state))
    rc = -ENOMEM;
  if (!rc && !attr->srq && xrc == XRC_NONE)
    rc = rq_alloc(eng, &qp->rq, cap->max_recv_wr, cap->max_recv_sge);
  if (!rc)
    rc = eng_qp_attach(eng, qp, gsi);
  if (rc) {
    qp_free_mem(eng, qp);
    return rc;
  }
  for (uint32_t i = 0; i < n; i++)
    qp->sq[i].sge = &qp->sq_sge[(size_t)i * nsge];
  qp->eng = eng;
  qp->pd = pd;
  qp->scq = attr->send_cq;
  qp->rcq = attr->recv_cq;
  qp->srq = attr->srq;
  qp->xrc = (uint8_t)xrc;
  if (xrc == XRC_INI)
    qp->rcq = 0;
  if (xrc == XRC_TGT) {
    qp->scq = qp->rcq = 0;
    qp->xrcd = attr->xrcd;
    qp->xrcd->refs++;
  }
  qp->type = gsi ? UROCE_QPT_UD : xrc ? UROCE_QPT_RC : (uint8_t)attr->qp_type;
  qp->state = UROCE_QPS_RESET;
  qp->sq_sig_all = attr->sq_sig_all;
  qp->cap = *cap;
  if (attr->srq || xrc)
    qp->cap.max_recv_wr = qp->cap.max_recv_sge = 0;
  qp->sq_mask = n - 1;
  qp->path_mtu = UROCE_MTU_1024;
  qp->mtu = uroce_mtu_bytes(qp->path_mtu);
  if (qp->type == UROCE_QPT_UD) {
    qp->path_mtu = eng->cfg.port_mtu;
    qp->mtu = uroce_mtu_bytes(qp->path_mtu);
  }
  qp->max_dest_rd_atomic = 1;
  qp->max_rd_atomic = 1;
  qp->req.rto_deadline = qp->req.rnr_deadline = UINT64_MAX;
  qp->req.pace_deadline = qp->resp.ack_deadline = UINT64_MAX;
  qp->mp.gap_timer = UINT64_MAX;
  qp_reset(qp);
  eng->cc->init(qp->cc_state, eng->now);
  if (eng->cc->set_params && eng->cfg.cc_params)
    eng->cc->set_params(qp->cc_state, eng->cfg.cc_params, eng->now);
  qp->tr_rate = eng->cc->rate ? eng->cc->rate(qp->cc_state) : 0;
  qp->tr_cwnd = eng->cc->cwnd ? eng->cc->cwnd(qp->cc_state) : 0;
  if (xrc != XRC_TGT) {
    pd->refs++;
    qp->scq->refs++;
  }
  if (xrc == XRC_NONE)
    qp->rcq->refs++;
  if (qp->srq)
    qp->srq->refs++;
  ulist_init(&qp->sched);
  ulist_init(&qp->blocked);
  ulist_add_tail(&eng->qps, &qp->link);
  *out = qp;
  return 0;
}

int uroce_eng_qp_del(struct uroce_qp *qp) {
  if (!qp)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_eng *eng = qp->eng;
  if (qp->in_sched)
    ulist_del(&qp->sched);
  if (qp->in_blocked)
    ulist_del(&qp->blocked);
  if (qp->in_held)
    ulist_del(&qp->held);
  eng->inflight -= qp->charged;
  eng->reserved -= qp->turn;
  qp->charged = qp->turn = 0;
  eng_grant(eng); /* what it held may let others go */
  ulist_del(&qp->link);
  eng_qp_detach(eng, qp);
  if (qp->xrc == XRC_TGT) {
    qp->xrcd->refs--; /* pd, rcq, srq: borrowed from an SRQ, not held */
  } else {
    qp->pd->refs--;
    qp->scq->refs--;
    if (qp->rcq)
      qp->rcq->refs--;
    if (qp->srq)
      qp->srq->refs--;
  }
  uroce_mw_unbind_qp(&eng->mrs, qp); /* its windows must not outlive it */
  qp_free_mem(eng, qp);
  return 0;
}

uint32_t uroce_qp_num(const struct uroce_qp *qp) {
  return qp->qpn;
}

struct uroce_eng *uroce_eng_of_qp(const struct uroce_qp *qp) {
  return qp->eng;
}

void uroce_eng_qp_progress(const struct uroce_qp *qp, uint32_t *sq_una,
                           uint32_t *rq_epsn) {
  if (sq_una)
    *sq_una = qp->comp.psn;
  if (rq_epsn)
    *rq_epsn = qp->resp.epsn;
}

bool uroce_eng_qp_multipath(const struct uroce_qp *qp) {
  return qp_mp(qp);
}

const void *uroce_eng_qp_cc_state(const struct uroce_qp *qp) {
  return qp->cc_state;
}

/* ---- the state machine ---- */

#define M_(x) UROCE_QP_##x
/* Attribute masks per transition: [from][to][type 0=RC 1=UC 2=UD]. */
struct trans {
  bool valid;
  uint32_t req[3], opt[3];
};

static const struct trans *transition(int from, int to) {
  enum { RC, UC, UD };
  static const uint32_t RC_PATH = M_(CUR_STATE) | M_(ALT_PATH) |
                                  M_(ACCESS_FLAGS) | M_(MIN_RNR_TIMER) |
                                  M_(PATH_MIG_STATE);
  static const uint32_t UC_PATH =
      M_(CUR_STATE) | M_(ALT_PATH) | M_(ACCESS_FLAGS) | M_(PATH_MIG_STATE);
  static const uint32_t UD_PATH = M_(CUR_STATE) | M_(QKEY);
  static const struct trans t[7][7] =
      {
          [UROCE_QPS_RESET] =
              {
                  [UROCE_QPS_RESET] = {.valid = true},
                  [UROCE_QPS_ERR] = {.valid = true},
                  [UROCE_QPS_INIT] = {.valid = true,
                                      .req = {[RC] = M_(PKEY_INDEX) | M_(PORT) |
                                                     M_(ACCESS_FLAGS),
                                              [UC] = M_(PKEY_INDEX) | M_(PORT) |
                                                     M_(ACCESS_FLAGS),
                                              [UD] = M_(PKEY_INDEX) |
                                                     M_(PORT) | M_(QKEY)}},
              },
          [UROCE_QPS_INIT] =
              {
                  [UROCE_QPS_RESET] = {.valid = true},
                  [UROCE_QPS_ERR] = {.valid = true},
                  [UROCE_QPS_INIT] = {.valid = true,
                                      .opt = {[RC] = M_(PKEY_INDEX) | M_(PORT) |
                                                     M_(ACCESS_FLAGS),
                                              [UC] = M_(PKEY_INDEX) | M_(PORT) |
                                                     M_(ACCESS_FLAGS),
                                              [UD] = M_(PKEY_INDEX) | M_(PORT) |
                                                     M_(QKEY)}},
                  [UROCE_QPS_RTR] =
                      {.valid = true,
                       .req = {[RC] = M_(AV) | M_(PATH_MTU) | M_(DEST_QPN) |
                                      M_(RQ_PSN) | M_(MAX_DEST_RD_ATOMIC) |
                                      M_(MIN_RNR_TIMER),
                               [UC] = M_(AV) | M_(PATH_MTU) | M_(DEST_QPN) |
                                      M_(RQ_PSN)},
                       .opt = {[RC] = M_(ALT_PATH) | M_(ACCESS_FLAGS) |
                                      M_(PKEY_INDEX),
                               [UC] = M_(ALT_PATH) | M_(ACCESS_FLAGS) |
                                      M_(PKEY_INDEX),
                               [UD] = M_(PKEY_INDEX) | M_(QKEY)}},
              },
          [UROCE_QPS_RTR] =
              {
                  [UROCE_QPS_RESET] = {.valid = true},
                  [UROCE_QPS_ERR] = {.valid = true},
                  [UROCE_QPS_RTS] =
                      {.valid = true,
                       .req = {[RC] = M_(TIMEOUT) | M_(RETRY_CNT) |
                                      M_(RNR_RETRY) | M_(SQ_PSN) |
                                      M_(MAX_QP_RD_ATOMIC),
                               [UC] = M_(SQ_PSN),
                               [UD] = M_(SQ_PSN)},
                       .opt = {[RC] = RC_PATH, [UC] = UC_PATH, [UD] = UD_PATH}},
              },
          [UROCE_QPS_RTS] =
              {
                  [UROCE_QPS_RESET] = {.valid = true},
                  [UROCE_QPS_ERR] = {.valid = true},
                  [UROCE_QPS_RTS] =
                      {.valid = true,
                       .opt = {[RC] = RC_PATH, [UC] = UC_PATH, [UD] = UD_PATH}},
                  [UROCE_QPS_SQD] = {.valid = true,
                                     .opt = {[RC] = M_(EN_SQD_ASYNC_NOTIFY),
                                             [UC] = M_(EN_SQD_ASYNC_NOTIFY),
                                             [UD] = M_(EN_SQD_ASYNC_NOTIFY)}},
              },
          [UROCE_QPS_SQD] =
              {
                  [UROCE_QPS_RESET] = {.valid = true},
                  [UROCE_QPS_ERR] = {.valid = true},
                  [UROCE_QPS_RTS] =
                      {.valid = true,
                       .opt = {[RC] = RC_PATH, [UC] = UC_PATH, [UD] = UD_PATH}},
                  [UROCE_QPS_SQD] =
                      {.valid = true,
                       .opt = {[RC] = M_(PORT) | M_(AV) | M_(TIMEOUT) |
                                      M_(RETRY_CNT) | M_(RNR_RETRY) |
                                      M_(MAX_QP_RD_ATOMIC) |
                                      M_(MAX_DEST_RD_ATOMIC) | M_(ALT_PATH) |
                                      M_(ACCESS_FLAGS) | M_(PKEY_INDEX) |
                                      M_(MIN_RNR_TIMER) | M_(PATH_MIG_STATE),
                               [UC] = M_(AV) | M_(ALT_PATH) | M_(ACCESS_FLAGS) |
                                      M_(PKEY_INDEX) | M_(PATH_MIG_STATE),
                               [UD] = M_(PKEY_INDEX) | M_(QKEY)}},
              },
          [UROCE_QPS_SQE] =
              {
                  [UROCE_QPS_RESET] = {.valid = true},
                  [UROCE_QPS_ERR] = {.valid = true},
                  [UROCE_QPS_RTS] = {.valid = true,
                                     .opt = {[UC] = M_(CUR_STATE) |
                                                    M_(ACCESS_FLAGS),
                                             [UD] = M_(CUR_STATE) | M_(QKEY)}},
              },
          [UROCE_QPS_ERR] =
              {
                  [UROCE_QPS_RESET] = {.valid = true},
                  [UROCE_QPS_ERR] = {.valid = true},
              },
      };
  if (from < 0 || from > UROCE_QPS_ERR || to < 0 || to > UROCE_QPS_ERR)
    return 0;
  return t[from][to].valid ? &t[from][to] : 0;
}

/* The QP's column in the transition table. */
static int type_index(const struct uroce_qp *qp) {
  return qp->type == UROCE_QPT_RC ? 0 : qp->type == UROCE_QPT_UC ? 1 : 2;
}

/* RC's attributes that an XRC end may leave out (the kernel's table):
 * an initiator has no responder resources to size, a target never sends
 * a request. */
static uint32_t xrc_optional(const struct uroce_qp *qp, int from, int to) {
  if (qp->xrc == XRC_INI && from == UROCE_QPS_INIT && to == UROCE_QPS_RTR)
    return M_(MAX_DEST_RD_ATOMIC) | M_(MIN_RNR_TIMER);
  if (qp->xrc == XRC_TGT && from == UROCE_QPS_RTR && to == UROCE_QPS_RTS)
    return M_(RETRY_CNT) | M_(RNR_RETRY) | M_(MAX_QP_RD_ATOMIC);
  return 0;
}

/* Checks the values of the attributes named in mask. */
static int check_values(const struct uroce_qp *qp,
                        const struct uroce_qp_attr *a, int mask) {
  if ((mask & M_(ACCESS_FLAGS)) && (a->qp_access_flags & ~UROCE_ACCESS_ALL))
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(PKEY_INDEX)) && a->pkey_index != 0)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(PORT)) && a->port_num != 1)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(AV)) && !a->ah_attr.is_global)
    return UROCE_ERR_INVALID_ARGUMENT; /* RoCE needs a GRH */
  /* Up to the port's max MTU (4096), whatever its active MTU, as rxe
   * accepts it: the path MTU is the two ends' agreement, and a packet too
   * big for the link is lost on the way as on any NIC. */
  if ((mask & M_(PATH_MTU)) &&
      (a->path_mtu < UROCE_MTU_256 || a->path_mtu > UROCE_MTU_4096))
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(TIMEOUT)) && a->timeout > 31)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(RETRY_CNT)) && a->retry_cnt > 7)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(RNR_RETRY)) && a->rnr_retry > 7)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(MIN_RNR_TIMER)) && a->min_rnr_timer > 31)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(MAX_QP_RD_ATOMIC)) && a->max_rd_atomic > UROCE_MAX_RD_ATOMIC)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(MAX_DEST_RD_ATOMIC)) &&
      a->max_dest_rd_atomic > UROCE_MAX_RD_ATOMIC)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(RQ_PSN)) && a->rq_psn > UROCE_PSN_MASK)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(SQ_PSN)) && a->sq_psn > UROCE_PSN_MASK)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((mask & M_(DEST_QPN)) && a->dest_qp_num > UROCE_PSN_MASK)
    return UROCE_ERR_INVALID_ARGUMENT;
  return 0;
}

static uint16_t flow_sport(uint32_t a, uint32_t b) {
  uint32_t h = (a * 0x9E3779B1u) ^ (b * 0x85EBCA77u);
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return (uint16_t)(0xC000 | (h & 0x3FFF));
}

int uroce_eng_qp_modify(struct uroce_qp *qp, const struct uroce_qp_attr *a,
                        int mask) {
  if (!qp || !a || (mask & ~0x1FFFFF))
    return UROCE_ERR_INVALID_ARGUMENT;
  if (mask & M_(CAP))
    return UROCE_ERR_NOT_SUPPORTED;
  eng_touch(qp->eng, qp); /* a transition may arm or clear its timers */
  int cur = qp->state;
  if ((mask & M_(CUR_STATE)) && (int)a->cur_qp_state != cur)
    return UROCE_ERR_BAD_STATE;
  int next = (mask & M_(STATE)) ? (int)a->qp_state : cur;
  const struct trans *t = transition(cur, next);
  if (!t)
    return UROCE_ERR_BAD_STATE;
  int ti = type_index(qp);
  uint32_t attrs = (uint32_t)mask & ~(uint32_t)M_(STATE);
  uint32_t req = t->req[ti] & ~xrc_optional(qp, cur, next);
  if (next != UROCE_QPS_RESET && next != UROCE_QPS_ERR) {
    if ((attrs & req) != req)
      return UROCE_ERR_INVALID_ARGUMENT; /* a required attribute is missing */
    if (attrs & ~(t->req[ti] | t->opt[ti] | M_(CUR_STATE)))
      return UROCE_ERR_INVALID_ARGUMENT; /* not allowed here */
  } else if (attrs & ~(uint32_t)M_(CUR_STATE)) {
    return UROCE_ERR_INVALID_ARGUMENT;
  }
  int rc = check_values(qp, a, mask);
  if (rc)
    return rc;

  /* Apply the attributes. ALT_PATH and PATH_MIG_STATE are accepted and
   * ignored: there is no automatic path migration. */
  if (mask & M_(ACCESS_FLAGS))
    qp->access = a->qp_access_flags;
  if (mask & M_(PKEY_INDEX))
    qp->pkey_index = a->pkey_index;
  if (mask & M_(QKEY))
    qp->qkey = a->qkey;
  if (mask & M_(AV))
    qp->av = a->ah_attr;
  if (mask & M_(PATH_MTU)) {
    qp->path_mtu = (uint8_t)a->path_mtu;
    qp->mtu = uroce_mtu_bytes(qp->path_mtu);
  }
  if (mask & M_(TIMEOUT))
    qp->timeout = a->timeout;
  if (mask & M_(RETRY_CNT))
    qp->retry_cnt = a->retry_cnt;
  if (mask & M_(RNR_RETRY))
    qp->rnr_retry = a->rnr_retry;
  if (mask & M_(MIN_RNR_TIMER))
    qp->min_rnr_timer = a->min_rnr_timer;
  if (mask & M_(MAX_QP_RD_ATOMIC))
    qp->max_rd_atomic = a->max_rd_atomic ? a->max_rd_atomic : 1;
  if (mask & M_(MAX_DEST_RD_ATOMIC))
    qp->max_dest_rd_atomic = a->max_dest_rd_atomic ? a->max_dest_rd_atomic : 1;
  if (mask & M_(DEST_QPN))
    qp->dest_qpn = a->dest_qp_num;
  if (mask & M_(RQ_PSN))
    qp->attr_rq_psn = a->rq_psn;
  if (mask & M_(SQ_PSN))
    qp->attr_sq_psn = a->sq_psn;
  if (mask & M_(EN_SQD_ASYNC_NOTIFY))
    qp->sqd_notify = a->en_sqd_async_notify;
  if (mask & (M_(AV) | M_(DEST_QPN)))
    qp->sport = qp->av.sport ? qp->av.sport : flow_sport(qp->qpn, qp->dest_qpn);

  /* Enter the new state. */
  switch (next) {
  case UROCE_QPS_RESET:
    qp->state = UROCE_QPS_RESET;
    qp_reset(qp);
    break;
  case UROCE_QPS_ERR:
    if (cur != UROCE_QPS_ERR)
      qp_to_error(qp);
    break;
  case UROCE_QPS_RTR:
    if (cur == UROCE_QPS_INIT) {
      resp_reset(qp);
      qp->resp.epsn = qp->attr_rq_psn;
    }
    qp->state = UROCE_QPS_RTR;
    break;
  case UROCE_QPS_RTS:
    if (cur == UROCE_QPS_RTR) {
      req_reset(qp);
      comp_reset(qp);
    }
    if (cur == UROCE_QPS_SQE)
      qp->req.state = REQST_IDLE;
    qp->state = UROCE_QPS_RTS;
    qp->req.retry_left = qp->retry_cnt;
    qp->req.rnr_left = qp->rnr_retry;
    break;
  case UROCE_QPS_SQD:
    if (cur != UROCE_QPS_SQD)
      qp->sqd_drained = false;
    qp->state = UROCE_QPS_SQD;
    break;
  default:
    qp->state = (uint8_t)next;
    break;
  }
  if (qp->state != cur && next != UROCE_QPS_ERR) /* (qp_to_error told) */
    qp_trace(qp, UROCE_TR_QP_STATE, 0, (uint8_t)cur, qp->state);
  qp->resp.nres = qp->max_dest_rd_atomic;
  eng_charge(qp->eng, qp);
  eng_sched(qp->eng, qp);
  if (next == UROCE_QPS_SQD)
    qp_drain_sq(qp); /* may already be drained */
  return 0;
}

int uroce_eng_qp_connect(struct uroce_qp *qp, const struct uroce_qp_attr *a) {
  if (!qp || !a || a->qp_state < UROCE_QPS_INIT || a->qp_state > UROCE_QPS_RTS)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (qp->state > a->qp_state)
    return UROCE_ERR_BAD_STATE;
  struct uroce_qp_attr step = *a;
  for (int s = qp->state + 1; s <= (int)a->qp_state; s++) {
    step.qp_state = (uint32_t)s;
    int rc = uroce_eng_qp_modify(
        qp, &step, M_(STATE) | (int)transition(s - 1, s)->req[type_index(qp)]);
    if (rc)
      return rc;
  }
  return 0;
}

int uroce_eng_qp_query(struct uroce_qp *qp, struct uroce_qp_attr *a,
                       struct uroce_qp_init_attr *init) {
  if (!qp || !a)
    return UROCE_ERR_INVALID_ARGUMENT;
  memset(a, 0, sizeof(*a));
  a->qp_state = a->cur_qp_state = qp->state;
  a->path_mtu = qp->path_mtu;
  a->qkey = qp->qkey;
  a->rq_psn = qp->resp.epsn;
  a->sq_psn = qp->req.psn;
  a->dest_qp_num = qp->dest_qpn;
  a->qp_access_flags = qp->access;
  a->cap = qp->cap;
  a->ah_attr = qp->av;
  a->pkey_index = qp->pkey_index;
  a->en_sqd_async_notify = qp->sqd_notify;
  a->sq_draining = qp->state == UROCE_QPS_SQD && qp->sq_tail != qp->req.idx;
  a->max_rd_atomic = qp->max_rd_atomic;
  a->max_dest_rd_atomic = qp->max_dest_rd_atomic;
  a->min_rnr_timer = qp->min_rnr_timer;
  a->port_num = 1;
  a->timeout = qp->timeout;
  a->retry_cnt = qp->retry_cnt;
  a->rnr_retry = qp->rnr_retry;
  if (init) {
    memset(init, 0, sizeof(*init));
    init->send_cq = qp->scq;
    init->recv_cq = qp->rcq;
    init->srq = qp->srq;
    init->cap = qp->cap;
    init->qp_type = qp->xrc == XRC_INI   ? UROCE_QPT_XRC_SEND
                    : qp->xrc == XRC_TGT ? UROCE_QPT_XRC_RECV
                                         : qp->type;
    init->sq_sig_all = qp->sq_sig_all;
    init->xrcd = qp->xrcd;
    if (qp->xrc == XRC_TGT)
      init->srq = 0; /* bound per request, not the QP's */
  }
  return 0;
}

/* ---- completions and errors ---- */

static uint32_t wc_opcode(uint32_t wr_opcode) {
  switch (wr_opcode) {
  case UROCE_WR_RDMA_WRITE:
  case UROCE_WR_RDMA_WRITE_WITH_IMM:
    return UROCE_WC_RDMA_WRITE;
  case UROCE_WR_RDMA_READ:
    return UROCE_WC_RDMA_READ;
  case UROCE_WR_ATOMIC_CMP_AND_SWP:
    return UROCE_WC_COMP_SWAP;
  case UROCE_WR_ATOMIC_FETCH_AND_ADD:
    return UROCE_WC_FETCH_ADD;
  case UROCE_WR_BIND_MW:
    return UROCE_WC_BIND_MW;
  case UROCE_WR_LOCAL_INV:
    return UROCE_WC_LOCAL_INV;
  default:
    return UROCE_WC_SEND;
  }
}

void qp_complete_swqe(struct uroce_qp *qp, struct swqe *w) {
  if (!(w->flags & UROCE_SEND_SIGNALED) && w->status == UROCE_WC_SUCCESS)
    return;
  struct uroce_wc wc = {
      .wr_id = w->wr_id,
      .status = w->status,
      .opcode = wc_opcode(w->opcode),
      .byte_len = w->length,
      .qp_num = qp->qpn,
  };
  cq_push(qp->scq, &wc);
}

struct swqe *sq_wqe_at(struct uroce_qp *qp, uint32_t psn) {
  for (uint32_t i = qp->sq_tail; i != qp->sq_head; i++) {
    struct swqe *w = sq_at(qp, i);
    if (w->state == WQE_POSTED)
      break;
    if (w->state != WQE_DONE && uroce_psn_cmp(psn, w->first_psn) >= 0 &&
        uroce_psn_cmp(psn, w->last_psn) <= 0)
      return w;
  }
  return 0;
}

void qp_drain_sq(struct uroce_qp *qp) {
  while (qp->sq_tail != qp->sq_head) {
    struct swqe *w = sq_at(qp, qp->sq_tail);
    if (w->state != WQE_DONE)
      break;
    qp_complete_swqe(qp, w);
    w->state = WQE_POSTED;
    qp->sq_tail++;
    if (w->status != UROCE_WC_SUCCESS && w->status != UROCE_WC_WR_FLUSH_ERR &&
        qp->state != UROCE_QPS_ERR && qp->state != UROCE_QPS_SQE) {
      /* The first failed WQE takes the QP down (RC) or stops the send
       * queue (UC, UD); the rest are flushed. */
      if (qp->type == UROCE_QPT_RC)
        qp_to_error(qp);
      else
        qp_to_sqe(qp);
      return;
    }
  }
  if (qp->state == UROCE_QPS_SQD && !qp->sqd_drained &&
      qp->sq_tail == qp->req.idx && qp->req.off == 0) {
    qp->sqd_drained = true;
    if (qp->sqd_notify)
      eng_async(qp->eng, UROCE_EVENT_SQ_DRAINED, qp);
  }
}

/* Marks every unfinished send WQE flushed and completes them all. */
static void flush_sq(struct uroce_qp *qp) {
  for (uint32_t i = qp->sq_tail; i != qp->sq_head; i++) {
    struct swqe *w = sq_at(qp, i);
    if (w->state != WQE_DONE) {
      w->state = WQE_DONE;
      w->status = UROCE_WC_WR_FLUSH_ERR;
    }
  }
  qp_drain_sq(qp);
  qp->req.idx = qp->sq_head;
  qp->req.off = 0;
  qp->req.rto_deadline = qp->req.rnr_deadline = UINT64_MAX;
  qp->req.pace_deadline = UINT64_MAX;
}

void qp_to_error(struct uroce_qp *qp) {
  eng_touch(qp->eng, qp);
  qp_trace(qp, UROCE_TR_QP_STATE, 0, qp->state, UROCE_QPS_ERR);
  qp->state = UROCE_QPS_ERR;
  qp->req.state = REQST_ERROR;
  flush_sq(qp);
  eng_charge(qp->eng, qp);
  resp_flush(qp);
  qp->resp.ack_deadline = UINT64_MAX;
  qp->resp.ack_pending = qp->resp.ack_now = qp->resp.ack_held = false;
  for (uint32_t i = 0; i < UROCE_MAX_RD_ATOMIC; i++)
    qp->resp.res[i].pending = false;
  for (uint32_t i = 0; qp->resp.runs && i < MP_RUNS; i++)
    qp->resp.runs[i].pending = qp->resp.runs[i].deferred = false;
}

void qp_to_sqe(struct uroce_qp *qp) {
  eng_touch(qp->eng, qp);
  qp_trace(qp, UROCE_TR_QP_STATE, 0, qp->state, UROCE_QPS_SQE);
  qp->state = UROCE_QPS_SQE;
  qp->req.state = REQST_ERROR;
  flush_sq(qp);
}

void qp_put_bth(struct uroce_qp *qp, uint8_t *b, uint8_t opcode, bool se,
                uint8_t pad, uint32_t dqpn, bool ackreq, uint32_t psn) {
  uroce_bth_put(b, opcode, se, false, pad, 0xFFFF, false, false, dqpn, ackreq,
                psn);
  if (qp_mp_track(qp))
    uroce_bth_set_mp(b, true);
}

void qp_tx_addr(struct uroce_qp *qp, struct uroce_tx_pkt *tx) {
  memcpy(tx->dgid, qp->av.dgid, 16);
  tx->sport = qp->sport;
  tx->dport = qp->av.dport;
  tx->qpn = qp->qpn;
  tx->ecn = 2; /* ECT(0) */
}

/* ---- posting ---- */

static bool opcode_ok(const struct uroce_qp *qp, uint32_t op) {
  switch (op) {
  case UROCE_WR_SEND:
  case UROCE_WR_SEND_WITH_IMM:
    return true;
  case UROCE_WR_RDMA_WRITE:
  case UROCE_WR_RDMA_WRITE_WITH_IMM:
    return qp->type != UROCE_QPT_UD;
  case UROCE_WR_RDMA_READ:
  case UROCE_WR_ATOMIC_CMP_AND_SWP:
  case UROCE_WR_ATOMIC_FETCH_AND_ADD:
  case UROCE_WR_SEND_WITH_INV:
    return qp->type == UROCE_QPT_RC;
  case UROCE_WR_BIND_MW:
  case UROCE_WR_LOCAL_INV:
    return qp->type == UROCE_QPT_RC || qp->type == UROCE_QPT_UC;
  default:
    return false;
  }
}

static int check_send_wr(const struct uroce_qp *qp,
                         const struct uroce_send_wr *wr, uint64_t *len) {
  if (!opcode_ok(qp, wr->opcode))
    return UROCE_ERR_INVALID_ARGUMENT;
  if (wr_is_local(wr->opcode)) {
    /* Executed when the requester reaches it (req.c); here only what a
     * later check could not survive: handles that are not table entries. */
    const struct uroce_mr_table *t = &qp->eng->mrs;
    if (wr->opcode == UROCE_WR_BIND_MW &&
        (!wr->wr.bind_mw.mw ||
         !uroce_mr_in_table(t, mw_entry(wr->wr.bind_mw.mw)) ||
         (wr->wr.bind_mw.mr && !uroce_mr_in_table(t, wr->wr.bind_mw.mr))))
      return UROCE_ERR_INVALID_ARGUMENT;
    *len = 0;
    return 0;
  }
  if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge ||
      (wr->num_sge && !wr->sg_list))
    return UROCE_ERR_INVALID_ARGUMENT;
  uint64_t total = 0;
  for (int i = 0; i < wr->num_sge; i++)
    total += wr->sg_list[i].length;
  if (total > UROCE_MAX_MSG)
    return UROCE_ERR_INVALID_ARGUMENT;
  bool atomic = wr->opcode == UROCE_WR_ATOMIC_CMP_AND_SWP ||
                wr->opcode == UROCE_WR_ATOMIC_FETCH_AND_ADD;
  if (atomic && (wr->num_sge != 1 || total != 8))
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((wr->send_flags & UROCE_SEND_INLINE) && !atomic &&
      wr->opcode != UROCE_WR_RDMA_READ && total > qp->cap.max_inline_data)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (qp->type == UROCE_QPT_UD &&
      (!wr->wr.ud.ah || total > qp->mtu || wr->wr.ud.remote_qpn > 0xFFFFFF))
    return UROCE_ERR_INVALID_ARGUMENT;
  if (qp->xrc && wr->xrc_remote_srqn > 0xFFFFFF)
    return UROCE_ERR_INVALID_ARGUMENT;
  *len = total;
  return 0;
}

int uroce_eng_qp_post_send(struct uroce_qp *qp, struct uroce_send_wr *wr,
                           struct uroce_send_wr **bad) {
  struct uroce_send_wr *dummy;
  if (!bad)
    bad = &dummy;
  *bad = wr;
  if (!qp || qp->xrc == XRC_TGT)
    return UROCE_ERR_INVALID_ARGUMENT; /* a target has no send queue */
  eng_touch(qp->eng, qp);
  int rc = 0;
  for (; wr; wr = wr->next) {
    if (qp->state < UROCE_QPS_RTS) {
      rc = UROCE_ERR_BAD_STATE;
      break;
    }
    uint64_t len;
    if ((rc = check_send_wr(qp, wr, &len)))
      break;
    if (qp->sq_head - qp->sq_tail >= qp->cap.max_send_wr) {
      rc = UROCE_ERR_QUEUE_FULL;
      break;
    }
    if (!qp->mp.st && (rc = mp_tx_alloc(qp)))
      break;
    uint32_t idx = qp->sq_head & qp->sq_mask;
    struct swqe *w = &qp->sq[idx];
    struct uroce_sge *sge = w->sge;
    memset(w, 0, sizeof(*w));
    w->sge = sge;
    w->wr_id = wr->wr_id;
    w->opcode = wr->opcode;
    w->flags = wr->send_flags;
    if (qp->sq_sig_all)
      w->flags |= UROCE_SEND_SIGNALED;
    w->imm = wr->imm_data;
    w->inv_rkey = wr->invalidate_rkey;
    w->xrc_srqn = wr->xrc_remote_srqn;
    w->length = (uint32_t)len;
    if (wr->opcode == UROCE_WR_BIND_MW) {
      w->bind.mw = mw_entry(wr->wr.bind_mw.mw);
      w->bind.mr = wr->wr.bind_mw.mr;
      w->bind.len = wr->wr.bind_mw.length;
      w->raddr = wr->wr.bind_mw.addr;
      w->rkey = wr->wr.bind_mw.rkey;
      w->imm = wr->wr.bind_mw.access;
      w->nsge = 0;
      w->flags &= ~(uint32_t)UROCE_SEND_INLINE;
    } else if (wr->opcode == UROCE_WR_LOCAL_INV) {
      w->nsge = 0;
      w->flags &= ~(uint32_t)UROCE_SEND_INLINE;
    } else if (wr->opcode == UROCE_WR_ATOMIC_CMP_AND_SWP ||
               wr->opcode == UROCE_WR_ATOMIC_FETCH_AND_ADD) {
      w->raddr = wr->wr.atomic.remote_addr;
      w->rkey = wr->wr.atomic.rkey;
      w->cmp_add = wr->wr.atomic.compare_add;
      w->swap = wr->wr.atomic.swap;
      w->flags &= ~(uint32_t)UROCE_SEND_INLINE;
    } else if (qp->type == UROCE_QPT_UD) {
      memcpy(w->dgid, wr->wr.ud.ah->attr.dgid, 16);
      w->dport = wr->wr.ud.ah->attr.dport;
      w->sport = wr->wr.ud.ah->attr.sport
                     ? wr->wr.ud.ah->attr.sport
                     : flow_sport(qp->qpn, wr->wr.ud.remote_qpn);
      w->dqpn = wr->wr.ud.remote_qpn;
      /* A Q_Key with the high bit set means "use the QP's own". */
      w->qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->qkey
                                                      : wr->wr.ud.remote_qkey;
    } else {
      w->raddr = wr->wr.rdma.remote_addr;
      w->rkey = wr->wr.rdma.rkey;
    }
    if (wr->opcode == UROCE_WR_RDMA_READ)
      w->flags &= ~(uint32_t)UROCE_SEND_INLINE;
    if (w->flags & UROCE_SEND_INLINE) {
      uint8_t *buf = qp->sq_inl + (size_t)idx * qp->cap.max_inline_data;
      uint32_t off = 0;
      for (int i = 0; i < wr->num_sge; i++) {
        const struct uroce_sge *s = &wr->sg_list[i];
        if (!qp->eng->phantom && s->length)
          memcpy(buf + off, (const void *)(uintptr_t)s->addr, s->length);
        off += s->length;
      }
      w->nsge = 1;
      w->sge[0].addr = (uint64_t)(uintptr_t)buf;
      w->sge[0].length = off;
      w->sge[0].lkey = 0;
      w->checked = true; /* engine memory: no key */
    } else if (!wr_is_local(wr->opcode)) {
      w->nsge = (uint32_t)wr->num_sge;
      if (w->nsge)
        memcpy(w->sge, wr->sg_list, w->nsge * sizeof(*w->sge));
    }
    w->state = WQE_POSTED;
    if (qp->state == UROCE_QPS_ERR || qp->state == UROCE_QPS_SQE) {
      w->state = WQE_DONE;
      w->status = UROCE_WC_WR_FLUSH_ERR;
    }
    qp->sq_head++;
  }
  if (qp->state == UROCE_QPS_ERR || qp->state == UROCE_QPS_SQE) {
    qp_drain_sq(qp);
    qp->req.idx = qp->sq_head;
  }
  eng_sched(qp->eng, qp);
  *bad = rc ? wr : 0;
  return rc;
}

int uroce_eng_qp_post_recv(struct uroce_qp *qp, struct uroce_recv_wr *wr,
                           struct uroce_recv_wr **bad) {
  struct uroce_recv_wr *dummy;
  if (!bad)
    bad = &dummy;
  *bad = wr;
  if (!qp || qp->xrc)
    return UROCE_ERR_INVALID_ARGUMENT; /* XRC ends have no receive queue */
  if (qp->srq || qp->state == UROCE_QPS_RESET)
    return UROCE_ERR_BAD_STATE;
  eng_touch(qp->eng, qp);
  int rc = rq_post(&qp->rq, wr, bad);
  if (qp->state == UROCE_QPS_ERR)
    resp_flush(qp);
  eng_sched(qp->eng, qp);
  if (!rc)
    *bad = 0;
  return rc;
}

void sge_scatter(const struct uroce_eng *eng, const struct uroce_sge *sge,
                 uint32_t nsge, uint32_t off, const uint8_t *src, uint32_t n) {
  uint32_t i = 0;
  while (i < nsge && off >= sge[i].length)
    off -= sge[i++].length;
  while (n && i < nsge) {
    uint32_t take = sge[i].length - off;
    if (take > n)
      take = n;
    eng_copy(eng, (void *)(uintptr_t)(sge[i].addr + off), src, take);
    src += take;
    n -= take;
    off = 0;
    i++;
  }
}
