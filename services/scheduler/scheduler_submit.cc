// Submits and cancels: validation, dependencies named, the live-job bounds
// (core/live_bounds.h), the hand-over to the submit writer and the answers (see "Submit").
#include <random>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "core/live_bounds.h"
#include "core/validation.h"
#include "scheduler.h"

namespace ringmaster::scheduler {

namespace {
constexpr size_t kMaxReasonBytes = 256;
}  // namespace

namespace {

// Another team's job reads as one that does not exist: ids reveal nothing.
absl::Status NoSuchDependency(const std::string& job_id) {
  return absl::NotFoundError(
      absl::StrCat("after: no job ", job_id, " (only your team's jobs can be named)"));
}

}  // namespace

void Scheduler::ObserveSubmitWait(Waiter& waiter, std::chrono::steady_clock::time_point handed) {
  MutexLock lock(&waiter.mu);
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

void Scheduler::SubmitAsync(const JobSpec& spec, const std::string& request_id,
                            const std::string& team, std::optional<AuditRecord> audit,
                            SubmitDone done, bool admin,
                            const std::function<void(std::function<void()>)>& aside) {
  if (auto s = ValidateRequestId(request_id); !s.ok()) return done(s);
  auto valid = ValidateJobSpec(spec);
  if (!valid.ok()) return done(valid.status());
  if (valid->gpu_memory > 0) {
    absl::Status fits;
    {
      MutexLock lock(&mu_);
      std::vector<const Worker*> workers;
      workers.reserve(workers_.size());
      for (const auto& [id, w] : workers_) workers.push_back(&w);
      fits = CheckGpuMemoryFits(*valid, workers);
    }
    if (!fits.ok()) return done(fits);
  }
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
      MutexLock lock(&mu_);
      named = CheckLiveDependenciesLocked(job.spec, team, admin, &read);
    }
    if (!named.ok()) return create->done(named);
    if (read) {
      // Jobs that are not live: only Postgres knows whether they exist, whose they are and how
      // they ended.
      auto read_ends = [this, create, team, admin] {
        for (const Dependency& d : create->job.spec.after) {
          {
            MutexLock lock(&mu_);
            if (jobs_.contains(d.job_id)) continue;  // its team was checked
          }
          absl::StatusOr<Job> named_job = store_->GetJob(d.job_id);
          if (absl::IsNotFound(named_job.status()) ||
              (named_job.ok() && !admin && named_job->team != team)) {
            return create->done(NoSuchDependency(d.job_id));
          }
          if (!named_job.ok()) return create->done(named_job.status());
          if (IsTerminal(named_job->state)) {
            MutexLock lock(&mu_);
            deps_.Remember(d.job_id, named_job->state);
          }
        }
        SubmitChecked(create, team, admin, nullptr);  // aside already: it may wait
      };
      if (aside) return aside(std::move(read_ends));
      return read_ends();
    }
  }
  SubmitChecked(std::move(create), team, admin, aside);
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

void Scheduler::SubmitChecked(std::shared_ptr<Create> create, const std::string& team, bool admin,
                              const Aside& aside) {
  const Job& job = create->job;
  absl::Status refused;
  {
    // Held until the job is among the writer's creates in flight: a queue is not deleted under
    // a job on its way to Postgres.
    if (!queue_writes_.ReaderTryLock()) {
      // A queue or volume write holds it across a Postgres call: wait for it aside, never on
      // the caller's (gRPC callback) thread.
      if (aside) {
        return aside([this, create, team, admin] { SubmitChecked(create, team, admin, nullptr); });
      }
      queue_writes_.ReaderLock();
    }
    ReaderMutexLock queue_guard(&queue_writes_, std::adopt_lock);
    {
      MutexLock lock(&mu_);
      if (!queues_.contains(job.spec.queue)) {
        refused = absl::NotFoundError(
            absl::StrCat("queue: no queue '", job.spec.queue,
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
  LiveLoad load;
  for (JobState state : {JobState::kPending, JobState::kStarting, JobState::kRunning}) {
    if (auto it = live_counts_.find({state, queue}); it != live_counts_.end()) {
      load.in_queue += it->second;
    }
  }
  MutexLock lock(&submitting_mu_);
  load.jobs = static_cast<int64_t>(jobs_.size()) + submitting_total_;
  if (auto it = submitting_.find(queue); it != submitting_.end()) load.in_queue += it->second;
  load.spec_bytes = live_spec_bytes_ + submitting_spec_bytes_;
  const LiveBounds bounds{options_.max_live_jobs, options_.max_live_jobs_per_queue,
                          options_.max_live_spec_bytes};
  if (auto s = CheckLiveBounds(load, bounds, queue, bytes); !s.ok()) return s;
  ++submitting_total_;
  ++submitting_[queue];
  submitting_spec_bytes_ += bytes;
  return absl::OkStatus();
}

void Scheduler::ReleaseLiveJob(const JobSpec& spec) {
  MutexLock lock(&submitting_mu_);
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
  {
    MutexLock lock(&waiter->mu);  // no other thread has it yet: for the analysis, uncontended
    waiter->on_done = [this, create](Waiter& w, absl::StatusOr<CreateJobResult> result) {
      Created(create, w, std::move(result));
    };
  }
  Write write;
  write.job_write = {JobWrite::Kind::kCreate,
                     job,
                     JobEvent{job.id, 1, JobState::kPending, 0, "submitted", 0, job.created_at_ms},
                     false,
                     std::nullopt,
                     create->audit};
  if (write.job_write.audit) write.job_write.audit->resource = job.id;
  write.waiter = waiter;
  create->handed = std::chrono::steady_clock::now();
  // Not started, or stopping: nothing would store it (answered already).
  if (!answers_.Track(waiter, create->handed + std::chrono::milliseconds(options_.write_wait_ms))) {
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
  if (created.ok() && created->existing) {
    if (absl::Status reuse = CheckRequestIdReuse(created->job, job); !reuse.ok()) {
      created = reuse;
    } else {
      // The earlier job, as live now if it is.
      MutexLock view(&view_mu_);
      if (auto it = stored_.find(created->job.id); it != stored_.end()) created->job = it->second;
    }
  }
  ReleaseLiveJob(job.spec);
  SubmitDone done = std::move(create->done);
  create->done = nullptr;
  done(std::move(created));
}

absl::StatusOr<Job> Scheduler::Cancel(const std::string& job_id, const std::string& reason) {
  return AwaitAnswer<absl::StatusOr<Job>>([&](CancelDone done) {
    CancelAsync(job_id, reason, std::move(done), [](std::function<void()> task) { task(); });
  });
}

void Scheduler::CancelAsync(const std::string& job_id, const std::string& reason, CancelDone done,
                            const Aside& aside) {
  if (auto s = ValidateJobId(job_id); !s.ok()) return done(s);
  if (reason.size() > kMaxReasonBytes) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("reason: must be at most ", kMaxReasonBytes, " bytes, got ", reason.size())));
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
  {
    MutexLock lock(&waiter->mu);  // no other thread has it yet: for the analysis, uncontended
    waiter->on_done = [done](Waiter&, absl::StatusOr<CreateJobResult> stored) {
      if (!stored.ok()) return done(stored.status());
      done(std::move(stored->job));
    };
  }
  absl::Status decided;
  {
    MutexLock lock(&mu_);
    decided = jobs_.count(job_id) > 0 ? CommitLocked(job_id, {JobInput::Kind::kCancel, why}, waiter)
                                      : absl::NotFoundError("not live");
  }
  if (!decided.ok()) {
    {
      // Nothing queued with it: answered here, not by its destructor.
      MutexLock lock(&waiter->mu);
      waiter->on_done = nullptr;
    }
    if (decided.code() != absl::StatusCode::kNotFound) return done(decided);
    // Not live here: ended (or never existed); the store says which.
    aside([this, job_id, done] {
      auto stored = store_->GetJob(job_id);
      if (!stored.ok()) return done(stored.status());
      if (IsTerminal(stored->state)) {
        return done(absl::FailedPreconditionError(
            absl::StrCat("job ", job_id, " already ended (", JobStateName(stored->state), ")")));
      }
      done(absl::UnavailableError(absl::StrCat("job ", job_id, " is being stored; retry")));
    });
    return;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.write_wait_ms);
  answers_.Track(waiter, deadline);
}

std::string Scheduler::NewJobId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrCat("j-", absl::Hex(rng() & 0xffffffffffffULL, absl::kZeroPad12));
}

}  // namespace ringmaster::scheduler
