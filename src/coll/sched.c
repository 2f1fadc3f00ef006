/* Algorithms as schedules: which regions go to and come from which peer in
 * which step. The engine in comm.c chunks and pipelines them.
 *
 * Tags pair a send with its receive at the peer; within one collective a
 * (peer, tag) pair is used once per direction. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_int.h"

enum {
  TAG_PRE = 1,
  TAG_POST = 2,
  TAG_UP = 10,    /* + tree */
  TAG_DOWN = 20,  /* + tree */
  TAG_HALF = 100, /* + step */
  TAG_DBL = 200,  /* + step */
  TAG_RING = 1000 /* + step */
};

typedef struct builder {
  uroce_coll_req *r;
  int n, me;
  size_t es;
  int lazy; /* the working buffer starts empty: its blocks come from src */
  const int *map; /* position -> rank for the ring helpers (a hierarchy's
                     groups); NULL: the identity */
} builder;

static int rank_at(const builder *b, int pos) {
  return b->map ? b->map[pos] : pos;
}

static step *add_step(builder *b) {
  uroce_coll_comm *c = b->r->comm;
  if (b->r->nsteps == c->steps_cap) {
    int cap = c->steps_cap ? c->steps_cap * 2 : 16;
    step *s = realloc(c->steps, (size_t)cap * sizeof *s);
    if (!s)
      return NULL;
    c->steps = s;
    c->steps_cap = cap;
  }
  b->r->steps = c->steps;
  step *st = &c->steps[b->r->nsteps++];
  memset(st, 0, sizeof *st);
  return st;
}

/* off and len in elements; zero-length transfers are left out on both
 * sides alike */
static void add_send(builder *b, step *st, int peer, int buf, size_t off,
                     size_t len, int tag, int dep) {
  if (!len)
    return;
  xfer *x = &st->send[st->nsend++];
  x->peer = peer;
  x->buf = (uint8_t)buf;
  x->tag = (uint16_t)tag;
  x->dep = dep;
  x->off = off * b->es;
  x->len = len * b->es;
}

/* Returns the receive added, or NULL for a zero-length one. */
static xfer *add_recv(builder *b, step *st, int peer, size_t off, size_t len,
                      int tag, int reduce) {
  if (!len)
    return NULL;
  xfer *x = &st->recv[st->nrecv++];
  x->peer = peer;
  x->buf = BUF_WORK;
  x->tag = (uint16_t)tag;
  x->reduce = (uint8_t)reduce;
  x->dep = -1;
  x->off = off * b->es;
  x->len = len * b->es;
  return x;
}

static int mod(int a, int n) {
  return ((a % n) + n) % n;
}

/* Block i of count split n ways as evenly as possible (first blocks get the
 * remainder). */
static void even_block(size_t count, int n, int i, size_t *off, size_t *len) {
  size_t q = count / (size_t)n, rem = count % (size_t)n, ui = (size_t)i;
  *off = ui * q + (ui < rem ? ui : rem);
  *len = q + (ui < rem ? 1 : 0);
}

/* Blocks of one collective: even split of a vector (allreduce) or fixed
 * per-rank blocks (reduce-scatter, allgather). */
typedef struct blocks {
  size_t count; /* allreduce: vector; else per-rank block */
  int fixed;
  size_t base; /* elements before the vector (a hierarchy's sub-vector) */
} blocks;

static void block(const blocks *bl, int n, int i, size_t *off, size_t *len) {
  if (bl->fixed) {
    *off = (size_t)i * bl->count;
    *len = bl->count;
  } else {
    even_block(bl->count, n, i, off, len);
  }
  *off += bl->base;
}

/* ---- ring ---------------------------------------------------------------- */

/* Reduce-scatter around the ring: step s sends block me-s+shift to the right
 * and reduces block me-s-1+shift from the left; afterwards this rank holds
 * the reduced block me+1+shift. Each send pipelines on the previous step's
 * receive of the same block. */
