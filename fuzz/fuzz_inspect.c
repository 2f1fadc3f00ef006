/* libFuzzer target: the first input byte picks a link type, the rest is a
 * captured frame; runs the parser and `uroce dump`'s per-packet path (text
 * and JSON). Any out-of-bounds access, UB or crash is a finding. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/frame.h"
#include "wire/hdr.h"
#include "wire/inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const int links[] = {UROCE_LINK_ETHERNET, UROCE_LINK_RAW,
                              UROCE_LINK_LINUX_SLL, UROCE_LINK_LINUX_SLL2};
  static struct uroce_inspect_stats st;
  static char out[8192];
  if (size < 1)
    return 0;
  int link = links[data[0] & 3];
  bool json = data[0] & 4;
  data++;
  size--;
  size_t n =
      uroce_inspect_frame(link, data, size, 0, 1, json, &st, out, sizeof(out));
  if (n >= sizeof(out) || (n && out[n - 1] != '\n'))
    __builtin_trap(); /* a line must be whole and fit */
  /* The parser alone on the raw bytes as a BTH. */
  struct uroce_pkt_info pi;
  struct uroce_hdr_fields h;
  uroce_pkt_parse(data, size, &pi);
  uroce_hdr_decode(&pi, &h);
  return 0;
}
