#include "transport/cc_dcqcn.h"

#include <math.h>

struct dcqcn {
  const struct uroce_dcqcn_params *p;
  double rc, rt, alpha;
  double next_tx; /* ns; fractional so pacing does not drift */
  uint64_t alpha_epoch;
  uint64_t last_decrease;
  uint64_t timer_at; /* next rate-increase event, UINT64_MAX when idle */
  uint64_t bytes;    /* byte counter since the last byte-counter event */
  uint32_t it, ibc;  /* increase events since the last cut */
  bool cnp_in_period, decreased;
};

/* uroce_dcqcn_params_mlx() at 100 Gb/s: what init() starts with. */
static const struct uroce_dcqcn_params mlx100 = {
    .line_rate_bps = 100000000000ull,
    .min_rate_bps = 100000000,
    .g = 1.0 / 256,
    .initial_alpha = 1.0,
    .alpha_timer_ns = 1000,
    .rate_decrease_ns = 4000,
    .rate_increase_ns = 300000,
    .byte_counter = 0,
    .rai_bps = 20000000,
    .rhai_bps = 200000000,
    .fast_recovery_steps = 5,
    .cnp_interval_ns = 50000,
};

/* The Mellanox preset's rate steps scale with the line rate (5 and 50
 * Mb/s per 25 Gb/s); everything else is mlx100's. */
void uroce_dcqcn_params_mlx(struct uroce_dcqcn_params *p,
                            uint64_t line_rate_bps) {
  double scale = (double)line_rate_bps / 25e9;
  *p = mlx100;
  p->line_rate_bps = line_rate_bps;
  p->rai_bps = (uint64_t)(5e6 * scale);
  p->rhai_bps = (uint64_t)(50e6 * scale);
}

void uroce_dcqcn_params_ns3(struct uroce_dcqcn_params *p,
                            uint64_t line_rate_bps) {
  *p = (struct uroce_dcqcn_params){
      .line_rate_bps = line_rate_bps,
      .min_rate_bps = 100000000,
      .g = 1.0 / 256,
      .initial_alpha = 1.0,
      .alpha_timer_ns = 55000,
      .rate_decrease_ns = 50000,
      .rate_increase_ns = 55000,
      .byte_counter = 300000,
      .rai_bps = 40000000,
      .rhai_bps = 200000000,
      .fast_recovery_steps = 5,
      .cnp_interval_ns = 50000,
  };
}

/* Applies the alpha updates of every period that ended by now: the first
 * one may have seen a CNP, the rest did not. */
static void alpha_catch_up(struct dcqcn *d, uint64_t now) {
  uint64_t T = d->p->alpha_timer_ns;
  if (now < d->alpha_epoch + T)
    return;
  uint64_t n = (now - d->alpha_epoch) / T;
  double keep = 1.0 - d->p->g;
  d->alpha = d->cnp_in_period ? keep * d->alpha + d->p->g : keep * d->alpha;
  if (n > 1)
    d->alpha *= pow(keep, (double)(n - 1));
  d->alpha_epoch += n * T;
  d->cnp_in_period = false;
}

static void restart(struct dcqcn *d, const struct uroce_dcqcn_params *p,
                    uint64_t now) {
  d->p = p;
  d->rc = d->rt = (double)p->line_rate_bps;
  d->alpha = p->initial_alpha;
  d->alpha_epoch = now;
  d->next_tx = 0;
  d->timer_at = UINT64_MAX;
  d->bytes = 0;
  d->it = d->ibc = 0;
  d->cnp_in_period = d->decreased = false;
}

static void dcqcn_init(void *st, uint64_t now) {
  restart(st, &mlx100, now);
}

void uroce_cc_dcqcn_set_params(void *st, const struct uroce_dcqcn_params *p,
                               uint64_t now) {
  restart(st, p, now);
}

static void set_params_hook(void *st, const void *p, uint64_t now) {
  restart(st, p, now);
}

static void on_ce(void *st, uint64_t now) {}

