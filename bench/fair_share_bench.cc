// Scheduling decisions per second of one full pass, fair share against the policy before it
// (priority then submit order, greedy placement), on the same snapshot: 1,000 workers x 8 GPUs,
// 100 queues in 10 cohorts, 50,000 pending jobs, the cluster 90% busy with jobs of every queue
// (some borrowing, so reclaims happen). Preemption and backfill on. Prints its figures; not a
// test. A decision: a pending job started, preempted for, reserved for, or told why it waits.
// Then the pass that bench/placement_e2e_bench.sh makes the scheduler run fifty times a second: a
// full cluster, one queue without quotas, a backlog of 8,000 gangs of 1 to 64 GPUs, none of which
// fits. Its time per pending job is what a deep backlog costs every pass. Each pass also prints
// a digest of all its decisions (starts with their GPUs, preemptions, reservations, every
// reason): a speed-up of the pass must leave both digests as they were.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "scheduler/core/fair_share.h"
#include "scheduler/core/queue_order.h"

using namespace ringmaster::scheduler;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kWorkers = 1000;
constexpr int kGpusPerWorker = 8;
constexpr int kQueues = 100;
constexpr int kCohorts = 10;
constexpr int kPending = 50000;
constexpr int kRounds = 5;

struct World {
  ClusterState cluster;
  std::map<std::string, Queue> queues;
  std::vector<Job> placed;
  std::vector<Job> pending;
};

World Make(uint64_t seed) {
  World w;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < kWorkers; ++i) {
    Worker worker;
    worker.id = "w" + std::to_string(i);
    worker.address = "10.0.0.1";
    for (int g = 0; g < kGpusPerWorker; ++g) worker.gpus.push_back(Gpu{g, "a100", 0, false});
    w.cluster.UpsertWorker(worker);
  }
  for (int q = 0; q < kQueues; ++q) {
    Queue queue;
    queue.name = "q" + std::to_string(q);
    queue.cohort = "c" + std::to_string(q % kCohorts);
    queue.weight = 1 + q % 3;
    queue.quotas["a100"] =
        ResourceQuota{kWorkers * kGpusPerWorker / kQueues, std::nullopt, std::nullopt};
    queue.reclaim_within_cohort = q % 2 ? ReclaimWithinCohort::kAny : ReclaimWithinCohort::kNever;
    queue.within_queue = q % 3 ? PreemptWithinQueue::kLowerPriority : PreemptWithinQueue::kNever;
    w.queues[queue.name] = queue;
  }
  std::uniform_int_distribution<int> size(0, 4), queue(0, kQueues - 1), prio(0, 3), hours(1, 24);
  // Busy queues q0..q49 (five in each cohort: a queue's cohort is its number mod 10) borrow
  // what q50..q99 leave idle.
  std::uniform_int_distribution<int> busy(0, kQueues / 2 - 1);
  auto make = [&](int64_t seq, int q) {
    Job job;
    job.id = "j" + std::to_string(seq);
    job.seq = seq;
    const int gpus = 1 << size(rng);
    job.spec.queue = "q" + std::to_string(q);
    job.spec.replicas = gpus > 8 ? gpus / 8 : 1;
    job.spec.gpus_per_replica = gpus > 8 ? 8 : gpus;
    job.spec.gpu_type = "a100";
    job.spec.priority = prio(rng);
    job.spec.max_runtime_seconds = hours(rng) * 3600;
    return job;
  };
  int64_t seq = 0;
  const int64_t target = kWorkers * kGpusPerWorker * 9 / 10;
  int64_t used = 0;
  while (used < target) {
    Job job = make(++seq, busy(rng));
    PlacementDecision d = w.cluster.Place(RequestOf(job.spec));
    if (d.kind != PlacementDecision::Kind::kPlaced) break;
    (void)w.cluster.Allocate(d.ranks);
    job.placement = d.ranks;
    job.state = JobState::kRunning;
    job.started_at_ms = 1'700'000'000'000 - hours(rng) * 600'000;
    used += job.spec.replicas * job.spec.gpus_per_replica;
    w.placed.push_back(std::move(job));
  }
  for (int i = 0; i < kPending; ++i) w.pending.push_back(make(++seq, queue(rng)));
  return w;
}

// The policy before fair share: priority then submit order, each job placed if it fits.
int64_t BaselinePass(const World& w) {
  ClusterState cluster = w.cluster;
  std::vector<const Job*> jobs;
  for (const Job& j : w.pending) jobs.push_back(&j);
  std::map<std::string, const Job*> by_id;
  for (const Job* j : jobs) by_id[j->id] = j;
  int64_t started = 0;
  for (const std::string& id : QueueOrder(jobs)) {
    PlacementDecision d = cluster.Place(RequestOf(by_id[id]->spec));
    if (d.kind == PlacementDecision::Kind::kPlaced) {
      (void)cluster.Allocate(d.ranks);
      ++started;
    }
  }
  return started;
}

