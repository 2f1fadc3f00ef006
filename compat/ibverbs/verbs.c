/* libibverbs drop-in: protection domains, memory regions, completion
 * channels and queues, shared receive queues, queue pairs, address handles,
 * the data path (post/poll, called inline through context->ops) and
 * asynchronous events, each over the uroce object of the same name. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"

/* Work requests, scatter/gather entries and completions have the same
 * layout in uroce and libibverbs, so lists pass through without copying. */
_Static_assert(sizeof(struct ibv_sge) == sizeof(struct uroce_sge), "sge");
_Static_assert(offsetof(struct ibv_sge, lkey) ==
                   offsetof(struct uroce_sge, lkey),
               "sge.lkey");
_Static_assert(sizeof(struct ibv_recv_wr) == sizeof(struct uroce_recv_wr),
               "recv_wr");
_Static_assert(offsetof(struct ibv_recv_wr, next) ==
                       offsetof(struct uroce_recv_wr, next) &&
                   offsetof(struct ibv_recv_wr, sg_list) ==
                       offsetof(struct uroce_recv_wr, sg_list) &&
                   offsetof(struct ibv_recv_wr, num_sge) ==
                       offsetof(struct uroce_recv_wr, num_sge),
               "recv_wr fields");
_Static_assert(sizeof(struct ibv_wc) == sizeof(struct uroce_wc), "wc");
_Static_assert(offsetof(struct ibv_wc, status) ==
                       offsetof(struct uroce_wc, status) &&
                   offsetof(struct ibv_wc, byte_len) ==
                       offsetof(struct uroce_wc, byte_len) &&
                   offsetof(struct ibv_wc, imm_data) ==
                       offsetof(struct uroce_wc, imm_data) &&
                   offsetof(struct ibv_wc, wc_flags) ==
                       offsetof(struct uroce_wc, wc_flags) &&
                   offsetof(struct ibv_wc, pkey_index) ==
                       offsetof(struct uroce_wc, pkey_index) &&
                   offsetof(struct ibv_wc, dlid_path_bits) ==
                       offsetof(struct uroce_wc, dlid_path_bits),
               "wc fields");

static struct uroce_device *udev_of(struct ibv_context *c) {
  return uv_ctx(c)->udev;
}

/* ---- protection domains ---- */

UV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context) {
  struct uv_pd *pd = calloc(1, sizeof(*pd));
  if (!pd) {
    errno = ENOMEM;
    return NULL;
  }
  int rv = uroce_alloc_pd(udev_of(context), &pd->upd);
  if (rv < 0) {
    free(pd);
    return uv_fail(rv);
  }
  pd->pd.context = context;
  return &pd->pd;
}

UV_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd) {
  struct uv_pd *pd = UV_CONTAINER(ibpd, struct uv_pd, pd);
  if (pd->parent_of) { /* a parent domain: its PD stays */
    __atomic_sub_fetch(&pd->parent_of->children, 1, __ATOMIC_RELAXED);
    free(pd);
    return 0;
  }
  if (__atomic_load_n(&pd->children, __ATOMIC_RELAXED))
    return EBUSY;
  int rv = uroce_dealloc_pd(pd->upd);
  if (rv < 0)
    return uv_errno(rv);
  free(pd);
  return 0;
}

/* ---- thread and parent domains ---- */

/* uroce serialises a device's work itself, so a thread domain is a
 * handle that promises nothing more. */
static struct ibv_td *op_alloc_td(struct ibv_context *context,
                                  struct ibv_td_init_attr *attr) {
  if (!attr || attr->comp_mask) {
    errno = EINVAL;
    return NULL;
  }
  struct ibv_td *td = calloc(1, sizeof(*td));
  if (!td) {
    errno = ENOMEM;
    return NULL;
  }
  td->context = context;
  return td;
}

static int op_dealloc_td(struct ibv_td *td) {
  free(td);
  return 0;
}

/* A parent domain stands for its protection domain wherever a PD is
 * taken. Its allocators are accepted and never called: uroce's queues
 * live in the engine, not in buffers the program could place (mlx5 calls
 * them for its rings; a provider with nothing to allocate does not). */
static struct ibv_pd *
op_alloc_parent_domain(struct ibv_context *context,
                       struct ibv_parent_domain_init_attr *attr) {
  if (!attr || !attr->pd ||
      (attr->comp_mask & ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
                                     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)) ||
      ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
       (!attr->alloc || !attr->free))) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_pd *base = UV_CONTAINER(attr->pd, struct uv_pd, pd);
  if (base->parent_of || attr->pd->context != context) {
    errno = EINVAL; /* a parent domain over a parent domain */
    return NULL;
  }
  struct uv_pd *pd = calloc(1, sizeof(*pd));
  if (!pd) {
    errno = ENOMEM;
    return NULL;
  }
  pd->pd.context = context;
  pd->upd = base->upd;
  pd->parent_of = base;
  pd->td = attr->td;
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
    pd->pd_context = attr->pd_context;
  __atomic_add_fetch(&base->children, 1, __ATOMIC_RELAXED);
  return &pd->pd;
}

/* ---- memory regions ---- */

/* Access bits uroce honours; the others are hints (relaxed ordering, huge
 * pages, optional-range bits) that change nothing without a real NIC.
 * IBV_ACCESS_ON_DEMAND is accepted: registered pages are locked (mem/pin.c)
 * and every remote access probes them first, so memory unmapped under a
 * region answers an access error either way; an implicit on-demand
 * registration of the whole address space is not offered
 * (IBV_ODP_SUPPORT_IMPLICIT unset). */
#define UV_ACCESS_UNSUPPORTED IBV_ACCESS_ZERO_BASED

/* A registration of [addr, addr + length) that work requests and peers
 * name from iova on, after the checks every registration shares. */
static struct uv_mr *new_mr(struct ibv_pd *ibpd, void *addr, size_t length,
                            uint64_t iova, unsigned access) {
  /* Remote write or atomic access requires local write, as on a NIC. */
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_pd *pd = UV_CONTAINER(ibpd, struct uv_pd, pd);
  struct uv_mr *mr = calloc(1, sizeof(*mr));
  if (!mr) {
    errno = ENOMEM;
    return NULL;
  }
  int rv = uroce_reg_mr_iova(pd->upd, addr, length, iova,
                             access & UROCE_ACCESS_ALL, &mr->umr);
  if (rv < 0) {
    free(mr);
    return uv_fail(rv);
  }
  mr->mr.context = ibpd->context;
  mr->mr.pd = ibpd;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.lkey = uroce_mr_lkey(mr->umr);
  mr->mr.rkey = uroce_mr_rkey(mr->umr);
  mr->mr.handle = mr->mr.lkey;
  mr->access = access;
  return mr;
}

