/* InfiniBand's subnet manager, as a model of what OpenSM does: it
 * discovers the fabric with directed-route SMPs, assigns LIDs (2^lmc per
 * NIC, aligned, then one per switch), computes a linear forwarding table
 * per switch with the chosen engine and programs it in blocks of 64
 * entries. The LFTs are then what static routing forwards by, and they are
 * checked: no cycle in the channel dependency graph, up ports balanced.
 *
 * At start the fabric is up before the job: the sweep's time is the
 * closed form (round trips and SMA processing over max_wire_smps), which
 * the packets give on an idle fabric. The sweeps after a change are
 * simulated: SMPs on VL15 through the ports (mad.c), max_wire_smps
 * outstanding, breadth first from the SM's NIC, each answered by the
 * node's SMA, an SMP without an answer sent again after smp_timeout; the
 * route computation is a timer; an LFT Set changes the switch's table as
 * it arrives there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"

#define SMP_WIRE SIM_SMP_WIRE
#define LFT_BLOCK 64

enum sm_phase { SM_IDLE, SM_DISCOVER, SM_COMPUTE, SM_PROGRAM };

/* An SMP to send: its target node, attribute and argument. */
struct smp_req {
  uint32_t node, arg;
  uint8_t attr;
};

/* An SMP outstanding: tid matches its answer. */
struct smp_slot {
  struct smp_req r;
  uint32_t tid;
  sim_time_t deadline;
  uint8_t tries;
  bool busy;
};

/* The standby's SMInfo polls, as OpenSM's (osm_sm_state_mgr.c): a timer
 * every polling_timeout sends the master a SubnGet(SMInfo) on the
 * directed route of the standby's last discovery; a poll whose answer has
 * not come back by the next tick is unanswered. */
struct sm_poll {
  struct sim_ev ev; /* a global event: a takeover moves the SM */
  uint16_t path[SIM_SMP_HOPS];
  uint8_t nhops;
  bool have_path;  /* the standby knows a route to the master */
  bool out;        /* a poll was sent at the last tick ... */
  bool answered;   /* ... and its answer came back */
  uint32_t tid;    /* the outstanding poll's (its answer carries it) */
  uint32_t missed; /* polls in a row without an answer */
};

struct sim_sm {
  uint32_t nic, standby; /* the master's NIC; the standby's or UINT32_MAX */
  struct sm_poll poll;
  uint32_t nlids, nsw_lid0;
  uint64_t smps;
  sim_time_t discover, compute, program;
  /* One-way SMP latency on an idle fabric from the SM to each node along
   * the route the SM reaches it by (SIM_NEVER: not reached), that route
   * (the previous node, its port toward it, hops). */
  sim_time_t *lat;
  uint32_t *up_node;
  uint16_t *up_port;
  uint8_t *hops;
  /* The LFTs as the SM programmed them (nswitches x nlids), and the
   * tables its sweeps computed (kept: LFT Sets in flight copy from them);
   * want, the latest. */
  uint16_t *known, *want;
  uint16_t **tabs;
  uint32_t ntabs;
  /* The sweep running: its phase, the changes it covers (fail.c's
   * bits), how it was started, whether it programs every block; a sweep
   * asked for while it runs (again). Its times, and the closed forms of
   * its SMPs' sums. */
  struct sim_ev ev;
  enum sm_phase phase;
  uint32_t covers;
  enum sim_noticed how, again_how;
  bool all, again, again_all;
  sim_time_t t0, t_disc, t_comp, t_prog0, comp_end;
  sim_time_t busy_disc, busy_prog;
  uint64_t n_disc, n_prog;
  struct smp_req *rq; /* SMPs waiting for a slot: a FIFO */
  uint32_t rq_head, rq_n, rq_cap;
  struct smp_slot *slot; /* max_wire_smps of them */
  uint32_t nslot, out, gen;
  struct sim_sm_info info;
};

static inline uint32_t node_ix(const struct sim *s, const struct sim_node *n) {
  return n->kind == SIM_NODE_SWITCH ? n->id : s->nswitches + n->id;
}

static inline struct sim_node *node_at(struct sim *s, uint32_t i) {
  return i < s->nswitches ? &s->sws[i].n : &s->nics[i - s->nswitches].n;
}

/* Discovery: breadth first from the master SM's NIC, each node asked for
 * NodeInfo, SwitchInfo (switches) and PortInfo per port; the SM keeps
 * max_wire_smps outstanding, so the sweep lasts the sum of the round trips
 * over that. Fills lat[] for programming later. */
static int discover(struct sim *s, struct sim_sm *sm) {
  uint32_t n = s->nswitches + s->nnics;
  uint32_t *q = malloc(sizeof(*q) * n);
  sm->lat = malloc(sizeof(*sm->lat) * n);
  if (!q || !sm->lat) {
    free(q);
    return -1;
  }
  for (uint32_t i = 0; i < n; i++)
    sm->lat[i] = SIM_NEVER;
  const struct sim_sm_cfg *c = &s->cfg.ib.sm;
  uint32_t head = 0, tail = 0, root = node_ix(s, &s->nics[sm->nic].n);
  sm->lat[root] = 0;
  q[tail++] = root;
  sim_time_t busy = 0;
  uint64_t smps = 0;
  while (head < tail) {
    struct sim_node *nd = node_at(s, q[head++]);
    sim_time_t l = sm->lat[node_ix(s, nd)];
    uint32_t k = 1 + (nd->kind == SIM_NODE_SWITCH) + nd->nports;
    smps += k;
    busy += k * (2 * l + c->smp_proc);
    for (uint16_t j = 0; j < nd->nports; j++) {
      struct sim_port *p = &nd->ports[j];
      if (!p->peer || p->down)
        continue;
      uint32_t o = node_ix(s, p->peer->node);
      if (sm->lat[o] != SIM_NEVER)
        continue;
      sm->lat[o] = l + p->delay + sim_ser_time(SMP_WIRE, p->rate_bps);
      q[tail++] = o;
    }
  }
  free(q);
  sm->smps += smps;
  sm->discover = busy / (c->max_wire_smps ? c->max_wire_smps : 1);
  return 0;
}

