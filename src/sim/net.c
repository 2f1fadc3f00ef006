/* Links, switch ports and the NIC wire: queues, ECN, PFC, drops, routing. */
#include "sim/sim_int.h"

sim_time_t sim_ser_time(uint64_t bytes, uint64_t rate_bps) {
  return bytes * 8000000000000ull / rate_bps;
}

static inline bool port_sendable(const struct sim_port *p) {
  return p->ctl_head || (p->nonempty & ~p->paused);
}

/* Starts serialising pkt now (the port is idle); it arrives at the peer
 * after its last bit went out plus the propagation delay. */
static void put_on_wire(struct sim *s, struct sim_port *p,
                        struct sim_pkt *pkt) {
  p->busy_until = s->now + sim_ser_time(pkt->size, p->rate_bps);
  p->tx_bytes += pkt->size;
  if (p->loss > 0 && pkt->kind != SIM_PKT_PAUSE &&
      sim_rand01(&p->rng) < p->loss) {
    s->st.drops_wire++;
    sim_pkt_free(s, pkt);
    return;
  }
  pkt->ts = p->busy_until + p->delay;
  pkt->next = 0;
  if (p->fly_tail) {
    p->fly_tail->next = pkt;
  } else {
    p->fly_head = pkt;
    sim_schedule(s, &p->rx_ev, pkt->ts);
  }
  p->fly_tail = pkt;
}

static void port_kick(struct sim *s, struct sim_port *p);

/* Queues a PFC frame (pause or resume prio) toward the peer of in. */
static void send_pfc(struct sim *s, struct sim_port *in, uint8_t prio,
                     bool xoff) {
  struct sim_pkt *f = sim_pkt_alloc(s);
  if (!f)
    return;
  *f = (struct sim_pkt){.size = SIM_PAUSE_WIRE,
                        .kind = SIM_PKT_PAUSE,
                        .prio = prio,
                        .flags = xoff ? SIM_PF_XOFF : 0};
  if (xoff) {
    in->xoff_sent |= (uint8_t)(1u << prio);
    s->st.pause_frames[in->node->tier]++;
  } else {
    in->xoff_sent &= (uint8_t) ~(1u << prio);
  }
  if (in->ctl_tail)
    in->ctl_tail->next = f;
  else
    in->ctl_head = f;
  in->ctl_tail = f;
  port_kick(s, in);
}

/* Sends the next frame: PFC frames first, then the highest priority that
 * has packets and is not paused. */
static void port_send_next(struct sim *s, struct sim_port *p) {
  struct sim_pkt *pkt = p->ctl_head;
  if (pkt) {
    p->ctl_head = pkt->next;
    if (!p->ctl_head)
      p->ctl_tail = 0;
    put_on_wire(s, p, pkt);
    if (port_sendable(p))
      sim_schedule(s, &p->tx_ev, p->busy_until);
    return;
  }
  uint8_t m = p->nonempty & (uint8_t)~p->paused;
  if (!m)
    return;
  unsigned prio = 31u - (unsigned)__builtin_clz(m);
  struct sim_pktq *q = &p->q[prio];
  pkt = q->head;
  q->head = pkt->next;
  if (!q->head) {
    q->tail = 0;
    p->nonempty &= (uint8_t) ~(1u << prio);
  }
  uint32_t size = pkt->size;
  q->bytes -= size;
  p->qbytes -= size;
  struct sim_switch *sw = (struct sim_switch *)p->node;
  struct sim_port *in = &sw->n.ports[pkt->in_port];
  put_on_wire(s, p, pkt);
  if (port_sendable(p))
    sim_schedule(s, &p->tx_ev, p->busy_until);
  /* The packet left the buffer: release it from the shared pool and from
   * its ingress port's PFC count. */
  sw->used -= size;
  in->in_bytes[prio] -= size;
  if ((in->xoff_sent >> prio) & 1 && in->in_bytes[prio] <= s->cfg.sw.xon)
    send_pfc(s, in, (uint8_t)prio, false);
}

static void port_kick(struct sim *s, struct sim_port *p) {
  if (p->tx_ev.at != SIM_NEVER || !port_sendable(p))
    return;
  if (p->busy_until <= s->now)
    port_send_next(s, p);
  else
    sim_schedule(s, &p->tx_ev, p->busy_until);
}

void sim_port_tx_event(struct sim *s, struct sim_port *p) {
  port_send_next(s, p);
}

/* A PFC frame arrived on p: pause or resume p's egress for its priority. */
static void port_pause(struct sim *s, struct sim_port *p, struct sim_pkt *f) {
  uint8_t before = p->paused, bit = (uint8_t)(1u << f->prio);
  uint8_t f_prio = f->prio;
  bool f_xoff = f->flags & SIM_PF_XOFF;
  if (f->flags & SIM_PF_XOFF)
    p->paused |= bit;
  else
    p->paused &= (uint8_t)~bit;
  sim_pkt_free(s, f);
  if (before != p->paused)
    sim_log_pause(s, p, f_prio, f_xoff);
  if (!before && p->paused)
    p->paused_since = s->now;
  else if (before && !p->paused)
    s->st.paused_time[p->node->tier] += s->now - p->paused_since;
  if ((before & ~p->paused) == 0)
    return;
  if (p->node->kind == SIM_NODE_SWITCH)
    port_kick(s, p);
  else
    sim_nic_kick(s, container_of(p, struct sim_nic, port));
}

static inline uint64_t fmix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

/* ECMP hash of the 5-tuple: addresses (NIC ids), UDP ports, protocol. */
static inline uint64_t flow_hash(const struct sim_pkt *p, uint64_t salt) {
  uint64_t a = ((uint64_t)p->src << 32) | p->dst;
  uint64_t b = ((uint64_t)p->sport << 32) | (4791u << 8) | 17u;
  return fmix64(fmix64(a ^ salt) ^ b);
}

