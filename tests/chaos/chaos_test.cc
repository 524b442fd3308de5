// Chaos: about 100 short jobs with restart_policy OnFailure run on a real cluster (a Postgres
// of the test's own, Redis, the scheduler, three workers on their own loopback addresses, real
// mpirun rings) while the test kills (-9) the scheduler, a worker and Redis in turn and restarts
// Postgres once. Afterwards: no accepted job lost, none left unfinished, no job that succeeded
// ran again, no job process left behind. The figures are printed.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "support/cluster/cluster.h"
#include "support/postgres_server.h"
#include "support/redis_server.h"
#include "support/test_certs.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using namespace std::chrono_literals;

constexpr int kJobs = 100;

// Each rank appends "JOB ATTEMPT RANK start|done" to `journal`; lines this short are written
// whole by O_APPEND, so concurrent ranks never interleave inside a line.
v1::JobSpec ChaosSpec(int i, const std::string& journal) {
  v1::JobSpec spec;
  spec.set_name(absl::StrCat("chaos-", i));
  spec.set_replicas(i % 3 == 0 ? 2 : 1);  // every third job a gang over two workers
  spec.set_restart_policy(v1::RESTART_POLICY_ON_FAILURE);
  spec.set_backoff_limit(20);
  const std::string line = "\"$RINGMASTER_JOB_ID $RINGMASTER_ATTEMPT $RANK";
  for (const char* a : {"/bin/sh", "-c"}) spec.mutable_command()->add_argv(a);
  spec.mutable_command()->add_argv(absl::StrCat("echo ", line, " start\" >> ", journal,
                                                "; sleep 0.4; echo ", line, " done\" >> ",
                                                journal));
  return spec;
}

