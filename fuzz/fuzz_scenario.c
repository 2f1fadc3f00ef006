/* libFuzzer target: the simulator's YAML scenario parser, from text to a
 * struct sim_cfg. Paths inside a scenario are only stored, never opened
 * while parsing, so any input is safe to feed. Findings: a crash, an
 * ASan/UBSan report, a leak, or a failure without a message. */
#include <stddef.h>
#include <stdint.h>

#include "sim/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct sim_cfg cfg;
  char name[64], err[256];
  err[0] = 0;
  int rc = sim_scenario_parse((const char *)data, size, "fuzz", "/fuzz", &cfg,
                              name, sizeof(name), err, sizeof(err));
  if (rc == 0)
    sim_cfg_free(&cfg);
  else if (!err[0])
    __builtin_trap(); /* every rejection names its reason */
  return 0;
}
