/* uroce sim: run a fabric scenario (YAML), write summary.json, CSV series
 * and plots; or compare two scenarios side by side. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/report.h"
#include "sim/scenario.h"
#include "sim/sim.h"
#include "tool.h"

struct opts {
  const char *out;
  bool seed_set, quiet, plots, repro, threads_set;
  uint64_t seed;
  sim_time_t stop;
  uint32_t threads;
  const char *trace;
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: uroce sim [OPTIONS] SCENARIO.yaml\n"
          "       uroce sim [OPTIONS] --compare A.yaml B.yaml [C.yaml ...]\n\n"
          "Simulates a RoCEv2 or InfiniBand fabric packet by packet and "
          "writes, into the\n"
          "output folder: summary.json (FCT and slowdown, throughput, link\n"
          "utilisation, drops, PFC pauses, ECN marks, queues, collective\n"
          "results, the resolved scenario), CSV series (flows, FCT CDF,\n"
          "throughput, utilisation, queues, PFC and pause events, ECN and\n"
          "CNPs, DCQCN rates) and plots.gp; with gnuplot, the PNGs\n"
          "(gnuplot's messages go to plots.log). docs/sim.md says what each\n"
          "figure means.\n\n"
          "options:\n"
          "  -o, --out DIR      output folder (default sim-out/NAME; with\n"
          "                     --compare, DIR/A, DIR/B, ...; up to 8)\n"
          "  --seed N           override the scenario's seed\n"
          "  --stop-us T        stop at T microseconds of simulated time\n"
          "  --threads N        run on N threads, one part of the fabric\n"
          "                     each (0: every CPU); results are the same\n"
          "  -q, --quiet        no progress bar\n"
          "  --no-plots         do not run gnuplot\n"
          "  --reproducible     leave wall-clock figures out of summary.json\n"
          "  --trace FILE       write every NIC's transport events to FILE as\n"
          "                     JSON lines (uroce host model; one thread;\n"
          "                     read it with uroce trace)\n"
          "  -h, --help         this text\n\n"
          "The scenario format is described in docs/sim.md; examples are in\n"
          "examples/sim/. Past one machine: mpirun -np N uroce-sim-mpi\n"
          "[OPTIONS] SCENARIO.yaml runs one part of the fabric per MPI rank,\n"
          "with the same results (docs/sim.md, \"Past one machine\").\n");
}

static void print_summary(const char *name, const struct sim_summary *m,
                          const char *dir) {
  if (m->coll_sizes) {
    /* A collective has no workload flows: its headline is the largest
     * size's result (the table above has them all). */
    printf("%s: %s on %u ranks, %u/%u sizes done; largest %llu B in %.2f us, "
           "busbw %.3f GB/s (bound %.3f, time / bound %.3f); drops %llu, "
           "PFC pauses %llu, ECN marks %llu; %llu events in %.2f s "
           "(%.2f M/s)\n",
           name, m->coll_name, m->coll_ranks, m->coll_done, m->coll_sizes,
           (unsigned long long)m->coll_bytes, m->coll_time_us, m->coll_busbw,
           m->coll_bound_busbw, m->coll_ratio, (unsigned long long)m->drops,
           (unsigned long long)m->pauses, (unsigned long long)m->ecn_marks,
           (unsigned long long)m->events, m->wall_s,
           m->wall_s > 0 ? (double)m->events / m->wall_s / 1e6 : 0);
    if (m->coll_failed)
      printf("  rank %u failed at %.3f us: %s\n", m->coll_fail_rank,
             m->coll_fail_us, m->coll_fail_why);
  } else {
    printf("%s: %llu/%llu flows done; FCT p50 %.2f us, p99 %.2f us, max "
           "%.2f us; flow throughput mean %.2f Gb/s (min %.2f); drops %llu, "
           "PFC pauses %llu, ECN marks %llu; %llu events in %.2f s (%.2f "
           "M/s)\n",
           name, (unsigned long long)m->done, (unsigned long long)m->flows,
           m->fct_us[1], m->fct_us[3], m->fct_us[5], m->tput_gbps[3],
           m->tput_gbps[0], (unsigned long long)m->drops,
           (unsigned long long)m->pauses, (unsigned long long)m->ecn_marks,
           (unsigned long long)m->events, m->wall_s,
           m->wall_s > 0 ? (double)m->events / m->wall_s / 1e6 : 0);
    if (m->failed)
      printf("  %llu flow%s failed: %s\n", (unsigned long long)m->failed,
             m->failed > 1 ? "s" : "", m->failed_what);
  }
  printf("  results in %s/\n", dir);
}