static void assign_lids(struct sim *s, struct sim_sm *sm) {
  uint32_t step = s->lmc_mask + 1;
  /* LID 0 is reserved; a NIC's LIDs are aligned on 2^lmc. */
  for (uint32_t i = 0; i < s->nnics; i++)
    s->nic_lid[i] = step * (i + 1);
  sm->nsw_lid0 = step * (s->nnics + 1);
  sm->nlids = sm->nsw_lid0 + s->nswitches;
}

/* Fat-tree aware (OpenSM's ftree on a full fat-tree): down by position,
 * up by the destination's LID index mod the up ports (D-mod-k), so the
 * LIDs of a NIC take different up ports and every up port carries an
 * equal share of destinations. */
static void route_ftree(struct sim *s, struct sim_switch *sw, uint16_t *row) {
  uint32_t step = s->lmc_mask + 1;
  for (uint32_t d = 0; d < s->nnics; d++)
    for (uint32_t o = 0; o < step; o++) {
      uint16_t port;
      if (d >= sw->lo && d < sw->hi)
        port = (uint16_t)((d - sw->lo) / sw->span);
      else if (sw->n_up)
        port = (uint16_t)(sw->n_down + (d * step + o) / sw->up_div % sw->n_up);
      else
        port = SIM_LFT_NONE;
      row[s->nic_lid[d] + o] = port;
    }
}

/* Min-hop: hop counts from every destination's switch by breadth-first
 * search; each switch takes, among the ports one hop closer, the one with
 * the fewest routes so far (OpenSM's minhop balancing). */
static int route_minhop(struct sim *s, uint16_t *tab, uint32_t nl) {
  uint32_t nsw = s->nswitches, step = s->lmc_mask + 1;
  uint32_t *dist = malloc(sizeof(*dist) * nsw);
  uint32_t *q = malloc(sizeof(*q) * nsw);
  uint32_t *use = calloc(s->nports ? s->nports : 1, sizeof(*use));
  if (!dist || !q || !use) {
    free(dist);
    free(q);
    free(use);
    return -1;
  }
  for (uint32_t d = 0; d < s->nnics; d++) {
    struct sim_port *np = &s->nics[d].port;
    for (uint32_t i = 0; i < nsw; i++)
      dist[i] = UINT32_MAX;
    uint32_t head = 0, tail = 0;
    if (np->peer && np->peer->node->kind == SIM_NODE_SWITCH) {
      dist[np->peer->node->id] = 0;
      q[tail++] = np->peer->node->id;
    }
    while (head < tail) {
      struct sim_switch *sw = &s->sws[q[head++]];
      for (uint16_t j = 0; j < sw->n.nports; j++) {
        struct sim_port *p = &sw->n.ports[j];
        if (!p->peer || p->down || p->peer->node->kind != SIM_NODE_SWITCH)
          continue;
        uint32_t o = p->peer->node->id;
        if (dist[o] == UINT32_MAX) {
          dist[o] = dist[sw->n.id] + 1;
          q[tail++] = o;
        }
      }
    }
    for (uint32_t i = 0; i < nsw; i++) {
      struct sim_switch *sw = &s->sws[i];
      for (uint32_t o = 0; o < step; o++) {
        uint16_t best = SIM_LFT_NONE;
        for (uint16_t j = 0; j < sw->n.nports && dist[i] != UINT32_MAX; j++) {
          struct sim_port *p = &sw->n.ports[j];
          if (!p->peer || p->down)
            continue;
          const struct sim_node *pn = p->peer->node;
          bool closer = dist[i] == 0 ? pn->kind == SIM_NODE_NIC && pn->id == d
                                     : pn->kind == SIM_NODE_SWITCH &&
                                           dist[pn->id] + 1 == dist[i];
          if (closer &&
              (best == SIM_LFT_NONE || use[&sw->n.ports[j] - s->ports] <
                                           use[&sw->n.ports[best] - s->ports]))
            best = j;
        }
        if (best != SIM_LFT_NONE)
          use[&sw->n.ports[best] - s->ports]++;
        tab[(size_t)i * nl + s->nic_lid[d] + o] = best;
      }
    }
  }
  free(dist);
  free(q);
  free(use);
  return 0;
}

/* Up/down (OpenSM's updn): switches are ranked by their hop distance from
 * the switches that NICs hang off (those 0, the tier above 1, ...), ties
 * by index, and a link leads up towards the higher (rank, index). A route
 * is up hops, then down hops only, so no channel dependency turns from
 * down to up and the channel dependency graph has no cycle, on any
 * topology and after any failure. A switch that reaches the destination
 * going down only goes down (the fewest such hops); otherwise up, to the
 * neighbour with the fewest hops left; ties go to the port with the
 * fewest routes so far, as minhop. */
struct updn {
  uint32_t *level, *dd, *r, *q, *q2, *use;
};

static bool updn_up(const struct updn *u, uint32_t from, uint32_t to) {
  return u->level[to] != u->level[from] ? u->level[to] > u->level[from]
                                        : to > from;
}

/* The switch a port leads to, or UINT32_MAX (a NIC, nothing, down). */
static uint32_t sw_peer(const struct sim_port *p) {
  if (!p->peer || p->down || p->peer->node->kind != SIM_NODE_SWITCH)
    return UINT32_MAX;
  return p->peer->node->id;
}

static void updn_levels(struct sim *s, struct updn *u) {
  uint32_t nsw = s->nswitches, head = 0, tail = 0;
  for (uint32_t i = 0; i < nsw; i++)
    u->level[i] = UINT32_MAX;
  for (uint32_t d = 0; d < s->nnics; d++) {
    uint32_t l = sw_peer(&s->nics[d].port);
    if (l != UINT32_MAX && u->level[l] == UINT32_MAX) {
      u->level[l] = 0;
      u->q[tail++] = l;
    }
  }
  while (head < tail) {
    struct sim_switch *sw = &s->sws[u->q[head++]];
    for (uint16_t j = 0; j < sw->n.nports; j++) {
      uint32_t o = sw_peer(&sw->n.ports[j]);
      if (o != UINT32_MAX && u->level[o] == UINT32_MAX) {
        u->level[o] = u->level[sw->n.id] + 1;
        u->q[tail++] = o;
      }
    }
  }
}

/* Hops to the NIC d's switch leaf: dd going down only, r the route's
 * (dd where there is one, else up first). Two breadth-first queues merged
 * by distance: q the down-only search, q2 the switches that go up. */
