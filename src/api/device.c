#include "uroce/uroce.h"
#include "api/internal.h"

#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "uroce/uroce.h"
#include "mem/pin.h"
#include "util/bytes.h"
#include "util/clock.h"
#include "util/rng.h"
#include "wire/frame.h"
#include "transport/cc_dcqcn.h"
#include "wire/hdr.h"
#include "wire/opcode.h"

#define RX_MAX UROCE_DEV_RX_MAX
#define TX_MAX UROCE_DEV_TX_MAX
/* How long an ACK may wait for the reply to carry it (the engine's
 * ack_hold_ns): a busy-polling application answers within a few
 * microseconds. One that does not answer delays its peer's send
 * completion by this much more: its timer runs in the next poll or
 * progress thread's turn, as every timer does (docs/transport.md). */
#define ACK_HOLD_NS 4000u

/* rxe's rule: the largest IB MTU that fits in the netdev MTU minus the
 * RoCEv2 headers (about 80 bytes). */
static int mtu_from_netdev(uint32_t netdev_mtu) {
  static const uint32_t ib[] = {4096, 2048, 1024, 512, 256};
  for (int i = 0; i < 5; i++)
    if (netdev_mtu >= ib[i] + 80)
      return UROCE_MTU_4096 - i;
  return UROCE_MTU_256;
}

/* Whether addr lies in the interface address ifa's subnet (an exact
 * address match when there is no netmask). Any 127.x address is on lo's
 * 127.0.0.0/8 and can be bound without being configured. */
static bool in_subnet(const struct ifaddrs *i, const uint8_t addr[16],
                      int ipver) {
  const uint8_t *a, *m;
  size_t n;
  if (ipver == 4 && i->ifa_addr->sa_family == AF_INET) {
    a = (const uint8_t *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr;
    m = i->ifa_netmask
            ? (const uint8_t *)&((struct sockaddr_in *)i->ifa_netmask)->sin_addr
            : 0;
    n = 4;
    addr += 12;
  } else if (ipver == 6 && i->ifa_addr->sa_family == AF_INET6) {
    a = (const uint8_t *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
    m = i->ifa_netmask
            ? (const uint8_t *)&((struct sockaddr_in6 *)i->ifa_netmask)
                  ->sin6_addr
            : 0;
    n = 16;
  } else {
    return false;
  }
  for (size_t k = 0; k < n; k++) {
    uint8_t mask = m ? m[k] : 0xFF;
    if ((a[k] & mask) != (addr[k] & mask))
      return false;
  }
  return true;
}

/* The MTU of the interface that has addr (exactly, else in its subnet),
 * or 0 if none has it. */
static uint32_t iface_mtu(const uint8_t addr[16], int ipver) {
  struct ifaddrs *ifa, *i;
  const char *name = 0;
  uint32_t mtu = 0;
  if (getifaddrs(&ifa) < 0)
    return 0;
  for (int pass = 0; pass < 2 && !name; pass++)
    for (i = ifa; i && !name; i = i->ifa_next) {
      if (!i->ifa_addr)
        continue;
      struct ifaddrs exact = *i;
      if (pass == 0)
        exact.ifa_netmask = 0; /* first look for the address itself */
      if (in_subnet(&exact, addr, ipver))
        name = i->ifa_name;
    }
  if (name) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      struct ifreq ifr;
      memset(&ifr, 0, sizeof(ifr));
      snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
      if (ioctl(fd, SIOCGIFMTU, &ifr) == 0)
        mtu = (uint32_t)ifr.ifr_mtu;
      close(fd);
    }
  }
  freeifaddrs(ifa);
  return mtu;
}

/* Writes a packet to the capture with IP/UDP headers as they were (or
 * would have been) on the wire. */
static void capture(struct uroce_device *dev, const uint8_t src[16],
                    const uint8_t dst[16], uint16_t sport, uint16_t dport,
                    uint8_t tclass, uint16_t ip_id, const struct iovec *seg,
                    int nseg, const uint8_t *icrc) {
  uint8_t *bth = dev->frame + UROCE_FRAME_HEADROOM;
  size_t len = 0;
  for (int i = 0; i < nseg; i++) {
    if (len + seg[i].iov_len + 4 > sizeof(dev->frame) - UROCE_FRAME_HEADROOM)
      return;
    memcpy(bth + len, seg[i].iov_base, seg[i].iov_len);
    len += seg[i].iov_len;
  }
  memcpy(bth + len, icrc, 4);
  len += 4;
  struct uroce_frame_params fp = {.ipver = dev->sock.ipver,
                                  .sport = sport,
                                  .dport = dport,
                                  .tclass = tclass,
                                  .ip_id = ip_id,
                                  .eth = true};
  memcpy(fp.src, src, 16);
  memcpy(fp.dst, dst, 16);
  memcpy(fp.smac, "\x02\x00\x00\x00\x00\x01", 6);
  memcpy(fp.dmac, "\x02\x00\x00\x00\x00\x02", 6);
  /* encap recomputes the ICRC; put back the one that was on the wire so
   * the capture shows what really travelled. */
  int start = uroce_frame_encap(dev->frame, UROCE_FRAME_HEADROOM, len, &fp);
  if (start < 0)
    return;
  memcpy(bth + len - 4, icrc, 4);
  uroce_pcap_write(dev->pcap, real_ns(), dev->frame + start,
                   (size_t)(bth - dev->frame) + len - (size_t)start);
}

