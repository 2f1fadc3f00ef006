/* InfiniBand management traffic as packets on VL15: directed-route SMPs
 * from the SM to every node's SMA and back, LFT Sets, the standby SM's
 * SMInfo polls of the master (directed route too), and traps LID-routed
 * to the SM. VL15 is served first at every egress (after the frame on
 * the wire), takes no credits and is not arbitrated; a switch holds the
 * VL15 packets that came in through a port in a small buffer
 * (infiniband.vl15_buffer) and drops one that does not fit, as IBA lets
 * it. The SM's side is in sm.c. */
#include <string.h>

#include "sim/sim_int.h"

void sim_mad_lost(struct sim *s, struct sim_pkt *p) {
  s->st.vl15_lost++;
  sim_pkt_free(s, p);
}

/* The node at hop j of p's directed route (hop 0: the SM's NIC). */
static struct sim_node *dr_node(struct sim *s, struct sim_pkt *p, uint8_t j) {
  const struct sim_smp *m = sim_smp(p);
  struct sim_node *n = &s->nics[p->src].n;
  for (uint8_t i = 0; i < j; i++)
    n = n->ports[m->path[i]].peer->node;
  return n;
}

/* The port of the node at hop h that leads back to hop h - 1. */
static uint16_t dr_back(struct sim *s, struct sim_pkt *p, uint8_t h) {
  struct sim_node *prev = dr_node(s, p, (uint8_t)(h - 1));
  return prev->ports[sim_smp(p)->path[h - 1]].peer->idx;
}

/* Switch sw forwards p (in through in, NULL if it made p) on VL15 of out. */
static void vl15_forward(struct sim *s, struct sim_switch *sw,
                         struct sim_port *in, struct sim_port *out,
                         struct sim_pkt *p) {
  if (!out || out->down || !out->peer) {
    sim_mad_lost(s, p);
    return;
  }
  if (in) {
    if (in->vl15_in + p->size > s->cfg.ib.vl15_buffer) {
      s->st.vl15_drops++;
      sim_pkt_free(s, p);
      return;
    }
    in->vl15_in += p->size;
    p->in_port = in->idx;
  } else {
    p->in_port = UINT16_MAX;
  }
  sim_pktq_put(&out->vl15, p);
  (void)sw;
  sim_port_kick(s, out);
}

void sim_mad_switch_rx(struct sim *s, struct sim_switch *sw,
                       struct sim_port *in, struct sim_pkt *p) {
  struct sim_smp *m = sim_smp(p);
  uint16_t r;
  if (m->attr == SIM_SMP_TRAP) {
    r = sw->lft[s->nic_lid[p->dst]];
  } else if (p->flags & SIM_PF_RESP) {
    r = dr_back(s, p, m->hop);
    m->hop--;
  } else if (++m->hop == m->nhops) {
    sim_mad_sma_put(s, &sw->n, p);
    return;
  } else {
    r = m->path[m->hop];
  }
  vl15_forward(s, sw, in, r == SIM_LFT_NONE ? 0 : &sw->n.ports[r], p);
}

void sim_mad_nic_send(struct sim *s, struct sim_nic *nic, struct sim_pkt *p) {
  if (nic->port.down || !nic->port.peer) {
    sim_mad_lost(s, p);
    return;
  }
  p->in_port = UINT16_MAX;
  sim_pktq_put(&nic->port.vl15, p);
  sim_nic_kick(s, nic);
}

void sim_mad_nic_rx(struct sim *s, struct sim_nic *nic, struct sim_pkt *p) {
  struct sim_smp *m = sim_smp(p);
  /* Only the master's NIC hands traps and answers to the SM: after a
   * takeover the old master's NIC runs in another partition than the SM's
   * state, and nobody there waits for them. */
  bool master = sim_sm_master(s) == nic->n.id;
  if (m->attr == SIM_SMP_TRAP) {
    if (master)
      sim_sm_trap_rx(s, p);
    else
      sim_mad_lost(s, p);
  } else if (p->flags & SIM_PF_RESP) {
    if (m->attr == SIM_SMP_SM_INFO)
      sim_sm_poll_answer(s, nic, p);
    else if (p->src == nic->n.id && master)
      sim_sm_answer(s, p);
    else
      sim_mad_lost(s, p); /* the SM moved: nobody waits for it */
  } else if (++m->hop == m->nhops) {
    sim_mad_sma_put(s, &nic->n, p);
  } else {
    sim_mad_lost(s, p); /* a route through a NIC: malformed */
  }
}

