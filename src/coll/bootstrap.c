/* Bootstrap: who am I (launcher environment) and everyone's endpoint blob
 * (a TCP all-gather through rank 0). Blocking, used once at start-up. */
#include <errno.h>
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

#include "coll/coll_int.h"
#include "util/clock.h"

#define RDV_MAGIC 0x55524456u /* "URDV" */

static const char *env_get(const char *(*fn)(void *, const char *), void *ctx,
                           const char *name) {
  const char *v = fn ? fn(ctx, name) : getenv(name);
  return v && *v ? v : NULL;
}

static int parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

int uroce_coll_env_parse(const char *(*getenv_fn)(void *, const char *),
                         void *ctx, uroce_coll_env *env) {
  /* (rank, size, local rank) variable names per launcher, first match wins */
  static const struct {
    const char *launcher, *rank, *size, *local;
  } src[] = {
      {"uroce", "UROCE_RANK", "UROCE_SIZE", "UROCE_LOCAL_RANK"},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"pmix", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
  };
  if (!env)
    return UROCE_ERR_INVALID_ARGUMENT;
  memset(env, 0, sizeof *env);
  env->local_rank = -1;
  size_t i;
  for (i = 0; i < sizeof src / sizeof src[0]; i++) {
    const char *r = env_get(getenv_fn, ctx, src[i].rank);
    const char *s = env_get(getenv_fn, ctx, src[i].size);
    if (!r || !s)
      continue;
    long rank, size, local;
    if (parse_int(s, 1, 0xffff, &size) || parse_int(r, 0, size - 1, &rank))
      return UROCE_COLL_ERR_BOOTSTRAP;
    env->rank = (int)rank;
    env->size = (int)size;
    env->launcher = src[i].launcher;
    const char *l = env_get(getenv_fn, ctx, src[i].local);
    if (l && parse_int(l, 0, 0xffff, &local) == 0)
      env->local_rank = (int)local;
    break;
  }
  if (i == sizeof src / sizeof src[0])
    return UROCE_COLL_ERR_BOOTSTRAP;
  const char *addr = env_get(getenv_fn, ctx, "UROCE_MASTER_ADDR");
  if (!addr)
    addr = env_get(getenv_fn, ctx, "MASTER_ADDR");
  const char *port = env_get(getenv_fn, ctx, "UROCE_MASTER_PORT");
  if (!port)
    port = env_get(getenv_fn, ctx, "MASTER_PORT");
  long p;
  if (!addr || !port || strlen(addr) >= sizeof env->master_addr ||
      parse_int(port, 1, 65535, &p))
    return UROCE_COLL_ERR_BOOTSTRAP;
  strcpy(env->master_addr, addr);
  env->master_port = (uint16_t)p;
  return 0;
}

/* ---- rendezvous ------------------------------------------------------------
 */

typedef struct rdv_hdr {
  uint32_t magic;
  int32_t rank;
  int32_t size;
  uint32_t len;
} rdv_hdr;

_Static_assert(sizeof(rdv_hdr) == COLL_RDV_HDR_LEN, "rdv_hdr's wire size");

int coll_rdv_hdr_check(const void *buf, int size, size_t len, const int *fds) {
  rdv_hdr h;
  memcpy(&h, buf, sizeof h);
  if (h.magic != RDV_MAGIC)
    return 0;
  if (h.size != size || h.len != len || h.rank <= 0 || h.rank >= size ||
      fds[h.rank] >= 0)
    return UROCE_COLL_ERR_BOOTSTRAP;
  return h.rank;
}

static int wait_fd(int fd, short ev, uint64_t deadline) {
  for (;;) {
    uint64_t now = mono_ns();
    if (now >= deadline)
      return UROCE_COLL_ERR_TIMEOUT;
    struct pollfd pf = {fd, ev, 0};
    int ms = (int)((deadline - now) / 1000000) + 1;
    int rc = poll(&pf, 1, ms);
    if (rc > 0)
      return 0;
    if (rc < 0 && errno != EINTR)
      return -errno;
  }
}

