// End-to-end placement throughput: a backlog of gang jobs is submitted to a running scheduler,
// then W simulated workers (8 t4 GPUs each, the real worker protocol over gRPC) connect and
// the clock starts. Every worker reports its ranks STARTED and EXITED 0 as soon as its
// Assignment arrives, so the backlog flows through. A job counts as placed when every worker of
// its gang has its Assignment (the placement was stored in Postgres before any was sent).
// Baseline in the same run: core placement (ClusterState::Place) of the same job mix on the
// same cluster in process. Driven by bench/placement_e2e_bench.sh, which starts the servers.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench_worker.h"
#include "ringmaster/v1/job.grpc.pb.h"
#include "scheduler/core/placement.h"
#include "worker/host/file_io.h"

using Clock = std::chrono::steady_clock;
using ringmaster::bench::BenchWorker;
namespace core = ringmaster::scheduler;
namespace v1 = ringmaster::v1;
namespace worker = ringmaster::worker;

namespace {

constexpr int kGpusPerWorker = 8;
constexpr int kSubmitClients = 64;
constexpr int kWorkersPerChannel = 50;
// What the script passes as --heartbeat-interval-ms.
constexpr int kHeartbeatIntervalMs = 2000;

double Since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

// The job mix of bench/placement_bench.cc (1 to 64 GPUs, ranks of 1, 2, 4 or 8 GPUs), all t4.
// `whole_workers` (a diagnostic): every rank takes 8 GPUs, jobs round up to a multiple of 8, so
// the same GPUs move with about a fifth of the rank reports.
std::vector<core::GangRequest> MakeJobs(int n, uint64_t seed, bool whole_workers) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> total(1, 64);
  std::vector<core::GangRequest> jobs;
  for (int i = 0; i < n; ++i) {
    int gpus = total(rng);
    int per_rank = gpus % 8 == 0 ? 8 : gpus % 4 == 0 ? 4 : gpus % 2 == 0 ? 2 : 1;
    if (whole_workers) {
      per_rank = 8;
      gpus = (gpus + 7) / 8 * 8;
    }
    jobs.push_back({gpus / per_rank, per_rank, "t4"});
  }
  return jobs;
}

// Core placement alone, as in bench/placement_bench.cc: jobs in order, a job that does not fit
// waits while the oldest running jobs finish. Returns jobs placed per second of Place() time.
double CoreRate(int workers, const std::vector<core::GangRequest>& jobs, double* wall_s) {
  core::ClusterState cluster;
  for (int w = 0; w < workers; ++w) {
    core::Worker worker;
    worker.id = absl::StrCat("w", w);
    worker.address = "127.0.0.1";
    worker.port = 7071;
    for (int g = 0; g < kGpusPerWorker; ++g) worker.gpus.push_back({g, "t4", 16LL << 30, true});
    cluster.UpsertWorker(worker);
  }
  std::deque<std::vector<core::RankPlacement>> running;
  double place_s = 0;
  auto wall0 = Clock::now();
  for (const core::GangRequest& job : jobs) {
    while (true) {
      auto t0 = Clock::now();
      core::PlacementDecision d = cluster.Place(job);
      place_s += Since(t0, Clock::now());
      if (d.kind == core::PlacementDecision::Kind::kPlaced) {
        if (!cluster.Allocate(d.ranks).ok()) return 0;
        running.push_back(std::move(d.ranks));
        break;
      }
      if (running.empty()) return 0;
      cluster.Release(running.front());
      running.pop_front();
    }
  }
  *wall_s = Since(wall0, Clock::now());
  return static_cast<double>(jobs.size()) / place_s;
}

