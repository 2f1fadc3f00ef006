#include "sim/report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"

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

void sim_summarize(const struct sim *s, struct sim_summary *o) {
  memset(o, 0, sizeof(*o));
  const struct sim_stats *st = sim_stats(s);
  uint32_t n = sim_nflows(s);
  double *fct = malloc(sizeof(double) * (n ? n : 1));
  double *tp = malloc(sizeof(double) * (n ? n : 1));
  size_t k = 0;
  double sum = 0, tsum = 0;
  sim_time_t last = 0;
  for (uint32_t i = 0; i < n; i++) {
    const struct sim_flow *f = sim_flow(s, i);
    o->bytes += f->bytes;
    if (f->finish == SIM_NEVER || !fct || !tp)
      continue;
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
  o->goodput_gbps =
      last ? (double)o->bytes * 8 / ((double)last / 1e12) / 1e9 : 0;
  for (int t = 0; t < SIM_TIERS; t++) {
    o->drops += st->drops_buffer[t] + st->drops_lossless[t];
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
}

static const char *routing_name(enum sim_routing r) {
  return r == SIM_ROUTE_SPRAY      ? "spray"
         : r == SIM_ROUTE_ADAPTIVE ? "adaptive"
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

static const char *coll_kind_name(int k) {
  static const char *const n[] = {"allreduce", "reduce_scatter", "allgather",
                                  "broadcast", "reduce",         "all_to_all"};
  return k >= 0 && k < 6 ? n[k] : "?";
}

static const char *coll_algo_name(int a) {
  static const char *const n[] = {"auto", "ring", "tree", "rhd", "pairwise"};
  return a >= 0 && a < 5 ? n[a] : "?";
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
          "\"busbw_factor\": %.6f, \"link_goodput_gbps\": %.4f, \"sizes\": "
          "[",
          coll_kind_name(cc->kind), sim_coll_ranks(s), sim_coll_factor(s),
          sim_coll_link_gbps(s));
  for (uint32_t i = 0; i < n; i++)
    fprintf(f,
            "%s\n    {\"bytes\": %llu, \"count\": %llu, \"algo\": \"%s\", "
            "\"time_us\": %.3f, \"algbw_GBps\": %.4f, \"busbw_GBps\": %.4f, "
            "\"bound_us\": %.3f, \"bound_busbw_GBps\": %.4f, \"ratio\": "
            "%.4f, \"latency_steps\": %u, \"step_latency_us\": %.4f}",
            i ? "," : "", (unsigned long long)r[i].bytes,
            (unsigned long long)r[i].count, coll_algo_name(r[i].algo),
            (double)r[i].time / 1e6, r[i].algbw_gbs, r[i].busbw_gbs,
            r[i].bound_us, r[i].bound_busbw_gbs, r[i].ratio, r[i].steps,
            r[i].step_latency_us);
  fprintf(f, "],\n    \"done\": %s},\n", n == cc->nsizes ? "true" : "false");
}

void sim_report_coll_table(FILE *o, const struct sim *s) {
  uint32_t n;
  const struct sim_coll_result *r = sim_coll_results(s, &n);
  if (!r)
    return;
  const struct sim_coll_cfg *cc = &sim_cfg(s)->wl.coll;
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

static int write_summary(const struct sim *s, const char *dir, bool repro,
                         char *err, size_t errlen) {
  FILE *f = open_in(dir, "summary.json", err, errlen);
  if (!f)
    return -1;
  const struct sim_cfg *c = sim_cfg(s);
  const struct sim_stats *st = sim_stats(s);
  struct sim_summary m;
  sim_summarize(s, &m);
  fprintf(f, "{\n");
  fprintf(f,
          "  \"scenario\": {\"topology\": \"%s\", \"hosts\": %u, \"nics\": "
          "%u, \"switches\": %u, \"routing\": \"%s\", \"cc\": \"%s\", "
          "\"pfc\": %s, \"ecn\": %s, \"mtu\": %u, \"seed\": %llu},\n",
          c->topo.kind == SIM_TOPO_FAT_TREE ? "fat_tree" : "leaf_spine",
          s->nhosts, s->nnics, s->nswitches, routing_name(c->routing),
          c->tp.cc == SIM_CC_DCQCN ? "dcqcn" : "none",
          c->sw.pfc ? "true" : "false", c->sw.ecn ? "true" : "false", c->tp.mtu,
          (unsigned long long)c->seed);
  fprintf(f,
          "  \"flows\": {\"count\": %llu, \"done\": %llu, \"bytes\": %llu},\n",
          (unsigned long long)m.flows, (unsigned long long)m.done,
          (unsigned long long)m.bytes);
  fprintf(f,
          "  \"fct_us\": {\"min\": %.3f, \"p50\": %.3f, \"p90\": %.3f, "
          "\"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f, \"mean\": %.3f},\n",
          m.fct_us[0], m.fct_us[1], m.fct_us[2], m.fct_us[3], m.fct_us[4],
          m.fct_us[5], m.fct_us[6]);
  fprintf(f,
          "  \"flow_throughput_gbps\": {\"min\": %.3f, \"p1\": %.3f, "
          "\"p50\": %.3f, \"mean\": %.3f, \"max\": %.3f},\n",
          m.tput_gbps[0], m.tput_gbps[1], m.tput_gbps[2], m.tput_gbps[3],
          m.tput_gbps[4]);
  fprintf(f,
          "  \"completion_us\": %.3f,\n  \"aggregate_goodput_gbps\": %.3f,\n",
          m.completion_us, m.goodput_gbps);
  uint64_t dl[SIM_TIERS];
  for (int t = 0; t < SIM_TIERS; t++)
    dl[t] = st->drops_buffer[t] + st->drops_lossless[t];
  fprintf(f,
          "  \"drops\": {\"total\": %llu, \"wire\": %llu, "
          "\"lossless_overflow\": %llu},\n",
          (unsigned long long)(m.drops + m.drops_wire),
          (unsigned long long)m.drops_wire,
          (unsigned long long)(st->drops_lossless[1] + st->drops_lossless[2] +
                               st->drops_lossless[3]));
  tiers_json(f, c, "drops_by_tier", dl, ",");
  tiers_json(f, c, "pfc_pause_frames", st->pause_frames, ",");
  uint64_t pu[SIM_TIERS];
  for (int t = 0; t < SIM_TIERS; t++)
    pu[t] = st->paused_time[t] / SIM_US;
  fprintf(f, "  \"nic_paused_us\": %llu,\n", (unsigned long long)pu[0]);
  tiers_json(f, c, "port_paused_us", pu, ",");
  tiers_json(f, c, "ecn_marks", st->ecn_marks, ",");
  tiers_json(f, c, "max_queue_bytes", st->max_queue, ",");
  tiers_json(f, c, "max_buffer_bytes", st->max_buffer, ",");
  coll_json(f, s);
  fprintf(f,
          "  \"transport\": {\"data_pkts\": %llu, \"ctrl_pkts\": %llu, "
          "\"retransmitted_pkts\": %llu, \"timeouts\": %llu, \"naks\": %llu, "
          "\"cnps\": %llu},\n",
          (unsigned long long)st->data_pkts, (unsigned long long)st->ctrl_pkts,
          (unsigned long long)st->retx_pkts, (unsigned long long)st->timeouts,
          (unsigned long long)st->naks, (unsigned long long)st->cnps);
  fprintf(f, "  \"sim_time_us\": %.3f,\n  \"events\": %llu",
          (double)st->now / 1e6, (unsigned long long)st->events);
  if (!repro)
    fprintf(f, ",\n  \"wall_s\": %.3f,\n  \"events_per_s\": %.0f", st->wall_s,
            st->wall_s > 0 ? (double)st->events / st->wall_s : 0);
  fprintf(f, "\n}\n");
  return fclose(f) ? -1 : 0;
}

static int write_csvs(const struct sim *s, const char *dir, char *err,
                      size_t errlen) {
  FILE *f = open_in(dir, "flows.csv", err, errlen);
  if (!f)
    return -1;
  uint32_t n = sim_nflows(s);
  fprintf(f, "id,src,dst,bytes,start_us,finish_us,fct_us,gbps,tx_pkts,"
             "retx_pkts\n");
  double *fct = malloc(sizeof(double) * (n ? n : 1));
  size_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    const struct sim_flow *fl = sim_flow(s, i);
    bool done = fl->finish != SIM_NEVER;
    double us = done ? (double)(fl->finish - fl->start) / 1e6 : -1;
    fprintf(f, "%u,%u,%u,%llu,%.3f,%.3f,%.3f,%.3f,%llu,%llu\n", fl->id, fl->src,
            fl->dst, (unsigned long long)fl->bytes, (double)fl->start / 1e6,
            done ? (double)fl->finish / 1e6 : -1, us,
            done && us > 0 ? (double)fl->bytes * 8 / (us * 1e3) : 0,
            (unsigned long long)fl->tx_pkts, (unsigned long long)fl->retx_pkts);
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

  const struct sim_series *r = sim_series(s);
  const struct sim_cfg *c = sim_cfg(s);
  int top = c->topo.kind == SIM_TOPO_FAT_TREE ? 3 : 2;
  FILE *q = open_in(dir, "queues.csv", err, errlen);
  FILE *p = q ? open_in(dir, "pfc.csv", err, errlen) : 0;
  FILE *t = p ? open_in(dir, "throughput.csv", err, errlen) : 0;
  if (!t) {
    if (q)
      fclose(q);
    if (p)
      fclose(p);
    return -1;
  }
  fprintf(q, "time_us");
  fprintf(p, "time_us");
  for (int i = 1; i <= top; i++) {
    fprintf(q, ",%s_bytes", sim_tier_name(c, i));
    fprintf(p, ",%s_pauses", sim_tier_name(c, i));
  }
  fprintf(q, "\n");
  fprintf(p, "\n");
  fprintf(t, "time_us");
  for (uint32_t fl = 0; fl < r->nflows; fl++)
    fprintf(t, ",flow%u_gbps", fl);
  fprintf(t, "\n");
  for (uint32_t i = 0; i < r->n; i++) {
    double us = (double)r->t[i] / 1e6;
    fprintf(q, "%.3f", us);
    fprintf(p, "%.3f", us);
    for (int j = 1; j <= top; j++) {
      fprintf(q, ",%llu", (unsigned long long)r->queue[i][j]);
      fprintf(p, ",%llu", (unsigned long long)r->pauses[i][j]);
    }
    fprintf(q, "\n");
    fprintf(p, "\n");
    if (!i)
      continue;
    /* The last sample (when the last flow finished) may close a short
     * interval: leave it out rather than plot its noise. */
    double dt = (double)(r->t[i] - r->t[i - 1]) / 1e12;
    if (dt <= 0 || r->t[i] - r->t[i - 1] < c->sample_interval / 2)
      continue;
    fprintf(t, "%.3f", us);
    for (uint32_t fl = 0; fl < r->nflows; fl++) {
      uint64_t a = r->acked[(uint64_t)i * r->nflows + fl],
               b = r->acked[(uint64_t)(i - 1) * r->nflows + fl];
      fprintf(t, ",%.3f", (double)(a - b) * 8 / dt / 1e9);
    }
    fprintf(t, "\n");
  }
  fclose(q);
  fclose(p);
  fclose(t);
  return 0;
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
             "bound_busbw_GBps,ratio\n");
  for (uint32_t i = 0; i < n; i++)
    fprintf(f, "%llu,%llu,%s,%.3f,%.4f,%.4f,%.3f,%.4f,%.4f\n",
            (unsigned long long)r[i].bytes, (unsigned long long)r[i].count,
            coll_algo_name(r[i].algo), (double)r[i].time / 1e6, r[i].algbw_gbs,
            r[i].busbw_gbs, r[i].bound_us, r[i].bound_busbw_gbs, r[i].ratio);
  if (fclose(f))
    return -1;
  fprintf(gp,
          "set output 'coll_busbw.png'\nset title '%s, %u ranks: bus "
          "bandwidth'\nset xlabel 'size (bytes)'\nset ylabel 'GB/s'\n"
          "set logscale x 2\nset yrange [0:*]\nplot 'coll.csv' every ::1 "
          "using 1:6 with linespoints lw 2 title 'busbw (simulated)', "
          "'coll.csv' every ::1 using 1:8 with linespoints lw 2 dt 2 title "
          "'bound', %.4f with lines dt 3 title 'link goodput'\n"
          "unset logscale x\nset yrange [*:*]\n\n",
          coll_kind_name(sim_cfg(s)->wl.coll.kind), sim_coll_ranks(s),
          sim_coll_link_gbps(s) / 8);
  return 0;
}

static int write_plots(const struct sim *s, const char *dir, char *err,
                       size_t errlen) {
  FILE *f = open_in(dir, "plots.gp", err, errlen);
  if (!f)
    return -1;
  if (write_coll(s, dir, f, err, errlen)) {
    fclose(f);
    return -1;
  }
  const struct sim_cfg *c = sim_cfg(s);
  int top = c->topo.kind == SIM_TOPO_FAT_TREE ? 3 : 2;
  fprintf(f, "# gnuplot script written by uroce sim; run it in this folder.\n"
             "set datafile separator ','\n"
             "set terminal pngcairo size 900,560 noenhanced\n"
             "set key outside right\nset grid\n\n");
  fprintf(f, "set output 'fct_cdf.png'\nset title 'Flow completion time "
             "CDF'\nset xlabel 'FCT (us)'\nset ylabel 'fraction of flows'\n"
             "set logscale x\nplot 'fct_cdf.csv' every ::1 using 1:2 with "
             "steps lw 2 title 'FCT'\nunset logscale x\n\n");
  fprintf(f,
          "set output 'throughput.png'\nset title 'Per-flow throughput "
          "(first %u flows)'\nset xlabel 'time (us)'\nset ylabel "
          "'Gb/s'\nset yrange [0:*]\nplot for [i=2:%u] 'throughput.csv' "
          "every ::1 using 1:i with lines notitle\nset yrange [*:*]\n\n",
          sim_series(s)->nflows, sim_series(s)->nflows + 1);
  fprintf(f, "set output 'queues.png'\nset title 'Largest egress queue by "
             "switch tier'\nset xlabel 'time (us)'\nset ylabel 'KB'\nplot ");
  for (int i = 1; i <= top; i++)
    fprintf(f,
            "%s'queues.csv' every ::1 using 1:($%d/1024) with lines lw 2 "
            "title '%s'",
            i > 1 ? ", " : "", i + 1, sim_tier_name(c, i));
  fprintf(f, "\n\nset output 'pfc.png'\nset title 'PFC pause frames sent "
             "(cumulative) by tier'\nset xlabel 'time (us)'\nset ylabel "
             "'pause frames'\nset yrange [0:1<*]\nplot ");
  for (int i = 1; i <= top; i++)
    fprintf(f,
            "%s'pfc.csv' every ::1 using 1:%d with lines lw 2 title "
            "'%s'",
            i > 1 ? ", " : "", i + 1, sim_tier_name(c, i));
  fprintf(f, "\n");
  return fclose(f) ? -1 : 0;
}

int sim_report_write(const struct sim *s, const char *dir, bool reproducible,
                     char *err, size_t errlen) {
  if (write_summary(s, dir, reproducible, err, errlen) ||
      write_csvs(s, dir, err, errlen) || write_plots(s, dir, err, errlen))
    return -1;
  return 0;
}

static void row(FILE *o, const char *name, double a, double b,
                const char *fmt) {
  char x[32], y[32], d[32] = "";
  snprintf(x, sizeof x, fmt, a);
  snprintf(y, sizeof y, fmt, b);
  if (a != 0)
    snprintf(d, sizeof d, "%+.1f%%", (b / a - 1) * 100);
  else if (b != 0)
    snprintf(d, sizeof d, "new");
  fprintf(o, "  %-26s %16s %16s %10s\n", name, x, y, d);
}

void sim_report_compare(FILE *o, const char *na, const struct sim_summary *a,
                        const char *nb, const struct sim_summary *b) {
  fprintf(o, "  %-26s %16.16s %16.16s %10s\n", "", na, nb, "B vs A");
  row(o, "flows done", (double)a->done, (double)b->done, "%.0f");
  row(o, "FCT p50 (us)", a->fct_us[1], b->fct_us[1], "%.2f");
  row(o, "FCT p99 (us)", a->fct_us[3], b->fct_us[3], "%.2f");
  row(o, "FCT max (us)", a->fct_us[5], b->fct_us[5], "%.2f");
  row(o, "FCT mean (us)", a->fct_us[6], b->fct_us[6], "%.2f");
  row(o, "flow tput min (Gb/s)", a->tput_gbps[0], b->tput_gbps[0], "%.2f");
  row(o, "flow tput mean (Gb/s)", a->tput_gbps[3], b->tput_gbps[3], "%.2f");
  row(o, "completion (us)", a->completion_us, b->completion_us, "%.2f");
  row(o, "aggregate goodput (Gb/s)", a->goodput_gbps, b->goodput_gbps, "%.1f");
  row(o, "drops", (double)a->drops, (double)b->drops, "%.0f");
  row(o, "PFC pause frames", (double)a->pauses, (double)b->pauses, "%.0f");
  row(o, "ECN marks", (double)a->ecn_marks, (double)b->ecn_marks, "%.0f");
  row(o, "CNPs", (double)a->cnps, (double)b->cnps, "%.0f");
  row(o, "retransmitted pkts", (double)a->retx, (double)b->retx, "%.0f");
  for (int t = 1; t < SIM_TIERS; t++) {
    char n[40];
    snprintf(n, sizeof n, "max queue tier %d (KB)", t);
    row(o, n, (double)a->max_queue[t] / 1024, (double)b->max_queue[t] / 1024,
        "%.1f");
  }
  row(o, "events", (double)a->events, (double)b->events, "%.0f");
  row(o, "wall (s)", a->wall_s, b->wall_s, "%.3f");
}
