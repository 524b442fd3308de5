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
#include "common/utf8.h"
#include "core/queue_order.h"
#include "core/validation.h"

namespace ringmaster::scheduler {

namespace {
constexpr size_t kMaxReasonBytes = 256;
}  // namespace

Scheduler::Scheduler(JobStore* store, PendingQueue* queue, Liveness* liveness,
                     const Clock* clock, SchedulerOptions options, prometheus::Registry* registry)
    : store_(store),
      liveness_(liveness),
      clock_(clock),
      options_(std::move(options)),
      metrics_(registry ? std::make_unique<SchedulerMetrics>(*registry) : nullptr),
      watch_hub_(store, options_.max_watchers),
      answers_(options_.write_wait_ms),
      writer_(store, metrics_.get(),
              {.max_batch = options_.max_batch,
               .retry_min_ms = options_.retry_min_ms,
               .retry_max_ms = options_.retry_max_ms,
               .submit_writers = options_.submit_writers,
               .on_fenced = options_.on_fenced},
              [this](std::vector<Write>& batch, const CommitResult& result) {
                AfterCommit(batch, result);
              }),
      mirror_(queue, [this] { return StoredPending(); }, [this] { BeatConnected(); }),
      aside_(store, liveness, options_.heartbeat_timeout_ms, options_.background_passes) {}

std::vector<QueueEntry> Scheduler::StoredPending() {
  std::vector<QueueEntry> entries;
  std::lock_guard<std::mutex> view(view_mu_);
  for (const auto& [id, job] : stored_) {
    if (job.state == JobState::kPending) entries.push_back({id, job.spec.priority, job.seq});
  }
  return entries;
}

void Scheduler::BeatConnected() {
  std::vector<std::string> connected;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, link] : links_) connected.push_back(id);
  }
  for (const std::string& id : connected) {
    (void)liveness_->Beat(id, options_.heartbeat_timeout_ms);
  }
}

Scheduler::~Scheduler() { Stop(); }

absl::Status Scheduler::Start() {
  // The epoch first: from here on the previous leader can write nothing, so what we load next
  // is final.
  auto epoch = store_->TakeLeadership();
  if (!epoch.ok()) return epoch.status();
  epoch_ = *epoch;
  auto active = store_->ListActiveJobs();
  if (!active.ok()) return active.status();
  auto workers = store_->ListWorkers();
  if (!workers.ok()) return workers.status();
  auto queues = store_->ListQueues();
  if (!queues.ok()) return queues.status();
  auto volumes = store_->ListVolumes();
  if (!volumes.ok()) return volumes.status();
  auto usage = store_->ListQueueUsage();
  if (!usage.ok()) return usage.status();
  auto baselines = store_->ListCheckBaselines();
  if (!baselines.ok()) return baselines.status();
  // The ends of the jobs that live jobs wait for and that are not live themselves.
  std::vector<std::pair<std::string, JobState>> named_ends;
  {
    std::set<std::string> live, read;
    for (const Job& job : *active) live.insert(job.id);
    for (const Job& job : *active) {
      for (const Dependency& d : job.spec.after) {
        if (live.contains(d.job_id) || !read.insert(d.job_id).second) continue;
        auto named = store_->GetJob(d.job_id);
        if (named.ok() && IsTerminal(named->state)) {
          named_ends.emplace_back(d.job_id, named->state);
        } else if (!named.ok() && !absl::IsNotFound(named.status())) {
          return named.status();
        }
      }
    }
  }
  // Where each live array's tasks are.
  std::vector<std::pair<std::string, ArrayProgress>> arrays;
  for (const Job& job : *active) {
    if (!job.spec.array) continue;
    auto tally = store_->TallyArray(job.id);
    if (!tally.ok()) return tally.status();
    arrays.emplace_back(job.id, ProgressOf(*job.spec.array, *tally));
  }
  std::vector<std::string> beats;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = clock_->NowMs();
    for (auto& [id, progress] : arrays) arrays_[id] = std::move(progress);
    for (Queue& q : *queues) queues_[q.name] = std::move(q);
    for (Volume& v : *volumes) volumes_[v.name] = std::move(v);
    for (const QueueUsage& u : *usage) usage_ms_[{u.queue, u.resource}] = u.used_ms;
    for (CheckBaseline& b : *baselines) {
      if (metrics_) metrics_->check_baseline.Add({{"shape", b.shape}}).Set(b.busbw_gbps);
      baselines_[b.shape] = std::move(b);
    }
    for (Worker& w : *workers) {
      // Until it reconnects, a worker holds its placements but takes no new ones.
      cluster_.UpsertWorker(w);
      cluster_.SetWorkerState(w.id, WorkerState::kLost);
      cluster_.SetWorkerHealthy(w.id, w.unhealthy_reason.empty());
      if (w.state == WorkerState::kReady) {
        // One full timeout to reconnect after our restart.
        w.last_heartbeat_ms = now;
        beats.push_back(w.id);
      }
      workers_[w.id] = std::move(w);
    }
    for (Job& job : *active) {
      if (!job.placement.empty()) {
        if (auto s = cluster_.Allocate(job.placement); !s.ok()) {
          RM_LOG(kError) << "placement of " << job.id << " conflicts on load: " << s;
        }
        trackers_[job.id] = RankTracker(static_cast<int32_t>(job.placement.size()));
      }
      if (job.state == JobState::kPending) pending_since_ms_[job.id] = now;
      SetJobLocked(job);
    }
    for (const auto& [id, state] : named_ends) deps_.Remember(id, state);
    {
      std::lock_guard<std::mutex> view(view_mu_);
      for (const auto& [id, job] : jobs_) stored_[id] = job;
    }
    RM_LOG(kInfo) << "leader epoch " << epoch_ << ": loaded " << queues_.size() << " queues, "
                  << jobs_.size() << " live jobs and " << workers_.size() << " workers";
    UpdateGaugesLocked();
  }
  for (const std::string& id : beats) (void)liveness_->Beat(id, options_.heartbeat_timeout_ms);
  writer_.Start(epoch_);
  mirror_.Start();
  answers_.Start();
  aside_.Start();
  if (options_.background_passes) {
    loop_ = std::thread([this] { Loop(); });
  }
  return absl::OkStatus();
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  writer_.Stop();
  mirror_.Stop();
  aside_.Stop();
  // Last: whatever submit is still waiting (its write will not be stored now) is answered.
  answers_.Stop();
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
    RunPass();
    // A pass holds mu_ throughout, and a full one takes time in proportion to the backlog: at
    // least as long again is left to the writers and the workers' messages, so each pass finds
    // more freed capacity to place instead of rescanning the backlog for a little of it.
    const auto took = std::chrono::steady_clock::now() - pass_start;
    const auto gap = std::max<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(options_.min_pass_gap_ms), 2 * took);
    std::unique_lock<std::mutex> lock(loop_mu_);
    if (loop_cv_.wait_until(lock, pass_start + gap, [this] { return stopping_; })) {
      return;
    }
    loop_cv_.wait_for(lock, std::chrono::milliseconds(options_.pass_interval_ms),
                      [this] { return wake_ || stopping_; });
    if (stopping_) return;
    wake_ = false;
  }
}

void Scheduler::RunPass() {
  if (writer_.fenced()) return;
  // Liveness is read from Redis before the lock, and renewed after it.
  std::vector<std::string> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, w] : workers_) {
      if (w.state == WorkerState::kReady) ready.push_back(id);
    }
  }
  std::optional<std::set<std::string>> alive;
  if (!ready.empty()) {
    auto read = liveness_->Alive(ready);
    if (read.ok()) {
      alive = std::move(*read);
    } else {
      // Without Redis nobody can tell; losing every worker on a Redis outage would be worse.
      RM_LOG(kWarning) << "liveness unknown: " << read.status();
    }
  }
  std::vector<std::string> beats;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (alive.has_value()) SweepWorkersLocked(*alive, &beats);
    CheckDeadlinesLocked();
    CheckWatchesLocked();
    const int64_t now = clock_->NowMs();
    std::vector<std::pair<std::string, int32_t>> overdue;
    for (const auto& [key, d] : draining_) {
      if (now >= d.deadline_ms) overdue.push_back(key);
    }
    for (const auto& key : overdue) {
      RM_LOG(kWarning) << "job " << key.first << " attempt " << key.second
                       << ": preempted ranks not all reported gone by the grace period's end; "
                          "releasing their GPUs";
      ReleaseDrainedLocked(key);
    }
    ProbateLocked(now);
    PlaceLocked();
    UpdateGaugesLocked();
  }
  for (const std::string& id : beats) (void)liveness_->Beat(id, options_.heartbeat_timeout_ms);
}

void Scheduler::ProbateLocked(int64_t now) {
  // Without checks nothing could ever clear a worker on probation; with them, only checked
  // jobs are placed on it, and their check judges it.
  if (!options_.health_check || options_.unhealthy_recheck_ms <= 0) return;
  for (const auto& [id, w] : workers_) {
    if (w.unhealthy_reason.empty() || cluster_.OnProbation(id)) continue;
    const int64_t since = unhealthy_since_ms_.try_emplace(id, now).first->second;
    if (now - since < options_.unhealthy_recheck_ms) continue;
    cluster_.SetWorkerProbation(id, true);
    capacity_grew_ = true;
    RM_LOG(kInfo) << "worker " << id << " on probation after " << (now - since) / 1000
                  << " s unhealthy: it takes checked jobs, and a passing check clears it";
  }
}