// Which workers got which job's Assignment, and when each job was fully delivered.
class Deliveries {
 public:
  explicit Deliveries(Clock::time_point t0) : t0_(t0) {}
  void Record(const std::string& worker_id, const v1::Assignment& a) {
    auto now = Clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    Gang& g = gangs_[absl::StrCat(a.job_id(), "/", a.attempt())];
    if (g.expected == 0) {
      std::set<std::string> workers;
      for (const auto& r : a.placement()) workers.insert(r.worker_id());
      g.expected = static_cast<int>(workers.size());
      job_ids_.insert(a.job_id());
    }
    if (!g.got.insert(worker_id).second) ++duplicates_;
    if (static_cast<int>(g.got.size()) == g.expected) {
      placed_at_.push_back(Since(t0_, now));
      cv_.notify_all();
    }
  }
  // Waits until `n` gangs were delivered or `timeout_s` passed; the number delivered.
  size_t WaitPlaced(size_t n, double timeout_s) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                 [&] { return placed_at_.size() >= n; });
    return placed_at_.size();
  }
  std::vector<double> placed_at() {
    std::lock_guard<std::mutex> lock(mu_);
    return placed_at_;
  }
  size_t distinct() {
    std::lock_guard<std::mutex> lock(mu_);
    return gangs_.size();
  }
  int duplicates() {
    std::lock_guard<std::mutex> lock(mu_);
    return duplicates_;
  }
  // Job attempts beyond the first of each job (a restart would show here).
  size_t retries() {
    std::lock_guard<std::mutex> lock(mu_);
    return gangs_.size() - job_ids_.size();
  }

 private:
  struct Gang {
    int expected = 0;
    std::set<std::string> got;
  };
  const Clock::time_point t0_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Gang> gangs_;  // by job id and attempt
  std::set<std::string> job_ids_;
  std::vector<double> placed_at_;  // seconds after t0, in delivery order
  int duplicates_ = 0;
};

std::shared_ptr<grpc::Channel> NewChannel(const std::string& addr, int i) {
  // Distinct arguments give each channel its own connection.
  grpc::ChannelArguments args;
  args.SetInt("ringmaster.bench_channel", i);
  return grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args);
}

bool Submit(const std::string& addr, const std::vector<core::GangRequest>& jobs, double* rate) {
  std::atomic<size_t> next{0};
  std::atomic<int> errors{0};
  std::string run = absl::StrCat(std::chrono::system_clock::now().time_since_epoch().count());
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  for (int c = 0; c < kSubmitClients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = v1::JobService::NewStub(NewChannel(addr, 100000 + c % 8));
      for (size_t i = next++; i < jobs.size(); i = next++) {
        grpc::ClientContext ctx;
        v1::SubmitJobRequest req;
        req.set_request_id(absl::StrCat("e2e-", run, "-", i));
        v1::JobSpec* spec = req.mutable_spec();
        spec->set_name(absl::StrCat("e2e-", i));
        spec->set_replicas(jobs[i].replicas);
        spec->set_gpus_per_replica(jobs[i].gpus_per_replica);
        spec->set_gpu_type(jobs[i].gpu_type);
        spec->mutable_trainer()->set_steps(10);
        v1::SubmitJobResponse resp;
        grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
        if (!s.ok()) {
          if (errors++ < 5) std::fprintf(stderr, "submit %zu: %s\n", i, s.error_message().c_str());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  *rate = static_cast<double>(jobs.size()) / Since(t0, Clock::now());
  return errors == 0;
}

// What Postgres did for the scheduler's database: transactions committed (the writer's batches
// and the few reads), rows written, and WAL flushes with their time (track_wal_io_timing).
struct PgActivity {
  long commits = 0, inserted = 0, updated = 0, deleted = 0, wal_syncs = 0;
  double wal_sync_ms = 0;
};

PgActivity ReadPgActivity(const std::string& url) {
  PgActivity a;
  pqxx::connection conn(url);
  pqxx::nontransaction tx(conn);
  auto db = tx.exec1("SELECT xact_commit, tup_inserted, tup_updated, tup_deleted "
                     "FROM pg_stat_database WHERE datname = current_database()");
  a.commits = db[0].as<long>();
  a.inserted = db[1].as<long>();
  a.updated = db[2].as<long>();
  a.deleted = db[3].as<long>();
  auto wal = tx.exec1("SELECT wal_sync, wal_sync_time FROM pg_stat_wal");
  a.wal_syncs = wal[0].as<long>();
  a.wal_sync_ms = wal[1].as<double>();
  return a;
}

// Seconds on a CPU of every thread of `pid` alive now, by thread id, with its name. From
// schedstat (nanoseconds): the per-thread utime/stime ticks of /proc/PID/task/TID/stat miss most
// of the time of threads that run in short bursts between ticks.
std::map<int, std::pair<std::string, double>> ThreadCpu(int pid) {
  std::map<int, std::pair<std::string, double>> out;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    int tid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &tid)) continue;
    // A thread that ends meanwhile reads as an error, not a throw (host/file_io.h).
    auto sched = worker::ReadFileToString(entry.path() / "schedstat", 4096);
    auto comm = worker::ReadFileToString(entry.path() / "comm", 4096);
    double ns = 0;
    if (!sched.ok() || !comm.ok() || comm->empty()) continue;
    std::vector<std::string> words = absl::StrSplit(*sched, ' ', absl::SkipEmpty());
    if (words.empty() || !absl::SimpleAtod(words[0], &ns)) continue;
    out[tid] = {std::string(absl::StripTrailingAsciiWhitespace(*comm)), ns / 1e9};
  }
  return out;
}

