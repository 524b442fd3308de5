#include "trainer/config.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {
namespace {

absl::Status ReadInt(const Flags& flags, const std::string& name, int64_t min, int64_t max,
                     int* out) {
  int64_t value = 0;
  RM_RETURN_IF_ERROR(flags.GetInt(name, &value));
  if (value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be in [", min, ", ", max, "], got ", value));
  }
  *out = static_cast<int>(value);
  return absl::OkStatus();
}

absl::Status ReadBytes(const Flags& flags, const std::string& name, size_t* out) {
  auto bytes = ParseByteSize(flags.Get(name));
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", bytes.status().message()));
  }
  // Buffers hold floats, and nothing smaller than one makes sense.
  if (*bytes < sizeof(float) || *bytes % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be a positive multiple of 4 bytes, got ", *bytes));
  }
  *out = *bytes;
  return absl::OkStatus();
}

}  // namespace

void AddTrainerFlags(Flags* flags) {
  flags->Add("model", "mlp", "model to train: " + absl::StrJoin(ModelNames(), ", "));
  flags->Add("batch-size", "64", "samples per rank per step");
  flags->Add("global-batch-size", "0",
             "samples per step over all ranks, split evenly (wins over --batch-size); 0: "
             "--batch-size x ranks, or a resumed checkpoint's global batch");
  flags->Add("steps", "100", "training steps");
  flags->Add("warmup-steps", "2", "first steps left out of total images/sec");
  flags->Add("lr", "0.05", "SGD learning rate");
  flags->Add("momentum", "0", "SGD momentum in [0, 1); 0: plain SGD");
  flags->Add("seed", "42", "seed of the initial weights, the teacher and the data");
  flags->Add("device", "auto", "auto | cpu | gpu (auto: the GPU when every rank has one)");
  flags->Add("bucket-mb", "25", "gradient bucket size in MiB; each bucket is one allreduce");
  flags->Add("log-every", "10", "print a progress line every N steps (and the first and last)");
  flags->Add("input-dim", "0", "input features per sample; 0: the model's (3x32x32)");
  flags->Add("num-classes", "0", "classes; 0: the model's");
  flags->Add("data-batches", "32", "distinct synthetic batches per rank, cycled");
  flags->Add("checkpoint-dir", "",
             "where rank 0 saves checkpoints and every rank resumes from (the worker sets "
             "RINGMASTER_CHECKPOINT_DIR); empty: no checkpoints");
  flags->Add("checkpoint-every", "50",
             "with --checkpoint-dir: save every N steps (0: only on SIGTERM)");
  flags->Add("metrics-addr", "",
             "host:port of ringmaster-metrics; every rank streams a sample per step (empty: none)");
  flags->Add("job-id", "", "job id the samples carry (the worker sets RINGMASTER_JOB_ID)");
  flags->Add("attempt", "0", "job attempt the samples carry");
  flags->Add("queue", "", "queue label of the samples");
  flags->Add("gpu-type", "", "gpu_type label of the samples");
  flags->Add("worker-id", "", "worker label of the samples");
  flags->Add("gpu-share", "",
             "this rank's share of its GPU, printed at start (the worker sets "
             "RINGMASTER_GPU_SHARE); empty: a whole device");
  flags->Add("gpu-memory", "0",
             "device memory this rank may use (K, M, G suffixes; the worker sets "
             "RINGMASTER_GPU_MEMORY): a run that needs more exits at once saying so; 0: no limit");
  flags->Add("benchmark", "", "empty: train; 'allreduce': sweep allreduce sizes instead");
  flags->Add("min-bytes", "8", "allreduce benchmark: smallest message (K, M, G suffixes)");
  flags->Add("max-bytes", "256M", "allreduce benchmark: largest message");
  flags->Add("iters", "20", "allreduce benchmark: timed iterations per size");
  flags->Add("warmup-iters", "5", "allreduce benchmark: untimed iterations per size");
}