void Scheduler::ClearHealthLocked(Worker& w, const std::string& why) {
  RM_LOG(kInfo) << "worker " << w.id << " is healthy again (" << why
                << "; was: " << w.unhealthy_reason << ")";
  w.unhealthy_reason.clear();
  unhealthy_since_ms_.erase(w.id);
  cluster_.SetWorkerProbation(w.id, false);
  cluster_.SetWorkerHealthy(w.id, true);
  Write write;
  write.worker = w;
  writer_.Enqueue(std::move(write));
  capacity_grew_ = true;
  UpdateGaugesLocked();
  Wake();
}

void Scheduler::SweepWorkersLocked(const std::set<std::string>& alive,
                                   std::vector<std::string>* beats) {
  const int64_t now = clock_->NowMs();
  std::vector<std::string> lost;
  for (const auto& [id, w] : workers_) {
    if (w.state != WorkerState::kReady || alive.count(id) > 0) continue;
    // A key can also vanish with a Redis flush or restart; a heartbeat this process saw within
    // the timeout proves the worker alive.
    if (now - w.last_heartbeat_ms < options_.heartbeat_timeout_ms) {
      beats->push_back(id);
      continue;
    }
    lost.push_back(id);
  }
  for (const std::string& id : lost) {
    MarkLostLocked(id, absl::StrCat("no heartbeat for ", options_.heartbeat_timeout_ms, " ms"));
  }
}

