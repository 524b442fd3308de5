// WatchHub: the job watches (WatchJob streams and Watch calls) and the fan-out of stored events
// to them.
//
// It owns the registry of feeds by job id, bounded by max_watchers (RESOURCE_EXHAUSTED
// beyond). Publish is called by a writer thread after a commit, with every event of the batch;
// each feed's `push` runs there under mu_, so it must not block or call the scheduler, and
// after End(feed) returns no push comes. Thread-safe; no threads of its own (Watch waits on the
// caller's thread).
#ifndef RINGMASTER_SERVICES_SCHEDULER_WATCH_HUB_H_
#define RINGMASTER_SERVICES_SCHEDULER_WATCH_HUB_H_

#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "core/types.h"
#include "store/job_store.h"

namespace ringmaster::scheduler {

class WatchHub {
 public:
  // One watch: `push` gets the job's events as they are stored (see Begin).
  struct Feed {
    std::string job_id;
    std::function<void(const std::vector<JobEvent>&)> push;
  };

  // `store` (read for the events stored before a watch began) must outlive the hub.
  WatchHub(JobStore* store, int32_t max_watchers);
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Registers `feed` until End(feed). Events stored before come from the store, read after
  // Begin so that none is missed.
  absl::Status Begin(Feed* feed);
  void End(Feed* feed);
  // Calls `send` with every event of the job in order: the stored ones, then new ones as they
  // are published, until the job has ended, `send` returns false, or `cancelled` returns true
  // (polled about once a second). An idle watcher costs no database round trip.
  absl::Status Watch(const std::string& job_id, const std::function<bool(const JobEvent&)>& send,
                     const std::function<bool()>& cancelled);
  // Hands stored events to the feeds of their jobs, in order.
  void Publish(const std::vector<JobEvent>& events);

 private:
  JobStore* const store_;
  const size_t max_watchers_;
  Mutex mu_;
  // By job id: a batch's events reach the feeds of their jobs without a look at the others.
  std::unordered_map<std::string, std::list<Feed*>> feeds_ ABSL_GUARDED_BY(mu_);
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_WATCH_HUB_H_
