/* uroce coll-bench: collective bandwidth over the real stack, in the
 * manner of nccl-tests. Run one process per rank under a launcher:
 *
 *   uroce launch -n 8 -- uroce coll-bench -b 1K -e 256M -f 4 -o allreduce
 *
 * For every collective, type, reduction and size: out-of-place and
 * in-place time, algbw = size / time and busbw = algbw * factor (allreduce
 * 2(n-1)/n; reduce-scatter, allgather, all-to-all (n-1)/n; broadcast and
 * reduce 1), and with --check the number of wrong elements against a
 * reference computed in float64. Rank 0 prints the table (or JSON). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "args.h"
#include "tool.h"
#include "uroce/coll.h"
#include "util/clock.h"

typedef struct opts {
  size_t minb, maxb, step;
  double factor;
  int check, json, iters, warmup, root, quiet, stats;
  int colls[UROCE_COLL_KIND_COUNT], ncolls;
  int dtypes[UROCE_COLL_DTYPE_COUNT], ndtypes;
  int ops[UROCE_COLL_OP_COUNT], nops;
  uroce_coll_algo algo;
  size_t chunk;
  int slots, progress, busy_poll_us, yield;
  uint64_t timeout_ms;
  /* --plan: sizes with their own warm-up and iteration counts, in order */
  struct {
    size_t bytes;
    int warmup, iters;
  } plan[64];
  int nplan;
} opts;

typedef struct result {
  double time_us, algbw, busbw;
  int64_t wrong; /* -1: not checked */
} result;

typedef struct bench {
  const opts *o;
  uroce_coll_native *nat;
  uroce_coll_comm *comm;
  int rank, size;
  char *sbuf, *rbuf;
  size_t buf_bytes;
  FILE *json;
  int json_rows;
  int64_t total_wrong;
  double bw_sum;
  int bw_n;
} bench;

static const char *kind_names[] = {"allreduce", "reduce_scatter", "allgather",
                                   "broadcast", "reduce",         "alltoall"};
static const char *type_names[] = {"float32", "float16", "bfloat16",
                                   "int32",   "int64",   "float64"};
static const char *op_names[] = {"sum", "prod", "min", "max"};

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: uroce launch -n N -- uroce coll-bench [OPTIONS]\n"
      "Collective bandwidth, nccl-tests style. Rank and size come from the\n"
      "launcher's environment; rank 0 prints the results.\n\n"
      "  -b, --minbytes SIZE   smallest size (default 8; K, M, G suffixes)\n"
      "  -e, --maxbytes SIZE   largest size (default 32M)\n"
      "  -f, --stepfactor F    multiply the size by F (default 2)\n"
      "  -i, --stepbytes SIZE  or add SIZE each time (overrides -f)\n"
      "  -o, --op LIST         allreduce,reduce_scatter,allgather,broadcast,\n"
      "                        reduce,alltoall or all (default allreduce)\n"
      "  -d, --datatype LIST   float32,float16,bfloat16,int32,int64,float64\n"
      "                        or all (default float32)\n"
      "  -r, --redop LIST      sum,prod,min,max or all (default sum)\n"
      "  -R, --root N          root of broadcast and reduce (default 0)\n"
      "  -a, --algo NAME       ring, tree, rhd, pairwise, hier or auto "
      "(default)\n"
      "  -n, --iters N         timed iterations per size (default 20)\n"
      "  -w, --warmup N        untimed iterations first (default 5)\n"
      "  --plan LIST           SIZE:WARMUP:ITERS,... instead of -b/-e/-f/-i/\n"
      "                        -w/-n: each size with its own counts, in one\n"
      "                        run (what bench/coll_bench.sh gives every\n"
      "                        library)\n"
      "  -c, --check           verify every result (#wrong; exit 1 if any)\n"
      "  -J, --json            print JSON instead of the table\n"
      "  --chunk BYTES         payload bytes per RDMA WRITE (default\n"
      "                        61x4096-24 = 249832)\n"
      "  --slots N             staging slots per peer (default 3)\n"
      "  --timeout MS          no-progress timeout of a collective\n"
      "  --progress MODE       inline (default: progress inside the polls,\n"
      "                        fastest when every core runs a rank) or\n"
      "                        thread (a NIC thread per rank)\n"
      "  --busy-poll US        the NIC thread spins this long before it\n"
      "                        sleeps (-1 never; default the device's)\n"
      "  --yield MODE          when a poll finds nothing: auto (default:\n"
      "                        yield the CPU only if this machine runs\n"
      "                        more ranks than it has CPUs), on or off\n"
      "  --no-yield            the same as --yield off\n"
      "  --stats               each rank prints its device's counters\n"
      "Size is the whole vector: allreduce, broadcast and reduce move size\n"
      "bytes; allgather gathers size bytes (size/N per rank); reduce-scatter\n"
      "reduces size bytes to size/N per rank; all-to-all sends size bytes\n"
      "per rank.\n");
}

/* Sizes go through the shared parser (names the bad value); buffers of
 * up to 16 GiB can be asked for. */
