#include "scheduler/core/elastic.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {

int32_t RunningReplicas(const Job& job) {
  if (!IsElastic(job.spec) || job.placement.empty()) return job.spec.replicas;
  return static_cast<int32_t>(job.placement.size());
}

bool IsElasticSize(const JobSpec& spec, int32_t n) {
  return n >= spec.min_replicas && n <= spec.max_replicas && n > 0 &&
         (spec.sizes_divide <= 0 || spec.sizes_divide % n == 0);
}

int32_t NextElasticSize(const JobSpec& spec, int32_t n, int32_t cap) {
  for (int32_t m = n + 1; m <= cap; ++m) {
    if (IsElasticSize(spec, m)) return m;
  }
  return 0;
}

int32_t PreviousElasticSize(const JobSpec& spec, int32_t n, int32_t floor) {
  for (int32_t m = n - 1; m >= floor && m > 0; --m) {
    if (IsElasticSize(spec, m)) return m;
  }
  return 0;
}

int32_t StartSize(const Job& job) {
  const JobSpec& spec = job.spec;
  if (!IsElastic(spec)) return spec.replicas;
  int32_t top = std::max(spec.replicas, std::min(job.last_replicas, spec.max_replicas));
  while (top > spec.replicas && !IsElasticSize(spec, top)) --top;
  return top;
}

std::vector<double> ThroughputCurve(const std::map<int32_t, double>& measured) {
  std::vector<double> curve;
  if (measured.empty()) return curve;
  const int32_t last = measured.rbegin()->first;
  curve.assign(static_cast<size_t>(last) + 1, 0);
  auto next = measured.begin();
  int32_t prev_n = 0;
  double prev_t = 0;  // (0, 0): below the smallest size, linear from it
  for (int32_t n = 1; n <= last; ++n) {
    if (n == next->first) {
      curve[n] = next->second;
      prev_n = n;
      prev_t = next->second;
      ++next;
      continue;
    }
    curve[n] = prev_t + (next->second - prev_t) * (n - prev_n) / (next->first - prev_n);
  }
  return curve;
}

double Throughput(const std::vector<double>* curve, int32_t n) {
  if (curve == nullptr || curve->size() < 2 || n <= 0) return std::max(n, 0);
  const int32_t last = static_cast<int32_t>(curve->size()) - 1;
  if (n <= last) return (*curve)[n];
  return (*curve)[last] * n / last;
}

double RankGain(const std::vector<double>* curve, int32_t n) {
  const double one = Throughput(curve, 1);
  return one > 0 ? (Throughput(curve, n + 1) - Throughput(curve, n)) / one : 0;
}

double StepGain(const std::vector<double>* curve, int32_t from, int32_t to) {
  if (to == from + 1) return RankGain(curve, from);
  const double one = Throughput(curve, 1);
  return one > 0 && to > from
             ? (Throughput(curve, to) - Throughput(curve, from)) / one / (to - from)
             : 0;
}

int64_t IdleDelayMs(const Queue* queue, const ElasticOptions& options) {
  if (queue != nullptr && queue->elastic_idle_delay_seconds) {
    return *queue->elastic_idle_delay_seconds * 1000;
  }
  return options.idle_delay_ms;
}

int64_t SettledIdle(const ElasticInput& input, const std::string& resource, int64_t delay_ms,
                    int64_t default_delay_ms) {
  if (delay_ms == default_delay_ms) {
    auto it = input.settled_idle.find(resource);
    return it == input.settled_idle.end() ? 0 : it->second;
  }
  auto by_resource = input.settled_idle_by_delay.find(resource);
  if (by_resource == input.settled_idle_by_delay.end()) return 0;
  auto it = by_resource->second.find(delay_ms);
  return it == by_resource->second.end() ? 0 : it->second;
}

bool MayResize(const ElasticInput* input, const std::string& job_id, int64_t now_ms,
               int32_t limit) {
  if (input == nullptr) return limit > 0;
  auto it = input->resized_at_ms.find(job_id);
  if (it == input->resized_at_ms.end()) return limit > 0;
  const int64_t recent = std::count_if(it->second.begin(), it->second.end(),
                                       [&](int64_t t) { return t > now_ms - kResizeWindowMs; });
  return recent < limit;
}

std::string GrowReason(int32_t from, int32_t to, int64_t idle, const std::string& resource,
                       const std::string& cohort, int64_t idle_delay_ms) {
  return absl::StrCat("grown from ", from, " to ", to, " replicas: ", idle, " x ", resource,
                      " idle", cohort.empty() ? "" : absl::StrCat(" in cohort ", cohort), " for ",
                      idle_delay_ms / 1000, " s");
}

std::string ShrinkReason(int32_t from, int32_t to, const std::string& why) {
  return absl::StrCat("shrunk from ", from, " to ", to, ": ", why);
}

bool IsResizeReason(const std::string& reason) {
  return absl::StartsWith(reason, "grown from ") || absl::StartsWith(reason, "shrunk from ");
}

std::vector<int64_t> RecentResizeTimes(const std::vector<JobEvent>& events, int64_t now_ms) {
  std::vector<int64_t> times;
  for (const JobEvent& e : events) {
    if (IsResizeReason(e.reason) && e.time_ms > now_ms - kResizeWindowMs) {
      times.push_back(e.time_ms);
    }
  }
  std::sort(times.begin(), times.end());
  return times;
}

void IdleTracker::Observe(const std::string& resource, int64_t now_ms, int64_t idle) {
  auto& s = samples_[resource];
  if (!s.empty() && s.back().first == now_ms) {
    s.back().second = idle;
  } else if (s.empty() || s.back().second != idle) {
    s.emplace_back(now_ms, idle);
  }
  // Keep the sample in effect at now - window and those after it.
  while (s.size() >= 2 && s[1].first <= now_ms - window_ms_) s.pop_front();
}

int64_t IdleTracker::Settled(const std::string& resource, int64_t now_ms, int64_t delay_ms) const {
  auto it = samples_.find(resource);
  if (it == samples_.end() || it->second.empty() || delay_ms > window_ms_) return 0;
  const auto& s = it->second;
  const int64_t from = now_ms - delay_ms;
  if (s.front().first > from) return 0;
  int64_t fewest = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < s.size(); ++i) {
    // Samples before the one in effect at `from` are gone from the window.
    if (i + 1 < s.size() && s[i + 1].first <= from) continue;
    fewest = std::min(fewest, s[i].second);
  }
  return fewest;
}

int64_t IdleTracker::NextRise(const std::string& resource, int64_t now_ms) const {
  auto it = samples_.find(resource);
  int64_t next = std::numeric_limits<int64_t>::max();
  if (it == samples_.end() || it->second.empty()) return next;
  const auto& s = it->second;
  // The window's contents change when a sample's successor becomes the one in effect at its
  // start (t + delay), or when the first sample has been observed for the whole delay.
  for (size_t i = 0; i < s.size(); ++i) {
    const int64_t t = s[i].first + delay_ms_;
    if (t > now_ms) next = std::min(next, t);
  }
  return next;
}

}  // namespace ringmaster::scheduler
