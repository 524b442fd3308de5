// `ringctl logs`: a rank's output, read from the worker agent it ran on (WorkerAgent.ReadLogs in
// proto/ringmaster/v1/agent.proto). The scheduler says where: the job's placement while it
// runs; for a job without a placement (ended, or waiting to restart) every known worker is
// asked for the job's last attempt, since each keeps the logs of the ranks it ran.
#ifndef RINGMASTER_CLI_LOGS_H_
#define RINGMASTER_CLI_LOGS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "client.h"
#include "errors.h"
#include "ringmaster/v1/agent.grpc.pb.h"

namespace ringmaster::cli {

// Reads logs from worker agents. The seam tests replace; each call returns the gRPC status as
// an absl::Status with the same code and message.
class WorkerLogsClient {
 public:
  virtual ~WorkerLogsClient() = default;
  // Streams the log of `request` from the agent at `agent_address` (HOST:PORT), calling
  // `on_chunk` for every piece in order.
  virtual absl::Status ReadLogs(const std::string& agent_address,
                                const v1::ReadLogsRequest& request,
                                const std::function<void(const v1::LogChunk&)>& on_chunk) = 0;
};

// Over gRPC, one channel per call with the given credentials (the agents require a client
// certificate of the cluster's CA unless they run --insecure). No deadline (a followed log
// lasts as long as its rank); an unreachable agent fails at once with UNAVAILABLE.
class GrpcWorkerLogsClient : public WorkerLogsClient {
 public:
  explicit GrpcWorkerLogsClient(std::shared_ptr<grpc::ChannelCredentials> credentials)
      : credentials_(std::move(credentials)) {}
  absl::Status ReadLogs(const std::string& agent_address, const v1::ReadLogsRequest& request,
                        const std::function<void(const v1::LogChunk&)>& on_chunk) override;

 private:
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
};

struct LogsOptions {
  std::string job_id;
  int32_t rank = 0;
  // Unset: the job's current (or last) attempt.
  std::optional<int32_t> attempt;
  bool follow = false;
  // For messages: the scheduler's address.
  std::string scheduler;
};

// Writes the rank's log to `out` (flushed chunk by chunk); nullopt when it worked, else how
// ringctl should fail.
std::optional<Failure> PrintRankLog(const LogsOptions& options, SchedulerClient& scheduler,
                                    WorkerLogsClient& workers, std::ostream& out);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_LOGS_H_
