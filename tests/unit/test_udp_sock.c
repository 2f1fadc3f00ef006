/* The UDP edge: batched send and receive over loopback (with GSO/GRO where
 * the kernel has them), ECN codepoints, the ICRC computed for the source
 * port the kernel uses, and ICRC checking with unknown IPv4 identification
 * (Linux rxe sends random ones). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/udp/sock.h"
#include "t.h"
#include "util/clock.h"
#include "uroce/uroce.h"
#include "wire/frame.h"
#include "wire/hdr.h"

static struct uroce_udp_sock a, b;
static struct uroce_udp_rx rx[4096];

static int recv_n(struct uroce_udp_sock *s, int want) {
  int got = 0;
  for (int tries = 0; tries < 2000 && got < want; tries++) {
    int r = uroce_udp_recv(s, rx + got, (unsigned)(4096 - got));
    if (r < 0)
      return r;
    got += r;
    if (r == 0)
      usleep(500);
  }
  return got;
}

static void build(uint8_t *buf, uint32_t psn, size_t payload) {
  struct uroce_hdr_fields h = {
      .opcode = UROCE_OP_WRITE_MIDDLE, .psn = psn, .dqpn = 0x123};
  int hl = uroce_hdr_encode(buf, &h);
  for (size_t i = 0; i < payload; i++)
    buf[hl + i] = (uint8_t)(psn + i);
}

static size_t pay_of(int i) {
  if (i % 50 == 49)
    return 100;
  if (i % 50 >= 20 && i % 50 < 30)
    return i % 2 ? 1024 : 1040;
  return 1024;
}

/* gather: the pieces go to the kernel where they lie; otherwise each GSO
 * send is staged in one buffer (the default). Both must put the same
 * bytes and ICRCs on the wire. */
static void test_loopback(int ipver, bool gather) {
  uint8_t aa[16], ba[16];
  uroce_addr_parse(ipver == 4 ? "127.0.0.11" : "::1", aa);
  uroce_addr_parse(ipver == 4 ? "127.0.0.12" : "::1", ba);
  /* On ::1 two endpoints need two ports; the default is 4791. */
  CHECK_EQ(uroce_udp_open(&a, aa, ipver == 4 ? 4791 : 47910, 4), 0);
  CHECK_EQ(uroce_udp_open(&b, ba, ipver == 4 ? 4791 : 47911, 0), 0);
  /* A second endpoint on the same address and port is refused. */
  struct uroce_udp_sock dup;
  CHECK_EQ(uroce_udp_open(&dup, aa, a.port, 0), -EADDRINUSE);
  a.tx_gather = gather;

  enum { N = 200, PAY = 1024 };
  static uint8_t bufs[N][32 + PAY];
  static struct uroce_udp_tx tx[N];
  for (int i = 0; i < N; i++) {
    /* Runs of equal sizes (GSO-able), a few odd ones, several sources,
     * and big/small alternating like a 2-packet WRITE's FIRST and LAST
     * (a short packet may end a GSO send). */
    size_t pay = pay_of(i);
    build(bufs[i], (uint32_t)i, pay);
    memset(&tx[i], 0, sizeof(tx[i]));
    memcpy(tx[i].dst, ba, 16);
    tx[i].dport = b.port;
    tx[i].entropy = (uint8_t)((i / 50) % 5);
    if (i % 3 == 0) { /* the payload in three pieces */
      tx[i].nseg = 4;
      tx[i].seg[0] = (struct iovec){bufs[i], 12};
      tx[i].seg[1] = (struct iovec){bufs[i] + 12, 7};
      tx[i].seg[2] = (struct iovec){bufs[i] + 19, pay - 40};
      tx[i].seg[3] = (struct iovec){bufs[i] + 12 + pay - 33, 33};
    } else {
      tx[i].nseg = 2;
      tx[i].seg[0] = (struct iovec){bufs[i], 12};
      tx[i].seg[1] = (struct iovec){bufs[i] + 12, pay};
    }
    tx[i].bth_len = (uint32_t)(12 + pay);
  }
  int sent = 0;
  for (int tries = 0; tries < 100 && sent < N; tries++) {
    int r = uroce_udp_send(&a, tx + sent, N - sent);
    CHECK(r >= 0);
    sent += r;
  }
  CHECK_EQ(sent, N);
  CHECK_EQ(a.st.tx_pkts, N);
  int got = recv_n(&b, N);
  CHECK_EQ(got, N);
  int seen[N] = {0};
  for (int i = 0; i < got; i++) {
    struct uroce_pkt_info pi;
    CHECK_EQ(uroce_pkt_parse(rx[i].data, rx[i].len, &pi), 0);
    uint32_t psn = pi.psn;
    CHECK(psn < N);
    if (psn >= N)
      continue;
    seen[psn]++;
    CHECK_EQ(pi.payload_len, pay_of((int)psn));
    CHECK_EQ(rx[i].len, 12 + pay_of((int)psn) + 4);
    CHECK(!memcmp(rx[i].data, bufs[psn], 12 + pay_of((int)psn)));
    CHECK(uroce_udp_icrc_ok(&b, &rx[i]));
    CHECK_EQ(rx[i].sport, uroce_udp_sport(&a, (psn / 50) % 5));
    CHECK_EQ(rx[i].tclass & 3, 2); /* ECT(0) */
    CHECK(!memcmp(rx[i].src, aa, 16));
  }
  for (int i = 0; i < N; i++)
    CHECK_EQ(seen[i], 1);
  if (a.gso)
    CHECK(a.st.tx_gso_calls > 0);
  /* A corrupted packet fails the ICRC check. */
  if (got > 0) {
    uint8_t copy[32 + PAY + 4];
    memcpy(copy, rx[0].data, rx[0].len);
    copy[40] ^= 1;
    struct uroce_udp_rx bad = rx[0];
    bad.data = copy;
    CHECK(!uroce_udp_icrc_ok(&b, &bad));
  }
  /* Garbage datagrams arrive as they are; parsing rejects them. */
  struct uroce_udp_tx g = {.dport = b.port, .nseg = 1, .bth_len = 3};
  memcpy(g.dst, ba, 16);
  uint8_t junk[3] = {1, 2, 3};
  g.seg[0] = (struct iovec){junk, 3};
  CHECK_EQ(uroce_udp_send(&a, &g, 1), 1);
  CHECK_EQ(recv_n(&b, 1), 1);
  struct uroce_pkt_info pi;
  CHECK(uroce_pkt_parse(rx[0].data, rx[0].len, &pi) < 0);
  CHECK(!uroce_udp_icrc_ok(&b, &rx[0]));
  uroce_udp_close(&a);
  uroce_udp_close(&b);
}

