#include "core/job_metrics.h"

#include <cctype>
#include <cmath>

namespace ringmaster::metrics {
namespace {

bool IsJobId(const std::string& id) {
  if (id.size() < 3 || id.size() > 64 || id.compare(0, 2, "j-") != 0) return false;
  for (size_t i = 2; i < id.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(id[i])) || std::isupper(id[i])) return false;
  }
  return true;
}

// Label values end up in every series name; keep them short and plain.
bool IsLabel(const std::string& value) {
  if (value.size() > 63) return false;
  for (char c : value) {
    if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) &&
        c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

bool InRange(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

DropReason Check(const SampleIn& s) {
  if (!IsJobId(s.job_id)) return DropReason::kBadId;
  if (!IsLabel(s.queue) || !IsLabel(s.model) || !IsLabel(s.gpu_type) || !IsLabel(s.worker_id)) {
    return DropReason::kBadLabel;
  }
  bool ok = s.world_size >= 1 && s.world_size <= 4096 && s.rank >= 0 && s.rank < s.world_size &&
            s.attempt >= 0 && s.step >= 0 && InRange(s.step_seconds, 0, 86400) &&
            InRange(s.samples_per_second, 0, 1e9) && InRange(s.allreduce_bytes, 0, 1e13) &&
            InRange(s.allreduce_seconds, 0, 86400) && std::isfinite(s.loss) && s.loss <= 1e6;
  return ok ? DropReason::kNone : DropReason::kBadNumber;
}

}  // namespace

const char* DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kNone: return "none";
    case DropReason::kBadId: return "bad_job_id";
    case DropReason::kBadLabel: return "bad_label";
    case DropReason::kBadNumber: return "bad_value";
    case DropReason::kStaleAttempt: return "stale_attempt";
    case DropReason::kTooManyJobs: return "too_many_jobs";
    case DropReason::kTooManyRanks: return "too_many_ranks";
  }
  return "unknown";
}

uint64_t JobMetrics::dropped(DropReason reason) const {
  auto it = dropped_.find(reason);
  return it == dropped_.end() ? 0 : it->second;
}

DropReason JobMetrics::Add(const SampleIn& s, int64_t now_ms) {
  DropReason reason = Check(s);
  auto it = jobs_.find(s.job_id);
  if (reason == DropReason::kNone && it == jobs_.end() && jobs_.size() >= limits_.max_jobs) {
    reason = DropReason::kTooManyJobs;
  }
  if (reason == DropReason::kNone && it != jobs_.end() && s.attempt < it->second.view.attempt) {
    reason = DropReason::kStaleAttempt;
  }
  const bool new_rank = it == jobs_.end() || it->second.ranks.count(s.rank) == 0 ||
                        s.attempt > it->second.view.attempt;
  if (reason == DropReason::kNone && new_rank && rank_count_ >= limits_.max_ranks) {
    reason = DropReason::kTooManyRanks;
  }
  if (reason != DropReason::kNone) {
    ++dropped_[reason];
    return reason;
  }
  if (it == jobs_.end()) it = jobs_.emplace(s.job_id, Job{}).first;
  Job& job = it->second;
  if (job.ranks.empty() || s.attempt > job.view.attempt) {
    // A new attempt starts over: the ranks of the last one are gone.
    rank_count_ -= job.ranks.size();
    job.ranks.clear();
    job.view = JobView{};
    job.view.job_id = s.job_id;
    job.view.attempt = s.attempt;
  }
  JobView& v = job.view;
  if (!s.queue.empty()) v.queue = s.queue;
  if (!s.model.empty()) v.model = s.model;
  if (!s.gpu_type.empty()) v.gpu_type = s.gpu_type;
  v.world_size = s.world_size;
  v.step = std::max(v.step, s.step);
  if (s.rank == 0 && s.loss >= 0) v.loss = s.loss;
  if (s.allreduce_seconds > 0 && s.allreduce_bytes > 0) {
    const double n = s.world_size;
    v.bus_bandwidth = s.allreduce_bytes / s.allreduce_seconds * 2 * (n - 1) / n;
  }
  if (s.step_seconds > 0) {
    for (size_t i = 0; i < kStepBuckets.size(); ++i) {
      if (s.step_seconds <= kStepBuckets[i]) ++v.step_buckets[i];
    }
    ++v.step_count;
    v.step_sum += s.step_seconds;
  }
  auto [rank, added] = job.ranks.try_emplace(s.rank);
  if (added) ++rank_count_;
  rank->second.worker_id = s.worker_id;
  if (s.samples_per_second > 0) rank->second.samples_per_second = s.samples_per_second;
  if (s.step_seconds > 0) rank->second.step_seconds = s.step_seconds;
  if (s.world_size == 1 && s.samples_per_second > 0 && !v.model.empty()) {
    learned_[{v.model, v.gpu_type}] = s.samples_per_second;
  }
  job.last_ms = now_ms;
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
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (now_ms - it->second.last_ms > limits_.ttl_ms) {
      rank_count_ -= it->second.ranks.size();
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<JobView> JobMetrics::Snapshot() const {
  std::vector<JobView> out;
  out.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) {
    JobView v = job.view;
    v.samples_per_second = 0;
    for (const auto& [r, rank] : job.ranks) {
      v.samples_per_second += rank.samples_per_second;
      v.ranks.push_back({r, rank.worker_id, rank.samples_per_second, rank.step_seconds});
    }
    const double base = Baseline(v.model, v.gpu_type);
    if (base > 0 && v.samples_per_second > 0) {
      v.scaling_efficiency = v.samples_per_second / (v.world_size * base);
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace ringmaster::metrics
