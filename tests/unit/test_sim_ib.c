/* The InfiniBand link layer of the simulator against closed forms: line
 * rate with IB framing, credit-limited throughput of a long link, zero
 * drops under incast, VL arbitration at switches and NICs, periodic
 * flow-control packets and their line time, scenario keys checked
 * against the fabric, and determinism. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scenario.h"
#include "sim/sim.h"
#include "sim/sim_int.h"
#include "t.h"
#include "wire/opcode.h"

#define GBPS 1000000000ull

/* Wire bytes of a middle WRITE packet of p payload bytes, from IB's header
 * sizes: LRH, BTH, ICRC, VCRC and the two delimiters. */
static double ib_wire(uint32_t p) {
  return SIM_IB_LRH_LEN + UROCE_BTH_LEN + 4 + SIM_IB_VCRC_LEN + SIM_IB_L1_LEN +
         p;
}

static double ser_ps(double bytes, uint64_t bps) {
  return bytes * 8e12 / (double)bps;
}

static struct sim *mk(struct sim_cfg *c) {
  char err[256] = "";
  struct sim *s = sim_new(c, err, sizeof err);
  if (!s)
    fprintf(stderr, "sim_new: %s\n", err);
  CHECK(s != NULL);
  return s;
}

static void ib_switch(struct sim_cfg *c, uint32_t hosts) {
  sim_cfg_default(c);
  c->fabric = SIM_FABRIC_IB;
  c->routing = SIM_ROUTE_STATIC;
  c->topo.leaves = 1;
  c->topo.hosts_per_leaf = hosts;
}

/* Payload goodput of flow 0 between two times. */
static double goodput(struct sim *s, sim_time_t t0, sim_time_t t1) {
  sim_run(s, t0);
  uint64_t a0 = sim_flow(s, 0)->acked;
  sim_run(s, t1);
  uint64_t a1 = sim_flow(s, 0)->acked;
  return (double)(a1 - a0) * 8 / ((double)(t1 - t0) / 1e12) / 1e9;
}

/* One flow with ample credit reaches line rate x payload / IB packet. */
static void test_line_rate(void) {
  struct sim_cfg c;
  ib_switch(&c, 2);
  struct sim *s = mk(&c);
  if (!s)
    return;
  sim_add_flow(s, 0, 1, 1ull << 30, 0, SIM_OP_WRITE);
  double g = goodput(s, 1 * SIM_MS, 3 * SIM_MS);
  double want = 100 * 4096 / ib_wire(4096);
  printf("ib line rate: %.3f Gb/s goodput, closed form %.3f\n", g, want);
  CHECK(fabs(g - want) / want < 0.005);
  CHECK_EQ(sim_data_wire_bytes(&c, 4096, false), (uint32_t)ib_wire(4096));
  /* A GRH adds its 40 bytes to every packet. */
  c.ib.grh = true;
  CHECK_EQ(sim_data_wire_bytes(&c, 4096, false),
           (uint32_t)ib_wire(4096) + SIM_IB_GRH_LEN);
  sim_del(s);
}

/* A long link whose input buffer holds fewer bytes than its round trip:
 * the sender never has more than the credits outstanding, so the link
 * carries credits x 64 B per credit round trip (a packet's serialisation,
 * the propagation both ways, the FC latency and the FC packet's own
 * serialisation). */
static void test_credit_rtt(void) {
  struct sim_cfg c;
  ib_switch(&c, 2);
  sim_time_t d = 10 * SIM_US;
  for (int i = 0; i < 3; i++)
    c.topo.link[i].delay = d;
  uint32_t blocks = (uint32_t)ceil((ib_wire(4096) - SIM_IB_L1_LEN) / 64);
  for (uint32_t npkt = 4; npkt <= 16; npkt *= 2) {
    c.ib.vl_buffer = (uint64_t)npkt * blocks * 64;
    struct sim *s = mk(&c);
    if (!s)
      return;
    sim_add_flow(s, 0, 1, 1ull << 30, 0, SIM_OP_WRITE);
    double g = goodput(s, 1 * SIM_MS, 4 * SIM_MS);
    double rtt = ser_ps(ib_wire(4096), 100 * GBPS) + 2.0 * d +
                 (double)c.ib.fc_latency + ser_ps(SIM_IB_FC_WIRE, 100 * GBPS);
    double credit_gbps = (double)c.ib.vl_buffer * 8 / rtt * 1e3;
    double want = credit_gbps * 4096 / (blocks * 64.0);
    printf("credit loop: %u credits, RTT %.1f ns: %.3f Gb/s of blocks, "
           "goodput %.3f Gb/s, closed form %.3f\n",
           npkt * blocks, rtt / 1e3, credit_gbps, g, want);
    CHECK(fabs(g - want) / want < 0.01);
    CHECK_EQ(sim_stats(s)->credit_overruns, 0);
    sim_del(s);
  }
}

/* N-to-1 incast: the receiver's link runs at goodput, nothing is
 * dropped and no input buffer ever holds more than its credits. */
