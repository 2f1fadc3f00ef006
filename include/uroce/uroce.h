/* uroce: RDMA over Converged Ethernet v2 in userspace.
 *
 * Public API. Every function that can fail returns 0 (or a non-negative
 * count) on success and a negative error code on failure: either one of the
 * UROCE_ERR_* codes (uroce/errors.h, included here) or a negated errno
 * passed through from the OS (-EINVAL, -ENOMEM, ...). uroce_strerror()
 * names any of them. */
#ifndef UROCE_UROCE_H
#define UROCE_UROCE_H

#include <stddef.h>
#include <stdint.h>

#include "uroce/errors.h"
#include "uroce/verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version string, e.g. "0.1.0". */
UROCE_EXPORT const char *uroce_version(void);

/* ---- devices ---- */

enum uroce_progress {
  /* A progress thread plays the NIC: the application need not call in.
   * While the application busy-polls a CQ, its empty polls run the
   * device themselves and the thread stays out of the way (on a small
   * machine the two would otherwise take turns at the CPU). */
  UROCE_PROGRESS_THREAD = 0,
  /* No thread: posted work leaves at once (a post list as one batch), but
   * packets are received and timers run only inside uroce_poll_cq and
   * uroce_device_progress, so the application must keep polling (a
   * blocking wait on a completion channel would wait forever). Lowest
   * latency and CPU for a busy-polling caller. */
  UROCE_PROGRESS_INLINE = 1,
};

/* Which received packets uroce_device_attr.rx_drop may take. */
enum uroce_rx_drop_only {
  UROCE_RX_DROP_ANY = 0,       /* every RoCEv2 packet */
  UROCE_RX_DROP_REQUESTS = 1,  /* what requesters send: SEND, WRITE, READ
                                  and atomic requests */
  UROCE_RX_DROP_RESPONSES = 2, /* what responders send: ACKs, NAKs, READ
                                  responses, atomic ACKs */
};

struct uroce_device_attr {
  const char *addr;     /* local IPv4 or IPv6 address (required) */
  uint16_t port;        /* UDP port; 0 = 4791 (peers must use the same) */
  int progress;         /* enum uroce_progress */
  int32_t busy_poll_us; /* spin at most this long after the last work
                           before sleeping (the budget adapts below it);
                           0 = default (50), -1 = never spin */
  int n_entropy;        /* extra source sockets for ECMP entropy; 0 =
                           default (8), -1 = none */
  uint32_t netdev_mtu;  /* 0 = the MTU of the address's interface */
  const char *pcap;     /* write every packet sent and received here */
  double rx_drop;       /* testing: drop this share of received packets */
  uint64_t seed;        /* 0 = from the OS's random source */
  const char *cc;       /* congestion control: "none" (default), "dcqcn",
                           "swift"; NULL: $UROCE_CC, else "none" */
  int tx_gather;        /* 1: hand the kernel each packet's pieces where
                           they lie (registered memory included); -1:
                           copy each GSO send into one buffer first,
                           computing the ICRCs in the same pass; 0 =
                           default: copy where the CPU does that in one
                           pass (AVX-512 VPCLMULQDQ), else gather */
  int rx_drop_only;     /* testing: enum uroce_rx_drop_only, the packets
                           rx_drop may take (default: any) */
};

struct uroce_device_stats {
  uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes; /* datagrams on the wire */
  uint64_t rx_bad_icrc;                          /* dropped: ICRC mismatch */
  uint64_t rx_malformed;      /* dropped: not a well-formed RoCEv2 packet */
  uint64_t rx_dropped_impair; /* dropped on purpose (rx_drop) */
  uint64_t rx_dropped_engine; /* dropped by the transport (bad QP, key...) */
  uint64_t retransmits;       /* request packets sent again */
  uint64_t go_backs; /* times the sender went back (NAK, timeout, RNR) */
  uint64_t timeouts, naks_tx, rnr_naks_tx, acks_tx;
  uint64_t cnps_tx, cnps_rx, ce_rx;
  uint64_t tx_gso_calls, rx_gro_segs, tx_eagain;
  uint64_t wakeups, doorbells; /* progress thread sleeps ended, kicks */
  uint64_t tx_msgs; /* datagrams handed to the kernel (a GSO send is one) */
};

struct uroce_device;

