/* uroce's verbs types: work requests, completions, queue-pair attributes
 * and the other structures of the verbs API, with libibverbs' numeric
 * values throughout so that the libibverbs drop-in maps them 1:1. The
 * functions that take them are in uroce.h. */
#ifndef UROCE_VERBS_H
#define UROCE_VERBS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Objects, all opaque. */
struct uroce_mr;
struct uroce_pd;
struct uroce_cq;
struct uroce_qp;
struct uroce_srq;
struct uroce_xrcd;
struct uroce_ah;
struct uroce_mw;

/* Access flags, with the values of ibv_access_flags. */
enum uroce_access {
  UROCE_ACCESS_LOCAL_WRITE = 1,
  UROCE_ACCESS_REMOTE_WRITE = 2,
  UROCE_ACCESS_REMOTE_READ = 4,
  UROCE_ACCESS_REMOTE_ATOMIC = 8,
  UROCE_ACCESS_MW_BIND = 16, /* memory windows may be bound to the region */
};
#define UROCE_ACCESS_ALL 0x1Fu

/* Memory window types, with the values of ibv_mw_type. */
enum uroce_mw_type { UROCE_MW_TYPE_1 = 1, UROCE_MW_TYPE_2 = 2 };

#define UROCE_MAX_SGE 32         /* per work request */
#define UROCE_MAX_INLINE 1024    /* bytes of inline data per send WR */
#define UROCE_MAX_RD_ATOMIC 16   /* max_rd_atomic and max_dest_rd_atomic */
#define UROCE_MAX_MSG (1u << 30) /* largest message, bytes */
/* What one device (uroce_device_open, the drop-in's context) holds: QPs,
 * and memory regions and windows together (one key table). */
#define UROCE_DEVICE_MAX_QP 4096
#define UROCE_DEVICE_MAX_MR 16384

/* Asynchronous events (ibv_event_type values). */
enum uroce_event_type {
  UROCE_EVENT_CQ_ERR = 0,
  UROCE_EVENT_QP_FATAL = 1,
  UROCE_EVENT_QP_REQ_ERR = 2,
  UROCE_EVENT_QP_ACCESS_ERR = 3,
  UROCE_EVENT_SQ_DRAINED = 5,
  UROCE_EVENT_SRQ_LIMIT_REACHED = 15,
};
struct uroce_async_event {
  int type;  /* enum uroce_event_type */
  void *obj; /* the QP, CQ or SRQ */
};

struct uroce_ah_attr {
  uint8_t dgid[16];
  uint16_t sport;    /* 0: derived from the QPNs */
  uint8_t is_global; /* must be 1 on RoCE */
  uint8_t traffic_class;
  uint8_t hop_limit;
  uint16_t dport; /* UDP destination port; 0: the device's (4791). Another
                     port reaches a uroce device that shares its address
                     with others (not a standard RoCEv2 peer) */
  uint32_t flow_label;
};

enum uroce_wc_status {
  UROCE_WC_SUCCESS = 0,
  UROCE_WC_LOC_LEN_ERR = 1,
  UROCE_WC_LOC_QP_OP_ERR = 2,
  UROCE_WC_LOC_PROT_ERR = 4,
  UROCE_WC_WR_FLUSH_ERR = 5,
  UROCE_WC_MW_BIND_ERR = 6,
  UROCE_WC_BAD_RESP_ERR = 7,
  UROCE_WC_LOC_ACCESS_ERR = 8,
  UROCE_WC_REM_INV_REQ_ERR = 9,
  UROCE_WC_REM_ACCESS_ERR = 10,
  UROCE_WC_REM_OP_ERR = 11,
  UROCE_WC_RETRY_EXC_ERR = 12,
  UROCE_WC_RNR_RETRY_EXC_ERR = 13,
  UROCE_WC_FATAL_ERR = 19,
  UROCE_WC_GENERAL_ERR = 21,
};
enum uroce_wc_opcode {
  UROCE_WC_SEND = 0,
  UROCE_WC_RDMA_WRITE = 1,
  UROCE_WC_RDMA_READ = 2,
  UROCE_WC_COMP_SWAP = 3,
  UROCE_WC_FETCH_ADD = 4,
  UROCE_WC_BIND_MW = 5,
  UROCE_WC_LOCAL_INV = 6,
  UROCE_WC_RECV = 128,
  UROCE_WC_RECV_RDMA_WITH_IMM = 129,
};
enum uroce_wc_flags {
  UROCE_WC_GRH = 1,
  UROCE_WC_WITH_IMM = 2,
  UROCE_WC_WITH_INV = 8,
};

