// AgentMetrics: the worker's Prometheus families (ringmaster_worker_ prefix, base units, _total
// counters): ranks and attempts held, rank exits, Exec calls, launches, the scheduler
// connection, the inventory, and each rank's last throughput. It owns the throughput gauges of
// ranks and removes those of a forgotten job once metrics_retention has passed.
//
// Thread-safe: every method may be called from any thread. Its own mutex guards the throughput
// gauges and their expiry; it is a leaf (taken under the agent's mutex, never the other way).
// Without a registry every method does nothing.
#ifndef RINGMASTER_SERVICES_WORKER_AGENT_METRICS_H_
#define RINGMASTER_SERVICES_WORKER_AGENT_METRICS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "core/types.h"

namespace prometheus {
class Gauge;
class Registry;
}  // namespace prometheus

namespace ringmaster::worker {

class AgentMetrics {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // `registry` may be null (no metrics); it must outlive this.
  AgentMetrics(prometheus::Registry* registry, const Inventory& inventory);
  ~AgentMetrics();
  AgentMetrics(const AgentMetrics&) = delete;
  AgentMetrics& operator=(const AgentMetrics&) = delete;

  void SetSchedulerConnected(bool connected);
  // A rank end reported to the scheduler.
  void CountRankExit(bool succeeded);
  // An Exec call's result: ok, denied, invalid, busy, error.
  void CountExec(const char* result);
  // A launch's result (started, failed), by mpirun or, `direct`, a one-rank attempt's
  // ringmaster-rank started without it.
  void CountLaunch(const char* result, bool direct);
  // Ranks of held attempts by phase, and how many attempts are held.
  void SetHeld(int assigned, int running, int ended, size_t attempts);
  void SetThroughput(const std::string& job_id, int32_t rank, double images_per_second);
  // The job's last attempt here was forgotten: its throughput gauges go at `at`, unless the job
  // is held again by then.
  void ExpireJobAt(const std::string& job_id, TimePoint at);
  // Removes the gauges of jobs whose time came at `now` and which are not in `held_jobs`.
  void RemoveExpired(TimePoint now, const std::set<std::string>& held_jobs);

 private:
  struct Families;
  std::unique_ptr<Families> families_;  // null without a registry; set once
  Mutex mu_;
  std::map<std::pair<std::string, int32_t>, prometheus::Gauge*> rank_throughput_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<TimePoint, std::string>> expiring_jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_AGENT_METRICS_H_