TEST(ChaosTest, KillsAndRestartsLoseNoJobAndRunNoFinishedJobTwice) {
  auto pg = PostgresServer::Start();
  ASSERT_TRUE(pg.ok()) << pg.status();
  auto started = Cluster::Start((*pg)->admin_url(), {"--postgres-timeout-ms", "1000",
                                                     "--write-wait-ms", "3000"});
  ASSERT_TRUE(started.ok()) << started.status();
  Cluster& cluster = **started;
  for (int i = 2; i <= 4; ++i) {
    WorkerConfig config;
    config.id = absl::StrCat("w", i);
    config.address = absl::StrCat("127.0.0.", i);
    config.cpu_slots = 3;
    ASSERT_TRUE(cluster.AddWorker(config).ok());
  }
  ASSERT_TRUE(cluster.WaitWorkersReady(3).ok()) << cluster.Logs();
  const std::string journal = cluster.dir() + "/journal";

  // Submitter: every job with a request id, retried until accepted (UNAVAILABLE while the
  // scheduler or Postgres is down): an accepted id must end up as exactly one job.
  std::mutex mu;
  std::map<int, std::string> accepted;  // job number -> job id
  std::atomic<int> refusals{0};
  std::thread submitter([&] {
    for (int i = 0; i < kJobs; ++i) {
      const auto deadline = std::chrono::steady_clock::now() + 120s;
      while (std::chrono::steady_clock::now() < deadline) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 5s);
        v1::SubmitJobRequest req;
        *req.mutable_spec() = ChaosSpec(i, journal);
        req.set_request_id(absl::StrCat("chaos-", i));
        v1::SubmitJobResponse resp;
        // A new channel per try: the scheduler's address stays, its process does not.
        auto channel = cluster.scheduler().ChannelWith(TestCerts::Get().CaOnly());
        if (v1::JobService::NewStub(channel)->SubmitJob(&ctx, req, &resp).ok()) {
          std::lock_guard<std::mutex> lock(mu);
          accepted[i] = resp.job().id();
          break;
        }
        ++refusals;
        std::this_thread::sleep_for(200ms);
      }
      std::this_thread::sleep_for(100ms);
    }
  });

  // Chaos, in turn, a few seconds apart, while jobs are submitted and running.
  const auto chaos_start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(3s);
  std::cerr << "chaos: kill -9 the scheduler\n";
  ASSERT_TRUE(cluster.scheduler().Restart(SIGKILL).ok()) << cluster.Logs();
  std::this_thread::sleep_for(3s);
  std::cerr << "chaos: kill -9 worker w3\n";
  ASSERT_TRUE(cluster.worker("w3")->process().Kill(SIGKILL).ok());
  std::this_thread::sleep_for(1s);
  ASSERT_TRUE(cluster.RestartWorker("w3").ok()) << cluster.Logs();
  std::this_thread::sleep_for(3s);
  std::cerr << "chaos: kill -9 Redis\n";
  ASSERT_TRUE(cluster.redis().Stop().ok());
  std::this_thread::sleep_for(1s);
  ASSERT_TRUE(cluster.redis().Start().ok());
  std::this_thread::sleep_for(3s);
  std::cerr << "chaos: restart Postgres\n";
  ASSERT_TRUE((*pg)->Restart().ok());
  submitter.join();
  const double chaos_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - chaos_start).count();

  // Every accepted job ends.
  bool all_ended = WaitFor([&] { return cluster.LiveJobs().empty(); }, 180s, 500ms);
  std::map<std::string, v1::JobState> final_state;
  std::map<std::string, int> final_attempt;
  int lost = 0;
  for (const auto& [i, id] : accepted) {
    auto job = cluster.GetJob(id);
    if (!job.ok()) {
      ++lost;
      continue;
    }
    final_state[id] = job->state();
    final_attempt[id] = job->attempt();
  }
  int succeeded = 0, failed = 0, unfinished = 0;
  for (const auto& [id, state] : final_state) {
    succeeded += state == v1::JOB_STATE_SUCCEEDED;
    failed += state == v1::JOB_STATE_FAILED || state == v1::JOB_STATE_CANCELLED;
    unfinished += state != v1::JOB_STATE_SUCCEEDED && state != v1::JOB_STATE_FAILED &&
                  state != v1::JOB_STATE_CANCELLED;
  }

  // Runs from the journal. A succeeded job ran again when a rank of it started in an attempt
  // after the one that succeeded, or when the succeeded attempt did not finish on every rank.
  // An earlier attempt whose ranks all finished but whose exits never reached the scheduler
  // (its worker or the scheduler was killed in between) is work in flight at a crash, run again
  // at least once as with any supervisor that dies before it hears the result: counted and
  // shown with the job's events, but not a finished job run twice.
  std::map<std::string, int> world;  // job id -> replicas
  for (const auto& [i, id] : accepted) world[id] = i % 3 == 0 ? 2 : 1;
  std::map<std::pair<std::string, int>, std::set<int>> done;  // (job, attempt) -> ranks done
  std::map<std::string, int> attempts_started;
  std::ifstream in(journal);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() != 4) continue;
    ++lines;
    const int attempt = std::atoi(f[1].c_str());
    if (f[3] == "done") done[{f[0], attempt}].insert(std::atoi(f[2].c_str()));
    if (f[3] == "start") attempts_started[f[0]] = std::max(attempts_started[f[0]], attempt + 1);
  }
  int ran_twice = 0, restarts = 0, cut_off = 0;
  for (const auto& [id, state] : final_state) {
    restarts += std::max(0, attempts_started[id] - 1);
    if (state != v1::JOB_STATE_SUCCEEDED) continue;
    const int last = final_attempt[id];
    const bool finished = static_cast<int>(done[{id, last}].size()) == world[id];
    if (attempts_started[id] > last + 1 || !finished) {
      ++ran_twice;
      std::cerr << "job " << id << " succeeded in attempt " << last << " but "
                << (finished ? "ran again after it" : "that attempt did not finish") << "\n";
    }
    for (int a = 0; a < last; ++a) {
      if (static_cast<int>(done[{id, a}].size()) != world[id]) continue;
      ++cut_off;
      std::cerr << "job " << id << ": attempt " << a << " finished but was cut off:";
      for (const v1::JobEvent& e : cluster.Events(id)) {
        std::cerr << " [" << e.attempt() << " " << v1::JobState_Name(e.state()) << ": "
                  << e.reason() << "]";
      }
      std::cerr << "\n";
    }
  }

  // No process of any job is left on the machine.
  int leftovers = 0;
  for (const auto& [id, state] : final_state) {
    leftovers += static_cast<int>(ProcessesWithEnv({{"RINGMASTER_JOB_ID", id}}).size());
  }

  std::printf(
      "chaos: %d jobs accepted of %d (%d refused tries while down), %d succeeded, %d failed, "
      "%d lost, %d unfinished, %d succeeded jobs ran again, %d restarts (%d of them after an "
      "attempt that finished but was cut off by a kill before its exit was stored), %d "
      "processes left, %d journal lines, %.1f s of chaos\n",
      static_cast<int>(accepted.size()), kJobs, refusals.load(), succeeded, failed, lost,
      unfinished, ran_twice, restarts, cut_off, leftovers, lines, chaos_s);
  EXPECT_TRUE(all_ended) << cluster.Logs();
  EXPECT_EQ(static_cast<int>(accepted.size()), kJobs);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(unfinished, 0);
  EXPECT_EQ(succeeded, kJobs) << "with backoff_limit 20 every job should succeed";
  EXPECT_EQ(ran_twice, 0);
  EXPECT_EQ(leftovers, 0);
  if (HasFailure()) std::cerr << cluster.Logs() << "\n";
}

}  // namespace
}  // namespace ringmaster::test
