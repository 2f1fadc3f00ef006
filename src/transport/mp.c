/* Multipath mode: learning the peer's transport, and the requester's
 * per-PSN state that selective repeat runs on (which PSNs arrived, which
 * are gaps, which are lost and go again, and when).
 *
 * A PSN is a gap once something sent after it arrived; a gap is lost once
 * it has been one for the reorder window (a time: packets sprayed over
 * paths of different delay arrive out of order, and a gap that fills
 * within the window was reordering, not loss). That is RACK's rule, with
 * one timer for all gaps (the earliest). READ responses come in PSN order
 * from one READ request, so a response marks the earlier PSNs of its
 * request as gaps too. When nothing arrives at all for a probe timeout,
 * the oldest missing PSN goes again alone, with AckReq: the answer (a
 * selective ACK) shows every gap at once. */
#include <errno.h>
#include <string.h>

#include "transport/qp.h"
#include "uroce/errors.h"
#include "util/bits.h"

/* The ring of PSN states: four windows, so that new data goes on while
 * holes are repaired (the window bounds what is in flight, the ring the
 * span from the oldest hole), at most what one SACK describes unless the
 * window alone is larger, and at least 64. */
static uint32_t mp_ring_size(uint32_t window) {
  uint32_t one = pow2_at_least(window), four = pow2_at_least(window * 4);
  uint32_t sack = UROCE_SACK_MAX_WORDS * 64;
  if (four > sack)
    four = one > sack ? one : sack;
  return four < 64 ? 64 : four;
}

/* The requester's multipath state as a new connection starts it (at a
 * reset, or when the rings are first allocated). */
void mp_tx_reset(struct uroce_qp *qp) {
  struct mp_tx *m = &qp->mp;
  if (!m->st)
    return;
  memset(m->st, 0, (size_t)m->mask + 1);
  m->lost = m->sacked = m->trim_credit = 0;
  m->scan = m->gap_hi = qp->req.psn;
  m->gap_timer = UINT64_MAX;
  m->srtt = m->min_rtt = 0;
  m->dsack_reo = qp->eng->mp_reo;
  /* Expect reordering where packets are sprayed (by this NIC, or by
   * the fabric of a cluster told every peer is uroce). */
  m->reordered = qp->eng->mp_reo != 0 || qp->eng->cfg.paths > 1 ||
                 (qp->eng->cfg.flags & UROCE_ENG_MULTIPATH);
  m->reo = m->dsack_reo > qp->eng->cfg.reorder_ns ? m->dsack_reo
                                                  : qp->eng->cfg.reorder_ns;
  m->ssn = 0;
  m->last_prog = qp->eng->now;
  m->probes = 0;
  m->fatal = false;
  m->path = 0;
}

/* The two sides' state is allocated when first used, not with the QP: a
 * QP that only answers (a simulated flow's receiving end, a server's QP
 * that is only written to) never holds the requester's rings, about 17 KB
 * at the default window, and one that only asks never holds the
 * responder's. */
int mp_tx_alloc(struct uroce_qp *qp) {
  struct uroce_eng *eng = qp->eng;
  if (!qp->mp_cap || qp->mp.st)
    return 0;
  uint32_t w = mp_ring_size(eng->cfg.max_unacked_psn);
  uint8_t *st = eng_alloc(eng, w);
  uint64_t *ts = eng_alloc(eng, (size_t)w * sizeof(*ts));
  uint64_t *sent = eng_alloc(eng, (size_t)w * sizeof(*sent));
  if (!st || !ts || !sent) {
    eng_free(eng, st);
    eng_free(eng, ts);
    eng_free(eng, sent);
    return -ENOMEM;
  }
  qp->mp.st = st;
  qp->mp.ts = ts;
  qp->mp.sent = sent;
  qp->mp.mask = w - 1;
  mp_tx_reset(qp);
  return 0;
}

