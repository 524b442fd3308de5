// The scheduler's relay of rank logs (JobService.ReadJobLogs): it reads a rank's log from the
// worker agent that ran it, with the scheduler's own certificate (mutual TLS; the agents serve
// ReadLogs to nobody else), and hands every chunk to the caller's stream. Which worker to ask
// is core/log_sources.h's decision; this is the wire and the bound on concurrent relays.
//
// No lock of the scheduler is held here: the job and the workers are copies taken before.
// Thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_RPC_LOG_RELAY_H_
#define RINGMASTER_SERVICES_SCHEDULER_RPC_LOG_RELAY_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "ringmaster/v1/agent.grpc.pb.h"
#include "scheduler/core/log_sources.h"

namespace ringmaster::scheduler {

// One read of a rank's log from one agent: the outbound seam tests replace.
class AgentLogReader {
 public:
  virtual ~AgentLogReader() = default;
  // Streams the log of `request` from the agent at `address` (HOST:PORT) into `on_chunk` until
  // the agent ends the stream, `on_chunk` returns false (the call is then cancelled), or
  // `parent` (the caller's call, may be null) is cancelled: its cancellation and deadline
  // reach the agent's call. Returns the agent's status (CANCELLED when cut short).
  virtual absl::Status Read(const std::string& address, const v1::ReadLogsRequest& request,
                            const grpc::ServerContext* parent,
                            const std::function<bool(const v1::LogChunk&)>& on_chunk) = 0;
};

// Over gRPC with the given channel credentials (the scheduler's certificate; any certificate of
// the cluster's CA is accepted from the agent, as agents are reached by IP address), one
// channel per read. An unreachable agent fails at once with UNAVAILABLE.
class GrpcAgentLogReader : public AgentLogReader {
 public:
  explicit GrpcAgentLogReader(std::shared_ptr<grpc::ChannelCredentials> credentials)
      : credentials_(std::move(credentials)) {}
  absl::Status Read(const std::string& address, const v1::ReadLogsRequest& request,
                    const grpc::ServerContext* parent,
                    const std::function<bool(const v1::LogChunk&)>& on_chunk) override;

 private:
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
};

class LogRelay {
 public:
  // At most `max_relays` reads at once (a followed log holds one as long as its rank runs).
  LogRelay(AgentLogReader* reader, int max_relays) : reader_(reader), max_relays_(max_relays) {}

  // Reads the log `plan` describes (follow: until the rank's log ends) into `write`; a false
  // from `write` (the caller went away) ends it. RESOURCE_EXHAUSTED, before any agent is
  // called, while `max_relays` reads are under way.
  absl::Status Relay(const LogPlan& plan, bool follow, const grpc::ServerContext* parent,
                     const std::function<bool(const v1::LogChunk&)>& write);

  int active() const { return active_.load(); }

 private:
  AgentLogReader* reader_;
  const int max_relays_;
  std::atomic<int> active_{0};
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_RPC_LOG_RELAY_H_
