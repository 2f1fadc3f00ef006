/* librdmacm.so.1 drop-in: the RDMA connection manager over uroce, speaking
 * the InfiniBand CM protocol on the wire (CM MADs on the GSI QP, QP1, in
 * RoCEv2 packets) so that it interoperates with the kernel's rdma_cm.
 *
 * One CM per process: on first use it opens the (one) uroce device through
 * the libibverbs drop-in, creates QP1 there (uroce_ibv_create_gsi_qp) and
 * starts a thread that receives MADs, runs the retransmission timers and
 * queues events on the event channels. Each event channel is an eventfd
 * counting queued events, so that poll/epoll on channel->fd and O_NONBLOCK
 * behave as with the kernel's rdma_cm. docs/rdmacm.md has the protocol
 * facts, the state machine and the limitations. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cma.h"
#include "util/clock.h"
#include "wire/cm_mad.h"

struct ibv_qp *uroce_ibv_create_gsi_qp(struct ibv_pd *pd,
                                       struct ibv_qp_init_attr *init);

#define NRECV 64
#define GRH 40
#define RBUF (GRH + UROCE_MAD_LEN)
#define CM_TIMEOUT 20    /* 4.096 us * 2^20 = 4.3 s, what we advertise */
#define CM_RETRY_MS 1000 /* our own retransmission period */
#define CM_MAX_TRIES 15
#define UDP_QKEY 0x01234567u
#define CMA_HDR_LEN 36
#define MAX_BACKLOG 1024 /* unanswered requests per listener, at most */
#define IB_PS_SID 0x0000000001000000ull /* RDMA_IB_IP_PS_* prefix */

enum st {
  ST_IDLE,
  ST_BOUND,
  ST_ADDR,
  ST_ROUTE,
  ST_LISTEN,
  ST_REQ_SENT,
  ST_REQ_RCVD, /* connect request handed to the user, not yet answered */
  ST_REP_SENT,
  ST_REP_RCVD, /* no QP on the id: waiting for rdma_establish */
  ST_EST,
  ST_DREQ_SENT,
  ST_DISC,
  ST_SIDR_SENT,
  ST_SIDR_RCVD,
};

struct cma_ev;

struct cma_chan {
  struct rdma_event_channel ch; /* ch.fd: an eventfd, one count per event */
  struct cma_ev *head, *tail;
  /* Threads inside rdma_get_cm_event, and whether the channel was
   * destroyed under them (rping's cm_thread is still waiting when its
   * main thread destroys the channel and exits): the last one out frees
   * it (rdma_destroy_event_channel). */
  int readers;
  bool dead;
};

struct cma_id {
  struct rdma_cm_id id;
  struct cma_id *next;
  struct cma_chan *own_chan; /* created for a synchronous id */
  bool sync;
  bool has_ep_attr; /* rdma_create_ep on a passive id: the QP each
                       rdma_get_request gives its new id */
  struct ibv_qp_init_attr ep_attr;
  enum st state;
  uint32_t lcid, rcid, rqpn, rpsn, psn, rqkey;
  uint64_t tid, sid;
  uint8_t rgid[16];
  struct ibv_ah *ah; /* to the peer's QP1 */
  uint8_t mad[UROCE_MAD_LEN];
  int tries;
  uint64_t deadline;     /* ns, 0 = no retransmission pending */
  int backlog;           /* a listener's bound on unanswered requests */
  struct cma_id *listen; /* a connection's listener (never followed: it
                            may be gone); NULL for others */
  uint8_t resp_res, init_depth, mtu, rnr_retry, retry_count;
  uint32_t manual_qpn; /* conn_param->qp_num when the user owns the QP */
  unsigned events;     /* handed out, not acknowledged */
  struct ibv_sa_path_rec path;
};

struct cma_ev {
  struct rdma_cm_event ev;
  struct cma_ev *next;
  struct cma_id *owner; /* the id whose count this event holds */
  struct cma_chan *chan;
  uint8_t priv[224];
};

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int inited; /* 1 ok, -errno failed */
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *cch;
  struct ibv_cq *cq;
  struct ibv_qp *qp1;
  struct ibv_mr *mr;
  uint8_t *buf;
  uint8_t gid[16];
  struct sockaddr_storage addr;
  uint64_t guid;
  uint8_t mtu;
  struct cma_id *ids;
  int wake[2];
  pthread_t thr;
  uint16_t next_port;
  unsigned seed;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static uint32_t rnd(void) {
  return (uint32_t)rand_r(&g.seed) ^ ((uint32_t)rand_r(&g.seed) << 16);
}

static int fail(int err) {
  errno = err;
  return -1;
}

static struct cma_id *priv_of(struct rdma_cm_id *id) {
  return (struct cma_id *)(void *)id; /* id is the first member */
}

static const uint8_t v4pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static void addr_to_gid(const struct sockaddr *sa, uint8_t gid[16]) {
  memset(gid, 0, 16);
  if (sa->sa_family == AF_INET) {
    memcpy(gid, v4pfx, 12);
    memcpy(gid + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
           4);
  } else if (sa->sa_family == AF_INET6) {
    memcpy(gid, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
           16);
  }
}

static uint16_t sa_port(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
  if (sa->sa_family == AF_INET6)
    return ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
  return 0;
}

static void sa_set_port(struct sockaddr *sa, uint16_t port) {
  if (sa->sa_family == AF_INET)
    ((struct sockaddr_in *)(void *)sa)->sin_port = htons(port);
  else if (sa->sa_family == AF_INET6)
    ((struct sockaddr_in6 *)(void *)sa)->sin6_port = htons(port);
}

static socklen_t sa_len(const struct sockaddr *sa) {
  return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                   : sizeof(struct sockaddr_in);
}

static bool sa_is_any(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return ((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr ==
           htonl(INADDR_ANY);
  if (sa->sa_family == AF_INET6)
    return !memcmp(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                   &in6addr_any, 16);
  return true;
}

/* ---- the device, QP1 and the CM thread ---- */

static void *cm_thread(void *arg);

static int post_recv(int i) {
  struct ibv_sge sge = {.addr = (uintptr_t)(g.buf + (size_t)i * RBUF),
                        .length = RBUF,
                        .lkey = g.mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1},
                     *bad;
  return ibv_post_recv(g.qp1, &wr, &bad);
}

static int dev_init_locked(void) {
  if (g.inited)
    return g.inited < 0 ? g.inited : 0;
  int n = 0, err = ENODEV;
  struct ibv_device **list = ibv_get_device_list(&n);
  g.seed = (unsigned)mono_ns() ^ (unsigned)getpid();
  if (!list || n < 1)
    goto out;
  g.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!g.ctx)
    goto out;
  union ibv_gid gid;
  struct ibv_port_attr pa;
  err = EIO;
  if (ibv_query_gid(g.ctx, 1, 1, &gid) || ibv_query_port(g.ctx, 1, &pa))
    goto out;
  memcpy(g.gid, gid.raw, 16);
  g.mtu = (uint8_t)pa.active_mtu;
  g.guid = be64toh(ibv_get_device_guid(g.ctx->device));
  memset(&g.addr, 0, sizeof(g.addr));
  if (!memcmp(g.gid, v4pfx, 12)) {
    struct sockaddr_in *s = (struct sockaddr_in *)(void *)&g.addr;
    s->sin_family = AF_INET;
    memcpy(&s->sin_addr, g.gid + 12, 4);
  } else {
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)(void *)&g.addr;
    s->sin6_family = AF_INET6;
    memcpy(&s->sin6_addr, g.gid, 16);
  }
  err = ENOMEM;
  g.pd = ibv_alloc_pd(g.ctx);
  g.cch = ibv_create_comp_channel(g.ctx);
  g.buf = calloc(NRECV, RBUF);
  if (!g.pd || !g.cch || !g.buf)
    goto out;
  g.cq = ibv_create_cq(g.ctx, 2 * NRECV, NULL, g.cch, 0);
  g.mr = ibv_reg_mr(g.pd, g.buf, (size_t)NRECV * RBUF, IBV_ACCESS_LOCAL_WRITE);
  if (!g.cq || !g.mr)
    goto out;
  struct ibv_qp_init_attr ia = {.send_cq = g.cq,
                                .recv_cq = g.cq,
                                .cap = {.max_send_wr = NRECV,
                                        .max_recv_wr = NRECV,
                                        .max_send_sge = 1,
                                        .max_recv_sge = 1,
                                        .max_inline_data = UROCE_MAD_LEN},
                                .qp_type = IBV_QPT_UD,
                                .sq_sig_all = 0};
  g.qp1 = uroce_ibv_create_gsi_qp(g.pd, &ia);
  if (!g.qp1) {
    err = errno ? errno : EIO;
    goto out;
  }
  struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT,
                           .pkey_index = 0,
                           .port_num = 1,
                           .qkey = UROCE_GSI_QKEY};
  err = EIO;
  if (ibv_modify_qp(g.qp1, &qa,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                        IBV_QP_QKEY))
    goto out;
  qa.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(g.qp1, &qa, IBV_QP_STATE))
    goto out;
  qa.qp_state = IBV_QPS_RTS;
  qa.sq_psn = 0;
  if (ibv_modify_qp(g.qp1, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN))
    goto out;
  for (int i = 0; i < NRECV; i++)
    if (post_recv(i))
      goto out;
  if (ibv_req_notify_cq(g.cq, 0) || pipe2(g.wake, O_CLOEXEC | O_NONBLOCK))
    goto out;
  g.next_port = (uint16_t)(32768 + rnd() % 28000);
  if (pthread_create(&g.thr, NULL, cm_thread, NULL)) {
    err = EAGAIN;
    goto out;
  }
  g.inited = 1;
  return 0;
