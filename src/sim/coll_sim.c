/* The collective workload: the collectives of src/coll, unchanged, run by
 * simulated ranks over the simulated NICs' engines.
 *
 * Rank i is NIC i, unless the scenario groups ranks into servers
 * (ranks_per_host G, nics_per_host K): then rank i is local rank i % G of
 * server i / G, on that server's NIC (i % G) / (G / K), and the
 * communicator knows the servers (uroce_coll_comm_set_hosts), so AUTO
 * runs the hierarchical allreduce as the real stack does. Writes between
 * ranks of one server never reach a NIC: they cross an intra-host link
 * (below). Each rank has one uroce_coll_comm in phantom mode
 * (uroce_coll_config.phantom: every step, chunk, credit and dependency,
 * no payload bytes) on a uroce_coll_transport whose calls are:
 *
 *   reg_mr          the staging rings (phantom: slot headers only) are
 *                   ordinary memory of this process; remote_addr is the
 *                   pointer itself
 *   post_write_imm  a signaled RDMA WRITE WITH IMMEDIATE of len phantom
 *                   bytes on the RC QP to the peer, posted to the rank's
 *                   NIC engine (sim_eng_write_imm); the 16-byte slot header
 *                   is copied into the peer's ring at once (the credit
 *                   protocol guarantees the slot is free, and the peer
 *                   reads it only after the immediate arrived)
 *   poll            the NIC CQ's completions for this rank, translated:
 *                   RDMA WRITE -> WRITE_DONE, RECV_RDMA_WITH_IMM -> RECV_IMM
 *   now_ns          simulated time
 *
 * Connections are made when a rank first writes to a peer: one RC QP pair
 * per pair of ranks the algorithm uses (ring: neighbours, trees and
 * halving/doubling: their partners, all-to-all: everyone).
 *
 * The intra-host link (NVLink through an NVSwitch, as a model): every rank
 * has a port of intra_gbps each way. A write of len bytes leaves the
 * sender's port after the writes queued before it (FIFO, len / rate),
 * enters the receiver's port no earlier than that port's previous write
 * plus len / rate, and lands intra_latency_us later; then the receiver
 * gets RECV_IMM and the sender WRITE_DONE at once (the bytes are in
 * place). No packets, no loss, no congestion beyond the two ports.
 *
 * Progress is dependency-driven: a completion for a rank schedules that
 * rank's event at the same instant, which runs uroce_coll_test(), and
 * whatever that posts leaves the NIC as soon as the wire is free. A size
 * starts on every rank at once; the next size starts when the last rank
 * finished the previous one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"
#include "uroce/coll.h"
#include "uroce/verbs.h"

struct sc_rank {
  struct sim_ev ev; /* first: container_of */
  struct sim_ev conn_ev; /* CONNECT: make the connections in want */
  struct sim_coll *sc;
  struct sim *s; /* its NIC's partition in a parallel run, else the sim */
  uint32_t rank, nic, server;
  sim_time_t intra_tx_free, intra_rx_free; /* the intra-host port's */
  uint64_t intra_bytes;                    /* sent over it, this size */
  uroce_coll_transport tp;
  uroce_coll_comm *comm;
  uroce_coll_req *req;
  struct he_flow **conn; /* per peer rank, made on first use */
  uroce_coll_cqe *q;     /* completions not yet polled */
  uint32_t qhead, qn, qcap;
  uint32_t *want; /* peers to connect to at the next CONNECT */
  uint32_t nwant, wantcap;
  struct sc_intra *free_x; /* writes to ranks of its server, for reuse */
  struct sc_block *blocks; /* where they live */
  uint32_t nblocks;
  uint64_t intra_rx; /* bytes landed here over the intra-host link */
  sim_time_t fin;    /* when its request of the current size ended */
  bool busy;         /* a request of the current size is running */
  bool done;         /* ... and has ended, not yet counted */
  bool failed;
  /* Why it failed: what it was doing and the error, set once, read for
   * the report (the comm's own message, when there is one, goes with
   * it). */
  const char *fail_what;
  int fail_rc;
  sim_time_t fail_at;
  uint32_t wc_err; /* the first error completion's status, 0: none */
  /* Its registered memory (the staging rings), for the slot headers a
   * rank on another MPI rank writes there (sim_coll_net_take). */
  struct sc_mr {
    char *addr;
    size_t len;
  } * mrs;
  uint32_t nmrs;
};

struct sim_coll {
  struct sim *s;
  struct sim_ev start_ev;
  uint32_t n;
  struct sc_rank *r;
  uint32_t *rank_of; /* per NIC: its rank, or UINT32_MAX */
  uint32_t cur;      /* size index running */
  uint32_t ndone;    /* ranks done with it */
  bool finished, failed;
  uint64_t conns;
  uint64_t count[SIM_COLL_MAX_SIZES];
  struct sim_coll_result res[SIM_COLL_MAX_SIZES];
  uint32_t nres;
  double factor, link_gbps, step_latency_us;
  uint64_t rx_at_start; /* payload arrived at the ranks when size began */
  sim_time_t last_fin;  /* the latest end of a rank's request, this size */
  uint64_t chunk_bytes, hdr_bytes; /* the communicator's chunk and header */
  double *hop_prop_ps, *hop_ps_per_byte; /* ring hop i: rank i -> i + 1 */
  /* servers (ranks_per_host > 1) */
  uint32_t per_host, per_nic;
  double intra_ps_per_byte;
  sim_time_t intra_lat;
  uint64_t *nic_bytes; /* per NIC: bytes written to the fabric, this size */
  char net_errmsg[256]; /* a distributed run: the first failure's message */
};

/* A write between ranks of one server, until it lands. */
struct sc_intra {
  struct sim_ev ev; /* first: container_of */
  struct sc_intra *next_free;
  uint32_t from, to, imm, len;
  uint64_t wr_id;
};
#define SC_BLOCK 256
struct sc_block {
  struct sc_block *next;
  struct sc_intra x[SC_BLOCK];
};

/* ---- the transport ---- */

static int tp_reg_mr(void *ctx, void *addr, size_t len, uroce_coll_mr *mr) {
  struct sc_rank *r = ctx;
  struct sc_mr *m = realloc(r->mrs, (r->nmrs + 1) * sizeof(*m));
  if (!m)
    return -12; /* -ENOMEM */
  r->mrs = m;
  r->mrs[r->nmrs++] = (struct sc_mr){addr, len};
  mr->addr = addr;
  mr->length = len;
  mr->remote_addr = (uint64_t)(uintptr_t)addr;
  mr->lkey = mr->rkey = r->rank;
  mr->handle = 0;
  return 0;
}

static void tp_dereg_mr(void *ctx, uroce_coll_mr *mr) {
  (void)ctx;
  (void)mr;
}

/* Rank r's request ended (failed: with an error) at s's now. */
static void rank_done(struct sim *s, struct sc_rank *r, bool failed);

/* Rank r failed at s's now doing what, with rc (a uroce_coll error, or 0
 * when what says it all): kept for the report, said on stderr. */
