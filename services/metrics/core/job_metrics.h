// The metrics service's state: the latest throughput of every rank of every running job, with
// derived values (job throughput, allreduce bus bandwidth, scaling efficiency) and a step-time
// histogram. Memory is bounded: a job's series go away `ttl_ms` after its last sample, and at
// most `max_jobs` jobs and `max_ranks` ranks are held; what does not fit is refused and
// counted. Plain C++, no I/O; not thread-safe (the service guards it with a mutex, taken once
// per batch of samples). Per sample it costs two hash lookups (job, rank) and no allocation
// once the rank is known, since the ingest path runs it for every sample of every rank.
#ifndef RINGMASTER_SERVICES_METRICS_CORE_JOB_METRICS_H_
#define RINGMASTER_SERVICES_METRICS_CORE_JOB_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "metrics/core/sample.h"

namespace ringmaster::metrics {

// Step-time histogram bounds in seconds (Prometheus "le").
inline constexpr std::array<double, 14> kStepBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                        0.1,   0.25,   0.5,   1,    2.5,   5,
                                                        10,    30};

struct Limits {
  int64_t ttl_ms = 300'000;
  size_t max_jobs = 1000;
  size_t max_ranks = 65536;
};

struct RankView {
  int32_t rank = 0;
  std::string worker_id;
  double samples_per_second = 0;
  double step_seconds = 0;
};

struct JobView {
  std::string job_id;
  std::string queue, model, gpu_type;
  int32_t world_size = 1;
  int32_t attempt = 0;
  int64_t step = 0;
  double samples_per_second = 0;       // sum over the ranks' latest samples
  double bus_bandwidth = 0;            // bytes/s, nccl-tests busbw of the latest allreduce
  double loss = -1;                    // rank 0's latest; < 0 when none
  double scaling_efficiency = -1;      // < 0 when no baseline is known
  std::array<uint64_t, kStepBuckets.size()> step_buckets{};  // cumulative counts per bound
  uint64_t step_count = 0;
  double step_sum = 0;
  std::vector<RankView> ranks;
};

class JobMetrics {
 public:
  explicit JobMetrics(Limits limits) : limits_(limits) {}

  // Validates (ValidateSample) and records one sample at `now_ms`; kNone when kept.
  DropReason Add(const SampleIn& sample, int64_t now_ms);
  // Records a sample that already passed ValidateSample (the service validates outside its
  // lock); only the checks that need state remain: stale attempt, job and rank caps.
  DropReason Record(const SampleIn& sample, int64_t now_ms);
  // Counts a sample that was dropped before it got here (by ValidateSample).
  void CountDropped(DropReason reason, uint64_t n = 1) {
    dropped_[static_cast<size_t>(reason)] += n;
  }
  // The 1-rank throughput of `model` on `gpu_type`; false (and nothing kept) when invalid.
  bool DeclareBaseline(const std::string& model, const std::string& gpu_type,
                       double samples_per_second);
  // Drops jobs whose last sample is older than the TTL.
  void Expire(int64_t now_ms);
  std::vector<JobView> Snapshot() const;
  size_t jobs() const { return jobs_.size(); }
  size_t ranks() const { return rank_count_; }
  uint64_t accepted() const { return accepted_; }
  uint64_t dropped(DropReason reason) const { return dropped_[static_cast<size_t>(reason)]; }

 private:
  struct Rank {
    std::string worker_id;
    double samples_per_second = 0;
    double step_seconds = 0;
  };
  struct Job {
    JobView view;  // labels and histogram (per-bucket counts here, cumulated by Snapshot)
    absl::flat_hash_map<int32_t, Rank> ranks;
    int64_t last_ms = 0;
  };
  double Baseline(const std::string& model, const std::string& gpu_type) const;

  Limits limits_;
  // Node map: a Job stays where it is while others come and go.
  absl::node_hash_map<std::string, Job> jobs_;
  size_t rank_count_ = 0;
  std::map<std::pair<std::string, std::string>, double> declared_;
  std::map<std::pair<std::string, std::string>, double> learned_;  // from 1-rank jobs
  uint64_t accepted_ = 0;
  std::array<uint64_t, kDropReasonCount> dropped_{};
};

}  // namespace ringmaster::metrics

#endif  // RINGMASTER_SERVICES_METRICS_CORE_JOB_METRICS_H_
