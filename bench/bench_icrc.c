/* ICRC throughput on 4 KiB RoCEv2 packets next to memcpy on the same
 * packets, measured in the same run. Two working sets: one that stays in
 * cache (256 KiB) and one that does not (64 MiB). Prints the median of
 * several repetitions and the ratio ICRC / memcpy (goal: >= 0.5).
 *
 * Three ICRCs of the same packets: "ICRC" is uroce_frame_icrc, what the
 * stack runs (uroce_crc32 picks the CRC code); "isal" and "vpclmul" cover
 * the masked headers with uroce_icrc and the rest (RETH, payload) with
 * crc32_gzip_refl or uroce_crc32_vpclmul, called directly.
 *
 * And what a staging sender does, which copies each packet and computes
 * its ICRC: "cp+crc" is memcpy, then the ICRC on the copy; "fused" is
 * uroce_crc32_copy (one pass where the CPU has AVX-512 VPCLMULQDQ). Both
 * are checked against the carried ICRC. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <isa-l/crc.h>
#include <time.h>

#include "wire/frame.h"
#include "wire/hdr.h"
#include "util/clock.h"

#define PKT_PAYLOAD 4096
#define REPS 9

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static volatile uint32_t sink;

typedef uint32_t (*crc_fn)(uint32_t crc, const void *buf, size_t len);

static uint32_t crc_isal(uint32_t crc, const void *buf, size_t len) {
  return crc32_gzip_refl(crc, (const unsigned char *)buf, len);
}

/* The ICRC with everything after the BTH by fn; NULL: uroce_frame_icrc. */
static inline uint32_t icrc_by(const struct uroce_frame *f, crc_fn fn) {
  if (!fn)
    return uroce_frame_icrc(f);
  uint32_t crc =
      uroce_icrc(f->l3, f->l3_hlen, f->l3 + f->l3_hlen, f->bth, UROCE_BTH_LEN);
  return fn(crc, f->bth + UROCE_BTH_LEN,
            f->bth_len - UROCE_BTH_LEN - UROCE_ICRC_LEN);
}

/* The ICRC of f computed while copying the frame to dst: memcpy then
 * the ICRC on the copy, or one pass. */
static inline uint32_t icrc_copy(const struct uroce_frame *f, uint8_t *dst,
                                 int fused) {
  size_t hl = (size_t)(f->bth - f->l3) + UROCE_BTH_LEN;
  size_t rest = f->bth_len - UROCE_BTH_LEN - UROCE_ICRC_LEN;
  uint32_t crc =
      uroce_icrc(f->l3, f->l3_hlen, f->l3 + f->l3_hlen, f->bth, UROCE_BTH_LEN);
  if (fused) {
    memcpy(dst, f->l3, hl);
    return uroce_crc32_copy(crc, dst + hl, f->l3 + hl, rest);
  }
  memcpy(dst, f->l3, hl + rest);
  return uroce_crc32(crc, dst + hl, rest);
}

enum { M_ICRC, M_ISAL, M_VPCLMUL, M_MEMCPY, M_CPCRC, M_FUSED, M_COUNT };
static const char *const m_name[M_COUNT] = {"ICRC",   "isal",   "vpclmul",
                                            "memcpy", "cp+crc", "fused"};

