/* uroce plan: BOM arithmetic against closed forms, totals as sums of the
 * BOM, framing against the simulator's, balls-in-bins against exact small
 * cases, spec errors that name their key, and the analytical model against
 * the packet-level simulator on the small shipped example. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/plan.h"
#include "sim/sim.h"
#include "t.h"

static char src_dir[256];
static void find_src_dir(void) {
  snprintf(src_dir, sizeof src_dir, "%s", __FILE__);
  char *p = strstr(src_dir, "/tests/unit/");
  if (p)
    *p = 0;
  else
    snprintf(src_dir, sizeof src_dir, ".");
}

static char cat_path[64];

/* A catalogue with switches of every radix the tests use. */
static void write_catalogue(void) {
  snprintf(cat_path, sizeof cat_path, "/tmp/uroce-test-plan-%d.yaml",
           (int)getpid());
  FILE *f = fopen(cat_path, "w");
  fprintf(f, "parts:\n");
  const char *fam[] = {"infiniband", "ethernet"};
  for (int i = 0; i < 2; i++) {
    fprintf(f,
            "  - {name: nic-%s, kind: nic, family: %s, speed_gbps: 400, "
            "price_usd: 1000, power_w: 20, source: test}\n",
            fam[i], fam[i]);
    fprintf(f,
            "  - {name: dac-%s, kind: dac, family: %s, speed_gbps: 400, "
            "reach_m: 3, price_usd: 100, source: test}\n",
            fam[i], fam[i]);
    fprintf(f,
            "  - {name: aoc-%s, kind: aoc, family: %s, speed_gbps: 400, "
            "reach_m: 30, price_usd: 700, power_w: 15, source: test}\n",
            fam[i], fam[i]);
    fprintf(f,
            "  - {name: sr-%s, kind: transceiver, family: %s, speed_gbps: "
            "400, reach_m: 5000, price_usd: 500, power_w: 8, source: "
            "test}\n",
            fam[i], fam[i]);
    static const int radix[] = {4, 8, 12, 16, 32, 64};
    for (int r = 0; r < 6; r++)
      fprintf(f,
              "  - {name: sw%d-%s, kind: switch, family: %s, speed_gbps: 400, "
              "radix: %d, price_usd: %d, power_w: %d, source: test}\n",
              radix[r], fam[i], fam[i], radix[r], 300 * radix[r],
              10 * radix[r]);
  }
  fprintf(f, "  - {name: fibre, kind: fibre, price_usd: 2, source: test}\n");
  fclose(f);
}

static int spec(struct plan_spec *sp, const char *body, char *err,
                size_t errlen) {
  char text[4096];
  snprintf(text, sizeof text,
           "%s\nworkload: {allreduce_bytes: 1GiB, compute_ms: 100}\n"
           "catalogue: [%s]\n",
           body, cat_path);
  return plan_spec_parse(text, strlen(text), "t.yaml", "", sp, err, errlen);
}

