/* Failures on both fabrics: a link on a flow's path goes down; packets
 * are lost until the new routes take effect, which must be the modelled
 * detection + convergence (RoCE) or trap + sweep + computation +
 * programming (InfiniBand) after the failure, within one packet time;
 * the transport then delivers every byte. A spine going down and a link
 * flapping recover too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/report.h"
#include "sim/sim.h"
#include "t.h"
#include "uroce/verbs.h"

static struct sim *mk(struct sim_cfg *c) {
  char err[256] = "";
  struct sim *s = sim_new(c, err, sizeof err);
  if (!s)
    fprintf(stderr, "sim_new: %s\n", err);
  CHECK(s != NULL);
  return s;
}

/* Two leaves of four hosts, two spines, 100 Gb/s, 1 us links; the simple
 * model with a window that never closes during the outage, so that the
 * flow keeps sending into the dead link until the routes change. */
static void base(struct sim_cfg *c, bool ib) {
  sim_cfg_default(c);
  c->topo.leaves = 2;
  c->topo.hosts_per_leaf = 4;
  c->topo.spines = 2;
  c->tp.model = SIM_HOST_SIMPLE;
  c->tp.window = 65536;
  c->tp.rto = 200 * SIM_US;
  c->recovery.detection = 50 * SIM_US;
  c->recovery.convergence = 100 * SIM_US;
  c->recovery.trap = 10 * SIM_US;
  if (ib) {
    c->fabric = SIM_FABRIC_IB;
    c->routing = SIM_ROUTE_STATIC;
  }
}

/* mk(c) with flow 0: 64 MiB written from host 0 to host 4. */
static struct sim *mk_flow(struct sim_cfg *c) {
  struct sim *s = mk(c);
  if (s)
    sim_add_flow(s, 0, 4, 64 << 20, 0, SIM_OP_WRITE);
  return s;
}

/* The leaf-0 up port a flow from host src (on leaf 0) to host dst (on
 * leaf 1) takes in a fabric made from c. */
static uint16_t leaf0_up(struct sim_cfg *c, uint32_t src, uint32_t dst) {
  struct sim *s = mk(c);
  if (!s)
    return 0;
  sim_add_flow(s, src, dst, 64 << 20, 0, SIM_OP_WRITE);
  uint16_t ports[8];
  uint32_t sws[8];
  int h = sim_flow_path(s, 0, ports, sws, 8);
  CHECK(h == 3 && sws[0] == 0 && ports[0] >= 4);
  sim_del(s);
  return ports[0];
}

/* The leaf-0 up port flow 0 (host 0 to host 4) takes. */
static uint16_t first_up(bool ib) {
  struct sim_cfg c;
  base(&c, ib);
  return leaf0_up(&c, 0, 4);
}

static void link_on_path(bool ib) {
  struct sim_cfg c;
  base(&c, ib);
  c.nfail = 1;
  c.fail[0] = (struct sim_failure){
      .kind = SIM_FAIL_LINK, .sw = 0, .port = first_up(ib), .at = 100 * SIM_US};
  struct sim *s = mk_flow(&c);
  if (!s)
    return;
  CHECK(sim_run(s, 100 * SIM_MS) == 1);
  uint32_t n;
  const struct sim_fail_result *r = sim_fail_results(s, &n);
  CHECK_EQ(n, 1);
  if (n != 1) {
    sim_del(s);
    return;
  }
  sim_time_t model = r->detect + r->sweep + r->compute + r->program;
  double pkt_ps =
      (double)sim_data_wire_bytes(&c, 4096, false) * 8 / 100e9 * 1e12;
  printf("%s link down at %.1f us: routes back after %.3f us (detect %.3f, "
         "sweep %.3f, compute %.3f, program %.3f); last loss %.3f us after; "
         "%llu packets lost, flow done at %.1f us\n",
         ib ? "ib" : "roce", (double)r->at / 1e6,
         (double)(r->installed - r->at) / 1e6, (double)r->detect / 1e6,
         (double)r->sweep / 1e6, (double)r->compute / 1e6,
         (double)r->program / 1e6, (double)(r->last_loss - r->at) / 1e6,
         (unsigned long long)r->lost_pkts,
         (double)sim_flow(s, 0)->finish / 1e6);
  CHECK_EQ(r->installed - r->at, model);
  if (ib)
    CHECK(r->sweep > 0 && r->program > 0);
  else
    CHECK_EQ(model, 150 * SIM_US);
  /* RoCE: lost up to the moment the routes changed, and not after.
   * InfiniBand: until the LFT Set reached the switch in front of the dead
   * link, which is after programming started (the routes stand until
   * then) and no later than its end. */
  CHECK(r->last_loss != SIM_NEVER && r->last_loss <= r->installed);
  if (ib)
    CHECK(r->last_loss >= r->at + r->detect + r->sweep + r->compute);
  else
    CHECK((double)(r->installed - r->last_loss) <= pkt_ps);
  CHECK(r->lost_pkts > 0);
  CHECK_EQ(sim_flow(s, 0)->acked, 64 << 20);
  CHECK_EQ(sim_stats(s)->drops_link_down, r->lost_pkts);
  sim_del(s);
}

static void test_link_down(void) {
  link_on_path(false);
  link_on_path(true);
}

