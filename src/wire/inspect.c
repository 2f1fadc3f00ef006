#include "wire/inspect.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "uroce/errors.h"
#include "wire/cm_mad.h"
#include "wire/frame.h"
#include "wire/gso.h"
#include "wire/hdr.h"

/* An append-only string that truncates safely. */
struct sb {
  char *p;
  size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void
sb_printf(struct sb *s, const char *fmt, ...) {
  if (s->len + 1 >= s->cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(s->p + s->len, s->cap - s->len, fmt, ap);
  va_end(ap);
  if (n > 0)
    s->len += (size_t)n < s->cap - s->len ? (size_t)n : s->cap - s->len - 1;
}

/* Ends a line with tail (which holds its "\n"), cutting what came before
 * if it must: a line handed to emit is always whole. */
static void sb_end(struct sb *s, const char *tail) {
  size_t n = strlen(tail);
  if (s->len + n + 1 > s->cap)
    s->len = s->cap - n - 1;
  memcpy(s->p + s->len, tail, n + 1);
  s->len += n;
}

static const char *ecn_name(uint8_t ecn) {
  static const char *const n[4] = {"Not-ECT", "ECT1", "ECT0", "CE"};
  return n[ecn & 3];
}

static const char *aeth_kind_name(enum uroce_aeth_kind k) {
  switch (k) {
  case UROCE_AETH_ACK:
    return "ACK";
  case UROCE_AETH_RNR_NAK:
    return "RNR_NAK";
  case UROCE_AETH_NAK:
    return "NAK";
  default:
    return "reserved";
  }
}

static void put_aeth(struct sb *s, const struct uroce_hdr_fields *h,
                     bool json) {
  enum uroce_aeth_kind k = uroce_aeth_kind(h->syndrome);
  uint8_t v = uroce_aeth_value(h->syndrome);
  if (json) {
    sb_printf(s, ",\"aeth\":{\"syndrome\":%u,\"msn\":%u,\"kind\":\"%s\"",
              h->syndrome, h->msn, aeth_kind_name(k));
    if (k == UROCE_AETH_ACK)
      sb_printf(s, ",\"credits\":%u", v);
    else if (k == UROCE_AETH_RNR_NAK)
      sb_printf(s, ",\"timer_code\":%u,\"timer_ms\":%.2f", v,
                uroce_rnr_timer_ns(v) / 1e6);
    else if (k == UROCE_AETH_NAK)
      sb_printf(s, ",\"nak_code\":%u,\"nak\":\"%s\"", v, uroce_nak_name(v));
    sb_printf(s, "}");
    return;
  }
  sb_printf(s, " | AETH ");
  if (k == UROCE_AETH_ACK) {
    if (v == UROCE_AETH_CREDITS_INVALID)
      sb_printf(s, "ACK credits=invalid");
    else
      sb_printf(s, "ACK credits=%u", v);
  } else if (k == UROCE_AETH_RNR_NAK) {
    sb_printf(s, "RNR NAK timer=%.2fms", uroce_rnr_timer_ns(v) / 1e6);
  } else if (k == UROCE_AETH_NAK) {
    sb_printf(s, "NAK %s", uroce_nak_name(v));
  } else {
    sb_printf(s, "reserved syndrome=0x%02x", h->syndrome);
  }
  sb_printf(s, " msn=%u", h->msn);
}

/* A selective ACK: base, the runs of PSNs its bitmap says arrived (as
 * offsets from the base), and the duplicate it reports. A bitmap of up
 * to 255 words can hold thousands of runs; past this many the rest are
 * counted, so that a packet's line fits its buffer whatever it holds. */
#define SACK_RUNS_SHOWN 64u

static void put_sack(struct sb *s, const struct uroce_pkt_info *pi,
                     const struct uroce_hdr_fields *h, bool json) {
  sb_printf(s, json ? ",\"sacketh\":{\"base\":%u,\"words\":%u,\"got\":["
                    : " | SACKETH base=%u words=%u got=",
            h->sack_base, h->sack_words);
  const uint8_t *bm = uroce_pkt_payload(pi);
  uint32_t bits = h->sack_words * 64u, runs = 0;
  if (h->sack_words * 8u > pi->payload_len)
    bits = pi->payload_len / 8 * 64; /* what the capture holds */
  for (uint32_t b = 0; b < bits;) {
    if (!(get_be64(bm + b / 64 * 8) >> (b % 64) & 1)) {
      b++;
      continue;
    }
    uint32_t e = b;
    while (e + 1 < bits && (get_be64(bm + (e + 1) / 64 * 8) >> ((e + 1) % 64) & 1))
      e++;
    if (runs >= SACK_RUNS_SHOWN)
      ; /* counted, not listed: the line stays bounded */
    else if (json)
      sb_printf(s, "%s[%u,%u]", runs ? "," : "", b, e);
    else if (b == e)
      sb_printf(s, "%s+%u", runs ? "," : "", b);
    else
      sb_printf(s, "%s+%u..+%u", runs ? "," : "", b, e);
    runs++;
    b = e + 1;
  }
  if (!json && !runs)
    sb_printf(s, "-");
  if (json)
    sb_printf(s, "]");
  if (runs > SACK_RUNS_SHOWN)
    sb_printf(s, json ? ",\"runs\":%u" : " (%u runs, first %u shown)", runs,
              SACK_RUNS_SHOWN);
  if (h->sack_flags & UROCE_SACK_DUP)
    sb_printf(s, json ? ",\"dup\":%u" : " dup=%u", h->sack_dup);
  else if (h->sack_flags & UROCE_SACK_TRIM)
    sb_printf(s, json ? ",\"trimmed\":%u" : " trimmed=%u", h->sack_dup);
  if (json)
    sb_printf(s, "}");
}

static void put_ext(struct sb *s, const struct uroce_pkt_info *pi,
                    const struct uroce_hdr_fields *h, bool json) {
  uint32_t m = pi->op ? pi->op->mask : 0;
  if (!pi->hdr_len)
    return;
#define HAS(x) (m & UROCE_OPM_HDR(UROCE_HDR_##x))
  if (HAS(RDETH))
    sb_printf(s, json ? ",\"rdeth\":{\"een\":%u}" : " | RDETH een=0x%06x",
              h->een);
  if (HAS(DETH))
    sb_printf(s,
              json ? ",\"deth\":{\"qkey\":%u,\"sqp\":%u}"
                   : " | DETH qkey=0x%08x srcqp=0x%06x",
              h->qkey, h->sqp);
  if (HAS(XRCETH))
    sb_printf(s, json ? ",\"xrceth\":{\"srqn\":%u}" : " | XRCETH srqn=0x%06x",
              h->xrc_srqn);
  if (HAS(RETH))
    sb_printf(s,
              json ? ",\"reth\":{\"va\":%" PRIu64 ",\"rkey\":%u,\"dma_len\":%u}"
                   : " | RETH va=0x%" PRIx64 " rkey=0x%08x len=%u",
              h->va, h->rkey, h->dma_len);
  if (HAS(ATMETH))
    sb_printf(s,
              json ? ",\"atomiceth\":{\"va\":%" PRIu64 ",\"rkey\":%u,"
                     "\"swap_add\":%" PRIu64 ",\"compare\":%" PRIu64 "}"
                   : " | AtomicETH va=0x%" PRIx64 " rkey=0x%08x "
                     "swap_add=0x%" PRIx64 " compare=0x%" PRIx64,
              h->va, h->rkey, h->swap_add, h->compare);
  if (HAS(AETH))
    put_aeth(s, h, json);
  if (HAS(ATMACK))
    sb_printf(s,
              json ? ",\"atomicacketh\":{\"orig\":%" PRIu64 "}"
                   : " | AtomicAckETH orig=0x%" PRIx64,
              h->orig);
  if (HAS(MPETH))
    sb_printf(s,
              json ? ",\"mpeth\":{\"ssn\":%u,\"offset\":%u}"
                   : " | MPETH ssn=%u offset=%u",
              h->ssn, h->mp_off);
  if (HAS(SACKETH))
    put_sack(s, pi, h, json);
  if (HAS(IMMDT))
    sb_printf(s, json ? ",\"immdt\":%u" : " | ImmDt 0x%08x", h->imm);
  if (HAS(IETH))
    sb_printf(s, json ? ",\"ieth\":{\"rkey\":%u}" : " | IETH rkey=0x%08x",
              h->inv_rkey);
#undef HAS
}

/* A CM MAD (a 256-byte UD payload to QP1), decoded into buf; false when
 * the packet carries none. */
static bool cm_mad_str(const struct uroce_pkt_info *pi,
                       const struct uroce_hdr_fields *h, char *buf,
                       size_t size) {
  struct uroce_cm_msg m;
  uint32_t mask = pi->op ? pi->op->mask : 0;
  if (!pi->bth || h->dqpn != 1 || !(mask & UROCE_OPM_HDR(UROCE_HDR_DETH)) ||
      pi->payload_len != UROCE_MAD_LEN ||
      (uint64_t)pi->hdr_len + UROCE_MAD_LEN > pi->len ||
      uroce_cm_parse(pi->bth + pi->hdr_len, UROCE_MAD_LEN, &m))
    return false;
  uroce_cm_describe(&m, buf, size);
  return true;
}

/* ---- display filters ---- */

enum fkey { F_QP, F_PSN, F_OP, F_SRC, F_DST, F_HOST, F_VLAN, F_ICRC, F_N };
static const char *const fkey_name[F_N] = {"qp",  "psn",  "op",   "src",
                                           "dst", "host", "vlan", "icrc"};

struct fterm {
  enum fkey key;
  uint32_t lo, hi;  /* qp, psn, vlan, icrc (1 = ok); op: a 256-bit set */
  uint8_t ops[32];  /* op: which opcodes match */
  uint8_t addr[16]; /* src, dst, host */
};

struct uroce_filter {
  size_t n;
  struct fterm t[];
};

/* Parses a number of at most max: decimal, or hex with 0x (a leading 0
 * is not octal: psn=010 is ten). */
static bool parse_num(const char *s, size_t len, uint32_t max, uint32_t *v) {
  char buf[24];
  int base = 10;
  if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s += 2;
    len -= 2;
    base = 16;
  }
  if (len == 0 || len >= sizeof(buf) || !isxdigit((unsigned char)s[0]))
    return false;
  memcpy(buf, s, len);
  buf[len] = 0;
  char *end;
  errno = 0;
  unsigned long x = strtoul(buf, &end, base);
  if (errno || *end || x > max)
    return false;
  *v = (uint32_t)x;
  return true;
}

/* "N" or "N-M" with N <= M. */
static bool parse_range(const char *s, size_t len, uint32_t max,
                        struct fterm *t) {
  const char *dash = memchr(s, '-', len);
  if (!dash)
    return parse_num(s, len, max, &t->lo) && ((t->hi = t->lo), true);
  return parse_num(s, (size_t)(dash - s), max, &t->lo) &&
         parse_num(dash + 1, len - (size_t)(dash - s) - 1, max, &t->hi) &&
         t->lo <= t->hi;
}

/* op=NAME, op=N or op=PREFIX*: fills t->ops; false if nothing matches. */
static bool parse_op(const char *s, size_t len, struct fterm *t) {
  uint32_t v;
  if (parse_num(s, len, 255, &v)) {
    t->ops[v / 8] |= (uint8_t)(1u << (v % 8));
    return true;
  }
  bool prefix = len > 1 && s[len - 1] == '*';
  size_t n = prefix ? len - 1 : len;
  bool any = false;
  for (int i = 0; i < 256; i++) {
    const char *name = uroce_opcode_table[i].name;
    if (!name || strlen(name) < n || strncasecmp(name, s, n) != 0 ||
        (!prefix && name[n] != 0))
      continue;
    t->ops[i / 8] |= (uint8_t)(1u << (i % 8));
    any = true;
  }
  return any;
}

static int parse_term(const char *s, size_t len, struct fterm *t, char *err,
                      size_t errlen) {
  const char *eq = memchr(s, '=', len);
  int k;
  memset(t, 0, sizeof(*t));
  for (k = 0; eq && k < F_N; k++)
    if ((size_t)(eq - s) == strlen(fkey_name[k]) &&
        strncasecmp(s, fkey_name[k], (size_t)(eq - s)) == 0)
      break;
  if (!eq || k == F_N) {
    snprintf(err, errlen,
             "filter term '%.*s': expected KEY=VALUE with KEY one of qp, psn, "
             "op, src, dst, host, vlan, icrc",
             (int)len, s);
    return UROCE_ERR_INVALID_ARGUMENT;
  }
  t->key = (enum fkey)k;
  const char *v = eq + 1;
  size_t vl = len - (size_t)(v - s);
  bool ok = false;
  const char *want = "";
  char abuf[64];
  switch (t->key) {
  case F_QP:
    ok = parse_range(v, vl, 0xFFFFFF, t);
    want = "a QP number or range N-M, at most 0xffffff";
    break;
  case F_PSN:
    ok = parse_range(v, vl, 0xFFFFFF, t);
    want = "a PSN or range N-M (N <= M), at most 0xffffff";
    break;
  case F_VLAN:
    ok = parse_num(v, vl, 4095, &t->lo);
    want = "a VLAN id, 0..4095";
    break;
  case F_OP:
    ok = parse_op(v, vl, t);
    want = "an opcode name (RC_SEND_ONLY), a number, or a prefix (RC_*)";
    break;
  case F_ICRC:
    ok = (vl == 2 && strncasecmp(v, "ok", 2) == 0 && (t->lo = 1)) ||
         (vl == 3 && strncasecmp(v, "bad", 3) == 0 && !(t->lo = 0));
    want = "ok or bad";
    break;
  default: /* addresses */
    if (vl < sizeof(abuf)) {
      memcpy(abuf, v, vl);
      abuf[vl] = 0;
      ok = uroce_addr_parse(abuf, t->addr) > 0;
    }
    want = "an IPv4 or IPv6 address";
    break;
  }
  if (!ok) {
    snprintf(err, errlen, "filter term '%.*s': %s wants %s", (int)len, s,
             fkey_name[t->key], want);
    return UROCE_ERR_INVALID_ARGUMENT;
  }
  return 0;
}

int uroce_filter_parse(const char *s, struct uroce_filter **out, char *err,
                       size_t errlen) {
  size_t n = 1;
  for (const char *p = s; *p; p++)
    n += *p == ',';
  struct uroce_filter *flt = calloc(1, sizeof(*flt) + n * sizeof(flt->t[0]));
  if (!flt)
    return -ENOMEM;
  for (const char *p = s;;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    while (len && (*p == ' ' || *p == '\t'))
      p++, len--;
    while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
      len--;
    if (len == 0) {
      snprintf(err, errlen, "filter '%s': empty term", s);
      free(flt);
      return UROCE_ERR_INVALID_ARGUMENT;
    }
    int rv = parse_term(p, len, &flt->t[flt->n], err, errlen);
    if (rv) {
      free(flt);
      return rv;
    }
    flt->n++;
    if (!e)
      break;
    p = e + 1;
  }
  *out = flt;
  return 0;
}

void uroce_filter_del(struct uroce_filter *flt) {
  free(flt);
}

/* What a filter looks at in one packet. */
struct fpkt {
  bool has_bth, icrc_ok;
  uint8_t opcode;
  uint32_t dqpn, psn;
  const uint8_t *src, *dst;
  int vid; /* -1: untagged */
};

static bool term_match(const struct fterm *t, const struct fpkt *p) {
  switch (t->key) {
  case F_QP:
    return p->has_bth && p->dqpn >= t->lo && p->dqpn <= t->hi;
  case F_PSN:
    return p->has_bth && p->psn >= t->lo && p->psn <= t->hi;
  case F_OP:
    return p->has_bth && (t->ops[p->opcode / 8] >> (p->opcode % 8) & 1);
  case F_SRC:
    return memcmp(p->src, t->addr, 16) == 0;
  case F_DST:
    return memcmp(p->dst, t->addr, 16) == 0;
  case F_HOST:
    return memcmp(p->src, t->addr, 16) == 0 || memcmp(p->dst, t->addr, 16) == 0;
  case F_VLAN:
    return p->vid == (int)t->lo;
  case F_ICRC:
    return p->icrc_ok == (t->lo != 0);
  default:
    return false;
  }
}

static bool filter_match(const struct uroce_filter *flt, const struct fpkt *p) {
  if (!flt)
    return true;
  for (int k = 0; k < F_N; k++) {
    bool seen = false, hit = false;
    for (size_t i = 0; i < flt->n && !hit; i++) {
      if (flt->t[i].key != (enum fkey)k)
        continue;
      seen = true;
      hit = term_match(&flt->t[i], p);
    }
    if (seen && !hit)
      return false;
  }
  return true;
}

/* ---- conversations ---- */

/* A capture with more conversations than this is counted, not tracked:
 * memory stays bounded whatever the capture holds. */
#define CONV_MAX (1u << 16)

struct uroce_inspect {
  struct uroce_inspect_opts o;
  struct uroce_inspect_stats st;
  struct uroce_conv *conv;
  size_t nconv, capconv;
  uint32_t *hash; /* open addressing: index + 1, 0 empty */
  size_t hcap;
  uint32_t pmtu; /* largest FIRST/MIDDLE payload seen: the path MTU */
  struct uroce_gso_seg segs[UROCE_GSO_MAX_SEGS];
  char line[4096];
};

static uint32_t conv_hash(int ipver, const uint8_t *src, const uint8_t *dst,
                          uint32_t dqpn) {
  uint32_t h = 2166136261u ^ (uint32_t)ipver;
  for (int i = 0; i < 16; i++)
    h = (h ^ src[i]) * 16777619u;
  for (int i = 0; i < 16; i++)
    h = (h ^ dst[i]) * 16777619u;
  return (h ^ dqpn) * 16777619u;
}

/* Doubles the table; on failure leaves it as it was (full: the caller
 * counts the packet instead). */
static bool conv_grow(struct uroce_inspect *in) {
  size_t cap = in->capconv ? in->capconv * 2 : 64;
  uint32_t *h = calloc(cap * 2, sizeof(*h)); /* at most half full */
  if (!h)
    return false;
  struct uroce_conv *c = realloc(in->conv, cap * sizeof(*c));
  if (!c) {
    free(h);
    return false;
  }
  in->conv = c;
  in->capconv = cap;
  free(in->hash);
  in->hash = h;
  in->hcap = cap * 2;
  for (size_t i = 0; i < in->nconv; i++) {
    const struct uroce_conv *v = &in->conv[i];
    size_t j = conv_hash(v->ipver, v->src, v->dst, v->dqpn) & (in->hcap - 1);
    while (h[j])
      j = (j + 1) & (in->hcap - 1);
    h[j] = (uint32_t)i + 1;
  }
  return true;
}

static struct uroce_conv *conv_get(struct uroce_inspect *in,
                                   const struct uroce_frame *f, uint32_t dqpn) {
  if (in->hcap) {
    size_t j = conv_hash(f->ipver, f->src, f->dst, dqpn) & (in->hcap - 1);
    for (; in->hash[j]; j = (j + 1) & (in->hcap - 1)) {
      struct uroce_conv *c = &in->conv[in->hash[j] - 1];
      if (c->dqpn == dqpn && c->ipver == f->ipver &&
          memcmp(c->src, f->src, 16) == 0 && memcmp(c->dst, f->dst, 16) == 0)
        return c;
    }
  }
  if (in->nconv >= CONV_MAX)
    return NULL;
  if (in->nconv == in->capconv && !conv_grow(in))
    return NULL;
  struct uroce_conv *c = &in->conv[in->nconv];
  memset(c, 0, sizeof(*c));
  c->ipver = f->ipver;
  memcpy(c->src, f->src, 16);
  memcpy(c->dst, f->dst, 16);
  c->dqpn = dqpn;
  size_t j = conv_hash(f->ipver, f->src, f->dst, dqpn) & (in->hcap - 1);
  while (in->hash[j])
    j = (j + 1) & (in->hcap - 1);
  in->hash[j] = (uint32_t)++in->nconv;
  return c;
}

/* PSN a minus b in 24-bit serial arithmetic: negative if a is behind. */
static int32_t psn_diff(uint32_t a, uint32_t b) {
  return (int32_t)((a - b) << 8) >> 8;
}

/* Accounts one packet to its conversation. Requests should come in PSN
 * order: a PSN behind the expected one is a retransmission, one ahead a
 * gap (lost, or dropped by the capture). A read request takes as many
 * PSNs as its response has packets, known only if the path MTU is (from
 * the largest FIRST or MIDDLE payload seen); else the next request PSN is
 * taken as it comes. Read responses are checked the same way, ACKs only
 * counted (they may repeat and coalesce). */
static void conv_account(struct uroce_inspect *in, struct uroce_conv *c,
                         const struct uroce_pkt_info *pi,
                         const struct uroce_hdr_fields *h, uint32_t len,
                         bool icrc_ok, uint64_t ts) {
  uint32_t m = pi->op ? pi->op->mask : 0;
  if (!c->packets) {
    c->first_ts = ts;
    c->psn_lo = c->psn_hi = h->psn;
  }
  c->packets++;
  c->bytes += len;
  c->last_ts = ts;
  if (!icrc_ok)
    c->bad_icrc++;
  if (!pi->hdr_len)
    return; /* headers cut off: nothing more to trust */
  if (psn_diff(h->psn, c->psn_lo) < 0)
    c->psn_lo = h->psn;
  if (psn_diff(h->psn, c->psn_hi) > 0)
    c->psn_hi = h->psn;
  if (m & UROCE_OPM_CNP) {
    c->cnps++;
    return;
  }
  if (m & UROCE_OPM_HDR(UROCE_HDR_AETH)) {
    enum uroce_aeth_kind k = uroce_aeth_kind(h->syndrome);
    c->acks += k == UROCE_AETH_ACK;
    c->naks += k == UROCE_AETH_NAK;
    c->rnr_naks += k == UROCE_AETH_RNR_NAK;
  }
  if ((m & UROCE_OPM_RESP) && (m & UROCE_OPM_READ)) {
    if (c->resp_known) {
      int32_t d = psn_diff(h->psn, c->resp_last + 1);
      if (d < 0) {
        c->retrans++;
      } else if (d > 0 && !(m & UROCE_OPM_FIRST)) {
        c->gaps++;
        c->gap_psns += (uint32_t)d;
      }
    }
    c->resp_last = h->psn;
    c->resp_known = true;
    return;
  }
  if (!(m & UROCE_OPM_REQ))
    return;
  if (c->req_known) {
    int32_t d = psn_diff(h->psn, c->req_next);
    if (d < 0) {
      c->retrans++;
      return; /* the expected PSN stays: the stream has not moved on */
    }
    if (d > 0) {
      c->gaps++;
      c->gap_psns += (uint32_t)d;
    }
  }
  uint32_t span = 1;
  c->req_known = true;
  if (h->opcode == UROCE_OP_READ_REQ ||
      h->opcode == (UROCE_OP_RD_BASE | UROCE_OP_READ_REQ)) {
    if (!in->pmtu) {
      c->req_known = false;
    } else if (h->dma_len > in->pmtu) {
      span = (h->dma_len + in->pmtu - 1) / in->pmtu;
    }
  }
  c->req_next = (h->psn + span) & 0xFFFFFF;
}

/* ---- per-packet lines ---- */

static void put_time(struct sb *s, uint64_t ts_ns) {
  time_t t = (time_t)(ts_ns / 1000000000u);
  struct tm tm;
  char buf[40];
  if (!gmtime_r(&t, &tm) ||
      !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm))
    return;
  sb_printf(s, ",\"time\":\"%s.%09" PRIu64 "Z\"", buf, ts_ns % 1000000000u);
}

