#include "scheduler.h"

#include <openssl/rand.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/utf8.h"
#include "core/queue_order.h"
#include "core/validation.h"

namespace ringmaster::scheduler {

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
  MutexLock view(&view_mu_);
  for (const auto& [id, job] : stored_) {
    if (job.state == JobState::kPending) entries.push_back({id, job.spec.priority, job.seq});
  }
  return entries;
}

void Scheduler::BeatConnected() {
  std::vector<std::string> connected;
  {
    MutexLock lock(&mu_);
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
  auto stored_credentials = store_->ListRegistryCredentials();
  if (!stored_credentials.ok()) return stored_credentials.status();
  auto registry_credentials = OpenRegistryCredentials(*std::move(stored_credentials));
  if (!registry_credentials.ok()) return registry_credentials.status();
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
  // The resize times of the live elastic jobs, from their stored events: the limit on resizes
  // per hour holds across a restart. (Their throughput at each size is measured again.)
  std::vector<std::pair<std::string, std::vector<int64_t>>> resized;
  for (const Job& job : *active) {
    if (!IsElastic(job.spec)) continue;
    auto events = store_->ListEvents(job.id, 0);
    if (!events.ok()) return events.status();
    std::vector<int64_t> times = RecentResizeTimes(*events, clock_->NowMs());
    if (!times.empty()) resized.emplace_back(job.id, std::move(times));
  }
  std::vector<std::string> beats;
  {
    MutexLock lock(&mu_);
    const int64_t now = clock_->NowMs();
    for (auto& [id, times] : resized) elastic_.resized_at_ms[id] = std::move(times);
    for (auto& [id, progress] : arrays) arrays_[id] = std::move(progress);
    for (Queue& q : *queues) queues_[q.name] = std::move(q);
    for (Volume& v : *volumes) volumes_[v.name] = std::move(v);
    for (RegistryCredential& c : registry_credentials->readable) {
      registry_credentials_[{c.team, c.registry}] = std::move(c);
    }
    for (RegistryCredentialView& v : registry_credentials->unreadable) {
      unreadable_registry_credentials_[{v.team, v.registry}] = std::move(v);
    }
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
      MutexLock view(&view_mu_);
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
    MutexLock lock(&loop_mu_);
    stopping_ = true;
  }
  loop_cv_.NotifyAll();
  if (loop_.joinable()) loop_.join();
  writer_.Stop();
  mirror_.Stop();
  aside_.Stop();
  // Last: whatever submit is still waiting (its write will not be stored now) is answered.
  answers_.Stop();
}

void Scheduler::Wake() {
  {
    MutexLock lock(&loop_mu_);
    wake_ = true;
  }
  loop_cv_.NotifyAll();
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
    MutexLock lock(&loop_mu_);
    if (loop_cv_.WaitUntil(&loop_mu_, pass_start + gap,
                           [this]()
                               ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_mu_) { return stopping_; })) {
      return;
    }
    loop_cv_.WaitFor(&loop_mu_, std::chrono::milliseconds(options_.pass_interval_ms),
                     [this]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_mu_) { return wake_ || stopping_; });
    if (stopping_) return;
    wake_ = false;
  }
}

