/* The simulator object: event loop, packet pool, flows, sampling. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/sim_int.h"
#include "util/clock.h"

void sim_cfg_default(struct sim_cfg *c) {
  memset(c, 0, sizeof(*c));
  c->seed = 1;
  c->topo.kind = SIM_TOPO_LEAF_SPINE;
  c->topo.leaves = 4;
  c->topo.hosts_per_leaf = 8;
  c->topo.oversubscription = 1.0;
  c->topo.k = 4;
  c->topo.rails = 1;
  for (int i = 0; i < 3; i++)
    c->topo.link[i] = (struct sim_link_cfg){100000000000ull, 1 * SIM_US, 0};
  c->sw.buffer_bytes = 32ull << 20;
  c->sw.ecn = false;
  c->sw.kmin = 400000;
  c->sw.kmax = 1600000;
  c->sw.pmax = 0.2;
  c->sw.pfc = true;
  c->sw.pfc_prios = 1u << 3;
  c->sw.xoff = 128 << 10;
  c->sw.xon = 64 << 10;
  c->sw.headroom = -1;
  c->sw.trim_queue = 64 << 10;
  c->routing = SIM_ROUTE_ECMP;
  c->ib.vl_buffer = 64 << 10;
  c->ib.fc_latency = 100 * SIM_NS;
  c->ib.fc_period = 0;
  c->ib.vls = 8;
  c->ib.high_limit = SIM_VLARB_UNLIMITED;
  c->recovery.detection = 100 * SIM_US;
  c->recovery.convergence = 500 * SIM_US;
  c->recovery.trap = 10 * SIM_US;
  c->recovery.traps = true;
  c->ib.cc.threshold = 64 << 10;
  c->ib.cc.marking_rate = 1;
  c->ib.cc.ccti_increase = 1;
  c->ib.cc.ccti_limit = 127;
  c->ib.cc.ccti_timer = 10 * SIM_US;
  c->ib.cc.ird_step = 40 * SIM_NS;
  c->ib.sm.engine = SIM_SM_FTREE;
  c->ib.sm.max_wire_smps = 4;
  c->ib.sm.smp_proc = 1 * SIM_US;
  c->ib.sm.route_time = 10 * SIM_NS;
  c->ib.sm.sweep_interval = 10000 * SIM_MS; /* OpenSM's 10 s */
  c->ib.sm.standby_nic = UINT32_MAX;
  c->ib.sm.polling_timeout = 10000 * SIM_MS; /* OpenSM's 10 s */
  c->ib.sm.polling_retries = 4;              /* OpenSM's */
  c->ib.sm.smp_timeout = 200 * SIM_MS;       /* OpenSM's */
  c->ib.sm.smp_retries = 3;                  /* OpenSM's */
  c->ib.vl15_buffer = 2048;
  c->tp.model = SIM_HOST_UROCE;
  c->tp.mtu = 4096;
  c->tp.window = 256;
  c->tp.ack_every = 16;
  c->tp.rto = 1000 * SIM_US;
  c->tp.retry_cnt = 6;
  c->tp.ooo = -1;
  c->tp.paths = 1;
  c->tp.data_prio = 3;
  c->tp.ctrl_prio = 6;
  c->tp.cc = SIM_CC_NONE;
  c->wl.kind = SIM_WL_NONE;
  /* a server's intra-host link: NVLink 4 on an H100 SXM, 18 links of
   * 25 GB/s each way (450 GB/s = 3600 Gb/s); 1 us per transfer
   * (docs/sim.md, "Servers of several ranks") */
  c->wl.coll.intra_gbps = 3600;
  c->wl.coll.intra_latency_us = 1.0;
  c->wl.bytes = 1 << 20;
  c->wl.incast_senders = 8;
  c->stop_time = SIM_NEVER;
  c->threads = 1;
  c->series_flows = 64;
}

void sim_cfg_free(struct sim_cfg *c) {
  free(c->wl.dist.bytes);
  free(c->wl.dist.cdf);
  c->wl.dist.bytes = 0;
  c->wl.dist.cdf = 0;
  c->wl.dist.n = 0;
}

uint32_t sim_frame_wire(const struct sim_cfg *c, uint32_t bth_to_icrc) {
  if (c->fabric == SIM_FABRIC_IB)
    return SIM_IB_LRH_LEN + (c->ib.grh ? SIM_IB_GRH_LEN : 0) + bth_to_icrc +
           SIM_IB_VCRC_LEN + SIM_IB_L1_LEN;
  uint32_t frame =
      (c->tp.ipv6 ? 40 : 20) + SIM_UDP_LEN + bth_to_icrc + SIM_ETH_LEN;
  if (frame < 64)
    frame = 64;
  return frame + SIM_L1_LEN;
}

uint32_t sim_data_wire_bytes(const struct sim_cfg *c, uint32_t payload,
                             bool first) {
  uint32_t hdr = first ? 28 : 12; /* BTH + RETH on the first, BTH after */
  uint32_t pad = (4 - payload % 4) % 4;
  return sim_frame_wire(c, hdr + payload + pad + 4);
}

struct sim_pkt *sim_pkt_alloc_slow(struct sim *s) {
  if (s->nchunks == s->chunk_cap) {
    uint32_t cap = s->chunk_cap ? s->chunk_cap * 2 : 64;
    struct sim_pkt **c = realloc(s->chunks, sizeof(*c) * cap);
    if (!c)
      return 0;
    s->chunks = c;
    s->chunk_cap = cap;
  }
  struct sim_pkt *a = malloc(sizeof(*a) * SIM_PKT_CHUNK);
  if (!a)
    return 0;
  s->chunks[s->nchunks++] = a;
  s->st.pkts_allocated += SIM_PKT_CHUNK;
  for (uint32_t i = 1; i < SIM_PKT_CHUNK; i++) {
    a[i].next = i + 1 < SIM_PKT_CHUNK ? &a[i + 1] : s->free_pkts;
  }
  s->free_pkts = &a[1];
  return &a[0];
}

void sim_schedule(struct sim *s, struct sim_ev *ev, sim_time_t t) {
  struct sim_heap *h = &s->heap;
  if (s->par && !(h = sim_par_route(s, ev, t)))
    return;
  /* Already due then (a NIC's poll often is: half its reschedules): a
   * second entry would run it at the same place in the order and leave
   * the first stale, for the heap to sift out. */
  if (ev->at == t)
    return;
  if (sim_heap_push(h, ev, t)) {
    fprintf(stderr, "uroce sim: out of memory for events\n");
    abort();
  }
}

void sim_schedule_min(struct sim *s, struct sim_ev *ev, sim_time_t t) {
  if (ev->at <= t)
    return;
  sim_schedule(s, ev, t);
}

/* VL arbitration tables: by default the control SL's VL alone in the
 * high table (like RoCE's strict priority for ACKs) and every data VL
 * with weight 64 (one 4 KiB packet) in the low one. */
