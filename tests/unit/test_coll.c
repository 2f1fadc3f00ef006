/* Collectives over the in-memory fabric: every collective, type, operation
 * and algorithm on 1 to 16 ranks, uneven counts, in place and out of place,
 * with and without reordered arrivals, checked element by element against
 * a reference computed in float64. The matrix runs twice: with the gather
 * path (payloads written straight from the caller's buffers, checked to
 * stay untouched until their writes complete) and with the staging copy. Inputs
 * are small integers (and powers of two for products) so every partial result
 * is exact in every type and the comparison can be exact; a separate test uses
 * random reals with a tolerance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll_mem.h"
#include "t.h"

static const uroce_coll_dtype all_dt[] = {
    UROCE_COLL_FLOAT32, UROCE_COLL_FLOAT16, UROCE_COLL_BFLOAT16,
    UROCE_COLL_INT32,   UROCE_COLL_INT64,   UROCE_COLL_FLOAT64};
#define NDT 6

static uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t s = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 31 ^
               c * 0xC2B2AE3D27D4EB4Full;
  return t_rand(&s);
}

/* Input of rank r at element i: exact in every type, and so are all partial
 * results of the operation over at most 16 ranks. */
static double input(uroce_coll_dtype dt, int op, uint64_t seed, int r,
                    size_t i) {
  uint64_t h = mix(seed, (uint64_t)r, i);
  int fl = dt != UROCE_COLL_INT32 && dt != UROCE_COLL_INT64;
  switch (op) {
  case UROCE_COLL_SUM:
    return (double)((int)(h % 17) - 8);
  case UROCE_COLL_PROD:
    /* at most a quarter of the ranks contribute a factor 2 or 1/2 */
    if ((r + i) % 4 == 0 && (h & 1))
      return ((h >> 1) & 1) && fl ? 0.5 : 2.0;
    return (h >> 2) & 1 ? -1.0 : 1.0;
  default: {
    int span = dt == UROCE_COLL_BFLOAT16 ? 128 : 1000;
    return (double)((int)(h % (uint64_t)(2 * span + 1)) - span);
  }
  }
}

static double fold(int op, double a, double b) {
  switch (op) {
  case UROCE_COLL_SUM:
    return a + b;
  case UROCE_COLL_PROD:
    return a * b;
  case UROCE_COLL_MIN:
    return b < a ? b : a;
  default:
    return b > a ? b : a;
  }
}

/* op over all ranks of element i of their input vectors */
static double reduced(uroce_coll_dtype dt, int op, uint64_t seed, int n,
                      size_t i) {
  double v = input(dt, op, seed, 0, i);
  for (int r = 1; r < n; r++)
    v = fold(op, v, input(dt, op, seed, r, i));
  return v;
}

typedef struct fab {
  int n;
  coll_mem *m;
  uroce_coll_comm **comms;
} fab;

/* How the fabrics of the current pass are made: whether the transport
 * offers the gather path, and UROCE_COLL_GATHER_MIN for the comms (NULL:
 * the default, under which the small chunks of most tests are copied). */
static int gather_on = 1;
static const char *gather_min;
static uint64_t gathered_writes; /* over the fabrics of the current pass */

static int make_comms(coll_mem *m, const uroce_coll_config *cfg,
                      uroce_coll_comm **comms) {
  coll_mem_set_gather(m, gather_on);
  if (gather_min)
    setenv("UROCE_COLL_GATHER_MIN", gather_min, 1);
  int rc = coll_mem_comms(m, cfg, comms);
  unsetenv("UROCE_COLL_GATHER_MIN");
  return rc;
}

static void mem_done(coll_mem *m) {
  CHECK_EQ(coll_mem_violations(m), 0);
  gathered_writes += coll_mem_writes2(m);
  coll_mem_del(m);
}

static fab fab_new(int n, uint64_t seed, uint64_t delay, size_t chunk,
                   int slots) {
  fab f = {n, coll_mem_new(n, seed, delay), calloc((size_t)n, sizeof(void *))};
  uroce_coll_config cfg;
  uroce_coll_config_init(&cfg);
  cfg.chunk_bytes = chunk;
  cfg.slots = slots;
  cfg.timeout_ns = 1000000000ull;
  CHECK_EQ(make_comms(f.m, &cfg, f.comms), 0);
  return f;
}

static void fab_del(fab *f) {
  for (int i = 0; i < f->n; i++) {
    uroce_coll_comm_del(f->comms[i]);
    CHECK_EQ(coll_mem_mrs(f->m, i), 0); /* every registration is gone */
  }
  free(f->comms);
  mem_done(f->m);
}

static int cases, case_failures;