static struct ibv_mr *reg_mr(struct ibv_pd *ibpd, void *addr, size_t length,
                             uint64_t iova, unsigned access) {
  if (!ibpd) {
    errno = EINVAL;
    return NULL;
  }
  if ((access & IBV_ACCESS_ON_DEMAND) && !addr && length == SIZE_MAX) {
    errno = EOPNOTSUPP; /* implicit ODP */
    return NULL;
  }
  if (access & UV_ACCESS_UNSUPPORTED) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  struct uv_mr *mr = new_mr(ibpd, addr, length, iova, access);
  return mr ? &mr->mr : NULL;
}

#undef ibv_reg_mr
UV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
                                    size_t length, int access) {
  return reg_mr(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

#undef ibv_reg_mr_iova
UV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
                                         size_t length, uint64_t iova,
                                         int access) {
  return reg_mr(pd, addr, length, iova, (unsigned)access);
}

UV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
                                          size_t length, uint64_t iova,
                                          unsigned int access) {
  return reg_mr(pd, addr, length, iova, access);
}

UV_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr) {
  struct uv_mr *mr = UV_CONTAINER(ibmr, struct uv_mr, mr);
  int rv = uroce_dereg_mr(mr->umr);
  if (rv < 0)
    return uv_errno(rv);
  if (mr->dm) {
    struct uv_context *ctx = uv_ctx(ibmr->context);
    pthread_mutex_lock(&ctx->lock);
    mr->dm->mrs--;
    pthread_mutex_unlock(&ctx->lock);
  }
  free(mr);
  return 0;
}

/* ---- device memory ---- */

/* Copies are in whole 4-byte words inside the allocation, as mlx5's. */
static bool dm_range_ok(const struct uv_dm *dm, uint64_t off, size_t len) {
  return off % 4 == 0 && len % 4 == 0 && off <= dm->len && len <= dm->len - off;
}

static int dm_copy_to(struct ibv_dm *ibdm, uint64_t off, const void *src,
                      size_t len) {
  struct uv_dm *dm = UV_CONTAINER(ibdm, struct uv_dm, dm);
  if (!dm_range_ok(dm, off, len) || (len && !src))
    return EINVAL;
  if (len)
    memcpy(dm->buf + off, src, len);
  return 0;
}

static int dm_copy_from(void *dst, struct ibv_dm *ibdm, uint64_t off,
                        size_t len) {
  struct uv_dm *dm = UV_CONTAINER(ibdm, struct uv_dm, dm);
  if (!dm_range_ok(dm, off, len) || (len && !dst))
    return EINVAL;
  if (len)
    memcpy(dst, dm->buf + off, len);
  return 0;
}

static struct ibv_dm *op_alloc_dm(struct ibv_context *context,
                                  struct ibv_alloc_dm_attr *attr) {
  if (!context || !attr || attr->comp_mask || !attr->length ||
      attr->length > UV_DM_MAX || attr->log_align_req > 12) {
    errno = attr && attr->length > UV_DM_MAX ? ENOMEM : EINVAL;
    return NULL;
  }
  struct uv_context *ctx = uv_ctx(context);
  size_t len = (attr->length + 3) & ~(size_t)3;
  pthread_mutex_lock(&ctx->lock);
  bool room = len <= UV_DM_MAX - ctx->dm_used;
  if (room)
    ctx->dm_used += len;
  pthread_mutex_unlock(&ctx->lock);
  if (!room) {
    errno = ENOMEM;
    return NULL;
  }
  struct uv_dm *dm = calloc(1, sizeof(*dm));
  size_t align =
      (size_t)1 << (attr->log_align_req > 6 ? attr->log_align_req : 6);
  void *buf = NULL;
  if (!dm || posix_memalign(&buf, align, len)) {
    free(dm);
    pthread_mutex_lock(&ctx->lock);
    ctx->dm_used -= len;
    pthread_mutex_unlock(&ctx->lock);
    errno = ENOMEM;
    return NULL;
  }
  memset(buf, 0, len);
  dm->buf = buf;
  dm->len = len;
  dm->dm.context = context;
  dm->dm.memcpy_to_dm = dm_copy_to;
  dm->dm.memcpy_from_dm = dm_copy_from;
  dm->dm.handle = (uint32_t)((uintptr_t)dm >> 4);
  return &dm->dm;
}

/* EBUSY while a region lies over it. */
static int op_free_dm(struct ibv_dm *ibdm) {
  if (!ibdm)
    return EINVAL;
  struct uv_dm *dm = UV_CONTAINER(ibdm, struct uv_dm, dm);
  struct uv_context *ctx = uv_ctx(ibdm->context);
  pthread_mutex_lock(&ctx->lock);
  if (dm->mrs) {
    pthread_mutex_unlock(&ctx->lock);
    return EBUSY;
  }
  ctx->dm_used -= dm->len;
  pthread_mutex_unlock(&ctx->lock);
  free(dm->buf);
  free(dm);
  return 0;
}

/* A zero-based region over [dm_offset, dm_offset + length) of dm: work
 * requests and peers name its bytes from 0. */
static struct ibv_mr *op_reg_dm_mr(struct ibv_pd *ibpd, struct ibv_dm *ibdm,
                                   uint64_t dm_offset, size_t length,
                                   unsigned access) {
  if (!ibpd || !ibdm || !(access & IBV_ACCESS_ZERO_BASED) ||
      (access & ~(unsigned)(UROCE_ACCESS_ALL | IBV_ACCESS_ZERO_BASED))) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_dm *dm = UV_CONTAINER(ibdm, struct uv_dm, dm);
  if (dm_offset > dm->len || length > dm->len - dm_offset) {
    errno = EINVAL;
    return NULL;
  }
  /* Counted first: a concurrent ibv_free_dm sees the region coming. */
  struct uv_context *ctx = uv_ctx(ibpd->context);
  pthread_mutex_lock(&ctx->lock);
  dm->mrs++;
  pthread_mutex_unlock(&ctx->lock);
  struct uv_mr *mr = new_mr(ibpd, dm->buf + dm_offset, length, 0, access);
  if (!mr) {
    pthread_mutex_lock(&ctx->lock);
    dm->mrs--;
    pthread_mutex_unlock(&ctx->lock);
    return NULL;
  }
  mr->dm = dm;
  mr->mr.addr = NULL; /* zero-based */
  return &mr->mr;
}

/* Changes the registration in place (translation, PD, access), keeping
 * its keys as rxe and mlx5 do, after the same checks as a registration. */
