/* The collectives' shared-memory path: writes with immediate between ranks
 * of the same host, without the network.
 *
 * Every rank maps one segment (POSIX shm) per host peer it receives from:
 * its own, which holds one channel per local sender. A channel is a
 * single-producer single-consumer queue of write descriptors {remote
 * address, length, immediate} plus, for the copy path, a byte ring.
 *
 * A write moves its bytes one of three ways:
 *  - map: the receiver's receive ring is a shared segment too
 *    (coll_shm_ring_alloc), which the sender maps at connect and copies
 *    into with ordinary or streaming stores, whichever its copies to that
 *    peer have measured cheaper, then a descriptor;
 *  - CMA (process_vm_writev), where that ring is private: straight from
 *    the sender's pieces (the slot
 *    header and the caller's buffer, the gather path) into the receiver's
 *    staging slot, one copy by the kernel, then a descriptor;
 *  - copy, where the kernel refuses CMA (ptrace permission, seccomp): the
 *    sender copies the pieces into the channel's byte ring, and the
 *    receiver's poll copies them to their address (checked against its
 *    registered regions) before it reports the arrival.
 * Either way the bytes are in place before the RECV_IMM is seen (release
 * on the descriptor count, acquire on its read), as the engine requires.
 *
 * The sender's WRITE_DONE is queued when the write is posted: the bytes
 * have been copied by then. A local peer that exits is seen through a
 * pidfd (checked every 20 ms) and becomes, once what it wrote has been
 * read and a short grace has passed, an error completion that names it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "coll/coll_int.h"
#include "util/clock.h"

#define SHM_MAGIC 0x55534d31u /* "USM1" */
#define NENT 512u             /* descriptors per channel, a power of 2 */
#define DATA_BYTES (4u << 20) /* copy path: byte ring per channel */
#define LIVE_CHECK_NS 20000000ull
/* A peer seen gone is reported this much later: an ABORT that a third rank
 * sent before it (over RoCEv2, slower than a pidfd) names the rank that
 * failed first. */
#define DEAD_GRACE_NS 300000000ull

typedef struct shm_ent {
  uint64_t raddr;
  uint64_t dend; /* copy path: the byte ring's position after the data */
  uint32_t imm;
  uint32_t len;
  uint32_t flags; /* ENT_COPY: the bytes are in the byte ring, ending at dend */
  uint32_t pad;
} shm_ent;
#define ENT_COPY 1u

typedef struct shm_chan {
  _Atomic uint64_t head; /* descriptors posted (the sender's) */
  char pad0[56];
  _Atomic uint64_t tail;  /* descriptors consumed (the receiver's) */
  _Atomic uint64_t dtail; /* byte ring: consumed up to */
  char pad1[48];
  uint64_t dhead; /* byte ring: written up to (only the sender uses it) */
  char pad2[56];
  shm_ent ent[NENT];
} shm_chan;

#define CHAN_BYTES ((sizeof(shm_chan) + 4095) & ~(size_t)4095)
#define SEG_HDR 4096u

typedef struct seg_hdr {
  uint32_t magic;
  int32_t rank;
  int32_t nlocal;
  int32_t pid;
  uint64_t ring_addr; /* the receive ring in shared memory, if any: */
  uint64_t ring_len;  /* its address in the owner, its length, */
  char ring_name[48]; /* and its POSIX shm name */
} seg_hdr;

/* Host blob (the first rendezvous) and segment blob (the second). */
typedef struct host_blob {
  uint32_t magic;
  int32_t rank;
  int32_t pid;
  uint32_t on;
  uint64_t ns[5]; /* net, ipc, pid, mnt namespaces; uts */
  char boot_id[40];
} host_blob;
_Static_assert(sizeof(host_blob) <= COLL_SHM_HOST_BLOB, "host blob size");

typedef struct seg_blob {
  uint32_t magic;
  int32_t rank;
  uint64_t hdr_addr; /* the segment header's address in the owner */
  char name[48];
} seg_blob;
_Static_assert(sizeof(seg_blob) <= COLL_SHM_SEG_BLOB, "segment blob size");

typedef struct region {
  uintptr_t lo, hi;
} region;

/* Map path: what the last COST_WIN timed copies into one peer's ring
 * cost each way, in picoseconds per byte (0: none yet). */
#define COST_WIN 8
typedef struct copy_cost {
  uint32_t ps[2][COST_WIN]; /* COPY_PLAIN, COPY_STREAM */
  uint32_t pos[2];
  uint32_t n; /* copies timed */
} copy_cost;
enum { COPY_PLAIN, COPY_STREAM };

