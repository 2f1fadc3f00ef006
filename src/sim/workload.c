/* Workloads: permutation, incast, all-to-all, flows from a CSV file; sizes
 * fixed or drawn from a distribution file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_int.h"

static uint64_t draw_size(struct sim *s, uint64_t *rng) {
  const struct sim_size_dist *d = &s->cfg.wl.dist;
  if (!d->n)
    return s->cfg.wl.bytes;
  double u = splitmix64_01(rng);
  uint32_t i = 0;
  while (i + 1 < d->n && d->cdf[i] < u)
    i++;
  if (i == 0 || d->cdf[i] <= d->cdf[i - 1])
    return d->bytes[i] ? d->bytes[i] : 1;
  double f = (u - d->cdf[i - 1]) / (d->cdf[i] - d->cdf[i - 1]);
  double b = (double)d->bytes[i - 1] +
             f * ((double)d->bytes[i] - (double)d->bytes[i - 1]);
  return b < 1 ? 1 : (uint64_t)b;
}

static int add(struct sim *s, uint32_t src, uint32_t dst, uint64_t bytes,
               sim_time_t start, enum sim_op op, char *err, size_t errlen) {
  if (sim_add_flow(s, src, dst, bytes, start, op) < 0) {
    snprintf(err, errlen, "cannot add flow %u -> %u (%llu bytes)", src, dst,
             (unsigned long long)bytes);
    return -1;
  }
  return 0;
}

static int permutation(struct sim *s, uint64_t *rng, char *err, size_t errlen) {
  uint32_t H = s->nhosts;
  if (H < 2) {
    snprintf(err, errlen, "permutation needs at least 2 hosts");
    return -1;
  }
  uint32_t *perm = malloc(sizeof(*perm) * H);
  if (!perm)
    return -1;
  for (uint32_t i = 0; i < H; i++)
    perm[i] = i;
  for (uint32_t i = H - 1; i > 0; i--) {
    uint32_t j = (uint32_t)(splitmix64(rng) % (i + 1));
    uint32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  /* No host sends to itself: swap fixed points with a neighbour. */
  for (uint32_t i = 0; i < H; i++)
    if (perm[i] == i) {
      uint32_t j = (i + 1) % H;
      uint32_t t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
  int rc = 0;
  for (uint32_t r = 0; r < s->rails && !rc; r++)
    for (uint32_t h = 0; h < H && !rc; h++)
      rc = add(s, sim_nic_of(s, h, r), sim_nic_of(s, perm[h], r),
               draw_size(s, rng), s->cfg.wl.start, SIM_OP_WRITE, err, errlen);
  free(perm);
  return rc;
}

static int incast(struct sim *s, uint64_t *rng, char *err, size_t errlen) {
  uint32_t H = s->nhosts, R = s->cfg.wl.incast_receiver,
           N = s->cfg.wl.incast_senders;
  if (R >= H || !N || N >= H) {
    snprintf(err, errlen,
             "incast: receiver must be < %u and senders in "
             "1..%u",
             H, H - 1);
    return -1;
  }
  for (uint32_t r = 0; r < s->rails; r++)
    for (uint32_t i = 1; i <= N; i++)
      if (add(s, sim_nic_of(s, (R + i) % H, r), sim_nic_of(s, R, r),
              draw_size(s, rng), s->cfg.wl.start, SIM_OP_WRITE, err, errlen))
        return -1;
  return 0;
}

static int all_to_all(struct sim *s, uint64_t *rng, char *err, size_t errlen) {
  uint32_t H = s->nhosts;
  /* Shifted order (host h sends to h+1, h+2, ...) as collective
   * libraries schedule it, all posted at once. */
  for (uint32_t d = 1; d < H; d++)
    for (uint32_t r = 0; r < s->rails; r++)
      for (uint32_t h = 0; h < H; h++)
        if (add(s, sim_nic_of(s, h, r), sim_nic_of(s, (h + d) % H, r),
                draw_size(s, rng), s->cfg.wl.start, SIM_OP_WRITE, err, errlen))
          return -1;
  return 0;
}

