// The worker protocol: registration and reconciliation, heartbeats and liveness, rank reports,
// pre-run check results, probation and worker health. The decisions are core/worker_protocol.h
// and core/health_check.h; this applies them to the live state under mu_.
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "core/validation.h"
#include "core/worker_protocol.h"
#include "scheduler.h"

namespace ringmaster::scheduler {

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
  SilentWorkers silent =
      SweepSilentWorkers(workers_, alive, clock_->NowMs(), options_.heartbeat_timeout_ms);
  beats->insert(beats->end(), silent.beats.begin(), silent.beats.end());
  for (const std::string& id : silent.lost) {
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
    // Closed by the pass once mu_ is free: closing finishes the gRPC call.
    closing_.push_back(std::move(it->second));
    links_.erase(it);
  }
  FailJobsOnWorkerLocked(worker_id, absl::StrCat("worker ", worker_id, " lost (", why, ")"));
}

// Fails every live attempt with a rank on `worker_id`.
void Scheduler::FailJobsOnWorkerLocked(const std::string& worker_id, const std::string& reason) {
  std::vector<std::string> failed;
  // Only STARTING and RUNNING jobs hold a placement: a loss must not walk a backlog of pending
  // jobs.
  for (const std::string& id : placed_ids_) {
    const Job& job = jobs_.at(id);
    if (std::any_of(job.placement.begin(), job.placement.end(),
                    [&](const RankPlacement& r) { return r.worker_id == worker_id; })) {
      failed.push_back(id);
    }
  }
  for (const std::string& id : failed) {
    if (auto s = CommitLocked(id, {JobInput::Kind::kFailed, reason}); !s.ok()) {
      RM_LOG(kError) << "failing " << id << ": " << s;
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
  if (it->second.resized) ripe_claims_.insert(attempt.first);
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

absl::Status Scheduler::RegisterWorker(const Worker& worker, const std::vector<HeldRank>& held,
                                       std::shared_ptr<WorkerLink> link) {
  if (auto s = ValidateWorker(worker); !s.ok()) return s;
  {
    MutexLock lock(&mu_);
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

    // Reconcile what the worker holds with what we placed there (core/worker_protocol.h).
    std::vector<const Job*> placed;
    for (const std::string& id : placed_ids_) placed.push_back(&jobs_.at(id));
    Reconciliation r = ReconcileWorker(
        w.id, held,
        [this](const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> const Job* {
          auto it = jobs_.find(id);
          return it == jobs_.end() ? nullptr : &it->second;
        },
        placed,
        [this](const std::string& id, int32_t rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          auto t = trackers_.find(id);
          return t != trackers_.end() && t->second.Started(rank);
        });
    for (const HeldRank& h : r.orphans) {
      if (h.stopping && !h.exited) HoldStoppingRankLocked(w, h, now);
      link->SendStop(h.job_id, h.attempt, "no live attempt holds this rank", 0);
    }
    for (const auto& end : r.ends) {
      if (auto s = CommitLocked(end.job_id, end.input); !s.ok()) {
        RM_LOG(kError) << "reconciling " << end.job_id << ": " << s;
      }
    }
    for (const RankReport& report : r.replay) HandleRankLocked(w.id, report);
  }
  aside_.Beat(worker.id);
  Wake();
  return absl::OkStatus();
}

void Scheduler::Heartbeat(const std::string& worker_id) {
  {
    MutexLock lock(&mu_);
    auto it = workers_.find(worker_id);
    if (it == workers_.end() || it->second.state != WorkerState::kReady) return;
    it->second.last_heartbeat_ms = clock_->NowMs();
  }
  aside_.Beat(worker_id);
}

// A checkpoint is no state change: no event, only the job's checkpoint fields, stored in
// decision order with the rest (so a restarted scheduler and GetJob of an ended job know it,
// and a commit of an older copy of the job cannot hide it from the view).
void Scheduler::RecordCheckpointLocked(const std::string& worker_id, const RankReport& report) {
  auto it = jobs_.find(report.job_id);
  if (it == jobs_.end() || !AcceptsCheckpoint(it->second, report, clock_->NowMs())) return;
  Job& job = it->second;
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
  if (it == jobs_.end()) return;
  Job& job = it->second;
  switch (JudgeImageDigest(job, worker_id, report)) {
    case DigestVerdict::kIgnore:
      return;
    case DigestVerdict::kNotLauncher:
      RM_LOG(kWarning) << "worker " << worker_id << " reported an image digest for " << job.id
                       << " attempt " << report.attempt << ", whose launcher it is not; ignored";
      return;
    case DigestVerdict::kPin:
      break;
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
  MutexLock lock(&mu_);
  HandleRankLocked(worker_id, report);
}

void Scheduler::ReportRanks(const std::string& worker_id, const std::vector<RankReport>& reports) {
  MutexLock lock(&mu_);
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
  if (!PlacedOn(job, report.rank, worker_id)) {
    RM_LOG(kWarning) << "worker " << worker_id << " reported rank " << report.rank << " of "
                     << job.id << ", which is not placed there";
    return;
  }
  if (report.kind == RankReport::Kind::kProgress) {
    // STARTING too: a rank can be busy before the last rank's start reached us.
    const int64_t now = clock_->NowMs();
    auto [w, fresh] = watches_.try_emplace(
        job.id, Watched{job.attempt, RunWatch(static_cast<int32_t>(job.placement.size()), now)});
    if (!fresh && w->second.attempt != job.attempt) {
      w->second = Watched{job.attempt, RunWatch(static_cast<int32_t>(job.placement.size()), now)};
    }
    w->second.watch.OnReport(report.rank, report.activity, now);
    if (report.rank == 0 && report.activity.images_per_second.value_or(0) > 0 &&
        IsElastic(job.spec)) {
      // Rank 0's images/sec is the job's (the trainer reports the global rate): its
      // throughput at this size, which decides whom the next idle GPU goes to.
      auto& measured = measured_[job.id];
      measured[static_cast<int32_t>(job.placement.size())] = *report.activity.images_per_second;
      elastic_.throughput[job.id] = ThroughputCurve(measured);
    }
    return;
  }
  std::optional<JobInput> input = InputOfRankReport(job, worker_id, report, trackers_[job.id]);
  if (!input) return;
  if (auto s = CommitLocked(job.id, *input); !s.ok()) {
    RM_LOG(kError) << "rank report for " << report.job_id << ": " << s;
  }
}

void Scheduler::Disconnected(const std::string& worker_id, const WorkerLink* link) {
  MutexLock lock(&mu_);
  auto it = links_.find(worker_id);
  if (it == links_.end() || it->second.get() != link) return;  // replaced by a newer stream
  links_.erase(it);
  cluster_.SetWorkerState(worker_id, WorkerState::kLost);
  RM_LOG(kInfo) << "worker " << worker_id << " disconnected; lost if it does not return within "
                << options_.heartbeat_timeout_ms << " ms";
}

std::string Scheduler::ExpectedTransportLocked(const std::vector<RankPlacement>& placement) const {
  return ExpectedTransport(placement,
                           [this](const std::string& id)
                               ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> const std::vector<Gpu>* {
                                 auto w = workers_.find(id);
                                 return w == workers_.end() ? nullptr : &w->second.gpus;
                               });
}

// The pre-run check protocol is written at core/health_check.h, and decided by DecideCheck.
void Scheduler::ReportCheck(const std::string& worker_id, const CheckOutcome& outcome) {
  std::optional<CheckBaseline> learned;
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(outcome.job_id);
    // A check run inside the job's MPI_Init reports after the ranks started: RUNNING too.
    if (it == jobs_.end() || it->second.attempt != outcome.attempt ||
        (it->second.state != JobState::kStarting && it->second.state != JobState::kRunning)) {
      return;  // an earlier attempt, or a job that moved on: nothing to decide
    }
    const std::string job_id = it->second.id;
    const CheckDecision d = DecideCheck(
        it->second, worker_id, outcome,
        [this](const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          auto b = baselines_.find(key);
          return b == baselines_.end() ? 0.0 : b->second.busbw_gbps;
        },
        [this](const std::string& id)
            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cluster_.OnProbation(id); },
        [this](const std::string& id)
            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return workers_.contains(id); });
    if (d.ignored) {
      RM_LOG(kWarning) << "worker " << worker_id << " sent a check of " << outcome.job_id
                       << ", whose rank 0 is not placed there; ignored";
      return;
    }
    const std::string key = d.shape.Key();
    if (metrics_) {
      const char* result = outcome.passed ? "passed" : (outcome.completed ? "failed" : "error");
      metrics_->checks.Add({{"result", result}}).Increment();
      metrics_->check_seconds.Observe(outcome.seconds);
      if (outcome.completed) metrics_->check_busbw.Add({{"shape", key}}).Set(outcome.busbw_gbps);
    }
    if (d.learn) {
      auto base = baselines_.find(key);
      learned = UpdateBaseline(base != baselines_.end() ? base->second : CheckBaseline{key},
                               baseline_windows_[key], outcome.busbw_gbps, clock_->NowMs());
      baselines_[key] = *learned;
      if (metrics_) metrics_->check_baseline.Add({{"shape", key}}).Set(learned->busbw_gbps);
    }
    absl::Status s = CommitLocked(job_id, {JobInput::Kind::kChecked, d.text});
    for (const std::string& id : d.cleared) {
      if (auto w = workers_.find(id); s.ok() && w != workers_.end()) {
        ClearHealthLocked(w->second, absl::StrCat("passed the pre-run check of job ", job_id));
      }
    }
    if (s.ok() && d.blame == CheckDecision::Blame::kVerify) {
      if (auto j = jobs_.find(job_id); j != jobs_.end()) {
        j->second.separate_check_attempt = outcome.attempt + 1;
      }
      s = CommitLocked(job_id, {JobInput::Kind::kCheckFailed, d.replace_reason});
    } else if (s.ok() && d.blame == CheckDecision::Blame::kMark) {
      Worker& w = workers_.at(d.culprit);
      w.unhealthy_reason = d.unhealthy_reason;
      cluster_.SetWorkerHealthy(w.id, false);
      // Named again (or for the first time): the wait before probation starts now.
      unhealthy_since_ms_[w.id] = clock_->NowMs();
      cluster_.SetWorkerProbation(w.id, false);
      Write write;
      write.worker = w;
      writer_.Enqueue(std::move(write));
      RM_LOG(kWarning) << "worker " << w.id << " is unhealthy: " << w.unhealthy_reason;
      s = CommitLocked(job_id, {JobInput::Kind::kCheckFailed, d.replace_reason});
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
  MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("no worker ", worker_id));
  }
  Worker& w = it->second;
  if (!w.unhealthy_reason.empty()) ClearHealthLocked(w, "cleared by an admin");
  return WorkerView{w, cluster_.AllocatedGpus(w.id), cluster_.CpuSlotsUsed(w.id), false,
                    cluster_.GpuUses(w.id)};
}

std::map<std::string, CheckBaseline> Scheduler::CheckBaselines() {
  MutexLock lock(&mu_);
  return baselines_;
}

std::vector<WorkerView> Scheduler::ListWorkers() {
  MutexLock lock(&mu_);
  std::vector<WorkerView> out;
  for (const auto& [id, w] : workers_) {
    out.push_back({w, cluster_.AllocatedGpus(id), cluster_.CpuSlotsUsed(id),
                   cluster_.OnProbation(id), cluster_.GpuUses(id)});
  }
  return out;
}

}  // namespace ringmaster::scheduler
