/* XRC domains for the drop-in: ibv_open_xrcd / ibv_close_xrcd with the
 * kernel's file semantics, within this process, and the bookkeeping of
 * XRC target QPs that ibv_open_qp opens by number.
 *
 * The kernel shares a domain between every opener of one file (inode),
 * across processes. Here a domain is shared by inode among the contexts
 * of this process; a uroce process is a NIC of its own, so another
 * process that opens the same file gets a domain of its own in its own
 * device, as two hosts would (docs/verbs.md). */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "compat.h"

struct uv_xdom {
  struct uroce_xrcd *ux;
  struct uroce_device *udev;
  bool has_inode; /* opened with a file (else fd -1: private) */
  dev_t st_dev;
  ino_t st_ino;
  unsigned opens;
  struct uv_xdom *next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uv_xdom *g_doms;
static struct uv_tgt *g_tgts;

struct uroce_xrcd *uv_xrcd_domain(struct ibv_xrcd *xrcd) {
  return xrcd ? UV_CONTAINER(xrcd, struct uv_xrcd, xrcd)->dom->ux : NULL;
}

static struct uv_xdom *find_dom(struct uroce_device *udev,
                                const struct stat *st) {
  for (struct uv_xdom *d = g_doms; d; d = d->next)
    if (d->has_inode && d->udev == udev && d->st_dev == st->st_dev &&
        d->st_ino == st->st_ino)
      return d;
  return NULL;
}

/* The domain for this open (g_lock held): the file's, a new one, or
 * NULL with errno (as the kernel answers: EINVAL without O_CREAT for a
 * file with no domain yet or with O_EXCL for one that has). */
static struct uv_xdom *dom_for(struct uroce_device *udev, int fd, int oflags) {
  struct stat st;
  struct uv_xdom *d = NULL;
  if (fd != -1) {
    if (fstat(fd, &st)) {
      errno = EBADF;
      return NULL;
    }
    d = find_dom(udev, &st);
    if ((!d && !(oflags & O_CREAT)) || (d && (oflags & O_EXCL))) {
      errno = EINVAL;
      return NULL;
    }
    if (d)
      return d;
  } else if (!(oflags & O_CREAT)) {
    errno = EINVAL; /* no file and nothing to create */
    return NULL;
  }
  d = calloc(1, sizeof(*d));
  if (!d) {
    errno = ENOMEM;
    return NULL;
  }
  int rv = uroce_alloc_xrcd(udev, &d->ux);
  if (rv < 0) {
    free(d);
    return uv_fail(rv);
  }
  d->udev = udev;
  if (fd != -1) {
    d->has_inode = true;
    d->st_dev = st.st_dev;
    d->st_ino = st.st_ino;
  }
  d->next = g_doms;
  g_doms = d;
  return d;
}

struct ibv_xrcd *uv_open_xrcd(struct ibv_context *context,
                              struct ibv_xrcd_init_attr *attr) {
  if (!attr || attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
    errno = attr ? EOPNOTSUPP : EINVAL;
    return NULL;
  }
  /* libibverbs asks for both, as the kernel's command carries both. */
  if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
      !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ||
      (attr->oflags & ~(O_CREAT | O_EXCL))) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_xrcd *x = calloc(1, sizeof(*x));
  if (!x) {
    errno = ENOMEM;
    return NULL;
  }
  pthread_mutex_lock(&g_lock);
  struct uv_xdom *d = dom_for(uv_ctx(context)->udev, attr->fd, attr->oflags);
  if (d)
    d->opens++;
  pthread_mutex_unlock(&g_lock);
  if (!d) {
    free(x);
    return NULL;
  }
  x->dom = d;
  x->xrcd.context = context;
  return &x->xrcd;
}

/* EBUSY while XRC SRQs or target QPs use the domain and this is its last
 * open, as the kernel answers. */
int uv_close_xrcd(struct ibv_xrcd *xrcd) {
  if (!xrcd)
    return EINVAL;
  struct uv_xrcd *x = UV_CONTAINER(xrcd, struct uv_xrcd, xrcd);
  struct uv_xdom *d = x->dom;
  pthread_mutex_lock(&g_lock);
  if (d->opens == 1) {
    int rv = uroce_dealloc_xrcd(d->ux);
    if (rv < 0) {
      pthread_mutex_unlock(&g_lock);
      return uv_errno(rv);
    }
    for (struct uv_xdom **p = &g_doms; *p; p = &(*p)->next)
      if (*p == d) {
        *p = d->next;
        break;
      }
    free(d);
  } else {
    d->opens--;
  }
  pthread_mutex_unlock(&g_lock);
  free(x);
  return 0;
}

int uv_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num) {
  struct uv_srq *srq = UV_CONTAINER(ibsrq, struct uv_srq, srq);
  if (!srq_num || srq->srq_type != IBV_SRQT_XRC)
    return EINVAL;
  *srq_num = uroce_srq_num(srq->usrq);
  return 0;
}

struct uv_tgt *uv_tgt_new(struct uroce_qp *uqp, struct uroce_xrcd *ux) {
  struct uv_tgt *t = calloc(1, sizeof(*t));
  if (!t)
    return NULL;
  t->uqp = uqp;
  t->ux = ux;
  t->handles = 1;
  pthread_mutex_lock(&g_lock);
  t->next = g_tgts;
  g_tgts = t;
  pthread_mutex_unlock(&g_lock);
  return t;
}

struct uv_tgt *uv_tgt_find(struct ibv_xrcd *xrcd, uint32_t qpn) {
  struct uroce_xrcd *ux = uv_xrcd_domain(xrcd);
  pthread_mutex_lock(&g_lock);
  struct uv_tgt *t = g_tgts;
  for (; t; t = t->next)
    if (uroce_qp_num(t->uqp) == qpn && t->ux == ux)
      break;
  if (t)
    t->handles++;
  pthread_mutex_unlock(&g_lock);
  return t;
}

bool uv_tgt_others(struct uv_tgt *t) {
  pthread_mutex_lock(&g_lock);
  bool others = t->handles > 1;
  if (others)
    t->handles--;
  pthread_mutex_unlock(&g_lock);
  return others;
}

void uv_tgt_free(struct uv_tgt *t) {
  pthread_mutex_lock(&g_lock);
  for (struct uv_tgt **p = &g_tgts; *p; p = &(*p)->next)
    if (*p == t) {
      *p = t->next;
      break;
    }
  pthread_mutex_unlock(&g_lock);
  free(t);
}
