#include "scheduler/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace ringmaster::scheduler::sim {
namespace {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t i = static_cast<size_t>(std::ceil(p * values.size())) - 1;
  return values[std::min(i, values.size() - 1)];
}

// A set of job indices with O(1) insert and erase and no order: a pass orders its input itself,
// and walking an ordered set of a thousand running jobs every pass was a tenth of the replay.
class IndexSet {
 public:
  explicit IndexSet(size_t n) : pos_(n, -1) {}
  void insert(size_t i) {
    if (pos_[i] >= 0) return;
    pos_[i] = static_cast<int64_t>(list_.size());
    list_.push_back(i);
  }
  void erase(size_t i) {
    if (pos_[i] < 0) return;
    const size_t last = list_.back();
    list_[static_cast<size_t>(pos_[i])] = last;
    pos_[last] = pos_[i];
    list_.pop_back();
    pos_[i] = -1;
  }
  bool empty() const { return list_.empty(); }
  std::vector<size_t>::const_iterator begin() const { return list_.begin(); }
  std::vector<size_t>::const_iterator end() const { return list_.end(); }

 private:
  std::vector<int64_t> pos_;
  std::vector<size_t> list_;
};

double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return values.empty() ? 0 : sum / values.size();
}

}  // namespace

void GangShape(int32_t gpus, int32_t per_node, int32_t* replicas, int32_t* per_replica) {
  *per_replica = 1;
  for (int32_t g = per_node; g >= 1; --g) {
    if (gpus % g == 0) {
      *per_replica = g;
      break;
    }
  }
  *replicas = gpus / *per_replica;
}

void ElasticShape(int32_t gpus, int32_t per_node, int32_t* replicas, int32_t* per_replica) {
  int32_t half_replicas = 0;
  GangShape(std::max(gpus / 2, 1), per_node, &half_replicas, per_replica);
  *replicas = gpus / *per_replica;
}

namespace {

// Efficiency at g GPUs: 1 / (1 + a log2 g), `a` fitted to one published point per family.
struct Family {
  const char* name;
  double a;
};
constexpr Family kFamilies[kModelFamilies] = {
    // ResNet-101 and Inception V3 under Horovod: 90% at 512 GPUs (128 servers of 4 P100, 25 Gbit/s
    // RoCE; Horovod's benchmarks page): 1 / (1 + 9a) = 0.90.
    {"resnet", (1 / 0.90 - 1) / 9},
    // VGG-16 there: 68% at 512 GPUs.
    {"vgg", (1 / 0.68 - 1) / 9},
    // A small model on one host: the trainer's mlp at 4 t4 GPUs, 89.4% (the study in
    // docs/ringctl.md): 1 / (1 + 2a) = 0.894.
    {"mlp", (1 / 0.894 - 1) / 2},
};

}  // namespace

const char* FamilyName(int family) { return kFamilies[family % kModelFamilies].name; }

double FamilyThroughput(int family, int32_t gpus) {
  if (gpus <= 0) return 0;
  return gpus / (1 + kFamilies[family % kModelFamilies].a * std::log2(static_cast<double>(gpus)));
}

Worker SimNode(int n, int32_t gpus_per_node) {
  Worker w;
  w.id = absl::StrCat("n", n);
  w.address = "10.0.0.1";
  for (int g = 0; g < gpus_per_node; ++g) w.gpus.push_back(Gpu{g, "gpu", 0, true});
  return w;
}

int64_t WorkKept(int64_t ran, int64_t checkpoint_interval_s) {
  return checkpoint_interval_s > 0 ? ran / checkpoint_interval_s * checkpoint_interval_s : 0;
}

void Summarize(const std::vector<double>& jct, const std::vector<double>& queued, SimReport* r) {
  r->jobs = static_cast<int64_t>(jct.size());
  r->avg_jct_s = Mean(jct);
  r->p50_jct_s = Percentile(jct, 0.5);
  r->p99_jct_s = Percentile(jct, 0.99);
  r->avg_queue_s = Mean(queued);
  r->p50_queue_s = Percentile(queued, 0.5);
  r->p99_queue_s = Percentile(queued, 0.99);
}

absl::StatusOr<int64_t> ParseTime(const std::string& text) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%d %H:%M:%S", text, absl::UTCTimeZone(), &t, &err)) {
    return absl::InvalidArgumentError(absl::StrCat("time '", text, "': ", err));
  }
  return absl::ToUnixSeconds(t);
}

