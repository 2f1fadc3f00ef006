/* The core of `uroce dump`: turns captured frames into lines of text or
 * JSON (one per RoCEv2 packet, GSO super-frames split), counts them, keeps
 * per-QP conversations and applies display filters. Kept in the library
 * (not the tool) so the fuzzer and the unit tests drive exactly what the
 * tool runs. */
#ifndef UROCE_WIRE_INSPECT_H
#define UROCE_WIRE_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct uroce_inspect_stats {
  uint64_t frames;        /* every frame seen */
  uint64_t truncated;     /* frames the capture cut short (snapshot length) */
  uint64_t roce;          /* RoCEv2 packets, well-formed or not */
  uint64_t non_roce;      /* skipped frames: other protocols, ports, ... */
  uint64_t malformed;     /* RoCE packets that failed to parse */
  uint64_t bad_icrc;      /* RoCE packets whose ICRC did not match */
  uint64_t gso_frames;    /* frames that held several packets (GSO/GRO) */
  uint64_t gso_pkts;      /* the packets cut out of them */
  uint64_t shown;         /* packets that passed the display filter */
  uint64_t convs_dropped; /* packets of conversations past the table cap */
  uint64_t by_opcode[256];
};

/* ---- display filters ----
 * A filter is terms separated by commas, each KEY=VALUE:
 *   qp=N | qp=N-M      destination QP (decimal or 0x hex)
 *   psn=N | psn=N-M    PSN range, inclusive
 *   op=NAME | op=N | op=PREFIX*   opcode, by name (any case) or number
 *   src=ADDR dst=ADDR host=ADDR   IPv4/IPv6 addresses (host: either end)
 *   vlan=N             outer VLAN id
 *   icrc=ok | icrc=bad
 * Terms with the same key are alternatives; terms with different keys
 * must all match: "op=RC_ACKNOWLEDGE,op=RC_SEND*,qp=0x11". */
struct uroce_filter;

/* Parses s into *out (free with uroce_filter_del). On a bad filter returns
 * UROCE_ERR_INVALID_ARGUMENT and writes into err a message naming the
 * term; -ENOMEM if out of memory. */
int uroce_filter_parse(const char *s, struct uroce_filter **out, char *err,
                       size_t errlen);
void uroce_filter_del(struct uroce_filter *flt);

/* ---- the inspector ---- */
struct uroce_inspect_opts {
  bool json;
  bool conv;         /* keep per-QP conversations for the summary */
  uint16_t udp_port; /* RoCEv2 UDP destination port; 0 means 4791 */
  const struct uroce_filter *filter; /* NULL: show every packet */
};

/* Where output lines go: each call is one whole line ending in '\n'. */
typedef void uroce_inspect_emit(void *arg, const char *line, size_t len);

struct uroce_inspect;

/* Returns a new inspector, or NULL if out of memory. opts (and its filter)
 * must outlive it. */
struct uroce_inspect *uroce_inspect_new(const struct uroce_inspect_opts *o);
void uroce_inspect_del(struct uroce_inspect *in);

/* Inspects one frame of caplen captured bytes (wirelen on the wire): emits
 * one line per RoCEv2 packet in it that passes the filter and counts
 * everything. Never reads outside frame[0..caplen); costs time linear in
 * caplen and no allocation but a new conversation's. */
void uroce_inspect_frame(struct uroce_inspect *in, int link,
                         const uint8_t *frame, size_t caplen, size_t wirelen,
                         uint64_t ts_ns, uint64_t frameno,
                         uroce_inspect_emit *emit, void *arg);

/* Emits the conversations (if opts.conv) and the closing summary. */
void uroce_inspect_summary(const struct uroce_inspect *in,
                           uroce_inspect_emit *emit, void *arg);

const struct uroce_inspect_stats *
uroce_inspect_stats(const struct uroce_inspect *in);

/* One conversation: the packets from one address to one destination QP at
 * another address. */
struct uroce_conv {
  int ipver;
  uint8_t src[16], dst[16];
  uint32_t dqpn;
  uint64_t packets, bytes; /* bytes: BTH .. ICRC */
  uint64_t first_ts, last_ts;
  uint32_t psn_lo, psn_hi; /* lowest and highest PSN seen (serial order) */
  uint64_t gaps, gap_psns; /* forward jumps, and the PSNs they skipped */
  uint64_t retrans;        /* packets behind the PSN expected next */
  uint64_t acks, naks, rnr_naks, cnps, bad_icrc;
  /* PSN tracking: the next request PSN expected (if req_known), and the
   * last read response PSN (if resp_known). */
  uint32_t req_next, resp_last;
  bool req_known, resp_known;
};

/* The conversations in order of first appearance; *n gets their count. */
const struct uroce_conv *uroce_inspect_convs(const struct uroce_inspect *in,
                                             size_t *n);

#endif
