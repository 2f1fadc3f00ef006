/* uroce plan: size an AI-training cluster network (InfiniBand, RoCEv2 or
 * UET-style; NIC:GPU ratio; leaf-spine, fat-tree or rail-optimised), price
 * its bill of materials from a parts catalogue, and estimate the step time
 * of a training workload analytically and, where the simulator can run it,
 * packet by packet (see docs/plan.md).
 *
 * plan_spec_load() reads a spec and its catalogues, plan_enumerate() lists
 * the options it implies, plan_bom() sizes and prices one, plan_model()
 * estimates its performance and plan_probe() measures the network phases
 * with src/sim. Errors are written to err as "file:line: key: message". */
#ifndef UROCE_PLAN_PLAN_H
#define UROCE_PLAN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLAN_NAME 64
#define PLAN_SRC 200
#define PLAN_MAX_LIST 16
#define PLAN_MAX_PARTS 128

enum plan_fabric { PLAN_IB, PLAN_ROCE, PLAN_UET, PLAN_NFABRIC };
/* Which parts a fabric uses: InfiniBand parts, or Ethernet parts. */
enum plan_family { PLAN_FAM_IB, PLAN_FAM_ETH };

enum plan_part_kind {
  PLAN_PART_NIC,
  PLAN_PART_SWITCH,
  PLAN_PART_DAC,         /* passive copper, whole cable */
  PLAN_PART_AOC,         /* active optical, whole cable */
  PLAN_PART_TRANSCEIVER, /* one end; a link takes two plus fibre */
  PLAN_PART_FIBRE,       /* price per metre */
};

struct plan_part {
  char name[PLAN_NAME];
  enum plan_part_kind kind;
  enum plan_family family;
  double speed_gbps; /* port speed (NIC, switch port, cable) */
  uint32_t radix;    /* switches: ports at speed_gbps */
  double reach_m;    /* cables and transceivers */
  double price_usd;  /* per unit (fibre: per metre) */
  double power_w;    /* per unit (transceiver: per end) */
  double latency_ns; /* NIC or switch port-to-port; 0 = unknown */
  char source[PLAN_SRC];
  char file[256]; /* where this entry came from, for messages */
  size_t line;
};

struct plan_catalogue {
  uint32_t n;
  struct plan_part part[PLAN_MAX_PARTS];
};

struct plan_topo {
  char name[PLAN_NAME];
  uint32_t tiers; /* 2: leaf-spine, 3: fat-tree */
  double oversub; /* leaf down:up bandwidth, >= 1 */
  bool rail;      /* NIC i of every server on leaf group i */
};

/* A collective of a training step, as nccl-tests sizes it: allreduce and
 * reduce-scatter by the buffer each GPU reduces, all-gather by the buffer
 * each GPU ends with, all-to-all by what each GPU sends. */
enum plan_coll {
  PLAN_C_ALLREDUCE,
  PLAN_C_REDUCE_SCATTER,
  PLAN_C_ALLGATHER,
  PLAN_C_ALLTOALL,
  PLAN_NCOLL
};
extern const char *const plan_coll_name[PLAN_NCOLL];

struct plan_coll_op {
  enum plan_coll kind;
  double bytes;
  uint32_t count; /* times per step */
};
#define PLAN_MAX_OPS 4096

struct plan_spec {
  char path[512], name[PLAN_NAME];
  uint32_t gpus, gpus_per_server;
  uint32_t nratios, ratio_nic[PLAN_MAX_LIST], ratio_gpu[PLAN_MAX_LIST];
  uint32_t nspeeds;
  double speeds[PLAN_MAX_LIST];
  uint32_t nfabrics;
  enum plan_fabric fabrics[PLAN_NFABRIC];
  uint32_t ntopos;
  struct plan_topo topos[PLAN_MAX_LIST];
  uint32_t nradices, radices[PLAN_MAX_LIST];
  /* Workload, per training step. */
  double allreduce_bytes; /* gradients, per GPU (data parallel) */
  double alltoall_bytes;  /* MoE dispatch+combine, sent per GPU per step */
  char trace[512];        /* a collective trace (CSV), "" if none */
  /* The step's collectives: the trace's lines in order, then
   * allreduce_bytes and alltoall_bytes. */
  uint32_t nops;
  struct plan_coll_op ops[PLAN_MAX_OPS];
  double coll_bytes[PLAN_NCOLL]; /* per step, by kind (count included) */
  double compute_s;       /* compute per step */
  double overlap;         /* share of compute that hides communication */
  double nvlink_gbs;      /* intra-server bandwidth per GPU, GB/s */
  /* Floor model. */
  uint32_t servers_per_rack, racks_per_row;
  double rack_width_m, row_pitch_m, slack_m;
  /* Packet-level simulation. */
  bool simulate;
  uint32_t sim_max_nics; /* above this, analytical only */
  double probe_bytes;    /* per flow in each probe */
  uint32_t a2a_phases;   /* shift phases sampled for the all-to-all */
  uint64_t seed;
  struct plan_catalogue cat;
  char catalogues[4][512];
  uint32_t ncatalogues;
  /* Lines of keys that later errors name (0 = not given). */
  size_t line_speeds, line_radices, line_fabrics, line_topos;
};

