/* Parallel simulation: a run on 2 or 3 threads gives the sequential run's
 * results exactly (every flow's times and packet counts, every counter,
 * the pause log, the failure results), on scenarios that take each path
 * across partitions: packets on cut links, PFC pauses, lossy drops and
 * random loss, InfiniBand's credits, failures (global events that flush
 * ports and change
 * routes), flows waiting for a QP (retries), READ and SEND flows, runs
 * stopped and resumed, and flows added after a run finished and run
 * again (as uroce plan's probes do), collectives (ring, servers of
 * several ranks with an intra-host link). Scenarios that cannot be cut
 * run on one thread and say why. */
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "t.h"
#include "uroce/coll.h"

static struct sim *mk(struct sim_cfg *c) {
  char err[256] = "";
  struct sim *s = sim_new(c, err, sizeof err);
  if (!s)
    fprintf(stderr, "sim_new: %s\n", err);
  CHECK(s != NULL);
  return s;
}

/* Four leaves of four hosts, two spines, 100 Gb/s, 1 us links. */
static void leaf_spine(struct sim_cfg *c) {
  sim_cfg_default(c);
  c->topo.leaves = 4;
  c->topo.hosts_per_leaf = 4;
  c->topo.spines = 2;
}

/* What a run leaves that must not depend on the threads. */
struct outcome {
  uint32_t nflows, npause, nfail, ncoll;
  struct sim_coll_result coll[SIM_COLL_MAX_SIZES];
  struct sim_flow *flows;
  struct sim_pause_rec *pauses;
  struct sim_fail_result *fails;
  struct sim_sm_info sm; /* InfiniBand: the SM's sweeps as packets */
  struct sim_stats st;
  sim_time_t now;
  int done;
};

static void outcome_free(struct outcome *o) {
  free(o->flows);
  free(o->pauses);
  free(o->fails);
  memset(o, 0, sizeof(*o));
}

static void take(struct sim *s, int done, struct outcome *o) {
  memset(o, 0, sizeof(*o));
  o->done = done;
  o->now = sim_now(s);
  o->st = *sim_stats(s);
  o->st.wall_s = 0;
  o->st.pkts_allocated = 0; /* each partition has its own pool */
  o->nflows = sim_nflows(s);
  o->flows = calloc(o->nflows + 1, sizeof(*o->flows));
  for (uint32_t i = 0; o->flows && i < o->nflows; i++) {
    o->flows[i] = *sim_flow(s, i);
    o->flows[i].st = 0;
  }
  o->npause = sim_pause_count(s, 0);
  o->pauses = calloc(o->npause + 1, sizeof(*o->pauses));
  for (uint32_t i = 0; o->pauses && i < o->npause; i++)
    sim_pause_get(s, i, &o->pauses[i]);
  const struct sim_coll_result *cr = sim_coll_results(s, &o->ncoll);
  for (uint32_t i = 0; i < o->ncoll && i < SIM_COLL_MAX_SIZES; i++)
    o->coll[i] = cr[i];
  sim_sm_info(s, &o->sm);
  const struct sim_fail_result *r = sim_fail_results(s, &o->nfail);
  o->fails = calloc(o->nfail + 1, sizeof(*o->fails));
  for (uint32_t i = 0; o->fails && i < o->nfail; i++) {
    o->fails[i] = r[i];
    o->fails[i].f = 0;
  }
}

static bool same(const struct outcome *a, const struct outcome *b) {
  bool ok = a->done == b->done && a->now == b->now &&
            !memcmp(&a->st, &b->st, sizeof(a->st)) && a->nflows == b->nflows &&
            a->npause == b->npause && a->nfail == b->nfail && a->flows &&
            b->flows;
  for (uint32_t i = 0; ok && i < a->nflows; i++)
    ok = !memcmp(&a->flows[i], &b->flows[i], sizeof(a->flows[i]));
  for (uint32_t i = 0; ok && i < a->npause; i++)
    ok = !memcmp(&a->pauses[i], &b->pauses[i], sizeof(a->pauses[i]));
  ok = ok && !memcmp(&a->sm, &b->sm, sizeof(a->sm));
  for (uint32_t i = 0; ok && i < a->nfail; i++)
    ok = !memcmp(&a->fails[i], &b->fails[i], sizeof(a->fails[i]));
  if (!ok)
    fprintf(stderr,
            "  differ: done %d/%d now %llu/%llu events %llu/%llu flows_done "
            "%llu/%llu pauses %u/%u\n",
            a->done, b->done, (unsigned long long)a->now,
            (unsigned long long)b->now, (unsigned long long)a->st.events,
            (unsigned long long)b->st.events,
            (unsigned long long)a->st.flows_done,
            (unsigned long long)b->st.flows_done, a->npause, b->npause);
  return ok;
}

