/* uroce: RDMA over Converged Ethernet v2 in userspace.
 *
 * Public API. Every function that can fail returns 0 (or a non-negative
 * count) on success and a negative error code on failure: either one of the
 * UROCE_ERR_* codes below or a negated errno passed through from the OS
 * (-EINVAL, -ENOMEM, ...). uroce_strerror() names any of them. */
#ifndef UROCE_UROCE_H
#define UROCE_UROCE_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(UROCE_BUILDING) && defined(__GNUC__)
#define UROCE_EXPORT __attribute__((visibility("default")))
#else
#define UROCE_EXPORT
#endif

/* uroce's own error codes lie below -1000 so that they never collide with a
 * negated errno. -1000..-1099: errors of the caller's arguments or state.
 * -1100..-1199: a packet from the network is malformed and was dropped;
 * these are counted, never fatal. */
enum uroce_error {
  UROCE_ERR_INVALID_ARGUMENT = -1001,
  UROCE_ERR_NOBUF = -1002, /* output buffer or headroom too small */
  UROCE_ERR_NOT_SUPPORTED = -1003,
  UROCE_ERR_QUEUE_FULL = -1004, /* work queue or ring has no free entry */
  UROCE_ERR_BAD_STATE = -1005,  /* not allowed in the object's state, or an
                                   invalid QP state transition */
  UROCE_ERR_BUSY = -1006,       /* object still used by another object */
  UROCE_ERR_CAPS = -1007,       /* exceeds a capability or table limit */
  UROCE_ERR_CQ_OVERFLOW = -1008, /* a completion was lost: CQ overran */

  UROCE_ERR_PKT_TRUNCATED = -1101,  /* shorter than its own headers */
  UROCE_ERR_PKT_BAD_OPCODE = -1102, /* reserved or unknown BTH opcode */
  UROCE_ERR_PKT_BAD_TVER = -1103,   /* BTH transport version is not 0 */
  UROCE_ERR_PKT_BAD_PAD = -1104,    /* pad count larger than the payload */
  UROCE_ERR_PKT_BAD_LENGTH = -1105, /* IP/UDP lengths disagree with data */
  UROCE_ERR_PKT_BAD_IP = -1106,     /* IP header malformed */
  UROCE_ERR_PKT_NOT_ROCE = -1107,   /* not UDP to port 4791 */
  UROCE_ERR_PKT_BAD_ICRC = -1108,   /* invariant CRC does not match */
  UROCE_ERR_PKT_FRAGMENT = -1109,   /* IP fragment: RoCEv2 never fragments */
  UROCE_ERR_PKT_UNALIGNED = -1110,  /* BTH..ICRC length not a multiple of 4 */
  UROCE_ERR_PKT_EXTRA_PAYLOAD = -1111, /* payload on an opcode without one */
};

/* A short English description of an error code (never NULL). */
UROCE_EXPORT const char *uroce_strerror(int err);

/* The library's version string, e.g. "0.1.0". */
UROCE_EXPORT const char *uroce_version(void);

#ifdef __cplusplus
}
#endif

#endif
