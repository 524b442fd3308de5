#include "scheduler/sim/baselines.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>

#include "scheduler/core/placement.h"

namespace ringmaster::scheduler::sim {
namespace {

enum class Status { kWaiting, kPending, kRunning, kStopping, kDone };

struct SimJob {
  const TraceJob* trace = nullptr;
  int pool = 0;
  int32_t gpus = 0;
  GangRequest request;
  Status status = Status::kWaiting;
  int64_t remaining_s = 0;    // work left, as of the start of the current run
  double attained_gpu_s = 0;  // as of the start of the current run
  int64_t pending_since_s = 0;
  int64_t queued_s = 0;
  int64_t run_started_s = 0;
  int32_t generation = 0;
  std::vector<RankPlacement> ranks;
};

struct Pool {
  ClusterState cluster;
  int64_t gpus = 0;
  std::vector<size_t> active;  // pending and running jobs (not stopping)
  int64_t stopping_gpus = 0;
  bool dirty = false;
};

class BaselineReplay {
 public:
  BaselineReplay(const std::vector<TraceJob>& trace, const std::map<std::string, int32_t>& vcs,
                 const BaselineOptions& options)
      : options_(options) {
    std::map<std::string, int> pool_of;
    int node = 0;
    for (const auto& [vc, nodes] : vcs) {
      if (!options.pooled || pools_.empty()) pools_.emplace_back();
      pool_of[vc] = static_cast<int>(pools_.size()) - 1;
      Pool& pool = pools_.back();
      report_.queues[vc].nominal_gpus = nodes * options.gpus_per_node;
      for (int i = 0; i < nodes; ++i, ++node) {
        pool.cluster.UpsertWorker(SimNode(node, options.gpus_per_node));
      }
      pool.gpus += int64_t{nodes} * options.gpus_per_node;
      report_.total_gpus += int64_t{nodes} * options.gpus_per_node;
    }
    for (const TraceJob& t : trace) {
      auto it = pool_of.find(t.vc);
      if (it == pool_of.end()) continue;
      SimJob job;
      job.trace = &t;
      job.pool = it->second;
      job.gpus = t.gpus;
      GangShape(t.gpus, options.gpus_per_node, &job.request.replicas,
                &job.request.gpus_per_replica);
      job.request.gpu_type = "gpu";
      job.remaining_s = t.duration_s;
      jobs_.push_back(std::move(job));
    }
  }

  SimReport Run() {
    if (jobs_.empty()) return report_;
    const int64_t first_submit = jobs_.front().trace->submit_s;
    last_end_ = first_submit;
    size_t next = 0;
    while (next < jobs_.size() || !events_.empty()) {
      int64_t now = next < jobs_.size() ? jobs_[next].trace->submit_s : INT64_MAX;
      if (!events_.empty()) now = std::min(now, std::get<0>(events_.top()));
      for (; next < jobs_.size() && jobs_[next].trace->submit_s == now; ++next) Arrive(next, now);
      while (!events_.empty() && std::get<0>(events_.top()) == now) {
        auto [t, kind, i, generation] = events_.top();
        events_.pop();
        if (generation != jobs_[i].generation) continue;
        if (kind == kEnd) {
          EndRun(i, now, /*completed=*/true);
        } else if (kind == kStopped) {
          EndRun(i, now, /*completed=*/false);
        } else {
          pools_[jobs_[i].pool].dirty = true;  // crossed a LAS threshold: its queue changed
          PushThreshold(i, now);
        }
      }
      for (size_t p = 0; p < pools_.size(); ++p) {
        if (!pools_[p].dirty) continue;
        pools_[p].dirty = false;
        Schedule(p, now);
        ++report_.passes;
      }
    }
    Summarize(jct_, queued_, &report_);
    report_.longest_wait_32plus_s = longest_32_;
    const double span = static_cast<double>(std::max<int64_t>(1, last_end_ - first_submit));
    report_.utilisation = used_gpu_seconds_ / (report_.total_gpus * span);
    return report_;
  }

 private:
  static constexpr int kEnd = 0, kStopped = 1, kThreshold = 2;
  using Event = std::tuple<int64_t, int, size_t, int32_t>;

  void Arrive(size_t i, int64_t now) {
    SimJob& job = jobs_[i];
    job.status = Status::kPending;
    job.pending_since_s = now;
    Pool& pool = pools_[job.pool];
    pool.active.push_back(i);
    pool.dirty = true;
    QueueOutcome& q = report_.queues[job.trace->vc];
    ++q.jobs;
    q.demand_gpu_seconds += static_cast<double>(job.trace->duration_s) * job.gpus;
  }

