/* The BTH opcode table: one row per opcode says which extension headers the
 * packet carries, at which offsets from the start of the BTH, and what the
 * packet means. Everything that parses or builds packets reads this table
 * instead of switching on opcodes. */
#ifndef UROCE_WIRE_OPCODE_H
#define UROCE_WIRE_OPCODE_H

#include <stdint.h>

/* Header sizes in bytes. */
#define UROCE_BTH_LEN 12
#define UROCE_RDETH_LEN 4
#define UROCE_DETH_LEN 8
#define UROCE_XRCETH_LEN 4 /* 8 reserved bits, 24-bit XRC SRQ number */
#define UROCE_RETH_LEN 16
#define UROCE_ATMETH_LEN 28
#define UROCE_AETH_LEN 4
#define UROCE_ATMACK_LEN 8
#define UROCE_IMMDT_LEN 4
#define UROCE_IETH_LEN 4
#define UROCE_MPETH_LEN 8   /* uroce multipath: SSN, byte offset */
#define UROCE_SACKETH_LEN 8 /* uroce multipath: bitmap words, base PSN,
                               duplicate PSN */
#define UROCE_CNPPAD_LEN 16 /* the 16 reserved bytes of a RoCEv2 CNP */
#define UROCE_ICRC_LEN 4
#define UROCE_UDP_PORT 4791

/* Extension headers, in the order they appear on the wire. */
enum uroce_hdr {
  UROCE_HDR_BTH,
  UROCE_HDR_RDETH,
  UROCE_HDR_DETH,
  UROCE_HDR_XRCETH,
  UROCE_HDR_RETH,
  UROCE_HDR_ATMETH,
  UROCE_HDR_AETH,
  UROCE_HDR_ATMACK,
  UROCE_HDR_MPETH,
  UROCE_HDR_SACKETH,
  UROCE_HDR_IMMDT,
  UROCE_HDR_IETH,
  UROCE_HDR_CNPPAD,
  UROCE_HDR_COUNT
};

/* Mask bits: header presence (bit = 1 << enum uroce_hdr) ... */
#define UROCE_OPM_HDR(h) (1u << (h))
/* ... and meaning. */
#define UROCE_OPM_REQ (1u << 13)   /* sent by a requester */
#define UROCE_OPM_RESP (1u << 14)  /* sent by a responder (acks, read resp) */
#define UROCE_OPM_FIRST (1u << 15) /* first packet of a message */
#define UROCE_OPM_MIDDLE (1u << 16)
#define UROCE_OPM_LAST (1u << 17)    /* ONLY = FIRST | LAST */
#define UROCE_OPM_PAYLOAD (1u << 18) /* may carry payload */
#define UROCE_OPM_IMM (1u << 19)     /* carries immediate data */
#define UROCE_OPM_INV (1u << 20)     /* carries an rkey to invalidate */
#define UROCE_OPM_SEND (1u << 21)
#define UROCE_OPM_WRITE (1u << 22)
#define UROCE_OPM_READ (1u << 23)     /* read request or read response */
#define UROCE_OPM_ATOMIC (1u << 24)   /* atomic request or atomic ack */
#define UROCE_OPM_ACK (1u << 25)      /* ACK/NAK (AETH without data) */
#define UROCE_OPM_RECV_WQE (1u << 26) /* consumes a receive WQE when last */
/* reliable request: the responder answers */
#define UROCE_OPM_NEEDS_ACK (1u << 27)
#define UROCE_OPM_CNP (1u << 28)
#define UROCE_OPM_MP (1u << 29) /* uroce multipath opcode (0xC0 block) */
#define UROCE_OPM_ONLY (UROCE_OPM_FIRST | UROCE_OPM_LAST)

