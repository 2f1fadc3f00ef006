/* uroce dump: a RoCEv2 packet inspector that, unlike Wireshark, checks the
 * ICRC. Reads pcap and pcapng through libpcap. */
#include <getopt.h>
#include <pcap/pcap.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"
#include "wire/frame.h"
#include "wire/inspect.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: uroce dump [--json] [--quiet] FILE\n"
          "\n"
          "Prints every RoCEv2 packet (UDP port 4791) of a pcap or pcapng\n"
          "capture: addresses, opcode, BTH fields, each extension header\n"
          "decoded, payload length and the ICRC with its verdict (ok/BAD),\n"
          "then a summary. Other packets are skipped and counted.\n"
          "Link types: Ethernet, raw IPv4/IPv6, Linux cooked (SLL, SLL2).\n"
          "\n"
          "  --json    one JSON object per packet, and a summary object\n"
          "  --quiet   print only the summary\n"
          "\n"
          "Exit status: 0 if read, 1 on a read error, 2 on bad usage.\n");
}

int cmd_dump(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, 0, 'j'},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  bool json = false, quiet = false;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "jqh", opts, 0)) != -1) {
    switch (c) {
    case 'j':
      json = true;
      break;
    case 'q':
      quiet = true;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (optind + 1 != argc) {
    usage(stderr);
    return 2;
  }
  const char *path = argv[optind];
  char err[PCAP_ERRBUF_SIZE];
  pcap_t *pc = pcap_open_offline_with_tstamp_precision(
      path, PCAP_TSTAMP_PRECISION_NANO, err);
  if (!pc) {
    fprintf(stderr, "uroce dump: %s\n", err);
    return 1;
  }
  int link = pcap_datalink(pc);
  switch (link) {
  case UROCE_LINK_ETHERNET:
  case UROCE_LINK_RAW:
  case UROCE_LINK_IPV4:
  case UROCE_LINK_IPV6:
  case UROCE_LINK_LINUX_SLL:
  case UROCE_LINK_LINUX_SLL2:
    break;
  default:
    fprintf(stderr, "uroce dump: %s: unsupported link type %s (%d)\n", path,
            pcap_datalink_val_to_name(link) ? pcap_datalink_val_to_name(link)
                                            : "?",
            link);
    pcap_close(pc);
    return 1;
  }

  static struct uroce_inspect_stats st;
  static char line[16384];
  struct pcap_pkthdr *h;
  const u_char *data;
  uint64_t n = 0;
  int rv;
  while ((rv = pcap_next_ex(pc, &h, &data)) == 1) {
    uint64_t ts =
        (uint64_t)h->ts.tv_sec * 1000000000u + (uint64_t)h->ts.tv_usec;
    size_t len = uroce_inspect_frame(link, data, h->caplen, ts, ++n, json, &st,
                                     line, sizeof(line));
    if (len && !quiet)
      fwrite(line, 1, len, stdout);
  }
  int status = 0;
  if (rv == PCAP_ERROR) {
    fprintf(stderr, "uroce dump: %s: %s (after %llu frames)\n", path,
            pcap_geterr(pc), (unsigned long long)n);
    status = 1;
  }
  size_t len = uroce_inspect_summary(&st, json, line, sizeof(line));
  fwrite(line, 1, len, stdout);
  pcap_close(pc);
  if (fflush(stdout) != 0)
    status = 1;
  return status;
}
