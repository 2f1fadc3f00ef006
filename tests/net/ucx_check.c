/* UCX's UCP API between two processes, every byte checked: tagged
 * messages of several sizes both ways, RMA put and get, and 64-bit atomics
 * (add, fetch-and-add, swap, compare-and-swap) on the peer's memory. The
 * transports are whatever UCX_TLS allows; run under `uroce run` they are
 * rc_verbs/ud_verbs over uroce's drop-in. The two sides swap worker
 * addresses and remote keys over one TCP connection.
 *
 *   ucx_check -l PORT            the server
 *   ucx_check HOST PORT          the client
 * -i prints the endpoint's lanes (ucp_ep_print_info) on stdout.
 * Exits 0 and prints "ucx_check ok" when every check passed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define HEAP (4u << 20) /* the RMA target, registered on both sides */

static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_ep_h ep;
static int sock = -1;

#define CHECK(c, ...)                                                          \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "ucx_check: " __VA_ARGS__);                              \
      fprintf(stderr, "\n");                                                   \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static void send_all(const void *p, size_t n) {
  for (size_t o = 0; o < n;) {
    ssize_t k = send(sock, (const char *)p + o, n - o, 0);
    CHECK(k > 0, "side channel send failed");
    o += (size_t)k;
  }
}

static void recv_all(void *p, size_t n) {
  for (size_t o = 0; o < n;) {
    ssize_t k = recv(sock, (char *)p + o, n - o, 0);
    CHECK(k > 0, "side channel closed");
    o += (size_t)k;
  }
}

/* A length-prefixed blob over the side channel. */
static void send_blob(const void *p, size_t n) {
  uint64_t len = n;
  send_all(&len, sizeof(len));
  send_all(p, n);
}

static void *recv_blob(size_t *n) {
  uint64_t len;
  recv_all(&len, sizeof(len));
  CHECK(len < (1u << 20), "blob too long");
  void *p = malloc(len ? len : 1);
  CHECK(p, "out of memory");
  recv_all(p, len);
  *n = len;
  return p;
}

/* Both sides reach the same point. The worker makes progress meanwhile:
 * a transport without RDMA (tcp, ud) serves the peer's gets and atomics
 * in software, on the target's CPU. */
static void barrier(void) {
  char c = 'b';
  send_all(&c, 1);
  for (;;) {
    ssize_t k = recv(sock, &c, 1, MSG_DONTWAIT);
    if (k == 1)
      return;
    CHECK(k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
          "side channel closed");
    ucp_worker_progress(worker);
  }
}

static void wait_req(void *req, const char *what) {
  if (req == NULL)
    return;
  CHECK(!UCS_PTR_IS_ERR(req), "%s: %s", what,
        ucs_status_string(UCS_PTR_STATUS(req)));
  ucs_status_t st;
  while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS)
    ucp_worker_progress(worker);
  CHECK(st == UCS_OK, "%s: %s", what, ucs_status_string(st));
  ucp_request_free(req);
}

static uint8_t pattern(uint64_t seed, size_t i) {
  return (uint8_t)((seed * 131 + i * 7 + (i >> 8)) & 0xff);
}

static void fill(uint8_t *p, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = pattern(seed, i);
}

static void verify(const uint8_t *p, size_t n, uint64_t seed,
                   const char *what) {
  for (size_t i = 0; i < n; i++)
    CHECK(p[i] == pattern(seed, i), "%s: byte %zu of %zu is %u, not %u", what,
          i, n, p[i], pattern(seed, i));
}

