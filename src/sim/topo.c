/* Topologies from parameters: leaf-spine (with oversubscription and rails)
 * and the 3-tier k-ary fat-tree. NICs are numbered so that every switch
 * reaches a contiguous range below it (rail-major, then leaf, then host),
 * which makes forwarding arithmetic (see struct sim_switch). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim/sim_int.h"

/* gidx: the port's place among every port, the NICs' after the
 * switches', for its events' keys. */
static void port_init(struct sim *s, struct sim_port *p, struct sim_node *n,
                      uint16_t idx, uint64_t gidx) {
  *p = (struct sim_port){
      .node = n, .idx = idx, .fc_at = SIM_NEVER, .cr_due = SIM_NEVER,
      .starved_since = SIM_NEVER};
  sim_ev_new(&p->tx_ev, SIM_EV_PORT_TX, gidx);
  sim_ev_new(&p->rx_ev, SIM_EV_PORT_RX, gidx);
  sim_ev_new(&p->fc_ev, SIM_EV_PORT_FC, gidx);
  sim_ev_new(&p->fc_tick, SIM_EV_PORT_FC_TICK, gidx);
  sim_ev_new(&p->fc_rx_ev, SIM_EV_PORT_FC_RX, gidx);
}

static uint32_t max_wire(const struct sim_cfg *c) {
  return sim_data_wire_bytes(c, c->tp.mtu, true);
}

/* Joins a and b with a full-duplex link. */
static void connect(struct sim *s, struct sim_port *a, struct sim_port *b,
                    const struct sim_link_cfg *l) {
  struct sim_port *e[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    struct sim_port *p = e[i];
    p->peer = e[!i];
    p->rate_bps = l->rate_bps;
    p->delay = l->delay;
    p->loss = l->loss;
    uint64_t id =
        (uint64_t)p->node->kind << 40 | (uint64_t)p->node->id << 16 | p->idx;
    p->rng = sim_seed(s->cfg.seed, 1, id);
    /* PFC headroom: what arrives after we decide to pause: a frame being
     * sent on each side, the link's bytes in flight both ways, the pause. */
    int64_t hr = s->cfg.sw.headroom;
    if (hr < 0) {
      uint64_t bdp =
          (uint64_t)((double)l->rate_bps / 8.0 * ((double)l->delay / 1e12));
      hr =
          (int64_t)(2 * bdp + 3 * (uint64_t)max_wire(&s->cfg) + SIM_PAUSE_WIRE);
    }
    p->pfc_limit = s->cfg.sw.xoff + (uint64_t)hr;
    /* InfiniBand: the peer's input buffer, whole, as credits; the period
     * of FC packets at this link's rate. */
    for (int v = 0; s->ib && v < SIM_NPRIO; v++)
      p->credits[v] = (uint32_t)(s->cfg.ib.vl_buffer / SIM_IB_BLOCK);
    p->fc_period = s->cfg.ib.fc_period ? s->cfg.ib.fc_period
                                       : sim_ib_fc_period(l->rate_bps);
  }
}

static int alloc_nodes(struct sim *s, uint32_t nsw, const uint16_t *nports,
                       char *err, size_t errlen) {
  s->nswitches = nsw;
  s->nports = 0;
  for (uint32_t i = 0; i < nsw; i++)
    s->nports += nports[i];
  s->sws = calloc(nsw ? nsw : 1, sizeof(*s->sws));
  s->ports = calloc(s->nports ? s->nports : 1, sizeof(*s->ports));
  s->nics = calloc(s->nnics, sizeof(*s->nics));
  if (!s->sws || !s->ports || !s->nics) {
    snprintf(err, errlen, "out of memory for the topology");
    return -1;
  }
  struct sim_port *p = s->ports;
  for (uint32_t i = 0; i < nsw; i++) {
    struct sim_switch *sw = &s->sws[i];
    sw->n.kind = SIM_NODE_SWITCH;
    sw->n.id = i;
    sw->n.nports = nports[i];
    sw->n.ports = p;
    sw->salt = sim_seed(s->cfg.seed, 2, i);
    sw->rng = sim_seed(s->cfg.seed, 3, i);
    for (uint16_t j = 0; j < nports[i]; j++)
      port_init(s, &p[j], &sw->n, j, (uint64_t)(p + j - s->ports));
    p += nports[i];
  }
  for (uint32_t i = 0; i < s->nnics; i++) {
    struct sim_nic *n = &s->nics[i];
    n->n.kind = SIM_NODE_NIC;
    n->n.id = i;
    n->n.nports = 1;
    n->n.ports = &n->port;
    port_init(s, &n->port, &n->n, 0, (uint64_t)s->nports + i);
    sim_ev_new(&n->ev, SIM_EV_NIC, i);
    sim_ev_new(&n->cc_ev, SIM_EV_NIC_CC, i);
    sim_ev_new(&n->retry_ev, SIM_EV_RETRY, i);
  }
  return 0;
}

