#include "study_command.h"

#include <algorithm>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "errors.h"
#include "format.h"
#include "job_spec.h"
#include "study.h"
#include "study_store.h"

namespace ringmaster::cli {
namespace {

constexpr std::chrono::milliseconds kPollMin{200};
constexpr std::chrono::milliseconds kPollMax{2000};

bool Ended(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

std::string NewStudyId() {
  std::random_device rd;
  return absl::StrFormat("s-%08x", rd());
}

class StudyRun {
 public:
  StudyRun(const Command& cmd, const Runtime& runtime, SchedulerClient& client, std::ostream& out,
           std::ostream& err)
      : cmd_(cmd), runtime_(runtime), client_(client), out_(out), err_(err) {}

  int Run() {
    absl::StatusOr<std::string> dir = StudyDirectory(runtime_.getenv);
    if (!dir.ok()) return Fail({kExitError, std::string(dir.status().message())});
    dir_ = *dir;
    switch (cmd_.study_action) {
      case StudyAction::kScaling:
        return Scaling();
      case StudyAction::kList:
        return List();
      case StudyAction::kGet:
        return Get();
      case StudyAction::kCompare:
        return Compare();
      case StudyAction::kNone:
        break;
    }
    return Fail({kExitUsage, "missing study action (see ringctl study --help)"});
  }

 private:
  int Scaling() {
    v1::JobSpec base;
    if (absl::Status s = ApplyOverrides(cmd_.overrides, &base); !s.ok()) {
      return Fail({kExitUsage, std::string(s.message())});
    }
    if (base.workload_case() == v1::JobSpec::WORKLOAD_NOT_SET) base.mutable_trainer();
    v1::Study study;
    study.set_id(NewStudyId());
    study.set_created_at_ms(runtime_.now_ms());
    study.set_scheduler(cmd_.scheduler);
    study.set_gpu_type(base.gpu_type());
    study.set_parallel(cmd_.study_parallel);
    if (base.has_trainer()) {
      study.set_model(base.trainer().model());
      study.set_steps(base.trainer().steps());
      study.set_batch_size(base.trainer().batch_size());
    } else {
      for (const std::string& arg : base.command().argv()) study.add_command(arg);
    }
    err_ << "ringctl: study " << study.id() << ": " << cmd_.study_sizes.size() << " sizes, "
         << (cmd_.study_parallel ? "submitted together" : "one after the other") << "\n";
    for (int32_t gpus : cmd_.study_sizes) {
      v1::StudyPoint* point = study.add_points();
      point->set_gpus(gpus);
      v1::JobSpec spec = base;
      if (spec.name().empty()) spec.set_name(absl::StrCat(study.id(), "-", gpus));
      spec.set_replicas(gpus);
      spec.set_gpus_per_replica(cmd_.study_cpu ? 0 : 1);
      (*spec.mutable_labels())["study"] = study.id();
      (*spec.mutable_labels())["study-size"] = absl::StrCat(gpus);
      v1::SubmitJobRequest request;
      *request.mutable_spec() = std::move(spec);
      request.set_request_id(absl::StrCat(study.id(), "-", gpus));
      absl::StatusOr<v1::SubmitJobResponse> submitted =
          SubmitWithRetry(client_, request, runtime_.retry, runtime_.sleep);
      if (!submitted.ok()) {
        return Fail(DescribeRpcError(
            submitted.status(), absl::StrCat("submit the ", gpus, "-GPU job"), cmd_.scheduler, ""));
      }
      point->set_job_id(submitted->job().id());
      err_ << "ringctl: " << gpus << " GPUs: job " << point->job_id() << " submitted\n";
      if (!cmd_.study_parallel) {
        if (std::optional<Failure> f = Finish(point)) return Fail(*f);
      }
    }
    if (cmd_.study_parallel) {
      for (v1::StudyPoint& point : *study.mutable_points()) {
        if (std::optional<Failure> f = Finish(&point)) return Fail(*f);
      }
    }
    ComputeScaling(&study);
    if (absl::Status s = SaveStudy(dir_, study); !s.ok()) {
      return Fail({kExitError, absl::StrCat("study not stored: ", s.message())});
    }
    const std::string chart =
        cmd_.chart.empty() ? absl::StrCat(dir_, "/", study.id(), ".svg") : cmd_.chart;
    if (absl::Status s = WriteFileWhole(chart, ScalingChartSvg(study)); !s.ok()) {
      return Fail({kExitError, absl::StrCat("chart not written: ", s.message())});
    }
    err_ << "ringctl: study " << study.id() << " stored in " << dir_ << "; chart " << chart << "\n";
    if (int code = Print(study); code != kExitOk) return code;
    for (const v1::StudyPoint& p : study.points()) {
      if (p.images_per_second() <= 0) {
        return Fail(
            {kExitJobUnsuccessful, absl::StrCat("study ", study.id(), ": ", p.gpus(),
                                                " GPUs has no figure (", p.message(), ")")});
      }
    }
    return kExitOk;
  }

  // Follows the point's job to its end and reads its figure; a Failure only when ringctl
  // cannot go on (the scheduler is gone), not when the job failed.
  std::optional<Failure> Finish(v1::StudyPoint* point) {
    std::chrono::milliseconds poll = kPollMin;
    int failures = 0;
    v1::Job job;
    for (;;) {
      v1::GetJobRequest get;
      get.set_job_id(point->job_id());
      absl::StatusOr<v1::Job> got = client_.GetJob(get);
      if (!got.ok()) {
        if (!IsRetryable(got.status()) || ++failures >= runtime_.retry.max_attempts) {
          return DescribeRpcError(got.status(), "get job " + point->job_id(), cmd_.scheduler,
                                  point->job_id());
        }
      } else {
        failures = 0;
        if (Ended(got->state())) {
          job = *std::move(got);
          break;
        }
      }
      runtime_.sleep(poll);
      poll = std::min(poll * 2, kPollMax);
    }
    point->set_state(job.state());
    if (job.state() != v1::JOB_STATE_SUCCEEDED) {
      point->set_message(absl::StrCat("job ", job.id(), " ended ", JobStateName(job.state()),
                                      job.message().empty() ? "" : ": ", job.message()));
      err_ << "ringctl: " << point->gpus() << " GPUs: " << point->message() << "\n";
      return std::nullopt;
    }
    std::ostringstream log;
    std::optional<Failure> read = ReadRankZero(job, log);
    std::optional<double> ips = TotalImagesPerSecond(log.str());
    if (ips) {
      point->set_images_per_second(*ips);
    } else {
      point->set_message(read ? absl::StrCat("rank 0's log could not be read: ", read->message)
                              : "no 'total images/sec' in rank 0's log");
    }
    err_ << "ringctl: " << point->gpus() << " GPUs: job " << job.id() << " SUCCEEDED, "
         << (ips ? absl::StrFormat("%.2f images/sec", *ips) : point->message()) << "\n";
    return std::nullopt;
  }

  std::optional<Failure> ReadRankZero(const v1::Job& job, std::ostream& log) {
    LogsOptions options;
    options.job_id = job.id();
    options.rank = 0;
    options.attempt = job.attempt();
    options.scheduler = cmd_.scheduler;
    return PrintRankLog(options, client_, log);
  }

  int List() {
    absl::StatusOr<std::vector<v1::Study>> studies = ListStudies(dir_);
    if (!studies.ok()) return Fail({kExitError, std::string(studies.status().message())});
    if (cmd_.output == OutputFormat::kJson) {
      std::string joined;
      for (const v1::Study& s : *studies) {
        absl::StatusOr<std::string> json = ToJson(s, /*pretty=*/false);
        if (!json.ok()) return Fail({kExitError, std::string(json.status().message())});
        absl::StrAppend(&joined, *json);
      }
      out_ << joined;
      return kExitOk;
    }
    out_ << FormatStudyList(*studies);
    return kExitOk;
  }

  int Get() {
    absl::StatusOr<v1::Study> study = LoadStudy(dir_, cmd_.study_ids[0]);
    if (!study.ok()) return LoadFailure(study.status());
    return Print(*study);
  }

  int Compare() {
    absl::StatusOr<v1::Study> a = LoadStudy(dir_, cmd_.study_ids[0]);
    if (!a.ok()) return LoadFailure(a.status());
    absl::StatusOr<v1::Study> b = LoadStudy(dir_, cmd_.study_ids[1]);
    if (!b.ok()) return LoadFailure(b.status());
    if (cmd_.output == OutputFormat::kJson) {
      for (const v1::Study* s : {&*a, &*b}) {
        if (int code = PrintJson(*s); code != kExitOk) return code;
      }
      return kExitOk;
    }
    out_ << FormatStudyComparison(*a, *b);
    return kExitOk;
  }

  int LoadFailure(const absl::Status& status) {
    const int code = absl::IsNotFound(status)          ? kExitNotFound
                     : absl::IsInvalidArgument(status) ? kExitUsage
                                                       : kExitError;
    return Fail({code, std::string(status.message())});
  }

  int Print(const v1::Study& study) {
    if (cmd_.output == OutputFormat::kJson) return PrintJson(study);
    out_ << FormatStudy(study);
    return kExitOk;
  }

  int PrintJson(const google::protobuf::Message& message) {
    absl::StatusOr<std::string> json = ToJson(message, /*pretty=*/true);
    if (!json.ok()) return Fail({kExitError, std::string(json.status().message())});
    out_ << *json;
    return kExitOk;
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
  std::string dir_;
};

}  // namespace

int RunStudyCommand(const Command& cmd, const Runtime& runtime, SchedulerClient& client,
                    std::ostream& out, std::ostream& err) {
  return StudyRun(cmd, runtime, client, out, err).Run();
}

}  // namespace ringmaster::cli
