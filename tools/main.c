/* uroce: one program, one subcommand per job. */
#include <stdio.h>
#include <string.h>

#include "tool.h"
#include "uroce/uroce.h"

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} cmds[] = {
    {"dump", cmd_dump, "decode and check a RoCEv2 capture (pcap/pcapng)"},
    {"pktgen", cmd_pktgen, "write RoCEv2 packets to a pcap (demo, tests)"},
    {"perf", cmd_perf, "RDMA bandwidth and latency tests (like perftest)"},
    {"sim", cmd_sim, "simulate a RoCEv2 fabric from a scenario (YAML)"},
    {"run", cmd_run, "run an unmodified verbs program on uroce"},
    {"launch", cmd_launch, "start N local ranks of a program (torchrun-like)"},
    {"coll-bench", cmd_coll_bench, "collective bandwidth (like nccl-tests)"},
    {"plan", cmd_plan, "size, price and time a GPU cluster network (YAML)"},
    {"trace", cmd_trace, "summarise a transport trace per QP (--trace)"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: uroce COMMAND [ARGS...]\n"
               "       uroce --version | --help\n\ncommands:\n");
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
    fprintf(out, "  %-10s %s\n", cmds[i].name, cmds[i].help);
  fprintf(out, "\n'uroce COMMAND --help' describes each command, 'man uroce'\n"
               "the whole program; 'uroce --version' prints the version.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
    printf("uroce %s\n", uroce_version());
    return 0;
  }
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
    if (!strcmp(argv[1], cmds[i].name)) {
      /* getopt_long names the program in its messages as argv[0]:
       * "uroce perf: unrecognized option '--bogus'". */
      char name[64];
      snprintf(name, sizeof name, "uroce %s", cmds[i].name);
      argv[1] = name;
      return cmds[i].fn(argc - 1, argv + 1);
    }
  fprintf(stderr, "uroce: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
