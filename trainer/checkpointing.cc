#include "trainer/checkpointing.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "trainer/checkpoint.h"
#include "trainer/host_collectives.h"
#include "trainer/model.h"
#include "trainer/synthetic_data.h"

namespace ringmaster::trainer {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The stream a per-step random draw would use; see TrainingCheckpoint::rng_state.
uint64_t TrainingRngState(const TrainerConfig& config, int64_t step) {
  return MixSeed(config.seed, 0x7261696e ^ static_cast<uint64_t>(step));
}

int CheckpointGlobalBatch(const TrainingCheckpoint& c) { return c.world_size * c.batch_size; }

// The world size the checkpoint was written at does not matter (see the protocol); only the
// global batch must be the one asked for, when one is.
absl::Status Usable(const TrainerConfig& config, size_t parameters, const TrainingCheckpoint& c) {
  auto mismatch = [](absl::string_view what, auto theirs, auto ours) {
    return absl::FailedPreconditionError(
        absl::StrCat("made with ", what, " ", theirs, ", this run has ", ours));
  };
  if (c.model != config.model.name) return mismatch("model", c.model, config.model.name);
  if (c.parameters.size() != parameters) {
    return mismatch("parameter count", c.parameters.size(), parameters);
  }
  if (c.world_size <= 0 || c.batch_size <= 0) {
    return mismatch("ranks x batch", absl::StrCat(c.world_size, " x ", c.batch_size), "> 0");
  }
  if (config.global_batch_size > 0 && CheckpointGlobalBatch(c) != config.global_batch_size) {
    return mismatch("global batch", CheckpointGlobalBatch(c), config.global_batch_size);
  }
  if (c.seed != config.seed) return mismatch("seed", c.seed, config.seed);
  if (c.lr != config.lr) return mismatch("lr", c.lr, config.lr);
  if (c.momentum != config.momentum) return mismatch("momentum", c.momentum, config.momentum);
  const size_t state = config.momentum != 0 ? parameters : 0;
  if (c.optimizer_state.size() != state) {
    return mismatch("optimizer state of size", c.optimizer_state.size(), state);
  }
  return absl::OkStatus();
}

// Every rank ends with root's `values` (resized to `count` first).
absl::Status BroadcastFloats(Compute& compute, Communicator& communicator, size_t count,
                             std::vector<float>* values) {
  values->resize(count);
  if (count == 0) return absl::OkStatus();
  RM_ASSIGN_OR_RETURN(DeviceBuffer staging, DeviceBuffer::Allocate(compute, count));
  RM_RETURN_IF_ERROR(compute.CopyFromHost(values->data(), count, staging.data()));
  RM_RETURN_IF_ERROR(compute.Synchronize());
  RM_RETURN_IF_ERROR(communicator.Broadcast(staging.data(), count * sizeof(float), 0));
  RM_RETURN_IF_ERROR(communicator.Synchronize());
  return compute.CopyToHost(staging.data(), count, values->data());
}

}  // namespace

absl::StatusOr<ResumePoint> FindResumePoint(const TrainerConfig& config, Compute& compute,
                                            Communicator& communicator) {
  ResumePoint point;
  point.global_batch = config.global_batch_size > 0 ? config.global_batch_size
                                                    : config.batch_size * communicator.size();
  if (config.checkpoint_dir.empty()) return point;
  std::optional<FoundCheckpoint> found;
  if (communicator.rank() == 0) {
    std::vector<std::string> skipped;
    const size_t parameters = ParameterCount(config.model);
    found = FindNewestCheckpoint(config.checkpoint_dir, &skipped, [&](const TrainingCheckpoint& c) {
      return Usable(config, parameters, c);
    });
    for (const std::string& why : skipped) {
      RM_LOG(kWarning) << "ignoring checkpoint " << why;
    }
  }
  // The step + 1, so that 0 says "none" to the other ranks; then the checkpoint's shape.
  uint64_t header = found ? static_cast<uint64_t>(found->checkpoint.step) + 1 : 0;
  RM_RETURN_IF_ERROR(BroadcastHostValue(compute, communicator, &header, 0));
  if (header == 0) return point;
  uint64_t world = found ? static_cast<uint64_t>(found->checkpoint.world_size) : 0;
  uint64_t global = found ? static_cast<uint64_t>(CheckpointGlobalBatch(found->checkpoint)) : 0;
  RM_RETURN_IF_ERROR(BroadcastHostValue(compute, communicator, &world, 0));
  RM_RETURN_IF_ERROR(BroadcastHostValue(compute, communicator, &global, 0));
  point.step = static_cast<int64_t>(header - 1);
  point.checkpoint_world_size = static_cast<int>(world);
  point.global_batch = static_cast<int>(global);
  if (found) {
    point.path = std::move(found->path);
    point.parameters = std::move(found->checkpoint.parameters);
    point.optimizer_state = std::move(found->checkpoint.optimizer_state);
  }
  return point;
}

