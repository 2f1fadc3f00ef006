/* The uroce host model: every simulated NIC runs the real transport engine
 * (src/transport/engine.h) in phantom-payload mode.
 *
 * Per NIC: one struct uroce_eng (UROCE_ENG_PHANTOM, the configured
 * congestion-control module and its parameters), one PD, one MR that every
 * message uses (phantom: its address is only a number), one CQ. Per flow:
 * a connected RC QP pair, the requester on the source NIC and the
 * responder on the destination NIC, carrying the flow as RDMA WRITE, SEND
 * or READ work requests of at most UROCE_MAX_MSG bytes each (the last one
 * signaled). Both QPs are made when the flow starts, a global event that
 * may touch both NICs. The flow is done when that completion is polled at
 * its source; the requester QP goes then, the responder QP when the
 * simulator's FLOW_END event reaches the destination's NIC one lookahead
 * later (flow_end()): each end changes only its own NIC, so the two may
 * run on different threads (docs/sim.md, "Parallel simulation").
 *
 * Wire: pull() calls uroce_eng_write_pkt() when the port is free, so the
 * NIC sends one packet per serialisation time (line rate), and whatever
 * the engine holds back (window, DCQCN's per-QP rate limiter) shows up in
 * uroce_eng_next_expiry(), which next_time() reports. A packet becomes a
 * descriptor with a copy of its BTH and extension headers and the phantom
 * payload length; deliver() parses those bytes back with uroce_pkt_parse()
 * (the length counts the payload that is not there, which the engine
 * accepts in phantom mode) and calls uroce_eng_read_pkt() with the ECN bits
 * the switches left, so CE marks make the engine send CNPs.
 *
 * PFC: while the data priority is paused, pull() asks the engine only for
 * CNPs, ACKs and NAKs (uroce_eng_write_ctl_pkt), which use the control
 * priority; data stays in the engine. In the unusual setup where the
 * control priority is lossless and paused, control packets the engine
 * hands out are parked in a per-NIC FIFO (at most HOLD_MAX) that drains
 * first once the pause ends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"
#include "transport/cc_dcqcn.h"
#include "transport/cc_swift.h"
#include "transport/engine.h"
#include "uroce/uroce.h"
#include "wire/opcode.h"
#include "wire/psn.h"

#define HOLD_MAX 64
#define MAP_MIN 16            /* QPN map slots of a NIC with no QP yet */
#define PHANTOM_VA 0x10000ull /* any non-zero number */
#define RECV_TAG (1ull << 63) /* wr_id of receive WRs */
#define CQ_MIN 16 /* entries of a NIC's CQ before its QPs need more */
#define POLL_N 16

struct he_nic;

struct he_flow {
  struct sim_flow *f;
  struct he_nic *snd, *rcv;
  struct uroce_qp *sqp, *rqp;
  struct he_flow *wait_next;
  uint32_t una, epsn; /* progress PSNs last seen */
  uint64_t acked_pkts, rx_pkts;
  uint32_t req_next, rsp_next; /* first PSN never sent (retransmissions) */
  uint8_t ends;                /* ends that still hold it: 2, 1, 0 */
};

/* QPN -> flow, open addressing; snd tells which end this NIC is. */
struct he_slot {
  uint32_t qpn; /* 0 = empty (QPN 0 is never allocated) */
  uint32_t snd;
  struct he_flow *hf;
};

struct he_nic {
  struct sim *s;
  struct sim_nic *nic;
  struct uroce_eng *eng;
  struct uroce_pd *pd;
  struct uroce_mr *mr;
  struct uroce_cq *cq;
  struct he_slot *map;
  uint32_t map_mask, nqp, max_qp; /* the map holds nqp QPs */
  uint64_t cq_need; /* work requests its QPs may hold: CQEs one call makes */
  uint32_t cq_size;
  struct he_flow *wait_head, *wait_tail; /* flows waiting for a QP here */
  struct he_flow *orphans; /* orphan() */
  struct sim_pkt *held, *held_tail;
  uint32_t nheld;
  uint8_t mtu_enum, timeout;
  uint8_t data_sls; /* priorities (SLs) this NIC's data goes on */
  uint8_t paused;   /* during pull: the priorities paused */
  sim_time_t last_now;
  uint64_t failed; /* completions with an error status */
  struct uroce_tx_pkt tx;
  struct uroce_wc wc[POLL_N];
};

/* A connection: the flow record the packet path expects, with a flow of
 * its own that is not in the simulator's flow table. */
struct he_conn {
  struct he_flow hf;
  struct sim_flow f;
  uint32_t tag[2]; /* the collective's ranks at the src and dst ends */
};

static void gid_of(const struct sim *s, uint32_t nic, uint8_t g[16]) {
  memset(g, 0, 16);
  if (s->cfg.tp.ipv6) {
    g[0] = 0xFD; /* fd00::nic */
  } else {
    g[10] = g[11] = 0xFF; /* ::ffff:10.x.y.z */
    g[12] = 10;
  }
  g[13] = (uint8_t)(nic >> 16);
  g[14] = (uint8_t)(nic >> 8);
  g[15] = (uint8_t)nic;
}

static uint32_t nic_of_gid(const uint8_t g[16]) {
  return (uint32_t)g[13] << 16 | (uint32_t)g[14] << 8 | g[15];
}

static uint32_t wire_bytes(const struct sim_cfg *c, uint32_t bth_to_icrc) {
  return sim_frame_wire(c, bth_to_icrc);
}

/* ---- QPN map ---- */

static uint32_t slot_of(const struct he_nic *m, uint32_t qpn) {
  return (qpn * 0x9E3779B1u >> 7) & m->map_mask;
}

static struct he_slot *map_find(struct he_nic *m, uint32_t qpn) {
  for (uint32_t i = slot_of(m, qpn);; i = (i + 1) & m->map_mask) {
    struct he_slot *e = &m->map[i];
    if (!e->qpn || e->qpn == qpn)
      return e->qpn ? e : 0;
  }
}

static void map_put(struct he_nic *m, uint32_t qpn, struct he_flow *hf,
                    bool snd) {
  uint32_t i = slot_of(m, qpn);
  while (m->map[i].qpn)
    i = (i + 1) & m->map_mask;
  m->map[i] = (struct he_slot){qpn, snd, hf};
}

