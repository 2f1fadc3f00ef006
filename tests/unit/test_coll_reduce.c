/* Reduction kernels and float16/bfloat16 conversions: every float16 value,
 * rounding to nearest even checked against double arithmetic, IEEE special
 * values, and the AVX2/F16C kernels bit-identical to the generic ones for
 * every type, operation and length. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "uroce/coll.h"

static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* float -> half by exhaustive search over the candidates: the nearest
 * representable value, ties to the even significand */
static uint16_t ref_f16(float f) {
  if (f != f)
    return 0x7e00;
  double x = fabs((double)f);
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (x >= 65520.0)
    return sign | 0x7c00;
  uint16_t best = 0;
  double bd = INFINITY;
  /* binary search the monotone magnitudes 0..0x7bff */
  uint16_t lo = 0, hi = 0x7bff;
  while (hi - lo > 1) {
    uint16_t mid = (uint16_t)((lo + hi) / 2);
    if ((double)uroce_coll_f16_to_f32(mid) <= x)
      lo = mid;
    else
      hi = mid;
  }
  for (uint16_t c = lo; c <= hi; c++) {
    double d = fabs((double)uroce_coll_f16_to_f32(c) - x);
    if (d < bd || (d == bd && !(c & 1))) {
      bd = d;
      best = c;
    }
  }
  return sign | best;
}

static void test_f16_roundtrip(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = uroce_coll_f16_to_f32((uint16_t)h);
    uint16_t back = uroce_coll_f32_to_f16(f);
    int nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan) {
      bad += f == f; /* stays NaN */
      bad += (back & 0x7c00) != 0x7c00 || !(back & 0x3ff);
    } else {
      bad += back != h;
    }
  }
  CHECK_EQ(bad, 0);
  CHECK(uroce_coll_f16_to_f32(0x3c00) == 1.0f);
  CHECK(uroce_coll_f16_to_f32(0x0001) == 0x1p-24f);
  CHECK(uroce_coll_f16_to_f32(0x7bff) == 65504.0f);
  CHECK(isinf(uroce_coll_f16_to_f32(0xfc00)));
}

static void test_f16_rounding(void) {
  uint64_t s = 9;
  int bad = 0;
  for (int i = 0; i < 200000; i++) {
    uint64_t r = t_rand(&s);
    /* magnitudes around the half range, subnormals included */
    float f =
        ldexpf((float)(r & 0xffffff) / 16777216.0f, (int)((r >> 24) % 44) - 27);
    if (r >> 63)
      f = -f;
    if (uroce_coll_f32_to_f16(f) != ref_f16(f))
      bad++;
    /* exact ties */
    uint16_t h = (uint16_t)((r >> 32) % 0x7bff);
    float mid = (float)(((double)uroce_coll_f16_to_f32(h) +
                         (double)uroce_coll_f16_to_f32((uint16_t)(h + 1))) /
                        2);
    if (uroce_coll_f32_to_f16(mid) != ref_f16(mid))
      bad++;
  }
  CHECK_EQ(bad, 0);
  CHECK_EQ(uroce_coll_f32_to_f16(65519.0f), 0x7bff);
  CHECK_EQ(uroce_coll_f32_to_f16(65520.0f), 0x7c00);
  CHECK_EQ(uroce_coll_f32_to_f16(INFINITY), 0x7c00);
  CHECK_EQ(uroce_coll_f32_to_f16(-0.0f), 0x8000);
  CHECK_EQ(uroce_coll_f32_to_f16(0x1p-25f), 0);   /* tie to even: 0 */
  CHECK_EQ(uroce_coll_f32_to_f16(0x1.8p-24f), 2); /* tie to even: 2 */
}