static void rank_fail(struct sim *s, struct sc_rank *r, const char *what,
                      int rc) {
  if (!r->fail_what) {
    r->fail_what = what;
    r->fail_rc = rc;
    r->fail_at = s->now;
  }
  if (rc)
    fprintf(stderr, "uroce sim: rank %u: %s: %s%s%s\n", r->rank, what,
            uroce_coll_strerror(rc), r->comm ? ": " : "",
            r->comm ? uroce_coll_errmsg(r->comm) : "");
  else
    fprintf(stderr, "uroce sim: rank %u: %s\n", r->rank, what);
}

static void push_cqe(struct sim *s, struct sc_rank *r,
                     const uroce_coll_cqe *q) {
  if (r->qn == r->qcap) {
    uint32_t cap = r->qcap ? 2 * r->qcap : 64;
    uroce_coll_cqe *nq = realloc(r->q, cap * sizeof(*nq));
    if (!nq) {
      rank_fail(s, r, "out of memory for completions", 0);
      if (r->busy)
        rank_done(s, r, true);
      return;
    }
    r->q = nq;
    r->qcap = cap;
  }
  r->q[r->qn++] = *q;
  if (r->busy)
    sim_schedule_min(s, &r->ev, s->now);
}

/* A write record of rank r's: its events' keys are the rank's, in the
 * order its blocks were made. */
static struct sc_intra *intra_alloc(struct sc_rank *r) {
  if (!r->free_x) {
    struct sc_block *b = calloc(1, sizeof(*b));
    if (!b)
      return 0;
    b->next = r->blocks;
    r->blocks = b;
    uint64_t base =
        ((uint64_t)r->rank << 20) + (uint64_t)r->nblocks++ * SC_BLOCK;
    for (int i = 0; i < SC_BLOCK; i++) {
      sim_ev_new(&b->x[i].ev, SIM_EV_COLL_INTRA, base + (uint64_t)i);
      b->x[i].ev.part = r->ev.part;
      b->x[i].next_free = r->free_x;
      r->free_x = &b->x[i];
    }
  }
  struct sc_intra *x = r->free_x;
  r->free_x = x->next_free;
  return x;
}

/* A write to a rank of the same server, over the intra-host link. */
static int intra_post(struct sc_rank *r, struct sc_rank *p,
                      const uroce_coll_mr *mr, size_t offset, size_t len,
                      uint64_t remote_addr, uint32_t imm, uint64_t wr_id) {
  struct sim_coll *sc = r->sc;
  struct sim *s = r->s;
  struct sc_intra *x = intra_alloc(r);
  if (!x)
    return -12; /* -ENOMEM */
  if (mr && len >= 16)
    memcpy((void *)(uintptr_t)remote_addr, (const char *)mr->addr + offset, 16);
  sim_time_t ser = (sim_time_t)((double)len * sc->intra_ps_per_byte + 0.5);
  sim_time_t out =
      (r->intra_tx_free > s->now ? r->intra_tx_free : s->now) + ser;
  r->intra_tx_free = out;
  sim_time_t in = p->intra_rx_free + ser > out ? p->intra_rx_free + ser : out;
  p->intra_rx_free = in;
  *x = (struct sc_intra){.ev = x->ev,
                         .from = r->rank,
                         .to = p->rank,
                         .imm = imm,
                         .len = (uint32_t)len,
                         .wr_id = wr_id};
  r->intra_bytes += len;
  sim_schedule(s, &x->ev, in + sc->intra_lat);
  return 0;
}

static void intra_land(struct sim *s, struct sim_coll *sc, struct sc_intra *x) {
  uroce_coll_cqe rq = {.kind = UROCE_COLL_CQE_RECV_IMM,
                       .peer = (int32_t)x->from,
                       .imm = x->imm,
                       .byte_len = x->len};
  uroce_coll_cqe wq = {.kind = UROCE_COLL_CQE_WRITE_DONE,
                       .peer = (int32_t)x->to,
                       .wr_id = x->wr_id};
  struct sc_rank *from = &sc->r[x->from];
  sc->r[x->to].intra_rx += x->len;
  push_cqe(s, &sc->r[x->to], &rq);
  push_cqe(s, from, &wq);
  x->next_free = from->free_x;
  from->free_x = x;
}

/* A distributed run (par.c): a rank this process does not run, its
 * connections made at every rank, its state here a copy. */
static bool own_rank(const struct sim *s, const struct sc_rank *r) {
  return sim_mine(s, r->ev.part);
}

/* The 16-byte slot header of a write to rank p, at remote_addr in its
 * ring: put there now, or, when p runs at another MPI rank, sent there
 * (as the MR's index and the offset in it: its address differs), before
 * the write's last packet can arrive (a lookahead). */
struct sc_hdr_msg {
  uint32_t rank, mr;
  uint64_t off;
  unsigned char hdr[16];
};

static void put_header(struct sim *s, struct sc_rank *p, uint64_t remote_addr,
                       const void *hdr) {
  if (own_rank(s, p)) {
    memcpy((void *)(uintptr_t)remote_addr, hdr, 16);
    return;
  }
  struct sc_hdr_msg m = {.rank = p->rank, .mr = UINT32_MAX};
  for (uint32_t i = 0; i < p->nmrs; i++)
    if (remote_addr >= (uintptr_t)p->mrs[i].addr &&
        remote_addr + 16 <= (uintptr_t)p->mrs[i].addr + p->mrs[i].len) {
      m.mr = i;
      m.off = remote_addr - (uintptr_t)p->mrs[i].addr;
    }
  if (m.mr == UINT32_MAX) {
    fprintf(stderr, "uroce sim: rank %u: a write outside the rings of rank "
                    "%u\n", p->rank, p->rank);
    abort();
  }
  memcpy(m.hdr, hdr, 16);
  sim_par_coll_msg(s, p->ev.part, &m, sizeof(m));
}

struct sim_ev *sim_coll_ev(struct sim *s, unsigned kind, uint64_t idx) {
  struct sim_coll *sc = s->coll;
  if (!sc)
    return 0;
  if (kind == SIM_EV_COLL_START)
    return &sc->start_ev;
  if (idx >= sc->n)
    return 0;
  return kind == SIM_EV_COLL ? &sc->r[idx].ev : &sc->r[idx].conn_ev;
}

void sim_coll_net_take(struct sim *s, const void *b, size_t len) {
  struct sim_coll *sc = s->coll;
  struct sc_hdr_msg m;
  if (!sc || len != sizeof(m)) {
    fprintf(stderr, "uroce sim: a slot header of %zu bytes\n", len);
    abort();
  }
  memcpy(&m, b, sizeof(m));
  struct sc_rank *p = m.rank < sc->n ? &sc->r[m.rank] : 0;
  if (!p || m.mr >= p->nmrs || m.off + 16 > p->mrs[m.mr].len) {
    fprintf(stderr, "uroce sim: a slot header for no ring\n");
    abort();
  }
  memcpy(p->mrs[m.mr].addr + m.off, m.hdr, 16);
}

