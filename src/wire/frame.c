#include "wire/frame.h"

#include <arpa/inet.h>
#include <isa-l/crc.h>
#include <string.h>
#include <sys/uio.h>

#include "uroce/errors.h"
#include "util/bytes.h"
#include "wire/opcode.h"

#define ETH_P_IPV4 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8
#define IPPROTO_UDP_ 17

static const uint8_t v4mapped_prefix[12] = {0, 0, 0, 0, 0,    0,
                                            0, 0, 0, 0, 0xFF, 0xFF};

/* From this length on uroce_crc32_vpclmul beats ISA-L on Zen 3 both in
 * throughput (independent calls) and in latency (each call continuing the
 * last one's CRC): 1.2x at 64 B, 1.4-1.7x at 128 B, 1.5x at 256 B (where
 * ISA-L's own folding starts), 2x from 4 KiB. At 32-48 B ISA-L is up to 5%
 * ahead in throughput, so short buffers stay with it. Where the CPU has
 * AVX-512, long buffers go back to ISA-L (uroce_crc32_vpclmul_max). */
#define CRC32_VPCLMUL_MIN 64

/* Under this length a table-driven loop (slicing by 4) wins: ISA-L costs
 * about 15 ns a call whatever the length up to 64 B, and every packet has
 * a 12-byte BTH (and often a 0-16 byte extension header) of its own. */
#define CRC32_TABLE_MAX 16

/* crc_tab[k][b]: the CRC register after byte b followed by k zero bytes,
 * built once from the polynomial. */
static uint32_t crc_tab[4][256];

__attribute__((constructor)) static void crc_tab_init(void) {
  for (uint32_t b = 0; b < 256; b++) {
    uint32_t c = b;
    for (int i = 0; i < 8; i++)
      c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    crc_tab[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; b++)
    for (int k = 1; k < 4; k++)
      crc_tab[k][b] =
          (crc_tab[k - 1][b] >> 8) ^ crc_tab[0][crc_tab[k - 1][b] & 0xFF];
}

/* The register c (inverted CRC) after four more bytes, w little-endian. */
static inline uint32_t crc_step4(uint32_t c, uint32_t w) {
  c ^= w;
  return crc_tab[3][c & 0xFF] ^ crc_tab[2][(c >> 8) & 0xFF] ^
         crc_tab[1][(c >> 16) & 0xFF] ^ crc_tab[0][c >> 24];
}

static uint32_t crc32_small(uint32_t crc, const uint8_t *p, size_t len) {
  uint32_t c = ~crc;
  for (; len >= 4; len -= 4, p += 4)
    c = crc_step4(c, get_le32(p));
  while (len--)
    c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xFF];
  return ~c;
}

uint32_t uroce_crc32(uint32_t crc, const void *buf, size_t len) {
  if (len < CRC32_TABLE_MAX)
    return crc32_small(crc, buf, len);
  if (len >= CRC32_VPCLMUL_MIN && len < uroce_crc32_vpclmul_max())
    return uroce_crc32_vpclmul(crc, buf, len);
  /* ISA-L's crc32_gzip_refl is zlib's crc32 (reflected 0xEDB88320, with
   * the pre- and post-inversion), folded with PCLMULQDQ: 128 bits at a
   * time, or 512 with AVX-512 VPCLMULQDQ. */
  return crc32_gzip_refl(crc, (const unsigned char *)buf, len);
}

/* ---- parsing ---- */