static void incast(uint32_t N, bool fat_tree, enum sim_routing rt) {
  struct sim_cfg c;
  ib_switch(&c, N + 1);
  if (fat_tree) {
    c.topo.kind = SIM_TOPO_FAT_TREE;
    c.topo.k = 4;
  }
  c.routing = rt;
  c.wl.kind = SIM_WL_INCAST;
  c.wl.incast_senders = N;
  c.wl.bytes = 1 << 20;
  struct sim *s = mk(&c);
  if (!s)
    return;
  CHECK(sim_run(s, 1000 * SIM_MS) == 1);
  const struct sim_stats *st = sim_stats(s);
  sim_time_t end = 0;
  for (uint32_t i = 0; i < sim_nflows(s); i++)
    if (sim_flow(s, i)->finish > end)
      end = sim_flow(s, i)->finish;
  double ideal = (double)N * c.wl.bytes * 8 / (100e9 * 4096 / ib_wire(4096));
  uint64_t drops = st->drops_wire;
  uint64_t maxin = 0;
  for (int t = 0; t < SIM_TIERS; t++) {
    drops += st->drops_buffer[t] + st->drops_lossless[t];
    maxin = st->max_vl_in[t] > maxin ? st->max_vl_in[t] : maxin;
  }
  printf("ib incast %u-to-1 (%s, %s): %.1f us, ideal %.1f us, drops %llu, "
         "retransmitted %llu, fullest VL buffer %llu of %llu\n",
         N, fat_tree ? "fat-tree" : "one switch",
         rt == SIM_ROUTE_ADAPTIVE ? "adaptive" : "static", (double)end / 1e6,
         ideal * 1e6, (unsigned long long)drops,
         (unsigned long long)st->retx_pkts, (unsigned long long)maxin,
         (unsigned long long)c.ib.vl_buffer);
  CHECK_EQ(drops, 0);
  if (rt == SIM_ROUTE_STATIC) /* in order: nothing to resend */
    CHECK_EQ(st->retx_pkts + st->timeouts, 0);
  CHECK_EQ(st->credit_overruns, 0);
  CHECK(maxin <= c.ib.vl_buffer);
  CHECK(maxin > 0);
  CHECK(st->fc_pkts > 0);
  CHECK((double)end / 1e12 < ideal * 1.02 + 20e-6);
  sim_del(s);
}

static void test_incast(void) {
  incast(4, false, SIM_ROUTE_STATIC);
  incast(48, false, SIM_ROUTE_STATIC);
  incast(15, true, SIM_ROUTE_STATIC);
  incast(15, true, SIM_ROUTE_ADAPTIVE);
}

/* Runs s to 1 ms and on to 3 ms: b[i] is what flow i had acked between. */
static void acked_1_to_3ms(struct sim *s, double b[2]) {
  sim_run(s, 1 * SIM_MS);
  uint64_t a0[2] = {sim_flow(s, 0)->acked, sim_flow(s, 1)->acked};
  sim_run(s, 3 * SIM_MS);
  for (int i = 0; i < 2; i++)
    b[i] = (double)(sim_flow(s, (uint32_t)i)->acked - a0[i]);
}

/* Two senders on SLs 0 and 1 (VLs 0 and 1) into one port: the egress
 * serves them by the arbitration tables. Returns the bytes of each flow
 * acked between 1 and 3 ms. */
static void vl_shares(struct sim_cfg *c, double share[2]) {
  struct sim *s = mk(c);
  if (!s)
    return;
  for (uint32_t i = 0; i < 2; i++) {
    sim_add_flow(s, i, 2, 1ull << 30, 0, SIM_OP_WRITE);
    CHECK(sim_flow_set_sl(s, i, (uint8_t)i) == 0);
  }
  double b[2];
  acked_1_to_3ms(s, b);
  share[0] = b[0] / (b[0] + b[1]);
  share[1] = b[1] / (b[0] + b[1]);
  CHECK(sim_stats(s)->vl_tx_bytes[0] > 0 && sim_stats(s)->vl_tx_bytes[1] > 0);
  CHECK((b[0] + b[1]) * 8 / 2e-3 >
        0.98 * 100e9 * 4096 / ib_wire(4096) * (c->tp.mtu == 4096 ? 1 : 0.9));
  sim_del(s);
}

/* VL arbitration at a NIC: host 0 sends two flows, to hosts 1 and 2, on
 * SLs 0 and 1 (VLs 0 and 1). The switch sends them out of two ports, so
 * only the NIC's own port arbitrates: their shares of its link follow
 * its tables like a switch egress's. Returns the share of VL 0. */
static double nic_vl_share(struct sim_cfg *c) {
  struct sim *s = mk(c);
  if (!s)
    return -1;
  for (uint32_t i = 0; i < 2; i++) {
    sim_add_flow(s, 0, 1 + i, 1ull << 32, 0, SIM_OP_WRITE);
    CHECK(sim_flow_set_sl(s, i, (uint8_t)i) == 0);
  }
  double b[2];
  acked_1_to_3ms(s, b);
  /* together they fill the NIC's link */
  CHECK((b[0] + b[1]) * 8 / 2e-3 > 0.98 * 100e9 * 4096 / ib_wire(4096));
  CHECK_EQ(sim_stats(s)->credit_overruns, 0);
  sim_del(s);
  return b[0] / (b[0] + b[1]);
}

