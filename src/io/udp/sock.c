#include "io/udp/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "util/bytes.h"
#include "wire/frame.h"
#include "wire/opcode.h"

#define GSO_MAX_SEGS 64
/* Receive buffers are 64 KiB apart plus 68 cache lines: at a plain 64 KiB
 * stride every datagram would start in the same L1/L2 cache sets, and a
 * batch of them evicts itself (measured: ~7% more allreduce busbw). */
#define RX_STRIDE (UROCE_UDP_RX_BUF + 68 * 64)
#define GSO_MAX_BYTES 65000
#define GLUE_MAX 64 /* pieces up to this long are copied, not referenced */
#define SOCK_BUF (8 << 20)

static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};

static socklen_t to_sockaddr(int ipver, const uint8_t addr[16], uint16_t port,
                             struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof(*ss));
  if (ipver == 4) {
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    memcpy(&sin->sin_addr, addr + 12, 4);
    return sizeof(*sin);
  }
  struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  memcpy(&sin6->sin6_addr, addr, 16);
  return sizeof(*sin6);
}

static void from_sockaddr(const struct sockaddr_storage *ss, uint8_t addr[16],
                          uint16_t *port) {
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
    memcpy(addr, v4mapped, 12);
    memcpy(addr + 12, &sin->sin_addr, 4);
    *port = ntohs(sin->sin_port);
  } else {
    const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
    memcpy(addr, &sin6->sin6_addr, 16);
    *port = ntohs(sin6->sin6_port);
  }
}

static void set_bufs(int fd) {
  int v = SOCK_BUF;
  /* The FORCE variants pass net.core.[rw]mem_max when we may (root). */
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) < 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) < 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

/* A socket with RoCEv2's IP options: DF (so IPv4 identification is 0),
 * ECT(0), the received TOS/traffic class reported, and over IPv6 zero UDP
 * checksums accepted. */
static int open_one(int ipver, const uint8_t addr[16], uint16_t port,
                    uint8_t ecn, uint16_t *bound_port) {
  int fd = socket(ipver == 4 ? AF_INET : AF_INET6,
                  SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  int one = 1, tos = ecn;
  int rv = 0;
  if (ipver == 4) {
    int pmtu = IP_PMTUDISC_DO;
    if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) < 0 ||
        setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) < 0 ||
        setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)) < 0)
      rv = -errno;
  } else {
    int pmtu = IPV6_PMTUDISC_DO;
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0 ||
        setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu)) <
            0 ||
        setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos)) < 0 ||
        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof(one)) < 0)
      rv = -errno;
    /* RoCEv2 senders may leave the UDP checksum 0 over IPv6 too (the ICRC
     * covers the packet; rxe always does), which Linux drops on an IPv6
     * socket unless told to accept it. What we send keeps the checksum the
     * kernel computes: valid for every receiver, and rxe ignores it. */
    else if (setsockopt(fd, SOL_UDP, UDP_NO_CHECK6_RX, &one, sizeof(one)) < 0)
      rv = -errno;
  }
  if (rv == 0) {
    set_bufs(fd);
    struct sockaddr_storage ss;
    socklen_t sl = to_sockaddr(ipver, addr, port, &ss);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0)
      rv = -errno;
    else if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
      rv = -errno;
    else {
      uint8_t a[16];
      from_sockaddr(&ss, a, bound_port);
    }
  }
  if (rv < 0) {
    close(fd);
    return rv;
  }
  return fd;
}

