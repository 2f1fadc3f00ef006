/* Parallel simulation on one machine: the fabric cut into partitions, one
 * thread each, run in lock step over windows no longer than the lookahead
 * (the shortest delay of a link between two switches), with results
 * identical to the sequential run's. The design is in docs/sim.md,
 * "Parallel simulation"; in short:
 *
 * - Every node (NIC, switch) belongs to one partition. A NIC is with its
 *   switch, so host links are never cut; a switch whose NICs below all lie
 *   in one block of NIC ids is with that block, the others (spines, cores)
 *   are dealt round the partitions.
 * - An event runs in one partition: a port's transmissions and flow
 *   control where the port is, the arrival of its packets where its peer
 *   is, a NIC's own events where the NIC is. Global events (flow starts,
 *   samples, failures, retries) touch several and run alone on the main
 *   thread with every partition stopped at their time.
 * - Equal-time events run in key order (heap.h), so each partition runs
 *   its events in the order the sequential run does; what one partition
 *   does to another travels as a message (a packet onto a cut link, an
 *   event to schedule there) that is due a lookahead or more later, and
 *   is delivered at the start of the next window. InfiniBand's credits
 *   travel the same way, in FC packets.
 *
 * Each partition runs on its own copy of struct sim (the shell): the same
 * pointers to the shared topology and flows, its own event heap, packet
 * pool, counters and pause log, which the main thread folds into the
 * simulator's after each window. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"

#define PAR_MAX 256 /* partitions at most */

struct sim_msg {
  struct sim_port *port; /* a packet for its in-flight FIFO; NULL: event */
  void *obj;             /* the packet, or the event */
  sim_time_t t;
};

struct msgq {
  struct sim_msg *a;
  uint32_t n, cap;
};

struct shard {
  struct sim sim; /* the shell: this partition's struct sim */
  struct sim_par *par;
  /* Messages sent, per parity of the window: one queue per partition,
   * then one for the global heap. */
  struct msgq *out[2];
  sim_time_t out_min; /* earliest message to a partition this window */
  sim_time_t peek;    /* earliest event left in the heap after it */
  uint64_t nev;       /* events run, not yet counted */
  uint32_t npause;    /* pause log entries already merged */
  pthread_t th;
  bool started;
};

/* A distributed run's bytes for one rank (nb_put). */
struct nbuf {
  unsigned char *a;
  size_t n, cap;
};

struct sim_par {
  struct sim *main;
  uint32_t n;
  struct shard *sh;
  pthread_barrier_t go, done;
  pthread_mutex_t mu; /* the start: gate 1 runs, -1 quits */
  pthread_cond_t cv;
  int gate;
  sim_time_t wend; /* this window runs the events due by then */
  int wr;          /* parity of the queues written this window */
  bool serial;     /* the main thread runs alone (no window running) */
  bool quit;
  /* A distributed run: what goes to each rank until the next exchange
   * (the collectives' messages too), the global events sent, the
   * exchange's arguments, the reductions, the FC packets sent while
   * credits may still join them (t: the rank). */
  struct nbuf *nb, gb;
  void **bufs, **in;
  size_t *lens, *inlen;
  uint64_t *nv;
  struct msgq open;
};

/* ---- partitions ---- */

static uint32_t ncpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0)
      return (uint32_t)n;
  }
  return 1;
}

/* The lookahead: the shortest delay of a link between two switches. */
static sim_time_t lookahead(const struct sim *s) {
  sim_time_t l = SIM_NEVER;
  for (uint32_t j = 0; j < s->nports; j++) {
    const struct sim_port *p = &s->ports[j];
    if (p->peer && p->peer->node->kind == SIM_NODE_SWITCH && p->delay < l)
      l = p->delay;
  }
  return l == SIM_NEVER ? 0 : l;
}

/* Switches with NICs on them. */
static uint32_t leaves(const struct sim *s) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->nswitches; i++) {
    const struct sim_node *sw = &s->sws[i].n;
    for (uint16_t j = 0; j < sw->nports; j++)
      if (sw->ports[j].peer && sw->ports[j].peer->node->kind == SIM_NODE_NIC) {
        n++;
        break;
      }
  }
  return n;
}

/* The partitions of s and why not more (a constant string, or NULL). */
static uint32_t plan(const struct sim *s, const char **why) {
  uint32_t want = s->cfg.threads ? s->cfg.threads : ncpus();
  if (s->net && s->net->size > 1)
    want = s->net->size; /* one partition per rank */
  *why = 0;
  if (want <= 1)
    return 1;
  if (s->trace) {
    *why = "a trace is written in event order, on one thread";
    return 1;
  }
  if (!s->cell) {
    *why = "no link between two switches with a delay (no lookahead)";
    return 1;
  }
  uint32_t n = leaves(s);
  if (want > n) {
    *why = "one partition per switch with NICs at most";
    want = n;
  }
  if (want > PAR_MAX) {
    *why = "at most 256 partitions";
    want = PAR_MAX;
  }
  return want ? want : 1;
}

/* Everything in partition 0. */
static void sim_par_partition_one(struct sim *s) {
  for (uint32_t i = 0; i < s->nswitches; i++)
    s->sws[i].n.part = 0;
  for (uint32_t i = 0; i < s->nnics; i++) {
    struct sim_nic *nic = &s->nics[i];
    nic->n.part = 0;
    nic->port.tx_ev.part = nic->port.rx_ev.part = nic->port.fc_ev.part = 0;
    nic->port.fc_tick.part = nic->port.fc_rx_ev.part = 0;
    nic->ev.part = nic->cc_ev.part = nic->n.sma_ev.part = 0;
  }
  for (uint32_t i = 0; i < s->nswitches; i++)
    s->sws[i].n.sma_ev.part = 0;
  if (s->sm)
    sim_sm_ev(s)->part = 0;
  for (uint32_t j = 0; j < s->nports; j++)
    s->ports[j].tx_ev.part = s->ports[j].rx_ev.part = s->ports[j].fc_ev.part =
        s->ports[j].fc_tick.part = s->ports[j].fc_rx_ev.part = 0;
  for (uint32_t i = 0; i < s->nflows; i++)
    sim_flow_int(s, i)->end_ev.part = 0;
}

/* The work at each NIC, to balance the partitions by: the ends of flows
 * and the collective's ranks there, plus one (an idle NIC, and scenarios
 * whose flows come later, count evenly). Cumulative: w[i] is the work of
 * NICs 0..i-1; w[nnics] the total. NULL without memory. */
