/* uroce collectives: allreduce, reduce-scatter, allgather, broadcast, reduce
 * and all-to-all over RDMA WRITE with immediate.
 *
 * A communicator is built on a small transport interface
 * (uroce_coll_transport) that the native API over UDP, the simulator and the
 * in-memory test fabric implement. Every collective is a non-blocking
 * progress machine: *_start() builds a schedule and returns a request;
 * uroce_coll_test() polls the transport and advances the schedule;
 * uroce_coll_wait() calls test() until the request completes or a timeout.
 * Nothing here starts a thread.
 *
 * Functions return 0 (or a non-negative value) on success and a negative
 * error: one of UROCE_COLL_ERR_* below, a UROCE_ERR_* (uroce/errors.h), or a
 * negated errno. uroce_coll_strerror() names any of them; after a failed
 * collective uroce_coll_errmsg() says what happened and which rank. */
#ifndef UROCE_COLL_H
#define UROCE_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "uroce/uroce.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -1300..-1399: collectives. */
enum uroce_coll_error {
  UROCE_COLL_ERR_PEER_TIMEOUT = -1301,  /* a peer made no progress within the
                                           communicator's timeout */
  UROCE_COLL_ERR_PEER_FAILED = -1302,   /* the transport reported an error
                                           completion for a peer */
  UROCE_COLL_ERR_ABORTED = -1303,       /* another rank aborted the collective
                                           after it saw a peer fail */
  UROCE_COLL_ERR_COMM_FAILED = -1304,   /* the communicator failed earlier and
                                           can no longer be used */
  UROCE_COLL_ERR_TIMEOUT = -1305,       /* uroce_coll_wait()'s own timeout
                                           passed; the request is still live */
  UROCE_COLL_ERR_MISMATCH = -1306,      /* a peer sent data that does not fit
                                           this rank's schedule (ranks called
                                           different collectives or counts) */
  UROCE_COLL_ERR_NOT_CONNECTED = -1307, /* comm_connect() was not called */
  UROCE_COLL_ERR_BOOTSTRAP = -1308,     /* bootstrap environment or rendezvous
                                           is missing or inconsistent */
};

/* Returned by uroce_coll_test() while a request is still running. */
#define UROCE_COLL_INPROGRESS 1

typedef enum uroce_coll_dtype {
  UROCE_COLL_FLOAT32 = 0,
  UROCE_COLL_FLOAT16, /* IEEE 754 binary16 */
  UROCE_COLL_BFLOAT16,
  UROCE_COLL_INT32,
  UROCE_COLL_INT64,
  UROCE_COLL_FLOAT64,
  UROCE_COLL_DTYPE_COUNT
} uroce_coll_dtype;

typedef enum uroce_coll_op {
  UROCE_COLL_SUM = 0,
  UROCE_COLL_PROD,
  UROCE_COLL_MIN, /* NaN in any input gives NaN */
  UROCE_COLL_MAX, /* NaN in any input gives NaN */
  UROCE_COLL_OP_COUNT
} uroce_coll_op;

typedef enum uroce_coll_algo {
  UROCE_COLL_ALGO_AUTO = 0,
  UROCE_COLL_ALGO_RING, /* ring; a pipelined chain for broadcast and reduce */
  UROCE_COLL_ALGO_TREE, /* double binary tree: allreduce, broadcast, reduce */
  UROCE_COLL_ALGO_RHD,  /* recursive halving/doubling: allreduce
                           (Rabenseifner), reduce-scatter, allgather */
  UROCE_COLL_ALGO_PAIRWISE, /* pairwise exchange: all-to-all */
  UROCE_COLL_ALGO_HIER, /* hierarchical allreduce on a comm that knows its
                           hosts (uroce_coll_comm_set_hosts): reduce-scatter
                           inside each host, allreduce of each rank's block
                           between hosts, allgather inside the host */
  UROCE_COLL_ALGO_COUNT
} uroce_coll_algo;

typedef enum uroce_coll_kind {
  UROCE_COLL_ALLREDUCE = 0,
  UROCE_COLL_REDUCE_SCATTER,
  UROCE_COLL_ALLGATHER,
  UROCE_COLL_BROADCAST,
  UROCE_COLL_REDUCE,
  UROCE_COLL_ALLTOALL,
  UROCE_COLL_KIND_COUNT
} uroce_coll_kind;

