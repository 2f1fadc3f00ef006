#include "sim/report.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"
#include "uroce/uroce.h"

const char *sim_tier_name(const struct sim_cfg *c, int tier) {
  static const char *ls[] = {"host", "leaf", "spine", "core"};
  static const char *ft[] = {"host", "edge", "agg", "core"};
  if (tier < 0 || tier >= SIM_TIERS)
    return "?";
  return c->topo.kind == SIM_TOPO_FAT_TREE ? ft[tier] : ls[tier];
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v. */
static double pct(const double *v, size_t n, double p) {
  if (!n)
    return 0;
  size_t i = (size_t)ceil(p / 100.0 * (double)n);
  return v[i ? i - 1 : 0];
}

static const char *coll_kind_name(int k) {
  static const char *const n[] = {"allreduce", "reduce_scatter", "allgather",
                                  "broadcast", "reduce",         "all_to_all"};
  return k >= 0 && k < 6 ? n[k] : "?";
}

static const char *coll_algo_name(int a) {
  static const char *const n[] = {"auto", "ring",     "tree",
                                  "rhd",  "pairwise", "hier"};
  return a >= 0 && a < 6 ? n[a] : "?";
}

static const char *routing_name(enum sim_routing r);

/* What a user reads about the failed flows: the first few, "id
 * (src->dst)", and why: "0 (0->7), 4 (4->0): transport retry counter
 * exceeded". */
static void failed_note(const struct sim *s, struct sim_summary *o) {
  char *w = o->failed_what;
  size_t cap = sizeof o->failed_what, len = 0;
  uint64_t k = 0;
  int status = -1;
  bool mixed = false;
  for (uint32_t i = 0; i < sim_nflows(s); i++) {
    const struct sim_flow *f = sim_flow(s, i);
    if (f->failed == SIM_NEVER)
      continue;
    if (k++ < 4 && len < cap)
      len += (size_t)snprintf(w + len, cap - len, "%s%u (%u->%u)",
                              k > 1 ? ", " : "", f->id, f->src, f->dst);
    mixed |= status >= 0 && status != f->status;
    if (status < 0)
      status = f->status;
  }
  if (k > 4 && len < cap)
    len += (size_t)snprintf(w + len, cap - len, " and %llu more",
                            (unsigned long long)(k - 4));
  if (k && len < cap)
    snprintf(w + len, cap - len, ": %s%s",
             uroce_wc_status_str((uint32_t)status),
             mixed ? ", and other errors" : "");
}

void sim_summarize(const struct sim *s, struct sim_summary *o) {
  memset(o, 0, sizeof(*o));
  const struct sim_stats *st = sim_stats(s);
  const struct sim_cfg *c = sim_cfg(s);
  o->fabric = c->fabric == SIM_FABRIC_IB ? "infiniband" : "roce";
  o->routing = routing_name(c->routing);
  o->lost_failures = st->drops_link_down;
  o->fc_pkts = st->fc_pkts;
  uint32_t nf;
  const struct sim_fail_result *fr = sim_fail_results(s, &nf);
  for (uint32_t i = 0; i < nf; i++)
    if (fr[i].installed &&
        (double)(fr[i].installed - fr[i].at) / 1e6 > o->recovery_us)
      o->recovery_us = (double)(fr[i].installed - fr[i].at) / 1e6;
  uint32_t n = sim_nflows(s);
  double *fct = malloc(sizeof(double) * (n ? n : 1));
  double *tp = malloc(sizeof(double) * (n ? n : 1));
  size_t k = 0;
  double sum = 0, tsum = 0;
  sim_time_t last = 0;
  uint64_t done_bytes = 0;
  for (uint32_t i = 0; i < n; i++) {
    const struct sim_flow *f = sim_flow(s, i);
    o->bytes += f->bytes;
    o->failed += f->failed != SIM_NEVER;
    if (f->finish == SIM_NEVER || !fct || !tp)
      continue;
    done_bytes += f->bytes;
    double us = (double)(f->finish - f->start) / 1e6;
    fct[k] = us;
    tp[k] = us > 0 ? (double)f->bytes * 8 / (us * 1e3) : 0;
    sum += us;
    tsum += tp[k];
    k++;
    if (f->finish > last)
      last = f->finish;
  }
  o->flows = n;
  o->done = k;
  if (k) {
    qsort(fct, k, sizeof(double), cmp_d);
    qsort(tp, k, sizeof(double), cmp_d);
    double f7[7] = {fct[0],          pct(fct, k, 50),   pct(fct, k, 90),
                    pct(fct, k, 99), pct(fct, k, 99.9), fct[k - 1],
                    sum / (double)k};
    memcpy(o->fct_us, f7, sizeof(f7));
    double t5[5] = {tp[0], pct(tp, k, 1), pct(tp, k, 50), tsum / (double)k,
                    tp[k - 1]};
    memcpy(o->tput_gbps, t5, sizeof(t5));
  }
  o->completion_us = (double)last / 1e6;
  if (o->failed)
    failed_note(s, o);
  o->goodput_gbps =
      last ? (double)done_bytes * 8 / ((double)last / 1e12) / 1e9 : 0;
  for (int t = 0; t < SIM_TIERS; t++) {
    o->drops += st->drops_buffer[t] + st->drops_lossless[t] + st->drops_trim[t];
    o->pauses += st->pause_frames[t];
    o->ecn_marks += st->ecn_marks[t];
    o->max_queue[t] = st->max_queue[t];
  }
  o->drops_wire = st->drops_wire;
  o->retx = st->retx_pkts;
  o->timeouts = st->timeouts;
  o->cnps = st->cnps;
  o->events = st->events;
  o->wall_s = st->wall_s;
  free(fct);
  free(tp);
  uint32_t nr;
  const struct sim_coll_result *r = sim_coll_results(s, &nr);
  if (r) {
    const struct sim_coll_cfg *cc = &sim_cfg(s)->wl.coll;
    o->coll_sizes = cc->nsizes;
    o->coll_done = nr;
    o->coll_ranks = sim_coll_ranks(s);
    o->coll_name = coll_kind_name(cc->kind);
    o->completion_us = 0;
    uint64_t moved = 0;
    for (uint32_t i = 0; i < nr; i++) {
      const struct sim_coll_result *x = &r[i];
      double end = (double)(x->start + x->time) / 1e6;
      if (end > o->completion_us)
        o->completion_us = end;
      moved += x->bytes;
      if (!o->coll_min_bytes || x->bytes < o->coll_min_bytes)
        o->coll_min_bytes = x->bytes;
      if (x->bytes >= o->coll_bytes) {
        o->coll_bytes = x->bytes;
        o->coll_time_us = (double)x->time / 1e6;
        o->coll_busbw = x->busbw_gbs;
        o->coll_bound_busbw = x->bound_busbw_gbs;
        o->coll_ratio = x->ratio;
      }
    }
    o->bytes = moved;
    o->coll_failed =
        sim_coll_failure(s, &o->coll_fail_rank, &o->coll_fail_us,
                         o->coll_fail_why, sizeof o->coll_fail_why);
    /* Every byte the ranks received, over the time they took. */
    o->goodput_gbps = o->completion_us > 0
                          ? (double)st->rx_payload * 8 / o->completion_us / 1e3
                          : 0;
  }
}

static const char *routing_name(enum sim_routing r) {
  return r == SIM_ROUTE_SPRAY      ? "spray"
         : r == SIM_ROUTE_ADAPTIVE ? "adaptive"
         : r == SIM_ROUTE_STATIC   ? "static"
                                   : "ecmp";
}

static FILE *open_in(const char *dir, const char *name, char *err,
                     size_t errlen) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f)
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
  return f;
}

static void tiers_json(FILE *f, const struct sim_cfg *c, const char *key,
                       const uint64_t *v, const char *tail) {
  fprintf(f, "  \"%s\": {", key);
  int top = c->topo.kind == SIM_TOPO_FAT_TREE ? 3 : 2;
  for (int t = 1; t <= top; t++)
    fprintf(f, "%s\"%s\": %llu", t > 1 ? ", " : "", sim_tier_name(c, t),
            (unsigned long long)v[t]);
  fprintf(f, "}%s\n", tail);
}

static void json_str(FILE *f, const char *v);
static void port_name(const struct sim *s, uint32_t j, char *out, size_t len);

/* Packet trimming: data packets trimmed instead of dropped, trimmed
 * headers a full trim queue dropped, the port that trimmed most. */
static void trim_json(FILE *f, const struct sim *s) {
  const struct sim_stats *st = sim_stats(s);
  const struct sim_cfg *c = sim_cfg(s);
  uint64_t n = 0, d = 0, pt, pd;
  for (int t = 0; t < SIM_TIERS; t++) {
    n += st->trims[t];
    d += st->drops_trim[t];
  }
  char nm[40] = "";
  uint32_t j = sim_port_top_trims(s, &pt, &pd);
  if (j != UINT32_MAX)
    port_name(s, j, nm, sizeof nm);
  fprintf(f,
          "  \"trimming\": {\"queue_bytes\": %llu, \"trimmed\": %llu, "
          "\"trim_queue_drops\": %llu, \"top_port\": \"%s\", "
          "\"top_port_trimmed\": %llu, \"top_port_trim_queue_drops\": "
          "%llu},\n",
          (unsigned long long)c->sw.trim_queue, (unsigned long long)n,
          (unsigned long long)d, nm, (unsigned long long)pt,
          (unsigned long long)pd);
  tiers_json(f, c, "trimmed_by_tier", st->trims, ",");
}

