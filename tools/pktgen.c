/* uroce pktgen: writes RoCEv2 packets encoded by uroce's wire layer into a
 * pcap. --demo writes a short scripted RC/UD conversation (with one packet
 * corrupted on purpose); --random writes N random packets of every RC, UC
 * and UD opcode and CNP, and --expect writes what was encoded, field by
 * field, in the JSON schema of `uroce dump --json`, so that other decoders
 * (tshark, scapy) can be checked against uroce's intent. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "tool.h"
#include "uroce/uroce.h"
#include "util/rng.h"
#include "wire/frame.h"
#include "wire/hdr.h"
#include "wire/pcap.h"

#define MAX_PAYLOAD 4096

struct gen {
  struct uroce_pcap *pc;
  FILE *expect;
  uint64_t rng;
  uint64_t ts;
  uint64_t frameno;
  uint8_t buf[UROCE_FRAME_HEADROOM + 128 + MAX_PAYLOAD + 8];
};

static uint64_t rnd(struct gen *g) {
  return splitmix64(&g->rng);
}

static void expect_line(struct gen *g, const struct uroce_frame_params *fp,
                        const struct uroce_hdr_fields *h, uint32_t payload,
                        uint32_t icrc) {
  const struct uroce_opcode_info *op = uroce_opcode(h->opcode);
  char src[64], dst[64];
  FILE *o = g->expect;
  if (!o)
    return;
  uroce_addr_str(fp->ipver, fp->src, src, sizeof(src));
  uroce_addr_str(fp->ipver, fp->dst, dst, sizeof(dst));
  fprintf(o,
          "{\"frame\":%" PRIu64 ",\"ip\":%d,\"src\":\"%s\",\"dst\":\"%s\","
          "\"sport\":%u,\"dport\":%u,\"tclass\":%u,\"ecn\":%u,\"ttl\":%u",
          g->frameno, fp->ipver, src, dst, fp->sport, fp->dport, fp->tclass,
          fp->tclass & 3, fp->ttl);
  if (fp->ipver == 4)
    fprintf(o, ",\"ip_id\":%u", fp->ip_id);
  else
    fprintf(o, ",\"flow_label\":%u", fp->flow_label);
  fprintf(o,
          ",\"opcode\":%u,\"opname\":\"%s\",\"se\":%d,\"mig\":%d,\"pad\":%u,"
          "\"tver\":%u,\"pkey\":%u,\"fecn\":%d,\"becn\":%d,\"resv6\":%u,"
          "\"dqpn\":%u,\"ackreq\":%d,\"resv7\":%u,\"psn\":%u",
          h->opcode, op->name, h->se, h->mig, h->pad, h->tver, h->pkey, h->fecn,
          h->becn, h->resv6, h->dqpn, h->ackreq, h->resv7, h->psn);
#define HAS(x) (op->mask & UROCE_OPM_HDR(UROCE_HDR_##x))
  if (HAS(DETH))
    fprintf(o, ",\"deth\":{\"qkey\":%u,\"sqp\":%u}", h->qkey, h->sqp);
  if (HAS(RETH))
    fprintf(o, ",\"reth\":{\"va\":%" PRIu64 ",\"rkey\":%u,\"dma_len\":%u}",
            h->va, h->rkey, h->dma_len);
  if (HAS(ATMETH))
    fprintf(o,
            ",\"atomiceth\":{\"va\":%" PRIu64
            ",\"rkey\":%u,\"swap_add\":%" PRIu64 ",\"compare\":%" PRIu64 "}",
            h->va, h->rkey, h->swap_add, h->compare);
  if (HAS(AETH))
    fprintf(o, ",\"aeth\":{\"syndrome\":%u,\"msn\":%u}", h->syndrome, h->msn);
  if (HAS(ATMACK))
    fprintf(o, ",\"atomicacketh\":{\"orig\":%" PRIu64 "}", h->orig);
  if (HAS(IMMDT))
    fprintf(o, ",\"immdt\":%u", h->imm);
  if (HAS(IETH))
    fprintf(o, ",\"ieth\":{\"rkey\":%u}", h->inv_rkey);
#undef HAS
  fprintf(o, ",\"payload_len\":%u,\"icrc\":%u,\"icrc_ok\":true}\n", payload,
          icrc);
}

/* Encodes one packet: headers h, payload_len bytes of a pattern, framed by
 * fp; corrupt flips one payload/header bit after the ICRC is computed. */
