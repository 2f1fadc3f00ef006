/* libibverbs drop-in: the extended verbs. QPs with the ibv_wr_* post API
 * (work requests are built in a per-QP batch between wr_start and
 * wr_complete, then posted as one list) and CQs polled with
 * start_poll/next_poll/end_poll and the read_* accessors. */
#include <stdlib.h>
#include <string.h>

#include "compat.h"

struct ibv_qp *uv_qp_new(struct ibv_context *context,
                         struct ibv_qp_init_attr_ex *init);
struct uv_cq *uv_cq_new(struct ibv_context *context, int cqe, void *cq_context,
                        struct ibv_comp_channel *channel);

static struct uv_qp *qp_of(struct ibv_qp_ex *x) {
  return (struct uv_qp *)(void *)x;
}

/* ---- ibv_wr_* ---- */

static void wr_start(struct ibv_qp_ex *x) {
  struct uv_qp *qp = qp_of(x);
  qp->nwr = 0;
  qp->wr_err = 0;
  qp->inl_used = 0;
}

static int flush(struct uv_qp *qp) {
  if (!qp->nwr)
    return 0;
  for (unsigned i = 0; i + 1 < qp->nwr; i++)
    qp->wr[i].next = &qp->wr[i + 1];
  qp->wr[qp->nwr - 1].next = NULL;
  struct uroce_send_wr *bad;
  int rv = uroce_post_send(qp->uqp, qp->wr, &bad);
  qp->nwr = 0;
  qp->inl_used = 0;
  return uv_errno(rv);
}

/* Starts a new WR. A batch that is full is posted first: a list longer
 * than UV_WR_BATCH is posted in parts (wr_abort then drops only the last
 * part). */
static struct uroce_send_wr *new_wr(struct uv_qp *qp, uint32_t opcode) {
  if (qp->nwr == UV_WR_BATCH) {
    int e = flush(qp);
    if (e && !qp->wr_err)
      qp->wr_err = e;
  }
  struct uroce_send_wr *w = &qp->wr[qp->nwr];
  memset(w, 0, sizeof(*w));
  w->wr_id = qp->qpx.wr_id;
  w->send_flags = qp->qpx.wr_flags & 0xF;
  w->opcode = opcode;
  w->sg_list = &qp->sge[(size_t)qp->nwr * UROCE_MAX_SGE];
  qp->nwr++;
  return w;
}

static struct uroce_send_wr *cur_wr(struct uv_qp *qp) {
  if (!qp->nwr) {
    qp->wr_err = EINVAL; /* a setter before any operation */
    return NULL;
  }
  return &qp->wr[qp->nwr - 1];
}

static void wr_send(struct ibv_qp_ex *x) {
  new_wr(qp_of(x), UROCE_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *x, __be32 imm) {
  new_wr(qp_of(x), UROCE_WR_SEND_WITH_IMM)->imm_data = imm;
}

static void wr_send_inv(struct ibv_qp_ex *x, uint32_t rkey) {
  new_wr(qp_of(x), UROCE_WR_SEND_WITH_INV)->invalidate_rkey = rkey;
}

static void wr_local_inv(struct ibv_qp_ex *x, uint32_t rkey) {
  new_wr(qp_of(x), UROCE_WR_LOCAL_INV)->invalidate_rkey = rkey;
}

/* Type 2 windows only, as with ibv_post_send. */
static void wr_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey,
                       const struct ibv_mw_bind_info *bi) {
  struct uv_qp *qp = qp_of(x);
  struct uroce_send_wr *w = new_wr(qp, UROCE_WR_BIND_MW);
  if (!w)
    return;
  struct uroce_send_wr u;
  memset(&u, 0, sizeof(u));
  if (!mw || mw->type != IBV_MW_TYPE_2 || !bi ||
      uv_bind_info(bi, mw, rkey, &u)) {
    if (!qp->wr_err)
      qp->wr_err = EINVAL;
    return;
  }
  w->wr.bind_mw = u.wr.bind_mw;
}

static void wr_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr) {
  struct uroce_send_wr *w = new_wr(qp_of(x), UROCE_WR_RDMA_WRITE);
  w->wr.rdma.rkey = rkey;
  w->wr.rdma.remote_addr = raddr;
}

static void wr_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey,
                              uint64_t raddr, __be32 imm) {
  struct uroce_send_wr *w = new_wr(qp_of(x), UROCE_WR_RDMA_WRITE_WITH_IMM);
  w->wr.rdma.rkey = rkey;
  w->wr.rdma.remote_addr = raddr;
  w->imm_data = imm;
}

