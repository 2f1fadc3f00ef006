/* Simulator internals shared by the files of src/sim: packet descriptors,
 * ports, switches, NICs, and the seam to host models. */
#ifndef UROCE_SIM_SIM_INT_H
#define UROCE_SIM_SIM_INT_H

#include <stddef.h>

#include "sim/heap.h"
#include "sim/sim.h"
#include "util/jsonl.h"
#include "util/rng.h"

#define container_of(p, T, m) ((T *)((char *)(p)-offsetof(T, m)))

/* ---- packet descriptors ---- */

enum sim_pkt_kind {
  SIM_PKT_DATA,  /* a request carrying (phantom) payload */
  SIM_PKT_ACK,   /* RC ACK: psn = next expected */
  SIM_PKT_NAK,   /* NAK PSN sequence error: psn = next expected */
  SIM_PKT_CNP,   /* RoCEv2 congestion notification */
  SIM_PKT_PAUSE, /* PFC frame: prio, xoff in flags */
  SIM_PKT_BECN,  /* IB CC: dst tells src of a FECN on SL len */
  SIM_PKT_FC,    /* IB flow control: blocks freed per VL in hdr */
  SIM_PKT_SMP,   /* IB management on VL15: an SMP or a trap (mad.c) */
};

enum sim_pkt_flags {
  SIM_PF_LAST = 1,   /* last packet of its message */
  SIM_PF_ACKREQ = 2, /* BTH AckReq */
  SIM_PF_XOFF = 4,   /* PAUSE: stop (else resume) */
  SIM_PF_FECN = 8,   /* IB CC: forward explicit congestion notification */
  SIM_PF_TRIMMED = 16, /* a switch cut its payload (switch.trim) */
  SIM_PF_RESP = 32,    /* SMP: a GetResp on its way back to the SM */
};

#define SIM_ECN_ECT0 2
#define SIM_ECN_CE 3

/* BTH and extension headers of the largest request (an atomic). */
#define SIM_HDR_MAX 40

/* What travels on a link: sizes and addressing, never payload bytes. The
 * transport header is either the (psn, opcode, len) tuple of the built-in
 * host model or, for the engine host model, a copy of the real BTH and
 * extension header bytes plus the phantom payload length. flow is the
 * flow the packet belongs to in both. */
struct sim_pkt {
  struct sim_pkt *next; /* queue or link linkage */
  sim_time_t ts;        /* arrival time while on a link */
  uint32_t size;        /* bytes of line time, L1 overhead included */
  uint32_t src, dst;    /* NIC ids: the IP addresses */
  uint32_t flow;        /* transport handle */
  uint16_t sport;
  uint16_t in_port; /* ingress port at the current switch */
  uint8_t kind, prio, ecn, flags;
  union {
    struct { /* built-in model */
      uint32_t psn;
      uint32_t len; /* payload bytes */
      uint8_t opcode;
    };
    struct {         /* engine model */
      uint32_t plen; /* phantom payload bytes */
      uint8_t pad, hlen;
      uint8_t hdr[SIM_HDR_MAX];
    };
  };
};

struct sim_pktq {
  struct sim_pkt *head, *tail;
  uint64_t bytes;
};

/* Takes q's first packet, or NULL. */
static inline struct sim_pkt *sim_pktq_take(struct sim_pktq *q) {
  struct sim_pkt *pkt = q->head;
  if (pkt) {
    if (!(q->head = pkt->next))
      q->tail = 0;
    q->bytes -= pkt->size;
  }
  return pkt;
}

/* Appends pkt to q. */
static inline void sim_pktq_put(struct sim_pktq *q, struct sim_pkt *pkt) {
  pkt->next = 0;
  if (q->tail)
    q->tail->next = pkt;
  else
    q->head = pkt;
  q->tail = pkt;
  q->bytes += pkt->size;
}

/* ---- ports, switches, NICs ---- */

enum sim_ev_kind {
  SIM_EV_PORT_TX,
  SIM_EV_PORT_RX,
  SIM_EV_NIC,
  SIM_EV_FLOW_START,
  SIM_EV_SAMPLE,
  SIM_EV_COLL,         /* a rank's communicator has completions to handle */
  SIM_EV_COLL_START,   /* the next collective size starts */
  SIM_EV_COLL_INTRA,   /* a write between ranks of one server lands */
  SIM_EV_PORT_FC,      /* InfiniBand: send the credits freed at a port */
  SIM_EV_FAIL,         /* a link or switch changes state, or routes install */
  SIM_EV_NIC_CC,       /* IB CC: a NIC's CCT indices step down */
  SIM_EV_FLOW_END,     /* a finished flow's receiving end lets go of it */
  SIM_EV_RETRY,        /* flows waiting for a QP at a NIC try again */
  SIM_EV_COLL_CONNECT, /* a rank's connections to new peers are made */
  SIM_EV_PORT_FC_TICK, /* InfiniBand: a port's periodic FC timer */
  SIM_EV_PORT_FC_RX,   /* InfiniBand: credits a port waits for arrive */
  SIM_EV_SMA,          /* InfiniBand: a node's SMA answers an SMP */
  SIM_EV_SM,           /* InfiniBand: the SM's timers (compute, SMP timeouts) */
  SIM_EV_SM_POLL,      /* InfiniBand: the standby SM polls the master */
  SIM_EV_NKINDS
};
/* A kind takes 5 bits of the key, below SIM_KEY_GLOBAL (heap.h). */
_Static_assert(SIM_EV_NKINDS <= 32 && SIM_KEY_GLOBAL == 1ull << (SIM_KEY_KIND_SHIFT + 5),
               "event kinds fit their bits of the key");