uint16_t sim_route(struct sim *s, struct sim_switch *sw,
                   const struct sim_pkt *p) {
  uint32_t d = p->dst;
  if (d >= sw->lo && d < sw->hi)
    return (uint16_t)((d - sw->lo) / sw->span);
  uint32_t n = sw->n_up, base = sw->n_down;
  if (n == 1)
    return (uint16_t)base;
  switch (s->cfg.routing) {
  case SIM_ROUTE_SPRAY:
    return (uint16_t)(base + sim_rand(&sw->rng) % n);
  case SIM_ROUTE_ADAPTIVE: {
    uint32_t start = (uint32_t)(sim_rand(&sw->rng) % n), best = start;
    uint64_t bq = sw->n.ports[base + start].qbytes;
    for (uint32_t i = 1; i < n && bq; i++) {
      uint32_t j = (start + i) % n;
      uint64_t q = sw->n.ports[base + j].qbytes;
      if (q < bq) {
        bq = q;
        best = j;
      }
    }
    return (uint16_t)(base + best);
  }
  case SIM_ROUTE_ECMP:
  default:
    return (uint16_t)(base + flow_hash(p, sw->salt) % n);
  }
}

static void sw_receive(struct sim *s, struct sim_switch *sw,
                       struct sim_port *in, struct sim_pkt *pkt) {
  if (pkt->kind == SIM_PKT_PAUSE) {
    port_pause(s, in, pkt);
    return;
  }
  const struct sim_switch_cfg *c = &s->cfg.sw;
  struct sim_port *out = &sw->n.ports[sim_route(s, sw, pkt)];
  unsigned prio = pkt->prio, tier = sw->n.tier;
  uint8_t bit = (uint8_t)(1u << prio);
  uint32_t size = pkt->size;
  struct sim_pktq *q = &out->q[prio];
  bool lossless = c->pfc && (c->pfc_prios & bit);
  if (lossless) {
    if (in->in_bytes[prio] + size > in->pfc_limit ||
        sw->used + size > c->buffer_bytes) {
      s->st.drops_lossless[tier]++;
      sim_pkt_free(s, pkt);
      return;
    }
  } else if (sw->used + size > c->buffer_bytes ||
             (c->qmax_bytes && q->bytes + size > c->qmax_bytes)) {
    s->st.drops_buffer[tier]++;
    sim_pkt_free(s, pkt);
    return;
  }
  if (c->ecn && pkt->ecn && pkt->ecn != SIM_ECN_CE && q->bytes > c->kmin) {
    bool mark = q->bytes >= c->kmax;
    if (!mark) {
      double pr =
          c->pmax * (double)(q->bytes - c->kmin) / (double)(c->kmax - c->kmin);
      mark = sim_rand01(&sw->rng) < pr;
    }
    if (mark) {
      pkt->ecn = SIM_ECN_CE;
      s->st.ecn_marks[tier]++;
    }
  }
  sw->used += size;
  if (sw->used > sw->max_used)
    sw->max_used = sw->used;
  in->in_bytes[prio] += size;
  pkt->in_port = in->idx;
  pkt->next = 0;
  if (q->tail)
    q->tail->next = pkt;
  else
    q->head = pkt;
  q->tail = pkt;
  q->bytes += size;
  out->qbytes += size;
  out->nonempty |= bit;
  if (q->bytes > out->max_q)
    out->max_q = q->bytes;
  if (lossless && in->in_bytes[prio] > c->xoff && !(in->xoff_sent & bit))
    send_pfc(s, in, (uint8_t)prio, true);
  port_kick(s, out);
}

static void nic_poll(struct sim *s, struct sim_nic *nic) {
  struct sim_pkt *pkt = s->host->pull(nic->model, s->now, nic->port.paused);
  if (pkt) {
    if (pkt->kind == SIM_PKT_DATA)
      s->st.data_pkts++;
    else
      s->st.ctrl_pkts++;
    put_on_wire(s, &nic->port, pkt);
    sim_schedule(s, &nic->ev, nic->port.busy_until);
    return;
  }
  sim_time_t t = s->host->next_time(nic->model);
  if (t == SIM_NEVER)
    sim_ev_cancel(&nic->ev);
  else
    sim_schedule(s, &nic->ev, t > s->now ? t : s->now);
}

void sim_nic_kick(struct sim *s, struct sim_nic *nic) {
  if (nic->port.busy_until > s->now)
    sim_schedule_min(s, &nic->ev, nic->port.busy_until);
  else
    nic_poll(s, nic);
}

void sim_nic_event(struct sim *s, struct sim_nic *nic) {
  sim_nic_kick(s, nic);
}

void sim_port_rx_event(struct sim *s, struct sim_port *p) {
  struct sim_pkt *pkt = p->fly_head;
  p->fly_head = pkt->next;
  if (p->fly_head)
    sim_schedule(s, &p->rx_ev, p->fly_head->ts);
  else
    p->fly_tail = 0;
  struct sim_port *in = p->peer;
  if (in->node->kind == SIM_NODE_SWITCH) {
    sw_receive(s, (struct sim_switch *)in->node, in, pkt);
    return;
  }
  struct sim_nic *nic = container_of(in, struct sim_nic, port);
  if (pkt->kind == SIM_PKT_PAUSE) {
    port_pause(s, in, pkt);
    return;
  }
  if (pkt->kind == SIM_PKT_DATA)
    sim_rx_data(s, nic, pkt);
  s->host->deliver(nic->model, pkt, s->now);
  sim_nic_kick(s, nic);
}