static void wr_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr) {
  struct uroce_send_wr *w = new_wr(qp_of(x), UROCE_WR_RDMA_READ);
  w->wr.rdma.rkey = rkey;
  w->wr.rdma.remote_addr = raddr;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey,
                              uint64_t raddr, uint64_t compare, uint64_t swap) {
  struct uroce_send_wr *w = new_wr(qp_of(x), UROCE_WR_ATOMIC_CMP_AND_SWP);
  w->wr.atomic.rkey = rkey;
  w->wr.atomic.remote_addr = raddr;
  w->wr.atomic.compare_add = compare;
  w->wr.atomic.swap = swap;
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *x, uint32_t rkey,
                                uint64_t raddr, uint64_t add) {
  struct uroce_send_wr *w = new_wr(qp_of(x), UROCE_WR_ATOMIC_FETCH_AND_ADD);
  w->wr.atomic.rkey = rkey;
  w->wr.atomic.remote_addr = raddr;
  w->wr.atomic.compare_add = add;
}

static void wr_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr,
                       uint32_t length) {
  struct uroce_send_wr *w = cur_wr(qp_of(x));
  if (!w)
    return;
  w->sg_list[0] = (struct uroce_sge){addr, length, lkey};
  w->num_sge = 1;
}

static void wr_set_sge_list(struct ibv_qp_ex *x, size_t n,
                            const struct ibv_sge *sg) {
  struct uv_qp *qp = qp_of(x);
  struct uroce_send_wr *w = cur_wr(qp);
  if (!w)
    return;
  if (n > UROCE_MAX_SGE) {
    qp->wr_err = EINVAL;
    return;
  }
  memcpy(w->sg_list, sg, n * sizeof(*sg));
  w->num_sge = (int)n;
}

static void wr_set_inline_data_list(struct ibv_qp_ex *x, size_t n,
                                    const struct ibv_data_buf *buf) {
  struct uv_qp *qp = qp_of(x);
  struct uroce_send_wr *w = cur_wr(qp);
  if (!w)
    return;
  size_t len = 0;
  for (size_t i = 0; i < n; i++)
    len += buf[i].length;
  if (len > qp->max_inline) {
    qp->wr_err = EINVAL;
    return;
  }
  /* Copied now: the caller may reuse its buffers once this returns. */
  uint8_t *dst = qp->inl + (size_t)(qp->nwr - 1) * qp->max_inline;
  for (size_t i = 0, off = 0; i < n; off += buf[i].length, i++)
    memcpy(dst + off, buf[i].addr, buf[i].length);
  w->sg_list[0] = (struct uroce_sge){(uintptr_t)dst, (uint32_t)len, 0};
  w->num_sge = 1;
  w->send_flags |= UROCE_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t length) {
  struct ibv_data_buf b = {addr, length};
  wr_set_inline_data_list(x, 1, &b);
}

static void wr_set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah,
                           uint32_t remote_qpn, uint32_t remote_qkey) {
  struct uroce_send_wr *w = cur_wr(qp_of(x));
  if (!w)
    return;
  w->wr.ud.ah = UV_CONTAINER(ah, struct uv_ah, ah)->uah;
  w->wr.ud.remote_qpn = remote_qpn;
  w->wr.ud.remote_qkey = remote_qkey;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *x, uint32_t remote_srqn) {
  struct uroce_send_wr *w = cur_wr(qp_of(x));
  if (w)
    w->xrc_remote_srqn = remote_srqn;
}

static int wr_complete(struct ibv_qp_ex *x) {
  struct uv_qp *qp = qp_of(x);
  if (qp->wr_err) {
    qp->nwr = 0;
    return qp->wr_err;
  }
  return flush(qp);
}

static void wr_abort(struct ibv_qp_ex *x) {
  qp_of(x)->nwr = 0;
}

void uv_qp_ex_init(struct uv_qp *qp) {
  struct ibv_qp_ex *x = &qp->qpx;
  x->wr_start = wr_start;
  x->wr_complete = wr_complete;
  x->wr_abort = wr_abort;
  x->wr_send = wr_send;
  x->wr_send_imm = wr_send_imm;
  x->wr_send_inv = wr_send_inv;
  x->wr_local_inv = wr_local_inv;
  x->wr_bind_mw = wr_bind_mw;
  x->wr_rdma_write = wr_rdma_write;
  x->wr_rdma_write_imm = wr_rdma_write_imm;
  x->wr_rdma_read = wr_rdma_read;
  x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  x->wr_atomic_fetch_add = wr_atomic_fetch_add;
  x->wr_set_sge = wr_set_sge;
  x->wr_set_sge_list = wr_set_sge_list;
  x->wr_set_inline_data = wr_set_inline_data;
  x->wr_set_inline_data_list = wr_set_inline_data_list;
  x->wr_set_ud_addr = wr_set_ud_addr;
  x->wr_set_xrc_srqn = wr_set_xrc_srqn;
}

#define UV_SEND_OPS                                                            \
  (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |            \
   IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |                        \
   IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |              \
   IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV |        \
   IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW)