  void EndRun(size_t i, int64_t now, bool completed) {
    SimJob& job = jobs_[i];
    Pool& pool = pools_[job.pool];
    const int64_t ran = now - job.run_started_s;
    const double gpu_s = static_cast<double>(ran) * job.gpus;
    used_gpu_seconds_ += gpu_s;
    report_.queues[job.trace->vc].gpu_seconds += gpu_s;
    job.attained_gpu_s += gpu_s;
    pool.cluster.Release(job.ranks);
    job.ranks.clear();
    ++job.generation;
    pool.dirty = true;
    if (job.status == Status::kStopping) pool.stopping_gpus -= job.gpus;
    if (completed) {
      if (job.status == Status::kRunning) Remove(pool, i);
      job.status = Status::kDone;
      jct_.push_back(static_cast<double>(now - job.trace->submit_s));
      queued_.push_back(static_cast<double>(job.queued_s));
      if (job.gpus >= 32) longest_32_ = std::max(longest_32_, job.queued_s);
      last_end_ = std::max(last_end_, now);
      return;
    }
    const int64_t kept = WorkKept(ran, options_.checkpoint_interval_s);
    job.remaining_s -= std::min(kept, job.remaining_s - 1);
    report_.lost_gpu_seconds += static_cast<double>(ran - kept) * job.gpus;
    job.status = Status::kPending;
    job.pending_since_s = now;
    pool.active.push_back(i);
  }

  static void Remove(Pool& pool, size_t i) {
    auto it = std::find(pool.active.begin(), pool.active.end(), i);
    if (it != pool.active.end()) {
      *it = pool.active.back();
      pool.active.pop_back();
    }
  }

  // The job's queue (LAS) or remaining seconds (SRTF) now: smaller runs first.
  int64_t Priority(const SimJob& job, int64_t now) const {
    const int64_t ran = job.status == Status::kRunning ? now - job.run_started_s : 0;
    if (options_.policy == Baseline::kSrtf) return job.remaining_s - ran;
    const double attained = job.attained_gpu_s + static_cast<double>(ran) * job.gpus;
    const auto& t = options_.las_thresholds_gpu_s;
    return std::upper_bound(t.begin(), t.end(), static_cast<int64_t>(attained)) - t.begin();
  }

  void Schedule(size_t p, int64_t now) {
    Pool& pool = pools_[p];
    bool any_pending = false;
    for (size_t i : pool.active) any_pending |= jobs_[i].status == Status::kPending;
    if (!any_pending) return;
    // (priority, submit order): LAS is FIFO within a queue, SRTF breaks ties by submit order.
    std::vector<std::pair<int64_t, size_t>> order;
    order.reserve(pool.active.size());
    for (size_t i : pool.active) order.push_back({Priority(jobs_[i], now), i});
    std::sort(order.begin(), order.end());
    int64_t budget = pool.gpus - pool.stopping_gpus;
    std::vector<size_t> preempt, start;
    for (const auto& [priority, i] : order) {
      const SimJob& job = jobs_[i];
      const bool run = job.gpus <= budget;
      if (run) budget -= job.gpus;
      if (job.status == Status::kRunning && !run) preempt.push_back(i);
      if (job.status == Status::kPending && run) start.push_back(i);
    }
    for (size_t i : preempt) {
      SimJob& job = jobs_[i];
      job.status = Status::kStopping;
      pool.stopping_gpus += job.gpus;
      Remove(pool, i);
      ++report_.preemptions;
      ++report_.queues[job.trace->vc].preempted;
      // Stops after the grace period, unless it ends first (its end event comes sooner).
      if (job.run_started_s + job.remaining_s > now + options_.grace_s) {
        events_.push({now + options_.grace_s, kStopped, i, job.generation});
      }
    }
    for (size_t i : start) {
      SimJob& job = jobs_[i];
      if (!pool.cluster.Fits(job.request)) continue;  // waits for the GPUs of those stopping
      PlacementDecision d = pool.cluster.Place(job.request);
      if (d.kind != PlacementDecision::Kind::kPlaced || !pool.cluster.Allocate(d.ranks).ok()) {
        ++report_.over_allocations;
        continue;
      }
      job.ranks = std::move(d.ranks);
      job.status = Status::kRunning;
      job.queued_s += now - job.pending_since_s;
      job.run_started_s = now;
      events_.push({now + job.remaining_s, kEnd, i, job.generation});
      PushThreshold(i, now);
    }
  }

  // LAS: when the running job's attained service next crosses a threshold, if before it ends.
  void PushThreshold(size_t i, int64_t now) {
    if (options_.policy != Baseline::kLas) return;
    const SimJob& job = jobs_[i];
    const double attained =
        job.attained_gpu_s + static_cast<double>(now - job.run_started_s) * job.gpus;
    for (int64_t t : options_.las_thresholds_gpu_s) {
      if (t <= attained) continue;
      const int64_t at = now + static_cast<int64_t>(std::ceil((t - attained) / job.gpus));
      if (at < job.run_started_s + job.remaining_s) {
        events_.push({at, kThreshold, i, job.generation});
      }
      return;
    }
  }

  const BaselineOptions& options_;
  std::vector<SimJob> jobs_;
  std::vector<Pool> pools_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  SimReport report_;
  std::vector<double> jct_, queued_;
  int64_t longest_32_ = 0;
  int64_t last_end_ = 0;
  double used_gpu_seconds_ = 0;
};

}  // namespace

SimReport ReplayBaseline(const std::vector<TraceJob>& jobs,
                         const std::map<std::string, int32_t>& vcs,
                         const BaselineOptions& options) {
  BaselineReplay replay(jobs, vcs, options);
  return replay.Run();
}

}  // namespace ringmaster::scheduler::sim
