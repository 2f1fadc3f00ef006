/* Failures: links and switches going down (and up) at given times, and
 * each fabric's recovery. A dead link loses what is on it and what is
 * queued for it; packets routed to it are lost until new routes take
 * effect everywhere: on RoCE after a detection and a routing convergence
 * delay (ECMP groups over the shortest paths that remain), on InfiniBand
 * after a trap to the SM and its sweep, route computation (up/down or
 * minhop over the links up) and LFT programming, as sm.c models them. A
 * change whose trap is lost waits for a sweep: another change's, or the
 * SM's next periodic one. When the master SM's own link goes down, no trap
 * reaches it and it sweeps nothing; a standby SM notices by its polls and
 * takes over with a sweep of its own (sm.c). The transport recovers the lost
 * packets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"

enum { FE_CHANGE, FE_INSTALL, FE_SWEEP, FE_TRAP };

struct fail_ev {
  struct sim_ev ev;
  uint32_t idx; /* the failure */
  uint8_t what, up;
  uint32_t covers; /* FE_INSTALL: the results it completes, a bit each */
};

struct sim_fail {
  /* down, up; their installs (RoCE, InfiniBand's adaptive routing);
   * their traps (InfiniBand) */
  struct fail_ev ev[SIM_FAIL_MAX][6];
  struct fail_ev sweep; /* the next periodic SM sweep, while one is due */
  uint32_t unseen;      /* results no SM sweep has seen yet, a bit each */
  struct sim_fail_result res[2 * SIM_FAIL_MAX];
  struct fail_ev *res_ins[2 * SIM_FAIL_MAX]; /* each result's install */
  uint32_t nres;
};
_Static_assert(2 * SIM_FAIL_MAX <= 32, "a result is a bit of a uint32_t");

const char *sim_noticed_name(enum sim_noticed n) {
  static const char *const names[] = {"none", "trap", "sweep", "standby"};
  return (unsigned)n < 4 ? names[n] : "?";
}

/* The ports of failure f: one link, or every link of a switch. */
static uint32_t fail_ports(struct sim *s, const struct sim_failure *f,
                           struct sim_port **out, uint32_t max) {
  struct sim_switch *sw = &s->sws[f->sw];
  if (f->kind == SIM_FAIL_LINK) {
    out[0] = &sw->n.ports[f->port];
    return 1;
  }
  uint32_t n = 0;
  for (uint16_t j = 0; j < sw->n.nports && n < max; j++)
    out[n++] = &sw->n.ports[j];
  return n;
}

void sim_fail_lost(struct sim *s, const struct sim_pkt *p) {
  (void)p;
  s->st.drops_link_down++;
  if (s->par && sim_par_in_window(s)) { /* a partition: counted after */
    s->fail_lost++;
    s->fail_last = s->now;
    return;
  }
  if (s->fail && s->fail->nres) {
    struct sim_fail_result *r = &s->fail->res[s->fail->nres - 1];
    r->lost_pkts++;
    r->last_loss = s->now;
  }
}

void sim_fail_lost_fold(struct sim *s, uint64_t n, sim_time_t last) {
  if (!s->fail || !s->fail->nres)
    return;
  struct sim_fail_result *r = &s->fail->res[s->fail->nres - 1];
  r->lost_pkts += n;
  if (r->last_loss == SIM_NEVER || last > r->last_loss)
    r->last_loss = last;
}

/* Loses what a dead port holds: its egress queues, its control frames
 * and the frames on the wire toward its peer. */
