/* The fabric simulator: a discrete-event, packet-level model of RoCEv2
 * NICs, links and switches (see docs/sim.md).
 *
 * Build a struct sim_cfg (by hand or with sim_scenario_load()), create a
 * simulator with sim_new(), optionally add flows with sim_add_flow() (the
 * configured workload adds its own), then sim_run() until every flow is
 * done or a time limit. Results are read from sim_stats(), sim_flow() and
 * the report writers in report.h. Time is integer picoseconds. The same
 * configuration and seed give bit-identical results. */
#ifndef UROCE_SIM_SIM_H
#define UROCE_SIM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/cc_dcqcn.h"

typedef uint64_t sim_time_t; /* picoseconds */
#define SIM_NEVER UINT64_MAX
#define SIM_NS 1000ull
#define SIM_US 1000000ull
#define SIM_MS 1000000000ull
#define SIM_NPRIO 8
#define SIM_TIERS 4 /* 0 hosts, 1 leaf/edge, 2 spine/agg, 3 core */

/* Bytes a frame costs on the wire besides the RoCEv2 packet (BTH..ICRC):
 * UDP 8, IPv4 20 (IPv6 40), Ethernet header 14 and FCS 4, and preamble,
 * start delimiter and inter-frame gap (20), which take line time too. */
#define SIM_UDP_LEN 8
#define SIM_ETH_LEN 18
#define SIM_L1_LEN 20
#define SIM_PAUSE_WIRE (64 + SIM_L1_LEN) /* an 802.1Qbb PFC frame */

/* InfiniBand framing around BTH..ICRC: the local route header, the global
 * route header when present, the variant CRC, and the start and end
 * delimiters on the wire. Credits count the packet from LRH to VCRC in
 * 64-byte blocks. A flow-control packet is 4 bytes and a 2-byte CRC. */
#define SIM_IB_LRH_LEN 8
#define SIM_IB_GRH_LEN 40
#define SIM_IB_VCRC_LEN 2
#define SIM_IB_L1_LEN 2
#define SIM_IB_BLOCK 64
#define SIM_IB_FC_WIRE (6 + SIM_IB_L1_LEN)

/* IBA's period of flow-control packets, 65,536 symbol times, on a 4x
 * link of rate_bps (data bits per second): a symbol time carries one
 * byte on each of the 4 lanes, so the period is 2^21 bit times (20.97 us
 * at 100 Gb/s). */
static inline sim_time_t sim_ib_fc_period(uint64_t rate_bps) {
  return (sim_time_t)((2097152.0 * 1e12) / (double)rate_bps + 0.5);
}

/* The link layer a scenario models. */
enum sim_fabric {
  SIM_FABRIC_ROCE, /* Ethernet: shared buffers, PFC, ECN, drops */
  SIM_FABRIC_IB,   /* InfiniBand: per-VL input buffers and credits */
};

/* A VL arbitration table entry: VL vl may send weight x 64 bytes when
 * its turn comes (a packet starts while any weight is left). */
struct sim_vlarb_ent {
  uint8_t vl, weight;
};
#define SIM_VLARB_MAX 64
#define SIM_VLARB_UNLIMITED 255

/* The subnet manager (sm.c): how it computes the LFTs and what its
 * sweep costs. */
enum sim_sm_engine {
  SIM_SM_FTREE,  /* fat-tree aware: D-mod-k over the up ports */
  SIM_SM_MINHOP, /* shortest paths, ports balanced by routes assigned */
  SIM_SM_UPDN,   /* up/down: shortest legal paths, deadlock-free anywhere */
};
/* "ftree", "minhop", "updn" */
const char *sim_sm_engine_name(enum sim_sm_engine e);