typedef void (*setup_fn)(struct sim *s);

/* Runs c on threads (checking it really got them), after setup adds its
 * flows; stop, when not SIM_NEVER, first runs to there, then on. */
static int run(const struct sim_cfg *base, uint32_t threads, setup_fn setup,
               sim_time_t stop, struct outcome *o) {
  struct sim_cfg c = *base;
  c.threads = threads;
  struct sim *s = mk(&c);
  if (!s)
    return -1;
  const char *why;
  CHECK_EQ(sim_threads(s, &why), threads);
  if (setup)
    setup(s);
  int done = 0;
  if (stop != SIM_NEVER) {
    done = sim_run(s, stop);
    CHECK_EQ(done, 0);
    CHECK_EQ(sim_now(s), stop);
    if (setup)
      sim_add_flow(s, 1, 14, 1 << 20, stop + 3 * SIM_US, SIM_OP_WRITE);
  }
  done = sim_run(s, SIM_NEVER);
  if (setup && stop == SIM_NEVER) { /* done: a second phase, as plan's */
    CHECK_EQ(done, 1);
    sim_time_t t = sim_now(s) + SIM_US;
    for (uint32_t i = 0; i < 16; i++)
      sim_add_flow(s, i, 15 - i, 128 << 10, t, SIM_OP_WRITE);
    done = sim_run(s, SIM_NEVER);
    CHECK_EQ(done, 1);
  }
  take(s, done, o);
  sim_del(s);
  return done;
}

/* The sequential run, then 2 and 3 threads: the same outcome. */
static void check_same(const char *what, const struct sim_cfg *c,
                       setup_fn setup, sim_time_t stop) {
  struct outcome a, b;
  int done = run(c, 1, setup, stop, &a);
  CHECK_EQ(done, 1);
  printf("%s: %llu events, %u flows done by %.3f us, %u pause changes, %u "
         "failure results, %u collective sizes\n",
         what, (unsigned long long)a.st.events, (unsigned)a.st.flows_done,
         (double)a.now / 1e6, a.npause, a.nfail, a.ncoll);
  for (uint32_t t = 2; t <= 3; t++) {
    run(c, t, setup, stop, &b);
    bool ok = same(&a, &b);
    CHECK(ok);
    if (!ok)
      fprintf(stderr, "  %s: %u threads differ from one\n", what, t);
    outcome_free(&b);
  }
  outcome_free(&a);
}

/* Permutation across leaves with spraying and ECN/DCQCN, the uroce model:
 * most packets cross partitions. */
static void test_permutation(void) {
  struct sim_cfg c;
  leaf_spine(&c);
  c.routing = SIM_ROUTE_SPRAY;
  c.wl.kind = SIM_WL_PERMUTATION;
  c.wl.bytes = 512 << 10;
  c.sw.ecn = true;
  c.sw.kmin = 20000;
  c.sw.kmax = 100000;
  c.sw.pmax = 0.2;
  c.tp.cc = SIM_CC_DCQCN;
  check_same("permutation, spray, dcqcn", &c, 0, SIM_NEVER);
  c.tp.model = SIM_HOST_SIMPLE;
  check_same("permutation, simple model", &c, 0, SIM_NEVER);
}

/* Incast from every other leaf into one host: PFC pauses spread back
 * through the spines, so pause frames cross partitions and the log must
 * come out in the sequential order. */
static void incast(struct sim *s) {
  for (uint32_t i = 4; i < 16; i++)
    sim_add_flow(s, i, 0, 256 << 10, 0, SIM_OP_WRITE);
}