/* Run one collective on every rank of f and check every rank's output. */
static void run_case(fab *f, uroce_coll_kind kind, uroce_coll_dtype dt, int op,
                     uroce_coll_algo algo, size_t count, int inplace, int root,
                     uint64_t seed) {
  int n = f->n;
  size_t es = uroce_coll_dtype_size(dt);
  int vop = (kind == UROCE_COLL_ALLREDUCE || kind == UROCE_COLL_REDUCE ||
             kind == UROCE_COLL_REDUCE_SCATTER)
                ? op
                : UROCE_COLL_MAX;
  size_t scount = count, rcount = count; /* elements per rank */
  if (kind == UROCE_COLL_REDUCE_SCATTER || kind == UROCE_COLL_ALLTOALL)
    scount = count * (size_t)n;
  if (kind == UROCE_COLL_ALLGATHER || kind == UROCE_COLL_ALLTOALL)
    rcount = count * (size_t)n;
  size_t alloc = (scount > rcount ? scount : rcount) + 1;
  char **sb = calloc((size_t)n, sizeof(char *));
  char **rb = calloc((size_t)n, sizeof(char *));
  char **mem = calloc((size_t)n, sizeof(char *));
  uroce_coll_req **reqs = calloc((size_t)n, sizeof(void *));
  int *rc = calloc((size_t)n, sizeof(int));
  int bad = 0;
  for (int r = 0; r < n; r++) {
    mem[r] = malloc(2 * alloc * es);
    memset(mem[r], 0x5a, 2 * alloc * es);
    char *s = mem[r], *d = mem[r] + alloc * es;
    if (inplace) {
      d = mem[r];
      if (kind == UROCE_COLL_REDUCE_SCATTER)
        d = s + (size_t)r * count * es;
      else if (kind == UROCE_COLL_ALLGATHER)
        s = d + (size_t)r * count * es;
      else
        s = d;
    }
    /* allgather's input is rank r's block; others index their input from 0 */
    for (size_t i = 0; i < scount; i++)
      uroce_coll_store_f64(dt, s, i, input(dt, vop, seed, r, i));
    sb[r] = s;
    rb[r] = d;
    int st = uroce_coll_start(f->comms[r], kind, s, d, count, dt, op, root,
                              algo, &reqs[r]);
    if (st != 0) {
      fprintf(stderr, "start failed on rank %d: %s\n", r,
              uroce_coll_strerror(st));
      bad = 1;
    }
  }
  uint64_t viol = coll_mem_violations(f->m);
  if (!bad && coll_mem_run(f->m, reqs, rc, 10000000000ull) != 0)
    bad = 1;
  if (coll_mem_violations(f->m) != viol)
    bad = 1;
  for (int r = 0; r < n && !bad; r++)
    if (rc[r] != 0) {
      fprintf(stderr, "rank %d: %s: %s\n", r, uroce_coll_strerror(rc[r]),
              uroce_coll_errmsg(f->comms[r]));
      bad = 1;
    }
  for (int r = 0; r < n && !bad; r++) {
    if (algo != UROCE_COLL_ALGO_AUTO && reqs[r] &&
        uroce_coll_req_algo(reqs[r]) != algo && count && n > 1)
      bad = 1;
    size_t nout = rcount;
    if (kind == UROCE_COLL_REDUCE && r != root)
      nout = 0;
    for (size_t i = 0; i < nout && !bad; i++) {
      double want;
      switch (kind) {
      case UROCE_COLL_ALLREDUCE:
      case UROCE_COLL_REDUCE:
        want = reduced(dt, op, seed, n, i);
        break;
      case UROCE_COLL_REDUCE_SCATTER:
        want = reduced(dt, op, seed, n, (size_t)r * count + i);
        break;
      case UROCE_COLL_ALLGATHER:
        want = input(dt, vop, seed, (int)(i / count), i % count);
        break;
      case UROCE_COLL_BROADCAST:
        want = input(dt, vop, seed, root, i);
        break;
      default: /* all-to-all */
        want = input(dt, vop, seed, (int)(i / count),
                     (size_t)r * count + i % count);
      }
      double got = uroce_coll_load_f64(dt, rb[r], i);
      if (got != want) {
        fprintf(stderr,
                "%s %s %s %s n=%d count=%zu inplace=%d root=%d: rank %d "
                "element %zu = %g, want %g\n",
                uroce_coll_kind_name(kind), uroce_coll_algo_name(algo),
                uroce_coll_dtype_name(dt), uroce_coll_op_name(op), n, count,
                inplace, root, r, i, got, want);
        bad = 1;
      }
    }
  }
  /* out of place, the input is only read (allreduce reads it block by
   * block while the collective runs) */
  for (int r = 0; r < n && !bad && !inplace; r++)
    for (size_t i = 0; i < scount && !bad; i++)
      if (uroce_coll_load_f64(dt, sb[r], i) != input(dt, vop, seed, r, i)) {
        fprintf(stderr, "rank %d: input element %zu changed\n", r, i);
        bad = 1;
      }
  cases++;
  if (bad) {
    case_failures++;
    fprintf(stderr, "  case: %s %s %s %s n=%d count=%zu inplace=%d\n",
            uroce_coll_kind_name(kind), uroce_coll_algo_name(algo),
            uroce_coll_dtype_name(dt), uroce_coll_op_name(op), n, count,
            inplace);
  }
  CHECK(!bad);
  for (int r = 0; r < n; r++)
    free(mem[r]);
  free(mem);
  free(sb);
  free(rb);
  free(reqs);
  free(rc);
}

static const int ranks_sweep[] = {1, 2, 3, 4, 5, 7, 8, 16};
#define NRANKS 8

typedef struct kind_algos {
  uroce_coll_kind kind;
  int has_op;
  uroce_coll_algo algos[3];
  int nalgo;
} kind_algos;

static const kind_algos kinds[] = {
    {UROCE_COLL_ALLREDUCE,
     1,
     {UROCE_COLL_ALGO_RING, UROCE_COLL_ALGO_TREE, UROCE_COLL_ALGO_RHD},
     3},
    {UROCE_COLL_REDUCE_SCATTER,
     1,
     {UROCE_COLL_ALGO_RING, UROCE_COLL_ALGO_RHD},
     2},
    {UROCE_COLL_ALLGATHER, 0, {UROCE_COLL_ALGO_RING, UROCE_COLL_ALGO_RHD}, 2},
    {UROCE_COLL_BROADCAST, 0, {UROCE_COLL_ALGO_RING, UROCE_COLL_ALGO_TREE}, 2},
    {UROCE_COLL_REDUCE, 1, {UROCE_COLL_ALGO_RING, UROCE_COLL_ALGO_TREE}, 2},
    {UROCE_COLL_ALLTOALL, 0, {UROCE_COLL_ALGO_PAIRWISE}, 1},
};
#define NKINDS 6

/* Every collective x algorithm x type x op x rank count x small uneven
 * counts x in/out of place, many collectives in a row on one communicator
 * per rank count, half of the rank counts with reordered arrivals. */
static void test_sweep_small(void) {
  for (int ri = 0; ri < NRANKS; ri++) {
    int n = ranks_sweep[ri];
    fab f = fab_new(n, 100 + (uint64_t)n, ri % 2 ? 5000 : 0, 64 * (ri % 3 + 1),
                    ri % 2 ? 2 : 4);
    size_t counts[] = {0, 1, 7, (size_t)(n > 1 ? n - 1 : 2), 101};
    uint64_t seed = 1;
    for (int k = 0; k < NKINDS; k++)
      for (int a = 0; a < kinds[k].nalgo; a++)
        for (int d = 0; d < NDT; d++)
          for (int op = 0; op < (kinds[k].has_op ? 4 : 1); op++)
            for (int ci = 0; ci < 5; ci++)
              for (int ip = 0; ip < 2; ip++) {
                run_case(&f, kinds[k].kind, all_dt[d], op, kinds[k].algos[a],
                         counts[ci], ip, (int)(seed % (uint64_t)n), seed);
                seed++;
              }
    fab_del(&f);
  }
}

/* Larger counts, several chunks per step in flight, reordering. With 5
 * ranks, 32 slots: more than one credit write can give back as a set
 * (29), so each slot's credit goes alone. */
