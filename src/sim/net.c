/* Links, switch ports and the NIC wire: queues, ECN, PFC, drops, routing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"

sim_time_t sim_ser_time(uint64_t bytes, uint64_t rate_bps) {
  return bytes * 8000000000000ull / rate_bps;
}

/* InfiniBand: the VLs whose head packet the peer has credit for. */
static inline uint8_t ib_ready(const struct sim_port *p) {
  uint8_t r = 0;
  for (uint8_t m = p->nonempty; m; m &= (uint8_t)(m - 1)) {
    unsigned v = (unsigned)__builtin_ctz(m);
    if (sim_ib_blocks(p->q[v].head->size) <= p->credits[v])
      r |= (uint8_t)(1u << v);
  }
  return r;
}

static void fc_apply_due(struct sim *s, struct sim_port *p, sim_time_t now);

/* InfiniBand: the VLs whose head packet the peer has credit for, the
 * credits that reached p by now counted (they are taken only when those
 * taken so far fall short: see fc_apply). */
static inline uint8_t ib_ready_now(struct sim *s, struct sim_port *p) {
  uint8_t r = ib_ready(p);
  if (r != p->nonempty && p->cr_due <= s->now) {
    fc_apply_due(s, p, s->now);
    r = ib_ready(p);
  }
  return r;
}

static inline uint8_t port_ready(struct sim *s, struct sim_port *p) {
  return s->ib ? ib_ready_now(s, p) : (uint8_t)(p->nonempty & ~p->paused);
}

static inline bool port_sendable(struct sim *s, struct sim_port *p) {
  return p->ctl_head || p->vl15.head || p->trimq.head || port_ready(s, p);
}

static void fc_active(struct sim *s, struct sim_port *p);

/* Starts serialising pkt now, or once the frames already on the wire
 * left (InfiniBand: FC packets, which go before the data chosen behind
 * them); it arrives at the peer after its last bit went out plus the
 * propagation delay. */
static void put_on_wire(struct sim *s, struct sim_port *p,
                        struct sim_pkt *pkt) {
  if (p->down) { /* a control frame for a dead link */
    if (pkt->kind == SIM_PKT_SMP) {
      sim_mad_lost(s, pkt);
      return;
    }
    if (pkt->kind < SIM_PKT_PAUSE)
      sim_fail_lost(s, pkt);
    sim_pkt_free(s, pkt);
    return;
  }
  sim_time_t start = p->busy_until > s->now ? p->busy_until : s->now;
  p->busy_until = start + sim_ser_time(pkt->size, p->rate_bps);
  p->tx_bytes += pkt->size;
  bool fc = pkt->kind == SIM_PKT_FC;
  if (!fc)
    p->tx_free = p->busy_until;
  /* Control frames are never lost: IB's FC packets carry cumulative
   * limits, so a lost one is repaired by the next. */
  if (p->loss > 0 && pkt->kind < SIM_PKT_PAUSE &&
      splitmix64_01(&p->rng) < p->loss) {
    s->st.drops_wire++;
    sim_pkt_free(s, pkt);
  } else {
    pkt->ts = p->busy_until + p->delay;
    if (s->par && sim_par_cross(s, p, pkt))
      ; /* its peer is another partition's: a message */
    else if (fc)
      sim_fc_fifo_put(s, p, pkt);
    else
      sim_fly_put(s, p, pkt);
  }
  if (s->ib && !fc)
    fc_active(s, p);
}

void sim_fly_put(struct sim *s, struct sim_port *p, struct sim_pkt *pkt) {
  pkt->next = 0;
  if (p->fly_tail) {
    p->fly_tail->next = pkt;
  } else {
    p->fly_head = pkt;
    sim_schedule(s, &p->rx_ev, pkt->ts);
  }
  p->fly_tail = pkt;
}

static void port_kick(struct sim *s, struct sim_port *p);

/* Queues a PFC frame (pause or resume prio) toward the peer of in. */
static void send_pfc(struct sim *s, struct sim_port *in, uint8_t prio,
                     bool xoff) {
  struct sim_pkt *f = sim_pkt_alloc(s);
  if (!f)
    return;
  *f = (struct sim_pkt){.size = SIM_PAUSE_WIRE,
                        .kind = SIM_PKT_PAUSE,
                        .prio = prio,
                        .flags = xoff ? SIM_PF_XOFF : 0};
  if (xoff) {
    in->xoff_sent |= (uint8_t)(1u << prio);
    s->st.pause_frames[in->node->tier]++;
  } else {
    in->xoff_sent &= (uint8_t) ~(1u << prio);
  }
  if (in->ctl_tail)
    in->ctl_tail->next = f;
  else
    in->ctl_head = f;
  in->ctl_tail = f;
  port_kick(s, in);
}

static void node_kick(struct sim *s, struct sim_port *p) {
  if (p->node->kind == SIM_NODE_SWITCH)
    port_kick(s, p);
  else
    sim_nic_kick(s, container_of(p, struct sim_nic, port));
}

/* InfiniBand flow control (IBA 7.9.4). Blocks freed in the input buffer
 * of port p go back to the peer in flow-control packets, one per VL, that
 * p sends on its own egress, before data: they are due fc_latency after
 * the first block freed since the last FC packet, and go then or, if a
 * frame is on the wire, right after it, carrying every block freed until
 * they start. Besides, the periodic timer (fc_tick) sends one for every
 * data VL that had none in the last fc_period, while the port has
 * traffic. An FC packet takes its wire time (SIM_IB_FC_WIRE per VL) on
 * the link like any frame and arrives after it and the propagation.
 *
 * Arrivals cost no event of their own: the packets are records in the
 * peer's ring (crq, by arrival time) whose credits count from their
 * arrival on, taken whenever the peer decides what to send (fc_apply);
 * only a port that waits for credit with nothing else to do is woken at
 * the next arrival (fc_rx_ev). Records, not packets: reading a packet
 * from the pool back cost a cache miss each (issue 27's benchmark), where
 * records in order share lines. Toward a peer in another partition the
 * VLs due together travel as one packet (a message), which the ring's
 * record stands for. */

static inline struct sim_fcrec *fcq_at(struct sim_fcq *q, uint32_t seq) {
  return &q->a[seq & (q->cap - 1)];
}

/* Room for k more records in q; -1 without memory. */
static int fcq_room(struct sim_fcq *q, uint32_t k) {
  if (q->n + k <= q->cap)
    return 0;
  uint32_t cap = q->cap ? q->cap : 8;
  while (cap < q->n + k)
    cap *= 2;
  struct sim_fcrec *a = malloc(sizeof(*a) * cap);
  if (!a)
    return -1;
  for (uint32_t i = 0; i < q->n; i++) {
    uint32_t seq = q->head + i;
    a[seq & (cap - 1)] = *fcq_at(q, seq);
  }
  free(q->a);
  q->a = a;
  q->cap = cap;
  return 0;
}

