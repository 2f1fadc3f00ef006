/* The sans-IO transport engine: one per NIC (real or simulated).
 *
 * The engine owns no socket, no clock and no thread. The caller drives it:
 *   uroce_eng_read_pkt()      hands it one received packet (ICRC verified),
 *   uroce_eng_write_pkt()     takes the next packet to send, if any,
 *   uroce_eng_next_expiry()   says when to call
 *   uroce_eng_handle_expiry() next (retransmit, ack delay, RNR wait, pacing),
 * plus the verbs-shaped calls below (post work requests, poll completions).
 * Time is uint64_t nanoseconds; UINT64_MAX means "never". Randomness (keys,
 * QPNs) comes from the seed or callback given at creation.
 *
 * Numeric values of statuses, opcodes, flags, states and attribute masks
 * are those of libibverbs, so the later drop-in maps them 1:1.
 *
 * Unless stated otherwise, functions return 0 or a negative error:
 * UROCE_ERR_INVALID_ARGUMENT for a bad argument, -ENOMEM when the allocator
 * failed (everything is allocated at create time, nothing on the packet
 * path). */
#ifndef UROCE_TRANSPORT_ENGINE_H
#define UROCE_TRANSPORT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mem/mr.h"
#include "transport/cc.h"
#include "uroce/errors.h"
#include "uroce/verbs.h"
#include "wire/hdr.h"

struct uroce_eng;

#define UROCE_TX_MAX_SEG UROCE_MAX_SGE
#define UROCE_TX_HDR_MAX 64

/* ---- engine ---- */

enum uroce_eng_flags {
  /* Payload segments carry lengths only: no addresses are dereferenced,
   * nothing is copied on receive, atomics read and write nothing. For the
   * simulator and the benchmark. */
  UROCE_ENG_PHANTOM = 1,
  /* Standard RoCEv2 only. Without it an RC QP announces multipath
   * (a reserved BTH bit, which standard peers ignore) until it hears from
   * its peer, and if the peer announced it too, both use the multipath
   * transport: selective repeat, out-of-order placement, path spraying
   * (docs/transport.md). With it the engine sends exactly the standard
   * packets and never answers an announcement. */
  UROCE_ENG_STANDARD = 2,
  /* Every peer is a uroce endpoint that uses multipath (the simulator; a
   * cluster of uroce hosts): RC QPs use it from their first packet instead
   * of after the peer's first answer, so that a short message sprayed
   * over many paths is placed as it arrives. Against a standard peer this
   * fails: never set it there. */
  UROCE_ENG_MULTIPATH = 4,
  /* Regions are the process's own memory, which the application may
   * unmap while they are registered: every access to a region probes
   * first that its range is still mapped (writable for a write), so that
   * memory gone answers an access error instead of a fault (mem/pin.h;
   * the caller installs the fault guard, uroce_pin_guard_init, first).
   * For a device; never with PHANTOM. */
  UROCE_ENG_PROBE = 8,
};

struct uroce_eng_cfg {
  uint64_t seed;                  /* used when rng is NULL */
  uint64_t (*rng)(void *rng_ctx); /* optional random source */
  void *rng_ctx;
  void *(*alloc)(void *ctx, size_t n); /* optional; default malloc */
  void (*free)(void *ctx, void *p);
  void *alloc_ctx;
  uint32_t flags;                /* UROCE_ENG_* */
  void *user;                    /* the owner's (the device's) */
  uint8_t gid[16];               /* this NIC's GID (source of GRHs) */
  const struct uroce_cc_ops *cc; /* default uroce_cc_noop */
  const void *cc_params;         /* given to cc->set_params for each new
                                    QP (e.g. struct uroce_dcqcn_params,
                                    which must outlive the engine) */
  uint32_t max_qp;               /* default 256 */
  uint32_t max_mr;               /* default 1024 */
  uint32_t max_unacked_psn;      /* RC window, default 256 */
  uint32_t ack_every;            /* coalesce up to N packets, def. 16 */
  uint64_t ack_delay_ns;         /* or this long, default 2000 */
  uint32_t ackreq_every;         /* requester sets AckReq every N
                                    packets and on each last, def. 64 */
  uint64_t cnp_interval_ns;      /* at most one CNP per QP per, 50 us */
  uint8_t port_mtu;              /* enum uroce_mtu: largest path MTU
                                    and the UD MTU; default 4096 */
  uint32_t max_inflight;         /* bytes all RC QPs together may have
                                    unacknowledged (requests, and READ
                                    responses asked for): the NIC's
                                    buffer; default 2 MiB. A QP with
                                    nothing in flight may always send */
  uint32_t paths;                /* multipath: UDP source ports a QP
                                    sprays over (1..16384, default 1) */
  uint64_t reorder_ns;           /* multipath: reordering tolerated
                                    before a gap is retransmitted, the
                                    least (default 24000); grows with
                                    the RTT and on spurious retransmits */
  uint32_t tx_burst;             /* packets a QP sends in a row before
                                    the round robin moves on (default 1:
                                    one each) */
  uint64_t ack_hold_ns;          /* an ACK asked for by a message that
                                    completed a receive waits up to this
                                    long for the reply, to leave beside
                                    it (uroce_eng_release_acks); 0, the
                                    default: at once */
};