/* One engine event as a line of the run's trace: simulated time, the NIC,
 * then the event (docs/transport.md "Trace"). */
static void trace_line(void *ctx, const struct uroce_trace_ev *ev) {
  struct he_nic *m = ctx;
  /* The simulator's time, not the engine's: a QP's modify runs at the
   * time of the engine's last packet or timer. */
  char who[32], line[512];
  snprintf(who, sizeof who, "\"nic\": %u", m->nic->n.id);
  int n = uroce_eng_trace_line(ev, m->s->now / SIM_NS, who, line, sizeof line);
  if (n > 0)
    jsonl_put(m->s->trace, line, (size_t)n);
}

/* Makes room for one more QP: the map starts small (an idle NIC costs a
 * few hundred bytes here) and doubles at half load. 0 or -ENOMEM. */
static int map_reserve(struct he_nic *m) {
  uint32_t slots = m->map_mask + 1;
  if (2 * (m->nqp + 1) <= slots)
    return 0;
  struct he_slot *old = m->map, *map = calloc(2 * slots, sizeof(*map));
  if (!map)
    return -ENOMEM;
  m->map = map;
  m->map_mask = 2 * slots - 1;
  for (uint32_t i = 0; i < slots; i++)
    if (old[i].qpn)
      map_put(m, old[i].qpn, old[i].hf, old[i].snd);
  free(old);
  return 0;
}

static void map_del(struct he_nic *m, uint32_t qpn) {
  struct he_slot *e = map_find(m, qpn);
  if (!e)
    return;
  uint32_t i = (uint32_t)(e - m->map);
  m->map[i].qpn = 0;
  /* Re-insert the rest of the probe cluster. */
  for (uint32_t j = (i + 1) & m->map_mask; m->map[j].qpn;
       j = (j + 1) & m->map_mask) {
    struct he_slot x = m->map[j];
    m->map[j].qpn = 0;
    map_put(m, x.qpn, x.hf, x.snd);
  }
}

/* ---- NICs ---- */

static void nic_del(void *mp);

static void *nic_new(struct sim *s, struct sim_nic *nic) {
  const struct sim_transport_cfg *tp = &s->cfg.tp;
  struct he_nic *m = calloc(1, sizeof(*m));
  if (!m)
    return 0;
  m->s = s;
  m->nic = nic;
  /* Every flow needs a QP at each end: all-to-all needs 2 (n - 1), and a
   * collective's ranks that share a NIC need theirs each. */
  const struct sim_coll_cfg *cc = &s->cfg.wl.coll;
  uint64_t per_nic = s->cfg.wl.kind == SIM_WL_COLLECTIVE
                         ? sim_coll_per_host(cc) / sim_coll_nics_per_host(cc)
                         : 1;
  uint64_t q64 = 2 * (uint64_t)s->nnics * (per_nic ? per_nic : 1);
  uint32_t q = q64 > 4096 ? 4096 : (uint32_t)q64;
  m->max_qp = q < 16 ? 16 : q > 4096 ? 4096 : q;
  m->data_sls = (uint8_t)(1u << tp->data_prio);
  m->map = calloc(MAP_MIN, sizeof(*m->map));
  m->map_mask = MAP_MIN - 1;
  m->mtu_enum = UROCE_MTU_256;
  while ((256u << (m->mtu_enum - 1)) < tp->mtu)
    m->mtu_enum++;
  /* Retransmit timeout 4.096 us x 2^timeout: the nearest at or above. */
  uint64_t rto_ns = tp->rto / SIM_NS;
  m->timeout = 1;
  while ((4096ull << m->timeout) < rto_ns && m->timeout < 31)
    m->timeout++;
  bool dcqcn = tp->cc == SIM_CC_DCQCN;
  struct uroce_eng_cfg ec = {
      .seed = sim_seed(s->cfg.seed, 6, nic->n.id),
      .flags = UROCE_ENG_PHANTOM |
               (s->ooo ? UROCE_ENG_MULTIPATH : UROCE_ENG_STANDARD),
      .cc = dcqcn                    ? &uroce_cc_dcqcn
            : tp->cc == SIM_CC_SWIFT ? &uroce_cc_swift
                                     : 0,
      .cc_params = dcqcn ? &s->cfg.tp.dcqcn : 0,
      .max_qp = m->max_qp,
      .max_mr = 4,
      .max_unacked_psn = tp->window,
      .ack_every = tp->ack_every,
      .paths = tp->paths,
      .cnp_interval_ns = dcqcn ? tp->dcqcn.cnp_interval_ns : 0,
      .port_mtu = m->mtu_enum,
  };
  gid_of(s, nic->n.id, ec.gid);
  if (!m->map || uroce_eng_new(&m->eng, &ec) ||
      uroce_eng_pd_new(m->eng, &m->pd) ||
      uroce_eng_mr_reg(m->pd, (void *)(uintptr_t)PHANTOM_VA, UROCE_MAX_MSG,
                       UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_WRITE |
                           UROCE_ACCESS_REMOTE_READ,
                       &m->mr) ||
      uroce_eng_cq_new(m->eng, m->cq_size = CQ_MIN, &m->cq)) {
    nic_del(m);
    return 0;
  }
  /* The fabric's NICs, not the memory estimate's scratch ones. */
  if (s->trace && s->nics && nic->n.id < s->nnics && nic == &s->nics[nic->n.id])
    uroce_eng_set_trace(m->eng, trace_line, m);
  return m;
}

static void rebind(void *mp, struct sim *s) {
  ((struct he_nic *)mp)->s = s;
}

static void nic_del(void *mp) {
  struct he_nic *m = mp;
  /* A flow is freed by the last of its ends to let go, a waiting one by
   * the NIC it waits at; the QPs go with the engine. */
  for (uint32_t i = 0; m->map && i <= m->map_mask; i++)
    if (m->map[i].qpn && !--m->map[i].hf->ends) {
      struct he_flow *hf = m->map[i].hf;
      hf->f->st = 0;
      free(hf);
    }
  for (struct he_flow *w = m->wait_head, *n; w; w = n) {
    n = w->wait_next;
    w->f->st = 0;
    free(w);
  }
  for (struct he_flow *w = m->orphans, *n; w; w = n) {
    n = w->wait_next;
    if (w->f->st == w)
      w->f->st = 0;
    free(w); /* a connection's flow is its first member */
  }
  for (struct sim_pkt *p = m->held, *n; p; p = n) {
    n = p->next;
    sim_pkt_free(m->s, p);
  }
  uroce_eng_del(m->eng);
  free(m->map);
  free(m);
}

