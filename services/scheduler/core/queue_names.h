// The names users write and Postgres stores for a queue's preemption settings, as in Kueue:
// "Never", "LowerPriority", "LowerOrNewerEqualPriority" (within_queue) and "Never",
// "LowerPriority", "Any" (reclaim_within_cohort). Pure functions.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_QUEUE_NAMES_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_QUEUE_NAMES_H_

#include <optional>
#include <string>

#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

const char* PreemptWithinQueueName(PreemptWithinQueue value);
std::optional<PreemptWithinQueue> ParsePreemptWithinQueue(const std::string& name);
const char* ReclaimWithinCohortName(ReclaimWithinCohort value);
std::optional<ReclaimWithinCohort> ParseReclaimWithinCohort(const std::string& name);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_QUEUE_NAMES_H_
