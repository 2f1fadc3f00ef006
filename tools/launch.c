/* uroce launch: start N local ranks of a program, torchrun style, on one
 * node of a job of one or more nodes.
 *
 * Every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * GROUP_RANK, MASTER_ADDR, MASTER_PORT (torch.distributed's store), the
 * collectives' own rendezvous UROCE_MASTER_ADDR/UROCE_MASTER_PORT (another
 * port, so the two never collide) and its endpoint address UROCE_ADDR
 * (base + local rank) and UDP port UROCE_PORT, or one address for every
 * rank of the node with a port each (--addr). Signals are forwarded; when a
 * rank fails the others get a grace period to notice and exit by themselves,
 * then SIGTERM, then SIGKILL. The exit status is 0 only if every rank exited 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "tool.h"
#include "util/clock.h"

static volatile sig_atomic_t got_signal;

static void on_signal(int sig) {
  got_signal = sig;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: uroce launch -n N [OPTIONS] -- PROGRAM [ARGS...]\n"
          "Starts N local ranks of PROGRAM, each with RANK, WORLD_SIZE,\n"
          "LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
          "MASTER_PORT (the variables torchrun sets), UROCE_MASTER_ADDR and\n"
          "UROCE_MASTER_PORT (the collectives' rendezvous, on a port of its\n"
          "own), its endpoint address UROCE_ADDR and UDP port UROCE_PORT\n"
          "set.\n\n"
          "  -n, --nproc, --nproc-per-node N\n"
          "                       ranks to start on this node (1..4096)\n"
          "  --nnodes M           nodes in the job (default 1); every node\n"
          "                       runs uroce launch with the same -n\n"
          "  --node-rank K        this node (0..M-1; default 0): its ranks\n"
          "                       are K*N .. K*N+N-1\n"
          "  --base-addr ADDR     local rank r gets ADDR + r (IPv4; default\n"
          "                       127.0.1.1); ranks of one node talk through\n"
          "                       shared memory, so only ranks with peers on\n"
          "                       other nodes use it\n"
          "  --addr ADDR          every local rank uses ADDR (IPv4 or IPv6,\n"
          "                       e.g. the node's own), local rank r on UDP\n"
          "                       port --rdma-port + r\n"
          "  --rdma-port P        the ranks' UDP port (default 4791; with\n"
          "                       --addr the first of N)\n"
          "  --master-addr ADDR   node 0's address (required with --nnodes\n"
          "                       > 1; default: local rank 0's)\n"
          "  --master-port P      torch.distributed's store port (default:\n"
          "                       a free one; 29500 with --nnodes > 1)\n"
          "  --uroce-port P       the collectives' rendezvous port (default:\n"
          "                       a free one; master port + 1 with --nnodes\n"
          "                       > 1)\n"
          "  --grace SEC          after a rank fails, how long the others may\n"
          "                       take to fail by themselves before they are\n"
          "                       terminated (default 10)\n"
          "  -q, --quiet          do not report failed ranks\n\n"
          "Exits 0 if every rank exited 0; otherwise with the first failed\n"
          "rank's status (128 + signal if it was killed).\n");
}

/* A TCP port that is free on addr now (the kernel's choice), other than
 * not (0: any). */
static int free_port(const char *addr, int not ) {
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
    return -1;
  int port = -1;
  for (int tries = 0; tries < 16 && (port < 0 || port == not ); tries++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
      return -1;
    socklen_t len = sizeof a;
    a.sin_port = 0;
    port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
      port = ntohs(a.sin_port);
    close(fd);
    if (port < 0)
      return -1;
  }
  return port == not ? -1 : port;
}

/* "rank 1 (pid 42) killed by SIGKILL (Killed)": strsignal alone gives
 * "killed by Killed". */
static void report_signal(int rank, pid_t pid, int sig) {
  const char *abbrev = sigabbrev_np(sig);
  if (abbrev)
    fprintf(stderr, "uroce launch: rank %d (pid %d) killed by SIG%s (%s)\n",
            rank, (int)pid, abbrev, strsignal(sig));
  else
    fprintf(stderr, "uroce launch: rank %d (pid %d) killed by signal %d\n",
            rank, (int)pid, sig);
}

static void signal_all(const pid_t *pids, const int *alive, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (alive[i])
      kill(pids[i], sig);
}