UV_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd,
                           void *addr, size_t length, int access) {
  if (!ibmr || !flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
      ((flags & IBV_REREG_MR_CHANGE_PD) && !pd) ||
      ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length))) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  struct uv_mr *mr = UV_CONTAINER(ibmr, struct uv_mr, mr);
  if (mr->dm) { /* over device memory: only ibv_reg_dm_mr places it */
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  struct ibv_pd *npd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : ibmr->pd;
  void *naddr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? addr : ibmr->addr;
  size_t nlen =
      (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? length : ibmr->length;
  unsigned nacc =
      (flags & IBV_REREG_MR_CHANGE_ACCESS) ? (unsigned)access : mr->access;
  if ((nacc & UV_ACCESS_UNSUPPORTED) ||
      ((nacc & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
       !(nacc & IBV_ACCESS_LOCAL_WRITE))) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  int rv = uroce_rereg_mr(mr->umr, UV_CONTAINER(npd, struct uv_pd, pd)->upd,
                          naddr, nlen, nacc & UROCE_ACCESS_ALL);
  if (rv < 0) {
    errno = uv_errno(rv);
    return IBV_REREG_MR_ERR_CMD;
  }
  mr->access = nacc;
  ibmr->pd = npd;
  ibmr->addr = naddr;
  ibmr->length = nlen;
  return 0;
}

/* ---- memory windows ---- */

static struct ibv_mw *op_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type) {
  if (!ibpd || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_mw *mw = calloc(1, sizeof(*mw));
  if (!mw) {
    errno = ENOMEM;
    return NULL;
  }
  int rv = uroce_alloc_mw(UV_CONTAINER(ibpd, struct uv_pd, pd)->upd, (int)type,
                          &mw->umw);
  if (rv < 0) {
    free(mw);
    return uv_fail(rv);
  }
  mw->mw.context = ibpd->context;
  mw->mw.pd = ibpd;
  mw->mw.rkey = uroce_mw_rkey(mw->umw);
  mw->mw.handle = mw->mw.rkey >> 8;
  mw->mw.type = type;
  return &mw->mw;
}

static int op_dealloc_mw(struct ibv_mw *ibmw) {
  if (!ibmw)
    return EINVAL;
  struct uv_mw *mw = UV_CONTAINER(ibmw, struct uv_mw, mw);
  int rv = uroce_dealloc_mw(mw->umw);
  if (rv < 0)
    return uv_errno(rv);
  free(mw);
  return 0;
}

/* A bind's fields as uroce takes them. Local write means nothing for a
 * window (mlx5 ignores it, pyverbs' tests pass it); zero-based windows
 * are not offered. */
int uv_bind_info(const struct ibv_mw_bind_info *bi, struct ibv_mw *ibmw,
                 uint32_t rkey, struct uroce_send_wr *u) {
  if (!ibmw || (bi->mw_access_flags &
                ~(unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                            IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
    return EINVAL;
  if (!bi->mr && bi->length)
    return EINVAL;
  u->opcode = UROCE_WR_BIND_MW;
  u->wr.bind_mw.mw = UV_CONTAINER(ibmw, struct uv_mw, mw)->umw;
  u->wr.bind_mw.mr =
      bi->mr ? UV_CONTAINER(bi->mr, struct uv_mr, mr)->umr : NULL;
  u->wr.bind_mw.addr = bi->addr;
  u->wr.bind_mw.length = bi->length;
  u->wr.bind_mw.access =
      bi->mw_access_flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_REMOTE_ATOMIC);
  u->wr.bind_mw.rkey = rkey;
  return 0;
}

/* Type 1 windows are bound by this verb: a BIND_MW work request on qp's
 * send queue with the next key portion, which the window keeps once the
 * request is posted (its completion says whether the bind took). */
static int op_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *ibmw,
                      struct ibv_mw_bind *b) {
  if (!ibqp || !ibmw || !b || ibmw->type != IBV_MW_TYPE_1)
    return EINVAL;
  struct uroce_send_wr u, *bad;
  memset(&u, 0, sizeof(u));
  uint32_t rkey = ibv_inc_rkey(ibmw->rkey);
  int e = uv_bind_info(&b->bind_info, ibmw, rkey, &u);
  if (e)
    return e;
  u.wr_id = b->wr_id;
  u.send_flags = b->send_flags & 0xF;
  int rv = uroce_post_send(((struct uv_qp *)(void *)ibqp)->uqp, &u, &bad);
  if (rv < 0)
    return uv_errno(rv);
  ibmw->rkey = rkey;
  return 0;
}

/* Prefetching is a hint: uroce takes no page faults to avoid. The
 * arguments are checked as a provider checks them. */
static int op_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
                        uint32_t flags, struct ibv_sge *sg_list,
                        uint32_t num_sge) {
  if (!pd || !sg_list || !num_sge ||
      (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
       advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
       advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) ||
      (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH))
    return EINVAL;
  return 0;
}

/* ---- completion channels ---- */

UV_EXPORT struct ibv_comp_channel *
ibv_create_comp_channel(struct ibv_context *context) {
  struct uv_channel *ch = calloc(1, sizeof(*ch));
  if (!ch) {
    errno = ENOMEM;
    return NULL;
  }
  int rv = uroce_create_comp_channel(udev_of(context), &ch->uch);
  if (rv < 0) {
    free(ch);
    return uv_fail(rv);
  }
  ch->ch.context = context;
  ch->ch.fd = uroce_comp_channel_fd(ch->uch);
  return &ch->ch;
}

UV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ibch) {
  struct uv_channel *ch = UV_CONTAINER(ibch, struct uv_channel, ch);
  int rv = uroce_destroy_comp_channel(ch->uch);
  if (rv < 0) {
    errno = uv_errno(rv);
    return -1;
  }
  free(ch);
  return 0;
}

UV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ibch,
                               struct ibv_cq **cq, void **cq_context) {
  struct uv_channel *ch = UV_CONTAINER(ibch, struct uv_channel, ch);
  struct uroce_cq *ucq;
  void *uctx;
  int rv = uroce_get_cq_event(ch->uch, &ucq, &uctx);
  if (rv < 0) {
    errno = uv_errno(rv);
    return -1;
  }
  struct uv_cq *c = uctx;
  *cq = ibv_cq_ex_to_cq(&c->cqx);
  if (cq_context)
    *cq_context = c->cqx.cq_context;
  return 0;
}

UV_EXPORT void ibv_ack_cq_events(struct ibv_cq *ibcq, unsigned int nevents) {
  struct uv_cq *cq = (struct uv_cq *)(void *)ibcq;
  if (ibcq->channel && nevents) /* a CQ without a channel has no events */
    uroce_ack_cq_events(cq->ucq, nevents);
}

/* ---- completion queues ---- */

struct uv_cq *uv_cq_new(struct ibv_context *context, int cqe, void *cq_context,
                        struct ibv_comp_channel *channel) {
  if (!context || cqe <= 0 || cqe > (1 << 22) - 1) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_cq *cq = calloc(1, sizeof(*cq));
  if (!cq) {
    errno = ENOMEM;
    return NULL;
  }
  struct uroce_comp_channel *uch =
      channel ? UV_CONTAINER(channel, struct uv_channel, ch)->uch : NULL;
  int rv = uroce_create_cq(udev_of(context), (uint32_t)cqe, uch, cq, &cq->ucq);
  if (rv < 0) {
    free(cq);
    return uv_fail(rv);
  }
  struct ibv_cq_ex *x = &cq->cqx;
  x->context = context;
  x->channel = channel;
  x->cq_context = cq_context;
  x->cqe = cqe;
  pthread_mutex_init(&x->mutex, NULL);
  pthread_cond_init(&x->cond, NULL);
  uv_cq_ex_init(cq);
  if (channel)
    __atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_RELAXED);
  return cq;
}

