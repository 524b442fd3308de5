// CommitWriter: the outbox of decisions on their way to Postgres, and the writer threads that
// store them in batches (group commit) under the leader epoch, retry them while Postgres is
// away, and hand each stored batch to the after-commit hook.
//
// It owns the two write queues (changes of existing jobs and workers in decision order; new
// jobs apart), the creates in flight (for queue deletes), the fence and store-down flags, and
// the counts Flush waits on.
//
// Threads: one outbox writer and options.submit_writers create writers (Start to Stop). The
// hook runs on them with no lock of this class held; on_fenced too, once.
// Locks: mu_ guards the queues, the counts and creates_in_flight_; it is taken after the
// scheduler's mu_ (Enqueue is called under it) and never held across a store call, the hook or
// a waiter's answer (only a waiter's own mu is taken under it, by the prune).
#ifndef RINGMASTER_SERVICES_SCHEDULER_COMMIT_WRITER_H_
#define RINGMASTER_SERVICES_SCHEDULER_COMMIT_WRITER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "core/types.h"
#include "pending_answers.h"
#include "scheduler_metrics.h"
#include "store/job_store.h"

namespace ringmaster::scheduler {

class CommitWriter {
 public:
  // One decision on its way to Postgres, and what to do once it is there.
  struct Write {
    JobWrite job_write;  // unset kind with empty job id: a worker upsert only
    std::optional<Worker> worker;
    std::set<std::string> stop_on;  // workers whose ranks of job_write's attempt must stop
    int32_t stop_attempt = 0;
    int64_t stop_grace_ms = 0;
    bool assign = false;  // send the job's assignment to every worker of its placement
    std::shared_ptr<Waiter> waiter;
    // A kCreate stored in decision order with the changes of existing jobs, not apart: a
    // task of an array, created in index order (core/array.h).
    bool in_order = false;
  };

  struct Options {
    size_t max_batch = 1'000;  // writes per transaction
    // Backoff between tries of a batch that could not be stored.
    int64_t retry_min_ms = 50;
    int64_t retry_max_ms = 2'000;
    int submit_writers = 1;
    // Called once, from a writer thread, when a newer leader fenced this one off.
    std::function<void(const absl::Status&)> on_fenced;
  };

  // Acts on a stored batch (sends, answers, events, the mirror), on the writer's thread. Each
  // writer calls it batch after batch, in commit order.
  using AfterCommit = std::function<void(std::vector<Write>& batch, const CommitResult& result)>;

  // `store` must outlive the writer; `metrics` may be null.
  CommitWriter(JobStore* store, SchedulerMetrics* metrics, Options options,
               AfterCommit after_commit);
  ~CommitWriter() { Stop(); }
  CommitWriter(const CommitWriter&) = delete;
  CommitWriter& operator=(const CommitWriter&) = delete;

  // Starts the writers; every batch is fenced with `epoch`.
  void Start(int64_t epoch);
  // Stops the writers; what they did not store by then is dropped.
  void Stop();

  void Enqueue(Write write);
  // Waits until everything handed over so far is stored and acted on (or dropped).
  // DEADLINE_EXCEEDED after `timeout_ms`.
  absl::Status Flush(int64_t timeout_ms);

  // A newer leader fenced this one off: nothing more is stored.
  bool fenced() const { return fenced_; }
  // The last commit failed for want of Postgres.
  bool store_down() const { return store_down_; }
  // A submit was turned away while Postgres was down: a submit writer's backoff ends, since
  // Postgres may be back and a client is waiting now.
  void NudgeSubmitWriters();
  // New jobs of `queue` handed over and not settled yet (stored and live, or refused), also
  // those whose submit was answered for want of time.
  int64_t CreatesInFlight(const std::string& queue);
  // The id of a new job handed over and not settled yet that mounts `volume`; empty: none.
  std::string CreateInFlightMounting(const std::string& volume);

 private:
  void WriterLoop(bool creates);
  // Stores `batch` (retrying while Postgres is away); false when fenced or stopping.
  bool StoreBatch(std::vector<Write>& batch, CommitResult* result);
  // The hook, then the batch counts as written.
  void Acted(std::vector<Write>& batch, const CommitResult& result);
  // Forgets creates in flight whose writes are settled or dropped.
  void PruneCreatesInFlightLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* const store_;
  SchedulerMetrics* const metrics_;
  const Options options_;
  const AfterCommit after_commit_;
  int64_t epoch_ = 0;  // set by Start, before the writers run

  Mutex mu_;
  CondVar outbox_cv_;   // the outbox writer's: a write, a recovery, the stop
  CondVar creates_cv_;  // the submit writers': a new job, a nudge, a recovery
  CondVar written_cv_;  // Flush's: written_ grew
  std::deque<Write> outbox_ ABSL_GUARDED_BY(mu_);   // changes of jobs and workers, in order
  std::deque<Write> creates_ ABSL_GUARDED_BY(mu_);  // new jobs
  // written_ counts writes stored (or dropped) and acted on, enqueued_ writes handed over
  // (Flush waits for the one to reach the other).
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  // Submits handed over or turned away while Postgres was down: a submit writer's backoff
  // ends (StoreBatch). recoveries_: commits that found Postgres back: every backoff ends.
  uint64_t submit_nudges_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t recoveries_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // New jobs from their hand-over until settled: a delete of their queue, or of a volume they
  // mount, waits for them. Pruned when it doubles.
  struct CreateInFlight {
    std::string job_id;
    std::string queue;
    std::vector<std::string> volumes;  // those its spec mounts
    std::weak_ptr<Waiter> waiter;
  };
  std::vector<CreateInFlight> creates_in_flight_ ABSL_GUARDED_BY(mu_);
  size_t prune_creates_at_ ABSL_GUARDED_BY(mu_) = 64;
  std::atomic<bool> store_down_{false};
  std::atomic<bool> fenced_{false};
  std::vector<std::thread> writers_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_COMMIT_WRITER_H_
