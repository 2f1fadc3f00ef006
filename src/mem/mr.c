#include "mem/mr.h"

#include <string.h>

#include "mem/pin.h"
#include "uroce/errors.h"

static uint32_t round_pow2(uint32_t n) {
  uint32_t p = 2;
  while (p < n && p < (1u << 20))
    p <<= 1;
  return p;
}

size_t uroce_mr_table_bytes(uint32_t n) {
  return (size_t)round_pow2(n) * sizeof(struct uroce_mr);
}

uint32_t uroce_mr_table_init(struct uroce_mr_table *t, void *mem, uint32_t n) {
  n = round_pow2(n);
  t->mr = mem;
  memset(t->mr, 0, (size_t)n * sizeof(*t->mr));
  t->n = n;
  t->mask = n - 1;
  t->bits = (uint32_t)__builtin_ctz(n);
  t->used = 0;
  t->probe = false;
  for (uint32_t i = 0; i < n; i++)
    t->mr[i].next_free = i + 1;
  t->free_head = 0;
  return n;
}

/* A key for slot i whose random part differs from the slot's old key and
 * from avoid; never 0. */
static uint32_t make_key(const struct uroce_mr_table *t, uint32_t i,
                         uint32_t rnd, uint32_t old, uint32_t avoid) {
  uint32_t rnd_mask = ~(t->mask << 8);
  for (uint32_t k = 0;; k++) {
    uint32_t key = ((rnd + k * 0x9E3779B9u) & rnd_mask) | (i << 8);
    if (key != old && key != avoid && key != 0)
      return key;
  }
}

/* A free slot, taken, with nothing of its last use but its keys (so that
 * the next ones differ); NULL if the table is full. */
static struct uroce_mr *take_slot(struct uroce_mr_table *t) {
  if (t->free_head >= t->n)
    return 0;
  struct uroce_mr *e = &t->mr[t->free_head];
  t->free_head = e->next_free;
  t->used++;
  *e = (struct uroce_mr){.lkey = e->lkey, .rkey = e->rkey};
  return e;
}

bool uroce_mr_range_ok(uint64_t iova, uint64_t length, uint32_t access) {
  if (access & ~UROCE_ACCESS_ALL)
    return false;
  if ((access & (UROCE_ACCESS_REMOTE_WRITE | UROCE_ACCESS_REMOTE_ATOMIC)) &&
      !(access & UROCE_ACCESS_LOCAL_WRITE))
    return false;
  return iova + length >= iova;
}

int uroce_mr_table_add(struct uroce_mr_table *t, const void *pd, uint64_t iova,
                       uint64_t length, uint32_t access, uint64_t rnd,
                       struct uroce_mr **out) {
  if (!uroce_mr_range_ok(iova, length, access))
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_mr *mr = take_slot(t);
  if (!mr)
    return UROCE_ERR_CAPS;
  uint32_t i = (uint32_t)(mr - t->mr);
  mr->lkey = make_key(t, i, (uint32_t)rnd, mr->lkey, 0);
  mr->rkey = make_key(t, i, (uint32_t)(rnd >> 32), mr->rkey, mr->lkey);
  mr->access = access;
  mr->iova = mr->host = iova;
  mr->length = length;
  mr->pd = pd;
  mr->state = MR_VALID;
  mr->kind = MR_KIND_MR;
  *out = mr;
  return 0;
}

void uroce_mr_table_remove(struct uroce_mr_table *t, struct uroce_mr *mr) {
  uint32_t i = (uint32_t)(mr - t->mr);
  mr->state = MR_FREE; /* keys stay, so the next ones differ from them */
  mr->pd = 0;
  mr->next_free = t->free_head;
  t->free_head = i;
  t->used--;
}

int uroce_mr_check(struct uroce_mr_table *t, bool remote, uint32_t key,
                   const void *pd, const void *qp, uint64_t va, uint64_t len,
                   uint32_t access, struct uroce_mr **out) {
  struct uroce_mr *mr =
      remote ? uroce_mr_by_rkey(t, key) : uroce_mr_by_lkey(t, key);
  if (!mr)
    return UROCE_MR_BAD_KEY;
  if (mr->pd != pd)
    return UROCE_MR_BAD_PD;
  if (mr->kind == MR_KIND_MW2 && mr->mw_qp != qp)
    return UROCE_MR_BAD_QP;
  if ((mr->access & access) != access)
    return UROCE_MR_BAD_ACCESS;
  if (!uroce_mr_in_bounds(mr, va, len))
    return UROCE_MR_BAD_BOUNDS;
  bool write = access & (UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_WRITE |
                         UROCE_ACCESS_REMOTE_ATOMIC);
  if (t->probe && len &&
      !uroce_pin_probe((const void *)(uintptr_t)uroce_mr_host(mr, va), len,
                       write))
    return UROCE_MR_UNMAPPED;
  /* A window's range lies in its region (checked at the bind, and the
   * region cannot go while bound). */
  *out = mr;
  return 0;
}

