/* libFuzzer target: the engine's packet input, with QPs of every type and
 * in several states, all with work outstanding.
 *
 * Two engines, A and B, each hold one end of NPAIR QP pairs (RC, RC on an
 * SRQ, UC, UD, and RC ends left in RTR, INIT, SQD and RESET on A's side),
 * every end with receives and sends of every opcode its type allows
 * posted. The input is a script for the network between them: carry the
 * next packet one way (dropped, duplicated or with bytes flipped on the
 * way), inject a packet of the input's own (aimed at a real QP and near
 * its expected PSN), let time pass and run the timers, post more work (a
 * send with a bad local key among it, which stops a UC or UD send queue
 * in SQE), move a QP to ERR or SQD, back to RTS (from SQD or SQE), or
 * through RESET and up again with work outstanding at its peer.
 *
 * Findings: any crash, ASan/UBSan report (each MR is exactly one heap
 * block, so an access outside an MR is an ASan report), a completion for a
 * WR never posted or a second completion for one WR, and a successful
 * receive longer than its buffer. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tphelp.h"
#include "transport/qp.h"
#include "uroce/uroce.h"
#include "wire/hdr.h"

#define NPAIR 8
#define MAX_WR 4096
#define RECV_LEN 700 /* > MTU 256: multi-packet SENDs fit */

enum { END_A, END_B };

struct pair_cfg {
  uint32_t type;
  bool srq;
  int a_state; /* the state A's end is left in */
};

static const struct pair_cfg pairs[NPAIR] = {
    {UROCE_QPT_RC, false, UROCE_QPS_RTS},
    {UROCE_QPT_RC, true, UROCE_QPS_RTS},
    {UROCE_QPT_UC, false, UROCE_QPS_RTS},
    {UROCE_QPT_UD, false, UROCE_QPS_RTS},
    {UROCE_QPT_RC, false, UROCE_QPS_RTR},
    {UROCE_QPT_RC, false, UROCE_QPS_INIT},
    {UROCE_QPT_RC, false, UROCE_QPS_SQD},
    {UROCE_QPT_RC, false, UROCE_QPS_RESET},
};

struct world {
  struct uroce_eng *eng[2];
  uint8_t gid[2][16];
  struct tp_end ep[2][NPAIR];
  struct uroce_ah *ah[2]; /* UD: toward the other engine */
  /* RC and UC ends: a type 2 window over the whole MR, bound to the QP,
   * which fixed-up packets name as often as the MR itself. */
  struct uroce_mw *mw[2][NPAIR];
  struct tp_opts o; /* how every end was made and brought up */
  uint64_t now;
  uint64_t next_wr_id;
  uint32_t recv_len[MAX_WR]; /* 0: a send WR (or never posted) */
  uint8_t done[MAX_WR];      /* completions seen per WR */
  bool is_recv[MAX_WR];
};

static struct world w;

/* A stream over the input; reads past the end give zeros. */
struct in {
  const uint8_t *p;
  size_t n;
};

static uint8_t u8(struct in *in) {
  if (!in->n)
    return 0;
  in->n--;
  return *in->p++;
}

static uint64_t new_wr_id(uint32_t recv_len, bool recv) {
  if (w.next_wr_id >= MAX_WR)
    return 0;
  uint64_t id = w.next_wr_id++;
  w.recv_len[id] = recv_len;
  w.is_recv[id] = recv;
  return id;
}

static void post_recv(struct tp_end *e, uint32_t off) {
  uint64_t id = new_wr_id(RECV_LEN, true);
  if (id)
    tp_post_recv(e, id, off % (e->memlen - RECV_LEN), RECV_LEN);
}

static void post_ud_send(int side, struct tp_end *e, const struct tp_end *to,
                         uint32_t len) {
  struct uroce_sge sge = {
      .addr = e->mr->iova, .length = len, .lkey = e->mr->lkey};
  struct uroce_send_wr wr = {.wr_id = new_wr_id(0, false),
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = UROCE_WR_SEND,
                             .send_flags = UROCE_SEND_SIGNALED};
  wr.wr.ud.ah = w.ah[side];
  wr.wr.ud.remote_qpn = uroce_qp_num(to->qp);
  wr.wr.ud.remote_qkey = 0x11111111;
  struct uroce_send_wr *bad;
  if (wr.wr_id)
    uroce_eng_qp_post_send(e->qp, &wr, &bad);
}

