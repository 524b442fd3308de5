// The baseline for the trainer's allreduce benchmark: Open MPI's own MPI_Allreduce (sum of
// floats, in place) on the same sizes, timed the same way, printed in the same columns.
// Usage (under mpirun): mpi_allreduce_baseline MIN_BYTES MAX_BYTES ITERS WARMUP
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 5) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi_allreduce_baseline MIN MAX ITERS WARMUP\n");
    MPI_Finalize();
    return 2;
  }
  const long min_bytes = std::atol(argv[1]), max_bytes = std::atol(argv[2]);
  const int iters = std::atoi(argv[3]), warmup = std::atoi(argv[4]);
  if (rank == 0) {
    std::printf("# MPI_Allreduce baseline: %d rank(s), %d iterations (%d warm-up)\n", size, iters,
                warmup);
    std::printf("#       size    time(us)   algbw   busbw  #wrong\n");
  }
  int failures = 0;
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const long count = bytes / static_cast<long>(sizeof(float));
    std::vector<float> buf(static_cast<size_t>(count));
    for (int i = 0; i < warmup; ++i) {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    }
    double seconds = 0;
    long wrong = 0;
    for (int i = 0; i < iters; ++i) {
      for (long j = 0; j < count; ++j) buf[static_cast<size_t>(j)] = static_cast<float>(rank + 1);
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = std::chrono::steady_clock::now();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const float expected = static_cast<float>(size * (size + 1) / 2);
      for (long j = 0; j < count; ++j) wrong += buf[static_cast<size_t>(j)] != expected;
    }
    double slowest = 0;
    MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    long all_wrong = 0;
    MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      const double t = slowest / iters;
      const double algbw = static_cast<double>(bytes) / t / 1e9;
      const double busbw = algbw * 2.0 * (size - 1) / size;
      std::printf("%12ld %11.2f %7.2f %7.2f %7ld\n", bytes, t * 1e6, algbw, busbw, all_wrong);
      failures += all_wrong != 0;
    }
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