static void test_sweep_large(void) {
  static const int rs[] = {2, 3, 5, 8, 16};
  for (int ri = 0; ri < 5; ri++) {
    int n = rs[ri];
    fab f =
        fab_new(n, 7 + (uint64_t)n, ri % 2 ? 3000 : 0, 4096, n == 5 ? 32 : 4);
    uint64_t seed = 1000;
    for (int k = 0; k < NKINDS; k++)
      for (int a = 0; a < kinds[k].nalgo; a++) {
        size_t big = kinds[k].kind == UROCE_COLL_ALLREDUCE ||
                             kinds[k].kind == UROCE_COLL_BROADCAST ||
                             kinds[k].kind == UROCE_COLL_REDUCE
                         ? 100003
                         : 100003 / (size_t)n;
        size_t counts[] = {1003, big};
        for (int ci = 0; ci < 2; ci++)
          for (int d = 0; d < NDT; d += (ci ? 2 : 1)) {
            int op = kinds[k].has_op ? (int)(seed % 4) : 0;
            run_case(&f, kinds[k].kind, all_dt[d], op, kinds[k].algos[a],
                     counts[ci], (int)(seed & 1), (int)(seed % (uint64_t)n),
                     seed);
            seed++;
          }
      }
    fab_del(&f);
  }
}

/* AUTO on sizes that select each algorithm. */
static void test_auto(void) {
  fab f = fab_new(8, 5, 0, 1024, 4);
  size_t counts[] = {10, 100000, 2000000};
  for (int ci = 0; ci < 3; ci++)
    for (int k = 0; k < NKINDS; k++)
      run_case(&f, kinds[k].kind, UROCE_COLL_FLOAT32, UROCE_COLL_SUM,
               UROCE_COLL_ALGO_AUTO,
               counts[ci] / (kinds[k].kind == UROCE_COLL_ALLREDUCE ||
                                     kinds[k].kind == UROCE_COLL_BROADCAST ||
                                     kinds[k].kind == UROCE_COLL_REDUCE
                                 ? 1
                                 : 8),
               ci & 1, 3, 77 + (uint64_t)ci);
  fab_del(&f);
  CHECK_EQ(uroce_coll_choose_algo(NULL, UROCE_COLL_ALLTOALL, 1),
           UROCE_COLL_ALGO_PAIRWISE);
  fab g = fab_new(8, 5, 0, 1024, 4);
  CHECK_EQ(uroce_coll_choose_algo(g.comms[0], UROCE_COLL_ALLREDUCE, 1024),
           UROCE_COLL_ALGO_RHD);
  CHECK_EQ(uroce_coll_choose_algo(g.comms[0], UROCE_COLL_ALLREDUCE, 1 << 19),
           UROCE_COLL_ALGO_TREE);
  CHECK_EQ(uroce_coll_choose_algo(g.comms[0], UROCE_COLL_ALLREDUCE, 1 << 20),
           UROCE_COLL_ALGO_RHD);
  CHECK_EQ(
      uroce_coll_choose_algo(g.comms[0], UROCE_COLL_ALLREDUCE, (1 << 20) + 4),
      UROCE_COLL_ALGO_RING);
  CHECK_EQ(uroce_coll_choose_algo(g.comms[0], UROCE_COLL_ALLREDUCE, 1 << 26),
           UROCE_COLL_ALGO_RING);
  CHECK_EQ(uroce_coll_choose_algo(g.comms[0], UROCE_COLL_ALLGATHER, 1 << 26),
           UROCE_COLL_ALGO_RING);
  CHECK_EQ(uroce_coll_choose_algo(g.comms[0], UROCE_COLL_BROADCAST, 1024),
           UROCE_COLL_ALGO_TREE);
  fab_del(&g);
}

/* Host tables: layout l of n ranks. 0: hosts of consecutive ranks; 1:
 * rank r on host r % nh (a host's ranks interleaved with the others'); 2:
 * hosts named by large, unordered numbers, ranks shuffled among them. */
static void host_table(int n, int nh, int layout, int *host) {
  int per = n / nh;
  for (int r = 0; r < n; r++)
    host[r] = layout == 0 ? r / per : layout == 1 ? r % nh : 0;
  if (layout == 2) {
    /* a fixed permutation of the ranks, then per ranks to each host */
    int *perm = malloc((size_t)n * sizeof *perm);
    for (int r = 0; r < n; r++)
      perm[r] = r;
    uint64_t st = 99;
    for (int r = n - 1; r > 0; r--) {
      int j = (int)(t_rand(&st) % (uint64_t)(r + 1)), t = perm[r];
      perm[r] = perm[j];
      perm[j] = t;
    }
    for (int i = 0; i < n; i++)
      host[perm[i]] = 1000003 * (nh - i / per) - 7;
    free(perm);
  }
}

static void fab_set_hosts(fab *f, const int *host) {
  for (int r = 0; r < f->n; r++)
    CHECK_EQ(uroce_coll_comm_set_hosts(f->comms[r], host, f->n), 0);
}

/* The hierarchical allreduce: hosts x ranks per host in three layouts,
 * every type and op, uneven counts (fewer elements than ranks per host,
 * than ranks, several chunks per block), in and out of place, with and
 * without reordered arrivals; AUTO picks it above 64 KiB on a comm with a
 * hierarchy and not without one; hosts of unequal sizes fall back. */
