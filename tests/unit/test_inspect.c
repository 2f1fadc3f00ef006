/* `uroce dump`'s core: the GSO/GRO splitter against super-frames built the
 * way the kernel would see them (packets framed one by one, each with its
 * own lengths and IPv4 identification, then joined under the first one's
 * headers), display filters, per-QP conversations, VLAN/DSCP and the
 * RoCEv2 port option. */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "uroce/uroce.h"
#include "wire/frame.h"
#include "wire/gso.h"
#include "wire/hdr.h"
#include "wire/inspect.h"

#define SEG_MAX 9000

/* A packet to put in a test frame. */
struct pkt {
  uint8_t opcode;
  uint32_t dqpn, psn;
  uint32_t payload; /* bytes */
  uint8_t syndrome; /* AETH */
  uint32_t dma_len; /* RETH */
};

static int g_ipver = 4;

/* Frames p with IP id ip_id as one RoCEv2 packet (raw IP) into out;
 * returns the frame length. */
static size_t frame_one(const struct pkt *p, uint16_t ip_id, uint8_t tclass,
                        uint16_t dport, uint8_t *out) {
  static uint8_t buf[UROCE_FRAME_HEADROOM + SEG_MAX];
  struct uroce_hdr_fields h = {0};
  h.opcode = p->opcode;
  h.dqpn = p->dqpn;
  h.psn = p->psn;
  h.pkey = 0xFFFF;
  h.syndrome = p->syndrome;
  h.dma_len = p->dma_len;
  h.pad = (uint8_t)((4 - p->payload % 4) % 4);
  uint8_t *bth = buf + UROCE_FRAME_HEADROOM;
  int hl = uroce_hdr_encode(bth, &h);
  CHECK(hl > 0);
  for (uint32_t i = 0; i < p->payload + h.pad; i++)
    bth[hl + i] = (uint8_t)(i * 7 + p->psn);
  size_t len = (size_t)hl + p->payload + h.pad + UROCE_ICRC_LEN;
  struct uroce_frame_params fp = {.ipver = g_ipver,
                                  .sport = 0xC001,
                                  .dport = dport,
                                  .tclass = tclass,
                                  .ip_id = ip_id,
                                  .flow_label = 0x12345};
  uroce_addr_parse(g_ipver == 4 ? "10.0.0.1" : "fd00::1", fp.src);
  uroce_addr_parse(g_ipver == 4 ? "10.0.0.2" : "fd00::2", fp.dst);
  int start = uroce_frame_encap(buf, UROCE_FRAME_HEADROOM, len, &fp);
  CHECK(start >= 0);
  size_t flen = (size_t)(bth - buf) + len - (size_t)start;
  memcpy(out, buf + start, flen);
  return flen;
}

/* What the kernel would have been handed: n packets framed one by one
 * (identification base + i, or base for all if fixed), their RoCEv2 parts
 * joined under the first one's IP and UDP headers with the lengths of the
 * whole. The IPv4 header checksum is left stale: the ICRC masks it. */
static size_t super_frame(const struct pkt *p, unsigned n, uint16_t base,
                          bool fixed, uint8_t *out) {
  static uint8_t one[UROCE_IP6_HLEN + UROCE_UDP_HLEN + SEG_MAX];
  size_t hlen =
      (g_ipver == 4 ? UROCE_IP4_HLEN : UROCE_IP6_HLEN) + UROCE_UDP_HLEN;
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) {
    size_t fl = frame_one(&p[i], (uint16_t)(fixed ? base : base + i), 2,
                          UROCE_UDP_PORT, one);
    if (i == 0)
      memcpy(out, one, hlen);
    memcpy(out + hlen + total, one + hlen, fl - hlen);
    total += fl - hlen;
  }
  uint16_t ulen = (uint16_t)(UROCE_UDP_HLEN + total);
  if (g_ipver == 4) {
    out[2] = (uint8_t)((ulen + 20) >> 8);
    out[3] = (uint8_t)(ulen + 20);
  } else {
    out[4] = (uint8_t)(ulen >> 8);
    out[5] = (uint8_t)ulen;
  }
  out[hlen - 4] = (uint8_t)(ulen >> 8);
  out[hlen - 3] = (uint8_t)ulen;
  return hlen + total;
}

