#include "perf_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/bytes.h"
#include "util/clock.h"

static int resolve(const char *host, uint16_t port, bool passive,
                   struct addrinfo **res) {
  struct addrinfo hints = {0};
  char ps[8];
  snprintf(ps, sizeof(ps), "%u", port);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  int rv = getaddrinfo(host, ps, &hints, res);
  return rv == 0 ? 0 : -EHOSTUNREACH;
}

int perf_tcp_listen_accept(const char *bind_addr, uint16_t port,
                           int timeout_ms) {
  struct addrinfo *res;
  int rv = resolve(bind_addr, port, true, &res);
  if (rv < 0)
    return rv;
  int lfd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) {
    rv = -errno;
    freeaddrinfo(res);
    return rv;
  }
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(lfd, res->ai_addr, res->ai_addrlen) < 0 || listen(lfd, 1) < 0) {
    rv = -errno;
    freeaddrinfo(res);
    close(lfd);
    return rv;
  }
  freeaddrinfo(res);
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  rv = poll(&p, 1, timeout_ms);
  if (rv <= 0) {
    close(lfd);
    return rv == 0 ? -ETIMEDOUT : -errno;
  }
  int fd = accept4(lfd, 0, 0, SOCK_CLOEXEC);
  rv = fd < 0 ? -errno : fd;
  close(lfd);
  if (fd >= 0)
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return rv;
}

int perf_tcp_connect(const char *host, uint16_t port, int timeout_ms) {
  uint64_t deadline = mono_ns() + (uint64_t)timeout_ms * 1000000u;
  int last = -ECONNREFUSED;
  do {
    struct addrinfo *res;
    int rv = resolve(host, port, false, &res);
    if (rv < 0)
      return rv;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      freeaddrinfo(res);
      return -errno;
    }
    rv = connect(fd, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (rv == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    last = -errno;
    close(fd);
    usleep(50000);
  } while (mono_ns() < deadline);
  return last;
}

int perf_write_all(int fd, const void *buf, size_t n) {
  const uint8_t *p = buf;
  while (n) {
    /* a peer that died must give -EPIPE, not SIGPIPE */
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int perf_read_all(int fd, void *buf, size_t n) {
  uint8_t *p = buf;
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (r == 0)
      return -ECONNRESET;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

#define MAGIC 0x75726F31u /* "uro1" */

int perf_exchange(int fd, const struct perf_qp_info *mine,
                  struct perf_qp_info *theirs, unsigned n) {
  uint8_t b[4 + 4 + 4 + 4 + 8 + 8 + 16];
  for (unsigned i = 0; i < n; i++) {
    put_be32(b, MAGIC);
    put_be32(b + 4, mine[i].qpn);
    put_be32(b + 8, mine[i].psn);
    put_be32(b + 12, mine[i].rkey);
    put_be64(b + 16, mine[i].vaddr);
    put_be64(b + 24, mine[i].size);
    memcpy(b + 32, mine[i].gid, 16);
    int rv = perf_write_all(fd, b, sizeof(b));
    if (rv < 0)
      return rv;
  }
  for (unsigned i = 0; i < n; i++) {
    int rv = perf_read_all(fd, b, sizeof(b));
    if (rv < 0)
      return rv;
    if (get_be32(b) != MAGIC)
      return -EPROTO;
    theirs[i].qpn = get_be32(b + 4) & 0xFFFFFF;
    theirs[i].psn = get_be32(b + 8) & 0xFFFFFF;
    theirs[i].rkey = get_be32(b + 12);
    theirs[i].vaddr = get_be64(b + 16);
    theirs[i].size = get_be64(b + 24);
    memcpy(theirs[i].gid, b + 32, 16);
  }
  return 0;
}

int perf_exchange_text(int fd, const char *mine, char *theirs, size_t cap) {
  uint8_t len[2];
  size_t n = strlen(mine);
  if (n > 65535 || cap == 0)
    return -EINVAL;
  put_be16(len, (uint16_t)n);
  int rv = perf_write_all(fd, len, 2);
  if (rv == 0)
    rv = perf_write_all(fd, mine, n);
  if (rv == 0)
    rv = perf_read_all(fd, len, 2);
  if (rv < 0)
    return rv;
  size_t m = get_be16(len);
  if (m >= cap)
    return -EPROTO;
  rv = perf_read_all(fd, theirs, m);
  theirs[rv == 0 ? m : 0] = 0;
  return rv;
}

int perf_barrier(int fd) {
  uint8_t c = 'B';
  int rv = perf_write_all(fd, &c, 1);
  if (rv < 0)
    return rv;
  rv = perf_read_all(fd, &c, 1);
  if (rv < 0)
    return rv;
  return c == 'B' ? 0 : -EPROTO;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

void perf_lat_compute(uint64_t *s, size_t n, struct perf_lat *o) {
  memset(o, 0, sizeof(*o));
  if (n == 0)
    return;
  qsort(s, n, sizeof(*s), cmp_u64);
  double sum = 0, sq = 0;
  for (size_t i = 0; i < n; i++)
    sum += (double)s[i];
  double avg = sum / (double)n;
  for (size_t i = 0; i < n; i++)
    sq += ((double)s[i] - avg) * ((double)s[i] - avg);
  o->min_us = (double)s[0] / 1e3;
  o->max_us = (double)s[n - 1] / 1e3;
  o->median_us = (double)s[n / 2] / 1e3;
  o->avg_us = avg / 1e3;
  o->stdev_us = sqrt(sq / (double)n) / 1e3;
  o->p99_us = (double)s[(size_t)((double)(n - 1) * 0.99)] / 1e3;
  o->p999_us = (double)s[(size_t)((double)(n - 1) * 0.999)] / 1e3;
}