static void test_bf16(void) {
  CHECK_EQ(uroce_coll_f32_to_bf16(1.0f), 0x3f80);
  /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even is 1 */
  CHECK_EQ(uroce_coll_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  CHECK_EQ(uroce_coll_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  CHECK_EQ(uroce_coll_f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);
  CHECK_EQ(uroce_coll_f32_to_bf16(INFINITY), 0x7f80);
  uint16_t n = uroce_coll_f32_to_bf16(u2f(0x7f800001u)); /* low-bit NaN */
  CHECK((n & 0x7f80) == 0x7f80 && (n & 0x7f));
  CHECK_EQ(uroce_coll_f32_to_bf16(u2f(0x7f7fffffu)), 0x7f80); /* max -> inf */
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = uroce_coll_bf16_to_f32((uint16_t)h);
    if (f == f && uroce_coll_f32_to_bf16(f) != h)
      bad++;
  }
  CHECK_EQ(bad, 0);
}

static void fill(uroce_coll_dtype dt, void *b, size_t n, uint64_t *s,
                 int specials) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = t_rand(s);
    double v = (double)(int64_t)(r % 2001) / 16.0 - 62.5;
    if (specials && r % 37 == 0)
      v = (r >> 8) % 3 == 0 ? NAN : (r >> 8) % 3 == 1 ? INFINITY : -INFINITY;
    switch (dt) {
    case UROCE_COLL_FLOAT32:
      ((float *)b)[i] = (float)v;
      break;
    case UROCE_COLL_FLOAT16:
      ((uint16_t *)b)[i] = uroce_coll_f32_to_f16((float)v);
      break;
    case UROCE_COLL_BFLOAT16:
      ((uint16_t *)b)[i] = uroce_coll_f32_to_bf16((float)v);
      break;
    case UROCE_COLL_INT32:
      ((int32_t *)b)[i] = (int32_t)(r >> 1);
      break;
    case UROCE_COLL_INT64:
      ((int64_t *)b)[i] = (int64_t)r;
      break;
    default:
      ((double *)b)[i] = v;
    }
  }
}

/* NaNs compare by class, not by payload */
static int same(uroce_coll_dtype dt, const void *a, const void *b, size_t n) {
  size_t es = uroce_coll_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    const char *x = (const char *)a + i * es, *y = (const char *)b + i * es;
    if (!memcmp(x, y, es))
      continue;
    if (dt == UROCE_COLL_FLOAT32) {
      float p, q;
      memcpy(&p, x, 4);
      memcpy(&q, y, 4);
      if (p != p && q != q)
        continue;
    } else if (dt == UROCE_COLL_FLOAT64) {
      double p, q;
      memcpy(&p, x, 8);
      memcpy(&q, y, 8);
      if (p != p && q != q)
        continue;
    } else if (dt == UROCE_COLL_FLOAT16 || dt == UROCE_COLL_BFLOAT16) {
      uint16_t p, q;
      memcpy(&p, x, 2);
      memcpy(&q, y, 2);
      uint16_t e = dt == UROCE_COLL_FLOAT16 ? 0x7c00 : 0x7f80;
      uint16_t m = dt == UROCE_COLL_FLOAT16 ? 0x3ff : 0x7f;
      if ((p & e) == e && (p & m) && (q & e) == e && (q & m))
        continue;
    }
    return 0;
  }
  return 1;
}

/* the dispatched kernels equal the generic ones, and the generic ones equal
 * a scalar reference in float/double */
