#include "coll_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

#define MAX_MR 8

typedef struct ev {
  uint64_t at, seq;
  uroce_coll_cqe cqe;
  /* a WRITE_DONE of a gathered write: the piece of the sender's own memory
   * it read, and its hash then; it must not change until this is polled */
  const char *src;
  size_t src_len;
  uint64_t src_hash;
} ev;

typedef struct mr_ent {
  char *addr;
  size_t len;
  uint32_t rkey;
  int remote; /* reg_mr: peers may write; reg_mr_src: local reads only */
} mr_ent;

typedef struct rank_st {
  coll_mem *m;
  int rank;
  int dead;
  uroce_coll_transport tp;
  mr_ent mrs[MAX_MR];
  uint32_t next_key;
  int src_inflight; /* gathered writes whose WRITE_DONE was not polled */
  ev *q;
  size_t nq, capq;
} rank_st;

struct coll_mem {
  int n;
  uint64_t now, seed, max_delay, done_delay, seq, poll_tick, writes, writes2;
  uint64_t violations;
  int error_on_dead;
  rank_st *r;
};

static uint64_t hash(const char *p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
  }
  for (; i < n; i++)
    h = (h ^ (uint8_t)p[i]) * 0x94D049BB133111EBull;
  return h;
}

static ev *push(coll_mem *m, int rank, const uroce_coll_cqe *c) {
  rank_st *r = &m->r[rank];
  if (r->nq == r->capq) {
    r->capq = r->capq ? r->capq * 2 : 64;
    r->q = realloc(r->q, r->capq * sizeof *r->q);
    if (!r->q)
      abort();
  }
  uint64_t d = 0;
  if (m->max_delay)
    d = splitmix64(&m->seed) % (m->max_delay / 1000 + 1) * 1000;
  if (c->kind == UROCE_COLL_CQE_WRITE_DONE)
    d += m->done_delay;
  r->q[r->nq] = (ev){m->now + d, m->seq++, *c, NULL, 0, 0};
  return &r->q[r->nq++];
}

static int add_mr(rank_st *r, void *addr, size_t len, int remote,
                  uroce_coll_mr *mr) {
  for (int i = 0; i < MAX_MR; i++)
    if (!r->mrs[i].addr) {
      /* keys never repeat, so a stale key opens nothing */
      uint32_t key = (uint32_t)(r->rank << 16) | (++r->next_key & 0xffff);
      r->mrs[i] = (mr_ent){addr, len, key, remote};
      *mr = (uroce_coll_mr){addr, len, remote ? (uint64_t)(uintptr_t)addr : 0,
                            key,  key, NULL};
      return 0;
    }
  return UROCE_ERR_CAPS;
}

static int reg_mr(void *ctx, void *addr, size_t len, uroce_coll_mr *mr) {
  return add_mr(ctx, addr, len, 1, mr);
}

static int reg_mr_src(void *ctx, void *addr, size_t len, uroce_coll_mr *mr) {
  return add_mr(ctx, addr, len, 0, mr);
}

static void dereg_mr(void *ctx, uroce_coll_mr *mr) {
  rank_st *r = ctx;
  for (int i = 0; i < MAX_MR; i++)
    if (r->mrs[i].addr && r->mrs[i].rkey == mr->rkey)
      r->mrs[i].addr = NULL;
}

/* Local key check, as the requester would: [off, off+len) of mr is inside
 * a region this rank has registered under mr's key. */
static int local_ok(const rank_st *r, const uroce_coll_mr *mr, size_t off,
                    size_t len) {
  if (!mr || off + len > mr->length)
    return 0;
  uintptr_t a = (uintptr_t)mr->addr + off;
  for (int i = 0; i < MAX_MR; i++) {
    const mr_ent *e = &r->mrs[i];
    if (e->addr && e->rkey == mr->lkey && a >= (uintptr_t)e->addr &&
        a + len <= (uintptr_t)e->addr + e->len)
      return 1;
  }
  return 0;
}

