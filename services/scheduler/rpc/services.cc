#include "rpc/services.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/tls.h"
#include "convert/convert.h"

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

}  // namespace

absl::StatusOr<Job> JobServiceImpl::VisibleJob(const Principal& who, const std::string& job_id) {
  auto job = scheduler_->GetJob(job_id);
  if (!job.ok()) {
    if (job.status().code() == absl::StatusCode::kNotFound) return NoSuchJob(job_id);
    return job.status();
  }
  if (!SeesTeam(who, job->team)) return NoSuchJob(job_id);
  return job;
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
      });
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
  query.page_size = req->page_size() != 0 ? req->page_size() : req->limit();
  query.page_token = req->page_token();
  if (who->role != Role::kAdmin) query.team = who->team;
  auto page = scheduler_->ListJobs(query);
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const Job& job : page->jobs) *resp->add_jobs() = JobFor(*who, job);
  resp->set_next_page_token(page->next_page_token);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req,
                                       v1::CancelJobResponse* resp) {
  auto who = auth_->Authenticate(*ctx);
  if (!who.ok()) return ToGrpcStatus(who.status());
  auto visible = VisibleJob(*who, req->job_id());
  if (!visible.ok()) return ToGrpcStatus(visible.status());
  if (auto s = Authorize(*who, Action::kCancelJob, visible->team); !s.ok()) {
    return ToGrpcStatus(s);
  }
  auto job = scheduler_->Cancel(req->job_id(), req->reason());
  if (!job.ok()) return ToGrpcStatus(job.status());
  auth_->Audit(*who, *ctx, Action::kCancelJob, job->id, req->reason());
  *resp->mutable_job() = JobFor(*who, *job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                                      grpc::ServerWriter<v1::JobEvent>* writer) {
  auto who = auth_->Check(*ctx, Action::kWatchJob);
  if (!who.ok()) return ToGrpcStatus(who.status());
  if (auto job = VisibleJob(*who, req->job_id()); !job.ok()) return ToGrpcStatus(job.status());
  return ToGrpcStatus(scheduler_->Watch(
      req->job_id(), [&](const JobEvent& e) { return writer->Write(ToProto(e)); },
      [&] { return ctx->IsCancelled(); }));
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
    v1::SchedulerMessage msg = AssignmentOf(job);
    v1::Assignment* a = msg.mutable_assignment();
    a->set_run_check(plan.run);
    a->set_check_baseline_gbps(plan.baseline_gbps);
    a->set_check_min_ratio(plan.min_ratio);
    a->set_check_transport(plan.transport);
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
      std::lock_guard<std::mutex> lock(mu_);
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
      std::lock_guard<std::mutex> lock(mu_);
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
    return msg;
  }

  // Queued until the stream may write (after registration), dropped once it has finished.
  void Enqueue(v1::SchedulerMessage msg) {
    const v1::SchedulerMessage* first = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
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
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_ || writing_ || !(broken_ || (closed_ && outbox_.empty()))) return;
    }
    FinishOnce(grpc::Status::OK);
  }

  void FinishOnce(const grpc::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
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
      std::lock_guard<std::mutex> lock(mu_);
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
      outcome.message = c.message().substr(0, 2048);
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

  std::mutex mu_;
  std::deque<v1::SchedulerMessage> outbox_;  // its front is being written while writing_
  bool writable_ = false;
  bool writing_ = false;
  bool closed_ = false;
  bool broken_ = false;
  bool finished_ = false;
};

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage>* WorkerServiceImpl::Connect(
    grpc::CallbackServerContext* ctx) {
  auto stream = std::make_shared<WorkerStream>(scheduler_, ctx, verify_identity_);
  stream->Start(stream);
  return stream.get();
}

}  // namespace ringmaster::scheduler
