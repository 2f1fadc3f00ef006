/* The built-in host model: a simple RC RDMA WRITE (or SEND) transport.
 *
 * Per flow (one QP carrying one message): the requester cuts the message
 * into path-MTU packets (FIRST with RETH, MIDDLE, LAST, or ONLY), keeps at
 * most `window` unacknowledged, and recovers by go-back-N on a NAK or a
 * retransmit timeout. The responder acks cumulatively every ack_every
 * packets and on the last; in-order mode drops a packet past a gap and
 * NAKs once (RoCE's PSN sequence error), out-of-order mode places it and
 * acks the first missing PSN. The responder is also DCQCN's notification
 * point (CNP pacing per QP); the requester runs the configured congestion
 * control module, whose next_tx_time() is the per-QP rate limiter.
 *
 * Both ends of a flow live in one struct: the simulated wire never carries
 * the state, only (flow, psn, opcode, len) descriptors. The NIC arbitrates
 * between its ready QPs round robin, one packet at a time, acks and CNPs
 * first, among the priorities (SLs) the simulator lets it send on (an
 * InfiniBand NIC asks for one VL's SLs at a time: sls() tells it which
 * SLs have ready QPs). */
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"
#include "uroce/verbs.h"
#include "wire/opcode.h"

enum rw_state { RW_IDLE, RW_READY, RW_PACED, RW_DONE };

struct rw_nic;

struct rw_flow {
  struct sim_flow *f;
  struct rw_nic *snd; /* requester's NIC */
  struct rw_flow *rr_next, *all_next;
  struct sim_ev tev; /* in the requester NIC's timer heap */
  sim_time_t rto_at, pace_at;
  uint32_t npkts, snd_nxt, snd_una, max_sent;
  uint8_t state, nak_sent;
  uint8_t retries; /* go-backs since the last progress */
  bool failed;     /* retries spent: the flow ended in error */
  /* responder */
  uint32_t epsn, unacked;
  struct uroce_dcqcn_np np;
  uint64_t *bitmap; /* out-of-order mode: received PSNs in the window */
  void *cc;
};

struct rw_nic {
  struct sim *s;
  struct sim_nic *nic;
  struct sim_pkt *ctl_head, *ctl_tail;
  struct rw_flow *rr_head, *rr_tail;
  uint32_t rr_n[SIM_NPRIO]; /* flows in the round robin per SL */
  struct rw_flow *all;
  struct sim_heap timers;
  const struct uroce_cc_ops *cc;
};

static inline uint64_t ns(sim_time_t t) {
  return t / SIM_NS;
}
static inline sim_time_t ps_of_ns(uint64_t t) {
  return t == UINT64_MAX ? SIM_NEVER : t * SIM_NS;
}

static uint32_t wire_bytes(const struct sim_cfg *c, uint32_t bth_to_icrc) {
  return sim_frame_wire(c, bth_to_icrc);
}

static void *nic_new(struct sim *s, struct sim_nic *nic) {
  struct rw_nic *m = calloc(1, sizeof(*m));
  if (!m)
    return 0;
  m->s = s;
  m->nic = nic;
  m->cc = s->cfg.tp.cc == SIM_CC_DCQCN ? &uroce_cc_dcqcn : 0;
  if (sim_heap_init(&m->timers, 4)) {
    free(m);
    return 0;
  }
  return m;
}

static void rebind(void *mp, struct sim *s) {
  ((struct rw_nic *)mp)->s = s;
}

static void nic_del(void *mp) {
  struct rw_nic *m = mp;
  for (struct rw_flow *f = m->all, *n; f; f = n) {
    n = f->all_next;
    free(f);
  }
  for (struct sim_pkt *p = m->ctl_head, *n; p; p = n) {
    n = p->next;
    sim_pkt_free(m->s, p);
  }
  sim_heap_free(&m->timers);
  free(m);
}

static void rearm(struct rw_nic *m, struct rw_flow *rf) {
  sim_time_t t = rf->rto_at;
  if (rf->state == RW_PACED && rf->pace_at < t)
    t = rf->pace_at;
  if (m->cc) {
    sim_time_t c = ps_of_ns(m->cc->next_expiry(rf->cc));
    if (c < t)
      t = c;
  }
  if (t < rf->tev.at)
    sim_heap_push(&m->timers, &rf->tev, t);
}

/* One go-back (a timeout or a NAK) without progress since the last:
 * false once transport.retry_cnt of them went unanswered (7: never),
 * and the flow has failed, as a verbs QP completes with "transport retry
 * counter exceeded". */