static int emit(struct gen *g, const struct uroce_frame_params *fp,
                struct uroce_hdr_fields *h, uint32_t payload_len,
                bool corrupt) {
  uint8_t *bth = g->buf + UROCE_FRAME_HEADROOM;
  h->pad = (uint8_t)((4 - (payload_len & 3)) & 3);
  int hl = uroce_hdr_encode(bth, h);
  if (hl < 0)
    return hl;
  for (uint32_t i = 0; i < payload_len; i++)
    bth[hl + i] = (uint8_t)(i * 7 + h->psn);
  memset(bth + hl + payload_len, 0, h->pad);
  size_t len = (size_t)hl + payload_len + h->pad + UROCE_ICRC_LEN;
  int start = uroce_frame_encap(g->buf, UROCE_FRAME_HEADROOM, len, fp);
  if (start < 0)
    return start;
  g->frameno++;
  expect_line(g, fp, h, payload_len, get_le32(bth + len - UROCE_ICRC_LEN));
  if (corrupt)
    bth[len / 2] ^= 0x10;
  size_t flen = (size_t)(bth - g->buf) + len - (size_t)start;
  g->ts += 1000 + rnd(g) % 5000;
  return uroce_pcap_write(g->pc, g->ts, g->buf + start, flen);
}

static const uint8_t random_ops[] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
    0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12, 0x13,
    0x14, 0x16, 0x17, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26,
    0x27, 0x28, 0x29, 0x2A, 0x2B, 0x64, 0x65, 0x81};

static int gen_random(struct gen *g, unsigned count) {
  for (unsigned i = 0; i < count; i++) {
    struct uroce_frame_params fp = {0};
    struct uroce_hdr_fields h = {0};
    uint64_t r = rnd(g);
    fp.ipver = (r & 1) ? 6 : 4;
    if (fp.ipver == 4) {
      uroce_addr_parse("0.0.0.0", fp.src);
      uroce_addr_parse("0.0.0.0", fp.dst);
      put_be32(fp.src + 12, (uint32_t)rnd(g));
      put_be32(fp.dst + 12, (uint32_t)rnd(g));
    } else {
      uint64_t a = rnd(g), b = rnd(g);
      fp.src[0] = 0xFD;
      memcpy(fp.src + 8, &a, 8);
      fp.dst[0] = 0xFD;
      memcpy(fp.dst + 8, &b, 8);
    }
    fp.sport = (uint16_t)(0xC000 | (rnd(g) & 0x3FFF));
    fp.dport = UROCE_UDP_PORT;
    fp.tclass = (uint8_t)rnd(g);
    fp.ttl = (uint8_t)(1 + rnd(g) % 255);
    fp.ip_id = (uint16_t)rnd(g);
    fp.flow_label = (uint32_t)rnd(g) & 0xFFFFF;
    fp.eth = true;
    memcpy(fp.smac, "\x02\x00\x00\x00\x00\x01", 6);
    memcpy(fp.dmac, "\x02\x00\x00\x00\x00\x02", 6);

    h.opcode = random_ops[rnd(g) % sizeof(random_ops)];
    r = rnd(g);
    h.se = r & 1;
    h.mig = (r >> 1) & 1;
    h.fecn = (r >> 2) & 1;
    h.becn = (r >> 3) & 1;
    h.ackreq = (r >> 4) & 1;
    h.pkey = (uint16_t)(r >> 16);
    h.dqpn = (uint32_t)(r >> 32) & 0xFFFFFF;
    h.psn = (uint32_t)rnd(g) & 0xFFFFFF;
    r = rnd(g);
    h.qkey = (uint32_t)r;
    h.sqp = (uint32_t)(r >> 32) & 0xFFFFFF;
    h.va = rnd(g);
    r = rnd(g);
    h.rkey = (uint32_t)r;
    h.dma_len = (uint32_t)(r >> 32);
    h.swap_add = rnd(g);
    h.compare = rnd(g);
    r = rnd(g);
    /* AETH syndromes of every kind: ACK, RNR NAK, NAK (codes 0-4). */
    switch (r % 3) {
    case 0:
      h.syndrome = uroce_aeth_syn(UROCE_AETH_ACK, (uint8_t)(r >> 8));
      break;
    case 1:
      h.syndrome = uroce_aeth_syn(UROCE_AETH_RNR_NAK, (uint8_t)(r >> 8));
      break;
    default:
      h.syndrome = uroce_aeth_syn(UROCE_AETH_NAK, (uint8_t)((r >> 8) % 5));
    }
    h.msn = (uint32_t)(r >> 32) & 0xFFFFFF;
    h.orig = rnd(g);
    h.imm = (uint32_t)rnd(g);
    h.inv_rkey = (uint32_t)rnd(g);
    uint32_t payload = 0;
    if (uroce_opcode(h.opcode)->mask & UROCE_OPM_PAYLOAD) {
      r = rnd(g);
      payload = (r & 7) == 0 ? (uint32_t)(r >> 8) % (MAX_PAYLOAD + 1)
                             : (uint32_t)(r >> 8) % 1100;
    }
    int rv = emit(g, &fp, &h, payload, false);
    if (rv < 0)
      return rv;
  }
  return 0;
}