static int parse_ip(const uint8_t *p, size_t len, uint16_t port,
                    struct uroce_frame *f) {
  if (len < 1)
    return UROCE_ERR_PKT_TRUNCATED;
  const uint8_t *udp;
  size_t avail; /* bytes from the UDP header on, bounded by the IP length */
  int ver = p[0] >> 4;
  f->l3 = p;
  if (ver == 4) {
    if (len < UROCE_IP4_HLEN)
      return UROCE_ERR_PKT_TRUNCATED;
    size_t ihl = (size_t)(p[0] & 0xF) * 4;
    size_t tot = get_be16(p + 2);
    if (ihl < UROCE_IP4_HLEN || tot < ihl)
      return UROCE_ERR_PKT_BAD_IP;
    if (ihl > len || tot > len)
      return UROCE_ERR_PKT_BAD_LENGTH;
    f->ipver = 4;
    f->l3_hlen = (uint16_t)ihl;
    f->tclass = p[1];
    f->ip_id = get_be16(p + 4);
    f->ttl = p[8];
    memcpy(f->src, v4mapped_prefix, 12);
    memcpy(f->src + 12, p + 12, 4);
    memcpy(f->dst, v4mapped_prefix, 12);
    memcpy(f->dst + 12, p + 16, 4);
    if (p[9] != IPPROTO_UDP_)
      return UROCE_ERR_PKT_NOT_ROCE;
    if (get_be16(p + 6) & 0x3FFF) /* MF flag or a fragment offset */
      return UROCE_ERR_PKT_FRAGMENT;
    udp = p + ihl;
    avail = tot - ihl;
  } else if (ver == 6) {
    if (len < UROCE_IP6_HLEN)
      return UROCE_ERR_PKT_TRUNCATED;
    size_t plen = get_be16(p + 4);
    if (UROCE_IP6_HLEN + plen > len)
      return UROCE_ERR_PKT_BAD_LENGTH;
    f->ipver = 6;
    f->l3_hlen = UROCE_IP6_HLEN;
    f->tclass = (uint8_t)(((p[0] & 0xF) << 4) | (p[1] >> 4));
    f->flow_label = ((uint32_t)(p[1] & 0xF) << 16) | get_be16(p + 2);
    f->ttl = p[7];
    memcpy(f->src, p + 8, 16);
    memcpy(f->dst, p + 24, 16);
    /* Extension headers are not followed: RoCEv2 puts UDP right after. */
    if (p[6] != IPPROTO_UDP_)
      return UROCE_ERR_PKT_NOT_ROCE;
    udp = p + UROCE_IP6_HLEN;
    avail = plen;
  } else {
    return UROCE_ERR_PKT_NOT_ROCE;
  }
  if (avail < UROCE_UDP_HLEN)
    return UROCE_ERR_PKT_BAD_LENGTH;
  f->sport = get_be16(udp);
  f->dport = get_be16(udp + 2);
  size_t ulen = get_be16(udp + 4);
  if (f->dport != port)
    return UROCE_ERR_PKT_NOT_ROCE;
  if (ulen < UROCE_UDP_HLEN || ulen > avail)
    return UROCE_ERR_PKT_BAD_LENGTH;
  f->bth = udp + UROCE_UDP_HLEN;
  f->bth_len = (uint32_t)(ulen - UROCE_UDP_HLEN);
  return 0;
}

int uroce_frame_parse(int link, const uint8_t *p, size_t len,
                      struct uroce_frame *f) {
  return uroce_frame_parse_port(link, p, len, UROCE_UDP_PORT, f);
}

int uroce_frame_parse_port(int link, const uint8_t *p, size_t len,
                           uint16_t port, struct uroce_frame *f) {
  size_t off;
  uint16_t type;
  memset(f, 0, sizeof(*f));
  switch (link) {
  case UROCE_LINK_RAW:
  case UROCE_LINK_IPV4:
  case UROCE_LINK_IPV6:
    return parse_ip(p, len, port, f);
  case UROCE_LINK_ETHERNET:
    if (len < UROCE_ETH_HLEN)
      return UROCE_ERR_PKT_TRUNCATED;
    off = 12;
    type = get_be16(p + off);
    /* Up to two VLAN tags (802.1Q, or QinQ). */
    for (int tags = 0;
         tags < 2 && (type == ETH_P_8021Q || type == ETH_P_8021AD); tags++) {
      off += 4;
      if (len < off + 2)
        return UROCE_ERR_PKT_TRUNCATED;
      if (tags == 0) { /* the outer tag: what the first switch acts on */
        f->pcp = p[off - 2] >> 5;
        f->vid = get_be16(p + off - 2) & 0x0FFF;
      }
      f->vlan_tags = (uint8_t)(tags + 1);
      type = get_be16(p + off);
    }
    off += 2;
    break;
  case UROCE_LINK_LINUX_SLL: /* 16-byte cooked header, protocol at 14 */
    if (len < 16)
      return UROCE_ERR_PKT_TRUNCATED;
    type = get_be16(p + 14);
    off = 16;
    break;
  case UROCE_LINK_LINUX_SLL2: /* 20-byte cooked header, protocol at 0 */
    if (len < 20)
      return UROCE_ERR_PKT_TRUNCATED;
    type = get_be16(p);
    off = 20;
    break;
  default:
    return UROCE_ERR_INVALID_ARGUMENT;
  }
  if (type != ETH_P_IPV4 && type != ETH_P_IPV6)
    return UROCE_ERR_PKT_NOT_ROCE;
  return parse_ip(p + off, len - off, port, f);
}

