/* Plan specs and parts catalogues: YAML (libyaml) into struct plan_spec /
 * struct plan_catalogue. Every error names the file, line and key, and
 * unknown or duplicate keys are errors, so a typo cannot silently fall back
 * to a default. */
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "plan/plan.h"

struct ctx {
  yaml_document_t *doc;
  const char *label, *base;
  char *err;
  size_t errlen;
};

static int fail(struct ctx *x, const yaml_node_t *n, const char *key,
                const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(x->err, x->errlen, "%s:%zu: %s: %s", x->label,
           n ? n->start_mark.line + 1 : (size_t)0, key, msg);
  return -1;
}

static yaml_node_t *node(struct ctx *x, int id) {
  return yaml_document_get_node(x->doc, id);
}

static const char *sval(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value
                                          : NULL;
}

/* Rejects duplicate keys: a repeated key would otherwise win silently. */
static int check_map(struct ctx *x, yaml_node_t *m, const char *key) {
  if (!m || m->type != YAML_MAPPING_NODE)
    return fail(x, m, key, "expected a mapping");
  for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
       p < m->data.mapping.pairs.top; p++) {
    const char *k = sval(node(x, p->key));
    if (!k)
      return fail(x, node(x, p->key), key, "keys must be names");
    for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++)
      if (!strcmp(k, sval(node(x, q->key))))
        return fail(x, node(x, p->key), k, "duplicate key");
  }
  return 0;
}

static int get_double(struct ctx *x, yaml_node_t *n, const char *key, double lo,
                      double hi, double *out) {
  const char *s = sval(n);
  char *e;
  if (!s || !*s)
    return fail(x, n, key, "expected a number");
  errno = 0;
  double v = strtod(s, &e);
  if (*e || errno || !isfinite(v))
    return fail(x, n, key, "expected a number, got '%s'", s);
  if (v < lo || v > hi)
    return fail(x, n, key, "%s is out of range [%g, %g]", s, lo, hi);
  *out = v;
  return 0;
}

static int get_u32(struct ctx *x, yaml_node_t *n, const char *key, uint32_t lo,
                   uint32_t hi, uint32_t *out) {
  const char *s = sval(n);
  char *e;
  if (!s || !*s)
    return fail(x, n, key, "expected an integer");
  errno = 0;
  unsigned long long v = strtoull(s, &e, 10);
  if (*e || errno || s[0] == '-')
    return fail(x, n, key, "expected an integer, got '%s'", s);
  if (v < lo || v > hi)
    return fail(x, n, key, "%s is out of range [%u, %u]", s, lo, hi);
  *out = (uint32_t)v;
  return 0;
}

static int get_bool(struct ctx *x, yaml_node_t *n, const char *key, bool *out) {
  const char *s = sval(n);
  if (s && (!strcmp(s, "true") || !strcmp(s, "yes")))
    *out = true;
  else if (s && (!strcmp(s, "false") || !strcmp(s, "no")))
    *out = false;
  else
    return fail(x, n, key, "expected true or false");
  return 0;
}

