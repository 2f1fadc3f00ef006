#include "netsim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "wire/hdr.h"

#define NS_BUF 4400

struct ns_pkt {
  uint64_t t, seq;
  int src, dst;
  uint16_t sport;
  uint8_t ecn;
  bool trimmed;
  uint32_t len;
  struct ns_pkt *next_free;
  uint8_t data[NS_BUF];
};

static double rnd01(struct netsim *ns) {
  return splitmix64_01(&ns->rng);
}

static int eng_make(struct netsim *ns, int i, const struct uroce_eng_cfg *cfg) {
  struct uroce_eng_cfg c = *cfg;
  memset(c.gid, 0, 16);
  c.gid[10] = c.gid[11] = 0xFF;
  c.gid[12] = 10;
  c.gid[15] = (uint8_t)(i + 1);
  memcpy(ns->gid[i], c.gid, 16);
  c.seed = ns->seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 7919 + 1;
  return uroce_eng_new(&ns->eng[i], &c);
}

int ns_eng_remake(struct netsim *ns, int i, const struct uroce_eng_cfg *cfg) {
  uroce_eng_del(ns->eng[i]);
  ns->eng[i] = 0;
  return eng_make(ns, i, cfg);
}

int ns_init(struct netsim *ns, int n, uint64_t seed,
            const struct uroce_eng_cfg *cfg) {
  memset(ns, 0, sizeof(*ns));
  if (n < 1 || n > NS_MAX_NODES)
    return -1;
  ns->n = n;
  ns->seed = seed;
  ns->rng = seed ^ 0x6E657473696D0000ull;
  for (int i = 0; i < n; i++) {
    int rc = eng_make(ns, i, cfg);
    if (rc) {
      ns_free(ns);
      return rc;
    }
    for (int j = 0; j < n; j++) {
      ns->link[i][j].delay_ns = 1000;
      ns->link[i][j].gbps = 100;
    }
  }
  return 0;
}

void ns_free(struct netsim *ns) {
  for (int i = 0; i < ns->n; i++)
    uroce_eng_del(ns->eng[i]);
  for (uint32_t i = 0; i < ns->nheap; i++)
    free(ns->heap[i]);
  free(ns->heap);
  while (ns->free_list) {
    struct ns_pkt *p = ns->free_list;
    ns->free_list = p->next_free;
    free(p);
  }
  memset(ns, 0, sizeof(*ns));
}

static bool before(const struct ns_pkt *a, const struct ns_pkt *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void heap_push(struct netsim *ns, struct ns_pkt *p) {
  if (ns->nheap == ns->cap) {
    ns->cap = ns->cap ? ns->cap * 2 : 256;
    ns->heap = realloc(ns->heap, ns->cap * sizeof(*ns->heap));
    if (!ns->heap)
      abort();
  }
  uint32_t i = ns->nheap++;
  while (i && before(p, ns->heap[(i - 1) / 2])) {
    ns->heap[i] = ns->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  ns->heap[i] = p;
}

static struct ns_pkt *heap_pop(struct netsim *ns) {
  struct ns_pkt *top = ns->heap[0], *last = ns->heap[--ns->nheap];
  uint32_t i = 0;
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= ns->nheap)
      break;
    if (c + 1 < ns->nheap && before(ns->heap[c + 1], ns->heap[c]))
      c++;
    if (!before(ns->heap[c], last))
      break;
    ns->heap[i] = ns->heap[c];
    i = c;
  }
  if (ns->nheap)
    ns->heap[i] = last;
  return top;
}

static struct ns_pkt *pkt_new(struct netsim *ns) {
  struct ns_pkt *p = ns->free_list;
  if (p) {
    ns->free_list = p->next_free;
    return p;
  }
  p = malloc(sizeof(*p));
  if (!p)
    abort();
  return p;
}

static void pkt_free(struct netsim *ns, struct ns_pkt *p) {
  p->next_free = ns->free_list;
  ns->free_list = p;
}

