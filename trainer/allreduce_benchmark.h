// `--benchmark allreduce`: an nccl-tests style sweep of allreduce sizes through the same
// Communicator the training uses, reporting time, algbw, busbw and a correctness count.
#ifndef RINGMASTER_TRAINER_ALLREDUCE_BENCHMARK_H_
#define RINGMASTER_TRAINER_ALLREDUCE_BENCHMARK_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/communicator.h"
#include "trainer/compute.h"

namespace ringmaster::trainer {

struct AllreduceBenchmarkOptions {
  size_t min_bytes = 8;
  size_t max_bytes = size_t{256} << 20;
  int iters = 20;
  int warmup_iters = 5;
};

// min, 2 min, 4 min, ... up to max (max itself is included only when it lies on the doubling).
std::vector<size_t> SweepSizes(size_t min_bytes, size_t max_bytes);

// The nccl-tests bus bandwidth of an allreduce: algbw * 2(n-1)/n, the per-link load of a ring
// allreduce, comparable across rank counts (0 for one rank, which sends nothing).
double AllreduceBusBandwidth(double algbw, int ranks);

// Rank r's element i, chosen so that every sum over ranks is an exact small integer in float
// and a misplaced or missing contribution changes it.
float AllreducePattern(int rank, size_t index);
float AllreduceExpectedSum(int ranks, size_t index);

struct AllreduceResult {
  size_t bytes = 0;
  double time_us = 0;  // mean over ranks of the mean time of one allreduce
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  int64_t wrong = 0;  // elements off the expected sum, over all ranks
};

// Runs the sweep on every rank; rank 0 (out != null) prints the table. Each size: warm-up
// iterations, timed iterations, then one allreduce of the pattern that every rank checks.
absl::StatusOr<std::vector<AllreduceResult>> RunAllreduceBenchmark(
    const AllreduceBenchmarkOptions& options, Compute& compute, Communicator& communicator,
    std::ostream* out);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_ALLREDUCE_BENCHMARK_H_
