#include "logs.h"

#include <grpcpp/grpcpp.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace ringmaster::cli {

absl::Status GrpcWorkerLogsClient::ReadLogs(
    const std::string& agent_address, const v1::ReadLogsRequest& request,
    const std::function<void(const v1::LogChunk&)>& on_chunk) {
  auto stub = v1::WorkerAgent::NewStub(
      grpc::CreateChannel(agent_address, credentials_));
  grpc::ClientContext context;
  context.set_wait_for_ready(false);
  std::unique_ptr<grpc::ClientReader<v1::LogChunk>> reader = stub->ReadLogs(&context, request);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) on_chunk(chunk);
  return FromGrpcStatus(reader->Finish());
}

std::optional<Failure> PrintRankLog(const LogsOptions& options, SchedulerClient& scheduler,
                                    WorkerLogsClient& workers, std::ostream& out) {
  v1::GetJobRequest get;
  get.set_job_id(options.job_id);
  absl::StatusOr<v1::Job> job = scheduler.GetJob(get);
  if (!job.ok()) {
    return DescribeRpcError(job.status(), "get job " + options.job_id, options.scheduler,
                            options.job_id);
  }
  const int32_t replicas = job->spec().replicas();
  if (options.rank < 0 || (replicas > 0 && options.rank >= replicas)) {
    return Failure{kExitUsage, absl::StrCat("--rank: job ", options.job_id, " has ", replicas,
                                            " ranks (0..", replicas - 1, "), got ", options.rank)};
  }
  const int32_t attempt = options.attempt.value_or(job->attempt());
  v1::ReadLogsRequest request;
  request.set_job_id(options.job_id);
  request.set_rank(options.rank);
  request.set_attempt(attempt);
  request.set_follow(options.follow);
  auto print = [&out](const v1::LogChunk& chunk) { out << chunk.data() << std::flush; };

  // Where the rank runs now, or every worker that may have run it.
  std::vector<std::string> candidates;
  if (attempt == job->attempt()) {
    for (const v1::RankPlacement& r : job->placement()) {
      if (r.rank() == options.rank) {
        candidates.push_back(absl::StrCat(r.worker_address(), ":", r.worker_port()));
      }
    }
  }
  const bool placed = !candidates.empty();
  if (!placed) {
    absl::StatusOr<v1::ListWorkersResponse> listed =
        scheduler.ListWorkers(v1::ListWorkersRequest());
    if (!listed.ok()) {
      return DescribeRpcError(listed.status(), "list workers", options.scheduler, "");
    }
    for (const v1::WorkerInfo& w : listed->workers()) {
      candidates.push_back(absl::StrCat(w.address(), ":", w.port()));
    }
  }
  absl::Status last = absl::NotFoundError("no worker is registered");
  for (const std::string& address : candidates) {
    bool wrote = false;
    absl::Status status = workers.ReadLogs(address, request, [&](const v1::LogChunk& chunk) {
      wrote = true;
      print(chunk);
    });
    if (status.ok()) return std::nullopt;
    if (wrote || placed) {
      return Failure{absl::IsUnavailable(status) ? kExitUnreachable : kExitError,
                     absl::StrCat("reading the log of job ", options.job_id, " rank ", options.rank,
                                  " from the worker at ", address, ": ", status.message())};
    }
    // Not this worker (or it is down): try the next; a NOT_FOUND is the more useful answer.
    if (!absl::IsNotFound(last) || absl::IsNotFound(status)) last = status;
  }
  std::string why = absl::StrCat("no worker has a log of job ", options.job_id, " rank ",
                                 options.rank, " attempt ", attempt);
  if (job->state() == v1::JOB_STATE_PENDING && job->placement_size() == 0) {
    absl::StrAppend(&why, " (the job is PENDING: that attempt has not started)");
  } else if (!absl::IsNotFound(last)) {
    absl::StrAppend(&why, " (", last.message(), ")");
  }
  return Failure{absl::IsUnavailable(last) ? kExitUnreachable : kExitNotFound, why};
}

}  // namespace ringmaster::cli
