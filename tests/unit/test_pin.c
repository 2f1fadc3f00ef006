/* Memory registration as real verbs do it: a range that is not mapped
 * (or not writable, for a writable region) is refused with EFAULT;
 * registered pages are locked until the last region over them goes, and
 * past RLIMIT_MEMLOCK registration fails with ENOMEM; a remote WRITE,
 * READ or atomic to registered memory the application unmapped anyway is
 * answered with a remote access error, and the responder lives on. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/internal.h"
#include "apihelp.h"
#include "mem/pin.h"
#include "t.h"
#include "util/clock.h"
#include "uroce/uroce.h"

#define RW                                                                     \
  (UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_WRITE |                      \
   UROCE_ACCESS_REMOTE_READ | UROCE_ACCESS_REMOTE_ATOMIC)

static size_t pg;

/* The process's locked memory in KiB (VmLck), or -1. */
static long vm_lck_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  if (!f)
    return -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "VmLck: %ld kB", &v) == 1)
      break;
  fclose(f);
  return v;
}

/* n pages followed by an inaccessible guard page, so that the first byte
 * past the end is known not to be accessible. */
static void *map_pages(size_t n, int prot) {
  uint8_t *p =
      mmap(NULL, (n + 1) * pg, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(p != MAP_FAILED);
  if (p == MAP_FAILED)
    return NULL;
  CHECK_EQ(mprotect(p + n * pg, pg, PROT_NONE), 0);
  return p;
}

static void test_probe(void) {
  CHECK_EQ(uroce_pin_guard_init(), 0);
  uint8_t *p = map_pages(4, PROT_READ | PROT_WRITE);
  p[pg] = 7;
  CHECK(uroce_pin_probe(p, 4 * pg, true));
  CHECK_EQ(p[pg], 7); /* a write probe leaves the data as it was */
  CHECK(uroce_pin_probe(p + 1, 4 * pg - 2, false));
  /* A hole in the middle, a read-only page, a page past the end. */
  CHECK_EQ(mprotect(p + 2 * pg, pg, PROT_READ), 0);
  CHECK(uroce_pin_probe(p + 2 * pg, pg, false));
  CHECK(!uroce_pin_probe(p + 2 * pg, pg, true));
  CHECK(!uroce_pin_probe(p, 4 * pg, true));
  CHECK_EQ(munmap(p + pg, pg), 0);
  CHECK(!uroce_pin_probe(p, 4 * pg, false));
  CHECK(!uroce_pin_probe(p + pg + 5, 1, false));
  CHECK(uroce_pin_probe(p, pg, true));
  CHECK(!uroce_pin_probe(p + 3 * pg, pg + 1, false));
  CHECK(!uroce_pin_probe(NULL, 1, false));
  munmap(p, 5 * pg);
  /* The guard survives many faults in a row (the signal is not left
   * blocked after one). */
  for (int i = 0; i < 100; i++)
    CHECK(!uroce_pin_probe(NULL, 8, i & 1));
}

static struct uroce_device *open_dev(const char *addr) {
  struct uroce_device *dev = NULL;
  struct uroce_device_attr a = {.addr = addr,
                                .progress = UROCE_PROGRESS_THREAD};
  CHECK_EQ(uroce_device_open(&dev, &a), 0);
  return dev;
}

static void test_reg_unmapped(void) {
  struct uroce_device *dev = open_dev("127.0.0.81");
  if (!dev)
    return;
  struct uroce_pd *pd;
  struct uroce_mr *mr;
  CHECK_EQ(uroce_alloc_pd(dev, &pd), 0);
  uint8_t *p = map_pages(3, PROT_READ | PROT_WRITE);
  /* 1 TiB over a 3-page buffer. */
  CHECK_EQ(uroce_reg_mr(pd, p, (size_t)1 << 40, RW, &mr), -EFAULT);
  CHECK_EQ(uroce_reg_mr(pd, p, 3 * pg + 1, RW, &mr), -EFAULT);
  CHECK_EQ(uroce_reg_mr(pd, NULL, 4096, RW, &mr), -EFAULT);
  CHECK_EQ(uroce_reg_mr(pd, (void *)(uintptr_t)-4096, 8192, 0, &mr), -EFAULT);
  CHECK_EQ(uroce_reg_mr(pd, p, 3 * pg, RW, &mr), 0);
  CHECK_EQ(uroce_dereg_mr(mr), 0);
  /* Read-only memory: a region without write rights only. */
  CHECK_EQ(mprotect(p, 3 * pg, PROT_READ), 0);
  CHECK_EQ(uroce_reg_mr(pd, p, 3 * pg, UROCE_ACCESS_LOCAL_WRITE, &mr), -EFAULT);
  CHECK_EQ(uroce_reg_mr(pd, p, 3 * pg, UROCE_ACCESS_REMOTE_READ, &mr), 0);
  CHECK_EQ(uroce_dereg_mr(mr), 0);
  CHECK_EQ(munmap(p, 4 * pg), 0);
  CHECK_EQ(uroce_reg_mr(pd, p, pg, 0, &mr), -EFAULT);
  CHECK_EQ(uroce_dealloc_pd(pd), 0);
  uroce_device_close(dev);
}

/* ASan's runtime intercepts mlock and munlock and does nothing (its
 * shadow memory would be locked too), so under ASan neither VmLck nor
 * RLIMIT_MEMLOCK's ENOMEM can be seen; the plain build checks both. */
#if defined(__SANITIZE_ADDRESS__)
#define MLOCK_OBSERVABLE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLOCK_OBSERVABLE 0
#endif
#endif
#ifndef MLOCK_OBSERVABLE
#define MLOCK_OBSERVABLE 1
#endif

static void test_locked(void) {
  if (!MLOCK_OBSERVABLE) {
    printf("test_locked: mlock is a no-op under ASan; checked in the plain "
           "build\n");
    return;
  }
  struct uroce_device *dev = open_dev("127.0.0.81");
  if (!dev)
    return;
  struct uroce_pd *pd;
  struct uroce_mr *a, *b;
  CHECK_EQ(uroce_alloc_pd(dev, &pd), 0);
  size_t n = 64;
  uint8_t *p = map_pages(n, PROT_READ | PROT_WRITE);
  long base = vm_lck_kib();
  uint64_t base_b = uroce_pin_locked_bytes();
  CHECK_EQ(uroce_reg_mr(pd, p, n * pg, RW, &a), 0);
  CHECK_EQ(vm_lck_kib() - base, (long)(n * pg / 1024));
  CHECK_EQ(uroce_pin_locked_bytes() - base_b, n * pg);
  /* A second region over the second half, then the first goes: the
   * second half stays locked (mlock does not nest). */
  CHECK_EQ(uroce_reg_mr(pd, p + n / 2 * pg, n / 2 * pg, RW, &b), 0);
  CHECK_EQ(vm_lck_kib() - base, (long)(n * pg / 1024));
  CHECK_EQ(uroce_dereg_mr(a), 0);
  CHECK_EQ(vm_lck_kib() - base, (long)(n / 2 * pg / 1024));
  CHECK_EQ(uroce_dereg_mr(b), 0);
  CHECK_EQ(vm_lck_kib(), base);
  CHECK_EQ(uroce_pin_locked_bytes(), base_b);
  munmap(p, (n + 1) * pg);
  CHECK_EQ(uroce_dealloc_pd(pd), 0);
  uroce_device_close(dev);
}

/* Re-registration moves the lock with the region: the new range is
 * locked and the old one released (a range the region still shares keeps
 * its pages locked); a new range that is not mapped fails with EFAULT and
 * leaves the region where it was; bad access bits are refused with
 * nothing locked. */
static void test_rereg_locks(void) {
  struct uroce_device *dev = open_dev("127.0.0.82");
  if (!dev)
    return;
  struct uroce_pd *pd;
  struct uroce_mr *mr;
  CHECK_EQ(uroce_alloc_pd(dev, &pd), 0);
  size_t n = 16;
  uint8_t *p = map_pages(n, PROT_READ | PROT_WRITE);
  uint8_t *q = map_pages(2 * n, PROT_READ | PROT_WRITE);
  uint64_t base = uroce_pin_locked_bytes();
  long base_k = vm_lck_kib();
  CHECK_EQ(uroce_reg_mr(pd, p, n * pg, RW, &mr), 0);
  CHECK_EQ(uroce_rereg_mr(mr, pd, q, 2 * n * pg, RW), 0);
  CHECK_EQ(uroce_pin_locked_bytes() - base, 2 * n * pg);
  if (MLOCK_OBSERVABLE)
    CHECK_EQ(vm_lck_kib() - base_k, (long)(2 * n * pg / 1024));
  /* access only, same range: still locked once */
  CHECK_EQ(uroce_rereg_mr(mr, pd, q, 2 * n * pg, UROCE_ACCESS_LOCAL_WRITE), 0);
  CHECK_EQ(uroce_pin_locked_bytes() - base, 2 * n * pg);
  if (MLOCK_OBSERVABLE)
    CHECK_EQ(vm_lck_kib() - base_k, (long)(2 * n * pg / 1024));
  /* past the mapping (its guard page): EFAULT, the region stays on q */
  CHECK_EQ(uroce_rereg_mr(mr, pd, q, (2 * n + 1) * pg, RW), -EFAULT);
  CHECK_EQ(uroce_pin_locked_bytes() - base, 2 * n * pg);
  /* remote write without local write */
  CHECK_EQ(uroce_rereg_mr(mr, pd, p, n * pg, UROCE_ACCESS_REMOTE_WRITE),
           UROCE_ERR_INVALID_ARGUMENT);
  CHECK_EQ(uroce_pin_locked_bytes() - base, 2 * n * pg);
  CHECK_EQ(uroce_dereg_mr(mr), 0);
  CHECK_EQ(uroce_pin_locked_bytes(), base);
  if (MLOCK_OBSERVABLE)
    CHECK_EQ(vm_lck_kib(), base_k);
  munmap(p, (n + 1) * pg);
  munmap(q, (2 * n + 1) * pg);
  CHECK_EQ(uroce_dealloc_pd(pd), 0);
  uroce_device_close(dev);
}

/* In a child: with RLIMIT_MEMLOCK at 256 KiB (or the hard limit, if
 * lower) and no privilege to pass it (root gives up CAP_IPC_LOCK by
 * becoming nobody), half the limit registers and four times it fails
 * with ENOMEM. */
static void test_memlock_limit(void) {
  if (!MLOCK_OBSERVABLE) {
    printf("test_memlock_limit: mlock is a no-op under ASan; checked in the "
           "plain build\n");
    return;
  }
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0)
      _exit(9);
    rlim_t lim = 256 << 10;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < lim)
      lim = rl.rlim_max & ~(rlim_t)(pg - 1);
    rl.rlim_cur = rl.rlim_max = lim;
    if (lim < 2 * pg || setrlimit(RLIMIT_MEMLOCK, &rl) < 0)
      _exit(10);
    if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
      _exit(11);
    size_t small_len = lim / 2 & ~(pg - 1), big_len = 4 * lim;
    uint8_t *small = mmap(NULL, small_len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *big = mmap(NULL, big_len, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (small == MAP_FAILED || big == MAP_FAILED)
      _exit(12);
    uint64_t before = uroce_pin_locked_bytes();
    if (uroce_pin_lock(small, small_len, true) != 0)
      _exit(13);
    if (uroce_pin_lock(big, big_len, true) != -ENOMEM)
      _exit(14);
    uroce_pin_unlock(small, small_len);
    _exit(uroce_pin_locked_bytes() == before ? 0 : 15);
  }
  int st = 0;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ(WEXITSTATUS(st), 0);
}

