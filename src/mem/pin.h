/* What registration does to the application's pages, as real verbs do it
 * with the kernel's help:
 *
 * - Probing: whether a range is mapped (and writable) right now, found by
 *   touching one byte per page under a fault guard. A fault inside a
 *   probe is caught (SIGSEGV/SIGBUS handler, siglongjmp back to the
 *   probe) and the probe answers false; any other fault goes to the
 *   handler that was installed before, or to the default action. The
 *   engine probes every remote and local access right before its copy,
 *   so memory the application unmapped while it was registered is
 *   answered with an access error, not a crash.
 * - Locking: registered pages are mlock'ed, within RLIMIT_MEMLOCK, and
 *   stay locked until the last registration that covers them goes (mlock
 *   does not nest, so the ranges still registered are locked again after
 *   an munlock). UROCE_MEMLOCK=0 in the environment registers without
 *   locking. */
#ifndef UROCE_MEM_PIN_H
#define UROCE_MEM_PIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Installs the fault guard once per process. Returns 0 or -errno. */
int uroce_pin_guard_init(void);

/* Whether every byte of [addr, addr + len) can be read (and written, with
 * write) right now: one load per page, or an atomic add of 0 for write,
 * which leaves concurrent stores of the application intact. Needs
 * uroce_pin_guard_init; addr + len must not overflow. */
bool uroce_pin_probe(const void *addr, uint64_t len, bool write);

/* Locks the pages of [addr, addr + len) for a registration. Returns 0,
 * -EFAULT if part of the range is not mapped (or not writable, with
 * write), or -ENOMEM if locking it would pass RLIMIT_MEMLOCK (a message
 * on stderr, once per process, says which limit and how to raise it). */
int uroce_pin_lock(const void *addr, uint64_t len, bool write);

/* Ends one registration's lock of [addr, addr + len) (as passed to a
 * successful uroce_pin_lock); pages other registrations cover stay
 * locked. */
void uroce_pin_unlock(const void *addr, uint64_t len);

/* Bytes the registrations of this process keep locked (ranges that
 * overlap are counted once per registration). */
uint64_t uroce_pin_locked_bytes(void);

#endif