/* ---- transport interface ------------------------------------------------
 *
 * One reliable connection (an RC QP) to every other rank, a memory
 * registration call, RDMA WRITE with immediate, and one completion queue for
 * everything. Maps 1:1 onto verbs: reg_mr = ibv_reg_mr with LOCAL_WRITE and
 * REMOTE_WRITE; post_write_imm = ibv_post_send of IBV_WR_RDMA_WRITE_WITH_IMM,
 * signaled; poll = ibv_poll_cq on one CQ shared by all QPs' send and receive
 * sides, with the binding reposting receive WQEs (write-with-imm consumes one
 * at the target; the collectives have at most 2 * slots + 1 of them
 * outstanding per connection and direction). Optional: reg_mr_src =
 * ibv_reg_mr with access 0, post_write_imm2 = the write with 2 SGEs. Arrivals
 * need not be ordered: the collectives match them by header, not by order. */

typedef struct uroce_coll_mr {
  void *addr;
  size_t length;
  uint64_t remote_addr; /* what a peer passes as remote_addr to reach addr */
  uint32_t lkey;
  uint32_t rkey;
  void *handle; /* the binding's own object (an ibv_mr, ...) */
} uroce_coll_mr;

enum uroce_coll_cqe_kind {
  UROCE_COLL_CQE_WRITE_DONE = 1, /* a post_write_imm(2) of this rank
                                    finished */
  UROCE_COLL_CQE_RECV_IMM = 2,   /* a peer's write with immediate landed */
};

typedef struct uroce_coll_cqe {
  uint64_t wr_id;    /* WRITE_DONE: the wr_id given to post_write_imm(2) */
  uint32_t imm;      /* RECV_IMM: the immediate (host order) */
  uint32_t byte_len; /* RECV_IMM: bytes written */
  int32_t peer;      /* the other rank */
  int16_t kind;      /* enum uroce_coll_cqe_kind */
  int16_t status;    /* 0, or negative: the connection to peer failed
                        (retry exceeded, flushed) */
} uroce_coll_cqe;

typedef struct uroce_coll_transport {
  void *ctx;
  int rank;
  int size;
  /* Register [addr, addr+len) for local access and remote write. 0 or a
   * negative error. */
  int (*reg_mr)(void *ctx, void *addr, size_t len, uroce_coll_mr *mr);
  void (*dereg_mr)(void *ctx, uroce_coll_mr *mr);
  /* RDMA WRITE of len bytes at mr->addr + offset to remote_addr/rkey of
   * peer, with immediate imm. len may be 0 (then mr may be NULL): a pure
   * notification. Always signaled: one WRITE_DONE with wr_id follows. 0,
   * UROCE_ERR_QUEUE_FULL (try again later) or another negative error. */
  int (*post_write_imm)(void *ctx, int peer, const uroce_coll_mr *mr,
                        size_t offset, size_t len, uint64_t remote_addr,
                        uint32_t rkey, uint32_t imm, uint64_t wr_id);
  /* Up to max completions into cqes; returns how many (0 if none) or a
   * negative error. Never blocks. */
  int (*poll)(void *ctx, uroce_coll_cqe *cqes, int max);
  /* Monotonic time in nanoseconds (virtual in the simulator). */
  uint64_t (*now_ns)(void *ctx);
  /* Optional, the gather path: used when both are set (and dereg_mr), so
   * that a chunk's payload goes out straight from the caller's buffer
   * behind its header in the send ring. A binding that leaves them NULL
   * (as members a positional initializer does not reach are) gets every
   * payload copied into the send ring first.
   *
   * Register [addr, addr+len) as a send source only: read by this rank's
   * own writes, never reachable by a peer (ibv_reg_mr with access 0: the
   * caller's buffers must not become remotely writable; rkey and
   * remote_addr are unused). Freed with dereg_mr. 0 or a negative error
   * (then that buffer's chunks are copied). */
  int (*reg_mr_src)(void *ctx, void *addr, size_t len, uroce_coll_mr *mr);
  /* As post_write_imm, but the write carries len bytes at mr->addr +
   * offset followed by len2 bytes at mr2->addr + offset2 (a gather list of
   * 2 entries), to remote_addr. len and len2 are both > 0. The transport
   * may read both pieces at any time until the WRITE_DONE of wr_id
   * (retransmission); the caller keeps them unchanged until then. 0,
   * UROCE_ERR_QUEUE_FULL (try again later) or another negative error. */
  int (*post_write_imm2)(void *ctx, int peer, const uroce_coll_mr *mr,
                         size_t offset, size_t len, const uroce_coll_mr *mr2,
                         size_t offset2, size_t len2, uint64_t remote_addr,
                         uint32_t rkey, uint32_t imm, uint64_t wr_id);
  /* Optional, both or neither: the receive ring (the only memory peers
   * write) from the binding, which may have a faster way for some peers
   * to reach it than its writes (the native binding: shared memory that
   * the ranks of the same host map). len bytes, zeroed, 64-byte aligned,
   * registered with reg_mr afterwards like any ring; NULL lets the
   * communicator allocate it itself. free_recv_ring gets back what
   * alloc_recv_ring gave, after dereg_mr. */
  void *(*alloc_recv_ring)(void *ctx, size_t len);
  void (*free_recv_ring)(void *ctx, void *addr, size_t len);
} uroce_coll_transport;

