// End to end, the pre-run allreduce check (docs/health-check.md): PostgreSQL, Redis, the real
// scheduler with --health-check true and real workers running ringmaster-check under mpirun.
// One worker is slow on purpose (--check-delay-ms): the check finds it, the scheduler marks it
// unhealthy and re-places the job without it, without using up the job's attempts.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/cluster/cluster.h"
#include "support/http_get.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

v1::JobSpec TwoRankJob(const std::string& name) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_replicas(2);
  spec.mutable_command()->add_argv("/bin/sh");
  spec.mutable_command()->add_argv("-c");
  spec.mutable_command()->add_argv("echo rank $RANK ran on $RINGMASTER_WORKER_ID");
  // A failure of the job itself would end it: only a check's re-placement may restart it.
  spec.set_restart_policy(v1::RESTART_POLICY_NEVER);
  return spec;
}

std::string EventText(const std::vector<v1::JobEvent>& events) {
  std::string text;
  for (const auto& e : events) absl::StrAppend(&text, e.attempt(), " ", e.reason(), "\n");
  return text;
}

WorkerConfig Config(const std::string& id, const std::string& address, int delay_ms = 0) {
  WorkerConfig config;
  config.id = id;
  config.address = address;
  config.cpu_slots = 1;
  if (delay_ms > 0) config.extra_args = {"--check-delay-ms", std::to_string(delay_ms)};
  return config;
}

v1::WorkerInfo WorkerInfoOf(Cluster& cluster, const std::string& id) {
  grpc::ClientContext ctx;
  v1::ListWorkersResponse resp;
  (void)cluster.scheduler().cluster().ListWorkers(&ctx, v1::ListWorkersRequest(), &resp);
  for (const auto& w : resp.workers()) {
    if (w.worker_id() == id) return w;
  }
  return {};
}

