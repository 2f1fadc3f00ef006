/* Internal layout of the engine's objects, shared by the engine, the QP
 * state machine and the three spec roles: requester (req.c), responder
 * (resp.c) and completer (comp.c). Nothing here is API. */
#ifndef UROCE_TRANSPORT_QP_H
#define UROCE_TRANSPORT_QP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mem/mr.h"
#include "transport/cc.h"
#include "transport/engine.h"
#include "util/list.h"
#include "wire/psn.h"

struct uroce_pd {
  struct uroce_eng *eng;
  struct ulist link;
  uint32_t refs; /* MRs, QPs, SRQs, AHs */
};

struct uroce_ah {
  struct uroce_pd *pd;
  struct ulist link;
  struct uroce_ah_attr attr;
};

struct uroce_cq {
  struct uroce_eng *eng;
  struct ulist link;
  struct uroce_wc *ring;
  uint32_t size;       /* capacity */
  uint32_t head, tail; /* produced / consumed counts */
  uint32_t refs;       /* QPs */
  bool overflow;
  void *user; /* the owner's per-CQ state (the device's CQ wrapper) */
};

/* A receive WQE: sges point into the owning queue's SGE array. The rest
 * is the multipath responder's, for a message placed into it before the
 * messages ahead of it completed (resp.c). */
struct rwqe {
  uint64_t wr_id;
  uint32_t nsge;
  struct uroce_sge *sge;
  uint8_t keys;  /* RWQE_KEYS_*: its SGEs checked, and how */
  bool whole;    /* its message's last packet is placed: */
  uint8_t wc_op; /* UROCE_WC_RECV or _RECV_RDMA_WITH_IMM */
  uint8_t wc_flags;
  uint32_t cap;      /* bytes its SGEs hold (keys checked) */
  uint32_t byte_len; /* of the message */
  uint32_t imm;      /* immediate (raw), or the rkey to invalidate */
};
enum { RWQE_KEYS_UNCHECKED, RWQE_KEYS_OK, RWQE_KEYS_BAD };

/* A receive queue: the QP's own or an SRQ's. */
struct rq {
  struct rwqe *wqe;
  struct uroce_sge *sge; /* max_sge per WQE */
  uint32_t max_wr, max_sge, mask;
  uint32_t head, tail; /* posted / taken counts */
};
static inline uint32_t rq_count(const struct rq *q) {
  return q->head - q->tail;
}

struct uroce_srq {
  struct uroce_eng *eng;
  struct uroce_pd *pd;
  struct ulist link;
  struct rq rq;
  uint32_t limit; /* 0 = disarmed */
  uint32_t refs;  /* QPs */
  uint32_t num;   /* 24-bit SRQ number, unique in the engine */
  /* XRC SRQ: its domain (NULL: an ordinary SRQ), its place in the
   * domain's list, and the CQ its receives complete into. */
  struct uroce_xrcd *xrcd;
  struct ulist xlink;
  struct uroce_cq *cq;
};

/* An XRC domain (xrc.c). */
struct uroce_xrcd {
  struct uroce_eng *eng;
  struct ulist link; /* engine's list */
  struct ulist srqs; /* its XRC SRQs, by xlink */
  uint32_t refs;     /* XRC SRQs and target QPs */
};

enum swqe_state {
  WQE_POSTED = 0, /* not started */
  WQE_SENDING,    /* some packets sent */
  WQE_PENDING,    /* all sent, waiting for the response (RC) */
  WQE_DONE,       /* completed with status */
};

struct swqe {
  uint64_t wr_id;
  uint32_t xrc_srqn; /* XRC initiator: the target SRQ, in every XRCETH */
  bool mp;      /* started in multipath mode: multipath opcodes */
  uint32_t ssn; /* receive sequence number (SEND, WRITE with immediate) */
  uint32_t opcode; /* enum uroce_wr_opcode */
  uint32_t flags;  /* enum uroce_send_flags, SIGNALED resolved */
  uint32_t imm;    /* raw network-order bytes */
  uint32_t inv_rkey;
  uint64_t raddr; /* BIND_MW: the window's first byte */
  uint32_t rkey;  /* BIND_MW: the window's new rkey */
  union {
    struct {
      uint64_t cmp_add, swap; /* atomics */
    };
    struct {
      struct uroce_mr *mw, *mr; /* table entries */
      uint64_t len;
    } bind; /* BIND_MW; its rights in imm */
  };
  uint8_t dgid[16]; /* UD */
  uint16_t sport, dport;
  uint32_t dqpn, qkey;
  uint32_t length;
  uint32_t nsge;
  struct uroce_sge *sge; /* for inline: one SGE over the inline copy */
  uint8_t state;         /* enum swqe_state */
  uint8_t status;        /* enum uroce_wc_status once DONE */
  bool checked;          /* local keys validated */
  uint32_t first_psn, last_psn;
  uint64_t atomic_orig;
};

