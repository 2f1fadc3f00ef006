/* The device's internals, shared by device.c (progress) and verbs.c (the
 * API calls). Not API. */
#ifndef UROCE_API_INTERNAL_H
#define UROCE_API_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "uroce/uroce.h"
#include "io/udp/sock.h"
#include "transport/engine.h"
#include "util/list.h"
#include "wire/frame.h"
#include "util/jsonl.h"
#include "wire/pcap.h"

#define UROCE_DEV_RX_MAX 4096 /* 64 datagrams x up to 64 GRO segments */
#define UROCE_DEV_TX_MAX UROCE_UDP_BATCH
#define UROCE_CHANNEL_EVENTS 1024
#define UROCE_ASYNC_EVENTS 256
#define UROCE_DEV_MAX_CQ 4096 /* armed at once: the start (it grows) */

struct uroce_comp_channel {
  struct uroce_device *dev;
  int fd; /* eventfd (semaphore): one count per queued event */
  pthread_mutex_t lock;
  struct dcq *ev[UROCE_CHANNEL_EVENTS];
  uint32_t ev_head, ev_tail;
  uint32_t refs; /* CQs using it; device lock */
  uint64_t lost;
};

/* The device's state for one CQ (the engine CQ's user pointer). */
struct dcq {
  struct uroce_cq *cq;
  struct uroce_device *dev;
  struct ulist link; /* the device's CQs; device lock */
  struct uroce_comp_channel *ch;
  void *context;
  pthread_mutex_t poll_lock; /* between application threads only */
  /* Under the device lock: */
  bool is_armed, solicited_only;
  uint32_t arm_head;
  /* Under the channel lock: events handed out by uroce_get_cq_event, and
   * acknowledged. Events still queued are not counted: destroying the CQ
   * drops them, as the kernel does for ibverbs. */
  uint64_t retrieved, acked;
};

/* How long a thread spins idle before it sleeps (device.c adapt_spin).
 * The budget and the count are atomic (a poll that finds work updates
 * them without the device lock); the pause is written with it held. */
struct uroce_spin {
  _Atomic uint64_t ns;    /* the budget now, 0..busy_ns */
  _Atomic uint32_t fails; /* spins of busy_ns in a row that found nothing */
  uint64_t hold_until;    /* no spinning before (mono ns) */
  uint64_t hold_ns;       /* the last pause */
};

struct uroce_device {
  struct uroce_eng *eng;
  struct uroce_udp_sock sock;
  pthread_mutex_t lock; /* protects the engine and everything below */
  int progress;
  pthread_t thread;
  bool thread_started;
  atomic_bool stop;
  atomic_bool sleeping;
  /* While the application polls, it makes progress itself (an empty
   * uroce_poll_cq) and the thread stays out of its way ("backs off"):
   * when the last empty poll was (0: the application is not polling),
   * and whether the thread is backing off. */
  _Atomic uint64_t app_poll_ns;
  atomic_bool backoff;
  int epfd, doorbell;     /* the progress thread's */
  int app_bell;           /* wakes a poll that waits in the kernel */
  uint64_t busy_ns;       /* the most a thread spins idle before sleeping */
  struct uroce_spin spin; /* the progress thread's (device.c adapt_spin) */
  /* Polling applications: how long empty polls spin before one waits in
   * the kernel (adapts as spin does), since when the polls have found
   * nothing (0: they found something last), and whether a poll waits. */
  struct uroce_spin app_spin;
  _Atomic uint64_t app_idle_since;
  /* The spin's latest empty poll, and the longest gap between two. */
  _Atomic uint64_t app_last_turn, app_gap;
  /* The kernel's stamp (CLOCK_REALTIME ns) of the first packet received
   * since a sleeper cleared it: when its sleep's waking event came. Lock. */
  uint64_t rx_first;
  atomic_bool app_blocked;
  /* The application has armed a CQ for events (it has its own way to
   * sleep): its polls never wait in the kernel. Set once, never cleared. */
  atomic_bool app_events;
  /* uroce_device_poll_sleep(dev, 0): the application watches something
   * else too; its polls never wait in the kernel. */
  atomic_bool app_no_sleep;
  int mtu; /* enum uroce_mtu */
  uint8_t gid[16];
  struct uroce_pcap *pcap;
  struct jsonl *trace; /* the engine's events (trace.c); lock */
  char trace_who[96];  /* "dev": ..., "pid": ... of each line */
  double rx_drop;
  uint32_t rx_drop_mask; /* UROCE_OPM_* a packet needs to be dropped; 0 any */
  uint64_t rng;
  uint64_t rx_bad_icrc, rx_malformed, rx_dropped_impair;
  _Atomic uint64_t wakeups, doorbells; /* bumped outside the lock */
  _Atomic uint64_t app_sleeps;         /* polls that waited in the kernel */
  struct ulist cqs; /* every CQ's struct dcq, which the device frees */
  /* Completion notification. */
  struct dcq **armed; /* grows (doubling) as more CQs are armed at once */
  unsigned narmed, armed_cap;
  unsigned nchannels;
  /* Asynchronous events. */
  int async_fd;
  struct uroce_async_event async[UROCE_ASYNC_EVENTS];
  uint32_t async_head, async_tail;
  uint64_t async_lost;
  /* Packet batches, owned by whoever holds the lock. */
  struct uroce_udp_rx rx[UROCE_DEV_RX_MAX];
  struct uroce_tx_pkt tp[UROCE_DEV_TX_MAX];
  struct uroce_udp_tx tx[UROCE_DEV_TX_MAX];
  uint8_t zeros[4];
  uint8_t frame[UROCE_FRAME_HEADROOM + 65536];
};

/* After verbs calls that give the engine work. */
void uroce_device_kick(struct uroce_device *dev);
/* Sends every ACK held for a reply now (lock held): before a QP is
 * modified or destroyed, or the device closed, which would lose it (a
 * program that gets its last message and exits; the peer would wait for
 * its send completion until its retries ran out). */
void uroce_device_send_held_locked(struct uroce_device *dev);
/* A poll with a progress thread that found nothing: the application
 * makes progress itself unless another thread holds the device. */
void uroce_device_app_poll(struct uroce_device *dev);
/* A poll's turn at the device (inline mode, or a thread-mode poll that
 * found the CQ empty): progress, and once the application's polls have
 * found nothing for its spin budget, a wait in the kernel of at most
 * 200 us for a packet, a doorbell or the next timer (never once the
 * application has armed a CQ: app_events). found: this poll's CQ had
 * completions (never waits then). Returns the work done. */
int uroce_device_app_turn(struct uroce_device *dev, bool found);
/* The application stops polling: a poll returned work (the thread finds
 * out at its next look), or it is about to block on a completion channel
 * (blocks: the thread is woken). */
void uroce_device_app_leaves(struct uroce_device *dev, bool blocks);
/* trace.c: starts tracing to $UROCE_TRACE if set (0 or -errno, said on
 * stderr); stops and closes the trace (the device lock held or not
 * needed; the engine, if any, still there). */
int dev_trace_env(struct uroce_device *dev);
void dev_trace_close(struct uroce_device *dev);
/* Progress helpers in verbs.c; device lock held. */
void dev_fire_cq_events(struct uroce_device *dev);
void dev_move_async_events(struct uroce_device *dev);

#endif