/* Sizes: 1048576, 1MiB, 1MB (10^6), 2GiB ... */
static bool parse_size(const char *s, double *out) {
  static const struct {
    const char *suf;
    double mul;
  } u[] = {{"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
           {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},
           {"B", 1.0},      {"", 1.0}};
  char *e;
  if (!s || !*s)
    return false;
  double v = strtod(s, &e);
  for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
    if (!strcmp(e, u[i].suf) && e != s && v >= 0 && isfinite(v)) {
      *out = v * u[i].mul;
      return true;
    }
  return false;
}

static int get_bytes(struct ctx *x, yaml_node_t *n, const char *key,
                     double *out) {
  const char *s = sval(n);
  if (!s || !*s)
    return fail(x, n, key, "expected a size such as 64MiB");
  if (!parse_size(s, out))
    return fail(x, n, key, "expected a size such as 64MiB, got '%s'", s);
  return 0;
}

static int get_str(struct ctx *x, yaml_node_t *n, const char *key, char *out,
                   size_t len) {
  const char *s = sval(n);
  if (!s || !*s)
    return fail(x, n, key, "expected a string");
  if (strlen(s) >= len)
    return fail(x, n, key, "longer than %zu characters", len - 1);
  snprintf(out, len, "%s", s);
  return 0;
}

/* A sequence (or one scalar, taken as a one-item list). */
static int seq_items(struct ctx *x, yaml_node_t *n, const char *key,
                     yaml_node_t **items, uint32_t max, uint32_t *count) {
  if (n && n->type == YAML_SCALAR_NODE) {
    items[0] = n;
    *count = 1;
    return 0;
  }
  if (!n || n->type != YAML_SEQUENCE_NODE)
    return fail(x, n, key, "expected a list");
  uint32_t c = 0;
  for (yaml_node_item_t *i = n->data.sequence.items.start;
       i < n->data.sequence.items.top; i++) {
    if (c == max)
      return fail(x, n, key, "at most %u entries", max);
    items[c++] = node(x, *i);
  }
  if (!c)
    return fail(x, n, key, "the list is empty");
  *count = c;
  return 0;
}

const char *plan_fabric_name(enum plan_fabric f) {
  static const char *n[] = {"infiniband", "roce", "uet"};
  return f < PLAN_NFABRIC ? n[f] : "?";
}

/* ---- Catalogue. ---- */

static int parse_part(struct ctx *x, yaml_node_t *m, struct plan_part *p) {
  if (check_map(x, m, "parts[]"))
    return -1;
  memset(p, 0, sizeof *p);
  bool have_kind = false, have_price = false, have_src = false;
  int fam = -1;
  snprintf(p->file, sizeof p->file, "%s", x->label);
  p->line = m->start_mark.line + 1;
  for (yaml_node_pair_t *q = m->data.mapping.pairs.start;
       q < m->data.mapping.pairs.top; q++) {
    const char *k = sval(node(x, q->key));
    yaml_node_t *v = node(x, q->value);
    int rc = 0;
    if (!strcmp(k, "name")) {
      rc = get_str(x, v, k, p->name, sizeof p->name);
    } else if (!strcmp(k, "kind")) {
      static const char *kinds[] = {"nic", "switch",      "dac",
                                    "aoc", "transceiver", "fibre"};
      const char *s = sval(v);
      size_t i = 0;
      while (i < 6 && (!s || strcmp(s, kinds[i])))
        i++;
      if (i == 6)
        return fail(x, v, k,
                    "expected nic, switch, dac, aoc, transceiver or fibre");
      p->kind = (enum plan_part_kind)i;
      have_kind = true;
    } else if (!strcmp(k, "family")) {
      const char *s = sval(v);
      if (s && !strcmp(s, "infiniband"))
        fam = PLAN_FAM_IB;
      else if (s && !strcmp(s, "ethernet"))
        fam = PLAN_FAM_ETH;
      else
        return fail(x, v, k, "expected infiniband or ethernet");
    } else if (!strcmp(k, "speed_gbps")) {
      rc = get_double(x, v, k, 1, 1e5, &p->speed_gbps);
    } else if (!strcmp(k, "radix")) {
      rc = get_u32(x, v, k, 2, 4096, &p->radix);
    } else if (!strcmp(k, "reach_m")) {
      rc = get_double(x, v, k, 0.1, 1e5, &p->reach_m);
    } else if (!strcmp(k, "price_usd")) {
      rc = get_double(x, v, k, 0, 1e8, &p->price_usd);
      have_price = true;
    } else if (!strcmp(k, "power_w")) {
      rc = get_double(x, v, k, 0, 1e6, &p->power_w);
    } else if (!strcmp(k, "latency_ns")) {
      rc = get_double(x, v, k, 0, 1e6, &p->latency_ns);
    } else if (!strcmp(k, "source")) {
      rc = get_str(x, v, k, p->source, sizeof p->source);
      have_src = true;
    } else {
      return fail(x, node(x, q->key), k, "unknown key");
    }
    if (rc)
      return rc;
  }
  if (!p->name[0])
    return fail(x, m, "name", "every part needs a name");
  if (!have_kind)
    return fail(x, m, "kind", "part '%s' needs a kind", p->name);
  if (!have_price)
    return fail(x, m, "price_usd", "part '%s' needs a price", p->name);
  /* A figure nobody can trace is worse than none. */
  if (!have_src)
    return fail(x, m, "source",
                "part '%s' must say where its figures come from (or "
                "'illustrative')",
                p->name);
  if (p->kind != PLAN_PART_FIBRE) {
    if (fam < 0)
      return fail(x, m, "family", "part '%s' needs a family", p->name);
    if (!p->speed_gbps)
      return fail(x, m, "speed_gbps", "part '%s' needs a speed", p->name);
  }
  p->family = fam < 0 ? PLAN_FAM_ETH : (enum plan_family)fam;
  if (p->kind == PLAN_PART_SWITCH && !p->radix)
    return fail(x, m, "radix", "switch '%s' needs a radix", p->name);
  if ((p->kind == PLAN_PART_DAC || p->kind == PLAN_PART_AOC ||
       p->kind == PLAN_PART_TRANSCEIVER) &&
      !p->reach_m)
    return fail(x, m, "reach_m", "'%s' needs a reach", p->name);
  return 0;
}

static int add_part(struct plan_catalogue *cat, const struct plan_part *p) {
  for (uint32_t i = 0; i < cat->n; i++)
    if (!strcmp(cat->part[i].name, p->name)) {
      cat->part[i] = *p; /* a later catalogue overrides by name */
      return 0;
    }
  if (cat->n == PLAN_MAX_PARTS)
    return -1;
  cat->part[cat->n++] = *p;
  return 0;
}

static int load_doc(const char *text, size_t len, const char *label,
                    yaml_document_t *doc, char *err, size_t errlen) {
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p)) {
    snprintf(err, errlen, "%s: cannot start the YAML parser", label);
    return -1;
  }
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  if (!yaml_parser_load(&p, doc)) {
    snprintf(err, errlen, "%s:%zu: YAML error: %s", label,
             p.problem_mark.line + 1, p.problem ? p.problem : "?");
    yaml_parser_delete(&p);
    return -1;
  }
  yaml_parser_delete(&p);
  if (!yaml_document_get_root_node(doc)) {
    snprintf(err, errlen, "%s: empty document", label);
    yaml_document_delete(doc);
    return -1;
  }
  return 0;
}