/* A position in a send WQE's gather list: SGE i, byte off of it. */
struct gcur {
  uint32_t i, off;
};

/* Requester states (req.c). */
enum req_state {
  REQST_IDLE,           /* nothing to send */
  REQST_SEND,           /* sending the WQE at req.idx */
  REQST_WAIT_WINDOW,    /* too many PSNs unacknowledged */
  REQST_WAIT_FENCE,     /* fenced WQE waits for earlier READ/atomics */
  REQST_WAIT_RD_ATOMIC, /* max_rd_atomic READ/atomics outstanding */
  REQST_WAIT_RNR,       /* RNR NAK: waiting before retransmitting */
  REQST_WAIT_PACE,      /* congestion control holds the next packet */
  REQST_DRAIN,          /* SQD: no new WQE starts */
  REQST_ERROR,          /* QP not sending */
  REQST_COUNT
};
extern const char *const uroce_req_state_names[REQST_COUNT];

struct req {
  uint8_t state;
  uint32_t idx;            /* WQE being sent (count, masked on use) */
  uint32_t psn;            /* next PSN to send */
  uint32_t max_psn;        /* one past the highest PSN ever sent */
  uint32_t off;            /* bytes of the WQE already sent */
  struct gcur cur;         /* gather cursor for off */
  uint32_t pkts_since_ackreq;
  uint64_t rto_deadline; /* retransmit timer, UINT64_MAX = off */
  uint64_t rnr_deadline;
  uint64_t pace_deadline;
  uint8_t retry_left, rnr_left;
  bool probe; /* after a timeout: one packet out until something is acked */
  /* The next READ request, sent from the middle of its READ at psn, starts
   * this many PSNs earlier (comp.c back_off: a re-request whose answer
   * lost its first packet again). */
  uint32_t back;
  /* A round-trip sample for congestion control: a request sent once, at
   * sample_ts, until comp.psn passes it (not if it is sent again). */
  bool sampling;
  uint32_t sample_psn;
  uint64_t sample_ts;
};

/* The peer's transport, from the multipath bit of its packets. */
enum peer_mode {
  PEER_UNKNOWN, /* nothing heard yet: announce, behave as standard */
  PEER_STD,     /* a standard RoCEv2 peer (or one forced to be) */
  PEER_MP,      /* announced multipath: both ends use it */
};

/* The multipath requester's state of each PSN in flight (mp.c): a ring
 * indexed by psn & mask over [comp.psn, comp.psn + mask]. */
enum {
  TX_SENT = 1,  /* a request carrying it went out */
  TX_RESP = 2,  /* answered by a response (READ, atomic), not by an ACK */
  TX_DONE = 4,  /* acknowledged or answered */
  TX_GAP = 8,   /* something sent after it arrived: lost at gap + reorder */
  TX_LOST = 16, /* to be sent again */
  TX_RTX = 32,  /* sent again at least once */
  TX_PROBE = 64, /* lost by a probe timeout, not by a gap */
  TX_TRIM = 128, /* lost by a trim NACK (it arrived trimmed) */
};
struct mp_tx {
  uint8_t *st;  /* TX_* per PSN */
  uint64_t *ts;   /* TX_GAP: when its gap was seen, or when its resend
                     is due back */
  uint64_t *sent; /* when last sent: what a delivery tells of the PSNs
                     sent before it */
  uint32_t mask;
  uint32_t lost;      /* PSNs marked TX_LOST */
  uint32_t sacked;    /* PSNs marked TX_DONE (beyond comp.psn) */
  uint32_t scan;      /* PSNs below it were compared with a delivery */
  uint32_t gap_hi;    /* past the highest PSN ever marked TX_GAP */
  uint64_t gap_timer; /* earliest TX_GAP time + reorder, UINT64_MAX */
  uint64_t srtt, min_rtt, reo;
  uint64_t dsack_reo; /* the reorder window D-SACKs showed was needed */
  bool reordered;     /* the QP saw reordering (mp.c reo_now) */
  uint32_t gap_rtx[32]; /* the latest PSNs resent because of a gap */
  uint32_t gap_rtx_n;
  uint32_t ssn;         /* next receive sequence number to assign */
  uint64_t last_prog;   /* when comp.psn last moved */
  uint8_t probes;       /* timeouts since then */
  bool fatal;           /* a fatal NAK waits for comp.psn to reach it */
  uint8_t fatal_status;
  uint32_t fatal_psn;
  uint32_t path;        /* next spraying path */
  uint32_t trim_credit; /* PSNs delivered since the last resend of a
                           trimmed one (mp_trim_clock) */
};