/* Global events change state of more than one partition (a flow's two
 * ends, every port, the routes): they run alone, after every other event
 * due at the same time. */
static inline bool sim_ev_kind_global(unsigned kind) {
  return kind == SIM_EV_FLOW_START || kind == SIM_EV_SAMPLE ||
         kind == SIM_EV_COLL_START || kind == SIM_EV_FAIL ||
         kind == SIM_EV_RETRY || kind == SIM_EV_COLL_CONNECT ||
         kind == SIM_EV_SM_POLL;
}

/* The key of event kind for the idx-th object of its kind. */
static inline uint64_t sim_key(unsigned kind, uint64_t idx) {
  return (sim_ev_kind_global(kind) ? SIM_KEY_GLOBAL : 0) |
         (uint64_t)kind << SIM_KEY_KIND_SHIFT | (idx & SIM_KEY_IDX_MAX);
}
static inline void sim_ev_new(struct sim_ev *ev, unsigned kind, uint64_t idx) {
  sim_ev_setup(ev, (uint16_t)kind, sim_key(kind, idx));
}

struct sim_node;

/* InfiniBand: an FC packet on the wire, one record per VL it carries;
 * vl SIM_FCREC_PKT stands for a packet from another partition, which
 * carries its credits itself (the sender's fc_q FIFO). */
#define SIM_FCREC_PKT 0xFF
struct sim_fcrec {
  sim_time_t ts;   /* arrival: its credits count from then on */
  uint32_t blocks; /* credits returned */
  uint8_t vl;
};

/* A ring of FC records: sequence numbers head .. head + n - 1 at
 * a[seq & (cap - 1)]; cap a power of two, a NULL until the first. */
struct sim_fcq {
  struct sim_fcrec *a;
  uint32_t head, n, cap;
};

/* One end of a full-duplex link: an egress with its queues, and the
 * ingress counters for PFC of what arrived through it. The frames in
 * flight toward the peer are a FIFO (they arrive in order), so the link
 * needs one pending event: the arrival of its head. */
struct sim_port {
  struct sim_ev tx_ev; /* start the next transmission */
  struct sim_ev rx_ev; /* the head of the in-flight FIFO arrives */
  struct sim_node *node;
  struct sim_port *peer;
  uint64_t rate_bps;
  sim_time_t delay;
  double loss;
  uint64_t rng;
  /* The frames put on the wire end at busy_until; the last that is not
   * an InfiniBand FC packet at tx_free, when the next may be chosen. */
  sim_time_t busy_until, tx_free;
  struct sim_pkt *fly_head, *fly_tail;
  struct sim_pkt *ctl_head, *ctl_tail; /* PFC frames: sent first */
  struct sim_pktq trimq; /* trimmed headers (switch.trim): next, before
                            data, outside the shared buffer */
  struct sim_pktq q[SIM_NPRIO];
  uint64_t qbytes; /* all priorities */
  uint64_t in_bytes[SIM_NPRIO];
  uint64_t pfc_limit; /* lossless bytes per ingress priority: xoff+headroom */
  uint8_t nonempty;   /* queues with packets */
  uint8_t paused;     /* priorities the peer paused */
  uint8_t xoff_sent;  /* priorities we paused the peer for */
  uint16_t idx;
  bool down; /* the link is down (fail.c) */
  sim_time_t paused_since;
  /* InfiniBand: blocks of credit the peer's input buffer grants per VL;
   * blocks freed in our input buffer not yet returned, and in use. FC
   * packets go on this port's egress, before data: one is due at fc_at
   * (SIM_NEVER: none) for the VLs with blocks freed and those in fc_vls
   * (the periodic timer's); it goes with the port's next transmission
   * if that starts then, else fc_ev sends it, or it waits deferred
   * (fc_lazy, net.c's fc_want). fc_tick: the periodic timer (fc_period),
   * running while the port had traffic (act_last) in the last period or
   * holds blocks; fc_last: when each VL's last FC packet went (or the
   * timer chose it). fc_rx_ev (where the peer is) wakes the peer at the
   * next arrival while it waits for credit (cr_wait). Since when packets
   * wait for credit. */
  uint32_t credits[SIM_NPRIO];
  uint32_t freed[SIM_NPRIO];
  uint32_t in_blocks[SIM_NPRIO];
  struct sim_ev fc_ev, fc_tick, fc_rx_ev;
  /* The FC packets on the wire toward this port, by arrival: their
   * records (crq, here, where this port's partition runs) and the
   * arrival of the first (cr_due, SIM_NEVER when none), so that deciding
   * what to send reads nothing of the peer's. The packets this port
   * sent to a peer in another partition (par.c) travel as packets and
   * wait here (fc_q) until the peer takes them. */
  struct sim_fcq crq;
  sim_time_t cr_due;
  struct sim_pktq fc_q;
  /* The FC packet queued behind a frame on the wire, which blocks of its
   * VLs (fc_open_vls; 0: none) freed before it starts (fc_open_at)
   * join: its records from the peer's crq sequence number fc_open_seq
   * on, or the packet fc_open; not to be touched from fc_open_at on (the
   * peer may have taken it). */
  struct sim_pkt *fc_open;
  uint32_t fc_open_seq;
  sim_time_t fc_open_at;
  uint8_t fc_open_vls;
  bool fc_lazy; /* the packet due at fc_at is deferred (net.c, fc_want) */
  sim_time_t fc_at, fc_period, act_last;
  sim_time_t fc_last[SIM_NPRIO];
  uint8_t fc_vls, fc_news; /* VLs the timer wants; VLs with blocks freed */
  bool cr_wait;
  sim_time_t starved_since;
  /* VL arbitration (switch egress and NIC alike): entry and weight left
   * in the high [0] and low [1] tables; high bytes sent while low
   * waited. */
  uint8_t arb_idx[2];
  int32_t arb_left[2];
  uint8_t arb_from; /* the table the packet on the wire came from */
  uint64_t high_run;
  /* statistics */
  uint64_t tx_bytes;
  uint64_t max_q;
  uint64_t trims, trim_drops; /* packets trimmed here; headers dropped */
  /* InfiniBand VL15: management packets for this egress, served before
   * every data VL and without credits; bytes of them that came in
   * through this port and wait at some egress of its switch (the small
   * VL15 input buffer: a packet that does not fit is dropped). */
  struct sim_pktq vl15;
  uint32_t vl15_in;
};