static inline void fcq_put(struct sim_fcq *q, sim_time_t ts, uint32_t blocks,
                           uint8_t vl) {
  *fcq_at(q, q->head + q->n++) = (struct sim_fcrec){ts, blocks, vl};
}

static void fc_send_at(struct sim *s, struct sim_port *p, sim_time_t t);

/* Whether p's FC packets cross to another partition's thread: they
 * travel as packets then, which the peer frees, and none is deferred. */
static inline bool fc_cut(const struct sim *s, const struct sim_port *p) {
  return s->par && p->rx_ev.part != p->tx_ev.part;
}

/* Whether p's deferred FC packet has left by now: its event (fc_ev)
 * would have run before the one running now. */
static inline bool fc_lazy_gone(const struct sim *s, const struct sim_port *p) {
  return p->fc_lazy && (p->fc_at < s->now || (p->fc_at == s->now &&
                                               s->cur_key > p->fc_ev.key));
}

/* Whether the peer x of a port has a deferred FC packet toward it; x's
 * fields are not read when x runs in another partition. */
static inline bool fc_peer_lazy(const struct sim *s, const struct sim_port *x) {
  return !fc_cut(s, x) && x->fc_lazy;
}

/* When p (whose peer x has a deferred FC packet toward it) must look at
 * it: the earliest it can arrive (its due time plus the propagation), or
 * its due time while p waits for credit, when the packet would have
 * taken p's credits that had arrived and ended the wait (credit_wait)
 * as it left. */
static inline sim_time_t fc_lazy_due(const struct sim_port *x,
                                     const struct sim_port *p) {
  return p->starved_since != SIM_NEVER ? x->fc_at : x->fc_at + x->delay;
}

/* p's cr_due: its ring's first arrival, or the time it must look at its
 * peer's deferred FC packet (lazy) if that is sooner. */
static inline void cr_due_set(struct sim_port *p, const struct sim_port *x,
                              bool lazy) {
  const struct sim_fcq *q = &p->crq;
  p->cr_due = q->n ? q->a[q->head & (q->cap - 1)].ts : SIM_NEVER;
  if (lazy && fc_lazy_due(x, p) < p->cr_due)
    p->cr_due = fc_lazy_due(x, p);
}

/* p's deferred FC packet leaves as of when it was due; ran: its event
 * would have run by now (not been cancelled), and counts as one. */
static inline void fc_lazy_send(struct sim *s, struct sim_port *p, bool ran) {
  s->st.events += ran;
  fc_send_at(s, p, p->fc_at);
}

/* p's deferred FC packet, if it has left by now. */
static inline void fc_commit(struct sim *s, struct sim_port *p) {
  if (fc_lazy_gone(s, p))
    fc_lazy_send(s, p, true);
}

/* The credits of the FC packets that reached p by now: cr_due is due,
 * the first record's arrival or the earliest a deferred one can. */
static void fc_apply_due(struct sim *s, struct sim_port *p, sim_time_t now) {
  struct sim_fcq *q = &p->crq;
  struct sim_port *x = p->peer;
  bool lazy = fc_peer_lazy(s, x);
  if (lazy && now == s->now && fc_lazy_gone(s, x)) {
    fc_lazy_send(s, x, true);
    lazy = false;
  }
  const struct sim_fcrec *r = fcq_at(q, q->head);
  if (!q->n || r->ts > now) {
    cr_due_set(p, x, lazy);
    return;
  }
  do {
    if (r->vl != SIM_FCREC_PKT) {
      p->credits[r->vl] += r->blocks;
    } else { /* the packet first on the peer's FIFO */
      struct sim_pkt *f = sim_pktq_take(&x->fc_q);
      uint32_t cr[SIM_NPRIO];
      memcpy(cr, f->hdr, sizeof(cr));
      for (uint8_t v = 0; v < SIM_NPRIO; v++)
        p->credits[v] += cr[v];
      sim_pkt_free(s, f);
    }
    q->head++;
    r = fcq_at(q, q->head);
  } while (--q->n && r->ts <= now);
  cr_due_set(p, x, lazy);
  if (p->starved_since != SIM_NEVER && ib_ready(p)) {
    if (now > p->starved_since)
      s->st.credit_wait[p->node->tier] += now - p->starved_since;
    p->starved_since = SIM_NEVER;
  }
}

/* The credits that reached p by now (by t: a deferred packet's time).
 *
 * They are taken only where it can matter: when those taken so far fall
 * short of what p is about to decide on (ib_ready_now, nic_blocked_now),
 * while p is starved (the wait ends, for credit_wait, when they would
 * have been taken: at every look, and as each FC packet leaves), and
 * before the ring would grow. Taking them later than they arrived
 * changes no decision (credits only grow between looks), and saves
 * reading each record back when credit is plenty. */
static inline void fc_apply_at(struct sim *s, struct sim_port *p,
                               sim_time_t t) {
  if (p->cr_due <= t)
    fc_apply_due(s, p, t);
}
static inline void fc_apply(struct sim *s, struct sim_port *p) {
  fc_apply_at(s, p, s->now);
}
/* At a look of p's (choosing what to send). */
static inline void fc_look(struct sim *s, struct sim_port *p) {
  if (p->starved_since != SIM_NEVER)
    fc_apply(s, p);
}
/* Before k more records go into p's ring (at t). */
static inline void fc_before_put(struct sim *s, struct sim_port *p,
                                 sim_time_t t, uint32_t k) {
  if (p->starved_since != SIM_NEVER || p->crq.n + k > p->crq.cap)
    fc_apply_at(s, p, t);
}

/* p has packets it may not send for want of credit, and nothing else:
 * it wakes when the next FC packet arrives. */
static void fc_wait(struct sim *s, struct sim_port *p) {
  struct sim_port *x = p->peer;
  p->cr_wait = true;
  if (fc_peer_lazy(s, x)) { /* its deferred packet: now, or its event */
    if (fc_lazy_gone(s, x)) {
      fc_lazy_send(s, x, true);
    } else {
      x->fc_lazy = false;
      sim_schedule(s, &x->fc_ev, x->fc_at);
    }
  }
  /* (cr_due may be early: a deferred packet's due time) */
  if (p->crq.n && x->fc_rx_ev.at == SIM_NEVER)
    sim_schedule(s, &x->fc_rx_ev, fcq_at(&p->crq, p->crq.head)->ts);
}