/* Completer states (comp.c): the steps of handling one response, each a
 * function returning the next. */
enum comp_state {
  COMPST_GET_WQE,     /* anything outstanding at all */
  COMPST_CHECK_PSN,   /* within comp.psn .. max_psn */
  COMPST_CHECK_ACK,   /* sort: ACK, RNR NAK, NAK or a response */
  COMPST_ACK,         /* positive ACK: completes through its PSN */
  COMPST_RNR_NAK,     /* acks what precedes, then waits */
  COMPST_NAK,         /* acks what precedes; retry or fatal by code */
  COMPST_CHECK_RESP,  /* READ response / atomic ack for the oldest WQE */
  COMPST_READ,        /* scatter one READ response */
  COMPST_ATOMIC,      /* store the atomic's original value */
  COMPST_COMP_WQE,    /* the READ/atomic WQE is done */
  COMPST_UPDATE,      /* resync the requester, drain completions */
  COMPST_ERROR_RETRY, /* go back to comp.psn (or retries exhausted) */
  COMPST_RNR_RETRY,   /* go back after the RNR timer (or exhausted) */
  COMPST_ERROR,       /* fail the oldest WQE with the status found */
  COMPST_MP_ACK,      /* multipath: what an ACK or SACK acknowledges */
  COMPST_MP_READ,     /* multipath: place a READ response by its PSN */
  COMPST_MP_ATOMIC,   /* multipath: an atomic ack, in any order */
  COMPST_MP_NAK,      /* multipath: RNR or fatal NAK */
  COMPST_MP_UPDATE,   /* multipath: complete in order, find the gaps */
  COMPST_DROP,        /* counted in stats.drops and forgotten */
  COMPST_DONE,
  COMPST_COUNT
};
extern const char *const uroce_comp_state_names[COMPST_COUNT];

struct comp {
  uint32_t psn; /* oldest PSN not yet acknowledged */
  /* Recovery of a lost READ response or atomic ack at comp.psn (comp.c
   * gap_retry): re-requests made for it, cleared when comp.psn moves. */
  uint8_t rereqs;
  /* The PSN of the latest READ response or atomic ack seen at or beyond
   * comp.psn (has_last: one was): each answer to a go-back climbs, so one
   * at or below it starts the next answer. */
  bool has_last;
  uint32_t last;
  /* answer: the latest re-request's answer has started without comp.psn;
   * answer_ev: how many more of its READ responses and atomic acks to
   * wait for before asking again (1, 2, 4 ... 64, comp.c gap_retry). */
  bool answer;
  uint32_t answer_ev;
  /* The latest go-back sends [gb_psn, gb_hi) again (comp.c resent_head). */
  uint32_t gb_psn, gb_hi;
  /* A READ re-request that starts before an earlier one (comp.c
   * back_off; rxe ignores them) awaits the responder's verdict; refusals:
   * how many were ignored (the QP then backs off only in long stalls);
   * free_retry: the next go-back costs no retry (the one before was
   * ignored, nothing lost); back_paid: the re-request that started
   * further back was a timeout's, which cost its retry already. */
  bool back_wait, free_retry, back_paid;
  uint8_t refusals;
  /* While back_wait: back_n, how many PSNs earlier it started (a timeout
   * sends the same again); back_heard, what answered it so far (BACK_IN:
   * responses inside the READ, taken; BACK_BEYOND: the responder went on
   * past the READ, ignored); back_silent, timeouts with no answer at all. */
  uint8_t back_heard, back_silent;
  uint32_t back_n;
};
enum { BACK_NONE, BACK_IN, BACK_BEYOND };

/* Responder states (resp.c): the steps of handling one request, each a
 * function returning the next. Checks run in this order; the ERR_ states
 * are the spec's responder error classes, named by the NAK each sends. */