static void test_hier(void) {
  static const int shape[][2] = {{2, 2}, {2, 3}, {3, 2}, {2, 4},
                                 {4, 2}, {3, 3}, {4, 4}, {2, 8}};
  uint64_t seed = 5000;
  for (int si = 0; si < 8; si++) {
    int nh = shape[si][0], n = nh * shape[si][1], host[16];
    for (int layout = 0; layout < 3; layout++) {
      fab f = fab_new(n, 300 + (uint64_t)(si * 3 + layout),
                      layout == 1 ? 4000 : 0, layout == 2 ? 256 : 1024,
                      layout ? 2 : 4);
      host_table(n, nh, layout, host);
      fab_set_hosts(&f, host);
      int gh, gl;
      uroce_coll_comm_hosts(f.comms[n - 1], &gh, &gl);
      CHECK_EQ(gh, nh);
      CHECK_EQ(gl, n / nh);
      size_t counts[] = {1, (size_t)n / nh - 1, (size_t)n + 1, 1003, 30011};
      for (int ci = 0; ci < 5; ci++)
        for (int d = 0; d < NDT; d++)
          for (int op = 0; op < 4; op += (ci == 4 ? 3 : 1)) {
            run_case(&f, UROCE_COLL_ALLREDUCE, all_dt[d], op,
                     UROCE_COLL_ALGO_HIER, counts[ci], (int)(seed & 1), 0,
                     seed);
            seed++;
          }
      CHECK_EQ(uroce_coll_choose_algo(f.comms[0], UROCE_COLL_ALLREDUCE,
                                      1 << 20),
               UROCE_COLL_ALGO_HIER);
      CHECK_EQ(uroce_coll_choose_algo(f.comms[0], UROCE_COLL_ALLREDUCE, 4096),
               UROCE_COLL_ALGO_RHD);
      /* AUTO runs it, and the other collectives are unchanged */
      run_case(&f, UROCE_COLL_ALLREDUCE, UROCE_COLL_FLOAT32, UROCE_COLL_SUM,
               UROCE_COLL_ALGO_AUTO, 70000, 0, 0, seed++);
      run_case(&f, UROCE_COLL_REDUCE_SCATTER, UROCE_COLL_INT32,
               UROCE_COLL_MAX, UROCE_COLL_ALGO_AUTO, 5000, 1, 0, seed++);
      fab_del(&f);
    }
  }
  /* hosts of 3 and 2 ranks, one host, one rank per host: no hierarchy;
   * HIER falls back to the flat choice and the result is still right */
  static const int odd[][6] = {{0, 0, 0, 1, 1, -1},
                               {4, 4, 4, 4, 4, -1},
                               {0, 1, 2, 3, 4, -1}};
  for (int k = 0; k < 3; k++) {
    fab f = fab_new(5, 77 + (uint64_t)k, 0, 512, 4);
    fab_set_hosts(&f, odd[k]);
    int gh, gl;
    uroce_coll_comm_hosts(f.comms[0], &gh, &gl);
    CHECK_EQ(gh, 1);
    CHECK_EQ(gl, 5);
    CHECK_EQ(uroce_coll_choose_algo(f.comms[0], UROCE_COLL_ALLREDUCE, 1 << 24),
             UROCE_COLL_ALGO_RING);
    run_case(&f, UROCE_COLL_ALLREDUCE, UROCE_COLL_FLOAT64, UROCE_COLL_SUM,
             UROCE_COLL_ALGO_AUTO, 4099, 0, 0, seed++);
    uroce_coll_req *reqs[5];
    int rcs[5];
    double vin[5][40];
    for (int r = 0; r < 5; r++) {
      for (int i = 0; i < 40; i++)
        vin[r][i] = r * 100 + i;
      CHECK_EQ(uroce_coll_start(f.comms[r], UROCE_COLL_ALLREDUCE, vin[r],
                                vin[r], 40, UROCE_COLL_FLOAT64, UROCE_COLL_SUM,
                                0, UROCE_COLL_ALGO_HIER, &reqs[r]),
               0);
      CHECK_EQ(uroce_coll_req_algo(reqs[r]),
               uroce_coll_choose_algo(f.comms[r], UROCE_COLL_ALLREDUCE,
                                      40 * sizeof(double)));
    }
    CHECK_EQ(coll_mem_run(f.m, reqs, rcs, 1000000000ull), 0);
    for (int r = 0; r < 5; r++) {
      CHECK_EQ(rcs[r], 0);
      CHECK(vin[r][39] == 1000 + 5 * 39);
    }
    fab_del(&f);
  }
  /* a table of the wrong size; changing hosts mid-collective; forgetting */
  fab f = fab_new(4, 3, 0, 512, 4);
  int host4[4] = {0, 0, 1, 1};
  CHECK_EQ(uroce_coll_comm_set_hosts(f.comms[0], host4, 3),
           UROCE_ERR_INVALID_ARGUMENT);
  fab_set_hosts(&f, host4);
  uroce_coll_req *req;
  float v[64] = {0};
  CHECK_EQ(uroce_coll_allreduce_start(f.comms[0], v, v, 64, UROCE_COLL_FLOAT32,
                                      UROCE_COLL_SUM, &req),
           0);
  CHECK_EQ(uroce_coll_comm_set_hosts(f.comms[0], host4, 4), UROCE_ERR_BUSY);
  CHECK_EQ(uroce_coll_comm_set_hosts(f.comms[1], NULL, 0), 0);
  int gh;
  uroce_coll_comm_hosts(f.comms[1], &gh, NULL);
  CHECK_EQ(gh, 1);
  fab_del(&f);
}

/* UROCE_COLL_ALGO picks the algorithm of AUTO collectives. */
static void test_env_override(void) {
  setenv("UROCE_COLL_ALGO", "tree", 1);
  fab f = fab_new(4, 9, 0, 1024, 4);
  unsetenv("UROCE_COLL_ALGO");
  uroce_coll_req *reqs[4];
  int rc[4];
  float buf[4][33];
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < 33; i++)
      buf[r][i] = (float)(r + i);
    CHECK_EQ(uroce_coll_allreduce_start(f.comms[r], buf[r], buf[r], 33,
                                        UROCE_COLL_FLOAT32, UROCE_COLL_SUM,
                                        &reqs[r]),
             0);
    CHECK_EQ(uroce_coll_req_algo(reqs[r]), UROCE_COLL_ALGO_TREE);
  }
  CHECK_EQ(coll_mem_run(f.m, reqs, rc, 1000000000ull), 0);
  for (int r = 0; r < 4; r++) {
    CHECK_EQ(rc[r], 0);
    CHECK(buf[r][5] == (float)(6 + 4 * 5));
  }
  /* an algorithm that does not do the collective falls back to AUTO */
  uroce_coll_comm_set_algo(f.comms[0], UROCE_COLL_ALGO_PAIRWISE);
  CHECK_EQ(uroce_coll_start(f.comms[0], UROCE_COLL_ALLREDUCE, buf[0], buf[0],
                            33, UROCE_COLL_FLOAT32, UROCE_COLL_SUM, 0,
                            UROCE_COLL_ALGO_AUTO, &reqs[0]),
           0);
  CHECK(uroce_coll_req_algo(reqs[0]) != UROCE_COLL_ALGO_PAIRWISE);
  /* one collective at a time */
  CHECK_EQ(uroce_coll_start(f.comms[0], UROCE_COLL_ALLREDUCE, buf[0], buf[0],
                            33, UROCE_COLL_FLOAT32, UROCE_COLL_SUM, 0,
                            UROCE_COLL_ALGO_AUTO, &reqs[1]),
           UROCE_ERR_BUSY);
  CHECK_EQ(uroce_coll_algo_parse("RHD"), UROCE_COLL_ALGO_RHD);
  CHECK_EQ(uroce_coll_algo_parse("nope"), -1);
  fab_del(&f);
}

/* Random reals: float sums with a tolerance that grows with the rank count
 * and the type's precision. */