#define MAX_BYTES (16ull << 30)
static int parse_size(const char *opt, const char *s, uint64_t lo,
                      size_t *out) {
  uint64_t v;
  if (arg_size("coll-bench", opt, s, lo, MAX_BYTES, &v) < 0)
    return -1;
  *out = (size_t)v;
  return 0;
}

/* "a,b,c" or "all" against a name table; fills idx[], returns the count or
 * -1 for an unknown name. */
static int parse_list(const char *s, const char *const *names, int nnames,
                      int *idx) {
  if (!strcmp(s, "all")) {
    for (int i = 0; i < nnames; i++)
      idx[i] = i;
    return nnames;
  }
  int n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save, *t = strtok_r(buf, ",", &save); t;
       t = strtok_r(NULL, ",", &save)) {
    int k = -1;
    for (int i = 0; i < nnames; i++)
      if (!strcmp(t, names[i]))
        k = i;
    /* a few aliases people type */
    if (k < 0 && !strcmp(t, "float"))
      k = UROCE_COLL_FLOAT32;
    if (k < 0 && !strcmp(t, "half"))
      k = UROCE_COLL_FLOAT16;
    if (k < 0 && !strcmp(t, "double"))
      k = UROCE_COLL_FLOAT64;
    if (k < 0 && !strcmp(t, "reducescatter"))
      k = UROCE_COLL_REDUCE_SCATTER;
    if (k < 0 || n >= nnames)
      return -1;
    idx[n++] = k;
  }
  return n;
}

static int has_redop(int kind) {
  return kind == UROCE_COLL_ALLREDUCE || kind == UROCE_COLL_REDUCE_SCATTER ||
         kind == UROCE_COLL_REDUCE;
}

static int has_root(int kind) {
  return kind == UROCE_COLL_BROADCAST || kind == UROCE_COLL_REDUCE;
}

/* ---- data: exact in every type ------------------------------------------
 *
 * Inputs are small integers; for prod at most one factor 2 (or -1) per
 * element over up to 16 ranks. So every partial result is exact in
 * float16 and bfloat16 as well, whatever order the algorithm reduces in,
 * and the float64 reference must match bit for bit. */
static double value(int r, size_t i, int kind, int op) {
  if (!has_redop(kind))
    return (double)((i * 29 + (size_t)r * 11 + 3) % 251) - 125;
  if (op == UROCE_COLL_PROD) {
    size_t h = (i * 7 + (size_t)r * 3) % 16;
    return h == 0 ? 2 : h == 5 ? -1 : 1;
  }
  return (double)((i * 29 + (size_t)r * 11 + 3) % 9) - 4;
}

static double reduce_ref(int n, size_t i, int kind, int op) {
  double acc = value(0, i, kind, op);
  for (int r = 1; r < n; r++) {
    double v = value(r, i, kind, op);
    switch (op) {
    case UROCE_COLL_SUM:
      acc += v;
      break;
    case UROCE_COLL_PROD:
      acc *= v;
      break;
    case UROCE_COLL_MIN:
      acc = v < acc ? v : acc;
      break;
    default:
      acc = v > acc ? v : acc;
      break;
    }
  }
  return acc;
}

/* Per-rank element counts of one test point. */
typedef struct shape {
  size_t count;      /* the collective's count argument */
  size_t total;      /* elements of the whole vector (printed) */
  size_t send_elems; /* elements in sendbuf */
  size_t recv_elems; /* elements in recvbuf */
} shape;

static shape shape_of(int kind, size_t elems, int n) {
  shape s = {0};
  switch (kind) {
  case UROCE_COLL_REDUCE_SCATTER:
    s.count = elems / (size_t)n;
    s.total = s.send_elems = s.count * (size_t)n;
    s.recv_elems = s.count;
    break;
  case UROCE_COLL_ALLGATHER:
    s.count = elems / (size_t)n;
    s.total = s.recv_elems = s.count * (size_t)n;
    s.send_elems = s.count;
    break;
  case UROCE_COLL_ALLTOALL:
    s.count = elems / (size_t)n;
    s.total = s.send_elems = s.recv_elems = s.count * (size_t)n;
    break;
  default:
    s.count = s.total = s.send_elems = s.recv_elems = elems;
    break;
  }
  return s;
}

/* Where the input and output of a call lie, for in-place or not. */
static void buffers(bench *b, int kind, const shape *s, size_t es, int inplace,
                    char **send, char **recv) {
  *recv = b->rbuf;
  *send = b->sbuf;
  if (!inplace)
    return;
  if (kind == UROCE_COLL_ALLGATHER)
    *send = b->rbuf + (size_t)b->rank * s->count * es;
  else if (kind == UROCE_COLL_REDUCE_SCATTER) {
    *send = b->rbuf;
    *recv = b->rbuf + (size_t)b->rank * s->count * es;
  } else
    *send = b->rbuf;
}

static void keep_alive(const bench *b, size_t i);

