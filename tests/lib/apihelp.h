/* Helpers for the tests of the public API (include/uroce): two devices'
 * RC QPs connected the way a verbs program connects them. */
#ifndef UROCE_TESTS_APIHELP_H
#define UROCE_TESTS_APIHELP_H

#include <stdint.h>

#include "uroce/uroce.h"

/* Brings qp (RESET) to RTS aimed at peer_qp on peer_dev: the given access
 * rights, both PSNs psn and the given timeout; path MTU 1024, 4 RDMA
 * READs or atomics in flight each way, 7 retries (unlimited RNR ones).
 * Returns what uroce_connect_qp returns. */
int api_connect_rc(struct uroce_qp *qp, const struct uroce_device *peer_dev,
                   const struct uroce_qp *peer_qp, uint32_t access,
                   uint32_t psn, uint8_t timeout);

#endif