/* x's FC packets arriving at ts went into p's ring (p = x's peer). */
static void fc_arrives(struct sim *s, struct sim_port *x, struct sim_port *p,
                       sim_time_t ts) {
  if (ts < p->cr_due)
    p->cr_due = ts;
  if (p->cr_wait && x->fc_rx_ev.at == SIM_NEVER)
    sim_schedule(s, &x->fc_rx_ev, fcq_at(&p->crq, p->crq.head)->ts);
}

/* An FC packet x sent to a peer in another partition, or while the
 * partitions stood still, arrived there as a message (par.c), or on a
 * link the partitions do not cut but the packet path was taken. */
void sim_fc_fifo_put(struct sim *s, struct sim_port *x, struct sim_pkt *f) {
  struct sim_port *p = x->peer;
  fc_before_put(s, p, s->now, 1);
  if (fcq_room(&p->crq, 1) < 0) {
    fprintf(stderr, "uroce sim: out of memory for flow-control packets\n");
    abort();
  }
  fcq_put(&p->crq, f->ts, 0, SIM_FCREC_PKT);
  sim_pktq_put(&x->fc_q, f);
  fc_arrives(s, x, p, f->ts);
}

/* fc_rx_ev of x, where its peer is: credits the peer waited for came. */
void sim_port_fc_rx_event(struct sim *s, struct sim_port *x) {
  struct sim_port *p = x->peer;
  p->cr_wait = false;
  fc_apply(s, p);
  node_kick(s, p);
}

/* The due FC packets of p leave at t, now or, for a deferred one (see
 * fc_want), when it was due (after any frame on the wire then). */
static void fc_send_at(struct sim *s, struct sim_port *p, sim_time_t t) {
  if (p->fc_ev.at != SIM_NEVER)
    sim_ev_cancel(&p->fc_ev);
  p->fc_at = SIM_NEVER;
  p->fc_lazy = false;
  struct sim_pkt *f = 0;
  struct sim_port *x = p->peer;
  uint8_t news = p->fc_news, vls = news | p->fc_vls;
  uint32_t k = (uint32_t)__builtin_popcount(vls);
  bool cut = fc_cut(s, p);
  if (!cut)
    fc_before_put(s, x, t, k);
  if (cut ? !(f = sim_pkt_alloc(s)) : fcq_room(&x->crq, k) < 0) {
    /* no memory: the credits go with the next FC */
    p->fc_at = s->now + s->cfg.ib.fc_latency;
    sim_schedule(s, &p->fc_ev, p->fc_at);
    return;
  }
  uint32_t n = 0, periodic = 0;
  for (uint8_t m = news; m; m &= (uint8_t)(m - 1)) {
    n++;
    p->fc_last[__builtin_ctz(m)] = t;
  }
  for (uint8_t m = vls & (uint8_t)~news; m; m &= (uint8_t)(m - 1))
    periodic++;
  n += periodic;
  s->st.fc_pkts += n;
  s->st.fc_periodic += periodic;
  p->fc_vls = 0;
  p->fc_news = 0;
  if (!n) {
    if (f)
      sim_pkt_free(s, f);
    return;
  }
  uint32_t size = n * SIM_IB_FC_WIRE;
  if (f) {
    f->size = size;
    f->kind = SIM_PKT_FC;
    _Static_assert(sizeof(p->freed) <= sizeof(f->hdr), "credits fit");
    memcpy(f->hdr, p->freed, sizeof(p->freed));
    memset(p->freed, 0, sizeof(p->freed));
    if (p->busy_until > s->now) { /* it starts later: more may join */
      p->fc_open = f;
      p->fc_open_at = p->busy_until;
      p->fc_open_vls = vls;
    }
    put_on_wire(s, p, f);
    return;
  }
  /* put_on_wire's work for a control frame, into the peer's ring */
  if (p->down) {
    memset(p->freed, 0, sizeof(p->freed));
    return;
  }
  sim_time_t start = p->busy_until > t ? p->busy_until : t;
  if (start > t) { /* it starts later: more may join */
    p->fc_open = 0;
    p->fc_open_seq = x->crq.head + x->crq.n;
    p->fc_open_at = start;
    p->fc_open_vls = vls;
  }
  p->busy_until = start + sim_ser_time(size, p->rate_bps);
  p->tx_bytes += size;
  sim_time_t ts = p->busy_until + p->delay;
  for (uint8_t m = vls; m; m &= (uint8_t)(m - 1)) {
    unsigned v = (unsigned)__builtin_ctz(m);
    fcq_put(&x->crq, ts, p->freed[v], (uint8_t)v);
    p->freed[v] = 0;
  }
  fc_arrives(s, p, x, ts);
}

static inline void fc_send(struct sim *s, struct sim_port *p) {
  fc_send_at(s, p, s->now);
}

/* An FC packet of p is due at t (with any due sooner). If a frame will
 * still be on the wire then, it is queued behind it now (and blocks of
 * its VLs freed until it starts join it, in ib_free); else it goes when
 * due, or then behind the frame on the wire.
 *
 * That costs no event (fc_ev) unless the peer waits for credit or is
 * another partition's: the packet is deferred (fc_lazy), and sent, as of
 * its due time, by the first thing after that which could tell: p
 * choosing a frame to send (it goes first, as it would have), blocks
 * freed or the periodic timer at p after it was due (the packet takes
 * what was freed until then, nothing after), the peer deciding what to
 * send once it may have arrived (the peer's cr_due counts the due time
 * plus the propagation, or the due time itself while the peer is
 * starved: the packet took the peer's arrived credits as it left), the
 * peer starting to wait for credit (the event is scheduled then, at the
 * same time and key), and samples, failures and the end of a run
 * (sim_fc_commit_due). "Then" follows the event order: at the due time
 * itself, only what an event with a larger key than fc_ev's does. The
 * results are the event's to the bit, and such a packet counts as the
 * event it stands for in the run's events (the same on every thread
 * count, where links between partitions keep the event); what it saves
 * is the event heap's work, a tenth of an InfiniBand run's time. */
static void fc_want(struct sim *s, struct sim_port *p, sim_time_t t) {
  if (p->down || p->fc_at <= t)
    return;
  p->fc_at = t;
  struct sim_port *x = p->peer;
  if (p->busy_until > t || t <= s->now) {
    fc_send(s, p);
  } else if (!fc_cut(s, p) && !x->cr_wait) {
    p->fc_lazy = true;
    if (fc_lazy_due(p, x) < x->cr_due)
      x->cr_due = fc_lazy_due(p, x);
  } else {
    sim_schedule(s, &p->fc_ev, t);
  }
}

/* p chooses a frame to send and an FC packet is due: it goes first, a
 * deferred one as of when it was due. */
static void fc_due_first(struct sim *s, struct sim_port *p) {
  if (p->fc_lazy)
    fc_lazy_send(s, p, fc_lazy_gone(s, p));
  else
    fc_send(s, p);
}

