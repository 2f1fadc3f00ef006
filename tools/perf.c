/* uroce perf: perftest for uroce. A server and a client exchange queue-pair
 * information over TCP (port 18515 by default, as perftest), run RDMA
 * WRITE, READ, SEND or atomic traffic over uroce, and print bandwidth
 * (MiB/s, Gb/s, Mpps) or latency (t_min, t_typical = median, t_avg,
 * t_stdev, 99%, 99.9%, t_max) the way perftest does.
 *
 *   server: uroce perf write bw --addr 127.0.0.1
 *   client: uroce perf write bw --addr 127.0.0.2 127.0.0.1
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "args.h"
#include "perf_util.h"
#include "tool.h"
#include "uroce/uroce.h"
#include "util/clock.h"

enum op { OP_WRITE, OP_READ, OP_SEND, OP_ATOMIC };
enum test { T_BW, T_LAT };
static const char *const op_names[] = {"write", "read", "send", "atomic"};

struct opts {
  enum op op;
  enum test test;
  const char *server; /* NULL: we are the server */
  const char *addr;   /* our uroce address */
  uint16_t tcp_port;
  uint16_t udp_port;
  uint64_t size;
  bool sweep;
  uint64_t iters;
  double duration;
  unsigned qps;
  unsigned tx_depth;
  int mtu; /* enum uroce_mtu, 0 = device's */
  bool json, verify, inline_progress, stats;
  bool events;   /* sleep on the completion channel instead of spinning */
  int tx_gather; /* uroce_device_attr's */
  const char *pcap;
  const char *trace;
  unsigned inline_size;
};

struct conn {
  struct uroce_qp *qp;
  struct perf_qp_info remote;
};

struct ctx {
  struct opts *o;
  struct uroce_device *dev;
  struct uroce_pd *pd;
  struct uroce_cq *cq;
  struct uroce_comp_channel *ch; /* with --events */
  bool armed;                    /* the CQ is armed for one event */
  struct uroce_mr *mr;
  uint8_t *buf;
  size_t buf_size; /* per QP: 2 x max size (send and receive halves) */
  struct conn *c;
  int fd;
};

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: uroce perf {write|read|send|atomic} {bw|lat} [options] "
      "[SERVER]\n"
      "\n"
      "Without SERVER, waits for a client; with it, connects to the\n"
      "server's TCP port at that address and runs the test.\n"
      "\n"
      "  --addr IP        this side's uroce address (default 127.0.0.1 "
      "for the\n"
      "                   server, 127.0.0.2 for the client)\n"
      "  -p, --tcp-port N TCP port for the handshake (18515; --port is\n"
      "                   the same, as perftest's -p)\n"
      "  --udp-port N     RoCEv2 UDP port (4791; both sides alike)\n"
      "  -s, --size N     message size in bytes, K/M/G suffixes (bw\n"
      "                   65536, lat 2)\n"
      "  -a, --all        sweep sizes 2 B .. 8 MiB\n"
      "  -n, --iters N    iterations (bw 5000, lat 10000)\n"
      "  -D, --duration S run for S seconds instead of N iterations\n"
      "  -q, --qps N      queue pairs (bw; default 1)\n"
      "  -t, --tx-depth N outstanding work requests per QP (128)\n"
      "  -m, --mtu N      path MTU: 256, 512, 1024, 2048, 4096\n"
      "  -I, --inline N   send up to N bytes inline (lat; default 0)\n"
      "  --progress MODE  inline (default): progress inside poll calls, one\n"
      "                   spinning thread per side; thread: a progress\n"
      "                   thread plays the NIC while the test thread\n"
      "                   posts and polls (what unmodified verbs\n"
      "                   programs get)\n"
      "  -e, --events     with --progress thread: sleep on the CQ's\n"
      "                   completion channel while waiting instead of\n"
      "                   spinning (perftest's -e)\n"
      "  --verify         check the data that moved\n"
      "  --json           one JSON object per size\n"
      "  --tx-gather      send payload straight from registered memory\n"
      "                   (one iovec per piece)\n"
      "  --tx-stage       copy each GSO send into one buffer, ICRCs in\n"
      "                   the same pass (the default where the CPU has\n"
      "                   AVX-512 VPCLMULQDQ)\n"
      "  --stats          print this side's device counters at the end\n"
      "  --pcap FILE      capture every RoCEv2 packet this side sends and\n"
      "                   receives (read it with uroce dump)\n"
      "  --trace FILE     append this side's transport events to FILE as\n"
      "                   JSON lines (read it with uroce trace)\n");
}

static int die(const char *what, int err) {
  fprintf(stderr, "uroce perf: %s: %s\n", what, uroce_strerror(err));
  return 1;
}

/* What went wrong, in the words of the one who sees it: a closed TCP
 * connection means the other side exited or was killed. */
static const char *why(const struct opts *o, int rv) {
  static char buf[96];
  if (rv == -ECONNRESET || rv == -EPIPE) {
    snprintf(buf, sizeof buf,
             "the %s closed the connection (it exited or was killed)",
             o->server ? "server" : "client");
    return buf;
  }
  return uroce_strerror(rv);
}

