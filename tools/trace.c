/* uroce trace: what a transport trace (JSON lines written by uroce perf,
 * uroce run, the device API or uroce sim with --trace) says, per QP: its
 * states, the protocol's steps, go-backs and resends and why, NAKs,
 * timeouts, CNPs, congestion-control decisions, drops; then totals, and
 * how long requesters waited in each state. docs/transport.md "Trace". */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "tool.h"
#include "transport/engine.h"

#define LINE_MAX_BYTES 4096
#define SHOWN_DEFAULT 20

/* One line's members (the strings point into the record's own copies). */
struct rec {
  double t_us;
  char src[96];
  int kind; /* enum uroce_trace_kind; -1 unknown */
  uint32_t qpn;
  char type[8], from[24], to[24], state[24], cause[16], nak[32], why[24];
  uint64_t rate, cwnd;
  bool has_t, has_qpn;
};

/* Named counts: drop reasons, NAK kinds, requester states. */
struct tally {
  char name[32];
  uint64_t n;
  double us;
};
#define TALLY_MAX 48

struct qpsum {
  uint32_t src, qpn; /* src: index into the source names */
  char type[8];
  char states[72]; /* the QP's states in order, "RESET>INIT>..." */
  double t0, t1;
  uint64_t n[UROCE_TR_COUNT];
  uint64_t rate_min, cwnd_min; /* UINT64_MAX: none told */
  char req[24];                /* the requester's state, since req_t */
  double req_t;
};

struct view {
  struct qpsum *q;
  uint32_t nq, cap_q;
  uint32_t *hash; /* index + 1 into q; open addressing */
  uint32_t hmask;
  char (*srcs)[96];
  uint32_t nsrc, cap_src;
  struct tally drops[TALLY_MAX], naks_tx[TALLY_MAX], naks_rx[TALLY_MAX];
  struct tally causes[TALLY_MAX], waits[TALLY_MAX];
  uint64_t events, bad, first_bad;
  double t0, t1;
};

static void tally(struct tally *t, const char *name, double us) {
  for (int i = 0; i < TALLY_MAX; i++) {
    if (!t[i].name[0])
      snprintf(t[i].name, sizeof t[i].name, "%s", name);
    if (!strcmp(t[i].name, name)) {
      t[i].n++;
      t[i].us += us;
      return;
    }
  }
}

/* Copies a scalar into the record's member named key. */
static void member(struct rec *r, const char *key, const char *v) {
  char *end;
  struct {
    const char *key;
    char *dst;
    size_t n;
  } strs[] = {{"type", r->type, sizeof r->type},
              {"from", r->from, sizeof r->from},
              {"to", r->to, sizeof r->to},
              {"state", r->state, sizeof r->state},
              {"cause", r->cause, sizeof r->cause},
              {"nak", r->nak, sizeof r->nak},
              {"why", r->why, sizeof r->why}};
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
    if (!strcmp(key, strs[i].key)) {
      snprintf(strs[i].dst, strs[i].n, "%s", v);
      return;
    }
  if (!strcmp(key, "t_us")) {
    r->t_us = strtod(v, &end);
    r->has_t = !*end && *v;
  } else if (!strcmp(key, "qpn")) {
    r->qpn = (uint32_t)strtoul(v, &end, 10);
    r->has_qpn = !*end && *v;
  } else if (!strcmp(key, "ev")) {
    for (int k = 0; k < UROCE_TR_COUNT; k++)
      if (!strcmp(v, uroce_eng_trace_kind_name(k)))
        r->kind = k;
  } else if (!strcmp(key, "rate_bps")) {
    r->rate = strtoull(v, 0, 10);
  } else if (!strcmp(key, "cwnd")) {
    r->cwnd = strtoull(v, 0, 10);
  } else if (!strcmp(key, "nic") || !strcmp(key, "dev") ||
             !strcmp(key, "pid")) {
    size_t n = strlen(r->src);
    snprintf(r->src + n, sizeof r->src - n, "%s%s %s", n ? " " : "", key, v);
  }
}

/* One line: a flat JSON object (parsed as the YAML flow mapping it is).
 * Returns 0, or -1 if it is not a trace event. */
