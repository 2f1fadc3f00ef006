/* IPv4/IPv6 + UDP framing (and Ethernet, for captures) around RoCEv2
 * packets, and the invariant CRC that covers them.
 *
 * Packets are built back to front in a buffer with headroom, lwIP-style:
 * the transport writes BTH..payload..ICRC slot at buf + headroom, and
 * uroce_frame_encap() prepends UDP, IP and optionally Ethernet in place,
 * then fills the ICRC. */
#ifndef UROCE_WIRE_FRAME_H
#define UROCE_WIRE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UROCE_ETH_HLEN 14
#define UROCE_IP4_HLEN 20
#define UROCE_IP6_HLEN 40
#define UROCE_UDP_HLEN 8
/* Headroom that always suffices for Ethernet + IPv6 + UDP. */
#define UROCE_FRAME_HEADROOM (UROCE_ETH_HLEN + UROCE_IP6_HLEN + UROCE_UDP_HLEN)

/* Link types of captured frames, as libpcap's DLT_* values on Linux. */
enum uroce_link {
  UROCE_LINK_ETHERNET = 1, /* DLT_EN10MB */
  UROCE_LINK_RAW = 12,     /* DLT_RAW: starts at the IP header */
  UROCE_LINK_LINUX_SLL = 113,
  UROCE_LINK_IPV4 = 228,
  UROCE_LINK_IPV6 = 229,
  UROCE_LINK_LINUX_SLL2 = 276,
};

/* Addresses are always 16 bytes: IPv4 as the IPv4-mapped IPv6 address
 * ::ffff:a.b.c.d, which is also the RoCEv2 GID of an IPv4 endpoint. */
struct uroce_frame {
  int ipver;         /* 4 or 6 */
  const uint8_t *l3; /* IP header */
  uint16_t l3_hlen;  /* IP header length (IPv4 options included) */
  uint8_t src[16], dst[16];
  uint8_t tclass;      /* IPv4 TOS / IPv6 traffic class; ECN = & 3 */
  uint8_t ttl;         /* TTL / hop limit */
  uint32_t flow_label; /* IPv6 only */
  uint16_t ip_id;      /* IPv4 only */
  uint16_t sport, dport;
  const uint8_t *bth; /* UDP payload: BTH .. ICRC */
  uint32_t bth_len;
  /* The outer 802.1Q/802.1ad tag of an Ethernet frame, if vlan_tags. */
  uint8_t vlan_tags; /* 0, 1 or 2 */
  uint8_t pcp;       /* priority code point, 0..7 */
  uint16_t vid;      /* VLAN identifier, 0..4095 */
};

/* What to write around a packet. */
struct uroce_frame_params {
  int ipver;                /* 4 or 6 */
  uint8_t src[16], dst[16]; /* IPv4 as ::ffff:a.b.c.d */
  uint16_t sport, dport;    /* dport is normally UROCE_UDP_PORT */
  uint8_t tclass;           /* ECN bits included */
  uint8_t ttl;              /* 0 means 64 */
  uint16_t ip_id;
  uint32_t flow_label;
  bool eth; /* also prepend an Ethernet header */
  uint8_t smac[6], dmac[6];
};

/* Parses a frame of the given link type down to the UDP payload.
 * Returns 0 for a RoCEv2 packet (UDP to port 4791), or
 *   UROCE_ERR_PKT_NOT_ROCE   another protocol (not IP, not UDP, other port);
 *   UROCE_ERR_PKT_BAD_IP     malformed IP header;
 *   UROCE_ERR_PKT_BAD_LENGTH IP or UDP length larger than the data, or UDP
 *                            length smaller than its header;
 *   UROCE_ERR_PKT_FRAGMENT   an IPv4 fragment;
 *   UROCE_ERR_PKT_TRUNCATED  too short for the link or IP header;
 *   UROCE_ERR_INVALID_ARGUMENT  unknown link type.
 * Data past the IP total length (Ethernet padding) is ignored. */
int uroce_frame_parse(int link, const uint8_t *p, size_t len,
                      struct uroce_frame *f);
/* uroce_frame_parse with another UDP destination port taken as RoCEv2 (a
 * stack run with --udp-port). */
int uroce_frame_parse_port(int link, const uint8_t *p, size_t len,
                           uint16_t port, struct uroce_frame *f);

/* Prepends UDP + IP (+ Ethernet) to the len bytes at buf + headroom, which
 * hold BTH .. payload .. pad .. 4-byte ICRC slot, and computes the ICRC
 * into that slot (IPv4 header checksum and IPv6 UDP checksum too).
 * Returns the offset in buf where the frame now starts, or
 * UROCE_ERR_NOBUF if the headroom is too small, UROCE_ERR_INVALID_ARGUMENT
 * for a bad ipver or a length that does not fit in IP. */
int uroce_frame_encap(uint8_t *buf, size_t headroom, size_t len,
                      const struct uroce_frame_params *fp);

/* ---- ICRC ---- */

/* ICRC of a RoCEv2 packet: CRC-32 over 8 bytes of 0xFF, the IP and UDP
 * headers with the variant fields masked to ones (IPv4 TOS, TTL, checksum;
 * IPv6 traffic class, flow label, hop limit; UDP checksum), the BTH with
 * its FECN/BECN/resv6 byte masked, and the rest of the packet up to (not
 * including) the ICRC. ip points at an IP header of iphlen bytes followed
 * (not necessarily contiguously) by the 8-byte UDP header udp; bth_len is
 * the length from the BTH up to the ICRC. The value is what the wire
 * carries, read as a little-endian 32-bit word. */