/* One packet's line: frame-level fields from f, the packet itself from
 * seg; gso_n > 1 when it was cut out of a super-frame. */
static size_t packet_line(struct uroce_inspect *in, const struct uroce_frame *f,
                          const struct uroce_gso_seg *seg, uint32_t gso_i,
                          uint32_t gso_n, uint32_t gso_size,
                          const struct uroce_pkt_info *pi,
                          const struct uroce_hdr_fields *h, int prv,
                          uint64_t ts_ns, uint64_t frameno) {
  struct sb s = {in->line, 0, sizeof(in->line)};
  char src[64], dst[64];
  bool json = in->o.json;
  bool has_bth = pi->len >= UROCE_BTH_LEN;
  bool has_icrc = seg->len >= UROCE_BTH_LEN + UROCE_ICRC_LEN;
  uroce_addr_str(f->ipver, f->src, src, sizeof(src));
  uroce_addr_str(f->ipver, f->dst, dst, sizeof(dst));
  const char *opname = pi->op ? pi->op->name : "reserved";
  char cm[400];

  in->line[0] = 0;
  if (json) {
    sb_printf(&s, "{\"frame\":%" PRIu64 ",\"ts\":%" PRIu64 ".%09" PRIu64,
              frameno, ts_ns / 1000000000u, ts_ns % 1000000000u);
    put_time(&s, ts_ns);
    sb_printf(&s,
              ",\"ip\":%d,\"src\":\"%s\",\"dst\":\"%s\",\"sport\":%u,"
              "\"dport\":%u,\"tclass\":%u,\"dscp\":%u,\"ecn\":%u,\"ttl\":%u",
              f->ipver, src, dst, f->sport, f->dport, f->tclass, f->tclass >> 2,
              f->tclass & 3, f->ttl);
    if (f->vlan_tags)
      sb_printf(&s, ",\"vlan\":%u,\"pcp\":%u", f->vid, f->pcp);
    if (f->ipver == 4)
      sb_printf(&s, ",\"ip_id\":%u", seg->ip_id);
    else
      sb_printf(&s, ",\"flow_label\":%u", f->flow_label);
    if (gso_n > 1)
      sb_printf(&s, ",\"gso\":{\"seg\":%u,\"segs\":%u,\"size\":%u}", gso_i + 1,
                gso_n, gso_size);
    if (has_bth)
      sb_printf(&s,
                ",\"opcode\":%u,\"opname\":\"%s\",\"se\":%d,\"mig\":%d,"
                "\"pad\":%u,\"tver\":%u,\"pkey\":%u,\"fecn\":%d,\"becn\":%d,"
                "\"resv6\":%u,\"dqpn\":%u,\"ackreq\":%d,\"resv7\":%u,"
                "\"psn\":%u",
                h->opcode, opname, h->se, h->mig, h->pad, h->tver, h->pkey,
                h->fecn, h->becn, h->resv6, h->dqpn, h->ackreq, h->resv7,
                h->psn);
    if (has_bth && (h->resv7 & UROCE_BTH_MP))
      sb_printf(&s, ",\"mp\":true");
    put_ext(&s, pi, h, true);
    if (pi->hdr_len)
      sb_printf(&s, ",\"payload_len\":%u", pi->payload_len);
    if (cm_mad_str(pi, h, cm, sizeof(cm)))
      sb_printf(&s, ",\"cm\":\"%s\"", cm + 3); /* without "CM " */
    if (has_icrc)
      sb_printf(&s, ",\"icrc\":%u,\"icrc_expected\":%u,\"icrc_ok\":%s",
                seg->icrc, seg->icrc_expected, seg->icrc_ok ? "true" : "false");
    if (prv != 0)
      sb_printf(&s, ",\"malformed\":\"%s\"", uroce_strerror(prv));
    sb_end(&s, "}\n");
    return s.len;
  }

  sb_printf(&s, "%6" PRIu64 " %" PRIu64 ".%09" PRIu64 " %s%s%s:%u > %s%s%s:%u",
            frameno, ts_ns / 1000000000u, ts_ns % 1000000000u,
            f->ipver == 6 ? "[" : "", src, f->ipver == 6 ? "]" : "", f->sport,
            f->ipver == 6 ? "[" : "", dst, f->ipver == 6 ? "]" : "", f->dport);
  if (f->vlan_tags)
    sb_printf(&s, " vlan=%u pcp=%u", f->vid, f->pcp);
  if (f->tclass >> 2)
    sb_printf(&s, " dscp=%u", f->tclass >> 2);
  if (f->tclass & 3)
    sb_printf(&s, " %s", ecn_name(f->tclass));
  if (gso_n > 1)
    sb_printf(&s, " [GSO %u/%u]", gso_i + 1, gso_n);
  if (has_bth) {
    sb_printf(&s, " %s qp=0x%06x psn=%u%s%s%s%s pad=%u pkey=0x%04x%s%s",
              opname, h->dqpn, h->psn, h->ackreq ? " A" : "",
              h->se ? " SE" : "", h->mig ? " M" : "",
              (h->resv7 & UROCE_BTH_MP) ? " MP" : "", h->pad, h->pkey,
              h->fecn ? " FECN" : "", h->becn ? " BECN" : "");
    if (h->tver)
      sb_printf(&s, " tver=%u", h->tver);
  }
  put_ext(&s, pi, h, false);
  if (pi->hdr_len && (!pi->op || (pi->op->mask & UROCE_OPM_PAYLOAD)))
    sb_printf(&s, " | payload %u", pi->payload_len);
  if (cm_mad_str(pi, h, cm, sizeof(cm)))
    sb_printf(&s, " | %s", cm);
  if (has_icrc)
    sb_printf(&s, " | icrc=0x%08x %s", seg->icrc, seg->icrc_ok ? "ok" : "BAD");
  if (!seg->icrc_ok && has_icrc)
    sb_printf(&s, " (expected 0x%08x)", seg->icrc_expected);
  if (prv != 0)
    sb_printf(&s, " | MALFORMED: %s", uroce_strerror(prv));
  sb_end(&s, "\n");
  return s.len;
}