static bool use_retry(struct rw_nic *m, struct rw_flow *rf, sim_time_t now) {
  struct sim *s = m->s;
  uint8_t cnt = s->cfg.tp.retry_cnt;
  if (cnt == 7 || rf->retries++ < cnt)
    return true;
  rf->failed = true;
  rf->rto_at = rf->pace_at = SIM_NEVER;
  if (rf->state != RW_READY) /* else pull() drops it from its turn */
    rf->state = RW_DONE;
  sim_flow_failed(s, rf->f, now, UROCE_WC_RETRY_EXC_ERR);
  return false;
}

static inline bool can_send(const struct rw_flow *rf, uint32_t window) {
  return rf->snd_nxt < rf->npkts && rf->snd_nxt - rf->snd_una < window;
}

static void make_ready(struct rw_nic *m, struct rw_flow *rf) {
  if (rf->state != RW_IDLE)
    return;
  rf->state = RW_READY;
  m->rr_n[rf->f->sl]++;
  rf->rr_next = 0;
  if (m->rr_tail)
    m->rr_tail->rr_next = rf;
  else
    m->rr_head = rf;
  m->rr_tail = rf;
}

static int post(void *mp, struct sim_flow *f, sim_time_t now) {
  struct rw_nic *m = mp;
  const struct sim_cfg *c = &m->s->cfg;
  size_t ccsz = m->cc ? (m->cc->state_size + 15) & ~(size_t)15 : 0;
  size_t bm = m->s->ooo ? c->tp.window / 8 : 0;
  struct rw_flow *rf = calloc(1, sizeof(*rf) + ccsz + bm);
  if (!rf)
    return -1;
  rf->f = f;
  rf->snd = m;
  f->st = rf;
  rf->npkts = (uint32_t)((f->bytes + c->tp.mtu - 1) / c->tp.mtu);
  rf->rto_at = rf->pace_at = SIM_NEVER;
  sim_ev_setup(&rf->tev, 0, f->id); /* due together: in flow order */
  char *tail = (char *)(rf + 1);
  if (m->cc) {
    rf->cc = tail;
    m->cc->init(rf->cc, ns(now));
    uroce_cc_dcqcn_set_params(rf->cc, &c->tp.dcqcn, ns(now));
  }
  if (bm)
    rf->bitmap = (uint64_t *)(tail + ccsz);
  rf->all_next = m->all;
  m->all = rf;
  make_ready(m, rf);
  return 0;
}

static void ctl_push(struct rw_nic *m, struct sim_pkt *p) {
  p->next = 0;
  if (m->ctl_tail)
    m->ctl_tail->next = p;
  else
    m->ctl_head = p;
  m->ctl_tail = p;
}

/* An ACK, NAK or CNP from the responder (this NIC) to the requester. */
static void send_ctl(struct rw_nic *m, struct rw_flow *rf, uint8_t kind,
                     uint32_t psn) {
  struct sim *s = m->s;
  struct sim_pkt *p = sim_pkt_alloc(s);
  if (!p)
    return;
  uint8_t op = kind == SIM_PKT_CNP ? UROCE_OP_CNP : UROCE_OP_ACK;
  *p = (struct sim_pkt){
      .size = wire_bytes(&s->cfg, uroce_opcode_table[op].length + 4),
      .src = rf->f->dst,
      .dst = rf->f->src,
      .flow = rf->f->id,
      .psn = psn,
      .sport = rf->f->sport,
      .kind = kind,
      .prio = s->cfg.tp.ctrl_prio,
      .opcode = op,
  };
  ctl_push(m, p);
}

static uint64_t bytes_upto(const struct rw_flow *rf, uint32_t psn,
                           uint32_t mtu) {
  uint64_t b = (uint64_t)psn * mtu;
  return b < rf->f->bytes ? b : rf->f->bytes;
}

