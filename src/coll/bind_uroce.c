/* The collectives' transport over the native API: one uroce device per
 * rank, one RC QP per peer, one CQ for all of them, RDMA WRITE with
 * immediate. Plus the whole start-up of a rank: device, communicator,
 * one rendezvous of endpoint blobs, QPs to RTS, comm_connect, and a first
 * all-to-all that proves every connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll_int.h"
#include "util/clock.h"

/* Receive WQEs carry this in the top byte of wr_id, the peer below. The
 * engine's own wr_ids use kinds 1..3 there. */
#define RECV_WRID (0xffull << 56)
#define EP_MAGIC 0x55434e45u /* "UCNE" */

typedef struct qpn_map {
  uint32_t qpn;
  int peer;
} qpn_map;

struct uroce_coll_native {
  uroce_coll_transport tp;
  uroce_coll_native_attr attr;
  int rank, size;
  uint32_t sq_depth, rq_depth;
  struct uroce_device *dev;
  struct uroce_pd *pd;
  struct uroce_cq *cq;
  struct uroce_qp **qp; /* by peer; NULL for this rank */
  uint32_t *psn;        /* our initial send PSN per peer */
  qpn_map *map;         /* local QPN -> peer, sorted by QPN */
  int nmap;
  int connected;
  coll_shm *shm; /* peers on this host (setup only); NULL: none */
  int yield;     /* poll() yields when both paths found nothing */
  char errmsg[192];
};

/* Endpoint blob: header, GID and UDP port, then one (qpn, psn) per rank. */
typedef struct ep_hdr {
  uint32_t magic;
  int32_t rank;
  int32_t size;
  uint16_t port; /* the device's UDP port (ranks may share an address) */
  uint16_t pad;
  uint8_t gid[16];
} ep_hdr;

static void set_err(uroce_coll_native *n, const char *fmt, ...) {
  if (n->errmsg[0])
    return; /* keep the first failure: later ones are its consequences */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(n->errmsg, sizeof n->errmsg, fmt, ap);
  va_end(ap);
}

static int cmp_map(const void *a, const void *b) {
  uint32_t x = ((const qpn_map *)a)->qpn, y = ((const qpn_map *)b)->qpn;
  return x < y ? -1 : x > y;
}

