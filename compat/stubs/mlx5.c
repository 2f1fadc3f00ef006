/* A stand-in for libmlx5.so.1 (rdma-core's mlx5 provider and its direct
 * verbs): perftest links it, so its mlx5dv_* imports must resolve at load
 * time (BIND_NOW). uroce is no mlx5 device; every call reports that. */
#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <stdbool.h>
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT bool mlx5dv_is_supported(struct ibv_device *device) {
  return false;
}

EXPORT int mlx5dv_query_device(struct ibv_context *ctx,
                               struct mlx5dv_context *attrs) {
  return EOPNOTSUPP;
}

EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *device,
                                              struct mlx5dv_context_attr *a) {
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context,
                                       struct ibv_qp_init_attr_ex *qp_attr,
                                       struct mlx5dv_qp_init_attr *mlx5_attr) {
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp) {
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT struct mlx5dv_mkey *
mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *mkey_init_attr) {
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *mkey) {
  return EOPNOTSUPP;
}

EXPORT int mlx5dv_devx_general_cmd(struct ibv_context *context, const void *in,
                                   size_t inlen, void *out, size_t outlen) {
  return EOPNOTSUPP;
}

EXPORT int mlx5dv_crypto_login(struct ibv_context *context,
                               struct mlx5dv_crypto_login_attr *login_attr) {
  return EOPNOTSUPP;
}

EXPORT struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *context,
                                            struct mlx5dv_dek_init_attr *a) {
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT int mlx5dv_dek_destroy(struct mlx5dv_dek *dek) {
  return EOPNOTSUPP;
}