typedef struct done_ent {
  uint64_t wr_id;
  int peer;
} done_ent;

struct coll_shm {
  int rank, size, nlocal, on, cma_ok;
  int stream;        /* map path: -1 measure, or always COPY_PLAIN/STREAM */
  copy_cost *cost;   /* by local index */
  int *lidx;         /* rank -> local index, or -1 */
  int *lrank;        /* local index -> rank */
  int *pid;          /* by local index */
  int *pidfd;        /* by local index, -1 if none */
  uint8_t *cma;      /* by local index: CMA works to that peer */
  uint8_t *dead;     /* 1: gone, not reported yet; 2: reported */
  uint64_t *dead_at; /* when it was seen gone */
  char name[48];
  char *seg; /* own segment */
  size_t seg_len;
  char **peer_seg; /* by local index: the peer's segment (NULL for own) */
  int unlinked;
  char *ring; /* own receive ring, when it is in shared memory */
  size_t ring_len;
  char ring_name[48];
  int ring_unlinked;
  char **peer_ring;    /* by local index: the peer's ring, mapped here */
  uint64_t *ring_addr; /* by local index: its address in the peer */
  size_t *peer_ring_len;
  char mode[24];
  region *reg;
  int nreg, reg_cap;
  done_ent *done;
  size_t done_head, done_n, done_cap;
  int rr; /* round robin start over senders */
  uint64_t live_at;
  char errmsg[192];
};

static void set_err(coll_shm *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_err(coll_shm *s, const char *fmt, ...) {
  if (s->errmsg[0])
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
  va_end(ap);
}

static uint64_t ns_ino(const char *what) {
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/self/ns/%s", what);
  return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The switch name is set to 0 or off. */
static int env_off(const char *name) {
  const char *e = getenv(name);
  return e && (!strcmp(e, "0") || !strcasecmp(e, "off"));
}

int coll_shm_enabled(void) {
  return !env_off("UROCE_COLL_SHM");
}

void coll_shm_host_blob(int rank, void *blob) {
  host_blob h;
  memset(&h, 0, sizeof h);
  h.magic = SHM_MAGIC;
  h.rank = rank;
  h.pid = (int32_t)getpid();
  h.on = (uint32_t)coll_shm_enabled();
  static const char *ns[5] = {"net", "ipc", "pid", "mnt", "uts"};
  for (int i = 0; i < 5; i++)
    h.ns[i] = ns_ino(ns[i]);
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, h.boot_id, sizeof h.boot_id - 1);
    (void)n;
    close(fd);
  }
  memset((char *)blob, 0, COLL_SHM_HOST_BLOB);
  memcpy(blob, &h, sizeof h);
}

/* Both ranks have shared memory on and the same kernel boot and
 * namespaces. */
static int same_host(const host_blob *a, const host_blob *b) {
  return a->on && b->on && a->boot_id[0] &&
         !memcmp(a->ns, b->ns, sizeof a->ns) &&
         !memcmp(a->boot_id, b->boot_id, sizeof a->boot_id);
}

int coll_shm_hosts(const void *blobs, int size, int rank, uint8_t *local) {
  host_blob me;
  memcpy(&me, (const char *)blobs + (size_t)rank * COLL_SHM_HOST_BLOB,
         sizeof me);
  int n = 0;
  for (int r = 0; r < size; r++) {
    host_blob h;
    memcpy(&h, (const char *)blobs + (size_t)r * COLL_SHM_HOST_BLOB, sizeof h);
    if (h.magic != SHM_MAGIC || h.rank != r)
      return UROCE_COLL_ERR_MISMATCH;
    local[r] = r == rank || same_host(&me, &h);
    n += local[r];
  }
  return n;
}

int coll_shm_host_ids(const void *blobs, int size, int *host) {
  int *rep = malloc((size_t)size * sizeof *rep), nrep = 0;
  if (!rep)
    return -ENOMEM;
  for (int r = 0; r < size; r++) {
    host_blob h;
    memcpy(&h, (const char *)blobs + (size_t)r * COLL_SHM_HOST_BLOB, sizeof h);
    if (h.magic != SHM_MAGIC || h.rank != r) {
      free(rep);
      return UROCE_COLL_ERR_MISMATCH;
    }
    host[r] = r;
    for (int i = 0; i < nrep && host[r] == r; i++) {
      host_blob q;
      memcpy(&q, (const char *)blobs + (size_t)rep[i] * COLL_SHM_HOST_BLOB,
             sizeof q);
      if (same_host(&h, &q))
        host[r] = rep[i];
    }
    if (host[r] == r)
      rep[nrep++] = r;
  }
  free(rep);
  return 0;
}

