/* The native API over real UDP: two devices in one process on two
 * loopback addresses, each with its progress thread, move data with every
 * RC operation and check it; completion channels are file descriptors;
 * the responder needs no calls from its application, also after the
 * application polled for a while and went quiet. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/internal.h"
#include "apihelp.h"
#include "t.h"
#include "util/clock.h"
#include "uroce/uroce.h"

struct side {
  struct uroce_device *dev;
  struct uroce_pd *pd;
  struct uroce_cq *cq;
  struct uroce_comp_channel *ch;
  struct uroce_qp *qp;
  struct uroce_mr *mr;
  uint8_t *buf;
  size_t len;
};

static uint64_t now_ms(void) {
  return mono_ns() / 1000000;
}

static int open_side(struct side *s, const char *addr, int progress,
                     size_t len) {
  struct uroce_device_attr a = {.addr = addr, .progress = progress};
  int rv = uroce_device_open(&s->dev, &a);
  if (rv < 0)
    return rv;
  CHECK_EQ(uroce_alloc_pd(s->dev, &s->pd), 0);
  CHECK_EQ(uroce_create_comp_channel(s->dev, &s->ch), 0);
  CHECK_EQ(uroce_create_cq(s->dev, 256, s->ch, s, &s->cq), 0);
  s->len = len;
  s->buf = calloc(1, len);
  CHECK_EQ(uroce_reg_mr(s->pd, s->buf, len,
                        UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_WRITE |
                            UROCE_ACCESS_REMOTE_READ |
                            UROCE_ACCESS_REMOTE_ATOMIC,
                        &s->mr),
           0);
  struct uroce_qp_init_attr ia = {
      .send_cq = s->cq, .recv_cq = s->cq, .qp_type = UROCE_QPT_RC};
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 64;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
  ia.cap.max_inline_data = 64;
  CHECK_EQ(uroce_create_qp(s->pd, &ia, &s->qp), 0);
  return 0;
}

static void connect_qp(struct side *s, struct side *peer) {
  CHECK_EQ(api_connect_rc(s->qp, peer->dev, peer->qp,
                          UROCE_ACCESS_REMOTE_WRITE | UROCE_ACCESS_REMOTE_READ |
                              UROCE_ACCESS_REMOTE_ATOMIC,
                          1000, 10),
           0);
}

static void close_side(struct side *s) {
  if (!s->dev)
    return;
  CHECK_EQ(uroce_destroy_qp(s->qp), 0);
  CHECK_EQ(uroce_dereg_mr(s->mr), 0);
  CHECK_EQ(uroce_destroy_cq(s->cq), 0);
  CHECK_EQ(uroce_destroy_comp_channel(s->ch), 0);
  CHECK_EQ(uroce_dealloc_pd(s->pd), 0);
  uroce_device_close(s->dev);
  free(s->buf);
  memset(s, 0, sizeof(*s));
}

/* Waits up to 5 s for one completion. */
static int wait_wc(struct side *s, struct uroce_wc *wc) {
  uint64_t end = now_ms() + 5000;
  while (now_ms() < end) {
    int n = uroce_poll_cq(s->cq, 1, wc);
    if (n != 0)
      return n;
  }
  return 0;
}

static struct uroce_send_wr wr_of(struct side *s, uint32_t opcode,
                                  struct uroce_sge *sge, uint64_t local_off,
                                  uint32_t len, struct side *peer,
                                  uint64_t remote_off) {
  struct uroce_send_wr wr = {0};
  sge->addr = (uint64_t)(uintptr_t)(s->buf + local_off);
  sge->length = len;
  sge->lkey = uroce_mr_lkey(s->mr);
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = UROCE_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)(peer->buf + remote_off);
  wr.wr.rdma.rkey = uroce_mr_rkey(peer->mr);
  return wr;
}

/* Opens a and b with 1 MiB each and connects their QPs; false if either
 * could not be opened (the failure is checked). */
static bool open_pair(struct side *a, const char *addr_a, int progress_a,
                      struct side *b, const char *addr_b, int progress_b) {
  CHECK_EQ(open_side(a, addr_a, progress_a, 1 << 20), 0);
  CHECK_EQ(open_side(b, addr_b, progress_b, 1 << 20), 0);
  if (!a->dev || !b->dev)
    return false;
  connect_qp(a, b);
  connect_qp(b, a);
  return true;
}