int uroce_udp_open(struct uroce_udp_sock *s, const uint8_t addr[16],
                   uint16_t port, int n_entropy) {
  memset(s, 0, sizeof(*s));
  s->fd = -1;
  if (n_entropy < 0 || n_entropy > UROCE_UDP_MAX_ENTROPY)
    return -EINVAL;
  s->ipver = memcmp(addr, v4mapped, 12) == 0 ? 4 : 6;
  memcpy(s->addr, addr, 16);
  s->ecn = 2; /* ECT(0) */
  s->rxbuf = malloc((size_t)UROCE_UDP_BATCH * RX_STRIDE);
  s->txstage = malloc(UROCE_UDP_TX_STAGE);
  if (!s->rxbuf || !s->txstage)
    return -ENOMEM;
  int fd = open_one(s->ipver, addr, port, s->ecn, &s->port);
  if (fd < 0) {
    uroce_udp_close(s);
    return fd;
  }
  s->fd = fd;
  int one = 1, zero = 0;
  s->gro = setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
  s->gso = setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero)) == 0;
  /* Arrival times, for the progress policy (api/device.c adapt_spin); a
   * kernel that refuses leaves rx_stamp 0. Linux turns arrival stamping
   * on with deferred work once a socket asks, so the first datagrams
   * after the first such socket opens may be stamped when read instead. */
  (void)setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
  for (int i = 0; i < n_entropy; i++) {
    fd = open_one(s->ipver, addr, 0, s->ecn, &s->eport[i]);
    if (fd < 0) {
      uroce_udp_close(s);
      return fd;
    }
    s->efd[i] = fd;
    s->n_entropy = i + 1;
  }
  return 0;
}

void uroce_udp_close(struct uroce_udp_sock *s) {
  if (s->fd >= 0)
    close(s->fd);
  for (int i = 0; i < s->n_entropy; i++)
    close(s->efd[i]);
  free(s->rxbuf);
  free(s->txstage);
  s->rxbuf = 0;
  s->txstage = 0;
  s->fd = -1;
  s->n_entropy = 0;
}

#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif

bool uroce_udp_busy_poll(struct uroce_udp_sock *s, int us) {
  int one = 1;
  s->busy_poll = us > 0 && setsockopt(s->fd, SOL_SOCKET, SO_BUSY_POLL, &us,
                                      sizeof(us)) == 0;
  if (s->busy_poll && setsockopt(s->fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one,
                                 sizeof(one)) < 0) {
    /* older kernel: busy polling without the preference */
  }
  return s->busy_poll;
}

uint16_t uroce_udp_sport(const struct uroce_udp_sock *s, unsigned e) {
  if (e == 0 || (int)e > s->n_entropy)
    return s->port;
  return s->eport[e - 1];
}

static int tx_fd(const struct uroce_udp_sock *s, unsigned e) {
  if (e == 0 || (int)e > s->n_entropy)
    return s->fd;
  return s->efd[e - 1];
}

/* The ICRC state after t's masked IP and UDP headers, cached. seg: the
 * packet's place in its GSO send. The kernel gives a DF packet of an
 * unconnected socket identification 0 and, when it segments a GSO send,
 * numbers the segments from there, so segment i carries i. */
static uint32_t icrc_prefix(struct uroce_udp_sock *s, struct uroce_udp_tx *t,
                            unsigned seg) {
  t->ip_id = s->ipver == 4 ? (uint16_t)seg : 0;
  uint16_t sport = uroce_udp_sport(s, t->entropy);
  unsigned h = (t->ip_id ^ t->bth_len * 7u ^ sport * 13u ^ t->dst[15] * 31u) &
               (sizeof(s->pcache) / sizeof(s->pcache[0]) - 1);
  __typeof__(&s->pcache[0]) e = &s->pcache[h];
  if (e->bth_len != t->bth_len || e->ip_id != t->ip_id || e->sport != sport ||
      e->dport != t->dport || memcmp(e->dst, t->dst, 16) != 0) {
    e->crc = uroce_icrc_udp_prefix(s->ipver, s->addr, t->dst, sport, t->dport,
                                   t->ip_id, t->bth_len);
    memcpy(e->dst, t->dst, 16);
    e->sport = sport;
    e->dport = t->dport;
    e->ip_id = t->ip_id;
    e->bth_len = t->bth_len;
  }
  return e->crc;
}