out:
  fprintf(stderr, "librdmacm (uroce): cannot start the CM: %s\n",
          strerror(err));
  g.inited = -err;
  return -err;
}

static int dev_init(void) {
  pthread_mutex_lock(&g.lock);
  int rv = dev_init_locked();
  pthread_mutex_unlock(&g.lock);
  return rv;
}

static struct ibv_ah *ah_to(const uint8_t gid[16]) {
  struct ibv_ah_attr a = {.is_global = 1, .port_num = 1};
  memcpy(a.grh.dgid.raw, gid, 16);
  a.grh.sgid_index = 1;
  a.grh.hop_limit = 64;
  return ibv_create_ah(g.pd, &a);
}

/* Sends a MAD to QP1 at gid (inline, so the buffer may go at once). */
static int send_mad(struct ibv_ah *ah, const uint8_t mad[UROCE_MAD_LEN]) {
  struct ibv_sge sge = {.addr = (uintptr_t)mad, .length = UROCE_MAD_LEN};
  struct ibv_send_wr wr = {.sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_INLINE},
                     *bad;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = 1;
  wr.wr.ud.remote_qkey = UROCE_GSI_QKEY;
  return ibv_post_send(g.qp1, &wr, &bad);
}

static void send_msg(struct ibv_ah *ah, struct uroce_cm_msg *m) {
  uint8_t mad[UROCE_MAD_LEN];
  if (uroce_cm_build(m, mad) == 0)
    send_mad(ah, mad);
}

/* Sends the id's MAD and arms its retransmission. */
static void send_retried(struct cma_id *p, struct uroce_cm_msg *m) {
  if (uroce_cm_build(m, p->mad))
    return;
  p->tries = 1;
  p->deadline = mono_ns() + CM_RETRY_MS * 1000000ull;
  send_mad(p->ah, p->mad);
  if (write(g.wake[1], "", 1) < 0) {
    /* full pipe: the thread is awake anyway */
  }
}

/* ---- events ---- */

static struct cma_chan *chan_of(struct cma_id *p) {
  return (struct cma_chan *)(void *)p->id.channel;
}

static struct cma_ev *ev_new(struct cma_id *p, enum rdma_cm_event_type type,
                             int status) {
  if (!p->id.channel) /* its channel was destroyed under it */
    return NULL;
  struct cma_ev *e = calloc(1, sizeof(*e));
  if (!e)
    return NULL;
  e->ev.id = &p->id;
  e->ev.event = type;
  e->ev.status = status;
  e->owner = p;
  e->chan = chan_of(p);
  return e;
}

static void ev_push(struct cma_ev *e) {
  struct cma_chan *c = e->chan;
  if (c->tail)
    c->tail->next = e;
  else
    c->head = e;
  c->tail = e;
  e->owner->events++;
  uint64_t one = 1;
  if (write(c->ch.fd, &one, sizeof(one)) < 0)
    perror("librdmacm (uroce): event channel");
}

static void ev_simple(struct cma_id *p, enum rdma_cm_event_type type,
                      int status) {
  struct cma_ev *e = ev_new(p, type, status);
  if (e)
    ev_push(e);
}

static void ev_priv(struct cma_ev *e, const uint8_t *d, size_t n) {
  memcpy(e->priv, d, n);
  e->ev.param.conn.private_data = e->priv;
  e->ev.param.conn.private_data_len = (uint8_t)n;
}

static void fill_ah_attr(struct ibv_ah_attr *a, const uint8_t gid[16]) {
  memset(a, 0, sizeof(*a));
  a->is_global = 1;
  a->port_num = 1;
  memcpy(a->grh.dgid.raw, gid, 16);
  a->grh.sgid_index = 1;
  a->grh.hop_limit = 64;
}

/* ---- QP transitions ---- */

static int make_qp_attr(struct cma_id *p, struct ibv_qp_attr *a, int *mask) {
  enum ibv_qp_state want = a->qp_state;
  bool ud = p->id.qp_type == IBV_QPT_UD;
  memset(a, 0, sizeof(*a));
  a->qp_state = want;
  switch (want) {
  case IBV_QPS_INIT:
    a->pkey_index = 0;
    a->port_num = 1;
    *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (ud) {
      a->qkey = UDP_QKEY;
      *mask |= IBV_QP_QKEY;
    } else {
      a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
      *mask |= IBV_QP_ACCESS_FLAGS;
    }
    return 0;
  case IBV_QPS_RTR:
    *mask = IBV_QP_STATE;
    if (ud)
      return 0;
    if (p->state != ST_REQ_RCVD && p->state != ST_REQ_SENT &&
        p->state != ST_REP_RCVD && p->state != ST_REP_SENT &&
        p->state != ST_EST)
      return EINVAL;
    a->path_mtu = p->mtu;
    a->dest_qp_num = p->rqpn;
    /* The starting PSN a side puts in its REQ or REP is the one it will
     * receive from: the peer's sends start at it (docs/rdmacm.md). */
    a->rq_psn = p->psn;
    a->max_dest_rd_atomic = p->resp_res ? p->resp_res : 1;
    a->min_rnr_timer = 12;
    fill_ah_attr(&a->ah_attr, p->rgid);
    *mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    return 0;
  case IBV_QPS_RTS:
    a->sq_psn = ud ? p->psn : p->rpsn;
    *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (ud)
      return 0;
    a->timeout = 14;
    a->retry_cnt = p->retry_count;
    a->rnr_retry = p->rnr_retry;
    a->max_rd_atomic = p->init_depth ? p->init_depth : 1;
    *mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
             IBV_QP_MAX_QP_RD_ATOMIC;
    return 0;
  default:
    *mask = IBV_QP_STATE;
    return 0;
  }
}

static int qp_to(struct cma_id *p, enum ibv_qp_state s) {
  struct ibv_qp_attr a = {.qp_state = s};
  int mask;
  if (!p->id.qp)
    return 0;
  int rv = make_qp_attr(p, &a, &mask);
  if (rv)
    return rv;
  return ibv_modify_qp(p->id.qp, &a, mask);
}

static int qp_rtr_rts(struct cma_id *p) {
  int rv = qp_to(p, IBV_QPS_RTR);
  return rv ? rv : qp_to(p, IBV_QPS_RTS);
}

/* ---- receiving MADs ---- */

static struct cma_id *find_lcid(uint32_t lcid) {
  for (struct cma_id *p = g.ids; p; p = p->next)
    if (p->lcid == lcid && p->state >= ST_REQ_SENT)
      return p;
  return NULL;
}

static struct cma_id *find_listener(uint64_t sid) {
  if ((sid & 0xFFFFFFFF00000000ull) || (sid & 0xFF000000u) != IB_PS_SID)
    return NULL;
  uint16_t ps = (uint16_t)(sid >> 16 & 0xFF), port = (uint16_t)sid;
  for (struct cma_id *p = g.ids; p; p = p->next)
    if (p->state == ST_LISTEN && (p->id.ps & 0xFF) == ps &&
        sa_port(&p->id.route.addr.src_addr) == port)
      return p;
  return NULL;
}

static void reply_to(const struct uroce_cm_msg *in, const uint8_t gid[16],
                     uint16_t attr, uint16_t reason) {
  struct ibv_ah *ah = ah_to(gid);
  if (!ah)
    return;
  struct uroce_cm_msg m = {.attr_id = attr, .tid = in->tid};
  m.local_id = in->remote_id;
  m.remote_id = in->local_id;
  if (attr == UROCE_CM_REJ) {
    m.local_id = 0;
    m.msg = in->attr_id == UROCE_CM_REP ? 1 : 0;
    m.reason = reason;
  }
  send_msg(ah, &m);
  ibv_destroy_ah(ah);
}

/* The id's addresses from the rdma_cm IP header of a REQ / SIDR_REQ. */
static bool parse_cma_hdr(struct cma_id *c, const uint8_t *h) {
  struct rdma_addr *a = &c->id.route.addr;
  uint16_t port;
  memcpy(&port, h + 2, 2);
  if (h[0] != 0 || ((h[1] >> 4) != 4 && (h[1] >> 4) != 6))
    return false;
  memset(&a->src_storage, 0, sizeof(a->src_storage));
  memset(&a->dst_storage, 0, sizeof(a->dst_storage));
  if ((h[1] >> 4) == 4) {
    a->dst_sin.sin_family = AF_INET;
    memcpy(&a->dst_sin.sin_addr, h + 16, 4);
    a->dst_sin.sin_port = port;
    a->src_sin.sin_family = AF_INET;
    memcpy(&a->src_sin.sin_addr, h + 32, 4);
  } else {
    a->dst_sin6.sin6_family = AF_INET6;
    memcpy(&a->dst_sin6.sin6_addr, h + 4, 16);
    a->dst_sin6.sin6_port = port;
    a->src_sin6.sin6_family = AF_INET6;
    memcpy(&a->src_sin6.sin6_addr, h + 20, 16);
  }
  return true;
}

