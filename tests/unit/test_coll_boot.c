/* Bootstrap: launcher environments, and the TCP rendezvous on loopback with
 * one thread per rank (its result then connects real communicators). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coll_mem.h"
#include "t.h"

/* a fake environment: "NAME=value" strings */
static const char *fake_get(void *ctx, const char *name) {
  for (const char **e = ctx; *e; e++) {
    size_t n = strlen(name);
    if (!strncmp(*e, name, n) && (*e)[n] == '=')
      return *e + n + 1;
  }
  return NULL;
}

static void test_env(void) {
  uroce_coll_env env;
  const char *torch[] = {"RANK=3",
                         "WORLD_SIZE=8",
                         "LOCAL_RANK=1",
                         "MASTER_ADDR=10.0.0.1",
                         "MASTER_PORT=29500",
                         NULL};
  CHECK_EQ(uroce_coll_env_parse(fake_get, torch, &env), 0);
  CHECK_EQ(env.rank, 3);
  CHECK_EQ(env.size, 8);
  CHECK_EQ(env.local_rank, 1);
  CHECK(!strcmp(env.master_addr, "10.0.0.1"));
  CHECK_EQ(env.master_port, 29500);
  CHECK(!strcmp(env.launcher, "torchrun"));

  const char *ompi[] = {"OMPI_COMM_WORLD_RANK=0",
                        "OMPI_COMM_WORLD_SIZE=2",
                        "OMPI_COMM_WORLD_LOCAL_RANK=0",
                        "UROCE_MASTER_ADDR=host-a",
                        "UROCE_MASTER_PORT=4000",
                        "MASTER_PORT=1",
                        NULL};
  CHECK_EQ(uroce_coll_env_parse(fake_get, ompi, &env), 0);
  CHECK(!strcmp(env.launcher, "openmpi"));
  CHECK_EQ(env.size, 2);
  CHECK_EQ(env.master_port, 4000); /* UROCE_ wins */
  CHECK(!strcmp(env.master_addr, "host-a"));

  const char *pmi[] = {"PMI_RANK=5",    "PMI_SIZE=6",    "MPI_LOCALRANKID=2",
                       "MASTER_ADDR=h", "MASTER_PORT=9", NULL};
  CHECK_EQ(uroce_coll_env_parse(fake_get, pmi, &env), 0);
  CHECK(!strcmp(env.launcher, "pmi"));
  CHECK_EQ(env.rank, 5);
  CHECK_EQ(env.local_rank, 2);

  const char *slurm[] = {"SLURM_PROCID=1", "SLURM_NTASKS=4", "MASTER_ADDR=h",
                         "MASTER_PORT=9", NULL};
  CHECK_EQ(uroce_coll_env_parse(fake_get, slurm, &env), 0);
  CHECK(!strcmp(env.launcher, "slurm"));
  CHECK_EQ(env.local_rank, -1);

  /* UROCE_RANK/SIZE win over the launcher's */
  const char *both[] = {
      "UROCE_RANK=1",  "UROCE_SIZE=2",  "RANK=7", "WORLD_SIZE=9",
      "MASTER_ADDR=h", "MASTER_PORT=9", NULL};
  CHECK_EQ(uroce_coll_env_parse(fake_get, both, &env), 0);
  CHECK_EQ(env.rank, 1);
  CHECK_EQ(env.size, 2);

  const char *bad_rank[] = {"RANK=8", "WORLD_SIZE=8", "MASTER_ADDR=h",
                            "MASTER_PORT=9", NULL};
  CHECK_EQ(uroce_coll_env_parse(fake_get, bad_rank, &env),
           UROCE_COLL_ERR_BOOTSTRAP);
  const char *junk[] = {"RANK=1x", "WORLD_SIZE=8", "MASTER_ADDR=h",
                        "MASTER_PORT=9", NULL};
  CHECK_EQ(uroce_coll_env_parse(fake_get, junk, &env),
           UROCE_COLL_ERR_BOOTSTRAP);
  const char *noport[] = {"RANK=1", "WORLD_SIZE=8", "MASTER_ADDR=h", NULL};
  CHECK_EQ(uroce_coll_env_parse(fake_get, noport, &env),
           UROCE_COLL_ERR_BOOTSTRAP);
  const char *bigport[] = {"RANK=1", "WORLD_SIZE=8", "MASTER_ADDR=h",
                           "MASTER_PORT=70000", NULL};
  CHECK_EQ(uroce_coll_env_parse(fake_get, bigport, &env),
           UROCE_COLL_ERR_BOOTSTRAP);
  const char *none[] = {"MASTER_ADDR=h", "MASTER_PORT=9", NULL};
  CHECK_EQ(uroce_coll_env_parse(fake_get, none, &env),
           UROCE_COLL_ERR_BOOTSTRAP);

  /* the process environment */
  setenv("UROCE_RANK", "0", 1);
  setenv("UROCE_SIZE", "1", 1);
  setenv("UROCE_MASTER_ADDR", "127.0.0.1", 1);
  setenv("UROCE_MASTER_PORT", "1234", 1);
  CHECK_EQ(uroce_coll_env_parse(NULL, NULL, &env), 0);
  CHECK_EQ(env.size, 1);
  CHECK_EQ(env.master_port, 1234);
  unsetenv("UROCE_RANK");
  unsetenv("UROCE_SIZE");
  unsetenv("UROCE_MASTER_ADDR");
  unsetenv("UROCE_MASTER_PORT");
}