/* Loads a spec and the catalogues it names (later ones override earlier
 * entries of the same name). Returns 0, or -1 with a message in err. */
int plan_spec_load(const char *path, struct plan_spec *sp, char *err,
                   size_t errlen);
/* The same from text (tests); base is the folder for relative paths. */
int plan_spec_parse(const char *text, size_t len, const char *label,
                    const char *base, struct plan_spec *sp, char *err,
                    size_t errlen);
/* Appends a collective trace's lines to sp->ops: CSV lines
 * "collective,bytes[,count]" (allreduce, reduce_scatter, allgather,
 * alltoall; a size such as 64MiB; times per step, default 1), '#'
 * comments and blank lines skipped. -1 with "label:line: column: why". */
int plan_trace_parse(const char *text, size_t len, const char *label,
                     struct plan_spec *sp, char *err, size_t errlen);
/* Adds (or replaces by name) the parts of a catalogue file. */
int plan_catalogue_load(const char *path, struct plan_catalogue *cat, char *err,
                        size_t errlen);
int plan_catalogue_parse(const char *text, size_t len, const char *label,
                         struct plan_catalogue *cat, char *err, size_t errlen);
const struct plan_part *plan_part_find(const struct plan_catalogue *cat,
                                       const char *name);

/* ---- The bill of materials. ---- */

enum plan_bom_line {
  PLAN_BOM_NIC,
  PLAN_BOM_SW1, /* leaf / edge */
  PLAN_BOM_SW2, /* spine / aggregation */
  PLAN_BOM_SW3, /* core */
  PLAN_BOM_CABLE,
  PLAN_BOM_OPTIC,
  PLAN_BOM_FIBRE,
  PLAN_BOM_NLINES
};

struct plan_bom_item {
  const struct plan_part *part;
  enum plan_bom_line line;
  double qty; /* units (fibre: metres) */
  double cost, power;
};

#define PLAN_BOM_MAX 48
struct plan_option {
  char name[96];
  enum plan_fabric fabric;
  struct plan_topo topo;
  double speed_gbps;
  uint32_t radix;
  uint32_t ratio_nic, ratio_gpu;
  /* Sizing. */
  uint32_t servers, nics_per_server, nics;
  uint32_t down, up;         /* leaf ports: to NICs, to the next tier */
  uint32_t sw[4];            /* switches per tier 1..3 */
  uint32_t leaves_per_group; /* rail: leaves per rail; else all leaves */
  uint32_t pods, per_pod;    /* 3-tier: pods and leaves per pod */
  uint32_t links[3];         /* NIC-leaf, leaf-spine, spine-core */
  uint64_t ports_used, ports_total;
  double oversub; /* achieved down:up at the leaf */
  bool feasible;
  char why[200]; /* when not feasible */
  /* Parts and totals. */
  const struct plan_part *nic, *swp;
  uint32_t nitems;
  struct plan_bom_item item[PLAN_BOM_MAX];
  double capex, power_w, line_cost[PLAN_BOM_NLINES];
  double cable_len[3]; /* mean length per tier, m */
};

/* Enumerates every option of a spec (fabrics x ratios x speeds x topologies
 * x radices) into out (up to max). Returns the count, or -1 with err (a
 * needed part missing from the catalogue names the spec key). */
int plan_enumerate(const struct plan_spec *sp, struct plan_option *out,
                   uint32_t max, char *err, size_t errlen);
/* Sizes the topology and prices the parts (called by plan_enumerate). */
int plan_bom(const struct plan_spec *sp, struct plan_option *o, char *err,
             size_t errlen);
/* The leaf (global index) that NIC i of server s attaches to. */
uint32_t plan_leaf_of(const struct plan_option *o, uint32_t server,
                      uint32_t nic);

/* ---- Performance. ---- */

