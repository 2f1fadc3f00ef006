#include "sim/scenario.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
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
  yaml_node_t *trim_at; /* switch.trim, checked against PFC and the model */
  char eth_key[64], ib_key[64];
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

/* ---- the keys of each mapping ----
 *
 * A mapping of the scenario is parsed against a table of its keys: what
 * each key's value is, where in the section's struct it goes, and its
 * bounds. walk() rejects anything that is not a mapping, duplicate and
 * unknown keys, and hands each value to the reader of its kind. */

enum key_kind {
  K_UINT,   /* an integer in [ilo, ihi], into an unsigned of any size */
  K_DOUBLE, /* a number in [dlo, dhi] */
  K_SCALED, /* a number in [dlo, dhi] times scale, rounded, into a uint64_t */
  K_TIME,   /* a number of units of scale ps, into a sim_time_t */
  K_US_NS,  /* microseconds into a uint64_t of nanoseconds, at least 1 */
  K_BYTES,  /* a byte count >= ilo, optionally with a unit */
  K_BOOL,
  K_ENUM, /* one of names: its index, into an enum or int */
  K_PATH, /* a file, relative to the scenario's folder, into char[size] */
  K_MAP,  /* a mapping of the keys sub, over the struct at off */
  K_FN,   /* anything else: fn reads it into base + off */
};

enum {
  F_ETH = 1,  /* only Ethernet has it: an error with 'fabric: infiniband' */
  F_IB = 2,   /* only InfiniBand has it */
  F_POW2 = 4, /* K_UINT: a power of two; what says which ones */
};

struct key {
  const char *name;
  enum key_kind kind;
  unsigned flags;
  size_t off, size;
  uint64_t ilo, ihi;
  double dlo, dhi, scale;
  const char *const *names;
  const struct key *sub;
  int (*fn)(struct ctx *x, const char *key, yaml_node_t *v, void *dst);
  const char *what; /* K_MAP: the mapping's name in messages; F_POW2 */
};

/* Entries of a table over struct T (#defined before each table). AT is
 * offsetof that warns (incompatible pointer types) unless the member has
 * the given type; SIZED gives the reader the member's size. */
#define AT(m, type)                                                            \
  .off = offsetof(T, m) + 0 * sizeof((type *){0} = &((T *)0)->m)
#define SIZED(m) .off = offsetof(T, m), .size = sizeof(((T *)0)->m)
#define UINT(k, m, lo, hi, ...)                                                \
  { k, K_UINT, SIZED(m), .ilo = lo, .ihi = hi, __VA_ARGS__ }
#define DOUBLE(k, m, lo, hi, ...)                                              \
  { k, K_DOUBLE, AT(m, double), .dlo = lo, .dhi = hi, __VA_ARGS__ }
#define SCALED(k, m, lo, hi, mul)                                              \
  { k, K_SCALED, AT(m, uint64_t), .dlo = lo, .dhi = hi, .scale = mul }
#define US(k, m, ...)                                                          \
  { k, K_TIME, AT(m, sim_time_t), .scale = 1e6, __VA_ARGS__ }
#define NS(k, m)                                                               \
  { k, K_TIME, AT(m, sim_time_t), .scale = 1e3 }
#define US_NS(k, m)                                                            \
  { k, K_US_NS, AT(m, uint64_t) }
#define BYTES(k, m, lo, ...)                                                   \
  { k, K_BYTES, AT(m, uint64_t), .ilo = lo, __VA_ARGS__ }
#define BOOL(k, m, ...)                                                        \
  { k, K_BOOL, AT(m, bool), __VA_ARGS__ }
#define ENUM(k, m, list)                                                       \
  { k, K_ENUM, SIZED(m), .names = list }
#define PATH(k, m)                                                             \
  { k, K_PATH, SIZED(m) }
#define MAP(k, m, keys, where, ...)                                            \
  { k, K_MAP, .off = offsetof(T, m), .sub = keys, .what = where, __VA_ARGS__ }
