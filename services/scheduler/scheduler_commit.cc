// What a decision does (see "Place" and the locking rule above Scheduler): CommitLocked applies
// it to the live state and hands its write to the writer under mu_; AfterCommit, once the write
// is stored, takes it into the readers' view, sends assignments and stops to the workers (mu_
// free), answers waiters, publishes events and feeds the queue mirror.
#include "scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ringmaster::scheduler {

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
  const bool stopping =
      input.kind == JobInput::Kind::kPreempted || input.kind == JobInput::Kind::kResized;
  if (stopping) {
    // Its ranks get the grace period to checkpoint; their GPUs are theirs until they exit.
    Draining& d = draining_[{job_id, from_attempt}];
    d.held = it->second;
    d.resized = input.kind == JobInput::Kind::kResized;
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
    if (!stopping) newly_pending_.insert(job_id);
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
    elastic_.resized_at_ms.erase(job_id);
    elastic_.throughput.erase(job_id);
    measured_.erase(job_id);
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
    std::optional<RegistryCredential> registry_auth;
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
    MutexLock lock(&mu_);
    MutexLock view(&view_mu_);
    for (Write& w : batch) {
      if (w.job_write.job.id.empty()) continue;
      const Job& job = w.job_write.job;
      if (w.job_write.kind == JobWrite::Kind::kCreate) {
        const auto& created = result.created[created_index++];
        if (w.in_order) --tasks_in_flight_;
        if (w.waiter) {
          MutexLock wl(&w.waiter->mu);
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
          MutexLock wl(&w.waiter->mu);
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
        MutexLock wl(&w.waiter->mu);
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
        CheckPlan plan = PlanCheck(
            job, options_.health_check, options_.check_min_ratio,
            ExpectedTransportLocked(job.placement),
            [this](const std::string& id)
                ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cluster_.OnProbation(id); },
            [this](const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
              auto b = baselines_.find(key);
              return b == baselines_.end() ? 0.0 : b->second.busbw_gbps;
            });
        if (plan.run) plan.token = NewToken();
        std::optional<RegistryCredential> registry_auth = AuthForImage(
            registry_credentials_, unreadable_registry_credentials_, job.team, job.spec.image);
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
          assignment.registry_auth = registry_auth;
        }
      }
    }
  }
  if (!unrunnable.empty() || !orphans.empty()) {
    MutexLock lock(&mu_);
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
      send.link->SendLaunchWithAuth(*send.job, send.plan, send.mounts, send.registry_auth);
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

absl::StatusOr<std::optional<Job>> Scheduler::GetLiveJob(const std::string& job_id) {
  if (auto s = ValidateJobId(job_id); !s.ok()) return s;
  std::optional<Job> live;
  {
    MutexLock view(&view_mu_);
    auto it = stored_.find(job_id);
    if (it != stored_.end()) live = it->second;
  }
  if (live) {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it != jobs_.end()) live->pending_reason = it->second.pending_reason;
  }
  return live;
}

}  // namespace ringmaster::scheduler