static int vlarb_check(struct sim *s, char *err, size_t errlen) {
  struct sim_ib_cfg *ib = &s->cfg.ib;
  uint8_t cvl = s->qmap[s->cfg.tp.ctrl_prio];
  if (!ib->nhigh && !ib->nlow) {
    if (cvl != s->qmap[s->cfg.tp.data_prio])
      ib->high[ib->nhigh++] = (struct sim_vlarb_ent){cvl, 255};
    for (uint8_t v = 0; v < ib->vls; v++)
      if (!ib->nhigh || v != cvl)
        ib->low[ib->nlow++] = (struct sim_vlarb_ent){v, 64};
    ib->high_limit = SIM_VLARB_UNLIMITED;
  }
  for (int t = 0; t < 2; t++) {
    const struct sim_vlarb_ent *e = t ? ib->low : ib->high;
    uint32_t n = t ? ib->nlow : ib->nhigh;
    s->arb_mask[t] = 0;
    for (uint32_t i = 0; i < n; i++) {
      if (e[i].vl >= ib->vls) {
        snprintf(err, errlen,
                 "infiniband: vlarb_%s entry %u names VL %u, but vls is %u",
                 t ? "low" : "high", i, e[i].vl, ib->vls);
        return -1;
      }
      if (e[i].weight)
        s->arb_mask[t] |= (uint8_t)(1u << e[i].vl);
    }
    /* the nearest entry after i wins: filled from the farthest */
    for (uint32_t i = 0; i < n; i++)
      for (uint32_t d = n; d >= 1; d--) {
        uint32_t j = (i + d) % n;
        if (e[j].weight)
          s->arb_next[t][i][e[j].vl] = (uint8_t)j;
      }
  }
  for (uint8_t i = 0; i < SIM_NPRIO; i++)
    if (!((s->arb_mask[0] | s->arb_mask[1]) >> s->qmap[i] & 1)) {
      snprintf(err, errlen,
               "infiniband: VL %u (of SL %u) has no weight in vlarb_high or "
               "vlarb_low: its packets could never leave",
               s->qmap[i], i);
      return -1;
    }
  return 0;
}

/* Resolves the fabric: the queue of each priority and, for InfiniBand,
 * what its link layer needs; errors name what does not apply. */
static int ib_check(struct sim *s, char *err, size_t errlen) {
  const struct sim_cfg *c = &s->cfg;
  s->ib = c->fabric == SIM_FABRIC_IB;
  for (uint8_t i = 0; i < SIM_NPRIO; i++)
    s->qmap[i] = i;
  if (!s->ib) {
    if (c->routing == SIM_ROUTE_STATIC) {
      snprintf(err, errlen,
               "routing static (an InfiniBand LFT) needs "
               "fabric infiniband; Ethernet uses ecmp");
      return -1;
    }
    return 0;
  }
  const struct sim_ib_cfg *ib = &c->ib;
  uint32_t mtu = c->tp.mtu;
  if (mtu < 256 || mtu > 4096 || (mtu & (mtu - 1))) {
    snprintf(err, errlen,
             "fabric infiniband: mtu must be an IB MTU (256, 512, 1024, "
             "2048 or 4096), got %u",
             mtu);
    return -1;
  }
  if (ib->vls != 1 && ib->vls != 2 && ib->vls != 4 && ib->vls != 8) {
    snprintf(err, errlen, "infiniband: vls must be 1, 2, 4 or 8, got %u",
             ib->vls);
    return -1;
  }
  if (c->sw.ecn || c->tp.cc == SIM_CC_DCQCN || c->routing == SIM_ROUTE_ECMP ||
      c->routing == SIM_ROUTE_SPRAY || c->tp.ipv6) {
    snprintf(err, errlen,
             "fabric infiniband: %s is Ethernet's (no ECN, DCQCN, IPv6, "
             "ECMP or spraying on InfiniBand)",
             c->sw.ecn                      ? "switch ecn"
             : c->tp.cc == SIM_CC_DCQCN     ? "cc dcqcn"
             : c->tp.ipv6                   ? "ipv6"
             : c->routing == SIM_ROUTE_ECMP ? "routing ecmp"
                                            : "routing spray");
    return -1;
  }
  for (uint8_t i = 0; i < SIM_NPRIO; i++) {
    s->qmap[i] = (uint8_t)(i % ib->vls);
    s->vl_sls[s->qmap[i]] |= (uint8_t)(1u << i);
  }
  if (vlarb_check(s, err, errlen))
    return -1;
  if (ib->fc_period && ib->fc_period < 10 * SIM_NS) {
    snprintf(err, errlen,
             "infiniband: fc_period_ns must be 0 (IBA's 65,536 symbol "
             "times) or at least 10 ns");
    return -1;
  }
  if (ib->cc.enabled && (!ib->cc.marking_rate || !ib->cc.ccti_timer)) {
    snprintf(err, errlen,
             "infiniband.cc: marking_rate and ccti_timer_us must be > 0");
    return -1;
  }
  s->ib_max_blocks = sim_ib_blocks(sim_data_wire_bytes(c, mtu, true));
  /* The largest request: an atomic or a READ request is smaller. */
  if (ib->vl_buffer / SIM_IB_BLOCK < s->ib_max_blocks ||
      ib->vl_buffer > (1ull << 30)) {
    snprintf(err, errlen,
             "infiniband: vl_buffer %llu bytes must hold one packet of the "
             "mtu (%u bytes) and be at most 1 GiB",
             (unsigned long long)ib->vl_buffer,
             s->ib_max_blocks * SIM_IB_BLOCK);
    return -1;
  }
  return 0;
}

static double mb(uint64_t b) {
  return (double)b / (1 << 20);
}

/* The scenario does not fit: say what it needs, and where it goes. */
static int mem_refused(const struct sim *s, char *err, size_t errlen) {
  const struct sim_mem *m = &s->mem;
  if (!m->limit || m->total <= m->limit)
    return 0;
  snprintf(err, errlen,
           "scenario needs about %.0f MB (topology %.0f MB, %.0f KB per "
           "NIC at rest, flows %.0f MB, %llu connections at once %.0f MB, "
           "packets %.0f MB); %s %.0f MB",
           mb(m->total), mb(m->topology), (double)m->nic / 1024, mb(m->flows),
           (unsigned long long)m->live, mb(m->live * m->conn), mb(m->pkts),
           s->cfg.mem_limit ? "the limit is" : "the machine has available",
           mb(m->limit));
  return -1;
}