static void set_sw(struct sim_switch *sw, uint8_t tier, uint32_t lo,
                   uint32_t hi, uint32_t span, uint16_t n_down, uint16_t n_up) {
  sw->n.tier = tier;
  sw->up_div = 1;
  sw->lo = lo;
  sw->hi = hi;
  sw->span = span;
  sw->n_down = n_down;
  sw->n_up = n_up;
}

/* Spine switches of a leaf-spine: as configured, or as many as the
 * oversubscription asks for (none with a single leaf). */
static uint32_t ls_spines(const struct sim_topo_cfg *t, uint32_t nleaf) {
  if (nleaf == 1)
    return 0;
  if (t->spines)
    return t->spines;
  double os = t->oversubscription > 0 ? t->oversubscription : 1.0;
  double need = (double)t->hosts_per_leaf * (double)t->link[0].rate_bps /
                (os * (double)t->link[1].rate_bps);
  uint32_t S = (uint32_t)ceil(need - 1e-9);
  return S ? S : 1;
}

static int build_leaf_spine(struct sim *s, char *err, size_t errlen) {
  struct sim_topo_cfg *t = &s->cfg.topo;
  uint32_t L = t->leaves, P = t->hosts_per_leaf, R = t->rails ? t->rails : 1;
  if (!L || !P || P > 4096 || L > 65535 || R > 16) {
    snprintf(err, errlen,
             "leaf-spine needs 1..65535 leaves, 1..4096 "
             "hosts per leaf, 1..16 rails");
    return -1;
  }
  uint32_t S = ls_spines(t, L * R);
  if (S > 4096 || L * R > 65535) {
    snprintf(err, errlen, "too many spines or leaves");
    return -1;
  }
  t->spines = S;
  t->oversubscription = S ? (double)P * (double)t->link[0].rate_bps /
                                ((double)S * (double)t->link[1].rate_bps)
                          : 1.0;
  uint32_t H = L * P, nleaf = L * R;
  s->nhosts = H;
  s->rails = R;
  s->nnics = H * R;
  uint16_t *np = malloc(sizeof(*np) * (nleaf + S));
  if (!np)
    return -1;
  for (uint32_t i = 0; i < nleaf; i++)
    np[i] = (uint16_t)(P + S);
  for (uint32_t i = 0; i < S; i++)
    np[nleaf + i] = (uint16_t)nleaf;
  int rc = alloc_nodes(s, nleaf + S, np, err, errlen);
  free(np);
  if (rc)
    return rc;
  for (uint32_t li = 0; li < nleaf; li++) {
    struct sim_switch *leaf = &s->sws[li];
    uint32_t lo = li * P; /* rail r, leaf l: (r * L + l) * P = r * H + l * P */
    set_sw(leaf, 1, lo, lo + P, 1, (uint16_t)P, (uint16_t)S);
    for (uint32_t h = 0; h < P; h++) {
      struct sim_nic *nic = &s->nics[lo + h];
      nic->host = (lo + h) % H;
      nic->rail = (uint8_t)((lo + h) / H);
      connect(s, &nic->port, &leaf->n.ports[h], &t->link[0]);
    }
    for (uint32_t j = 0; j < S; j++)
      connect(s, &leaf->n.ports[P + j], &s->sws[nleaf + j].n.ports[li],
              &t->link[1]);
  }
  for (uint32_t j = 0; j < S; j++)
    set_sw(&s->sws[nleaf + j], 2, 0, H * R, P, (uint16_t)nleaf, 0);
  return 0;
}