static int ring_rs(builder *b, const blocks *bl, int shift, int tag0) {
  int n = b->n, me = b->me;
  int right = rank_at(b, mod(me + 1, n)), left = rank_at(b, mod(me - 1, n));
  for (int s = 0; s < n - 1; s++) {
    int idx = b->r->nsteps;
    step *st = add_step(b);
    if (!st)
      return -ENOMEM;
    size_t o, l;
    /* With b->lazy, step 0's block goes out from src, and every block
     * received is reduced here for the first time (the one this rank
     * sends first is never reduced here: the allgather overwrites it). */
    block(bl, n, mod(me - s + shift, n), &o, &l);
    add_send(b, st, right, b->lazy && s == 0 ? BUF_SRC : BUF_WORK, o, l,
             tag0 + s, idx - 1);
    block(bl, n, mod(me - s - 1 + shift, n), &o, &l);
    xfer *rx = add_recv(b, st, left, o, l, tag0 + s, 1);
    if (rx && b->lazy)
      rx->from_src = 1;
  }
  return 0;
}

/* Allgather around the ring starting from block first (already complete
 * here): step t forwards block first-t and receives first-t-1. */
static int ring_ag(builder *b, const blocks *bl, int first, int tag0,
                   int dep0) {
  int n = b->n, me = b->me;
  int right = rank_at(b, mod(me + 1, n)), left = rank_at(b, mod(me - 1, n));
  for (int t = 0; t < n - 1; t++) {
    int idx = b->r->nsteps;
    step *st = add_step(b);
    if (!st)
      return -ENOMEM;
    size_t o, l;
    block(bl, n, mod(first - t, n), &o, &l);
    add_send(b, st, right, BUF_WORK, o, l, tag0 + t, t == 0 ? dep0 : idx - 1);
    block(bl, n, mod(first - t - 1, n), &o, &l);
    add_recv(b, st, left, o, l, tag0 + t, 0);
  }
  return 0;
}

/* Broadcast (reduce = 0) or reduce down a pipelined chain. Broadcast runs
 * root, root+1, ..., root-1; reduce runs root+1, ..., root. */
static int chain(builder *b, size_t count, int root, int reduce) {
  int n = b->n, me = b->me;
  int pos = reduce ? mod(me - root - 1, n) : mod(me - root, n);
  step *st = add_step(b);
  if (!st)
    return -ENOMEM;
  if (pos > 0)
    add_recv(b, st, mod(me - 1, n), 0, count, TAG_RING, reduce);
  st = add_step(b);
  if (!st)
    return -ENOMEM;
  if (pos < n - 1)
    add_send(b, st, mod(me + 1, n), BUF_WORK, 0, count, TAG_RING,
             pos > 0 ? 0 : -1);
  return 0;
}

/* ---- double binary tree
 * ------------------------------------------------------
 *
 * Tree 0 is the in-order binary tree on positions 1..m: node p has level
 * ctz(p), children p -+ 2^(level-1), so odd positions are the leaves. Tree 1
 * relabels the nodes (mirror when m is even, shift by one when odd) so that
 * the leaves of one tree are inner nodes of the other and every node's
 * links are spread over the two halves of the data. */

static int lowbit(int p) {
  return p & -p;
}

static void inorder_children(int m, int p, int ch[2]) {
  ch[0] = ch[1] = 0;
  int lb = lowbit(p);
  if (lb == 1)
    return;
  ch[0] = p - lb / 2;
  int r = p + lb / 2;
  while (r > m && lowbit(r) > 1)
    r -= lowbit(r) / 2;
  ch[1] = r <= m ? r : 0;
}

/* Links of label v (0..m-1) in tree 0: parent (-1 at the root), children
 * (-1 if none). */
static void tree0(int m, int v, int *parent, int ch[2]) {
  int c[2];
  inorder_children(m, v + 1, c);
  ch[0] = c[0] ? c[0] - 1 : -1;
  ch[1] = c[1] ? c[1] - 1 : -1;
  *parent = -1;
  for (int q = 1; q <= m; q++) {
    inorder_children(m, q, c);
    if (c[0] == v + 1 || c[1] == v + 1) {
      *parent = q - 1;
      break;
    }
  }
}

static int relabel(int m, int v) {
  return (m % 2 == 0) ? m - 1 - v : (v + 1) % m;
}
static int unlabel(int m, int l) {
  return (m % 2 == 0) ? m - 1 - l : (l + m - 1) % m;
}

/* Links of label v in tree t of m nodes. */
static void tree_links(int m, int t, int v, int *parent, int ch[2]) {
  if (t == 0) {
    tree0(m, v, parent, ch);
    return;
  }
  tree0(m, relabel(m, v), parent, ch);
  if (*parent >= 0)
    *parent = unlabel(m, *parent);
  for (int i = 0; i < 2; i++)
    if (ch[i] >= 0)
      ch[i] = unlabel(m, ch[i]);
}

