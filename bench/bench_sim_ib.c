/* The InfiniBand fabric's cost next to RoCE's: a permutation of 2 MiB
 * messages on a k-ary fat-tree (100 Gb/s, 1 us per hop, 4 KiB MTU, the
 * real transport engine), once with fabric infiniband and adaptive
 * routing, once with fabric roce (adaptive routing too, so that only the
 * link layer differs, and ECMP). Each run is a child process, so each
 * peak RSS is its own. Prints wall time, events, events/s, data packets,
 * CPU time per data packet and peak RSS. The three take turns for ROUNDS
 * rounds (a shared machine's load moves between runs); IB's CPU time per
 * data packet relative to RoCE's with the same routing is given per
 * round and as the median over the rounds.
 *
 *   bench_sim_ib          k = 16 (1024 hosts), 3 rounds
 *   bench_sim_ib 8 5      k = 8, 5 rounds
 *
 * Goal (issue 27): IB at most 1.5x RoCE per simulated packet. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/sim.h"

struct res {
  double wall_s, ns_per_pkt, cpu_s;
  uint64_t events, pkts;
  int done;
};

static void run(uint32_t k, bool ib, enum sim_routing rt, struct res *r) {
  struct sim_cfg c;
  sim_cfg_default(&c);
  c.topo.kind = SIM_TOPO_FAT_TREE;
  c.topo.k = k;
  c.routing = rt;
  if (ib)
    c.fabric = SIM_FABRIC_IB;
  c.wl.kind = SIM_WL_PERMUTATION;
  c.wl.bytes = 2 << 20;
  char err[256] = "";
  struct sim *s = sim_new(&c, err, sizeof err);
  if (!s) {
    fprintf(stderr, "bench_sim_ib: %s\n", err);
    exit(1);
  }
  r->done = sim_run(s, SIM_NEVER);
  const struct sim_stats *st = sim_stats(s);
  r->wall_s = st->wall_s;
  r->events = st->events;
  r->pkts = st->data_pkts;
  r->ns_per_pkt = st->wall_s * 1e9 / (double)st->data_pkts;
  sim_del(s);
}

/* Runs one configuration in a child; its result comes back by a pipe. */
static int child(uint32_t k, bool ib, enum sim_routing rt, const char *name,
                 struct res *out) {
  int fd[2];
  if (pipe(fd))
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    struct res r;
    run(k, ib, rt, &r);
    ssize_t w = write(fd[1], &r, sizeof r);
    _exit(w == (ssize_t)sizeof r ? 0 : 1);
  }
  close(fd[1]);
  ssize_t got = pid > 0 ? read(fd[0], out, sizeof *out) : -1;
  close(fd[0]);
  int status = 0;
  struct rusage ru = {0};
  if (pid < 0 || wait4(pid, &status, 0, &ru) < 0 ||
      got != (ssize_t)sizeof *out || status) {
    fprintf(stderr, "bench_sim_ib: %s failed\n", name);
    return -1;
  }
  /* CPU time of the whole child (setup included): steadier than the
   * run's wall time on a shared machine. */
  out->cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
  printf("%-16s k=%u: %s, wall %.3f s (run), CPU %.3f s (all), %llu events, "
         "%.2f M events/s, %llu data pkts, %.0f ns CPU per pkt, peak RSS "
         "%.0f MB\n",
         name, k, out->done ? "all done" : "NOT DONE", out->wall_s, out->cpu_s,
         (unsigned long long)out->events,
         (double)out->events / out->wall_s / 1e6, (unsigned long long)out->pkts,
         out->cpu_s * 1e9 / (double)out->pkts, (double)ru.ru_maxrss / 1024);
  fflush(stdout);
  return out->done ? 0 : -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  int k = argc > 1 ? atoi(argv[1]) : 16;
  int rounds = argc > 2 ? atoi(argv[2]) : 3;
  if (k < 2 || k > 128 || k % 2 || rounds < 1 || rounds > 99) {
    fprintf(stderr, "usage: bench_sim_ib [K: even, 2..128] [ROUNDS: 1..99]\n");
    return 2;
  }
  double cpu[99], wall[99], ev = 0;
  for (int i = 0; i < rounds; i++) {
    struct res ib, roce, ecmp;
    int rc = 0;
    rc |= child((uint32_t)k, true, SIM_ROUTE_ADAPTIVE, "ib adaptive", &ib);
    rc |= child((uint32_t)k, false, SIM_ROUTE_ADAPTIVE, "roce adaptive", &roce);
    rc |= child((uint32_t)k, false, SIM_ROUTE_ECMP, "roce ecmp", &ecmp);
    if (rc)
      return 1;
    cpu[i] = (ib.cpu_s / (double)ib.pkts) / (roce.cpu_s / (double)roce.pkts);
    wall[i] = ib.ns_per_pkt / roce.ns_per_pkt;
    ev = ((double)ib.events / (double)ib.pkts) /
         ((double)roce.events / (double)roce.pkts);
    printf("round %d: ib / roce per data packet (adaptive both): %.2fx CPU, "
           "%.2fx wall\n",
           i + 1, cpu[i], wall[i]);
  }
  printf("ib / roce per data packet (adaptive both), median of %d rounds: "
         "%.2fx CPU, %.2fx wall, %.2fx events; goal <= 1.5x\n",
         rounds, median(cpu, rounds), median(wall, rounds), ev);
  return 0;
}
