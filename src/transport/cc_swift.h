/* A delay- and ECN-driven congestion window (the family of Swift, Kumar et
 * al., SIGCOMM 2020, and Ultra Ethernet's NSCC) as a module behind struct
 * uroce_cc_ops, next to DCQCN.
 *
 * The window (bytes in flight, the engine enforces it) grows additively,
 * by ai bytes per window acknowledged, while the RTT the engine measures
 * stays under the target delay; above it, it shrinks in proportion to the
 * excess, (1 - beta x (rtt - target) / rtt), at most once per RTT and by
 * at most max_mdf. A CNP (the RoCEv2 echo of an ECN mark) cuts it by
 * ecn_beta, also at most once per RTT. The window starts at init_cwnd and
 * stays within [min_cwnd, max_cwnd]; it does not pace (a sprayed fabric's
 * queues are what the delay sees).
 *
 * As with DCQCN, init() starts from the defaults below and cfg.cc_params
 * (a struct uroce_swift_params) replaces them through set_params. */
#ifndef UROCE_TRANSPORT_CC_SWIFT_H
#define UROCE_TRANSPORT_CC_SWIFT_H

#include <stdint.h>

#include "transport/cc.h"

struct uroce_swift_params {
  uint64_t target_ns; /* target RTT (base RTT plus the queue allowed) */
  uint64_t init_cwnd, min_cwnd, max_cwnd; /* bytes */
  uint64_t ai;        /* bytes added per window acknowledged */
  double beta;        /* multiplicative decrease per unit of excess delay */
  double max_mdf;     /* the most one decrease takes */
  double ecn_beta;    /* the cut a CNP makes */
};

/* 25 us target, 256 KiB initial window (about a 100 Gb/s, 20 us BDP),
 * 4 KiB .. 8 MiB, 4 KiB additive increase, beta 0.8, max_mdf 0.5, CNP
 * cut 0.2. */
extern const struct uroce_swift_params uroce_swift_defaults;

extern const struct uroce_cc_ops uroce_cc_swift;

/* The window now, bytes (for reports). */
uint64_t uroce_cc_swift_cwnd(const void *state);

#endif