/* The link on flow 0's path fails at 100 us with its trap lost (a
 * failure's trap_lost, or traps off for the fabric): the SM's periodic
 * sweep at 250 us (interval 250) notices it; its routes are in exactly
 * (250 - 100) + sweep + compute + program later, and packets are lost
 * until programming started (at least) and not after; with no periodic
 * sweeps (interval 0) it is never noticed. */
static void lost_trap(bool per_failure, sim_time_t iv) {
  struct sim_cfg c;
  base(&c, true);
  c.ib.sm.sweep_interval = iv;
  c.recovery.traps = per_failure;
  c.nfail = 1;
  c.fail[0] = (struct sim_failure){.kind = SIM_FAIL_LINK,
                                   .sw = 0,
                                   .port = first_up(true),
                                   .at = 100 * SIM_US,
                                   .trap_lost = per_failure};
  struct sim *s = mk_flow(&c);
  if (!s)
    return;
  int done = sim_run(s, iv ? 100 * SIM_MS : 2 * SIM_MS);
  uint32_t n;
  const struct sim_fail_result *r = sim_fail_results(s, &n);
  CHECK_EQ(n, 1);
  if (n != 1) {
    sim_del(s);
    return;
  }
  if (!iv) {
    printf("ib, trap lost, no periodic sweeps: routes never change; %llu "
           "packets lost by %.0f us, the last at %.3f us\n",
           (unsigned long long)r->lost_pkts, (double)sim_now(s) / 1e6,
           (double)r->last_loss / 1e6);
    CHECK_EQ(r->installed, 0);
    CHECK(r->noticed == SIM_NOTICED_NOT_YET);
    CHECK(r->last_loss != SIM_NEVER && r->last_loss > 1 * SIM_MS);
    sim_del(s);
    return;
  }
  /* The trap's sweep of the same change, for its steps. */
  struct sim_cfg ct = c;
  ct.ib.sm.sweep_interval = 10000 * SIM_MS;
  ct.recovery.traps = true;
  ct.fail[0].trap_lost = false;
  struct sim *st = mk(&ct);
  sim_run(st, 1 * SIM_MS);
  const struct sim_fail_result *rt = sim_fail_results(st, &n);
  CHECK_EQ(n, 1);
  sim_time_t next = (r->at + iv - 1) / iv * iv;
  /* The sweep's own steps: as packets they depend on the traffic then,
   * so they differ a little from the trap's sweep's. */
  sim_time_t model = (next - r->at) + r->sweep + r->compute + r->program;
  double pkt_ps = 0;
  printf("ib, trap lost (%s), sweeps every %.0f us: link down at %.1f us, "
         "routes back after %.3f us (next sweep %.3f, sweep %.3f, compute "
         "%.3f, program %.3f; closed form %.3f); last loss %.3f us after; "
         "%llu packets lost, flow done at %.1f us\n",
         per_failure ? "trap_lost" : "traps off", (double)iv / 1e6,
         (double)r->at / 1e6, (double)(r->installed - r->at) / 1e6,
         (double)r->detect / 1e6, (double)r->sweep / 1e6,
         (double)r->compute / 1e6, (double)r->program / 1e6,
         (double)model / 1e6, (double)(r->last_loss - r->at) / 1e6,
         (unsigned long long)r->lost_pkts,
         (double)sim_flow(s, 0)->finish / 1e6);
  CHECK(done == 1);
  CHECK(r->noticed == SIM_NOTICED_SWEEP);
  CHECK_EQ(r->detect, next - r->at);
  CHECK_EQ(r->installed - r->at, model);
  CHECK(rt->sweep > 0 && rt->program > 0);
  CHECK(r->last_loss != SIM_NEVER && r->last_loss <= r->installed);
  CHECK(r->last_loss >= r->at + r->detect + r->sweep + r->compute);
  (void)pkt_ps;
  CHECK_EQ(sim_flow(s, 0)->acked, 64 << 20);
  sim_del(st);
  sim_del(s);
}

static void test_periodic_sweep(void) {
  lost_trap(true, 250 * SIM_US);
  lost_trap(false, 250 * SIM_US);
  lost_trap(true, 75 * SIM_US); /* at 150 us, another phase */
  lost_trap(true, 0);
}

/* A change whose trap is lost is seen by the next sweep of any kind: a
 * trap of another change 50 us later starts one, which installs the
 * routes for both. The first is leaf 1's link to the spine of the flow's
 * path, the second leaf 0's, whose trap goes down to the SM's NIC
 * (leaf 1's would go up through the dead link and be lost). */