/* Fills the send half of every QP's buffer with a pattern both sides can
 * recompute. */
static uint8_t pattern(uint64_t i, unsigned qp, bool server) {
  return (uint8_t)(i * 31 + qp * 7 + (server ? 101 : 0) + (i >> 8));
}

static int setup(struct ctx *x) {
  struct opts *o = x->o;
  struct uroce_device_attr da = {0};
  da.addr = o->addr;
  da.port = o->udp_port;
  da.pcap = o->pcap;
  da.tx_gather = o->tx_gather;
  da.progress =
      o->inline_progress ? UROCE_PROGRESS_INLINE : UROCE_PROGRESS_THREAD;
  if (o->pcap && arg_out_file("perf", "--pcap", o->pcap) < 0)
    return 1;
  int rv = uroce_device_open(&x->dev, &da);
  if (rv < 0) {
    fprintf(stderr, "uroce perf: cannot open a device on --addr %s: %s\n",
            o->addr, uroce_strerror(rv));
    return 1;
  }
  if (o->trace && (rv = uroce_device_trace(x->dev, o->trace)) < 0) {
    fprintf(stderr, "uroce perf: --trace '%s': %s\n", o->trace,
            uroce_strerror(rv));
    return 1;
  }
  if ((rv = uroce_alloc_pd(x->dev, &x->pd)) < 0)
    return die("alloc_pd", rv);
  uint64_t max = o->sweep ? (8u << 20) : o->size;
  if (max < 8)
    max = 8;
  x->buf_size = (size_t)max * 2;
  size_t total = x->buf_size * o->qps;
  x->buf = mmap(0, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                -1, 0);
  if (x->buf == MAP_FAILED)
    return die("buffer", -errno);
  for (unsigned q = 0; q < o->qps; q++)
    for (size_t i = 0; i < max; i++)
      x->buf[q * x->buf_size + i] = pattern(i, q, !o->server);
  rv = uroce_reg_mr(x->pd, x->buf, total,
                    UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_WRITE |
                        UROCE_ACCESS_REMOTE_READ | UROCE_ACCESS_REMOTE_ATOMIC,
                    &x->mr);
  if (rv < 0)
    return die("reg_mr", rv);
  uint32_t cqe = o->tx_depth * o->qps * 2 + 16;
  if (o->events && (rv = uroce_create_comp_channel(x->dev, &x->ch)) < 0)
    return die("create_comp_channel", rv);
  if ((rv = uroce_create_cq(x->dev, cqe, x->ch, 0, &x->cq)) < 0)
    return die("create_cq", rv);
  x->c = calloc(o->qps, sizeof(*x->c));
  struct perf_qp_info *mine = calloc(o->qps, sizeof(*mine));
  struct perf_qp_info *theirs = calloc(o->qps, sizeof(*theirs));
  if (!x->c || !mine || !theirs)
    return die("memory", -ENOMEM);
  uint8_t gid[16];
  uroce_device_gid(x->dev, gid);
  for (unsigned q = 0; q < o->qps; q++) {
    struct uroce_qp_init_attr ia = {0};
    ia.send_cq = ia.recv_cq = x->cq;
    ia.qp_type = UROCE_QPT_RC;
    ia.cap.max_send_wr = o->tx_depth;
    ia.cap.max_recv_wr = o->tx_depth;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = o->inline_size;
    if ((rv = uroce_create_qp(x->pd, &ia, &x->c[q].qp)) < 0)
      return die("create_qp", rv);
    mine[q].qpn = uroce_qp_num(x->c[q].qp);
    mine[q].psn = (uint32_t)(mono_ns() * 2654435761u + q) & 0xFFFFFF;
    mine[q].rkey = uroce_mr_rkey(x->mr);
    mine[q].vaddr = (uint64_t)(uintptr_t)(x->buf + q * x->buf_size);
    mine[q].size = x->buf_size;
    memcpy(mine[q].gid, gid, 16);
  }
  if (o->server) {
    x->fd = perf_tcp_connect(o->server, o->tcp_port, 10000);
  } else {
    fprintf(stderr, "uroce perf: waiting for a client on TCP port %u\n",
            o->tcp_port);
    x->fd = perf_tcp_listen_accept(o->addr, o->tcp_port, 600000);
  }
  if (x->fd < 0)
    return die("handshake connection", x->fd);
  /* Both sides must run the same test, as with perftest; say which option
   * differs instead of failing later. */
  char want[160], got[160];
  snprintf(want, sizeof(want),
           "%s %s size=%llu sweep=%d iters=%llu qps=%u "
           "verify=%d duration=%g tx-depth=%u",
           op_names[o->op], o->test == T_BW ? "bw" : "lat",
           (unsigned long long)o->size, o->sweep, (unsigned long long)o->iters,
           o->qps, o->verify, o->duration, o->tx_depth);
  if ((rv = perf_exchange_text(x->fd, want, got, sizeof(got))) < 0) {
    fprintf(stderr, "uroce perf: handshake: %s\n", why(o, rv));
    return 1;
  }
  if (strcmp(want, got)) {
    fprintf(stderr,
            "uroce perf: the two sides run different tests:\n  this side: "
            "%s\n  peer:      %s\n",
            want, got);
    return 1;
  }
  if ((rv = perf_exchange(x->fd, mine, theirs, o->qps)) < 0) {
    fprintf(stderr, "uroce perf: handshake: %s\n", why(o, rv));
    return 1;
  }
  for (unsigned q = 0; q < o->qps; q++) {
    x->c[q].remote = theirs[q];
    struct uroce_qp_attr a = {
        .qp_state = UROCE_QPS_RTS,
        .qp_access_flags = UROCE_ACCESS_REMOTE_WRITE |
                           UROCE_ACCESS_REMOTE_READ |
                           UROCE_ACCESS_REMOTE_ATOMIC,
        .port_num = 1,
        .path_mtu = o->mtu ? o->mtu : uroce_device_active_mtu(x->dev),
        .dest_qp_num = theirs[q].qpn,
        .rq_psn = theirs[q].psn,
        .max_dest_rd_atomic = 16,
        .min_rnr_timer = 12,
        .ah_attr = {.is_global = 1, .hop_limit = 64},
        .sq_psn = mine[q].psn,
        .timeout = 14,
        .retry_cnt = 6, /* 7 would retry forever (rxe semantics) */
        .rnr_retry = 7,
        .max_rd_atomic = 16};
    memcpy(a.ah_attr.dgid, theirs[q].gid, 16);
    if ((rv = uroce_connect_qp(x->c[q].qp, &a)) < 0)
      return die("connect_qp", rv);
  }
  free(mine);
  free(theirs);
  return perf_barrier(x->fd) < 0 ? die("barrier", -EPROTO) : 0;
}

