// The worker's Agent driven directly (no scheduler, no gRPC): Exec's bound on callers waiting
// for an assignment, and the teardown that lets the processes of a clean attempt end by
// themselves, its timers on a clock the test moves; and a job with a GPU share on real GPUs,
// whose MPS daemon (a stand-in here) is started for it or fails its launch.
#include "worker/agent.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

AgentOptions Options(const std::string& dir) {
  AgentOptions options;
  options.inventory.worker_id = "w1";
  options.inventory.address = "127.0.0.1";
  options.inventory.cpu_slots = 2;
  options.log_dir = dir + "/logs";
  options.mpi_tmpdir = dir + "/mpi";
  options.kill_grace = std::chrono::milliseconds(2000);
  options.check_interval = std::chrono::milliseconds(20);
  return options;
}

std::string TempDir() {
  std::string templ = ::testing::TempDir() + "worker-agent-XXXXXX";
  EXPECT_NE(mkdtemp(templ.data()), nullptr);
  return templ;
}

// Rank 0 on another worker, rank 1 here: this agent runs what that launcher's mpirun asks.
Assignment PeerAssignment(const std::string& job_id) {
  Assignment a;
  a.job_id = job_id;
  a.attempt = 0;
  a.token = "secret-token";
  a.command = CommandWorkload{{"true"}, {}};
  a.placement = {RankPlacement{0, "w0", "127.0.0.9", 7071, {}},
                 RankPlacement{1, "w1", "127.0.0.1", 7071, {}}};
  return a;
}

absl::StatusOr<ExitInfo> ExecFor(Agent& agent, const std::string& job_id,
                                 const std::vector<std::string>& argv,
                                 const std::atomic<bool>& cancelled) {
  return agent.Exec(
      job_id, 0, "secret-token", argv, {}, [](Agent::Stream, std::string_view) { return true; },
      [&] { return cancelled.load(); });
}