static int build_fat_tree(struct sim *s, char *err, size_t errlen) {
  struct sim_topo_cfg *t = &s->cfg.topo;
  uint32_t k = t->k, h = k / 2;
  if (k < 2 || k % 2 || k > 128) {
    snprintf(err, errlen, "fat-tree k must be even, 2..128");
    return -1;
  }
  if (t->rails > 1) {
    snprintf(err, errlen, "rails are supported on leaf-spine only");
    return -1;
  }
  uint32_t nE = k * h, nA = k * h, nC = h * h, H = k * k * k / 4;
  s->nhosts = s->nnics = H;
  s->rails = 1;
  uint32_t nsw = nE + nA + nC;
  uint16_t *np = malloc(sizeof(*np) * nsw);
  if (!np)
    return -1;
  for (uint32_t i = 0; i < nsw; i++)
    np[i] = (uint16_t)k;
  int rc = alloc_nodes(s, nsw, np, err, errlen);
  free(np);
  if (rc)
    return rc;
  for (uint32_t p = 0; p < k; p++) {
    for (uint32_t e = 0; e < h; e++) {
      struct sim_switch *edge = &s->sws[p * h + e];
      uint32_t lo = (p * h + e) * h;
      set_sw(edge, 1, lo, lo + h, 1, (uint16_t)h, (uint16_t)h);
      for (uint32_t i = 0; i < h; i++) {
        s->nics[lo + i].host = lo + i;
        connect(s, &s->nics[lo + i].port, &edge->n.ports[i], &t->link[0]);
      }
      for (uint32_t a = 0; a < h; a++)
        connect(s, &edge->n.ports[h + a], &s->sws[nE + p * h + a].n.ports[e],
                &t->link[1]);
    }
    for (uint32_t a = 0; a < h; a++) {
      struct sim_switch *agg = &s->sws[nE + p * h + a];
      set_sw(agg, 2, p * h * h, (p + 1) * h * h, h, (uint16_t)h, (uint16_t)h);
      agg->up_div = h; /* the edge used dst % h: D-mod-k, like ftree */
      for (uint32_t j = 0; j < h; j++)
        connect(s, &agg->n.ports[h + j],
                &s->sws[nE + nA + a * h + j].n.ports[p], &t->link[2]);
    }
  }
  for (uint32_t c = 0; c < nC; c++)
    set_sw(&s->sws[nE + nA + c], 3, 0, H, h * h, (uint16_t)k, 0);
  return 0;
}

int sim_topo_build(struct sim *s, char *err, size_t errlen) {
  for (int i = 0; i < 3; i++)
    if (!s->cfg.topo.link[i].rate_bps || s->cfg.topo.link[i].loss < 0 ||
        s->cfg.topo.link[i].loss >= 1) {
      snprintf(err, errlen, "link tier %d: rate must be > 0, loss in [0,1)", i);
      return -1;
    }
  switch (s->cfg.topo.kind) {
  case SIM_TOPO_LEAF_SPINE:
    return build_leaf_spine(s, err, errlen);
  case SIM_TOPO_FAT_TREE:
    return build_fat_tree(s, err, errlen);
  }
  snprintf(err, errlen, "unknown topology");
  return -1;
}

void sim_topo_size(const struct sim_topo_cfg *t, uint64_t *nsw,
                   uint64_t *nports, uint64_t *nnics) {
  *nsw = *nports = *nnics = 0;
  if (t->kind == SIM_TOPO_FAT_TREE) {
    uint64_t k = t->k;
    *nsw = 5 * k * k / 4;
    *nports = *nsw * k;
    *nnics = k * k * k / 4;
  } else if (t->kind == SIM_TOPO_LEAF_SPINE) {
    uint64_t R = t->rails ? t->rails : 1, nleaf = (uint64_t)t->leaves * R;
    uint64_t S = nleaf && nleaf <= 65535 ? ls_spines(t, (uint32_t)nleaf) : 0;
    *nsw = nleaf + S;
    *nports = nleaf * (t->hosts_per_leaf + S) + S * nleaf;
    *nnics = (uint64_t)t->leaves * t->hosts_per_leaf * R;
  }
}
