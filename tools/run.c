/* uroce run: runs an unmodified verbs program on uroce. It puts the
 * libibverbs.so.1 and librdmacm.so.1 drop-ins (and the provider stand-ins
 * perftest links) first on the library path, gives the process its own endpoint address, and
 * optionally runs it inside a network namespace. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "run_dev.h"
#include "tool.h"

#ifndef UROCE_COMPAT_BUILD_LIBDIR
#define UROCE_COMPAT_BUILD_LIBDIR ""
#endif
#ifndef UROCE_COMPAT_INSTALL_LIBDIR
#define UROCE_COMPAT_INSTALL_LIBDIR "lib/uroce"
#endif
#ifndef UROCE_INSTALL_BINDIR
#define UROCE_INSTALL_BINDIR "bin"
#endif

static void usage(FILE *out) {
  fprintf(out,
          "usage: uroce run [--addr IP] [--udp-port N] [--ns NETNS] "
          "[--pcap FILE] [--trace FILE] [--dev NAME] [--rx-drop P] [--stats] "
          "-- PROGRAM "
          "[ARGS...]\n"
          "\n"
          "Runs PROGRAM with uroce's libibverbs.so.1 and librdmacm.so.1, so\n"
          "that an unmodified verbs or rdma_cm program (ibv_rc_pingpong,\n"
          "ib_write_bw, rping, ...) runs over RoCEv2 in UDP with no RDMA\n"
          "NIC. Its device is uroce0.\n"
          "\n"
          "  --addr IP    the endpoint address (IPv4 or IPv6) of this "
          "process\n"
          "               (default 127.0.0.1); two processes on one host "
          "need two\n"
          "               (any 127.x.y.z works on loopback)\n"
          "  --udp-port N RoCEv2 UDP port (default 4791; peers must agree;\n"
          "               UROCE_PORT). --port, its old name, still works\n"
          "  --ns NETNS   run inside network namespace NETNS (ip netns "
          "exec)\n"
          "  --pcap FILE  write every RoCEv2 packet to FILE (UROCE_PCAP)\n"
          "  --trace FILE append the transport's events to FILE as JSON "
          "lines\n"
          "               (UROCE_TRACE; read it with uroce trace)\n"
          "  --dev NAME   name the device NAME instead of uroce0\n"
          "               (UROCE_DEV_NAME)\n"
          "  --rx-drop P  testing: drop this share (0 <= P < 1) of the "
          "received\n"
          "               packets (UROCE_RX_DROP)\n"
          "  --rx-drop-only KIND  testing: drop only 'requests' (SEND, "
          "WRITE, READ\n"
          "               and atomic requests) or only 'responses' (ACKs, "
          "NAKs,\n"
          "               READ data); default 'any' (UROCE_RX_DROP_ONLY)\n"
          "  --stats      print the device's counters to stderr when the "
          "program\n"
          "               closes it (UROCE_STATS=1)\n"
          "\n"
          "The programs' GID index for RoCE v2 over the address is 1\n"
          "(e.g. ibv_rc_pingpong -g 1). UROCE_LIBDIR overrides where the\n"
          "libraries are looked for; UROCE_CC=dcqcn turns on congestion\n"
          "control. 'man uroce-run' lists every variable.\n");
}

static int has_lib(const char *dir) {
  char p[PATH_MAX + 32];
  if (!dir || !*dir)
    return 0;
  snprintf(p, sizeof(p), "%.*s/libibverbs.so.1", PATH_MAX, dir);
  return access(p, R_OK) == 0;
}

/* The directory with the drop-in: next to this program in a build tree
 * (build/uroce -> build/compat/lib), in the installed libdir relative to
 * the bindir, or where this build put it. */
static int find_libdir(char *out, size_t n) {
  const char *env = getenv("UROCE_LIBDIR");
  if (env && *env) {
    snprintf(out, n, "%s", env);
    return has_lib(out) ? 0 : -1;
  }
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len > 0) {
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      if (snprintf(out, n, "%.*s/compat/lib", PATH_MAX, exe) >= (int)n)
        return -1;
      if (has_lib(out))
        return 0;
      /* <prefix>/bin/uroce -> <prefix>/<libdir>/uroce */
      const char *bindir = UROCE_INSTALL_BINDIR;
      size_t bl = strlen(bindir), el = strlen(exe);
      if (el >= bl && !strcmp(exe + el - bl, bindir)) {
        exe[el - bl] = 0;
        snprintf(out, n, "%s%s", exe, UROCE_COMPAT_INSTALL_LIBDIR);
        if (has_lib(out))
          return 0;
      }
    }
  }
  snprintf(out, n, "%s", UROCE_COMPAT_BUILD_LIBDIR);
  return has_lib(out) ? 0 : -1;
}

/* Sets name to "a:b", or to whichever of a and b is set and not empty.
 * Returns 0, or -1 without memory. */
