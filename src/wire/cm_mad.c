/* CM MADs: see cm_mad.h. Offsets are from the start of the MAD; the CM
 * message follows the 24-byte common MAD header. */
#include "cm_mad.h"

#include <stdio.h>
#include <string.h>

static uint32_t get(const uint8_t *p, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; i++)
    v = v << 8 | p[i];
  return v;
}
static uint64_t get64(const uint8_t *p) {
  return (uint64_t)get(p, 4) << 32 | get(p + 4, 4);
}
static void put(uint8_t *p, int n, uint32_t v) {
  for (int i = n - 1; i >= 0; i--, v >>= 8)
    p[i] = (uint8_t)v;
}
static void put64(uint8_t *p, uint64_t v) {
  put(p, 4, (uint32_t)(v >> 32));
  put(p + 4, 4, (uint32_t)v);
}

#define H UROCE_MAD_HDR_LEN

/* Where each message's private data starts, and its size. */
static int priv_off(uint16_t a, size_t *len) {
  static const struct {
    uint16_t attr;
    uint16_t off, len;
  } t[] = {
      {UROCE_CM_REQ, 140, 92},      {UROCE_CM_MRA, 10, 222},
      {UROCE_CM_REJ, 84, 148},      {UROCE_CM_REP, 36, 196},
      {UROCE_CM_RTU, 8, 224},       {UROCE_CM_DREQ, 12, 220},
      {UROCE_CM_DREP, 8, 224},      {UROCE_CM_SIDR_REQ, 16, 216},
      {UROCE_CM_SIDR_REP, 96, 136},
  };
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
    if (t[i].attr == a) {
      *len = t[i].len;
      return H + t[i].off;
    }
  return -1;
}

size_t uroce_cm_priv_len(uint16_t attr_id) {
  size_t len = 0;
  return priv_off(attr_id, &len) < 0 ? 0 : len;
}

const char *uroce_cm_attr_name(uint16_t a) {
  static const char *const n[] = {"REQ",  "MRA",  "REJ",      "REP",     "RTU",
                                  "DREQ", "DREP", "SIDR_REQ", "SIDR_REP"};
  return a >= UROCE_CM_REQ && a <= UROCE_CM_SIDR_REP ? n[a - UROCE_CM_REQ]
                                                     : NULL;
}

const char *uroce_cm_rej_reason_str(uint16_t r) {
  switch (r) {
  case 1:
    return "no QP";
  case 2:
    return "no EEC";
  case 3:
    return "no resources";
  case 4:
    return "timeout";
  case 5:
    return "unsupported request";
  case 6:
    return "invalid comm ID";
  case 7:
    return "invalid comm instance";
  case 8:
    return "invalid service ID";
  case 9:
    return "invalid transport type";
  case 10:
    return "stale connection";
  case 13:
    return "invalid GID";
  case 26:
    return "invalid MTU";
  case 28:
    return "consumer reject";
  case 30:
    return "duplicate local comm ID";
  case 31:
    return "invalid class version";
  }
  return NULL;
}

int uroce_cm_parse(const uint8_t *b, size_t len, struct uroce_cm_msg *m) {
  size_t plen;
  int poff;
  if (!b || !m || len != UROCE_MAD_LEN || b[0] != 1 ||
      b[1] != UROCE_MAD_CLASS_CM || b[2] != UROCE_CM_CLASS_VERSION)
    return -1;
  memset(m, 0, sizeof(*m));
  m->method = b[3];
  m->tid = get64(b + 8);
  m->attr_id = (uint16_t)get(b + 16, 2);
  if ((poff = priv_off(m->attr_id, &plen)) < 0)
    return -1;
  const uint8_t *p = b + H;
  m->priv_len = (uint8_t)plen;
  memcpy(m->priv, b + poff, plen);
  m->local_id = get(p, 4);
  switch (m->attr_id) {
  case UROCE_CM_REQ:
    m->service_id = get64(p + 8);
    m->ca_guid = get64(p + 16);
    m->qkey = get(p + 28, 4);
    m->qpn = get(p + 32, 3);
    m->resp_res = p[35];
    m->init_depth = p[39];
    m->remote_cm_timeout = p[43] >> 3;
    m->transport = (p[43] >> 1) & 3;
    m->e2e_fc = p[43] & 1;
    m->psn = get(p + 44, 3);
    m->local_cm_timeout = p[47] >> 3;
    m->retry_count = p[47] & 7;
    m->pkey = (uint16_t)get(p + 48, 2);
    m->mtu = p[50] >> 4;
    m->rnr_retry = p[50] & 7;
    m->max_cm_retries = p[51] >> 4;
    m->srq = (p[51] >> 3) & 1;
    m->slid = (uint16_t)get(p + 52, 2);
    m->dlid = (uint16_t)get(p + 54, 2);
    memcpy(m->sgid, p + 56, 16);
    memcpy(m->dgid, p + 72, 16);
    m->flow_label = get(p + 88, 3) >> 4;
    m->tclass = p[92];
    m->hop_limit = p[93];
    m->sl = p[94] >> 4;
    m->subnet_local = (p[94] >> 3) & 1;
    m->ack_timeout = p[95] >> 3;
    break;
  case UROCE_CM_MRA:
    m->remote_id = get(p + 4, 4);
    m->msg = p[8] >> 6;
    m->service_timeout = p[9] >> 3;
    break;
  case UROCE_CM_REJ:
    m->remote_id = get(p + 4, 4);
    m->msg = p[8] >> 6;
    m->ari_len = p[9] >> 1;
    if (m->ari_len > sizeof(m->ari))
      m->ari_len = sizeof(m->ari);
    m->reason = (uint16_t)get(p + 10, 2);
    memcpy(m->ari, p + 12, m->ari_len);
    break;
  case UROCE_CM_REP:
    m->remote_id = get(p + 4, 4);
    m->qkey = get(p + 8, 4);
    m->qpn = get(p + 12, 3);
    m->psn = get(p + 20, 3);
    m->resp_res = p[24];
    m->init_depth = p[25];
    m->target_ack_delay = p[26] >> 3;
    m->failover = (p[26] >> 1) & 3;
    m->e2e_fc = p[26] & 1;
    m->rnr_retry = p[27] >> 5;
    m->srq = (p[27] >> 4) & 1;
    m->ca_guid = get64(p + 28);
    break;
  case UROCE_CM_RTU:
  case UROCE_CM_DREP:
    m->remote_id = get(p + 4, 4);
    break;
  case UROCE_CM_DREQ:
    m->remote_id = get(p + 4, 4);
    m->qpn = get(p + 8, 3);
    break;
  case UROCE_CM_SIDR_REQ:
    m->pkey = (uint16_t)get(p + 4, 2);
    m->service_id = get64(p + 8);
    break;
  case UROCE_CM_SIDR_REP:
    m->status = p[4];
    m->ari_len = p[5];
    m->qpn = get(p + 8, 3);
    m->service_id = get64(p + 12);
    m->qkey = get(p + 20, 4);
    break;
  }
  return 0;
}