/* Opens a device. Returns 0, UROCE_ERR_INVALID_ARGUMENT (no or bad
 * address, unknown cc), -EADDRINUSE (another device has addr:port),
 * -EADDRNOTAVAIL (the address is not on this host), -ENOMEM, or another -errno.
 */
UROCE_EXPORT int uroce_device_open(struct uroce_device **out,
                                   const struct uroce_device_attr *attr);
/* Stops the progress thread, destroys every object, closes the sockets. */
UROCE_EXPORT void uroce_device_close(struct uroce_device *dev);
UROCE_EXPORT void uroce_device_get_stats(struct uroce_device *dev,
                                         struct uroce_device_stats *st);
/* The device's GID (its address, IPv4-mapped for IPv4) and path MTU
 * (enum uroce_mtu) derived from the interface MTU as rxe does. */
UROCE_EXPORT void uroce_device_gid(const struct uroce_device *dev,
                                   uint8_t gid[16]);
UROCE_EXPORT int uroce_device_active_mtu(const struct uroce_device *dev);
/* Runs one round of progress (receive, timers, send). For inline mode;
 * harmless with a thread. Returns how much work was done (0 = none). */
UROCE_EXPORT int uroce_device_progress(struct uroce_device *dev);
/* Whether an empty uroce_poll_cq may wait in the kernel (for a packet, a
 * post or a timer; at most 200 us) once its spin budget is spent: 1, the
 * default, or 0 for a program that also watches what the device cannot
 * see (shared memory, another device), which such a wait would leave
 * unwatched. Arming a CQ for events has the same effect. */
UROCE_EXPORT void uroce_device_poll_sleep(struct uroce_device *dev,
                                          int may_sleep);
/* Writes the transport's events (QP and protocol state steps,
 * retransmits, NAKs, timeouts, CNPs, congestion-control decisions, drops)
 * to path as JSON lines, appended; NULL stops. The environment variable
 * UROCE_TRACE=path does the same from uroce_device_open on (what
 * `uroce run --trace` sets). `uroce trace path` summarises a trace per QP
 * (docs/transport.md, "Trace"). Returns 0 or -errno (path cannot be
 * opened). The file is written in whole lines, buffered: complete at
 * uroce_device_close or when tracing stops. */
UROCE_EXPORT int uroce_device_trace(struct uroce_device *dev, const char *path);

/* ---- verbs: thread-safe, named as libibverbs names them ----
 * Each returns 0 or a negative error: the engine's (see transport/engine.h
 * for each call's list) or -errno. */
struct uroce_comp_channel;

UROCE_EXPORT int uroce_alloc_pd(struct uroce_device *dev,
                                struct uroce_pd **out);
UROCE_EXPORT int uroce_dealloc_pd(struct uroce_pd *pd);
UROCE_EXPORT int uroce_reg_mr(struct uroce_pd *pd, void *addr, size_t length,
                              uint32_t access, struct uroce_mr **out);
/* The same, with work requests and peers naming its bytes from iova on
 * (0: zero-based) while they lie at addr. */
UROCE_EXPORT int uroce_reg_mr_iova(struct uroce_pd *pd, void *addr,
                                   size_t length, uint64_t iova,
                                   uint32_t access, struct uroce_mr **out);
/* UROCE_ERR_BUSY while memory windows are bound to it. */
UROCE_EXPORT int uroce_dereg_mr(struct uroce_mr *mr);
/* Changes a registration in place: its PD, range and access; its keys
 * stay. UROCE_ERR_INVALID_ARGUMENT for a deregistered region or a PD of
 * another device. */
UROCE_EXPORT int uroce_rereg_mr(struct uroce_mr *mr, struct uroce_pd *pd,
                                void *addr, size_t length, uint32_t access);
UROCE_EXPORT uint32_t uroce_mr_lkey(const struct uroce_mr *mr);
UROCE_EXPORT uint32_t uroce_mr_rkey(const struct uroce_mr *mr);
/* Memory windows (enum uroce_mw_type), bound with a UROCE_WR_BIND_MW work
 * request; a type 1 window also unbinds with length 0 and may be bound
 * again, a type 2 one only once invalidated (UROCE_WR_LOCAL_INV, or the
 * peer's SEND with invalidate). The region must allow
 * UROCE_ACCESS_MW_BIND; while windows are bound to it, deregistering it
 * fails with UROCE_ERR_BUSY. Freeing a window unbinds it. */
