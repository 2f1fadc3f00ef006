/* Bill of materials: the topology an option implies (switches per tier,
 * ports used and spare), cables chosen by reach from a floor model, and
 * the totals of capital cost and power. Totals are sums over the items, so
 * every dollar in a total can be traced to a part and a quantity. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan.h"

const char *plan_bom_line_name(enum plan_bom_line l) {
  static const char *n[] = {
      "NICs",          "leaf switches",    "spine switches",
      "core switches", "cables (DAC/AOC)", "transceivers",
      "fibre"};
  return l < PLAN_BOM_NLINES ? n[l] : "?";
}

static enum plan_family family_of(enum plan_fabric f) {
  return f == PLAN_IB ? PLAN_FAM_IB : PLAN_FAM_ETH;
}

/* The cheapest part of a kind that fits; NULL if none. */
static const struct plan_part *pick(const struct plan_catalogue *c,
                                    enum plan_part_kind kind,
                                    enum plan_family fam, double speed,
                                    uint32_t radix) {
  const struct plan_part *best = NULL;
  for (uint32_t i = 0; i < c->n; i++) {
    const struct plan_part *p = &c->part[i];
    if (p->kind != kind || p->family != fam || p->speed_gbps != speed ||
        (radix && p->radix != radix))
      continue;
    if (!best || p->price_usd < best->price_usd)
      best = p;
  }
  return best;
}

static void add_item(struct plan_option *o, const struct plan_part *p,
                     enum plan_bom_line line, double qty, double power_each) {
  struct plan_bom_item *it = NULL;
  for (uint32_t i = 0; i < o->nitems; i++)
    if (o->item[i].part == p && o->item[i].line == line)
      it = &o->item[i];
  if (!it) {
    if (o->nitems == PLAN_BOM_MAX)
      return; /* cannot happen with the lines above: few parts per option */
    it = &o->item[o->nitems++];
    it->part = p;
    it->line = line;
  }
  it->qty += qty;
  it->cost += qty * p->price_usd;
  it->power += qty * power_each;
}

/* Smallest s >= lo dividing u with per * (u / s) <= radix: spines (or
 * cores per plane) and the links w = u / s from each switch below to each. */
static uint32_t spread(uint32_t u, uint32_t below, uint32_t radix) {
  uint32_t lo = (uint32_t)(((uint64_t)below * u + radix - 1) / radix);
  for (uint32_t s = lo ? lo : 1; s <= u; s++)
    if (u % s == 0 && (uint64_t)below * (u / s) <= radix)
      return s;
  return 0;
}

static int size_topology(const struct plan_spec *sp, struct plan_option *o) {
  uint32_t n = o->radix, N = o->nics, m = o->nics_per_server;
  double r = o->topo.oversub;
  o->down = (uint32_t)floor(n * r / (r + 1) + 1e-9);
  if (!o->down) {
    snprintf(o->why, sizeof o->why, "radix %u too small", n);
    return -1;
  }
  o->up = (uint32_t)ceil(o->down / r - 1e-9);
  if (o->down + o->up > n)
    o->up = n - o->down;
  uint32_t L;
  if (o->topo.rail) {
    o->leaves_per_group = (o->servers + o->down - 1) / o->down;
    L = m * o->leaves_per_group;
  } else {
    L = (N + o->down - 1) / o->down;
    o->leaves_per_group = L;
  }
  o->sw[1] = L;
  o->links[0] = N;
  if (L == 1 && o->topo.tiers == 2) {
    o->up = 0; /* one switch: nothing above it */
    o->oversub = 1;
    return 0;
  }
  o->oversub = (double)o->down / o->up;
  if (o->topo.tiers == 2) {
    if (L > n) {
      snprintf(o->why, sizeof o->why,
               "%u leaves exceed a %u-port spine: needs 3 tiers", L, n);
      return -1;
    }
    o->sw[2] = spread(o->up, L, n);
    o->links[1] = L * o->up;
    return 0;
  }
  /* 3 tiers: pods of n/2 leaves, each leaf linked once to each of its pod's
   * up aggregation switches; aggregation switches have n/2 ports down and
   * n/2 up, so only the leaf tier is oversubscribed. */
  uint32_t E = n / 2;
  if (o->up > E) {
    snprintf(o->why, sizeof o->why, "3 tiers need oversubscription >= 1");
    return -1;
  }
  o->per_pod = E;
  o->pods = (L + E - 1) / E;
  if (o->pods > n) {
    snprintf(o->why, sizeof o->why, "%u pods exceed a %u-port core", o->pods,
             n);
    return -1;
  }
  o->sw[2] = o->pods * o->up;
  o->links[1] = L * o->up;
  if (o->pods > 1) {
    uint32_t c = spread(n / 2, o->pods, n);
    o->sw[3] = o->up * c;
    o->links[2] = o->sw[2] * (n / 2);
  }
  (void)sp;
  return 0;
}

uint32_t plan_leaf_of(const struct plan_option *o, uint32_t server,
                      uint32_t nic) {
  if (o->topo.rail)
    return nic * o->leaves_per_group + server / o->down;
  return (server * o->nics_per_server + nic) / o->down;
}

