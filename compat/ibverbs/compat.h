/* libibverbs.so.1 drop-in: the wrappers that pair each libibverbs object
 * (laid out as the system's infiniband/verbs.h says) with the uroce object
 * behind it. Not API. */
#ifndef UROCE_COMPAT_IBVERBS_H
#define UROCE_COMPAT_IBVERBS_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uroce/uroce.h"

#define UV_EXPORT __attribute__((visibility("default")))
#define UV_CONTAINER(p, type, member)                                          \
  ((type *)(void *)((char *)(p)-offsetof(type, member)))

/* GID table: both entries are the endpoint's address (IPv4-mapped for
 * IPv4), RoCE v2. Index 0 because programs, libfabric and rdma-core's
 * tests use it by default; index 1 where earlier uroce had it. rxe's
 * link-local GIDs are not advertised: uroce's one socket is bound to the
 * endpoint address and would not receive what a peer sends to a
 * link-local address (docs/verbs.md). */
#define UV_GID_TBL_LEN 2
#define UV_GID_INDEX 1
/* The table's size as the port reports it: entries past the two are
 * empty (the null GID; ibv_query_gid_ex says ENODATA), as most of a real
 * device's table is. */
#define UV_GID_TBL_SIZE 16

struct uv_device {
  struct ibv_device dev; /* what ibv_get_device_list hands out */
};

/* One per ibv_open_device. Every context of the process shares one uroce
 * device (the endpoint address can be bound only once). */
struct uv_context {
  struct uroce_device *udev;
  uint8_t gid[UV_GID_TBL_LEN][16];
  int ifindex;
  uint32_t netdev_mtu;
  pthread_mutex_t lock; /* the QP and SRQ lists below */
  struct uv_qp *qps;
  struct uv_srq *srqs;
  size_t dm_used;            /* device memory allocated (lock) */
  struct verbs_context vctx; /* last: verbs_context embeds ibv_context */
};

struct uv_pd {
  struct ibv_pd pd;
  struct uroce_pd *upd; /* a parent domain's is its protection domain's */
  /* A parent domain: the protection domain it wraps (NULL for a plain
   * PD), its thread domain and the context its allocators get. */
  struct uv_pd *parent_of;
  struct ibv_td *td;
  void *pd_context;
  unsigned children; /* parent domains over this PD */
};

/* Device memory, emulated in host memory (docs/verbs.md): what the
 * verbs promise of it (allocation within max_dm_size, 4-byte aligned
 * copies in and out, zero-based regions over it) holds; what it is for on
 * a NIC (no PCIe round trip) has no meaning here. */
#define UV_DM_MAX (256u << 10)
struct uv_dm {
  struct ibv_dm dm;
  uint8_t *buf;
  size_t len;
  unsigned mrs; /* regions over it (the context's lock) */
};

struct uv_mr {
  struct ibv_mr mr;
  struct uroce_mr *umr;
  unsigned access;  /* as registered, for ibv_rereg_mr */
  struct uv_dm *dm; /* a region over device memory */
};

struct uv_mw {
  struct ibv_mw mw;
  struct uroce_mw *umw;
};

/* Fills u as the BIND_MW of ibmw under rkey that bi describes; EINVAL
 * for rights a window cannot have, or a range without a region. */
int uv_bind_info(const struct ibv_mw_bind_info *bi, struct ibv_mw *ibmw,
                 uint32_t rkey, struct uroce_send_wr *u);

struct uv_channel {
  struct ibv_comp_channel ch;
  struct uroce_comp_channel *uch;
};

struct uv_cq {
  struct ibv_cq_ex cqx; /* first: an ibv_cq is its prefix */
  struct uroce_cq *ucq;
  /* Extended polling: the completion start_poll/next_poll took. */
  struct uroce_wc cur;
};

struct uv_srq {
  struct ibv_srq srq;
  struct uroce_srq *usrq;
  enum ibv_srq_type srq_type; /* an XRC SRQ's: its domain and CQ */
  struct ibv_xrcd *xrcd;
  struct ibv_cq *cq;
  struct uv_srq *next; /* the context's list, for async events */
};

