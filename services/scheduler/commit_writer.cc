#include "commit_writer.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ringmaster::scheduler {

namespace {
bool Retryable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}
}  // namespace

CommitWriter::CommitWriter(JobStore* store, SchedulerMetrics* metrics, Options options,
                           AfterCommit after_commit)
    : store_(store),
      metrics_(metrics),
      options_(std::move(options)),
      after_commit_(std::move(after_commit)) {}

void CommitWriter::Start(int64_t epoch) {
  epoch_ = epoch;
  writers_.emplace_back([this] { WriterLoop(false); });
  for (int i = 0; i < options_.submit_writers; ++i) {
    writers_.emplace_back([this] { WriterLoop(true); });
  }
}

void CommitWriter::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  outbox_cv_.NotifyAll();
  creates_cv_.NotifyAll();
  written_cv_.NotifyAll();
  for (std::thread& writer : writers_) writer.join();
  writers_.clear();
}

void CommitWriter::Enqueue(Write write) {
  const bool create = !write.job_write.job.id.empty() &&
                      write.job_write.kind == JobWrite::Kind::kCreate && !write.in_order;
  {
    MutexLock lock(&mu_);
    if (create && write.waiter) {
      if (creates_in_flight_.size() >= prune_creates_at_) {
        PruneCreatesInFlightLocked();
        prune_creates_at_ = std::max<size_t>(64, 2 * creates_in_flight_.size());
      }
      const Job& job = write.job_write.job;
      CreateInFlight& entry = creates_in_flight_.emplace_back();
      entry.job_id = job.id;
      entry.queue = job.spec.queue;
      for (const Mount& m : job.spec.mounts) entry.volumes.push_back(m.volume);
      entry.waiter = write.waiter;
    }
    (create ? creates_ : outbox_).push_back(std::move(write));
    ++enqueued_;
    submit_nudges_ += create;
  }
  // Only the writers of that queue: every submit waking the outbox writer for nothing cost a
  // context switch on a busy machine.
  (create ? creates_cv_ : outbox_cv_).NotifyAll();
}

void CommitWriter::NudgeSubmitWriters() {
  {
    MutexLock lock(&mu_);
    ++submit_nudges_;
  }
  creates_cv_.NotifyAll();
}

int64_t CommitWriter::CreatesInFlight(const std::string& queue) {
  MutexLock lock(&mu_);
  PruneCreatesInFlightLocked();
  int64_t n = 0;
  for (const CreateInFlight& c : creates_in_flight_) n += c.queue == queue;
  return n;
}

std::string CommitWriter::CreateInFlightMounting(const std::string& volume) {
  MutexLock lock(&mu_);
  PruneCreatesInFlightLocked();
  for (const CreateInFlight& c : creates_in_flight_) {
    if (std::find(c.volumes.begin(), c.volumes.end(), volume) != c.volumes.end()) return c.job_id;
  }
  return "";
}

// The writers. One stores every change of existing jobs and workers, in decision order (a
// release must be stored before the placement that reuses its GPUs). New jobs depend on nothing
// and nothing depends on them until they are stored, so their own writers (--submit-writers)
// store them apart from that order, each batch whatever queued during its last commit.
//  1. take what the outbox (or, for the create writers, the create queue) holds, up to
//     max_batch writes;
//  2. store it as one transaction under this leader's epoch; while Postgres is away or hung,
//     retry with backoff (the pool bounds every try), and keep the batch: decisions stand;
//  3. fenced: tell on_fenced and stop, storing and acting on nothing more;
//  4. stored: act on it (the after-commit hook: sends, answers, events, the Redis mirror).
void CommitWriter::WriterLoop(bool creates) {
  std::deque<Write>& queue = creates ? creates_ : outbox_;
  CondVar& cv = creates ? creates_cv_ : outbox_cv_;
  while (true) {
    std::vector<Write> batch;
    {
      MutexLock lock(&mu_);
      cv.WaitFor(&mu_, std::chrono::seconds(1),
                 [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue.empty() || stopping_; });
      if (stopping_) return;
      while (!queue.empty() && batch.size() < options_.max_batch) {
        batch.push_back(std::move(queue.front()));
        queue.pop_front();
      }
    }
    if (batch.empty()) continue;
    const auto begun = std::chrono::steady_clock::now();
    CommitResult result;
    if (!StoreBatch(batch, &result)) return;
    const auto committed = std::chrono::steady_clock::now();
    for (Write& w : batch) {
      if (!w.waiter) continue;
      w.waiter->commit_begun = begun;  // read by its answer, on this thread, once settled
      w.waiter->committed = committed;
    }
    Acted(batch, result);
  }
}

