#include "worker/rpc/local_socket.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ringmaster::worker {

absl::StatusOr<std::unique_ptr<LocalSocketServer>> LocalSocketServer::Start(
    const std::string& path, grpc::Service* service) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--agent-socket: '", path, "' must be a path of 1..", sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  auto server = std::unique_ptr<LocalSocketServer>(new LocalSocketServer());
  server->path_ = path;
  // A socket left by an earlier life of this worker (never a file or directory of another).
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("--agent-socket: ", path, " exists and is not a socket"));
    }
    unlink(path.c_str());
  }
  server->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server->listen_fd_ < 0) {
    return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  }
  if (bind(server->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      chmod(path.c_str(), 0666) != 0 || listen(server->listen_fd_, 128) != 0) {
    const int err = errno;
    close(server->listen_fd_);
    server->listen_fd_ = -1;
    return absl::UnavailableError(
        absl::StrCat("--agent-socket: cannot listen on ", path, ": ", std::strerror(err)));
  }
  grpc::ServerBuilder builder;
  builder.RegisterService(service);
  server->server_ = builder.BuildAndStart();
  if (!server->server_) {
    close(server->listen_fd_);
    server->listen_fd_ = -1;
    return absl::InternalError("cannot start the local socket's gRPC server");
  }
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

LocalSocketServer::~LocalSocketServer() { Shutdown(); }

void LocalSocketServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
  unlink(path_.c_str());
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

void LocalSocketServer::AcceptLoop() {
  while (!stopping_) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (poll(&pfd, 1, 200) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        RM_LOG(kWarning) << "local socket " << path_ << ": accept: " << std::strerror(errno);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      continue;
    }
    // gRPC owns the connection from here (it closes the fd).
    grpc::AddInsecureChannelFromFd(server_.get(), fd);
  }
}

absl::StatusOr<uid_t> PeerUid(const grpc::ServerContext& ctx) {
  const std::string peer = ctx.peer();
  int fd = -1;
  if (!absl::StartsWith(peer, "fd:") || !absl::SimpleAtoi(peer.substr(3), &fd) || fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("the caller (", peer, ") did not come through the local socket"));
  }
  // The connection is open while its call is: the fd is still its socket.
  sockaddr_un local{};
  socklen_t len = sizeof(local);
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
      local.sun_family != AF_UNIX ||
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot tell the caller's user (", peer, "): ", std::strerror(errno)));
  }
  return cred.uid;
}

}  // namespace ringmaster::worker
