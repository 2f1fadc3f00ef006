/* The opcode table. Each row is written once as a name plus a mask of
 * headers and meanings; the header offsets are derived from the mask at
 * compile time, in wire order, so they cannot disagree with it. */
#include "wire/opcode.h"

#define H(h) UROCE_OPM_HDR(UROCE_HDR_##h)
#define HAS(m, h) (((m) >> UROCE_HDR_##h) & 1u)

#define OFF_RDETH(m) UROCE_BTH_LEN
#define OFF_DETH(m) (OFF_RDETH(m) + HAS(m, RDETH) * UROCE_RDETH_LEN)
#define OFF_XRCETH(m) (OFF_DETH(m) + HAS(m, DETH) * UROCE_DETH_LEN)
#define OFF_RETH(m) (OFF_XRCETH(m) + HAS(m, XRCETH) * UROCE_XRCETH_LEN)
#define OFF_ATMETH(m) (OFF_RETH(m) + HAS(m, RETH) * UROCE_RETH_LEN)
#define OFF_AETH(m) (OFF_ATMETH(m) + HAS(m, ATMETH) * UROCE_ATMETH_LEN)
#define OFF_ATMACK(m) (OFF_AETH(m) + HAS(m, AETH) * UROCE_AETH_LEN)
#define OFF_MPETH(m) (OFF_ATMACK(m) + HAS(m, ATMACK) * UROCE_ATMACK_LEN)
#define OFF_SACKETH(m) (OFF_MPETH(m) + HAS(m, MPETH) * UROCE_MPETH_LEN)
#define OFF_IMMDT(m) (OFF_SACKETH(m) + HAS(m, SACKETH) * UROCE_SACKETH_LEN)
#define OFF_IETH(m) (OFF_IMMDT(m) + HAS(m, IMMDT) * UROCE_IMMDT_LEN)
#define OFF_CNPPAD(m) (OFF_IETH(m) + HAS(m, IETH) * UROCE_IETH_LEN)
#define LENGTH(m) (OFF_CNPPAD(m) + HAS(m, CNPPAD) * UROCE_CNPPAD_LEN)

#define ROW(code, nm, m)                                                       \
  [code] = {                                                                   \
      .name = nm,                                                              \
      .mask = (m) | H(BTH),                                                    \
      .length = LENGTH(m),                                                     \
      .offset = {0, OFF_RDETH(m), OFF_DETH(m), OFF_XRCETH(m), OFF_RETH(m),     \
                 OFF_ATMETH(m), OFF_AETH(m), OFF_ATMACK(m), OFF_MPETH(m),      \
                 OFF_SACKETH(m), OFF_IMMDT(m), OFF_IETH(m), OFF_CNPPAD(m)},    \
  }

/* Meanings shared by the rows below. */
#define RQ UROCE_OPM_REQ
#define RS UROCE_OPM_RESP
#define F UROCE_OPM_FIRST
#define M UROCE_OPM_MIDDLE
#define L UROCE_OPM_LAST
#define O UROCE_OPM_ONLY
#define P UROCE_OPM_PAYLOAD
#define SND (UROCE_OPM_SEND | RQ | P)
#define WR (UROCE_OPM_WRITE | RQ | P)
#define IMM (UROCE_OPM_IMM | H(IMMDT))
#define INV (UROCE_OPM_INV | H(IETH))
#define RWQE UROCE_OPM_RECV_WQE
#define ACKD UROCE_OPM_NEEDS_ACK
#define MPR (ACKD | UROCE_OPM_MP | H(MPETH)) /* multipath request */

/* The SEND and RDMA WRITE rows are the same for RC, UC and RD apart from
 * the base opcode, the RD headers and whether the responder acknowledges. */
