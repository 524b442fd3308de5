// Validation of what clients send, with defaults filled in. Every error is INVALID_ARGUMENT
// and names the field and what is allowed, e.g. "replicas: must be 1..4096, got 0".
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_VALIDATION_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_VALIDATION_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

inline constexpr int32_t kMaxReplicas = 4096;
// The bound of JobSpec::sizes_divide: a global batch of up to a million samples.
inline constexpr int32_t kMaxSizesDivide = 1'000'000;
inline constexpr size_t kMaxEnv = 64;  // CommandWorkload.env entries
inline constexpr size_t kMaxLabels = 64;
inline constexpr int32_t kMaxGpusPerReplica = 16;
inline constexpr int32_t kMaxPriority = 1000;
inline constexpr int32_t kDefaultBackoffLimit = 6;
inline constexpr int32_t kMaxBackoffLimit = 100;
inline constexpr int64_t kMaxRuntimeSeconds = 30LL * 24 * 3600;
inline constexpr char kDefaultModel[] = "mlp";
inline constexpr int32_t kDefaultBatchSize = 64;
inline constexpr int64_t kDefaultSteps = 100;

// Returns `spec` with defaults applied (queue, trainer model/batch/steps, backoff_limit), or the
// first problem found. The environment fields are checked by CheckEnvironment
// (core/environment.h).
absl::StatusOr<JobSpec> ValidateJobSpec(const JobSpec& spec);

// A GPU's memory that a share may ask for at most (JobSpec.gpu_memory), before the cluster's
// own devices bound it (CheckGpuMemoryFits).
inline constexpr int64_t kMaxGpuMemory = int64_t{1} << 40;  // 1 TiB
// INVALID_ARGUMENT naming gpu_memory when workers with GPUs of the spec's type (any type when
// it names none) are registered and none has that much memory; OK when there are none yet.
absl::Status CheckGpuMemoryFits(const JobSpec& spec, const std::vector<const Worker*>& workers);

// A queue name: the same rules as a job name. Errors name `field`.
absl::Status ValidateQueueName(const std::string& queue, const std::string& field = "queue");

inline constexpr int32_t kMaxQueueWeight = 1000;
inline constexpr int64_t kMaxQuota = 1'000'000;
inline constexpr size_t kMaxQueueResources = 64;
inline constexpr int64_t kMaxMinRuntimeSeconds = 30LL * 24 * 3600;
// Queue::elastic_idle_delay_seconds, the bounds of the scheduler's --elastic-idle-delay-ms.
inline constexpr int64_t kMinElasticIdleDelaySeconds = 1;
inline constexpr int64_t kMaxElasticIdleDelaySeconds = 24 * 3600;

// Returns `queue` with defaults applied (weight 0 means 1), or the first problem found: name and
// cohort as a job's name (cohort may be empty), weight 1..1000, resource names a GPU type or
// "cpu", nominal and limits 0..1,000,000 (a lending limit at most the nominal; limits only in a
// cohort), known preemption settings, min_runtime_seconds 0..30 days, elastic_idle_delay_seconds
// (when set) 1..86400. The times are not checked.
absl::StatusOr<Queue> ValidateQueue(const Queue& queue);

// A client's idempotency key: empty (no deduplication) or 1..128 of [A-Za-z0-9._:-].
absl::Status ValidateRequestId(const std::string& request_id);

// Ids as the scheduler mints them ("j-" + hex); anything else cannot name a job.
absl::Status ValidateJobId(const std::string& job_id, const std::string& field = "job_id");

// A registering worker: id, address, port, GPU inventory and CPU slots.
absl::Status ValidateWorker(const Worker& worker);

// A submit whose request id an earlier job of `existing` already has: the earlier job is the
// answer when it is the same team's with the same spec; another team's id says only that it is
// taken, and another spec names the job that has it (ALREADY_EXISTS both).
absl::Status CheckRequestIdReuse(const Job& existing, const Job& asked);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_VALIDATION_H_