enum resp_state {
  RESPST_CHK_PSN,
  RESPST_CHK_OP_SEQ,
  RESPST_CHK_OP_VALID,
  RESPST_CHK_LENGTH,
  RESPST_GET_RECV_WQE,
  RESPST_CHK_RKEY,
  RESPST_EXEC_SEND,
  RESPST_EXEC_WRITE,
  RESPST_EXEC_READ,
  RESPST_EXEC_ATOMIC,
  RESPST_COMPLETE,
  RESPST_ACKNOWLEDGE,
  RESPST_DUPLICATE,
  RESPST_MP_CHK,      /* multipath: a request within the window */
  RESPST_MP_PLACE,    /* multipath: SEND/WRITE placed by its offset */
  RESPST_MP_DEFER,    /* multipath: READ/atomic ahead, run when reached */
  RESPST_MP_ADVANCE,  /* multipath: epsn over what arrived in order */
  RESPST_ERR_PSN_SEQ, /* NAK PSN sequence error; the requester goes back */
  RESPST_ERR_RNR,     /* RNR NAK: no receive WQE */
  RESPST_ERR_INVALID_REQ, /* NAK invalid request (opcode sequence, length) */
  RESPST_ERR_REM_ACCESS,  /* NAK remote access error (rkey, bounds, rights) */
  RESPST_ERR_REM_OP,      /* NAK remote operational error (bad receive WQE) */
  RESPST_ERR_LENGTH,      /* message longer than the receive WQE */
  RESPST_DROP,            /* counted in stats.drops and forgotten */
  RESPST_DONE,
  RESPST_COUNT
};
extern const char *const uroce_resp_state_names[RESPST_COUNT];

enum res_type { RES_NONE = 0, RES_READ, RES_ATOMIC };

/* A responder resource: one per outstanding READ or atomic, kept so that
 * a duplicate is answered from it instead of being executed again. */
struct resp_res {
  uint8_t type;
  bool pending; /* responses left to send */
  uint32_t first_psn, last_psn;
  uint32_t cur_psn; /* next response PSN */
  bool deferred; /* multipath: arrived ahead, runs when epsn reaches it */
  /* READ */
  uint32_t rkey;
  uint64_t va;   /* of the next response byte */
  uint32_t left; /* bytes left */
  bool first_sent;
  /* atomic */
  uint64_t orig;
  uint8_t aop; /* deferred: opcode and operands */
  uint64_t a_va, a_swap_add, a_cmp;
};

/* The multipath responder's state of each PSN ahead of epsn (resp.c): a
 * ring indexed by psn & mask over [epsn, epsn + mask]. */
enum {
  RX_RCVD = 1,  /* arrived and placed (or, DEFER, recorded) */
  RX_LAST = 2,  /* ends a message */
  RX_CQE = 4,   /* ends a message that consumed a receive WQE */
  RX_DEFER = 8, /* a READ or atomic to run when epsn reaches it */
};
#define MP_RUNS 32 /* multipath READ responses in progress or deferred */
#define RESP_TRIMS 8 /* trimmed PSNs waiting to be told (more: a gap finds
                        them) */

struct resp {
  uint32_t epsn; /* expected PSN */
  uint32_t msn;
  uint32_t in_msg; /* 0, or OPM_SEND / OPM_WRITE of the message in progress */
  bool drop_msg;   /* UC: skip until the next FIRST/ONLY */
  /* receive WQE being filled */
  bool have_rwqe;
  struct rwqe rwqe; /* sge -> rwqe_sge */
  struct uroce_sge *rwqe_sge;
  uint32_t rcv_len; /* bytes received into it */
  uint32_t rcv_cap; /* its capacity */
  /* RDMA WRITE in progress */
  uint64_t wr_va;
  uint32_t wr_rkey, wr_left, wr_len;
  /* acknowledgement */
  bool ack_pending;      /* PSNs received and not yet acknowledged */
  bool ack_now;          /* send it at the next chance */
  bool ack_held;         /* due, but waits for a packet to go beside
                            (cfg.ack_hold_ns, until ack_deadline) */
  uint32_t unacked;      /* packets since the last ack */
  uint64_t ack_deadline; /* UINT64_MAX = off */
  bool nak_pending;
  uint8_t nak_syn;
  uint32_t nak_psn;
  bool seq_nak_sent; /* a PSN-sequence NAK for epsn is out */
  bool fatal;        /* go to ERR after sending the NAK */
  /* resources */
  struct resp_res *res;
  uint32_t nres, res_next;
  bool any_pending; /* some res may be pending; false: none is */
  /* multipath */
  uint8_t *mp_st; /* RX_* per PSN */
  uint32_t mp_mask;
  uint32_t mp_hi;  /* one past the highest PSN placed ahead of epsn */
  uint32_t mp_ssn; /* receive sequence number of the next receive WQE */
  struct resp_res *runs; /* MP_RUNS READ answers */
  uint8_t sack[8 * UROCE_SACK_MAX_WORDS]; /* the bitmap being sent */
  bool dup;         /* a request arrived again since the last SACK: */
  uint32_t dup_psn; /* the latest such */
  uint32_t trim_psn[RESP_TRIMS]; /* arrived trimmed, not yet told (SACKs */
  uint8_t trim_n;                /* with UROCE_SACK_TRIM, oldest first) */
};

