#include "scheduler.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "core/validation.h"

namespace ringmaster::scheduler {

namespace {
constexpr int kMaxListLimit = 1000;
constexpr size_t kMaxReasonBytes = 256;
}  // namespace

// Prometheus families of the scheduler. Names follow the platform's convention: ringmaster_
// prefix, base units, _total for counters.
struct Scheduler::Metrics {
  explicit Metrics(prometheus::Registry& r)
      : jobs(prometheus::BuildGauge().Name("ringmaster_jobs")
                 .Help("Live jobs by state and queue (PENDING, STARTING, RUNNING)").Register(r)),
        finished(prometheus::BuildCounter().Name("ringmaster_jobs_finished_total")
                     .Help("Jobs that reached a terminal state, by state and queue").Register(r)),
        pending(prometheus::BuildGauge().Name("ringmaster_queue_pending_jobs")
                    .Help("Jobs waiting for a placement, by queue").Register(r)),
        gpus(prometheus::BuildGauge().Name("ringmaster_gpus")
                 .Help("GPUs of ready workers, by type").Register(r)),
        gpus_allocated(prometheus::BuildGauge().Name("ringmaster_gpus_allocated")
                           .Help("GPUs held by placements, by type").Register(r)),
        cpu_slots(prometheus::BuildGauge().Name("ringmaster_cpu_slots")
                      .Help("CPU rank slots of ready workers, total and allocated").Register(r)),
        workers(prometheus::BuildGauge().Name("ringmaster_workers")
                    .Help("Registered workers by state").Register(r)),
        submissions(prometheus::BuildCounter().Name("ringmaster_job_submissions_total")
                        .Help("Jobs accepted by SubmitJob (repeats of a request id excluded)")
                        .Register(r)),
        placement_latency(prometheus::BuildHistogram().Name("ringmaster_placement_latency_seconds")
                              .Help("Time from a job entering PENDING to its placement")
                              .Register(r)
                              .Add({}, prometheus::Histogram::BucketBoundaries{
                                           0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                                           5, 10, 30, 60, 300, 1800})) {}

  prometheus::Family<prometheus::Gauge>& jobs;
  prometheus::Family<prometheus::Counter>& finished;
  prometheus::Family<prometheus::Gauge>& pending;
  prometheus::Family<prometheus::Gauge>& gpus;
  prometheus::Family<prometheus::Gauge>& gpus_allocated;
  prometheus::Family<prometheus::Gauge>& cpu_slots;
  prometheus::Family<prometheus::Gauge>& workers;
  prometheus::Family<prometheus::Counter>& submissions;
  prometheus::Histogram& placement_latency;
  // Label sets set before, so a vanished one is set back to 0 rather than left stale.
  std::set<std::pair<std::string, std::string>> job_labels;
  std::set<std::string> queue_labels;
  std::set<std::string> gpu_labels;
};

Scheduler::Scheduler(JobStore* store, PendingQueue* queue, Liveness* liveness, EventBus* bus,
                     const Clock* clock, SchedulerOptions options, prometheus::Registry* registry)
    : store_(store),
      queue_(queue),
      liveness_(liveness),
      bus_(bus),
      clock_(clock),
      options_(options),
      metrics_(registry ? std::make_unique<Metrics>(*registry) : nullptr) {}

Scheduler::~Scheduler() { Stop(); }

absl::Status Scheduler::Start() {
  auto active = store_->ListActiveJobs();
  if (!active.ok()) return active.status();
  auto workers = store_->ListWorkers();
  if (!workers.ok()) return workers.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = clock_->NowMs();
    for (Worker& w : *workers) {
      // Until it reconnects, a worker holds its placements but takes no new ones.
      cluster_.UpsertWorker(w);
      cluster_.SetWorkerState(w.id, WorkerState::kLost);
      if (w.state == WorkerState::kReady) {
        // One full timeout to reconnect after our restart.
        w.last_heartbeat_ms = now;
        (void)liveness_->Beat(w.id, options_.heartbeat_timeout_ms);
      }
      workers_[w.id] = std::move(w);
    }
    std::vector<QueueEntry> entries;
    for (Job& job : *active) {
      if (!job.placement.empty()) {
        if (auto s = cluster_.Allocate(job.placement); !s.ok()) {
          RM_LOG(kError) << "placement of " << job.id << " conflicts on load: " << s;
        }
        trackers_[job.id] = RankTracker(static_cast<int32_t>(job.placement.size()));
      }
      if (job.state == JobState::kPending) {
        entries.push_back({job.id, job.spec.priority, job.seq});
        pending_since_ms_[job.id] = now;
      }
      jobs_[job.id] = std::move(job);
    }
    if (auto s = queue_->Rebuild(entries); !s.ok()) {
      RM_LOG(kWarning) << "pending queue not rebuilt yet: " << s;
    }
    RM_LOG(kInfo) << "loaded " << jobs_.size() << " live jobs (" << entries.size()
                  << " pending) and " << workers_.size() << " workers";
    UpdateGaugesLocked();
  }
  SubscribeIfNeeded();
  loop_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

void Scheduler::Wake() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    wake_ = true;
  }
  loop_cv_.notify_all();
}