/* memset(p, 0x5a, n), the device kept running meanwhile */
static void poison(const bench *b, char *p, size_t n) {
  for (size_t o = 0; o < n; o += 65536) {
    keep_alive(b, 0);
    memset(p + o, 0x5a, n - o < 65536 ? n - o : 65536);
  }
}

static void fill(bench *b, int kind, int dt, int op, const shape *s,
                 char *send) {
  int me = b->rank;
  if (kind == UROCE_COLL_ALLGATHER) {
    for (size_t i = 0; i < s->count; i++) {
      keep_alive(b, i);
      uroce_coll_store_f64((uroce_coll_dtype)dt, send, i,
                           value(me, i, kind, op));
    }
    return;
  }
  for (size_t i = 0; i < s->send_elems; i++) {
    keep_alive(b, i);
    uroce_coll_store_f64((uroce_coll_dtype)dt, send, i, value(me, i, kind, op));
  }
}

/* With inline progress nothing answers the peers while this rank computes:
 * long loops run the device now and then, so that a peer's retransmit
 * timer never takes a busy rank for a dead one. */
static void keep_alive(const bench *b, size_t i) {
  if ((i & 0x3fff) == 0 && b->o->progress == UROCE_PROGRESS_INLINE &&
      uroce_coll_native_device(b->nat))
    uroce_device_progress(uroce_coll_native_device(b->nat));
}

static int64_t verify(bench *b, int kind, int dt, int op, int root,
                      const shape *s, const char *recv) {
  int n = b->size, me = b->rank;
  int64_t wrong = 0;
  switch (kind) {
  case UROCE_COLL_ALLREDUCE:
    for (size_t i = 0; i < s->count; i++) {
      keep_alive(b, i);
      wrong += uroce_coll_load_f64((uroce_coll_dtype)dt, recv, i) !=
               reduce_ref(n, i, kind, op);
    }
    break;
  case UROCE_COLL_REDUCE:
    if (me == root)
      for (size_t i = 0; i < s->count; i++)
        wrong += uroce_coll_load_f64((uroce_coll_dtype)dt, recv, i) !=
                 reduce_ref(n, i, kind, op);
    break;
  case UROCE_COLL_REDUCE_SCATTER:
    for (size_t i = 0; i < s->count; i++) {
      keep_alive(b, i);
      wrong += uroce_coll_load_f64((uroce_coll_dtype)dt, recv, i) !=
               reduce_ref(n, (size_t)me * s->count + i, kind, op);
    }
    break;
  case UROCE_COLL_ALLGATHER:
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < s->count; i++) {
        keep_alive(b, i);
        wrong += uroce_coll_load_f64((uroce_coll_dtype)dt, recv,
                                     (size_t)r * s->count + i) !=
                 value(r, i, kind, op);
      }
    break;
  case UROCE_COLL_BROADCAST:
    for (size_t i = 0; i < s->count; i++) {
      keep_alive(b, i);
      wrong += uroce_coll_load_f64((uroce_coll_dtype)dt, recv, i) !=
               value(root, i, kind, op);
    }
    break;
  default: /* all-to-all: block r comes from rank r's block me */
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < s->count; i++) {
        keep_alive(b, i);
        wrong += uroce_coll_load_f64((uroce_coll_dtype)dt, recv,
                                     (size_t)r * s->count + i) !=
                 value(r, (size_t)me * s->count + i, kind, op);
      }
    break;
  }
  return wrong;
}

static void fail_exit(bench *b, const char *what, int rc) {
  const char *tmsg = uroce_coll_native_errmsg(b->nat);
  fprintf(stderr, "uroce coll-bench: rank %d: %s: %s: %s%s%s\n", b->rank, what,
          uroce_coll_strerror(rc), uroce_coll_errmsg(b->comm),
          tmsg[0] ? "; " : "", tmsg);
  fflush(stderr);
  exit(1);
}

static uroce_coll_algo run_one(bench *b, int kind, const void *send, void *recv,
                               size_t count, int dt, int op, int root) {
  uroce_coll_req *req;
  int rc = uroce_coll_start(b->comm, (uroce_coll_kind)kind, send, recv, count,
                            (uroce_coll_dtype)dt, (uroce_coll_op)op, root,
                            b->o->algo, &req);
  if (rc < 0)
    fail_exit(b, kind_names[kind], rc);
  uroce_coll_algo a = uroce_coll_req_algo(req);
  rc = uroce_coll_wait(req, UINT64_MAX);
  if (rc < 0)
    fail_exit(b, kind_names[kind], rc);
  return a;
}

/* Agree on figures across ranks: the slowest rank's time, the sum of wrong
 * elements. */
static void agree(bench *b, double *t, int64_t *wrong) {
  double tv = *t;
  int64_t wv = *wrong < 0 ? 0 : *wrong;
  run_one(b, UROCE_COLL_ALLREDUCE, &tv, &tv, 1, UROCE_COLL_FLOAT64,
          UROCE_COLL_MAX, 0);
  run_one(b, UROCE_COLL_ALLREDUCE, &wv, &wv, 1, UROCE_COLL_INT64,
          UROCE_COLL_SUM, 0);
  *t = tv;
  if (*wrong >= 0)
    *wrong = wv;
}