static uint64_t *nic_work(const struct sim *s) {
  uint64_t *w = calloc((size_t)s->nnics + 1, sizeof(*w));
  if (!w)
    return 0;
  for (uint32_t i = 0; i < s->nflows; i++) {
    const struct sim_flow *f = &sim_flow_int(s, i)->f;
    w[f->src + 1] += 16;
    w[f->dst + 1] += 16;
  }
  uint32_t per_nic = s->coll ? sim_coll_per_host(&s->cfg.wl.coll) /
                                   sim_coll_nics_per_host(&s->cfg.wl.coll)
                             : 0;
  for (uint32_t i = 0; i < s->nnics; i++)
    w[i + 1] += 1 + (sim_coll_is_rank(s, i) ? 16ull * per_nic : 0);
  for (uint32_t i = 0; i < s->nnics; i++)
    w[i + 1] += w[i];
  return w;
}

/* Sets every node's and event's partition. Called by sim_new once the
 * workload exists: switches by the work of the NICs below them. */
void sim_par_partition(struct sim *s) {
  s->cell = lookahead(s);
  const char *why;
  uint32_t n = plan(s, &why);
  s->nparts = n;
  s->par_why = why;
  uint64_t *w = n > 1 ? nic_work(s) : 0;
  uint32_t rr = 0;
  for (uint32_t i = 0; i < s->nswitches; i++) {
    struct sim_switch *sw = &s->sws[i];
    uint32_t lo = sw->lo, hi = sw->hi;
    uint64_t b0 = 0, b1 = 1;
    if (w && hi > lo && hi <= s->nnics) {
      /* the block of a NIC: where the middle of its work falls */
      b0 = (w[lo] + w[lo + 1]) / 2 * n / w[s->nnics];
      b1 = (w[hi - 1] + w[hi]) / 2 * n / w[s->nnics];
    }
    sw->n.part = b0 == b1 ? (uint16_t)b0 : (uint16_t)(rr++ % n);
  }
  free(w);
  for (uint32_t i = 0; i < s->nnics; i++) {
    struct sim_nic *nic = &s->nics[i];
    nic->n.part = nic->port.peer ? nic->port.peer->node->part : 0;
  }
  for (uint32_t j = 0; j < s->nports; j++) {
    struct sim_port *p = &s->ports[j];
    p->tx_ev.part = p->fc_ev.part = p->fc_tick.part = p->node->part;
    p->rx_ev.part = p->peer ? p->peer->node->part : p->node->part;
    p->fc_rx_ev.part = p->rx_ev.part;
  }
  for (uint32_t i = 0; i < s->nnics; i++) {
    struct sim_nic *nic = &s->nics[i];
    struct sim_port *p = &nic->port;
    p->tx_ev.part = p->fc_ev.part = p->fc_tick.part = nic->n.part;
    p->rx_ev.part = p->peer ? p->peer->node->part : nic->n.part;
    p->fc_rx_ev.part = p->rx_ev.part;
    nic->ev.part = nic->cc_ev.part = nic->n.sma_ev.part = nic->n.part;
  }
  for (uint32_t i = 0; i < s->nswitches; i++)
    s->sws[i].n.sma_ev.part = s->sws[i].n.part;
  if (s->sm) /* the SM lives where its NIC is */
    sim_sm_ev(s)->part = s->nics[sim_sm_master(s)].n.part;
  for (uint32_t i = 0; i < s->nflows; i++) {
    struct sim_flow_int *fi = sim_flow_int(s, i);
    fi->end_ev.part = s->nics[fi->f.dst].n.part;
  }
  sim_coll_repart(s);
  /* A collective's ranks of one server write to each other over the
   * intra-host link, which has no lookahead: the server's NICs
   * (consecutive ids, on one or more switches) must share a partition. */
  if (n > 1 && s->cfg.wl.kind == SIM_WL_COLLECTIVE) {
    uint32_t k = sim_coll_nics_per_host(&s->cfg.wl.coll);
    for (uint32_t i = 0; k > 1 && i < s->nnics; i++)
      if (s->nics[i].n.part != s->nics[i - i % k].n.part) {
        s->nparts = 1;
        s->par_why = "a server's NICs are on switches of different "
                     "partitions, and its ranks share an intra-host link";
        sim_par_partition_one(s);
        sim_coll_repart(s);
        return;
      }
  }
}

int sim_net_check(const struct sim *s, char *err, size_t errlen) {
  uint32_t n = s->net->size;
  const char *no = 0;
  if (s->cfg.threads > 1)
    no = "threads and MPI ranks do not combine yet: one partition per rank, "
         "so leave threads at 1";
  else if (s->ib && s->cfg.nfail)
    no = "InfiniBand failures do not run on MPI ranks yet (the SM's traps, "
         "sweeps and LFT Sets cross ranks; an LFT Set points into the SM's "
         "tables)";
  else if (s->sm && s->cfg.ib.sm.standby_nic != UINT32_MAX)
    no = "a standby SM does not run on MPI ranks yet (its polls decide a "
         "takeover in a global event)";
  if (no) {
    snprintf(err, errlen, "%s", no);
    return -1;
  }
  if (s->nparts != n) {
    snprintf(err, errlen,
             "%u MPI ranks, but this fabric cuts into %u partition%s%s%s: "
             "run with at most that many ranks",
             n, s->nparts, s->nparts == 1 ? "" : "s", s->par_why ? ": " : "",
             s->par_why ? s->par_why : "");
    return -1;
  }
  return 0;
}

uint32_t sim_threads(const struct sim *s, const char **why) {
  if (why)
    *why = s->par_why;
  return s->nparts ? s->nparts : 1;
}

/* ---- messages ---- */

static struct shard *shard_of(struct sim *s) {
  return container_of(s, struct shard, sim);
}

static void msg_put(struct msgq *q, struct sim_port *port, void *obj,
                    sim_time_t t) {
  if (q->n == q->cap) {
    uint32_t cap = q->cap ? 2 * q->cap : 256;
    struct sim_msg *a = realloc(q->a, cap * sizeof(*a));
    if (!a) {
      fprintf(stderr, "uroce sim: out of memory for messages\n");
      abort();
    }
    q->a = a;
    q->cap = cap;
  }
  q->a[q->n++] = (struct sim_msg){port, obj, t};
}

