#include "sim/scenario.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct ctx {
  yaml_document_t *doc;
  const char *label, *base;
  struct sim_cfg *c;
  char *name;
  size_t namelen;
  yaml_node_t *dcqcn; /* read last, over the preset at the final rate */
  yaml_node_t *wl;    /* the workload mapping, for errors about it */
  yaml_node_t *sizes_at, *range_at; /* collective 'sizes' / 'min'..'factor' */
  uint64_t cmin, cmax;
  double cfactor;
  /* Keys that belong to one fabric, checked once 'fabric' is known. */
  yaml_node_t *eth_at, *ib_at, *routing_at;
  const char *eth_key;
  char *err;
  size_t errlen;
};

static int fail(struct ctx *x, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct ctx *x, const yaml_node_t *n, const char *fmt, ...) {
  int len = snprintf(x->err, x->errlen, "%s:%zu: ", x->label,
                     n ? n->start_mark.line + 1 : (size_t)0);
  va_list ap;
  va_start(ap, fmt);
  if (len >= 0 && (size_t)len < x->errlen)
    vsnprintf(x->err + len, x->errlen - (size_t)len, fmt, ap);
  va_end(ap);
  return -1;
}

static const char *sval(const yaml_node_t *n) {
  return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : 0;
}

static int need_scalar(struct ctx *x, const yaml_node_t *v, const char *key) {
  if (v->type != YAML_SCALAR_NODE)
    return fail(x, v, "'%s': expected a value, not a list or mapping", key);
  return 0;
}

static int get_double(struct ctx *x, const yaml_node_t *v, const char *key,
                      double lo, double hi, double *out) {
  if (need_scalar(x, v, key))
    return -1;
  const char *s = sval(v);
  char *e;
  errno = 0;
  double d = strtod(s, &e);
  if (e == s || *e || errno || !isfinite(d) || d < lo || d > hi)
    return fail(x, v, "'%s': expected a number in [%g, %g], got '%s'", key, lo,
                hi, s);
  *out = d;
  return 0;
}

static int get_u64(struct ctx *x, const yaml_node_t *v, const char *key,
                   uint64_t lo, uint64_t hi, uint64_t *out) {
  if (need_scalar(x, v, key))
    return -1;
  const char *s = sval(v);
  char *e;
  errno = 0;
  unsigned long long u = strtoull(s, &e, 10);
  if (e == s || *e || errno || *s == '-' || u < lo || u > hi)
    return fail(x, v, "'%s': expected an integer in [%llu, %llu], got '%s'",
                key, (unsigned long long)lo, (unsigned long long)hi, s);
  *out = u;
  return 0;
}

static int get_u32(struct ctx *x, const yaml_node_t *v, const char *key,
                   uint32_t lo, uint32_t hi, uint32_t *out) {
  uint64_t u;
  if (get_u64(x, v, key, lo, hi, &u))
    return -1;
  *out = (uint32_t)u;
  return 0;
}

/* Bytes: an integer with an optional unit B, KB, MB, GB (powers of 1000)
 * or KiB, MiB, GiB (powers of 1024). */