static void updn_dist(struct sim *s, struct updn *u, uint32_t leaf) {
  uint32_t nsw = s->nswitches;
  for (uint32_t i = 0; i < nsw; i++)
    u->dd[i] = u->r[i] = UINT32_MAX;
  uint32_t h = 0, t = 0, h2 = 0, t2 = 0;
  u->dd[leaf] = u->r[leaf] = 0;
  u->q[t++] = leaf;
  while (h < t) { /* down-only: x reaches y going down when y is below x */
    struct sim_switch *sw = &s->sws[u->q[h++]];
    for (uint16_t j = 0; j < sw->n.nports; j++) {
      uint32_t x = sw_peer(&sw->n.ports[j]);
      if (x != UINT32_MAX && u->dd[x] == UINT32_MAX &&
          updn_up(u, sw->n.id, x)) {
        u->dd[x] = u->r[x] = u->dd[sw->n.id] + 1;
        u->q[t++] = x;
      }
    }
  }
  h = 0;
  while (h < t || h2 < t2) {
    uint32_t y;
    if (h2 >= t2 || (h < t && u->r[u->q[h]] <= u->r[u->q2[h2]]))
      y = u->q[h++];
    else
      y = u->q2[h2++];
    struct sim_switch *sw = &s->sws[y];
    for (uint16_t j = 0; j < sw->n.nports; j++) {
      uint32_t x = sw_peer(&sw->n.ports[j]);
      /* x goes up to y */
      if (x != UINT32_MAX && u->r[x] == UINT32_MAX && updn_up(u, x, y)) {
        u->r[x] = u->r[y] + 1;
        u->q2[t2++] = x;
      }
    }
  }
}

static int route_updn(struct sim *s, uint16_t *tab, uint32_t nl) {
  uint32_t nsw = s->nswitches, step = s->lmc_mask + 1;
  struct updn u = {malloc(sizeof(uint32_t) * nsw),
                   malloc(sizeof(uint32_t) * nsw),
                   malloc(sizeof(uint32_t) * nsw),
                   malloc(sizeof(uint32_t) * nsw),
                   malloc(sizeof(uint32_t) * nsw),
                   calloc(s->nports ? s->nports : 1, sizeof(uint32_t))};
  int rc = -1;
  if (!u.level || !u.dd || !u.r || !u.q || !u.q2 || !u.use)
    goto out;
  updn_levels(s, &u);
  for (uint32_t d = 0; d < s->nnics; d++) {
    uint32_t leaf = sw_peer(&s->nics[d].port);
    if (leaf == UINT32_MAX)
      continue;
    updn_dist(s, &u, leaf);
    for (uint32_t i = 0; i < nsw; i++) {
      struct sim_switch *sw = &s->sws[i];
      bool down = u.dd[i] != UINT32_MAX;
      for (uint32_t o = 0; o < step; o++) {
        uint16_t best = SIM_LFT_NONE;
        for (uint16_t j = 0; j < sw->n.nports && u.r[i] != UINT32_MAX; j++) {
          struct sim_port *p = &sw->n.ports[j];
          if (!p->peer || p->down)
            continue;
          const struct sim_node *pn = p->peer->node;
          bool next;
          if (u.r[i] == 0)
            next = pn->kind == SIM_NODE_NIC && pn->id == d;
          else if (pn->kind != SIM_NODE_SWITCH)
            next = false;
          else if (down)
            next = !updn_up(&u, i, pn->id) && u.dd[pn->id] + 1 == u.dd[i];
          else
            next = updn_up(&u, i, pn->id) && u.r[pn->id] + 1 == u.r[i];
          if (next &&
              (best == SIM_LFT_NONE ||
               u.use[p - s->ports] < u.use[&sw->n.ports[best] - s->ports]))
            best = j;
        }
        if (best != SIM_LFT_NONE)
          u.use[&sw->n.ports[best] - s->ports]++;
        tab[(size_t)i * nl + s->nic_lid[d] + o] = best;
      }
    }
  }
  rc = 0;
out:
  free(u.level);
  free(u.dd);
  free(u.r);
  free(u.q);
  free(u.q2);
  free(u.use);
  return rc;
}

/* The engine the SM recomputes with after a change: up/down stays
 * up/down; ftree falls back to minhop, as OpenSM's does on a fabric that
 * is no longer a full fat-tree. */
static int route_again(struct sim *s, uint16_t *tab, uint32_t nl) {
  memset(tab, 0xFF, sizeof(uint16_t) * nl * s->nswitches);
  return s->cfg.ib.sm.engine == SIM_SM_UPDN ? route_updn(s, tab, nl)
                                            : route_minhop(s, tab, nl);
}

static const char *const engine_names[] = {"ftree", "minhop", "updn"};

const char *sim_sm_engine_name(enum sim_sm_engine e) {
  return (unsigned)e < sizeof engine_names / sizeof engine_names[0]
             ? engine_names[e]
             : "?";
}

uint32_t sim_sm_nlids(const struct sim *s) {
  return s->sm ? s->sm->nlids : 0;
}

uint32_t sim_sm_master(const struct sim *s) {
  return s->sm ? s->sm->nic : 0;
}

uint32_t sim_sm_standby(const struct sim *s) {
  return s->sm ? s->sm->standby : UINT32_MAX;
}

bool sim_sm_master_down(const struct sim *s) {
  return s->sm && s->nics[s->sm->nic].port.down;
}

/* ---- sweeps as packets ---- */

struct sim_ev *sim_sm_ev(struct sim *s) { return &s->sm->ev; }

/* The SM's timer: the computation's end, or the earliest SMP deadline. */
static void sm_arm(struct sim *s, struct sim_sm *sm) {
  sim_time_t t = sm->phase == SM_COMPUTE ? sm->comp_end : SIM_NEVER;
  for (uint32_t i = 0; i < sm->nslot; i++)
    if (sm->slot[i].busy && sm->slot[i].deadline < t)
      t = sm->slot[i].deadline;
  if (t == SIM_NEVER)
    sim_ev_cancel(&sm->ev);
  else if (sm->ev.at != t)
    sim_schedule(s, &sm->ev, t);
}

static int rq_push(struct sim_sm *sm, uint32_t node, uint8_t attr,
                   uint32_t arg) {
  if (sm->rq_n == sm->rq_cap) {
    uint32_t cap = sm->rq_cap ? 2 * sm->rq_cap : 256;
    struct smp_req *q = realloc(sm->rq, sizeof(*q) * cap);
    if (!q)
      return -1;
    sm->rq = q;
    sm->rq_cap = cap;
  }
  sm->rq[sm->rq_n++] = (struct smp_req){node, arg, attr};
  return 0;
}