sim_time_t sim_fc_commit_due(struct sim *s, sim_time_t t, bool *left) {
  sim_time_t last = 0;
  if (left)
    *left = false;
  for (uint32_t i = 0; s->ib && i < s->nports + s->nnics; i++) {
    struct sim_port *p =
        i < s->nports ? &s->ports[i] : &s->nics[i - s->nports].port;
    if (!p->fc_lazy || !sim_mine(s, p->fc_ev.part))
      continue;
    if (p->fc_at > t) {
      if (left)
        *left = true;
      continue;
    }
    if (p->fc_at > last)
      last = p->fc_at;
    fc_lazy_send(s, p, true);
  }
  return last;
}

/* fc_ev: p's FC packets are due and the link free. */
void sim_port_fc_event(struct sim *s, struct sim_port *p) {
  if (p->fc_at <= s->now)
    fc_send(s, p);
}

/* p carried a frame (not an FC packet) either way: its periodic timer
 * runs. */
static void fc_active(struct sim *s, struct sim_port *p) {
  p->act_last = s->now;
  if (p->fc_tick.at == SIM_NEVER && !p->down)
    sim_schedule(s, &p->fc_tick, s->now + p->fc_period);
}

/* fc_tick: every data VL of p whose last FC packet is a period old gets
 * one now; the timer runs again when the next VL's is. It stops once the
 * port had no traffic for a period and holds no blocks (no credit
 * outstanding): the next frame restarts it. */
void sim_port_fc_tick_event(struct sim *s, struct sim_port *p) {
  fc_commit(s, p);
  sim_time_t per = p->fc_period, now = s->now, next = now + per;
  uint32_t held = 0;
  uint8_t nvl = s->cfg.ib.vls, due = 0;
  for (uint8_t v = 0; v < nvl; v++)
    held |= p->in_blocks[v] | p->freed[v];
  if (p->down || (!held && p->act_last + per <= now))
    return;
  for (uint8_t v = 0; v < nvl; v++) {
    if (p->fc_last[v] + per <= now) {
      due |= (uint8_t)(1u << v);
      p->fc_last[v] = now;
    } else if (p->fc_last[v] + per < next) {
      next = p->fc_last[v] + per;
    }
  }
  sim_schedule(s, &p->fc_tick, next);
  if (due) {
    p->fc_vls |= due;
    fc_want(s, p, now);
  }
}

static void ib_free(struct sim *s, struct sim_port *in, unsigned vl,
                    uint32_t blocks) {
  in->in_blocks[vl] -= blocks;
  if (in->down) /* the credits are set afresh when the link comes up */
    return;
  fc_commit(s, in); /* if it left, without these */
  if (in->fc_open_vls) { /* an FC packet queued, not started yet */
    uint8_t vls = in->fc_open_vls;
    if (s->now < in->fc_open_at && (vls >> vl & 1)) {
      if (in->fc_open) {
        uint32_t cr;
        memcpy(&cr, in->fc_open->hdr + vl * sizeof(cr), sizeof(cr));
        cr += blocks;
        memcpy(in->fc_open->hdr + vl * sizeof(cr), &cr, sizeof(cr));
      } else { /* its record of vl: after those of the VLs below */
        uint32_t below = (uint32_t)__builtin_popcount(vls & ((1u << vl) - 1));
        fcq_at(&in->peer->crq, in->fc_open_seq + below)->blocks += blocks;
      }
      return;
    }
    if (s->now >= in->fc_open_at) { /* it left: the peer may take it */
      in->fc_open = 0;
      in->fc_open_vls = 0;
    }
  }
  in->freed[vl] += blocks;
  in->fc_news |= (uint8_t)(1u << vl);
  fc_want(s, in, s->now + s->cfg.ib.fc_latency);
}

/* InfiniBand: a packet of VL vl entered the input buffer of in. */
static void ib_take(struct sim *s, struct sim_port *in, unsigned vl,
                    uint32_t size) {
  in->in_blocks[vl] += sim_ib_blocks(size);
  if (in->in_blocks[vl] > s->cfg.ib.vl_buffer / SIM_IB_BLOCK)
    s->st.credit_overruns++;
  if (in->in_bytes[vl] > s->st.max_vl_in[in->node->tier])
    s->st.max_vl_in[in->node->tier] = in->in_bytes[vl];
}

/* VL arbitration table k (0 high, 1 low): the current entry goes on
 * while its VL is ready and weight is left; else the next entry with a
 * ready VL and weight starts with its full weight. -1 (and the table as
 * it was) if no VL of the table is ready. */
static inline int arb_table(const struct sim *s, int k, uint8_t *idx,
                            int32_t *left, uint8_t ready) {
  const struct sim_vlarb_ent *t = k ? s->cfg.ib.low : s->cfg.ib.high;
  uint32_t n = k ? s->cfg.ib.nlow : s->cfg.ib.nhigh;
  ready &= s->arb_mask[k];
  if (!ready)
    return -1;
  if (*left > 0 && (ready >> t[*idx].vl & 1))
    return t[*idx].vl;
  /* arb_next[k][i][v]: the first entry of VL v after entry i */
  const uint8_t *nx = s->arb_next[k][*idx];
  uint32_t bi = nx[__builtin_ctz(ready)];
  if (ready & (ready - 1)) { /* the nearest of several */
    uint32_t best = n + 1;
    for (uint8_t m = ready; m; m &= (uint8_t)(m - 1)) {
      uint32_t j = nx[__builtin_ctz(m)];
      uint32_t d = j > *idx ? j - *idx : j + n - *idx;
      if (d < best) {
        best = d;
        bi = j;
      }
    }
  }
  *idx = (uint8_t)bi;
  *left = t[bi].weight * SIM_IB_BLOCK;
  return t[bi].vl;
}

/* IBA VL arbitration (7.6.9), at a switch egress and a NIC alike, over
 * the VLs in ready (a packet and credit): the high table first, unless
 * high_limit x 4 KiB of it went out while the low table had packets
 * waiting; then the low table. Sets arb_from; vl_charge() then counts the
 * packet that goes. A NIC whose chosen VL turns out to have nothing asks
 * again without it: the tables move on as they would have had it not
 * been ready. */
static unsigned vl_choose(const struct sim *s, struct sim_port *p,
                          uint8_t ready) {
  const struct sim_ib_cfg *ib = &s->cfg.ib;
  bool low_waits = ready & s->arb_mask[1];
  uint64_t lim = ib->high_limit ? (uint64_t)ib->high_limit << 12 : 1;
  int v = -1;
  if ((ready & s->arb_mask[0]) &&
      !(low_waits && ib->high_limit != SIM_VLARB_UNLIMITED &&
        p->high_run >= lim))
    v = arb_table(s, 0, &p->arb_idx[0], &p->arb_left[0], ready);
  if (v >= 0) {
    p->arb_from = 0;
    return (unsigned)v;
  }
  p->arb_from = 1;
  v = arb_table(s, 1, &p->arb_idx[1], &p->arb_left[1], ready);
  /* A ready VL in no table with weight cannot happen (sim_new checks). */
  return v >= 0 ? (unsigned)v : (unsigned)__builtin_ctz(ready);
}

