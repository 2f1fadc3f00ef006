/* Memory regions and memory windows: the key table and the checks every
 * access goes through.
 *
 * A key is (random << (8 + slot bits)) | (slot << 8) | random byte, so a
 * lookup is one array index plus a compare, and a key cannot be guessed
 * from the order of registration: the random bits are drawn fresh from
 * the engine's random source for every registration (lkey and rkey
 * independently) and never repeat the slot's previous key, so a stale key
 * of a deregistered region does not open the region that reuses its slot.
 * The low byte is the key's "key portion" in the verbs sense: a type 2
 * memory window's binder chooses it (ibv_inc_rkey), the rest stays.
 *
 * Windows live in the same table, so their rkeys and the regions' never
 * collide. A window is a remote view of part of a region, bound to it by
 * a BIND_MW work request (type 1 also through ibv_bind_mw): the rkey then
 * grants the window's rights on the window's range, and for type 2 only
 * to the QP that bound it. A bound region cannot be deregistered. */
#ifndef UROCE_MEM_MR_H
#define UROCE_MEM_MR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uroce/verbs.h"

/* A window is MR_VALID while bound (type 1: from allocation on, with an
 * empty range until bound), MR_INVALID while a type 2 window is free. */
enum uroce_mr_state { MR_FREE = 0, MR_VALID = 1, MR_INVALID = 2 };
enum uroce_mr_kind { MR_KIND_MR = 0, MR_KIND_MW1 = 1, MR_KIND_MW2 = 2 };

struct uroce_mr {
  uint32_t lkey, rkey; /* a window has no lkey (0) */
  uint32_t access;     /* UROCE_ACCESS_* */
  uint8_t state;       /* enum uroce_mr_state */
  uint8_t kind;        /* enum uroce_mr_kind */
  uint64_t iova;       /* first byte as work requests and peers name it */
  uint64_t length;     /* bytes */
  /* Where iova lies in this process: iova itself, unless the region was
   * registered under another address (zero-based device memory,
   * ibv_reg_mr_iova). Windows translate through their region. */
  uint64_t host;
  const void *pd; /* owning protection domain */
  uint32_t next_free;
  uint32_t binds;         /* a region: windows bound to it */
  struct uroce_mr *mw_mr; /* a bound window: its region */
  const void *mw_qp;      /* a bound type 2 window: the QP that bound it */
};

/* Why a check failed (0 = allowed). */
enum uroce_mr_err {
  UROCE_MR_OK = 0,
  UROCE_MR_BAD_KEY = 1,    /* no such key, or invalidated */
  UROCE_MR_BAD_PD = 2,     /* region belongs to another PD */
  UROCE_MR_BAD_ACCESS = 3, /* missing right */
  UROCE_MR_BAD_BOUNDS = 4, /* [va, va + len) not inside the region */
  UROCE_MR_UNMAPPED = 5,   /* inside, but no longer mapped (or writable) */
  UROCE_MR_BAD_QP = 6,     /* a type 2 window bound to another QP */
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

/* Whether a region may have these access bits over [iova, iova + length):
 * known bits, no remote write or atomic without local write, no wrap. */
bool uroce_mr_range_ok(uint64_t iova, uint64_t length, uint32_t access);
/* Registers a region; rnd supplies the random key bits. Returns 0, or
 * UROCE_ERR_INVALID_ARGUMENT for unknown access bits, remote write or
 * atomic without local write, or iova + length overflowing;
 * UROCE_ERR_CAPS if the table is full. */
int uroce_mr_table_add(struct uroce_mr_table *t, const void *pd, uint64_t iova,
                       uint64_t length, uint32_t access, uint64_t rnd,
                       struct uroce_mr **out);
void uroce_mr_table_remove(struct uroce_mr_table *t, struct uroce_mr *mr);

static inline uint32_t uroce_mr_slot(const struct uroce_mr_table *t,
                                     uint32_t key) {
  return (key >> 8) & t->mask;
}
/* A region by its lkey (never a window). */
static inline struct uroce_mr *uroce_mr_by_lkey(struct uroce_mr_table *t,
                                                uint32_t lkey) {
  struct uroce_mr *mr = &t->mr[uroce_mr_slot(t, lkey)];
  return mr->state == MR_VALID && mr->kind == MR_KIND_MR && mr->lkey == lkey
             ? mr
             : 0;
}
/* A region or a bound window by its rkey. */
static inline struct uroce_mr *uroce_mr_by_rkey(struct uroce_mr_table *t,
                                                uint32_t rkey) {
  struct uroce_mr *mr = &t->mr[uroce_mr_slot(t, rkey)];
  return mr->state == MR_VALID && mr->rkey == rkey ? mr : 0;
}
/* Whether p is an entry of t (a handle from outside is checked first). */
static inline bool uroce_mr_in_table(const struct uroce_mr_table *t,
                                     const struct uroce_mr *p) {
  uintptr_t a = (uintptr_t)p, b = (uintptr_t)t->mr;
  return a >= b && (a - b) % sizeof(*p) == 0 && (a - b) / sizeof(*p) < t->n;
}

/* The process address of va, which a check of e (region or bound window)
 * allowed. */
static inline uint64_t uroce_mr_host(const struct uroce_mr *e, uint64_t va) {
  if (e->kind != MR_KIND_MR)
    e = e->mw_mr;
  return e->host + (va - e->iova);
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
 * unless the application unmaps the memory in between. An rkey may name
 * a window: its rights and range count, and a type 2 window serves only
 * qp. On success *out is the key's entry (region or window, whose range
 * a caller may check a whole message against). Returns enum
 * uroce_mr_err. */
int uroce_mr_check(struct uroce_mr_table *t, bool remote, uint32_t key,
                   const void *pd, const void *qp, uint64_t va, uint64_t len,
                   uint32_t access, struct uroce_mr **out);

/* Windows. add: allocates a window of type 1 or 2 (UROCE_ERR_CAPS when
 * the table is full). remove: unbinds and frees it. */
int uroce_mw_table_add(struct uroce_mr_table *t, const void *pd, int type,
                       uint64_t rnd, struct uroce_mr **out);
void uroce_mw_table_remove(struct uroce_mr_table *t, struct uroce_mr *mw);
/* Binds window mw for qp (of PD pd) to [addr, addr + length) of region mr
 * with rights access and rkey, or unbinds a type 1 window (length 0, mr
 * may be NULL). Returns 0 or UROCE_ERR_INVALID_ARGUMENT when the verbs
 * rules forbid it: another PD, a bound type 2 window, a new rkey whose
 * index part differs, a region without UROCE_ACCESS_MW_BIND, remote write
 * or atomic on a region without local write, a range outside the region,
 * rights other than remote ones. */
int uroce_mw_bind(struct uroce_mr *mw, const void *pd, const void *qp,
                  struct uroce_mr *mr, uint64_t addr, uint64_t length,
                  uint32_t access, uint32_t rkey);
/* A key that SEND with invalidate or a local invalidate may name: a
 * bound type 2 window of PD pd (regions registered by the application
 * cannot be invalidated). */
struct uroce_mr *uroce_mw_inv_target(struct uroce_mr_table *t, uint32_t rkey,
                                     const void *pd);
/* Invalidates that window: free again, its rkey opens nothing. */
void uroce_mw_invalidate(struct uroce_mr *mw);
/* Invalidates every type 2 window qp bound (the QP goes away). */
void uroce_mw_unbind_qp(struct uroce_mr_table *t, const void *qp);

#endif