/* Requests of l's the user has not answered yet. */
static int pending(const struct cma_id *l) {
  int n = 0;
  for (struct cma_id *p = g.ids; p; p = p->next)
    n +=
        p->listen == l && (p->state == ST_REQ_RCVD || p->state == ST_SIDR_RCVD);
  return n;
}

static struct cma_id *child_new(struct cma_id *l, const uint8_t gid[16]) {
  if (pending(l) >= l->backlog) /* a peer cannot make us allocate more */
    return NULL;
  struct cma_id *c = calloc(1, sizeof(*c));
  if (!c)
    return NULL;
  c->id.verbs = g.ctx;
  c->id.channel = l->id.channel;
  c->id.context = l->id.context;
  c->id.ps = l->id.ps;
  c->id.qp_type = l->id.qp_type;
  c->id.port_num = 1;
  c->id.route.addr.addr.ibaddr.pkey = htons(0xFFFF);
  memcpy(c->rgid, gid, 16);
  memcpy(c->id.route.addr.addr.ibaddr.sgid.raw, g.gid, 16);
  memcpy(c->id.route.addr.addr.ibaddr.dgid.raw, gid, 16);
  c->listen = l;
  c->ah = ah_to(gid);
  if (!c->ah) {
    free(c);
    return NULL;
  }
  c->next = g.ids;
  g.ids = c;
  return c;
}

static void on_req(const struct uroce_cm_msg *m, const uint8_t gid[16]) {
  for (struct cma_id *p = g.ids; p; p = p->next)
    if (p->rcid == m->local_id && !memcmp(p->rgid, gid, 16) &&
        p->state >= ST_REQ_RCVD && p->listen) {
      if (p->state == ST_REP_SENT) /* our REP was lost */
        send_mad(p->ah, p->mad);
      else if (p->state == ST_REQ_RCVD) { /* the user is still deciding */
        struct uroce_cm_msg r = {.attr_id = UROCE_CM_MRA, .tid = m->tid};
        r.local_id = p->lcid;
        r.remote_id = p->rcid;
        r.msg = 0;
        r.service_timeout = CM_TIMEOUT;
        send_msg(p->ah, &r);
      }
      return;
    }
  struct cma_id *l = find_listener(m->service_id);
  if (!l || l->id.qp_type == IBV_QPT_UD) {
    reply_to(m, gid, UROCE_CM_REJ, 8); /* invalid service ID */
    return;
  }
  if (m->transport != 0) {
    reply_to(m, gid, UROCE_CM_REJ, 9); /* only RC */
    return;
  }
  struct cma_id *c = child_new(l, gid);
  if (!c) {
    reply_to(m, gid, UROCE_CM_REJ, 3); /* no resources: backlog full */
    return;
  }
  if (!parse_cma_hdr(c, m->priv))
    memcpy(&c->id.route.addr.src_storage, &g.addr, sizeof(g.addr));
  sa_set_port(&c->id.route.addr.src_addr, sa_port(&l->id.route.addr.src_addr));
  c->state = ST_REQ_RCVD;
  c->lcid = rnd();
  c->rcid = m->local_id;
  c->tid = m->tid;
  c->rqpn = m->qpn;
  c->rpsn = m->psn;
  c->mtu = m->mtu < g.mtu ? m->mtu : g.mtu;
  c->retry_count = m->retry_count;
  c->rnr_retry = m->rnr_retry;
  /* What rdma_accept(id, NULL) grants: all the peer asked for. */
  c->resp_res = m->init_depth;
  c->init_depth = m->resp_res;
  c->psn = rnd() & 0xFFFFFF;
  struct cma_ev *e = ev_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  if (!e)
    return;
  e->owner = l;
  e->ev.listen_id = &l->id;
  ev_priv(e, m->priv + CMA_HDR_LEN, m->priv_len - CMA_HDR_LEN);
  e->ev.param.conn.responder_resources = m->init_depth;
  e->ev.param.conn.initiator_depth = m->resp_res;
  e->ev.param.conn.flow_control = m->e2e_fc;
  e->ev.param.conn.retry_count = m->retry_count;
  e->ev.param.conn.rnr_retry_count = m->rnr_retry;
  e->ev.param.conn.srq = m->srq;
  e->ev.param.conn.qp_num = m->qpn;
  ev_push(e);
}

static void on_sidr_req(const struct uroce_cm_msg *m, const uint8_t gid[16]) {
  struct cma_id *l = find_listener(m->service_id);
  if (!l || l->id.qp_type != IBV_QPT_UD) {
    struct ibv_ah *ah = ah_to(gid);
    struct uroce_cm_msg r = {.attr_id = UROCE_CM_SIDR_REP, .tid = m->tid};
    r.local_id = m->local_id;
    r.status = 1; /* service ID not supported */
    r.service_id = m->service_id;
    if (ah) {
      send_msg(ah, &r);
      ibv_destroy_ah(ah);
    }
    return;
  }
  struct cma_id *c = child_new(l, gid);
  if (!c)
    return;
  if (!parse_cma_hdr(c, m->priv))
    memcpy(&c->id.route.addr.src_storage, &g.addr, sizeof(g.addr));
  sa_set_port(&c->id.route.addr.src_addr, sa_port(&l->id.route.addr.src_addr));
  c->state = ST_SIDR_RCVD;
  c->rcid = m->local_id;
  c->tid = m->tid;
  c->sid = m->service_id;
  struct cma_ev *e = ev_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  if (!e)
    return;
  e->owner = l;
  e->ev.listen_id = &l->id;
  memcpy(e->priv, m->priv + CMA_HDR_LEN, m->priv_len - CMA_HDR_LEN);
  e->ev.param.ud.private_data = e->priv;
  e->ev.param.ud.private_data_len = (uint8_t)(m->priv_len - CMA_HDR_LEN);
  fill_ah_attr(&e->ev.param.ud.ah_attr, gid);
  ev_push(e);
}

