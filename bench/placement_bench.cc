// Core placement throughput on a simulated cluster: 1,000 workers x 8 GPUs of mixed types and
// 10,000 gang jobs of 1 to 64 GPUs. Prints its figures; not a test.
//
// Jobs arrive in order. A job that does not fit waits while the oldest running jobs finish
// (their GPUs are released), then is placed: every Place() call, failed or not, is timed.
#include <chrono>
#include <cstdio>
#include <deque>
#include <random>
#include <vector>

#include "scheduler/core/placement.h"

using namespace ringmaster::scheduler;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kWorkers = 1000;
constexpr int kGpusPerWorker = 8;
constexpr int kJobs = 10000;
const char* const kTypes[] = {"t4", "v100", "a100", "h100"};

ClusterState MakeCluster() {
  ClusterState cluster;
  for (int w = 0; w < kWorkers; ++w) {
    Worker worker;
    worker.id = "w" + std::to_string(w);
    worker.address = "10.0." + std::to_string(w / 256) + "." + std::to_string(w % 256);
    worker.port = 7071;
    for (int g = 0; g < kGpusPerWorker; ++g) {
      worker.gpus.push_back(Gpu{g, kTypes[w % 4], 16LL << 30, false});
    }
    cluster.UpsertWorker(worker);
  }
  return cluster;
}

std::vector<GangRequest> MakeJobs(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> total(1, 64);
  std::uniform_int_distribution<int> type(0, 4);  // 4: any type
  std::vector<GangRequest> jobs;
  for (int i = 0; i < kJobs; ++i) {
    int gpus = total(rng);
    int per_rank = gpus % 8 == 0 ? 8 : gpus % 4 == 0 ? 4 : gpus % 2 == 0 ? 2 : 1;
    int t = type(rng);
    jobs.push_back({gpus / per_rank, per_rank, t == 4 ? "" : kTypes[t]});
  }
  return jobs;
}

}  // namespace

int main() {
  ClusterState cluster = MakeCluster();
  std::vector<GangRequest> jobs = MakeJobs(42);
  std::deque<std::vector<RankPlacement>> running;
  int64_t place_calls = 0, failed_calls = 0, workers_used = 0, gpus_placed = 0;
  double place_seconds = 0;

  auto wall_start = Clock::now();
  for (const GangRequest& job : jobs) {
    while (true) {
      auto t0 = Clock::now();
      PlacementDecision d = cluster.Place(job);
      place_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      ++place_calls;
      if (d.kind == PlacementDecision::Kind::kPlaced) {
        if (!cluster.Allocate(d.ranks).ok()) {
          std::fprintf(stderr, "allocation conflict: placement is wrong\n");
          return 1;
        }
        std::vector<std::string> seen;
        for (const auto& r : d.ranks) {
          gpus_placed += static_cast<int64_t>(r.gpu_indices.size());
          if (seen.empty() || seen.back() != r.worker_id) seen.push_back(r.worker_id);
        }
        workers_used += static_cast<int64_t>(seen.size());
        running.push_back(std::move(d.ranks));
        break;
      }
      ++failed_calls;
      if (running.empty()) {
        std::fprintf(stderr, "job can never fit: %s\n", d.reason.c_str());
        return 1;
      }
      cluster.Release(running.front());  // the oldest job finishes
      running.pop_front();
    }
  }
  double wall = std::chrono::duration<double>(Clock::now() - wall_start).count();

  // One Place() for every job of the queue against the final cluster, allocating nothing: the
  // cost of a placement pass over a long queue.
  int64_t waiting_calls = 0;
  auto t0 = Clock::now();
  for (const GangRequest& job : jobs) {
    waiting_calls += cluster.Place(job).kind != PlacementDecision::Kind::kPlaced;
  }
  double pass = std::chrono::duration<double>(Clock::now() - t0).count();

  const double rate = kJobs / place_seconds;
  std::printf("placement benchmark: %d workers x %d GPUs (t4, v100, a100, h100), %d gang jobs of "
              "1-64 GPUs\n", kWorkers, kGpusPerWorker, kJobs);
  std::printf("  jobs placed:               %d (%lld GPUs, %.2f workers per job on average)\n",
              kJobs, static_cast<long long>(gpus_placed),
              static_cast<double>(workers_used) / kJobs);
  std::printf("  Place() calls:             %lld (%lld found no room and waited for a release)\n",
              static_cast<long long>(place_calls), static_cast<long long>(failed_calls));
  std::printf("  time in Place():           %.3f s (wall with releases %.3f s)\n", place_seconds,
              wall);
  std::printf("  jobs placed per second:    %.0f\n", rate);
  std::printf("  mean Place() call:         %.1f us\n", 1e6 * place_seconds / place_calls);
  std::printf("  Place() over the queue:    %.1f ms for %d jobs on the final cluster (%lld would wait)\n",
              1e3 * pass, kJobs, static_cast<long long>(waiting_calls));
  std::printf("  vs published figures (not measured here): %.0fx Kubernetes' scheduler CI "
              "threshold of 680 pods/s, %.0fx Slurm's 500 jobs/s\n", rate / 680, rate / 500);
  return 0;
}