static const size_t sizes[] = {1, 8, 64, 1000, 4096, 8192, 65536, 1 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Tagged messages: the client sends each size, the server echoes it back
 * with a different seed; both check what they receive. */
static void tag_phase(int server, uint8_t *buf) {
  ucp_request_param_t prm = {0};
  for (int round = 0; round < 3; round++)
    for (size_t k = 0; k < NSIZES; k++) {
      size_t n = sizes[k];
      uint64_t seed = 1000 + round * 100 + k;
      ucp_tag_t tag = 0x5500 + k;
      if (!server) {
        fill(buf, n, seed);
        wait_req(ucp_tag_send_nbx(ep, buf, n, tag, &prm), "tag send");
      }
      memset(buf, 0, n);
      wait_req(ucp_tag_recv_nbx(worker, buf, n, server ? tag : tag + 0x100,
                                (ucp_tag_t)-1, &prm),
               "tag recv");
      verify(buf, n, server ? seed : seed + 1, "tag message");
      if (server) {
        fill(buf, n, seed + 1);
        wait_req(ucp_tag_send_nbx(ep, buf, n, tag + 0x100, &prm), "tag send");
      }
    }
}

static void flush_ep(void) {
  ucp_request_param_t prm = {0};
  wait_req(ucp_ep_flush_nbx(ep, &prm), "flush");
}

/* RMA and atomics: the client works on the server's heap; the server
 * checks the result in its memory after a barrier. */
static void rma_phase(int server, uint8_t *heap, uint64_t raddr,
                      ucp_rkey_h rkey) {
  ucp_request_param_t prm = {0};
  if (server) {
    fill(heap, HEAP, 77); /* the client reads this first */
    barrier();            /* heap ready */
    barrier();            /* client done reading, then wrote */
    for (size_t k = 0; k < NSIZES; k++)
      verify(heap + (HEAP / 2) + k * 8192, sizes[k] > 8192 ? 8192 : sizes[k],
             500 + k, "put into the server");
    verify(heap + HEAP / 4, 1 << 20, 600, "put of 1 MiB into the server");
    uint64_t *a = (uint64_t *)(void *)heap;
    memset(heap, 0, 64);
    a[0] = 10;
    a[1] = 100;
    a[2] = 5;
    a[3] = 7;
    barrier(); /* atomics' operands ready */
    barrier(); /* client's atomics done */
    CHECK(a[0] == 10 + 3 * 1000, "atomic add: %llu", (unsigned long long)a[0]);
    CHECK(a[1] == 100 + 11, "fetch-and-add: %llu", (unsigned long long)a[1]);
    CHECK(a[2] == 0xabcdef, "swap: %llx", (unsigned long long)a[2]);
    CHECK(a[3] == 99, "compare-and-swap: %llu", (unsigned long long)a[3]);
    return;
  }
  uint8_t *buf = malloc(1 << 20);
  CHECK(buf, "out of memory");
  barrier(); /* heap ready */
  for (size_t k = 0; k < NSIZES; k++) {
    size_t off = k * 4096 * 3, n = sizes[k];
    memset(buf, 0, n);
    wait_req(ucp_get_nbx(ep, buf, n, raddr + off, rkey, &prm), "get");
    for (size_t i = 0; i < n; i++)
      CHECK(buf[i] == pattern(77, off + i), "get: byte %zu of %zu", i, n);
  }
  for (size_t k = 0; k < NSIZES; k++) {
    size_t n = sizes[k] > 8192 ? 8192 : sizes[k];
    fill(buf, n, 500 + k);
    wait_req(ucp_put_nbx(ep, buf, n, raddr + HEAP / 2 + k * 8192, rkey, &prm),
             "put");
  }
  fill(buf, 1 << 20, 600);
  wait_req(ucp_put_nbx(ep, buf, 1 << 20, raddr + HEAP / 4, rkey, &prm),
           "put 1 MiB");
  flush_ep();
  barrier(); /* written */
  barrier(); /* atomics' operands ready */
  uint64_t v = 1000, r = 0;
  ucp_request_param_t ap = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
                            .datatype = ucp_dt_make_contig(8)};
  for (int i = 0; i < 3; i++)
    wait_req(ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &v, 1, raddr, rkey, &ap),
             "atomic add");
  /* with a reply buffer, ADD is fetch-and-add */
  ap.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
  ap.reply_buffer = &r;
  v = 11;
  wait_req(
      ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &v, 1, raddr + 8, rkey, &ap),
      "fetch-and-add");
  CHECK(r == 100, "fetch-and-add fetched %llu", (unsigned long long)r);
  v = 0xabcdef;
  wait_req(
      ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_SWAP, &v, 1, raddr + 16, rkey, &ap),
      "swap");
  CHECK(r == 5, "swap fetched %llu", (unsigned long long)r);
  /* CSWAP compares with buffer's value and swaps in reply_buffer's: a
   * compare that fails, then one that succeeds. */
  v = 8;
  r = 50;
  wait_req(
      ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_CSWAP, &v, 1, raddr + 24, rkey, &ap),
      "compare-and-swap");
  CHECK(r == 7, "failed compare-and-swap fetched %llu", (unsigned long long)r);
  v = 7;
  r = 99;
  wait_req(
      ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_CSWAP, &v, 1, raddr + 24, rkey, &ap),
      "compare-and-swap");
  CHECK(r == 7, "compare-and-swap fetched %llu", (unsigned long long)r);
  flush_ep();
  barrier(); /* atomics done */
  free(buf);
}

