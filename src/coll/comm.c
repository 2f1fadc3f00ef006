/* Communicators and the progress engine that runs collective schedules over
 * the transport interface (see coll_int.h for the rules). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "coll/coll_int.h"

#define INFO_MAGIC 0x55434f4cu /* "UCOL" */
#define WRID_DATA 1ull
#define WRID_CTRL 2ull
#define WRID_PING 3ull

/* Chunks with at least this much payload go out from the request's buffer
 * (the gather path) instead of being copied into the send ring. Below it
 * the copy is cheap, while a gathered write costs a second gather entry,
 * keeps the request open until it completes and makes a receive into the
 * same bytes wait for that; UROCE_COLL_GATHER_MIN overrides it. */
#define GATHER_MIN 4096

typedef struct info_blob {
  uint32_t magic;
  int32_t rank;
  int32_t size;
  uint32_t slots;
  uint64_t slot_bytes;
  uint64_t raddr;
  uint32_t rkey;
  uint32_t pad;
} info_blob;

void uroce_coll_config_init(uroce_coll_config *cfg) {
  /* About 256 KiB x 3 slots. 8-rank allreduce on 2 cores, busbw 1-64 MiB,
   * 3 interleaved runs: 0.32-0.36 GB/s with 256 KiB x 4 against 0.23-0.32
   * with 64 KiB x 8 (fewer completions, credits and slot lookups per
   * byte); later 3 slots against 4, 4 interleaved runs of the benchmark's
   * sizes: busbw +3-19% from 256 KiB to 256 MiB (1 MiB the most), the
   * same below (a peer's slots, written by the receive path and read by
   * the reduction, stay in a core's 1 MiB L2 more often); 2 slots, 6, or
   * 46- and 91-packet chunks with 3 or 2 slots were no better.
   *
   * Exactly: header and payload are 61 packets at a 4096-byte path MTU,
   * 8 bytes short. The kernel's cost follows the number of datagrams it
   * is handed (a UDP GSO send is one, up to 15 packets of 4 KiB), and a
   * write goes out as FIRST alone (its RETH makes it longer than the
   * rest), then the MIDDLEs 15 to a send, the LAST ending the last one:
   * the 8 bytes keep LAST, which carries the immediate, no longer than a
   * MIDDLE. 61 packets are 1 + 4 sends; 64 were 1 + 5 (16 MiB allreduce,
   * 8 ranks, 8 interleaved runs: busbw +3-4% from 4 MiB up). */
  cfg->chunk_bytes = 61 * 4096 - HDR_BYTES - 8;
  cfg->slots = 3;
  cfg->timeout_ns = 30ull * 1000000000ull;
  cfg->algo = UROCE_COLL_ALGO_AUTO;
  cfg->phantom = 0;
}

static void set_err(uroce_coll_comm *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
}

/* Rings of at least this many bytes are mapped, not allocated; under
 * AddressSanitizer all are allocated, so that it watches their bounds. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RING_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(RING_ASAN)
#define RING_MAP_MIN SIZE_MAX
#else
#define RING_MAP_MIN ((size_t)1 << 16)
#endif

/* A ring: zeroed, 64-byte aligned. Each peer has its own slots in it, but
 * an algorithm talks to a few peers only (a ring to 2, halving and
 * doubling to log2 n, a tree to 3), so a large ring is mapped and its
 * pages are made only when first written: a rank of a 64-rank
 * communicator no longer faults in and zeroes 2 x 64 x 3 slots of 244
 * KiB (94 MiB) of which an allreduce touches a tenth. A phantom ring
 * (16-byte slots: the simulator's) of 1,024 ranks is 128 KiB: mapped too,
 * so a simulated ring allreduce touches 2 of its 32 pages. */
