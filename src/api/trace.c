/* The device's trace: the engine's events as JSON lines in a file
 * (docs/transport.md "Trace"), one per event, named by the device's
 * address and the process, timed in CLOCK_MONOTONIC microseconds so that
 * the lines of two processes on one host merge by time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/internal.h"
#include "util/clock.h"

static void trace_line(void *ctx, const struct uroce_trace_ev *ev) {
  struct uroce_device *dev = ctx;
  /* The clock now, not the engine's: a verbs call (a QP's modify) runs
   * at the time of the engine's last packet or timer. */
  char line[512];
  int n =
      uroce_eng_trace_line(ev, mono_ns(), dev->trace_who, line, sizeof line);
  if (n > 0) /* (the longest event is far shorter) */
    jsonl_put(dev->trace, line, (size_t)n);
}

/* Stops the engine's calls first, then writes out and closes. */
static int trace_stop(struct uroce_device *dev) {
  if (!dev->trace)
    return 0;
  if (dev->eng)
    uroce_eng_set_trace(dev->eng, 0, 0);
  int e = jsonl_close(dev->trace);
  dev->trace = 0;
  if (e < 0)
    fprintf(stderr, "uroce: the trace: %s (events lost)\n", strerror(-e));
  return e;
}

static int trace_start(struct uroce_device *dev, const char *path) {
  struct jsonl *j;
  int e = jsonl_open(&j, path, false);
  if (e < 0)
    return e;
  trace_stop(dev);
  char addr[64];
  uroce_addr_str(0, dev->gid, addr, sizeof addr);
  snprintf(dev->trace_who, sizeof dev->trace_who,
           "\"dev\": \"%s\", \"pid\": %ld", addr, (long)getpid());
  dev->trace = j;
  uroce_eng_set_trace(dev->eng, trace_line, dev);
  return 0;
}

int uroce_device_trace(struct uroce_device *dev, const char *path) {
  if (!dev)
    return UROCE_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&dev->lock);
  int e = path ? trace_start(dev, path) : trace_stop(dev);
  pthread_mutex_unlock(&dev->lock);
  return e;
}

int dev_trace_env(struct uroce_device *dev) {
  const char *path = getenv("UROCE_TRACE");
  if (!path || !*path)
    return 0;
  int e = trace_start(dev, path);
  if (e < 0)
    fprintf(stderr, "uroce: UROCE_TRACE=%s: %s\n", path, strerror(-e));
  return e;
}

void dev_trace_close(struct uroce_device *dev) {
  trace_stop(dev);
}
