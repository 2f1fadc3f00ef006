/* The engine: object tables, packet dispatch, the transmit round robin and
 * the timers. The protocol itself lives in req.c, resp.c and comp.c. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport/qp.h"
#include "uroce/errors.h"
#include "util/bits.h"
#include "util/rng.h"

#define QP_HASH_MIN 16 /* QPN table slots of a new engine */
#define TQ_NONE UINT32_MAX /* a QP not in the timer heap */

/* ---- allocation and randomness ---- */

static void *default_alloc(void *ctx, size_t n) {
  return malloc(n);
}
static void default_free(void *ctx, void *p) {
  free(p);
}

void *eng_alloc(struct uroce_eng *eng, size_t n) {
  void *p = eng->cfg.alloc(eng->cfg.alloc_ctx, n ? n : 1);
  if (p)
    memset(p, 0, n);
  return p;
}

void eng_free(struct uroce_eng *eng, void *p) {
  if (p)
    eng->cfg.free(eng->cfg.alloc_ctx, p);
}

uint64_t eng_rand(struct uroce_eng *eng) {
  if (eng->cfg.rng)
    return eng->cfg.rng(eng->cfg.rng_ctx);
  return splitmix64(&eng->rng_state);
}

void eng_async(struct uroce_eng *eng, int type, void *obj) {
  uint32_t n = sizeof(eng->ev) / sizeof(eng->ev[0]);
  if (eng->ev_head - eng->ev_tail >= n) {
    eng->stats.async_lost++;
    return;
  }
  struct uroce_async_event *e = &eng->ev[eng->ev_head++ % n];
  e->type = type;
  e->obj = obj;
}

int uroce_eng_get_async_event(struct uroce_eng *eng,
                              struct uroce_async_event *ev) {
  uint32_t n = sizeof(eng->ev) / sizeof(eng->ev[0]);
  if (eng->ev_head == eng->ev_tail)
    return 0;
  *ev = eng->ev[eng->ev_tail++ % n];
  return 1;
}

/* ---- the engine ---- */

int uroce_eng_new(struct uroce_eng **out, const struct uroce_eng_cfg *cfg) {
  if (!out || !cfg || (!cfg->alloc != !cfg->free))
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_eng_cfg c = *cfg;
  if (!c.alloc) {
    c.alloc = default_alloc;
    c.free = default_free;
  }
  if (!c.cc)
    c.cc = &uroce_cc_noop;
  if (!c.max_qp)
    c.max_qp = 256;
  if (!c.max_mr)
    c.max_mr = 1024;
  if (!c.max_unacked_psn)
    c.max_unacked_psn = 256;
  if (!c.ack_every)
    c.ack_every = 16;
  if (!c.ack_delay_ns)
    c.ack_delay_ns = 2000;
  if (!c.ackreq_every)
    c.ackreq_every = 64;
  if (!c.cnp_interval_ns)
    c.cnp_interval_ns = 50000;
  if (!c.port_mtu)
    c.port_mtu = 5;
  if (!c.max_inflight)
    c.max_inflight = 2u << 20;
  if (!c.paths)
    c.paths = 1;
  if (!c.reorder_ns)
    c.reorder_ns = 24000;
  if (!c.tx_burst)
    c.tx_burst = 1;
  if (c.port_mtu > 5 || c.max_qp > (1u << 20) || c.max_mr > (1u << 20) ||
      c.max_unacked_psn > (1u << 22) || c.paths > 16384)
    return UROCE_ERR_INVALID_ARGUMENT;

  void *p = c.alloc(c.alloc_ctx, sizeof(struct uroce_eng));
  if (!p)
    return -ENOMEM;
  struct uroce_eng *eng = p;
  memset(eng, 0, sizeof(*eng));
  eng->cfg = c;
  eng->rng_state = c.seed;
  eng->phantom = c.flags & UROCE_ENG_PHANTOM;
  eng->cc = c.cc;
  ulist_init(&eng->pds);
  ulist_init(&eng->cqs);
  ulist_init(&eng->srqs);
  ulist_init(&eng->qps);
  ulist_init(&eng->ahs);
  ulist_init(&eng->sched);
  ulist_init(&eng->blocked);
  ulist_init(&eng->held);
  ulist_init(&eng->xrcds);
  /* The QPN table starts small and doubles at half load (qp_hash_reserve):
   * an engine with few QPs costs little whatever its max_qp. */
  uint32_t hn = pow2_at_least(c.max_qp * 2);
  if (hn > QP_HASH_MIN)
    hn = QP_HASH_MIN;
  eng->qp_hash = eng_alloc(eng, hn * sizeof(*eng->qp_hash));
  void *mrmem = eng_alloc(eng, uroce_mr_table_bytes(c.max_mr));
  if (!eng->qp_hash || !mrmem) {
    eng_free(eng, eng->qp_hash);
    eng_free(eng, mrmem);
    eng_free(eng, eng);
    return -ENOMEM;
  }
  eng->qp_hash_mask = hn - 1;
  uroce_mr_table_init(&eng->mrs, mrmem, c.max_mr);
  eng->mrs.probe = c.flags & UROCE_ENG_PROBE;
  *out = eng;
  return 0;
}

