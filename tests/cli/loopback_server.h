// A gRPC server of fake services on a free loopback port, for the CLI's tests: plaintext, and
// reached directly (gRPC honours proxy variables, which the test process drops).
#ifndef RINGMASTER_TESTS_CLI_LOOPBACK_SERVER_H_
#define RINGMASTER_TESTS_CLI_LOOPBACK_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ringmaster::cli {

// The server, and its "127.0.0.1:PORT" in `address`; null when it could not start.
inline std::unique_ptr<grpc::Server> StartLoopbackServer(
    const std::vector<grpc::Service*>& services, std::string* address) {
  for (const char* name :
       {"http_proxy", "https_proxy", "grpc_proxy", "HTTP_PROXY", "HTTPS_PROXY"}) {
    unsetenv(name);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port <= 0) return nullptr;
  *address = absl::StrCat("127.0.0.1:", port);
  return server;
}

}  // namespace ringmaster::cli

#endif  // RINGMASTER_TESTS_CLI_LOOPBACK_SERVER_H_