static struct uroce_gso_seg segs[UROCE_GSO_MAX_SEGS];
static uint8_t frame[70000];

/* Write streams as uroce's sender batches them: all segments but the
 * last of one size (the kernel cuts at gso_size), so a longer FIRST (with
 * its RETH) goes with at most one MIDDLE, and MIDDLEs with a shorter LAST.
 * IPv4 and IPv6, at each MTU, the identification wrapping. */
static void test_split_writes(void) {
  static const uint32_t mtus[] = {256, 1024, 4096};
  for (g_ipver = 4; g_ipver <= 6; g_ipver += 2) {
    for (int m = 0; m < 3; m++) {
      for (int first = 0; first < 2; first++) {
        uint32_t mtu = mtus[m];
        unsigned n = first ? 2 : mtu == 4096 ? 15 : 40;
        struct pkt p[64];
        for (unsigned i = 0; i < n; i++)
          p[i] = (struct pkt){first && i == 0 ? UROCE_OP_WRITE_FIRST
                              : i == n - 1    ? UROCE_OP_WRITE_LAST
                                              : UROCE_OP_WRITE_MIDDLE,
                              0x11,
                              100 + i,
                              i == n - 1 && !first ? mtu / 2 + 1 : mtu,
                              0,
                              mtu * n};
        size_t len = super_frame(p, n, 0xFFFE, false, frame);
        struct uroce_frame f;
        CHECK_EQ(uroce_frame_parse(UROCE_LINK_RAW, frame, len, &f), 0);
        struct uroce_gso_split sp = uroce_gso_split(&f, segs);
        CHECK_EQ(sp.nsegs, n);
        /* gso_size is the first packet's: BTH (+ RETH) + MTU + ICRC */
        CHECK_EQ(sp.seg_size, 12 + (first ? 16 : 0) + mtu + 4);
        for (unsigned i = 0; i < sp.nsegs && i < n; i++) {
          CHECK(segs[i].icrc_ok);
          /* the identification wraps: 0xFFFE, 0xFFFF, 0, 1, ... */
          if (g_ipver == 4)
            CHECK_EQ(segs[i].ip_id, (uint16_t)(0xFFFE + i));
          struct uroce_pkt_info pi;
          CHECK_EQ(uroce_pkt_parse(f.bth + segs[i].off, segs[i].len, &pi), 0);
          CHECK_EQ(pi.psn, 100 + i);
        }
      }
    }
  }
  g_ipver = 4;
}

/* Small packets of one size (ACKs, short sends): any gso_size, found by
 * the search, not from an MTU. */
static void test_split_small(void) {
  struct pkt p[128];
  for (unsigned sz = 0; sz <= 64; sz += 13) {
    unsigned n = 100;
    for (unsigned i = 0; i < n; i++)
      p[i] = (struct pkt){UROCE_OP_SEND_ONLY, 0x22 + i % 3, 7 + i, sz, 0, 0};
    size_t len = super_frame(p, n, 0, false, frame);
    struct uroce_frame f;
    CHECK_EQ(uroce_frame_parse(UROCE_LINK_RAW, frame, len, &f), 0);
    struct uroce_gso_split sp = uroce_gso_split(&f, segs);
    CHECK_EQ(sp.nsegs, n);
    unsigned ok = 0;
    for (unsigned i = 0; i < sp.nsegs; i++)
      ok += segs[i].icrc_ok;
    CHECK_EQ(ok, n);
  }
  /* ACKs: 20 bytes each, the smallest real packets */
  for (unsigned i = 0; i < 64; i++)
    p[i] = (struct pkt){UROCE_OP_ACK, 0x33, 50 + i, 0, 0x1F, 0};
  size_t len = super_frame(p, 64, 9, false, frame);
  struct uroce_frame f;
  CHECK_EQ(uroce_frame_parse(UROCE_LINK_RAW, frame, len, &f), 0);
  struct uroce_gso_split sp = uroce_gso_split(&f, segs);
  CHECK_EQ(sp.nsegs, 64);
  CHECK_EQ(sp.seg_size, 20);
  CHECK(segs[63].icrc_ok);
  CHECK_EQ(segs[63].ip_id, 9 + 63);
}