void uroce_eng_del(struct uroce_eng *eng) {
  if (!eng)
    return;
  while (!ulist_empty(&eng->qps))
    uroce_eng_qp_del(ULIST_ENTRY(eng->qps.next, struct uroce_qp, link));
  while (!ulist_empty(&eng->srqs))
    uroce_eng_srq_del(ULIST_ENTRY(eng->srqs.next, struct uroce_srq, link));
  while (!ulist_empty(&eng->xrcds))
    uroce_eng_xrcd_del(ULIST_ENTRY(eng->xrcds.next, struct uroce_xrcd, link));
  while (!ulist_empty(&eng->ahs))
    uroce_eng_ah_del(ULIST_ENTRY(eng->ahs.next, struct uroce_ah, link));
  while (!ulist_empty(&eng->cqs))
    uroce_eng_cq_del(ULIST_ENTRY(eng->cqs.next, struct uroce_cq, link));
  for (uint32_t i = 0; i < eng->mrs.n; i++)
    if (eng->mrs.mr[i].state != MR_FREE && eng->mrs.mr[i].kind != MR_KIND_MR)
      uroce_eng_mw_dealloc((struct uroce_mw *)(void *)&eng->mrs.mr[i]);
  for (uint32_t i = 0; i < eng->mrs.n; i++)
    if (eng->mrs.mr[i].state != MR_FREE)
      uroce_eng_mr_dereg(&eng->mrs.mr[i]);
  while (!ulist_empty(&eng->pds)) {
    struct uroce_pd *pd = ULIST_ENTRY(eng->pds.next, struct uroce_pd, link);
    pd->refs = 0;
    uroce_eng_pd_del(pd);
  }
  eng_free(eng, eng->mrs.mr);
  eng_free(eng, eng->qp_hash);
  eng_free(eng, eng->tq);
  eng_free(eng, eng->dirty);
  eng_free(eng, eng);
}

void *uroce_eng_user(const struct uroce_eng *eng) {
  return eng->cfg.user;
}

const struct uroce_eng_stats *uroce_eng_stats(const struct uroce_eng *eng) {
  return &eng->stats;
}

const char *uroce_eng_drop_name(enum uroce_drop d) {
  static const char *const names[UROCE_DROP_COUNT] = {
      "malformed", "no-qp",      "qp-state",  "transport",  "pkey",
      "qkey",      "psn",        "duplicate", "opcode-seq", "length",
      "no-rwqe",   "uc-message", "response",  "access",     "too-long",
      "peer",      "no-memory",  "trimmed"};
  return (unsigned)d < UROCE_DROP_COUNT ? names[d] : "?";
}

/* ---- QPN table ---- */

static uint32_t qp_slot(const struct uroce_eng *eng, uint32_t qpn) {
  return (qpn * 0x9E3779B1u >> 8) & eng->qp_hash_mask;
}

struct uroce_qp *eng_qp_lookup(const struct uroce_eng *eng, uint32_t qpn) {
  for (uint32_t i = qp_slot(eng, qpn);; i = (i + 1) & eng->qp_hash_mask) {
    struct uroce_qp *qp = eng->qp_hash[i];
    if (!qp || qp->qpn == qpn)
      return qp;
  }
}

static void qp_hash_put(struct uroce_eng *eng, struct uroce_qp *qp) {
  uint32_t i = qp_slot(eng, qp->qpn);
  while (eng->qp_hash[i])
    i = (i + 1) & eng->qp_hash_mask;
  eng->qp_hash[i] = qp;
}

/* Room for one more QP at under half load. 0 or -ENOMEM. */
static int qp_hash_reserve(struct uroce_eng *eng) {
  uint32_t n = eng->qp_hash_mask + 1;
  if (2 * (eng->nqp + 1) <= n)
    return 0;
  struct uroce_qp **old = eng->qp_hash;
  struct uroce_qp **h = eng_alloc(eng, 2 * (size_t)n * sizeof(*h));
  if (!h)
    return -ENOMEM;
  eng->qp_hash = h;
  eng->qp_hash_mask = 2 * n - 1;
  for (uint32_t i = 0; i < n; i++)
    if (old[i])
      qp_hash_put(eng, old[i]);
  eng_free(eng, old);
  return 0;
}

/* Room in the timer arrays for one more QP. 0 or -ENOMEM. */
static int tq_reserve(struct uroce_eng *eng) {
  if (eng->nqp < eng->tq_cap)
    return 0;
  uint32_t cap = eng->tq_cap ? 2 * eng->tq_cap : 16;
  struct uroce_qp **tq = eng_alloc(eng, cap * sizeof(*tq));
  struct uroce_qp **dirty = eng_alloc(eng, cap * sizeof(*dirty));
  if (!tq || !dirty) {
    eng_free(eng, tq);
    eng_free(eng, dirty);
    return -ENOMEM;
  }
  if (eng->tq_n)
    memcpy(tq, eng->tq, eng->tq_n * sizeof(*tq));
  if (eng->ndirty)
    memcpy(dirty, eng->dirty, eng->ndirty * sizeof(*dirty));
  eng_free(eng, eng->tq);
  eng_free(eng, eng->dirty);
  eng->tq = tq;
  eng->dirty = dirty;
  eng->tq_cap = cap;
  return 0;
}

int eng_qp_attach(struct uroce_eng *eng, struct uroce_qp *qp, bool gsi) {
  if (eng->nqp >= eng->cfg.max_qp)
    return UROCE_ERR_CAPS;
  if (qp_hash_reserve(eng) || tq_reserve(eng))
    return -ENOMEM;
  uint32_t qpn = 1; /* the GSI QP's number */
  if (gsi) {
    if (eng_qp_lookup(eng, qpn))
      return UROCE_ERR_BUSY;
  } else {
    do /* QPNs 0 and 1 are the special QPs; 0xFFFFFF is multicast */
      qpn = (uint32_t)eng_rand(eng) & 0xFFFFFF;
    while (qpn < 2 || qpn == 0xFFFFFF || eng_qp_lookup(eng, qpn));
  }
  qp->qpn = qpn;
  qp_hash_put(eng, qp);
  eng->nqp++;
  qp->tq_idx = TQ_NONE;
  qp->tq_dirty = false;
  qp->seqno = eng->qp_seq++;
  eng_touch(eng, qp);
  return 0;
}

static void tq_remove(struct uroce_eng *eng, struct uroce_qp *qp);