static int get_bytes(struct ctx *x, const yaml_node_t *v, const char *key,
                     uint64_t lo, uint64_t *out) {
  if (need_scalar(x, v, key))
    return -1;
  const char *s = sval(v);
  char *e;
  errno = 0;
  double d = strtod(s, &e);
  while (*e == ' ')
    e++;
  static const struct {
    const char *u;
    double m;
  } units[] = {
      {"", 1},     {"B", 1},      {"KB", 1e3},        {"MB", 1e6},
      {"GB", 1e9}, {"KiB", 1024}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  for (size_t i = 0; e != s && !errno && i < sizeof units / sizeof units[0];
       i++)
    if (!strcmp(e, units[i].u)) {
      double b = d * units[i].m;
      if (b >= (double)lo && b <= 1e15 && b == floor(b)) {
        *out = (uint64_t)b;
        return 0;
      }
    }
  return fail(x, v,
              "'%s': expected a whole number of bytes >= %llu with an "
              "optional unit (B, KB, MB, GB, KiB, MiB, GiB), got '%s'",
              key, (unsigned long long)lo, s);
}

static int get_bool(struct ctx *x, const yaml_node_t *v, const char *key,
                    bool *out) {
  if (need_scalar(x, v, key))
    return -1;
  const char *s = sval(v);
  if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on"))
    *out = true;
  else if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off"))
    *out = false;
  else
    return fail(x, v, "'%s': expected true or false, got '%s'", key, s);
  return 0;
}

/* One of names[] (NULL-terminated); *out = its index. */
static int get_enum(struct ctx *x, const yaml_node_t *v, const char *key,
                    const char *const *names, int *out) {
  if (need_scalar(x, v, key))
    return -1;
  const char *s = sval(v);
  char list[256] = "";
  for (int i = 0; names[i]; i++) {
    if (!strcmp(s, names[i])) {
      *out = i;
      return 0;
    }
    size_t l = strlen(list);
    snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", names[i]);
  }
  return fail(x, v, "'%s': expected one of %s, got '%s'", key, list, s);
}

static int get_time(struct ctx *x, const yaml_node_t *v, const char *key,
                    double unit_ps, sim_time_t *out) {
  double d;
  if (get_double(x, v, key, 0, 1e15 / unit_ps, &d))
    return -1;
  *out = (sim_time_t)llround(d * unit_ps);
  return 0;
}

static int get_path(struct ctx *x, const yaml_node_t *v, const char *key,
                    char *out, size_t outlen) {
  if (need_scalar(x, v, key))
    return -1;
  const char *s = sval(v);
  int n = s[0] == '/' || !x->base[0]
              ? snprintf(out, outlen, "%s", s)
              : snprintf(out, outlen, "%s/%s", x->base, s);
  if (n < 0 || (size_t)n >= outlen)
    return fail(x, v, "'%s': path too long", key);
  return 0;
}

typedef int (*section_fn)(struct ctx *x, const char *key, yaml_node_t *v,
                          void *arg);

/* Walks a mapping, rejecting duplicates, handing each pair to fn, which
 * returns 1 for an unknown key. */
static int walk(struct ctx *x, yaml_node_t *m, const char *where, section_fn fn,
                void *arg) {
  if (m->type != YAML_MAPPING_NODE)
    return fail(x, m, "'%s': expected a mapping of keys", where);
  for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
       p < m->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(x->doc, p->key);
    yaml_node_t *v = yaml_document_get_node(x->doc, p->value);
    const char *ks = sval(k);
    if (!ks)
      return fail(x, k, "keys in '%s' must be plain names", where);
    for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++) {
      const char *prev = sval(yaml_document_get_node(x->doc, q->key));
      if (prev && !strcmp(prev, ks))
        return fail(x, k, "duplicate key '%s' in '%s'", ks, where);
    }
    int rc = fn(x, ks, v, arg);
    if (rc == 1)
      return fail(x, k, "unknown key '%s' in '%s'", ks, where);
    if (rc)
      return rc;
  }
  return 0;
}

#define KEY(s) (!strcmp(key, s))

static int link_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_link_cfg *l = a;
  double d;
  if (KEY("rate_gbps")) {
    if (get_double(x, v, key, 0.001, 100000, &d))
      return -1;
    l->rate_bps = (uint64_t)llround(d * 1e9);
    return 0;
  }
  if (KEY("delay_us"))
    return get_time(x, v, key, 1e6, &l->delay);
  if (KEY("delay_ns"))
    return get_time(x, v, key, 1e3, &l->delay);
  if (KEY("loss"))
    return get_double(x, v, key, 0, 0.999, &l->loss);
  return 1;
}

static int links_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_topo_cfg *t = a;
  if (KEY("host"))
    return walk(x, v, "links.host", link_fn, &t->link[0]);
  if (KEY("fabric"))
    return walk(x, v, "links.fabric", link_fn, &t->link[1]);
  if (KEY("core"))
    return walk(x, v, "links.core", link_fn, &t->link[2]);
  if (KEY("all")) {
    struct sim_link_cfg l = t->link[0];
    if (walk(x, v, "links.all", link_fn, &l))
      return -1;
    t->link[0] = t->link[1] = t->link[2] = l;
    return 0;
  }
  return 1;
}

static int topo_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_topo_cfg *t = a;
  static const char *const kinds[] = {"leaf_spine", "fat_tree", 0};
  int e;
  if (KEY("kind")) {
    if (get_enum(x, v, key, kinds, &e))
      return -1;
    t->kind = (enum sim_topo_kind)e;
    return 0;
  }
  if (KEY("leaves"))
    return get_u32(x, v, key, 1, 65535, &t->leaves);
  if (KEY("hosts_per_leaf"))
    return get_u32(x, v, key, 1, 4096, &t->hosts_per_leaf);
  if (KEY("spines"))
    return get_u32(x, v, key, 1, 4096, &t->spines);
  if (KEY("oversubscription"))
    return get_double(x, v, key, 0.01, 1000, &t->oversubscription);
  if (KEY("rails"))
    return get_u32(x, v, key, 1, 16, &t->rails);
  if (KEY("k")) {
    if (get_u32(x, v, key, 2, 128, &t->k))
      return -1;
    if (t->k % 2)
      return fail(x, v, "'k': a fat-tree needs an even k, got %u", t->k);
    return 0;
  }
  if (KEY("links"))
    return walk(x, v, "topology.links", links_fn, t);
  return 1;
}