struct sim *sim_new(const struct sim_cfg *cfg, char *err, size_t errlen) {
  struct sim *s = calloc(1, sizeof(*s));
  if (!s) {
    snprintf(err, errlen, "out of memory");
    return 0;
  }
  s->cfg = *cfg;
  /* The copy shares the distribution arrays; duplicate them. */
  s->cfg.wl.dist.bytes = 0;
  s->cfg.wl.dist.cdf = 0;
  if (cfg->wl.dist.n) {
    uint32_t n = cfg->wl.dist.n;
    s->cfg.wl.dist.bytes = malloc(n * sizeof(uint64_t));
    s->cfg.wl.dist.cdf = malloc(n * sizeof(double));
    if (!s->cfg.wl.dist.bytes || !s->cfg.wl.dist.cdf) {
      snprintf(err, errlen, "out of memory");
      sim_del(s);
      return 0;
    }
    memcpy(s->cfg.wl.dist.bytes, cfg->wl.dist.bytes, n * sizeof(uint64_t));
    memcpy(s->cfg.wl.dist.cdf, cfg->wl.dist.cdf, n * sizeof(double));
  }
  const struct sim_transport_cfg *tp = &cfg->tp;
  if (tp->mtu < 256 || tp->mtu > 9000 || !tp->window ||
      (tp->window & (tp->window - 1)) || tp->window > 65536 || !tp->ack_every ||
      tp->data_prio >= SIM_NPRIO || tp->ctrl_prio >= SIM_NPRIO || !tp->rto) {
    snprintf(err, errlen,
             "transport: mtu 256..9000, window a power of two "
             "up to 65536, ack_every >= 1, priorities 0..7, "
             "rto > 0");
    sim_del(s);
    return 0;
  }
  if (tp->retry_cnt > 7) {
    snprintf(err, errlen, "transport: retry_cnt 0..7 (7: unlimited)");
    sim_del(s);
    return 0;
  }
  if (tp->model == SIM_HOST_UROCE &&
      (tp->mtu > 4096 || (tp->mtu & (tp->mtu - 1)))) {
    snprintf(err, errlen,
             "transport: the uroce model needs an mtu of 256, 512, 1024, "
             "2048 or 4096");
    sim_del(s);
    return 0;
  }
  if (cfg->trace && tp->model != SIM_HOST_UROCE) {
    snprintf(err, errlen,
             "a trace needs the uroce host model (transport: model: "
             "uroce): the simple model has no transport engine");
    sim_del(s);
    return 0;
  }
  if (cfg->trace) {
    int e = jsonl_open(&s->trace, cfg->trace, true);
    if (e < 0) {
      snprintf(err, errlen, "trace '%s': %s", cfg->trace, strerror(-e));
      sim_del(s);
      return 0;
    }
  }
  if (cfg->sw.ecn && cfg->sw.kmax <= cfg->sw.kmin) {
    snprintf(err, errlen, "switch: ecn kmax must be larger than kmin");
    sim_del(s);
    return 0;
  }
  if (cfg->sw.pfc && cfg->sw.xon > cfg->sw.xoff) {
    snprintf(err, errlen, "switch: pfc xon must not exceed xoff");
    sim_del(s);
    return 0;
  }
  /* Trimming keeps the engine model's headers; the simple model has none
   * (the scenario parser says so by key; this is for direct users). */
  if (cfg->sw.trim &&
      (cfg->tp.model != SIM_HOST_UROCE || cfg->fabric == SIM_FABRIC_IB ||
       !cfg->sw.trim_queue)) {
    snprintf(err, errlen,
             "switch: trim needs the uroce model, an Ethernet fabric and "
             "a trim queue");
    sim_del(s);
    return 0;
  }
  if (ib_check(s, err, errlen)) {
    sim_del(s);
    return 0;
  }
  s->ooo = tp->ooo < 0 ? cfg->routing == SIM_ROUTE_ADAPTIVE ||
                             cfg->routing == SIM_ROUTE_SPRAY || tp->paths > 1
                       : (uint64_t)tp->ooo;
  s->host = tp->model == SIM_HOST_SIMPLE ? &sim_host_rdmaw : &sim_host_eng;
  if (s->cfg.tp.cc == SIM_CC_DCQCN && !s->cfg.tp.dcqcn.line_rate_bps)
    uroce_dcqcn_params_mlx(&s->cfg.tp.dcqcn, s->cfg.topo.link[0].rate_bps);
  if (s->cfg.tp.cc == SIM_CC_DCQCN)
    s->cfg.tp.dcqcn.line_rate_bps = s->cfg.topo.link[0].rate_bps;
  sim_mem_structure(s, &s->mem);
  s->mem.limit = cfg->mem_limit ? cfg->mem_limit : sim_mem_available();
  s->ser.stopped = SIM_NEVER;
  if (mem_refused(s, err, errlen)) {
    sim_del(s);
    return 0;
  }
  if (sim_heap_init(&s->heap, 1024) || sim_topo_build(s, err, errlen)) {
    if (!err[0])
      snprintf(err, errlen, "out of memory");
    sim_del(s);
    return 0;
  }
  if (s->ib && sim_sm_new(s, err, errlen)) {
    sim_del(s);
    return 0;
  }
  if (sim_fail_new(s, err, errlen)) {
    sim_del(s);
    return 0;
  }
  for (uint32_t i = 0; i < s->nnics; i++) {
    s->nics[i].model = s->host->nic_new(s, &s->nics[i]);
    if (!s->nics[i].model) {
      snprintf(err, errlen, "out of memory for NICs");
      sim_del(s);
      return 0;
    }
  }
  sim_ev_new(&s->sample_ev, SIM_EV_SAMPLE, 0);
  uint64_t before = sim_heap_bytes();
  if (sim_workload_add(s, err, errlen)) {
    sim_del(s);
    return 0;
  }
  sim_mem_workload(s, &s->mem, sim_heap_grown(before));
  if (mem_refused(s, err, errlen)) {
    sim_del(s);
    return 0;
  }
  s->net = sim_net_default();
  sim_par_partition(s); /* by where the workload is */
  if (s->net && sim_net_check(s, err, errlen)) {
    sim_del(s);
    return 0;
  }
  if (s->cfg.sample_interval)
    sim_schedule(s, &s->sample_ev, 0);
  return s;
}

void sim_del(struct sim *s) {
  if (!s)
    return;
  sim_coll_del(s); /* its communicators before the NICs they use */
  sim_sm_del(s);
  sim_fail_del(s);
  if (s->nics && s->host)
    for (uint32_t i = 0; i < s->nnics; i++)
      if (s->nics[i].model)
        s->host->nic_del(s->nics[i].model);
  int e = jsonl_close(s->trace);
  if (e < 0)
    fprintf(stderr, "uroce sim: trace '%s': %s (events lost)\n", s->cfg.trace,
            strerror(-e));
  for (uint32_t i = 0; i < s->nchunks; i++)
    free(s->chunks[i]);
  free(s->chunks);
  for (uint32_t i = 0; i < s->nfchunks; i++)
    free(s->fchunks[i]);
  free(s->fchunks);
  for (uint32_t i = 0; s->nics && i < s->nnics; i++)
    free(s->nics[i].port.crq.a);
  for (uint32_t j = 0; s->ports && j < s->nports; j++)
    free(s->ports[j].crq.a);
  free(s->nics);
  free(s->sws);
  free(s->ports);
  sim_heap_free(&s->heap);
  free(s->ser.t);
  free(s->ser.queue);
  free(s->ser.pauses);
  free(s->ser.acked);
  free(s->ser.ecn);
  free(s->ser.cnps);
  free(s->ser.paused_ports);
  free(s->ser.link_bytes);
  free(s->ser.rx_payload);
  free(s->ser.rate);
  free(s->ser.rate_n);
  free(s->ser.rate_win);
  free(s->ser.cc_rate);
  free(s->ser.cc_n);
  free(s->ser.port_q);
  free(s->rate_hist);
  free(s->rate_tmp);
  free(s->pause_log);
  sim_cfg_free(&s->cfg);
  free(s);
}

int64_t sim_add_flow(struct sim *s, uint32_t src, uint32_t dst, uint64_t bytes,
                     sim_time_t start, enum sim_op op) {
  if (src >= s->nnics || dst >= s->nnics || src == dst || !bytes ||
      bytes > (1ull << 40) || op > SIM_OP_READ ||
      (op == SIM_OP_READ && s->cfg.tp.model == SIM_HOST_SIMPLE))
    return -1;
  if (s->nflows == s->nfchunks * SIM_FLOW_CHUNK) {
    struct sim_flow_int **c =
        realloc(s->fchunks, sizeof(*c) * (s->nfchunks + 1));
    if (!c)
      return -1;
    s->fchunks = c;
    c[s->nfchunks] = calloc(SIM_FLOW_CHUNK, sizeof(**c));
    if (!c[s->nfchunks])
      return -1;
    s->nfchunks++;
  }
  uint32_t id = s->nflows++;
  struct sim_flow_int *fi = sim_flow_int(s, id);
  fi->f = (struct sim_flow){.id = id,
                            .src = src,
                            .dst = dst,
                            .bytes = bytes,
                            .start = start < s->now ? s->now : start,
                            .finish = SIM_NEVER,
                            .failed = SIM_NEVER,
                            .op = (uint8_t)op,
                            .sl = s->cfg.tp.data_prio};
  /* Linux-style UDP source port: 0xC000 | 14 bits of hash of the QP. */
  uint64_t h = sim_seed(s->cfg.seed, 4, id);
  fi->f.sport = (uint16_t)(0xC000 | (h & 0x3FFF));
  s->total_bytes += bytes;
  s->st.flows = s->nflows;
  sim_ev_new(&fi->start_ev, SIM_EV_FLOW_START, id);
  sim_ev_new(&fi->end_ev, SIM_EV_FLOW_END, id);
  fi->end_ev.part = s->nics[dst].n.part;
  sim_schedule(s, &fi->start_ev, fi->f.start);
  return id;
}