/* A packet of size wire bytes goes from the VL vl_choose(ready) chose:
 * its blocks come off the entry's weight; high bytes count toward the
 * limit while the low table has packets. */
static void vl_charge(const struct sim *s, struct sim_port *p, uint32_t size,
                      uint8_t ready) {
  p->arb_left[p->arb_from] -= (int32_t)(sim_ib_blocks(size) * SIM_IB_BLOCK);
  if (p->arb_from == 0 && (ready & s->arb_mask[1]))
    p->high_run += size;
  else
    p->high_run = 0;
}

/* A packet left the buffer of sw (sent or flushed): release it from the
 * shared pool and from its ingress port's PFC count, or return its
 * credits. */
static void release(struct sim *s, struct sim_switch *sw, struct sim_port *in,
                    unsigned prio, uint32_t size) {
  sw->used -= size;
  in->in_bytes[prio] -= size;
  if (s->ib)
    ib_free(s, in, prio, sim_ib_blocks(size));
  else if ((in->xoff_sent >> prio) & 1 && in->in_bytes[prio] <= s->cfg.sw.xon)
    send_pfc(s, in, (uint8_t)prio, false);
}

/* InfiniBand: switch port p has packets and credit for none: it waits
 * from when its link is free. */
static void port_starve(struct sim *s, struct sim_port *p) {
  if (!s->ib)
    return;
  fc_commit(s, p); /* busy_until counts it if it left */
  if (p->starved_since == SIM_NEVER)
    p->starved_since = p->busy_until > s->now ? p->busy_until : s->now;
  fc_wait(s, p);
}

/* Sends the next frame: InfiniBand FC packets due and PFC frames first,
 * then the highest priority that has packets and is not paused
 * (InfiniBand: the VL the arbitration tables choose among those with a
 * packet and credit). */
static void port_send_next(struct sim *s, struct sim_port *p) {
  if (s->ib) {
    if (p->fc_at <= s->now) /* due: first, as of when it was due */
      fc_due_first(s, p);
    fc_look(s, p);
  }
  struct sim_pkt *pkt = p->ctl_head;
  if (pkt) {
    p->ctl_head = pkt->next;
    if (!p->ctl_head)
      p->ctl_tail = 0;
    put_on_wire(s, p, pkt);
    if (port_sendable(s, p))
      sim_schedule(s, &p->tx_ev, p->busy_until);
    return;
  }
  if ((pkt = sim_pktq_take(&p->vl15))) { /* management: first, no credit */
    if (pkt->in_port != UINT16_MAX)
      p->node->ports[pkt->in_port].vl15_in -= pkt->size;
    s->st.vl15_pkts++;
    s->st.vl15_bytes += pkt->size;
    put_on_wire(s, p, pkt);
    if (port_sendable(s, p))
      sim_schedule(s, &p->tx_ev, p->busy_until);
    else if (p->nonempty)
      port_starve(s, p);
    return;
  }
  if ((pkt = p->trimq.head)) {
    if (!(p->trimq.head = pkt->next))
      p->trimq.tail = 0;
    p->trimq.bytes -= pkt->size;
    put_on_wire(s, p, pkt);
    if (port_sendable(s, p))
      sim_schedule(s, &p->tx_ev, p->busy_until);
    return;
  }
  uint8_t m = port_ready(s, p);
  if (!m) {
    if (p->nonempty)
      port_starve(s, p);
    return;
  }
  unsigned prio = s->ib ? vl_choose(s, p, m) : 31u - (unsigned)__builtin_clz(m);
  struct sim_pktq *q = &p->q[prio];
  pkt = q->head;
  q->head = pkt->next;
  if (!q->head) {
    q->tail = 0;
    p->nonempty &= (uint8_t) ~(1u << prio);
  }
  uint32_t size = pkt->size;
  q->bytes -= size;
  p->qbytes -= size;
  struct sim_switch *sw = (struct sim_switch *)p->node;
  struct sim_port *in = &sw->n.ports[pkt->in_port];
  uint32_t blocks = s->ib ? sim_ib_blocks(size) : 0;
  p->credits[prio] -= blocks;
  if (s->ib) {
    vl_charge(s, p, size, m);
    s->st.vl_tx_bytes[prio] += size;
  }
  p->cr_wait = false;
  put_on_wire(s, p, pkt);
  if (port_sendable(s, p))
    sim_schedule(s, &p->tx_ev, p->busy_until);
  else if (p->nonempty)
    port_starve(s, p);
  release(s, sw, in, prio, size);
}

void sim_sw_release(struct sim *s, struct sim_switch *sw, struct sim_pkt *pkt,
                    unsigned q) {
  release(s, sw, &sw->n.ports[pkt->in_port], q, pkt->size);
  sim_pkt_free(s, pkt);
}

static void port_kick(struct sim *s, struct sim_port *p) {
  if (p->tx_ev.at != SIM_NEVER)
    return;
  if (s->ib)
    fc_look(s, p);
  if (!port_sendable(s, p)) {
    if (p->nonempty)
      port_starve(s, p); /* queued, and no credit */
    return;
  }
  if (p->tx_free <= s->now)
    port_send_next(s, p);
  else
    sim_schedule(s, &p->tx_ev, p->tx_free);
}

void sim_port_kick(struct sim *s, struct sim_port *p) { port_kick(s, p); }

void sim_port_tx_event(struct sim *s, struct sim_port *p) {
  port_send_next(s, p);
}

/* A PFC frame arrived on p: pause or resume p's egress for its priority. */
static void port_pause(struct sim *s, struct sim_port *p, struct sim_pkt *f) {
  uint8_t before = p->paused, bit = (uint8_t)(1u << f->prio);
  uint8_t f_prio = f->prio;
  bool f_xoff = f->flags & SIM_PF_XOFF;
  if (f->flags & SIM_PF_XOFF)
    p->paused |= bit;
  else
    p->paused &= (uint8_t)~bit;
  sim_pkt_free(s, f);
  if (before != p->paused)
    sim_log_pause(s, p, f_prio, f_xoff);
  if (!before && p->paused)
    p->paused_since = s->now;
  else if (before && !p->paused)
    s->st.paused_time[p->node->tier] += s->now - p->paused_since;
  if ((before & ~p->paused) == 0)
    return;
  if (p->node->kind == SIM_NODE_SWITCH)
    port_kick(s, p);
  else
    sim_nic_kick(s, container_of(p, struct sim_nic, port));
}