/* One send WR of kind k on side's end of pair i (k picks the opcode). */
static void post_send(int side, int i, uint8_t k, uint32_t len) {
  struct tp_end *e = &w.ep[side][i], *to = &w.ep[!side][i];
  if (pairs[i].type == UROCE_QPT_UD) {
    post_ud_send(side, e, to, len % 256);
    return;
  }
  static const uint32_t ops[] = {UROCE_WR_SEND,
                                 UROCE_WR_SEND_WITH_IMM,
                                 UROCE_WR_RDMA_WRITE,
                                 UROCE_WR_RDMA_WRITE_WITH_IMM,
                                 UROCE_WR_RDMA_READ,
                                 UROCE_WR_ATOMIC_FETCH_AND_ADD,
                                 UROCE_WR_ATOMIC_CMP_AND_SWP};
  uint32_t op = ops[k % 7];
  bool atomic =
      op == UROCE_WR_ATOMIC_FETCH_AND_ADD || op == UROCE_WR_ATOMIC_CMP_AND_SWP;
  if (atomic)
    len = 8;
  uint64_t off = atomic ? (uint64_t)(k & 0xF0) : 64;
  uint64_t roff = atomic ? (uint64_t)(k & 0xF0) * 2 : 4096 + (k & 0xF0);
  uint64_t id = new_wr_id(0, false);
  if (id)
    tp_post_send(e, op, id, off, len, UROCE_SEND_SIGNALED, to->mr->iova + roff,
                 to->mr->rkey);
}

static void modify_state(struct tp_end *e, int state) {
  struct uroce_qp_attr a = {.qp_state = state};
  uroce_eng_qp_modify(e->qp, &a, UROCE_QP_STATE);
}

/* A send whose SGE names no region: a local protection error when the
 * requester reaches it, which takes an RC QP to ERR and stops a UC or UD
 * send queue in SQE. */
static void post_bad_send(int side, int i) {
  struct tp_end *e = &w.ep[side][i];
  struct uroce_sge sge = {
      .addr = e->mr->iova, .length = 8, .lkey = e->mr->lkey ^ 0x80};
  struct uroce_send_wr wr = {.wr_id = new_wr_id(0, false),
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = UROCE_WR_SEND,
                             .send_flags = UROCE_SEND_SIGNALED};
  if (pairs[i].type == UROCE_QPT_UD) {
    wr.wr.ud.ah = w.ah[side];
    wr.wr.ud.remote_qpn = uroce_qp_num(w.ep[!side][i].qp);
    wr.wr.ud.remote_qkey = 0x11111111;
  }
  struct uroce_send_wr *bad;
  if (wr.wr_id)
    uroce_eng_qp_post_send(e->qp, &wr, &bad);
}

/* RESET (its work flushed away, its completions dropped from the CQs as
 * a driver does), then up again toward its peer, which may still have
 * work for the QP's old incarnation in flight. */
static void reconnect(int side, int i) {
  struct tp_end *e = &w.ep[side][i];
  modify_state(e, UROCE_QPS_RESET);
  uroce_eng_cq_clean(e->scq, uroce_qp_num(e->qp));
  if (e->rcq != e->scq)
    uroce_eng_cq_clean(e->rcq, uroce_qp_num(e->qp));
  if (tp_bring_up(e, &w.ep[!side][i], &w.o) == 0)
    for (uint32_t k = 0; k < 2; k++)
      post_recv(e, k * RECV_LEN);
}

