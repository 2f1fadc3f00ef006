/* The analytical model: framing efficiency per fabric, the load factor of
 * the workload's network phases (fluid for spraying and adaptive routing,
 * balls-in-bins for ECMP hashing), and the step time built from them.
 * docs/plan.md derives each formula. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

/* Bytes a full data packet costs besides its payload. */
#define IB_LRH 8
#define IB_VCRC 2
#define IB_L1 2 /* start and end delimiters */
#define BTH 12
#define ICRC 4
#define ETH_L1 20  /* preamble 7, start delimiter 1, inter-frame gap 12 */
#define ETH_HDR 18 /* header 14, FCS 4 */
#define IPV4 20
#define UDP 8

double plan_wire_efficiency(enum plan_fabric f, uint32_t mtu,
                            uint32_t *wire_bytes) {
  uint32_t over = f == PLAN_IB ? IB_L1 + IB_LRH + BTH + ICRC + IB_VCRC
                               : ETH_L1 + ETH_HDR + IPV4 + UDP + BTH + ICRC;
  if (wire_bytes)
    *wire_bytes = mtu + over;
  return (double)mtu / (mtu + over);
}

/* P(no bin holds more than t) for c balls in u bins: bins are filled one
 * after the other, bin k taking Binomial(c - j, 1 / (u - k)) of the c - j
 * balls left. */
static double p_max_le(uint32_t c, uint32_t u, uint32_t t) {
  if (!c)
    return 1;
  if ((uint64_t)t * u < c)
    return 0;
  if (t >= c)
    return 1;
  if ((uint64_t)c * u > 40000) {
    /* Large groups: bins as independent Poisson(c / u) counts, which is
     * what the multinomial tends to; the exact sum would cost c u t. */
    double lam = (double)c / u, term = exp(-lam), cdf = term;
    for (uint32_t i = 1; i <= t; i++) {
      term *= lam / i;
      cdf += term;
    }
    return pow(fmin(cdf, 1), u);
  }
  double *f = calloc(c + 1, sizeof *f), *g = calloc(c + 1, sizeof *g);
  if (!f || !g) {
    free(f);
    free(g);
    return 1;
  }
  f[0] = 1;
  for (uint32_t k = 0; k < u; k++) {
    memset(g, 0, (c + 1) * sizeof *g);
    double p = 1.0 / (u - k);
    for (uint32_t j = 0; j <= c; j++) {
      if (f[j] == 0)
        continue;
      uint32_t left = c - j;
      if (k == u - 1) { /* the last bin takes what is left */
        if (left <= t)
          g[c] += f[j];
        continue;
      }
      for (uint32_t i = 0; i <= t && i <= left; i++) {
        double lp = lgamma(left + 1.0) - lgamma(i + 1.0) -
                    lgamma(left - i + 1.0) + i * log(p) +
                    (left - i) * log1p(-p);
        g[j + i] += f[j] * exp(lp);
      }
    }
    double *tmp = f;
    f = g;
    g = tmp;
  }
  double r = f[c];
  free(f);
  free(g);
  return r > 1 ? 1 : r;
}

static int cmp_group(const void *a, const void *b) {
  const uint32_t *x = a, *y = b;
  return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1)
                      : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

double plan_expected_max_load(const uint32_t *balls, const uint32_t *bins,
                              uint32_t ngroups) {
  /* Identical groups are common (every leaf of a ring), so each distinct
   * (balls, bins) is solved once and raised to its multiplicity. */
  uint32_t(*g)[3] = calloc(ngroups ? ngroups : 1, sizeof *g);
  if (!g)
    return 1;
  uint32_t n = 0, top = 0;
  for (uint32_t i = 0; i < ngroups; i++) {
    g[i][0] = balls[i];
    g[i][1] = bins[i];
    if (balls[i] > top)
      top = balls[i];
  }
  qsort(g, ngroups, sizeof *g, cmp_group);
  for (uint32_t i = 0; i < ngroups; i++) {
    if (n && g[n - 1][0] == g[i][0] && g[n - 1][1] == g[i][1]) {
      g[n - 1][2]++;
      continue;
    }
    g[n][0] = g[i][0];
    g[n][1] = g[i][1];
    g[n++][2] = 1;
  }
  /* E[max] = sum over t >= 0 of P(max > t). */
  double e = 0;
  for (uint32_t t = 0; t < top; t++) {
    double all = 1;
    for (uint32_t i = 0; i < n && all > 0; i++)
      all *= pow(p_max_le(g[i][0], g[i][1], t), g[i][2]);
    e += 1 - all;
    if (all > 1 - 1e-9) /* the DP's rounding keeps it just below 1 */
      break;
  }
  free(g);
  return e;
}

