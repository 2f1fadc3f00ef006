/* uroce_strerror: every layer's error codes in words. */
#include <string.h>

#include "uroce/errors.h"

const char *uroce_strerror(int err) {
  switch (err) {
  case 0:
    return "success";
  case UROCE_ERR_INVALID_ARGUMENT:
    return "invalid argument";
  case UROCE_ERR_NOBUF:
    return "buffer too small";
  case UROCE_ERR_NOT_SUPPORTED:
    return "not supported";
  case UROCE_ERR_QUEUE_FULL:
    return "work queue full";
  case UROCE_ERR_BAD_STATE:
    return "not allowed in the object's state";
  case UROCE_ERR_BUSY:
    return "object still in use";
  case UROCE_ERR_CAPS:
    return "exceeds a capability or table limit";
  case UROCE_ERR_CQ_OVERFLOW:
    return "completion queue overrun: completions were lost";
  case UROCE_ERR_PKT_TRUNCATED:
    return "packet truncated: shorter than its headers";
  case UROCE_ERR_PKT_BAD_OPCODE:
    return "reserved or unknown BTH opcode";
  case UROCE_ERR_PKT_BAD_TVER:
    return "unsupported BTH transport version";
  case UROCE_ERR_PKT_BAD_PAD:
    return "pad count larger than the payload";
  case UROCE_ERR_PKT_BAD_LENGTH:
    return "IP or UDP length disagrees with the data";
  case UROCE_ERR_PKT_BAD_IP:
    return "malformed IP header";
  case UROCE_ERR_PKT_NOT_ROCE:
    return "not a RoCEv2 packet";
  case UROCE_ERR_PKT_BAD_ICRC:
    return "ICRC mismatch";
  case UROCE_ERR_PKT_FRAGMENT:
    return "fragmented IP packet";
  case UROCE_ERR_PKT_UNALIGNED:
    return "packet length not a multiple of 4";
  case UROCE_ERR_PKT_EXTRA_PAYLOAD:
    return "payload or pad on an opcode that carries none";
  }
  if (err < 0 && err > -4096)
    return strerror(-err);
  return "unknown error";
}