/* Fills one work request of the test's operation on QP q into *wr, with
 * its gather entry in *sge. */
static void build_wr(struct ctx *x, unsigned q, uint64_t size, bool signaled,
                     uint64_t wr_id, struct uroce_sge *sge,
                     struct uroce_send_wr *wr) {
  struct opts *o = x->o;
  struct conn *c = &x->c[q];
  uint8_t *local = x->buf + q * x->buf_size;
  *sge = (struct uroce_sge){(uint64_t)(uintptr_t)local, (uint32_t)size,
                            uroce_mr_lkey(x->mr)};
  memset(wr, 0, sizeof(*wr));
  wr->wr_id = wr_id;
  wr->sg_list = sge;
  wr->num_sge = 1;
  wr->send_flags = signaled ? UROCE_SEND_SIGNALED : 0;
  if (o->test == T_LAT && size <= o->inline_size && o->op != OP_READ &&
      o->op != OP_ATOMIC)
    wr->send_flags |= UROCE_SEND_INLINE;
  switch (o->op) {
  case OP_WRITE:
    /* Into the peer's receive half. */
    wr->opcode = UROCE_WR_RDMA_WRITE;
    wr->wr.rdma.remote_addr = c->remote.vaddr + c->remote.size / 2;
    wr->wr.rdma.rkey = c->remote.rkey;
    break;
  case OP_READ:
    /* Read the peer's send half into our receive half. */
    sge->addr += x->buf_size / 2;
    wr->opcode = UROCE_WR_RDMA_READ;
    wr->wr.rdma.remote_addr = c->remote.vaddr;
    wr->wr.rdma.rkey = c->remote.rkey;
    break;
  case OP_SEND:
    wr->opcode = UROCE_WR_SEND;
    break;
  case OP_ATOMIC:
    sge->addr += x->buf_size / 2;
    sge->length = 8;
    wr->opcode = UROCE_WR_ATOMIC_FETCH_AND_ADD;
    wr->wr.atomic.remote_addr = c->remote.vaddr + c->remote.size / 2;
    wr->wr.atomic.rkey = c->remote.rkey;
    wr->wr.atomic.compare_add = 1;
    break;
  }
}

/* Posts one work request. */
static int post(struct ctx *x, unsigned q, uint64_t size, bool signaled,
                uint64_t wr_id) {
  struct uroce_sge sge;
  struct uroce_send_wr wr, *bad;
  build_wr(x, q, size, signaled, wr_id, &sge, &wr);
  return uroce_post_send(x->c[q].qp, &wr, &bad);
}

/* Posts a run of n work requests as one list (one doorbell), the last
 * signaled with wr_id. */
static int post_run(struct ctx *x, unsigned q, uint64_t size, unsigned n,
                    uint64_t wr_id) {
  struct uroce_sge sge[64];
  struct uroce_send_wr wr[64], *bad;
  if (n == 0 || n > 64)
    return -EINVAL;
  for (unsigned i = 0; i < n; i++) {
    build_wr(x, q, size, i == n - 1, i == n - 1 ? wr_id : 0, &sge[i], &wr[i]);
    wr[i].next = i + 1 < n ? &wr[i + 1] : 0;
  }
  return uroce_post_send(x->c[q].qp, wr, &bad);
}

static int post_recv(struct ctx *x, unsigned q, uint64_t size) {
  uint8_t *local = x->buf + q * x->buf_size + x->buf_size / 2;
  struct uroce_sge sge = {(uint64_t)(uintptr_t)local, (uint32_t)size,
                          uroce_mr_lkey(x->mr)};
  struct uroce_recv_wr wr = {.wr_id = q, .sg_list = &sge, .num_sge = 1}, *bad;
  return uroce_post_recv(x->c[q].qp, &wr, &bad);
}

