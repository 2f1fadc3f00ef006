/* Memory regions: the key table and the checks every access goes through.
 *
 * A key is (random high bits << slot bits) | slot, so a lookup is one array
 * index plus a compare, and a key cannot be guessed from the order of
 * registration: the high bits are drawn fresh from the engine's random
 * source for every registration (lkey and rkey independently) and never
 * repeat the slot's previous key, so a stale key of a deregistered region
 * does not open the region that reuses its slot. */
#ifndef UROCE_MEM_MR_H
#define UROCE_MEM_MR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uroce/verbs.h"

enum uroce_mr_state { MR_FREE = 0, MR_VALID = 1, MR_INVALID = 2 };

struct uroce_mr {
  uint32_t lkey, rkey;
  uint32_t access; /* UROCE_ACCESS_* */
  uint8_t state;   /* enum uroce_mr_state */
  uint64_t iova;   /* first byte (the registered address) */
  uint64_t length; /* bytes */
  const void *pd;  /* owning protection domain */
  uint32_t next_free;
};

/* Why a check failed (0 = allowed). */
enum uroce_mr_err {
  UROCE_MR_OK = 0,
  UROCE_MR_BAD_KEY = 1,    /* no such key, or invalidated */
  UROCE_MR_BAD_PD = 2,     /* region belongs to another PD */
  UROCE_MR_BAD_ACCESS = 3, /* missing right */
  UROCE_MR_BAD_BOUNDS = 4, /* [va, va + len) not inside the region */
  UROCE_MR_UNMAPPED = 5,   /* inside, but no longer mapped (or writable) */
};

struct uroce_mr_table {
  struct uroce_mr *mr;
  uint32_t n, mask, bits;
  uint32_t free_head; /* n = none */
  uint32_t used;
  /* Regions are the application's real memory (a device, not the
   * simulator's phantom addresses): every check also probes that the
   * range is still mapped (mem/pin.h). */
  bool probe;
};

/* Sets up a table of n regions (rounded up to a power of two, >= 2) from
 * memory the caller allocated with room for uroce_mr_table_bytes(n).
 * Returns the rounded capacity. */
size_t uroce_mr_table_bytes(uint32_t n);
uint32_t uroce_mr_table_init(struct uroce_mr_table *t, void *mem, uint32_t n);

/* Registers a region; rnd supplies the random key bits. Returns 0, or
 * UROCE_ERR_INVALID_ARGUMENT for unknown access bits, remote write or
 * atomic without local write, or iova + length overflowing;
 * UROCE_ERR_CAPS if the table is full. */
int uroce_mr_table_add(struct uroce_mr_table *t, const void *pd, uint64_t iova,
                       uint64_t length, uint32_t access, uint64_t rnd,
                       struct uroce_mr **out);
void uroce_mr_table_remove(struct uroce_mr_table *t, struct uroce_mr *mr);

static inline struct uroce_mr *uroce_mr_by_lkey(struct uroce_mr_table *t,
                                                uint32_t lkey) {
  struct uroce_mr *mr = &t->mr[lkey & t->mask];
  return mr->state == MR_VALID && mr->lkey == lkey ? mr : 0;
}
static inline struct uroce_mr *uroce_mr_by_rkey(struct uroce_mr_table *t,
                                                uint32_t rkey) {
  struct uroce_mr *mr = &t->mr[rkey & t->mask];
  return mr->state == MR_VALID && mr->rkey == rkey ? mr : 0;
}

/* Whether [va, va + len) lies inside the region; overflow-safe. */
static inline bool uroce_mr_in_bounds(const struct uroce_mr *mr, uint64_t va,
                                      uint64_t len) {
  return va >= mr->iova && len <= mr->length &&
         va - mr->iova <= mr->length - len;
}

/* Checks a key (looked up as lkey or rkey), the PD, the rights and the
 * bounds, and with t->probe that the range is still mapped, writable if
 * access asks for a write right: an access right after it cannot fault
 * unless the application unmaps the memory in between. On success *out is
 * the region. Returns enum uroce_mr_err. */
int uroce_mr_check(struct uroce_mr_table *t, bool remote, uint32_t key,
                   const void *pd, uint64_t va, uint64_t len, uint32_t access,
                   struct uroce_mr **out);

#endif