static inline uint64_t fmix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

/* ECMP hash of the 5-tuple: addresses (NIC ids), UDP ports, protocol. */
static inline uint64_t flow_hash(const struct sim_pkt *p, uint64_t salt) {
  uint64_t a = ((uint64_t)p->src << 32) | p->dst;
  uint64_t b = ((uint64_t)p->sport << 32) | (4791u << 8) | 17u;
  return fmix64(fmix64(a ^ salt) ^ b);
}

/* The n-th set bit of m. */
static inline uint16_t nth_bit(uint64_t m, uint32_t n) {
  while (n--)
    m &= m - 1;
  return (uint16_t)__builtin_ctzll(m);
}

/* Routes after a failure converged: among the ports toward the
 * destination's leaf on a shortest path over the links up. */
static uint16_t route_nh(struct sim *s, struct sim_switch *sw,
                         const struct sim_pkt *p) {
  const struct sim_port *np = &s->nics[p->dst].port;
  uint64_t m = s->nh[(uint64_t)sw->n.id * s->nswitches + np->peer->node->id];
  uint32_t n = (uint32_t)__builtin_popcountll(m);
  if (!n)
    return SIM_LFT_NONE;
  switch (s->cfg.routing) {
  case SIM_ROUTE_SPRAY:
    return nth_bit(m, (uint32_t)(splitmix64(&sw->rng) % n));
  case SIM_ROUTE_ADAPTIVE: {
    uint16_t best = nth_bit(m, (uint32_t)(splitmix64(&sw->rng) % n));
    for (uint64_t r = m; r; r &= r - 1) {
      uint16_t j = (uint16_t)__builtin_ctzll(r);
      if (sw->n.ports[j].qbytes < sw->n.ports[best].qbytes)
        best = j;
    }
    return best;
  }
  default:
    return nth_bit(m, (uint32_t)(flow_hash(p, sw->salt) % n));
  }
}

uint16_t sim_route(struct sim *s, struct sim_switch *sw,
                   const struct sim_pkt *p) {
  uint32_t d = p->dst;
  if (s->cfg.routing == SIM_ROUTE_STATIC)
    return sw->lft[s->nic_lid[d] + (p->sport & s->lmc_mask)];
  bool below = d >= sw->lo && d < sw->hi;
  if (s->nh && (!below || sw->n.tier > 1))
    return route_nh(s, sw, p);
  if (below)
    return (uint16_t)((d - sw->lo) / sw->span);
  uint32_t n = sw->n_up, base = sw->n_down;
  if (n == 1)
    return (uint16_t)base;
  switch (s->cfg.routing) {
  case SIM_ROUTE_STATIC:
    return (uint16_t)(base + (d / sw->up_div) % n);
  case SIM_ROUTE_SPRAY:
    return (uint16_t)(base + splitmix64(&sw->rng) % n);
  case SIM_ROUTE_ADAPTIVE: {
    /* Ports whose link is down are not eligible: a switch knows at once. */
    uint32_t start = (uint32_t)(splitmix64(&sw->rng) % n), best = UINT32_MAX;
    uint64_t bq = UINT64_MAX;
    for (uint32_t i = 0; i < n && bq; i++) {
      uint32_t j = (start + i) % n;
      const struct sim_port *o = &sw->n.ports[base + j];
      if (!o->down && o->qbytes < bq) {
        bq = o->qbytes;
        best = j;
      }
    }
    return best == UINT32_MAX ? (uint16_t)(base + start)
                              : (uint16_t)(base + best);
  }
  case SIM_ROUTE_ECMP:
  default:
    return (uint16_t)(base + flow_hash(p, sw->salt) % n);
  }
}

/* Packet trimming (switch.trim): a data packet the lossy queue of out
 * has no room for loses its payload; the headers, marked trimmed, go
 * through out's trim queue ahead of data, and through the trim queues of
 * the switches after (a trimmed packet is only ever queued there), so
 * the receiver learns of the loss within a path's delay. A trim queue
 * that is full drops them. */
static void trim_put(struct sim *s, struct sim_port *out, unsigned tier,
                     struct sim_pkt *pkt) {
  if (!(pkt->flags & SIM_PF_TRIMMED)) {
    pkt->size -= pkt->plen; /* the BTH's pad count stays, and its bytes */
    pkt->plen = 0;
    pkt->flags |= SIM_PF_TRIMMED;
    s->st.trims[tier]++;
    out->trims++;
  }
  struct sim_pktq *q = &out->trimq;
  if (q->bytes + pkt->size > s->cfg.sw.trim_queue) {
    s->st.drops_trim[tier]++;
    out->trim_drops++;
    sim_pkt_free(s, pkt);
    return;
  }
  sim_pktq_put(q, pkt);
  port_kick(s, out);
}

