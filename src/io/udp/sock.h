/* The UDP edge of a real-network endpoint: one socket bound to the
 * endpoint's address and port 4791 receives everything and sends; a small
 * pool of "entropy" sockets on other source ports lets QPs spread over
 * ECMP paths (RoCEv2 carries flow entropy in the UDP source port, and a
 * userspace socket's source port is the port it is bound to).
 *
 * Batched: sendmmsg/recvmmsg, UDP GSO (UDP_SEGMENT) for runs of
 * equal-sized packets and UDP GRO on receive where the kernel has them.
 * Unless tx_gather, each GSO send is copied into one staging buffer, the
 * ICRCs computed in the same pass (uroce_icrc_udp_rest_copy), and handed
 * to the kernel as a single iovec: the kernel's copy into its skb pages
 * is slower in a packet's 4 KiB pieces than in one run (64 KiB WRITE:
 * kernel copy 27% -> 14% of the sender's CPU). With tx_gather the pieces
 * go over where they lie (registered memory straight to the kernel). The
 * device chooses (docs/design.md).
 *
 * The ICRC is computed here, at the one place that knows the source port
 * the kernel will use. IPv4 sockets use IP_PMTUDISC_DO: packets carry DF
 * and the kernel writes IP identification 0, which the ICRC covers; in a
 * GSO send the kernel numbers the segments 0, 1, 2, ... (each segment's
 * ICRC is computed with its own identification). */
#ifndef UROCE_IO_UDP_SOCK_H
#define UROCE_IO_UDP_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define UROCE_UDP_MAX_ENTROPY 64
#define UROCE_UDP_MAX_SEGS 20  /* header + payload pieces of one packet */
#define UROCE_UDP_BATCH 64     /* packets per sendmmsg/recvmmsg */
#define UROCE_UDP_RX_BUF 65536 /* room for one GRO super-datagram */
/* Staged bytes per sendmmsg: room for a whole batch of 4096-byte
 * packets with their headers (at most 64 bytes) and ICRCs, so that a
 * batch is one sendmmsg (at 256 KiB its 64th packet went alone in a
 * second one). */
#define UROCE_UDP_TX_STAGE (UROCE_UDP_BATCH * (4096 + 64 + 4))

struct uroce_udp_stats {
  uint64_t tx_pkts, tx_bytes, tx_msgs, tx_gso_calls, tx_errors, tx_eagain;
  uint64_t rx_pkts, rx_bytes, rx_gro_segs, rx_truncated;
};

struct uroce_udp_sock {
  int fd; /* bound to addr:port; receives and sends */
  int ipver;
  uint8_t addr[16];
  uint16_t port;
  int n_entropy;
  int efd[UROCE_UDP_MAX_ENTROPY];
  uint16_t eport[UROCE_UDP_MAX_ENTROPY];
  bool gso, gro;  /* what the kernel accepted */
  bool busy_poll; /* SO_BUSY_POLL accepted (uroce_udp_busy_poll) */
  bool tx_gather; /* set by the caller: gather, don't stage (see above) */
  uint8_t ecn;    /* ECN codepoint sent (2 = ECT(0)) */
  /* When the first datagram the last uroce_udp_recv returned reached the
   * socket, as the kernel stamped it (SO_TIMESTAMPNS, CLOCK_REALTIME ns);
   * 0 if it returned none or the kernel gave no stamp. */
  uint64_t rx_stamp;
  struct uroce_udp_stats st;
  /* ICRC state after the masked IP and UDP headers of recent sends, by
   * (destination, ports, identification, length): a GSO send numbers its
   * segments 0, 1, ... so the same few keys come back all the time. */
  struct {
    uint8_t dst[16];
    uint16_t sport, dport, ip_id;
    uint32_t bth_len; /* 0: empty */
    uint32_t crc;
  } pcache[64];
  uint8_t *rxbuf;   /* UROCE_UDP_BATCH buffers of UROCE_UDP_RX_BUF, staggered */
  uint8_t *txstage; /* UROCE_UDP_TX_STAGE bytes */
};

/* One packet to send: BTH+headers and payload pieces in seg[0..nseg),
 * bth_len bytes in all (pad included, ICRC not: it is appended here);
 * seg[0] holds at least the BTH. */
struct uroce_udp_tx {
  uint8_t dst[16];
  uint16_t dport;
  uint8_t entropy; /* which source socket: 0 = the main one, i = efd[i-1] */
  uint8_t nseg;
  uint32_t bth_len;
  struct iovec seg[UROCE_UDP_MAX_SEGS];
  uint8_t icrc[4]; /* filled by uroce_udp_send */
  uint16_t ip_id;  /* IPv4 identification the ICRC was computed with */
};

/* One received datagram (a GRO super-datagram is split into these). */
struct uroce_udp_rx {
  const uint8_t *data; /* BTH .. ICRC, valid until the next recv */
  uint32_t len;
  uint8_t src[16];
  uint16_t sport;
  uint8_t tclass; /* TOS / traffic class as received: ECN in the low bits */
};

/* Opens the endpoint's sockets: addr (16-byte, IPv4-mapped for IPv4),
 * port (normally 4791), n_entropy extra source sockets (0..64) on
 * kernel-chosen ports. Returns 0 or -errno (-EADDRINUSE if another
 * endpoint has addr:port). */
int uroce_udp_open(struct uroce_udp_sock *s, const uint8_t addr[16],
                   uint16_t port, int n_entropy);
void uroce_udp_close(struct uroce_udp_sock *s);

/* Asks the kernel to poll the NIC's queue from the receiving call itself
 * for up to us microseconds (SO_BUSY_POLL; once per call on a
 * non-blocking socket), preferring that over interrupts
 * (SO_PREFER_BUSY_POLL, Linux 5.11+), where the kernel offers it: it
 * does with NICs whose driver polls (NAPI), not on loopback or veth.
 * Raising it above net.core.busy_read needs CAP_NET_ADMIN. Returns
 * whether SO_BUSY_POLL was accepted. */
bool uroce_udp_busy_poll(struct uroce_udp_sock *s, int us);

/* Source port the kernel uses for entropy index e. */
uint16_t uroce_udp_sport(const struct uroce_udp_sock *s, unsigned e);

/* Sends up to n packets; consecutive packets with the same destination,
 * source socket and size go out as one GSO send where supported. Returns
 * the number of packets handed to the kernel (fewer than n if its queue is
 * full), or -errno on a hard error (the packet at the returned position
 * could not be sent; a caller may drop it and go on, as a NIC would). */
int uroce_udp_send(struct uroce_udp_sock *s, struct uroce_udp_tx *tx,
                   unsigned n);

/* Receives what is waiting (without blocking) into rx[0..max); returns the
 * count, 0 if nothing, or -errno. */
int uroce_udp_recv(struct uroce_udp_sock *s, struct uroce_udp_rx *rx,
                   unsigned max);

/* Checks a received packet's ICRC against the headers the kernel saw.
 * IPv4 identification is not visible to a socket: a peer that sends 0 (as
 * uroce does) is checked exactly; for others (Linux rxe picks random IDs)
 * the check solves for an identification that makes the ICRC match, which
 * still rejects a corrupted packet except with probability 2^-16. */
bool uroce_udp_icrc_ok(const struct uroce_udp_sock *s,
                       const struct uroce_udp_rx *rx);

/* The same check; on success *ip_id (if not NULL) is the identification
 * that makes the ICRC match, i.e. the one the packet carried. */
bool uroce_udp_icrc_check(const struct uroce_udp_sock *s,
                          const struct uroce_udp_rx *rx, uint16_t *ip_id);

#endif
