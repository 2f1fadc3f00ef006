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

/* The monotonic clock in seconds, for timing a run or a benchmark. */
static inline double mono_s(void) {
  return (double)mono_ns() * 1e-9;
}

/* Wall-clock time, in nanoseconds: the clock the kernel stamps received
 * packets with (SO_TIMESTAMPNS). */
static inline uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
