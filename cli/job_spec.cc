#include "job_spec.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace ringmaster::cli {

namespace {

constexpr std::pair<v1::DependencyCondition, absl::string_view> kConditionWords[] = {
    {v1::DEPENDENCY_CONDITION_SUCCEEDED, "succeeded"},
    {v1::DEPENDENCY_CONDITION_ENDED, "ended"},
    {v1::DEPENDENCY_CONDITION_FAILED, "failed"},
};

}  // namespace

absl::StatusOr<v1::JobDependency> ParseDependency(absl::string_view text, absl::string_view field) {
  v1::JobDependency dependency;
  const size_t colon = text.rfind(':');
  const absl::string_view condition =
      colon == absl::string_view::npos ? "succeeded" : text.substr(colon + 1);
  const absl::string_view job = colon == absl::string_view::npos ? text : text.substr(0, colon);
  for (const auto& [value, word] : kConditionWords) {
    if (condition == word) dependency.set_condition(value);
  }
  if (job.empty() || dependency.condition() == v1::DEPENDENCY_CONDITION_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": expected JOB[:succeeded|ended|failed] (e.g. j-3f9c2a41b7d0:succeeded), got \"",
        text, "\""));
  }
  dependency.set_job_id(std::string(job));
  return dependency;
}

std::string DependencyText(const v1::JobDependency& dependency) {
  absl::string_view word = "succeeded";  // as ParseDependency takes a missing condition
  for (const auto& [value, w] : kConditionWords) {
    if (dependency.condition() == value) word = w;
  }
  return absl::StrCat(dependency.job_id(), ":", word);
}

absl::Status ApplyOverrides(const SpecOverrides& overrides, v1::JobSpec* spec) {
  if (overrides.name) spec->set_name(*overrides.name);
  if (overrides.queue) spec->set_queue(*overrides.queue);
  if (overrides.priority) spec->set_priority(*overrides.priority);
  if (overrides.replicas) spec->set_replicas(*overrides.replicas);
  if (overrides.gpus_per_replica) spec->set_gpus_per_replica(*overrides.gpus_per_replica);
  if (overrides.gpu_type) spec->set_gpu_type(*overrides.gpu_type);
  if (overrides.restart_policy) spec->set_restart_policy(*overrides.restart_policy);
  if (overrides.backoff_limit) spec->set_backoff_limit(*overrides.backoff_limit);
  if (overrides.max_runtime_seconds) {
    spec->set_max_runtime_seconds(*overrides.max_runtime_seconds);
  }
  for (const auto& [key, value] : overrides.labels) (*spec->mutable_labels())[key] = value;
  if (overrides.image) spec->set_image(*overrides.image);
  if (!overrides.mounts.empty()) {
    spec->clear_mounts();
    for (const v1::Mount& m : overrides.mounts) *spec->add_mounts() = m;
  }
  if (overrides.shm_size_bytes) spec->set_shm_size_bytes(*overrides.shm_size_bytes);
  if (overrides.workdir) spec->set_workdir(*overrides.workdir);
  if (overrides.use_mpirun) spec->set_use_mpirun(true);
  if (!overrides.after.empty()) {
    spec->clear_after();
    for (const v1::JobDependency& d : overrides.after) *spec->add_after() = d;
  }

  if (overrides.command) {
    if (overrides.HasTrainerFields()) {
      return absl::InvalidArgumentError(
          "--model, --steps, --batch-size and --checkpoint-every configure the built-in trainer; "
          "they cannot be combined with a command after --");
    }
    // Keep the env of a command workload from the file: `--` replaces only the argv.
    v1::CommandWorkload* command = spec->mutable_command();
    command->clear_argv();
    for (const auto& arg : *overrides.command) command->add_argv(arg);
    return absl::OkStatus();
  }
  if (overrides.HasTrainerFields()) {
    if (spec->has_command()) {
      return absl::InvalidArgumentError(
          "--model, --steps, --batch-size and --checkpoint-every configure the built-in trainer, "
          "but the job spec has a command workload");
    }
    v1::TrainerWorkload* trainer = spec->mutable_trainer();
    if (overrides.model) trainer->set_model(*overrides.model);
    if (overrides.steps) trainer->set_steps(*overrides.steps);
    if (overrides.batch_size) trainer->set_batch_size(*overrides.batch_size);
    if (overrides.checkpoint_every) trainer->set_checkpoint_every(*overrides.checkpoint_every);
  }
  return absl::OkStatus();
}

std::string DefaultJobName(const v1::JobSpec& spec) {
  if (!spec.has_command() || spec.command().argv().empty()) return "train";
  std::string program = spec.command().argv(0);
  if (const size_t slash = program.rfind('/'); slash != std::string::npos) {
    program = program.substr(slash + 1);
  }
  // a-z, 0-9 and single '-' between them, starting with a letter, at most 63 characters.
  std::string name;
  for (const char raw : program) {
    const char c = absl::ascii_tolower(static_cast<unsigned char>(raw));
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      if (name.empty() && !absl::ascii_isalpha(static_cast<unsigned char>(c))) continue;
      name.push_back(c);
    } else if (!name.empty() && name.back() != '-') {
      name.push_back('-');
    }
    if (name.size() == 63) break;
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name.empty() ? "job" : name;
}

std::optional<v1::RestartPolicy> ParseRestartPolicy(absl::string_view text) {
  std::string key = absl::AsciiStrToLower(absl::StrReplaceAll(text, {{"_", ""}, {"-", ""}}));
  if (key == "never") return v1::RESTART_POLICY_NEVER;
  if (key == "onfailure") return v1::RESTART_POLICY_ON_FAILURE;
  return std::nullopt;
}

}  // namespace ringmaster::cli