/* ---- flows ---- */

static void try_start(struct he_flow *hf, sim_time_t now);

/* The CQ is polled after every engine call, so one call's completions
 * must fit: at most one per work request the NIC's QPs hold, which their
 * capacities bound. The CQ grows with them (a NIC at rest keeps 16
 * entries, not a fixed 256: 11 KB of every idle NIC) and never shrinks. */
static uint32_t qp_wrs(struct uroce_qp *qp) {
  struct uroce_qp_attr a;
  struct uroce_qp_init_attr ia;
  return uroce_eng_qp_query(qp, &a, &ia)
             ? 0
             : ia.cap.max_send_wr + ia.cap.max_recv_wr;
}

static int qp_make(struct he_nic *m, struct uroce_qp_init_attr *ia,
                   struct uroce_qp **qp) {
  int rc = uroce_eng_qp_new(m->pd, ia, qp);
  if (rc)
    return rc;
  uint64_t need = m->cq_need + qp_wrs(*qp);
  uint32_t size = m->cq_size;
  while (size < need && size < (1u << 22))
    size *= 2;
  if (size < need || (size != m->cq_size && uroce_eng_cq_resize(m->cq, size))) {
    uroce_eng_qp_del(*qp);
    *qp = 0;
    return -ENOMEM;
  }
  m->cq_size = size;
  m->cq_need = need;
  return 0;
}

static void qp_drop(struct he_nic *m, struct uroce_qp *qp) {
  m->cq_need -= qp_wrs(qp);
  uroce_eng_qp_del(qp);
}

static int qp_connect(struct he_nic *m, struct uroce_qp *qp, uint32_t peer_nic,
                      uint32_t peer_qpn, uint16_t sport) {
  struct uroce_qp_attr a = {
      .qp_state = UROCE_QPS_RTS,
      .port_num = 1,
      .qp_access_flags = UROCE_ACCESS_REMOTE_WRITE | UROCE_ACCESS_REMOTE_READ,
      .ah_attr = {.sport = sport, .is_global = 1},
      .path_mtu = m->mtu_enum,
      .dest_qp_num = peer_qpn,
      .rq_psn = 0,
      .sq_psn = 0,
      .max_dest_rd_atomic = 16,
      .min_rnr_timer = 1,
      .timeout = m->timeout,
      .retry_cnt = m->s->cfg.tp.retry_cnt, /* 7: unlimited */
      .rnr_retry = 7,
      .max_rd_atomic = 16};
  gid_of(m->s, peer_nic, a.ah_attr.dgid);
  return uroce_eng_qp_connect(qp, &a);
}

static void poll_cq(struct he_nic *m, sim_time_t now);

/* A distributed run: a flow or connection both of whose ends run at
 * other ranks is in no map here; its source NIC frees it (nic_del). Its
 * wait_next is free: it waits for nothing any more. */
static void orphan(struct he_nic *m, struct he_flow *hf) {
  hf->wait_next = m->orphans;
  m->orphans = hf;
}

/* Whether this process runs m (a distributed run's rank runs some NICs;
 * the global events that make a flow's QPs run at every rank, and each
 * end is made where its NIC runs: connect_flow). */
static bool own(const struct he_nic *m) {
  return sim_mine(m->s, m->nic->n.part);
}


/* The posts of one end: the requester's sends (snd), or the responder's
 * receives (a SEND flow's). */
static int post_end(struct he_flow *hf, bool snd) {
  struct he_nic *a = hf->snd, *b = hf->rcv;
  struct sim_flow *f = hf->f;
  uint32_t nmsg = (uint32_t)((f->bytes + UROCE_MAX_MSG - 1) / UROCE_MAX_MSG);
  uint64_t left = f->bytes;
  int rc = 0;
  for (uint32_t i = 0; i < nmsg && !rc; i++) {
    uint32_t len = left < UROCE_MAX_MSG ? (uint32_t)left : UROCE_MAX_MSG;
    left -= len;
    if (!snd) {
      if (f->op != SIM_OP_SEND)
        break;
      struct uroce_recv_wr *rbad;
      struct uroce_sge rs = {PHANTOM_VA, UROCE_MAX_MSG, b->mr->lkey};
      struct uroce_recv_wr rw = {
          .wr_id = RECV_TAG | f->id, .sg_list = &rs, .num_sge = 1};
      rc = uroce_eng_qp_post_recv(hf->rqp, &rw, &rbad);
      continue;
    }
    struct uroce_send_wr *bad;
    struct uroce_sge sg = {PHANTOM_VA, len, a->mr->lkey};
    struct uroce_send_wr w = {
        .wr_id = f->id,
        .sg_list = &sg,
        .num_sge = 1,
        .opcode = f->op == SIM_OP_SEND   ? UROCE_WR_SEND
                  : f->op == SIM_OP_READ ? UROCE_WR_RDMA_READ
                                         : UROCE_WR_RDMA_WRITE,
        .send_flags = i + 1 == nmsg ? UROCE_SEND_SIGNALED : 0,
    };
    w.wr.rdma.remote_addr = PHANTOM_VA;
    w.wr.rdma.rkey = b->mr->rkey;
    rc = uroce_eng_qp_post_send(hf->sqp, &w, &bad);
  }
  return rc;
}

/* One end's QP (snd: the requester's at a, else the responder's at b),
 * made. */
static int end_qp(struct he_nic *m, uint32_t nsend, uint32_t nrecv,
                  sim_time_t now, struct uroce_qp **qp) {
  if (map_reserve(m))
    return -ENOMEM;
  /* The QP's congestion-control clock starts at the engine's time. */
  uroce_eng_handle_expiry(m->eng, now / SIM_NS);
  struct uroce_qp_init_attr ia = {
      .send_cq = m->cq,
      .recv_cq = m->cq,
      .cap = {.max_send_wr = nsend,
              .max_recv_wr = nrecv,
              .max_send_sge = 1,
              .max_recv_sge = 1},
      .qp_type = UROCE_QPT_RC,
  };
  return qp_make(m, &ia, qp);
}

