/* The memory a scenario will need, estimated before it is built, so that
 * one that would not fit is refused with the figure instead of being
 * killed for memory minutes later.
 *
 * The estimate adds what the run allocates: the topology's switches,
 * ports and NICs (their struct sizes times the counts the topology
 * implies), each NIC's transport state at rest, and for the flows their
 * records, the QP pairs of the flows that run at once, and the packets
 * those flows keep in flight (their window, at most the flow and twice
 * the host link's bandwidth-delay product). The
 * transport's share is not computed from its struct sizes: a probe
 * builds one NIC, and one connection for the workload's typical flow,
 * on scratch state and measures what the allocator handed out
 * (mallinfo2), so the estimate follows the engine as it changes; the flow
 * records and a collective's communicators are measured as the workload
 * is added, its ranks' schedules built once on scratch memory. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"

uint64_t sim_heap_bytes(void) {
  struct mallinfo2 mi = mallinfo2();
  return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

uint64_t sim_heap_grown(uint64_t before) {
  uint64_t now = sim_heap_bytes();
  return now > before ? now - before : 0; /* frees can outweigh */
}

/* Bytes the host model takes for one idle NIC. */
static uint64_t probe_nic(struct sim *s) {
  struct sim_nic nic;
  memset(&nic, 0, sizeof(nic));
  nic.n.kind = SIM_NODE_NIC;
  nic.n.nports = 1;
  nic.n.ports = &nic.port;
  uint64_t before = sim_heap_bytes();
  void *m = s->host->nic_new(s, &nic);
  if (!m)
    return 0;
  uint64_t b = sim_heap_grown(before);
  s->host->nic_del(m);
  return b;
}

struct span_ev {
  sim_time_t t;
  int d; /* +1 a flow starts, -1 it ends */
};

static int by_time(const void *a, const void *b) {
  const struct span_ev *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t ? 1 : x->d - y->d;
}

/* How many flows run at once, at least: each flow lasts at least its
 * ideal completion time (size at the host link's rate), counted over the
 * flows' start times. (A collective's connections: sim_coll_conns.) */
static uint64_t overlap(const struct sim *s) {
  uint32_t n = sim_nflows(s);
  if (!n)
    return 0;
  struct span_ev *e = malloc(2 * (size_t)n * sizeof(*e));
  if (!e)
    return n;
  double ps_per_byte = 8e12 / (double)s->cfg.topo.link[0].rate_bps;
  for (uint32_t i = 0; i < n; i++) {
    const struct sim_flow *f = sim_flow(s, i);
    e[2 * i] = (struct span_ev){f->start, 1};
    e[2 * i + 1] = (struct span_ev){
        f->start + (sim_time_t)((double)f->bytes * ps_per_byte) + 1, -1};
  }
  qsort(e, 2 * (size_t)n, sizeof(*e), by_time);
  int64_t cur = 0, max = 0;
  for (size_t i = 0; i < 2 * (size_t)n; i++)
    if ((cur += e[i].d) > max)
      max = cur;
  free(e);
  return (uint64_t)max;
}

/* Connections and packets of `live` flows of mean size `mean` at once. */
static void add_live(struct sim *s, struct sim_mem *m, uint64_t live,
                     uint64_t mean) {
  m->live = live;
  m->conn = live && s->host->flow_bytes ? s->host->flow_bytes(s, mean) : 0;
  /* In flight per live flow: its window, at most its packets, and at most
   * twice what the host link holds over the longest path's round trip
   * (requests, their ACKs, a queue's worth); the pool grows in chunks. */
  const struct sim_topo_cfg *t = &s->cfg.topo;
  uint64_t mtu = s->cfg.tp.mtu, per = s->cfg.tp.window;
  double hops = t->kind == SIM_TOPO_FAT_TREE ? 6 : t->leaves > 1 ? 4 : 2;
  double rate = (double)t->link[0].rate_bps;
  double rtt_s = 2 * hops * ((double)t->link[0].delay / 1e12 + mtu * 8 / rate);
  uint64_t bdp = (uint64_t)(rate * rtt_s / 8 / (double)mtu) + 1;
  if (2 * bdp + 2 < per)
    per = 2 * bdp + 2;
  if (mean && mean / mtu + 1 < per)
    per = mean / mtu + 1;
  uint64_t pkts = live * per;
  pkts = (pkts + SIM_PKT_CHUNK - 1) / SIM_PKT_CHUNK * SIM_PKT_CHUNK;
  m->pkts = pkts * sizeof(struct sim_pkt);
  m->total = m->topology + m->nics + m->flows + m->live * m->conn + m->pkts;
}

void sim_mem_structure(struct sim *s, struct sim_mem *m) {
  memset(m, 0, sizeof(*m));
  uint64_t nsw, nports, nnics;
  sim_topo_size(&s->cfg.topo, &nsw, &nports, &nnics);
  m->topology = sizeof(struct sim) + nsw * sizeof(struct sim_switch) +
                nports * sizeof(struct sim_port) +
                nnics * sizeof(struct sim_nic);
  if (s->ib) /* an LFT per switch over every LID; FC records per port */
    m->topology += nsw * (nnics << s->cfg.ib.sm.lmc) * 2 + nnics * 4 +
                   (nports + nnics) * 8 * sizeof(struct sim_fcrec);
  if (s->cfg.nfail) /* next hops per switch pair, and a staged copy */
    m->topology += nsw * nsw * 10;
  /* The probe needs the NIC count the model sizes its tables by. */
  uint32_t saved = s->nnics;
  s->nnics = (uint32_t)(nnics < UINT32_MAX ? nnics : UINT32_MAX);
  m->nic = probe_nic(s);
  s->nnics = saved;
  m->nics = nnics * m->nic;
  m->total = m->topology + m->nics;
  /* Generated workloads whose flows all start together are known now:
   * refuse them before building anything. */
  const struct sim_workload_cfg *w = &s->cfg.wl;
  uint64_t live = w->kind == SIM_WL_PERMUTATION  ? nnics
                  : w->kind == SIM_WL_ALL_TO_ALL ? nnics * (nnics - 1)
                  : w->kind == SIM_WL_INCAST     ? w->incast_senders
                                                 : 0;
  if (live && !w->dist.n) {
    s->nnics = (uint32_t)(nnics < UINT32_MAX ? nnics : UINT32_MAX);
    add_live(s, m, live, w->bytes);
    s->nnics = saved;
  }
}

void sim_mem_workload(struct sim *s, struct sim_mem *m, uint64_t added) {
  uint32_t n = sim_nflows(s);
  m->flows = added + sim_coll_sched_bytes(s);
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; i++)
    bytes += sim_flow(s, i)->bytes;
  add_live(s, m, s->coll ? sim_coll_conns(s) : overlap(s), n ? bytes / n : 0);
}

uint64_t sim_mem_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f)
    return 0;
  char line[128];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
      break;
  fclose(f);
  return (uint64_t)kb * 1024;
}