/* Sends slot's SMP on the directed route to its node. */
static void smp_send(struct sim *s, struct sim_sm *sm, struct smp_slot *sl) {
  struct sim_pkt *p = sim_pkt_alloc(s);
  sl->deadline = s->now + s->cfg.ib.sm.smp_timeout;
  sm->info.sweep_smps++;
  if (!p)
    return; /* no descriptor: as if lost, it times out */
  *p = (struct sim_pkt){.size = SMP_WIRE,
                        .src = sm->nic,
                        .flow = sl->tid,
                        .kind = SIM_PKT_SMP};
  struct sim_smp *m = sim_smp(p);
  memset(m, 0, sizeof(*m));
  m->attr = sl->r.attr;
  m->arg = sl->r.arg;
  m->nhops = sm->hops[sl->r.node];
  for (uint32_t n = sl->r.node, h = m->nhops; h; n = sm->up_node[n])
    m->path[--h] = sm->up_port[n];
  if (m->attr == SIM_SMP_LFT_SET)
    m->lft = sm->want + (size_t)sl->r.node * sm->nlids;
  struct sim_nic *nic = &s->nics[sm->nic];
  if (!m->nhops)
    sim_mad_sma_put(s, &nic->n, p);
  else
    sim_mad_nic_send(s, nic, p);
}

static void phase_done(struct sim *s, struct sim_sm *sm);

/* Fills the free slots from the FIFO; a phase with nothing left ends. */
static void pump(struct sim *s, struct sim_sm *sm) {
  const struct sim_sm_cfg *c = &s->cfg.ib.sm;
  for (uint32_t i = 0; i < sm->nslot && sm->rq_head < sm->rq_n; i++) {
    struct smp_slot *sl = &sm->slot[i];
    if (sl->busy)
      continue;
    *sl = (struct smp_slot){.r = sm->rq[sm->rq_head++],
                            .tid = sm->gen * sm->nslot + i,
                            .busy = true};
    sm->out++;
    sim_time_t rt = 2 * sm->lat[sl->r.node] + c->smp_proc;
    if (sl->r.attr == SIM_SMP_LFT_SET) {
      sm->busy_prog += rt;
      sm->n_prog++;
    } else {
      sm->busy_disc += rt;
      sm->n_disc++;
    }
    smp_send(s, sm, sl);
  }
  if (!sm->out && sm->rq_head == sm->rq_n &&
      (sm->phase == SM_DISCOVER || sm->phase == SM_PROGRAM))
    phase_done(s, sm);
}

static void sweep_reset(struct sim_sm *sm) {
  uint32_t n = sm->nslot;
  for (uint32_t i = 0; i < n; i++)
    sm->slot[i].busy = false;
  sm->out = 0;
  sm->rq_head = sm->rq_n = 0;
  sm->gen++; /* answers still on their way match no slot */
}

static void start_sweep(struct sim *s, struct sim_sm *sm, enum sim_noticed how,
                        bool all) {
  uint32_t n = s->nswitches + s->nnics, root = node_ix(s, &s->nics[sm->nic].n);
  sweep_reset(sm);
  sm->covers = sim_fail_sweep_begin(s, how);
  sm->how = how;
  sm->all = all || s->cfg.routing != SIM_ROUTE_STATIC;
  sm->phase = SM_DISCOVER;
  sm->t0 = s->now;
  sm->busy_disc = sm->busy_prog = 0;
  sm->n_disc = sm->n_prog = 0;
  for (uint32_t i = 0; i < n; i++)
    sm->lat[i] = SIM_NEVER;
  sm->lat[root] = 0;
  sm->hops[root] = 0;
  if (rq_push(sm, root, SIM_SMP_NODE_INFO, 0))
    fprintf(stderr, "uroce sim: out of memory in the SM\n");
  pump(s, sm);
  sm_arm(s, sm);
}

void sim_sm_sweep(struct sim *s, enum sim_noticed how, bool all) {
  struct sim_sm *sm = s->sm;
  if (sm->phase != SM_IDLE) {
    if (!sm->again || how < sm->again_how)
      sm->again_how = how;
    sm->again = true;
    sm->again_all |= all;
    return;
  }
  start_sweep(s, sm, how, all);
}

void sim_sm_abort(struct sim *s) {
  struct sim_sm *sm = s->sm;
  if (sm->phase == SM_IDLE)
    return;
  sweep_reset(sm);
  sm->phase = SM_IDLE;
  sim_ev_cancel(&sm->ev);
  sim_fail_sweep_end(s, sm->covers, 0, 0, 0, false);
  if (sm->again)
    sm->again = false;
}

/* Discovery is over: the routes over the links up, then the computation's
 * timer. A switch the sweep did not reach keeps its LFT: nobody can
 * program it. */
static void compute(struct sim *s, struct sim_sm *sm) {
  uint32_t nl = sm->nlids, nsw = s->nswitches;
  uint16_t *tab = malloc(sizeof(uint16_t) * nl * nsw);
  uint16_t **tabs = realloc(sm->tabs, sizeof(*tabs) * (sm->ntabs + 1));
  if (tabs)
    sm->tabs = tabs;
  if (!tab || !tabs || route_again(s, tab, nl)) {
    fprintf(stderr, "uroce sim: out of memory in the SM; routes stay\n");
    free(tab);
    tab = 0;
  } else {
    sm->tabs[sm->ntabs++] = tab;
    for (uint32_t i = 0; i < nsw; i++)
      if (sm->lat[i] == SIM_NEVER)
        memcpy(tab + (size_t)i * nl, sm->known + (size_t)i * nl,
               sizeof(uint16_t) * nl);
  }
  sm->want = tab ? tab : sm->known;
  sm->t_disc = s->now - sm->t0;
  sm->t_comp = (sim_time_t)nsw * (s->nnics * (s->lmc_mask + 1)) *
               s->cfg.ib.sm.route_time;
  sm->phase = SM_COMPUTE;
  sm->comp_end = s->now + sm->t_comp;
}

/* The computation is over: an LFT Set for every block that changed
 * (every block with all) of every switch the sweep reached. */