struct ibv_qp *uv_create_qp_ex(struct ibv_context *context,
                               struct ibv_qp_init_attr_ex *attr) {
  if (!attr) {
    errno = EINVAL;
    return NULL;
  }
  bool ops = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (ops && (attr->send_ops_flags & ~(uint64_t)UV_SEND_OPS)) {
    errno = EOPNOTSUPP; /* TSO */
    return NULL;
  }
  struct ibv_qp *q = uv_qp_new(context, attr);
  if (!q || !ops)
    return q;
  struct uv_qp *qp = (struct uv_qp *)(void *)q;
  qp->sge = calloc((size_t)UV_WR_BATCH * UROCE_MAX_SGE, sizeof(*qp->sge));
  if (qp->max_inline)
    qp->inl = malloc((size_t)UV_WR_BATCH * qp->max_inline);
  if (!qp->sge || (qp->max_inline && !qp->inl)) {
    ibv_destroy_qp(q);
    errno = ENOMEM;
    return NULL;
  }
  return q;
}

/* ---- extended CQs ---- */

static struct uv_cq *cq_of(struct ibv_cq_ex *x) {
  return (struct uv_cq *)(void *)x;
}

static int take(struct uv_cq *cq) {
  int n = uroce_poll_cq(cq->ucq, 1, &cq->cur);
  if (n < 0)
    return uv_errno(n);
  if (n == 0)
    return ENOENT;
  cq->cqx.status = (enum ibv_wc_status)cq->cur.status;
  cq->cqx.wr_id = cq->cur.wr_id;
  return 0;
}

static int start_poll(struct ibv_cq_ex *x, struct ibv_poll_cq_attr *attr) {
  if (attr && attr->comp_mask)
    return EINVAL;
  return take(cq_of(x));
}

static int next_poll(struct ibv_cq_ex *x) {
  return take(cq_of(x));
}

static void end_poll(struct ibv_cq_ex *x) {}

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *x) {
  return (enum ibv_wc_opcode)cq_of(x)->cur.opcode;
}
static uint32_t read_vendor_err(struct ibv_cq_ex *x) {
  return cq_of(x)->cur.vendor_err;
}
static uint32_t read_byte_len(struct ibv_cq_ex *x) {
  return cq_of(x)->cur.byte_len;
}
static __be32 read_imm_data(struct ibv_cq_ex *x) {
  return cq_of(x)->cur.imm_data;
}
static uint32_t read_qp_num(struct ibv_cq_ex *x) {
  return cq_of(x)->cur.qp_num;
}
static uint32_t read_src_qp(struct ibv_cq_ex *x) {
  return cq_of(x)->cur.src_qp;
}
static unsigned int read_wc_flags(struct ibv_cq_ex *x) {
  return cq_of(x)->cur.wc_flags;
}
static uint32_t read_slid(struct ibv_cq_ex *x) {
  return cq_of(x)->cur.slid;
}
static uint8_t read_sl(struct ibv_cq_ex *x) {
  return cq_of(x)->cur.sl;
}
static uint8_t read_dlid_path_bits(struct ibv_cq_ex *x) {
  return cq_of(x)->cur.dlid_path_bits;
}

void uv_cq_ex_init(struct uv_cq *cq) {
  struct ibv_cq_ex *x = &cq->cqx;
  x->start_poll = start_poll;
  x->next_poll = next_poll;
  x->end_poll = end_poll;
  x->read_opcode = read_opcode;
  x->read_vendor_err = read_vendor_err;
  x->read_byte_len = read_byte_len;
  x->read_imm_data = read_imm_data;
  x->read_qp_num = read_qp_num;
  x->read_src_qp = read_src_qp;
  x->read_wc_flags = read_wc_flags;
  x->read_slid = read_slid;
  x->read_sl = read_sl;
  x->read_dlid_path_bits = read_dlid_path_bits;
}

/* Completion timestamps, VLANs, flow tags and tag matching have no source
 * in uroce: asking for them fails with EOPNOTSUPP. */
#define UV_WC_FLAGS                                                            \
  (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |      \
   IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |           \
   IBV_WC_EX_WITH_DLID_PATH_BITS)

struct ibv_cq_ex *uv_create_cq_ex(struct ibv_context *context,
                                  struct ibv_cq_init_attr_ex *attr) {
  if (!attr || (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
                                              IBV_CQ_INIT_ATTR_MASK_PD))) {
    errno = EINVAL;
    return NULL;
  }
  /* A CQ may name a parent domain (its thread domain); only that. */
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
      (!attr->parent_domain ||
       !UV_CONTAINER(attr->parent_domain, struct uv_pd, pd)->parent_of)) {
    errno = EINVAL;
    return NULL;
  }
  if (attr->comp_vector >= (uint32_t)context->num_comp_vectors) {
    errno = EINVAL;
    return NULL;
  }
  if ((attr->wc_flags & ~(uint64_t)UV_WC_FLAGS) ||
      ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && attr->flags)) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  struct uv_cq *cq =
      uv_cq_new(context, (int)attr->cqe, attr->cq_context, attr->channel);
  return cq ? &cq->cqx : NULL;
}
