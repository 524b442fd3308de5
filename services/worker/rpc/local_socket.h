// LocalSocketServer: the agent's Unix domain socket (--agent-socket), for the processes of
// attempts that run as a team's Unix user (ringmaster-rank, ringmaster-rsh). They cannot read
// the worker's TLS key, so they cannot use the agent's TCP port; here the kernel tells who
// calls. One thread accepts connections and hands each to a gRPC server of its own (no
// listening port), whose calls can then ask PeerUid for the caller's uid. Owns the socket
// file (removed at Shutdown). Thread-safe.
#ifndef RINGMASTER_SERVICES_WORKER_RPC_LOCAL_SOCKET_H_
#define RINGMASTER_SERVICES_WORKER_RPC_LOCAL_SOCKET_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace ringmaster::worker {

class LocalSocketServer {
 public:
  // Binds `path` (a stale socket there is replaced; its directory must be root's, see
  // EnsurePrivateDirectory), mode 0666: any local user may connect, and each call is judged
  // by its token and its caller's uid. `service` must outlive the server.
  static absl::StatusOr<std::unique_ptr<LocalSocketServer>> Start(const std::string& path,
                                                                  grpc::Service* service);
  ~LocalSocketServer();
  LocalSocketServer(const LocalSocketServer&) = delete;
  LocalSocketServer& operator=(const LocalSocketServer&) = delete;

  void Shutdown();
  const std::string& path() const { return path_; }

 private:
  LocalSocketServer() = default;
  void AcceptLoop();

  std::string path_;
  int listen_fd_ = -1;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
};

// The uid of the process at the other end of the call's connection, for calls that came in
// through a LocalSocketServer (their peer is "fd:N", the connection's socket in this
// process). PERMISSION_DENIED for any other call.
absl::StatusOr<uid_t> PeerUid(const grpc::ServerContext& ctx);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_RPC_LOCAL_SOCKET_H_
