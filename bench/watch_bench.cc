// What idle WatchJob streams cost: J jobs that stay PENDING (no workers), then Postgres activity
// on the scheduler's database and the scheduler's CPU time over idle windows, first with no
// watcher and then with one WatchJob stream per job. Then every job is cancelled and each
// watcher must get its CANCELLED event and see its stream end. Driven by bench/watch_bench.sh,
// which starts the servers.
//
// Postgres activity is pg_stat_database's xact_commit and tup_returned of the scheduler's
// database, read over a connection to another database (postgres), so the sampling costs the
// measured database nothing. Backends report these counters with a delay of up to ~10 s
// (PGSTAT_IDLE_INTERVAL), so each phase settles 11 s before its first window.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ringmaster/v1/job.grpc.pb.h"
#include "worker/host/file_io.h"

using Clock = std::chrono::steady_clock;
namespace v1 = ringmaster::v1;
namespace worker = ringmaster::worker;

namespace {

constexpr int kClients = 32;
constexpr int kWatchersPerChannel = 100;
constexpr int kWindows = 3;
constexpr double kWindowS = 10;
constexpr double kSettleS = 11;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& addr, int i) {
  grpc::ChannelArguments args;
  args.SetInt("ringmaster.bench_channel", i);  // distinct arguments: a connection of its own
  return grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args);
}

// Runs op(stub, i) for i in [0, n) on kClients threads; the number of failures.
template <typename Op>
int ForAll(const std::string& addr, int n, Op op) {
  std::atomic<int> next{0}, errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = v1::JobService::NewStub(NewChannel(addr, 100000 + c % 8));
      for (int i = next++; i < n; i = next++) errors += !op(*stub, i);
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// One WatchJob stream.
class Watcher : public grpc::ClientReadReactor<v1::JobEvent> {
 public:
  Watcher(v1::JobService::Stub* stub, const std::string& job_id) {
    req_.set_job_id(job_id);
    stub->async()->WatchJob(&ctx_, &req_, this);
    StartRead(&event_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++events_;
      if (event_.state() == v1::JOB_STATE_CANCELLED) cancelled_ = true;
      cv_.notify_all();
    }
    StartRead(&event_);
  }
  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    status_ = s;
    cv_.notify_all();
  }
  bool WaitFirstEvent(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline, [&] { return events_ > 0 || done_; }) && events_ > 0;
  }
  // True when the CANCELLED event came and the stream ended OK.
  bool WaitCancelledAndEnded(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, deadline, [&] { return done_; });
    return done_ && cancelled_ && status_.ok();
  }
  void Shutdown() {
    ctx_.TryCancel();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  grpc::ClientContext ctx_;
  v1::WatchJobRequest req_;
  v1::JobEvent event_;
  std::mutex mu_;
  std::condition_variable cv_;
  int events_ = 0;
  bool cancelled_ = false;
  bool done_ = false;
  grpc::Status status_;
};

struct Sample {
  Clock::time_point at;
  long xacts = 0;
  long rows = 0;
  double cpu_s = 0;
};

double ProcessCpuSeconds(int pid) {
  // A process that is gone reads as an error, not a throw (host/file_io.h).
  const std::string stat =
      worker::ReadFileToString(absl::StrCat("/proc/", pid, "/stat"), 4096).value_or("");
  // Fields after the command (which may hold spaces) start after the last ')'.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(stat.substr(paren + 1));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; rest >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) {
      stime = std::stol(field);
      break;
    }
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

Sample Take(pqxx::connection& stats, int pid) {
  Sample s;
  pqxx::nontransaction tx(stats);
  auto row = tx.exec1(
      "SELECT xact_commit, tup_returned FROM pg_stat_database WHERE datname = 'ringmaster'");
  s.at = Clock::now();
  s.xacts = row[0].as<long>();
  s.rows = row[1].as<long>();
  s.cpu_s = ProcessCpuSeconds(pid);
  return s;
}

struct Window {
  double xacts_per_s, rows_per_s, cpu_s;
  Sample first;  // taken after settling, before the first window
};