/* The write of pieces (mr, off, len) and (mr2, off2, len2) as one message. */
static int write2(rank_st *r, int peer, const uroce_coll_mr *mr, size_t off,
                  size_t len, const uroce_coll_mr *mr2, size_t off2,
                  size_t len2, uint64_t raddr, uint32_t rkey, uint32_t imm,
                  uint64_t wr_id) {
  coll_mem *m = r->m;
  if (r->dead)
    return UROCE_ERR_BAD_STATE;
  if (peer < 0 || peer >= m->n || peer == r->rank)
    return UROCE_ERR_INVALID_ARGUMENT;
  if ((len && !local_ok(r, mr, off, len)) ||
      (len2 && !local_ok(r, mr2, off2, len2)))
    return UROCE_ERR_INVALID_ARGUMENT;
  m->writes++;
  if (len2)
    m->writes2++;
  rank_st *t = &m->r[peer];
  uroce_coll_cqe done = {wr_id, 0, 0, peer, UROCE_COLL_CQE_WRITE_DONE, 0};
  const char *src2 = len2 ? (const char *)mr2->addr + off2 : NULL;
  ev *d;
  if (t->dead) {
    if (m->error_on_dead) {
      done.status = -1;
      d = push(m, r->rank, &done);
      goto gathered;
    }
    /* never completes: the piece stays in flight */
    r->src_inflight += len2 != 0;
    return 0;
  }
  /* remote access check, as a responder would: a region registered for
   * remote write, and the whole message inside it */
  size_t total = len + len2;
  mr_ent *e = NULL;
  for (int i = 0; i < MAX_MR; i++)
    if (t->mrs[i].addr && t->mrs[i].remote && t->mrs[i].rkey == rkey)
      e = &t->mrs[i];
  uint64_t base = e ? (uint64_t)(uintptr_t)e->addr : 0;
  if (!e || raddr < base || raddr + total > base + e->len) {
    done.status = -2; /* remote access error */
    d = push(m, r->rank, &done);
    goto gathered;
  }
  if (len)
    memcpy(e->addr + (raddr - base), (char *)mr->addr + off, len);
  if (len2)
    memcpy(e->addr + (raddr - base) + len, src2, len2);
  uroce_coll_cqe in = {
      0, imm, (uint32_t)total, r->rank, UROCE_COLL_CQE_RECV_IMM, 0};
  push(m, peer, &in);
  d = push(m, r->rank, &done);
gathered:
  if (len2) {
    /* a real transport may read the piece again until the completion
     * (retransmission): it must stay as it was */
    d->src = src2;
    d->src_len = len2;
    d->src_hash = hash(src2, len2);
    r->src_inflight++;
  }
  return 0;
}

static int post_write_imm(void *ctx, int peer, const uroce_coll_mr *mr,
                          size_t off, size_t len, uint64_t raddr, uint32_t rkey,
                          uint32_t imm, uint64_t wr_id) {
  return write2(ctx, peer, mr, off, len, NULL, 0, 0, raddr, rkey, imm, wr_id);
}

static int post_write_imm2(void *ctx, int peer, const uroce_coll_mr *mr,
                           size_t off, size_t len, const uroce_coll_mr *mr2,
                           size_t off2, size_t len2, uint64_t raddr,
                           uint32_t rkey, uint32_t imm, uint64_t wr_id) {
  if (!len || !len2)
    return UROCE_ERR_INVALID_ARGUMENT;
  return write2(ctx, peer, mr, off, len, mr2, off2, len2, raddr, rkey, imm,
                wr_id);
}

static int poll(void *ctx, uroce_coll_cqe *out, int max) {
  rank_st *r = ctx;
  coll_mem *m = r->m;
  m->now += m->poll_tick;
  if (r->dead)
    return 0;
  int n = 0;
  while (n < max) {
    /* earliest due event; among equals the first queued */
    size_t best = (size_t)-1;
    for (size_t i = 0; i < r->nq; i++) {
      if (r->q[i].at > m->now)
        continue;
      if (best == (size_t)-1 || r->q[i].at < r->q[best].at ||
          (r->q[i].at == r->q[best].at && r->q[i].seq < r->q[best].seq))
        best = i;
    }
    if (best == (size_t)-1)
      break;
    const ev *e = &r->q[best];
    if (e->src) {
      r->src_inflight--;
      if (hash(e->src, e->src_len) != e->src_hash) {
        m->violations++;
        fprintf(stderr,
                "coll_mem: rank %d changed %zu bytes at %p while its write "
                "to rank %d read them\n",
                r->rank, e->src_len, (const void *)e->src, e->cqe.peer);
      }
    }
    out[n++] = e->cqe;
    r->q[best] = r->q[--r->nq];
  }
  return n;
}

static uint64_t now_ns(void *ctx) {
  return ((rank_st *)ctx)->m->now;
}

coll_mem *coll_mem_new(int n, uint64_t seed, uint64_t max_delay_ns) {
  coll_mem *m = calloc(1, sizeof *m);
  m->n = n;
  m->seed = seed;
  m->max_delay = max_delay_ns;
  m->now = 1000000;
  m->r = calloc((size_t)n, sizeof *m->r);
  for (int i = 0; i < n; i++) {
    rank_st *r = &m->r[i];
    r->m = m;
    r->rank = i;
    r->tp = (uroce_coll_transport){.ctx = r,
                                   .rank = i,
                                   .size = n,
                                   .reg_mr = reg_mr,
                                   .dereg_mr = dereg_mr,
                                   .post_write_imm = post_write_imm,
                                   .poll = poll,
                                   .now_ns = now_ns};
  }
  coll_mem_set_gather(m, 1);
  return m;
}

