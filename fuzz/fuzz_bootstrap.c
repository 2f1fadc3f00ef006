/* libFuzzer target: what a collectives rank reads while bootstrapping:
 * the launcher's environment (uroce_coll_env_parse), the rendezvous header
 * each peer sends rank 0 over TCP (coll_rdv_hdr_check), and the table of
 * communicator blobs rank 0 sends back (uroce_coll_comm_connect). The
 * first byte picks which. Findings: a crash, an ASan/UBSan report, a
 * header accepted with a rank out of range or twice, an environment
 * accepted with a rank outside the size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_int.h"
#include "coll_mem.h"

/* A fake environment: NUL-separated "NAME=value" strings from the input. */
struct env {
  const char *s;
  size_t n;
};

static const char *env_get(void *ctx, const char *name) {
  const struct env *e = ctx;
  size_t k = strlen(name);
  for (const char *p = e->s; p < e->s + e->n; p += strlen(p) + 1)
    if (!strncmp(p, name, k) && p[k] == '=')
      return p + k + 1;
  return NULL;
}

static void fuzz_env(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s)
    return;
  memcpy(s, data, size);
  s[size] = 0; /* every string ends within the buffer */
  struct env e = {s, size};
  uroce_coll_env env;
  if (uroce_coll_env_parse(env_get, &e, &env) == 0 &&
      (env.size < 1 || env.rank < 0 || env.rank >= env.size ||
       !env.master_addr[0] || !env.launcher))
    __builtin_trap();
  free(s);
}

/* Rank 0 reading peer headers in turn, as root_side does. */
static void fuzz_hdrs(const uint8_t *data, size_t size) {
  if (size < 2)
    return;
  int n = 2 + data[0] % 15;
  size_t len = data[1];
  int fds[16];
  for (int i = 0; i < n; i++)
    fds[i] = -1;
  for (size_t off = 2; off + COLL_RDV_HDR_LEN <= size;
       off += COLL_RDV_HDR_LEN) {
    int r = coll_rdv_hdr_check(data + off, n, len, fds);
    if (r < 0)
      break;
    if (r > 0) {
      if (r >= n || fds[r] >= 0)
        __builtin_trap();
      fds[r] = r;
    }
  }
}

/* The blob table, into the communicator of rank 1 of 4. */
static void fuzz_comm_table(const uint8_t *data, size_t size) {
  static coll_mem *m;
  static uroce_coll_comm *comm;
  if (!m) {
    m = coll_mem_new(4, 1, 0);
    if (!m || uroce_coll_comm_new(coll_mem_tp(m, 1), NULL, &comm) < 0)
      abort();
  }
  uroce_coll_comm_connect(comm, data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  switch (data[0] % 3) {
  case 0:
    fuzz_env(data + 1, size - 1);
    break;
  case 1:
    fuzz_hdrs(data + 1, size - 1);
    break;
  default:
    fuzz_comm_table(data + 1, size - 1);
    break;
  }
  return 0;
}