static void nic_vl_cfg(struct sim_cfg *c, int model) {
  ib_switch(c, 3);
  c->tp.model = model ? SIM_HOST_UROCE : SIM_HOST_SIMPLE;
  c->ib.vls = 2;
  c->tp.ctrl_prio = 1;
}

static void test_nic_vl_arbitration(void) {
  struct sim_cfg c;
  for (int model = 0; model < 2; model++) {
    const char *name = model ? "uroce" : "simple";
    /* Low table 1:3 (64 and 192 blocks: one 65-block packet, then
     * three). */
    nic_vl_cfg(&c, model);
    c.ib.nlow = 2;
    c.ib.low[0] = (struct sim_vlarb_ent){0, 64};
    c.ib.low[1] = (struct sim_vlarb_ent){1, 192};
    double sh = nic_vl_share(&c);
    printf("nic vl arbitration low 64:192, %s hosts: VL0 share %.4f of the "
           "NIC's link, weights 0.25\n",
           name, sh);
    CHECK(fabs(sh - 0.25) < 0.02 * 0.25);
    /* VL 1 in the high table: without a limit it takes the link; a limit
     * of 0 lets one low packet through after each high one; 2 (8 KiB)
     * after every two 4124-byte high packets. */
    static const uint8_t lims[] = {SIM_VLARB_UNLIMITED, 0, 2};
    static const double want[] = {0, 0.5, 1.0 / 3};
    for (int i = 0; i < 3; i++) {
      nic_vl_cfg(&c, model);
      c.ib.nhigh = 1;
      c.ib.high[0] = (struct sim_vlarb_ent){1, 255};
      c.ib.nlow = 1;
      c.ib.low[0] = (struct sim_vlarb_ent){0, 255};
      c.ib.high_limit = lims[i];
      sh = nic_vl_share(&c);
      printf("nic vl arbitration high VL1, limit %u, %s hosts: VL0 share "
             "%.4f, expected %.4f\n",
             lims[i], name, sh, want[i]);
      if (i == 0)
        CHECK(sh < 0.001);
      else
        CHECK(fabs(sh - want[i]) < 0.02 * want[i]);
    }
  }
}

/* Periodic flow control: while a link has traffic, each end sends an FC
 * packet for every data VL that had none in the last period. One flow
 * 0 -> 1 through a switch, an ACK per packet: at each of the 4 link ends
 * one VL has news at every packet (data at the inputs facing the
 * sender, ACKs at those facing it back), the other 7 of 8 only the
 * period's. Over an interval: 4 x 7 x interval / period of them. */
static void test_fc_periodic(void) {
  struct sim_cfg c;
  ib_switch(&c, 2);
  c.tp.model = SIM_HOST_SIMPLE;
  c.tp.ack_every = 1;
  c.ib.fc_period = 2 * SIM_US;
  struct sim *s = mk(&c);
  if (!s)
    return;
  sim_add_flow(s, 0, 1, 1ull << 32, 0, SIM_OP_WRITE);
  sim_run(s, 1 * SIM_MS);
  uint64_t p0 = sim_stats(s)->fc_periodic;
  sim_run(s, 3 * SIM_MS);
  uint64_t n = sim_stats(s)->fc_periodic - p0;
  double want = 4.0 * 7 * (2 * SIM_MS) / (double)c.ib.fc_period;
  printf("periodic FC packets over 2 ms, period 2 us: %llu, closed form "
         "%.0f\n",
         (unsigned long long)n, want);
  CHECK(fabs((double)n - want) <= 4 * 7);
  sim_del(s);
  /* The default period: 65,536 symbol times of a 4x link, 2^21 bit times:
   * 20.97 us at 100 Gb/s. */
  CHECK_EQ(sim_ib_fc_period(100 * GBPS), 20971520);
  CHECK_EQ(sim_ib_fc_period(200 * GBPS), 10485760);
}

/* FC packets take line time from data: with a period of 100 ns and 8 VLs,
 * 8 x 8 bytes every 100 ns on each direction of every link is 5.12% of
 * 100 Gb/s, and a long flow's goodput drops by that share (256-byte MTU,
 * so that a frame is a fraction of the period; an ACK every 128 packets,
 * so that news on the ACKs' VL is rare). */
static double fc_goodput(sim_time_t period, uint64_t *periodic) {
  struct sim_cfg c;
  ib_switch(&c, 2);
  c.tp.model = SIM_HOST_SIMPLE;
  c.tp.mtu = 256;
  c.tp.window = 1024;
  c.tp.ack_every = 128;
  c.ib.fc_period = period;
  struct sim *s = mk(&c);
  if (!s)
    return 0;
  sim_add_flow(s, 0, 1, 1ull << 32, 0, SIM_OP_WRITE);
  /* payload placed at the receiver: ACKs of 128 packets would blur it */
  sim_run(s, 1 * SIM_MS);
  uint64_t r0 = sim_flow(s, 0)->rx_bytes;
  sim_run(s, 3 * SIM_MS);
  double g = (double)(sim_flow(s, 0)->rx_bytes - r0) * 8 / 2e-3 / 1e9;
  *periodic = sim_stats(s)->fc_periodic;
  CHECK_EQ(sim_stats(s)->credit_overruns, 0);
  sim_del(s);
  return g;
}