/* ---- ICRC ---- */

/* CRC state after the masked 8 x 0xFF, IP header and UDP header. */
static uint32_t icrc_prefix(const uint8_t *ip, size_t iphlen,
                            const uint8_t *udp) {
  uint8_t buf[8 + 60 + UROCE_UDP_HLEN];
  size_t n = 0;
  memset(buf, 0xFF, 8);
  n = 8;
  memcpy(buf + n, ip, iphlen);
  if ((ip[0] >> 4) == 4) {
    buf[n + 1] = 0xFF;                /* TOS */
    buf[n + 8] = 0xFF;                /* TTL */
    buf[n + 10] = buf[n + 11] = 0xFF; /* header checksum */
  } else {
    buf[n + 0] |= 0x0F; /* traffic class, high nibble */
    buf[n + 1] = buf[n + 2] = buf[n + 3] = 0xFF; /* tclass low + flow label */
    buf[n + 7] = 0xFF;                           /* hop limit */
  }
  n += iphlen;
  memcpy(buf + n, udp, UROCE_UDP_HLEN);
  buf[n + 6] = buf[n + 7] = 0xFF; /* UDP checksum */
  n += UROCE_UDP_HLEN;
  return uroce_crc32(0, buf, n);
}

/* Continues crc over the first bth_len bytes from the BTH on, with the
 * BTH's FECN, BECN and resv6 byte masked. */
static uint32_t icrc_bth(uint32_t crc, const uint8_t *bth, size_t bth_len) {
  /* The BTH in three little-endian words, the mask applied in a register:
   * a masked copy on the stack read back at once would stall the load on
   * the two stores it straddles (no store-to-load forwarding). */
  uint32_t c = ~crc;
  for (int k = 0; k < 3; k++) {
    uint32_t w = get_le32(bth + 4 * k);
    if (k == 1)
      w |= 0xFF; /* byte 4: FECN, BECN, resv6 */
    c = crc_step4(c, w);
  }
  return uroce_crc32(~c, bth + UROCE_BTH_LEN, bth_len - UROCE_BTH_LEN);
}

uint32_t uroce_icrc_hdr(const uint8_t *ip, size_t iphlen, const uint8_t *udp) {
  if (iphlen > 60)
    return 0;
  return icrc_prefix(ip, iphlen, udp);
}

uint32_t uroce_icrc(const uint8_t *ip, size_t iphlen, const uint8_t *udp,
                    const uint8_t *bth, size_t bth_len) {
  /* The masked prefix: 8 x 0xFF, IP header, UDP header, first 12 bytes of
   * the BTH; then the rest as it is. */
  if (iphlen > 60 || bth_len < UROCE_BTH_LEN)
    return 0;
  return icrc_bth(icrc_prefix(ip, iphlen, udp), bth, bth_len);
}

/* Writes the IP and UDP headers the kernel would put in front of bth_len
 * bytes (plus the ICRC), with the masked fields left zero. Returns the IP
 * header length. */
static size_t synth_hdrs(uint8_t *h, int ipver, const uint8_t src[16],
                         const uint8_t dst[16], uint16_t sport, uint16_t dport,
                         uint16_t ip_id, size_t bth_len) {
  size_t iphlen = ipver == 4 ? UROCE_IP4_HLEN : UROCE_IP6_HLEN;
  uint16_t ulen = (uint16_t)(UROCE_UDP_HLEN + bth_len + UROCE_ICRC_LEN);
  memset(h, 0, iphlen + UROCE_UDP_HLEN);
  if (ipver == 4) {
    h[0] = 0x45;
    put_be16(h + 2, (uint16_t)(iphlen + ulen));
    put_be16(h + 4, ip_id);
    put_be16(h + 6, 0x4000);
    h[9] = IPPROTO_UDP_;
    memcpy(h + 12, src + 12, 4);
    memcpy(h + 16, dst + 12, 4);
  } else {
    h[0] = 0x60;
    put_be16(h + 4, ulen);
    h[6] = IPPROTO_UDP_;
    memcpy(h + 8, src, 16);
    memcpy(h + 24, dst, 16);
  }
  uint8_t *u = h + iphlen;
  put_be16(u, sport);
  put_be16(u + 2, dport);
  put_be16(u + 4, ulen);
  return iphlen;
}