TEST(HealthCheckE2eTest, SlowWorkerIsFoundMarkedUnhealthyAndTheJobCompletesElsewhere) {
  auto started = Cluster::Start("", {"--health-check", "true", "--check-min-ratio", "0.5"});
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<Cluster> cluster = std::move(*started);
  const std::string suffix = absl::StrCat("-", getpid());
  const std::string healthy = "hc2" + suffix, slow = "hc4" + suffix, spare = "hc3" + suffix;
  // One CPU slot each: a 2-rank job spans two workers, so the ring crosses hosts.
  WorkerConfig a = Config(healthy, "127.0.0.2");
  WorkerConfig b = Config(slow, "127.0.0.4", 40);
  ASSERT_TRUE(cluster->AddWorker(a).ok());
  ASSERT_TRUE(cluster->AddWorker(b).ok());
  ASSERT_TRUE(cluster->WaitWorkersReady(2).ok()) << cluster->Logs();

  // Only the slow worker and one other: the first placement must include the slow one.
  auto id = cluster->Submit(TwoRankJob("hc-slow"));
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(
      WaitFor([&] { return !WorkerInfoOf(*cluster, slow).unhealthy_reason().empty(); }, 30s))
      << cluster->Logs();
  const v1::WorkerInfo marked = WorkerInfoOf(*cluster, slow);
  EXPECT_THAT(marked.unhealthy_reason(), HasSubstr("pre-run check of job " + *id));
  EXPECT_THAT(marked.unhealthy_reason(), HasSubstr("worker " + slow));
  EXPECT_TRUE(WorkerInfoOf(*cluster, healthy).unhealthy_reason().empty());
  // It waits: the unhealthy worker takes no placement, and one worker has one slot.
  v1::Job waiting = cluster->WaitState(*id, v1::JOB_STATE_PENDING, 10s);
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_PENDING) << cluster->Logs();

  // A healthy worker joins: the job is placed there and passes.
  ASSERT_TRUE(cluster->AddWorker(Config(spare, "127.0.0.3")).ok());
  v1::Job done = cluster->WaitState(*id, v1::JOB_STATE_SUCCEEDED, 40s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message() << "\n" << cluster->Logs();
  EXPECT_EQ(done.attempt(), 1);
  for (const auto& r : done.placement()) EXPECT_NE(r.worker_id(), slow);
  const std::string events = EventText(cluster->Events(*id));
  std::cerr << "events of " << *id << ":\n" << events;
  EXPECT_THAT(events, HasSubstr("pre-run check failed"));
  EXPECT_THAT(events, HasSubstr("re-placing without unhealthy worker " + slow));
  EXPECT_THAT(events, HasSubstr("not counted against backoff_limit"));
  EXPECT_THAT(events, HasSubstr("pre-run check passed: busbw"));

  // /metrics: the check's figures and the unhealthy worker.
  const std::string metrics = HttpGet(cluster->scheduler().metrics_port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("ringmaster_check_busbw_gbps{shape=\"2x1/cpu\"}"));
  EXPECT_THAT(metrics, HasSubstr("ringmaster_check_baseline_busbw_gbps{shape=\"2x1/cpu\"}"));
  EXPECT_THAT(metrics, HasSubstr("ringmaster_checks_total{result=\"failed\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("ringmaster_checks_total{result=\"passed\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("ringmaster_workers_unhealthy 1"));

  // Health and the learned baseline are in Postgres: a restarted scheduler still has both.
  ASSERT_TRUE(cluster->scheduler().Restart().ok());
  ASSERT_TRUE(cluster->scheduler().WaitServing().ok()) << cluster->Logs();
  EXPECT_FALSE(WorkerInfoOf(*cluster, slow).unhealthy_reason().empty());
  EXPECT_THAT(HttpGet(cluster->scheduler().metrics_port(), "/metrics"),
              HasSubstr("ringmaster_check_baseline_busbw_gbps{shape=\"2x1/cpu\"}"));

  // An admin clears it; unknown and empty ids are refused by name.
  {
    grpc::ClientContext ctx;
    v1::ClearWorkerHealthRequest req;
    req.set_worker_id(slow);
    v1::ClearWorkerHealthResponse resp;
    grpc::Status s = cluster->scheduler().cluster().ClearWorkerHealth(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(resp.worker().unhealthy_reason().empty());
  }
  EXPECT_TRUE(WorkerInfoOf(*cluster, slow).unhealthy_reason().empty());
  {
    grpc::ClientContext ctx;
    v1::ClearWorkerHealthRequest req;
    req.set_worker_id("no-such-worker");
    v1::ClearWorkerHealthResponse resp;
    EXPECT_EQ(cluster->scheduler().cluster().ClearWorkerHealth(&ctx, req, &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    v1::ClearWorkerHealthResponse resp;
    grpc::Status s = cluster->scheduler().cluster().ClearWorkerHealth(
        &ctx, v1::ClearWorkerHealthRequest(), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("worker_id"));
  }
}

// The built-in trainer is checked inside its own MPI_Init (the rank wrapper's preloaded
// library), not by an mpirun of ringmaster-check: the slow worker is found all the same, from a
// RUNNING job. That verdict is the job's own, so the next attempt verifies it with
// ringmaster-check, which marks the worker; the attempt after that runs without it.
TEST(HealthCheckE2eTest, TheTrainerIsCheckedInsideItsOwnMpiInit) {
  auto started = Cluster::Start("", {"--health-check", "true", "--check-min-ratio", "0.5"});
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<Cluster> cluster = std::move(*started);
  const std::string suffix = absl::StrCat("-", getpid());
  const std::string healthy = "hi2" + suffix, slow = "hi4" + suffix, spare = "hi3" + suffix;
  ASSERT_TRUE(cluster->AddWorker(Config(healthy, "127.0.0.2")).ok());
  ASSERT_TRUE(cluster->AddWorker(Config(slow, "127.0.0.4", 40)).ok());
  ASSERT_TRUE(cluster->WaitWorkersReady(2).ok()) << cluster->Logs();

  v1::JobSpec spec;
  spec.set_name("hc-trainer");
  spec.set_replicas(2);
  spec.set_restart_policy(v1::RESTART_POLICY_NEVER);
  spec.mutable_trainer()->set_model("mlp-small");
  // Long enough to be running when the check's verdict arrives.
  spec.mutable_trainer()->set_steps(300);
  auto id = cluster->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(
      WaitFor([&] { return !WorkerInfoOf(*cluster, slow).unhealthy_reason().empty(); }, 30s))
      << cluster->Logs();
  EXPECT_THAT(WorkerInfoOf(*cluster, slow).unhealthy_reason(),
              HasSubstr("pre-run check of job " + *id));

  ASSERT_TRUE(cluster->AddWorker(Config(spare, "127.0.0.3")).ok());
  v1::Job done = cluster->WaitState(*id, v1::JOB_STATE_SUCCEEDED, 90s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message() << "\n" << cluster->Logs();
  EXPECT_EQ(done.attempt(), 2);
  for (const auto& r : done.placement()) EXPECT_NE(r.worker_id(), slow);
  const std::string events = EventText(cluster->Events(*id));
  std::cerr << "events of " << *id << ":\n" << events;
  // The first attempt was RUNNING (its ranks started) before the verdict came.
  EXPECT_THAT(events, ::testing::ContainsRegex("0 all 2 ranks started\n(.*\n)*0 pre-run check "
                                               "failed"));
  EXPECT_THAT(events, ::testing::ContainsRegex("0 pre-run check failed: busbw [0-9.]+ GB/s "
                                               "\\([^)]*\\) in [0-9.]+ s inside the job's "
                                               "MPI_Init"));
  EXPECT_THAT(events, HasSubstr("1 re-placing to verify the blame of worker " + slow));
  EXPECT_THAT(events, ::testing::ContainsRegex("1 pre-run check failed: busbw [0-9.]+ GB/s "
                                               "\\([^)]*\\) in [0-9.]+ s: "));
  EXPECT_THAT(events, HasSubstr("2 re-placing without unhealthy worker " + slow));
  EXPECT_THAT(events, ::testing::ContainsRegex("2 pre-run check passed: busbw [0-9.]+ GB/s "
                                               "\\([^)]*\\) in [0-9.]+ s inside the job's "
                                               "MPI_Init"));
}

// A plain MPI program (no Ringmaster code) whose spec says it calls MPI_Init is checked inside
// it as the trainer is: the slow worker is found, verified by ringmaster-check, and the job
// re-placed without it.
TEST(HealthCheckE2eTest, AnMpiCommandThatSaysSoIsCheckedInsideItsMpiInit) {
#ifndef RINGMASTER_STALLED_ALLREDUCE
  GTEST_SKIP() << "built without the MPI test program";
#else
  auto started = Cluster::Start("", {"--health-check", "true", "--check-min-ratio", "0.5"});
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<Cluster> cluster = std::move(*started);
  const std::string suffix = absl::StrCat("-", getpid());
  const std::string healthy = "hm2" + suffix, slow = "hm4" + suffix, spare = "hm3" + suffix;
  ASSERT_TRUE(cluster->AddWorker(Config(healthy, "127.0.0.2")).ok());
  ASSERT_TRUE(cluster->AddWorker(Config(slow, "127.0.0.4", 40)).ok());
  ASSERT_TRUE(cluster->WaitWorkersReady(2).ok()) << cluster->Logs();

  v1::JobSpec spec;
  spec.set_name("hc-mpi-command");
  spec.set_replicas(2);
  spec.set_restart_policy(v1::RESTART_POLICY_NEVER);
  v1::CommandWorkload* command = spec.mutable_command();
  command->add_argv(RINGMASTER_STALLED_ALLREDUCE);
  (*command->mutable_env())["STALL_RANK"] = "-1";
  // Still running when the verdict comes.
  (*command->mutable_env())["HOLD_MS"] = "3000";
  command->set_check_in_mpi_init(true);
  auto id = cluster->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(
      WaitFor([&] { return !WorkerInfoOf(*cluster, slow).unhealthy_reason().empty(); }, 30s))
      << cluster->Logs();
  ASSERT_TRUE(cluster->AddWorker(Config(spare, "127.0.0.3")).ok());
  v1::Job done = cluster->WaitState(*id, v1::JOB_STATE_SUCCEEDED, 60s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message() << "\n" << cluster->Logs();
  EXPECT_EQ(done.attempt(), 2);
  for (const auto& r : done.placement()) EXPECT_NE(r.worker_id(), slow);
  const std::string events = EventText(cluster->Events(*id));
  std::cerr << "events of " << *id << ":\n" << events;
  EXPECT_THAT(events, ::testing::ContainsRegex("0 pre-run check failed: busbw [0-9.]+ GB/s "
                                               "\\([^)]*\\) in [0-9.]+ s inside the job's "
                                               "MPI_Init"));
  EXPECT_THAT(events, HasSubstr("2 re-placing without unhealthy worker " + slow));
  EXPECT_THAT(events, ::testing::ContainsRegex("2 pre-run check passed: busbw [0-9.]+ GB/s "
                                               "\\([^)]*\\) in [0-9.]+ s inside the job's "
                                               "MPI_Init"));
#endif
}

// The result of a check inside MPI_Init is written by the job's own rank 0, so a job can write
// anything there. A forged blame of a healthy worker costs the job a restart and marks nobody:
// the next attempt is checked by ringmaster-check, which passes.
TEST(HealthCheckE2eTest, AForgedInSessionBlameMarksNoWorker) {
  auto started = Cluster::Start("", {"--health-check", "true", "--check-min-ratio", "0.5"});
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<Cluster> cluster = std::move(*started);
  const std::string suffix = absl::StrCat("-", getpid());
  const std::string a = "hf2" + suffix, victim = "hf4" + suffix;
  ASSERT_TRUE(cluster->AddWorker(Config(a, "127.0.0.2")).ok());
  ASSERT_TRUE(cluster->AddWorker(Config(victim, "127.0.0.4")).ok());
  ASSERT_TRUE(cluster->WaitWorkersReady(2).ok()) << cluster->Logs();

  v1::JobSpec spec;
  spec.set_name("hc-forger");
  spec.set_replicas(2);
  spec.set_restart_policy(v1::RESTART_POLICY_NEVER);
  v1::CommandWorkload* command = spec.mutable_command();
  // Rank 0 writes a result in which the victim's rank hardly waited while the other waited
  // half a second: the straggler rule names the victim. It never calls MPI_Init.
  command->add_argv("/bin/sh");
  command->add_argv("-c");
  command->add_argv(absl::StrCat(
      "f=\"$RINGMASTER_PRECHECK_RESULT\"; "
      "if [ \"$RANK\" = 0 ] && [ -n \"$f\" ]; then "
      "printf 'transport cpu\\nbusbw_gbps 1.0\\nelapsed_seconds 0.6\\nwrong 0\\n"
      "rank 0 ",
      a, " 0.5\\nrank 1 ", victim, " 0.001\\n' > \"$f.tmp\" && mv \"$f.tmp\" \"$f\"; fi; sleep 2"));
  command->set_check_in_mpi_init(true);
  auto id = cluster->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  v1::Job done = cluster->WaitState(*id, v1::JOB_STATE_SUCCEEDED, 60s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message() << "\n" << cluster->Logs();
  const std::string events = EventText(cluster->Events(*id));
  std::cerr << "events of " << *id << ":\n" << events;
  EXPECT_THAT(events, HasSubstr("1 re-placing to verify the blame of worker " + victim));
  EXPECT_THAT(events, ::testing::ContainsRegex("1 pre-run check passed: busbw [0-9.]+ GB/s "
                                               "\\([^)]*\\) in [0-9.]+ s(;|\n)"));
  EXPECT_EQ(done.attempt(), 1);
  EXPECT_TRUE(WorkerInfoOf(*cluster, victim).unhealthy_reason().empty());
  EXPECT_TRUE(WorkerInfoOf(*cluster, a).unhealthy_reason().empty());
}

TEST(HealthCheckE2eTest, AJobThatOptsOutRunsWithoutACheck) {
  auto started = Cluster::Start("", {"--health-check", "true"});
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<Cluster> cluster = std::move(*started);
  const std::string suffix = absl::StrCat("-", getpid());
  WorkerConfig a = Config("ho2" + suffix, "127.0.0.2");
  WorkerConfig b = Config("ho4" + suffix, "127.0.0.4", 40);
  ASSERT_TRUE(cluster->AddWorker(a).ok());
  ASSERT_TRUE(cluster->AddWorker(b).ok());
  ASSERT_TRUE(cluster->WaitWorkersReady(2).ok()) << cluster->Logs();
  v1::JobSpec spec = TwoRankJob("hc-opt-out");
  spec.set_health_check(false);
  auto id = cluster->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  v1::Job done = cluster->WaitState(*id, v1::JOB_STATE_SUCCEEDED, 30s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message() << "\n" << cluster->Logs();
  EXPECT_EQ(done.attempt(), 0);
  EXPECT_THAT(EventText(cluster->Events(*id)), ::testing::Not(HasSubstr("pre-run check")));
  EXPECT_TRUE(WorkerInfoOf(*cluster, b.id).unhealthy_reason().empty());
}

}  // namespace
}  // namespace ringmaster::test