void sim_flow_acked(struct sim *s, struct sim_flow *f, uint64_t bytes) {
  f->acked += bytes;
  s->acked_bytes += bytes;
}

void sim_flow_done(struct sim *s, struct sim_flow *f, sim_time_t now) {
  f->finish = now;
  s->st.flows_done++;
}

void sim_flow_failed(struct sim *s, struct sim_flow *f, sim_time_t now,
                     uint8_t status) {
  f->failed = now;
  f->status = status;
  s->st.flows_failed++;
}

void sim_flow_end_later(struct sim *s, struct sim_flow *f) {
  sim_schedule(s, &sim_flow_int(s, f->id)->end_ev, s->now + s->cell);
}

void sim_nic_retry_later(struct sim *s, struct sim_nic *nic) {
  sim_schedule_min(s, &nic->retry_ev,
                   s->cell ? sim_cell_end(s, s->now) : s->now);
}

/* Grows one series array to cap entries of sz bytes; 0 or -1. */
static int grow(void *pp, size_t sz, uint32_t cap) {
  void **p = pp;
  void *n = realloc(*p, sz * cap);
  if (!n)
    return -1;
  *p = n;
  return 0;
}

/* Bytes the time series take with room for cap samples (the per-port
 * queues only while they are kept). */
static uint64_t series_bytes(const struct sim *s, uint32_t cap) {
  const struct sim_series *r = &s->ser;
  uint64_t per = sizeof(*r->t) + sizeof(*r->queue) + sizeof(*r->pauses) +
                 sizeof(*r->acked) * (r->nflows + 1) + sizeof(*r->ecn) +
                 sizeof(*r->cnps) + sizeof(*r->paused_ports) +
                 sizeof(*r->link_bytes) + sizeof(*r->rx_payload) +
                 sizeof(*r->rate) + sizeof(*r->rate_n) + sizeof(*r->rate_win) +
                 sizeof(*r->cc_rate) + sizeof(*r->cc_n);
  uint64_t b = per * cap;
  if ((uint64_t)cap * s->nports <= SIM_PORTQ_MAX)
    b += (uint64_t)cap * s->nports * sizeof(*r->port_q);
  else
    b += (uint64_t)s->portq_cap * s->nports * sizeof(*r->port_q);
  return b;
}

/* Room for the next sample. The series grow with the simulated time,
 * which the memory estimate cannot know: they stop (and say so) rather
 * than take the run past its memory limit. */
static int grow_series(struct sim *s) {
  struct sim_series *r = &s->ser;
  if (r->n < s->ser_cap)
    return 0;
  if (r->stopped != SIM_NEVER)
    return -1;
  uint32_t cap = s->ser_cap ? s->ser_cap * 2 : 256;
  bool over =
      s->mem.limit && s->mem.total + series_bytes(s, cap) > s->mem.limit;
  bool dcqcn = s->cfg.tp.cc == SIM_CC_DCQCN && s->host->cc_rate_bps && !s->coll;
  bool portq = (uint64_t)cap * s->nports <= SIM_PORTQ_MAX;
  if (over || grow(&r->t, sizeof(*r->t), cap) ||
      grow(&r->queue, sizeof(*r->queue), cap) ||
      grow(&r->pauses, sizeof(*r->pauses), cap) ||
      grow(&r->acked, sizeof(*r->acked) * (r->nflows + 1), cap) ||
      grow(&r->ecn, sizeof(*r->ecn), cap) ||
      grow(&r->cnps, sizeof(*r->cnps), cap) ||
      grow(&r->paused_ports, sizeof(*r->paused_ports), cap) ||
      grow(&r->link_bytes, sizeof(*r->link_bytes), cap) ||
      grow(&r->rx_payload, sizeof(*r->rx_payload), cap) ||
      grow(&r->rate, sizeof(*r->rate), cap) ||
      grow(&r->rate_n, sizeof(*r->rate_n), cap) ||
      grow(&r->rate_win, sizeof(*r->rate_win), cap) ||
      (dcqcn && (grow(&r->cc_rate, sizeof(*r->cc_rate), cap) ||
                 grow(&r->cc_n, sizeof(*r->cc_n), cap))) ||
      /* Per-port queues only while they stay small; then they stop. */
      (portq && grow(&r->port_q,
                     sizeof(*r->port_q) * (s->nports ? s->nports : 1), cap))) {
    r->stopped = s->now;
    fprintf(stderr,
            "uroce sim: the time series stop at %.3f us (%u samples): %s\n",
            (double)s->now / 1e6, r->n,
            over ? "more would pass the memory limit" : "out of memory");
    return -1;
  }
  if (portq)
    s->portq_cap = cap;
  s->ser_cap = cap;
  return 0;
}

uint32_t sim_pkt_payload(const struct sim *s, const struct sim_pkt *p) {
  if (p->kind != SIM_PKT_DATA)
    return 0;
  return s->host == &sim_host_eng ? p->plen : p->len;
}

/* Payload of flow arrived now: counted in its stream. */
static void stream_rx(struct sim *s, uint32_t flow, uint64_t bytes) {
  if (flow & SIM_COLL_FLOW || flow >= s->nflows)
    return;
  struct sim_flow_int *f = sim_flow_int(s, flow);
  f->wire_rx += bytes;
  f->last_rx = s->now;
}

/* A data frame arrived at nic: count what a sample did not already. */
void sim_rx_data(struct sim *s, struct sim_nic *nic, const struct sim_pkt *p) {
  uint64_t b = sim_pkt_payload(s, p), c = nic->rx_credit;
  nic->rx_credit = 0;
  if (c > b)
    c = b;
  nic->rx_payload += b - c;
  stream_rx(s, p->flow, b - c);
}

/* At a sample: count the part of each frame now arriving at a NIC that
 * has already crossed the wire, so that rates follow the wire. */
static void credit_arriving(struct sim *s) {
  for (uint32_t i = 0; i < s->nnics; i++) {
    struct sim_nic *nic = &s->nics[i];
    if (!sim_mine(s, nic->n.part))
      continue;
    const struct sim_port *in = nic->port.peer;
    const struct sim_pkt *p = in->fly_head;
    if (!p || p->kind != SIM_PKT_DATA)
      continue;
    sim_time_t ser = sim_ser_time(p->size, in->rate_bps);
    if (p->ts - ser >= s->now || !ser)
      continue;
    uint64_t b = sim_pkt_payload(s, p);
    uint64_t part =
        (uint64_t)((double)b * (double)(s->now - (p->ts - ser)) / (double)ser);
    if (part > b)
      part = b;
    if (part <= nic->rx_credit)
      continue;
    uint64_t d = part - nic->rx_credit;
    nic->rx_credit = part;
    nic->rx_payload += d;
    stream_rx(s, p->flow, d);
  }
}

void sim_pause_append(struct sim *s, const struct sim_pause_ev *e) {
  if (s->npause_log == s->pause_log_cap) {
    if (s->pause_log_cap >= SIM_PAUSE_LOG_MAX) {
      s->pause_log_full = true;
      return;
    }
    uint32_t cap = s->pause_log_cap ? 2 * s->pause_log_cap : 1024;
    struct sim_pause_ev *n = realloc(s->pause_log, cap * sizeof(*n));
    if (!n) {
      s->pause_log_full = true;
      return;
    }
    s->pause_log = n;
    s->pause_log_cap = cap;
  }
  s->pause_log[s->npause_log++] = *e;
}

