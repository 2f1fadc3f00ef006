#include "wire/inspect.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "uroce/uroce.h"
#include "wire/frame.h"
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
  if (HAS(IMMDT))
    sb_printf(s, json ? ",\"immdt\":%u" : " | ImmDt 0x%08x", h->imm);
  if (HAS(IETH))
    sb_printf(s, json ? ",\"ieth\":{\"rkey\":%u}" : " | IETH rkey=0x%08x",
              h->inv_rkey);
#undef HAS
}

size_t uroce_inspect_frame(int link, const uint8_t *frame, size_t len,
                           uint64_t ts_ns, uint64_t frameno, bool json,
                           struct uroce_inspect_stats *st, char *out,
                           size_t outlen) {
  struct uroce_frame f;
  struct uroce_pkt_info pi;
  struct uroce_hdr_fields h;
  struct sb s = {out, 0, outlen};
  char src[64], dst[64];

  st->frames++;
  if (outlen)
    out[0] = 0;
  int rv = uroce_frame_parse(link, frame, len, &f);
  if (rv != 0) {
    /* Only a packet that made it to UDP port 4791 with sane lengths is
     * RoCE; anything else, including broken IP, is skipped. */
    st->non_roce++;
    return 0;
  }
  st->roce++;
  int prv = uroce_pkt_parse(f.bth, f.bth_len, &pi);
  uroce_hdr_decode(&pi, &h);
  bool has_bth = pi.len >= UROCE_BTH_LEN;
  bool has_icrc = f.bth_len >= UROCE_BTH_LEN + UROCE_ICRC_LEN;
  uint32_t icrc = 0, want = 0;
  bool icrc_ok = false;
  if (has_icrc) {
    icrc = uroce_frame_icrc_carried(&f);
    want = uroce_frame_icrc(&f);
    icrc_ok = icrc == want;
    if (!icrc_ok)
      st->bad_icrc++;
  }
  if (prv != 0)
    st->malformed++;
  else
    st->by_opcode[pi.opcode]++;

  uroce_addr_str(f.ipver, f.src, src, sizeof(src));
  uroce_addr_str(f.ipver, f.dst, dst, sizeof(dst));
  const char *opname = pi.op ? pi.op->name : "reserved";

  if (json) {
    sb_printf(&s,
              "{\"frame\":%" PRIu64 ",\"ts\":%" PRIu64 ".%09" PRIu64
              ",\"ip\":%d,\"src\":\"%s\",\"dst\":\"%s\",\"sport\":%u,"
              "\"dport\":%u,\"tclass\":%u,\"ecn\":%u,\"ttl\":%u",
              frameno, ts_ns / 1000000000u, ts_ns % 1000000000u, f.ipver, src,
              dst, f.sport, f.dport, f.tclass, f.tclass & 3, f.ttl);
    if (f.ipver == 4)
      sb_printf(&s, ",\"ip_id\":%u", f.ip_id);
    else
      sb_printf(&s, ",\"flow_label\":%u", f.flow_label);
    if (has_bth)
      sb_printf(&s,
                ",\"opcode\":%u,\"opname\":\"%s\",\"se\":%d,\"mig\":%d,"
                "\"pad\":%u,\"tver\":%u,\"pkey\":%u,\"fecn\":%d,\"becn\":%d,"
                "\"resv6\":%u,\"dqpn\":%u,\"ackreq\":%d,\"resv7\":%u,"
                "\"psn\":%u",
                h.opcode, opname, h.se, h.mig, h.pad, h.tver, h.pkey, h.fecn,
                h.becn, h.resv6, h.dqpn, h.ackreq, h.resv7, h.psn);
    put_ext(&s, &pi, &h, true);
    if (pi.hdr_len)
      sb_printf(&s, ",\"payload_len\":%u", pi.payload_len);
    if (has_icrc)
      sb_printf(&s, ",\"icrc\":%u,\"icrc_expected\":%u,\"icrc_ok\":%s", icrc,
                want, icrc_ok ? "true" : "false");
    if (prv != 0)
      sb_printf(&s, ",\"malformed\":\"%s\"", uroce_strerror(prv));
    sb_printf(&s, "}\n");
    return s.len;
  }

  sb_printf(&s, "%6" PRIu64 " %" PRIu64 ".%09" PRIu64 " %s%s%s:%u > %s%s%s:%u",
            frameno, ts_ns / 1000000000u, ts_ns % 1000000000u,
            f.ipver == 6 ? "[" : "", src, f.ipver == 6 ? "]" : "", f.sport,
            f.ipver == 6 ? "[" : "", dst, f.ipver == 6 ? "]" : "", f.dport);
  if (f.tclass & 3)
    sb_printf(&s, " %s", ecn_name(f.tclass));
  if (has_bth) {
    sb_printf(&s, " %s qp=0x%06x psn=%u%s%s%s pad=%u pkey=0x%04x%s%s", opname,
              h.dqpn, h.psn, h.ackreq ? " A" : "", h.se ? " SE" : "",
              h.mig ? " M" : "", h.pad, h.pkey, h.fecn ? " FECN" : "",
              h.becn ? " BECN" : "");
    if (h.tver)
      sb_printf(&s, " tver=%u", h.tver);
  }
  put_ext(&s, &pi, &h, false);
  if (pi.hdr_len && (!pi.op || (pi.op->mask & UROCE_OPM_PAYLOAD)))
    sb_printf(&s, " | payload %u", pi.payload_len);
  if (has_icrc)
    sb_printf(&s, " | icrc=0x%08x %s", icrc, icrc_ok ? "ok" : "BAD");
  if (!icrc_ok && has_icrc)
    sb_printf(&s, " (expected 0x%08x)", want);
  if (prv != 0)
    sb_printf(&s, " | MALFORMED: %s", uroce_strerror(prv));
  sb_printf(&s, "\n");
  return s.len;
}

size_t uroce_inspect_summary(const struct uroce_inspect_stats *st, bool json,
                             char *out, size_t outlen) {
  struct sb s = {out, 0, outlen};
  if (outlen)
    out[0] = 0;
  if (json) {
    sb_printf(&s,
              "{\"summary\":{\"frames\":%" PRIu64 ",\"roce\":%" PRIu64
              ",\"non_roce\":%" PRIu64 ",\"malformed\":%" PRIu64
              ",\"bad_icrc\":%" PRIu64 ",\"by_opcode\":{",
              st->frames, st->roce, st->non_roce, st->malformed, st->bad_icrc);
    const char *sep = "";
    for (int i = 0; i < 256; i++) {
      if (!st->by_opcode[i])
        continue;
      sb_printf(&s, "%s\"%s\":%" PRIu64, sep, uroce_opcode_table[i].name,
                st->by_opcode[i]);
      sep = ",";
    }
    sb_printf(&s, "}}}\n");
    return s.len;
  }
  sb_printf(&s,
            "summary: %" PRIu64 " frames, %" PRIu64 " RoCEv2, %" PRIu64
            " other (skipped), %" PRIu64 " malformed, %" PRIu64 " bad ICRC\n",
            st->frames, st->roce, st->non_roce, st->malformed, st->bad_icrc);
  for (int i = 0; i < 256; i++)
    if (st->by_opcode[i])
      sb_printf(&s, "  %-40s %" PRIu64 "\n", uroce_opcode_table[i].name,
                st->by_opcode[i]);
  return s.len;
}
