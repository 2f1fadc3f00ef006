/* XRC (eXtended Reliable Connected, IBA 9.8): domains, XRC SRQs, SRQ
 * numbers, and the target QP's choice of SRQ per request.
 *
 * An initiator QP is an RC requester whose requests carry an XRCETH naming
 * an SRQ of the target's domain (req.c); a target QP is an RC responder
 * with no PD, CQ or queue of its own: each request binds it to the SRQ it
 * names (here), whose queue receives a SEND, whose CQ gets the completion
 * and whose PD checks the keys of WRITE, READ and atomics. Everything else
 * (PSNs, ACKs, NAKs, retries) is RC's, in RC's code. */
#include <errno.h>

#include "transport/qp.h"

int uroce_eng_xrcd_new(struct uroce_eng *eng, struct uroce_xrcd **out) {
  if (!eng || !out)
    return UROCE_ERR_INVALID_ARGUMENT;
  struct uroce_xrcd *x = eng_alloc(eng, sizeof(*x));
  if (!x)
    return -ENOMEM;
  x->eng = eng;
  x->refs = 0;
  ulist_init(&x->srqs);
  ulist_add_tail(&eng->xrcds, &x->link);
  *out = x;
  return 0;
}

int uroce_eng_xrcd_del(struct uroce_xrcd *xrcd) {
  if (!xrcd)
    return UROCE_ERR_INVALID_ARGUMENT;
  if (xrcd->refs)
    return UROCE_ERR_BUSY;
  ulist_del(&xrcd->link);
  eng_free(xrcd->eng, xrcd);
  return 0;
}

struct uroce_eng *uroce_eng_of_xrcd(const struct uroce_xrcd *xrcd) {
  return xrcd->eng;
}

struct uroce_xrcd *uroce_eng_srq_xrcd(const struct uroce_srq *srq) {
  return srq->xrcd;
}

struct uroce_xrcd *uroce_eng_qp_xrcd(const struct uroce_qp *qp) {
  return qp->xrcd;
}

uint32_t uroce_eng_srq_num(const struct uroce_srq *srq) {
  return srq->num;
}

static bool srq_num_used(struct uroce_eng *eng, uint32_t n) {
  for (struct ulist *l = eng->srqs.next; l != &eng->srqs; l = l->next)
    if (ULIST_ENTRY(l, struct uroce_srq, link)->num == n)
      return true;
  return false;
}

/* Numbers count up from 1, as a NIC's do, so a number freed is not soon
 * given again. Not drawn from the engine's random source: an SRQ made
 * must not change the keys and QPNs a seeded run draws after it. */
uint32_t eng_srq_num(struct uroce_eng *eng) {
  for (;;) {
    uint32_t n = eng->srq_next++ & 0xFFFFFF;
    if (n && !srq_num_used(eng, n))
      return n;
  }
}

int uroce_eng_srq_new_xrc(struct uroce_pd *pd, struct uroce_xrcd *xrcd,
                          struct uroce_cq *cq,
                          const struct uroce_srq_attr *attr,
                          struct uroce_srq **out) {
  if (!pd || !xrcd || !cq || !out || xrcd->eng != pd->eng || cq->eng != pd->eng)
    return UROCE_ERR_INVALID_ARGUMENT;
  int rc = uroce_eng_srq_new(pd, attr, out);
  if (rc)
    return rc;
  struct uroce_srq *srq = *out;
  srq->xrcd = xrcd;
  srq->cq = cq;
  xrcd->refs++;
  cq->refs++;
  ulist_add_tail(&xrcd->srqs, &srq->xlink);
  return 0;
}

void xrc_srq_gone(struct uroce_srq *srq) {
  struct uroce_eng *eng = srq->eng;
  for (struct ulist *l = eng->qps.next; l != &eng->qps; l = l->next) {
    struct uroce_qp *qp = ULIST_ENTRY(l, struct uroce_qp, link);
    if (qp->xrc != XRC_TGT || qp->srq != srq)
      continue;
    qp->resp.have_rwqe = false; /* its WQE went with the SRQ */
    qp->srq = 0;
    qp->pd = 0;
    qp->rcq = 0;
  }
  ulist_del(&srq->xlink);
  srq->xrcd->refs--;
  srq->cq->refs--;
}

bool xrc_tgt_bind(struct uroce_qp *qp, const struct uroce_pkt_info *pi) {
  const uint8_t *h = uroce_pkt_hdr(pi, UROCE_HDR_XRCETH);
  uint32_t n = h ? uroce_xrceth_srqn(h) : 0;
  struct uroce_srq *srq = 0;
  for (struct ulist *l = qp->xrcd->srqs.next; l != &qp->xrcd->srqs;
       l = l->next) {
    struct uroce_srq *s = ULIST_ENTRY(l, struct uroce_srq, xlink);
    if (s->num == n) {
      srq = s;
      break;
    }
  }
  /* A message's packets all go to the SRQ its first one named. */
  if (!srq || ((qp->resp.have_rwqe || qp->resp.in_msg) && srq != qp->srq))
    return false;
  qp->srq = srq;
  qp->pd = srq->pd;
  qp->rcq = srq->cq;
  return true;
}