static void test_real_tolerance(void) {
  static const uroce_coll_dtype dts[] = {UROCE_COLL_FLOAT32, UROCE_COLL_FLOAT16,
                                         UROCE_COLL_BFLOAT16,
                                         UROCE_COLL_FLOAT64};
  static const double eps[] = {0x1p-23, 0x1p-10, 0x1p-7, 0x1p-52};
  for (int ai = 0; ai < 3; ai++) {
    int n = 7;
    fab f = fab_new(n, 3, 2000, 512, 3);
    for (int d = 0; d < 4; d++) {
      size_t count = 5001, es = uroce_coll_dtype_size(dts[d]);
      char *buf = malloc((size_t)n * count * es);
      double *ref = calloc(count, sizeof(double));
      double *mag = calloc(count, sizeof(double));
      uint64_t s = 42;
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++) {
          double v = splitmix64_01(&s) * 2.0 - 1.0;
          uroce_coll_store_f64(dts[d], buf + (size_t)r * count * es, i, v);
          v = uroce_coll_load_f64(dts[d], buf + (size_t)r * count * es, i);
          ref[i] += v;
          mag[i] += fabs(v);
        }
      uroce_coll_req *reqs[7];
      int rc[7];
      for (int r = 0; r < n; r++)
        CHECK_EQ(uroce_coll_start(
                     f.comms[r], UROCE_COLL_ALLREDUCE,
                     buf + (size_t)r * count * es, buf + (size_t)r * count * es,
                     count, dts[d], UROCE_COLL_SUM, 0,
                     (uroce_coll_algo)(UROCE_COLL_ALGO_RING + ai), &reqs[r]),
                 0);
      CHECK_EQ(coll_mem_run(f.m, reqs, rc, 1000000000ull), 0);
      int bad = 0;
      for (int r = 0; r < n; r++) {
        CHECK_EQ(rc[r], 0);
        for (size_t i = 0; i < count && !bad; i++) {
          double got =
              uroce_coll_load_f64(dts[d], buf + (size_t)r * count * es, i);
          double tol = eps[d] * (n * mag[i] + fabs(ref[i]));
          if (fabs(got - ref[i]) > tol) {
            fprintf(stderr, "%s %s rank %d [%zu]: %g vs %g (tol %g)\n",
                    uroce_coll_algo_name(UROCE_COLL_ALGO_RING + ai),
                    uroce_coll_dtype_name(dts[d]), r, i, got, ref[i], tol);
            bad = 1;
          }
          /* every rank ends with the same bits */
          if (memcmp(buf + (size_t)r * count * es + i * es, buf + i * es, es) !=
              0)
            bad = 1;
        }
      }
      CHECK(!bad);
      free(buf);
      free(ref);
      free(mag);
    }
    fab_del(&f);
  }
}

/* Kill a rank in the middle of a collective: every other rank fails with an
 * error within the timeout, and the error names the dead rank. */
static void dead_rank(uroce_coll_kind kind, uroce_coll_algo algo, int n,
                      int victim, int error_completions) {
  coll_mem *m = coll_mem_new(n, 11, 0);
  uroce_coll_comm *comms[16];
  uroce_coll_config cfg;
  uroce_coll_config_init(&cfg);
  cfg.chunk_bytes = 1024;
  cfg.slots = 2;
  cfg.timeout_ns = 50000000; /* 50 ms of virtual time */
  CHECK_EQ(make_comms(m, &cfg, comms), 0);
  if (algo == UROCE_COLL_ALGO_HIER) { /* hosts of 2 ranks */
    int host[16];
    for (int r = 0; r < n; r++)
      host[r] = r / 2;
    for (int r = 0; r < n; r++)
      CHECK_EQ(uroce_coll_comm_set_hosts(comms[r], host, n), 0);
  }
  size_t count = 200000;
  float *buf = calloc((size_t)n * count * (size_t)n, sizeof(float));
  uroce_coll_req *reqs[16];
  int rc[16];
  for (int r = 0; r < n; r++)
    CHECK_EQ(uroce_coll_start(comms[r], kind, buf + (size_t)r * count * n,
                              buf + (size_t)r * count * n,
                              kind == UROCE_COLL_ALLTOALL ? count / n : count,
                              UROCE_COLL_FLOAT32, UROCE_COLL_SUM, 0, algo,
                              &reqs[r]),
             0);
  for (int r = 0; r < n; r++)
    CHECK_EQ(uroce_coll_req_algo(reqs[r]), algo);
  /* some progress first, then the victim dies */
  CHECK(coll_mem_run(m, reqs, rc, 20000) > 0);
  coll_mem_kill(m, victim, error_completions);
  uint64_t t0 = coll_mem_now(m);
  CHECK_EQ(coll_mem_run(m, reqs, rc, 10 * cfg.timeout_ns), 0);
  uint64_t took = coll_mem_now(m) - t0;
  CHECK(took <= cfg.timeout_ns + 5000000);
  char want[32];
  snprintf(want, sizeof want, "rank %d", victim);
  int named = 0, failed = 0;
  for (int r = 0; r < n; r++) {
    if (r == victim)
      continue;
    /* a broadcast rank that does not depend on the victim may finish */
    if (rc[r] == 0 && kind == UROCE_COLL_BROADCAST)
      continue;
    CHECK(rc[r] == UROCE_COLL_ERR_PEER_TIMEOUT ||
          rc[r] == UROCE_COLL_ERR_PEER_FAILED ||
          rc[r] == UROCE_COLL_ERR_ABORTED);
    failed++;
    if (strstr(uroce_coll_errmsg(comms[r]), want))
      named++;
    else
      fprintf(stderr, "rank %d: %s\n", r, uroce_coll_errmsg(comms[r]));
    if (r == (victim + 1) % n)
      printf("dead rank %d, %s %s, rank %d: %s\n", victim,
             uroce_coll_kind_name(kind), uroce_coll_algo_name(algo), r,
             uroce_coll_errmsg(comms[r]));
    /* the communicator is failed from now on */
    uroce_coll_req *q;
    CHECK_EQ(uroce_coll_allreduce_start(comms[r], buf, buf, 1,
                                        UROCE_COLL_FLOAT32, UROCE_COLL_SUM, &q),
             UROCE_COLL_ERR_COMM_FAILED);
  }
  CHECK(failed >= 1);
  CHECK_EQ(named, failed);
  if (named < failed || took > cfg.timeout_ns + 5000000)
    fprintf(stderr, "dead rank %s %s: named %d took %llu\n",
            uroce_coll_kind_name(kind), uroce_coll_algo_name(algo), named,
            (unsigned long long)took);
  for (int r = 0; r < n; r++)
    uroce_coll_comm_del(comms[r]);
  free(buf);
  mem_done(m);
}

