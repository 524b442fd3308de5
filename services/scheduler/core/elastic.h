// Elastic jobs: a job whose spec sets min_replicas and max_replicas may run at any size in that
// range. The decisions (start smaller, grow into idle GPUs, shrink instead of preempting whole)
// are made by SchedulePass (core/fair_share.h); this header holds what they are made from: the
// options, the plain data a caller passes in (throughput per size, past resizes, GPUs idle long
// enough), the gain of a rank, and the texts of a resize. Pure: no I/O, no clock of its own.
//
// A resize is a restart: the job's ranks are stopped (SIGTERM, the grace, a checkpoint) and the
// job starts again from its last checkpoint at the new size (PassResult::Resize). It is not a
// failure and counts against nothing but the resize limit.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_ELASTIC_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_ELASTIC_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

// The window of ElasticOptions::max_resizes_per_hour.
inline constexpr int64_t kResizeWindowMs = 3600 * 1000;

struct ElasticOptions {
  // How long GPUs must have stayed idle before a running job grows into them, for the jobs of
  // queues that do not set their own (Queue::elastic_idle_delay_seconds). A resize costs
  // about the grace (30 s) and a restart (about as long again) of the job's time; waiting as
  // long as the switch costs before making it is the ski-rental rule, which never pays more
  // than twice the best choice made knowing how long the GPUs stay idle.
  int64_t idle_delay_ms = 60'000;
  // Resizes of one job within any hour, grows and shrinks together. A job at its limit is
  // neither grown nor shrunk (a reclaim then preempts it whole, as without elastic jobs).
  int32_t max_resizes_per_hour = 2;
  // What a restart costs the job, beyond the work since its last checkpoint: the grace and the
  // start at the new size. A job grows only when the time the growth is expected to save (its
  // runtime limit left, else the time it has run, at the new speed) is at least twice the cost.
  int64_t restart_cost_ms = 60'000;
  // The jobs save a checkpoint when stopped (SIGTERM, the grace): a restart then loses only
  // restart_cost_ms, not also the work since their last checkpoint. The live service's contract
  // (the trainer does; docs/trainer.md asks it of elastic command programs); not the
  // simulator's Philly jobs, which checkpoint only now and then.
  bool saves_on_stop = false;
};

// What a caller knows of elastic jobs beyond their specs. Every field may be empty.
struct ElasticInput {
  // By job id: the job's throughput (samples/s, any unit) at n ranks, at [n]; [0] unused. A job
  // without a curve, or a size past its end, scales linearly from the last known size.
  absl::flat_hash_map<std::string, std::vector<double>> throughput;
  // By job id: when it was resized (Unix ms); entries older than an hour may be left out.
  absl::flat_hash_map<std::string, std::vector<int64_t>> resized_at_ms;
  // By resource: GPUs that have been idle for at least ElasticOptions::idle_delay_ms
  // (IdleTracker::Settled). Its resources are the ones growth is considered on.
  std::map<std::string, int64_t> settled_idle;
  // By resource, then by another delay in ms that a queue sets (IdleDelayMs): GPUs idle for at
  // least that long. A delay missing here counts as none idle.
  std::map<std::string, std::map<int64_t, int64_t>> settled_idle_by_delay;
};

// Both min_replicas and max_replicas set (validation makes them both or neither).
inline bool IsElastic(const JobSpec& spec) {
  return spec.min_replicas > 0 && spec.max_replicas > 0;
}
// The ranks a job runs with now: its placement's for an elastic job that holds one, else its
// spec's replicas (so a job that is not elastic is counted exactly as before).
int32_t RunningReplicas(const Job& job);

// The sizes an elastic job may run at: from min_replicas to max_replicas, and with sizes_divide
// set only those that divide it (replicas and min_replicas always do). Every size the policy
// picks (start, grow, shrink) is one of these.
bool IsElasticSize(const JobSpec& spec, int32_t n);
// The largest size a pending elastic job is tried at: its replicas, or where larger, the size
// it last ran at (Job::last_replicas, a restart nobody asked for), at most max_replicas and
// lowered to one it may run at. A job that is not elastic: its replicas.
int32_t StartSize(const Job& job);
// The smallest such size above n and at most `cap`; 0 when there is none.
int32_t NextElasticSize(const JobSpec& spec, int32_t n, int32_t cap);
// The largest such size below n and at least `floor`; 0 when there is none.
int32_t PreviousElasticSize(const JobSpec& spec, int32_t n, int32_t floor);

