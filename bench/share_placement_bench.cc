// The live scheduler's placement of GPU shares under each --share-placement policy, on one
// simulated cluster: 1,000 workers x 8 t4 and jobs drawn from a mix like Alibaba openb's (45%
// a fraction of one GPU, 40% one whole GPU, 15% 2 to 8 whole GPUs). Jobs arrive until their
// GPU demand is 100% of the cluster's; none ends. The mix the policies expect is learned from
// the jobs as they arrive (RecentDemand), rebuilt every 100 jobs, as the scheduler rebuilds it
// for a pass. Prints, per policy: the GPUs left unallocated when the arrived demand reaches
// 90% and 100%, the jobs that did not fit, and the time of a Place() call of a share job
// (mean, and its ratio to GPU packing's in the same run). Prints its figures; not a test.
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "scheduler/core/placement.h"

using namespace ringmaster::scheduler;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kWorkers = 1000;
constexpr int kGpusPerWorker = 8;
constexpr int64_t kCapacity = int64_t{kWorkers} * kGpusPerWorker * kWholeGpuShare;

ClusterState MakeCluster() {
  ClusterState cluster;
  for (int w = 0; w < kWorkers; ++w) {
    Worker worker;
    worker.id = "w" + std::to_string(w);
    worker.address = "10.0." + std::to_string(w / 256) + "." + std::to_string(w % 256);
    worker.port = 7071;
    for (int g = 0; g < kGpusPerWorker; ++g) {
      worker.gpus.push_back(Gpu{g, "t4", 16LL << 30, false});
    }
    cluster.UpsertWorker(worker);
  }
  return cluster;
}

// Specs, until their demand passes 110% of the cluster.
std::vector<JobSpec> MakeJobs(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> kind(0, 1);
  const int32_t shares[] = {100, 200, 250, 300, 500, 600, 750};
  const int32_t wide[] = {2, 4, 8};
  std::vector<JobSpec> jobs;
  int64_t demand = 0;
  while (demand < kCapacity * 11 / 10) {
    JobSpec spec;
    spec.replicas = 1;
    spec.gpus_per_replica = 1;
    spec.gpu_type = "t4";
    const double k = kind(rng);
    if (k < 0.45) {
      spec.gpu_share = shares[rng() % 7];
      demand += spec.gpu_share;
    } else if (k < 0.85) {
      demand += kWholeGpuShare;
    } else {
      spec.gpus_per_replica = wide[rng() % 3];
      demand += int64_t{spec.gpus_per_replica} * kWholeGpuShare;
    }
    jobs.push_back(std::move(spec));
  }
  return jobs;
}

struct Result {
  double unallocated_90 = 0, unallocated_100 = 0;
  int failed = 0;
  double share_place_us = 0;
};

Result Run(SharePolicy policy, const std::vector<JobSpec>& jobs) {
  ClusterState cluster = MakeCluster();
  RecentDemand demand;
  Result result;
  int64_t arrived = 0, allocated = 0, share_calls = 0;
  double share_seconds = 0;
  bool seen_90 = false;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobSpec& spec = jobs[i];
    demand.Add(ShareTaskOf(spec), spec.replicas);
    if (i % 100 == 0) {
      cluster.SetSharePolicy(policy, std::make_shared<const TaskMix>(demand.Mix()));
    }
    const int64_t asked =
        spec.gpu_share > 0 ? spec.gpu_share : int64_t{spec.gpus_per_replica} * kWholeGpuShare;
    arrived += asked;
    const GangRequest request = RequestOf(spec);
    const auto start = Clock::now();
    PlacementDecision d = cluster.Place(request);
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    if (spec.gpu_share > 0) {
      share_seconds += took;
      ++share_calls;
    }
    if (d.kind == PlacementDecision::Kind::kPlaced && cluster.Allocate(d.ranks).ok()) {
      allocated += asked;
    } else {
      ++result.failed;
    }
    const double unallocated = 1.0 - static_cast<double>(allocated) / kCapacity;
    if (!seen_90 && arrived >= kCapacity * 9 / 10) {
      result.unallocated_90 = unallocated;
      seen_90 = true;
    }
    if (arrived >= kCapacity) {
      result.unallocated_100 = unallocated;
      break;
    }
  }
  result.share_place_us = share_calls > 0 ? share_seconds / share_calls * 1e6 : 0;
  return result;
}

}  // namespace

int main() {
  const std::vector<JobSpec> jobs = MakeJobs(7);
  std::printf(
      "share placement: %d workers x %d t4, jobs 45%% shares, 40%% 1 GPU, 15%% 2-8 GPUs; "
      "arrivals until 100%% of the GPUs are asked for, none ends\n",
      kWorkers, kGpusPerWorker);
  std::printf("%-12s %14s %15s %12s %16s %10s\n", "policy", "unalloc @90%", "unalloc @100%",
              "not placed", "share Place() us", "vs packing");
  double packing_us = 0;
  for (SharePolicy policy :
       {SharePolicy::kGpuPacking, SharePolicy::kFgd, SharePolicy::kRingmaster}) {
    const Result r = Run(policy, jobs);
    if (policy == SharePolicy::kGpuPacking) packing_us = r.share_place_us;
    std::printf("%-12s %13.2f%% %14.2f%% %12d %16.1f %9.1fx\n", SharePolicyName(policy),
                100 * r.unallocated_90, 100 * r.unallocated_100, r.failed, r.share_place_us,
                packing_us > 0 ? r.share_place_us / packing_us : 0.0);
  }
  return 0;
}