/* ---- communicator ------------------------------------------------------- */

typedef struct uroce_coll_config {
  size_t chunk_bytes;   /* payload per RDMA WRITE; default 61 x 4096 - 24,
                           so that with the 16-byte header a write is 8
                           bytes short of 61 packets of 4 KiB (comm.c
                           says why). With a transport that gathers,
                           chunks of >= 4 KiB are written from the buffers
                           without a copy; env UROCE_COLL_GATHER_MIN
                           (bytes, or "off") moves that bound */
  int slots;            /* staging slots per peer (credits); default 3 */
  uint64_t timeout_ns;  /* no progress this long fails a collective with
                           PEER_TIMEOUT; default 30 s; env
                           UROCE_COLL_TIMEOUT_MS overrides */
  uroce_coll_algo algo; /* AUTO by default; env UROCE_COLL_ALGO
                           (ring|tree|rhd|pairwise|hier|auto) overrides
                           AUTO */
  int phantom;          /* 1: lengths only (the simulator). Every step,
                           chunk, credit and dependency runs, but no payload
                           byte is copied or reduced, the buffers may be
                           NULL and are never touched, and the staging rings
                           hold only the 16-byte slot headers (slot stride
                           16), which the transport must carry to the peer's
                           ring: post_write_imm copies the first 16 bytes at
                           mr->addr + offset to remote_addr. Default 0. */
} uroce_coll_config;

typedef struct uroce_coll_comm uroce_coll_comm;
typedef struct uroce_coll_req uroce_coll_req;

/* Defaults for every field. */
UROCE_EXPORT void uroce_coll_config_init(uroce_coll_config *cfg);

/* Create a communicator over tp (copied; tp->ctx must outlive the comm) and
 * register its staging memory. cfg may be NULL for defaults. Then exchange
 * every rank's uroce_coll_comm_info() blob (e.g. with
 * uroce_coll_rendezvous()) and call uroce_coll_comm_connect().
 * Returns 0, UROCE_ERR_INVALID_ARGUMENT, -ENOMEM or reg_mr's error. */
UROCE_EXPORT int uroce_coll_comm_new(const uroce_coll_transport *tp,
                                     const uroce_coll_config *cfg,
                                     uroce_coll_comm **out);
/* Drains outstanding write completions briefly, then frees everything. */
UROCE_EXPORT void uroce_coll_comm_del(uroce_coll_comm *comm);

/* Size of the blob that describes this rank's staging memory. */
UROCE_EXPORT size_t uroce_coll_comm_info_size(void);
/* Write this rank's blob. Returns its size or UROCE_ERR_NOBUF. */
UROCE_EXPORT int uroce_coll_comm_info(const uroce_coll_comm *comm, void *blob,
                                      size_t len);
/* blobs: size * info_size bytes, rank order. Returns 0,
 * UROCE_ERR_INVALID_ARGUMENT or UROCE_COLL_ERR_MISMATCH (a blob names the
 * wrong rank or a different slot geometry). */
UROCE_EXPORT int uroce_coll_comm_connect(uroce_coll_comm *comm,
                                         const void *blobs, size_t len);