static int ecn_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_switch_cfg *s = a;
  if (KEY("enabled"))
    return get_bool(x, v, key, &s->ecn);
  if (KEY("kmin"))
    return get_bytes(x, v, key, 0, &s->kmin);
  if (KEY("kmax"))
    return get_bytes(x, v, key, 1, &s->kmax);
  if (KEY("pmax"))
    return get_double(x, v, key, 0, 1, &s->pmax);
  return 1;
}

static int pfc_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_switch_cfg *s = a;
  if (KEY("enabled"))
    return get_bool(x, v, key, &s->pfc);
  if (KEY("xoff"))
    return get_bytes(x, v, key, 1, &s->xoff);
  if (KEY("xon"))
    return get_bytes(x, v, key, 0, &s->xon);
  if (KEY("headroom")) {
    if (sval(v) && !strcmp(sval(v), "auto")) {
      s->headroom = -1;
      return 0;
    }
    uint64_t b;
    if (get_bytes(x, v, key, 0, &b))
      return -1;
    s->headroom = (int64_t)b;
    return 0;
  }
  if (KEY("priorities")) {
    if (v->type != YAML_SEQUENCE_NODE)
      return fail(x, v, "'priorities': expected a list like [3]");
    s->pfc_prios = 0;
    for (yaml_node_item_t *i = v->data.sequence.items.start;
         i < v->data.sequence.items.top; i++) {
      uint32_t p;
      if (get_u32(x, yaml_document_get_node(x->doc, *i), "priorities", 0, 7,
                  &p))
        return -1;
      s->pfc_prios |= (uint8_t)(1u << p);
    }
    return 0;
  }
  return 1;
}

/* Remembers the first key that only Ethernet has. */
static void eth_key(struct ctx *x, yaml_node_t *v, const char *name) {
  if (!x->eth_at) {
    x->eth_at = v;
    x->eth_key = name;
  }
}

static int switch_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_switch_cfg *s = a;
  static const char *const names[] = {"switch.buffer", "switch.queue_max",
                                      "switch.ecn", "switch.pfc"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(key, names[i] + 7))
      eth_key(x, v, names[i]);
  if (KEY("buffer"))
    return get_bytes(x, v, key, 1, &s->buffer_bytes);
  if (KEY("queue_max"))
    return get_bytes(x, v, key, 0, &s->qmax_bytes);
  if (KEY("ecn"))
    return walk(x, v, "switch.ecn", ecn_fn, s);
  if (KEY("pfc"))
    return walk(x, v, "switch.pfc", pfc_fn, s);
  return 1;
}

static int dcqcn_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct uroce_dcqcn_params *p = a;
  double d;
  uint64_t u;
  sim_time_t t;
  if (KEY("preset")) {
    static const char *const presets[] = {"mellanox", "ns3", 0};
    int e;
    if (get_enum(x, v, key, presets, &e))
      return -1;
    if (e == 0)
      uroce_dcqcn_params_mlx(p, p->line_rate_bps);
    else
      uroce_dcqcn_params_ns3(p, p->line_rate_bps);
    return 0;
  }
  if (KEY("g"))
    return get_double(x, v, key, 1e-6, 1, &p->g);
  if (KEY("initial_alpha"))
    return get_double(x, v, key, 0, 1, &p->initial_alpha);
  if (KEY("fast_recovery_steps"))
    return get_u32(x, v, key, 0, 1000, &p->fast_recovery_steps);
  if (KEY("byte_counter"))
    return get_bytes(x, v, key, 0, &p->byte_counter);
  struct {
    const char *k;
    uint64_t *dst;
    int is_rate;
  } f[] = {{"alpha_timer_us", &p->alpha_timer_ns, 0},
           {"rate_decrease_us", &p->rate_decrease_ns, 0},
           {"rate_increase_us", &p->rate_increase_ns, 0},
           {"cnp_interval_us", &p->cnp_interval_ns, 0},
           {"rai_mbps", &p->rai_bps, 1},
           {"rhai_mbps", &p->rhai_bps, 1},
           {"min_rate_mbps", &p->min_rate_bps, 1}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    if (strcmp(key, f[i].k))
      continue;
    if (f[i].is_rate) {
      if (get_double(x, v, key, 0, 1e7, &d))
        return -1;
      *f[i].dst = (uint64_t)llround(d * 1e6);
    } else {
      if (get_time(x, v, key, 1e6, &t))
        return -1;
      u = t / 1000;
      if (!u)
        return fail(x, v, "'%s' must be at least 1 ns", key);
      *f[i].dst = u;
    }
    return 0;
  }
  return 1;
}