/* Polls up to n completions; any error status ends the test. */
static int poll_some(struct ctx *x, struct uroce_wc *wc, int n) {
  int got = uroce_poll_cq(x->cq, n, wc);
  if (got < 0)
    return got;
  for (int i = 0; i < got; i++)
    if (wc[i].status != UROCE_WC_SUCCESS) {
      fprintf(stderr, "uroce perf: completion error on QP 0x%x: %s\n",
              wc[i].qp_num, uroce_wc_status_str(wc[i].status));
      return -EIO;
    }
  return got;
}

/* Waits for at least one completion: spins on poll_some, or with
 * --events arms the CQ, polls once more (a completion that came before
 * the arming raises no event) and sleeps on the channel. */
static int poll_wait(struct ctx *x, struct uroce_wc *wc, int n) {
  for (;;) {
    int got = poll_some(x, wc, n);
    if (got != 0)
      return got;
    if (!x->o->events)
      continue;
    if (!x->armed) {
      int rv = uroce_req_notify_cq(x->cq, 0);
      if (rv < 0)
        return rv;
      x->armed = true;
      continue;
    }
    struct uroce_cq *cq;
    void *cq_ctx;
    int rv = uroce_get_cq_event(x->ch, &cq, &cq_ctx);
    if (rv < 0)
      return rv;
    uroce_ack_cq_events(cq, 1);
    x->armed = false;
  }
}

struct result {
  uint64_t size, iters;
  double secs;
  struct perf_lat lat;
  bool verified, verify_ok;
  double cpu_user, cpu_sys;
};

/* Client side of a bandwidth test: keeps tx_depth WRs outstanding per QP,
 * signalling one in every `sig` (RC completes WRs in order, so one
 * completion retires the run before it). wr_id = QP index << 16 | run
 * length. Exactly o->iters WRs per QP, unless a duration is given. */
static int client_bw(struct ctx *x, uint64_t size, struct result *r) {
  struct opts *o = x->o;
  const unsigned sig = o->tx_depth >= 32 ? 16 : 1;
  uint64_t *posted = calloc(o->qps, sizeof(uint64_t));
  uint64_t *done = calloc(o->qps, sizeof(uint64_t));
  struct uroce_wc wc[64];
  uint64_t total_done = 0;
  int rv = 0;
  if (!posted || !done) {
    rv = -ENOMEM;
    goto out;
  }
  double t0 = mono_s();
  bool expired = false;
  for (;;) {
    for (unsigned q = 0; q < o->qps; q++) {
      while (!expired && posted[q] - done[q] + sig <= o->tx_depth) {
        uint64_t left = o->duration > 0 ? sig : o->iters - posted[q];
        unsigned run = left < sig ? (unsigned)left : sig;
        if (run == 0)
          break;
        rv = post_run(x, q, size, run, (uint64_t)q << 16 | run);
        if (rv < 0)
          goto out;
        posted[q] += run;
      }
    }
    /* Everything that could be posted is: wait for a completion (one is
     * due, or the loop would have ended). */
    int n = poll_wait(x, wc, 64);
    if (n < 0) {
      rv = n;
      goto out;
    }
    for (int i = 0; i < n; i++) {
      done[wc[i].wr_id >> 16] += wc[i].wr_id & 0xFFFF;
      total_done += wc[i].wr_id & 0xFFFF;
    }
    if (o->duration > 0 && !expired)
      expired = mono_s() - t0 >= o->duration;
    bool idle = true;
    for (unsigned q = 0; q < o->qps; q++)
      if (done[q] < posted[q] || (o->duration == 0 && done[q] < o->iters))
        idle = false;
    if (idle && (o->duration == 0 || expired))
      break;
  }
  r->secs = mono_s() - t0;
  r->iters = total_done;
out:
  free(posted);
  free(done);
  return rv;
}

/* Server side of a SEND bandwidth test: keeps receives posted and counts
 * the messages; the client tells over TCP when it is done. */
static int server_send_bw(struct ctx *x, uint64_t size, uint64_t expect,
                          struct result *r) {
  struct opts *o = x->o;
  struct uroce_wc wc[64];
  (void)o;
  uint64_t got = 0;
  double t0 = 0;
  while (got < expect) {
    int n = poll_wait(x, wc, 64);
    if (n < 0)
      return n;
    if (n && t0 == 0)
      t0 = mono_s();
    for (int i = 0; i < n; i++) {
      got++;
      if (post_recv(x, (unsigned)wc[i].wr_id, size) < 0)
        return -EIO;
    }
  }
  r->secs = mono_s() - t0;
  r->iters = got;
  return 0;
}

/* In inline-progress mode nothing moves unless someone calls in: a side
 * that only waits for its peer (a WRITE/READ/atomic server) keeps making
 * progress until the peer speaks on the TCP connection. */
static void serve_until_peer_speaks(struct ctx *x) {
  if (!x->o->inline_progress)
    return;
  struct pollfd p = {.fd = x->fd, .events = POLLIN};
  while (poll(&p, 1, 0) == 0)
    uroce_device_progress(x->dev);
}