/* Payload bytes per wire byte of a full data packet of the fabric. */
double plan_wire_efficiency(enum plan_fabric f, uint32_t mtu,
                            uint32_t *wire_bytes);
/* E[max load] of m balls thrown uniformly into several groups of bins:
 * groups g has balls[g] balls and bins[g] bins; the max is over all bins of
 * all groups (groups independent). */
double plan_expected_max_load(const uint32_t *balls, const uint32_t *bins,
                              uint32_t ngroups);

/* The network phases the workload needs, per NIC. */
struct plan_phase_times {
  double ring_factor; /* probe time / ideal (bytes / effective rate) */
  double a2a_factor;  /* mean over the sampled shift phases */
  /* Probes with ECMP: the most flows on one link as the simulator's hash
   * placed them (the analytical factor given that placement); 0 if not
   * ECMP. */
  double ring_hashed, a2a_hashed;
  /* The all-to-all phases were probed (the step has an all-to-all);
   * otherwise a2a_factor is 1 and means nothing. */
  bool a2a;
  /* A lossy fabric offered more than a link's rate in some phase: drops
   * and their recovery are outside the analytical model. */
  bool lossy_saturated;
  /* So did InfiniBand: credit back-pressure (head-of-line blocking) and
   * the arbitration among a port's inputs are outside it too, and the
   * model's time is a lower bound. */
  bool credit_saturated;
  bool valid;
};

struct plan_perf {
  double eff, rate_gbps; /* payload efficiency, goodput per NIC */
  double alpha_us;       /* per-step latency of the inter-server rings */
  double t_allreduce_s, t_alltoall_s, t_comm_s, t_step_s;
  double t_ar_nvlink_s, t_ar_net_s, t_a2a_net_s;
  double t_rs_ag_s;      /* reduce-scatters and all-gathers */
  double busbw_ar_gbps;  /* per GPU, nccl-tests definition, Gb/s */
  double busbw_a2a_gbps; /* per GPU */
  double busbw_rs_ag_gbps;
  /* The headline bus bandwidth: allreduce's, else the reduce-scatters'
   * and all-gathers', else the all-to-alls' (plan_headline_coll). */
  double busbw_gbps;
  double usd_per_gbps; /* network capex / (GPUs x busbw_gbps) */
  struct plan_phase_times phases;
};

/* Analytical phase factors for an option (fluid for spraying and adaptive
 * routing, balls-in-bins for ECMP). */
void plan_model_phases(const struct plan_spec *sp, const struct plan_option *o,
                       struct plan_phase_times *ph);
/* Shift (in servers) of sampled all-to-all phase j of k. */
uint32_t plan_a2a_shift(uint32_t servers, uint32_t k, uint32_t j);
/* How many all-to-all shift phases to probe for option o: a2a_phases,
 * at most one per other server, and none when the step has no
 * all-to-all (its factor would be measured for nothing). */
uint32_t plan_a2a_probes(const struct plan_spec *sp,
                         const struct plan_option *o);
/* Time the last flow of a probe phase needs besides its bytes: the path's
 * propagation there and back and store-and-forward at each switch (us). */
double plan_probe_latency_us(const struct plan_option *o);
/* Which bus bandwidth heads a spec's table: PLAN_C_ALLREDUCE when the
 * step has an allreduce, else PLAN_C_REDUCE_SCATTER (reduce-scatters and
 * all-gathers together), else PLAN_C_ALLTOALL. */
enum plan_coll plan_headline_coll(const struct plan_spec *sp);
/* Step time and bandwidths from phase factors (analytical or measured). */
void plan_perf_from(const struct plan_spec *sp, const struct plan_option *o,
                    const struct plan_phase_times *ph, struct plan_perf *p);

/* Whether the simulator can run the option, and if not why. */
bool plan_probe_possible(const struct plan_spec *sp,
                         const struct plan_option *o, char *why, size_t len);
/* Measures the phase factors with the packet-level simulator. progress
 * (may be NULL) is called after each probe run. Returns 0 or -1 with err. */
struct plan_probe_stats {
  double wall_s;
  uint64_t events, flows, drops, pauses;
  uint64_t trims; /* data packets trimmed (UET-style) */
};
int plan_probe(const struct plan_spec *sp, const struct plan_option *o,
               struct plan_phase_times *ph, struct plan_probe_stats *st,
               void (*progress)(void *, const char *), void *arg, char *err,
               size_t errlen);

const char *plan_fabric_name(enum plan_fabric f);
const char *plan_bom_line_name(enum plan_bom_line l);

#endif