/* GRO keeps one identification for DF packets that all carry the same:
 * the segments are checked with the base too. A corrupted segment is bad
 * alone; a bad single packet is not taken for a super-frame. */
static void test_split_fixed_and_bad(void) {
  struct pkt p[8];
  for (unsigned i = 0; i < 8; i++)
    p[i] = (struct pkt){UROCE_OP_SEND_MIDDLE, 0x44, 1000 + i, 1024, 0, 0};
  size_t len = super_frame(p, 8, 0x1234, true, frame);
  struct uroce_frame f;
  CHECK_EQ(uroce_frame_parse(UROCE_LINK_RAW, frame, len, &f), 0);
  struct uroce_gso_split sp = uroce_gso_split(&f, segs);
  CHECK_EQ(sp.nsegs, 8);
  for (unsigned i = 0; i < sp.nsegs; i++) {
    CHECK(segs[i].icrc_ok);
    CHECK_EQ(segs[i].ip_id, 0x1234);
  }
  /* one payload byte of segment 5 flipped */
  len = super_frame(p, 8, 0, false, frame);
  frame[20 + 8 + 5 * (12 + 1024 + 4) + 100] ^= 1;
  CHECK_EQ(uroce_frame_parse(UROCE_LINK_RAW, frame, len, &f), 0);
  sp = uroce_gso_split(&f, segs);
  CHECK_EQ(sp.nsegs, 8);
  for (unsigned i = 0; i < sp.nsegs; i++)
    CHECK_EQ(segs[i].icrc_ok, i != 5);
  /* the first segment corrupted: the size cannot be verified, so the frame
   * stays whole and is reported bad rather than cut on a guess */
  frame[20 + 8 + 5 * (12 + 1024 + 4) + 100] ^= 1;
  frame[20 + 8 + 12 + 3] ^= 1;
  sp = uroce_gso_split(&f, segs);
  CHECK_EQ(sp.nsegs, 1);
  CHECK(!segs[0].icrc_ok);
  /* one good packet and one bad one alone */
  len = frame_one(&p[0], 0, 0, UROCE_UDP_PORT, frame);
  CHECK_EQ(uroce_frame_parse(UROCE_LINK_RAW, frame, len, &f), 0);
  sp = uroce_gso_split(&f, segs);
  CHECK_EQ(sp.nsegs, 1);
  CHECK_EQ(sp.seg_size, 0);
  CHECK(segs[0].icrc_ok);
  frame[len - 10] ^= 0x80;
  sp = uroce_gso_split(&f, segs);
  CHECK_EQ(sp.nsegs, 1);
  CHECK(!segs[0].icrc_ok);
}

/* ---- the inspector ---- */

static char out[1 << 20];
static size_t outlen;
static unsigned lines;

static void collect(void *arg, const char *line, size_t len) {
  (void)arg;
  CHECK(len > 0 && line[len - 1] == '\n');
  if (outlen + len < sizeof(out)) {
    memcpy(out + outlen, line, len);
    outlen += len;
    out[outlen] = 0;
  }
  lines++;
}

static void reset_out(void) {
  outlen = 0;
  out[0] = 0;
  lines = 0;
}

static void test_inspect_gso_lines(void) {
  struct pkt p[3];
  for (unsigned i = 0; i < 3; i++)
    p[i] = (struct pkt){UROCE_OP_SEND_MIDDLE, 0x55, 9 + i, 512, 0, 0};
  size_t len = super_frame(p, 3, 0, false, frame);
  for (int json = 0; json < 2; json++) {
    struct uroce_inspect_opts o = {.json = json};
    struct uroce_inspect *in = uroce_inspect_new(&o);
    CHECK(in != NULL);
    reset_out();
    uroce_inspect_frame(in, UROCE_LINK_RAW, frame, len, len,
                        1700000000123456789ull, 1, collect, NULL);
    CHECK_EQ(lines, 3);
    const struct uroce_inspect_stats *st = uroce_inspect_stats(in);
    CHECK_EQ(st->frames, 1);
    CHECK_EQ(st->roce, 3);
    CHECK_EQ(st->gso_frames, 1);
    CHECK_EQ(st->gso_pkts, 3);
    CHECK_EQ(st->bad_icrc, 0);
    if (json) {
      CHECK(strstr(out, "\"gso\":{\"seg\":2,\"segs\":3,\"size\":528}"));
      /* nanoseconds survive as text */
      CHECK(strstr(out, "\"time\":\"2023-11-14T22:13:20.123456789Z\""));
      CHECK(strstr(out, "\"ip_id\":2,"));
    } else {
      CHECK(strstr(out, "[GSO 3/3] RC_SEND_MIDDLE qp=0x000055 psn=11"));
      CHECK(!strstr(out, "BAD"));
    }
    reset_out();
    uroce_inspect_summary(in, collect, NULL);
    CHECK(strstr(out, json ? "\"gso_frames\":1,\"gso_packets\":3"
                           : "1 GSO/GRO super-frames split into 3 packets"));
    uroce_inspect_del(in);
  }
}