static int env_join(const char *name, const char *a, const char *b) {
  a = a ? a : "";
  b = b ? b : "";
  size_t n = strlen(a) + strlen(b) + 2;
  char *v = malloc(n);
  if (!v)
    return -1;
  snprintf(v, n, "%s%s%s", a, *a && *b ? ":" : "", b);
  setenv(name, v, 1);
  free(v);
  return 0;
}
int cmd_run(int argc, char **argv) {
  const char *addr = "127.0.0.1", *ns = NULL, *port = NULL, *pcap = NULL;
  const char *dev = NULL, *rx_drop = NULL, *drop_only = NULL, *trace = NULL;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "--stats")) {
      setenv("UROCE_STATS", "1", 1);
      continue;
    }
    if (!strcmp(a, "--port"))
      fprintf(stderr, "uroce run: note: --port is the RoCEv2 UDP port; it "
                      "is spelled --udp-port now, as in uroce perf, where "
                      "-p/--port is the TCP port\n");
    const char **opt = !strcmp(a, "--addr")       ? &addr
                       : !strcmp(a, "--ns")       ? &ns
                       : !strcmp(a, "--udp-port") ? &port
                       : !strcmp(a, "--port")     ? &port
                       : !strcmp(a, "--pcap")     ? &pcap
                       : !strcmp(a, "--trace")    ? &trace
                       : !strcmp(a, "--dev")      ? &dev
                       : !strcmp(a, "--rx-drop")  ? &rx_drop
                       : !strcmp(a, "--rx-drop-only") ? &drop_only
                                                      : NULL;
    if (opt) {
      if (i + 1 >= argc) {
        fprintf(stderr, "uroce run: %s needs a value\n", a);
        return 2;
      }
      *opt = argv[++i];
      continue;
    }
    if (a[0] == '-') {
      fprintf(stderr, "uroce run: unknown option '%s'\n", a);
      arg_see_help("run");
      return 2;
    }
    break; /* the program, without "--" */
  }
  if (i >= argc) {
    fprintf(stderr, "uroce run: no program to run "
                    "(uroce run [OPTIONS] -- PROGRAM [ARGS...])\n");
    return 2;
  }
  /* The program's library reads these from the environment, where a bad
   * value could only fail later and less clearly: check them here. */
  uint16_t port_v;
  double drop_v;
  if (port && arg_port("run", "--udp-port", port, &port_v) < 0)
    return 2;
  if (rx_drop && (arg_double("run", "--rx-drop", rx_drop, 0, 1, &drop_v) < 0))
    return 2;
  if (rx_drop && drop_v >= 1) {
    fprintf(stderr, "uroce run: --rx-drop '%s': must be below 1\n", rx_drop);
    return 2;
  }
  if (drop_only && strcmp(drop_only, "any") && strcmp(drop_only, "requests") &&
      strcmp(drop_only, "responses")) {
    fprintf(stderr, "uroce run: --rx-drop-only '%s': expected any, requests "
                    "or responses\n", drop_only);
    return 2;
  }
  if (drop_only && !rx_drop) {
    fprintf(stderr, "uroce run: --rx-drop-only needs --rx-drop P\n");
    return 2;
  }
  if (pcap && arg_out_file("run", "--pcap", pcap) < 0)
    return 1;
  if (trace && arg_out_file("run", "--trace", trace) < 0)
    return 1;
  char libdir[PATH_MAX + 32];
  if (find_libdir(libdir, sizeof(libdir)) < 0) {
    fprintf(stderr,
            "uroce run: libibverbs.so.1 drop-in not found (looked in %s); "
            "build it (needs libibverbs-dev) or set UROCE_LIBDIR\n",
            libdir);
    return 1;
  }
  if (env_join("LD_LIBRARY_PATH", libdir, getenv("LD_LIBRARY_PATH")) < 0)
    return 1;
  setenv("UROCE_ADDR", addr, 1);
#ifdef UROCE_ASAN_RUNTIME
  /* This build's libraries are compiled with AddressSanitizer; a program
   * that is not must load the sanitizer runtime first. Leaks of the
   * program itself are not ours to report. */
  {
    if (env_join("LD_PRELOAD", UROCE_ASAN_RUNTIME, getenv("LD_PRELOAD")) < 0)
      return 1;
    /* Appended, so it wins over a detect_leaks=1 set by the caller. */
    if (env_join("ASAN_OPTIONS", getenv("ASAN_OPTIONS"), "detect_leaks=0") < 0)
      return 1;
  }
#endif
  if (port)
    setenv("UROCE_PORT", port, 1);
  if (pcap)
    setenv("UROCE_PCAP", pcap, 1);
  if (dev)
    setenv("UROCE_DEV_NAME", dev, 1);
  if (rx_drop)
    setenv("UROCE_RX_DROP", rx_drop, 1);
  if (drop_only)
    setenv("UROCE_RX_DROP_ONLY", drop_only, 1);
  if (trace) {
    /* absolute: the program may change directory before it opens */
    char abs[PATH_MAX + 2];
    char *cwd = trace[0] == '/' ? 0 : getcwd(abs, PATH_MAX);
    size_t n = cwd ? strlen(abs) : 0;
    if (cwd && n + 1 + strlen(trace) < sizeof abs) {
      abs[n] = '/';
      strcpy(abs + n + 1, trace);
      trace = abs;
    }
    setenv("UROCE_TRACE", trace, 1);
  }

  char **args = argv + i;
  if (ns) {
    /* ip netns exec keeps the environment set above, and remounts /sys:
     * this program runs again inside, to make the device entries there. */
    int n = argc - i;
    char **v = calloc((size_t)n + 10, sizeof(*v));
    static char exe[PATH_MAX]; /* outlives this block: v points into it */
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (!v || len <= 0)
      return 1;
    exe[len] = 0;
    const char *pre[] = {"ip",  "netns",  "exec", ns,  exe,
                         "run", "--addr", addr,   "--"};
    memcpy(v, pre, sizeof(pre));
    memcpy(v + 9, args, (size_t)n * sizeof(*v));
    args = v;
  } else if (!getenv("UROCE_NO_DEVNODES")) {
    const char *name = getenv("UROCE_DEV_NAME");
    if (run_dev_setup(name && *name ? name : "uroce0", "uverbs0", addr) < 0)
      fprintf(stderr, "uroce run: going on without /dev/infiniband and "
                      "/sys/class/infiniband: the drop-in works, but "
                      "middleware that looks there (UCX) finds no device\n");
  }
  fflush(NULL);
  execvp(args[0], args);
  fprintf(stderr, "uroce run: cannot run %s: %s\n", args[0], strerror(errno));
  return 127;
}
