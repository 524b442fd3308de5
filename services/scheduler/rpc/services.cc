#include "scheduler/rpc/services.h"

#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/tls.h"
#include "common/utf8.h"
#include "scheduler/convert/convert.h"
#include "scheduler/core/event_cursor.h"

namespace ringmaster::scheduler {

namespace {

constexpr const char* kRedacted = "<redacted>";
// RankStatuses.statuses: a worker's batch; more is not a batch of one host's ranks.
constexpr int kMaxRankStatuses = 1024;

// The job as `who` may read it: env values of a command only for the job's own team.
v1::Job JobFor(const Principal& who, const Job& job) {
  v1::Job out = ToProto(job);
  out.set_team(job.team);
  if (job.team != who.team && out.spec().has_command()) {
    for (auto& [name, value] : *out.mutable_spec()->mutable_command()->mutable_env()) {
      value = kRedacted;
    }
  }
  return out;
}

absl::Status NoSuchJob(const std::string& job_id) {
  return absl::NotFoundError(absl::StrCat("no job ", job_id));
}

// `job` if `who` may see it; NOT_FOUND, the same as for a job that does not exist, if not.
absl::StatusOr<Job> VisibleJobOf(Job job, const Principal& who, const std::string& job_id) {
  if (!SeesTeam(who, job.team)) return NoSuchJob(job_id);
  return job;
}

// The same, reading the job (from Postgres when it is not live).
absl::StatusOr<Job> VisibleJobOf(Scheduler* scheduler, const Principal& who,
                                 const std::string& job_id) {
  auto job = scheduler->GetJob(job_id);
  if (!job.ok()) {
    if (job.status().code() == absl::StatusCode::kNotFound) return NoSuchJob(job_id);
    return job.status();
  }
  return VisibleJobOf(*std::move(job), who, job_id);
}

}  // namespace

absl::StatusOr<Job> JobServiceImpl::VisibleJob(const Principal& who, const std::string& job_id) {
  return VisibleJobOf(scheduler_, who, job_id);
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* ctx,
                                                    const v1::SubmitJobRequest* req,
                                                    v1::SubmitJobResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // The service outlives the call: the server's shutdown waits for every reactor to finish.
  auth_->CheckAsync(*ctx, Action::kSubmitJob,
                    [this, ctx, req, resp, reactor](absl::StatusOr<Principal> who) {
                      StartSubmit(ctx, req, resp, reactor, std::move(who));
                    });
  return reactor;
}

void JobServiceImpl::StartSubmit(grpc::CallbackServerContext* ctx,
                                 const v1::SubmitJobRequest* req, v1::SubmitJobResponse* resp,
                                 grpc::ServerUnaryReactor* reactor,
                                 absl::StatusOr<Principal> who) {
  auto fail = [reactor](const absl::Status& s) { reactor->Finish(ToGrpcStatus(s)); };
  if (!who.ok()) return fail(who.status());
  if (!req->has_spec()) return fail(absl::InvalidArgumentError("spec: is required"));
  auto spec = FromProto(req->spec());
  if (!spec.ok()) return fail(spec.status());
  // Members submit only to the queues bound to their team (an unknown queue is left to Submit,
  // whose NOT_FOUND names it).
  const std::string queue = spec->queue.empty() ? std::string(kDefaultQueue) : spec->queue;
  if (auto teams = scheduler_->QueueTeams(queue); teams && !MaySubmitToQueue(*who, *teams)) {
    return fail(absl::PermissionDeniedError(
        absl::StrCat("missing right jobs.write on queue \"", queue, "\": it is bound to teams ",
                     absl::StrJoin(*teams, ", "), ", not to \"", who->team, "\"")));
  }
  // The audit entry is stored with the job, in its transaction: none is lost, and it costs no
  // transaction of its own.
  AuditRecord record =
      auth_->Record(*who, *ctx, Action::kSubmitJob, "", absl::StrCat("queue=", queue));
  // Copied first: the callback below takes the principal.
  const std::string team = who->team;
  const bool admin = who->role == Role::kAdmin;
  scheduler_->SubmitAsync(
      *spec, req->request_id(), team, std::move(record),
      [reactor, resp, caller = *std::move(who)](absl::StatusOr<CreateJobResult> result) {
        if (!result.ok()) {
          reactor->Finish(ToGrpcStatus(result.status()));
          return;
        }
        *resp->mutable_job() = JobFor(caller, result->job);
        resp->set_existing(result->existing);
        reactor->Finish(grpc::Status::OK);
      },
      admin,
      // Jobs named in `after` that are not live are read from Postgres: on the work threads.
      [this](std::function<void()> task) { Post(std::move(task)); });
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                                    v1::Job* resp) {
  auto who = auth_->Check(*ctx, Action::kGetJob);
  if (!who.ok()) return ToGrpcStatus(who.status());
  auto job = VisibleJob(*who, req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp = JobFor(*who, *job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                                      v1::ListJobsResponse* resp) {
  auto who = auth_->Check(*ctx, Action::kListJobs);
  if (!who.ok()) return ToGrpcStatus(who.status());
  JobListQuery query;
  if (req->state() != v1::JOB_STATE_UNSPECIFIED) {
    query.state = FromProto(req->state());
    if (!query.state) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("state: unknown value ", static_cast<int>(req->state()))));
    }
  }
  query.queue = req->queue();
  query.label_selector = req->label_selector();
  query.array_id = req->array_id();
  query.page_size = req->page_size() != 0 ? req->page_size() : req->limit();
  if (req->page_size() == 0) {
    // The deprecated field is checked under its own name: an error must name what was sent.
    if (auto s = EffectivePageSize(req->limit(), "limit"); !s.ok()) return ToGrpcStatus(s.status());
  }
  query.page_token = req->page_token();
  if (who->role != Role::kAdmin) query.team = who->team;
  auto page = scheduler_->ListJobs(query);
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const Job& job : page->jobs) *resp->add_jobs() = JobFor(*who, job);
  resp->set_next_page_token(page->next_page_token);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* ctx,
                                                    const v1::CancelJobRequest* req,
                                                    v1::CancelJobResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const int max = scheduler_->options().max_cancels;
  if (cancels_.fetch_add(1) >= max) {
    cancels_.fetch_sub(1);
    reactor->Finish(ToGrpcStatus(absl::ResourceExhaustedError(
        absl::StrCat("the scheduler has ", max,
                     " cancels on their way already (--max-cancels); retry when they ended"))));
    return reactor;
  }
  // Every path ends here, once. The service outlives the call: the server's shutdown waits
  // for every reactor to finish.
  auto finish = [this, reactor](const grpc::Status& status) {
    cancels_.fetch_sub(1);
    reactor->Finish(status);
  };
  // Once the job's visibility is known: the right, then the cancel itself.
  auto cancel = [this, ctx, req, resp, finish](const Principal& who,
                                              const absl::StatusOr<Job>& visible) {
    if (!visible.ok()) return finish(ToGrpcStatus(visible.status()));
    if (auto s = Authorize(who, Action::kCancelJob, visible->team); !s.ok()) {
      return finish(ToGrpcStatus(s));
    }
    scheduler_->CancelAsync(
        req->job_id(), req->reason(),
        [this, ctx, req, resp, finish, who](absl::StatusOr<Job> job) {
          if (!job.ok()) return finish(ToGrpcStatus(job.status()));
          auth_->Audit(who, *ctx, Action::kCancelJob, job->id, req->reason());
          *resp->mutable_job() = JobFor(who, *job);
          finish(grpc::Status::OK);
        },
        [this](std::function<void()> task) { Post(std::move(task)); });
  };
  auth_->AuthenticateAsync(
      *ctx, [this, req, finish, cancel](absl::StatusOr<Principal> who) {
        if (!who.ok()) return finish(ToGrpcStatus(who.status()));
        // A live job is in memory; only an ended one (or none) needs a read of Postgres, and
        // that goes to the work threads, not gRPC's.
        absl::StatusOr<std::optional<Job>> live = scheduler_->GetLiveJob(req->job_id());
        if (!live.ok() || live->has_value()) {
          absl::StatusOr<Job> visible =
              live.ok() ? VisibleJobOf(**live, *who, req->job_id()) : live.status();
          return cancel(*who, visible);
        }
        Post([this, req, cancel, who = *std::move(who)] {
          cancel(who, VisibleJob(who, req->job_id()));
        });
      });
  return reactor;
}