struct sim_sm_cfg {
  enum sim_sm_engine engine;
  uint8_t lmc;            /* 2^lmc LIDs (paths) per NIC, 0..7 */
  uint32_t max_wire_smps; /* SMPs the SM keeps outstanding */
  sim_time_t smp_proc;    /* an SMA answering one SMP */
  sim_time_t route_time;  /* computing one LFT entry */
  /* OpenSM's sweep_interval: a periodic (light) sweep at every multiple
   * of it from time 0 notices the changes no trap reported; 0: no
   * periodic sweeps, OpenSM's meaning of 0. Default 10 s, OpenSM's. */
  sim_time_t sweep_interval;
  /* A standby SM on NIC standby_nic (UINT32_MAX: none; the master runs on
   * NIC 0): it sends the master an SMInfo Get (a directed-route SMP on
   * VL15) every polling_timeout and takes over when polling_retries polls
   * in a row had no answer by the next one (OpenSM's
   * sminfo_polling_timeout, 10 s, and polling_retry_number, 4) and the
   * master is not reachable, then sweeps the fabric from its own NIC. */
  uint32_t standby_nic;
  sim_time_t polling_timeout;
  uint32_t polling_retries;
  /* An SMP without an answer after smp_timeout is sent again, at most
   * smp_retries times (OpenSM's transaction_timeout, 200 ms, and
   * transaction_retries, 3). */
  sim_time_t smp_timeout;
  uint32_t smp_retries;
};

/* IB congestion control (IBA annex A10, simplified): a switch egress
 * whose VL queue exceeds threshold while it has credit (the root of the
 * congestion, not a victim) sets FECN on one data packet in marking_rate;
 * the destination answers with a BECN; the source raises its CCT index
 * for that SL by ccti_increase (up to ccti_limit) and lowers it by one
 * each ccti_timer; data of the SL then waits index x ird_step after each
 * packet (a linear congestion control table). */
struct sim_ibcc_cfg {
  bool enabled;
  uint64_t threshold;
  uint32_t marking_rate, ccti_increase, ccti_limit;
  sim_time_t ccti_timer, ird_step;
};

struct sim_ib_cfg {
  struct sim_ibcc_cfg cc;
  struct sim_sm_cfg sm;
  /* VL arbitration: the high table is served first until high_limit x
   * 4 KiB went out while low had packets (255: no limit, 0: one packet);
   * nhigh = nlow = 0 at sim_new: defaults (docs/sim.md). */
  struct sim_vlarb_ent high[SIM_VLARB_MAX], low[SIM_VLARB_MAX];
  uint8_t nhigh, nlow, high_limit;
  uint64_t vl_buffer;    /* input buffer per port and VL, bytes */
  sim_time_t fc_latency; /* buffer freed to flow-control packet due */
  /* A port sends an FC packet for every data VL at least once per
   * fc_period while it has traffic (IBA 7.9.4); 0: IBA's 65,536 symbol
   * times of a 4x link at the port's rate (sim_ib_fc_period); else at
   * least 10 ns. */
  sim_time_t fc_period;
  bool grh;              /* every packet carries a GRH */
  uint64_t vl15_buffer;  /* VL15 input buffer per port, bytes */
  uint8_t vls;           /* data VLs: 1, 2, 4 or 8; SL s uses VL s % vls */
};

struct sim_link_cfg {
  uint64_t rate_bps;
  sim_time_t delay; /* propagation, one way */
  double loss;      /* probability that a frame is lost on the wire */
};

enum sim_topo_kind {
  SIM_TOPO_LEAF_SPINE, /* leaves = 1 makes a single switch */
  SIM_TOPO_FAT_TREE,   /* 3-tier k-ary fat-tree, k^3/4 hosts */
};

struct sim_topo_cfg {
  enum sim_topo_kind kind;
  uint32_t leaves;         /* leaf-spine: leaves per rail */
  uint32_t hosts_per_leaf; /* leaf-spine */
  uint32_t spines;         /* leaf-spine; 0 = from oversubscription */
  double oversubscription; /* host bandwidth / uplink bandwidth per leaf */
  uint32_t k;              /* fat-tree arity (even) */
  uint32_t rails;          /* NICs per host (leaf-spine); 1 = none */
  /* Per tier: [0] host-leaf, [1] leaf-spine (edge-agg), [2] agg-core. */
  struct sim_link_cfg link[3];
};

struct sim_switch_cfg {
  uint64_t buffer_bytes; /* shared by all ports of a switch */
  uint64_t qmax_bytes;   /* lossy: per-queue cap, 0 = only the buffer */
  double dt_alpha;       /* lossy: dynamic threshold, a queue may hold
                          * dt_alpha x the free buffer; 0 = off */
  bool ecn;
  uint64_t kmin, kmax; /* bytes of the egress queue */
  double pmax;
  bool pfc;
  uint8_t pfc_prios;  /* mask of lossless priorities */
  uint64_t xoff, xon; /* bytes per ingress port and priority */
  int64_t headroom;   /* bytes above xoff; < 0 = from the link */
  /* Packet trimming (UET, NDP): a lossy queue that would overflow cuts a
   * data packet to its headers, which go ahead of data through a trim
   * queue of trim_queue bytes per port (beyond it they are dropped). */
  bool trim;
  uint64_t trim_queue;
};

