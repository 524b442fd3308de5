#include "scheduler/core/queue_order.h"

#include <algorithm>

namespace ringmaster::scheduler {

bool ComesFirst(const Job& a, const Job& b) {
  if (a.spec.priority != b.spec.priority) return a.spec.priority > b.spec.priority;
  return a.seq < b.seq;
}

std::vector<std::string> QueueOrder(std::vector<const Job*> jobs) {
  std::sort(jobs.begin(), jobs.end(), [](const Job* a, const Job* b) { return ComesFirst(*a, *b); });
  std::vector<std::string> ids;
  ids.reserve(jobs.size());
  for (const Job* job : jobs) ids.push_back(job->id);
  return ids;
}

}  // namespace ringmaster::scheduler