// A curve for ElasticInput::throughput from what was measured (throughput by size; sizes
// above 0, throughputs above 0): below the smallest size measured, linear from it; between two
// sizes measured, on the straight line between them; the curve ends at the largest size
// measured (Throughput goes on linearly from there). Empty when nothing was measured.
std::vector<double> ThroughputCurve(const std::map<int32_t, double>& measured);

// Throughput at n ranks on `curve` (null or empty: n).
double Throughput(const std::vector<double>* curve, int32_t n);
// What rank n + 1 adds to a job of n ranks, per GPU, as a share of what a GPU gives the job
// at one rank: (T(n + 1) - T(n)) / T(1). 1 is linear scaling; jobs of different models and
// rank sizes compare on it (their throughputs are in units of their own).
double RankGain(const std::vector<double>* curve, int32_t n);
// The same per rank over a step from `from` to `to` ranks (to > from): the mean gain of its
// ranks, RankGain(curve, from) for a step of one. A job with sizes_divide moves in such steps.
double StepGain(const std::vector<double>* curve, int32_t from, int32_t to);
// How long GPUs stay idle before the elastic jobs of `queue` (null: unknown) grow into them: its
// elastic_idle_delay_seconds, else options.idle_delay_ms.
int64_t IdleDelayMs(const Queue* queue, const ElasticOptions& options);
// GPUs of `resource` idle for at least delay_ms, from `input` (default_delay_ms: the delay of
// ElasticInput::settled_idle).
int64_t SettledIdle(const ElasticInput& input, const std::string& resource, int64_t delay_ms,
                    int64_t default_delay_ms);
// Whether the job may be resized now: fewer than `limit` resizes in the hour before now_ms.
bool MayResize(const ElasticInput* input, const std::string& job_id, int64_t now_ms, int32_t limit);

// The texts of a job's events: "grown from 2 to 4 replicas: 8 x t4 idle in cohort c for 60 s",
// "shrunk from 4 to 2: queue b reclaims its nominal quota".
std::string GrowReason(int32_t from, int32_t to, int64_t idle, const std::string& resource,
                       const std::string& cohort, int64_t idle_delay_ms);
std::string ShrinkReason(int32_t from, int32_t to, const std::string& why);
// Whether an event's reason is one of those: the event of a resize.
bool IsResizeReason(const std::string& reason);
// The times of the resizes among a job's stored events that fall within the resize window
// before now_ms, oldest first: ElasticInput::resized_at_ms of a job after a scheduler restart,
// so that the limit on resizes per hour holds across it.
std::vector<int64_t> RecentResizeTimes(const std::vector<JobEvent>& events, int64_t now_ms);

// How long GPUs have stayed idle: the caller reports each resource's idle count whenever it may
// have changed (after each pass, after each job's end), and asks how many have been idle
// throughout the last `delay_ms` (or a longer delay of a queue's, up to the window it keeps).
// Not thread-safe.
class IdleTracker {
 public:
  explicit IdleTracker(int64_t delay_ms) : delay_ms_(delay_ms), window_ms_(delay_ms) {}
  // Keeps the history of the last window_ms (at least delay_ms), for Settled of longer delays.
  // A longer window than before knows only what was kept: until it has observed that long,
  // Settled of the longer delays says 0.
  void KeepWindow(int64_t window_ms) { window_ms_ = std::max(delay_ms_, window_ms); }
  void Observe(const std::string& resource, int64_t now_ms, int64_t idle);
  // The fewest idle over [now_ms - delay_ms, now_ms]; 0 when not observed that long.
  int64_t Settled(const std::string& resource, int64_t now_ms) const {
    return Settled(resource, now_ms, delay_ms_);
  }
  // The same over another delay, at most the window kept.
  int64_t Settled(const std::string& resource, int64_t now_ms, int64_t delay_ms) const;
  // When Settled may next rise without a new observation (a lower count leaving the window);
  // INT64_MAX when it cannot.
  int64_t NextRise(const std::string& resource, int64_t now_ms) const;

 private:
  int64_t delay_ms_;
  int64_t window_ms_;
  // Per resource: (time, idle) from the one in effect at now - window on, oldest first.
  std::map<std::string, std::deque<std::pair<int64_t, int64_t>>> samples_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_ELASTIC_H_