int mp_rx_alloc(struct uroce_qp *qp) {
  struct uroce_eng *eng = qp->eng;
  if (!qp->mp_cap || qp->resp.mp_st)
    return 0;
  uint32_t w = mp_ring_size(eng->cfg.max_unacked_psn);
  uint8_t *st = eng_alloc(eng, w);
  struct resp_res *runs = eng_alloc(eng, MP_RUNS * sizeof(*runs));
  if (!st || !runs) {
    eng_free(eng, st);
    eng_free(eng, runs);
    return -ENOMEM;
  }
  qp->resp.mp_st = st;
  qp->resp.runs = runs;
  qp->resp.mp_mask = w - 1;
  return 0;
}

void mp_free(struct uroce_qp *qp) {
  eng_free(qp->eng, qp->mp.st);
  eng_free(qp->eng, qp->mp.ts);
  eng_free(qp->eng, qp->mp.sent);
  eng_free(qp->eng, qp->resp.mp_st);
  eng_free(qp->eng, qp->resp.runs);
}

void mp_peer(struct uroce_qp *qp, const struct uroce_rx_pkt *rx) {
  if (qp->peer != PEER_UNKNOWN || !qp->mp_cap)
    return;
  if (uroce_bth_mp(rx->pi.bth)) {
    qp->peer = PEER_MP;
    qp->eng->stats.mp_qps++;
    /* A standard timeout before this (a first burst that met a silent
     * peer or a full socket) left the requester probing, one packet out
     * until something is acked; multipath recovers by its own marks and
     * never ends that, so it ends here. */
    qp->req.probe = false;
  } else {
    qp->peer = PEER_STD;
  }
}

/* The ring holds [comp.psn, comp.psn + mask]. */
static bool in_ring(const struct uroce_qp *qp, uint32_t psn) {
  int32_t d = uroce_psn_diff(psn, qp->comp.psn);
  return d >= 0 && (uint32_t)d <= qp->mp.mask;
}

/* The reorder window in force: until this QP saw reordering (a gap that
 * filled without a resend, or a D-SACK) or expects it (spraying), a
 * quarter of the least RTT, as RACK starts (one path, a loopback, does not
 * reorder, and its host's jitter is no reason to wait); after, what
 * mp.reo learnt. */
static uint64_t reo_now(const struct mp_tx *m) {
  if (m->reordered)
    return m->reo;
  uint64_t r = m->min_rtt / 4;
  return r && r < m->reo ? r : m->reo;
}

/* p is a gap from time t on: lost once the reorder window passed. */
static void gap_from(struct mp_tx *m, uint8_t *st, uint32_t p, uint64_t t) {
  *st |= TX_GAP;
  m->ts[p & m->mask] = t;
  if (uroce_psn_cmp(p, m->gap_hi) >= 0)
    m->gap_hi = uroce_psn_add(p, 1);
  if (t + reo_now(m) < m->gap_timer)
    m->gap_timer = t + reo_now(m);
}

static void gap_rtx_forget(struct mp_tx *m, uint32_t psn) {
  for (uint32_t i = 0; i < 32 && i < m->gap_rtx_n; i++)
    if (m->gap_rtx[i] == psn)
      m->gap_rtx[i] = UINT32_MAX; /* no PSN: they have 24 bits */
}

void mp_sent(struct uroce_qp *qp, uint32_t psn, uint32_t n, bool resp,
             uint64_t now) {
  struct mp_tx *m = &qp->mp;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t p = uroce_psn_add(psn, i);
    if (!in_ring(qp, p))
      break; /* a standard READ longer than the ring: see mp_advance */
    uint8_t *st = mp_tx_st(qp, p);
    m->sent[p & m->mask] = now;
    if (*st & TX_SENT) {
      if (qp->req.sampling && p == qp->req.sample_psn)
        qp->req.sampling = false; /* sent again: no sample (Karn) */
      if (*st & TX_LOST)
        m->lost--;
      /* A D-SACK of p says a gap resend was spurious only while p went
       * out twice: once and once for its gap. A probe's copy, or a
       * resend's own resend (its ACK lost), makes the duplicate's source
       * unknown. */
      if (*st & (TX_RTX | TX_PROBE | TX_TRIM))
        gap_rtx_forget(m, p);
      else
        m->gap_rtx[m->gap_rtx_n++ % 32] = p;
      *st =
          (uint8_t)((*st & ~(TX_GAP | TX_LOST | TX_PROBE | TX_TRIM)) | TX_RTX);
      if (uroce_psn_cmp(p, m->scan) < 0)
        m->scan = p; /* compare it with later deliveries again */
      /* Due back within an RTT: a gap from then on (RACK's timer), so
       * that a resend lost again goes once more without waiting for a
       * probe, even when nothing sent after it can arrive (a full
       * window; the rest of a READ's responses, sent before it). */
      if (m->srtt)
        gap_from(m, st, p, now + 2 * m->srtt);
    } else {
      *st = (uint8_t)(TX_SENT | (resp ? TX_RESP : 0));
    }
  }
}