/* A short conversation between 10.0.0.1 (requester, QP 0x11) and 10.0.0.2
 * (responder, QP 0x22): every kind of RC exchange, a UD send, a CNP, an
 * IPv6 send, and one packet corrupted on the wire. */
static int gen_demo(struct gen *g) {
  struct uroce_frame_params a = {0}, b;
  a.ipver = 4;
  uroce_addr_parse("10.0.0.1", a.src);
  uroce_addr_parse("10.0.0.2", a.dst);
  a.sport = 0xC011;
  a.dport = UROCE_UDP_PORT;
  a.tclass = 2; /* ECT(0) */
  a.eth = true;
  memcpy(a.smac, "\x02\x00\x00\x00\x00\x01", 6);
  memcpy(a.dmac, "\x02\x00\x00\x00\x00\x02", 6);
  b = a;
  memcpy(b.src, a.dst, 16);
  memcpy(b.dst, a.src, 16);
  b.sport = 0xC022;
  memcpy(b.smac, a.dmac, 6);
  memcpy(b.dmac, a.smac, 6);

  struct step {
    bool from_a;
    uint8_t op;
    uint32_t psn, len;
    uint8_t syn;
    bool ackreq, corrupt, ce;
  } steps[] = {
      {1, UROCE_OP_SEND_FIRST, 100, 1024, 0, 0, 0, 0},
      {1, UROCE_OP_SEND_MIDDLE, 101, 1024, 0, 0, 0, 0},
      {1, UROCE_OP_SEND_LAST, 102, 300, 0, 1, 0, 0},
      {0, UROCE_OP_ACK, 102, 0, 0x1F, 0, 0, 0},
      {1, UROCE_OP_WRITE_ONLY, 103, 512, 0, 1, 0, 0},
      {1, UROCE_OP_WRITE_ONLY_IMM, 104, 64, 0, 1, 1, 0}, /* corrupted */
      {0, UROCE_OP_ACK, 103, 0, 0x60, 0, 0, 0},          /* NAK PSN seq error */
      {1, UROCE_OP_WRITE_ONLY_IMM, 104, 64, 0, 1, 0, 1}, /* retransmit, CE */
      {0, UROCE_OP_CNP, 0, 0, 0, 0, 0, 0},
      {0, UROCE_OP_ACK, 104, 0, 0x1F, 0, 0, 0},
      {1, UROCE_OP_READ_REQ, 105, 0, 0, 1, 0, 0},
      {0, UROCE_OP_READ_RESP_FIRST, 105, 1024, 0x1F, 0, 0, 0},
      {0, UROCE_OP_READ_RESP_LAST, 106, 976, 0x1F, 0, 0, 0},
      {1, UROCE_OP_FETCH_ADD, 107, 0, 0, 1, 0, 0},
      {0, UROCE_OP_ATOMIC_ACK, 107, 0, 0x1F, 0, 0, 0},
      {1, UROCE_OP_SEND_ONLY, 108, 32, 0, 1, 0, 0},
      {0, UROCE_OP_ACK, 108, 0, 0x2E, 0, 0, 0}, /* RNR NAK 1.28 ms */
      {1, UROCE_OP_SEND_ONLY, 108, 32, 0, 1, 0, 0},
      {0, UROCE_OP_ACK, 108, 0, 0x1F, 0, 0, 0},
      {1, UROCE_OP_CMP_SWAP, 109, 0, 0, 1, 0, 0},
      {0, UROCE_OP_ACK, 109, 0, 0x62, 0, 0, 0}, /* NAK remote access */
      {1, UROCE_OP_UD_SEND_ONLY, 7, 200, 0, 0, 0, 0},
  };
  uint32_t msn = 0;
  for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
    struct step *s = &steps[i];
    struct uroce_frame_params fp = s->from_a ? a : b;
    struct uroce_hdr_fields h = {0};
    h.opcode = s->op;
    h.pkey = 0xFFFF;
    h.dqpn = s->from_a ? 0x22 : 0x11;
    h.psn = s->psn;
    h.ackreq = s->ackreq;
    h.becn = s->op == UROCE_OP_CNP;
    if (s->ce)
      fp.tclass = 3;
    h.va = 0x7f0000001000ull;
    h.rkey = 0x8a3c51e7;
    h.dma_len = s->op == UROCE_OP_READ_REQ ? 2000 : s->len;
    h.swap_add = 1;
    h.compare = 0;
    h.orig = 41;
    h.imm = 0xC0FFEE;
    h.qkey = 0x11111111;
    h.sqp = 0x33;
    if (s->op == UROCE_OP_UD_SEND_ONLY)
      h.dqpn = 0x44;
    h.syndrome = s->syn;
    if (!s->from_a && uroce_aeth_kind(s->syn) == UROCE_AETH_ACK &&
        s->op != UROCE_OP_READ_RESP_FIRST)
      msn++;
    h.msn = msn;
    int rv = emit(g, &fp, &h, s->len, s->corrupt);
    if (rv < 0)
      return rv;
  }
  /* The same send over IPv6. */
  struct uroce_frame_params v6 = a;
  v6.ipver = 6;
  uroce_addr_parse("fd00::1", v6.src);
  uroce_addr_parse("fd00::2", v6.dst);
  v6.flow_label = 0x12345;
  struct uroce_hdr_fields h = {.opcode = UROCE_OP_SEND_ONLY_IMM,
                               .pkey = 0xFFFF,
                               .dqpn = 0x22,
                               .psn = 110,
                               .ackreq = 1,
                               .imm = 7};
  return emit(g, &v6, &h, 100, false);
}

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: uroce pktgen (--demo | --random N) --out FILE.pcap\n"
      "                    [--seed S] [--expect FILE.jsonl]\n"
      "\n"
      "  --demo        a scripted RC conversation (SEND, WRITE, READ,\n"
      "                atomics, ACK, NAK, RNR NAK, CNP), a UD send, IPv6,\n"
      "                and one packet corrupted on purpose\n"
      "  --random N    N random packets of every RC, UC, UD opcode and CNP\n"
      "  --expect F    also write the encoded fields as JSON lines\n");
}