enum sim_node_kind { SIM_NODE_NIC, SIM_NODE_SWITCH };

struct sim_node {
  uint8_t kind, tier;
  uint16_t nports;
  uint32_t id;   /* NIC id or switch index */
  uint16_t part; /* the partition that runs it (par.c) */
  struct sim_port *ports;
  /* InfiniBand: the SMA's SMPs being processed, a FIFO by the time each
   * is answered (arrival + smp_processing_ns), and its event. */
  struct sim_ev sma_ev;
  struct sim_pktq sma_q;
};

/* Forwarding is up-down on contiguous NIC ranges: NICs in [lo, hi) are
 * below, down port (dst - lo) / span leads to them; everything else goes up
 * through one of the n_up ports after the n_down down ports. */
struct sim_switch {
  struct sim_node n;
  uint32_t lo, hi, span;
  uint32_t up_div; /* ftree: up port (lid index / up_div) % n_up */
  uint16_t *lft;   /* InfiniBand: egress port by DLID (sm.c) */
  uint16_t n_down, n_up;
  uint64_t salt, rng;
  uint64_t used, max_used;
  uint32_t fecn_count; /* IB CC: packets eligible for FECN so far */
};

struct sim_host_ops;

struct sim_nic {
  struct sim_node n;
  struct sim_port port;
  struct sim_ev ev;       /* poll the host model */
  struct sim_ev retry_ev; /* flows waiting for a QP here try again */
  uint32_t host;
  uint8_t rail;
  void *model;
  /* Payload of data frames arrived here, counted over each frame's wire
   * time; rx_credit: what a sample already counted of the frame now
   * arriving. */
  uint64_t rx_payload, rx_credit;
  /* IB congestion control: CCT index and next data departure per SL. */
  struct sim_ev cc_ev;
  uint32_t ccti[SIM_NPRIO];
  sim_time_t cc_next[SIM_NPRIO];
};

/* ---- the host-model seam ----
 * A host model is a sans-IO NIC: the simulator hands it received packets,
 * pulls packets when the wire is free, and asks when it next wants to be
 * polled. It never schedules events or touches ports itself. */