void Scheduler::Loop() {
  while (true) {
    const auto pass_start = std::chrono::steady_clock::now();
    Pass();
    std::unique_lock<std::mutex> lock(loop_mu_);
    if (loop_cv_.wait_until(lock, pass_start + std::chrono::milliseconds(options_.min_pass_gap_ms),
                            [this] { return stopping_; })) {
      return;
    }
    loop_cv_.wait_for(lock, std::chrono::milliseconds(options_.pass_interval_ms),
                      [this] { return wake_ || stopping_; });
    if (stopping_) return;
    wake_ = false;
  }
}

void Scheduler::SubscribeIfNeeded() {
  if (subscribed_) return;
  auto s = bus_->Subscribe([this](const JobEvent& e) { OnBusEvent(e); });
  subscribed_ = s.ok();
  if (!s.ok()) RM_LOG(kWarning) << "event bus not subscribed yet (watchers poll Postgres): " << s;
}

void Scheduler::Pass() {
  SubscribeIfNeeded();
  std::lock_guard<std::mutex> lock(mu_);
  CheckQueueLocked();
  SweepWorkersLocked();
  CheckDeadlinesLocked();
  PlaceLocked();
  UpdateGaugesLocked();
}

void Scheduler::CheckQueueLocked() {
  auto intact = queue_->Intact();
  if (!intact.ok() || *intact) return;
  RM_LOG(kWarning) << "pending queue lost its contents (Redis flushed or restarted); rebuilding";
  std::vector<QueueEntry> entries;
  for (const auto& [id, job] : jobs_) {
    if (job.state == JobState::kPending) entries.push_back({id, job.spec.priority, job.seq});
  }
  if (auto s = queue_->Rebuild(entries); !s.ok()) {
    RM_LOG(kWarning) << "queue rebuild failed: " << s;
    return;
  }
  capacity_grew_ = true;  // the next pass reads the rebuilt queue whole
  // Heartbeat keys went with it: connected workers get a fresh lease; others must reconnect.
  for (const auto& [id, link] : links_) (void)liveness_->Beat(id, options_.heartbeat_timeout_ms);
}

void Scheduler::SweepWorkersLocked() {
  std::vector<std::string> ready;
  for (const auto& [id, w] : workers_) {
    if (w.state == WorkerState::kReady) ready.push_back(id);
  }
  if (ready.empty()) return;
  auto alive = liveness_->Alive(ready);
  if (!alive.ok()) {
    // Without Redis nobody can tell; losing every worker on a Redis outage would be worse.
    RM_LOG(kWarning) << "liveness unknown: " << alive.status();
    return;
  }
  const int64_t now = clock_->NowMs();
  for (const std::string& id : ready) {
    if (alive->count(id) > 0) continue;
    // A key can also vanish with a Redis flush or restart, before the queue's rebuild notices;
    // a heartbeat this process saw within the timeout proves the worker alive.
    if (now - workers_[id].last_heartbeat_ms < options_.heartbeat_timeout_ms) {
      (void)liveness_->Beat(id, options_.heartbeat_timeout_ms);
      continue;
    }
    MarkLostLocked(id, absl::StrCat("no heartbeat for ", options_.heartbeat_timeout_ms, " ms"));
  }
}

