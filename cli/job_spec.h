// Building the JobSpec that `ringctl submit` sends: a spec from a YAML file (or an empty one),
// then the command-line flags on top. Only structure and types are checked here; ranges and
// names are the scheduler's to judge, so its INVALID_ARGUMENT message stays the one a user sees.
// The one exception is the Slurm-style array text ("0-999%50"): it is ringctl's own syntax, so
// the scheduler's words about `array.count` would not match what the user wrote.
#ifndef RINGMASTER_CLI_JOB_SPEC_H_
#define RINGMASTER_CLI_JOB_SPEC_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ringmaster/v1/job.pb.h"

namespace ringmaster::cli {

// The spec fields given as flags; each one that is set replaces the file's value.
struct SpecOverrides {
  std::optional<std::string> name;
  std::optional<std::string> queue;
  std::optional<int32_t> priority;
  std::optional<int32_t> replicas;
  // Set together by --replicas MIN:MAX (an elastic job).
  std::optional<int32_t> min_replicas;
  std::optional<int32_t> max_replicas;
  // --sizes-divide: the sizes an elastic job runs at divide it.
  std::optional<int32_t> sizes_divide;
  std::optional<int32_t> gpus_per_replica;
  std::optional<std::string> gpu_type;
  // --gpu-share (thousandths; also sets gpus_per_replica 1 unless given) and --gpu-memory.
  std::optional<int32_t> gpu_share;
  std::optional<int64_t> gpu_memory;
  std::optional<v1::RestartPolicy> restart_policy;
  std::optional<int32_t> backoff_limit;
  std::optional<int64_t> max_runtime_seconds;
  // Merged into the file's labels; a flag wins over the file for the same key.
  std::map<std::string, std::string> labels;
  // Trainer workload fields (--model, --steps, --batch-size, --checkpoint-every).
  std::optional<std::string> model;
  std::optional<int64_t> steps;
  std::optional<int32_t> batch_size;
  std::optional<int32_t> checkpoint_every;
  // The environment (docs/environments.md): --image, --mount (repeatable; any replaces the
  // file's mounts), --shm-size, --workdir.
  std::optional<std::string> image;
  std::vector<v1::Mount> mounts;
  std::optional<int64_t> shm_size_bytes;
  std::optional<std::string> workdir;
  // --use-mpirun: start a one-rank job under mpirun.
  bool use_mpirun = false;
  // --after (repeatable; any replaces the file's list).
  std::vector<v1::JobDependency> after;
  // --array: makes the job an array of tasks.
  std::optional<v1::JobArray> array;
  // The argv after `--`: a command workload.
  std::optional<std::vector<std::string>> command;

  bool HasTrainerFields() const { return model || steps || batch_size || checkpoint_every; }
};

// "j-3f9c2a41b7d0:succeeded" (also ":ended", ":failed"; no condition: succeeded) -> a
// dependency. INVALID_ARGUMENT naming `field` for anything else; the id is the scheduler's to
// judge.
absl::StatusOr<v1::JobDependency> ParseDependency(absl::string_view text, absl::string_view field);
// The other way: "j-3f9c2a41b7d0:succeeded".
std::string DependencyText(const v1::JobDependency& dependency);

// Tasks an array may have (JobArray.count in proto/ringmaster/v1/job.proto).
inline constexpr int32_t kMaxArrayTasks = 100'000;

// Slurm's array syntax, indices from 0: "N" (N tasks, 0..N-1) or "0-M" (M+1 tasks), each
// optionally followed by "%P" (at most P tasks at once, 1..count; without it, no limit of the
// array's own). INVALID_ARGUMENT naming `field` and what is allowed for anything else.
absl::StatusOr<v1::JobArray> ParseArraySpec(absl::string_view text, absl::string_view field);
// The other way: "0-999%50", "0-9".
std::string ArraySpecText(const v1::JobArray& array);

// Applies `overrides` to `spec`. A command after `--` replaces the file's workload (keeping the
// file's command env when it had one). Trainer flags together with a command workload are
// INVALID_ARGUMENT: there is no trainer to apply them to.
absl::Status ApplyOverrides(const SpecOverrides& overrides, v1::JobSpec* spec);

// The name a job gets when neither --name nor its file gives one (the scheduler requires one):
// "train" for the built-in trainer; for a command, its program's file name made a DNS label
// ("/usr/bin/python3.11" -> "python3-11", "./Train_Net" -> "train-net"), "job" when nothing
// of it is left.
std::string DefaultJobName(const v1::JobSpec& spec);

// "Never" | "OnFailure", also "NEVER" | "ON_FAILURE" (any case, '_' and '-' ignored).
std::optional<v1::RestartPolicy> ParseRestartPolicy(absl::string_view text);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_JOB_SPEC_H_
