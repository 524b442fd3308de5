// Argument checks shared by the implementations of each store interface, so that they refuse
// the same inputs with the same codes (the conformance suites hold them to it).
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_STORE_CHECKS_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_STORE_CHECKS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/core/types.h"
#include "scheduler/store/coordination.h"
#include "scheduler/store/job_store.h"

namespace ringmaster::scheduler::store_internal {

// INVALID_ARGUMENT when the job has no id or the event names another job.
absl::Status CheckJobAndEvent(const Job& job, const JobEvent* event);

// INVALID_ARGUMENT for an epoch below 1 or any malformed write of the batch (as above, or a
// worker without an id).
absl::Status CheckBatch(const WriteBatch& batch, int64_t epoch);

// Whether `stored` is the job `write` creates, stored by an earlier try of the same write whose
// answer was lost (the connection broke after the commit): same id (the caller's check), request
// id, team, creation time and spec. A retried write then gets its own job back as created, not
// as a repeat of its request id or a taken job id.
bool SameCreate(const Job& stored, const Job& write);

// A batch of updates retried after its answer was lost meets its own events (AlreadyExists).
// It was stored as a whole (one transaction) when every update's event is stored as the batch
// writes it (`stored` has it under (job id, seq)), or its job had ended (an update skipped then
// as now; `ended` lists those jobs). Then the batch's result, with nothing written again
// (usage would count twice); nullopt when the batch was not stored. Creates and checkpoints
// are not looked at: the caller asks only for batches of updates (and worker upserts).
std::optional<CommitResult> StoredBefore(
    const WriteBatch& batch, const std::map<std::pair<std::string, int64_t>, JobEvent>& stored,
    const std::set<std::string>& ended);

// The placement sorted by rank (the order every store returns it in); INVALID_ARGUMENT when a
// rank appears twice.
absl::StatusOr<std::vector<RankPlacement>> SortedPlacement(std::vector<RankPlacement> placement);

// The pending queue's ranges (see QueueEntry): INVALID_ARGUMENT outside them.
inline constexpr int32_t kMinPriority = -1000;
inline constexpr int32_t kMaxPriority = 1000;
inline constexpr int64_t kSeqLimit = int64_t{1} << 40;  // seq < 2^40
absl::Status CheckQueueEntry(const QueueEntry& entry);

// INVALID_ARGUMENT for an empty worker id / lease holder or a ttl that is not positive.
absl::Status CheckBeat(const std::string& worker_id, int64_t ttl_ms);
absl::Status CheckLease(const std::string& holder, int64_t ttl_ms);

}  // namespace ringmaster::scheduler::store_internal

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_STORE_CHECKS_H_
