/* uroce dump: a RoCEv2 packet inspector that, unlike Wireshark, checks the
 * ICRC. Reads pcap and pcapng through libpcap, or captures live. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <pcap/pcap.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"
#include "uroce/uroce.h"
#include "util/clock.h"
#include "wire/frame.h"
#include "wire/inspect.h"

/* Exit statuses, as the usage text documents them. */
enum { EXIT_READ = 1, EXIT_USAGE = 2, EXIT_STRICT = 3 };

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: uroce dump [OPTIONS] FILE\n"
      "       uroce dump [OPTIONS] -i IFACE [-c COUNT] [--duration SECONDS]\n"
      "\n"
      "Prints every RoCEv2 packet of a pcap or pcapng capture, or of a live\n"
      "capture: addresses, VLAN/PCP, DSCP/ECN, opcode, BTH fields, each\n"
      "extension header decoded, payload length and the ICRC with its\n"
      "verdict (ok/BAD), then a summary. UDP GSO super-frames and GRO-\n"
      "coalesced frames (what tcpdump shows on lo, a veth or -i any) are\n"
      "split into the packets that went on the wire, each checked against\n"
      "the headers it had; such packets are marked [GSO i/n]. Other frames\n"
      "are skipped and counted. Link types: Ethernet (up to two VLAN tags),\n"
      "raw IPv4/IPv6, Linux cooked (SLL, SLL2).\n"
      "\n"
      "  --json             one JSON object per packet, and a summary object\n"
      "  -q, --quiet        print only the summary (and conversations)\n"
      "  --udp-port N       RoCEv2 UDP destination port (default 4791)\n"
      "  -f, --filter EXPR  show only matching packets; EXPR is terms\n"
      "                     KEY=VALUE separated by commas: qp=N[-M],\n"
      "                     psn=N[-M], op=NAME|N|PREFIX*, src=ADDR, dst=ADDR,\n"
      "                     host=ADDR, vlan=N, icrc=ok|bad. Terms with the\n"
      "                     same key are alternatives, all keys must match:\n"
      "                     'qp=0x11,psn=100-200,op=RC_SEND*'\n"
      "  --conv             per-QP conversations (source > destination QP):\n"
      "                     packets, bytes, PSN gaps, retransmissions,\n"
      "                     ACK/NAK/RNR NAK/CNP counts\n"
      "  --strict           exit 3 if any packet is malformed or has a bad\n"
      "                     ICRC (to gate CI on a capture)\n"
      "  -i, --interface IF capture live from IF (needs CAP_NET_RAW); stop\n"
      "                     after -c frames, --duration, or Ctrl-C, then\n"
      "                     print the summary\n"
      "  -c, --count N      stop after N frames\n"
      "  --duration S       stop a live capture after S seconds\n"
      "\n"
      "Exit status: 0 if read (with --strict: and every packet sound), 1 on\n"
      "a read or capture error, 2 on bad usage, 3 with --strict when a\n"
      "packet was malformed or had a bad ICRC.\n");
}

static volatile sig_atomic_t stop;
static pcap_t *live;

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
  if (live)
    pcap_breakloop(live);
}

static void emit_stdout(void *arg, const char *line, size_t len) {
  (void)arg;
  fwrite(line, 1, len, stdout);
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *v) {
  char *end;
  errno = 0;
  if (!*s || *s == '-' || *s == '+' || *s == ' ')
    return false;
  unsigned long long x = strtoull(s, &end, 0);
  if (errno || *end || x > max)
    return false;
  *v = x;
  return true;
}

/* Opens IFACE for a live capture of UDP to the RoCEv2 port, tagged or
 * not, with nanosecond timestamps. */