static void test_fc_line_time(void) {
  uint64_t p0, p1;
  double g0 = fc_goodput(1000 * SIM_MS, &p0),
         g1 = fc_goodput(100 * SIM_NS, &p1);
  double line = 100 * 256 / ib_wire(256);
  double drop = 1 - g1 / g0, want = 8.0 * SIM_IB_FC_WIRE * 8 / (100e-9 * 100e9);
  printf("FC line time: goodput %.3f Gb/s with a 100 ns period (%llu "
         "periodic FC packets), %.3f without (line %.3f): drop %.4f, closed "
         "form (FC bytes / period / rate) %.4f\n",
         g1, (unsigned long long)p1, g0, line, drop, want);
  CHECK(fabs(g0 - line) < 0.001 * line);
  CHECK(fabs(drop - want) < 0.02 * want);
  CHECK_EQ(p0, 0);
}

/* The periodic timer stops on an idle link: a second flow 50 ms after
 * the first costs as many events as one 5 ms after it, and the run
 * ends. */
static void test_fc_idle_stops(void) {
  uint64_t ev[2];
  for (int i = 0; i < 2; i++) {
    struct sim_cfg c;
    ib_switch(&c, 2);
    struct sim *s = mk(&c);
    if (!s)
      return;
    sim_add_flow(s, 0, 1, 1 << 20, 0, SIM_OP_WRITE);
    sim_add_flow(s, 1, 0, 1 << 20, (i ? 50 : 5) * SIM_MS, SIM_OP_WRITE);
    CHECK(sim_run(s, SIM_NEVER) == 1);
    ev[i] = sim_stats(s)->events;
    sim_del(s);
  }
  printf("idle links: %llu events with 5 ms between two flows, %llu with "
         "50 ms\n",
         (unsigned long long)ev[0], (unsigned long long)ev[1]);
  CHECK(ev[1] <= ev[0] + 16);
}

/* Virtual lanes against head-of-line blocking: host 0 sends flow A into
 * a 4-to-1 hot spot (host 4) and flow B to a free host (5). On one VL,
 * A's packets fill host 0's input buffer at the switch and B crawls at
 * A's rate; on a VL of its own B takes the rest of host 0's link. Both
 * host models: the uroce NIC must not block B's QP behind A's. */
static void test_vl_hol(void) {
  for (int model = 0; model < 2; model++) {
    double a[2], b[2];
    for (int own = 0; own < 2; own++) {
      struct sim_cfg c;
      ib_switch(&c, 6);
      c.tp.model = model ? SIM_HOST_UROCE : SIM_HOST_SIMPLE;
      c.ib.vls = 2;
      c.tp.data_prio = 1;
      c.tp.ctrl_prio = 1;
      c.ib.nlow = 2;
      c.ib.low[0] = (struct sim_vlarb_ent){0, 255};
      c.ib.low[1] = (struct sim_vlarb_ent){1, 255};
      struct sim *s = mk(&c);
      if (!s)
        return;
      sim_add_flow(s, 0, 4, 1ull << 32, 0, SIM_OP_WRITE);
      sim_add_flow(s, 0, 5, 1ull << 32, 0, SIM_OP_WRITE);
      for (uint32_t i = 1; i <= 3; i++)
        sim_add_flow(s, i, 4, 1ull << 32, 0, SIM_OP_WRITE);
      if (own)
        CHECK(sim_flow_set_sl(s, 1, 0) == 0);
      sim_run(s, 1 * SIM_MS);
      uint64_t a0 = sim_flow(s, 0)->acked, b0 = sim_flow(s, 1)->acked;
      sim_run(s, 9 * SIM_MS); /* long: ACK timing blurs a window's ends */
      a[own] = (double)(sim_flow(s, 0)->acked - a0) * 8 / 8e-3 / 1e9;
      b[own] = (double)(sim_flow(s, 1)->acked - b0) * 8 / 8e-3 / 1e9;
      CHECK_EQ(sim_stats(s)->credit_overruns, 0);
      sim_del(s);
    }
    double line = 100 * 4096.0 / ib_wire(4096);
    printf("vl head-of-line, %s hosts: one VL A %.1f B %.1f Gb/s; B on its "
           "own VL A %.1f B %.1f Gb/s (line %.1f)\n",
           model ? "uroce" : "simple", a[0], b[0], a[1], b[1], line);
    CHECK(fabs(b[0] - a[0]) < 0.1 * a[0] && a[0] < 0.3 * line);
    CHECK(b[1] > 0.95 * (line - a[1]) && a[1] + b[1] <= line * 1.002);
  }
}