/* Why the engine dropped a received packet. */
enum uroce_drop {
  UROCE_DROP_MALFORMED,  /* parse info inconsistent */
  UROCE_DROP_NO_QP,      /* no QP with that number */
  UROCE_DROP_QP_STATE,   /* QP cannot receive in its state */
  UROCE_DROP_TRANSPORT,  /* opcode of another transport than the QP's */
  UROCE_DROP_PKEY,       /* P_Key mismatch */
  UROCE_DROP_QKEY,       /* UD Q_Key mismatch */
  UROCE_DROP_PSN,        /* out of sequence (NAKed or UC-dropped) */
  UROCE_DROP_DUPLICATE,  /* already received */
  UROCE_DROP_OPCODE_SEQ, /* opcode not valid at this point of a message */
  UROCE_DROP_LENGTH,     /* payload length wrong for the opcode/message */
  UROCE_DROP_NO_RWQE,    /* UC/UD: no receive WQE */
  UROCE_DROP_UC_MSG,     /* rest of a UC message after a loss */
  UROCE_DROP_RESPONSE,   /* response that matches nothing outstanding */
  UROCE_DROP_ACCESS,     /* UC: remote access violation */
  UROCE_DROP_TOO_LONG,   /* UD: message longer than the receive buffer */
  UROCE_DROP_PEER,       /* RC/UC: not from the address the QP is bound to */
  UROCE_DROP_NO_MEM,     /* multipath: no memory for the responder's state */
  UROCE_DROP_TRIMMED,    /* its payload was cut by a switch (UROCE_RX_TRIMMED):
                            a loss told at once */
  UROCE_DROP_COUNT
};

struct uroce_eng_stats {
  uint64_t rx_pkts, tx_pkts;
  uint64_t drops[UROCE_DROP_COUNT];
  uint64_t naks_tx, rnr_naks_tx, acks_tx;
  uint64_t go_backs;     /* go-back-N restarts (NAK, timeout, RNR) */
  uint64_t back_refused; /* QPs whose responder ignored an earlier-start
                            READ re-request (comp.c back_off) */
  uint64_t retx_pkts;    /* request packets sent again after a restart */
  uint64_t timeouts;
  uint64_t cnps_tx, cnps_rx, ce_rx;
  uint64_t async_lost; /* async events lost to a full event ring */
  /* multipath */
  uint64_t mp_qps;       /* RC QPs whose peer announced multipath */
  uint64_t sacks_tx;     /* selective ACKs sent */
  uint64_t mp_retx_pkts; /* request packets sent again to fill a gap */
  uint64_t mp_probes;    /* probes after a timeout */
  uint64_t mp_spurious;  /* gaps filled by the first copy after all */
  uint64_t trims_rx;     /* packets that arrived trimmed */
  uint64_t mp_trim_naks; /* multipath: PSNs the peer said arrived trimmed */
  uint64_t inflight_waits; /* a QP waited for the device's in-flight bound */
};

/* ---- trace ---- */

/* What the engine can tell a trace hook, one event per protocol step
 * (docs/transport.md "Trace"). Each kind says what a and b hold. */