/* Responder: a data packet arrived at this NIC. */
static void rx_data(struct rw_nic *m, struct rw_flow *rf, struct sim_pkt *p,
                    sim_time_t now) {
  struct sim *s = m->s;
  const struct sim_cfg *c = &s->cfg;
  if (p->ecn == SIM_ECN_CE && m->cc &&
      uroce_dcqcn_np_on_ce(&rf->np, ns(now), c->tp.dcqcn.cnp_interval_ns)) {
    s->st.cnps++;
    send_ctl(m, rf, SIM_PKT_CNP, 0);
  }
  uint32_t psn = p->psn;
  if (psn < rf->epsn) {
    send_ctl(m, rf, SIM_PKT_ACK, rf->epsn); /* duplicate */
    return;
  }
  if (s->ooo) {
    uint32_t w = c->tp.window;
    if (psn - rf->epsn >= w)
      return;
    uint32_t b = psn & (w - 1);
    if (rf->bitmap[b / 64] >> (b % 64) & 1) {
      send_ctl(m, rf, SIM_PKT_ACK, rf->epsn);
      return;
    }
    rf->bitmap[b / 64] |= 1ull << (b % 64);
    for (;;) {
      uint32_t e = rf->epsn & (w - 1);
      if (!(rf->bitmap[e / 64] >> (e % 64) & 1))
        break;
      rf->bitmap[e / 64] &= ~(1ull << (e % 64));
      rf->epsn++;
    }
  } else if (psn == rf->epsn) {
    rf->epsn++;
    rf->nak_sent = 0;
  } else {
    if (!rf->nak_sent) {
      rf->nak_sent = 1;
      s->st.naks++;
      send_ctl(m, rf, SIM_PKT_NAK, rf->epsn);
    }
    return;
  }
  rf->f->rx_bytes += p->len;
  if (++rf->unacked >= c->tp.ack_every || rf->epsn == rf->npkts ||
      (p->flags & SIM_PF_ACKREQ)) {
    rf->unacked = 0;
    send_ctl(m, rf, SIM_PKT_ACK, rf->epsn);
  }
}

/* Requester: an ACK or NAK for one of this NIC's flows. */
static void rx_ack(struct rw_nic *m, struct rw_flow *rf, struct sim_pkt *p,
                   sim_time_t now) {
  struct sim *s = m->s;
  const struct sim_cfg *c = &s->cfg;
  if (rf->state == RW_DONE || rf->failed)
    return;
  uint32_t a = p->psn;
  if (a > rf->max_sent)
    return;
  if (a > rf->snd_una) {
    uint64_t b =
        bytes_upto(rf, a, c->tp.mtu) - bytes_upto(rf, rf->snd_una, c->tp.mtu);
    rf->snd_una = a;
    rf->retries = 0;
    if (rf->snd_nxt < a)
      rf->snd_nxt = a;
    sim_flow_acked(s, rf->f, b);
    if (m->cc)
      m->cc->on_ack(rf->cc, ns(now), b);
    if (a == rf->npkts) {
      rf->state = RW_DONE;
      rf->rto_at = SIM_NEVER;
      sim_flow_done(s, rf->f, now);
      return;
    }
    rf->rto_at = rf->snd_una < rf->snd_nxt ? now + c->tp.rto : SIM_NEVER;
  }
  if (p->kind == SIM_PKT_NAK && a < rf->snd_nxt) {
    if (!use_retry(m, rf, now))
      return;
    rf->snd_nxt = a; /* go back N */
    rf->rto_at = SIM_NEVER;
  }
  if (can_send(rf, c->tp.window))
    make_ready(m, rf);
  rearm(m, rf);
}

static void deliver(void *mp, struct sim_pkt *p, sim_time_t now) {
  struct rw_nic *m = mp;
  struct sim *s = m->s;
  struct rw_flow *rf = p->flow < s->nflows ? sim_flow_mut(s, p->flow)->st : 0;
  if (rf) {
    switch (p->kind) {
    case SIM_PKT_DATA:
      rx_data(m, rf, p, now);
      break;
    case SIM_PKT_ACK:
    case SIM_PKT_NAK:
      rx_ack(m, rf, p, now);
      break;
    case SIM_PKT_CNP:
      if (m->cc && rf->state != RW_DONE && !rf->failed) {
        m->cc->on_cnp_rx(rf->cc, ns(now));
        rearm(m, rf);
      }
      break;
    }
  }
  sim_pkt_free(s, p);
}

static void flow_timer(struct rw_nic *m, struct rw_flow *rf, sim_time_t now) {
  struct sim *s = m->s;
  if (rf->state == RW_DONE || rf->failed)
    return;
  if (m->cc && ps_of_ns(m->cc->next_expiry(rf->cc)) <= now)
    m->cc->handle_expiry(rf->cc, ns(now));
  if (rf->state == RW_PACED && rf->pace_at <= now) {
    rf->state = RW_IDLE;
    rf->pace_at = SIM_NEVER;
    make_ready(m, rf);
  }
  if (rf->rto_at <= now) {
    rf->rto_at = SIM_NEVER;
    if (rf->snd_una < rf->snd_nxt) {
      s->st.timeouts++;
      if (!use_retry(m, rf, now))
        return;
      rf->snd_nxt = rf->snd_una;
      if (rf->state == RW_IDLE)
        make_ready(m, rf);
    }
  }
  rearm(m, rf);
}