enum sim_routing {
  SIM_ROUTE_ECMP,     /* hash of the 5-tuple, UDP source port included */
  SIM_ROUTE_ADAPTIVE, /* least-loaded eligible egress, per packet */
  SIM_ROUTE_SPRAY,    /* random eligible egress, per packet */
  SIM_ROUTE_STATIC,   /* InfiniBand LFT: up port by destination LID */
};

enum sim_cc { SIM_CC_NONE, SIM_CC_DCQCN, SIM_CC_SWIFT };

/* What runs in the NICs. */
enum sim_host_model {
  SIM_HOST_UROCE,  /* the real uroce transport engine, phantom payload */
  SIM_HOST_SIMPLE, /* the built-in one-message-per-QP RDMA WRITE model */
};

struct sim_transport_cfg {
  enum sim_host_model model;
  uint32_t mtu;       /* path MTU: payload bytes per packet */
  uint32_t window;    /* unacknowledged packets per QP (power of two) */
  uint32_t ack_every; /* the responder acks every N packets and each last */
  sim_time_t rto;     /* retransmit timeout (go-back-N) */
  /* Retries of a QP without progress (timeouts, and in the uroce model
   * sequence NAKs) before it fails with "transport retry counter
   * exceeded", as verbs' retry_cnt; 7: unlimited, as the engine reads
   * it. Default 6 (NCCL's IB_RETRY_CNT is 7, which real NICs read as 7
   * retries). */
  uint8_t retry_cnt;
  int ooo;            /* accept out-of-order packets: 1, 0, -1 = auto */
  uint32_t paths;     /* uroce: source ports a QP sprays over (1 = off) */
  bool ipv6;
  uint8_t data_prio, ctrl_prio;
  enum sim_cc cc;
  struct uroce_dcqcn_params dcqcn; /* line_rate 0 = preset from the NIC */
};

enum sim_workload_kind {
  SIM_WL_NONE, /* only flows added with sim_add_flow */
  SIM_WL_PERMUTATION,
  SIM_WL_INCAST,
  SIM_WL_ALL_TO_ALL,
  SIM_WL_CSV,
  SIM_WL_COLLECTIVE, /* a collective of src/coll on simulated ranks */
};

#define SIM_COLL_MAX_SIZES 64
/* all_to_all connects every pair of ranks: n (n - 1) QPs in all. */
#define SIM_COLL_A2A_MAX 256

/* The collective workload: one uroce_coll communicator per rank (rank i on
 * NIC i), run in phantom mode over the NICs' engines; each size runs once,
 * all ranks starting together when every rank finished the previous one.
 * Enums are those of include/uroce/coll.h. */
struct sim_coll_cfg {
  int kind;        /* uroce_coll_kind */
  int algo;        /* uroce_coll_algo; AUTO = uroce_coll_choose_algo() */
  int dtype;       /* uroce_coll_dtype */
  uint32_t ranks;  /* 0: every NIC */
  uint32_t nsizes; /* bytes per collective, as nccl-tests counts them */
  uint64_t sizes[SIM_COLL_MAX_SIZES];
  uint64_t chunk_bytes; /* communicator's chunk; 0 = its default */
  uint32_t slots;       /* communicator's slots; 0 = its default */
  int placement;        /* 0: rank i on NIC i; 1: NICs in a random order
                           (servers in a random order with ranks_per_host) */
  /* Servers of several ranks (GPUs): ranks_per_host ranks and
   * nics_per_host NICs per server (NIC:GPU 1:1 when equal, 1:4 with a
   * quarter as many NICs); a server's NICs are consecutive fabric hosts.
   * Ranks of one server talk over an intra-host link (NVLink-like) of
   * intra_gbps each way per rank after intra_latency_us, never the NIC.
   * 0: one rank per NIC (the default). */
  uint32_t ranks_per_host, nics_per_host;
  double intra_gbps, intra_latency_us;
};