namespace {

constexpr int kWorkThreads = 4;

// One WatchJob on gRPC's callback API, with no thread while it waits: the scheduler pushes the
// job's new events to it (Scheduler::WatchFeed), and it writes them one at a time. What may
// wait on Postgres (the job's visibility, the events stored before, a catch-up after a gap) runs
// on the service's work threads (`post`). Its own reference keeps it until gRPC is done with it
// (OnDone); tasks queued for it hold one too.
class JobWatch final : public grpc::ServerWriteReactor<v1::JobEvent>,
                       public std::enable_shared_from_this<JobWatch> {
 public:
  using Post = std::function<void(std::function<void()>)>;
  JobWatch(Scheduler* scheduler, Post post, std::string job_id, std::atomic<int>* live)
      : scheduler_(scheduler), post_(std::move(post)), live_(live) {
    feed_.job_id = std::move(job_id);
    feed_.push = [this](const std::vector<JobEvent>& events) { Pushed(events); };
  }
  ~JobWatch() override { live_->fetch_sub(1); }

  void Start(std::shared_ptr<JobWatch> self) { self_ = std::move(self); }

  // The caller is known, or refused: the rest of the start may read Postgres.
  void Authenticated(absl::StatusOr<Principal> who) {
    if (!who.ok()) return End(ToGrpcStatus(who.status()));
    post_([self = shared_from_this(), who = *std::move(who)] { self->Begin(who); });
  }

  void End(const grpc::Status& status) {
    bool registered = false;
    {
      MutexLock lock(&mu_);
      if (!end_) end_ = status;
      // Finished once no write is in flight: OnWriteDone finishes it otherwise.
      if (finished_ || writing_) return;
      finished_ = true;
      registered = registered_;
    }
    Close(registered);
  }

  void OnWriteDone(bool ok) override {
    const v1::JobEvent* next = nullptr;
    bool registered = false;
    bool finish = false;
    {
      MutexLock lock(&mu_);
      writing_ = false;
      out_.pop_front();
      if (!ok && !end_) end_ = grpc::Status::OK;  // the caller is gone
      // The job ended: all sent.
      if (!end_ && out_.empty() && cursor_.done()) end_ = grpc::Status::OK;
      if (!end_ && !out_.empty()) {
        writing_ = true;
        next = &out_.front();
      } else if (end_ && !finished_) {
        finished_ = true;
        finish = true;
        registered = registered_;
      }
    }
    if (next != nullptr) StartWrite(next);
    if (finish) Close(registered);
  }

  void OnCancel() override { End(grpc::Status::CANCELLED); }

  void OnDone() override {
    std::shared_ptr<JobWatch> last;
    {
      MutexLock lock(&mu_);
      last = std::move(self_);  // may be the last reference
    }
  }

 private:
  // On a work thread: the job must be visible to the caller; then the feed is registered
  // before the stored events are read, so none stored meanwhile is missed.
  void Begin(const Principal& who) {
    {
      MutexLock lock(&mu_);
      if (finished_) return;
    }
    auto job = VisibleJobOf(scheduler_, who, feed_.job_id);
    if (!job.ok()) return End(ToGrpcStatus(job.status()));
    if (auto s = scheduler_->BeginWatch(&feed_); !s.ok()) return End(ToGrpcStatus(s));
    bool registered = false;
    {
      MutexLock lock(&mu_);
      registered = registered_ = !finished_;
    }
    if (!registered) {
      scheduler_->EndWatch(&feed_);  // ended meanwhile, before it was registered
      return;
    }
    CatchUp();
  }

  // On a work thread, with catching_up_ set: the events stored after the last one queued, then
  // those pushed meanwhile.
  void CatchUp() {
    int64_t after = 0;
    {
      MutexLock lock(&mu_);
      if (finished_) return;
      after = cursor_.last();
    }
    auto events = scheduler_->EventsAfter(feed_.job_id, after);
    if (!events.ok()) return End(ToGrpcStatus(events.status()));
    const v1::JobEvent* first = nullptr;
    bool gap = false;
    {
      MutexLock lock(&mu_);
      if (finished_) return;
      QueueLocked(*events, /*stored=*/true);
      std::vector<JobEvent> pushed;
      pushed.swap(pushed_);
      gap = QueueLocked(pushed, /*stored=*/false);
      catching_up_ = gap;
      first = NextWriteLocked();
    }
    if (first != nullptr) StartWrite(first);
    if (gap) post_([self = shared_from_this()] { self->CatchUp(); });
  }

  // On the scheduler's writer thread, under its watch lock: nothing here may block or finish
  // the call (which would unregister the feed under that lock), so a write is started from a
  // work thread.
  void Pushed(const std::vector<JobEvent>& events) {
    bool gap = false;
    bool write = false;
    {
      MutexLock lock(&mu_);
      if (finished_) return;
      if (catching_up_) {
        pushed_.insert(pushed_.end(), events.begin(), events.end());
        return;
      }
      gap = QueueLocked(events, /*stored=*/false);
      catching_up_ = gap;
      write = !writing_ && !out_.empty();
    }
    if (gap) {
      post_([self = shared_from_this()] { self->CatchUp(); });
    } else if (write) {
      post_([self = shared_from_this()] { self->Write(); });
    }
  }

  void Write() {
    const v1::JobEvent* first = nullptr;
    {
      MutexLock lock(&mu_);
      first = NextWriteLocked();
    }
    if (first != nullptr) StartWrite(first);
  }

  // Queues the events not queued yet, in order, up to the job's end. True when one is missing
  // (a pushed event past the next one): a catch-up from Postgres fills the gap.
  bool QueueLocked(const std::vector<JobEvent>& events, bool stored)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Called by Advance, a template the analysis does not see mu_ held in (it is: here).
    return cursor_.Advance(events, stored, [&](const JobEvent& e) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      out_.push_back(ToProto(e));
      return true;
    });
  }

  // The event to write next, when none is being written (marked as being written).
  const v1::JobEvent* NextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || end_ || writing_ || out_.empty()) return nullptr;
    writing_ = true;
    return &out_.front();
  }

  void Close(bool registered) {
    std::optional<grpc::Status> status;
    {
      MutexLock lock(&mu_);
      status = end_;
    }
    // After this no push comes (the scheduler pushes under the lock EndWatch takes).
    if (registered) scheduler_->EndWatch(&feed_);
    Finish(*status);
  }

  Scheduler* const scheduler_;
  const Post post_;
  std::atomic<int>* const live_;
  Scheduler::WatchFeed feed_;
  Mutex mu_;
  std::shared_ptr<JobWatch> self_;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;  // feed_ is registered with the scheduler
  // A read of stored events is due or running; pushes wait.
  bool catching_up_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<JobEvent> pushed_ ABSL_GUARDED_BY(mu_);  // events pushed while catching up
  // Queued; the front one is being written when writing_.
  std::deque<v1::JobEvent> out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  EventCursor cursor_ ABSL_GUARDED_BY(mu_);  // the events queued; done() once the job's last one is
  // The call ends with this once no write is in flight.
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called (or is about to be)
};

}  // namespace