static void test_pfc_incast(void) {
  struct sim_cfg c;
  leaf_spine(&c);
  c.sw.buffer_bytes = 400000;
  c.sw.xoff = 60000;
  c.sw.xon = 30000;
  struct outcome a;
  run(&c, 1, incast, SIM_NEVER, &a);
  CHECK(a.npause > 0); /* the scenario must pause to test this */
  outcome_free(&a);
  check_same("incast with pfc", &c, incast, SIM_NEVER);
  /* Lossy, with random loss on every link: drops and retransmissions. */
  c.sw.pfc = false;
  c.topo.link[0].loss = 0.001;
  check_same("incast lossy, random loss", &c, incast, SIM_NEVER);
}

/* 40 flows from one NIC to another at once: more than the 32 QPs a NIC
 * has here, so flows wait and retry (a global event) as others end; READ
 * and SEND flows between other pairs. */
static void crowd(struct sim *s) {
  for (int i = 0; i < 40; i++)
    sim_add_flow(s, 0, 5, 64 << 10, (sim_time_t)i * 100000, SIM_OP_WRITE);
  sim_add_flow(s, 2, 13, 300 << 10, 0, SIM_OP_READ);
  sim_add_flow(s, 9, 6, 300 << 10, 2 * SIM_US, SIM_OP_SEND);
}

static void test_waiting_read_send(void) {
  struct sim_cfg c;
  leaf_spine(&c);
  check_same("40 flows on 32 QPs, READ, SEND", &c, crowd, SIM_NEVER);
  /* Stopped mid-run and resumed, with a flow added in between. */
  check_same("stopped at 7 us, a flow added", &c, crowd, 7 * SIM_US);
}

/* A spine dies and a link flaps under a permutation: the failures are
 * global events; packets on the dead links are lost in partitions. */
/* Spine 4 dies at 30 us; leaf 1's port 5 goes down at 90 us for 40 us
 * (its trap lost if trap_lost). */
static void spine_down_link_flap(struct sim_cfg *c, bool trap_lost) {
  c->nfail = 2;
  c->fail[0] =
      (struct sim_failure){.kind = SIM_FAIL_SWITCH, .sw = 4, .at = 30 * SIM_US};
  c->fail[1] = (struct sim_failure){.kind = SIM_FAIL_LINK,
                                    .sw = 1,
                                    .port = 5,
                                    .at = 90 * SIM_US,
                                    .up_after = 40 * SIM_US,
                                    .trap_lost = trap_lost};
}

static void test_failures(void) {
  struct sim_cfg c;
  leaf_spine(&c);
  c.wl.kind = SIM_WL_PERMUTATION;
  c.wl.bytes = 2 << 20;
  c.recovery.detection = 20 * SIM_US;
  c.recovery.convergence = 30 * SIM_US;
  spine_down_link_flap(&c, false);
  struct outcome a;
  run(&c, 1, 0, SIM_NEVER, &a);
  CHECK_EQ(a.nfail, 3);
  CHECK(a.nfail && a.fails[0].lost_pkts > 0);
  outcome_free(&a);
  check_same("spine down, link flap", &c, 0, SIM_NEVER);
}

/* InfiniBand: credits return in FC packets that cross partitions like
 * data; a permutation with adaptive routing on a buffer small enough to
 * make senders wait for credit, and an incast. */
