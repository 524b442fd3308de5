#include "scheduler/core/health_check.h"

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

CheckPlan PlanCheck(const Job& job, bool enabled, double min_ratio, const std::string& transport,
                    const std::function<bool(const std::string& worker_id)>& on_probation,
                    const std::function<double(const std::string& key)>& baseline_of) {
  CheckPlan plan;
  plan.run = ChecksJob(job.spec, enabled);
  plan.min_ratio = min_ratio;
  plan.transport = transport;
  plan.separately = job.separate_check_attempt == job.attempt;
  for (const auto& r : job.placement) {
    plan.separately = plan.separately || on_probation(r.worker_id);
  }
  const CheckShape shape = ShapeOf(job.placement, plan.transport,
                                   ChecksInSession(job.spec, plan.transport, plan.separately));
  plan.baseline_gbps = baseline_of(shape.Key());
  return plan;
}

CheckDecision DecideCheck(const Job& job, const std::string& worker_id, const CheckOutcome& outcome,
                          const std::function<double(const std::string& key)>& baseline_of,
                          const std::function<bool(const std::string& worker_id)>& on_probation,
                          const std::function<bool(const std::string& worker_id)>& known) {
  CheckDecision d;
  bool launcher = false;
  bool culprit_placed = false;
  for (const auto& r : job.placement) {
    launcher = launcher || (r.rank == 0 && r.worker_id == worker_id);
    culprit_placed = culprit_placed || r.worker_id == outcome.culprit_worker_id;
  }
  if (!launcher) {
    d.ignored = true;
    return d;
  }
  // The ring chose its transport (a GPU rank whose CUDA fails falls back to the CPU).
  d.shape = ShapeOf(job.placement, outcome.transport, outcome.in_session);
  d.baseline_gbps = baseline_of(d.shape.Key());
  // Every completed check that blames no one is a sample of what the shape reaches, one inside
  // the job's MPI_Init too: a median of the recent ones, which no few of them move.
  d.learn = outcome.completed && outcome.culprit_worker_id.empty();
  d.text = CheckEventText(outcome, d.shape, d.baseline_gbps);
  // A check inside the job's MPI_Init is written by the job's own processes: any job could
  // forge one. It never marks or clears a worker; a blame is verified by ringmaster-check.
  const bool trusted = !outcome.in_session;
  if (outcome.passed && trusted) {
    for (const auto& r : job.placement) {
      if (on_probation(r.worker_id) &&
          std::find(d.cleared.begin(), d.cleared.end(), r.worker_id) == d.cleared.end()) {
        d.cleared.push_back(r.worker_id);
      }
    }
    for (const std::string& id : d.cleared) {
      absl::StrAppend(&d.text, "; worker ", id, " passed it on probation and is healthy again");
    }
  }
  if (outcome.passed || !culprit_placed || !known(outcome.culprit_worker_id)) return d;
  d.culprit = outcome.culprit_worker_id;
  const std::string message = Utf8Prefix(outcome.message, 512);
  if (!trusted) {
    // Re-placed like a blame, not counted: its next attempt runs ringmaster-check before any
    // of its processes start, and that check marks the worker if it is slow.
    d.blame = CheckDecision::Blame::kVerify;
    d.replace_reason = absl::StrCat("re-placing to verify the blame of worker ", d.culprit,
                                    " with ringmaster-check before any worker is marked (not "
                                    "counted against backoff_limit): ",
                                    message);
    return d;
  }
  d.blame = CheckDecision::Blame::kMark;
  d.unhealthy_reason = Utf8Prefix(absl::StrCat("pre-run check of job ", job.id, " attempt ",
                                               outcome.attempt, " failed: ", outcome.message),
                                  1024);
  d.replace_reason = absl::StrCat("re-placing without unhealthy worker ", d.culprit,
                                  " (not counted against backoff_limit): ", message);
  return d;
}

}  // namespace ringmaster::scheduler
