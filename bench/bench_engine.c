/* Engine-only throughput: two engines joined in memory on one core, in
 * phantom-payload mode (no payload bytes exist or move), path MTU 4096,
 * a stream of 64 KiB RDMA WRITEs on one RC QP pair. Every packet goes
 * through uroce_eng_write_pkt on one side and uroce_pkt_parse +
 * uroce_eng_read_pkt on the other. Prints packets per second for both
 * ends together, ns per packet, and the ratio to the goal of 3 Mpps.
 *
 *   bench_engine [seconds]   (default 2)
 *   BENCH_STD=1              the standard transport (default: the two
 *                            engines negotiate multipath) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport/engine.h"
#include "util/clock.h"

#define MSG (64 * 1024)
#define DEPTH 64
#define GOAL_PPS 3e6

struct end {
  struct uroce_eng *eng;
  struct uroce_pd *pd;
  struct uroce_cq *cq;
  struct uroce_mr *mr;
  struct uroce_qp *qp;
  uint8_t gid[16];
};

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_engine: %s failed: %d\n", what, rc);
  exit(1);
}

static void make_end(struct end *e, uint8_t last_octet) {
  struct uroce_eng_cfg cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.flags = UROCE_ENG_PHANTOM | (getenv("BENCH_STD") ? UROCE_ENG_STANDARD : 0);
  cfg.seed = last_octet;
  cfg.max_unacked_psn = 1024;
  cfg.gid[10] = cfg.gid[11] = 0xFF;
  cfg.gid[12] = 10;
  cfg.gid[15] = last_octet;
  memcpy(e->gid, cfg.gid, 16);
  int rc;
  if ((rc = uroce_eng_new(&e->eng, &cfg)))
    die("eng_new", rc);
  if ((rc = uroce_eng_pd_new(e->eng, &e->pd)))
    die("pd_new", rc);
  if ((rc = uroce_eng_cq_new(e->eng, 4 * DEPTH, &e->cq)))
    die("cq_new", rc);
  if ((rc = uroce_eng_mr_reg(e->pd, (void *)(uintptr_t)0x10000000ull, 1u << 30,
                             UROCE_ACCESS_ALL, &e->mr)))
    die("mr_reg", rc);
  struct uroce_qp_init_attr ia = {
      .send_cq = e->cq,
      .recv_cq = e->cq,
      .cap = {.max_send_wr = DEPTH,
              .max_recv_wr = 1,
              .max_send_sge = 1,
              .max_recv_sge = 1},
      .qp_type = UROCE_QPT_RC,
  };
  if ((rc = uroce_eng_qp_new(e->pd, &ia, &e->qp)))
    die("qp_new", rc);
}

static void bring_up(struct end *e, const struct end *peer, uint8_t peer_ip) {
  struct uroce_qp_attr a = {.qp_state = UROCE_QPS_RTS,
                            .port_num = 1,
                            .qp_access_flags = UROCE_ACCESS_ALL,
                            .path_mtu = UROCE_MTU_4096,
                            .dest_qp_num = uroce_qp_num(peer->qp),
                            .max_dest_rd_atomic = 16,
                            .min_rnr_timer = 1,
                            .ah_attr.is_global = 1,
                            .timeout = 14,
                            .retry_cnt = 7,
                            .rnr_retry = 7,
                            .max_rd_atomic = 16};
  a.ah_attr.dgid[10] = a.ah_attr.dgid[11] = 0xFF;
  a.ah_attr.dgid[12] = 10;
  a.ah_attr.dgid[15] = peer_ip;
  int rc = uroce_eng_qp_connect(e->qp, &a);
  if (rc)
    die("modify_qp", rc);
}

static void post_write(struct end *e, const struct end *peer, uint64_t id) {
  struct uroce_sge sge = {
      .addr = e->mr->iova, .length = MSG, .lkey = e->mr->lkey};
  struct uroce_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = UROCE_WR_RDMA_WRITE;
  wr.send_flags = UROCE_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peer->mr->iova;
  wr.wr.rdma.rkey = peer->mr->rkey;
  int rc = uroce_eng_qp_post_send(e->qp, &wr, &bad);
  if (rc)
    die("post_send", rc);
}

/* Moves every packet `from` has ready into `to`; returns how many. */
static uint64_t pump(struct end *from, struct end *to, uint64_t now) {
  struct uroce_tx_pkt tx;
  struct uroce_rx_pkt rx;
  uint64_t n = 0;
  memset(&rx, 0, sizeof(rx));
  memcpy(rx.sgid, from->gid, 16);
  memcpy(rx.dgid, to->gid, 16);
  rx.ecn = 2;
  while (uroce_eng_write_pkt(from->eng, &tx, now)) {
    /* Phantom: the parser sees the headers; the payload is only a length
     * (parse reads nothing past the headers). */
    if (uroce_pkt_parse(tx.hdr, uroce_tx_len(&tx), &rx.pi) != 0)
      die("parse", -1);
    uroce_eng_read_pkt(to->eng, &rx, now);
    n++;
  }
  return n;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 2.0;
  struct end a, b;
  make_end(&a, 1);
  make_end(&b, 2);
  bring_up(&a, &b, 2);
  bring_up(&b, &a, 1);
  uint64_t id = 0;
  for (int i = 0; i < DEPTH; i++)
    post_write(&a, &b, id++);
  uint64_t pkts_a = 0, pkts_b = 0, msgs = 0, vnow = 0;
  struct uroce_wc wc[DEPTH];
  double t0 = mono_s(), t1 = t0;
  while (t1 - t0 < secs) {
    for (int k = 0; k < 64; k++) {
      pkts_a += pump(&a, &b, vnow);
      pkts_b += pump(&b, &a, vnow);
      vnow += 1000;
      if (uroce_eng_next_expiry(a.eng) <= vnow)
        uroce_eng_handle_expiry(a.eng, vnow);
      if (uroce_eng_next_expiry(b.eng) <= vnow)
        uroce_eng_handle_expiry(b.eng, vnow);
      int n = uroce_eng_cq_poll(a.cq, DEPTH, wc);
      for (int i = 0; i < n; i++) {
        if (wc[i].status != UROCE_WC_SUCCESS)
          die("completion", (int)wc[i].status);
        post_write(&a, &b, id++);
      }
      msgs += (uint64_t)n;
    }
    t1 = mono_s();
  }
  double el = t1 - t0;
  uint64_t total = pkts_a + pkts_b;
  double pps = (double)total / el;
  printf("bench_engine: RC RDMA WRITE %d B, MTU 4096, phantom payload, one "
         "core\n",
         MSG);
  printf("  %.2f s: %llu data packets, %llu acks, %llu messages\n", el,
         (unsigned long long)pkts_a, (unsigned long long)pkts_b,
         (unsigned long long)msgs);
  printf("  packets/s (both ends): %.3f M   ns/packet: %.1f\n", pps / 1e6,
         el * 1e9 / (double)total);
  printf("  data rate: %.1f Gbit/s of payload equivalent\n",
         (double)msgs * MSG * 8 / el / 1e9);
  printf("  goal 3 Mpps: ratio %.2f\n", pps / GOAL_PPS);
  uroce_eng_del(a.eng);
  uroce_eng_del(b.eng);
  return 0;
}
