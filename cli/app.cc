#include "app.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "admin_command.h"
#include "errors.h"
#include "format.h"
#include "job_spec.h"
#include "queue_command.h"
#include "registry_command.h"
#include "spec_yaml.h"
#include "study_command.h"
#include "volume_command.h"

namespace ringmaster::cli {
namespace {

// How often `submit --follow` asks whether the job runs yet: quickly at first, as most jobs
// start within a second, then backing off.
constexpr std::chrono::milliseconds kFollowPollMin{100};
constexpr std::chrono::milliseconds kFollowPollMax{2000};

// Jobs per ListJobs call of `ringctl list` (the scheduler allows up to 1000).
constexpr int32_t kListPageSize = 500;

// How following a job ended: its terminal state, or why ringctl fails.
using Outcome = std::variant<v1::JobState, Failure>;

// One command run against one scheduler; each method returns the exit code.
class Invocation {
 public:
  Invocation(const Command& cmd, const Runtime& runtime, SchedulerClient& client, std::ostream& out,
             std::ostream& err)
      : cmd_(cmd), runtime_(runtime), client_(client), out_(out), err_(err) {}

  int Run() {
    switch (cmd_.verb) {
      case Verb::kSubmit:
        return Submit();
      case Verb::kGet:
        return Get();
      case Verb::kList:
        return List();
      case Verb::kCancel:
        return Cancel();
      case Verb::kWatch:
        return Watch();
      case Verb::kWorkers:
        return Workers();
      case Verb::kLogs:
        return Logs();
      case Verb::kQueue:
        return RunQueueCommand(cmd_, client_, out_, err_);
      case Verb::kVolume:
        return RunVolumeCommand(cmd_, client_, out_, err_);
      case Verb::kStudy:
        return RunStudyCommand(cmd_, runtime_, client_, out_, err_);
      case Verb::kAdmin:
        return RunAdminCommand(cmd_, out_, err_);
      case Verb::kRegistry:
        return RunRegistryCommand(cmd_, std::cin, out_, err_);
      case Verb::kNone:
        break;
    }
    return Fail({kExitUsage, "missing command (see ringctl --help)"});
  }

 private:
  int Submit() {
    v1::SubmitJobRequest request;
    if (!cmd_.spec_file.empty()) {
      absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile(cmd_.spec_file);
      if (!spec.ok()) return Fail({kExitUsage, std::string(spec.status().message())});
      *request.mutable_spec() = *std::move(spec);
    }
    if (absl::Status status = ApplyOverrides(cmd_.overrides, request.mutable_spec());
        !status.ok()) {
      return Fail({kExitUsage, std::string(status.message())});
    }
    // A submit from flags alone runs the built-in trainer unless `--` names a command. A file
    // without a workload is left for the scheduler to reject: running the trainer instead of
    // a forgotten `command:` would be a surprise.
    if (cmd_.spec_file.empty() && request.spec().workload_case() == v1::JobSpec::WORKLOAD_NOT_SET) {
      request.mutable_spec()->mutable_trainer();
    }
    // And it has one rank unless --replicas says otherwise, as sbatch runs one task:
    // `ringctl submit --wait -- true` is a complete job. A file is sent as it is.
    if (cmd_.spec_file.empty() && request.spec().replicas() == 0 && !cmd_.overrides.replicas) {
      request.mutable_spec()->set_replicas(1);
    }
    // The scheduler requires a name; `ringctl submit --replicas 2` should still just work.
    if (request.spec().name().empty())
      request.mutable_spec()->set_name(DefaultJobName(request.spec()));
    // An array never runs itself, so it has no rank 0 to follow; each task has its own log.
    if (cmd_.follow && request.spec().has_array()) {
      return Fail({kExitUsage,
                   "--follow follows one job's rank 0, and an array's tasks each have their own: "
                   "use --wait, then ringctl logs ID --index I"});
    }
    // One id for every attempt of this invocation: a retry finds the job a lost reply made.
    request.set_request_id(cmd_.request_id.empty() ? runtime_.new_request_id() : cmd_.request_id);
    RetryPolicy retry = runtime_.retry;
    if (cmd_.retry_seconds) retry.max_wait = std::chrono::seconds(*cmd_.retry_seconds);
    int attempts = 0;
    // One line when retrying starts, so a wait through a scheduler failover is not silent.
    auto on_retry = [&](const absl::Status& status, int attempt) {
      if (attempt > 1) return;
      err_ << "ringctl: " << DescribeRpcError(status, "submit job", cmd_.scheduler, "").message
           << "; retrying for up to "
           << std::chrono::duration_cast<std::chrono::seconds>(retry.max_wait).count()
           << " s with request id " << request.request_id() << "\n"
           << std::flush;
    };
    absl::StatusOr<v1::SubmitJobResponse> response =
        SubmitWithRetry(client_, request, retry, runtime_.sleep, &attempts, on_retry);
    if (!response.ok()) {
      Failure failure = DescribeRpcError(response.status(), "submit job", cmd_.scheduler, "");
      if (IsRetryable(response.status())) {
        absl::StrAppend(&failure.message, " (tried ", attempts, attempts == 1 ? " time" : " times",
                        " with request id ", request.request_id(), ")");
      }
      return Fail(failure);
    }
    const std::string& id = response->job().id();
    if (cmd_.follow) {
      err_ << "ringctl: job " << id << " submitted; following rank 0's output\n";
      return Finish(id, FollowRankZero(id));
    }
    if (cmd_.wait) {
      if (cmd_.output != OutputFormat::kJson) out_ << id << "\n" << std::flush;
      return Finish(id, WaitForEnd(id, nullptr));
    }
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*response);
    out_ << id << "\n";
    return kExitOk;
  }

