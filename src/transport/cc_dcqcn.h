/* DCQCN (Zhu et al., SIGCOMM 2015, as Mellanox NICs run it) as a
 * congestion-control module behind struct uroce_cc_ops.
 *
 * Reaction point (the module): a per-QP rate limiter at the current rate
 * Rc; a CNP cuts Rc by alpha/2 (at most once per rate-decrease interval)
 * after remembering it as the target Rt; alpha moves toward 1 in alpha-timer
 * periods that saw a CNP and decays by (1 - g) in periods that did not; the
 * rate-increase timer and the byte counter raise Rc toward Rt: fast
 * recovery (F steps of Rc = (Rt + Rc) / 2), then additive increase (Rt +=
 * RAI), then hyper increase (Rt += RHAI) once both counters passed F.
 *
 * Notification point: a CE-marked packet makes the receiving QP send at most
 * one CNP per cnp_interval (uroce_dcqcn_np_on_ce says when).
 *
 * cc.h's init() takes no parameters, so the state starts with the 100 Gb/s
 * Mellanox preset; whoever owns the state sets its own parameters with
 * uroce_cc_dcqcn_set_params() right after init(), or the engine does it
 * for every QP when its cfg.cc_params points at a struct
 * uroce_dcqcn_params (the set_params hook). */
#ifndef UROCE_TRANSPORT_CC_DCQCN_H
#define UROCE_TRANSPORT_CC_DCQCN_H

#include <stdbool.h>
#include <stdint.h>

#include "transport/cc.h"

struct uroce_dcqcn_params {
  uint64_t line_rate_bps; /* also the initial and the largest rate */
  uint64_t min_rate_bps;  /* never paced slower than this */
  double g;               /* alpha gain */
  double initial_alpha;
  uint64_t alpha_timer_ns;      /* alpha update period */
  uint64_t rate_decrease_ns;    /* at most one cut per this interval */
  uint64_t rate_increase_ns;    /* rate-increase timer period */
  uint64_t byte_counter;        /* bytes per increase event; 0 = off */
  uint64_t rai_bps, rhai_bps;   /* additive and hyper increase steps */
  uint32_t fast_recovery_steps; /* F */
  uint64_t cnp_interval_ns;     /* NP: at most one CNP per QP per interval */
};

/* The Mellanox preset (HPCC simulator's "dcqcn"): g 1/256, alpha timer 1 us,
 * decrease interval 4 us, increase timer 300 us, RAI 5 Mb/s and RHAI
 * 50 Mb/s scaled by line/25G, F 5, CNP interval 50 us, byte counter off. */
void uroce_dcqcn_params_mlx(struct uroce_dcqcn_params *p,
                            uint64_t line_rate_bps);
/* The original DCQCN ns-3 configuration: byte counter 300 KB, RAI 40 Mb/s,
 * RHAI 200 Mb/s, timer 55 us (alpha period 55 us). */
void uroce_dcqcn_params_ns3(struct uroce_dcqcn_params *p,
                            uint64_t line_rate_bps);

extern const struct uroce_cc_ops uroce_cc_dcqcn;

/* Points the state at p (which must outlive it) and restarts it at line
 * rate. Call after init(). */
void uroce_cc_dcqcn_set_params(void *st, const struct uroce_dcqcn_params *p,
                               uint64_t now);
/* Current rate Rc and target Rt, bits per second; alpha. */
double uroce_cc_dcqcn_rate(const void *st);
double uroce_cc_dcqcn_target(const void *st);
double uroce_cc_dcqcn_alpha(const void *st, uint64_t now);

/* Notification point: per-QP CNP pacing. */
struct uroce_dcqcn_np {
  uint64_t last_cnp;
  bool sent;
};
/* A CE-marked packet arrived at now: returns true if the QP must send a
 * CNP (none sent yet, or the last one is interval_ns old). */
bool uroce_dcqcn_np_on_ce(struct uroce_dcqcn_np *np, uint64_t now,
                          uint64_t interval_ns);

#endif
