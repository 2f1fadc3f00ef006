/* splitmix64: the small seeded generator everything here uses where it
 * needs reproducible randomness (QPNs, PSNs, loss patterns, test data, the
 * simulator's per-component streams). */
#ifndef UROCE_UTIL_RNG_H
#define UROCE_UTIL_RNG_H

#include <stdint.h>

static inline uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* The next value as a double in [0, 1): its top 53 bits, so that every
 * value is exact and equally likely. */
static inline double splitmix64_01(uint64_t *s) {
  return (double)(splitmix64(s) >> 11) * 0x1p-53;
}

#endif