/* Whether the receive-drop impairment may take this packet: any, or only
 * requests or responses (its BTH opcode's meaning; a packet too short to
 * say, or a CNP, is never one of them). */
static bool may_drop(const struct uroce_device *dev,
                     const struct uroce_udp_rx *r) {
  if (!dev->rx_drop_mask)
    return true;
  const struct uroce_opcode_info *oi = r->len ? uroce_opcode(r->data[0]) : 0;
  return oi && (oi->mask & dev->rx_drop_mask);
}

/* Receives and feeds what is waiting. Lock held. */
static int do_rx(struct uroce_device *dev, uint64_t now) {
  int n = uroce_udp_recv(&dev->sock, dev->rx, RX_MAX);
  if (n <= 0)
    return 0;
  if (dev->sock.rx_stamp && !dev->rx_first)
    dev->rx_first = dev->sock.rx_stamp;
  for (int i = 0; i < n; i++) {
    struct uroce_udp_rx *r = &dev->rx[i];
    if (dev->rx_drop > 0 && may_drop(dev, r) &&
        splitmix64_01(&dev->rng) < dev->rx_drop) {
      dev->rx_dropped_impair++;
      continue;
    }
    /* The check also recovers the IPv4 identification the packet carried
     * (a socket does not see it), so that the capture shows it. */
    uint16_t ip_id;
    bool icrc_ok = uroce_udp_icrc_check(&dev->sock, r, &ip_id);
    if (dev->pcap) {
      struct iovec iov = {(void *)r->data, r->len >= 4 ? r->len - 4 : 0};
      uint8_t icrc[4] = {0};
      if (r->len >= 4)
        memcpy(icrc, r->data + r->len - 4, 4);
      capture(dev, r->src, dev->gid, r->sport, dev->sock.port, r->tclass, ip_id,
              &iov, 1, icrc);
    }
    if (!icrc_ok) {
      dev->rx_bad_icrc++;
      continue;
    }
    struct uroce_rx_pkt p;
    if (uroce_pkt_parse(r->data, r->len, &p.pi) != 0) {
      dev->rx_malformed++;
      continue;
    }
    memcpy(p.sgid, r->src, 16);
    memcpy(p.dgid, dev->gid, 16);
    p.sport = r->sport;
    p.ecn = r->tclass & 3;
    p.flags = 0;
    uroce_eng_read_pkt(dev->eng, &p, now);
  }
  return n;
}

/* Takes the engine's next packet into slot k of the batch: 1, or 0 if
 * it has none. */
static int take_pkt(struct uroce_device *dev, unsigned k, uint64_t now) {
  struct uroce_tx_pkt *tp = &dev->tp[k];
  if (uroce_eng_write_pkt(dev->eng, tp, now) != 1)
    return 0;
  struct uroce_udp_tx *t = &dev->tx[k];
  memcpy(t->dst, tp->dgid, 16);
  t->dport = tp->dport ? tp->dport : dev->sock.port;
  t->entropy = (uint8_t)(tp->sport % (unsigned)(dev->sock.n_entropy + 1));
  unsigned s = 0;
  t->seg[s++] = (struct iovec){tp->hdr, tp->hdr_len};
  for (unsigned j = 0; j < tp->nseg && s < UROCE_UDP_MAX_SEGS - 1; j++)
    if (tp->seg[j].len)
      t->seg[s++] = (struct iovec){(void *)tp->seg[j].addr, tp->seg[j].len};
  if (tp->pad)
    t->seg[s++] = (struct iovec){dev->zeros, tp->pad};
  t->nseg = (uint8_t)s;
  t->bth_len = tp->hdr_len + tp->payload_len + tp->pad;
  return 1;
}

/* Takes every packet the engine has ready and sends it. Lock held. The
 * engine's payload segments stay valid until the next call into it other
 * than write_pkt, so a batch is gathered first, then sent. ACKs held for
 * a reply (uroce_eng_release_acks) join the first batch that has
 * anything else: one sendmmsg carries the reply and the ACK. */
static int do_tx(struct uroce_device *dev, uint64_t now) {
  int total = 0;
  for (;;) {
    unsigned k = 0;
    while (k < TX_MAX && take_pkt(dev, k, now))
      k++;
    if (k == 0)
      break;
    if (k < TX_MAX && uroce_eng_release_acks(dev->eng))
      while (k < TX_MAX && take_pkt(dev, k, now))
        k++;
    unsigned sent = 0;
    while (sent < k) {
      int r = uroce_udp_send(&dev->sock, dev->tx + sent, k - sent);
      if (r < 0)
        r = 0;
      sent += (unsigned)r;
      if (sent < k) {
        /* The socket queue is full: wait for room rather than lose
         * packets the engine considers sent. */
        struct timespec ts = {0, 20000};
        nanosleep(&ts, 0);
      }
    }
    if (dev->pcap)
      for (unsigned i = 0; i < k; i++)
        capture(dev, dev->gid, dev->tx[i].dst,
                uroce_udp_sport(&dev->sock, dev->tx[i].entropy),
                dev->tx[i].dport, dev->sock.ecn, dev->tx[i].ip_id,
                dev->tx[i].seg, dev->tx[i].nseg, dev->tx[i].icrc);
    total += (int)k;
  }
  return total;
}