struct uroce_qp {
  struct uroce_eng *eng;
  struct uroce_pd *pd;
  struct uroce_cq *scq, *rcq;
  struct uroce_srq *srq;
  struct ulist link;  /* engine's list of QPs */
  struct ulist sched; /* engine's transmit round robin */
  bool in_sched;
  uint32_t burst;       /* packets sent in a row in this turn (write_pkt) */
  struct ulist blocked; /* engine's QPs waiting for max_inflight */
  bool in_blocked;
  struct ulist held; /* engine's QPs holding an ACK (resp.ack_held) */
  bool in_held;
  /* The engine's timer heap (engine.c): the QP's earliest deadline as last
   * computed, its heap slot (UINT32_MAX: not in the heap), whether it waits
   * on the dirty list to be recomputed, and its creation number. */
  bool tq_dirty;
  uint32_t tq_idx;
  uint64_t exp_key, seqno;
  uint64_t charged; /* bytes of eng->inflight that are this QP's */
  uint64_t turn;    /* bytes of eng->reserved granted to it (eng_charge) */
  uint64_t want;    /* bytes it asked eng_room for when it blocked */
  uint32_t qpn;
  uint8_t type; /* an XRC QP is RC here, with xrc saying which end */
  uint8_t xrc;  /* enum qp_xrc */
  uint8_t state;
  bool sq_sig_all;
  struct uroce_qp_cap cap;

  /* attributes */
  uint8_t path_mtu;
  uint32_t mtu;
  uint32_t qkey, dest_qpn, access;
  uint32_t attr_sq_psn, attr_rq_psn;
  uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
  uint8_t max_rd_atomic, max_dest_rd_atomic;
  uint16_t pkey_index;
  bool sqd_notify;
  bool sqd_drained; /* SQ_DRAINED already raised for this SQD */
  struct uroce_ah_attr av;
  uint16_t sport;

  /* send queue */
  struct swqe *sq;
  struct uroce_sge *sq_sge;
  uint8_t *sq_inl;
  uint32_t sq_mask;
  uint32_t sq_head, sq_tail; /* posted / completed counts */

  struct rq rq;
  struct req req;
  struct comp comp;
  struct resp resp;

  /* XRC target: its domain. pd, rcq and srq are those of the XRC SRQ
   * that the latest request named (NULL before one did, or once that SRQ
   * is gone): the responder's code reads them as an RC QP's. */
  struct uroce_xrcd *xrcd;

  uint8_t peer;  /* enum peer_mode */
  bool mp_cap;   /* RC and the engine not UROCE_ENG_STANDARD */
  struct mp_tx mp;

  void *cc_state;
  bool cnp_pending;
  uint64_t last_cnp;
  uint8_t cnp_dgid[16];
  uint32_t cnp_dqpn;
  uint64_t tr_rate, tr_cwnd; /* the congestion decision last traced */
};

/* Which end of XRC a QP is. */
enum qp_xrc { XRC_NONE, XRC_INI, XRC_TGT };

#define QP_HASH_EMPTY 0

struct uroce_eng {
  struct uroce_eng_cfg cfg;
  uint64_t rng_state;
  bool phantom;
  const struct uroce_cc_ops *cc;
  struct uroce_eng_stats stats;
  uint64_t now; /* latest time given to read/write_pkt, handle_expiry */
  struct uroce_mr_table mrs;
  struct ulist pds, cqs, srqs, qps, ahs, sched, blocked, held, xrcds;
  uint32_t srq_next; /* next SRQ number to try */
  uint64_t inflight; /* sum of the RC QPs' charged bytes */
  uint64_t reserved; /* sum of the turns granted to waiting QPs */
  uint64_t mp_reo;   /* the widest reorder window a QP learnt (mp.c) */
  /* QPN -> QP, open addressing with linear probing */
  struct uroce_qp **qp_hash;
  uint32_t qp_hash_mask, nqp;
  /* Timers: a binary heap of the QPs that have a deadline, earliest first
   * (tq); the QPs an operation touched since, whose deadlines are
   * recomputed before the heap is read (dirty). Both hold tq_cap. */
  struct uroce_qp **tq, **dirty;
  uint32_t tq_n, ndirty, tq_cap;
  uint64_t qp_seq;
  /* async event ring */
  struct uroce_async_event ev[64];
  uint32_t ev_head, ev_tail;
  uroce_trace_fn trace; /* NULL: no trace */
  void *trace_ctx;
};

