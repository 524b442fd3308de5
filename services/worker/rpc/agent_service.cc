#include "worker/rpc/agent_service.h"

#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/tls.h"
#include "worker/rpc/agent_client.h"
#include "worker/rpc/container_convert.h"
#include "worker/rpc/local_socket.h"

namespace ringmaster::worker {

absl::Status AgentServiceImpl::CheckPeer(grpc::ServerContext* ctx, const char* call) const {
  if (!verify_peers_) return absl::OkStatus();
  absl::Status s = CheckServicePeer(*ctx->auth_context(), call);
  if (!s.ok()) RM_LOG(kWarning) << "refused " << call << " from " << ctx->peer();
  return s;
}

std::unique_ptr<AgentServiceImpl> AgentServiceImpl::ForLocalSocket(
    Agent* agent, std::shared_ptr<grpc::ChannelCredentials> peer_credentials) {
  auto service = std::make_unique<AgentServiceImpl>(agent, /*verify_peers=*/false,
                                                    std::vector<std::string>{});
  service->local_ = true;
  service->peer_credentials_ = std::move(peer_credentials);
  return service;
}

absl::Status AgentServiceImpl::CheckCaller(grpc::ServerContext* ctx, const char* call,
                                           const std::string& job_id, int32_t attempt,
                                           const std::string& token) const {
  if (!local_) return CheckPeer(ctx, call);
  absl::StatusOr<uid_t> uid = PeerUid(*ctx);
  absl::Status s = uid.ok() ? agent_->CheckLocalCaller(job_id, attempt, token, *uid) : uid.status();
  if (!s.ok()) RM_LOG(kWarning) << "refused " << call << " on the local socket: " << s.message();
  return s;
}

grpc::Status AgentServiceImpl::Forward(grpc::ServerContext* ctx, const v1::ExecRequest& req,
                                       grpc::ServerWriter<v1::ExecOutput>* writer) {
  if (auto s = agent_->CheckForwardTarget(req.job_id(), req.attempt(), req.forward_to()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  v1::ExecRequest forwarded = req;
  forwarded.clear_forward_to();
  // The caller cancelling (ringmaster-rsh signalled) cancels the peer's call, which stops the
  // remote command.
  std::unique_ptr<grpc::ClientContext> out = grpc::ClientContext::FromServerContext(*ctx);
  AgentClient peer(req.forward_to(), peer_credentials_);
  absl::StatusOr<v1::ExitStatus> exit = peer.Exec(
      forwarded,
      [&](bool is_stderr, std::string_view data) {
        v1::ExecOutput chunk;
        if (is_stderr) {
          chunk.set_stderr_chunk(std::string(data));
        } else {
          chunk.set_stdout_chunk(std::string(data));
        }
        if (!writer->Write(chunk)) out->TryCancel();
      },
      out.get());
  // ringmaster-rsh names the target in its own message.
  if (!exit.ok()) return ToGrpcStatus(exit.status());
  v1::ExecOutput last;
  *last.mutable_exit() = *exit;
  writer->Write(last);
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::Exec(grpc::ServerContext* ctx, const v1::ExecRequest* req,
                                    grpc::ServerWriter<v1::ExecOutput>* writer) {
  if (auto s = CheckCaller(ctx, "Exec", req->job_id(), req->attempt(), req->token()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (!req->forward_to().empty()) {
    if (!local_) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          "forward_to: honoured only on a worker's local socket (--agent-socket)"));
    }
    return Forward(ctx, *req, writer);
  }
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
  if (local_) {
    return ToGrpcStatus(absl::PermissionDeniedError(
        "ReadLogs is not served on the local socket; call the worker's port"));
  }
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
  if (auto s = CheckCaller(ctx, "StartRank", req->job_id(), req->attempt(), req->token());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<StartedRank> started =
      agent_->StartRank(req->job_id(), req->attempt(), req->token(), req->mpi_rank(), req->pid(),
                        req->image_digest());
  if (!started.ok()) return ToGrpcStatus(started.status());
  resp->set_rank(started->rank);
  resp->set_log_path(started->log_path);
  for (const auto& [k, v] : started->env) (*resp->mutable_env())[k] = v;
  if (started->container) *resp->mutable_container() = ToProto(*started->container);
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::ReportRank(grpc::ServerContext* ctx,
                                          const v1::ReportRankRequest* req,
                                          v1::ReportRankResponse*) {
  if (auto s = CheckCaller(ctx, "ReportRank", req->job_id(), req->attempt(), req->token());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
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
      if (p.has_mpi()) {
        if (p.mpi().for_ms() < 0 || p.mpi().call().size() > kMaxMpiCallBytes) {
          return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
              "progress.mpi: for_ms must be >= 0 and call at most ", kMaxMpiCallBytes, " bytes")));
        }
        progress.mpi = MpiPosition{.inside = p.mpi().inside(),
                                   .call = p.mpi().call(),
                                   .for_ms = p.mpi().for_ms(),
                                   .calls_entered = p.mpi().calls_entered()};
      }
      return ToGrpcStatus(agent_->ReportProgress(req->job_id(), req->attempt(), req->token(),
                                                 req->rank(), progress));
    }
    default:
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("kind: unknown value ", static_cast<int>(req->kind()))));
  }
}

}  // namespace ringmaster::worker