/* A round-trip sample: srtt as TCP smooths it and the least seen. The
 * reorder window is a quarter of the least RTT (RACK's) plus half of what
 * queues add to the RTT (packets sprayed over paths differ by their
 * queues, which an incast or PFC back-pressure makes deep), and at least
 * what D-SACKs taught; it only grows. The RTT is the latest sample, so
 * that a queue building up is followed at once, but at most twice the
 * smoothed one, so that one stall of the host does not stretch every
 * later recovery. */
static void rtt_sample(struct mp_tx *m, uint64_t rtt, uint64_t floor,
                       bool resp) {
  if (!m->min_rtt || rtt < m->min_rtt)
    m->min_rtt = rtt;
  /* A response's time also holds the responder's queue of READs before
   * it: only its least says something of the path. */
  if (resp)
    rtt = m->min_rtt;
  m->srtt = m->srtt ? m->srtt - (m->srtt >> 3) + (rtt >> 3) : rtt;
  uint64_t q = rtt > 2 * m->srtt ? 2 * m->srtt : rtt;
  if (q < m->srtt)
    q = m->srtt;
  uint64_t r = m->min_rtt / 4 + (q - m->min_rtt) / 2;
  if (r < floor)
    r = floor;
  if (m->reo < r) /* it only grows: paths' queues differ from sample to
                     sample */
    m->reo = r;
}

bool mp_done(struct uroce_qp *qp, uint32_t psn, bool *clean) {
  struct mp_tx *m = &qp->mp;
  if (!in_ring(qp, psn))
    return false;
  uint8_t *st = mp_tx_st(qp, psn);
  if ((*st & (TX_DONE | TX_SENT)) != TX_SENT)
    return false;
  if (*st & TX_LOST)
    m->lost--;
  *clean = !(*st & (TX_RTX | TX_GAP));
  if ((*st & (TX_GAP | TX_RTX)) == TX_GAP)
    m->reordered = true; /* a gap that filled by itself */
  *st = (uint8_t)((*st | TX_DONE) & ~(TX_GAP | TX_LOST | TX_TRIM));
  m->sacked++;
  if (m->trim_credit < qp->eng->cfg.ack_every)
    m->trim_credit++; /* at most one ACK's worth saved up */
  return true;
}

/* One sample per acknowledgement, from the latest sent of what it
 * delivered (RACK's): a cumulative ACK that follows a repaired gap also
 * delivers PSNs sent long before, whose age is the repair's, not the
 * path's (taken as samples, they inflated the SRTT that resends and
 * probes wait on: a lost resend on a 2%-lossy, loaded loopback went again
 * 36-54 ms later). */
void mp_rtt(struct uroce_qp *qp, uint32_t psn, uint64_t rtt) {
  if (in_ring(qp, psn))
    rtt_sample(&qp->mp, rtt, qp->eng->cfg.reorder_ns,
               *mp_tx_st(qp, psn) & TX_RESP);
}

