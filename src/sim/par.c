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
  if (par->serial)
    return ev->key & SIM_KEY_GLOBAL ? &par->main->heap
                                    : &par->sh[ev->part].sim.heap;
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
  if (par->serial || p->rx_ev.part == s->part)
    return false;
  struct shard *d = shard_of(s);
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
  qsort(v, n, sizeof(*v), cmp_pause);
  for (uint32_t i = 0; i < n; i++)
    sim_pause_append(m, &v[i]);
  free(v);
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