static void test_vl_arbitration(void) {
  struct sim_cfg c;
  double sh[2];
  /* Low table, weights 1:3 and 2:3 in whole packets of 65 blocks. */
  static const uint8_t w[][2] = {{65, 195}, {130, 195}, {195, 65}};
  /* Each host model: with uroce hosts each flow's data goes on its own
   * SL too, its ACKs on the control SL. */
  for (int model = 0; model < 2; model++)
    for (size_t i = 0; i < 3; i++) {
      ib_switch(&c, 3);
      c.tp.model = model ? SIM_HOST_UROCE : SIM_HOST_SIMPLE;
      c.ib.vls = 2;
      c.tp.ctrl_prio = 1;
      c.ib.nlow = 2;
      c.ib.low[0] = (struct sim_vlarb_ent){0, w[i][0]};
      c.ib.low[1] = (struct sim_vlarb_ent){1, w[i][1]};
      vl_shares(&c, sh);
      double want = (double)w[i][0] / (w[i][0] + w[i][1]);
      printf("vl arbitration low %u:%u, %s hosts: VL0 share %.4f, weights "
             "%.4f\n",
             w[i][0], w[i][1], model ? "uroce" : "simple", sh[0], want);
      CHECK(fabs(sh[0] - want) < 0.02 * want);
    }
  /* Weights below a packet: each turn still sends one, so 1:3 with 256 B
   * packets of 5 blocks is 13:39 packets, the weights' share. */
  ib_switch(&c, 3);
  c.tp.model = SIM_HOST_SIMPLE;
  c.tp.mtu = 256;
  c.ib.vls = 2;
  c.tp.ctrl_prio = 1;
  c.ib.nlow = 2;
  c.ib.low[0] = (struct sim_vlarb_ent){0, 64};
  c.ib.low[1] = (struct sim_vlarb_ent){1, 192};
  vl_shares(&c, sh);
  printf("vl arbitration low 64:192, 256 B MTU: VL0 share %.4f, weights "
         "0.25\n",
         sh[0]);
  CHECK(fabs(sh[0] - 0.25) < 0.02 * 0.25);
  /* VL1 in the high table: unlimited, it takes the link; a limit of 0
   * lets one low packet through after each high one. */
  for (int lim = 0; lim < 2; lim++) {
    ib_switch(&c, 3);
    c.tp.model = SIM_HOST_SIMPLE;
    c.ib.vls = 2;
    c.tp.ctrl_prio = 1;
    c.ib.nhigh = 1;
    c.ib.high[0] = (struct sim_vlarb_ent){1, 255};
    c.ib.nlow = 1;
    c.ib.low[0] = (struct sim_vlarb_ent){0, 255};
    c.ib.high_limit = lim ? SIM_VLARB_UNLIMITED : 0;
    vl_shares(&c, sh);
    printf("vl arbitration high VL1, limit %s: VL0 share %.4f\n",
           lim ? "none" : "0", sh[0]);
    if (lim)
      CHECK(sh[0] < 0.001);
    else
      CHECK(fabs(sh[0] - 0.5) < 0.01);
  }
}

static int parse(const char *y, struct sim_cfg *c, char *err, size_t n) {
  char name[64];
  return sim_scenario_parse(y, strlen(y), "t.yaml", ".", c, name, sizeof name,
                            err, n);
}