void eng_qp_detach(struct uroce_eng *eng, struct uroce_qp *qp) {
  if (qp->tq_idx != TQ_NONE)
    tq_remove(eng, qp);
  if (qp->tq_dirty)
    for (uint32_t k = 0; k < eng->ndirty; k++)
      if (eng->dirty[k] == qp) {
        eng->dirty[k] = eng->dirty[--eng->ndirty];
        break;
      }
  uint32_t i = qp_slot(eng, qp->qpn);
  while (eng->qp_hash[i] != qp)
    i = (i + 1) & eng->qp_hash_mask;
  eng->qp_hash[i] = 0;
  eng->nqp--;
  /* Re-insert the rest of the probe cluster so lookups still find it. */
  for (uint32_t j = (i + 1) & eng->qp_hash_mask; eng->qp_hash[j];
       j = (j + 1) & eng->qp_hash_mask) {
    struct uroce_qp *q = eng->qp_hash[j];
    eng->qp_hash[j] = 0;
    qp_hash_put(eng, q);
  }
}

void eng_sched(struct uroce_eng *eng, struct uroce_qp *qp) {
  eng_touch(eng, qp);
  if (!qp->in_sched) {
    ulist_add_tail(&eng->sched, &qp->sched);
    qp->in_sched = true;
  }
}

/* Grants turns to the waiting QPs, oldest first, while the bound has room
 * for each one's turn: what it asked for, and at least a burst (tx_burst
 * packets), so that a woken QP sends a burst against one acknowledgement
 * rather than a packet. The grant is reserved until the QP sends it or its
 * turn ends. One that would not fit waits for the bound to empty when it
 * is bigger than the bound (a large READ's responses), else for room; the
 * QPs behind it wait too (eng_room), so it does not starve. */
void eng_grant(struct uroce_eng *eng) {
  while (!ulist_empty(&eng->blocked)) {
    struct uroce_qp *w =
        ULIST_ENTRY(eng->blocked.next, struct uroce_qp, blocked);
    uint64_t g = (uint64_t)eng->cfg.tx_burst * w->mtu, used;
    if (w->want > g)
      g = w->want;
    used = eng->inflight + eng->reserved;
    if (used && used + g > eng->cfg.max_inflight)
      break;
    ulist_del(&w->blocked);
    w->in_blocked = false;
    w->turn += g;
    eng->reserved += g;
    eng_sched(eng, w);
  }
}

void eng_charge(struct uroce_eng *eng, struct uroce_qp *qp) {
  uint64_t c = 0;
  if (qp->type == UROCE_QPT_RC && qp_can_send(qp))
    c = (uint64_t)((uint32_t)uroce_psn_diff(qp->req.max_psn, qp->comp.psn) -
                   (qp_mp(qp) ? qp->mp.sacked : 0)) *
        qp->mtu;
  eng->inflight = eng->inflight - qp->charged + c;
  qp->charged = c;
  if (!qp_can_send(qp))
    eng_turn_end(eng, qp); /* (a QP in error keeps no grant) */
  eng_grant(eng);
}

void eng_turn_end(struct uroce_eng *eng, struct uroce_qp *qp) {
  if (!qp->turn)
    return;
  eng->reserved -= qp->turn;
  qp->turn = 0;
  eng_grant(eng);
}

bool eng_room(struct uroce_eng *eng, struct uroce_qp *qp, uint64_t n) {
  if (qp->turn >= n) { /* its grant */
    qp->turn -= n;
    eng->reserved -= n;
    return true;
  }
  eng_turn_end(eng, qp); /* too little left of it: back to the others */
  uint64_t used = eng->inflight + eng->reserved;
  /* Room, and nobody waiting for it first; or nothing in flight at all
   * (nothing would wake it). */
  if (!used || (!qp->in_blocked && ulist_empty(&eng->blocked) &&
                used + n <= eng->cfg.max_inflight))
    return true;
  if (!qp->in_blocked) {
    ulist_add_tail(&eng->blocked, &qp->blocked);
    qp->in_blocked = true;
    eng->stats.inflight_waits++;
  }
  qp->want = n;
  return false;
}

/* ---- PD, MR, AH ---- */

