#include "common/net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/mutex.h"

namespace ringmaster {

namespace {

// The first port of the kernel's ephemeral range; 0 when it cannot be read.
int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return in >> low ? low : 0;
}

// Binds `port` (0: any) on `host` and returns the bound port, or the error.
absl::StatusOr<int> BindOnce(const std::string& host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", host));
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("bind ", host, ": ", std::strerror(err)));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

absl::StatusOr<int> PickFreePort(const std::string& host) {
  // Below the ephemeral range, at random: a port the kernel handed out for port 0 can be handed
  // out again, to any connect() or port-0 bind (mpirun's, gRPC's), before the caller's server
  // binds it, and services started by tests on a busy machine failed to bind now and then.
  constexpr int kLowest = 10000;
  static Mutex mu;
  static std::set<int> given ABSL_GUARDED_BY(mu);  // a port picked but not bound yet looks free
  static std::mt19937 rng ABSL_GUARDED_BY(mu) = std::mt19937(std::random_device{}());
  const int high = EphemeralLow() - 1;
  MutexLock lock(&mu);
  if (high - kLowest >= 1000) {
    std::uniform_int_distribution<int> pick(kLowest, high);
    for (int tries = 0; tries < 100; ++tries) {
      const int port = pick(rng);
      if (given.count(port) > 0) continue;
      absl::StatusOr<int> bound = BindOnce(host, port);
      if (bound.ok()) {
        given.insert(port);
        return port;
      }
      if (bound.status().code() == absl::StatusCode::kInvalidArgument) return bound.status();
    }
  }
  return BindOnce(host, 0);
}

absl::Status SplitHostPort(const std::string& addr, const std::string& what, std::string* host,
                           int* port) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be HOST:PORT, got '", addr, "'"));
  }
  std::string h = addr.substr(0, colon);
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(addr.substr(colon + 1), &p) || p < 0 || p > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has a bad port in '", addr, "' (0..65535 allowed)"));
  }
  *host = h;
  *port = p;
  return absl::OkStatus();
}

}  // namespace ringmaster