int plan_catalogue_parse(const char *text, size_t len, const char *label,
                         struct plan_catalogue *cat, char *err, size_t errlen) {
  yaml_document_t doc;
  if (load_doc(text, len, label, &doc, err, errlen))
    return -1;
  struct ctx x = {&doc, label, "", err, errlen};
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  int rc = check_map(&x, root, "catalogue");
  for (yaml_node_pair_t *q = rc ? 0 : root->data.mapping.pairs.start;
       !rc && q < root->data.mapping.pairs.top; q++) {
    const char *k = sval(node(&x, q->key));
    yaml_node_t *v = node(&x, q->value);
    if (!strcmp(k, "name") || !strcmp(k, "note"))
      continue; /* free text for people */
    if (strcmp(k, "parts")) {
      rc = fail(&x, node(&x, q->key), k, "unknown key");
      break;
    }
    if (!v || v->type != YAML_SEQUENCE_NODE) {
      rc = fail(&x, v, k, "expected a list of parts");
      break;
    }
    for (yaml_node_item_t *i = v->data.sequence.items.start;
         !rc && i < v->data.sequence.items.top; i++) {
      struct plan_part p;
      rc = parse_part(&x, node(&x, *i), &p);
      if (!rc && add_part(cat, &p))
        rc = fail(&x, node(&x, *i), k, "more than %d parts", PLAN_MAX_PARTS);
    }
  }
  yaml_document_delete(&doc);
  return rc;
}

/* Specs, catalogues and traces are small: a file past this is refused
 * (so is /dev/zero) rather than read until memory runs out. */