static int setup(uint32_t flags) {
  memset(&w, 0, sizeof(w));
  w.now = 1000000000ull;
  w.next_wr_id = 1;
  struct tp_opts o;
  tp_opts_default(&o);
  o.mtu = UROCE_MTU_256;
  o.memlen = 1 << 14;
  o.max_send_wr = o.max_recv_wr = 64;
  o.cqe = 256;
  o.timeout = 8; /* 1 ms */
  w.o = o;
  for (int s = 0; s < 2; s++) {
    /* Small tables: setting up is most of the cost of one input. */
    struct uroce_eng_cfg cfg = {
        .seed = 1 + s, .flags = flags, .max_qp = 16, .max_mr = 16};
    w.gid[s][10] = w.gid[s][11] = 0xFF;
    w.gid[s][12] = 10;
    w.gid[s][15] = (uint8_t)(1 + s);
    memcpy(cfg.gid, w.gid[s], 16);
    if (uroce_eng_new(&w.eng[s], &cfg))
      return -1;
  }
  for (int i = 0; i < NPAIR; i++) {
    o.type = pairs[i].type;
    o.use_srq = pairs[i].srq;
    for (int s = 0; s < 2; s++)
      if (tp_end_init(&w.ep[s][i], w.eng[s], w.gid[s], &o))
        return -1;
    if (pairs[i].type == UROCE_QPT_UD) {
      for (int s = 0; s < 2; s++) {
        struct uroce_ah_attr aa = {.is_global = 1};
        memcpy(aa.dgid, w.gid[!s], 16);
        if (uroce_eng_ah_new(w.ep[s][i].pd, &aa, &w.ah[s]) ||
            tp_bring_up(&w.ep[s][i], &w.ep[!s][i], &o))
          return -1;
      }
    } else {
      struct tp_opts oa = o;
      if (pairs[i].a_state != UROCE_QPS_SQD)
        oa.stop_state = pairs[i].a_state;
      if ((pairs[i].a_state != UROCE_QPS_RESET &&
           tp_bring_up(&w.ep[END_A][i], &w.ep[END_B][i], &oa)) ||
          tp_bring_up(&w.ep[END_B][i], &w.ep[END_A][i], &o))
        return -1;
    }
    for (int s = 0; s < 2; s++) {
      for (uint32_t k = 0; k < 6; k++)
        post_recv(&w.ep[s][i], k * RECV_LEN);
      for (uint8_t k = 0; k < 7; k++)
        post_send(s, i, (uint8_t)(k | k << 4), 300 + 100 * k);
    }
  }
  for (int i = 0; i < NPAIR; i++)
    for (int s = 0; pairs[i].type != UROCE_QPT_UD && s < 2; s++) {
      struct tp_end *e = &w.ep[s][i];
      if (uroce_eng_mw_alloc(e->pd, UROCE_MW_TYPE_2, &w.mw[s][i]) ||
          uroce_mw_bind(mw_entry(w.mw[s][i]), e->pd, e->qp, e->mr, e->mr->iova,
                        e->mr->length,
                        UROCE_ACCESS_REMOTE_READ | UROCE_ACCESS_REMOTE_WRITE |
                            UROCE_ACCESS_REMOTE_ATOMIC,
                        uroce_mw_rkey(w.mw[s][i]) ^ 1))
        return -1;
    }
  for (int i = 0; i < NPAIR; i++)
    if (pairs[i].a_state == UROCE_QPS_SQD)
      modify_state(&w.ep[END_A][i], UROCE_QPS_SQD);
  return 0;
}

static void teardown(void) {
  for (int s = 0; s < 2; s++) {
    for (int i = 0; i < NPAIR; i++) {
      if (w.mw[s][i])
        uroce_eng_mw_dealloc(w.mw[s][i]);
      w.mw[s][i] = NULL;
      tp_end_free(&w.ep[s][i]);
    }
    if (w.eng[s])
      uroce_eng_del(w.eng[s]);
  }
}

/* Flattens a packet the engine built: BTH.., payload, pad, ICRC. */
static size_t flatten(const struct uroce_tx_pkt *tx, uint8_t *buf, size_t cap) {
  size_t n = uroce_tx_len(tx);
  if (n > cap)
    __builtin_trap(); /* the engine built more than an MTU allows */
  memcpy(buf, tx->hdr, tx->hdr_len);
  size_t off = tx->hdr_len;
  for (int i = 0; i < tx->nseg; i++) {
    if (tx->seg[i].addr)
      memcpy(buf + off, tx->seg[i].addr, tx->seg[i].len);
    else
      memset(buf + off, 0, tx->seg[i].len);
    off += tx->seg[i].len;
  }
  memset(buf + off, 0, n - off); /* pad and ICRC (the caller checks it) */
  return n;
}

