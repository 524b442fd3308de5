// ringmaster-train: the rank program of Ringmaster's built-in workload. Flags and wiring only;
// see trainer.h for the training step and docs/trainer.md for the whole program.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "rank/rank_channel.h"
#include "trainer/allreduce_benchmark.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/cpu_compute.h"
#include "trainer/device_agreement.h"
#include "trainer/gpu_backend.h"
#include "trainer/host_collectives.h"
#include "trainer/memory_estimate.h"
#include "trainer/metrics_reporter.h"
#include "trainer/mpi_communicator.h"
#include "trainer/trainer.h"

namespace ringmaster::trainer {
namespace {

constexpr int kExitUsage = 2;
// After SIGTERM with the checkpoint saved: the shell's code for "ended by SIGTERM".
constexpr int kExitStoppedBySigterm = 128 + 15;
// The run needs more device memory than RINGMASTER_GPU_MEMORY allows: a failure like any other.
constexpr int kExitOverMemoryLimit = 1;

// OpenBLAS starts one thread per core in every rank; with several ranks on one machine they
// would fight over the cores, so each rank gets its share unless the user chose.
int OpenBlasThreads(int ranks_on_this_machine) {
  for (const char* name : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (std::getenv(name) != nullptr) return 0;
  }
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, ranks_on_this_machine));
}

absl::Status Work(const TrainerConfig& config, Compute& compute, Communicator& communicator,
                  std::ostream* out, MetricsReporter* reporter) {
  if (config.mode == Mode::kAllreduceBenchmark) {
    AllreduceBenchmarkOptions options;
    options.min_bytes = config.min_bytes;
    options.max_bytes = config.max_bytes;
    options.iters = config.iters;
    options.warmup_iters = config.warmup_iters;
    RM_ASSIGN_OR_RETURN(std::vector<AllreduceResult> results,
                        RunAllreduceBenchmark(options, compute, communicator, out));
    int64_t wrong = 0;
    for (const AllreduceResult& result : results) wrong += result.wrong;
    if (wrong != 0) {
      return absl::DataLossError(absl::StrCat("allreduce produced ", wrong, " wrong values"));
    }
    return absl::OkStatus();
  }
  // Every step also goes to the rank channel when the platform runs us (ringmaster-rank): that
  // is the progress its hang detection and idle reclaim watch (docs/health.md).
  rm_rank_channel* channel = rm_rank_channel_open(nullptr);
  StepObserver on_step;
  if (reporter != nullptr || channel != nullptr) {
    on_step = [reporter, channel](const StepStats& s) {
      if (reporter != nullptr) reporter->Report(s);
      rm_rank_channel_report_progress(channel, static_cast<uint64_t>(s.step), 1, s.images_per_sec);
    };
  }
  RM_ASSIGN_OR_RETURN(TrainResult result, Train(config, compute, communicator, out, on_step));
  if (result.stopped_at_step != 0) {
    // Every rank agreed on this (checkpointing.h), so it is shared like DATA_LOSS.
    return absl::CancelledError(
        absl::StrCat("stopped on SIGTERM after step ", result.stopped_at_step));
  }
  if (result.ranks_differing != 0) {
    return absl::DataLossError(
        absl::StrCat(result.ranks_differing, " rank(s) ended with weights other than rank 0's"));
  }
  return absl::OkStatus();
}

// A failure every rank shares (DATA_LOSS: the job ran but its results are wrong; the verdict
// was reduced) ends each rank cleanly. Anything else may be this rank's alone, with its peers
// blocked in a collective it will never join: that takes the whole job down at once, before
// the communicators' destructors could wait on them.
absl::Status FailJobUnlessShared(const absl::Status& status, MpiRuntime& runtime) {
  if (!status.ok() && status.code() != absl::StatusCode::kDataLoss &&
      status.code() != absl::StatusCode::kCancelled && runtime.world_size() > 1) {
    RM_LOG(kError) << status;
    runtime.Abort(1);
  }
  return status;
}