struct sim_heap *sim_par_route(struct sim *s, struct sim_ev *ev, sim_time_t t) {
  struct sim_par *par = s->par;
  if (par->serial) {
    if (ev->key & SIM_KEY_GLOBAL) {
      /* A distributed run: a host model or collective rank (through its
       * partition's shell) runs here alone, and every rank must have the
       * global events it asks for, at the exchange; what the simulator
       * itself schedules (with its own struct sim) every rank does. */
      if (s->net && s != par->main) {
        msg_put(&par->sh[s->net->rank].out[par->wr][par->n], 0, ev, t);
        return 0;
      }
      return &par->main->heap;
    }
    /* A distributed run: every rank runs a global event, and the rank of
     * the event's partition schedules it there (net_serial). */
    return sim_mine(s, ev->part) ? &par->sh[ev->part].sim.heap : 0;
  }
  if (!(ev->key & SIM_KEY_GLOBAL) && ev->part == s->part)
    return &s->heap;
  struct shard *d = shard_of(s);
  uint32_t to = ev->key & SIM_KEY_GLOBAL ? par->n : ev->part;
  msg_put(&d->out[par->wr][to], 0, ev, t);
  if (to < par->n && t < d->out_min)
    d->out_min = t;
  return 0;
}

bool sim_par_in_window(const struct sim *s) {
  return !s->par->serial;
}

bool sim_par_cross(struct sim *s, struct sim_port *p, struct sim_pkt *pkt) {
  struct sim_par *par = s->par;
  struct shard *d;
  if (par->serial) {
    /* A global event's work at a port of this rank (net_serial): the
     * packet goes to the peer's rank as in a window. (s may be the
     * simulator's own struct sim, whose part says nothing.) */
    if (sim_mine(s, p->rx_ev.part))
      return false;
    d = &par->sh[s->net->rank];
  } else {
    if (p->rx_ev.part == s->part)
      return false;
    d = shard_of(s);
  }
  msg_put(&d->out[par->wr][p->rx_ev.part], p, pkt, pkt->ts);
  if (pkt->ts < d->out_min)
    d->out_min = pkt->ts;
  return true;
}

/* Takes the messages queue q holds into partition s (or, for the global
 * queue, the simulator): every event in it is s's, so sim_schedule puts
 * it on s's heap, in a window or not. */
static void take(struct sim *s, struct msgq *q) {
  for (uint32_t i = 0; i < q->n; i++) {
    struct sim_msg *m = &q->a[i];
    struct sim_pkt *pkt = m->obj;
    if (!m->port)
      sim_schedule(s, m->obj, m->t);
    else if (pkt->kind == SIM_PKT_FC)
      sim_fc_fifo_put(s, m->port, pkt);
    else
      sim_fly_put(s, m->port, pkt);
  }
  q->n = 0;
}

/* Partition j takes what every partition sent it in parity rd. */
static void take_all(struct sim_par *par, uint32_t j, int rd) {
  for (uint32_t i = 0; i < par->n; i++)
    take(&par->sh[j].sim, &par->sh[i].out[rd][j]);
}

/* ---- windows ---- */

static void window(struct shard *d) {
  struct sim_par *par = d->par;
  struct sim *s = &d->sim;
  take_all(par, s->part, par->wr ^ 1);
  d->out_min = SIM_NEVER;
  uint64_t n = 0;
  sim_time_t t;
  struct sim_ev *ev;
  while ((ev = sim_heap_pop(&s->heap, par->wend, &t))) {
    s->now = t;
    sim_dispatch(s, ev);
    n++;
  }
  d->nev += n;
  d->peek = sim_heap_peek(&s->heap);
}

static void *worker(void *arg) {
  struct shard *d = arg;
  struct sim_par *par = d->par;
  pthread_mutex_lock(&par->mu);
  while (!par->gate)
    pthread_cond_wait(&par->cv, &par->mu);
  int gate = par->gate;
  pthread_mutex_unlock(&par->mu);
  if (gate < 0)
    return 0;
  for (;;) {
    pthread_barrier_wait(&par->go);
    if (par->quit)
      break;
    window(d);
    pthread_barrier_wait(&par->done);
  }
  return 0;
}

/* The counters a window added in partition d go to the simulator's. */
static void fold_stats(struct sim_stats *to, struct sim_stats *from) {
  /* Every field but these few is a count: a new one must be added here. */
  _Static_assert(sizeof(struct sim_stats) ==
                     8 * (26 + 11 * SIM_TIERS + SIM_NPRIO),
                 "fold every field of struct sim_stats");
#define ADD(f) to->f += from->f
#define ADDV(f)                                                                \
  for (size_t i_ = 0; i_ < sizeof(to->f) / sizeof(to->f[0]); i_++)             \
  to->f[i_] += from->f[i_]
  ADD(events);
  ADD(flows_done);
  ADD(flows_failed);
  ADD(data_pkts);
  ADD(ctrl_pkts);
  ADD(retx_pkts);
  ADD(timeouts);
  ADD(naks);
  ADD(cnps);
  ADDV(drops_buffer);
  ADDV(trims);
  ADDV(drops_trim);
  ADDV(drops_lossless);
  ADD(drops_wire);
  ADD(drops_noroute);
  ADD(drops_link_down);
  ADDV(ecn_marks);
  ADDV(pause_frames);
  ADDV(paused_time);
  ADD(pkts_allocated);
  ADD(fc_pkts);
  ADD(fc_periodic);
  ADD(credit_overruns);
  for (int i = 0; i < SIM_TIERS; i++)
    if (from->max_vl_in[i] > to->max_vl_in[i])
      to->max_vl_in[i] = from->max_vl_in[i];
  ADDV(credit_wait);
  ADDV(vl_tx_bytes);
  ADD(fecn_marks);
  ADD(becns);
  ADD(vl15_pkts);
  ADD(vl15_bytes);
  ADD(vl15_drops);
  ADD(vl15_lost);
#undef ADD
#undef ADDV
  memset(from, 0, sizeof(*from));
}

static int cmp_pause(const void *a, const void *b) {
  const struct sim_pause_ev *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return x->key < y->key ? -1 : x->key > y->key;
}

/* Appends the n entries of v (taking it) to s's pause log in run order:
 * by time, then by the key of the event that logged each. */