  // submit --follow: rank 0's output of every attempt that runs, until the job ends.
  //   1. Poll the job until it is RUNNING (every rank has started, so rank 0's log exists)
  //      or has ended.
  //   2. RUNNING: follow rank 0's log of that attempt until the rank exits; then back to 1
  //      (a restart under OnFailure runs a new attempt, whose output follows).
  //   3. Ended: an attempt that ran and was not followed (it was quicker than the poll) has
  //      its log printed whole (best effort), so a short job's output is not lost.
  // Returns the final job's state, or how ringctl fails (a log that broke while followed).
  Outcome FollowRankZero(const std::string& id) {
    std::optional<int32_t> followed;
    std::chrono::milliseconds poll = kFollowPollMin;
    LogsOptions options;
    options.job_id = id;
    options.rank = 0;
    options.follow = true;
    options.scheduler = cmd_.scheduler;
    int failures = 0;
    for (;;) {
      v1::GetJobRequest get;
      get.set_job_id(id);
      absl::StatusOr<v1::Job> job = client_.GetJob(get);
      if (!job.ok()) {
        if (!IsRetryable(job.status()) || ++failures >= runtime_.retry.max_attempts) {
          return DescribeRpcError(job.status(), "get job " + id, cmd_.scheduler, id);
        }
        runtime_.sleep(runtime_.retry.max_backoff);
        continue;
      }
      failures = 0;
      if (IsTerminal(job->state())) {
        if (followed != job->attempt()) {
          options.attempt = job->attempt();
          options.follow = false;
          // Best effort: the job's outcome is what ringctl reports, not a missing log.
          (void)PrintRankLog(options, client_, out_);
        }
        return job->state();
      }
      if (job->state() == v1::JOB_STATE_RUNNING && followed != job->attempt()) {
        followed = job->attempt();
        options.attempt = job->attempt();
        std::optional<Failure> failure = PrintRankLog(options, client_, out_);
        if (failure) return *failure;
        poll = kFollowPollMin;
        continue;
      }
      runtime_.sleep(poll);
      poll = std::min(poll * 2, kFollowPollMax);
    }
  }