int cmd_pktgen(int argc, char **argv) {
  static const struct option opts[] = {{"demo", no_argument, 0, 'd'},
                                       {"random", required_argument, 0, 'r'},
                                       {"seed", required_argument, 0, 's'},
                                       {"out", required_argument, 0, 'o'},
                                       {"expect", required_argument, 0, 'e'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  static struct gen g;
  const char *out = 0, *expect = 0;
  bool demo = false;
  long count = -1;
  int c;
  g.rng = 1;
  optind = 1;
  while ((c = getopt_long(argc, argv, "dr:s:o:e:h", opts, 0)) != -1) {
    switch (c) {
    case 'd':
      demo = true;
      break;
    case 'r': {
      uint64_t n;
      if (arg_u64("pktgen", "--random", optarg, 0, 100000000, &n) < 0)
        return 2;
      count = (long)n;
      break;
    }
    case 's':
      if (arg_u64("pktgen", "--seed", optarg, 0, UINT64_MAX, &g.rng) < 0)
        return 2;
      break;
    case 'o':
      out = optarg;
      break;
    case 'e':
      expect = optarg;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      arg_see_help("pktgen");
      return 2;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "uroce pktgen: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  if (demo == (count >= 0)) {
    fprintf(stderr, "uroce pktgen: which packets? (--demo or --random N, "
                    "not both)\n");
    return 2;
  }
  if (!out) {
    fprintf(stderr, "uroce pktgen: where to? (--out FILE.pcap)\n");
    return 2;
  }
  if (arg_out_file("pktgen", "--out", out) < 0)
    return 1;
  char err[256];
  int rv = uroce_pcap_open(&g.pc, out, UROCE_LINK_ETHERNET, err, sizeof(err));
  if (rv < 0) {
    fprintf(stderr, "uroce pktgen: %s\n", err);
    return 1;
  }
  if (expect && !(g.expect = fopen(expect, "w"))) {
    fprintf(stderr, "uroce pktgen: --expect '%s': %s\n", expect,
            strerror(errno));
    uroce_pcap_close(g.pc);
    return 1;
  }
  g.ts = 1700000000ull * 1000000000ull;
  rv = demo ? gen_demo(&g) : gen_random(&g, (unsigned)count);
  if (uroce_pcap_close(g.pc) < 0 && rv == 0)
    rv = -5;
  if (g.expect && fclose(g.expect) != 0 && rv == 0)
    rv = -5;
  if (rv < 0) {
    fprintf(stderr, "uroce pktgen: %s\n", uroce_strerror(rv));
    return 1;
  }
  fprintf(stderr, "uroce pktgen: wrote %" PRIu64 " packets to %s\n", g.frameno,
          out);
  return 0;
}