static int node_by_gid(const struct netsim *ns, const uint8_t gid[16]) {
  for (int i = 0; i < ns->n; i++)
    if (!memcmp(ns->gid[i], gid, 16))
      return i;
  return -1;
}

/* Decides the fate of one packet on link l: true = lost. */
static bool lose(struct netsim *ns, struct ns_link *l) {
  l->count++;
  if (l->every_nth && l->count % l->every_nth == 0)
    return true;
  if (l->ge_good_bad > 0) {
    if (l->ge_bad) {
      if (rnd01(ns) < l->ge_bad_good)
        l->ge_bad = false;
    } else if (rnd01(ns) < l->ge_good_bad) {
      l->ge_bad = true;
    }
    if (l->ge_bad && rnd01(ns) < l->ge_bad_loss)
      return true;
  }
  return l->loss > 0 && rnd01(ns) < l->loss;
}

/* The extra delay of the path the source port hashes to. */
static uint64_t path_delay(const struct ns_link *l, uint16_t sport) {
  if (l->paths <= 1 || !l->path_skew_ns)
    return 0;
  uint64_t x = (uint64_t)sport * 0x9E3779B97F4A7C15ull;
  uint64_t path = (x >> 32) % l->paths;
  uint64_t h = splitmix64(&path);
  return h % (l->path_skew_ns + 1);
}

static void tap(struct netsim *ns, int src, const struct uroce_tx_pkt *tx) {
  bool bit = uroce_bth_mp(tx->hdr);
  ns->tap_mp_bit[src] += bit;
  ns->tap_mp_op[src] += (tx->hdr[0] & 0xE0) == UROCE_OP_MP_BASE;
  ns->tap_mp_bit_late[src] += bit && ns->tap_heard_std[src];
}

/* rxe_read_floor: true if tx is a READ request that starts before an
 * earlier request of the same READ (which then records the highest start).
 * rxe finds the READ by PSN (find_resource); the table finds it by rkey and
 * end address, which a zero-length READ shares with the READ laid out just
 * before it: left out, it cannot move that READ's floor (and has no start
 * to move: every request of it names the same address). */
static bool below_read_floor(struct ns_link *l, const struct uroce_tx_pkt *tx) {
  if (!l->rxe_read_floor || tx->hdr_len < UROCE_BTH_LEN ||
      uroce_bth_opcode(tx->hdr) != UROCE_OP_READ_REQ)
    return false;
  const uint8_t *reth =
      tx->hdr + uroce_opcode(UROCE_OP_READ_REQ)->offset[UROCE_HDR_RETH];
  if (!uroce_reth_len(reth))
    return false;
  uint64_t va = uroce_reth_va(reth);
  uint64_t end = va + uroce_reth_len(reth);
  uint32_t rkey = uroce_reth_rkey(reth);
  uint32_t n = l->nreads < 64 ? l->nreads : 64;
  for (uint32_t i = 0; i < n; i++) {
    if (l->reads[i].rkey != rkey || l->reads[i].end != end)
      continue;
    if (va < l->reads[i].floor) {
      l->floor_drops++;
      return true;
    }
    l->reads[i].floor = va;
    return false;
  }
  uint32_t i = l->nreads++ % 64;
  l->reads[i].rkey = rkey;
  l->reads[i].end = end;
  l->reads[i].floor = va;
  return false;
}

