/* The native API's verbs: thread-safe wrappers over the engine. Every call
 * that changes engine state takes the device lock briefly, then kicks the
 * progress thread (or, in inline mode, makes progress itself). poll_cq
 * reads the engine's single-producer completion ring under a per-CQ
 * consumer lock only, never the device lock. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "api/internal.h"
#include "mem/pin.h"
#include "uroce/uroce.h"

#define LOCK(d) pthread_mutex_lock(&(d)->lock)
#define UNLOCK(d) pthread_mutex_unlock(&(d)->lock)

static struct uroce_device *dev_of(struct uroce_eng *eng) {
  return uroce_eng_user(eng);
}

/* ---- protection domains ---- */

int uroce_alloc_pd(struct uroce_device *dev, struct uroce_pd **out) {
  if (!dev || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  LOCK(dev);
  int rv = uroce_eng_pd_new(dev->eng, out);
  UNLOCK(dev);
  return rv;
}

int uroce_dealloc_pd(struct uroce_pd *pd) {
  if (!pd)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_pd(pd));
  LOCK(dev);
  int rv = uroce_eng_pd_del(pd);
  UNLOCK(dev);
  return rv;
}

/* ---- memory regions ---- */

int uroce_reg_mr(struct uroce_pd *pd, void *addr, size_t length,
                 uint32_t access, struct uroce_mr **out) {
  return uroce_reg_mr_iova(pd, addr, length, (uint64_t)(uintptr_t)addr, access,
                           out);
}

/* Access rights that let someone write the region: its pages must be
 * writable when it is registered. */
static bool mr_writes(uint32_t access) {
  return access & (UROCE_ACCESS_LOCAL_WRITE | UROCE_ACCESS_REMOTE_WRITE |
                   UROCE_ACCESS_REMOTE_ATOMIC);
}

int uroce_reg_mr_iova(struct uroce_pd *pd, void *addr, size_t length,
                      uint64_t iova, uint32_t access, struct uroce_mr **out) {
  if (!pd || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_pd(pd));
  /* As the kernel does for ibv_reg_mr: the whole range must be mapped now
   * (writable for any write right), and its pages are locked until the
   * region goes. */
  int rv = uroce_pin_lock(addr, length, mr_writes(access));
  if (rv < 0)
    return rv;
  LOCK(dev);
  rv = uroce_eng_mr_reg_iova(pd, addr, length, iova, access, out);
  UNLOCK(dev);
  if (rv < 0)
    uroce_pin_unlock(addr, length);
  return rv;
}

int uroce_dereg_mr(struct uroce_mr *mr) {
  if (!mr)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (!mr->pd)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_pd(mr->pd));
  const void *addr = (const void *)(uintptr_t)mr->host;
  uint64_t length = mr->length;
  LOCK(dev);
  int rv = uroce_eng_mr_dereg(mr);
  UNLOCK(dev);
  if (rv == 0)
    uroce_pin_unlock(addr, length);
  return rv;
}

int uroce_rereg_mr(struct uroce_mr *mr, struct uroce_pd *pd, void *addr,
                   size_t length, uint32_t access) {
  if (!mr || !pd || !mr->pd || (!addr && length))
    return UROCE_ERR_INVALID_ARGUMENT;
  /* Both PDs of one device, whose lock then covers the region. */
  struct uroce_eng *eng = uroce_eng_of_pd(pd);
  if (uroce_eng_of_pd(mr->pd) != eng)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(eng);
  /* The new range is locked as a registration's is, before the region
   * moves to it; the old one is unlocked once it has (the two may
   * overlap: the pin module keeps what another registration covers). */
  int rv = uroce_pin_lock(addr, length, mr_writes(access));
  if (rv < 0)
    return rv;
  LOCK(dev);
  const void *old = (const void *)(uintptr_t)mr->host;
  uint64_t old_len = mr->length;
  rv = uroce_eng_mr_rereg(mr, pd, addr, length, access);
  UNLOCK(dev);
  uroce_pin_unlock(rv < 0 ? addr : old, rv < 0 ? length : old_len);
  return rv;
}

/* ---- memory windows ---- */

