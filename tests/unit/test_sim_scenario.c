/* Scenario files (YAML) and reproducibility of `uroce sim` output. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/report.h"
#include "sim/scenario.h"
#include "t.h"

/* The source tree, from this file's path (CMake compiles it by absolute
 * path): examples/ and tests/sim/ are found from there. */
static char src_dir[256];
static void find_src_dir(void) {
  snprintf(src_dir, sizeof src_dir, "%s", __FILE__);
  char *p = strstr(src_dir, "/tests/unit/");
  if (p)
    *p = 0;
  else
    snprintf(src_dir, sizeof src_dir, ".");
}
#define SRC_DIR src_dir

static int parse(const char *y, struct sim_cfg *c, char *err, size_t n) {
  char name[64] = "t";
  err[0] = 0;
  return sim_scenario_parse(y, strlen(y), "s.yaml", "", c, name, sizeof name,
                            err, n);
}

static void expect_error(const char *y, const char *needle) {
  struct sim_cfg c;
  char err[512];
  int rc = parse(y, &c, err, sizeof err);
  CHECK(rc == -1);
  if (!strstr(err, needle)) {
    fprintf(stderr, "error '%s' lacks '%s'\n", err, needle);
    CHECK(0);
  }
}

static void test_parse_good(void) {
  struct sim_cfg c;
  char err[512];
  const char *y =
      "seed: 9\n"
      "topology:\n"
      "  kind: fat_tree\n"
      "  k: 8\n"
      "  links:\n"
      "    host: {rate_gbps: 200, delay_ns: 500}\n"
      "    fabric: {rate_gbps: 400, delay_us: 1.5, loss: 0.01}\n"
      "routing: adaptive\n"
      "switch:\n"
      "  buffer: 16MiB\n"
      "  ecn: {enabled: true, kmin: 100KB, kmax: 400KB, pmax: 0.2}\n"
      "  pfc: {enabled: true, priorities: [3, 4], xoff: 64KiB, "
      "xon: 32KiB, headroom: auto}\n"
      "transport:\n"
      "  mtu: 1024\n"
      "  window: 128\n"
      "  cc: dcqcn\n"
      "  dcqcn: {preset: ns3, rai_mbps: 10}\n"
      "workload: {kind: incast, senders: 7, size: 1MB}\n";
  CHECK_EQ(parse(y, &c, err, sizeof err), 0);
  if (err[0])
    fprintf(stderr, "%s\n", err);
  CHECK_EQ(c.seed, 9);
  CHECK_EQ(c.topo.kind, SIM_TOPO_FAT_TREE);
  CHECK_EQ(c.topo.k, 8);
  CHECK_EQ(c.topo.link[0].rate_bps, 200000000000ull);
  CHECK_EQ(c.topo.link[0].delay, 500000);
  CHECK_EQ(c.topo.link[1].delay, 1500000);
  CHECK(c.topo.link[1].loss == 0.01);
  CHECK_EQ(c.routing, SIM_ROUTE_ADAPTIVE);
  CHECK_EQ(c.sw.buffer_bytes, 16 << 20);
  CHECK_EQ(c.sw.kmin, 100000);
  CHECK_EQ(c.sw.pfc_prios, 0x18);
  CHECK_EQ(c.sw.xoff, 65536);
  CHECK_EQ(c.tp.mtu, 1024);
  CHECK_EQ(c.tp.cc, SIM_CC_DCQCN);
  CHECK_EQ(c.tp.dcqcn.byte_counter, 300000);
  CHECK_EQ(c.tp.dcqcn.rai_bps, 10000000);
  CHECK_EQ(c.wl.kind, SIM_WL_INCAST);
  CHECK_EQ(c.wl.incast_senders, 7);
  CHECK_EQ(c.wl.bytes, 1000000);
  sim_cfg_free(&c);
}

static void test_parse_errors(void) {
  expect_error("seed: 1\ntopology:\n  kind: fat_tree\n  kk: 4\n",
               "s.yaml:4: unknown key 'kk' in 'topology'");
  expect_error("topology:\n  k: 5\n",
               "s.yaml:2: 'k': a fat-tree needs an even");
  expect_error("routing: ospf\n",
               "s.yaml:1: 'routing': expected one of ecmp, adaptive, spray");
  expect_error("switch:\n  buffer: lots\n", "s.yaml:2: 'buffer': expected");
  expect_error("transport:\n  mtu: 1500\n", "s.yaml:2: 'mtu'");
  expect_error("seed: 1\nseed: 2\n", "s.yaml:2: duplicate key 'seed'");
  expect_error("topology:\n  links:\n    host: {rate_gbps: -1}\n",
               "s.yaml:3: 'rate_gbps'");
  expect_error("switch:\n  pfc: {enabled: maybe}\n",
               "s.yaml:2: 'enabled': expected true or false");
  expect_error("workload:\n  kind: csv\n", "needs 'file'");
  expect_error("workload: {kind: permutation, size_distribution: nope.txt}\n",
               "nope.txt");
  expect_error("seed: [1\n", "YAML error");
  expect_error("topology: 3\n", "'topology': expected a mapping");
  /* Trimming replaces a lossy queue's drop: not with a lossless data
   * priority (PFC's default), the simple model or InfiniBand. */
  expect_error("switch:\n  trim: {enabled: true}\n",
               "s.yaml:2: 'switch.trim' makes no sense with a lossless data "
               "priority");
  expect_error("switch:\n  pfc: {enabled: false}\n  trim: {enabled: true}\n"
               "transport: {model: simple}\n",
               "s.yaml:3: 'switch.trim' needs 'transport.model: uroce'");
  expect_error("fabric: infiniband\nswitch: {trim: {enabled: true}}\n",
               "'switch.trim' is Ethernet's");
  expect_error("switch:\n  trim: {enabled: true, queue: 0}\n", "'queue'");
  expect_error("fabric: infiniband\nswitch: {dt_alpha: 1}\n",
               "'switch.dt_alpha' is Ethernet's");
  expect_error("switch: {dt_alpha: -1}\n", "'dt_alpha'");
  struct sim_cfg c;
  char err[512];
  CHECK_EQ(parse("switch: {dt_alpha: 0.5}\n", &c, err, sizeof err), 0);
  CHECK(c.sw.dt_alpha == 0.5);
  sim_cfg_free(&c);
  CHECK_EQ(parse("switch:\n  pfc: {enabled: false}\n"
                 "  trim: {enabled: true, queue: 8KiB}\n",
                 &c, err, sizeof err),
           0);
  CHECK(c.sw.trim && c.sw.trim_queue == 8192);
  sim_cfg_free(&c);
  CHECK_EQ(parse("switch:\n  pfc: {enabled: true, priorities: [4]}\n"
                 "  trim: {enabled: true}\n",
                 &c, err, sizeof err),
           0); /* data on priority 3 stays lossy */
  CHECK(c.sw.trim && c.sw.trim_queue == 64 << 10);
  sim_cfg_free(&c);
}