JobServiceImpl::JobServiceImpl(Scheduler* scheduler, Authenticator* auth, LogRelay* logs)
    : scheduler_(scheduler), auth_(auth), logs_(logs) {
  for (int i = 0; i < kWorkThreads; ++i) work_threads_.emplace_back([this] { WorkLoop(); });
}

JobServiceImpl::~JobServiceImpl() {
  {
    MutexLock lock(&work_mu_);
    stopping_ = true;
  }
  work_cv_.NotifyAll();
  for (std::thread& t : work_threads_) t.join();
}

void JobServiceImpl::Post(std::function<void()> task) {
  {
    MutexLock lock(&work_mu_);
    work_.push_back(std::move(task));
  }
  work_cv_.NotifyOne();
}

void JobServiceImpl::WorkLoop() {
  MutexLock lock(&work_mu_);
  while (true) {
    work_cv_.Wait(&work_mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(work_mu_) {
      return stopping_ || !work_.empty();
    });
    // At a stop the server has finished every call: what is left is dropped.
    if (stopping_) return;
    std::function<void()> task = std::move(work_.front());
    work_.pop_front();
    lock.Unlock();
    task();
    task = nullptr;  // its references go before the lock is taken again
    lock.Lock();
  }
}

grpc::ServerWriteReactor<v1::JobEvent>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* ctx, const v1::WatchJobRequest* req) {
  const int live = watches_.fetch_add(1) + 1;
  auto watch = std::make_shared<JobWatch>(
      scheduler_, [this](std::function<void()> task) { Post(std::move(task)); }, req->job_id(),
      &watches_);
  watch->Start(watch);
  if (live > scheduler_->options().max_watchers) {
    watch->End(ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
        "the scheduler serves ", scheduler_->options().max_watchers,
        " watches already (--max-watchers); try again when one of them ended"))));
    return watch.get();
  }
  // The token is read from `ctx` before this returns; the answer may come later.
  auth_->CheckAsync(*ctx, Action::kWatchJob, [watch](absl::StatusOr<Principal> who) {
    watch->Authenticated(std::move(who));
  });
  return watch.get();
}

