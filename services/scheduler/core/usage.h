// Accounting of what each queue's jobs used: resource-seconds (GPU-seconds per GPU type, or
// CPU-slot-seconds for "cpu"). An attempt is charged from RUNNING until it leaves RUNNING
// (ends, fails, restarts or is preempted), in the same transaction that stores its end, so the
// total survives restarts and counts no attempt twice. Pure functions; the scheduler keeps the
// stored totals and adds what running attempts used so far.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_USAGE_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_USAGE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/core/placement.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

// (queue, resource) -> resource-milliseconds.
using UsageTotals = std::map<std::pair<std::string, std::string>, int64_t>;

// What the running attempt of `job` has used by `now_ms`: its held demand times the time since
// it started RUNNING. nullopt for a job that is not running (or has no start time).
std::optional<QueueUsage> AttemptUsage(const Job& job, const ClusterState& cluster, int64_t now_ms);

// `stored` plus what every running job of `jobs` has used so far.
UsageTotals WithRunning(UsageTotals stored, const std::vector<const Job*>& jobs,
                        const ClusterState& cluster, int64_t now_ms);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_USAGE_H_