static pcap_t *open_live(const char *iface, uint16_t port) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t *pc = pcap_create(iface, err);
  if (!pc) {
    fprintf(stderr, "uroce dump: %s: %s\n", iface, err);
    return NULL;
  }
  /* Whole frames (a GSO super-frame is up to 64 KiB), delivered at once. */
  pcap_set_snaplen(pc, 262144);
  pcap_set_immediate_mode(pc, 1);
  pcap_set_buffer_size(pc, 32 << 20);
  pcap_set_tstamp_precision(pc, PCAP_TSTAMP_PRECISION_NANO);
  int rv = pcap_activate(pc);
  if (rv < 0) {
    fprintf(stderr, "uroce dump: %s: %s\n", iface,
            rv == PCAP_ERROR ? pcap_geterr(pc) : pcap_statustostr(rv));
    pcap_close(pc);
    return NULL;
  }
  if (rv > 0)
    fprintf(stderr, "uroce dump: %s: warning: %s\n", iface,
            rv == PCAP_WARNING ? pcap_geterr(pc) : pcap_statustostr(rv));
  char expr[128];
  struct bpf_program prog;
  snprintf(expr, sizeof(expr), "udp dst port %u or (vlan and udp dst port %u)",
           port, port);
  if (pcap_compile(pc, &prog, expr, 1, PCAP_NETMASK_UNKNOWN) != 0 ||
      pcap_setfilter(pc, &prog) != 0) {
    fprintf(stderr, "uroce dump: %s: capture filter '%s': %s\n", iface, expr,
            pcap_geterr(pc));
    pcap_close(pc);
    return NULL;
  }
  pcap_freecode(&prog);
  /* Non-blocking, waited on with poll(): a blocking read in immediate
   * mode would sleep through --duration and Ctrl-C on an idle link. */
  if (pcap_setnonblock(pc, 1, err) != 0 || pcap_get_selectable_fd(pc) < 0) {
    fprintf(stderr, "uroce dump: %s: %s\n", iface, err);
    pcap_close(pc);
    return NULL;
  }
  return pc;
}

static bool link_supported(int link) {
  switch (link) {
  case UROCE_LINK_ETHERNET:
  case UROCE_LINK_RAW:
  case UROCE_LINK_IPV4:
  case UROCE_LINK_IPV6:
  case UROCE_LINK_LINUX_SLL:
  case UROCE_LINK_LINUX_SLL2:
    return true;
  default:
    return false;
  }
}

struct dump_args {
  struct uroce_inspect_opts o;
  bool quiet, strict;
  const char *iface, *path;
  uint64_t count;       /* 0: no limit */
  uint64_t duration_ns; /* 0: no limit */
};

/* Parses argv into *a; returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, struct dump_args *a,
                      struct uroce_filter **flt) {
  enum { O_JSON = 256, O_PORT, O_CONV, O_STRICT, O_DUR };
  static const struct option opts[] = {
      {"json", no_argument, 0, O_JSON},
      {"quiet", no_argument, 0, 'q'},
      {"udp-port", required_argument, 0, O_PORT},
      {"filter", required_argument, 0, 'f'},
      {"conv", no_argument, 0, O_CONV},
      {"strict", no_argument, 0, O_STRICT},
      {"interface", required_argument, 0, 'i'},
      {"count", required_argument, 0, 'c'},
      {"duration", required_argument, 0, O_DUR},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int c;
  uint64_t v;
  char err[256];
  optind = 1;
  while ((c = getopt_long(argc, argv, "jqf:i:c:h", opts, 0)) != -1) {
    switch (c) {
    case 'j': /* -j, kept from the first release */
    case O_JSON:
      a->o.json = true;
      break;
    case 'q':
      a->quiet = true;
      break;
    case O_PORT:
      if (!parse_u64(optarg, 65535, &v) || v == 0) {
        fprintf(stderr, "uroce dump: --udp-port '%s': want 1..65535\n", optarg);
        return EXIT_USAGE;
      }
      a->o.udp_port = (uint16_t)v;
      break;
    case 'f':
      if (*flt) {
        fprintf(stderr, "uroce dump: --filter given twice; join the terms "
                        "with commas\n");
        return EXIT_USAGE;
      }
      if (uroce_filter_parse(optarg, flt, err, sizeof(err)) != 0) {
        fprintf(stderr, "uroce dump: %s\n", err);
        return EXIT_USAGE;
      }
      a->o.filter = *flt;
      break;
    case O_CONV:
      a->o.conv = true;
      break;
    case O_STRICT:
      a->strict = true;
      break;
    case 'i':
      a->iface = optarg;
      break;
    case 'c':
      if (!parse_u64(optarg, UINT64_MAX, &a->count) || a->count == 0) {
        fprintf(stderr, "uroce dump: -c '%s': want a count of at least 1\n",
                optarg);
        return EXIT_USAGE;
      }
      break;
    case O_DUR: {
      char *end;
      double d = strtod(optarg, &end);
      if (*end || !isfinite(d) || d <= 0 || d > 1e6) {
        fprintf(stderr,
                "uroce dump: --duration '%s': want seconds, more than 0 "
                "and at most 1e6\n",
                optarg);
        return EXIT_USAGE;
      }
      a->duration_ns = (uint64_t)(d * 1e9);
      break;
    }
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return EXIT_USAGE;
    }
  }
  if (a->iface ? optind != argc : optind + 1 != argc) {
    if (a->iface)
      fprintf(stderr, "uroce dump: give -i IFACE or a FILE, not both\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  if (a->duration_ns && !a->iface) {
    fprintf(stderr, "uroce dump: --duration is for live captures (-i)\n");
    return EXIT_USAGE;
  }
  a->path = a->iface ? NULL : argv[optind];
  return -1;
}