static int tp_post(void *ctx, int peer, const uroce_coll_mr *mr, size_t offset,
                   size_t len, uint64_t remote_addr, uint32_t rkey,
                   uint32_t imm, uint64_t wr_id) {
  (void)rkey;
  struct sc_rank *r = ctx;
  struct sim_coll *sc = r->sc;
  struct sim *s = r->s;
  if (peer < 0 || (uint32_t)peer >= sc->n || (uint32_t)peer == r->rank ||
      len > UINT32_MAX)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (sc->per_host > 1 && sc->r[peer].server == r->server)
    return intra_post(r, &sc->r[peer], mr, offset, len, remote_addr, imm,
                      wr_id);
  struct he_flow *c = r->conn[peer];
  if (!c) {
    /* Connecting makes QPs at both NICs: a global event does it at the
     * next cell boundary; the communicator tries again after it. */
    bool asked = false;
    for (uint32_t i = 0; i < r->nwant && !asked; i++)
      asked = r->want[i] == (uint32_t)peer;
    if (!asked) {
      if (r->nwant == r->wantcap) {
        uint32_t cap = r->wantcap ? 2 * r->wantcap : 4;
        uint32_t *w = realloc(r->want, cap * sizeof(*w));
        if (!w)
          return -12; /* -ENOMEM */
        r->want = w;
        r->wantcap = cap;
      }
      r->want[r->nwant++] = (uint32_t)peer;
    }
    sim_schedule_min(s, &r->conn_ev, sim_cell_end(s, s->now));
    return UROCE_ERR_QUEUE_FULL;
  }
  /* The slot header travels for real; the payload is phantom. */
  if (mr && len >= 16)
    put_header(s, &sc->r[peer], remote_addr, (const char *)mr->addr + offset);
  /* The comm's wr_id: kind in the top byte, a slot or rank below. */
  uint64_t w = (wr_id >> 56) << 48 | (wr_id & 0xFFFFFFFFFFFFull);
  int rc = sim_eng_write_imm(s, c, r->nic, (uint32_t)len, imm, w);
  if (!rc)
    sc->nic_bytes[r->nic] += len;
  return rc;
}

static int tp_poll(void *ctx, uroce_coll_cqe *cqes, int max) {
  struct sc_rank *r = ctx;
  int n = 0;
  while (n < max && r->qhead < r->qn)
    cqes[n++] = r->q[r->qhead++];
  if (r->qhead == r->qn)
    r->qhead = r->qn = 0;
  return n;
}

static uint64_t tp_now(void *ctx) {
  struct sc_rank *r = ctx;
  return r->s->now / SIM_NS;
}

/* The work requests a connection's QP holds at each end: the ring of
 * slots both ways, with room for credits and control messages. */
void sim_coll_conn_wrs(const struct sim *s, uint32_t *nsend, uint32_t *nrecv) {
  uint32_t slots = s->cfg.wl.coll.slots ? s->cfg.wl.coll.slots : 8;
  *nsend = 2 * slots + 8;
  *nrecv = 2 * slots + 4;
}

/* CONNECT (global): rank r's connections to the peers it asked for. */
static void connect_wanted(struct sim *s, struct sim_coll *sc,
                           struct sc_rank *r) {
  uint32_t nsend, nrecv;
  sim_coll_conn_wrs(s, &nsend, &nrecv);
  if (s->net) { /* the peers r asked for, from r's rank */
    uint64_t nw = own_rank(s, r) ? r->nwant : 0;
    sim_net_reduce(s, &nw, 1, SIM_NET_SUM);
    uint64_t *w = calloc(nw ? nw : 1, sizeof(*w));
    uint32_t *keep = realloc(r->want, (nw ? nw : 1) * sizeof(*keep));
    if (!w || !keep) {
      fprintf(stderr, "uroce sim: out of memory connecting ranks\n");
      abort(); /* the other ranks would wait for this one */
    }
    r->want = keep;
    for (uint32_t i = 0; own_rank(s, r) && i < nw; i++)
      w[i] = r->want[i];
    sim_net_reduce(s, w, nw, SIM_NET_SUM);
    for (uint32_t i = 0; i < nw; i++)
      r->want[i] = (uint32_t)w[i];
    r->nwant = r->wantcap = (uint32_t)nw;
    if (!nw)
      r->wantcap = 1;
    free(w);
  }
  for (uint32_t i = 0; i < r->nwant; i++) {
    uint32_t peer = r->want[i];
    if (r->conn[peer])
      continue;
    uint64_t salt =
        sc->per_nic > 1 ? ((uint64_t)(r->rank + 1) << 32) | (peer + 1) : 0;
    struct he_flow *c = sim_eng_conn_new(s, r->nic, sc->r[peer].nic, nsend,
                                         nrecv, r->rank, peer, salt);
    if (!c) {
      rank_fail(s, r, "connecting to a peer: out of QPs or memory", 0);
      sc->failed = sc->finished = true;
      return;
    }
    r->conn[peer] = c;
    sc->r[peer].conn[r->rank] = c;
    sc->conns++;
  }
  r->nwant = 0;
  if (r->busy)
    sim_schedule_min(s, &r->ev, s->now);
}

void sim_coll_wc(struct sim *s, uint32_t rank, uint32_t peer,
                 const struct uroce_wc *wc) {
  struct sim_coll *sc = s->coll;
  if (!sc || rank >= sc->n || peer >= sc->n)
    return;
  struct sc_rank *r = &sc->r[rank];
  uroce_coll_cqe q = {.peer = (int32_t)peer};
  if (wc->wr_id & SIM_COLL_RECV) {
    q.kind = UROCE_COLL_CQE_RECV_IMM;
    q.imm = __builtin_bswap32(wc->imm_data);
    q.byte_len = wc->byte_len;
  } else {
    uint64_t w = wc->wr_id & ~SIM_COLL_WRID;
    q.kind = UROCE_COLL_CQE_WRITE_DONE;
    q.wr_id = (w >> 48 & 0xFF) << 56 | (w & 0xFFFFFFFFFFFFull);
  }
  q.status = wc->status == UROCE_WC_SUCCESS ? 0 : (int16_t) - (int)wc->status;
  if (q.status && !r->wc_err)
    r->wc_err = wc->status;
  push_cqe(s, r, &q);
}

/* ---- bounds ---- */

/* One write of len bytes (the slot header included) at the host link: its
 * line time (every packet's wire bytes, RETH on the first), returned, and
 * what its completion waits for once the NIC sent its last bit. With one
 * packet, that packet's trip. With more, the next-to-last packet (a full
 * one) must cross every switch store-and-forward and reach the
 * destination, which it left the NIC one last packet's line time before
 * the end: the trip of *wire bytes less *early_ps. Spraying may reorder
 * the last two packets, so nothing later is counted. */
static double write_ps(const struct sim_coll *sc, uint64_t len, uint32_t *wire,
                       double *early_ps) {
  const struct sim_cfg *c = &sc->s->cfg;
  uint32_t mtu = c->tp.mtu;
  double ps_per_byte = 8e12 / (double)c->topo.link[0].rate_bps;
  uint64_t k = len > mtu ? (len + mtu - 1) / mtu : 1;
  uint32_t last = (uint32_t)(len - (k - 1) * mtu);
  if (k == 1) {
    *wire = sim_data_wire_bytes(c, last, true);
    *early_ps = 0;
    return *wire * ps_per_byte;
  }
  uint32_t wl = sim_data_wire_bytes(c, last, false);
  double bytes = sim_data_wire_bytes(c, mtu, true) +
                 (double)(k - 2) * sim_data_wire_bytes(c, mtu, false) + wl;
  *wire = sim_data_wire_bytes(c, mtu, k == 2);
  *early_ps = wl * ps_per_byte;
  return bytes * ps_per_byte;
}

