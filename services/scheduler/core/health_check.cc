#include "core/health_check.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/utf8.h"

namespace ringmaster::scheduler {

std::string CheckShape::Key() const {
  return absl::StrCat(workers, "x", ranks_per_worker, "/", transport,
                      in_session ? "/mpi_init" : "");
}

bool ChecksInSession(const JobSpec& spec, const std::string& transport, bool separately) {
  const bool calls_mpi_init =
      spec.trainer.has_value() || (spec.command && spec.command->check_in_mpi_init);
  return calls_mpi_init && transport != "gpu" && !separately;
}

CheckShape ShapeOf(const std::vector<RankPlacement>& placement, const std::string& transport,
                   bool in_session) {
  std::map<std::string, int32_t> per_worker;
  for (const RankPlacement& r : placement) ++per_worker[r.worker_id];
  CheckShape shape;
  shape.workers = static_cast<int32_t>(per_worker.size());
  for (const auto& [id, n] : per_worker)
    shape.ranks_per_worker = std::max(shape.ranks_per_worker, n);
  shape.transport = transport;
  shape.in_session = in_session;
  return shape;
}

std::string ExpectedTransport(
    const std::vector<RankPlacement>& placement,
    const std::function<const std::vector<Gpu>*(const std::string& worker_id)>& gpus_of) {
  if (placement.empty()) return "cpu";
  for (const RankPlacement& r : placement) {
    if (r.gpu_indices.empty()) return "cpu";
    const std::vector<Gpu>* gpus = gpus_of(r.worker_id);
    if (gpus == nullptr) return "cpu";
    for (int32_t index : r.gpu_indices) {
      auto gpu = std::find_if(gpus->begin(), gpus->end(),
                              [&](const Gpu& g) { return g.index == index; });
      if (gpu == gpus->end() || gpu->simulated) return "cpu";
    }
  }
  return "gpu";
}

CheckBaseline UpdateBaseline(const CheckBaseline& old, std::deque<double>& window,
                             double busbw_gbps, int64_t now_ms) {
  // Half a window and one: new samples need 8 of 15 to move it, up or down alike.
  if (window.empty() && old.samples > 0) window.assign(kBaselineWindow / 2 + 1, old.busbw_gbps);
  window.push_back(busbw_gbps);
  while (window.size() > kBaselineWindow) window.pop_front();
  std::vector<double> sorted(window.begin(), window.end());
  const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>((sorted.size() - 1) / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  CheckBaseline next = old;
  next.busbw_gbps = *middle;
  next.samples = std::max<int64_t>(old.samples, 0) + 1;
  next.updated_at_ms = now_ms;
  return next;
}

bool ChecksJob(const JobSpec& spec, bool enabled) {
  return enabled && spec.health_check.value_or(true) && !StartsDirectly(spec);
}

std::string CheckEventText(const CheckOutcome& outcome, const CheckShape& shape,
                           double baseline_gbps) {
  const std::string baseline =
      baseline_gbps > 0 ? absl::StrFormat("baseline %.3f GB/s", baseline_gbps) : "no baseline yet";
  std::string text =
      absl::StrFormat("pre-run check %s: busbw %.3f GB/s (%s, shape %s) in %.3f s",
                      outcome.passed ? "passed" : (outcome.completed ? "failed" : "could not run"),
                      outcome.busbw_gbps, baseline, shape.Key(), outcome.seconds);
  if (outcome.in_session) absl::StrAppend(&text, " inside the job's MPI_Init");
  if (!outcome.message.empty()) absl::StrAppend(&text, ": ", Utf8Prefix(outcome.message, 600));
  return text;
}

}  // namespace ringmaster::scheduler
