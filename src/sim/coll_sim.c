/* The collective workload: the collectives of src/coll, unchanged, run by
 * simulated ranks over the simulated NICs' engines.
 *
 * Rank i is NIC i. Each rank has one uroce_coll_comm in phantom mode
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
  struct sim_coll *sc;
  uint32_t rank, nic;
  uroce_coll_transport tp;
  uroce_coll_comm *comm;
  uroce_coll_req *req;
  struct he_flow **conn; /* per peer rank, made on first use */
  uroce_coll_cqe *q;     /* completions not yet polled */
  uint32_t qhead, qn, qcap;
  bool busy; /* a request of the current size is running */
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
};

/* ---- the transport ---- */

static int tp_reg_mr(void *ctx, void *addr, size_t len, uroce_coll_mr *mr) {
  struct sc_rank *r = ctx;
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

static int tp_post(void *ctx, int peer, const uroce_coll_mr *mr, size_t offset,
                   size_t len, uint64_t remote_addr, uint32_t rkey,
                   uint32_t imm, uint64_t wr_id) {
  (void)rkey;
  struct sc_rank *r = ctx;
  struct sim_coll *sc = r->sc;
  struct sim *s = sc->s;
  if (peer < 0 || (uint32_t)peer >= sc->n || (uint32_t)peer == r->rank ||
      len > UINT32_MAX)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct he_flow *c = r->conn[peer];
  if (!c) {
    uint32_t slots = s->cfg.wl.coll.slots ? s->cfg.wl.coll.slots : 8;
    c = sim_eng_conn_new(s, r->nic, sc->r[peer].nic, 2 * slots + 8,
                         2 * slots + 4);
    if (!c)
      return -12; /* -ENOMEM: out of QPs or memory */
    r->conn[peer] = c;
    sc->r[peer].conn[r->rank] = c;
    sc->conns++;
  }
  /* The slot header travels for real; the payload is phantom. */
  if (mr && len >= 16)
    memcpy((void *)(uintptr_t)remote_addr, (const char *)mr->addr + offset, 16);
  /* The comm's wr_id: kind in the top byte, a slot or rank below. */
  uint64_t w = (wr_id >> 56) << 48 | (wr_id & 0xFFFFFFFFFFFFull);
  return sim_eng_write_imm(s, c, r->nic, (uint32_t)len, imm, w);
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
  return r->sc->s->now / SIM_NS;
}

void sim_coll_wc(struct sim *s, uint32_t nic, uint32_t peer,
                 const struct uroce_wc *wc) {
  struct sim_coll *sc = s->coll;
  if (!sc || nic >= s->nnics || peer >= s->nnics ||
      sc->rank_of[nic] == UINT32_MAX || sc->rank_of[peer] == UINT32_MAX)
    return;
  struct sc_rank *r = &sc->r[sc->rank_of[nic]];
  uroce_coll_cqe q = {.peer = (int32_t)sc->rank_of[peer]};
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
  if (r->qn == r->qcap) {
    uint32_t cap = r->qcap ? 2 * r->qcap : 64;
    uroce_coll_cqe *nq = realloc(r->q, cap * sizeof(*nq));
    if (!nq) {
      sc->failed = sc->finished = true;
      return;
    }
    r->q = nq;
    r->qcap = cap;
  }
  r->q[r->qn++] = q;
  if (r->busy)
    sim_schedule_min(s, &r->ev, s->now);
}

/* ---- bounds ---- */

/* Latency of one step from NIC a to NIC b: propagation over every link of
 * the path, plus the store-and-forward of a full packet at every switch
 * (the first link's serialisation is in the bandwidth term). Up-down
 * routing: every path between two NICs has the same links' kinds. */
static double path_latency_ps(struct sim *s, uint32_t a, uint32_t b,
                              uint32_t wire) {
  struct sim_port *p = &s->nics[a].port;
  double t = (double)p->delay;
  struct sim_node *n = p->peer->node;
  for (int hops = 0; n->kind == SIM_NODE_SWITCH && hops < 16; hops++) {
    struct sim_switch *sw = (struct sim_switch *)n;
    uint16_t o = b >= sw->lo && b < sw->hi ? (uint16_t)((b - sw->lo) / sw->span)
                                           : sw->n_down;
    struct sim_port *out = &sw->n.ports[o];
    t += (double)out->delay + (double)sim_ser_time(wire, out->rate_bps);
    n = out->peer->node;
  }
  return t;
}

/* Dependent steps of the latency term: ring allreduce 2(n-1), the other
 * rings and the chains n-1; 0 (bandwidth only) for the others. */
static uint32_t lat_steps(int kind, int algo, uint32_t n) {
  if (algo != UROCE_COLL_ALGO_RING)
    return 0;
  return kind == UROCE_COLL_ALLREDUCE ? 2 * (n - 1) : n - 1;
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
  sc->ndone = 0;
  for (uint32_t i = 0; i < sc->n; i++) {
    struct sc_rank *r = &sc->r[i];
    int rc =
        uroce_coll_start(r->comm, (uroce_coll_kind)cc->kind, 0, 0, res->count,
                         (uroce_coll_dtype)cc->dtype, UROCE_COLL_SUM, 0,
                         (uroce_coll_algo)cc->algo, &r->req);
    if (rc) {
      fprintf(stderr, "uroce sim: rank %u: starting the collective: %s\n", i,
              uroce_coll_strerror(rc));
      sc->failed = sc->finished = true;
      return;
    }
    res->algo = uroce_coll_req_algo(r->req);
    r->busy = true;
    sim_schedule_min(s, &r->ev, s->now);
  }
}

static void finish_size(struct sim_coll *sc) {
  struct sim *s = sc->s;
  const struct sim_coll_cfg *cc = &s->cfg.wl.coll;
  struct sim_coll_result *res = &sc->res[sc->cur];
  res->time = s->now - res->start;
  double t = (double)res->time * 1e-12;
  res->algbw_gbs = t > 0 ? (double)res->bytes / t / 1e9 : 0;
  res->busbw_gbs = res->algbw_gbs * sc->factor;
  res->steps = lat_steps(cc->kind, res->algo, sc->n);
  res->step_latency_us = sc->step_latency_us;
  double bytes_per_s = sc->link_gbps * 1e9 / 8;
  double bound_s = sc->factor * (double)res->bytes / bytes_per_s +
                   res->steps * sc->step_latency_us * 1e-6;
  res->bound_us = bound_s * 1e6;
  res->bound_busbw_gbs =
      bound_s > 0 ? sc->factor * (double)res->bytes / bound_s / 1e9 : 0;
  res->ratio = bound_s > 0 ? t / bound_s : 0;
  sc->nres = sc->cur + 1;
  sc->cur++;
  sim_schedule(s, &sc->start_ev, s->now);
}

void sim_coll_event(struct sim *s, struct sim_ev *ev) {
  struct sim_coll *sc = s->coll;
  if (!sc || sc->finished)
    return;
  if (ev->arg == SIM_EV_COLL_START) {
    start_size(sc);
    return;
  }
  struct sc_rank *r = container_of(ev, struct sc_rank, ev);
  if (!r->busy)
    return;
  int rc = uroce_coll_test(r->req);
  if (rc == UROCE_COLL_INPROGRESS)
    return;
  r->busy = false;
  if (rc < 0) {
    fprintf(stderr, "uroce sim: rank %u: %s: %s\n", r->rank,
            uroce_coll_strerror(rc), uroce_coll_errmsg(r->comm));
    sc->failed = sc->finished = true;
    return;
  }
  if (++sc->ndone == sc->n)
    finish_size(sc);
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
  uint32_t n = cc->ranks ? cc->ranks : s->nnics;
  if (n < 2 || n > s->nnics) {
    snprintf(err, errlen, "workload: ranks must be 2..%u (the NICs), got %u",
             s->nnics, n);
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
  sim_ev_init(&sc->start_ev);
  sc->start_ev.arg = SIM_EV_COLL_START;
  sc->r = calloc(n, sizeof(*sc->r));
  sc->rank_of = malloc(s->nnics * sizeof(*sc->rank_of));
  size_t isz = uroce_coll_comm_info_size();
  char *blobs = malloc(isz * n);
  if (!sc->r || !sc->rank_of || !blobs) {
    free(blobs);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  /* Placement: rank i on NIC i, or on the NICs in a random order (as a
   * scheduler scatters a job). */
  for (uint32_t i = 0; i < s->nnics; i++)
    sc->rank_of[i] = i;
  if (cc->placement) {
    uint64_t rng = sim_seed(s->cfg.seed, 8, 0);
    for (uint32_t i = s->nnics - 1; i > 0; i--) {
      uint32_t j = (uint32_t)(sim_rand(&rng) % (i + 1)), t = sc->rank_of[i];
      sc->rank_of[i] = sc->rank_of[j];
      sc->rank_of[j] = t;
    }
  }
  for (uint32_t i = 0; i < n; i++)
    sc->r[i].nic = sc->rank_of[i]; /* rank i's NIC */
  for (uint32_t i = 0; i < s->nnics; i++)
    sc->rank_of[i] = UINT32_MAX;
  for (uint32_t i = 0; i < n; i++)
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
    sim_ev_init(&r->ev);
    r->ev.arg = SIM_EV_COLL;
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
    if (rc) {
      free(blobs);
      snprintf(err, errlen, "workload collective: rank %u: %s", i,
               uroce_coll_strerror(rc));
      return -1;
    }
    uroce_coll_comm_info(r->comm, blobs + isz * i, isz);
  }
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
  double lat = 0;
  for (uint32_t i = 0; i < n; i++)
    lat += path_latency_ps(s, sc->r[i].nic, sc->r[(i + 1) % n].nic, wire);
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
  }
  free(sc->r);
  free(sc->rank_of);
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