uint32_t uroce_icrc_udp_prefix(int ipver, const uint8_t src[16],
                               const uint8_t dst[16], uint16_t sport,
                               uint16_t dport, uint16_t ip_id, size_t bth_len) {
  uint8_t h[UROCE_IP6_HLEN + UROCE_UDP_HLEN];
  size_t iphlen = synth_hdrs(h, ipver, src, dst, sport, dport, ip_id, bth_len);
  return icrc_prefix(h, iphlen, h + iphlen);
}

uint32_t uroce_icrc_udp_rest(uint32_t prefix, const struct iovec *iov,
                             int iovcnt, size_t bth_len) {
  if (iovcnt < 1 || iov[0].iov_len < UROCE_BTH_LEN || bth_len < UROCE_BTH_LEN)
    return 0;
  size_t first = iov[0].iov_len < bth_len ? iov[0].iov_len : bth_len;
  /* the first segment holds the BTH; the rest continue it */
  uint32_t crc = icrc_bth(prefix, iov[0].iov_base, first);
  size_t left = bth_len - first;
  for (int i = 1; i < iovcnt && left; i++) {
    size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;
    crc = uroce_crc32(crc, iov[i].iov_base, n);
    left -= n;
  }
  return crc;
}

uint32_t uroce_icrc_udp_rest_copy(uint32_t prefix, const struct iovec *iov,
                                  int iovcnt, size_t bth_len, uint8_t *dst) {
  size_t o = 0;
  uint32_t crc = 0;
  bool ok = iovcnt >= 1 && iov[0].iov_len >= UROCE_BTH_LEN &&
            bth_len >= UROCE_BTH_LEN;
  for (int i = 0; i < iovcnt && o < bth_len; i++) {
    size_t n = iov[i].iov_len < bth_len - o ? iov[i].iov_len : bth_len - o;
    if (i == 0) {
      /* the headers: short, copied and taken in with the BTH masked */
      memcpy(dst, iov[0].iov_base, n);
      if (ok)
        crc = icrc_bth(prefix, dst, n);
    } else if (ok) {
      crc = uroce_crc32_copy(crc, dst + o, iov[i].iov_base, n);
    } else {
      memcpy(dst + o, iov[i].iov_base, n);
    }
    o += n;
  }
  if (o < bth_len) { /* pieces short of bth_len: zeros, and their CRC */
    memset(dst + o, 0, bth_len - o);
    if (ok)
      crc = uroce_crc32(crc, dst + o, bth_len - o);
  }
  return crc;
}

uint32_t uroce_icrc_udp(int ipver, const uint8_t src[16], const uint8_t dst[16],
                        uint16_t sport, uint16_t dport, uint16_t ip_id,
                        const struct iovec *iov, int iovcnt, size_t bth_len) {
  if (iovcnt < 1 || iov[0].iov_len < UROCE_BTH_LEN || bth_len < UROCE_BTH_LEN)
    return 0;
  return uroce_icrc_udp_rest(
      uroce_icrc_udp_prefix(ipver, src, dst, sport, dport, ip_id, bth_len), iov,
      iovcnt, bth_len);
}

uint32_t uroce_frame_icrc(const struct uroce_frame *f) {
  if (f->bth_len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
    return 0;
  return uroce_icrc(f->l3, f->l3_hlen, f->l3 + f->l3_hlen, f->bth,
                    f->bth_len - UROCE_ICRC_LEN);
}

uint32_t uroce_frame_icrc_carried(const struct uroce_frame *f) {
  if (f->bth_len < UROCE_ICRC_LEN)
    return 0;
  return get_le32(f->bth + f->bth_len - UROCE_ICRC_LEN);
}

/* ---- building ---- */

static uint16_t csum_fold(uint32_t sum) {
  while (sum >> 16)
    sum = (sum & 0xFFFF) + (sum >> 16);
  return (uint16_t)~sum;
}

static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t len) {
  for (size_t i = 0; i + 1 < len; i += 2)
    sum += get_be16(p + i);
  if (len & 1)
    sum += (uint32_t)p[len - 1] << 8;
  return sum;
}