  // Exit code of submit --wait/--follow from the job's final state: 0 for SUCCEEDED.
  int Finish(const std::string& id, const Outcome& outcome) {
    if (const Failure* failure = std::get_if<Failure>(&outcome)) return Fail(*failure);
    const v1::JobState* state = std::get_if<v1::JobState>(&outcome);
    if (*state != v1::JOB_STATE_SUCCEEDED || cmd_.output == OutputFormat::kJson) {
      v1::GetJobRequest get;
      get.set_job_id(id);
      absl::StatusOr<v1::Job> job = client_.GetJob(get);
      if (cmd_.output == OutputFormat::kJson) {
        if (!job.ok()) return RpcFailure(job.status(), "get job " + id, id);
        if (int code = PrintJson(*job); code != kExitOk) return code;
      }
      if (*state != v1::JOB_STATE_SUCCEEDED) {
        std::string line = absl::StrCat("job ", id, " ended ", JobStateName(*state));
        if (job.ok() && !job->message().empty()) absl::StrAppend(&line, ": ", job->message());
        return Fail({kExitJobUnsuccessful, line});
      }
    }
    return kExitOk;
  }

  int Get() {
    v1::GetJobRequest request;
    request.set_job_id(cmd_.job_id);
    absl::StatusOr<v1::Job> job = client_.GetJob(request);
    if (!job.ok()) return RpcFailure(job.status(), "get job " + cmd_.job_id, cmd_.job_id);
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*job);
    out_ << FormatJob(*job);
    return kExitOk;
  }

  // Pages through ListJobs (each call repeats the filters with the previous next_page_token)
  // until the last page or --limit jobs, then prints them as one list.
  int List() {
    v1::ListJobsRequest request;
    request.set_state(cmd_.state);
    request.set_queue(cmd_.queue);
    request.set_label_selector(cmd_.label_selector);
    request.set_array_id(cmd_.array_id);
    const int32_t page_size = cmd_.page_size > 0 ? cmd_.page_size : kListPageSize;
    v1::ListJobsResponse all;
    for (;;) {
      int32_t want = page_size;
      if (cmd_.limit > 0) want = std::min(want, cmd_.limit - all.jobs_size());
      request.set_page_size(want);
      absl::StatusOr<v1::ListJobsResponse> page = client_.ListJobs(request);
      if (!page.ok()) return RpcFailure(page.status(), "list jobs", "");
      for (v1::Job& job : *page->mutable_jobs()) {
        if (cmd_.limit > 0 && all.jobs_size() >= cmd_.limit) break;
        *all.add_jobs() = std::move(job);
      }
      if (page->next_page_token().empty() || (cmd_.limit > 0 && all.jobs_size() >= cmd_.limit)) {
        break;
      }
      request.set_page_token(page->next_page_token());
    }
    if (cmd_.output == OutputFormat::kJson) return PrintJson(all);
    out_ << FormatJobList(all, runtime_.now_ms());
    return kExitOk;
  }