struct sim_host_ops {
  const char *name;
  void *(*nic_new)(struct sim *s, struct sim_nic *nic);
  void (*nic_del)(void *m);
  /* Start flow f (its first packet may leave at now). */
  int (*post)(void *m, struct sim_flow *f, sim_time_t now);
  /* A packet for this NIC arrived; the model owns it now. */
  void (*deliver)(void *m, struct sim_pkt *p, sim_time_t now);
  /* Runs the timers due by now, then returns the next packet to put on the
   * wire, of a priority not in paused, or NULL. */
  struct sim_pkt *(*pull)(void *m, sim_time_t now, uint8_t paused);
  /* Optional: runs the timers due by now, then returns the priorities
   * (SLs) pull() may have a packet of (InfiniBand NICs arbitrate among
   * their VLs and ask pull() for one VL's SLs at a time); NULL: any. */
  uint8_t (*sls)(void *m, sim_time_t now);
  /* Earliest future time pull() may have something new, or SIM_NEVER. */
  sim_time_t (*next_time)(void *m);
  /* Optional: adds this NIC's transport counters (timeouts, NAKs, CNPs)
   * to st; models that count into sim->st directly leave it NULL. */
  void (*add_stats)(void *m, struct sim_stats *st);
  /* Optional: the congestion-control rate (bits/s) of running flow f,
   * which this NIC sends; < 0 if it has none. */
  double (*cc_rate_bps)(void *m, const struct sim_flow *f);
  /* Optional, for the memory estimate: heap bytes one flow of this many
   * bytes adds while it runs (its QPs at both ends), measured on scratch
   * NICs. */
  uint64_t (*flow_bytes)(struct sim *s, uint64_t bytes);
  /* Optional: flow f, finished at its source, reached this NIC, its
   * destination (the FLOW_END event of sim_flow_end_later). */
  void (*flow_end)(void *m, struct sim_flow *f, sim_time_t now);
  /* Optional: the RETRY event of sim_nic_retry_later. */
  void (*retry)(void *m, sim_time_t now);
  /* The struct sim the model calls back from now on (a parallel run's
   * partition, then the simulator again). */
  void (*rebind)(void *m, struct sim *s);
};

extern const struct sim_host_ops sim_host_rdmaw; /* rdmaw.c: simple */
extern const struct sim_host_ops sim_host_eng;   /* host_eng.c: uroce */

/* ---- persistent connections (host_eng.c), for the collectives ----
 * A connected RC QP pair between two NICs that lives until the simulator
 * is deleted and carries RDMA WRITE WITH IMMEDIATE both ways. Its packets
 * have SIM_COLL_FLOW set in pkt->flow (they belong to no workload flow);
 * the engine's completions of work requests whose wr_id has
 * SIM_COLL_WRID set go to sim_coll_wc(). Receive WQEs are reposted by
 * host_eng.c as they are consumed. */
#define SIM_COLL_FLOW 0x80000000u
#define SIM_COLL_WRID (1ull << 62)
#define SIM_COLL_RECV (1ull << 61) /* with SIM_COLL_WRID: a receive WQE */
struct he_flow;
struct uroce_wc;
/* Connects NICs a and b (uroce model only): room for nsend send WRs at
 * each end, nrecv receive WQEs posted at each end; ta and tb name the
 * ends to sim_coll_wc() (the ranks). salt, when not 0, sets the
 * connection apart from others between the same NICs (its flow id and
 * UDP source port). NULL on failure. */
struct he_flow *sim_eng_conn_new(struct sim *s, uint32_t a, uint32_t b,
                                 uint32_t nsend, uint32_t nrecv, uint32_t ta,
                                 uint32_t tb, uint64_t salt);
/* Posts a signaled RDMA WRITE WITH IMMEDIATE of len phantom bytes from
 * NIC from (an end of c) to the other end, and kicks the NIC. wr_id must
 * fit in 61 bits. 0, UROCE_ERR_QUEUE_FULL or another error. */
int sim_eng_write_imm(struct sim *s, struct he_flow *c, uint32_t from,
                      uint32_t len, uint32_t imm_host, uint64_t wr_id);

/* coll_sim.c: the collective workload. */
struct sim_coll;
int sim_coll_new(struct sim *s, char *err, size_t errlen);
void sim_coll_del(struct sim *s);
/* A completion of a collective work request at the end tagged rank of a
 * connection whose other end is tagged peer. */
void sim_coll_wc(struct sim *s, uint32_t rank, uint32_t peer,
                 const struct uroce_wc *wc);
void sim_coll_event(struct sim *s, struct sim_ev *ev);
bool sim_coll_done(const struct sim *s);
bool sim_coll_is_rank(const struct sim *s, uint32_t nic);
/* Parallel runs: the ranks whose requests ended in the window count (main
 * thread, after it); the ranks call back through part[their partition]
 * (NULL: the simulator). */
void sim_coll_fold(struct sim *s);
/* The ranks' events go where their NICs are (after partitioning). */
void sim_coll_repart(struct sim *s);
void sim_coll_rebind(struct sim *s, struct sim **part);
/* Progress of the collective workload, 0..1, for the progress bar. */
double sim_coll_progress(const struct sim *s);

/* ---- the simulator ---- */

#define SIM_FLOW_CHUNK 4096

struct sim_flow_int {
  struct sim_flow f;
  struct sim_ev start_ev;
  struct sim_ev end_ev; /* FLOW_END at its destination */
  uint64_t wire_rx;   /* payload arrived at the receiver, as rx_payload */
  sim_time_t last_rx; /* when the latest of it arrived */
};