int uroce_cm_build(const struct uroce_cm_msg *m, uint8_t b[UROCE_MAD_LEN]) {
  size_t plen;
  int poff = priv_off(m->attr_id, &plen);
  if (poff < 0 || m->priv_len > plen)
    return -1;
  memset(b, 0, UROCE_MAD_LEN);
  b[0] = 1; /* base version */
  b[1] = UROCE_MAD_CLASS_CM;
  b[2] = UROCE_CM_CLASS_VERSION;
  b[3] = m->method ? m->method : UROCE_MAD_METHOD_SEND;
  put64(b + 8, m->tid);
  put(b + 16, 2, m->attr_id);
  uint8_t *p = b + H;
  put(p, 4, m->local_id);
  switch (m->attr_id) {
  case UROCE_CM_REQ:
    put64(p + 8, m->service_id);
    put64(p + 16, m->ca_guid);
    put(p + 28, 4, m->qkey);
    put(p + 32, 3, m->qpn);
    p[35] = m->resp_res;
    p[39] = m->init_depth;
    p[43] = (uint8_t)(m->remote_cm_timeout << 3 | (m->transport & 3) << 1 |
                      (m->e2e_fc & 1));
    put(p + 44, 3, m->psn);
    p[47] = (uint8_t)(m->local_cm_timeout << 3 | (m->retry_count & 7));
    put(p + 48, 2, m->pkey);
    p[50] = (uint8_t)(m->mtu << 4 | (m->rnr_retry & 7));
    p[51] = (uint8_t)(m->max_cm_retries << 4 | (m->srq & 1) << 3);
    put(p + 52, 2, m->slid);
    put(p + 54, 2, m->dlid);
    memcpy(p + 56, m->sgid, 16);
    memcpy(p + 72, m->dgid, 16);
    put(p + 88, 3, m->flow_label << 4);
    p[91] = 0x2; /* packet rate: 2.5 Gb/s, meaningless on RoCE */
    p[92] = m->tclass;
    p[93] = m->hop_limit;
    p[94] = (uint8_t)(m->sl << 4 | (m->subnet_local & 1) << 3);
    p[95] = (uint8_t)(m->ack_timeout << 3);
    break;
  case UROCE_CM_MRA:
    put(p + 4, 4, m->remote_id);
    p[8] = (uint8_t)(m->msg << 6);
    p[9] = (uint8_t)(m->service_timeout << 3);
    break;
  case UROCE_CM_REJ:
    put(p + 4, 4, m->remote_id);
    p[8] = (uint8_t)(m->msg << 6);
    p[9] = (uint8_t)((m->ari_len > 72 ? 72 : m->ari_len) << 1);
    put(p + 10, 2, m->reason);
    memcpy(p + 12, m->ari, m->ari_len > 72 ? 72 : m->ari_len);
    break;
  case UROCE_CM_REP:
    put(p + 4, 4, m->remote_id);
    put(p + 8, 4, m->qkey);
    put(p + 12, 3, m->qpn);
    put(p + 20, 3, m->psn);
    p[24] = m->resp_res;
    p[25] = m->init_depth;
    p[26] = (uint8_t)(m->target_ack_delay << 3 | (m->failover & 3) << 1 |
                      (m->e2e_fc & 1));
    p[27] = (uint8_t)(m->rnr_retry << 5 | (m->srq & 1) << 4);
    put64(p + 28, m->ca_guid);
    break;
  case UROCE_CM_RTU:
  case UROCE_CM_DREP:
    put(p + 4, 4, m->remote_id);
    break;
  case UROCE_CM_DREQ:
    put(p + 4, 4, m->remote_id);
    put(p + 8, 3, m->qpn);
    break;
  case UROCE_CM_SIDR_REQ:
    put(p + 4, 2, m->pkey);
    put64(p + 8, m->service_id);
    break;
  case UROCE_CM_SIDR_REP:
    p[4] = m->status;
    put(p + 8, 3, m->qpn);
    put64(p + 12, m->service_id);
    put(p + 20, 4, m->qkey);
    break;
  }
  memcpy(b + poff, m->priv, m->priv_len);
  return 0;
}