struct uroce_inspect *uroce_inspect_new(const struct uroce_inspect_opts *o) {
  struct uroce_inspect *in = calloc(1, sizeof(*in));
  if (!in)
    return NULL;
  in->o = *o;
  if (!in->o.udp_port)
    in->o.udp_port = UROCE_UDP_PORT;
  return in;
}

void uroce_inspect_del(struct uroce_inspect *in) {
  if (!in)
    return;
  free(in->conv);
  free(in->hash);
  free(in);
}

const struct uroce_inspect_stats *
uroce_inspect_stats(const struct uroce_inspect *in) {
  return &in->st;
}

const struct uroce_conv *uroce_inspect_convs(const struct uroce_inspect *in,
                                             size_t *n) {
  *n = in->nconv;
  return in->conv;
}

void uroce_inspect_frame(struct uroce_inspect *in, int link,
                         const uint8_t *frame, size_t caplen, size_t wirelen,
                         uint64_t ts_ns, uint64_t frameno,
                         uroce_inspect_emit *emit, void *arg) {
  struct uroce_inspect_stats *st = &in->st;
  struct uroce_frame f;
  st->frames++;
  if (caplen < wirelen)
    st->truncated++;
  if (uroce_frame_parse_port(link, frame, caplen, in->o.udp_port, &f) != 0) {
    /* Only a packet that made it to the RoCEv2 port with sane lengths is
     * RoCE; anything else, including broken IP, is skipped. */
    st->non_roce++;
    return;
  }
  struct uroce_gso_split sp = uroce_gso_split(&f, in->segs);
  if (sp.nsegs > 1) {
    st->gso_frames++;
    st->gso_pkts += sp.nsegs;
  }
  for (uint32_t i = 0; i < sp.nsegs; i++) {
    const struct uroce_gso_seg *seg = &in->segs[i];
    struct uroce_pkt_info pi;
    struct uroce_hdr_fields h;
    int prv = uroce_pkt_parse(f.bth + seg->off, seg->len, &pi);
    uroce_hdr_decode(&pi, &h);
    bool has_icrc = seg->len >= UROCE_BTH_LEN + UROCE_ICRC_LEN;
    st->roce++;
    if (has_icrc && !seg->icrc_ok)
      st->bad_icrc++;
    if (prv != 0)
      st->malformed++;
    else
      st->by_opcode[pi.opcode]++;
    if (prv == 0 && pi.op &&
        (pi.op->mask & (UROCE_OPM_FIRST | UROCE_OPM_MIDDLE)) &&
        !(pi.op->mask & UROCE_OPM_LAST) && pi.payload_len > in->pmtu &&
        pi.payload_len <= 4096)
      in->pmtu = pi.payload_len;
    struct fpkt fp = {pi.len >= UROCE_BTH_LEN,
                      !has_icrc || seg->icrc_ok,
                      h.opcode,
                      h.dqpn,
                      h.psn,
                      f.src,
                      f.dst,
                      f.vlan_tags ? f.vid : -1};
    if (!filter_match(in->o.filter, &fp))
      continue;
    st->shown++;
    if (in->o.conv && fp.has_bth) {
      struct uroce_conv *c = conv_get(in, &f, h.dqpn);
      if (c)
        conv_account(in, c, &pi, &h, seg->len, fp.icrc_ok, ts_ns);
      else
        st->convs_dropped++;
    }
    if (emit) {
      size_t n = packet_line(in, &f, seg, i, sp.nsegs, sp.seg_size, &pi, &h,
                             prv, ts_ns, frameno);
      emit(arg, in->line, n);
    }
  }
}