void Scheduler::MarkLostLocked(const std::string& worker_id, const std::string& why) {
  Worker& w = workers_[worker_id];
  RM_LOG(kWarning) << "worker " << worker_id << " lost: " << why;
  w.state = WorkerState::kLost;
  Write write;
  write.worker = w;
  writer_.Enqueue(std::move(write));
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
  // Only STARTING and RUNNING jobs hold a placement: a registration of each of 1,000 workers
  // must not walk a backlog of pending jobs.
  for (const std::string& id : placed_ids_) {
    const Job& job = jobs_.at(id);
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

void Scheduler::SetJobLocked(const Job& job) {
  auto [it, fresh] = jobs_.try_emplace(job.id);
  if (!fresh) {
    const Job& before = it->second;
    if (--live_counts_[{before.state, before.spec.queue}] == 0) {
      live_counts_.erase({before.state, before.spec.queue});
    }
    if (IsPlaced(before.state)) placed_ids_.erase(job.id);
    live_spec_bytes_ -= SpecBytes(before.spec);
  }
  if (fresh && !job.spec.after.empty()) deps_.Add(job.id, job.spec.after);
  it->second = job;
  live_spec_bytes_ += SpecBytes(job.spec);
  ++live_counts_[{job.state, job.spec.queue}];
  // A RUNNING array holds nothing: its tasks do.
  if (IsPlaced(job.state) && !job.spec.array) placed_ids_.insert(job.id);
}

void Scheduler::EraseJobLocked(std::unordered_map<std::string, Job>::iterator it) {
  const Job& job = it->second;
  if (--live_counts_[{job.state, job.spec.queue}] == 0) {
    live_counts_.erase({job.state, job.spec.queue});
  }
  placed_ids_.erase(job.id);
  live_spec_bytes_ -= SpecBytes(job.spec);
  if (!job.spec.after.empty()) deps_.Remove(job.id, job.spec.after);
  jobs_.erase(it);
}

void Scheduler::CheckDeadlinesLocked() {
  const int64_t now = clock_->NowMs();
  std::vector<std::string> expired;
  for (const std::string& id : placed_ids_) {
    const Job& job = jobs_.at(id);
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

WatchLimits Scheduler::WatchLimitsLocked(const Job& job) const {
  const Queue* queue = nullptr;
  if (auto q = queues_.find(job.spec.queue); q != queues_.end()) queue = &q->second;
  int64_t progress_s = kDefaultProgressTimeoutSeconds;
  if (job.spec.progress_timeout_seconds) {
    progress_s = *job.spec.progress_timeout_seconds;
  } else if (queue != nullptr && queue->progress_timeout_seconds) {
    progress_s = *queue->progress_timeout_seconds;
  }
  return {progress_s * 1000, queue == nullptr ? 0 : queue->idle_timeout_seconds * 1000};
}

void Scheduler::CheckWatchesLocked() {
  const int64_t now = clock_->NowMs();
  std::vector<std::pair<std::string, WatchVerdict>> verdicts;
  for (auto it = watches_.begin(); it != watches_.end();) {
    auto job = jobs_.find(it->first);
    if (job == jobs_.end() ||
        (job->second.state != JobState::kRunning && job->second.state != JobState::kStarting) ||
        job->second.attempt != it->second.attempt) {
      it = watches_.erase(it);
      continue;
    }
    ++it;
  }
  for (const std::string& id : placed_ids_) {
    const Job& job = jobs_.at(id);
    if (job.state != JobState::kRunning) continue;
    // A job that never reported still has a watch: it can be idle.
    auto [w, fresh] = watches_.try_emplace(
        id, Watched{job.attempt, RunWatch(static_cast<int32_t>(job.placement.size()), now)});
    WatchVerdict v = w->second.watch.Judge(WatchLimitsLocked(job), now);
    if (v.kind != WatchVerdict::Kind::kFine) verdicts.emplace_back(id, std::move(v));
  }
  for (auto& [id, v] : verdicts) {
    RM_LOG(kWarning) << "job " << id << ": " << v.reason;
    const bool hung = v.kind == WatchVerdict::Kind::kHung;
    if (metrics_) (hung ? metrics_->hangs_detected : metrics_->idle_reclaimed)->Increment();
    watches_.erase(id);
    auto s = CommitLocked(
        id, {hung ? JobInput::Kind::kFailed : JobInput::Kind::kCancel, std::move(v.reason)});
    if (!s.ok()) RM_LOG(kError) << "watch of " << id << ": " << s;
  }
}

void Scheduler::PlaceLocked() {
  const int64_t now = clock_->NowMs();
  std::set<std::string> stopping;
  for (const auto& [key, d] : draining_) stopping.insert(key.first);
  PassInput in;
  in.queues = &queues_;
  in.now_ms = now;
  in.claims = claims_;
  in.stopping = stopping;
  // A job that waits for others takes part only once they ended as it asks; one that never can
  // is cancelled below.
  std::vector<std::pair<std::string, std::string>> never;
  auto may_run = [&](Job& job) {
    if (job.spec.after.empty()) return true;
    const ArrayProgress* array = nullptr;  // the first live array it waits for
    for (const Dependency& d : job.spec.after) {
      auto a = arrays_.find(d.job_id);
      if (a == arrays_.end()) continue;
      const ArrayProgress& p = a->second;
      if (d.condition == AfterCondition::kSucceeded && p.failed + p.cancelled > 0) {
        // Known before the array ends: it cannot succeed.
        never.emplace_back(job.id, absl::StrCat("array ", d.job_id, " cannot succeed (failed: ",
                                                p.failed, ", cancelled: ", p.cancelled,
                                                "), but this job waits for it to succeed"));
        return false;
      }
      if (array == nullptr) array = &p;
    }
    DependencyVerdict v =
        JudgeDependencies(job.spec.after, [&](const std::string& id) { return StateOfLocked(id); });
    if (v.kind == DependencyVerdict::Kind::kReady) return true;
    if (v.kind == DependencyVerdict::Kind::kNever) {
      never.emplace_back(job.id, std::move(v.reason));
    } else {
      job.pending_reason = std::move(v.reason);
      if (array != nullptr) {
        absl::StrAppend(&job.pending_reason, " (",
                        array->count - array->succeeded - array->failed - array->cancelled, " of ",
                        array->count, " tasks of the array left)");
      }
    }
    return false;
  };
  CreateTasksLocked(may_run);
  const bool incremental = !capacity_grew_ && now - last_full_pass_ms_ < 5000 && !reserved_ &&
                           claims_.empty() && ripe_claims_.empty();
  if (incremental) {
    // Nothing freed up and nothing reserved or claimed: only jobs that became pending since the
    // last pass can fit.
    for (const std::string& id : newly_pending_) {
      auto it = jobs_.find(id);
      if (it != jobs_.end() && it->second.state == JobState::kPending && !stopping.count(id) &&
          !it->second.spec.array && may_run(it->second)) {
        in.pending.push_back(&it->second);
      }
    }
  } else {
    capacity_grew_ = false;
    last_full_pass_ms_ = now;
  }
  for (const std::string& id : placed_ids_) in.placed.push_back(&jobs_.at(id));
  if (!incremental) {
    for (auto& [id, job] : jobs_) {
      if (job.state == JobState::kPending && !stopping.count(id) && !job.spec.array &&
          may_run(job)) {
        in.pending.push_back(&job);
      }
    }
  }
  for (const auto& [key, d] : draining_) in.placed.push_back(&d.held);
  newly_pending_.clear();

  PolicyOptions policy;
  policy.reservations = options_.reservations;
  policy.reservation_window_ms = options_.reservation_window_ms;
  policy.order = options_.queue_order;
  policy.starve_after_ms = options_.starve_after_ms;
  PassResult r = SchedulePass(in, cluster_, policy);
  // Why each job waits: derived state, recomputed every pass and served from memory, never
  // stored. Set before the commits below change jobs_, whose jobs the keys point to (non-const
  // there: the pass only saw them const).
  for (auto& [job, reason] : r.waiting) const_cast<Job*>(job)->pending_reason = std::move(reason);
  for (const std::string& id : ripe_claims_) claims_.erase(id);  // started now, or not here
  ripe_claims_.clear();
  if (!incremental) reserved_ = !r.reservations.empty();
  ledger_ = r.ledger;

  for (const auto& p : r.preemptions) {
    const Job* by = jobs_.count(p.by_job_id) ? &jobs_[p.by_job_id] : nullptr;
    std::string why = absl::StrCat("preempted by ", p.by_job_id);
    if (by != nullptr && p.reason == "reclaim") {
      absl::StrAppend(&why, " (queue ", by->spec.queue, " reclaims its nominal quota)");
    } else if (by != nullptr) {
      absl::StrAppend(&why, " (priority ", by->spec.priority, " in queue ", by->spec.queue, ")");
    }
    preempting_[p.by_job_id].insert(p.job_id);
    if (auto s = CommitLocked(p.job_id, {JobInput::Kind::kPreempted, why}); !s.ok()) {
      RM_LOG(kError) << "preempting " << p.job_id << ": " << s;
      preempting_[p.by_job_id].erase(p.job_id);
      if (preempting_[p.by_job_id].empty()) preempting_.erase(p.by_job_id);
      continue;
    }
    if (metrics_) {
      metrics_->preemptions.Add({{"queue", jobs_.count(p.job_id) ? jobs_[p.job_id].spec.queue : ""},
                                 {"reason", p.reason}})
          .Increment();
    }
  }
  for (auto& [id, ranks] : r.claims) claims_[id] = std::move(ranks);
  for (const auto& start : r.starts) {
    std::set<std::string> names;
    for (const auto& rank : start.ranks) names.insert(rank.worker_id);
    std::string why = absl::StrCat("placed on ", absl::StrJoin(names, ","));
    if (start.borrowing) absl::StrAppend(&why, ", borrowing from the cohort");
    if (start.backfilled) absl::StrAppend(&why, ", backfilled before a reservation");
    claims_.erase(start.job_id);
    if (auto job = jobs_.find(start.job_id); job != jobs_.end()) {
      if (StartsDirectly(job->second.spec)) {
        absl::StrAppend(&why, "; one rank, started without mpirun: no pre-run check");
      }
      // A volume it mounts is gone (deleted outside the scheduler): it cannot run as asked,
      // and must not run without it.
      if (auto mounts = ResolveMounts(job->second.spec, volumes_); !mounts.ok()) {
        if (auto s = CommitLocked(start.job_id, {JobInput::Kind::kUnrunnable,
                                                 std::string(mounts.status().message())});
            !s.ok()) {
          RM_LOG(kError) << "failing " << start.job_id << ": " << s;
        }
        continue;
      }
    }
    JobInput input{JobInput::Kind::kPlaced, why, 0, start.ranks, NewToken()};
    if (auto s = CommitLocked(start.job_id, input); !s.ok()) {
      RM_LOG(kError) << "placing " << start.job_id << ": " << s;
    }
  }
  for (const std::string& id : stopping) {
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.state == JobState::kPending) {
      it->second.pending_reason = "preempted: waiting for its ranks to stop";
    }
  }
  for (const auto& [id, why] : never) {
    if (auto s = CommitLocked(id, {JobInput::Kind::kCancel, why}); !s.ok()) {
      RM_LOG(kError) << "cancelling " << id << ": " << s;
    }
  }
}

void Scheduler::HoldStoppingRankLocked(const Worker& worker, const HeldRank& rank, int64_t now) {
  Draining& d = draining_[{rank.job_id, rank.attempt}];
  for (const RankPlacement& r : d.held.placement) {
    if (r.rank == rank.rank) return;  // held already (no restart: the worker reconnected)
  }
  RankPlacement placed{rank.rank, worker.id, worker.address, rank.gpu_indices, worker.port};
  if (!cluster_.Allocate({placed}).ok()) {
    // Taken by a placement made before the worker came back: nothing left to protect.
    if (d.held.placement.empty()) draining_.erase({rank.job_id, rank.attempt});
    return;
  }
  if (d.held.id.empty()) {
    // As the policy saw it before the restart: its seq and start keep its place among its
    // queue's jobs (which of them are borrowers).
    if (auto it = jobs_.find(rank.job_id); it != jobs_.end()) d.held = it->second;
    d.held.id = rank.job_id;
    d.held.attempt = rank.attempt;
    d.held.placement.clear();
    d.deadline_ms = now + options_.preemption_grace_ms + 5'000;
  }
  d.held.placement.push_back(std::move(placed));
  RM_LOG(kInfo) << "job " << rank.job_id << " attempt " << rank.attempt << " rank " << rank.rank
                << " is still stopping on " << worker.id << "; its GPUs stay held until it exits";
}

void Scheduler::ReleaseDrainedLocked(const std::pair<std::string, int32_t>& attempt) {
  auto it = draining_.find(attempt);
  if (it == draining_.end()) return;
  cluster_.Release(it->second.held.placement);
  capacity_grew_ = true;
  auto p = preempting_.find(it->second.preemptor);
  if (p != preempting_.end()) {
    p->second.erase(attempt.first);
    if (p->second.empty()) {
      ripe_claims_.insert(p->first);
      preempting_.erase(p);
    }
  }
  newly_pending_.insert(attempt.first);
  draining_.erase(it);
  Wake();
}

absl::Status Scheduler::CommitLocked(const std::string& job_id, const JobInput& input,
                                     std::shared_ptr<Waiter> waiter) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " is not live"));
  Job next = it->second;
  const JobState from = next.state;
  const int32_t from_attempt = next.attempt;
  const int64_t now = clock_->NowMs();
  auto t = ApplyInput(next, input, now);
  if (!t.ok()) return t.status();
  if (input.kind == JobInput::Kind::kPlaced) {
    // Never hand out GPUs twice.
    if (auto s = cluster_.Allocate(next.placement); !s.ok()) return s;
  }
  // Decided: memory moves now, the store and the workers hear of it through the writer.
  Write write;
  write.job_write = {JobWrite::Kind::kUpdate, next, t->event,
                     input.kind == JobInput::Kind::kPlaced || !t->released.empty(), std::nullopt,
                     std::nullopt};
  write.waiter = std::move(waiter);
  if (next.state != JobState::kRunning) {
    // The attempt stops running: its queue is charged in the same transaction.
    if (auto used = AttemptUsage(it->second, cluster_, now)) {
      usage_ms_[{used->queue, used->resource}] += used->used_ms;
      write.job_write.usage = std::move(used);
    }
  }
  if (input.kind == JobInput::Kind::kPreempted) {
    // Its ranks get the grace period to checkpoint; their GPUs are theirs until they exit.
    Draining& d = draining_[{job_id, from_attempt}];
    d.held = it->second;
    d.deadline_ms = now + options_.preemption_grace_ms + 5'000;
    write.stop_grace_ms = options_.preemption_grace_ms;
    for (const auto& [preemptor, victims] : preempting_) {
      if (victims.count(job_id)) d.preemptor = preemptor;
    }
  } else {
    cluster_.Release(t->released);
    if (!t->released.empty()) capacity_grew_ = true;
  }
  for (const auto& r : t->released) write.stop_on.insert(r.worker_id);
  write.stop_attempt = from_attempt;
  if (from == JobState::kPending && next.state != JobState::kPending) {
    if (metrics_ && next.state == JobState::kStarting) {
      metrics_->placement_latency.Observe(
          static_cast<double>(now - pending_since_ms_[job_id]) / 1000.0);
    }
    pending_since_ms_.erase(job_id);
  }
  if (next.state == JobState::kStarting && from != JobState::kStarting) {
    trackers_[job_id] = RankTracker(static_cast<int32_t>(next.placement.size()));
    write.assign = true;
  }
  if (next.state == JobState::kPending) {
    trackers_.erase(job_id);
    if (input.kind != JobInput::Kind::kPreempted) newly_pending_.insert(job_id);
    pending_since_ms_[job_id] = now;
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
    // The jobs that wait for it are judged again in the next pass.
    for (const std::string& waiting : deps_.Ended(job_id, next.state)) {
      newly_pending_.insert(waiting);
    }
    EraseJobLocked(it);
    Wake();  // capacity came back
  } else {
    SetJobLocked(next);
  }
  writer_.Enqueue(std::move(write));
  // After the job's own write: an array's end is stored after its tasks' (see "Arrays"). By
  // next.id: job_id may be the erased job's own id.
  if (next.spec.array && IsTerminal(next.state)) {
    CancelTasksLocked(next.id, next.state);
  } else if (!next.spec.array) {
    CountTaskLocked(next.id, from, next.state);
  }
  return absl::OkStatus();
}