void uroce_device_send_held_locked(struct uroce_device *dev) {
  if (uroce_eng_release_acks(dev->eng))
    do_tx(dev, mono_ns());
}

static int progress_locked(struct uroce_device *dev) {
  uint64_t now = mono_ns();
  int work = do_rx(dev, now);
  if (uroce_eng_next_expiry(dev->eng) <= now) {
    uroce_eng_handle_expiry(dev->eng, now);
    work++;
  }
  work += do_tx(dev, now);
  if (dev->narmed)
    dev_fire_cq_events(dev);
  dev_move_async_events(dev);
  return work;
}

int uroce_device_progress(struct uroce_device *dev) {
  pthread_mutex_lock(&dev->lock);
  int work = progress_locked(dev);
  pthread_mutex_unlock(&dev->lock);
  return work;
}

/* Wakes the progress thread (counted in the stats). */
static void ring_doorbell(struct uroce_device *dev) {
  uint64_t one = 1;
  atomic_fetch_add_explicit(&dev->doorbells, 1, memory_order_relaxed);
  if (write(dev->doorbell, &one, sizeof(one)) < 0) {
    /* the counter is saturated: the thread is being woken anyway */
  }
}

/* The thread, awake: forgets any ring (none, if a packet or the timer
 * woke it). */
static void clear_doorbell(struct uroce_device *dev) {
  uint64_t v;
  if (read(dev->doorbell, &v, sizeof(v)) < 0) {
    /* nothing rang */
  }
}

/* How long after an application's last empty poll the progress thread
 * still counts on it to poll again (a busy-polling program comes back
 * within microseconds). The backing-off thread looks again after
 * BACKOFF_MIN_NS, then twice as long each time the application still
 * polls, up to BACKOFF_MAX_NS: a program that stopped polling (a poll
 * returned work and it went to do it, or it waits where uroce does not
 * see it) gets the thread back soon after, while one that keeps polling
 * is interrupted rarely. */
#define APP_POLL_GRACE_NS 50000u
#define BACKOFF_MIN_NS 20000u
#define BACKOFF_MAX_NS 500000u

static bool app_polling(struct uroce_device *dev, uint64_t now) {
  uint64_t t = atomic_load(&dev->app_poll_ns);
  return t && (now - t < APP_POLL_GRACE_NS || atomic_load(&dev->app_blocked));
}

/* While the application polls, two threads taking turns at the engine on
 * one core would hand every packet from one to the other (a round trip in
 * thread mode took 200 us typical on 2 cores, 9 in inline mode): the
 * thread sleeps on its doorbell instead, until the polls stop or the
 * application blocks on a completion channel (and rings). */
static void back_off(struct uroce_device *dev) {
  uint64_t wait = BACKOFF_MIN_NS;
  atomic_store(&dev->backoff, true);
  while (!atomic_load(&dev->stop) && app_polling(dev, mono_ns())) {
    struct timespec ts = {0, (long)wait};
    struct pollfd pfd = {.fd = dev->doorbell, .events = POLLIN};
    if (ppoll(&pfd, 1, &ts, 0) > 0)
      clear_doorbell(dev);
    if (wait < BACKOFF_MAX_NS)
      wait *= 2;
  }
  atomic_store(&dev->backoff, false);
}

/* How long a poll may sleep at most when the application's polls have
 * found nothing for its spin budget: a program that polls this device
 * and something else (another device, a socket, memory) sees the other
 * late by at most this much, and an idle polling program wakes this
 * often (a pass costs a few microseconds: about 2% of a core). */
#define APP_BLOCK_MAX_NS 200000u

static void adapt_spin(struct uroce_device *dev, struct uroce_spin *sp,
                       uint64_t slept);
static uint64_t event_after(const struct uroce_device *dev, uint64_t slept);

/* The application's polls found nothing new for its spin budget: wait
 * in the kernel for a packet, a doorbell (a post from another thread, a
 * stop) or the engine's next timer, then run the device. Lock held on
 * entry, released on return. Returns the work done after the wait. */