static void test_lost_trap_seen_by_another(void) {
  struct sim_cfg c;
  base(&c, true);
  c.ib.sm.sweep_interval = 1000 * SIM_US;
  uint16_t up = first_up(true);
  c.nfail = 2;
  c.fail[0] = (struct sim_failure){.kind = SIM_FAIL_LINK,
                                   .sw = 1,
                                   .port = up,
                                   .at = 100 * SIM_US,
                                   .trap_lost = true};
  /* leaf 0's link to the same spine: every path keeps the other spine */
  c.fail[1] = (struct sim_failure){
      .kind = SIM_FAIL_LINK, .sw = 0, .port = up, .at = 150 * SIM_US};
  struct sim *s = mk_flow(&c);
  if (!s)
    return;
  CHECK(sim_run(s, 100 * SIM_MS) == 1);
  uint32_t n;
  const struct sim_fail_result *r = sim_fail_results(s, &n);
  CHECK_EQ(n, 2);
  if (n == 2) {
    printf("ib: lost trap at 100 us seen by the trap of 150 us: both "
           "installed at %.3f us (recoveries %.3f and %.3f us)\n",
           (double)r[0].installed / 1e6,
           (double)(r[0].installed - r[0].at) / 1e6,
           (double)(r[1].installed - r[1].at) / 1e6);
    CHECK(r[0].noticed == SIM_NOTICED_TRAP && r[1].noticed == SIM_NOTICED_TRAP);
    CHECK_EQ(r[0].installed, r[1].installed);
    /* 150 + trap 10 + one hop (292 bytes and 1 us) - 100 */
    CHECK_EQ(r[0].detect, 60 * SIM_US + 1 * SIM_US + 23360);
    CHECK_EQ(r[1].detect, 10 * SIM_US + 1 * SIM_US + 23360);
    CHECK_EQ(r[0].installed - r[0].at,
             r[0].detect + r[0].sweep + r[0].compute + r[0].program);
    CHECK(r[0].installed < 1000 * SIM_US);
    CHECK(r[0].last_loss <= r[0].installed);
  }
  CHECK_EQ(sim_flow(s, 0)->acked, 64 << 20);
  sim_del(s);
}

/* A spine dies and a link flaps under a permutation: every flow finishes,
 * each change gets its own recovery. */
static void test_switch_and_flap(void) {
  for (int ib = 0; ib < 2; ib++) {
    struct sim_cfg c;
    base(&c, ib);
    c.tp.window = 256;
    c.wl.kind = SIM_WL_PERMUTATION;
    c.wl.bytes = 4 << 20;
    c.nfail = 2;
    c.fail[0] = (struct sim_failure){
        .kind = SIM_FAIL_SWITCH, .sw = 2, .at = 50 * SIM_US};
    c.fail[1] = (struct sim_failure){.kind = SIM_FAIL_LINK,
                                     .sw = 1,
                                     .port = 5,
                                     .at = 400 * SIM_US,
                                     .up_after = 100 * SIM_US};
    struct sim *s = mk(&c);
    if (!s)
      return;
    CHECK(sim_run(s, 200 * SIM_MS) == 1);
    uint32_t n;
    const struct sim_fail_result *r = sim_fail_results(s, &n);
    CHECK_EQ(n, 3);
    for (uint32_t i = 0; i < n; i++) {
      printf("%s %s %s at %.0f us: recovery %.3f us, %llu lost\n",
             ib ? "ib" : "roce",
             r[i].f->kind == SIM_FAIL_SWITCH ? "spine" : "link",
             r[i].up ? "up" : "down", (double)r[i].at / 1e6,
             (double)(r[i].installed - r[i].at) / 1e6,
             (unsigned long long)r[i].lost_pkts);
      CHECK(r[i].installed > r[i].at);
    }
    CHECK(r[0].lost_pkts > 0);
    CHECK_EQ(r[2].lost_pkts, 0); /* a link coming up loses nothing */
    for (uint32_t i = 0; i < sim_nflows(s); i++)
      CHECK_EQ(sim_flow(s, i)->acked, 4 << 20);
    sim_del(s);
  }
}

/* The simulator of c with host 0's link (its leaf's port 0) down from
 * 100 to 400 us. */
static struct sim *host_outage(struct sim_cfg *c) {
  c->nfail = 1;
  c->fail[0] = (struct sim_failure){.kind = SIM_FAIL_LINK,
                                    .sw = 0,
                                    .port = 0,
                                    .at = 100 * SIM_US,
                                    .up_after = 300 * SIM_US};
  return mk(c);
}

/* A host link goes down for 300 us in the middle of a flow into that
 * host (its leaf's port 0: host 0) and of one out of it, on both
 * fabrics and both host models: what was on the link and queued for it
 * is lost, the NIC sends nothing while its link is down, and both flows
 * deliver every byte after it comes back, no earlier than the outage
 * allows. */
static void test_host_link(void) {
  for (int ib = 0; ib < 2; ib++)
    for (int model = 0; model < 2; model++) {
      struct sim_cfg c;
      base(&c, ib);
      c.tp.model = model ? SIM_HOST_UROCE : SIM_HOST_SIMPLE;
      c.tp.window = 256;
      struct sim *s = host_outage(&c);
      if (!s)
        return;
      uint64_t bytes = 8 << 20;
      sim_add_flow(s, 4, 0, bytes, 0, SIM_OP_WRITE); /* into host 0 */
      sim_add_flow(s, 0, 5, bytes, 0, SIM_OP_WRITE); /* out of host 0 */
      CHECK(sim_run(s, 200 * SIM_MS) == 1);
      uint32_t n;
      const struct sim_fail_result *r = sim_fail_results(s, &n);
      CHECK_EQ(n, 2);
      double ideal = (double)bytes * 8 / 100e9 * 1e12; /* ps, at line rate */
      printf("%s, %s hosts: host link down 100-400 us: %llu lost; flows "
             "done at %.1f and %.1f us (line rate alone %.1f us)\n",
             ib ? "ib" : "roce", model ? "uroce" : "simple",
             n ? (unsigned long long)r[0].lost_pkts : 0,
             (double)sim_flow(s, 0)->finish / 1e6,
             (double)sim_flow(s, 1)->finish / 1e6, ideal / 1e6);
      CHECK(n == 2 && r[0].lost_pkts > 0 && r[1].lost_pkts == 0);
      for (uint32_t i = 0; i < 2; i++) {
        CHECK_EQ(sim_flow(s, i)->acked, bytes);
        CHECK((double)sim_flow(s, i)->finish > ideal + 300e6);
      }
      sim_del(s);
    }
}

