#include "rpc/agent_service.h"

#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/tls.h"

namespace ringmaster::worker {

absl::Status AgentServiceImpl::CheckPeer(grpc::ServerContext* ctx, const char* call) const {
  if (!verify_peers_) return absl::OkStatus();
  absl::Status s = CheckServicePeer(*ctx->auth_context(), call);
  if (!s.ok()) RM_LOG(kWarning) << "refused " << call << " from " << ctx->peer();
  return s;
}

grpc::Status AgentServiceImpl::Exec(grpc::ServerContext* ctx, const v1::ExecRequest* req,
                                    grpc::ServerWriter<v1::ExecOutput>* writer) {
  if (auto s = CheckPeer(ctx, "Exec"); !s.ok()) return ToGrpcStatus(s);
  std::vector<std::string> argv(req->argv().begin(), req->argv().end());
  std::map<std::string, std::string> env(req->env().begin(), req->env().end());
  absl::StatusOr<ExitInfo> exit = agent_->Exec(
      req->job_id(), req->attempt(), req->token(), argv, env,
      [&](Agent::Stream stream, std::string_view data) {
        v1::ExecOutput out;
        if (stream == Agent::Stream::kStdout) {
          out.set_stdout_chunk(std::string(data));
        } else {
          out.set_stderr_chunk(std::string(data));
        }
        return writer->Write(out);
      },
      [&] { return ctx->IsCancelled(); });
  if (!exit.ok()) return ToGrpcStatus(exit.status());
  v1::ExecOutput out;
  out.mutable_exit()->set_exit_code(exit->exit_code);
  out.mutable_exit()->set_signal(exit->signal);
  writer->Write(out);
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::ReadLogs(grpc::ServerContext* ctx, const v1::ReadLogsRequest* req,
                                        grpc::ServerWriter<v1::LogChunk>* writer) {
  if (verify_peers_) {
    if (auto s = CheckPeerNamed(*ctx->auth_context(), log_readers_, "ReadLogs"); !s.ok()) {
      RM_LOG(kWarning) << "refused ReadLogs from " << ctx->peer() << ": " << s.message();
      return ToGrpcStatus(s);
    }
  }
  std::optional<int32_t> attempt;
  if (req->has_attempt()) attempt = req->attempt();
  return ToGrpcStatus(agent_->ReadLogs(
      req->job_id(), req->rank(), attempt, req->follow(),
      [&](std::string_view data, int32_t resolved) {
        v1::LogChunk chunk;
        chunk.set_data(std::string(data));
        chunk.set_attempt(resolved);
        return writer->Write(chunk);
      },
      [&] { return ctx->IsCancelled(); }));
}

grpc::Status AgentServiceImpl::StartRank(grpc::ServerContext* ctx, const v1::StartRankRequest* req,
                                         v1::StartRankResponse* resp) {
  if (auto s = CheckPeer(ctx, "StartRank"); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<StartedRank> started =
      agent_->StartRank(req->job_id(), req->attempt(), req->token(), req->mpi_rank(), req->pid());
  if (!started.ok()) return ToGrpcStatus(started.status());
  resp->set_rank(started->rank);
  resp->set_log_path(started->log_path);
  for (const auto& [k, v] : started->env) (*resp->mutable_env())[k] = v;
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::ReportRank(grpc::ServerContext* ctx,
                                          const v1::ReportRankRequest* req,
                                          v1::ReportRankResponse*) {
  if (auto s = CheckPeer(ctx, "ReportRank"); !s.ok()) return ToGrpcStatus(s);
  switch (req->kind()) {
    case v1::ReportRankRequest::KIND_EXITED: {
      RankExit exit;
      exit.rank = req->rank();
      exit.exit_code = req->exit_code();
      exit.signal = req->signal();
      exit.message = req->message();
      if (req->has_images_per_second()) exit.images_per_second = req->images_per_second();
      return ToGrpcStatus(agent_->ReportExit(req->job_id(), req->attempt(), req->token(), exit));
    }
    case v1::ReportRankRequest::KIND_THROUGHPUT:
      if (!req->has_images_per_second()) {
        return ToGrpcStatus(
            absl::InvalidArgumentError("images_per_second: required for KIND_THROUGHPUT"));
      }
      return ToGrpcStatus(agent_->ReportThroughput(req->job_id(), req->attempt(), req->token(),
                                                   req->rank(), req->images_per_second()));
    case v1::ReportRankRequest::KIND_PROGRESS: {
      if (!req->has_progress()) {
        return ToGrpcStatus(absl::InvalidArgumentError("progress: required for KIND_PROGRESS"));
      }
      const v1::RankProgress& p = req->progress();
      if (p.collectives_completed() > p.collectives_entered()) {
        return ToGrpcStatus(absl::InvalidArgumentError(
            "progress.collectives_completed: must not exceed collectives_entered"));
      }
      for (const auto& [name, has, value] :
           {std::tuple{"progress.images_per_second", p.has_images_per_second(),
                       p.images_per_second()},
            std::tuple{"images_per_second", req->has_images_per_second(),
                       req->images_per_second()}}) {
        if (has && !(std::isfinite(value) && value >= 0)) {
          return ToGrpcStatus(absl::InvalidArgumentError(
              absl::StrCat(name, ": must be a finite number >= 0, got ", value)));
        }
      }
      RankProgress progress;
      progress.collectives_entered = p.collectives_entered();
      progress.collectives_completed = p.collectives_completed();
      progress.step = p.step();
      progress.progress_reports = p.progress_reports();
      progress.stopped = p.stopped();
      if (p.has_images_per_second()) progress.step_images_per_second = p.images_per_second();
      if (req->has_images_per_second()) progress.images_per_second = req->images_per_second();
      return ToGrpcStatus(agent_->ReportProgress(req->job_id(), req->attempt(), req->token(),
                                                 req->rank(), progress));
    }
    default:
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("kind: unknown value ", static_cast<int>(req->kind()))));
  }
}

}  // namespace ringmaster::worker
