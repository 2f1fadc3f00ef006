/* The monotonic clock (and the wall clock), in nanoseconds, for the
 * parts that own time (the device, the collectives' bootstrap, tests and
 * benchmarks); the engine and the simulator are handed time instead. */
#ifndef UROCE_UTIL_CLOCK_H
#define UROCE_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall-clock time, in nanoseconds: the clock the kernel stamps received
 * packets with (SO_TIMESTAMPNS). */
static inline uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