void Scheduler::MarkLostLocked(const std::string& worker_id, const std::string& why) {
  Worker& w = workers_[worker_id];
  RM_LOG(kWarning) << "worker " << worker_id << " lost: " << why;
  w.state = WorkerState::kLost;
  if (auto s = store_->UpsertWorker(w); !s.ok()) RM_LOG(kWarning) << "store worker: " << s;
  cluster_.SetWorkerState(worker_id, WorkerState::kLost);
  if (auto it = links_.find(worker_id); it != links_.end()) {
    it->second->Close();
    links_.erase(it);
  }
  FailJobsOnWorkerLocked(worker_id, absl::StrCat("worker ", worker_id, " lost (", why, ")"),
                         nullptr);
}

// Fails every live attempt with a rank on `worker_id`, except ranks listed in `held`.
void Scheduler::FailJobsOnWorkerLocked(
    const std::string& worker_id, const std::string& reason,
    const std::set<std::tuple<std::string, int32_t, int32_t>>* held) {
  std::vector<std::pair<std::string, std::string>> failed;
  for (const auto& [id, job] : jobs_) {
    for (const RankPlacement& r : job.placement) {
      if (r.worker_id != worker_id) continue;
      if (held && held->count({id, job.attempt, r.rank})) continue;
      failed.emplace_back(id, held ? absl::StrCat(reason, ": rank ", r.rank, " is gone") : reason);
      break;
    }
  }
  for (const auto& [id, why] : failed) {
    if (auto s = CommitLocked(id, {JobInput::Kind::kFailed, why}); !s.ok()) {
      RM_LOG(kError) << "failing " << id << ": " << s;
    }
  }
}

void Scheduler::CheckDeadlinesLocked() {
  const int64_t now = clock_->NowMs();
  std::vector<std::string> expired;
  for (const auto& [id, job] : jobs_) {
    if (job.spec.max_runtime_seconds > 0 && job.started_at_ms > 0 &&
        now - job.started_at_ms > job.spec.max_runtime_seconds * 1000) {
      expired.push_back(id);
    }
  }
  for (const std::string& id : expired) {
    const Job& job = jobs_[id];
    auto s = CommitLocked(id, {JobInput::Kind::kDeadlineExceeded,
                               absl::StrCat("ran past max_runtime_seconds (",
                                            job.spec.max_runtime_seconds, " s)")});
    if (!s.ok()) RM_LOG(kError) << "deadline of " << id << ": " << s;
  }
}

void Scheduler::PlaceLocked() {
  const int64_t now = clock_->NowMs();
  if (!capacity_grew_ && now - last_full_pass_ms_ < 5000) {
    PlaceNewlyPendingLocked();
    return;
  }
  capacity_grew_ = false;
  newly_pending_.clear();
  last_full_pass_ms_ = now;
  std::vector<std::string> order;
  auto listed = queue_->List();
  std::set<std::string> seen;
  if (listed.ok()) {
    for (const std::string& id : *listed) {
      auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second.state != JobState::kPending) {
        (void)queue_->Remove(id);  // stale entry from an earlier life
        continue;
      }
      order.push_back(id);
      seen.insert(id);
    }
  }
  // A pending job missing from the queue (a push lost to a Redis outage) is put back; if Redis
  // cannot be read at all, the same order is derived here.
  std::vector<const Job*> missing;
  for (const auto& [id, job] : jobs_) {
    if (job.state == JobState::kPending && seen.count(id) == 0) missing.push_back(&job);
  }
  std::sort(missing.begin(), missing.end(), [](const Job* a, const Job* b) {
    return a->spec.priority != b->spec.priority ? a->spec.priority > b->spec.priority
                                                : a->seq < b->seq;
  });
  for (const Job* job : missing) {
    if (listed.ok()) (void)queue_->Push({job->id, job->spec.priority, job->seq});
    order.push_back(job->id);
  }
  if (!missing.empty() && listed.ok()) {
    // They belong in priority order with the rest; the next pass has it.
    Wake();
  }

  TryPlaceLocked(order);
}

