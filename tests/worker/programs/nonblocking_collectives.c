/* A plain MPI program with many nonblocking collectives in flight at once: ROUNDS rounds of N
 * MPI_Iallreduce calls completed by one MPI_Waitall, then an MPI_Barrier. Usage:
 * nonblocking_collectives N ROUNDS. Exits 1 if a result is wrong. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int n = argc > 1 ? atoi(argv[1]) : 100;
  const int rounds = argc > 2 ? atoi(argv[2]) : 1;
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Request* requests = malloc(sizeof(MPI_Request) * (size_t)n);
  int* in = malloc(sizeof(int) * (size_t)n);
  int* out = malloc(sizeof(int) * (size_t)n);
  int wrong = requests == NULL || in == NULL || out == NULL;
  for (int round = 0; round < rounds && !wrong; ++round) {
    for (int i = 0; i < n; ++i) {
      in[i] = i;
      MPI_Iallreduce(&in[i], &out[i], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[i]);
    }
    MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
    for (int i = 0; i < n; ++i) wrong |= out[i] != i * size;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  free(requests);
  free(in);
  free(out);
  if (wrong) fprintf(stderr, "nonblocking_collectives: a wrong sum\n");
  return wrong;
}
