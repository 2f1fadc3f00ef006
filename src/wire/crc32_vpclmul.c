/* CRC-32 (zlib's: reflected polynomial 0xEDB88320, pre- and post-inversion)
 * folded 256 bits at a time with VPCLMULQDQ on AVX2, for CPUs that have
 * 256-bit carry-less multiply but no AVX-512 (AMD Zen 3, Intel Alder Lake),
 * where ISA-L falls back to its 128-bit path. The method is the folding of
 * Gopal et al., "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ Instruction" (Intel, 2009), worked out below for this layout.
 *
 * Notation. P(x) = x^32 + ... + 1 is the CRC polynomial (0x104C11DB7 MSB
 * first). A message is a polynomial M(x) over GF(2) whose first bit (bit 0
 * of its first byte: the CRC is reflected) is the highest-degree
 * coefficient. Starting from register R0 (the inverted input crc), the
 * register after L bytes is R = (R0 x^(8L-32) + M(x)) x^32 mod P, so XORing
 * R0 into the first four bytes makes it plain message data.
 *
 * Layout. A 16-byte block loaded little-endian into an xmm register has bit
 * i (i = 0..127) as the coefficient of x^(127-i): its low qword holds the
 * high-degree half H (x^127..x^64), its high qword the low half L.
 * PCLMULQDQ of a qword whose bit i stands for x^(63-i) with a constant
 * whose bit j stands for x^(32-j) gives a product whose bit m stands for
 * x^(95-m); read as a 128-bit block (bit m = x^(127-m)) that is x^32 times
 * the product. So with kfold(n) = x^n mod P bit-reflected into bits 1..32
 * (bit j = coefficient of x^(32-j)), a qword Q times kfold(n) is a block
 * equal to Q x^(n+32) modulo P. (A 32-bit piece c, bit i = x^(31-i),
 * times kfold(n) gives c (x^n mod P) with bit m = x^(63-m).)
 *
 * Folding. A block A that lies D bytes before the block B adds A x^(8D) to
 * what B covers, and A x^(8D) = H x^(8D+64) + L x^(8D) == H kfold(8D+32) +
 * L kfold(8D-32) (mod P): two products of degree < 96, XORed into B, and
 * the message is unchanged mod P. A ymm register holds two blocks and
 * VPCLMULQDQ multiplies each 128-bit lane on its own, so one fold moves two
 * blocks. The main loop folds 8 ymm accumulators 256 bytes on, onto the
 * next 256 bytes; then the accumulators and the whole 32-byte blocks left
 * are folded onto the last such block all at once, each by its own
 * distance (one multiply's latency, not one per block), and its two lanes
 * onto a 16-byte block after it if there is one. A last 1..15 bytes are
 * taken in by splitting the stream (A, then r bytes) as A's first r bytes,
 * a block 16 bytes before the end, and the last 16 bytes of the buffer
 * with A's last 16 - r in front of them. That leaves one block A that ends
 * where the message ends, with M == A (mod P). Under 64 bytes the same is
 * done with 16-byte blocks in xmm registers, and under 16 bytes ISA-L does
 * it all.
 *
 * Reduction. The register is A x^32 mod P. With A = a0 x^96 + a1 x^64 +
 * a2 x^32 + a3 in 32-bit pieces, A x^32 == a0 (x^128 mod P) + a1 (x^96 mod
 * P) + a2 (x^64 mod P) + a3 x^32 =: C, of degree < 64 (bit m = x^(63-m)):
 * three pieces times kfold(128), kfold(96), kfold(64), and a3 moved. Then
 * Barrett: with mu = floor(x^64 / P) and C_hi = floor(C / x^32),
 * q = floor(C_hi mu / x^32) = floor(C / P) exactly (polynomials have no
 * carries), and R = (C + q P) mod x^32; mu and P are bit-reflected over 33
 * bits (bit j = x^(32-j)) so that every product lands with bit m =
 * x^(63-m), q in bits 0..31 and R in bits 32..63.
 *
 * The constants are literals, in uroce_crc32_fold_k[] (frame.h says which
 * power each is), and test_crc32_consts in tests/unit/test_wire.c
 * rederives every one from P by shift-and-reduce. */