/* ---- Load factors of a phase: every NIC (s, i) sends one flow to NIC
 * (s + shift, i), all at once. ---- */

enum { ROUTE_FLUID, ROUTE_ECMP, ROUTE_SPRAY };

static int route_of(enum plan_fabric f) {
  /* RoCEv2 hashes flows (ECMP); UET-style sprays packets at random;
   * InfiniBand's adaptive routing is taken as ideal (fluid). */
  return f == PLAN_ROCE  ? ROUTE_ECMP
         : f == PLAN_UET ? ROUTE_SPRAY
                         : ROUTE_FLUID;
}

static uint32_t pod_of(const struct plan_option *o, uint32_t leaf) {
  return o->per_pod ? leaf / o->per_pod : 0;
}

/* Flows leaving each leaf and each pod, and entering each leaf. */
struct loads {
  uint32_t *out, *in, *src_leaf, *pod_out;
};

/* A saturated phase on a credit-based fabric (InfiniBand), as a fluid
 * over classes of flows (source leaf, destination leaf), all flows of a
 * class alike. A leaf's uplinks are shared by flow (each host port is an
 * input with one flow); the spines' downlinks into a leaf are shared by
 * input port, so by source leaf: a spine port serves its inputs in turn,
 * and credits hold back what it cannot take rather than dropping it.
 * A lightly loaded source leaf (the last leaf of a layout whose servers
 * do not fill it) thus takes more than its flows' share of a downlink,
 * and the flows that share both its destination and another leaf's
 * saturated uplinks finish late. Rates are in link rates, bytes in flow
 * sizes; the result is the last finish, the phase's load factor. */
struct cls {
  uint32_t a, b, n;
  double left, rate, cap;
  bool fixed; /* scratch of the sharings below */
};

static int cmp_cls_src(const void *x, const void *y) {
  const struct cls *p = x, *q = y;
  return p->a != q->a ? (p->a < q->a ? -1 : 1)
                      : (p->b < q->b ? -1 : p->b > q->b);
}

/* Per-flow max-min of `cap` link rates among classes c[0..n-1] (each
 * flow at most its class's cap): sets rate. */
static void share_by_flow(struct cls **c, uint32_t n, double cap) {
  uint32_t flows = 0;
  for (uint32_t i = 0; i < n; i++) {
    flows += c[i]->n;
    c[i]->fixed = false;
  }
  for (uint32_t round = 0; round < n; round++) {
    double share = flows ? cap / flows : 0;
    bool any = false;
    for (uint32_t i = 0; i < n; i++)
      if (!c[i]->fixed && c[i]->cap <= share) {
        c[i]->rate = c[i]->cap;
        cap -= c[i]->cap * c[i]->n;
        flows -= c[i]->n;
        c[i]->fixed = any = true;
      }
    if (!any) {
      for (uint32_t i = 0; i < n; i++)
        if (!c[i]->fixed)
          c[i]->rate = share;
      return;
    }
  }
}

/* The level w at which sources of aggregate demand d[i] fill `cap` when
 * each gets min(d[i], w); INFINITY when their demands fit. */
