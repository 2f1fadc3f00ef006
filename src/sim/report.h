/* Simulation output: summary.json, CSV time series, a gnuplot script, and
 * a side-by-side comparison of two runs. */
#ifndef UROCE_SIM_REPORT_H
#define UROCE_SIM_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "sim/sim.h"

/* Headline figures of one run (also what --compare prints). */
struct sim_summary {
  uint64_t flows, done, bytes;
  /* Flows that ended in error (their QP failed), and what a user reads
   * about them: the first few, each "id (src->dst)", and the status. */
  uint64_t failed;
  char failed_what[256];
  double fct_us[7];     /* min, p50, p90, p99, p99.9, max, mean */
  double tput_gbps[5];  /* per-flow bytes / FCT: min, p1, p50, mean, max */
  double completion_us; /* last flow finished */
  double goodput_gbps;  /* bytes of the finished flows / completion */
  uint64_t drops, drops_wire, pauses, ecn_marks, retx, timeouts, cnps;
  uint64_t max_queue[SIM_TIERS];
  uint64_t events;
  double wall_s;
  const char *fabric, *routing;
  uint64_t lost_failures, fc_pkts;
  double recovery_us; /* the longest recovery from a failure; 0: none */
  /* A collective workload (coll_sizes > 0): the largest finished size. */
  uint32_t coll_sizes, coll_done, coll_ranks;
  const char *coll_name;
  uint64_t coll_bytes, coll_min_bytes; /* largest and smallest finished */
  double coll_time_us, coll_busbw, coll_bound_busbw, coll_ratio;
  /* A rank of it failed (the first: which, when, why); the sizes not
   * done are missing. */
  bool coll_failed;
  uint32_t coll_fail_rank;
  double coll_fail_us;
  char coll_fail_why[256];
};

void sim_summarize(const struct sim *s, struct sim_summary *out);

/* Names of switch tiers 1..3 for the configured topology ("leaf",
 * "spine", "" / "edge", "agg", "core"). */
const char *sim_tier_name(const struct sim_cfg *c, int tier);

/* FCT of a flow of bytes from NIC src to dst alone in the fabric: line
 * time at the source plus the path's propagation and store-and-forward;
 * the slowdown is FCT over this. */
double sim_ideal_fct_us(const struct sim *s, uint32_t src, uint32_t dst,
                        uint64_t bytes);

/* Writes summary.json, flows.csv, fct_cdf.csv, queues.csv, pfc.csv,
 * throughput.csv and plots.gp into dir (which must exist). With
 * reproducible, wall-clock figures are left out of summary.json so that
 * equal runs give equal files. Returns 0 or -1 with a message. */
int sim_report_write(const struct sim *s, const char *dir, bool reproducible,
                     char *err, size_t errlen);

/* Prints the collective workload's table (size, time, algbw, busbw, bound,
 * ratio); nothing if the workload is not a collective. */
void sim_report_coll_table(FILE *out, const struct sim *s);

/* Prints n runs' summaries side by side (at most SIM_COMPARE_MAX), each
 * after the first also relative to the first ("B vs A"). */
#define SIM_COMPARE_MAX 8
void sim_report_compare(FILE *out, uint32_t n, const char *const *names,
                        const struct sim_summary *sums);

#endif