/* ---- Floor model: servers fill racks, racks fill rows; a leaf sits in
 * the middle of the servers it serves, spines and cores in a network row
 * in the middle of the hall. Distances are Manhattan plus slack. ---- */

struct spot {
  double row, pos;
};

static struct spot server_spot(const struct plan_spec *sp, uint32_t s) {
  uint32_t rack = s / sp->servers_per_rack;
  struct spot p = {(double)(rack / sp->racks_per_row),
                   (double)(rack % sp->racks_per_row)};
  return p;
}

static struct spot mid(struct spot a, struct spot b) {
  struct spot p = {(a.row + b.row) / 2, (a.pos + b.pos) / 2};
  return p;
}

static double dist(const struct plan_spec *sp, struct spot a, struct spot b) {
  return fabs(a.row - b.row) * sp->row_pitch_m +
         fabs(a.pos - b.pos) * sp->rack_width_m + sp->slack_m;
}

/* Where leaf l sits: the middle of the first and last server on it. */
static struct spot leaf_spot(const struct plan_spec *sp,
                             const struct plan_option *o, uint32_t l) {
  uint32_t s0, s1;
  if (o->topo.rail) {
    uint32_t g = l % o->leaves_per_group;
    s0 = g * o->down;
    s1 = s0 + o->down - 1;
  } else {
    s0 = l * o->down / o->nics_per_server;
    s1 = ((l + 1) * o->down - 1) / o->nics_per_server;
  }
  if (s1 >= o->servers)
    s1 = o->servers - 1;
  if (s0 > s1)
    s0 = s1;
  return mid(server_spot(sp, s0), server_spot(sp, s1));
}

static struct spot hall_middle(const struct plan_spec *sp,
                               const struct plan_option *o) {
  return mid(server_spot(sp, 0), server_spot(sp, o->servers - 1));
}

struct cable_choice {
  const struct plan_part *cable, *optic, *fibre;
  double cost;
};

static int choose_cable(const struct plan_catalogue *c, enum plan_family fam,
                        double speed, double len, struct cable_choice *ch) {
  memset(ch, 0, sizeof *ch);
  const struct plan_part *fibre = NULL;
  for (uint32_t i = 0; i < c->n; i++)
    if (c->part[i].kind == PLAN_PART_FIBRE &&
        (!fibre || c->part[i].price_usd < fibre->price_usd))
      fibre = &c->part[i];
  double best = INFINITY;
  for (uint32_t i = 0; i < c->n; i++) {
    const struct plan_part *p = &c->part[i];
    if (p->family != fam || p->speed_gbps != speed || p->reach_m < len)
      continue;
    double cost;
    if (p->kind == PLAN_PART_DAC || p->kind == PLAN_PART_AOC)
      cost = p->price_usd;
    else if (p->kind == PLAN_PART_TRANSCEIVER && fibre)
      cost = 2 * p->price_usd + fibre->price_usd * len;
    else
      continue;
    if (cost < best) {
      best = cost;
      ch->cable = p->kind == PLAN_PART_TRANSCEIVER ? NULL : p;
      ch->optic = p->kind == PLAN_PART_TRANSCEIVER ? p : NULL;
      ch->fibre = ch->optic ? fibre : NULL;
    }
  }
  ch->cost = best;
  return isinf(best) ? -1 : 0;
}

static int add_link(const struct plan_spec *sp, struct plan_option *o, int tier,
                    double len, double count, char *err, size_t errlen) {
  struct cable_choice ch;
  enum plan_family fam = family_of(o->fabric);
  if (choose_cable(&sp->cat, fam, o->speed_gbps, len, &ch)) {
    snprintf(err, errlen,
             "%s:%zu: nic_speeds_gbps: no %s cable or transceiver (with "
             "fibre) at %g Gb/s reaches %.1f m in the catalogue",
             sp->path, sp->line_speeds,
             fam == PLAN_FAM_IB ? "infiniband" : "ethernet", o->speed_gbps,
             len);
    return -1;
  }
  if (ch.cable)
    add_item(o, ch.cable, PLAN_BOM_CABLE, count, ch.cable->power_w);
  if (ch.optic) {
    add_item(o, ch.optic, PLAN_BOM_OPTIC, 2 * count, ch.optic->power_w);
    add_item(o, ch.fibre, PLAN_BOM_FIBRE, len * count, 0);
  }
  o->cable_len[tier] += len * count;
  return 0;
}