static void append_pauses(struct sim *s, struct sim_pause_ev *v, size_t n) {
  qsort(v, n, sizeof(*v), cmp_pause);
  for (size_t i = 0; i < n; i++)
    sim_pause_append(s, &v[i]);
  free(v);
}

/* The pause frames the partitions logged, in the order the sequential
 * run logs them: by time, then by the key of the event. */
static void fold_pauses(struct sim_par *par) {
  struct sim *m = par->main;
  uint32_t n = 0;
  for (uint32_t i = 0; i < par->n; i++)
    n += par->sh[i].sim.npause_log;
  if (!n)
    return;
  struct sim_pause_ev *v = malloc(n * sizeof(*v));
  uint32_t k = 0;
  for (uint32_t i = 0; i < par->n; i++) {
    struct sim *s = &par->sh[i].sim;
    if (v && s->npause_log)
      memcpy(v + k, s->pause_log, s->npause_log * sizeof(*v));
    k += s->npause_log;
    m->pause_log_full |= s->pause_log_full;
    s->npause_log = 0;
    s->pause_log_full = false;
  }
  if (!v) {
    m->pause_log_full = true;
    return;
  }
  append_pauses(m, v, n);
}

void sim_net_pauses(struct sim *s) {
  const struct sim_net *net = s->net;
  uint32_t n = net->size;
  size_t len = (size_t)s->npause_log * sizeof(*s->pause_log);
  void **bufs = calloc(n, sizeof(*bufs)), **in = calloc(n, sizeof(*in));
  size_t *lens = calloc(n, sizeof(*lens)), *inlen = calloc(n, sizeof(*inlen));
  if (!bufs || !in || !lens || !inlen) {
    fprintf(stderr, "uroce sim: out of memory for the pause logs\n");
    abort(); /* the other ranks would wait for this one */
  }
  for (uint32_t j = 0; j < n; j++) {
    bufs[j] = s->pause_log;
    lens[j] = j == net->rank ? 0 : len;
  }
  uint64_t full = s->pause_log_full;
  if (net->xchg(net->ctx, bufs, lens, in, inlen)) {
    fprintf(stderr, "uroce sim: exchanging the pause logs failed\n");
    abort();
  }
  sim_net_reduce(s, &full, 1, SIM_NET_MAX);
  size_t tot = s->npause_log;
  for (uint32_t i = 0; i < n; i++)
    tot += inlen[i] / sizeof(struct sim_pause_ev);
  struct sim_pause_ev *v = malloc((tot ? tot : 1) * sizeof(*v));
  size_t k = 0;
  if (v) {
    for (uint32_t i = 0; i < n; i++) {
      const void *src = i == net->rank ? (const void *)s->pause_log : in[i];
      size_t m = i == net->rank ? s->npause_log
                                : inlen[i] / sizeof(struct sim_pause_ev);
      if (m)
        memcpy(v + k, src, m * sizeof(*v));
      k += m;
    }
  }
  for (uint32_t i = 0; i < n; i++)
    free(in[i]);
  free(bufs);
  free(in);
  free(lens);
  free(inlen);
  s->npause_log = 0;
  s->pause_log_full = full || !v;
  if (v)
    append_pauses(s, v, k);
}

/* After a window or a global event: counters, logs and losses to the
 * simulator; whether the workload finished. */
static void fold(struct sim_par *par) {
  struct sim *m = par->main;
  for (uint32_t i = 0; i < par->n; i++) {
    struct shard *d = &par->sh[i];
    struct sim *s = &d->sim;
    fold_stats(&m->st, &s->st);
    m->st.events += d->nev;
    d->nev = 0;
    m->acked_bytes += s->acked_bytes;
    s->acked_bytes = 0;
    if (s->now > m->now)
      m->now = s->now;
    if (s->fail_lost)
      sim_fail_lost_fold(m, s->fail_lost, s->fail_last);
    s->fail_lost = 0;
    s->fail_last = 0;
  }
  fold_pauses(par);
  sim_coll_fold(m);
}

/* A partition's shell takes the simulator's shared state again (a global
 * event may have changed routes, failures, flows), keeping its own. */
static void sync_shell(struct sim_par *par, struct shard *d) {
  struct sim *s = &d->sim, keep = *s;
  *s = *par->main;
  s->now = keep.now;
  s->heap = keep.heap;
  s->st = keep.st;
  s->free_pkts = keep.free_pkts;
  s->chunks = keep.chunks;
  s->nchunks = keep.nchunks;
  s->chunk_cap = keep.chunk_cap;
  s->acked_bytes = keep.acked_bytes;
  s->pause_log = keep.pause_log;
  s->npause_log = keep.npause_log;
  s->pause_log_cap = keep.pause_log_cap;
  s->pause_log_full = keep.pause_log_full;
  s->par = par;
  s->part = keep.part;
  s->cur_key = keep.cur_key;
  s->fail_lost = keep.fail_lost;
  s->fail_last = keep.fail_last;
}

/* ---- setup and teardown ---- */

/* The events of the simulator's heap go to their partitions' heaps, but
 * the global ones. */
static void move_events(struct sim *m, struct sim_par *par) {
  struct sim_heap keep;
  if (sim_heap_init(&keep, m->heap.n)) {
    fprintf(stderr, "uroce sim: out of memory for events\n");
    abort();
  }
  sim_time_t t;
  struct sim_ev *ev;
  while ((ev = sim_heap_pop(&m->heap, SIM_NEVER, &t))) {
    struct sim_heap *h =
        ev->key & SIM_KEY_GLOBAL ? &keep : &par->sh[ev->part].sim.heap;
    if (!sim_mine(m, ev->part) && !(ev->key & SIM_KEY_GLOBAL)) {
      ev->at = SIM_NEVER; /* its rank runs it */
      continue;
    }
    if (sim_heap_push(h, ev, t)) {
      fprintf(stderr, "uroce sim: out of memory for events\n");
      abort();
    }
  }
  sim_heap_free(&m->heap);
  m->heap = keep;
}