/* Whether b can follow a in a GSO send that a starts: same destination
 * and socket, and the same size - or a smaller one, which then ends the
 * send (the kernel lets only the last segment be short). */
static bool same_flow(const struct uroce_udp_tx *a,
                      const struct uroce_udp_tx *b) {
  return a->entropy == b->entropy && a->dport == b->dport &&
         a->bth_len >= b->bth_len && memcmp(a->dst, b->dst, 16) == 0;
}

/* Appends a piece of a packet to the iovecs of the message that starts at
 * first: a small one is copied into the glue, extending the last iovec if
 * that ends where the glue does; a large one is referenced. */
static void add_piece(struct iovec *iov, unsigned *niov,
                      const struct iovec *first, uint8_t *glue, size_t *gl,
                      const void *p, size_t len) {
  if (len == 0)
    return;
  if (len > GLUE_MAX) {
    iov[(*niov)++] = (struct iovec){(void *)p, len};
    return;
  }
  uint8_t *g = glue + *gl;
  memcpy(g, p, len);
  *gl += len;
  struct iovec *last = *niov ? &iov[*niov - 1] : NULL;
  if (last && last >= first && (uint8_t *)last->iov_base + last->iov_len == g)
    last->iov_len += len;
  else
    iov[(*niov)++] = (struct iovec){g, len};
}