/* Reads frames until the end, -c, --duration or a signal. Returns 0, or
 * EXIT_READ after saying what failed. */
static int read_frames(pcap_t *pc, const struct dump_args *a,
                       struct uroce_inspect *in) {
  const char *name = a->iface ? a->iface : a->path;
  int link = pcap_datalink(pc);
  if (!link_supported(link)) {
    const char *ln = pcap_datalink_val_to_name(link);
    fprintf(stderr, "uroce dump: %s: unsupported link type %s (%d)\n", name,
            ln ? ln : "?", link);
    return EXIT_READ;
  }
  uint64_t n = 0, t0 = mono_ns();
  struct pcap_pkthdr *h;
  const u_char *data;
  int rv = 0;
  while (!stop && (!a->count || n < a->count)) {
    if (a->duration_ns && mono_ns() - t0 >= a->duration_ns)
      break;
    rv = pcap_next_ex(pc, &h, &data);
    if (rv == 0) { /* live, nothing yet: wait at most 100 ms */
      struct pollfd pfd = {pcap_get_selectable_fd(pc), POLLIN, 0};
      poll(&pfd, 1, 100);
      continue;
    }
    if (rv != 1)
      break;
    /* Opened with nanosecond precision: tv_usec holds nanoseconds. */
    uint64_t ts =
        (uint64_t)h->ts.tv_sec * 1000000000u + (uint64_t)h->ts.tv_usec;
    uroce_inspect_frame(in, link, data, h->caplen, h->len, ts, ++n,
                        a->quiet ? NULL : emit_stdout, NULL);
    if (a->iface)
      fflush(stdout);
  }
  if (rv == PCAP_ERROR) {
    fprintf(stderr, "uroce dump: %s: %s (after %llu frames)\n", name,
            pcap_geterr(pc), (unsigned long long)n);
    return EXIT_READ;
  }
  return 0;
}

int cmd_dump(int argc, char **argv) {
  struct dump_args a = {0};
  struct uroce_filter *flt = NULL;
  int status = parse_args(argc, argv, &a, &flt);
  if (status >= 0) {
    uroce_filter_del(flt);
    return status;
  }
  status = 0;
  pcap_t *pc;
  if (a.iface) {
    pc = live = open_live(a.iface, a.o.udp_port ? a.o.udp_port : 4791);
  } else {
    char err[PCAP_ERRBUF_SIZE];
    pc = pcap_open_offline_with_tstamp_precision(
        a.path, PCAP_TSTAMP_PRECISION_NANO, err);
    if (!pc)
      fprintf(stderr, "uroce dump: %s\n", err);
  }
  struct uroce_inspect *in = pc ? uroce_inspect_new(&a.o) : NULL;
  if (!in) {
    if (pc)
      fprintf(stderr, "uroce dump: out of memory\n");
    if (pc)
      pcap_close(pc);
    uroce_filter_del(flt);
    return EXIT_READ;
  }
  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  if (a.iface) {
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
  }
  status = read_frames(pc, &a, in);
  if (a.iface) {
    struct pcap_stat ps;
    if (pcap_stats(pc, &ps) == 0 && ps.ps_drop)
      fprintf(stderr, "uroce dump: %s: the kernel dropped %u frames\n", a.iface,
              ps.ps_drop);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    live = NULL;
  }
  uroce_inspect_summary(in, emit_stdout, NULL);
  const struct uroce_inspect_stats *st = uroce_inspect_stats(in);
  if (!status && a.strict && (st->bad_icrc || st->malformed)) {
    fprintf(
        stderr, "uroce dump: --strict: %llu malformed, %llu bad ICRC packets\n",
        (unsigned long long)st->malformed, (unsigned long long)st->bad_icrc);
    status = EXIT_STRICT;
  }
  uroce_inspect_del(in);
  uroce_filter_del(flt);
  pcap_close(pc);
  if (fflush(stdout) != 0)
    status = EXIT_READ;
  return status;
}