int coll_shm_machine_ranks(const void *blobs, int size, int rank) {
  host_blob me;
  memcpy(&me, (const char *)blobs + (size_t)rank * COLL_SHM_HOST_BLOB,
         sizeof me);
  if (!me.boot_id[0])
    return size;
  int n = 0;
  for (int r = 0; r < size; r++) {
    host_blob h;
    memcpy(&h, (const char *)blobs + (size_t)r * COLL_SHM_HOST_BLOB, sizeof h);
    n += !memcmp(h.boot_id, me.boot_id, sizeof me.boot_id);
  }
  return n;
}

void coll_shm_del(coll_shm *s) {
  if (!s)
    return;
  if (s->peer_seg)
    for (int i = 0; i < s->nlocal; i++)
      if (s->peer_seg[i])
        munmap(s->peer_seg[i], s->seg_len);
  if (s->pidfd)
    for (int i = 0; i < s->nlocal; i++)
      if (s->pidfd[i] >= 0)
        close(s->pidfd[i]);
  if (s->peer_ring)
    for (int i = 0; i < s->nlocal; i++)
      if (s->peer_ring[i])
        munmap(s->peer_ring[i], s->peer_ring_len[i]);
  coll_shm_ring_free(s, s->ring, s->ring_len);
  if (s->seg)
    munmap(s->seg, s->seg_len);
  if (s->name[0] && !s->unlinked)
    shm_unlink(s->name);
  free(s->lidx);
  free(s->lrank);
  free(s->pid);
  free(s->pidfd);
  free(s->cma);
  free(s->dead);
  free(s->dead_at);
  free(s->peer_seg);
  free(s->peer_ring);
  free(s->ring_addr);
  free(s->peer_ring_len);
  free(s->cost);
  free(s->reg);
  free(s->done);
  free(s);
}

static void shm_name(char *name, size_t n) {
  static _Atomic unsigned seq;
  snprintf(name, n, "/uroce-coll.%d.%u.%llx", (int)getpid(),
           atomic_fetch_add(&seq, 1), (unsigned long long)mono_ns());
}

/* A new segment of len bytes (zeroed), mapped; with reserve every page
 * is allocated now. NULL (errno set, nothing left behind) on failure. */
static void *seg_create(const char *name, size_t len, int reserve) {
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return NULL;
  void *p = MAP_FAILED;
  int rc = ftruncate(fd, (off_t)len) < 0 ? errno : 0;
  if (!rc && reserve)
    rc = posix_fallocate(fd, 0, (off_t)len);
  if (!rc) {
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    rc = p == MAP_FAILED ? errno : 0;
  }
  close(fd);
  if (rc) {
    shm_unlink(name);
    errno = rc;
    return NULL;
  }
  return p;
}

/* A peer's segment, which must be len bytes long (EINVAL otherwise). */
static void *seg_map(const char *name, size_t len) {
  int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0)
    return NULL;
  struct stat st;
  void *p = MAP_FAILED;
  int rc = EINVAL;
  if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == len) {
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    rc = errno;
  }
  close(fd);
  if (p == MAP_FAILED) {
    errno = rc;
    return NULL;
  }
  return p;
}

void *coll_shm_ring_alloc(coll_shm *s, size_t len) {
  if (!s || !s->on || s->ring || !len || env_off("UROCE_COLL_SHM_RING"))
    return NULL;
  char name[48];
  shm_name(name, sizeof name);
  /* Every page reserved now: a full /dev/shm (a container's is often 64
   * MB) is a ring of the communicator's own instead of a SIGBUS later, on
   * the first write that needs a page. */
  void *p = seg_create(name, len, 1);
  if (!p)
    return NULL;
  s->ring = p;
  s->ring_len = len;
  memcpy(s->ring_name, name, sizeof name);
  s->ring_unlinked = 0;
  seg_hdr *h = (seg_hdr *)s->seg;
  h->ring_addr = (uint64_t)(uintptr_t)p;
  h->ring_len = len;
  memcpy(h->ring_name, name, sizeof name);
  return p;
}

void coll_shm_ring_free(coll_shm *s, void *addr, size_t len) {
  if (!s || !addr || addr != s->ring)
    return;
  munmap(addr, len);
  if (!s->ring_unlinked)
    shm_unlink(s->ring_name);
  s->ring = NULL;
  s->ring_len = 0;
  seg_hdr *h = (seg_hdr *)s->seg;
  h->ring_addr = h->ring_len = 0;
  h->ring_name[0] = 0;
}