UV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
                                       void *cq_context,
                                       struct ibv_comp_channel *channel,
                                       int comp_vector) {
  /* One completion vector (num_comp_vectors): others are refused, as
   * rxe refuses them. */
  if (!context || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_cq *cq = uv_cq_new(context, cqe, cq_context, channel);
  return cq ? ibv_cq_ex_to_cq(&cq->cqx) : NULL;
}

/* Both ways; EINVAL when more completions wait than the new size holds. */
UV_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe) {
  struct uv_cq *cq = (struct uv_cq *)(void *)ibcq;
  if (!ibcq || cqe <= 0 || cqe > (1 << 22) - 1)
    return EINVAL;
  int rv = uroce_resize_cq(cq->ucq, (uint32_t)cqe);
  if (rv < 0)
    return uv_errno(rv);
  ibcq->cqe = cqe;
  return 0;
}

UV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq) {
  struct uv_cq *cq = (struct uv_cq *)(void *)ibcq;
  struct ibv_comp_channel *ch = ibcq->channel;
  int rv = uroce_destroy_cq(cq->ucq);
  if (rv < 0)
    return uv_errno(rv);
  if (ch)
    __atomic_sub_fetch(&ch->refcnt, 1, __ATOMIC_RELAXED);
  pthread_mutex_destroy(&cq->cqx.mutex);
  pthread_cond_destroy(&cq->cqx.cond);
  free(cq);
  return 0;
}

static int op_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc) {
  struct uv_cq *cq = (struct uv_cq *)(void *)ibcq;
  /* An empty poll runs the device itself, and after a spin budget waits
   * in the kernel for a packet (src/api): no sched_yield here, which gave
   * the core to any runnable job, even a niced one. */
  int rv = uroce_poll_cq(cq->ucq, n, (struct uroce_wc *)(void *)wc);
  return rv < 0 ? -uv_errno(rv) : rv;
}

static int op_req_notify_cq(struct ibv_cq *ibcq, int solicited_only) {
  struct uv_cq *cq = (struct uv_cq *)(void *)ibcq;
  return uv_errno(uroce_req_notify_cq(cq->ucq, solicited_only));
}

/* ---- object lookup for asynchronous events ---- */

static void ctx_add_qp(struct uv_context *ctx, struct uv_qp *qp) {
  pthread_mutex_lock(&ctx->lock);
  qp->next = ctx->qps;
  ctx->qps = qp;
  pthread_mutex_unlock(&ctx->lock);
}

static void ctx_del_qp(struct uv_context *ctx, struct uv_qp *qp) {
  pthread_mutex_lock(&ctx->lock);
  for (struct uv_qp **p = &ctx->qps; *p; p = &(*p)->next)
    if (*p == qp) {
      *p = qp->next;
      break;
    }
  pthread_mutex_unlock(&ctx->lock);
}

/* ---- shared receive queues ---- */

/* An SRQ; with xrcd (and cq) an XRC SRQ of that domain. */
static struct uv_srq *srq_new(struct ibv_pd *ibpd, void *srq_context,
                              struct ibv_srq_attr *attr, struct ibv_xrcd *xrcd,
                              struct ibv_cq *cq) {
  if (!ibpd || !attr) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_pd *pd = UV_CONTAINER(ibpd, struct uv_pd, pd);
  struct uv_srq *srq = calloc(1, sizeof(*srq));
  if (!srq) {
    errno = ENOMEM;
    return NULL;
  }
  struct uroce_srq_attr a = {.max_wr = attr->max_wr,
                             .max_sge = attr->max_sge ? attr->max_sge : 1,
                             .srq_limit = attr->srq_limit};
  int rv = xrcd ? uroce_create_xrc_srq(pd->upd, uv_xrcd_domain(xrcd),
                                       ((struct uv_cq *)(void *)cq)->ucq, &a,
                                       &srq->usrq)
                : uroce_create_srq(pd->upd, &a, &srq->usrq);
  if (rv < 0) {
    free(srq);
    return uv_fail(rv);
  }
  srq->srq_type = xrcd ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
  srq->xrcd = xrcd;
  srq->cq = cq;
  if (uroce_query_srq(srq->usrq, &a) == 0) {
    attr->max_wr = a.max_wr;
    attr->max_sge = a.max_sge;
  }
  srq->srq.context = ibpd->context;
  srq->srq.srq_context = srq_context;
  srq->srq.pd = ibpd;
  pthread_mutex_init(&srq->srq.mutex, NULL);
  pthread_cond_init(&srq->srq.cond, NULL);
  struct uv_context *ctx = uv_ctx(ibpd->context);
  pthread_mutex_lock(&ctx->lock);
  srq->next = ctx->srqs;
  ctx->srqs = srq;
  pthread_mutex_unlock(&ctx->lock);
  return srq;
}

UV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
                                         struct ibv_srq_init_attr *init) {
  if (!init) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_srq *srq = srq_new(pd, init->srq_context, &init->attr, NULL, NULL);
  return srq ? &srq->srq : NULL;
}

static struct ibv_srq *op_create_srq_ex(struct ibv_context *context,
                                        struct ibv_srq_init_attr_ex *init) {
  if (!init || !(init->comp_mask & IBV_SRQ_INIT_ATTR_PD)) {
    errno = EINVAL;
    return NULL;
  }
  if (init->comp_mask &
      ~(uint32_t)(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
                  IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ)) {
    errno = EOPNOTSUPP; /* tag matching */
    return NULL;
  }
  enum ibv_srq_type t = (init->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)
                            ? init->srq_type
                            : IBV_SRQT_BASIC;
  if (t != IBV_SRQT_BASIC && t != IBV_SRQT_XRC) {
    errno = EOPNOTSUPP; /* tag-matching SRQs */
    return NULL;
  }
  bool xrc = t == IBV_SRQT_XRC;
  uint32_t xrc_mask = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  /* An XRC SRQ needs its domain and its CQ; a basic one takes neither. */
  if (xrc ? (init->comp_mask & xrc_mask) != xrc_mask || !init->xrcd || !init->cq
          : (init->comp_mask & xrc_mask) != 0) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_srq *srq = srq_new(init->pd, init->srq_context, &init->attr,
                               xrc ? init->xrcd : NULL, xrc ? init->cq : NULL);
  return srq ? &srq->srq : NULL;
}

UV_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
                             int mask) {
  struct uv_srq *srq = UV_CONTAINER(ibsrq, struct uv_srq, srq);
  if (!attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
    return EINVAL;
  struct uroce_srq_attr a = {.max_wr = attr->max_wr,
                             .max_sge = attr->max_sge,
                             .srq_limit = attr->srq_limit};
  return uv_errno(uroce_modify_srq(srq->usrq, &a, mask));
}

UV_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr) {
  struct uv_srq *srq = UV_CONTAINER(ibsrq, struct uv_srq, srq);
  struct uroce_srq_attr a;
  int rv = uroce_query_srq(srq->usrq, &a);
  if (rv < 0)
    return uv_errno(rv);
  attr->max_wr = a.max_wr;
  attr->max_sge = a.max_sge;
  attr->srq_limit = a.srq_limit;
  return 0;
}