int uroce_alloc_mw(struct uroce_pd *pd, int type, struct uroce_mw **out) {
  if (!pd || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_pd(pd));
  LOCK(dev);
  int rv = uroce_eng_mw_alloc(pd, type, out);
  UNLOCK(dev);
  return rv;
}

int uroce_dealloc_mw(struct uroce_mw *mw) {
  if (!mw || !mw_entry(mw)->pd)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_pd(mw_entry(mw)->pd));
  LOCK(dev);
  int rv = uroce_eng_mw_dealloc(mw);
  UNLOCK(dev);
  return rv;
}

uint32_t uroce_mw_rkey(const struct uroce_mw *mw) {
  return ((const struct uroce_mr *)(const void *)mw)->rkey;
}

int uroce_mw_type(const struct uroce_mw *mw) {
  return ((const struct uroce_mr *)(const void *)mw)->kind == MR_KIND_MW1
             ? UROCE_MW_TYPE_1
             : UROCE_MW_TYPE_2;
}

uint32_t uroce_mr_lkey(const struct uroce_mr *mr) {
  return mr->lkey;
}
uint32_t uroce_mr_rkey(const struct uroce_mr *mr) {
  return mr->rkey;
}

/* ---- address handles ---- */

int uroce_create_ah(struct uroce_pd *pd, const struct uroce_ah_attr *attr,
                    struct uroce_ah **out) {
  if (!pd || !attr || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_pd(pd));
  LOCK(dev);
  int rv = uroce_eng_ah_new(pd, attr, out);
  UNLOCK(dev);
  return rv;
}

int uroce_destroy_ah(struct uroce_ah *ah) {
  if (!ah)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_ah(ah));
  LOCK(dev);
  int rv = uroce_eng_ah_del(ah);
  UNLOCK(dev);
  return rv;
}

/* ---- completion channels ---- */