uint32_t uroce_icrc(const uint8_t *ip, size_t iphlen, const uint8_t *udp,
                    const uint8_t *bth, size_t bth_len);

/* The first part of uroce_icrc: the CRC state after the 8 bytes of 0xFF
 * and the masked IP and UDP headers (iphlen at most 60). */
uint32_t uroce_icrc_hdr(const uint8_t *ip, size_t iphlen, const uint8_t *udp);

/* ICRC of a packet sent or received through a UDP socket, where the kernel
 * writes the IP and UDP headers: they are synthesized from the addresses,
 * ports and IPv4 identification (the kernel uses 0 for unconnected DF
 * sockets). iov holds BTH .. payload .. pad (bth_len bytes in all, no
 * ICRC); the first segment must hold at least the 12-byte BTH. */
struct iovec;
uint32_t uroce_icrc_udp(int ipver, const uint8_t src[16], const uint8_t dst[16],
                        uint16_t sport, uint16_t dport, uint16_t ip_id,
                        const struct iovec *iov, int iovcnt, size_t bth_len);

/* uroce_icrc_udp in two parts, so that a sender can keep the first: the
 * CRC state after the masked prefix (8 x 0xFF, IP and UDP headers), which
 * depends only on the arguments given, and its continuation over the
 * masked BTH and the rest. rest(prefix(...), iov, ...) == icrc_udp(...). */
uint32_t uroce_icrc_udp_prefix(int ipver, const uint8_t src[16],
                               const uint8_t dst[16], uint16_t sport,
                               uint16_t dport, uint16_t ip_id, size_t bth_len);
uint32_t uroce_icrc_udp_rest(uint32_t prefix, const struct iovec *iov,
                             int iovcnt, size_t bth_len);
/* uroce_icrc_udp_rest that also copies the bth_len bytes of the pieces to
 * dst (zeros where the pieces end short), reading them once. */
uint32_t uroce_icrc_udp_rest_copy(uint32_t prefix, const struct iovec *iov,
                                  int iovcnt, size_t bth_len, uint8_t *dst);

/* ICRC of a parsed frame, and whether the one it carries matches.
 * f->bth_len must be at least 16 (BTH + ICRC). */
uint32_t uroce_frame_icrc(const struct uroce_frame *f);
uint32_t uroce_frame_icrc_carried(const struct uroce_frame *f);

/* Continues a CRC-32 (zlib convention) over more bytes; used for packets
 * whose payload is scattered. */
uint32_t uroce_crc32(uint32_t crc, const void *buf, size_t len);

/* Copies len bytes from src to dst (not overlapping) and returns
 * uroce_crc32(crc, src, len): in one pass where the CPU has AVX-512
 * VPCLMULQDQ, else memcpy and then uroce_crc32 on the copy. */
uint32_t uroce_crc32_copy(uint32_t crc, void *dst, const void *src, size_t len);
/* Whether uroce_crc32_copy reads its source once on this CPU. */
int uroce_crc32_copy_one_pass(void);

/* uroce_crc32 folded 256 bits at a time with VPCLMULQDQ on AVX2
 * (crc32_vpclmul.c); same result as crc32_gzip_refl for every input.
 * uroce_crc32 uses it when uroce_crc32_vpclmul_supported() and the buffer
 * is long enough for it to win; it is exposed for the tests and the
 * benchmark, and must not be called where the CPU lacks the feature. */
uint32_t uroce_crc32_vpclmul(uint32_t crc, const void *buf, size_t len);
int uroce_crc32_vpclmul_supported(void);
/* The length from which uroce_crc32 leaves the buffer to ISA-L again
 * (ISA-L's AVX-512 fold wins on long buffers where the CPU has it);
 * SIZE_MAX where ISA-L has no wide fold, 0 where the CPU lacks VPCLMULQDQ. */
size_t uroce_crc32_vpclmul_max(void);
/* Its constants, for the test that rederives them from the polynomial P.
 * kfold(n) is x^n mod P bit-reflected into bits 1..32 (bit j holds
 * x^(32-j)); fold_k[d] = {kfold(128 d + 32), kfold(128 d - 32)} for d >= 1
 * (they fold a 16-byte block 16 d bytes on), fold_k[0] = {kfold(128),
 * kfold(64)}. mu = floor(x^64 / P) and poly = P,
 * reflected over 33 bits (bit j holds x^(32-j)). */
#define UROCE_CRC32_FOLD_MAX 28
extern const uint64_t uroce_crc32_fold_k[UROCE_CRC32_FOLD_MAX + 1][2];
extern const uint64_t uroce_crc32_barrett_mu, uroce_crc32_barrett_poly;

/* Text form of an address: for ipver 4, the dotted IPv4 address held in
 * the last 4 bytes; for 6, the IPv6 text (an IPv6 packet's ::ffff:a.b.c.d
 * address stays IPv6); for 0, IPv4 if the address is IPv4-mapped. */
void uroce_addr_str(int ipver, const uint8_t addr[16], char *out,
                    size_t outlen);
/* Parses "10.0.0.1" or an IPv6 address into the 16-byte form; returns 4 or
 * 6, or UROCE_ERR_INVALID_ARGUMENT. */
int uroce_addr_parse(const char *s, uint8_t addr[16]);

#endif