static void program_start(struct sim *s, struct sim_sm *sm) {
  uint32_t nl = sm->nlids;
  sm->phase = SM_PROGRAM;
  sm->t_prog0 = s->now;
  for (uint32_t i = 0; i < s->nswitches; i++) {
    if (sm->lat[i] == SIM_NEVER)
      continue;
    const uint16_t *nw = sm->want + (size_t)i * nl,
                   *od = sm->known + (size_t)i * nl;
    for (uint32_t b = 0; b < nl; b += LFT_BLOCK) {
      uint32_t e = b + LFT_BLOCK < nl ? b + LFT_BLOCK : nl;
      if ((sm->all || memcmp(nw + b, od + b, (e - b) * sizeof(uint16_t))) &&
          rq_push(sm, i, SIM_SMP_LFT_SET, b / LFT_BLOCK))
        fprintf(stderr, "uroce sim: out of memory in the SM\n");
    }
  }
  pump(s, sm);
}

static void phase_done(struct sim *s, struct sim_sm *sm) {
  const struct sim_sm_cfg *c = &s->cfg.ib.sm;
  uint32_t w = c->max_wire_smps ? c->max_wire_smps : 1;
  if (sm->phase == SM_DISCOVER) {
    compute(s, sm);
    return;
  }
  sim_time_t prog = s->now - sm->t_prog0;
  sm->phase = SM_IDLE;
  sm->info.sweeps++;
  sm->info.last_discover = sm->t_disc;
  sm->info.last_program = prog;
  sm->info.closed_discover = sm->busy_disc / w;
  sm->info.closed_program = sm->busy_prog / w;
  sm->info.last_discover_smps = sm->n_disc;
  sm->info.last_program_smps = sm->n_prog;
  sim_fail_sweep_end(s, sm->covers, sm->t_disc, sm->t_comp, prog, true);
  if (sm->again) {
    sm->again = false;
    bool all = sm->again_all;
    sm->again_all = false;
    if (s->fail && sim_fail_unseen(s))
      start_sweep(s, sm, sm->again_how, all);
  }
}

/* What an answer tells the SM during discovery: a node's kind and ports
 * (NodeInfo), whether a port is up and where it leads (PortInfo). */
static void learn(struct sim *s, struct sim_sm *sm, const struct smp_req *r,
                  const struct sim_smp *m) {
  struct sim_node *nd = node_at(s, r->node);
  if (r->attr == SIM_SMP_NODE_INFO) {
    if (nd->kind == SIM_NODE_SWITCH)
      rq_push(sm, r->node, SIM_SMP_SWITCH_INFO, 0);
    for (uint16_t j = 0; j < nd->nports; j++)
      rq_push(sm, r->node, SIM_SMP_PORT_INFO, j);
    return;
  }
  if (r->attr != SIM_SMP_PORT_INFO || !m->port_up)
    return;
  struct sim_port *p = &nd->ports[r->arg];
  uint32_t o = node_ix(s, p->peer->node);
  if (sm->lat[o] != SIM_NEVER || sm->hops[r->node] + 1 > SIM_SMP_HOPS)
    return;
  sm->lat[o] = sm->lat[r->node] + p->delay + sim_ser_time(SMP_WIRE, p->rate_bps);
  sm->up_node[o] = r->node;
  sm->up_port[o] = (uint16_t)r->arg;
  sm->hops[o] = (uint8_t)(sm->hops[r->node] + 1);
  rq_push(sm, o, SIM_SMP_NODE_INFO, 0);
}

void sim_sm_answer(struct sim *s, struct sim_pkt *p) {
  struct sim_sm *sm = s->sm;
  uint32_t i = p->flow % sm->nslot;
  struct smp_slot *sl = &sm->slot[i];
  const struct sim_smp *m = sim_smp(p);
  if (sm->phase == SM_IDLE || !sl->busy || sl->tid != p->flow) {
    sim_pkt_free(s, p); /* a late answer to an SMP sent again */
    return;
  }
  sl->busy = false;
  sm->out--;
  if (sl->r.attr == SIM_SMP_LFT_SET) {
    size_t o = (size_t)sl->r.node * sm->nlids + sl->r.arg * LFT_BLOCK;
    uint32_t e = (sl->r.arg + 1) * LFT_BLOCK;
    e = e < sm->nlids ? e : sm->nlids;
    memcpy(sm->known + o, sm->want + o,
           (e - sl->r.arg * LFT_BLOCK) * sizeof(uint16_t));
  } else {
    learn(s, sm, &sl->r, m);
  }
  sim_pkt_free(s, p);
  pump(s, sm);
  sm_arm(s, sm);
}

void sim_sm_trap_rx(struct sim *s, struct sim_pkt *p) {
  sim_pkt_free(s, p);
  s->sm->info.traps++;
  if (s->fail && sim_fail_unseen(s))
    sim_sm_sweep(s, SIM_NOTICED_TRAP, false);
}

/* The SM's timer: the computation ended, or SMPs went unanswered (sent
 * again, or given up: a node not reached, a block not programmed). */
void sim_sm_event(struct sim *s) {
  struct sim_sm *sm = s->sm;
  const struct sim_sm_cfg *c = &s->cfg.ib.sm;
  if (sm->phase == SM_COMPUTE && sm->comp_end <= s->now) {
    program_start(s, sm);
    sm_arm(s, sm);
    return;
  }
  for (uint32_t i = 0; i < sm->nslot; i++) {
    struct smp_slot *sl = &sm->slot[i];
    if (!sl->busy || sl->deadline > s->now)
      continue;
    sm->info.smp_timeouts++;
    if (sl->tries < c->smp_retries) {
      sl->tries++;
      sl->tid += sm->nslot * 0x10000u; /* the late answer matches nothing */
      smp_send(s, sm, sl);
    } else {
      sl->busy = false;
      sm->out--;
    }
  }
  pump(s, sm);
  sm_arm(s, sm);
}

/* Programming: every switch gets its LFT blocks, max_wire_smps SMPs in
 * flight, each a round trip to the switch and an SMA's processing. */