static void deliver(int to, const uint8_t *buf, size_t n, uint16_t sport,
                    uint8_t flags) {
  struct uroce_rx_pkt rx;
  memset(&rx, 0, sizeof(rx));
  if (uroce_pkt_parse(buf, n, &rx.pi) != 0)
    return; /* the UDP edge drops what does not parse */
  memcpy(rx.sgid, w.gid[!to], 16);
  memcpy(rx.dgid, w.gid[to], 16);
  rx.sport = sport;
  rx.flags = flags;
  uroce_eng_read_pkt(w.eng[to], &rx, w.now);
}

/* Carries the next packet from side `from` to the other, as the input
 * says: drop it, flip bytes in it, deliver it twice, or trimmed (its
 * payload cut, as a UET switch's full queue leaves it). */
static void carry(struct in *in, int from, bool ctl) {
  struct uroce_tx_pkt tx;
  uint8_t buf[UROCE_TX_HDR_MAX + 4096 + 8];
  int got = ctl ? uroce_eng_write_ctl_pkt(w.eng[from], &tx, w.now)
                : uroce_eng_write_pkt(w.eng[from], &tx, w.now);
  if (!got)
    return;
  size_t n = flatten(&tx, buf, sizeof(buf));
  uint8_t how = u8(in);
  if (how & 0x40)
    return; /* lost */
  if (how & 0x80) {
    for (int k = 0; k < (how & 7) + 1; k++) {
      uint8_t pos = u8(in);
      buf[pos % n] ^= u8(in);
    }
  }
  if ((how & 0x10) && tx.payload_len) {
    memmove(buf + tx.hdr_len, buf + tx.hdr_len + tx.payload_len,
            n - tx.hdr_len - tx.payload_len);
    n -= tx.payload_len;
    deliver(!from, buf, n, tx.sport, UROCE_RX_TRIMMED);
    return;
  }
  deliver(!from, buf, n, tx.sport, 0);
  if (how & 0x20)
    deliver(!from, buf, n, tx.sport, 0);
}

/* A packet of the input's own, fixed up to reach a QP (its number, a PSN
 * near the one expected, and the keys of a real MR) unless told not to. */
static void inject(struct in *in) {
  uint8_t side = u8(in) & 1, sel = u8(in), fix = u8(in), len = u8(in);
  uint8_t buf[UROCE_TX_HDR_MAX + 1024];
  size_t n = 0;
  memset(buf, 0, sizeof(buf));
  while (n < (size_t)len * 4 && in->n)
    buf[n++] = u8(in);
  n = (size_t)len * 4;
  if (n < 12)
    return;
  struct tp_end *e = &w.ep[side][sel % NPAIR];
  if (fix & 1)
    put_be24(buf + 5, uroce_qp_num(e->qp));
  if (fix & 2) {
    bool resp = (buf[0] & 0x1F) >= 0x0D && (buf[0] & 0x1F) <= 0x12;
    uint32_t base = resp ? e->qp->comp.psn : e->qp->resp.epsn;
    put_be24(buf + 9,
             uroce_psn_add(base, (uint32_t)(int8_t)u8(in)) & UROCE_PSN_MASK);
  }
  if (!(fix & 8))
    put_be16(buf + 2, 0xFFFF); /* the default P_Key */
  struct uroce_pkt_info pi;
  if ((fix & 4) && uroce_pkt_parse(buf, n, &pi) == 0) {
    const struct tp_end *t = e;
    uint8_t *reth = (uint8_t *)uroce_pkt_hdr(&pi, UROCE_HDR_RETH);
    uint8_t *atm = (uint8_t *)uroce_pkt_hdr(&pi, UROCE_HDR_ATMETH);
    uint8_t *ieth = (uint8_t *)uroce_pkt_hdr(&pi, UROCE_HDR_IETH);
    uint8_t b = u8(in);
    uint64_t va = t->mr->iova + b * 64u;
    struct uroce_mw *mw = w.mw[side][sel % NPAIR];
    uint32_t rkey = mw && (b & 1) ? uroce_mw_rkey(mw) : t->mr->rkey;
    if (reth) {
      put_be64(reth, va);
      put_be32(reth + 8, rkey);
    } else if (atm) {
      put_be64(atm, va & ~7ull);
      put_be32(atm + 8, rkey);
    }
    if (ieth && mw)
      put_be32(ieth, uroce_mw_rkey(mw));
  }
  deliver(side, buf, n, 0xC000, fix & 16 ? UROCE_RX_TRIMMED : 0);
}