static void sw_receive(struct sim *s, struct sim_switch *sw,
                       struct sim_port *in, struct sim_pkt *pkt) {
  if (pkt->kind == SIM_PKT_PAUSE) {
    port_pause(s, in, pkt);
    return;
  }
  if (pkt->kind == SIM_PKT_SMP) {
    sim_mad_switch_rx(s, sw, in, pkt);
    return;
  }
  const struct sim_switch_cfg *c = &s->cfg.sw;
  uint16_t r = sim_route(s, sw, pkt);
  struct sim_port *out = r == SIM_LFT_NONE ? 0 : &sw->n.ports[r];
  if (!out || out->down) {
    /* No LFT entry, or routed to a dead link before the routes changed:
     * lost, and its credits go back at once. */
    if (!out)
      s->st.drops_noroute++;
    else
      sim_fail_lost(s, pkt);
    if (s->ib) {
      unsigned v = s->qmap[pkt->prio];
      uint32_t b = sim_ib_blocks(pkt->size);
      in->in_blocks[v] += b;
      ib_free(s, in, v, b);
    }
    sim_pkt_free(s, pkt);
    return;
  }
  unsigned prio = s->qmap[pkt->prio], tier = sw->n.tier;
  uint8_t bit = (uint8_t)(1u << prio);
  uint32_t size = pkt->size;
  struct sim_pktq *q = &out->q[prio];
  bool lossless = !s->ib && c->pfc && (c->pfc_prios & bit);
  if (s->ib) {
    /* Credits reserved the room: nothing is dropped. */
  } else if (lossless) {
    if (in->in_bytes[prio] + size > in->pfc_limit ||
        sw->used + size > c->buffer_bytes) {
      s->st.drops_lossless[tier]++;
      sim_pkt_free(s, pkt);
      return;
    }
  } else if (pkt->flags & SIM_PF_TRIMMED) {
    trim_put(s, out, tier, pkt);
    return;
  } else if (sw->used + size > c->buffer_bytes ||
             (c->qmax_bytes && q->bytes + size > c->qmax_bytes) ||
             (c->dt_alpha > 0 &&
              (double)(q->bytes + size) >
                  c->dt_alpha * (double)(c->buffer_bytes - sw->used))) {
    if (c->trim && pkt->kind == SIM_PKT_DATA && pkt->plen) {
      trim_put(s, out, tier, pkt);
      return;
    }
    s->st.drops_buffer[tier]++;
    sim_pkt_free(s, pkt);
    return;
  }
  if (c->ecn && pkt->ecn && pkt->ecn != SIM_ECN_CE && q->bytes > c->kmin) {
    bool mark = q->bytes >= c->kmax;
    if (!mark) {
      double pr =
          c->pmax * (double)(q->bytes - c->kmin) / (double)(c->kmax - c->kmin);
      mark = splitmix64_01(&sw->rng) < pr;
    }
    if (mark) {
      pkt->ecn = SIM_ECN_CE;
      s->st.ecn_marks[tier]++;
    }
  }
  if (s->ib && s->cfg.ib.cc.enabled && pkt->kind == SIM_PKT_DATA &&
      q->bytes > s->cfg.ib.cc.threshold) {
    fc_apply(s, out);
    if (out->credits[prio] >= sim_ib_blocks(size) &&
        ++sw->fecn_count % s->cfg.ib.cc.marking_rate == 0) {
      pkt->flags |= SIM_PF_FECN; /* a root of congestion, not a victim */
      s->st.fecn_marks++;
    }
  }
  sw->used += size;
  if (sw->used > sw->max_used)
    sw->max_used = sw->used;
  in->in_bytes[prio] += size;
  if (s->ib)
    ib_take(s, in, prio, size);
  pkt->in_port = in->idx;
  sim_pktq_put(q, pkt);
  out->qbytes += size;
  out->nonempty |= bit;
  if (q->bytes > out->max_q)
    out->max_q = q->bytes;
  if (lossless && in->in_bytes[prio] > c->xoff && !(in->xoff_sent & bit))
    send_pfc(s, in, (uint8_t)prio, true);
  port_kick(s, out);
}

/* InfiniBand: the priorities (SLs) a NIC may not start a packet of: their
 * VL lacks credit for the largest packet (the credits that reached it
 * by now counted). */
static uint8_t nic_blocked(const struct sim *s, const struct sim_port *p) {
  uint8_t m = 0;
  for (uint8_t i = 0; i < SIM_NPRIO; i++)
    if (p->credits[s->qmap[i]] < s->ib_max_blocks)
      m |= (uint8_t)(1u << i);
  return m;
}
static uint8_t nic_blocked_now(struct sim *s, struct sim_port *p) {
  uint8_t m = nic_blocked(s, p);
  if (m && p->cr_due <= s->now) {
    fc_apply_due(s, p, s->now);
    m = nic_blocked(s, p);
  }
  return m;
}

/* IB CC: the SLs whose injection delay has not passed, and the earliest
 * time one of them may send again (SIM_NEVER: none waits). */
static uint8_t cc_throttled(const struct sim *s, const struct sim_nic *nic,
                            sim_time_t *wake) {
  uint8_t m = 0;
  *wake = SIM_NEVER;
  for (uint8_t i = 0; i < SIM_NPRIO && s->cfg.ib.cc.enabled; i++)
    if (nic->cc_next[i] > s->now) {
      m |= (uint8_t)(1u << i);
      if (nic->cc_next[i] < *wake)
        *wake = nic->cc_next[i];
    }
  return m;
}

/* Takes credit for a packet the NIC sends. */
static void nic_take_credit(struct sim *s, struct sim_port *port,
                            const struct sim_pkt *pkt) {
  uint32_t b = sim_ib_blocks(pkt->size);
  uint8_t v = s->qmap[pkt->prio];
  if (b > port->credits[v]) /* a model ignored the mask: a bug */
    s->st.credit_overruns++;
  else
    port->credits[v] -= b;
}

/* InfiniBand: the NIC's next packet by VL arbitration, as at a switch
 * egress: among the VLs with credit whose SLs the NIC may send on (not
 * throttled by IB CC) and the host model may have a packet of, the tables
 * choose one; the model gives a packet of that VL's SLs (a BECN the NIC
 * made itself goes first on its VL), or the VL drops out and they choose
 * again. *wake: when a throttled SL may send; *short: whether some SL
 * the model may have a packet of lacks credit. */
static struct sim_pkt *nic_arbitrate(struct sim *s, struct sim_nic *nic,
                                     sim_time_t *wake, bool *short_) {
  struct sim_port *port = &nic->port;
  uint8_t blocked = nic_blocked_now(s, port);
  uint8_t ok = (uint8_t) ~(blocked | cc_throttled(s, nic, wake));
  uint8_t has = s->host->sls ? s->host->sls(nic->model, s->now) : 0xFF;
  uint8_t may = ok & has;
  struct sim_pkt *f = port->ctl_head; /* BECNs the NIC itself sends */
  int fvl = -1;
  if (f && sim_ib_blocks(f->size) <= port->credits[s->qmap[f->prio]])
    fvl = s->qmap[f->prio];
  *short_ = (has & blocked) || (f && fvl < 0);
  uint8_t ready = fvl >= 0 ? (uint8_t)(1u << fvl) : 0;
  for (uint8_t m = may; m; m &= (uint8_t)(m - 1))
    ready |= (uint8_t)(1u << s->qmap[__builtin_ctz(m)]);
  while (ready) {
    unsigned v = vl_choose(s, port, ready);
    struct sim_pkt *pkt;
    if ((int)v == fvl) {
      pkt = f;
      port->ctl_head = f->next;
      if (!port->ctl_head)
        port->ctl_tail = 0;
    } else {
      pkt = s->host->pull(nic->model, s->now, (uint8_t) ~(s->vl_sls[v] & ok));
    }
    if (pkt) {
      vl_charge(s, port, pkt->size, ready);
      return pkt;
    }
    ready &= (uint8_t) ~(1u << v);
  }
  return 0;
}

/* A NIC whose link is down sends as ever, and its port loses what it
 * sends, one packet per serialisation time: the transport's timers see
 * no answer, go back, and fail the QP when its retry count is spent.
 * The link coming up kicks it (fail.c). */