/* The collective's results, one object per size. */
static void coll_json(FILE *f, const struct sim *s) {
  uint32_t n;
  const struct sim_coll_result *r = sim_coll_results(s, &n);
  if (!r)
    return;
  const struct sim_coll_cfg *cc = &sim_cfg(s)->wl.coll;
  fprintf(f,
          "  \"collective\": {\"collective\": \"%s\", \"ranks\": %u, "
          "\"busbw_factor\": %.6f, \"link_goodput_gbps\": %.4f, ",
          coll_kind_name(cc->kind), sim_coll_ranks(s), sim_coll_factor(s),
          sim_coll_link_gbps(s));
  if (cc->ranks_per_host > 1)
    fprintf(f,
            "\"ranks_per_host\": %u, \"nics_per_host\": %u, "
            "\"intra_host_gbps\": %.3f, \"intra_host_latency_us\": %.3f, ",
            cc->ranks_per_host, sim_coll_nics_per_host(cc), cc->intra_gbps,
            cc->intra_latency_us);
  fprintf(f, "\"sizes\": [");
  for (uint32_t i = 0; i < n; i++)
    fprintf(f,
            "%s\n    {\"bytes\": %llu, \"count\": %llu, \"algo\": \"%s\", "
            "\"time_us\": %.3f, \"algbw_GBps\": %.4f, \"busbw_GBps\": %.4f, "
            "\"bound_us\": %.3f, \"bound_busbw_GBps\": %.4f, \"ratio\": "
            "%.4f, \"latency_steps\": %u, \"step_latency_us\": %.4f, "
            "\"bw_bound_us\": %.3f, \"chain_bound_us\": %.3f}",
            i ? "," : "", (unsigned long long)r[i].bytes,
            (unsigned long long)r[i].count, coll_algo_name(r[i].algo),
            (double)r[i].time / 1e6, r[i].algbw_gbs, r[i].busbw_gbs,
            r[i].bound_us, r[i].bound_busbw_gbs, r[i].ratio, r[i].steps,
            r[i].step_latency_us, r[i].bw_bound_us, r[i].chain_bound_us);
  fprintf(f, "],\n    \"done\": %s", n == cc->nsizes ? "true" : "false");
  uint32_t rank;
  double at;
  char why[256];
  if (sim_coll_failure(s, &rank, &at, why, sizeof why)) {
    fprintf(f, ", \"failed\": {\"rank\": %u, \"at_us\": %.3f, \"reason\": ",
            rank, at);
    json_str(f, why);
    fputc('}', f);
  }
  fprintf(f, "},\n");
}

void sim_report_coll_table(FILE *o, const struct sim *s) {
  uint32_t n;
  const struct sim_coll_result *r = sim_coll_results(s, &n);
  if (!r)
    return;
  const struct sim_coll_cfg *cc = &sim_cfg(s)->wl.coll;
  if (cc->ranks_per_host > 1)
    fprintf(o,
            "%s on %u ranks, servers of %u ranks and %u NICs, intra-host "
            "%.0f Gb/s each way (busbw = algbw x %.4f; bound: the bytes of "
            "the busiest NIC at %.2f Gb/s or intra-host port)\n",
            coll_kind_name(cc->kind), sim_coll_ranks(s), cc->ranks_per_host,
            sim_coll_nics_per_host(cc), cc->intra_gbps, sim_coll_factor(s),
            sim_coll_link_gbps(s));
  else
    fprintf(o,
            "%s on %u ranks (busbw = algbw x %.4f; bound: busbw <= %.2f Gb/s "
            "= %.3f GB/s)\n",
            coll_kind_name(cc->kind), sim_coll_ranks(s), sim_coll_factor(s),
            sim_coll_link_gbps(s), sim_coll_link_gbps(s) / 8);
  fprintf(o, "%12s %6s %11s %9s %9s %11s %9s %7s\n", "size (B)", "algo",
          "time (us)", "algbw", "busbw", "bound (us)", "bound bw", "ratio");
  fprintf(o, "%12s %6s %11s %9s %9s %11s %9s %7s\n", "", "", "", "(GB/s)",
          "(GB/s)", "", "(GB/s)", "t/bound");
  for (uint32_t i = 0; i < n; i++)
    fprintf(o, "%12llu %6s %11.2f %9.3f %9.3f %11.2f %9.3f %7.3f\n",
            (unsigned long long)r[i].bytes, coll_algo_name(r[i].algo),
            (double)r[i].time / 1e6, r[i].algbw_gbs, r[i].busbw_gbs,
            r[i].bound_us, r[i].bound_busbw_gbs, r[i].ratio);
  if (n < cc->nsizes)
    fprintf(o, "(%u of %u sizes finished)\n", n, cc->nsizes);
}

/* FCT of a flow alone in the fabric, as the sender sees it (the run's FCT
 * ends when the requester polls the completion): its packets' line time
 * at the source NIC, the path's propagation and its largest packet's
 * store-and-forward at every switch, and the last acknowledgement's way
 * back. ns-3 (HPCC) and htsim divide by this for the slowdown. */
double sim_ideal_fct_us(const struct sim *s, uint32_t src, uint32_t dst,
                        uint64_t bytes) {
  const struct sim_cfg *c = sim_cfg(s);
  uint32_t mtu = c->tp.mtu;
  uint64_t k = bytes > mtu ? (bytes + mtu - 1) / mtu : 1;
  uint32_t last = (uint32_t)(bytes - (k - 1) * mtu);
  double wire = k == 1
                    ? sim_data_wire_bytes(c, last, true)
                    : sim_data_wire_bytes(c, mtu, true) +
                          (double)(k - 2) * sim_data_wire_bytes(c, mtu, false) +
                          sim_data_wire_bytes(c, last, false);
  uint32_t big = k == 1 ? sim_data_wire_bytes(c, last, true)
                        : sim_data_wire_bytes(c, mtu, false);
  /* An ACK: BTH and AETH, no payload (the same size as a 4-byte
   * payload after the BTH alone). */
  uint32_t ack = sim_data_wire_bytes(c, 4, false);
  double prop, spb, bprop, bspb;
  sim_path_cost((struct sim *)s, src, dst, &prop, &spb);
  sim_path_cost((struct sim *)s, dst, src, &bprop, &bspb);
  double ps_per_byte = 8e12 / (double)s->nics[src].port.rate_bps;
  double back_ps_per_byte = 8e12 / (double)s->nics[dst].port.rate_bps;
  return (wire * ps_per_byte + prop + spb * big + ack * back_ps_per_byte +
          bprop + bspb * ack) /
         1e6;
}

/* Flow-size buckets of the slowdown table: powers of 4 from 4 KiB. */
#define NBUCKET 9
static int bucket_of(uint64_t bytes) {
  int b = 0;
  uint64_t lim = 4096;
  while (b < NBUCKET - 1 && bytes > lim) {
    lim *= 4;
    b++;
  }
  return b;
}

static void bucket_name(int b, char *out, size_t len) {
  static const char *const u[] = {"KiB", "MiB", "GiB"};
  uint64_t hi = 4096ull << (2 * b);
  uint64_t lo = b ? hi / 4 : 0;
  char x[16], y[16];
  int ui = 0;
  uint64_t h = hi >> 10, l = lo >> 10;
  while (h >= 1024 && ui < 2) {
    h >>= 10;
    ui++;
  }
  snprintf(y, sizeof y, "%llu%s", (unsigned long long)h, u[ui]);
  ui = 0;
  while (l >= 1024 && ui < 2) {
    l >>= 10;
    ui++;
  }
  snprintf(x, sizeof x, "%llu%s", (unsigned long long)l, u[ui]);
  if (b == NBUCKET - 1)
    snprintf(out, len, ">%s", x);
  else if (!b)
    snprintf(out, len, "<=%s", y);
  else
    snprintf(out, len, "%s-%s", x, y);
}

struct slow_row {
  char name[32];
  uint64_t n;
  double p50, p95, p99, max, mean;
};

/* Slowdown (FCT / ideal FCT) percentiles per size bucket; returns the
 * number of rows (non-empty buckets). */
static int slowdown_rows(const struct sim *s, struct slow_row *rows) {
  uint32_t n = sim_nflows(s);
  double *v[NBUCKET] = {0};
  size_t k[NBUCKET] = {0};
  int nr = 0;
  for (int b = 0; b < NBUCKET; b++)
    if (!(v[b] = malloc(sizeof(double) * (n ? n : 1))))
      goto out;
  for (uint32_t i = 0; i < n; i++) {
    const struct sim_flow *f = sim_flow(s, i);
    if (f->finish == SIM_NEVER)
      continue;
    int b = bucket_of(f->bytes);
    double fct = (double)(f->finish - f->start) / 1e6;
    v[b][k[b]++] = fct / sim_ideal_fct_us(s, f->src, f->dst, f->bytes);
  }
  for (int b = 0; b < NBUCKET; b++) {
    if (!k[b])
      continue;
    qsort(v[b], k[b], sizeof(double), cmp_d);
    struct slow_row *r = &rows[nr++];
    bucket_name(b, r->name, sizeof r->name);
    double sum = 0;
    for (size_t i = 0; i < k[b]; i++)
      sum += v[b][i];
    r->n = k[b];
    r->p50 = pct(v[b], k[b], 50);
    r->p95 = pct(v[b], k[b], 95);
    r->p99 = pct(v[b], k[b], 99);
    r->max = v[b][k[b] - 1];
    r->mean = sum / (double)k[b];
  }
out:
  for (int b = 0; b < NBUCKET; b++)
    free(v[b]);
  return nr;
}

static const char *const group_names[SIM_LINK_GROUPS] = {
    "host_up", "host_down", "fabric_up", "fabric_down", "core_up", "core_down"};

/* Link groups that exist in this topology. */
static int ngroups(const struct sim_cfg *c) {
  return c->topo.kind == SIM_TOPO_FAT_TREE ? 6 : 4;
}

/* A string (a file name, a reason) as JSON: quotes, backslashes and
 * control bytes escaped. */
static void json_str(FILE *f, const char *v) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

static const char *wl_kind_name(enum sim_workload_kind k) {
  static const char *const n[] = {"none",       "permutation", "incast",
                                  "all_to_all", "csv",         "collective"};
  return (unsigned)k < 6 ? n[k] : "?";
}

/* Every setting the run used, defaults and derived values filled in (the
 * spine count, the DCQCN preset, out_of_order's auto), in the scenario
 * file's terms, so that a result can be traced to what produced it. */