static void par_free(struct sim_par *par) {
  struct sim *m = par->main;
  for (uint32_t i = 0; i < par->n; i++) {
    struct shard *d = &par->sh[i];
    struct sim *s = &d->sim;
    /* Events and packets go back to the simulator. */
    sim_time_t t;
    struct sim_ev *ev;
    while ((ev = sim_heap_pop(&s->heap, SIM_NEVER, &t)))
      if (sim_heap_push(&m->heap, ev, t)) {
        fprintf(stderr, "uroce sim: out of memory for events\n");
        abort();
      }
    sim_heap_free(&s->heap);
    if (s->free_pkts) {
      struct sim_pkt *tail = s->free_pkts;
      while (tail->next)
        tail = tail->next;
      tail->next = m->free_pkts;
      m->free_pkts = s->free_pkts;
    }
    for (uint32_t c = 0; c < s->nchunks; c++) {
      if (m->nchunks == m->chunk_cap) {
        uint32_t cap = m->chunk_cap ? 2 * m->chunk_cap : 64;
        struct sim_pkt **a = realloc(m->chunks, cap * sizeof(*a));
        if (!a) {
          fprintf(stderr, "uroce sim: out of memory\n");
          abort();
        }
        m->chunks = a;
        m->chunk_cap = cap;
      }
      m->chunks[m->nchunks++] = s->chunks[c];
    }
    free(s->chunks);
    free(s->pause_log);
    for (int w = 0; w < 2; w++) {
      for (uint32_t j = 0; d->out[w] && j <= par->n; j++)
        free(d->out[w][j].a);
      free(d->out[w]);
    }
  }
  pthread_mutex_destroy(&par->mu);
  pthread_cond_destroy(&par->cv);
  free(par->sh);
  free(par);
}

static struct sim_par *par_new(struct sim *m, uint32_t n) {
  struct sim_par *par = calloc(1, sizeof(*par));
  if (!par)
    return 0;
  par->sh = calloc(n, sizeof(*par->sh));
  if (!par->sh) {
    free(par);
    return 0;
  }
  par->main = m;
  par->n = n;
  par->serial = true;
  pthread_mutex_init(&par->mu, 0);
  pthread_cond_init(&par->cv, 0);
  bool ok = true;
  for (uint32_t i = 0; i < n; i++) {
    struct shard *d = &par->sh[i];
    struct sim *s = &d->sim;
    *s = *m;
    memset(&s->heap, 0, sizeof(s->heap));
    memset(&s->st, 0, sizeof(s->st));
    s->free_pkts = 0;
    s->chunks = 0;
    s->nchunks = s->chunk_cap = 0;
    s->acked_bytes = 0;
    s->pause_log = 0;
    s->npause_log = s->pause_log_cap = 0;
    s->pause_log_full = false;
    s->par = par;
    s->part = (uint16_t)i;
    s->fail_lost = 0;
    s->fail_last = 0;
    d->par = par;
    d->peek = d->out_min = SIM_NEVER;
    ok = ok && !sim_heap_init(&s->heap, 1024);
    for (int w = 0; w < 2; w++) {
      d->out[w] = calloc(n + 1, sizeof(struct msgq));
      ok = ok && d->out[w];
    }
  }
  if (!ok) {
    par_free(par);
    return 0;
  }
  return par;
}

/* The host models keep the struct sim they were made with: each NIC's
 * must be its partition's shell while the run lasts. */
static void rebind(struct sim *m, struct sim_par *par) {
  struct sim *part[PAR_MAX];
  for (uint32_t i = 0; par && i < par->n; i++)
    part[i] = &par->sh[i].sim;
  sim_coll_rebind(m, par ? part : 0);
  if (!m->host->rebind)
    return;
  for (uint32_t i = 0; i < m->nnics; i++)
    m->host->rebind(m->nics[i].model, par ? part[m->nics[i].n.part] : m);
}

/* Runs the global events due at t (the earliest events there are), one
 * at a time with every partition stopped; events they schedule at t in a
 * partition run in a window before the next. */
static void serial(struct sim_par *par, sim_time_t t) {
  struct sim *m = par->main;
  /* Messages still queued go where they are due first. */
  for (uint32_t j = 0; j < par->n; j++)
    take_all(par, j, par->wr);
  sim_time_t tt;
  struct sim_ev *ev = sim_heap_pop(&m->heap, t, &tt);
  if (!ev)
    return;
  m->now = tt;
  for (uint32_t i = 0; i < par->n; i++) {
    par->sh[i].sim.now = tt;
    par->sh[i].sim.cur_key = ev->key;
    sim_time_t p = sim_heap_peek(&par->sh[i].sim.heap);
    par->sh[i].peek = p;
    par->sh[i].out_min = SIM_NEVER;
  }
  sim_dispatch(m, ev);
  if (sim_net_rank(m) == 0) /* every rank runs it: counted once */
    m->st.events++;
  for (uint32_t i = 0; i < par->n; i++)
    par->sh[i].peek = sim_heap_peek(&par->sh[i].sim.heap);
}

/* Runs the partitions' events due at t (the earliest there are, and a
 * global event is due at t too) on the main thread, in key order across
 * partitions, as the sequential run does: a window of one instant is not
 * worth two barriers (a workload whose flows all start at once has one
 * such instant per flow). */
static void sweep(struct sim_par *par, sim_time_t t) {
  for (uint32_t j = 0; j < par->n; j++)
    take_all(par, j, par->wr);
  for (;;) {
    struct shard *best = 0;
    uint64_t key = 0;
    for (uint32_t i = 0; i < par->n; i++) {
      struct sim_ev *ev = sim_heap_top(&par->sh[i].sim.heap);
      if (ev && ev->at <= t && (!best || ev->key < key)) {
        best = &par->sh[i];
        key = ev->key;
      }
    }
    if (!best)
      break;
    sim_time_t tt;
    struct sim_ev *ev = sim_heap_pop(&best->sim.heap, t, &tt);
    best->sim.now = tt;
    sim_dispatch(&best->sim, ev);
    best->nev++;
  }
  for (uint32_t i = 0; i < par->n; i++) {
    par->sh[i].peek = sim_heap_peek(&par->sh[i].sim.heap);
    par->sh[i].out_min = SIM_NEVER;
  }
}

/* ---- distributed runs (sim_net) ----
 *
 * One partition per rank; every rank has the whole simulator, runs its
 * partition's events and every global event (net_serial). Messages cross
 * as bytes: a packet as its port's place among every port and the
 * packet's fields, an event as its key (which names it: kind and index)
 * and time. After each window, and each global event, every rank sends
 * every other what it has for it, and the global events sent to the main
 * heap go to every rank. */

static const struct sim_net *g_net;