static void test_infiniband(void) {
  struct sim_cfg c;
  leaf_spine(&c);
  c.fabric = SIM_FABRIC_IB;
  c.routing = SIM_ROUTE_ADAPTIVE;
  c.ib.vl_buffer = 12 << 10; /* less than a link's round trip */
  c.wl.kind = SIM_WL_PERMUTATION;
  c.wl.bytes = 512 << 10;
  struct outcome a;
  run(&c, 1, 0, SIM_NEVER, &a);
  CHECK(a.st.fc_pkts > 0);
  printf("infiniband: %llu FC packets, credit wait by tier %.1f %.1f %.1f "
         "us\n",
         (unsigned long long)a.st.fc_pkts, (double)a.st.credit_wait[0] / 1e6,
         (double)a.st.credit_wait[1] / 1e6, (double)a.st.credit_wait[2] / 1e6);
  /* 512 KiB take 43 us at line rate; 12 KiB of credit per round trip of
   * a few us hold a flow to a fraction of it. */
  CHECK(a.now > 100 * SIM_US);
  CHECK_EQ(a.st.credit_overruns, 0);
  outcome_free(&a);
  check_same("infiniband permutation, adaptive", &c, 0, SIM_NEVER);
  c.wl.kind = SIM_WL_NONE;
  c.routing = SIM_ROUTE_STATIC;
  check_same("infiniband incast", &c, incast, SIM_NEVER);
  /* The SM's sweeps as packets: a spine dies (traps from its
   * neighbours), a link flaps with its trap lost (the periodic sweep
   * sees it), under a permutation on static routes and on adaptive. The
   * SM runs where NIC 0 is, the SMAs where their nodes are, and the LFT
   * Sets change each switch's table in its partition. */
  leaf_spine(&c);
  c.fabric = SIM_FABRIC_IB;
  c.routing = SIM_ROUTE_STATIC;
  c.wl.kind = SIM_WL_PERMUTATION;
  c.wl.bytes = 2 << 20;
  c.recovery.trap = 2 * SIM_US;
  c.ib.sm.sweep_interval = 150 * SIM_US;
  c.ib.sm.smp_timeout = 20 * SIM_US; /* SMPs lost on the flapping link */
  spine_down_link_flap(&c, true);
  run(&c, 1, 0, SIM_NEVER, &a);
  printf("infiniband SM sweeps: %u sweeps, %llu SMPs (%llu timed out), "
         "%llu traps, VL15 %llu packets (%llu lost); recoveries %.3f %.3f "
         "%.3f us\n",
         a.sm.sweeps, (unsigned long long)a.sm.sweep_smps,
         (unsigned long long)a.sm.smp_timeouts,
         (unsigned long long)a.sm.traps, (unsigned long long)a.st.vl15_pkts,
         (unsigned long long)a.st.vl15_lost,
         a.nfail > 0 ? (double)(a.fails[0].installed - a.fails[0].at) / 1e6 : 0,
         a.nfail > 1 ? (double)(a.fails[1].installed - a.fails[1].at) / 1e6 : 0,
         a.nfail > 2 ? (double)(a.fails[2].installed - a.fails[2].at) / 1e6 : 0);
  CHECK(a.sm.sweeps >= 2 && a.st.vl15_pkts > 0);
  CHECK_EQ(a.nfail, 3);
  CHECK_EQ(a.st.flows_done, 16);
  outcome_free(&a);
  check_same("infiniband SM sweeps after failures, static", &c, 0,
             SIM_NEVER);
  c.routing = SIM_ROUTE_ADAPTIVE;
  check_same("infiniband SM sweeps after failures, adaptive", &c, 0,
             SIM_NEVER);
  /* A standby SM on NIC 13 (another partition than the master's NIC 0)
   * polls the master with SMInfo Gets on VL15 every 20 us; NIC 0's link
   * goes down for good at 30 us, a spine at 40 us: the polls are lost,
   * the standby takes over at a tick (a global event: the SM moves to its
   * partition) and sweeps; the old master's SMPs in flight are lost. */
  leaf_spine(&c);
  c.fabric = SIM_FABRIC_IB;
  c.routing = SIM_ROUTE_STATIC;
  c.wl.kind = SIM_WL_PERMUTATION;
  c.wl.bytes = 2 << 20;
  c.tp.retry_cnt = 2;
  c.recovery.trap = 2 * SIM_US;
  c.ib.sm.standby_nic = 13;
  c.ib.sm.polling_timeout = 20 * SIM_US;
  c.ib.sm.polling_retries = 2;
  c.ib.sm.smp_timeout = 20 * SIM_US;
  c.nfail = 2;
  c.fail[0] = (struct sim_failure){
      .kind = SIM_FAIL_LINK, .sw = 0, .port = 0, .at = 30 * SIM_US};
  c.fail[1] =
      (struct sim_failure){.kind = SIM_FAIL_SWITCH, .sw = 4, .at = 40 * SIM_US};
  run(&c, 1, 0, SIM_NEVER, &a);
  printf("infiniband standby SM: %llu polls, %llu unanswered, took over at "
         "%.3f us, %u sweeps, VL15 %llu packets (%llu lost)\n",
         (unsigned long long)a.sm.standby_polls,
         (unsigned long long)a.sm.standby_polls_unanswered,
         (double)a.sm.took_over / 1e6, a.sm.sweeps,
         (unsigned long long)a.st.vl15_pkts,
         (unsigned long long)a.st.vl15_lost);
  CHECK_EQ(a.sm.takeovers, 1);
  CHECK_EQ(a.sm.master_nic, 13);
  CHECK(a.sm.sweeps >= 1 && a.sm.standby_polls_unanswered >= 2);
  outcome_free(&a);
  check_same("infiniband standby SM takes over, polls as packets", &c, 0,
             SIM_NEVER);
}