void Scheduler::AfterCommit(std::vector<Write>& batch, const CommitResult& result) {
  std::vector<JobEvent> events;
  std::vector<QueueMirror::Change> mirror;
  // What the workers must hear of this batch, sent once mu_ is free: gRPC writes a message on
  // the calling thread (serialising it and a sendmsg), and the pass loop and the workers'
  // reports wait for mu_. Only this thread sends what commits decided, one batch after the
  // other, so every worker still hears them in commit order.
  struct Send {
    std::shared_ptr<WorkerLink> link;
    std::shared_ptr<const Job> job;  // an assignment of this job; null: a stop
    CheckPlan plan;
    std::vector<ResolvedMount> mounts;
    std::string job_id;
    int32_t attempt = 0;
    std::string reason;
    int64_t grace_ms = 0;
  };
  std::vector<Send> sends;
  // Placed jobs whose volumes went away before their assignment was sent.
  std::vector<std::pair<std::string, std::string>> unrunnable;
  size_t created_index = 0;
  bool woke = false;
  // Tasks stored after their array ended: cancelled as they arrive.
  std::vector<std::string> orphans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> view(view_mu_);
    for (Write& w : batch) {
      if (w.job_write.job.id.empty()) continue;
      const Job& job = w.job_write.job;
      if (w.job_write.kind == JobWrite::Kind::kCreate) {
        const auto& created = result.created[created_index++];
        if (w.in_order) --tasks_in_flight_;
        if (w.waiter) {
          std::lock_guard<std::mutex> wl(w.waiter->mu);
          w.waiter->result = created;
        }
        if (w.in_order && !created.ok()) {
          // A task that could not be stored: counted as cancelled, so its array can end.
          RM_LOG(kError) << "task " << job.id << " not stored: " << created.status();
          CountTaskLocked(job.id, JobState::kPending, JobState::kCancelled);
        }
        if (!created.ok() || created->existing) continue;
        const Job& stored = created->job;
        if (stored.spec.array) arrays_.emplace(stored.id, ProgressOf(*stored.spec.array, {}));
        if (auto task = ParseTaskId(stored.id); task && !arrays_.contains(task->first)) {
          orphans.push_back(stored.id);
        }
        SetJobLocked(stored);
        stored_[stored.id] = stored;
        newly_pending_.insert(stored.id);
        pending_since_ms_[stored.id] = clock_->NowMs();
        if (metrics_) metrics_->submissions.Add({{"queue", stored.spec.queue}}).Increment();
        mirror.emplace_back(stored.id, QueueEntry{stored.id, stored.spec.priority, stored.seq});
        events.push_back(w.job_write.event);
        woke = true;
        continue;
      }
      if (w.job_write.kind == JobWrite::Kind::kImageDigest) {
        if (auto s = stored_.find(job.id); s != stored_.end() && s->second.image_digest.empty()) {
          s->second.image_digest = job.image_digest;
        }
        continue;
      }
      if (w.job_write.kind == JobWrite::Kind::kCheckpoint) {
        if (auto s = stored_.find(job.id); s != stored_.end()) {
          s->second.last_checkpoint_step = job.last_checkpoint_step;
          s->second.last_checkpoint_time_ms = job.last_checkpoint_time_ms;
        }
        continue;
      }
      if (std::find(result.skipped.begin(), result.skipped.end(), job.id) !=
          result.skipped.end()) {
        RM_LOG(kError) << "job " << job.id << " had already ended in the store; write skipped";
        if (const auto& used = w.job_write.usage) {
          usage_ms_[{used->queue, used->resource}] -= used->used_ms;
        }
        if (w.waiter) {
          std::lock_guard<std::mutex> wl(w.waiter->mu);
          w.waiter->result = absl::FailedPreconditionError(
              absl::StrCat("job ", job.id, " already ended"));
        }
        continue;
      }
      if (IsTerminal(job.state)) {
        stored_.erase(job.id);
      } else {
        stored_[job.id] = job;
      }
      if (job.state == JobState::kPending) {
        mirror.emplace_back(job.id, QueueEntry{job.id, job.spec.priority, job.seq});
      } else {
        mirror.emplace_back(job.id, std::nullopt);
      }
      events.push_back(w.job_write.event);
      if (w.waiter) {
        std::lock_guard<std::mutex> wl(w.waiter->mu);
        w.waiter->result = CreateJobResult{job, false};
      }
      for (const std::string& worker : w.stop_on) {
        auto link = links_.find(worker);
        if (link != links_.end()) {
          Send& stop = sends.emplace_back();
          stop.link = link->second;
          stop.job_id = job.id;
          stop.attempt = w.stop_attempt;
          stop.reason = w.job_write.event.reason;
          stop.grace_ms = w.stop_grace_ms;
        }
      }
      absl::StatusOr<std::vector<ResolvedMount>> mounts;
      if (w.assign) mounts = ResolveMounts(job.spec, volumes_);
      if (w.assign && !mounts.ok()) {
        unrunnable.emplace_back(job.id, std::string(mounts.status().message()));
      } else if (w.assign) {
        // One plan for the gang: every worker must agree on it.
        CheckPlan plan;
        plan.run = ChecksJob(job.spec, options_.health_check);
        plan.min_ratio = options_.check_min_ratio;
        plan.transport = ExpectedTransportLocked(job.placement);
        if (plan.run) plan.token = NewToken();
        plan.separately = job.separate_check_attempt == job.attempt;
        for (const auto& r : job.placement) {
          plan.separately = plan.separately || cluster_.OnProbation(r.worker_id);
        }
        const CheckShape shape =
            ShapeOf(job.placement, plan.transport,
                    ChecksInSession(job.spec, plan.transport, plan.separately));
        if (auto b = baselines_.find(shape.Key()); b != baselines_.end()) {
          plan.baseline_gbps = b->second.busbw_gbps;
        }
        // The write is done with after this: its job moves to the sends.
        auto assigned = std::make_shared<const Job>(std::move(w.job_write.job));
        std::set<std::string> sent;
        for (const auto& r : assigned->placement) {
          if (!sent.insert(r.worker_id).second) continue;
          auto link = links_.find(r.worker_id);
          if (link == links_.end()) continue;
          Send& assignment = sends.emplace_back();
          assignment.link = link->second;
          assignment.job = assigned;
          assignment.plan = plan;
          assignment.mounts = *mounts;
        }
      }
    }
  }
  if (!unrunnable.empty() || !orphans.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, why] : unrunnable) {
      if (auto s = CommitLocked(id, {JobInput::Kind::kUnrunnable, why}); !s.ok()) {
        RM_LOG(kError) << "failing " << id << ": " << s;
      }
    }
    for (const std::string& id : orphans) {
      const std::string why = absl::StrCat("array ", ParseTaskId(id)->first, " had ended");
      if (auto s = CommitLocked(id, {JobInput::Kind::kCancel, why}); !s.ok()) {
        RM_LOG(kError) << "cancelling " << id << ": " << s;
      }
    }
  }
  for (const Send& send : sends) {
    if (send.job) {
      send.link->SendLaunch(*send.job, send.plan, send.mounts);
    } else {
      send.link->SendStop(send.job_id, send.attempt, send.reason, send.grace_ms);
    }
  }
  // No lock held: a submit's answer (and its retry under another id) runs here.
  for (Write& w : batch) {
    if (w.waiter) w.waiter->Settle();
  }
  watch_hub_.Publish(events);
  mirror_.Update(std::move(mirror));
  if (woke) Wake();
}

absl::Status Scheduler::Flush(int64_t timeout_ms) { return writer_.Flush(timeout_ms); }

void Scheduler::ObserveSubmitWait(Waiter& waiter,
                                  std::chrono::steady_clock::time_point handed) {
  std::lock_guard<std::mutex> lock(waiter.mu);
  // Unset when the batch was stored write by write (StoreBatch after a refusal).
  if (waiter.commit_begun < handed) return;
  metrics_->ObserveSubmitWait(handed, waiter.commit_begun, waiter.committed, waiter.told);
}

absl::StatusOr<CreateJobResult> Scheduler::Submit(const JobSpec& spec,
                                                  const std::string& request_id,
                                                  const std::string& team,
                                                  std::optional<AuditRecord> audit, bool admin) {
  return AwaitAnswer<absl::StatusOr<CreateJobResult>>([&](SubmitDone done) {
    SubmitAsync(spec, request_id, team, std::move(audit), std::move(done), admin);
  });
}

namespace {

// Another team's job reads as one that does not exist: ids reveal nothing.
absl::Status NoSuchDependency(const std::string& job_id) {
  return absl::NotFoundError(
      absl::StrCat("after: no job ", job_id, " (only your team's jobs can be named)"));
}

}  // namespace

void Scheduler::SubmitAsync(const JobSpec& spec, const std::string& request_id,
                            const std::string& team, std::optional<AuditRecord> audit,
                            SubmitDone done, bool admin,
                            const std::function<void(std::function<void()>)>& aside) {
  if (auto s = ValidateRequestId(request_id); !s.ok()) return done(s);
  auto valid = ValidateJobSpec(spec);
  if (!valid.ok()) return done(valid.status());
  if (writer_.fenced()) {
    return done(absl::UnavailableError("this scheduler is no longer the leader; retry"));
  }
  if (writer_.store_down()) {
    writer_.NudgeSubmitWriters();  // the submit writer tries again now: Postgres may be back
    return done(absl::UnavailableError(
        "postgres is unavailable: the job was not accepted; retry with the same request_id"));
  }
  const int64_t now = clock_->NowMs();
  auto create = std::make_shared<Create>();
  Job& job = create->job;
  job.spec = *std::move(valid);
  job.request_id = request_id;
  job.team = team;
  job.state = JobState::kPending;
  job.created_at_ms = job.updated_at_ms = now;
  job.last_event_seq = 1;
  create->audit = std::move(audit);
  create->done = std::move(done);
  if (!job.spec.after.empty()) {
    bool read = false;
    absl::Status named;
    {
      std::lock_guard<std::mutex> lock(mu_);
      named = CheckLiveDependenciesLocked(job.spec, team, admin, &read);
    }
    if (!named.ok()) return create->done(named);
    if (read) {
      // Jobs that are not live: only Postgres knows whether they exist, whose they are and how
      // they ended.
      auto read_ends = [this, create, team, admin] {
        for (const Dependency& d : create->job.spec.after) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (jobs_.contains(d.job_id)) continue;  // its team was checked
          }
          absl::StatusOr<Job> named_job = store_->GetJob(d.job_id);
          if (absl::IsNotFound(named_job.status()) ||
              (named_job.ok() && !admin && named_job->team != team)) {
            return create->done(NoSuchDependency(d.job_id));
          }
          if (!named_job.ok()) return create->done(named_job.status());
          if (IsTerminal(named_job->state)) {
            std::lock_guard<std::mutex> lock(mu_);
            deps_.Remember(d.job_id, named_job->state);
          }
        }
        SubmitChecked(create, team, admin);
      };
      if (aside) return aside(std::move(read_ends));
      return read_ends();
    }
  }
  SubmitChecked(std::move(create), team, admin);
}

