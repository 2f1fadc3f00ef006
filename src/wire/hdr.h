/* RoCEv2 transport headers: parse once into a small uroce_pkt_info, then
 * read fields through the inline accessors below. The accessors take a
 * pointer to the header itself (uroce_pkt_hdr() finds it). */
#ifndef UROCE_WIRE_HDR_H
#define UROCE_WIRE_HDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/bytes.h"
#include "wire/opcode.h"

/* What parsing a packet (BTH through ICRC) found. Pointers point into the
 * caller's buffer, which must outlive the info. */
struct uroce_pkt_info {
  const uint8_t *bth;                 /* start of the BTH */
  const struct uroce_opcode_info *op; /* row of the opcode table */
  uint32_t len;                       /* BTH through ICRC inclusive */
  uint32_t payload_len;               /* payload bytes, without pad */
  uint16_t hdr_len; /* BTH plus extension headers; 0 if cut off */
  uint8_t opcode;
  uint8_t pad;
  uint32_t psn;
  uint32_t dqpn;
};

/* ---- BTH ---- */
static inline uint8_t uroce_bth_opcode(const uint8_t *b) {
  return b[0];
}
static inline bool uroce_bth_se(const uint8_t *b) {
  return b[1] >> 7;
}
static inline bool uroce_bth_mig(const uint8_t *b) {
  return (b[1] >> 6) & 1;
}
static inline uint8_t uroce_bth_pad(const uint8_t *b) {
  return (b[1] >> 4) & 3;
}
static inline uint8_t uroce_bth_tver(const uint8_t *b) {
  return b[1] & 0xF;
}
static inline uint16_t uroce_bth_pkey(const uint8_t *b) {
  return get_be16(b + 2);
}
static inline bool uroce_bth_fecn(const uint8_t *b) {
  return b[4] >> 7;
}
static inline bool uroce_bth_becn(const uint8_t *b) {
  return (b[4] >> 6) & 1;
}
static inline uint8_t uroce_bth_resv6(const uint8_t *b) {
  return b[4] & 0x3F;
}
static inline uint32_t uroce_bth_dqpn(const uint8_t *b) {
  return get_be24(b + 5);
}
static inline bool uroce_bth_ackreq(const uint8_t *b) {
  return b[8] >> 7;
}
static inline uint8_t uroce_bth_resv7(const uint8_t *b) {
  return b[8] & 0x7F;
}
/* uroce's multipath capability: the top bit of Resv7 (docs/transport.md).
 * Standard peers send 0 there and ignore it on receipt. */
#define UROCE_BTH_MP 0x40
static inline bool uroce_bth_mp(const uint8_t *b) {
  return (b[8] & UROCE_BTH_MP) != 0;
}
static inline void uroce_bth_set_mp(uint8_t *b, bool v) {
  b[8] = (uint8_t)((b[8] & ~UROCE_BTH_MP) | (v ? UROCE_BTH_MP : 0));
}
static inline uint32_t uroce_bth_psn(const uint8_t *b) {
  return get_be24(b + 9);
}

/* Writes a whole BTH. */
static inline void uroce_bth_put(uint8_t *b, uint8_t opcode, bool se, bool mig,
                                 uint8_t pad, uint16_t pkey, bool fecn,
                                 bool becn, uint32_t dqpn, bool ackreq,
                                 uint32_t psn) {
  b[0] = opcode;
  b[1] = (uint8_t)((se << 7) | (mig << 6) | ((pad & 3) << 4));
  put_be16(b + 2, pkey);
  b[4] = (uint8_t)((fecn << 7) | (becn << 6));
  put_be24(b + 5, dqpn);
  b[8] = (uint8_t)(ackreq << 7);
  put_be24(b + 9, psn);
}
static inline void uroce_bth_set_fecn(uint8_t *b, bool v) {
  b[4] = (uint8_t)((b[4] & 0x7F) | (v << 7));
}
static inline void uroce_bth_set_becn(uint8_t *b, bool v) {
  b[4] = (uint8_t)((b[4] & 0xBF) | (v << 6));
}

/* ---- RDETH: 8 reserved bits, 24-bit EE context ---- */
static inline uint32_t uroce_rdeth_een(const uint8_t *h) {
  return get_be24(h + 1);
}

/* ---- DETH: Q_Key, 8 reserved bits, 24-bit source QP ---- */
static inline uint32_t uroce_deth_qkey(const uint8_t *h) {
  return get_be32(h);
}
static inline uint32_t uroce_deth_sqp(const uint8_t *h) {
  return get_be24(h + 5);
}
/* XRCETH: 8 reserved bits, the target's 24-bit XRC SRQ number. */
static inline uint32_t uroce_xrceth_srqn(const uint8_t *h) {
  return get_be24(h + 1);
}
static inline void uroce_xrceth_put(uint8_t *h, uint32_t srqn) {
  h[0] = 0;
  put_be24(h + 1, srqn);
}
static inline void uroce_deth_put(uint8_t *h, uint32_t qkey, uint32_t sqp) {
  put_be32(h, qkey);
  h[4] = 0;
  put_be24(h + 5, sqp);
}