static char *trim(char *p) {
  while (*p == ' ' || *p == '\t')
    p++;
  char *e = p + strlen(p);
  while (e > p &&
         (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
    *--e = 0;
  return p;
}

/* Reads one line of a text file into buf (without its newline). 1: a
 * line, 0: end of file, -1: a NUL byte, a line longer than the buffer or
 * more than SIM_TEXT_MAX_LINES lines, with the message naming file and
 * line: /dev/zero and binary files end here instead of looping. */
#define SIM_TEXT_MAX_LINES (1u << 24)
static int get_line(FILE *f, char *buf, size_t cap, const char *path, int ln,
                    char *err, size_t errlen) {
  size_t n = 0;
  int c;
  if ((unsigned)ln >= SIM_TEXT_MAX_LINES) {
    snprintf(err, errlen, "%s: more than %u lines", path, SIM_TEXT_MAX_LINES);
    return -1;
  }
  while ((c = getc(f)) != EOF && c != '\n') {
    if (!c) {
      snprintf(err, errlen, "%s:%d: a NUL byte; not a text file", path, ln + 1);
      return -1;
    }
    if (n + 1 >= cap) {
      snprintf(err, errlen, "%s:%d: line longer than %zu bytes", path, ln + 1,
               cap - 2);
      return -1;
    }
    buf[n++] = (char)c;
  }
  if (c == EOF && ferror(f)) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
    return -1;
  }
  buf[n] = 0;
  return c == EOF && !n ? 0 : 1;
}

static int csv(struct sim *s, char *err, size_t errlen) {
  const char *path = s->cfg.wl.csv_path;
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  char line[512];
  int ln = 0, rc = 0, g;
  while (!rc && (g = get_line(f, line, sizeof line, path, ln, err, errlen))) {
    if (g < 0) {
      rc = -1;
      break;
    }
    ln++;
    char *p = trim(line);
    if (!*p || *p == '#')
      continue;
    if (ln == 1 && (*p < '0' || *p > '9'))
      continue; /* header */
    char *fld[6];
    int n = 0;
    for (char *tok = strtok(p, ","); tok && n < 6; tok = strtok(0, ","))
      fld[n++] = trim(tok);
    if (n < 4 || n > 5) {
      snprintf(err, errlen, "%s:%d: expected time_us,src,dst,bytes[,op]", path,
               ln);
      rc = -1;
      break;
    }
    char *e1, *e2, *e3, *e4;
    double t = strtod(fld[0], &e1);
    unsigned long long src = strtoull(fld[1], &e2, 10);
    unsigned long long dst = strtoull(fld[2], &e3, 10);
    unsigned long long b = strtoull(fld[3], &e4, 10);
    enum sim_op op = SIM_OP_WRITE;
    if (n == 5) {
      if (!strcmp(fld[4], "write"))
        op = SIM_OP_WRITE;
      else if (!strcmp(fld[4], "send"))
        op = SIM_OP_SEND;
      else if (!strcmp(fld[4], "read") && s->cfg.tp.model == SIM_HOST_UROCE)
        op = SIM_OP_READ;
      else {
        snprintf(err, errlen,
                 "%s:%d: operation '%s': expected write, send or "
                 "read (read needs transport model uroce)",
                 path, ln, fld[4]);
        rc = -1;
        break;
      }
    }
    if (*e1 || *e2 || *e3 || *e4 || t < 0 || !b || src >= s->nnics ||
        dst >= s->nnics || src == dst) {
      snprintf(err, errlen,
               "%s:%d: bad flow (time >= 0, src and dst "
               "distinct NICs < %u, bytes > 0)",
               path, ln, s->nnics);
      rc = -1;
      break;
    }
    rc = add(s, (uint32_t)src, (uint32_t)dst, b, (sim_time_t)(t * 1e6), op, err,
             errlen);
  }
  fclose(f);
  return rc;
}

int sim_workload_add(struct sim *s, char *err, size_t errlen) {
  uint64_t rng = sim_seed(s->cfg.seed, 5, 0);
  switch (s->cfg.wl.kind) {
  case SIM_WL_NONE:
    return 0;
  case SIM_WL_PERMUTATION:
    return permutation(s, &rng, err, errlen);
  case SIM_WL_INCAST:
    return incast(s, &rng, err, errlen);
  case SIM_WL_ALL_TO_ALL:
    return all_to_all(s, &rng, err, errlen);
  case SIM_WL_CSV:
    return csv(s, err, errlen);
  case SIM_WL_COLLECTIVE:
    return sim_coll_new(s, err, errlen);
  }
  return 0;
}

int sim_size_dist_load(const char *path, struct sim_size_dist *d, char *err,
                       size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  uint32_t cap = 0;
  d->n = 0;
  d->bytes = 0;
  d->cdf = 0;
  char line[256];
  int ln = 0, g;
  while ((g = get_line(f, line, sizeof line, path, ln, err, errlen))) {
    if (g < 0)
      goto fail;
    ln++;
    char *p = trim(line), *e1, *e2;
    if (!*p || *p == '#')
      continue;
    for (char *q = p; *q; q++)
      if (*q == ',')
        *q = ' ';
    double b = strtod(p, &e1);
    double c = strtod(e1, &e2);
    if (e1 == p || e2 == e1 || *trim(e2) || b < 1 || c < 0 || c > 1 ||
        (d->n && (c < d->cdf[d->n - 1] || b < (double)d->bytes[d->n - 1]))) {
      snprintf(err, errlen,
               "%s:%d: expected 'bytes cdf' with both "
               "non-decreasing and cdf in [0,1]",
               path, ln);
      goto fail;
    }
    if (d->n == cap) {
      cap = cap ? cap * 2 : 32;
      uint64_t *nb = realloc(d->bytes, cap * sizeof(*nb));
      if (nb)
        d->bytes = nb;
      double *nc = realloc(d->cdf, cap * sizeof(*nc));
      if (nc)
        d->cdf = nc;
      if (!nb || !nc) {
        snprintf(err, errlen, "out of memory");
        goto fail;
      }
    }
    d->bytes[d->n] = (uint64_t)b;
    d->cdf[d->n++] = c;
  }
  fclose(f);
  if (!d->n || d->cdf[d->n - 1] < 1.0 - 1e-9) {
    snprintf(err, errlen, "%s: the last cdf value must be 1", path);
    free(d->bytes);
    free(d->cdf);
    d->bytes = 0;
    d->cdf = 0;
    d->n = 0;
    return -1;
  }
  return 0;
fail:
  fclose(f);
  free(d->bytes);
  free(d->cdf);
  d->bytes = 0;
  d->cdf = 0;
  d->n = 0;
  return -1;
}