static void flush(struct sim *s, struct sim_port *p) {
  /* A distributed run: every rank runs this and loses the packets it
   * holds; the pause state is the port's rank's (samples copy it). */
  bool mine = sim_mine(s, p->tx_ev.part);
  sim_ev_cancel(&p->tx_ev);
  sim_ev_cancel(&p->rx_ev);
  sim_ev_cancel(&p->fc_ev); /* its flow-control packets are lost */
  sim_ev_cancel(&p->fc_tick);
  sim_ev_cancel(&p->fc_rx_ev);
  for (struct sim_pkt *k; (k = sim_pktq_take(&p->fc_q));)
    sim_pkt_free(s, k);
  if (p->peer) { /* and their records at the peer */
    p->peer->crq.head += p->peer->crq.n;
    p->peer->crq.n = 0;
    p->peer->cr_due = SIM_NEVER;
  }
  p->fc_open = 0;
  p->fc_open_vls = 0;
  p->fc_at = SIM_NEVER;
  p->fc_lazy = false;
  p->fc_vls = p->fc_news = 0;
  p->cr_wait = false;
  memset(p->freed, 0, sizeof p->freed);
  for (struct sim_pkt *k = p->fly_head, *n; k; k = n) {
    n = k->next;
    if (k->kind == SIM_PKT_SMP) {
      sim_mad_lost(s, k);
      continue;
    }
    if (k->kind < SIM_PKT_PAUSE)
      sim_fail_lost(s, k);
    sim_pkt_free(s, k);
  }
  p->fly_head = p->fly_tail = 0;
  for (struct sim_pkt *k = p->vl15.head, *n; k; k = n) {
    n = k->next;
    if (k->in_port != UINT16_MAX)
      p->node->ports[k->in_port].vl15_in -= k->size;
    sim_mad_lost(s, k);
  }
  p->vl15 = (struct sim_pktq){0};
  for (struct sim_pkt *k = p->ctl_head, *n; k; k = n) {
    n = k->next;
    sim_pkt_free(s, k);
  }
  p->ctl_head = p->ctl_tail = 0;
  for (struct sim_pkt *k = p->trimq.head, *n; k; k = n) {
    n = k->next;
    sim_fail_lost(s, k);
    sim_pkt_free(s, k);
  }
  p->trimq = (struct sim_pktq){0};
  /* Every pause across the link ends with it, both ways: the frames that
   * would have lifted them are lost with it (a NIC paused before its
   * link went down sent nothing after it came back). */
  for (uint8_t q = 0; mine && q < SIM_NPRIO; q++)
    if (p->paused >> q & 1)
      sim_log_pause(s, p, q, false);
  if (mine && p->paused)
    s->st.paused_time[p->node->tier] += s->now - p->paused_since;
  p->paused = 0;
  p->xoff_sent = 0;
  if (p->node->kind != SIM_NODE_SWITCH)
    return;
  struct sim_switch *sw = (struct sim_switch *)p->node;
  for (unsigned q = 0; q < SIM_NPRIO; q++) {
    struct sim_pktq *pq = &p->q[q];
    struct sim_pkt *k = pq->head;
    pq->head = pq->tail = 0;
    p->qbytes -= pq->bytes;
    pq->bytes = 0;
    for (struct sim_pkt *n; k; k = n) {
      n = k->next;
      sim_fail_lost(s, k);
      sim_sw_release(s, sw, k, q);
    }
  }
  p->nonempty = 0;
  p->starved_since = SIM_NEVER;
}

/* A link comes up: trained afresh, the peer's credits are its input
 * buffer less what it still holds. */
static void link_up(struct sim *s, struct sim_port *p) {
  p->down = false;
  p->busy_until = p->tx_free = s->now;
  for (int v = 0; v < SIM_NPRIO && s->ib; v++) {
    uint32_t full = (uint32_t)(s->cfg.ib.vl_buffer / SIM_IB_BLOCK);
    p->credits[v] = full - p->peer->in_blocks[v];
    p->freed[v] = 0;
  }
  sim_ev_cancel(&p->fc_ev);
  p->fc_at = SIM_NEVER;
  p->fc_lazy = false;
  p->fc_vls = p->fc_news = 0;
}

/* Shortest-path next hops over the links up, from every switch toward
 * every leaf (a switch with NICs). */
static int compute_nh(struct sim *s, uint64_t *nh) {
  uint32_t nsw = s->nswitches;
  uint32_t *dist = malloc(sizeof(*dist) * nsw), *q = malloc(sizeof(*q) * nsw);
  if (!dist || !q) {
    free(dist);
    free(q);
    return -1;
  }
  memset(nh, 0, sizeof(*nh) * (size_t)nsw * nsw);
  for (uint32_t l = 0; l < nsw; l++) {
    if (s->sws[l].n.tier != 1)
      continue;
    for (uint32_t i = 0; i < nsw; i++)
      dist[i] = UINT32_MAX;
    uint32_t h = 0, t = 0;
    dist[l] = 0;
    q[t++] = l;
    while (h < t) {
      struct sim_switch *sw = &s->sws[q[h++]];
      for (uint16_t j = 0; j < sw->n.nports; j++) {
        struct sim_port *p = &sw->n.ports[j];
        if (p->down || p->peer->node->kind != SIM_NODE_SWITCH)
          continue;
        uint32_t o = p->peer->node->id;
        if (dist[o] == UINT32_MAX) {
          dist[o] = dist[sw->n.id] + 1;
          q[t++] = o;
        }
      }
    }
    for (uint32_t i = 0; i < nsw; i++) {
      struct sim_switch *sw = &s->sws[i];
      if (i == l || dist[i] == UINT32_MAX)
        continue;
      uint64_t m = 0;
      for (uint16_t j = 0; j < sw->n.nports; j++) {
        struct sim_port *p = &sw->n.ports[j];
        if (!p->down && p->peer->node->kind == SIM_NODE_SWITCH &&
            dist[p->peer->node->id] + 1 == dist[i])
          m |= 1ull << j;
      }
      nh[(uint64_t)i * nsw + l] = m;
    }
  }
  free(dist);
  free(q);
  return 0;
}

