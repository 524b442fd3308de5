// ringctl: the command-line client of the Ringmaster scheduler. See docs/ringctl.md.
#include <grpc/support/log.h>

#include <iostream>
#include <string>
#include <vector>

#include "app.h"

namespace {
// gRPC's own log lines (e.g. "Handshake failed ..." of a TLS error) would break ringctl's
// one-line errors; the reason reaches the user in the call's status anyway.
void DropGrpcLog(gpr_log_func_args*) {}
}  // namespace

int main(int argc, char** argv) {
  gpr_set_log_function(DropGrpcLog);
  std::vector<std::string> args(argv + 1, argv + argc);
  return ringmaster::cli::RunCli(args, ringmaster::cli::ProcessRuntime(), std::cout, std::cerr);
}