absl::Status Scheduler::CheckLiveDependenciesLocked(const JobSpec& spec, const std::string& team,
                                                    bool admin, bool* read) {
  for (const Dependency& d : spec.after) {
    auto it = jobs_.find(d.job_id);
    if (it == jobs_.end()) {
      *read = true;  // whose it is, and its end
      continue;
    }
    if (!admin && it->second.team != team) return NoSuchDependency(d.job_id);
  }
  return absl::OkStatus();
}

std::optional<JobState> Scheduler::StateOfLocked(const std::string& id) const {
  if (auto it = jobs_.find(id); it != jobs_.end()) return it->second.state;
  return deps_.EndOf(id);
}

void Scheduler::SubmitChecked(std::shared_ptr<Create> create, const std::string& team, bool admin) {
  const Job& job = create->job;
  absl::Status refused;
  {
    // Held until the job is among the writer's creates in flight: a queue is not deleted under
    // a job on its way to Postgres.
    std::shared_lock<std::shared_mutex> queue_guard(queue_writes_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!queues_.contains(job.spec.queue)) {
        refused = absl::NotFoundError(absl::StrCat(
            "queue: no queue '", job.spec.queue,
            "'; create it first (ringctl queue create) or submit to an existing one"));
      } else {
        // Under the same hold as the queue: no volume it mounts is deleted meanwhile.
        refused = CheckMountRights(job.spec, volumes_, team, admin);
        if (refused.ok()) refused = ReserveLiveJobLocked(job.spec);
      }
    }
    if (refused.ok()) {
      HandOver(create);
      return;
    }
  }
  create->done(refused);
}

absl::Status Scheduler::ReserveLiveJobLocked(const JobSpec& spec) {
  const std::string& queue = spec.queue;
  const int64_t bytes = SpecBytes(spec);
  int64_t in_queue = 0;
  for (JobState state : {JobState::kPending, JobState::kStarting, JobState::kRunning}) {
    if (auto it = live_counts_.find({state, queue}); it != live_counts_.end()) {
      in_queue += it->second;
    }
  }
  std::lock_guard<std::mutex> lock(submitting_mu_);
  const int64_t total = static_cast<int64_t>(jobs_.size()) + submitting_total_;
  if (auto it = submitting_.find(queue); it != submitting_.end()) in_queue += it->second;
  if (total >= options_.max_live_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the scheduler holds ", total, " live jobs (pending, starting or running), its bound "
        "(--max-live-jobs ", options_.max_live_jobs, "); submit again when some have ended"));
  }
  if (in_queue >= options_.max_live_jobs_per_queue) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "queue '", queue, "' holds ", in_queue, " live jobs (pending, starting or running), "
        "its bound (--max-live-jobs-per-queue ", options_.max_live_jobs_per_queue,
        "); submit again when some have ended"));
  }
  const int64_t spec_bytes = live_spec_bytes_ + submitting_spec_bytes_;
  if (spec_bytes + bytes > options_.max_live_spec_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the live jobs' specs (argv, env, labels, names) take ", spec_bytes, " bytes; this one's ",
        bytes, " would pass their bound of ", options_.max_live_spec_bytes,
        " bytes (--max-live-spec-mib); submit again when some have ended"));
  }
  ++submitting_total_;
  ++submitting_[queue];
  submitting_spec_bytes_ += bytes;
  return absl::OkStatus();
}

void Scheduler::ReleaseLiveJob(const JobSpec& spec) {
  std::lock_guard<std::mutex> lock(submitting_mu_);
  --submitting_total_;
  submitting_spec_bytes_ -= SpecBytes(spec);
  if (auto it = submitting_.find(spec.queue); it != submitting_.end() && --it->second <= 0) {
    submitting_.erase(it);
  }
}

void Scheduler::HandOver(std::shared_ptr<Create> create) {
  Job& job = create->job;
  job.id = NewJobId();
  // Not make_shared: answers_ keeps a weak_ptr for write_wait_ms, which would keep the whole
  // Waiter's memory, not just the control block, that long.
  std::shared_ptr<Waiter> waiter(new Waiter());
  waiter->what = absl::StrCat("job ", job.id);
  waiter->on_done = [this, create](Waiter& w, absl::StatusOr<CreateJobResult> result) {
    Created(create, w, std::move(result));
  };
  Write write;
  write.job_write = {JobWrite::Kind::kCreate, job,
                     JobEvent{job.id, 1, JobState::kPending, 0, "submitted", 0,
                              job.created_at_ms},
                     false, std::nullopt, create->audit};
  if (write.job_write.audit) write.job_write.audit->resource = job.id;
  write.waiter = waiter;
  create->handed = std::chrono::steady_clock::now();
  // Not started, or stopping: nothing would store it (answered already).
  if (!answers_.Track(waiter,
                      create->handed + std::chrono::milliseconds(options_.write_wait_ms))) {
    return;
  }
  writer_.Enqueue(std::move(write));
}

void Scheduler::Created(const std::shared_ptr<Create>& create, Waiter& waiter,
                        absl::StatusOr<CreateJobResult> created) {
  if (created.ok() && metrics_) ObserveSubmitWait(waiter, create->handed);
  if (created.status().code() == absl::StatusCode::kAborted && create->tries < 3) {
    // The random job id was taken: again under another. The first write is not settled yet
    // (this runs before it is), so the queue stays held by one of the two throughout.
    ++create->tries;
    HandOver(create);
    return;
  }
  const Job& job = create->job;
  if (created.ok() && created->existing && created->job.team != job.team) {
    // Another team's request id: say no more than that it is taken.
    created = absl::AlreadyExistsError(
        absl::StrCat("request_id ", job.request_id, " is already used; choose another"));
  } else if (created.ok() && created->existing && !(created->job.spec == job.spec)) {
    created = absl::AlreadyExistsError(absl::StrCat("request_id ", job.request_id,
                                                    " was already used for a different spec (job ",
                                                    created->job.id, ")"));
  } else if (created.ok() && created->existing) {
    // The earlier job, as live now if it is.
    std::lock_guard<std::mutex> view(view_mu_);
    if (auto it = stored_.find(created->job.id); it != stored_.end()) created->job = it->second;
  }
  ReleaseLiveJob(job.spec);
  SubmitDone done = std::move(create->done);
  create->done = nullptr;
  done(std::move(created));
}

std::optional<std::vector<std::string>> Scheduler::QueueTeams(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(name);
  if (it == queues_.end()) return std::nullopt;
  return it->second.teams;
}

absl::StatusOr<std::optional<Job>> Scheduler::GetLiveJob(const std::string& job_id) {
  if (auto s = ValidateJobId(job_id); !s.ok()) return s;
  std::optional<Job> live;
  {
    std::lock_guard<std::mutex> view(view_mu_);
    auto it = stored_.find(job_id);
    if (it != stored_.end()) live = it->second;
  }
  if (live) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job_id);
    if (it != jobs_.end()) live->pending_reason = it->second.pending_reason;
  }
  return live;
}

absl::StatusOr<Job> Scheduler::GetJob(const std::string& job_id) {
  absl::StatusOr<std::optional<Job>> live = GetLiveJob(job_id);
  if (!live.ok()) return live.status();
  absl::StatusOr<Job> job = live->has_value() ? **live : store_->GetJob(job_id);
  if (job.ok()) FillArrayStatus(*job);
  return job;
}

absl::StatusOr<JobPage> Scheduler::ListJobs(const JobListQuery& query) {
  auto page_size = EffectivePageSize(query.page_size, "page_size");
  if (!page_size.ok()) return page_size.status();
  JobFilter f;
  f.state = query.state;
  f.queue = query.queue;
  f.team = query.team;
  if (!f.queue.empty()) {
    if (auto s = ValidateQueueName(f.queue); !s.ok()) return s;
  }
  auto labels = ParseLabelSelector(query.label_selector);
  if (!labels.ok()) return labels.status();
  f.labels = *std::move(labels);
  if (!query.array_id.empty()) {
    if (auto s = ValidateJobId(query.array_id, "array_id"); !s.ok()) return s;
  }
  f.array_id = query.array_id;
  PageCursor cursor{0, query.state, query.queue, query.label_selector, query.array_id};
  if (!query.page_token.empty()) {
    auto from = DecodePageToken(query.page_token);
    if (!from.ok()) return from.status();
    if (from->state != cursor.state || from->queue != cursor.queue ||
        from->label_selector != cursor.label_selector || from->array_id != cursor.array_id) {
      return absl::InvalidArgumentError(
          "page_token: it continues a list with other filters; repeat the state, queue, "
          "label_selector and array_id of the request that returned it, or start again without "
          "a token");
    }
    f.before_seq = from->before_seq;
  }
  // One more than a page: whether it comes back says if there is a next page.
  f.limit = *page_size + 1;
  auto jobs = store_->ListJobs(f);
  if (!jobs.ok()) return jobs.status();
  JobPage page;
  page.jobs = *std::move(jobs);
  if (page.jobs.size() > static_cast<size_t>(*page_size)) {
    page.jobs.resize(*page_size);
    cursor.before_seq = page.jobs.back().seq;
    page.next_page_token = EncodePageToken(cursor);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Job& job : page.jobs) {
      auto it = jobs_.find(job.id);
      if (it != jobs_.end()) job.pending_reason = it->second.pending_reason;  // never stored
    }
  }
  for (Job& job : page.jobs) FillArrayStatus(job);
  return page;
}