long ProcessTicks(int pid) {
  const std::string stat =
      worker::ReadFileToString(absl::StrCat("/proc/", pid, "/stat"), 4096).value_or("");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;  // gone
  std::istringstream rest(stat.substr(paren + 1));
  std::string field;
  long ticks = 0;
  for (int i = 3; rest >> field && i <= 15; ++i) {
    if (i == 14 || i == 15) ticks += std::stol(field);
  }
  return ticks;
}

std::map<std::string, long> StatesInPostgres(const std::string& url) {
  std::map<std::string, long> states;
  pqxx::connection conn(url);
  pqxx::work tx(conn);
  for (const auto& row : tx.exec("SELECT state, count(*) FROM jobs GROUP BY state")) {
    states[row[0].as<std::string>()] = row[1].as<long>();
  }
  return states;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: placement_e2e_bench SCHEDULER_ADDR POSTGRES_URL WORKERS JOBS "
                         "SCHEDULER_PID MARKER\n(MARKER: a file made to exist while jobs are "
                         "being placed)\n");
    return 2;
  }
  const std::string addr = argv[1], url = argv[2];
  int workers = 0, n = 0, pid = 0;
  if (!absl::SimpleAtoi(argv[3], &workers) || !absl::SimpleAtoi(argv[4], &n) || workers < 8 ||
      n < 1 || !absl::SimpleAtoi(argv[5], &pid)) {
    std::fprintf(stderr, "WORKERS must be at least 8 (a 64-GPU gang), JOBS positive\n");
    return 2;
  }
  const char* whole = std::getenv("RINGMASTER_BENCH_WHOLE_WORKER_RANKS");
  const bool whole_workers = whole != nullptr && std::string(whole) == "1";
  std::vector<core::GangRequest> jobs = MakeJobs(n, 42, whole_workers);
  long gpus = 0, ranks = 0;
  for (const auto& j : jobs) {
    gpus += j.replicas * j.gpus_per_replica;
    ranks += j.replicas;
  }

  double core_wall = 0;
  const double core_rate = CoreRate(workers, jobs, &core_wall);

  double submit_rate = 0;
  if (!Submit(addr, jobs, &submit_rate)) return 1;
  std::printf("placement e2e benchmark: %d workers x %d t4 GPUs, %d gang jobs of 1-64 GPUs "
              "(%ld GPUs, %ld ranks in all%s)\n", workers, kGpusPerWorker, n, gpus, ranks,
              whole_workers ? "; diagnostic mix: every rank 8 GPUs" : "");
  std::printf("  backlog submitted:           %.0f jobs/s (%d clients)\n", submit_rate,
              kSubmitClients);

  // The clock starts as the first worker connects: registrations are part of the run.
  const std::string marker = argv[6];
  std::fclose(std::fopen(marker.c_str(), "w"));
  const PgActivity pg_before = ReadPgActivity(url);
  const auto threads_before = ThreadCpu(pid);
  const long ticks_before = ProcessTicks(pid);
  const long own_ticks_before = ProcessTicks(getpid());
  const auto t0 = Clock::now();
  Deliveries deliveries(t0);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs;
  for (int c = 0; c * kWorkersPerChannel < workers; ++c) {
    channels.push_back(NewChannel(addr, c));
    stubs.push_back(v1::WorkerService::NewStub(channels.back()));
  }
  std::vector<std::unique_ptr<BenchWorker>> fleet;
  for (int w = 0; w < workers; ++w) {
    fleet.push_back(std::make_unique<BenchWorker>(
        stubs[w / kWorkersPerChannel].get(), absl::StrCat("bench-w", w), kGpusPerWorker, "t4",
        [&](const std::string& id, const v1::Assignment& a) { deliveries.Record(id, a); }));
  }
  int registered = 0;
  for (auto& w : fleet) registered += w->WaitRegistered();
  const double all_registered_s = Since(t0, Clock::now());

  std::atomic<bool> stop{false};
  std::thread heartbeats([&] {
    while (!stop) {
      for (auto& w : fleet) w->Heartbeat();
      for (int i = 0; i < kHeartbeatIntervalMs / 100 && !stop; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });

  const size_t placed = deliveries.WaitPlaced(jobs.size(), 150);
  std::vector<double> at = deliveries.placed_at();
  const long ticks_after = ProcessTicks(pid);
  const long own_ticks_after = ProcessTicks(getpid());
  const auto threads_after = ThreadCpu(pid);
  const PgActivity pg_after = ReadPgActivity(url);
  std::remove(marker.c_str());

  // Every job SUCCEEDED in Postgres (the last rank reports are still being stored).
  std::map<std::string, long> states;
  auto pg0 = Clock::now();
  while (Since(pg0, Clock::now()) < 30) {
    states = StatesInPostgres(url);
    if (states["SUCCEEDED"] >= n) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const double succeeded_s = Since(t0, Clock::now());
  stop = true;
  heartbeats.join();
  for (auto& w : fleet) w->Shutdown();

  std::printf("  workers registered:          %d of %d, all after %.2f s\n", registered, workers,
              all_registered_s);
  if (at.empty()) {
    std::printf("  no job was placed\n");
    return 1;
  }
  const double total_s = at.back();
  const double e2e_rate = static_cast<double>(placed) / total_s;
  auto mark = [&](double f) { return at[std::min(at.size() - 1, static_cast<size_t>(f * at.size()))]; };
  std::printf("  jobs placed and delivered:   %zu of %d (assignments to distinct job attempts: %zu, "
              "duplicates %d, retried attempts %zu)\n", placed, n, deliveries.distinct(),
              deliveries.duplicates(), deliveries.retries());
  std::printf("  time to first placement:     %.3f s after the first worker connected\n", at.front());
  std::printf("  time to last placement:      %.3f s\n", total_s);
  std::printf("  placements per second:       %.0f over the whole backlog; %.0f between the 10%% "
              "and 90%% marks\n", e2e_rate,
              0.8 * static_cast<double>(at.size()) / (mark(0.9) - mark(0.1)));
  std::printf("  delivered by second:        ");
  for (int s = 1; s <= static_cast<int>(total_s) + 1; ++s) {
    std::printf(" %ld", static_cast<long>(std::upper_bound(at.begin(), at.end(), s) - at.begin()));
  }
  std::printf("\n");
  // Placements reach the workers in bursts, one per commit batch that held placements: a gap of
  // 5 ms or more between two deliveries starts a new burst.
  std::vector<double> sizes, gaps;
  size_t burst = 1;
  for (size_t i = 1; i < at.size(); ++i) {
    if (at[i] - at[i - 1] < 0.005) {
      ++burst;
      continue;
    }
    sizes.push_back(static_cast<double>(burst));
    gaps.push_back(at[i] - at[i - 1]);
    burst = 1;
  }
  sizes.push_back(static_cast<double>(burst));
  std::sort(sizes.begin(), sizes.end());
  std::sort(gaps.begin(), gaps.end());
  std::printf("  delivery bursts (gap >= 5 ms): %zu, median %.0f jobs (p90 %.0f); median gap "
              "between bursts %.1f ms (p90 %.1f ms)\n", sizes.size(), sizes[sizes.size() / 2],
              sizes[sizes.size() * 9 / 10], gaps.empty() ? 0 : 1e3 * gaps[gaps.size() / 2],
              gaps.empty() ? 0 : 1e3 * gaps[gaps.size() * 9 / 10]);
  std::printf("  jobs in Postgres by state:  ");
  for (const auto& [state, count] : states) std::printf(" %s %ld", state.c_str(), count);
  std::printf(" (all succeeded %.2f s after the first worker connected)\n", succeeded_s);
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double cpu_s = static_cast<double>(ticks_after - ticks_before) / hz;
  std::printf("  scheduler CPU while placing: %.2f s in %.2f s (%.2f cores), %.2f ms per job\n",
              cpu_s, total_s, cpu_s / total_s, 1e3 * cpu_s / static_cast<double>(placed));
  // The simulated cluster shares the machine: what it takes is not the scheduler's to use.
  const double own_s = static_cast<double>(own_ticks_after - own_ticks_before) / hz;
  std::printf("  simulated workers' CPU:      %.2f s in the same time (%.2f cores), %.2f ms per "
              "job (this process: %d workers' streams and their heartbeats)\n",
              own_s, own_s / total_s, 1e3 * own_s / static_cast<double>(placed), workers);
  std::vector<std::pair<double, std::string>> by_thread;
  double grpc_s = 0, seen_s = 0;
  int grpc_threads = 0;
  for (const auto& [tid, after] : threads_after) {
    auto before = threads_before.find(tid);
    double d = after.second - (before == threads_before.end() ? 0 : before->second.second);
    seen_s += d;
    if (after.first.rfind("grpcpp_sync", 0) == 0) {
      grpc_s += d;
      ++grpc_threads;
      continue;
    }
    by_thread.emplace_back(d, absl::StrCat(tid, " ", after.first));
  }
  std::sort(by_thread.rbegin(), by_thread.rend());
  std::printf("  scheduler threads, CPU while placing:");
  for (size_t i = 0; i < std::min<size_t>(5, by_thread.size()); ++i) {
    std::printf(" [%s] %.2f s;", by_thread[i].second.c_str(), by_thread[i].first);
  }
  std::printf(" %d grpcpp_sync_server threads (RPC handlers, stream readers) %.2f s; threads "
              "gone by the end %.2f s\n", grpc_threads, grpc_s, std::max(0.0, cpu_s - seen_s));
  const long commits = pg_after.commits - pg_before.commits;
  const long syncs = pg_after.wal_syncs - pg_before.wal_syncs;
  std::printf("  Postgres while placing:      %ld commits (%.0f/s), rows inserted %ld, updated %ld, "
              "deleted %ld (%.1f rows per commit); %ld WAL flushes, %.2f ms each on average\n",
              commits, static_cast<double>(commits) / total_s, pg_after.inserted - pg_before.inserted,
              pg_after.updated - pg_before.updated, pg_after.deleted - pg_before.deleted,
              static_cast<double>(pg_after.inserted - pg_before.inserted + pg_after.updated -
                                  pg_before.updated + pg_after.deleted - pg_before.deleted) /
                  static_cast<double>(std::max(1L, commits)),
              syncs, (pg_after.wal_sync_ms - pg_before.wal_sync_ms) /
                         static_cast<double>(std::max(1L, syncs)));
  std::printf("  core alone (Place() in process, same jobs and cluster): %.0f jobs/s (wall with "
              "releases %.3f s)\n", core_rate, core_wall);
  std::printf("  ratio end-to-end / core:     %.3f\n", e2e_rate / core_rate);
  const bool ok = placed == jobs.size() && deliveries.distinct() == jobs.size() &&
                  states["SUCCEEDED"] == n && deliveries.duplicates() == 0;
  std::printf("  cross-check:                 %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