UROCE_EXPORT int uroce_coll_comm_rank(const uroce_coll_comm *comm);
UROCE_EXPORT int uroce_coll_comm_size(const uroce_coll_comm *comm);
/* The algorithm used when a collective is started with AUTO. */
UROCE_EXPORT void uroce_coll_comm_set_algo(uroce_coll_comm *comm,
                                           uroce_coll_algo algo);
/* Which host each rank is on: host[r] for r in 0..n-1 (n = the comm's
 * size), equal values for ranks of one host (any numbers). Every rank must
 * pass the same table. With the same number of ranks on every host, at
 * least two hosts and two ranks on each, allreduce can run hierarchically
 * (UROCE_COLL_ALGO_HIER) and AUTO picks it (docs/coll.md); otherwise the
 * comm stays flat and HIER falls back to the flat choice. The native setup
 * calls this with the hosts it found. NULL host: forget the hosts.
 * Returns 0, UROCE_ERR_INVALID_ARGUMENT (n is not the size), UROCE_ERR_BUSY
 * (a collective is running) or -ENOMEM. */
UROCE_EXPORT int uroce_coll_comm_set_hosts(uroce_coll_comm *comm,
                                           const int *host, int n);
/* Hosts and ranks per host of the hierarchy (1 and the size when the comm
 * has none: no table, or hosts of unequal sizes). */
UROCE_EXPORT void uroce_coll_comm_hosts(const uroce_coll_comm *comm,
                                        int *nhosts, int *per_host);
/* What AUTO picks for this collective, size in bytes and this comm. */
UROCE_EXPORT uroce_coll_algo uroce_coll_choose_algo(const uroce_coll_comm *comm,
                                                    uroce_coll_kind kind,
                                                    size_t bytes);
/* The last failure, in words, naming the rank involved ("" if none). */
UROCE_EXPORT const char *uroce_coll_errmsg(const uroce_coll_comm *comm);

/* ---- collectives ---------------------------------------------------------
 *
 * One collective at a time per communicator: a start while another request
 * is running returns UROCE_ERR_BUSY. Buffers must stay valid until the
 * request completes (after an error: until the comm and its transport are
 * deleted, since a write in flight may still read them). Counts are in
 * elements. In-place works as in NCCL: sendbuf == recvbuf for allreduce,
 * broadcast, reduce and all-to-all; recvbuf == sendbuf + rank * recvcount for
 * reduce-scatter; sendbuf == recvbuf + rank * sendcount for allgather. Start
 * returns 0, UROCE_ERR_INVALID_ARGUMENT, UROCE_ERR_BUSY,
 * UROCE_COLL_ERR_NOT_CONNECTED, UROCE_COLL_ERR_COMM_FAILED or -ENOMEM. */

/* recvbuf[count] = op over ranks of sendbuf[count]. */
UROCE_EXPORT int uroce_coll_allreduce_start(uroce_coll_comm *comm,
                                            const void *sendbuf, void *recvbuf,
                                            size_t count, uroce_coll_dtype dt,
                                            uroce_coll_op op,
                                            uroce_coll_req **req);
/* sendbuf[size * recvcount]; rank r gets block r of the reduction. */
UROCE_EXPORT int uroce_coll_reduce_scatter_start(
    uroce_coll_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
    uroce_coll_dtype dt, uroce_coll_op op, uroce_coll_req **req);
/* recvbuf[size * sendcount]; block r is rank r's sendbuf. */
UROCE_EXPORT int uroce_coll_allgather_start(uroce_coll_comm *comm,
                                            const void *sendbuf, void *recvbuf,
                                            size_t sendcount,
                                            uroce_coll_dtype dt,
                                            uroce_coll_req **req);
/* Every recvbuf[count] = root's sendbuf (read only at root). */
UROCE_EXPORT int uroce_coll_broadcast_start(uroce_coll_comm *comm,
                                            const void *sendbuf, void *recvbuf,
                                            size_t count, uroce_coll_dtype dt,
                                            int root, uroce_coll_req **req);
/* root's recvbuf[count] = op over ranks (recvbuf unused elsewhere). */
UROCE_EXPORT int uroce_coll_reduce_start(uroce_coll_comm *comm,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, uroce_coll_dtype dt,
                                         uroce_coll_op op, int root,
                                         uroce_coll_req **req);
/* sendbuf and recvbuf hold size blocks of count: block j of rank i's
 * sendbuf becomes block i of rank j's recvbuf. */