TEST(AgentExecTest, ExecCallsWaitingForUnknownAttemptsAreBounded) {
  const std::string dir = TempDir();
  AgentOptions options = Options(dir);
  options.exec_wait = std::chrono::seconds(20);
  options.max_exec_waiters = 2;
  Agent agent(options, nullptr);

  std::atomic<bool> cancel_waiters{false};
  auto wait_for_waiters = [&](int n) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (agent.ExecWaiters() < n && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return agent.ExecWaiters();
  };
  auto w1 = std::async(std::launch::async,
                       [&] { return ExecFor(agent, "j-unknown-1", {"true"}, cancel_waiters); });
  ASSERT_EQ(wait_for_waiters(1), 1);
  auto w2 = std::async(std::launch::async,
                       [&] { return ExecFor(agent, "j-unknown-2", {"true"}, cancel_waiters); });
  ASSERT_EQ(wait_for_waiters(2), 2);
  // Both wait: a third is turned away at once, however long exec_wait is.
  const std::atomic<bool> never{false};
  const auto start = Clock::now();
  absl::StatusOr<ExitInfo> third = ExecFor(agent, "j-unknown-3", {"true"}, never);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("2 Exec calls waiting"));
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));

  // Waiters whose callers gave up leave promptly and free their places.
  const auto cancelled_at = Clock::now();
  cancel_waiters = true;
  EXPECT_EQ(w1.get().status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(w2.get().status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_LT(Clock::now() - cancelled_at, std::chrono::seconds(2));
  EXPECT_EQ(agent.ExecWaiters(), 0);
  std::atomic<bool> quick_cancel{true};
  EXPECT_EQ(ExecFor(agent, "j-unknown-4", {"true"}, quick_cancel).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(AgentExecTest, ExecForAnAttemptAssignedWhileWaitingRunsIt) {
  const std::string dir = TempDir();
  AgentOptions options = Options(dir);
  options.exec_wait = std::chrono::seconds(10);
  options.max_exec_waiters = 1;
  Agent agent(options, nullptr);
  agent.Start();
  std::atomic<bool> never{false};
  auto exec = std::async(std::launch::async,
                         [&] { return ExecFor(agent, "j-late", {"exit", "3"}, never); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  agent.OnAssignment(PeerAssignment("j-late"));
  absl::StatusOr<ExitInfo> info = exec.get();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->exit_code, 3);
  agent.Shutdown();
}

// The pre-run check's mpirun calls Exec with the check's token (its orted runs as the worker's
// user). That token is taken only until the job's own Exec arrives: by then the check is over,
// and the job's processes have begun.
TEST(AgentExecTest, TheChecksTokenRunsExecOnlyUntilTheJobsOwnExec) {
  const std::string dir = TempDir();
  Agent agent(Options(dir), nullptr);
  agent.Start();
  Assignment a = PeerAssignment("j-checked");
  a.run_check = true;
  a.check_token = "check-secret";
  agent.OnAssignment(a);
  auto exec = [&](const std::string& token) {
    return agent.Exec(
        "j-checked", 0, token, {"exit", "0"}, {},
        [](Agent::Stream, std::string_view) { return true; }, [] { return false; });
  };
  absl::StatusOr<ExitInfo> check = exec("check-secret");
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->exit_code, 0);
  EXPECT_EQ(exec("check-secre").status().code(), absl::StatusCode::kPermissionDenied);
  absl::StatusOr<ExitInfo> job = exec("secret-token");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->exit_code, 0);
  absl::StatusOr<ExitInfo> late = exec("check-secret");
  EXPECT_EQ(late.status().code(), absl::StatusCode::kPermissionDenied) << late.status();
  agent.Shutdown();
}

// What one message to the scheduler carries: the statuses queued at that moment, in order, up
// to the limit.
TEST(AgentStatusTest, StatusesQueuedTogetherAreTakenTogetherInOrder) {
  const std::string dir = TempDir();
  Agent agent(Options(dir), nullptr);
  agent.Start();
  Assignment a = PeerAssignment("j-batch");
  a.placement.push_back(RankPlacement{2, "w1", "127.0.0.1", 7071, {}});
  a.placement.push_back(RankPlacement{3, "w1", "127.0.0.1", 7071, {}});
  agent.OnAssignment(a);
  EXPECT_TRUE(agent.NextStatuses(256, std::chrono::milliseconds(1)).empty());
  for (int mpi_rank : {1, 2, 3}) {
    ASSERT_TRUE(agent.StartRank("j-batch", 0, "secret-token", mpi_rank, getpid()).ok());
  }
  std::vector<RankStatus> first = agent.NextStatuses(2, std::chrono::milliseconds(100));
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].rank, 1);
  EXPECT_EQ(first[1].rank, 2);
  std::vector<RankStatus> rest = agent.NextStatuses(256, std::chrono::milliseconds(100));
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].rank, 3);
  EXPECT_EQ(rest[0].kind, RankStatus::Kind::kStarted);
  EXPECT_TRUE(agent.NextStatuses(256, std::chrono::milliseconds(1)).empty());
  agent.Shutdown();
}

