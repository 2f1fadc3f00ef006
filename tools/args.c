/* Shared command-line value parsing (args.h). strtoull and strtod alone
 * accept what a user did not mean: "-1" becomes 2^64 - 1, "10x" becomes 10,
 * "nan" and "inf" pass every < and > test. */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int bad(const char *tool, const char *opt, const char *s,
               const char *why) {
  fprintf(stderr, "uroce %s: %s '%s': %s\n", tool, opt, s ? s : "", why);
  return -1;
}

static int out_of_range(const char *tool, const char *opt, const char *s,
                        const char *lo, const char *hi) {
  char why[96];
  snprintf(why, sizeof why, "out of range (%s .. %s)", lo, hi);
  return bad(tool, opt, s, why);
}

/* Whether s starts like a number strto* would take, without the leading
 * blanks and signs they skip silently. */
static int starts_number(const char *s, int allow_minus) {
  if (allow_minus && *s == '-')
    s++;
  return isdigit((unsigned char)s[0]) ||
         (s[0] == '.' && isdigit((unsigned char)s[1]));
}

int arg_u64(const char *tool, const char *opt, const char *s, uint64_t lo,
            uint64_t hi, uint64_t *out) {
  if (!s || !*s)
    return bad(tool, opt, s, "a number is needed");
  if (!starts_number(s, 0))
    return bad(tool, opt, s, "not a non-negative integer");
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (*end)
    return bad(tool, opt, s, "not a non-negative integer");
  char l[24], h[24];
  snprintf(l, sizeof l, "%llu", (unsigned long long)lo);
  snprintf(h, sizeof h, "%llu", (unsigned long long)hi);
  if (errno == ERANGE || v < lo || v > hi)
    return out_of_range(tool, opt, s, l, h);
  *out = v;
  return 0;
}

int arg_int(const char *tool, const char *opt, const char *s, int lo, int hi,
            int *out) {
  if (!s || !*s)
    return bad(tool, opt, s, "a number is needed");
  if (!starts_number(s, 1))
    return bad(tool, opt, s, "not an integer");
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end)
    return bad(tool, opt, s, "not an integer");
  char l[24], h[24];
  snprintf(l, sizeof l, "%d", lo);
  snprintf(h, sizeof h, "%d", hi);
  if (errno == ERANGE || v < lo || v > hi)
    return out_of_range(tool, opt, s, l, h);
  *out = (int)v;
  return 0;
}

int arg_double(const char *tool, const char *opt, const char *s, double lo,
               double hi, double *out) {
  if (!s || !*s)
    return bad(tool, opt, s, "a number is needed");
  /* also rules out "nan", "inf", "0x1p3" spelled with letters first */
  if (!starts_number(s, 1))
    return bad(tool, opt, s, "not a number");
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (*end || !isfinite(v))
    return bad(tool, opt, s, "not a number");
  char l[32], h[32];
  snprintf(l, sizeof l, "%g", lo);
  snprintf(h, sizeof h, "%g", hi);
  if (v < lo || v > hi)
    return out_of_range(tool, opt, s, l, h);
  *out = v;
  return 0;
}

/* 1048576 -> "1M", 1536 -> "1536": the range in the units users type. */
static void human(uint64_t v, char *buf, size_t n) {
  static const char units[] = "KMG";
  int u = -1;
  while (u < 2 && v && v % 1024 == 0) {
    v /= 1024;
    u++;
  }
  if (u < 0)
    snprintf(buf, n, "%llu", (unsigned long long)v);
  else
    snprintf(buf, n, "%llu%c", (unsigned long long)v, units[u]);
}

int arg_size(const char *tool, const char *opt, const char *s, uint64_t lo,
             uint64_t hi, uint64_t *out) {
  if (!s || !*s)
    return bad(tool, opt, s, "a size is needed");
  if (!starts_number(s, 0))
    return bad(tool, opt, s, "not a size (e.g. 4096, 64K, 1.5M, 2G)");
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  double m = 1;
  switch (*end) {
  case 'k':
  case 'K':
    m = 1024.0;
    end++;
    break;
  case 'm':
  case 'M':
    m = 1024.0 * 1024;
    end++;
    break;
  case 'g':
  case 'G':
    m = 1024.0 * 1024 * 1024;
    end++;
    break;
  default:
    break;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end || !isfinite(v))
    return bad(tool, opt, s, "not a size (e.g. 4096, 64K, 1.5M, 2G)");
  char l[24], h[24];
  human(lo, l, sizeof l);
  human(hi, h, sizeof h);
  v *= m;
  /* 2^64 is exact in a double; anything from there up does not fit */
  if (errno == ERANGE || v >= 18446744073709551616.0 || v < (double)lo ||
      v > (double)hi)
    return out_of_range(tool, opt, s, l, h);
  if (v != floor(v))
    return bad(tool, opt, s, "not a whole number of bytes");
  *out = (uint64_t)v;
  return 0;
}

int arg_port(const char *tool, const char *opt, const char *s, uint16_t *out) {
  uint64_t v;
  if (arg_u64(tool, opt, s, 1, 65535, &v) < 0)
    return -1;
  *out = (uint16_t)v;
  return 0;
}

int arg_out_file(const char *tool, const char *opt, const char *path) {
  int fd = path && *path ? open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)
                         : (errno = ENOENT, -1);
  if (fd < 0) {
    fprintf(stderr, "uroce %s: %s '%s': %s\n", tool, opt, path ? path : "",
            strerror(errno));
    return -1;
  }
  close(fd);
  return 0;
}

void arg_see_help(const char *tool) {
  fprintf(stderr, "uroce %s: 'uroce %s --help' lists the options\n", tool,
          tool);
}