static int app_block(struct uroce_device *dev, uint64_t now) {
  uint64_t exp = uroce_eng_next_expiry(dev->eng);
  uint64_t d = exp > now ? exp - now : 0;
  if (d > APP_BLOCK_MAX_NS)
    d = APP_BLOCK_MAX_NS;
  atomic_store(&dev->app_blocked, true);
  dev->rx_first = 0;
  pthread_mutex_unlock(&dev->lock);
  struct pollfd pfd[2] = {{.fd = dev->sock.fd, .events = POLLIN},
                          {.fd = dev->app_bell, .events = POLLIN}};
  struct timespec ts = {(time_t)(d / 1000000000u), (long)(d % 1000000000u)};
  uint64_t v, slept = real_ns();
  if (ppoll(pfd, 2, &ts, 0) > 0 && pfd[1].revents &&
      read(dev->app_bell, &v, sizeof(v)) < 0) {
    /* another poller took the ring */
  }
  uint64_t woke = mono_ns();
  /* Still polling: the wait counts as a poll that just ended. */
  if (atomic_load_explicit(&dev->app_poll_ns, memory_order_relaxed))
    atomic_store(&dev->app_poll_ns, woke);
  atomic_store(&dev->app_blocked, false);
  atomic_fetch_add_explicit(&dev->app_sleeps, 1, memory_order_relaxed);
  pthread_mutex_lock(&dev->lock);
  int work = progress_locked(dev);
  adapt_spin(dev, &dev->app_spin, event_after(dev, slept));
  pthread_mutex_unlock(&dev->lock);
  if (work)
    atomic_store(&dev->app_idle_since, 0);
  return work;
}

/* A gap this long between two empty polls of one spin: the spinner was
 * off the core (a pass takes a few microseconds). */
#define SPIN_GAP_NS 20000u
#define FAILS_TO_HOLD 4u

/* The application's polls found work. A spin that was under way caught
 * it, and adapt_spin's count of fruitless spins starts again, unless the
 * spinner was off the core meanwhile: then the event most likely came
 * because the spinner was preempted by the peer it kept from running
 * (both on one core), which counts as a fruitless spin; enough of them
 * end spinning until adapt_spin decides on a pause. */
static void app_caught(struct uroce_device *dev) {
  if (!atomic_load_explicit(&dev->app_idle_since, memory_order_relaxed))
    return;
  if (atomic_load_explicit(&dev->app_gap, memory_order_relaxed) < SPIN_GAP_NS)
    atomic_store(&dev->app_spin.fails, 0);
  else if (atomic_fetch_add(&dev->app_spin.fails, 1) + 1 >= FAILS_TO_HOLD)
    atomic_store(&dev->app_spin.ns, 0);
  atomic_store(&dev->app_idle_since, 0);
}

/* An application's turn at the device, with the lock held (released on
 * return): its progress, and after a spin budget of empty turns, a wait
 * in the kernel. found: the poll's CQ had completions. An application
 * that has armed a CQ for events never waits here: it sleeps on its
 * completion channel when it means to, and may poll while holding a lock
 * its other threads need (UCX's UD transport holds its async lock around
 * ibv_poll_cq, and its async thread, woken by the channel, spun on
 * sched_yield while the poller slept: tag_lat 64-89 us, 7-8 without). */
static int app_turn_locked(struct uroce_device *dev, bool found) {
  uint64_t now = mono_ns();
  int work = progress_locked(dev);
  if (work || found) {
    app_caught(dev);
    pthread_mutex_unlock(&dev->lock);
    return work;
  }
  uint64_t since = atomic_load(&dev->app_idle_since);
  if (!since) {
    atomic_store(&dev->app_idle_since, now);
    atomic_store_explicit(&dev->app_gap, 0, memory_order_relaxed);
    since = now;
  } else {
    uint64_t gap =
        now - atomic_load_explicit(&dev->app_last_turn, memory_order_relaxed);
    if (gap > atomic_load_explicit(&dev->app_gap, memory_order_relaxed))
      atomic_store_explicit(&dev->app_gap, gap, memory_order_relaxed);
  }
  atomic_store_explicit(&dev->app_last_turn, now, memory_order_relaxed);
  if (now - since < atomic_load(&dev->app_spin.ns) ||
      atomic_load_explicit(&dev->app_events, memory_order_relaxed) ||
      atomic_load_explicit(&dev->app_no_sleep, memory_order_relaxed)) {
    pthread_mutex_unlock(&dev->lock);
    return 0;
  }
  return app_block(dev, now);
}

void uroce_device_poll_sleep(struct uroce_device *dev, int may_sleep) {
  if (dev)
    atomic_store(&dev->app_no_sleep, !may_sleep);
}

int uroce_device_app_turn(struct uroce_device *dev, bool found) {
  pthread_mutex_lock(&dev->lock);
  return app_turn_locked(dev, found);
}

void uroce_device_app_poll(struct uroce_device *dev) {
  uint64_t now = mono_ns();
  atomic_store_explicit(&dev->app_poll_ns, now, memory_order_relaxed);
  /* One thread makes progress at a time. If the device is free, this
   * poll is the NIC; if another thread is at the engine (the progress
   * thread finishing its pass, which then backs off, or a post), wait
   * for it in the kernel: the engine is ours right after, and meanwhile
   * the holder has the core if we share one. */
  if (pthread_mutex_trylock(&dev->lock) != 0)
    pthread_mutex_lock(&dev->lock);
  app_turn_locked(dev, false);
}

void uroce_device_app_leaves(struct uroce_device *dev, bool blocks) {
  if (!blocks)
    app_caught(dev);
  else if (atomic_load_explicit(&dev->app_idle_since, memory_order_relaxed))
    atomic_store(&dev->app_idle_since, 0);
  if (dev->progress != UROCE_PROGRESS_THREAD || !atomic_load(&dev->app_poll_ns))
    return;
  atomic_store(&dev->app_poll_ns, 0);
  if (!blocks)
    return; /* the thread finds out at its next look */
  if (atomic_load(&dev->backoff))
    ring_doorbell(dev);
}

