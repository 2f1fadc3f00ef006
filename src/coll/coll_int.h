/* Collectives internals: schedules and the progress engine that runs them.
 *
 * A collective is compiled at start into a schedule: a short list of steps,
 * each with up to MAX_XFER sends and MAX_XFER receives of byte regions of
 * the request's buffers. The engine (comm.c) cuts every region into chunks
 * and moves each chunk with one RDMA WRITE with immediate into a staging
 * slot at the peer; a header in the slot says which collective, tag and
 * chunk it is, so arrivals may come in any order. Receivers copy or reduce
 * the slot into their working buffer and give the slot back with a credit
 * (a zero-length write whose immediate names the slot).
 *
 * The sender either copies the payload into its own send-ring slot behind
 * the header, or, where the transport has post_write_imm2 (the gather
 * path), writes the header from the slot and the payload straight from the
 * request's buffer. Such a write may read the buffer until its WRITE_DONE,
 * so it is kept on the comm's in-flight list until then: a receive into an
 * overlapping region waits for it, and the request completes only when the
 * list is empty.
 *
 * Ordering rules, per rank:
 *  - sends are posted step by step (all chunks of step s before any of
 *    s + 1), chunk by chunk;
 *  - a send chunk waits for its dependency: the receive step dep (all of
 *    it, or only the same chunk of receives of the identical region, which
 *    is what pipelines a ring or a tree);
 *  - receive step r is processed only after send steps 0..r-1 are posted,
 *    so a receive never overwrites data that still has to be sent (and a
 *    chunk written from the buffer it lands in waits for that write's
 *    WRITE_DONE). */
#ifndef UROCE_COLL_INT_H
#define UROCE_COLL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "uroce/coll.h"

#define MAX_XFER 4
#define MAX_SLOTS 64

enum { BUF_WORK = 0, BUF_SRC = 1 };

typedef struct xfer {
  int peer;
  uint8_t buf;      /* sends: BUF_WORK or BUF_SRC; receives: BUF_WORK */
  uint8_t reduce;   /* receives: reduce into the region instead of copy */
  uint8_t from_src; /* receives that reduce: the region's first touch, so
                     * it starts as the same bytes of the request's src
                     * (out-of-place allreduce, which copies nothing up
                     * front) */
  uint16_t tag;     /* matches a send with its receive at the peer */
  int dep;          /* sends: receive step this waits for, or -1 */
  size_t off, len;  /* bytes */
} xfer;

typedef struct step {
  xfer send[MAX_XFER];
  xfer recv[MAX_XFER];
  uint32_t sdone[MAX_XFER]; /* chunks posted */
  uint32_t rdone[MAX_XFER]; /* chunks consumed */
  uint8_t nsend, nrecv;
} step;

/* Header at the start of every staging slot. */
typedef struct slot_hdr {
  uint32_t seq; /* collective number on this communicator */
  uint16_t tag;
  uint16_t flags;
  uint32_t chunk;
  uint32_t len; /* payload bytes after the header */
} slot_hdr;
#define HDR_BYTES 16

/* Immediate: 2 bits of kind, then a slot index or a rank. */
#define IMM_DATA 0u
#define IMM_CREDIT 1u
#define IMM_ABORT 2u
#define IMM_PING 3u /* liveness probe; its completion proves the peer is up */
#define IMM_KIND(imm) ((imm) >> 30)
#define IMM_ARG(imm) ((imm)&0xffffu)
#define IMM_MAKE(k, a) (((uint32_t)(k) << 30) | ((uint32_t)(a)&0xffffu))
/* A CREDIT gives back one slot (arg: its index) or, with CREDIT_SET, the
 * slots of a set: bit i of the low CREDIT_SET_SLOTS bits for slot i. */
#define CREDIT_SET (1u << 29)
#define CREDIT_SET_SLOTS 29
#define IMM_CREDIT_SET(mask)                                                   \
  ((IMM_CREDIT << 30) | CREDIT_SET | (uint32_t)(mask))