static int tcp_connect(const char *host, const char *port, int listen_) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = listen_ ? AI_PASSIVE : 0},
                  *ai;
  CHECK(getaddrinfo(host, port, &hints, &ai) == 0, "bad address %s:%s",
        host ? host : "*", port);
  int s = socket(ai->ai_family, SOCK_STREAM, 0);
  CHECK(s >= 0, "socket");
  if (listen_) {
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    CHECK(bind(s, ai->ai_addr, ai->ai_addrlen) == 0 && listen(s, 1) == 0,
          "cannot listen on port %s", port);
    printf("listening\n");
    fflush(stdout);
    int c = accept(s, NULL, NULL);
    CHECK(c >= 0, "accept");
    close(s);
    s = c;
  } else {
    int ok = -1;
    for (int i = 0; i < 100 && ok; i++) { /* the server may be starting */
      ok = connect(s, ai->ai_addr, ai->ai_addrlen);
      if (ok)
        usleep(100000);
    }
    CHECK(ok == 0, "cannot connect to %s:%s", host, port);
  }
  freeaddrinfo(ai);
  return s;
}

int main(int argc, char **argv) {
  int info = 0, opt;
  const char *lport = NULL;
  while ((opt = getopt(argc, argv, "il:")) != -1) {
    if (opt == 'i')
      info = 1;
    else if (opt == 'l')
      lport = optarg;
    else
      return 2;
  }
  int server = lport != NULL;
  if (!server && argc - optind != 2) {
    fprintf(stderr, "usage: ucx_check [-i] -l PORT | ucx_check [-i] HOST "
                    "PORT\n");
    return 2;
  }
  sock = server ? tcp_connect(NULL, lport, 1)
                : tcp_connect(argv[optind], argv[optind + 1], 0);

  ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                    .features =
                        UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AMO64};
  CHECK(ucp_init(&p, NULL, &ctx) == UCS_OK, "ucp_init failed");
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SINGLE};
  CHECK(ucp_worker_create(ctx, &wp, &worker) == UCS_OK, "no worker");

  ucp_address_t *addr;
  size_t alen, plen;
  CHECK(ucp_worker_get_address(worker, &addr, &alen) == UCS_OK, "address");
  send_blob(addr, alen);
  void *peer = recv_blob(&plen);
  ucp_worker_release_address(worker, addr);
  ucp_ep_params_t ep_p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                          .address = peer};
  CHECK(ucp_ep_create(worker, &ep_p, &ep) == UCS_OK, "ucp_ep_create failed");
  free(peer);

  uint8_t *heap = aligned_alloc(4096, HEAP);
  CHECK(heap, "out of memory");
  memset(heap, 0, HEAP);
  ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                                           UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                             .address = heap,
                             .length = HEAP};
  ucp_mem_h memh;
  CHECK(ucp_mem_map(ctx, &mp, &memh) == UCS_OK, "ucp_mem_map failed");
  void *rkb;
  size_t rkl, prkl;
  CHECK(ucp_rkey_pack(ctx, memh, &rkb, &rkl) == UCS_OK, "rkey pack");
  send_blob(rkb, rkl);
  uint64_t a = (uintptr_t)heap, raddr;
  send_all(&a, 8);
  ucp_rkey_buffer_release(rkb);
  void *prkb = recv_blob(&prkl);
  recv_all(&raddr, 8);
  ucp_rkey_h rkey;
  CHECK(ucp_ep_rkey_unpack(ep, prkb, &rkey) == UCS_OK, "rkey unpack");
  free(prkb);

  tag_phase(server, heap);
  if (info)
    ucp_ep_print_info(ep, stdout);
  rma_phase(server, heap, raddr, rkey);
  barrier();

  ucp_rkey_destroy(rkey);
  ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                            .flags = UCP_EP_CLOSE_FLAG_FORCE};
  void *r = ucp_ep_close_nbx(ep, &cp);
  if (r && !UCS_PTR_IS_ERR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS)
      ucp_worker_progress(worker);
    ucp_request_free(r);
  }
  ucp_mem_unmap(ctx, memh);
  ucp_worker_destroy(worker);
  ucp_cleanup(ctx);
  free(heap);
  close(sock);
  printf("ucx_check ok\n");
  return 0;
}