static void halves(size_t count, size_t off[2], size_t len[2]) {
  off[0] = 0;
  len[0] = (count + 1) / 2;
  off[1] = len[0];
  len[1] = count - len[0];
}

/* Allreduce: each tree reduces its half up to its root and broadcasts it
 * back down, chunk by chunk. */
static int tree_allreduce(builder *b, size_t count) {
  int n = b->n, me = b->me, par[2], ch[2][2];
  size_t off[2], len[2];
  halves(count, off, len);
  for (int t = 0; t < 2; t++)
    tree_links(n, t, me, &par[t], ch[t]);
  step *st[4];
  for (int i = 0; i < 4; i++)
    if (!(st[i] = add_step(b)))
      return -ENOMEM;
  for (int i = 0; i < 4; i++)
    st[i] = &b->r->steps[b->r->nsteps - 4 + i];
  int base = b->r->nsteps - 4;
  for (int t = 0; t < 2; t++) {
    /* With b->lazy, the first child's data is reduced onto the input's
     * half, and a leaf sends its half up from the input (the way down
     * overwrites it here). */
    int leaf = 1;
    for (int k = 0; k < 2; k++)
      if (ch[t][k] >= 0) {
        xfer *rx = add_recv(b, st[0], ch[t][k], off[t], len[t], TAG_UP + t, 1);
        if (rx && b->lazy && leaf)
          rx->from_src = 1;
        leaf = 0;
      }
    if (par[t] >= 0) {
      add_send(b, st[1], par[t], b->lazy && leaf ? BUF_SRC : BUF_WORK, off[t],
               len[t], TAG_UP + t, base);
      add_recv(b, st[2], par[t], off[t], len[t], TAG_DOWN + t, 0);
    }
    for (int k = 0; k < 2; k++)
      if (ch[t][k] >= 0)
        add_send(b, st[3], ch[t][k], BUF_WORK, off[t], len[t], TAG_DOWN + t,
                 par[t] >= 0 ? base + 2 : base);
  }
  return 0;
}

/* Broadcast and reduce: the two trees span the ranks other than root, and
 * root sits above both tree roots. */
static int tree_rooted(builder *b, size_t count, int root, int reduce) {
  int n = b->n, me = b->me, m = n - 1;
  size_t off[2], len[2];
  halves(count, off, len);
  step *st0 = add_step(b);
  if (!st0 || !add_step(b))
    return -ENOMEM;
  st0 = &b->r->steps[b->r->nsteps - 2];
  step *st1 = &b->r->steps[b->r->nsteps - 1];
  int base = b->r->nsteps - 2;
  for (int t = 0; t < 2; t++) {
    int par, ch[2];
    if (me == root) {
      /* the tree's root is the node without a parent */
      int top = -1;
      for (int v = 0; v < m && top < 0; v++) {
        int pp, cc[2];
        tree_links(m, t, v, &pp, cc);
        if (pp < 0)
          top = v;
      }
      int peer = (top + root + 1) % n;
      if (reduce)
        add_recv(b, st0, peer, off[t], len[t], TAG_UP + t, 1);
      else
        add_send(b, st1, peer, BUF_WORK, off[t], len[t], TAG_DOWN + t, -1);
      continue;
    }
    int v = mod(me - root - 1, n);
    tree_links(m, t, v, &par, ch);
    int up = par < 0 ? root : (par + root + 1) % n;
    if (reduce) {
      for (int k = 0; k < 2; k++)
        if (ch[k] >= 0)
          add_recv(b, st0, (ch[k] + root + 1) % n, off[t], len[t], TAG_UP + t,
                   1);
      add_send(b, st1, up, BUF_WORK, off[t], len[t], TAG_UP + t, base);
    } else {
      add_recv(b, st0, up, off[t], len[t], TAG_DOWN + t, 0);
      for (int k = 0; k < 2; k++)
        if (ch[k] >= 0)
          add_send(b, st1, (ch[k] + root + 1) % n, BUF_WORK, off[t], len[t],
                   TAG_DOWN + t, base);
    }
  }
  return 0;
}