void Scheduler::PlaceNewlyPendingLocked() {
  std::vector<const Job*> fresh;
  for (const std::string& id : newly_pending_) {
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.state == JobState::kPending) fresh.push_back(&it->second);
  }
  newly_pending_.clear();
  std::sort(fresh.begin(), fresh.end(), [](const Job* a, const Job* b) {
    return a->spec.priority != b->spec.priority ? a->spec.priority > b->spec.priority
                                                : a->seq < b->seq;
  });
  std::vector<std::string> order;
  for (const Job* job : fresh) order.push_back(job->id);
  TryPlaceLocked(order);
}

void Scheduler::TryPlaceLocked(const std::vector<std::string>& order) {
  // Greedy in policy order: a job that does not fit is skipped, so smaller jobs behind it may
  // start (fair share and reservations come later).
  for (const std::string& id : order) {
    Job& job = jobs_[id];
    PlacementDecision d = cluster_.Place(RequestOf(job.spec));
    if (d.kind == PlacementDecision::Kind::kPlaced) {
      std::set<std::string> names;
      for (const auto& r : d.ranks) names.insert(r.worker_id);
      JobInput input{JobInput::Kind::kPlaced,
                     absl::StrCat("placed on ", absl::StrJoin(names, ",")), 0, d.ranks,
                     NewToken()};
      if (auto s = CommitLocked(id, input); !s.ok()) {
        RM_LOG(kError) << "placing " << id << ": " << s;
      }
      continue;
    }
    // Derived state, recomputed every pass and served from memory: writing it to Postgres
    // here would put a commit per waiting job under the lock every submit waits on.
    job.pending_reason = d.kind == PlacementDecision::Kind::kInfeasible
                             ? absl::StrCat("unschedulable: ", d.reason)
                             : d.reason;
  }
}

absl::Status Scheduler::CommitLocked(const std::string& job_id, const JobInput& input) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " is not live"));
  Job next = it->second;
  const JobState from = next.state;
  const int64_t now = clock_->NowMs();
  auto t = ApplyInput(next, input, now);
  if (!t.ok()) return t.status();
  if (input.kind == JobInput::Kind::kPlaced) {
    // Never hand out GPUs twice, even if a store write below fails.
    if (auto s = cluster_.Allocate(next.placement); !s.ok()) return s;
  }
  if (auto s = store_->UpdateJob(next, t->event); !s.ok()) {
    if (input.kind == JobInput::Kind::kPlaced) cluster_.Release(next.placement);
    return s;
  }
  // Stored: now act on it.
  cluster_.Release(t->released);
  if (!t->released.empty()) capacity_grew_ = true;
  std::set<std::string> stop_on;
  for (const auto& r : t->released) stop_on.insert(r.worker_id);
  for (const std::string& w : stop_on) {
    auto link = links_.find(w);
    if (link != links_.end()) link->second->SendStop(job_id, it->second.attempt, t->event.reason);
  }
  if (from == JobState::kPending && next.state != JobState::kPending) {
    (void)queue_->Remove(job_id);
    if (metrics_ && next.state == JobState::kStarting) {
      metrics_->placement_latency.Observe(
          static_cast<double>(now - pending_since_ms_[job_id]) / 1000.0);
    }
    pending_since_ms_.erase(job_id);
  }
  if (next.state == JobState::kStarting) {
    trackers_[job_id] = RankTracker(static_cast<int32_t>(next.placement.size()));
    std::set<std::string> sent;
    for (const auto& r : next.placement) {
      if (!sent.insert(r.worker_id).second) continue;
      auto link = links_.find(r.worker_id);
      if (link != links_.end()) link->second->SendAssignment(next);
    }
  }
  if (next.state == JobState::kPending) {
    trackers_.erase(job_id);
    newly_pending_.insert(job_id);
    pending_since_ms_[job_id] = now;
    if (auto s = queue_->Push({job_id, next.spec.priority, next.seq}); !s.ok()) {
      RM_LOG(kWarning) << "queue push of " << job_id << " (healed on a later pass): " << s;
    }
    Wake();
  }
  RM_LOG(kInfo) << "job " << job_id << " " << JobStateName(from) << " -> "
                << JobStateName(next.state) << ": " << t->event.reason;
  if (IsTerminal(next.state)) {
    if (metrics_) {
      metrics_->finished.Add({{"state", JobStateName(next.state)}, {"queue", next.spec.queue}})
          .Increment();
    }
    trackers_.erase(job_id);
    pending_since_ms_.erase(job_id);
    jobs_.erase(it);
    Wake();  // capacity came back
  } else {
    it->second = std::move(next);
  }
  if (auto s = bus_->Publish(t->event); !s.ok()) {
    RM_LOG(kWarning) << "event fan-out (watchers fall back to Postgres): " << s;
  }
  return absl::OkStatus();
}