static void test_dead_rank(void) {
  dead_rank(UROCE_COLL_ALLREDUCE, UROCE_COLL_ALGO_RING, 5, 2, 0);
  dead_rank(UROCE_COLL_ALLREDUCE, UROCE_COLL_ALGO_RING, 5, 2, 1);
  dead_rank(UROCE_COLL_ALLREDUCE, UROCE_COLL_ALGO_TREE, 8, 3, 0);
  dead_rank(UROCE_COLL_ALLREDUCE, UROCE_COLL_ALGO_RHD, 6, 5, 0);
  dead_rank(UROCE_COLL_ALLREDUCE, UROCE_COLL_ALGO_HIER, 6, 2, 0);
  dead_rank(UROCE_COLL_ALLREDUCE, UROCE_COLL_ALGO_HIER, 8, 7, 1);
  dead_rank(UROCE_COLL_BROADCAST, UROCE_COLL_ALGO_TREE, 7, 1, 0);
  dead_rank(UROCE_COLL_ALLTOALL, UROCE_COLL_ALGO_PAIRWISE, 4, 0, 1);
}

/* wait() returns TIMEOUT while peers are silent, and the request goes on. */
static void test_wait_timeout(void) {
  coll_mem *m = coll_mem_new(2, 1, 0);
  coll_mem_set_poll_tick(m, 1000);
  uroce_coll_comm *comms[2];
  CHECK_EQ(coll_mem_comms(m, NULL, comms), 0);
  float a[10] = {1}, b[10] = {2};
  uroce_coll_req *q0, *q1;
  CHECK_EQ(uroce_coll_allreduce_start(comms[0], a, a, 10, UROCE_COLL_FLOAT32,
                                      UROCE_COLL_SUM, &q0),
           0);
  CHECK_EQ(uroce_coll_wait(q0, 1000000), UROCE_COLL_ERR_TIMEOUT);
  CHECK_EQ(uroce_coll_allreduce_start(comms[1], b, b, 10, UROCE_COLL_FLOAT32,
                                      UROCE_COLL_SUM, &q1),
           0);
  CHECK_EQ(uroce_coll_test(q1), UROCE_COLL_INPROGRESS);
  CHECK_EQ(uroce_coll_wait(q0, 1000000000), 0);
  CHECK_EQ(uroce_coll_wait(q1, 1000000000), 0);
  CHECK(a[0] == 3.0f && b[0] == 3.0f);
  /* a size-1 communicator completes at once */
  coll_mem *m1 = coll_mem_new(1, 1, 0);
  uroce_coll_comm *c1;
  CHECK_EQ(coll_mem_comms(m1, NULL, &c1), 0);
  CHECK_EQ(uroce_coll_allreduce_start(c1, b, a, 10, UROCE_COLL_FLOAT32,
                                      UROCE_COLL_SUM, &q0),
           0);
  CHECK_EQ(uroce_coll_wait(q0, 0), 0);
  CHECK(a[0] == 3.0f);
  /* arguments */
  CHECK_EQ(uroce_coll_broadcast_start(c1, a, a, 1, UROCE_COLL_FLOAT32, 1, &q0),
           UROCE_ERR_INVALID_ARGUMENT);
  CHECK_EQ(uroce_coll_allreduce_start(c1, a, a, 1, (uroce_coll_dtype)9,
                                      UROCE_COLL_SUM, &q0),
           UROCE_ERR_INVALID_ARGUMENT);
  uroce_coll_comm_del(c1);
  coll_mem_del(m1);
  uroce_coll_comm_del(comms[0]);
  uroce_coll_comm_del(comms[1]);
  coll_mem_del(m);
}

/* Ranks that disagree on the count fail instead of corrupting memory. */
static void test_mismatch(void) {
  fab f = fab_new(3, 1, 0, 256, 2);
  float buf[3][1000];
  memset(buf, 0, sizeof buf);
  uroce_coll_req *reqs[3];
  int rc[3];
  for (int r = 0; r < 3; r++)
    CHECK_EQ(uroce_coll_start(f.comms[r], UROCE_COLL_ALLREDUCE, buf[r], buf[r],
                              r == 1 ? 900 : 1000, UROCE_COLL_FLOAT32,
                              UROCE_COLL_SUM, 0, UROCE_COLL_ALGO_RING,
                              &reqs[r]),
             0);
  CHECK_EQ(coll_mem_run(f.m, reqs, rc, 5000000000ull), 0);
  int failed = 0;
  for (int r = 0; r < 3; r++)
    failed += rc[r] < 0;
  CHECK_EQ(failed, 3);
  fab_del(&f);
}

/* Tree shape: every node reachable, each rank a leaf in one of the trees
 * when the count of ranks is even (checked through allreduce results
 * above); here the structure of the communicator info. */
static void test_connect_checks(void) {
  coll_mem *m = coll_mem_new(2, 1, 0);
  uroce_coll_comm *a, *b;
  uroce_coll_config cfg;
  uroce_coll_config_init(&cfg);
  CHECK_EQ(uroce_coll_comm_new(coll_mem_tp(m, 0), &cfg, &a), 0);
  cfg.slots = cfg.slots + 1; /* differs from a's */
  CHECK_EQ(uroce_coll_comm_new(coll_mem_tp(m, 1), &cfg, &b), 0);
  size_t isz = uroce_coll_comm_info_size();
  char blobs[2 * 64];
  CHECK(isz * 2 <= sizeof blobs);
  CHECK_EQ(uroce_coll_comm_info(a, blobs, isz), (int)isz);
  CHECK_EQ(uroce_coll_comm_info(b, blobs + isz, isz), (int)isz);
  CHECK_EQ(uroce_coll_comm_info(b, blobs, 3), UROCE_ERR_NOBUF);
  CHECK_EQ(uroce_coll_comm_connect(a, blobs, 2 * isz), UROCE_COLL_ERR_MISMATCH);
  float x = 1;
  uroce_coll_req *q;
  CHECK_EQ(uroce_coll_allreduce_start(a, &x, &x, 1, UROCE_COLL_FLOAT32,
                                      UROCE_COLL_SUM, &q),
           UROCE_COLL_ERR_NOT_CONNECTED);
  cfg.slots = 0;
  uroce_coll_comm *c;
  CHECK_EQ(uroce_coll_comm_new(coll_mem_tp(m, 1), &cfg, &c),
           UROCE_ERR_INVALID_ARGUMENT);
  CHECK(strstr(uroce_coll_strerror(UROCE_COLL_ERR_PEER_TIMEOUT), "timeout"));
  CHECK(strstr(uroce_coll_strerror(UROCE_ERR_BUSY), "") != NULL);
  uroce_coll_comm_del(a);
  uroce_coll_comm_del(b);
  coll_mem_del(m);
}

/* The gather path registers the caller's buffers for local reads only:
 * they never become remotely writable. Registrations are cached while the
 * buffers stay the same, replaced when they change, and gone with the
 * comm. */