#include <isa-l/crc.h>
#include <stdint.h>
#include <string.h>

#include "wire/frame.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* [d] (d = 1..28) folds a block 16 d bytes on: {kfold(128 d + 32),
 * kfold(128 d - 32)}, the constants for its high and low qword, laid out
 * as one xmm. [0] is {kfold(128), kfold(64)} for the final reduction. */
const uint64_t uroce_crc32_fold_k[UROCE_CRC32_FOLD_MAX + 1][2] = {
    {0x140d44a2e, 0x163cd6124}, /*  0: reduction */
    {0x1751997d0, 0x0ccaa009e}, /*  1:  16 bytes */
    {0x0f1da05aa, 0x15a546366}, /*  2:  32 bytes */
    {0x03db1ecdc, 0x174359406}, /*  3:  48 bytes */
    {0x154442bd4, 0x1c6e41596}, /*  4:  64 bytes */
    {0x1c7569e54, 0x0ae0b5394}, /*  5:  80 bytes */
    {0x0df068dc2, 0x18cb44e58}, /*  6:  96 bytes */
    {0x1ea89367e, 0x1d7cfc6ac}, /*  7: 112 bytes */
    {0x1e88ef372, 0x14a7fe880}, /*  8: 128 bytes */
    {0x1fdc60a7c, 0x03f41287a}, /*  9: 144 bytes */
    {0x0e3543be0, 0x14b57d3f0}, /* 10: 160 bytes */
    {0x1816ab61c, 0x10aae2566}, /* 11: 176 bytes */
    {0x1821d8bc0, 0x12e958ac4}, /* 12: 192 bytes */
    {0x1b35adb0e, 0x1e7146aac}, /* 13: 208 bytes */
    {0x19159bb02, 0x125f17dfc}, /* 14: 224 bytes */
    {0x1db06f64c, 0x1c47d2a9c}, /* 15: 240 bytes */
    {0x11542778a, 0x1322d1430}, /* 16: 256 bytes */
    {0x0a749e894, 0x16269a506}, /* 17: 272 bytes */
    {0x1f7228078, 0x1aaa44c18}, /* 18: 288 bytes */
    {0x032b0733c, 0x0ff6f2fc2}, /* 19: 304 bytes */
    {0x00e9bd5cc, 0x115b87256}, /* 20: 320 bytes */
    {0x1ad568056, 0x1c712203a}, /* 21: 336 bytes */
    {0x11e6a95a2, 0x12af2c15a}, /* 22: 352 bytes */
    {0x07eaed122, 0x09b9bdbd0}, /* 23: 368 bytes */
    {0x1f79525b0, 0x0d31343ea}, /* 24: 384 bytes */
    {0x150fc8004, 0x04470ac44}, /* 25: 400 bytes */
    {0x04b700aa8, 0x0eea395c4}, /* 26: 416 bytes */
    {0x13484efdc, 0x0f9d9c7ee}, /* 27: 432 bytes */
    {0x0ad0d2bb2, 0x0cd669a40}, /* 28: 448 bytes */
};
/* floor(x^64 / P) = 0x104D101DF and P = 0x104C11DB7, reflected over 33
 * bits. */
const uint64_t uroce_crc32_barrett_mu = 0x1f7011641;
const uint64_t uroce_crc32_barrett_poly = 0x1db710641;

#ifdef HAVE_X86

/* Byte shuffles for the last partial block: loading 16 bytes at
 * shuf + 16 + r gives indices r..15 then 0x80 (zero) for the last r bytes
 * (the block moved down r bytes); at shuf + r, 0x80 for the first 16 - r
 * bytes then 0..r-1 (the first r bytes moved to the top). */