static int make_end(struct he_flow *hf, bool snd, sim_time_t now) {
  struct sim_flow *f = hf->f;
  uint32_t nmsg = (uint32_t)((f->bytes + UROCE_MAX_MSG - 1) / UROCE_MAX_MSG);
  if (snd)
    return end_qp(hf->snd, nmsg, 1, now, &hf->sqp);
  return end_qp(hf->rcv, 1, f->op == SIM_OP_SEND ? nmsg : 1, now, &hf->rqp);
}

/* Creates the QP pair and posts the flow. Returns 0 or an engine error
 * (the other end undone). Each end is made, connected and posted where
 * its NIC runs: in a distributed run (par.c) at that NIC's rank, while
 * every rank runs this global event; its QPN and result then go to every
 * rank (sim_net_reduce, nothing in one process). */
static int connect_flow(struct he_flow *hf, sim_time_t now) {
  struct he_nic *a = hf->snd, *b = hf->rcv;
  bool oa = own(a), ob = own(b);
  struct sim *s = a->s;
  /* rc (as a count of errors, then the error), QPN of each end */
  int64_t v[4] = {0, 0, 0, 0};
  if (oa) {
    int rc = make_end(hf, true, now);
    v[0] = rc;
    v[1] = rc ? 0 : uroce_qp_num(hf->sqp);
  }
  if (ob) {
    int rc = make_end(hf, false, now);
    v[2] = rc;
    v[3] = rc ? 0 : uroce_qp_num(hf->rqp);
  }
  sim_net_reduce(s, v, 4, SIM_NET_SUM);
  int rc = v[0] ? (int)v[0] : (int)v[2];
  if (!rc) {
    int ra = oa ? qp_connect(a, hf->sqp, hf->f->dst, (uint32_t)v[3],
                             hf->f->sport)
                : 0;
    int rb = ob ? qp_connect(b, hf->rqp, hf->f->src, (uint32_t)v[1],
                             hf->f->sport)
                : 0;
    if (!rb && ob)
      rb = post_end(hf, false);
    if (!ra && oa)
      ra = post_end(hf, true);
    int64_t w[2] = {ra, rb};
    sim_net_reduce(s, w, 2, SIM_NET_SUM);
    rc = w[0] ? (int)w[0] : (int)w[1];
  }
  if (rc) {
    if (oa && hf->sqp)
      qp_drop(a, hf->sqp);
    if (ob && hf->rqp)
      qp_drop(b, hf->rqp);
    hf->sqp = hf->rqp = 0;
    return rc;
  }
  if (oa) {
    map_put(a, uroce_qp_num(hf->sqp), hf, true);
    a->data_sls |= (uint8_t)(1u << hf->f->sl);
    a->nqp++;
  }
  if (ob) {
    map_put(b, uroce_qp_num(hf->rqp), hf, false);
    b->data_sls |= (uint8_t)(1u << hf->f->sl);
    b->nqp++;
  }
  hf->ends = (uint8_t)(oa + ob); /* the ends this rank holds */
  if (!hf->ends) /* both at other ranks: freed with the NIC */
    orphan(a, hf);
  if (ob)
    poll_cq(b, now);
  if (oa)
    poll_cq(a, now);
  return 0;
}

static void wait_at(struct he_nic *m, struct he_flow *hf) {
  hf->wait_next = 0;
  if (m->wait_tail)
    m->wait_tail->wait_next = hf;
  else
    m->wait_head = hf;
  m->wait_tail = hf;
}

/* Starts a flow, or parks it at the NIC that has no QP left for it. */
static void try_start(struct he_flow *hf, sim_time_t now) {
  /* whether each end's NIC is full, from its rank */
  uint64_t v[2] = {own(hf->snd) && hf->snd->nqp >= hf->snd->max_qp,
                   own(hf->rcv) && hf->rcv->nqp >= hf->rcv->max_qp};
  sim_net_reduce(hf->snd->s, v, 2, SIM_NET_MAX);
  struct he_nic *full = v[0] ? hf->snd : v[1] ? hf->rcv : 0;
  if (full) {
    wait_at(full, hf);
    return;
  }
  int rc = connect_flow(hf, now);
  if (rc) {
    if (own(hf->snd)) {
      fprintf(stderr, "uroce sim: flow %u: cannot create its QPs: %s\n",
              hf->f->id, uroce_strerror(rc));
      hf->snd->failed++;
    }
    return;
  }
  /* Its requester may send now; the NIC event runs pull(). */
  sim_schedule_min(hf->snd->s, &hf->snd->nic->ev, now);
}

/* Flows parked at m get another chance: a QP was freed here. Starting
 * one makes QPs at both its ends, so it waits for a global event. */
static void retry(void *mp, sim_time_t now) {
  struct he_nic *m = mp;
  for (;;) {
    uint64_t room = own(m) && m->nqp < m->max_qp; /* from m's rank */
    sim_net_reduce(m->s, &room, 1, SIM_NET_MAX);
    if (!m->wait_head || !room)
      break;
    struct he_flow *hf = m->wait_head;
    m->wait_head = hf->wait_next;
    if (!m->wait_head)
      m->wait_tail = 0;
    try_start(hf, now);
  }
}

static void retry_waiting(struct he_nic *m) {
  if (m->wait_head)
    sim_nic_retry_later(m->s, m->nic);
}

static int post(void *mp, struct sim_flow *f, sim_time_t now) {
  struct he_nic *m = mp;
  struct he_flow *hf = calloc(1, sizeof(*hf));
  if (!hf)
    return -1;
  hf->f = f;
  hf->snd = m;
  hf->rcv = m->s->nics[f->dst].model;
  f->st = hf;
  try_start(hf, now);
  return 0;
}

/* Payload placed at the responder. */
static void rx_progress(struct he_flow *hf, uint32_t mtu) {
  struct sim_flow *f = hf->f;
  uint32_t epsn;
  uroce_eng_qp_progress(hf->rqp, 0, &epsn);
  hf->rx_pkts += (epsn - hf->epsn) & UROCE_PSN_MASK;
  hf->epsn = epsn;
  uint64_t b = hf->rx_pkts * mtu;
  f->rx_bytes = b < f->bytes ? b : f->bytes;
}