/* The thread's turn at the device: its progress (after a sleep that
 * began at slept, which then adapts the spin), or, with next_expiry set,
 * just the engine's next timer. -1 when the application is polling
 * (the thread backs off). Another holder of the lock is a verbs call
 * (brief) or a poller that began after the look: the thread waits in the
 * kernel, and looks again, never spins on the lock. */
static int thread_turn(struct uroce_device *dev, uint64_t *next_expiry,
                       uint64_t slept) {
  if (app_polling(dev, mono_ns()))
    return -1;
  if (pthread_mutex_trylock(&dev->lock) != 0) {
    pthread_mutex_lock(&dev->lock);
    if (app_polling(dev, mono_ns())) {
      pthread_mutex_unlock(&dev->lock);
      return -1;
    }
  }
  int work = 0;
  if (next_expiry) {
    *next_expiry = uroce_eng_next_expiry(dev->eng);
    dev->rx_first = 0; /* going to sleep */
  } else {
    work = progress_locked(dev);
    if (slept)
      adapt_spin(dev, &dev->spin, event_after(dev, slept));
  }
  pthread_mutex_unlock(&dev->lock);
  return work;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* The spin budget adapts like KVM's halt polling: a sleep whose waking
 * event came within busy_ns (the most a thread may spin) would have been
 * saved by spinning, so the budget doubles (from SPIN_MIN_NS, up to
 * busy_ns); a longer one (the peer thinks, the application computes)
 * halves it, down to 0. An idle device, or traffic too sparse to catch,
 * costs no CPU: the thread sleeps in the kernel, woken by a packet, a
 * doorbell or its timer. A spin never yields the CPU: sched_yield hands
 * the core to anything runnable, even a niced job, and returns when that
 * job's slice ends.
 *
 * The event's time is when its packet reached the socket (the kernel's
 * stamp), not when the sleeper ran again: on a core shared with other
 * runnable threads the wakeup itself can take 50 us, which is what the
 * spin saves, and counting it made a ping-pong under two nice -n 19 busy
 * loops settle for good on sleeping (72 us per half round trip against
 * 10 spinning): each side's sleep then lasted two wakeups of the other.
 * Wakes by a doorbell or a timer count until the sleeper ran. */
#define SPIN_MIN_NS 2000u

/* How long after slept (CLOCK_REALTIME, as the kernel stamps packets) the
 * sleep's waking event came: the first packet the pass after it received,
 * else now. A stamp before slept is a packet that was there already. */
static uint64_t event_after(const struct uroce_device *dev, uint64_t slept) {
  uint64_t ev = dev->rx_first ? dev->rx_first : real_ns();
  return ev > slept ? ev - slept : 0;
}

/* Spinning the most allowed (busy_ns) and finding nothing, then sleeping
 * and being woken soon after, or catching the event only after being off
 * the core meanwhile (app_caught), FAILS_TO_HOLD times in a row, is the
 * sign that the spin itself keeps the answer from coming: both ends of a
 * ping-pong share one core (a local peer the scheduler put there; two
 * ranks of a job on a shared machine), the peer runs only once the
 * spinner gives up, and the sleep looks short. Left alone the budget
 * stayed at the most (89-169 us per half round trip under one nice -n 19
 * loop, against 58 sleeping). So spinning stops for a pause, HOLD_MIN_NS,
 * twice the last if it comes back within four pauses of the last ending
 * (up to HOLD_MAX_NS). A spin that catches its event clears the count. */
#define HOLD_MIN_NS 1000000u
#define HOLD_MAX_NS 128000000u

static void adapt_spin(struct uroce_device *dev, struct uroce_spin *sp,
                       uint64_t slept) {
  uint64_t s = atomic_load_explicit(&sp->ns, memory_order_relaxed);
  uint64_t now = mono_ns();
  if (now < sp->hold_until)
    return; /* spinning stays off (s is 0) */
  if (slept <= dev->busy_ns && s && s == dev->busy_ns)
    atomic_fetch_add(&sp->fails, 1);
  if (atomic_load(&sp->fails) >= FAILS_TO_HOLD) {
    bool again = sp->hold_ns && now - sp->hold_until < 4 * sp->hold_ns;
    sp->hold_ns = !again                          ? HOLD_MIN_NS
                  : sp->hold_ns < HOLD_MAX_NS / 2 ? 2 * sp->hold_ns
                                                  : HOLD_MAX_NS;
    sp->hold_until = now + sp->hold_ns;
    atomic_store(&sp->fails, 0);
    atomic_store_explicit(&sp->ns, 0, memory_order_relaxed);
    return;
  }
  if (slept <= dev->busy_ns) {
    s = s ? s * 2 : SPIN_MIN_NS;
    if (s > dev->busy_ns)
      s = dev->busy_ns;
  } else {
    s /= 2;
    if (s < SPIN_MIN_NS)
      s = 0;
  }
  atomic_store_explicit(&sp->ns, s, memory_order_relaxed);
}

