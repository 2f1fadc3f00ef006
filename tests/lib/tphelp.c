#include "tphelp.h"

#include <stdlib.h>
#include <string.h>

void tp_opts_default(struct tp_opts *o) {
  memset(o, 0, sizeof(*o));
  o->type = UROCE_QPT_RC;
  o->mtu = UROCE_MTU_1024;
  o->timeout = 10;
  o->retry_cnt = 7;
  o->rnr_retry = 7;
  o->min_rnr_timer = 1;
  o->max_rd_atomic = 4;
  o->access = UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_WRITE |
              UROCE_ACCESS_REMOTE_READ | UROCE_ACCESS_REMOTE_ATOMIC;
  o->max_send_wr = 256;
  o->max_recv_wr = 256;
  o->max_sge = 16;
  o->max_inline = 256;
  o->memlen = 1 << 20;
  o->mr_access = UROCE_ACCESS_ALL;
  o->cqe = 4096;
  o->qkey = 0x11111111;
}

int tp_end_init(struct tp_end *e, struct uroce_eng *eng, const uint8_t gid[16],
                const struct tp_opts *o) {
  int rc;
  memset(e, 0, sizeof(*e));
  e->eng = eng;
  memcpy(e->gid, gid, 16);
  if ((rc = uroce_eng_pd_new(eng, &e->pd)))
    return rc;
  if ((rc = uroce_eng_cq_new(eng, o->cqe, &e->scq)) ||
      (rc = uroce_eng_cq_new(eng, o->cqe, &e->rcq)))
    return rc;
  e->memlen = o->memlen;
  if (o->phantom_mem) {
    rc = uroce_eng_mr_reg(e->pd, (void *)(uintptr_t)0x100000000ull, o->memlen,
                          o->mr_access, &e->mr);
  } else if (o->memlen) {
    e->mem = calloc(1, o->memlen);
    if (!e->mem)
      return -12;
    rc = uroce_eng_mr_reg(e->pd, e->mem, o->memlen, o->mr_access, &e->mr);
  }
  if (rc)
    return rc;
  if (o->use_srq) {
    struct uroce_srq_attr sa = {.max_wr = o->max_recv_wr,
                                .max_sge = o->max_sge,
                                .srq_limit = o->srq_limit};
    if ((rc = uroce_eng_srq_new(e->pd, &sa, &e->srq)))
      return rc;
  }
  struct uroce_qp_init_attr ia = {
      .send_cq = e->scq,
      .recv_cq = e->rcq,
      .srq = e->srq,
      .cap = {.max_send_wr = o->max_send_wr,
              .max_recv_wr = o->max_recv_wr,
              .max_send_sge = o->max_sge,
              .max_recv_sge = o->max_sge,
              .max_inline_data = o->max_inline},
      .qp_type = o->type,
  };
  return uroce_eng_qp_new(e->pd, &ia, &e->qp);
}

void tp_end_free(struct tp_end *e) {
  if (e->qp)
    uroce_eng_qp_del(e->qp);
  if (e->srq)
    uroce_eng_srq_del(e->srq);
  if (e->mr && e->mr->state != MR_FREE)
    uroce_eng_mr_dereg(e->mr);
  if (e->scq)
    uroce_eng_cq_del(e->scq);
  if (e->rcq)
    uroce_eng_cq_del(e->rcq);
  if (e->pd)
    uroce_eng_pd_del(e->pd);
  free(e->mem);
  memset(e, 0, sizeof(*e));
}

int tp_bring_up(struct tp_end *e, const struct tp_end *peer,
                const struct tp_opts *o) {
  /* uroce_eng_qp_connect gives each step what the QP's type requires (UD:
   * the qkey, and no peer). */
  struct uroce_qp_attr a = {.qp_state = o->stop_state ? (uint32_t)o->stop_state
                                                      : UROCE_QPS_RTS,
                            .port_num = 1,
                            .qp_access_flags = o->access,
                            .qkey = o->qkey,
                            .path_mtu = o->mtu,
                            .rq_psn = 0xFFFFF0, /* near the wrap on purpose */
                            .sq_psn = 0xFFFFF0,
                            .max_dest_rd_atomic = 16,
                            .min_rnr_timer = o->min_rnr_timer,
                            .ah_attr.is_global = 1,
                            .timeout = o->timeout,
                            .retry_cnt = o->retry_cnt,
                            .rnr_retry = o->rnr_retry,
                            .max_rd_atomic = o->max_rd_atomic};
  if (peer) {
    a.dest_qp_num = uroce_qp_num(peer->qp);
    memcpy(a.ah_attr.dgid, peer->gid, 16);
  }
  return uroce_eng_qp_connect(e->qp, &a);
}

int tp_connect(struct tp_end *a, struct tp_end *b, const struct tp_opts *o) {
  int rc = tp_bring_up(a, b, o);
  return rc ? rc : tp_bring_up(b, a, o);
}

int tp_post_send(struct tp_end *e, uint32_t opcode, uint64_t wr_id,
                 uint64_t off, uint32_t len, uint32_t flags,
                 uint64_t remote_addr, uint32_t rkey) {
  struct uroce_sge sge = {
      .addr = e->mr->iova + off, .length = len, .lkey = e->mr->lkey};
  struct uroce_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = flags;
  if (opcode == UROCE_WR_ATOMIC_CMP_AND_SWP ||
      opcode == UROCE_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = remote_addr;
    wr.wr.atomic.rkey = rkey;
  } else {
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
  }
  return uroce_eng_qp_post_send(e->qp, &wr, &bad);
}

int tp_post_recv(struct tp_end *e, uint64_t wr_id, uint64_t off, uint32_t len) {
  struct uroce_sge sge = {
      .addr = e->mr->iova + off, .length = len, .lkey = e->mr->lkey};
  struct uroce_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1};
  struct uroce_recv_wr *bad;
  if (e->srq)
    return uroce_eng_srq_post_recv(e->srq, &wr, &bad);
  return uroce_eng_qp_post_recv(e->qp, &wr, &bad);
}

int tp_poll(struct uroce_cq *cq, struct uroce_wc *wc, int n) {
  int k = uroce_eng_cq_poll(cq, n, wc);
  return k < 0 ? 0 : k;
}