static void resolved_json(FILE *f, const struct sim *s) {
  const struct sim_cfg *c = sim_cfg(s);
  const struct sim_topo_cfg *t = &c->topo;
  static const char *const tier[3] = {"host", "fabric", "core"};
  fprintf(f,
          "  \"resolved\": {\"seed\": %llu, \"stop_time_us\": %s%.3f, "
          "\"sample_interval_us\": %.3f, \"series_flows\": %u,\n",
          (unsigned long long)c->seed, c->stop_time == SIM_NEVER ? "-" : "",
          c->stop_time == SIM_NEVER ? 1.0 : (double)c->stop_time / 1e6,
          (double)c->sample_interval / 1e6, c->series_flows);
  fprintf(f,
          "    \"topology\": {\"kind\": \"%s\", \"leaves\": %u, "
          "\"hosts_per_leaf\": %u, \"spines\": %u, \"oversubscription\": "
          "%g, \"k\": %u, \"rails\": %u, \"links\": {",
          t->kind == SIM_TOPO_FAT_TREE ? "fat_tree" : "leaf_spine", t->leaves,
          t->hosts_per_leaf, t->spines, t->oversubscription, t->k, t->rails);
  for (int i = 0; i < 3; i++)
    fprintf(f, "%s\"%s\": {\"rate_gbps\": %g, \"delay_us\": %g, \"loss\": %g}",
            i ? ", " : "", tier[i], (double)t->link[i].rate_bps / 1e9,
            (double)t->link[i].delay / 1e6, t->link[i].loss);
  fprintf(f, "}},\n");
  const struct sim_switch_cfg *w = &c->sw;
  fprintf(f,
          "    \"routing\": \"%s\",\n    \"switch\": {\"buffer\": %llu, "
          "\"queue_max\": %llu, \"dt_alpha\": %g, \"ecn\": {\"enabled\": "
          "%s, \"kmin\": %llu, "
          "\"kmax\": %llu, \"pmax\": %g}, \"pfc\": {\"enabled\": %s, "
          "\"priorities_mask\": %u, \"xoff\": %llu, \"xon\": %llu, "
          "\"headroom\": %lld}},\n",
          routing_name(c->routing), (unsigned long long)w->buffer_bytes,
          (unsigned long long)w->qmax_bytes, w->dt_alpha,
          w->ecn ? "true" : "false",
          (unsigned long long)w->kmin, (unsigned long long)w->kmax, w->pmax,
          w->pfc ? "true" : "false", w->pfc_prios, (unsigned long long)w->xoff,
          (unsigned long long)w->xon, (long long)w->headroom);
  if (c->fabric == SIM_FABRIC_IB)
    fprintf(f,
            "    \"fabric\": \"infiniband\",\n    \"infiniband\": "
            "{\"vl_buffer\": %llu, \"fc_latency_ns\": %g, \"fc_period_ns\": "
            "%g, \"grh\": %s, \"vls\": %u, \"sm\": {\"routing_engine\": "
            "\"%s\", \"lmc\": %u, \"max_wire_smps\": %u, "
            "\"smp_processing_ns\": %g, \"route_ns\": %g, "
            "\"sweep_interval_us\": %g, \"standby_nic\": %lld, "
            "\"polling_timeout_us\": %g, \"polling_retries\": %u, "
            "\"smp_timeout_us\": %g, \"smp_retries\": %u}, \"vl15_buffer\": "
            "%llu, \"cc\": "
            "{\"enabled\": %s, \"threshold\": %llu, \"marking_rate\": %u, "
            "\"ccti_increase\": %u, \"ccti_limit\": %u, \"ccti_timer_us\": "
            "%g, \"ird_step_ns\": %g}},\n",
            (unsigned long long)c->ib.vl_buffer, (double)c->ib.fc_latency / 1e3,
            (double)c->ib.fc_period / 1e3, c->ib.grh ? "true" : "false",
            c->ib.vls, sim_sm_engine_name(c->ib.sm.engine), c->ib.sm.lmc,
            c->ib.sm.max_wire_smps, (double)c->ib.sm.smp_proc / 1e3,
            (double)c->ib.sm.route_time / 1e3,
            (double)c->ib.sm.sweep_interval / 1e6,
            c->ib.sm.standby_nic == UINT32_MAX ? -1LL
                                               : (long long)c->ib.sm.standby_nic,
            (double)c->ib.sm.polling_timeout / 1e6, c->ib.sm.polling_retries,
            (double)c->ib.sm.smp_timeout / 1e6, c->ib.sm.smp_retries,
            (unsigned long long)c->ib.vl15_buffer, c->ib.cc.enabled ? "true" : "false",
            (unsigned long long)c->ib.cc.threshold, c->ib.cc.marking_rate,
            c->ib.cc.ccti_increase, c->ib.cc.ccti_limit,
            (double)c->ib.cc.ccti_timer / 1e6, (double)c->ib.cc.ird_step / 1e3);
  if (c->nfail) {
    fprintf(f, "    \"failures\": [");
    for (uint32_t i = 0; i < c->nfail; i++) {
      const struct sim_failure *x = &c->fail[i];
      fprintf(f, "%s{\"at_us\": %g, \"switch\": %u", i ? ", " : "",
              (double)x->at / 1e6, x->sw);
      if (x->kind == SIM_FAIL_LINK)
        fprintf(f, ", \"port\": %u", x->port);
      fprintf(f, ", \"up_after_us\": %g%s}", (double)x->up_after / 1e6,
              x->trap_lost ? ", \"trap_lost\": true" : "");
    }
    if (c->fabric == SIM_FABRIC_IB)
      fprintf(f, "],\n    \"recovery\": {\"trap_us\": %g, \"traps\": %s},\n",
              (double)c->recovery.trap / 1e6,
              c->recovery.traps ? "true" : "false");
    else
      fprintf(f,
              "],\n    \"recovery\": {\"detection_us\": %g, "
              "\"convergence_us\": %g},\n",
              (double)c->recovery.detection / 1e6,
              (double)c->recovery.convergence / 1e6);
  }
  if (c->fabric == SIM_FABRIC_IB) {
    for (int tb = 0; tb < 2; tb++) {
      const struct sim_vlarb_ent *e = tb ? c->ib.low : c->ib.high;
      uint32_t n = tb ? c->ib.nlow : c->ib.nhigh;
      fprintf(f, "%s\"vlarb_%s\": [", tb ? ", " : "    \"infiniband_vlarb\": {",
              tb ? "low" : "high");
      for (uint32_t i = 0; i < n; i++)
        fprintf(f, "%s[%u, %u]", i ? ", " : "", e[i].vl, e[i].weight);
      fprintf(f, "]");
    }
    fprintf(f, ", \"high_limit\": %u},\n", c->ib.high_limit);
  }
  const struct sim_transport_cfg *p = &c->tp;
  fprintf(f,
          "    \"transport\": {\"model\": \"%s\", \"mtu\": %u, \"window\": "
          "%u, \"ack_every\": %u, \"rto_us\": %g, \"retry_cnt\": %u, "
          "\"out_of_order\": %s, \"paths\": %u, \"ipv6\": %s, "
          "\"data_priority\": %u, \"control_priority\": %u, \"cc\": \"%s\"",
          p->model == SIM_HOST_SIMPLE ? "simple" : "uroce", p->mtu, p->window,
          p->ack_every, (double)p->rto / 1e6, p->retry_cnt,
          s->ooo ? "true" : "false", /* as sim_new resolved auto */
          p->paths, p->ipv6 ? "true" : "false", p->data_prio, p->ctrl_prio,
          p->cc == SIM_CC_DCQCN   ? "dcqcn"
          : p->cc == SIM_CC_SWIFT ? "swift"
                                  : "none");
  if (p->cc == SIM_CC_DCQCN) {
    const struct uroce_dcqcn_params *d = &p->dcqcn;
    fprintf(f,
            ", \"dcqcn\": {\"line_rate_gbps\": %g, \"min_rate_mbps\": %g, "
            "\"g\": %g, \"alpha_timer_us\": %g, \"rate_decrease_us\": %g, "
            "\"rate_increase_us\": %g, \"byte_counter\": %llu, "
            "\"rai_mbps\": %g, \"rhai_mbps\": %g, \"fast_recovery_steps\": "
            "%u, \"cnp_interval_us\": %g}",
            (double)d->line_rate_bps / 1e9, (double)d->min_rate_bps / 1e6, d->g,
            (double)d->alpha_timer_ns / 1e3, (double)d->rate_decrease_ns / 1e3,
            (double)d->rate_increase_ns / 1e3,
            (unsigned long long)d->byte_counter, (double)d->rai_bps / 1e6,
            (double)d->rhai_bps / 1e6, d->fast_recovery_steps,
            (double)d->cnp_interval_ns / 1e3);
  }
  fprintf(f, "},\n");
  const struct sim_workload_cfg *l = &c->wl;
  fprintf(f,
          "    \"workload\": {\"kind\": \"%s\", \"size\": %llu, "
          "\"size_distribution\": ",
          wl_kind_name(l->kind), (unsigned long long)l->bytes);
  json_str(f, l->dist.n ? l->dist_path : "");
  fprintf(f,
          ", \"senders\": %u, \"receiver\": %u, \"start_us\": %g, "
          "\"file\": ",
          l->incast_senders, l->incast_receiver, (double)l->start / 1e6);
  json_str(f, l->kind == SIM_WL_CSV ? l->csv_path : "");
  if (l->kind == SIM_WL_COLLECTIVE) {
    const struct sim_coll_cfg *k = &l->coll;
    fprintf(f,
            ", \"collective\": \"%s\", \"algo\": \"%s\", \"dtype\": %d, "
            "\"ranks\": %u, \"placement\": \"%s\", \"chunk\": %llu, "
            "\"slots\": %u, \"sizes\": [",
            coll_kind_name(k->kind), coll_algo_name(k->algo), k->dtype,
            sim_coll_ranks(s), k->placement ? "random" : "linear",
            (unsigned long long)(k->chunk_bytes ? k->chunk_bytes : 65536),
            k->slots ? k->slots : 8);
    for (uint32_t i = 0; i < k->nsizes; i++)
      fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)k->sizes[i]);
    fprintf(f, "]");
  }
  fprintf(f, "}},\n");
}