/* The same outage under a k=4 fat-tree permutation with PFC: host 0's
 * NIC is paused by its leaf when the link goes down, and the XON that
 * would have resumed it is lost with the link; the pause must end with
 * the link (before, host 0's flow never finished). */
static void test_host_link_pfc(void) {
  for (int model = 0; model < 2; model++) {
    struct sim_cfg c;
    sim_cfg_default(&c);
    c.topo.kind = SIM_TOPO_FAT_TREE;
    c.topo.k = 4;
    c.sw.pfc = true;
    c.tp.model = model ? SIM_HOST_UROCE : SIM_HOST_SIMPLE;
    c.wl.kind = SIM_WL_PERMUTATION;
    c.wl.bytes = 4 << 20;
    struct sim *s = host_outage(&c);
    if (!s)
      return;
    CHECK(sim_run(s, 100 * SIM_MS) == 1);
    sim_time_t last = 0;
    for (uint32_t i = 0; i < sim_nflows(s); i++) {
      CHECK_EQ(sim_flow(s, i)->acked, 4 << 20);
      if (sim_flow(s, i)->finish > last)
        last = sim_flow(s, i)->finish;
    }
    printf("roce pfc, %s hosts: k=4 permutation, host link down 100-400 us: "
           "%llu lost, %llu pause frames, last flow done at %.1f us\n",
           model ? "uroce" : "simple",
           (unsigned long long)sim_stats(s)->drops_link_down,
           (unsigned long long)sim_stats(s)->pause_frames[0] +
               sim_stats(s)->pause_frames[1] + sim_stats(s)->pause_frames[2],
           (double)last / 1e6);
    CHECK(sim_stats(s)->pause_frames[0] + sim_stats(s)->pause_frames[1] > 0);
    sim_del(s);
  }
}

/* Host 0's link goes down at 100 us and never comes back, under a flow
 * into host 0, one out of it and two between other hosts, on both
 * fabrics, both host models, on one thread and two. Host 0's NIC sends
 * into its dead port, its peers into the routes toward it; no answer
 * comes back, so each of the two flows' requesters times out retry_cnt
 * + 1 times after its last progress (about 100 us: the ACK interval and
 * a path either side) and fails with "transport retry counter exceeded";
 * the other flows finish, and the run ends there, not at the limit. */