UROCE_EXPORT int uroce_alloc_mw(struct uroce_pd *pd, int type,
                                struct uroce_mw **out);
UROCE_EXPORT int uroce_dealloc_mw(struct uroce_mw *mw);
/* The window's rkey: after a bind, the one the bind chose. */
UROCE_EXPORT uint32_t uroce_mw_rkey(const struct uroce_mw *mw);
UROCE_EXPORT int uroce_mw_type(const struct uroce_mw *mw);
UROCE_EXPORT int uroce_create_ah(struct uroce_pd *pd,
                                 const struct uroce_ah_attr *attr,
                                 struct uroce_ah **out);
UROCE_EXPORT int uroce_destroy_ah(struct uroce_ah *ah);

/* A completion channel is a file descriptor (poll/epoll it for POLLIN;
 * set O_NONBLOCK on it to make uroce_get_cq_event return -EAGAIN). */
UROCE_EXPORT int uroce_create_comp_channel(struct uroce_device *dev,
                                           struct uroce_comp_channel **out);
/* UROCE_ERR_BUSY while a CQ uses it. */
UROCE_EXPORT int uroce_destroy_comp_channel(struct uroce_comp_channel *ch);
UROCE_EXPORT int uroce_comp_channel_fd(const struct uroce_comp_channel *ch);
UROCE_EXPORT int uroce_get_cq_event(struct uroce_comp_channel *ch,
                                    struct uroce_cq **cq, void **cq_context);
UROCE_EXPORT void uroce_ack_cq_events(struct uroce_cq *cq, unsigned n);

/* ch may be NULL. UROCE_ERR_CAPS: the channel serves too many CQs. */
UROCE_EXPORT int uroce_create_cq(struct uroce_device *dev, uint32_t cqe,
                                 struct uroce_comp_channel *ch, void *context,
                                 struct uroce_cq **out);
/* UROCE_ERR_BUSY while a QP uses it or an event taken with
 * uroce_get_cq_event is not acknowledged. Its events still queued on the
 * channel are dropped. */
UROCE_EXPORT int uroce_destroy_cq(struct uroce_cq *cq);
UROCE_EXPORT void *uroce_cq_context(const struct uroce_cq *cq);
/* Grows or shrinks the CQ to cqe entries, keeping the completions not yet
 * polled. UROCE_ERR_INVALID_ARGUMENT if more of them wait than cqe holds
 * or cqe is out of range; -ENOMEM. */
UROCE_EXPORT int uroce_resize_cq(struct uroce_cq *cq, uint32_t cqe);
/* Drops the completions of QP qp_num that wait in the CQ, as a NIC's
 * driver does when the QP is reset. Returns how many. */
UROCE_EXPORT int uroce_clean_cq(struct uroce_cq *cq, uint32_t qp_num);
/* Takes completions under the CQ's own lock, not the device's. A poll
 * that finds none runs the device once itself (waiting for the device
 * lock if another thread holds it: one thread makes progress at a time),
 * then looks again; see uroce_device_poll_sleep for when it may also wait
 * in the kernel. Returns the number of completions taken (0..n), or
 * UROCE_ERR_CQ_OVERFLOW. */
UROCE_EXPORT int uroce_poll_cq(struct uroce_cq *cq, int n, struct uroce_wc *wc);
/* Arms the CQ: its channel gets an event for the next completion.
 * UROCE_ERR_INVALID_ARGUMENT if the CQ has no channel. solicited_only is
 * treated as "any completion" (a superset of the events asked for). */
UROCE_EXPORT int uroce_req_notify_cq(struct uroce_cq *cq, int solicited_only);

UROCE_EXPORT int uroce_create_srq(struct uroce_pd *pd,
                                  const struct uroce_srq_attr *attr,
                                  struct uroce_srq **out);
UROCE_EXPORT int uroce_modify_srq(struct uroce_srq *srq,
                                  const struct uroce_srq_attr *attr, int mask);
UROCE_EXPORT int uroce_query_srq(struct uroce_srq *srq,
                                 struct uroce_srq_attr *attr);
UROCE_EXPORT int uroce_destroy_srq(struct uroce_srq *srq);
UROCE_EXPORT int uroce_post_srq_recv(struct uroce_srq *srq,
                                     struct uroce_recv_wr *wr,
                                     struct uroce_recv_wr **bad);

