// ringmaster-check: the pre-run allreduce check of a job attempt (docs/health-check.md).
// mpirun starts it once per placed rank, over exactly the hosts and slots the attempt was
// given, before the job's own ranks. Each rank:
//   1. joins MPI (the trainer's MpiCommunicator), agrees with the others on the device as
//      ringmaster-train does (NCCL on GPU memory when every rank has a GPU, else MPI on the
//      host: "transport gpu" or "transport cpu" in the result) and does warm-up allreduces;
//   2. runs --iters timed allreduces of --bytes, timing how long it waits inside each one
//      (--delay-ms, from RINGMASTER_CHECK_DELAY_MS that a worker started with --check-delay-ms
//      sets, makes the ranks of that worker late to every allreduce: a throttled host, on
//      purpose);
//   3. sends its wait time and worker id to rank 0, which writes the result to --result, with
//      the bus bandwidth of rank 0's fastest timed allreduce: where ranks share cores, one
//      descheduled for part of the check slows some of the allreduces, while a slow host or
//      link slows every one.
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
#include "common/flags.h"
#include "common/status_macros.h"
#include "rank/check_result.h"
#include "rank/rank_env.h"
#include "trainer/allreduce_benchmark.h"
#include "trainer/config.h"
#include "trainer/cpu_compute.h"
#include "trainer/device_agreement.h"
#include "trainer/gpu_backend.h"
#include "trainer/mpi_communicator.h"

namespace ringmaster::trainer {
namespace {

constexpr int kWorkerIdBytes = 64;

struct CheckOptions {
  size_t bytes = size_t{1} << 20;
  int iters = 20;
  int warmup_iters = 3;
  int delay_ms = 0;
  DeviceRequest device = DeviceRequest::kAuto;
  std::string result_path;
};

// The flags of ringmaster-check; their variables are RINGMASTER_CHECK_*, apart from the
// trainer's (RINGMASTER_ITERS is ringmaster-train's --iters).
Flags MakeFlags() {
  Flags flags("ringmaster-check",
              "The pre-run allreduce check of a job attempt; mpirun starts it once per placed "
              "rank (docs/health-check.md).");
  flags.SetEnvPrefix("RINGMASTER_CHECK_");
  flags.Add("bytes", "1048576", "bytes per allreduce: a multiple of 4 up to 1 GiB");
  flags.Add("iters", "20", "timed allreduces, 1..10000");
  flags.Add("result", "", "rank 0 writes the result here (default: stdout)");
  flags.Add("device", "auto",
            "auto | cpu | gpu (auto: NCCL on the GPUs when every rank has one, else MPI on the "
            "host)");
  flags.Add("delay-ms", "0",
            "sleep this long before each allreduce: a throttled host, on purpose (set by a "
            "worker started with --check-delay-ms)");
  flags.AddEnvironment(RM_ENV_WORKER_ID, "the worker this rank runs on, named in the result");
  return flags;
}

absl::StatusOr<CheckOptions> OptionsFromFlags(const Flags& flags) {
  CheckOptions options;
  options.result_path = flags.Get("result");
  int64_t bytes = 0, iters = 0, delay_ms = 0;
  RM_RETURN_IF_ERROR(flags.GetInt("bytes", &bytes));
  RM_RETURN_IF_ERROR(flags.GetInt("iters", &iters));
  RM_RETURN_IF_ERROR(flags.GetInt("delay-ms", &delay_ms));
  if (bytes < 4 || bytes % 4 != 0 || bytes > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("--bytes: a multiple of 4 up to 1 GiB is allowed, got " +
                                      flags.Get("bytes"));
  }
  if (iters < 1 || iters > 10000) {
    return absl::InvalidArgumentError("--iters: 1..10000 allowed, got " + flags.Get("iters"));
  }
  if (delay_ms < 0 || delay_ms > 60000) {
    return absl::InvalidArgumentError("--delay-ms: 0..60000 allowed, got " + flags.Get("delay-ms"));
  }
  options.bytes = static_cast<size_t>(bytes);
  options.iters = static_cast<int>(iters);
  options.delay_ms = static_cast<int>(delay_ms);
  RM_ASSIGN_OR_RETURN(options.device, ParseDeviceRequest(flags.Get("device")));
  return options;
}

// Fills `buffer` with this rank's pattern (AllreducePattern) in the compute's memory.
absl::Status FillPattern(Compute& compute, int rank, std::vector<float>& host, float* buffer) {
  for (size_t i = 0; i < host.size(); ++i) host[i] = AllreducePattern(rank, i);
  return compute.CopyFromHost(host.data(), host.size(), buffer);
}

absl::Status Run(const CheckOptions& options) {
  RM_ASSIGN_OR_RETURN(std::unique_ptr<MpiCommunicator> mpi, MpiCommunicator::Create());
  auto cpu = std::make_unique<CpuCompute>(1);
  RM_ASSIGN_OR_RETURN(DeviceKind device, AgreeOnDevice(options.device, *cpu, *mpi));
  GpuBackend gpu;
  if (device == DeviceKind::kGpu) {
    RM_ASSIGN_OR_RETURN(gpu, CreateGpuBackend(*mpi));
  }
  Compute& compute = device == DeviceKind::kGpu ? *gpu.compute : *cpu;
  Communicator& ring = device == DeviceKind::kGpu ? *gpu.communicator : *mpi;

  const size_t count = options.bytes / sizeof(float);
  std::vector<float> host(count);
  RM_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(compute, count));
  RM_RETURN_IF_ERROR(FillPattern(compute, mpi->rank(), host, buffer.data()));
  for (int i = 0; i < options.warmup_iters; ++i) {
    RM_RETURN_IF_ERROR(ring.AllreduceSum(buffer.data(), count));
  }
  RM_RETURN_IF_ERROR(ring.Synchronize());
  RM_RETURN_IF_ERROR(compute.Synchronize());
  RM_RETURN_IF_ERROR(mpi->Barrier());
  using Clock = std::chrono::steady_clock;
  double wait_seconds = 0;
  double fastest = 0;
  const auto start = Clock::now();
  for (int i = 0; i < options.iters; ++i) {
    const auto begun = Clock::now();  // the delay counts: a slow host slows the ring
    if (options.delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(options.delay_ms));
    }
    const auto entered = Clock::now();
    RM_RETURN_IF_ERROR(ring.AllreduceSum(buffer.data(), count));
    // A device allreduce returns at once; the wait for the late rank is in the synchronize.
    RM_RETURN_IF_ERROR(ring.Synchronize());
    const auto done = Clock::now();
    wait_seconds += std::chrono::duration<double>(done - entered).count();
    const double took = std::chrono::duration<double>(done - begun).count();
    if (i == 0 || took < fastest) fastest = took;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  // Correctness: one allreduce of the pattern, checked by every rank.
  RM_RETURN_IF_ERROR(FillPattern(compute, mpi->rank(), host, buffer.data()));
  RM_RETURN_IF_ERROR(ring.AllreduceSum(buffer.data(), count));
  RM_RETURN_IF_ERROR(compute.CopyToHost(buffer.data(), count, host.data()));
  int wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += host[i] != AllreduceExpectedSum(mpi->size(), i);
  const int rank = mpi->rank();
  const int ranks = mpi->size();
  const char* transport = device == DeviceKind::kGpu ? "gpu" : "cpu";
  buffer = DeviceBuffer();
  gpu.communicator.reset();  // it uses the compute's stream
  gpu.compute.reset();
  // The communicator's thread makes its MPI calls; the gathers below are this thread's, so it
  // goes first (MPI_THREAD_SERIALIZED).
  mpi.reset();