static void on_rep(struct cma_id *p, const struct uroce_cm_msg *m) {
  if (p->state == ST_EST || p->state == ST_REP_RCVD) {
    if (p->state == ST_EST) { /* our RTU was lost */
      struct uroce_cm_msg r = {.attr_id = UROCE_CM_RTU, .tid = p->tid};
      r.local_id = p->lcid;
      r.remote_id = p->rcid;
      send_msg(p->ah, &r);
    }
    return;
  }
  if (p->state != ST_REQ_SENT)
    return;
  p->deadline = 0;
  p->rcid = m->local_id;
  p->rqpn = m->qpn;
  p->rpsn = m->psn;
  if (m->resp_res < p->init_depth)
    p->init_depth = m->resp_res;
  if (!p->id.qp) {
    p->state = ST_REP_RCVD;
    struct cma_ev *e = ev_new(p, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
    if (e) {
      ev_priv(e, m->priv, m->priv_len);
      e->ev.param.conn.responder_resources = m->init_depth;
      e->ev.param.conn.initiator_depth = m->resp_res;
      e->ev.param.conn.flow_control = m->e2e_fc;
      e->ev.param.conn.rnr_retry_count = m->rnr_retry;
      e->ev.param.conn.srq = m->srq;
      e->ev.param.conn.qp_num = m->qpn;
      ev_push(e);
    }
    return;
  }
  int rv = qp_rtr_rts(p);
  if (rv) {
    struct uroce_cm_msg r = {.attr_id = UROCE_CM_REJ, .tid = p->tid};
    r.local_id = p->lcid;
    r.remote_id = p->rcid;
    r.msg = 1;
    r.reason = 3; /* no resources */
    send_msg(p->ah, &r);
    p->state = ST_ROUTE;
    ev_simple(p, RDMA_CM_EVENT_CONNECT_ERROR, -rv);
    return;
  }
  struct uroce_cm_msg r = {.attr_id = UROCE_CM_RTU, .tid = p->tid};
  r.local_id = p->lcid;
  r.remote_id = p->rcid;
  send_msg(p->ah, &r);
  p->state = ST_EST;
  struct cma_ev *e = ev_new(p, RDMA_CM_EVENT_ESTABLISHED, 0);
  if (e) {
    ev_priv(e, m->priv, m->priv_len);
    e->ev.param.conn.responder_resources = m->init_depth;
    e->ev.param.conn.initiator_depth = m->resp_res;
    e->ev.param.conn.qp_num = m->qpn;
    ev_push(e);
  }
}

static void on_mad(const uint8_t *buf, size_t len) {
  struct uroce_cm_msg m;
  uint8_t gid[16];
  /* The GRH: for IPv4 the IP header sits in its last 20 bytes. */
  if ((buf[20] >> 4) == 4) {
    memcpy(gid, v4pfx, 12);
    memcpy(gid + 12, buf + 32, 4);
  } else {
    memcpy(gid, buf + 8, 16);
  }
  if (len < GRH || uroce_cm_parse(buf + GRH, len - GRH, &m) ||
      m.method != UROCE_MAD_METHOD_SEND)
    return;
  struct cma_id *p;
  switch (m.attr_id) {
  case UROCE_CM_REQ:
    on_req(&m, gid);
    return;
  case UROCE_CM_SIDR_REQ:
    on_sidr_req(&m, gid);
    return;
  case UROCE_CM_SIDR_REP:
    for (p = g.ids; p; p = p->next)
      if (p->state == ST_SIDR_SENT && p->lcid == m.local_id)
        break;
    if (!p)
      return;
    p->deadline = 0;
    p->state = m.status ? ST_ROUTE : ST_EST;
    struct cma_ev *e = ev_new(
        p, m.status ? RDMA_CM_EVENT_UNREACHABLE : RDMA_CM_EVENT_ESTABLISHED,
        m.status ? -ECONNRESET : 0);
    if (!e)
      return;
    memcpy(e->priv, m.priv, m.priv_len);
    e->ev.param.ud.private_data = e->priv;
    e->ev.param.ud.private_data_len = m.priv_len;
    fill_ah_attr(&e->ev.param.ud.ah_attr, gid);
    e->ev.param.ud.qp_num = m.qpn;
    e->ev.param.ud.qkey = m.qkey;
    ev_push(e);
    return;
  case UROCE_CM_DREQ:
    p = find_lcid(m.remote_id);
    reply_to(&m, gid, UROCE_CM_DREP, 0);
    if (p && p->rcid == m.local_id &&
        (p->state == ST_EST || p->state == ST_REP_SENT ||
         p->state == ST_DREQ_SENT)) {
      p->deadline = 0;
      p->state = ST_DISC;
      ev_simple(p, RDMA_CM_EVENT_DISCONNECTED, 0);
    }
    return;
  }
  p = find_lcid(m.remote_id);
  if (!p)
    return;
  switch (m.attr_id) {
  case UROCE_CM_REP:
    on_rep(p, &m);
    break;
  case UROCE_CM_RTU:
    if (p->state == ST_REP_SENT) {
      p->deadline = 0;
      p->state = ST_EST;
      ev_simple(p, RDMA_CM_EVENT_ESTABLISHED, 0);
    }
    break;
  case UROCE_CM_MRA:
    if (p->deadline) { /* the peer needs longer: wait what it says */
      uint64_t t = 4096ull << (m.service_timeout < 31 ? m.service_timeout : 31);
      p->deadline = mono_ns() + t + CM_RETRY_MS * 1000000ull;
    }
    break;
  case UROCE_CM_REJ:
    if (p->state == ST_REQ_SENT || p->state == ST_REP_SENT ||
        p->state == ST_REP_RCVD) {
      p->deadline = 0;
      p->state = ST_ROUTE;
      struct cma_ev *e = ev_new(p, RDMA_CM_EVENT_REJECTED, m.reason);
      if (e) {
        ev_priv(e, m.priv, m.priv_len);
        ev_push(e);
      }
    }
    break;
  case UROCE_CM_DREP:
    if (p->state == ST_DREQ_SENT) {
      p->deadline = 0;
      p->state = ST_DISC;
      ev_simple(p, RDMA_CM_EVENT_DISCONNECTED, 0);
    }
    break;
  }
}

static void on_timers(uint64_t now) {
  for (struct cma_id *p = g.ids; p; p = p->next) {
    if (!p->deadline || now < p->deadline)
      continue;
    if (p->tries < CM_MAX_TRIES) {
      p->tries++;
      p->deadline = now + CM_RETRY_MS * 1000000ull;
      send_mad(p->ah, p->mad);
      continue;
    }
    p->deadline = 0;
    switch (p->state) {
    case ST_REQ_SENT:
    case ST_SIDR_SENT:
      p->state = ST_ROUTE;
      ev_simple(p, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      break;
    case ST_REP_SENT:
      p->state = ST_DISC;
      ev_simple(p, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
      break;
    case ST_DREQ_SENT:
      p->state = ST_DISC;
      ev_simple(p, RDMA_CM_EVENT_DISCONNECTED, 0);
      break;
    default:
      break;
    }
  }
}

static void *cm_thread(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&g.lock);
    uint64_t now = mono_ns(), next = UINT64_MAX;
    for (struct cma_id *p = g.ids; p; p = p->next)
      if (p->deadline && p->deadline < next)
        next = p->deadline;
    pthread_mutex_unlock(&g.lock);
    int ms = next == UINT64_MAX ? -1
             : next <= now      ? 0
                                : (int)((next - now) / 1000000 + 1);
    struct pollfd pf[2] = {{.fd = g.cch->fd, .events = POLLIN},
                           {.fd = g.wake[0], .events = POLLIN}};
    if (poll(pf, 2, ms) < 0 && errno != EINTR)
      return NULL;
    if (pf[1].revents) {
      char b[64];
      while (read(g.wake[0], b, sizeof(b)) > 0) {
      }
    }
    pthread_mutex_lock(&g.lock);
    if (pf[0].revents) {
      struct ibv_cq *cq;
      void *cctx;
      if (ibv_get_cq_event(g.cch, &cq, &cctx) == 0) {
        ibv_ack_cq_events(cq, 1);
        ibv_req_notify_cq(g.cq, 0);
      }
    }
    struct ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(g.cq, 16, wc)) > 0)
      for (int i = 0; i < n; i++) {
        if (!(wc[i].opcode & IBV_WC_RECV))
          continue;
        int slot = (int)wc[i].wr_id;
        if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len <= RBUF)
          on_mad(g.buf + (size_t)slot * RBUF, wc[i].byte_len);
        post_recv(slot);
      }
    on_timers(mono_ns());
    pthread_mutex_unlock(&g.lock);
  }
  return NULL;
}

/* At exit, as the kernel does when a process's rdma_cm file closes: each
 * connection still up gets a DREQ, so that the peer does not wait out its
 * own DREQ's retries on a CM that is gone. Signaled sends, polled for a
 * moment so that they leave before the device closes. */
__attribute__((destructor)) static void cm_fini(void) {
  if (g.inited != 1)
    return;
  pthread_mutex_lock(&g.lock);
  int sent = 0;
  for (struct cma_id *p = g.ids; p; p = p->next) {
    if (p->id.qp_type == IBV_QPT_UD || !p->ah ||
        (p->state != ST_EST && p->state != ST_REP_SENT))
      continue;
    struct uroce_cm_msg m = {.attr_id = UROCE_CM_DREQ, .tid = p->tid};
    m.local_id = p->lcid;
    m.remote_id = p->rcid;
    m.qpn = p->rqpn;
    uint8_t mad[UROCE_MAD_LEN];
    if (uroce_cm_build(&m, mad))
      continue;
    struct ibv_sge sge = {.addr = (uintptr_t)mad, .length = UROCE_MAD_LEN};
    struct ibv_send_wr wr = {.sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED},
                       *bad;
    wr.wr.ud.ah = p->ah;
    wr.wr.ud.remote_qpn = 1;
    wr.wr.ud.remote_qkey = UROCE_GSI_QKEY;
    if (ibv_post_send(g.qp1, &wr, &bad) == 0)
      sent++;
    p->state = ST_DISC;
  }
  uint64_t end = mono_ns() + 200000000ull;
  while (sent > 0 && mono_ns() < end) {
    struct ibv_wc wc[8];
    int n = ibv_poll_cq(g.cq, 8, wc);
    for (int i = 0; i < n; i++)
      if (!(wc[i].opcode & IBV_WC_RECV))
        sent--;
  }
  pthread_mutex_unlock(&g.lock);
}

/* ---- event channels ---- */

RC_EXPORT struct rdma_event_channel *rdma_create_event_channel(void) {
  struct cma_chan *c = calloc(1, sizeof(*c));
  if (!c)
    return NULL;
  /* An eventfd in semaphore mode: each read takes one event's count, and
   * a thread blocked in rdma_get_cm_event stays blocked when another
   * closes the channel, as with the kernel's rdma_cm file. */
  if (dev_init() < 0 ||
      (c->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE)) < 0) {
    int e = g.inited < 0 ? -g.inited : errno;
    free(c);
    errno = e;
    return NULL;
  }
  return &c->ch;
}

static void chan_free(struct cma_chan *c) {
  close(c->ch.fd);
  free(c);
}

/* A thread in rdma_get_cm_event found its channel destroyed: the kernel's
 * rdma_cm would keep it waiting (a read on a file closed by another
 * thread never returns), and so does this, after freeing the channel if
 * it is the last one out. pause() is a cancellation point, like read(). */
static void chan_gone(struct cma_chan *c) {
  bool last = --c->readers == 0;
  pthread_mutex_unlock(&g.lock);
  if (last)
    chan_free(c);
  for (;;)
    pause();
}

RC_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *ch) {
  if (!ch)
    return;
  struct cma_chan *c = (struct cma_chan *)(void *)ch;
  pthread_mutex_lock(&g.lock);
  for (struct cma_ev *e = c->head, *n; e; e = n) {
    n = e->next;
    e->owner->events--;
    free(e);
  }
  c->head = c->tail = NULL;
  /* Ids still on it (a misuse) get no more events rather than a dangling
   * channel. */
  for (struct cma_id *p = g.ids; p; p = p->next)
    if (p->id.channel == ch)
      p->id.channel = NULL;
  pthread_cond_broadcast(&g.cond);
  /* A thread still waiting on it keeps it (and its eventfd, which nobody
   * writes to any more) until it leaves; one that never does keeps it. */
  c->dead = true;
  bool busy = c->readers > 0;
  pthread_mutex_unlock(&g.lock);
  if (!busy)
    chan_free(c);
}