static void program(struct sim *s, struct sim_sm *sm) {
  const struct sim_sm_cfg *c = &s->cfg.ib.sm;
  uint32_t blocks = (sm->nlids + LFT_BLOCK - 1) / LFT_BLOCK;
  sim_time_t busy = 0;
  for (uint32_t i = 0; i < s->nswitches; i++)
    busy += blocks * (2 * sm->lat[i] + c->smp_proc);
  sm->smps += (uint64_t)blocks * s->nswitches;
  sm->program = busy / (c->max_wire_smps ? c->max_wire_smps : 1);
}

/* ---- the standby's SMInfo polls ---- */

/* A directed route over the links up from NIC `from` to NIC `to`,
 * breadth first by port order as discovery goes (the standby's own
 * discovery); false if there is none within SIM_SMP_HOPS. */
static bool dr_route(struct sim *s, uint32_t from, uint32_t to, uint16_t *path,
                     uint8_t *nhops) {
  uint32_t n = s->nswitches + s->nnics;
  uint32_t *prev = malloc(sizeof(*prev) * n), *q = malloc(sizeof(*q) * n);
  uint16_t *via = malloc(sizeof(*via) * n);
  uint8_t *hop = malloc(n);
  bool found = false;
  if (!prev || !q || !via || !hop)
    goto out;
  for (uint32_t i = 0; i < n; i++)
    prev[i] = UINT32_MAX;
  uint32_t root = node_ix(s, &s->nics[from].n),
           dst = node_ix(s, &s->nics[to].n);
  uint32_t head = 0, tail = 0;
  prev[root] = root;
  hop[root] = 0;
  q[tail++] = root;
  while (head < tail && prev[dst] == UINT32_MAX) {
    uint32_t x = q[head++];
    struct sim_node *nd = node_at(s, x);
    if ((x != root && nd->kind == SIM_NODE_NIC) || hop[x] == SIM_SMP_HOPS)
      continue; /* a route goes on through switches only */
    for (uint16_t j = 0; j < nd->nports; j++) {
      struct sim_port *p = &nd->ports[j];
      if (!p->peer || p->down)
        continue;
      uint32_t o = node_ix(s, p->peer->node);
      if (prev[o] != UINT32_MAX)
        continue;
      prev[o] = x;
      via[o] = j;
      hop[o] = (uint8_t)(hop[x] + 1);
      q[tail++] = o;
    }
  }
  if ((found = prev[dst] != UINT32_MAX)) {
    *nhops = hop[dst];
    for (uint32_t x = dst; x != root; x = prev[x])
      path[hop[x] - 1] = via[x];
  }
out:
  free(prev);
  free(q);
  free(via);
  free(hop);
  return found;
}

static bool poll_route(struct sim *s, struct sim_sm *sm) {
  struct sm_poll *pl = &sm->poll;
  pl->have_path = dr_route(s, sm->standby, sm->nic, pl->path, &pl->nhops);
  return pl->have_path;
}

bool sim_sm_on(const struct sim *s, uint32_t nic) {
  return s->sm && (s->sm->nic == nic || s->sm->standby == nic);
}

/* The standby becomes the master: the old one, should it come back, is
 * its standby. The SM's timer moves to the new master's partition (this
 * runs in a global event). A sweep the old master ran stops; the new one
 * sweeps the fabric and programs every block (it knows none) if some
 * change is not seen yet. */
static void take_over(struct sim *s, struct sim_sm *sm) {
  uint32_t old = sm->nic;
  sim_sm_abort(s);
  sm->ev.part = s->nics[sm->standby].n.part;
  sm->nic = sm->standby;
  sm->standby = old;
  sm->info.master_nic = sm->nic;
  sm->info.took_over = s->now;
  sm->info.takeovers++;
  poll_route(s, sm); /* the old master's, to the new one */
  if (s->fail && sim_fail_unseen(s))
    sim_sm_sweep(s, SIM_NOTICED_STANDBY, true);
}

/* A SubnGet(SMInfo) from the standby's NIC to the master's on the
 * directed route; with no route it is as good as lost. */
static void poll_send(struct sim *s, struct sim_sm *sm) {
  struct sm_poll *pl = &sm->poll;
  pl->out = true;
  pl->answered = false;
  pl->tid++;
  sm->info.standby_polls++;
  struct sim_pkt *p = pl->have_path ? sim_pkt_alloc(s) : 0;
  if (!p)
    return;
  *p = (struct sim_pkt){.size = SMP_WIRE,
                        .src = sm->standby,
                        .dst = sm->nic,
                        .flow = pl->tid,
                        .kind = SIM_PKT_SMP};
  struct sim_smp *m = sim_smp(p);
  memset(m, 0, sizeof(*m));
  m->attr = SIM_SMP_SM_INFO;
  m->nhops = pl->nhops;
  memcpy(m->path, pl->path, sizeof(m->path));
  sim_mad_nic_send(s, &s->nics[sm->standby], p);
}

static bool workload_running(const struct sim *s) {
  return (s->coll || s->nflows) && !sim_run_done(s);
}

/* The standby's tick (OpenSM's osm_sm_state_mgr_polling_callback): the
 * last poll unanswered counts one more in a row, an answer clears the
 * count; at polling_retries in a row the standby goes discovering, as
 * OpenSM's does: it takes over if the master cannot be reached, else it
 * polls on the route it found. A standby whose own link is down polls
 * nothing and starts afresh when it is back. The timer runs while there
 * is a workload (sim_run arms it again). */
void sim_sm_poll_event(struct sim *s) {
  struct sim_sm *sm = s->sm;
  struct sm_poll *pl = &sm->poll;
  const struct sim_sm_cfg *c = &s->cfg.ib.sm;
  if (s->nics[sm->standby].port.down) {
    pl->out = pl->have_path = false;
    pl->missed = 0;
  } else {
    if (pl->out && pl->answered) {
      pl->missed = 0;
    } else if (pl->out) {
      pl->missed++;
      sm->info.standby_polls_unanswered++;
    }
    pl->out = false;
    bool took = false;
    if (pl->missed >= c->polling_retries) {
      pl->missed = 0;
      if ((took = !poll_route(s, sm)))
        take_over(s, sm);
    } else if (!pl->have_path) {
      poll_route(s, sm); /* back up: it discovers the master again */
    }
    if (!took)
      poll_send(s, sm);
  }
  if (workload_running(s))
    sim_schedule(s, &pl->ev, s->now + c->polling_timeout);
}