  char worker_id[kWorkerIdBytes] = {};
  if (const char* id = std::getenv(RM_ENV_WORKER_ID); id != nullptr) {
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
  const double algbw = static_cast<double>(options.bytes) / std::max(fastest, 1e-9) / 1e9;
  // The format both checks write and the worker parses (libs/rank/check_result.h).
  std::string text = absl::StrFormat(RM_CHECK_RESULT_SUMMARY_FORMAT, transport,
                                     AllreduceBusBandwidth(algbw, ranks), elapsed,
                                     static_cast<long long>(total_wrong));
  for (int r = 0; r < ranks; ++r) {
    const char* raw = &ids[static_cast<size_t>(r) * kWorkerIdBytes];
    const size_t length = strnlen(raw, kWorkerIdBytes);
    const absl::string_view id =
        length == 0 ? absl::string_view(RM_CHECK_NO_WORKER_ID) : absl::string_view(raw, length);
    absl::StrAppendFormat(&text, RM_CHECK_RESULT_RANK_FORMAT, r, static_cast<int>(id.size()),
                          id.data(), waits[r]);
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
  ringmaster::Flags flags = ringmaster::trainer::MakeFlags();
  // mpirun runs it the way it runs a rank program: `ringmaster-check -- --result FILE`.
  std::vector<char*> args(argv, argv + argc);
  if (args.size() > 1 && std::strcmp(args[1], "--") == 0) args.erase(args.begin() + 1);
  if (absl::Status parsed = flags.Parse(static_cast<int>(args.size()), args.data()); !parsed.ok()) {
    std::cerr << "ringmaster-check: " << parsed.message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  absl::StatusOr<ringmaster::trainer::CheckOptions> options =
      ringmaster::trainer::OptionsFromFlags(flags);
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