/* ---- RETH: virtual address, R_Key, DMA length ---- */
static inline uint64_t uroce_reth_va(const uint8_t *h) {
  return get_be64(h);
}
static inline uint32_t uroce_reth_rkey(const uint8_t *h) {
  return get_be32(h + 8);
}
static inline uint32_t uroce_reth_len(const uint8_t *h) {
  return get_be32(h + 12);
}
static inline void uroce_reth_put(uint8_t *h, uint64_t va, uint32_t rkey,
                                  uint32_t len) {
  put_be64(h, va);
  put_be32(h + 8, rkey);
  put_be32(h + 12, len);
}

/* ---- AtomicETH: VA, R_Key, swap (or add) data, compare data ---- */
static inline uint64_t uroce_atmeth_va(const uint8_t *h) {
  return get_be64(h);
}
static inline uint32_t uroce_atmeth_rkey(const uint8_t *h) {
  return get_be32(h + 8);
}
static inline uint64_t uroce_atmeth_swap_add(const uint8_t *h) {
  return get_be64(h + 12);
}
static inline uint64_t uroce_atmeth_compare(const uint8_t *h) {
  return get_be64(h + 20);
}
static inline void uroce_atmeth_put(uint8_t *h, uint64_t va, uint32_t rkey,
                                    uint64_t swap_add, uint64_t compare) {
  put_be64(h, va);
  put_be32(h + 8, rkey);
  put_be64(h + 12, swap_add);
  put_be64(h + 20, compare);
}

/* ---- AETH: syndrome byte, 24-bit MSN ---- */
enum uroce_aeth_kind {
  UROCE_AETH_ACK = 0,      /* 000: ACK, low 5 bits = credit count */
  UROCE_AETH_RNR_NAK = 1,  /* 001: RNR NAK, low 5 bits = timer code */
  UROCE_AETH_RESERVED = 2, /* 010 */
  UROCE_AETH_NAK = 3,      /* 011: NAK, low 5 bits = NAK code */
};
enum uroce_nak_code {
  UROCE_NAK_PSN_SEQ_ERR = 0,
  UROCE_NAK_INVALID_REQ = 1,
  UROCE_NAK_REM_ACCESS_ERR = 2,
  UROCE_NAK_REM_OP_ERR = 3,
  UROCE_NAK_INVALID_RD_REQ = 4,
};
#define UROCE_AETH_CREDITS_INVALID 0x1F /* "credit count not valid" */

static inline uint8_t uroce_aeth_syndrome(const uint8_t *h) {
  return h[0];
}
static inline uint32_t uroce_aeth_msn(const uint8_t *h) {
  return get_be24(h + 1);
}
static inline void uroce_aeth_put(uint8_t *h, uint8_t syndrome, uint32_t msn) {
  h[0] = syndrome;
  put_be24(h + 1, msn);
}
/* The top three bits decide, as in rxe: 000 ACK, 001 RNR NAK, 011 NAK;
 * anything else (010, or the reserved bit 7 set) is reserved. */
static inline enum uroce_aeth_kind uroce_aeth_kind(uint8_t syndrome) {
  unsigned k = syndrome >> 5;
  return k == 0 || k == 1 || k == 3 ? (enum uroce_aeth_kind)k
                                    : UROCE_AETH_RESERVED;
}
static inline uint8_t uroce_aeth_value(uint8_t syndrome) {
  return syndrome & 0x1F;
}
static inline uint8_t uroce_aeth_syn(enum uroce_aeth_kind k, uint8_t value) {
  return (uint8_t)(((unsigned)k << 5) | (value & 0x1F));
}

/* The RNR NAK timer code (0..31) as nanoseconds (code 0 = 655.36 ms). */
uint64_t uroce_rnr_timer_ns(uint8_t code);
/* Smallest timer code whose delay is >= ns (31 if none is). */
uint8_t uroce_rnr_timer_code(uint64_t ns);
/* "PSN-sequence-error", "remote-access-error", ... ; "reserved-N" else. */
const char *uroce_nak_name(uint8_t code);

/* ---- AtomicAckETH: original remote data ---- */
static inline uint64_t uroce_atmack_orig(const uint8_t *h) {
  return get_be64(h);
}
static inline void uroce_atmack_put(uint8_t *h, uint64_t orig) {
  put_be64(h, orig);
}

/* ---- MPETH (uroce multipath requests): 32-bit receive sequence number of
 * the message among those that consume a receive WQE, 32-bit byte offset
 * of the packet's payload in its message ---- */
static inline uint32_t uroce_mpeth_ssn(const uint8_t *h) {
  return get_be32(h);
}
static inline uint32_t uroce_mpeth_off(const uint8_t *h) {
  return get_be32(h + 4);
}
static inline void uroce_mpeth_put(uint8_t *h, uint32_t ssn, uint32_t off) {
  put_be32(h, ssn);
  put_be32(h + 4, off);
}