void sim_net_use(const struct sim_net *net) {
  g_net = net;
}

const struct sim_net *sim_net_default(void) {
  return g_net && g_net->size > 1 ? g_net : 0;
}

uint32_t sim_net_rank(const struct sim *s) {
  return s->net ? s->net->rank : 0;
}

void sim_net_reduce(const struct sim *s, void *v, size_t n,
                    enum sim_net_op op) {
  if (s->net && n)
    s->net->reduce(s->net->ctx, v, n, op);
}

static void nb_put(struct nbuf *b, const void *p, size_t len) {
  if (b->n + len > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + len)
      cap *= 2;
    unsigned char *a = realloc(b->a, cap);
    if (!a) {
      fprintf(stderr, "uroce sim: out of memory for messages\n");
      abort();
    }
    b->a = a;
    b->cap = cap;
  }
  memcpy(b->a + b->n, p, len);
  b->n += len;
}

enum { NM_PKT, NM_EV, NM_GLOBAL, NM_FCFIX, NM_COLL };
/* An FC packet's credits: struct sim_port's freed[], in its hdr. */
#define FC_CREDITS sizeof(((struct sim_port *)0)->freed)
#define PKT_OFF offsetof(struct sim_pkt, ts) /* what crosses: from ts on */
#define PKT_LEN (sizeof(struct sim_pkt) - PKT_OFF)

static struct sim_port *port_at(struct sim *s, uint64_t g) {
  if (g < s->nports)
    return &s->ports[g];
  return g - s->nports < s->nnics ? &s->nics[g - s->nports].port : 0;
}

/* The event a key names (sim_key): a kind and an index among its kind. */
static struct sim_ev *ev_at(struct sim *s, uint64_t key) {
  unsigned kind = (unsigned)(key >> SIM_KEY_KIND_SHIFT) & 31;
  uint64_t i = key & SIM_KEY_IDX_MAX;
  struct sim_port *p = port_at(s, i);
  switch (kind) {
  case SIM_EV_PORT_TX:
    return p ? &p->tx_ev : 0;
  case SIM_EV_PORT_RX:
    return p ? &p->rx_ev : 0;
  case SIM_EV_PORT_FC:
    return p ? &p->fc_ev : 0;
  case SIM_EV_PORT_FC_TICK:
    return p ? &p->fc_tick : 0;
  case SIM_EV_PORT_FC_RX:
    return p ? &p->fc_rx_ev : 0;
  case SIM_EV_NIC:
    return i < s->nnics ? &s->nics[i].ev : 0;
  case SIM_EV_NIC_CC:
    return i < s->nnics ? &s->nics[i].cc_ev : 0;
  case SIM_EV_RETRY:
    return i < s->nnics ? &s->nics[i].retry_ev : 0;
  case SIM_EV_FLOW_START:
    return i < s->nflows ? &sim_flow_int(s, (uint32_t)i)->start_ev : 0;
  case SIM_EV_FLOW_END:
    return i < s->nflows ? &sim_flow_int(s, (uint32_t)i)->end_ev : 0;
  case SIM_EV_SAMPLE:
    return &s->sample_ev;
  case SIM_EV_SMA:
    return i < s->nswitches ? &s->sws[i].n.sma_ev
           : i - s->nswitches < s->nnics ? &s->nics[i - s->nswitches].n.sma_ev
                                         : 0;
  case SIM_EV_SM:
    return s->sm ? sim_sm_ev(s) : 0;
  case SIM_EV_COLL:
  case SIM_EV_COLL_CONNECT:
  case SIM_EV_COLL_START:
    return sim_coll_ev(s, kind, i);
  }
  return 0;
}

void sim_par_coll_msg(struct sim *s, uint16_t part, const void *b,
                      size_t len) {
  struct sim_par *par = s->par;
  if (!par || !par->nb || part >= par->n) {
    fprintf(stderr, "uroce sim: a collective's message with no run\n");
    abort();
  }
  uint8_t tag = NM_COLL;
  uint64_t l = len;
  nb_put(&par->nb[part], &tag, 1);
  nb_put(&par->nb[part], &l, 8);
  nb_put(&par->nb[part], b, len);
}

static void nb_ev(struct nbuf *b, uint8_t tag, const struct sim_ev *ev,
                  sim_time_t t) {
  nb_put(b, &tag, 1);
  nb_put(b, &ev->key, 8);
  nb_put(b, &t, 8);
}

static void net_bad(uint32_t from, const char *what) {
  fprintf(stderr, "uroce sim: rank %u sent %s: the ranks do not run the same "
                  "scenario and build\n", from, what);
  abort();
}

/* Takes what rank `from` sent this one (b: its bytes). */
static void net_take(struct sim_par *par, uint32_t from, const unsigned char *b,
                     size_t len) {
  struct sim *m = par->main, *s = &par->sh[m->net->rank].sim;
  size_t o = 0;
  while (o < len) {
    uint8_t tag = b[o++];
    uint64_t a, t;
    if (o + 8 > len || (tag != NM_COLL && o + 16 > len))
      net_bad(from, "a message cut short");
    memcpy(&a, b + o, 8);
    if (tag == NM_COLL) { /* a: its length */
      if (a > len - o - 8)
        net_bad(from, "a collective's message cut short");
      sim_coll_net_take(m, b + o + 8, a);
      o += 8 + a;
      continue;
    }
    if (tag == NM_FCFIX) { /* the final credits of an FC packet sent open */
      struct sim_port *p = port_at(m, a);
      if (!p || o + 16 + FC_CREDITS > len)
        net_bad(from, "credits for no port");
      memcpy(&t, b + o + 8, 8);
      struct sim_pkt *f = p->fc_q.head;
      while (f && f->ts != t)
        f = f->next;
      if (!f)
        net_bad(from, "credits for an FC packet that arrived already");
      memcpy(f->hdr, b + o + 16, FC_CREDITS);
      o += 16 + FC_CREDITS;
      continue;
    }
    if (tag == NM_PKT) {
      struct sim_port *p = port_at(m, a);
      if (!p || o + 8 + PKT_LEN > len)
        net_bad(from, "a packet for no port");
      struct sim_pkt *pkt = sim_pkt_alloc(s);
      if (!pkt) {
        fprintf(stderr, "uroce sim: out of memory for packets\n");
        abort(); /* the other ranks would wait for this one */
      }
      memcpy((char *)pkt + PKT_OFF, b + o + 8, PKT_LEN);
      o += 8 + PKT_LEN;
      if (pkt->kind == SIM_PKT_FC)
        sim_fc_fifo_put(s, p, pkt);
      else
        sim_fly_put(s, p, pkt);
      continue;
    }
    memcpy(&t, b + o + 8, 8);
    o += 16;
    struct sim_ev *ev = ev_at(m, a);
    if (!ev || tag > NM_GLOBAL || (tag == NM_GLOBAL) != !!(a & SIM_KEY_GLOBAL))
      net_bad(from, "an event that does not exist");
    sim_schedule(tag == NM_GLOBAL ? m : s, ev, t);
  }
}