static void conv_line(const struct uroce_inspect *in,
                      const struct uroce_conv *c, uroce_inspect_emit *emit,
                      void *arg) {
  char line[1024], src[64], dst[64];
  struct sb s = {line, 0, sizeof(line)};
  uroce_addr_str(c->ipver, c->src, src, sizeof(src));
  uroce_addr_str(c->ipver, c->dst, dst, sizeof(dst));
  double dur = (double)(c->last_ts - c->first_ts) / 1e9;
  if (in->o.json) {
    sb_printf(&s,
              "{\"conv\":{\"ip\":%d,\"src\":\"%s\",\"dst\":\"%s\",\"dqpn\":%u,"
              "\"packets\":%" PRIu64 ",\"bytes\":%" PRIu64
              ",\"duration_s\":%.9f,\"psn_first\":%u,\"psn_last\":%u,"
              "\"gaps\":%" PRIu64 ",\"gap_psns\":%" PRIu64
              ",\"retransmissions\":%" PRIu64 ",\"acks\":%" PRIu64
              ",\"naks\":%" PRIu64 ",\"rnr_naks\":%" PRIu64 ",\"cnps\":%" PRIu64
              ",\"bad_icrc\":%" PRIu64 "}}\n",
              c->ipver, src, dst, c->dqpn, c->packets, c->bytes, dur, c->psn_lo,
              c->psn_hi, c->gaps, c->gap_psns, c->retrans, c->acks, c->naks,
              c->rnr_naks, c->cnps, c->bad_icrc);
  } else {
    sb_printf(&s,
              "  %s > %s qp=0x%06x  %" PRIu64 " pkts %" PRIu64
              " bytes %.6fs  psn %u-%u  gaps %" PRIu64 " (%" PRIu64
              " PSNs)  retrans %" PRIu64 "  acks %" PRIu64 " naks %" PRIu64
              " rnr %" PRIu64 " cnp %" PRIu64 "  bad_icrc %" PRIu64 "\n",
              src, dst, c->dqpn, c->packets, c->bytes, dur, c->psn_lo,
              c->psn_hi, c->gaps, c->gap_psns, c->retrans, c->acks, c->naks,
              c->rnr_naks, c->cnps, c->bad_icrc);
  }
  emit(arg, line, s.len);
}

