#include "core/types.h"

namespace ringmaster::scheduler {

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
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

}  // namespace ringmaster::scheduler
