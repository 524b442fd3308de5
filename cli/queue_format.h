// Human-readable tables for `ringctl queue`. Pure functions of their arguments, so output is
// tested byte for byte (format.h has the shared table renderer and JSON).
#ifndef RINGMASTER_CLI_QUEUE_FORMAT_H_
#define RINGMASTER_CLI_QUEUE_FORMAT_H_

#include <string>

#include "ringmaster/v1/queue.pb.h"

namespace ringmaster::cli {

// `ringctl queue list`: one row per queue with NAME, COHORT, WEIGHT, NOMINAL, IN USE, BORROWED,
// LENT, PENDING, SHARE. Per-resource columns read "t4:16 cpu:64" (resources by name); NOMINAL
// is "unlimited" for a queue without quotas, a count column "0" when nothing is counted.
std::string FormatQueueList(const v1::ListQueuesResponse& response);
// `ringctl queue get` (and create/update): the queue's fields, then one row per resource.
std::string FormatQueue(const v1::QueueWithStatus& queue);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_QUEUE_FORMAT_H_