/* Reads the flow's progress out of the QP at one end: bytes acknowledged
 * at the requester (snd), bytes placed at the responder. Messages are
 * whole MTUs but the flow's last, so PSNs count bytes. */
static void progress(struct he_flow *hf, bool snd) {
  struct sim *s = hf->snd->s;
  struct sim_flow *f = hf->f;
  uint32_t mtu = s->cfg.tp.mtu, una;
  if (!snd) {
    if (f->op != SIM_OP_READ)
      rx_progress(hf, mtu);
    return;
  }
  uroce_eng_qp_progress(hf->sqp, &una, 0);
  hf->acked_pkts += (una - hf->una) & UROCE_PSN_MASK;
  hf->una = una;
  uint64_t b = hf->acked_pkts * mtu;
  if (b > f->bytes)
    b = f->bytes;
  if (b > f->acked)
    sim_flow_acked(s, f, b - f->acked);
  if (f->op == SIM_OP_READ)
    f->rx_bytes = f->acked;
}

/* The flow ended at its requester: its QP goes now, the responder's when
 * FLOW_END reaches the destination (flow_end). */
static void end_requester(struct he_flow *hf) {
  struct he_nic *a = hf->snd;
  struct sim_flow *f = hf->f;
  map_del(a, uroce_qp_num(hf->sqp));
  qp_drop(a, hf->sqp);
  hf->sqp = 0;
  a->nqp--;
  sim_flow_end_later(a->s, f);
  if (!--hf->ends) { /* a distributed run: the responder is another rank's */
    f->st = 0;
    free(hf);
  }
  retry_waiting(a);
}

/* The requester's last completion: the flow is done. */
static void finish(struct he_flow *hf, sim_time_t now) {
  struct he_nic *a = hf->snd;
  struct sim_flow *f = hf->f;
  if (f->acked < f->bytes)
    sim_flow_acked(a->s, f, f->bytes - f->acked);
  if (f->op == SIM_OP_READ)
    f->rx_bytes = f->bytes;
  sim_flow_done(a->s, f, now);
  end_requester(hf);
}

static void flow_end(void *mp, struct sim_flow *f, sim_time_t now) {
  struct he_nic *b = mp;
  struct he_flow *hf = f->st;
  (void)now;
  if (!hf || hf->rcv != b || !hf->rqp)
    return;
  map_del(b, uroce_qp_num(hf->rqp));
  qp_drop(b, hf->rqp);
  hf->rqp = 0;
  b->nqp--;
  if (!--hf->ends) {
    f->st = 0;
    free(hf);
  }
  retry_waiting(b);
}

/* ---- persistent connections (collectives) ---- */

static int post_coll_recv(struct he_nic *m, struct uroce_qp *qp) {
  struct uroce_sge sg = {PHANTOM_VA, UROCE_MAX_MSG, m->mr->lkey};
  struct uroce_recv_wr rw = {
      .wr_id = SIM_COLL_WRID | SIM_COLL_RECV, .sg_list = &sg, .num_sge = 1};
  struct uroce_recv_wr *bad;
  return uroce_eng_qp_post_recv(qp, &rw, &bad);
}

static struct he_flow *conn_make(struct sim *s, struct he_nic *a,
                                 struct he_nic *b, uint32_t nsend,
                                 uint32_t nrecv, uint32_t ta, uint32_t tb,
                                 uint64_t salt);

struct he_flow *sim_eng_conn_new(struct sim *s, uint32_t na, uint32_t nb,
                                 uint32_t nsend, uint32_t nrecv, uint32_t ta,
                                 uint32_t tb, uint64_t salt) {
  if (s->host != &sim_host_eng || na >= s->nnics || nb >= s->nnics || na == nb)
    return 0;
  struct he_nic *a = s->nics[na].model, *b = s->nics[nb].model;
  uint64_t full[2] = {own(a) && a->nqp >= a->max_qp,
                      own(b) && b->nqp >= b->max_qp}; /* from their ranks */
  sim_net_reduce(s, full, 2, SIM_NET_MAX);
  if (full[0] || full[1])
    return 0;
  return conn_make(s, a, b, nsend, nrecv, ta, tb, salt);
}

/* The connection's QP pair, connected, its receives posted, in the NICs'
 * maps. */
static struct he_flow *conn_make(struct sim *s, struct he_nic *a,
                                 struct he_nic *b, uint32_t nsend,
                                 uint32_t nrecv, uint32_t ta, uint32_t tb,
                                 uint64_t salt) {
  uint32_t na = a->nic->n.id, nb = b->nic->n.id;
  /* Each end is made where its NIC runs, as connect_flow does. */
  bool oa = own(a), ob = own(b);
  struct he_conn *c = calloc(1, sizeof(*c));
  if (!c) {
    fprintf(stderr, "uroce sim: out of memory for a connection\n");
    abort(); /* the other ranks would wait for this one */
  }
  /* Connections are numbered in creation order, which is deterministic.
   * A salt tells connections of one NIC pair apart (several ranks on a
   * NIC). */
  static const uint32_t id_mask = SIM_COLL_FLOW - 1;
  uint64_t h = sim_seed(s->cfg.seed, 7, ((uint64_t)na << 32) | nb);
  if (salt)
    h = sim_seed(h, 9, salt);
  c->tag[0] = ta;
  c->tag[1] = tb;
  c->f = (struct sim_flow){.id = SIM_COLL_FLOW | (uint32_t)(h & id_mask),
                           .src = na,
                           .dst = nb,
                           .finish = SIM_NEVER,
                           .failed = SIM_NEVER,
                           .sport = (uint16_t)(0xC000 | (h >> 32 & 0x3FFF)),
                           .sl = s->cfg.tp.data_prio};
  c->f.st = &c->hf;
  c->hf.f = &c->f;
  c->hf.snd = a;
  c->hf.rcv = b;
  /* freed by the second NIC deleted (a distributed run: of those here) */
  c->hf.ends = (uint8_t)(oa + ob);
  if (!c->hf.ends) /* both at other ranks: freed with the NIC */
    orphan(a, &c->hf);
  struct he_nic *m[2] = {a, b};
  struct uroce_qp **qp[2] = {&c->hf.sqp, &c->hf.rqp};
  int64_t v[4] = {0, 0, 0, 0}; /* rc, QPN of each end */
  for (int e = 0; e < 2; e++) {
    if (!(e ? ob : oa))
      continue;
    int rc = end_qp(m[e], nsend, nrecv, s->now, qp[e]);
    v[2 * e] = rc;
    v[2 * e + 1] = rc ? 0 : uroce_qp_num(*qp[e]);
  }
  sim_net_reduce(s, v, 4, SIM_NET_SUM);
  int rc = v[0] ? (int)v[0] : (int)v[2];
  if (!rc) {
    int64_t w[2] = {0, 0};
    for (int e = 0; e < 2; e++) {
      if (!(e ? ob : oa))
        continue;
      int r = qp_connect(m[e], *qp[e], e ? na : nb, (uint32_t)v[3 - 2 * e],
                         c->f.sport);
      for (uint32_t i = 0; i < nrecv && !r; i++)
        r = post_coll_recv(m[e], *qp[e]);
      w[e] = r;
    }
    sim_net_reduce(s, w, 2, SIM_NET_SUM);
    rc = w[0] ? (int)w[0] : (int)w[1];
  }
  if (rc) {
    for (int e = 0; e < 2; e++)
      if (*qp[e])
        qp_drop(m[e], *qp[e]);
    free(c);
    return 0;
  }
  for (int e = 0; e < 2; e++)
    if (e ? ob : oa) {
      map_put(m[e], uroce_qp_num(*qp[e]), &c->hf, !e);
      m[e]->nqp++;
    }
  return &c->hf;
}