absl::StatusOr<Job> Scheduler::Cancel(const std::string& job_id, const std::string& reason) {
  return AwaitAnswer<absl::StatusOr<Job>>([&](CancelDone done) {
    CancelAsync(job_id, reason, std::move(done), [](std::function<void()> task) { task(); });
  });
}

void Scheduler::CancelAsync(const std::string& job_id, const std::string& reason,
                            CancelDone done, const Aside& aside) {
  if (auto s = ValidateJobId(job_id); !s.ok()) return done(s);
  if (reason.size() > kMaxReasonBytes) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "reason: must be at most ", kMaxReasonBytes, " bytes, got ", reason.size())));
  }
  if (writer_.fenced()) {
    return done(absl::UnavailableError("this scheduler is no longer the leader; retry"));
  }
  const std::string why =
      reason.empty() ? "cancelled by request" : absl::StrCat("cancelled: ", reason);
  // Not make_shared: answers_ keeps a weak_ptr (see HandOver).
  std::shared_ptr<Waiter> waiter(new Waiter());
  waiter->what = absl::StrCat("cancellation of ", job_id);
  // Set before the write is queued: the writer may settle it at once.
  waiter->on_done = [done](Waiter&, absl::StatusOr<CreateJobResult> stored) {
    if (!stored.ok()) return done(stored.status());
    done(std::move(stored->job));
  };
  absl::Status decided;
  {
    std::lock_guard<std::mutex> lock(mu_);
    decided = jobs_.count(job_id) > 0 ? CommitLocked(job_id, {JobInput::Kind::kCancel, why}, waiter)
                                      : absl::NotFoundError("not live");
  }
  if (!decided.ok()) {
    {
      // Nothing queued with it: answered here, not by its destructor.
      std::lock_guard<std::mutex> lock(waiter->mu);
      waiter->on_done = nullptr;
    }
    if (decided.code() != absl::StatusCode::kNotFound) return done(decided);
    // Not live here: ended (or never existed); the store says which.
    aside([this, job_id, done] {
      auto stored = store_->GetJob(job_id);
      if (!stored.ok()) return done(stored.status());
      if (IsTerminal(stored->state)) {
        return done(absl::FailedPreconditionError(absl::StrCat(
            "job ", job_id, " already ended (", JobStateName(stored->state), ")")));
      }
      done(absl::UnavailableError(absl::StrCat("job ", job_id, " is being stored; retry")));
    });
    return;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.write_wait_ms);
  answers_.Track(waiter, deadline);
}

absl::Status Scheduler::BeginWatch(WatchFeed* feed) { return watch_hub_.Begin(feed); }

void Scheduler::EndWatch(WatchFeed* feed) { watch_hub_.End(feed); }

absl::StatusOr<std::vector<JobEvent>> Scheduler::EventsAfter(const std::string& job_id,
                                                             int64_t seq) {
  if (auto s = ValidateJobId(job_id); !s.ok()) return s;
  return store_->ListEvents(job_id, seq);
}

absl::Status Scheduler::Watch(const std::string& job_id,
                              const std::function<bool(const JobEvent&)>& send,
                              const std::function<bool()>& cancelled) {
  return watch_hub_.Watch(job_id, send, cancelled);
}

absl::Status Scheduler::RegisterWorker(const Worker& worker, const std::vector<HeldRank>& held,
                                       std::shared_ptr<WorkerLink> link) {
  if (auto s = ValidateWorker(worker); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = clock_->NowMs();
    Worker w = worker;
    w.state = WorkerState::kReady;
    w.registered_at_ms = now;
    w.last_heartbeat_ms = now;
    // Health outlives a reconnect: only a passing check or an admin clears it.
    if (auto old = workers_.find(w.id); old != workers_.end()) {
      w.unhealthy_reason = old->second.unhealthy_reason;
    }
    // Stored by the writer ahead of any assignment to it; nothing waits for it here.
    Write write;
    write.worker = w;
    writer_.Enqueue(std::move(write));
    cluster_.UpsertWorker(w);
    cluster_.SetWorkerState(w.id, WorkerState::kReady);
    cluster_.SetWorkerHealthy(w.id, w.unhealthy_reason.empty());
    capacity_grew_ = true;
    workers_[w.id] = w;
    links_[w.id] = link;
    RM_LOG(kInfo) << "worker " << w.id << " registered at " << w.address << ":" << w.port
                  << " with " << w.gpus.size() << " GPUs, " << w.cpu_slots << " CPU slots, "
                  << held.size() << " held ranks";

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
        if (h.stopping && !h.exited) HoldStoppingRankLocked(w, h, now);
        link->SendStop(h.job_id, h.attempt, "no live attempt holds this rank", 0);
        continue;
      }
      held_here.insert({h.job_id, h.attempt, h.rank});
    }
    FailJobsOnWorkerLocked(w.id, absl::StrCat("worker ", w.id, " re-registered"), &held_here);
    for (const HeldRank& h : held) {
      if (held_here.count({h.job_id, h.attempt, h.rank}) == 0) continue;
      RankReport report{h.job_id, h.attempt, h.rank, RankReport::Kind::kStarted, 0, 0, "", 0, 0,
                        {}};
      HandleRankLocked(w.id, report);
      if (h.exited) {
        report.kind = RankReport::Kind::kExited;
        report.exit_code = h.exit_code;
        HandleRankLocked(w.id, report);
      }
    }
  }
  aside_.Beat(worker.id);
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
  aside_.Beat(worker_id);
}

// A checkpoint is no state change: no event, only the job's checkpoint fields, stored in
// decision order with the rest (so a restarted scheduler and GetJob of an ended job know it,
// and a commit of an older copy of the job cannot hide it from the view). It may come from an
// attempt already preempted (the checkpoint its SIGTERM made), never from a later one than the
// job's.
void Scheduler::RecordCheckpointLocked(const std::string& worker_id, const RankReport& report) {
  auto it = jobs_.find(report.job_id);
  if (it == jobs_.end() || report.attempt > it->second.attempt) return;
  Job& job = it->second;
  // Only rank 0 reports checkpoints, and a time far ahead of ours (a bad clock, a forged
  // checkpoint.meta) would shut out every later report and bend victim choice.
  if (report.rank != 0 || report.checkpoint_time_ms > clock_->NowMs() + 5 * 60 * 1000) return;
  if (report.checkpoint_time_ms < job.last_checkpoint_time_ms) return;
  job.last_checkpoint_step = report.checkpoint_step;
  job.last_checkpoint_time_ms = report.checkpoint_time_ms;
  RM_LOG(kInfo) << "job " << job.id << ": checkpoint at step " << report.checkpoint_step
                << " (reported by " << worker_id << ", attempt " << report.attempt << ")";
  Write write;
  write.job_write.kind = JobWrite::Kind::kCheckpoint;
  write.job_write.job = job;
  writer_.Enqueue(std::move(write));
}

void Scheduler::RecordImageDigestLocked(const std::string& worker_id, const RankReport& report) {
  auto it = jobs_.find(report.job_id);
  // Only the current attempt's launcher resolves the image: a late report of an earlier
  // attempt, or one from a worker that holds no rank 0 of it, pins nothing.
  if (it == jobs_.end() || it->second.attempt != report.attempt) return;
  Job& job = it->second;
  if (job.spec.image.empty() || !job.image_digest.empty()) return;  // nothing to pin, or pinned
  const bool launcher = std::any_of(job.placement.begin(), job.placement.end(),
                                    [&](const RankPlacement& r) {
                                      return r.rank == 0 && r.worker_id == worker_id;
                                    });
  if (!launcher) {
    RM_LOG(kWarning) << "worker " << worker_id << " reported an image digest for " << job.id
                     << " attempt " << report.attempt << ", whose launcher it is not; ignored";
    return;
  }
  job.image_digest = report.image_digest;
  RM_LOG(kInfo) << "job " << job.id << ": image " << job.spec.image << " pinned to "
                << job.image_digest;
  Write write;
  write.job_write.kind = JobWrite::Kind::kImageDigest;
  write.job_write.job = job;
  writer_.Enqueue(std::move(write));
}

void Scheduler::ReportRank(const std::string& worker_id, const RankReport& report) {
  std::lock_guard<std::mutex> lock(mu_);
  HandleRankLocked(worker_id, report);
}

void Scheduler::ReportRanks(const std::string& worker_id, const std::vector<RankReport>& reports) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const RankReport& report : reports) HandleRankLocked(worker_id, report);
}

