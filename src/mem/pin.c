#include "mem/pin.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- the fault guard ---- */

/* Where a fault inside a probe of this thread returns to (NULL outside
 * probes). */
static __thread sigjmp_buf *probe_env;
static struct sigaction old_segv, old_bus;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static int guard_err;
static uintptr_t page_size;

static void on_fault(int sig, siginfo_t *si, void *uc) {
  sigjmp_buf *env = probe_env;
  if (env) {
    probe_env = NULL;
    siglongjmp(*env, 1); /* SA_NODEFER: the signal is not left blocked */
  }
  const struct sigaction *old = sig == SIGSEGV ? &old_segv : &old_bus;
  if (old->sa_flags & SA_SIGINFO) {
    old->sa_sigaction(sig, si, uc);
    return;
  }
  if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
    old->sa_handler(sig);
    return;
  }
  /* Not ours: put the old action back; a real fault then happens again
   * on return and takes it, a signal sent by kill is sent again. */
  sigaction(sig, old, NULL);
  if (si->si_code <= 0)
    raise(sig);
}

static void guard_install(void) {
  page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &old_segv) < 0 ||
      sigaction(SIGBUS, &sa, &old_bus) < 0)
    guard_err = -errno;
}

int uroce_pin_guard_init(void) {
  pthread_once(&guard_once, guard_install);
  return guard_err;
}

/* The probe reads addresses that may be holes (a registration's whole
 * point is to find them): the sanitizers must not flag the read itself,
 * only the guard decides. */
__attribute__((no_sanitize("address", "undefined"))) static void
touch(uintptr_t a, bool write) {
  if (write)
    __atomic_fetch_add((uint8_t *)a, 0, __ATOMIC_RELAXED);
  else
    (void)*(volatile const uint8_t *)a;
}

bool uroce_pin_probe(const void *addr, uint64_t len, bool write) {
  if (len == 0)
    return true;
  sigjmp_buf env;
  if (sigsetjmp(env, 0))
    return false; /* the handler cleared probe_env */
  probe_env = &env;
  uintptr_t a = (uintptr_t)addr, last = a + (uintptr_t)(len - 1);
  touch(a, write);
  for (uintptr_t p = (a | (page_size - 1)) + 1; p && p <= last; p += page_size)
    touch(p, write);
  probe_env = NULL;
  return true;
}

/* ---- locking ---- */

struct range {
  uintptr_t start, end; /* page-aligned */
};

static pthread_mutex_t lock_mu = PTHREAD_MUTEX_INITIALIZER;
static struct range *ranges;
static size_t nranges, cap_ranges;
static uint64_t locked_bytes;
static atomic_bool told;

static bool lock_wanted(void) {
  static atomic_int wanted = -1; /* -1: the environment not read yet */
  int w = atomic_load(&wanted);
  if (w < 0) {
    const char *e = getenv("UROCE_MEMLOCK");
    w = !(e && !strcmp(e, "0"));
    atomic_store(&wanted, w);
  }
  return w;
}

static void tell_limit(uint64_t len) {
  if (atomic_exchange(&told, true))
    return;
  struct rlimit rl;
  char lim[32] = "unlimited";
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    snprintf(lim, sizeof(lim), "%llu KiB",
             (unsigned long long)(rl.rlim_cur / 1024));
  fprintf(stderr,
          "uroce: cannot lock a %llu-byte memory region: registered memory "
          "is locked, and RLIMIT_MEMLOCK (ulimit -l) is %s with %llu bytes "
          "locked by registrations already; raise the limit (ulimit -l "
          "unlimited, or memlock in limits.conf), or set UROCE_MEMLOCK=0 to "
          "register without locking\n",
          (unsigned long long)len, lim, (unsigned long long)locked_bytes);
}

static void page_range(const void *addr, uint64_t len, struct range *r) {
  r->start = (uintptr_t)addr & ~(page_size - 1);
  r->end =
      ((uintptr_t)addr + (uintptr_t)len + page_size - 1) & ~(page_size - 1);
}

int uroce_pin_lock(const void *addr, uint64_t len, bool write) {
  int rv = uroce_pin_guard_init();
  if (rv < 0)
    return rv;
  if ((uintptr_t)addr + len < (uintptr_t)addr)
    return -EFAULT;
  if (!uroce_pin_probe(addr, len, write))
    return -EFAULT;
  if (len == 0 || !lock_wanted())
    return 0;
  struct range r;
  page_range(addr, len, &r);
  pthread_mutex_lock(&lock_mu);
  if (nranges == cap_ranges) {
    size_t n = cap_ranges ? cap_ranges * 2 : 64;
    struct range *nr = realloc(ranges, n * sizeof(*nr));
    if (!nr) {
      pthread_mutex_unlock(&lock_mu);
      return -ENOMEM;
    }
    ranges = nr;
    cap_ranges = n;
  }
  if (mlock((void *)r.start, r.end - r.start) < 0) {
    int e = errno;
    pthread_mutex_unlock(&lock_mu);
    if (e == ENOMEM || e == EPERM || e == EAGAIN) {
      /* The range was mapped a moment ago: this is the limit. */
      tell_limit(len);
      return -ENOMEM;
    }
    return -e;
  }
  ranges[nranges++] = r;
  locked_bytes += r.end - r.start;
  pthread_mutex_unlock(&lock_mu);
  return 0;
}

void uroce_pin_unlock(const void *addr, uint64_t len) {
  if (len == 0 || !lock_wanted())
    return;
  struct range r;
  page_range(addr, len, &r);
  pthread_mutex_lock(&lock_mu);
  size_t i = 0;
  while (i < nranges && (ranges[i].start != r.start || ranges[i].end != r.end))
    i++;
  if (i == nranges) {
    pthread_mutex_unlock(&lock_mu);
    return; /* not locked by a registration */
  }
  ranges[i] = ranges[--nranges];
  locked_bytes -= r.end - r.start;
  munlock((void *)r.start, r.end - r.start);
  /* mlock does not nest: lock again what other registrations cover. The
   * pages were locked a moment ago, so this stays within the limit. */
  for (size_t j = 0; j < nranges; j++) {
    uintptr_t s = ranges[j].start > r.start ? ranges[j].start : r.start;
    uintptr_t e = ranges[j].end < r.end ? ranges[j].end : r.end;
    if (s < e && mlock((void *)s, e - s) < 0) {
      /* unmapped by the application meanwhile: nothing left to lock */
    }
  }
  pthread_mutex_unlock(&lock_mu);
}

uint64_t uroce_pin_locked_bytes(void) {
  pthread_mutex_lock(&lock_mu);
  uint64_t n = locked_bytes;
  pthread_mutex_unlock(&lock_mu);
  return n;
}