void coll_mem_set_gather(coll_mem *m, int on) {
  for (int i = 0; i < m->n; i++) {
    m->r[i].tp.reg_mr_src = on ? reg_mr_src : NULL;
    m->r[i].tp.post_write_imm2 = on ? post_write_imm2 : NULL;
  }
}

void coll_mem_set_done_delay(coll_mem *m, uint64_t ns) {
  m->done_delay = ns;
}

uint64_t coll_mem_writes2(const coll_mem *m) {
  return m->writes2;
}

uint64_t coll_mem_violations(const coll_mem *m) {
  return m->violations;
}

int coll_mem_src_inflight(const coll_mem *m, int rank) {
  return m->r[rank].src_inflight;
}

int coll_mem_mr_access(const coll_mem *m, int rank, const void *addr) {
  int acc = -1;
  for (int i = 0; i < MAX_MR; i++) {
    const mr_ent *e = &m->r[rank].mrs[i];
    if (e->addr && (uintptr_t)addr >= (uintptr_t)e->addr &&
        (uintptr_t)addr < (uintptr_t)e->addr + e->len && e->remote > acc)
      acc = e->remote;
  }
  return acc;
}

int coll_mem_mrs(const coll_mem *m, int rank) {
  int k = 0;
  for (int i = 0; i < MAX_MR; i++)
    k += m->r[rank].mrs[i].addr != NULL;
  return k;
}

void coll_mem_del(coll_mem *m) {
  if (!m)
    return;
  for (int i = 0; i < m->n; i++)
    free(m->r[i].q);
  free(m->r);
  free(m);
}

uroce_coll_transport *coll_mem_tp(coll_mem *m, int rank) {
  return &m->r[rank].tp;
}
uint64_t coll_mem_now(const coll_mem *m) {
  return m->now;
}
void coll_mem_tick(coll_mem *m, uint64_t ns) {
  m->now += ns;
}
void coll_mem_set_poll_tick(coll_mem *m, uint64_t ns) {
  m->poll_tick = ns;
}
uint64_t coll_mem_writes(const coll_mem *m) {
  return m->writes;
}

void coll_mem_kill(coll_mem *m, int rank, int error_completions) {
  m->r[rank].dead = 1;
  m->r[rank].nq = 0;
  m->error_on_dead = error_completions;
}

int coll_mem_dead(const coll_mem *m, int rank) {
  return m->r[rank].dead;
}

int coll_mem_comms(coll_mem *m, const uroce_coll_config *cfg,
                   uroce_coll_comm **comms) {
  size_t isz = uroce_coll_comm_info_size();
  char *blobs = calloc((size_t)m->n, isz);
  int rc = 0;
  for (int i = 0; i < m->n && rc == 0; i++) {
    rc = uroce_coll_comm_new(&m->r[i].tp, cfg, &comms[i]);
    if (rc == 0) {
      int k = uroce_coll_comm_info(comms[i], blobs + (size_t)i * isz, isz);
      rc = k < 0 ? k : 0;
    }
  }
  for (int i = 0; i < m->n && rc == 0; i++)
    rc = uroce_coll_comm_connect(comms[i], blobs, (size_t)m->n * isz);
  free(blobs);
  return rc;
}

int coll_mem_run(coll_mem *m, uroce_coll_req **reqs, int *rc, uint64_t max_ns) {
  uint64_t end = m->now + max_ns;
  for (int i = 0; i < m->n; i++)
    rc[i] = reqs[i] ? UROCE_COLL_INPROGRESS : 0;
  for (;;) {
    int left = 0;
    for (int i = 0; i < m->n; i++) {
      if (!reqs[i] || m->r[i].dead || rc[i] != UROCE_COLL_INPROGRESS)
        continue;
      rc[i] = uroce_coll_test(reqs[i]);
      if (rc[i] == UROCE_COLL_INPROGRESS)
        left++;
      if (rc[i] == 0 && m->r[i].src_inflight) {
        /* done while the transport may still read the caller's buffer */
        m->violations++;
        fprintf(stderr,
                "coll_mem: rank %d completed with %d gathered writes in "
                "flight\n",
                i, m->r[i].src_inflight);
      }
    }
    if (!left || m->now >= end)
      break;
    m->now += 1000;
  }
  int left = 0;
  for (int i = 0; i < m->n; i++)
    if (reqs[i] && !m->r[i].dead && rc[i] == UROCE_COLL_INPROGRESS)
      left++;
  return left;
}
