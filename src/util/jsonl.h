/* A file of JSON lines written in whole lines: appended (O_APPEND), so
 * that processes sharing the file interleave lines, never parts of them;
 * buffered, so that a line costs a copy, not a system call. */
#ifndef UROCE_UTIL_JSONL_H
#define UROCE_UTIL_JSONL_H

#include <stdbool.h>
#include <stddef.h>

struct jsonl;

/* Opens path for appending (created 0644 if missing; emptied first if
 * trunc). Returns 0 or -errno. */
int jsonl_open(struct jsonl **out, const char *path, bool trunc);
/* Appends one line (the newline is added): at most 4096 bytes, longer
 * ones are cut. Written out when the buffer is full. */
void jsonl_put(struct jsonl *j, const char *line, size_t n);
/* Writes out what is buffered. Returns 0, or the first write error
 * since the last flush (-errno); lines that failed are lost. */
int jsonl_flush(struct jsonl *j);
/* Flushes and closes; NULL is a no-op. Returns as jsonl_flush. */
int jsonl_close(struct jsonl *j);

#endif