static void test_vlan_dscp_port(void) {
  struct pkt p = {UROCE_OP_SEND_ONLY, 0x66, 5, 8, 0, 0};
  uint8_t raw[256];
  /* DSCP 26 (AF31), ECN CE; sent to port 4792 */
  size_t n = frame_one(&p, 0, (26 << 2) | 3, 4792, raw);
  /* Ethernet with an 802.1Q tag: PCP 5, VID 100 */
  static const uint8_t eth[18] = {1,  2,  3,  4,    5, 6,    7,   8,    9,
                                  10, 11, 12, 0x81, 0, 0xA0, 100, 0x08, 0x00};
  memcpy(frame, eth, 18);
  memcpy(frame + 18, raw, n);
  struct uroce_frame f;
  CHECK_EQ(uroce_frame_parse(UROCE_LINK_ETHERNET, frame, n + 18, &f),
           UROCE_ERR_PKT_NOT_ROCE);
  CHECK_EQ(uroce_frame_parse_port(UROCE_LINK_ETHERNET, frame, n + 18, 4792, &f),
           0);
  CHECK_EQ(f.vlan_tags, 1);
  CHECK_EQ(f.pcp, 5);
  CHECK_EQ(f.vid, 100);
  for (int json = 0; json < 2; json++) {
    struct uroce_inspect_opts o = {.json = json, .udp_port = 4792};
    struct uroce_inspect *in = uroce_inspect_new(&o);
    reset_out();
    uroce_inspect_frame(in, UROCE_LINK_ETHERNET, frame, n + 18, n + 18, 0, 1,
                        collect, NULL);
    CHECK_EQ(lines, 1);
    CHECK(strstr(out, json ? "\"dscp\":26,\"ecn\":3" : "dscp=26 CE"));
    CHECK(strstr(out, json ? "\"vlan\":100,\"pcp\":5" : "vlan=100 pcp=5"));
    uroce_inspect_del(in);
  }
  /* the default port skips it */
  struct uroce_inspect_opts o = {0};
  struct uroce_inspect *in = uroce_inspect_new(&o);
  reset_out();
  uroce_inspect_frame(in, UROCE_LINK_ETHERNET, frame, n + 18, n + 18, 0, 1,
                      collect, NULL);
  CHECK_EQ(lines, 0);
  CHECK_EQ(uroce_inspect_stats(in)->non_roce, 1);
  /* a frame cut by the snapshot length is counted as such */
  uroce_inspect_frame(in, UROCE_LINK_ETHERNET, frame, 40, n + 18, 0, 2, collect,
                      NULL);
  CHECK_EQ(uroce_inspect_stats(in)->truncated, 1);
  uroce_inspect_del(in);
}

/* Encodes h with n bytes of payload into an IPv4/UDP frame and runs it
 * through the inspector, text or JSON: the line lands in out. */