int uroce_create_comp_channel(struct uroce_device *dev,
                              struct uroce_comp_channel **out) {
  if (!dev || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_comp_channel *ch = calloc(1, sizeof(*ch));
  if (!ch)
    return -ENOMEM;
  ch->dev = dev;
  ch->fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  if (ch->fd < 0) {
    int e = errno;
    free(ch);
    return -e;
  }
  pthread_mutex_init(&ch->lock, 0);
  LOCK(dev);
  dev->nchannels++;
  UNLOCK(dev);
  *out = ch;
  return 0;
}

int uroce_destroy_comp_channel(struct uroce_comp_channel *ch) {
  if (!ch)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = ch->dev;
  LOCK(dev);
  if (ch->refs) {
    UNLOCK(dev);
    return UROCE_ERR_BUSY;
  }
  dev->nchannels--;
  UNLOCK(dev);
  close(ch->fd);
  pthread_mutex_destroy(&ch->lock);
  free(ch);
  return 0;
}

int uroce_comp_channel_fd(const struct uroce_comp_channel *ch) {
  return ch->fd;
}

int uroce_get_cq_event(struct uroce_comp_channel *ch, struct uroce_cq **cq,
                       void **cq_context) {
  uint64_t one;
  if (!ch || !cq)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct dcq *d;
  uroce_device_app_leaves(ch->dev, true);
  do {
    /* One count per queued event; blocks unless the fd is non-blocking.
     * The event of a CQ destroyed since it was queued is a hole: it
     * wakes nobody up for nothing, the next one is waited for. */
    if (read(ch->fd, &one, sizeof(one)) != sizeof(one))
      return -errno;
    pthread_mutex_lock(&ch->lock);
    d = ch->ev[ch->ev_tail++ % UROCE_CHANNEL_EVENTS];
    if (d)
      d->retrieved++;
    pthread_mutex_unlock(&ch->lock);
  } while (!d);
  *cq = d->cq;
  if (cq_context)
    *cq_context = d->context;
  return 0;
}

void uroce_ack_cq_events(struct uroce_cq *cq, unsigned n) {
  struct dcq *d = uroce_eng_cq_user(cq);
  pthread_mutex_lock(&d->ch->lock);
  d->acked += n;
  pthread_mutex_unlock(&d->ch->lock);
}

/* Queues an event for an armed CQ that has a new completion. Device lock
 * held (called from progress). */
void dev_fire_cq_events(struct uroce_device *dev) {
  for (unsigned i = 0; i < dev->narmed;) {
    struct dcq *d = dev->armed[i];
    if (!uroce_eng_cq_added_since(d->cq, d->arm_head)) {
      i++;
      continue;
    }
    d->is_armed = false;
    dev->armed[i] = dev->armed[--dev->narmed];
    struct uroce_comp_channel *ch = d->ch;
    pthread_mutex_lock(&ch->lock);
    if (ch->ev_head - ch->ev_tail >= UROCE_CHANNEL_EVENTS) {
      /* The application re-arms without reading its events: the queue
       * already wakes it, so this one is dropped and counted. */
      ch->lost++;
      pthread_mutex_unlock(&ch->lock);
      continue;
    }
    ch->ev[ch->ev_head++ % UROCE_CHANNEL_EVENTS] = d;
    pthread_mutex_unlock(&ch->lock);
    uint64_t one = 1;
    if (write(ch->fd, &one, sizeof(one)) < 0) {
      /* an eventfd only fails to count past 2^64 - 2 */
    }
  }
}

/* ---- completion queues ---- */

int uroce_create_cq(struct uroce_device *dev, uint32_t cqe,
                    struct uroce_comp_channel *ch, void *context,
                    struct uroce_cq **out) {
  if (!dev || !out || (ch && ch->dev != dev))
    return UROCE_ERR_INVALID_ARGUMENT;
  struct dcq *d = calloc(1, sizeof(*d));
  if (!d)
    return -ENOMEM;
  pthread_mutex_init(&d->poll_lock, 0);
  d->dev = dev;
  d->ch = ch;
  d->context = context;
  LOCK(dev);
  if (ch && ch->refs >= UROCE_CHANNEL_EVENTS) {
    UNLOCK(dev);
    free(d);
    return UROCE_ERR_CAPS;
  }
  int rv = uroce_eng_cq_new(dev->eng, cqe, &d->cq);
  if (rv == 0) {
    uroce_eng_cq_set_user(d->cq, d);
    ulist_add_tail(&dev->cqs, &d->link);
    if (ch)
      ch->refs++;
    *out = d->cq;
  }
  UNLOCK(dev);
  if (rv < 0) {
    pthread_mutex_destroy(&d->poll_lock);
    free(d);
  }
  return rv;
}

int uroce_destroy_cq(struct uroce_cq *cq) {
  if (!cq)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct dcq *d = uroce_eng_cq_user(cq);
  struct uroce_device *dev = d->dev;
  LOCK(dev);
  /* The channel lock is held from the check to the removal of the CQ's
   * queued events, so that no uroce_get_cq_event hands one out between. */
  if (d->ch) {
    pthread_mutex_lock(&d->ch->lock);
    if (d->acked != d->retrieved) {
      pthread_mutex_unlock(&d->ch->lock);
      UNLOCK(dev);
      return UROCE_ERR_BUSY; /* ibv: every event taken must be acked */
    }
  }
  int rv = uroce_eng_cq_del(cq);
  if (d->ch) {
    struct uroce_comp_channel *ch = d->ch;
    /* Events queued and not taken go with the CQ (the device lock keeps
     * progress from queueing another). */
    for (uint32_t i = ch->ev_tail; rv == 0 && i != ch->ev_head; i++)
      if (ch->ev[i % UROCE_CHANNEL_EVENTS] == d)
        ch->ev[i % UROCE_CHANNEL_EVENTS] = NULL;
    pthread_mutex_unlock(&ch->lock);
  }
  if (rv == 0) {
    if (d->is_armed)
      for (unsigned i = 0; i < dev->narmed; i++)
        if (dev->armed[i] == d) {
          dev->armed[i] = dev->armed[--dev->narmed];
          break;
        }
    if (d->ch)
      d->ch->refs--;
    ulist_del(&d->link);
  }
  UNLOCK(dev);
  if (rv == 0) {
    pthread_mutex_destroy(&d->poll_lock);
    free(d);
  }
  return rv;
}

int uroce_resize_cq(struct uroce_cq *cq, uint32_t cqe) {
  if (!cq)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct dcq *d = uroce_eng_cq_user(cq);
  struct uroce_device *dev = d->dev;
  /* Work posted before the resize completes first, as on a NIC that had
   * the time meanwhile; then the device lock holds off the engine (the
   * producer), the poll lock the consumers. */
  uroce_device_progress(dev);
  LOCK(dev);
  pthread_mutex_lock(&d->poll_lock);
  int rv = uroce_eng_cq_resize(cq, cqe);
  pthread_mutex_unlock(&d->poll_lock);
  UNLOCK(dev);
  return rv;
}

int uroce_clean_cq(struct uroce_cq *cq, uint32_t qp_num) {
  if (!cq)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct dcq *d = uroce_eng_cq_user(cq);
  struct uroce_device *dev = d->dev;
  LOCK(dev);
  pthread_mutex_lock(&d->poll_lock);
  int n = (int)uroce_eng_cq_clean(cq, qp_num);
  pthread_mutex_unlock(&d->poll_lock);
  UNLOCK(dev);
  return n;
}

void *uroce_cq_context(const struct uroce_cq *cq) {
  return ((struct dcq *)uroce_eng_cq_user(cq))->context;
}

int uroce_poll_cq(struct uroce_cq *cq, int n, struct uroce_wc *wc) {
  if (!cq || n < 0 || (n && !wc))
    return UROCE_ERR_INVALID_ARGUMENT;
  struct dcq *d = uroce_eng_cq_user(cq);
  struct uroce_device *dev = d->dev;
  /* Inline mode: every poll makes progress (sends what was posted,
   * receives, runs timers), as a NIC would have meanwhile; once polls
   * have found nothing for a while, an empty one waits in the kernel for
   * the next packet or timer (uroce_device_app_turn). */
  if (dev->progress == UROCE_PROGRESS_INLINE) {
    int work = uroce_device_progress(dev);
    pthread_mutex_lock(&d->poll_lock);
    int rv = uroce_eng_cq_poll(cq, n, wc);
    pthread_mutex_unlock(&d->poll_lock);
    if (rv == 0 && n > 0 && !work && uroce_device_app_turn(dev, false)) {
      pthread_mutex_lock(&d->poll_lock);
      rv = uroce_eng_cq_poll(cq, n, wc);
      pthread_mutex_unlock(&d->poll_lock);
    } else if (rv > 0 || work) {
      uroce_device_app_leaves(dev, false);
    }
    return rv;
  }
  pthread_mutex_lock(&d->poll_lock);
  int rv = uroce_eng_cq_poll(cq, n, wc);
  pthread_mutex_unlock(&d->poll_lock);
  /* Nothing yet with a progress thread: the polling application makes
   * progress itself while it polls (the thread backs off), as a NIC would
   * have meanwhile, then looks again. */
  if (n > 0) {
    if (rv == 0) {
      uroce_device_app_poll(dev);
      pthread_mutex_lock(&d->poll_lock);
      rv = uroce_eng_cq_poll(cq, n, wc);
      pthread_mutex_unlock(&d->poll_lock);
    }
    /* With work in hand the application goes off to do it: the thread
     * takes over at its next look. */
    if (rv > 0)
      uroce_device_app_leaves(dev, false);
  }
  return rv;
}

int uroce_req_notify_cq(struct uroce_cq *cq, int solicited_only) {
  if (!cq)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct dcq *d = uroce_eng_cq_user(cq);
  if (!d->ch)
    return UROCE_ERR_INVALID_ARGUMENT; /* no channel to notify */
  struct uroce_device *dev = d->dev;
  if (!atomic_load_explicit(&dev->app_events, memory_order_relaxed))
    atomic_store(&dev->app_events, true);
  LOCK(dev);
  if (!d->is_armed && dev->narmed == dev->armed_cap) {
    /* More CQs armed at once than ever: room for twice as many (a CQ
     * left unarmed would never raise its event). */
    struct dcq **a = realloc(dev->armed, 2 * sizeof(*a) * dev->armed_cap);
    if (!a) {
      UNLOCK(dev);
      return -ENOMEM;
    }
    dev->armed = a;
    dev->armed_cap *= 2;
  }
  if (!d->is_armed) {
    /* An event fires for the first completion added after this call;
     * completions already in the ring do not count (ibv semantics). */
    d->arm_head = uroce_eng_cq_mark(cq);
    d->is_armed = true;
    d->solicited_only = solicited_only != 0;
    dev->armed[dev->narmed++] = d;
  }
  UNLOCK(dev);
  return 0;
}

/* ---- shared receive queues ---- */

int uroce_create_srq(struct uroce_pd *pd, const struct uroce_srq_attr *attr,
                     struct uroce_srq **out) {
  if (!pd || !attr || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_pd(pd));
  LOCK(dev);
  int rv = uroce_eng_srq_new(pd, attr, out);
  UNLOCK(dev);
  return rv;
}

int uroce_modify_srq(struct uroce_srq *srq, const struct uroce_srq_attr *attr,
                     int mask) {
  if (!srq)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_srq(srq));
  LOCK(dev);
  int rv = uroce_eng_srq_modify(srq, attr, mask);
  UNLOCK(dev);
  return rv;
}