/* ---- recursive halving / doubling
 * ----------------------------------------------
 *
 * p2 = largest power of two <= n ranks take part; the r = n - p2 "extra"
 * ranks (even ranks below 2r) first hand their data to rank + 1 and get the
 * result back at the end. Participant v (0..p2-1) is rank 2v+1 for v < r
 * and v + r otherwise. The vector is cut into p2 parts at boundaries parts[];
 * halving leaves participant v with part v reduced, doubling spreads all
 * parts back. */

typedef enum { RHD_ALLREDUCE, RHD_RS, RHD_AG } rhd_kind;

static int rhd(builder *b, size_t count, rhd_kind kind) {
  int n = b->n, me = b->me, p2 = 1;
  while (p2 * 2 <= n)
    p2 *= 2;
  int r = n - p2;
  size_t total = kind == RHD_ALLREDUCE ? count : count * (size_t)n;
  size_t *parts = malloc(((size_t)p2 + 1) * sizeof *parts);
  if (!parts)
    return -ENOMEM;
  for (int v = 0; v < p2; v++) {
    size_t o, l;
    if (kind == RHD_ALLREDUCE)
      even_block(count, p2, v, &o, &l);
    else
      o = (size_t)(v < r ? 2 * v : v + r) * count;
    parts[v] = o;
  }
  parts[p2] = total;
  int rc = -ENOMEM;
  int extra = me < 2 * r && me % 2 == 0;
  if (extra) {
    step *st = add_step(b);
    if (!st)
      goto out;
    if (kind == RHD_AG)
      add_send(b, st, me + 1, BUF_WORK, (size_t)me * count, count, TAG_PRE, -1);
    else
      add_send(b, st, me + 1, b->lazy ? BUF_SRC : BUF_WORK, 0, total, TAG_PRE,
               -1);
    if (!(st = add_step(b)))
      goto out;
    if (kind == RHD_RS)
      add_recv(b, st, me + 1, (size_t)me * count, count, TAG_POST, 0);
    else
      add_recv(b, st, me + 1, 0, total, TAG_POST, 0);
    rc = 0;
    goto out;
  }
  int v = me < 2 * r ? me / 2 : me - r;
#define REAL(u) ((u) < r ? 2 * (u) + 1 : (u) + r)
  step *st = add_step(b); /* pre: take over the extra rank's data */
  if (!st)
    goto out;
  /* With b->lazy the working buffer starts empty: the first reduction
   * into each of its bytes reads src (the extra rank's data here, or the
   * first halving step below), and the first halving step sends from src.
   * The half it gives away is not read again before doubling overwrites
   * it. */
  int lazy = b->lazy;
  if (me < 2 * r) {
    if (kind == RHD_AG)
      add_recv(b, st, me - 1, (size_t)(me - 1) * count, count, TAG_PRE, 0);
    else {
      xfer *rx = add_recv(b, st, me - 1, 0, total, TAG_PRE, 1);
      if (rx && lazy)
        rx->from_src = 1;
      lazy = 0;
    }
  }
  int lo = 0, hi = p2, k = 0;
  if (kind != RHD_AG) {
    for (int mask = p2 / 2; mask >= 1; mask /= 2, k++) {
      int idx = b->r->nsteps, partner = REAL(v ^ mask), mid = lo + mask;
      if (!(st = add_step(b)))
        goto out;
      int keep_lo = (v & mask) ? mid : lo, keep_hi = (v & mask) ? hi : mid;
      int give_lo = (v & mask) ? lo : mid, give_hi = (v & mask) ? mid : hi;
      add_send(b, st, partner, lazy ? BUF_SRC : BUF_WORK, parts[give_lo],
               parts[give_hi] - parts[give_lo], TAG_HALF + k, idx - 1);
      xfer *rx = add_recv(b, st, partner, parts[keep_lo],
                          parts[keep_hi] - parts[keep_lo], TAG_HALF + k, 1);
      if (rx && lazy)
        rx->from_src = 1;
      lazy = 0;
      lo = keep_lo;
      hi = keep_hi;
    }
  } else {
    lo = v;
    hi = v + 1;
  }
  if (kind != RHD_RS) {
    k = 0;
    for (int mask = 1; mask < p2; mask *= 2, k++) {
      int idx = b->r->nsteps, partner = REAL(v ^ mask);
      if (!(st = add_step(b)))
        goto out;
      int plo = lo ^ mask, phi = plo + (hi - lo);
      add_send(b, st, partner, BUF_WORK, parts[lo], parts[hi] - parts[lo],
               TAG_DBL + k, idx - 1);
      add_recv(b, st, partner, parts[plo], parts[phi] - parts[plo], TAG_DBL + k,
               0);
      if (plo < lo)
        lo = plo;
      else
        hi = phi;
    }
  }
  if (me < 2 * r) {
    int idx = b->r->nsteps;
    if (!(st = add_step(b)))
      goto out;
    if (kind == RHD_RS)
      add_send(b, st, me - 1, BUF_WORK, (size_t)(me - 1) * count, count,
               TAG_POST, idx - 1);
    else
      add_send(b, st, me - 1, BUF_WORK, 0, total, TAG_POST, idx - 1);
  }
#undef REAL
  rc = 0;
out:
  free(parts);
  return rc;
}