int uroce_eng_pd_new(struct uroce_eng *eng, struct uroce_pd **out) {
  if (!eng || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_pd *pd = eng_alloc(eng, sizeof(*pd));
  if (!pd)
    return -ENOMEM;
  pd->eng = eng;
  ulist_add_tail(&eng->pds, &pd->link);
  *out = pd;
  return 0;
}

int uroce_eng_pd_del(struct uroce_pd *pd) {
  if (!pd)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (pd->refs)
    return UROCE_ERR_BUSY;
  ulist_del(&pd->link);
  eng_free(pd->eng, pd);
  return 0;
}

struct uroce_eng *uroce_eng_of_pd(const struct uroce_pd *pd) {
  return pd->eng;
}

int uroce_eng_mr_reg(struct uroce_pd *pd, void *addr, size_t length,
                     uint32_t access, struct uroce_mr **out) {
  return uroce_eng_mr_reg_iova(pd, addr, length, (uint64_t)(uintptr_t)addr,
                               access, out);
}

int uroce_eng_mr_reg_iova(struct uroce_pd *pd, void *addr, size_t length,
                          uint64_t iova, uint32_t access,
                          struct uroce_mr **out) {
  if (!pd || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_eng *eng = pd->eng;
  if (!addr && !eng->phantom && length)
    return UROCE_ERR_INVALID_ARGUMENT;
  int rc = uroce_mr_table_add(&eng->mrs, pd, iova, length, access,
                              eng_rand(eng), out);
  if (rc == 0) {
    (*out)->host = (uint64_t)(uintptr_t)addr;
    pd->refs++;
  }
  return rc;
}

int uroce_eng_mr_dereg(struct uroce_mr *mr) {
  if (!mr || mr->state == MR_FREE || !mr->pd || mr->kind != MR_KIND_MR)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (mr->binds)
    return UROCE_ERR_BUSY;
  struct uroce_pd *pd = (struct uroce_pd *)mr->pd;
  uroce_mr_table_remove(&pd->eng->mrs, mr);
  pd->refs--;
  return 0;
}

int uroce_eng_mr_rereg(struct uroce_mr *mr, struct uroce_pd *pd, void *addr,
                       size_t length, uint32_t access) {
  if (!mr || !pd || !mr->pd || (!addr && !pd->eng->phantom && length))
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_pd *old = (struct uroce_pd *)mr->pd;
  if (old->eng != pd->eng || mr->kind != MR_KIND_MR)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (mr->binds)
    return UROCE_ERR_BUSY; /* windows are bound to it */
  if (mr->state == MR_FREE ||
      !uroce_mr_range_ok((uint64_t)(uintptr_t)addr, length, access))
    return UROCE_ERR_INVALID_ARGUMENT;
  old->refs--;
  pd->refs++;
  mr->pd = pd;
  mr->iova = mr->host = (uint64_t)(uintptr_t)addr;
  mr->length = length;
  mr->access = access;
  mr->state = MR_VALID;
  return 0;
}

int uroce_eng_mw_alloc(struct uroce_pd *pd, int type, struct uroce_mw **out) {
  if (!pd || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_mr *mw;
  int rc = uroce_mw_table_add(&pd->eng->mrs, pd, type, eng_rand(pd->eng), &mw);
  if (rc)
    return rc;
  pd->refs++;
  *out = (struct uroce_mw *)(void *)mw;
  return 0;
}

int uroce_eng_mw_dealloc(struct uroce_mw *h) {
  struct uroce_mr *mw = mw_entry(h);
  if (!h || mw->state == MR_FREE || !mw->pd || mw->kind == MR_KIND_MR)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_pd *pd = (struct uroce_pd *)mw->pd;
  uroce_mw_table_remove(&pd->eng->mrs, mw);
  pd->refs--;
  return 0;
}

int uroce_eng_ah_new(struct uroce_pd *pd, const struct uroce_ah_attr *attr,
                     struct uroce_ah **out) {
  if (!pd || !attr || !out || !attr->is_global)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_ah *ah = eng_alloc(pd->eng, sizeof(*ah));
  if (!ah)
    return -ENOMEM;
  ah->pd = pd;
  ah->attr = *attr;
  pd->refs++;
  ulist_add_tail(&pd->eng->ahs, &ah->link);
  *out = ah;
  return 0;
}

int uroce_eng_ah_del(struct uroce_ah *ah) {
  if (!ah)
    return UROCE_ERR_INVALID_ARGUMENT;
  ah->pd->refs--;
  ulist_del(&ah->link);
  eng_free(ah->pd->eng, ah);
  return 0;
}

struct uroce_eng *uroce_eng_of_ah(const struct uroce_ah *ah) {
  return ah->pd->eng;
}

/* ---- CQ ---- */

int uroce_eng_cq_new(struct uroce_eng *eng, uint32_t cqe,
                     struct uroce_cq **out) {
  if (!eng || !out || cqe == 0 || cqe > (1u << 22))
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_cq *cq = eng_alloc(eng, sizeof(*cq));
  if (!cq)
    return -ENOMEM;
  cq->ring = eng_alloc(eng, (size_t)cqe * sizeof(*cq->ring));
  if (!cq->ring) {
    eng_free(eng, cq);
    return -ENOMEM;
  }
  cq->eng = eng;
  cq->size = cqe;
  ulist_add_tail(&eng->cqs, &cq->link);
  *out = cq;
  return 0;
}

int uroce_eng_cq_del(struct uroce_cq *cq) {
  if (!cq)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (cq->refs)
    return UROCE_ERR_BUSY;
  ulist_del(&cq->link);
  eng_free(cq->eng, cq->ring);
  eng_free(cq->eng, cq);
  return 0;
}

void *uroce_eng_cq_user(const struct uroce_cq *cq) {
  return cq->user;
}

void uroce_eng_cq_set_user(struct uroce_cq *cq, void *user) {
  cq->user = user;
}

uint32_t uroce_eng_cq_mark(const struct uroce_cq *cq) {
  return __atomic_load_n(&cq->head, __ATOMIC_ACQUIRE);
}

bool uroce_eng_cq_added_since(const struct uroce_cq *cq, uint32_t mark) {
  return __atomic_load_n(&cq->head, __ATOMIC_ACQUIRE) != mark ||
         __atomic_load_n(&cq->overflow, __ATOMIC_ACQUIRE);
}

int uroce_eng_cq_resize(struct uroce_cq *cq, uint32_t cqe) {
  if (!cq || cqe == 0 || cqe > (1u << 22) || cq->head - cq->tail > cqe)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_wc *ring = eng_alloc(cq->eng, (size_t)cqe * sizeof(*ring));
  if (!ring)
    return -ENOMEM;
  /* head and tail keep counting: an armed CQ's mark stays meaningful. */
  for (uint32_t i = cq->tail; i != cq->head; i++)
    ring[i % cqe] = cq->ring[i % cq->size];
  eng_free(cq->eng, cq->ring);
  cq->ring = ring;
  cq->size = cqe;
  return 0;
}

uint32_t uroce_eng_cq_clean(struct uroce_cq *cq, uint32_t qpn) {
  /* From the newest back, the kept ones packed against head: the tail
   * moves forward past the dropped ones, as a poll would move it. */
  uint32_t keep = cq->head;
  for (uint32_t i = cq->head; i != cq->tail;) {
    i--;
    struct uroce_wc wc = cq->ring[i % cq->size];
    if (wc.qp_num != qpn)
      cq->ring[--keep % cq->size] = wc;
  }
  uint32_t dropped = keep - cq->tail;
  __atomic_store_n(&cq->tail, keep, __ATOMIC_RELEASE);
  return dropped;
}

/* The ring is single-producer (the engine) single-consumer (whoever
 * polls): head and tail are published with release and read with acquire
 * so that a device's application thread can poll while its progress
 * thread pushes, without a shared lock. */
bool cq_push(struct uroce_cq *cq, const struct uroce_wc *wc) {
  if (__atomic_load_n(&cq->overflow, __ATOMIC_RELAXED))
    return false;
  uint32_t head = cq->head;
  if (head - __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE) >= cq->size) {
    __atomic_store_n(&cq->overflow, true, __ATOMIC_RELEASE);
    eng_async(cq->eng, UROCE_EVENT_CQ_ERR, cq);
    return false;
  }
  cq->ring[head % cq->size] = *wc;
  __atomic_store_n(&cq->head, head + 1, __ATOMIC_RELEASE);
  return true;
}

int uroce_eng_cq_poll(struct uroce_cq *cq, int n, struct uroce_wc *wc) {
  if (!cq || n < 0 || (n && !wc))
    return UROCE_ERR_INVALID_ARGUMENT;
  uint32_t tail = cq->tail;
  uint32_t head = __atomic_load_n(&cq->head, __ATOMIC_ACQUIRE);
  int k = 0;
  while (k < n && tail != head)
    wc[k++] = cq->ring[tail++ % cq->size];
  __atomic_store_n(&cq->tail, tail, __ATOMIC_RELEASE);
  if (k == 0 && __atomic_load_n(&cq->overflow, __ATOMIC_ACQUIRE))
    return UROCE_ERR_CQ_OVERFLOW;
  return k;
}

/* ---- receive queues and SRQ ---- */

static int rq_init(struct uroce_eng *eng, struct rq *q, uint32_t max_wr,
                   uint32_t max_sge) {
  uint32_t n = pow2_at_least(max_wr ? max_wr : 1);
  uint32_t sge = max_sge ? max_sge : 1;
  q->wqe = eng_alloc(eng, (size_t)n * sizeof(*q->wqe));
  q->sge = eng_alloc(eng, (size_t)n * sge * sizeof(*q->sge));
  if (!q->wqe || !q->sge) {
    eng_free(eng, q->wqe);
    eng_free(eng, q->sge);
    q->wqe = 0;
    q->sge = 0;
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < n; i++)
    q->wqe[i].sge = &q->sge[(size_t)i * sge];
  q->max_wr = max_wr;
  q->max_sge = max_sge;
  q->mask = n - 1;
  q->head = q->tail = 0;
  return 0;
}

int rq_alloc(struct uroce_eng *eng, struct rq *q, uint32_t max_wr,
             uint32_t max_sge) {
  return rq_init(eng, q, max_wr, max_sge);
}

void rq_release(struct uroce_eng *eng, struct rq *q) {
  eng_free(eng, q->wqe);
  eng_free(eng, q->sge);
  q->wqe = 0;
  q->sge = 0;
}

int rq_post(struct rq *q, struct uroce_recv_wr *wr,
            struct uroce_recv_wr **bad) {
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->max_sge ||
        (wr->num_sge && !wr->sg_list)) {
      *bad = wr;
      return UROCE_ERR_INVALID_ARGUMENT;
    }
    if (rq_count(q) >= q->max_wr) {
      *bad = wr;
      return UROCE_ERR_QUEUE_FULL;
    }
    struct rwqe *w = &q->wqe[q->head & q->mask];
    w->wr_id = wr->wr_id;
    w->nsge = (uint32_t)wr->num_sge;
    w->keys = RWQE_KEYS_UNCHECKED;
    w->whole = false;
    if (w->nsge)
      memcpy(w->sge, wr->sg_list, w->nsge * sizeof(*w->sge));
    q->head++;
  }
  return 0;
}