int coll_shm_new(int rank, int size, const uint8_t *local,
                 const void *host_blobs, coll_shm **out) {
  coll_shm *s = calloc(1, sizeof *s);
  if (!s)
    return -ENOMEM;
  s->rank = rank;
  s->size = size;
  s->lidx = malloc((size_t)size * sizeof *s->lidx);
  s->lrank = malloc((size_t)size * sizeof *s->lrank);
  s->pid = calloc((size_t)size, sizeof *s->pid);
  s->pidfd = malloc((size_t)size * sizeof *s->pidfd);
  s->cma = calloc((size_t)size, 1);
  s->dead = calloc((size_t)size, 1);
  s->dead_at = calloc((size_t)size, sizeof *s->dead_at);
  s->peer_seg = calloc((size_t)size, sizeof *s->peer_seg);
  s->peer_ring = calloc((size_t)size, sizeof *s->peer_ring);
  s->ring_addr = calloc((size_t)size, sizeof *s->ring_addr);
  s->peer_ring_len = calloc((size_t)size, sizeof *s->peer_ring_len);
  s->cost = calloc((size_t)size, sizeof *s->cost);
  if (!s->lidx || !s->lrank || !s->pid || !s->pidfd || !s->cma || !s->dead ||
      !s->dead_at || !s->peer_seg || !s->peer_ring || !s->ring_addr ||
      !s->peer_ring_len || !s->cost) {
    coll_shm_del(s);
    return -ENOMEM;
  }
  for (int r = 0; r < size; r++) {
    s->pidfd[r] = -1;
    s->lidx[r] = -1;
    if (local[r]) {
      host_blob h;
      memcpy(&h, (const char *)host_blobs + (size_t)r * COLL_SHM_HOST_BLOB,
             sizeof h);
      s->lidx[r] = s->nlocal;
      s->pid[s->nlocal] = h.pid;
      s->lrank[s->nlocal++] = r;
    }
  }
  s->on = s->nlocal > 1;
  if (!s->on) {
    *out = s;
    return 0;
  }
  s->seg_len = SEG_HDR + (size_t)s->nlocal * (CHAN_BYTES + DATA_BYTES);
  shm_name(s->name, sizeof s->name);
  s->seg = seg_create(s->name, s->seg_len, 0); /* sparse */
  if (!s->seg) {
    int rc = -errno;
    fprintf(stderr, "uroce coll: rank %d: shared memory segment: %s\n", rank,
            strerror(-rc));
    s->name[0] = 0; /* gone already */
    coll_shm_del(s);
    return rc;
  }
  seg_hdr *h = (seg_hdr *)s->seg;
  h->rank = rank;
  h->nlocal = s->nlocal;
  h->pid = (int32_t)getpid();
  h->magic = SHM_MAGIC;
  *out = s;
  return 0;
}

int coll_shm_on(const coll_shm *s) {
  return s && s->on;
}

int coll_shm_is_local(const coll_shm *s, int peer) {
  return s && s->on && peer >= 0 && peer < s->size && s->lidx[peer] >= 0 &&
         peer != s->rank;
}

int coll_shm_nlocal(const coll_shm *s) {
  return s ? s->nlocal : 1;
}

const char *coll_shm_mode(const coll_shm *s) {
  return s && s->on && s->mode[0] ? s->mode : "off";
}

/* Once connected: how bytes go to the host peers, "+"-joined. */
static void set_mode(coll_shm *s) {
  int map = 0, cma = 0, copy = 0;
  for (int i = 0; i < s->nlocal; i++)
    if (s->lrank[i] != s->rank)
      s->peer_ring[i] ? map++ : s->cma[i] ? cma++ : copy++;
  snprintf(s->mode, sizeof s->mode, "%s%s%s%s%s", map ? "map" : "",
           map && (cma || copy) ? "+" : "", cma ? "cma" : "",
           cma && copy ? "+" : "", copy ? "copy" : "");
}

const char *coll_shm_errmsg(const coll_shm *s) {
  return s ? s->errmsg : "";
}

void coll_shm_seg_blob(const coll_shm *s, void *blob) {
  seg_blob b;
  memset(&b, 0, sizeof b);
  b.magic = SHM_MAGIC;
  b.rank = s->rank;
  b.hdr_addr = (uint64_t)(uintptr_t)s->seg;
  memcpy(b.name, s->name, sizeof b.name);
  memset(blob, 0, COLL_SHM_SEG_BLOB);
  memcpy(blob, &b, sizeof b);
}

