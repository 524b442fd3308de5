// ringmaster-sim: replays the Philly trace (or a slice of it) through two policies in one run,
// Helios' per-VC FIFO and Ringmaster's fair share, and prints what each gives.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "sim/replay.h"

namespace ringmaster::scheduler::sim {
namespace {

struct Reference {
  double fifo_jct = 0, fifo_queue = 0, srtf_jct = 0, srtf_queue = 0;
  bool found = false;
};

// helios_qssf_philly_results.csv, row "all".
Reference ReadReference(const std::string& path) {
  Reference ref;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> c = absl::StrSplit(line, ',');
    if (c.size() < 10 || c[0] != "all") continue;
    ref.found = absl::SimpleAtod(c[2], &ref.fifo_jct) && absl::SimpleAtod(c[4], &ref.srtf_jct) &&
                absl::SimpleAtod(c[6], &ref.fifo_queue) && absl::SimpleAtod(c[8], &ref.srtf_queue);
  }
  return ref;
}

void Print(const char* name, const SimReport& r, double wall_s) {
  std::printf("\n== %s ==\n", name);
  std::printf("jobs finished          %lld\n", static_cast<long long>(r.jobs));
  std::printf("JCT s                  avg %.0f  p50 %.0f  p99 %.0f\n", r.avg_jct_s, r.p50_jct_s,
              r.p99_jct_s);
  std::printf("queueing delay s       avg %.1f  p50 %.0f  p99 %.0f\n", r.avg_queue_s, r.p50_queue_s,
              r.p99_queue_s);
  std::printf("GPU utilisation        %.3f of %lld GPUs\n", r.utilisation,
              static_cast<long long>(r.total_gpus));
  std::printf("longest wait, 32+ GPUs %lld s (%.2f days)\n",
              static_cast<long long>(r.longest_wait_32plus_s), r.longest_wait_32plus_s / 86400.0);
  std::printf("preemptions            %lld\n", static_cast<long long>(r.preemptions));
  std::printf(
      "longest refused share  %lld s (a queue with demand within its nominal, while "
      "others borrowed)\n",
      static_cast<long long>(r.longest_refused_s));
  std::printf("over-allocations %lld, partial gangs %lld, passes %lld, wall %.1f s\n",
              static_cast<long long>(r.over_allocations), static_cast<long long>(r.partial_gangs),
              static_cast<long long>(r.passes), wall_s);
  double total_gpu_s = 0, total_demand_s = 0;
  for (const auto& [vc, q] : r.queues) {
    total_gpu_s += q.gpu_seconds;
    total_demand_s += q.demand_gpu_seconds;
  }
  std::printf("%-8s %6s %6s %9s %9s %9s %10s %9s\n", "queue", "GPUs", "jobs", "entitled", "got",
              "asked", "preempted", "refused_s");
  for (const auto& [vc, q] : r.queues) {
    std::printf("%-8s %6d %6lld %8.1f%% %8.1f%% %8.1f%% %10lld %9lld\n", vc.c_str(), q.nominal_gpus,
                static_cast<long long>(q.jobs),
                100.0 * q.nominal_gpus / std::max<int64_t>(1, r.total_gpus),
                total_gpu_s > 0 ? 100.0 * q.gpu_seconds / total_gpu_s : 0.0,
                100.0 * q.demand_gpu_seconds / std::max(1.0, total_demand_s),
                static_cast<long long>(q.preempted), static_cast<long long>(q.longest_refused_s));
  }
}

int Run(int argc, char** argv) {
  Flags flags("ringmaster-sim",
              "Replays a Philly trace through Helios' per-VC FIFO and Ringmaster's fair share.");
  flags.Add("trace", "", "philly.csv (timestamp,duration,num_gpus,gpu_time,cluster)");
  flags.Add("vcs", "", "VC sizes: vc,node num (helios_qssf_philly_vc.csv)");
  flags.Add("reference", "", "helios_qssf_philly_results.csv, to print their figures too");
  flags.Add("start", "2017-10-01 00:00:00", "first submit time replayed (UTC)");
  flags.Add("end", "2017-11-30 23:59:59", "last submit time replayed (UTC)");
  flags.Add("limit", "0", "replay at most this many jobs of the window (0: all)");
  flags.Add("checkpoint-minutes", "30", "a preempted job keeps its work up to its last checkpoint");
  flags.Add("grace-seconds", "30", "time a preempted job takes to stop");
  flags.Add("reservations", "4", "pending gangs that get a reservation");
  flags.Add("runtime-round-seconds", "3600",
            "each job's runtime limit: its duration rounded up to a multiple of this");
  flags.Add("policy", "both", "fifo | ringmaster | both");
  flags.Add("arrival-speedup", "1",
            "divide the time between submits by this (a heavier load on the same cluster)");
  if (auto s = flags.Parse(argc, argv); !s.ok()) {
    std::cerr << "ringmaster-sim: " << s.message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  int64_t limit = 0, ckpt = 0, grace = 0, reservations = 0, round = 0;
  for (auto [name, out] : {std::pair{"limit", &limit},
                           {"checkpoint-minutes", &ckpt},
                           {"grace-seconds", &grace},
                           {"reservations", &reservations},
                           {"runtime-round-seconds", &round}}) {
    if (auto s = flags.GetInt(name, out); !s.ok()) {
      std::cerr << "ringmaster-sim: " << s.message() << "\n";
      return 2;
    }
    if (*out < 0) {
      std::cerr << "ringmaster-sim: --" << name << ": a non-negative integer expected\n";
      return 2;
    }
  }
  double speedup = 1;
  if (auto s = flags.GetDouble("arrival-speedup", &speedup);
      !s.ok() || !(speedup >= 1) || speedup > 1000) {
    std::cerr << "--arrival-speedup: a number 1..1000 expected\n";
    return 2;
  }
  const std::string policy = flags.Get("policy");
  if (policy != "fifo" && policy != "ringmaster" && policy != "both") {
    std::cerr << "--policy: fifo, ringmaster or both, got '" << policy << "'\n";
    return 2;
  }
  std::ifstream trace_in(flags.Get("trace")), vcs_in(flags.Get("vcs"));
  if (!trace_in) {
    std::cerr << "--trace: cannot read '" << flags.Get("trace") << "'\n";
    return 2;
  }
  if (!vcs_in) {
    std::cerr << "--vcs: cannot read '" << flags.Get("vcs") << "'\n";
    return 2;
  }
  auto trace = ParsePhillyCsv(trace_in);
  auto vcs = ParseVcSizes(vcs_in);
  auto start = ParseTime(flags.Get("start"));
  auto end = ParseTime(flags.Get("end"));
  for (const absl::Status& s : {trace.status(), vcs.status(), start.status(), end.status()}) {
    if (!s.ok()) {
      std::cerr << s.message() << "\n";
      return 2;
    }
  }
  std::vector<TraceJob> window;
  for (const TraceJob& j : *trace) {
    if (j.submit_s < *start || j.submit_s > *end || !vcs->count(j.vc)) continue;
    if (limit > 0 && static_cast<int64_t>(window.size()) >= limit) break;
    window.push_back(j);
    window.back().submit_s =
        *start + static_cast<int64_t>(static_cast<double>(j.submit_s - *start) / speedup);
  }
  std::printf("trace: %zu jobs in the window, %zu VCs, arrivals sped up x%.2f\n", window.size(),
              vcs->size(), speedup);

  SimOptions base;
  base.checkpoint_interval_s = ckpt * 60;
  base.grace_s = grace;
  base.runtime_limit_round_s = round;
  base.policy.reservations = static_cast<int32_t>(reservations);
  SimReport fifo, rm;
  double fifo_wall = 0, rm_wall = 0;
  if (policy != "ringmaster") {
    SimOptions o = base;
    o.sharing = false;
    o.policy.strict_fifo = true;
    o.policy.preemption = false;
    o.policy.backfill = false;
    auto t0 = std::chrono::steady_clock::now();
    fifo = Replay(window, *vcs, o);
    fifo_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Print("FIFO per VC, no sharing (Helios' baseline)", fifo, fifo_wall);
  }
  if (policy != "fifo") {
    auto t0 = std::chrono::steady_clock::now();
    rm = Replay(window, *vcs, base);
    rm_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Print("Ringmaster: one cohort, borrowing, reclaim, backfill", rm, rm_wall);
  }
  Reference ref;
  if (!flags.Get("reference").empty()) ref = ReadReference(flags.Get("reference"));
  std::printf("\n== ratios ==\n");
  if (ref.found) {
    std::printf("Helios (their CSV): FIFO avg JCT %.0f s, queueing %.0f s; SRTF queueing %.0f s\n",
                ref.fifo_jct, ref.fifo_queue, ref.srtf_queue);
    if (policy != "ringmaster") {
      std::printf("our FIFO / their FIFO: JCT %.2f, queueing %.2f\n", fifo.avg_jct_s / ref.fifo_jct,
                  fifo.avg_queue_s / ref.fifo_queue);
    }
    if (policy != "fifo") {
      std::printf("Ringmaster queueing / their SRTF queueing: %.3f (goal < 1)\n",
                  rm.avg_queue_s / ref.srtf_queue);
    }
  }
  if (policy == "both") {
    std::printf("Ringmaster / our FIFO: JCT %.3f, queueing %.4f\n", rm.avg_jct_s / fifo.avg_jct_s,
                rm.avg_queue_s / std::max(1.0, fifo.avg_queue_s));
  }
  if (policy != "fifo") {
    std::printf("Ringmaster longest wait of a 32+ GPU job / 1 day: %.3f (goal <= 1)\n",
                rm.longest_wait_32plus_s / 86400.0);
    std::printf("wall time of the Ringmaster replay: %.1f s (goal < 60)\n", rm_wall);
  }
  return 0;
}

}  // namespace
}  // namespace ringmaster::scheduler::sim

int main(int argc, char** argv) { return ringmaster::scheduler::sim::Run(argc, argv); }
