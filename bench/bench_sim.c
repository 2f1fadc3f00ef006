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
 *
 * Goal (issue 6): 1024 hosts with spraying under 2 s and 500 MB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sim/sim.h"

static enum sim_host_model model = SIM_HOST_UROCE;

static int run(uint32_t k, enum sim_routing rt, uint32_t paths,
               const char *name) {
  struct sim_cfg c;
  sim_cfg_default(&c);
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
  for (uint32_t i = 0; i < sim_nflows(s); i++)
    if (sim_flow(s, i)->finish > last)
      last = sim_flow(s, i)->finish;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("%s fat-tree k=%u %u hosts %-8s: %s, simulated %.1f us, wall %.3f "
         "s, %llu events, %.2f M events/s, %llu data pkts (%llu resent), "
         "peak RSS %.0f MB (estimate %.0f MB + %.0f MB at start)\n",
         model == SIM_HOST_UROCE ? "uroce" : "simple", k, sim_nhosts(s), name,
         done ? "all done" : "NOT DONE", (double)last / 1e6, st->wall_s,
         (unsigned long long)st->events, (double)st->events / st->wall_s / 1e6,
         (unsigned long long)st->data_pkts, (unsigned long long)st->retx_pkts,
         (double)ru.ru_maxrss / 1024, (double)sim_mem(s)->total / (1 << 20),
         (double)base_kb / 1024);
  sim_del(s);
  return !done;
}

int main(int argc, char **argv) {
  uint32_t k = argc > 1 ? (uint32_t)atoi(argv[1]) : 16;
  const char *only = argc > 2 ? argv[2] : 0;
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
