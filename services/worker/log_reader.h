// LogReader: serves ReadLogs, a rank's log from this worker's log directory (the latest attempt
// with one when none is named), following it while the rank may still write. It owns no state
// of the agent's: whether a rank may still write is the `live` callback's answer (the agent's,
// which takes the agent's mutex; LogReader holds no lock of its own). Runs on the caller's
// thread (an RPC's) and polls the file; thread-safe.
#ifndef RINGMASTER_SERVICES_WORKER_LOG_READER_H_
#define RINGMASTER_SERVICES_WORKER_LOG_READER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/layout.h"

namespace ringmaster::worker {

class LogReader {
 public:
  // Whether more output may still come to rank `rank`'s log of the attempt.
  using Live = std::function<bool(const std::string& job_id, int32_t attempt, int32_t rank)>;

  LogReader(WorkerLayout layout, std::string worker_id, Live live)
      : layout_(std::move(layout)), worker_id_(std::move(worker_id)), live_(std::move(live)) {}

  // Streams a rank's log (see ReadLogsRequest). `write(data, attempt)` returning false ends it.
  absl::Status Read(const std::string& job_id, int32_t rank, std::optional<int32_t> attempt,
                    bool follow, const std::function<bool(std::string_view, int32_t)>& write,
                    const std::function<bool()>& cancelled) const;

 private:
  const WorkerLayout layout_;
  const std::string worker_id_;
  const Live live_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_LOG_READER_H_
