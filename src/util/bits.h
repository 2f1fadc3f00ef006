/* Bit helpers shared by the tables and rings sized in powers of two. */
#ifndef UROCE_UTIL_BITS_H
#define UROCE_UTIL_BITS_H

#include <stdint.h>

/* The least power of two >= n, for 0 < n <= 2^31 (1 for 0). */
static inline uint32_t pow2_at_least(uint32_t n) {
  return n <= 1 ? 1 : 1u << (32 - __builtin_clz(n - 1));
}

#endif