absl::Status Run(const TrainerConfig& config, MpiRuntime& runtime) {
  RM_ASSIGN_OR_RETURN(std::unique_ptr<MpiCommunicator> mpi, MpiCommunicator::Create());
  const bool leader = mpi->rank() == 0;
  std::unique_ptr<MetricsReporter> reporter;
  if (!config.metrics_addr.empty() && config.mode == Mode::kTrain) {
    ReportLabels labels{config.job_id, config.attempt,    mpi->rank(),     mpi->size(),
                        config.queue,  config.model.name, config.gpu_type, config.worker_id};
    reporter = std::make_unique<MetricsReporter>(config.metrics_addr, std::move(labels));
  }

  auto cpu = std::make_unique<CpuCompute>(OpenBlasThreads(mpi->local_size()));
  RM_ASSIGN_OR_RETURN(DeviceKind device, AgreeOnDevice(config.device, *cpu, *mpi));
  GpuBackend gpu;
  if (device == DeviceKind::kGpu) {
    absl::StatusOr<GpuBackend> created = CreateGpuBackend(*mpi);
    RM_RETURN_IF_ERROR(FailJobUnlessShared(created.status(), runtime));
    gpu = std::move(*created);
  }
  Compute& compute = device == DeviceKind::kGpu ? *gpu.compute : *cpu;

  // Best first; the tensors' memory picks (NCCL for GPU buffers, MPI for host buffers).
  const std::vector<Communicator*> preference = {gpu.communicator.get(), mpi.get()};
  RM_ASSIGN_OR_RETURN(Communicator * communicator,
                      SelectCommunicator(preference, compute.memory()));
  if (leader) {
    std::cout << "ringmaster-train: " << mpi->size() << " rank(s), device "
              << DeviceKindName(device) << ": " << compute.name() << ", communicator "
              << communicator->name() << std::endl;
    if (!config.gpu_share.empty() || config.gpu_memory > 0) {
      std::cout << "ringmaster-train: GPU share "
                << (config.gpu_share.empty() ? "whole device" : config.gpu_share)
                << ", memory limit "
                << (config.gpu_memory > 0 ? absl::StrCat(config.gpu_memory, " bytes") : "none")
                << "; this run needs " << EstimateDeviceMemory(config, mpi->size()).total()
                << " bytes" << std::endl;
    }
  }
  return FailJobUnlessShared(
      Work(config, compute, *communicator, leader ? &std::cout : nullptr, reporter.get()), runtime);
}

}  // namespace
}  // namespace ringmaster::trainer

int main(int argc, char** argv) {
  using namespace ringmaster::trainer;  // NOLINT(build/namespaces): main only
  ringmaster::Flags flags("ringmaster-train",
                          "Data-parallel SGD of an MLP on synthetic data (OpenBLAS + MPI on the "
                          "CPU, cuBLAS + NCCL on a GPU), or an allreduce benchmark. Run under "
                          "mpirun; prints progress and 'total images/sec: N' on rank 0.");
  AddTrainerFlags(&flags);
  if (absl::Status parsed = flags.Parse(argc, argv); !parsed.ok()) {
    std::cerr << "ringmaster-train: " << parsed.message() << "\n";
    return kExitUsage;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  absl::StatusOr<TrainerConfig> config = ConfigFromFlags(flags);
  if (!config.ok()) {
    std::cerr << "ringmaster-train: " << config.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<MpiRuntime>> mpi = MpiRuntime::Create(&argc, &argv);
  if (!mpi.ok()) {
    RM_LOG(kError) << mpi.status();
    return 1;
  }
  // Before any device or buffer exists: every rank computes the same and refuses together, so
  // none waits in a collective for another (docs/gpu-sharing.md, "The trainer's memory check").
  if (absl::Status fits = CheckDeviceMemory(*config, (*mpi)->world_size(), config->gpu_memory);
      !fits.ok()) {
    // One write: the ranks' lines must not interleave where their outputs meet.
    const std::string line = absl::StrCat("ringmaster-train: ", fits.message(), "\n");
    const ssize_t written = write(STDERR_FILENO, line.data(), line.size());
    (void)written;  // nowhere else to say it; the exit code still does
    return kExitOverMemoryLimit;
  }
  // Only a trainer that checkpoints has a use for SIGTERM's grace period; others die at once.
  if (config->mode == Mode::kTrain && !config->checkpoint_dir.empty()) InstallStopSignalHandlers();
  if (absl::Status status = Run(*config, **mpi); !status.ok()) {
    if (status.code() == absl::StatusCode::kCancelled) {
      RM_LOG(kInfo) << status.message();
      return kExitStoppedBySigterm;
    }
    RM_LOG(kError) << status;
    return 1;
  }
  return 0;
}
