#include "metrics/core/job_metrics.h"

#include <algorithm>
#include <cmath>

namespace ringmaster::metrics {
namespace {

bool InRange(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

// Assigns only when different: the labels of a job rarely change, and comparing is cheaper than
// copying on every sample.
void Set(std::string& to, absl::string_view from) {
  if (to != from) to.assign(from.data(), from.size());
}

}  // namespace

DropReason JobMetrics::Add(const SampleIn& s, int64_t now_ms) {
  DropReason reason = DropReason::kNone;
  if (!ValidateSample(s, &reason).ok()) {
    CountDropped(reason);
    return reason;
  }
  return Record(s, now_ms);
}

DropReason JobMetrics::Record(const SampleIn& s, int64_t now_ms) {
  DropReason reason = DropReason::kNone;
  auto it = jobs_.find(s.job_id);
  Job* job = it == jobs_.end() ? nullptr : &it->second;
  if (job == nullptr && jobs_.size() >= limits_.max_jobs) reason = DropReason::kTooManyJobs;
  if (job != nullptr && s.attempt < job->view.attempt) reason = DropReason::kStaleAttempt;
  const bool new_rank =
      job == nullptr || s.attempt > job->view.attempt || !job->ranks.contains(s.rank);
  if (reason == DropReason::kNone && new_rank && rank_count_ >= limits_.max_ranks) {
    reason = DropReason::kTooManyRanks;
  }
  if (reason != DropReason::kNone) {
    CountDropped(reason);
    return reason;
  }
  if (job == nullptr) job = &jobs_.try_emplace(std::string(s.job_id)).first->second;
  if (job->ranks.empty() || s.attempt > job->view.attempt) {
    // A new attempt starts over: the ranks of the last one are gone.
    rank_count_ -= job->ranks.size();
    job->ranks.clear();
    job->view = JobView{};
    job->view.job_id.assign(s.job_id.data(), s.job_id.size());
    job->view.attempt = s.attempt;
  }
  JobView& v = job->view;
  if (!s.queue.empty()) Set(v.queue, s.queue);
  if (!s.model.empty()) Set(v.model, s.model);
  if (!s.gpu_type.empty()) Set(v.gpu_type, s.gpu_type);
  v.world_size = s.world_size;
  v.step = std::max(v.step, s.step);
  if (s.rank == 0 && s.loss >= 0) v.loss = s.loss;
  if (s.allreduce_seconds > 0 && s.allreduce_bytes > 0) {
    const double n = s.world_size;
    v.bus_bandwidth = s.allreduce_bytes / s.allreduce_seconds * 2 * (n - 1) / n;
  }
  if (s.step_seconds > 0) {
    // One bucket per sample here; Snapshot makes the counts cumulative as Prometheus wants.
    auto bound = std::lower_bound(kStepBuckets.begin(), kStepBuckets.end(), s.step_seconds);
    if (bound != kStepBuckets.end()) ++v.step_buckets[bound - kStepBuckets.begin()];
    ++v.step_count;
    v.step_sum += s.step_seconds;
  }
  auto [rank, added] = job->ranks.try_emplace(s.rank);
  if (added) ++rank_count_;
  Set(rank->second.worker_id, s.worker_id);
  if (s.samples_per_second > 0) rank->second.samples_per_second = s.samples_per_second;
  if (s.step_seconds > 0) rank->second.step_seconds = s.step_seconds;
  if (s.world_size == 1 && s.samples_per_second > 0 && !v.model.empty()) {
    learned_[{v.model, v.gpu_type}] = s.samples_per_second;
  }
  job->last_ms = now_ms;
  ++accepted_;
  return DropReason::kNone;
}

bool JobMetrics::DeclareBaseline(const std::string& model, const std::string& gpu_type,
                                 double samples_per_second) {
  if (model.empty() || !IsLabel(model) || !IsLabel(gpu_type) ||
      !InRange(samples_per_second, 1e-9, 1e9) || declared_.size() >= limits_.max_jobs) {
    return false;
  }
  declared_[{model, gpu_type}] = samples_per_second;
  return true;
}

double JobMetrics::Baseline(const std::string& model, const std::string& gpu_type) const {
  auto it = declared_.find({model, gpu_type});
  if (it != declared_.end()) return it->second;
  it = learned_.find({model, gpu_type});
  return it == learned_.end() ? 0 : it->second;
}

void JobMetrics::Expire(int64_t now_ms) {
  absl::erase_if(jobs_, [&](const auto& entry) {
    if (now_ms - entry.second.last_ms <= limits_.ttl_ms) return false;
    rank_count_ -= entry.second.ranks.size();
    return true;
  });
}

std::vector<JobView> JobMetrics::Snapshot() const {
  // The maps are unordered for the ingest path's sake; the exposition is sorted (by job id,
  // then rank) so that scrapes are stable and diffable.
  std::vector<const Job*> jobs;
  jobs.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) jobs.push_back(&job);
  std::sort(jobs.begin(), jobs.end(),
            [](const Job* a, const Job* b) { return a->view.job_id < b->view.job_id; });
  std::vector<JobView> out;
  out.reserve(jobs.size());
  for (const Job* job : jobs) {
    JobView v = job->view;
    for (size_t i = 1; i < v.step_buckets.size(); ++i) v.step_buckets[i] += v.step_buckets[i - 1];
    v.samples_per_second = 0;
    for (const auto& [r, rank] : job->ranks) {
      v.samples_per_second += rank.samples_per_second;
      v.ranks.push_back({r, rank.worker_id, rank.samples_per_second, rank.step_seconds});
    }
    std::sort(v.ranks.begin(), v.ranks.end(),
              [](const RankView& a, const RankView& b) { return a.rank < b.rank; });
    const double base = Baseline(v.model, v.gpu_type);
    if (base > 0 && v.samples_per_second > 0) {
      v.scaling_efficiency = v.samples_per_second / (v.world_size * base);
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace ringmaster::metrics