/* ---- SACKETH (uroce multipath selective ACK): 8-bit count of 64-bit
 * bitmap words that follow as the payload, 24-bit PSN of the bitmap's bit
 * 0 (word w, bit i from the least significant: PSN base + 64w + i
 * arrived); 8 bits of flags (bit 0: the next 24 bits are valid) and the
 * latest request PSN that arrived a second time (a D-SACK: if the requester
 * had sent it again, the resend was needless); with bit 1 instead, a
 * request PSN that arrived trimmed (a switch cut its payload: lost, send
 * it again now). ---- */
#define UROCE_SACK_MAX_WORDS 16
#define UROCE_SACK_DUP 1
#define UROCE_SACK_TRIM 2
static inline uint8_t uroce_sacketh_words(const uint8_t *h) {
  return h[0];
}
static inline uint32_t uroce_sacketh_base(const uint8_t *h) {
  return get_be24(h + 1);
}
static inline uint8_t uroce_sacketh_flags(const uint8_t *h) {
  return h[4];
}
static inline uint32_t uroce_sacketh_dup(const uint8_t *h) {
  return get_be24(h + 5);
}
static inline void uroce_sacketh_put(uint8_t *h, uint8_t words, uint32_t base,
                                     uint8_t flags, uint32_t dup) {
  h[0] = words;
  put_be24(h + 1, base);
  h[4] = flags;
  put_be24(h + 5, dup);
}

/* ---- ImmDt and IETH: one 32-bit word each ---- */
static inline uint32_t uroce_immdt(const uint8_t *h) {
  return get_be32(h);
}
static inline uint32_t uroce_ieth_rkey(const uint8_t *h) {
  return get_be32(h);
}

/* Pointer to header h in a parsed packet, or NULL if its opcode has none. */
static inline const uint8_t *uroce_pkt_hdr(const struct uroce_pkt_info *pi,
                                           enum uroce_hdr h) {
  return (pi->op->mask & UROCE_OPM_HDR(h)) ? pi->bth + pi->op->offset[h] : 0;
}
static inline const uint8_t *
uroce_pkt_payload(const struct uroce_pkt_info *pi) {
  return pi->bth + pi->hdr_len;
}

/* Parses a packet from the BTH through the ICRC (len bytes) into *pi,
 * checking every length against len. Does not verify the ICRC (that needs
 * the IP and UDP headers: see icrc.h).
 *
 * Returns 0, or
 *   UROCE_ERR_PKT_TRUNCATED  shorter than BTH + its headers + pad + ICRC;
 *   UROCE_ERR_PKT_BAD_OPCODE reserved opcode (pi->opcode is still set);
 *   UROCE_ERR_PKT_BAD_TVER   transport version not 0;
 *   UROCE_ERR_PKT_BAD_PAD    pad count larger than the payload;
 *   UROCE_ERR_PKT_UNALIGNED  len is not a multiple of 4;
 *   UROCE_ERR_PKT_EXTRA_PAYLOAD  bytes after the headers of an opcode that
 *                            carries no payload.
 * On an error other than TRUNCATED-before-BTH, pi->bth/opcode/psn/dqpn are
 * filled so that a packet inspector can still show them. */
int uroce_pkt_parse(const uint8_t *bth, size_t len, struct uroce_pkt_info *pi);

/* Every header field of every opcode, for building test packets and for
 * inspectors; the transport's hot path uses the accessors instead. */
struct uroce_hdr_fields {
  uint8_t opcode;
  bool se, mig, fecn, becn, ackreq;
  uint8_t pad, tver, resv6, resv7;
  uint16_t pkey;
  uint32_t dqpn, psn;
  uint32_t een;               /* RDETH */
  uint32_t qkey, sqp;         /* DETH */
  uint32_t xrc_srqn;          /* XRCETH */
  uint64_t va;                /* RETH / AtomicETH */
  uint32_t rkey, dma_len;     /* RETH (rkey also AtomicETH) */
  uint64_t swap_add, compare; /* AtomicETH */
  uint8_t syndrome;           /* AETH */
  uint32_t msn;               /* AETH */
  uint64_t orig;              /* AtomicAckETH */
  uint32_t imm;               /* ImmDt */
  uint32_t inv_rkey;          /* IETH */
  uint32_t ssn, mp_off;       /* MPETH */
  uint8_t sack_words;         /* SACKETH */
  uint32_t sack_base;
  uint8_t sack_flags;
  uint32_t sack_dup;
};

/* Writes the BTH and the extension headers of f->opcode at p (which must
 * have room for uroce_opcode(f->opcode)->length bytes). Returns the number
 * of header bytes written, or UROCE_ERR_PKT_BAD_OPCODE. */
int uroce_hdr_encode(uint8_t *p, const struct uroce_hdr_fields *f);

/* Reads every header field of a parsed packet into *f (absent headers'
 * fields are zero). */
void uroce_hdr_decode(const struct uroce_pkt_info *pi,
                      struct uroce_hdr_fields *f);

#endif