static void print_row_part(const result *r) {
  printf("  %9.2f  %7.3f  %7.3f", r->time_us, r->algbw, r->busbw);
  if (r->wrong < 0)
    printf("  %6s", "N/A");
  else
    printf("  %6" PRId64, r->wrong);
}

static void json_part(FILE *f, const char *name, const result *r) {
  fprintf(f,
          "\"%s\": {\"time_us\": %.3f, \"algbw_gbs\": %.9g, "
          "\"busbw_gbs\": %.9g, \"wrong\": %" PRId64 "}",
          name, r->time_us, r->algbw, r->busbw, r->wrong);
}

static void point(bench *b, int kind, int dt, int op, size_t bytes, int warmup,
                  int iters) {
  const opts *o = b->o;
  size_t es = uroce_coll_dtype_size((uroce_coll_dtype)dt);
  shape s = shape_of(kind, bytes / es, b->size);
  int root = has_root(kind) ? o->root : 0;
  result res[2];
  uroce_coll_algo algo = UROCE_COLL_ALGO_AUTO;
  for (int inplace = 0; inplace < 2; inplace++) {
    char *send, *recv;
    buffers(b, kind, &s, es, inplace, &send, &recv);
    int64_t wrong = -1;
    if (o->check) /* stale results must not pass for new ones */
      poison(b, inplace ? b->rbuf : recv,
             (s.send_elems > s.recv_elems ? s.send_elems : s.recv_elems) * es);
    fill(b, kind, dt, op, &s, send);
    if (o->check) {
      algo = run_one(b, kind, send, recv, s.count, dt, op, root);
      wrong = verify(b, kind, dt, op, root, &s, recv);
      if (wrong && !o->quiet)
        fprintf(stderr,
                "uroce coll-bench: rank %d: %s %s %s count %zu %s: %" PRId64
                " wrong\n",
                b->rank, kind_names[kind], type_names[dt], op_names[op],
                s.count, inplace ? "in-place" : "out-of-place", wrong);
    }
    for (int i = 0; i < warmup; i++)
      algo = run_one(b, kind, send, recv, s.count, dt, op, root);
    uint64_t t0 = mono_ns();
    for (int i = 0; i < iters; i++)
      algo = run_one(b, kind, send, recv, s.count, dt, op, root);
    double t = iters ? (double)(mono_ns() - t0) / 1e3 / iters : 0;
    agree(b, &t, &wrong);
    double algbw = t > 0 ? (double)(s.total * es) / (t * 1e3) : 0;
    res[inplace] = (result){
        t, algbw,
        algbw * uroce_coll_busbw_factor((uroce_coll_kind)kind, b->size), wrong};
    if (wrong > 0)
      b->total_wrong += wrong;
  }
  if (b->rank != 0)
    return;
  b->bw_sum += res[0].busbw;
  b->bw_n++;
  const char *redop = has_redop(kind) ? op_names[op] : "none";
  int proot = has_root(kind) ? root : -1;
  if (o->json) {
    fprintf(b->json,
            "%s\n    {\"collective\": \"%s\", \"algo\": \"%s\", \"size\": %zu, "
            "\"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
            "\"root\": %d, \"warmup\": %d, \"iters\": %d, ",
            b->json_rows++ ? "," : "", kind_names[kind],
            uroce_coll_algo_name(algo), s.total * es, s.total, type_names[dt],
            redop, proot, warmup, iters);
    json_part(b->json, "out_of_place", &res[0]);
    fprintf(b->json, ", ");
    json_part(b->json, "in_place", &res[1]);
    fprintf(b->json, "}");
    return;
  }
  printf("%14zu %12zu %9s %6s %5d", s.total * es, s.total, type_names[dt],
         redop, proot);
  print_row_part(&res[0]);
  print_row_part(&res[1]);
  printf("  %s\n", uroce_coll_algo_name(algo));
  fflush(stdout);
}

static void header(const bench *b, int kind) {
  if (b->rank != 0 || b->o->json)
    return;
  printf("#\n# %s, %d ranks, algorithm %s\n#\n", kind_names[kind], b->size,
         uroce_coll_algo_name(b->o->algo));
  printf("# %12s %12s %9s %6s %5s  %37s  %37s\n", "", "", "", "", "",
         "out-of-place", "in-place");
  printf("# %12s %12s %9s %6s %5s  %9s  %7s  %7s  %6s  %9s  %7s  %7s  %6s  "
         "%s\n",
         "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
         "#wrong", "time", "algbw", "busbw", "#wrong", "algo");
  printf("# %12s %12s %9s %6s %5s  %9s  %7s  %7s  %6s  %9s  %7s  %7s  %6s\n",
         "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
         "(us)", "(GB/s)", "(GB/s)", "");
}

/* SIZE:WARMUP:ITERS[,...] into o->plan; no empty entries. Returns 0 or 1
 * (bad). */