/* A collective's ranks per server and NICs per server, defaults resolved
 * (one rank per NIC; as many NICs as ranks). */
static inline uint32_t sim_coll_per_host(const struct sim_coll_cfg *c) {
  return c->ranks_per_host ? c->ranks_per_host : 1;
}
static inline uint32_t sim_coll_nics_per_host(const struct sim_coll_cfg *c) {
  return c->nics_per_host ? c->nics_per_host : sim_coll_per_host(c);
}

enum sim_op { SIM_OP_WRITE, SIM_OP_SEND, SIM_OP_READ /* uroce model */ };

/* A message-size distribution: sizes with cumulative probabilities. */
struct sim_size_dist {
  uint32_t n;
  uint64_t *bytes;
  double *cdf; /* increasing, last = 1 */
};

struct sim_workload_cfg {
  enum sim_workload_kind kind;
  uint64_t bytes;            /* per flow, unless a distribution is given */
  struct sim_size_dist dist; /* n = 0: fixed size */
  uint32_t incast_senders;   /* incast: N */
  uint32_t incast_receiver;  /* incast: the host receiving */
  sim_time_t start;          /* generated flows start here */
  char csv_path[512];        /* CSV: time_us,src,dst,bytes,op */
  char dist_path[512];       /* where dist came from (for reports) */
  struct sim_coll_cfg coll;  /* kind collective */
};

/* A failure: a switch-to-switch link (switch sw's port) or a whole
 * switch (spine, aggregation or core) goes down at `at`, and up again
 * up_after later (0: stays down). */
enum sim_fail_kind { SIM_FAIL_LINK, SIM_FAIL_SWITCH };
#define SIM_FAIL_MAX 16
struct sim_failure {
  enum sim_fail_kind kind;
  uint32_t sw;
  uint16_t port;
  sim_time_t at, up_after;
  /* InfiniBand: no trap reaches the SM for this failure's changes (down
   * and up): lost, or the switch that would send it is the one that
   * failed. Only a sweep (another change's, or a periodic one) sees it. */
  bool trap_lost;
};

/* How the fabric reacts. RoCE: a link change is detected after
 * `detection`, then routing converges (ECMP groups shrink or grow) after
 * `convergence`. InfiniBand: the switch traps to the SM (`trap`), which
 * sweeps, recomputes and reprograms the LFTs (modelled times, sm.c);
 * without traps (traps false, or a failure's trap_lost) the SM's next
 * periodic sweep (ib.sm.sweep_interval) notices the change instead. */
struct sim_recovery_cfg {
  sim_time_t detection, convergence; /* RoCE */
  sim_time_t trap;                   /* InfiniBand */
  bool traps;                        /* InfiniBand: switches send traps */
};

struct sim_cfg {
  uint64_t seed;
  uint32_t nfail;
  struct sim_failure fail[SIM_FAIL_MAX];
  struct sim_recovery_cfg recovery;
  enum sim_fabric fabric;
  struct sim_ib_cfg ib;
  struct sim_topo_cfg topo;
  struct sim_switch_cfg sw;
  enum sim_routing routing;
  struct sim_transport_cfg tp;
  struct sim_workload_cfg wl;
  sim_time_t stop_time;       /* SIM_NEVER: until every flow is done */
  sim_time_t sample_interval; /* time series; 0 = none */
  uint32_t series_flows;      /* per-flow throughput series for this many */
  bool progress;              /* progress bar on stderr */
  /* Threads a run uses, one partition of the fabric each (docs/sim.md,
   * "Parallel simulation"); 0: every CPU this process may run on. The
   * results do not depend on it. */
  uint32_t threads;
  /* Refuse a scenario whose memory estimate exceeds this many bytes;
   * 0: what the machine has available (MemAvailable). */
  uint64_t mem_limit;
  /* Append every NIC engine's events here as JSON lines (uroce host
   * model; docs/transport.md "Trace"); NULL: none. A traced run uses one
   * thread, so that the lines come in event order. */
  const char *trace;
};

/* Reads a size distribution: lines of "bytes cdf" (space or comma), both
 * non-decreasing, the last cdf 1; '#' starts a comment. Sizes between two
 * points are interpolated. Returns 0, or -1 with a message naming the line. */
