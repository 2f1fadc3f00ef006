/* Reduction kernels: dst[i] = a[i] op b[i], where dst is a or does not
 * overlap it (reduce_local is the case dst == a).
 *
 * The generic kernels are plain loops, cut into blocks of a constant
 * length. gcc's -O2 cost model ("very cheap") leaves them scalar, so the
 * kernels ask for loop vectorisation with the cheap model themselves (VEC
 * below); the build flags stay as they are. The same loops are compiled a
 * second time with target("avx2") for 256-bit vectors; float16 and
 * bfloat16 get hand-written AVX2/F16C kernels that convert 8 lanes at a
 * time. The choice is made once, at first use, from the CPU's feature
 * bits.
 *
 * min and max propagate NaN (IEEE 754-2019 minimum/maximum), sums and
 * products follow IEEE arithmetic; integer sums and products wrap. */
#include <string.h>

#include "coll/coll_int.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#endif

#define BLK 64 /* elements per vectorised block */
#if defined(__clang__)
#define VEC /* clang vectorises these loops at -O2 already */
#else
/* gcc 12 leaves them scalar at -O2 without this. */
#define VEC                                                                    \
  __attribute__((optimize("tree-loop-vectorize", "vect-cost-model=cheap")))
#endif
#define HBLK 256 /* float16/bfloat16 elements converted per block */

/* ---- scalar conversions ------------------------------------------------ */

static inline uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float uroce_coll_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {
    /* zero or subnormal: man * 2^-24, exact in float */
    float v = (float)man * (1.0f / 16777216.0f);
    return u2f(f2u(v) | sign);
  }
  if (exp == 31)
    return u2f(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
  return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t uroce_coll_f32_to_f16(float f) {
  uint32_t x = f2u(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) /* inf or NaN (quiet, top payload bits kept) */
    return sign | 0x7c00 | (x > 0x7f800000u ? 0x200 | ((x >> 13) & 0x3ff) : 0);
  if (x >= 0x477ff000u) /* rounds to 65536 or more */
    return sign | 0x7c00;
  if (x < 0x38800000u) {
    /* below the smallest normal: adding 0.5 rounds to a multiple of 2^-24
     * with the FPU's round-to-nearest-even */
    float v = u2f(x) + 0.5f;
    return sign | (uint16_t)(f2u(v) - f2u(0.5f));
  }
  uint32_t odd = (x >> 13) & 1;
  x += 0xfffu + odd;
  return sign | (uint16_t)((x - (112u << 23)) >> 13);
}

float uroce_coll_bf16_to_f32(uint16_t h) {
  return u2f((uint32_t)h << 16);
}

uint16_t uroce_coll_f32_to_bf16(float f) {
  uint32_t x = f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

/* ---- element operations -------------------------------------------------- */

#define E_SUM(a, b) ((a) + (b))
#define E_PROD(a, b) ((a) * (b))
/* a + b is NaN when either is: the NaN goes through */
#define E_FMIN(a, b)                                                           \
  (((a) != (a) || (b) != (b)) ? (a) + (b) : ((b) < (a) ? (b) : (a)))
#define E_FMAX(a, b)                                                           \
  (((a) != (a) || (b) != (b)) ? (a) + (b) : ((b) > (a) ? (b) : (a)))
#define E_IMIN(a, b) ((b) < (a) ? (b) : (a))
#define E_IMAX(a, b) ((b) > (a) ? (b) : (a))
#define E_ISUM32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define E_IPROD32(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
#define E_ISUM64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define E_IPROD64(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))

#define DEF_K(SUF, ATTR, T, NAME, EXPR)                                        \
  ATTR static void NAME##_##SUF(void *dv, const void *av, const void *sv,      \
                                size_t n) {                                    \
    T *d = (T *)dv;                                                            \
    const T *x = (const T *)av;                                                \
    const T *restrict s = (const T *)sv;                                       \
    size_t i = 0;                                                              \
    for (; i + BLK <= n; i += BLK)                                             \
      for (size_t j = 0; j < BLK; j++) {                                       \
        T a = x[i + j], b = s[i + j];                                          \
        d[i + j] = EXPR(a, b);                                                 \
      }                                                                        \
    for (; i < n; i++) {                                                       \
      T a = x[i], b = s[i];                                                    \
      d[i] = EXPR(a, b);                                                       \
    }                                                                          \
  }

/* float16/bfloat16 generic: widen a block to float, reduce, narrow. */
#define DEF_HK(SUF, ATTR, NAME, TOF, FROMF, EXPR)                              \
  ATTR static void NAME##_##SUF(void *dv, const void *av, const void *sv,      \
                                size_t n) {                                    \
    uint16_t *d = (uint16_t *)dv;                                              \
    const uint16_t *x = (const uint16_t *)av;                                  \
    const uint16_t *restrict s = (const uint16_t *)sv;                         \
    float a[HBLK], b[HBLK];                                                    \
    for (size_t i = 0; i < n; i += HBLK) {                                     \
      size_t m = n - i < HBLK ? n - i : HBLK;                                  \
      for (size_t j = 0; j < m; j++) {                                         \
        a[j] = TOF(x[i + j]);                                                  \
        b[j] = TOF(s[i + j]);                                                  \
      }                                                                        \
      for (size_t j = 0; j < m; j++)                                           \
        a[j] = EXPR(a[j], b[j]);                                               \
      for (size_t j = 0; j < m; j++)                                           \
        d[i + j] = FROMF(a[j]);                                                \
    }                                                                          \
  }