grpc::Status JobServiceImpl::ReadJobLogs(grpc::ServerContext* ctx,
                                         const v1::ReadJobLogsRequest* req,
                                         grpc::ServerWriter<v1::LogChunk>* writer) {
  // Every check before any worker hears of the call: token, visibility, right, range.
  auto who = auth_->Authenticate(*ctx);
  if (!who.ok()) return ToGrpcStatus(who.status());
  auto job = VisibleJob(*who, req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  if (auto s = Authorize(*who, Action::kReadJobLogs, job->team); !s.ok()) return ToGrpcStatus(s);
  std::vector<Worker> workers;
  for (WorkerView& view : scheduler_->ListWorkers()) workers.push_back(std::move(view.worker));
  std::optional<int32_t> attempt;
  if (req->has_attempt()) attempt = req->attempt();
  absl::StatusOr<LogPlan> plan = PlanLogRead(*job, req->rank(), attempt, workers);
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  if (logs_ == nullptr) {
    return ToGrpcStatus(absl::UnimplementedError("this scheduler does not relay logs"));
  }
  return ToGrpcStatus(logs_->Relay(*plan, req->follow(), ctx, [&](const v1::LogChunk& chunk) {
    return writer->Write(chunk);
  }));
}

namespace {

// `admin`: the unhealthy reason names a job and its check output; other roles see only that the
// worker failed a check (a viewer must not learn other teams' job ids from it).
void FillWorkerInfo(const WorkerView& view, bool admin, v1::WorkerInfo* info) {
  info->set_worker_id(view.worker.id);
  info->set_address(view.worker.address);
  info->set_port(view.worker.port);
  for (const Gpu& gpu : view.worker.gpus) *info->add_gpus() = ToProto(gpu);
  info->set_cpu_slots(view.worker.cpu_slots);
  info->set_state(WorkerStateName(view.worker.state));
  for (int32_t g : view.allocated_gpus) info->add_allocated_gpus(g);
  for (const ClusterState::GpuUse& u : view.gpu_uses) {
    v1::GpuUse* use = info->add_gpu_uses();
    use->set_index(u.index);
    use->set_whole(u.whole);
    use->set_share(u.share);
    use->set_share_ranks(u.share_ranks);
    use->set_memory(u.memory);
  }
  info->set_cpu_slots_used(view.cpu_slots_used);
  info->set_last_heartbeat_ms(view.worker.last_heartbeat_ms);
  if (!view.worker.unhealthy_reason.empty()) {
    info->set_unhealthy_reason(admin ? view.worker.unhealthy_reason
                                     : "failed a pre-run allreduce check (an admin sees why)");
    info->set_on_probation(view.on_probation);
  }
}

}  // namespace

grpc::Status ClusterServiceImpl::ListWorkers(grpc::ServerContext* ctx,
                                             const v1::ListWorkersRequest*,
                                             v1::ListWorkersResponse* resp) {
  auto who = auth_->Check(*ctx, Action::kListWorkers);
  if (!who.ok()) return ToGrpcStatus(who.status());
  for (const WorkerView& view : scheduler_->ListWorkers()) {
    FillWorkerInfo(view, who->role == Role::kAdmin, resp->add_workers());
  }
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::ClearWorkerHealth(grpc::ServerContext* ctx,
                                                   const v1::ClearWorkerHealthRequest* req,
                                                   v1::ClearWorkerHealthResponse* resp) {
  auto who = auth_->Check(*ctx, Action::kClearWorkerHealth);
  if (!who.ok()) return ToGrpcStatus(who.status());
  absl::StatusOr<WorkerView> view = scheduler_->ClearWorkerHealth(req->worker_id());
  if (!view.ok()) return ToGrpcStatus(view.status());
  auth_->Audit(*who, *ctx, Action::kClearWorkerHealth, req->worker_id(), "");
  FillWorkerInfo(*view, /*admin=*/true, resp->mutable_worker());
  return grpc::Status::OK;
}

namespace {

absl::StatusOr<RankReport> FromProto(const v1::RankStatus& status) {
  RankReport report;
  report.job_id = status.job_id();
  report.attempt = status.attempt();
  report.rank = status.rank();
  report.exit_code = status.exit_code();
  report.signal = status.signal();
  report.message = status.message();
  switch (status.kind()) {
    case v1::RankStatus::KIND_STARTED: report.kind = RankReport::Kind::kStarted; break;
    case v1::RankStatus::KIND_EXITED: report.kind = RankReport::Kind::kExited; break;
    case v1::RankStatus::KIND_LAUNCH_FAILED: report.kind = RankReport::Kind::kLaunchFailed; break;
    case v1::RankStatus::KIND_CHECKPOINT:
      report.kind = RankReport::Kind::kCheckpoint;
      if (status.checkpoint_step() < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rank_status.checkpoint_step must be >= 0, got ", status.checkpoint_step()));
      }
      if (status.checkpoint_time_ms() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank_status.checkpoint_time_ms must be Unix milliseconds > 0, got ",
                         status.checkpoint_time_ms()));
      }
      report.checkpoint_step = status.checkpoint_step();
      report.checkpoint_time_ms = status.checkpoint_time_ms();
      break;
    case v1::RankStatus::KIND_IMAGE_RESOLVED:
      report.kind = RankReport::Kind::kImageResolved;
      if (auto s = ValidateImageDigest(status.image_digest(), "rank_status.image_digest");
          !s.ok()) {
        return s;
      }
      report.image_digest = status.image_digest();
      break;
    case v1::RankStatus::KIND_PROGRESS: {
      report.kind = RankReport::Kind::kProgress;
      if (!status.has_progress()) {
        return absl::InvalidArgumentError("rank_status.progress: required for KIND_PROGRESS");
      }
      const v1::RankProgress& p = status.progress();
      if (p.collectives_completed() > p.collectives_entered()) {
        return absl::InvalidArgumentError(
            "rank_status.progress.collectives_completed: must not exceed collectives_entered");
      }
      report.activity.collectives_entered = p.collectives_entered();
      report.activity.collectives_completed = p.collectives_completed();
      report.activity.step = p.step();
      report.activity.progress_reports = p.progress_reports();
      report.activity.stopped = p.stopped();
      if (p.has_mpi()) {
        if (p.mpi().for_ms() < 0 || p.mpi().call().size() > kMaxMpiCallBytes) {
          return absl::InvalidArgumentError(
              absl::StrCat("rank_status.progress.mpi: for_ms must be >= 0 and call at most ",
                           kMaxMpiCallBytes, " bytes"));
        }
        report.activity.mpi = MpiPosition{.inside = p.mpi().inside(),
                                          .call = p.mpi().call(),
                                          .for_ms = p.mpi().for_ms(),
                                          .calls_entered = p.mpi().calls_entered()};
      }
      // The printed images/sec, else the one reported with the step.
      if (status.has_images_per_second()) {
        report.activity.images_per_second = status.images_per_second();
      } else if (p.has_images_per_second()) {
        report.activity.images_per_second = p.images_per_second();
      }
      if (report.activity.images_per_second &&
          !(std::isfinite(*report.activity.images_per_second) &&
            *report.activity.images_per_second >= 0)) {
        return absl::InvalidArgumentError(
            "rank_status.images_per_second: must be a finite number >= 0");
      }
      break;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("rank_status.kind: unknown value ", static_cast<int>(status.kind())));
  }
  if (status.rank() < 0 || status.attempt() < 0) {
    return absl::InvalidArgumentError("rank_status: rank and attempt must not be negative");
  }
  return report;
}

// One worker's Connect stream on gRPC's callback API, with no thread of its own: with the
// synchronous API a thousand workers held two thousand threads, and their wake-ups were two
// thirds of the scheduler's CPU (docs/scheduler.md, Speed). Reads are handled in gRPC's
// callback threads as they arrive, so nothing here waits on Redis or Postgres (the scheduler
// does those round trips aside). Sends are queued and written one at a time, the next started
// when the last is done. It is also the scheduler's WorkerLink: its own reference keeps it
// until gRPC is done with it (OnDone), the scheduler's for as long as the scheduler holds it.
class WorkerStream final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage>,
      public WorkerLink {
 public:
  WorkerStream(Scheduler* scheduler, grpc::CallbackServerContext* ctx, bool verify_identity)
      : scheduler_(scheduler), ctx_(ctx), verify_identity_(verify_identity) {}

  void Start(std::shared_ptr<WorkerStream> self) {
    self_ = std::move(self);
    StartRead(&in_);
  }

  void SendAssignment(const Job& job) override { Enqueue(AssignmentOf(job)); }
  void SendAssignmentWithCheck(const Job& job, const CheckPlan& plan) override {
    SendLaunch(job, plan, {});
  }
  void SendLaunch(const Job& job, const CheckPlan& plan,
                  const std::vector<ResolvedMount>& mounts) override {
    SendLaunchWithAuth(job, plan, mounts, std::nullopt);
  }
  void SendLaunchWithAuth(const Job& job, const CheckPlan& plan,
                          const std::vector<ResolvedMount>& mounts,
                          const std::optional<RegistryCredential>& registry_auth) override {
    v1::SchedulerMessage msg = AssignmentOf(job);
    v1::Assignment* a = msg.mutable_assignment();
    a->set_run_check(plan.run);
    a->set_check_baseline_gbps(plan.baseline_gbps);
    a->set_check_min_ratio(plan.min_ratio);
    a->set_check_transport(plan.transport);
    a->set_check_separately(plan.separately);
    a->set_check_token(plan.token);
    for (const ResolvedMount& m : mounts) {
      v1::AssignedMount* mount = a->add_mounts();
      mount->set_volume(m.volume);
      mount->set_host_path(m.host_path);
      mount->set_container_path(m.container_path);
      mount->set_read_only(m.read_only);
    }
    if (registry_auth) {
      v1::RegistryAuth* auth = a->mutable_registry_auth();
      auth->set_registry(registry_auth->registry);
      auth->set_username(registry_auth->username);
      auth->set_secret(registry_auth->secret);
      auth->set_problem(registry_auth->problem);
    }
    Enqueue(std::move(msg));
  }
  void SendStop(const std::string& job_id, int32_t attempt, const std::string& reason,
                int64_t grace_ms) override {
    v1::SchedulerMessage msg;
    msg.mutable_stop()->set_job_id(job_id);
    msg.mutable_stop()->set_attempt(attempt);
    msg.mutable_stop()->set_reason(reason);
    msg.mutable_stop()->set_grace_ms(grace_ms);
    Enqueue(std::move(msg));
  }
  // The stream ends once what is queued is written.
  void Close() override {
    {
      MutexLock lock(&mu_);
      closed_ = true;
    }
    MaybeFinish();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the worker went away or half-closed: what is queued still goes out
      Close();
      return;
    }
    if (id_.empty()) {
      if (absl::Status s = Register(); !s.ok()) {
        FinishOnce(ToGrpcStatus(s));
        return;
      }
    } else {
      Handle(in_);
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    const v1::SchedulerMessage* next = nullptr;
    {
      MutexLock lock(&mu_);
      writing_ = false;
      outbox_.pop_front();
      if (!ok) {
        broken_ = true;  // the worker is gone: the read side ends too
        outbox_.clear();
      } else if (!outbox_.empty() && !finished_) {
        writing_ = true;
        next = &outbox_.front();
      }
    }
    if (next != nullptr) {
      StartWrite(next);
    } else {
      MaybeFinish();
    }
  }

  void OnDone() override {
    if (registered_) scheduler_->Disconnected(id_, this);
    std::shared_ptr<WorkerStream> last = std::move(self_);  // may be the last reference
  }

 private:
  static v1::SchedulerMessage AssignmentOf(const Job& job) {
    v1::SchedulerMessage msg;
    v1::Assignment* a = msg.mutable_assignment();
    a->set_job_id(job.id);
    a->set_attempt(job.attempt);
    *a->mutable_spec() = ToProto(job.spec);
    for (const auto& r : job.placement) *a->add_placement() = ToProto(r);
    a->set_token(job.token);
    a->set_team(job.team);
    a->set_image_digest(job.image_digest);
    a->set_start_directly(StartsDirectly(job.spec));
    return msg;
  }

  // Queued until the stream may write (after registration), dropped once it has finished.
  void Enqueue(v1::SchedulerMessage msg) {
    const v1::SchedulerMessage* first = nullptr;
    {
      MutexLock lock(&mu_);
      if (finished_ || broken_) return;
      // push_back keeps the address of the message being written (a deque's elements stay).
      outbox_.push_back(std::move(msg));
      if (writing_ || !writable_) return;
      writing_ = true;
      first = &outbox_.front();
    }
    StartWrite(first);
  }

  void MaybeFinish() {
    {
      MutexLock lock(&mu_);
      if (finished_ || writing_ || !(broken_ || (closed_ && outbox_.empty()))) return;
    }
    FinishOnce(grpc::Status::OK);
  }

  void FinishOnce(const grpc::Status& status) {
    {
      MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

  absl::Status Register() {
    if (!in_.has_register_()) {
      return absl::InvalidArgumentError("the first message must be register");
    }
    const v1::RegisterWorker& reg = in_.register_();
    if (verify_identity_) {
      if (auto s = CheckWorkerIdentity(*ctx_->auth_context(), reg.worker_id()); !s.ok()) {
        RM_LOG(kWarning) << "refused a registration from " << ctx_->peer() << ": " << s.message();
        return s;
      }
    }
    Worker worker;
    worker.id = reg.worker_id();
    worker.address = reg.address();
    worker.port = reg.port();
    worker.cpu_slots = reg.cpu_slots();
    worker.shares_one_team = reg.shares_one_team();
    for (const v1::Gpu& gpu : reg.gpus()) worker.gpus.push_back(scheduler::FromProto(gpu));
    std::vector<HeldRank> held;
    for (const v1::RunningRank& r : reg.ranks()) {
      held.push_back({r.job_id(), r.attempt(), r.rank(), r.exited(), r.exit_code(), r.stopping(),
                      std::vector<int32_t>(r.gpu_indices().begin(), r.gpu_indices().end())});
    }
    v1::SchedulerMessage registered;
    registered.mutable_registered()->set_worker_id(worker.id);
    registered.mutable_registered()->set_heartbeat_interval_ms(
        static_cast<int32_t>(scheduler_->options().heartbeat_interval_ms));
    Enqueue(registered);  // first on the wire, before any stop the reconciliation sends
    if (auto s = scheduler_->RegisterWorker(worker, held, self_); !s.ok()) return s;
    id_ = worker.id;
    registered_ = true;
    const v1::SchedulerMessage* first = nullptr;
    {
      MutexLock lock(&mu_);
      writable_ = true;
      if (!writing_ && !finished_ && !outbox_.empty()) {
        writing_ = true;
        first = &outbox_.front();
      }
    }
    if (first != nullptr) StartWrite(first);
    return absl::OkStatus();
  }

  void Handle(const v1::WorkerMessage& msg) {
    const std::string& id = id_;
    if (msg.has_heartbeat()) {
      scheduler_->Heartbeat(id);
    } else if (msg.has_rank_status()) {
      auto report = FromProto(msg.rank_status());
      if (!report.ok()) {
        RM_LOG(kWarning) << "worker " << id << " sent a bad rank status: " << report.status();
        return;
      }
      scheduler_->ReportRank(id, *report);
    } else if (msg.has_rank_statuses()) {
      const auto& list = msg.rank_statuses().statuses();
      if (list.size() > kMaxRankStatuses) {
        RM_LOG(kWarning) << "worker " << id << " sent " << list.size()
                         << " rank statuses in one message (rank_statuses.statuses: at most "
                         << kMaxRankStatuses << "); ignored";
        return;
      }
      std::vector<RankReport> reports;
      reports.reserve(list.size());
      for (const v1::RankStatus& status : list) {
        auto report = FromProto(status);
        if (!report.ok()) {
          RM_LOG(kWarning) << "worker " << id << " sent a bad rank status: " << report.status();
          continue;
        }
        reports.push_back(*std::move(report));
      }
      scheduler_->ReportRanks(id, reports);
    } else if (msg.has_check_result()) {
      const v1::CheckResult& c = msg.check_result();
      // A bad figure would become the shape's stored baseline and fail (or pass) every later
      // check of that shape: refused, like every other malformed input.
      if (c.job_id().empty() || c.attempt() < 0 || !std::isfinite(c.busbw_gbps()) ||
          c.busbw_gbps() < 0 || c.busbw_gbps() > 1e6 || !std::isfinite(c.seconds()) ||
          c.seconds() < 0 || (c.passed() && !c.completed()) ||
          (!c.transport().empty() && c.transport() != "cpu" && c.transport() != "gpu")) {
        RM_LOG(kWarning) << "worker " << id << " sent a malformed check result (job_id, "
                         << "attempt >= 0, finite busbw_gbps in 0..1e6 and seconds >= 0, "
                         << "passed only when completed, transport cpu or gpu); ignored";
        return;
      }
      CheckOutcome outcome;
      outcome.job_id = c.job_id();
      outcome.attempt = c.attempt();
      outcome.completed = c.completed();
      outcome.passed = c.passed();
      outcome.busbw_gbps = c.busbw_gbps();
      outcome.seconds = c.seconds();
      outcome.transport = c.transport().empty() ? "cpu" : c.transport();
      outcome.culprit_worker_id = c.culprit_worker_id();
      outcome.message = Utf8Prefix(c.message(), 2048);
      outcome.in_session = c.in_session();
      scheduler_->ReportCheck(id, outcome);
    } else {
      RM_LOG(kWarning) << "worker " << id << " sent an unexpected message; ignored";
    }
  }

  Scheduler* const scheduler_;
  grpc::CallbackServerContext* const ctx_;
  const bool verify_identity_;
  std::shared_ptr<WorkerStream> self_;
  // Only the read side touches these (one read at a time, then OnDone).
  v1::WorkerMessage in_;
  std::string id_;
  bool registered_ = false;

  Mutex mu_;
  // Its front is being written while writing_.
  std::deque<v1::SchedulerMessage> outbox_ ABSL_GUARDED_BY(mu_);
  bool writable_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage>* WorkerServiceImpl::Connect(
    grpc::CallbackServerContext* ctx) {
  auto stream = std::make_shared<WorkerStream>(scheduler_, ctx, verify_identity_);
  stream->Start(stream);
  return stream.get();
}

}  // namespace ringmaster::scheduler