void sim_log_pause(struct sim *s, const struct sim_port *p, uint8_t prio,
                   bool xoff) {
  bool nic = p->node->kind == SIM_NODE_NIC;
  struct sim_pause_ev e = {.t = s->now,
                           .key = s->cur_key,
                           .node =
                               nic ? p->node->id | SIM_PAUSE_NIC : p->node->id,
                           .port = nic ? 0 : p->idx,
                           .prio = prio,
                           .xoff = xoff};
  sim_pause_append(s, &e);
}

uint32_t sim_pause_count(const struct sim *s, bool *full) {
  if (full)
    *full = s->pause_log_full;
  return s->npause_log;
}

void sim_pause_get(const struct sim *s, uint32_t i, struct sim_pause_rec *r) {
  const struct sim_pause_ev *e = &s->pause_log[i];
  *r = (struct sim_pause_rec){.t_us = (double)e->t / 1e6,
                              .node = e->node & ~SIM_PAUSE_NIC,
                              .port = e->port,
                              .nic = (e->node & SIM_PAUSE_NIC) != 0,
                              .xoff = e->xoff,
                              .prio = e->prio};
}

void sim_port_info(const struct sim *s, uint32_t j, int *tier, uint32_t *sw,
                   uint32_t *port, bool *down) {
  const struct sim_port *p = &s->ports[j];
  const struct sim_switch *w = (const struct sim_switch *)p->node;
  *tier = p->node->tier;
  *sw = p->node->id;
  *port = p->idx;
  *down = p->idx < w->n_down;
}

uint32_t sim_port_top_trims(const struct sim *s, uint64_t *trims,
                            uint64_t *drops) {
  uint32_t best = UINT32_MAX;
  *trims = *drops = 0;
  for (uint32_t j = 0; j < s->nports; j++)
    if (s->ports[j].trims > *trims) {
      best = j;
      *trims = s->ports[j].trims;
      *drops = s->ports[j].trim_drops;
    }
  return best;
}

/* Link group of a port's egress (SIM_LINK_GROUPS). */
static int link_group(const struct sim_port *p) {
  if (p->node->kind == SIM_NODE_NIC)
    return 0;
  const struct sim_switch *w = (const struct sim_switch *)p->node;
  bool down = p->idx < w->n_down;
  /* tier 1 down: host links; tier 1 up, tier 2 down: fabric; above: core */
  int t = p->node->tier;
  return down ? 2 * (t - 1) + 1 : 2 * t;
}

/* Wire bytes a port has put on its link by now (the frame it is sending
 * counts for the part already sent). */