/* Loads, runs and reports one scenario. */
static int run_one(const char *path, const struct opts *o, const char *dir,
                   char *name, size_t namelen, struct sim_summary *sum) {
  struct sim_cfg cfg;
  char err[1024] = "";
  if (sim_scenario_load(path, &cfg, name, namelen, err, sizeof err)) {
    if (!tool_sim_rank)
      fprintf(stderr, "uroce sim: %s\n", err);
    return 2;
  }
  if (o->seed_set)
    cfg.seed = o->seed;
  if (o->stop)
    cfg.stop_time = o->stop;
  if (o->threads_set)
    cfg.threads = o->threads;
  cfg.trace = o->trace;
  cfg.progress = !o->quiet && isatty(2);
  char outdir[1024];
  if (dir)
    snprintf(outdir, sizeof outdir, "%s", dir);
  else
    snprintf(outdir, sizeof outdir, "sim-out/%s", name);
  struct sim *s = sim_new(&cfg, err, sizeof err);
  sim_cfg_free(&cfg);
  /* MPI ranks go on together or not at all: a rank that could not build
   * its simulator (memory) would leave the others waiting. */
  if (tool_sim_agree && !tool_sim_agree(s != 0)) {
    if (s) {
      snprintf(err, sizeof err,
               "another MPI rank could not build it (out of memory?)");
      sim_del(s);
      s = 0;
    }
  }
  if (!s) {
    if (!tool_sim_rank) /* the ranks run the same: rank 0 says it */
      fprintf(stderr, "uroce sim: %s: %s\n", path, err);
    return 2;
  }
  /* Under mpirun (uroce-sim-mpi) every rank runs its part, and rank 0
   * alone speaks and writes the results. */
  bool rank0 = sim_net_rank(s) == 0;
  if (!o->quiet && rank0)
    fprintf(stderr,
            "uroce sim: %s: %u hosts, %u NICs, %u flows; memory estimate "
            "%.0f MB\n",
            name, sim_nhosts(s), sim_nnics(s), sim_nflows(s),
            (double)sim_mem(s)->total / (1 << 20));
  const char *why;
  uint32_t th = sim_threads(s, &why);
  if (!o->quiet && rank0 && (th > 1 || why))
    fprintf(stderr, "uroce sim: %s: %u %s%s%s%s\n", name, th,
            tool_sim_ranks ? "MPI rank" : "thread", th > 1 ? "s" : "",
            why ? ": " : "", why ? why : "");
  sim_run(s, SIM_NEVER);
  if (!rank0) {
    sim_summarize(s, sum);
    sim_del(s);
    return 0;
  }
  if (tool_mkdirs(outdir)) {
    fprintf(stderr, "uroce sim: %s: %s\n", outdir, strerror(errno));
    sim_del(s);
    return 1;
  }
  int rc = 0;
  if (sim_report_write(s, outdir, o->repro, err, sizeof err)) {
    fprintf(stderr, "uroce sim: %s\n", err);
    rc = 1;
  }
  sim_summarize(s, sum);
  sim_report_coll_table(stdout, s);
  sim_del(s);
  if (!rc && o->plots)
    tool_gnuplot("sim", outdir, "plots.gp");
  print_summary(name, sum, outdir);
  return rc;
}

unsigned tool_sim_rank, tool_sim_ranks;
int (*tool_sim_agree)(int ok);

/* Runs n scenarios into DIR/A, DIR/B, ...; one table (compare.txt too)
 * and one set of plots over all of them. */