RC_EXPORT int rdma_get_cm_event(struct rdma_event_channel *ch,
                                struct rdma_cm_event **event) {
  if (!ch || !event)
    return fail(EINVAL);
  struct cma_chan *c = (struct cma_chan *)(void *)ch;
  pthread_mutex_lock(&g.lock);
  c->readers++;
  pthread_mutex_unlock(&g.lock);
  for (;;) {
    uint64_t n;
    ssize_t r = read(c->ch.fd, &n, sizeof(n));
    int err = errno;
    pthread_mutex_lock(&g.lock);
    if (c->dead)
      chan_gone(c); /* does not return */
    if (r != sizeof(n)) {
      c->readers--;
      pthread_mutex_unlock(&g.lock);
      if (r < 0) {
        errno = err;
        return -1; /* EAGAIN on a non-blocking channel */
      }
      return fail(EIO);
    }
    struct cma_ev *e = c->head;
    if (e) {
      c->head = e->next;
      if (!c->head)
        c->tail = NULL;
      c->readers--;
    }
    pthread_mutex_unlock(&g.lock);
    if (e) { /* none: its id was destroyed before the event was taken */
      *event = &e->ev;
      return 0;
    }
  }
}

RC_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event) {
  if (!event)
    return fail(EINVAL);
  struct cma_ev *e = (struct cma_ev *)(void *)event;
  pthread_mutex_lock(&g.lock);
  e->owner->events--;
  pthread_cond_broadcast(&g.cond);
  pthread_mutex_unlock(&g.lock);
  free(e);
  return 0;
}

RC_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event) {
  static const char *const n[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",
      "RDMA_CM_EVENT_ROUTE_RESOLVED",  "RDMA_CM_EVENT_ROUTE_ERROR",
      "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",
      "RDMA_CM_EVENT_REJECTED",        "RDMA_CM_EVENT_ESTABLISHED",
      "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",
      "RDMA_CM_EVENT_ADDR_CHANGE",     "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
  return (unsigned)event < sizeof(n) / sizeof(n[0]) ? n[event]
                                                    : "UNKNOWN EVENT";
}

/* For synchronous ids (no channel given): waits for the event that ends
 * the operation just started and turns it into a return value. */
static int sync_wait(struct cma_id *p, enum rdma_cm_event_type want,
                     struct rdma_cm_event **keep) {
  if (!p->sync)
    return 0;
  struct rdma_cm_event *ev;
  if (rdma_get_cm_event(p->id.channel, &ev))
    return -1;
  int ok = ev->event == want, st = ev->status;
  if (ok && keep) {
    *keep = ev;
    return 0;
  }
  rdma_ack_cm_event(ev);
  if (ok)
    return 0;
  return fail(st < 0 ? -st : ECONNREFUSED);
}

/* ---- ids ---- */

RC_EXPORT int rdma_create_id(struct rdma_event_channel *channel,
                             struct rdma_cm_id **id, void *context,
                             enum rdma_port_space ps) {
  if (!id)
    return fail(EINVAL);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB &&
      ps != RDMA_PS_IPOIB)
    return fail(EPROTONOSUPPORT);
  if (dev_init() < 0)
    return fail(-g.inited);
  struct cma_id *p = calloc(1, sizeof(*p));
  if (!p)
    return fail(ENOMEM);
  if (!channel) {
    channel = rdma_create_event_channel();
    if (!channel) {
      free(p);
      return -1;
    }
    p->own_chan = (struct cma_chan *)(void *)channel;
    p->sync = true;
  }
  p->id.channel = channel;
  p->id.context = context;
  p->id.ps = ps;
  p->id.qp_type =
      ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
  p->id.route.addr.addr.ibaddr.pkey = htons(0xFFFF);
  p->retry_count = 7;
  p->rnr_retry = 7;
  pthread_mutex_lock(&g.lock);
  p->next = g.ids;
  g.ids = p;
  pthread_mutex_unlock(&g.lock);
  *id = &p->id;
  return 0;
}

static void unlink_id(struct cma_id *p) {
  for (struct cma_id **pp = &g.ids; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      return;
    }
}

RC_EXPORT int rdma_destroy_id(struct rdma_cm_id *id) {
  if (!id)
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  pthread_mutex_lock(&g.lock);
  /* Tell the peer, as the kernel's CM does for an id destroyed while
   * connected or while a request waits for an answer. */
  struct uroce_cm_msg m = {.tid = p->tid};
  m.local_id = p->lcid;
  m.remote_id = p->rcid;
  bool ud = p->id.qp_type == IBV_QPT_UD; /* SIDR has no connection */
  if (!ud && (p->state == ST_EST || p->state == ST_REP_SENT)) {
    m.attr_id = UROCE_CM_DREQ;
    m.qpn = p->rqpn;
    send_msg(p->ah, &m);
  } else if (!ud && p->state == ST_REQ_RCVD) {
    m.attr_id = UROCE_CM_REJ;
    m.reason = 28;
    send_msg(p->ah, &m);
  }
  unlink_id(p);
  /* Events not yet taken go; taken ones must be acknowledged first. */
  struct cma_chan *c = chan_of(p);
  for (struct cma_ev **pe = c ? &c->head : NULL; pe && *pe;) {
    struct cma_ev *e = *pe;
    if (e->ev.id == id || e->owner == p) {
      *pe = e->next;
      e->owner->events--;
      free(e);
    } else {
      pe = &e->next;
    }
  }
  if (c) {
    c->tail = NULL;
    for (struct cma_ev *e = c->head; e; e = e->next)
      c->tail = e;
  }
  while (p->events && p->id.channel)
    pthread_cond_wait(&g.cond, &g.lock);
  pthread_mutex_unlock(&g.lock);
  if (p->ah)
    ibv_destroy_ah(p->ah);
  if (p->own_chan)
    rdma_destroy_event_channel(&p->own_chan->ch);
  free(p->id.route.path_rec == &p->path ? NULL : p->id.route.path_rec);
  free(p);
  return 0;
}

static bool port_used(enum rdma_port_space ps, uint16_t port) {
  for (struct cma_id *p = g.ids; p; p = p->next)
    if (p->state != ST_IDLE && !p->listen && p->id.ps == ps &&
        sa_port(&p->id.route.addr.src_addr) == port)
      return true;
  return false;
}

static int bind_locked(struct cma_id *p, const struct sockaddr *sa) {
  if (p->state != ST_IDLE)
    return EINVAL;
  const struct sockaddr *local = (const struct sockaddr *)(void *)&g.addr;
  if (sa && sa->sa_family != AF_INET && sa->sa_family != AF_INET6 &&
      sa->sa_family != AF_IB)
    return EAFNOSUPPORT;
  if (sa && sa->sa_family == AF_IB)
    return EAFNOSUPPORT;
  if (sa && !sa_is_any(sa)) {
    uint8_t gid[16];
    addr_to_gid(sa, gid);
    if (memcmp(gid, g.gid, 16))
      return EADDRNOTAVAIL; /* not the uroce device's address */
  }
  uint16_t port = sa ? sa_port(sa) : 0;
  if (port && port_used(p->id.ps, port))
    return EADDRINUSE;
  if (!port) {
    for (int i = 0; i < 28000; i++) {
      port = g.next_port++;
      if (g.next_port < 32768 || g.next_port > 60999)
        g.next_port = 32768;
      if (!port_used(p->id.ps, port))
        break;
    }
  }
  struct rdma_addr *a = &p->id.route.addr;
  memset(&a->src_storage, 0, sizeof(a->src_storage));
  if (sa && sa_is_any(sa) && sa->sa_family == local->sa_family)
    memcpy(&a->src_storage, sa, sa_len(sa));
  else
    memcpy(&a->src_storage, local, sa_len(local));
  sa_set_port(&a->src_addr, port);
  memcpy(a->addr.ibaddr.sgid.raw, g.gid, 16);
  p->id.verbs = g.ctx;
  p->id.port_num = 1;
  p->state = ST_BOUND;
  return 0;
}

RC_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr) {
  if (!id || !addr)
    return fail(EINVAL);
  pthread_mutex_lock(&g.lock);
  int rv = bind_locked(priv_of(id), addr);
  pthread_mutex_unlock(&g.lock);
  return rv ? fail(rv) : 0;
}