void sim_sm_poll_arm(struct sim *s) {
  struct sim_sm *sm = s->sm;
  sim_time_t t = s->cfg.ib.sm.polling_timeout;
  if (!sm || sm->standby == UINT32_MAX || !t || sm->poll.ev.at != SIM_NEVER ||
      !workload_running(s))
    return;
  sm->poll.out = false; /* the timer stopped: nothing is outstanding */
  sm->poll.missed = 0;
  sim_schedule(s, &sm->poll.ev, (s->now + t - 1) / t * t);
}

/* The master's answer is back at the standby's NIC: it counts if it
 * answers the poll outstanding. */
void sim_sm_poll_answer(struct sim *s, struct sim_nic *nic, struct sim_pkt *p) {
  struct sim_sm *sm = s->sm;
  struct sm_poll *pl = &sm->poll;
  if (nic->n.id == sm->standby && p->dst == sm->nic && pl->out &&
      p->flow == pl->tid)
    pl->answered = true;
  sim_pkt_free(s, p);
}

/* ---- checks ---- */

/* Channels are switch-to-switch egress ports (index in s->ports); the
 * dependency c1 -> c2 exists when some DLID leaves switch A by c1 into
 * switch B and leaves B by c2. Edges of c1 are a bitset over B's ports. */
struct cdg {
  uint64_t *off; /* bit offset of each channel's edges */
  uint64_t *bits;
};

static bool is_chan(const struct sim_port *p) {
  return p->node->kind == SIM_NODE_SWITCH && p->peer &&
         p->peer->node->kind == SIM_NODE_SWITCH;
}

static int cdg_build(struct sim *s, struct cdg *g, uint32_t nlids,
                     uint64_t *nchan, uint64_t *nedge) {
  uint32_t np = s->nports;
  g->off = malloc(sizeof(*g->off) * (np + 1));
  if (!g->off)
    return -1;
  uint64_t o = 0;
  *nchan = 0;
  for (uint32_t i = 0; i < np; i++) {
    g->off[i] = o;
    if (is_chan(&s->ports[i])) {
      o += s->ports[i].peer->node->nports;
      ++*nchan;
    }
  }
  g->off[np] = o;
  g->bits = calloc((o + 63) / 64 + 1, sizeof(uint64_t));
  if (!g->bits)
    return -1;
  *nedge = 0;
  for (uint32_t i = 0; i < np; i++) {
    struct sim_port *p = &s->ports[i];
    if (!is_chan(p))
      continue;
    struct sim_switch *a = (struct sim_switch *)p->node;
    struct sim_switch *b = (struct sim_switch *)p->peer->node;
    for (uint32_t lid = 0; lid < nlids; lid++) {
      if (a->lft[lid] != p->idx)
        continue;
      uint16_t r = b->lft[lid];
      if (r == SIM_LFT_NONE || !is_chan(&b->n.ports[r]))
        continue;
      uint64_t bit = g->off[i] + r;
      if (!(g->bits[bit / 64] >> (bit % 64) & 1)) {
        g->bits[bit / 64] |= 1ull << (bit % 64);
        ++*nedge;
      }
    }
  }
  return 0;
}

/* Depth-first search with an explicit stack: a grey channel reached again
 * closes a cycle. */
static int cdg_acyclic(struct sim *s, const struct cdg *g) {
  uint32_t np = s->nports;
  uint8_t *col = calloc(np, 1);
  uint32_t *stk = malloc(sizeof(*stk) * np);
  uint16_t *nxt = malloc(sizeof(*nxt) * np);
  int rc = 1;
  if (!col || !stk || !nxt) {
    rc = -1;
    goto out;
  }
  for (uint32_t r = 0; r < np && rc == 1; r++) {
    if (col[r] || !is_chan(&s->ports[r]))
      continue;
    uint32_t sp = 0;
    stk[sp++] = r;
    nxt[r] = 0;
    col[r] = 1;
    while (sp && rc == 1) {
      uint32_t c = stk[sp - 1];
      struct sim_node *b = s->ports[c].peer->node;
      if (nxt[c] >= b->nports) {
        col[c] = 2;
        sp--;
        continue;
      }
      uint16_t j = nxt[c]++;
      uint64_t bit = g->off[c] + j;
      if (!(g->bits[bit / 64] >> (bit % 64) & 1))
        continue;
      uint32_t d = (uint32_t)(&b->ports[j] - s->ports);
      if (col[d] == 1)
        rc = 0;
      else if (!col[d]) {
        col[d] = 1;
        nxt[d] = 0;
        stk[sp++] = d;
      }
    }
  }
out:
  free(col);
  free(stk);
  free(nxt);
  return rc;
}

/* At each switch with several up ports (toward a higher tier), the NIC
 * LIDs routed through each: the largest max - min over switches. */
static uint32_t imbalance(struct sim *s) {
  uint32_t worst = 0, step = s->lmc_mask + 1;
  uint32_t *cnt = malloc(sizeof(*cnt) * 65536);
  if (!cnt)
    return UINT32_MAX;
  for (uint32_t i = 0; i < s->nswitches; i++) {
    struct sim_switch *sw = &s->sws[i];
    uint32_t nup = 0;
    for (uint16_t j = 0; j < sw->n.nports; j++) {
      cnt[j] = 0;
      struct sim_port *p = &sw->n.ports[j];
      nup += p->peer && p->peer->node->tier > sw->n.tier;
    }
    if (nup < 2)
      continue;
    for (uint32_t d = 0; d < s->nnics; d++)
      for (uint32_t o = 0; o < step; o++) {
        uint16_t r = sw->lft[s->nic_lid[d] + o];
        if (r != SIM_LFT_NONE)
          cnt[r]++;
      }
    uint32_t mn = UINT32_MAX, mx = 0;
    for (uint16_t j = 0; j < sw->n.nports; j++) {
      struct sim_port *p = &sw->n.ports[j];
      if (!p->peer || p->peer->node->tier <= sw->n.tier)
        continue;
      mn = cnt[j] < mn ? cnt[j] : mn;
      mx = cnt[j] > mx ? cnt[j] : mx;
    }
    if (mx - mn > worst)
      worst = mx - mn;
  }
  free(cnt);
  return worst;
}

void sim_sm_check(struct sim *s, struct sim_sm_info *out) {
  struct sim_sm *sm = s->sm;
  struct cdg g = {0};
  out->max_imbalance = imbalance(s);
  if (cdg_build(s, &g, sm->nlids, &out->cdg_channels, &out->cdg_edges) == 0)
    out->deadlock_free = cdg_acyclic(s, &g) == 1;
  else
    out->deadlock_free = false;
  free(g.off);
  free(g.bits);
}