static void host_for_good(bool ib, bool uroce, uint8_t retry_cnt,
                          uint32_t threads) {
  struct sim_cfg c;
  base(&c, ib);
  c.tp.model = uroce ? SIM_HOST_UROCE : SIM_HOST_SIMPLE;
  c.tp.window = 256;
  c.tp.retry_cnt = retry_cnt;
  c.threads = threads;
  c.nfail = 1;
  c.fail[0] = (struct sim_failure){
      .kind = SIM_FAIL_LINK, .sw = 0, .port = 0, .at = 100 * SIM_US};
  struct sim *s = mk(&c);
  if (!s)
    return;
  uint64_t bytes = 8 << 20;
  sim_add_flow(s, 4, 0, bytes, 0, SIM_OP_WRITE); /* into host 0 */
  sim_add_flow(s, 0, 5, bytes, 0, SIM_OP_WRITE); /* out of host 0 */
  sim_add_flow(s, 1, 6, bytes, 0, SIM_OP_WRITE);
  sim_add_flow(s, 7, 2, bytes, 0, SIM_OP_READ * uroce); /* READ: uroce */
  CHECK(sim_run(s, 200 * SIM_MS) == 1);
  /* The engine's timeout is 4.096 us x 2^n, the first at or above. */
  double rto = uroce ? 4.096 * 64 : 200;
  double budget = (retry_cnt + 1) * rto, at[2];
  for (uint32_t i = 0; i < 2; i++) {
    const struct sim_flow *f = sim_flow(s, i);
    at[i] = (double)f->failed / 1e6;
    CHECK(f->failed != SIM_NEVER && f->finish == SIM_NEVER);
    CHECK_EQ(f->status, UROCE_WC_RETRY_EXC_ERR);
    CHECK(at[i] > 100 - 10 + budget && at[i] < 100 + 10 + budget);
    CHECK(f->acked < bytes);
  }
  for (uint32_t i = 2; i < 4; i++) {
    CHECK(sim_flow(s, i)->finish != SIM_NEVER);
    CHECK_EQ(sim_flow(s, i)->acked, bytes);
    CHECK(sim_flow(s, i)->failed == SIM_NEVER);
  }
  CHECK_EQ(sim_stats(s)->flows_failed, 2);
  CHECK_EQ(sim_stats(s)->flows_done, 2);
  /* The run ends with the last of them, failed or done. */
  sim_time_t end = 0;
  for (uint32_t i = 0; i < 4; i++) {
    const struct sim_flow *f = sim_flow(s, i);
    sim_time_t e = f->failed != SIM_NEVER ? f->failed : f->finish;
    end = e > end ? e : end;
  }
  CHECK(sim_now(s) >= end && sim_now(s) < end + 10 * SIM_US);
  printf("%s, %s hosts, retry_cnt %u, %u thread%s: host 0 cut off at 100 "
         "us: its flows failed at %.3f and %.3f us (100 + %u x %.3f = "
         "%.3f), the others done at %.1f and %.1f us; run ended at %.1f "
         "us\n",
         ib ? "ib" : "roce", uroce ? "uroce" : "simple", retry_cnt, threads,
         threads > 1 ? "s" : "", at[0], at[1], retry_cnt + 1, rto, 100 + budget,
         (double)sim_flow(s, 2)->finish / 1e6,
         (double)sim_flow(s, 3)->finish / 1e6, (double)sim_now(s) / 1e6);
  /* summary.json names them and says why. */
  char dir[] = "/tmp/uroce-sim-fail-XXXXXX", path[64];
  CHECK(mkdtemp(dir) != NULL);
  char err[256] = "";
  CHECK_EQ(sim_report_write(s, dir, true, err, sizeof err), 0);
  snprintf(path, sizeof path, "%s/summary.json", dir);
  FILE *fp = fopen(path, "r");
  char *buf = calloc(1, 1 << 20);
  if (fp && buf)
    CHECK(fread(buf, 1, (1 << 20) - 1, fp) > 0);
  if (fp)
    fclose(fp);
  CHECK(buf && strstr(buf, "\"failed\": 2"));
  CHECK(buf && strstr(buf, "\"failed_flows\": [\n    {\"id\": 0, \"src\": "
                           "4, \"dst\": 0"));
  CHECK(buf && strstr(buf, "\"status\": \"transport retry counter "
                           "exceeded\", \"status_code\": 12}"));
  struct sim_summary m;
  sim_summarize(s, &m);
  CHECK_EQ(m.failed, 2);
  CHECK(!strcmp(m.failed_what,
                "0 (4->0), 1 (0->5): transport retry counter exceeded"));
  /* flows.csv: each row's status, and the failed ones' time and
   * error; the CDF's title counts them. */
  snprintf(path, sizeof path, "%s/flows.csv", dir);
  fp = fopen(path, "r");
  char line[512];
  uint32_t row = 0;
  while (fp && fgets(line, sizeof line, fp)) {
    if (row == 0) {
      CHECK(strstr(line, ",slowdown,status,failed_us,error\n") != NULL);
    } else if (row <= 2) {
      char tail[128];
      snprintf(tail, sizeof tail,
               ",failed,%.3f,transport retry counter exceeded\n", at[row - 1]);
      CHECK(strstr(line, tail) != NULL);
    } else {
      CHECK(strstr(line, ",done,-1.000,\n") != NULL);
    }
    row++;
  }
  if (fp)
    fclose(fp);
  CHECK_EQ(row, 5);
  free(buf);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK_EQ(system(cmd), 0);
  sim_del(s);
}

static void test_host_link_for_good(void) {
  for (int ib = 0; ib < 2; ib++)
    for (int uroce = 0; uroce < 2; uroce++)
      host_for_good(ib, uroce, 6, 1);
  host_for_good(true, true, 2, 1); /* a smaller budget ends sooner */
  host_for_good(false, false, 2, 1);
  host_for_good(true, true, 6, 2); /* a partition each side */
  host_for_good(false, true, 6, 2);
}

/* The master SM runs on NIC 0. Its host link goes down for good at `down`
 * (100 us), and a leaf-0 up-link on flow 0's path (host 1 to host 5) at
 * 150 us: no trap reaches a master cut off, so nothing recovers the flow's
 * path until a standby SM on NIC 7 takes over. It polls every T = 100 us
 * from 0 with an SMInfo Get on the directed route NIC 7, leaf 1, spine 0,
 * leaf 0, NIC 0 (4 hops of 1 us + 23.36 ns); a poll unanswered at the next
 * tick counts, and at the third in a row it takes over:
 *
 *   takeover = t_u + polling_retries x T
 *
 * where t_u is the first poll whose answer had not crossed NIC 0's link
 * when it failed. Down at 100 us: the poll of 100 us reaches leaf 0 at
 * 103.070 us, after the link went, so t_u = 100 and the takeover is at
 * exactly 400 us (polls of 100, 200, 300 unanswered; the computed model
 * before took the first poll after the failure, 200, and the third poll,
 * 400, itself). Down at 130 us: the poll of 100 us was back at 109.187 us
 * (2 x 4.093 + 1 us of SMA), t_u = 200 and the takeover is at 500 us.
 * The standby's sweep installs routes around the dead link (recovery
 * exactly takeover - 150 + sweep + compute + program); the flow then
 * delivers every byte. Without a standby the routes never change and the
 * flow does not finish; if the master's link is back at 250 us, the poll
 * of 300 us is answered and there is no takeover, and the trap of its
 * coming back starts the master's own sweep. */