static const uint8_t shuf[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0,    1,    2,    3,    4,    5,    6,    7,
    8,    9,    10,   11,   12,   13,   14,   15,   0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};

#define TARGET __attribute__((target("avx2,pclmul,vpclmulqdq")))

TARGET static inline __m256i load256(const void *p) {
  return _mm256_loadu_si256((const __m256i *)p);
}

TARGET static inline __m128i load128(const void *p) {
  return _mm_loadu_si128((const __m128i *)p);
}

/* The constants that fold a block 16 d bytes on, for xmm and ymm. */
TARGET static inline __m128i k128(size_t d) {
  return load128(uroce_crc32_fold_k[d]);
}

TARGET static inline __m256i k256(size_t d) {
  return _mm256_broadcastsi128_si256(k128(d));
}

/* Both 128-bit lanes of x, each moved on by the distance k is for. */
TARGET static inline __m256i fold256(__m256i x, __m256i k) {
  return _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00),
                          _mm256_clmulepi64_epi128(x, k, 0x11));
}

TARGET static inline __m128i fold128(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                       _mm_clmulepi64_si128(x, k, 0x11));
}

/* The n (>= 1) 32-byte blocks at p, the first XORed with first, each
 * folded onto the last: all at once, not one after the other, so that
 * what is left after the main loop costs one multiply's latency. */
TARGET static inline __m256i fold_blocks(const uint8_t *p, size_t n,
                                         __m256i first) {
  __m256i y = load256(p + 32 * (n - 1));
  if (n == 1)
    return _mm256_xor_si256(y, first);
  y = _mm256_xor_si256(
      y, fold256(_mm256_xor_si256(load256(p), first), k256(2 * (n - 1))));
  for (size_t j = 1; j + 1 < n; j++)
    y = _mm256_xor_si256(y,
                         fold256(load256(p + 32 * j), k256(2 * (n - 1 - j))));
  return y;
}

/* A x^32 mod P for the 128-bit block A, as the reflected register. */
TARGET static inline uint32_t reduce128(__m128i a) {
  /* Split A into four 32-bit pieces, from the highest degree: A x^32 =
   * a0 x^128 + a1 x^96 + a2 x^64 + a3 x^32, and replace the first three
   * powers by their residues: C, of degree < 64, bit m = x^(63-m). */
  const __m128i lo32 = _mm_set_epi32(0, -1, 0, -1);
  const __m128i k0k2 = k128(0); /* kfold(128), kfold(64) */
  const __m128i k1 = k128(1);   /* high qword: kfold(96) */
  __m128i a02 = _mm_and_si128(a, lo32);
  __m128i c = _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(a02, k0k2, 0x00),
                    _mm_clmulepi64_si128(a02, k0k2, 0x11)),
      _mm_xor_si128(_mm_clmulepi64_si128(_mm_srli_epi64(a, 32), k1, 0x10),
                    _mm_srli_si128(a, 12)));
  /* Barrett: q = floor(C_hi mu / x^32) is the low 32 bits of the product;
   * R = (C + q P) mod x^32 is bits 32..63 of the sum. */
  const __m128i mu_p = _mm_set_epi64x((long long)uroce_crc32_barrett_poly,
                                      (long long)uroce_crc32_barrett_mu);
  __m128i q = _mm_and_si128(
      _mm_clmulepi64_si128(_mm_and_si128(c, lo32), mu_p, 0x00), lo32);
  __m128i r = _mm_xor_si128(c, _mm_clmulepi64_si128(q, mu_p, 0x10));
  return (uint32_t)_mm_extract_epi32(r, 1);
}

