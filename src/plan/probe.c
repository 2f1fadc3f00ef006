/* Packet-level probes: the network phases of an option's workload run
 * through the fabric simulator (src/sim) with the real transport engine,
 * at full scale: every NIC sends one flow to its ring neighbour, then to
 * its partner in each sampled all-to-all shift, phase after phase. The
 * measured times replace the analytical load factors. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plan/plan.h"
#include "sim/sim.h"
#include "util/clock.h"

bool plan_probe_possible(const struct plan_spec *sp,
                         const struct plan_option *o, char *why, size_t len) {
  if (!o->feasible) {
    snprintf(why, len, "not buildable");
    return false;
  }
  if (!sp->simulate) {
    snprintf(why, len, "analytical only: simulate.enabled is false");
    return false;
  }
  if (o->topo.tiers == 3 && o->pods > 1) {
    snprintf(why, len,
             "analytical only: the simulator builds 3 tiers only as a "
             "complete k-ary fat-tree");
    return false;
  }
  if (o->nics > sp->sim_max_nics) {
    snprintf(why, len, "analytical only: %u NICs > simulate.max_nics %u",
             o->nics, sp->sim_max_nics);
    return false;
  }
  if (o->servers < 2) {
    snprintf(why, len, "analytical only: one server, no network phase");
    return false;
  }
  if (o->topo.rail && o->nics_per_server > 16) {
    snprintf(why, len, "analytical only: the simulator has 16 rails at most");
    return false;
  }
  return true;
}

static void build_cfg(const struct plan_spec *sp, const struct plan_option *o,
                      struct sim_cfg *c) {
  sim_cfg_default(c);
  c->seed = sp->seed;
  c->topo.kind = SIM_TOPO_LEAF_SPINE;
  c->topo.hosts_per_leaf = o->down;
  /* One link from each leaf to each of `up` spines: the same uplink count
   * and ECMP fan-out as the BOM's spines with parallel links. */
  c->topo.spines = o->up;
  if (o->topo.rail) {
    c->topo.rails = o->nics_per_server;
    c->topo.leaves = o->leaves_per_group;
  } else {
    c->topo.rails = 1;
    c->topo.leaves = o->sw[1];
  }
  for (int t = 0; t < 3; t++) {
    c->topo.link[t].rate_bps = (uint64_t)(o->speed_gbps * 1e9);
    c->topo.link[t].delay =
        (sim_time_t)(5.0 * (o->cable_len[t] > 0 ? o->cable_len[t] : 3) *
                     SIM_NS);
    c->topo.link[t].loss = 0;
  }
  c->wl.kind = SIM_WL_NONE;
  c->tp.model = SIM_HOST_UROCE;
  c->tp.mtu = 4096;
  c->sw.ecn = true;
  c->tp.cc = SIM_CC_DCQCN;
  if (o->fabric == PLAN_IB) {
    /* InfiniBand: credit flow control per VL (the simulator's default
     * buffers and FC latency), LIDs and LFTs from the subnet manager, and
     * the switches' adaptive routing among the up ports, which the model
     * takes as ideal; IB framing; no ECN, PFC or DCQCN: credits never
     * drop, and IB congestion control is off. */
    c->fabric = SIM_FABRIC_IB;
    c->routing = SIM_ROUTE_ADAPTIVE;
    c->sw.pfc = false;
    c->sw.ecn = false;
    c->tp.cc = SIM_CC_NONE;
  } else if (o->fabric == PLAN_UET) {
    /* UET-style as the simulator supports it today: lossy switches
     * that trim (a full queue cuts a packet to its headers, and the
     * receiver NACKs it at once), per-packet spraying, out-of-order
     * placement; RoCEv2 framing. */
    c->sw.pfc = false;
    c->sw.trim = true;
    /* The shared buffer managed by dynamic thresholds, as switch ASICs
     * do (a queue holds at most alpha x the free buffer; alpha = 2^
     * dynamic_th in SONiC's buffer profiles, 1 here; 2 and 8 gave the same
     * phase times): a congested queue trims before it
     * takes the whole buffer, so ACKs always find room. Without it the
     * 3:1 all-to-all's uplink queues filled the 32 MiB, ACKs were
     * dropped, and the flows whose last ACK was lost waited for a probe
     * timeout (phases of 74-90 us for 73). */
    c->sw.dt_alpha = 1;
    c->routing = SIM_ROUTE_SPRAY;
  } else {
    c->sw.pfc = true;
    c->routing = SIM_ROUTE_ECMP;
  }
  c->stop_time = SIM_NEVER;
  c->sample_interval = 0;
  c->progress = false;
}