static int io_all(int fd, void *buf, size_t len, int wr, uint64_t deadline) {
  char *p = buf;
  while (len) {
    int rc = wait_fd(fd, wr ? POLLOUT : POLLIN, deadline);
    if (rc < 0)
      return rc;
    ssize_t n = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
    if (n == 0)
      return -ECONNRESET;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return -errno;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int resolve(const char *host, uint16_t port, int passive,
                   struct addrinfo **out) {
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  char ps[8];
  snprintf(ps, sizeof ps, "%u", port);
  return getaddrinfo(host, ps, &hints, out) == 0 ? 0 : UROCE_COLL_ERR_BOOTSTRAP;
}

static int root_side(const char *addr, uint16_t port, int size,
                     const void *blob, size_t len, char *all,
                     uint64_t deadline) {
  struct addrinfo *ai;
  int rc = resolve(addr, port, 1, &ai);
  if (rc < 0)
    return rc;
  int lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) {
    freeaddrinfo(ai);
    return -errno;
  }
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(lfd, 128) < 0) {
    rc = -errno;
    freeaddrinfo(ai);
    close(lfd);
    return rc;
  }
  freeaddrinfo(ai);
  int *fds = malloc((size_t)size * sizeof *fds);
  if (!fds) {
    close(lfd);
    return -ENOMEM;
  }
  for (int i = 0; i < size; i++)
    fds[i] = -1;
  memcpy(all, blob, len);
  for (int got = 1; got < size && rc == 0;) {
    if ((rc = wait_fd(lfd, POLLIN, deadline)) < 0)
      break;
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint8_t hb[COLL_RDV_HDR_LEN];
    int rank = 0;
    if (io_all(fd, hb, sizeof hb, 0, deadline) == 0)
      rank = coll_rdv_hdr_check(hb, size, len, fds);
    if (rank == 0) {
      close(fd); /* a stray connection: ignore it */
      continue;
    }
    if (rank < 0) {
      close(fd);
      rc = rank;
      break;
    }
    rc = io_all(fd, all + (size_t)rank * len, len, 0, deadline);
    fds[rank] = fd;
    got++;
  }
  /* Closed before the table goes out: a peer that starts its next
   * rendezvous on this port at once must be refused (and retry) rather
   * than queue on a listener that goes away. */
  close(lfd);
  lfd = -1;
  for (int i = 1; i < size && rc == 0; i++)
    rc = io_all(fds[i], all, (size_t)size * len, 1, deadline);
  for (int i = 0; i < size; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  free(fds);
  return rc;
}

static int peer_side(const char *addr, uint16_t port, int rank, int size,
                     const void *blob, size_t len, char *all,
                     uint64_t deadline) {
  struct addrinfo *ai;
  int rc = resolve(addr, port, 0, &ai);
  if (rc < 0)
    return rc;
  int fd = -1;
  /* the master may not be listening yet: retry until the deadline */
  for (;;) {
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      rc = -errno;
      break;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
      break;
    close(fd);
    fd = -1;
    if (mono_ns() >= deadline) {
      rc = UROCE_COLL_ERR_TIMEOUT;
      break;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  freeaddrinfo(ai);
  if (fd < 0)
    return rc;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  rdv_hdr h = {RDV_MAGIC, rank, size, (uint32_t)len};
  rc = io_all(fd, &h, sizeof h, 1, deadline);
  if (rc == 0)
    rc = io_all(fd, (void *)blob, len, 1, deadline);
  if (rc == 0) {
    rc = io_all(fd, all, (size_t)size * len, 0, deadline);
    if (rc == -ECONNRESET)
      rc = UROCE_COLL_ERR_BOOTSTRAP; /* the master refused us */
  }
  close(fd);
  return rc;
}

int uroce_coll_rendezvous(const char *master_addr, uint16_t port, int rank,
                          int size, const void *blob, size_t len, void *all,
                          uint64_t timeout_ns) {
  if (!master_addr || size < 1 || rank < 0 || rank >= size || !all ||
      (len && !blob) || len > 0xffffffffu)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (size == 1) {
    memcpy(all, blob, len);
    return 0;
  }
  uint64_t deadline = mono_ns() + timeout_ns;
  if (rank == 0)
    return root_side(master_addr, port, size, blob, len, all, deadline);
  return peer_side(master_addr, port, rank, size, blob, len, all, deadline);
}
