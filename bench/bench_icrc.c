/* ICRC throughput on 4 KiB RoCEv2 packets next to memcpy on the same
 * packets, measured in the same run. Two working sets: one that stays in
 * cache (256 KiB) and one that does not (64 MiB). Prints the median of
 * several repetitions and the ratio ICRC / memcpy (goal: >= 0.5). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/frame.h"
#include "wire/hdr.h"

#define PKT_PAYLOAD 4096
#define REPS 9

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static volatile uint32_t sink;

static void run(size_t working_set) {
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

  size_t iters = (size_t)(1.5e9 / (double)(n * frame_len)) + 1;
  double t_crc[REPS], t_cpy[REPS];
  uint32_t acc = 0;
  for (int r = 0; r < REPS; r++) {
    double t0 = now_s();
    for (size_t it = 0; it < iters; it++)
      for (size_t i = 0; i < n; i++)
        acc += uroce_frame_icrc(&frames[i]);
    double t1 = now_s();
    for (size_t it = 0; it < iters; it++)
      for (size_t i = 0; i < n; i++)
        memcpy(dst + i * stride, frames[i].l3, frame_len);
    double t2 = now_s();
    acc += dst[(size_t)r * stride];
    t_crc[r] = t1 - t0;
    t_cpy[r] = t2 - t1;
  }
  sink = acc;
  /* Every ICRC must also be right, or the speed means nothing. */
  for (size_t i = 0; i < n; i++)
    if (uroce_frame_icrc(&frames[i]) != uroce_frame_icrc_carried(&frames[i])) {
      fprintf(stderr, "bench_icrc: wrong ICRC on packet %zu\n", i);
      exit(1);
    }
  qsort(t_crc, REPS, sizeof(double), cmp_d);
  qsort(t_cpy, REPS, sizeof(double), cmp_d);
  double bytes = (double)iters * (double)n * (double)frame_len;
  double g_crc = bytes / t_crc[REPS / 2] / 1e9;
  double g_cpy = bytes / t_cpy[REPS / 2] / 1e9;
  printf("%-10s %6zu pkts x %zu B | ICRC %6.2f GB/s (%5.1f Mpps) | "
         "memcpy %6.2f GB/s | ICRC/memcpy %.2f\n",
         working_set >= (1u << 20) ? "64 MiB" : "256 KiB", n, frame_len, g_crc,
         g_crc * 1e9 / (double)frame_len / 1e6, g_cpy, g_crc / g_cpy);
  free(frames);
  free(src);
  free(dst);
}

int main(void) {
  printf("bench_icrc: ICRC (ISA-L crc32_gzip_refl) vs memcpy on 4 KiB "
         "RoCEv2 packets, median of %d runs\n",
         REPS);
  run(256u << 10);
  run(64u << 20);
  printf("goal: ICRC >= 0.5 x memcpy\n");
  return 0;
}