/* The first option of a one-option spec. */
static int one(struct plan_spec *sp, struct plan_option *o, uint32_t gpus,
               uint32_t per_server, uint32_t radix, uint32_t tiers,
               double oversub, bool rail) {
  char body[1024], err[512];
  snprintf(body, sizeof body,
           "gpus: %u\ngpus_per_server: %u\nfabrics: [roce]\n"
           "switch_radices: [%u]\n"
           "topologies: [{tiers: %u, oversubscription: %g, rail: %s}]\n",
           gpus, per_server, radix, tiers, oversub, rail ? "true" : "false");
  if (spec(sp, body, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return -1;
  }
  if (plan_enumerate(sp, o, 1, err, sizeof err) != 1) {
    fprintf(stderr, "%s\n", err);
    return -1;
  }
  return 0;
}

static struct plan_spec sp;
static struct plan_option opt[64];

static void test_fat_tree_closed_form(void) {
  static const uint32_t ks[] = {4, 8, 16, 32, 64};
  for (int i = 0; i < 5; i++) {
    uint32_t k = ks[i];
    CHECK(one(&sp, &opt[0], k * k * k / 4, 1, k, 3, 1, false) == 0);
    struct plan_option *o = &opt[0];
    CHECK(o->feasible);
    CHECK_EQ(o->nics, k * k * k / 4);
    CHECK_EQ(o->sw[1], k * k / 2);
    CHECK_EQ(o->sw[2], k * k / 2);
    CHECK_EQ(o->sw[3], k * k / 4);
    CHECK_EQ(o->sw[1] + o->sw[2] + o->sw[3], 5 * k * k / 4);
    /* A complete k-ary fat-tree uses every switch port. */
    CHECK_EQ(o->ports_used - o->links[0] + o->links[0], o->ports_total);
    CHECK_EQ(o->links[1], k * k * k / 4);
    CHECK_EQ(o->links[2], k * k * k / 4);
  }
  /* One more host than k^3/4 does not fit a k-ary fat-tree. */
  CHECK(one(&sp, &opt[0], 8 * 8 * 8 / 4 + 1, 1, 8, 3, 1, false) == 0);
  CHECK(!opt[0].feasible);
}

static void test_leaf_spine_closed_form(void) {
  static const struct {
    uint32_t n;
    double r;
  } c[] = {{16, 1}, {64, 1}, {64, 3}, {12, 2}, {32, 3}, {8, 1}};
  for (int i = 0; i < 6; i++) {
    uint32_t n = c[i].n;
    double r = c[i].r;
    uint32_t hosts = (uint32_t)(n * n * r / (r + 1));
    CHECK(one(&sp, &opt[0], hosts, 1, n, 2, r, false) == 0);
    struct plan_option *o = &opt[0];
    CHECK(o->feasible);
    CHECK_EQ(o->sw[1], n); /* n leaves */
    CHECK_EQ(o->down, (uint32_t)(n * r / (r + 1)));
    CHECK(fabs(o->oversub - r) < 1e-9);
    CHECK_EQ(o->links[1], n * o->up);
    CHECK_EQ((uint64_t)o->sw[2] * n, (uint64_t)n * o->up); /* full spines */
    if (r == 1)
      CHECK_EQ(hosts, n * n / 2);
    /* One more host needs a third tier. */
    CHECK(one(&sp, &opt[0], hosts + 1, 1, n, 2, r, false) == 0);
    CHECK(!opt[0].feasible);
    CHECK(strstr(opt[0].why, "3 tiers") != NULL);
  }
}

static void test_rail_layout(void) {
  /* 64 servers of 8 GPUs, 1:1 -> 8 rails; 32-port leaves, 16 down. */
  CHECK(one(&sp, &opt[0], 512, 8, 32, 2, 1, true) == 0);
  struct plan_option *o = &opt[0];
  CHECK(o->feasible);
  CHECK_EQ(o->nics_per_server, 8);
  CHECK_EQ(o->leaves_per_group, 4);
  CHECK_EQ(o->sw[1], 32);
  for (uint32_t s = 0; s < o->servers; s++)
    for (uint32_t i = 0; i < o->nics_per_server; i++) {
      uint32_t l = plan_leaf_of(o, s, i);
      CHECK_EQ(l / o->leaves_per_group, i); /* NIC i on leaf group i */
      CHECK_EQ(l % o->leaves_per_group, s / o->down);
    }
  /* Without rails a server's NICs share leaves. */
  CHECK(one(&sp, &opt[0], 512, 8, 32, 2, 1, false) == 0);
  CHECK_EQ(plan_leaf_of(&opt[0], 5, 0), plan_leaf_of(&opt[0], 5, 7));
}

static void test_totals_are_sums(void) {
  char err[512];
  CHECK(spec(&sp,
             "gpus: 256\ngpus_per_server: 8\nnic_gpu_ratios: [\"1:1\", "
             "\"1:4\"]\nfabrics: [infiniband, roce]\nswitch_radices: [16, "
             "32]\ntopologies: [{tiers: 2}, {tiers: 2, rail: true}, {tiers: "
             "3, oversubscription: 3}]\n",
             err, sizeof err) == 0);
  int n = plan_enumerate(&sp, opt, 64, err, sizeof err);
  CHECK_EQ(n, 24);
  for (int i = 0; i < n; i++) {
    struct plan_option *o = &opt[i];
    if (!o->feasible)
      continue;
    double cost = 0, power = 0, lines = 0, nics = 0, sw = 0, cables = 0;
    for (uint32_t j = 0; j < o->nitems; j++) {
      const struct plan_bom_item *it = &o->item[j];
      CHECK(fabs(it->cost - it->qty * it->part->price_usd) < 1e-6);
      cost += it->cost;
      power += it->power;
      if (it->line == PLAN_BOM_NIC)
        nics += it->qty;
      if (it->line >= PLAN_BOM_SW1 && it->line <= PLAN_BOM_SW3)
        sw += it->qty;
      if (it->line == PLAN_BOM_CABLE)
        cables += it->qty;
      if (it->line == PLAN_BOM_OPTIC)
        cables += it->qty / 2; /* two ends per link */
    }
    for (int l = 0; l < PLAN_BOM_NLINES; l++)
      lines += o->line_cost[l];
    CHECK(fabs(cost - o->capex) < 1e-6 * o->capex);
    CHECK(fabs(lines - o->capex) < 1e-6 * o->capex);
    CHECK(fabs(power - o->power_w) < 1e-6 * o->power_w);
    CHECK_EQ((uint32_t)nics, o->nics);
    CHECK_EQ((uint32_t)sw, o->sw[1] + o->sw[2] + o->sw[3]);
    CHECK_EQ((uint32_t)cables, o->links[0] + o->links[1] + o->links[2]);
    CHECK(o->ports_used <= o->ports_total + o->links[0]);
  }
}

static void test_framing(void) {
  uint32_t wire;
  double e = plan_wire_efficiency(PLAN_ROCE, 4096, &wire);
  struct sim_cfg c;
  sim_cfg_default(&c);
  /* The model's RoCEv2 framing is the simulator's, byte for byte. */
  CHECK_EQ(wire, sim_data_wire_bytes(&c, 4096, false));
  CHECK(fabs(e - 4096.0 / 4178) < 1e-12);
  /* InfiniBand: delimiters 2, LRH 8, BTH 12, ICRC 4, VCRC 2; the
   * simulator's IB framing, byte for byte. */
  CHECK(plan_wire_efficiency(PLAN_IB, 4096, &wire) > e);
  CHECK_EQ(wire, 4096 + 28);
  c.fabric = SIM_FABRIC_IB;
  CHECK_EQ(wire, sim_data_wire_bytes(&c, 4096, false));
  sim_cfg_free(&c);
}

static void test_balls_in_bins(void) {
  uint32_t b[2], u[2];
  b[0] = 1, u[0] = 8;
  CHECK(fabs(plan_expected_max_load(b, u, 1) - 1) < 1e-9);
  b[0] = 5, u[0] = 1;
  CHECK(fabs(plan_expected_max_load(b, u, 1) - 5) < 1e-9);
  b[0] = 2, u[0] = 8; /* collide with probability 1/8 */
  CHECK(fabs(plan_expected_max_load(b, u, 1) - 1.125) < 1e-9);
  b[0] = 3, u[0] = 2; /* 2 w.p. 6/8, 3 w.p. 2/8 */
  CHECK(fabs(plan_expected_max_load(b, u, 1) - 2.25) < 1e-9);
  b[0] = b[1] = 2, u[0] = u[1] = 8; /* two groups: 1 + 1 - (7/8)^2 */
  CHECK(fabs(plan_expected_max_load(b, u, 2) - (2 - 49.0 / 64)) < 1e-9);
  /* The large-group approximation stays between the mean and all. */
  b[0] = 4096, u[0] = 1024;
  double e = plan_expected_max_load(b, u, 1);
  CHECK(e > 4 && e < 20);
}

/* Each bad spec's message names the key that is wrong. */
static void test_errors(void) {
  static const struct {
    const char *body, *want;
  } c[] = {
      {"gpus: 0\n", "gpus"},
      {"gpus_per_server: 8\n", "gpus: missing"},
      {"gpus: 64\ngpus_per_server: 8\nnic_gpu_ratios: [\"1:3\"]\n",
       "nic_gpu_ratios"},
      {"gpus: 60\ngpus_per_server: 8\n", "gpus_per_server"},
      {"gpus: 64\ngpus_per_server: 0\n", "gpus_per_server"},
      {"gpus: 64\nfabrics: [myrinet]\n", "fabrics"},
      {"gpus: 64\ngpus: 64\n", "gpus: duplicate"},
      {"gpus: 64\nswitch_radix: [64]\n", "switch_radix: unknown key"},
      {"gpus: 64\ntopologies: [{tiers: 4}]\n", "tiers"},
      {"gpus: 64\nnic_gpu_ratios: [\"one\"]\n", "nic_gpu_ratios"},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    char err[512] = "";
    int rc = spec(&sp, c[i].body, err, sizeof err);
    CHECK(rc == -1);
    CHECK(strstr(err, c[i].want) != NULL);
    CHECK(strncmp(err, "t.yaml:", 7) == 0); /* file:line */
    if (rc != -1 || !strstr(err, c[i].want))
      fprintf(stderr, "  case %zu: %s\n", i, err);
  }
  /* Parts missing from the catalogue name the spec key that asked. */
  static const struct {
    const char *body, *want;
  } m[] = {
      {"gpus: 64\nnic_speeds_gbps: [800]\n", "t.yaml:2: nic_speeds_gbps"},
      {"gpus: 64\nswitch_radices: [48]\n", "t.yaml:2: switch_radices"},
  };
  for (size_t i = 0; i < 2; i++) {
    char err[512] = "";
    CHECK(spec(&sp, m[i].body, err, sizeof err) == 0);
    CHECK(plan_enumerate(&sp, opt, 64, err, sizeof err) == -1);
    CHECK(strstr(err, m[i].want) != NULL);
    if (!strstr(err, m[i].want))
      fprintf(stderr, "  missing part %zu: %s\n", i, err);
  }
  /* A part without a source is refused: every figure says where it is
   * from. */
  struct plan_catalogue cat = {0};
  char err[512] = "";
  const char *y = "parts:\n  - {name: x, kind: nic, family: ethernet, "
                  "speed_gbps: 400, price_usd: 1}\n";
  CHECK(plan_catalogue_parse(y, strlen(y), "c.yaml", &cat, err, sizeof err) ==
        -1);
  CHECK(strstr(err, "c.yaml:2: source") != NULL);
  /* A later catalogue overrides an entry by name. */
  y = "parts:\n  - {name: x, kind: nic, family: ethernet, speed_gbps: 400, "
      "price_usd: 1, source: a}\n  - {name: x, kind: nic, family: ethernet, "
      "speed_gbps: 400, price_usd: 2, source: b}\n";
  CHECK(plan_catalogue_parse(y, strlen(y), "c.yaml", &cat, err, sizeof err) ==
        0);
  CHECK_EQ(cat.n, 1);
  CHECK(cat.part[0].price_usd == 2);
}

/* A 64-GPU RoCEv2 leaf-spine spec with the given workload mapping. */
static int spec_wl(struct plan_spec *s, const char *workload, char *err,
                   size_t errlen) {
  char text[2048];
  snprintf(text, sizeof text,
           "gpus: 64\nfabrics: [roce]\nswitch_radices: [16]\n"
           "workload: {%s, compute_ms: 100}\ncatalogue: [%s]\n",
           workload, cat_path);
  return plan_spec_parse(text, strlen(text), "t.yaml", "", s, err, errlen);
}

static char trace_path[64];

static void write_trace(const char *text) {
  FILE *f = fopen(trace_path, "w");
  fputs(text, f);
  fclose(f);
}

/* The step time of the one option of workload w, analytically. */
static struct plan_perf perf_of(const char *w) {
  struct plan_perf p = {0};
  char err[512] = "";
  int rc = spec_wl(&sp, w, err, sizeof err);
  CHECK(rc == 0);
  if (rc) {
    fprintf(stderr, "  %s: %s\n", w, err);
    return p;
  }
  CHECK(plan_enumerate(&sp, opt, 64, err, sizeof err) >= 1);
  struct plan_phase_times ph;
  plan_model_phases(&sp, &opt[0], &ph);
  plan_perf_from(&sp, &opt[0], &ph, &p);
  return p;
}

static bool near(double a, double b) {
  return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* A collective trace: the same step as the keys it can replace;
 * reduce-scatter plus all-gather is an allreduce, to the nanosecond;
 * counts multiply; bad lines name the file, the line and the column. */
static void test_trace(void) {
  snprintf(trace_path, sizeof trace_path, "/tmp/uroce-test-trace-%d.csv",
           (int)getpid());
  char w[256];
  snprintf(w, sizeof w, "trace: %s", trace_path);
  struct plan_perf keys =
      perf_of("allreduce_bytes: 1GiB, alltoall_bytes: 256MiB");
  write_trace("# a comment\n\nallreduce,1GiB\n  alltoall , 256MiB , 1\n");
  struct plan_perf tr = perf_of(w);
  CHECK(keys.t_step_s > 0.1);
  CHECK(near(tr.t_step_s, keys.t_step_s));
  CHECK(near(tr.busbw_ar_gbps, keys.busbw_ar_gbps));
  CHECK(near(tr.busbw_a2a_gbps, keys.busbw_a2a_gbps));
  CHECK_EQ(sp.nops, 2);
  write_trace("reduce_scatter,1GiB\nallgather,1GiB\n");
  struct plan_perf rsag = perf_of(w);
  CHECK_EQ(plan_headline_coll(&sp), PLAN_C_REDUCE_SCATTER);
  struct plan_perf ar = perf_of("allreduce_bytes: 1GiB");
  CHECK_EQ(plan_headline_coll(&sp), PLAN_C_ALLREDUCE);
  CHECK(rsag.t_rs_ag_s > 0);
  CHECK(near(rsag.t_rs_ag_s, ar.t_allreduce_s));
  CHECK(near(rsag.t_comm_s, ar.t_comm_s));
  CHECK(near(rsag.busbw_gbps, rsag.busbw_rs_ag_gbps));
  write_trace("allgather,64MiB,3\r\n");
  struct plan_perf three = perf_of(w);
  write_trace("allgather,64MiB\n");
  struct plan_perf one = perf_of(w);
  CHECK(near(three.t_comm_s, 3 * one.t_comm_s));
  CHECK(near(three.busbw_gbps, one.busbw_gbps));
#define BAD(t, w)                                                              \
  { t, sizeof(t) - 1, w }
  static const struct {
    const char *text;
    size_t len;
    const char *want;
  } bad[] = {
      BAD("allreduce,1GiB\nbroadcast,1MiB\n", ":2: collective: 'broadcast'"),
      BAD("allreduce,lots\n", ":1: bytes: expected a size"),
      BAD("allreduce,0\n", ":1: bytes:"),
      BAD("allreduce,1MiB,0\n", ":1: count:"),
      BAD("allreduce,1MiB,2x\n", ":1: count:"),
      BAD("allreduce,1MiB,-1\n", ":1: count:"),
      BAD("allreduce,1MiB,1,9\n", ":1: line: more than 3 fields"),
      BAD("allreduce\n", ":1: line: expected collective,bytes"),
      BAD("# nothing\n", ":1: trace: no collective"),
      BAD("allreduce,1MiB\nall\0reduce,1MiB\n", ":2: line: a NUL byte"),
  };
#undef BAD
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    FILE *f = fopen(trace_path, "w");
    fwrite(bad[i].text, 1, bad[i].len, f);
    fclose(f);
    char err[512] = "";
    CHECK(spec_wl(&sp, w, err, sizeof err) == -1);
    CHECK(strncmp(err, trace_path, strlen(trace_path)) == 0);
    CHECK(strstr(err, bad[i].want) != NULL);
    if (!strstr(err, bad[i].want))
      fprintf(stderr, "  bad trace %zu: %s\n", i, err);
  }
  /* A file that is not there, and one that never ends, name the key. */
  char err[512] = "";
  unlink(trace_path);
  CHECK(spec_wl(&sp, w, err, sizeof err) == -1);
  CHECK(strstr(err, "t.yaml:4: trace:") && strstr(err, "No such file"));
  CHECK(spec_wl(&sp, "trace: /dev/zero", err, sizeof err) == -1);
  CHECK(strstr(err, "t.yaml:4: trace:") && strstr(err, "larger than"));
  CHECK(spec_wl(&sp, "compute_ms_typo: 1", err, sizeof err) == -1);
  CHECK(spec_wl(&sp, "overlap: 0", err, sizeof err) == -1);
  CHECK(strstr(err, "needs allreduce_bytes, alltoall_bytes or trace"));
}

/* Shipped examples load; the ones small enough for CI are simulated and
 * the model must agree with the simulator within 10% on every probe,
 * those whose phases overload a link included; on InfiniBand there the
 * model leaves out head-of-line blocking, so its time must also be a
 * bound the simulator never beats. */
static void check_calibration(const char *name, uint32_t max_nics) {
  char path[512], err[1024];
  snprintf(path, sizeof path, "%s/examples/plan/%s.yaml", src_dir, name);
  CHECK(plan_spec_load(path, &sp, err, sizeof err) == 0);
  int n = plan_enumerate(&sp, opt, 64, err, sizeof err);
  CHECK(n > 0);
  int simulated = 0, outside = 0;
  for (int i = 0; i < n; i++) {
    struct plan_option *o = &opt[i];
    char why[200];
    if (!plan_probe_possible(&sp, o, why, sizeof why) || o->nics > max_nics)
      continue;
    struct plan_phase_times m, s;
    struct plan_probe_stats st;
    plan_model_phases(&sp, o, &m);
    CHECK(plan_probe(&sp, o, &s, &st, NULL, NULL, err, sizeof err) == 0);
    double ideal =
        sp.probe_bytes * 8 /
        (o->speed_gbps * plan_wire_efficiency(o->fabric, 4096, NULL) * 1e3);
    double lat = plan_probe_latency_us(o);
    double mr = (s.ring_hashed > 0 ? s.ring_hashed : m.ring_factor) * ideal;
    double ma = (s.a2a_hashed > 0 ? s.a2a_hashed : m.a2a_factor) * ideal;
    double ring = (mr + lat) / (s.ring_factor * ideal + lat);
    double a2a = (ma + lat) / (s.a2a_factor * ideal + lat);
    bool out = m.lossy_saturated || m.credit_saturated;
    printf("%s %-24s ring %.3f a2a %.3f%s\n", name, o->name, ring, a2a,
           out ? " (a phase past a link's rate)" : "");
    CHECK(fabs(ring - 1) <= 0.10);
    CHECK(fabs(a2a - 1) <= 0.10);
    if (m.credit_saturated) {
      CHECK(ring <= 1.02);
      CHECK(a2a <= 1.02);
    }
    outside += out;
    simulated++;
  }
  CHECK(simulated > outside);
}

static void test_calibration_small(void) {
  check_calibration("small_64", 1024);
}

static void test_calibration_study(void) {
  check_calibration("study_1k", 1024);
  check_calibration("fsdp_256", 1024);
}

static void test_examples_load(void) {
  static const char *ex[] = {"small_64", "study_1k", "study_16k", "fsdp_256"};
  for (int i = 0; i < 4; i++) {
    char path[512], err[1024];
    snprintf(path, sizeof path, "%s/examples/plan/%s.yaml", src_dir, ex[i]);
    CHECK(plan_spec_load(path, &sp, err, sizeof err) == 0);
    CHECK(plan_enumerate(&sp, opt, 64, err, sizeof err) > 0);
    for (uint32_t p = 0; p < sp.cat.n; p++)
      CHECK(sp.cat.part[p].source[0] != 0);
  }
}

int main(int argc, char **argv) {
  find_src_dir();
  write_catalogue();
  T_RUN(test_fat_tree_closed_form);
  T_RUN(test_leaf_spine_closed_form);
  T_RUN(test_rail_layout);
  T_RUN(test_totals_are_sums);
  T_RUN(test_framing);
  T_RUN(test_balls_in_bins);
  T_RUN(test_errors);
  T_RUN(test_trace);
  T_RUN(test_examples_load);
  T_RUN(test_calibration_small);
  /* The 1,024-GPU study's packet-level runs take about a minute of CPU:
   * `test_plan --study` runs them (ctest: unit.test_plan_study). */
  if (argc > 1 && !strcmp(argv[1], "--study"))
    T_RUN(test_calibration_study);
  unlink(cat_path);
  return T_DONE();
}