static void test_gather_rights(void) {
  int n = 3;
  size_t count = 6000; /* float32: 3 blocks of 8000 bytes, 2 chunks each */
  fab f = fab_new(n, 21, 0, 4096, 4);
  float *buf[3][3]; /* per rank: in, out, another out */
  for (int r = 0; r < n; r++)
    for (int k = 0; k < 3; k++) {
      buf[r][k] = malloc((size_t)n * count * sizeof(float));
      for (size_t i = 0; i < (size_t)n * count; i++)
        buf[r][k][i] = (float)(r + 1);
    }
  uroce_coll_req *reqs[3];
  int rc[3], mrs[3];
  for (int round = 0; round < 3; round++) {
    int out = round == 2 ? 2 : 1; /* round 2: another buffer */
    uint64_t w2 = coll_mem_writes2(f.m);
    for (int r = 0; r < n; r++)
      CHECK_EQ(uroce_coll_start(f.comms[r], UROCE_COLL_ALLREDUCE, buf[r][0],
                                buf[r][out], count, UROCE_COLL_FLOAT32,
                                UROCE_COLL_SUM, 0, UROCE_COLL_ALGO_RING,
                                &reqs[r]),
               0);
    CHECK_EQ(coll_mem_run(f.m, reqs, rc, 1000000000ull), 0);
    CHECK(coll_mem_writes2(f.m) > w2);
    for (int r = 0; r < n; r++) {
      CHECK_EQ(rc[r], 0);
      CHECK(buf[r][out][count - 1] == 6.0f);
      /* the ring allreduce out of place sends its first block (block r)
       * from the input and the rest from the output: the regions it
       * sends from are registered, local only; the input's other blocks
       * are not registered at all */
      CHECK_EQ(coll_mem_mr_access(f.m, r, buf[r][out]), 0);
      CHECK_EQ(coll_mem_mr_access(f.m, r, buf[r][out] + count - 1), 0);
      CHECK_EQ(coll_mem_mr_access(f.m, r, buf[r][0] + r * count / n), 0);
      CHECK_EQ(coll_mem_mr_access(f.m, r, buf[r][0] + (r + 1) % n * count / n),
               -1);
      CHECK(buf[r][0][0] == (float)(r + 1)); /* the input is only read */
      if (round == 0)
        mrs[r] = coll_mem_mrs(f.m, r);
      CHECK_EQ(coll_mem_mrs(f.m, r), mrs[r]); /* reused, or replaced */
      if (round == 2)
        CHECK_EQ(coll_mem_mr_access(f.m, r, buf[r][1]), -1);
    }
  }
  /* all-to-all sends from the input: both buffers local only */
  for (int r = 0; r < n; r++)
    CHECK_EQ(uroce_coll_alltoall_start(f.comms[r], buf[r][0], buf[r][1], count,
                                       UROCE_COLL_FLOAT32, &reqs[r]),
             0);
  CHECK_EQ(coll_mem_run(f.m, reqs, rc, 1000000000ull), 0);
  for (int r = 0; r < n; r++) {
    CHECK_EQ(rc[r], 0);
    CHECK_EQ(coll_mem_mr_access(f.m, r, buf[r][0] + (r + 1) % n * count), 0);
    CHECK_EQ(coll_mem_mr_access(f.m, r, buf[r][0] + (r + 2) % n * count), 0);
    /* the output only receives here; round 2 replaced its registration */
    CHECK_EQ(coll_mem_mr_access(f.m, r, buf[r][1]), -1);
    CHECK(buf[r][1][count * 2] == 3.0f);
  }
  /* a peer's write into such a region fails the remote access check */
  uroce_coll_transport *t0 = coll_mem_tp(f.m, 0), *t1 = coll_mem_tp(f.m, 1);
  uroce_coll_mr src, ring;
  char mine[64] = {0}, theirs[64];
  memset(theirs, 7, sizeof theirs);
  CHECK_EQ(t0->reg_mr_src(t0->ctx, mine, sizeof mine, &src), 0);
  CHECK_EQ(t1->reg_mr(t1->ctx, theirs, sizeof theirs, &ring), 0);
  CHECK_EQ(t1->post_write_imm(t1->ctx, 0, &ring, 0, 64, (uintptr_t)mine,
                              src.rkey, 0, 99),
           0);
  uroce_coll_cqe q = {0};
  while (t1->poll(t1->ctx, &q, 1) == 1 && q.wr_id != 99)
    ; /* the credits' completions come first */
  CHECK(q.wr_id == 99 && q.status != 0);
  CHECK_EQ(mine[0], 0);
  t0->dereg_mr(t0->ctx, &src);
  t1->dereg_mr(t1->ctx, &ring);
  fab_del(&f);
  for (int r = 0; r < n; r++)
    for (int k = 0; k < 3; k++)
      free(buf[r][k]);
}

/* A request that wrote from the caller's buffer completes only after those
 * writes' WRITE_DONEs (the transport may read the buffer until then); with
 * the staging copy it need not wait. Receives into bytes that a write in
 * flight still reads wait for it too (the fabric checks both, for every
 * algorithm, with completions far behind arrivals). And a WRITE_DONE that
 * never comes fails the request by the timeout, naming the peer. */
