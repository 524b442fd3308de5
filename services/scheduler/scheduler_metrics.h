// SchedulerMetrics: the scheduler's Prometheus families, registered once with the registry.
//
// It owns the families and the label sets already shown (so a vanished label set is set back
// to 0 rather than left stale). Counters and histograms are prometheus-cpp's, safe from any
// thread. UpdateGauges rewrites the gauges from a view of the live state and keeps the label
// sets: one caller at a time (the scheduler calls it under its mu_). No threads of its own.
#ifndef RINGMASTER_SERVICES_SCHEDULER_SCHEDULER_METRICS_H_
#define RINGMASTER_SERVICES_SCHEDULER_SCHEDULER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "core/fair_share.h"
#include "core/placement.h"
#include "core/types.h"
#include "core/usage.h"

namespace ringmaster::scheduler {

// Names follow the platform's convention: ringmaster_ prefix, base units, _total for counters.
class SchedulerMetrics {
 public:
  explicit SchedulerMetrics(prometheus::Registry& r);
  SchedulerMetrics(const SchedulerMetrics&) = delete;
  SchedulerMetrics& operator=(const SchedulerMetrics&) = delete;

  // What the gauges show, read from the live state under the scheduler's lock.
  struct LiveView {
    const std::map<std::pair<JobState, std::string>, int64_t>& live_counts;  // (state, queue)
    const std::map<std::string, Queue>& queues;
    const QuotaLedger& ledger;
    const UsageTotals& used_ms;  // accounting, running attempts included
    const ClusterState& cluster;
    const std::map<std::string, Worker>& workers;
  };
  void UpdateGauges(const LiveView& live);

  // A stored submit's wait split by stage (ringmaster_submit_wait_seconds): from its hand-over
  // to its batch's commit, the commit, and from the commit until it was answered.
  void ObserveSubmitWait(std::chrono::steady_clock::time_point handed,
                         std::chrono::steady_clock::time_point commit_begun,
                         std::chrono::steady_clock::time_point committed,
                         std::chrono::steady_clock::time_point told);

  prometheus::Family<prometheus::Gauge>& jobs;
  prometheus::Family<prometheus::Counter>& finished;
  prometheus::Family<prometheus::Gauge>& pending;
  prometheus::Family<prometheus::Gauge>& gpus;
  prometheus::Family<prometheus::Gauge>& gpus_allocated;
  prometheus::Family<prometheus::Gauge>& cpu_slots;
  prometheus::Family<prometheus::Gauge>& workers;
  prometheus::Family<prometheus::Counter>& submissions;
  prometheus::Histogram& commit_seconds;
  prometheus::Histogram& batch_writes;
  prometheus::Family<prometheus::Histogram>& submit_wait;
  prometheus::Histogram* submit_queued;
  prometheus::Histogram* submit_commit;
  prometheus::Histogram* submit_apply;
  prometheus::Histogram& placement_latency;
  prometheus::Family<prometheus::Counter>& preemptions;
  prometheus::Family<prometheus::Counter>& resizes;
  prometheus::Family<prometheus::Gauge>& queue_quota;
  prometheus::Family<prometheus::Gauge>& queue_share;
  prometheus::Family<prometheus::Counter>& queue_usage;
  prometheus::Family<prometheus::Counter>& watch_actions;
  prometheus::Counter* hangs_detected;
  prometheus::Counter* idle_reclaimed;
  prometheus::Family<prometheus::Gauge>& check_busbw;
  prometheus::Family<prometheus::Gauge>& check_baseline;
  prometheus::Family<prometheus::Counter>& checks;
  prometheus::Histogram& check_seconds;
  prometheus::Gauge& unhealthy;
  // GPU shares (docs/gpu-sharing.md): per type, and per device of a worker.
  prometheus::Family<prometheus::Gauge>& gpus_shared;
  prometheus::Family<prometheus::Gauge>& gpu_share_held;
  prometheus::Family<prometheus::Gauge>& gpus_fragmented;
  prometheus::Family<prometheus::Gauge>& device_share;
  prometheus::Family<prometheus::Gauge>& device_memory_promised;

 private:
  // Label sets set before (UpdateGauges only).
  std::set<std::pair<std::string, std::string>> quota_labels_;
  std::set<std::pair<std::string, std::string>> job_labels_;
  std::set<std::string> queue_labels_;
  std::set<std::string> gpu_labels_;
  std::set<std::pair<std::string, std::string>> device_labels_;  // (worker, GPU index)
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_SCHEDULER_METRICS_H_