UROCE_EXPORT int uroce_coll_alltoall_start(uroce_coll_comm *comm,
                                           const void *sendbuf, void *recvbuf,
                                           size_t count, uroce_coll_dtype dt,
                                           uroce_coll_req **req);

/* Start with an explicit algorithm (AUTO = the comm's choice). An algorithm
 * that does not implement the collective falls back to AUTO's choice. */
UROCE_EXPORT int uroce_coll_start(uroce_coll_comm *comm, uroce_coll_kind kind,
                                  const void *sendbuf, void *recvbuf,
                                  size_t count, uroce_coll_dtype dt,
                                  uroce_coll_op op, int root,
                                  uroce_coll_algo algo, uroce_coll_req **req);

/* Bytes this rank's schedule of such a collective takes while it runs
 * (its steps; a simulator sizes a run with it), 0 for a bad argument or
 * nothing to schedule. Builds the schedule on scratch memory; the comm
 * is not touched. */
UROCE_EXPORT size_t uroce_coll_sched_bytes(const uroce_coll_comm *comm,
                                           uroce_coll_kind kind, size_t count,
                                           uroce_coll_dtype dt, int root,
                                           uroce_coll_algo algo);

/* Advance: 0 when done, UROCE_COLL_INPROGRESS, or the collective's error
 * (PEER_TIMEOUT, PEER_FAILED, ABORTED, MISMATCH); after an error the
 * communicator is failed. */
UROCE_EXPORT int uroce_coll_test(uroce_coll_req *req);
/* test() until done, failed, or timeout_ns passed (then
 * UROCE_COLL_ERR_TIMEOUT; the request stays live). */
UROCE_EXPORT int uroce_coll_wait(uroce_coll_req *req, uint64_t timeout_ns);
/* The algorithm a request runs. */
UROCE_EXPORT uroce_coll_algo uroce_coll_req_algo(const uroce_coll_req *req);

/* ---- reductions, types, names ------------------------------------------- */

UROCE_EXPORT size_t uroce_coll_dtype_size(uroce_coll_dtype dt);
/* dst[i] = dst[i] op src[i] for n elements (vectorised; AVX2/F16C when the
 * CPU has them). */
UROCE_EXPORT void uroce_coll_reduce_local(void *dst, const void *src, size_t n,
                                          uroce_coll_dtype dt,
                                          uroce_coll_op op);
/* Which reduction kernels run: "avx2+f16c" or "generic". */
UROCE_EXPORT const char *uroce_coll_reduce_impl(void);
/* Force the generic kernels (1) or allow the CPU-specific ones (0). */
UROCE_EXPORT void uroce_coll_reduce_force_generic(int on);
UROCE_EXPORT float uroce_coll_f16_to_f32(uint16_t h);
UROCE_EXPORT uint16_t uroce_coll_f32_to_f16(float f); /* nearest even */
UROCE_EXPORT float uroce_coll_bf16_to_f32(uint16_t h);
UROCE_EXPORT uint16_t uroce_coll_f32_to_bf16(float f); /* nearest even */

/* Element i of a buffer of type dt, as a double, and the reverse (f16 and
 * bf16 round to nearest even). For checks and benchmarks, not the fast
 * path. */
UROCE_EXPORT double uroce_coll_load_f64(uroce_coll_dtype dt, const void *buf,
                                        size_t i);
UROCE_EXPORT void uroce_coll_store_f64(uroce_coll_dtype dt, void *buf, size_t i,
                                       double v);
/* nccl-tests' bus bandwidth factor: busbw = algbw x factor (docs/coll.md):
 * allreduce 2(n-1)/n; reduce-scatter, allgather, all-to-all (n-1)/n;
 * broadcast and reduce 1. */
UROCE_EXPORT double uroce_coll_busbw_factor(uroce_coll_kind kind, int n);

UROCE_EXPORT const char *uroce_coll_dtype_name(uroce_coll_dtype dt);
UROCE_EXPORT const char *uroce_coll_op_name(uroce_coll_op op);
UROCE_EXPORT const char *uroce_coll_algo_name(uroce_coll_algo algo);
UROCE_EXPORT const char *uroce_coll_kind_name(uroce_coll_kind kind);
/* "ring" -> UROCE_COLL_ALGO_RING, ...; -1 if unknown. */
UROCE_EXPORT int uroce_coll_algo_parse(const char *name);
/* Names UROCE_COLL_ERR_* and falls back to uroce_strerror(). */
UROCE_EXPORT const char *uroce_coll_strerror(int err);