static uint32_t nic_id(struct sim *s, const struct plan_option *o,
                       uint32_t server, uint32_t i) {
  if (o->topo.rail)
    return sim_nic_of(s, server, i);
  return server * o->nics_per_server + i; /* host = NIC, rails = 1 */
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The most flows that ECMP put on one switch egress link, over flows
 * first..nflows-1. */
static uint32_t hashed_max_load(struct sim *s, uint32_t first) {
  uint32_t nf = sim_nflows(s) - first, n = 0, best = 0;
  uint64_t *ids = malloc(sizeof *ids * nf * 8);
  if (!ids)
    return 0;
  for (uint32_t f = first; f < sim_nflows(s); f++) {
    uint16_t ports[8];
    uint32_t sws[8];
    int h = sim_flow_path(s, f, ports, sws, 8);
    for (int i = 0; i < h; i++)
      ids[n++] = sim_link_id(sws[i], ports[i]);
  }
  qsort(ids, n, sizeof *ids, cmp_u64);
  for (uint32_t i = 0, run = 0; i < n; i++) {
    run = i && ids[i] == ids[i - 1] ? run + 1 : 1;
    if (run > best)
      best = run;
  }
  free(ids);
  return best;
}

/* Runs one phase (all NICs send `bytes` to their partner `shift` servers
 * on) and returns its time in us, or -1; *hashed gets the ECMP max load. */
static double phase(struct sim *s, const struct plan_option *o, uint32_t shift,
                    uint64_t bytes, double *hashed) {
  sim_time_t t0 = sim_now(s) + SIM_US;
  uint32_t first = sim_nflows(s);
  for (uint32_t sv = 0; sv < o->servers; sv++)
    for (uint32_t i = 0; i < o->nics_per_server; i++)
      if (sim_add_flow(s, nic_id(s, o, sv, i),
                       nic_id(s, o, (sv + shift) % o->servers, i), bytes, t0,
                       SIM_OP_WRITE) < 0)
        return -1;
  *hashed =
      sim_cfg(s)->routing == SIM_ROUTE_ECMP ? hashed_max_load(s, first) : 0;
  if (sim_run(s, SIM_NEVER) != 1)
    return -1;
  sim_time_t end = t0;
  for (uint32_t f = first; f < sim_nflows(s); f++) {
    const struct sim_flow *fl = sim_flow(s, f);
    if (fl->finish > end)
      end = fl->finish;
  }
  return (double)(end - t0) / SIM_US;
}

int plan_probe(const struct plan_spec *sp, const struct plan_option *o,
               struct plan_phase_times *ph, struct plan_probe_stats *st,
               void (*progress)(void *, const char *), void *arg, char *err,
               size_t errlen) {
  memset(ph, 0, sizeof *ph);
  memset(st, 0, sizeof *st);
  struct sim_cfg cfg;
  build_cfg(sp, o, &cfg);
  double w0 = mono_s();
  char serr[512];
  struct sim *s = sim_new(&cfg, serr, sizeof serr);
  sim_cfg_free(&cfg);
  if (!s) {
    snprintf(err, errlen, "%s: simulator: %s", o->name, serr);
    return -1;
  }
  uint64_t bytes = (uint64_t)sp->probe_bytes;
  double eff = plan_wire_efficiency(o->fabric, 4096, NULL);
  double ideal_us = bytes * 8 / (o->speed_gbps * eff * 1e3);
  double lat = plan_probe_latency_us(o);
  double hr, hsum = 0;
  double t = phase(s, o, 1, bytes, &hr);
  if (progress)
    progress(arg, "ring");
  uint32_t k = plan_a2a_probes(sp, o);
  double sum = 0;
  for (uint32_t j = 0; j < k && t >= 0; j++) {
    double hj;
    double tj = phase(s, o, plan_a2a_shift(o->servers, k, j), bytes, &hj);
    hsum += hj;
    if (tj < 0)
      t = -1;
    sum += fmax(tj - lat, 0) / ideal_us;
    if (progress)
      progress(arg, "all-to-all");
  }
  if (t < 0) {
    snprintf(err, errlen, "%s: a probe did not finish in the simulator",
             o->name);
    sim_del(s);
    return -1;
  }
  ph->ring_factor = fmax(t - lat, 0) / ideal_us;
  ph->a2a = k > 0;
  ph->a2a_factor = k ? sum / k : 1;
  ph->ring_hashed = hr;
  ph->a2a_hashed = k ? hsum / k : 0;
  ph->valid = true;
  const struct sim_stats *ss = sim_stats(s);
  st->events = ss->events;
  st->flows = ss->flows;
  for (int i = 0; i < SIM_TIERS; i++) {
    st->drops +=
        ss->drops_buffer[i] + ss->drops_lossless[i] + ss->drops_trim[i];
    st->trims += ss->trims[i];
    st->pauses += ss->pause_frames[i];
  }
  sim_del(s);
  st->wall_s = mono_s() - w0;
  return 0;
}