void Scheduler::HandleRankLocked(const std::string& worker_id, const RankReport& report) {
  if (report.kind == RankReport::Kind::kCheckpoint) {
    RecordCheckpointLocked(worker_id, report);
    return;
  }
  if (report.kind == RankReport::Kind::kImageResolved) {
    RecordImageDigestLocked(worker_id, report);
    return;
  }
  if (auto d = draining_.find({report.job_id, report.attempt});
      d != draining_.end() && report.kind != RankReport::Kind::kStarted &&
      report.kind != RankReport::Kind::kProgress) {
    d->second.exited.insert(report.rank);
    if (d->second.exited.size() >= d->second.held.placement.size()) {
      RM_LOG(kInfo) << "job " << report.job_id << " attempt " << report.attempt
                    << ": every preempted rank exited; its GPUs are free";
      ReleaseDrainedLocked(d->first);
    }
    return;
  }
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
      } else {
        // The worker's word on it, when it has one ("cannot run ./train: No such file or
        // directory", a wrapper killed while the worker stopped the attempt, and why).
        const std::string why =
            report.message.empty() ? "" : absl::StrCat(": ", Utf8Prefix(report.message, 512));
        if (report.signal != 0) {
          s = CommitLocked(job.id, {JobInput::Kind::kFailed,
                                    absl::StrCat("rank ", report.rank, " on ", worker_id,
                                                 " was killed by signal ", report.signal, why),
                                    128 + report.signal});
        } else {
          s = CommitLocked(job.id, {JobInput::Kind::kFailed,
                                    absl::StrCat("rank ", report.rank, " on ", worker_id,
                                                 " exited with code ", report.exit_code, why),
                                    report.exit_code});
        }
      }
      break;
    case RankReport::Kind::kProgress:
      // STARTING too: a rank can be busy before the last rank's start reached us.
      if (job.state == JobState::kRunning || job.state == JobState::kStarting) {
        const int64_t now = clock_->NowMs();
        auto [w, fresh] = watches_.try_emplace(
            job.id,
            Watched{job.attempt, RunWatch(static_cast<int32_t>(job.placement.size()), now)});
        if (!fresh && w->second.attempt != job.attempt) {
          w->second =
              Watched{job.attempt, RunWatch(static_cast<int32_t>(job.placement.size()), now)};
        }
        w->second.watch.OnReport(report.rank, report.activity, now);
      }
      break;
    case RankReport::Kind::kLaunchFailed:
      s = CommitLocked(job.id, {JobInput::Kind::kFailed,
                                absl::StrCat("rank ", report.rank, " could not start on ",
                                             worker_id, ": ", Utf8Prefix(report.message, 512))});
      break;
    case RankReport::Kind::kCheckpoint:
    case RankReport::Kind::kImageResolved:
      break;  // handled above
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

std::string Scheduler::ExpectedTransportLocked(const std::vector<RankPlacement>& placement) const {
  return ExpectedTransport(placement, [this](const std::string& id) -> const std::vector<Gpu>* {
    auto w = workers_.find(id);
    return w == workers_.end() ? nullptr : &w->second.gpus;
  });
}

// The pre-run check protocol is written at core/health_check.h.
void Scheduler::ReportCheck(const std::string& worker_id, const CheckOutcome& outcome) {
  std::optional<CheckBaseline> learned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(outcome.job_id);
    // A check run inside the job's MPI_Init reports after the ranks started: RUNNING too.
    if (it == jobs_.end() || it->second.attempt != outcome.attempt ||
        (it->second.state != JobState::kStarting && it->second.state != JobState::kRunning)) {
      return;  // an earlier attempt, or a job that moved on: nothing to decide
    }
    const Job& job = it->second;
    bool launcher = false;
    bool culprit_placed = false;
    for (const auto& r : job.placement) {
      launcher = launcher || (r.rank == 0 && r.worker_id == worker_id);
      culprit_placed = culprit_placed || r.worker_id == outcome.culprit_worker_id;
    }
    if (!launcher) {
      RM_LOG(kWarning) << "worker " << worker_id << " sent a check of " << outcome.job_id
                       << ", whose rank 0 is not placed there; ignored";
      return;
    }
    // The ring chose its transport (a GPU rank whose CUDA fails falls back to the CPU).
    const CheckShape shape = ShapeOf(job.placement, outcome.transport, outcome.in_session);
    const std::string key = shape.Key();
    const auto base = baselines_.find(key);
    const double baseline = base != baselines_.end() ? base->second.busbw_gbps : 0;
    const char* result = outcome.passed ? "passed" : (outcome.completed ? "failed" : "error");
    if (metrics_) {
      metrics_->checks.Add({{"result", result}}).Increment();
      metrics_->check_seconds.Observe(outcome.seconds);
      if (outcome.completed) metrics_->check_busbw.Add({{"shape", key}}).Set(outcome.busbw_gbps);
    }
    // Every completed check that blames no one is a sample of what the shape reaches, one
    // inside the job's MPI_Init too: a median of the recent ones, which no few of them move.
    if (outcome.completed && outcome.culprit_worker_id.empty()) {
      learned = UpdateBaseline(base != baselines_.end() ? base->second : CheckBaseline{key},
                               baseline_windows_[key], outcome.busbw_gbps, clock_->NowMs());
      baselines_[key] = *learned;
      if (metrics_) metrics_->check_baseline.Add({{"shape", key}}).Set(learned->busbw_gbps);
    }
    std::string text = CheckEventText(outcome, shape, baseline);
    const std::string job_id = job.id;
    std::vector<std::string> cleared;
    // A check inside the job's MPI_Init is written by the job's own processes: any job could
    // forge one. It never marks or clears a worker; a blame is verified by ringmaster-check.
    const bool trusted = !outcome.in_session;
    if (outcome.passed && trusted) {
      for (const auto& r : job.placement) {
        if (cluster_.OnProbation(r.worker_id) &&
            std::find(cleared.begin(), cleared.end(), r.worker_id) == cleared.end()) {
          cleared.push_back(r.worker_id);
        }
      }
      for (const std::string& id : cleared) {
        absl::StrAppend(&text, "; worker ", id, " passed it on probation and is healthy again");
      }
    }
    absl::Status s = CommitLocked(job_id, {JobInput::Kind::kChecked, text});
    for (const std::string& id : cleared) {
      if (auto w = workers_.find(id); s.ok() && w != workers_.end()) {
        ClearHealthLocked(w->second, absl::StrCat("passed the pre-run check of job ", job_id));
      }
    }
    auto culprit = workers_.find(outcome.culprit_worker_id);
    if (s.ok() && !outcome.passed && culprit_placed && culprit != workers_.end() && !trusted) {
      // Re-placed like a blame, not counted: its next attempt runs ringmaster-check before
      // any of its processes start, and that check marks the worker if it is slow.
      if (auto j = jobs_.find(job_id); j != jobs_.end()) {
        j->second.separate_check_attempt = outcome.attempt + 1;
      }
      s = CommitLocked(job_id,
                       {JobInput::Kind::kCheckFailed,
                        absl::StrCat("re-placing to verify the blame of worker ", culprit->first,
                                     " with ringmaster-check before any worker is "
                                     "marked (not counted against backoff_limit): ",
                                     Utf8Prefix(outcome.message, 512))});
    } else if (s.ok() && !outcome.passed && culprit_placed && culprit != workers_.end()) {
      Worker& w = culprit->second;
      w.unhealthy_reason = Utf8Prefix(absl::StrCat("pre-run check of job ", job_id, " attempt ",
                                                   outcome.attempt, " failed: ", outcome.message),
                                      1024);
      cluster_.SetWorkerHealthy(w.id, false);
      // Named again (or for the first time): the wait before probation starts now.
      unhealthy_since_ms_[w.id] = clock_->NowMs();
      cluster_.SetWorkerProbation(w.id, false);
      Write write;
      write.worker = w;
      writer_.Enqueue(std::move(write));
      RM_LOG(kWarning) << "worker " << w.id << " is unhealthy: " << w.unhealthy_reason;
      s = CommitLocked(job_id, {JobInput::Kind::kCheckFailed,
                                absl::StrCat("re-placing without unhealthy worker ", w.id,
                                             " (not counted against backoff_limit): ",
                                             Utf8Prefix(outcome.message, 512))});
      UpdateGaugesLocked();
    }
    if (!s.ok()) RM_LOG(kError) << "check of " << job_id << ": " << s;
  }
  if (!learned) return;
  aside_.StoreBaseline(*learned);
}

absl::StatusOr<WorkerView> Scheduler::ClearWorkerHealth(const std::string& worker_id) {
  if (worker_id.empty()) {
    return absl::InvalidArgumentError("worker_id: is required (a worker id from ringctl workers)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("no worker ", worker_id));
  }
  Worker& w = it->second;
  if (!w.unhealthy_reason.empty()) ClearHealthLocked(w, "cleared by an admin");
  return WorkerView{w, cluster_.AllocatedGpus(w.id), cluster_.CpuSlotsUsed(w.id)};
}

std::map<std::string, CheckBaseline> Scheduler::CheckBaselines() {
  std::lock_guard<std::mutex> lock(mu_);
  return baselines_;
}

std::vector<WorkerView> Scheduler::ListWorkers() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkerView> out;
  for (const auto& [id, w] : workers_) {
    out.push_back(
        {w, cluster_.AllocatedGpus(id), cluster_.CpuSlotsUsed(id), cluster_.OnProbation(id)});
  }
  return out;
}

void Scheduler::UpdateGaugesLocked() {
  if (!metrics_) return;
  std::vector<const Job*> running;
  for (const std::string& id : placed_ids_) {
    const Job& job = jobs_.at(id);
    if (job.state == JobState::kRunning) running.push_back(&job);
  }
  const UsageTotals used_ms = WithRunning(usage_ms_, running, cluster_, clock_->NowMs());
  metrics_->UpdateGauges({live_counts_, queues_, ledger_, used_ms, cluster_, workers_});
}

std::string Scheduler::NewJobId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrCat("j-", absl::Hex(rng() & 0xffffffffffffULL, absl::kZeroPad12));
}