UV_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq) {
  struct uv_srq *srq = UV_CONTAINER(ibsrq, struct uv_srq, srq);
  int rv = uroce_destroy_srq(srq->usrq);
  if (rv < 0)
    return uv_errno(rv);
  struct uv_context *ctx = uv_ctx(ibsrq->context);
  pthread_mutex_lock(&ctx->lock);
  for (struct uv_srq **p = &ctx->srqs; *p; p = &(*p)->next)
    if (*p == srq) {
      *p = srq->next;
      break;
    }
  pthread_mutex_unlock(&ctx->lock);
  pthread_mutex_destroy(&srq->srq.mutex);
  pthread_cond_destroy(&srq->srq.cond);
  free(srq);
  return 0;
}

static int op_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
                            struct ibv_recv_wr **bad) {
  struct uv_srq *srq = UV_CONTAINER(ibsrq, struct uv_srq, srq);
  return uv_errno(uroce_post_srq_recv(srq->usrq,
                                      (struct uroce_recv_wr *)(void *)wr,
                                      (struct uroce_recv_wr **)(void *)bad));
}

/* ---- address handles ---- */

static int ah_attr_to_uroce(const struct ibv_ah_attr *a,
                            struct uroce_ah_attr *u) {
  memset(u, 0, sizeof(*u));
  if (!a->is_global)
    return EINVAL; /* RoCE addresses by GID: a GRH is required */
  if (a->port_num && a->port_num != 1)
    return EINVAL;
  if (a->grh.sgid_index >= UV_GID_TBL_LEN)
    return EINVAL;
  memcpy(u->dgid, a->grh.dgid.raw, 16);
  u->is_global = 1;
  u->traffic_class = a->grh.traffic_class;
  u->hop_limit = a->grh.hop_limit;
  u->flow_label = a->grh.flow_label;
  return 0;
}

UV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *ibpd,
                                       struct ibv_ah_attr *attr) {
  struct uroce_ah_attr ua;
  if (!ibpd || !attr) {
    errno = EINVAL;
    return NULL;
  }
  int e = ah_attr_to_uroce(attr, &ua);
  if (e) {
    errno = e;
    return NULL;
  }
  struct uv_pd *pd = UV_CONTAINER(ibpd, struct uv_pd, pd);
  struct uv_ah *ah = calloc(1, sizeof(*ah));
  if (!ah) {
    errno = ENOMEM;
    return NULL;
  }
  int rv = uroce_create_ah(pd->upd, &ua, &ah->uah);
  if (rv < 0) {
    free(ah);
    return uv_fail(rv);
  }
  ah->ah.context = ibpd->context;
  ah->ah.pd = ibpd;
  return &ah->ah;
}

UV_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah) {
  struct uv_ah *ah = UV_CONTAINER(ibah, struct uv_ah, ah);
  int rv = uroce_destroy_ah(ah->uah);
  if (rv < 0)
    return uv_errno(rv);
  free(ah);
  return 0;
}

/* The source GID of a received UD datagram, from the 40 bytes before its
 * payload: an IPv6 header, or 20 bytes and an IPv4 header for IPv4. */
UV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
                                  struct ibv_wc *wc, struct ibv_grh *grh,
                                  struct ibv_ah_attr *ah_attr) {
  if (!wc || !ah_attr || !grh || !(wc->wc_flags & IBV_WC_GRH) ||
      port_num != 1) {
    errno = EINVAL;
    return -1;
  }
  memset(ah_attr, 0, sizeof(*ah_attr));
  const uint8_t *raw = (const uint8_t *)grh;
  ah_attr->is_global = 1;
  ah_attr->port_num = port_num;
  ah_attr->grh.hop_limit = 0xff;
  ah_attr->grh.sgid_index = 1;
  if ((raw[20] >> 4) == 4) {
    uint8_t *d = ah_attr->grh.dgid.raw;
    d[10] = d[11] = 0xff;
    memcpy(d + 12, raw + 20 + 12, 4);
    ah_attr->grh.traffic_class = raw[21];
  } else {
    memcpy(ah_attr->grh.dgid.raw, grh->sgid.raw, 16);
    uint32_t vtf = ntohl(grh->version_tclass_flow);
    ah_attr->grh.traffic_class = (uint8_t)(vtf >> 20);
    ah_attr->grh.flow_label = vtf & 0xfffff;
  }
  return 0;
}

UV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd,
                                               struct ibv_wc *wc,
                                               struct ibv_grh *grh,
                                               uint8_t port_num) {
  struct ibv_ah_attr a;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a))
    return NULL;
  return ibv_create_ah(pd, &a);
}

/* Ethernet L2 addresses belong to the kernel's neighbour table; uroce's
 * packets travel in UDP and never need them. */
UV_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
                                          struct ibv_ah_attr *attr,
                                          uint8_t eth_mac[6], uint16_t *vid) {
  return EOPNOTSUPP;
}

/* ---- queue pairs ---- */

/* Set by uroce_ibv_create_gsi_qp around its uv_qp_new. */
static __thread bool tl_gsi;

/* What a QP of its type needs: a PD and both CQs; an XRC initiator a PD
 * and a send CQ; an XRC target its domain only. */
static bool qp_objects_ok(const struct ibv_qp_init_attr_ex *init) {
  bool pd = (init->comp_mask & IBV_QP_INIT_ATTR_PD) && init->pd;
  if (init->qp_type == IBV_QPT_XRC_RECV)
    return (init->comp_mask & IBV_QP_INIT_ATTR_XRCD) && init->xrcd;
  if (init->qp_type == IBV_QPT_XRC_SEND)
    return pd && init->send_cq && !init->srq;
  return pd && init->send_cq && init->recv_cq;
}