absl::StatusOr<CreateJobResult> Scheduler::Submit(const JobSpec& spec,
                                                  const std::string& request_id) {
  if (auto s = ValidateRequestId(request_id); !s.ok()) return s;
  auto valid = ValidateJobSpec(spec);
  if (!valid.ok()) return valid.status();
  const int64_t now = clock_->NowMs();
  Job job;
  job.id = NewJobId();
  job.spec = *std::move(valid);
  job.request_id = request_id;
  job.state = JobState::kPending;
  job.created_at_ms = job.updated_at_ms = now;
  job.last_event_seq = 1;
  JobEvent event{job.id, 1, JobState::kPending, 0, "submitted", 0, now};
  auto created = store_->CreateJob(job, event);
  if (!created.ok()) return created.status();
  if (created->existing) {
    if (!(created->job.spec == job.spec)) {
      return absl::AlreadyExistsError(absl::StrCat("request_id ", request_id,
                                                   " was already used for a different spec (job ",
                                                   created->job.id, ")"));
    }
    return created;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[created->job.id] = created->job;
    newly_pending_.insert(created->job.id);
    pending_since_ms_[created->job.id] = now;
    if (auto s = queue_->Push({created->job.id, job.spec.priority, created->job.seq}); !s.ok()) {
      RM_LOG(kWarning) << "queue push of " << created->job.id << " (healed on a later pass): " << s;
    }
    if (metrics_) metrics_->submissions.Add({{"queue", job.spec.queue}}).Increment();
  }
  if (auto s = bus_->Publish(event); !s.ok()) RM_LOG(kWarning) << "event fan-out: " << s;
  Wake();
  return created;
}

absl::StatusOr<Job> Scheduler::GetJob(const std::string& job_id) {
  if (auto s = ValidateJobId(job_id); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job_id);
    if (it != jobs_.end()) return it->second;
  }
  return store_->GetJob(job_id);
}

absl::StatusOr<std::vector<Job>> Scheduler::ListJobs(const JobFilter& filter) {
  JobFilter f = filter;
  if (f.limit == 0) f.limit = 100;
  if (f.limit < 0 || f.limit > kMaxListLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: must be 1..", kMaxListLimit, " (0 means 100), got ", f.limit));
  }
  if (!f.queue.empty()) {
    if (auto s = ValidateQueueName(f.queue); !s.ok()) return s;
  }
  auto jobs = store_->ListJobs(f);
  if (!jobs.ok()) return jobs;
  std::lock_guard<std::mutex> lock(mu_);
  for (Job& job : *jobs) {
    auto it = jobs_.find(job.id);
    if (it != jobs_.end()) job = it->second;  // fresher than the row (pending reason)
  }
  return jobs;
}