/* ---- remote access to memory unmapped after registration ---- */

struct side {
  struct uroce_device *dev;
  struct uroce_pd *pd;
  struct uroce_cq *cq;
  struct uroce_qp *qp;
};

static void open_side(struct side *s, const char *addr) {
  s->dev = open_dev(addr);
  if (!s->dev)
    return;
  CHECK_EQ(uroce_alloc_pd(s->dev, &s->pd), 0);
  CHECK_EQ(uroce_create_cq(s->dev, 64, NULL, NULL, &s->cq), 0);
}

static void new_qp(struct side *s) {
  struct uroce_qp_init_attr ia = {
      .send_cq = s->cq, .recv_cq = s->cq, .qp_type = UROCE_QPT_RC};
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  CHECK_EQ(uroce_create_qp(s->pd, &ia, &s->qp), 0);
}

static void connect_qp(struct side *s, struct side *peer) {
  CHECK_EQ(api_connect_rc(s->qp, peer->dev, peer->qp,
                          UROCE_ACCESS_REMOTE_WRITE | UROCE_ACCESS_REMOTE_READ |
                              UROCE_ACCESS_REMOTE_ATOMIC,
                          1, 10),
           0);
}

/* The status of one completion on s, or -1 after 5 s. */
static int wait_status(struct side *s) {
  uint64_t end = mono_ns() + 5000000000ull;
  struct uroce_wc wc;
  while (mono_ns() < end)
    if (uroce_poll_cq(s->cq, 1, &wc) == 1)
      return (int)wc.status;
  return -1;
}