absl::Status LoadResumePoint(const TrainerConfig& config, ResumePoint& point, Mlp& mlp, Sgd& sgd,
                             Compute& compute, Communicator& communicator, std::ostream* out) {
  if (point.step == 0) {
    if (out != nullptr && !config.checkpoint_dir.empty()) {
      *out << "no checkpoint in " << config.checkpoint_dir << ": starting at step 1\n";
      out->flush();
    }
    return absl::OkStatus();
  }
  RM_RETURN_IF_ERROR(
      BroadcastFloats(compute, communicator, mlp.parameter_count(), &point.parameters));
  RM_RETURN_IF_ERROR(mlp.SetParameters(point.parameters));
  point.parameters.clear();
  RM_RETURN_IF_ERROR(
      BroadcastFloats(compute, communicator, sgd.state_size(), &point.optimizer_state));
  RM_RETURN_IF_ERROR(sgd.SetState(point.optimizer_state));
  point.optimizer_state.clear();
  if (out != nullptr) {
    *out << absl::StrFormat("resumed from checkpoint %s at step %d", point.path, point.step);
    if (point.checkpoint_world_size != communicator.size()) {
      *out << absl::StrFormat(" (written at %d ranks; global batch %d kept, %d per rank now)",
                              point.checkpoint_world_size, point.global_batch, mlp.batch_size());
    }
    *out << "\n";
    out->flush();
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CheckpointAtStepBoundary(const TrainerConfig& config, int64_t step, Mlp& mlp,
                                              Sgd& sgd, Compute& compute,
                                              Communicator& communicator, std::ostream* out) {
  // The step in 12-bit pieces: a float sums up to 2^24 exactly, so up to 4096 ranks' pieces
  // add up without rounding.
  std::vector<float> agree = {StopRequested() ? 1.0f : 0.0f};
  for (int shift = 0; shift < 64; shift += 12) {
    agree.push_back(static_cast<float>((static_cast<uint64_t>(step) >> shift) & 0xfff));
  }
  std::vector<float> expected = agree;
  RM_RETURN_IF_ERROR(AllreduceHostValues(compute, communicator, &agree));
  bool same_step = true;
  for (size_t i = 1; i < agree.size(); ++i) {
    same_step = same_step && agree[i] == expected[i] * static_cast<float>(communicator.size());
  }
  if (!same_step) {
    return absl::InternalError(
        absl::StrCat("ranks disagree on the step at a checkpoint boundary (rank ",
                     communicator.rank(), " is at ", step, ")"));
  }
  const bool stop = agree[0] > 0;
  const bool periodic = config.checkpoint_every > 0 && step % config.checkpoint_every == 0;
  if (!stop && !periodic) return false;

  // Rank 0 writes; every rank must copy nothing, but all learn whether it worked.
  uint64_t written = 1;
  if (communicator.rank() == 0) {
    TrainingCheckpoint checkpoint;
    checkpoint.step = step;
    checkpoint.seed = config.seed;
    checkpoint.world_size = communicator.size();
    checkpoint.batch_size = config.batch_size;
    checkpoint.lr = config.lr;
    checkpoint.momentum = config.momentum;
    checkpoint.data_position = step % config.data_batches;
    checkpoint.rng_state = TrainingRngState(config, step);
    checkpoint.model = config.model.name;
    RM_ASSIGN_OR_RETURN(checkpoint.parameters, mlp.ParametersToHost());
    RM_ASSIGN_OR_RETURN(checkpoint.optimizer_state, sgd.StateToHost());
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = WriteCheckpoint(config.checkpoint_dir, checkpoint, NowMs());
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!status.ok()) {
      written = 0;
      RM_LOG(kError) << "checkpoint at step " << step << " not written: " << status;
    } else if (out != nullptr) {
      *out << absl::StrFormat("checkpoint at step %d%s written in %.1f ms\n", step,
                              stop ? " (SIGTERM)" : "", ms);
      out->flush();
    }
  }
  RM_RETURN_IF_ERROR(BroadcastHostValue(compute, communicator, &written, 0));
  if (stop && out != nullptr) {
    *out << absl::StrFormat("stopping after step %d on SIGTERM (%s)\n", step,
                            written != 0 ? "checkpoint saved" : "checkpoint NOT saved");
    out->flush();
  }
  return stop;
}

}  // namespace ringmaster::trainer