int sim_eng_write_imm(struct sim *s, struct he_flow *c, uint32_t from,
                      uint32_t len, uint32_t imm_host, uint64_t wr_id) {
  bool fwd = from == c->f->src;
  struct he_nic *m = fwd ? c->snd : c->rcv, *peer = fwd ? c->rcv : c->snd;
  struct uroce_sge sg = {PHANTOM_VA, len, m->mr->lkey};
  struct uroce_send_wr w = {
      .wr_id = SIM_COLL_WRID | wr_id,
      .sg_list = &sg,
      .num_sge = len ? 1 : 0,
      .opcode = UROCE_WR_RDMA_WRITE_WITH_IMM,
      .send_flags = UROCE_SEND_SIGNALED,
      .imm_data = __builtin_bswap32(imm_host),
  };
  w.wr.rdma.remote_addr = PHANTOM_VA;
  w.wr.rdma.rkey = peer->mr->rkey;
  struct uroce_send_wr *bad;
  /* The QP's congestion-control clock follows the engine's time. */
  uroce_eng_handle_expiry(m->eng, s->now / SIM_NS);
  int rc = uroce_eng_qp_post_send(fwd ? c->sqp : c->rqp, &w, &bad);
  if (!rc)
    sim_schedule_min(s, &m->nic->ev, s->now);
  return rc;
}

/* A completion of a collective work request: repost a consumed receive
 * WQE, then hand it to the collective layer with the peer's NIC. */
static void coll_wc(struct he_nic *m, const struct uroce_wc *wc) {
  struct he_slot *e = map_find(m, wc->qp_num);
  if (!e)
    return;
  struct he_flow *hf = e->hf;
  if ((wc->wr_id & SIM_COLL_RECV) && wc->status == UROCE_WC_SUCCESS &&
      post_coll_recv(m, e->snd ? hf->sqp : hf->rqp))
    m->failed++;
  const struct he_conn *c = container_of(hf, struct he_conn, hf);
  sim_coll_wc(m->s, c->tag[e->snd ? 0 : 1], c->tag[e->snd ? 1 : 0], wc);
}

static void poll_cq(struct he_nic *m, sim_time_t now) {
  struct sim *s = m->s;
  int n;
  while ((n = uroce_eng_cq_poll(m->cq, POLL_N, m->wc)) > 0) {
    for (int i = 0; i < n; i++) {
      const struct uroce_wc *wc = &m->wc[i];
      if (wc->wr_id & SIM_COLL_WRID) {
        coll_wc(m, wc);
        continue;
      }
      if (wc->wr_id & RECV_TAG)
        continue; /* a SEND arrived; the flow ends at its sender */
      struct sim_flow *f =
          wc->wr_id < s->nflows ? sim_flow_mut(s, (uint32_t)wc->wr_id) : 0;
      if (!f || !f->st || f->failed != SIM_NEVER)
        continue; /* the rest of a failed QP's work, flushed */
      if (wc->status != UROCE_WC_SUCCESS) {
        /* Its QP is in error (retries spent, say): the flow ends there,
         * and summary.json says which and why. */
        m->failed++;
        sim_flow_failed(s, f, now, (uint8_t)wc->status);
        end_requester(f->st);
        continue;
      }
      finish(f->st, now);
    }
  }
  if (n < 0)
    m->failed++; /* CQ overrun: cannot happen at one poll per call */
}

/* ---- packets ---- */

/* Hands p, for the end e of a connection or flow, to the engine and
 * frees it. */
static void eng_rx(struct he_nic *m, const struct he_slot *e, bool coll,
                   struct sim_pkt *p, sim_time_t now) {
  struct sim *s = m->s;
  struct uroce_rx_pkt rx;
  uint32_t len = p->hlen + p->plen + p->pad + UROCE_ICRC_LEN;
  if (uroce_pkt_parse(p->hdr, len, &rx.pi) == 0) {
    gid_of(s, p->src, rx.sgid);
    gid_of(s, p->dst, rx.dgid);
    rx.sport = p->sport;
    rx.ecn = p->ecn;
    rx.flags = p->flags & SIM_PF_TRIMMED ? UROCE_RX_TRIMMED : 0;
    struct he_flow *hf = e->hf;
    bool snd = e->snd;
    uroce_eng_read_pkt(m->eng, &rx, now / SIM_NS);
    if (!coll)
      progress(hf, snd);
    poll_cq(m, now);
  }
  sim_pkt_free(s, p);
}

/* The QP a packet is for is found in this NIC's own map, never through
 * the flow (whose other end may be another thread's): a straggler of a
 * finished flow finds none and is dropped. */