static void standby_case(uint32_t standby, sim_time_t down,
                         sim_time_t master_up) {
  struct sim_cfg c;
  base(&c, true);
  c.tp.retry_cnt = 3;
  c.ib.sm.standby_nic = standby;
  c.ib.sm.polling_timeout = 100 * SIM_US;
  c.ib.sm.polling_retries = 3;
  uint16_t up = leaf0_up(&c, 1, 5); /* flow 0's */
  c.nfail = 2;
  c.fail[0] =
      (struct sim_failure){.kind = SIM_FAIL_LINK,
                           .sw = 0,
                           .port = 0,
                           .at = down,
                           .up_after = master_up ? master_up - down : 0};
  c.fail[1] = (struct sim_failure){
      .kind = SIM_FAIL_LINK, .sw = 0, .port = up, .at = 150 * SIM_US};
  struct sim *s = mk(&c);
  if (!s)
    return;
  sim_add_flow(s, 1, 5, 64 << 20, 0, SIM_OP_WRITE);
  sim_run(s, 30 * SIM_MS);
  uint32_t n;
  const struct sim_fail_result *r = sim_fail_results(s, &n);
  struct sim_sm_info sm;
  CHECK_EQ(sim_sm_info(s, &sm), 0);
  const struct sim_flow *f = sim_flow(s, 0);
  CHECK_EQ(n, master_up ? 3 : 2);
  if (n < 2) {
    sim_del(s);
    return;
  }
  const struct sim_fail_result *e = &r[1];
  if (master_up) {
    printf("ib, master SM cut off 100-%.0f us, standby on NIC %u: no "
           "takeover (master NIC %u); the link down at 150 us installed at "
           "%.3f us (noticed by %s); flow done at %.1f us\n",
           (double)master_up / 1e6, standby, sm.master_nic,
           (double)e->installed / 1e6, sim_noticed_name(e->noticed),
           (double)f->finish / 1e6);
    CHECK_EQ(sm.takeovers, 0);
    CHECK_EQ(sm.master_nic, 0);
    /* the polls of 100 and 200 us were lost, that of 300 us answered */
    CHECK_EQ(sm.standby_polls_unanswered, 2);
    CHECK(sm.standby_polls > 3);
    CHECK(e->noticed == SIM_NOTICED_TRAP);
    CHECK_EQ(e->installed, r[2].installed);
    /* the trap of the master's link coming up: trap_us and one hop */
    CHECK_EQ(e->detect + r[1].at - master_up,
             c.recovery.trap + 1 * SIM_US + 23360);
    CHECK_EQ(e->installed - master_up,
             c.recovery.trap + 1 * SIM_US + 23360 + e->sweep + e->compute +
                 e->program);
    CHECK_EQ(f->acked, 64 << 20);
  } else if (standby == UINT32_MAX) {
    printf("ib, master SM cut off at 100 us, no standby: the link down at "
           "150 us is never routed around (%llu packets lost); flow %s\n",
           (unsigned long long)e->lost_pkts,
           f->failed != SIM_NEVER ? "failed" : "not done");
    CHECK_EQ(e->installed, 0);
    CHECK(e->noticed == SIM_NOTICED_NOT_YET);
    CHECK(f->finish == SIM_NEVER);
  } else {
    const sim_time_t T = c.ib.sm.polling_timeout;
    /* the poll of the tick before `down` is lost if its answer had not
     * crossed NIC 0's link (4 hops there, the SMA, 1 hop back) */
    const sim_time_t hop = 1 * SIM_US + 23360;
    sim_time_t tick = down / T * T;
    sim_time_t t_u = down < tick + 5 * hop + c.ib.sm.smp_proc ? tick : tick + T;
    sim_time_t takeover = t_u + c.ib.sm.polling_retries * T;
    printf("ib, master SM cut off at %.0f us, standby on NIC %u took over "
           "at %.3f us (closed form %.3f; %llu polls, %llu unanswered; master "
           "NIC now %u); the link down at 150 us installed at %.3f us "
           "(detect %.3f, sweep %.3f, compute %.3f, program %.3f); %llu "
           "packets lost; flow done at %.1f us\n",
           (double)down / 1e6, standby, (double)sm.took_over / 1e6,
           (double)takeover / 1e6, (unsigned long long)sm.standby_polls,
           (unsigned long long)sm.standby_polls_unanswered, sm.master_nic,
           (double)e->installed / 1e6, (double)e->detect / 1e6,
           (double)e->sweep / 1e6, (double)e->compute / 1e6,
           (double)e->program / 1e6, (unsigned long long)e->lost_pkts,
           (double)f->finish / 1e6);
    CHECK_EQ(sm.takeovers, 1);
    CHECK_EQ(sm.took_over, takeover);
    CHECK_EQ(takeover, down == 100 * SIM_US ? 400 * SIM_US : 500 * SIM_US);
    /* polls from 0 to the last before the takeover; the standby is NIC 0
     * then, cut off, and polls nothing */
    CHECK_EQ(sm.standby_polls, takeover / T);
    CHECK_EQ(sm.standby_polls_unanswered, c.ib.sm.polling_retries);
    CHECK(sim_stats(s)->vl15_lost >= c.ib.sm.polling_retries);
    CHECK_EQ(sm.master_nic, standby);
    CHECK(e->noticed == SIM_NOTICED_STANDBY && r[0].noticed == e->noticed);
    CHECK_EQ(e->detect, takeover - e->at);
    CHECK_EQ(e->installed - takeover, e->sweep + e->compute + e->program);
    CHECK(e->sweep > 0 && e->program > 0);
    CHECK(e->last_loss != SIM_NEVER && e->last_loss <= e->installed);
    CHECK_EQ(f->acked, 64 << 20);
  }
  sim_del(s);
}