#define SAME(k, keys, where, ...) /* a mapping over T itself */                \
  { k, K_MAP, .sub = keys, .what = where, __VA_ARGS__ }
#define FN(k, f, ...)                                                          \
  { k, K_FN, .fn = f, __VA_ARGS__ } /* f gets T */
#define FN_AT(k, m, f)                                                         \
  { k, K_FN, .off = offsetof(T, m), .fn = f }
#define END                                                                    \
  { 0 }

static int walk(struct ctx *x, yaml_node_t *m, const char *where,
                const struct key *keys, void *base);

static void store_uint(void *dst, size_t size, uint64_t u) {
  switch (size) {
  case 1:
    *(uint8_t *)dst = (uint8_t)u;
    break;
  case 2:
    *(uint16_t *)dst = (uint16_t)u;
    break;
  case 4:
    *(uint32_t *)dst = (uint32_t)u;
    break;
  default:
    *(uint64_t *)dst = u;
    break;
  }
}

/* Remembers the first key that only Ethernet has, for fabric_check. */
static void eth_key(struct ctx *x, yaml_node_t *v, const char *where,
                    const char *key) {
  if (!x->eth_at) {
    x->eth_at = v;
    snprintf(x->eth_key, sizeof x->eth_key, "%s.%s", where, key);
  }
}

/* Reads v, the value of key k of the mapping where, into dst. */
static int read_key(struct ctx *x, const struct key *k, const char *where,
                    yaml_node_t *v, void *dst) {
  const char *key = k->name;
  uint64_t u;
  double d;
  sim_time_t t;
  int e;
  if (k->flags & F_ETH)
    eth_key(x, v, where, key);
  if ((k->flags & F_IB) && !x->ib_at) {
    x->ib_at = v;
    if (!strcmp(where, "scenario"))
      snprintf(x->ib_key, sizeof x->ib_key, "%s", key);
    else
      snprintf(x->ib_key, sizeof x->ib_key, "%s.%s", where, key);
  }
  switch (k->kind) {
  case K_UINT:
    if (get_u64(x, v, key, k->ilo, k->ihi, &u))
      return -1;
    if ((k->flags & F_POW2) && (u & (u - 1)))
      return fail(x, v, "'%s': %s", key, k->what);
    store_uint(dst, k->size, u);
    return 0;
  case K_DOUBLE:
    return get_double(x, v, key, k->dlo, k->dhi, dst);
  case K_SCALED:
    if (get_double(x, v, key, k->dlo, k->dhi, &d))
      return -1;
    *(uint64_t *)dst = (uint64_t)llround(d * k->scale);
    return 0;
  case K_TIME:
    return get_time(x, v, key, k->scale, dst);
  case K_US_NS:
    if (get_time(x, v, key, 1e6, &t))
      return -1;
    if (!(t / 1000))
      return fail(x, v, "'%s' must be at least 1 ns", key);
    *(uint64_t *)dst = t / 1000;
    return 0;
  case K_BYTES:
    return get_bytes(x, v, key, k->ilo, dst);
  case K_BOOL:
    return get_bool(x, v, key, dst);
  case K_ENUM:
    if (get_enum(x, v, key, k->names, &e))
      return -1;
    store_uint(dst, k->size, (uint64_t)e);
    return 0;
  case K_PATH:
    return get_path(x, v, key, dst, k->size);
  case K_MAP:
    return walk(x, v, k->what, k->sub, dst);
  case K_FN:
    return k->fn(x, key, v, dst);
  }
  return -1;
}

/* Walks a mapping against its keys, rejecting duplicates and unknown
 * keys; base is the struct the keys' offsets are in. */
static int walk(struct ctx *x, yaml_node_t *m, const char *where,
                const struct key *keys, void *base) {
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
    const struct key *e = keys;
    while (e->name && strcmp(e->name, ks))
      e++;
    if (!e->name)
      return fail(x, k, "unknown key '%s' in '%s'", ks, where);
    if (read_key(x, e, where, v, (char *)base + e->off))
      return -1;
  }
  return 0;
}