static double share_by_input(struct cls **c, uint32_t n, double cap) {
  double sum = 0;
  for (uint32_t i = 0; i < n; i++) {
    sum += c[i]->rate * c[i]->n;
    c[i]->fixed = false;
  }
  if (sum <= cap * (1 + 1e-12))
    return INFINITY;
  for (uint32_t left = n; left;) {
    double w = cap / left;
    bool any = false;
    for (uint32_t i = 0; i < n; i++)
      if (!c[i]->fixed && c[i]->rate * c[i]->n <= w) {
        cap -= c[i]->rate * c[i]->n;
        left--;
        c[i]->fixed = any = true;
      }
    if (!any)
      return cap / left;
  }
  return INFINITY;
}

static int cmp_cls_dst(const void *x, const void *y) {
  const struct cls *p = *(struct cls *const *)x, *q = *(struct cls *const *)y;
  return p->b != q->b ? (p->b < q->b ? -1 : 1)
                      : (p->a < q->a ? -1 : p->a > q->a);
}

/* Groups are runs of g[0..n-1] with the same key (a or b): each is
 * shared. */
static double credit_fluid(struct cls *c, uint32_t n, double up) {
  struct cls **src = malloc(sizeof *src * n), **dst = malloc(sizeof *dst * n);
  double t = 0;
  if (!src || !dst)
    goto out;
  qsort(c, n, sizeof *c, cmp_cls_src);
  for (uint32_t i = 0; i < n; i++)
    c[i].left = 1;
  for (;;) {
    uint32_t live = 0;
    for (uint32_t i = 0; i < n; i++)
      if (c[i].left > 0) {
        c[i].cap = 1;
        src[live] = dst[live] = &c[i];
        live++;
      }
    if (!live)
      break;
    qsort(dst, live, sizeof *dst, cmp_cls_dst);
    /* Alternate the two sharings until the downlinks' levels settle. */
    for (int it = 0; it < 100; it++) {
      for (uint32_t i = 0, j; i < live; i = j) {
        for (j = i; j < live && src[j]->a == src[i]->a; j++)
          ;
        share_by_flow(src + i, j - i, up);
      }
      double moved = 0;
      for (uint32_t i = 0, j; i < live; i = j) {
        for (j = i; j < live && dst[j]->b == dst[i]->b; j++)
          ;
        double w = share_by_input(dst + i, j - i, up);
        for (uint32_t k = i; k < j; k++) {
          double cap = fmin(1, w / dst[k]->n);
          moved = fmax(moved, fabs(cap - dst[k]->cap));
          dst[k]->cap = cap;
        }
      }
      if (moved < 1e-9)
        break;
    }
    double dt = INFINITY;
    for (uint32_t i = 0; i < live; i++)
      if (src[i]->rate > 0)
        dt = fmin(dt, src[i]->left / src[i]->rate);
    if (!isfinite(dt))
      break; /* nothing moves: cannot happen with up > 0 */
    t += dt;
    for (uint32_t i = 0; i < live; i++) {
      src[i]->left -= src[i]->rate * dt;
      if (src[i]->left <= 1e-9)
        src[i]->left = 0;
    }
  }
out:
  free(src);
  free(dst);
  return t;
}

/* The credit fluid of one shift phase: its classes from the layout. */
static double credit_phase(const struct plan_option *o, uint32_t shift) {
  uint32_t nf = o->servers * o->nics_per_server, n = 0;
  struct cls *c = malloc(sizeof *c * (nf ? nf : 1));
  if (!c)
    return 0;
  for (uint32_t s = 0; s < o->servers; s++)
    for (uint32_t i = 0; i < o->nics_per_server; i++) {
      uint32_t a = plan_leaf_of(o, s, i);
      uint32_t b = plan_leaf_of(o, (s + shift) % o->servers, i);
      if (a != b)
        c[n++] = (struct cls){.a = a, .b = b, .n = 1};
    }
  qsort(c, n, sizeof *c, cmp_cls_src);
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++)
    if (m && c[m - 1].a == c[i].a && c[m - 1].b == c[i].b)
      c[m - 1].n++;
    else
      c[m++] = c[i];
  double f = m ? credit_fluid(c, m, o->up) : 0;
  free(c);
  return f;
}