static void deliver(void *mp, struct sim_pkt *p, sim_time_t now) {
  struct he_nic *m = mp;
  const struct he_slot *e = map_find(m, uroce_bth_dqpn(p->hdr));
  if (!e) {
    sim_pkt_free(m->s, p);
    return;
  }
  eng_rx(m, e, p->flow & SIM_COLL_FLOW, p, now);
}

/* A selective ACK's bitmap is payload the engine reads; the descriptor
 * keeps it after the headers, as many 64-bit words as fit (the rest of
 * the bitmap is only left unsaid: the next one says it). */
static void keep_sack(struct sim_pkt *p, const struct uroce_tx_pkt *tx) {
  uint32_t words = (SIM_HDR_MAX - tx->hdr_len) / 8, off = 0;
  if (words > tx->payload_len / 8)
    words = tx->payload_len / 8;
  uint8_t *h =
      p->hdr + uroce_opcode(UROCE_OP_MP_SACK)->offset[UROCE_HDR_SACKETH];
  h[0] = (uint8_t)words;
  for (int i = 0; i < tx->nseg && off < words * 8; i++) {
    uint32_t n =
        tx->seg[i].len < words * 8 - off ? tx->seg[i].len : words * 8 - off;
    memcpy(p->hdr + tx->hdr_len + off, tx->seg[i].addr, n);
    off += n;
  }
  p->hlen = (uint8_t)(tx->hdr_len + words * 8);
  p->plen = 0;
}

/* Turns the engine's packet in m->tx into a descriptor. */
static struct sim_pkt *make_pkt(struct he_nic *m) {
  struct sim *s = m->s;
  const struct sim_cfg *c = &s->cfg;
  const struct uroce_tx_pkt *tx = &m->tx;
  struct he_slot *e = map_find(m, tx->qpn);
  uint32_t dst = nic_of_gid(tx->dgid);
  if (!e || tx->hdr_len > SIM_HDR_MAX || dst >= s->nnics)
    return 0;
  struct sim_pkt *p = sim_pkt_alloc(s);
  if (!p)
    return 0;
  struct he_flow *hf = e->hf;
  uint8_t op = tx->hdr[0];
  uint8_t kind = SIM_PKT_DATA;
  if (op == UROCE_OP_CNP)
    kind = SIM_PKT_CNP;
  else if (op == UROCE_OP_ACK || op == UROCE_OP_MP_SACK)
    kind = uroce_aeth_kind(tx->hdr[UROCE_BTH_LEN]) == UROCE_AETH_ACK
               ? SIM_PKT_ACK
               : SIM_PKT_NAK;
  else if (op == UROCE_OP_ATOMIC_ACK)
    kind = SIM_PKT_ACK;
  p->size = wire_bytes(c, uroce_tx_len(tx));
  p->src = m->nic->n.id;
  p->dst = dst;
  p->flow = hf->f->id;
  p->sport = tx->sport;
  p->in_port = 0;
  p->kind = kind;
  p->prio = kind == SIM_PKT_DATA ? hf->f->sl : c->tp.ctrl_prio;
  p->ecn = tx->ecn;
  p->flags = 0;
  p->plen = tx->payload_len;
  p->pad = tx->pad;
  p->hlen = (uint8_t)tx->hdr_len;
  memcpy(p->hdr, tx->hdr, tx->hdr_len);
  if (op == UROCE_OP_MP_SACK)
    keep_sack(p, tx);
  if (kind == SIM_PKT_DATA) {
    struct sim_flow *f = hf->f;
    uint32_t psn = uroce_bth_psn(tx->hdr), n = 1;
    uint32_t *next = e->snd ? &hf->req_next : &hf->rsp_next;
    if (op == UROCE_OP_READ_REQ) {
      uint32_t l = uroce_reth_len(tx->hdr + UROCE_BTH_LEN);
      n = l ? (l + c->tp.mtu - 1) / c->tp.mtu : 1;
    }
    /* Each end counts in fields of its own: they may be two threads. */
    uint64_t *sent = e->snd ? &f->tx_pkts : &f->rsp_tx_pkts;
    uint64_t *retx = e->snd ? &f->retx_pkts : &f->rsp_retx_pkts;
    (*sent)++;
    if (uroce_psn_diff(psn, *next) < 0) {
      (*retx)++;
      s->st.retx_pkts++;
    }
    if (uroce_psn_diff(uroce_psn_add(psn, n), *next) > 0)
      *next = uroce_psn_add(psn, n);
  }
  return p;
}

/* Some of the NIC's data priorities are paused: a QP whose flow's is
 * keeps its data for later (write_pkt_if). */
static bool data_ok(void *mp, struct uroce_qp *qp) {
  struct he_nic *m = mp;
  const struct he_slot *e = map_find(m, uroce_qp_num(qp));
  return !e || !(m->paused >> e->hf->f->sl & 1);
}

static void run_timers(struct he_nic *m, sim_time_t now) {
  uint64_t tn = now / SIM_NS;
  m->last_now = now;
  if (uroce_eng_next_expiry(m->eng) <= tn) {
    uroce_eng_handle_expiry(m->eng, tn);
    poll_cq(m, now);
  }
}

/* What pull() may give: data of the SLs this NIC's flows use, control
 * packets, the held ones (the engine cannot tell which QP has what
 * without making the packet; so the timers due can wait for pull). */
static uint8_t sls(void *mp, sim_time_t now) {
  struct he_nic *m = mp;
  (void)now;
  uint8_t r = m->data_sls | (uint8_t)(1u << m->s->cfg.tp.ctrl_prio);
  for (const struct sim_pkt *p = m->held; p; p = p->next)
    r |= (uint8_t)(1u << p->prio);
  return r;
}