static void found(const char *what, const struct uroce_wc *wc) {
  fprintf(stderr,
          "fuzz_engine: %s: wr_id %" PRIu64 " status %u opcode %u "
          "byte_len %u qp 0x%x\n",
          what, wc->wr_id, wc->status, wc->opcode, wc->byte_len, wc->qp_num);
  __builtin_trap();
}

static void check_cq(struct uroce_cq *cq) {
  struct uroce_wc wc[16];
  int k;
  while ((k = uroce_eng_cq_poll(cq, 16, wc)) > 0) {
    for (int i = 0; i < k; i++) {
      uint64_t id = wc[i].wr_id;
      if (id == 0 || id >= w.next_wr_id)
        found("a completion for a WR never posted", &wc[i]);
      if (w.done[id]++)
        found("a second completion for one WR", &wc[i]);
      /* (A WRITE with immediate reports the WRITE's length instead.) */
      if (wc[i].status == UROCE_WC_SUCCESS && w.is_recv[id] &&
          wc[i].opcode == UROCE_WC_RECV && wc[i].byte_len > w.recv_len[id])
        found("received more than the buffer holds", &wc[i]);
    }
  }
}

static void check_all(void) {
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < NPAIR; i++) {
      check_cq(w.ep[s][i].scq);
      check_cq(w.ep[s][i].rcq);
    }
}

static void step(struct in *in) {
  uint8_t op = u8(in);
  switch (op % 8) {
  case 0:
  case 1:
    carry(in, op & 1, false);
    break;
  case 2:
    carry(in, op >> 3 & 1, true);
    break;
  case 3:
    inject(in);
    break;
  case 4: { /* time passes: up to ~4 s, so every timer can fire */
    w.now += 1ull << (u8(in) % 32);
    for (int s = 0; s < 2; s++)
      uroce_eng_handle_expiry(w.eng[s], w.now);
    break;
  }
  case 5: {
    uint8_t sel = u8(in), k = u8(in);
    int side = sel >> 7;
    if (k & 1)
      post_recv(&w.ep[side][sel % NPAIR], (uint32_t)k * 64);
    else if ((k & 0x7E) == 0x7E)
      post_bad_send(side, sel % NPAIR);
    else
      post_send(side, sel % NPAIR, k >> 1, (uint32_t)u8(in) * 8);
    break;
  }
  case 6: {
    uint8_t sel = u8(in);
    struct tp_end *e = &w.ep[sel >> 7][sel % NPAIR];
    static const int to[4] = {UROCE_QPS_ERR, UROCE_QPS_SQD, UROCE_QPS_RESET,
                              UROCE_QPS_RTS};
    int st = to[sel >> 3 & 3];
    if (st == UROCE_QPS_RESET)
      reconnect(sel >> 7, sel % NPAIR);
    else /* RTS: from SQD or SQE; refused from the others */
      modify_state(e, st);
    break;
  }
  case 7: /* the network delivers everything queued, both ways */
    for (int k = 0; k < 64; k++) {
      struct in none = {0, 0};
      carry(&none, k & 1, false);
    }
    break;
  }
  check_all();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  struct in in = {data, size};
  /* The standard transport, negotiated multipath, or multipath from the
   * first packet. */
  static const uint32_t modes[3] = {UROCE_ENG_STANDARD, 0,
                                    UROCE_ENG_MULTIPATH};
  uint32_t flags = modes[u8(&in) % 3];
  if (setup(flags) == 0) {
    for (int i = 0; i < 2000 && in.n; i++)
      step(&in);
    check_all();
  }
  teardown();
  return 0;
}