static double shift_factor(const struct plan_option *o, uint32_t shift,
                           double bytes, struct plan_phase_times *ph) {
  uint32_t L = o->sw[1], P = o->pods ? o->pods : 1;
  struct loads ld = {calloc(L, 4), calloc(L, 4), calloc(L, 4), calloc(P, 4)};
  double f = 1;
  if (!ld.out || !ld.in || !ld.src_leaf || !ld.pod_out || !o->up)
    goto out;
  for (uint32_t l = 0; l < L; l++)
    ld.src_leaf[l] = UINT32_MAX;
  bool multi_src = false;
  for (uint32_t s = 0; s < o->servers; s++)
    for (uint32_t i = 0; i < o->nics_per_server; i++) {
      uint32_t a = plan_leaf_of(o, s, i);
      uint32_t b = plan_leaf_of(o, (s + shift) % o->servers, i);
      if (a == b)
        continue;
      ld.out[a]++;
      ld.in[b]++;
      if (ld.src_leaf[b] != UINT32_MAX && ld.src_leaf[b] != a)
        multi_src = true;
      ld.src_leaf[b] = a;
      if (o->topo.tiers == 3 && pod_of(o, a) != pod_of(o, b))
        ld.pod_out[pod_of(o, a)]++;
    }
  uint32_t pod_bins = o->up * (o->radix / 2);
  int route = route_of(o->fabric);
  if (route != ROUTE_ECMP) {
    double rho = 0, per_bin = 0;
    uint32_t nbins = 0; /* links that carry sprayed traffic */
    for (uint32_t l = 0; l < L; l++) {
      double lo = (double)ld.out[l] / o->up, li = (double)ld.in[l] / o->up;
      nbins += (ld.out[l] ? o->up : 0) + (ld.in[l] ? o->up : 0);
      if (lo > rho || li > rho)
        per_bin = fmax(ld.out[l], ld.in[l]) / o->up;
      rho = fmax(rho, fmax(lo, li));
    }
    for (uint32_t p = 0; p < P && o->topo.tiers == 3; p++) {
      nbins += ld.pod_out[p] ? pod_bins : 0;
      rho = fmax(rho, (double)ld.pod_out[p] / pod_bins);
    }
    /* Offered load above a link's rate: queues grow for the whole phase.
     * A lossy fabric drops, and loss recovery is not modelled. Credits
     * hold the senders back instead, link by link: a full input buffer
     * stops its upstream port for every destination behind it
     * (head-of-line blocking), and a switch port shares its rate among
     * input ports, not flows; the fluid model has neither. */
    if (rho > 1 + 1e-9 && o->fabric == PLAN_UET)
      ph->lossy_saturated = true;
    if (rho > 1 + 1e-9 && o->fabric == PLAN_IB) {
      ph->credit_saturated = true;
      rho = fmax(rho, credit_phase(o, shift));
    }
    if (route == ROUTE_SPRAY && nbins > 1 && per_bin > 0) {
      /* Packets sprayed at random fill the links unevenly: a link's count
       * is binomial, and the fullest of nbins sits about sqrt(2 ln nbins)
       * standard deviations above the mean. */
      double pkts = per_bin * ceil(bytes / 4096);
      double sd = sqrt((1 - 1.0 / o->up) / pkts);
      rho *= 1 + sqrt(2 * log(nbins)) * sd;
    }
    f = fmax(1, rho);
    goto out;
  }
  /* ECMP: the slowest flow shares the most loaded link. Groups of bins
   * are a leaf's uplinks, a leaf's downlinks when flows come to it from
   * several leaves (else they mirror the sender's uplinks) and a pod's
   * uplinks. */
  uint32_t n = 0, cap = 2 * L + P;
  uint32_t *balls = calloc(cap, 4), *bins = calloc(cap, 4);
  if (!balls || !bins) {
    free(balls);
    free(bins);
    goto out;
  }
  for (uint32_t l = 0; l < L; l++) {
    if (ld.out[l]) {
      balls[n] = ld.out[l];
      bins[n++] = o->up;
    }
    if (multi_src && ld.in[l]) {
      balls[n] = ld.in[l];
      bins[n++] = o->up;
    }
  }
  for (uint32_t p = 0; p < P && o->topo.tiers == 3; p++)
    if (ld.pod_out[p]) {
      balls[n] = ld.pod_out[p];
      bins[n++] = pod_bins;
    }
  f = fmax(1, plan_expected_max_load(balls, bins, n));
  free(balls);
  free(bins);
out:
  free(ld.out);
  free(ld.in);
  free(ld.src_leaf);
  free(ld.pod_out);
  return f;
}