/* Does the kernel let this process write into peer i (CMA)? Read the
 * peer's segment header through CMA and compare it with the mapping. */
static int cma_probe(coll_shm *s, int i, uint64_t hdr_addr) {
  if (env_off("UROCE_COLL_CMA"))
    return 0;
  seg_hdr got;
  struct iovec l = {&got, sizeof got};
  struct iovec r = {(void *)(uintptr_t)hdr_addr, sizeof got};
  if (process_vm_readv(s->pid[i], &l, 1, &r, 1, 0) != (ssize_t)sizeof got)
    return 0;
  return !memcmp(&got, s->peer_seg[i], sizeof got);
}

/* Map peer i's receive ring where it put it in shared memory; where that
 * fails, writes to it take CMA or the copy path. */
static void map_ring(coll_shm *s, int i, const seg_hdr *h) {
  char name[sizeof h->ring_name];
  memcpy(name, h->ring_name, sizeof name);
  name[sizeof name - 1] = 0;
  if (!h->ring_len || name[0] != '/' || env_off("UROCE_COLL_SHM_RING"))
    return;
  char *p = seg_map(name, h->ring_len);
  if (!p)
    return;
  s->peer_ring[i] = p;
  s->ring_addr[i] = h->ring_addr;
  s->peer_ring_len[i] = h->ring_len;
}

int coll_shm_connect(coll_shm *s, const void *seg_blobs) {
  if (!s->on)
    return 0;
  for (int i = 0; i < s->nlocal; i++) {
    int r = s->lrank[i];
    if (r == s->rank)
      continue;
    seg_blob b;
    memcpy(&b, (const char *)seg_blobs + (size_t)r * COLL_SHM_SEG_BLOB,
           sizeof b);
    b.name[sizeof b.name - 1] = 0;
    if (b.magic != SHM_MAGIC || b.rank != r || b.name[0] != '/') {
      set_err(s, "rank %d: shared memory blob of rank %d is malformed", s->rank,
              r);
      return UROCE_COLL_ERR_MISMATCH;
    }
    char *p = seg_map(b.name, s->seg_len);
    if (!p) {
      int err = errno;
      set_err(s, "rank %d: mapping rank %d's segment %s: %s", s->rank, r,
              b.name,
              err == EINVAL ? "not the size this job's segments have"
                            : strerror(err));
      return err == EINVAL ? UROCE_COLL_ERR_MISMATCH : -err;
    }
    s->peer_seg[i] = p;
    seg_hdr h;
    memcpy(&h, p, sizeof h);
    if (h.magic != SHM_MAGIC || h.rank != r || h.nlocal != s->nlocal ||
        h.pid != s->pid[i]) {
      set_err(s, "rank %d: rank %d's segment does not match its blob", s->rank,
              r);
      return UROCE_COLL_ERR_MISMATCH;
    }
    s->cma[i] = (uint8_t)cma_probe(s, i, b.hdr_addr);
    map_ring(s, i, &h);
#ifdef SYS_pidfd_open
    s->pidfd[i] = (int)syscall(SYS_pidfd_open, s->pid[i], 0);
#endif
  }
  set_mode(s);
  const char *st = getenv("UROCE_COLL_SHM_STREAM");
  s->stream = -1;
  if (st && (!strcmp(st, "1") || !strcasecmp(st, "on")))
    s->stream = COPY_STREAM;
  else if (env_off("UROCE_COLL_SHM_STREAM"))
    s->stream = COPY_PLAIN;
#if !defined(__x86_64__)
  s->stream = COPY_PLAIN; /* both ways are memcpy: nothing to measure */
#endif
  s->live_at = mono_ns();
  return 0;
}

void coll_shm_unlink(coll_shm *s) {
  if (s && s->name[0] && !s->unlinked) {
    shm_unlink(s->name);
    s->unlinked = 1;
  }
  if (s && s->ring && !s->ring_unlinked) {
    shm_unlink(s->ring_name);
    s->ring_unlinked = 1;
  }
}

int coll_shm_add_region(coll_shm *s, void *addr, size_t len) {
  if (s->nreg == s->reg_cap) {
    int cap = s->reg_cap ? 2 * s->reg_cap : 4;
    region *r = realloc(s->reg, (size_t)cap * sizeof *r);
    if (!r)
      return -ENOMEM;
    s->reg = r;
    s->reg_cap = cap;
  }
  s->reg[s->nreg++] = (region){(uintptr_t)addr, (uintptr_t)addr + len};
  return 0;
}

