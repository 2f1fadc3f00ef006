/* libFuzzer target: the first input byte picks a link type, output form,
 * UDP port and whether conversations and a filter are on; the rest is a
 * captured frame. Runs the parser, the GSO splitter and `uroce dump`'s
 * per-packet path. Any out-of-bounds access, UB, crash or a line that is
 * not whole is a finding. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/frame.h"
#include "wire/hdr.h"
#include "wire/inspect.h"

static void check_line(void *arg, const char *line, size_t len) {
  (void)arg;
  if (len == 0 || line[len - 1] != '\n' || memchr(line, 0, len))
    __builtin_trap(); /* a line must be whole */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const int links[] = {UROCE_LINK_ETHERNET, UROCE_LINK_RAW,
                              UROCE_LINK_LINUX_SLL, UROCE_LINK_LINUX_SLL2};
  static struct uroce_inspect *in[16];
  static struct uroce_filter *flt;
  if (!flt) {
    char err[128];
    if (uroce_filter_parse("op=RC_*,op=CNP,psn=0-100000,qp=0-0xffff", &flt, err,
                           sizeof(err)) != 0)
      __builtin_trap();
  }
  if (size < 1)
    return 0;
  int link = links[data[0] & 3];
  unsigned mode = (data[0] >> 2) & 15;
  if (!in[mode]) {
    /* One inspector per mode, kept across inputs: conversations and the
     * path MTU guess carry state from frame to frame, as in a capture. */
    struct uroce_inspect_opts o = {.json = mode & 1,
                                   .conv = mode & 2,
                                   .udp_port = (mode & 4) ? 4792 : 0,
                                   .filter = (mode & 8) ? flt : NULL};
    in[mode] = uroce_inspect_new(&o);
    if (!in[mode])
      return 0;
  }
  data++;
  size--;
  uroce_inspect_frame(in[mode], link, data, size, size, 0, 1, check_line, NULL);
  if (data[-1] & 0x80)
    uroce_inspect_summary(in[mode], check_line, NULL);
  /* The parser alone on the raw bytes as a BTH. */
  struct uroce_pkt_info pi;
  struct uroce_hdr_fields h;
  uroce_pkt_parse(data, size, &pi);
  uroce_hdr_decode(&pi, &h);
  return 0;
}