/* Hops of the dependency chain: ring hop i is rank i -> rank i + 1. A
 * ring (reduce-scatter, allgather, both for allreduce) runs around all n;
 * broadcast's chain from root 0 skips hop n - 1, reduce's (toward root 0)
 * skips hop 0. */
static bool chain_uses_hop(int kind, uint32_t n, uint32_t i) {
  if (kind == UROCE_COLL_BROADCAST)
    return i != n - 1;
  if (kind == UROCE_COLL_REDUCE)
    return i != 0;
  return true;
}

/* The time no fabric can beat for this schedule (docs/sim.md, "the
 * bound"): the larger of
 *  - bandwidth: the bytes the busiest rank must send at the host link,
 *    plus the last packet's trip to its neighbour;
 *  - the dependency chain: chunk j of a ring step leaves only once chunk j
 *    of the previous step arrived, so each chunk index crosses every
 *    step's hop in turn, each hop costing the chunk's line time plus its
 *    last packet's propagation and store-and-forward. Averaging over the
 *    ranks a chain can end at gives the mean hop; the last rank to finish
 *    is at least that late.
 * Tree, halving-doubling and pairwise get the bandwidth term alone. Adding
 * the two terms, as a schedule without chunk pipelining would need, is no
 * bound once a step's block spans several chunks: the NIC sends chunk 1
 * while chunk 0 travels. */
/* Steps each chunk index goes through in turn: the rings' (and the
 * hierarchy's rings'); 0 for the algorithms the bound does not chain. */
static uint32_t latency_steps(const struct sim_coll *sc, int algo) {
  uint32_t n = sc->n, g = sc->per_host, h = n / g;
  bool ar = sc->s->cfg.wl.coll.kind == UROCE_COLL_ALLREDUCE;
  if (algo == UROCE_COLL_ALGO_HIER)
    return 2 * (g - 1) + 2 * (h - 1);
  if (algo == UROCE_COLL_ALGO_RING)
    return ar ? 2 * (n - 1) : n - 1;
  return 0;
}

/* Servers of several ranks: the bandwidth term from the bytes the
 * schedule actually put on each NIC's host link and each rank's
 * intra-host port (slot headers included); the busiest of them. No chain
 * term: ring hops mix two kinds of link. */
static void servers_bound(struct sim_coll *sc, struct sim_coll_result *res) {
  const struct sim *s = sc->s;
  uint64_t nic_most = 0, intra_most = 0;
  for (uint32_t i = 0; i < s->nnics; i++)
    if (sc->nic_bytes[i] > nic_most)
      nic_most = sc->nic_bytes[i];
  for (uint32_t i = 0; i < sc->n; i++)
    if (sc->r[i].intra_bytes > intra_most)
      intra_most = sc->r[i].intra_bytes;
  double net_ps = (double)nic_most * 8e12 / (sc->link_gbps * 1e9);
  double intra_ps = (double)intra_most * sc->intra_ps_per_byte;
  double bw_ps = net_ps > intra_ps ? net_ps : intra_ps;
  res->steps = latency_steps(sc, res->algo);
  res->step_latency_us = sc->step_latency_us;
  res->bw_bound_us = bw_ps / 1e6;
  res->chain_bound_us = 0;
  res->bound_us = bw_ps / 1e6;
  double bound_s = bw_ps * 1e-12, t = (double)res->time * 1e-12;
  res->bound_busbw_gbs =
      bound_s > 0 ? sc->factor * (double)res->bytes / bound_s / 1e9 : 0;
  res->ratio = bound_s > 0 ? t / bound_s : 0;
}

static void coll_bound(struct sim_coll *sc, struct sim_coll_result *res) {
  const struct sim_coll_cfg *cc = &sc->s->cfg.wl.coll;
  uint32_t n = sc->n;
  if (sc->per_host > 1) {
    servers_bound(sc, res);
    return;
  }
  uint64_t es = uroce_coll_dtype_size((uroce_coll_dtype)cc->dtype);
  uint64_t chunk = (sc->chunk_bytes / es) * es;
  bool ring = res->algo == UROCE_COLL_ALGO_RING;
  res->steps = latency_steps(sc, res->algo);
  res->step_latency_us = sc->step_latency_us;
  double bw_ps = sc->factor * (double)res->bytes * 8e12 / (sc->link_gbps * 1e9);
  double chain_ps = 0;
  if (ring && res->count) {
    /* The smallest block a step moves (blocks differ by one element). */
    uint64_t blk = cc->kind == UROCE_COLL_ALLREDUCE ? res->count / n * es
                                                    : res->count * es;
    if (cc->kind == UROCE_COLL_BROADCAST || cc->kind == UROCE_COLL_REDUCE)
      blk = res->count * es;
    if (!blk)
      blk = es;
    uint64_t m = (blk + chunk - 1) / chunk, clast = blk - (m - 1) * chunk;
    uint32_t w0, wl, wf;
    (void)wf;
    double e0, el, ef;
    double c0 = write_ps(sc, sc->hdr_bytes + (m > 1 ? chunk : blk), &w0, &e0);
    double cl = write_ps(sc, sc->hdr_bytes + clast, &wl, &el);
    double cf = m > 1 ? write_ps(sc, sc->hdr_bytes + chunk, &wf, &ef) : c0;
    /* The line time up to the moment the trip counted from starts. */
    c0 -= e0;
    cl -= el;
    double block_ps = (double)(m - 1) * cf + cl + el;
    /* Sum (chains) or mean (rings) of the hops' fixed and per-byte parts,
     * and the shortest hop for the bandwidth term's last trip. */
    double prop = 0, spb = 0, min_last = -1;
    uint32_t nh = 0;
    for (uint32_t i = 0; i < n; i++) {
      if (!chain_uses_hop(cc->kind, n, i))
        continue;
      prop += sc->hop_prop_ps[i];
      spb += sc->hop_ps_per_byte[i];
      nh++;
      double l = sc->hop_prop_ps[i] + wl * sc->hop_ps_per_byte[i] - el;
      if (min_last < 0 || l < min_last)
        min_last = l;
    }
    double hops = res->steps; /* hops each chunk crosses in turn */
    if (cc->kind == UROCE_COLL_BROADCAST || cc->kind == UROCE_COLL_REDUCE) {
      /* prop and spb are already the chain's sums */
      bw_ps = block_ps + min_last;
      chain_ps = (double)(n - 1) * c0 + prop + spb * w0;
      double last =
          (double)(m - 1) * cf + (double)(n - 1) * cl + prop + spb * wl;
      if (last > chain_ps)
        chain_ps = last;
    } else {
      prop /= nh;
      spb /= nh;
      bw_ps = hops * block_ps + min_last;
      chain_ps = hops * (c0 + prop + spb * w0);
      double last = (double)(m - 1) * cf + hops * (cl + prop + spb * wl);
      if (last > chain_ps)
        chain_ps = last;
    }
  }
  res->bw_bound_us = bw_ps / 1e6;
  res->chain_bound_us = chain_ps / 1e6;
  double bound_s = (bw_ps > chain_ps ? bw_ps : chain_ps) * 1e-12;
  double t = (double)res->time * 1e-12;
  res->bound_us = bound_s * 1e6;
  res->bound_busbw_gbs =
      bound_s > 0 ? sc->factor * (double)res->bytes / bound_s / 1e9 : 0;
  res->ratio = bound_s > 0 ? t / bound_s : 0;
}

