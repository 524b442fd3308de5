#include "trainer/checkpointing.h"

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "trainer/checkpoint.h"
#include "trainer/host_collectives.h"
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

absl::Status Usable(const TrainerConfig& config, int world_size, size_t parameters,
                    const TrainingCheckpoint& c) {
  auto mismatch = [](absl::string_view what, auto theirs, auto ours) {
    return absl::FailedPreconditionError(
        absl::StrCat("made with ", what, " ", theirs, ", this run has ", ours));
  };
  if (c.model != config.model.name) return mismatch("model", c.model, config.model.name);
  if (c.parameters.size() != parameters) {
    return mismatch("parameter count", c.parameters.size(), parameters);
  }
  if (c.world_size != world_size) return mismatch("ranks", c.world_size, world_size);
  if (c.batch_size != config.batch_size)
    return mismatch("batch size", c.batch_size, config.batch_size);
  if (c.seed != config.seed) return mismatch("seed", c.seed, config.seed);
  if (c.lr != config.lr) return mismatch("lr", c.lr, config.lr);
  if (!c.optimizer_state.empty()) {
    return mismatch("optimizer state of size", c.optimizer_state.size(), "plain SGD");
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

absl::StatusOr<int64_t> ResumeFromNewestCheckpoint(const TrainerConfig& config, Mlp& mlp,
                                                   Compute& compute, Communicator& communicator,
                                                   std::ostream* out) {
  std::optional<FoundCheckpoint> found;
  if (communicator.rank() == 0) {
    std::vector<std::string> skipped;
    const int world = communicator.size();
    const size_t parameters = mlp.parameter_count();
    found = FindNewestCheckpoint(config.checkpoint_dir, &skipped, [&](const TrainingCheckpoint& c) {
      return Usable(config, world, parameters, c);
    });
    for (const std::string& why : skipped) {
      RM_LOG(kWarning) << "ignoring checkpoint " << why;
    }
  }
  // The step + 1, so that 0 says "none" to the other ranks.
  uint64_t header = found ? static_cast<uint64_t>(found->checkpoint.step) + 1 : 0;
  RM_RETURN_IF_ERROR(BroadcastHostValue(compute, communicator, &header, 0));
  if (header == 0) {
    if (out != nullptr) {
      *out << "no checkpoint in " << config.checkpoint_dir << ": starting at step 1\n";
      out->flush();
    }
    return 0;
  }
  const int64_t step = static_cast<int64_t>(header - 1);
  std::vector<float> parameters;
  if (found) parameters = std::move(found->checkpoint.parameters);
  RM_RETURN_IF_ERROR(BroadcastFloats(compute, communicator, mlp.parameter_count(), &parameters));
  RM_RETURN_IF_ERROR(mlp.SetParameters(parameters));
  if (out != nullptr) {
    *out << absl::StrFormat("resumed from checkpoint %s at step %d\n", found->path, step);
    out->flush();
  }
  return step;
}

absl::StatusOr<bool> CheckpointAtStepBoundary(const TrainerConfig& config, int64_t step, Mlp& mlp,
                                              Compute& compute, Communicator& communicator,
                                              std::ostream* out) {
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
    checkpoint.data_position = step % config.data_batches;
    checkpoint.rng_state = TrainingRngState(config, step);
    checkpoint.model = config.model.name;
    RM_ASSIGN_OR_RETURN(checkpoint.parameters, mlp.ParametersToHost());
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