static void nic_poll_down(struct sim *s, struct sim_nic *nic) {
  struct sim_port *port = &nic->port;
  for (struct sim_pkt *k = port->vl15.head, *n; k; k = n) {
    n = k->next;
    sim_mad_lost(s, k);
  }
  port->vl15 = (struct sim_pktq){0};
  struct sim_pkt *pkt = s->host->pull(nic->model, s->now, 0);
  if (pkt) {
    if (pkt->kind == SIM_PKT_DATA)
      s->st.data_pkts++;
    else
      s->st.ctrl_pkts++;
    sim_fail_lost(s, pkt);
    sim_time_t t = s->now + sim_ser_time(pkt->size, port->rate_bps);
    sim_pkt_free(s, pkt);
    sim_schedule(s, &nic->ev, t);
    return;
  }
  sim_time_t t = s->host->next_time(nic->model);
  if (t == SIM_NEVER)
    sim_ev_cancel(&nic->ev);
  else
    sim_schedule(s, &nic->ev, t > s->now ? t : s->now);
}

static void nic_poll(struct sim *s, struct sim_nic *nic) {
  struct sim_port *port = &nic->port;
  if (port->down) {
    nic_poll_down(s, nic);
    return;
  }
  sim_time_t wake = SIM_NEVER;
  struct sim_pkt *pkt;
  bool short_ = false;
  if (s->ib) {
    if (port->fc_at <= s->now) /* due: first, as of when it was due */
      fc_due_first(s, port);
    if ((pkt = sim_pktq_take(&port->vl15))) { /* management: first */
      put_on_wire(s, port, pkt);
      sim_schedule(s, &nic->ev, port->busy_until);
      return;
    }
    pkt = nic_arbitrate(s, nic, &wake, &short_);
  } else {
    pkt = s->host->pull(nic->model, s->now, port->paused);
  }
  if (pkt) {
    if (s->ib) {
      nic_take_credit(s, port, pkt);
      port->cr_wait = false;
    }
    if (pkt->kind == SIM_PKT_DATA)
      s->st.data_pkts++;
    else if (pkt->kind != SIM_PKT_BECN) /* BECNs are the NIC's own */
      s->st.ctrl_pkts++;
    put_on_wire(s, &nic->port, pkt);
    if (pkt->kind == SIM_PKT_DATA && nic->ccti[pkt->prio])
      nic->cc_next[pkt->prio] =
          port->busy_until + nic->ccti[pkt->prio] * s->cfg.ib.cc.ird_step;
    sim_schedule(s, &nic->ev, nic->port.busy_until);
    return;
  }
  if (short_) /* what it may have waits for credit */
    fc_wait(s, port);
  sim_time_t t = s->host->next_time(nic->model);
  if (wake < t)
    t = wake;
  if (t == SIM_NEVER)
    sim_ev_cancel(&nic->ev);
  else
    sim_schedule(s, &nic->ev, t > s->now ? t : s->now);
}

/* IB CC at the destination: a FECN-marked packet is answered with a BECN
 * (an IB CNP: BTH and ICRC) to its source, on the control SL. */
static void send_becn(struct sim *s, struct sim_nic *nic,
                      const struct sim_pkt *p) {
  struct sim_pkt *b = sim_pkt_alloc(s);
  if (!b)
    return;
  *b = (struct sim_pkt){.size = sim_frame_wire(&s->cfg, 12 + 4),
                        .src = p->dst,
                        .dst = p->src,
                        .flow = p->flow,
                        .sport = p->sport,
                        .kind = SIM_PKT_BECN,
                        .prio = s->cfg.tp.ctrl_prio};
  b->len = p->prio;
  struct sim_port *port = &nic->port;
  if (port->ctl_tail)
    port->ctl_tail->next = b;
  else
    port->ctl_head = b;
  port->ctl_tail = b;
}

/* IB CC at the source: a BECN raises the CCT index of its SL. */
static void recv_becn(struct sim *s, struct sim_nic *nic, struct sim_pkt *b) {
  const struct sim_ibcc_cfg *cc = &s->cfg.ib.cc;
  uint8_t sl = (uint8_t)(b->len % SIM_NPRIO);
  nic->ccti[sl] += cc->ccti_increase;
  if (nic->ccti[sl] > cc->ccti_limit)
    nic->ccti[sl] = cc->ccti_limit;
  s->st.becns++;
  sim_pkt_free(s, b);
  if (nic->cc_ev.at == SIM_NEVER)
    sim_schedule(s, &nic->cc_ev, s->now + cc->ccti_timer);
}

void sim_nic_cc_event(struct sim *s, struct sim_nic *nic) {
  bool any = false;
  for (int i = 0; i < SIM_NPRIO; i++) {
    if (nic->ccti[i])
      nic->ccti[i]--;
    any |= nic->ccti[i] > 0;
  }
  if (any)
    sim_schedule(s, &nic->cc_ev, s->now + s->cfg.ib.cc.ccti_timer);
}

void sim_nic_kick(struct sim *s, struct sim_nic *nic) {
  if (nic->port.tx_free > s->now)
    sim_schedule_min(s, &nic->ev, nic->port.tx_free);
  else
    nic_poll(s, nic);
}

void sim_nic_event(struct sim *s, struct sim_nic *nic) {
  sim_nic_kick(s, nic);
}

void sim_port_rx_event(struct sim *s, struct sim_port *p) {
  struct sim_pkt *pkt = p->fly_head;
  p->fly_head = pkt->next;
  if (p->fly_head)
    sim_schedule(s, &p->rx_ev, p->fly_head->ts);
  else
    p->fly_tail = 0;
  struct sim_port *in = p->peer;
  if (s->ib)
    fc_active(s, in);
  if (in->node->kind == SIM_NODE_SWITCH) {
    sw_receive(s, (struct sim_switch *)in->node, in, pkt);
    return;
  }
  struct sim_nic *nic = container_of(in, struct sim_nic, port);
  if (pkt->kind == SIM_PKT_PAUSE) {
    port_pause(s, in, pkt);
    return;
  }
  if (pkt->kind == SIM_PKT_SMP) {
    sim_mad_nic_rx(s, nic, pkt);
    return;
  }
  if (s->ib) { /* the NIC takes packets at line rate: credit back at once */
    unsigned v = s->qmap[pkt->prio];
    in->in_bytes[v] += pkt->size;
    ib_take(s, in, v, pkt->size);
    in->in_bytes[v] -= pkt->size;
    ib_free(s, in, v, sim_ib_blocks(pkt->size));
    if (pkt->kind == SIM_PKT_BECN) {
      recv_becn(s, nic, pkt);
      return;
    }
    if (pkt->flags & SIM_PF_FECN) {
      send_becn(s, nic, pkt);
      pkt->flags &= (uint8_t)~SIM_PF_FECN;
    }
  }
  if (pkt->kind == SIM_PKT_DATA)
    sim_rx_data(s, nic, pkt);
  s->host->deliver(nic->model, pkt, s->now);
  sim_nic_kick(s, nic);
}
