// Translation between the wire queue (ringmaster.v1.Queue) and the core Queue. Pure functions.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CONVERT_QUEUE_CONVERT_H_
#define RINGMASTER_SERVICES_SCHEDULER_CONVERT_QUEUE_CONVERT_H_

#include "absl/status/statusor.h"
#include "ringmaster/v1/queue.pb.h"
#include "scheduler/core/queue_status.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

// The wire queue as it came (times included); defaults and range checks are ValidateQueue's.
// Fails only for what the core struct cannot hold (an unknown enum value): INVALID_ARGUMENT
// naming the field.
absl::StatusOr<Queue> FromProto(const v1::Queue& queue);
v1::Queue ToProto(const Queue& queue);
v1::QueueStatus ToProto(const QueueStatus& status);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CONVERT_QUEUE_CONVERT_H_