struct ibv_qp *uv_qp_new(struct ibv_context *context,
                         struct ibv_qp_init_attr_ex *init) {
  if (!init || !qp_objects_ok(init)) {
    errno = EINVAL;
    return NULL;
  }
  uint32_t supported = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
                       IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_XRCD;
  /* Create flags (scatter FCS, CVLAN stripping, ...) need a NIC; asking
   * for none is fine. */
  if ((init->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && init->create_flags) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  if ((init->comp_mask & ~supported) ||
      (init->qp_type != IBV_QPT_RC && init->qp_type != IBV_QPT_UC &&
       init->qp_type != IBV_QPT_UD && init->qp_type != IBV_QPT_XRC_SEND &&
       init->qp_type != IBV_QPT_XRC_RECV)) {
    errno = EOPNOTSUPP; /* raw packet, RSS, TSO, create flags */
    return NULL;
  }
  struct uv_qp *qp = calloc(1, sizeof(*qp));
  if (!qp) {
    errno = ENOMEM;
    return NULL;
  }
  struct uroce_qp_init_attr a;
  memset(&a, 0, sizeof(a));
  bool tgt = init->qp_type == IBV_QPT_XRC_RECV,
       ini = init->qp_type == IBV_QPT_XRC_SEND;
  if (!tgt) {
    a.send_cq = ((struct uv_cq *)(void *)init->send_cq)->ucq;
    a.cap.max_send_wr = init->cap.max_send_wr;
    a.cap.max_send_sge = init->cap.max_send_sge;
    a.cap.max_inline_data = init->cap.max_inline_data;
  }
  if (!tgt && !ini) {
    a.recv_cq = ((struct uv_cq *)(void *)init->recv_cq)->ucq;
    a.srq = init->srq ? UV_CONTAINER(init->srq, struct uv_srq, srq)->usrq : 0;
    a.cap.max_recv_wr = init->cap.max_recv_wr;
    a.cap.max_recv_sge = init->cap.max_recv_sge;
  }
  if (tgt)
    a.xrcd = uv_xrcd_domain(init->xrcd);
  a.qp_type = tl_gsi ? UROCE_QPT_GSI : init->qp_type;
  a.sq_sig_all = init->sq_sig_all;
  struct uv_pd *pd = tgt ? NULL : UV_CONTAINER(init->pd, struct uv_pd, pd);
  int rv = uroce_create_qp(pd ? pd->upd : NULL, &a, &qp->uqp);
  if (rv < 0) {
    free(qp);
    return uv_fail(rv);
  }
  if (tgt && !(qp->tgt = uv_tgt_new(qp->uqp, a.xrcd))) {
    uroce_destroy_qp(qp->uqp);
    free(qp);
    errno = ENOMEM;
    return NULL;
  }
  qp->max_inline = init->cap.max_inline_data;
  struct ibv_qp *q = &qp->qpx.qp_base;
  q->context = context;
  q->qp_context = init->qp_context;
  q->pd = tgt ? NULL : init->pd;
  q->send_cq = tgt ? NULL : init->send_cq;
  q->recv_cq = tgt || ini ? NULL : init->recv_cq;
  q->srq = tgt || ini ? NULL : init->srq;
  q->qp_num = uroce_qp_num(qp->uqp);
  q->handle = q->qp_num;
  q->state = IBV_QPS_RESET;
  q->qp_type = init->qp_type;
  pthread_mutex_init(&q->mutex, NULL);
  pthread_cond_init(&q->cond, NULL);
  if (init->srq || tgt || ini)
    init->cap.max_recv_wr = init->cap.max_recv_sge = 0;
  if (tgt)
    init->cap.max_send_wr = init->cap.max_send_sge = 0;
  if (init->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    qp->is_ex = 1;
    uv_qp_ex_init(qp);
  }
  ctx_add_qp(uv_ctx(context), qp);
  return q;
}

/* Private to uroce's librdmacm drop-in (version node UROCE_PRIVATE_1): QP1,
 * the GSI QP that carries the CM's MADs, a UD QP to every verb. */
UV_EXPORT struct ibv_qp *uroce_ibv_create_gsi_qp(struct ibv_pd *pd,
                                                 struct ibv_qp_init_attr *init) {
  if (!pd || !init || init->qp_type != IBV_QPT_UD || init->srq) {
    errno = EINVAL;
    return NULL;
  }
  struct ibv_qp_init_attr_ex x;
  memset(&x, 0, sizeof(x));
  x.send_cq = init->send_cq;
  x.recv_cq = init->recv_cq;
  x.cap = init->cap;
  x.qp_type = IBV_QPT_UD;
  x.sq_sig_all = init->sq_sig_all;
  x.comp_mask = IBV_QP_INIT_ATTR_PD;
  x.pd = pd;
  tl_gsi = true;
  struct ibv_qp *qp = uv_qp_new(pd->context, &x);
  tl_gsi = false;
  return qp;
}

UV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
                                       struct ibv_qp_init_attr *init) {
  if (!pd || !init) {
    errno = EINVAL;
    return NULL;
  }
  struct ibv_qp_init_attr_ex x;
  memset(&x, 0, sizeof(x));
  x.qp_context = init->qp_context;
  x.send_cq = init->send_cq;
  x.recv_cq = init->recv_cq;
  x.srq = init->srq;
  x.cap = init->cap;
  x.qp_type = init->qp_type;
  x.sq_sig_all = init->sq_sig_all;
  x.comp_mask = IBV_QP_INIT_ATTR_PD;
  x.pd = pd;
  struct ibv_qp *qp = uv_qp_new(pd->context, &x);
  if (qp)
    init->cap = x.cap;
  return qp;
}

/* ibv_open_qp: another handle to an XRC target QP of the domain (the
 * kernel's shared QP), for a context of this process. */
struct ibv_qp *uv_open_qp(struct ibv_context *context,
                          struct ibv_qp_open_attr *attr) {
  uint32_t need =
      IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if (!attr || (attr->comp_mask & need) != need ||
      attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED || !attr->xrcd ||
      attr->qp_type != IBV_QPT_XRC_RECV) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_qp *qp = calloc(1, sizeof(*qp));
  if (!qp) {
    errno = ENOMEM;
    return NULL;
  }
  qp->tgt = uv_tgt_find(attr->xrcd, attr->qp_num);
  if (!qp->tgt) {
    free(qp);
    errno = EINVAL; /* no target QP of that number in the domain */
    return NULL;
  }
  qp->uqp = qp->tgt->uqp;
  struct ibv_qp *q = &qp->qpx.qp_base;
  q->context = context;
  if (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT)
    q->qp_context = attr->qp_context;
  q->qp_num = attr->qp_num;
  q->handle = q->qp_num;
  struct uroce_qp_attr qa;
  q->state =
      uroce_query_qp(qp->uqp, &qa, NULL) == 0 ? qa.qp_state : IBV_QPS_RESET;
  q->qp_type = IBV_QPT_XRC_RECV;
  pthread_mutex_init(&q->mutex, NULL);
  pthread_cond_init(&q->cond, NULL);
  ctx_add_qp(uv_ctx(context), qp);
  return q;
}

UV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp) {
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp;
  return qp->is_ex ? &qp->qpx : NULL;
}

UV_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp) {
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp;
  /* An XRC target lives while any handle to it does. */
  bool others = qp->tgt && uv_tgt_others(qp->tgt);
  int rv = others ? 0 : uroce_destroy_qp(qp->uqp);
  if (rv < 0)
    return uv_errno(rv);
  if (qp->tgt && !others)
    uv_tgt_free(qp->tgt);
  ctx_del_qp(uv_ctx(ibqp->context), qp);
  pthread_mutex_destroy(&ibqp->mutex);
  pthread_cond_destroy(&ibqp->cond);
  free(qp->inl);
  free(qp->sge);
  free(qp);
  return 0;
}