static int parse_line(const char *s, size_t len, struct rec *r) {
  memset(r, 0, sizeof *r);
  r->kind = -1;
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p))
    return -1;
  yaml_parser_set_input_string(&p, (const unsigned char *)s, len);
  char key[32] = "";
  int depth = 0, rc = -1;
  bool want_key = true;
  for (;;) {
    yaml_event_t e;
    if (!yaml_parser_parse(&p, &e))
      break;
    yaml_event_type_t t = e.type;
    if (t == YAML_MAPPING_START_EVENT) {
      depth++;
    } else if (t == YAML_MAPPING_END_EVENT) {
      depth--;
    } else if (t == YAML_SCALAR_EVENT && depth == 1) {
      const char *v = (const char *)e.data.scalar.value;
      if (want_key)
        snprintf(key, sizeof key, "%s", v);
      else
        member(r, key, v);
      want_key = !want_key;
    } else if (t == YAML_SEQUENCE_START_EVENT || depth > 1) {
      yaml_event_delete(&e);
      break; /* not flat */
    }
    yaml_event_delete(&e);
    if (t == YAML_STREAM_END_EVENT) {
      rc = r->has_t && r->has_qpn && r->kind >= 0 && r->src[0] ? 0 : -1;
      break;
    }
  }
  yaml_parser_delete(&p);
  return rc;
}

static uint32_t src_id(struct view *v, const char *name) {
  for (uint32_t i = v->nsrc; i-- > 0;)
    if (!strcmp(v->srcs[i], name))
      return i;
  if (v->nsrc == v->cap_src) {
    uint32_t cap = v->cap_src ? v->cap_src * 2 : 64;
    void *p = realloc(v->srcs, cap * sizeof *v->srcs);
    if (!p)
      return UINT32_MAX;
    v->srcs = p;
    v->cap_src = cap;
  }
  snprintf(v->srcs[v->nsrc], sizeof v->srcs[0], "%s", name);
  return v->nsrc++;
}

static uint32_t slot(const struct view *v, uint32_t src, uint32_t qpn) {
  return (uint32_t)(((uint64_t)src * 0x9E3779B97F4A7C15ull ^ qpn) *
                    0x9E3779B1u) &
         v->hmask;
}

static int grow(struct view *v) {
  uint32_t cap = v->cap_q ? v->cap_q * 2 : 256;
  struct qpsum *q = realloc(v->q, cap * sizeof *q);
  uint32_t *h = calloc((size_t)cap * 2, sizeof *h);
  if (!q || !h) {
    free(h);
    if (q)
      v->q = q;
    return -1;
  }
  v->q = q;
  v->cap_q = cap;
  free(v->hash);
  v->hash = h;
  v->hmask = cap * 2 - 1;
  for (uint32_t i = 0; i < v->nq; i++) {
    uint32_t k = slot(v, q[i].src, q[i].qpn);
    while (h[k])
      k = (k + 1) & v->hmask;
    h[k] = i + 1;
  }
  return 0;
}

static struct qpsum *qp_of(struct view *v, const struct rec *r) {
  uint32_t src = src_id(v, r->src);
  if (src == UINT32_MAX || (v->nq == v->cap_q && grow(v) < 0))
    return 0;
  uint32_t k = slot(v, src, r->qpn);
  for (; v->hash[k]; k = (k + 1) & v->hmask) {
    struct qpsum *q = &v->q[v->hash[k] - 1];
    if (q->src == src && q->qpn == r->qpn)
      return q;
  }
  struct qpsum *q = &v->q[v->nq++];
  memset(q, 0, sizeof *q);
  v->hash[k] = v->nq;
  q->src = src;
  q->qpn = r->qpn;
  q->t0 = r->t_us;
  q->rate_min = q->cwnd_min = UINT64_MAX;
  return q;
}

static void add_state(struct qpsum *q, const char *from, const char *to) {
  size_t n = strlen(q->states);
  if (!n)
    snprintf(q->states, sizeof q->states, "%s", from);
  n = strlen(q->states);
  if (n + strlen(to) + 2 < sizeof q->states)
    snprintf(q->states + n, sizeof q->states - n, ">%s", to);
  else if (n + 4 < sizeof q->states && strcmp(q->states + n - 3, "..."))
    strcat(q->states, "...");
}