static struct sim_pkt *pull(void *mp, sim_time_t now, uint8_t paused) {
  struct he_nic *m = mp;
  const struct sim_transport_cfg *tp = &m->s->cfg.tp;
  uint64_t tn = now / SIM_NS;
  run_timers(m, now);
  for (struct sim_pkt **pp = &m->held, *prev = 0; *pp;
       prev = *pp, pp = &(*pp)->next) {
    struct sim_pkt *p = *pp;
    if (paused >> p->prio & 1)
      continue;
    *pp = p->next;
    if (m->held_tail == p)
      m->held_tail = prev;
    m->nheld--;
    return p;
  }
  /* Data waits only when every SL it goes on is paused (or, on
   * InfiniBand, out of credit); while some are, the flows on the others
   * go on, and control packets of a paused priority are held. */
  bool dp = (paused & m->data_sls) == m->data_sls,
       cp = paused >> tp->ctrl_prio & 1;
  if (dp && cp)
    return 0;
  if (dp) /* only what the pause does not stop */
    return uroce_eng_write_ctl_pkt(m->eng, &m->tx, tn) ? make_pkt(m) : 0;
  m->paused = paused;
  bool (*ok)(void *, struct uroce_qp *) = paused & m->data_sls ? data_ok : 0;
  while (m->nheld < HOLD_MAX) {
    if (!uroce_eng_write_pkt_if(m->eng, &m->tx, tn, ok, m))
      return 0;
    struct sim_pkt *p = make_pkt(m);
    if (!p)
      continue;
    if (!(paused >> p->prio & 1))
      return p;
    p->next = 0; /* a paused control priority: keep it for later */
    if (m->held_tail)
      m->held_tail->next = p;
    else
      m->held = p;
    m->held_tail = p;
    m->nheld++;
  }
  return 0;
}

static sim_time_t next_time(void *mp) {
  struct he_nic *m = mp;
  uint64_t t = uroce_eng_next_expiry(m->eng);
  if (t == UINT64_MAX)
    return SIM_NEVER;
  /* Everything due by the last pull ran then; never spin on a past time. */
  return t * SIM_NS > m->last_now ? t * SIM_NS
                                  : (m->last_now / SIM_NS + 1) * SIM_NS;
}

static void add_stats(void *mp, struct sim_stats *st) {
  struct he_nic *m = mp;
  const struct uroce_eng_stats *es = uroce_eng_stats(m->eng);
  st->timeouts += es->timeouts;
  st->naks += es->naks_tx;
  st->cnps += es->cnps_tx;
}

/* The DCQCN rate limiter's current rate of a running flow's requester. */
static double cc_rate_bps(void *m, const struct sim_flow *f) {
  struct he_nic *n = m;
  const struct he_flow *hf = f->st;
  if (n->s->cfg.tp.cc != SIM_CC_DCQCN || !hf || !hf->sqp)
    return -1;
  const void *st = uroce_eng_qp_cc_state(hf->sqp);
  return st ? uroce_cc_dcqcn_rate(st) : -1;
}

/* The engine allocates a responder's state when the first request
 * reaches it: the probe sends its flow's first packet across. */
static void probe_first_pkt(struct he_nic *a, struct he_nic *b) {
  struct uroce_rx_pkt rx;
  /* Phantom payload: the headers are all the parser and engine read, as
   * in eng_rx. */
  if (!uroce_eng_write_pkt(a->eng, &a->tx, 0) ||
      uroce_pkt_parse(a->tx.hdr, uroce_tx_len(&a->tx), &rx.pi))
    return;
  gid_of(a->s, a->nic->n.id, rx.sgid);
  gid_of(b->s, b->nic->n.id, rx.dgid);
  rx.sport = a->tx.sport;
  rx.ecn = 0;
  rx.flags = 0;
  uroce_eng_read_pkt(b->eng, &rx, 0);
}

/* A collective's connection carries data both ways: each QP holds both
 * sides' multipath state, and the CQs grow by its work requests. */
static uint64_t conn_bytes(struct sim *s, struct he_nic *a, struct he_nic *b) {
  uint32_t nsend, nrecv;
  sim_coll_conn_wrs(s, &nsend, &nrecv);
  uint64_t before = sim_heap_bytes();
  struct he_flow *hf = conn_make(s, a, b, nsend, nrecv, 0, 1, 0);
  if (!hf)
    return 0;
  struct uroce_qp *qp[2] = {hf->sqp, hf->rqp};
  struct he_nic *m[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    struct uroce_sge sg = {PHANTOM_VA, 1, m[i]->mr->lkey};
    struct uroce_send_wr w = {.sg_list = &sg,
                              .num_sge = 1,
                              .opcode = UROCE_WR_RDMA_WRITE_WITH_IMM},
                         *bad;
    w.wr.rdma.remote_addr = PHANTOM_VA;
    w.wr.rdma.rkey = m[!i]->mr->rkey;
    uroce_eng_qp_post_send(qp[i], &w, &bad);
  }
  probe_first_pkt(a, b);
  probe_first_pkt(b, a);
  return sim_heap_grown(before);
}

/* The memory estimate's probe: heap bytes one running flow of this size
 * adds (its QP pair, its record), on two scratch NICs. */
static uint64_t flow_bytes(struct sim *s, uint64_t bytes) {
  struct sim_nic na, nb;
  memset(&na, 0, sizeof(na));
  memset(&nb, 0, sizeof(nb));
  nb.n.id = 1;
  struct sim_flow f = {.src = 0,
                       .dst = 1,
                       .bytes = bytes ? bytes : 1,
                       .finish = SIM_NEVER,
                       .failed = SIM_NEVER};
  struct he_nic *a = nic_new(s, &na), *b = a ? nic_new(s, &nb) : 0;
  uint64_t used = 0;
  if (b && s->cfg.wl.kind == SIM_WL_COLLECTIVE) {
    used = conn_bytes(s, a, b);
  } else if (b) {
    uint64_t before = sim_heap_bytes();
    struct he_flow *hf = calloc(1, sizeof(*hf));
    if (hf) {
      *hf = (struct he_flow){.f = &f, .snd = a, .rcv = b};
      if (connect_flow(hf, 0)) {
        free(hf); /* nothing of it in the maps */
      } else {
        probe_first_pkt(a, b);
        used = sim_heap_grown(before);
      }
    }
  }
  if (b)
    nic_del(b);
  if (a)
    nic_del(a);
  return used;
}

const struct sim_host_ops sim_host_eng = {
    .name = "uroce",
    .nic_new = nic_new,
    .nic_del = nic_del,
    .post = post,
    .deliver = deliver,
    .pull = pull,
    .sls = sls,
    .next_time = next_time,
    .rebind = rebind,
    .add_stats = add_stats,
    .cc_rate_bps = cc_rate_bps,
    .flow_bytes = flow_bytes,
    .flow_end = flow_end,
    .retry = retry,
};