/* ---- the values that are more than a key of a kind ---- */

static int topo_k(struct ctx *x, const char *key, yaml_node_t *v, void *dst) {
  uint32_t *k = dst;
  if (get_u32(x, v, key, 2, 128, k))
    return -1;
  if (*k % 2)
    return fail(x, v, "'k': a fat-tree needs an even k, got %u", *k);
  return 0;
}

static int pfc_headroom(struct ctx *x, const char *key, yaml_node_t *v,
                        void *dst) {
  int64_t *h = dst;
  if (sval(v) && !strcmp(sval(v), "auto")) {
    *h = -1;
    return 0;
  }
  uint64_t b;
  if (get_bytes(x, v, key, 0, &b))
    return -1;
  *h = (int64_t)b;
  return 0;
}

static int pfc_priorities(struct ctx *x, const char *key, yaml_node_t *v,
                          void *dst) {
  uint8_t *prios = dst;
  if (v->type != YAML_SEQUENCE_NODE)
    return fail(x, v, "'priorities': expected a list like [3]");
  *prios = 0;
  for (yaml_node_item_t *i = v->data.sequence.items.start;
       i < v->data.sequence.items.top; i++) {
    uint32_t p;
    if (get_u32(x, yaml_document_get_node(x->doc, *i), "priorities", 0, 7, &p))
      return -1;
    *prios |= (uint8_t)(1u << p);
  }
  return 0;
}