static uint16_t free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, (struct sockaddr *)&a, sizeof a);
  socklen_t l = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &l);
  close(fd);
  return ntohs(a.sin_port);
}

typedef struct job {
  uint16_t port;
  int rank, size;
  size_t len;
  const char *blob;
  char *all;
  int rc;
  uint64_t timeout;
} job;

static void *run_job(void *arg) {
  job *j = arg;
  j->rc = uroce_coll_rendezvous("127.0.0.1", j->port, j->rank, j->size, j->blob,
                                j->len, j->all, j->timeout);
  return NULL;
}

/* size threads; blob lengths per rank from lens (NULL: all len) */
static void rendezvous(int size, size_t len, const size_t *lens,
                       char blobs[][64], char alls[][16 * 64], int *rcs) {
  uint16_t port = free_port();
  pthread_t th[16];
  job jobs[16];
  /* the peers start first: they must wait for the master */
  for (int r = size - 1; r >= 0; r--) {
    jobs[r] = (job){port,     r,       size, lens ? lens[r] : len,
                    blobs[r], alls[r], 0,    5000000000ull};
    pthread_create(&th[r], NULL, run_job, &jobs[r]);
    if (r == 1)
      usleep(50000);
  }
  for (int r = 0; r < size; r++) {
    pthread_join(th[r], NULL);
    rcs[r] = jobs[r].rc;
  }
}

static void test_rendezvous(void) {
  static char blobs[16][64], alls[16][16 * 64];
  int rcs[16];
  int sizes[] = {1, 2, 5, 16};
  for (int si = 0; si < 4; si++) {
    int n = sizes[si];
    for (int r = 0; r < n; r++)
      for (int i = 0; i < 64; i++)
        blobs[r][i] = (char)(r * 31 + i);
    memset(alls, 0, sizeof alls);
    rendezvous(n, 64, NULL, blobs, alls, rcs);
    for (int r = 0; r < n; r++) {
      CHECK_EQ(rcs[r], 0);
      for (int q = 0; q < n; q++)
        CHECK(!memcmp(alls[r] + q * 64, blobs[q], 64));
    }
  }
  /* one rank with a different blob size: everyone fails */
  size_t lens[3] = {64, 64, 32};
  rendezvous(3, 64, lens, blobs, alls, rcs);
  for (int r = 0; r < 3; r++)
    CHECK(rcs[r] < 0);
  /* no master: a peer gives up at its timeout */
  char out[128];
  CHECK_EQ(uroce_coll_rendezvous("127.0.0.1", free_port(), 1, 2, blobs[0], 64,
                                 out, 200000000ull),
           UROCE_COLL_ERR_TIMEOUT);
  /* the master alone waits for its peers until the timeout */
  CHECK_EQ(uroce_coll_rendezvous("127.0.0.1", free_port(), 0, 2, blobs[0], 64,
                                 out, 100000000ull),
           UROCE_COLL_ERR_TIMEOUT);
  CHECK_EQ(uroce_coll_rendezvous("127.0.0.1", 1, 2, 2, blobs[0], 64, out, 1),
           UROCE_ERR_INVALID_ARGUMENT);
}

/* Communicator info exchanged through the rendezvous connects working
 * communicators. */
static void test_rendezvous_connects(void) {
  enum { N = 4 };
  coll_mem *m = coll_mem_new(N, 1, 0);
  uroce_coll_comm *comms[N];
  static char blobs[16][64], alls[16][16 * 64];
  size_t isz = uroce_coll_comm_info_size();
  CHECK(isz <= 64);
  for (int r = 0; r < N; r++) {
    CHECK_EQ(uroce_coll_comm_new(coll_mem_tp(m, r), NULL, &comms[r]), 0);
    CHECK_EQ(uroce_coll_comm_info(comms[r], blobs[r], isz), (int)isz);
  }
  int rcs[16];
  rendezvous(N, isz, NULL, blobs, alls, rcs);
  for (int r = 0; r < N; r++) {
    CHECK_EQ(rcs[r], 0);
    CHECK_EQ(uroce_coll_comm_connect(comms[r], alls[r], N * isz), 0);
  }
  int64_t v[N][3];
  uroce_coll_req *reqs[N];
  int rc[N];
  for (int r = 0; r < N; r++) {
    for (int i = 0; i < 3; i++)
      v[r][i] = r * 10 + i;
    CHECK_EQ(uroce_coll_allreduce_start(comms[r], v[r], v[r], 3,
                                        UROCE_COLL_INT64, UROCE_COLL_MAX,
                                        &reqs[r]),
             0);
  }
  CHECK_EQ(coll_mem_run(m, reqs, rc, 1000000000ull), 0);
  for (int r = 0; r < N; r++) {
    CHECK_EQ(rc[r], 0);
    CHECK_EQ(v[r][2], 32);
    uroce_coll_comm_del(comms[r]);
  }
  coll_mem_del(m);
}

int main(void) {
  T_RUN(test_env);
  T_RUN(test_rendezvous);
  T_RUN(test_rendezvous_connects);
  return T_DONE();
}
