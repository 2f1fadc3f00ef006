/* A stand-in for libefa.so.1 (rdma-core's EFA provider direct verbs):
 * perftest links it, so its efadv_* imports must resolve at load time
 * (BIND_NOW). uroce is no EFA device; every call reports that. */
#include <errno.h>
#include <infiniband/efadv.h>
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int efadv_query_device(struct ibv_context *ibvctx,
                              struct efadv_device_attr *attr, uint32_t inlen) {
  return EOPNOTSUPP;
}

EXPORT struct ibv_qp *efadv_create_driver_qp(struct ibv_pd *ibvpd,
                                             struct ibv_qp_init_attr *attr,
                                             uint32_t driver_qp_type) {
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx,
                                         struct ibv_qp_init_attr_ex *attr_ex,
                                         struct efadv_qp_init_attr *efa_attr,
                                         uint32_t inlen) {
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT int efadv_query_ah(struct ibv_ah *ibvah, struct efadv_ah_attr *attr,
                          uint32_t inlen) {
  return EOPNOTSUPP;
}

EXPORT struct ibv_cq_ex *efadv_create_cq(struct ibv_context *ibvctx,
                                         struct ibv_cq_init_attr_ex *attr_ex,
                                         struct efadv_cq_init_attr *efa_attr,
                                         uint32_t inlen) {
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT struct efadv_cq *efadv_cq_from_ibv_cq_ex(struct ibv_cq_ex *ibvcqx) {
  errno = EOPNOTSUPP;
  return NULL;
}