  int Cancel() {
    v1::CancelJobRequest request;
    request.set_job_id(cmd_.job_id);
    request.set_reason(cmd_.reason);
    absl::StatusOr<v1::CancelJobResponse> response = client_.CancelJob(request);
    if (!response.ok()) {
      return RpcFailure(response.status(), "cancel job " + cmd_.job_id, cmd_.job_id);
    }
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*response);
    out_ << response->job().id() << " " << JobStateName(response->job().state()) << "\n";
    return kExitOk;
  }

  // Prints events until the stream ends after the terminal one.
  int Watch() {
    bool printed_header = false;
    std::string json_error;
    Outcome outcome = WaitForEnd(cmd_.job_id, [&](const v1::JobEvent& event) {
      if (cmd_.output == OutputFormat::kJson) {
        absl::StatusOr<std::string> json = ToJson(event, /*pretty=*/false);
        if (json.ok()) {
          out_ << *json;
        } else if (json_error.empty()) {
          json_error = std::string(json.status().message());
        }
      } else {
        if (!printed_header) out_ << WatchHeader();
        printed_header = true;
        out_ << FormatEvent(event);
      }
      out_.flush();
    });
    if (!json_error.empty()) return Fail({kExitError, json_error});
    if (const Failure* failure = std::get_if<Failure>(&outcome)) return Fail(*failure);
    const v1::JobState state = std::get<v1::JobState>(outcome);
    if (state == v1::JOB_STATE_SUCCEEDED) return kExitOk;
    std::string line = absl::StrCat("job ", cmd_.job_id, " ended ", JobStateName(state));
    if (!last_reason_.empty()) absl::StrAppend(&line, ": ", last_reason_);
    return Fail({kExitJobUnsuccessful, line});
  }

  // Follows the job's events (each one passed to `on_event` if given) until the stream ends
  // after the terminal one; returns that terminal state, or how ringctl fails. A stream that
  // breaks after delivering events (a scheduler restart or fail-over) is reopened; WatchJob
  // replays the job's events from the start, so the ones already seen are skipped by seq.
  Outcome WaitForEnd(const std::string& job_id,
                     const std::function<void(const v1::JobEvent&)>& on_event) {
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    std::optional<v1::JobEvent> last;
    int failures = 0;
    std::chrono::milliseconds backoff = runtime_.retry.initial_backoff;
    for (;;) {
      bool progressed = false;
      absl::Status status = client_.WatchJob(request, [&](const v1::JobEvent& event) {
        if (last && event.seq() <= last->seq()) return;
        last = event;
        progressed = true;
        if (on_event) on_event(event);
      });
      if (status.ok()) break;
      if (progressed) failures = 0;
      const bool reopen = absl::IsUnavailable(status) && last.has_value() &&
                          ++failures < runtime_.retry.max_attempts;
      if (!reopen) return DescribeRpcError(status, "watch job " + job_id, cmd_.scheduler, job_id);
      runtime_.sleep(backoff);
      backoff = std::min(backoff * 2, runtime_.retry.max_backoff);
    }
    if (!last) {
      return Failure{kExitError, absl::StrCat("watch of job ", job_id, " ended without any event")};
    }
    last_reason_ = last->reason();
    if (!IsTerminal(last->state())) {
      return Failure{kExitError, absl::StrCat("watch of job ", job_id,
                                              " ended before the job finished (last state ",
                                              JobStateName(last->state()), ")")};
    }
    return last->state();
  }

  static bool IsTerminal(v1::JobState state) {
    return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
           state == v1::JOB_STATE_CANCELLED;
  }

  int Workers() {
    if (!cmd_.clear_worker.empty()) {
      v1::ClearWorkerHealthRequest request;
      request.set_worker_id(cmd_.clear_worker);
      absl::StatusOr<v1::ClearWorkerHealthResponse> cleared = client_.ClearWorkerHealth(request);
      if (!cleared.ok()) {
        return RpcFailure(cleared.status(), "clear worker " + cmd_.clear_worker, "");
      }
      if (cmd_.output == OutputFormat::kJson) return PrintJson(*cleared);
      out_ << "worker " << cmd_.clear_worker << " is healthy; it takes new placements\n";
      return kExitOk;
    }
    absl::StatusOr<v1::ListWorkersResponse> response =
        client_.ListWorkers(v1::ListWorkersRequest());
    if (!response.ok()) return RpcFailure(response.status(), "list workers", "");
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*response);
    out_ << FormatWorkers(*response, runtime_.now_ms());
    return kExitOk;
  }

  int Logs() {
    LogsOptions options;
    options.job_id = cmd_.job_id;
    if (cmd_.index) {
      std::variant<std::string, Failure> task = ArrayTaskId(cmd_.job_id, *cmd_.index);
      if (const Failure* failure = std::get_if<Failure>(&task)) return Fail(*failure);
      options.job_id = std::get<std::string>(task);
    }
    options.rank = cmd_.rank;
    options.attempt = cmd_.attempt;
    options.follow = cmd_.follow;
    options.scheduler = cmd_.scheduler;
    std::optional<Failure> failure = PrintRankLog(options, client_, out_);
    return failure ? Fail(*failure) : kExitOk;
  }

  // logs --index: the id of task `index` of the array `array_id` ("<array id>-<index>"), once
  // the array is known to have such a task and to have created it (an array creates its tasks
  // in index order, so the waiting ones are the highest); else how ringctl fails.
  std::variant<std::string, Failure> ArrayTaskId(const std::string& array_id, int32_t index) {
    v1::GetJobRequest request;
    request.set_job_id(array_id);
    absl::StatusOr<v1::Job> array = client_.GetJob(request);
    if (!array.ok()) {
      return DescribeRpcError(array.status(), "get job " + array_id, cmd_.scheduler, array_id);
    }
    if (!array->spec().has_array()) {
      return Failure{kExitUsage, absl::StrCat("--index: job ", array_id,
                                              " is not an array; read its log without --index")};
    }
    const int32_t count = array->spec().array().count();
    if (index >= count) {
      return Failure{kExitUsage, absl::StrCat("--index: array ", array_id, " has tasks 0..",
                                              count - 1, ", got ", index)};
    }
    const int32_t waiting = array->array_status().waiting();
    if (waiting > 0 && index >= count - waiting) {
      return Failure{kExitNotFound,
                     absl::StrCat("task ", index, " of array ", array_id,
                                  " has not been created yet, so it has no log (", waiting,
                                  " tasks wait for the parallelism limit, the array's "
                                  "dependencies or room)")};
    }
    return absl::StrCat(array_id, "-", index);
  }

  int PrintJson(const google::protobuf::Message& message) {
    absl::StatusOr<std::string> json = ToJson(message, /*pretty=*/true);
    if (!json.ok()) return Fail({kExitError, std::string(json.status().message())});
    out_ << *json;
    return kExitOk;
  }

  int RpcFailure(const absl::Status& status, const std::string& action, const std::string& job_id) {
    return Fail(DescribeRpcError(status, action, cmd_.scheduler, job_id));
  }

  int Fail(const Failure& failure) {
    err_ << "ringctl: " << SingleLine(failure.message) << "\n";
    return failure.exit_code;
  }

  const Command& cmd_;
  const Runtime& runtime_;
  SchedulerClient& client_;
  std::ostream& out_;
  std::ostream& err_;
  // The reason of the last event WaitForEnd saw (for `watch`'s closing line).
  std::string last_reason_;
};

}  // namespace