int uroce_query_srq(struct uroce_srq *srq, struct uroce_srq_attr *attr) {
  if (!srq)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_srq(srq));
  LOCK(dev);
  int rv = uroce_eng_srq_query(srq, attr);
  UNLOCK(dev);
  return rv;
}

int uroce_destroy_srq(struct uroce_srq *srq) {
  if (!srq)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_srq(srq));
  LOCK(dev);
  int rv = uroce_eng_srq_del(srq);
  UNLOCK(dev);
  return rv;
}

int uroce_post_srq_recv(struct uroce_srq *srq, struct uroce_recv_wr *wr,
                        struct uroce_recv_wr **bad) {
  if (!srq)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_srq(srq));
  LOCK(dev);
  int rv = uroce_eng_srq_post_recv(srq, wr, bad);
  UNLOCK(dev);
  uroce_device_kick(dev); /* an RNR-waiting sender may now proceed */
  return rv;
}

uint32_t uroce_srq_num(const struct uroce_srq *srq) {
  return srq ? uroce_eng_srq_num(srq) : 0;
}

/* ---- XRC domains ---- */

int uroce_alloc_xrcd(struct uroce_device *dev, struct uroce_xrcd **out) {
  if (!dev || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  LOCK(dev);
  int rv = uroce_eng_xrcd_new(dev->eng, out);
  UNLOCK(dev);
  return rv;
}

int uroce_dealloc_xrcd(struct uroce_xrcd *xrcd) {
  if (!xrcd)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_xrcd(xrcd));
  LOCK(dev);
  int rv = uroce_eng_xrcd_del(xrcd);
  UNLOCK(dev);
  return rv;
}

