#include "util/jsonl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define JSONL_BUF (64u << 10)
#define JSONL_LINE 4096u

struct jsonl {
  int fd;
  int err; /* first write error since the last flush */
  size_t len;
  char buf[JSONL_BUF];
};

int jsonl_open(struct jsonl **out, const char *path, bool trunc) {
  struct jsonl *j = malloc(sizeof(*j));
  if (!j)
    return -ENOMEM;
  j->fd = open(
      path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (trunc ? O_TRUNC : 0),
      0644);
  if (j->fd < 0) {
    int e = errno;
    free(j);
    return -e;
  }
  j->err = 0;
  j->len = 0;
  *out = j;
  return 0;
}

/* One write(2) for the whole buffer: a regular file opened O_APPEND takes
 * it at its end in one piece. */
int jsonl_flush(struct jsonl *j) {
  size_t off = 0;
  while (off < j->len) {
    ssize_t w = write(j->fd, j->buf + off, j->len - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      if (!j->err)
        j->err = w < 0 ? -errno : -EIO;
      break;
    }
    off += (size_t)w;
  }
  j->len = 0;
  int e = j->err;
  j->err = 0;
  return e;
}

void jsonl_put(struct jsonl *j, const char *line, size_t n) {
  if (n > JSONL_LINE - 1)
    n = JSONL_LINE - 1;
  if (j->len + n + 1 > JSONL_BUF) {
    int e = jsonl_flush(j);
    if (e && !j->err)
      j->err = e; /* kept for the caller's next flush */
  }
  memcpy(j->buf + j->len, line, n);
  j->buf[j->len + n] = '\n';
  j->len += n + 1;
}

int jsonl_close(struct jsonl *j) {
  if (!j)
    return 0;
  int e = jsonl_flush(j);
  if (close(j->fd) < 0 && !e)
    e = -errno;
  free(j);
  return e;
}