void mp_dsack(struct uroce_qp *qp, uint32_t psn) {
  struct mp_tx *m = &qp->mp;
  bool gap = false;
  for (uint32_t i = 0; i < 32 && i < m->gap_rtx_n; i++)
    gap |= m->gap_rtx[i] == psn;
  /* A probe's resend, or a duplicate the network made, says nothing of
   * the reorder window. */
  if (!gap)
    return;
  m->reordered = true;
  qp->eng->stats.mp_spurious++;
  uint64_t cap = 4 * (m->srtt > m->min_rtt ? m->srtt : m->min_rtt);
  uint64_t r = 2 * m->reo;
  if (r > cap)
    r = cap;
  if (r > m->dsack_reo)
    m->dsack_reo = r;
  if (r > m->reo)
    m->reo = r;
  /* The fabric reorders for every QP of this NIC alike: new ones start
   * from what this one learnt. */
  if (m->dsack_reo > qp->eng->mp_reo)
    qp->eng->mp_reo = m->dsack_reo;
}

/* Of the n PSNs from psn (sent ones, in the ring), those sent before
 * `before`, still missing and not of kind `skip` are gaps from now; the
 * gap scan reaches past them. */
static void gaps_sent_before(struct uroce_qp *qp, uint32_t psn, uint32_t n,
                             uint8_t skip, uint64_t before, uint64_t now) {
  struct mp_tx *m = &qp->mp;
  for (uint32_t i = 0; i < n && uroce_psn_cmp(psn, qp->req.max_psn) < 0 &&
                       in_ring(qp, psn);
       i++, psn = uroce_psn_add(psn, 1)) {
    uint8_t *st = mp_tx_st(qp, psn);
    if ((*st & (TX_DONE | TX_GAP | TX_LOST | TX_SENT | skip)) != TX_SENT ||
        m->sent[psn & m->mask] >= before)
      continue;
    gap_from(m, st, psn, now);
    if (uroce_psn_cmp(psn, m->scan) >= 0)
      m->scan = uroce_psn_add(psn, 1);
  }
}

void mp_gaps_before(struct uroce_qp *qp, uint32_t psn, uint64_t ts,
                    uint64_t now) {
  struct mp_tx *m = &qp->mp;
  uint32_t p = m->scan;
  if (uroce_psn_cmp(p, qp->comp.psn) < 0)
    p = qp->comp.psn;
  bool skipped = false;
  uint32_t first_skip = 0;
  for (; uroce_psn_cmp(p, psn) < 0 && in_ring(qp, p); p = uroce_psn_add(p, 1)) {
    uint8_t *st = mp_tx_st(qp, p);
    if ((*st & (TX_DONE | TX_GAP | TX_LOST)) || !(*st & TX_SENT))
      continue;
    if (m->sent[p & m->mask] <= ts) {
      gap_from(m, st, p, now);
    } else if (!skipped) { /* sent again after it: not evidence yet */
      skipped = true;
      first_skip = p;
    }
  }
  if (skipped)
    m->scan = first_skip;
  else if (uroce_psn_cmp(p, m->scan) > 0)
    m->scan = p;
  /* A resent request arrived: every request sent before it and still
   * missing is a gap too, later PSNs included. (Not responses: the
   * responder answers a re-request before the READs queued after it.) */
  if (in_ring(qp, psn) &&
      (*mp_tx_st(qp, psn) & (TX_RTX | TX_RESP)) == TX_RTX)
    gaps_sent_before(qp, uroce_psn_add(psn, 1), UINT32_MAX, TX_RESP, ts,
                     now);
}

void mp_request_gap(struct uroce_qp *qp, uint32_t psn, uint32_t n,
                    uint64_t ts, uint64_t now) {
  gaps_sent_before(qp, psn, n, 0, ts + 1, now);
}