void coll_shm_del_region(coll_shm *s, void *addr) {
  for (int i = 0; i < s->nreg; i++)
    if (s->reg[i].lo == (uintptr_t)addr) {
      s->reg[i] = s->reg[--s->nreg];
      return;
    }
}

static int in_region(const coll_shm *s, uint64_t a, size_t len) {
  for (int i = 0; i < s->nreg; i++)
    if (a >= s->reg[i].lo && a <= s->reg[i].hi && len <= s->reg[i].hi - a)
      return 1;
  return 0;
}

static int push_done(coll_shm *s, int peer, uint64_t wr_id) {
  if (s->done_n == s->done_cap) {
    size_t cap = s->done_cap ? 2 * s->done_cap : 64;
    done_ent *d = malloc(cap * sizeof *d);
    if (!d)
      return -ENOMEM;
    for (size_t i = 0; i < s->done_n; i++)
      d[i] = s->done[(s->done_head + i) % s->done_cap];
    free(s->done);
    s->done = d;
    s->done_head = 0;
    s->done_cap = cap;
  }
  s->done[(s->done_head + s->done_n++) % s->done_cap] = (done_ent){wr_id, peer};
  return 0;
}

/* The channel rank `from` writes into in the segment seg. */
static shm_chan *chan_of(const coll_shm *s, char *seg, int from) {
  return (shm_chan *)(seg + SEG_HDR + (size_t)s->lidx[from] * CHAN_BYTES);
}

static char *data_of(const coll_shm *s, char *seg, int from) {
  return seg + SEG_HDR + (size_t)s->nlocal * CHAN_BYTES +
         (size_t)s->lidx[from] * DATA_BYTES;
}

/* Copy with streaming (non-temporal) stores: every line goes to memory,
 * and the peer reads it from there. Elsewhere than x86-64, memcpy. The
 * caller fences (stream_fence) before it publishes the descriptor:
 * streaming stores are not ordered by a release store. */
#define STREAM_MIN 1024
static void stream_copy(char *d, const char *src, size_t n) {
#if defined(__x86_64__)
  if (n >= STREAM_MIN) {
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    memcpy(d, src, head);
    d += head;
    src += head;
    n -= head;
    for (; n >= 64; d += 64, src += 64, n -= 64) {
      __m128i a = _mm_loadu_si128((const __m128i *)src);
      __m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
      __m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
      __m128i e = _mm_loadu_si128((const __m128i *)(src + 48));
      _mm_stream_si128((__m128i *)d, a);
      _mm_stream_si128((__m128i *)(d + 16), b);
      _mm_stream_si128((__m128i *)(d + 32), c);
      _mm_stream_si128((__m128i *)(d + 48), e);
    }
  }
#endif
  memcpy(d, src, n);
}