static uint64_t wire_sent(const struct sim *s, const struct sim_port *p) {
  uint64_t b = p->tx_bytes;
  if (p->busy_until > s->now) {
    uint64_t left = (uint64_t)((double)(p->busy_until - s->now) *
                               (double)p->rate_bps / 8e12);
    b = left < b ? b - left : 0;
  }
  return b;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Percentiles of v[0..m) (sorted here) into q: min, p10, p50, p90, max,
 * mean. */
static void quantiles(double *v, uint32_t m, double *q) {
  memset(q, 0, SIM_RATE_Q * sizeof(double));
  if (!m)
    return;
  qsort(v, m, sizeof(double), cmp_dbl);
  double sum = 0;
  for (uint32_t j = 0; j < m; j++)
    sum += v[j];
  q[0] = v[0];
  q[1] = v[(size_t)(0.1 * (m - 1) + 0.5)];
  q[2] = v[(size_t)(0.5 * (m - 1) + 0.5)];
  q[3] = v[(size_t)(0.9 * (m - 1) + 0.5)];
  q[4] = v[m - 1];
  q[5] = sum / m;
}

/* ---- distributed runs: what a sample and the report read ---- */

enum { MP_PORT = 7, MP_FLOW = 12 };

/* What a sample or the report reads of the parts other ranks run (their
 * ports, NICs, switches and flows), from those ranks: each rank fills in
 * its own parts, zero elsewhere, and the sum is everyone's value. The
 * counters become the sums over the ranks; sum_st says whether s->st is
 * this rank's alone (a sample mid-run) and the host models' counters
 * (add_stats) must be added (sim_stats cannot reach other ranks' models).
 */
static void net_mirror(struct sim *s) {
  uint32_t np = s->nports + s->nnics;
  size_t n = (size_t)np * MP_PORT + s->nnics + s->nswitches +
             (size_t)s->nflows * MP_FLOW;
  uint64_t *v = calloc(n ? n : 1, sizeof(*v)), *o = v;
  if (!v) {
    fprintf(stderr, "uroce sim: out of memory for a distributed sample\n");
    abort(); /* the other ranks would wait for this one */
  }
  for (uint32_t j = 0; j < np; j++, o += MP_PORT) {
    struct sim_port *p = j < s->nports ? &s->ports[j] : &s->nics[j - s->nports].port;
    if (!sim_mine(s, p->tx_ev.part))
      continue;
    o[0] = p->tx_bytes;
    o[1] = p->busy_until;
    o[2] = p->qbytes;
    o[3] = p->paused;
    o[4] = p->max_q;
    o[5] = p->trims;
    o[6] = p->trim_drops;
  }
  for (uint32_t i = 0; i < s->nnics; i++, o++)
    if (sim_mine(s, s->nics[i].n.part))
      o[0] = s->nics[i].rx_payload;
  for (uint32_t i = 0; i < s->nswitches; i++, o++)
    if (sim_mine(s, s->sws[i].n.part))
      o[0] = s->sws[i].max_used;
  for (uint32_t i = 0; i < s->nflows; i++, o += MP_FLOW) {
    struct sim_flow_int *fi = sim_flow_int(s, i);
    struct sim_flow *f = &fi->f;
    bool src = sim_mine(s, s->nics[f->src].n.part);
    bool dst = sim_mine(s, s->nics[f->dst].n.part);
    if (src) {
      o[0] = f->start;
      o[1] = f->finish;
      o[2] = f->failed;
      o[3] = f->status;
      o[4] = f->acked;
      o[5] = f->tx_pkts;
      o[6] = f->retx_pkts;
    }
    if (f->op == SIM_OP_READ ? src : dst) { /* where its data arrives */
      o[7] = f->rx_bytes;
      o[10] = fi->wire_rx;
    }
    /* a READ's requests arrive at its destination too: the later */
    if (src || dst)
      o[11] = fi->last_rx;
    if (dst) {
      o[8] = f->rsp_tx_pkts;
      o[9] = f->rsp_retx_pkts;
    }
  }
  /* last_rx (o[11] of each flow), the latest of its two ends, by MAX */
  size_t nl = (size_t)np * MP_PORT + s->nnics + s->nswitches;
  uint64_t *last = s->nflows ? calloc(s->nflows, sizeof(*last)) : 0;
  if (s->nflows && !last) {
    fprintf(stderr, "uroce sim: out of memory for a distributed sample\n");
    abort();
  }
  for (uint32_t i = 0; i < s->nflows; i++) {
    last[i] = v[nl + (size_t)i * MP_FLOW + 11];
    v[nl + (size_t)i * MP_FLOW + 11] = 0;
  }
  sim_net_reduce(s, v, n, SIM_NET_SUM);
  sim_net_reduce(s, last, s->nflows, SIM_NET_MAX);
  for (uint32_t i = 0; i < s->nflows; i++)
    v[nl + (size_t)i * MP_FLOW + 11] = last[i];
  free(last);
  o = v;
  for (uint32_t j = 0; j < np; j++, o += MP_PORT) {
    struct sim_port *p = j < s->nports ? &s->ports[j] : &s->nics[j - s->nports].port;
    p->tx_bytes = o[0];
    p->busy_until = o[1];
    p->qbytes = o[2];
    p->paused = (uint8_t)o[3];
    p->max_q = o[4];
    p->trims = o[5];
    p->trim_drops = o[6];
  }
  for (uint32_t i = 0; i < s->nnics; i++, o++)
    s->nics[i].rx_payload = o[0];
  for (uint32_t i = 0; i < s->nswitches; i++, o++)
    s->sws[i].max_used = o[0];
  for (uint32_t i = 0; i < s->nflows; i++, o += MP_FLOW) {
    struct sim_flow_int *fi = sim_flow_int(s, i);
    struct sim_flow *f = &fi->f;
    f->start = o[0];
    f->finish = o[1];
    f->failed = o[2];
    f->status = (uint8_t)o[3];
    f->acked = o[4];
    f->tx_pkts = o[5];
    f->retx_pkts = o[6];
    f->rx_bytes = o[7];
    f->rsp_tx_pkts = o[8];
    f->rsp_retx_pkts = o[9];
    fi->wire_rx = o[10];
    fi->last_rx = o[11];
  }
  free(v);
}

/* The counters over every rank: st, this rank's alone, plus its host
 * models' (sim_stats cannot reach other ranks' models). */
static void net_stats(struct sim *s, struct sim_stats *st) {
  if (s->host->add_stats) {
    st->timeouts = st->naks = st->cnps = 0;
    for (uint32_t i = 0; i < s->nnics; i++)
      if (sim_mine(s, s->nics[i].n.part))
        s->host->add_stats(s->nics[i].model, st);
  }
  uint64_t mx[SIM_TIERS];
  memcpy(mx, st->max_vl_in, sizeof(mx));
  double wall = st->wall_s;
  sim_time_t now = st->now;
  st->wall_s = 0;
  _Static_assert(sizeof(*st) % 8 == 0, "struct sim_stats is words");
  sim_net_reduce(s, st, sizeof(*st) / 8, SIM_NET_SUM);
  sim_net_reduce(s, mx, SIM_TIERS, SIM_NET_MAX);
  memcpy(st->max_vl_in, mx, sizeof(mx));
  st->wall_s = wall;
  st->now = now;
}

/* Streams are the workload's flows, or the rank NICs of a collective. */
static uint32_t nstreams(const struct sim *s) {
  return s->coll ? s->nnics : s->nflows;
}

static uint64_t stream_bytes(struct sim *s, uint32_t i) {
  return s->coll ? s->nics[i].rx_payload : sim_flow_int(s, i)->wire_rx;
}

/* Active part of [a, b] for stream i (a flow between start and finish). */
static sim_time_t stream_active(struct sim *s, uint32_t i, sim_time_t a,
                                sim_time_t b) {
  if (s->coll)
    return sim_coll_is_rank(s, i) ? b - a : 0;
  const struct sim_flow_int *fi = sim_flow_int(s, i);
  const struct sim_flow *f = &fi->f;
  /* Until it finished or its last byte arrived, whichever is later: a
   * copy resent for nothing may arrive after the flow completed. */
  sim_time_t end = fi->last_rx > f->finish ? fi->last_rx : f->finish;
  sim_time_t lo = f->start > a ? f->start : a;
  sim_time_t hi = end < b ? end : b;
  return hi > lo ? hi - lo : 0;
}

/* Receive rates of the active streams over a window that reaches back
 * far enough for the mean stream to get about 8 full packets (at most
 * SIM_RATE_HIST samples): shorter windows show single packets. */
static void sample_rates(struct sim *s, uint32_t i) {
  struct sim_series *r = &s->ser;
  uint32_t n = nstreams(s), K = s->rate_hist_k;
  memset(r->rate[i], 0, sizeof(r->rate[i]));
  r->rate_n[i] = 0;
  r->rate_win[i] = 0;
  if (!n || !K)
    return;
  if (i) {
    uint32_t k = 1;
    double dt = (double)(r->t[i] - r->t[i - 1]);
    uint64_t agg = r->rx_payload[i] - r->rx_payload[i - 1];
    uint32_t act = 0;
    for (uint32_t j = 0; j < n; j++)
      act += stream_active(s, j, r->t[i - 1], r->t[i]) > 0;
    if (agg && act && dt > 0) {
      double per = (double)agg / act; /* bytes per stream per sample */
      double want = 8.0 * s->cfg.tp.mtu;
      k = per >= want ? 1 : (uint32_t)(want / per) + 1;
    }
    /* The sample at the end may close a short interval. */
    if (k < i && r->t[i] - r->t[i - k] < s->cfg.sample_interval)
      k++;
    if (k > K - 1)
      k = K - 1;
    if (k > i)
      k = i;
    sim_time_t a = r->t[i - k], b = r->t[i];
    r->rate_win[i] = b - a;
    uint32_t m = 0;
    for (uint32_t j = 0; j < n; j++) {
      sim_time_t on = stream_active(s, j, a, b);
      /* A flow active for a sliver of the window says little. */
      if (on * 4 < b - a)
        continue;
      uint64_t now = stream_bytes(s, j);
      uint64_t then = s->rate_hist[(uint64_t)j * K + (i - k) % K];
      double g = (double)(now - then) * 8 / ((double)on * 1e-12) / 1e9;
      s->rate_tmp[m++] = g;
    }
    quantiles(s->rate_tmp, m, r->rate[i]);
    r->rate_n[i] = m;
  }
  for (uint32_t j = 0; j < n; j++)
    s->rate_hist[(uint64_t)j * K + i % K] = stream_bytes(s, j);
}

/* The rate limiters of the flows running now. */
static void sample_cc(struct sim *s, uint32_t i) {
  struct sim_series *r = &s->ser;
  if (!r->cc_rate)
    return;
  uint32_t m = 0;
  /* A distributed run: each flow's rate from its source's rank. */
  double *b = s->net && s->nflows ? calloc(s->nflows, sizeof(*b)) : 0;
  if (s->net && s->nflows && !b) {
    fprintf(stderr, "uroce sim: out of memory for a distributed sample\n");
    abort(); /* the other ranks would wait for this one */
  }
  for (uint32_t j = 0; b && j < s->nflows; j++) {
    const struct sim_flow *f = sim_flow_mut(s, j);
    if (f->start <= s->now && f->finish == SIM_NEVER && f->st &&
        sim_mine(s, s->nics[f->src].n.part))
      b[j] = s->host->cc_rate_bps(s->nics[f->src].model, f);
  }
  sim_net_reduce(s, b, b ? s->nflows : 0, SIM_NET_FSUM);
  for (uint32_t j = 0; j < s->nflows && s->rate_tmp; j++) {
    const struct sim_flow *f = sim_flow_mut(s, j);
    if (f->start > s->now || f->finish != SIM_NEVER || !f->st)
      continue;
    double bps = b ? b[j] : s->host->cc_rate_bps(s->nics[f->src].model, f);
    if (bps >= 0)
      s->rate_tmp[m++] = bps / 1e9;
  }
  free(b);
  quantiles(s->rate_tmp, m, r->cc_rate[i]);
  r->cc_n[i] = m;
}

static void sample_first(struct sim *s) {
  struct sim_series *r = &s->ser;
  r->nflows = s->nflows < s->cfg.series_flows ? s->nflows : s->cfg.series_flows;
  r->nports = s->nports;
  for (uint32_t j = 0; j < s->nnics; j++)
    r->link_cap_bps[0] += (double)s->nics[j].port.rate_bps;
  for (uint32_t j = 0; j < s->nports; j++)
    r->link_cap_bps[link_group(&s->ports[j])] += (double)s->ports[j].rate_bps;
  /* Rate windows need each stream's bytes at the last K samples; fewer
   * samples back when there are very many streams. */
  uint32_t n = nstreams(s), K = SIM_RATE_HIST;
  while (K > 2 && (uint64_t)n * K > (16u << 20))
    K /= 2;
  if (n) {
    s->rate_hist = calloc((size_t)n * K, sizeof(uint64_t));
    s->rate_tmp = malloc(n * sizeof(double));
  }
  s->rate_hist_k = s->rate_hist && s->rate_tmp ? K : 0;
}

static void sample(struct sim *s) {
  struct sim_series *r = &s->ser;
  if (!r->n)
    sample_first(s);
  if (grow_series(s))
    return;
  uint32_t i = r->n++;
  r->t[i] = s->now;
  sim_fc_commit_due(s, s->now, 0); /* their bytes are on the wire */
  credit_arriving(s);
  struct sim_stats keep;
  if (s->net) { /* every rank samples the whole fabric */
    keep = s->st;
    net_stats(s, &s->st);
    net_mirror(s);
  }
  memset(r->queue[i], 0, sizeof(r->queue[i]));
  memset(r->paused_ports[i], 0, sizeof(r->paused_ports[i]));
  memset(r->link_bytes[i], 0, sizeof(r->link_bytes[i]));
  bool perport = r->port_q && i < s->portq_cap && r->port_q_n == i;
  for (uint32_t j = 0; j < s->nports; j++) {
    const struct sim_port *p = &s->ports[j];
    if (p->qbytes > r->queue[i][p->node->tier])
      r->queue[i][p->node->tier] = p->qbytes;
    if (p->paused)
      r->paused_ports[i][p->node->tier]++;
    r->link_bytes[i][link_group(p)] += wire_sent(s, p);
    if (perport)
      r->port_q[(uint64_t)i * s->nports + j] =
          p->qbytes > UINT32_MAX ? UINT32_MAX : (uint32_t)p->qbytes;
  }
  if (perport)
    r->port_q_n = i + 1;
  uint64_t rx = 0;
  for (uint32_t j = 0; j < s->nnics; j++) {
    const struct sim_nic *nic = &s->nics[j];
    if (nic->port.paused)
      r->paused_ports[i][0]++;
    r->link_bytes[i][0] += wire_sent(s, &nic->port);
    rx += nic->rx_payload;
  }
  r->rx_payload[i] = rx;
  memcpy(r->pauses[i], s->st.pause_frames, sizeof(r->pauses[i]));
  memcpy(r->ecn[i], s->st.ecn_marks, sizeof(r->ecn[i]));
  r->cnps[i] = sim_stats(s)->cnps;
  for (uint32_t f = 0; f < r->nflows; f++)
    r->acked[(uint64_t)i * r->nflows + f] = sim_flow_int(s, f)->wire_rx;
  sample_rates(s, i);
  sample_cc(s, i);
  if (s->coll ? !sim_coll_done(s)
              : s->st.flows_done + s->st.flows_failed < s->nflows)
    sim_schedule(s, &s->sample_ev, s->now + s->cfg.sample_interval);
  if (s->net && !s->net_final)
    s->st = keep; /* this rank's counters again */
}

/* events: those run so far (sim_run adds its count at the end). */
void sim_progress(struct sim *s, bool last, uint64_t events) {
  double now = mono_s(), el = now - s->wall_start;
  if (!last && now - s->last_progress < 0.5)
    return;
  s->last_progress = now;
  double frac = s->coll          ? sim_coll_progress(s)
                : s->total_bytes ? (double)s->acked_bytes / s->total_bytes
                                 : 0;
  if (s->cfg.stop_time != SIM_NEVER && s->cfg.stop_time) {
    double tf = (double)s->now / (double)s->cfg.stop_time;
    if (tf > frac)
      frac = tf;
  }
  if (frac > 1)
    frac = 1;
  char bar[31];
  int w = (int)(frac * 30);
  for (int i = 0; i < 30; i++)
    bar[i] = i < w ? '#' : '.';
  bar[30] = 0;
  double eta = frac > 0.001 ? el * (1 - frac) / frac : 0;
  uint32_t nres = 0;
  if (s->coll)
    sim_coll_results(s, &nres);
  fprintf(stderr,
          "\r[%s] %5.1f%%  sim %9.3f us  %6.2f Mev/s  %s %llu/%llu  "
          "ETA %5.1f s ",
          bar, frac * 100, (double)s->now / 1e6,
          el > 0 ? (double)events / el / 1e6 : 0, s->coll ? "sizes" : "flows",
          (unsigned long long)(s->coll ? nres : s->st.flows_done),
          (unsigned long long)(s->coll ? s->cfg.wl.coll.nsizes : s->nflows),
          last ? 0.0 : eta);
  if (last)
    fputc('\n', stderr);
}

void sim_dispatch(struct sim *s, struct sim_ev *ev) {
  s->cur_key = ev->key;
  switch (ev->arg) {
  case SIM_EV_PORT_RX:
    sim_port_rx_event(s, container_of(ev, struct sim_port, rx_ev));
    break;
  case SIM_EV_PORT_TX:
    sim_port_tx_event(s, container_of(ev, struct sim_port, tx_ev));
    break;
  case SIM_EV_NIC_CC:
    sim_nic_cc_event(s, container_of(ev, struct sim_nic, cc_ev));
    break;
  case SIM_EV_FAIL:
    sim_fail_event(s, ev);
    break;
  case SIM_EV_PORT_FC:
    sim_port_fc_event(s, container_of(ev, struct sim_port, fc_ev));
    break;
  case SIM_EV_PORT_FC_TICK:
    sim_port_fc_tick_event(s, container_of(ev, struct sim_port, fc_tick));
    break;
  case SIM_EV_PORT_FC_RX:
    sim_port_fc_rx_event(s, container_of(ev, struct sim_port, fc_rx_ev));
    break;
  case SIM_EV_NIC:
    sim_nic_event(s, container_of(ev, struct sim_nic, ev));
    break;
  case SIM_EV_SMA:
    sim_mad_sma_event(s, container_of(ev, struct sim_node, sma_ev));
    break;
  case SIM_EV_SM:
    sim_sm_event(s);
    break;
  case SIM_EV_SM_POLL:
    sim_sm_poll_event(s);
    break;
  case SIM_EV_FLOW_START: {
    struct sim_flow_int *fi = container_of(ev, struct sim_flow_int, start_ev);
    struct sim_nic *nic = &s->nics[fi->f.src];
    s->host->post(nic->model, &fi->f, s->now);
    sim_nic_kick(s, nic);
    break;
  }
  case SIM_EV_FLOW_END: {
    struct sim_flow_int *fi = container_of(ev, struct sim_flow_int, end_ev);
    struct sim_nic *nic = &s->nics[fi->f.dst];
    s->host->flow_end(nic->model, &fi->f, s->now);
    sim_nic_kick(s, nic);
    break;
  }
  case SIM_EV_RETRY: {
    struct sim_nic *nic = container_of(ev, struct sim_nic, retry_ev);
    s->host->retry(nic->model, s->now);
    break;
  }
  case SIM_EV_SAMPLE:
    sample(s);
    break;
  case SIM_EV_COLL:
  case SIM_EV_COLL_START:
  case SIM_EV_COLL_INTRA:
  case SIM_EV_COLL_CONNECT:
    sim_coll_event(s, ev);
    break;
  }
}

bool sim_run_done(const struct sim *s) {
  return s->coll
             ? sim_coll_done(s)
             : s->nflows && s->st.flows_done + s->st.flows_failed == s->nflows;
}

/* The last time a run up to lim runs events at: lim, or the end of the
 * cell in which the workload finished. */
static sim_time_t run_last(const struct sim *s, sim_time_t lim) {
  return s->done_end && s->done_end - 1 < lim ? s->done_end - 1 : lim;
}

/* Runs the events due by lim on this thread: every event of the cell in
 * which the workload finishes, none after it. Returns the number run. */
static uint64_t run_seq(struct sim *s, sim_time_t lim) {
  uint64_t n = 0;
  for (;;) {
    if (!s->done_end && sim_run_done(s))
      s->done_end = sim_cell_end(s, s->now);
    sim_time_t l = run_last(s, lim);
    sim_time_t t;
    struct sim_ev *ev = sim_heap_pop(&s->heap, l, &t);
    if (!ev)
      break;
    s->now = t;
    sim_dispatch(s, ev);
    if ((++n & 0xFFFF) == 0 && s->cfg.progress)
      sim_progress(s, false, s->st.events + n);
  }
  return n;
}

/* Whether the workload ended, over every rank of a distributed run. */
static bool run_done(struct sim *s) {
  if (!s->net || s->net_final || s->coll)
    return sim_run_done(s);
  uint64_t n = s->st.flows_done + s->st.flows_failed;
  sim_net_reduce(s, &n, 1, SIM_NET_SUM);
  return s->nflows && n == s->nflows;
}

/* The end of a distributed run: every counter summed over the ranks, and
 * what the report reads of other ranks' parts, here. */
static void net_finish(struct sim *s) {
  net_stats(s, &s->st);
  net_mirror(s);
  sim_net_pauses(s);
  sim_coll_net_finish(s);
  sim_fail_net_finish(s);
  sim_sm_net_finish(s);
  s->net_final = true;
}

int sim_run(struct sim *s, sim_time_t until) {
  sim_time_t lim = until < s->cfg.stop_time ? until : s->cfg.stop_time;
  double t0 = mono_s();
  if (s->net_final) /* a distributed simulator runs once */
    return sim_run_done(s);
  if (!s->wall_start)
    s->wall_start = s->last_progress = t0;
  if (!run_done(s)) /* flows were added since it finished */
    s->done_end = 0;
  if (s->sm) /* the standby's polls run while a workload does */
    sim_sm_poll_arm(s);
  int64_t n = -1;
  if (sim_threads(s, 0) > 1) {
    char err[256] = "";
    n = sim_par_run(s, lim, err, sizeof err);
    if (n < 0) /* nothing ran: the same run on this thread */
      fprintf(stderr, "uroce sim: running on one thread: %s\n", err);
  }
  if (n < 0)
    n = (int64_t)run_seq(s, lim);
  s->st.events += (uint64_t)n;
  /* The deferred FC packets the run reached leave (net.c, fc_want), as
   * their events would have run, the last setting the time. */
  bool fc_left = false;
  sim_time_t fc_last = sim_fc_commit_due(s, run_last(s, lim), &fc_left);
  bool left = sim_heap_peek(&s->heap) != SIM_NEVER || fc_left;
  if (s->net) {
    uint64_t v[2] = {fc_last, left};
    sim_net_reduce(s, v, 2, SIM_NET_MAX);
    fc_last = v[0];
    left = v[1];
  }
  if (fc_last > s->now)
    s->now = fc_last;
  bool done = run_done(s);
  if (!done && lim != SIM_NEVER && s->now < lim && left)
    s->now = lim;
  if (done && s->cfg.sample_interval)
    sample(s); /* the final state */
  if (s->net)
    net_finish(s);
  s->st.wall_s += mono_s() - t0;
  if (s->cfg.progress)
    sim_progress(s, true, s->st.events);
  return done;
}

int sim_flow_set_sl(struct sim *s, uint32_t id, uint8_t sl) {
  if (id >= s->nflows || sl >= SIM_NPRIO)
    return -1;
  sim_flow_mut(s, id)->sl = sl;
  return 0;
}

sim_time_t sim_now(const struct sim *s) {
  return s->now;
}

const struct sim_mem *sim_mem(const struct sim *s) {
  return &s->mem;
}

const struct sim_stats *sim_stats(const struct sim *s) {
  struct sim_stats *st = (struct sim_stats *)&s->st;
  st->now = s->now;
  memset(st->max_queue, 0, sizeof(st->max_queue));
  memset(st->max_buffer, 0, sizeof(st->max_buffer));
  for (uint32_t j = 0; j < s->nports; j++) {
    const struct sim_port *p = &s->ports[j];
    if (p->max_q > st->max_queue[p->node->tier])
      st->max_queue[p->node->tier] = p->max_q;
  }
  for (uint32_t j = 0; j < s->nswitches; j++) {
    const struct sim_switch *sw = &s->sws[j];
    if (sw->max_used > st->max_buffer[sw->n.tier])
      st->max_buffer[sw->n.tier] = sw->max_used;
  }
  st->rx_payload = 0;
  for (uint32_t i = 0; i < s->nnics; i++)
    st->rx_payload += s->nics[i].rx_payload;
  if (s->host->add_stats && !s->net) { /* a distributed run's: net_stats */
    st->timeouts = st->naks = st->cnps = 0;
    for (uint32_t i = 0; i < s->nnics; i++)
      s->host->add_stats(s->nics[i].model, st);
  }
  return st;
}

const struct sim_cfg *sim_cfg(const struct sim *s) {
  return &s->cfg;
}
uint32_t sim_nflows(const struct sim *s) {
  return s->nflows;
}
const struct sim_flow *sim_flow(const struct sim *s, uint32_t id) {
  return id < s->nflows ? sim_flow_mut((struct sim *)s, id) : 0;
}
uint32_t sim_nnics(const struct sim *s) {
  return s->nnics;
}
uint32_t sim_nhosts(const struct sim *s) {
  return s->nhosts;
}
uint32_t sim_nic_of(const struct sim *s, uint32_t host, uint32_t rail) {
  return rail * s->nhosts + host;
}
const struct sim_series *sim_series(const struct sim *s) {
  return &s->ser;
}

void sim_path_cost(struct sim *s, uint32_t a, uint32_t b, double *prop_ps,
                   double *ps_per_byte) {
  struct sim_port *p = &s->nics[a].port;
  double t = (double)p->delay, sf = 0;
  struct sim_node *n = p->peer->node;
  for (int hops = 0; n->kind == SIM_NODE_SWITCH && hops < 16; hops++) {
    struct sim_switch *sw = (struct sim_switch *)n;
    uint16_t o = b >= sw->lo && b < sw->hi ? (uint16_t)((b - sw->lo) / sw->span)
                                           : sw->n_down;
    struct sim_port *out = &sw->n.ports[o];
    t += (double)out->delay;
    sf += 8e12 / (double)out->rate_bps;
    n = out->peer->node;
  }
  *prop_ps = t;
  *ps_per_byte = sf;
}

uint64_t sim_link_id(uint32_t sw, uint16_t port) {
  return ((uint64_t)sw << 16) | port;
}

int sim_flow_path(const struct sim *s, uint32_t flow, uint16_t *ports,
                  uint32_t *switches, int max) {
  const struct sim_flow *f = sim_flow(s, flow);
  if (!f)
    return 0;
  struct sim_pkt p = {.src = f->src, .dst = f->dst, .sport = f->sport};
  struct sim_node *n = s->nics[f->src].port.peer->node;
  int hops = 0;
  while (n->kind == SIM_NODE_SWITCH && hops < max) {
    struct sim_switch *sw = (struct sim_switch *)n;
    /* Only ECMP is a function of the packet alone; the others draw. */
    uint64_t saved = sw->rng;
    uint16_t o = sim_route((struct sim *)s, sw, &p);
    sw->rng = saved;
    if (o == SIM_LFT_NONE)
      break;
    ports[hops] = o;
    switches[hops] = sw->n.id;
    hops++;
    n = sw->n.ports[o].peer->node;
  }
  return hops;
}
