/* Pieces of `uroce perf` that do not touch the data path: the TCP side
 * channel that exchanges queue-pair information (as perftest does), and
 * latency/bandwidth statistics printed the way perftest prints them. */
#ifndef UROCE_TOOLS_PERF_UTIL_H
#define UROCE_TOOLS_PERF_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What each side tells the other about one QP. */
struct perf_qp_info {
  uint32_t qpn;
  uint32_t psn;
  uint32_t rkey;
  uint64_t vaddr;
  uint64_t size;
  uint8_t gid[16];
};

/* Server: listens on port (all addresses) and accepts one client.
 * Client: connects to host:port, retrying for up to timeout_ms (the
 * server may still be starting). Return a connected fd or -errno. */
int perf_tcp_listen_accept(const char *bind_addr, uint16_t port,
                           int timeout_ms);
int perf_tcp_connect(const char *host, uint16_t port, int timeout_ms);

/* Sends n infos and receives n from the peer (both sides call it).
 * Returns 0 or -errno / -EPROTO for a malformed message. */
int perf_exchange(int fd, const struct perf_qp_info *mine,
                  struct perf_qp_info *theirs, unsigned n);
/* Sends a short text and receives the peer's (at most cap - 1 bytes).
 * Returns 0 or -errno / -EPROTO. */
int perf_exchange_text(int fd, const char *mine, char *theirs, size_t cap);
/* Write or read exactly n bytes. Return 0 or -errno; -ECONNRESET when the
 * peer closed the connection, -EPIPE when it is gone. */
int perf_write_all(int fd, const void *buf, size_t n);
int perf_read_all(int fd, void *buf, size_t n);
/* A one-byte barrier: both sides call it; returns 0 or -errno. */
int perf_barrier(int fd);

/* Latency statistics over n samples in ns (sorted in place). */
struct perf_lat {
  double min_us, max_us, median_us, avg_us, stdev_us, p99_us, p999_us;
};
void perf_lat_compute(uint64_t *samples_ns, size_t n, struct perf_lat *out);

#endif