/* A gathered write in flight: it reads bytes [lo, hi) of buffer buf. */
typedef struct gflight {
  int peer;
  unsigned slot;
  int buf;
  size_t lo, hi;
} gflight;

typedef struct coll_peer {
  uint64_t raddr; /* the peer's staging ring (its slots for this rank) */
  uint32_t rkey;
  uint64_t await_credit; /* slots written, peer has not given back */
  uint64_t await_comp;   /* slots written, local completion not seen */
  uint64_t gathered;     /* of those, slots whose write reads the request's
                            buffer (the gather path) */
  uint64_t arrived;      /* this rank's slots holding unconsumed data */
  uint64_t credit_owed;  /* consumed slots to give back */
  uint64_t alive_at;     /* last completion that proved the peer is up */
  uint64_t ping_at;      /* when the outstanding probe went out, 0: none */
} coll_peer;

struct uroce_coll_req {
  uroce_coll_comm *comm;
  uroce_coll_kind kind;
  uroce_coll_algo algo;
  uroce_coll_dtype dt;
  uroce_coll_op op;
  size_t esize;
  size_t chunk; /* bytes per chunk, a multiple of esize */
  char *work;
  const char *src;
  uint8_t gather; /* bit BUF_*: chunks of that buffer may be sent from it */
  step *steps;
  int nsteps, ss, rs;
  /* copy done after the last step (reduce-scatter's own block, ...) */
  void *fin_dst;
  const void *fin_src;
  size_t fin_len;
  int state; /* UROCE_COLL_INPROGRESS, 0, or a negative error */
  uint64_t last_progress;
};

struct uroce_coll_comm {
  uroce_coll_transport tp;
  int rank, size, slots;
  size_t chunk_bytes, slot_bytes;
  size_t slot_stride; /* bytes per slot in the rings: slot_bytes, or
                         HDR_BYTES when phantom */
  int phantom;        /* lengths only: no payload is copied or reduced */
  int *owed;          /* peers with credits owed, nowed of them */
  int nowed;
  uint64_t timeout_ns;
  uroce_coll_algo algo;
  char *recv_ring, *send_ring; /* ring_bytes each */
  int recv_ring_tp;            /* recv_ring is the transport's */
  size_t ring_bytes;
  uroce_coll_mr recv_mr, send_mr;
  coll_peer *peers;
  int connected;
  int failed;
  uint32_t seq;
  char *scratch[2];
  size_t scratch_len[2];
  /* the gather path: on when the transport has reg_mr_src, post_write_imm2
   * and dereg_mr and the comm is not phantom */
  int gather;
  size_t gather_min;       /* payload bytes a chunk needs to be gathered */
  uroce_coll_mr src_mr[2]; /* cached send-source registrations, by BUF_* */
  uint8_t src_mr_ok[2];    /* whether src_mr[b] is registered */
  gflight *flight;         /* gathered writes without WRITE_DONE yet */
  int nflight, flight_cap;
  uint64_t nawait; /* slot bits set in the peers' await_comp */
  step *steps;
  int steps_cap;
  /* The hosts (uroce_coll_comm_set_hosts). hier_h > 1 when allreduce can
   * run hierarchically: hier_h hosts of hier_l ranks each; hier_local
   * lists this host's ranks in rank order (this rank at hier_lpos),
   * hier_cross the rank at local position hier_lpos on every host, hosts
   * in the order of their lowest rank (this rank at hier_hpos). */
  int hier_h, hier_l, hier_lpos, hier_hpos;
  int *hier_local, *hier_cross;
  uroce_coll_req req;
  char errmsg[256];
};

/* reduce.c: dst[i] = a[i] op b[i] for n elements; dst is a or does not
 * overlap it, b overlaps neither. */
void coll_reduce3(void *dst, const void *a, const void *b, size_t n,
                  uroce_coll_dtype dt, uroce_coll_op op);

/* sched.c: fill req->steps for the request's kind and algorithm. count is
 * the caller's element count (per rank for reduce-scatter, allgather and
 * all-to-all). Returns 0 or -ENOMEM. */