RC_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src,
                                struct sockaddr *dst, int timeout_ms) {
  (void)timeout_ms;
  if (!id || !dst)
    return fail(EINVAL);
  if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6)
    return fail(EAFNOSUPPORT);
  struct cma_id *p = priv_of(id);
  pthread_mutex_lock(&g.lock);
  int rv = 0;
  if (p->state == ST_IDLE)
    rv = bind_locked(p, src);
  else if (p->state != ST_BOUND)
    rv = EINVAL;
  if (rv) {
    pthread_mutex_unlock(&g.lock);
    return fail(rv);
  }
  struct rdma_addr *a = &p->id.route.addr;
  memset(&a->dst_storage, 0, sizeof(a->dst_storage));
  memcpy(&a->dst_storage, dst, sa_len(dst));
  addr_to_gid(dst, p->rgid);
  if (dst->sa_family == AF_INET6 && !memcmp(p->rgid, v4pfx, 12)) {
    /* ::ffff:a.b.c.d (what getaddrinfo gives with AI_V4MAPPED) is IPv4 */
    struct sockaddr_in *s4 = &a->dst_sin;
    uint16_t port = htons(sa_port(dst));
    memset(&a->dst_storage, 0, sizeof(a->dst_storage));
    s4->sin_family = AF_INET;
    s4->sin_port = port;
    memcpy(&s4->sin_addr, p->rgid + 12, 4);
    dst = &a->dst_addr;
  }
  /* RoCEv2 over uroce: the peer's GID is its IP address (IPv4-mapped);
   * the kernel routes the UDP datagrams, so there is no neighbour to
   * resolve. A destination of another family than ours is unreachable. */
  bool ok = dst->sa_family == ((struct sockaddr *)(void *)&g.addr)->sa_family;
  memcpy(a->addr.ibaddr.dgid.raw, p->rgid, 16);
  if (ok) {
    if (sa_is_any(dst)) /* the wildcard means this host */
      memcpy(p->rgid, g.gid, 16);
    p->state = ST_ADDR;
  }
  ev_simple(p, ok ? RDMA_CM_EVENT_ADDR_RESOLVED : RDMA_CM_EVENT_ADDR_ERROR,
            ok ? 0 : -EHOSTUNREACH);
  pthread_mutex_unlock(&g.lock);
  return sync_wait(p, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
}

RC_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms) {
  (void)timeout_ms;
  if (!id)
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  pthread_mutex_lock(&g.lock);
  if (p->state != ST_ADDR) {
    pthread_mutex_unlock(&g.lock);
    return fail(EINVAL);
  }
  struct ibv_sa_path_rec *r = &p->path;
  memset(r, 0, sizeof(*r));
  memcpy(r->sgid.raw, g.gid, 16);
  memcpy(r->dgid.raw, p->rgid, 16);
  r->hop_limit = 64;
  r->reversible = 1;
  r->pkey = htons(0xFFFF);
  r->mtu_selector = 2;
  r->mtu = g.mtu;
  r->rate_selector = 2;
  r->rate = 3;
  r->packet_life_time_selector = 2;
  r->packet_life_time = 13;
  r->numb_path = 1;
  p->id.route.path_rec = r;
  p->id.route.num_paths = 1;
  p->ah = p->ah ? p->ah : ah_to(p->rgid);
  bool ok = p->ah != NULL;
  if (ok)
    p->state = ST_ROUTE;
  ev_simple(p, ok ? RDMA_CM_EVENT_ROUTE_RESOLVED : RDMA_CM_EVENT_ROUTE_ERROR,
            ok ? 0 : -ENOMEM);
  pthread_mutex_unlock(&g.lock);
  return sync_wait(p, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
}

RC_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog) {
  if (!id)
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  pthread_mutex_lock(&g.lock);
  int rv = 0;
  if (p->state == ST_IDLE)
    rv = bind_locked(p, NULL);
  if (!rv && p->state != ST_BOUND)
    rv = EINVAL;
  if (!rv) {
    p->state = ST_LISTEN;
    p->backlog = backlog > 0 && backlog < MAX_BACKLOG ? backlog : MAX_BACKLOG;
  }
  pthread_mutex_unlock(&g.lock);
  return rv ? fail(rv) : 0;
}

static void put_cma_hdr(struct cma_id *p, uint8_t *h) {
  const struct rdma_addr *a = &p->id.route.addr;
  uint16_t port = htons(sa_port(&a->src_addr));
  h[0] = 0;
  memcpy(h + 2, &port, 2);
  if (a->src_addr.sa_family == AF_INET) {
    h[1] = 0x40;
    memcpy(h + 16, &a->src_sin.sin_addr, 4);
    memcpy(h + 32, &a->dst_sin.sin_addr, 4);
  } else {
    h[1] = 0x60;
    memcpy(h + 4, &a->src_sin6.sin6_addr, 16);
    memcpy(h + 20, &a->dst_sin6.sin6_addr, 16);
  }
}

static uint64_t service_id(struct cma_id *p) {
  return IB_PS_SID | (uint64_t)(p->id.ps & 0xFF) << 16 |
         sa_port(&p->id.route.addr.dst_addr);
}

RC_EXPORT int rdma_connect(struct rdma_cm_id *id,
                           struct rdma_conn_param *conn) {
  if (!id)
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  size_t plen = conn ? conn->private_data_len : 0;
  bool ud = p->id.qp_type == IBV_QPT_UD;
  if (conn && plen && !conn->private_data)
    return fail(EINVAL);
  if (plen > (ud ? 216u : 92u) - CMA_HDR_LEN)
    return fail(EINVAL);
  pthread_mutex_lock(&g.lock);
  if (p->state != ST_ROUTE) {
    pthread_mutex_unlock(&g.lock);
    return fail(EINVAL);
  }
  struct uroce_cm_msg m;
  memset(&m, 0, sizeof(m));
  p->lcid = rnd();
  p->tid = (uint64_t)rnd() << 32 | rnd();
  m.tid = p->tid;
  m.local_id = p->lcid;
  m.service_id = service_id(p);
  put_cma_hdr(p, m.priv);
  if (plen)
    memcpy(m.priv + CMA_HDR_LEN, conn->private_data, plen);
  m.priv_len = (uint8_t)(CMA_HDR_LEN + plen);
  if (ud) {
    m.attr_id = UROCE_CM_SIDR_REQ;
    m.pkey = 0xFFFF;
    p->state = ST_SIDR_SENT;
    send_retried(p, &m);
    pthread_mutex_unlock(&g.lock);
    return sync_wait(p, RDMA_CM_EVENT_ESTABLISHED, NULL);
  }
  /* Without parameters, as librdmacm: the most the device offers. */
  p->resp_res = conn ? conn->responder_resources : 16;
  p->init_depth = conn ? conn->initiator_depth : 16;
  if (p->resp_res > 16)
    p->resp_res = 16;
  if (p->init_depth > 16)
    p->init_depth = 16;
  p->retry_count = conn ? (conn->retry_count > 7 ? 7 : conn->retry_count) : 7;
  p->rnr_retry =
      conn ? (conn->rnr_retry_count > 7 ? 7 : conn->rnr_retry_count) : 7;
  p->psn = rnd() & 0xFFFFFF;
  p->mtu = g.mtu;
  m.attr_id = UROCE_CM_REQ;
  m.ca_guid = g.guid;
  m.qpn = p->id.qp ? p->id.qp->qp_num : (conn ? conn->qp_num : 0);
  m.resp_res = p->resp_res;
  m.init_depth = p->init_depth;
  m.remote_cm_timeout = CM_TIMEOUT;
  m.local_cm_timeout = CM_TIMEOUT;
  m.transport = 0;
  m.e2e_fc = conn ? conn->flow_control & 1 : 1;
  m.psn = p->psn;
  m.retry_count = p->retry_count;
  m.pkey = 0xFFFF;
  m.mtu = g.mtu;
  m.rnr_retry = p->rnr_retry;
  m.max_cm_retries = CM_MAX_TRIES;
  m.srq = p->id.srq || (p->id.qp && p->id.qp->srq) || (conn && conn->srq);
  m.slid = m.dlid = 0xFFFF;
  memcpy(m.sgid, g.gid, 16);
  memcpy(m.dgid, p->rgid, 16);
  m.hop_limit = 64;
  m.ack_timeout = 14;
  p->state = ST_REQ_SENT;
  send_retried(p, &m);
  pthread_mutex_unlock(&g.lock);
  return sync_wait(p, RDMA_CM_EVENT_ESTABLISHED, NULL);
}

RC_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn) {
  if (!id)
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  size_t plen = conn ? conn->private_data_len : 0;
  if (plen && !conn->private_data)
    return fail(EINVAL);
  pthread_mutex_lock(&g.lock);
  struct uroce_cm_msg m;
  memset(&m, 0, sizeof(m));
  if (p->state == ST_SIDR_RCVD) {
    if (plen > 136) {
      pthread_mutex_unlock(&g.lock);
      return fail(EINVAL);
    }
    m.attr_id = UROCE_CM_SIDR_REP;
    m.tid = p->tid;
    m.local_id = p->rcid;
    m.status = 0;
    m.qpn = p->id.qp ? p->id.qp->qp_num : (conn ? conn->qp_num : 0);
    m.qkey = UDP_QKEY;
    m.service_id = p->sid;
    if (plen)
      memcpy(m.priv, conn->private_data, plen);
    m.priv_len = (uint8_t)plen;
    send_msg(p->ah, &m);
    p->state = ST_EST;
    pthread_mutex_unlock(&g.lock);
    return 0;
  }
  if (p->state == ST_REP_RCVD) { /* rdma_accept as rdma_establish */
    pthread_mutex_unlock(&g.lock);
    return rdma_establish(id);
  }
  if (p->state != ST_REQ_RCVD || plen > 196) {
    pthread_mutex_unlock(&g.lock);
    return fail(EINVAL);
  }
  if (conn) { /* else what the REQ asked for (on_req) */
    p->resp_res = conn->responder_resources;
    p->init_depth = conn->initiator_depth;
  }
  if (p->resp_res > 16)
    p->resp_res = 16;
  if (p->init_depth > 16)
    p->init_depth = 16;
  if (conn && conn->rnr_retry_count < 8)
    p->rnr_retry = conn->rnr_retry_count;
  int rv = qp_rtr_rts(p);
  if (rv) {
    pthread_mutex_unlock(&g.lock);
    return fail(rv);
  }
  m.attr_id = UROCE_CM_REP;
  m.tid = p->tid;
  m.local_id = p->lcid;
  m.remote_id = p->rcid;
  m.qpn = p->id.qp ? p->id.qp->qp_num : (conn ? conn->qp_num : 0);
  m.psn = p->psn;
  m.resp_res = p->resp_res;
  m.init_depth = p->init_depth;
  m.target_ack_delay = 15;
  m.failover = 3; /* not supported */
  m.e2e_fc = 1;
  m.rnr_retry = p->rnr_retry;
  m.srq = p->id.srq || (p->id.qp && p->id.qp->srq) || (conn && conn->srq);
  m.ca_guid = g.guid;
  if (plen)
    memcpy(m.priv, conn->private_data, plen);
  m.priv_len = (uint8_t)plen;
  p->state = ST_REP_SENT;
  send_retried(p, &m);
  pthread_mutex_unlock(&g.lock);
  return sync_wait(p, RDMA_CM_EVENT_ESTABLISHED, NULL);
}