static void *progress_thread(void *arg) {
  struct uroce_device *dev = arg;
  uint64_t last_work = mono_ns();
  struct epoll_event evs[4];
  /* Short sleeps (backing off, timers) end on time, not 50 us late. */
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  while (!atomic_load(&dev->stop)) {
    int work = thread_turn(dev, NULL, 0);
    if (work < 0) {
      back_off(dev);
      last_work = mono_ns();
      continue;
    }
    uint64_t now = mono_ns();
    if (work) {
      if (now - last_work > 1000)
        atomic_store(&dev->spin.fails, 0); /* a spin caught it */
      last_work = now;
      continue;
    }
    if (now - last_work <
        atomic_load_explicit(&dev->spin.ns, memory_order_relaxed)) {
      cpu_relax();
      continue;
    }
    /* Going to sleep: announce it, then look once more so that a post
     * that raced with us either is seen here or rings the doorbell. */
    atomic_store(&dev->sleeping, true);
    uint64_t exp;
    if (thread_turn(dev, NULL, 0) != 0 || thread_turn(dev, &exp, 0) < 0) {
      atomic_store(&dev->sleeping, false);
      last_work = mono_ns();
      continue;
    }
    now = mono_ns();
    struct timespec ts, *tsp = 0;
    if (exp != UINT64_MAX) {
      uint64_t d = exp > now ? exp - now : 0;
      ts.tv_sec = (time_t)(d / 1000000000u);
      ts.tv_nsec = (long)(d % 1000000000u);
      tsp = &ts;
    }
    uint64_t slept = real_ns();
    epoll_pwait2(dev->epfd, evs, 4, tsp, 0);
    atomic_store(&dev->sleeping, false);
    atomic_fetch_add_explicit(&dev->wakeups, 1, memory_order_relaxed);
    clear_doorbell(dev);
    last_work = mono_ns();
    /* The pass after a sleep sees what woke it. */
    if (thread_turn(dev, NULL, slept) > 0)
      last_work = mono_ns();
  }
  return 0;
}

/* Called after every verbs call that gives the engine work. With a
 * thread: ring the doorbell if it sleeps. Inline: send what is ready now
 * (a post list goes out as one batch), so that nothing posted waits for a
 * poll that may never come; receiving is left to the next poll. */
void uroce_device_kick(struct uroce_device *dev) {
  if (atomic_load(&dev->app_blocked)) {
    /* a poll waits in the kernel: its next timer may have moved */
    uint64_t one = 1;
    if (write(dev->app_bell, &one, sizeof(one)) < 0) {
      /* saturated: it wakes anyway */
    }
  }
  if (dev->progress == UROCE_PROGRESS_INLINE) {
    pthread_mutex_lock(&dev->lock);
    do_tx(dev, mono_ns());
    pthread_mutex_unlock(&dev->lock);
    return;
  }
  if (atomic_load(&dev->backoff)) {
    /* The application polls and so makes progress; send now what it
     * posted unless someone is at the engine already (and will). */
    if (pthread_mutex_trylock(&dev->lock) == 0) {
      do_tx(dev, mono_ns());
      pthread_mutex_unlock(&dev->lock);
    }
    return;
  }
  if (atomic_load(&dev->sleeping))
    ring_doorbell(dev);
}

/* The transport's choices an operator may make for every program on the
 * host (docs/transport.md): UROCE_TRANSPORT=standard (no multipath, not
 * even its announcement) or multipath (every peer is uroce: use it from
 * the first packet), UROCE_PATHS=n (spray over n source ports). */
static int eng_env(struct uroce_eng_cfg *cfg) {
  const char *t = getenv("UROCE_TRANSPORT"), *n = getenv("UROCE_PATHS");
  if (t && *t) {
    if (!strcmp(t, "standard"))
      cfg->flags |= UROCE_ENG_STANDARD;
    else if (!strcmp(t, "multipath"))
      cfg->flags |= UROCE_ENG_MULTIPATH;
    else if (strcmp(t, "auto")) {
      fprintf(stderr,
              "uroce: UROCE_TRANSPORT=%s: not auto, standard or "
              "multipath\n",
              t);
      return UROCE_ERR_INVALID_ARGUMENT;
    }
  }
  const char *h = getenv("UROCE_ACK_HOLD_NS");
  if (h && *h) {
    char *end;
    unsigned long long v = strtoull(h, &end, 10);
    if (*end || v > 1000000) {
      fprintf(stderr,
              "uroce: UROCE_ACK_HOLD_NS=%s: not a time in 0..1000000 ns\n", h);
      return UROCE_ERR_INVALID_ARGUMENT;
    }
    cfg->ack_hold_ns = v;
  }
  if (n && *n) {
    char *end;
    unsigned long v = strtoul(n, &end, 10);
    if (*end || v < 1 || v > 16384) {
      fprintf(stderr,
              "uroce: UROCE_PATHS=%s: not a number of paths in "
              "1..16384\n",
              n);
      return UROCE_ERR_INVALID_ARGUMENT;
    }
    cfg->paths = (uint32_t)v;
  }
  return 0;
}