TARGET uint32_t uroce_crc32_vpclmul(uint32_t crc, const void *buf, size_t len) {
  const uint8_t *p = buf;
  __m128i a;
  if (len < 16)
    return crc32_gzip_refl(crc, (const unsigned char *)buf, len);
  /* The register starts as ~crc and goes into the first 4 bytes. */
  const __m128i init = _mm_cvtsi32_si128((int)~crc);
  if (len >= 64) {
    const __m256i init256 = _mm256_set_m128i(_mm_setzero_si128(), init);
    __m256i y;
    if (len >= 256) {
      /* 8 accumulators, 256 bytes a round: with 4 the multiplier (the
       * bottleneck) idles part of the time on Zen 3. Written out: an
       * array of them stays in memory at -O2. */
      const __m256i k = k256(16);
      __m256i x0 = _mm256_xor_si256(load256(p), init256);
      __m256i x1 = load256(p + 32), x2 = load256(p + 64);
      __m256i x3 = load256(p + 96), x4 = load256(p + 128);
      __m256i x5 = load256(p + 160), x6 = load256(p + 192);
      __m256i x7 = load256(p + 224);
      p += 256;
      len -= 256;
      while (len >= 256) {
        x0 = _mm256_xor_si256(fold256(x0, k), load256(p));
        x1 = _mm256_xor_si256(fold256(x1, k), load256(p + 32));
        x2 = _mm256_xor_si256(fold256(x2, k), load256(p + 64));
        x3 = _mm256_xor_si256(fold256(x3, k), load256(p + 96));
        x4 = _mm256_xor_si256(fold256(x4, k), load256(p + 128));
        x5 = _mm256_xor_si256(fold256(x5, k), load256(p + 160));
        x6 = _mm256_xor_si256(fold256(x6, k), load256(p + 192));
        x7 = _mm256_xor_si256(fold256(x7, k), load256(p + 224));
        p += 256;
        len -= 256;
      }
      /* The accumulators and the n whole blocks left, all onto the last
       * block at once. */
      size_t n = len / 32, d = 2 * n;
      y = _mm256_xor_si256(
          _mm256_xor_si256(_mm256_xor_si256(fold256(x0, k256(d + 14)),
                                            fold256(x1, k256(d + 12))),
                           _mm256_xor_si256(fold256(x2, k256(d + 10)),
                                            fold256(x3, k256(d + 8)))),
          _mm256_xor_si256(_mm256_xor_si256(fold256(x4, k256(d + 6)),
                                            fold256(x5, k256(d + 4))),
                           fold256(x6, k256(d + 2))));
      if (n) {
        y = _mm256_xor_si256(y, fold256(x7, k256(d)));
        y = _mm256_xor_si256(y, fold_blocks(p, n, _mm256_setzero_si256()));
      } else {
        y = _mm256_xor_si256(y, x7);
      }
      p += 32 * n;
      len -= 32 * n;
    } else {
      size_t n = len / 32;
      y = fold_blocks(p, n, init256);
      p += 32 * n;
      len -= 32 * n;
    }
    /* The low lane onto the high one, or both onto a 16-byte block that
     * follows. */
    __m128i lo = _mm256_castsi256_si128(y);
    __m128i hi = _mm256_extracti128_si256(y, 1);
    if (len >= 16) {
      a = _mm_xor_si128(
          _mm_xor_si128(fold128(lo, k128(2)), fold128(hi, k128(1))),
          load128(p));
      p += 16;
      len -= 16;
    } else {
      a = _mm_xor_si128(fold128(lo, k128(1)), hi);
    }
  } else {
    /* A few blocks of 16 bytes, each folded onto the last at once: ymm
     * work does not pay for itself at this size. */
    size_t n = len / 16;
    a = _mm_xor_si128(load128(p), init);
    if (n > 1) {
      __m128i b = load128(p + 16 * (n - 1));
      for (size_t j = 1; j + 1 < n; j++)
        b = _mm_xor_si128(b, fold128(load128(p + 16 * j), k128(n - 1 - j)));
      a = _mm_xor_si128(fold128(a, k128(n - 1)), b);
    }
    p += 16 * n;
    len -= 16 * n;
  }
  if (len) {
    /* r = len bytes left (1..15). The stream is now A's 16 bytes, then r
     * more: split it as A's first r bytes (a block of value hi, 16 bytes
     * before the end) and the last 16 bytes (A's last 16 - r, then the r
     * new ones, which the load that ends at the end of the buffer holds).
     * The buffer started at least 16 bytes before p. */
    __m128i down = load128(shuf + 16 + len);
    __m128i last =
        _mm_blendv_epi8(_mm_shuffle_epi8(a, down), load128(p + len - 16), down);
    __m128i hi = _mm_shuffle_epi8(a, load128(shuf + len));
    a = _mm_xor_si128(fold128(hi, k128(1)), last);
  }
  return ~reduce128(a);
}