int uroce_frame_encap(uint8_t *buf, size_t headroom, size_t len,
                      const struct uroce_frame_params *fp) {
  size_t iphlen;
  if (fp->ipver == 4)
    iphlen = UROCE_IP4_HLEN;
  else if (fp->ipver == 6)
    iphlen = UROCE_IP6_HLEN;
  else
    return UROCE_ERR_INVALID_ARGUMENT;
  size_t need = iphlen + UROCE_UDP_HLEN + (fp->eth ? UROCE_ETH_HLEN : 0);
  if (headroom < need)
    return UROCE_ERR_NOBUF;
  if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN ||
      len + UROCE_UDP_HLEN + (fp->ipver == 4 ? iphlen : 0) > 0xFFFF)
    return UROCE_ERR_INVALID_ARGUMENT;

  uint8_t *bth = buf + headroom;
  uint8_t *udp = bth - UROCE_UDP_HLEN;
  uint8_t *ip = udp - iphlen;
  uint16_t ulen = (uint16_t)(len + UROCE_UDP_HLEN);
  uint8_t ttl = fp->ttl ? fp->ttl : 64;

  put_be16(udp, fp->sport);
  put_be16(udp + 2, fp->dport);
  put_be16(udp + 4, ulen);
  put_be16(udp + 6, 0);
  if (fp->ipver == 4) {
    ip[0] = 0x45;
    ip[1] = fp->tclass;
    put_be16(ip + 2, (uint16_t)(iphlen + ulen));
    put_be16(ip + 4, fp->ip_id);
    put_be16(ip + 6, 0x4000); /* DF: RoCEv2 is never fragmented */
    ip[8] = ttl;
    ip[9] = IPPROTO_UDP_;
    put_be16(ip + 10, 0);
    memcpy(ip + 12, fp->src + 12, 4);
    memcpy(ip + 16, fp->dst + 12, 4);
    put_be16(ip + 10, csum_fold(csum_add(0, ip, UROCE_IP4_HLEN)));
  } else {
    uint32_t w =
        (6u << 28) | ((uint32_t)fp->tclass << 20) | (fp->flow_label & 0xFFFFF);
    put_be32(ip, w);
    put_be16(ip + 4, ulen);
    ip[6] = IPPROTO_UDP_;
    ip[7] = ttl;
    memcpy(ip + 8, fp->src, 16);
    memcpy(ip + 24, fp->dst, 16);
  }
  /* The ICRC covers the UDP checksum as ones, so it can go in first. */
  put_le32(bth + len - UROCE_ICRC_LEN,
           uroce_icrc(ip, iphlen, udp, bth, len - UROCE_ICRC_LEN));
  if (fp->ipver == 6) {
    /* IPv6 requires a UDP checksum: pseudo-header + UDP header + data. */
    uint8_t ph[40];
    memcpy(ph, fp->src, 16);
    memcpy(ph + 16, fp->dst, 16);
    put_be32(ph + 32, ulen);
    put_be32(ph + 36, IPPROTO_UDP_);
    uint32_t sum = csum_add(0, ph, sizeof(ph));
    sum = csum_add(sum, udp, ulen);
    uint16_t c = csum_fold(sum);
    put_be16(udp + 6, c ? c : 0xFFFF);
  }
  uint8_t *start = ip;
  if (fp->eth) {
    start -= UROCE_ETH_HLEN;
    memcpy(start, fp->dmac, 6);
    memcpy(start + 6, fp->smac, 6);
    put_be16(start + 12, fp->ipver == 4 ? ETH_P_IPV4 : ETH_P_IPV6);
  }
  return (int)(start - buf);
}

/* ---- addresses ---- */

void uroce_addr_str(int ipver, const uint8_t addr[16], char *out,
                    size_t outlen) {
  if (ipver == 4 || (ipver == 0 && memcmp(addr, v4mapped_prefix, 12) == 0))
    inet_ntop(AF_INET, addr + 12, out, (socklen_t)outlen);
  else
    inet_ntop(AF_INET6, addr, out, (socklen_t)outlen);
}

int uroce_addr_parse(const char *s, uint8_t addr[16]) {
  if (inet_pton(AF_INET, s, addr + 12) == 1) {
    memcpy(addr, v4mapped_prefix, 12);
    return 4;
  }
  if (inet_pton(AF_INET6, s, addr) == 1)
    return 6;
  return UROCE_ERR_INVALID_ARGUMENT;
}