/* Mirrors struct ibv_wc field for field. */
struct uroce_wc {
  uint64_t wr_id;
  uint32_t status; /* enum uroce_wc_status */
  uint32_t opcode; /* enum uroce_wc_opcode */
  uint32_t vendor_err;
  uint32_t byte_len;
  uint32_t imm_data; /* network order; the invalidated rkey (host order)
                        when wc_flags has UROCE_WC_WITH_INV */
  uint32_t qp_num;
  uint32_t src_qp;
  uint32_t wc_flags;
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
};

struct uroce_sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

enum uroce_wr_opcode {
  UROCE_WR_RDMA_WRITE = 0,
  UROCE_WR_RDMA_WRITE_WITH_IMM = 1,
  UROCE_WR_SEND = 2,
  UROCE_WR_SEND_WITH_IMM = 3,
  UROCE_WR_RDMA_READ = 4,
  UROCE_WR_ATOMIC_CMP_AND_SWP = 5,
  UROCE_WR_ATOMIC_FETCH_AND_ADD = 6,
  UROCE_WR_LOCAL_INV = 7, /* invalidate_rkey: a bound type 2 window */
  UROCE_WR_BIND_MW = 8,   /* wr.bind_mw */
  UROCE_WR_SEND_WITH_INV = 9,
};
enum uroce_send_flags {
  UROCE_SEND_FENCE = 1,
  UROCE_SEND_SIGNALED = 2,
  UROCE_SEND_SOLICITED = 4,
  UROCE_SEND_INLINE = 8,
};

struct uroce_send_wr {
  uint64_t wr_id;
  struct uroce_send_wr *next;
  struct uroce_sge *sg_list;
  int num_sge;
  uint32_t opcode;     /* enum uroce_wr_opcode */
  uint32_t send_flags; /* enum uroce_send_flags */
  uint32_t imm_data;   /* network order, as ibv */
  uint32_t invalidate_rkey;
  uint32_t xrc_remote_srqn; /* XRC_SEND: the target's XRC SRQ number */
  union {
    struct {
      uint64_t remote_addr;
      uint32_t rkey;
    } rdma;
    struct {
      uint64_t remote_addr;
      uint64_t compare_add;
      uint64_t swap;
      uint32_t rkey;
    } atomic;
    struct {
      struct uroce_ah *ah;
      uint32_t remote_qpn;
      uint32_t remote_qkey;
    } ud;
    /* Binds mw to [addr, addr + length) of mr with rights access
     * (UROCE_ACCESS_REMOTE_*) under rkey, mw's rkey with a new low byte
     * (type 1 and length 0: unbinds; mr may be NULL then). */
    struct {
      struct uroce_mw *mw;
      struct uroce_mr *mr;
      uint64_t addr, length;
      uint32_t access;
      uint32_t rkey;
    } bind_mw;
  } wr;
};

struct uroce_recv_wr {
  uint64_t wr_id;
  struct uroce_recv_wr *next;
  struct uroce_sge *sg_list;
  int num_sge;
};

struct uroce_srq_attr {
  uint32_t max_wr;
  uint32_t max_sge;
  uint32_t srq_limit; /* raise SRQ_LIMIT_REACHED when fewer WQEs remain */
};
enum uroce_srq_attr_mask { UROCE_SRQ_MAX_WR = 1, UROCE_SRQ_LIMIT = 2 };

