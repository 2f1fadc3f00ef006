/* libibverbs drop-in: exported functions uroce does not support. They exist
 * because binaries are linked with BIND_NOW (every imported symbol must
 * resolve at load time) and fail the way a provider without the feature
 * does: EOPNOTSUPP, or NULL with errno = EOPNOTSUPP. Never abort.
 *
 * The IBVERBS_PRIVATE_34 functions form the interface between libibverbs
 * and its kernel-backed providers (rdma-core's driver.h, which is not
 * installed); with no kernel device they have nothing to do, so they are
 * defined here without their prototypes and fail the same way. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define UV_EXPORT __attribute__((visibility("default")))

#define STUB_INT(name)                                                         \
  UV_EXPORT int name(void);                                                    \
  int name(void) {                                                             \
    return EOPNOTSUPP;                                                         \
  }
#define STUB_PTR(name)                                                         \
  UV_EXPORT void *name(void);                                                  \
  void *name(void) {                                                           \
    errno = EOPNOTSUPP;                                                        \
    return NULL;                                                               \
  }
#define STUB_VOID(name)                                                        \
  UV_EXPORT void name(void);                                                   \
  void name(void) {}

/* Kernel ABI structure copies: only librdmacm calls them, after kernel
 * RDMA CM requests that cannot succeed without the kernel; no-ops. */
STUB_VOID(ibv_copy_path_rec_from_kern)
STUB_VOID(ibv_copy_path_rec_to_kern)
STUB_VOID(ibv_copy_qp_attr_from_kern)
STUB_VOID(ibv_copy_ah_attr_from_kern)
/* Provider registration: uroce is the only provider. */
STUB_VOID(ibv_register_driver)
STUB_VOID(verbs_register_driver_34)
STUB_VOID(verbs_set_ops)
STUB_VOID(verbs_init_cq)
STUB_VOID(verbs_uninit_context)
STUB_VOID(__verbs_log)
STUB_PTR(_verbs_init_and_alloc_context)
STUB_PTR(verbs_open_device)
UV_EXPORT int verbs_allow_disassociate_destroy;
UV_EXPORT unsigned int __ioctl_final_num_attrs(void);
unsigned int __ioctl_final_num_attrs(void) {
  return 0;
}
STUB_INT(execute_ioctl)
STUB_INT(ibv_read_ibdev_sysfs_file)

/* Sharing objects between processes through the kernel (ibv_import_*),
 * dma-buf memory, enhanced connection establishment. */
STUB_PTR(ibv_import_device)
STUB_PTR(ibv_import_pd)
STUB_PTR(ibv_import_mr)
STUB_PTR(ibv_import_dm)
STUB_VOID(ibv_unimport_pd)
STUB_VOID(ibv_unimport_mr)
STUB_VOID(ibv_unimport_dm)
STUB_PTR(ibv_reg_dmabuf_mr)
STUB_INT(ibv_query_ece)
STUB_INT(ibv_set_ece)

/* Data-in-order is not promised beyond what the IB spec requires. */
UV_EXPORT int ibv_query_qp_data_in_order(void *qp, int op, uint32_t flags);
int ibv_query_qp_data_in_order(void *qp, int op, uint32_t flags) {
  return 0;
}

/* The kernel command wrappers providers use. */
STUB_INT(ibv_cmd_advise_mr)
STUB_INT(ibv_cmd_alloc_dm)
STUB_INT(ibv_cmd_alloc_mw)
STUB_INT(ibv_cmd_alloc_pd)
STUB_INT(ibv_cmd_attach_mcast)
STUB_INT(ibv_cmd_close_xrcd)
STUB_INT(ibv_cmd_create_ah)
STUB_INT(ibv_cmd_create_counters)
STUB_INT(ibv_cmd_create_cq)
STUB_INT(ibv_cmd_create_cq_ex)
STUB_INT(ibv_cmd_create_flow)
STUB_INT(ibv_cmd_create_flow_action_esp)
STUB_INT(ibv_cmd_create_qp)
STUB_INT(ibv_cmd_create_qp_ex)
STUB_INT(ibv_cmd_create_qp_ex2)
STUB_INT(ibv_cmd_create_rwq_ind_table)
STUB_INT(ibv_cmd_create_srq)
STUB_INT(ibv_cmd_create_srq_ex)
STUB_INT(ibv_cmd_create_wq)
STUB_INT(ibv_cmd_dealloc_mw)
STUB_INT(ibv_cmd_dealloc_pd)
STUB_INT(ibv_cmd_dereg_mr)
STUB_INT(ibv_cmd_destroy_ah)
STUB_INT(ibv_cmd_destroy_counters)
STUB_INT(ibv_cmd_destroy_cq)
STUB_INT(ibv_cmd_destroy_flow)
STUB_INT(ibv_cmd_destroy_flow_action)
STUB_INT(ibv_cmd_destroy_qp)
STUB_INT(ibv_cmd_destroy_rwq_ind_table)
STUB_INT(ibv_cmd_destroy_srq)
STUB_INT(ibv_cmd_destroy_wq)
STUB_INT(ibv_cmd_detach_mcast)
STUB_INT(ibv_cmd_free_dm)
STUB_INT(ibv_cmd_get_context)
STUB_INT(ibv_cmd_modify_cq)
STUB_INT(ibv_cmd_modify_flow_action_esp)
STUB_INT(ibv_cmd_modify_qp)
STUB_INT(ibv_cmd_modify_qp_ex)
STUB_INT(ibv_cmd_modify_srq)
STUB_INT(ibv_cmd_modify_wq)
STUB_INT(ibv_cmd_open_qp)
STUB_INT(ibv_cmd_open_xrcd)
STUB_INT(ibv_cmd_poll_cq)
STUB_INT(ibv_cmd_post_recv)
STUB_INT(ibv_cmd_post_send)
STUB_INT(ibv_cmd_post_srq_recv)
STUB_INT(ibv_cmd_query_context)
STUB_INT(ibv_cmd_query_device_any)
STUB_INT(ibv_cmd_query_mr)
STUB_INT(ibv_cmd_query_port)
STUB_INT(ibv_cmd_query_qp)
STUB_INT(ibv_cmd_query_srq)
STUB_INT(ibv_cmd_read_counters)
STUB_INT(ibv_cmd_reg_dm_mr)
STUB_INT(ibv_cmd_reg_dmabuf_mr)
STUB_INT(ibv_cmd_reg_mr)
STUB_INT(ibv_cmd_req_notify_cq)
STUB_INT(ibv_cmd_rereg_mr)
STUB_INT(ibv_cmd_resize_cq)