static void test_kernels_agree(void) {
  size_t lens[] = {0, 1, 7, 8, 63, 64, 65, 255, 256, 257, 1000, 4099};
  uint64_t s = 5;
  char *a = malloc(4099 * 8), *b = malloc(4099 * 8), *g = malloc(4099 * 8),
       *v = malloc(4099 * 8);
  int bad = 0;
  for (int dt = 0; dt < UROCE_COLL_DTYPE_COUNT; dt++)
    for (int op = 0; op < UROCE_COLL_OP_COUNT; op++)
      for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t n = lens[li], es = uroce_coll_dtype_size((uroce_coll_dtype)dt);
        fill((uroce_coll_dtype)dt, a, n, &s, 1);
        fill((uroce_coll_dtype)dt, b, n, &s, 1);
        memcpy(g, a, n * es);
        memcpy(v, a, n * es);
        uroce_coll_reduce_force_generic(1);
        uroce_coll_reduce_local(g, b, n, (uroce_coll_dtype)dt,
                                (uroce_coll_op)op);
        uroce_coll_reduce_force_generic(0);
        uroce_coll_reduce_local(v, b, n, (uroce_coll_dtype)dt,
                                (uroce_coll_op)op);
        if (!same((uroce_coll_dtype)dt, g, v, n)) {
          fprintf(stderr, "%s %s n=%zu: kernels disagree\n",
                  uroce_coll_dtype_name((uroce_coll_dtype)dt),
                  uroce_coll_op_name((uroce_coll_op)op), n);
          bad++;
        }
        /* scalar reference for the float types */
        for (size_t i = 0; i < n && dt == UROCE_COLL_FLOAT32; i++) {
          float x = ((float *)a)[i], y = ((float *)b)[i], r;
          if (op == UROCE_COLL_SUM)
            r = x + y;
          else if (op == UROCE_COLL_PROD)
            r = x * y;
          else if (x != x || y != y)
            r = NAN;
          else
            r = op == UROCE_COLL_MIN ? fminf(x, y) : fmaxf(x, y);
          if (!same(UROCE_COLL_FLOAT32, &r, (float *)g + i, 1))
            bad++;
        }
      }
  CHECK_EQ(bad, 0);
  free(a);
  free(b);
  free(g);
  free(v);
}

static void test_specials(void) {
  float d[4] = {NAN, 1.0f, INFINITY, -0.0f},
        s[4] = {1.0f, NAN, -INFINITY, 0.0f};
  float d2[4];
  memcpy(d2, d, sizeof d);
  uroce_coll_reduce_local(d, s, 4, UROCE_COLL_FLOAT32, UROCE_COLL_MIN);
  CHECK(d[0] != d[0] && d[1] != d[1]);
  CHECK(d[2] == -INFINITY);
  uroce_coll_reduce_local(d2, s, 4, UROCE_COLL_FLOAT32, UROCE_COLL_SUM);
  CHECK(d2[2] != d2[2]); /* inf + -inf */
  uint16_t h[9], hs[9];
  for (int i = 0; i < 9; i++) {
    h[i] = uroce_coll_f32_to_f16(60000.0f);
    hs[i] = uroce_coll_f32_to_f16(10000.0f);
  }
  uroce_coll_reduce_local(h, hs, 9, UROCE_COLL_FLOAT16, UROCE_COLL_SUM);
  for (int i = 0; i < 9; i++)
    CHECK_EQ(h[i], 0x7c00); /* overflow to inf, in both kernel paths */
  int32_t w[3] = {INT32_MAX, 5, -7}, ws[3] = {1, -9, 3};
  uroce_coll_reduce_local(w, ws, 3, UROCE_COLL_INT32, UROCE_COLL_SUM);
  CHECK_EQ(w[0], INT32_MIN); /* wraps */
  uroce_coll_reduce_local(w, ws, 3, UROCE_COLL_INT32, UROCE_COLL_MAX);
  CHECK_EQ(w[1], -4);
  printf("reduction kernels: %s\n", uroce_coll_reduce_impl());
  CHECK_EQ(uroce_coll_dtype_size(UROCE_COLL_BFLOAT16), 2);
  CHECK_EQ(uroce_coll_dtype_size((uroce_coll_dtype)77), 0);
}

int main(void) {
  T_RUN(test_f16_roundtrip);
  T_RUN(test_f16_rounding);
  T_RUN(test_bf16);
  T_RUN(test_kernels_agree);
  T_RUN(test_specials);
  return T_DONE();
}