static int transport_fn(struct ctx *x, const char *key, yaml_node_t *v,
                        void *a) {
  struct sim_transport_cfg *t = a;
  uint32_t u;
  if (KEY("model")) {
    static const char *const m[] = {"uroce", "simple", 0};
    int e;
    if (get_enum(x, v, key, m, &e))
      return -1;
    t->model = (enum sim_host_model)e;
    return 0;
  }
  if (KEY("mtu")) {
    if (get_u32(x, v, key, 256, 4096, &u))
      return -1;
    if (u & (u - 1))
      return fail(x, v, "'mtu': expected 256, 512, 1024, 2048 or 4096");
    t->mtu = u;
    return 0;
  }
  if (KEY("window")) {
    if (get_u32(x, v, key, 1, 65536, &u))
      return -1;
    if (u & (u - 1))
      return fail(x, v, "'window': expected a power of two");
    t->window = u;
    return 0;
  }
  if (KEY("ack_every"))
    return get_u32(x, v, key, 1, 65536, &t->ack_every);
  if (KEY("paths"))
    return get_u32(x, v, key, 1, 16384, &t->paths);
  if (KEY("rto_us"))
    return get_time(x, v, key, 1e6, &t->rto);
  if (KEY("out_of_order")) {
    static const char *const o[] = {"false", "true", "auto", 0};
    int e;
    if (get_enum(x, v, key, o, &e))
      return -1;
    t->ooo = e == 2 ? -1 : e;
    return 0;
  }
  if (KEY("ipv6")) {
    eth_key(x, v, "transport.ipv6");
    return get_bool(x, v, key, &t->ipv6);
  }
  if (KEY("data_priority")) {
    if (get_u32(x, v, key, 0, 7, &u))
      return -1;
    t->data_prio = (uint8_t)u;
    return 0;
  }
  if (KEY("control_priority")) {
    if (get_u32(x, v, key, 0, 7, &u))
      return -1;
    t->ctrl_prio = (uint8_t)u;
    return 0;
  }
  if (KEY("cc")) {
    static const char *const cc[] = {"none", "dcqcn", "swift", 0};
    int e;
    if (get_enum(x, v, key, cc, &e))
      return -1;
    t->cc = (enum sim_cc)e;
    if (t->cc == SIM_CC_DCQCN)
      eth_key(x, v, "transport.cc dcqcn");
    return 0;
  }
  if (KEY("dcqcn")) {
    eth_key(x, v, "transport.dcqcn");
    if (v->type != YAML_MAPPING_NODE)
      return fail(x, v, "'transport.dcqcn': expected a mapping of keys");
    x->dcqcn = v;
    return 0;
  }
  return 1;
}