absl::StatusOr<Job> Scheduler::Cancel(const std::string& job_id, const std::string& reason) {
  if (auto s = ValidateJobId(job_id); !s.ok()) return s;
  if (reason.size() > kMaxReasonBytes) {
    return absl::InvalidArgumentError(absl::StrCat("reason: must be at most ", kMaxReasonBytes,
                                                   " bytes, got ", reason.size()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (jobs_.count(job_id) == 0) {
    auto stored = store_->GetJob(job_id);
    if (!stored.ok()) return stored.status();
    if (IsTerminal(stored->state)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job_id, " already ended (", JobStateName(stored->state), ")"));
    }
    jobs_[job_id] = *stored;
  }
  const std::string why = reason.empty() ? "cancelled by request" : absl::StrCat("cancelled: ", reason);
  if (auto s = CommitLocked(job_id, {JobInput::Kind::kCancel, why}); !s.ok()) return s;
  return store_->GetJob(job_id);
}

absl::Status Scheduler::Watch(const std::string& job_id,
                              const std::function<bool(const JobEvent&)>& send,
                              const std::function<bool()>& cancelled) {
  if (auto s = ValidateJobId(job_id); !s.ok()) return s;
  if (auto job = GetJob(job_id); !job.ok()) return job.status();
  Watcher watcher;
  watcher.job_id = job_id;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watchers_.push_back(&watcher);
  }
  int64_t last = 0;
  bool done = false;
  absl::Status status;
  // Sends stored events after `last`; the store is the truth, the bus only a doorbell.
  auto catch_up = [&]() {
    auto events = store_->ListEvents(job_id, last);
    if (!events.ok()) return events.status();
    for (const JobEvent& e : *events) {
      if (!send(e)) {
        done = true;
        break;
      }
      last = e.seq;
      if (IsTerminal(e.state)) {
        done = true;
        break;
      }
    }
    return absl::OkStatus();
  };
  status = catch_up();
  while (status.ok() && !done && !cancelled()) {
    std::vector<JobEvent> fresh;
    {
      std::unique_lock<std::mutex> lock(watch_mu_);
      watcher.cv.wait_for(lock, std::chrono::seconds(1), [&] { return !watcher.events.empty(); });
      fresh.swap(watcher.events);
    }
    bool gap = fresh.empty();  // a quiet second: poll, in case the bus is down
    for (const JobEvent& e : fresh) {
      if (e.seq <= last) continue;
      if (e.seq != last + 1) {
        gap = true;
        break;
      }
      if (!send(e)) {
        done = true;
        break;
      }
      last = e.seq;
      if (IsTerminal(e.state)) {
        done = true;
        break;
      }
    }
    if (!done && gap) status = catch_up();
  }
  std::lock_guard<std::mutex> lock(watch_mu_);
  watchers_.remove(&watcher);
  return status;
}

void Scheduler::OnBusEvent(const JobEvent& event) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  for (Watcher* w : watchers_) {
    if (w->job_id != event.job_id) continue;
    w->events.push_back(event);
    w->cv.notify_all();
  }
}