/* Latency: ping-pong for write and send (each side answers the other),
 * request-response timing for read and atomic (only the client acts). */
static int run_lat(struct ctx *x, uint64_t size, struct result *r) {
  struct opts *o = x->o;
  bool client = o->server != 0;
  uint64_t iters = o->iters;
  uint64_t *samples = calloc(iters, sizeof(uint64_t));
  struct uroce_wc wc[4];
  int rv = 0;
  if (!samples)
    return -ENOMEM;
  volatile uint8_t *in = x->buf + x->buf_size / 2 + size - 1; /* last byte */
  uint8_t *out_last = x->buf + size - 1;
  uint64_t i;
  for (i = 0; i < iters; i++) {
    uint64_t t0 = mono_ns();
    if (o->op == OP_READ || o->op == OP_ATOMIC) {
      if (!client) {
        serve_until_peer_speaks(x); /* no verbs call: only the NIC works */
        break;
      }
      if ((rv = post(x, 0, size, true, 0)) < 0)
        break;
      int n = poll_wait(x, wc, 1);
      if (n < 0) {
        rv = n;
        break;
      }
      samples[i] = mono_ns() - t0;
      continue;
    }
    /* Ping-pong: the client sends first; each side waits for the other's
     * message before answering. The byte value marks the iteration. */
    uint8_t mark = (uint8_t)(i % 255 + 1); /* never 0, never repeats */
    bool my_turn_first = client;
    for (int step = 0; step < 2; step++) {
      bool sending = (step == 0) == my_turn_first;
      if (sending) {
        *out_last = mark;
        if (o->op == OP_WRITE) {
          /* RDMA WRITE into the peer's receive half. */
          struct uroce_sge sge = {(uint64_t)(uintptr_t)x->buf, (uint32_t)size,
                                  uroce_mr_lkey(x->mr)};
          struct uroce_send_wr wr = {0}, *bad;
          wr.sg_list = &sge;
          wr.num_sge = 1;
          wr.opcode = UROCE_WR_RDMA_WRITE;
          wr.send_flags = UROCE_SEND_SIGNALED;
          if (size <= o->inline_size)
            wr.send_flags |= UROCE_SEND_INLINE;
          wr.wr.rdma.remote_addr =
              x->c[0].remote.vaddr + x->c[0].remote.size / 2;
          wr.wr.rdma.rkey = x->c[0].remote.rkey;
          if ((rv = uroce_post_send(x->c[0].qp, &wr, &bad)) < 0)
            goto out;
        } else if ((rv = post(x, 0, size, true, 0)) < 0) {
          goto out;
        }
      } else if (o->op == OP_WRITE) {
        while (*in != mark)
          if (o->inline_progress)
            uroce_device_progress(x->dev);
      } else {
        /* Wait for the receive completion (the send's may come first). */
        bool got = false;
        while (!got) {
          int n = poll_wait(x, wc, 4);
          if (n < 0) {
            rv = n;
            goto out;
          }
          for (int k = 0; k < n; k++)
            if (wc[k].opcode == UROCE_WC_RECV) {
              got = true;
              if ((rv = post_recv(x, 0, size)) < 0)
                goto out;
            }
        }
      }
    }
    samples[i] = (mono_ns() - t0) / 2; /* one way: half the round trip */
    /* Retire our own send completions without blocking. */
    if (o->op == OP_WRITE)
      while (poll_some(x, wc, 4) > 0) {
      }
  }
out:
  if (rv == 0 && client) {
    perf_lat_compute(samples, (size_t)i, &r->lat);
    r->iters = i;
  }
  free(samples);
  return rv;
}