static void inspect_pkt(const struct uroce_hdr_fields *h,
                        const uint8_t *payload, uint32_t n, bool json) {
  static uint8_t buf[UROCE_FRAME_HEADROOM + 4096];
  uint8_t *bth = buf + UROCE_FRAME_HEADROOM;
  int hl = uroce_hdr_encode(bth, h);
  CHECK(hl > 0);
  memcpy(bth + hl, payload, n);
  size_t len = (size_t)hl + n + UROCE_ICRC_LEN;
  struct uroce_frame_params fp = {.ipver = 4, .sport = 0xC001,
                                  .dport = UROCE_UDP_PORT};
  uroce_addr_parse("10.0.0.1", fp.src);
  uroce_addr_parse("10.0.0.2", fp.dst);
  int start = uroce_frame_encap(buf, UROCE_FRAME_HEADROOM, len, &fp);
  CHECK(start >= 0);
  size_t flen = (size_t)(bth - buf) + len - (size_t)start;
  struct uroce_inspect_opts o = {.json = json};
  struct uroce_inspect *in = uroce_inspect_new(&o);
  reset_out();
  uroce_inspect_frame(in, UROCE_LINK_RAW, buf + start, flen, flen, 0, 1,
                      collect, NULL);
  CHECK_EQ(lines, 1);
  uroce_inspect_del(in);
}

/* A selective ACK whose 255-word bitmap alternates holds 8160 runs: the
 * line lists the first ones, counts the rest, and stays whole (a fuzzer
 * found the line cut short, without its newline). */
static void test_sack_many_runs(void) {
  struct uroce_hdr_fields h = {.pkey = 0xFFFF, .dqpn = 0x77, .psn = 5,
                               .opcode = UROCE_OP_MP_SACK, .syndrome = 0x1F,
                               .sack_words = 255, .sack_base = 0,
                               .resv7 = UROCE_BTH_MP};
  static uint8_t bm[255 * 8];
  memset(bm, 0x55, sizeof(bm));
  for (int json = 0; json < 2; json++) {
    inspect_pkt(&h, bm, sizeof(bm), json);
    CHECK(strstr(out, json ? "\"got\":[[0,0],[2,2],"
                           : "got=+0,+2,+4,"));
    CHECK(strstr(out, json ? "[126,126]],\"runs\":8160}"
                           : ",+126 (8160 runs, first 64 shown)"));
    CHECK(!strstr(out, json ? "[128,128]" : "+128"));
    CHECK(strstr(out, json ? "\"icrc_ok\":true}\n" : "icrc=0x"));
  }
}

/* uroce's multipath packets decode: the MP bit, a WRITE MIDDLE's RETH and
 * MPETH, a selective ACK's bitmap as runs of PSNs and its D-SACK, with a
 * good ICRC. */
static void test_multipath_decode(void) {
  for (int k = 0; k < 2; k++) {
    struct uroce_hdr_fields h = {.pkey = 0xFFFF, .dqpn = 0x77, .psn = 99};
    uint8_t payload[16];
    if (k == 0) {
      h.opcode = UROCE_OP_MP_SACK;
      h.syndrome = 0x1F;
      h.sack_words = 2;
      h.sack_base = 100;
      h.sack_flags = UROCE_SACK_DUP;
      h.sack_dup = 42;
      put_be64(payload, 0xEull);      /* +1..+3 */
      put_be64(payload + 8, 0x40ull); /* +70 */
    } else {
      h.opcode = UROCE_OP_MP_BASE + UROCE_OP_WRITE_MIDDLE;
      h.va = 0x1000;
      h.rkey = 0x1234;
      h.dma_len = 3000;
      h.ssn = 7;
      h.mp_off = 1024;
      memset(payload, 0xAB, sizeof(payload));
    }
    h.resv7 = UROCE_BTH_MP;
    for (int json = 0; json < 2; json++) {
      inspect_pkt(&h, payload, sizeof(payload), json);
      CHECK(!strstr(out, json ? "\"icrc_ok\":false" : "BAD"));
      CHECK(strstr(out, json ? "\"mp\":true" : " MP "));
      if (k == 0)
        CHECK(strstr(out, json ? "\"sacketh\":{\"base\":100,\"words\":2,"
                                 "\"got\":[[1,3],[70,70]],\"dup\":42}"
                               : "MP_SELECTIVE_ACKNOWLEDGE qp=0x000077 psn=99 MP"
                                 " pad=0 pkey=0xffff | AETH ACK credits=invalid"
                                 " msn=0 | SACKETH base=100 words=2 "
                                 "got=+1..+3,+70 dup=42"));
      else
        CHECK(strstr(out, json ? "\"mpeth\":{\"ssn\":7,\"offset\":1024}"
                               : "| RETH va=0x1000 rkey=0x00001234 len=3000 "
                                 "| MPETH ssn=7 offset=1024 | payload 16"));
    }
  }
  /* A trim NACK: the SACKETH's PSN with flag bit 1 is the trimmed one. */
  struct uroce_hdr_fields h = {.pkey = 0xFFFF,
                               .dqpn = 0x77,
                               .psn = 99,
                               .opcode = UROCE_OP_MP_SACK,
                               .syndrome = 0x1F,
                               .sack_base = 100,
                               .sack_flags = UROCE_SACK_TRIM,
                               .sack_dup = 105};
  uint8_t none[1];
  inspect_pkt(&h, none, 0, false);
  CHECK(strstr(out, "SACKETH base=100 words=0 got=- trimmed=105"));
  inspect_pkt(&h, none, 0, true);
  CHECK(strstr(out, "\"trimmed\":105}"));
}