#define DEF_ALL(SUF, ATTR)                                                     \
  DEF_K(SUF, ATTR, float, f32_sum, E_SUM)                                      \
  DEF_K(SUF, ATTR, float, f32_prod, E_PROD)                                    \
  DEF_K(SUF, ATTR, double, f64_sum, E_SUM)                                     \
  DEF_K(SUF, ATTR, double, f64_prod, E_PROD)                                   \
  DEF_K(SUF, ATTR, int32_t, i32_sum, E_ISUM32)                                 \
  DEF_K(SUF, ATTR, int32_t, i32_prod, E_IPROD32)                               \
  DEF_K(SUF, ATTR, int32_t, i32_min, E_IMIN)                                   \
  DEF_K(SUF, ATTR, int32_t, i32_max, E_IMAX)                                   \
  DEF_K(SUF, ATTR, int64_t, i64_sum, E_ISUM64)                                 \
  DEF_K(SUF, ATTR, int64_t, i64_prod, E_IPROD64)                               \
  DEF_K(SUF, ATTR, int64_t, i64_min, E_IMIN)                                   \
  DEF_K(SUF, ATTR, int64_t, i64_max, E_IMAX)

#define GENERIC_ATTR VEC
DEF_ALL(gen, GENERIC_ATTR)
DEF_K(gen, GENERIC_ATTR, float, f32_min, E_FMIN)
DEF_K(gen, GENERIC_ATTR, float, f32_max, E_FMAX)
DEF_K(gen, GENERIC_ATTR, double, f64_min, E_FMIN)
DEF_K(gen, GENERIC_ATTR, double, f64_max, E_FMAX)
DEF_HK(gen, GENERIC_ATTR, f16_sum, uroce_coll_f16_to_f32, uroce_coll_f32_to_f16,
       E_SUM)
DEF_HK(gen, GENERIC_ATTR, f16_prod, uroce_coll_f16_to_f32,
       uroce_coll_f32_to_f16, E_PROD)
DEF_HK(gen, GENERIC_ATTR, f16_min, uroce_coll_f16_to_f32, uroce_coll_f32_to_f16,
       E_FMIN)
DEF_HK(gen, GENERIC_ATTR, f16_max, uroce_coll_f16_to_f32, uroce_coll_f32_to_f16,
       E_FMAX)

