// ringmaster-check: the pre-run allreduce check of a job attempt (docs/health-check.md).
// mpirun starts it once per placed rank, over exactly the hosts and slots the attempt was
// given, before the job's own ranks. Each rank:
//   1. joins MPI (the trainer's MpiCommunicator) and does warm-up allreduces;
//   2. runs --iters timed allreduces of --bytes, timing how long it waits inside each one
//      (RINGMASTER_CHECK_DELAY_MS, set by a worker started with --check-delay-ms, makes the
//      ranks of that worker late to every allreduce: a throttled host, on purpose);
//   3. sends its wait time and worker id to rank 0, which writes the result to --result.
// The rank that arrives last at each allreduce waits least; rank 0's worker judges from that
// which worker slowed the ring (services/worker/core/health_check.h).
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/allreduce_benchmark.h"
#include "trainer/mpi_communicator.h"

namespace ringmaster::trainer {
namespace {

constexpr int kWorkerIdBytes = 64;

struct CheckOptions {
  size_t bytes = size_t{1} << 20;
  int iters = 20;
  int warmup_iters = 3;
  int delay_ms = 0;
  std::string result_path;
};

absl::StatusOr<CheckOptions> ParseOptions(int argc, char** argv) {
  CheckOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") continue;
    if (i + 1 >= argc) return absl::InvalidArgumentError(arg + ": needs a value");
    const std::string value = argv[++i];
    int64_t number = 0;
    if (arg == "--result") {
      options.result_path = value;
    } else if (!absl::SimpleAtoi(value, &number) || number < 1) {
      return absl::InvalidArgumentError(arg + ": a positive integer is allowed, got " + value);
    } else if (arg == "--bytes") {
      if (number % 4 != 0 || number > (int64_t{1} << 30)) {
        return absl::InvalidArgumentError("--bytes: a multiple of 4 up to 1 GiB is allowed");
      }
      options.bytes = static_cast<size_t>(number);
    } else if (arg == "--iters") {
      if (number > 10000) return absl::InvalidArgumentError("--iters: 1..10000 allowed");
      options.iters = static_cast<int>(number);
    } else {
      return absl::InvalidArgumentError("unknown flag " + arg +
                                        " (allowed: --bytes, --iters, --result)");
    }
  }
  if (const char* delay = std::getenv("RINGMASTER_CHECK_DELAY_MS"); delay != nullptr) {
    int value = 0;
    if (absl::SimpleAtoi(delay, &value) && value > 0) options.delay_ms = value;
  }
  return options;
}

absl::Status Run(const CheckOptions& options) {
  RM_ASSIGN_OR_RETURN(std::unique_ptr<MpiCommunicator> mpi, MpiCommunicator::Create());
  const size_t count = options.bytes / sizeof(float);
  std::vector<float> buffer(count);
  for (size_t i = 0; i < count; ++i) buffer[i] = AllreducePattern(mpi->rank(), i);
  for (int i = 0; i < options.warmup_iters; ++i) {
    RM_RETURN_IF_ERROR(mpi->AllreduceSum(buffer.data(), count));
  }
  RM_RETURN_IF_ERROR(mpi->Barrier());
  using Clock = std::chrono::steady_clock;
  double wait_seconds = 0;
  const auto start = Clock::now();
  for (int i = 0; i < options.iters; ++i) {
    if (options.delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(options.delay_ms));
    }
    const auto entered = Clock::now();
    RM_RETURN_IF_ERROR(mpi->AllreduceSum(buffer.data(), count));
    wait_seconds += std::chrono::duration<double>(Clock::now() - entered).count();
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  // Correctness: one allreduce of the pattern, checked by every rank.
  for (size_t i = 0; i < count; ++i) buffer[i] = AllreducePattern(mpi->rank(), i);
  RM_RETURN_IF_ERROR(mpi->AllreduceSum(buffer.data(), count));
  int wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += buffer[i] != AllreduceExpectedSum(mpi->size(), i);
  const int rank = mpi->rank();
  const int ranks = mpi->size();
  // The communicator's thread makes its MPI calls; the gathers below are this thread's, so it
  // goes first (MPI_THREAD_SERIALIZED).
  mpi.reset();

  char worker_id[kWorkerIdBytes] = {};
  if (const char* id = std::getenv("RINGMASTER_WORKER_ID"); id != nullptr) {
    std::strncpy(worker_id, id, kWorkerIdBytes - 1);
  }
  std::vector<double> waits(ranks);
  std::vector<char> ids(static_cast<size_t>(ranks) * kWorkerIdBytes);
  std::vector<int> wrongs(ranks);
  if (MPI_Gather(&wait_seconds, 1, MPI_DOUBLE, waits.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD) !=
          MPI_SUCCESS ||
      MPI_Gather(worker_id, kWorkerIdBytes, MPI_CHAR, ids.data(), kWorkerIdBytes, MPI_CHAR, 0,
                 MPI_COMM_WORLD) != MPI_SUCCESS ||
      MPI_Gather(&wrong, 1, MPI_INT, wrongs.data(), 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    return absl::InternalError("MPI_Gather of the check's timings failed");
  }
  if (rank != 0) return absl::OkStatus();

  int64_t total_wrong = 0;
  for (int w : wrongs) total_wrong += w;
  const double algbw =
      static_cast<double>(options.bytes) * options.iters / std::max(elapsed, 1e-9) / 1e9;
  std::string text = absl::StrFormat("transport cpu\nbusbw_gbps %.6f\nelapsed_seconds %.6f\n",
                                     AllreduceBusBandwidth(algbw, ranks), elapsed);
  absl::StrAppendFormat(&text, "wrong %d\n", total_wrong);
  for (int r = 0; r < ranks; ++r) {
    const char* raw = &ids[static_cast<size_t>(r) * kWorkerIdBytes];
    const size_t length = strnlen(raw, kWorkerIdBytes);
    absl::StrAppendFormat(&text, "rank %d %s %.6f\n", r,
                          length == 0 ? absl::string_view("-") : absl::string_view(raw, length),
                          waits[r]);
  }
  if (options.result_path.empty()) {
    std::cout << text;
    return absl::OkStatus();
  }
  const std::string temp = options.result_path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    if (!out.flush()) return absl::InternalError("cannot write " + temp);
  }
  if (std::rename(temp.c_str(), options.result_path.c_str()) != 0) {
    return absl::InternalError("cannot rename " + temp + " to " + options.result_path + ": " +
                               std::strerror(errno));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace ringmaster::trainer

int main(int argc, char** argv) {
  absl::StatusOr<ringmaster::trainer::CheckOptions> options =
      ringmaster::trainer::ParseOptions(argc, argv);
  if (!options.ok()) {
    std::cerr << "ringmaster-check: " << options.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ringmaster::trainer::MpiRuntime>> runtime =
      ringmaster::trainer::MpiRuntime::Create(&argc, &argv);
  if (!runtime.ok()) {
    std::cerr << "ringmaster-check: " << runtime.status() << "\n";
    return 1;
  }
  absl::Status s = ringmaster::trainer::Run(*options);
  if (!s.ok()) {
    std::cerr << "ringmaster-check: " << s << "\n";
    (*runtime)->Abort(1);  // the others may wait in a collective this rank left
  }
  return 0;
}