// Every decision of a pass folded into one number: two builds that decide alike print the same.
uint64_t Digest(const PassResult& r) {
  std::vector<std::string> lines;
  for (const auto& s : r.starts) {
    std::string l = "start " + s.job_id;
    for (const auto& k : s.ranks) {
      l += " " + k.worker_id + ":";
      for (int g : k.gpu_indices) l += std::to_string(g) + ",";
    }
    lines.push_back(l + (s.borrowing ? " b" : "") + (s.backfilled ? " f" : ""));
  }
  for (const auto& p : r.preemptions) lines.push_back("preempt " + p.job_id + " " + p.by_job_id);
  for (const auto& v : r.reservations) lines.push_back("reserve " + v.job_id);
  for (const auto& [job, why] : r.waiting) lines.push_back("wait " + job->id + " " + why);
  std::sort(lines.begin(), lines.end());
  uint64_t h = 1469598103934665603ull;
  for (const std::string& l : lines) {
    for (unsigned char c : l) h = (h ^ c) * 1099511628211ull;
    h = (h ^ '\n') * 1099511628211ull;
  }
  return h;
}

// The backlog pass: the cluster full (so nothing starts and every job is told why it waits).
void BacklogPass() {
  constexpr int kBacklog = 8000;
  std::mt19937_64 rng(42);
  ClusterState cluster;
  for (int i = 0; i < kWorkers; ++i) {
    Worker worker;
    worker.id = "w" + std::to_string(i);
    worker.address = "10.0.0.1";
    for (int g = 0; g < kGpusPerWorker; ++g) worker.gpus.push_back(Gpu{g, "t4", 0, false});
    cluster.UpsertWorker(worker);
  }
  std::map<std::string, Queue> queues;
  queues["default"].name = "default";
  // The e2e benchmark's mix: 1 to 64 GPUs in ranks of 1, 2, 4 or 8.
  std::uniform_int_distribution<int> total(1, 64);
  auto make = [&](int64_t seq) {
    Job job;
    job.id = "j" + std::to_string(seq);
    job.seq = seq;
    const int gpus = total(rng);
    const int per_rank = gpus % 8 == 0 ? 8 : gpus % 4 == 0 ? 4 : gpus % 2 == 0 ? 2 : 1;
    job.spec.queue = "default";
    job.spec.replicas = gpus / per_rank;
    job.spec.gpus_per_replica = per_rank;
    job.spec.gpu_type = "t4";
    return job;
  };
  std::vector<Job> placed, pending;
  int64_t seq = 0;
  for (int i = 0; i < kWorkers; ++i) {  // one 8-GPU job per worker: every GPU busy
    Job job = make(++seq);
    job.spec.replicas = 1;
    job.spec.gpus_per_replica = kGpusPerWorker;
    PlacementDecision d = cluster.Place(RequestOf(job.spec));
    (void)cluster.Allocate(d.ranks);
    job.placement = d.ranks;
    job.state = JobState::kRunning;
    placed.push_back(std::move(job));
  }
  for (int i = 0; i < kBacklog; ++i) pending.push_back(make(++seq));
  PassInput in;
  in.queues = &queues;
  in.now_ms = 1'700'000'000'000;
  for (const Job& j : placed) in.placed.push_back(&j);
  for (const Job& j : pending) in.pending.push_back(&j);
  PolicyOptions options;
  constexpr int kPasses = 20;
  PassResult last;
  auto t0 = Clock::now();
  for (int i = 0; i < kPasses; ++i) last = SchedulePass(in, cluster, options);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count() / kPasses;
  std::printf("backlog pass (full cluster, 1 queue, %d pending): %.2f ms, %.2f us per pending "
              "job, %zu started, %zu waiting with a reason\n",
              kBacklog, 1000 * s, 1e6 * s / kBacklog, last.starts.size(), last.waiting.size());
  std::printf("backlog pass decisions digest: %016llx\n",
              static_cast<unsigned long long>(Digest(last)));
}

}  // namespace

int main() {
  World w = Make(7);
  std::printf("snapshot: %d workers x %d GPUs, %d queues in %d cohorts, %zu running, %zu pending\n",
              kWorkers, kGpusPerWorker, kQueues, kCohorts, w.placed.size(), w.pending.size());
  PassInput in;
  in.queues = &w.queues;
  in.now_ms = 1'700'000'000'000;
  for (const Job& j : w.placed) in.placed.push_back(&j);
  for (const Job& j : w.pending) in.pending.push_back(&j);
  PolicyOptions options;  // preemption and backfill on, 4 reservations

  double fair_s = 0, base_s = 0;
  PassResult last;
  int64_t base_started = 0;
  for (int round = 0; round < kRounds; ++round) {
    auto t0 = Clock::now();
    last = SchedulePass(in, w.cluster, options);
    auto t1 = Clock::now();
    base_started = BaselinePass(w);
    auto t2 = Clock::now();
    fair_s += std::chrono::duration<double>(t1 - t0).count();
    base_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double fair_rate = kRounds * static_cast<double>(kPending) / fair_s;
  const double base_rate = kRounds * static_cast<double>(kPending) / base_s;
  std::printf(
      "fair share pass: %.1f ms, %zu started, %zu preempted, %zu reservations, %zu "
      "waiting with a reason\n",
      1000 * fair_s / kRounds, last.starts.size(), last.preemptions.size(),
      last.reservations.size(), last.waiting.size());
  std::printf("fair share pass decisions digest: %016llx\n",
              static_cast<unsigned long long>(Digest(last)));
  std::printf("baseline pass:   %.1f ms, %lld started\n", 1000 * base_s / kRounds,
              static_cast<long long>(base_started));
  std::printf("decisions/s: fair share %.0f, baseline %.0f, ratio %.2f\n", fair_rate, base_rate,
              fair_rate / base_rate);
  BacklogPass();
  return 0;
}