/* ---- bootstrap ------------------------------------------------------------
 *
 * Rank, size and the rendezvous address from a launcher's environment:
 * torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), Open
 * MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), MPICH/Hydra and Intel MPI
 * (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID), Slurm (SLURM_PROCID,
 * SLURM_NTASKS, SLURM_LOCALID). UROCE_RANK/UROCE_SIZE win over all;
 * UROCE_MASTER_ADDR/UROCE_MASTER_PORT over MASTER_ADDR/MASTER_PORT. */

typedef struct uroce_coll_env {
  int rank;
  int size;
  int local_rank; /* -1 if the launcher does not say */
  char master_addr[256];
  uint16_t master_port;
  const char *launcher; /* "uroce", "torchrun", "openmpi", "pmi", "slurm" */
} uroce_coll_env;

/* getenv_fn(ctx, name) returns the variable or NULL (NULL getenv_fn: the
 * process environment). Returns 0 or UROCE_COLL_ERR_BOOTSTRAP (no rank/size,
 * rank out of range, bad number, no master address or port). */
UROCE_EXPORT int uroce_coll_env_parse(const char *(*getenv_fn)(void *ctx,
                                                               const char *),
                                      void *ctx, uroce_coll_env *env);

/* All-gather of one fixed-size blob per rank over TCP: rank 0 listens on
 * master_addr:port, the others connect (retrying until the master is up).
 * all receives size * len bytes in rank order. Blocks up to timeout_ns.
 * Returns 0, UROCE_COLL_ERR_BOOTSTRAP (wrong size/len/duplicate rank from a
 * peer), UROCE_COLL_ERR_TIMEOUT, or a negated errno. */
UROCE_EXPORT int uroce_coll_rendezvous(const char *master_addr, uint16_t port,
                                       int rank, int size, const void *blob,
                                       size_t len, void *all,
                                       uint64_t timeout_ns);

/* ---- native binding: the transport over uroce's own API -------------------
 *
 * One uroce device (a UDP endpoint, with its progress thread) per rank, one
 * RC QP to every other rank, one CQ, receive WQEs kept posted (2 * slots + 4
 * per QP), RDMA WRITE with immediate. A failed connection (retry counter
 * exceeded after about qp_timeout * (retry_cnt + 1)) becomes an error
 * completion naming the peer, so a dead rank fails the collective instead of
 * hanging it. */

typedef struct uroce_coll_native uroce_coll_native;

typedef struct uroce_coll_native_attr {
  const char *addr;     /* this rank's local address (required; setup()
                           falls back to $UROCE_ADDR) */
  uint16_t udp_port;    /* this rank's device port; 0: setup() takes
                           $UROCE_PORT, else 4791. Each rank's port travels
                           in its endpoint blob, so ranks that share an
                           address use ports of their own (uroce launch
                           --addr) */
  int progress;         /* enum uroce_progress; default THREAD, so that a
                           rank busy elsewhere still acknowledges packets */
  int32_t busy_poll_us; /* the device's; 0 = its default */
  uint8_t qp_timeout;   /* retransmit after 4.096 us * 2^qp_timeout;
                           default 16 (268 ms) */
  uint8_t retry_cnt;    /* default 6; 7 would retry forever */
  int slots;            /* the communicator's slots (sizes the queues);
                           default 8; setup() takes it from the config */
  int yield;            /* what poll() does when it finds nothing: 1 yields
                           the CPU (sched_yield), 0 spins, -1 (default)
                           yields only when this machine runs more of the
                           job's ranks than this process has CPUs */
  int tx_gather;        /* the device's (uroce.h); 0 = its default */
} uroce_coll_native_attr;

UROCE_EXPORT void uroce_coll_native_attr_init(uroce_coll_native_attr *attr);
/* Opens the device and creates the PD, the CQ and one QP per peer (RESET).
 * Returns 0, UROCE_ERR_INVALID_ARGUMENT, -ENOMEM, or the device's or a
 * verb's error (e.g. -EADDRNOTAVAIL, -EADDRINUSE). */
UROCE_EXPORT int uroce_coll_native_new(const uroce_coll_native_attr *attr,
                                       int rank, int size,
                                       uroce_coll_native **out);