static void test_v4(void) {
  test_loopback(4, false);
}
static void test_v6(void) {
  test_loopback(6, false);
}
static void test_v4_gather(void) {
  test_loopback(4, true);
}
static void test_v6_gather(void) {
  test_loopback(6, true);
}

/* Packets framed with random IPv4 identifications (as rxe sends them) pass
 * the check; the same packets with one payload bit flipped do not. */
static void test_icrc_unknown_id(void) {
  struct uroce_udp_sock s;
  memset(&s, 0, sizeof(s));
  s.ipver = 4;
  uroce_addr_parse("10.9.0.2", s.addr);
  s.port = 4791;
  uint64_t rng = 3;
  uint8_t buf[UROCE_FRAME_HEADROOM + 2100];
  int accepted_bad = 0;
  for (int rep = 0; rep < 300; rep++) {
    struct uroce_frame_params fp = {.ipver = 4, .dport = 4791};
    uroce_addr_parse("10.9.0.1", fp.src);
    memcpy(fp.dst, s.addr, 16);
    fp.sport = (uint16_t)(0xC000 | t_rand(&rng));
    fp.ip_id = (uint16_t)t_rand(&rng);
    uint8_t *bth = buf + UROCE_FRAME_HEADROOM;
    size_t pay = (size_t)(t_rand(&rng) % 512) * 4;
    build(bth, (uint32_t)rep, pay);
    size_t len = 12 + pay + 4;
    CHECK(uroce_frame_encap(buf, UROCE_FRAME_HEADROOM, len, &fp) >= 0);
    struct uroce_udp_rx r = {
        .data = bth, .len = (uint32_t)len, .sport = fp.sport};
    memcpy(r.src, fp.src, 16);
    CHECK(uroce_udp_icrc_ok(&s, &r));
    bth[12 + (pay ? t_rand(&rng) % pay : 0)] ^= 0x04;
    accepted_bad += uroce_udp_icrc_ok(&s, &r);
  }
  CHECK(accepted_bad <= 1); /* expected ~300 / 65536 */
}

/* rxe sends UDP checksum 0 over IPv6 as over IPv4. Linux drops such a
 * datagram on an IPv6 socket that has not said it accepts them; ours must
 * receive it. The sender here is a plain socket told to send checksum 0. */
static void test_v6_zero_checksum(void) {
  struct uroce_udp_sock s;
  uint8_t addr[16];
  uroce_addr_parse("::1", addr);
  CHECK_EQ(uroce_udp_open(&s, addr, 47912, 0), 0);
  int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  int one = 1;
  CHECK_EQ(setsockopt(fd, SOL_UDP, UDP_NO_CHECK6_TX, &one, sizeof(one)), 0);
  struct sockaddr_in6 to = {.sin6_family = AF_INET6,
                            .sin6_port = htons(s.port)};
  memcpy(&to.sin6_addr, addr, 16);
  uint8_t pkt[64];
  build(pkt, 7, 32);
  /* The kernel's arrival stamp (the progress policy's clock): when it was
   * sent, not when it was read 2 ms later. Linux turns arrival stamping
   * on with deferred work after the first socket asks for it; a datagram
   * that comes before is stamped when it is read (1 run in 25 here). So
   * it is tried until one is stamped on arrival, as every one is soon. */
  bool on_arrival = false;
  for (int tries = 0; tries < 50 && !on_arrival; tries++) {
    uint64_t ns0 = real_ns();
    CHECK_EQ(sendto(fd, pkt, 48, 0, (struct sockaddr *)&to, sizeof(to)), 48);
    usleep(2000);
    CHECK_EQ(recv_n(&s, 1), 1);
    uint64_t ns1 = real_ns();
    CHECK_EQ(rx[0].len, 48);
    CHECK(memcmp(rx[0].data, pkt, 48) == 0);
    CHECK(s.rx_stamp >= ns0 && s.rx_stamp <= ns1);
    on_arrival = s.rx_stamp + 1000000 < ns1;
  }
  CHECK(on_arrival);
  close(fd);
  uroce_udp_close(&s);
}

int main(void) {
  T_RUN(test_v4);
  T_RUN(test_v6);
  T_RUN(test_v4_gather);
  T_RUN(test_v6_gather);
  T_RUN(test_icrc_unknown_id);
  T_RUN(test_v6_zero_checksum);
  return T_DONE();
}