std::string Scheduler::NewToken() {
  // The kernel's randomness (a token must not be guessable); the device is opened once per
  // thread, not per placement.
  static thread_local std::random_device rd;
  std::string token;
  for (int i = 0; i < 4; ++i) {
    uint64_t v = (static_cast<uint64_t>(rd()) << 32) | rd();
    absl::StrAppend(&token, absl::Hex(v, absl::kZeroPad16));
  }
  return token;
}

Scheduler::QueueTallies Scheduler::TallyQueuesLocked() const {
  QueueTallies tallies;
  std::vector<const Job*> running;
  for (const auto& [key, n] : live_counts_) {
    if (key.first == JobState::kPending) tallies.pending[key.second] += n;
  }
  for (const std::string& id : placed_ids_) {
    const Job& job = jobs_.at(id);
    if (job.state == JobState::kRunning) running.push_back(&job);
  }
  tallies.used_ms = WithRunning(usage_ms_, running, cluster_, clock_->NowMs());
  return tallies;
}

QueueStatus Scheduler::QueueStatusLocked(const Queue& queue, const QueueTallies& tallies) const {
  // As of the last pass (its ledger), and the jobs waiting and running now.
  QueueStatus status;
  for (const auto& [resource, u] : ledger_.UsageOf(queue.name)) {
    status.resources[resource] = ResourceUsage{u.used, u.borrowed, u.lent, 0};
  }
  for (auto it = tallies.used_ms.lower_bound({queue.name, ""});
       it != tallies.used_ms.end() && it->first.first == queue.name; ++it) {
    status.resources[it->first.second].used_seconds = static_cast<double>(it->second) / 1000.0;
  }
  auto it = tallies.pending.find(queue.name);
  status.pending_jobs = it == tallies.pending.end() ? 0 : it->second;
  status.weighted_share = ledger_.Share(queue.name);
  return status;
}

absl::Status Scheduler::QueueWriteError(const absl::Status& stored) const {
  if (IsFenced(stored)) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  return stored;
}

absl::StatusOr<QueueView> Scheduler::CreateQueue(const Queue& in) {
  auto valid = ValidateQueue(in);
  if (!valid.ok()) return valid.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  Queue queue = *std::move(valid);
  queue.created_at_ms = queue.updated_at_ms = clock_->NowMs();
  std::unique_lock<std::shared_mutex> writes(queue_writes_);
  auto stored = store_->CreateQueue(queue, epoch_);
  if (!stored.ok()) return QueueWriteError(stored.status());
  std::lock_guard<std::mutex> lock(mu_);
  queues_[stored->name] = *stored;
  RM_LOG(kInfo) << "queue " << stored->name << " created";
  return QueueView{*stored, QueueStatusLocked(*stored, TallyQueuesLocked())};
}

absl::StatusOr<QueueView> Scheduler::UpdateQueue(const Queue& in) {
  auto valid = ValidateQueue(in);
  if (!valid.ok()) return valid.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  Queue queue = *std::move(valid);
  queue.updated_at_ms = clock_->NowMs();
  std::unique_lock<std::shared_mutex> writes(queue_writes_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = queues_.find(queue.name);
    if (it == queues_.end()) {
      return absl::NotFoundError(absl::StrCat("no queue '", queue.name, "'"));
    }
    queue.created_at_ms = it->second.created_at_ms;
  }
  auto stored = store_->UpdateQueue(queue, epoch_);
  if (!stored.ok()) return QueueWriteError(stored.status());
  QueueView view;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queues_[stored->name] = *stored;
    RM_LOG(kInfo) << "queue " << stored->name << " updated";
    // New quotas or weights may let waiting jobs start: the next pass looks at all of them.
    capacity_grew_ = true;
    view = {*stored, QueueStatusLocked(*stored, TallyQueuesLocked())};
  }
  Wake();
  return view;
}

absl::StatusOr<QueueView> Scheduler::GetQueue(const std::string& name) {
  if (auto s = ValidateQueueName(name, "name"); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(name);
  if (it == queues_.end()) return absl::NotFoundError(absl::StrCat("no queue '", name, "'"));
  return QueueView{it->second, QueueStatusLocked(it->second, TallyQueuesLocked())};
}

std::vector<QueueView> Scheduler::ListQueues() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<QueueView> out;
  out.reserve(queues_.size());
  const QueueTallies tallies = TallyQueuesLocked();
  for (const auto& [name, queue] : queues_) {
    out.push_back({queue, QueueStatusLocked(queue, tallies)});
  }
  return out;
}

absl::Status Scheduler::DeleteQueue(const std::string& name) {
  if (auto s = ValidateQueueName(name, "name"); !s.ok()) return s;
  if (name == kDefaultQueue) {
    return absl::FailedPreconditionError(
        "queue default cannot be deleted: jobs without a queue go there");
  }
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  std::unique_lock<std::shared_mutex> writes(queue_writes_);
  // Live jobs of the queue, wherever they are on their way: no submit to it is between its
  // queue check and its hand-over now (writes is held); those handed over are among the
  // writer's creates in flight, answered or not, until settled, and a job is settled only after
  // the writer added it to jobs_, so jobs_ is read after.
  int64_t live = writer_.CreatesInFlight(name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!queues_.contains(name)) {
      return absl::NotFoundError(absl::StrCat("no queue '", name, "'"));
    }
    // Decided in memory, perhaps not stored yet; the store counts what it has.
    for (const auto& [key, n] : live_counts_) live += key.second == name ? n : 0;
  }
  if (live > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("queue ", name, " has ", live,
                     " live jobs (PENDING, STARTING or RUNNING); cancel them "
                     "or wait for them to end first"));
  }
  if (auto s = store_->DeleteQueue(name, epoch_); !s.ok()) return QueueWriteError(s);
  std::lock_guard<std::mutex> lock(mu_);
  queues_.erase(name);
  std::erase_if(usage_ms_, [&](const auto& entry) { return entry.first.first == name; });
  RM_LOG(kInfo) << "queue " << name << " deleted";
  return absl::OkStatus();
}

std::map<std::string, Queue> Scheduler::QueuesSnapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  return queues_;
}

absl::StatusOr<Volume> Scheduler::CreateVolume(const Volume& in) {
  auto valid = ValidateVolume(in);
  if (!valid.ok()) return valid.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  Volume volume = *std::move(valid);
  volume.created_at_ms = volume.updated_at_ms = clock_->NowMs();
  std::unique_lock<std::shared_mutex> writes(queue_writes_);
  auto stored = store_->CreateVolume(volume, epoch_);
  if (!stored.ok()) return QueueWriteError(stored.status());
  std::lock_guard<std::mutex> lock(mu_);
  volumes_[stored->name] = *stored;
  RM_LOG(kInfo) << "volume " << stored->name << " created at " << stored->host_path;
  return *stored;
}

absl::StatusOr<Volume> Scheduler::UpdateVolume(const Volume& in) {
  auto valid = ValidateVolume(in);
  if (!valid.ok()) return valid.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  Volume volume = *std::move(valid);
  volume.updated_at_ms = clock_->NowMs();
  std::unique_lock<std::shared_mutex> writes(queue_writes_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = volumes_.find(volume.name);
    if (it == volumes_.end()) {
      return absl::NotFoundError(absl::StrCat("no volume '", volume.name, "'"));
    }
    volume.created_at_ms = it->second.created_at_ms;
  }
  auto stored = store_->UpdateVolume(volume, epoch_);
  if (!stored.ok()) return QueueWriteError(stored.status());
  std::lock_guard<std::mutex> lock(mu_);
  // Jobs placed from now on mount the new host path; running ones keep what they were given.
  volumes_[stored->name] = *stored;
  RM_LOG(kInfo) << "volume " << stored->name << " updated";
  return *stored;
}

absl::StatusOr<Volume> Scheduler::GetVolume(const std::string& name, const std::string& team,
                                            bool admin) {
  if (auto s = ValidateVolumeName(name, "name"); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = volumes_.find(name);
  // One not granted to the caller's team reads as one that does not exist.
  if (it == volumes_.end() || !VolumeVisibleTo(it->second, team, admin)) {
    return absl::NotFoundError(absl::StrCat("no volume '", name, "'"));
  }
  return it->second;
}

std::vector<Volume> Scheduler::ListVolumes(const std::string& team, bool admin) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Volume> out;
  for (const auto& [name, volume] : volumes_) {
    if (VolumeVisibleTo(volume, team, admin)) out.push_back(volume);
  }
  return out;
}

absl::Status Scheduler::DeleteVolume(const std::string& name) {
  if (auto s = ValidateVolumeName(name, "name"); !s.ok()) return s;
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  std::unique_lock<std::shared_mutex> writes(queue_writes_);
  // As for a queue (DeleteQueue): no submit is between its mount check and its hand-over now;
  // those handed over are in flight until settled, and only then in jobs_, read after.
  std::string mounting = writer_.CreateInFlightMounting(name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!volumes_.contains(name)) return absl::NotFoundError(absl::StrCat("no volume '", name, "'"));
    for (const auto& [id, job] : jobs_) {
      if (!mounting.empty()) break;
      if (!IsTerminal(job.state) && MountsVolume(job.spec, name)) mounting = id;
    }
  }
  if (!mounting.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("volume ", name, " is mounted by job ", mounting,
                     ", which is live (PENDING, STARTING or RUNNING); cancel it or wait for it "
                     "to end first"));
  }
  if (auto s = store_->DeleteVolume(name, epoch_); !s.ok()) return QueueWriteError(s);
  std::lock_guard<std::mutex> lock(mu_);
  volumes_.erase(name);
  RM_LOG(kInfo) << "volume " << name << " deleted";
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