/* A PFC frame taking effect at a port (the pause trace). */
struct sim_pause_ev {
  sim_time_t t;
  uint64_t key;  /* of the event that logged it: merges keep run order */
  uint32_t node; /* switch index, or NIC id with SIM_PAUSE_NIC */
  uint16_t port;
  uint8_t prio, xoff;
};
#define SIM_PAUSE_NIC 0x80000000u
#define SIM_PAUSE_LOG_MAX (1u << 20)
/* Per-port queue samples are kept while ports x samples stays below. */
#define SIM_PORTQ_MAX (8u << 20)
/* Per-stream rate windows reach back at most this many samples. */
#define SIM_RATE_HIST 16

struct sim_par;

struct sim {
  struct sim_cfg cfg;
  struct jsonl *trace; /* cfg.trace, open */
  sim_time_t now;
  struct sim_heap heap;
  /* Parallel runs (par.c): the run's partitions, this one's index (in a
   * partition's copy of struct sim), the key of the event running, the
   * losses to failures not yet counted in the failure's result. */
  struct sim_par *par;
  const struct sim_net *net; /* a distributed run's layer, or NULL */
  bool net_final; /* its counters and parts are every rank's (sim_run) */
  uint16_t part;
  uint64_t cur_key;
  uint64_t fail_lost;
  sim_time_t fail_last;
  /* The lookahead: the shortest delay of a link between two switches, 0
   * if none. Runs end at the end of the cell of this length in which the
   * workload finished (done_end; 0 while it has not). */
  sim_time_t cell, done_end;
  uint32_t nparts;     /* partitions a run uses (sim_par_partition) */
  const char *par_why; /* why not more, or NULL */
  struct sim_stats st;
  struct sim_mem mem; /* the estimate sim_new checked */
  const struct sim_host_ops *host;

  struct sim_pkt *free_pkts;
  struct sim_pkt **chunks;
  uint32_t nchunks, chunk_cap;

  uint32_t nhosts, rails, nnics, nswitches, nports;
  struct sim_nic *nics;
  struct sim_switch *sws;
  struct sim_port *ports; /* every switch port, in switch order */
  struct sim_link_cfg hostlink;

  struct sim_flow_int **fchunks;
  uint32_t nflows, nfchunks;
  uint64_t total_bytes, acked_bytes;

  struct sim_ev sample_ev;
  struct sim_series ser;
  uint32_t ser_cap;

  struct sim_coll *coll; /* the collective workload, or NULL */

  /* Sampling state: per stream (flow, or rank NIC for a collective) the
   * received payload at the last SIM_RATE_HIST samples; scratch for
   * percentiles; the pause trace. */
  uint64_t *rate_hist;
  uint32_t rate_hist_k;
  uint32_t portq_cap; /* samples ser.port_q has room for */
  double *rate_tmp;
  struct sim_pause_ev *pause_log;
  uint32_t npause_log, pause_log_cap;
  bool pause_log_full;

  double wall_start, last_progress;
  uint64_t ooo;            /* resolved cfg.tp.ooo */
  bool ib;                 /* cfg.fabric is InfiniBand */
  uint8_t qmap[SIM_NPRIO]; /* queue of a packet's priority: SL to VL */
  uint8_t vl_sls[SIM_NPRIO]; /* InfiniBand: the SLs each VL carries */
  uint32_t ib_max_blocks;  /* blocks of the largest packet */
  uint8_t arb_mask[2];     /* VLs in the high and low tables */
  /* per table, entry and VL: the next entry (cyclically, the entry
   * itself last) that serves the VL with weight */
  uint8_t arb_next[2][SIM_VLARB_MAX][SIM_NPRIO];
  struct sim_sm *sm;       /* InfiniBand's subnet manager */
  uint32_t *nic_lid;       /* base LID of each NIC */
  uint32_t lmc_mask;       /* 2^lmc - 1: DLID path bits */
  /* Failures (fail.c): once routes reconverged, the ports of switch i
   * toward leaf/edge switch j are nh[i * nswitches + j]. */
  struct sim_fail *fail;
  uint64_t *nh;
};

/* ---- memory estimate (mem.c) ---- */

/* Switches, ports and NICs the topology configuration implies. */
void sim_topo_size(const struct sim_topo_cfg *t, uint64_t *nsw,
                   uint64_t *nports, uint64_t *nnics);
/* The structures and idle NICs, before anything is built. */
void sim_mem_structure(struct sim *s, struct sim_mem *m);
/* Adds the workload's share once its flows exist: added is what adding
 * them allocated (records, communicators). */
void sim_mem_workload(struct sim *s, struct sim_mem *m, uint64_t added);
uint64_t sim_mem_available(void); /* MemAvailable, 0 if unknown */
uint64_t sim_heap_bytes(void);    /* in use now (mallinfo2) */
uint64_t sim_heap_grown(uint64_t before); /* since before; 0 if less */
/* Connections a collective workload holds for the whole run, and the
 * bytes of its ranks' schedules. */
uint64_t sim_coll_conns(const struct sim *s);
void sim_coll_conn_wrs(const struct sim *s, uint32_t *nsend, uint32_t *nrecv);
uint64_t sim_coll_sched_bytes(const struct sim *s);