int sim_size_dist_load(const char *path, struct sim_size_dist *d, char *err,
                       size_t errlen);

/* Fills cfg with defaults: a 4x8 non-blocking leaf-spine at 100 Gb/s, 1 us
 * links, 4 KiB MTU, 32 MB buffers, PFC on priority 3, ECN off, ECMP,
 * no workload. */
void sim_cfg_default(struct sim_cfg *cfg);
/* Frees what a loaded configuration owns (the size distribution). */
void sim_cfg_free(struct sim_cfg *cfg);

struct sim;

/* A flow: one message from NIC src to NIC dst. */
struct sim_flow {
  uint32_t id, src, dst;
  uint64_t bytes;
  sim_time_t start, finish; /* finish = SIM_NEVER until acked */
  /* When its requester's QP failed (its work completed in error), else
   * SIM_NEVER; status: that completion's status (enum uroce_wc_status,
   * uroce_wc_status_str() names it), 0 while none. A failed flow never
   * finishes. */
  sim_time_t failed;
  uint8_t status;
  uint64_t acked;           /* bytes acknowledged so far */
  uint64_t rx_bytes;        /* payload placed at the responder so far */
  uint64_t tx_pkts, retx_pkts;         /* data packets its requester sent */
  uint64_t rsp_tx_pkts, rsp_retx_pkts; /* and its responder (READ) */
  uint16_t sport;
  uint8_t op;
  uint8_t sl; /* priority (RoCE) or service level (IB) of its data */
  void *st;   /* host-model state */
};

struct sim_stats {
  uint64_t events;
  double wall_s;
  sim_time_t now;
  uint64_t flows, flows_done;
  uint64_t flows_failed; /* ended with an error completion (sim_flow.status) */
  uint64_t data_pkts, ctrl_pkts; /* sent by NICs */
  uint64_t retx_pkts, timeouts, naks, cnps;
  uint64_t drops_buffer[SIM_TIERS];   /* lossy tail drops */
  uint64_t trims[SIM_TIERS];          /* data packets trimmed instead */
  uint64_t drops_trim[SIM_TIERS];     /* trimmed headers beyond the trim
                                         queue */
  uint64_t drops_lossless[SIM_TIERS]; /* PFC headroom overflow */
  uint64_t drops_wire;                /* random link loss */
  uint64_t drops_noroute;             /* no LFT entry (InfiniBand) */
  uint64_t drops_link_down;           /* lost to failed links */
  uint64_t ecn_marks[SIM_TIERS];
  uint64_t pause_frames[SIM_TIERS];  /* XOFF frames sent by that tier */
  sim_time_t paused_time[SIM_TIERS]; /* port-time spent paused, by tier */
  uint64_t max_queue[SIM_TIERS];     /* largest egress queue, bytes */
  uint64_t max_buffer[SIM_TIERS];    /* largest shared-buffer use */
  uint64_t pkts_allocated;           /* descriptor pool size */
  uint64_t rx_payload;               /* data payload arrived at NICs */
  /* InfiniBand link layer. */
  uint64_t fc_pkts;                  /* flow-control packets sent */
  uint64_t fc_periodic;              /* of them, sent by the period alone */
  uint64_t credit_overruns;          /* packets beyond an input buffer: 0 */
  uint64_t max_vl_in[SIM_TIERS];     /* fullest input VL buffer, bytes */
  sim_time_t credit_wait[SIM_TIERS]; /* port-time queued, no credit */
  uint64_t vl_tx_bytes[SIM_NPRIO];   /* wire bytes switches sent per VL */
  uint64_t fecn_marks, becns;        /* IB congestion control */
  /* VL15 (management): packets and wire bytes switches sent, packets a
   * full VL15 input buffer dropped, packets lost to failed links. */
  uint64_t vl15_pkts, vl15_bytes, vl15_drops, vl15_lost;
};

/* Creates a simulator (topology, hosts, workload flows). On error returns
 * NULL and writes a message to err. */
struct sim *sim_new(const struct sim_cfg *cfg, char *err, size_t errlen);
void sim_del(struct sim *s);

/* Adds a flow (before or during a run; start >= now). Returns its id, or
 * -1 for a bad NIC. */