/* One operation from a to b's region [remote, remote + len) on a fresh
 * QP pair; returns the requester's completion status. */
static int remote_op(struct side *a, struct side *b, uint32_t opcode,
                     uint8_t *local, struct uroce_mr *lmr, uint64_t remote,
                     uint32_t rkey, uint32_t len) {
  new_qp(a);
  new_qp(b);
  connect_qp(a, b);
  connect_qp(b, a);
  struct uroce_sge sge = {(uint64_t)(uintptr_t)local, len, uroce_mr_lkey(lmr)};
  struct uroce_send_wr wr = {0}, *bad;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = UROCE_SEND_SIGNALED;
  if (opcode == UROCE_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = remote;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 1;
  } else {
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
  }
  CHECK_EQ(uroce_post_send(a->qp, &wr, &bad), 0);
  int st = wait_status(a);
  CHECK_EQ(uroce_destroy_qp(a->qp), 0);
  CHECK_EQ(uroce_destroy_qp(b->qp), 0);
  return st;
}

static void test_remote_unmapped(void) {
  struct side a = {0}, b = {0};
  open_side(&a, "127.0.0.81");
  open_side(&b, "127.0.0.82");
  if (!a.dev || !b.dev)
    goto out;
  uint8_t *local = map_pages(4, PROT_READ | PROT_WRITE);
  uint8_t *remote = map_pages(4, PROT_READ | PROT_WRITE);
  struct uroce_mr *lmr, *rmr;
  CHECK_EQ(uroce_reg_mr(a.pd, local, 4 * pg, RW, &lmr), 0);
  CHECK_EQ(uroce_reg_mr(b.pd, remote, 4 * pg, RW, &rmr), 0);
  uint64_t r = (uint64_t)(uintptr_t)remote;
  uint32_t rkey = uroce_mr_rkey(rmr);
  /* Mapped: everything works. */
  memset(local, 0x5A, 2 * pg);
  CHECK_EQ(remote_op(&a, &b, UROCE_WR_RDMA_WRITE, local, lmr, r, rkey, 2 * pg),
           UROCE_WC_SUCCESS);
  CHECK_EQ(remote[2 * pg - 1], 0x5A);
  /* The application unmaps the second and fourth pages while they are
   * registered; the third becomes read-only. */
  CHECK_EQ(munmap(remote + pg, pg), 0);
  CHECK_EQ(munmap(remote + 3 * pg, pg), 0);
  CHECK_EQ(mprotect(remote + 2 * pg, pg, PROT_READ), 0);
  CHECK_EQ(remote_op(&a, &b, UROCE_WR_RDMA_WRITE, local, lmr, r, rkey, 2 * pg),
           UROCE_WC_REM_ACCESS_ERR);
  CHECK_EQ(remote_op(&a, &b, UROCE_WR_RDMA_READ, local, lmr, r + pg, rkey, 8),
           UROCE_WC_REM_ACCESS_ERR);
  CHECK_EQ(remote_op(&a, &b, UROCE_WR_RDMA_READ, local, lmr, r, rkey, 2 * pg),
           UROCE_WC_REM_ACCESS_ERR);
  CHECK_EQ(remote_op(&a, &b, UROCE_WR_ATOMIC_FETCH_AND_ADD, local, lmr,
                     r + 3 * pg, rkey, 8),
           UROCE_WC_REM_ACCESS_ERR);
  /* Read-only now: READ works, WRITE and atomics do not. */
  CHECK_EQ(
      remote_op(&a, &b, UROCE_WR_RDMA_READ, local, lmr, r + 2 * pg, rkey, 64),
      UROCE_WC_SUCCESS);
  CHECK_EQ(
      remote_op(&a, &b, UROCE_WR_RDMA_WRITE, local, lmr, r + 2 * pg, rkey, 64),
      UROCE_WC_REM_ACCESS_ERR);
  CHECK_EQ(remote_op(&a, &b, UROCE_WR_ATOMIC_FETCH_AND_ADD, local, lmr,
                     r + 2 * pg, rkey, 8),
           UROCE_WC_REM_ACCESS_ERR);
  /* The first page is still there and still serves. */
  CHECK_EQ(remote_op(&a, &b, UROCE_WR_RDMA_READ, local + pg, lmr, r, rkey, 64),
           UROCE_WC_SUCCESS);
  CHECK_EQ(local[pg + 63], 0x5A);
  CHECK_EQ(uroce_dereg_mr(rmr), 0);
  CHECK_EQ(uroce_dereg_mr(lmr), 0);
  munmap(remote, pg);
  munmap(remote + 2 * pg, pg);
  munmap(remote + 4 * pg, pg);
  munmap(local, 5 * pg);
out:
  for (struct side *s = &a; s; s = s == &a ? &b : NULL) {
    if (!s->dev)
      continue;
    CHECK_EQ(uroce_destroy_cq(s->cq), 0);
    CHECK_EQ(uroce_dealloc_pd(s->pd), 0);
    uroce_device_close(s->dev);
  }
}

int main(void) {
  pg = (size_t)sysconf(_SC_PAGESIZE);
  T_RUN(test_probe);
  T_RUN(test_reg_unmapped);
  T_RUN(test_locked);
  T_RUN(test_rereg_locks);
  T_RUN(test_memlock_limit);
  T_RUN(test_remote_unmapped);
  return T_DONE();
}