/* Packet pool: no allocation per packet once warm; it grows by this many. */
#define SIM_PKT_CHUNK 4096
struct sim_pkt *sim_pkt_alloc_slow(struct sim *s);
static inline struct sim_pkt *sim_pkt_alloc(struct sim *s) {
  struct sim_pkt *p = s->free_pkts;
  if (!p)
    return sim_pkt_alloc_slow(s);
  s->free_pkts = p->next;
  return p;
}
static inline void sim_pkt_free(struct sim *s, struct sim_pkt *p) {
  p->next = s->free_pkts;
  s->free_pkts = p;
}

static inline struct sim_flow_int *sim_flow_int(const struct sim *s,
                                                uint32_t id) {
  return &s->fchunks[id / SIM_FLOW_CHUNK][id % SIM_FLOW_CHUNK];
}
static inline struct sim_flow *sim_flow_mut(struct sim *s, uint32_t id) {
  return &sim_flow_int(s, id)->f;
}

/* Schedules ev at t unless it is already due at or before t. */
void sim_schedule_min(struct sim *s, struct sim_ev *ev, sim_time_t t);
void sim_schedule(struct sim *s, struct sim_ev *ev, sim_time_t t);

/* Called by host models. */
void sim_flow_acked(struct sim *s, struct sim_flow *f, uint64_t bytes);
void sim_flow_done(struct sim *s, struct sim_flow *f, sim_time_t now);
/* Flow f's requester failed with completion status (a uroce_wc_status):
 * the flow ends without finishing. */
void sim_flow_failed(struct sim *s, struct sim_flow *f, sim_time_t now,
                     uint8_t status);
/* Schedules f's FLOW_END at its destination one lookahead from now (the
 * host model's flow_end). */
void sim_flow_end_later(struct sim *s, struct sim_flow *f);
/* Schedules nic's RETRY (a global event) at the next cell boundary. */
void sim_nic_retry_later(struct sim *s, struct sim_nic *nic);
/* The end of the lookahead cell t is in (t + 1 without a lookahead). */
static inline sim_time_t sim_cell_end(const struct sim *s, sim_time_t t) {
  return s->cell ? (t / s->cell + 1) * s->cell : t + 1;
}

/* Sampling hooks (sim.c). */
void sim_rx_data(struct sim *s, struct sim_nic *nic, const struct sim_pkt *p);
void sim_log_pause(struct sim *s, const struct sim_port *p, uint8_t prio,
                   bool xoff);
/* Appends e to the pause log, within its limit. */
void sim_pause_append(struct sim *s, const struct sim_pause_ev *e);
uint32_t sim_pkt_payload(const struct sim *s, const struct sim_pkt *p);

/* What a packet meets from NIC a to NIC b: the propagation delay of every
 * link, and the store-and-forward of every switch on the way as
 * picoseconds per byte of the packet. Up-down routing: every path between
 * two NICs has the same kinds of links, so the first up port stands for
 * all. */
void sim_path_cost(struct sim *s, uint32_t a, uint32_t b, double *prop_ps,
                   double *ps_per_byte);

/* Wire bytes of a frame around a transport packet of bth_to_icrc bytes
 * (BTH to ICRC), for the configured fabric. */
uint32_t sim_frame_wire(const struct sim_cfg *c, uint32_t bth_to_icrc);
/* InfiniBand: the 64-byte blocks credits count for a frame. */
static inline uint32_t sim_ib_blocks(uint32_t wire) {
  return (wire - SIM_IB_L1_LEN + SIM_IB_BLOCK - 1) / SIM_IB_BLOCK;
}

/* net.c */
void sim_port_fc_event(struct sim *s, struct sim_port *p);
void sim_port_fc_tick_event(struct sim *s, struct sim_port *p);
void sim_port_fc_rx_event(struct sim *s, struct sim_port *p);
/* Puts data or PFC frame pkt (due at pkt->ts) in p's in-flight FIFO
 * toward its peer. */
void sim_fly_put(struct sim *s, struct sim_port *p, struct sim_pkt *pkt);
/* Puts FC packet f (due at f->ts) in p's FC FIFO toward its peer. */
void sim_fc_fifo_put(struct sim *s, struct sim_port *p, struct sim_pkt *f);
/* InfiniBand: the deferred FC packets due by t leave (net.c, fc_want);
 * returns the latest of their times, 0 if none; *left (if not NULL):
 * whether some due later remain. */
sim_time_t sim_fc_commit_due(struct sim *s, sim_time_t t, bool *left);
void sim_port_rx_event(struct sim *s, struct sim_port *p);
void sim_port_tx_event(struct sim *s, struct sim_port *p);
/* Port p has something new to send: it starts now or when the wire is
 * free. */