int uroce_create_xrc_srq(struct uroce_pd *pd, struct uroce_xrcd *xrcd,
                         struct uroce_cq *cq, const struct uroce_srq_attr *attr,
                         struct uroce_srq **out) {
  if (!pd || !attr || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_pd(pd));
  LOCK(dev);
  int rv = uroce_eng_srq_new_xrc(pd, xrcd, cq, attr, out);
  UNLOCK(dev);
  return rv;
}

/* ---- queue pairs ---- */

int uroce_create_qp(struct uroce_pd *pd, const struct uroce_qp_init_attr *attr,
                    struct uroce_qp **out) {
  if (!attr || !out || (!pd && !attr->xrcd))
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev =
      dev_of(pd ? uroce_eng_of_pd(pd) : uroce_eng_of_xrcd(attr->xrcd));
  LOCK(dev);
  int rv = uroce_eng_qp_new(pd, attr, out);
  UNLOCK(dev);
  return rv;
}

int uroce_destroy_qp(struct uroce_qp *qp) {
  if (!qp)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_qp(qp));
  LOCK(dev);
  uroce_device_send_held_locked(dev);
  int rv = uroce_eng_qp_del(qp);
  UNLOCK(dev);
  return rv;
}

int uroce_modify_qp(struct uroce_qp *qp, const struct uroce_qp_attr *attr,
                    int mask) {
  if (!qp || !attr)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_qp(qp));
  LOCK(dev);
  uroce_device_send_held_locked(dev);
  int rv = uroce_eng_qp_modify(qp, attr, mask);
  UNLOCK(dev);
  uroce_device_kick(dev); /* e.g. to ERR: flushed completions to deliver */
  return rv;
}

