// The live-job bounds (docs/scheduler.md, flags --max-live-*): every live job is held in
// memory, so a submit past a bound is refused, saying which and why. No I/O.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_LIVE_BOUNDS_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_LIVE_BOUNDS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace ringmaster::scheduler {

struct LiveBounds {
  int64_t max_jobs = 0;            // --max-live-jobs
  int64_t max_jobs_per_queue = 0;  // --max-live-jobs-per-queue
  int64_t max_spec_bytes = 0;      // --max-live-spec-mib, in bytes
};

// What is live now, submits on their way included.
struct LiveLoad {
  int64_t jobs = 0;
  int64_t in_queue = 0;    // of the new job's queue
  int64_t spec_bytes = 0;  // SpecBytes of them all
};

// OK when one more job of `queue` whose spec takes `bytes` stays within `bounds`; else
// RESOURCE_EXHAUSTED naming the bound.
absl::Status CheckLiveBounds(const LiveLoad& load, const LiveBounds& bounds,
                             const std::string& queue, int64_t bytes);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_LIVE_BOUNDS_H_
