// ringctl as a function: argv in; output, one error line and an exit code out. Everything
// outside the process (environment, clock, sleeping, randomness, the scheduler connection)
// comes in through Runtime so that tests drive it with fakes.
#ifndef RINGMASTER_CLI_APP_H_
#define RINGMASTER_CLI_APP_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "args.h"
#include "client.h"
#include "logs.h"

namespace ringmaster::cli {

struct Runtime {
  GetEnvFn getenv;
  // Unix milliseconds now; used for ages in tables.
  std::function<int64_t()> now_ms;
  std::function<void(std::chrono::milliseconds)> sleep;
  std::function<std::string()> new_request_id;
  // Opens a client for the scheduler at an address (not yet connected), with the channel
  // credentials of the command's TLS flags and the bearer token every call carries (empty:
  // none; common/bearer_token.h).
  std::function<std::unique_ptr<SchedulerClient>(
      const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials,
      const std::string& token)>
      connect;
  RetryPolicy retry;
};

// The Runtime of the real binary: process environment, system clock, gRPC.
Runtime ProcessRuntime();

// Runs one ringctl invocation (`args` without the program name). Results go to `out`; on
// failure exactly one line "ringctl: ..." goes to `err` (`submit --follow` also names the job it
// follows there first, as its output is the rank's). Returns the exit code (errors.h).
int RunCli(const std::vector<std::string>& args, const Runtime& runtime, std::ostream& out,
           std::ostream& err);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_APP_H_