int64_t sim_add_flow(struct sim *s, uint32_t src, uint32_t dst, uint64_t bytes,
                     sim_time_t start, enum sim_op op);

/* Runs until every flow ended, finished or failed (and every event of
 * that lookahead cell: docs/sim.md, "Parallel simulation"), no event is
 * left, or simulated time reaches until (SIM_NEVER: no limit besides
 * cfg->stop_time). Returns 1 if every flow ended, else 0. */
int sim_run(struct sim *s, sim_time_t until);

/* Threads sim_run uses: cfg->threads (0: every CPU), fewer where the
 * scenario cannot be cut or has fewer switches with NICs; why, when not
 * NULL, says why not more (NULL if nothing held it back). */
uint32_t sim_threads(const struct sim *s, const char **why);

/* Distributed runs (docs/sim.md, "Past one machine"): every process (an
 * MPI rank) builds the same simulator and runs one partition of it, the
 * partition of its rank; these calls carry what the partitions tell each
 * other. uroce-sim-mpi gives MPI's; the library itself needs no MPI.
 * Every call is collective: every rank makes it, in the same order. */
enum sim_net_op { SIM_NET_SUM, SIM_NET_MIN, SIM_NET_MAX, SIM_NET_FSUM };
struct sim_net {
  uint32_t rank, size;
  void *ctx;
  /* Rank j gets len[j] bytes at buf[j]; in[i] (malloc'd, the caller
   * frees it) and inlen[i] are what rank i sent this one. 0 or -1. */
  int (*xchg)(void *ctx, void *const *buf, const size_t *len, void **in,
              size_t *inlen);
  /* v[0..n) becomes op over every rank's v: uint64_t, or double for
   * SIM_NET_FSUM. */
  void (*reduce)(void *ctx, void *v, size_t n, enum sim_net_op op);
};
/* The layer sim_new gives the simulators made after (NULL: none). With
 * size > 1 a run has one partition per rank and refuses what cannot be
 * cut yet (sim_new says what). */
void sim_net_use(const struct sim_net *net);
/* This process's rank, 0 without a layer: only rank 0 writes output. */
uint32_t sim_net_rank(const struct sim *s);

/* The subnet manager's work at start (fabric infiniband): LIDs, the
 * modelled time of its sweep (discovery, route computation, LFT
 * programming), and checks of the routes it computed: the channel
 * dependency graph between switch-to-switch links has no cycle, and at
 * every switch the NIC LIDs routed up spread over its up ports within
 * max_imbalance. */
struct sim_sm_info {
  const char *engine;
  uint32_t lids, lmc;
  uint64_t smps;
  sim_time_t discover, compute, program;
  bool deadlock_free;
  uint64_t cdg_channels, cdg_edges;
  uint32_t max_imbalance;
  /* The NIC the master SM runs on, and when a standby last took over
   * (SIM_NEVER: never) and how often. */
  uint32_t master_nic;
  sim_time_t took_over;
  uint32_t takeovers;
  /* The standby's SMInfo polls: sent (one per polling_timeout while its
   * link is up), and those with no answer by the next. */
  uint64_t standby_polls, standby_polls_unanswered;
  /* Sweeps after the start, simulated packet by packet: how many, the
   * SMPs they sent (retries included), those that timed out, traps that
   * reached the SM. The last sweep's discovery and programming as the
   * packets took them, and the closed forms for its SMPs (sum of round
   * trips and SMA processing over max_wire_smps), the start's model. */
  uint32_t sweeps;
  uint64_t sweep_smps, smp_timeouts, traps;
  sim_time_t last_discover, last_program;
  sim_time_t closed_discover, closed_program;
  uint64_t last_discover_smps, last_program_smps;
};
/* 0, or -1 if the fabric has no subnet manager (RoCE). */
int sim_sm_info(const struct sim *s, struct sim_sm_info *out);

/* A link or switch state change and the fabric's recovery from it: when
 * it happened, when the new routes took effect everywhere (recovery =
 * installed - at), how long each modelled step took, and the packets lost
 * to it (on the dead links, flushed from their queues, or routed to them
 * before the new routes), until the next change. */