int uroce_udp_send(struct uroce_udp_sock *s, struct uroce_udp_tx *tx,
                   unsigned n) {
  struct mmsghdr mm[UROCE_UDP_BATCH];
  struct sockaddr_storage addrs[UROCE_UDP_BATCH];
  unsigned npkts[UROCE_UDP_BATCH];
  /* Worst case every packet in a batch alone: nseg + 1 iovs each. */
  static __thread struct iovec iov[UROCE_UDP_BATCH * GSO_MAX_SEGS * 3];
  /* Small pieces (headers, pad, ICRCs) are copied here back to back, so
   * that one packet's ICRC and the next one's headers are one iovec: the
   * kernel's cost per iovec (import, usercopy checks, a copy call) is
   * paid twice per packet instead of three times or more. */
  static __thread uint8_t
      glue[UROCE_UDP_BATCH * GSO_MAX_SEGS * (GLUE_MAX + UROCE_ICRC_LEN)];
  union {
    char buf[CMSG_SPACE(sizeof(uint16_t))];
    struct cmsghdr align;
  } ctl[UROCE_UDP_BATCH];
  unsigned done = 0;

  while (done < n) {
    int fd = tx_fd(s, tx[done].entropy);
    unsigned k = 0, idx = done, niov = 0;
    size_t gl = 0; /* bytes of glue used */
    size_t sl = 0; /* bytes of txstage used */
    while (idx < n && k < UROCE_UDP_BATCH && tx_fd(s, tx[idx].entropy) == fd) {
      struct msghdr *m = &mm[k].msg_hdr;
      memset(m, 0, sizeof(*m));
      m->msg_name = &addrs[k];
      m->msg_namelen =
          to_sockaddr(s->ipver, tx[idx].dst, tx[idx].dport, &addrs[k]);
      m->msg_iov = &iov[niov];
      size_t size = tx[idx].bth_len + UROCE_ICRC_LEN;
      unsigned cnt = 0;
      do {
        struct uroce_udp_tx *t = &tx[idx + cnt];
        if (!s->tx_gather) {
          /* staged: the packet is copied, its ICRC computed in the same
           * pass and appended; the send is one iovec */
          if (sl + t->bth_len + UROCE_ICRC_LEN > UROCE_UDP_TX_STAGE ||
              niov + 1 > sizeof(iov) / sizeof(iov[0]))
            break;
          uint8_t *p = s->txstage + sl;
          put_le32(t->icrc,
                   uroce_icrc_udp_rest_copy(icrc_prefix(s, t, cnt), t->seg,
                                            t->nseg, t->bth_len, p));
          memcpy(p + t->bth_len, t->icrc, UROCE_ICRC_LEN);
          sl += t->bth_len + UROCE_ICRC_LEN;
          if (cnt == 0)
            iov[niov++] = (struct iovec){p, 0};
          iov[niov - 1].iov_len += t->bth_len + UROCE_ICRC_LEN;
          cnt++;
          continue;
        }
        if (niov + t->nseg + 1 > sizeof(iov) / sizeof(iov[0]) ||
            gl + (size_t)(t->nseg + 1) * GLUE_MAX > sizeof(glue))
          break;
        put_le32(t->icrc, uroce_icrc_udp_rest(icrc_prefix(s, t, cnt), t->seg,
                                              t->nseg, t->bth_len));
        for (unsigned j = 0; j < t->nseg; j++)
          add_piece(iov, &niov, m->msg_iov, glue, &gl, t->seg[j].iov_base,
                    t->seg[j].iov_len);
        add_piece(iov, &niov, m->msg_iov, glue, &gl, t->icrc, UROCE_ICRC_LEN);
        cnt++;
      } while (s->gso && idx + cnt < n && cnt < GSO_MAX_SEGS &&
               (cnt + 1) * size <= GSO_MAX_BYTES &&
               tx[idx + cnt - 1].bth_len == tx[idx].bth_len &&
               same_flow(&tx[idx], &tx[idx + cnt]));
      if (cnt == 0)
        break;
      m->msg_iovlen = (size_t)(&iov[niov] - m->msg_iov);
      if (cnt > 1) {
        memset(ctl[k].buf, 0, sizeof(ctl[k].buf)); /* the padding too: */
        m->msg_control = ctl[k].buf;               /* the kernel reads */
        m->msg_controllen = sizeof(ctl[k].buf);    /* all of it */
        struct cmsghdr *cm = CMSG_FIRSTHDR(m);
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t seg = (uint16_t)size;
        memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
        s->st.tx_gso_calls++;
      }
      npkts[k] = cnt;
      idx += cnt;
      k++;
    }
    int r = sendmmsg(fd, mm, k, 0);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
        s->st.tx_eagain++;
        return (int)done;
      }
      if ((errno == EIO || errno == EINVAL) && npkts[0] > 1 && s->gso) {
        s->gso = false; /* the route cannot segment: send one by one */
        continue;
      }
      /* This packet cannot go (no route, too big): drop it, as a NIC
       * would, and go on. */
      s->st.tx_errors++;
      done += npkts[0];
      continue;
    }
    s->st.tx_msgs += (unsigned)r;
    for (int i = 0; i < r; i++) {
      s->st.tx_pkts += npkts[i];
      for (unsigned j = 0; j < npkts[i]; j++)
        s->st.tx_bytes += tx[done + j].bth_len + UROCE_ICRC_LEN;
      done += npkts[i];
    }
    if ((unsigned)r < k)
      return (int)done; /* the kernel's queue is full */
  }
  return (int)done;
}