static void run_ops(int progress_a, int progress_b) {
  struct side a = {0}, b = {0};
  size_t len = 1 << 20;
  if (!open_pair(&a, "127.0.0.21", progress_a, &b, "127.0.0.22", progress_b))
    goto out;
  for (size_t i = 0; i < len; i++)
    a.buf[i] = (uint8_t)(i * 13 + 1);

  struct uroce_sge sge;
  struct uroce_send_wr *bad;
  struct uroce_wc wc;
  /* RDMA WRITE of 300 KB: b's application makes no call. */
  struct uroce_send_wr wr =
      wr_of(&a, UROCE_WR_RDMA_WRITE, &sge, 0, 300000, &b, 4096);
  CHECK_EQ(uroce_post_send(a.qp, &wr, &bad), 0);
  CHECK_EQ(wait_wc(&a, &wc), 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc.opcode, UROCE_WC_RDMA_WRITE);
  CHECK(memcmp(b.buf + 4096, a.buf, 300000) == 0);

  /* RDMA READ back 200 KB into another part of a's buffer. */
  wr = wr_of(&a, UROCE_WR_RDMA_READ, &sge, 600000, 200000, &b, 4096);
  CHECK_EQ(uroce_post_send(a.qp, &wr, &bad), 0);
  CHECK_EQ(wait_wc(&a, &wc), 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc.opcode, UROCE_WC_RDMA_READ);
  CHECK_EQ(wc.byte_len, 200000);
  CHECK(memcmp(a.buf + 600000, a.buf, 200000) == 0);

  /* Fetch-and-add and compare-and-swap on b's memory. */
  uint64_t v = 40;
  memcpy(b.buf + 8, &v, 8);
  wr = wr_of(&a, UROCE_WR_ATOMIC_FETCH_AND_ADD, &sge, 900000, 8, &b, 0);
  wr.wr.atomic.remote_addr = (uint64_t)(uintptr_t)(b.buf + 8);
  wr.wr.atomic.rkey = uroce_mr_rkey(b.mr);
  wr.wr.atomic.compare_add = 2;
  CHECK_EQ(uroce_post_send(a.qp, &wr, &bad), 0);
  CHECK_EQ(wait_wc(&a, &wc), 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  memcpy(&v, a.buf + 900000, 8);
  CHECK_EQ(v, 40);
  memcpy(&v, b.buf + 8, 8);
  CHECK_EQ(v, 42);

  /* SEND with immediate into a posted receive, with a completion event
   * on b's channel fd. */
  struct uroce_sge rsge = {(uint64_t)(uintptr_t)(b.buf + 800000), 100000,
                           uroce_mr_lkey(b.mr)};
  struct uroce_recv_wr rwr = {.wr_id = 77, .sg_list = &rsge, .num_sge = 1},
                       *rbad;
  CHECK_EQ(uroce_post_recv(b.qp, &rwr, &rbad), 0);
  CHECK_EQ(uroce_req_notify_cq(b.cq, 0), 0);
  wr = wr_of(&a, UROCE_WR_SEND_WITH_IMM, &sge, 1000, 5000, &b, 0);
  wr.imm_data = 0x12345678;
  CHECK_EQ(uroce_post_send(a.qp, &wr, &bad), 0);
  struct pollfd pfd = {.fd = uroce_comp_channel_fd(b.ch), .events = POLLIN};
  int ready = poll(&pfd, 1, 5000);
  CHECK_EQ(ready, 1);
  if (ready != 1)
    goto out; /* uroce_get_cq_event would block for good */
  struct uroce_cq *evcq = 0;
  void *ctx = 0;
  CHECK_EQ(uroce_get_cq_event(b.ch, &evcq, &ctx), 0);
  CHECK(evcq == b.cq);
  CHECK(ctx == &b);
  uroce_ack_cq_events(b.cq, 1);
  CHECK_EQ(wait_wc(&b, &wc), 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  CHECK_EQ(wc.opcode, UROCE_WC_RECV);
  CHECK_EQ(wc.wr_id, 77);
  CHECK_EQ(wc.byte_len, 5000);
  CHECK_EQ(wc.imm_data, 0x12345678);
  CHECK(wc.wc_flags & UROCE_WC_WITH_IMM);
  CHECK(memcmp(b.buf + 800000, a.buf + 1000, 5000) == 0);
  CHECK_EQ(wait_wc(&a, &wc), 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);

  /* Bad rkey: remote access error on the requester. */
  wr = wr_of(&a, UROCE_WR_RDMA_WRITE, &sge, 0, 100, &b, 0);
  wr.wr.rdma.rkey ^= 0x5A5A;
  CHECK_EQ(uroce_post_send(a.qp, &wr, &bad), 0);
  CHECK_EQ(wait_wc(&a, &wc), 1);
  CHECK_EQ(wc.status, UROCE_WC_REM_ACCESS_ERR);

  struct uroce_device_stats st;
  uroce_device_get_stats(b.dev, &st);
  CHECK_EQ(st.rx_bad_icrc, 0);
  CHECK(st.rx_pkts > 300);
out:
  close_side(&a);
  close_side(&b);
}

static void test_thread(void) {
  run_ops(UROCE_PROGRESS_THREAD, UROCE_PROGRESS_THREAD);
}

/* The requester without a thread: its progress happens inside poll_cq
 * (and post_send). The responder keeps its thread: its application only
 * calls in for the SEND's receive completion. */
static void test_inline(void) {
  run_ops(UROCE_PROGRESS_INLINE, UROCE_PROGRESS_THREAD);
}

/* While its application polls, a device's thread leaves progress to the
 * polls (uroce_poll_cq makes it itself) and only looks now and then. An
 * application that polled and then went quiet without a word (here: it
 * stops calling in at all) must still serve READs, WRITEs and atomics:
 * the thread takes over by itself, soon (not after a retransmit timeout,
 * let alone never). Each time, b polls until its thread is seen backing
 * off, then stops. */
static void test_polled_then_quiet(void) {
  struct side a = {0}, b = {0};
  size_t len = 1 << 20;
  if (!open_pair(&a, "127.0.0.23", UROCE_PROGRESS_INLINE, &b, "127.0.0.24",
                 UROCE_PROGRESS_THREAD))
    goto out;
  for (size_t i = 0; i < len; i++)
    b.buf[i] = (uint8_t)(i * 7 + 3);
  struct uroce_wc wc;
  struct uroce_sge sge;
  struct uroce_send_wr *bad, wr;
  uint64_t v = 40;
  memcpy(b.buf + 900000, &v, 8);
  for (int k = 0; k < 3; k++) {
    /* A post rings b's sleeping thread, which then sees b polling (one
     * that comes as the thread goes to sleep rings nothing: post again,
     * now and then, while it sleeps; each post keeps a receive WR). */
    struct uroce_sge rsge = {(uint64_t)(uintptr_t)(b.buf + 700000), 64,
                             uroce_mr_lkey(b.mr)};
    struct uroce_recv_wr rwr = {.sg_list = &rsge, .num_sge = 1}, *rbad;
    uint64_t end = now_ms() + 5000, last = 0;
    int posts = 0;
    bool seen = false; /* the flag drops again as soon as b stops */
    while (!(seen = atomic_load(&b.dev->backoff)) && now_ms() < end) {
      if (posts < 16 && atomic_load(&b.dev->sleeping) &&
          now_ms() - last >= 10) {
        CHECK_EQ(uroce_post_recv(b.qp, &rwr, &rbad), 0);
        posts++;
        last = now_ms();
      }
      CHECK_EQ(uroce_poll_cq(b.cq, 1, &wc), 0); /* b's CQ stays empty */
    }
    CHECK(seen);
    uint64_t t0 = now_ms();
    if (k == 0) { /* READ b's 200 KB */
      wr = wr_of(&a, UROCE_WR_RDMA_READ, &sge, 0, 200000, &b, 0);
    } else if (k == 1) { /* WRITE them back, inverted */
      for (size_t i = 0; i < 200000; i++)
        a.buf[i] ^= 0xFF;
      wr = wr_of(&a, UROCE_WR_RDMA_WRITE, &sge, 0, 200000, &b, 0);
    } else {
      wr = wr_of(&a, UROCE_WR_ATOMIC_FETCH_AND_ADD, &sge, 500000, 8, &b, 0);
      wr.wr.atomic.remote_addr = (uint64_t)(uintptr_t)(b.buf + 900000);
      wr.wr.atomic.rkey = uroce_mr_rkey(b.mr);
      wr.wr.atomic.compare_add = 5;
    }
    CHECK_EQ(uroce_post_send(a.qp, &wr, &bad), 0);
    CHECK_EQ(wait_wc(&a, &wc), 1);
    CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
    CHECK(now_ms() - t0 < 100);
  }
  for (size_t i = 0; i < 200000; i++)
    if (b.buf[i] != (uint8_t) ~(i * 7 + 3)) {
      CHECK_EQ(b.buf[i], (uint8_t) ~(i * 7 + 3));
      break;
    }
  memcpy(&v, a.buf + 500000, 8);
  CHECK_EQ(v, 40);
  memcpy(&v, b.buf + 900000, 8);
  CHECK_EQ(v, 45);
out:
  close_side(&a);
  close_side(&b);
}

/* Posts one signaled WRITE from a with a's CQ armed, and waits until the
 * channel's fd says an event is queued. */
static void write_and_wait_event(struct side *a, struct side *b) {
  struct uroce_sge sge;
  struct uroce_send_wr wr = wr_of(a, UROCE_WR_RDMA_WRITE, &sge, 0, 100, b, 0);
  struct uroce_send_wr *bad;
  CHECK_EQ(uroce_req_notify_cq(a->cq, 0), 0);
  CHECK_EQ(uroce_post_send(a->qp, &wr, &bad), 0);
  struct pollfd pfd = {.fd = uroce_comp_channel_fd(a->ch), .events = POLLIN};
  CHECK_EQ(poll(&pfd, 1, 5000), 1);
}

/* As with ibverbs: destroying a CQ waits for the acknowledgement of every
 * event taken from the channel (UROCE_ERR_BUSY until then), and drops the
 * ones still queued, which nobody then receives. */
static void test_cq_event_lifetime(void) {
  struct side a = {0}, b = {0};
  CHECK_EQ(open_side(&a, "127.0.0.24", UROCE_PROGRESS_THREAD, 4096), 0);
  CHECK_EQ(open_side(&b, "127.0.0.25", UROCE_PROGRESS_THREAD, 4096), 0);
  if (!a.dev || !b.dev)
    goto out;
  connect_qp(&a, &b);
  connect_qp(&b, &a);
  struct uroce_wc wc;
  struct uroce_cq *evcq = 0;
  void *ctx = 0;
  write_and_wait_event(&a, &b);
  CHECK_EQ(uroce_get_cq_event(a.ch, &evcq, &ctx), 0); /* taken, not acked */
  CHECK(evcq == a.cq);
  CHECK_EQ(wait_wc(&a, &wc), 1);
  write_and_wait_event(&a, &b); /* queued, never taken */
  CHECK_EQ(wait_wc(&a, &wc), 1);
  CHECK_EQ(uroce_destroy_qp(a.qp), 0);
  a.qp = 0;
  CHECK_EQ(uroce_destroy_cq(a.cq), UROCE_ERR_BUSY);
  CHECK_EQ(uroce_destroy_comp_channel(a.ch), UROCE_ERR_BUSY);
  uroce_ack_cq_events(a.cq, 1);
  CHECK_EQ(uroce_destroy_cq(a.cq), 0);
  a.cq = 0;
  /* The queued event went with its CQ: a non-blocking wait finds none. */
  int fd = uroce_comp_channel_fd(a.ch);
  CHECK_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  CHECK_EQ(uroce_get_cq_event(a.ch, &evcq, &ctx), -EAGAIN);
  CHECK_EQ(uroce_destroy_comp_channel(a.ch), 0);
  a.ch = 0;
  CHECK_EQ(uroce_dereg_mr(a.mr), 0);
  CHECK_EQ(uroce_dealloc_pd(a.pd), 0);
  uroce_device_close(a.dev);
  free(a.buf);
  memset(&a, 0, sizeof(a));
out:
  close_side(&a);
  close_side(&b);
}

/* Any number of CQs may be armed at once: 4200 idle CQs on 5 channels
 * armed first, then the one that matters still raises its event (the
 * device once had room for 4096 armed CQs and silently left the rest
 * unarmed, so their waiters slept forever). */
static void test_many_armed_cqs(void) {
  struct side a = {0}, b = {0};
  enum { NCQ = 4200, NCH = 5 };
  struct uroce_cq **cqs = calloc(NCQ, sizeof(*cqs));
  struct uroce_comp_channel *ch[NCH] = {0};
  CHECK_EQ(open_side(&a, "127.0.0.26", UROCE_PROGRESS_THREAD, 4096), 0);
  CHECK_EQ(open_side(&b, "127.0.0.27", UROCE_PROGRESS_THREAD, 4096), 0);
  if (!a.dev || !b.dev || !cqs)
    goto out;
  for (int i = 0; i < NCH; i++)
    CHECK_EQ(uroce_create_comp_channel(a.dev, &ch[i]), 0);
  for (int i = 0; i < NCQ; i++) {
    CHECK_EQ(uroce_create_cq(a.dev, 2, ch[i / 1000], NULL, &cqs[i]), 0);
    if (cqs[i])
      CHECK_EQ(uroce_req_notify_cq(cqs[i], 0), 0);
  }
  CHECK_EQ(a.dev->narmed, NCQ);
  connect_qp(&a, &b);
  connect_qp(&b, &a);
  write_and_wait_event(&a, &b); /* the 4201st armed CQ */
  struct uroce_cq *evcq = 0;
  void *ctx = 0;
  CHECK_EQ(uroce_get_cq_event(a.ch, &evcq, &ctx), 0);
  CHECK(evcq == a.cq);
  uroce_ack_cq_events(a.cq, 1);
  struct uroce_wc wc;
  CHECK_EQ(wait_wc(&a, &wc), 1);
  for (int i = 0; i < NCQ; i++)
    if (cqs[i])
      CHECK_EQ(uroce_destroy_cq(cqs[i]), 0);
  CHECK_EQ(a.dev->narmed, 0);
  for (int i = 0; i < NCH; i++)
    if (ch[i])
      CHECK_EQ(uroce_destroy_comp_channel(ch[i]), 0);
out:
  free(cqs);
  close_side(&a);
  close_side(&b);
}

/* XRC between two devices over UDP: B's target QP delivers a SEND from
 * A's initiator into B's XRC SRQ, whose CQ (on a completion channel)
 * raises its event; the domain and CQ cannot go while the SRQ lives. */
static void test_xrc(void) {
  struct side a, b;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  CHECK_EQ(open_side(&a, "127.0.0.41", UROCE_PROGRESS_THREAD, 1 << 16), 0);
  CHECK_EQ(open_side(&b, "127.0.0.42", UROCE_PROGRESS_THREAD, 1 << 16), 0);
  struct uroce_xrcd *x;
  CHECK_EQ(uroce_alloc_xrcd(b.dev, &x), 0);
  struct uroce_srq_attr sa = {.max_wr = 8, .max_sge = 1};
  struct uroce_srq *srq;
  CHECK_EQ(uroce_create_xrc_srq(b.pd, x, b.cq, &sa, &srq), 0);
  struct uroce_qp_init_attr ta = {.qp_type = UROCE_QPT_XRC_RECV, .xrcd = x};
  struct uroce_qp *tgt, *ini;
  CHECK_EQ(uroce_create_qp(NULL, &ta, &tgt), 0);
  struct uroce_qp_init_attr ia = {.send_cq = a.cq,
                                  .qp_type = UROCE_QPT_XRC_SEND,
                                  .cap = {.max_send_wr = 8, .max_send_sge = 1}};
  CHECK_EQ(uroce_create_qp(a.pd, &ia, &ini), 0);
  CHECK_EQ(api_connect_rc(ini, b.dev, tgt, 0, 77, 10), 0);
  CHECK_EQ(api_connect_rc(tgt, a.dev, ini, UROCE_ACCESS_REMOTE_WRITE, 77, 10),
           0);
  struct uroce_sge rs = {.addr = (uint64_t)(uintptr_t)b.buf,
                         .length = 4096,
                         .lkey = uroce_mr_lkey(b.mr)};
  struct uroce_recv_wr rwr = {.wr_id = 9, .sg_list = &rs, .num_sge = 1}, *rbad;
  CHECK_EQ(uroce_post_srq_recv(srq, &rwr, &rbad), 0);
  CHECK_EQ(uroce_req_notify_cq(b.cq, 0), 0);
  memcpy(a.buf + 100, "over XRC", 8);
  struct uroce_sge ss;
  struct uroce_send_wr wr = wr_of(&a, UROCE_WR_SEND, &ss, 100, 8, &b, 0), *bad;
  wr.xrc_remote_srqn = uroce_srq_num(srq);
  CHECK_EQ(uroce_post_send(ini, &wr, &bad), 0);
  struct uroce_wc wc;
  CHECK_EQ(wait_wc(&a, &wc), 1);
  CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
  struct pollfd pfd = {.fd = uroce_comp_channel_fd(b.ch), .events = POLLIN};
  CHECK_EQ(poll(&pfd, 1, 5000), 1);
  struct uroce_cq *evcq = 0;
  void *ctx = 0;
  CHECK_EQ(uroce_get_cq_event(b.ch, &evcq, &ctx), 0);
  CHECK(evcq == b.cq);
  uroce_ack_cq_events(b.cq, 1);
  CHECK_EQ(wait_wc(&b, &wc), 1);
  CHECK_EQ(wc.wr_id, 9);
  CHECK_EQ(wc.qp_num, uroce_qp_num(tgt));
  CHECK_EQ(wc.byte_len, 8);
  CHECK(memcmp(b.buf, "over XRC", 8) == 0);
  CHECK_EQ(uroce_dealloc_xrcd(x), UROCE_ERR_BUSY);
  CHECK_EQ(uroce_destroy_qp(tgt), 0);
  CHECK_EQ(uroce_destroy_cq(b.cq), UROCE_ERR_BUSY);
  CHECK_EQ(uroce_destroy_srq(srq), 0);
  CHECK_EQ(uroce_dealloc_xrcd(x), 0);
  CHECK_EQ(uroce_destroy_qp(ini), 0);
  close_side(&a);
  close_side(&b);
}

static void test_bad_args(void) {
  struct uroce_device *d;
  struct uroce_device_attr a = {.addr = "not-an-address"};
  CHECK_EQ(uroce_device_open(&d, &a), UROCE_ERR_INVALID_ARGUMENT);
  a.addr = "192.0.2.77"; /* not on this host */
  CHECK_EQ(uroce_device_open(&d, &a), -EADDRNOTAVAIL);
  a.addr = "127.0.0.23";
  CHECK_EQ(uroce_device_open(&d, &a), 0);
  struct uroce_device *d2;
  CHECK_EQ(uroce_device_open(&d2, &a), -EADDRINUSE);
  struct uroce_cq *cq;
  CHECK_EQ(uroce_create_cq(d, 16, 0, 0, &cq), 0);
  CHECK_EQ(uroce_req_notify_cq(cq, 0), UROCE_ERR_INVALID_ARGUMENT);
  CHECK_EQ(uroce_destroy_cq(cq), 0);
  uroce_device_close(d);
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* An ACK held for a reply (docs/transport.md, "ACK coalescing") does not
 * wait for an application that stops without answering: b polls (so its
 * progress thread backs off), takes a's SEND, polls once more (UCX polls
 * its send CQ too) and goes quiet; a's send completion still comes, at
 * the hold's end, from b's thread. */
static void test_held_ack_quiet(void) {
  struct side a = {0}, b = {0};
  if (!open_pair(&a, "127.0.0.25", UROCE_PROGRESS_INLINE, &b, "127.0.0.26",
                 UROCE_PROGRESS_THREAD))
    goto out;
  uint64_t took[20];
  for (int k = 0; k < 20; k++) {
    struct uroce_sge rsge = {(uint64_t)(uintptr_t)(b.buf + 4096), 64,
                             uroce_mr_lkey(b.mr)};
    struct uroce_recv_wr rwr = {.sg_list = &rsge, .num_sge = 1}, *rbad;
    CHECK_EQ(uroce_post_recv(b.qp, &rwr, &rbad), 0);
    struct uroce_wc wc;
    uint64_t end = mono_ns() + 1000000; /* b polls for 1 ms first */
    while (mono_ns() < end)
      CHECK_EQ(uroce_poll_cq(b.cq, 1, &wc), 0);
    struct uroce_sge sge;
    struct uroce_send_wr wr = wr_of(&a, UROCE_WR_SEND, &sge, 0, 8, &b, 0);
    struct uroce_send_wr *bad;
    CHECK_EQ(uroce_post_send(a.qp, &wr, &bad), 0);
    CHECK_EQ(wait_wc(&b, &wc), 1);
    CHECK_EQ(wc.opcode, UROCE_WC_RECV);
    uint64_t t = mono_ns();
    CHECK_EQ(uroce_poll_cq(b.cq, 1, &wc), 0);
    CHECK_EQ(wait_wc(&a, &wc), 1);
    CHECK_EQ(wc.status, UROCE_WC_SUCCESS);
    took[k] = mono_ns() - t;
  }
  qsort(took, 20, sizeof(took[0]), cmp_u64);
  printf("held ACK, the responder gone quiet: send completion %.1f us "
         "(median; at most %.1f) after the receive's\n",
         (double)took[10] / 1e3, (double)took[19] / 1e3);
  CHECK(took[19] < 5000000);
out:
  close_side(&a);
  close_side(&b);
}

int main(void) {
  T_RUN(test_thread);
  T_RUN(test_inline);
  T_RUN(test_polled_then_quiet);
  T_RUN(test_held_ack_quiet);
  T_RUN(test_cq_event_lifetime);
  T_RUN(test_many_armed_cqs);
  T_RUN(test_xrc);
  T_RUN(test_bad_args);
  return T_DONE();
}
