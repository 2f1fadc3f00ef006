/* libFuzzer target: `uroce plan`'s YAML parsers. The first input byte
 * picks a spec (even) or a catalogue (odd); the rest is the document. A
 * spec that parses is enumerated (sized and priced) when it is small, so
 * the BOM arithmetic sees whatever numbers the parser lets through. Any
 * out-of-bounds access, UB or crash is a finding. */
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