// kWindows back-to-back windows after settling; their medians.
Window Measure(pqxx::connection& stats, int pid) {
  std::this_thread::sleep_for(std::chrono::duration<double>(kSettleS));
  std::vector<double> xacts, rows, cpu;
  Sample a = Take(stats, pid);
  const Sample first = a;
  for (int w = 0; w < kWindows; ++w) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kWindowS));
    Sample b = Take(stats, pid);
    double s = std::chrono::duration<double>(b.at - a.at).count();
    xacts.push_back(static_cast<double>(b.xacts - a.xacts) / s);
    rows.push_back(static_cast<double>(b.rows - a.rows) / s);
    cpu.push_back(b.cpu_s - a.cpu_s);
    a = b;
  }
  for (auto* v : {&xacts, &rows, &cpu}) std::sort(v->begin(), v->end());
  return {xacts[kWindows / 2], rows[kWindows / 2], cpu[kWindows / 2], first};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: watch_bench SCHEDULER_ADDR STATS_POSTGRES_URL SCHEDULER_PID JOBS\n");
    return 2;
  }
  const std::string addr = argv[1];
  int pid = 0, n = 0;
  if (!absl::SimpleAtoi(argv[3], &pid) || !absl::SimpleAtoi(argv[4], &n) || n < 1) {
    std::fprintf(stderr, "SCHEDULER_PID and JOBS must be positive integers\n");
    return 2;
  }
  pqxx::connection stats(argv[2]);

  std::vector<std::string> ids(n);
  const std::string run = absl::StrCat(std::chrono::system_clock::now().time_since_epoch().count());
  int errors = ForAll(addr, n, [&](v1::JobService::Stub& stub, int i) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    req.set_request_id(absl::StrCat("watch-", run, "-", i));
    req.mutable_spec()->set_name(absl::StrCat("watch-", i));
    req.mutable_spec()->set_gpus_per_replica(1);
    req.mutable_spec()->set_gpu_type("t4");
    req.mutable_spec()->set_replicas(1);
    req.mutable_spec()->mutable_trainer()->set_steps(10);
    v1::SubmitJobResponse resp;
    if (!stub.SubmitJob(&ctx, req, &resp).ok()) return false;
    ids[i] = resp.job().id();
    return true;
  });
  if (errors > 0) {
    std::fprintf(stderr, "%d submits failed\n", errors);
    return 1;
  }

  const Window idle = Measure(stats, pid);

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::JobService::Stub>> stubs;
  for (int c = 0; c * kWatchersPerChannel < n; ++c) {
    channels.push_back(NewChannel(addr, c));
    stubs.push_back(v1::JobService::NewStub(channels.back()));
  }
  const Sample before_open = Take(stats, pid);
  auto open0 = Clock::now();
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < n; ++i) {
    watchers.push_back(std::make_unique<Watcher>(stubs[i / kWatchersPerChannel].get(), ids[i]));
  }
  int first = 0;
  for (auto& w : watchers) first += w->WaitFirstEvent(open0 + std::chrono::seconds(60));
  const double open_s = Since(open0);

  const Window watched = Measure(stats, pid);

  auto cancel0 = Clock::now();
  errors = ForAll(addr, n, [&](v1::JobService::Stub& stub, int i) {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_job_id(ids[i]);
    req.set_reason("watch bench done");
    v1::CancelJobResponse resp;
    return stub.CancelJob(&ctx, req, &resp).ok();
  });
  int ended = 0;
  for (auto& w : watchers) ended += w->WaitCancelledAndEnded(cancel0 + std::chrono::seconds(60));
  const double cancel_s = Since(cancel0);
  for (auto& w : watchers) w->Shutdown();

  std::printf("watch benchmark: %d PENDING jobs; Postgres activity of the scheduler's database "
              "(pg_stat_database) and scheduler CPU, medians of %d idle windows of %.0f s\n", n,
              kWindows, kWindowS);
  std::printf("  %-22s %12s %12s %16s\n", "", "commits/s", "rows/s", "scheduler CPU");
  std::printf("  %-22s %12.2f %12.1f %13.3f s (%.1f%% of a core)\n", "0 watchers", idle.xacts_per_s,
              idle.rows_per_s, idle.cpu_s, 100 * idle.cpu_s / kWindowS);
  std::printf("  %-22s %12.2f %12.1f %13.3f s (%.1f%% of a core)\n",
              absl::StrCat(n, " idle watchers").c_str(), watched.xacts_per_s, watched.rows_per_s,
              watched.cpu_s, 100 * watched.cpu_s / kWindowS);
  std::printf("  difference             %12.2f %12.1f %13.3f s\n",
              watched.xacts_per_s - idle.xacts_per_s, watched.rows_per_s - idle.rows_per_s,
              watched.cpu_s - idle.cpu_s);
  std::printf("  watchers opened:        %d of %d got their first event within %.2f s\n", first, n,
              open_s);
  // The counters do move: opening the watchers reads each job's stored events once.
  std::printf("  opening them (a check that the counters move): %ld commits, %ld rows, %.3f s "
              "scheduler CPU\n", watched.first.xacts - before_open.xacts,
              watched.first.rows - before_open.rows, watched.first.cpu_s - before_open.cpu_s);
  std::printf("  cancelled:              %d cancels failed; %d of %d watchers got CANCELLED and "
              "ended, within %.2f s\n", errors, ended, n, cancel_s);
  return first == n && ended == n && errors == 0 ? 0 : 1;
}