int uroce_eng_srq_new(struct uroce_pd *pd, const struct uroce_srq_attr *attr,
                      struct uroce_srq **out) {
  if (!pd || !attr || !out || attr->max_wr == 0 || attr->max_wr > 65536 ||
      attr->max_sge > UROCE_MAX_SGE || attr->srq_limit >= attr->max_wr)
    return attr && (attr->max_wr > 65536 || attr->max_sge > UROCE_MAX_SGE)
               ? UROCE_ERR_CAPS
               : UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_eng *eng = pd->eng;
  struct uroce_srq *srq = eng_alloc(eng, sizeof(*srq));
  if (!srq)
    return -ENOMEM;
  if (rq_init(eng, &srq->rq, attr->max_wr, attr->max_sge)) {
    eng_free(eng, srq);
    return -ENOMEM;
  }
  srq->eng = eng;
  srq->pd = pd;
  srq->limit = attr->srq_limit;
  srq->num = eng_srq_num(eng);
  ulist_init(&srq->xlink);
  pd->refs++;
  ulist_add_tail(&eng->srqs, &srq->link);
  *out = srq;
  return 0;
}

int uroce_eng_srq_modify(struct uroce_srq *srq,
                         const struct uroce_srq_attr *attr, int mask) {
  if (!srq || !attr || (mask & ~(UROCE_SRQ_MAX_WR | UROCE_SRQ_LIMIT)))
    return UROCE_ERR_INVALID_ARGUMENT;
  if (mask & UROCE_SRQ_MAX_WR)
    return UROCE_ERR_NOT_SUPPORTED;
  if (mask & UROCE_SRQ_LIMIT) {
    if (attr->srq_limit >= srq->rq.max_wr)
      return UROCE_ERR_INVALID_ARGUMENT;
    srq->limit = attr->srq_limit;
  }
  return 0;
}

int uroce_eng_srq_query(struct uroce_srq *srq, struct uroce_srq_attr *attr) {
  if (!srq || !attr)
    return UROCE_ERR_INVALID_ARGUMENT;
  attr->max_wr = srq->rq.max_wr;
  attr->max_sge = srq->rq.max_sge;
  attr->srq_limit = srq->limit;
  return 0;
}

int uroce_eng_srq_del(struct uroce_srq *srq) {
  if (!srq)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (srq->refs)
    return UROCE_ERR_BUSY;
  if (srq->xrcd)
    xrc_srq_gone(srq);
  srq->pd->refs--;
  ulist_del(&srq->link);
  rq_release(srq->eng, &srq->rq);
  eng_free(srq->eng, srq);
  return 0;
}

struct uroce_eng *uroce_eng_of_srq(const struct uroce_srq *srq) {
  return srq->eng;
}