/* bfloat16 widening and narrowing are integer shifts that vectorise well */
static inline float bf_to_f(uint16_t h) {
  return u2f((uint32_t)h << 16);
}
static inline uint16_t f_to_bf(float f) {
  uint32_t x = f2u(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1)) >> 16;
  uint32_t q = (x >> 16) | 0x40;
  return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? q : r);
}
DEF_HK(gen, GENERIC_ATTR, bf16_sum, bf_to_f, f_to_bf, E_SUM)
DEF_HK(gen, GENERIC_ATTR, bf16_prod, bf_to_f, f_to_bf, E_PROD)
DEF_HK(gen, GENERIC_ATTR, bf16_min, bf_to_f, f_to_bf, E_FMIN)
DEF_HK(gen, GENERIC_ATTR, bf16_max, bf_to_f, f_to_bf, E_FMAX)

typedef void (*kernel_fn)(void *, const void *, const void *, size_t);

static const kernel_fn
    generic_tab[UROCE_COLL_DTYPE_COUNT][UROCE_COLL_OP_COUNT] = {
        [UROCE_COLL_FLOAT32] = {f32_sum_gen, f32_prod_gen, f32_min_gen,
                                f32_max_gen},
        [UROCE_COLL_FLOAT16] = {f16_sum_gen, f16_prod_gen, f16_min_gen,
                                f16_max_gen},
        [UROCE_COLL_BFLOAT16] = {bf16_sum_gen, bf16_prod_gen, bf16_min_gen,
                                 bf16_max_gen},
        [UROCE_COLL_INT32] = {i32_sum_gen, i32_prod_gen, i32_min_gen,
                              i32_max_gen},
        [UROCE_COLL_INT64] = {i64_sum_gen, i64_prod_gen, i64_min_gen,
                              i64_max_gen},
        [UROCE_COLL_FLOAT64] = {f64_sum_gen, f64_prod_gen, f64_min_gen,
                                f64_max_gen},
};

#ifdef HAVE_X86
#define AVX_ATTR __attribute__((target("avx2,f16c"))) VEC
DEF_ALL(avx, AVX_ATTR)

/* 8 lanes of a op b, NaN-propagating min and max */
#define V_SUM(a, b) _mm256_add_ps(a, b)
#define V_PROD(a, b) _mm256_mul_ps(a, b)
/* vminps returns its second operand when either is NaN, so a NaN in b
 * comes through; a NaN in a is blended back in */
#define V_MIN(a, b)                                                            \
  _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q))
#define V_MAX(a, b)                                                            \
  _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q))

#define DEF_F16_AVX(NAME, VOP, EXPR)                                           \
  AVX_ATTR static void NAME##_avx(void *dv, const void *av, const void *sv,    \
                                  size_t n) {                                  \
    uint16_t *d = (uint16_t *)dv;                                              \
    const uint16_t *x = (const uint16_t *)av;                                  \
    const uint16_t *s = (const uint16_t *)sv;                                  \
    size_t i = 0;                                                              \
    for (; i + 8 <= n; i += 8) {                                               \
      __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));   \
      __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i)));   \
      __m256 r = VOP(a, b);                                                    \
      _mm_storeu_si128((__m128i *)(d + i),                                     \
                       _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));         \
    }                                                                          \
    for (; i < n; i++) {                                                       \
      float a = uroce_coll_f16_to_f32(x[i]), b = uroce_coll_f16_to_f32(s[i]);  \
      d[i] = uroce_coll_f32_to_f16(EXPR(a, b));                                \
    }                                                                          \
  }

AVX_ATTR static inline __m256 bf16x8_load(const uint16_t *p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

AVX_ATTR static inline void bf16x8_store(uint16_t *p, __m256 v) {
  __m256i x = _mm256_castps_si256(v);
  __m256i lsb =
      _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb),
      16);
  __m256i q =
      _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, q, nan);
  /* 8 x 32-bit (each < 0x10000) to 8 x 16-bit */
  __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
  _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(lo, hi));
}