void uroce_inspect_summary(const struct uroce_inspect *in,
                           uroce_inspect_emit *emit, void *arg) {
  const struct uroce_inspect_stats *st = &in->st;
  char line[16384];
  struct sb s = {line, 0, sizeof(line)};
  if (in->o.conv) {
    if (!in->o.json) {
      sb_printf(&s, "conversations (source > destination QP): %zu\n",
                in->nconv);
      emit(arg, line, s.len);
    }
    for (size_t i = 0; i < in->nconv; i++)
      conv_line(in, &in->conv[i], emit, arg);
    s.len = 0;
  }
  if (in->o.json) {
    sb_printf(&s,
              "{\"summary\":{\"frames\":%" PRIu64 ",\"roce\":%" PRIu64
              ",\"non_roce\":%" PRIu64 ",\"malformed\":%" PRIu64
              ",\"bad_icrc\":%" PRIu64 ",\"gso_frames\":%" PRIu64
              ",\"gso_packets\":%" PRIu64 ",\"truncated\":%" PRIu64
              ",\"shown\":%" PRIu64 ",\"udp_port\":%u",
              st->frames, st->roce, st->non_roce, st->malformed, st->bad_icrc,
              st->gso_frames, st->gso_pkts, st->truncated, st->shown,
              in->o.udp_port);
    if (in->o.conv)
      sb_printf(&s, ",\"conversations\":%zu,\"conv_untracked\":%" PRIu64,
                in->nconv, st->convs_dropped);
    sb_printf(&s, ",\"by_opcode\":{");
    const char *sep = "";
    for (int i = 0; i < 256; i++) {
      if (!st->by_opcode[i])
        continue;
      sb_printf(&s, "%s\"%s\":%" PRIu64, sep, uroce_opcode_table[i].name,
                st->by_opcode[i]);
      sep = ",";
    }
    sb_end(&s, "}}}\n");
    emit(arg, line, s.len);
    return;
  }
  sb_printf(&s,
            "summary: %" PRIu64 " frames, %" PRIu64 " RoCEv2, %" PRIu64
            " other (skipped), %" PRIu64 " malformed, %" PRIu64 " bad ICRC\n",
            st->frames, st->roce, st->non_roce, st->malformed, st->bad_icrc);
  if (st->gso_frames)
    sb_printf(&s,
              "  %" PRIu64 " GSO/GRO super-frames split into %" PRIu64
              " packets\n",
              st->gso_frames, st->gso_pkts);
  if (in->o.filter)
    sb_printf(&s, "  %" PRIu64 " packets passed the filter\n", st->shown);
  if (st->truncated)
    sb_printf(&s,
              "  %" PRIu64 " frames cut short by the capture's snapshot "
              "length (capture with -s 0)\n",
              st->truncated);
  if (in->o.udp_port != UROCE_UDP_PORT)
    sb_printf(&s, "  RoCEv2 taken as UDP port %u\n", in->o.udp_port);
  if (st->convs_dropped)
    sb_printf(&s,
              "  %" PRIu64 " packets in conversations past the %u tracked\n",
              st->convs_dropped, CONV_MAX);
  for (int i = 0; i < 256; i++)
    if (st->by_opcode[i])
      sb_printf(&s, "  %-40s %" PRIu64 "\n", uroce_opcode_table[i].name,
                st->by_opcode[i]);
  emit(arg, line, s.len);
}