/* Every rank gets what the others sent it since the last exchange; the
 * global events, in rank order, everywhere. Runs with par->serial, every
 * event due by `done` run. An FC packet still open (net.c, ib_free: it
 * starts after done, and credits freed until then join it) crosses now,
 * to be queued at the peer when one process would have it there; its
 * final credits (NM_FCFIX) cross at the first exchange after it started,
 * before it can arrive (a link delay, a lookahead, later). */
static void net_xchg(struct sim_par *par, sim_time_t done) {
  struct sim *m = par->main;
  const struct sim_net *net = m->net;
  uint32_t me = net->rank, n = par->n;
  struct shard *d = &par->sh[me];
  struct nbuf *nb = par->nb, *g = &par->gb;
  g->n = 0;
  for (int w = 0; w < 2; w++) {
    struct msgq *q = &d->out[w][n];
    for (uint32_t k = 0; k < q->n; k++)
      nb_ev(g, NM_GLOBAL, q->a[k].obj, q->a[k].t);
    q->n = 0;
    for (uint32_t j = 0; j < n; j++) {
      q = &d->out[w][j];
      for (uint32_t k = 0; k < q->n; k++) {
        struct sim_msg *mm = &q->a[k];
        if (!mm->port) {
          nb_ev(&nb[j], NM_EV, mm->obj, mm->t);
          continue;
        }
        uint8_t tag = NM_PKT;
        uint64_t gi = mm->port->rx_ev.key & SIM_KEY_IDX_MAX;
        nb_put(&nb[j], &tag, 1);
        nb_put(&nb[j], &gi, 8);
        nb_put(&nb[j], (char *)mm->obj + PKT_OFF, PKT_LEN);
        if (mm->port->fc_open == mm->obj && mm->port->fc_open_at > done) {
          /* credits may still join it: their sum follows (NM_FCFIX) */
          msg_put(&par->open, mm->port, mm->obj, j);
          continue;
        }
        sim_pkt_free(&d->sim, mm->obj);
      }
      q->n = 0;
    }
  }
  /* FC packets sent open that have left: their credits */
  uint32_t keep = 0;
  for (uint32_t k = 0; k < par->open.n; k++) {
    struct sim_msg *mm = &par->open.a[k];
    struct sim_port *p = mm->port;
    struct sim_pkt *f = mm->obj;
    if (p->fc_open == f && p->fc_open_at > done) {
      par->open.a[keep++] = *mm;
      continue;
    }
    if (p->down) { /* lost with its link, at the peer's rank too */
      sim_pkt_free(&d->sim, f);
      continue;
    }
    if (p->fc_open == f) { /* it left (ib_free would find so) */
      p->fc_open = 0;
      p->fc_open_vls = 0;
    }
    uint8_t tag = NM_FCFIX;
    uint64_t gi = p->rx_ev.key & SIM_KEY_IDX_MAX;
    struct nbuf *b = &nb[mm->t];
    nb_put(b, &tag, 1);
    nb_put(b, &gi, 8);
    nb_put(b, &f->ts, 8);
    nb_put(b, f->hdr, FC_CREDITS);
    sim_pkt_free(&d->sim, f);
  }
  par->open.n = keep;
  for (uint32_t j = 0; j < n; j++) {
    if (j != me && g->n)
      nb_put(&nb[j], g->a, g->n);
    par->bufs[j] = nb[j].a;
    par->lens[j] = j == me ? 0 : nb[j].n;
  }
  if (net->xchg(net->ctx, par->bufs, par->lens, par->in, par->inlen)) {
    fprintf(stderr, "uroce sim: rank %u: exchanging messages failed\n", me);
    abort();
  }
  for (uint32_t j = 0; j < n; j++)
    nb[j].n = 0; /* (the collectives write here until the next) */
  for (uint32_t i = 0; i < n; i++) {
    if (i == me)
      net_take(par, i, g->a, g->n);
    else
      net_take(par, i, par->in[i], par->inlen[i]);
    free(par->in[i]);
    par->in[i] = 0;
  }
  d->out_min = SIM_NEVER;
}

/* The windows and global events of a distributed run (run() of one rank):
 * the ranks agree on the earliest event and the flows ended before each
 * step. */
static void run_net(struct sim_par *par, sim_time_t lim) {
  struct sim *m = par->main;
  uint32_t me = m->net->rank, n = par->n;
  struct shard *d = &par->sh[me];
  uint64_t *v = par->nv;
  bool dirty = false, ran = false;
  sim_time_t last = 0;
  for (;;) {
    memset(v, 0, (n + 1) * sizeof(*v));
    v[0] = ~sim_heap_peek(&d->sim.heap);
    v[1 + me] = m->st.flows_done + m->st.flows_failed;
    sim_net_reduce(m, v, n + 1, SIM_NET_MAX);
    sim_time_t tn = ~v[0];
    uint64_t ended = 0;
    for (uint32_t i = 0; i < n; i++)
      ended += v[1 + i];
    /* a collective's end is every rank's (sim_coll_fold agrees on it) */
    bool done = m->coll ? sim_coll_done(m) : m->nflows && ended == m->nflows;
    if (ran && !m->done_end && done)
      m->done_end = sim_cell_end(m, last);
    sim_time_t tg = sim_heap_peek(&m->heap), stop = lim;
    if (m->done_end && m->done_end - 1 < stop)
      stop = m->done_end - 1;
    if ((tn < tg ? tn : tg) > stop)
      break;
    sim_time_t wend;
    if (tg < tn) {
      serial(par, tg);
      dirty = true;
      wend = tg;
    } else {
      wend = tg == tn ? tg : sim_cell_end(m, tn) - 1;
      if (tg < wend)
        wend = tg;
      if (stop < wend)
        wend = stop;
      if (dirty)
        sync_shell(par, d);
      dirty = false;
      par->wend = wend;
      par->serial = false;
      window(d);
      par->serial = true;
    }
    net_xchg(par, wend);
    fold(par);
    last = wend;
    ran = true;
    if (m->cfg.progress && me == 0)
      sim_progress(m, false, m->st.events);
  }
  if (dirty)
    sync_shell(par, d);
  sim_net_reduce(m, &m->now, 1, SIM_NET_MAX);
}