static int dcqcn_preset(struct ctx *x, const char *key, yaml_node_t *v,
                        void *dst) {
  struct uroce_dcqcn_params *p = dst;
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

static int tp_ooo(struct ctx *x, const char *key, yaml_node_t *v, void *dst) {
  static const char *const o[] = {"false", "true", "auto", 0};
  int e;
  if (get_enum(x, v, key, o, &e))
    return -1;
  *(int *)dst = e == 2 ? -1 : e;
  return 0;
}

static int tp_cc(struct ctx *x, const char *key, yaml_node_t *v, void *dst) {
  static const char *const cc[] = {"none", "dcqcn", "swift", 0};
  int e;
  if (get_enum(x, v, key, cc, &e))
    return -1;
  *(enum sim_cc *)dst = (enum sim_cc)e;
  if (e == SIM_CC_DCQCN)
    eth_key(x, v, "transport", "cc dcqcn");
  return 0;
}

/* transport.dcqcn is read last, over the preset at the final link rate. */
static int tp_dcqcn(struct ctx *x, const char *key, yaml_node_t *v, void *dst) {
  if (v->type != YAML_MAPPING_NODE)
    return fail(x, v, "'transport.dcqcn': expected a mapping of keys");
  x->dcqcn = v;
  return 0;
}

static int wl_size_dist(struct ctx *x, const char *key, yaml_node_t *v,
                        void *dst) {
  struct sim_workload_cfg *w = dst;
  if (get_path(x, v, key, w->dist_path, sizeof w->dist_path))
    return -1;
  char msg[400];
  free(w->dist.bytes);
  free(w->dist.cdf);
  if (sim_size_dist_load(w->dist_path, &w->dist, msg, sizeof msg))
    return fail(x, v, "'size_distribution': %s", msg);
  return 0;
}

static int coll_ranks(struct ctx *x, const char *key, yaml_node_t *v,
                      void *dst) {
  if (sval(v) && !strcmp(sval(v), "all")) {
    *(uint32_t *)dst = 0;
    return 0;
  }
  return get_u32(x, v, key, 2, 1u << 20, dst);
}

static int coll_size_list(struct ctx *x, const char *key, yaml_node_t *v,
                          void *dst) {
  struct sim_coll_cfg *cc = dst;
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

/* min, max, factor: the collective's sizes, made by coll_sizes. */
static int coll_range(struct ctx *x, const char *key, yaml_node_t *v,
                      void *dst) {
  x->range_at = v;
  if (!strcmp(key, "factor"))
    return get_double(x, v, key, 1.01, 1024, &x->cfactor);
  return get_bytes(x, v, key, 1, !strcmp(key, "min") ? &x->cmin : &x->cmax);
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

/* vlarb_high, vlarb_low: a list of [vl, weight] pairs. */
static int ib_vlarb(struct ctx *x, const char *key, yaml_node_t *v, void *dst) {
  struct sim_ib_cfg *ib = dst;
  bool high = !strcmp(key, "vlarb_high");
  struct sim_vlarb_ent *t = high ? ib->high : ib->low;
  uint8_t *n = high ? &ib->nhigh : &ib->nlow;
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

static int fail_port(struct ctx *x, const char *key, yaml_node_t *v,
                     void *dst) {
  struct sim_failure *f = dst;
  uint32_t u;
  if (get_u32(x, v, key, 0, 65535, &u))
    return -1;
  f->port = (uint16_t)u;
  f->kind = SIM_FAIL_LINK;
  return 0;
}

static int top_name(struct ctx *x, const char *key, yaml_node_t *v, void *dst) {
  if (need_scalar(x, v, key))
    return -1;
  for (const char *p = sval(v); *p; p++)
    if (!(*p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') ||
          (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
      return fail(x, v, "'name': letters, digits, '-', '_' and '.' only");
  snprintf(x->name, x->namelen, "%s", sval(v));
  return 0;
}

static int top_mem_limit(struct ctx *x, const char *key, yaml_node_t *v,
                         void *dst) {
  uint64_t mb = 0;
  int rc = get_u64(x, v, key, 1, 1ull << 30, &mb);
  *(uint64_t *)dst = mb << 20;
  return rc;
}

static int top_routing(struct ctx *x, const char *key, yaml_node_t *v,
                       void *dst) {
  static const char *const r[] = {"ecmp", "adaptive", "spray", "static", 0};
  int e;
  if (get_enum(x, v, key, r, &e))
    return -1;
  *(enum sim_routing *)dst = (enum sim_routing)e;
  x->routing_at = v;
  return 0;
}

/* ---- the tables ---- */

#define T struct sim_link_cfg
static const struct key link_keys[] = {
    SCALED("rate_gbps", rate_bps, 0.001, 100000, 1e9),
    US("delay_us", delay),
    NS("delay_ns", delay),
    DOUBLE("loss", loss, 0, 0.999),
    END,
};
#undef T

/* links.all: the host link's values with these keys, on every tier. */
static int links_all(struct ctx *x, const char *key, yaml_node_t *v,
                     void *dst) {
  struct sim_topo_cfg *t = dst;
  struct sim_link_cfg l = t->link[0];
  if (walk(x, v, "links.all", link_keys, &l))
    return -1;
  t->link[0] = t->link[1] = t->link[2] = l;
  return 0;
}

#define T struct sim_topo_cfg
static const struct key links_keys[] = {
    MAP("host", link[0], link_keys, "links.host"),
    MAP("fabric", link[1], link_keys, "links.fabric"),
    MAP("core", link[2], link_keys, "links.core"),
    FN("all", links_all),
    END,
};

static const char *const topo_kinds[] = {"leaf_spine", "fat_tree", 0};
static const struct key topo_keys[] = {
    ENUM("kind", kind, topo_kinds),
    UINT("leaves", leaves, 1, 65535),
    UINT("hosts_per_leaf", hosts_per_leaf, 1, 4096),
    UINT("spines", spines, 1, 4096),
    DOUBLE("oversubscription", oversubscription, 0.01, 1000),
    UINT("rails", rails, 1, 16),
    FN_AT("k", k, topo_k),
    SAME("links", links_keys, "topology.links"),
    END,
};
#undef T

#define T struct sim_switch_cfg
static const struct key ecn_keys[] = {
    BOOL("enabled", ecn),
    BYTES("kmin", kmin, 0),
    BYTES("kmax", kmax, 1),
    DOUBLE("pmax", pmax, 0, 1),
    END,
};

static const struct key pfc_keys[] = {
    BOOL("enabled", pfc),
    BYTES("xoff", xoff, 1),
    BYTES("xon", xon, 0),
    FN_AT("headroom", headroom, pfc_headroom),
    FN_AT("priorities", pfc_prios, pfc_priorities),
    END,
};

static const struct key trim_keys[] = {
    BOOL("enabled", trim),
    BYTES("queue", trim_queue, 1),
    END,
};

/* switch.trim, remembered for fabric_check. */
static int sw_trim(struct ctx *x, const char *key, yaml_node_t *v, void *dst) {
  x->trim_at = v;
  return walk(x, v, "switch.trim", trim_keys, dst);
}

static const struct key switch_keys[] = {
    BYTES("buffer", buffer_bytes, 1, .flags = F_ETH),
    BYTES("queue_max", qmax_bytes, 0, .flags = F_ETH),
    DOUBLE("dt_alpha", dt_alpha, 0, 64, .flags = F_ETH),
    SAME("ecn", ecn_keys, "switch.ecn", .flags = F_ETH),
    SAME("pfc", pfc_keys, "switch.pfc", .flags = F_ETH),
    FN("trim", sw_trim, .flags = F_ETH),
    END,
};
#undef T

#define T struct uroce_dcqcn_params
static const struct key dcqcn_keys[] = {
    FN("preset", dcqcn_preset),
    DOUBLE("g", g, 1e-6, 1),
    DOUBLE("initial_alpha", initial_alpha, 0, 1),
    UINT("fast_recovery_steps", fast_recovery_steps, 0, 1000),
    BYTES("byte_counter", byte_counter, 0),
    US_NS("alpha_timer_us", alpha_timer_ns),
    US_NS("rate_decrease_us", rate_decrease_ns),
    US_NS("rate_increase_us", rate_increase_ns),
    US_NS("cnp_interval_us", cnp_interval_ns),
    SCALED("rai_mbps", rai_bps, 0, 1e7, 1e6),
    SCALED("rhai_mbps", rhai_bps, 0, 1e7, 1e6),
    SCALED("min_rate_mbps", min_rate_bps, 0, 1e7, 1e6),
    END,
};
#undef T

#define T struct sim_transport_cfg
static const char *const tp_models[] = {"uroce", "simple", 0};
static const struct key transport_keys[] = {
    ENUM("model", model, tp_models),
    UINT("mtu", mtu, 256, 4096, .flags = F_POW2,
         .what = "expected 256, 512, 1024, 2048 or 4096"),
    UINT("window", window, 1, 65536, .flags = F_POW2,
         .what = "expected a power of two"),
    UINT("ack_every", ack_every, 1, 65536),
    UINT("paths", paths, 1, 16384),
    US("rto_us", rto),
    UINT("retry_cnt", retry_cnt, 0, 7),
    FN_AT("out_of_order", ooo, tp_ooo),
    BOOL("ipv6", ipv6, .flags = F_ETH),
    UINT("data_priority", data_prio, 0, 7),
    UINT("control_priority", ctrl_prio, 0, 7),
    FN_AT("cc", cc, tp_cc),
    FN("dcqcn", tp_dcqcn, .flags = F_ETH),
    END,
};
#undef T

#define T struct sim_workload_cfg
static const char *const wl_kinds[] = {
    "none", "permutation", "incast", "all_to_all", "csv", "collective", 0};
static const char *const coll_kinds[] = {"allreduce",
                                         "reduce_scatter",
                                         "allgather",
                                         "broadcast",
                                         "reduce",
                                         "all_to_all",
                                         0};
static const char *const coll_algos[] = {"auto",     "ring", "tree", "rhd",
                                         "pairwise", "hier", 0};
static const char *const coll_dtypes[] = {
    "float32", "float16", "bfloat16", "int32", "int64", "float64", 0};
static const char *const coll_placements[] = {"linear", "random", 0};
static const struct key workload_keys[] = {
    ENUM("kind", kind, wl_kinds),
    ENUM("type", kind, wl_kinds),
    BYTES("size", bytes, 1),
    FN("size_distribution", wl_size_dist),
    UINT("senders", incast_senders, 1, 1u << 20),
    UINT("receiver", incast_receiver, 0, 1u << 20),
    US("start_us", start),
    PATH("file", csv_path),
    /* collective */
    ENUM("collective", coll.kind, coll_kinds),
    ENUM("algo", coll.algo, coll_algos),
    ENUM("dtype", coll.dtype, coll_dtypes),
    FN_AT("ranks", coll.ranks, coll_ranks),
    BYTES("chunk", coll.chunk_bytes, 64),
    ENUM("placement", coll.placement, coll_placements),
    UINT("slots", coll.slots, 1, 64),
    UINT("ranks_per_host", coll.ranks_per_host, 1, 1024),
    UINT("nics_per_host", coll.nics_per_host, 1, 1024),
    DOUBLE("intra_host_gbps", coll.intra_gbps, 0.001, 1e6),
    DOUBLE("intra_host_latency_us", coll.intra_latency_us, 0, 1e6),
    FN_AT("sizes", coll, coll_size_list),
    FN("min", coll_range),
    FN("max", coll_range),
    FN("factor", coll_range),
    END,
};
#undef T

static int top_workload(struct ctx *x, const char *key, yaml_node_t *v,
                        void *dst) {
  x->wl = v;
  return walk(x, v, "workload", workload_keys, dst);
}

#define T struct sim_sm_cfg
static const char *const sm_engines[] = {"ftree", "minhop", "updn", 0};
static const struct key sm_keys[] = {
    ENUM("routing_engine", engine, sm_engines),
    UINT("lmc", lmc, 0, 7),
    UINT("max_wire_smps", max_wire_smps, 1, 4096),
    NS("smp_processing_ns", smp_proc),
    NS("route_ns", route_time),
    US("sweep_interval_us", sweep_interval),
    UINT("standby_nic", standby_nic, 1, 16777215),
    US("polling_timeout_us", polling_timeout),
    UINT("polling_retries", polling_retries, 1, 255),
    US("smp_timeout_us", smp_timeout),
    UINT("smp_retries", smp_retries, 0, 255),
    END,
};
#undef T

#define T struct sim_ibcc_cfg
static const struct key ibcc_keys[] = {
    BOOL("enabled", enabled),
    BYTES("threshold", threshold, 0),
    UINT("marking_rate", marking_rate, 1, 65535),
    UINT("ccti_increase", ccti_increase, 0, 16383),
    UINT("ccti_limit", ccti_limit, 0, 16383),
    US("ccti_timer_us", ccti_timer),
    NS("ird_step_ns", ird_step),
    END,
};
#undef T

#define T struct sim_ib_cfg
static const struct key ib_keys[] = {
    MAP("sm", sm, sm_keys, "infiniband.sm"),
    MAP("cc", cc, ibcc_keys, "infiniband.cc"),
    FN("vlarb_high", ib_vlarb),
    FN("vlarb_low", ib_vlarb),
    UINT("high_limit", high_limit, 0, 255),
    BYTES("vl_buffer", vl_buffer, SIM_IB_BLOCK),
    BYTES("vl15_buffer", vl15_buffer, 292),
    NS("fc_latency_ns", fc_latency),
    NS("fc_period_ns", fc_period),
    BOOL("grh", grh),
    UINT("vls", vls, 1, 8, .flags = F_POW2, .what = "expected 1, 2, 4 or 8"),
    END,
};
#undef T

#define T struct sim_failure
static const struct key fail_keys[] = {
    US("at_us", at),
    US("up_after_us", up_after),
    UINT("switch", sw, 0, UINT32_MAX - 1),
    FN("port", fail_port),
    BOOL("trap_lost", trap_lost, .flags = F_IB),
    END,
};
#undef T

/* failures: a list of {at_us, switch, port[, up_after_us]}; without
 * port, the whole switch fails. */
static int failures(struct ctx *x, const char *key, yaml_node_t *v, void *dst) {
  struct sim_cfg *c = dst;
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
    if (walk(x, e, "failures", fail_keys, f))
      return -1;
    if (f->sw == UINT32_MAX)
      return fail(x, e,
                  "'failures': each needs 'switch' (and 'port' for a "
                  "link)");
  }
  return 0;
}

#define T struct sim_recovery_cfg
static const struct key recovery_keys[] = {
    US("detection_us", detection, .flags = F_ETH),
    US("convergence_us", convergence, .flags = F_ETH),
    US("trap_us", trap, .flags = F_IB),
    BOOL("traps", traps, .flags = F_IB),
    END,
};
#undef T

#define T struct sim_cfg
static const char *const fabrics[] = {"roce", "infiniband", 0};
static const struct key top_keys[] = {
    FN("name", top_name),
    UINT("seed", seed, 0, UINT64_MAX),
    US("stop_time_us", stop_time),
    US("sample_interval_us", sample_interval),
    UINT("threads", threads, 0, 256),
    UINT("series_flows", series_flows, 0, 4096),
    FN_AT("memory_limit_mb", mem_limit, top_mem_limit),
    MAP("topology", topo, topo_keys, "topology"),
    MAP("switch", sw, switch_keys, "switch"),
    FN_AT("routing", routing, top_routing),
    ENUM("fabric", fabric, fabrics),
    FN("failures", failures),
    MAP("recovery", recovery, recovery_keys, "recovery"),
    MAP("infiniband", ib, ib_keys, "infiniband", .flags = F_IB),
    MAP("transport", tp, transport_keys, "transport"),
    FN_AT("workload", wl, top_workload),
    END,
};
#undef T

/* Trimming replaces a lossy queue's drop: a lossless data priority never
 * overflows, and the built-in host model has no headers to keep. */
static int trim_check(struct ctx *x) {
  const struct sim_cfg *c = x->c;
  if (!c->sw.trim)
    return 0;
  if (c->sw.pfc && ((c->sw.pfc_prios >> c->tp.data_prio) & 1))
    return fail(x, x->trim_at,
                "'switch.trim' makes no sense with a lossless data priority "
                "(switch.pfc on priority %u, which pauses instead of "
                "overflowing): set 'pfc: {enabled: false}' or move the data",
                (unsigned)c->tp.data_prio);
  if (c->tp.model != SIM_HOST_UROCE)
    return fail(x, x->trim_at,
                "'switch.trim' needs 'transport.model: uroce' (the simple "
                "model's packets carry no headers to keep)");
  return 0;
}

/* Keys of the other fabric are errors naming them; InfiniBand routes
 * by its static LFTs unless 'routing' says adaptive. */
static int fabric_check(struct ctx *x) {
  struct sim_cfg *c = x->c;
  if (c->fabric == SIM_FABRIC_ROCE) {
    if (x->ib_at)
      return fail(x, x->ib_at,
                  "'%s' is InfiniBand's; it needs 'fabric: infiniband' (the "
                  "fabric is roce)",
                  x->ib_key);
    return trim_check(x);
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
    rc = walk(&x, root, "scenario", top_keys, cfg);
  /* DCQCN starts from the Mellanox preset at the host link rate (its rate
   * steps scale with it); 'preset:' and single keys override it. */
  uroce_dcqcn_params_mlx(&cfg->tp.dcqcn, cfg->topo.link[0].rate_bps);
  if (!rc && x.dcqcn)
    rc = walk(&x, x.dcqcn, "transport.dcqcn", dcqcn_keys, &cfg->tp.dcqcn);
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