enum sim_noticed {
  SIM_NOTICED_NOT_YET, /* no sweep has seen it (no trap, no periodic one) */
  SIM_NOTICED_TRAP,    /* RoCE's detection, or a trap's sweep (IB) */
  SIM_NOTICED_SWEEP,   /* a periodic sweep of the SM (IB) */
  SIM_NOTICED_STANDBY, /* the sweep of a standby SM taking over (IB) */
};
/* "none", "trap", "sweep", "standby" */
const char *sim_noticed_name(enum sim_noticed n);

struct sim_fail_result {
  const struct sim_failure *f;
  bool up; /* the change brought the link or switch back */
  sim_time_t at;
  sim_time_t installed; /* 0: not (yet) */
  /* The modelled steps, installed = at + their sum: detect is the trap
   * (or RoCE's detection), or the time until the periodic sweep that saw
   * the change; that sweep's discovery, computation, programming. */
  sim_time_t detect, sweep, compute, program;
  enum sim_noticed noticed;
  uint64_t lost_pkts;
  sim_time_t last_loss; /* the last packet lost to it, SIM_NEVER: none */
};
/* Results so far, one per state change in time order; *n of them. */
const struct sim_fail_result *sim_fail_results(const struct sim *s,
                                               uint32_t *n);

/* Sets the priority (SL on InfiniBand) of flow id's data, 0..7, before
 * it starts (transport.data_priority by default; control packets stay on
 * transport.control_priority). Returns 0, or -1 for a bad id or sl. */
int sim_flow_set_sl(struct sim *s, uint32_t id, uint8_t sl);

sim_time_t sim_now(const struct sim *s);
const struct sim_stats *sim_stats(const struct sim *s);

/* The memory estimate sim_new checked (mem.c), in bytes: the structures
 * (switches, ports, NIC records), the transport state of idle NICs, the
 * flow records, the connections of the flows that run at once (live,
 * conn bytes each) and their packets in flight. */
struct sim_mem {
  uint64_t topology, nic, nics, flows, live, conn, pkts, total;
  uint64_t limit; /* what it was checked against */
};
const struct sim_mem *sim_mem(const struct sim *s);
const struct sim_cfg *sim_cfg(const struct sim *s);
uint32_t sim_nflows(const struct sim *s);
const struct sim_flow *sim_flow(const struct sim *s, uint32_t id);
uint32_t sim_nnics(const struct sim *s);
uint32_t sim_nhosts(const struct sim *s);
/* NIC of host h on rail r. */
uint32_t sim_nic_of(const struct sim *s, uint32_t host, uint32_t rail);
/* Wire bytes of one full data packet and its payload: goodput at line rate
 * is rate * payload / wire. */
uint32_t sim_data_wire_bytes(const struct sim_cfg *cfg, uint32_t payload,
                             bool first);

/* ECMP path of a flow: the egress port index taken at each switch, up to
 * max hops. Returns the number of switches crossed. Only meaningful with
 * per-flow routing (ECMP). */
int sim_flow_path(const struct sim *s, uint32_t flow, uint16_t *ports,
                  uint32_t *switches, int max);
/* Identifies a (switch, egress port) pair as one number, for counting
 * flows per link. */
uint64_t sim_link_id(uint32_t sw, uint16_t port);

/* Results of the collective workload, one per size. The bound is the
 * time no fabric can beat: factor x bytes / (host link rate x payload
 * efficiency) plus steps x per-step latency (see docs/sim.md). */
struct sim_coll_result {
  uint64_t bytes;         /* as nccl-tests counts them */
  uint64_t count;         /* elements per rank's call */
  int algo;               /* the algorithm that ran */
  sim_time_t start, time; /* start, and until the last rank finished */
  double algbw_gbs;       /* bytes / time, GB/s (10^9 bytes/s) */
  double busbw_gbs;       /* algbw x the collective's factor, GB/s */
  double bound_us;        /* the lower bound on time */
  double bound_busbw_gbs; /* busbw at the bound, GB/s */
  double ratio;           /* time / bound (>= 1) */
  uint32_t steps;         /* ring steps a chunk crosses in turn; 0: none */
  double step_latency_us; /* mean ring hop: propagation + full packets */
  double bw_bound_us;     /* bytes of the busiest rank at the host link */
  double chain_bound_us;  /* chunks' dependency chain; 0 if not a ring */
};
/* NULL (and *n = 0) unless the workload is a collective. */
const struct sim_coll_result *sim_coll_results(const struct sim *s,
                                               uint32_t *n);
