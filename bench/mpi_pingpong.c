/* A tight point-to-point loop, for the cost of libringmaster_pmpi.so's per-call bookkeeping
 * (bench/pmpi_p2p_overhead.sh). On 2 ranks: rank 0 sends 8 bytes to rank 1 with MPI_Send and
 * waits for them back with MPI_Recv, rank 1 the reverse (a ping-pong, one message in flight).
 * On 1 rank: MPI_Sendrecv of 8 bytes to itself (no peer: the call alone, where a per-call cost
 * weighs most).
 *
 * The iterations run in blocks of 1,000 that alternate between the MPI_ names (through the
 * preloaded library, when there is one) and the PMPI_ names (never through it), on every rank
 * alike, so that both arms share the same process, the same moment and the same machine load:
 * on a 2-core machine that other work shares, separate runs of the same program spread by more
 * than the effect to measure. Each arm's rate is taken from its median block, so that a block
 * in which the rank lost its core to another process does not count. Without the library both
 * arms are the same calls (a control). Rank 0 prints "round trips/s through MPI_ N through
 * PMPI_ M ratio R" after ITERS timed iterations and WARMUP untimed ones.
 * Usage (under mpirun): mpi_pingpong ITERS WARMUP */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define BLOCK 1000

typedef int (*SendFn)(const void*, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*RecvFn)(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status*);
typedef int (*SendrecvFn)(const void*, int, MPI_Datatype, int, int, void*, int, MPI_Datatype, int,
                          int, MPI_Comm, MPI_Status*);

struct Calls {
  SendFn send;
  RecvFn recv;
  SendrecvFn sendrecv;
};

static void Iterate(const struct Calls* calls, int rank, int size, long n) {
  long long out = 0, in = 0;
  for (long i = 0; i < n; ++i) {
    if (size == 1) {
      calls->sendrecv(&out, 1, MPI_LONG_LONG, 0, 0, &in, 1, MPI_LONG_LONG, 0, 0, MPI_COMM_SELF,
                      MPI_STATUS_IGNORE);
    } else if (rank == 0) {
      calls->send(&out, 1, MPI_LONG_LONG, 1, 0, MPI_COMM_WORLD);
      calls->recv(&in, 1, MPI_LONG_LONG, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      calls->recv(&in, 1, MPI_LONG_LONG, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      calls->send(&in, 1, MPI_LONG_LONG, 0, 0, MPI_COMM_WORLD);
    }
    ++out;
  }
}

static int Ascending(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 3 || size > 2) {
    if (rank == 0) fprintf(stderr, "usage: mpirun -np 1|2 mpi_pingpong ITERS WARMUP\n");
    MPI_Finalize();
    return 2;
  }
  const long iters = atol(argv[1]), warmup = atol(argv[2]);
  const struct Calls through_mpi = {MPI_Send, MPI_Recv, MPI_Sendrecv};
  const struct Calls through_pmpi = {PMPI_Send, PMPI_Recv, PMPI_Sendrecv};
  Iterate(&through_mpi, rank, size, warmup);
  Iterate(&through_pmpi, rank, size, warmup);
  PMPI_Barrier(MPI_COMM_WORLD);
  const long blocks = iters / BLOCK / 2 > 0 ? iters / BLOCK / 2 : 1; /* per arm */
  double* seconds[2] = {malloc(sizeof(double) * (size_t)blocks),
                        malloc(sizeof(double) * (size_t)blocks)};
  if (seconds[0] == NULL || seconds[1] == NULL) {
    fprintf(stderr, "mpi_pingpong: out of memory\n");
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (long block = 0; block < 2 * blocks; ++block) {
    const int arm = (int)(block % 2);
    const double start = PMPI_Wtime();
    Iterate(arm == 0 ? &through_mpi : &through_pmpi, rank, size, BLOCK);
    seconds[arm][block / 2] = PMPI_Wtime() - start;
  }
  if (rank == 0) {
    qsort(seconds[0], (size_t)blocks, sizeof(double), Ascending);
    qsort(seconds[1], (size_t)blocks, sizeof(double), Ascending);
    const double mpi = BLOCK / seconds[0][blocks / 2], pmpi = BLOCK / seconds[1][blocks / 2];
    printf("round trips/s through MPI_ %.0f through PMPI_ %.0f ratio %.4f\n", mpi, pmpi,
           mpi / pmpi);
  }
  free(seconds[0]);
  free(seconds[1]);
  MPI_Finalize();
  return 0;
}