#define DEF_BF16_AVX(NAME, VOP, EXPR)                                          \
  AVX_ATTR static void NAME##_avx(void *dv, const void *av, const void *sv,    \
                                  size_t n) {                                  \
    uint16_t *d = (uint16_t *)dv;                                              \
    const uint16_t *x = (const uint16_t *)av;                                  \
    const uint16_t *s = (const uint16_t *)sv;                                  \
    size_t i = 0;                                                              \
    for (; i + 8 <= n; i += 8)                                                 \
      bf16x8_store(d + i, VOP(bf16x8_load(x + i), bf16x8_load(s + i)));        \
    for (; i < n; i++) {                                                       \
      float a = bf_to_f(x[i]), b = bf_to_f(s[i]);                              \
      d[i] = f_to_bf(EXPR(a, b));                                              \
    }                                                                          \
  }

/* float32/float64 min and max: the NaN-propagating select is not
 * auto-vectorised, so it is written out */
#define V_MIN_PD(a, b)                                                         \
  _mm256_blendv_pd(_mm256_min_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q))
#define V_MAX_PD(a, b)                                                         \
  _mm256_blendv_pd(_mm256_max_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q))
#define DEF_FP_AVX(NAME, T, W, LOAD, STORE, VOP, EXPR)                         \
  AVX_ATTR static void NAME##_avx(void *dv, const void *av, const void *sv,    \
                                  size_t n) {                                  \
    T *d = (T *)dv;                                                            \
    const T *x = (const T *)av;                                                \
    const T *s = (const T *)sv;                                                \
    size_t i = 0;                                                              \
    for (; i + W <= n; i += W)                                                 \
      STORE(d + i, VOP(LOAD(x + i), LOAD(s + i)));                             \
    for (; i < n; i++) {                                                       \
      T a = x[i], b = s[i];                                                    \
      d[i] = EXPR(a, b);                                                       \
    }                                                                          \
  }
DEF_FP_AVX(f32_vmin, float, 8, _mm256_loadu_ps, _mm256_storeu_ps, V_MIN, E_FMIN)
DEF_FP_AVX(f32_vmax, float, 8, _mm256_loadu_ps, _mm256_storeu_ps, V_MAX, E_FMAX)
DEF_FP_AVX(f64_vmin, double, 4, _mm256_loadu_pd, _mm256_storeu_pd, V_MIN_PD,
           E_FMIN)
DEF_FP_AVX(f64_vmax, double, 4, _mm256_loadu_pd, _mm256_storeu_pd, V_MAX_PD,
           E_FMAX)

DEF_F16_AVX(f16_sum, V_SUM, E_SUM)
DEF_F16_AVX(f16_prod, V_PROD, E_PROD)
DEF_F16_AVX(f16_min, V_MIN, E_FMIN)
DEF_F16_AVX(f16_max, V_MAX, E_FMAX)
DEF_BF16_AVX(bf16_sum, V_SUM, E_SUM)
DEF_BF16_AVX(bf16_prod, V_PROD, E_PROD)
DEF_BF16_AVX(bf16_min, V_MIN, E_FMIN)
DEF_BF16_AVX(bf16_max, V_MAX, E_FMAX)

static const kernel_fn avx_tab[UROCE_COLL_DTYPE_COUNT][UROCE_COLL_OP_COUNT] = {
    [UROCE_COLL_FLOAT32] = {f32_sum_avx, f32_prod_avx, f32_vmin_avx,
                            f32_vmax_avx},
    [UROCE_COLL_FLOAT16] = {f16_sum_avx, f16_prod_avx, f16_min_avx,
                            f16_max_avx},
    [UROCE_COLL_BFLOAT16] = {bf16_sum_avx, bf16_prod_avx, bf16_min_avx,
                             bf16_max_avx},
    [UROCE_COLL_INT32] = {i32_sum_avx, i32_prod_avx, i32_min_avx, i32_max_avx},
    [UROCE_COLL_INT64] = {i64_sum_avx, i64_prod_avx, i64_min_avx, i64_max_avx},
    [UROCE_COLL_FLOAT64] = {f64_sum_avx, f64_prod_avx, f64_vmin_avx,
                            f64_vmax_avx},
};
#endif