enum uroce_transport {
  UROCE_TRANSPORT_RC = 0,
  UROCE_TRANSPORT_UC = 1,
  UROCE_TRANSPORT_RD = 2,
  UROCE_TRANSPORT_UD = 3,
  UROCE_TRANSPORT_CNP = 4, /* 0x80 base: RoCEv2 congestion notification */
  UROCE_TRANSPORT_XRC = 5, /* 0xA0 base: extended reliable connected */
};

/* Opcodes that the transport uses by name (RC base; UC = RC + 0x20). */
enum uroce_opcode {
  UROCE_OP_SEND_FIRST = 0x00,
  UROCE_OP_SEND_MIDDLE = 0x01,
  UROCE_OP_SEND_LAST = 0x02,
  UROCE_OP_SEND_LAST_IMM = 0x03,
  UROCE_OP_SEND_ONLY = 0x04,
  UROCE_OP_SEND_ONLY_IMM = 0x05,
  UROCE_OP_WRITE_FIRST = 0x06,
  UROCE_OP_WRITE_MIDDLE = 0x07,
  UROCE_OP_WRITE_LAST = 0x08,
  UROCE_OP_WRITE_LAST_IMM = 0x09,
  UROCE_OP_WRITE_ONLY = 0x0A,
  UROCE_OP_WRITE_ONLY_IMM = 0x0B,
  UROCE_OP_READ_REQ = 0x0C,
  UROCE_OP_READ_RESP_FIRST = 0x0D,
  UROCE_OP_READ_RESP_MIDDLE = 0x0E,
  UROCE_OP_READ_RESP_LAST = 0x0F,
  UROCE_OP_READ_RESP_ONLY = 0x10,
  UROCE_OP_ACK = 0x11,
  UROCE_OP_ATOMIC_ACK = 0x12,
  UROCE_OP_CMP_SWAP = 0x13,
  UROCE_OP_FETCH_ADD = 0x14,
  UROCE_OP_SEND_LAST_INV = 0x16,
  UROCE_OP_SEND_ONLY_INV = 0x17,
  UROCE_OP_UC_BASE = 0x20,
  UROCE_OP_RD_BASE = 0x40,
  UROCE_OP_XRC_BASE = 0xA0, /* RC + 0xA0, XRCETH on every request */
  UROCE_OP_UD_SEND_ONLY = 0x64,
  UROCE_OP_UD_SEND_ONLY_IMM = 0x65,
  UROCE_OP_CNP = 0x81,
  /* uroce's multipath RC opcodes, in the manufacturer-specific block
   * (docs/transport.md): 0xC0 + the RC opcode of the same meaning. Only
   * sent to a peer that announced it speaks them. */
  UROCE_OP_MP_BASE = 0xC0,
  UROCE_OP_MP_SACK = 0xD1, /* ACK + SACKETH + bitmap */
};

struct uroce_opcode_info {
  const char *name; /* "RC_SEND_FIRST"; NULL for reserved opcodes */
  uint32_t mask;    /* UROCE_OPM_* */
  uint8_t length;   /* BTH plus all extension headers */
  uint8_t offset[UROCE_HDR_COUNT]; /* from the BTH; valid if present */
};

/* Indexed by the BTH opcode byte; rows with name == NULL are reserved. */
extern const struct uroce_opcode_info uroce_opcode_table[256];

static inline const struct uroce_opcode_info *uroce_opcode(uint8_t opcode) {
  const struct uroce_opcode_info *oi = &uroce_opcode_table[opcode];
  return oi->name ? oi : 0;
}

static inline enum uroce_transport uroce_opcode_transport(uint8_t opcode) {
  if ((opcode & 0xE0) == UROCE_OP_MP_BASE)
    return UROCE_TRANSPORT_RC;
  if ((opcode & 0xE0) == UROCE_OP_XRC_BASE)
    return UROCE_TRANSPORT_XRC;
  return opcode >= 0x80 ? UROCE_TRANSPORT_CNP
                        : (enum uroce_transport)(opcode >> 5);
}

/* Name of a header for printing ("RETH"). */
const char *uroce_hdr_name(enum uroce_hdr h);

#endif