/* The shifts an all-to-all's sampled phases use: k spread over 1..S-1. */
uint32_t plan_a2a_shift(uint32_t servers, uint32_t k, uint32_t j) {
  if (k > servers - 1)
    k = servers - 1;
  return 1 + (uint32_t)((uint64_t)j * (servers - 1) / k);
}

uint32_t plan_a2a_probes(const struct plan_spec *sp,
                         const struct plan_option *o) {
  if (sp->coll_bytes[PLAN_C_ALLTOALL] <= 0 || o->servers < 2)
    return 0;
  return sp->a2a_phases < o->servers - 1 ? sp->a2a_phases : o->servers - 1;
}

void plan_model_phases(const struct plan_spec *sp, const struct plan_option *o,
                       struct plan_phase_times *ph) {
  memset(ph, 0, sizeof *ph);
  ph->ring_factor = ph->a2a_factor = 1;
  ph->valid = true;
  if (o->servers < 2)
    return;
  ph->ring_factor = shift_factor(o, 1, sp->probe_bytes, ph);
  uint32_t k = plan_a2a_probes(sp, o);
  double sum = 0;
  for (uint32_t j = 0; j < k; j++)
    sum +=
        shift_factor(o, plan_a2a_shift(o->servers, k, j), sp->probe_bytes, ph);
  ph->a2a = k > 0;
  if (k)
    ph->a2a_factor = sum / k;
}

double plan_probe_latency_us(const struct plan_option *o) {
  uint32_t wire;
  plan_wire_efficiency(o->fabric, 4096, &wire);
  double links = o->up ? 4 : 2;
  double prop_ns =
      5.0 * 2 * (2 * o->cable_len[0] + (o->up ? 2 * o->cable_len[1] : 0)) / 2;
  double sf_ns = (links - 1) * wire * 8 / o->speed_gbps;
  return (2 * prop_ns + sf_ns) / 1e3;
}

/* Per-step latency of an inter-server ring: NIC to NIC through up to three
 * switches and the cables between them. */
static double alpha_us(const struct plan_option *o) {
  double nic = o->nic->latency_ns ? o->nic->latency_ns : 1000;
  double sw = o->swp->latency_ns ? o->swp->latency_ns : 500;
  uint32_t hops = o->topo.tiers == 3 ? 5 : 3;
  double prop = 5.0 * 2 *
                (o->cable_len[0] + o->cable_len[1] +
                 (o->topo.tiers == 3 ? o->cable_len[2] : 0));
  return (2 * nic + hops * sw + prop) / 1e3;
}

/* One collective's time in the step, added into p by kind: hierarchical
 * (NVLink inside the server, one ring per rail across servers) for
 * allreduce, reduce-scatter and all-gather; shift-ordered across servers
 * for all-to-all. */
