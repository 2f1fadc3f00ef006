/* Capture writing through libpcap: nanosecond pcap files that Wireshark,
 * tshark and `uroce dump` read. Used by tests, the demo and --pcap options. */
#ifndef UROCE_WIRE_PCAP_H
#define UROCE_WIRE_PCAP_H

#include <stddef.h>
#include <stdint.h>

struct uroce_pcap;

/* Opens path for writing frames of the given link type (enum uroce_link).
 * Returns 0 and *out, or -errno / UROCE_ERR_INVALID_ARGUMENT; a message is
 * written into err (errlen bytes) on failure. */
int uroce_pcap_open(struct uroce_pcap **out, const char *path, int link,
                    char *err, size_t errlen);
/* Appends one frame with a timestamp in ns since the epoch. */
int uroce_pcap_write(struct uroce_pcap *pc, uint64_t ts_ns,
                     const uint8_t *frame, size_t len);
/* Flushes and closes; returns 0 or -EIO if anything failed to write. */
int uroce_pcap_close(struct uroce_pcap *pc);

#endif
