/* The event queue: a 4-ary array heap ordered by (time, sequence), so that
 * events at equal times run in the order they were scheduled. Cancellation
 * is lazy: an event object carries a token, each (re)schedule bumps it, and
 * a popped entry whose token no longer matches is skipped. */
#ifndef UROCE_SIM_HEAP_H
#define UROCE_SIM_HEAP_H

#include <stdbool.h>
#include <stdint.h>

#include "sim/sim.h"

struct sim_ev {
  sim_time_t at; /* when it is due; SIM_NEVER when not scheduled */
  uint32_t token;
  uint32_t arg; /* free for the owner */
};

struct sim_heap_ent {
  sim_time_t t;
  uint64_t seq;
  struct sim_ev *ev;
};

struct sim_heap {
  struct sim_heap_ent *a;
  uint32_t n, cap;
  uint64_t seq;
};

int sim_heap_init(struct sim_heap *h, uint32_t cap);
void sim_heap_free(struct sim_heap *h);

/* Schedules ev at t, replacing any earlier schedule. Returns 0 or -ENOMEM. */
int sim_heap_push(struct sim_heap *h, struct sim_ev *ev, sim_time_t t);

static inline void sim_ev_init(struct sim_ev *ev) {
  ev->at = SIM_NEVER;
  ev->token = 0;
}
static inline void sim_ev_cancel(struct sim_ev *ev) {
  ev->at = SIM_NEVER;
  ev->token++;
}

/* Pops the earliest live event due at or before until; NULL if none. Sets
 * *t to its time and marks it unscheduled. */
struct sim_ev *sim_heap_pop(struct sim_heap *h, sim_time_t until,
                            sim_time_t *t);
/* Time of the earliest live event, SIM_NEVER if none. */
sim_time_t sim_heap_peek(struct sim_heap *h);

#endif
