/* An in-memory fabric for the collectives: N ranks in one process, each
 * with a uroce_coll_transport whose RDMA WRITE (of one piece, or of two with
 * post_write_imm2) is a memcpy into the peer's registered memory and whose
 * completions wait in queues with optional random delays (so arrivals come
 * out of order). A virtual clock, advanced by the driver, makes timeouts
 * deterministic. A rank can be killed: it
 * stops, and writes to it either vanish or complete with an error. */
#ifndef UROCE_TESTS_COLL_MEM_H
#define UROCE_TESTS_COLL_MEM_H

#include <stdint.h>

#include "uroce/coll.h"

typedef struct coll_mem coll_mem;

/* max_delay_ns: each completion is delivered 0..max_delay_ns (in steps of
 * 1 us of virtual time) after its write; 0 delivers in order at once. */
coll_mem *coll_mem_new(int n, uint64_t seed, uint64_t max_delay_ns);
void coll_mem_del(coll_mem *m);
uroce_coll_transport *coll_mem_tp(coll_mem *m, int rank);
uint64_t coll_mem_now(const coll_mem *m);
void coll_mem_tick(coll_mem *m, uint64_t ns);
/* Virtual time that passes on every poll (for uroce_coll_wait()). */
void coll_mem_set_poll_tick(coll_mem *m, uint64_t ns);
/* Kill rank: writes to it complete with an error (error_completions) or
 * never complete. */
void coll_mem_kill(coll_mem *m, int rank, int error_completions);
int coll_mem_dead(const coll_mem *m, int rank);
/* Writes posted so far (all ranks). */
uint64_t coll_mem_writes(const coll_mem *m);

/* The gather path (reg_mr_src, post_write_imm2): on by default; off leaves
 * them NULL, so the engine copies every payload into its send ring. Takes
 * effect for communicators created afterwards. A gathered piece is checked
 * when its WRITE_DONE is polled: if the sender changed it in between, or a
 * request completed while one of its rank's was in flight, that counts as a
 * violation (and is printed). */
void coll_mem_set_gather(coll_mem *m, int on);
/* Extra virtual delay of every WRITE_DONE (arrivals are not delayed). */
void coll_mem_set_done_delay(coll_mem *m, uint64_t ns);
/* Writes posted with post_write_imm2 so far (all ranks). */
uint64_t coll_mem_writes2(const coll_mem *m);
uint64_t coll_mem_violations(const coll_mem *m);
/* Gathered writes of rank whose WRITE_DONE has not been polled. */
int coll_mem_src_inflight(const coll_mem *m, int rank);
/* Rank's registrations covering addr: -1 none, 0 local reads only
 * (reg_mr_src), 1 remotely writable (reg_mr). */
int coll_mem_mr_access(const coll_mem *m, int rank, const void *addr);
/* Regions rank has registered now. */
int coll_mem_mrs(const coll_mem *m, int rank);

/* Create and connect one communicator per rank. 0 or an error. */
int coll_mem_comms(coll_mem *m, const uroce_coll_config *cfg,
                   uroce_coll_comm **comms);
/* Drive every live rank's request round-robin (1 us of virtual time per
 * round) until all finish or max_ns of virtual time pass. rc[i] gets each
 * request's result (UROCE_COLL_INPROGRESS if it did not finish; NULL reqs
 * are skipped). Returns the number of unfinished requests. */
int coll_mem_run(coll_mem *m, uroce_coll_req **reqs, int *rc, uint64_t max_ns);

#endif
