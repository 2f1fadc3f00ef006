/* uroce's error codes, and uroce_strerror() that names them: what every
 * layer returns, from the packet parser up to the public API (uroce.h
 * includes this header). A function that can fail returns 0 (or a
 * non-negative count) on success and a negative error on failure: one of
 * the UROCE_ERR_* codes below or a negated errno passed through from the
 * OS (-EINVAL, -ENOMEM, ...). */
#ifndef UROCE_ERRORS_H
#define UROCE_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Marks what liburoce.so exports (every public header's functions; the
 * library's other symbols are hidden). */
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
  UROCE_ERR_QUEUE_FULL = -1004,  /* work queue or ring has no free entry */
  UROCE_ERR_BAD_STATE = -1005,   /* not allowed in the object's state, or an
                                    invalid QP state transition */
  UROCE_ERR_BUSY = -1006,        /* object still used by another object */
  UROCE_ERR_CAPS = -1007,        /* exceeds a capability or table limit */
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

#ifdef __cplusplus
}
#endif

#endif