static int workload_fn(struct ctx *x, const char *key, yaml_node_t *v,
                       void *a) {
  struct sim_workload_cfg *w = a;
  struct sim_coll_cfg *cc = &w->coll;
  int e;
  if (KEY("kind") || KEY("type")) {
    static const char *const k[] = {
        "none", "permutation", "incast", "all_to_all", "csv", "collective", 0};
    if (get_enum(x, v, key, k, &e))
      return -1;
    w->kind = (enum sim_workload_kind)e;
    return 0;
  }
  if (KEY("size"))
    return get_bytes(x, v, key, 1, &w->bytes);
  if (KEY("size_distribution")) {
    if (get_path(x, v, key, w->dist_path, sizeof w->dist_path))
      return -1;
    char msg[400];
    free(w->dist.bytes);
    free(w->dist.cdf);
    if (sim_size_dist_load(w->dist_path, &w->dist, msg, sizeof msg))
      return fail(x, v, "'size_distribution': %s", msg);
    return 0;
  }
  if (KEY("senders"))
    return get_u32(x, v, key, 1, 1u << 20, &w->incast_senders);
  if (KEY("receiver"))
    return get_u32(x, v, key, 0, 1u << 20, &w->incast_receiver);
  if (KEY("start_us"))
    return get_time(x, v, key, 1e6, &w->start);
  if (KEY("file"))
    return get_path(x, v, key, w->csv_path, sizeof w->csv_path);
  /* collective */
  if (KEY("collective")) {
    static const char *const k[] = {"allreduce",
                                    "reduce_scatter",
                                    "allgather",
                                    "broadcast",
                                    "reduce",
                                    "all_to_all",
                                    0};
    if (get_enum(x, v, key, k, &e))
      return -1;
    cc->kind = e;
    return 0;
  }
  if (KEY("algo")) {
    static const char *const al[] = {"auto",     "ring", "tree", "rhd",
                                     "pairwise", "hier", 0};
    if (get_enum(x, v, key, al, &e))
      return -1;
    cc->algo = e;
    return 0;
  }
  if (KEY("dtype")) {
    static const char *const d[] = {"float32", "float16", "bfloat16", "int32",
                                    "int64",   "float64", 0};
    if (get_enum(x, v, key, d, &e))
      return -1;
    cc->dtype = e;
    return 0;
  }
  if (KEY("ranks")) {
    if (sval(v) && !strcmp(sval(v), "all")) {
      cc->ranks = 0;
      return 0;
    }
    return get_u32(x, v, key, 2, 1u << 20, &cc->ranks);
  }
  if (KEY("chunk"))
    return get_bytes(x, v, key, 64, &cc->chunk_bytes);
  if (KEY("placement")) {
    static const char *const pl[] = {"linear", "random", 0};
    if (get_enum(x, v, key, pl, &e))
      return -1;
    cc->placement = e;
    return 0;
  }
  if (KEY("slots"))
    return get_u32(x, v, key, 1, 64, &cc->slots);
  if (KEY("ranks_per_host"))
    return get_u32(x, v, key, 1, 1024, &cc->ranks_per_host);
  if (KEY("nics_per_host"))
    return get_u32(x, v, key, 1, 1024, &cc->nics_per_host);
  if (KEY("intra_host_gbps"))
    return get_double(x, v, key, 0.001, 1e6, &cc->intra_gbps);
  if (KEY("intra_host_latency_us"))
    return get_double(x, v, key, 0, 1e6, &cc->intra_latency_us);
  if (KEY("sizes")) {
    if (v->type != YAML_SEQUENCE_NODE)
      return fail(x, v, "'sizes': expected a list like [1MiB, 16MiB]");
    cc->nsizes = 0;
    for (yaml_node_item_t *i = v->data.sequence.items.start;
         i < v->data.sequence.items.top; i++) {
      yaml_node_t *n = yaml_document_get_node(x->doc, *i);
      if (cc->nsizes == SIM_COLL_MAX_SIZES)
        return fail(x, n, "'sizes': at most %d sizes", SIM_COLL_MAX_SIZES);
      if (get_bytes(x, n, "sizes", 1, &cc->sizes[cc->nsizes]))
        return -1;
      cc->nsizes++;
    }
    x->sizes_at = v;
    return 0;
  }
  if (KEY("min")) {
    x->range_at = v;
    return get_bytes(x, v, key, 1, &x->cmin);
  }
  if (KEY("max")) {
    x->range_at = v;
    return get_bytes(x, v, key, 1, &x->cmax);
  }
  if (KEY("factor")) {
    x->range_at = v;
    return get_double(x, v, key, 1.01, 1024, &x->cfactor);
  }
  return 1;
}

/* The collective's sizes from min, max and factor, after the walk. */
static int coll_sizes(struct ctx *x) {
  struct sim_coll_cfg *cc = &x->c->wl.coll;
  if (x->sizes_at && x->range_at)
    return fail(x, x->range_at,
                "workload: give either 'sizes' or 'min'/'max'/'factor'");
  if (x->range_at) {
    if (!x->cmin || !x->cmax || x->cmax < x->cmin)
      return fail(x, x->range_at,
                  "workload: 'min' and 'max' are both needed, min <= max");
    cc->nsizes = 0;
    for (double b = (double)x->cmin; b <= (double)x->cmax * (1 + 1e-9);
         b *= x->cfactor) {
      if (cc->nsizes == SIM_COLL_MAX_SIZES)
        return fail(x, x->range_at, "workload: more than %d sizes",
                    SIM_COLL_MAX_SIZES);
      cc->sizes[cc->nsizes++] = (uint64_t)(b + 0.5);
    }
  }
  if (x->c->wl.kind == SIM_WL_COLLECTIVE && !cc->nsizes)
    return fail(x, x->wl,
                "workload kind collective needs 'sizes' or 'min' and 'max'");
  return 0;
}