/* Mean and peak link utilisation per group over the samples. */
static void util_json(FILE *f, const struct sim *s) {
  const struct sim_series *r = sim_series(s);
  if (r->n < 2)
    return;
  int ng = ngroups(sim_cfg(s));
  double span = (double)(r->t[r->n - 1] - r->t[0]) / 1e12;
  fprintf(f, "  \"link_utilisation_pct\": {");
  for (int g = 0; g < ng; g++) {
    double cap = r->link_cap_bps[g], peak = 0;
    for (uint32_t i = 1; i < r->n; i++) {
      double dt = (double)(r->t[i] - r->t[i - 1]) / 1e12;
      if (dt <= 0 || cap <= 0)
        continue;
      double u = (double)(r->link_bytes[i][g] - r->link_bytes[i - 1][g]) * 8 /
                 dt / cap * 100;
      if (u > peak)
        peak = u;
    }
    double mean =
        cap > 0 && span > 0
            ? (double)(r->link_bytes[r->n - 1][g] - r->link_bytes[0][g]) * 8 /
                  span / cap * 100
            : 0;
    fprintf(f, "%s\"%s\": {\"mean\": %.3f, \"peak\": %.3f}", g ? ", " : "",
            group_names[g], mean, peak);
  }
  fprintf(f, "},\n");
  /* The largest per-stream and aggregate rates seen: never above the
   * link's (tests hold it to that). */
  double peak = 0, agg = 0;
  for (uint32_t i = 1; i < r->n; i++) {
    if (r->rate_n[i] && r->rate[i][4] > peak)
      peak = r->rate[i][4];
    double dt = (double)(r->t[i] - r->t[i - 1]) / 1e12;
    double a = dt > 0 ? (double)(r->rx_payload[i] - r->rx_payload[i - 1]) * 8 /
                            dt / 1e9
                      : 0;
    if (a > agg)
      agg = a;
  }
  fprintf(f,
          "  \"receive_rate_gbps\": {\"stream_peak\": %.3f, "
          "\"aggregate_peak\": %.3f},\n",
          peak, agg);
}

static void fct_json(FILE *f, const struct sim_summary *m) {
  fprintf(f,
          "  \"fct_us\": {\"min\": %.3f, \"p50\": %.3f, \"p90\": %.3f, "
          "\"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f, \"mean\": %.3f},\n",
          m->fct_us[0], m->fct_us[1], m->fct_us[2], m->fct_us[3], m->fct_us[4],
          m->fct_us[5], m->fct_us[6]);
  fprintf(f,
          "  \"flow_throughput_gbps\": {\"min\": %.3f, \"p1\": %.3f, "
          "\"p50\": %.3f, \"mean\": %.3f, \"max\": %.3f},\n",
          m->tput_gbps[0], m->tput_gbps[1], m->tput_gbps[2], m->tput_gbps[3],
          m->tput_gbps[4]);
}

static void slowdown_json(FILE *f, const struct sim *s) {
  struct slow_row rows[NBUCKET];
  int nr = slowdown_rows(s, rows);
  fprintf(f, "  \"fct_slowdown\": [");
  for (int i = 0; i < nr; i++)
    fprintf(f,
            "%s\n    {\"size\": \"%s\", \"flows\": %llu, \"p50\": %.4f, "
            "\"p95\": %.4f, \"p99\": %.4f, \"max\": %.4f, \"mean\": %.4f}",
            i ? "," : "", rows[i].name, (unsigned long long)rows[i].n,
            rows[i].p50, rows[i].p95, rows[i].p99, rows[i].max, rows[i].mean);
  fprintf(f, "],\n");
}

/* The flows that ended in error (only when some did), the first
 * FAILED_LISTED of them: when, why, and how far they got. */
#define FAILED_LISTED 64
static void failed_json(FILE *f, const struct sim *s) {
  uint32_t k = 0, n = sim_nflows(s);
  for (uint32_t i = 0; i < n; i++) {
    const struct sim_flow *fl = sim_flow(s, i);
    if (fl->failed == SIM_NEVER || k++ >= FAILED_LISTED)
      continue;
    fprintf(f,
            "%s\n    {\"id\": %u, \"src\": %u, \"dst\": %u, \"bytes\": "
            "%llu, \"acked\": %llu, \"start_us\": %.3f, \"failed_us\": "
            "%.3f, \"status\": \"%s\", \"status_code\": %u}",
            k > 1 ? "," : "  \"failed_flows\": [", fl->id, fl->src, fl->dst,
            (unsigned long long)fl->bytes, (unsigned long long)fl->acked,
            (double)fl->start / 1e6, (double)fl->failed / 1e6,
            uroce_wc_status_str(fl->status), fl->status);
  }
  if (k)
    fprintf(f, "],\n  \"failed_flows_listed\": %u,\n",
            k < FAILED_LISTED ? k : FAILED_LISTED);
}

/* Failures and recoveries, and the flows they made resend. */
static void fail_json(FILE *f, const struct sim *s) {
  uint32_t n;
  const struct sim_fail_result *r = sim_fail_results(s, &n);
  if (!sim_cfg(s)->nfail)
    return;
  uint64_t resent = 0;
  for (uint32_t i = 0; i < sim_nflows(s); i++)
    resent += sim_flow(s, i)->retx_pkts + sim_flow(s, i)->rsp_retx_pkts > 0;
  fprintf(f,
          "  \"failures\": {\"packets_lost\": %llu, "
          "\"flows_retransmitting\": %llu, \"events\": [",
          (unsigned long long)sim_stats(s)->drops_link_down,
          (unsigned long long)resent);
  /* Which sweep saw each change, where a trap may not have (InfiniBand
   * with traps off or lost). */
  const struct sim_cfg *c = sim_cfg(s);
  bool by = false;
  for (uint32_t i = 0; i < c->nfail && c->fabric == SIM_FABRIC_IB; i++)
    by |= !c->recovery.traps || c->fail[i].trap_lost;
  /* or where a standby SM may take over */
  by |= c->fabric == SIM_FABRIC_IB && c->ib.sm.standby_nic != UINT32_MAX;
  for (uint32_t i = 0; i < n; i++) {
    const struct sim_fail_result *e = &r[i];
    char what[64];
    if (e->f->kind == SIM_FAIL_LINK)
      snprintf(what, sizeof what, "link of switch %u port %u", e->f->sw,
               (unsigned)e->f->port);
    else
      snprintf(what, sizeof what, "switch %u", e->f->sw);
    fprintf(f,
            "%s\n    {\"at_us\": %.3f, \"what\": \"%s\", \"state\": \"%s\", "
            "\"recovery_us\": %.3f, \"detect_us\": %.3f, \"sweep_us\": "
            "%.3f, \"compute_us\": %.3f, \"program_us\": %.3f, "
            "\"packets_lost\": %llu, \"last_loss_us\": %.3f",
            i ? "," : "", (double)e->at / 1e6, what, e->up ? "up" : "down",
            e->installed ? (double)(e->installed - e->at) / 1e6 : -1.0,
            (double)e->detect / 1e6, (double)e->sweep / 1e6,
            (double)e->compute / 1e6, (double)e->program / 1e6,
            (unsigned long long)e->lost_pkts,
            e->last_loss == SIM_NEVER ? -1.0 : (double)e->last_loss / 1e6);
    if (by)
      fprintf(f, ", \"noticed_by\": \"%s\"", sim_noticed_name(e->noticed));
    fprintf(f, "}");
  }
  fprintf(f, "]},\n");
}