int uroce_eng_srq_post_recv(struct uroce_srq *srq, struct uroce_recv_wr *wr,
                            struct uroce_recv_wr **bad) {
  struct uroce_recv_wr *dummy;
  if (!bad)
    bad = &dummy;
  *bad = wr;
  if (!srq)
    return UROCE_ERR_INVALID_ARGUMENT;
  int rc = rq_post(&srq->rq, wr, bad);
  /* Receivers waiting on the SRQ can proceed now. */
  struct uroce_eng *eng = srq->eng;
  for (struct ulist *l = eng->qps.next; l != &eng->qps; l = l->next) {
    struct uroce_qp *qp = ULIST_ENTRY(l, struct uroce_qp, link);
    if (qp->srq == srq)
      eng_sched(eng, qp);
  }
  return rc;
}

bool rq_take(struct uroce_qp *qp) {
  struct rq *q = qp->srq ? &qp->srq->rq : &qp->rq;
  if (rq_count(q) == 0)
    return false;
  struct rwqe *w = &q->wqe[q->tail & q->mask];
  struct resp *r = &qp->resp;
  r->rwqe = *w;
  r->rwqe.sge = r->rwqe_sge;
  memcpy(r->rwqe_sge, w->sge, w->nsge * sizeof(*w->sge));
  q->tail++;
  r->have_rwqe = true;
  r->rcv_len = 0;
  r->rcv_cap = 0;
  if (qp->srq && qp->srq->limit && rq_count(q) < qp->srq->limit) {
    qp->srq->limit = 0; /* the event disarms the limit, as in verbs */
    eng_async(qp->eng, UROCE_EVENT_SRQ_LIMIT_REACHED, qp->srq);
  }
  return true;
}

/* ---- packets in ---- */

/* A packet dropped before it reached a QP's state machines; qp is NULL
 * when it names none of ours. */
static void drop(struct uroce_eng *eng, struct uroce_qp *qp,
                 const struct uroce_pkt_info *pi, enum uroce_drop why) {
  eng->stats.drops[why]++;
  if (__builtin_expect(eng->trace != 0, 0))
    eng_trace_ev(eng, qp, pi->bth ? pi->dqpn : 0, UROCE_TR_DROP,
                 pi->bth ? pi->psn : 0, (uint8_t)why, 0);
}

static uint8_t qp_transport(const struct uroce_qp *qp) {
  return qp->xrc                    ? UROCE_TRANSPORT_XRC
         : qp->type == UROCE_QPT_RC ? UROCE_TRANSPORT_RC
         : qp->type == UROCE_QPT_UC ? UROCE_TRANSPORT_UC
                                    : UROCE_TRANSPORT_UD;
}

/* Only the headers of a trimmed packet came: a request's loss is told to
 * the requester (resp_trimmed); a READ response's is asked for again. */
static void trimmed(struct uroce_eng *eng, struct uroce_qp *qp,
                    const struct uroce_pkt_info *pi) {
  eng->stats.trims_rx++;
  if (pi->op->mask & UROCE_OPM_REQ) {
    if (qp_can_recv(qp))
      resp_trimmed(qp, pi);
    else
      drop(eng, qp, pi, UROCE_DROP_TRIMMED);
  } else {
    drop(eng, qp, pi, UROCE_DROP_TRIMMED);
    if (qp->state == UROCE_QPS_RTS && (pi->op->mask & UROCE_OPM_READ))
      mp_trimmed_resp(qp, pi->psn);
  }
  eng_sched(eng, qp);
}

int uroce_eng_read_pkt(struct uroce_eng *eng, const struct uroce_rx_pkt *rx,
                       uint64_t now) {
  if (!eng || !rx)
    return UROCE_ERR_INVALID_ARGUMENT;
  const struct uroce_pkt_info *pi = &rx->pi;
  eng->stats.rx_pkts++;
  if (now > eng->now)
    eng->now = now;
  if (!pi->bth || !pi->op || pi->op != uroce_opcode(pi->opcode) ||
      pi->hdr_len != pi->op->length ||
      (!eng->phantom &&
       (uint64_t)pi->hdr_len + pi->payload_len + pi->pad + UROCE_ICRC_LEN >
           pi->len)) {
    drop(eng, 0, pi, UROCE_DROP_MALFORMED);
    return 0;
  }
  struct uroce_qp *qp = eng_qp_lookup(eng, pi->dqpn);
  if (!qp) {
    drop(eng, 0, pi, UROCE_DROP_NO_QP);
    return 0;
  }
  eng_touch(eng, qp);
  /* A connected QP hears only its peer (CNPs included): anyone who guesses
   * a QPN and a PSN could otherwise write into its memory regions, the
   * ICRC being no authentication. The UDP source port is the peer's flow
   * entropy and may be anything. */
  if (qp->type != UROCE_QPT_UD && memcmp(rx->sgid, qp->av.dgid, 16) != 0) {
    drop(eng, qp, pi, UROCE_DROP_PEER);
    return 0;
  }
  if (pi->op->mask & UROCE_OPM_CNP) {
    eng->stats.cnps_rx++;
    qp_trace(qp, UROCE_TR_CNP_RX, 0, 0, 0);
    eng->cc->on_cnp_rx(qp->cc_state, now);
    qp_trace_cc(qp, now, UROCE_TRC_CNP);
    eng_sched(eng, qp);
    return 0;
  }
  /* An XRC initiator takes only responses, a target only requests. */
  if (uroce_opcode_transport(pi->opcode) != qp_transport(qp) ||
      (qp->xrc && !(pi->op->mask & UROCE_OPM_REQ) != (qp->xrc == XRC_INI))) {
    drop(eng, qp, pi, UROCE_DROP_TRANSPORT);
    return 0;
  }
  /* One P_Key table entry: the default partition, full membership. */
  if ((uroce_bth_pkey(pi->bth) & 0x7FFF) != 0x7FFF) {
    drop(eng, qp, pi, UROCE_DROP_PKEY);
    return 0;
  }
  if (rx->ecn == 3 && qp->state != UROCE_QPS_RESET) {
    eng->stats.ce_rx++;
    eng->cc->on_ce_marked_rx(qp->cc_state, now);
    if (!qp->cnp_pending && (qp->last_cnp == UINT64_MAX ||
                             now - qp->last_cnp >= eng->cfg.cnp_interval_ns)) {
      const uint8_t *deth = uroce_pkt_hdr(pi, UROCE_HDR_DETH);
      qp->cnp_pending = true;
      memcpy(qp->cnp_dgid, rx->sgid, 16);
      qp->cnp_dqpn = deth ? uroce_deth_sqp(deth) : qp->dest_qpn;
    }
  }
  if (qp->type == UROCE_QPT_RC && qp->state != UROCE_QPS_RESET)
    mp_peer(qp, rx);
  if (rx->flags & UROCE_RX_TRIMMED) {
    trimmed(eng, qp, pi);
    return 0;
  }
  if (pi->op->mask & UROCE_OPM_REQ) {
    if (!qp_can_recv(qp)) {
      drop(eng, qp, pi, UROCE_DROP_QP_STATE);
      return 0;
    }
    resp_rx(qp, rx, now);
  } else {
    if (qp->state != UROCE_QPS_RTS && qp->state != UROCE_QPS_SQD) {
      drop(eng, qp, pi, UROCE_DROP_QP_STATE);
      return 0;
    }
    comp_rx(qp, rx, now);
    eng_charge(eng, qp);
  }
  eng_sched(eng, qp);
  return 0;
}

