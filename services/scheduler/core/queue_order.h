// The order in which pending jobs are tried: higher priority first, then submit order. One
// definition, used by every pass and by the Redis queue mirror's scores.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_QUEUE_ORDER_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_QUEUE_ORDER_H_

#include <string>
#include <vector>

#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

// True when `a` is tried before `b`.
bool ComesFirst(const Job& a, const Job& b);

// The ids of `jobs` in queue order.
std::vector<std::string> QueueOrder(std::vector<const Job*> jobs);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_QUEUE_ORDER_H_
