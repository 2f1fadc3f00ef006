/* uroce-sim-mpi: `uroce sim` on MPI ranks, one partition of the fabric
 * each (docs/sim.md, "Past one machine"):
 *
 *   mpirun -np 4 uroce-sim-mpi [uroce sim options] SCENARIO.yaml
 *
 * The results are the sequential run's, byte for byte; rank 0 prints and
 * writes them. This file is the only one that needs MPI: it gives the
 * simulator its message layer (struct sim_net) and runs `uroce sim`. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "tool.h"

#define TAG 0x5e

static void fail(const char *what, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fprintf(stderr, "uroce-sim-mpi: %s: %s\n", what, msg);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Byte counts first (one all-to-all), then the bytes, point to point. */
static int xchg(void *ctx, void *const *buf, const size_t *len, void **in,
                size_t *inlen) {
  MPI_Comm c = *(MPI_Comm *)ctx;
  int n, rc;
  MPI_Comm_size(c, &n);
  uint64_t *sl = malloc(2 * (size_t)n * sizeof(*sl));
  MPI_Request *rq = malloc(2 * (size_t)n * sizeof(*rq));
  if (!sl || !rq) {
    free(sl);
    free(rq);
    return -1;
  }
  uint64_t *rl = sl + n;
  for (int j = 0; j < n; j++)
    sl[j] = len[j];
  rc = MPI_Alltoall(sl, 1, MPI_UINT64_T, rl, 1, MPI_UINT64_T, c);
  if (rc != MPI_SUCCESS)
    fail("MPI_Alltoall", rc);
  int k = 0;
  for (int i = 0; i < n; i++) {
    in[i] = 0;
    inlen[i] = rl[i];
    if (!rl[i])
      continue;
    if (rl[i] > INT32_MAX || !(in[i] = malloc(rl[i]))) {
      fprintf(stderr, "uroce-sim-mpi: %llu bytes of messages from rank %d\n",
              (unsigned long long)rl[i], i);
      MPI_Abort(c, 1);
    }
    rc = MPI_Irecv(in[i], (int)rl[i], MPI_BYTE, i, TAG, c, &rq[k++]);
    if (rc != MPI_SUCCESS)
      fail("MPI_Irecv", rc);
  }
  for (int j = 0; j < n; j++) {
    if (!sl[j])
      continue;
    if (sl[j] > INT32_MAX) {
      fprintf(stderr, "uroce-sim-mpi: %llu bytes of messages to rank %d\n",
              (unsigned long long)sl[j], j);
      MPI_Abort(c, 1);
    }
    rc = MPI_Isend(buf[j], (int)sl[j], MPI_BYTE, j, TAG, c, &rq[k++]);
    if (rc != MPI_SUCCESS)
      fail("MPI_Isend", rc);
  }
  rc = MPI_Waitall(k, rq, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS)
    fail("MPI_Waitall", rc);
  free(sl);
  free(rq);
  return 0;
}

static void reduce(void *ctx, void *v, size_t n, enum sim_net_op op) {
  MPI_Comm c = *(MPI_Comm *)ctx;
  char *p = v;
  /* counts are ints: large arrays go in pieces */
  for (size_t o = 0; o < n;) {
    int k = n - o > (1u << 28) ? 1 << 28 : (int)(n - o);
    int rc = MPI_Allreduce(MPI_IN_PLACE, p + o * 8, k,
                           op == SIM_NET_FSUM ? MPI_DOUBLE : MPI_UINT64_T,
                           op == SIM_NET_MIN   ? MPI_MIN
                           : op == SIM_NET_MAX ? MPI_MAX
                                               : MPI_SUM,
                           c);
    if (rc != MPI_SUCCESS)
      fail("MPI_Allreduce", rc);
    o += (size_t)k;
  }
}

static int agree(int ok) {
  int all = ok;
  int rc =
      MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS)
    fail("MPI_Allreduce", rc);
  return all;
}

int main(int argc, char **argv) {
  int rank = 0, size = 1;
  MPI_Init(&argc, &argv);
  MPI_Comm comm = MPI_COMM_WORLD;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  struct sim_net net = {(uint32_t)rank, (uint32_t)size, &comm, xchg, reduce};
  sim_net_use(&net);
  tool_sim_rank = (unsigned)rank;
  tool_sim_ranks = (unsigned)size;
  tool_sim_agree = agree;
  char name[] = "uroce-sim-mpi";
  argv[0] = name;
  int rc = cmd_sim(argc, argv);
  /* every rank exits with the worst status */
  int all = rc;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MAX, comm);
  MPI_Finalize();
  return all;
}
