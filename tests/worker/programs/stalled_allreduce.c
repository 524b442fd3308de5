/* A plain MPI program for hang detection tests: every rank joins one MPI_Allreduce, then the
 * rank named by STALL_RANK (default 1; -1: none) sleeps instead of joining the second one while
 * the others block in it. HOLD_MS (default 0): every rank first sleeps that long after
 * MPI_Init, so that the job is still running when a verdict on it comes (the pre-run check
 * inside MPI_Init). Each rank prints the wall-clock time at which MPI_Init returned to it
 * (bench/precheck_start.sh reads it). STALL_P2P=1: the second reduction is made of
 * point-to-point calls, as mpi4py's object allreduce is (every rank sends its value to rank 0,
 * which receives them in rank order and sends the sum back), so rank 0 waits in MPI_Recv for
 * the stalled rank and the others in MPI_Recv for rank 0, and the collective counts of all ranks
 * stay equal. No Ringmaster code: the counts and MPI positions come from the preloaded PMPI
 * library. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  printf("rank %d: past MPI_Init at %lld ms\n", rank,
         (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
  fflush(stdout);
  const char* stall = getenv("STALL_RANK");
  const int stall_rank = stall != NULL ? atoi(stall) : 1;
  const char* hold = getenv("HOLD_MS");
  if (hold != NULL && atoi(hold) > 0) usleep((useconds_t)atoi(hold) * 1000);
  int value = 1, sum = 0;
  MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d: first allreduce done (sum %d)\n", rank, sum);
  fflush(stdout);
  if (rank == stall_rank) {
    printf("rank %d: not joining the second allreduce\n", rank);
    fflush(stdout);
    sleep(600);
  }
  const char* p2p = getenv("STALL_P2P");
  if (p2p != NULL && atoi(p2p) == 1) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
      sum = value;
      for (int from = 1; from < size; ++from) {
        int got = 0;
        MPI_Recv(&got, 1, MPI_INT, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        sum += got;
      }
      for (int to = 1; to < size; ++to) MPI_Send(&sum, 1, MPI_INT, to, 1, MPI_COMM_WORLD);
    } else {
      MPI_Send(&value, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
      MPI_Recv(&sum, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else {
    MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
