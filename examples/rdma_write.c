/* A complete RDMA WRITE between two processes over uroce.
 *   rdma_write server 127.0.0.1            (waits; its program makes no
 *   rdma_write client 127.0.0.2 127.0.0.1   call while the data lands)
 * The two exchange QP number, address (GID), rkey and buffer address over
 * TCP port 18516, connect RC QPs, and the client writes a message into the
 * server's buffer. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uroce/uroce.h>

struct info { uint32_t qpn, rkey; uint64_t addr; uint8_t gid[16]; };

static int tcp(const char *peer) { /* server: peer == NULL */
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(18516)};
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (!peer) {
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 1)) return -1;
    int c = accept(s, 0, 0);
    close(s);
    return c;
  }
  inet_pton(AF_INET, peer, &a.sin_addr);
  for (int i = 0; i < 50; i++, usleep(100000))
    if (!connect(s, (struct sockaddr *)&a, sizeof(a))) return s;
  return -1;
}

#define TRY(x) do { int rv_ = (x); if (rv_ < 0) { \
  fprintf(stderr, "%s: %s\n", #x, uroce_strerror(rv_)); return 1; } } while (0)

int main(int argc, char **argv) {
  int server = argc == 3 && !strcmp(argv[1], "server");
  if (!server && !(argc == 4 && !strcmp(argv[1], "client"))) {
    fprintf(stderr, "usage: %s server ADDR | client ADDR SERVER_ADDR\n", argv[0]);
    return 2;
  }
  static char buf[4096];
  struct uroce_device *dev;
  struct uroce_pd *pd;
  struct uroce_cq *cq;
  struct uroce_mr *mr;
  struct uroce_qp *qp;
  struct uroce_device_attr da = {.addr = argv[2]};
  TRY(uroce_device_open(&dev, &da));
  TRY(uroce_alloc_pd(dev, &pd));
  TRY(uroce_create_cq(dev, 16, NULL, NULL, &cq));
  TRY(uroce_reg_mr(pd, buf, sizeof(buf),
                   UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_WRITE, &mr));
  struct uroce_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq,
                                  .qp_type = UROCE_QPT_RC,
                                  .cap = {.max_send_wr = 4, .max_recv_wr = 4,
                                          .max_send_sge = 1, .max_recv_sge = 1}};
  TRY(uroce_create_qp(pd, &ia, &qp));

  struct info peer, me = {.qpn = uroce_qp_num(qp), .rkey = uroce_mr_rkey(mr),
                          .addr = (uintptr_t)buf};
  uroce_device_gid(dev, me.gid);
  int s = tcp(server ? NULL : argv[3]);
  if (s < 0 || write(s, &me, sizeof(me)) != sizeof(me) ||
      read(s, &peer, sizeof(peer)) != sizeof(peer)) {
    perror("exchange over TCP");
    return 1;
  }

  struct uroce_qp_attr a = {.qp_state = UROCE_QPS_INIT, .port_num = 1,
                            .qp_access_flags = UROCE_ACCESS_REMOTE_WRITE};
  TRY(uroce_modify_qp(qp, &a, UROCE_QP_STATE | UROCE_QP_PKEY_INDEX |
                              UROCE_QP_PORT | UROCE_QP_ACCESS_FLAGS));
  a = (struct uroce_qp_attr){.qp_state = UROCE_QPS_RTR,
                             .path_mtu = UROCE_MTU_1024,
                             .dest_qp_num = peer.qpn, .rq_psn = 0,
                             .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
                             .ah_attr = {.is_global = 1, .hop_limit = 64}};
  memcpy(a.ah_attr.dgid, peer.gid, 16);
  TRY(uroce_modify_qp(qp, &a, UROCE_QP_STATE | UROCE_QP_AV | UROCE_QP_PATH_MTU |
                              UROCE_QP_DEST_QPN | UROCE_QP_RQ_PSN |
                              UROCE_QP_MAX_DEST_RD_ATOMIC |
                              UROCE_QP_MIN_RNR_TIMER));
  a = (struct uroce_qp_attr){.qp_state = UROCE_QPS_RTS, .sq_psn = 0,
                             .timeout = 14, .retry_cnt = 6, .rnr_retry = 7,
                             .max_rd_atomic = 1};
  TRY(uroce_modify_qp(qp, &a, UROCE_QP_STATE | UROCE_QP_SQ_PSN |
                              UROCE_QP_TIMEOUT | UROCE_QP_RETRY_CNT |
                              UROCE_QP_RNR_RETRY | UROCE_QP_MAX_QP_RD_ATOMIC));

  char done;
  if (server) { /* the progress thread places the data; we just wait */
    if (read(s, &done, 1) != 1) return 1;
    printf("server: buffer now holds \"%s\"\n", buf);
  } else {
    snprintf(buf, sizeof(buf), "hello over RoCEv2 from %s", argv[2]);
    struct uroce_sge sge = {(uintptr_t)buf, (uint32_t)strlen(buf) + 1,
                            uroce_mr_lkey(mr)};
    struct uroce_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1,
                               .opcode = UROCE_WR_RDMA_WRITE,
                               .send_flags = UROCE_SEND_SIGNALED,
                               .wr.rdma = {peer.addr, peer.rkey}}, *bad;
    TRY(uroce_post_send(qp, &wr, &bad));
    struct uroce_wc wc;
    int n;
    while ((n = uroce_poll_cq(cq, 1, &wc)) == 0) {}
    TRY(n);
    printf("client: RDMA WRITE of %u bytes: %s\n", sge.length,
           uroce_wc_status_str(wc.status));
    if (write(s, "x", 1) != 1 || wc.status != UROCE_WC_SUCCESS) return 1;
  }
  close(s);
  uroce_destroy_qp(qp);
  uroce_dereg_mr(mr);
  uroce_destroy_cq(cq);
  uroce_dealloc_pd(pd);
  uroce_device_close(dev);
  return 0;
}