/* A VL arbitration table: a list of [vl, weight] pairs. */
static int get_vlarb(struct ctx *x, yaml_node_t *v, const char *key,
                     struct sim_vlarb_ent *t, uint8_t *n) {
  if (v->type != YAML_SEQUENCE_NODE)
    return fail(x, v, "'%s': expected a list of [vl, weight] pairs", key);
  *n = 0;
  for (yaml_node_item_t *i = v->data.sequence.items.start;
       i < v->data.sequence.items.top; i++) {
    yaml_node_t *e = yaml_document_get_node(x->doc, *i);
    if (*n == SIM_VLARB_MAX)
      return fail(x, e, "'%s': at most %d entries", key, SIM_VLARB_MAX);
    if (e->type != YAML_SEQUENCE_NODE ||
        e->data.sequence.items.top - e->data.sequence.items.start != 2)
      return fail(x, e, "'%s': each entry is [vl, weight]", key);
    uint32_t vl, w;
    yaml_node_t *a =
        yaml_document_get_node(x->doc, e->data.sequence.items.start[0]);
    yaml_node_t *b =
        yaml_document_get_node(x->doc, e->data.sequence.items.start[1]);
    if (get_u32(x, a, key, 0, 7, &vl) || get_u32(x, b, key, 0, 255, &w))
      return -1;
    t[(*n)++] = (struct sim_vlarb_ent){(uint8_t)vl, (uint8_t)w};
  }
  return 0;
}

static int sm_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_sm_cfg *sm = a;
  uint32_t u;
  if (KEY("routing_engine")) {
    static const char *const e[] = {"ftree", "minhop", "updn", 0};
    int i;
    if (get_enum(x, v, key, e, &i))
      return -1;
    sm->engine = (enum sim_sm_engine)i;
    return 0;
  }
  if (KEY("lmc")) {
    if (get_u32(x, v, key, 0, 7, &u))
      return -1;
    sm->lmc = (uint8_t)u;
    return 0;
  }
  if (KEY("max_wire_smps"))
    return get_u32(x, v, key, 1, 4096, &sm->max_wire_smps);
  if (KEY("smp_processing_ns"))
    return get_time(x, v, key, 1e3, &sm->smp_proc);
  if (KEY("route_ns"))
    return get_time(x, v, key, 1e3, &sm->route_time);
  return 1;
}

static int ibcc_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_ibcc_cfg *cc = a;
  if (KEY("enabled"))
    return get_bool(x, v, key, &cc->enabled);
  if (KEY("threshold"))
    return get_bytes(x, v, key, 0, &cc->threshold);
  if (KEY("marking_rate"))
    return get_u32(x, v, key, 1, 65535, &cc->marking_rate);
  if (KEY("ccti_increase"))
    return get_u32(x, v, key, 0, 16383, &cc->ccti_increase);
  if (KEY("ccti_limit"))
    return get_u32(x, v, key, 0, 16383, &cc->ccti_limit);
  if (KEY("ccti_timer_us"))
    return get_time(x, v, key, 1e6, &cc->ccti_timer);
  if (KEY("ird_step_ns"))
    return get_time(x, v, key, 1e3, &cc->ird_step);
  return 1;
}

static int ib_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_ib_cfg *ib = a;
  uint32_t u;
  if (KEY("sm"))
    return walk(x, v, "infiniband.sm", sm_fn, &ib->sm);
  if (KEY("cc"))
    return walk(x, v, "infiniband.cc", ibcc_fn, &ib->cc);
  if (KEY("vlarb_high"))
    return get_vlarb(x, v, key, ib->high, &ib->nhigh);
  if (KEY("vlarb_low"))
    return get_vlarb(x, v, key, ib->low, &ib->nlow);
  if (KEY("high_limit")) {
    if (get_u32(x, v, key, 0, 255, &u))
      return -1;
    ib->high_limit = (uint8_t)u;
    return 0;
  }
  if (KEY("vl_buffer"))
    return get_bytes(x, v, key, SIM_IB_BLOCK, &ib->vl_buffer);
  if (KEY("fc_latency_ns"))
    return get_time(x, v, key, 1e3, &ib->fc_latency);
  if (KEY("fc_period_ns"))
    return get_time(x, v, key, 1e3, &ib->fc_period);
  if (KEY("grh"))
    return get_bool(x, v, key, &ib->grh);
  if (KEY("vls")) {
    if (get_u32(x, v, key, 1, 8, &u))
      return -1;
    if (u & (u - 1))
      return fail(x, v, "'vls': expected 1, 2, 4 or 8");
    ib->vls = (uint8_t)u;
    return 0;
  }
  return 1;
}

/* Keys of the other fabric are errors naming them; InfiniBand routes
 * by its static LFTs unless 'routing' says adaptive. */
