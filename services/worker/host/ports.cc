#include "worker/host/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "worker/host/file_io.h"

namespace ringmaster::worker {
namespace {

// True when nothing is bound to host:port. SO_REUSEADDR, as servers set it, so that sockets of
// an earlier attempt left in TIME_WAIT do not count as taken; a listener still does.
bool PortIsFree(const std::string& host, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = INADDR_ANY;
  const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return free;
}

}  // namespace

PortPool::PortPool(int first, int last, std::string probe_host)
    : first_(first), last_(last), probe_host_(std::move(probe_host)), next_(first) {}

absl::StatusOr<int> PortPool::Acquire(const std::string& owner) {
  MutexLock lock(&mu_);
  if (auto it = by_owner_.find(owner); it != by_owner_.end()) return it->second;
  const int size = last_ - first_ + 1;
  int in_use = 0;
  for (int i = 0; i < size; ++i) {
    const int port = first_ + (next_ - first_ + i) % size;
    if (by_port_.count(port)) continue;
    // The probe is one bind() of a port the kernel never hands out by itself: cheap enough
    // under the lock, and holding it makes "probe, then record" one step.
    if (!PortIsFree(probe_host_, port)) {
      ++in_use;
      continue;
    }
    by_port_[port] = owner;
    by_owner_[owner] = port;
    next_ = port == last_ ? first_ : port + 1;
    return port;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "no free MASTER_PORT in ", first_, "-", last_, ": ", by_port_.size(),
      " held by this worker's attempts, ", in_use,
      " in use by other programs; widen --master-ports"));
}

void PortPool::Release(const std::string& owner) {
  MutexLock lock(&mu_);
  auto it = by_owner_.find(owner);
  if (it == by_owner_.end()) return;
  by_port_.erase(it->second);
  by_owner_.erase(it);
}

int PortPool::held() const {
  MutexLock lock(&mu_);
  return static_cast<int>(by_port_.size());
}

absl::StatusOr<std::pair<int, int>> ParsePortRange(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '-');
  int first = 0, last = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &first) ||
      !absl::SimpleAtoi(parts[1], &last) || first < 1 || first > last || last > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port range must be A-B with 1 <= A <= B <= 65535, got '", text, "'"));
  }
  return std::make_pair(first, last);
}

absl::StatusOr<bool> RangeOverlapsEphemeral(int first, int last) {
  absl::StatusOr<std::string> text =
      ReadFileToString("/proc/sys/net/ipv4/ip_local_port_range", 256);
  if (!text.ok()) return text.status();
  std::vector<std::string> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(*text), absl::ByAnyChar(" \t"), absl::SkipEmpty());
  int low = 0, high = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &low) ||
      !absl::SimpleAtoi(fields[1], &high)) {
    return absl::InternalError(absl::StrCat("ip_local_port_range: cannot parse '", *text, "'"));
  }
  return first <= high && low <= last;
}

}  // namespace ringmaster::worker