/* ---- Copy and CRC in one pass (AVX-512 VPCLMULQDQ) ----
 * The same folding, 4 zmm accumulators of 4 blocks each, 256 bytes a
 * round, each block stored to dst as it is loaded: a sender that copies
 * a packet and computes its ICRC reads the source once. What is left
 * after the whole rounds (< 256 bytes) is copied and folded on by
 * uroce_crc32. */
#define TARGET512                                                          \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx2,pclmul,vpclmulqdq")))

TARGET512 static inline __m512i fold512(__m512i x, __m512i k) {
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00),
                          _mm512_clmulepi64_epi128(x, k, 0x11));
}

/* A sender's source is often cold (a collective's chunk reduced a while
 * ago): the hardware prefetcher stops at each 4 KiB page and starts over,
 * so lines are asked for this far ahead, on into the bytes that follow
 * (the next packet's, as a rule; a prefetch never faults). 8-rank
 * allreduce, 16-64 MiB, 6 interleaved runs: busbw +3-7% (4096 ahead: the
 * same; 512: half the gain; the same in the reduction kernels: none). */
#define COPY_PREFETCH 2048
TARGET512 static uint32_t crc32_copy512(uint32_t crc, uint8_t *dst,
                                        const uint8_t *src, size_t len) {
  const __m512i k = _mm512_broadcast_i32x4(k128(16)); /* 256 bytes on */
  __m512i x0 = _mm512_loadu_si512(src), x1 = _mm512_loadu_si512(src + 64);
  __m512i x2 = _mm512_loadu_si512(src + 128);
  __m512i x3 = _mm512_loadu_si512(src + 192);
  _mm512_storeu_si512(dst, x0);
  _mm512_storeu_si512(dst + 64, x1);
  _mm512_storeu_si512(dst + 128, x2);
  _mm512_storeu_si512(dst + 192, x3);
  /* The register starts as ~crc and goes into the first 4 bytes. */
  x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)~crc)));
  size_t off = 256;
  for (; off + 256 <= len; off += 256) {
    _mm_prefetch((const char *)src + off + COPY_PREFETCH, _MM_HINT_T0);
    _mm_prefetch((const char *)src + off + COPY_PREFETCH + 64, _MM_HINT_T0);
    _mm_prefetch((const char *)src + off + COPY_PREFETCH + 128, _MM_HINT_T0);
    _mm_prefetch((const char *)src + off + COPY_PREFETCH + 192, _MM_HINT_T0);
    __m512i y0 = _mm512_loadu_si512(src + off);
    __m512i y1 = _mm512_loadu_si512(src + off + 64);
    __m512i y2 = _mm512_loadu_si512(src + off + 128);
    __m512i y3 = _mm512_loadu_si512(src + off + 192);
    _mm512_storeu_si512(dst + off, y0);
    _mm512_storeu_si512(dst + off + 64, y1);
    _mm512_storeu_si512(dst + off + 128, y2);
    _mm512_storeu_si512(dst + off + 192, y3);
    x0 = _mm512_xor_si512(fold512(x0, k), y0);
    x1 = _mm512_xor_si512(fold512(x1, k), y1);
    x2 = _mm512_xor_si512(fold512(x2, k), y2);
    x3 = _mm512_xor_si512(fold512(x3, k), y3);
  }
  /* x0..x2 onto x3 (192, 128, 64 bytes on), then its four blocks onto
   * the last (48, 32, 16 bytes on): one block that ends at off. */
  __m512i z = _mm512_xor_si512(
      _mm512_xor_si512(fold512(x0, _mm512_broadcast_i32x4(k128(12))),
                       fold512(x1, _mm512_broadcast_i32x4(k128(8)))),
      _mm512_xor_si512(fold512(x2, _mm512_broadcast_i32x4(k128(4))), x3));
  __m128i a = _mm512_extracti32x4_epi32(z, 3);
  a = _mm_xor_si128(a, fold128(_mm512_extracti32x4_epi32(z, 0), k128(3)));
  a = _mm_xor_si128(a, fold128(_mm512_extracti32x4_epi32(z, 1), k128(2)));
  a = _mm_xor_si128(a, fold128(_mm512_extracti32x4_epi32(z, 2), k128(1)));
  crc = ~reduce128(a);
  if (off < len) {
    memcpy(dst + off, src + off, len - off);
    crc = uroce_crc32(crc, dst + off, len - off);
  }
  return crc;
}