/* Destroys the QPs, the CQ, the PD and the device. Delete the comm first. */
UROCE_EXPORT void uroce_coll_native_del(uroce_coll_native *n);
/* The transport to give uroce_coll_comm_new(). */
UROCE_EXPORT const uroce_coll_transport *
uroce_coll_native_transport(const uroce_coll_native *n);
UROCE_EXPORT struct uroce_device *
uroce_coll_native_device(const uroce_coll_native *n);
/* The first transport failure in words, naming the peer ("" if none). */
UROCE_EXPORT const char *uroce_coll_native_errmsg(const uroce_coll_native *n);
/* Endpoint blob (GID, and QPN and PSN of the QP for each rank). */
UROCE_EXPORT size_t uroce_coll_native_ep_size(int size);
/* Returns the blob's size or UROCE_ERR_NOBUF. */
UROCE_EXPORT int uroce_coll_native_ep(const uroce_coll_native *n, void *blob,
                                      size_t len);
/* eps: size blobs in rank order. Posts the receive WQEs and takes every QP
 * through INIT, RTR and RTS. Returns 0, UROCE_ERR_INVALID_ARGUMENT,
 * UROCE_COLL_ERR_MISMATCH (a malformed blob) or a verb's error. */
UROCE_EXPORT int uroce_coll_native_connect(uroce_coll_native *n,
                                           const void *eps, size_t len);
/* An all-gather of one len-byte blob per rank (all: size * len bytes in
 * rank order), e.g. over a framework's key-value store. 0 or a negative
 * error. */
typedef int (*uroce_coll_allgather_fn)(void *ctx, const void *blob, size_t len,
                                       void *all);
/* uroce_coll_native_setup() with the rendezvous done by allgather(ctx,
 * ...) (called twice, with the same arguments on every rank) instead of
 * uroce_coll_rendezvous(); env->master_addr/port are then unused. NULL
 * allgather: uroce_coll_rendezvous(). */
UROCE_EXPORT int uroce_coll_native_setup_fn(const uroce_coll_env *env,
                                            const uroce_coll_native_attr *attr,
                                            const uroce_coll_config *cfg,
                                            uint64_t timeout_ns,
                                            uroce_coll_allgather_fn allgather,
                                            void *ctx, uroce_coll_native **n,
                                            uroce_coll_comm **comm);
/* Ranks on this rank's host that the communicator reaches through shared
 * memory, itself included (1: none, or shared memory is off). */
UROCE_EXPORT int uroce_coll_native_nlocal(const uroce_coll_native *n);
/* How bytes move to host peers: "map" (straight into the peer's receive
 * ring, mapped from shared memory), "cma" (process_vm_writev), "copy"
 * (through the shared segment), "+"-joined where peers differ, or "off". */
UROCE_EXPORT const char *uroce_coll_native_shm_mode(const uroce_coll_native *n);
/* 1 when poll() yields the CPU as it finds nothing (attr.yield, with -1
 * resolved from the machine's ranks and CPUs), 0 when it spins. */
UROCE_EXPORT int uroce_coll_native_yields(const uroce_coll_native *n);
/* The whole start-up of a rank: env (NULL: parse the process environment),
 * attr (NULL: defaults; addr NULL: $UROCE_ADDR), cfg (NULL: defaults).
 * A first uroce_coll_rendezvous() finds the ranks on this host, which talk
 * through shared memory (docs/coll.md; env UROCE_COLL_SHM=0 turns it off);
 * for the others it opens the device (only then is an address needed).
 * Creates the comm, runs a second rendezvous of comm info plus endpoint
 * plus segment, connects the QPs and the comm, and proves every
 * connection with a one-element all-to-all. On failure prints why to stderr
 * and returns the error (UROCE_COLL_ERR_BOOTSTRAP, a rendezvous error, ...).
 * Free with uroce_coll_comm_del(*comm), then uroce_coll_native_del(*n). */
UROCE_EXPORT int uroce_coll_native_setup(const uroce_coll_env *env,
                                         const uroce_coll_native_attr *attr,
                                         const uroce_coll_config *cfg,
                                         uint64_t timeout_ns,
                                         uroce_coll_native **n,
                                         uroce_coll_comm **comm);

#ifdef __cplusplus
}
#endif

#endif
