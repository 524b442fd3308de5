// PortPool: the MASTER_PORTs of the attempts this worker launches (rank 0 listens there for a
// framework's rendezvous, e.g. torch.distributed).
//
// Why a pool and not "bind port 0, read it back, close": the port is free only until the
// close; any connect() or bind(0) on the host can take it from the kernel's ephemeral range
// before rank 0 binds it, and two attempts launched at once can both be told the same one. A
// pool hands out ports from a configured range that lies outside the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range; RangeOverlapsEphemeral checks it), so the kernel never
// picks them on its own; under its lock it never gives a held port to a second attempt, and an
// attempt holds its port until the worker forgets the attempt. A port some other program
// already listens on is skipped (probe bind). Workers that share one host and listen on the
// same address need ranges of their own.
//
// Thread-safe.
#ifndef RINGMASTER_SERVICES_WORKER_HOST_PORTS_H_
#define RINGMASTER_SERVICES_WORKER_HOST_PORTS_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace ringmaster::worker {

class PortPool {
 public:
  // Ports first..last (inclusive); probes bind on `probe_host` (an IPv4 address; not one:
  // 0.0.0.0).
  PortPool(int first, int last, std::string probe_host);

  // A port no other owner holds and nothing on the host is bound to. Ports are handed out
  // round-robin, so a released port is the last to come back (its sockets may linger in
  // TIME_WAIT). RESOURCE_EXHAUSTED when every port of the range is held or in use.
  absl::StatusOr<int> Acquire(const std::string& owner);
  // Gives back `owner`'s port, if it holds one.
  void Release(const std::string& owner);
  int held() const;

 private:
  const int first_;
  const int last_;
  const std::string probe_host_;
  mutable Mutex mu_;
  std::map<std::string, int> by_owner_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::string> by_port_ ABSL_GUARDED_BY(mu_);
  int next_ ABSL_GUARDED_BY(mu_);
};

// "A-B" -> {A, B}: 1 <= A <= B <= 65535. INVALID_ARGUMENT otherwise.
absl::StatusOr<std::pair<int, int>> ParsePortRange(const std::string& text);

// Whether [first, last] meets the kernel's ephemeral port range; NOT_FOUND etc. when the
// range cannot be read (not Linux, no /proc).
absl::StatusOr<bool> RangeOverlapsEphemeral(int first, int last);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_PORTS_H_
