#include "job_spec.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace ringmaster::cli {

namespace {

constexpr std::pair<v1::DependencyCondition, absl::string_view> kConditionWords[] = {
    {v1::DEPENDENCY_CONDITION_SUCCEEDED, "succeeded"},
    {v1::DEPENDENCY_CONDITION_ENDED, "ended"},
    {v1::DEPENDENCY_CONDITION_FAILED, "failed"},
};

// A count of digits only (no sign, no spaces, as Slurm takes it); nullopt for anything else.
// Past int64 it saturates, which every range check below refuses.
std::optional<int64_t> ParseDigits(absl::string_view text) {
  if (text.empty()) return std::nullopt;
  for (const char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) return std::numeric_limits<int64_t>::max();
  return value;
}

}  // namespace

absl::StatusOr<v1::JobArray> ParseArraySpec(absl::string_view text, absl::string_view field) {
  auto malformed = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        field,
        ": expected N (tasks 0..N-1) or 0-M (tasks 0..M), optionally followed by %P (at most P "
        "at once), e.g. 0-999%50; got \"",
        text, "\""));
  };
  const size_t percent = text.find('%');
  const absl::string_view range = text.substr(0, percent);
  const size_t dash = range.find('-');
  int64_t count = 0;
  if (dash == absl::string_view::npos) {
    std::optional<int64_t> n = ParseDigits(range);
    if (!n) return malformed();
    count = *n;
  } else {
    std::optional<int64_t> first = ParseDigits(range.substr(0, dash));
    std::optional<int64_t> last = ParseDigits(range.substr(dash + 1));
    if (!first || !last) return malformed();
    if (*first != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": a range starts at 0 (tasks are numbered 0..count-1), e.g. 0-",
                       range.substr(dash + 1), "; got \"", text, "\""));
    }
    count = *last == std::numeric_limits<int64_t>::max() ? *last : *last + 1;
  }
  if (count < 1 || count > kMaxArrayTasks) {
    const std::string got = count == std::numeric_limits<int64_t>::max()
                                ? absl::StrCat("more than ", kMaxArrayTasks)
                                : absl::StrCat(count);
    return absl::InvalidArgumentError(absl::StrCat(field, ": an array has 1..", kMaxArrayTasks,
                                                   " tasks, got ", got, " (\"", text, "\")"));
  }
  v1::JobArray array;
  array.set_count(static_cast<int32_t>(count));
  if (percent != absl::string_view::npos) {
    std::optional<int64_t> parallelism = ParseDigits(text.substr(percent + 1));
    if (!parallelism) return malformed();
    if (*parallelism < 1 || *parallelism > count) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": %P (tasks at once) must be 1..", count, " for ", count,
                       count == 1 ? " task" : " tasks", ", got \"", text, "\""));
    }
    array.set_parallelism(static_cast<int32_t>(*parallelism));
  }
  return array;
}

std::string ArraySpecText(const v1::JobArray& array) {
  std::string text = absl::StrCat("0-", array.count() - 1);
  if (array.parallelism() > 0) absl::StrAppend(&text, "%", array.parallelism());
  return text;
}

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
  if (overrides.min_replicas) spec->set_min_replicas(*overrides.min_replicas);
  if (overrides.max_replicas) spec->set_max_replicas(*overrides.max_replicas);
  if (overrides.sizes_divide) spec->set_sizes_divide(*overrides.sizes_divide);
  if (overrides.gpus_per_replica) spec->set_gpus_per_replica(*overrides.gpus_per_replica);
  if (overrides.gpu_type) spec->set_gpu_type(*overrides.gpu_type);
  if (overrides.gpu_share) {
    spec->set_gpu_share(*overrides.gpu_share);
    // A share is of one GPU: a spec without GPUs gets one per rank.
    if (!overrides.gpus_per_replica && spec->gpus_per_replica() == 0) {
      spec->set_gpus_per_replica(1);
    }
  }
  if (overrides.gpu_memory) spec->set_gpu_memory(*overrides.gpu_memory);
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
  if (overrides.array) *spec->mutable_array() = *overrides.array;

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