static int account(struct view *v, const struct rec *r) {
  struct qpsum *q = qp_of(v, r);
  if (!q)
    return -1;
  if (r->type[0] && strcmp(r->type, "?"))
    snprintf(q->type, sizeof q->type, "%s", r->type);
  q->t1 = r->t_us;
  q->n[r->kind]++;
  switch ((enum uroce_trace_kind)r->kind) {
  case UROCE_TR_QP_STATE:
    add_state(q, r->from, r->to);
    break;
  case UROCE_TR_REQ:
    /* time in the state it leaves, from when it entered (or the QP's
     * first event) */
    tally(v->waits, r->from, r->t_us - (q->req[0] ? q->req_t : q->t0));
    snprintf(q->req, sizeof q->req, "%s", r->to);
    q->req_t = r->t_us;
    break;
  case UROCE_TR_GO_BACK:
  case UROCE_TR_RESEND:
  case UROCE_TR_TIMEOUT: {
    char name[40];
    snprintf(name, sizeof name, "%s/%s", uroce_eng_trace_kind_name(r->kind),
             r->cause);
    tally(v->causes, name, 0);
    break;
  }
  case UROCE_TR_NAK_TX:
    tally(v->naks_tx, r->nak, 0);
    break;
  case UROCE_TR_NAK_RX:
    tally(v->naks_rx, r->nak, 0);
    break;
  case UROCE_TR_DROP:
    tally(v->drops, r->why, 0);
    break;
  case UROCE_TR_CC:
    if (r->rate && r->rate < q->rate_min)
      q->rate_min = r->rate;
    if (r->cwnd && r->cwnd < q->cwnd_min)
      q->cwnd_min = r->cwnd;
    break;
  default:
    break;
  }
  return 0;
}

/* How much went wrong on a QP: the ones to show first. */
static uint64_t trouble(const struct qpsum *q) {
  return q->n[UROCE_TR_GO_BACK] + q->n[UROCE_TR_RESEND] +
         q->n[UROCE_TR_TIMEOUT] + q->n[UROCE_TR_DROP] + q->n[UROCE_TR_NAK_TX] +
         q->n[UROCE_TR_NAK_RX] + q->n[UROCE_TR_CC] + q->n[UROCE_TR_CNP_RX];
}

static int by_trouble(const void *a, const void *b) {
  const struct qpsum *x = a, *y = b;
  uint64_t tx = trouble(x), ty = trouble(y);
  if (tx != ty)
    return tx > ty ? -1 : 1;
  if (x->src != y->src)
    return x->src < y->src ? -1 : 1;
  return x->qpn < y->qpn ? -1 : x->qpn > y->qpn;
}

static void print_tally(const char *title, const struct tally *t) {
  if (!t[0].name[0])
    return;
  printf("%s:", title);
  for (int i = 0; i < TALLY_MAX && t[i].name[0]; i++)
    printf("%s %s %" PRIu64, i ? "," : "", t[i].name, t[i].n);
  printf("\n");
}

static void print_qp(const struct view *v, const struct qpsum *q) {
  char cc[64] = "-";
  if (q->n[UROCE_TR_CC] && q->rate_min != UINT64_MAX)
    snprintf(cc, sizeof cc, "%" PRIu64 " (>= %.2f Gb/s)", q->n[UROCE_TR_CC],
             (double)q->rate_min / 1e9);
  else if (q->n[UROCE_TR_CC] && q->cwnd_min != UINT64_MAX)
    snprintf(cc, sizeof cc, "%" PRIu64 " (>= %" PRIu64 " B)", q->n[UROCE_TR_CC],
             q->cwnd_min);
  printf("%-22s %8" PRIu32 " %-4s %-24s %7" PRIu64 " %7" PRIu64 " %5" PRIu64
         " %6" PRIu64 " %3" PRIu64 "/%-3" PRIu64 " %5" PRIu64 " %3" PRIu64
         "/%-3" PRIu64 " %6" PRIu64 "  %s\n",
         v->srcs[q->src], q->qpn, q->type[0] ? q->type : "?",
         q->states[0] ? q->states : "-", q->n[UROCE_TR_RESP],
         q->n[UROCE_TR_COMP], q->n[UROCE_TR_GO_BACK], q->n[UROCE_TR_RESEND],
         q->n[UROCE_TR_NAK_TX], q->n[UROCE_TR_NAK_RX], q->n[UROCE_TR_TIMEOUT],
         q->n[UROCE_TR_CNP_TX], q->n[UROCE_TR_CNP_RX], q->n[UROCE_TR_DROP], cc);
}