static int parse_plan(const char *arg, opts *o) {
  char *copy = strdup(arg);
  int bad = !copy || !*arg;
  o->nplan = 0;
  for (char *e = copy; e && !bad;) {
    char *next = strchr(e, ',');
    if (next)
      *next++ = 0;
    char *c1 = strchr(e, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2 || o->nplan == (int)(sizeof(o->plan) / sizeof(o->plan[0]))) {
      bad = 1;
      break;
    }
    *c1 = *c2 = 0;
    char *end1, *end2;
    long w = strtol(c1 + 1, &end1, 10), n = strtol(c2 + 1, &end2, 10);
    bad = parse_size("--plan", e, 0, &o->plan[o->nplan].bytes) || *end1 ||
          *end2 || end1 == c1 + 1 || end2 == c2 + 1 || w < 0 || n < 0 ||
          w > 1000000 || n > 1000000;
    o->plan[o->nplan].warmup = (int)w;
    o->plan[o->nplan].iters = (int)n;
    o->nplan++;
    e = next;
  }
  free(copy);
  return bad || o->nplan == 0;
}

/* Returns 2 (the exit status) after naming a value that is not one of
 * the known names. */
static int bad_name(const char *opt, const char *val, const char *known) {
  fprintf(stderr, "uroce coll-bench: %s '%s': not one of %s\n", opt, val,
          known);
  return 2;
}

/* The sweep must go upwards and stay a readable table: at most this many
 * sizes (a tiny -i between far-apart -b and -e would run for days). */
#define MAX_SIZES 1000
static int check_sweep(const opts *o, const char *minb_arg,
                       const char *maxb_arg) {
  if (o->nplan)
    return 0;
  if (o->minb > o->maxb) {
    fprintf(stderr,
            "uroce coll-bench: -b %s is larger than -e %s (the sweep goes "
            "from -b up to -e)\n",
            minb_arg, maxb_arg);
    return -1;
  }
  uint64_t n = 0;
  if (o->step) {
    n = (o->maxb - o->minb) / o->step + 1;
  } else {
    size_t last = (size_t)-1;
    for (double sz = (double)o->minb;
         sz <= (double)o->maxb + 0.5 && n <= MAX_SIZES; sz *= o->factor)
      if ((size_t)sz != last) {
        last = (size_t)sz;
        n++;
      }
  }
  if (n > MAX_SIZES) {
    fprintf(stderr,
            "uroce coll-bench: -b %s to -e %s in steps of %s makes more than "
            "%d sizes\n",
            minb_arg, maxb_arg, o->step ? "-i" : "-f", MAX_SIZES);
    return -1;
  }
  return 0;
}

/* Why uroce_coll_env_parse found no usable launcher environment: which
 * launcher's variables are there and what is missing or wrong in them. */
static void explain_env(void) {
  static const struct {
    const char *launcher, *rank, *size;
  } src[] = {
      {"uroce", "UROCE_RANK", "UROCE_SIZE"},
      {"torchrun", "RANK", "WORLD_SIZE"},
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"MPICH/PMI", "PMI_RANK", "PMI_SIZE"},
      {"PMIx", "PMIX_RANK", "PMIX_SIZE"},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
  };
  const char *r = NULL, *sz = NULL;
  size_t i;
  for (i = 0; i < sizeof src / sizeof src[0]; i++) {
    r = getenv(src[i].rank);
    sz = getenv(src[i].size);
    if (r && *r && sz && *sz)
      break;
  }
  if (i == sizeof src / sizeof src[0]) {
    fprintf(stderr,
            "uroce coll-bench: no launcher environment (no rank and size in "
            "RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, PMI_*, PMIX_*, SLURM_*): "
            "run it under 'uroce launch -n N --', torchrun or mpirun\n");
    return;
  }
  int rank, size;
  if (arg_int("coll-bench", src[i].size, sz, 1, 65535, &size) < 0 ||
      arg_int("coll-bench", src[i].rank, r, 0, size - 1, &rank) < 0) {
    fprintf(stderr, "uroce coll-bench: (from the %s environment)\n",
            src[i].launcher);
    return;
  }
  const char *addr = getenv("UROCE_MASTER_ADDR"), *an = "UROCE_MASTER_ADDR";
  if (!addr || !*addr)
    addr = getenv(an = "MASTER_ADDR");
  const char *port = getenv("UROCE_MASTER_PORT"), *pn = "UROCE_MASTER_PORT";
  if (!port || !*port)
    port = getenv(pn = "MASTER_PORT");
  if (!addr || !*addr || !port || !*port) {
    fprintf(stderr,
            "uroce coll-bench: rank %d of %d from the %s environment, but no "
            "rendezvous address: set MASTER_ADDR and MASTER_PORT (or "
            "UROCE_MASTER_ADDR and UROCE_MASTER_PORT) to an address and TCP "
            "port rank 0 can listen on\n",
            rank, size, src[i].launcher);
    return;
  }
  uint16_t p;
  if (arg_port("coll-bench", pn, port, &p) < 0)
    return;
  fprintf(stderr, "uroce coll-bench: %s '%s': too long for an address\n", an,
          addr);
}

