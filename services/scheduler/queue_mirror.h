// QueueMirror: the Redis copy of the stored pending jobs, for outside readers (the scheduler
// itself orders from memory), kept by its own thread so that Redis round trips never slow the
// scheduler's lock or its writers.
//
// It owns the changes not applied yet: per job, the latest stored change (its queue entry while
// it is pending, nullopt once it left the queue); newer ones replace older while Redis is away.
// It is fed only after commits (Update, from the writers), so it never shows a pending job
// that is not stored.
//
// Threads: one, the mirror thread (Start to Stop); the callbacks run on it with no lock held.
// Locks: mu_ guards the changes and the stop flag, and is held across nothing else.
#ifndef RINGMASTER_SERVICES_SCHEDULER_QUEUE_MIRROR_H_
#define RINGMASTER_SERVICES_SCHEDULER_QUEUE_MIRROR_H_

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "store/coordination.h"

namespace ringmaster::scheduler {

class QueueMirror {
 public:
  // A job's stored change: its queue entry while it is pending, nullopt once it left the queue.
  using Change = std::pair<std::string, std::optional<QueueEntry>>;

  // `stored_pending` lists the stored pending jobs (for a rebuild); `rebuilt` is called after
  // each rebuild (the liveness keys of connected workers went with Redis's contents). `queue`
  // must outlive the mirror.
  QueueMirror(PendingQueue* queue, std::function<std::vector<QueueEntry>()> stored_pending,
              std::function<void()> rebuilt);
  ~QueueMirror() { Stop(); }
  QueueMirror(const QueueMirror&) = delete;
  QueueMirror& operator=(const QueueMirror&) = delete;

  void Start();
  void Stop();
  // Stored changes to apply, in commit order.
  void Update(std::vector<Change> changes);

 private:
  void Loop();

  PendingQueue* const queue_;
  const std::function<std::vector<QueueEntry>()> stored_pending_;
  const std::function<void()> rebuilt_;
  Mutex mu_;
  CondVar cv_;
  PendingQueue::Changes changes_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_QUEUE_MIRROR_H_