static void transmit(struct netsim *ns, int src,
                     const struct uroce_tx_pkt *tx) {
  ns->stats.sent++;
  if (ns->tap)
    tap(ns, src, tx);
  uint32_t len = uroce_tx_len(tx);
  int dst = node_by_gid(ns, tx->dgid);
  if (dst < 0 || len > NS_BUF) {
    ns->stats.lost++;
    return;
  }
  struct ns_link *l = &ns->link[src][dst];
  uint64_t ser = (uint64_t)len * 8 / (l->gbps ? l->gbps : 100);
  ns->busy_until[src] = ns->now + (ser ? ser : 1);
  bool lost = ns->silent[src] || ns->silent[dst] || lose(ns, l);
  bool floor = !lost && below_read_floor(l, tx);
  if (ns->trace == 2 && !lost && !floor)
    fprintf(stderr, "%10llu %d->%d %s psn %u sent\n",
            (unsigned long long)ns->now, src, dst,
            uroce_opcode(uroce_bth_opcode(tx->hdr))->name,
            uroce_bth_psn(tx->hdr));
  if (lost || floor) {
    ns->stats.lost++;
    if (ns->trace)
      fprintf(stderr, "%10llu %d->%d %s psn %u %s\n",
              (unsigned long long)ns->now, src, dst,
              uroce_opcode(uroce_bth_opcode(tx->hdr))->name,
              uroce_bth_psn(tx->hdr), floor ? "DROPPED (rxe floor)" : "LOST");
    return;
  }
  if (l->corrupt > 0 && rnd01(ns) < l->corrupt) {
    ns->stats.corrupted++; /* the receiver's ICRC check drops it */
    return;
  }
  struct ns_pkt *p = pkt_new(ns);
  uint8_t *b = p->data;
  memcpy(b, tx->hdr, tx->hdr_len);
  uint32_t off = tx->hdr_len;
  for (int i = 0; i < tx->nseg; i++) {
    if (tx->seg[i].addr)
      memcpy(b + off, tx->seg[i].addr, tx->seg[i].len);
    else
      memset(b + off, 0, tx->seg[i].len);
    off += tx->seg[i].len;
  }
  memset(b + off, 0, tx->pad + 4u);
  p->len = len;
  p->trimmed = false;
  if (tx->payload_len && l->trim_nth && ++l->payload_count == l->trim_nth) {
    /* The headers, the pad the BTH counts and the ICRC slot stay. */
    memset(b + tx->hdr_len, 0, tx->pad + 4u);
    p->len = tx->hdr_len + tx->pad + 4u;
    p->trimmed = true;
    l->trimmed_psn = uroce_bth_psn(tx->hdr);
    ns->stats.trimmed++;
  }
  p->src = src;
  p->dst = dst;
  p->sport = tx->sport;
  p->ecn = (l->ce > 0 && rnd01(ns) < l->ce && tx->ecn) ? 3 : tx->ecn;
  if (l->flip > 0 && rnd01(ns) < l->flip) {
    uint32_t bit = (uint32_t)(t_rand(&ns->rng) % (tx->hdr_len * 8u));
    b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    ns->stats.flipped++;
  }
  p->t = ns->now + ser + l->delay_ns + path_delay(l, tx->sport);
  if (l->reorder > 0 && rnd01(ns) < l->reorder)
    p->t += t_rand(&ns->rng) % (l->reorder_ns + 1);
  p->seq = ns->seq++;
  if (l->dup > 0 && rnd01(ns) < l->dup) {
    struct ns_pkt *q = pkt_new(ns);
    memcpy(q, p, offsetof(struct ns_pkt, data) + len);
    q->t += 1 + t_rand(&ns->rng) % (l->delay_ns + 1);
    q->seq = ns->seq++;
    heap_push(ns, q);
    ns->stats.duplicated++;
  }
  heap_push(ns, p);
}