UV_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
                            int mask) {
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp;
  if (!attr)
    return EINVAL;
  struct uroce_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = attr->qp_state;
  a.cur_qp_state = attr->cur_qp_state;
  a.path_mtu = attr->path_mtu;
  a.path_mig_state = attr->path_mig_state;
  a.qkey = attr->qkey;
  a.rq_psn = attr->rq_psn;
  a.sq_psn = attr->sq_psn;
  a.dest_qp_num = attr->dest_qp_num;
  a.qp_access_flags = attr->qp_access_flags & UROCE_ACCESS_ALL;
  a.cap.max_send_wr = attr->cap.max_send_wr;
  a.cap.max_recv_wr = attr->cap.max_recv_wr;
  a.cap.max_send_sge = attr->cap.max_send_sge;
  a.cap.max_recv_sge = attr->cap.max_recv_sge;
  a.cap.max_inline_data = attr->cap.max_inline_data;
  if (mask & IBV_QP_AV) {
    int e = ah_attr_to_uroce(&attr->ah_attr, &a.ah_attr);
    if (e)
      return e;
  }
  if ((mask & IBV_QP_PATH_MTU) && attr->path_mtu <= IBV_MTU_4096 &&
      (int)attr->path_mtu >
          uroce_device_active_mtu(uv_ctx(ibqp->context)->udev)) {
    /* Accepted, as rxe does, but a packet the interface cannot carry is
     * lost: say so once, since the symptom is only retransmissions. */
    static bool told;
    if (!told)
      fprintf(stderr,
              "uroce: path MTU %d is above the active MTU %d: packets "
              "larger than the interface MTU will be dropped\n",
              128 << attr->path_mtu,
              128 << uroce_device_active_mtu(uv_ctx(ibqp->context)->udev));
    told = true;
  }
  a.pkey_index = attr->pkey_index;
  a.en_sqd_async_notify = attr->en_sqd_async_notify;
  /* The initiator depth is clamped to what uroce supports, as a smaller
   * depth is always safe: perftest asks for the peer's max_qp_rd_atom
   * (128 on Linux rxe). The responder depth is not: a peer could then send
   * more RDMA READ/atomic requests than uroce keeps room for. */
  a.max_rd_atomic = attr->max_rd_atomic > UROCE_MAX_RD_ATOMIC
                        ? UROCE_MAX_RD_ATOMIC
                        : attr->max_rd_atomic;
  a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  a.min_rnr_timer = attr->min_rnr_timer;
  a.port_num = attr->port_num;
  a.timeout = attr->timeout;
  a.retry_cnt = attr->retry_cnt;
  a.rnr_retry = attr->rnr_retry;
  /* Alternate paths (automatic path migration) are accepted and unused. */
  int rv = uroce_modify_qp(qp->uqp, &a, mask & 0x1FFFFF);
  if (rv < 0)
    return uv_errno(rv);
  if (mask & IBV_QP_STATE)
    ibqp->state = attr->qp_state;
  /* A reset QP's completions still in its CQs go, as mlx5 cleans them:
   * flushes from before would otherwise meet its new work. */
  /* (XRC ends have one CQ or none of their own.) */
  if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
    if (ibqp->send_cq)
      uroce_clean_cq(((struct uv_cq *)(void *)ibqp->send_cq)->ucq,
                     ibqp->qp_num);
    if (ibqp->recv_cq && ibqp->recv_cq != ibqp->send_cq)
      uroce_clean_cq(((struct uv_cq *)(void *)ibqp->recv_cq)->ucq,
                     ibqp->qp_num);
  }
  if (mask & IBV_QP_AV)
    qp->sgid_index = attr->ah_attr.grh.sgid_index;
  return 0;
}

UV_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
                           int mask, struct ibv_qp_init_attr *init) {
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp;
  struct uroce_qp_attr a;
  struct uroce_qp_init_attr ia;
  if (!attr)
    return EINVAL;
  int rv = uroce_query_qp(qp->uqp, &a, &ia);
  if (rv < 0)
    return uv_errno(rv);
  memset(attr, 0, sizeof(*attr));
  attr->qp_state = a.qp_state;
  attr->cur_qp_state = a.qp_state;
  attr->path_mtu = a.path_mtu;
  attr->path_mig_state = IBV_MIG_MIGRATED;
  attr->qkey = a.qkey;
  attr->rq_psn = a.rq_psn;
  attr->sq_psn = a.sq_psn;
  attr->dest_qp_num = a.dest_qp_num;
  attr->qp_access_flags = a.qp_access_flags;
  attr->cap.max_send_wr = a.cap.max_send_wr;
  attr->cap.max_recv_wr = a.cap.max_recv_wr;
  attr->cap.max_send_sge = a.cap.max_send_sge;
  attr->cap.max_recv_sge = a.cap.max_recv_sge;
  attr->cap.max_inline_data = a.cap.max_inline_data;
  memcpy(attr->ah_attr.grh.dgid.raw, a.ah_attr.dgid, 16);
  attr->ah_attr.grh.flow_label = a.ah_attr.flow_label;
  attr->ah_attr.grh.hop_limit = a.ah_attr.hop_limit;
  attr->ah_attr.grh.traffic_class = a.ah_attr.traffic_class;
  attr->ah_attr.grh.sgid_index = qp->sgid_index;
  attr->ah_attr.is_global = a.ah_attr.is_global;
  attr->ah_attr.port_num = 1;
  attr->pkey_index = a.pkey_index;
  attr->en_sqd_async_notify = a.en_sqd_async_notify;
  attr->sq_draining = a.sq_draining;
  attr->max_rd_atomic = a.max_rd_atomic;
  attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  attr->min_rnr_timer = a.min_rnr_timer;
  attr->port_num = 1;
  attr->timeout = a.timeout;
  attr->retry_cnt = a.retry_cnt;
  attr->rnr_retry = a.rnr_retry;
  if (init) {
    memset(init, 0, sizeof(*init));
    init->qp_context = ibqp->qp_context;
    init->send_cq = ibqp->send_cq;
    init->recv_cq = ibqp->recv_cq;
    init->srq = ibqp->srq;
    init->cap = attr->cap;
    init->qp_type = ibqp->qp_type;
    init->sq_sig_all = ia.sq_sig_all;
  }
  return 0;
}

/* Translates one ibv send WR for a QP of type qpt: only the fields that
 * type defines are read (wr.ud is a union member only UD QPs set; an RC
 * SEND's wr may hold anything there). Returns 0 or an errno value. */
