/* InfiniBand's subnet manager, as a model of what OpenSM does at start:
 * it discovers the fabric with directed-route SMPs (the time that takes is
 * modelled, not simulated packet by packet), assigns LIDs (2^lmc per NIC,
 * aligned, then one per switch), computes a linear forwarding table per
 * switch with the chosen engine and programs it in blocks of 64 entries.
 * The LFTs are then what static routing forwards by, and they are checked:
 * no cycle in the channel dependency graph, up ports balanced. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"

/* A directed-route SMP: LRH, BTH, DETH, a 256-byte MAD, ICRC, VCRC and
 * the delimiters. LFT blocks hold 64 entries. */
#define SMP_WIRE (8 + 12 + 8 + 256 + 4 + 2 + 2)
#define LFT_BLOCK 64

struct sim_sm {
  uint32_t nic, standby; /* the master's NIC; the standby's or UINT32_MAX */
  uint32_t nlids, nsw_lid0;
  uint64_t smps;
  sim_time_t discover, compute, program;
  sim_time_t *lat; /* one-way SMP latency from the SM to each node */
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
static void route_ftree(struct sim *s, struct sim_switch *sw) {
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
      sw->lft[s->nic_lid[d] + o] = port;
    }
}

/* Min-hop: hop counts from every destination's switch by breadth-first
 * search; each switch takes, among the ports one hop closer, the one with
 * the fewest routes so far (OpenSM's minhop balancing). */
static int route_minhop(struct sim *s) {
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
        sw->lft[s->nic_lid[d] + o] = best;
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

static int route_updn(struct sim *s) {
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
        sw->lft[s->nic_lid[d] + o] = best;
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
static int route_again(struct sim *s) {
  return s->cfg.ib.sm.engine == SIM_SM_UPDN ? route_updn(s) : route_minhop(s);
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

void sim_sm_take_over(struct sim *s) {
  struct sim_sm *sm = s->sm;
  uint32_t old = sm->nic;
  sm->nic = sm->standby;
  sm->standby = old;
  sm->info.master_nic = sm->nic;
  sm->info.took_over = s->now;
  sm->info.takeovers++;
}

int sim_sm_recompute(struct sim *s, uint16_t *staged, sim_time_t *disc,
                     sim_time_t *compute, sim_time_t *prog, bool all) {
  struct sim_sm *sm = s->sm;
  const struct sim_sm_cfg *c = &s->cfg.ib.sm;
  uint32_t nl = sm->nlids, nsw = s->nswitches;
  uint16_t *old = malloc(sizeof(uint16_t) * nl * nsw);
  sim_time_t *lat0 = sm->lat;
  sm->lat = 0;
  if (!old || discover(s, sm)) {
    free(old);
    free(sm->lat);
    sm->lat = lat0;
    return -1;
  }
  free(lat0);
  *disc = sm->discover;
  for (uint32_t i = 0; i < nsw; i++) {
    memcpy(old + (size_t)i * nl, s->sws[i].lft, sizeof(uint16_t) * nl);
    memset(s->sws[i].lft, 0xFF, sizeof(uint16_t) * nl);
  }
  int rc = route_again(s);
  sim_time_t busy = 0;
  for (uint32_t i = 0; i < nsw; i++) {
    uint16_t *nw = staged + (size_t)i * nl, *od = old + (size_t)i * nl;
    /* A switch cut off from the SM keeps its LFT: nobody can program it
     * (a dead switch, or every switch when the SM's own link is down). */
    memcpy(nw, sm->lat[i] == SIM_NEVER ? od : s->sws[i].lft,
           sizeof(uint16_t) * nl);
    memcpy(s->sws[i].lft, od, sizeof(uint16_t) * nl);
    if (sm->lat[i] == SIM_NEVER)
      continue;
    for (uint32_t b = 0; b < nl; b += LFT_BLOCK) {
      uint32_t e = b + LFT_BLOCK < nl ? b + LFT_BLOCK : nl;
      if (all || memcmp(nw + b, od + b, (e - b) * sizeof(uint16_t))) {
        busy += 2 * sm->lat[i] + c->smp_proc;
        sm->smps++;
      }
    }
  }
  free(old);
  *compute = (sim_time_t)nsw * (s->nnics * (s->lmc_mask + 1)) * c->route_time;
  *prog = busy / (c->max_wire_smps ? c->max_wire_smps : 1);
  return rc;
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
  struct sim_sm *sm = calloc(1, sizeof(*sm));
  s->sm = sm;
  if (sm)
    sm->standby = c->standby_nic;
  s->nic_lid = malloc(sizeof(*s->nic_lid) * s->nnics);
  if (!sm || !s->nic_lid || discover(s, sm)) {
    snprintf(err, errlen, "out of memory for the subnet manager");
    return -1;
  }
  assign_lids(s, sm);
  for (uint32_t i = 0; i < s->nswitches; i++) {
    s->sws[i].lft = malloc(sizeof(uint16_t) * sm->nlids);
    if (!s->sws[i].lft) {
      snprintf(err, errlen, "out of memory for the LFTs");
      return -1;
    }
    memset(s->sws[i].lft, 0xFF, sizeof(uint16_t) * sm->nlids);
  }
  if (c->engine == SIM_SM_FTREE) {
    for (uint32_t i = 0; i < s->nswitches; i++)
      route_ftree(s, &s->sws[i]);
  } else if (route_again(s)) {
    snprintf(err, errlen, "out of memory for the LFTs");
    return -1;
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
  sim_sm_check(s, in);
  return 0;
}

void sim_sm_del(struct sim *s) {
  if (s->sws)
    for (uint32_t i = 0; i < s->nswitches; i++)
      free(s->sws[i].lft);
  if (s->sm)
    free(s->sm->lat);
  free(s->sm);
  free(s->nic_lid);
  s->sm = 0;
  s->nic_lid = 0;
}

int sim_sm_info(const struct sim *s, struct sim_sm_info *out) {
  if (!s->sm)
    return -1;
  *out = s->sm->info;
  return 0;
}