#define SLURP_MAX (16u << 20)

static char *slurp(const char *path, size_t *len, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  size_t r;
  while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n > SLURP_MAX) {
      fclose(f);
      free(b);
      snprintf(err, errlen, "%s: larger than %u MiB: not a spec, catalogue "
               "or trace", path, SLURP_MAX >> 20);
      return NULL;
    }
    if (n == cap) {
      char *nb = realloc(b, cap *= 2);
      if (!nb) {
        free(b);
        b = NULL;
      } else {
        b = nb;
      }
    }
  }
  fclose(f);
  if (!b)
    snprintf(err, errlen, "%s: out of memory", path);
  *len = n;
  return b;
}

int plan_catalogue_load(const char *path, struct plan_catalogue *cat, char *err,
                        size_t errlen) {
  size_t len;
  char *t = slurp(path, &len, err, errlen);
  if (!t)
    return -1;
  int rc = plan_catalogue_parse(t, len, path, cat, err, errlen);
  free(t);
  return rc;
}

const struct plan_part *plan_part_find(const struct plan_catalogue *cat,
                                       const char *name) {
  for (uint32_t i = 0; i < cat->n; i++)
    if (!strcmp(cat->part[i].name, name))
      return &cat->part[i];
  return NULL;
}

/* ---- Spec. ---- */

static void spec_default(struct plan_spec *sp) {
  memset(sp, 0, sizeof *sp);
  sp->gpus_per_server = 8;
  sp->nratios = 1;
  sp->ratio_nic[0] = sp->ratio_gpu[0] = 1;
  sp->nspeeds = 1;
  sp->speeds[0] = 400;
  sp->nfabrics = 3;
  for (int i = 0; i < 3; i++)
    sp->fabrics[i] = (enum plan_fabric)i;
  sp->ntopos = 1;
  snprintf(sp->topos[0].name, PLAN_NAME, "leaf-spine");
  sp->topos[0].tiers = 2;
  sp->topos[0].oversub = 1;
  sp->nradices = 1;
  sp->radices[0] = 64;
  sp->overlap = 0;
  sp->nvlink_gbs = 450;
  sp->servers_per_rack = 4;
  sp->racks_per_row = 8;
  sp->rack_width_m = 0.6;
  sp->row_pitch_m = 2.4;
  sp->slack_m = 3;
  sp->simulate = true;
  sp->sim_max_nics = 1024;
  sp->probe_bytes = 1 << 20;
  sp->a2a_phases = 4;
  sp->seed = 1;
}

static int parse_ratio(struct ctx *x, yaml_node_t *n, uint32_t *a,
                       uint32_t *b) {
  const char *s = sval(n);
  unsigned u, v;
  char c;
  if (!s || sscanf(s, "%u:%u%c", &u, &v, &c) != 2 || !u || !v || u > 64 ||
      v > 64)
    return fail(x, n, "nic_gpu_ratios", "expected NICS:GPUS such as 1:4");
  *a = u;
  *b = v;
  return 0;
}

static int parse_topo(struct ctx *x, yaml_node_t *m, struct plan_topo *t) {
  if (check_map(x, m, "topologies[]"))
    return -1;
  memset(t, 0, sizeof *t);
  t->tiers = 2;
  t->oversub = 1;
  for (yaml_node_pair_t *q = m->data.mapping.pairs.start;
       q < m->data.mapping.pairs.top; q++) {
    const char *k = sval(node(x, q->key));
    yaml_node_t *v = node(x, q->value);
    int rc;
    if (!strcmp(k, "name"))
      rc = get_str(x, v, k, t->name, sizeof t->name);
    else if (!strcmp(k, "tiers"))
      rc = get_u32(x, v, k, 2, 3, &t->tiers);
    else if (!strcmp(k, "oversubscription"))
      rc = get_double(x, v, k, 1, 64, &t->oversub);
    else if (!strcmp(k, "rail"))
      rc = get_bool(x, v, k, &t->rail);
    else
      return fail(x, node(x, q->key), k, "unknown key");
    if (rc)
      return rc;
  }
  if (!t->name[0])
    snprintf(t->name, sizeof t->name, "%s%u-%g", t->rail ? "rail" : "ft",
             t->tiers, t->oversub);
  return 0;
}