/* XRC: the opcode's name, the XRCETH between the BTH and the RETH. */
static void test_xrc_decode(void) {
  struct uroce_hdr_fields h = {.pkey = 0xFFFF,
                               .dqpn = 0x77,
                               .psn = 5,
                               .opcode =
                                   UROCE_OP_XRC_BASE + UROCE_OP_WRITE_ONLY,
                               .xrc_srqn = 0xABCDE,
                               .va = 0x2000,
                               .rkey = 0x42,
                               .dma_len = 16};
  uint8_t payload[16];
  memset(payload, 0xCD, sizeof(payload));
  for (int json = 0; json < 2; json++) {
    inspect_pkt(&h, payload, sizeof(payload), json);
    CHECK(!strstr(out, json ? "\"icrc_ok\":false" : "BAD"));
    CHECK(strstr(out, json ? "\"xrceth\":{\"srqn\":703710},\"reth\":"
                           : "XRC_RDMA_WRITE_ONLY qp=0x000077 psn=5 pad=0 "
                             "pkey=0xffff | XRCETH srqn=0x0abcde | RETH "
                             "va=0x2000 rkey=0x00000042 len=16 | payload 16"));
  }
}

static void test_filter_parse(void) {
  struct uroce_filter *flt = NULL;
  char err[256];
  static const char *const good[] = {
      "qp=0x11",     "qp=1-2",   "psn=100-200",     "op=RC_SEND_ONLY",
      "op=rc_send*", "op=17",    "src=10.0.0.1",    "host=fd00::1",
      "vlan=4095",   "icrc=bad", " qp=1 , op=CNP ", "QP=3"};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    int rv = uroce_filter_parse(good[i], &flt, err, sizeof(err));
    CHECK_EQ(rv, 0);
    if (rv)
      fprintf(stderr, "  %s: %s\n", good[i], err);
    else
      uroce_filter_del(flt);
  }
  /* each bad filter's message names the bad term */
  static const char *const bad[][2] = {
      {"qp=0x11,psn=200-100", "'psn=200-100'"},
      {"qp=0x1000000", "'qp=0x1000000'"},
      {"op=RC_SEND_NEVER", "'op=RC_SEND_NEVER'"},
      {"port=4791", "'port=4791'"},
      {"qp", "'qp'"},
      {"qp=", "'qp='"},
      {"psn=-5", "'psn=-5'"},
      {"src=10.0.0.300", "'src=10.0.0.300'"},
      {"qp=1,,psn=2", "empty term"},
      {"vlan=4096", "'vlan=4096'"},
      {"qp=0x", "'qp=0x'"},
      {"qp=abc", "'qp=abc'"},
      {"qp=1 2", "'qp=1 2'"},
      {"icrc=maybe", "'icrc=maybe'"},
      {"", "empty term"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = 0;
    flt = NULL;
    CHECK_EQ(uroce_filter_parse(bad[i][0], &flt, err, sizeof(err)),
             UROCE_ERR_INVALID_ARGUMENT);
    CHECK(flt == NULL);
    CHECK(strstr(err, bad[i][1]) != NULL);
    if (!strstr(err, bad[i][1]))
      fprintf(stderr, "  filter '%s': message '%s'\n", bad[i][0], err);
  }
}