/* ---- running sizes ---- */

static uint64_t count_of(const struct sim_coll *sc, uint64_t bytes) {
  const struct sim_coll_cfg *cc = &sc->s->cfg.wl.coll;
  uint64_t es = uroce_coll_dtype_size((uroce_coll_dtype)cc->dtype);
  bool per_rank = cc->kind == UROCE_COLL_REDUCE_SCATTER ||
                  cc->kind == UROCE_COLL_ALLGATHER ||
                  cc->kind == UROCE_COLL_ALLTOALL;
  uint64_t c = bytes / es / (per_rank ? sc->n : 1);
  return c ? c : 1;
}

/* Payload landed at the ranks so far: at their NICs, and over the
 * intra-host links. */
static uint64_t rx_now(const struct sim_coll *sc) {
  const struct sim *s = sc->s;
  uint64_t rx = 0;
  for (uint32_t i = 0; i < sc->n; i++)
    rx += sc->r[i].intra_rx;
  for (uint32_t i = 0; i < s->nnics; i++)
    if (sc->rank_of[i] != UINT32_MAX)
      rx += s->nics[i].rx_payload;
  return rx;
}

static void start_net(struct sim_coll *sc, struct sim_coll_result *res);

static void start_size(struct sim_coll *sc) {
  struct sim *s = sc->s;
  const struct sim_coll_cfg *cc = &s->cfg.wl.coll;
  if (sc->cur >= cc->nsizes) {
    sc->finished = true;
    return;
  }
  struct sim_coll_result *res = &sc->res[sc->cur];
  memset(res, 0, sizeof(*res));
  res->count = sc->count[sc->cur];
  uint64_t es = uroce_coll_dtype_size((uroce_coll_dtype)cc->dtype);
  bool per_rank = cc->kind == UROCE_COLL_REDUCE_SCATTER ||
                  cc->kind == UROCE_COLL_ALLGATHER ||
                  cc->kind == UROCE_COLL_ALLTOALL;
  res->bytes = res->count * es * (per_rank ? sc->n : 1);
  res->start = s->now;
  res->algo = -1;
  sc->rx_at_start = rx_now(sc);
  memset(sc->nic_bytes, 0, s->nnics * sizeof(*sc->nic_bytes));
  for (uint32_t i = 0; i < sc->n; i++)
    sc->r[i].intra_bytes = 0;
  sc->ndone = 0;
  sc->last_fin = s->now;
  if (s->net) {
    start_net(sc, res);
    return;
  }
  for (uint32_t i = 0; i < sc->n; i++) {
    struct sc_rank *r = &sc->r[i];
    int rc =
        uroce_coll_start(r->comm, (uroce_coll_kind)cc->kind, 0, 0, res->count,
                         (uroce_coll_dtype)cc->dtype, UROCE_COLL_SUM, 0,
                         (uroce_coll_algo)cc->algo, &r->req);
    if (rc) {
      rank_fail(s, r, "starting the collective", rc);
      sc->failed = sc->finished = true;
      return;
    }
    res->algo = uroce_coll_req_algo(r->req);
    r->busy = true;
    sim_schedule_min(s, &r->ev, s->now);
  }
}

/* start_size's starts in a distributed run: each rank's where it runs;
 * the algorithm and the first failure (its rank and error) from there. */
static void start_net(struct sim_coll *sc, struct sim_coll_result *res) {
  struct sim *s = sc->s;
  const struct sim_coll_cfg *cc = &s->cfg.wl.coll;
  /* rx_at_start: every rank's part of the payload arrived */
  uint64_t rx = 0;
  for (uint32_t i = 0; i < sc->n; i++)
    if (own_rank(s, &sc->r[i]))
      rx += sc->r[i].intra_rx;
  for (uint32_t i = 0; i < s->nnics; i++)
    if (sc->rank_of[i] != UINT32_MAX && sim_mine(s, s->nics[i].n.part))
      rx += s->nics[i].rx_payload;
  /* v: rx, the first failing rank + 1 (as n - rank, by MAX), its error,
   * the algorithm + 1 */
  uint64_t v[4] = {rx, 0, 0, 0};
  for (uint32_t i = 0; i < sc->n; i++) {
    struct sc_rank *r = &sc->r[i];
    if (!own_rank(s, r))
      continue;
    int rc =
        uroce_coll_start(r->comm, (uroce_coll_kind)cc->kind, 0, 0, res->count,
                         (uroce_coll_dtype)cc->dtype, UROCE_COLL_SUM, 0,
                         (uroce_coll_algo)cc->algo, &r->req);
    if (rc) {
      v[1] = sc->n - i;
      v[2] = (uint64_t)(int64_t)rc;
      break;
    }
    v[3] = (uint64_t)(uroce_coll_req_algo(r->req) + 1);
  }
  uint64_t mx[3] = {v[1], v[3], 0};
  sim_net_reduce(s, mx, 2, SIM_NET_MAX);
  /* the error of the first failure: from its rank alone */
  uint32_t bad = mx[0] ? sc->n - (uint32_t)mx[0] : UINT32_MAX;
  uint64_t sum[2] = {v[0], v[1] && v[1] == mx[0] ? v[2] : 0};
  sim_net_reduce(s, sum, 2, SIM_NET_SUM);
  sc->rx_at_start = sum[0];
  res->algo = (int)mx[1] - 1;
  if (bad != UINT32_MAX) {
    rank_fail(s, &sc->r[bad], "starting the collective", (int)(int64_t)sum[1]);
    sc->failed = sc->finished = true;
    return;
  }
  for (uint32_t i = 0; i < sc->n; i++) {
    struct sc_rank *r = &sc->r[i];
    r->busy = true;
    sim_schedule_min(s, &r->ev, s->now); /* here if it runs here */
  }
}

/* The size ended when its last rank's request did, at fin; the next
 * starts at the next cell boundary (a global event). */
static void finish_size(struct sim_coll *sc, sim_time_t fin) {
  struct sim *s = sc->s;
  struct sim_coll_result *res = &sc->res[sc->cur];
  res->time = fin - res->start;
  double t = (double)res->time * 1e-12;
  res->algbw_gbs = t > 0 ? (double)res->bytes / t / 1e9 : 0;
  res->busbw_gbs = res->algbw_gbs * sc->factor;
  coll_bound(sc, res);
  sc->nres = sc->cur + 1;
  sc->cur++;
  sim_schedule(s, &sc->start_ev, s->cell ? sim_cell_end(s, fin) : fin);
}

/* What the bound reads, written where each NIC and rank runs: every
 * rank's figures, in a distributed run. */
