#include "scheduler/core/queue_names.h"

namespace ringmaster::scheduler {

const char* PreemptWithinQueueName(PreemptWithinQueue value) {
  switch (value) {
    case PreemptWithinQueue::kNever:
      return "Never";
    case PreemptWithinQueue::kLowerPriority:
      return "LowerPriority";
    case PreemptWithinQueue::kLowerOrNewerEqualPriority:
      return "LowerOrNewerEqualPriority";
  }
  return "Never";
}

std::optional<PreemptWithinQueue> ParsePreemptWithinQueue(const std::string& name) {
  for (auto value : {PreemptWithinQueue::kNever, PreemptWithinQueue::kLowerPriority,
                     PreemptWithinQueue::kLowerOrNewerEqualPriority}) {
    if (name == PreemptWithinQueueName(value)) return value;
  }
  return std::nullopt;
}

const char* ReclaimWithinCohortName(ReclaimWithinCohort value) {
  switch (value) {
    case ReclaimWithinCohort::kNever:
      return "Never";
    case ReclaimWithinCohort::kLowerPriority:
      return "LowerPriority";
    case ReclaimWithinCohort::kAny:
      return "Any";
  }
  return "Never";
}

std::optional<ReclaimWithinCohort> ParseReclaimWithinCohort(const std::string& name) {
  for (auto value : {ReclaimWithinCohort::kNever, ReclaimWithinCohort::kLowerPriority,
                     ReclaimWithinCohort::kAny}) {
    if (name == ReclaimWithinCohortName(value)) return value;
  }
  return std::nullopt;
}

}  // namespace ringmaster::scheduler
