#include "apihelp.h"

int api_connect_rc(struct uroce_qp *qp, const struct uroce_device *peer_dev,
                   const struct uroce_qp *peer_qp, uint32_t access,
                   uint32_t psn, uint8_t timeout) {
  struct uroce_qp_attr a = {.qp_state = UROCE_QPS_RTS,
                            .port_num = 1,
                            .qp_access_flags = access,
                            .path_mtu = UROCE_MTU_1024,
                            .dest_qp_num = uroce_qp_num(peer_qp),
                            .rq_psn = psn,
                            .sq_psn = psn,
                            .max_dest_rd_atomic = 4,
                            .min_rnr_timer = 1,
                            .ah_attr = {.is_global = 1, .hop_limit = 64},
                            .timeout = timeout,
                            .retry_cnt = 7,
                            .rnr_retry = 7,
                            .max_rd_atomic = 4};
  uroce_device_gid(peer_dev, a.ah_attr.dgid);
  return uroce_connect_qp(qp, &a);
}
