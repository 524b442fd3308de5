#include "scheduler/core/live_bounds.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {

absl::Status CheckLiveBounds(const LiveLoad& load, const LiveBounds& bounds,
                             const std::string& queue, int64_t bytes) {
  if (load.jobs >= bounds.max_jobs) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the scheduler holds ", load.jobs,
                     " live jobs (pending, starting or running), its bound "
                     "(--max-live-jobs ",
                     bounds.max_jobs, "); submit again when some have ended"));
  }
  if (load.in_queue >= bounds.max_jobs_per_queue) {
    return absl::ResourceExhaustedError(absl::StrCat("queue '", queue, "' holds ", load.in_queue,
                                                     " live jobs (pending, starting or running), "
                                                     "its bound (--max-live-jobs-per-queue ",
                                                     bounds.max_jobs_per_queue,
                                                     "); submit again when some have ended"));
  }
  if (load.spec_bytes + bytes > bounds.max_spec_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the live jobs' specs (argv, env, labels, names) take ", load.spec_bytes,
        " bytes; this one's ", bytes, " would pass their bound of ", bounds.max_spec_bytes,
        " bytes (--max-live-spec-mib); submit again when some have ended"));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