static struct sim_pkt *build_data(struct rw_nic *m, struct rw_flow *rf,
                                  sim_time_t now) {
  struct sim *s = m->s;
  const struct sim_cfg *c = &s->cfg;
  struct sim_pkt *p = sim_pkt_alloc(s);
  if (!p)
    return 0;
  uint32_t psn = rf->snd_nxt++;
  bool first = psn == 0, last = psn + 1 == rf->npkts;
  uint32_t len = (uint32_t)(bytes_upto(rf, psn + 1, c->tp.mtu) -
                            bytes_upto(rf, psn, c->tp.mtu));
  uint8_t op =
      rf->f->op == SIM_OP_SEND ? UROCE_OP_SEND_FIRST : UROCE_OP_WRITE_FIRST;
  /* FIRST, MIDDLE, LAST, ONLY are consecutive for SEND (0..4) and WRITE
   * (6..10). */
  op += first && last ? 4 : first ? 0 : last ? 2 : 1;
  uint32_t bth =
      uroce_opcode_table[op].length + len + (4 - len % 4) % 4 + UROCE_ICRC_LEN;
  *p = (struct sim_pkt){
      .size = wire_bytes(c, bth),
      .src = rf->f->src,
      .dst = rf->f->dst,
      .flow = rf->f->id,
      .psn = psn,
      .len = len,
      .sport = rf->f->sport,
      .kind = SIM_PKT_DATA,
      .prio = rf->f->sl,
      .ecn = SIM_ECN_ECT0,
      .opcode = op,
      .flags = last ? SIM_PF_LAST | SIM_PF_ACKREQ : 0,
  };
  rf->f->tx_pkts++;
  if (psn < rf->max_sent) {
    rf->f->retx_pkts++;
    s->st.retx_pkts++;
  } else {
    rf->max_sent = psn + 1;
  }
  if (rf->rto_at == SIM_NEVER)
    rf->rto_at = now + c->tp.rto;
  if (m->cc)
    m->cc->on_tx(rf->cc, ns(now), bth);
  rearm(m, rf);
  return p;
}

static void run_timers(struct rw_nic *m, sim_time_t now) {
  sim_time_t t;
  struct sim_ev *ev;
  while ((ev = sim_heap_pop(&m->timers, now, &t)))
    flow_timer(m, container_of(ev, struct rw_flow, tev), now);
}

static struct sim_pkt *pull(void *mp, sim_time_t now, uint8_t paused) {
  struct rw_nic *m = mp;
  const struct sim_cfg *c = &m->s->cfg;
  run_timers(m, now);
  if (m->ctl_head && !(paused >> c->tp.ctrl_prio & 1)) {
    struct sim_pkt *p = m->ctl_head;
    m->ctl_head = p->next;
    if (!m->ctl_head)
      m->ctl_tail = 0;
    return p;
  }
  /* Flows whose priority is paused keep their turn for later; stop when
   * the first of them comes round again. */
  struct rw_flow *wait = 0;
  while (m->rr_head && m->rr_head != wait) {
    struct rw_flow *rf = m->rr_head;
    m->rr_head = rf->rr_next;
    if (!m->rr_head)
      m->rr_tail = 0;
    m->rr_n[rf->f->sl]--;
    if (rf->failed) {
      rf->state = RW_DONE;
      continue;
    }
    rf->state = RW_IDLE;
    if (!can_send(rf, c->tp.window))
      continue;
    if (paused >> rf->f->sl & 1) {
      make_ready(m, rf);
      if (!wait)
        wait = rf;
      continue;
    }
    if (m->cc) {
      sim_time_t at = ps_of_ns(m->cc->next_tx_time(rf->cc, ns(now)));
      if (at > now) {
        rf->state = RW_PACED;
        rf->pace_at = at;
        rearm(m, rf);
        continue;
      }
    }
    struct sim_pkt *p = build_data(m, rf, now);
    if (can_send(rf, c->tp.window))
      make_ready(m, rf);
    return p;
  }
  return 0;
}

static sim_time_t next_time(void *mp) {
  struct rw_nic *m = mp;
  return sim_heap_peek(&m->timers);
}

static uint8_t sls(void *mp, sim_time_t now) {
  struct rw_nic *m = mp;
  run_timers(m, now);
  uint8_t r = m->ctl_head ? (uint8_t)(1u << m->s->cfg.tp.ctrl_prio) : 0;
  for (uint8_t i = 0; i < SIM_NPRIO; i++)
    if (m->rr_n[i])
      r |= (uint8_t)(1u << i);
  return r;
}

const struct sim_host_ops sim_host_rdmaw = {
    .name = "rdma-write",
    .nic_new = nic_new,
    .nic_del = nic_del,
    .post = post,
    .deliver = deliver,
    .pull = pull,
    .sls = sls,
    .next_time = next_time,
    .rebind = rebind,
};
