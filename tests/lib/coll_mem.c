#include "coll_mem.h"

#include <stdlib.h>
#include <string.h>

#define MAX_MR 8

typedef struct ev {
  uint64_t at, seq;
  uroce_coll_cqe cqe;
} ev;

typedef struct mr_ent {
  char *addr;
  size_t len;
  uint32_t rkey;
} mr_ent;

typedef struct rank_st {
  coll_mem *m;
  int rank;
  int dead;
  uroce_coll_transport tp;
  mr_ent mrs[MAX_MR];
  ev *q;
  size_t nq, capq;
} rank_st;

struct coll_mem {
  int n;
  uint64_t now, seed, max_delay, seq, poll_tick, writes;
  int error_on_dead;
  rank_st *r;
};

static uint64_t rnd(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void push(coll_mem *m, int rank, const uroce_coll_cqe *c) {
  rank_st *r = &m->r[rank];
  if (r->nq == r->capq) {
    r->capq = r->capq ? r->capq * 2 : 64;
    r->q = realloc(r->q, r->capq * sizeof *r->q);
    if (!r->q)
      abort();
  }
  uint64_t d = 0;
  if (m->max_delay)
    d = rnd(&m->seed) % (m->max_delay / 1000 + 1) * 1000;
  r->q[r->nq++] = (ev){m->now + d, m->seq++, *c};
}

static int reg_mr(void *ctx, void *addr, size_t len, uroce_coll_mr *mr) {
  rank_st *r = ctx;
  for (int i = 0; i < MAX_MR; i++)
    if (!r->mrs[i].addr) {
      r->mrs[i] = (mr_ent){addr, len, (uint32_t)(r->rank << 8 | (i + 1))};
      *mr = (uroce_coll_mr){
          addr,           len, (uint64_t)(uintptr_t)addr, r->mrs[i].rkey,
          r->mrs[i].rkey, NULL};
      return 0;
    }
  return UROCE_ERR_CAPS;
}

static void dereg_mr(void *ctx, uroce_coll_mr *mr) {
  rank_st *r = ctx;
  for (int i = 0; i < MAX_MR; i++)
    if (r->mrs[i].addr && r->mrs[i].rkey == mr->rkey)
      r->mrs[i].addr = NULL;
}

static int post_write_imm(void *ctx, int peer, const uroce_coll_mr *mr,
                          size_t off, size_t len, uint64_t raddr, uint32_t rkey,
                          uint32_t imm, uint64_t wr_id) {
  rank_st *r = ctx;
  coll_mem *m = r->m;
  if (r->dead)
    return UROCE_ERR_BAD_STATE;
  if (peer < 0 || peer >= m->n || peer == r->rank)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (len && (!mr || off + len > mr->length))
    return UROCE_ERR_INVALID_ARGUMENT;
  m->writes++;
  rank_st *t = &m->r[peer];
  uroce_coll_cqe done = {wr_id, 0, 0, peer, UROCE_COLL_CQE_WRITE_DONE, 0};
  if (t->dead) {
    if (m->error_on_dead) {
      done.status = -1;
      push(m, r->rank, &done);
    }
    return 0;
  }
  /* remote access check, as a responder would */
  mr_ent *e = NULL;
  for (int i = 0; i < MAX_MR; i++)
    if (t->mrs[i].addr && t->mrs[i].rkey == rkey)
      e = &t->mrs[i];
  uint64_t base = e ? (uint64_t)(uintptr_t)e->addr : 0;
  if (!e || raddr < base || raddr + len > base + e->len) {
    done.status = -2; /* remote access error */
    push(m, r->rank, &done);
    return 0;
  }
  if (len)
    memcpy(e->addr + (raddr - base), (char *)mr->addr + off, len);
  uroce_coll_cqe in = {0, imm, (uint32_t)len, r->rank, UROCE_COLL_CQE_RECV_IMM,
                       0};
  push(m, peer, &in);
  push(m, r->rank, &done);
  return 0;
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
    out[n++] = r->q[best].cqe;
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
    r->tp = (uroce_coll_transport){
        r, i, n, reg_mr, dereg_mr, post_write_imm, poll, now_ns};
  }
  return m;
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