static void install(struct sim *s, struct fail_ev *fe) {
  for (uint32_t i = 0; i < s->fail->nres; i++)
    if (fe->covers >> i & 1)
      s->fail->res[i].installed = s->now;
  if (!s->nh)
    s->nh = malloc(sizeof(*s->nh) * (size_t)s->nswitches * s->nswitches);
  if (!s->nh || compute_nh(s, s->nh)) {
    fprintf(stderr, "uroce sim: out of memory rerouting; routes unchanged\n");
    free(s->nh);
    s->nh = 0;
  }
}

bool sim_fail_unseen(const struct sim *s) { return s->fail->unseen != 0; }

/* An SM sweep starts now and sees every change not seen yet. */
uint32_t sim_fail_sweep_begin(struct sim *s, enum sim_noticed how) {
  struct sim_fail *fl = s->fail;
  if (!fl)
    return 0;
  uint32_t covers = fl->unseen;
  for (uint32_t i = 0; i < fl->nres; i++)
    if (covers >> i & 1) {
      fl->res[i].detect = s->now - fl->res[i].at;
      fl->res[i].noticed = how;
    }
  fl->unseen = 0;
  return covers;
}

/* The sweep's LFTs are all programmed (static routing: each took effect
 * as its LFT Set reached the switch); with adaptive routing the switches'
 * groups change at the next cell boundary, all at once (a global event,
 * which a partition may only ask for in a later cell). */
void sim_fail_sweep_end(struct sim *s, uint32_t covers, sim_time_t disc,
                        sim_time_t comp, sim_time_t prog, bool end) {
  struct sim_fail *fl = s->fail;
  if (!fl || !covers)
    return;
  if (!end) { /* stopped: they are unseen again, and not detected yet */
    fl->unseen |= covers;
    for (uint32_t i = 0; i < fl->nres; i++)
      if (covers >> i & 1) {
        fl->res[i].detect = 0;
        fl->res[i].noticed = SIM_NOTICED_NOT_YET;
      }
    return;
  }
  sim_time_t at = s->now;
  if (s->cfg.routing != SIM_ROUTE_STATIC) {
    at = sim_cell_end(s, s->now);
    prog += at - s->now;
    /* (a partition's cfg is a copy: the result's failure is not in it) */
    struct fail_ev *ins = fl->res_ins[__builtin_ctz(covers)];
    ins->covers = covers;
    sim_schedule(s, &ins->ev, at);
  }
  for (uint32_t i = 0; i < fl->nres; i++) {
    struct sim_fail_result *r = &fl->res[i];
    if (!(covers >> i & 1))
      continue;
    r->sweep = disc;
    r->compute = comp;
    r->program = prog;
    if (s->cfg.routing == SIM_ROUTE_STATIC)
      r->installed = at;
  }
}

/* Whether this process runs the master SM (every one but in a
 * distributed run, where the master's NIC's rank does). */
static bool sm_here(const struct sim *s) {
  return sim_mine(s, s->nics[sim_sm_master(s)].n.part);
}