static int write_summary(const struct sim *s, const char *dir, bool repro,
                         char *err, size_t errlen) {
  FILE *f = open_in(dir, "summary.json", err, errlen);
  if (!f)
    return -1;
  const struct sim_cfg *c = sim_cfg(s);
  const struct sim_stats *st = sim_stats(s);
  struct sim_summary m;
  sim_summarize(s, &m);
  fprintf(f, "{\n  \"uroce_version\": \"%s\",\n", uroce_version());
  fprintf(f,
          "  \"scenario\": {\"topology\": \"%s\", \"hosts\": %u, \"nics\": "
          "%u, \"switches\": %u, \"routing\": \"%s\", \"cc\": \"%s\", "
          "\"pfc\": %s, \"ecn\": %s, \"mtu\": %u, \"seed\": %llu},\n",
          c->topo.kind == SIM_TOPO_FAT_TREE ? "fat_tree" : "leaf_spine",
          s->nhosts, s->nnics, s->nswitches, routing_name(c->routing),
          c->tp.cc == SIM_CC_DCQCN   ? "dcqcn"
          : c->tp.cc == SIM_CC_SWIFT ? "swift"
                                     : "none",
          c->sw.pfc && c->fabric == SIM_FABRIC_ROCE ? "true" : "false",
          c->sw.ecn ? "true" : "false", c->tp.mtu, (unsigned long long)c->seed);
  resolved_json(f, s);
  if (!m.coll_sizes) {
    fprintf(f,
            "  \"flows\": {\"count\": %llu, \"done\": %llu, \"bytes\": "
            "%llu",
            (unsigned long long)m.flows, (unsigned long long)m.done,
            (unsigned long long)m.bytes);
    if (m.failed)
      fprintf(f, ", \"failed\": %llu", (unsigned long long)m.failed);
    fprintf(f, "},\n");
    failed_json(f, s);
    fct_json(f, &m);
    slowdown_json(f, s);
  }
  fprintf(f,
          "  \"completion_us\": %.3f,\n  \"aggregate_goodput_gbps\": %.3f,\n",
          m.completion_us, m.goodput_gbps);
  util_json(f, s);
  uint64_t dl[SIM_TIERS];
  for (int t = 0; t < SIM_TIERS; t++)
    dl[t] = st->drops_buffer[t] + st->drops_lossless[t] + st->drops_trim[t];
  fprintf(f,
          "  \"drops\": {\"total\": %llu, \"wire\": %llu, "
          "\"lossless_overflow\": %llu},\n",
          (unsigned long long)(m.drops + m.drops_wire),
          (unsigned long long)m.drops_wire,
          (unsigned long long)(st->drops_lossless[1] + st->drops_lossless[2] +
                               st->drops_lossless[3]));
  tiers_json(f, c, "drops_by_tier", dl, ",");
  if (c->sw.trim)
    trim_json(f, s);
  tiers_json(f, c, "pfc_pause_frames", st->pause_frames, ",");
  uint64_t pu[SIM_TIERS];
  for (int t = 0; t < SIM_TIERS; t++)
    pu[t] = st->paused_time[t] / SIM_US;
  fprintf(f, "  \"nic_paused_us\": %llu,\n", (unsigned long long)pu[0]);
  tiers_json(f, c, "port_paused_us", pu, ",");
  tiers_json(f, c, "ecn_marks", st->ecn_marks, ",");
  tiers_json(f, c, "max_queue_bytes", st->max_queue, ",");
  tiers_json(f, c, "max_buffer_bytes", st->max_buffer, ",");
  if (c->fabric == SIM_FABRIC_IB) {
    uint64_t cw[SIM_TIERS];
    for (int t = 0; t < SIM_TIERS; t++)
      cw[t] = st->credit_wait[t] / SIM_NS;
    fprintf(f,
            "  \"infiniband\": {\"fc_packets\": %llu, "
            "\"fc_periodic_packets\": %llu, \"credit_overruns\": "
            "%llu, \"nic_max_vl_input_bytes\": %llu, \"fecn_marks\": "
            "%llu, \"becns\": %llu},\n",
            (unsigned long long)st->fc_pkts,
            (unsigned long long)st->fc_periodic,
            (unsigned long long)st->credit_overruns,
            (unsigned long long)st->max_vl_in[0],
            (unsigned long long)st->fecn_marks, (unsigned long long)st->becns);
    fprintf(f, "  \"vl_tx_bytes\": [");
    for (int v = 0; v < c->ib.vls; v++)
      fprintf(f, "%s%llu", v ? ", " : "",
              (unsigned long long)st->vl_tx_bytes[v]);
    fprintf(f, "],\n");
    fprintf(f,
            "  \"vl15\": {\"packets\": %llu, \"bytes\": %llu, \"drops\": "
            "%llu, \"lost\": %llu},\n",
            (unsigned long long)st->vl15_pkts,
            (unsigned long long)st->vl15_bytes,
            (unsigned long long)st->vl15_drops,
            (unsigned long long)st->vl15_lost);
    tiers_json(f, c, "max_vl_input_bytes", st->max_vl_in, ",");
    struct sim_sm_info sm;
    if (sim_sm_info(s, &sm) == 0) {
      fprintf(f,
              "  \"subnet_manager\": {\"routing_engine\": \"%s\", \"lids\": "
              "%u, \"lmc\": %u, \"smps\": %llu, \"discover_us\": %.3f, "
              "\"compute_us\": %.3f, \"program_us\": %.3f, "
              "\"deadlock_free\": %s, \"cdg_channels\": %llu, "
              "\"cdg_edges\": %llu, \"max_up_imbalance\": %u, "
              "\"drops_noroute\": %llu",
              sm.engine, sm.lids, sm.lmc, (unsigned long long)sm.smps,
              (double)sm.discover / 1e6, (double)sm.compute / 1e6,
              (double)sm.program / 1e6, sm.deadlock_free ? "true" : "false",
              (unsigned long long)sm.cdg_channels,
              (unsigned long long)sm.cdg_edges, sm.max_imbalance,
              (unsigned long long)st->drops_noroute);
      if (sm.sweeps) /* sweeps after the start, as packets */
        fprintf(f,
                ", \"sweeps\": %u, \"sweep_smps\": %llu, \"smp_timeouts\": "
                "%llu, \"traps\": %llu, \"last_discover_us\": %.3f, "
                "\"last_program_us\": %.3f",
                sm.sweeps, (unsigned long long)sm.sweep_smps,
                (unsigned long long)sm.smp_timeouts,
                (unsigned long long)sm.traps, (double)sm.last_discover / 1e6,
                (double)sm.last_program / 1e6);
      if (c->ib.sm.standby_nic != UINT32_MAX) {
        /* With a standby: where the master runs, its SMInfo polls (VL15
         * packets), when it took over. */
        fprintf(f,
                ", \"standby_nic\": %u, \"master_nic\": %u, "
                "\"standby_polls\": %llu, \"standby_polls_unanswered\": %llu",
                c->ib.sm.standby_nic, sm.master_nic,
                (unsigned long long)sm.standby_polls,
                (unsigned long long)sm.standby_polls_unanswered);
        if (sm.takeovers)
          fprintf(f, ", \"standby_took_over_us\": %.3f",
                  (double)sm.took_over / 1e6);
      }
      fprintf(f, "},\n");
    }
    tiers_json(f, c, "port_credit_wait_ns", cw, ",");
  }
  fail_json(f, s);
  coll_json(f, s);
  fprintf(f,
          "  \"transport\": {\"data_pkts\": %llu, \"ctrl_pkts\": %llu, "
          "\"retransmitted_pkts\": %llu, \"timeouts\": %llu, \"naks\": %llu, "
          "\"cnps\": %llu},\n",
          (unsigned long long)st->data_pkts, (unsigned long long)st->ctrl_pkts,
          (unsigned long long)st->retx_pkts, (unsigned long long)st->timeouts,
          (unsigned long long)st->naks, (unsigned long long)st->cnps);
  if (sim_series(s)->stopped != SIM_NEVER) /* the time series end early */
    fprintf(f, "  \"series_stopped_us\": %.3f,\n",
            (double)sim_series(s)->stopped / 1e6);
  fprintf(f, "  \"sim_time_us\": %.3f,\n  \"events\": %llu",
          (double)st->now / 1e6, (unsigned long long)st->events);
  if (!repro)
    fprintf(f, ",\n  \"wall_s\": %.3f,\n  \"events_per_s\": %.0f", st->wall_s,
            st->wall_s > 0 ? (double)st->events / st->wall_s : 0);
  fprintf(f, "\n}\n");
  return fclose(f) ? -1 : 0;
}

static int write_flows(const struct sim *s, const char *dir, char *err,
                       size_t errlen) {
  uint32_t ncr;
  if (sim_coll_results(s, &ncr))
    return 0; /* a collective has no workload flows; coll.csv has it */
  FILE *f = open_in(dir, "flows.csv", err, errlen);
  if (!f)
    return -1;
  uint32_t n = sim_nflows(s);
  /* status: done, failed (its QP failed: failed_us and the completion
   * status say when and why) or unfinished (the run stopped first). */
  fprintf(f, "id,src,dst,bytes,start_us,finish_us,fct_us,gbps,tx_pkts,"
             "retx_pkts,ideal_fct_us,slowdown,status,failed_us,error\n");
  double *fct = malloc(sizeof(double) * (n ? n : 1));
  size_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    const struct sim_flow *fl = sim_flow(s, i);
    bool done = fl->finish != SIM_NEVER;
    double us = done ? (double)(fl->finish - fl->start) / 1e6 : -1;
    double ideal = sim_ideal_fct_us(s, fl->src, fl->dst, fl->bytes);
    bool failed = fl->failed != SIM_NEVER;
    fprintf(f,
            "%u,%u,%u,%llu,%.3f,%.3f,%.3f,%.3f,%llu,%llu,%.3f,%.4f,%s,%.3f,"
            "%s\n",
            fl->id, fl->src, fl->dst, (unsigned long long)fl->bytes,
            (double)fl->start / 1e6, done ? (double)fl->finish / 1e6 : -1, us,
            done && us > 0 ? (double)fl->bytes * 8 / (us * 1e3) : 0,
            (unsigned long long)(fl->tx_pkts + fl->rsp_tx_pkts),
            (unsigned long long)(fl->retx_pkts + fl->rsp_retx_pkts), ideal,
            done ? us / ideal : -1,
            done     ? "done"
            : failed ? "failed"
                     : "unfinished",
            failed ? (double)fl->failed / 1e6 : -1,
            failed ? uroce_wc_status_str(fl->status) : "");
    if (done && fct)
      fct[k++] = us;
  }
  fclose(f);
  f = open_in(dir, "fct_cdf.csv", err, errlen);
  if (!f) {
    free(fct);
    return -1;
  }
  fprintf(f, "fct_us,cdf\n");
  if (fct) {
    qsort(fct, k, sizeof(double), cmp_d);
    for (size_t i = 0; i < k; i++)
      fprintf(f, "%.3f,%.6f\n", fct[i], (double)(i + 1) / (double)k);
  }
  free(fct);
  fclose(f);
  struct slow_row rows[NBUCKET];
  int nr = slowdown_rows(s, rows);
  f = open_in(dir, "fct_slowdown.csv", err, errlen);
  if (!f)
    return -1;
  fprintf(f, "bucket,flows,p50,p95,p99,max,mean\n");
  for (int i = 0; i < nr; i++)
    fprintf(f, "%s,%llu,%.4f,%.4f,%.4f,%.4f,%.4f\n", rows[i].name,
            (unsigned long long)rows[i].n, rows[i].p50, rows[i].p95,
            rows[i].p99, rows[i].max, rows[i].mean);
  return fclose(f) ? -1 : 0;
}

/* A chart that has nothing to show says so instead of drawing an empty
 * 0-1 frame. */
static void empty_plot(FILE *f, const char *png, const char *title,
                       const char *what) {
  fprintf(f,
          "set output '%s'\nset title '%s'\nunset xtics\nunset ytics\n"
          "unset border\nunset xlabel\nunset ylabel\nunset key\n"
          "set xrange [0:1]\nset yrange [0:1]\n"
          "set label 1 '%s' at graph 0.5,0.5 center font ',18'\n"
          "plot -1 notitle\nunset label 1\nset xtics\nset ytics\nset border\n"
          "set key outside right\nset xrange [*:*]\nset yrange [*:*]\n\n",
          png, title, what);
}