static void test_standby_sm(void) {
  standby_case(7, 100 * SIM_US, 0);
  standby_case(7, 130 * SIM_US, 0);
  standby_case(UINT32_MAX, 100 * SIM_US, 0);
  standby_case(7, 100 * SIM_US, 250 * SIM_US);
  /* The standby's route to a live master breaks (leaf 1's link to spine
   * 0 at 100 us): its polls of 100, 200 and 300 us are lost; at 400 us it
   * goes discovering, as OpenSM's does, finds the master through spine 1
   * and polls it there: no takeover. */
  struct sim_cfg c;
  base(&c, true);
  c.ib.sm.standby_nic = 7;
  c.ib.sm.polling_timeout = 100 * SIM_US;
  c.ib.sm.polling_retries = 3;
  c.nfail = 1;
  c.fail[0] = (struct sim_failure){
      .kind = SIM_FAIL_LINK, .sw = 1, .port = 4, .at = 100 * SIM_US};
  struct sim *s = mk(&c);
  if (s) {
    sim_add_flow(s, 1, 5, 16 << 20, 0, SIM_OP_WRITE); /* 1.4 ms */
    sim_run(s, 30 * SIM_MS);
    struct sim_sm_info sm;
    CHECK_EQ(sim_sm_info(s, &sm), 0);
    printf("ib, standby's route to the master broken at 100 us: %llu polls, "
           "%llu unanswered, %u takeovers\n",
           (unsigned long long)sm.standby_polls,
           (unsigned long long)sm.standby_polls_unanswered, sm.takeovers);
    CHECK_EQ(sm.takeovers, 0);
    CHECK_EQ(sm.master_nic, 0);
    CHECK_EQ(sm.standby_polls_unanswered, 3);
    CHECK(sm.standby_polls > 4);
    sim_del(s);
  }
  /* A standby that is not a NIC of the fabric, or NIC 0 (the master's),
   * is refused. */
  for (uint32_t nic = 0; nic <= 8; nic += 8) {
    base(&c, true);
    c.ib.sm.standby_nic = nic;
    char err[256] = "";
    s = sim_new(&c, err, sizeof err);
    CHECK(s == NULL && strstr(err, "standby_nic"));
    sim_del(s);
  }
}

/* A sweep stopped because the master's link went down (leaf 0's up-link
 * at 100 us, its trap's sweep from 111 us; NIC 0's link down for good at
 * 120 us, during discovery, no standby): the change is not seen, and its
 * result says so (no detection, noticed by none), not that the stopped
 * sweep's trap saw it. */
static void test_sweep_stopped(void) {
  struct sim_cfg c;
  base(&c, true);
  c.tp.retry_cnt = 2;
  c.nfail = 2;
  c.fail[0] = (struct sim_failure){.kind = SIM_FAIL_LINK,
                                   .sw = 0,
                                   .port = first_up(true),
                                   .at = 100 * SIM_US};
  c.fail[1] = (struct sim_failure){
      .kind = SIM_FAIL_LINK, .sw = 0, .port = 0, .at = 120 * SIM_US};
  struct sim *s = mk(&c);
  if (!s)
    return;
  sim_add_flow(s, 1, 5, 16 << 20, 0, SIM_OP_WRITE); /* 1.4 ms */
  sim_run(s, 30 * SIM_MS);
  uint32_t n;
  const struct sim_fail_result *r = sim_fail_results(s, &n);
  struct sim_sm_info sm;
  CHECK_EQ(sim_sm_info(s, &sm), 0);
  CHECK_EQ(n, 2);
  if (n == 2) {
    printf("ib, sweep stopped by the master's link at 120 us: the change "
           "of 100 us noticed by %s, detect %.3f us, installed %.3f us; %u "
           "sweeps done\n",
           sim_noticed_name(r[0].noticed), (double)r[0].detect / 1e6,
           (double)r[0].installed / 1e6, sm.sweeps);
    CHECK(r[0].noticed == SIM_NOTICED_NOT_YET);
    CHECK_EQ(r[0].detect, 0);
    CHECK_EQ(r[0].installed, 0);
    CHECK_EQ(sm.sweeps, 0);
  }
  sim_del(s);
}

/* Failures that make no sense are refused with the reason. */
/* One sweep after leaf 0's up-link on host 0's path fails at 100 us,
 * max_wire_smps w; idle: no traffic until 5 ms; loaded: every host sends
 * to the host across (every link busy both ways). */
static struct sim *sm_sweep_run(unsigned w, bool loaded,
                                struct sim_sm_info *in) {
  struct sim_cfg c;
  base(&c, true);
  c.ib.sm.max_wire_smps = w;
  c.nfail = 1;
  c.fail[0] = (struct sim_failure){
      .kind = SIM_FAIL_LINK, .sw = 0, .port = first_up(true), .at = 100 * SIM_US};
  struct sim *s = mk(&c);
  if (!s)
    return 0;
  for (uint32_t h = 0; h < 8; h++)
    sim_add_flow(s, h, (h + 4) % 8, loaded ? 16 << 20 : 4096,
                 loaded ? 0 : 5 * SIM_MS, SIM_OP_WRITE);
  sim_run(s, 2 * SIM_MS);
  CHECK_EQ(sim_sm_info(s, in), 0);
  CHECK_EQ(in->sweeps, 1);
  return s;
}

