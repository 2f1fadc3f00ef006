/* An in-memory network joining N transport engines, with a virtual clock
 * and seeded impairments per directed link: random loss, burst loss
 * (Gilbert-Elliott), every-Nth loss, reordering, duplication, corruption
 * (modelled as the bad ICRC the receiver would find: counted, dropped),
 * added delay, CE marking, header bit flips (for robustness tests), a
 * silent node, and paths of different delay chosen by the UDP source port. Every packet is serialized into real bytes (headers,
 * gathered payload, pad, ICRC slot) and parsed back with uroce_pkt_parse
 * before the receiving engine reads it. */
#ifndef UROCE_TESTS_NETSIM_H
#define UROCE_TESTS_NETSIM_H

#include <stdbool.h>
#include <stdint.h>

#include "transport/engine.h"

#define NS_MAX_NODES 8

struct ns_link {
  double loss;         /* random loss probability */
  double ge_good_bad;  /* Gilbert-Elliott: P(good -> bad) per packet */
  double ge_bad_good;  /* P(bad -> good) */
  double ge_bad_loss;  /* loss probability in the bad state */
  uint32_t every_nth;  /* drop every Nth packet (0 = never) */
  double reorder;      /* probability of an extra delay ... */
  uint64_t reorder_ns; /* ... uniform in [0, reorder_ns] */
  double dup;          /* duplication probability */
  double corrupt;      /* corruption probability (dropped as bad ICRC) */
  double ce;           /* probability of marking CE */
  double flip;         /* flip a random header bit and deliver anyway */
  uint64_t delay_ns;   /* propagation delay */
  uint32_t gbps;       /* serialization rate; 0 = 100 */
  /* Multipath: the UDP source port picks one of paths (hashed, as an ECMP
   * switch does); path i adds its own fixed delay in [0, path_skew_ns],
   * so packets sprayed over paths arrive out of order. */
  uint32_t paths;
  uint64_t path_skew_ns;
  /* Drop a READ re-request that starts before an earlier request of the
   * same READ (same rkey and end address), as rxe's responder does
   * (rxe_resp.c duplicate_request moves the READ's start to each
   * re-request's and drops one before it without an answer). */
  bool rxe_read_floor;
  /* Trim the trim_nth packet with payload on this link, once (0: none):
   * its payload is cut and it arrives flagged UROCE_RX_TRIMMED, as a UET
   * switch's full queue leaves it; trimmed_psn is its PSN. */
  uint32_t trim_nth;
  uint32_t trimmed_psn;
  /* state */
  bool ge_bad;
  uint64_t count, payload_count;
  struct {
    uint32_t rkey;
    uint64_t end, floor;
  } reads[64]; /* rxe_read_floor: the READs seen, round robin */
  uint32_t nreads;
  uint64_t floor_drops;
};

struct ns_stats {
  uint64_t sent, delivered, lost, corrupted, duplicated, parse_err, flipped;
  uint64_t trimmed;
};

struct ns_pkt;

struct netsim {
  uint64_t now;
  int n;
  struct uroce_eng *eng[NS_MAX_NODES];
  uint8_t gid[NS_MAX_NODES][16];
  bool silent[NS_MAX_NODES];
  uint64_t busy_until[NS_MAX_NODES];
  bool more[NS_MAX_NODES];
  struct ns_link link[NS_MAX_NODES][NS_MAX_NODES]; /* [from][to] */
  uint64_t seed, rng;
  /* If set, time advances by at most this much a step while anything is
   * pending: the test looks as often as a polling application would. */
  uint64_t tick_ns;
  struct ns_stats stats;
  /* in-flight packets: a binary heap by (time, seq) */
  struct ns_pkt **heap;
  uint32_t nheap, cap;
  uint64_t seq;
  struct ns_pkt *free_list;
  int trace; /* print packets delivered and lost (2: sent too) */
  /* With tap on, per sending node: packets that carry the multipath bit,
   * packets in multipath opcodes, and bits sent after the node first
   * received a packet without the bit (from a standard peer). */
  bool tap;
  uint64_t tap_mp_bit[NS_MAX_NODES], tap_mp_op[NS_MAX_NODES],
      tap_mp_bit_late[NS_MAX_NODES];
  bool tap_heard_std[NS_MAX_NODES];
};

/* Creates n engines from cfg (each gets GID ::ffff:10.0.0.(i+1) and a seed
 * derived from seed). Returns 0 or a negative error. */
int ns_init(struct netsim *ns, int n, uint64_t seed,
            const struct uroce_eng_cfg *cfg);
void ns_free(struct netsim *ns);
/* Replaces node i's engine by one made from cfg (same GID and seed), for
 * nodes that differ from the others (a standard peer). */
int ns_eng_remake(struct netsim *ns, int i, const struct uroce_eng_cfg *cfg);

/* Advances to the next event and runs it. Returns false when nothing is
 * left to happen (no packet in flight, no timer, nothing to send). */
bool ns_step(struct netsim *ns);

/* Steps until cq has n completions (collected into wc), the network is
 * idle or 20 s of virtual time pass; returns how many it got. */
int ns_wait_cq(struct netsim *ns, struct uroce_cq *cq, struct uroce_wc *wc,
               int n);

/* Steps until done(ctx) holds (returns true), the network is idle or the
 * virtual time passes until (returns done(ctx)). */
bool ns_run(struct netsim *ns, bool (*done)(void *ctx), void *ctx,
            uint64_t until);

/* Runs until idle or until; returns true if it went idle. */
bool ns_run_idle(struct netsim *ns, uint64_t until);

#endif