static int peer_of(const uroce_coll_native *n, uint32_t qpn) {
  int lo = 0, hi = n->nmap - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (n->map[mid].qpn == qpn)
      return n->map[mid].peer;
    if (n->map[mid].qpn < qpn)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

static int post_recvs(uroce_coll_native *n, int peer, uint32_t count) {
  struct uroce_recv_wr wr = {0};
  wr.wr_id = RECV_WRID | (uint64_t)peer;
  for (uint32_t i = 0; i < count; i++) {
    struct uroce_recv_wr *bad;
    int rc = uroce_post_recv(n->qp[peer], &wr, &bad);
    if (rc < 0)
      return rc;
  }
  return 0;
}

/* ---- the transport interface ------------------------------------------- */

static int tp_reg_mr(void *ctx, void *addr, size_t len, uroce_coll_mr *mr) {
  uroce_coll_native *n = ctx;
  struct uroce_mr *m = NULL;
  int rc;
  if (n->pd &&
      (rc = uroce_reg_mr(n->pd, addr, len,
                         UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_WRITE,
                         &m)) < 0)
    return rc;
  /* host peers write here too: the copy path checks against these */
  if (coll_shm_on(n->shm) &&
      (rc = coll_shm_add_region(n->shm, addr, len)) < 0) {
    if (m)
      uroce_dereg_mr(m);
    return rc;
  }
  mr->addr = addr;
  mr->length = len;
  mr->remote_addr = (uint64_t)(uintptr_t)addr;
  mr->lkey = m ? uroce_mr_lkey(m) : 0;
  mr->rkey = m ? uroce_mr_rkey(m) : 0;
  mr->handle = m;
  return 0;
}

/* A send source: the engine's own writes read it (the local key checks no
 * right for that); no peer can reach it, so its rkey opens nothing. */
static int tp_reg_mr_src(void *ctx, void *addr, size_t len, uroce_coll_mr *mr) {
  uroce_coll_native *n = ctx;
  struct uroce_mr *m = NULL;
  int rc = n->pd ? uroce_reg_mr(n->pd, addr, len, 0, &m) : 0;
  if (rc < 0)
    return rc;
  mr->addr = addr;
  mr->length = len;
  mr->remote_addr = 0;
  mr->lkey = m ? uroce_mr_lkey(m) : 0;
  mr->rkey = 0;
  mr->handle = m;
  return 0;
}

static void tp_dereg_mr(void *ctx, uroce_coll_mr *mr) {
  uroce_coll_native *n = ctx;
  if (mr && coll_shm_on(n->shm))
    coll_shm_del_region(n->shm, mr->addr);
  if (mr && mr->handle) {
    uroce_dereg_mr(mr->handle);
    mr->handle = NULL;
  }
}

/* A signaled RDMA WRITE WITH IMMEDIATE of nsge pieces to peer. */
static int post_wimm(uroce_coll_native *n, int peer, struct uroce_sge *sge,
                     int nsge, uint64_t remote_addr, uint32_t rkey,
                     uint32_t imm, uint64_t wr_id) {
  struct uroce_send_wr wr = {0}, *bad;
  wr.wr_id = wr_id;
  wr.opcode = UROCE_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = UROCE_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  wr.sg_list = nsge ? sge : NULL;
  wr.num_sge = nsge;
  return uroce_post_send(n->qp[peer], &wr, &bad);
}

static int tp_post_write_imm(void *ctx, int peer, const uroce_coll_mr *mr,
                             size_t offset, size_t len, uint64_t remote_addr,
                             uint32_t rkey, uint32_t imm, uint64_t wr_id) {
  uroce_coll_native *n = ctx;
  if (coll_shm_is_local(n->shm, peer)) {
    if (len && (!mr || offset + len > mr->length))
      return UROCE_ERR_INVALID_ARGUMENT;
    return coll_shm_write(n->shm, peer, len ? (char *)mr->addr + offset : NULL,
                          len, NULL, 0, remote_addr, imm, wr_id);
  }
  if (peer < 0 || peer >= n->size || peer == n->rank || !n->qp[peer] ||
      len > UROCE_MAX_MSG || (len && (!mr || offset + len > mr->length)))
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_sge sge = {0};
  if (len)
    sge = (struct uroce_sge){(uint64_t)(uintptr_t)mr->addr + offset,
                             (uint32_t)len, mr->lkey};
  return post_wimm(n, peer, &sge, len ? 1 : 0, remote_addr, rkey, imm, wr_id);
}

/* One write with immediate from 2 pieces: the slot header and the payload
 * in the caller's buffer. */
static int tp_post_write_imm2(void *ctx, int peer, const uroce_coll_mr *mr,
                              size_t offset, size_t len,
                              const uroce_coll_mr *mr2, size_t offset2,
                              size_t len2, uint64_t remote_addr, uint32_t rkey,
                              uint32_t imm, uint64_t wr_id) {
  uroce_coll_native *n = ctx;
  if (coll_shm_is_local(n->shm, peer)) {
    if (!mr || !mr2 || !len || !len2 || offset + len > mr->length ||
        offset2 + len2 > mr2->length)
      return UROCE_ERR_INVALID_ARGUMENT;
    return coll_shm_write(n->shm, peer, (char *)mr->addr + offset, len,
                          (char *)mr2->addr + offset2, len2, remote_addr, imm,
                          wr_id);
  }
  if (peer < 0 || peer >= n->size || peer == n->rank || !n->qp[peer] || !mr ||
      !mr2 || !len || !len2 || len > UROCE_MAX_MSG ||
      len2 > UROCE_MAX_MSG - len || offset + len > mr->length ||
      offset2 + len2 > mr2->length)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_sge sge[2] = {
      {(uint64_t)(uintptr_t)mr->addr + offset, (uint32_t)len, mr->lkey},
      {(uint64_t)(uintptr_t)mr2->addr + offset2, (uint32_t)len2, mr2->lkey}};
  return post_wimm(n, peer, sge, 2, remote_addr, rkey, imm, wr_id);
}

static int poll_native(uroce_coll_native *n, uroce_coll_cqe *cqes, int max) {
  struct uroce_wc wc[32];
  if (max > 32)
    max = 32;
  int got = uroce_poll_cq(n->cq, max, wc);
  if (got < 0) {
    set_err(n, "rank %d: completion queue: %s", n->rank, uroce_strerror(got));
    return got;
  }
  for (int i = 0; i < got; i++) {
    const struct uroce_wc *w = &wc[i];
    uroce_coll_cqe *q = &cqes[i];
    int recv = (w->wr_id & RECV_WRID) == RECV_WRID;
    memset(q, 0, sizeof *q);
    q->peer = recv ? (int32_t)(w->wr_id & 0xffff) : peer_of(n, w->qp_num);
    q->kind = recv ? UROCE_COLL_CQE_RECV_IMM : UROCE_COLL_CQE_WRITE_DONE;
    q->wr_id = recv ? 0 : w->wr_id;
    if (w->status != UROCE_WC_SUCCESS) {
      q->status = (int16_t)(-(int)w->status);
      if (w->status != UROCE_WC_WR_FLUSH_ERR)
        set_err(n, "rank %d: connection to rank %d failed: %s", n->rank,
                q->peer, uroce_wc_status_str(w->status));
      continue;
    }
    if (recv) {
      q->imm = ntohl(w->imm_data);
      q->byte_len = w->byte_len;
      /* every write with immediate took one WQE: give it back at once */
      int rc = post_recvs(n, q->peer, 1);
      if (rc < 0) {
        q->status = -1;
        set_err(n, "rank %d: reposting a receive for rank %d: %s", n->rank,
                q->peer, uroce_strerror(rc));
      }
    }
  }
  return got;
}

static int tp_poll(void *ctx, uroce_coll_cqe *cqes, int max) {
  uroce_coll_native *n = ctx;
  int got = 0;
  if (coll_shm_on(n->shm)) {
    got = coll_shm_poll(n->shm, cqes, max);
    if (got < 0) {
      set_err(n, "%s", coll_shm_errmsg(n->shm));
      return got;
    }
    for (int i = 0; i < got; i++)
      if (cqes[i].status)
        set_err(n, "%s", coll_shm_errmsg(n->shm));
  }
  if (n->cq && got < max) {
    int rc = poll_native(n, cqes + got, max - got);
    if (rc < 0)
      return got ? got : rc;
    got += rc;
  }
  if (got == 0 && n->yield)
    sched_yield(); /* oversubscribed hosts: let the other ranks run */
  return got;
}

/* Yield in poll() only when the machine is oversubscribed: a rank that
 * yields on a machine with a core for each rank hands its core to
 * whatever else is runnable, even a niced busy loop (2 ranks, one host, 4
 * MiB allreduce with two nice -n 19 loops: 2.6 GB/s yielding, 5.4
 * spinning), while with more ranks than cores a spinning rank holds the
 * core its peer needs. */
int coll_yield_auto(int ranks_here) {
  cpu_set_t set;
  int cpus = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    cpus = CPU_COUNT(&set);
  if (cpus <= 0)
    cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  return cpus <= 0 || ranks_here > cpus;
}

static void *tp_alloc_recv_ring(void *ctx, size_t len) {
  uroce_coll_native *n = ctx;
  return coll_shm_ring_alloc(n->shm, len);
}

static void tp_free_recv_ring(void *ctx, void *addr, size_t len) {
  uroce_coll_native *n = ctx;
  coll_shm_ring_free(n->shm, addr, len);
}

static uint64_t tp_now_ns(void *ctx) {
  (void)ctx;
  return mono_ns();
}

/* ---- objects -------------------------------------------------------------
 */

void uroce_coll_native_attr_init(uroce_coll_native_attr *a) {
  memset(a, 0, sizeof *a);
  a->progress = UROCE_PROGRESS_THREAD;
  /* 4.096 us x 2^16 = 268 ms, 7 tries: a dead rank is named within about
   * 2 s, while a rank starved of CPU for a second on an oversubscribed
   * machine (8 ranks on 2 cores) is not mistaken for a dead one. */
  a->qp_timeout = 16;
  a->retry_cnt = 6;
  a->slots = 4; /* uroce_coll_config_init's */
  a->yield = -1;
}

void uroce_coll_native_del(uroce_coll_native *n) {
  if (!n)
    return;
  if (n->qp)
    for (int p = 0; p < n->size; p++)
      if (n->qp[p])
        uroce_destroy_qp(n->qp[p]);
  if (n->cq)
    uroce_destroy_cq(n->cq);
  if (n->pd)
    uroce_dealloc_pd(n->pd);
  if (n->dev)
    uroce_device_close(n->dev);
  coll_shm_del(n->shm);
  free(n->qp);
  free(n->psn);
  free(n->map);
  free(n);
}

/* local: the ranks that shm reaches (NULL: none); they get no QP, and with
 * no other peer there is no device either. */
static int native_create(const uroce_coll_native_attr *attr, int rank, int size,
                         const uint8_t *local, coll_shm *shm,
                         uroce_coll_native **out) {
  int remote = 0;
  for (int p = 0; p < size; p++)
    remote += p != rank && !(local && local[p]);
  if (!attr || (remote && !attr->addr) || !out || size < 1 || size > 0xffff ||
      rank < 0 || rank >= size || attr->slots < 1 || attr->slots > MAX_SLOTS ||
      attr->retry_cnt > 7 || attr->qp_timeout > 31)
    return UROCE_ERR_INVALID_ARGUMENT;
  uroce_coll_native *n = calloc(1, sizeof *n);
  if (!n)
    return -ENOMEM;
  n->attr = *attr;
  n->attr.addr = NULL; /* the caller's string need not outlive this call */
  n->rank = rank;
  n->size = size;
  /* per connection and direction the comm has at most 2 * slots + 2
   * writes with immediate outstanding (docs/coll.md); a little slack */
  n->sq_depth = n->rq_depth = 2u * (uint32_t)attr->slots + 4;
  n->qp = calloc((size_t)size, sizeof *n->qp);
  n->psn = calloc((size_t)size, sizeof *n->psn);
  n->map = calloc((size_t)size, sizeof *n->map);
  /* -1: the caller knows nothing of the hosts (uroce_coll_native_new), so
   * every rank may share this machine */
  n->yield = attr->yield < 0 ? coll_yield_auto(size) : attr->yield;
  n->shm = shm;
  int rc = -ENOMEM;
  if (!n->qp || !n->psn || !n->map)
    goto fail;
  if (!remote)
    goto transport;
  struct uroce_device_attr da = {0};
  da.addr = attr->addr;
  da.port = attr->udp_port;
  da.progress = attr->progress;
  da.busy_poll_us = attr->busy_poll_us;
  da.tx_gather = attr->tx_gather;
  if ((rc = uroce_device_open(&n->dev, &da)) < 0) {
    set_err(n, "rank %d: opening a device on %s: %s", rank, attr->addr,
            uroce_strerror(rc));
    goto fail;
  }
  /* A poll that slept on the device would leave the host peers' shared
   * memory unwatched, up to 200 us at a time. */
  if (shm)
    uroce_device_poll_sleep(n->dev, 0);
  if ((rc = uroce_alloc_pd(n->dev, &n->pd)) < 0)
    goto fail;
  uint64_t cqe = (uint64_t)(size - 1) * (n->sq_depth + n->rq_depth) + 64;
  if (cqe > 0xffffffffu) {
    rc = UROCE_ERR_CAPS;
    goto fail;
  }
  if ((rc = uroce_create_cq(n->dev, (uint32_t)cqe, NULL, NULL, &n->cq)) < 0)
    goto fail;
  uint64_t seed = mono_ns() ^ ((uint64_t)rank << 32);
  for (int p = 0; p < size; p++) {
    if (p == rank || (local && local[p]))
      continue;
    struct uroce_qp_init_attr ia = {0};
    ia.send_cq = ia.recv_cq = n->cq;
    ia.qp_type = UROCE_QPT_RC;
    ia.cap.max_send_wr = n->sq_depth;
    ia.cap.max_recv_wr = n->rq_depth;
    ia.cap.max_send_sge = 2; /* post_write_imm2: header + payload */
    ia.cap.max_recv_sge = 1;
    if ((rc = uroce_create_qp(n->pd, &ia, &n->qp[p])) < 0)
      goto fail;
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    n->psn[p] = (uint32_t)(seed >> 40) & 0xffffff;
    n->map[n->nmap++] = (qpn_map){uroce_qp_num(n->qp[p]), p};
  }
  qsort(n->map, (size_t)n->nmap, sizeof *n->map, cmp_map);
transport:
  n->tp = (uroce_coll_transport){.ctx = n,
                                 .rank = rank,
                                 .size = size,
                                 .reg_mr = tp_reg_mr,
                                 .dereg_mr = tp_dereg_mr,
                                 .post_write_imm = tp_post_write_imm,
                                 .poll = tp_poll,
                                 .now_ns = tp_now_ns,
                                 .reg_mr_src = tp_reg_mr_src,
                                 .post_write_imm2 = tp_post_write_imm2,
                                 .alloc_recv_ring = tp_alloc_recv_ring,
                                 .free_recv_ring = tp_free_recv_ring};
  *out = n;
  return 0;
fail:
  if (!n->errmsg[0])
    fprintf(stderr, "uroce coll: rank %d: device setup on %s: %s\n", rank,
            attr->addr, uroce_strerror(rc));
  else
    fprintf(stderr, "uroce coll: %s\n", n->errmsg);
  n->shm = NULL; /* the caller's */
  uroce_coll_native_del(n);
  return rc;
}

int uroce_coll_native_new(const uroce_coll_native_attr *attr, int rank,
                          int size, uroce_coll_native **out) {
  if (!attr || !attr->addr)
    return UROCE_ERR_INVALID_ARGUMENT;
  return native_create(attr, rank, size, NULL, NULL, out);
}

const uroce_coll_transport *
uroce_coll_native_transport(const uroce_coll_native *n) {
  return n ? &n->tp : NULL;
}

struct uroce_device *uroce_coll_native_device(const uroce_coll_native *n) {
  return n ? n->dev : NULL;
}

const char *uroce_coll_native_errmsg(const uroce_coll_native *n) {
  return n ? n->errmsg : "";
}

size_t uroce_coll_native_ep_size(int size) {
  return sizeof(ep_hdr) + (size_t)(size > 0 ? size : 0) * 8;
}

int uroce_coll_native_ep(const uroce_coll_native *n, void *blob, size_t len) {
  if (!n || !blob || len < uroce_coll_native_ep_size(n->size))
    return UROCE_ERR_NOBUF;
  ep_hdr h = {EP_MAGIC, n->rank,
              n->size,  n->attr.udp_port ? n->attr.udp_port : 4791,
              0,        {0}};
  if (n->dev)
    uroce_device_gid(n->dev, h.gid);
  memcpy(blob, &h, sizeof h);
  char *p = (char *)blob + sizeof h;
  for (int r = 0; r < n->size; r++, p += 8) {
    uint32_t v[2] = {n->qp[r] ? uroce_qp_num(n->qp[r]) : 0, n->psn[r]};
    memcpy(p, v, 8);
  }
  return (int)uroce_coll_native_ep_size(n->size);
}

static int connect_qp(uroce_coll_native *n, int peer, const uint8_t gid[16],
                      uint16_t port, uint32_t dest_qpn, uint32_t rq_psn) {
  struct uroce_qp *qp = n->qp[peer];
  struct uroce_qp_attr a = {
      .qp_state = UROCE_QPS_INIT,
      .qp_access_flags = UROCE_ACCESS_REMOTE_WRITE,
      .port_num = 1,
      .path_mtu = (uint32_t)uroce_device_active_mtu(n->dev),
      .dest_qp_num = dest_qpn,
      .rq_psn = rq_psn,
      .max_dest_rd_atomic = 1,
      .min_rnr_timer = 12,
      .ah_attr = {.is_global = 1, .hop_limit = 64, .dport = port},
      .sq_psn = n->psn[peer],
      .timeout = n->attr.qp_timeout,
      .retry_cnt = n->attr.retry_cnt, /* 7 would retry forever */
      .rnr_retry = 6,
      .max_rd_atomic = 1};
  memcpy(a.ah_attr.dgid, gid, 16);
  int rc = uroce_connect_qp(qp, &a);
  if (rc < 0)
    return rc;
  /* receive WQEs first, so that the peer's first write finds one */
  if ((rc = post_recvs(n, peer, n->rq_depth)) < 0)
    return rc;
  a.qp_state = UROCE_QPS_RTS;
  return uroce_connect_qp(qp, &a);
}

int uroce_coll_native_connect(uroce_coll_native *n, const void *eps,
                              size_t len) {
  size_t esz = uroce_coll_native_ep_size(n ? n->size : 0);
  if (!n || !eps || len != (size_t)n->size * esz || n->connected)
    return UROCE_ERR_INVALID_ARGUMENT;
  for (int p = 0; p < n->size; p++) {
    const char *b = (const char *)eps + (size_t)p * esz;
    ep_hdr h;
    memcpy(&h, b, sizeof h);
    if (h.magic != EP_MAGIC || h.rank != p || h.size != n->size ||
        (n->qp[p] && !h.port)) {
      set_err(n, "rank %d: endpoint of rank %d is malformed", n->rank, p);
      return UROCE_COLL_ERR_MISMATCH;
    }
    if (p == n->rank || !n->qp[p])
      continue;    /* this rank, or a host peer (shared memory) */
    uint32_t v[2]; /* the peer's QPN for us, the PSN it starts at */
    memcpy(v, b + sizeof h + (size_t)n->rank * 8, 8);
    int rc = connect_qp(n, p, h.gid, h.port, v[0] & 0xffffff, v[1]);
    if (rc < 0) {
      set_err(n, "rank %d: connecting the QP to rank %d: %s", n->rank, p,
              uroce_strerror(rc));
      return rc;
    }
  }
  n->connected = 1;
  return 0;
}

/* ---- whole start-up of a rank --------------------------------------------
 */

typedef struct tcp_rdv {
  const uroce_coll_env *env;
  uint64_t timeout_ns;
} tcp_rdv;

static int tcp_allgather(void *ctx, const void *blob, size_t len, void *all) {
  tcp_rdv *t = ctx;
  return uroce_coll_rendezvous(t->env->master_addr, t->env->master_port,
                               t->env->rank, t->env->size, blob, len, all,
                               t->timeout_ns);
}

int uroce_coll_native_setup(const uroce_coll_env *env_in,
                            const uroce_coll_native_attr *attr_in,
                            const uroce_coll_config *cfg, uint64_t timeout_ns,
                            uroce_coll_native **tp_out,
                            uroce_coll_comm **comm_out) {
  return uroce_coll_native_setup_fn(env_in, attr_in, cfg, timeout_ns, NULL,
                                    NULL, tp_out, comm_out);
}

int uroce_coll_native_setup_fn(const uroce_coll_env *env_in,
                               const uroce_coll_native_attr *attr_in,
                               const uroce_coll_config *cfg,
                               uint64_t timeout_ns,
                               uroce_coll_allgather_fn allgather, void *ag_ctx,
                               uroce_coll_native **tp_out,
                               uroce_coll_comm **comm_out) {
  if (!tp_out || !comm_out)
    return UROCE_ERR_INVALID_ARGUMENT;
  *tp_out = NULL;
  *comm_out = NULL;
  uroce_coll_env env;
  int rc;
  if (env_in) {
    env = *env_in;
  } else if ((rc = uroce_coll_env_parse(NULL, NULL, &env)) < 0) {
    fprintf(stderr, "uroce coll: no launcher environment (RANK, WORLD_SIZE, "
                    "MASTER_ADDR, MASTER_PORT or an MPI's)\n");
    return rc;
  }
  uroce_coll_native_attr attr;
  if (attr_in)
    attr = *attr_in;
  else
    uroce_coll_native_attr_init(&attr);
  if (!attr.addr)
    attr.addr = getenv("UROCE_ADDR");
  if (attr.addr && !*attr.addr)
    attr.addr = NULL;
  const char *pe = getenv("UROCE_PORT");
  if (!attr.udp_port && pe && *pe) {
    char *end;
    unsigned long v = strtoul(pe, &end, 10);
    if (*end || !v || v > 65535) {
      fprintf(stderr, "uroce coll: rank %d: UROCE_PORT=%s is not a UDP port\n",
              env.rank, pe);
      return UROCE_ERR_INVALID_ARGUMENT;
    }
    attr.udp_port = (uint16_t)v;
  }
  uroce_coll_config c;
  if (cfg)
    c = *cfg;
  else
    uroce_coll_config_init(&c);
  if (c.slots > 0)
    attr.slots = c.slots;
  uint64_t deadline = mono_ns() + timeout_ns;
  int size = env.size, me = env.rank;
  tcp_rdv tr = {&env, timeout_ns};
  if (!allgather) {
    allgather = tcp_allgather;
    ag_ctx = &tr;
  }

  /* First rendezvous: who shares this host (docs/coll.md, "Shared
   * memory"). */
  char *hosts = calloc((size_t)size, COLL_SHM_HOST_BLOB);
  uint8_t *local = calloc((size_t)size, 1);
  char hb[COLL_SHM_HOST_BLOB];
  uroce_coll_native *n = NULL;
  uroce_coll_comm *comm = NULL;
  coll_shm *shm = NULL;
  char *mine = NULL, *all = NULL;
  rc = -ENOMEM;
  if (!hosts || !local)
    goto fail;
  coll_shm_host_blob(me, hb);
  rc = allgather(ag_ctx, hb, sizeof hb, hosts);
  if (rc < 0) {
    fprintf(stderr, "uroce coll: rank %d: rendezvous at %s:%u: %s\n", me,
            env.master_addr, env.master_port, uroce_coll_strerror(rc));
    goto fail;
  }
  int nlocal = coll_shm_hosts(hosts, size, me, local);
  if (nlocal < 0) {
    rc = nlocal;
    fprintf(stderr, "uroce coll: rank %d: malformed host table\n", me);
    goto fail;
  }
  if ((rc = coll_shm_new(me, size, local, hosts, &shm)) < 0)
    goto fail;
  const char *ye = getenv("UROCE_COLL_YIELD");
  if (ye && (!strcmp(ye, "1") || !strcasecmp(ye, "on")))
    attr.yield = 1;
  else if (ye && (!strcmp(ye, "0") || !strcasecmp(ye, "off")))
    attr.yield = 0;
  else if (ye && *ye && strcasecmp(ye, "auto"))
    fprintf(stderr,
            "uroce coll: rank %d: UROCE_COLL_YIELD=%s is not auto, "
            "on or off; ignored\n",
            me, ye);
  if (attr.yield < 0)
    attr.yield = coll_yield_auto(coll_shm_machine_ranks(hosts, size, me));
  if (nlocal < size && !attr.addr) {
    fprintf(stderr,
            "uroce coll: rank %d: %d of %d ranks are on other hosts and there "
            "is no local address (set UROCE_ADDR or use uroce launch)\n",
            me, size - nlocal, size);
    rc = UROCE_COLL_ERR_BOOTSTRAP;
    goto fail;
  }
  if ((rc = native_create(&attr, me, size, coll_shm_on(shm) ? local : NULL,
                          coll_shm_on(shm) ? shm : NULL, &n)) < 0)
    goto fail;
  if (!coll_shm_on(shm))
    coll_shm_del(shm);
  shm = NULL; /* n's now, where on */
  if ((rc = uroce_coll_comm_new(&n->tp, &c, &comm)) < 0) {
    fprintf(stderr, "uroce coll: rank %d: communicator: %s\n", me,
            uroce_coll_strerror(rc));
    goto fail;
  }
  /* The hierarchy: which ranks share a host (what shared memory joins). */
  int *host_id = malloc((size_t)size * sizeof *host_id);
  rc = host_id ? coll_shm_host_ids(hosts, size, host_id) : -ENOMEM;
  if (rc == 0)
    rc = uroce_coll_comm_set_hosts(comm, host_id, size);
  free(host_id);
  if (rc < 0)
    goto fail;
  /* Second rendezvous: comm info, endpoint, shared memory segment. */
  size_t isz = uroce_coll_comm_info_size();
  size_t esz = uroce_coll_native_ep_size(size);
  size_t bsz = isz + esz + COLL_SHM_SEG_BLOB;
  mine = calloc(1, bsz);
  all = calloc((size_t)size, bsz);
  rc = -ENOMEM;
  if (!mine || !all)
    goto fail;
  uroce_coll_comm_info(comm, mine, isz);
  uroce_coll_native_ep(n, mine + isz, esz);
  if (n->shm)
    coll_shm_seg_blob(n->shm, mine + isz + esz);
  uint64_t now = mono_ns();
  tr.timeout_ns = deadline > now ? deadline - now : 1;
  rc = allgather(ag_ctx, mine, bsz, all);
  if (rc < 0) {
    fprintf(stderr, "uroce coll: rank %d: rendezvous at %s:%u: %s\n", me,
            env.master_addr, env.master_port, uroce_coll_strerror(rc));
    goto fail;
  }
  /* split the table into the comm's blobs, the endpoints, the segments */
  char *infos = malloc((size_t)size * isz);
  char *eps = malloc((size_t)size * esz);
  char *segs = malloc((size_t)size * COLL_SHM_SEG_BLOB);
  rc = -ENOMEM;
  if (infos && eps && segs) {
    for (int r = 0; r < size; r++) {
      const char *b = all + (size_t)r * bsz;
      memcpy(infos + (size_t)r * isz, b, isz);
      memcpy(eps + (size_t)r * esz, b + isz, esz);
      memcpy(segs + (size_t)r * COLL_SHM_SEG_BLOB, b + isz + esz,
             COLL_SHM_SEG_BLOB);
    }
    rc = n->shm ? coll_shm_connect(n->shm, segs) : 0;
    if (rc < 0)
      set_err(n, "%s", coll_shm_errmsg(n->shm));
    if (rc == 0)
      rc = uroce_coll_native_connect(n, eps, (size_t)size * esz);
    if (rc == 0)
      rc = uroce_coll_comm_connect(comm, infos, (size_t)size * isz);
  }
  free(infos);
  free(eps);
  free(segs);
  if (rc < 0) {
    fprintf(stderr, "uroce coll: rank %d: connect: %s %s\n", me,
            uroce_coll_strerror(rc), n->errmsg);
    goto fail;
  }
  /* Prove every connection before the caller's first collective. A peer
   * that is still moving its QPs to RTR drops the first packets; the
   * retransmit timer covers that. Once it is done every host peer has
   * mapped this rank's segment, and its name can go. */
  int64_t *x = calloc((size_t)size * 2, sizeof *x);
  rc = -ENOMEM;
  if (x) {
    uroce_coll_req *req;
    rc =
        uroce_coll_alltoall_start(comm, x, x + size, 1, UROCE_COLL_INT64, &req);
    if (rc == 0)
      rc = uroce_coll_wait(req, UINT64_MAX);
    free(x);
  }
  if (rc < 0) {
    fprintf(stderr, "uroce coll: rank %d: first exchange: %s: %s\n", me,
            uroce_coll_strerror(rc), uroce_coll_errmsg(comm));
    goto fail;
  }
  coll_shm_unlink(n->shm);
  free(hosts);
  free(local);
  free(mine);
  free(all);
  *tp_out = n;
  *comm_out = comm;
  return 0;
fail:
  free(hosts);
  free(local);
  free(mine);
  free(all);
  uroce_coll_comm_del(comm);
  uroce_coll_native_del(n);
  coll_shm_del(shm);
  return rc;
}

int uroce_coll_native_nlocal(const uroce_coll_native *n) {
  return n && n->shm ? coll_shm_nlocal(n->shm) : 1;
}

const char *uroce_coll_native_shm_mode(const uroce_coll_native *n) {
  return n ? coll_shm_mode(n->shm) : "off";
}

int uroce_coll_native_yields(const uroce_coll_native *n) {
  return n ? n->yield : 0;
}