absl::Status Scheduler::RegisterWorker(const Worker& worker, const std::vector<HeldRank>& held,
                                       std::shared_ptr<WorkerLink> link) {
  if (auto s = ValidateWorker(worker); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowMs();
  Worker w = worker;
  w.state = WorkerState::kReady;
  w.registered_at_ms = now;
  w.last_heartbeat_ms = now;
  if (auto s = store_->UpsertWorker(w); !s.ok()) return s;
  if (auto s = liveness_->Beat(w.id, options_.heartbeat_timeout_ms); !s.ok()) {
    RM_LOG(kWarning) << "liveness of " << w.id << ": " << s;
  }
  cluster_.UpsertWorker(w);
  cluster_.SetWorkerState(w.id, WorkerState::kReady);
  capacity_grew_ = true;
  workers_[w.id] = w;
  links_[w.id] = link;
  RM_LOG(kInfo) << "worker " << w.id << " registered at " << w.address << ":" << w.port << " with "
                << w.gpus.size() << " GPUs, " << w.cpu_slots << " CPU slots, " << held.size()
                << " held ranks";

  // Reconcile what the worker holds with what we placed there.
  std::set<std::tuple<std::string, int32_t, int32_t>> held_here;
  for (const HeldRank& h : held) {
    auto it = jobs_.find(h.job_id);
    bool placed_here = false;
    if (it != jobs_.end() && it->second.attempt == h.attempt) {
      for (const auto& r : it->second.placement) {
        placed_here = placed_here || (r.rank == h.rank && r.worker_id == w.id);
      }
    }
    if (!placed_here) {
      link->SendStop(h.job_id, h.attempt, "no live attempt holds this rank");
      continue;
    }
    held_here.insert({h.job_id, h.attempt, h.rank});
  }
  FailJobsOnWorkerLocked(w.id, absl::StrCat("worker ", w.id, " re-registered"), &held_here);
  for (const HeldRank& h : held) {
    if (held_here.count({h.job_id, h.attempt, h.rank}) == 0) continue;
    RankReport report{h.job_id, h.attempt, h.rank, RankReport::Kind::kStarted, 0, 0, ""};
    HandleRankLocked(w.id, report);
    if (h.exited) {
      report.kind = RankReport::Kind::kExited;
      report.exit_code = h.exit_code;
      HandleRankLocked(w.id, report);
    }
  }
  Wake();
  return absl::OkStatus();
}

void Scheduler::Heartbeat(const std::string& worker_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = workers_.find(worker_id);
    if (it == workers_.end() || it->second.state != WorkerState::kReady) return;
    it->second.last_heartbeat_ms = clock_->NowMs();
  }
  if (auto s = liveness_->Beat(worker_id, options_.heartbeat_timeout_ms); !s.ok()) {
    RM_LOG(kWarning) << "heartbeat of " << worker_id << " not recorded: " << s;
  }
}

void Scheduler::ReportRank(const std::string& worker_id, const RankReport& report) {
  std::lock_guard<std::mutex> lock(mu_);
  HandleRankLocked(worker_id, report);
}

void Scheduler::HandleRankLocked(const std::string& worker_id, const RankReport& report) {
  auto it = jobs_.find(report.job_id);
  if (it == jobs_.end() || it->second.attempt != report.attempt ||
      it->second.state == JobState::kPending) {
    return;  // an earlier attempt or an ended job: its stop was already sent
  }
  Job& job = it->second;
  bool placed_here = false;
  for (const auto& r : job.placement) {
    placed_here = placed_here || (r.rank == report.rank && r.worker_id == worker_id);
  }
  if (!placed_here) {
    RM_LOG(kWarning) << "worker " << worker_id << " reported rank " << report.rank << " of "
                     << job.id << ", which is not placed there";
    return;
  }
  RankTracker& tracker = trackers_[job.id];
  absl::Status s;
  switch (report.kind) {
    case RankReport::Kind::kStarted:
      if (tracker.OnStarted(report.rank) && job.state == JobState::kStarting) {
        s = CommitLocked(job.id, {JobInput::Kind::kAllStarted,
                                  absl::StrCat("all ", job.placement.size(), " ranks started")});
      }
      break;
    case RankReport::Kind::kExited:
      if (report.exit_code == 0 && report.signal == 0) {
        if (tracker.OnSucceeded(report.rank)) {
          s = CommitLocked(job.id, {JobInput::Kind::kAllSucceeded,
                                    absl::StrCat("all ", job.placement.size(), " ranks exited 0")});
        }
      } else if (report.signal != 0) {
        s = CommitLocked(job.id, {JobInput::Kind::kFailed,
                                  absl::StrCat("rank ", report.rank, " on ", worker_id,
                                               " was killed by signal ", report.signal),
                                  128 + report.signal});
      } else {
        s = CommitLocked(job.id, {JobInput::Kind::kFailed,
                                  absl::StrCat("rank ", report.rank, " on ", worker_id,
                                               " exited with code ", report.exit_code),
                                  report.exit_code});
      }
      break;
    case RankReport::Kind::kLaunchFailed:
      s = CommitLocked(job.id, {JobInput::Kind::kFailed,
                                absl::StrCat("rank ", report.rank, " could not start on ",
                                             worker_id, ": ", report.message.substr(0, 512))});
      break;
  }
  if (!s.ok()) RM_LOG(kError) << "rank report for " << report.job_id << ": " << s;
}

