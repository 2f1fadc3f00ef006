/* Fabric simulator benchmark: a permutation of 2 MiB messages on a 3-tier
 * k-ary fat-tree, 100 Gb/s links, 1 us per hop, 4 KiB MTU. Prints wall
 * time, events per second and peak memory for spraying and ECMP.
 *
 *   bench_sim            k = 16 (1024 hosts), spray and ECMP
 *   bench_sim 32         k = 32 (8192 hosts)
 *   bench_sim 16 spray   one routing only (spray: the switches spray;
 *                        nic: the NICs spray over the whole entropy space,
 *                        paths 16384, through ECMP switches; ecmp;
 *                        adaptive)
 *   bench_sim 16 spray simple   the built-in host model instead of the
 *                               real transport engine (the default)
 *   bench_sim 16 threads 1,2,4 [R]  the spray permutation on 1, 2 and 4
 *                        threads, interleaved R rounds (default 3): median
 *                        wall time, events/s, the speedup over the first
 *                        count, and whether every run's results match
 *
 * Goal (issue 6): 1024 hosts with spraying under 2 s and 500 MB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sim/sim.h"

static enum sim_host_model model = SIM_HOST_UROCE;
static uint32_t threads = 1;

/* What a run's results are summed up by, to compare runs. */
struct fingerprint {
  uint64_t events, data_pkts, retx, fct_sum;
  sim_time_t last;
  double wall;
};
static struct fingerprint fp;

static int run(uint32_t k, enum sim_routing rt, uint32_t paths,
               const char *name) {
  struct sim_cfg c;
  sim_cfg_default(&c);
  c.threads = threads;
  c.tp.model = model;
  c.topo.kind = SIM_TOPO_FAT_TREE;
  c.topo.k = k;
  c.routing = rt;
  c.tp.paths = paths;
  c.wl.kind = SIM_WL_PERMUTATION;
  c.wl.bytes = 2 << 20;
  char err[256] = "";
  struct rusage ru0;
  getrusage(RUSAGE_SELF, &ru0);
  long base_kb = ru0.ru_maxrss;
  struct sim *s = sim_new(&c, err, sizeof err);
  if (!s) {
    fprintf(stderr, "bench_sim: %s\n", err);
    return 1;
  }
  int done = sim_run(s, SIM_NEVER);
  const struct sim_stats *st = sim_stats(s);
  sim_time_t last = 0;
  uint64_t fct_sum = 0;
  for (uint32_t i = 0; i < sim_nflows(s); i++) {
    if (sim_flow(s, i)->finish > last)
      last = sim_flow(s, i)->finish;
    fct_sum += sim_flow(s, i)->finish - sim_flow(s, i)->start;
  }
  fp = (struct fingerprint){st->events, st->data_pkts, st->retx_pkts,
                            fct_sum,    last,          st->wall_s};
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("%s fat-tree k=%u %u hosts %-8s %u thread%s: %s, simulated %.1f us, "
         "wall %.3f "
         "s, %llu events, %.2f M events/s, %llu data pkts (%llu resent), "
         "peak RSS %.0f MB (estimate %.0f MB + %.0f MB at start)\n",
         model == SIM_HOST_UROCE ? "uroce" : "simple", k, sim_nhosts(s), name,
         sim_threads(s, 0), sim_threads(s, 0) > 1 ? "s" : "",
         done ? "all done" : "NOT DONE", (double)last / 1e6, st->wall_s,
         (unsigned long long)st->events, (double)st->events / st->wall_s / 1e6,
         (unsigned long long)st->data_pkts, (unsigned long long)st->retx_pkts,
         (double)ru.ru_maxrss / 1024, (double)sim_mem(s)->total / (1 << 20),
         (double)base_kb / 1024);
  sim_del(s);
  return !done;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The spray permutation on each thread count of list, interleaved. */
static int scaling(uint32_t k, const char *list, int rounds) {
  uint32_t t[16], n = 0;
  for (const char *p = list; *p && n < 16;) {
    t[n++] = (uint32_t)strtoul(p, (char **)&p, 10);
    if (*p == ',')
      p++;
    else if (*p)
      return 2;
  }
  double wall[16][32];
  struct fingerprint first = {0};
  bool same = true;
  int rc = 0;
  if (rounds > 32)
    rounds = 32;
  for (int r = 0; r < rounds; r++)
    for (uint32_t i = 0; i < n; i++) {
      threads = t[i];
      rc |= run(k, SIM_ROUTE_SPRAY, 1, "spray");
      wall[i][r] = fp.wall;
      struct fingerprint x = fp;
      x.wall = 0;
      if (!r && !i)
        first = x;
      else
        same &= !memcmp(&x, &first, sizeof(x));
    }
  double base = 0;
  for (uint32_t i = 0; i < n; i++) {
    qsort(wall[i], (size_t)rounds, sizeof(double), cmp_dbl);
    double med = wall[i][rounds / 2];
    if (!i)
      base = med;
    printf("k=%u spray, %u thread%s: median wall %.3f s over %d rounds, "
           "%.2f M events/s, speedup %.2fx over %u\n",
           k, t[i], t[i] > 1 ? "s" : "", med, rounds,
           (double)first.events / med / 1e6, base / med, t[0]);
  }
  printf("results of every run the same: %s\n", same ? "yes" : "NO");
  return rc | !same;
}

int main(int argc, char **argv) {
  uint32_t k = argc > 1 ? (uint32_t)atoi(argv[1]) : 16;
  const char *only = argc > 2 ? argv[2] : 0;
  if (only && !strcmp(only, "threads"))
    return scaling(k, argc > 3 ? argv[3] : "1,2", argc > 4 ? atoi(argv[4]) : 3);
  if (argc > 3 && !strcmp(argv[3], "simple"))
    model = SIM_HOST_SIMPLE;
  int rc = 0;
  if (!only || !strcmp(only, "spray"))
    rc |= run(k, SIM_ROUTE_SPRAY, 1, "spray");
  if ((!only && model == SIM_HOST_UROCE) || (only && !strcmp(only, "nic")))
    rc |= run(k, SIM_ROUTE_ECMP, 16384, "nicspray");
  if (!only || !strcmp(only, "ecmp"))
    rc |= run(k, SIM_ROUTE_ECMP, 1, "ecmp");
  if (!only || !strcmp(only, "adaptive"))
    rc |= run(k, SIM_ROUTE_ADAPTIVE, 1, "adaptive");
  return rc;
}