Runtime ProcessRuntime() {
  Runtime runtime;
  runtime.getenv = [](const char* name) { return std::getenv(name); };
  runtime.now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  runtime.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  runtime.new_request_id = NewRequestId;
  runtime.connect = [](const std::string& address,
                       std::shared_ptr<grpc::ChannelCredentials> credentials,
                       const std::string& token) -> std::unique_ptr<SchedulerClient> {
    return std::make_unique<GrpcSchedulerClient>(address, std::move(credentials),
                                                 std::chrono::seconds(5), token);
  };
  return runtime;
}

int RunCli(const std::vector<std::string>& args, const Runtime& runtime, std::ostream& out,
           std::ostream& err) {
  absl::StatusOr<Command> cmd = ParseArgs(args, runtime.getenv);
  if (!cmd.ok()) {
    err << "ringctl: " << SingleLine(cmd.status().message()) << "\n";
    return kExitUsage;
  }
  if (cmd->help) {
    out << Usage(cmd->verb);
    return kExitOk;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(cmd->tls);
  if (!credentials.ok()) {
    err << "ringctl: " << SingleLine(credentials.status().message()) << "\n";
    return kExitUsage;
  }
  if (cmd->tls.insecure && !IsLoopbackAddress(cmd->scheduler)) {
    err << "ringctl: warning: --insecure: talking plaintext to " << cmd->scheduler
        << ", which is not a loopback address\n";
  }
  std::unique_ptr<SchedulerClient> client =
      runtime.connect(cmd->scheduler, *credentials, cmd->token);
  return Invocation(*cmd, runtime, *client, out, err).Run();
}

}  // namespace ringmaster::cli