/* ---- windows ---- */

int uroce_mw_table_add(struct uroce_mr_table *t, const void *pd, int type,
                       uint64_t rnd, struct uroce_mr **out) {
  if (type != 1 && type != 2)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_mr *mw = take_slot(t);
  if (!mw)
    return UROCE_ERR_CAPS;
  mw->rkey =
      make_key(t, (uint32_t)(mw - t->mr), (uint32_t)(rnd >> 32), mw->rkey, 0);
  mw->lkey = 0;
  mw->kind = type == 1 ? MR_KIND_MW1 : MR_KIND_MW2;
  mw->state = type == 1 ? MR_VALID : MR_INVALID;
  mw->pd = pd;
  *out = mw;
  return 0;
}

static void mw_unbind(struct uroce_mr *mw) {
  if (mw->mw_mr)
    mw->mw_mr->binds--;
  mw->mw_mr = 0;
  mw->mw_qp = 0;
  mw->access = 0;
  mw->iova = mw->length = 0;
}

void uroce_mw_table_remove(struct uroce_mr_table *t, struct uroce_mr *mw) {
  mw_unbind(mw);
  uroce_mr_table_remove(t, mw);
}

int uroce_mw_bind(struct uroce_mr *mw, const void *pd, const void *qp,
                  struct uroce_mr *mr, uint64_t addr, uint64_t length,
                  uint32_t access, uint32_t rkey) {
  if (mw->state == MR_FREE || mw->kind == MR_KIND_MR || mw->pd != pd)
    return UROCE_ERR_INVALID_ARGUMENT;
  /* Only the key portion (the low byte) is the binder's to choose. */
  if ((rkey ^ mw->rkey) & ~0xFFu)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (access &
      ~(uint32_t)(UROCE_ACCESS_REMOTE_READ | UROCE_ACCESS_REMOTE_WRITE |
                  UROCE_ACCESS_REMOTE_ATOMIC))
    return UROCE_ERR_INVALID_ARGUMENT;
  if (mw->kind == MR_KIND_MW2 && (mw->state != MR_INVALID || !length))
    return UROCE_ERR_INVALID_ARGUMENT; /* bound already; or no range */
  if (length) {
    if (!mr || mr->state == MR_FREE || mr->kind != MR_KIND_MR || mr->pd != pd ||
        !(mr->access & UROCE_ACCESS_MW_BIND))
      return UROCE_ERR_INVALID_ARGUMENT;
    if ((access & (UROCE_ACCESS_REMOTE_WRITE | UROCE_ACCESS_REMOTE_ATOMIC)) &&
        !(mr->access & UROCE_ACCESS_LOCAL_WRITE))
      return UROCE_ERR_INVALID_ARGUMENT;
    if (!uroce_mr_in_bounds(mr, addr, length))
      return UROCE_ERR_INVALID_ARGUMENT;
  }
  mw_unbind(mw);
  mw->rkey = rkey;
  if (length) {
    mw->mw_mr = mr;
    mr->binds++;
    mw->iova = addr;
    mw->length = length;
    mw->access = access;
    if (mw->kind == MR_KIND_MW2)
      mw->mw_qp = qp;
  }
  mw->state = MR_VALID;
  return 0;
}

struct uroce_mr *uroce_mw_inv_target(struct uroce_mr_table *t, uint32_t rkey,
                                     const void *pd) {
  struct uroce_mr *mw = uroce_mr_by_rkey(t, rkey);
  return mw && mw->kind == MR_KIND_MW2 && mw->pd == pd ? mw : 0;
}

void uroce_mw_invalidate(struct uroce_mr *mw) {
  mw_unbind(mw);
  mw->state = MR_INVALID;
}

void uroce_mw_unbind_qp(struct uroce_mr_table *t, const void *qp) {
  for (uint32_t i = 0; i < t->n; i++) {
    struct uroce_mr *mw = &t->mr[i];
    if (mw->state == MR_VALID && mw->kind == MR_KIND_MW2 && mw->mw_qp == qp)
      uroce_mw_invalidate(mw);
  }
}