static int fabric_check(struct ctx *x) {
  struct sim_cfg *c = x->c;
  if (c->fabric == SIM_FABRIC_ROCE) {
    if (x->ib_at)
      return fail(x, x->ib_at,
                  "'infiniband' and 'recovery.trap_us' need 'fabric: "
                  "infiniband' (the fabric is roce)");
    return 0;
  }
  if (x->eth_at)
    return fail(
        x, x->eth_at,
        "'%s' is Ethernet's; it makes no sense with 'fabric: "
        "infiniband' (credits replace PFC and buffers, see docs/sim.md)",
        x->eth_key);
  if (!x->routing_at)
    c->routing = SIM_ROUTE_STATIC;
  else if (c->routing == SIM_ROUTE_ECMP || c->routing == SIM_ROUTE_SPRAY)
    return fail(x, x->routing_at,
                "'routing': %s is Ethernet's; with 'fabric: infiniband' use "
                "static or adaptive",
                c->routing == SIM_ROUTE_ECMP ? "ecmp" : "spray");
  return 0;
}

static int fail_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_failure *f = a;
  uint32_t u;
  if (KEY("at_us"))
    return get_time(x, v, key, 1e6, &f->at);
  if (KEY("up_after_us"))
    return get_time(x, v, key, 1e6, &f->up_after);
  if (KEY("switch"))
    return get_u32(x, v, key, 0, UINT32_MAX - 1, &f->sw);
  if (KEY("port")) {
    if (get_u32(x, v, key, 0, 65535, &u))
      return -1;
    f->port = (uint16_t)u;
    f->kind = SIM_FAIL_LINK;
    return 0;
  }
  return 1;
}

/* failures: a list of {at_us, switch, port[, up_after_us]}; without
 * port, the whole switch fails. */
static int get_failures(struct ctx *x, yaml_node_t *v, struct sim_cfg *c) {
  if (v->type != YAML_SEQUENCE_NODE)
    return fail(x, v, "'failures': expected a list of {at_us, switch, port}");
  c->nfail = 0;
  for (yaml_node_item_t *i = v->data.sequence.items.start;
       i < v->data.sequence.items.top; i++) {
    yaml_node_t *e = yaml_document_get_node(x->doc, *i);
    if (c->nfail == SIM_FAIL_MAX)
      return fail(x, e, "'failures': at most %d", SIM_FAIL_MAX);
    struct sim_failure *f = &c->fail[c->nfail++];
    *f = (struct sim_failure){.kind = SIM_FAIL_SWITCH, .sw = UINT32_MAX};
    if (walk(x, e, "failures", fail_fn, f))
      return -1;
    if (f->sw == UINT32_MAX)
      return fail(x, e,
                  "'failures': each needs 'switch' (and 'port' for a "
                  "link)");
  }
  return 0;
}

static int recovery_fn(struct ctx *x, const char *key, yaml_node_t *v,
                       void *a) {
  struct sim_recovery_cfg *r = a;
  if (KEY("detection_us")) {
    eth_key(x, v, "recovery.detection_us");
    return get_time(x, v, key, 1e6, &r->detection);
  }
  if (KEY("convergence_us")) {
    eth_key(x, v, "recovery.convergence_us");
    return get_time(x, v, key, 1e6, &r->convergence);
  }
  if (KEY("trap_us")) {
    if (!x->ib_at)
      x->ib_at = v;
    return get_time(x, v, key, 1e6, &r->trap);
  }
  return 1;
}