static void bound_inputs_net(struct sim_coll *sc) {
  struct sim *s = sc->s;
  uint64_t *v = calloc((size_t)s->nnics + sc->n, sizeof(*v));
  if (!v) {
    fprintf(stderr, "uroce sim: out of memory ending a size\n");
    abort(); /* the other ranks would wait for this one */
  }
  for (uint32_t i = 0; i < s->nnics; i++)
    if (sim_mine(s, s->nics[i].n.part))
      v[i] = sc->nic_bytes[i];
  for (uint32_t i = 0; i < sc->n; i++)
    if (own_rank(s, &sc->r[i]))
      v[s->nnics + i] = sc->r[i].intra_bytes;
  sim_net_reduce(s, v, (size_t)s->nnics + sc->n, SIM_NET_SUM);
  memcpy(sc->nic_bytes, v, s->nnics * sizeof(*v));
  for (uint32_t i = 0; i < sc->n; i++)
    sc->r[i].intra_bytes = v[s->nnics + i];
  free(v);
}

/* A rank's end counts (on the main thread). */
static void count_done(struct sim_coll *sc, struct sc_rank *r) {
  if (r->failed) {
    sc->failed = sc->finished = true;
    return;
  }
  if (r->fin > sc->last_fin)
    sc->last_fin = r->fin;
  if (++sc->ndone == sc->n) {
    if (sc->s->net)
      bound_inputs_net(sc);
    finish_size(sc, sc->last_fin);
  }
}

static void rank_done(struct sim *s, struct sc_rank *r, bool failed) {
  r->busy = false;
  r->fin = s->now;
  r->failed |= failed;
  if ((s->par && sim_par_in_window(s)) || s->net)
    r->done = true; /* sim_coll_fold counts it after the window */
  else
    count_done(r->sc, r);
}

/* A distributed run: the ranks that ended at each MPI rank since the
 * last fold, with their ends, everywhere. */
static void fold_net(struct sim *s, struct sim_coll *sc) {
  uint64_t *v = calloc(2 * (size_t)sc->n, sizeof(*v));
  if (!v) {
    fprintf(stderr, "uroce sim: out of memory counting ranks\n");
    abort(); /* the other ranks would wait for this one */
  }
  for (uint32_t i = 0; i < sc->n; i++) {
    struct sc_rank *r = &sc->r[i];
    if (own_rank(s, r) && r->done) {
      v[2 * i] = 1 | (uint64_t)r->failed << 1;
      v[2 * i + 1] = r->fin;
    }
  }
  sim_net_reduce(s, v, 2 * (size_t)sc->n, SIM_NET_SUM);
  for (uint32_t i = 0; i < sc->n; i++)
    if (v[2 * i]) {
      struct sc_rank *r = &sc->r[i];
      r->done = true;
      r->busy = false;
      r->failed |= v[2 * i] >> 1 & 1;
      r->fin = v[2 * i + 1];
    }
  free(v);
}

void sim_coll_fold(struct sim *s) {
  struct sim_coll *sc = s->coll;
  if (sc && !sc->finished && s->net)
    fold_net(s, sc);
  for (uint32_t i = 0; sc && !sc->finished && i < sc->n; i++)
    if (sc->r[i].done) {
      sc->r[i].done = false;
      count_done(sc, &sc->r[i]);
    }
}

void sim_coll_repart(struct sim *s) {
  struct sim_coll *sc = s->coll;
  for (uint32_t i = 0; sc && i < sc->n; i++)
    sc->r[i].ev.part = s->nics[sc->r[i].nic].n.part;
}

void sim_coll_rebind(struct sim *s, struct sim **part) {
  struct sim_coll *sc = s->coll;
  for (uint32_t i = 0; sc && i < sc->n; i++)
    sc->r[i].s = part ? part[sc->r[i].ev.part] : s;
}

void sim_coll_event(struct sim *s, struct sim_ev *ev) {
  struct sim_coll *sc = s->coll;
  if (!sc || sc->finished)
    return;
  if (ev->arg == SIM_EV_COLL_START) {
    start_size(sc);
    return;
  }
  if (ev->arg == SIM_EV_COLL_INTRA) {
    intra_land(s, sc, container_of(ev, struct sc_intra, ev));
    return;
  }
  if (ev->arg == SIM_EV_COLL_CONNECT) {
    connect_wanted(s, sc, container_of(ev, struct sc_rank, conn_ev));
    return;
  }
  struct sc_rank *r = container_of(ev, struct sc_rank, ev);
  if (!r->busy)
    return;
  int rc = uroce_coll_test(r->req);
  if (rc == UROCE_COLL_INPROGRESS)
    return;
  if (rc < 0)
    rank_fail(s, r, "running the collective", rc);
  rank_done(s, r, rc < 0);
}

/* What rank_fail says a rank was doing (a distributed run sends the
 * index: the strings' addresses differ between processes). */
static const char *const fail_whats[] = {
    "out of memory for completions",
    "connecting to a peer: out of QPs or memory",
    "starting the collective",
    "running the collective",
};

/* The end of a distributed run: every rank's failure, and the first
 * one's communicator message, from where it ran. */
void sim_coll_net_finish(struct sim *s) {
  struct sim_coll *sc = s->coll;
  if (!sc)
    return;
  enum { W = 5, MSG = 32 }; /* words per rank; of the message */
  uint64_t *v = calloc((size_t)sc->n * W + MSG, sizeof(*v));
  if (!v) {
    fprintf(stderr, "uroce sim: out of memory gathering failures\n");
    abort(); /* the other ranks would wait for this one */
  }
  for (uint32_t i = 0; i < sc->n; i++) {
    struct sc_rank *r = &sc->r[i];
    if (!own_rank(s, r) || !r->fail_what)
      continue;
    uint64_t w = 0;
    while (w < sizeof(fail_whats) / sizeof(*fail_whats) &&
           strcmp(fail_whats[w], r->fail_what))
      w++;
    uint64_t *o = v + (size_t)i * W;
    o[0] = 1 + w;
    o[1] = r->fail_at;
    o[2] = (uint64_t)(int64_t)r->fail_rc;
    o[3] = r->wc_err;
    o[4] = r->failed;
  }
  sim_net_reduce(s, v, (size_t)sc->n * W, SIM_NET_SUM);
  const struct sc_rank *first = 0;
  for (uint32_t i = 0; i < sc->n; i++) {
    struct sc_rank *r = &sc->r[i];
    const uint64_t *o = v + (size_t)i * W;
    if (!o[0])
      continue;
    r->fail_what = o[0] - 1 < sizeof(fail_whats) / sizeof(*fail_whats)
                       ? fail_whats[o[0] - 1]
                       : "failed";
    r->fail_at = o[1];
    r->fail_rc = (int)(int64_t)o[2];
    r->wc_err = (uint32_t)o[3];
    r->failed = o[4];
    if (!first || r->fail_at < first->fail_at)
      first = r;
  }
  char *msg = (char *)(v + (size_t)sc->n * W);
  if (first && first->fail_rc && own_rank(s, first) && first->comm)
    snprintf(msg, MSG * 8, "%s", uroce_coll_errmsg(first->comm));
  sim_net_reduce(s, msg, MSG, SIM_NET_SUM);
  msg[MSG * 8 - 1] = 0;
  snprintf(sc->net_errmsg, sizeof sc->net_errmsg, "%s", msg);
  free(v);
}