void sim_port_kick(struct sim *s, struct sim_port *p);
void sim_nic_event(struct sim *s, struct sim_nic *nic);
void sim_nic_kick(struct sim *s, struct sim_nic *nic);
void sim_nic_cc_event(struct sim *s, struct sim_nic *nic);
uint16_t sim_route(struct sim *s, struct sim_switch *sw,
                   const struct sim_pkt *p);
sim_time_t sim_ser_time(uint64_t bytes, uint64_t rate_bps);

/* sm.c: the subnet manager computes every switch's LFT (sw->lft). */
int sim_sm_new(struct sim *s, char *err, size_t errlen);
void sim_sm_del(struct sim *s);
/* Checks the LFTs now programmed: deadlock freedom and balance (tests
 * edit LFTs through sim_int.h and check again). */
void sim_sm_check(struct sim *s, struct sim_sm_info *out);
#define SIM_LFT_NONE 0xFFFFu

uint32_t sim_sm_nlids(const struct sim *s);
/* The NIC the master SM runs on, the standby's, and whether the master
 * is cut off (its link down). */
uint32_t sim_sm_master(const struct sim *s);
uint32_t sim_sm_standby(const struct sim *s); /* UINT32_MAX: none */
bool sim_sm_master_down(const struct sim *s);

/* mad.c: management packets on VL15 (SMPs, traps) through ports and
 * SMAs. A management packet arrived at switch sw through in. */
void sim_mad_switch_rx(struct sim *s, struct sim_switch *sw,
                       struct sim_port *in, struct sim_pkt *p);
/* ... at NIC nic. */
void sim_mad_nic_rx(struct sim *s, struct sim_nic *nic, struct sim_pkt *p);
/* Queues p on VL15 of NIC nic's port. */
void sim_mad_nic_send(struct sim *s, struct sim_nic *nic, struct sim_pkt *p);
/* node's SMA takes SMP p (arrived now) and answers it after the
 * processing time. */
void sim_mad_sma_put(struct sim *s, struct sim_node *node, struct sim_pkt *p);
void sim_mad_sma_event(struct sim *s, struct sim_node *node);
/* Loses the management packet p (a dead link, a failed route). */
void sim_mad_lost(struct sim *s, struct sim_pkt *p);
/* Switch sw sends a trap (a port changed state) to the master SM's LID. */
void sim_mad_trap(struct sim *s, struct sim_switch *sw);

/* The SMP on a directed route: the egress port at each hop, from the
 * SM's NIC (hop 0) to the target (hop nhops); the attribute, its
 * argument (a port, an LFT block), the hop it is at, and for an LFT Set
 * the table its block is copied from (then, in the answer, when it took
 * effect). Kept in the packet's header bytes. */
#define SIM_SMP_HOPS 14
/* An SMP on the wire: LRH, BTH, DETH, a 256-byte MAD, ICRC, VCRC and the
 * delimiters. */
#define SIM_SMP_WIRE (8 + 12 + 8 + 256 + 4 + 2 + 2)
enum sim_smp_attr {
  SIM_SMP_NODE_INFO,
  SIM_SMP_SWITCH_INFO,
  SIM_SMP_PORT_INFO,
  SIM_SMP_LFT_SET,
  SIM_SMP_TRAP,
  SIM_SMP_SM_INFO, /* the standby's poll of the master SM */
};
struct sim_smp {
  union {
    const uint16_t *lft; /* LFT Set: the SM's table for the switch */
    sim_time_t took;     /* LFT Set answer: when the block took effect */
  };
  uint16_t path[SIM_SMP_HOPS];
  uint8_t attr, hop, nhops, port_up;
  uint32_t arg;
};
_Static_assert(offsetof(struct sim_pkt, plen) % 8 == 0 &&
                   offsetof(struct sim_pkt, plen) + sizeof(struct sim_smp) <=
                       sizeof(struct sim_pkt),
               "an SMP's route fits the packet's header bytes");
static inline struct sim_smp *sim_smp(struct sim_pkt *p) {
  return (struct sim_smp *)(void *)&p->plen;
}

/* sm.c's side of the management packets: an SMP's answer (or a trap)
 * reached the SM's NIC; the SM's timer. */
void sim_sm_answer(struct sim *s, struct sim_pkt *p);
void sim_sm_trap_rx(struct sim *s, struct sim_pkt *p);
void sim_sm_event(struct sim *s);
/* The standby SM's SMInfo polls: its timer (a global event, every
 * polling_timeout), an answer back at its NIC, whether an SM (master or
 * standby) runs on NIC nic (its SMA answers SMInfo), and the timer armed
 * again at the next multiple of polling_timeout (sim_run: a workload was
 * added). */
void sim_sm_poll_event(struct sim *s);
void sim_sm_poll_answer(struct sim *s, struct sim_nic *nic, struct sim_pkt *p);
bool sim_sm_on(const struct sim *s, uint32_t nic);
void sim_sm_poll_arm(struct sim *s);
/* A sweep of the changes no sweep has seen yet (fail.c's unseen ones)
 * starts now, or once the sweep running ends; every LFT block is
 * programmed with all. */