static int top_fn(struct ctx *x, const char *key, yaml_node_t *v, void *a) {
  struct sim_cfg *c = x->c;
  if (KEY("name")) {
    if (need_scalar(x, v, key))
      return -1;
    for (const char *p = sval(v); *p; p++)
      if (!(*p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') ||
            (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        return fail(x, v, "'name': letters, digits, '-', '_' and '.' only");
    snprintf(x->name, x->namelen, "%s", sval(v));
    return 0;
  }
  if (KEY("seed"))
    return get_u64(x, v, key, 0, UINT64_MAX, &c->seed);
  if (KEY("stop_time_us"))
    return get_time(x, v, key, 1e6, &c->stop_time);
  if (KEY("sample_interval_us"))
    return get_time(x, v, key, 1e6, &c->sample_interval);
  if (KEY("threads"))
    return get_u32(x, v, key, 0, 256, &c->threads);
  if (KEY("series_flows"))
    return get_u32(x, v, key, 0, 4096, &c->series_flows);
  if (KEY("memory_limit_mb")) {
    uint64_t mb = 0;
    int rc = get_u64(x, v, key, 1, 1ull << 30, &mb);
    c->mem_limit = mb << 20;
    return rc;
  }
  if (KEY("topology"))
    return walk(x, v, "topology", topo_fn, &c->topo);
  if (KEY("switch"))
    return walk(x, v, "switch", switch_fn, &c->sw);
  if (KEY("routing")) {
    static const char *const r[] = {"ecmp", "adaptive", "spray", "static", 0};
    int e;
    if (get_enum(x, v, key, r, &e))
      return -1;
    c->routing = (enum sim_routing)e;
    x->routing_at = v;
    return 0;
  }
  if (KEY("fabric")) {
    static const char *const f[] = {"roce", "infiniband", 0};
    int e;
    if (get_enum(x, v, key, f, &e))
      return -1;
    c->fabric = (enum sim_fabric)e;
    return 0;
  }
  if (KEY("failures"))
    return get_failures(x, v, c);
  if (KEY("recovery"))
    return walk(x, v, "recovery", recovery_fn, &c->recovery);
  if (KEY("infiniband")) {
    if (!x->ib_at)
      x->ib_at = v;
    return walk(x, v, "infiniband", ib_fn, &c->ib);
  }
  if (KEY("transport"))
    return walk(x, v, "transport", transport_fn, &c->tp);
  if (KEY("workload")) {
    x->wl = v;
    return walk(x, v, "workload", workload_fn, &c->wl);
  }
  return 1;
}

int sim_scenario_parse(const char *text, size_t len, const char *label,
                       const char *base, struct sim_cfg *cfg, char *name,
                       size_t namelen, char *err, size_t errlen) {
  sim_cfg_default(cfg);
  cfg->sample_interval = 10 * SIM_US;
  yaml_parser_t p;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&p)) {
    snprintf(err, errlen, "%s: cannot start the YAML parser", label);
    return -1;
  }
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  if (!yaml_parser_load(&p, &doc)) {
    snprintf(err, errlen, "%s:%zu: YAML error: %s", label,
             p.problem_mark.line + 1, p.problem ? p.problem : "?");
    yaml_parser_delete(&p);
    return -1;
  }
  struct ctx x = {.doc = &doc,
                  .label = label,
                  .base = base,
                  .c = cfg,
                  .name = name,
                  .namelen = namelen,
                  .err = err,
                  .errlen = errlen,
                  .cfactor = 2};
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  int rc;
  if (!root)
    rc = fail(&x, 0, "empty scenario");
  else
    rc = walk(&x, root, "scenario", top_fn, 0);
  /* DCQCN starts from the Mellanox preset at the host link rate (its rate
   * steps scale with it); 'preset:' and single keys override it. */
  uroce_dcqcn_params_mlx(&cfg->tp.dcqcn, cfg->topo.link[0].rate_bps);
  if (!rc && x.dcqcn)
    rc = walk(&x, x.dcqcn, "transport.dcqcn", dcqcn_fn, &cfg->tp.dcqcn);
  if (!rc)
    rc = fabric_check(&x);
  if (!rc)
    rc = coll_sizes(&x);
  if (!rc && cfg->wl.kind == SIM_WL_CSV && !cfg->wl.csv_path[0])
    rc = fail(&x, root, "workload kind csv needs 'file'");
  yaml_document_delete(&doc);
  yaml_parser_delete(&p);
  if (rc)
    sim_cfg_free(cfg);
  return rc;
}

int sim_scenario_load(const char *path, struct sim_cfg *cfg, char *name,
                      size_t namelen, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  /* A scenario is a page or two of YAML: read at most SIM_SCENARIO_MAX
   * bytes, so that /dev/zero or a wrong file is refused at once. */
  char *buf = malloc(SIM_SCENARIO_MAX + 1);
  if (!buf) {
    fclose(f);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  size_t len = fread(buf, 1, SIM_SCENARIO_MAX + 1, f);
  if (ferror(f)) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
    free(buf);
    fclose(f);
    return -1;
  }
  if (len > SIM_SCENARIO_MAX) {
    snprintf(err, errlen,
             "%s: larger than %u KiB; a scenario is a short YAML file "
             "(docs/sim.md)",
             path, SIM_SCENARIO_MAX >> 10);
    free(buf);
    fclose(f);
    return -1;
  }
  if (memchr(buf, 0, len)) {
    snprintf(err, errlen, "%s: holds a NUL byte; not a YAML text file", path);
    free(buf);
    fclose(f);
    return -1;
  }
  fclose(f);
  char base[512];
  snprintf(base, sizeof base, "%s", path);
  char *slash = strrchr(base, '/');
  if (slash)
    *slash = 0;
  else
    snprintf(base, sizeof base, ".");
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  snprintf(name, namelen, "%s", b);
  char *dot = strrchr(name, '.');
  if (dot && dot != name)
    *dot = 0;
  int rc =
      sim_scenario_parse(buf, len, path, base, cfg, name, namelen, err, errlen);
  free(buf);
  return rc;
}