RC_EXPORT int rdma_establish(struct rdma_cm_id *id) {
  if (!id)
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  pthread_mutex_lock(&g.lock);
  if (p->state != ST_REP_RCVD) {
    pthread_mutex_unlock(&g.lock);
    return fail(EINVAL);
  }
  struct uroce_cm_msg m = {.attr_id = UROCE_CM_RTU, .tid = p->tid};
  m.local_id = p->lcid;
  m.remote_id = p->rcid;
  send_msg(p->ah, &m);
  p->state = ST_EST;
  pthread_mutex_unlock(&g.lock);
  return 0;
}

static int reject(struct rdma_cm_id *id, const void *pd, uint8_t len) {
  if (!id || (len && !pd))
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  pthread_mutex_lock(&g.lock);
  struct uroce_cm_msg m;
  memset(&m, 0, sizeof(m));
  m.tid = p->tid;
  int rv = 0;
  if (p->state == ST_SIDR_RCVD && len <= 136) {
    m.attr_id = UROCE_CM_SIDR_REP;
    m.local_id = p->rcid;
    m.status = 2; /* rejected by the consumer */
    m.service_id = p->sid;
  } else if ((p->state == ST_REQ_RCVD || p->state == ST_REP_RCVD) &&
             len <= 148) {
    m.attr_id = UROCE_CM_REJ;
    m.local_id = p->lcid;
    m.remote_id = p->rcid;
    m.msg = p->state == ST_REQ_RCVD ? 0 : 1;
    m.reason = 28; /* consumer reject */
  } else {
    rv = EINVAL;
  }
  if (!rv) {
    memcpy(m.priv, pd, len);
    m.priv_len = len;
    send_msg(p->ah, &m);
    p->state = ST_DISC;
  }
  pthread_mutex_unlock(&g.lock);
  return rv ? fail(rv) : 0;
}

RC_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
                          uint8_t private_data_len) {
  return reject(id, private_data, private_data_len);
}

RC_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
                              uint8_t private_data_len) {
  return reject(id, private_data, private_data_len);
}

RC_EXPORT int rdma_disconnect(struct rdma_cm_id *id) {
  if (!id)
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  if (p->id.qp) { /* as librdmacm does for InfiniBand and RoCE */
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    ibv_modify_qp(p->id.qp, &a, IBV_QP_STATE);
  }
  pthread_mutex_lock(&g.lock);
  int rv = 0;
  if (p->id.qp_type == IBV_QPT_UD) {
    rv = p->state == ST_EST ? 0 : EINVAL; /* nothing to tear down */
  } else if (p->state == ST_EST || p->state == ST_REP_SENT) {
    struct uroce_cm_msg m = {.attr_id = UROCE_CM_DREQ, .tid = p->tid};
    m.local_id = p->lcid;
    m.remote_id = p->rcid;
    m.qpn = p->rqpn;
    p->state = ST_DREQ_SENT;
    send_retried(p, &m);
  } else if (p->state != ST_DISC && p->state != ST_DREQ_SENT) {
    rv = EINVAL;
  }
  pthread_mutex_unlock(&g.lock);
  return rv ? fail(rv) : 0;
}

RC_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event) {
  if (!id)
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  if (event != IBV_EVENT_COMM_EST)
    return 0;
  pthread_mutex_lock(&g.lock);
  if (p->state == ST_REP_SENT) { /* data came before the RTU */
    p->deadline = 0;
    p->state = ST_EST;
    ev_simple(p, RDMA_CM_EVENT_ESTABLISHED, 0);
  }
  pthread_mutex_unlock(&g.lock);
  return 0;
}

RC_EXPORT int rdma_migrate_id(struct rdma_cm_id *id,
                              struct rdma_event_channel *channel) {
  if (!id || !channel)
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  pthread_mutex_lock(&g.lock);
  while (p->events)
    pthread_cond_wait(&g.cond, &g.lock);
  struct cma_chan *old = chan_of(p), *nc = (struct cma_chan *)(void *)channel;
  /* Queued events of this id move with it. */
  for (struct cma_ev **pe = &old->head; *pe;) {
    struct cma_ev *e = *pe;
    if (e->ev.id == id) {
      *pe = e->next;
      e->next = NULL;
      e->chan = nc;
      e->owner->events--;
      ev_push(e);
    } else {
      pe = &e->next;
    }
  }
  old->tail = NULL;
  for (struct cma_ev *e = old->head; e; e = e->next)
    old->tail = e;
  p->id.channel = channel;
  struct cma_chan *own = p->own_chan;
  p->own_chan = NULL;
  p->sync = false;
  pthread_mutex_unlock(&g.lock);
  if (own)
    rdma_destroy_event_channel(&own->ch);
  return 0;
}

RC_EXPORT int rdma_get_request(struct rdma_cm_id *listen,
                               struct rdma_cm_id **id) {
  if (!listen || !id)
    return fail(EINVAL);
  struct cma_id *l = priv_of(listen);
  if (!l->sync)
    return fail(EINVAL);
  struct rdma_cm_event *ev;
  for (;;) {
    if (rdma_get_cm_event(listen->channel, &ev))
      return -1;
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
      break;
    rdma_ack_cm_event(ev);
  }
  struct rdma_cm_id *c = ev->id;
  c->event = ev;
  /* The new id is synchronous too, on a channel of its own. */
  struct rdma_event_channel *ch = rdma_create_event_channel();
  if (ch) {
    pthread_mutex_lock(&g.lock);
    c->channel = ch;
    priv_of(c)->own_chan = (struct cma_chan *)(void *)ch;
    priv_of(c)->sync = true;
    pthread_mutex_unlock(&g.lock);
  }
  rdma_ack_cm_event(ev);
  c->event = NULL;
  if (l->has_ep_attr) {
    struct ibv_qp_init_attr a = l->ep_attr;
    c->pd = l->id.pd;
    if (rdma_create_qp(c, l->id.pd, &a)) {
      int e = errno;
      rdma_reject(c, NULL, 0);
      rdma_destroy_id(c);
      errno = e;
      return -1;
    }
  }
  *id = c;
  return 0;
}

RC_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id) {
  return htons(sa_port(&id->route.addr.src_addr));
}

RC_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id) {
  return htons(sa_port(&id->route.addr.dst_addr));
}

RC_EXPORT struct ibv_context **rdma_get_devices(int *num) {
  if (dev_init() < 0) {
    errno = -g.inited;
    return NULL;
  }
  struct ibv_context **l = calloc(2, sizeof(*l));
  if (!l) {
    errno = ENOMEM;
    return NULL;
  }
  l[0] = g.ctx;
  if (num)
    *num = 1;
  return l;
}

RC_EXPORT void rdma_free_devices(struct ibv_context **list) {
  free(list);
}

RC_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
                              void *optval, size_t optlen) {
  if (!id || (optlen && !optval))
    return fail(EINVAL);
  if (level == RDMA_OPTION_ID &&
      (optname == RDMA_OPTION_ID_TOS || optname == RDMA_OPTION_ID_REUSEADDR ||
       optname == RDMA_OPTION_ID_AFONLY ||
       optname == RDMA_OPTION_ID_ACK_TIMEOUT))
    return 0; /* accepted; uroce keeps its defaults (docs/rdmacm.md) */
  return fail(ENOSYS);
}

RC_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id,
                                struct ibv_qp_attr *qp_attr,
                                int *qp_attr_mask) {
  if (!id || !qp_attr || !qp_attr_mask)
    return fail(EINVAL);
  pthread_mutex_lock(&g.lock);
  int rv = make_qp_attr(priv_of(id), qp_attr, qp_attr_mask);
  pthread_mutex_unlock(&g.lock);
  return rv ? fail(rv) : 0;
}

/* ---- QPs and SRQs on an id ---- */