static char *ring_alloc(size_t len) {
  if (len < RING_MAP_MIN) {
    char *p = aligned_alloc(64, (len + 63) & ~(size_t)63);
    if (p)
      memset(p, 0, len);
    return p;
  }
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void ring_free(char *p, size_t len) {
  if (!p)
    return;
  if (len < RING_MAP_MIN)
    free(p);
  else
    munmap(p, len);
}

static void recv_ring_free(uroce_coll_comm *c) {
  if (c->recv_ring_tp)
    c->tp.free_recv_ring(c->tp.ctx, c->recv_ring, c->ring_bytes);
  else
    ring_free(c->recv_ring, c->ring_bytes);
  c->recv_ring = NULL;
}

int uroce_coll_comm_new(const uroce_coll_transport *tp,
                        const uroce_coll_config *cfg, uroce_coll_comm **out) {
  if (!tp || !out || tp->size < 1 || tp->rank < 0 || tp->rank >= tp->size ||
      tp->size > 0xffff || !tp->reg_mr || !tp->post_write_imm || !tp->poll ||
      !tp->now_ns || !tp->alloc_recv_ring != !tp->free_recv_ring)
    return UROCE_ERR_INVALID_ARGUMENT;
  uroce_coll_config def;
  uroce_coll_config_init(&def);
  if (!cfg)
    cfg = &def;
  if (cfg->slots < 1 || cfg->slots > MAX_SLOTS || cfg->chunk_bytes < 64 ||
      cfg->chunk_bytes > (1u << 30))
    return UROCE_ERR_INVALID_ARGUMENT;
  uroce_coll_comm *c = calloc(1, sizeof *c);
  if (!c)
    return -ENOMEM;
  c->tp = *tp;
  c->rank = tp->rank;
  c->size = tp->size;
  c->slots = cfg->slots;
  c->chunk_bytes = cfg->chunk_bytes & ~(size_t)7;
  /* header + payload, rounded to 64 bytes so payloads stay aligned */
  c->slot_bytes = (HDR_BYTES + c->chunk_bytes + 63) & ~(size_t)63;
  c->phantom = cfg->phantom != 0;
  c->slot_stride = c->phantom ? HDR_BYTES : c->slot_bytes;
  c->timeout_ns = cfg->timeout_ns ? cfg->timeout_ns : def.timeout_ns;
  c->algo = cfg->algo;
  const char *e = getenv("UROCE_COLL_TIMEOUT_MS");
  if (e && *e)
    c->timeout_ns = strtoull(e, NULL, 10) * 1000000ull;
  e = getenv("UROCE_COLL_ALGO");
  if (c->algo == UROCE_COLL_ALGO_AUTO && e && uroce_coll_algo_parse(e) >= 0)
    c->algo = (uroce_coll_algo)uroce_coll_algo_parse(e);
  c->gather =
      !c->phantom && tp->reg_mr_src && tp->post_write_imm2 && tp->dereg_mr;
  c->gather_min = GATHER_MIN;
  e = getenv("UROCE_COLL_GATHER_MIN");
  if (e && *e) {
    char *end;
    unsigned long long v = strtoull(e, &end, 10);
    if (!strcasecmp(e, "off"))
      c->gather_min = SIZE_MAX;
    else if (end != e)
      c->gather_min = v ? (size_t)v : 1;
  }
  c->peers = calloc((size_t)c->size, sizeof *c->peers);
  c->owed = calloc((size_t)c->size, sizeof *c->owed);
  size_t ring = (size_t)c->size * (size_t)c->slots * c->slot_stride;
  c->ring_bytes = ring;
  if (tp->alloc_recv_ring && !c->phantom &&
      (c->recv_ring = tp->alloc_recv_ring(tp->ctx, ring)))
    c->recv_ring_tp = 1;
  else
    c->recv_ring = ring_alloc(ring);
  c->send_ring = ring_alloc(ring);
  int rc = -ENOMEM;
  if (!c->peers || !c->owed || !c->recv_ring || !c->send_ring)
    goto fail;
  rc = tp->reg_mr(tp->ctx, c->recv_ring, ring, &c->recv_mr);
  if (rc < 0)
    goto fail;
  rc = tp->reg_mr(tp->ctx, c->send_ring, ring, &c->send_mr);
  if (rc < 0) {
    if (tp->dereg_mr)
      tp->dereg_mr(tp->ctx, &c->recv_mr);
    goto fail;
  }
  c->req.comm = c;
  c->req.state = 0;
  *out = c;
  return 0;
fail:
  free(c->peers);
  free(c->owed);
  recv_ring_free(c);
  ring_free(c->send_ring, c->ring_bytes);
  free(c);
  return rc;
}

static int poll_once(uroce_coll_comm *c);

void uroce_coll_comm_del(uroce_coll_comm *c) {
  if (!c)
    return;
  /* Let outstanding writes finish so the staging memory is not in use.
   * Bounded by attempts, not time: a virtual clock may stand still. A
   * failed comm still waits for the gathered writes, which read the
   * caller's buffers (a flushed one completes too). */
  for (int tries = 0; tries < 10000 && c->connected; tries++) {
    uint64_t busy = (uint64_t)c->nflight | (c->failed ? 0 : c->nawait);
    if (!busy || (poll_once(c) < 0 && !c->nflight))
      break;
  }
  if (c->tp.dereg_mr) {
    c->tp.dereg_mr(c->tp.ctx, &c->send_mr);
    c->tp.dereg_mr(c->tp.ctx, &c->recv_mr);
    for (int b = 0; b < 2; b++)
      if (c->src_mr_ok[b])
        c->tp.dereg_mr(c->tp.ctx, &c->src_mr[b]);
  }
  free(c->flight);
  free(c->peers);
  free(c->owed);
  recv_ring_free(c);
  ring_free(c->send_ring, c->ring_bytes);
  free(c->scratch[0]);
  free(c->scratch[1]);
  free(c->steps);
  free(c->hier_local);
  free(c->hier_cross);
  free(c);
}

size_t uroce_coll_comm_info_size(void) {
  return sizeof(info_blob);
}

int uroce_coll_comm_info(const uroce_coll_comm *c, void *blob, size_t len) {
  if (!c || !blob)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (len < sizeof(info_blob))
    return UROCE_ERR_NOBUF;
  info_blob b = {INFO_MAGIC,      c->rank,
                 c->size,         (uint32_t)c->slots,
                 c->slot_bytes,   c->recv_mr.remote_addr,
                 c->recv_mr.rkey, 0};
  memcpy(blob, &b, sizeof b);
  return (int)sizeof b;
}

int uroce_coll_comm_connect(uroce_coll_comm *c, const void *blobs, size_t len) {
  if (!c || !blobs || len < (size_t)c->size * sizeof(info_blob))
    return UROCE_ERR_INVALID_ARGUMENT;
  for (int p = 0; p < c->size; p++) {
    info_blob b;
    memcpy(&b, (const char *)blobs + (size_t)p * sizeof b, sizeof b);
    if (b.magic != INFO_MAGIC || b.rank != p || b.size != c->size ||
        b.slots != (uint32_t)c->slots || b.slot_bytes != c->slot_bytes) {
      set_err(c, "endpoint info of rank %d does not match this rank's", p);
      return UROCE_COLL_ERR_MISMATCH;
    }
    c->peers[p].raddr = b.raddr;
    c->peers[p].rkey = b.rkey;
  }
  c->connected = 1;
  return 0;
}

int uroce_coll_comm_rank(const uroce_coll_comm *c) {
  return c->rank;
}
int uroce_coll_comm_size(const uroce_coll_comm *c) {
  return c->size;
}
void uroce_coll_comm_set_algo(uroce_coll_comm *c, uroce_coll_algo algo) {
  if ((unsigned)algo < UROCE_COLL_ALGO_COUNT)
    c->algo = algo;
}

typedef struct host_rank {
  int key, rank; /* a host and one of its ranks, or a group's lowest rank
                    and the group */
} host_rank;

static int cmp_host_rank(const void *a, const void *b) {
  const host_rank *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

static void hosts_forget(uroce_coll_comm *c) {
  free(c->hier_local);
  free(c->hier_cross);
  c->hier_local = c->hier_cross = NULL;
  c->hier_h = c->hier_l = 1;
  c->hier_lpos = c->hier_hpos = 0;
}

/* Groups the ranks by host (sorted by host, then rank: each group's ranks
 * in rank order), numbers the hosts by their lowest rank, and keeps this
 * rank's two rings of the hierarchy when every host has as many ranks. */
int uroce_coll_comm_set_hosts(uroce_coll_comm *c, const int *host, int n) {
  if (!c || (host && n != c->size))
    return UROCE_ERR_INVALID_ARGUMENT;
  if (c->req.state == UROCE_COLL_INPROGRESS)
    return UROCE_ERR_BUSY;
  hosts_forget(c);
  if (!host)
    return 0;
  int size = c->size, me = c->rank, rc = -ENOMEM;
  host_rank *v = malloc((size_t)size * sizeof *v);
  host_rank *g = malloc((size_t)size * sizeof *g); /* {lowest rank, start} */
  if (!v || !g)
    goto out;
  for (int r = 0; r < size; r++)
    v[r] = (host_rank){host[r], r};
  qsort(v, (size_t)size, sizeof *v, cmp_host_rank);
  int nh = 0, nl = 0, even = 1, mine = 0, lpos = 0;
  for (int i = 0, j; i < size; i = j) {
    for (j = i; j < size && v[j].key == v[i].key; j++)
      if (v[j].rank == me) {
        mine = i;
        lpos = j - i;
      }
    if (!nh)
      nl = j - i;
    else if (j - i != nl)
      even = 0;
    g[nh++] = (host_rank){v[i].rank, i};
  }
  rc = 0;
  if (!even || nh < 2 || nl < 2)
    goto out;
  qsort(g, (size_t)nh, sizeof *g, cmp_host_rank); /* hosts by lowest rank */
  c->hier_local = malloc((size_t)nl * sizeof(int));
  c->hier_cross = malloc((size_t)nh * sizeof(int));
  if (!c->hier_local || !c->hier_cross) {
    hosts_forget(c);
    rc = -ENOMEM;
    goto out;
  }
  for (int k = 0; k < nl; k++)
    c->hier_local[k] = v[mine + k].rank;
  for (int h = 0; h < nh; h++) {
    c->hier_cross[h] = v[g[h].rank + lpos].rank;
    if (g[h].rank == mine)
      c->hier_hpos = h;
  }
  c->hier_h = nh;
  c->hier_l = nl;
  c->hier_lpos = lpos;
out:
  if (rc < 0)
    hosts_forget(c);
  free(v);
  free(g);
  return rc;
}

void uroce_coll_comm_hosts(const uroce_coll_comm *c, int *nhosts,
                           int *per_host) {
  int h = c && c->hier_h > 1 ? c->hier_h : 1;
  if (nhosts)
    *nhosts = h;
  if (per_host)
    *per_host = c ? (h > 1 ? c->hier_l : c->size) : 0;
}

const char *uroce_coll_errmsg(const uroce_coll_comm *c) {
  return c ? c->errmsg : "";
}

/* ---- failure ------------------------------------------------------------- */

/* Fail the communicator and tell every other live rank, so that ranks that
 * are not waiting on the failed one stop quickly too. */
static int fail(uroce_coll_comm *c, int err, int culprit) {
  if (c->failed)
    return c->req.state < 0 ? c->req.state : err;
  c->failed = 1;
  if (c->req.state == UROCE_COLL_INPROGRESS)
    c->req.state = err;
  if (err != UROCE_COLL_ERR_ABORTED) {
    for (int p = 0; p < c->size; p++) {
      if (p == c->rank || p == culprit)
        continue;
      c->tp.post_write_imm(
          c->tp.ctx, p, NULL, 0, 0, c->peers[p].raddr, c->peers[p].rkey,
          IMM_MAKE(IMM_ABORT, culprit < 0 ? 0xffff : culprit), WRID_CTRL << 56);
    }
  }
  return err;
}

/* ---- completions -----------------------------------------------------------
 */

/* The write from slot of peer p completed (or failed: either way the
 * transport no longer reads its source). */
static void flight_done(uroce_coll_comm *c, int peer, unsigned slot) {
  coll_peer *p = &c->peers[peer];
  if (!(p->gathered & (1ull << slot)))
    return;
  p->gathered &= ~(1ull << slot);
  for (int i = 0; i < c->nflight; i++)
    if (c->flight[i].peer == peer && c->flight[i].slot == slot) {
      c->flight[i] = c->flight[--c->nflight];
      break;
    }
}

static void note_write_done(uroce_coll_comm *c, const uroce_coll_cqe *q) {
  if (q->kind == UROCE_COLL_CQE_WRITE_DONE && (q->wr_id >> 56) == WRID_DATA &&
      q->peer >= 0 && q->peer < c->size &&
      (q->wr_id & 0xffff) < (unsigned)c->slots)
    flight_done(c, q->peer, (unsigned)(q->wr_id & 0xffff));
}

static int handle_cqe(uroce_coll_comm *c, const uroce_coll_cqe *q,
                      uint64_t now) {
  uroce_coll_req *r = &c->req;
  if (q->peer < 0 || q->peer >= c->size || q->peer == c->rank)
    return 0; /* not ours: ignore */
  coll_peer *p = &c->peers[q->peer];
  note_write_done(c, q);
  if (q->status != 0) {
    set_err(c, "%s: transport error %d on the connection to rank %d",
            uroce_coll_kind_name(r->kind), q->status, q->peer);
    return fail(c, UROCE_COLL_ERR_PEER_FAILED, q->peer);
  }
  p->alive_at = now;
  if (q->kind == UROCE_COLL_CQE_WRITE_DONE) {
    if ((q->wr_id >> 56) == WRID_PING)
      p->ping_at = 0;
    if ((q->wr_id >> 56) == WRID_DATA) {
      unsigned slot = (unsigned)(q->wr_id & 0xffff);
      if (slot < (unsigned)c->slots && (p->await_comp >> slot & 1)) {
        p->await_comp &= ~(1ull << slot);
        c->nawait--;
      }
      return 1;
    }
    return 0;
  }
  if (q->kind != UROCE_COLL_CQE_RECV_IMM)
    return 0;
  unsigned kind = IMM_KIND(q->imm), arg = IMM_ARG(q->imm);
  if (kind == IMM_DATA) {
    if (arg >= (unsigned)c->slots)
      return 0;
    p->arrived |= 1ull << arg;
    return 1;
  } else if (kind == IMM_CREDIT) {
    if (q->imm & CREDIT_SET)
      p->await_credit &= ~((uint64_t)q->imm & ((1ull << CREDIT_SET_SLOTS) - 1));
    else if (arg < (unsigned)c->slots)
      p->await_credit &= ~(1ull << arg);
    return 1;
  } else if (kind == IMM_ABORT) {
    if (arg == 0xffff)
      set_err(c, "rank %d aborted the collective", q->peer);
    else
      set_err(c, "rank %d aborted the collective: rank %u failed", q->peer,
              arg);
    return fail(c, UROCE_COLL_ERR_ABORTED, (int)arg);
  }
  return 0;
}

/* Poll the transport dry. Returns how many events moved data or credits
 * (probes and control messages do not count as progress), or a negative
 * error. */
static int poll_once(uroce_coll_comm *c) {
  uroce_coll_cqe q[32];
  int total = 0;
  uint64_t now = c->tp.now_ns(c->tp.ctx);
  for (;;) {
    int n = c->tp.poll(c->tp.ctx, q, 32);
    if (n < 0) {
      set_err(c, "transport poll failed: %s", uroce_coll_strerror(n));
      return fail(c, n, -1);
    }
    for (int i = 0; i < n; i++) {
      int rc = handle_cqe(c, &q[i], now);
      if (rc < 0) {
        /* the rest of the batch only for the in-flight bookkeeping */
        while (++i < n)
          note_write_done(c, &q[i]);
        return rc;
      }
      total += rc;
    }
    if (n < 32)
      return total;
  }
}

/* ---- the schedule machine ------------------------------------------------ */

static size_t nchunks(const uroce_coll_req *r, size_t len) {
  return (len + r->chunk - 1) / r->chunk;
}

static size_t chunk_len(const uroce_coll_req *r, const xfer *x, size_t j) {
  size_t o = j * r->chunk;
  return x->len - o < r->chunk ? x->len - o : r->chunk;
}

static char *slot_ptr(char *ring, const uroce_coll_comm *c, int peer,
                      unsigned slot) {
  return ring + ((size_t)peer * (size_t)c->slots + slot) * c->slot_stride;
}

/* May chunk j of send x (of the current send step) go? Receives of step
 * dep into the identical region gate it chunk by chunk, overlapping ones as
 * a whole, disjoint ones not at all (steps before dep are complete). */
static int send_ready(const uroce_coll_req *r, const xfer *x, size_t j) {
  if (x->dep < 0 || r->rs > x->dep)
    return 1;
  if (r->rs < x->dep)
    return 0;
  if (x->buf != BUF_WORK)
    return 1;
  const step *d = &r->steps[x->dep];
  for (int i = 0; i < d->nrecv; i++) {
    const xfer *y = &d->recv[i];
    if (y->off == x->off && y->len == x->len) {
      if (d->rdone[i] <= j)
        return 0;
    } else if (y->off < x->off + x->len && x->off < y->off + y->len) {
      return 0;
    }
  }
  return 1;
}

static int free_slot(const uroce_coll_comm *c, const coll_peer *p) {
  uint64_t busy = p->await_credit | p->await_comp;
  for (int s = 0; s < c->slots; s++)
    if (!(busy & (1ull << s)))
      return s;
  return -1;
}

/* Room for one more entry on the in-flight list; 0 if there is none. */
static int flight_room(uroce_coll_comm *c) {
  if (c->nflight < c->flight_cap)
    return 1;
  int cap = c->flight_cap ? 2 * c->flight_cap : 64;
  gflight *f = realloc(c->flight, (size_t)cap * sizeof *f);
  if (!f)
    return 0;
  c->flight = f;
  c->flight_cap = cap;
  return 1;
}

/* Post chunk j of send x. 1 posted, 0 no slot or queue full, <0 error. */
static int post_chunk(uroce_coll_req *r, const xfer *x, size_t j) {
  uroce_coll_comm *c = r->comm;
  coll_peer *p = &c->peers[x->peer];
  int s = free_slot(c, p);
  if (s < 0)
    return 0;
  size_t len = chunk_len(r, x, j);
  char *dst = slot_ptr(c->send_ring, c, x->peer, (unsigned)s);
  slot_hdr h = {c->seq, x->tag, 0, (uint32_t)j, (uint32_t)len};
  memcpy(dst, &h, sizeof h);
  size_t soff = x->off + j * r->chunk;
  const char *base = x->buf == BUF_SRC ? r->src : r->work;
  /* the gather path: the header from the slot, the payload from the
   * buffer (registered at start; r->gather is never set when phantom) */
  int gather =
      ((r->gather >> x->buf) & 1) && len >= c->gather_min && flight_room(c);
  if (!c->phantom && !gather)
    memcpy(dst + HDR_BYTES, base + soff, len);
  size_t loff = (size_t)(dst - c->send_ring);
  uint64_t raddr =
      p->raddr + ((size_t)c->rank * (size_t)c->slots + s) * c->slot_stride;
  int rc;
  if (gather) {
    const uroce_coll_mr *m = &c->src_mr[x->buf];
    size_t moff = (size_t)((uintptr_t)(base + soff) - (uintptr_t)m->addr);
    rc = c->tp.post_write_imm2(
        c->tp.ctx, x->peer, &c->send_mr, loff, HDR_BYTES, m, moff, len, raddr,
        p->rkey, IMM_MAKE(IMM_DATA, s), (WRID_DATA << 56) | (uint64_t)s);
  } else {
    rc = c->tp.post_write_imm(
        c->tp.ctx, x->peer, &c->send_mr, loff, HDR_BYTES + len, raddr, p->rkey,
        IMM_MAKE(IMM_DATA, s), (WRID_DATA << 56) | (uint64_t)s);
  }
  if (rc == UROCE_ERR_QUEUE_FULL)
    return 0;
  if (rc < 0) {
    set_err(c, "%s: posting a write to rank %d failed: %s",
            uroce_coll_kind_name(r->kind), x->peer, uroce_coll_strerror(rc));
    return fail(c, UROCE_COLL_ERR_PEER_FAILED, x->peer);
  }
  p->await_credit |= 1ull << s;
  if (!(p->await_comp >> s & 1))
    c->nawait++;
  p->await_comp |= 1ull << s;
  if (gather) {
    p->gathered |= 1ull << s;
    c->flight[c->nflight++] =
        (gflight){x->peer, (unsigned)s, x->buf, soff, soff + len};
  }
  return 1;
}

/* The gathered write in flight that still reads bytes [lo, hi) of the
 * working buffer (a receive must not write them yet), or -1. */
static int work_in_flight(const uroce_coll_comm *c, size_t lo, size_t hi) {
  for (int i = 0; i < c->nflight; i++) {
    const gflight *f = &c->flight[i];
    if (f->buf == BUF_WORK && f->lo < hi && lo < f->hi)
      return i;
  }
  return -1;
}

/* Find the slot holding (seq, tag, chunk) from x->peer. -1 if not there. */
static int find_arrival(const uroce_coll_req *r, const xfer *x, size_t j) {
  const uroce_coll_comm *c = r->comm;
  uint64_t a = c->peers[x->peer].arrived;
  while (a) {
    int s = __builtin_ctzll(a);
    a &= a - 1;
    slot_hdr h;
    memcpy(&h, slot_ptr(c->recv_ring, c, x->peer, (unsigned)s), sizeof h);
    if (h.seq == c->seq && h.tag == x->tag && h.chunk == j)
      return s;
  }
  return -1;
}

/* Consume chunk j of receive x if it arrived. 1, 0 or <0. */
static int take_chunk(uroce_coll_req *r, const xfer *x, size_t j) {
  uroce_coll_comm *c = r->comm;
  int s = find_arrival(r, x, j);
  if (s < 0)
    return 0;
  const char *slot = slot_ptr(c->recv_ring, c, x->peer, (unsigned)s);
  slot_hdr h;
  memcpy(&h, slot, sizeof h);
  size_t len = chunk_len(r, x, j);
  if (h.len != len) {
    set_err(c,
            "%s: rank %d sent %u bytes for chunk %zu of tag %u, %zu expected "
            "(do all ranks pass the same arguments?)",
            uroce_coll_kind_name(r->kind), x->peer, h.len, j, x->tag, len);
    return fail(c, UROCE_COLL_ERR_MISMATCH, x->peer);
  }
  size_t woff = x->off + j * r->chunk;
  if (c->nflight && work_in_flight(c, woff, woff + len) >= 0)
    return 0; /* the chunk waits in its slot for that WRITE_DONE */
  if (!c->phantom) {
    char *dst = r->work + woff;
    /* a reduction's first touch reads the request's src instead: one
     * pass, no copy first */
    if (x->reduce)
      coll_reduce3(dst, x->from_src ? r->src + woff : dst, slot + HDR_BYTES,
                   len / r->esize, r->dt, r->op);
    else
      memcpy(dst, slot + HDR_BYTES, len);
  }
  coll_peer *p = &c->peers[x->peer];
  p->arrived &= ~(1ull << s);
  if (!p->credit_owed)
    c->owed[c->nowed++] = x->peer;
  p->credit_owed |= 1ull << s;
  return 1;
}

/* Run sends and receives as far as they go. Returns whether anything moved,
 * or a negative error. */
static int advance(uroce_coll_req *r) {
  int moved = 0, again = 1;
  while (again) {
    again = 0;
    while (r->ss < r->nsteps) {
      step *st = &r->steps[r->ss];
      int all = 1;
      for (int i = 0; i < st->nsend; i++) {
        const xfer *x = &st->send[i];
        size_t nc = nchunks(r, x->len);
        while (st->sdone[i] < nc && send_ready(r, x, st->sdone[i])) {
          int rc = post_chunk(r, x, st->sdone[i]);
          if (rc < 0)
            return rc;
          if (rc == 0)
            break;
          st->sdone[i]++;
          again = moved = 1;
        }
        if (st->sdone[i] < nc)
          all = 0;
      }
      if (!all)
        break;
      r->ss++;
      again = moved = 1;
    }
    while (r->rs < r->nsteps && r->ss >= r->rs) {
      step *st = &r->steps[r->rs];
      int all = 1;
      for (int i = 0; i < st->nrecv; i++) {
        const xfer *x = &st->recv[i];
        size_t nc = nchunks(r, x->len);
        while (st->rdone[i] < nc) {
          /* reductions into one region go in a fixed order, so that every
           * run gives the same bits */
          int blocked = 0;
          for (int k = 0; k < i; k++) {
            const xfer *y = &st->recv[k];
            if (y->off == x->off && y->len == x->len &&
                st->rdone[k] <= st->rdone[i])
              blocked = 1;
          }
          if (blocked)
            break;
          int rc = take_chunk(r, x, st->rdone[i]);
          if (rc < 0)
            return rc;
          if (rc == 0)
            break;
          st->rdone[i]++;
          again = moved = 1;
          /* back to the sends: a chunk just reduced goes on while it is
           * in cache (consuming every arrived chunk first sent them from
           * memory: the ICRC copy then waited on its loads) */
          if (st->rdone[i] < nc)
            goto next;
        }
        if (st->rdone[i] < nc)
          all = 0;
      }
      if (!all)
        break;
      r->rs++;
      again = moved = 1;
    }
  next:;
  }
  return moved;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Credits go out in rank order; only the peers on the owed list are
 * visited (a communicator of 1024 ranks owes to one or two at a time).
 * One write gives back every slot owed to a peer (a set, where the slots
 * fit the immediate). Unless all, a peer's credits wait until half its
 * slots are owed: a credit is a message, an acknowledgement and a
 * completion, and at one per 256 KiB chunk they were an eighth of all
 * messages. The caller gives all when this rank has nothing else to do
 * (the sender may be waiting for them) and when a request ends. */
static void give_credits(uroce_coll_comm *c, int all) {
  if (c->nowed > 1)
    qsort(c->owed, (size_t)c->nowed, sizeof *c->owed, cmp_int);
  int keep = 0;
  int batch = all ? 1 : (c->slots + 1) / 2;
  int set = c->slots <= CREDIT_SET_SLOTS; /* the slots fit the immediate */
  for (int i = 0; i < c->nowed; i++) {
    int pi = c->owed[i];
    coll_peer *p = &c->peers[pi];
    if (__builtin_popcountll(p->credit_owed) < batch) {
      c->owed[keep++] = pi;
      continue;
    }
    while (p->credit_owed) {
      int s = __builtin_ctzll(p->credit_owed);
      uint32_t imm =
          set ? IMM_CREDIT_SET(p->credit_owed) : IMM_MAKE(IMM_CREDIT, s);
      int rc = c->tp.post_write_imm(c->tp.ctx, pi, NULL, 0, 0, p->raddr,
                                    p->rkey, imm, WRID_CTRL << 56);
      if (rc < 0)
        break; /* queue full: next time; a dead peer shows up elsewhere */
      p->credit_owed = set ? 0 : p->credit_owed & (p->credit_owed - 1);
    }
    if (p->credit_owed)
      c->owed[keep++] = pi;
  }
  c->nowed = keep;
}

/* The peer a stuck request waits for, for the error message. */
static int waiting_on(const uroce_coll_req *r, const char **what) {
  const uroce_coll_comm *c = r->comm;
  if (r->rs < r->nsteps && r->rs <= r->ss) {
    const step *st = &r->steps[r->rs];
    for (int i = 0; i < st->nrecv; i++) {
      const xfer *x = &st->recv[i];
      size_t j = st->rdone[i];
      if (j >= nchunks(r, x->len))
        continue;
      /* arrived, but its bytes are still being sent from */
      size_t lo = x->off + j * r->chunk;
      int f = c->nflight && find_arrival(r, x, j) >= 0
                  ? work_in_flight(c, lo, lo + chunk_len(r, x, j))
                  : -1;
      *what = f >= 0 ? "write completions from" : "data from";
      return f >= 0 ? c->flight[f].peer : x->peer;
    }
  }
  if (r->ss < r->nsteps) {
    const step *st = &r->steps[r->ss];
    for (int i = 0; i < st->nsend; i++)
      if (st->sdone[i] < nchunks(r, st->send[i].len)) {
        *what = "credits from";
        return st->send[i].peer;
      }
  }
  if (c->nflight) {
    *what = "write completions from";
    return c->flight[0].peer;
  }
  *what = "";
  return -1;
}

int uroce_coll_test(uroce_coll_req *r) {
  if (!r)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (r->state != UROCE_COLL_INPROGRESS)
    return r->state;
  uroce_coll_comm *c = r->comm;
  int n = poll_once(c);
  if (n < 0 || r->state != UROCE_COLL_INPROGRESS)
    return r->state;
  int moved = advance(r);
  if (moved < 0)
    return r->state;
  int done = r->ss == r->nsteps && r->rs == r->nsteps;
  give_credits(c, !moved || done);
  uint64_t now = c->tp.now_ns(c->tp.ctx);
  if (n > 0 || moved)
    r->last_progress = now;
  /* Done when the schedule is, and the transport reads the buffers no more
   * (no gathered write without its WRITE_DONE). */
  if (done && !c->nflight) {
    if (r->fin_len && !c->phantom)
      memcpy(r->fin_dst, r->fin_src, r->fin_len);
    r->state = 0;
    return 0;
  }
  uint64_t idle = now - r->last_progress;
  if (idle > c->timeout_ns / 4) {
    /* Stuck: probe the peer we wait for. A peer that is up but waits for
     * someone else lets the probe complete, and this rank keeps waiting for
     * that someone's failure to be reported (or for 3 timeouts at most);
     * a peer that is down does not, and this rank reports it. */
    const char *what;
    int p = waiting_on(r, &what);
    if (p < 0)
      return UROCE_COLL_INPROGRESS;
    coll_peer *pp = &c->peers[p];
    if (pp->alive_at < r->last_progress)
      pp->alive_at = r->last_progress;
    if (!pp->ping_at &&
        c->tp.post_write_imm(c->tp.ctx, p, NULL, 0, 0, pp->raddr, pp->rkey,
                             IMM_MAKE(IMM_PING, c->rank),
                             (WRID_PING << 56) | (uint64_t)p) == 0)
      pp->ping_at = now;
    int silent = now - pp->alive_at > c->timeout_ns;
    if ((idle > c->timeout_ns && silent) || idle > 3 * c->timeout_ns) {
      set_err(c,
              "%s (%s): no progress for %llu ms waiting for %s rank %d "
              "(step %d of %d); rank %d %s",
              uroce_coll_kind_name(r->kind), uroce_coll_algo_name(r->algo),
              (unsigned long long)(idle / 1000000), what, p,
              r->rs < r->ss ? r->rs : r->ss, r->nsteps, p,
              silent ? "does not respond" : "responds but sends nothing");
      return fail(c, UROCE_COLL_ERR_PEER_TIMEOUT, p);
    }
  }
  return UROCE_COLL_INPROGRESS;
}

int uroce_coll_wait(uroce_coll_req *r, uint64_t timeout_ns) {
  if (!r)
    return UROCE_ERR_INVALID_ARGUMENT;
  uroce_coll_comm *c = r->comm;
  uint64_t t0 = c->tp.now_ns(c->tp.ctx);
  for (;;) {
    int rc = uroce_coll_test(r);
    if (rc != UROCE_COLL_INPROGRESS)
      return rc;
    if (c->tp.now_ns(c->tp.ctx) - t0 >= timeout_ns)
      return UROCE_COLL_ERR_TIMEOUT;
  }
}

uroce_coll_algo uroce_coll_req_algo(const uroce_coll_req *r) {
  return r->algo;
}

/* ---- starting collectives --------------------------------------------------
 */

/* The gather path for request r: register the parts of its buffers that
 * chunks of at least gather_min bytes are sent from (reusing the cached
 * registration when it covers them) and mark those buffers in r->gather.
 * A buffer that cannot be registered is sent through the ring as before.
 * No write reads the cached regions now: the previous request completed,
 * so its gathered writes did; a failed comm starts nothing. */
static void gather_setup(uroce_coll_req *r) {
  uroce_coll_comm *c = r->comm;
  size_t lo[2] = {SIZE_MAX, SIZE_MAX}, hi[2] = {0, 0};
  if (!c->gather || r->chunk < c->gather_min)
    return;
  for (int s = 0; s < r->nsteps; s++) {
    const step *st = &r->steps[s];
    for (int i = 0; i < st->nsend; i++) {
      const xfer *x = &st->send[i];
      if ((x->len < r->chunk ? x->len : r->chunk) < c->gather_min)
        continue;
      if (x->off < lo[x->buf])
        lo[x->buf] = x->off;
      if (x->off + x->len > hi[x->buf])
        hi[x->buf] = x->off + x->len;
    }
  }
  for (int b = 0; b < 2; b++) {
    if (lo[b] >= hi[b])
      continue;
    uintptr_t a = (uintptr_t)(b == BUF_SRC ? r->src : r->work) + lo[b];
    size_t len = hi[b] - lo[b];
    uroce_coll_mr *m = &c->src_mr[b];
    uintptr_t ma = (uintptr_t)m->addr;
    if (c->src_mr_ok[b] && a >= ma && len <= m->length &&
        a - ma <= m->length - len) {
      r->gather |= (uint8_t)(1u << b);
      continue;
    }
    if (c->src_mr_ok[b])
      c->tp.dereg_mr(c->tp.ctx, m);
    c->src_mr_ok[b] = 0;
    if (c->tp.reg_mr_src(c->tp.ctx, (void *)a, len, m) == 0) {
      c->src_mr_ok[b] = 1;
      r->gather |= (uint8_t)(1u << b);
    }
  }
}

static char *scratch(uroce_coll_comm *c, int i, size_t len) {
  if (c->scratch_len[i] < len) {
    char *p = realloc(c->scratch[i], len);
    if (!p)
      return NULL;
    c->scratch[i] = p;
    c->scratch_len[i] = len;
  }
  return c->scratch[i];
}

int uroce_coll_start(uroce_coll_comm *c, uroce_coll_kind kind,
                     const void *sendbuf, void *recvbuf, size_t count,
                     uroce_coll_dtype dt, uroce_coll_op op, int root,
                     uroce_coll_algo algo, uroce_coll_req **out) {
  if (!c || !out || (unsigned)kind >= UROCE_COLL_KIND_COUNT ||
      (unsigned)dt >= UROCE_COLL_DTYPE_COUNT ||
      (unsigned)op >= UROCE_COLL_OP_COUNT ||
      (unsigned)algo >= UROCE_COLL_ALGO_COUNT)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (c->failed)
    return UROCE_COLL_ERR_COMM_FAILED;
  if (!c->connected)
    return UROCE_COLL_ERR_NOT_CONNECTED;
  if (c->req.state == UROCE_COLL_INPROGRESS)
    return UROCE_ERR_BUSY;
  int n = c->size, me = c->rank;
  if ((kind == UROCE_COLL_BROADCAST || kind == UROCE_COLL_REDUCE) &&
      (root < 0 || root >= n))
    return UROCE_ERR_INVALID_ARGUMENT;
  size_t es = uroce_coll_dtype_size(dt);
  size_t bytes = count * es; /* one rank's block or vector */
  if (count && count > SIZE_MAX / es / (size_t)n)
    return UROCE_ERR_INVALID_ARGUMENT;
  int has_send = !(kind == UROCE_COLL_BROADCAST && me != root);
  int has_recv = !(kind == UROCE_COLL_REDUCE && me != root);
  if (count && !c->phantom &&
      ((has_send && !sendbuf) || (has_recv && !recvbuf)))
    return UROCE_ERR_INVALID_ARGUMENT;

  uroce_coll_req *r = &c->req;
  memset(r, 0, sizeof *r);
  r->comm = c;
  r->kind = kind;
  r->dt = dt;
  r->op = op;
  r->esize = es;
  r->chunk = c->chunk_bytes / es * es;
  if (algo == UROCE_COLL_ALGO_AUTO)
    algo = c->algo;
  size_t total = (kind == UROCE_COLL_REDUCE_SCATTER ||
                  kind == UROCE_COLL_ALLGATHER || kind == UROCE_COLL_ALLTOALL)
                     ? bytes * (size_t)n
                     : bytes;
  if (algo == UROCE_COLL_ALGO_AUTO || !coll_algo_supports(c, algo, kind))
    algo = uroce_coll_choose_algo(c, kind, total);
  r->algo = algo;
  c->seq++;

  /* Local part, and which buffer the schedule works in. Phantom: none;
   * the schedule only counts bytes. */
  const char *sb = sendbuf;
  char *rb = recvbuf;
  switch (c->phantom ? UROCE_COLL_KIND_COUNT : kind) {
  case UROCE_COLL_KIND_COUNT:
    if (kind == UROCE_COLL_REDUCE_SCATTER)
      r->fin_len = bytes; /* counted, never copied */
    break;
  case UROCE_COLL_ALLREDUCE:
    r->work = rb;
    if (sb != rb && bytes) {
      /* Every algorithm reads each block of sendbuf where it first needs
       * it (sched.c ring_rs, tree_allreduce, rhd): no cold copy of the
       * whole vector up front. */
      if (n > 1)
        r->src = sb;
      else
        memcpy(rb, sb, bytes);
    }
    break;
  case UROCE_COLL_REDUCE_SCATTER:
    r->work = scratch(c, 0, total);
    if (!r->work && total)
      return -ENOMEM;
    if (total)
      memcpy(r->work, sb, total);
    r->fin_dst = rb;
    r->fin_src = r->work + (size_t)me * bytes;
    r->fin_len = bytes;
    break;
  case UROCE_COLL_ALLGATHER:
    r->work = rb;
    if (sb != rb + (size_t)me * bytes && bytes)
      memcpy(rb + (size_t)me * bytes, sb, bytes);
    break;
  case UROCE_COLL_BROADCAST:
    r->work = rb;
    if (me == root && sb != rb && bytes)
      memcpy(rb, sb, bytes);
    break;
  case UROCE_COLL_REDUCE:
    if (me == root) {
      r->work = rb;
    } else {
      r->work = scratch(c, 0, bytes);
      if (!r->work && bytes)
        return -ENOMEM;
    }
    if (sb != r->work && bytes)
      memcpy(r->work, sb, bytes);
    break;
  case UROCE_COLL_ALLTOALL:
    r->work = rb;
    r->src = sb;
    if (sb == rb && total) {
      char *s = scratch(c, 1, total);
      if (!s)
        return -ENOMEM;
      memcpy(s, sb, total);
      r->src = s;
    } else if (bytes) {
      memcpy(rb + (size_t)me * bytes, sb + (size_t)me * bytes, bytes);
    }
    break;
  default:
    return UROCE_ERR_INVALID_ARGUMENT;
  }
  int rc = 0;
  if (count && n > 1)
    rc = coll_sched_build(r, count, root);
  if (rc < 0)
    return rc;
  gather_setup(r);
  r->state = UROCE_COLL_INPROGRESS;
  r->last_progress = c->tp.now_ns(c->tp.ctx);
  *out = r;
  return 0;
}

size_t uroce_coll_sched_bytes(const uroce_coll_comm *c, uroce_coll_kind kind,
                              size_t count, uroce_coll_dtype dt, int root,
                              uroce_coll_algo algo) {
  if (!c || (unsigned)kind >= UROCE_COLL_KIND_COUNT ||
      (unsigned)dt >= UROCE_COLL_DTYPE_COUNT ||
      (unsigned)algo >= UROCE_COLL_ALGO_COUNT || !count || c->size < 2 ||
      ((kind == UROCE_COLL_BROADCAST || kind == UROCE_COLL_REDUCE) &&
       (root < 0 || root >= c->size)))
    return 0;
  size_t es = uroce_coll_dtype_size(dt), n = (size_t)c->size;
  if (count > SIZE_MAX / es / n)
    return 0;
  size_t total = (kind == UROCE_COLL_REDUCE_SCATTER ||
                  kind == UROCE_COLL_ALLGATHER || kind == UROCE_COLL_ALLTOALL)
                     ? count * es * n
                     : count * es;
  if (algo == UROCE_COLL_ALGO_AUTO)
    algo = c->algo;
  if (algo == UROCE_COLL_ALGO_AUTO || !coll_algo_supports(c, algo, kind))
    algo = uroce_coll_choose_algo(c, kind, total);
  /* The builder reads the rank and size and grows comm->steps: give it a
   * copy whose steps are its own. */
  uroce_coll_comm *tmp = malloc(sizeof *tmp);
  if (!tmp)
    return 0;
  *tmp = *c;
  tmp->steps = 0;
  tmp->steps_cap = 0;
  uroce_coll_req r;
  memset(&r, 0, sizeof r);
  r.comm = tmp;
  r.kind = kind;
  r.algo = algo;
  r.dt = dt;
  r.esize = es;
  r.chunk = c->chunk_bytes / es * es;
  size_t bytes = coll_sched_build(&r, count, root) < 0
                     ? 0
                     : (size_t)tmp->steps_cap * sizeof(step);
  free(tmp->steps);
  free(tmp);
  return bytes;
}

int uroce_coll_allreduce_start(uroce_coll_comm *c, const void *sendbuf,
                               void *recvbuf, size_t count, uroce_coll_dtype dt,
                               uroce_coll_op op, uroce_coll_req **req) {
  return uroce_coll_start(c, UROCE_COLL_ALLREDUCE, sendbuf, recvbuf, count, dt,
                          op, 0, UROCE_COLL_ALGO_AUTO, req);
}

int uroce_coll_reduce_scatter_start(uroce_coll_comm *c, const void *sendbuf,
                                    void *recvbuf, size_t recvcount,
                                    uroce_coll_dtype dt, uroce_coll_op op,
                                    uroce_coll_req **req) {
  return uroce_coll_start(c, UROCE_COLL_REDUCE_SCATTER, sendbuf, recvbuf,
                          recvcount, dt, op, 0, UROCE_COLL_ALGO_AUTO, req);
}

int uroce_coll_allgather_start(uroce_coll_comm *c, const void *sendbuf,
                               void *recvbuf, size_t sendcount,
                               uroce_coll_dtype dt, uroce_coll_req **req) {
  return uroce_coll_start(c, UROCE_COLL_ALLGATHER, sendbuf, recvbuf, sendcount,
                          dt, UROCE_COLL_SUM, 0, UROCE_COLL_ALGO_AUTO, req);
}

int uroce_coll_broadcast_start(uroce_coll_comm *c, const void *sendbuf,
                               void *recvbuf, size_t count, uroce_coll_dtype dt,
                               int root, uroce_coll_req **req) {
  return uroce_coll_start(c, UROCE_COLL_BROADCAST, sendbuf, recvbuf, count, dt,
                          UROCE_COLL_SUM, root, UROCE_COLL_ALGO_AUTO, req);
}

int uroce_coll_reduce_start(uroce_coll_comm *c, const void *sendbuf,
                            void *recvbuf, size_t count, uroce_coll_dtype dt,
                            uroce_coll_op op, int root, uroce_coll_req **req) {
  return uroce_coll_start(c, UROCE_COLL_REDUCE, sendbuf, recvbuf, count, dt, op,
                          root, UROCE_COLL_ALGO_AUTO, req);
}

int uroce_coll_alltoall_start(uroce_coll_comm *c, const void *sendbuf,
                              void *recvbuf, size_t count, uroce_coll_dtype dt,
                              uroce_coll_req **req) {
  return uroce_coll_start(c, UROCE_COLL_ALLTOALL, sendbuf, recvbuf, count, dt,
                          UROCE_COLL_SUM, 0, UROCE_COLL_ALGO_AUTO, req);
}

/* ---- names ------------------------------------------------------------------
 */

const char *uroce_coll_dtype_name(uroce_coll_dtype dt) {
  static const char *const n[] = {"float32", "float16", "bfloat16",
                                  "int32",   "int64",   "float64"};
  return (unsigned)dt < UROCE_COLL_DTYPE_COUNT ? n[dt] : "?";
}

const char *uroce_coll_op_name(uroce_coll_op op) {
  static const char *const n[] = {"sum", "prod", "min", "max"};
  return (unsigned)op < UROCE_COLL_OP_COUNT ? n[op] : "?";
}

static const char *const algo_names[] = {"auto", "ring",     "tree",
                                         "rhd",  "pairwise", "hier"};

const char *uroce_coll_algo_name(uroce_coll_algo a) {
  return (unsigned)a < UROCE_COLL_ALGO_COUNT ? algo_names[a] : "?";
}

int uroce_coll_algo_parse(const char *s) {
  for (int i = 0; i < UROCE_COLL_ALGO_COUNT; i++)
    if (!strcasecmp(s, algo_names[i]))
      return i;
  return -1;
}

const char *uroce_coll_kind_name(uroce_coll_kind k) {
  static const char *const n[] = {"allreduce", "reduce_scatter", "allgather",
                                  "broadcast", "reduce",         "alltoall"};
  return (unsigned)k < UROCE_COLL_KIND_COUNT ? n[k] : "?";
}

const char *uroce_coll_strerror(int err) {
  switch (err) {
  case UROCE_COLL_ERR_PEER_TIMEOUT:
    return "collective: a peer made no progress within the timeout";
  case UROCE_COLL_ERR_PEER_FAILED:
    return "collective: the connection to a peer failed";
  case UROCE_COLL_ERR_ABORTED:
    return "collective: aborted by another rank after a failure";
  case UROCE_COLL_ERR_COMM_FAILED:
    return "collective: the communicator failed earlier";
  case UROCE_COLL_ERR_TIMEOUT:
    return "collective: wait timed out, request still running";
  case UROCE_COLL_ERR_MISMATCH:
    return "collective: ranks disagree on the collective or its arguments";
  case UROCE_COLL_ERR_NOT_CONNECTED:
    return "collective: communicator not connected";
  case UROCE_COLL_ERR_BOOTSTRAP:
    return "collective: bootstrap environment or rendezvous failed";
  case UROCE_COLL_INPROGRESS:
    return "collective: in progress";
  }
  return uroce_strerror(err);
}