// The end of a successful attempt: every local rank reported exit 0, then the scheduler's
// StopJob arrives while orted (here: a command that needs a moment more) is still finishing.
absl::StatusOr<ExitInfo> ExecAfterCleanRanksThenStop(std::chrono::milliseconds clean_exit_wait) {
  const std::string dir = TempDir();
  AgentOptions options = Options(dir);
  options.clean_exit_wait = clean_exit_wait;
  Agent agent(options, nullptr);
  agent.Start();
  agent.OnAssignment(PeerAssignment("j-clean"));
  std::atomic<bool> never{false};
  auto exec = std::async(std::launch::async,
                         [&] { return ExecFor(agent, "j-clean", {"sleep", "0.7"}, never); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  absl::StatusOr<StartedRank> started = agent.StartRank("j-clean", 0, "secret-token", 1, getpid());
  EXPECT_TRUE(started.ok()) << started.status();
  RankExit exit;
  exit.rank = 1;
  EXPECT_TRUE(agent.ReportExit("j-clean", 0, "secret-token", exit).ok());
  agent.OnStop("j-clean", 0, "job SUCCEEDED");
  absl::StatusOr<ExitInfo> info = exec.get();
  agent.Shutdown();
  return info;
}

TEST(AgentTeardownTest, StopAfterEveryRankExitedZeroLetsOrtedExitByItself) {
  absl::StatusOr<ExitInfo> info = ExecAfterCleanRanksThenStop(std::chrono::seconds(5));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->signal, 0);
  EXPECT_EQ(info->exit_code, 0);
}

TEST(AgentTeardownTest, WithoutTheCleanExitWaitTheSameStopSignalsOrted) {
  // The behaviour that made mpirun exit 1 for jobs whose ranks all exited 0; kept reachable
  // (--clean-exit-wait-ms 0) and tested, so the test above is known to tell them apart.
  absl::StatusOr<ExitInfo> info = ExecAfterCleanRanksThenStop(std::chrono::milliseconds(0));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->signal, SIGTERM);
}