#define SEND_WRITE_ROWS(base, T, x)                                            \
  ROW(base + 0x00, T "_SEND_FIRST", SND | F | (x)),                            \
      ROW(base + 0x01, T "_SEND_MIDDLE", SND | M | (x)),                       \
      ROW(base + 0x02, T "_SEND_LAST", SND | L | RWQE | (x)),                  \
      ROW(base + 0x03, T "_SEND_LAST_WITH_IMMEDIATE",                          \
          SND | L | IMM | RWQE | (x)),                                         \
      ROW(base + 0x04, T "_SEND_ONLY", SND | O | RWQE | (x)),                  \
      ROW(base + 0x05, T "_SEND_ONLY_WITH_IMMEDIATE",                          \
          SND | O | IMM | RWQE | (x)),                                         \
      ROW(base + 0x06, T "_RDMA_WRITE_FIRST", WR | F | H(RETH) | (x)),         \
      ROW(base + 0x07, T "_RDMA_WRITE_MIDDLE", WR | M | (x)),                  \
      ROW(base + 0x08, T "_RDMA_WRITE_LAST", WR | L | (x)),                    \
      ROW(base + 0x09, T "_RDMA_WRITE_LAST_WITH_IMMEDIATE",                    \
          WR | L | IMM | RWQE | (x)),                                          \
      ROW(base + 0x0A, T "_RDMA_WRITE_ONLY", WR | O | H(RETH) | (x)),          \
      ROW(base + 0x0B, T "_RDMA_WRITE_ONLY_WITH_IMMEDIATE",                    \
          WR | O | H(RETH) | IMM | RWQE | (x))

/* READ, ACK and atomic rows exist for RC and RD. */
#define READ_ATOMIC_ROWS(base, T, rq, rs)                                      \
  ROW(base + 0x0C, T "_RDMA_READ_REQUEST",                                     \
      UROCE_OPM_READ | RQ | O | ACKD | H(RETH) | (rq)),                        \
      ROW(base + 0x0D, T "_RDMA_READ_RESPONSE_FIRST",                          \
          UROCE_OPM_READ | RS | F | P | H(AETH) | (rs)),                       \
      ROW(base + 0x0E, T "_RDMA_READ_RESPONSE_MIDDLE",                         \
          UROCE_OPM_READ | RS | M | P | (rs)),                                 \
      ROW(base + 0x0F, T "_RDMA_READ_RESPONSE_LAST",                           \
          UROCE_OPM_READ | RS | L | P | H(AETH) | (rs)),                       \
      ROW(base + 0x10, T "_RDMA_READ_RESPONSE_ONLY",                           \
          UROCE_OPM_READ | RS | O | P | H(AETH) | (rs)),                       \
      ROW(base + 0x11, T "_ACKNOWLEDGE",                                       \
          UROCE_OPM_ACK | RS | O | H(AETH) | (rs)),                            \
      ROW(base + 0x12, T "_ATOMIC_ACKNOWLEDGE",                                \
          UROCE_OPM_ATOMIC | RS | O | H(AETH) | H(ATMACK) | (rs)),             \
      ROW(base + 0x13, T "_COMPARE_SWAP",                                      \
          UROCE_OPM_ATOMIC | RQ | O | ACKD | H(ATMETH) | (rq)),                \
      ROW(base + 0x14, T "_FETCH_ADD",                                         \
          UROCE_OPM_ATOMIC | RQ | O | ACKD | H(ATMETH) | (rq))

