#include "sim/heap.h"

#include <errno.h>
#include <stdlib.h>

/* An entry's seq holds the event's key in its high 40 bits and its token
 * (low 24 bits) below: ordering by seq is key order (an event is in the
 * heap live at most once), and an entry is live only while its event is
 * still due at the entry's time with the same token. */
#define TOKEN_BITS 24
#define TOKEN_MASK ((1u << TOKEN_BITS) - 1)

static inline bool less(const struct sim_heap_ent *a,
                        const struct sim_heap_ent *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int sim_heap_init(struct sim_heap *h, uint32_t cap) {
  h->n = 0;
  h->cap = cap < 16 ? 16 : cap;
  h->a = malloc(sizeof(*h->a) * h->cap);
  return h->a ? 0 : -ENOMEM;
}

void sim_heap_free(struct sim_heap *h) {
  free(h->a);
  h->a = 0;
  h->n = h->cap = 0;
}

static void sift_up(struct sim_heap_ent *a, uint32_t i) {
  struct sim_heap_ent e = a[i];
  while (i) {
    uint32_t p = (i - 1) >> 2;
    if (!less(&e, &a[p]))
      break;
    a[i] = a[p];
    i = p;
  }
  a[i] = e;
}

static void sift_down(struct sim_heap_ent *a, uint32_t n, uint32_t i) {
  struct sim_heap_ent e = a[i];
  for (;;) {
    uint32_t c = 4 * i + 1;
    if (c >= n)
      break;
    uint32_t best = c, end = c + 4 < n ? c + 4 : n;
    for (uint32_t j = c + 1; j < end; j++)
      if (less(&a[j], &a[best]))
        best = j;
    if (!less(&a[best], &e))
      break;
    a[i] = a[best];
    i = best;
  }
  a[i] = e;
}

int sim_heap_push(struct sim_heap *h, struct sim_ev *ev, sim_time_t t) {
  if (h->n == h->cap) {
    uint32_t cap = h->cap * 2;
    struct sim_heap_ent *a = realloc(h->a, sizeof(*a) * cap);
    if (!a)
      return -ENOMEM;
    h->a = a;
    h->cap = cap;
  }
  ev->token++;
  ev->at = t;
  h->a[h->n] = (struct sim_heap_ent){
      t, (ev->key << TOKEN_BITS) | (ev->token & TOKEN_MASK), ev};
  sift_up(h->a, h->n++);
  return 0;
}

static inline bool live(const struct sim_heap_ent *e) {
  return e->ev->at == e->t &&
         (e->seq & TOKEN_MASK) == (e->ev->token & TOKEN_MASK);
}

struct sim_ev *sim_heap_pop(struct sim_heap *h, sim_time_t until,
                            sim_time_t *t) {
  while (h->n) {
    struct sim_heap_ent e = h->a[0];
    if (e.t > until)
      return 0;
    h->a[0] = h->a[--h->n];
    if (h->n)
      sift_down(h->a, h->n, 0);
    if (!live(&e))
      continue;
    e.ev->at = SIM_NEVER;
    *t = e.t;
    return e.ev;
  }
  return 0;
}

struct sim_ev *sim_heap_top(struct sim_heap *h) {
  while (h->n) {
    if (live(&h->a[0]))
      return h->a[0].ev;
    h->a[0] = h->a[--h->n];
    if (h->n)
      sift_down(h->a, h->n, 0);
  }
  return 0;
}

sim_time_t sim_heap_peek(struct sim_heap *h) {
  struct sim_ev *ev = sim_heap_top(h);
  return ev ? ev->at : SIM_NEVER;
}