/* Feeds a fixed packet list through an inspector with filter expr and
 * returns how many packets it shows. */
static unsigned shown(const char *expr) {
  static const struct pkt p[] = {
      {UROCE_OP_SEND_ONLY, 0x11, 100, 8, 0, 0},
      {UROCE_OP_SEND_ONLY, 0x11, 150, 8, 0, 0},
      {UROCE_OP_SEND_ONLY, 0x12, 150, 8, 0, 0},
      {UROCE_OP_WRITE_ONLY, 0x11, 201, 8, 0, 8},
      {UROCE_OP_ACK, 0x13, 150, 0, 0x1F, 0},
      {UROCE_OP_CNP, 0x11, 0, 16, 0, 0},
  };
  struct uroce_filter *flt = NULL;
  char err[256];
  if (uroce_filter_parse(expr, &flt, err, sizeof(err)) != 0) {
    fprintf(stderr, "  %s: %s\n", expr, err);
    return 999;
  }
  struct uroce_inspect_opts o = {.filter = flt};
  struct uroce_inspect *in = uroce_inspect_new(&o);
  reset_out();
  for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++) {
    size_t n = frame_one(&p[i], 0, 0, UROCE_UDP_PORT, frame);
    if (i == 2)
      frame[n - 1] ^= 1; /* a bad ICRC */
    uroce_inspect_frame(in, UROCE_LINK_RAW, frame, n, n, 0, i + 1, collect,
                        NULL);
  }
  unsigned s = (unsigned)uroce_inspect_stats(in)->shown;
  CHECK_EQ(s, lines);
  CHECK_EQ(uroce_inspect_stats(in)->roce, 6);
  uroce_inspect_del(in);
  uroce_filter_del(flt);
  return s;
}

static void test_filter_match(void) {
  CHECK_EQ(shown("qp=0x11"), 4);
  CHECK_EQ(shown("qp=0x11-0x12"), 5);
  CHECK_EQ(shown("psn=100-200"), 4);
  CHECK_EQ(shown("psn=0100-0200"), 4); /* decimal, not octal */
  CHECK_EQ(shown("qp=0x11,psn=100-200"), 2);
  CHECK_EQ(shown("op=RC_SEND_ONLY"), 3);
  CHECK_EQ(shown("op=rc_send*"), 3);
  CHECK_EQ(shown("op=RC_SEND_ONLY,op=RC_ACKNOWLEDGE"), 4);
  CHECK_EQ(shown("op=0x81"), 1);
  CHECK_EQ(shown("op=RC_SEND_ONLY,qp=0x12,psn=150"), 1);
  CHECK_EQ(shown("icrc=bad"), 1);
  CHECK_EQ(shown("icrc=ok,qp=0x12"), 0);
  CHECK_EQ(shown("src=10.0.0.1"), 6);
  CHECK_EQ(shown("dst=10.0.0.1"), 0);
  CHECK_EQ(shown("host=10.0.0.2"), 6);
  CHECK_EQ(shown("vlan=1"), 0);
}

/* Conversations: PSN gaps, retransmissions, NAK/RNR/CNP counted where they
 * belong. */
static const struct pkt conv_pkts[] = {
    {UROCE_OP_SEND_ONLY, 0x11, 10, 64, 0, 0},
    {UROCE_OP_SEND_ONLY, 0x11, 11, 64, 0, 0},
    {UROCE_OP_SEND_ONLY, 0x11, 12, 64, 0, 0},
    {UROCE_OP_SEND_ONLY, 0x11, 15, 64, 0, 0}, /* 13, 14 missing */
    {UROCE_OP_SEND_ONLY, 0x11, 13, 64, 0, 0}, /* go-back-N resend */
    {UROCE_OP_SEND_ONLY, 0x11, 14, 64, 0, 0}, /* resend */
    {UROCE_OP_SEND_ONLY, 0x11, 15, 64, 0, 0}, /* resend */
    {UROCE_OP_SEND_ONLY, 0x11, 16, 64, 0, 0},
    {UROCE_OP_SEND_ONLY, 0x22, 0xFFFFFF, 64, 0, 0}, /* wraps to 0 */
    {UROCE_OP_SEND_ONLY, 0x22, 0, 64, 0, 0},
    {UROCE_OP_ACK, 0x99, 12, 0, 0x1F, 0},
    {UROCE_OP_ACK, 0x99, 12, 0, 0x60, 0}, /* NAK PSN sequence error */
    {UROCE_OP_ACK, 0x99, 12, 0, 0x2E, 0}, /* RNR NAK */
    {UROCE_OP_ACK, 0x99, 16, 0, 0x1F, 0},
    {UROCE_OP_CNP, 0x99, 0, 16, 0, 0},
};

