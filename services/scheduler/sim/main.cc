// ringmaster-sim: replays the Philly trace (or a slice of it) through Ringmaster's policy and the
// research baselines in one run, on the same jobs and cluster, at one load or several, and
// prints what each gives (docs/fair-share.md, "What the simulator says").
#include <time.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "scheduler/sim/baselines.h"
#include "scheduler/sim/replay.h"
#include "scheduler/sim/share_experiment.h"

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

void Print(const char* name, const SimReport& r, double cpu_s) {
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
  std::printf("preemptions            %lld, losing %.0f GPU-hours of work\n",
              static_cast<long long>(r.preemptions), r.lost_gpu_seconds / 3600.0);
  std::printf(
      "longest refused share  %lld s (a queue with demand within its nominal, while "
      "others borrowed)\n",
      static_cast<long long>(r.longest_refused_s));
  std::printf("over-allocations %lld, partial gangs %lld, passes %lld, CPU %.1f s\n",
              static_cast<long long>(r.over_allocations), static_cast<long long>(r.partial_gangs),
              static_cast<long long>(r.passes), cpu_s);
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

// One policy of the comparison.
struct PolicyRun {
  std::string key;   // as --policy names it
  std::string name;  // as the table prints it
  SimReport report;
  double cpu_s = 0;  // CPU time of its replay (its own thread's)
};

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

const std::vector<std::pair<std::string, std::string>>& AllPolicies() {
  static const auto* all = new std::vector<std::pair<std::string, std::string>>{
      {"fifo", "FIFO per VC (Helios' baseline)"},
      {"fifo-pooled", "FIFO, VCs pooled (borrowing)"},
      {"srtf", "SRTF per VC (true durations)"},
      {"srtf-pooled", "SRTF, VCs pooled (true durations)"},
      {"las", "2D-LAS per VC (Tiresias)"},
      {"las-pooled", "2D-LAS, VCs pooled (Tiresias)"},
      {"ringmaster", "Ringmaster (SchedulePass)"},
      {"elastic", "Ringmaster, elastic jobs"},
  };
  return *all;
}

SimReport RunPolicy(const std::string& key, const std::vector<TraceJob>& jobs,
                    const std::map<std::string, int32_t>& vcs, const SimOptions& base,
                    const BaselineOptions& baseline) {
  if (key == "fifo" || key == "fifo-pooled") {
    SimOptions o = base;
    o.policy.order = PolicyOptions::Order::kSubmit;
    o.sharing = key == "fifo-pooled";
    o.policy.strict_fifo = true;
    o.policy.preemption = false;
    o.policy.backfill = false;
    return Replay(jobs, vcs, o);
  }
  if (key == "ringmaster") return Replay(jobs, vcs, base);
  if (key == "elastic") {
    SimOptions o = base;
    o.elastic = true;
    return Replay(jobs, vcs, o);
  }
  BaselineOptions o = baseline;
  o.policy = key.rfind("srtf", 0) == 0 ? Baseline::kSrtf : Baseline::kLas;
  o.pooled = key.size() > 7 && key.substr(key.size() - 7) == "-pooled";
  return ReplayBaseline(jobs, vcs, o);
}

// Runs the policies on `threads` threads (each replay is single-threaded and independent).
void RunAll(std::vector<PolicyRun>& runs, const std::vector<TraceJob>& jobs,
            const std::map<std::string, int32_t>& vcs, const SimOptions& base,
            const BaselineOptions& baseline, int threads) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < runs.size(); i = next++) {
      const double t0 = ThreadCpuSeconds();
      runs[i].report = RunPolicy(runs[i].key, jobs, vcs, base, baseline);
      runs[i].cpu_s = ThreadCpuSeconds() - t0;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

void PrintTable(const std::vector<PolicyRun>& runs) {
  std::printf("\n%-34s %7s %7s %8s %8s %6s %7s %5s %7s %7s %8s %6s\n", "policy", "jobs", "avgJCT",
              "p99JCT", "avgQueue", "p50Q", "p99Q", "util", "32+wait", "preempt", "lostGPUh",
              "cpu_s");
  for (const PolicyRun& run : runs) {
    const SimReport& r = run.report;
    std::printf("%-34s %7lld %7.0f %8.0f %8.0f %6.0f %7.0f %5.3f %6.2fd %7lld %8.0f %6.1f\n",
                run.name.c_str(), static_cast<long long>(r.jobs), r.avg_jct_s, r.p99_jct_s,
                r.avg_queue_s, r.p50_queue_s, r.p99_queue_s, r.utilisation,
                r.longest_wait_32plus_s / 86400.0, static_cast<long long>(r.preemptions),
                r.lost_gpu_seconds / 3600.0, run.cpu_s);
  }
}

// Elastic jobs against the same policy without (docs/fair-share.md, "Elastic jobs in the
// simulator"): the figures the issue judges them by.
void PrintElastic(const std::vector<PolicyRun>& runs) {
  const PolicyRun* rigid = nullptr;
  const PolicyRun* elastic = nullptr;
  for (const PolicyRun& run : runs) {
    if (run.key == "ringmaster") rigid = &run;
    if (run.key == "elastic") elastic = &run;
  }
  if (elastic == nullptr) return;
  std::printf("\n%-34s %7s %8s %8s %7s %9s %5s %8s %8s %9s %9s %6s\n", "elastic", "avgJCT",
              "p99JCT", "avgQueue", "p99Q", "p99Qnom", "util", "resizes", "perJob", "resizeGPUh",
              "refused_s", "cpu_s");
  for (const PolicyRun* run : {rigid, elastic}) {
    if (run == nullptr) continue;
    const SimReport& r = run->report;
    std::printf("%-34s %7.0f %8.0f %8.0f %7.0f %9.0f %5.3f %8lld %8.3f %9.0f %9lld %6.1f\n",
                run->name.c_str(), r.avg_jct_s, r.p99_jct_s, r.avg_queue_s, r.p99_queue_s,
                r.p99_queue_within_nominal_s, r.utilisation, static_cast<long long>(r.resizes),
                static_cast<double>(r.resizes) / std::max<int64_t>(1, r.jobs),
                r.resize_lost_gpu_seconds / 3600.0, static_cast<long long>(r.longest_refused_s),
                run->cpu_s);
  }
  const SimReport& e = elastic->report;
  std::printf(
      "elastic: %lld of %lld jobs elastic; %lld resizes (%lld grows), %.3f per elastic job; "
      "%.0f GPU-hours lost to resizes\n",
      static_cast<long long>(e.elastic_jobs), static_cast<long long>(e.jobs),
      static_cast<long long>(e.resizes), static_cast<long long>(e.grows),
      static_cast<double>(e.resizes) / std::max<int64_t>(1, e.elastic_jobs),
      e.resize_lost_gpu_seconds / 3600.0);
  if (rigid != nullptr) {
    const SimReport& r = rigid->report;
    std::printf(
        "elastic / not elastic: avg JCT %.3f (goal <= 0.70), p99 JCT %.3f, avg queueing %.3f, "
        "p99 queueing within nominal %.3f (goal <= 1)\n",
        e.avg_jct_s / std::max(1.0, r.avg_jct_s), e.p99_jct_s / std::max(1.0, r.p99_jct_s),
        e.avg_queue_s / std::max(1.0, r.avg_queue_s),
        e.p99_queue_within_nominal_s / std::max(1.0, r.p99_queue_within_nominal_s));
  }
}

// The window's offered load at a speed-up: GPU-seconds asked / (GPUs x submit span / speed-up).
double OfferedLoad(const std::vector<TraceJob>& window, int64_t total_gpus, double speedup) {
  if (window.size() < 2) return 0;
  double demand = 0;
  for (const TraceJob& j : window) demand += static_cast<double>(j.duration_s) * j.gpus;
  const double span =
      static_cast<double>(window.back().submit_s - window.front().submit_s) / speedup;
  return demand / (static_cast<double>(total_gpus) * std::max(1.0, span));
}

std::vector<TraceJob> SpeedUp(const std::vector<TraceJob>& window, int64_t start, double speedup) {
  std::vector<TraceJob> out = window;
  for (TraceJob& j : out) {
    j.submit_s = start + static_cast<int64_t>(static_cast<double>(j.submit_s - start) / speedup);
  }
  return out;
}

// FGD's experiment (sim/share_experiment.h): the share of GPUs left unallocated by each policy
// as arrived demand grows, and the ratios the issue asks for at 100%.
int RunOpenb(const std::string& dir, const std::string& pods, int seeds, int threads) {
  auto nodes = ReadOpenbNodes(dir + "/openb_node_list_gpu_node.csv");
  auto tasks = nodes.ok() ? ReadOpenbTasks(dir + "/" + pods) : nodes.status();
  if (!nodes.ok() || !tasks.ok()) {
    std::cerr << "ringmaster-sim: " << (nodes.ok() ? tasks.status() : nodes.status()) << "\n";
    return 1;
  }
  int64_t gpus = 0;
  for (const ShareNode& n : *nodes) gpus += static_cast<int64_t>(n.gpu_free.size());
  ShareExperimentOptions options;
  options.seeds = seeds;
  options.threads = threads;
  const std::vector<SharePolicy> policies = {SharePolicy::kRandom,     SharePolicy::kBestFit,
                                             SharePolicy::kDotProduct, SharePolicy::kGpuPacking,
                                             SharePolicy::kFgd,        SharePolicy::kRingmaster};
  std::printf(
      "openb: %zu GPU nodes, %lld GPUs; %zu tasks in %s drawn with replacement, none "
      "leaving; mean of %d arrival sequences\n",
      nodes->size(), static_cast<long long>(gpus), tasks->size(), pods.c_str(), seeds);
  const std::vector<ShareCurve> curves = RunShareExperiment(*nodes, *tasks, policies, options);
  std::printf("\nGPUs unallocated (%% of %lld) at arrived GPU demand (%% of capacity)\n%-12s",
              static_cast<long long>(gpus), "policy");
  for (double load : options.loads) std::printf(" %6.0f%%", 100 * load);
  std::printf(" %8s %6s\n", "failed@100", "cpu_s");
  size_t at100 = 0;
  for (size_t l = 0; l < options.loads.size(); ++l) {
    if (std::abs(options.loads[l] - 1.0) < 1e-9) at100 = l;
  }
  for (const ShareCurve& c : curves) {
    std::printf("%-12s", SharePolicyName(c.policy));
    for (double u : c.unallocated) std::printf(" %6.2f%%", 100 * u);
    std::printf(" %10.0f %6.1f\n", c.failed[at100], c.cpu_s);
  }
  auto at = [&](SharePolicy p) {
    for (const ShareCurve& c : curves) {
      if (c.policy == p) return c.unallocated[at100];
    }
    return 0.0;
  };
  double best_packing = at(SharePolicy::kRandom);
  for (SharePolicy p :
       {SharePolicy::kBestFit, SharePolicy::kDotProduct, SharePolicy::kGpuPacking}) {
    best_packing = std::min(best_packing, at(p));
  }
  const double ours = at(SharePolicy::kRingmaster), fgd = at(SharePolicy::kFgd);
  std::printf(
      "\nat 100%%: Ringmaster / FGD unallocated %.3f (goal <= 1); Ringmaster leaves %.0f%% "
      "fewer GPUs unallocated than the best baseline (goal >= 40%%); FGD %.0f%% fewer\n",
      fgd > 0 ? ours / fgd : 0, best_packing > 0 ? 100 * (1 - ours / best_packing) : 0,
      best_packing > 0 ? 100 * (1 - fgd / best_packing) : 0);
  return 0;
}

int Run(int argc, char** argv) {
  Flags flags("ringmaster-sim",
              "Replays a Philly trace through Ringmaster's policy and the research baselines "
              "(FIFO, SRTF, Tiresias' 2D-LAS; per VC and pooled), all in one run.");
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
  flags.Add("policy", "all",
            "comma-separated: fifo, fifo-pooled, srtf, srtf-pooled, las, las-pooled, "
            "ringmaster, elastic (Ringmaster with every job of 2+ GPUs elastic from half to "
            "double its GPUs); or all");
  flags.Add("arrival-speedup", "1",
            "divide the time between submits by this (a heavier load on the same cluster)");
  flags.Add("load", "",
            "set the speed-up from a target instead: a number is the offered load (GPU-time "
            "asked / GPU-time the cluster has over the window); 'helios' finds the speed-up at "
            "which FIFO per VC queues as long as Helios' FIFO did (needs --reference)");
  flags.Add("loads", "",
            "comma-separated speed-ups (e.g. 1,4,8,12): the whole comparison at each, and a "
            "table of them");
  flags.Add("threads", "2", "replays run at once (each is single-threaded)");
  flags.Add("las-thresholds", "3600", "2D-LAS queue thresholds in attained GPU-seconds");
  flags.Add("order", "shortest-limit",
            "Ringmaster's order within a queue: submit, or shortest-limit (shortest runtime "
            "limit first; jobs pending longer than --starve-hours first of all)");
  flags.Add("starve-hours", "6", "with --order shortest-limit: when a waiting job goes first");
  flags.Add("elastic-idle-seconds", "60",
            "--policy elastic: how long GPUs stay idle before a running job grows into them");
  flags.Add("resizes-per-hour", "2", "--policy elastic: the most resizes of one job in an hour");
  flags.Add("resize-restart-seconds", "60",
            "--policy elastic: a resize's restart, beyond the grace and the work since the last "
            "checkpoint");
  flags.Add("openb", "",
            "instead of the Philly replay: FGD's fragmentation experiment on the Alibaba openb "
            "trace in this folder (docs/fair-share.md, \"Shared GPUs in the simulator\")");
  flags.Add("openb-pods", "openb_pod_list_gpuspec33.csv", "with --openb: the pod list");
  flags.Add("seeds", "3", "with --openb: arrival sequences, figures are their mean");
  if (auto s = flags.Parse(argc, argv); !s.ok()) {
    std::cerr << "ringmaster-sim: " << s.message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  int64_t limit = 0, ckpt = 0, grace = 0, reservations = 0, round = 0, threads = 0;
  int64_t idle_s = 0, resizes_per_hour = 0, restart_s = 0;
  for (auto [name, out] : {std::pair{"limit", &limit},
                           {"elastic-idle-seconds", &idle_s},
                           {"resizes-per-hour", &resizes_per_hour},
                           {"resize-restart-seconds", &restart_s},
                           {"checkpoint-minutes", &ckpt},
                           {"grace-seconds", &grace},
                           {"reservations", &reservations},
                           {"runtime-round-seconds", &round},
                           {"threads", &threads}}) {
    if (auto s = flags.GetInt(name, out); !s.ok()) {
      std::cerr << "ringmaster-sim: " << s.message() << "\n";
      return 2;
    }
    if (*out < 0) {
      std::cerr << "ringmaster-sim: --" << name << ": a non-negative integer expected\n";
      return 2;
    }
  }
  if (threads < 1 || threads > 64) {
    std::cerr << "ringmaster-sim: --threads: 1..64 expected\n";
    return 2;
  }
  if (!flags.Get("openb").empty()) {
    int64_t seeds = 0;
    if (auto s = flags.GetInt("seeds", &seeds); !s.ok() || seeds < 1 || seeds > 100) {
      std::cerr << "ringmaster-sim: --seeds: 1..100 expected\n";
      return 2;
    }
    return RunOpenb(flags.Get("openb"), flags.Get("openb-pods"), static_cast<int>(seeds),
                    static_cast<int>(threads));
  }
  double speedup = 1;
  if (auto s = flags.GetDouble("arrival-speedup", &speedup);
      !s.ok() || !(speedup >= 1) || speedup > 1000) {
    std::cerr << "--arrival-speedup: a number 1..1000 expected\n";
    return 2;
  }
  std::vector<std::string> keys;
  if (flags.Get("policy") == "all") {
    for (const auto& [key, name] : AllPolicies()) keys.push_back(key);
  } else {
    for (absl::string_view k : absl::StrSplit(flags.Get("policy"), ',')) {
      bool known = false;
      for (const auto& [key, name] : AllPolicies()) known |= key == k;
      if (!known) {
        std::cerr << "--policy: fifo, fifo-pooled, srtf, srtf-pooled, las, las-pooled, "
                     "ringmaster, elastic or all, got '"
                  << k << "'\n";
        return 2;
      }
      keys.emplace_back(k);
    }
  }
  std::vector<int64_t> thresholds;
  for (absl::string_view t : absl::StrSplit(flags.Get("las-thresholds"), ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(t, &v) || v <= 0 || (!thresholds.empty() && v <= thresholds.back())) {
      std::cerr << "--las-thresholds: ascending positive GPU-seconds expected, got '"
                << flags.Get("las-thresholds") << "'\n";
      return 2;
    }
    thresholds.push_back(v);
  }
  std::vector<double> loads;
  if (!flags.Get("loads").empty()) {
    for (absl::string_view l : absl::StrSplit(flags.Get("loads"), ',')) {
      double v = 0;
      if (!absl::SimpleAtod(l, &v) || !(v >= 1) || v > 1000) {
        std::cerr << "--loads: speed-ups 1..1000 expected, got '" << l << "'\n";
        return 2;
      }
      loads.push_back(v);
    }
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
  }
  SimOptions base;
  int64_t total_gpus = 0;
  for (const auto& [vc, nodes] : *vcs) total_gpus += int64_t{nodes} * base.gpus_per_node;

  base.checkpoint_interval_s = ckpt * 60;
  base.grace_s = grace;
  base.runtime_limit_round_s = round;
  base.policy.reservations = static_cast<int32_t>(reservations);
  base.policy.elastic.idle_delay_ms = idle_s * 1000;
  base.policy.elastic.max_resizes_per_hour = static_cast<int32_t>(resizes_per_hour);
  base.policy.elastic.restart_cost_ms = (grace + restart_s) * 1000;
  base.resize_restart_s = restart_s;
  if (flags.Get("order") == "shortest-limit") {
    base.policy.order = PolicyOptions::Order::kShortestLimit;
  } else if (flags.Get("order") != "submit") {
    std::cerr << "--order: submit or shortest-limit, got '" << flags.Get("order") << "'\n";
    return 2;
  }
  double starve_hours = 0;
  if (auto s = flags.GetDouble("starve-hours", &starve_hours);
      !s.ok() || !(starve_hours > 0) || starve_hours > 24 * 365) {
    std::cerr << "--starve-hours: a number of hours above 0 expected\n";
    return 2;
  }
  base.policy.starve_after_ms = static_cast<int64_t>(starve_hours * 3600 * 1000);
  BaselineOptions baseline;
  baseline.checkpoint_interval_s = base.checkpoint_interval_s;
  baseline.grace_s = grace;
  baseline.las_thresholds_gpu_s = thresholds;
  Reference ref;
  if (!flags.Get("reference").empty()) ref = ReadReference(flags.Get("reference"));

  const std::string load = flags.Get("load");
  if (!load.empty()) {
    double target = 0;
    if (load == "helios") {
      if (!ref.found) {
        std::cerr << "--load helios: needs --reference with Helios' FIFO figures\n";
        return 2;
      }
      // FIFO's queueing grows with the speed-up: bisect on it (each step one FIFO replay).
      double lo = 1, hi = 32;
      for (int step = 0; step < 12 && hi / lo > 1.02; ++step) {
        const double mid = std::sqrt(lo * hi);
        SimReport r = RunPolicy("fifo", SpeedUp(window, *start, mid), *vcs, base, baseline);
        std::printf("load helios: x%.2f -> FIFO per VC queueing %.0f s (Helios' %.0f s)\n", mid,
                    r.avg_queue_s, ref.fifo_queue);
        std::fflush(stdout);
        (r.avg_queue_s < ref.fifo_queue ? lo : hi) = mid;
      }
      speedup = std::sqrt(lo * hi);
    } else if (absl::SimpleAtod(load, &target) && target > 0 && target <= 100) {
      speedup = target / OfferedLoad(window, total_gpus, 1);
      if (!(speedup >= 1) || speedup > 1000) {
        std::cerr << "--load " << load << ": needs a speed-up of " << speedup
                  << ", outside 1..1000\n";
        return 2;
      }
    } else {
      std::cerr << "--load: 'helios' or an offered load 0..100 expected, got '" << load << "'\n";
      return 2;
    }
  }
  if (loads.empty()) loads.push_back(speedup);

  std::map<std::string, std::vector<double>> queue_by_load, wait32_by_load;
  for (double x : loads) {
    std::vector<TraceJob> jobs = SpeedUp(window, *start, x);
    std::printf(
        "\n==== trace: %zu jobs in the window, %zu VCs, %lld GPUs; arrivals sped up x%.2f: "
        "offered load %.2f ====\n",
        jobs.size(), vcs->size(), static_cast<long long>(total_gpus), x,
        OfferedLoad(window, total_gpus, x));
    std::vector<PolicyRun> runs;
    for (const std::string& key : keys) {
      for (const auto& [k, name] : AllPolicies()) {
        if (k == key) runs.push_back({key, name, {}, 0});
      }
    }
    RunAll(runs, jobs, *vcs, base, baseline, static_cast<int>(threads));
    PrintTable(runs);
    PrintElastic(runs);
    const PolicyRun* fifo = nullptr;
    const PolicyRun* rm = nullptr;
    const PolicyRun* srtf = nullptr;
    for (const PolicyRun& run : runs) {
      if (run.key == "fifo") fifo = &run;
      if (run.key == "ringmaster") rm = &run;
      if (run.key == "srtf") srtf = &run;
      queue_by_load[run.key].push_back(run.report.avg_queue_s);
      wait32_by_load[run.key].push_back(run.report.longest_wait_32plus_s / 86400.0);
    }
    if (rm != nullptr) Print("Ringmaster, per queue", rm->report, rm->cpu_s);
    std::printf("\n== ratios ==\n");
    if (ref.found) {
      std::printf(
          "Helios (their CSV, x1): FIFO avg JCT %.0f s, queueing %.0f s; SRTF queueing %.0f s\n",
          ref.fifo_jct, ref.fifo_queue, ref.srtf_queue);
      if (fifo != nullptr) {
        std::printf("our FIFO / their FIFO: JCT %.2f, queueing %.2f\n",
                    fifo->report.avg_jct_s / ref.fifo_jct,
                    fifo->report.avg_queue_s / ref.fifo_queue);
      }
      if (rm != nullptr) {
        std::printf("Ringmaster queueing / their SRTF queueing: %.3f (goal < 1)\n",
                    rm->report.avg_queue_s / ref.srtf_queue);
      }
    }
    if (rm != nullptr && srtf != nullptr) {
      std::printf("Ringmaster queueing / our SRTF per VC queueing: %.3f\n",
                  rm->report.avg_queue_s / std::max(1.0, srtf->report.avg_queue_s));
    }
    if (rm != nullptr && fifo != nullptr) {
      std::printf("Ringmaster / our FIFO: JCT %.3f, queueing %.4f\n",
                  rm->report.avg_jct_s / fifo->report.avg_jct_s,
                  rm->report.avg_queue_s / std::max(1.0, fifo->report.avg_queue_s));
    }
    if (rm != nullptr) {
      std::printf("Ringmaster longest wait of a 32+ GPU job / 1 day: %.3f (goal <= 1)\n",
                  rm->report.longest_wait_32plus_s / 86400.0);
      std::printf("CPU time of the Ringmaster replay: %.1f s (goal < 60 at x8)\n", rm->cpu_s);
    }
  }
  if (loads.size() > 1) {
    std::printf(
        "\n==== average queueing s (longest 32+ GPU wait, days) by arrival speed-up ====\n");
    std::printf("%-34s", "policy");
    for (double x : loads) std::printf(" %18s", absl::StrCat("x", x).c_str());
    std::printf("\n");
    for (const std::string& key : keys) {
      for (const auto& [k, name] : AllPolicies()) {
        if (k != key) continue;
        std::printf("%-34s", name.c_str());
        for (size_t i = 0; i < loads.size(); ++i) {
          std::printf(" %18s",
                      absl::StrFormat("%.0f (%.2fd)", queue_by_load[key][i], wait32_by_load[key][i])
                          .c_str());
        }
        std::printf("\n");
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace ringmaster::scheduler::sim

int main(int argc, char** argv) { return ringmaster::scheduler::sim::Run(argc, argv); }