static void test_gather_completion(void) {
  const uint64_t lag = 400000; /* 400 us of virtual time */
  for (int g = 0; g < 2; g++) {
    coll_mem *m = coll_mem_new(2, 5, 0);
    coll_mem_set_gather(m, g);
    coll_mem_set_done_delay(m, lag);
    uroce_coll_comm *comms[2];
    uroce_coll_config cfg;
    uroce_coll_config_init(&cfg);
    cfg.chunk_bytes = 8192;
    CHECK_EQ(coll_mem_comms(m, &cfg, comms), 0);
    float a[2][2048];
    uroce_coll_req *reqs[2];
    int rc[2];
    for (int r = 0; r < 2; r++) {
      for (int i = 0; i < 2048; i++)
        a[r][i] = (float)(i + r);
      CHECK_EQ(uroce_coll_start(comms[r], UROCE_COLL_ALLGATHER, a[r] + 1024 * r,
                                a[r], 1024, UROCE_COLL_FLOAT32, UROCE_COLL_SUM,
                                0, UROCE_COLL_ALGO_RING, &reqs[r]),
               0);
    }
    uint64_t t0 = coll_mem_now(m);
    CHECK_EQ(coll_mem_run(m, reqs, rc, 1000000000ull), 0);
    uint64_t took = coll_mem_now(m) - t0;
    CHECK(g ? took >= lag : took < lag);
    CHECK(rc[0] == 0 && rc[1] == 0);
    CHECK(a[0][1500] == 1501.0f && a[1][3] == 3.0f);
    CHECK_EQ(coll_mem_writes2(m) > 0, g);
    for (int r = 0; r < 2; r++)
      uroce_coll_comm_del(comms[r]);
    mem_done(m);
  }

  const char *save = gather_min;
  gather_min = "1";
  gather_on = 1;
  for (int n = 2; n <= 5; n++) {
    fab f = fab_new(n, 40 + (uint64_t)n, 2000, 256, 3);
    coll_mem_set_done_delay(f.m, 30000);
    uint64_t seed = 500;
    for (int k = 0; k < NKINDS; k++)
      for (int a = 0; a < kinds[k].nalgo; a++)
        for (int ip = 0; ip < 2; ip++) {
          run_case(&f, kinds[k].kind, UROCE_COLL_INT32,
                   kinds[k].has_op ? UROCE_COLL_SUM : 0, kinds[k].algos[a],
                   1000 + (size_t)n, ip, (int)(seed % (uint64_t)n), seed);
          seed++;
        }
    fab_del(&f);
  }

  coll_mem *m = coll_mem_new(2, 6, 0);
  coll_mem_set_done_delay(m, 10000000000ull); /* never, in effect */
  uroce_coll_comm *comms[2];
  uroce_coll_config cfg;
  uroce_coll_config_init(&cfg);
  cfg.timeout_ns = 50000000;
  CHECK_EQ(make_comms(m, &cfg, comms), 0);
  gather_min = save;
  float x[2][512] = {{0}};
  uroce_coll_req *reqs[2];
  int rc[2];
  for (int r = 0; r < 2; r++)
    CHECK_EQ(uroce_coll_allreduce_start(comms[r], x[r], x[r], 512,
                                        UROCE_COLL_FLOAT32, UROCE_COLL_SUM,
                                        &reqs[r]),
             0);
  CHECK_EQ(coll_mem_run(m, reqs, rc, 1000000000ull), 0);
  for (int r = 0; r < 2; r++) {
    CHECK_EQ(rc[r], UROCE_COLL_ERR_PEER_TIMEOUT);
    CHECK(strstr(uroce_coll_errmsg(comms[r]), "write completions from rank"));
  }
  printf("no WRITE_DONE: %s\n", uroce_coll_errmsg(comms[0]));
  for (int r = 0; r < 2; r++)
    uroce_coll_comm_del(comms[r]);
  coll_mem_del(m); /* its gathered writes never completed */
}

/* The correctness matrix, once per way of sending payloads. */
static void run_matrix(void) {
  T_RUN(test_sweep_small);
  const char *save = gather_min;
  gather_min = NULL; /* 4 KiB chunks: full ones gathered, tails copied */
  T_RUN(test_sweep_large);
  gather_min = save;
  T_RUN(test_auto);
  T_RUN(test_hier);
  T_RUN(test_real_tolerance);
  T_RUN(test_mismatch);
  T_RUN(test_dead_rank);
}

/* A transport may hand the communicator its receive ring (the native
 * binding's is shared memory): the peers' writes land in that memory, and
 * the comm gives it back when it goes. One hook without the other is
 * refused; a hook that gives nothing leaves the comm its own ring. */
static int ring_allocs, ring_frees, ring_bad_free;
static void *ring_given[2];
static size_t ring_len;

static void *ring_hook_alloc(void *ctx, size_t len) {
  (void)ctx;
  void *p = aligned_alloc(64, (len + 63) & ~(size_t)63);
  if (p && ring_allocs < 2) {
    memset(p, 0, len);
    ring_given[ring_allocs++] = p;
    ring_len = len;
  }
  return p;
}

static void ring_hook_free(void *ctx, void *addr, size_t len) {
  (void)ctx;
  if ((addr != ring_given[0] && addr != ring_given[1]) || len != ring_len)
    ring_bad_free++;
  ring_frees++;
  free(addr);
}

static void *ring_hook_none(void *ctx, size_t len) {
  (void)ctx;
  (void)len;
  return NULL;
}

static void test_recv_ring_hook(void) {
  coll_mem *m = coll_mem_new(2, 1, 0);
  uroce_coll_transport t = *coll_mem_tp(m, 0);
  t.alloc_recv_ring = ring_hook_alloc;
  uroce_coll_comm *c = NULL;
  CHECK_EQ(uroce_coll_comm_new(&t, NULL, &c), UROCE_ERR_INVALID_ARGUMENT);
  coll_mem_del(m);
  for (int none = 0; none < 2; none++) {
    ring_allocs = ring_frees = ring_bad_free = 0;
    fab f = {2, coll_mem_new(2, 7, 0), calloc(2, sizeof(void *))};
    for (int r = 0; r < 2; r++) {
      coll_mem_tp(f.m, r)->alloc_recv_ring =
          none ? ring_hook_none : ring_hook_alloc;
      coll_mem_tp(f.m, r)->free_recv_ring = ring_hook_free;
    }
    uroce_coll_config cfg;
    uroce_coll_config_init(&cfg);
    cfg.chunk_bytes = 4096;
    cfg.slots = 2;
    cfg.timeout_ns = 1000000000ull;
    CHECK_EQ(make_comms(f.m, &cfg, f.comms), 0);
    CHECK_EQ(ring_allocs, none ? 0 : 2);
    int before = case_failures;
    run_case(&f, UROCE_COLL_ALLREDUCE, UROCE_COLL_FLOAT32, UROCE_COLL_SUM,
             UROCE_COLL_ALGO_RING, 5000, 0, 0, 11);
    CHECK_EQ(case_failures, before);
    for (int r = 0; r < ring_allocs; r++) { /* chunks landed there */
      size_t nz = 0;
      for (size_t i = 0; i < ring_len; i++)
        nz += ((const char *)ring_given[r])[i] != 0;
      CHECK(nz > 256);
    }
    fab_del(&f);
    CHECK_EQ(ring_frees, none ? 0 : 2);
    CHECK_EQ(ring_bad_free, 0);
  }
}

int main(void) {
  T_RUN(test_connect_checks);
  T_RUN(test_wait_timeout);
  T_RUN(test_env_override);
  /* gather path, every chunk of any size gathered */
  gather_on = 1;
  gather_min = "1";
  gathered_writes = 0;
  run_matrix();
  CHECK(gathered_writes > 0);
  printf("gather pass: %llu gathered writes\n",
         (unsigned long long)gathered_writes);
  /* staging copy */
  gather_on = 0;
  gather_min = NULL;
  gathered_writes = 0;
  run_matrix();
  CHECK_EQ(gathered_writes, 0);
  gather_on = 1;
  T_RUN(test_gather_rights);
  T_RUN(test_gather_completion);
  T_RUN(test_recv_ring_hook);
  printf("%d collective cases, %d failed\n", cases, case_failures);
  return T_DONE();
}