/* Calls fn for every key of a mapping. */
typedef int (*key_fn)(struct ctx *, const char *, yaml_node_t *,
                      struct plan_spec *);

static int each_key(struct ctx *x, yaml_node_t *m, const char *key, key_fn fn,
                    struct plan_spec *sp) {
  if (check_map(x, m, key))
    return -1;
  for (yaml_node_pair_t *q = m->data.mapping.pairs.start;
       q < m->data.mapping.pairs.top; q++) {
    const char *k = sval(node(x, q->key));
    int rc = fn(x, k, node(x, q->value), sp);
    if (rc > 0)
      return fail(x, node(x, q->key), k, "unknown key");
    if (rc)
      return rc;
  }
  return 0;
}

static int workload_key(struct ctx *x, const char *k, yaml_node_t *v,
                        struct plan_spec *sp) {
  if (!strcmp(k, "allreduce_bytes"))
    return get_bytes(x, v, k, &sp->allreduce_bytes);
  if (!strcmp(k, "alltoall_bytes"))
    return get_bytes(x, v, k, &sp->alltoall_bytes);
  if (!strcmp(k, "compute_ms")) {
    int rc = get_double(x, v, k, 0, 1e7, &sp->compute_s);
    sp->compute_s /= 1e3;
    return rc;
  }
  if (!strcmp(k, "trace")) {
    char f[512];
    if (get_str(x, v, k, f, sizeof f))
      return -1;
    if (f[0] == '/' || !x->base[0])
      snprintf(sp->trace, sizeof sp->trace, "%s", f);
    else if (snprintf(sp->trace, sizeof sp->trace, "%s/%s", x->base, f) >=
             (int)sizeof sp->trace)
      return fail(x, v, k, "path too long");
    size_t len;
    char why[600];
    char *t = slurp(sp->trace, &len, why, sizeof why);
    if (!t)
      return fail(x, v, k, "%s", why);
    int rc = plan_trace_parse(t, len, sp->trace, sp, x->err, x->errlen);
    free(t);
    return rc;
  }
  if (!strcmp(k, "overlap"))
    return get_double(x, v, k, 0, 1, &sp->overlap);
  if (!strcmp(k, "nvlink_gbs"))
    return get_double(x, v, k, 1, 1e5, &sp->nvlink_gbs);
  return 1;
}

static int floor_key(struct ctx *x, const char *k, yaml_node_t *v,
                     struct plan_spec *sp) {
  if (!strcmp(k, "servers_per_rack"))
    return get_u32(x, v, k, 1, 64, &sp->servers_per_rack);
  if (!strcmp(k, "racks_per_row"))
    return get_u32(x, v, k, 1, 256, &sp->racks_per_row);
  if (!strcmp(k, "rack_width_m"))
    return get_double(x, v, k, 0.1, 5, &sp->rack_width_m);
  if (!strcmp(k, "row_pitch_m"))
    return get_double(x, v, k, 0.5, 20, &sp->row_pitch_m);
  if (!strcmp(k, "slack_m"))
    return get_double(x, v, k, 0, 50, &sp->slack_m);
  return 1;
}

static int sim_key(struct ctx *x, const char *k, yaml_node_t *v,
                   struct plan_spec *sp) {
  if (!strcmp(k, "enabled"))
    return get_bool(x, v, k, &sp->simulate);
  if (!strcmp(k, "max_nics"))
    return get_u32(x, v, k, 2, 65536, &sp->sim_max_nics);
  if (!strcmp(k, "probe_bytes")) {
    int rc = get_bytes(x, v, k, &sp->probe_bytes);
    if (!rc && (sp->probe_bytes < 4096 || sp->probe_bytes > 1e9))
      return fail(x, v, k, "must be 4KiB..1GB");
    return rc;
  }
  if (!strcmp(k, "a2a_phases"))
    return get_u32(x, v, k, 1, 64, &sp->a2a_phases);
  if (!strcmp(k, "seed")) {
    uint32_t s;
    int rc = get_u32(x, v, k, 0, UINT32_MAX, &s);
    sp->seed = s;
    return rc;
  }
  return 1;
}

