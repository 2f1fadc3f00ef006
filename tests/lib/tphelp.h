/* Helpers for transport tests: one end of a connection (PD, CQs, memory,
 * MR, QP) and bringing two ends to RTS the way a verbs program does. */
#ifndef UROCE_TESTS_TPHELP_H
#define UROCE_TESTS_TPHELP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/engine.h"

struct tp_opts {
  uint32_t type;         /* UROCE_QPT_*; default RC */
  uint32_t mtu;          /* enum uroce_mtu; default 1024 */
  uint8_t timeout;       /* default 10 (4 ms) */
  uint8_t retry_cnt;     /* default 7 */
  uint8_t rnr_retry;     /* default 7 */
  uint8_t min_rnr_timer; /* default 1 (10 us) */
  uint8_t max_rd_atomic; /* default 4 */
  uint32_t access;       /* QP access; default all remote rights */
  uint32_t max_send_wr, max_recv_wr, max_sge, max_inline;
  bool use_srq;
  uint32_t srq_limit;
  size_t memlen;      /* default 1 MiB; 0 with phantom: no memory */
  uint32_t mr_access; /* default all */
  uint32_t cqe;       /* default 4096 */
  uint32_t qkey;      /* UD; default 0x11111111 */
  bool phantom_mem;   /* register memlen bytes at a fake address */
  int stop_state;     /* tp_bring_up stops in INIT or RTR; 0: RTS */
};

struct tp_end {
  struct uroce_eng *eng;
  struct uroce_pd *pd;
  struct uroce_cq *scq, *rcq;
  struct uroce_srq *srq;
  struct uroce_qp *qp;
  uint8_t *mem;
  size_t memlen;
  struct uroce_mr *mr;
  uint8_t gid[16];
};

void tp_opts_default(struct tp_opts *o);
/* Creates the objects of one end (QP in RESET). Returns 0 or an error. */
int tp_end_init(struct tp_end *e, struct uroce_eng *eng, const uint8_t gid[16],
                const struct tp_opts *o);
void tp_end_free(struct tp_end *e);
/* RESET -> INIT -> RTR -> RTS for both ends, each aimed at the other. */
int tp_connect(struct tp_end *a, struct tp_end *b, const struct tp_opts *o);
/* Same for one end only (UD: no peer). */
int tp_bring_up(struct tp_end *e, const struct tp_end *peer,
                const struct tp_opts *o);

/* Work request shorthands (one SGE over e's MR). */
int tp_post_send(struct tp_end *e, uint32_t opcode, uint64_t wr_id,
                 uint64_t off, uint32_t len, uint32_t flags,
                 uint64_t remote_addr, uint32_t rkey);
int tp_post_recv(struct tp_end *e, uint64_t wr_id, uint64_t off, uint32_t len);
/* Polls up to n completions of cq into wc, returns the count. */
int tp_poll(struct uroce_cq *cq, struct uroce_wc *wc, int n);

#endif
