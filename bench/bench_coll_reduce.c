/* Reduction kernel throughput per type and operation, in GB/s of one input
 * vector (dst op= src reads 2 and writes 1 vector), next to memcpy of the
 * same bytes measured in the same run, for the generic and the AVX2/F16C
 * kernels, in cache and out of cache.
 *
 *   bench_coll_reduce [seconds-per-figure]   (default 0.2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uroce/coll.h"
#include "util/clock.h"

static volatile char sink;

/* bytes per second of f(bytes) over about secs */
static double rate(void (*f)(char *, const char *, size_t, int, int), char *d,
                   const char *s, size_t bytes, int dt, int op, double secs) {
  f(d, s, bytes, dt, op); /* warm */
  long it = 0;
  double t0 = mono_s(), t;
  do {
    for (int k = 0; k < 4; k++)
      f(d, s, bytes, dt, op);
    it += 4;
    t = mono_s() - t0;
  } while (t < secs);
  sink = d[bytes / 2];
  return (double)bytes * (double)it / t;
}

static void do_memcpy(char *d, const char *s, size_t b, int dt, int op) {
  (void)dt;
  (void)op;
  memcpy(d, s, b);
}

static void do_reduce(char *d, const char *s, size_t b, int dt, int op) {
  size_t es = uroce_coll_dtype_size((uroce_coll_dtype)dt);
  uroce_coll_reduce_local(d, s, b / es, (uroce_coll_dtype)dt,
                          (uroce_coll_op)op);
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 0.2;
  size_t sizes[] = {128 * 1024, 32u * 1024 * 1024};
  const char *names[] = {"128KiB (cache)", "32MiB (memory)"};
  char *d = aligned_alloc(64, sizes[1]), *s = aligned_alloc(64, sizes[1]);
  /* small values: sums and products stay finite, no subnormal slow paths */
  for (size_t i = 0; i < sizes[1] / 2; i++) {
    ((uint16_t *)s)[i] = 0x3c00; /* 1.0 in half; a small int otherwise */
    ((uint16_t *)d)[i] = 0x3c00;
  }
  const char *impl = uroce_coll_reduce_impl();
  printf("reduction kernels (GB/s of one input vector; %s available)\n", impl);
  for (int si = 0; si < 2; si++) {
    size_t b = sizes[si];
    double mc = rate(do_memcpy, d, s, b, 0, 0, secs);
    printf("\n%s: memcpy %.2f GB/s\n", names[si], mc / 1e9);
    printf("%-9s %-5s %10s %10s %10s %9s\n", "dtype", "op", "generic", impl,
           "speedup", "/memcpy");
    for (int dt = 0; dt < UROCE_COLL_DTYPE_COUNT; dt++)
      for (int op = 0; op < UROCE_COLL_OP_COUNT; op += 3) {
        uroce_coll_reduce_force_generic(1);
        double g = rate(do_reduce, d, s, b, dt, op, secs);
        uroce_coll_reduce_force_generic(0);
        double v = rate(do_reduce, d, s, b, dt, op, secs);
        printf("%-9s %-5s %10.2f %10.2f %9.2fx %8.2fx\n",
               uroce_coll_dtype_name((uroce_coll_dtype)dt),
               uroce_coll_op_name((uroce_coll_op)op), g / 1e9, v / 1e9, v / g,
               v / mc);
      }
  }
  free(d);
  free(s);
  return 0;
}