enum uroce_trace_kind {
  UROCE_TR_QP_STATE, /* the QP's state changed: a from, b to (enum
                        uroce_qp_state) */
  UROCE_TR_REQ,      /* the requester's state changed: a from, b to */
  UROCE_TR_RESP,     /* a responder step for the packet at psn: a state */
  UROCE_TR_COMP,     /* a completer step for the packet at psn: a state */
  UROCE_TR_GO_BACK,  /* go-back-N from psn: a enum uroce_trace_cause */
  UROCE_TR_RESEND,   /* multipath: psn sent again, a the cause */
  UROCE_TR_NAK_TX,   /* a NAK for psn sent: a its AETH syndrome */
  UROCE_TR_NAK_RX,   /* a NAK for psn received: a its AETH syndrome */
  UROCE_TR_TIMEOUT,  /* the retransmit timer fired: a the cause (timeout
                        or probe), b the retries left (7: unlimited) */
  UROCE_TR_CNP_TX,   /* a CNP sent (a CE-marked packet came in) */
  UROCE_TR_CNP_RX,   /* a CNP received */
  UROCE_TR_CC,       /* congestion control changed its decision: rate
                        (bits/s, 0: unpaced) or cwnd (bytes, 0: none);
                        a the cause. Every cut is told, a rise once it
                        is 1/64 above the last value told */
  UROCE_TR_DROP,     /* a received packet dropped: a enum uroce_drop;
                        qpn 0 when it named no QP of this engine */
  UROCE_TR_COUNT
};

enum uroce_trace_cause {
  UROCE_TRC_NAK,     /* a sequence NAK */
  UROCE_TRC_RNR,     /* an RNR NAK */
  UROCE_TRC_TIMEOUT, /* the retransmit timer */
  UROCE_TRC_GAP,     /* a response or ACK showed earlier PSNs missing */
  UROCE_TRC_PROBE,   /* multipath: the probe timer */
  UROCE_TRC_CNP,     /* congestion control: a CNP */
  UROCE_TRC_ACK,     /* congestion control: an acknowledgement */
  UROCE_TRC_RTT,     /* congestion control: a round-trip sample */
  UROCE_TRC_TIMER,   /* congestion control: its own timer */
  UROCE_TRC_TRIM,    /* a packet arrived trimmed (multipath: the
                        responder's trim NACK; congestion control: the
                        loss it tells) */
  UROCE_TRC_COUNT
};

struct uroce_trace_ev {
  uint64_t t_ns;       /* the engine's time */
  uint64_t rate, cwnd; /* UROCE_TR_CC */
  uint32_t qpn, psn;
  uint8_t kind;    /* enum uroce_trace_kind */
  uint8_t qp_type; /* enum uroce_qp_type */
  uint8_t a, b;
};

typedef void (*uroce_trace_fn)(void *ctx, const struct uroce_trace_ev *ev);

/* Calls fn(ctx, ev) for every event from now on (NULL fn: none, the
 * default). fn runs inside the engine call that caused the event and
 * must not call into the engine. */
void uroce_eng_set_trace(struct uroce_eng *eng, uroce_trace_fn fn, void *ctx);
/* Writes ev's fields as JSON members without the braces ("ev": "nak_rx",
 * "qpn": 1234, ...; names, not numbers) into buf; returns the length, or
 * -1 if n was too small. The time is left to the caller. */
int uroce_eng_trace_json(const struct uroce_trace_ev *ev, char *buf, size_t n);
/* The whole line: {"t_us": t_ns in us, who (JSON members naming the
 * writer, e.g. "nic": 3), then uroce_eng_trace_json's members}. Returns
 * its length (no newline), or -1 if n was too small. */
int uroce_eng_trace_line(const struct uroce_trace_ev *ev, uint64_t t_ns,
                         const char *who, char *buf, size_t n);
/* The name of an event kind ("qp_state", ...), "?" if out of range. */
const char *uroce_eng_trace_kind_name(int kind);

/* Creates an engine. Returns 0, UROCE_ERR_INVALID_ARGUMENT, -ENOMEM. */
int uroce_eng_new(struct uroce_eng **out, const struct uroce_eng_cfg *cfg);
/* Destroys the engine and every object it still owns. */
void uroce_eng_del(struct uroce_eng *eng);
/* The owner's pointer, cfg.user. */
void *uroce_eng_user(const struct uroce_eng *eng);
const struct uroce_eng_stats *uroce_eng_stats(const struct uroce_eng *eng);
const char *uroce_eng_drop_name(enum uroce_drop d);