/* The sweep as packets against the closed form of its SMPs (the sum of
 * round trips on an idle fabric and SMA processing, over max_wire_smps):
 * with one SMP outstanding the idle fabric gives it exactly (1 ps of
 * rounding per SMP); with 4 the dependencies of discovery (a node's SMPs
 * wait for its NodeInfo, its neighbours for its PortInfo) and the last
 * round add at most the depth of the fabric in round trips. Under load
 * each SMP round may wait for one data packet on the wire per hop: at
 * most (SMPs / w + 1) x 2 x 4 hops x 330 ns more than idle. VL15 takes no
 * credit, so nothing is dropped and nothing times out. */
static void test_sm_packets(void) {
  const double pkt = 4124 * 8 / 100e9 * 1e12; /* a 4 KiB IB data packet */
  struct sim_sm_info id1, id4, ld4;
  struct sim *a = sm_sweep_run(1, false, &id1);
  struct sim *b = sm_sweep_run(4, false, &id4);
  struct sim *l = sm_sweep_run(4, true, &ld4);
  if (!a || !b || !l)
    goto out;
  printf("ib sweep as packets, idle, 1 outstanding: discovery %.3f us "
         "(closed form %.3f, %llu SMPs), programming %.3f us (%.3f, %llu)\n",
         (double)id1.last_discover / 1e6, (double)id1.closed_discover / 1e6,
         (unsigned long long)id1.last_discover_smps,
         (double)id1.last_program / 1e6, (double)id1.closed_program / 1e6,
         (unsigned long long)id1.last_program_smps);
  printf("ib sweep as packets, idle, 4 outstanding: discovery %.3f us "
         "(closed form %.3f), programming %.3f us (%.3f)\n",
         (double)id4.last_discover / 1e6, (double)id4.closed_discover / 1e6,
         (double)id4.last_program / 1e6, (double)id4.closed_program / 1e6);
  printf("ib sweep as packets, loaded, 4 outstanding: discovery %.3f us, "
         "programming %.3f us; VL15 %llu packets, %llu bytes, %llu dropped, "
         "%llu timeouts\n",
         (double)ld4.last_discover / 1e6, (double)ld4.last_program / 1e6,
         (unsigned long long)sim_stats(l)->vl15_pkts,
         (unsigned long long)sim_stats(l)->vl15_bytes,
         (unsigned long long)sim_stats(l)->vl15_drops,
         (unsigned long long)ld4.smp_timeouts);
  CHECK(id1.last_discover_smps > 0 && id1.last_program_smps > 0);
  CHECK(llabs((long long)(id1.last_discover - id1.closed_discover)) <=
        (long long)id1.last_discover_smps);
  CHECK(llabs((long long)(id1.last_program - id1.closed_program)) <=
        (long long)id1.last_program_smps);
  /* 4 outstanding: at least the closed form, within the depth of the
   * fabric (4 hops) in round trips of an SMP */
  sim_time_t rtt = 2 * 4 * (1 * SIM_US + 23360) + 1 * SIM_US;
  CHECK(id4.last_discover + id4.last_discover_smps >= id4.closed_discover);
  CHECK(id4.last_discover <= id4.closed_discover + 5 * rtt);
  CHECK(id4.last_program <= id4.closed_program + rtt);
  double bd = (double)(ld4.last_discover_smps / 4 + 1) * 2 * 4 * pkt;
  double bp = (double)(ld4.last_program_smps / 4 + 1) * 2 * 4 * pkt;
  CHECK(ld4.last_discover >= id4.last_discover);
  CHECK((double)ld4.last_discover <= (double)id4.last_discover + bd);
  CHECK((double)ld4.last_program <= (double)id4.last_program + bp);
  CHECK_EQ(sim_stats(l)->vl15_drops, 0);
  CHECK_EQ(ld4.smp_timeouts, 0);
  CHECK(sim_stats(l)->vl15_pkts > 0);
out:
  if (a)
    sim_del(a);
  if (b)
    sim_del(b);
  if (l)
    sim_del(l);
}

static void test_bad(void) {
  struct sim_cfg c;
  char err[256];
  static const struct sim_failure bad[] = {
      /* a host link, for good, with unlimited retries and no time limit */
      {.kind = SIM_FAIL_LINK, .sw = 0, .port = 0},
      {.kind = SIM_FAIL_SWITCH, .sw = 0},          /* a leaf */
      {.kind = SIM_FAIL_LINK, .sw = 9, .port = 0}, /* no such switch */
  };
  static const char *const why[] = {"retry_cnt 7 retries for ever", "leaf",
                                    "switch 9"};
  for (int i = 0; i < 3; i++) {
    base(&c, false);
    c.tp.retry_cnt = 7;
    c.nfail = 1;
    c.fail[0] = bad[i];
    err[0] = 0;
    struct sim *s = sim_new(&c, err, sizeof err);
    CHECK(s == NULL && strstr(err, why[i]));
    sim_del(s);
  }
}

int main(void) {
  T_RUN(test_link_down);
  T_RUN(test_periodic_sweep);
  T_RUN(test_lost_trap_seen_by_another);
  T_RUN(test_switch_and_flap);
  T_RUN(test_host_link);
  T_RUN(test_host_link_pfc);
  T_RUN(test_host_link_for_good);
  T_RUN(test_standby_sm);
  T_RUN(test_sm_packets);
  T_RUN(test_sweep_stopped);
  T_RUN(test_bad);
  return T_DONE();
}