static void test_examples_load(void) {
  static const char *ex[] = {
      "incast_pfc",       "incast_lossy", "fat_tree_spray",   "fat_tree_ecmp",
      "dcqcn_leaf_spine", "rails_csv",    "permutation_sizes"};
  for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
    char path[1024], name[64], err[512] = "";
    snprintf(path, sizeof path, "%s/examples/sim/%s.yaml", SRC_DIR, ex[i]);
    struct sim_cfg c;
    int rc = sim_scenario_load(path, &c, name, sizeof name, err, sizeof err);
    if (rc)
      fprintf(stderr, "%s\n", err);
    CHECK_EQ(rc, 0);
    if (rc)
      continue;
    CHECK(!strcmp(name, ex[i]));
    struct sim *s = sim_new(&c, err, sizeof err);
    if (!s)
      fprintf(stderr, "%s: %s\n", ex[i], err);
    CHECK(s != NULL);
    CHECK(s && sim_nflows(s) > 0);
    sim_del(s);
    sim_cfg_free(&c);
  }
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  char *b = calloc(1, 1 << 20);
  if (b)
    fread(b, 1, (1 << 20) - 1, f);
  fclose(f);
  return b;
}

/* Runs tests/sim/determinism.yaml on threads into dir; returns
 * summary.json. */
static char *run_to(const char *dir, uint64_t seed, uint32_t threads) {
  char path[1024], name[64], err[512] = "";
  snprintf(path, sizeof path, "%s/tests/sim/determinism.yaml", SRC_DIR);
  struct sim_cfg c;
  if (sim_scenario_load(path, &c, name, sizeof name, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    CHECK(0);
    return 0;
  }
  c.seed = seed;
  c.threads = threads;
  struct sim *s = sim_new(&c, err, sizeof err);
  sim_cfg_free(&c);
  CHECK(s != NULL);
  if (!s)
    return 0;
  CHECK_EQ(sim_threads(s, 0), threads);
  CHECK_EQ(sim_run(s, SIM_NEVER), 1);
  mkdir(dir, 0777);
  CHECK_EQ(sim_report_write(s, dir, true, err, sizeof err), 0);
  const struct sim_stats *st = sim_stats(s);
  CHECK(st->drops_wire > 0);
  CHECK(st->ecn_marks[1] + st->ecn_marks[2] + st->ecn_marks[3] > 0);
  sim_del(s);
  snprintf(path, sizeof path, "%s/summary.json", dir);
  return slurp(path);
}

static void test_determinism(void) {
  char d1[] = "/tmp/uroce-sim-det-XXXXXX", d2[] = "/tmp/uroce-sim-det-XXXXXX",
       d3[] = "/tmp/uroce-sim-det-XXXXXX";
  CHECK(mkdtemp(d1) && mkdtemp(d2) && mkdtemp(d3));
  /* The same seed on one thread and on three: the same files. */
  char *a = run_to(d1, 42, 1), *b = run_to(d2, 42, 3), *c = run_to(d3, 43, 1);
  CHECK(a && b && c);
  if (a && b && c) {
    CHECK(strlen(a) > 500);
    CHECK(!strcmp(a, b));
    CHECK(strcmp(a, c) != 0);
    /* The CSV series too. */
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/flows.csv", d1);
    snprintf(p2, sizeof p2, "%s/flows.csv", d2);
    char *f1 = slurp(p1), *f2 = slurp(p2);
    CHECK(f1 && f2 && !strcmp(f1, f2));
    free(f1);
    free(f2);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "diff -r %s %s >/dev/null", d1, d2);
    CHECK_EQ(system(cmd), 0);
  }
  free(a);
  free(b);
  free(c);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s %s %s", d1, d2, d3);
  CHECK_EQ(system(cmd), 0);
}

int main(void) {
  find_src_dir();
  T_RUN(test_parse_good);
  T_RUN(test_parse_errors);
  T_RUN(test_examples_load);
  T_RUN(test_determinism);
  return T_DONE();
}