static void report(struct view *v, const char *path, uint32_t shown) {
  printf("%s: %" PRIu64 " events from %" PRIu32 " QPs on %" PRIu32
         " NICs or devices, %.3f to %.3f us\n",
         path, v->events, v->nq, v->nsrc, v->t0, v->t1);
  if (v->bad)
    printf("  %" PRIu64 " lines were not trace events (the first: line %" PRIu64
           ")\n",
           v->bad, v->first_bad);
  qsort(v->q, v->nq, sizeof *v->q, by_trouble);
  printf("\n%-22s %8s %-4s %-24s %7s %7s %5s %6s %7s %5s %7s %6s  %s\n",
         "where", "qpn", "type", "states", "resp", "comp", "goback", "resend",
         "nak t/r", "tmout", "cnp t/r", "drops", "cc decisions (lowest)");
  uint32_t n = shown && shown < v->nq ? shown : v->nq;
  for (uint32_t i = 0; i < n; i++)
    print_qp(v, &v->q[i]);
  if (n < v->nq)
    printf("... and %" PRIu32 " more QPs with less going on (--all lists "
           "them)\n",
           v->nq - n);
  printf("\n");
  print_tally("go-backs, resends, timeouts by cause", v->causes);
  print_tally("NAKs sent", v->naks_tx);
  print_tally("NAKs received", v->naks_rx);
  print_tally("drops", v->drops);
  if (v->waits[0].name[0]) {
    printf("requester states left, summed over QPs (us):");
    for (int i = 0; i < TALLY_MAX && v->waits[i].name[0]; i++)
      printf("%s %s %.3f", i ? "," : "", v->waits[i].name, v->waits[i].us);
    printf("\n");
  }
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: uroce trace [--all] [--qp QPN] TRACE.jsonl\n\n"
          "Summarises a transport trace, as written by uroce perf --trace,\n"
          "uroce run --trace (UROCE_TRACE), uroce sim --trace: per QP, its\n"
          "states, responder and completer steps, go-back-N restarts and\n"
          "multipath resends, NAKs sent and received, timeouts, CNPs,\n"
          "congestion-control decisions and drops; then their causes and\n"
          "how long requesters spent in each state. QPs with the most going\n"
          "wrong come first.\n\n"
          "  --all      list every QP (default: the first %d)\n"
          "  --qp QPN   print that QP's events only, as they are\n"
          "  -h, --help this text\n",
          SHOWN_DEFAULT);
}

static void view_free(struct view *v) {
  free(v->q);
  free(v->hash);
  free(v->srcs);
}

int cmd_trace(int argc, char **argv) {
  static const struct option lo[] = {{"all", no_argument, 0, 'a'},
                                     {"qp", required_argument, 0, 'Q'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  uint32_t shown = SHOWN_DEFAULT;
  long qp = -1;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", lo, 0)) != -1) {
    switch (c) {
    case 'a':
      shown = 0;
      break;
    case 'Q': {
      char *e;
      errno = 0;
      unsigned long q = strtoul(optarg, &e, 0);
      if (*e || !*optarg || errno || q > 0xFFFFFF || optarg[0] == '-') {
        fprintf(stderr,
                "uroce trace: --qp '%s': not a QP number "
                "(0 to 16777215)\n",
                optarg);
        return 2;
      }
      qp = (long)q;
      break;
    }
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (argc - optind != 1) {
    usage(stderr);
    return 2;
  }
  const char *path = argv[optind];
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "uroce trace: %s: %s\n", path, strerror(errno));
    return 1;
  }
  struct view v = {0};
  char *line = 0;
  size_t cap = 0;
  ssize_t len;
  uint64_t lineno = 0;
  bool oom = false;
  while ((len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      line[--len] = 0;
    if (!len)
      continue;
    struct rec r;
    if (len > LINE_MAX_BYTES || memchr(line, 0, (size_t)len) ||
        parse_line(line, (size_t)len, &r) < 0) {
      if (!v.bad++)
        v.first_bad = lineno;
      continue;
    }
    if (qp >= 0) {
      if (r.qpn == (uint32_t)qp)
        printf("%s\n", line);
      v.events++;
      continue;
    }
    if (!v.events)
      v.t0 = r.t_us;
    v.t0 = r.t_us < v.t0 ? r.t_us : v.t0;
    v.t1 = r.t_us > v.t1 ? r.t_us : v.t1;
    v.events++;
    if (account(&v, &r) < 0) {
      oom = true;
      break;
    }
  }
  int rerr = ferror(f) ? (errno ? errno : EIO) : 0;
  free(line);
  fclose(f);
  int rc = 0;
  if (rerr || oom) {
    fprintf(stderr, "uroce trace: %s: %s\n", path,
            oom ? "out of memory" : strerror(rerr));
    rc = 1;
  } else if (!v.events) {
    fprintf(stderr, "uroce trace: %s: no trace events in %" PRIu64 " lines%s\n",
            path, lineno,
            v.bad ? " (is it a trace? write one with --trace)" : "");
    rc = 1;
  } else if (qp < 0) {
    report(&v, path, shown);
  }
  view_free(&v);
  return rc;
}
