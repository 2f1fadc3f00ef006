#include "transport/cc.h"

#include <string.h>

#include "transport/cc_dcqcn.h"
#include "transport/cc_swift.h"

static void noop_init(void *st, uint64_t now) {}
static void noop_event(void *st, uint64_t now) {}
static void noop_ack(void *st, uint64_t now, uint64_t bytes) {}
static void noop_tx(void *st, uint64_t now, uint32_t bytes) {}
static uint64_t noop_next_tx(const void *st, uint64_t now) {
  return 0;
}
static uint64_t noop_next_expiry(const void *st) {
  return UINT64_MAX;
}

const struct uroce_cc_ops uroce_cc_noop = {
    .name = "none",
    .state_size = 0,
    .init = noop_init,
    .on_ce_marked_rx = noop_event,
    .on_cnp_rx = noop_event,
    .on_ack = noop_ack,
    .on_tx = noop_tx,
    .next_tx_time = noop_next_tx,
    .next_expiry = noop_next_expiry,
    .handle_expiry = noop_event,
};

const struct uroce_cc_ops *uroce_cc_find(const char *name) {
  static const struct uroce_cc_ops *const all[] = {&uroce_cc_noop,
                                                   &uroce_cc_dcqcn,
                                                   &uroce_cc_swift};
  for (size_t i = 0; name && i < sizeof(all) / sizeof(*all); i++)
    if (!strcmp(all[i]->name, name))
      return all[i];
  return 0;
}