int cmd_coll_bench(int argc, char **argv) {
  static const struct option longs[] = {
      {"minbytes", required_argument, 0, 'b'},
      {"maxbytes", required_argument, 0, 'e'},
      {"stepfactor", required_argument, 0, 'f'},
      {"stepbytes", required_argument, 0, 'i'},
      {"op", required_argument, 0, 'o'},
      {"datatype", required_argument, 0, 'd'},
      {"redop", required_argument, 0, 'r'},
      {"root", required_argument, 0, 'R'},
      {"algo", required_argument, 0, 'a'},
      {"iters", required_argument, 0, 'n'},
      {"warmup", required_argument, 0, 'w'},
      {"plan", required_argument, 0, 'p'},
      {"check", no_argument, 0, 'c'},
      {"json", no_argument, 0, 'J'},
      {"chunk", required_argument, 0, 'C'},
      {"slots", required_argument, 0, 'S'},
      {"timeout", required_argument, 0, 'T'},
      {"progress", required_argument, 0, 'P'},
      {"busy-poll", required_argument, 0, 'U'},
      {"no-yield", no_argument, 0, 'Y'},
      {"yield", required_argument, 0, 'y'},
      {"stats", no_argument, 0, 's'},
      {"quiet", no_argument, 0, 'q'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  opts o = {0};
  o.yield = -1;
  o.minb = 8;
  o.maxb = 32u << 20;
  o.factor = 2;
  o.iters = 20;
  o.warmup = 5;
  o.colls[0] = UROCE_COLL_ALLREDUCE;
  o.ncolls = 1;
  o.dtypes[0] = UROCE_COLL_FLOAT32;
  o.ndtypes = 1;
  o.ops[0] = UROCE_COLL_SUM;
  o.nops = 1;
  o.progress = UROCE_PROGRESS_INLINE;
  int c, bad = 0;
  const char *minb_arg = "8", *maxb_arg = "32M";
  uint64_t v;
  while ((c = getopt_long(argc, argv, "b:e:f:i:o:d:r:R:a:n:w:cJqh", longs,
                          NULL)) != -1) {
    switch (c) {
    case 'b':
      if (parse_size("-b", optarg, 1, &o.minb) < 0)
        return 2;
      minb_arg = optarg;
      break;
    case 'e':
      if (parse_size("-e", optarg, 1, &o.maxb) < 0)
        return 2;
      maxb_arg = optarg;
      break;
    case 'f':
      /* from 1.01 up, a sweep from 1 byte to 16 GiB stays under 2,400
       * steps, so counting its sizes below is quick */
      if (arg_double("coll-bench", "-f", optarg, 1.01, 1024, &o.factor) < 0)
        return 2;
      break;
    case 'i':
      if (parse_size("-i", optarg, 1, &o.step) < 0)
        return 2;
      break;
    case 'o':
      o.ncolls = parse_list(optarg, kind_names, UROCE_COLL_KIND_COUNT, o.colls);
      if (o.ncolls <= 0)
        return bad_name("-o", optarg,
                        "allreduce, reduce_scatter, "
                        "allgather, broadcast, reduce, "
                        "alltoall or all");
      break;
    case 'd':
      o.ndtypes =
          parse_list(optarg, type_names, UROCE_COLL_DTYPE_COUNT, o.dtypes);
      if (o.ndtypes <= 0)
        return bad_name("-d", optarg,
                        "float32, float16, bfloat16, int32, "
                        "int64, float64 or all");
      break;
    case 'r':
      o.nops = parse_list(optarg, op_names, UROCE_COLL_OP_COUNT, o.ops);
      if (o.nops <= 0)
        return bad_name("-r", optarg, "sum, prod, min, max or all");
      break;
    case 'R':
      if (arg_int("coll-bench", "--root", optarg, 0, 65535, &o.root) < 0)
        return 2;
      break;
    case 'a': {
      int a = !strcmp(optarg, "auto") ? UROCE_COLL_ALGO_AUTO
                                      : uroce_coll_algo_parse(optarg);
      if (a < 0)
        return bad_name("--algo", optarg, "ring, tree, rhd, pairwise or auto");
      o.algo = (uroce_coll_algo)a;
      break;
    }
    case 'n':
      if (arg_int("coll-bench", "-n", optarg, 1, 1000000, &o.iters) < 0)
        return 2;
      break;
    case 'w':
      if (arg_int("coll-bench", "-w", optarg, 0, 1000000, &o.warmup) < 0)
        return 2;
      break;
    case 'p':
      if (parse_plan(optarg, &o)) {
        fprintf(stderr,
                "uroce coll-bench: bad --plan '%s': want "
                "SIZE:WARMUP:ITERS[,...], at most %zu sizes\n",
                optarg, sizeof(o.plan) / sizeof(o.plan[0]));
        return 2;
      }
      break;
    case 'c':
      o.check = 1;
      break;
    case 'J':
      o.json = 1;
      break;
    case 'C':
      /* the communicator takes 64 bytes .. 1 GiB */
      if (arg_size("coll-bench", "--chunk", optarg, 64, 1u << 30, &v) < 0)
        return 2;
      o.chunk = (size_t)v;
      break;
    case 'S':
      if (arg_int("coll-bench", "--slots", optarg, 1, 64, &o.slots) < 0)
        return 2;
      break;
    case 'T': {
      uint64_t ms;
      if (arg_u64("coll-bench", "--timeout", optarg, 1, 86400000, &ms) < 0)
        return 2;
      o.timeout_ms = ms;
      break;
    }
    case 'P':
      if (!strcmp(optarg, "thread"))
        o.progress = UROCE_PROGRESS_THREAD;
      else if (!strcmp(optarg, "inline"))
        o.progress = UROCE_PROGRESS_INLINE;
      else
        return bad_name("--progress", optarg, "inline or thread");
      break;
    case 'U':
      if (arg_int("coll-bench", "--busy-poll", optarg, -1, 10000000,
                  &o.busy_poll_us) < 0)
        return 2;
      break;
    case 'Y':
      o.yield = 0;
      break;
    case 'y':
      if (!strcmp(optarg, "auto"))
        o.yield = -1;
      else if (!strcmp(optarg, "on"))
        o.yield = 1;
      else if (!strcmp(optarg, "off"))
        o.yield = 0;
      else
        return bad_name("--yield", optarg, "auto, on or off");
      break;
    case 's':
      o.stats = 1;
      break;
    case 'q':
      o.quiet = 1;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      bad = 1;
      break;
    }
  }
  if (o.nplan) { /* the buffers must hold the largest planned size */
    o.minb = o.maxb = 0;
    for (int i = 0; i < o.nplan; i++)
      if (o.plan[i].bytes > o.maxb)
        o.maxb = o.plan[i].bytes;
  }
  if (bad) {
    arg_see_help("coll-bench");
    return 2;
  }
  if (optind != argc) {
    fprintf(stderr, "uroce coll-bench: unexpected argument '%s'\n",
            argv[optind]);
    arg_see_help("coll-bench");
    return 2;
  }
  if (check_sweep(&o, minb_arg, maxb_arg) < 0)
    return 2;

  uroce_coll_env env;
  int rc = uroce_coll_env_parse(NULL, NULL, &env);
  if (rc < 0) {
    explain_env();
    return 2;
  }
  if (o.root < 0 || o.root >= env.size) {
    fprintf(stderr, "uroce coll-bench: --root %d outside 0..%d\n", o.root,
            env.size - 1);
    return 2;
  }
  uroce_coll_config cfg;
  uroce_coll_config_init(&cfg);
  if (o.chunk)
    cfg.chunk_bytes = o.chunk;
  if (o.slots)
    cfg.slots = o.slots;
  if (o.timeout_ms)
    cfg.timeout_ns = o.timeout_ms * 1000000ull;
  uroce_coll_native_attr na;
  uroce_coll_native_attr_init(&na);
  na.progress = o.progress;
  na.busy_poll_us = o.busy_poll_us;
  na.yield = o.yield;

  bench b = {0};
  b.o = &o;
  b.rank = env.rank;
  b.size = env.size;
  b.json = stdout;
  /* Room for the largest point: sizes are rounded down to whole elements
   * (and blocks), so maxb bytes always suffice. Only mapped here: a point
   * touches the bytes it uses (fill, the receives in its warm-up), so in
   * a sweep upwards a rank holds about that size's buffers, as the MPI
   * and Gloo programs of bench/coll_bench.sh do (they allocate per size).
   * Touching the whole 2 x 256 MiB up front kept 4 GiB resident across 8
   * ranks for the whole sweep, which on this host cost the 1 MiB point
   * about 10% (8 ranks, 4 interleaved runs, busbw out of place 0.71
   * against 0.78 untouched; another process holding 4 GiB did much the
   * same in 2 of 3 runs). Pages are kept once touched: giving them back
   * after each point made the next one run on freshly faulted pages,
   * which here are slower for a while (64 MiB, 3 runs: 0.67-0.75 against
   * 0.80-0.86). The loops that touch many pages keep the device running
   * (keep_alive): faulting them in on a crowded host is slow. */
  b.buf_bytes = o.maxb + 64;
  b.sbuf = mmap(NULL, b.buf_bytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  b.rbuf = mmap(NULL, b.buf_bytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (b.sbuf == MAP_FAILED || b.rbuf == MAP_FAILED) {
    fprintf(stderr, "uroce coll-bench: rank %d: no memory for %zu bytes\n",
            b.rank, b.buf_bytes);
    return 1;
  }
  rc = uroce_coll_native_setup(&env, &na, &cfg, 60ull * 1000000000, &b.nat,
                               &b.comm);
  if (rc < 0)
    return 1;

  if (b.rank == 0) {
    int nh, per;
    char hier[64] = "no host hierarchy";
    uroce_coll_comm_hosts(b.comm, &nh, &per);
    if (nh > 1)
      snprintf(hier, sizeof hier, "hierarchy %d hosts x %d ranks", nh, per);
    if (o.json)
      printf("{\"ranks\": %d, \"check\": %s, \"iters\": %d, \"warmup\": %d, "
             "\"progress\": \"%s\", \"reduce_impl\": \"%s\", "
             "\"host_ranks\": %d, \"shm\": \"%s\", \"hosts\": %d, "
             "\"ranks_per_host\": %d, \"yield\": %s, \"results\": [",
             b.size, o.check ? "true" : "false", o.iters, o.warmup,
             o.progress == UROCE_PROGRESS_THREAD ? "thread" : "inline",
             uroce_coll_reduce_impl(), uroce_coll_native_nlocal(b.nat),
             uroce_coll_native_shm_mode(b.nat), nh, per,
             uroce_coll_native_yields(b.nat) ? "true" : "false");
    else
      printf("# uroce coll-bench: %d ranks, %d iterations (%d warm-up), "
             "check %s, progress %s%s, reductions %s, %d ranks on rank 0's "
             "host (shared memory: %s), %s\n",
             b.size, o.iters, o.warmup, o.check ? "on" : "off",
             o.progress == UROCE_PROGRESS_THREAD ? "thread" : "inline",
             uroce_coll_native_yields(b.nat) ? " (yields when idle)" : "",
             uroce_coll_reduce_impl(), uroce_coll_native_nlocal(b.nat),
             uroce_coll_native_shm_mode(b.nat), hier);
  }
  for (int k = 0; k < o.ncolls; k++) {
    int kind = o.colls[k];
    header(&b, kind);
    for (int d = 0; d < o.ndtypes; d++) {
      int nops = has_redop(kind) ? o.nops : 1;
      for (int p = 0; p < nops; p++) {
        int op = has_redop(kind) ? o.ops[p] : UROCE_COLL_SUM;
        for (int i = 0; i < o.nplan; i++)
          point(&b, kind, o.dtypes[d], op, o.plan[i].bytes, o.plan[i].warmup,
                o.plan[i].iters);
        size_t last = (size_t)-1;
        for (double sz = (double)o.minb;
             o.nplan == 0 && sz <= (double)o.maxb + 0.5;
             sz = o.step ? sz + (double)o.step : sz * o.factor) {
          size_t bytes = (size_t)sz;
          if (bytes == last)
            continue;
          last = bytes;
          point(&b, kind, o.dtypes[d], op, bytes, o.warmup, o.iters);
        }
      }
    }
  }
  if (b.rank == 0) {
    if (o.json) {
      printf("\n  ], \"wrong\": %" PRId64 "}\n", b.total_wrong);
    } else {
      printf("# Out of bounds values : %" PRId64 " %s\n", b.total_wrong,
             o.check ? (b.total_wrong ? "FAILED" : "OK") : "(not checked)");
      printf("# Avg bus bandwidth    : %g GB/s\n",
             b.bw_n ? b.bw_sum / b.bw_n : 0.0);
    }
    fflush(stdout);
  }
  /* Nobody closes its endpoint while a peer may still need an ACK from it:
   * a last all-gather over TCP, then tear down. */
  char one = 1, *all = calloc((size_t)b.size, 1);
  rc = all ? uroce_coll_rendezvous(env.master_addr, env.master_port, b.rank,
                                   b.size, &one, 1, all, 60ull * 1000000000)
           : -ENOMEM;
  free(all);
  if (o.stats && uroce_coll_native_device(b.nat)) {
    struct uroce_device_stats st;
    uroce_device_get_stats(uroce_coll_native_device(b.nat), &st);
    fprintf(stderr,
            "rank %d stats: tx_pkts=%" PRIu64 " rx_pkts=%" PRIu64
            " retransmits=%" PRIu64 " timeouts=%" PRIu64 " naks_tx=%" PRIu64
            " rnr_naks_tx=%" PRIu64 " rx_dropped_engine=%" PRIu64
            " tx_eagain=%" PRIu64 " acks_tx=%" PRIu64 " tx_msgs=%" PRIu64
            " tx_gso_calls=%" PRIu64 " rx_gro_segs=%" PRIu64 "\n",
            b.rank, st.tx_pkts, st.rx_pkts, st.retransmits, st.timeouts,
            st.naks_tx, st.rnr_naks_tx, st.rx_dropped_engine, st.tx_eagain,
            st.acks_tx, st.tx_msgs, st.tx_gso_calls, st.rx_gro_segs);
  }
  uroce_coll_comm_del(b.comm);
  uroce_coll_native_del(b.nat);
  if (rc < 0)
    fprintf(stderr, "uroce coll-bench: rank %d: final barrier: %s\n", b.rank,
            uroce_coll_strerror(rc));
  return b.total_wrong ? 1 : rc < 0 ? 1 : 0;
}