enum uroce_rx_flags {
  /* A switch cut the payload off (packet trimming, as UET and NDP
   * fabrics do instead of dropping at a full queue): only the headers
   * are valid, and they say which packet was lost. Set by the simulator;
   * a RoCEv2 wire never sets it. */
  UROCE_RX_TRIMMED = 1,
};

/* One received packet. The caller verified the ICRC and parsed it with
 * uroce_pkt_parse (pi.bth..payload must stay valid during the call; in
 * phantom mode only the headers need to be there). */
struct uroce_rx_pkt {
  struct uroce_pkt_info pi;
  uint8_t sgid[16]; /* source address (IPv4-mapped for IPv4) */
  uint8_t dgid[16]; /* destination address */
  uint16_t sport;   /* UDP source port */
  uint8_t ecn;      /* IP ECN bits; 3 = CE */
  uint8_t flags;    /* UROCE_RX_*; 0 for a packet off the wire */
};

/* Consumes one packet. Bad packets are counted in the stats and dropped.
 * Returns 0, or UROCE_ERR_INVALID_ARGUMENT for a NULL argument. */
int uroce_eng_read_pkt(struct uroce_eng *eng, const struct uroce_rx_pkt *rx,
                       uint64_t now);

/* A piece of payload: in registered memory, or in engine-owned state
 * (inline data held in the WQE). addr is NULL in phantom mode. */
struct uroce_tx_seg {
  const void *addr;
  uint32_t len;
};

struct uroce_tx_pkt {
  uint8_t hdr[UROCE_TX_HDR_MAX]; /* BTH and extension headers */
  uint16_t hdr_len;
  uint8_t pad; /* 0..3 zero bytes after the payload */
  uint8_t nseg;
  uint32_t payload_len; /* sum of seg[].len */
  struct uroce_tx_seg seg[UROCE_TX_MAX_SEG];
  /* then the caller appends 4 bytes of ICRC */
  uint8_t dgid[16]; /* where to send it */
  uint16_t sport;   /* UDP source port (flow entropy) */
  uint16_t dport;   /* UDP destination port; 0: the device's */
  uint32_t qpn;     /* sending QP */
  uint8_t ecn;      /* ECN bits to send with (ECT(0) = 2) */
};

/* Total bytes from BTH through ICRC. */
static inline uint32_t uroce_tx_len(const struct uroce_tx_pkt *tx) {
  return tx->hdr_len + tx->payload_len + tx->pad + 4u;
}

/* Fills *tx with the next packet to send: returns 1, or 0 if nothing is
 * ready now (call again after new work, a received packet or an expiry).
 * The segments stay valid until the next call into the engine. */
int uroce_eng_write_pkt(struct uroce_eng *eng, struct uroce_tx_pkt *tx,
                        uint64_t now);
/* Like write_pkt, but only a CNP, ACK or NAK (what a NIC still sends
 * while PFC pauses the priority its data uses): returns 1 or 0. QPs keep
 * their place in the round robin; an ACK or NAK waits while the QP owes
 * READ responses or atomic acks, which must precede it. */
int uroce_eng_write_ctl_pkt(struct uroce_eng *eng, struct uroce_tx_pkt *tx,
                            uint64_t now);
/* Like write_pkt, but a QP for which data_ok(ctx, qp) is false sends
 * only what write_ctl_pkt would and keeps its place for its data: a NIC
 * whose flows' priorities or service levels are paused one by one (PFC
 * per priority, InfiniBand credits per VL) goes on with the others
 * instead of blocking behind the first. NULL data_ok: every QP may. */
int uroce_eng_write_pkt_if(struct uroce_eng *eng, struct uroce_tx_pkt *tx,
                           uint64_t now,
                           bool (*data_ok)(void *ctx, struct uroce_qp *qp),
                           void *ctx);
/* Makes every ACK held for a reply (cfg.ack_hold_ns) due now, so that
 * the next write_pkt calls return them: the owner calls it once it has
 * taken a packet to send, and the ACKs leave in the same batch. Returns
 * how many QPs have an ACK due as a result. */
int uroce_eng_release_acks(struct uroce_eng *eng);
/* Earliest deadline (ns), UINT64_MAX if none. */
uint64_t uroce_eng_next_expiry(struct uroce_eng *eng);
/* Runs every timer due at now. Returns 0. */
int uroce_eng_handle_expiry(struct uroce_eng *eng, uint64_t now);

/* Takes the oldest async event: returns 1, or 0 if there is none. */
int uroce_eng_get_async_event(struct uroce_eng *eng,
                              struct uroce_async_event *ev);

