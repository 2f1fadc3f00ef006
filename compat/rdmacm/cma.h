/* librdmacm.so.1 drop-in: internal declarations. Not API. */
#ifndef UROCE_COMPAT_RDMACM_H
#define UROCE_COMPAT_RDMACM_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>

#define RC_EXPORT __attribute__((visibility("default")))

#endif
