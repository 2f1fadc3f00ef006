#include "wire/hdr.h"

#include "uroce/errors.h"

/* IBA table 45 "Encoding for RNR NAK Timer Field", in nanoseconds. */
static const uint64_t rnr_ns[32] = {
    655360000, 10000,     20000,     30000,    40000,    60000,    80000,
    120000,    160000,    240000,    320000,   480000,   640000,   960000,
    1280000,   1920000,   2560000,   3840000,  5120000,  7680000,  10240000,
    15360000,  20480000,  30720000,  40960000, 61440000, 81920000, 122880000,
    163840000, 245760000, 327680000, 491520000};

uint64_t uroce_rnr_timer_ns(uint8_t code) {
  return rnr_ns[code & 31];
}

uint8_t uroce_rnr_timer_code(uint64_t ns) {
  for (uint8_t c = 1; c < 32; c++)
    if (rnr_ns[c] >= ns)
      return c;
  return ns <= rnr_ns[0] ? 0 : 31;
}

const char *uroce_nak_name(uint8_t code) {
  static const char *const names[] = {
      "PSN-sequence-error", "invalid-request", "remote-access-error",
      "remote-operational-error", "invalid-RD-request"};
  static const char *const reserved[32] = {
      [5] = "reserved-5",   [6] = "reserved-6",   [7] = "reserved-7",
      [8] = "reserved-8",   [9] = "reserved-9",   [10] = "reserved-10",
      [11] = "reserved-11", [12] = "reserved-12", [13] = "reserved-13",
      [14] = "reserved-14", [15] = "reserved-15", [16] = "reserved-16",
      [17] = "reserved-17", [18] = "reserved-18", [19] = "reserved-19",
      [20] = "reserved-20", [21] = "reserved-21", [22] = "reserved-22",
      [23] = "reserved-23", [24] = "reserved-24", [25] = "reserved-25",
      [26] = "reserved-26", [27] = "reserved-27", [28] = "reserved-28",
      [29] = "reserved-29", [30] = "reserved-30", [31] = "reserved-31"};
  code &= 31;
  return code < 5 ? names[code] : reserved[code];
}

int uroce_pkt_parse(const uint8_t *bth, size_t len, struct uroce_pkt_info *pi) {
  pi->bth = bth;
  pi->op = 0;
  pi->len = (uint32_t)len;
  pi->payload_len = 0;
  pi->hdr_len = 0;
  pi->pad = 0;
  pi->opcode = 0;
  pi->psn = pi->dqpn = 0;
  if (len < UROCE_BTH_LEN || len > UINT32_MAX) {
    pi->len = 0; /* no BTH to show */
    return UROCE_ERR_PKT_TRUNCATED;
  }
  pi->opcode = uroce_bth_opcode(bth);
  pi->psn = uroce_bth_psn(bth);
  pi->dqpn = uroce_bth_dqpn(bth);
  pi->pad = uroce_bth_pad(bth);
  pi->op = uroce_opcode(pi->opcode);
  if (!pi->op)
    return UROCE_ERR_PKT_BAD_OPCODE;
  if (uroce_bth_tver(bth) != 0)
    return UROCE_ERR_PKT_BAD_TVER;
  if (len < (size_t)pi->op->length + UROCE_ICRC_LEN)
    return UROCE_ERR_PKT_TRUNCATED;
  pi->hdr_len = pi->op->length; /* set only once the headers are there */
  size_t rest = len - pi->hdr_len - UROCE_ICRC_LEN; /* payload + pad */
  if (pi->pad > rest)
    return UROCE_ERR_PKT_BAD_PAD;
  pi->payload_len = (uint32_t)(rest - pi->pad);
  if (len & 3)
    return UROCE_ERR_PKT_UNALIGNED;
  if (!(pi->op->mask & UROCE_OPM_PAYLOAD) && rest != 0)
    return UROCE_ERR_PKT_EXTRA_PAYLOAD;
  return 0;
}