/* ---- protection domains, memory regions, address handles ---- */

int uroce_eng_pd_new(struct uroce_eng *eng, struct uroce_pd **out);
/* Returns 0, or UROCE_ERR_BUSY while MRs, QPs, SRQs or AHs use it. */
int uroce_eng_pd_del(struct uroce_pd *pd);
/* The engine an object belongs to (its owner finds itself through
 * uroce_eng_user). */
struct uroce_eng *uroce_eng_of_pd(const struct uroce_pd *pd);
struct uroce_eng *uroce_eng_of_ah(const struct uroce_ah *ah);

/* Registers [addr, addr + length) with UROCE_ACCESS_* rights. In phantom
 * mode addr is only a number. Returns 0, UROCE_ERR_INVALID_ARGUMENT (bad
 * access bits, remote write/atomic without local write, zero length with
 * NULL addr overflow), UROCE_ERR_CAPS (table full). */
int uroce_eng_mr_reg(struct uroce_pd *pd, void *addr, size_t length,
                     uint32_t access, struct uroce_mr **out);
/* The same, with work requests and peers naming the region's bytes from
 * iova on (0: zero-based) while they lie at addr. */
int uroce_eng_mr_reg_iova(struct uroce_pd *pd, void *addr, size_t length,
                          uint64_t iova, uint32_t access,
                          struct uroce_mr **out);
/* UROCE_ERR_BUSY while memory windows are bound to it. */
int uroce_eng_mr_dereg(struct uroce_mr *mr);
/* Changes a region in place to [addr, addr + length) of pd (the same
 * engine's), which work requests and peers name from addr on, with
 * access rights (ibv_rereg_mr changing all three). Its keys stay, as
 * rxe and mlx5 keep them; a packet checked against it sees the region
 * before or after, whole. Returns 0,
 * UROCE_ERR_BUSY while windows are bound to it,
 * UROCE_ERR_INVALID_ARGUMENT (not a registered region, another engine's
 * PD, no addr with a length). */
int uroce_eng_mr_rereg(struct uroce_mr *mr, struct uroce_pd *pd, void *addr,
                       size_t length, uint32_t access);

/* A memory window of type 1 or 2 (enum uroce_mw_type) in the region table
 * (mem/mr.h); bound by a UROCE_WR_BIND_MW work request. Freeing a bound
 * window unbinds it. */
int uroce_eng_mw_alloc(struct uroce_pd *pd, int type, struct uroce_mw **out);
int uroce_eng_mw_dealloc(struct uroce_mw *mw);
/* The table entry behind a window handle (handles are table entries). */
static inline struct uroce_mr *mw_entry(struct uroce_mw *mw) {
  return (struct uroce_mr *)(void *)mw;
}

int uroce_eng_ah_new(struct uroce_pd *pd, const struct uroce_ah_attr *attr,
                     struct uroce_ah **out);
int uroce_eng_ah_del(struct uroce_ah *ah);

/* ---- completion queues ---- */

/* A ring of cqe completions. When it overruns, the completion is lost, a
 * UROCE_EVENT_CQ_ERR event is raised and poll reports the overflow. */
int uroce_eng_cq_new(struct uroce_eng *eng, uint32_t cqe,
                     struct uroce_cq **out);
/* Returns 0, or UROCE_ERR_BUSY while a QP uses it. */
int uroce_eng_cq_del(struct uroce_cq *cq);
/* The owner's per-CQ state (NULL until set). */
void *uroce_eng_cq_user(const struct uroce_cq *cq);
void uroce_eng_cq_set_user(struct uroce_cq *cq, void *user);
/* For completion events: a mark of how many completions the CQ has had
 * so far, and whether one came after the mark was taken (or was lost to
 * an overrun since). Safe beside the engine's thread (the count is read
 * with acquire); a resize keeps the mark meaningful. */
uint32_t uroce_eng_cq_mark(const struct uroce_cq *cq);
bool uroce_eng_cq_added_since(const struct uroce_cq *cq, uint32_t mark);
/* New capacity cqe, keeping the completions not yet polled, which the
 * caller keeps the producer and consumers away from meanwhile.
 * UROCE_ERR_INVALID_ARGUMENT if more than cqe wait or cqe is out of
 * range; -ENOMEM. */