static void add_coll(const struct plan_spec *sp, const struct plan_option *o,
                     const struct plan_phase_times *ph,
                     const struct plan_coll_op *op, struct plan_perf *p) {
  double g = sp->gpus_per_server, S = o->servers, m = o->nics_per_server;
  double R = p->rate_gbps * 1e9 / 8; /* bytes/s */
  double nvl = sp->nvlink_gbs * 1e9, a = p->alpha_us * 1e-6;
  double M = op->bytes, c = op->count;
  switch (op->kind) {
  case PLAN_C_ALLREDUCE: {
    /* Reduce-scatter and all-gather over NVLink inside the server, a ring
     * allreduce of M / m per NIC across servers per rail. */
    double nv = g > 1 ? 2 * (g - 1) / g * M / nvl : 0;
    double net = S > 1 ? 2 * (S - 1) / S * (M / m) / R * ph->ring_factor +
                             2 * (S - 1) * a
                       : 0;
    p->t_ar_nvlink_s += c * nv;
    p->t_ar_net_s += c * net;
    p->t_allreduce_s += c * (nv + net);
    break;
  }
  case PLAN_C_REDUCE_SCATTER:
  case PLAN_C_ALLGATHER: {
    /* Half an allreduce: one pass over NVLink and one around the ring. */
    double nv = g > 1 ? (g - 1) / g * M / nvl : 0;
    double net =
        S > 1 ? (S - 1) / S * (M / m) / R * ph->ring_factor + (S - 1) * a : 0;
    p->t_rs_ag_s += c * (nv + net);
    break;
  }
  case PLAN_C_ALLTOALL: {
    /* S - 1 shift phases of g M / (S m) bytes per NIC (data reaches the
     * NIC of its rail over NVLink first), overlapped with the NVLink
     * traffic. */
    double net =
        S > 1 ? (S - 1) * (g * M / (S * m) / R * ph->a2a_factor + a) : 0;
    double nv = g > 1 ? M / nvl : 0;
    p->t_a2a_net_s += c * net;
    p->t_alltoall_s += c * fmax(net, nv);
    break;
  }
  case PLAN_NCOLL:
    break;
  }
}

/* Bus bandwidth per GPU (nccl-tests): factor x bytes / time, in Gb/s. */
static double busbw(double factor, double bytes, double t) {
  return t > 0 ? factor * bytes / t * 8 / 1e9 : 0;
}

void plan_perf_from(const struct plan_spec *sp, const struct plan_option *o,
                    const struct plan_phase_times *ph, struct plan_perf *p) {
  memset(p, 0, sizeof *p);
  p->phases = *ph;
  p->eff = plan_wire_efficiency(o->fabric, 4096, NULL);
  p->rate_gbps = o->speed_gbps * p->eff;
  p->alpha_us = alpha_us(o);
  for (uint32_t i = 0; i < sp->nops; i++)
    add_coll(sp, o, ph, &sp->ops[i], p);
  double G = sp->gpus, f = (G - 1) / G;
  p->busbw_ar_gbps =
      busbw(2 * f, sp->coll_bytes[PLAN_C_ALLREDUCE], p->t_allreduce_s);
  p->busbw_rs_ag_gbps = busbw(f,
                              sp->coll_bytes[PLAN_C_REDUCE_SCATTER] +
                                  sp->coll_bytes[PLAN_C_ALLGATHER],
                              p->t_rs_ag_s);
  p->busbw_a2a_gbps =
      busbw(f, sp->coll_bytes[PLAN_C_ALLTOALL], p->t_alltoall_s);
  p->t_comm_s = p->t_allreduce_s + p->t_rs_ag_s + p->t_alltoall_s;
  p->t_step_s =
      sp->compute_s + fmax(0, p->t_comm_s - sp->overlap * sp->compute_s);
  enum plan_coll h = plan_headline_coll(sp);
  p->busbw_gbps = h == PLAN_C_ALLREDUCE        ? p->busbw_ar_gbps
                  : h == PLAN_C_REDUCE_SCATTER ? p->busbw_rs_ag_gbps
                                               : p->busbw_a2a_gbps;
  p->usd_per_gbps = p->busbw_gbps > 0 ? o->capex / (G * p->busbw_gbps) : 0;
}

enum plan_coll plan_headline_coll(const struct plan_spec *sp) {
  if (sp->coll_bytes[PLAN_C_ALLREDUCE] > 0)
    return PLAN_C_ALLREDUCE;
  if (sp->coll_bytes[PLAN_C_REDUCE_SCATTER] + sp->coll_bytes[PLAN_C_ALLGATHER] >
      0)
    return PLAN_C_REDUCE_SCATTER;
  return PLAN_C_ALLTOALL;
}