/* The SRQ's number (24 bits): what an XRC initiator names to reach it. */
UROCE_EXPORT uint32_t uroce_srq_num(const struct uroce_srq *srq);

/* XRC domains (ibv_open_xrcd, within one device): XRC SRQs and XRC target
 * QPs that belong together. uroce_dealloc_xrcd returns
 * UROCE_ERR_BUSY while XRC SRQs or target QPs use it. */
UROCE_EXPORT int uroce_alloc_xrcd(struct uroce_device *dev,
                                  struct uroce_xrcd **out);
UROCE_EXPORT int uroce_dealloc_xrcd(struct uroce_xrcd *xrcd);
/* An XRC SRQ of xrcd whose receives complete into cq (which cannot be
 * destroyed while the SRQ lives); WRITE, READ and atomics that name it
 * are checked against pd. */
UROCE_EXPORT int uroce_create_xrc_srq(struct uroce_pd *pd,
                                      struct uroce_xrcd *xrcd,
                                      struct uroce_cq *cq,
                                      const struct uroce_srq_attr *attr,
                                      struct uroce_srq **out);

/* An XRC_SEND QP needs pd and send_cq; an XRC_RECV QP only attr->xrcd
 * (pd may be NULL). Work requests of an XRC_SEND QP name the target's
 * XRC SRQ in xrc_remote_srqn. */
UROCE_EXPORT int uroce_create_qp(struct uroce_pd *pd,
                                 const struct uroce_qp_init_attr *attr,
                                 struct uroce_qp **out);
UROCE_EXPORT int uroce_destroy_qp(struct uroce_qp *qp);
/* The QP's number (24 bits, random), to give the peer. */
UROCE_EXPORT uint32_t uroce_qp_num(const struct uroce_qp *qp);
/* "RESET", "INIT", ... */
UROCE_EXPORT const char *uroce_qp_state_name(int state);
UROCE_EXPORT int uroce_modify_qp(struct uroce_qp *qp,
                                 const struct uroce_qp_attr *attr, int mask);
/* Not a libibverbs call: the usual RESET -> INIT -> RTR -> RTS in one.
 * Moves the QP from where it is up to attr->qp_state (normally RTS), one
 * uroce_modify_qp a state, each with the attributes that step requires
 * for the QP's type, read from attr: for INIT port_num (1), pkey_index and
 * qp_access_flags (UD: qkey); for RTR (RC, UC) ah_attr, path_mtu,
 * dest_qp_num, rq_psn and, for RC, max_dest_rd_atomic and min_rnr_timer;
 * for RTS sq_psn and, for RC, timeout, retry_cnt, rnr_retry and
 * max_rd_atomic. Returns 0 or the first step's error (the QP stays where
 * it got); UROCE_ERR_BAD_STATE if the QP is past attr->qp_state or not on
 * that path, UROCE_ERR_INVALID_ARGUMENT if attr->qp_state is not INIT, RTR
 * or RTS. */
UROCE_EXPORT int uroce_connect_qp(struct uroce_qp *qp,
                                  const struct uroce_qp_attr *attr);
UROCE_EXPORT int uroce_query_qp(struct uroce_qp *qp, struct uroce_qp_attr *attr,
                                struct uroce_qp_init_attr *init);
UROCE_EXPORT int uroce_post_send(struct uroce_qp *qp, struct uroce_send_wr *wr,
                                 struct uroce_send_wr **bad);
UROCE_EXPORT int uroce_post_recv(struct uroce_qp *qp, struct uroce_recv_wr *wr,
                                 struct uroce_recv_wr **bad);

/* A completion status in words ("transport retry counter exceeded"). */
UROCE_EXPORT const char *uroce_wc_status_str(uint32_t status);

/* Asynchronous events (QP fatal, CQ overrun, SRQ limit, SQ drained): a
 * file descriptor to poll, and a call that takes one (blocking unless the
 * fd is non-blocking). */
UROCE_EXPORT int uroce_async_fd(const struct uroce_device *dev);
UROCE_EXPORT int uroce_get_async_event(struct uroce_device *dev,
                                       struct uroce_async_event *ev);

#ifdef __cplusplus
}
#endif

#endif