/* ---- packets out ---- */

static int cnp_make_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx,
                        uint64_t now) {
  const struct uroce_opcode_info *op = uroce_opcode(UROCE_OP_CNP);
  memset(tx->hdr, 0, UROCE_TX_HDR_MAX);
  qp_put_bth(qp, tx->hdr, UROCE_OP_CNP, false, 0, qp->cnp_dqpn, false, 0);
  uroce_bth_set_becn(tx->hdr, true);
  tx->hdr_len = op->length;
  tx->nseg = 0;
  tx->payload_len = 0;
  tx->pad = 0;
  qp_tx_addr(qp, tx);
  memcpy(tx->dgid, qp->cnp_dgid, 16);
  tx->ecn = 0; /* CNPs are sent not ECN-capable, so they are never marked */
  qp->cnp_pending = false;
  qp->last_cnp = now;
  qp->eng->stats.cnps_tx++;
  qp_trace(qp, UROCE_TR_CNP_TX, 0, 0, 0);
  return 1;
}

static int qp_make_pkt(struct uroce_qp *qp, struct uroce_tx_pkt *tx,
                       uint64_t now) {
  if (qp->cnp_pending && qp->state != UROCE_QPS_RESET)
    return cnp_make_pkt(qp, tx, now);
  if (resp_make_pkt(qp, tx, now))
    return 1;
  return req_make_pkt(qp, tx, now);
}

int uroce_eng_write_pkt(struct uroce_eng *eng, struct uroce_tx_pkt *tx,
                        uint64_t now) {
  return uroce_eng_write_pkt_if(eng, tx, now, 0, 0);
}

/* A CNP or an ACK/NAK of qp, if it owes one: 1, else 0. */
static int ctl_pkt(struct uroce_eng *eng, struct uroce_qp *qp,
                   struct uroce_tx_pkt *tx, uint64_t now) {
  int made = 0;
  if (qp->cnp_pending && qp->state != UROCE_QPS_RESET)
    made = cnp_make_pkt(qp, tx, now);
  else
    made = resp_make_ctl_pkt(qp, tx);
  if (made) {
    eng->stats.tx_pkts++;
    eng->cc->on_tx(qp->cc_state, now, uroce_tx_len(tx));
  }
  return made;
}

int uroce_eng_write_ctl_pkt(struct uroce_eng *eng, struct uroce_tx_pkt *tx,
                            uint64_t now) {
  if (!eng || !tx)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (now > eng->now)
    eng->now = now;
  /* Walk the schedule without taking anyone off it: a QP skipped here
   * still has its data to send once write_pkt runs again. */
  for (struct ulist *l = eng->sched.next; l != &eng->sched; l = l->next) {
    struct uroce_qp *qp = ULIST_ENTRY(l, struct uroce_qp, sched);
    eng_touch(eng, qp);
    if (ctl_pkt(eng, qp, tx, now))
      return 1;
  }
  return 0;
}

int uroce_eng_write_pkt_if(struct uroce_eng *eng, struct uroce_tx_pkt *tx,
                           uint64_t now,
                           bool (*data_ok)(void *ctx, struct uroce_qp *qp),
                           void *ctx) {
  if (!eng || !tx)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (now > eng->now)
    eng->now = now;
  /* Round robin: a QP that sends goes to the back (after tx_burst packets
   * in a row), one with nothing to send leaves the schedule, one data_ok
   * refuses keeps its place. */
  for (struct ulist *l = eng->sched.next, *next; l != &eng->sched; l = next) {
    next = l->next;
    struct uroce_qp *qp = ULIST_ENTRY(l, struct uroce_qp, sched);
    eng_touch(eng, qp);
    if (data_ok && !data_ok(ctx, qp)) {
      if (ctl_pkt(eng, qp, tx, now))
        return 1;
      continue;
    }
    ulist_del(&qp->sched);
    qp->in_sched = false;
    if (qp_make_pkt(qp, tx, now)) {
      eng_charge(eng, qp);
      if (++qp->burst < eng->cfg.tx_burst && !qp->in_sched) {
        ulist_add_tail(eng->sched.next, &qp->sched); /* first again */
        qp->in_sched = true;
      } else {
        qp->burst = 0;
        eng_turn_end(eng, qp);
      }
      eng_sched(eng, qp);
      eng->stats.tx_pkts++;
      eng->cc->on_tx(qp->cc_state, now, uroce_tx_len(tx));
      return 1;
    }
    qp->burst = 0;
    eng_turn_end(eng, qp);
  }
  return 0;
}

int uroce_eng_release_acks(struct uroce_eng *eng) {
  int n = 0;
  if (!eng)
    return 0;
  while (!ulist_empty(&eng->held)) {
    struct uroce_qp *qp = ULIST_ENTRY(eng->held.next, struct uroce_qp, held);
    ulist_del(&qp->held);
    qp->in_held = false;
    if (resp_release_held(qp)) {
      eng_sched(eng, qp);
      n++;
    }
  }
  return n;
}