/* ---- hierarchical allreduce
 * -----------------------------------------------------
 *
 * H hosts of L ranks each. The vector is cut into L blocks. A ring
 * reduce-scatter inside the host leaves local rank l with block l + 1
 * reduced over its host; the ranks holding that block on every host (one
 * per host: a "channel") allreduce it with a ring between the hosts, on H
 * sub-blocks; a ring allgather inside the host spreads the L blocks. Each
 * rank sends 2(L-1)/L of the vector to its host peers and 2(H-1)/(H L) to
 * other hosts, so every rank of a host drives an L-th of the host's
 * network traffic, in 2(L-1) + 2(H-1) steps instead of the flat ring's
 * 2(HL-1). The first send of a phase waits for the whole last step of the
 * previous one (their regions differ), not chunk by chunk. */
static int hier_allreduce(builder *b, size_t count) {
  const uroce_coll_comm *c = b->r->comm;
  int nl = c->hier_l, nh = c->hier_h;
  builder in = *b, x = *b;
  in.n = nl;
  in.me = c->hier_lpos;
  in.map = c->hier_local;
  x.n = nh;
  x.me = c->hier_hpos;
  x.map = c->hier_cross;
  x.lazy = 0; /* the channel's block was reduced into the working buffer */
  blocks host_bl = {count, 0, 0};
  int own = mod(in.me + 1, nl), rc;
  if ((rc = ring_rs(&in, &host_bl, 0, TAG_RING)) < 0)
    return rc;
  size_t o, l;
  even_block(count, nl, own, &o, &l);
  blocks chan_bl = {l, 0, o};
  int tag = TAG_RING + 2 * nl;
  if ((rc = ring_rs(&x, &chan_bl, 0, tag)) < 0 ||
      (rc = ring_ag(&x, &chan_bl, x.me + 1, tag + nh, b->r->nsteps - 1)) < 0)
    return rc;
  return ring_ag(&in, &host_bl, own, TAG_RING + nl, b->r->nsteps - 1);
}

/* ---- all-to-all
 * ---------------------------------------------------------------- */

static int pairwise(builder *b, size_t count) {
  int n = b->n, me = b->me;
  for (int s = 1; s < n; s++) {
    step *st = add_step(b);
    if (!st)
      return -ENOMEM;
    int to = mod(me + s, n), from = mod(me - s, n);
    add_send(b, st, to, BUF_SRC, (size_t)to * count, count, TAG_RING + s, -1);
    add_recv(b, st, from, (size_t)from * count, count, TAG_RING + s, 0);
  }
  return 0;
}

/* ---- choice
 * -------------------------------------------------------------------- */

int coll_algo_supports(const uroce_coll_comm *c, uroce_coll_algo a,
                       uroce_coll_kind k) {
  switch (k) {
  case UROCE_COLL_ALLREDUCE:
    return a == UROCE_COLL_ALGO_RING || a == UROCE_COLL_ALGO_TREE ||
           a == UROCE_COLL_ALGO_RHD ||
           (a == UROCE_COLL_ALGO_HIER && c && c->hier_h > 1);
  case UROCE_COLL_REDUCE_SCATTER:
  case UROCE_COLL_ALLGATHER:
    return a == UROCE_COLL_ALGO_RING || a == UROCE_COLL_ALGO_RHD;
  case UROCE_COLL_BROADCAST:
  case UROCE_COLL_REDUCE:
    return a == UROCE_COLL_ALGO_RING || a == UROCE_COLL_ALGO_TREE;
  case UROCE_COLL_ALLTOALL:
    return a == UROCE_COLL_ALGO_PAIRWISE;
  default:
    return 0;
  }
}

