/* Delay- and ECN-driven congestion window: see cc_swift.h. */
#include "transport/cc_swift.h"

#include <stdbool.h>
#include <string.h>

const struct uroce_swift_params uroce_swift_defaults = {
    .target_ns = 25000,
    .init_cwnd = 256 << 10,
    .min_cwnd = 4096,
    .max_cwnd = 8 << 20,
    .ai = 4096,
    .beta = 0.8,
    .max_mdf = 0.5,
    .ecn_beta = 0.2,
};

struct swift {
  struct uroce_swift_params p;
  double cwnd;          /* bytes */
  uint64_t rtt;         /* latest sample, 0 before one */
  uint64_t last_cut;    /* when the window last shrank */
  bool cut;             /* it ever shrank */
};

static double clamp(const struct swift *s, double w) {
  if (w < (double)s->p.min_cwnd)
    return (double)s->p.min_cwnd;
  if (w > (double)s->p.max_cwnd)
    return (double)s->p.max_cwnd;
  return w;
}

static void swift_init(void *st, uint64_t now) {
  struct swift *s = st;
  s->p = uroce_swift_defaults;
  s->cwnd = (double)s->p.init_cwnd;
}

static void swift_set_params(void *st, const void *params, uint64_t now) {
  struct swift *s = st;
  s->p = *(const struct uroce_swift_params *)params;
  s->cwnd = clamp(s, (double)s->p.init_cwnd);
}

/* At most one cut per RTT: the samples that follow one still carry the
 * queue it is draining. */
static bool may_cut(const struct swift *s, uint64_t now) {
  uint64_t rtt = s->rtt ? s->rtt : s->p.target_ns;
  return !s->cut || now - s->last_cut >= rtt;
}

static void cut(struct swift *s, uint64_t now, double factor) {
  s->cwnd = clamp(s, s->cwnd * factor);
  s->last_cut = now;
  s->cut = true;
}

static void swift_on_rtt(void *st, uint64_t now, uint64_t rtt) {
  struct swift *s = st;
  s->rtt = rtt;
  if (rtt <= s->p.target_ns || !may_cut(s, now))
    return;
  double f = 1 - s->p.beta * (double)(rtt - s->p.target_ns) / (double)rtt;
  if (f < 1 - s->p.max_mdf)
    f = 1 - s->p.max_mdf;
  cut(s, now, f);
}

static void swift_on_cnp(void *st, uint64_t now) {
  struct swift *s = st;
  if (may_cut(s, now))
    cut(s, now, 1 - s->p.ecn_beta);
}

/* Additive increase while the delay is under target: ai bytes per window
 * acknowledged. */
static void swift_on_ack(void *st, uint64_t now, uint64_t bytes) {
  struct swift *s = st;
  if (s->rtt > s->p.target_ns)
    return;
  s->cwnd = clamp(s, s->cwnd + (double)s->p.ai * (double)bytes / s->cwnd);
}

static void swift_event(void *st, uint64_t now) {}
static void swift_tx(void *st, uint64_t now, uint32_t bytes) {}
static uint64_t swift_next_tx(const void *st, uint64_t now) {
  return 0;
}
static uint64_t swift_next_expiry(const void *st) {
  return UINT64_MAX;
}

static uint64_t swift_cwnd(const void *st) {
  return (uint64_t)((const struct swift *)st)->cwnd;
}

uint64_t uroce_cc_swift_cwnd(const void *state) {
  return swift_cwnd(state);
}

const struct uroce_cc_ops uroce_cc_swift = {
    .name = "swift",
    .state_size = sizeof(struct swift),
    .init = swift_init,
    .on_ce_marked_rx = swift_event,
    .on_cnp_rx = swift_on_cnp,
    .on_ack = swift_on_ack,
    .on_tx = swift_tx,
    .next_tx_time = swift_next_tx,
    .next_expiry = swift_next_expiry,
    .handle_expiry = swift_event,
    .set_params = swift_set_params,
    .on_rtt = swift_on_rtt,
    .cwnd = swift_cwnd,
};