void mp_gap_expiry(struct uroce_qp *qp, uint64_t now) {
  struct mp_tx *m = &qp->mp;
  m->gap_timer = UINT64_MAX;
  /* Through the last gap marked, not only to scan: a resend moves scan
   * back to its PSN, and gaps beyond it must keep their timer (they
   * waited for one probe each: a lossy 64-to-1 incast took 133 ms). */
  uint32_t end = uroce_psn_cmp(m->gap_hi, m->scan) > 0 ? m->gap_hi : m->scan;
  for (uint32_t p = qp->comp.psn; uroce_psn_cmp(p, end) < 0 && in_ring(qp, p);
       p = uroce_psn_add(p, 1)) {
    uint8_t *st = mp_tx_st(qp, p);
    if (!(*st & TX_GAP))
      continue;
    uint64_t due = m->ts[p & m->mask] + reo_now(m);
    if (due <= now) {
      *st = (uint8_t)((*st & ~TX_GAP) | TX_LOST);
      m->lost++;
    } else if (due < m->gap_timer) {
      m->gap_timer = due;
    }
  }
}

uint32_t mp_advance(struct uroce_qp *qp) {
  struct mp_tx *m = &qp->mp;
  uint32_t n = 0;
  while (uroce_psn_cmp(qp->comp.psn, qp->req.max_psn) < 0) {
    uint8_t *st = mp_tx_st(qp, qp->comp.psn);
    if (!(*st & TX_DONE))
      break;
    *st = 0;
    m->sacked--;
    /* The slot now stands for comp.psn + mask + 1. A PSN there already
     * sent was beyond the ring then (a READ sent in standard mode before
     * the peer was known): its responses were dropped, ask again. */
    uint32_t far = uroce_psn_add(qp->comp.psn, m->mask + 1);
    if (uroce_psn_cmp(far, qp->req.max_psn) < 0) {
      *st = TX_SENT | TX_RESP | TX_LOST;
      m->lost++;
    }
    qp->comp.psn = uroce_psn_add(qp->comp.psn, 1);
    n++;
  }
  if (uroce_psn_cmp(m->scan, qp->comp.psn) < 0)
    m->scan = qp->comp.psn;
  if (uroce_psn_cmp(m->gap_hi, qp->comp.psn) < 0)
    m->gap_hi = qp->comp.psn;
  return n;
}

/* Marks p lost; false if it arrived. */
static bool mark_lost(struct uroce_qp *qp, uint32_t p) {
  uint8_t *st = mp_tx_st(qp, p);
  if (*st & TX_DONE)
    return false;
  if (!(*st & TX_LOST)) {
    *st = (uint8_t)((*st & ~TX_GAP) | TX_LOST | TX_PROBE);
    qp->mp.lost++;
  }
  return true;
}

/* Marks p, sent and still missing, lost because it arrived trimmed;
 * false if it is not in flight. */
static bool trim_lost(struct uroce_qp *qp, uint32_t p) {
  int32_t d = uroce_psn_diff(p, qp->comp.psn);
  if (d < 0 || (uint32_t)d > qp->mp.mask ||
      uroce_psn_cmp(p, qp->req.max_psn) >= 0)
    return false;
  uint8_t *st = mp_tx_st(qp, p);
  if ((*st & (TX_SENT | TX_DONE)) != TX_SENT)
    return false;
  if (!(*st & TX_LOST))
    qp->mp.lost++;
  *st = (uint8_t)((*st & ~(TX_GAP | TX_PROBE)) | TX_LOST | TX_TRIM);
  return true;
}

/* A full queue cut the packet (UET's NACK of a trimmed packet): it goes
 * again (mp_trim_clock), and congestion control hears what an ECN mark
 * from that queue would have said: a CNP (Swift cuts by ecn_beta, DCQCN
 * its rate, each at most as often as for CNPs). Swift's loss reaction,
 * halving, crashed every window of a 15-to-1 incast to 4 KiB within
 * seven RTTs (each cut counted with the RTT of before the queue built):
 * 3.47 ms against 1.60 ms with the CNP's cut. */
void mp_trimmed(struct uroce_qp *qp, uint32_t psn, uint64_t now) {
  if (!trim_lost(qp, psn))
    return;
  qp->eng->stats.mp_trim_naks++;
  qp->eng->cc->on_cnp_rx(qp->cc_state, now);
  qp_trace_cc(qp, now, UROCE_TRC_TRIM);
}