static int compare(int n, char **paths, const struct opts *o) {
  const char *base = o->out ? o->out : "sim-out/compare";
  static char names[SIM_COMPARE_MAX][256];
  const char *np[SIM_COMPARE_MAX];
  struct sim_summary sums[SIM_COMPARE_MAX];
  bool coll = true, flows = true;
  for (int i = 0; i < n; i++) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%c", base, 'A' + i);
    int rc = run_one(paths[i], o, dir, names[i], sizeof names[i], &sums[i]);
    if (rc)
      return rc;
    np[i] = names[i];
    if (tool_sim_rank)
      continue; /* rank 0 writes */
    coll &= sums[i].coll_sizes > 0;
    flows &= !sums[i].coll_sizes && sums[i].done;
  }
  if (tool_sim_rank)
    return 0;
  char path[1100];
  snprintf(path, sizeof path, "%s/compare.txt", base);
  FILE *f = fopen(path, "w");
  for (int k = 0; k < 2; k++) {
    FILE *out = k ? f : stdout;
    if (!out)
      continue;
    fputc('\n', out);
    for (int i = 0; i < n; i++)
      fprintf(out, "%c = %s (%s)\n", 'A' + i, names[i], paths[i]);
    sim_report_compare(out, (uint32_t)n, np, sums);
  }
  if (f)
    fclose(f);
  snprintf(path, sizeof path, "%s/compare.gp", base);
  f = fopen(path, "w");
  if (!f)
    return 0;
  fprintf(f, "set datafile separator ','\n"
             "set terminal pngcairo size 900,560 noenhanced\n"
             "set grid\nset key bottom right\n");
  if (coll) {
    /* Collectives have no flows: compare bus bandwidth per size. */
    uint64_t lo = sums[0].coll_min_bytes, hi = sums[0].coll_bytes;
    for (int i = 1; i < n; i++) {
      lo = sums[i].coll_min_bytes < lo ? sums[i].coll_min_bytes : lo;
      hi = sums[i].coll_bytes > hi ? sums[i].coll_bytes : hi;
    }
    fprintf(f,
            "set output 'compare_coll_busbw.png'\n"
            "set title 'bus bandwidth'\nset logscale x 2\n"
            "set format x '%%.0b %%BB'\nset xlabel 'size'\nset xrange "
            "[%g:%g]\nset ylabel 'busbw (GB/s)'\nset yrange [0:*]\nplot ",
            (double)lo / 2, (double)hi * 2);
    for (int i = 0; i < n; i++)
      fprintf(f,
              "'%c/coll.csv' every ::1 using 1:6 with linespoints lw 2 "
              "title '%c: %s', ",
              'A' + i, 'A' + i, names[i]);
    fprintf(f, "'A/coll.csv' every ::1 using 1:8 with lines dt 2 lc rgb "
               "'gray40' title 'bound (A)'\n");
  } else if (flows) {
    fprintf(f, "set logscale x\nset output 'compare_fct_cdf.png'\n"
               "set title 'FCT CDF'\n"
               "set xlabel 'FCT (us)'\nset ylabel 'fraction of flows'\nplot ");
    for (int i = 0; i < n; i++)
      fprintf(f,
              "%s'%c/fct_cdf.csv' every ::1 using 1:2 with steps lw 2 "
              "title '%c: %s'",
              i ? ", " : "", 'A' + i, 'A' + i, names[i]);
    fprintf(f, "\n");
  }
  /* Every run's aggregate receive rate over time. */
  fprintf(f,
          "unset logscale\nset format x '%%g'\nset key bottom left opaque box\n"
          "set output 'compare_throughput.png'\n"
          "set title 'aggregate receive rate'\nset xlabel 'time (us)'\n"
          "set ylabel 'Gb/s'\nset yrange [0:*]\nplot ");
  for (int i = 0; i < n; i++)
    fprintf(f,
            "%s'%c/throughput.csv' every ::1 using 1:2 with lines lw 2 "
            "title '%c: %s'",
            i ? ", " : "", 'A' + i, 'A' + i, names[i]);
  fprintf(f, "\n");
  fclose(f);
  if (o->plots)
    tool_gnuplot("sim", base, "compare.gp");
  return 0;
}

int cmd_sim(int argc, char **argv) {
  static const struct option lo[] = {{"out", required_argument, 0, 'o'},
                                     {"seed", required_argument, 0, 's'},
                                     {"stop-us", required_argument, 0, 't'},
                                     {"threads", required_argument, 0, 'T'},
                                     {"quiet", no_argument, 0, 'q'},
                                     {"no-plots", no_argument, 0, 'P'},
                                     {"reproducible", no_argument, 0, 'r'},
                                     {"compare", no_argument, 0, 'c'},
                                     {"trace", required_argument, 0, 'R'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  struct opts o = {.plots = true};
  bool cmp = false;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "o:qh", lo, 0)) != -1) {
    char *e;
    switch (c) {
    case 'o':
      o.out = optarg;
      break;
    case 's':
      o.seed = strtoull(optarg, &e, 10);
      if (*e || !*optarg) {
        fprintf(stderr, "uroce sim: --seed: expected an integer\n");
        return 2;
      }
      o.seed_set = true;
      break;
    case 't': {
      double t = strtod(optarg, &e);
      if (*e || t <= 0) {
        fprintf(stderr, "uroce sim: --stop-us: expected a positive number\n");
        return 2;
      }
      o.stop = (sim_time_t)(t * 1e6);
      break;
    }
    case 'T': {
      unsigned long t = strtoul(optarg, &e, 10);
      if (*e || !*optarg || t > 256 || optarg[0] == '-') {
        fprintf(stderr, "uroce sim: --threads: expected 0 to 256\n");
        return 2;
      }
      o.threads = (uint32_t)t;
      o.threads_set = true;
      break;
    }
    case 'q':
      o.quiet = true;
      break;
    case 'P':
      o.plots = false;
      break;
    case 'r':
      o.repro = true;
      break;
    case 'c':
      cmp = true;
      break;
    case 'R':
      o.trace = optarg;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  int n = argc - optind;
  if (cmp ? n < 2 || n > SIM_COMPARE_MAX : n != 1) {
    usage(stderr);
    return 2;
  }
  if (cmp && o.trace) {
    fprintf(stderr, "uroce sim: --trace traces one scenario, not a "
                    "--compare run\n");
    return 2;
  }
  if (cmp)
    return compare(n, argv + optind, &o);
  char name[256];
  struct sim_summary sum;
  return run_one(argv[optind], &o, o.out, name, sizeof name, &sum);
}