int uroce_udp_recv(struct uroce_udp_sock *s, struct uroce_udp_rx *rx,
                   unsigned max) {
  struct mmsghdr mm[UROCE_UDP_BATCH];
  struct iovec iov[UROCE_UDP_BATCH];
  struct sockaddr_storage addrs[UROCE_UDP_BATCH];
  union {
    char buf[CMSG_SPACE(sizeof(int)) * 2 + CMSG_SPACE(sizeof(uint16_t)) +
             CMSG_SPACE(sizeof(struct timespec))];
    struct cmsghdr align;
  } ctl[UROCE_UDP_BATCH];
  s->rx_stamp = 0;
  if (max == 0)
    return 0;
  unsigned vlen = s->gro ? max / GSO_MAX_SEGS : max;
  if (vlen == 0)
    vlen = 1;
  if (vlen > UROCE_UDP_BATCH)
    vlen = UROCE_UDP_BATCH;
  for (unsigned i = 0; i < vlen; i++) {
    iov[i] = (struct iovec){s->rxbuf + (size_t)i * RX_STRIDE, UROCE_UDP_RX_BUF};
    struct msghdr *m = &mm[i].msg_hdr;
    memset(m, 0, sizeof(*m));
    m->msg_name = &addrs[i];
    m->msg_namelen = sizeof(addrs[i]);
    m->msg_iov = &iov[i];
    m->msg_iovlen = 1;
    m->msg_control = ctl[i].buf;
    m->msg_controllen = sizeof(ctl[i].buf);
  }
  int r = recvmmsg(s->fd, mm, vlen, MSG_DONTWAIT, 0);
  if (r < 0)
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -errno;
  unsigned out = 0;
  for (int i = 0; i < r; i++) {
    struct msghdr *m = &mm[i].msg_hdr;
    uint32_t len = mm[i].msg_len;
    uint8_t tclass = 0;
    uint32_t seg = len;
    if (m->msg_flags & MSG_TRUNC) {
      s->st.rx_truncated++;
      continue;
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
      if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS)
        tclass = *(uint8_t *)CMSG_DATA(cm);
      else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_TCLASS) {
        int v;
        memcpy(&v, CMSG_DATA(cm), sizeof(v));
        tclass = (uint8_t)v;
      } else if (cm->cmsg_level == SOL_SOCKET &&
                 cm->cmsg_type == SCM_TIMESTAMPNS && !s->rx_stamp) {
        struct timespec ts;
        memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
        s->rx_stamp = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
      } else if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
        int v;
        memcpy(&v, CMSG_DATA(cm), sizeof(v));
        if (v > 0)
          seg = (uint32_t)v;
      }
    }
    uint8_t src[16];
    uint16_t sport;
    from_sockaddr(&addrs[i], src, &sport);
    const uint8_t *p = iov[i].iov_base;
    if (seg < len)
      s->st.rx_gro_segs++;
    for (uint32_t off = 0; off < len; off += seg) {
      if (out == max) {
        s->st.rx_truncated++; /* no room: dropped, as a full ring would */
        break;
      }
      struct uroce_udp_rx *o = &rx[out++];
      o->data = p + off;
      o->len = len - off < seg ? len - off : seg;
      memcpy(o->src, src, 16);
      o->sport = sport;
      o->tclass = tclass;
      s->st.rx_pkts++;
      s->st.rx_bytes += o->len;
    }
  }
  return (int)out;
}

/* ---- ICRC with an unknown IPv4 identification ----
 * The CRC is affine in the message bits: flipping bit i of the
 * identification changes the ICRC by a fixed E_i that depends only on the
 * packet length. So the carried ICRC matches some identification iff
 * carried ^ icrc(id = 0) lies in the span of E_0..E_15. */

/* Linear part of the CRC of a message of n bytes that is all zeros but for
 * bit `bit` of byte `pos`. */
static uint32_t unit_crc(size_t pos, int bit, size_t n) {
  uint8_t m[16] = {0}, z[16] = {0};
  m[pos] = (uint8_t)(1u << bit);
  uint32_t v =
      (uint32_t)(crc32(0, m, (uInt)(pos + 1)) ^ crc32(0, z, (uInt)(pos + 1)));
  uLong op = crc32_combine_gen((z_off_t)(n - pos - 1));
  return (uint32_t)crc32_combine_op(v, 0, op);
}

/* Row-reduced E_0..E_15 of one message length: basis[b] has its top set
 * bit at b, comb[b] says which E_i it is made of. Building it costs 16
 * CRC shifts, so it is cached per thread for the few lengths in use (a
 * stream's full-MTU packets all share one). */
struct id_basis {
  size_t n;
  uint32_t basis[32];
  uint16_t comb[32];
};

