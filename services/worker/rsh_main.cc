// ringmaster-rsh: mpirun's remote-launch agent (plm_rsh_agent), in place of ssh.
//   ringmaster-rsh HOST COMMAND...
// runs COMMAND (its words joined by spaces, as ssh does) through the Exec call of the
// Ringmaster worker at HOST, with the job id, attempt and token mpirun got from the launching
// worker; streams the output to our stdout/stderr and exits with the remote exit status (128 +
// signal for a signal, 255 when the call itself failed, as ssh does). SIGTERM, SIGINT or SIGHUP
// cancel the call, which stops the remote command.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/mutex.h"
#include "common/tls.h"
#include "core/launch.h"
#include "rpc/agent_client.h"

namespace {

constexpr int kCallFailed = 255;

int Fail(const std::string& message) {
  std::fprintf(stderr, "ringmaster-rsh: %s\n", message.c_str());
  return kCallFailed;
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringmaster::worker;
  namespace v1 = ringmaster::v1;
  ringmaster::TurnOffAbslDeadlockDetection();
  ringmaster::Flags flags("ringmaster-rsh",
                          "mpirun's remote-launch agent: runs COMMAND through the Exec call of "
                          "the Ringmaster worker at HOST, in place of ssh.");
  flags.SetArguments("HOST COMMAND...",
                     "HOST: [USER@]HOST of a worker of the job; COMMAND: what to run there (its "
                     "words joined by spaces, as ssh does). The exit status is the remote one "
                     "(128 + signal), 255 when the call itself failed.",
                     /*pass_through=*/true);
  flags.AddEnvironment(kAgentPortsEnv, "agent port of every worker of the job (from mpirun)");
  flags.AddEnvironment(kJobIdEnv, "the job (from mpirun)");
  flags.AddEnvironment(kAttemptEnv, "the job's attempt (from mpirun)");
  flags.AddEnvironment(kTokenEnv, "the job's token that Exec checks (from mpirun)");
  flags.AddEnvironment("RINGMASTER_TLS_CERT, RINGMASTER_TLS_KEY, RINGMASTER_TLS_CA",
                       "the launching worker's certificate; RINGMASTER_INSECURE=1: plaintext");
  flags.AddEnvironment(kAgentSocketEnv,
                       "the local agent's socket, when the job runs as its team's user: Exec "
                       "goes there and the agent forwards it to HOST");
  if (absl::Status parsed = flags.Parse(argc, argv); !parsed.ok()) {
    std::fprintf(stderr, "ringmaster-rsh: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  const std::vector<std::string>& args = flags.positional();
  if (args.size() < 2) {
    std::fprintf(stderr, "ringmaster-rsh: expected HOST COMMAND... (see ringmaster-rsh --help)\n");
    return 2;
  }
  std::string host = args[0];
  if (auto at = host.rfind('@'); at != std::string::npos) host = host.substr(at + 1);
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v == nullptr ? "" : v;
  };
  const std::string ports = env(kAgentPortsEnv);
  int32_t attempt = 0;
  if (ports.empty() || env(kJobIdEnv).empty() || !absl::SimpleAtoi(env(kAttemptEnv), &attempt)) {
    return Fail(absl::StrCat("needs ", kAgentPortsEnv, ", ", kJobIdEnv, ", ", kAttemptEnv, " and ",
                             kTokenEnv, ": mpirun gets them from the launching worker"));
  }
  absl::StatusOr<int32_t> port = AgentPortOf(ports, host);
  if (!port.ok()) return Fail(std::string(port.status().message()));

  // Block the stop signals in every thread (gRPC's included); one thread waits for them.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stop, sig);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  grpc::ClientContext ctx;
  std::thread([&ctx, stop] {
    int sig = 0;
    sigwait(&stop, &sig);
    ctx.TryCancel();
  }).detach();

  v1::ExecRequest request;
  request.set_job_id(env(kJobIdEnv));
  request.set_attempt(attempt);
  request.set_token(env(kTokenEnv));
  for (size_t i = 1; i < args.size(); ++i) request.add_argv(args[i]);
  // The launching worker's certificate (RINGMASTER_TLS_*, set by the worker for mpirun); or,
  // when the job runs as its team's user (no certificate), the local agent's socket, which
  // forwards the call to HOST's agent with the worker's certificate.
  const std::string target = absl::StrCat(host, ":", *port);
  const std::string agent_socket = env(kAgentSocketEnv);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      agent_socket.empty()
          ? ringmaster::MakeChannelCredentials(ringmaster::TlsOptionsFromEnvironment(),
                                               ringmaster::ServerName::kAnyOfTheCa)
          : grpc::InsecureChannelCredentials();
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));
  if (!agent_socket.empty()) request.set_forward_to(target);
  AgentClient agent(agent_socket.empty() ? target : "unix:" + agent_socket, *credentials);
  absl::StatusOr<v1::ExitStatus> result = agent.Exec(
      request,
      [](bool is_stderr, std::string_view data) {
        WriteAll(is_stderr ? STDERR_FILENO : STDOUT_FILENO, data);
      },
      &ctx);
  if (!result.ok()) {
    return Fail(absl::StrCat(target, ": ", result.status().ToString()));
  }
  return result->signal() != 0 ? 128 + result->signal() : result->exit_code();
}
