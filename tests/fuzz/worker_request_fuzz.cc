// The worker agent's checks of what reaches it from outside (services/worker/core/launch.h):
// an Exec request's command and environment (ValidateExecCommand), an Assignment's placement
// (ValidatePlacement, then the launch computed from it) and a ReadLogs job id (IsSafeJobId).
// The bytes are a serialized fuzz::WorkerRequest, converted as the agent's RPC adapters
// convert it. Beyond "no crash, no leak": every refusal is INVALID_ARGUMENT, and what passes
// keeps the promises the launch relies on.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "fuzz_input.pb.h"
#include "worker/core/launch.h"
#include "worker/rpc/convert.h"

namespace {

namespace worker = ringmaster::worker;

// As AgentServiceImpl::Exec hands the request to Agent::Exec.
void CheckExec(const ringmaster::v1::ExecRequest& req) {
  const std::vector<std::string> argv(req.argv().begin(), req.argv().end());
  const std::map<std::string, std::string> env(req.env().begin(), req.env().end());
  const absl::Status status = worker::ValidateExecCommand(argv, env);
  if (!status.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(status));
    return;
  }
  // What ssh would run: no word is lost when the command is joined.
  const std::string joined = worker::JoinCommand(argv);
  FUZZ_CHECK(joined.find('\0') == std::string::npos);
  size_t bytes = 0;
  for (const std::string& word : argv) bytes += word.size() + 1;
  FUZZ_CHECK(joined.size() + 1 == bytes);
}

// As Agent::OnAssignment: validate the placement, then compute the launch from it.
void CheckAssignment(const ringmaster::v1::Assignment& proto) {
  const worker::Assignment assignment = worker::FromProto(proto);
  const absl::Status status = worker::ValidatePlacement(assignment.placement);
  if (!status.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(status));
    return;
  }
  const std::vector<worker::GangHost> hosts = worker::GangHosts(assignment.placement);
  // Every placed rank has exactly one MPI rank.
  std::vector<int32_t> placed = worker::PlacedRankOfMpiRank(hosts);
  FUZZ_CHECK(placed.size() == assignment.placement.size());
  std::sort(placed.begin(), placed.end());
  std::vector<int32_t> expected(placed.size());
  std::iota(expected.begin(), expected.end(), 0);
  FUZZ_CHECK(placed == expected);
  // ringmaster-rsh finds every host's agent port again, and the hostfile has a line per host.
  const std::string ports = worker::AgentPortsValue(hosts);
  for (const worker::GangHost& host : hosts) {
    absl::StatusOr<int32_t> port = worker::AgentPortOf(ports, host.address);
    FUZZ_CHECK(port.ok() && *port == host.port);
  }
  const std::string hostfile = worker::HostfileText(hosts);
  FUZZ_CHECK(static_cast<size_t>(std::count(hostfile.begin(), hostfile.end(), '\n')) ==
             hosts.size());
  absl::StatusOr<std::vector<std::string>> argv =
      worker::WorkloadArgv(assignment, "ringmaster-train");
  FUZZ_CHECK(argv.ok() ? !argv->empty() : absl::IsInvalidArgument(argv.status()));
}

// As Agent::ReadLogs: a job id that passes names a directory inside the log directory.
void CheckReadLogs(const ringmaster::v1::ReadLogsRequest& req) {
  if (!worker::IsSafeJobId(req.job_id())) return;
  FUZZ_CHECK(req.job_id() != "." && req.job_id() != "..");
  FUZZ_CHECK(req.job_id().find('/') == std::string::npos);
  const std::string path =
      worker::RankLogRelativePath(req.job_id(), req.attempt(), std::max(req.rank(), 0));
  FUZZ_CHECK(path.rfind(req.job_id() + "/", 0) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringmaster::fuzz::WorkerRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  switch (request.request_case()) {
    case ringmaster::fuzz::WorkerRequest::kExec:
      CheckExec(request.exec());
      break;
    case ringmaster::fuzz::WorkerRequest::kAssignment:
      CheckAssignment(request.assignment());
      break;
    case ringmaster::fuzz::WorkerRequest::kReadLogs:
      CheckReadLogs(request.read_logs());
      break;
    case ringmaster::fuzz::WorkerRequest::REQUEST_NOT_SET:
      break;
  }
  return 0;
}
