/* The per-packet core of `uroce dump`: turns one captured frame into a line
 * of text or JSON and counts it. Kept in the library (not the tool) so the
 * fuzzer drives exactly what the tool runs. */
#ifndef UROCE_WIRE_INSPECT_H
#define UROCE_WIRE_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct uroce_inspect_stats {
  uint64_t frames;    /* every frame seen */
  uint64_t roce;      /* UDP to port 4791, well-formed or not */
  uint64_t non_roce;  /* skipped: other protocols, ports, fragments, ... */
  uint64_t malformed; /* RoCE packets that failed to parse */
  uint64_t bad_icrc;  /* RoCE packets whose ICRC did not match */
  uint64_t by_opcode[256];
};

/* Inspects one frame. If it is a RoCEv2 packet, writes one line (text, or
 * one JSON object if json) ending in '\n' into out (at most outlen bytes
 * including the NUL) and returns its length; returns 0 for a frame that is
 * skipped (counted as non-RoCE). Never reads outside frame[0..len). */
size_t uroce_inspect_frame(int link, const uint8_t *frame, size_t len,
                           uint64_t ts_ns, uint64_t frameno, bool json,
                           struct uroce_inspect_stats *st, char *out,
                           size_t outlen);

/* Writes the closing summary (text or a JSON object line). */
size_t uroce_inspect_summary(const struct uroce_inspect_stats *st, bool json,
                             char *out, size_t outlen);

#endif