bool CommitWriter::StoreBatch(std::vector<Write>& batch, CommitResult* result) {
  WriteBatch wb;
  for (const Write& w : batch) {
    if (!w.job_write.job.id.empty()) wb.jobs.push_back(w.job_write);
    if (w.worker) wb.workers.push_back(*w.worker);
  }
  const bool creates = !batch.empty() && !batch.front().job_write.job.id.empty() &&
                       batch.front().job_write.kind == JobWrite::Kind::kCreate &&
                       !batch.front().in_order;
  int64_t backoff = options_.retry_min_ms;
  while (true) {
    const auto start = std::chrono::steady_clock::now();
    auto stored = store_->Commit(wb, epoch_);
    if (metrics_) {
      metrics_->commit_seconds.Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      metrics_->batch_writes.Observe(static_cast<double>(batch.size()));
    }
    if (stored.ok()) {
      if (store_down_.exchange(false)) {
        RM_LOG(kInfo) << "postgres is back; writes caught up";
        {
          MutexLock lock(&mu_);
          ++recoveries_;
        }
        // The other writers' backoff ends.
        outbox_cv_.NotifyAll();
        creates_cv_.NotifyAll();
      }
      *result = std::move(*stored);
      return true;
    }
    const absl::Status& s = stored.status();
    if (IsFenced(s)) {
      const bool first = !fenced_.exchange(true);
      if (first) RM_LOG(kError) << "this scheduler was fenced off: " << s;
      // Told before anyone waiting hears of it (main exits there).
      if (first && options_.on_fenced) options_.on_fenced(s);
      for (Write& w : batch) {
        if (!w.waiter) continue;
        {
          MutexLock lock(&w.waiter->mu);
          w.waiter->result =
              absl::UnavailableError("this scheduler is no longer the leader; retry");
        }
        w.waiter->Settle();
      }
      return false;
    }
    if (!Retryable(s)) {
      // A malformed write is a bug; it must not hold back every decision behind it: the batch
      // is stored one write at a time, and only the refused ones are dropped.
      RM_LOG(kError) << "batch of " << batch.size() << " writes refused: " << s;
      if (batch.size() == 1) {
        if (Waiter* waiter = batch[0].waiter.get()) {
          {
            MutexLock lock(&waiter->mu);
            waiter->result = s;
          }
          waiter->Settle();
        }
        RM_LOG(kError) << "dropped the write of "
                       << (batch[0].worker ? "worker " + batch[0].worker->id
                                           : "job " + batch[0].job_write.job.id);
        batch.clear();
        {
          MutexLock lock(&mu_);
          ++written_;
        }
        written_cv_.NotifyAll();
        *result = {};
        return true;
      }
      for (Write& w : batch) {
        std::vector<Write> one;
        one.push_back(std::move(w));
        CommitResult r;
        if (!StoreBatch(one, &r)) return false;
        if (!one.empty()) Acted(one, r);
      }
      batch.clear();
      *result = {};
      return true;
    }
    if (!store_down_.exchange(true)) {
      RM_LOG(kWarning) << "cannot store " << batch.size()
                       << " decisions; retrying until postgres answers: " << s;
    }
    {
      // The backoff ends early when another writer got through (Postgres is back) or, for a
      // writer of new jobs, when a submit arrives or is turned away meanwhile (a client is
      // waiting now, maybe retrying after the outage): a lone submit writer then does not keep
      // clients waiting out its backoff. Never sooner than retry_min_ms after the last try, so
      // an outage costs Postgres at most that rate of tries.
      MutexLock lock(&mu_);
      const uint64_t recoveries = recoveries_;
      const uint64_t nudges = submit_nudges_;
      CondVar& cv = creates ? creates_cv_ : outbox_cv_;
      cv.WaitFor(
          &mu_, std::chrono::milliseconds(backoff), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return stopping_ || recoveries_ != recoveries || (creates && submit_nudges_ != nudges);
          });
      if (stopping_) return false;
      if (cv.WaitUntil(&mu_, start + std::chrono::milliseconds(options_.retry_min_ms),
                       [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; })) {
        return false;
      }
    }
    backoff = std::min(backoff * 2, options_.retry_max_ms);
  }
}

void CommitWriter::Acted(std::vector<Write>& batch, const CommitResult& result) {
  after_commit_(batch, result);
  {
    MutexLock lock(&mu_);
    written_ += batch.size();
  }
  written_cv_.NotifyAll();
}

absl::Status CommitWriter::Flush(int64_t timeout_ms) {
  // Writers finish out of order (new jobs in parallel), so a count reached is no proof that
  // the writes before the call are done; every write handed over so far being done is.
  MutexLock lock(&mu_);
  if (!written_cv_.WaitFor(
          &mu_, std::chrono::milliseconds(timeout_ms),
          [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return written_ == enqueued_; })) {
    return absl::DeadlineExceededError(
        absl::StrCat(enqueued_ - written_, " decisions not stored within ", timeout_ms, " ms"));
  }
  return absl::OkStatus();
}

void CommitWriter::PruneCreatesInFlightLocked() {
  std::erase_if(creates_in_flight_, [](const auto& entry) {
    std::shared_ptr<Waiter> waiter = entry.waiter.lock();
    if (!waiter) return true;  // its write was dropped
    MutexLock lock(&waiter->mu);
    // Told (Settle's first step) comes after the hook put the job among the live jobs, where a
    // count of them finds it: counted here as well, it was counted twice (a CI flake).
    return waiter->done || waiter->told != std::chrono::steady_clock::time_point{};
  });
}

}  // namespace ringmaster::scheduler