bool mp_trim_clock(struct uroce_qp *qp, uint32_t p) {
  struct mp_tx *m = &qp->mp;
  if (!(*mp_tx_st(qp, p) & TX_TRIM) || p == qp->comp.psn)
    return true; /* the oldest holds back every completion: at once */
  if (m->trim_credit) {
    m->trim_credit--;
    return true;
  }
  /* Nothing else in flight to clock it: sent, neither delivered nor
   * known lost. */
  uint32_t span = (uint32_t)uroce_psn_diff(qp->req.max_psn, qp->comp.psn);
  return span <= m->sacked + m->lost;
}

void mp_trimmed_resp(struct uroce_qp *qp, uint32_t psn) {
  if (qp_mp(qp) && qp->mp.st && trim_lost(qp, psn))
    qp->eng->stats.mp_trim_naks++;
}

void mp_timeout(struct uroce_qp *qp, uint64_t now) {
  struct mp_tx *m = &qp->mp;
  uint32_t p = qp->comp.psn;
  for (; uroce_psn_cmp(p, qp->req.max_psn) < 0 && in_ring(qp, p);
       p = uroce_psn_add(p, 1))
    if (mark_lost(qp, p))
      break;
  /* A READ's responses: an ACK of the probe would not say which are
   * missing, so the probe asks for the READ's whole missing run (one
   * request). */
  struct swqe *w = sq_wqe_at(qp, p);
  if (w && w->opcode == UROCE_WR_RDMA_READ && in_ring(qp, p))
    for (p = uroce_psn_add(p, 1); uroce_psn_cmp(p, w->last_psn) <= 0 &&
                                  uroce_psn_cmp(p, qp->req.max_psn) < 0 &&
                                  in_ring(qp, p) && mark_lost(qp, p);
         p = uroce_psn_add(p, 1))
      ;
  qp->eng->stats.mp_probes++;
  if (m->probes < 16)
    m->probes++;
}

bool mp_next_lost(struct uroce_qp *qp, uint32_t *psn) {
  struct mp_tx *m = &qp->mp;
  if (!m->lost)
    return false;
  for (uint32_t p = qp->comp.psn; in_ring(qp, p); p = uroce_psn_add(p, 1)) {
    uint8_t *st = mp_tx_st(qp, p);
    if (*st & TX_LOST) {
      *psn = p;
      return true;
    }
    if (uroce_psn_cmp(p, qp->req.max_psn) >= 0)
      break;
  }
  m->lost = 0; /* nothing marked after all */
  return false;
}

/* Twice the smoothed RTT plus the reorder window and the responder's ACK
 * delay, doubled per probe without progress, at most the QP's timeout;
 * the QP's timeout until an RTT is known. */
uint64_t mp_pto(const struct uroce_qp *qp) {
  const struct mp_tx *m = &qp->mp;
  uint64_t rto = rto_ns(qp);
  if (rto == UINT64_MAX || !m->srtt)
    return rto;
  /* The peer delays an ACK by up to ack_delay_ns, or ack_hold_ns when it
   * waits for a reply to carry it. */
  const struct uroce_eng_cfg *c = &qp->eng->cfg;
  uint64_t delay = c->ack_hold_ns > c->ack_delay_ns ? c->ack_hold_ns
                                                    : c->ack_delay_ns;
  uint64_t t = 2 * m->srtt + reo_now(m) + delay;
  t <<= m->probes < 10 ? m->probes : 10;
  return t < rto ? t : rto;
}

uint16_t mp_sport(struct uroce_qp *qp) {
  uint32_t n = qp->eng->cfg.paths;
  if (!qp_mp(qp) || n <= 1)
    return qp->sport;
  uint32_t k = qp->mp.path++ % n;
  /* Paths are the QP's own port and n - 1 others that a hash spreads
   * over the 14 bits RoCEv2 leaves for entropy. */
  uint32_t h = (qp->sport + k * 0x9E3779B1u) * 0x85EBCA77u;
  return k ? (uint16_t)(0xC000 | ((h >> 13) & 0x3FFF)) : qp->sport;
}