int uroce_eng_cq_resize(struct uroce_cq *cq, uint32_t cqe);
/* Drops the completions of QP qpn not yet polled (a QP moved to RESET),
 * keeping the others in order; the caller holds the producer and
 * consumers off. Returns how many were dropped. */
uint32_t uroce_eng_cq_clean(struct uroce_cq *cq, uint32_t qpn);
/* Takes up to n completions; returns how many, or UROCE_ERR_CQ_OVERFLOW
 * once the ring is empty after an overrun. */
int uroce_eng_cq_poll(struct uroce_cq *cq, int n, struct uroce_wc *wc);

/* ---- work requests ---- */

/* ---- shared receive queues ---- */

int uroce_eng_srq_new(struct uroce_pd *pd, const struct uroce_srq_attr *attr,
                      struct uroce_srq **out);
/* Only UROCE_SRQ_LIMIT can change (resizing: UROCE_ERR_NOT_SUPPORTED). */
int uroce_eng_srq_modify(struct uroce_srq *srq,
                         const struct uroce_srq_attr *attr, int mask);
int uroce_eng_srq_query(struct uroce_srq *srq, struct uroce_srq_attr *attr);
int uroce_eng_srq_del(struct uroce_srq *srq);
struct uroce_eng *uroce_eng_of_srq(const struct uroce_srq *srq);
/* Every SRQ has a 24-bit number, unique in its engine (what an XRC
 * initiator names in its work requests). */
uint32_t uroce_eng_srq_num(const struct uroce_srq *srq);
/* Returns 0; UROCE_ERR_QUEUE_FULL or UROCE_ERR_INVALID_ARGUMENT (too many
 * SGEs) with *bad set to the first WR not posted. */
int uroce_eng_srq_post_recv(struct uroce_srq *srq, struct uroce_recv_wr *wr,
                            struct uroce_recv_wr **bad);

/* ---- XRC domains and XRC SRQs (xrc.c) ---- */

/* An XRC domain: the XRC SRQs and target QPs that belong together. A
 * target QP delivers a SEND into the SRQ its XRCETH names, which must be
 * one of its domain's; READ, WRITE and atomics are checked against that
 * SRQ's PD. */
int uroce_eng_xrcd_new(struct uroce_eng *eng, struct uroce_xrcd **out);
/* Returns 0, or UROCE_ERR_BUSY while XRC SRQs or target QPs use it. */
int uroce_eng_xrcd_del(struct uroce_xrcd *xrcd);
struct uroce_eng *uroce_eng_of_xrcd(const struct uroce_xrcd *xrcd);
/* An XRC SRQ of xrcd over pd: its receives complete into cq (which it
 * keeps from being destroyed), with the target QP's number in qp_num.
 * Returns what uroce_eng_srq_new does, and UROCE_ERR_INVALID_ARGUMENT
 * for a missing xrcd or cq or one of another engine. Destroying it while
 * target QPs deliver into it is allowed: their next request naming it
 * is refused (NAK invalid request), a message in progress is dropped. */
int uroce_eng_srq_new_xrc(struct uroce_pd *pd, struct uroce_xrcd *xrcd,
                          struct uroce_cq *cq,
                          const struct uroce_srq_attr *attr,
                          struct uroce_srq **out);
/* The domain of an XRC SRQ or an XRC target QP; NULL for others. */
struct uroce_xrcd *uroce_eng_srq_xrcd(const struct uroce_srq *srq);
struct uroce_xrcd *uroce_eng_qp_xrcd(const struct uroce_qp *qp);

/* ---- queue pairs ---- */

/* This and uroce_qp_num are also the public API's (uroce.h: its QP
 * handle is the engine's QP), exported from liburoce.so. */
UROCE_EXPORT const char *uroce_qp_state_name(int state);

/* Creates a QP in RESET with a random unused 24-bit QPN. An XRC_SEND QP
 * (the initiator) needs pd and send_cq and has no receive queue; an
 * XRC_RECV QP (the target) needs attr->xrcd only (pd may be NULL) and has
 * neither queues nor CQs: it answers requests and delivers SENDs into
 * the XRC SRQs of its domain. Both are RC in every other respect,
 * standard transport only (no multipath).  Its congestion
 * control state starts (cc->init, then cc->set_params with cfg.cc_params)
 * at the latest time the engine was given by read_pkt, write_pkt or
 * handle_expiry (0 before any). Returns 0,
 * UROCE_ERR_INVALID_ARGUMENT (missing CQs, bad type), UROCE_ERR_CAPS (caps
 * above the limits: UROCE_MAX_SGE, UROCE_MAX_INLINE, 65536 WRs; or no free
 * QPN), -ENOMEM. */