static int top_key(struct ctx *x, const char *k, yaml_node_t *v,
                   struct plan_spec *sp) {
  yaml_node_t *it[PLAN_MAX_LIST];
  uint32_t n;
  int rc;
  if (!strcmp(k, "name"))
    return get_str(x, v, k, sp->name, sizeof sp->name);
  if (!strcmp(k, "gpus"))
    return get_u32(x, v, k, 0, 1u << 24, &sp->gpus);
  if (!strcmp(k, "gpus_per_server"))
    return get_u32(x, v, k, 0, 64, &sp->gpus_per_server);
  if (!strcmp(k, "nic_gpu_ratios")) {
    if ((rc = seq_items(x, v, k, it, PLAN_MAX_LIST, &n)))
      return rc;
    for (uint32_t i = 0; i < n; i++)
      if ((rc = parse_ratio(x, it[i], &sp->ratio_nic[i], &sp->ratio_gpu[i])))
        return rc;
    sp->nratios = n;
    return 0;
  }
  if (!strcmp(k, "nic_speeds_gbps")) {
    sp->line_speeds = v->start_mark.line + 1;
    if ((rc = seq_items(x, v, k, it, PLAN_MAX_LIST, &n)))
      return rc;
    for (uint32_t i = 0; i < n; i++)
      if ((rc = get_double(x, it[i], k, 1, 1e5, &sp->speeds[i])))
        return rc;
    sp->nspeeds = n;
    return 0;
  }
  if (!strcmp(k, "switch_radices")) {
    sp->line_radices = v->start_mark.line + 1;
    if ((rc = seq_items(x, v, k, it, PLAN_MAX_LIST, &n)))
      return rc;
    for (uint32_t i = 0; i < n; i++)
      if ((rc = get_u32(x, it[i], k, 4, 4096, &sp->radices[i])))
        return rc;
    sp->nradices = n;
    return 0;
  }
  if (!strcmp(k, "fabrics")) {
    sp->line_fabrics = v->start_mark.line + 1;
    if ((rc = seq_items(x, v, k, it, PLAN_NFABRIC, &n)))
      return rc;
    for (uint32_t i = 0; i < n; i++) {
      const char *s = sval(it[i]);
      int f = -1;
      for (int j = 0; j < PLAN_NFABRIC; j++)
        if (s && !strcmp(s, plan_fabric_name((enum plan_fabric)j)))
          f = j;
      if (f < 0)
        return fail(x, it[i], k, "expected infiniband, roce or uet");
      sp->fabrics[i] = (enum plan_fabric)f;
    }
    sp->nfabrics = n;
    return 0;
  }
  if (!strcmp(k, "topologies")) {
    sp->line_topos = v->start_mark.line + 1;
    if ((rc = seq_items(x, v, k, it, PLAN_MAX_LIST, &n)))
      return rc;
    for (uint32_t i = 0; i < n; i++)
      if ((rc = parse_topo(x, it[i], &sp->topos[i])))
        return rc;
    sp->ntopos = n;
    return 0;
  }
  if (!strcmp(k, "workload"))
    return each_key(x, v, k, workload_key, sp);
  if (!strcmp(k, "floor"))
    return each_key(x, v, k, floor_key, sp);
  if (!strcmp(k, "simulate"))
    return each_key(x, v, k, sim_key, sp);
  if (!strcmp(k, "catalogue")) {
    if ((rc = seq_items(x, v, k, it, 4, &n)))
      return rc;
    for (uint32_t i = 0; i < n; i++) {
      const char *s = sval(it[i]);
      if (!s || !*s)
        return fail(x, it[i], k, "expected a file name");
      if (s[0] == '/' || !x->base[0])
        snprintf(sp->catalogues[i], sizeof sp->catalogues[i], "%s", s);
      else
        snprintf(sp->catalogues[i], sizeof sp->catalogues[i], "%s/%s", x->base,
                 s);
    }
    sp->ncatalogues = n;
    return 0;
  }
  return 1;
}