static uint64_t fnv(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static void print_header(struct opts *o) {
  if (o->json)
    return;
  if (o->test == T_BW)
    printf(" #bytes     #iterations    BW average[MiB/sec]   BW "
           "average[Gb/sec]   MsgRate[Mpps]\n");
  else
    printf(" #bytes #iterations    t_min[usec]    t_max[usec]  "
           "t_typical[usec]    t_avg[usec]    t_stdev[usec]   99%% "
           "percentile[usec]   99.9%% percentile[usec]\n");
}

static void print_result(struct opts *o, const struct result *r) {
  if (o->test == T_BW) {
    double bytes = (double)r->size * (double)r->iters;
    double mib = r->secs > 0 ? bytes / r->secs / (1 << 20) : 0;
    double gb = r->secs > 0 ? bytes * 8 / r->secs / 1e9 : 0;
    double mpps = r->secs > 0 ? (double)r->iters / r->secs / 1e6 : 0;
    if (o->json)
      printf("{\"test\":\"%s_bw\",\"bytes\":%" PRIu64 ",\"iterations\":%" PRIu64
             ",\"seconds\":%.6f,\"bw_mib_s\":%.2f,\"bw_gb_s\":%.3f,"
             "\"msg_rate_mpps\":%.4f,\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f"
             "%s}\n",
             op_names[o->op], r->size, r->iters, r->secs, mib, gb, mpps,
             r->cpu_user, r->cpu_sys,
             r->verified ? (r->verify_ok ? ",\"verify\":\"ok\""
                                         : ",\"verify\":\"FAILED\"")
                         : "");
    else
      printf(" %-10" PRIu64 " %-14" PRIu64 " %-21.2f %-18.3f %.6f%s\n", r->size,
             r->iters, mib, gb, mpps,
             r->verified
                 ? (r->verify_ok ? "  (data verified)" : "  DATA MISMATCH")
                 : "");
  } else {
    const struct perf_lat *l = &r->lat;
    if (o->json)
      printf(
          "{\"test\":\"%s_lat\",\"bytes\":%" PRIu64 ",\"iterations\":%" PRIu64
          ",\"t_min_us\":%.3f,\"t_max_us\":%.3f,\"t_typical_us\":%.3f,"
          "\"t_avg_us\":%.3f,\"t_stdev_us\":%.3f,\"p99_us\":%.3f,"
          "\"p999_us\":%.3f%s}\n",
          op_names[o->op], r->size, r->iters, l->min_us, l->max_us,
          l->median_us, l->avg_us, l->stdev_us, l->p99_us, l->p999_us,
          r->verified
              ? (r->verify_ok ? ",\"verify\":\"ok\"" : ",\"verify\":\"FAILED\"")
              : "");
    else
      printf(" %-6" PRIu64 " %-11" PRIu64
             " %-14.2f %-14.2f %-16.2f %-14.2f %-15.2f %-21.2f %.2f%s\n",
             r->size, r->iters, l->min_us, l->max_us, l->median_us, l->avg_us,
             l->stdev_us, l->p99_us, l->p999_us,
             r->verified
                 ? (r->verify_ok ? "  (data verified)" : "  DATA MISMATCH")
                 : "");
  }
  fflush(stdout);
}

static double cpu_s(bool sys) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  struct timeval t = sys ? ru.ru_stime : ru.ru_utime;
  return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

/* One size: barrier, run, barrier, verify. Both sides run this. */
static int run_size(struct ctx *x, uint64_t size, struct result *r) {
  struct opts *o = x->o;
  bool client = o->server != 0;
  int rv;
  memset(r, 0, sizeof(*r));
  r->size = size;
  if (o->op == OP_ATOMIC)
    r->size = size = 8;
  /* Clear the receive halves so that verification means something. */
  for (unsigned q = 0; q < o->qps; q++)
    memset(x->buf + q * x->buf_size + x->buf_size / 2, 0, x->buf_size / 2);
  /* Receives go up before the barrier, so no SEND meets an empty queue:
   * all of them on a bandwidth server, two on each side of a ping-pong. */
  if (o->op == OP_SEND) {
    unsigned n = o->test == T_LAT ? 2 : client ? 0 : o->tx_depth;
    for (unsigned q = 0; q < o->qps; q++)
      for (unsigned k = 0; k < n; k++)
        if ((rv = post_recv(x, q, size)) < 0)
          return rv;
  }
  if ((rv = perf_barrier(x->fd)) < 0)
    return rv;
  double u0 = cpu_s(false), s0 = cpu_s(true);
  if (o->test == T_LAT) {
    rv = run_lat(x, size, r);
  } else if (client) {
    rv = client_bw(x, size, r);
    /* Tell the server how many messages to expect (SEND). */
    uint64_t n = r->iters;
    if (rv == 0)
      rv = perf_write_all(x->fd, &n, sizeof(n));
  } else {
    uint64_t n = 0;
    if (o->op == OP_SEND) {
      /* The server learns the count after the fact; it keeps receives
       * posted and counts until the client reports. Duration mode posts
       * unboundedly, so count until the client's total arrives. */
      rv = server_send_bw(x, size,
                          o->duration > 0 ? UINT64_MAX : o->iters * o->qps, r);
    }
    if (rv == 0)
      serve_until_peer_speaks(x);
    if (rv == 0)
      rv = perf_read_all(x->fd, &n, sizeof(n));
  }
  r->cpu_user = cpu_s(false) - u0;
  r->cpu_sys = cpu_s(true) - s0;
  if (rv < 0)
    return rv;
  if ((rv = perf_barrier(x->fd)) < 0)
    return rv;
  if (o->verify) {
    /* The side that received data hashes it; the other hashes what it
     * sent; both compare over TCP. Atomics: the server's counter must
     * equal the number of fetch-adds. */
    uint64_t h = 0;
    size_t n = (size_t)size;
    for (unsigned q = 0; q < o->qps; q++) {
      const uint8_t *send_half = x->buf + q * x->buf_size;
      const uint8_t *recv_half = send_half + x->buf_size / 2;
      bool receiver = (o->op == OP_READ) ? client : !client;
      if (o->op == OP_ATOMIC) {
        uint64_t counter;
        memcpy(&counter, recv_half, 8);
        h += client ? 0 : counter;
        continue;
      }
      h = h * 31 + fnv(receiver ? recv_half : send_half, n);
    }
    if (o->op == OP_ATOMIC && client)
      h = r->iters; /* the server's counters must add up to this */
    uint64_t theirs;
    if ((rv = perf_write_all(x->fd, &h, sizeof(h))) < 0 ||
        (rv = perf_read_all(x->fd, &theirs, sizeof(theirs))) < 0)
      return rv;
    r->verified = true;
    r->verify_ok = h == theirs;
  }
  return 0;
}

/* The client measures (and the server of a SEND bandwidth test); the
 * other side gets the figures over TCP so that both print the result, as
 * perftest does. */
static int share_result(struct ctx *x, struct result *r) {
  struct opts *o = x->o;
  const struct perf_lat *l = &r->lat;
  char mine[400], theirs[400];
  snprintf(mine, sizeof mine,
           "%" PRIu64 " %.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g",
           r->iters, r->secs, l->min_us, l->max_us, l->median_us, l->avg_us,
           l->stdev_us, l->p99_us, l->p999_us);
  int rv = perf_exchange_text(x->fd, mine, theirs, sizeof theirs);
  if (rv < 0 || o->server || (o->op == OP_SEND && o->test == T_BW))
    return rv;
  struct perf_lat *t = &r->lat;
  if (sscanf(theirs, "%" SCNu64 " %lg %lg %lg %lg %lg %lg %lg %lg", &r->iters,
             &r->secs, &t->min_us, &t->max_us, &t->median_us, &t->avg_us,
             &t->stdev_us, &t->p99_us, &t->p999_us) != 9)
    return -EPROTO;
  return 0;
}

static void print_stats(struct uroce_device *dev) {
  struct uroce_device_stats st;
  uroce_device_get_stats(dev, &st);
  fprintf(stderr,
          "uroce perf: stats: rx_pkts=%" PRIu64 " tx_pkts=%" PRIu64
          " rx_bad_icrc=%" PRIu64 " rx_malformed=%" PRIu64
          " rx_dropped_engine=%" PRIu64 " retransmits=%" PRIu64
          " go_backs=%" PRIu64 " timeouts=%" PRIu64 " tx_gso_calls=%" PRIu64
          " rx_gro_segs=%" PRIu64 "\n",
          st.rx_pkts, st.tx_pkts, st.rx_bad_icrc, st.rx_malformed,
          st.rx_dropped_engine, st.retransmits, st.go_backs, st.timeouts,
          st.tx_gso_calls, st.rx_gro_segs);
}

int cmd_perf(int argc, char **argv) {
  static const struct option lo[] = {{"addr", required_argument, 0, 'A'},
                                     {"port", required_argument, 0, 'p'},
                                     {"tcp-port", required_argument, 0, 'p'},
                                     {"udp-port", required_argument, 0, 'U'},
                                     {"size", required_argument, 0, 's'},
                                     {"all", no_argument, 0, 'a'},
                                     {"iters", required_argument, 0, 'n'},
                                     {"duration", required_argument, 0, 'D'},
                                     {"qps", required_argument, 0, 'q'},
                                     {"tx-depth", required_argument, 0, 't'},
                                     {"mtu", required_argument, 0, 'm'},
                                     {"inline", required_argument, 0, 'I'},
                                     {"progress", required_argument, 0, 'P'},
                                     {"verify", no_argument, 0, 'V'},
                                     {"events", no_argument, 0, 'e'},
                                     {"json", no_argument, 0, 'J'},
                                     {"stats", no_argument, 0, 'S'},
                                     {"tx-gather", no_argument, 0, 'G'},
                                     {"tx-stage", no_argument, 0, 'T'},
                                     {"pcap", required_argument, 0, 'C'},
                                     {"trace", required_argument, 0, 'R'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  struct opts o = {0};
  o.tcp_port = 18515;
  o.qps = 1;
  o.tx_depth = 128;
  uint64_t v;
  bool size_set = false, iters_set = false;
  int progress_mode = 1; /* inline */
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return 0;
  }
  if (argc < 3) {
    fprintf(stderr, "uroce perf: which operation and test? "
                    "(uroce perf {write|read|send|atomic} {bw|lat} ...)\n");
    return 2;
  }
  int i;
  for (i = 0; i < 4 && strcmp(argv[1], op_names[i]); i++) {
  }
  if (i == 4) {
    fprintf(stderr,
            "uroce perf: unknown operation '%s' (write, read, send or "
            "atomic)\n",
            argv[1]);
    return 2;
  }
  o.op = (enum op)i;
  if (!strcmp(argv[2], "bw"))
    o.test = T_BW;
  else if (!strcmp(argv[2], "lat"))
    o.test = T_LAT;
  else {
    fprintf(stderr, "uroce perf: unknown test '%s' (bw or lat)\n", argv[2]);
    return 2;
  }
  optind = 3;
  int c;
  while ((c = getopt_long(argc, argv, "p:s:an:D:q:t:m:I:eh", lo, 0)) != -1) {
    switch (c) {
    case 'A':
      o.addr = optarg;
      break;
    case 'p':
      if (arg_port("perf", "--tcp-port", optarg, &o.tcp_port) < 0)
        return 2;
      break;
    case 'U':
      if (arg_port("perf", "--udp-port", optarg, &o.udp_port) < 0)
        return 2;
      break;
    case 's':
      if (arg_size("perf", "--size", optarg, 1, 1u << 30, &o.size) < 0)
        return 2;
      size_set = true;
      break;
    case 'a':
      o.sweep = true;
      break;
    case 'n':
      if (arg_u64("perf", "--iters", optarg, 1, 1000000000, &o.iters) < 0)
        return 2;
      iters_set = true;
      break;
    case 'D':
      if (arg_double("perf", "--duration", optarg, 0.001, 86400, &o.duration) <
          0)
        return 2;
      break;
    case 'q':
      if (arg_u64("perf", "--qps", optarg, 1, 1024, &v) < 0)
        return 2;
      o.qps = (unsigned)v;
      break;
    case 't':
      if (arg_u64("perf", "--tx-depth", optarg, 1, 8192, &v) < 0)
        return 2;
      o.tx_depth = (unsigned)v;
      break;
    case 'm':
      if (arg_u64("perf", "--mtu", optarg, 256, 4096, &v) < 0)
        return 2;
      if (v != 256 && v != 512 && v != 1024 && v != 2048 && v != 4096) {
        fprintf(stderr,
                "uroce perf: --mtu '%s': not one of 256, 512, "
                "1024, 2048, 4096\n",
                optarg);
        return 2;
      }
      o.mtu = v == 256    ? UROCE_MTU_256
              : v == 512  ? UROCE_MTU_512
              : v == 1024 ? UROCE_MTU_1024
              : v == 2048 ? UROCE_MTU_2048
                          : UROCE_MTU_4096;
      break;
    case 'I':
      if (arg_u64("perf", "--inline", optarg, 0, 1024, &v) < 0)
        return 2;
      o.inline_size = (unsigned)v;
      break;
    case 'P':
      if (!strcmp(optarg, "inline"))
        progress_mode = 1;
      else if (!strcmp(optarg, "thread"))
        progress_mode = 0;
      else {
        fprintf(stderr,
                "uroce perf: --progress '%s': not one of inline, thread\n",
                optarg);
        return 2;
      }
      break;
    case 'V':
      o.verify = true;
      break;
    case 'e':
      o.events = true;
      break;
    case 'J':
      o.json = true;
      break;
    case 'G':
      o.tx_gather = 1;
      break;
    case 'T':
      o.tx_gather = -1;
      break;
    case 'S':
      o.stats = true;
      break;
    case 'C':
      o.pcap = optarg;
      break;
    case 'R':
      o.trace = optarg;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      arg_see_help("perf");
      return 2;
    }
  }
  if (optind < argc)
    o.server = argv[optind++];
  if (optind != argc) {
    fprintf(stderr, "uroce perf: unexpected argument '%s' after SERVER %s\n",
            argv[optind], o.server);
    return 2;
  }
  if (!o.addr)
    o.addr = o.server ? "127.0.0.2" : "127.0.0.1";
  o.inline_progress = progress_mode != 0;
  if (o.events && o.inline_progress) {
    fprintf(stderr, "uroce perf: --events needs --progress thread (inline "
                    "progress moves nothing while the test sleeps)\n");
    return 2;
  }
  if (!size_set)
    o.size = o.test == T_BW ? 65536 : 2;
  if (!iters_set)
    o.iters = o.test == T_BW ? 5000 : 10000;
  if (o.test == T_LAT && o.qps != 1) {
    fprintf(stderr, "uroce perf: latency tests use one QP\n");
    return 2;
  }
  if (o.test == T_LAT && o.duration > 0) {
    fprintf(stderr, "uroce perf: latency tests count iterations (-n)\n");
    return 2;
  }
  if (o.op == OP_SEND && o.test == T_BW && o.duration > 0) {
    fprintf(stderr, "uroce perf: send bw counts iterations (-n)\n");
    return 2;
  }

  struct ctx x = {.o = &o, .fd = -1};
  if (setup(&x) != 0)
    return 1;
  print_header(&o);
  int status = 0;
  uint64_t first = o.sweep ? 2 : o.size, last = o.sweep ? (8u << 20) : o.size;
  for (uint64_t size = first; size <= last; size *= 2) {
    struct result r;
    int rv = run_size(&x, size, &r);
    if (rv == 0)
      rv = share_result(&x, &r);
    if (rv < 0) {
      fprintf(stderr, "uroce perf: size %" PRIu64 ": %s\n", size, why(&o, rv));
      status = 1;
      break;
    }
    if (r.verified && !r.verify_ok)
      status = 1;
    print_result(&o, &r);
    if (o.op == OP_ATOMIC)
      break;
  }
  if (x.fd >= 0)
    close(x.fd);
  if (o.stats)
    print_stats(x.dev);
  for (unsigned q = 0; q < o.qps && x.c; q++)
    if (x.c[q].qp)
      uroce_destroy_qp(x.c[q].qp);
  if (x.mr)
    uroce_dereg_mr(x.mr);
  if (x.cq)
    uroce_destroy_cq(x.cq);
  if (x.ch)
    uroce_destroy_comp_channel(x.ch);
  if (x.pd)
    uroce_dealloc_pd(x.pd);
  uroce_device_close(x.dev);
  free(x.c);
  if (x.buf && x.buf != MAP_FAILED)
    munmap(x.buf, x.buf_size * o.qps);
  return status;
}
