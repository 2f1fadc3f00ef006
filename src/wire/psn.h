/* 24-bit packet sequence number arithmetic. PSNs live in a circular space
 * of 2^24; "a before b" is decided by the sign of the 24-bit difference
 * shifted into the top of an int32 (the rule rxe uses). */
#ifndef UROCE_WIRE_PSN_H
#define UROCE_WIRE_PSN_H

#include <stdint.h>

#define UROCE_PSN_MASK 0xFFFFFFu

static inline uint32_t uroce_psn_add(uint32_t psn, uint32_t n) {
  return (psn + n) & UROCE_PSN_MASK;
}

/* Signed distance a - b in the 24-bit circle, in [-2^23, 2^23). */
static inline int32_t uroce_psn_diff(uint32_t a, uint32_t b) {
  return (int32_t)((uint32_t)(a - b) << 8) >> 8;
}

/* <0 if a is before b, 0 if equal, >0 if a is after b. */
static inline int uroce_psn_cmp(uint32_t a, uint32_t b) {
  int32_t d = (int32_t)((uint32_t)(a - b) << 8);
  return (d > 0) - (d < 0);
}

#endif