const char *const plan_coll_name[PLAN_NCOLL] = {"allreduce", "reduce_scatter",
                                                "allgather", "alltoall"};

static int trace_fail(char *err, size_t errlen, const char *label,
                      size_t line, const char *col, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(err, errlen, "%s:%zu: %s: %s", label, line, col, msg);
  return -1;
}

static int add_op(struct plan_spec *sp, enum plan_coll kind, double bytes,
                  uint32_t count) {
  if (sp->nops == PLAN_MAX_OPS)
    return -1;
  sp->ops[sp->nops++] = (struct plan_coll_op){kind, bytes, count};
  sp->coll_bytes[kind] += bytes * count;
  return 0;
}

/* s without the blanks around it (in place). */
static char *trim(char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
    s[--n] = 0;
  return s;
}

/* One trace line, cut into its fields in place (no quoting: the fields
 * are a name and two numbers). */
static int trace_line(char *l, const char *label, size_t line,
                      struct plan_spec *sp, char *err, size_t errlen) {
  char *f[3], *tok;
  int n = 0;
  while ((tok = strsep(&l, ",")) != NULL) {
    if (n == 3)
      return trace_fail(err, errlen, label, line, "line",
                        "more than 3 fields: expected "
                        "collective,bytes[,count]");
    f[n++] = trim(tok);
  }
  if (n < 2)
    return trace_fail(err, errlen, label, line, "line",
                      "expected collective,bytes[,count]");
  int kind = -1;
  for (int i = 0; i < PLAN_NCOLL; i++)
    if (!strcmp(f[0], plan_coll_name[i]))
      kind = i;
  if (kind < 0)
    return trace_fail(err, errlen, label, line, "collective",
                      "'%s' is none of allreduce, reduce_scatter, allgather, "
                      "alltoall",
                      f[0]);
  double bytes;
  if (!parse_size(f[1], &bytes) || bytes <= 0 || bytes > 1e15)
    return trace_fail(err, errlen, label, line, "bytes",
                      "expected a size such as 64MiB (above 0, at most 1 PB), "
                      "got '%s'",
                      f[1]);
  unsigned long count = 1;
  if (n > 2) {
    char *e;
    errno = 0;
    count = strtoul(f[2], &e, 10);
    if (!*f[2] || *e || errno || count < 1 || count > 1000000)
      return trace_fail(err, errlen, label, line, "count",
                        "expected a whole number 1..1000000, got '%s'", f[2]);
  }
  if (add_op(sp, (enum plan_coll)kind, bytes, (uint32_t)count))
    return trace_fail(err, errlen, label, line, "line",
                      "more than %u collectives in the step", PLAN_MAX_OPS);
  return 0;
}

int plan_trace_parse(const char *text, size_t len, const char *label,
                     struct plan_spec *sp, char *err, size_t errlen) {
  char l[256];
  size_t line = 0, ops = 0;
  for (size_t i = 0; i < len;) {
    size_t j = i;
    while (j < len && text[j] != '\n')
      j++;
    line++;
    if (memchr(text + i, 0, j - i))
      return trace_fail(err, errlen, label, line, "line",
                        "a NUL byte: not a text file");
    if (j - i >= sizeof l)
      return trace_fail(err, errlen, label, line, "line",
                        "longer than %zu characters", sizeof l - 1);
    memcpy(l, text + i, j - i);
    l[j - i] = 0;
    i = j + 1;
    char *p = l;
    while (*p == ' ' || *p == '\t')
      p++;
    if (!*p || *p == '#' || *p == '\r')
      continue;
    if (trace_line(p, label, line, sp, err, errlen))
      return -1;
    ops++;
  }
  if (!ops)
    return trace_fail(err, errlen, label, line, "trace",
                      "no collective in it");
  return 0;
}

