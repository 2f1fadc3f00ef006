/* The drop-in's XRC calls that pyverbs does not reach, checked through
 * libibverbs itself (run under `uroce run`): ibv_open_xrcd's file rules
 * across two contexts, ibv_open_qp by number and domain, a target QP
 * living while a handle to it does, a SEND through the opened handle's
 * QP, and EBUSY for a domain, CQ or SRQ... in use. Exit 0 when all hold;
 * else the first that did not, on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "xrc_check: line %d: %s (errno %d)\n", __LINE__, #c,     \
              errno);                                                          \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static struct ibv_xrcd *open_x(struct ibv_context *c, int fd, int oflags) {
  struct ibv_xrcd_init_attr a = {.comp_mask = IBV_XRCD_INIT_ATTR_FD |
                                              IBV_XRCD_INIT_ATTR_OFLAGS,
                                 .fd = fd,
                                 .oflags = oflags};
  return ibv_open_xrcd(c, &a);
}

static void to_rts(struct ibv_qp *qp, uint32_t dqpn, union ibv_gid *gid,
                   int access) {
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access};
  CHECK(!ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                           IBV_QP_ACCESS_FLAGS));
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dqpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = *gid;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.port_num = 1;
  CHECK(!ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                           IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  CHECK(!ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN |
                           IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_MAX_QP_RD_ATOMIC));
}

static void poll1(struct ibv_cq *cq, struct ibv_wc *wc) {
  for (int i = 0; i < 10000000; i++) {
    int n = ibv_poll_cq(cq, 1, wc);
    CHECK(n >= 0);
    if (n == 1)
      return;
  }
  CHECK(!"a completion");
}

int main(void) {
  struct ibv_device **l = ibv_get_device_list(NULL);
  CHECK(l && l[0]);
  struct ibv_context *c1 = ibv_open_device(l[0]), *c2 = ibv_open_device(l[0]);
  CHECK(c1 && c2);
  char path[] = "/tmp/uroce-xrc-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  unlink(path);

  /* The file's rules: no domain yet needs O_CREAT; O_EXCL refuses one
   * that exists; a bad comp_mask or oflag is refused. */
  errno = 0;
  CHECK(!open_x(c1, fd, 0) && errno == EINVAL);
  struct ibv_xrcd *x1 = open_x(c1, fd, O_CREAT);
  CHECK(x1);
  errno = 0;
  CHECK(!open_x(c2, fd, O_CREAT | O_EXCL) && errno == EINVAL);
  struct ibv_xrcd *x2 = open_x(c2, fd, 0); /* the same domain */
  CHECK(x2 && x2 != x1);
  struct ibv_xrcd *xp = open_x(c1, -1, O_CREAT); /* a private one */
  CHECK(xp);
  struct ibv_xrcd_init_attr bad = {
      .comp_mask = IBV_XRCD_INIT_ATTR_RESERVED, .fd = -1, .oflags = O_CREAT};
  errno = 0;
  CHECK(!ibv_open_xrcd(c1, &bad) && errno == EOPNOTSUPP);

  struct ibv_pd *pd = ibv_alloc_pd(c1);
  struct ibv_cq *cq = ibv_create_cq(c1, 16, NULL, NULL, 0);
  static char buf[4096];
  struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
  CHECK(pd && cq && mr);
  struct ibv_srq_init_attr_ex sa = {.attr = {.max_wr = 4, .max_sge = 1},
                                    .comp_mask = IBV_SRQ_INIT_ATTR_TYPE |
                                                 IBV_SRQ_INIT_ATTR_PD |
                                                 IBV_SRQ_INIT_ATTR_XRCD,
                                    .srq_type = IBV_SRQT_XRC,
                                    .pd = pd,
                                    .xrcd = x1};
  errno = 0;
  CHECK(!ibv_create_srq_ex(c1, &sa) && errno == EINVAL); /* no CQ */
  sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
  sa.cq = cq;
  struct ibv_srq *srq = ibv_create_srq_ex(c1, &sa);
  CHECK(srq);
  uint32_t srqn = 0;
  CHECK(!ibv_get_srq_num(srq, &srqn) && srqn);

  /* A target QP made in the first context, opened in the second by its
   * number and the domain (any handle of it). */
  struct ibv_qp_init_attr_ex ta = {.qp_type = IBV_QPT_XRC_RECV,
                                   .comp_mask = IBV_QP_INIT_ATTR_XRCD,
                                   .xrcd = x1};
  struct ibv_qp *tgt = ibv_create_qp_ex(c1, &ta);
  CHECK(tgt && tgt->qp_type == IBV_QPT_XRC_RECV && !tgt->pd);
  struct ibv_qp_open_attr oa = {.comp_mask = IBV_QP_OPEN_ATTR_NUM |
                                             IBV_QP_OPEN_ATTR_XRCD |
                                             IBV_QP_OPEN_ATTR_TYPE,
                                .qp_num = tgt->qp_num,
                                .xrcd = xp,
                                .qp_type = IBV_QPT_XRC_RECV};
  errno = 0;
  CHECK(!ibv_open_qp(c2, &oa) && errno == EINVAL); /* another domain */
  oa.xrcd = x2;
  struct ibv_qp *opened = ibv_open_qp(c2, &oa);
  CHECK(opened && opened->qp_num == tgt->qp_num);

  /* In use: the domain (its last open with objects), the CQ by the XRC
   * SRQ. The first context's handle of a shared domain closes. */
  CHECK(ibv_close_xrcd(x2) == 0);
  CHECK(ibv_destroy_cq(cq) == EBUSY);
  x2 = NULL;
  CHECK(ibv_close_xrcd(x1) == EBUSY);

  /* The creator's handle goes; the opened one keeps the QP. A SEND from
   * an initiator reaches the SRQ through it. */
  uint32_t tqpn = tgt->qp_num;
  CHECK(ibv_destroy_qp(tgt) == 0);
  struct ibv_qp_init_attr_ex ia = {
      .qp_type = IBV_QPT_XRC_SEND,
      .comp_mask = IBV_QP_INIT_ATTR_PD,
      .pd = pd,
      .send_cq = cq,
      .cap = {.max_send_wr = 4, .max_send_sge = 1}};
  struct ibv_qp *ini = ibv_create_qp_ex(c1, &ia);
  CHECK(ini);
  union ibv_gid gid;
  CHECK(!ibv_query_gid(c1, 1, 1, &gid));
  to_rts(opened, ini->qp_num, &gid, IBV_ACCESS_LOCAL_WRITE);
  to_rts(ini, tqpn, &gid, 0);
  struct ibv_sge rs = {(uintptr_t)buf, 2048, mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 7, .sg_list = &rs, .num_sge = 1}, *rbad;
  CHECK(!ibv_post_srq_recv(srq, &rwr, &rbad));
  errno = 0;
  CHECK(ibv_post_recv(opened, &rwr, &rbad) == EINVAL); /* no RQ of its own */
  memcpy(buf + 2048, "xrc through an opened target QP", 32);
  struct ibv_sge ss = {(uintptr_t)buf + 2048, 32, mr->lkey};
  struct ibv_send_wr swr = {.wr_id = 8,
                            .sg_list = &ss,
                            .num_sge = 1,
                            .opcode = IBV_WR_SEND,
                            .send_flags = IBV_SEND_SIGNALED},
                     *sbad;
  swr.qp_type.xrc.remote_srqn = srqn;
  CHECK(!ibv_post_send(ini, &swr, &sbad));
  struct ibv_wc wc[2];
  poll1(cq, &wc[0]);
  poll1(cq, &wc[1]);
  int r = wc[0].wr_id == 7 ? 0 : 1;
  CHECK(wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS);
  CHECK(wc[r].wr_id == 7 && wc[r].qp_num == tqpn && wc[r].byte_len == 32 &&
        wc[r].opcode == IBV_WC_RECV && wc[!r].wr_id == 8);
  CHECK(!memcmp(buf, "xrc through an opened target QP", 32));

  /* Both ends back to RESET and up again (they have no CQ of their own
   * to clean, or one). */
  struct ibv_qp_attr ra = {.qp_state = IBV_QPS_RESET};
  CHECK(!ibv_modify_qp(opened, &ra, IBV_QP_STATE));
  CHECK(!ibv_modify_qp(ini, &ra, IBV_QP_STATE));
  to_rts(opened, ini->qp_num, &gid, IBV_ACCESS_LOCAL_WRITE);

  /* Everything goes, in an order where each is free when it goes. */
  CHECK(ibv_destroy_qp(opened) == 0);
  CHECK(ibv_destroy_qp(ini) == 0);
  CHECK(ibv_destroy_srq(srq) == 0);
  CHECK(ibv_close_xrcd(x1) == 0);
  CHECK(ibv_close_xrcd(xp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(!ibv_close_device(c2) && !ibv_close_device(c1));
  ibv_free_device_list(l);
  close(fd);
  puts("xrc_check: ok");
  return 0;
}