absl::StatusOr<std::vector<TraceJob>> ParsePhillyCsv(std::istream& in) {
  std::vector<TraceJob> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    absl::string_view row = absl::StripAsciiWhitespace(line);
    if (row.empty()) continue;
    if (n == 1) {
      if (row != "timestamp,duration,num_gpus,gpu_time,cluster") {
        return absl::InvalidArgumentError(
            absl::StrCat("line 1: expected the header timestamp,duration,num_gpus,gpu_time,"
                         "cluster, got '",
                         row, "'"));
      }
      continue;
    }
    std::vector<std::string> cols = absl::StrSplit(row, ',');
    auto bad = [&](const char* column, const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("line ", n, ": ", column, ": ", why));
    };
    if (cols.size() != 5) return bad("row", absl::StrCat("5 columns expected, got ", cols.size()));
    TraceJob job;
    auto t = ParseTime(cols[0]);
    if (!t.ok()) return bad("timestamp", std::string(t.status().message()));
    job.submit_s = *t;
    double duration = 0;
    if (!absl::SimpleAtod(cols[1], &duration) || !(duration >= 0) || duration > 1e9) {
      return bad("duration",
                 absl::StrCat("a number of seconds 0..1e9 expected, got '", cols[1], "'"));
    }
    job.duration_s = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(duration)));
    if (!absl::SimpleAtoi(cols[2], &job.gpus) || job.gpus < 1 || job.gpus > 4096) {
      return bad("num_gpus", absl::StrCat("an integer 1..4096 expected, got '", cols[2], "'"));
    }
    if (cols[4].empty()) return bad("cluster", "empty");
    job.vc = cols[4];
    out.push_back(std::move(job));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  return out;
}

absl::StatusOr<std::map<std::string, int32_t>> ParseVcSizes(std::istream& in) {
  std::map<std::string, int32_t> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    absl::string_view row = absl::StripAsciiWhitespace(line);
    if (n == 1 || row.empty()) continue;
    std::vector<std::string> cols = absl::StrSplit(row, ',');
    int32_t nodes = 0;
    if (cols.size() != 2 || cols[0].empty() || !absl::SimpleAtoi(cols[1], &nodes) || nodes < 1 ||
        nodes > 100000) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", n, ": expected 'vc,nodes' with nodes 1..100000, got '", row, "'"));
    }
    out[cols[0]] = nodes;
  }
  return out;
}