static void run(size_t working_set, int have_vpclmul) {
  size_t frame_len = 0;
  size_t n = working_set / PKT_PAYLOAD;
  size_t stride = PKT_PAYLOAD + 128;
  uint8_t *src = aligned_alloc(64, n * stride);
  uint8_t *dst = aligned_alloc(64, n * stride);
  struct uroce_frame_params fp = {
      .ipver = 4, .sport = 0xC000, .dport = UROCE_UDP_PORT};
  uroce_addr_parse("10.0.0.1", fp.src);
  uroce_addr_parse("10.0.0.2", fp.dst);
  struct uroce_frame *frames = calloc(n, sizeof(*frames));
  for (size_t i = 0; i < n; i++) {
    uint8_t *b = src + i * stride;
    struct uroce_hdr_fields h = {
        .opcode = 0x0A, .psn = (uint32_t)i, .dma_len = PKT_PAYLOAD};
    int hl = uroce_hdr_encode(b + UROCE_FRAME_HEADROOM, &h);
    for (size_t j = 0; j < PKT_PAYLOAD; j++)
      b[UROCE_FRAME_HEADROOM + hl + j] = (uint8_t)(i + j);
    size_t len = (size_t)hl + PKT_PAYLOAD + 4;
    int start = uroce_frame_encap(b, UROCE_FRAME_HEADROOM, len, &fp);
    frame_len = UROCE_FRAME_HEADROOM - (size_t)start + len;
    uroce_frame_parse(UROCE_LINK_RAW, b + start, frame_len, &frames[i]);
  }
  memset(dst, 1, n * stride);
  const crc_fn fns[M_COUNT] = {
      [M_ISAL] = crc_isal, [M_VPCLMUL] = uroce_crc32_vpclmul};

  /* Every ICRC must also be right, or the speed means nothing. */
  for (int m = M_ICRC; m < M_COUNT; m++) {
    if ((m == M_VPCLMUL && !have_vpclmul) || m == M_MEMCPY)
      continue;
    for (size_t i = 0; i < n; i++)
      if ((m >= M_CPCRC ? icrc_copy(&frames[i], dst + i * stride, m == M_FUSED)
                        : icrc_by(&frames[i], fns[m])) !=
          uroce_frame_icrc_carried(&frames[i])) {
        fprintf(stderr, "bench_icrc: wrong ICRC (%s) on packet %zu\n",
                m_name[m], i);
        exit(1);
      }
  }

  size_t iters = (size_t)(1.5e9 / (double)(n * frame_len)) + 1;
  double t[M_COUNT][REPS];
  uint32_t acc = 0;
  for (int r = 0; r < REPS; r++) {
    for (int m = 0; m < M_COUNT; m++) {
      if (m == M_VPCLMUL && !have_vpclmul) {
        t[m][r] = 0;
        continue;
      }
      double t0 = mono_s();
      if (m == M_MEMCPY) {
        for (size_t it = 0; it < iters; it++)
          for (size_t i = 0; i < n; i++)
            memcpy(dst + i * stride, frames[i].l3, frame_len);
        acc += dst[(size_t)r * stride];
      } else if (m >= M_CPCRC) {
        for (size_t it = 0; it < iters; it++)
          for (size_t i = 0; i < n; i++)
            acc += icrc_copy(&frames[i], dst + i * stride, m == M_FUSED);
      } else {
        for (size_t it = 0; it < iters; it++)
          for (size_t i = 0; i < n; i++)
            acc += icrc_by(&frames[i], fns[m]);
      }
      t[m][r] = mono_s() - t0;
    }
  }
  sink = acc;
  double bytes = (double)iters * (double)n * (double)frame_len;
  double g[M_COUNT];
  for (int m = 0; m < M_COUNT; m++) {
    qsort(t[m], REPS, sizeof(double), cmp_d);
    g[m] = t[m][REPS / 2] > 0 ? bytes / t[m][REPS / 2] / 1e9 : 0;
  }
  printf("%-7s %5zu pkts x %zu B | ICRC %6.2f GB/s (%5.2f Mpps) | isal %6.2f "
         "| vpclmul ",
         working_set >= (1u << 20) ? "64 MiB" : "256 KiB", n, frame_len,
         g[M_ICRC], g[M_ICRC] * 1e9 / (double)frame_len / 1e6, g[M_ISAL]);
  if (have_vpclmul)
    printf("%6.2f", g[M_VPCLMUL]);
  else
    printf("%6s", "n/a");
  printf(" | memcpy %6.2f GB/s | ICRC/memcpy %.2f | cp+crc %6.2f | fused "
         "%6.2f\n",
         g[M_MEMCPY], g[M_ICRC] / g[M_MEMCPY], g[M_CPCRC], g[M_FUSED]);
  free(frames);
  free(src);
  free(dst);
}

int main(void) {
  int have_vpclmul = uroce_crc32_vpclmul_supported();
  printf("bench_icrc: ICRC vs memcpy on 4 KiB RoCEv2 packets, GB/s, median "
         "of %d runs%s\n",
         REPS, have_vpclmul ? "" : " (no AVX2+VPCLMULQDQ here)");
  run(256u << 10, have_vpclmul);
  run(64u << 20, have_vpclmul);
  printf("goal: ICRC >= 0.5 x memcpy\n");
  return 0;
}