absl::StatusOr<size_t> ParseByteSize(absl::string_view text) {
  std::string s = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  size_t multiplier = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'K':
        multiplier = size_t{1} << 10;
        break;
      case 'M':
        multiplier = size_t{1} << 20;
        break;
      case 'G':
        multiplier = size_t{1} << 30;
        break;
      default:
        break;
    }
    if (multiplier != 1) s.pop_back();
  }
  uint64_t value = 0;
  if (s.empty() || !absl::SimpleAtoi(s, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a byte size"));
  }
  if (value > std::numeric_limits<size_t>::max() / multiplier) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is too large"));
  }
  return static_cast<size_t>(value) * multiplier;
}

absl::StatusOr<TrainerConfig> ConfigFromFlags(const Flags& flags) {
  TrainerConfig config;

  const std::string& benchmark = flags.Get("benchmark");
  if (benchmark == "allreduce") {
    config.mode = Mode::kAllreduceBenchmark;
  } else if (!benchmark.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--benchmark must be empty or 'allreduce', got '", benchmark, "'"));
  }

  RM_ASSIGN_OR_RETURN(config.device, ParseDeviceRequest(flags.Get("device")));

  RM_ASSIGN_OR_RETURN(config.model, FindModel(flags.Get("model")));
  int input_dim = 0;
  int num_classes = 0;
  RM_RETURN_IF_ERROR(ReadInt(flags, "input-dim", 0, 1 << 20, &input_dim));
  RM_RETURN_IF_ERROR(ReadInt(flags, "num-classes", 0, 1 << 20, &num_classes));
  if (input_dim > 0) config.model.input_dim = input_dim;
  if (num_classes == 1) return absl::InvalidArgumentError("--num-classes must be at least 2");
  if (num_classes > 0) config.model.num_classes = num_classes;

  RM_RETURN_IF_ERROR(ReadInt(flags, "batch-size", 1, 1 << 20, &config.batch_size));
  RM_RETURN_IF_ERROR(ReadInt(flags, "global-batch-size", 0, 1 << 30, &config.global_batch_size));
  RM_RETURN_IF_ERROR(ReadInt(flags, "steps", 1, std::numeric_limits<int>::max(), &config.steps));
  RM_RETURN_IF_ERROR(
      ReadInt(flags, "warmup-steps", 0, std::numeric_limits<int>::max(), &config.warmup_steps));
  if (config.warmup_steps >= config.steps) {
    return absl::InvalidArgumentError(absl::StrCat("--warmup-steps (", config.warmup_steps,
                                                   ") must be below --steps (", config.steps,
                                                   ") so that some steps are timed"));
  }
  RM_RETURN_IF_ERROR(flags.GetDouble("lr", &config.lr));
  if (!(config.lr > 0) || !std::isfinite(config.lr)) {
    return absl::InvalidArgumentError(absl::StrCat("--lr must be positive, got ", config.lr));
  }
  RM_RETURN_IF_ERROR(flags.GetDouble("momentum", &config.momentum));
  if (!(config.momentum >= 0 && config.momentum < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--momentum must be in [0, 1), got ", config.momentum));
  }
  int64_t seed = 0;
  RM_RETURN_IF_ERROR(flags.GetInt("seed", &seed));
  config.seed = static_cast<uint64_t>(seed);

  double bucket_mb = 0;
  RM_RETURN_IF_ERROR(flags.GetDouble("bucket-mb", &bucket_mb));
  if (!(bucket_mb > 0) || bucket_mb > 1 << 20) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bucket-mb must be in (0, 1048576], got ", bucket_mb));
  }
  config.bucket_bytes = std::max<size_t>(sizeof(float), static_cast<size_t>(bucket_mb * (1 << 20)));

  RM_RETURN_IF_ERROR(
      ReadInt(flags, "log-every", 1, std::numeric_limits<int>::max(), &config.log_every));
  RM_RETURN_IF_ERROR(ReadInt(flags, "data-batches", 1, 1 << 16, &config.data_batches));
  config.checkpoint_dir = flags.Get("checkpoint-dir");
  RM_RETURN_IF_ERROR(ReadInt(flags, "checkpoint-every", 0, std::numeric_limits<int>::max(),
                             &config.checkpoint_every));
  config.metrics_addr = flags.Get("metrics-addr");
  config.job_id = flags.Get("job-id");
  RM_RETURN_IF_ERROR(ReadInt(flags, "attempt", 0, 1 << 20, &config.attempt));
  config.queue = flags.Get("queue");
  config.gpu_type = flags.Get("gpu-type");
  config.worker_id = flags.Get("worker-id");
  config.gpu_share = flags.Get("gpu-share");
  if (!config.gpu_share.empty()) {
    double share = 0;
    if (!absl::SimpleAtod(config.gpu_share, &share) || !(share > 0 && share <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--gpu-share must be a fraction of one GPU in (0, 1], got '", config.gpu_share, "'"));
    }
  }
  absl::StatusOr<size_t> gpu_memory = ParseByteSize(flags.Get("gpu-memory"));
  if (!gpu_memory.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu-memory: ", gpu_memory.status().message()));
  }
  if (*gpu_memory > static_cast<size_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError("--gpu-memory is too large");
  }
  config.gpu_memory = static_cast<int64_t>(*gpu_memory);

  RM_RETURN_IF_ERROR(ReadBytes(flags, "min-bytes", &config.min_bytes));
  RM_RETURN_IF_ERROR(ReadBytes(flags, "max-bytes", &config.max_bytes));
  if (config.min_bytes > config.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min-bytes (", config.min_bytes, ") is above --max-bytes (", config.max_bytes, ")"));
  }
  RM_RETURN_IF_ERROR(ReadInt(flags, "iters", 1, 1 << 20, &config.iters));
  RM_RETURN_IF_ERROR(ReadInt(flags, "warmup-iters", 0, 1 << 20, &config.warmup_iters));
  return config;
}

absl::StatusOr<DeviceRequest> ParseDeviceRequest(absl::string_view text) {
  if (text == "auto") return DeviceRequest::kAuto;
  if (text == "cpu") return DeviceRequest::kCpu;
  if (text == "gpu") return DeviceRequest::kGpu;
  return absl::InvalidArgumentError(
      absl::StrCat("--device must be auto, cpu or gpu, got '", text, "'"));
}

absl::StatusOr<DeviceKind> ResolveDevice(DeviceRequest request, bool gpu_built,
                                         bool every_rank_has_gpu, absl::string_view why_not) {
  switch (request) {
    case DeviceRequest::kCpu:
      return DeviceKind::kCpu;
    case DeviceRequest::kAuto:
      return gpu_built && every_rank_has_gpu ? DeviceKind::kGpu : DeviceKind::kCpu;
    case DeviceRequest::kGpu:
      if (!gpu_built) {
        return absl::FailedPreconditionError(
            "--device gpu: this ringmaster-train was built without CUDA");
      }
      if (!every_rank_has_gpu) {
        return absl::FailedPreconditionError(
            absl::StrCat("--device gpu: no usable GPU: ", why_not));
      }
      return DeviceKind::kGpu;
  }
  return absl::InvalidArgumentError("unknown device request");
}

absl::string_view DeviceKindName(DeviceKind kind) {
  return kind == DeviceKind::kGpu ? "gpu" : "cpu";
}

absl::StatusOr<int> GlobalBatchPerRank(int global_batch, int world_size) {
  if (world_size <= 0 || global_batch <= 0 || global_batch % world_size != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a global batch of ", global_batch, " does not split evenly over ", world_size,
        " rank(s); run at a number of ranks that divides ", global_batch,
        " (an elastic job keeps the global batch of its checkpoint), or start afresh with "
        "--global-batch-size a multiple of ",
        world_size));
  }
  return global_batch / world_size;
}

}  // namespace ringmaster::trainer