uroce_coll_algo uroce_coll_choose_algo(const uroce_coll_comm *c,
                                       uroce_coll_kind k, size_t bytes) {
  int n = c ? c->size : 1;
  switch (k) {
  case UROCE_COLL_ALLREDUCE:
    /* latency-bound: log2(n) steps beat 2(n-1); bandwidth-bound: the ring
     * moves the least data per rank; in between the tree pipelines with
     * 2 log2(n) latency */
    if (n <= 2)
      return UROCE_COLL_ALGO_RING;
    if (bytes <= 64 * 1024)
      return UROCE_COLL_ALGO_RHD;
    /* ranks on several hosts: the rings inside and between hosts move the
     * ring's data per rank in fewer steps, and every rank of a host
     * carries part of its network traffic (docs/coll.md) */
    if (c && c->hier_h > 1)
      return UROCE_COLL_ALGO_HIER;
    /* from 512 KiB the halving/doubling's 2 log2(n) steps of the least
     * data overtake the tree, until the ring's pipeline does (docs/coll.md:
     * measured on 8 ranks; on 16 the two were even at 1 MiB) */
    if (n >= 8 && !(n & (n - 1)) && bytes > 512 * 1024 && bytes <= 1024 * 1024)
      return UROCE_COLL_ALGO_RHD;
    if (n >= 8 && bytes <= 1024 * 1024)
      return UROCE_COLL_ALGO_TREE;
    return UROCE_COLL_ALGO_RING;
  case UROCE_COLL_REDUCE_SCATTER:
  case UROCE_COLL_ALLGATHER:
    return (n > 2 && bytes <= 64 * 1024) ? UROCE_COLL_ALGO_RHD
                                         : UROCE_COLL_ALGO_RING;
  case UROCE_COLL_BROADCAST:
  case UROCE_COLL_REDUCE:
    return (n <= 8 && bytes >= 4u * 1024 * 1024) ? UROCE_COLL_ALGO_RING
                                                 : UROCE_COLL_ALGO_TREE;
  default:
    return UROCE_COLL_ALGO_PAIRWISE;
  }
}

int coll_sched_build(uroce_coll_req *r, size_t count, int root) {
  builder b = {r, r->comm->size, r->comm->rank, r->esize, 0, NULL};
  /* uroce_coll_start leaves the working buffer empty only for a ring or
   * tree allreduce out of place */
  b.lazy = r->kind == UROCE_COLL_ALLREDUCE && r->src && r->src != r->work;
  r->nsteps = 0;
  r->steps = r->comm->steps;
  blocks bl = {count, r->kind != UROCE_COLL_ALLREDUCE, 0};
  int rc;
  switch (r->kind) {
  case UROCE_COLL_ALLREDUCE:
    if (r->algo == UROCE_COLL_ALGO_HIER)
      rc = hier_allreduce(&b, count);
    else if (r->algo == UROCE_COLL_ALGO_TREE)
      rc = tree_allreduce(&b, count);
    else if (r->algo == UROCE_COLL_ALGO_RHD)
      rc = rhd(&b, count, RHD_ALLREDUCE);
    else if (!(rc = ring_rs(&b, &bl, 0, TAG_RING)))
      rc = ring_ag(&b, &bl, b.me + 1, TAG_RING + b.n, b.n - 2);
    break;
  case UROCE_COLL_REDUCE_SCATTER:
    rc = r->algo == UROCE_COLL_ALGO_RHD ? rhd(&b, count, RHD_RS)
                                        : ring_rs(&b, &bl, -1, TAG_RING);
    break;
  case UROCE_COLL_ALLGATHER:
    rc = r->algo == UROCE_COLL_ALGO_RHD ? rhd(&b, count, RHD_AG)
                                        : ring_ag(&b, &bl, b.me, TAG_RING, -1);
    break;
  case UROCE_COLL_BROADCAST:
  case UROCE_COLL_REDUCE:
    if (r->algo == UROCE_COLL_ALGO_TREE)
      rc = tree_rooted(&b, count, root, r->kind == UROCE_COLL_REDUCE);
    else
      rc = chain(&b, count, root, r->kind == UROCE_COLL_REDUCE);
    break;
  case UROCE_COLL_ALLTOALL:
    rc = pairwise(&b, count);
    break;
  default:
    rc = UROCE_ERR_INVALID_ARGUMENT;
  }
  r->steps = r->comm->steps;
  return rc;
}