/* 0: not decided yet, 1: generic, 2: avx2+f16c */
static int impl_sel;
static int force_generic;

static int pick(void) {
  if (impl_sel == 0) {
    int v = 1;
#ifdef HAVE_X86
    /* F16C is read from CPUID leaf 1 (ECX bit 29): clang's
     * __builtin_cpu_supports does not know "f16c". */
    unsigned a, b, c, d;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) &&
        (c & (1u << 29)))
      v = 2;
#endif
    impl_sel = v;
  }
  return force_generic ? 1 : impl_sel;
}

void uroce_coll_reduce_force_generic(int on) {
  force_generic = on != 0;
}

const char *uroce_coll_reduce_impl(void) {
  return pick() == 2 ? "avx2+f16c" : "generic";
}

void coll_reduce3(void *dst, const void *a, const void *b, size_t n,
                  uroce_coll_dtype dt, uroce_coll_op op) {
  if ((unsigned)dt >= UROCE_COLL_DTYPE_COUNT ||
      (unsigned)op >= UROCE_COLL_OP_COUNT || n == 0)
    return;
#ifdef HAVE_X86
  if (pick() == 2) {
    avx_tab[dt][op](dst, a, b, n);
    return;
  }
#else
  (void)pick();
#endif
  generic_tab[dt][op](dst, a, b, n);
}

void uroce_coll_reduce_local(void *dst, const void *src, size_t n,
                             uroce_coll_dtype dt, uroce_coll_op op) {
  coll_reduce3(dst, dst, src, n, dt, op);
}

size_t uroce_coll_dtype_size(uroce_coll_dtype dt) {
  switch (dt) {
  case UROCE_COLL_FLOAT32:
  case UROCE_COLL_INT32:
    return 4;
  case UROCE_COLL_FLOAT16:
  case UROCE_COLL_BFLOAT16:
    return 2;
  case UROCE_COLL_INT64:
  case UROCE_COLL_FLOAT64:
    return 8;
  default:
    return 0;
  }
}

double uroce_coll_load_f64(uroce_coll_dtype dt, const void *buf, size_t i) {
  switch (dt) {
  case UROCE_COLL_FLOAT32:
    return ((const float *)buf)[i];
  case UROCE_COLL_FLOAT16:
    return uroce_coll_f16_to_f32(((const uint16_t *)buf)[i]);
  case UROCE_COLL_BFLOAT16:
    return uroce_coll_bf16_to_f32(((const uint16_t *)buf)[i]);
  case UROCE_COLL_INT32:
    return ((const int32_t *)buf)[i];
  case UROCE_COLL_INT64:
    return (double)((const int64_t *)buf)[i];
  default:
    return ((const double *)buf)[i];
  }
}

void uroce_coll_store_f64(uroce_coll_dtype dt, void *buf, size_t i, double v) {
  switch (dt) {
  case UROCE_COLL_FLOAT32:
    ((float *)buf)[i] = (float)v;
    break;
  case UROCE_COLL_FLOAT16:
    ((uint16_t *)buf)[i] = uroce_coll_f32_to_f16((float)v);
    break;
  case UROCE_COLL_BFLOAT16:
    ((uint16_t *)buf)[i] = uroce_coll_f32_to_bf16((float)v);
    break;
  case UROCE_COLL_INT32:
    ((int32_t *)buf)[i] = (int32_t)v;
    break;
  case UROCE_COLL_INT64:
    ((int64_t *)buf)[i] = (int64_t)v;
    break;
  default:
    ((double *)buf)[i] = v;
    break;
  }
}

double uroce_coll_busbw_factor(uroce_coll_kind kind, int n) {
  if (n <= 0)
    return 0;
  switch (kind) {
  case UROCE_COLL_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case UROCE_COLL_REDUCE_SCATTER:
  case UROCE_COLL_ALLGATHER:
  case UROCE_COLL_ALLTOALL:
    return (double)(n - 1) / n;
  default:
    return 1.0;
  }
}