int cmd_launch(int argc, char **argv) {
  static const struct option longs[] = {
      {"nproc", required_argument, 0, 'n'},
      {"nproc-per-node", required_argument, 0, 'n'},
      {"nnodes", required_argument, 0, 'N'},
      {"node-rank", required_argument, 0, 'K'},
      {"uroce-port", required_argument, 0, 'U'},
      {"base-addr", required_argument, 0, 'B'},
      {"addr", required_argument, 0, 'A'},
      {"rdma-port", required_argument, 0, 'R'},
      {"master-addr", required_argument, 0, 'M'},
      {"master-port", required_argument, 0, 'P'},
      {"grace", required_argument, 0, 'g'},
      {"quiet", no_argument, 0, 'q'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int n = 0, quiet = 0, port = 0, uport = 0, nnodes = 1, node = 0;
  int rport = 4791, base_given = 0;
  double grace = 10;
  const char *base = "127.0.1.1", *master = NULL, *shared = NULL;
  int c;
  while ((c = getopt_long(argc, argv, "+n:qh", longs, NULL)) != -1) {
    switch (c) {
    case 'n':
      if (arg_int("launch", "-n", optarg, 1, 4096, &n) < 0)
        return 2;
      break;
    case 'B':
      base = optarg;
      base_given = 1;
      break;
    case 'A':
      shared = optarg;
      break;
    case 'R': {
      uint16_t p;
      if (arg_port("launch", "--rdma-port", optarg, &p) < 0)
        return 2;
      rport = p;
      break;
    }
    case 'M':
      master = optarg;
      break;
    case 'P': {
      uint16_t p;
      if (arg_port("launch", "--master-port", optarg, &p) < 0)
        return 2;
      port = p;
      break;
    }
    case 'N':
      if (arg_int("launch", "--nnodes", optarg, 1, 4096, &nnodes) < 0)
        return 2;
      break;
    case 'K':
      if (arg_int("launch", "--node-rank", optarg, 0, 4095, &node) < 0)
        return 2;
      break;
    case 'U': {
      uint16_t p;
      if (arg_port("launch", "--uroce-port", optarg, &p) < 0)
        return 2;
      uport = p;
      break;
    }
    case 'g':
      if (arg_double("launch", "--grace", optarg, 0, 86400, &grace) < 0)
        return 2;
      break;
    case 'q':
      quiet = 1;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      arg_see_help("launch");
      return 2;
    }
  }
  if (n == 0) {
    fprintf(stderr, "uroce launch: how many ranks? (-n N, 1 .. 4096)\n");
    return 2;
  }
  if (optind >= argc) {
    fprintf(stderr, "uroce launch: no program to start "
                    "(uroce launch -n N -- PROGRAM [ARGS...])\n");
    return 2;
  }
  if (node >= nnodes) {
    fprintf(stderr, "uroce launch: --node-rank %d: the job has %d node(s)\n",
            node, nnodes);
    return 2;
  }
  if ((uint64_t)n * (uint64_t)nnodes > 0xffff) {
    fprintf(stderr, "uroce launch: %d nodes x %d ranks: more than 65535\n",
            nnodes, n);
    return 2;
  }
  if (nnodes > 1 && !master) {
    fprintf(stderr,
            "uroce launch: --nnodes %d needs --master-addr (node "
            "0's address)\n",
            nnodes);
    return 2;
  }
  if (shared && base_given) {
    fprintf(stderr, "uroce launch: --addr and --base-addr exclude each "
                    "other (one address for all ranks, or one each)\n");
    return 2;
  }
  if (shared) {
    unsigned char a6[16];
    if (inet_pton(AF_INET, shared, a6) != 1 &&
        inet_pton(AF_INET6, shared, a6) != 1) {
      fprintf(stderr, "uroce launch: --addr %s is not an IP address\n", shared);
      return 2;
    }
    if (rport + n - 1 > 65535) {
      fprintf(stderr,
              "uroce launch: --rdma-port %d: %d ranks would need ports "
              "past 65535\n",
              rport, n);
      return 2;
    }
  }
  char **prog = argv + optind;
  struct in_addr b;
  if (inet_pton(AF_INET, base, &b) != 1) {
    fprintf(stderr, "uroce launch: --base-addr %s is not an IPv4 address\n",
            base);
    return 2;
  }
  uint32_t base_h = ntohl(b.s_addr);
  if ((uint64_t)base_h + (uint64_t)(n - 1) > 0xFFFFFFFFu) {
    fprintf(stderr,
            "uroce launch: --base-addr %s: %d ranks would need addresses "
            "past 255.255.255.255\n",
            base, n);
    return 2;
  }
  char master_buf[INET_ADDRSTRLEN];
  if (!master && shared) {
    master = shared;
  } else if (!master) {
    inet_ntop(AF_INET, &b, master_buf, sizeof master_buf);
    master = master_buf;
  }
  if (nnodes > 1) {
    /* every node must agree without talking: fixed defaults */
    if (!port)
      port = 29500;
    if (!uport)
      uport = port + 1 <= 65535 ? port + 1 : port - 1;
  } else {
    if (!port && (port = free_port(master, 0)) <= 0) {
      fprintf(stderr, "uroce launch: no free TCP port on %s\n", master);
      return 1;
    }
    if (!uport && (uport = free_port(master, port)) <= 0) {
      fprintf(stderr, "uroce launch: no free TCP port on %s\n", master);
      return 1;
    }
  }
  if (uport == port) {
    fprintf(stderr,
            "uroce launch: --uroce-port %d is torch.distributed's "
            "MASTER_PORT too\n",
            uport);
    return 2;
  }

  pid_t *pids = calloc((size_t)n, sizeof *pids);
  int *alive = calloc((size_t)n, sizeof *alive);
  if (!pids || !alive) {
    fprintf(stderr, "uroce launch: out of memory\n");
    return 1;
  }
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sigaction(SIGQUIT, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGUSR2, &sa, NULL);

  int status = 0, nalive = 0;
  for (int r = 0; r < n; r++) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "uroce launch: fork: %s\n", strerror(errno));
      status = 1;
      break;
    }
    if (pid == 0) {
      char v[64];
      struct in_addr a = {htonl(base_h + (uint32_t)r)};
      char addr[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &a, addr, sizeof addr);
      snprintf(v, sizeof v, "%d", node * n + r);
      setenv("RANK", v, 1);
      snprintf(v, sizeof v, "%d", r);
      setenv("LOCAL_RANK", v, 1);
      snprintf(v, sizeof v, "%d", node);
      setenv("GROUP_RANK", v, 1);
      snprintf(v, sizeof v, "%d", n * nnodes);
      setenv("WORLD_SIZE", v, 1);
      snprintf(v, sizeof v, "%d", n);
      setenv("LOCAL_WORLD_SIZE", v, 1);
      setenv("MASTER_ADDR", master, 1);
      snprintf(v, sizeof v, "%d", port);
      setenv("MASTER_PORT", v, 1);
      setenv("UROCE_ADDR", shared ? shared : addr, 1);
      snprintf(v, sizeof v, "%d", rport + (shared ? r : 0));
      setenv("UROCE_PORT", v, 1);
      /* a launcher's own variables must not outrank ours */
      unsetenv("UROCE_RANK");
      unsetenv("UROCE_SIZE");
      setenv("UROCE_MASTER_ADDR", master, 1);
      snprintf(v, sizeof v, "%d", uport);
      setenv("UROCE_MASTER_PORT", v, 1);
      execvp(prog[0], prog);
      fprintf(stderr, "uroce launch: %s: %s\n", prog[0], strerror(errno));
      _exit(127);
    }
    pids[r] = pid;
    alive[r] = 1;
    nalive++;
  }
  if (status) /* could not start them all: stop those that did start */
    signal_all(pids, alive, n, SIGTERM);

  double fail_at = status ? mono_s() : 0, term_at = 0;
  int first_bad = -1;
  while (nalive > 0) {
    if (got_signal) {
      int sig = got_signal;
      got_signal = 0;
      signal_all(pids, alive, n, sig);
      if (!status)
        status = 128 + sig;
      if (!fail_at)
        fail_at = mono_s();
    }
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno != EINTR)
      break;
    if (pid > 0) {
      int r = 0;
      while (r < n && pids[r] != pid)
        r++;
      if (r == n)
        continue;
      alive[r] = 0;
      nalive--;
      int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (code != 0) {
        if (!quiet) {
          if (WIFSIGNALED(st))
            report_signal(r, pid, WTERMSIG(st));
          else
            fprintf(stderr, "uroce launch: rank %d (pid %d) exited with %d\n",
                    r, (int)pid, code);
        }
        if (first_bad < 0) {
          first_bad = r;
          if (!status)
            status = code;
        }
        if (!fail_at)
          fail_at = mono_s();
      }
      continue;
    }
    double now = mono_s();
    if (fail_at && !term_at && now - fail_at >= grace) {
      if (!quiet)
        fprintf(stderr,
                "uroce launch: %d rank(s) still running %.0f s after a "
                "failure: terminating them\n",
                nalive, grace);
      signal_all(pids, alive, n, SIGTERM);
      term_at = now;
    } else if (term_at && now - term_at >= 2) {
      signal_all(pids, alive, n, SIGKILL);
      term_at = now + 1e9;
    }
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  free(pids);
  free(alive);
  return status;
}
