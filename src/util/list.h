/* Intrusive doubly linked list: a struct ulist in each element, one as
 * the head; ULIST_ENTRY gets the element from its member. */
#ifndef UROCE_UTIL_LIST_H
#define UROCE_UTIL_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct ulist {
  struct ulist *prev, *next;
};
static inline void ulist_init(struct ulist *l) {
  l->prev = l->next = l;
}
static inline bool ulist_empty(const struct ulist *l) {
  return l->next == l;
}
static inline void ulist_add_tail(struct ulist *head, struct ulist *n) {
  n->prev = head->prev;
  n->next = head;
  head->prev->next = n;
  head->prev = n;
}
static inline void ulist_del(struct ulist *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = n;
}
#define ULIST_ENTRY(p, type, member)                                           \
  ((type *)(void *)((char *)(p)-offsetof(type, member)))

#endif