/* What the series hold beyond their numbers, for the plot script. */
struct series_facts {
  bool rates, pauses, ecn, cnps, portq, cc;
  double max_rate_gbps, max_agg_gbps;
  uint32_t top[8], ntop; /* switch ports with the largest queues */
  char top_names[8 * 48];
  double win_lo_us, win_hi_us; /* rate windows used */
};

static void port_name(const struct sim *s, uint32_t j, char *out, size_t len) {
  int tier;
  uint32_t sw, port;
  bool down;
  sim_port_info(s, j, &tier, &sw, &port, &down);
  snprintf(out, len, "%s%u.p%u(%s)", sim_tier_name(sim_cfg(s), tier), sw, port,
           down ? "down" : "up");
}

static int write_series(const struct sim *s, const char *dir,
                        struct series_facts *sf, char *err, size_t errlen) {
  const struct sim_series *r = sim_series(s);
  const struct sim_cfg *c = sim_cfg(s);
  int top = c->topo.kind == SIM_TOPO_FAT_TREE ? 3 : 2, ng = ngroups(c);
  memset(sf, 0, sizeof(*sf));
  const char *names[] = {
      "queues.csv",      "pfc.csv", "throughput.csv", "flows_throughput.csv",
      "utilisation.csv", "ecn.csv", "port_queues.csv"};
  FILE *f[7] = {0};
  for (int i = 0; i < 7; i++)
    if (!(f[i] = open_in(dir, names[i], err, errlen))) {
      for (int j = 0; j < i; j++)
        fclose(f[j]);
      return -1;
    }
  FILE *q = f[0], *p = f[1], *t = f[2], *ft = f[3], *u = f[4], *e = f[5],
       *pq = f[6];
  fprintf(q, "time_us");
  fprintf(p, "time_us");
  fprintf(e, "time_us");
  for (int i = 1; i <= top; i++) {
    fprintf(q, ",%s_bytes", sim_tier_name(c, i));
    fprintf(p, ",%s_pauses", sim_tier_name(c, i));
    fprintf(e, ",%s_ecn_marks", sim_tier_name(c, i));
  }
  for (int i = 0; i <= top; i++)
    fprintf(p, ",%s_ports_paused", sim_tier_name(c, i));
  fprintf(e, ",cnps,marks_per_us,cnps_per_us\n");
  fprintf(q, "\n");
  fprintf(p, "\n");
  fprintf(t, "time_us,aggregate_gbps,min_gbps,p10_gbps,p50_gbps,p90_gbps,"
             "max_gbps,mean_gbps,streams,window_us\n");
  fprintf(ft, "time_us");
  for (uint32_t fl = 0; fl < r->nflows; fl++)
    fprintf(ft, ",flow%u_gbps", fl);
  fprintf(ft, "\n");
  fprintf(u, "time_us");
  for (int g = 0; g < ng; g++)
    fprintf(u, ",%s_pct", group_names[g]);
  fprintf(u, "\n");
  /* The ports whose queues grew largest, for port_queues.csv. */
  uint32_t *mx = r->port_q_n ? calloc(r->nports, sizeof(*mx)) : 0;
  if (mx) {
    for (uint32_t i = 0; i < r->port_q_n; i++)
      for (uint32_t j = 0; j < r->nports; j++)
        if (r->port_q[(uint64_t)i * r->nports + j] > mx[j])
          mx[j] = r->port_q[(uint64_t)i * r->nports + j];
    while (sf->ntop < 8) {
      uint32_t best = UINT32_MAX;
      for (uint32_t j = 0; j < r->nports; j++)
        if (mx[j] && (best == UINT32_MAX || mx[j] > mx[best]))
          best = j;
      if (best == UINT32_MAX)
        break;
      sf->top[sf->ntop++] = best;
      mx[best] = 0;
    }
    free(mx);
  }
  sf->portq = sf->ntop > 0;
  fprintf(pq, "time_us");
  for (uint32_t k = 0; k < sf->ntop; k++) {
    char nm[40];
    port_name(s, sf->top[k], nm, sizeof nm);
    fprintf(pq, ",%s", nm);
    size_t l = strlen(sf->top_names);
    snprintf(sf->top_names + l, sizeof sf->top_names - l, "%s%s", k ? " " : "",
             nm);
  }
  fprintf(pq, "\n");
  for (uint32_t i = 0; i < r->n; i++) {
    double us = (double)r->t[i] / 1e6;
    fprintf(q, "%.3f", us);
    fprintf(p, "%.3f", us);
    fprintf(e, "%.3f", us);
    for (int j = 1; j <= top; j++) {
      fprintf(q, ",%llu", (unsigned long long)r->queue[i][j]);
      fprintf(p, ",%llu", (unsigned long long)r->pauses[i][j]);
      fprintf(e, ",%llu", (unsigned long long)r->ecn[i][j]);
      if (r->pauses[i][j])
        sf->pauses = true;
      if (r->ecn[i][j])
        sf->ecn = true;
    }
    for (int j = 0; j <= top; j++) {
      fprintf(p, ",%u", r->paused_ports[i][j]);
      if (r->paused_ports[i][j])
        sf->pauses = true;
    }
    if (r->cnps[i])
      sf->cnps = true;
    fprintf(q, "\n");
    fprintf(p, "\n");
    if (i < r->port_q_n) {
      fprintf(pq, "%.3f", us);
      for (uint32_t k = 0; k < sf->ntop; k++)
        fprintf(pq, ",%u", r->port_q[(uint64_t)i * r->nports + sf->top[k]]);
      fprintf(pq, "\n");
    }
    if (!i) {
      fprintf(e, ",%llu,0,0\n", (unsigned long long)r->cnps[i]);
      continue;
    }
    double dt = (double)(r->t[i] - r->t[i - 1]) / 1e12;
    if (dt <= 0) {
      fprintf(e, ",%llu,0,0\n", (unsigned long long)r->cnps[i]);
      continue;
    }
    uint64_t m1 = 0, m0 = 0;
    for (int j = 1; j <= top; j++) {
      m1 += r->ecn[i][j];
      m0 += r->ecn[i - 1][j];
    }
    fprintf(e, ",%llu,%.4f,%.4f\n", (unsigned long long)r->cnps[i],
            (double)(m1 - m0) / (dt * 1e6),
            (double)(r->cnps[i] - r->cnps[i - 1]) / (dt * 1e6));
    double agg =
        (double)(r->rx_payload[i] - r->rx_payload[i - 1]) * 8 / dt / 1e9;
    if (agg > sf->max_agg_gbps)
      sf->max_agg_gbps = agg;
    fprintf(t, "%.3f,%.3f", us, agg);
    for (int k = 0; k < SIM_RATE_Q; k++)
      fprintf(t, ",%.3f", r->rate[i][k]);
    fprintf(t, ",%u,%.3f\n", r->rate_n[i], (double)r->rate_win[i] / 1e6);
    if (r->rate_n[i]) {
      double w = (double)r->rate_win[i] / 1e6;
      if (!sf->rates || w < sf->win_lo_us)
        sf->win_lo_us = w;
      if (!sf->rates || w > sf->win_hi_us)
        sf->win_hi_us = w;
      sf->rates = true;
      if (r->rate[i][4] > sf->max_rate_gbps)
        sf->max_rate_gbps = r->rate[i][4];
    }
    fprintf(ft, "%.3f", us);
    for (uint32_t fl = 0; fl < r->nflows; fl++) {
      uint64_t a = r->acked[(uint64_t)i * r->nflows + fl],
               b = r->acked[(uint64_t)(i - 1) * r->nflows + fl];
      fprintf(ft, ",%.3f", (double)(a - b) * 8 / dt / 1e9);
    }
    fprintf(ft, "\n");
    fprintf(u, "%.3f", us);
    for (int g = 0; g < ng; g++) {
      double cap = r->link_cap_bps[g];
      double b = (double)(r->link_bytes[i][g] - r->link_bytes[i - 1][g]);
      fprintf(u, ",%.3f", cap > 0 ? b * 8 / dt / cap * 100 : 0);
    }
    fprintf(u, "\n");
  }
  int rc = 0;
  for (int i = 0; i < 7; i++)
    if (fclose(f[i]))
      rc = -1;
  if (rc)
    snprintf(err, errlen, "%s: writing the series failed", dir);
  /* The pause trace: every PFC frame as it took effect. */
  FILE *pe = open_in(dir, "pause_events.csv", err, errlen);
  if (!pe)
    return -1;
  bool full;
  uint32_t np = sim_pause_count(s, &full);
  fprintf(pe, "time_us,node,port,prio,event\n");
  for (uint32_t i = 0; i < np; i++) {
    struct sim_pause_rec pr;
    sim_pause_get(s, i, &pr);
    fprintf(pe, "%.3f,%s%u,%u,%u,%s\n", pr.t_us, pr.nic ? "nic" : "sw", pr.node,
            pr.port, pr.prio, pr.xoff ? "xoff" : "xon");
  }
  if (full)
    fprintf(pe, "# truncated after %u events\n", np);
  if (fclose(pe) || rc)
    return -1;
  if (!r->cc_rate)
    return 0;
  FILE *cf = open_in(dir, "cc_rate.csv", err, errlen);
  if (!cf)
    return -1;
  fprintf(cf, "time_us,min_gbps,p10_gbps,p50_gbps,p90_gbps,max_gbps,"
              "mean_gbps,flows\n");
  for (uint32_t i = 0; i < r->n; i++) {
    if (!r->cc_n[i])
      continue; /* no flow running: no rate to show */
    fprintf(cf, "%.3f", (double)r->t[i] / 1e6);
    for (int k = 0; k < SIM_RATE_Q; k++)
      fprintf(cf, ",%.4f", r->cc_rate[i][k]);
    fprintf(cf, ",%u\n", r->cc_n[i]);
  }
  sf->cc = true;
  return fclose(cf) ? -1 : 0;
}

