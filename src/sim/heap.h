/* The event queue: a 4-ary array heap ordered by (time, key). An event's
 * key is fixed when it is set up, from its kind and the index of what it
 * belongs to (a port, a NIC, a flow): events due at the same time run in
 * key order, whatever order they were scheduled in, so that a partition
 * of the fabric running on its own thread runs its events in the order
 * the sequential run does (docs/sim.md, "Parallel simulation").
 * Cancellation is lazy: an event object carries a token, each (re)schedule
 * bumps it, and a popped entry whose token no longer matches is
 * skipped. */
#ifndef UROCE_SIM_HEAP_H
#define UROCE_SIM_HEAP_H

#include <stdbool.h>
#include <stdint.h>

#include "sim/sim.h"

struct sim_ev {
  sim_time_t at; /* when it is due; SIM_NEVER when not scheduled */
  uint64_t key;  /* order among events due at the same time */
  uint32_t token;
  uint16_t arg;  /* free for the owner: the simulator's event kind */
  uint16_t part; /* the partition that runs it (sim.c) */
};

/* Keys: the kind's class in the top bits, then the kind, then an index
 * unique within the kind. Global events (SIM_KEY_GLOBAL) sort after every
 * other event due at the same time. Keys fit in 40 bits. */
#define SIM_KEY_GLOBAL (1ull << 39)
#define SIM_KEY_KIND_SHIFT 34
#define SIM_KEY_IDX_MAX ((1ull << SIM_KEY_KIND_SHIFT) - 1)

struct sim_heap_ent {
  sim_time_t t;
  uint64_t seq; /* the event's key, then its token's low 24 bits */
  struct sim_ev *ev;
};

struct sim_heap {
  struct sim_heap_ent *a;
  uint32_t n, cap;
};

int sim_heap_init(struct sim_heap *h, uint32_t cap);
void sim_heap_free(struct sim_heap *h);

/* Schedules ev at t, replacing any earlier schedule. Returns 0 or -ENOMEM. */
int sim_heap_push(struct sim_heap *h, struct sim_ev *ev, sim_time_t t);

/* An unscheduled event of kind arg whose key is key (see above). */
static inline void sim_ev_setup(struct sim_ev *ev, uint16_t arg, uint64_t key) {
  ev->at = SIM_NEVER;
  ev->token = 0;
  ev->arg = arg;
  ev->part = 0;
  ev->key = key;
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
/* The earliest live event without taking it; NULL if none. */
struct sim_ev *sim_heap_top(struct sim_heap *h);

#endif