SimReport Replay(const std::vector<TraceJob>& trace, const std::map<std::string, int32_t>& vcs,
                 const SimOptions& options) {
  SimReport report;
  std::map<std::string, Queue> queues;
  ClusterState cluster;
  int node = 0;
  for (const auto& [vc, nodes] : vcs) {
    Queue q;
    q.name = vc;
    q.cohort = options.sharing ? "philly" : "";
    q.quotas["gpu"] =
        ResourceQuota{int64_t{nodes} * options.gpus_per_node, std::nullopt, std::nullopt};
    q.reclaim_within_cohort =
        options.sharing ? ReclaimWithinCohort::kAny : ReclaimWithinCohort::kNever;
    queues[vc] = q;
    report.queues[vc].nominal_gpus = nodes * options.gpus_per_node;
    for (int i = 0; i < nodes; ++i, ++node)
      cluster.UpsertWorker(SimNode(node, options.gpus_per_node));
    report.total_gpus += int64_t{nodes} * options.gpus_per_node;
  }

  struct SimJob {
    double remaining_s = 0;  // work left, in seconds at the GPUs the job asked for
    int64_t pending_since_s = 0;
    int64_t queued_s = 0;
    int64_t run_started_s = 0;
    int64_t gpu_seconds = 0;
    int32_t generation = 0;  // bumps when a run ends early: stale completions are ignored
    bool stopping = false;
    double rate = 1;         // work per second at the size it runs at
    int64_t restart_s = 0;   // time at the start of this run without progress (a resize's)
    bool within_nominal = false;  // its queue was within nominal, with it, at submit
    std::vector<RankPlacement> resize_to;  // set while it stops to restart at another size
  };
  std::vector<Job> jobs;
  std::vector<SimJob> state;
  ElasticInput elastic;
  IdleTracker idle(options.policy.elastic.idle_delay_ms);
  for (const TraceJob& t : trace) {
    if (!queues.count(t.vc)) continue;
    Job job;
    job.id = absl::StrCat(jobs.size());
    job.seq = static_cast<int64_t>(jobs.size());
    job.created_at_ms = t.submit_s * 1000;
    job.spec.queue = t.vc;
    GangShape(t.gpus, options.gpus_per_node, &job.spec.replicas, &job.spec.gpus_per_replica);
    if (options.elastic && t.gpus >= 2) {
      ElasticShape(t.gpus, options.gpus_per_node, &job.spec.replicas, &job.spec.gpus_per_replica);
      job.spec.min_replicas = std::max(1, job.spec.replicas / 2);
      job.spec.max_replicas = job.spec.replicas * 2;
      // Never more GPUs than the cluster has.
      while (int64_t{job.spec.max_replicas} * job.spec.gpus_per_replica > report.total_gpus) {
        --job.spec.max_replicas;
      }
      job.spec.max_replicas = std::max(job.spec.max_replicas, job.spec.replicas);
      const int family = static_cast<int>(jobs.size() % kModelFamilies);
      std::vector<double>& curve = elastic.throughput[job.id];
      for (int32_t n = 0; n <= job.spec.max_replicas; ++n) {
        curve.push_back(FamilyThroughput(family, n * job.spec.gpus_per_replica));
      }
      ++report.elastic_jobs;
    }
    job.spec.gpu_type = "gpu";
    if (options.runtime_limit_round_s > 0) {
      const int64_t r = options.runtime_limit_round_s;
      job.spec.max_runtime_seconds = (t.duration_s + r - 1) / r * r;
    }
    jobs.push_back(std::move(job));
    SimJob s;
    s.remaining_s = static_cast<double>(t.duration_s);
    s.pending_since_s = t.submit_s;
    state.push_back(std::move(s));
  }
  std::vector<const TraceJob*> source;
  for (const TraceJob& t : trace) {
    if (queues.count(t.vc)) source.push_back(&t);
  }
  if (jobs.empty()) return report;
  // Queues by number, in name order, for what runs over every pending job each pass.
  const std::string kGpu = "gpu";
  std::vector<std::string> queue_names;
  std::vector<int64_t> nominal_of;
  for (const auto& [name, q] : queues) {
    queue_names.push_back(name);
    nominal_of.push_back(report.queues[name].nominal_gpus);
  }
  std::vector<size_t> queue_of;
  for (const Job& job : jobs) {
    queue_of.push_back(static_cast<size_t>(
        std::lower_bound(queue_names.begin(), queue_names.end(), job.spec.queue) -
        queue_names.begin()));
  }
  std::vector<bool> borrowing(queue_names.size());
  std::vector<int64_t> taken(queue_names.size());

  // (time, kind, job, generation): kind 0 = a run ends, 1 = a preempted job has stopped, 2 = a
  // resized job has stopped (it restarts at its new size), 3 = GPUs may have been idle long
  // enough to grow into (no job).
  using Event = std::tuple<int64_t, int, size_t, int32_t>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  IndexSet pending(jobs.size()), placed(jobs.size());
  PassInput input;
  input.queues = &queues;
  if (options.elastic) input.elastic = &elastic;
  PolicyOptions policy = options.policy;
  policy.explain = false;  // nobody reads the reasons here
  // The pass's own input holds the jobs stopping and the claims: no copy of them each pass.
  std::set<std::string>& stopping = input.stopping;
  std::map<std::string, std::set<std::string>> preempting;  // preemptor -> victims stopping
  // Where each preemptor will start; `ripe`: its victims are gone, one more pass to start it.
  // A growing job's new GPUs are held here under its id until it restarts.
  std::map<std::string, std::vector<RankPlacement>>& claims = input.claims;
  std::set<std::string> ripe;
  std::vector<double> jct, queued, queued_within;
  int64_t longest_32 = 0;
  std::map<size_t, int64_t> refused_since;  // job -> since when
  const int64_t first_submit = source.front()->submit_s;
  int64_t last_end = first_submit;
  size_t next_arrival = 0;
  int64_t used_gpu_seconds = 0;
  std::map<std::string, int64_t> queue_used;  // GPUs placed per queue
  int64_t wake_at = INT64_MAX;                // the next kind 3 event queued

  auto gpus_of = [&](size_t i) {
    return static_cast<int64_t>(jobs[i].placement.size()) * jobs[i].spec.gpus_per_replica;
  };
  auto end_of = [&](size_t i) {
    const SimJob& s = state[i];
    return s.run_started_s + s.restart_s +
           static_cast<int64_t>(std::ceil(s.remaining_s / s.rate - 1e-9));
  };
  auto start_run = [&](size_t i, int64_t now, std::vector<RankPlacement> ranks, int64_t restart) {
    SimJob& s = state[i];
    jobs[i].placement = std::move(ranks);
    jobs[i].state = JobState::kRunning;
    jobs[i].started_at_ms = now * 1000;
    jobs[i].last_checkpoint_time_ms = 0;
    queue_used[jobs[i].spec.queue] += gpus_of(i);
    s.run_started_s = now;
    s.restart_s = restart;
    s.rate = 1;
    if (auto c = elastic.throughput.find(jobs[i].id); c != elastic.throughput.end()) {
      s.rate = Throughput(&c->second, static_cast<int32_t>(jobs[i].placement.size())) /
               Throughput(&c->second, jobs[i].spec.replicas);
    }
    placed.insert(i);
    events.push({end_of(i), 0, i, s.generation});
  };
  // Ends the current run: its GPU-time is counted and its GPUs released. Unless it completed,
  // it keeps the work up to its last checkpoint; what it ran past that is returned (GPU-s).
  auto end_run = [&](size_t i, int64_t now, bool completed) -> double {
    SimJob& s = state[i];
    const int64_t ran = now - s.run_started_s;
    const int64_t gpus = gpus_of(i);
    s.gpu_seconds += ran * gpus;
    used_gpu_seconds += ran * gpus;
    report.queues[jobs[i].spec.queue].gpu_seconds += static_cast<double>(ran * gpus);
    queue_used[jobs[i].spec.queue] -= gpus;
    cluster.Release(jobs[i].placement);
    jobs[i].placement.clear();
    placed.erase(i);
    ++s.generation;
    if (completed) return 0;
    // The restart's own time is counted by the resize that caused it.
    const int64_t progress = std::max<int64_t>(0, ran - s.restart_s);
    const int64_t kept = WorkKept(progress, options.checkpoint_interval_s);
    s.remaining_s -= std::min(static_cast<double>(kept) * s.rate, s.remaining_s - 1);
    return static_cast<double>((progress - kept) * gpus);
  };
  auto finish_run = [&](size_t i, int64_t now, bool completed) {
    SimJob& s = state[i];
    const double lost = end_run(i, now, completed);
    if (completed) {
      jobs[i].state = JobState::kSucceeded;
      jct.push_back(static_cast<double>(now - source[i]->submit_s));
      queued.push_back(static_cast<double>(s.queued_s));
      if (s.within_nominal) queued_within.push_back(static_cast<double>(s.queued_s));
      if (source[i]->gpus >= 32) longest_32 = std::max(longest_32, s.queued_s);
      last_end = std::max(last_end, now);
      return;
    }
    // Preempted: keep the work up to the last checkpoint.
    report.lost_gpu_seconds += lost;
    jobs[i].state = JobState::kPending;
    s.pending_since_s = now;
    pending.insert(i);
  };
  // GPUs idle now: neither allocated nor claimed.
  auto idle_gpus = [&]() {
    const auto totals = cluster.GpuTotals();
    auto t = totals.find("gpu");
    int64_t idle = t == totals.end() ? 0 : t->second.total - t->second.allocated;
    for (const auto& [id, ranks] : claims) {
      for (const RankPlacement& r : cluster.FreePart(ranks)) idle -= r.gpu_indices.size();
    }
    return idle;
  };

  while (next_arrival < jobs.size() || !events.empty()) {
    int64_t now = next_arrival < jobs.size() ? source[next_arrival]->submit_s : INT64_MAX;
    if (!events.empty()) now = std::min(now, std::get<0>(events.top()));
    while (next_arrival < jobs.size() && source[next_arrival]->submit_s == now) {
      pending.insert(next_arrival);
      state[next_arrival].pending_since_s = now;
      const std::string& q = jobs[next_arrival].spec.queue;
      state[next_arrival].within_nominal =
          queue_used[q] + source[next_arrival]->gpus <= report.queues[q].nominal_gpus;
      ++report.queues[q].jobs;
      report.queues[q].demand_gpu_seconds +=
          static_cast<double>(source[next_arrival]->duration_s) * source[next_arrival]->gpus;
      ++next_arrival;
    }
    while (!events.empty() && std::get<0>(events.top()) == now) {
      auto [t, kind, i, generation] = events.top();
      events.pop();
      if (kind == 3) {
        wake_at = INT64_MAX;
        continue;
      }
      if (generation != state[i].generation) continue;
      if (kind == 0) {
        finish_run(i, now, true);
        claims.erase(jobs[i].id);  // a growth that never happened
        // A victim that ended by itself before its grace ran out frees its preemptor too.
      } else if (kind == 1) {
        finish_run(i, now, false);
      } else {
        // A resize: the run stops, losing the work since its checkpoint, and starts again at
        // once on its new GPUs, after the restart.
        report.resize_lost_gpu_seconds += end_run(i, now, false);
        std::vector<RankPlacement> to = std::move(state[i].resize_to);
        state[i].resize_to.clear();
        claims.erase(jobs[i].id);
        if (!cluster.Allocate(to).ok()) {
          ++report.over_allocations;
          pending.insert(i);
          jobs[i].state = JobState::kPending;
          state[i].pending_since_s = now;
        } else {
          start_run(i, now, std::move(to), options.resize_restart_s);
          // The restart holds the GPUs without progress: counted with the resize's loss.
          report.resize_lost_gpu_seconds +=
              static_cast<double>(options.resize_restart_s * gpus_of(i));
        }
      }
      if (state[i].stopping) {
        state[i].stopping = false;
        stopping.erase(jobs[i].id);
        for (auto it = preempting.begin(); it != preempting.end();) {
          it->second.erase(jobs[i].id);
          if (it->second.empty()) ripe.insert(it->first);
          it = it->second.empty() ? preempting.erase(it) : std::next(it);
        }
      }
    }

    int64_t settled = 0;
    if (options.elastic) {
      idle.Observe("gpu", now * 1000, idle_gpus());
      settled = idle.Settled("gpu", now * 1000);
      elastic.settled_idle["gpu"] = settled;
      // The checkpoints each running job has taken, for what a resize would lose.
      for (size_t i : placed) {
        const SimJob& s = state[i];
        const int64_t ran = now - s.run_started_s - s.restart_s;
        if (ran >= options.checkpoint_interval_s && options.checkpoint_interval_s > 0) {
          jobs[i].last_checkpoint_time_ms =
              (s.run_started_s + s.restart_s + WorkKept(ran, options.checkpoint_interval_s)) *
              1000;
        }
      }
    }
    // Nothing waits and nothing could grow: a pass could only say so (the service runs it
    // anyway; here it is most of the replay's passes at a light load).
    if (pending.empty() && settled <= 0) {
      refused_since.clear();
      continue;
    }
    input.now_ms = now * 1000;
    input.pending.clear();
    input.placed.clear();
    for (size_t i : pending) input.pending.push_back(&jobs[i]);
    for (size_t i : placed) input.placed.push_back(&jobs[i]);
    PassResult r = SchedulePass(input, cluster, policy);
    for (const std::string& id : ripe) claims.erase(id);  // started now, or never on these GPUs
    ripe.clear();
    for (auto& [id, ranks] : r.claims) claims[id] = std::move(ranks);
    ++report.passes;

    for (const auto& p : r.preemptions) {
      const size_t v = static_cast<size_t>(std::stoll(p.job_id));
      state[v].stopping = true;
      stopping.insert(p.job_id);
      preempting[p.by_job_id].insert(p.job_id);
      ++report.preemptions;
      ++report.queues[jobs[v].spec.queue].preempted;
      // Stops after the grace period, unless it finishes first (its end event comes sooner).
      if (end_of(v) > now + options.grace_s)
        events.push({now + options.grace_s, 1, v, state[v].generation});
    }
    for (const auto& z : r.resizes) {
      const size_t v = static_cast<size_t>(std::stoll(z.job_id));
      state[v].stopping = true;
      state[v].resize_to = z.ranks;
      stopping.insert(z.job_id);
      elastic.resized_at_ms[z.job_id].push_back(now * 1000);
      ++report.resizes;
      if (z.to > z.from) ++report.grows;
      if (!z.by_job_id.empty()) {
        preempting[z.by_job_id].insert(z.job_id);
      } else {
        claims[z.job_id] = z.ranks;
      }
      if (end_of(v) > now + options.grace_s) {
        events.push({now + options.grace_s, 2, v, state[v].generation});
      }
    }
    for (const auto& s : r.starts) {
      const size_t i = static_cast<size_t>(std::stoll(s.job_id));
      claims.erase(s.job_id);
      const JobSpec& spec = jobs[i].spec;
      const int32_t n = static_cast<int32_t>(s.ranks.size());
      if (IsElastic(spec) ? !IsElasticSize(spec, n) : n != spec.replicas) {
        ++report.partial_gangs;
      }
      if (!cluster.Allocate(s.ranks).ok()) {
        ++report.over_allocations;
        continue;
      }
      SimJob& st = state[i];
      st.queued_s += now - st.pending_since_s;
      pending.erase(i);
      start_run(i, now, s.ranks, 0);
    }
    if (options.elastic) {
      // GPUs left idle: wake when they have been idle for the delay, to grow into them.
      const int64_t now_idle = idle_gpus();
      idle.Observe("gpu", now * 1000, now_idle);
      if (now_idle > idle.Settled("gpu", now * 1000)) {
        const int64_t rise_ms = idle.NextRise("gpu", now * 1000);
        if (rise_ms != INT64_MAX) {
          const int64_t wake = (rise_ms + 999) / 1000;
          if (wake < wake_at) {
            wake_at = wake;
            events.push({wake, 3, 0, 0});
          }
        }
      }
    }

    // Promised share: a pending job that fits its queue's unused nominal quota while another
    // queue borrows is being refused what its queue was promised. How long, per job?
    // Per queue by number (queue_of), not by name: this runs over every pending job each pass.
    size_t borrowers = 0;
    for (size_t q = 0; q < queue_names.size(); ++q) {
      borrowing[q] = r.ledger.Borrowing(queue_names[q], kGpu);
      borrowers += borrowing[q] ? 1 : 0;
    }
    std::map<size_t, int64_t> still_refused;
    if (borrowers > 0) {
      // Use of each queue, and GPUs that its preempting jobs have claimed: they start when
      // their victims stop.
      for (size_t q = 0; q < queue_names.size(); ++q) {
        taken[q] = r.ledger.Used(queue_names[q], kGpu) / QuotaScale(kGpu);  // whole GPUs
      }
      for (const auto& [id, victims] : preempting) {
        const size_t p = static_cast<size_t>(std::stoll(id));
        taken[queue_of[p]] += int64_t{jobs[p].spec.replicas} * jobs[p].spec.gpus_per_replica;
      }
      for (size_t i : pending) {
        const size_t q = queue_of[i];
        const int64_t gpus = preempting.count(jobs[i].id)
                                 ? 0
                                 : int64_t{jobs[i].spec.replicas} * jobs[i].spec.gpus_per_replica;
        if (taken[q] + gpus > nominal_of[q]) continue;
        if (borrowers == 1 && borrowing[q]) continue;
        auto it = refused_since.find(i);
        const int64_t since = it == refused_since.end() ? now : it->second;
        still_refused[i] = since;
        auto& longest = report.queues[queue_names[q]].longest_refused_s;
        longest = std::max(longest, now - since);
      }
    }
    refused_since = std::move(still_refused);
  }

  Summarize(jct, queued, &report);
  {
    std::vector<double> within = queued_within;
    std::sort(within.begin(), within.end());
    if (!within.empty()) {
      report.p99_queue_within_nominal_s =
          within[std::min(within.size() - 1,
                          static_cast<size_t>(std::ceil(0.99 * within.size())) - 1)];
    }
  }
  report.longest_wait_32plus_s = longest_32;
  const double span = static_cast<double>(std::max<int64_t>(1, last_end - first_submit));
  report.utilisation = static_cast<double>(used_gpu_seconds) / (report.total_gpus * span);
  for (const auto& [name, q] : report.queues) {
    report.longest_refused_s = std::max(report.longest_refused_s, q.longest_refused_s);
  }
  return report;
}

}  // namespace ringmaster::scheduler::sim