void sim_sm_sweep(struct sim *s, enum sim_noticed how, bool all);
/* The master's link went down: a sweep running stops, its changes are
 * unseen again. */
void sim_sm_abort(struct sim *s);
/* The SM's event runs in the master's NIC's partition (par.c). */
struct sim_ev *sim_sm_ev(struct sim *s);
/* fail.c's side: a sweep starts and takes the changes not seen yet (a
 * bit each); it ended, with its steps' times (a stopped sweep's changes
 * go back with end == false). */
uint32_t sim_fail_sweep_begin(struct sim *s, enum sim_noticed how);
void sim_fail_sweep_end(struct sim *s, uint32_t covers, sim_time_t disc,
                        sim_time_t comp, sim_time_t prog, bool end);
/* Whether some change no sweep has seen yet. */
bool sim_fail_unseen(const struct sim *s);

/* par.c: parallel runs. */
/* Sets the lookahead, the partitions and every node's and event's
 * partition (sim_new, once the workload exists). */
void sim_par_partition(struct sim *s);
/* A distributed run (s->net): 0, or -1 with a message in err when the
 * scenario cannot run on one partition per rank yet. */
int sim_net_check(const struct sim *s, char *err, size_t errlen);
/* A collective's message to the MPI rank that runs partition part (a
 * slot header to a ring there): sim_coll_net_take gets its bytes there
 * at the next exchange. */
void sim_par_coll_msg(struct sim *s, uint16_t part, const void *b, size_t len);
void sim_coll_net_take(struct sim *s, const void *b, size_t len);
/* The collective's event of kind (COLL, COLL_CONNECT: of rank idx;
 * COLL_START), or NULL. */
struct sim_ev *sim_coll_ev(struct sim *s, unsigned kind, uint64_t idx);
/* The end of a distributed run: the ranks' failures, everywhere. */
void sim_coll_net_finish(struct sim *s);
/* ... and the failures' results (fail.c), and the SM's figures (sm.c). */
void sim_fail_net_finish(struct sim *s);
void sim_sm_net_finish(struct sim *s);
/* The pause logs of every rank, merged in run order, at every rank. */
void sim_net_pauses(struct sim *s);
/* The layer of simulators made now (sim_net_use), or NULL. */
const struct sim_net *sim_net_default(void);
/* v becomes op over every rank's v (nothing without a layer). */
void sim_net_reduce(const struct sim *s, void *v, size_t n,
                    enum sim_net_op op);
/* Whether this process runs partition part: always, but in a distributed
 * run, where each rank runs its own. */
static inline bool sim_mine(const struct sim *s, uint16_t part) {
  return !s->net || part == s->net->rank;
}
/* Runs events due by lim on the partitions' threads, as sim_run does,
 * counting them in the simulator's stats; 0, or -1 before running any
 * (err says why: out of memory, threads). */
int64_t sim_par_run(struct sim *s, sim_time_t lim, char *err, size_t errlen);
/* Where sim_schedule in a parallel run puts ev: the heap to push it on,
 * or NULL when it went to another partition as a message. */
struct sim_heap *sim_par_route(struct sim *s, struct sim_ev *ev, sim_time_t t);
/* Whether s is a partition running a window (else the main thread runs
 * alone). */
bool sim_par_in_window(const struct sim *s);
/* put_on_wire in a parallel run: pkt crosses to another partition. */
bool sim_par_cross(struct sim *s, struct sim_port *p, struct sim_pkt *pkt);
/* sim.c's pieces par.c runs. */
void sim_dispatch(struct sim *s, struct sim_ev *ev);
bool sim_run_done(const struct sim *s);
void sim_progress(struct sim *s, bool last, uint64_t events);

/* fail.c */
int sim_fail_new(struct sim *s, char *err, size_t errlen);
void sim_fail_del(struct sim *s);
void sim_fail_event(struct sim *s, struct sim_ev *ev);
/* A packet was lost to a failure (dead link, flushed, routed to it). */
void sim_fail_lost(struct sim *s, const struct sim_pkt *p);
/* A partition's losses (n, the last at last) go to the current result. */
void sim_fail_lost_fold(struct sim *s, uint64_t n, sim_time_t last);
/* Releases a packet queued at switch sw's egress (buffer, PFC or credit
 * accounting) without sending it (net.c). */
void sim_sw_release(struct sim *s, struct sim_switch *sw, struct sim_pkt *p,
                    unsigned q);

/* topo.c */
int sim_topo_build(struct sim *s, char *err, size_t errlen);

/* workload.c */
int sim_workload_add(struct sim *s, char *err, size_t errlen);

/* Each component draws from its own splitmix64 stream (util/rng.h),
 * seeded with sim_seed(run seed, kind, index). */
static inline uint64_t sim_seed(uint64_t seed, uint64_t kind, uint64_t idx) {
  uint64_t x =
      seed ^ (kind * 0xD1B54A32D192ED03ull) ^ (idx * 0xABC98388FB8FAC03ull);
  return splitmix64(&x);
}

#endif
