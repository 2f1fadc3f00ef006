/* A minimal test harness: CHECK() records a failure with file:line and the
 * failed expression and goes on; T_RUN() runs one test function; T_DONE()
 * prints "N passed, M failed" (the line CI reads) and returns the exit
 * status. Each test file has its own main(). T_ONLY=name in the
 * environment runs only the tests whose function name contains it. */
#ifndef UROCE_TESTS_T_H
#define UROCE_TESTS_T_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

extern int t_checks, t_failures, t_tests, t_tests_failed;

#define CHECK(cond)                                                            \
  do {                                                                         \
    t_checks++;                                                                \
    if (!(cond)) {                                                             \
      t_failures++;                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

#define CHECK_EQ(a, b)                                                         \
  do {                                                                         \
    long long t_a_ = (long long)(a), t_b_ = (long long)(b);                    \
    t_checks++;                                                                \
    if (t_a_ != t_b_) {                                                        \
      t_failures++;                                                            \
      fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld vs %lld)\n",     \
              __FILE__, __LINE__, #a, #b, t_a_, t_b_);                         \
    }                                                                          \
  } while (0)

#define T_RUN(fn)                                                              \
  do {                                                                         \
    const char *t_only_ = getenv("T_ONLY");                                    \
    if (t_only_ && *t_only_ && !strstr(#fn, t_only_))                          \
      break;                                                                   \
    int t_before_ = t_failures;                                                \
    t_tests++;                                                                 \
    fn();                                                                      \
    if (t_failures != t_before_) {                                             \
      t_tests_failed++;                                                        \
      fprintf(stderr, "FAIL %s\n", #fn);                                       \
    }                                                                          \
  } while (0)

static inline int t_done(const char *name) {
  int failed = t_tests_failed;
  if (t_failures && !failed) /* CHECKs that failed outside any T_RUN */
    failed = 1;
  printf("%s: %d checks\n%d passed, %d failed\n", name, t_checks,
         t_tests - t_tests_failed, failed);
  return failed ? 1 : 0;
}
#define T_DONE() t_done(__FILE__)

/* Deterministic PRNG for tests. */
static inline uint64_t t_rand(uint64_t *s) {
  return splitmix64(s);
}

#endif
