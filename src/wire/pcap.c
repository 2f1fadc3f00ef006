#include "wire/pcap.h"

#include <errno.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>

#include "uroce/errors.h"

struct uroce_pcap {
  pcap_t *dead;
  pcap_dumper_t *dumper;
};

int uroce_pcap_open(struct uroce_pcap **out, const char *path, int link,
                    char *err, size_t errlen) {
  struct uroce_pcap *pc = calloc(1, sizeof(*pc));
  if (!pc)
    return -ENOMEM;
  pc->dead = pcap_open_dead_with_tstamp_precision(link, 262144,
                                                  PCAP_TSTAMP_PRECISION_NANO);
  if (!pc->dead) {
    free(pc);
    snprintf(err, errlen, "pcap: unsupported link type %d", link);
    return UROCE_ERR_INVALID_ARGUMENT;
  }
  pc->dumper = pcap_dump_open(pc->dead, path);
  if (!pc->dumper) {
    int e = errno ? errno : EIO;
    snprintf(err, errlen, "%s: %s", path, pcap_geterr(pc->dead));
    pcap_close(pc->dead);
    free(pc);
    return -e;
  }
  *out = pc;
  return 0;
}

int uroce_pcap_write(struct uroce_pcap *pc, uint64_t ts_ns,
                     const uint8_t *frame, size_t len) {
  struct pcap_pkthdr h;
  h.ts.tv_sec = (time_t)(ts_ns / 1000000000u);
  /* With nanosecond precision libpcap stores tv_usec as nanoseconds. */
  h.ts.tv_usec = (suseconds_t)(ts_ns % 1000000000u);
  h.caplen = h.len = (bpf_u_int32)len;
  pcap_dump((u_char *)pc->dumper, &h, frame);
  return 0;
}

int uroce_pcap_close(struct uroce_pcap *pc) {
  int rv = 0;
  if (!pc)
    return 0;
  if (pcap_dump_flush(pc->dumper) != 0)
    rv = -EIO;
  pcap_dump_close(pc->dumper);
  pcap_close(pc->dead);
  free(pc);
  return rv;
}
