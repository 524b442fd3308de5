// Validation of what clients send, with defaults filled in. Every error is INVALID_ARGUMENT
// and names the field and what is allowed, e.g. "replicas: must be 1..4096, got 0".
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_VALIDATION_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_VALIDATION_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/types.h"

namespace ringmaster::scheduler {

inline constexpr int32_t kMaxReplicas = 4096;
inline constexpr int32_t kMaxGpusPerReplica = 16;
inline constexpr int32_t kMaxPriority = 1000;
inline constexpr int32_t kDefaultBackoffLimit = 6;
inline constexpr int32_t kMaxBackoffLimit = 100;
inline constexpr int64_t kMaxRuntimeSeconds = 30LL * 24 * 3600;
inline constexpr char kDefaultModel[] = "mlp";
inline constexpr int32_t kDefaultBatchSize = 64;
inline constexpr int64_t kDefaultSteps = 100;

// Returns `spec` with defaults applied (queue, trainer model/batch/steps, backoff_limit), or the
// first problem found.
absl::StatusOr<JobSpec> ValidateJobSpec(const JobSpec& spec);

// A queue name: the same rules as a job name.
absl::Status ValidateQueueName(const std::string& queue);

// A client's idempotency key: empty (no deduplication) or 1..128 of [A-Za-z0-9._:-].
absl::Status ValidateRequestId(const std::string& request_id);

// Ids as the scheduler mints them ("j-" + hex); anything else cannot name a job.
absl::Status ValidateJobId(const std::string& job_id, const std::string& field = "job_id");

// A registering worker: id, address, port, GPU inventory and CPU slots.
absl::Status ValidateWorker(const Worker& worker);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_VALIDATION_H_