static void on_cnp(void *st, uint64_t now) {
  struct dcqcn *d = st;
  const struct uroce_dcqcn_params *p = d->p;
  alpha_catch_up(d, now);
  d->cnp_in_period = true;
  if (d->decreased && now - d->last_decrease < p->rate_decrease_ns)
    return;
  d->decreased = true;
  d->last_decrease = now;
  d->rt = d->rc;
  d->rc *= 1.0 - d->alpha / 2;
  if (d->rc < (double)p->min_rate_bps)
    d->rc = (double)p->min_rate_bps;
  d->it = d->ibc = 0;
  d->bytes = 0;
  d->timer_at = now + p->rate_increase_ns;
}

/* One rate-increase event (timer or byte counter). */
static void increase(struct dcqcn *d) {
  const struct uroce_dcqcn_params *p = d->p;
  uint32_t F = p->fast_recovery_steps;
  uint32_t hi = d->it > d->ibc ? d->it : d->ibc;
  uint32_t lo = d->it < d->ibc ? d->it : d->ibc;
  double line = (double)p->line_rate_bps;
  if (!p->byte_counter)
    hi = lo = d->it; /* timer alone: fast recovery, then additive */
  if (hi < F) {
    /* fast recovery: Rt stays */
  } else if (p->byte_counter && lo > F) {
    d->rt += (double)p->rhai_bps;
  } else {
    d->rt += (double)p->rai_bps;
  }
  if (d->rt > line)
    d->rt = line;
  d->rc = (d->rt + d->rc) / 2;
  if (line - d->rc < 1.0)
    d->rc = line;
}

static void on_ack(void *st, uint64_t now, uint64_t bytes) {}

static void on_tx(void *st, uint64_t now, uint32_t bytes) {
  struct dcqcn *d = st;
  double start = d->next_tx > (double)now ? d->next_tx : (double)now;
  d->next_tx = start + (double)bytes * 8e9 / d->rc;
  if (d->p->byte_counter && d->timer_at != UINT64_MAX) {
    d->bytes += bytes;
    if (d->bytes >= d->p->byte_counter) {
      d->bytes -= d->p->byte_counter;
      d->ibc++;
      increase(d);
    }
  }
}

static uint64_t next_tx_time(const void *st, uint64_t now) {
  const struct dcqcn *d = st;
  return (uint64_t)ceil(d->next_tx);
}

static uint64_t next_expiry(const void *st) {
  return ((const struct dcqcn *)st)->timer_at;
}

static void handle_expiry(void *st, uint64_t now) {
  struct dcqcn *d = st;
  while (d->timer_at <= now) {
    d->it++;
    increase(d);
    if (d->rc >= (double)d->p->line_rate_bps &&
        d->rt >= (double)d->p->line_rate_bps) {
      d->timer_at = UINT64_MAX;
      break;
    }
    d->timer_at += d->p->rate_increase_ns;
  }
}

double uroce_cc_dcqcn_rate(const void *st) {
  return ((const struct dcqcn *)st)->rc;
}
static uint64_t dcqcn_rate(const void *st) {
  return (uint64_t)((const struct dcqcn *)st)->rc;
}
double uroce_cc_dcqcn_target(const void *st) {
  return ((const struct dcqcn *)st)->rt;
}
double uroce_cc_dcqcn_alpha(const void *st, uint64_t now) {
  struct dcqcn d = *(const struct dcqcn *)st;
  alpha_catch_up(&d, now);
  return d.alpha;
}

bool uroce_dcqcn_np_on_ce(struct uroce_dcqcn_np *np, uint64_t now,
                          uint64_t interval_ns) {
  if (np->sent && now - np->last_cnp < interval_ns)
    return false;
  np->sent = true;
  np->last_cnp = now;
  return true;
}

const struct uroce_cc_ops uroce_cc_dcqcn = {
    .name = "dcqcn",
    .state_size = sizeof(struct dcqcn),
    .init = dcqcn_init,
    .on_ce_marked_rx = on_ce,
    .on_cnp_rx = on_cnp,
    .on_ack = on_ack,
    .on_tx = on_tx,
    .next_tx_time = next_tx_time,
    .next_expiry = next_expiry,
    .handle_expiry = handle_expiry,
    .set_params = set_params_hook,
    .rate = dcqcn_rate,
};