/* Starts the workers; on failure stops those started. 0 or an errno. */
static int start(struct sim_par *par) {
  int rc = 0;
  for (uint32_t i = 1; i < par->n && !rc; i++) {
    rc = pthread_create(&par->sh[i].th, 0, worker, &par->sh[i]);
    par->sh[i].started = !rc;
  }
  pthread_mutex_lock(&par->mu);
  par->gate = rc ? -1 : 1;
  pthread_cond_broadcast(&par->cv);
  pthread_mutex_unlock(&par->mu);
  if (rc)
    for (uint32_t i = 1; i < par->n; i++)
      if (par->sh[i].started)
        pthread_join(par->sh[i].th, 0);
  return rc;
}

/* The windows and the global events between them, until the workload is
 * done (to the end of that cell), nothing is left, or lim. */
static void run(struct sim_par *par, sim_time_t lim) {
  struct sim *m = par->main;
  uint32_t n = par->n;
  bool dirty = false;
  for (;;) {
    sim_time_t tn = SIM_NEVER;
    for (uint32_t i = 0; i < n; i++) {
      if (par->sh[i].peek < tn)
        tn = par->sh[i].peek;
      if (par->sh[i].out_min < tn)
        tn = par->sh[i].out_min;
    }
    sim_time_t tg = sim_heap_peek(&m->heap), stop = lim;
    if (m->done_end && m->done_end - 1 < stop)
      stop = m->done_end - 1;
    if ((tn < tg ? tn : tg) > stop)
      break;
    if (tg <= tn) {   /* every event before it has run */
      if (tg == tn) { /* the partitions' events at tg first */
        for (uint32_t i = 0; dirty && i < n; i++)
          sync_shell(par, &par->sh[i]);
        dirty = false;
        sweep(par, tg);
      } else {
        serial(par, tg);
        dirty = true;
      }
      fold(par);
      if (!m->done_end && sim_run_done(m))
        m->done_end = sim_cell_end(m, tg);
      continue;
    }
    sim_time_t wend = sim_cell_end(m, tn) - 1;
    if (tg < wend)
      wend = tg;
    if (stop < wend)
      wend = stop;
    if (dirty)
      for (uint32_t i = 0; i < n; i++)
        sync_shell(par, &par->sh[i]);
    dirty = false;
    par->wend = wend;
    par->wr ^= 1;
    par->serial = false;
    pthread_barrier_wait(&par->go);
    window(&par->sh[0]);
    pthread_barrier_wait(&par->done);
    par->serial = true;
    for (uint32_t i = 0; i < n; i++)
      take(m, &par->sh[i].out[par->wr][n]);
    fold(par);
    if (!m->done_end && sim_run_done(m))
      m->done_end = sim_cell_end(m, wend);
    if (m->cfg.progress)
      sim_progress(m, false, m->st.events);
  }
}

int64_t sim_par_run(struct sim *m, sim_time_t lim, char *err, size_t errlen) {
  uint32_t n = sim_threads(m, 0);
  struct sim_par *par = par_new(m, n);
  if (!par) {
    snprintf(err, errlen, "out of memory for %u partitions", n);
    return -1;
  }
  if (m->net) { /* one partition here, the others at the other ranks */
    par->nb = calloc(n, sizeof(*par->nb));
    par->nv = calloc(n + 1, sizeof(*par->nv));
    par->bufs = calloc(n, sizeof(*par->bufs));
    par->in = calloc(n, sizeof(*par->in));
    par->lens = calloc(n, sizeof(*par->lens));
    par->inlen = calloc(n, sizeof(*par->inlen));
    if (!par->nb || !par->nv || !par->bufs || !par->in || !par->lens ||
        !par->inlen) {
      fprintf(stderr, "uroce sim: out of memory for %u partitions\n", n);
      abort(); /* the other ranks would wait for this one */
    }
    move_events(m, par);
    m->par = par;
    rebind(m, par);
    run_net(par, lim);
    fold(par);
    rebind(m, 0);
    m->par = 0;
    for (uint32_t j = 0; j < n; j++)
      free(par->nb[j].a);
    free(par->nb);
    free(par->gb.a);
    free(par->bufs);
    free(par->in);
    free(par->lens);
    free(par->inlen);
    free(par->nv);
    for (uint32_t k = 0; k < par->open.n; k++) /* the run stopped early */
      sim_pkt_free(&par->sh[m->net->rank].sim, par->open.a[k].obj);
    free(par->open.a);
    par_free(par);
    return 0;
  }
  int rc = pthread_barrier_init(&par->go, 0, n);
  if (!rc) {
    rc = pthread_barrier_init(&par->done, 0, n);
    if (rc)
      pthread_barrier_destroy(&par->go);
  }
  if (rc) {
    snprintf(err, errlen, "cannot make barriers: %s", strerror(rc));
    par_free(par);
    return -1;
  }
  rc = start(par);
  if (rc) {
    snprintf(err, errlen, "cannot start a thread: %s", strerror(rc));
    pthread_barrier_destroy(&par->go);
    pthread_barrier_destroy(&par->done);
    par_free(par);
    return -1;
  }
  move_events(m, par);
  for (uint32_t i = 0; i < n; i++)
    par->sh[i].peek = sim_heap_peek(&par->sh[i].sim.heap);
  m->par = par;
  rebind(m, par);
  run(par, lim);
  par->quit = true;
  pthread_barrier_wait(&par->go);
  for (uint32_t i = 1; i < n; i++)
    pthread_join(par->sh[i].th, 0);
  for (uint32_t j = 0; j < n; j++)
    take_all(par, j, par->wr);
  fold(par);
  rebind(m, 0);
  m->par = 0;
  pthread_barrier_destroy(&par->go);
  pthread_barrier_destroy(&par->done);
  par_free(par);
  return 0;
}