static int avx512_vpclmul(void) {
  static int ok = -1;
  int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);
  if (v < 0) {
    __builtin_cpu_init();
    v = uroce_crc32_vpclmul_supported() && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq");
    __atomic_store_n(&ok, v, __ATOMIC_RELAXED);
  }
  return v;
}

int uroce_crc32_copy_one_pass(void) {
  return avx512_vpclmul();
}

uint32_t uroce_crc32_copy(uint32_t crc, void *dst, const void *src,
                          size_t len) {
  if (len >= 256 && avx512_vpclmul())
    return crc32_copy512(crc, dst, src, len);
  memcpy(dst, src, len);
  return uroce_crc32(crc, dst, len);
}

int uroce_crc32_vpclmul_supported(void) {
  static int ok = -1;
  int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);
  if (v < 0) {
    __builtin_cpu_init();
    v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
        __builtin_cpu_supports("vpclmulqdq");
    __atomic_store_n(&ok, v, __ATOMIC_RELAXED);
  }
  return v;
}

size_t uroce_crc32_vpclmul_max(void) {
  static size_t max = 1; /* 1: not yet known */
  size_t v = __atomic_load_n(&max, __ATOMIC_RELAXED);
  if (v == 1) {
    /* The CPUs on which ISA-L's dispatcher picks its AVX-512 VPCLMULQDQ
     * fold (crc32_gzip_refl_by16_10, 512 bits a step): there ISA-L is
     * ahead from about 700 B (Zen 4, one call continuing the last:
     * 1 KiB 31 vs 40 ns, 4 KiB 75 vs 149 ns) while this fold stays ahead
     * below (256 B 23 vs 18 ns), where ISA-L has not started folding
     * wide yet. */
    v = !uroce_crc32_vpclmul_supported() ? 0
        : avx512_vpclmul()               ? 1024
                                         : SIZE_MAX;
    __atomic_store_n(&max, v, __ATOMIC_RELAXED);
  }
  return v;
}

#else /* no x86: never supported, and the function is ISA-L's */

uint32_t uroce_crc32_vpclmul(uint32_t crc, const void *buf, size_t len) {
  return crc32_gzip_refl(crc, (const unsigned char *)buf, len);
}

int uroce_crc32_vpclmul_supported(void) {
  return 0;
}

int uroce_crc32_copy_one_pass(void) {
  return 0;
}

uint32_t uroce_crc32_copy(uint32_t crc, void *dst, const void *src,
                          size_t len) {
  memcpy(dst, src, len);
  return uroce_crc32(crc, dst, len);
}

size_t uroce_crc32_vpclmul_max(void) {
  return 0;
}

#endif