int uroce_device_open(struct uroce_device **out,
                      const struct uroce_device_attr *attr) {
  int rv;
  if (!out || !attr || !attr->addr)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (attr->progress != UROCE_PROGRESS_THREAD &&
      attr->progress != UROCE_PROGRESS_INLINE)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (attr->rx_drop < 0 || attr->rx_drop >= 1)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (attr->rx_drop_only < UROCE_RX_DROP_ANY ||
      attr->rx_drop_only > UROCE_RX_DROP_RESPONSES)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = calloc(1, sizeof(*dev));
  if (!dev)
    return -ENOMEM;
  dev->epfd = dev->doorbell = dev->app_bell = dev->async_fd = -1;
  dev->sock.fd = -1;
  ulist_init(&dev->cqs);
  pthread_mutex_init(&dev->lock, 0);
  int ipver = uroce_addr_parse(attr->addr, dev->gid);
  if (ipver < 0) {
    rv = UROCE_ERR_INVALID_ARGUMENT;
    goto fail;
  }
  uint32_t netdev_mtu =
      attr->netdev_mtu ? attr->netdev_mtu : iface_mtu(dev->gid, ipver);
  if (!netdev_mtu) {
    rv = -EADDRNOTAVAIL;
    goto fail;
  }
  dev->mtu = mtu_from_netdev(netdev_mtu);
  dev->progress = attr->progress;
  dev->busy_ns = attr->busy_poll_us < 0 ? 0
                 : attr->busy_poll_us == 0
                     ? 50000
                     : (uint64_t)attr->busy_poll_us * 1000;
  atomic_store(&dev->spin.ns, dev->busy_ns);
  atomic_store(&dev->app_spin.ns, dev->busy_ns);
  dev->rx_drop = attr->rx_drop;
  dev->rx_drop_mask = attr->rx_drop_only == UROCE_RX_DROP_REQUESTS ? UROCE_OPM_REQ
                      : attr->rx_drop_only == UROCE_RX_DROP_RESPONSES
                          ? UROCE_OPM_RESP
                          : 0;
  dev->rng = attr->seed;
  if (!dev->rng &&
      getrandom(&dev->rng, sizeof(dev->rng), 0) != sizeof(dev->rng))
    dev->rng = mono_ns();

  int n_entropy = attr->n_entropy < 0 ? 0
                  : attr->n_entropy   ? attr->n_entropy
                                      : 8;
  rv = uroce_udp_open(&dev->sock, dev->gid, attr->port ? attr->port : 4791,
                      n_entropy);
  if (rv < 0)
    goto fail;
  uroce_udp_busy_poll(&dev->sock, (int)(dev->busy_ns / 1000));
  dev->sock.tx_gather = attr->tx_gather > 0   ? true
                        : attr->tx_gather < 0 ? false
                                              : !uroce_crc32_copy_one_pass();

  struct uroce_eng_cfg cfg = {0};
  cfg.seed = splitmix64(&dev->rng);
  cfg.user = dev;
  memcpy(cfg.gid, dev->gid, 16);
  cfg.port_mtu = (uint8_t)dev->mtu;
  /* By name from the module registry; UROCE_CC when the caller names
   * none (uroce perf, the collectives). */
  const char *cc = attr->cc ? attr->cc : getenv("UROCE_CC");
  cfg.cc = uroce_cc_find(cc && *cc ? cc : "none");
  if (!cfg.cc) {
    fprintf(stderr,
            "uroce: %s%s: no such congestion control (none, dcqcn, "
            "swift)\n",
            attr->cc ? "" : "UROCE_CC=", cc);
    rv = UROCE_ERR_INVALID_ARGUMENT;
    goto fail;
  }
  cfg.max_qp = UROCE_DEVICE_MAX_QP;
  cfg.max_mr = UROCE_DEVICE_MAX_MR;
  /* A QP sends up to 16 packets in a row (64 KiB at the largest MTU): they
   * leave in one GSO send (one destination, one size), and its peer
   * acknowledges them together. Packet by packet, 64 QPs writing at once
   * made one GSO send of about 11 packets and 0.6 ACKs per data packet,
   * and moved 0.4x what bursts of 16 move (docs/transport.md). */
  cfg.tx_burst = 16;
  /* An ACK that a receive completion asked for waits for the reply, up to
   * UROCE_ACK_HOLD_NS (the transport's choice, docs/transport.md): both
   * leave in one sendmmsg, and the application sees its completion a
   * system call sooner. */
  cfg.ack_hold_ns = ACK_HOLD_NS;
  /* Regions are the application's memory: every access probes it first,
   * so that memory unmapped while registered answers an access error. */
  rv = uroce_pin_guard_init();
  if (rv < 0)
    goto fail;
  cfg.flags |= UROCE_ENG_PROBE;
  rv = eng_env(&cfg);
  if (rv < 0)
    goto fail;
  rv = uroce_eng_new(&dev->eng, &cfg);
  if (rv < 0)
    goto fail;
  rv = dev_trace_env(dev);
  if (rv < 0)
    goto fail;

  dev->armed_cap = UROCE_DEV_MAX_CQ;
  dev->armed = calloc(dev->armed_cap, sizeof(*dev->armed));
  dev->async_fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  if (!dev->armed || dev->async_fd < 0) {
    rv = dev->armed ? -errno : -ENOMEM;
    goto fail;
  }

  if (attr->pcap) {
    char err[256];
    rv = uroce_pcap_open(&dev->pcap, attr->pcap, UROCE_LINK_ETHERNET, err,
                         sizeof(err));
    if (rv < 0)
      goto fail;
  }

  /* A poll that waits in the kernel has its own doorbell (both modes):
   * sharing the thread's, one would take the other's ring. */
  dev->app_bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (dev->app_bell < 0) {
    rv = -errno;
    goto fail;
  }
  if (dev->progress == UROCE_PROGRESS_THREAD) {
    dev->doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    dev->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (dev->doorbell < 0 || dev->epfd < 0) {
      rv = -errno;
      goto fail;
    }
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.fd = dev->doorbell;
    if (epoll_ctl(dev->epfd, EPOLL_CTL_ADD, dev->doorbell, &ev) < 0) {
      rv = -errno;
      goto fail;
    }
    ev.data.fd = dev->sock.fd;
    if (epoll_ctl(dev->epfd, EPOLL_CTL_ADD, dev->sock.fd, &ev) < 0) {
      rv = -errno;
      goto fail;
    }
    rv = pthread_create(&dev->thread, 0, progress_thread, dev);
    if (rv != 0) {
      rv = -rv;
      goto fail;
    }
    dev->thread_started = true;
  }
  *out = dev;
  return 0;
fail:
  uroce_device_close(dev);
  return rv;
}