/* Collectives: a ring allreduce over 16 ranks placed at random; servers
 * of 4 ranks on one NIC (1:4) and on 4 NICs of one leaf (1:1), whose
 * ranks also write to each other over the intra-host link. Connections
 * are made as ranks first need them (global events). */
static void test_collectives(void) {
  struct sim_cfg c;
  leaf_spine(&c);
  c.wl.kind = SIM_WL_COLLECTIVE;
  c.wl.coll.kind = UROCE_COLL_ALLREDUCE;
  c.wl.coll.algo = UROCE_COLL_ALGO_RING;
  c.wl.coll.dtype = UROCE_COLL_FLOAT32;
  c.wl.coll.placement = 1;
  c.wl.coll.nsizes = 2;
  c.wl.coll.sizes[0] = 64 << 10;
  c.wl.coll.sizes[1] = 1 << 20;
  struct outcome a;
  run(&c, 1, 0, SIM_NEVER, &a);
  CHECK_EQ(a.ncoll, 2);
  CHECK(a.ncoll == 2 && a.coll[1].ratio >= 1);
  outcome_free(&a);
  check_same("ring allreduce, 16 ranks", &c, 0, SIM_NEVER);
  c.wl.coll.algo = UROCE_COLL_ALGO_AUTO;
  c.wl.coll.ranks_per_host = 4;
  c.wl.coll.nics_per_host = 1;
  c.wl.coll.intra_gbps = 400;
  c.wl.coll.intra_latency_us = 0.5;
  check_same("allreduce, servers of 4 ranks on 1 NIC", &c, 0, SIM_NEVER);
  c.wl.coll.nics_per_host = 4;
  check_same("allreduce, servers of 4 ranks on 4 NICs", &c, 0, SIM_NEVER);
}

/* What cannot be cut runs on one thread and says why. */
static void test_one_thread(void) {
  struct sim_cfg c;
  const char *why;
  sim_cfg_default(&c);
  c.topo.leaves = 1;
  c.topo.hosts_per_leaf = 8;
  c.threads = 4;
  struct sim *s = mk(&c);
  if (s) {
    CHECK_EQ(sim_threads(s, &why), 1);
    CHECK(why && strstr(why, "lookahead"));
    sim_del(s);
  }
  /* Servers of 4 NICs on leaves of 6 hosts: server 1's NICs 4..7 hang
   * off leaves 0 and 1, in different partitions, and its ranks share an
   * intra-host link with no lookahead. */
  leaf_spine(&c);
  c.threads = 4;
  c.topo.hosts_per_leaf = 6;
  c.wl.kind = SIM_WL_COLLECTIVE;
  c.wl.coll.kind = UROCE_COLL_ALLREDUCE;
  c.wl.coll.dtype = UROCE_COLL_FLOAT32;
  c.wl.coll.nsizes = 1;
  c.wl.coll.sizes[0] = 64 << 10;
  c.wl.coll.ranks_per_host = 4;
  c.wl.coll.nics_per_host = 4;
  c.wl.coll.intra_gbps = 400;
  s = mk(&c);
  if (s) {
    CHECK_EQ(sim_threads(s, &why), 1);
    CHECK(why && strstr(why, "server's NICs"));
    sim_del(s);
  }
  leaf_spine(&c);
  c.threads = 9; /* four leaves */
  s = mk(&c);
  if (s) {
    CHECK_EQ(sim_threads(s, &why), 4);
    CHECK(why != NULL);
    sim_del(s);
  }
}

int main(void) {
  T_RUN(test_permutation);
  T_RUN(test_pfc_incast);
  T_RUN(test_waiting_read_send);
  T_RUN(test_failures);
  T_RUN(test_infiniband);
  T_RUN(test_collectives);
  T_RUN(test_one_thread);
  return T_DONE();
}