/* ---- trace.c ---- */
/* Every event goes through these two, called only while eng->trace is
 * set (qp NULL: a packet that named no QP of ours, qpn the one it named). */
void eng_trace_ev(struct uroce_eng *eng, const struct uroce_qp *qp,
                  uint32_t qpn, uint8_t kind, uint32_t psn, uint8_t a,
                  uint8_t b);
void eng_trace_cc(struct uroce_qp *qp, uint64_t now, uint8_t cause);
static inline void qp_trace(struct uroce_qp *qp, uint8_t kind, uint32_t psn,
                            uint8_t a, uint8_t b) {
  if (__builtin_expect(qp->eng->trace != 0, 0))
    eng_trace_ev(qp->eng, qp, 0, kind, psn, a, b);
}
/* After a congestion-control hook: an event if its decision moved. */
static inline void qp_trace_cc(struct uroce_qp *qp, uint64_t now,
                               uint8_t cause) {
  if (__builtin_expect(qp->eng->trace != 0, 0))
    eng_trace_cc(qp, now, cause);
}
/* Counts a dropped packet, and traces it. */
static inline void qp_dropped(struct uroce_qp *qp, enum uroce_drop why,
                              uint32_t psn) {
  qp->eng->stats.drops[why]++;
  qp_trace(qp, UROCE_TR_DROP, psn, (uint8_t)why, 0);
}

/* ---- engine.c ---- */
/* Gives qp a free random QPN, or 1 when gsi (UROCE_ERR_BUSY if taken). */
int eng_qp_attach(struct uroce_eng *eng, struct uroce_qp *qp, bool gsi);
void eng_qp_detach(struct uroce_eng *eng, struct uroce_qp *qp);
struct uroce_qp *eng_qp_lookup(const struct uroce_eng *eng, uint32_t qpn);
void *eng_alloc(struct uroce_eng *eng, size_t n);
void eng_free(struct uroce_eng *eng, void *p);
uint64_t eng_rand(struct uroce_eng *eng);
void eng_async(struct uroce_eng *eng, int type, void *obj);
void eng_sched(struct uroce_eng *eng, struct uroce_qp *qp);
/* The QP's deadlines may change: recompute its place among the timers
 * before they are next read. Every engine entry point that reaches a QP
 * calls it (eng_sched does too). */
static inline void eng_touch(struct uroce_eng *eng, struct uroce_qp *qp) {
  if (!qp->tq_dirty) {
    qp->tq_dirty = true;
    eng->dirty[eng->ndirty++] = qp;
  }
}
/* Brings the QP's share of eng->inflight up to date ((max_psn - comp.psn)
 * x MTU while it can send, else 0) and wakes QPs waiting for room. */
void eng_charge(struct uroce_eng *eng, struct uroce_qp *qp);
/* The device's in-flight bound lets the QP send n more bytes; else it
 * waits (and is woken by eng_charge, with a turn). */
bool eng_room(struct uroce_eng *eng, struct uroce_qp *qp, uint64_t n);
/* Grants turns to the QPs waiting for the bound, oldest first, while it
 * has room. */
void eng_grant(struct uroce_eng *eng);
/* The QP's turn ends (its burst sent, or nothing more to send): what it
 * left of its grant goes to the QPs waiting. */
void eng_turn_end(struct uroce_eng *eng, struct uroce_qp *qp);
/* Appends a completion; false if the CQ overran. */
bool cq_push(struct uroce_cq *cq, const struct uroce_wc *wc);
/* Copies payload into registered memory unless in phantom mode. */
static inline void eng_copy(const struct uroce_eng *eng, void *dst,
                            const void *src, uint32_t n) {
  if (!eng->phantom && n)
    memcpy(dst, src, n);
}
/* Copies n bytes into the buffers of an SGE list, starting at byte off of
 * the list (the caller has checked that they fit). */
void sge_scatter(const struct uroce_eng *eng, const struct uroce_sge *sge,
                 uint32_t nsge, uint32_t off, const uint8_t *src, uint32_t n);
int rq_alloc(struct uroce_eng *eng, struct rq *q, uint32_t max_wr,
             uint32_t max_sge);