void uroce_device_close(struct uroce_device *dev) {
  if (!dev)
    return;
  if (dev->thread_started) {
    atomic_store(&dev->stop, true);
    uint64_t one = 1;
    if (write(dev->doorbell, &one, sizeof(one)) < 0) {
      /* saturated: the thread wakes anyway */
    }
    pthread_join(dev->thread, 0);
  }
  if (dev->eng) {
    pthread_mutex_lock(&dev->lock);
    uroce_device_send_held_locked(dev);
    pthread_mutex_unlock(&dev->lock);
  }
  dev_trace_close(dev); /* before the engine whose hook it is goes */
  if (dev->eng) {
    /* The engine frees what the application left; the device's own
     * per-CQ state goes with it. */
    while (!ulist_empty(&dev->cqs)) {
      struct dcq *d = ULIST_ENTRY(dev->cqs.next, struct dcq, link);
      ulist_del(&d->link);
      pthread_mutex_destroy(&d->poll_lock);
      free(d);
    }
    uroce_eng_del(dev->eng);
  }
  if (dev->sock.fd >= 0 || dev->sock.rxbuf)
    uroce_udp_close(&dev->sock);
  if (dev->pcap)
    uroce_pcap_close(dev->pcap);
  if (dev->epfd >= 0)
    close(dev->epfd);
  if (dev->doorbell >= 0)
    close(dev->doorbell);
  if (dev->app_bell >= 0)
    close(dev->app_bell);
  if (dev->async_fd >= 0)
    close(dev->async_fd);
  free(dev->armed);
  pthread_mutex_destroy(&dev->lock);
  free(dev);
}

void uroce_device_get_stats(struct uroce_device *dev,
                            struct uroce_device_stats *st) {
  memset(st, 0, sizeof(*st));
  pthread_mutex_lock(&dev->lock);
  const struct uroce_eng_stats *e = uroce_eng_stats(dev->eng);
  const struct uroce_udp_stats *u = &dev->sock.st;
  st->rx_pkts = u->rx_pkts;
  st->rx_bytes = u->rx_bytes;
  st->tx_pkts = u->tx_pkts;
  st->tx_bytes = u->tx_bytes;
  st->rx_bad_icrc = dev->rx_bad_icrc;
  st->rx_malformed = dev->rx_malformed;
  st->rx_dropped_impair = dev->rx_dropped_impair;
  for (int i = 0; i < UROCE_DROP_COUNT; i++)
    st->rx_dropped_engine += e->drops[i];
  st->retransmits = e->retx_pkts; /* packets, as NICs count them */
  st->go_backs = e->go_backs;
  st->timeouts = e->timeouts;
  st->naks_tx = e->naks_tx;
  st->rnr_naks_tx = e->rnr_naks_tx;
  st->acks_tx = e->acks_tx;
  st->cnps_tx = e->cnps_tx;
  st->cnps_rx = e->cnps_rx;
  st->ce_rx = e->ce_rx;
  st->tx_msgs = u->tx_msgs;
  st->tx_gso_calls = u->tx_gso_calls;
  st->rx_gro_segs = u->rx_gro_segs;
  st->tx_eagain = u->tx_eagain;
  st->wakeups = dev->wakeups;
  st->doorbells = dev->doorbells;
  pthread_mutex_unlock(&dev->lock);
}

const char *uroce_version(void) {
  return UROCE_VERSION_STRING;
}

void uroce_device_gid(const struct uroce_device *dev, uint8_t gid[16]) {
  memcpy(gid, dev->gid, 16);
}

int uroce_device_active_mtu(const struct uroce_device *dev) {
  return dev->mtu;
}