static void change(struct sim *s, struct fail_ev *fe) {
  struct sim_fail *fl = s->fail;
  const struct sim_failure *f = &s->cfg.fail[fe->idx];
  struct sim_fail_result *r = &fl->res[fl->nres++];
  *r = (struct sim_fail_result){
      .f = f, .up = fe->up, .at = s->now, .last_loss = SIM_NEVER};
  fl->res_ins[fl->nres - 1] = &fl->ev[fe->idx][2 + fe->up];
  struct sim_port *ports[4096];
  uint32_t n = fail_ports(s, f, ports, 4096);
  for (uint32_t i = 0; i < n; i++) {
    struct sim_port *p = ports[i];
    if (fe->up) {
      link_up(s, p);
      link_up(s, p->peer);
    } else {
      p->down = p->peer->down = true;
      flush(s, p);
      flush(s, p->peer);
    }
  }
  /* Kick both ends: queues may move again (up), or a NIC may have
   * lost what it was waiting for. */
  for (uint32_t i = 0; i < n; i++)
    for (int e = 0; e < 2; e++) {
      struct sim_port *p = e ? ports[i]->peer : ports[i];
      if (p->node->kind == SIM_NODE_NIC)
        sim_nic_kick(s, container_of(p, struct sim_nic, port));
      else if (fe->up)
        sim_schedule(s, &p->tx_ev, s->now);
    }
  uint32_t ri = fl->nres - 1;
  if (!s->ib) {
    r->detect = s->cfg.recovery.detection;
    r->compute = s->cfg.recovery.convergence;
    r->noticed = SIM_NOTICED_TRAP;
    struct fail_ev *ins = &fl->ev[fe->idx][2 + fe->up];
    ins->covers = 1u << ri;
    sim_schedule(s, &ins->ev, s->now + r->detect + r->compute);
    return;
  }
  fl->unseen |= 1u << ri;
  if (sim_sm_master_down(s)) {
    /* No trap reaches the master and it sweeps nothing (a sweep running
     * stops); a standby's polls go unanswered (sm.c). */
    if (sm_here(s))
      sim_sm_abort(s);
    return;
  }
  /* The trap goes trap_us after the change and starts a sweep that sees
   * every change so far, if it reaches the SM; else the next periodic
   * sweep will (a sweep at t sees t's changes). */
  if (s->cfg.recovery.traps && !f->trap_lost)
    sim_schedule(s, &fl->ev[fe->idx][4 + fe->up].ev,
                 s->now + s->cfg.recovery.trap);
  sim_time_t iv = s->cfg.ib.sm.sweep_interval;
  if (iv && fl->sweep.ev.at == SIM_NEVER)
    sim_schedule(s, &fl->sweep.ev, (s->now + iv - 1) / iv * iv);
}

/* A change's traps leave the switches at its ports (each switch whose
 * port changed state sends one, on VL15, LID-routed to the SM; a switch
 * going down sends none), each lost if its route crosses a dead link. */
static void send_trap(struct sim *s, struct fail_ev *fe) {
  const struct sim_failure *f = &s->cfg.fail[fe->idx];
  struct sim_port *ports[4096];
  uint32_t n = fail_ports(s, f, ports, 4096);
  struct sim_switch *sent[4096];
  uint32_t ns = 0;
  for (uint32_t i = 0; i < n; i++)
    for (int e = 0; e < 2; e++) {
      struct sim_node *nd = e ? ports[i]->peer->node : ports[i]->node;
      if (nd->kind != SIM_NODE_SWITCH ||
          (!fe->up && f->kind == SIM_FAIL_SWITCH && nd->id == f->sw))
        continue;
      struct sim_switch *sw = (struct sim_switch *)nd;
      uint32_t k = 0;
      while (k < ns && sent[k] != sw)
        k++;
      if (k < ns)
        continue;
      sent[ns++] = sw;
      if (sim_mine(s, sw->n.part)) /* from its switch's rank */
        sim_mad_trap(s, sw);
    }
}

/* The SM's periodic sweep: it sees the changes no trap reported. */
static void periodic_sweep(struct sim *s) {
  if (sm_here(s) && s->fail->unseen && !sim_sm_master_down(s))
    sim_sm_sweep(s, SIM_NOTICED_SWEEP, false);
}

void sim_fail_event(struct sim *s, struct sim_ev *ev) {
  struct fail_ev *fe = container_of(ev, struct fail_ev, ev);
  sim_fc_commit_due(s, s->now, 0); /* before links change */
  if (fe->what == FE_INSTALL)
    install(s, fe);
  else if (fe->what == FE_SWEEP)
    periodic_sweep(s);
  else if (fe->what == FE_TRAP)
    send_trap(s, fe);
  else
    change(s, fe);
}