int uroce_eng_qp_new(struct uroce_pd *pd, const struct uroce_qp_init_attr *attr,
                     struct uroce_qp **out);
/* Destroys a QP (no completions are generated). */
int uroce_eng_qp_del(struct uroce_qp *qp);
UROCE_EXPORT uint32_t uroce_qp_num(const struct uroce_qp *qp);
struct uroce_eng *uroce_eng_of_qp(const struct uroce_qp *qp);
/* RC progress, for owners that report it (the simulator): *sq_una is the
 * oldest PSN of the send queue not yet acknowledged or answered (READ
 * responses advance it packet by packet), *rq_epsn the PSN the responder
 * expects next. Either pointer may be NULL. */
void uroce_eng_qp_progress(const struct uroce_qp *qp, uint32_t *sq_una,
                           uint32_t *rq_epsn);
/* Whether the QP's peer announced multipath and both ends use it. */
bool uroce_eng_qp_multipath(const struct uroce_qp *qp);
/* The congestion-control module's state of this QP, for owners that
 * report it (the simulator's rate series): read it only through the
 * module's own accessors (uroce_cc_dcqcn_rate). */
const void *uroce_eng_qp_cc_state(const struct uroce_qp *qp);

/* Changes attributes and/or state (ibv_modify_qp). Returns 0,
 * UROCE_ERR_BAD_STATE for a transition the spec does not allow or a
 * cur_qp_state that is not the current one, UROCE_ERR_INVALID_ARGUMENT for
 * a missing required or a disallowed attribute or a value out of range,
 * UROCE_ERR_NOT_SUPPORTED for UROCE_QP_CAP. */
int uroce_eng_qp_modify(struct uroce_qp *qp, const struct uroce_qp_attr *attr,
                        int mask);
/* Moves the QP up RESET -> INIT -> RTR -> RTS from where it is to
 * attr->qp_state, one uroce_eng_qp_modify a state, each with the attributes
 * the spec requires of that step for the QP's type, read from attr:
 *   INIT: pkey_index, port_num, qp_access_flags (UD: qkey);
 *   RTR:  RC and UC: ah_attr, path_mtu, dest_qp_num, rq_psn; RC also
 *         max_dest_rd_atomic, min_rnr_timer;
 *   RTS:  sq_psn; RC also timeout, retry_cnt, rnr_retry, max_rd_atomic.
 * Nothing to do if it is there already. Stops at the first error and
 * returns it (the QP stays where it got); UROCE_ERR_BAD_STATE if the QP is past
 * attr->qp_state or off that path, UROCE_ERR_INVALID_ARGUMENT if attr->qp_state
 * is not INIT, RTR or RTS. */
int uroce_eng_qp_connect(struct uroce_qp *qp, const struct uroce_qp_attr *attr);
int uroce_eng_qp_query(struct uroce_qp *qp, struct uroce_qp_attr *attr,
                       struct uroce_qp_init_attr *init);

/* Posts a list of send WRs. Returns 0, or with *bad = the first WR not
 * posted: UROCE_ERR_BAD_STATE (QP in RESET, INIT or RTR),
 * UROCE_ERR_QUEUE_FULL, UROCE_ERR_INVALID_ARGUMENT (opcode not valid for the
 * QP type, too many SGEs, inline data too long, message over UROCE_MAX_MSG,
 * atomic without one 8-byte SGE, UD without an AH). In ERR and SQE the WRs
 * are accepted and complete with UROCE_WC_WR_FLUSH_ERR. */
int uroce_eng_qp_post_send(struct uroce_qp *qp, struct uroce_send_wr *wr,
                           struct uroce_send_wr **bad);
/* Posts receive WRs: UROCE_ERR_BAD_STATE (RESET, or the QP uses an SRQ),
 * UROCE_ERR_QUEUE_FULL, UROCE_ERR_INVALID_ARGUMENT (too many SGEs). */
int uroce_eng_qp_post_recv(struct uroce_qp *qp, struct uroce_recv_wr *wr,
                           struct uroce_recv_wr **bad);

#endif