static int uv_send_wr(const struct ibv_send_wr *w, enum ibv_qp_type qpt,
                      struct uroce_send_wr *u) {
  memset(u, 0, sizeof(*u));
  switch (w->opcode) {
  case IBV_WR_RDMA_WRITE:
  case IBV_WR_RDMA_WRITE_WITH_IMM:
  case IBV_WR_SEND:
  case IBV_WR_SEND_WITH_IMM:
  case IBV_WR_RDMA_READ:
  case IBV_WR_ATOMIC_CMP_AND_SWP:
  case IBV_WR_ATOMIC_FETCH_AND_ADD:
  case IBV_WR_SEND_WITH_INV:
  case IBV_WR_LOCAL_INV:
    break;
  case IBV_WR_BIND_MW: /* type 2 only: type 1 is bound by ibv_bind_mw */
    if (!w->bind_mw.mw || w->bind_mw.mw->type != IBV_MW_TYPE_2)
      return EINVAL;
    memset(u, 0, sizeof(*u));
    u->wr_id = w->wr_id;
    u->send_flags = w->send_flags & 0xF;
    return uv_bind_info(&w->bind_mw.bind_info, w->bind_mw.mw, w->bind_mw.rkey,
                        u);
  default:
    return EINVAL; /* TSO, driver opcodes */
  }
  u->wr_id = w->wr_id;
  u->sg_list = (struct uroce_sge *)(void *)w->sg_list;
  u->num_sge = w->num_sge;
  u->opcode = w->opcode;
  u->send_flags = w->send_flags & 0xF;
  u->imm_data = w->imm_data;
  u->invalidate_rkey = w->invalidate_rkey;
  if (qpt == IBV_QPT_XRC_SEND)
    u->xrc_remote_srqn = w->qp_type.xrc.remote_srqn;
  switch (w->opcode) {
  case IBV_WR_ATOMIC_CMP_AND_SWP:
  case IBV_WR_ATOMIC_FETCH_AND_ADD:
    u->wr.atomic.remote_addr = w->wr.atomic.remote_addr;
    u->wr.atomic.compare_add = w->wr.atomic.compare_add;
    u->wr.atomic.swap = w->wr.atomic.swap;
    u->wr.atomic.rkey = w->wr.atomic.rkey;
    break;
  case IBV_WR_RDMA_WRITE:
  case IBV_WR_RDMA_WRITE_WITH_IMM:
  case IBV_WR_RDMA_READ:
    u->wr.rdma.remote_addr = w->wr.rdma.remote_addr;
    u->wr.rdma.rkey = w->wr.rdma.rkey;
    break;
  default:
    if (qpt != IBV_QPT_UD)
      break;
    if (!w->wr.ud.ah)
      return EINVAL;
    u->wr.ud.ah = UV_CONTAINER(w->wr.ud.ah, struct uv_ah, ah)->uah;
    u->wr.ud.remote_qpn = w->wr.ud.remote_qpn;
    u->wr.ud.remote_qkey = w->wr.ud.remote_qkey;
    break;
  }
  return 0;
}

static int op_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
                        struct ibv_send_wr **bad) {
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp;
  struct uroce_send_wr batch[UV_WR_BATCH];
  struct ibv_send_wr *src[UV_WR_BATCH];
  while (wr) {
    unsigned n = 0;
    int e = 0;
    for (; wr && n < UV_WR_BATCH; wr = wr->next, n++) {
      e = uv_send_wr(wr, ibqp->qp_type, &batch[n]);
      if (e)
        break;
      src[n] = wr;
      if (n)
        batch[n - 1].next = &batch[n];
    }
    if (n) {
      struct uroce_send_wr *ubad = NULL;
      int rv = uroce_post_send(qp->uqp, batch, &ubad);
      if (rv < 0) {
        if (bad)
          *bad = ubad ? src[ubad - batch] : src[0];
        return uv_errno(rv);
      }
    }
    if (e) {
      if (bad)
        *bad = wr;
      return e;
    }
  }
  return 0;
}

static int op_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
                        struct ibv_recv_wr **bad) {
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp;
  return uv_errno(uroce_post_recv(qp->uqp, (struct uroce_recv_wr *)(void *)wr,
                                  (struct uroce_recv_wr **)(void *)bad));
}

/* ---- multicast: not supported (RoCE multicast needs IGMP and a switch) */

UV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
                               uint16_t lid) {
  return EOPNOTSUPP;
}

UV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
                               uint16_t lid) {
  return EOPNOTSUPP;
}

/* ---- asynchronous events ---- */

UV_EXPORT int ibv_get_async_event(struct ibv_context *context,
                                  struct ibv_async_event *event) {
  struct uv_context *ctx = uv_ctx(context);
  struct uroce_async_event ev;
  for (;;) {
    int rv = uroce_get_async_event(ctx->udev, &ev);
    if (rv < 0) {
      errno = uv_errno(rv);
      return -1;
    }
    memset(event, 0, sizeof(*event));
    event->event_type = (enum ibv_event_type)ev.type;
    switch (ev.type) {
    case UROCE_EVENT_CQ_ERR:
      event->element.cq =
          ibv_cq_ex_to_cq(&((struct uv_cq *)uroce_cq_context(ev.obj))->cqx);
      return 0;
    case UROCE_EVENT_SRQ_LIMIT_REACHED:
      pthread_mutex_lock(&ctx->lock);
      for (struct uv_srq *q = ctx->srqs; q; q = q->next)
        if (q->usrq == ev.obj) {
          event->element.srq = &q->srq;
          break;
        }
      pthread_mutex_unlock(&ctx->lock);
      if (event->element.srq)
        return 0;
      continue; /* the SRQ is gone */
    default:
      pthread_mutex_lock(&ctx->lock);
      for (struct uv_qp *q = ctx->qps; q; q = q->next)
        if (q->uqp == ev.obj) {
          event->element.qp = &q->qpx.qp_base;
          break;
        }
      pthread_mutex_unlock(&ctx->lock);
      if (event->element.qp)
        return 0;
      continue; /* the QP is gone */
    }
  }
}

UV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event) {}

/* ---- the context's operation tables ---- */

void uv_set_context_ops(struct uv_context *ctx) {
  struct ibv_context_ops *o = &ctx->vctx.context.ops;
  o->poll_cq = op_poll_cq;
  o->req_notify_cq = op_req_notify_cq;
  o->post_send = op_post_send;
  o->post_recv = op_post_recv;
  o->post_srq_recv = op_post_srq_recv;
  o->alloc_mw = op_alloc_mw;
  o->dealloc_mw = op_dealloc_mw;
  o->bind_mw = op_bind_mw;
  struct verbs_context *v = &ctx->vctx;
  v->query_port = uv_query_port;
  v->query_device_ex = uv_query_device_ex;
  v->create_qp_ex = uv_create_qp_ex;
  v->create_cq_ex = uv_create_cq_ex;
  v->create_srq_ex = op_create_srq_ex;
  v->open_xrcd = uv_open_xrcd;
  v->close_xrcd = uv_close_xrcd;
  v->get_srq_num = uv_get_srq_num;
  v->open_qp = uv_open_qp;
  v->advise_mr = op_advise_mr;
  v->alloc_dm = op_alloc_dm;
  v->free_dm = op_free_dm;
  v->reg_dm_mr = op_reg_dm_mr;
  v->alloc_td = op_alloc_td;
  v->dealloc_td = op_dealloc_td;
  v->alloc_parent_domain = op_alloc_parent_domain;
}
