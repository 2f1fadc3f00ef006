/* libFuzzer target: `uroce plan`'s parsers. The first input byte picks a
 * spec (even), a catalogue (1 modulo 4) or a collective trace (3 modulo
 * 4); the rest is the document. A spec that parses is enumerated (sized
 * and priced) when it is small, so the BOM arithmetic sees whatever
 * numbers the parser lets through. Any out-of-bounds access, UB or crash
 * is a finding. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "plan/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct plan_spec sp;
  static struct plan_catalogue cat;
  static struct plan_option opt[32];
  char err[512];
  if (size < 1)
    return 0;
  bool spec = !(data[0] & 1);
  const char *text = (const char *)data + 1;
  size--;
  if (!spec && (data[0] & 2)) {
    memset(&sp, 0, sizeof sp);
    if (plan_trace_parse(text, size, "fuzz.csv", &sp, err, sizeof err) == 0 &&
        (sp.nops == 0 || sp.nops > PLAN_MAX_OPS))
      __builtin_trap(); /* a trace that parses holds 1..PLAN_MAX_OPS */
    return 0;
  }
  if (!spec) {
    memset(&cat, 0, sizeof cat);
    plan_catalogue_parse(text, size, "fuzz.yaml", &cat, err, sizeof err);
    return 0;
  }
  /* Relative catalogue names resolve under a folder that does not exist. */
  if (plan_spec_parse(text, size, "fuzz.yaml", "/nonexistent-uroce-fuzz", &sp,
                      err, sizeof err))
    return 0;
  if (sp.gpus <= 4096)
    plan_enumerate(&sp, opt, 32, err, sizeof err);
  return 0;
}
