/* Congestion control as a pluggable module. The engine plays the RoCEv2
 * notification point itself (a CE-marked packet makes the receiving QP
 * send a CNP, at most one per cnp_interval_ns); the module is the reaction
 * point: it sees CNPs, acks and transmissions and tells the requester the
 * earliest time it may send its next packet, or how much it may have in
 * flight (a window). Per-QP module state is
 * preallocated at QP creation (state_size bytes), so no hook allocates. */
#ifndef UROCE_TRANSPORT_CC_H
#define UROCE_TRANSPORT_CC_H

#include <stddef.h>
#include <stdint.h>

struct uroce_cc_ops {
  const char *name;
  size_t state_size; /* bytes of per-QP state, zeroed before init */
  void (*init)(void *st, uint64_t now);
  /* A CE-marked packet arrived on this QP (the NP side; informational). */
  void (*on_ce_marked_rx)(void *st, uint64_t now);
  /* A CNP arrived for this QP: the RP side reacts. Also called when a
   * packet of the QP arrived trimmed (a switch's queue was full, as an
   * ECN mark would say): the same signal from the same queue. */
  void (*on_cnp_rx)(void *st, uint64_t now);
  /* Newly acknowledged bytes (RC). */
  void (*on_ack)(void *st, uint64_t now, uint64_t bytes);
  /* A packet of bytes (BTH through ICRC) left this QP. */
  void (*on_tx)(void *st, uint64_t now, uint32_t bytes);
  /* Earliest time the next packet may leave (<= now: at once). */
  uint64_t (*next_tx_time)(const void *st, uint64_t now);
  /* The module's own timers (DCQCN's alpha and rate-increase timers);
   * UINT64_MAX if none. handle_expiry is called once now >= that time. */
  uint64_t (*next_expiry)(const void *st);
  void (*handle_expiry)(void *st, uint64_t now);
  /* Optional: applies the engine's cc_params (struct uroce_eng_cfg) to a
   * new QP's state right after init(); NULL = the module has none. */
  void (*set_params)(void *st, const void *params, uint64_t now);
  /* Optional: a round-trip time the requester measured (a request sent
   * once, to its acknowledgement; about one sample per RTT). */
  void (*on_rtt)(void *st, uint64_t now, uint64_t rtt_ns);
  /* Optional: a window, bytes the QP may have unacknowledged (new
   * requests wait while it is full); NULL = none. */
  uint64_t (*cwnd)(const void *st);
  /* Optional: the rate the QP is paced at, bits/s (for the trace); NULL
   * or 0 = not paced. */
  uint64_t (*rate)(const void *st);
};

/* Sends as fast as the caller drains packets; ignores every signal. */
extern const struct uroce_cc_ops uroce_cc_noop;

/* The module called name ("none", "dcqcn", "swift"), or NULL. */
const struct uroce_cc_ops *uroce_cc_find(const char *name);

#endif