static void stream_fence(void) {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

/* Into a peer's ring, ordinary stores (memcpy) leave the lines in this
 * core's cache, and the peer takes them from there; streaming stores send
 * them through memory. Which costs less depends on what a line costs
 * between the two cores, which depends on where the machine put them and
 * may change while the job runs: on this 2-vCPU EPYC (a VM), when a
 * cache line's round trip between the two vCPUs took about 110 ns, a
 * 2-rank 1 MiB allreduce ran 24 GB/s with memcpy and 11 with streaming
 * stores; when it took about 390 ns, 6.4 and 15. So the sender times its
 * copies to each peer and takes the way that has cost less per byte
 * lately (UROCE_COLL_SHM_STREAM=on or off fixes it). Copies of fewer
 * bytes are not timed (two clock reads, about 40 ns here, are a few
 * percent of a 64 KiB copy); one timed copy in PICK_OTHER goes the other way,
 * to follow a change. */
#define PICK_MIN 65536u
#define PICK_OTHER 256u

/* A way's cost: the least of its recent samples, since a copy is only ever
 * slowed down by what it shares the machine with (a copy that was
 * descheduled says nothing about the way); 0 if it has none. */
static uint32_t way_cost(const copy_cost *k, int way) {
  uint32_t m = 0;
  for (int j = 0; j < COST_WIN; j++)
    if (k->ps[way][j] && (!m || k->ps[way][j] < m))
      m = k->ps[way][j];
  return m;
}

/* Which way the next copy of len bytes to local peer i goes; *timed says
 * whether to time it. */
static int pick_copy(coll_shm *s, int i, size_t len, int *timed) {
  copy_cost *k = &s->cost[i];
  *timed = 0;
  if (s->stream >= 0)
    return s->stream;
  uint32_t plain = way_cost(k, COPY_PLAIN), stream = way_cost(k, COPY_STREAM);
  int best = stream && stream < plain;
  if (len < PICK_MIN)
    return best ? COPY_STREAM : COPY_PLAIN;
  *timed = 1;
  if (!plain)
    return COPY_PLAIN;
  if (!stream)
    return COPY_STREAM;
  return ++k->n % PICK_OTHER ? best : !best;
}

/* A copy of len bytes took ns: that way's latest sample. */
static void note_copy(coll_shm *s, int i, int way, size_t len, uint64_t ns) {
  copy_cost *k = &s->cost[i];
  uint64_t ps = ns * 1000 / len;
  if (ps > UINT32_MAX)
    ps = UINT32_MAX;
  k->ps[way][k->pos[way]++ % COST_WIN] = ps ? (uint32_t)ps : 1;
}

/* Copy the pieces to d in the peer's ring, the way that costs less there. */
static void ring_copy(coll_shm *s, int i, char *d, const void *p1, size_t l1,
                      const void *p2, size_t l2) {
  int timed;
  int way = pick_copy(s, i, l1 + l2, &timed);
  uint64_t t0 = timed ? mono_ns() : 0;
  if (way == COPY_STREAM) {
    stream_copy(d, p1, l1);
    if (l2)
      stream_copy(d + l1, p2, l2);
    stream_fence();
  } else {
    memcpy(d, p1, l1);
    if (l2)
      memcpy(d + l1, p2, l2);
  }
  if (timed)
    note_copy(s, i, way, l1 + l2, mono_ns() - t0);
}

int coll_shm_write(coll_shm *s, int peer, const void *p1, size_t l1,
                   const void *p2, size_t l2, uint64_t raddr, uint32_t imm,
                   uint64_t wr_id) {
  if (!coll_shm_is_local(s, peer))
    return UROCE_ERR_INVALID_ARGUMENT;
  int i = s->lidx[peer];
  if (s->dead[i])
    return push_done(s, peer, wr_id); /* its error completion is coming */
  size_t len = l1 + l2;
  if (len > 0xffffffffu)
    return UROCE_ERR_INVALID_ARGUMENT;
  char *seg = s->peer_seg[i];
  shm_chan *ch = chan_of(s, seg, s->rank);
  uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
  if (head - atomic_load_explicit(&ch->tail, memory_order_acquire) >= NENT)
    return UROCE_ERR_QUEUE_FULL;
  shm_ent *e = &ch->ent[head % NENT];
  e->raddr = raddr;
  e->imm = imm;
  e->len = (uint32_t)len;
  e->flags = 0;
  uint64_t roff = raddr - s->ring_addr[i];
  if (len && s->peer_ring[i] && raddr >= s->ring_addr[i] &&
      roff <= s->peer_ring_len[i] && len <= s->peer_ring_len[i] - roff) {
    /* straight into the peer's receive ring, mapped here */
    char *d = s->peer_ring[i] + roff;
    ring_copy(s, i, d, p1, l1, p2, l2); /* l1: the slot header, with gather */
  } else if (len && s->cma[i]) {
    struct iovec l[2] = {{(void *)p1, l1}, {(void *)p2, l2}};
    struct iovec r = {(void *)(uintptr_t)raddr, len};
    ssize_t n = process_vm_writev(s->pid[i], l, l2 ? 2 : 1, &r, 1, 0);
    if (n != (ssize_t)len) {
      /* Gone (or its memory is): what it sent before it went (an abort
       * naming the rank it saw fail) is read first, then poll reports the
       * failure. */
      if (n < 0 && errno == ESRCH)
        set_err(s, "rank %d: local peer rank %d (pid %d) is gone", s->rank,
                peer, s->pid[i]);
      else
        set_err(s, "rank %d: writing %zu bytes to rank %d (pid %d): %s",
                s->rank, len, peer, s->pid[i],
                n < 0 ? strerror(errno) : "short write");
      s->dead[i] = 1;
      s->dead_at[i] = mono_ns();
      return push_done(s, peer, wr_id);
    }
  } else if (len) {
    if (len > DATA_BYTES)
      return UROCE_ERR_INVALID_ARGUMENT;
    uint64_t dh = ch->dhead;
    uint64_t off = dh % DATA_BYTES;
    uint64_t skip = off + len > DATA_BYTES ? DATA_BYTES - off : 0;
    uint64_t used = dh - atomic_load_explicit(&ch->dtail, memory_order_acquire);
    if (used + skip + len > DATA_BYTES)
      return UROCE_ERR_QUEUE_FULL;
    dh += skip;
    char *d = data_of(s, seg, s->rank) + dh % DATA_BYTES;
    memcpy(d, p1, l1);
    if (l2)
      memcpy(d + l1, p2, l2);
    ch->dhead = dh + len;
    e->dend = dh + len;
    e->flags = ENT_COPY;
  }
  int rc = push_done(s, peer, wr_id);
  if (rc < 0)
    return rc;
  atomic_store_explicit(&ch->head, head + 1, memory_order_release);
  return 0;
}

/* Every few ms: has a local peer exited? Marks it; poll reports it. */
static void check_live(coll_shm *s) {
  for (int i = 0; i < s->nlocal; i++) {
    int r = s->lrank[i];
    if (r == s->rank || s->dead[i])
      continue;
    int gone;
    if (s->pidfd[i] >= 0) {
      struct pollfd pf = {s->pidfd[i], POLLIN, 0};
      gone = poll(&pf, 1, 0) > 0;
    } else {
      gone = kill(s->pid[i], 0) < 0 && errno == ESRCH;
    }
    if (!gone)
      continue;
    s->dead[i] = 1;
    s->dead_at[i] = mono_ns();
    set_err(s, "rank %d: local peer rank %d (pid %d) exited", s->rank, r,
            s->pid[i]);
  }
}

static int poll_inbound(coll_shm *s, uroce_coll_cqe *q, int max);

int coll_shm_poll(coll_shm *s, uroce_coll_cqe *q, int max) {
  int got = 0;
  uint64_t now = mono_ns();
  if (now - s->live_at > LIVE_CHECK_NS) {
    s->live_at = now;
    check_live(s);
  }
  got = poll_inbound(s, q, max);
  if (got < 0)
    return got;
  while (got < max && s->done_n) {
    done_ent d = s->done[s->done_head];
    s->done_head = (s->done_head + 1) % s->done_cap;
    s->done_n--;
    memset(&q[got], 0, sizeof q[got]);
    q[got].kind = UROCE_COLL_CQE_WRITE_DONE;
    q[got].wr_id = d.wr_id;
    q[got].peer = d.peer;
    got++;
  }
  /* A peer that is gone, once everything it wrote has been read: one error
   * completion that names it. */
  for (int i = 0; i < s->nlocal && got < max; i++) {
    if (s->dead[i] != 1 || now < s->dead_at[i] + DEAD_GRACE_NS)
      continue;
    shm_chan *ch = chan_of(s, s->seg, s->lrank[i]);
    if (atomic_load_explicit(&ch->head, memory_order_acquire) !=
        atomic_load_explicit(&ch->tail, memory_order_relaxed))
      continue;
    s->dead[i] = 2;
    memset(&q[got], 0, sizeof q[got]);
    q[got].kind = UROCE_COLL_CQE_WRITE_DONE;
    q[got].peer = s->lrank[i];
    q[got].status = -1;
    got++;
  }
  return got;
}

static int poll_inbound(coll_shm *s, uroce_coll_cqe *q, int max) {
  int got = 0;
  int n = s->nlocal;
  for (int k = 0; k < n && got < max; k++) {
    int i = (s->rr + k) % n;
    int r = s->lrank[i];
    if (r == s->rank)
      continue;
    shm_chan *ch = chan_of(s, s->seg, r);
    uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ch->head, memory_order_acquire);
    while (tail != head && got < max) {
      if (head - tail > NENT) {
        set_err(s, "rank %d: channel from rank %d is corrupt", s->rank, r);
        return UROCE_COLL_ERR_MISMATCH;
      }
      shm_ent e = ch->ent[tail % NENT];
      uroce_coll_cqe *c = &q[got++];
      memset(c, 0, sizeof *c);
      c->kind = UROCE_COLL_CQE_RECV_IMM;
      c->peer = r;
      c->imm = e.imm;
      c->byte_len = e.len;
      if (e.flags & ENT_COPY) {
        if (!in_region(s, e.raddr, e.len) || e.len > DATA_BYTES ||
            e.dend < e.len) {
          set_err(s,
                  "rank %d: rank %d wrote %u bytes outside the staging "
                  "memory",
                  s->rank, r, e.len);
          c->status = -1;
        } else {
          memcpy((void *)(uintptr_t)e.raddr,
                 data_of(s, s->seg, r) + (e.dend - e.len) % DATA_BYTES, e.len);
        }
        atomic_store_explicit(&ch->dtail, e.dend, memory_order_release);
      }
      tail++;
      atomic_store_explicit(&ch->tail, tail, memory_order_release);
    }
  }
  s->rr = (s->rr + 1) % n;
  return got;
}