static void gid_str(const uint8_t g[16], char *s, size_t n) {
  static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (!memcmp(g, v4, 12))
    snprintf(s, n, "::ffff:%u.%u.%u.%u", g[12], g[13], g[14], g[15]);
  else
    snprintf(s, n,
             "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
             "%02x%02x",
             g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10],
             g[11], g[12], g[13], g[14], g[15]);
}

size_t uroce_cm_describe(const struct uroce_cm_msg *m, char *buf, size_t n) {
  const char *name = uroce_cm_attr_name(m->attr_id);
  char sg[48], dg[48];
  int r;
  if (!n)
    buf = NULL;
  switch (m->attr_id) {
  case UROCE_CM_REQ:
    gid_str(m->sgid, sg, sizeof(sg));
    gid_str(m->dgid, dg, sizeof(dg));
    r = snprintf(buf, n,
                 "CM %s tid=0x%llx lcid=0x%08x sid=0x%016llx qpn=0x%06x "
                 "psn=0x%06x qkey=0x%08x rres=%u idepth=%u mtu=%u retry=%u "
                 "rnr=%u srq=%u pkey=0x%04x sgid=%s dgid=%s",
                 name, (unsigned long long)m->tid, m->local_id,
                 (unsigned long long)m->service_id, m->qpn, m->psn, m->qkey,
                 m->resp_res, m->init_depth, 128u << m->mtu, m->retry_count,
                 m->rnr_retry, m->srq, m->pkey, sg, dg);
    break;
  case UROCE_CM_REP:
    r = snprintf(buf, n,
                 "CM %s tid=0x%llx lcid=0x%08x rcid=0x%08x qpn=0x%06x "
                 "psn=0x%06x rres=%u idepth=%u rnr=%u srq=%u",
                 name, (unsigned long long)m->tid, m->local_id, m->remote_id,
                 m->qpn, m->psn, m->resp_res, m->init_depth, m->rnr_retry,
                 m->srq);
    break;
  case UROCE_CM_REJ: {
    const char *why = uroce_cm_rej_reason_str(m->reason);
    r = snprintf(buf, n,
                 "CM %s tid=0x%llx lcid=0x%08x rcid=0x%08x msg=%u "
                 "reason=%u (%s)",
                 name, (unsigned long long)m->tid, m->local_id, m->remote_id,
                 m->msg, m->reason, why ? why : "?");
    break;
  }
  case UROCE_CM_MRA:
    r = snprintf(buf, n,
                 "CM %s tid=0x%llx lcid=0x%08x rcid=0x%08x msg=%u timeout=%u",
                 name, (unsigned long long)m->tid, m->local_id, m->remote_id,
                 m->msg, m->service_timeout);
    break;
  case UROCE_CM_DREQ:
    r = snprintf(buf, n, "CM %s tid=0x%llx lcid=0x%08x rcid=0x%08x qpn=0x%06x",
                 name, (unsigned long long)m->tid, m->local_id, m->remote_id,
                 m->qpn);
    break;
  case UROCE_CM_SIDR_REQ:
    r = snprintf(buf, n, "CM %s tid=0x%llx reqid=0x%08x sid=0x%016llx", name,
                 (unsigned long long)m->tid, m->local_id,
                 (unsigned long long)m->service_id);
    break;
  case UROCE_CM_SIDR_REP:
    r = snprintf(buf, n,
                 "CM %s tid=0x%llx reqid=0x%08x status=%u qpn=0x%06x "
                 "qkey=0x%08x sid=0x%016llx",
                 name, (unsigned long long)m->tid, m->local_id, m->status,
                 m->qpn, m->qkey, (unsigned long long)m->service_id);
    break;
  default: /* RTU, DREP */
    r = snprintf(buf, n, "CM %s tid=0x%llx lcid=0x%08x rcid=0x%08x",
                 name ? name : "?", (unsigned long long)m->tid, m->local_id,
                 m->remote_id);
  }
  return r < 0 ? 0 : (size_t)r;
}