int sim_sm_new(struct sim *s, char *err, size_t errlen) {
  const struct sim_sm_cfg *c = &s->cfg.ib.sm;
  if (c->lmc > 7) {
    snprintf(err, errlen, "infiniband.sm: lmc must be 0..7, got %u", c->lmc);
    return -1;
  }
  s->lmc_mask = (1u << c->lmc) - 1;
  if ((uint64_t)(s->nnics + 1) * (s->lmc_mask + 1) + s->nswitches > 0xBFFF) {
    snprintf(err, errlen,
             "infiniband: %u NICs with lmc %u and %u switches need more "
             "than the 49151 unicast LIDs",
             s->nnics, c->lmc, s->nswitches);
    return -1;
  }
  if (c->standby_nic != UINT32_MAX && c->standby_nic >= s->nnics) {
    snprintf(err, errlen,
             "infiniband.sm.standby_nic: NIC %u, the fabric has %u (the "
             "master runs on NIC 0)",
             c->standby_nic, s->nnics);
    return -1;
  }
  if (c->standby_nic == 0) {
    snprintf(err, errlen,
             "infiniband.sm.standby_nic: NIC 0 runs the master SM");
    return -1;
  }
  if (!c->smp_timeout) {
    snprintf(err, errlen, "infiniband.sm.smp_timeout_us: must be above 0");
    return -1;
  }
  struct sim_sm *sm = calloc(1, sizeof(*sm));
  s->sm = sm;
  uint32_t nn = s->nswitches + s->nnics;
  if (sm) {
    sm->standby = c->standby_nic;
    sm->nslot = c->max_wire_smps ? c->max_wire_smps : 1;
    sm->slot = calloc(sm->nslot, sizeof(*sm->slot));
    sm->up_node = calloc(nn, sizeof(*sm->up_node));
    sm->up_port = calloc(nn, sizeof(*sm->up_port));
    sm->hops = calloc(nn, sizeof(*sm->hops));
    sim_ev_new(&sm->ev, SIM_EV_SM, 0);
    sim_ev_new(&sm->poll.ev, SIM_EV_SM_POLL, 0);
  }
  s->nic_lid = malloc(sizeof(*s->nic_lid) * s->nnics);
  if (!sm || !s->nic_lid || !sm->slot || !sm->up_node || !sm->up_port ||
      !sm->hops || discover(s, sm)) {
    snprintf(err, errlen, "out of memory for the subnet manager");
    return -1;
  }
  for (uint32_t i = 0; i < nn; i++)
    sim_ev_new(&node_at(s, i)->sma_ev, SIM_EV_SMA, i);
  assign_lids(s, sm);
  uint32_t nl = sm->nlids;
  sm->known = malloc(sizeof(uint16_t) * nl * s->nswitches + 1);
  if (!sm->known) {
    snprintf(err, errlen, "out of memory for the LFTs");
    return -1;
  }
  memset(sm->known, 0xFF, sizeof(uint16_t) * nl * s->nswitches);
  sm->want = sm->known;
  if (c->engine == SIM_SM_FTREE) {
    for (uint32_t i = 0; i < s->nswitches; i++)
      route_ftree(s, &s->sws[i], sm->known + (size_t)i * nl);
  } else if (route_again(s, sm->known, nl)) {
    snprintf(err, errlen, "out of memory for the LFTs");
    return -1;
  }
  for (uint32_t i = 0; i < s->nswitches; i++) {
    s->sws[i].lft = malloc(sizeof(uint16_t) * nl);
    if (!s->sws[i].lft) {
      snprintf(err, errlen, "out of memory for the LFTs");
      return -1;
    }
    memcpy(s->sws[i].lft, sm->known + (size_t)i * nl, sizeof(uint16_t) * nl);
  }
  sm->compute =
      (sim_time_t)s->nswitches * (s->nnics * (s->lmc_mask + 1)) * c->route_time;
  program(s, sm);
  struct sim_sm_info *in = &sm->info;
  in->engine = sim_sm_engine_name(c->engine);
  in->lids = sm->nlids - 1;
  in->lmc = c->lmc;
  in->smps = sm->smps;
  in->discover = sm->discover;
  in->compute = sm->compute;
  in->program = sm->program;
  in->took_over = SIM_NEVER;
  in->master_nic = sm->nic;
  sim_sm_check(s, in);
  if (sm->standby != UINT32_MAX && !poll_route(s, sm)) {
    snprintf(err, errlen,
             "infiniband.sm.standby_nic: NIC %u has no directed route of at "
             "most %d hops to the master's NIC %u",
             sm->standby, SIM_SMP_HOPS, sm->nic);
    return -1;
  }
  return 0;
}

void sim_sm_del(struct sim *s) {
  if (s->sws)
    for (uint32_t i = 0; i < s->nswitches; i++)
      free(s->sws[i].lft);
  if (s->sm) {
    struct sim_sm *sm = s->sm;
    free(sm->lat);
    free(sm->up_node);
    free(sm->up_port);
    free(sm->hops);
    free(sm->known);
    for (uint32_t i = 0; i < sm->ntabs; i++)
      free(sm->tabs[i]);
    free(sm->tabs);
    free(sm->rq);
    free(sm->slot);
  }
  free(s->sm);
  free(s->nic_lid);
  s->sm = 0;
  s->nic_lid = 0;
}

void sim_sm_net_finish(struct sim *s) {
  struct sim_sm *sm = s->sm;
  if (!sm)
    return;
  /* The master's figures, from its rank (the engine's name is a string
   * of this process) */
  enum { W = (sizeof(struct sim_sm_info) + 7) / 8 };
  uint64_t v[W] = {0};
  if (sim_mine(s, s->nics[sm->nic].n.part))
    memcpy(v, &sm->info, sizeof(sm->info));
  sim_net_reduce(s, v, W, SIM_NET_SUM);
  const char *engine = sm->info.engine;
  memcpy(&sm->info, v, sizeof(sm->info));
  sm->info.engine = engine;
}

int sim_sm_info(const struct sim *s, struct sim_sm_info *out) {
  if (!s->sm)
    return -1;
  *out = s->sm->info;
  return 0;
}