void rq_release(struct uroce_eng *eng, struct rq *q);
int rq_post(struct rq *q, struct uroce_recv_wr *wr, struct uroce_recv_wr **bad);
/* Takes the next receive WQE from the QP's RQ or SRQ into qp->resp. */
bool rq_take(struct uroce_qp *qp);

/* ---- qp.c ---- */
/* Moves the QP to ERR (or SQE) and flushes the queues. */
void qp_to_error(struct uroce_qp *qp);
void qp_to_sqe(struct uroce_qp *qp);
/* Completes one send WQE into the send CQ if signaled or failed. */
void qp_complete_swqe(struct uroce_qp *qp, struct swqe *w);
/* The started, unfinished send WQE that PSN psn belongs to, or NULL. */
struct swqe *sq_wqe_at(struct uroce_qp *qp, uint32_t psn);
/* Completes finished send WQEs in order; flushes if in ERR. */
void qp_drain_sq(struct uroce_qp *qp);
static inline struct swqe *sq_at(struct uroce_qp *qp, uint32_t i) {
  return &qp->sq[i & qp->sq_mask];
}
/* READ and atomics: answered by responses, limited by max_rd_atomic. */
static inline bool wr_is_rd_atomic(uint32_t op) {
  return op == UROCE_WR_RDMA_READ || op == UROCE_WR_ATOMIC_CMP_AND_SWP ||
         op == UROCE_WR_ATOMIC_FETCH_AND_ADD;
}
/* Work requests the requester executes itself, with no packet. */
static inline bool wr_is_local(uint32_t op) {
  return op == UROCE_WR_BIND_MW || op == UROCE_WR_LOCAL_INV;
}
static inline bool qp_can_send(const struct uroce_qp *qp) {
  return qp->state == UROCE_QPS_RTS || qp->state == UROCE_QPS_SQD;
}
static inline bool qp_can_recv(const struct uroce_qp *qp) {
  return qp->state == UROCE_QPS_RTR || qp->state == UROCE_QPS_RTS ||
         qp->state == UROCE_QPS_SQD || qp->state == UROCE_QPS_SQE;
}
/* Packets a message of len bytes takes (at least one). */
static inline uint32_t qp_npkts(const struct uroce_qp *qp, uint32_t len) {
  return len ? (len + qp->mtu - 1) / qp->mtu : 1;
}
static inline uint8_t qp_opcode_base(const struct uroce_qp *qp) {
  return qp->xrc                    ? UROCE_OP_XRC_BASE
         : qp->type == UROCE_QPT_UC ? UROCE_OP_UC_BASE
                                    : 0;
}
/* The peer announced multipath and both ends use it. */
static inline bool qp_mp(const struct uroce_qp *qp) {
  return qp->peer == PEER_MP;
}
/* Announcing multipath (the BTH bit) and keeping the multipath
 * requester's per-PSN state: until the peer turns out to be standard. */
static inline bool qp_mp_track(const struct uroce_qp *qp) {
  return qp->mp_cap && qp->peer != PEER_STD;
}
/* Writes the BTH of a packet from this QP. */
void qp_put_bth(struct uroce_qp *qp, uint8_t *b, uint8_t opcode, bool se,
                uint8_t pad, uint32_t dqpn, bool ackreq, uint32_t psn);
void qp_tx_addr(struct uroce_qp *qp, struct uroce_tx_pkt *tx);

/* ---- req.c ---- */
void req_reset(struct uroce_qp *qp);
/* comp.psn moved: a round-trip sample for congestion control, if its
 * request is acknowledged now. */
void req_rtt(struct uroce_qp *qp, uint64_t now);
int req_make_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx, uint64_t now);
/* Go-back-N: send again from psn (which must be outstanding). */
void req_rewind(struct uroce_qp *qp, uint32_t psn);
uint64_t rto_ns(const struct uroce_qp *qp);

/* ---- comp.c ---- */
void comp_reset(struct uroce_qp *qp);
void comp_rx(struct uroce_qp *qp, const struct uroce_rx_pkt *rx, uint64_t now);
void comp_timeout(struct uroce_qp *qp, uint64_t now);
void comp_rnr_expired(struct uroce_qp *qp, uint64_t now);

/* ---- mp.c ---- */
/* Multipath state, allocated when a side is first used (mp.c): the
 * requester's at the first post, the responder's at the first request. */