/* An LFT Set takes effect as it arrives; the others are read when the
 * SMA answers. */
void sim_mad_sma_put(struct sim *s, struct sim_node *node, struct sim_pkt *p) {
  struct sim_smp *m = sim_smp(p);
  if (m->attr == SIM_SMP_LFT_SET && node->kind == SIM_NODE_SWITCH) {
    struct sim_switch *sw = container_of(node, struct sim_switch, n);
    uint32_t nl = sim_sm_nlids(s), b = m->arg * 64;
    uint32_t e = b + 64 < nl ? b + 64 : nl;
    if (b < nl)
      memcpy(sw->lft + b, m->lft + b, (e - b) * sizeof(uint16_t));
    m->took = s->now;
  }
  p->ts = s->now + s->cfg.ib.sm.smp_proc;
  sim_pktq_put(&node->sma_q, p);
  if (node->sma_ev.at == SIM_NEVER)
    sim_schedule(s, &node->sma_ev, node->sma_q.head->ts);
}

/* The SMA answers: the GetResp goes back the way the SMP came. */
static void sma_answer(struct sim *s, struct sim_node *node,
                       struct sim_pkt *p) {
  struct sim_smp *m = sim_smp(p);
  if (m->attr == SIM_SMP_SM_INFO &&
      (node->kind != SIM_NODE_NIC || !sim_sm_on(s, node->id))) {
    sim_mad_lost(s, p); /* no SM here to answer SMInfo */
    return;
  }
  p->flags |= SIM_PF_RESP;
  if (m->attr == SIM_SMP_PORT_INFO) {
    const struct sim_port *q = m->arg < node->nports ? &node->ports[m->arg] : 0;
    m->port_up = q && q->peer && !q->down;
  }
  if (m->hop == 0) { /* the SM's own NIC, if it still is */
    if (sim_sm_master(s) == node->id && node->kind == SIM_NODE_NIC)
      sim_sm_answer(s, p);
    else
      sim_mad_lost(s, p);
    return;
  }
  uint16_t r = dr_back(s, p, m->hop);
  m->hop--;
  if (node->kind == SIM_NODE_NIC)
    sim_mad_nic_send(s, container_of(node, struct sim_nic, n), p);
  else
    vl15_forward(s, container_of(node, struct sim_switch, n), 0,
                 &node->ports[r], p);
}

void sim_mad_sma_event(struct sim *s, struct sim_node *node) {
  struct sim_pkt *p;
  while ((p = node->sma_q.head) && p->ts <= s->now)
    sma_answer(s, node, sim_pktq_take(&node->sma_q));
  if (node->sma_q.head)
    sim_schedule(s, &node->sma_ev, node->sma_q.head->ts);
}

void sim_mad_trap(struct sim *s, struct sim_switch *sw) {
  struct sim_pkt *p = sim_pkt_alloc(s);
  if (!p)
    return;
  *p = (struct sim_pkt){.size = SIM_SMP_WIRE,
                        .src = sim_sm_master(s),
                        .dst = sim_sm_master(s),
                        .kind = SIM_PKT_SMP};
  memset(sim_smp(p), 0, sizeof(struct sim_smp));
  sim_smp(p)->attr = SIM_SMP_TRAP;
  sim_smp(p)->arg = sw->n.id;
  uint16_t r = sw->lft[s->nic_lid[p->dst]];
  vl15_forward(s, sw, 0, r == SIM_LFT_NONE ? 0 : &sw->n.ports[r], p);
}