/* coll.csv, and the busbw plot's commands in plots.gp. */
static int write_coll(const struct sim *s, const char *dir, FILE *gp, char *err,
                      size_t errlen) {
  uint32_t n;
  const struct sim_coll_result *r = sim_coll_results(s, &n);
  if (!r)
    return 0;
  FILE *f = open_in(dir, "coll.csv", err, errlen);
  if (!f)
    return -1;
  fprintf(f, "bytes,count,algo,time_us,algbw_GBps,busbw_GBps,bound_us,"
             "bound_busbw_GBps,ratio,bw_bound_us,chain_bound_us\n");
  for (uint32_t i = 0; i < n; i++)
    fprintf(f, "%llu,%llu,%s,%.3f,%.4f,%.4f,%.3f,%.4f,%.4f,%.3f,%.3f\n",
            (unsigned long long)r[i].bytes, (unsigned long long)r[i].count,
            coll_algo_name(r[i].algo), (double)r[i].time / 1e6, r[i].algbw_gbs,
            r[i].busbw_gbs, r[i].bound_us, r[i].bound_busbw_gbs, r[i].ratio,
            r[i].bw_bound_us, r[i].chain_bound_us);
  if (fclose(f))
    return -1;
  if (!n) {
    empty_plot(gp, "coll_busbw.png", "Bus bandwidth", "no size finished");
    return 0;
  }
  uint64_t lo = r[0].bytes, hi = r[0].bytes;
  /* the axis spans the data too: servers' ranks can beat one link */
  double top = sim_coll_link_gbps(s) / 8;
  for (uint32_t i = 0; i < n; i++) {
    lo = r[i].bytes < lo ? r[i].bytes : lo;
    hi = r[i].bytes > hi ? r[i].bytes : hi;
    top = r[i].busbw_gbs > top ? r[i].busbw_gbs : top;
    top = r[i].bound_busbw_gbs > top ? r[i].bound_busbw_gbs : top;
  }
  const struct sim_coll_cfg *cc = &sim_cfg(s)->wl.coll;
  char servers[96] = "";
  if (cc->ranks_per_host > 1)
    snprintf(servers, sizeof servers, " (servers of %u, %u NICs each)",
             cc->ranks_per_host, sim_coll_nics_per_host(cc));
  fprintf(gp,
          "set output 'coll_busbw.png'\nset title '%s, %u ranks%s: bus "
          "bandwidth and its bound%s'\n"
          "set xlabel 'size'\nset ylabel 'busbw (GB/s)'\n"
          "set logscale x 2\nset format x '%%.0b %%BB'\nset xrange [%g:%g]\n"
          "set yrange [0:%.4f]\nset key bottom right\n"
          "plot 'coll.csv' every ::1 using 1:6 with linespoints lw 2 pt 7 "
          "title 'simulated', 'coll.csv' every ::1 using 1:8 with linespoints "
          "lw 2 dt 2 pt 6 title 'bound', %.4f with lines dt 3 lc rgb 'gray40' "
          "title 'one host link goodput'\n"
          "unset logscale x\nset format x '%%g'\nset xrange [*:*]\n"
          "set yrange [*:*]\nset key outside right\n\n",
          coll_kind_name(cc->kind), sim_coll_ranks(s), servers,
          servers[0] ? "" : " (what no fabric can beat)", (double)lo / 1.4,
          (double)hi * 1.4, top * 1.1, sim_coll_link_gbps(s) / 8);
  return 0;
}

/* FCTs spread over less than a decade are read better on a linear axis;
 * either way the axis spans the data, not whole decades. */
static void fct_plot(const struct sim *s, FILE *f) {
  struct sim_summary m;
  sim_summarize(s, &m);
  if (!m.done) {
    empty_plot(f, "fct_cdf.png", "Flow completion time CDF",
               "no flow finished");
    return;
  }
  double lo = m.fct_us[0], hi = m.fct_us[5];
  bool logx = hi > 10 * lo;
  double l = logx ? lo / 1.15 : lo - (hi - lo) * 0.05;
  double h = logx ? hi * 1.15 : hi + (hi - lo) * 0.05;
  if (h <= l) {
    l = lo * 0.95;
    h = hi * 1.05 + 1e-3;
  }
  if (l < 0)
    l = 0;
  /* The CDF is of the flows that finished: the title says how many of
   * all, and how many failed. */
  char who[96], of[32] = "", failed[32] = "";
  if (m.done < m.flows)
    snprintf(of, sizeof of, " of %llu", (unsigned long long)m.flows);
  if (m.failed)
    snprintf(failed, sizeof failed, ", %llu failed",
             (unsigned long long)m.failed);
  snprintf(who, sizeof who, "%llu%s flows%s", (unsigned long long)m.done, of,
           failed);
  fprintf(f,
          "set output 'fct_cdf.png'\nset title 'Flow completion time CDF "
          "(%s; p50 %.1f us, p99 %.1f us)'\nset xlabel 'FCT (us)'\n"
          "set ylabel 'fraction of flows'\n%sset xrange [%g:%g]\n"
          "set yrange [0:1.02]\nset key bottom right\n"
          "plot 'fct_cdf.csv' every ::1 using 1:2 with steps lw 2 title "
          "'FCT'\nunset logscale x\nset xrange [*:*]\nset yrange [*:*]\n"
          "set key outside right\n\n",
          who, m.fct_us[1], m.fct_us[3],
          logx ? "set logscale x\n" : "unset logscale x\n", l, h);
  fprintf(f,
          "set output 'fct_slowdown.png'\nset title 'FCT slowdown (FCT / FCT "
          "alone in the fabric) by flow size'\nset xlabel 'flow size'\n"
          "set ylabel 'slowdown'\nset logscale y\nset yrange [0.9:*]\n"
          "set xrange [-0.5:*]\nset offsets 0, 0.5, 0, 0\n"
          "set xtics rotate by -25\nset bmargin 5\n"
          "plot 'fct_slowdown.csv' every ::1 using 0:3:xtic(1) with "
          "linespoints lw 2 pt 7 title 'p50', '' every ::1 using 0:5 with "
          "linespoints lw 2 pt 5 title 'p99', '' every ::1 using 0:6 with "
          "linespoints lw 1 dt 2 pt 1 title 'max'\n"
          "unset logscale y\nset yrange [*:*]\nset xrange [*:*]\n"
          "set offsets 0, 0, 0, 0\nset xtics norotate autofreq\n"
          "unset bmargin\n\n");
}

static void throughput_plot(const struct sim *s, FILE *f,
                            const struct series_facts *sf) {
  if (!sf->rates && sf->max_agg_gbps <= 0) {
    empty_plot(f, "throughput.png", "Receive throughput",
               "no data received in the sampled intervals");
    return;
  }
  const char *who = s->coll ? "rank" : "flow";
  char win[48];
  if (sf->win_hi_us - sf->win_lo_us < 0.5)
    snprintf(win, sizeof win, "%.0f", sf->win_hi_us);
  else
    snprintf(win, sizeof win, "%.0f-%.0f", sf->win_lo_us, sf->win_hi_us);
  double ytop = sf->max_rate_gbps > 0 ? sf->max_rate_gbps * 1.1 : 1;
  double atop = sf->max_agg_gbps > 0 ? sf->max_agg_gbps * 1.1 : 1;
  bool tb = atop > 5000; /* thousands of Gb/s read better as Tb/s */
  fprintf(f,
          "set output 'throughput.png'\nset terminal pngcairo size 900,760 "
          "noenhanced\nset multiplot layout 2,1 title 'Receive throughput: "
          "payload counted as it crosses the last link'\n"
          "set xlabel 'time (us)'\nset ylabel '%s'\nset yrange [0:%g]\n"
          "set title 'all NICs together'\n"
          "plot 'throughput.csv' every ::1 using 1:($2/%g) with lines lw 2 "
          "title 'aggregate'\nset ylabel 'Gb/s'\n",
          tb ? "Tb/s" : "Gb/s", tb ? atop / 1000 : atop, tb ? 1000.0 : 1.0);
  fprintf(f,
          "set title 'per %s, over the active %ss (rates over %s us "
          "windows)'\nset yrange [0:%g]\n"
          "plot 'throughput.csv' every ::1 using 1:3:7 with filledcurves "
          "fc rgb '#d8e4f0' title 'min-max', '' every ::1 using 1:4:6 with "
          "filledcurves fc rgb '#8fb1d6' title 'p10-p90', '' every ::1 using "
          "1:5 with lines lw 2 lc rgb '#1f4e8c' title 'p50', '' every ::1 "
          "using 1:8 with lines lw 1 dt 2 lc rgb 'black' title 'mean'\n"
          "unset multiplot\nset terminal pngcairo size 900,560 noenhanced\n"
          "set yrange [*:*]\n\n",
          who, who, win, ytop);
}