/* Whether a rank of the collective failed: the first (earliest, then
 * lowest rank), when, and why (what it was doing, the error, the
 * communicator's message). */
bool sim_coll_failure(const struct sim *s, uint32_t *rank, double *at_us,
                      char *why, size_t len);
/* Collective facts for reports: ranks, busbw factor, link bandwidth times
 * payload efficiency (Gb/s); 0 if no collective. */
uint32_t sim_coll_ranks(const struct sim *s);
double sim_coll_factor(const struct sim *s);
double sim_coll_link_gbps(const struct sim *s);

/* Link groups for utilisation: host links up (NIC to leaf/edge) and
 * down, fabric links (leaf-spine, edge-agg) up and down, core links
 * (agg-core) up and down. */
#define SIM_LINK_GROUPS 6
/* Per-stream receive rates at a sample: min, p10, p50, p90, max, mean. */
#define SIM_RATE_Q 6

/* Time series recorded every sample_interval. Byte counts are payload or
 * wire bytes counted over each frame's time on the wire (a frame half
 * received at a sample counts half), so no rate exceeds a link's. */
struct sim_series {
  uint32_t n; /* samples */
  sim_time_t *t;
  uint64_t (*queue)[SIM_TIERS];  /* max egress queue at that instant */
  uint64_t (*pauses)[SIM_TIERS]; /* cumulative XOFF frames */
  uint32_t nflows;               /* flows with a throughput series */
  uint64_t *acked; /* [sample * nflows + flow] payload arrived (wire) */
  uint64_t (*ecn)[SIM_TIERS];              /* cumulative ECN marks */
  uint64_t *cnps;                          /* cumulative CNPs sent */
  uint32_t (*paused_ports)[SIM_TIERS];     /* egress ports paused now */
  uint64_t (*link_bytes)[SIM_LINK_GROUPS]; /* cumulative wire bytes */
  double link_cap_bps[SIM_LINK_GROUPS];    /* capacity of each group */
  uint64_t *rx_payload; /* cumulative payload arrived at all NICs */
  /* Receive rate (Gb/s) of every active stream (a flow, or a rank's NIC
   * in a collective) over the window ending at the sample: SIM_RATE_Q
   * figures, how many streams, the window (ps). Sample 0 has none. */
  double (*rate)[SIM_RATE_Q];
  uint32_t *rate_n;
  sim_time_t *rate_win;
  /* Congestion control (DCQCN): the rate limiters' current rates (Gb/s)
   * over the running flows, SIM_RATE_Q figures, and how many; NULL when
   * the run has no rate-based congestion control. */
  double (*cc_rate)[SIM_RATE_Q];
  uint32_t *cc_n;
  /* Every switch egress queue (bytes) per sample while nports x samples
   * stays within SIM_PORTQ_MAX in sim_int.h; port_q_n samples kept. */
  uint32_t nports, port_q_n;
  uint32_t *port_q; /* [sample * nports + port] */
  /* When sampling stopped before the run ended (more samples would have
   * passed the memory limit), else SIM_NEVER. */
  sim_time_t stopped;
};
const struct sim_series *sim_series(const struct sim *s);

/* Switch port j (0 .. sim_series()->nports - 1) of the per-port queue
 * series: its switch's tier and index, its port number, whether it faces
 * down (toward the hosts). */
void sim_port_info(const struct sim *s, uint32_t j, int *tier, uint32_t *sw,
                   uint32_t *port, bool *down);

/* The switch port that trimmed most data packets (switch.trim), for
 * sim_port_info, with its trims and the trimmed headers its trim queue
 * dropped; UINT32_MAX if none trimmed. */
uint32_t sim_port_top_trims(const struct sim *s, uint64_t *trims,
                            uint64_t *drops);

/* PFC frames as they took effect at the port they paused or resumed, in
 * time order; at most SIM_PAUSE_LOG_MAX (then *full is set). nic set: node
 * is a NIC id, else a switch index. */
struct sim_pause_rec {
  double t_us;
  uint32_t node, port;
  bool nic, xoff;
  uint8_t prio;
};
uint32_t sim_pause_count(const struct sim *s, bool *full);
void sim_pause_get(const struct sim *s, uint32_t i, struct sim_pause_rec *r);

#endif