/* ---- timers ---- */

static uint64_t qp_next_expiry(const struct uroce_eng *eng,
                               const struct uroce_qp *qp) {
  uint64_t t = qp->req.rto_deadline;
  if (qp->req.rnr_deadline < t)
    t = qp->req.rnr_deadline;
  if (qp->req.pace_deadline < t)
    t = qp->req.pace_deadline;
  if (qp->resp.ack_deadline < t)
    t = qp->resp.ack_deadline;
  if (qp->mp.gap_timer < t)
    t = qp->mp.gap_timer;
  uint64_t c = eng->cc->next_expiry(qp->cc_state);
  return c < t ? c : t;
}

/* ---- the timer heap: QPs by their earliest deadline ---- */

static bool tq_less(const struct uroce_qp *a, const struct uroce_qp *b) {
  return a->exp_key < b->exp_key ||
         (a->exp_key == b->exp_key && a->seqno < b->seqno);
}

static void tq_put(struct uroce_eng *eng, uint32_t i, struct uroce_qp *qp) {
  eng->tq[i] = qp;
  qp->tq_idx = i;
}

static void tq_up(struct uroce_eng *eng, uint32_t i) {
  struct uroce_qp *qp = eng->tq[i];
  while (i) {
    uint32_t p = (i - 1) / 2;
    if (!tq_less(qp, eng->tq[p]))
      break;
    tq_put(eng, i, eng->tq[p]);
    i = p;
  }
  tq_put(eng, i, qp);
}

static void tq_down(struct uroce_eng *eng, uint32_t i) {
  struct uroce_qp *qp = eng->tq[i];
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= eng->tq_n)
      break;
    if (c + 1 < eng->tq_n && tq_less(eng->tq[c + 1], eng->tq[c]))
      c++;
    if (!tq_less(eng->tq[c], qp))
      break;
    tq_put(eng, i, eng->tq[c]);
    i = c;
  }
  tq_put(eng, i, qp);
}

static void tq_remove(struct uroce_eng *eng, struct uroce_qp *qp) {
  uint32_t i = qp->tq_idx;
  struct uroce_qp *last = eng->tq[--eng->tq_n];
  qp->tq_idx = TQ_NONE;
  if (last == qp)
    return;
  tq_put(eng, i, last);
  tq_up(eng, i);
  tq_down(eng, last->tq_idx);
}

/* Re-keys the QPs touched since the last look: a QP with no deadline
 * leaves the heap, one with a deadline takes its place in it. */
static void tq_flush(struct uroce_eng *eng) {
  for (uint32_t k = 0; k < eng->ndirty; k++) {
    struct uroce_qp *qp = eng->dirty[k];
    qp->tq_dirty = false;
    qp->exp_key = qp_next_expiry(eng, qp);
    if (qp->exp_key == UINT64_MAX) {
      if (qp->tq_idx != TQ_NONE)
        tq_remove(eng, qp);
    } else if (qp->tq_idx != TQ_NONE) {
      tq_up(eng, qp->tq_idx);
      tq_down(eng, qp->tq_idx);
    } else {
      tq_put(eng, eng->tq_n++, qp);
      tq_up(eng, qp->tq_idx);
    }
  }
  eng->ndirty = 0;
}

uint64_t uroce_eng_next_expiry(struct uroce_eng *eng) {
  tq_flush(eng);
  uint64_t t = eng->tq_n ? eng->tq[0]->exp_key : UINT64_MAX;
#ifndef NDEBUG
  /* Debug builds check the heap against a scan of every QP: a deadline
   * changed without eng_touch would show here. */
  uint64_t scan = UINT64_MAX;
  for (const struct ulist *l = eng->qps.next; l != &eng->qps; l = l->next) {
    uint64_t q =
        qp_next_expiry(eng, ULIST_ENTRY(l, const struct uroce_qp, link));
    if (q < scan)
      scan = q;
  }
  assert(t == scan);
#endif
  return t;
}

static int by_seqno(const void *a, const void *b) {
  const struct uroce_qp *x = *(struct uroce_qp *const *)a;
  const struct uroce_qp *y = *(struct uroce_qp *const *)b;
  return x->seqno < y->seqno ? -1 : x->seqno > y->seqno;
}

int uroce_eng_handle_expiry(struct uroce_eng *eng, uint64_t now) {
  if (now > eng->now)
    eng->now = now;
  /* The QPs due leave the heap for the dirty list (re-keyed at the next
   * look) and are served in creation order, as a scan of every QP would. */
  tq_flush(eng);
  while (eng->tq_n && eng->tq[0]->exp_key <= now) {
    struct uroce_qp *qp = eng->tq[0];
    tq_remove(eng, qp);
    eng_touch(eng, qp);
  }
  uint32_t ndue = eng->ndirty;
  if (ndue > 1)
    qsort(eng->dirty, ndue, sizeof(*eng->dirty), by_seqno);
  for (uint32_t k = 0; k < ndue; k++) {
    struct uroce_qp *qp = eng->dirty[k];
    if (eng->cc->next_expiry(qp->cc_state) <= now) {
      eng->cc->handle_expiry(qp->cc_state, now);
      qp_trace_cc(qp, now, UROCE_TRC_TIMER);
    }
    if (qp->resp.ack_deadline <= now) {
      qp->resp.ack_deadline = UINT64_MAX;
      qp->resp.ack_now = true;
      qp->resp.ack_held = false;
    }
    if (qp->req.pace_deadline <= now)
      qp->req.pace_deadline = UINT64_MAX;
    if (qp->req.rnr_deadline <= now)
      comp_rnr_expired(qp, now);
    if (qp->mp.gap_timer <= now)
      mp_gap_expiry(qp, now);
    if (qp->req.rto_deadline <= now)
      comp_timeout(qp, now);
    eng_charge(eng, qp);
    eng_sched(eng, qp);
  }
  return 0;
}