void Scheduler::RunPass() {
  if (writer_.fenced()) return;
  // Liveness is read from Redis before the lock, and renewed after it.
  std::vector<std::string> ready;
  {
    MutexLock lock(&mu_);
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
  std::vector<std::shared_ptr<WorkerLink>> closing;
  {
    MutexLock lock(&mu_);
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
    closing.swap(closing_);
  }
  for (const auto& link : closing) link->Close();
  for (const std::string& id : beats) (void)liveness_->Beat(id, options_.heartbeat_timeout_ms);
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
  if (fresh && !job.spec.array) demand_.Add(ShareTaskOf(job.spec), job.spec.replicas);
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
    auto queue = queues_.find(job.spec.queue);
    WatchVerdict v = w->second.watch.Judge(
        WatchLimitsOf(job.spec, queue == queues_.end() ? nullptr : &queue->second), now);
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
  auto may_run = [&](Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (job.spec.after.empty()) return true;
    DependencyVerdict v = JudgeWaiting(
        job.spec.after,
        [this](const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> const ArrayProgress* {
          auto a = arrays_.find(id);
          return a == arrays_.end() ? nullptr : &a->second;
        },
        [this](const std::string& id)
            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return StateOfLocked(id); });
    if (v.kind == DependencyVerdict::Kind::kReady) return true;
    if (v.kind == DependencyVerdict::Kind::kNever) {
      never.emplace_back(job.id, std::move(v.reason));
    } else {
      job.pending_reason = std::move(v.reason);
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
  policy.elastic = options_.elastic;
  // Elastic jobs grow only in full passes: an incremental one does not see the jobs that
  // wait, whom the GPUs that free up are kept for. Every pass sees their resize history and
  // throughputs: a shrink may come in an incremental one, and must count against the limit.
  elastic_.settled_idle.clear();
  elastic_.settled_idle_by_delay.clear();
  in.elastic = &elastic_;
  if (!incremental) {
    // The delays queues set of their own (Queue::elastic_idle_delay_seconds), besides the flag's.
    std::set<int64_t> delays;
    for (const auto& [name, q] : queues_) {
      const int64_t delay = IdleDelayMs(&q, options_.elastic);
      if (delay != options_.elastic.idle_delay_ms) delays.insert(delay);
    }
    idle_.KeepWindow(delays.empty() ? 0 : *delays.rbegin());
    for (const auto& [resource, totals] : cluster_.GpuTotals()) {
      elastic_.settled_idle[resource] = idle_.Settled(resource, now);
      for (int64_t delay : delays) {
        elastic_.settled_idle_by_delay[resource][delay] = idle_.Settled(resource, now, delay);
      }
    }
  }
  if (options_.share_policy != SharePolicy::kGpuPacking && demand_.changes() != demand_seen_ &&
      std::any_of(in.pending.begin(), in.pending.end(),
                  [](const Job* job) { return job->spec.gpu_share > 0; })) {
    cluster_.SetSharePolicy(options_.share_policy, std::make_shared<const TaskMix>(demand_.Mix()));
    demand_seen_ = demand_.changes();
  }
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
    auto by = jobs_.find(p.by_job_id);
    const std::string why = PreemptionReason(p, by == jobs_.end() ? nullptr : &by->second);
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
  for (const auto& z : r.resizes) ResizeLocked(z, now);
  for (auto& [id, ranks] : r.claims) claims_[id] = std::move(ranks);
  for (const auto& start : r.starts) {
    claims_.erase(start.job_id);
    std::string why;
    if (auto job = jobs_.find(start.job_id); job != jobs_.end()) {
      why = PlacementReason(start, StartsDirectly(job->second.spec));
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
  // GPUs left idle after the pass: an elastic job grows into them once they stayed idle for
  // the delay.
  for (const auto& [resource, totals] : cluster_.GpuTotals()) {
    idle_.Observe(resource, now, totals.total - totals.allocated);
  }
}

void Scheduler::ResizeLocked(const PassResult::Resize& z, int64_t now) {
  // Stopped like a preempted job; its own claim (z.ranks) ripens when its ranks have exited,
  // and a shrink's GPUs go to the claim of the job it shrank for.
  if (!z.by_job_id.empty()) preempting_[z.by_job_id].insert(z.job_id);
  if (auto s = CommitLocked(
          z.job_id, {.kind = JobInput::Kind::kResized, .reason = z.reason, .resized_to = z.to});
      !s.ok()) {
    RM_LOG(kError) << "resizing " << z.job_id << ": " << s;
    if (!z.by_job_id.empty()) {
      preempting_[z.by_job_id].erase(z.job_id);
      if (preempting_[z.by_job_id].empty()) preempting_.erase(z.by_job_id);
    }
    return;
  }
  claims_[z.job_id] = z.ranks;
  auto& times = elastic_.resized_at_ms[z.job_id];
  std::erase_if(times, [&](int64_t t) { return t <= now - kResizeWindowMs; });
  times.push_back(now);
  if (metrics_) {
    auto job = jobs_.find(z.job_id);
    metrics_->resizes
        .Add({{"queue", job == jobs_.end() ? "" : job->second.spec.queue},
              {"direction", z.to > z.from ? "grow" : "shrink"}})
        .Increment();
  }
}

absl::StatusOr<Job> Scheduler::GetJob(const std::string& job_id) {
  absl::StatusOr<std::optional<Job>> live = GetLiveJob(job_id);
  if (!live.ok()) return live.status();
  absl::StatusOr<Job> job = live->has_value() ? **live : store_->GetJob(job_id);
  if (job.ok()) FillArrayStatus(*job);
  if (job.ok() && IsElastic(job->spec)) {
    // Its resizes, from the stored events: a read of the store, off the lock, for elastic
    // jobs only.
    absl::StatusOr<std::vector<JobEvent>> events = store_->ListEvents(job_id, 0);
    if (!events.ok()) return events.status();
    for (JobEvent& e : *events) {
      if (IsResizeReason(e.reason)) job->resizes.push_back(std::move(e));
    }
  }
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
    MutexLock lock(&mu_);
    for (Job& job : page.jobs) {
      auto it = jobs_.find(job.id);
      if (it != jobs_.end()) job.pending_reason = it->second.pending_reason;  // never stored
    }
  }
  for (Job& job : page.jobs) FillArrayStatus(job);
  return page;
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

std::string Scheduler::NewToken() {
  // OpenSSL's generator: unguessable, and no system call per token (std::random_device read
  // the kernel for every 4 bytes, under mu_).
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof(raw)) != 1) {
    // Only without any entropy source; a token must never be predictable.
    RM_LOG(kError) << "RAND_bytes failed; no token can be made";
    std::abort();
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(raw), sizeof(raw)));
}

}  // namespace ringmaster::scheduler