static int make_cqs(struct rdma_cm_id *id, uint32_t scqe, uint32_t rcqe) {
  if (!id->recv_cq) {
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->recv_cq_channel)
      return -1;
    id->recv_cq = ibv_create_cq(id->verbs, rcqe ? (int)rcqe : 1, id,
                                id->recv_cq_channel, 0);
    if (!id->recv_cq)
      return -1;
  }
  if (!id->send_cq && scqe) {
    id->send_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->send_cq_channel)
      return -1;
    id->send_cq =
        ibv_create_cq(id->verbs, (int)scqe, id, id->send_cq_channel, 0);
    if (!id->send_cq)
      return -1;
  }
  return 0;
}

RC_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id,
                                struct ibv_qp_init_attr_ex *attr) {
  if (!id || !attr || !id->verbs)
    return fail(EINVAL);
  struct cma_id *p = priv_of(id);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = id->pd ? id->pd : g.pd;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (attr->pd->context != id->verbs)
    return fail(EINVAL);
  if (attr->qp_type != id->qp_type)
    return fail(EINVAL);
  if (!attr->recv_cq || !attr->send_cq) {
    if (make_cqs(id, attr->send_cq ? 0 : attr->cap.max_send_wr,
                 attr->recv_cq ? 0 : attr->cap.max_recv_wr))
      return -1;
    if (!attr->recv_cq)
      attr->recv_cq = id->recv_cq;
    if (!attr->send_cq)
      attr->send_cq = id->send_cq;
  }
  if (!attr->srq && id->srq)
    attr->srq = id->srq;
  struct ibv_qp *qp = ibv_create_qp_ex(id->verbs, attr);
  if (!qp)
    return -1;
  id->qp = qp;
  if (!id->pd) /* rdma_reg_msgs and friends register on id->pd */
    id->pd = attr->pd;
  pthread_mutex_lock(&g.lock);
  int rv = qp_to(p, IBV_QPS_INIT);
  if (!rv && id->qp_type == IBV_QPT_UD) {
    p->psn = 0;
    rv = qp_to(p, IBV_QPS_RTR);
    if (!rv)
      rv = qp_to(p, IBV_QPS_RTS);
  }
  pthread_mutex_unlock(&g.lock);
  if (rv) {
    id->qp = NULL;
    ibv_destroy_qp(qp);
    return fail(rv > 0 ? rv : EINVAL);
  }
  return 0;
}

RC_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
                             struct ibv_qp_init_attr *qp_init_attr) {
  if (!id || !qp_init_attr)
    return fail(EINVAL);
  struct ibv_qp_init_attr_ex x;
  memset(&x, 0, sizeof(x));
  memcpy(&x, qp_init_attr, sizeof(*qp_init_attr));
  x.comp_mask = IBV_QP_INIT_ATTR_PD;
  x.pd = pd;
  int rv = rdma_create_qp_ex(id, &x);
  if (!rv) {
    qp_init_attr->send_cq = x.send_cq;
    qp_init_attr->recv_cq = x.recv_cq;
    qp_init_attr->srq = x.srq;
    qp_init_attr->cap = x.cap;
  }
  return rv;
}

RC_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id) {
  if (!id || !id->qp)
    return;
  ibv_destroy_qp(id->qp);
  id->qp = NULL;
}

static void destroy_cqs(struct rdma_cm_id *id) {
  if (id->send_cq && id->send_cq != id->recv_cq)
    ibv_destroy_cq(id->send_cq);
  if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel)
    ibv_destroy_comp_channel(id->send_cq_channel);
  if (id->recv_cq)
    ibv_destroy_cq(id->recv_cq);
  if (id->recv_cq_channel)
    ibv_destroy_comp_channel(id->recv_cq_channel);
  id->send_cq = id->recv_cq = NULL;
  id->send_cq_channel = id->recv_cq_channel = NULL;
}

RC_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id,
                                 struct ibv_srq_init_attr_ex *attr) {
  if (!id || !attr || !id->verbs)
    return fail(EINVAL);
  if (attr->comp_mask &
      ~(uint32_t)(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE))
    return fail(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
      attr->srq_type != IBV_SRQT_BASIC)
    return fail(EOPNOTSUPP);
  struct ibv_pd *pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd
                          ? attr->pd
                          : (id->pd ? id->pd : g.pd);
  struct ibv_srq_init_attr a = {.srq_context = attr->srq_context,
                                .attr = attr->attr};
  struct ibv_srq *srq = ibv_create_srq(pd, &a);
  if (!srq)
    return -1;
  attr->attr = a.attr;
  id->srq = srq;
  return 0;
}

RC_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
                              struct ibv_srq_init_attr *attr) {
  if (!attr)
    return fail(EINVAL);
  struct ibv_srq_init_attr_ex x;
  memset(&x, 0, sizeof(x));
  x.srq_context = attr->srq_context;
  x.attr = attr->attr;
  x.comp_mask = IBV_SRQ_INIT_ATTR_PD;
  x.pd = pd;
  int rv = rdma_create_srq_ex(id, &x);
  if (!rv)
    attr->attr = x.attr;
  return rv;
}

RC_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id) {
  if (!id || !id->srq)
    return;
  ibv_destroy_srq(id->srq);
  id->srq = NULL;
}

/* ---- endpoints and address info ---- */

RC_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
                               const struct rdma_addrinfo *hints,
                               struct rdma_addrinfo **res) {
  if (!res || (!node && !service))
    return fail(EINVAL);
  struct addrinfo h = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
  int flags = hints ? hints->ai_flags : 0;
  if (hints && hints->ai_family == AF_IB)
    return fail(EAFNOSUPPORT);
  h.ai_family = hints ? hints->ai_family : 0;
  if (flags & RAI_PASSIVE)
    h.ai_flags |= AI_PASSIVE;
  if (flags & RAI_NUMERICHOST)
    h.ai_flags |= AI_NUMERICHOST;
  int rv = getaddrinfo(node, service, &h, &ai);
  if (rv)
    return rv == EAI_SYSTEM ? -1 : fail(EADDRNOTAVAIL);
  struct rdma_addrinfo *r = calloc(1, sizeof(*r));
  struct sockaddr *sa = malloc(ai->ai_addrlen);
  if (!r || !sa) {
    free(r);
    free(sa);
    freeaddrinfo(ai);
    return fail(ENOMEM);
  }
  memcpy(sa, ai->ai_addr, ai->ai_addrlen);
  r->ai_flags = flags;
  r->ai_family = ai->ai_family;
  r->ai_port_space =
      hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  r->ai_qp_type = hints && hints->ai_qp_type        ? hints->ai_qp_type
                  : r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD
                                                    : IBV_QPT_RC;
  if (flags & RAI_PASSIVE) {
    r->ai_src_addr = sa;
    r->ai_src_len = ai->ai_addrlen;
  } else {
    r->ai_dst_addr = sa;
    r->ai_dst_len = ai->ai_addrlen;
  }
  freeaddrinfo(ai);
  *res = r;
  return 0;
}

RC_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res) {
  while (res) {
    struct rdma_addrinfo *n = res->ai_next;
    free(res->ai_src_addr);
    free(res->ai_dst_addr);
    free(res->ai_src_canonname);
    free(res->ai_dst_canonname);
    free(res->ai_route);
    free(res->ai_connect);
    free(res);
    res = n;
  }
}

RC_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
                             struct ibv_pd *pd,
                             struct ibv_qp_init_attr *qp_init_attr) {
  if (!id || !res)
    return fail(EINVAL);
  if (qp_init_attr) /* as librdmacm: the address info decides */
    qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
  struct rdma_cm_id *c;
  if (rdma_create_id(NULL, &c, NULL, (enum rdma_port_space)res->ai_port_space))
    return -1;
  int rv;
  if (res->ai_flags & RAI_PASSIVE)
    rv = rdma_bind_addr(c, res->ai_src_addr);
  else
    rv = rdma_resolve_addr(c, res->ai_src_addr, res->ai_dst_addr, 2000);
  if (!rv && !(res->ai_flags & RAI_PASSIVE))
    rv = rdma_resolve_route(c, 2000);
  if (!rv && qp_init_attr && !(res->ai_flags & RAI_PASSIVE))
    rv = rdma_create_qp(c, pd, qp_init_attr);
  if (rv) {
    int e = errno;
    rdma_destroy_id(c);
    errno = e;
    return -1;
  }
  if (pd)
    c->pd = pd;
  if (qp_init_attr && (res->ai_flags & RAI_PASSIVE)) {
    priv_of(c)->has_ep_attr = true;
    priv_of(c)->ep_attr = *qp_init_attr;
  }
  *id = c;
  return 0;
}

RC_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id) {
  if (!id)
    return;
  rdma_destroy_qp(id);
  destroy_cqs(id);
  rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

/* ---- what the drop-in does not offer ---- */

RC_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
                                  void *context) {
  (void)id, (void)addr, (void)context;
  return fail(ENOSYS);
}

RC_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
                                     struct rdma_cm_join_mc_attr_ex *attr,
                                     void *context) {
  (void)id, (void)attr, (void)context;
  return fail(ENOSYS);
}

RC_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id,
                                   struct sockaddr *addr) {
  (void)id, (void)addr;
  return fail(ENOSYS);
}

RC_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece) {
  (void)id, (void)ece;
  return fail(EOPNOTSUPP); /* as rdma-core without an ECE-capable device */
}

RC_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece) {
  (void)id, (void)ece;
  return fail(EOPNOTSUPP);
}