/* Checks that need the whole spec; each names the key that is wrong. */
static int validate(struct ctx *x, yaml_node_t *root, struct plan_spec *sp) {
  yaml_node_t *at[8] = {0};
  static const char *keys[] = {"gpus", "gpus_per_server", "nic_gpu_ratios",
                               "workload", "catalogue"};
  for (yaml_node_pair_t *q = root->data.mapping.pairs.start;
       q < root->data.mapping.pairs.top; q++)
    for (int i = 0; i < 5; i++)
      if (!strcmp(sval(node(x, q->key)), keys[i]))
        at[i] = node(x, q->value);
  if (!sp->gpus)
    return fail(x, at[0] ? at[0] : root, "gpus",
                at[0] ? "must be at least 1" : "missing");
  if (!sp->gpus_per_server)
    return fail(x, at[1] ? at[1] : root, "gpus_per_server",
                "must be at least 1");
  if (sp->gpus % sp->gpus_per_server)
    return fail(x, at[1], "gpus_per_server",
                "%u GPUs do not fill servers of %u GPUs", sp->gpus,
                sp->gpus_per_server);
  for (uint32_t i = 0; i < sp->nratios; i++) {
    uint64_t num = (uint64_t)sp->gpus_per_server * sp->ratio_nic[i];
    if (num % sp->ratio_gpu[i])
      return fail(x, at[2], "nic_gpu_ratios",
                  "%u:%u does not divide a server of %u GPUs into whole "
                  "NICs",
                  sp->ratio_nic[i], sp->ratio_gpu[i], sp->gpus_per_server);
  }
  if (!at[3])
    return fail(x, root, "workload", "missing");
  if (sp->allreduce_bytes <= 0 && sp->alltoall_bytes <= 0 && !sp->nops)
    return fail(x, at[3], "workload",
                "needs allreduce_bytes, alltoall_bytes or trace");
  if (!sp->ncatalogues)
    return fail(x, root, "catalogue", "missing (a list of catalogue files)");
  return 0;
}

int plan_spec_parse(const char *text, size_t len, const char *label,
                    const char *base, struct plan_spec *sp, char *err,
                    size_t errlen) {
  spec_default(sp);
  snprintf(sp->path, sizeof sp->path, "%s", label);
  yaml_document_t doc;
  if (load_doc(text, len, label, &doc, err, errlen))
    return -1;
  struct ctx x = {&doc, label, base ? base : "", err, errlen};
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  int rc = each_key(&x, root, "spec", top_key, sp);
  if (!rc)
    rc = validate(&x, root, sp);
  yaml_document_delete(&doc);
  if (rc)
    return rc;
  if (!sp->name[0]) {
    const char *b = strrchr(label, '/');
    snprintf(sp->name, sizeof sp->name, "%s", b ? b + 1 : label);
    char *dot = strrchr(sp->name, '.');
    if (dot)
      *dot = 0;
  }
  if ((sp->allreduce_bytes > 0 &&
       add_op(sp, PLAN_C_ALLREDUCE, sp->allreduce_bytes, 1)) ||
      (sp->alltoall_bytes > 0 &&
       add_op(sp, PLAN_C_ALLTOALL, sp->alltoall_bytes, 1))) {
    snprintf(err, errlen, "%s: workload: more than %u collectives in the step",
             label, PLAN_MAX_OPS);
    return -1;
  }
  for (uint32_t i = 0; i < sp->ncatalogues; i++)
    if (plan_catalogue_load(sp->catalogues[i], &sp->cat, err, errlen))
      return -1;
  return 0;
}

int plan_spec_load(const char *path, struct plan_spec *sp, char *err,
                   size_t errlen) {
  size_t len;
  char *t = slurp(path, &len, err, errlen);
  if (!t)
    return -1;
  char dir[512];
  snprintf(dir, sizeof dir, "%s", path);
  const char *base = dirname(dir);
  int rc = plan_spec_parse(t, len, path, base, sp, err, errlen);
  free(t);
  return rc;
}