int uroce_connect_qp(struct uroce_qp *qp, const struct uroce_qp_attr *attr) {
  if (!qp || !attr)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_qp(qp));
  LOCK(dev);
  int rv = uroce_eng_qp_connect(qp, attr);
  UNLOCK(dev);
  uroce_device_kick(dev);
  return rv;
}

int uroce_query_qp(struct uroce_qp *qp, struct uroce_qp_attr *attr,
                   struct uroce_qp_init_attr *init) {
  if (!qp)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_qp(qp));
  LOCK(dev);
  int rv = uroce_eng_qp_query(qp, attr, init);
  UNLOCK(dev);
  return rv;
}

int uroce_post_send(struct uroce_qp *qp, struct uroce_send_wr *wr,
                    struct uroce_send_wr **bad) {
  if (!qp)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_qp(qp));
  LOCK(dev);
  int rv = uroce_eng_qp_post_send(qp, wr, bad);
  UNLOCK(dev);
  uroce_device_kick(dev);
  return rv;
}

int uroce_post_recv(struct uroce_qp *qp, struct uroce_recv_wr *wr,
                    struct uroce_recv_wr **bad) {
  if (!qp)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_device *dev = dev_of(uroce_eng_of_qp(qp));
  LOCK(dev);
  int rv = uroce_eng_qp_post_recv(qp, wr, bad);
  UNLOCK(dev);
  uroce_device_kick(dev);
  return rv;
}

/* ---- asynchronous events ---- */

int uroce_async_fd(const struct uroce_device *dev) {
  return dev->async_fd;
}

int uroce_get_async_event(struct uroce_device *dev,
                          struct uroce_async_event *ev) {
  uint64_t one;
  if (!dev || !ev)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (read(dev->async_fd, &one, sizeof(one)) != sizeof(one))
    return -errno;
  LOCK(dev);
  *ev = dev->async[dev->async_tail++ % UROCE_ASYNC_EVENTS];
  UNLOCK(dev);
  return 0;
}

/* Moves the engine's async events to the device's queue. Lock held. */
void dev_move_async_events(struct uroce_device *dev) {
  struct uroce_async_event ev;
  while (uroce_eng_get_async_event(dev->eng, &ev) == 1) {
    if (dev->async_head - dev->async_tail >= UROCE_ASYNC_EVENTS) {
      dev->async_lost++;
      continue;
    }
    dev->async[dev->async_head++ % UROCE_ASYNC_EVENTS] = ev;
    uint64_t one = 1;
    if (write(dev->async_fd, &one, sizeof(one)) < 0) {
      /* cannot overflow: bounded by the ring */
    }
  }
}

const char *uroce_wc_status_str(uint32_t status) {
  switch (status) {
  case UROCE_WC_SUCCESS:
    return "success";
  case UROCE_WC_LOC_LEN_ERR:
    return "local length error";
  case UROCE_WC_LOC_QP_OP_ERR:
    return "local QP operation error";
  case UROCE_WC_LOC_PROT_ERR:
    return "local protection error";
  case UROCE_WC_WR_FLUSH_ERR:
    return "work request flushed";
  case UROCE_WC_BAD_RESP_ERR:
    return "bad response";
  case UROCE_WC_LOC_ACCESS_ERR:
    return "local access error";
  case UROCE_WC_REM_INV_REQ_ERR:
    return "remote invalid request";
  case UROCE_WC_REM_ACCESS_ERR:
    return "remote access error";
  case UROCE_WC_REM_OP_ERR:
    return "remote operational error";
  case UROCE_WC_RETRY_EXC_ERR:
    return "transport retry counter exceeded";
  case UROCE_WC_RNR_RETRY_EXC_ERR:
    return "RNR retry counter exceeded";
  case UROCE_WC_FATAL_ERR:
    return "fatal error";
  case UROCE_WC_GENERAL_ERR:
    return "general error";
  }
  return "unknown status";
}