bool sim_coll_failure(const struct sim *s, uint32_t *rank, double *at_us,
                      char *why, size_t len) {
  const struct sim_coll *sc = s->coll;
  const struct sc_rank *first = NULL;
  for (uint32_t i = 0; sc && i < sc->n; i++) {
    const struct sc_rank *r = &sc->r[i];
    if (r->fail_what && (!first || r->fail_at < first->fail_at))
      first = r; /* the earliest; ties to the lowest rank */
  }
  if (!first)
    return false;
  *rank = first->rank;
  *at_us = (double)first->fail_at / 1e6;
  const char *msg = !first->fail_rc ? ""
                    : s->net             ? sc->net_errmsg
                    : first->comm        ? uroce_coll_errmsg(first->comm)
                                         : "";
  char wc[64] = "";
  if (first->wc_err)
    snprintf(wc, sizeof wc, " (completion status: %s)",
             uroce_wc_status_str(first->wc_err));
  snprintf(why, len, "%s%s%s%s%s%s", first->fail_what,
           first->fail_rc ? ": " : "",
           first->fail_rc ? uroce_coll_strerror(first->fail_rc) : "",
           msg && *msg ? ": " : "", msg ? msg : "", wc);
  return true;
}

bool sim_coll_is_rank(const struct sim *s, uint32_t nic) {
  return s->coll && nic < s->nnics && s->coll->rank_of[nic] != UINT32_MAX;
}

/* Sizes done, plus the running one's share of the bytes every rank sends
 * (busbw factor x size), weighted by size. */
double sim_coll_progress(const struct sim *s) {
  const struct sim_coll *sc = s->coll;
  if (!sc)
    return 0;
  const struct sim_coll_cfg *cc = &s->cfg.wl.coll;
  double all = 0, done = 0;
  for (uint32_t i = 0; i < cc->nsizes; i++)
    all += (double)cc->sizes[i];
  for (uint32_t i = 0; i < sc->nres && i < cc->nsizes; i++)
    done += (double)cc->sizes[i];
  if (!sc->finished && sc->cur < cc->nsizes) {
    double want = sc->factor * (double)cc->sizes[sc->cur] * sc->n;
    double f = want > 0 ? (double)(rx_now(sc) - sc->rx_at_start) / want : 0;
    done += (f < 1 ? f : 1) * (double)cc->sizes[sc->cur];
  }
  return all > 0 ? done / all : 0;
}

bool sim_coll_done(const struct sim *s) {
  return !s->coll || s->coll->finished;
}

/* ---- setup ---- */