static const struct id_basis *id_basis_for(size_t n) {
  static __thread struct id_basis cache[8];
  struct id_basis *c = &cache[(n >> 2) & 7];
  if (c->n == n)
    return c;
  memset(c, 0, sizeof(*c));
  for (int i = 0; i < 16; i++) {
    /* Bit i of the identification: byte 13 for the low 8, 12 for the
     * high 8 (8 x 0xFF, then the IPv4 header). */
    uint32_t v = unit_crc(i < 8 ? 13 : 12, i & 7, n);
    uint16_t k = (uint16_t)(1u << i);
    for (int bit = 31; bit >= 0 && v; bit--) {
      if (!(v >> bit & 1))
        continue;
      if (!c->basis[bit]) {
        c->basis[bit] = v;
        c->comb[bit] = k;
        break;
      }
      v ^= c->basis[bit];
      k ^= c->comb[bit];
    }
  }
  c->n = n;
  return c;
}

/* Whether d is a combination of the E_i; *x gets which ones, i.e. the
 * identification bits. */
static bool in_span16(const struct id_basis *c, uint32_t d, uint16_t *x) {
  uint16_t sol = 0;
  for (int b = 31; b >= 0 && d; b--)
    if (d >> b & 1) {
      if (!c->basis[b])
        return false;
      d ^= c->basis[b];
      sol ^= c->comb[b];
    }
  *x = sol;
  return d == 0;
}

/* The ICRC state after a received packet's masked IP and UDP headers with
 * identification 0, cached per thread by (source, local end, length): a
 * stream's full-MTU packets all share one key, and the 36 or 56 header
 * bytes cost as much as a tenth of a 4 KiB payload's CRC. */
static uint32_t rx_prefix(const struct uroce_udp_sock *s, const uint8_t src[16],
                          uint16_t sport, uint32_t bth_len) {
  static __thread struct {
    uint8_t src[16], dst[16];
    uint16_t sport, dport;
    uint32_t bth_len; /* 0: empty */
    uint32_t crc;
  } cache[64];
  unsigned h =
      (src[15] * 31u ^ src[14] * 7u ^ sport * 13u ^ bth_len * 5u ^ s->port) &
      (sizeof(cache) / sizeof(cache[0]) - 1);
  __typeof__(&cache[0]) e = &cache[h];
  if (e->bth_len != bth_len || e->sport != sport || e->dport != s->port ||
      memcmp(e->src, src, 16) != 0 || memcmp(e->dst, s->addr, 16) != 0) {
    e->crc = uroce_icrc_udp_prefix(s->ipver, src, s->addr, sport, s->port, 0,
                                   bth_len);
    memcpy(e->src, src, 16);
    memcpy(e->dst, s->addr, 16);
    e->sport = sport;
    e->dport = s->port;
    e->bth_len = bth_len;
  }
  return e->crc;
}

bool uroce_udp_icrc_ok(const struct uroce_udp_sock *s,
                       const struct uroce_udp_rx *rx) {
  return uroce_udp_icrc_check(s, rx, NULL);
}

bool uroce_udp_icrc_check(const struct uroce_udp_sock *s,
                          const struct uroce_udp_rx *rx, uint16_t *ip_id) {
  uint16_t id = 0;
  if (ip_id)
    *ip_id = 0;
  if (rx->len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
    return false;
  size_t bth_len = rx->len - UROCE_ICRC_LEN;
  struct iovec iov = {(void *)rx->data, bth_len};
  uint32_t want = get_le32(rx->data + bth_len);
  uint32_t got = uroce_icrc_udp_rest(
      rx_prefix(s, rx->src, rx->sport, (uint32_t)bth_len), &iov, 1, bth_len);
  if (got == want)
    return true;
  if (s->ipver != 4)
    return false;
  /* n is the whole pseudo message the CRC covers. */
  size_t n = 8 + UROCE_IP4_HLEN + UROCE_UDP_HLEN + bth_len;
  if (!in_span16(id_basis_for(n), got ^ want, &id))
    return false;
  if (ip_id)
    *ip_id = id;
  return true;
}