/* UROCE_QPT_GSI: the General Services Interface QP, a UD QP numbered 1
 * (one per device) that carries management datagrams such as the CM's
 * (docs/rdmacm.md). Reported as UD once created. */
enum uroce_qp_type {
  UROCE_QPT_GSI = 1,
  UROCE_QPT_RC = 2,
  UROCE_QPT_UC = 3,
  UROCE_QPT_UD = 4,
  /* XRC (IBA 9.8): the initiator sends, naming an XRC SRQ of the target's
   * domain in each WR; the target receives into that SRQ. */
  UROCE_QPT_XRC_SEND = 9,
  UROCE_QPT_XRC_RECV = 10
};
enum uroce_qp_state {
  UROCE_QPS_RESET = 0,
  UROCE_QPS_INIT = 1,
  UROCE_QPS_RTR = 2,
  UROCE_QPS_RTS = 3,
  UROCE_QPS_SQD = 4,
  UROCE_QPS_SQE = 5,
  UROCE_QPS_ERR = 6,
};

enum uroce_mtu {
  UROCE_MTU_256 = 1,
  UROCE_MTU_512 = 2,
  UROCE_MTU_1024 = 3,
  UROCE_MTU_2048 = 4,
  UROCE_MTU_4096 = 5,
};
static inline uint32_t uroce_mtu_bytes(int mtu) {
  return 128u << mtu;
}

struct uroce_qp_cap {
  uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge;
  uint32_t max_inline_data;
};

struct uroce_qp_init_attr {
  struct uroce_cq *send_cq, *recv_cq;
  struct uroce_srq *srq; /* optional */
  struct uroce_qp_cap cap;
  uint32_t qp_type; /* enum uroce_qp_type */
  int sq_sig_all;
  struct uroce_xrcd *xrcd; /* XRC_RECV: its domain (it has no PD, CQs,
                              SRQ or queues of its own) */
};

/* Attribute mask bits, as IBV_QP_*. */
enum uroce_qp_attr_mask {
  UROCE_QP_STATE = 1 << 0,
  UROCE_QP_CUR_STATE = 1 << 1,
  UROCE_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
  UROCE_QP_ACCESS_FLAGS = 1 << 3,
  UROCE_QP_PKEY_INDEX = 1 << 4,
  UROCE_QP_PORT = 1 << 5,
  UROCE_QP_QKEY = 1 << 6,
  UROCE_QP_AV = 1 << 7,
  UROCE_QP_PATH_MTU = 1 << 8,
  UROCE_QP_TIMEOUT = 1 << 9,
  UROCE_QP_RETRY_CNT = 1 << 10,
  UROCE_QP_RNR_RETRY = 1 << 11,
  UROCE_QP_RQ_PSN = 1 << 12,
  UROCE_QP_MAX_QP_RD_ATOMIC = 1 << 13,
  UROCE_QP_ALT_PATH = 1 << 14,
  UROCE_QP_MIN_RNR_TIMER = 1 << 15,
  UROCE_QP_SQ_PSN = 1 << 16,
  UROCE_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
  UROCE_QP_PATH_MIG_STATE = 1 << 18,
  UROCE_QP_CAP = 1 << 19,
  UROCE_QP_DEST_QPN = 1 << 20,
};

struct uroce_qp_attr {
  uint32_t qp_state, cur_qp_state; /* enum uroce_qp_state */
  uint32_t path_mtu;               /* enum uroce_mtu */
  uint32_t path_mig_state;
  uint32_t qkey, rq_psn, sq_psn, dest_qp_num;
  uint32_t qp_access_flags; /* UROCE_ACCESS_REMOTE_* */
  struct uroce_qp_cap cap;
  struct uroce_ah_attr ah_attr;
  uint16_t pkey_index;
  uint8_t en_sqd_async_notify, sq_draining;
  uint8_t max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num;
  uint8_t timeout, retry_cnt, rnr_retry;
};

#ifdef __cplusplus
}
#endif

#endif
