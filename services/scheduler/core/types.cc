#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

bool IsPlaced(JobState state) {
  return state == JobState::kStarting || state == JobState::kRunning;
}

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kPending: return "PENDING";
    case JobState::kStarting: return "STARTING";
    case JobState::kRunning: return "RUNNING";
    case JobState::kSucceeded: return "SUCCEEDED";
    case JobState::kFailed: return "FAILED";
    case JobState::kCancelled: return "CANCELLED";
  }
  return "UNKNOWN";
}

std::optional<JobState> ParseJobState(const std::string& name) {
  for (JobState s : {JobState::kPending, JobState::kStarting, JobState::kRunning,
                     JobState::kSucceeded, JobState::kFailed, JobState::kCancelled}) {
    if (name == JobStateName(s)) return s;
  }
  return std::nullopt;
}

const char* WorkerStateName(WorkerState state) {
  return state == WorkerState::kReady ? "READY" : "LOST";
}

int64_t SpecBytes(const JobSpec& spec) {
  size_t bytes = spec.name.size() + spec.queue.size() + spec.gpu_type.size();
  if (spec.trainer) bytes += spec.trainer->model.size();
  if (spec.command) {
    for (const std::string& arg : spec.command->argv) bytes += arg.size();
    for (const auto& [name, value] : spec.command->env) bytes += name.size() + value.size();
  }
  for (const auto& [key, value] : spec.labels) bytes += key.size() + value.size();
  bytes += spec.image.size() + spec.workdir.size();
  for (const Mount& m : spec.mounts) bytes += m.volume.size() + m.path.size();
  for (const Dependency& d : spec.after) bytes += d.job_id.size();
  return static_cast<int64_t>(bytes);
}

}  // namespace ringmaster::scheduler