int sim_fail_new(struct sim *s, char *err, size_t errlen) {
  const struct sim_cfg *c = &s->cfg;
  if (!c->nfail)
    return 0;
  if (c->nfail > SIM_FAIL_MAX || s->nswitches > 8192) {
    snprintf(err, errlen, "failures: at most %d, on at most 8192 switches",
             SIM_FAIL_MAX);
    return -1;
  }
  for (uint32_t i = 0; i < c->nfail; i++) {
    const struct sim_failure *f = &c->fail[i];
    if (f->sw >= s->nswitches) {
      snprintf(err, errlen, "failures[%u]: switch %u, the fabric has %u", i,
               f->sw, s->nswitches);
      return -1;
    }
    const struct sim_switch *sw = &s->sws[f->sw];
    if (sw->n.nports > 64) {
      snprintf(err, errlen,
               "failures[%u]: switch %u has %u ports; failures need at most "
               "64",
               i, f->sw, sw->n.nports);
      return -1;
    }
    if (f->kind == SIM_FAIL_LINK && f->port >= sw->n.nports) {
      snprintf(err, errlen, "failures[%u]: switch %u has no port %u", i, f->sw,
               f->port);
      return -1;
    }
    /* A host cut off for good: its QPs and its peers' fail once their
     * retries are spent, unless retries are unlimited. */
    if (f->kind == SIM_FAIL_LINK &&
        sw->n.ports[f->port].peer->node->kind != SIM_NODE_SWITCH &&
        !f->up_after && c->tp.retry_cnt >= 7 && c->stop_time == SIM_NEVER) {
      snprintf(err, errlen,
               "failures[%u]: switch %u port %u is a host link that never "
               "comes back, and transport.retry_cnt 7 retries for ever: "
               "the flows of that host would never end; give a retry_cnt "
               "below 7, up_after_us or stop_time_us",
               i, f->sw, f->port);
      return -1;
    }
    if (f->trap_lost && !s->ib) {
      snprintf(err, errlen,
               "failures[%u]: trap_lost is InfiniBand's (RoCE recovers "
               "after detection and convergence)",
               i);
      return -1;
    }
    if (f->kind == SIM_FAIL_SWITCH && sw->n.tier == 1) {
      snprintf(err, errlen,
               "failures[%u]: switch %u is a leaf/edge; only spine, "
               "aggregation and core switches can fail (hosts would be cut "
               "off)",
               i, f->sw);
      return -1;
    }
  }
  struct sim_fail *fl = calloc(1, sizeof(*fl));
  if (!fl) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  s->fail = fl;
  for (uint32_t i = 0; i < c->nfail; i++)
    for (int k = 0; k < 6; k++) {
      struct fail_ev *fe = &fl->ev[i][k];
      sim_ev_new(&fe->ev, SIM_EV_FAIL, (uint64_t)i * 6 + (uint64_t)k);
      fe->idx = i;
      fe->what = k < 2 ? FE_CHANGE : k < 4 ? FE_INSTALL : FE_TRAP;
      fe->up = (uint8_t)(k & 1);
    }
  sim_ev_new(&fl->sweep.ev, SIM_EV_FAIL, (uint64_t)SIM_FAIL_MAX * 6);
  fl->sweep.what = FE_SWEEP;
  for (uint32_t i = 0; i < c->nfail; i++) {
    sim_schedule(s, &fl->ev[i][0].ev, c->fail[i].at);
    if (c->fail[i].up_after)
      sim_schedule(s, &fl->ev[i][1].ev, c->fail[i].at + c->fail[i].up_after);
  }
  return 0;
}

void sim_fail_net_finish(struct sim *s) {
  struct sim_fail *fl = s->fail;
  if (!fl || !fl->nres)
    return;
  /* The SM's steps from the master's rank (the same everywhere on RoCE),
   * losses from every rank: their sum, and the latest. */
  enum { W = 7 };
  uint64_t v[2 * SIM_FAIL_MAX * W] = {0}, last[2 * SIM_FAIL_MAX] = {0};
  bool here = sm_here(s);
  for (uint32_t i = 0; i < fl->nres; i++) {
    struct sim_fail_result *r = &fl->res[i];
    uint64_t *o = v + i * W;
    if (here) {
      o[0] = r->installed;
      o[1] = r->detect;
      o[2] = r->sweep;
      o[3] = r->compute;
      o[4] = r->program;
      o[5] = (uint64_t)r->noticed;
    }
    o[6] = r->lost_pkts;
    last[i] = r->last_loss == SIM_NEVER ? 0 : r->last_loss + 1;
  }
  sim_net_reduce(s, v, fl->nres * W, SIM_NET_SUM);
  sim_net_reduce(s, last, fl->nres, SIM_NET_MAX);
  for (uint32_t i = 0; i < fl->nres; i++) {
    struct sim_fail_result *r = &fl->res[i];
    const uint64_t *o = v + i * W;
    r->installed = o[0];
    r->detect = o[1];
    r->sweep = o[2];
    r->compute = o[3];
    r->program = o[4];
    r->noticed = (enum sim_noticed)o[5];
    r->lost_pkts = o[6];
    r->last_loss = last[i] ? last[i] - 1 : SIM_NEVER;
  }
}

void sim_fail_del(struct sim *s) {
  free(s->fail);
  free(s->nh);
  s->fail = 0;
  s->nh = 0;
}

const struct sim_fail_result *sim_fail_results(const struct sim *s,
                                               uint32_t *n) {
  *n = s->fail ? s->fail->nres : 0;
  return s->fail ? s->fail->res : 0;
}