void Scheduler::Disconnected(const std::string& worker_id, const WorkerLink* link) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = links_.find(worker_id);
  if (it == links_.end() || it->second.get() != link) return;  // replaced by a newer stream
  links_.erase(it);
  cluster_.SetWorkerState(worker_id, WorkerState::kLost);
  RM_LOG(kInfo) << "worker " << worker_id << " disconnected; lost if it does not return within "
                << options_.heartbeat_timeout_ms << " ms";
}

std::vector<WorkerView> Scheduler::ListWorkers() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkerView> out;
  for (const auto& [id, w] : workers_) {
    out.push_back({w, cluster_.AllocatedGpus(id), cluster_.CpuSlotsUsed(id)});
  }
  return out;
}

void Scheduler::UpdateGaugesLocked() {
  if (!metrics_) return;
  std::map<std::pair<std::string, std::string>, int> jobs;
  std::map<std::string, int> pending;
  for (const auto& [id, job] : jobs_) {
    ++jobs[{JobStateName(job.state), job.spec.queue}];
    if (job.state == JobState::kPending) ++pending[job.spec.queue];
    metrics_->queue_labels.insert(job.spec.queue);
  }
  for (const auto& key : metrics_->job_labels) jobs.try_emplace(key, 0);
  for (const auto& [key, n] : jobs) {
    metrics_->job_labels.insert(key);
    metrics_->jobs.Add({{"state", key.first}, {"queue", key.second}}).Set(n);
  }
  for (const auto& q : metrics_->queue_labels) {
    metrics_->pending.Add({{"queue", q}}).Set(pending.count(q) ? pending[q] : 0);
  }
  auto totals = cluster_.GpuTotals();
  for (const auto& type : metrics_->gpu_labels) totals.try_emplace(type);
  for (const auto& [type, t] : totals) {
    metrics_->gpu_labels.insert(type);
    metrics_->gpus.Add({{"gpu_type", type}}).Set(t.total);
    metrics_->gpus_allocated.Add({{"gpu_type", type}}).Set(t.allocated);
  }
  auto cpu = cluster_.CpuTotals();
  metrics_->cpu_slots.Add({{"kind", "total"}}).Set(cpu.total);
  metrics_->cpu_slots.Add({{"kind", "allocated"}}).Set(cpu.allocated);
  int ready = 0;
  for (const auto& [id, w] : workers_) ready += w.state == WorkerState::kReady;
  metrics_->workers.Add({{"state", "READY"}}).Set(ready);
  metrics_->workers.Add({{"state", "LOST"}}).Set(static_cast<double>(workers_.size()) - ready);
}

std::string Scheduler::NewJobId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrCat("j-", absl::Hex(rng() & 0xffffffffffffULL, absl::kZeroPad12));
}

std::string Scheduler::NewToken() {
  std::random_device rd;  // /dev/urandom: a token must not be guessable
  std::string token;
  for (int i = 0; i < 4; ++i) {
    uint64_t v = (static_cast<uint64_t>(rd()) << 32) | rd();
    absl::StrAppend(&token, absl::Hex(v, absl::kZeroPad16));
  }
  return token;
}

}  // namespace ringmaster::scheduler