TEST(AgentTeardownTest, ShutdownDuringTheCleanExitWaitDoesNotWaitItOut) {
  const std::string dir = TempDir();
  AgentOptions options = Options(dir);
  options.clean_exit_wait = std::chrono::seconds(30);
  Agent agent(options, nullptr);
  agent.Start();
  agent.OnAssignment(PeerAssignment("j-shutdown"));
  std::atomic<bool> never{false};
  auto exec = std::async(std::launch::async,
                         [&] { return ExecFor(agent, "j-shutdown", {"sleep", "30"}, never); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(agent.StartRank("j-shutdown", 0, "secret-token", 1, getpid()).ok());
  RankExit exit;
  exit.rank = 1;
  ASSERT_TRUE(agent.ReportExit("j-shutdown", 0, "secret-token", exit).ok());
  agent.OnStop("j-shutdown", 0, "job SUCCEEDED");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = Clock::now();
  agent.Shutdown();
  absl::StatusOr<ExitInfo> info = exec.get();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->signal, SIGTERM);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(AgentTeardownTest, AnExitAfterTheStopIsTakenButOnlyWithTheToken) {
  // A preempted rank that saved and exited after the StopJob: its wrapper's report must not
  // come back as an error (it was printed into the job's log), and a wrong token still fails.
  const std::string dir = TempDir();
  Agent agent(Options(dir), nullptr);
  agent.Start();
  agent.OnAssignment(PeerAssignment("j-stopped"));
  ASSERT_TRUE(agent.StartRank("j-stopped", 0, "secret-token", 1, getpid()).ok());
  agent.OnStop("j-stopped", 0, "preempted", std::chrono::milliseconds(5000));
  RankExit exit;
  exit.rank = 1;
  exit.signal = 0;
  exit.exit_code = 143;
  EXPECT_TRUE(agent.ReportExit("j-stopped", 0, "secret-token", exit).ok());
  EXPECT_EQ(agent.ReportExit("j-stopped", 0, "wrong-token", exit).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(agent.ReportExit("j-other", 0, "secret-token", exit).code(),
            absl::StatusCode::kNotFound);
  agent.Shutdown();
}

TEST(AgentTeardownTest, StopBeforeAnyRankEndedSignalsAtOnce) {
  const std::string dir = TempDir();
  AgentOptions options = Options(dir);
  options.clean_exit_wait = std::chrono::seconds(30);
  Agent agent(options, nullptr);
  agent.Start();
  agent.OnAssignment(PeerAssignment("j-cancel"));
  std::atomic<bool> never{false};
  auto exec = std::async(std::launch::async,
                         [&] { return ExecFor(agent, "j-cancel", {"sleep", "30"}, never); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = Clock::now();
  agent.OnStop("j-cancel", 0, "cancelled");
  absl::StatusOr<ExitInfo> info = exec.get();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->signal, SIGTERM);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  agent.Shutdown();
}

// The teardown's timers run on the agent's clock (AgentOptions.now), not on sleeps: a process
// that ignores SIGTERM is left alone through the clean-exit wait, gets SIGTERM when the clock
// passes it, and SIGKILL only once the clock has also passed kill_grace, however long the test
// waits in real time between the steps.
TEST(AgentTeardownTest, TheCleanExitWaitAndTheKillGraceRunOnTheAgentsClock) {
  const std::string dir = TempDir();
  AgentOptions options = Options(dir);
  options.clean_exit_wait = std::chrono::seconds(30);
  options.kill_grace = std::chrono::seconds(2);
  const auto base = Clock::now();
  std::atomic<int64_t> offset_ms{0};
  options.now = [&] { return base + std::chrono::milliseconds(offset_ms.load()); };
  Agent agent(options, nullptr);
  agent.Start();
  agent.OnAssignment(PeerAssignment("j-clock"));
  std::atomic<bool> never{false};
  const std::string marker = dir + "/termed";
  auto exec = std::async(std::launch::async, [&] {
    return ExecFor(agent, "j-clock",
                   {"trap", "'touch " + marker + "'", "TERM;", "while", "true;", "do", "sleep",
                    "0.05;", "done"},
                   never);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(agent.StartRank("j-clock", 0, "secret-token", 1, getpid()).ok());
  RankExit exit;
  exit.rank = 1;
  ASSERT_TRUE(agent.ReportExit("j-clock", 0, "secret-token", exit).ok());
  agent.OnStop("j-clock", 0, "job SUCCEEDED");  // every rank here exited 0: the clean-exit wait

  // Many housekeeping periods of real time, no time on the agent's clock: nothing is sent.
  EXPECT_EQ(exec.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout);
  EXPECT_FALSE(std::filesystem::exists(marker));
  offset_ms = 29'000;
  EXPECT_EQ(exec.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "SIGTERM before the clean-exit wait ended";

  offset_ms = 30'000;  // the wait is over: SIGTERM, which the command notes and survives
  for (int i = 0; i < 100 && !std::filesystem::exists(marker); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(std::filesystem::exists(marker)) << "no SIGTERM once the clean-exit wait ended";
  EXPECT_EQ(exec.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout)
      << "SIGKILL before kill_grace passed on the agent's clock";

  offset_ms = 32'000;  // kill_grace after SIGTERM: SIGKILL
  ASSERT_EQ(exec.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  absl::StatusOr<ExitInfo> info = exec.get();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->signal, SIGKILL);
  agent.Shutdown();
}

// An orted here failed, so the agent stops the attempt; mpirun then kills the rank's wrapper
// before it can report (here: it never does). Once nothing of the attempt is left, the agent
// reports the rank itself: the scheduler hears of every rank and fails the job, instead of
// keeping it RUNNING on a worker that runs none of it.
TEST(AgentTeardownTest, ARankUnreportedWhenItsStoppedAttemptIsGoneIsReportedKilled) {
  const std::string dir = TempDir();
  Agent agent(Options(dir), nullptr);
  agent.Start();
  agent.OnAssignment(PeerAssignment("j-torn"));
  // The test's own pid: alive throughout, so only the teardown's end can report the rank.
  ASSERT_TRUE(agent.StartRank("j-torn", 0, "secret-token", 1, getpid()).ok());
  std::vector<RankStatus> started = agent.NextStatuses(256, std::chrono::milliseconds(1000));
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].kind, RankStatus::Kind::kStarted);
  std::atomic<bool> never{false};
  absl::StatusOr<ExitInfo> orted = ExecFor(agent, "j-torn", {"exit", "3"}, never);
  ASSERT_TRUE(orted.ok()) << orted.status();
  EXPECT_EQ(orted->exit_code, 3);
  std::vector<RankStatus> ended;
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (ended.empty() && Clock::now() < give_up) {
    ended = agent.NextStatuses(256, std::chrono::milliseconds(100));
  }
  ASSERT_EQ(ended.size(), 1u) << "the agent never reported the rank whose wrapper said nothing";
  EXPECT_EQ(ended[0].rank, 1);
  EXPECT_EQ(ended[0].kind, RankStatus::Kind::kExited);
  // The teardown got as far as SIGTERM (nothing outlived it to need SIGKILL).
  EXPECT_EQ(ended[0].signal, SIGTERM);
  EXPECT_THAT(ended[0].message, HasSubstr("before it could report its exit"));
  EXPECT_THAT(ended[0].message, HasSubstr("(orted) exited with code 3"));
  agent.Shutdown();
}

// A quarter-GPU job's rank 1 on this worker's GPU 0, which this worker offers as a real one.
Assignment SharedPeerAssignment(const std::string& job_id) {
  Assignment a = PeerAssignment(job_id);
  a.placement[1].gpu_indices = {0};
  a.gpu_share = 250;
  a.gpu_memory = int64_t{1} << 30;
  return a;
}

TEST(AgentGpuShareTest, WithoutTheMpsDaemonASharedAttemptFailsNamingTheWorker) {
  const std::string dir = TempDir();
  AgentOptions options = Options(dir);
  options.mps_control = dir + "/no-such-mps-control";
  Agent agent(options, nullptr);
  agent.Start();
  agent.OnAssignment(SharedPeerAssignment("j-share"));
  std::vector<RankStatus> statuses = agent.NextStatuses(256, std::chrono::milliseconds(1000));
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].rank, 1);
  EXPECT_EQ(statuses[0].kind, RankStatus::Kind::kLaunchFailed);
  EXPECT_THAT(statuses[0].message, HasSubstr("worker w1 cannot enforce GPU shares"));
  EXPECT_THAT(statuses[0].message, HasSubstr("no-such-mps-control"));
  agent.Shutdown();
}

TEST(AgentGpuShareTest, ASharedRankIsAnMpsClientOfTheWorkersDaemonWhichStopsAtShutdown) {
  const std::string dir = TempDir();
  // Stands in for nvidia-cuda-mps-control: `-d` writes the pid file, a command is logged.
  const std::string control = dir + "/fake-mps-control";
  {
    std::ofstream out(control);
    out << "#!/bin/sh\n"
        << "if [ \"$1\" = -d ]; then echo $$ > \"$CUDA_MPS_PIPE_DIRECTORY/" << kMpsPidFile
        << "\"; exit 0; fi\n"
        << "read command; echo \"$command\" >> \"$CUDA_MPS_LOG_DIRECTORY/commands\"\n";
  }
  std::filesystem::permissions(control, std::filesystem::perms::owner_all);
  AgentOptions options = Options(dir);
  options.mps_control = control;
  Agent agent(options, nullptr);
  agent.Start();
  agent.OnAssignment(SharedPeerAssignment("j-share"));
  absl::StatusOr<StartedRank> started = agent.StartRank("j-share", 0, "secret-token", 1, getpid());
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string mps = dir + "/mpi/mps" + SessionSuffix("w1");
  EXPECT_EQ(started->env["CUDA_MPS_PIPE_DIRECTORY"], mps + "/pipe");
  EXPECT_EQ(started->env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "25");
  EXPECT_EQ(started->env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=1024M");
  EXPECT_EQ(started->env["RINGMASTER_GPU_SHARE"], "0.25");
  EXPECT_EQ(started->env["CUDA_VISIBLE_DEVICES"], "0");
  agent.Shutdown();
  std::ifstream commands(mps + "/log/commands");
  std::string command;
  EXPECT_TRUE(std::getline(commands, command));
  EXPECT_EQ(command, "quit");
}

}  // namespace
}  // namespace ringmaster::worker