const struct uroce_opcode_info uroce_opcode_table[256] = {
    SEND_WRITE_ROWS(0x00, "RC", ACKD),
    READ_ATOMIC_ROWS(0x00, "RC", 0, 0),
    ROW(0x16, "RC_SEND_LAST_WITH_INVALIDATE", SND | L | INV | RWQE | ACKD),
    ROW(0x17, "RC_SEND_ONLY_WITH_INVALIDATE", SND | O | INV | RWQE | ACKD),

    SEND_WRITE_ROWS(0x20, "UC", 0),

    /* Reliable Datagram: decoded for captures, not spoken by the transport. */
    SEND_WRITE_ROWS(0x40, "RD", ACKD | H(RDETH) | H(DETH)),
    READ_ATOMIC_ROWS(0x40, "RD", H(RDETH) | H(DETH), H(RDETH)),
    ROW(0x55, "RD_RESYNC", RQ | O | ACKD | H(RDETH) | H(DETH)),

    ROW(0x64, "UD_SEND_ONLY", SND | O | RWQE | H(DETH)),
    ROW(0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", SND | O | IMM | RWQE | H(DETH)),

    /* XRC (IBA 9.8): RC's rows at 0xA0, every request with the XRCETH that
     * names the target's XRC SRQ; responses carry none. */
    SEND_WRITE_ROWS(0xA0, "XRC", ACKD | H(XRCETH)),
    READ_ATOMIC_ROWS(0xA0, "XRC", H(XRCETH), 0),
    ROW(0xB6, "XRC_SEND_LAST_WITH_INVALIDATE",
        SND | L | INV | RWQE | ACKD | H(XRCETH)),
    ROW(0xB7, "XRC_SEND_ONLY_WITH_INVALIDATE",
        SND | O | INV | RWQE | ACKD | H(XRCETH)),

    ROW(0x81, "CNP", UROCE_OPM_CNP | H(CNPPAD)),

    /* uroce multipath RC (docs/transport.md): every SEND and WRITE packet
     * says where it goes (MPETH: receive sequence number and byte offset;
     * every WRITE packet also the message's RETH), so it can be placed
     * whatever arrived before it; the selective ACK carries a bitmap of what arrived beyond the
     * acknowledged PSN as its payload. */
    ROW(0xC0, "MP_SEND_FIRST", SND | F | MPR),
    ROW(0xC1, "MP_SEND_MIDDLE", SND | M | MPR),
    ROW(0xC2, "MP_SEND_LAST", SND | L | RWQE | MPR),
    ROW(0xC3, "MP_SEND_LAST_WITH_IMMEDIATE", SND | L | IMM | RWQE | MPR),
    ROW(0xC4, "MP_SEND_ONLY", SND | O | RWQE | MPR),
    ROW(0xC5, "MP_SEND_ONLY_WITH_IMMEDIATE", SND | O | IMM | RWQE | MPR),
    ROW(0xC6, "MP_RDMA_WRITE_FIRST", WR | F | H(RETH) | MPR),
    ROW(0xC7, "MP_RDMA_WRITE_MIDDLE", WR | M | H(RETH) | MPR),
    ROW(0xC8, "MP_RDMA_WRITE_LAST", WR | L | H(RETH) | MPR),
    ROW(0xC9, "MP_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        WR | L | H(RETH) | IMM | RWQE | MPR),
    ROW(0xCA, "MP_RDMA_WRITE_ONLY", WR | O | H(RETH) | MPR),
    ROW(0xCB, "MP_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        WR | O | H(RETH) | IMM | RWQE | MPR),
    ROW(0xD1, "MP_SELECTIVE_ACKNOWLEDGE",
        UROCE_OPM_ACK | UROCE_OPM_MP | RS | O | P | H(AETH) | H(SACKETH)),
    ROW(0xD6, "MP_SEND_LAST_WITH_INVALIDATE", SND | L | INV | RWQE | MPR),
    ROW(0xD7, "MP_SEND_ONLY_WITH_INVALIDATE", SND | O | INV | RWQE | MPR),
};

const char *uroce_hdr_name(enum uroce_hdr h) {
  static const char *const names[UROCE_HDR_COUNT] = {
      "BTH",       "RDETH", "DETH",         "XRCETH", "RETH",
      "AtomicETH", "AETH",  "AtomicAckETH", "MPETH",  "SACKETH",
      "ImmDt",     "IETH",  "CNP-reserved"};
  return (unsigned)h < UROCE_HDR_COUNT ? names[h] : "?";
}