int uroce_hdr_encode(uint8_t *p, const struct uroce_hdr_fields *f) {
  const struct uroce_opcode_info *op = uroce_opcode(f->opcode);
  if (!op)
    return UROCE_ERR_PKT_BAD_OPCODE;
  p[0] = f->opcode;
  p[1] = (uint8_t)((f->se << 7) | (f->mig << 6) | ((f->pad & 3) << 4) |
                   (f->tver & 0xF));
  put_be16(p + 2, f->pkey);
  p[4] = (uint8_t)((f->fecn << 7) | (f->becn << 6) | (f->resv6 & 0x3F));
  put_be24(p + 5, f->dqpn);
  p[8] = (uint8_t)((f->ackreq << 7) | (f->resv7 & 0x7F));
  put_be24(p + 9, f->psn);

  uint32_t m = op->mask;
  if (m & UROCE_OPM_HDR(UROCE_HDR_RDETH)) {
    uint8_t *h = p + op->offset[UROCE_HDR_RDETH];
    h[0] = 0;
    put_be24(h + 1, f->een);
  }
  if (m & UROCE_OPM_HDR(UROCE_HDR_DETH))
    uroce_deth_put(p + op->offset[UROCE_HDR_DETH], f->qkey, f->sqp);
  if (m & UROCE_OPM_HDR(UROCE_HDR_XRCETH))
    uroce_xrceth_put(p + op->offset[UROCE_HDR_XRCETH], f->xrc_srqn);
  if (m & UROCE_OPM_HDR(UROCE_HDR_RETH))
    uroce_reth_put(p + op->offset[UROCE_HDR_RETH], f->va, f->rkey, f->dma_len);
  if (m & UROCE_OPM_HDR(UROCE_HDR_ATMETH))
    uroce_atmeth_put(p + op->offset[UROCE_HDR_ATMETH], f->va, f->rkey,
                     f->swap_add, f->compare);
  if (m & UROCE_OPM_HDR(UROCE_HDR_AETH))
    uroce_aeth_put(p + op->offset[UROCE_HDR_AETH], f->syndrome, f->msn);
  if (m & UROCE_OPM_HDR(UROCE_HDR_ATMACK))
    uroce_atmack_put(p + op->offset[UROCE_HDR_ATMACK], f->orig);
  if (m & UROCE_OPM_HDR(UROCE_HDR_MPETH))
    uroce_mpeth_put(p + op->offset[UROCE_HDR_MPETH], f->ssn, f->mp_off);
  if (m & UROCE_OPM_HDR(UROCE_HDR_SACKETH))
    uroce_sacketh_put(p + op->offset[UROCE_HDR_SACKETH], f->sack_words,
                      f->sack_base, f->sack_flags, f->sack_dup);
  if (m & UROCE_OPM_HDR(UROCE_HDR_IMMDT))
    put_be32(p + op->offset[UROCE_HDR_IMMDT], f->imm);
  if (m & UROCE_OPM_HDR(UROCE_HDR_IETH))
    put_be32(p + op->offset[UROCE_HDR_IETH], f->inv_rkey);
  if (m & UROCE_OPM_HDR(UROCE_HDR_CNPPAD))
    memset(p + op->offset[UROCE_HDR_CNPPAD], 0, UROCE_CNPPAD_LEN);
  return op->length;
}

void uroce_hdr_decode(const struct uroce_pkt_info *pi,
                      struct uroce_hdr_fields *f) {
  const uint8_t *b = pi->bth, *h;
  memset(f, 0, sizeof(*f));
  if (pi->len < UROCE_BTH_LEN)
    return;
  f->opcode = uroce_bth_opcode(b);
  f->se = uroce_bth_se(b);
  f->mig = uroce_bth_mig(b);
  f->pad = uroce_bth_pad(b);
  f->tver = uroce_bth_tver(b);
  f->pkey = uroce_bth_pkey(b);
  f->fecn = uroce_bth_fecn(b);
  f->becn = uroce_bth_becn(b);
  f->resv6 = uroce_bth_resv6(b);
  f->dqpn = uroce_bth_dqpn(b);
  f->ackreq = uroce_bth_ackreq(b);
  f->resv7 = uroce_bth_resv7(b);
  f->psn = uroce_bth_psn(b);
  if (!pi->op || !pi->hdr_len)
    return; /* extension headers absent or cut off */
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_RDETH)))
    f->een = uroce_rdeth_een(h);
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_DETH))) {
    f->qkey = uroce_deth_qkey(h);
    f->sqp = uroce_deth_sqp(h);
  }
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_XRCETH)))
    f->xrc_srqn = uroce_xrceth_srqn(h);
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_RETH))) {
    f->va = uroce_reth_va(h);
    f->rkey = uroce_reth_rkey(h);
    f->dma_len = uroce_reth_len(h);
  }
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_ATMETH))) {
    f->va = uroce_atmeth_va(h);
    f->rkey = uroce_atmeth_rkey(h);
    f->swap_add = uroce_atmeth_swap_add(h);
    f->compare = uroce_atmeth_compare(h);
  }
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_AETH))) {
    f->syndrome = uroce_aeth_syndrome(h);
    f->msn = uroce_aeth_msn(h);
  }
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_ATMACK)))
    f->orig = uroce_atmack_orig(h);
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_MPETH))) {
    f->ssn = uroce_mpeth_ssn(h);
    f->mp_off = uroce_mpeth_off(h);
  }
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_SACKETH))) {
    f->sack_words = uroce_sacketh_words(h);
    f->sack_base = uroce_sacketh_base(h);
    f->sack_flags = uroce_sacketh_flags(h);
    f->sack_dup = uroce_sacketh_dup(h);
  }
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_IMMDT)))
    f->imm = uroce_immdt(h);
  if ((h = uroce_pkt_hdr(pi, UROCE_HDR_IETH)))
    f->inv_rkey = uroce_ieth_rkey(h);
}