/* Keys of the other fabric are errors naming them. */
static void test_scenario_keys(void) {
  struct sim_cfg c;
  char err[512];
  static const struct {
    const char *yaml, *needle;
  } bad[] = {
      {"fabric: infiniband\nswitch: {pfc: {enabled: true}}\n", "switch.pfc"},
      {"switch: {buffer: 1MiB}\nfabric: infiniband\n", "switch.buffer"},
      {"fabric: infiniband\ntransport: {cc: dcqcn}\n", "transport.cc"},
      {"fabric: infiniband\ntransport: {ipv6: true}\n", "transport.ipv6"},
      {"fabric: infiniband\nrouting: ecmp\n", "routing"},
      {"fabric: infiniband\nrouting: spray\n", "spray"},
      {"infiniband: {vls: 4}\n", "infiniband"},
      {"fabric: infiniband\ninfiniband: {vls: 3}\n", "vls"},
      {"fabric: infiniband\ninfiniband: {pfc: 1}\n", "pfc"},
      {"fabric: ethernet\n", "fabric"},
      {"fabric: infiniband\ninfiniband: {vlarb_low: [[9, 1]]}\n", "vlarb_low"},
      {"fabric: infiniband\ninfiniband: {vlarb_high: [[1, 2, 3]]}\n",
       "[vl, weight]"},
      {"recovery: {trap_us: 5}\n", "recovery.trap_us"},
      {"recovery: {traps: false}\n", "recovery.traps"},
      {"failures: [{at_us: 5, switch: 4, trap_lost: true}]\n",
       "failures.trap_lost"},
      {"fabric: infiniband\ninfiniband: {sm: {sweep_interval_us: -1}}\n",
       "sweep_interval_us"},
      {"fabric: infiniband\nrecovery: {detection_us: 5}\n",
       "recovery.detection_us"},
      {"failures: [{at_us: 5}]\n", "'switch'"},
      {"failures: [{at_us: 5, switch: 1, prot: 2}]\n", "prot"},
      {"fabric: infiniband\ninfiniband: {cc: {enabled: maybe}}\n", "enabled"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    int rc = parse(bad[i].yaml, &c, err, sizeof err);
    if (rc == 0)
      sim_cfg_free(&c);
    CHECK(rc != 0);
    CHECK(strstr(err, bad[i].needle) != NULL);
    if (!strstr(err, bad[i].needle))
      fprintf(stderr, "  '%s' gave '%s'\n", bad[i].yaml, err);
  }
  /* OpenSM's periodic sweep: 10 s unless told, 0 turns it off; traps
   * on unless told. */
  CHECK(parse("fabric: infiniband\n", &c, err, sizeof err) == 0);
  CHECK(c.ib.sm.sweep_interval == 10000 * SIM_MS && c.recovery.traps);
  sim_cfg_free(&c);
  CHECK(parse("fabric: infiniband\ninfiniband: {sm: {sweep_interval_us: "
              "0}}\nrecovery: {traps: false}\nfailures: [{at_us: 5, "
              "switch: 4, trap_lost: true}]\n",
              &c, err, sizeof err) == 0);
  CHECK(c.ib.sm.sweep_interval == 0 && !c.recovery.traps && c.nfail == 1 &&
        c.fail[0].trap_lost);
  sim_cfg_free(&c);
  /* InfiniBand routes by its LFTs unless told otherwise. */
  CHECK(parse("fabric: infiniband\ninfiniband: {vl_buffer: 16KiB, grh: "
              "true, fc_latency_ns: 50}\n",
              &c, err, sizeof err) == 0);
  CHECK(c.fabric == SIM_FABRIC_IB && c.routing == SIM_ROUTE_STATIC);
  CHECK(c.ib.vl_buffer == 16384 && c.ib.grh && c.ib.fc_latency == 50000);
  sim_cfg_free(&c);
  CHECK(parse("routing: static\n", &c, err, sizeof err) == 0);
  char e2[256] = "";
  struct sim *s = sim_new(&c, e2, sizeof e2);
  CHECK(s == NULL && strstr(e2, "static"));
  sim_del(s);
  sim_cfg_free(&c);
  CHECK(parse("fabric: infiniband\ninfiniband: {vls: 2, vlarb_low: [[0, "
              "32], [1, 64]], vlarb_high: [[1, 8]], high_limit: 4}\n",
              &c, err, sizeof err) == 0);
  CHECK(c.ib.nlow == 2 && c.ib.low[1].vl == 1 && c.ib.low[1].weight == 64);
  CHECK(c.ib.nhigh == 1 && c.ib.high_limit == 4);
  s = sim_new(&c, e2, sizeof e2);
  CHECK(s != NULL);
  sim_del(s);
  /* A table naming a VL above vls, or a VL no table serves, is refused. */
  c.ib.low[1].vl = 3;
  s = sim_new(&c, e2, sizeof e2);
  CHECK(s == NULL && strstr(e2, "vlarb_low entry 1"));
  sim_del(s);
  c.ib.low[1].vl = 0;
  c.ib.nhigh = 0;
  s = sim_new(&c, e2, sizeof e2);
  CHECK(s == NULL && strstr(e2, "VL 1"));
  sim_del(s);
  sim_cfg_free(&c);
  /* An input buffer smaller than one packet is refused. */
  ib_switch(&c, 2);
  c.ib.vl_buffer = 4096;
  s = sim_new(&c, e2, sizeof e2);
  CHECK(s == NULL && strstr(e2, "vl_buffer"));
  sim_del(s);
  /* So is an FC period too short to leave the link to data. */
  ib_switch(&c, 2);
  c.ib.fc_period = 5 * SIM_NS;
  s = sim_new(&c, e2, sizeof e2);
  CHECK(s == NULL && strstr(e2, "fc_period_ns"));
  sim_del(s);
}

/* The subnet manager's LFTs on fat-trees: deadlock-free, balanced over
 * the up ports, every NIC reachable; a routing loop made by hand is
 * caught by the same check. */
static void test_sm_routes(void) {
  static const struct {
    uint32_t k;
    enum sim_sm_engine e;
    uint8_t lmc;
  } cases[] = {
      {4, SIM_SM_FTREE, 0},  {8, SIM_SM_FTREE, 0},  {8, SIM_SM_FTREE, 2},
      {4, SIM_SM_MINHOP, 0}, {8, SIM_SM_MINHOP, 0}, {8, SIM_SM_MINHOP, 1},
      {4, SIM_SM_UPDN, 0},   {8, SIM_SM_UPDN, 0},   {8, SIM_SM_UPDN, 2}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct sim_cfg c;
    ib_switch(&c, 2);
    c.topo.kind = SIM_TOPO_FAT_TREE;
    c.topo.k = cases[i].k;
    c.ib.sm.engine = cases[i].e;
    c.ib.sm.lmc = cases[i].lmc;
    c.wl.kind = SIM_WL_PERMUTATION;
    c.wl.bytes = 64 << 10;
    struct sim *s = mk(&c);
    if (!s)
      return;
    struct sim_sm_info in;
    CHECK(sim_sm_info(s, &in) == 0);
    uint32_t k = cases[i].k, nsw = 5 * k * k / 4, n = k * k * k / 4;
    printf("sm %s k=%u lmc %u: %u LIDs, CDG %llu channels %llu edges, "
           "deadlock-free %d, up imbalance %u; sweep %.1f us, compute %.1f "
           "us, program %.1f us, %llu SMPs\n",
           in.engine, k, in.lmc, in.lids, (unsigned long long)in.cdg_channels,
           (unsigned long long)in.cdg_edges, in.deadlock_free, in.max_imbalance,
           (double)in.discover / 1e6, (double)in.compute / 1e6,
           (double)in.program / 1e6, (unsigned long long)in.smps);
    CHECK_EQ(in.lids, (n + 1) * (1u << in.lmc) + nsw - 1);
    CHECK(in.deadlock_free);
    CHECK_EQ(in.cdg_channels, 2 * (k * k / 2 * k / 2) * 2);
    CHECK(in.cdg_edges > 0);
    CHECK_EQ(in.max_imbalance, 0);
    CHECK(sim_run(s, SIM_NEVER) == 1);
    CHECK_EQ(sim_stats(s)->drops_noroute, 0);
    if (i == 0) {
      /* Agg 0 of pod 0 sends NIC n-1's traffic down to edge 1, which
       * sends it back up to agg 0: a loop, a cycle in the CDG. */
      struct sim_switch *agg = &s->sws[k * k / 2], *e1 = &s->sws[1];
      uint32_t lid = s->nic_lid[n - 1];
      agg->lft[lid] = 1;                /* agg port 1 faces edge 1 */
      e1->lft[lid] = (uint16_t)(k / 2); /* edge 1's first up port: agg 0 */
      sim_sm_check(s, &in);
      CHECK(!in.deadlock_free);
    }
    sim_del(s);
  }
}

/* After links fail the SM recomputes. Up/down keeps every route up hops
 * then down hops, so the CDG stays acyclic whichever up-link of a k=4
 * fat-tree goes down, and for pairs of them; minhop's shortest paths turn
 * down and up again where two edges of a pod each lose a different
 * aggregation (the only way between them is down-up), and its CDG has
 * cycles (and the permutation may never finish: a credit loop). With one
 * link down up/down routes every flow; with two, the pairs whose only way
 * is down-up have no legal route, so their flows stall (what OpenSM's
 * updn does too: deadlock freedom bought with connectivity). */
static void test_updn_failures(void) {
  const uint32_t k = 4, upper = k * k; /* edges and aggregations */
  /* (switch, up port) pairs; a second switch of UINT32_MAX: one link */
  uint32_t cases[64][4], nc = 0;
  for (uint32_t sw = 0; sw < upper; sw++)
    for (uint32_t port = k / 2; port < k; port++) {
      uint32_t *x = cases[nc++];
      x[0] = sw, x[1] = port, x[2] = UINT32_MAX, x[3] = 0;
    }
  for (uint32_t e = 1; e < k * k / 2; e++) { /* edge 0 loses agg 0 */
    uint32_t *x = cases[nc++];
    x[0] = 0, x[1] = k / 2, x[2] = e, x[3] = k / 2 + 1;
  }
  int cyclic[2] = {0, 0}, stuck[2] = {0, 0}, runs[2] = {0, 0};
  for (int e = 0; e < 2; e++)
    for (uint32_t i = 0; i < nc; i++) {
      struct sim_cfg c;
      ib_switch(&c, 2);
      c.topo.kind = SIM_TOPO_FAT_TREE;
      c.topo.k = k;
      c.ib.sm.engine = e ? SIM_SM_UPDN : SIM_SM_MINHOP;
      c.wl.kind = SIM_WL_PERMUTATION;
      c.wl.bytes = 64 << 10;
      c.recovery.trap = 1 * SIM_US;
      c.nfail = cases[i][2] == UINT32_MAX ? 1 : 2;
      for (uint32_t f = 0; f < c.nfail; f++)
        c.fail[f] = (struct sim_failure){.kind = SIM_FAIL_LINK,
                                         .sw = cases[i][2 * f],
                                         .port = (uint16_t)cases[i][2 * f + 1],
                                         .at = SIM_US};
      struct sim *s = mk(&c);
      if (!s)
        return;
      /* 64 KiB each: done in well under a millisecond when it flows */
      int done = sim_run(s, 50 * SIM_MS) == 1;
      uint32_t n;
      const struct sim_fail_result *r = sim_fail_results(s, &n);
      CHECK(n == c.nfail && r[n - 1].installed != SIM_NEVER);
      struct sim_sm_info in;
      sim_sm_check(s, &in);
      cyclic[e] += !in.deadlock_free;
      stuck[e] += !done;
      runs[e]++;
      if (e && c.nfail == 1) { /* up/down, one link down: every byte */
        CHECK(done);
        for (uint32_t f = 0; f < sim_nflows(s); f++)
          CHECK_EQ(sim_flow(s, f)->acked, 64 << 10);
        CHECK_EQ(sim_stats(s)->drops_noroute, 0);
      } else if (e && !done) { /* stalled for want of a legal route */
        CHECK(sim_stats(s)->drops_noroute > 0);
      }
      sim_del(s);
    }
  printf("k=4 fat-tree, one or two up-links down, CDG after the SM's "
         "recompute: minhop cyclic in %d of %d (%d permutations not done "
         "after 50 ms), updn in %d of %d (%d)\n",
         cyclic[0], runs[0], stuck[0], cyclic[1], runs[1], stuck[1]);
  CHECK(cyclic[0] > 0); /* the check tells them apart */
  CHECK_EQ(cyclic[1], 0);
  CHECK_EQ(runs[1], (int)nc);
}

/* LMC: 2^lmc LIDs per NIC give the flows between two NICs several paths
 * (DLID = base + sport mod 2^lmc); without LMC they share one. */
static void test_lmc_paths(void) {
  for (uint8_t lmc = 0; lmc <= 2; lmc += 2) {
    struct sim_cfg c;
    ib_switch(&c, 2);
    c.topo.kind = SIM_TOPO_FAT_TREE;
    c.topo.k = 4;
    c.ib.sm.lmc = lmc;
    struct sim *s = mk(&c);
    if (!s)
      return;
    uint32_t seen[16] = {0}, nseen = 0;
    for (uint32_t i = 0; i < 16; i++) {
      sim_add_flow(s, 0, 15, 4096, 0, SIM_OP_WRITE);
      uint16_t ports[8];
      uint32_t sws[8];
      CHECK_EQ(sim_flow_path(s, i, ports, sws, 8), 5);
      uint32_t key = (uint32_t)ports[0] << 8 | ports[1]; /* edge, agg up */
      bool dup = false;
      for (uint32_t j = 0; j < nseen; j++)
        dup |= seen[j] == key;
      if (!dup)
        seen[nseen++] = key;
    }
    printf("lmc %u: 16 flows 0 -> 15 take %u paths\n", lmc, nseen);
    CHECK_EQ(nseen, lmc ? 4 : 1); /* k = 4: 2 aggs x 2 cores */
    sim_del(s);
  }
}

/* Congestion spreading: an incast into host 4 (leaf 1) from hosts 1, 2
 * (leaf 0) and 5, 6, 7 (leaf 1) backs up, credit by credit, through the
 * spine into leaf 0's uplink, which a victim flow 0 -> 8 (leaf 2) shares
 * on the same VL. Without IB CC the victim waits behind the incast's
 * packets; with it the incast's sources are throttled and the victim runs
 * faster. */
static double ib_victim(bool cc, uint64_t *fecn, uint64_t *becn) {
  struct sim_cfg c;
  ib_switch(&c, 4);
  c.topo.leaves = 3;
  c.topo.spines = 1;
  c.topo.link[1].rate_bps = 400 * GBPS;
  c.ib.cc.enabled = cc;
  struct sim *s = mk(&c);
  if (!s)
    return 0;
  uint32_t senders[] = {1, 2, 5, 6, 7};
  for (int i = 0; i < 5; i++)
    sim_add_flow(s, senders[i], 4, 16 << 20, 0, SIM_OP_WRITE);
  int64_t v = sim_add_flow(s, 0, 8, 8 << 20, 200 * SIM_US, SIM_OP_WRITE);
  CHECK(sim_run(s, SIM_NEVER) == 1);
  const struct sim_flow *f = sim_flow(s, (uint32_t)v);
  double fct = (double)(f->finish - f->start) / 1e6;
  *fecn = sim_stats(s)->fecn_marks;
  *becn = sim_stats(s)->becns;
  CHECK_EQ(sim_stats(s)->credit_overruns, 0);
  sim_del(s);
  return fct;
}

static void test_cc_spreading(void) {
  uint64_t f0, b0, f1, b1;
  double off = ib_victim(false, &f0, &b0), on = ib_victim(true, &f1, &b1);
  double ideal = (8 << 20) / (100e9 * 4096 / ib_wire(4096) / 8) * 1e6;
  printf("ib congestion spreading: victim FCT %.1f us without IB CC, %.1f us "
         "with it (%llu FECN, %llu BECN), ideal %.1f us\n",
         off, on, (unsigned long long)f1, (unsigned long long)b1, ideal);
  CHECK_EQ(f0 + b0, 0);
  CHECK(f1 > 0 && b1 > 0 && b1 <= f1);
  CHECK(off > 1.5 * ideal); /* head-of-line blocked */
  CHECK(on < 0.8 * off);    /* less with IB CC */
}

/* The same seed gives the same run, event for event. */
static void test_determinism(void) {
  uint64_t ev[2];
  sim_time_t fin[2];
  for (int i = 0; i < 2; i++) {
    struct sim_cfg c;
    ib_switch(&c, 8);
    c.topo.kind = SIM_TOPO_FAT_TREE;
    c.topo.k = 4;
    c.routing = SIM_ROUTE_ADAPTIVE;
    c.seed = 7;
    c.wl.kind = SIM_WL_PERMUTATION;
    c.wl.bytes = 256 << 10;
    struct sim *s = mk(&c);
    if (!s)
      return;
    CHECK(sim_run(s, SIM_NEVER) == 1);
    ev[i] = sim_stats(s)->events;
    fin[i] = sim_now(s);
    sim_del(s);
  }
  CHECK_EQ(ev[0], ev[1]);
  CHECK_EQ(fin[0], fin[1]);
}

int main(void) {
  T_RUN(test_line_rate);
  T_RUN(test_credit_rtt);
  T_RUN(test_incast);
  T_RUN(test_vl_arbitration);
  T_RUN(test_vl_hol);
  T_RUN(test_nic_vl_arbitration);
  T_RUN(test_fc_periodic);
  T_RUN(test_fc_line_time);
  T_RUN(test_fc_idle_stops);
  T_RUN(test_sm_routes);
  T_RUN(test_lmc_paths);
  T_RUN(test_updn_failures);
  T_RUN(test_cc_spreading);
  T_RUN(test_scenario_keys);
  T_RUN(test_determinism);
  return T_DONE();
}