static void deliver(struct netsim *ns, struct ns_pkt *p) {
  struct uroce_rx_pkt rx;
  memset(&rx, 0, sizeof(rx));
  if (uroce_pkt_parse(p->data, p->len, &rx.pi) != 0) {
    ns->stats.parse_err++;
    return;
  }
  memcpy(rx.sgid, ns->gid[p->src], 16);
  memcpy(rx.dgid, ns->gid[p->dst], 16);
  rx.sport = p->sport;
  rx.ecn = p->ecn;
  rx.flags = p->trimmed ? UROCE_RX_TRIMMED : 0;
  if (ns->trace) {
    const uint8_t *aeth = uroce_pkt_hdr(&rx.pi, UROCE_HDR_AETH);
    fprintf(stderr, "%10llu %d->%d %s psn %u len %u%s",
            (unsigned long long)ns->now, p->src, p->dst, rx.pi.op->name,
            rx.pi.psn, rx.pi.payload_len,
            uroce_bth_ackreq(rx.pi.bth) ? " ackreq" : "");
    if (aeth)
      fprintf(stderr, " syn 0x%02x msn %u", uroce_aeth_syndrome(aeth),
              uroce_aeth_msn(aeth));
    const uint8_t *reth = uroce_pkt_hdr(&rx.pi, UROCE_HDR_RETH);
    if (reth && (rx.pi.op->mask & UROCE_OPM_READ))
      fprintf(stderr, " va 0x%llx dmalen %u",
              (unsigned long long)uroce_reth_va(reth), uroce_reth_len(reth));
    fprintf(stderr, "\n");
  }
  ns->stats.delivered++;
  if (ns->tap && !uroce_bth_mp(rx.pi.bth) && rx.pi.opcode != UROCE_OP_CNP)
    ns->tap_heard_std[p->dst] = true;
  uroce_eng_read_pkt(ns->eng[p->dst], &rx, ns->now);
}

bool ns_step(struct netsim *ns) {
  /* Deliver, expire, transmit: everything due now. */
  while (ns->nheap && ns->heap[0]->t <= ns->now) {
    struct ns_pkt *p = heap_pop(ns);
    if (!ns->silent[p->dst])
      deliver(ns, p);
    pkt_free(ns, p);
  }
  for (int i = 0; i < ns->n; i++)
    if (uroce_eng_next_expiry(ns->eng[i]) <= ns->now)
      uroce_eng_handle_expiry(ns->eng[i], ns->now);
  for (int i = 0; i < ns->n; i++) {
    struct uroce_tx_pkt tx;
    /* A busy transmitter is asked again once it is free. */
    ns->more[i] = ns->busy_until[i] > ns->now;
    bool sent = false;
    while (ns->busy_until[i] <= ns->now) {
      if (!uroce_eng_write_pkt(ns->eng[i], &tx, ns->now))
        break;
      transmit(ns, i, &tx);
      ns->more[i] = true;
      /* As the device does: ACKs held for a reply leave with the first
       * packet that goes (uroce_eng_release_acks). */
      if (!sent)
        uroce_eng_release_acks(ns->eng[i]);
      sent = true;
    }
  }
  /* Then the next time anything happens. */
  uint64_t next = UINT64_MAX;
  if (ns->nheap)
    next = ns->heap[0]->t;
  for (int i = 0; i < ns->n; i++) {
    uint64_t e = uroce_eng_next_expiry(ns->eng[i]);
    if (e < next)
      next = e;
    if (ns->more[i] && ns->busy_until[i] < next)
      next = ns->busy_until[i];
  }
  if (next == UINT64_MAX)
    return false;
  if (ns->tick_ns && next > ns->now + ns->tick_ns)
    next = ns->now + ns->tick_ns;
  ns->now = next > ns->now ? next : ns->now + 1;
  return true;
}

static int poll_cq(struct uroce_cq *cq, struct uroce_wc *wc, int n) {
  int k = uroce_eng_cq_poll(cq, n, wc);
  return k < 0 ? 0 : k;
}

int ns_wait_cq(struct netsim *ns, struct uroce_cq *cq, struct uroce_wc *wc,
               int n) {
  int got = 0;
  uint64_t until = ns->now + 20000000000ull;
  while (got < n) {
    got += poll_cq(cq, wc + got, n - got);
    if (got >= n || ns->now > until || !ns_step(ns))
      break;
  }
  return got + poll_cq(cq, wc + got, n - got);
}

bool ns_run(struct netsim *ns, bool (*done)(void *ctx), void *ctx,
            uint64_t until) {
  while (!done(ctx)) {
    if (ns->now > until || !ns_step(ns))
      return done(ctx);
  }
  return true;
}

bool ns_run_idle(struct netsim *ns, uint64_t until) {
  while (ns->now <= until)
    if (!ns_step(ns))
      return true;
  return false;
}
