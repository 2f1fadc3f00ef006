/* InfiniBand Communication Management MADs (IBA vol 1 chapter 12): the
 * layouts of REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ and SIDR_REP,
 * parsed into one flat structure and built back from it. Used by the
 * librdmacm drop-in (compat/rdmacm) on the wire and by `uroce dump` to
 * decode them; docs/rdmacm.md lists the offsets. Pure functions over
 * bounded buffers: a MAD is exactly 256 bytes, anything else is refused. */
#ifndef UROCE_WIRE_CM_MAD_H
#define UROCE_WIRE_CM_MAD_H

#include <stddef.h>
#include <stdint.h>

#define UROCE_MAD_LEN 256
#define UROCE_MAD_HDR_LEN 24
#define UROCE_MAD_CLASS_CM 0x07
#define UROCE_CM_CLASS_VERSION 2
#define UROCE_MAD_METHOD_SEND 0x03
#define UROCE_GSI_QKEY 0x80010000u

enum uroce_cm_attr {
  UROCE_CM_REQ = 0x0010,
  UROCE_CM_MRA = 0x0011,
  UROCE_CM_REJ = 0x0012,
  UROCE_CM_REP = 0x0013,
  UROCE_CM_RTU = 0x0014,
  UROCE_CM_DREQ = 0x0015,
  UROCE_CM_DREP = 0x0016,
  UROCE_CM_SIDR_REQ = 0x0017,
  UROCE_CM_SIDR_REP = 0x0018,
};

/* Every field any of the messages has; each message uses its own. */
struct uroce_cm_msg {
  uint16_t attr_id; /* enum uroce_cm_attr */
  uint8_t method;
  uint64_t tid;
  uint32_t local_id, remote_id; /* comm IDs; SIDR: request ID in local_id */
  uint64_t service_id;
  uint64_t ca_guid;
  uint32_t qkey;
  uint32_t qpn; /* REQ/REP local QPN, DREQ remote QPN, SIDR_REP QPN */
  uint32_t psn; /* REQ/REP starting PSN */
  uint8_t resp_res, init_depth;
  uint8_t remote_cm_timeout, local_cm_timeout, max_cm_retries;
  uint8_t transport; /* REQ: 0 RC, 1 UC, 3 RD */
  uint8_t retry_count, rnr_retry, srq, e2e_fc;
  uint8_t mtu; /* enum ibv_mtu */
  uint16_t pkey;
  uint16_t slid, dlid;
  uint8_t sgid[16], dgid[16]; /* REQ primary local / remote port GIDs */
  uint32_t flow_label;
  uint8_t tclass, hop_limit, sl, subnet_local, ack_timeout;
  uint8_t target_ack_delay, failover;
  uint8_t msg; /* REJ: message rejected, MRA: message MRAed (0 REQ, 1 REP,
                  2 other) */
  uint8_t service_timeout; /* MRA */
  uint16_t reason;         /* REJ */
  uint8_t ari_len;
  uint8_t ari[72];
  uint8_t status; /* SIDR_REP */
  uint8_t priv_len;
  uint8_t priv[224]; /* the message's private data (its whole field) */
};

/* The private data field's size for a message, 0 for an unknown one. */
size_t uroce_cm_priv_len(uint16_t attr_id);
/* A message's name ("REQ"), or NULL if attr_id is not a CM message. */
const char *uroce_cm_attr_name(uint16_t attr_id);
/* REJ reason in words, or NULL. */
const char *uroce_cm_rej_reason_str(uint16_t reason);

/* Parses a MAD of len bytes. Returns 0, or -1 if it is not a CM MAD of
 * a known message (wrong length, class, version or attribute). */
int uroce_cm_parse(const uint8_t *mad, size_t len, struct uroce_cm_msg *m);
/* Writes m as a 256-byte MAD. m->priv_len bytes of m->priv go into the
 * private data (the rest zero). Returns 0, or -1 for an unknown attr_id
 * or private data longer than the message's field. */
int uroce_cm_build(const struct uroce_cm_msg *m, uint8_t mad[UROCE_MAD_LEN]);
/* One line describing m ("REQ lcid=0x.. sid=0x.. qpn=0x.. ..."), at most
 * size bytes, NUL-terminated; returns the length it needed. */
size_t uroce_cm_describe(const struct uroce_cm_msg *m, char *buf, size_t size);

#endif