static int cable_tiers(const struct plan_spec *sp, struct plan_option *o,
                       char *err, size_t errlen) {
  for (uint32_t s = 0; s < o->servers; s++)
    for (uint32_t i = 0; i < o->nics_per_server; i++) {
      double len =
          dist(sp, server_spot(sp, s), leaf_spot(sp, o, plan_leaf_of(o, s, i)));
      if (add_link(sp, o, 0, len, 1, err, errlen))
        return -1;
    }
  struct spot hall = hall_middle(sp, o);
  if (o->topo.tiers == 2 || o->pods <= 1) {
    for (uint32_t l = 0; l < o->sw[1] && o->up; l++)
      if (add_link(sp, o, 1, dist(sp, leaf_spot(sp, o, l), hall), o->up, err,
                   errlen))
        return -1;
  } else {
    /* Aggregation switches sit with their pod, cores in the hall middle. */
    for (uint32_t p = 0; p < o->pods; p++) {
      uint32_t l0 = p * o->per_pod, l1 = l0 + o->per_pod - 1;
      if (l1 >= o->sw[1])
        l1 = o->sw[1] - 1;
      struct spot agg = mid(leaf_spot(sp, o, l0), leaf_spot(sp, o, l1));
      for (uint32_t l = l0; l <= l1; l++)
        if (add_link(sp, o, 1, dist(sp, leaf_spot(sp, o, l), agg), o->up, err,
                     errlen))
          return -1;
      if (add_link(sp, o, 2, dist(sp, agg, hall),
                   (double)o->up * (o->radix / 2), err, errlen))
        return -1;
    }
  }
  for (int t = 0; t < 3; t++)
    if (o->links[t])
      o->cable_len[t] /= o->links[t];
  return 0;
}

int plan_bom(const struct plan_spec *sp, struct plan_option *o, char *err,
             size_t errlen) {
  enum plan_family fam = family_of(o->fabric);
  o->nics_per_server = sp->gpus_per_server * o->ratio_nic / o->ratio_gpu;
  o->servers = sp->gpus / sp->gpus_per_server;
  o->nics = o->servers * o->nics_per_server;
  o->nic = pick(&sp->cat, PLAN_PART_NIC, fam, o->speed_gbps, 0);
  o->swp = pick(&sp->cat, PLAN_PART_SWITCH, fam, o->speed_gbps, o->radix);
  if (!o->nic) {
    snprintf(err, errlen,
             "%s:%zu: nic_speeds_gbps: no %s NIC at %g Gb/s in the "
             "catalogue",
             sp->path, sp->line_speeds, plan_fabric_name(o->fabric),
             o->speed_gbps);
    return -1;
  }
  if (!o->swp) {
    snprintf(err, errlen,
             "%s:%zu: switch_radices: no %s switch with %u ports at %g "
             "Gb/s in the catalogue",
             sp->path, sp->line_radices, plan_fabric_name(o->fabric), o->radix,
             o->speed_gbps);
    return -1;
  }
  o->feasible = size_topology(sp, o) == 0;
  if (!o->feasible)
    return 0;
  uint32_t nsw = o->sw[1] + o->sw[2] + o->sw[3];
  o->ports_total = (uint64_t)nsw * o->radix;
  o->ports_used =
      (uint64_t)o->links[0] + 2ull * o->links[1] + 2ull * o->links[2];
  add_item(o, o->nic, PLAN_BOM_NIC, o->nics, o->nic->power_w);
  for (int t = 1; t <= 3; t++)
    if (o->sw[t])
      add_item(o, o->swp, (enum plan_bom_line)(PLAN_BOM_SW1 + t - 1), o->sw[t],
               o->swp->power_w);
  if (cable_tiers(sp, o, err, errlen))
    return -1;
  o->capex = o->power_w = 0;
  memset(o->line_cost, 0, sizeof o->line_cost);
  for (uint32_t i = 0; i < o->nitems; i++) {
    o->capex += o->item[i].cost;
    o->power_w += o->item[i].power;
    o->line_cost[o->item[i].line] += o->item[i].cost;
  }
  return 0;
}

int plan_enumerate(const struct plan_spec *sp, struct plan_option *out,
                   uint32_t max, char *err, size_t errlen) {
  uint32_t n = 0;
  for (uint32_t f = 0; f < sp->nfabrics; f++)
    for (uint32_t t = 0; t < sp->ntopos; t++)
      for (uint32_t r = 0; r < sp->nratios; r++)
        for (uint32_t s = 0; s < sp->nspeeds; s++)
          for (uint32_t x = 0; x < sp->nradices; x++) {
            if (n == max) {
              snprintf(err, errlen, "%s: more than %u options", sp->path, max);
              return -1;
            }
            struct plan_option *o = &out[n];
            memset(o, 0, sizeof *o);
            o->fabric = sp->fabrics[f];
            o->topo = sp->topos[t];
            o->ratio_nic = sp->ratio_nic[r];
            o->ratio_gpu = sp->ratio_gpu[r];
            o->speed_gbps = sp->speeds[s];
            o->radix = sp->radices[x];
            char extra[64] = "";
            if (sp->nspeeds > 1)
              snprintf(extra, sizeof extra, " %gG", o->speed_gbps);
            if (sp->nradices > 1)
              snprintf(extra + strlen(extra), sizeof extra - strlen(extra),
                       " r%u", o->radix);
            snprintf(o->name, sizeof o->name, "%s %s %u:%u%s",
                     plan_fabric_name(o->fabric), o->topo.name, o->ratio_nic,
                     o->ratio_gpu, extra);
            if (plan_bom(sp, o, err, errlen))
              return -1;
            n++;
          }
  return (int)n;
}