static int write_plots(const struct sim *s, const char *dir,
                       const struct series_facts *sf, char *err,
                       size_t errlen) {
  FILE *f = open_in(dir, "plots.gp", err, errlen);
  if (!f)
    return -1;
  const struct sim_cfg *c = sim_cfg(s);
  int top = c->topo.kind == SIM_TOPO_FAT_TREE ? 3 : 2;
  /* The terminal first: every plot below writes a PNG. */
  fprintf(f, "# gnuplot script written by uroce sim; run it in this folder.\n"
             "set datafile separator ','\n"
             "set terminal pngcairo size 900,560 noenhanced\n"
             "set key outside right\nset grid\nset style data lines\n\n");
  if (write_coll(s, dir, f, err, errlen)) {
    fclose(f);
    return -1;
  }
  if (!s->coll)
    fct_plot(s, f);
  if (!c->sample_interval || sim_series(s)->n < 2)
    return fclose(f) ? -1 : 0;
  throughput_plot(s, f, sf);
  fprintf(f, "set output 'utilisation.png'\nset title 'Link utilisation by "
             "tier and direction (wire bytes / capacity)'\nset xlabel "
             "'time (us)'\nset ylabel 'percent'\nset yrange [0:*<105]\nplot ");
  for (int g = 0; g < ngroups(c); g++)
    fprintf(f, "%s'utilisation.csv' every ::1 using 1:%d lw 2 title '%s'",
            g ? ", " : "", g + 2, group_names[g]);
  fprintf(f, "\nset yrange [*:*]\n\n");
  fprintf(f, "set output 'queues.png'\nset title 'Largest egress queue by "
             "switch tier'\nset xlabel 'time (us)'\nset ylabel 'KiB'\n"
             "set yrange [0:*]\nplot ");
  for (int i = 1; i <= top; i++)
    fprintf(f, "%s'queues.csv' every ::1 using 1:($%d/1024) lw 2 title '%s'",
            i > 1 ? ", " : "", i + 1, sim_tier_name(c, i));
  fprintf(f, "\nset yrange [*:*]\n\n");
  if (sf->portq) {
    fprintf(
        f,
        "set output 'port_queues.png'\nset title 'Egress queues of the "
        "%u switch port(s) that grew largest (of %u)'\nset xlabel 'time (us)'\n"
        "set ylabel 'KiB'\nset yrange [0:*]\nplot for [i=2:%u] "
        "'port_queues.csv' every ::1 using 1:(column(i)/1024) lw 2 title "
        "word('%s', i-1)\nset yrange [*:*]\n\n",
        sf->ntop, sim_series(s)->nports, sf->ntop + 1, sf->top_names);
  } else {
    empty_plot(f, "port_queues.png", "Egress queues of the busiest ports",
               "no switch queue held a packet at a sample");
  }
  if (sf->pauses) {
    fprintf(f, "set output 'pfc.png'\nset terminal pngcairo size 900,760 "
               "noenhanced\nset multiplot layout 2,1 title 'PFC'\nset "
               "xlabel 'time (us)'\nset title 'pause frames sent "
               "(cumulative)'\nset ylabel 'frames'\nset yrange [0:*]\nplot ");
    for (int i = 1; i <= top; i++)
      fprintf(f, "%s'pfc.csv' every ::1 using 1:%d lw 2 title '%s'",
              i > 1 ? ", " : "", i + 1, sim_tier_name(c, i));
    fprintf(f, "\nset title 'egress ports paused at the sample "
               "(pause_events.csv has every frame)'\nset ylabel 'ports'\n"
               "plot ");
    for (int i = 0; i <= top; i++)
      fprintf(f, "%s'pfc.csv' every ::1 using 1:%d lw 2 title '%s'",
              i ? ", " : "", top + 2 + i,
              i ? sim_tier_name(c, i) : "host NICs");
    fprintf(f, "\nunset multiplot\nset terminal pngcairo size 900,560 "
               "noenhanced\nset yrange [*:*]\n\n");
  } else {
    empty_plot(f, "pfc.png", "PFC pause frames", "no PFC pauses");
  }
  if (sf->cc) {
    const struct sim_cfg *cc = sim_cfg(s);
    fprintf(f,
            "set output 'cc_rate.png'\nset title 'DCQCN: the rate limiters "
            "of the running flows (min-max, p10-p90, p50, mean)'\n"
            "set xlabel 'time (us)'\nset ylabel 'Gb/s'\nset yrange [0:%g]\n"
            "plot 'cc_rate.csv' every ::1 using 1:2:6 with filledcurves fc "
            "rgb '#f3dcc4' title 'min-max', '' every ::1 using 1:3:5 with "
            "filledcurves fc rgb '#e0a56b' title 'p10-p90', '' every ::1 "
            "using 1:4 with lines lw 2 lc rgb '#8c4a0f' title 'p50', '' every "
            "::1 using 1:7 with lines lw 1 dt 2 lc rgb 'black' title 'mean'\n"
            "set yrange [*:*]\n\n",
            (double)cc->topo.link[0].rate_bps / 1e9 * 1.05);
  }
  if (sf->ecn || sf->cnps) {
    fprintf(f,
            "set output 'ecn.png'\nset title 'ECN marks at switches and "
            "CNPs sent by NICs, per microsecond'\nset xlabel 'time (us)'\n"
            "set ylabel 'per us'\nset yrange [0:*]\nplot 'ecn.csv' every "
            "::1 using 1:%d lw 2 title 'ECN marks', '' every ::1 using "
            "1:%d lw 2 title 'CNPs'\nset yrange [*:*]\n\n",
            top + 3, top + 4);
  } else {
    empty_plot(f, "ecn.png", "ECN marks and CNPs", "no ECN marks, no CNPs");
  }
  return fclose(f) ? -1 : 0;
}

int sim_report_write(const struct sim *s, const char *dir, bool reproducible,
                     char *err, size_t errlen) {
  struct series_facts sf;
  if (write_summary(s, dir, reproducible, err, errlen) ||
      write_flows(s, dir, err, errlen) ||
      write_series(s, dir, &sf, err, errlen) ||
      write_plots(s, dir, &sf, err, errlen))
    return -1;
  return 0;
}

/* One row: a figure per run, then each run after the first relative to
 * the first. */
static void row(FILE *o, uint32_t n, const struct sim_summary *m, size_t off,
                int width, double scale, const char *name, const char *fmt) {
  double v[SIM_COMPARE_MAX];
  for (uint32_t i = 0; i < n; i++) {
    const char *p = (const char *)&m[i] + off;
    double x;
    if (width == 8) {
      uint64_t u;
      memcpy(&u, p, sizeof u);
      x = (double)u;
    } else if (width == 4) {
      uint32_t u;
      memcpy(&u, p, sizeof u);
      x = (double)u;
    } else if (width == 1) {
      x = *(const bool *)p;
    } else {
      memcpy(&x, p, sizeof x);
    }
    v[i] = x * scale;
  }
  fprintf(o, "  %-26s", name);
  for (uint32_t i = 0; i < n; i++) {
    char x[32];
    snprintf(x, sizeof x, fmt, v[i]);
    fprintf(o, " %16s", x);
  }
  for (uint32_t i = 1; i < n; i++) {
    char d[32] = "";
    if (v[0] != 0)
      snprintf(d, sizeof d, "%+.1f%%", (v[i] / v[0] - 1) * 100);
    else if (v[i] != 0)
      snprintf(d, sizeof d, "new");
    fprintf(o, " %10s", d);
  }
  fputc('\n', o);
}

#define RD(field, name, fmt)                                                   \
  row(o, n, m, offsetof(struct sim_summary, field), 0, 1, name, fmt)
#define RU(field, name, fmt)                                                   \
  row(o, n, m, offsetof(struct sim_summary, field),                            \
      (int)sizeof(((struct sim_summary *)0)->field), 1, name, fmt)

void sim_report_compare(FILE *o, uint32_t n, const char *const *names,
                        const struct sim_summary *m) {
  if (n > SIM_COMPARE_MAX)
    n = SIM_COMPARE_MAX;
  bool coll = false, flows = false;
  fprintf(o, "  %-26s", "");
  for (uint32_t i = 0; i < n; i++) {
    fprintf(o, " %16.16s", names[i]);
    coll |= m[i].coll_sizes > 0;
    flows |= !m[i].coll_sizes;
  }
  for (uint32_t i = 1; i < n; i++)
    fprintf(o, " %5c vs A", 'A' + (int)i);
  fprintf(o, "\n  %-26s", "fabric / routing");
  for (uint32_t i = 0; i < n; i++) {
    char x[40];
    snprintf(x, sizeof x, "%s/%s", m[i].fabric ? m[i].fabric : "?",
             m[i].routing ? m[i].routing : "?");
    fprintf(o, " %16.16s", x);
  }
  fputc('\n', o);
  if (coll) {
    RU(coll_done, "sizes done", "%.0f");
    RU(coll_bytes, "largest size (B)", "%.0f");
    RD(coll_time_us, "its time (us)", "%.2f");
    RD(coll_busbw, "its busbw (GB/s)", "%.3f");
    RD(coll_ratio, "its time / bound", "%.3f");
    bool cfail = false;
    for (uint32_t i = 0; i < n; i++)
      cfail |= m[i].coll_failed;
    if (cfail)
      RU(coll_failed, "a rank failed (1 = yes)", "%.0f");
  }
  bool failed = false;
  for (uint32_t i = 0; i < n; i++)
    failed |= m[i].failed > 0;
  if (flows) {
    RU(done, "flows done", "%.0f");
    if (failed)
      RU(failed, "flows failed", "%.0f");
    RD(fct_us[1], "FCT p50 (us)", "%.2f");
    RD(fct_us[3], "FCT p99 (us)", "%.2f");
    RD(fct_us[5], "FCT max (us)", "%.2f");
    RD(fct_us[6], "FCT mean (us)", "%.2f");
    RD(tput_gbps[0], "flow tput min (Gb/s)", "%.2f");
    RD(tput_gbps[3], "flow tput mean (Gb/s)", "%.2f");
  }
  RD(completion_us, "completion (us)", "%.2f");
  RD(goodput_gbps, "aggregate goodput (Gb/s)", "%.1f");
  RU(drops, "drops", "%.0f");
  RU(lost_failures, "lost to failures", "%.0f");
  RD(recovery_us, "longest recovery (us)", "%.3f");
  RU(pauses, "PFC pause frames", "%.0f");
  RU(fc_pkts, "IB flow-control packets", "%.0f");
  RU(ecn_marks, "ECN marks", "%.0f");
  RU(cnps, "CNPs", "%.0f");
  RU(retx, "retransmitted pkts", "%.0f");
  for (int t = 1; t < SIM_TIERS; t++) {
    char name[40];
    snprintf(name, sizeof name, "max queue tier %d (KiB)", t);
    row(o, n, m, offsetof(struct sim_summary, max_queue) + t * sizeof(uint64_t),
        8, 1.0 / 1024, name, "%.1f");
  }
  RU(events, "events", "%.0f");
  RD(wall_s, "wall (s)", "%.3f");
}