static struct uroce_inspect *conv_run(bool json) {
  struct uroce_inspect_opts o = {.conv = true, .json = json};
  struct uroce_inspect *in = uroce_inspect_new(&o);
  for (size_t i = 0; i < sizeof(conv_pkts) / sizeof(conv_pkts[0]); i++) {
    size_t n = frame_one(&conv_pkts[i], 0, 0, UROCE_UDP_PORT, frame);
    uroce_inspect_frame(in, UROCE_LINK_RAW, frame, n, n, 1000 * i, i + 1, NULL,
                        NULL);
  }
  return in;
}

/* Conversations: PSN gaps, retransmissions, NAK/RNR/CNP counted where they
 * belong. */
static void test_conv(void) {
  struct uroce_inspect *in = conv_run(false);
  size_t nc;
  const struct uroce_conv *c = uroce_inspect_convs(in, &nc);
  CHECK_EQ(nc, 3);
  if (nc == 3) {
    CHECK_EQ(c[0].dqpn, 0x11);
    CHECK_EQ(c[0].packets, 8);
    CHECK_EQ(c[0].bytes, 8 * (12 + 64 + 4));
    CHECK_EQ(c[0].gaps, 1);
    CHECK_EQ(c[0].gap_psns, 2);
    CHECK_EQ(c[0].retrans, 3);
    CHECK_EQ(c[0].psn_lo, 10);
    CHECK_EQ(c[0].psn_hi, 16);
    CHECK_EQ(c[1].dqpn, 0x22);
    CHECK_EQ(c[1].gaps, 0);
    CHECK_EQ(c[1].retrans, 0);
    CHECK_EQ(c[1].psn_lo, 0xFFFFFF);
    CHECK_EQ(c[1].psn_hi, 0);
    CHECK_EQ(c[2].dqpn, 0x99);
    CHECK_EQ(c[2].acks, 2);
    CHECK_EQ(c[2].naks, 1);
    CHECK_EQ(c[2].rnr_naks, 1);
    CHECK_EQ(c[2].cnps, 1);
    CHECK_EQ(c[2].retrans, 0);
    CHECK_EQ(c[2].last_ts - c[2].first_ts, 4000);
  }
  for (int json = 0; json < 2; json++) {
    if (json) {
      uroce_inspect_del(in);
      in = conv_run(true);
    }
    reset_out();
    uroce_inspect_summary(in, collect, NULL);
    CHECK(strstr(out, json ? "\"dqpn\":17,\"packets\":8"
                           : "10.0.0.1 > 10.0.0.2 qp=0x000011  8 pkts"));
    CHECK(strstr(out, json ? "\"gaps\":1,\"gap_psns\":2,"
                             "\"retransmissions\":3"
                           : "gaps 1 (2 PSNs)  retrans 3"));
    CHECK(strstr(out, json ? "\"acks\":2,\"naks\":1,\"rnr_naks\":1,"
                             "\"cnps\":1"
                           : "acks 2 naks 1 rnr 1 cnp 1"));
  }
  uroce_inspect_del(in);
}

int main(void) {
  T_RUN(test_split_writes);
  T_RUN(test_split_small);
  T_RUN(test_split_fixed_and_bad);
  T_RUN(test_inspect_gso_lines);
  T_RUN(test_vlan_dscp_port);
  T_RUN(test_multipath_decode);
  T_RUN(test_xrc_decode);
  T_RUN(test_sack_many_runs);
  T_RUN(test_filter_parse);
  T_RUN(test_filter_match);
  T_RUN(test_conv);
  return T_DONE();
}
