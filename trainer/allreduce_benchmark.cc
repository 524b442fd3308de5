#include "trainer/allreduce_benchmark.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/host_collectives.h"

namespace ringmaster::trainer {

std::vector<size_t> SweepSizes(size_t min_bytes, size_t max_bytes) {
  std::vector<size_t> sizes;
  for (size_t bytes = min_bytes; bytes > 0 && bytes <= max_bytes; bytes *= 2) {
    sizes.push_back(bytes);
    if (bytes > max_bytes / 2) break;  // the next doubling would pass max (or overflow)
  }
  return sizes;
}

double AllreduceBusBandwidth(double algbw, int ranks) {
  if (ranks < 1) return 0;
  return algbw * 2.0 * (ranks - 1) / ranks;
}

float AllreducePattern(int rank, size_t index) {
  return static_cast<float>((rank + 1) * static_cast<int>(index % 13 + 1));
}

float AllreduceExpectedSum(int ranks, size_t index) {
  const int rank_sum = ranks * (ranks + 1) / 2;  // 1 + 2 + ... + ranks
  return static_cast<float>(rank_sum * static_cast<int>(index % 13 + 1));
}

absl::StatusOr<std::vector<AllreduceResult>> RunAllreduceBenchmark(
    const AllreduceBenchmarkOptions& options, Compute& compute, Communicator& communicator,
    std::ostream* out) {
  const std::vector<size_t> sizes = SweepSizes(options.min_bytes, options.max_bytes);
  if (sizes.empty()) return absl::InvalidArgumentError("no message sizes to sweep");
  if (options.min_bytes % sizeof(float) != 0) {
    return absl::InvalidArgumentError("sizes must be multiples of 4 bytes (floats)");
  }
  const int ranks = communicator.size();
  const int rank = communicator.rank();
  const size_t max_count = sizes.back() / sizeof(float);
  RM_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(compute, max_count));
  std::vector<float> host(max_count);

  if (out != nullptr) {
    *out << absl::StrFormat(
        "# ringmaster-train allreduce benchmark: %s communicator, %s compute, %d rank(s), "
        "%d iterations (%d warm-up)\n",
        communicator.name(), compute.name(), ranks, options.iters, options.warmup_iters);
    *out << "#                                                    in-place\n"
         << "#       size         count      type   redop      time   algbw   busbw  #wrong\n"
         << "#        (B)    (elements)                        (us)  (GB/s)  (GB/s)\n";
    out->flush();
  }

  std::vector<AllreduceResult> results;
  int64_t total_wrong = 0;
  double busbw_sum = 0;
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    for (size_t i = 0; i < count; ++i) host[i] = AllreducePattern(rank, i);
    RM_RETURN_IF_ERROR(compute.CopyFromHost(host.data(), count, buffer.data()));

    // Timed in place on the pattern: values grow by a factor of `ranks` per iteration and may
    // reach inf, which adds as fast as any other float; the check below starts afresh.
    for (int i = 0; i < options.warmup_iters; ++i) {
      RM_RETURN_IF_ERROR(communicator.AllreduceSum(buffer.data(), count));
    }
    RM_RETURN_IF_ERROR(communicator.Synchronize());
    RM_RETURN_IF_ERROR(compute.Synchronize());
    RM_RETURN_IF_ERROR(communicator.Barrier());
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options.iters; ++i) {
      RM_RETURN_IF_ERROR(communicator.AllreduceSum(buffer.data(), count));
    }
    RM_RETURN_IF_ERROR(communicator.Synchronize());
    RM_RETURN_IF_ERROR(compute.Synchronize());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
        options.iters;

    // Correctness: one fresh allreduce of the pattern, checked element by element.
    for (size_t i = 0; i < count; ++i) host[i] = AllreducePattern(rank, i);
    RM_RETURN_IF_ERROR(compute.CopyFromHost(host.data(), count, buffer.data()));
    RM_RETURN_IF_ERROR(communicator.AllreduceSum(buffer.data(), count));
    RM_RETURN_IF_ERROR(compute.CopyToHost(buffer.data(), count, host.data()));
    double wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      if (host[i] != AllreduceExpectedSum(ranks, i)) ++wrong;
    }

    std::vector<float> totals = {static_cast<float>(seconds * 1e6), static_cast<float>(wrong)};
    RM_RETURN_IF_ERROR(AllreduceHostValues(compute, communicator, &totals));
    AllreduceResult result;
    result.bytes = bytes;
    result.time_us = totals[0] / ranks;
    result.algbw_gbps = static_cast<double>(bytes) / (result.time_us * 1e-6) / 1e9;
    result.busbw_gbps = AllreduceBusBandwidth(result.algbw_gbps, ranks);
    result.wrong = std::llround(totals[1]);
    total_wrong += result.wrong;
    busbw_sum += result.busbw_gbps;
    results.push_back(result);
    if (out != nullptr) {
      *out << absl::StrFormat("%12d  %12d  %8s  %6s  %8.2f  %6.2f  %6.2f  %6d\n", bytes, count,
                              "float", "sum", result.time_us, result.algbw_gbps, result.busbw_gbps,
                              result.wrong);
      out->flush();
    }
  }
  if (out != nullptr) {
    *out << absl::StrFormat("# Out of bounds values : %d %s\n", total_wrong,
                            total_wrong == 0 ? "OK" : "FAILED")
         << absl::StrFormat("# Avg bus bandwidth    : %.4f\n", busbw_sum / results.size());
    out->flush();
  }
  return results;
}

}  // namespace ringmaster::trainer