/* An XRC domain as ibv_open_xrcd hands it out: every open is a handle of
 * its own; the handles of one file (by inode) share the domain (xrc.c). */
struct uv_xdom;
struct uv_xrcd {
  struct ibv_xrcd xrcd;
  struct uv_xdom *dom;
};
struct uroce_xrcd *uv_xrcd_domain(struct ibv_xrcd *xrcd);

/* An XRC target QP: the handles ibv_create_qp_ex and ibv_open_qp give out
 * share it; the last one destroyed destroys it. */
struct uv_tgt {
  struct uroce_qp *uqp;
  struct uroce_xrcd *ux; /* its domain (which it keeps from going) */
  unsigned handles;
  struct uv_tgt *next; /* all targets of the process (xrc.c) */
};

struct uv_ah {
  struct ibv_ah ah;
  struct uroce_ah *uah;
};

#define UV_WR_BATCH 64

struct uv_qp {
  struct ibv_qp_ex qpx; /* first: an ibv_qp is its prefix */
  struct uroce_qp *uqp;
  struct uv_qp *next; /* the context's list, to name QPs in async events */
  int is_ex;          /* created with send_ops_flags: ibv_qp_to_qp_ex works */
  uint32_t max_inline;
  uint8_t sgid_index; /* of the primary path, for ibv_query_qp */
  struct uv_tgt *tgt; /* an XRC target QP's shared part */
  /* ibv_wr_* builder state between wr_start and wr_complete. */
  int wr_err;
  unsigned nwr;
  struct uroce_send_wr wr[UV_WR_BATCH];
  struct uroce_sge *sge; /* UV_WR_BATCH x UROCE_MAX_SGE */
  uint8_t *inl;          /* inline copies: UV_WR_BATCH x max_inline */
  size_t inl_used;
};

static inline struct uv_context *uv_ctx(struct ibv_context *c) {
  return UV_CONTAINER(c, struct uv_context, vctx.context);
}

/* A uroce error as a positive errno value. */
int uv_errno(int err);
/* Sets errno from a uroce error; returns NULL for the caller's return. */
void *uv_fail(int err);

/* verbs.c */
void uv_set_context_ops(struct uv_context *ctx);
/* ex.c */
struct ibv_qp *uv_create_qp_ex(struct ibv_context *context,
                               struct ibv_qp_init_attr_ex *attr);
struct ibv_cq_ex *uv_create_cq_ex(struct ibv_context *context,
                                  struct ibv_cq_init_attr_ex *attr);
void uv_qp_ex_init(struct uv_qp *qp);
void uv_cq_ex_init(struct uv_cq *cq);
/* xrc.c */
struct ibv_xrcd *uv_open_xrcd(struct ibv_context *context,
                              struct ibv_xrcd_init_attr *attr);
int uv_close_xrcd(struct ibv_xrcd *xrcd);
int uv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
struct ibv_qp *uv_open_qp(struct ibv_context *context,
                          struct ibv_qp_open_attr *attr);
/* A new target QP's shared part (NULL: no memory); the one of number
 * qpn in xrcd's domain, with one more handle (NULL: none). */
struct uv_tgt *uv_tgt_new(struct uroce_qp *uqp, struct uroce_xrcd *ux);
struct uv_tgt *uv_tgt_find(struct ibv_xrcd *xrcd, uint32_t qpn);
/* One handle goes: true if others keep the QP (one fewer now); false if
 * it was the last, and the caller destroys the QP and then uv_tgt_free. */
bool uv_tgt_others(struct uv_tgt *t);
void uv_tgt_free(struct uv_tgt *t);
/* device.c */
int uv_query_port(struct ibv_context *context, uint8_t port_num,
                  struct ibv_port_attr *attr, size_t attr_len);
int uv_query_device_ex(struct ibv_context *context,
                       const struct ibv_query_device_ex_input *input,
                       struct ibv_device_attr_ex *attr, size_t attr_size);

#endif