int coll_sched_build(uroce_coll_req *req, size_t count, int root);
/* Can algo run kind on c? */
int coll_algo_supports(const uroce_coll_comm *c, uroce_coll_algo algo,
                       uroce_coll_kind kind);

/* The rendezvous (bootstrap.c): the header a peer sends rank 0 first, in
 * host order, then its blob. */
#define COLL_RDV_HDR_LEN 16
/* Rank 0's reading of a peer's header buf (COLL_RDV_HDR_LEN bytes), for a
 * rendezvous of size ranks and len-byte blobs; fds[r] >= 0 for the ranks
 * already in. Returns the peer's rank (1 .. size - 1), 0 for a stray
 * connection (not ours: ignore it), or UROCE_COLL_ERR_BOOTSTRAP (ours, but
 * its size, blob length or rank is wrong, or the rank came twice). */
int coll_rdv_hdr_check(const void *buf, int size, size_t len, const int *fds);

/* shm.c: the shared-memory path between ranks of one host (docs/coll.md,
 * "Shared memory"). Start-up: every rank publishes its host blob (first
 * rendezvous); coll_shm_hosts() marks the ranks on this host;
 * coll_shm_new() creates this rank's segment; segment blobs go round (the
 * second rendezvous); coll_shm_connect() maps the peers' segments. */
#define COLL_SHM_HOST_BLOB 96
#define COLL_SHM_SEG_BLOB 64
typedef struct coll_shm coll_shm;
int coll_shm_enabled(void); /* UROCE_COLL_SHM is not 0/off */
void coll_shm_host_blob(int rank, void *blob);
/* local[r] = 1 for the ranks on this rank's host (itself included), from
 * size host blobs. Returns how many, or UROCE_COLL_ERR_MISMATCH. */
int coll_shm_hosts(const void *blobs, int size, int rank, uint8_t *local);
/* host[r] = the lowest rank on rank r's host (r itself when it has shared
 * memory off): the same table on every rank. 0, UROCE_COLL_ERR_MISMATCH or
 * -ENOMEM. */
int coll_shm_host_ids(const void *blobs, int size, int *host);
/* How many ranks run on rank's machine (the same kernel boot: network
 * namespaces do not make more CPUs); size where the boot id is unknown. */
int coll_shm_machine_ranks(const void *blobs, int size, int rank);
/* 1 when ranks_here ranks outnumber the CPUs this process may use. */
int coll_yield_auto(int ranks_here);
int coll_shm_new(int rank, int size, const uint8_t *local,
                 const void *host_blobs, coll_shm **out);
void coll_shm_del(coll_shm *s);
int coll_shm_on(const coll_shm *s);
int coll_shm_is_local(const coll_shm *s, int peer);
int coll_shm_nlocal(const coll_shm *s);
const char *coll_shm_mode(const coll_shm *s); /* "cma", "copy", ... */
const char *coll_shm_errmsg(const coll_shm *s);
void coll_shm_seg_blob(const coll_shm *s, void *blob);
int coll_shm_connect(coll_shm *s, const void *seg_blobs);
/* The receive ring in shared memory (host peers map it at connect and
 * write into it directly): len zeroed bytes, or NULL where there are no
 * host peers, UROCE_COLL_SHM_RING=0, one exists already, or /dev/shm
 * cannot hold it. */
void *coll_shm_ring_alloc(coll_shm *s, size_t len);
void coll_shm_ring_free(coll_shm *s, void *addr, size_t len);
void coll_shm_unlink(coll_shm *s); /* once every peer has mapped it */
int coll_shm_add_region(coll_shm *s, void *addr, size_t len);
void coll_shm_del_region(coll_shm *s, void *addr);
int coll_shm_write(coll_shm *s, int peer, const void *p1, size_t l1,
                   const void *p2, size_t l2, uint64_t raddr, uint32_t imm,
                   uint64_t wr_id);
int coll_shm_poll(coll_shm *s, uroce_coll_cqe *q, int max);

#endif
