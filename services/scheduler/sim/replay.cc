#include "sim/replay.h"

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
    int64_t remaining_s = 0;
    int64_t pending_since_s = 0;
    int64_t queued_s = 0;
    int64_t run_started_s = 0;
    int64_t gpu_seconds = 0;
    int32_t generation = 0;  // bumps when a run ends early: stale completions are ignored
    bool stopping = false;
  };
  std::vector<Job> jobs;
  std::vector<SimJob> state;
  for (const TraceJob& t : trace) {
    if (!queues.count(t.vc)) continue;
    Job job;
    job.id = absl::StrCat(jobs.size());
    job.seq = static_cast<int64_t>(jobs.size());
    job.created_at_ms = t.submit_s * 1000;
    job.spec.queue = t.vc;
    GangShape(t.gpus, options.gpus_per_node, &job.spec.replicas, &job.spec.gpus_per_replica);
    job.spec.gpu_type = "gpu";
    if (options.runtime_limit_round_s > 0) {
      const int64_t r = options.runtime_limit_round_s;
      job.spec.max_runtime_seconds = (t.duration_s + r - 1) / r * r;
    }
    jobs.push_back(std::move(job));
    state.push_back({t.duration_s, t.submit_s, 0, 0, 0, 0, false});
  }
  std::vector<const TraceJob*> source;
  for (const TraceJob& t : trace) {
    if (queues.count(t.vc)) source.push_back(&t);
  }
  if (jobs.empty()) return report;

  // (time, kind, job, generation): kind 0 = a run ends, 1 = a preempted job has stopped.
  using Event = std::tuple<int64_t, int, size_t, int32_t>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  IndexSet pending(jobs.size()), placed(jobs.size());
  PassInput input;
  input.queues = &queues;
  PolicyOptions policy = options.policy;
  policy.explain = false;  // nobody reads the reasons here
  // The pass's own input holds the jobs stopping and the claims: no copy of them each pass.
  std::set<std::string>& stopping = input.stopping;
  std::map<std::string, std::set<std::string>> preempting;  // preemptor -> victims stopping
  // Where each preemptor will start; `ripe`: its victims are gone, one more pass to start it.
  std::map<std::string, std::vector<RankPlacement>>& claims = input.claims;
  std::set<std::string> ripe;
  std::vector<double> jct, queued;
  int64_t longest_32 = 0;
  std::map<size_t, int64_t> refused_since;  // job -> since when
  const int64_t first_submit = source.front()->submit_s;
  int64_t last_end = first_submit;
  size_t next_arrival = 0;
  int64_t used_gpu_seconds = 0;

  auto finish_run = [&](size_t i, int64_t now, bool completed) {
    SimJob& s = state[i];
    const int64_t ran = now - s.run_started_s;
    const int64_t gpus = int64_t{jobs[i].spec.replicas} * jobs[i].spec.gpus_per_replica;
    s.gpu_seconds += ran * gpus;
    used_gpu_seconds += ran * gpus;
    report.queues[jobs[i].spec.queue].gpu_seconds += static_cast<double>(ran * gpus);
    cluster.Release(jobs[i].placement);
    jobs[i].placement.clear();
    placed.erase(i);
    ++s.generation;
    if (completed) {
      jobs[i].state = JobState::kSucceeded;
      jct.push_back(static_cast<double>(now - source[i]->submit_s));
      queued.push_back(static_cast<double>(s.queued_s));
      if (gpus >= 32) longest_32 = std::max(longest_32, s.queued_s);
      last_end = std::max(last_end, now);
      return;
    }
    // Preempted: keep the work up to the last checkpoint.
    const int64_t kept = WorkKept(ran, options.checkpoint_interval_s);
    s.remaining_s -= std::min(kept, s.remaining_s - 1);
    report.lost_gpu_seconds += static_cast<double>((ran - kept) * gpus);
    jobs[i].state = JobState::kPending;
    s.pending_since_s = now;
    pending.insert(i);
  };

  while (next_arrival < jobs.size() || !events.empty()) {
    int64_t now = next_arrival < jobs.size() ? source[next_arrival]->submit_s : INT64_MAX;
    if (!events.empty()) now = std::min(now, std::get<0>(events.top()));
    while (next_arrival < jobs.size() && source[next_arrival]->submit_s == now) {
      pending.insert(next_arrival);
      state[next_arrival].pending_since_s = now;
      ++report.queues[jobs[next_arrival].spec.queue].jobs;
      report.queues[jobs[next_arrival].spec.queue].demand_gpu_seconds +=
          static_cast<double>(source[next_arrival]->duration_s) * source[next_arrival]->gpus;
      ++next_arrival;
    }
    while (!events.empty() && std::get<0>(events.top()) == now) {
      auto [t, kind, i, generation] = events.top();
      events.pop();
      if (generation != state[i].generation) continue;
      if (kind == 0) {
        finish_run(i, now, true);
        // A victim that ended by itself before its grace ran out frees its preemptor too.
      } else {
        finish_run(i, now, false);
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

    // Nothing waits: a pass could only say so (the service runs it anyway; here it is most
    // of the replay's passes at a light load).
    if (pending.empty()) {
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
      const int64_t end = state[v].run_started_s + state[v].remaining_s;
      if (end > now + options.grace_s)
        events.push({now + options.grace_s, 1, v, state[v].generation});
    }
    for (const auto& s : r.starts) {
      const size_t i = static_cast<size_t>(std::stoll(s.job_id));
      claims.erase(s.job_id);
      if (static_cast<int32_t>(s.ranks.size()) != jobs[i].spec.replicas) ++report.partial_gangs;
      if (!cluster.Allocate(s.ranks).ok()) {
        ++report.over_allocations;
        continue;
      }
      jobs[i].placement = s.ranks;
      jobs[i].state = JobState::kRunning;
      jobs[i].started_at_ms = now * 1000;
      SimJob& st = state[i];
      st.queued_s += now - st.pending_since_s;
      st.run_started_s = now;
      pending.erase(i);
      placed.insert(i);
      events.push({now + st.remaining_s, 0, i, st.generation});
    }

    // Promised share: a pending job that fits its queue's unused nominal quota while another
    // queue borrows is being refused what its queue was promised. How long, per job?
    std::set<std::string> borrowers;
    for (const auto& [name, q] : queues) {
      if (r.ledger.Borrowing(name, "gpu")) borrowers.insert(name);
    }
    std::map<size_t, int64_t> still_refused;
    if (!borrowers.empty()) {
      // GPUs that the queue's preempting jobs have claimed: they start when their victims stop.
      std::map<std::string, int64_t> claimed;
      for (const auto& [id, victims] : preempting) {
        const Job& p = jobs[static_cast<size_t>(std::stoll(id))];
        claimed[p.spec.queue] += int64_t{p.spec.replicas} * p.spec.gpus_per_replica;
      }
      for (size_t i : pending) {
        const std::string& name = jobs[i].spec.queue;
        const int64_t gpus = preempting.count(jobs[i].id)
                                 ? 0
                                 : int64_t{jobs[i].spec.replicas} * jobs[i].spec.gpus_per_replica;
        if (r.ledger.Used(name, "gpu") + claimed[name] + gpus > report.queues[name].nominal_gpus) {
          continue;
        }
        if (borrowers.size() == 1 && borrowers.count(name)) continue;
        auto it = refused_since.find(i);
        const int64_t since = it == refused_since.end() ? now : it->second;
        still_refused[i] = since;
        auto& longest = report.queues[name].longest_refused_s;
        longest = std::max(longest, now - since);
      }
    }
    refused_since = std::move(still_refused);
  }

  Summarize(jct, queued, &report);
  report.longest_wait_32plus_s = longest_32;
  const double span = static_cast<double>(std::max<int64_t>(1, last_end - first_submit));
  report.utilisation = static_cast<double>(used_gpu_seconds) / (report.total_gpus * span);
  for (const auto& [name, q] : report.queues) {
    report.longest_refused_s = std::max(report.longest_refused_s, q.longest_refused_s);
  }
  return report;
}

}  // namespace ringmaster::scheduler::sim
