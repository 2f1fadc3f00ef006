/* Splitting a captured UDP GSO super-frame (or a GRO-coalesced one) back
 * into the RoCEv2 packets that went on the wire.
 *
 * A sender using UDP_SEGMENT hands the kernel one datagram of N segments
 * of gso_size bytes (the last may be shorter); a capture taken before the
 * kernel or the NIC cuts it (on lo, on a veth, with -i any) shows that
 * datagram whole, with the IP and UDP lengths of the whole. Each segment
 * is a complete RoCEv2 packet whose ICRC was computed over the IP and UDP
 * headers that segment carries on the wire: the same headers with the
 * lengths of the segment and, for IPv4, identification base + i (the
 * kernel numbers the segments it cuts from the super-frame's own). pcap
 * does not record gso_size, so it is found from the bytes: see
 * docs/dump.md for the search and why it is sound. */
#ifndef UROCE_WIRE_GSO_H
#define UROCE_WIRE_GSO_H

#include <stdbool.h>
#include <stdint.h>

#include "wire/frame.h"

/* The most packets a frame can hold: a 64 KiB datagram of the smallest
 * packets (BTH + ICRC, 16 bytes). */
#define UROCE_GSO_MAX_SEGS (65536 / 16)

/* One RoCEv2 packet of a frame, as it was on the wire. */
struct uroce_gso_seg {
  uint32_t off, len; /* BTH .. ICRC, from f->bth */
  uint16_t ip_id;    /* IPv4 identification its ICRC was computed with */
  bool icrc_ok;
  uint32_t icrc;          /* carried */
  uint32_t icrc_expected; /* computed over the reconstructed headers */
};

enum uroce_gso_ids {
  UROCE_GSO_IDS_INCREMENT, /* segment i has identification base + i */
  UROCE_GSO_IDS_FIXED,     /* every segment kept the base (GRO with DF) */
};

struct uroce_gso_split {
  uint32_t nsegs;    /* packets written to segs; 1 if not split */
  uint32_t seg_size; /* gso_size found; 0 if the frame is one packet */
};

/* Cuts the RoCEv2 payload of a parsed frame (f->bth, f->bth_len) into
 * the packets it holds and checks each one's ICRC.
 *
 * A frame whose ICRC matches as a whole is one packet. Otherwise the
 * segment size is searched: every length L, a multiple of 4 from the
 * first packet's headers plus ICRC up to the whole, such that a BTH of a
 * known opcode and transport version 0 starts at every multiple of L and
 * the last piece is at least BTH + ICRC long, is tried in increasing
 * order, and the first whose first packet's ICRC matches (with the
 * headers rewritten for length L) is taken. The search costs one CRC pass
 * over the frame plus a CRC combination per candidate. If none matches,
 * the frame is reported as one packet (with a bad ICRC).
 *
 * segs must hold UROCE_GSO_MAX_SEGS entries. Returns the split. */
struct uroce_gso_split uroce_gso_split(const struct uroce_frame *f,
                                       struct uroce_gso_seg *segs);

/* The ICRC of the len bytes at f->bth + off (BTH .. ICRC), as if sent
 * alone: f's IP and UDP headers with their lengths set for len and, for
 * IPv4, identification ip_id. */
uint32_t uroce_gso_seg_icrc(const struct uroce_frame *f, uint32_t off,
                            uint32_t len, uint16_t ip_id);

#endif