int sim_coll_new(struct sim *s, char *err, size_t errlen) {
  const struct sim_coll_cfg *cc = &s->cfg.wl.coll;
  if (s->host != &sim_host_eng) {
    snprintf(err, errlen,
             "workload collective needs transport model uroce (the real "
             "engine)");
    return -1;
  }
  uint32_t g = sim_coll_per_host(cc), k = sim_coll_nics_per_host(cc);
  if (k > g || g % k) {
    snprintf(err, errlen,
             "workload: nics_per_host (%u) must divide ranks_per_host (%u): "
             "each NIC serves the same number of ranks",
             k, g);
    return -1;
  }
  uint32_t servers = s->nnics / k;
  uint32_t n = cc->ranks ? cc->ranks : servers * g;
  if (g == 1 && (n < 2 || n > s->nnics)) {
    snprintf(err, errlen, "workload: ranks must be 2..%u (the NICs), got %u",
             s->nnics, n);
    return -1;
  }
  if (g > 1 && (n < 2 || n % g || n / g > servers)) {
    snprintf(err, errlen,
             "workload: ranks must be a whole number of servers of "
             "ranks_per_host %u, at most %u (the topology's %u NICs, %u per "
             "server), got %u",
             g, servers * g, s->nnics, k, n);
    return -1;
  }
  if (g > 1 && !(cc->intra_gbps > 0 && cc->intra_latency_us >= 0)) {
    snprintf(err, errlen,
             "workload: intra_host_gbps must be positive and "
             "intra_host_latency_us not negative");
    return -1;
  }
  if (cc->kind == UROCE_COLL_ALLTOALL && n > SIM_COLL_A2A_MAX) {
    snprintf(err, errlen,
             "workload: all_to_all connects every pair of ranks; at most %u "
             "ranks (%u asked)",
             SIM_COLL_A2A_MAX, n);
    return -1;
  }
  if (!cc->nsizes) {
    snprintf(err, errlen, "workload collective: no sizes");
    return -1;
  }
  struct sim_coll *sc = calloc(1, sizeof(*sc));
  if (!sc) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  s->coll = sc;
  sc->s = s;
  sc->n = n;
  sc->per_host = g;
  sc->per_nic = g / k;
  sc->intra_ps_per_byte = 8e12 / (cc->intra_gbps * 1e9);
  sc->intra_lat = (sim_time_t)(cc->intra_latency_us * 1e6 + 0.5);
  sim_ev_new(&sc->start_ev, SIM_EV_COLL_START, 0);
  sc->r = calloc(n, sizeof(*sc->r));
  sc->rank_of = malloc(s->nnics * sizeof(*sc->rank_of));
  sc->nic_bytes = calloc(s->nnics, sizeof(*sc->nic_bytes));
  size_t isz = uroce_coll_comm_info_size();
  char *blobs = malloc(isz * n);
  int *host = malloc(n * sizeof(*host));
  if (!sc->r || !sc->rank_of || !sc->nic_bytes || !blobs || !host) {
    free(host);
    free(blobs);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  /* Placement: server i on the i-th group of k NICs, or on the groups in
   * a random order (as a scheduler scatters a job); one rank per NIC
   * unless the scenario says. rank_of[] is a server order here, then each
   * NIC's lowest rank. */
  for (uint32_t i = 0; i < servers; i++)
    sc->rank_of[i] = i;
  if (cc->placement) {
    uint64_t rng = sim_seed(s->cfg.seed, 8, 0);
    for (uint32_t i = servers - 1; i > 0; i--) {
      uint32_t j = (uint32_t)(splitmix64(&rng) % (i + 1)), t = sc->rank_of[i];
      sc->rank_of[i] = sc->rank_of[j];
      sc->rank_of[j] = t;
    }
  }
  for (uint32_t i = 0; i < n; i++) {
    sc->r[i].server = sc->rank_of[i / g];
    sc->r[i].nic = sc->r[i].server * k + i % g / sc->per_nic;
    host[i] = (int)sc->r[i].server;
  }
  for (uint32_t i = 0; i < s->nnics; i++)
    sc->rank_of[i] = UINT32_MAX;
  for (uint32_t i = n; i-- > 0;)
    sc->rank_of[sc->r[i].nic] = i;
  uroce_coll_config cfg;
  uroce_coll_config_init(&cfg);
  cfg.phantom = 1;
  cfg.algo = UROCE_COLL_ALGO_AUTO;
  /* 64 KiB x 8 unless the scenario says: the real stack's 256 KiB x 4
   * trades pipelining for fewer per-chunk CPU costs, which a simulated
   * NIC does not have. */
  cfg.chunk_bytes = cc->chunk_bytes ? cc->chunk_bytes : 64 * 1024;
  cfg.slots = cc->slots ? (int)cc->slots : 8;
  for (uint32_t i = 0; i < n; i++) {
    struct sc_rank *r = &sc->r[i];
    r->sc = sc;
    r->rank = i;
    sim_ev_new(&r->ev, SIM_EV_COLL, i);
    r->ev.part = s->nics[r->nic].n.part;
    sim_ev_new(&r->conn_ev, SIM_EV_COLL_CONNECT, i);
    r->s = s;
    r->conn = calloc(n, sizeof(*r->conn));
    r->tp = (uroce_coll_transport){.ctx = r,
                                   .rank = (int)i,
                                   .size = (int)n,
                                   .reg_mr = tp_reg_mr,
                                   .dereg_mr = tp_dereg_mr,
                                   .post_write_imm = tp_post,
                                   .poll = tp_poll,
                                   .now_ns = tp_now};
    int rc = r->conn ? uroce_coll_comm_new(&r->tp, &cfg, &r->comm) : -12;
    if (!rc && g > 1)
      rc = uroce_coll_comm_set_hosts(r->comm, host, (int)n);
    if (rc) {
      free(host);
      free(blobs);
      snprintf(err, errlen, "workload collective: rank %u: %s", i,
               uroce_coll_strerror(rc));
      return -1;
    }
    uroce_coll_comm_info(r->comm, blobs + isz * i, isz);
  }
  free(host);
  for (uint32_t i = 0; i < n; i++)
    if (uroce_coll_comm_connect(sc->r[i].comm, blobs, isz * n)) {
      free(blobs);
      snprintf(err, errlen, "workload collective: connecting rank %u", i);
      return -1;
    }
  free(blobs);
  for (uint32_t i = 0; i < cc->nsizes; i++)
    sc->count[i] = count_of(sc, cc->sizes[i]);
  /* The bound's constants: payload efficiency of full MTU packets at the
   * host link rate; the mean latency of a step between ring neighbours. */
  const struct sim_cfg *c = &s->cfg;
  uint32_t wire = sim_data_wire_bytes(c, c->tp.mtu, false);
  sc->factor = uroce_coll_busbw_factor((uroce_coll_kind)cc->kind, (int)n);
  sc->link_gbps =
      (double)c->topo.link[0].rate_bps / 1e9 * c->tp.mtu / (double)wire;
  sc->chunk_bytes = cfg.chunk_bytes & ~(uint64_t)7;
  sc->hdr_bytes = 16; /* the slot header before each chunk (src/coll) */
  sc->hop_prop_ps = malloc(n * sizeof(double));
  sc->hop_ps_per_byte = malloc(n * sizeof(double));
  if (!sc->hop_prop_ps || !sc->hop_ps_per_byte) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  double lat = 0;
  for (uint32_t i = 0; i < n; i++) {
    const struct sc_rank *a = &sc->r[i], *b = &sc->r[(i + 1) % n];
    if (g > 1 && a->server == b->server) {
      /* an intra-host hop: one full packet's worth at the port */
      sc->hop_prop_ps[i] = (double)sc->intra_lat;
      sc->hop_ps_per_byte[i] = sc->intra_ps_per_byte;
    } else {
      sim_path_cost(s, a->nic, b->nic, &sc->hop_prop_ps[i],
                    &sc->hop_ps_per_byte[i]);
    }
    lat += sc->hop_prop_ps[i] + wire * sc->hop_ps_per_byte[i];
  }
  sc->step_latency_us = lat / n / 1e6;
  sim_schedule(s, &sc->start_ev, c->wl.start);
  return 0;
}

void sim_coll_del(struct sim *s) {
  struct sim_coll *sc = s->coll;
  if (!sc)
    return;
  for (uint32_t i = 0; sc->r && i < sc->n; i++) {
    struct sc_rank *r = &sc->r[i];
    /* The run is over: nothing more completes, so do not let the
     * communicator wait for outstanding writes. */
    r->qn = r->qhead = 0;
    if (r->comm)
      uroce_coll_comm_del(r->comm);
    free(r->conn);
    free(r->q);
    free(r->mrs);
    free(r->want);
    while (r->blocks) {
      struct sc_block *b = r->blocks;
      r->blocks = b->next;
      free(b);
    }
  }
  free(sc->r);
  free(sc->rank_of);
  free(sc->nic_bytes);
  free(sc->hop_prop_ps);
  free(sc->hop_ps_per_byte);
  free(sc);
  s->coll = 0;
}

const struct sim_coll_result *sim_coll_results(const struct sim *s,
                                               uint32_t *n) {
  *n = s->coll ? s->coll->nres : 0;
  return s->coll ? s->coll->res : 0;
}

uint32_t sim_coll_ranks(const struct sim *s) {
  return s->coll ? s->coll->n : 0;
}

double sim_coll_factor(const struct sim *s) {
  return s->coll ? s->coll->factor : 0;
}

double sim_coll_link_gbps(const struct sim *s) {
  return s->coll ? s->coll->link_gbps : 0;
}

/* Connections the run will hold (they live until the end): the pairs of
 * ranks that exchange data under each algorithm the sizes run with. */
uint64_t sim_coll_conns(const struct sim *s) {
  const struct sim_coll *sc = s->coll;
  const struct sim_coll_cfg *cc = &s->cfg.wl.coll;
  if (!sc || !sc->n)
    return 0;
  uint64_t n = sc->n, lg = 0, all = 0;
  unsigned seen = 0;
  while ((1ull << lg) < n)
    lg++;
  for (uint32_t i = 0; i < cc->nsizes; i++) {
    int algo = cc->algo ? cc->algo
                        : (int)uroce_coll_choose_algo(sc->r[0].comm, cc->kind,
                                                      cc->sizes[i]);
    if (seen >> algo & 1)
      continue;
    seen |= 1u << algo;
    all += cc->kind == UROCE_COLL_ALLTOALL ? n * (n - 1) / 2
           : algo == UROCE_COLL_ALGO_RHD   ? n * lg / 2 + n
           : algo == UROCE_COLL_ALGO_TREE  ? 2 * n
                                           : n; /* ring, chain */
  }
  return all; /* pairs two algorithms share are counted twice: a bound */
}

/* Bytes the ranks' schedules take at the largest (a rank keeps its step
 * array's capacity from one size to the next): rank 0's, times the ranks. */
uint64_t sim_coll_sched_bytes(const struct sim *s) {
  const struct sim_coll *sc = s->coll;
  const struct sim_coll_cfg *cc = &s->cfg.wl.coll;
  if (!sc || !sc->n || !sc->r[0].comm)
    return 0;
  uint64_t most = 0;
  for (uint32_t i = 0; i < cc->nsizes; i++) {
    size_t b = uroce_coll_sched_bytes(
        sc->r[0].comm, (uroce_coll_kind)cc->kind, sc->count[i],
        (uroce_coll_dtype)cc->dtype, 0, (uroce_coll_algo)cc->algo);
    if (b > most)
      most = b;
  }
  return most * sc->n;
}