int mp_tx_alloc(struct uroce_qp *qp);
int mp_rx_alloc(struct uroce_qp *qp);
void mp_tx_reset(struct uroce_qp *qp);
void mp_free(struct uroce_qp *qp);
/* Learns the peer's transport from a packet it sent (RC). */
void mp_peer(struct uroce_qp *qp, const struct uroce_rx_pkt *rx);
static inline uint8_t *mp_tx_st(struct uroce_qp *qp, uint32_t psn) {
  return &qp->mp.st[psn & qp->mp.mask];
}
/* Records request PSNs [psn, psn + n) sent now (resp: READ/atomic). */
void mp_sent(struct uroce_qp *qp, uint32_t psn, uint32_t n, bool resp,
             uint64_t now);
/* PSN psn arrived (acknowledged, or its response came); false if it had.
 * *clean: it was sent once and never taken for a gap, so its send time
 * gives a round-trip sample (Karn). */
bool mp_done(struct uroce_qp *qp, uint32_t psn, bool *clean);
/* A round-trip sample from psn, sent once and delivered rtt ago. */
void mp_rtt(struct uroce_qp *qp, uint32_t psn, uint64_t rtt);
/* After deliveries up to psn, sent at ts: PSNs sent before it and still
 * missing are gaps; the gap timer is armed. */
void mp_gaps_before(struct uroce_qp *qp, uint32_t psn, uint64_t ts,
                    uint64_t now);
/* The responder stands at psn and reported a READ or atomic sent at ts
 * received: the n PSNs from psn (up to the next one reported) that were
 * sent at or before ts never arrived, and are gaps from now on. */
void mp_request_gap(struct uroce_qp *qp, uint32_t psn, uint32_t n,
                    uint64_t ts, uint64_t now);
/* The responder got request psn twice (a D-SACK): if it was resent for a
 * gap, the resend was needless and the reorder window too short. */
void mp_dsack(struct uroce_qp *qp, uint32_t psn);
/* Gaps older than the reorder window are lost; re-arms the gap timer. */
void mp_gap_expiry(struct uroce_qp *qp, uint64_t now);
/* comp.psn moves over what arrived; returns how far. */
uint32_t mp_advance(struct uroce_qp *qp);
/* The retransmit timer fired: probe with the oldest missing PSN. */
void mp_timeout(struct uroce_qp *qp, uint64_t now);
/* The lowest PSN marked lost, unmarked; false if none. */
bool mp_next_lost(struct uroce_qp *qp, uint32_t *psn);
uint64_t mp_pto(const struct uroce_qp *qp);
/* The UDP source port of the next request packet (spraying). */
uint16_t mp_sport(struct uroce_qp *qp);

/* A request that arrived trimmed (UROCE_RX_TRIMMED, multipath): PSN psn
 * was lost in a full queue: resent at once, and a congestion signal. */
void mp_trimmed(struct uroce_qp *qp, uint32_t psn, uint64_t now);
/* May trimmed PSN p go again now? Each delivery clocks out one such
 * resend (NDP's pull, seen from the sender); a QP with nothing else in
 * the network to clock it resends at once. Takes the credit. */
bool mp_trim_clock(struct uroce_qp *qp, uint32_t p);
/* A READ response that arrived trimmed: asked for again at once. */
void mp_trimmed_resp(struct uroce_qp *qp, uint32_t psn);

/* ---- xrc.c ---- */
/* A free SRQ number (never 0). */
uint32_t eng_srq_num(struct uroce_eng *eng);
/* XRC target: binds the QP to the XRC SRQ the request's XRCETH names
 * (pd, rcq, srq); false if it names none of the QP's domain or differs
 * from the one of a message in progress. */
bool xrc_tgt_bind(struct uroce_qp *qp, const struct uroce_pkt_info *pi);
/* The XRC SRQ goes: target QPs bound to it let go (a receive in progress
 * into it is dropped). */
void xrc_srq_gone(struct uroce_srq *srq);

/* ---- resp.c ---- */
void resp_reset(struct uroce_qp *qp);
/* A request that arrived trimmed (UROCE_RX_TRIMMED): lost, and said so. */
void resp_trimmed(struct uroce_qp *qp, const struct uroce_pkt_info *pi);
void resp_rx(struct uroce_qp *qp, const struct uroce_rx_pkt *rx, uint64_t now);
int resp_make_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx, uint64_t now);
/* Only a due ACK or NAK, and none while READ responses or atomic acks
 * are owed (they must go first). */
int resp_make_ctl_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx);
/* Makes an ACK held for the reply due now: 1 if there was one. */
int resp_release_held(struct uroce_qp *qp);
/* Flushes the receive WQE in progress and the QP's RQ. */
void resp_flush(struct uroce_qp *qp);

#endif
