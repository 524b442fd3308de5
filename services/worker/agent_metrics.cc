#include "agent_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/strings/str_cat.h"

namespace ringmaster::worker {

struct AgentMetrics::Families {
  explicit Families(prometheus::Registry& r)
      : throughput(prometheus::BuildGauge()
                       .Name("ringmaster_worker_rank_images_per_second")
                       .Help("Last images/sec a rank on this worker printed, by job and rank")
                       .Register(r)),
        ranks(prometheus::BuildGauge()
                  .Name("ringmaster_worker_ranks")
                  .Help("Ranks of held job attempts on this worker, by phase")
                  .Register(r)),
        attempts(prometheus::BuildGauge()
                     .Name("ringmaster_worker_job_attempts")
                     .Help("Job attempts this worker holds")
                     .Register(r)),
        rank_exits(prometheus::BuildCounter()
                       .Name("ringmaster_worker_rank_exits_total")
                       .Help("Rank ends reported to the scheduler, by result")
                       .Register(r)),
        exec_requests(
            prometheus::BuildCounter()
                .Name("ringmaster_worker_exec_requests_total")
                .Help("Exec calls from peers, by result (ok, denied, invalid, busy, error)")
                .Register(r)),
        launches(
            prometheus::BuildCounter()
                .Name("ringmaster_worker_launches_total")
                .Help("launches of job attempts on this worker, by result and launcher (mpirun, or "
                      "direct: a one-rank attempt without mpirun)")
                .Register(r)),
        connected(prometheus::BuildGauge()
                      .Name("ringmaster_worker_scheduler_connected")
                      .Help("1 while the worker is registered with the scheduler")
                      .Register(r)
                      .Add({})),
        gpus(prometheus::BuildGauge()
                 .Name("ringmaster_worker_gpus")
                 .Help("GPUs this worker offers, by type and whether simulated")
                 .Register(r)),
        cpu_slots(prometheus::BuildGauge()
                      .Name("ringmaster_worker_cpu_slots")
                      .Help("CPU rank slots this worker offers")
                      .Register(r)
                      .Add({})) {}

  prometheus::Family<prometheus::Gauge>& throughput;
  prometheus::Family<prometheus::Gauge>& ranks;
  prometheus::Family<prometheus::Gauge>& attempts;
  prometheus::Family<prometheus::Counter>& rank_exits;
  prometheus::Family<prometheus::Counter>& exec_requests;
  prometheus::Family<prometheus::Counter>& launches;
  prometheus::Gauge& connected;
  prometheus::Family<prometheus::Gauge>& gpus;
  prometheus::Gauge& cpu_slots;
};

AgentMetrics::AgentMetrics(prometheus::Registry* registry, const Inventory& inventory)
    : families_(registry ? std::make_unique<Families>(*registry) : nullptr) {
  if (!families_) return;
  std::map<std::pair<std::string, bool>, int> by_type;
  for (const Gpu& g : inventory.gpus) ++by_type[{g.type, g.simulated}];
  for (const auto& [key, n] : by_type) {
    families_->gpus.Add({{"gpu_type", key.first}, {"simulated", key.second ? "true" : "false"}})
        .Set(n);
  }
  families_->cpu_slots.Set(inventory.cpu_slots);
}

AgentMetrics::~AgentMetrics() = default;

void AgentMetrics::SetSchedulerConnected(bool connected) {
  if (families_) families_->connected.Set(connected ? 1 : 0);
}

void AgentMetrics::CountRankExit(bool succeeded) {
  if (families_) {
    families_->rank_exits.Add({{"result", succeeded ? "succeeded" : "failed"}}).Increment();
  }
}

void AgentMetrics::CountExec(const char* result) {
  if (families_) families_->exec_requests.Add({{"result", result}}).Increment();
}

void AgentMetrics::CountLaunch(const char* result, bool direct) {
  if (families_) {
    families_->launches.Add({{"result", result}, {"launcher", direct ? "direct" : "mpirun"}})
        .Increment();
  }
}

void AgentMetrics::SetHeld(int assigned, int running, int ended, size_t attempts) {
  if (!families_) return;
  families_->ranks.Add({{"phase", "assigned"}}).Set(assigned);
  families_->ranks.Add({{"phase", "running"}}).Set(running);
  families_->ranks.Add({{"phase", "ended"}}).Set(ended);
  families_->attempts.Add({}).Set(static_cast<double>(attempts));
}

void AgentMetrics::SetThroughput(const std::string& job_id, int32_t rank,
                                 double images_per_second) {
  if (!families_) return;
  MutexLock lock(&mu_);
  auto [it, fresh] = rank_throughput_.try_emplace({job_id, rank}, nullptr);
  if (fresh) {
    it->second = &families_->throughput.Add({{"job_id", job_id}, {"rank", absl::StrCat(rank)}});
  }
  it->second->Set(images_per_second);
}

void AgentMetrics::ExpireJobAt(const std::string& job_id, TimePoint at) {
  if (!families_) return;
  MutexLock lock(&mu_);
  expiring_jobs_.emplace_back(at, job_id);
}

void AgentMetrics::RemoveExpired(TimePoint now, const std::set<std::string>& held_jobs) {
  if (!families_) return;
  MutexLock lock(&mu_);
  for (auto it = expiring_jobs_.begin(); it != expiring_jobs_.end();) {
    if (now < it->first || held_jobs.count(it->second) > 0) {
      ++it;
      continue;
    }
    for (auto g = rank_throughput_.begin(); g != rank_throughput_.end();) {
      if (g->first.first != it->second) {
        ++g;
        continue;
      }
      families_->throughput.Remove(g->second);
      g = rank_throughput_.erase(g);
    }
    it = expiring_jobs_.erase(it);
  }
}

}  // namespace ringmaster::worker
