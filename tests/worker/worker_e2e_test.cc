// End to end: PostgreSQL, Redis, the real scheduler and three real workers on 127.0.0.2, .3
// and .4, running real MPI jobs through mpirun, ringmaster-rsh and ringmaster-rank.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint_metadata.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/cluster/cluster_test.h"
#include "support/proc_file.h"
#include "support/wait_for.h"
#include "worker/rpc/agent_client.h"

namespace ringmaster::test {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using namespace std::chrono_literals;

// Every rank proves where it ran and that it talked to the others (the allreduce).
constexpr const char* kRingProbe =
    "from mpi4py import MPI\n"
    "import os\n"
    "c = MPI.COMM_WORLD\n"
    "total = c.allreduce(c.rank)\n"
    "e = os.environ\n"
    "print(f\"rank {c.rank} of {c.size} on {e['RINGMASTER_WORKER_ID']} "
    "({e['RINGMASTER_WORKER_ADDRESS']}) RANK={e['RANK']} LOCAL_RANK={e['LOCAL_RANK']} "
    "WORLD_SIZE={e['WORLD_SIZE']} MASTER={e['MASTER_ADDR']}:{e['MASTER_PORT']} "
    "CUDA_VISIBLE_DEVICES=[{e['CUDA_VISIBLE_DEVICES']}] "
    "SIMULATED=[{e.get('RINGMASTER_SIMULATED_GPUS', '')}] allreduce={total}\", flush=True)\n";

v1::JobSpec CommandSpec(const std::string& name, int replicas, std::vector<std::string> argv) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_replicas(replicas);
  for (auto& a : argv) spec.mutable_command()->add_argv(a);
  return spec;
}

v1::JobSpec ShellSpec(const std::string& name, int replicas, const std::string& script) {
  return CommandSpec(name, replicas, {"/bin/sh", "-c", script});
}

// `spec` waiting for job `id` to end as `condition` says.
v1::JobSpec After(v1::JobSpec spec, const std::string& id, v1::DependencyCondition condition) {
  v1::JobDependency* d = spec.add_after();
  d->set_job_id(id);
  d->set_condition(condition);
  return spec;
}

std::map<std::string, std::string> JobTag(const std::string& job_id) {
  return {{"RINGMASTER_JOB_ID", job_id}};
}

// One cluster for the whole suite (starting and stopping one takes seconds): three workers,
// each with 2 CPU slots and 2 simulated t4 GPUs. Every test leaves it as it found it: no live
// job, no job process, three workers READY.
class WorkerE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    const auto start = std::chrono::steady_clock::now();
    ASSERT_NO_FATAL_FAILURE(
        StartCluster({}, {.prefix = "w", .count = 3, .cpu_slots = 2, .simulated_gpus = 2}));
    std::cerr << "cluster up in " << MsSince(start) << " ms\n";
  }

  static void TearDownTestSuite() {
    const auto start = std::chrono::steady_clock::now();
    ClusterTest::TearDownTestSuite();
    std::cerr << "cluster down in " << MsSince(start) << " ms\n";
  }

  void TearDown() override {
    if (cluster_ == nullptr) return;
    ClusterTest::TearDown();
    // Whatever a failed test left behind must not spill into the next one.
    CancelLiveJobs();
    for (const std::string& id : submitted_) {
      EXPECT_THAT(WaitNoProcesses(JobTag(id)), IsEmpty()) << "processes of " << id << " left";
    }
    // A test that stopped before restarting the worker it killed must not fail the next ones.
    std::vector<std::string> dead;
    for (const auto& w : cluster_->workers()) {
      if (!w->process().Running()) dead.push_back(w->config().id);
    }
    for (const std::string& id : dead) EXPECT_TRUE(cluster_->RestartWorker(id).ok()) << id;
    EXPECT_TRUE(cluster_->WaitWorkersReady(3).ok());
  }

  static int64_t MsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  }

  std::string SubmitOk(const v1::JobSpec& spec) {
    auto id = cluster_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    if (id.ok()) submitted_.push_back(*id);
    return id.ok() ? *id : "";
  }

  // The agent address of the worker that holds `rank` in `job`'s placement.
  static std::string AgentOf(const v1::Job& job, int rank) {
    for (const auto& r : job.placement()) {
      if (r.rank() == rank) return absl::StrCat(r.worker_address(), ":", r.worker_port());
    }
    return "";
  }

  static std::set<std::string> WorkersOf(const v1::Job& job) {
    std::set<std::string> ids;
    for (const auto& r : job.placement()) ids.insert(r.worker_id());
    return ids;
  }

  // Waits until no process carrying `tag` (and, if given, any value of `name`) is left on
  // this machine; returns what is left.
  static std::vector<pid_t> WaitNoProcesses(const std::map<std::string, std::string>& tag,
                                            const std::string& name = "",
                                            std::chrono::milliseconds timeout = 10s) {
    std::vector<pid_t> left;
    WaitFor(
        [&] {
          left = ProcessesWithEnv(tag, name);
          return left.empty();
        },
        timeout, 50ms);
    return left;
  }

  std::vector<std::string> submitted_;
};

TEST_F(WorkerE2eTest, FourRankMpiJobSpansTwoWorkersAndSucceeds) {
  v1::JobSpec spec = CommandSpec("ring", 4, {"/usr/bin/python3", "-c", kRingProbe});
  spec.set_gpus_per_replica(1);
  spec.set_gpu_type("t4");
  const auto start = std::chrono::steady_clock::now();
  const std::string id = SubmitOk(spec);
  auto placed = cluster_->WaitPlaced(id, 0);
  ASSERT_TRUE(placed.ok()) << placed.status();
  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.ShortDebugString();
  std::cerr << "4-rank mpi4py job: submit to SUCCEEDED in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count()
            << " ms\n";

  ASSERT_THAT(WorkersOf(*placed), SizeIs(2));  // packed: 2 + 2
  const std::string master = placed->placement(0).worker_address();
  std::set<std::string> seen_workers;
  for (const auto& r : placed->placement()) {
    auto log = cluster_->RankLog(AgentOf(*placed, r.rank()), id, r.rank());
    ASSERT_TRUE(log.ok()) << log.status();
    // The rank ran where it was placed, saw its own environment, and reduced with all four.
    EXPECT_THAT(*log, HasSubstr(absl::StrCat("rank ", r.rank(), " of 4 on ", r.worker_id(), " (",
                                             r.worker_address(), ") RANK=", r.rank())));
    EXPECT_THAT(*log, HasSubstr(absl::StrCat("LOCAL_RANK=", r.rank() % 2,
                                             " WORLD_SIZE=4 MASTER=", master, ":")));
    EXPECT_THAT(*log, HasSubstr(absl::StrCat("CUDA_VISIBLE_DEVICES=[] SIMULATED=[",
                                             r.gpu_indices(0), "] allreduce=6")));
    seen_workers.insert(r.worker_id());
  }
  EXPECT_THAT(seen_workers, SizeIs(2));
  // ringctl logs finds it too, though the ended job has no placement any more: through the
  // scheduler, with only the CA from its flag (no certificate of its own).
  auto ringctl = Subprocess::Start(
      {RINGMASTER_BINARY_DIR "/cli/ringctl", "--scheduler", cluster_->scheduler().addr(),
       "--tls-ca", TestCerts::Get().ca(), "logs", id, "--rank", "2"},
      {{"RINGMASTER_TLS_CERT", ""}, {"RINGMASTER_TLS_KEY", ""}});
  ASSERT_TRUE(ringctl.ok()) << ringctl.status();
  auto code = (*ringctl)->Wait(10s);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << (*ringctl)->Log();
  EXPECT_THAT((*ringctl)->Log(), HasSubstr("rank 2 of 4 on "));
  // A rank's log is only on the worker it ran on (ranks 0 and 3 are on different ones).
  EXPECT_EQ(cluster_->RankLog(AgentOf(*placed, 3), id, 0).status().code(),
            absl::StatusCode::kNotFound);
  // The agents serve logs to the scheduler only: a certificate of the cluster's CA that does
  // not name it (ringctl's old client certificate, a worker's) is refused, whoever asks.
  const CertFiles client = TestCerts::Get().Client();
  const CertFiles worker = TestCerts::Get().Worker(placed->placement(1).worker_id());
  for (const CertFiles* as : {&client, &worker}) {
    absl::StatusOr<std::string> refused = cluster_->RankLog(AgentOf(*placed, 0), id, 0, -1, as);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << as->cert;
    EXPECT_THAT(refused.status().message(), HasSubstr("ringmaster-scheduler")) << as->cert;
  }
}

TEST_F(WorkerE2eTest, TrainerJobOnCpuSlotsPrintsAndExportsItsThroughput) {
  v1::JobSpec spec;
  spec.set_name("train");
  spec.set_replicas(4);
  spec.mutable_trainer()->set_model("mlp-small");
  spec.mutable_trainer()->set_steps(12);
  spec.mutable_trainer()->set_batch_size(32);
  spec.mutable_trainer()->set_checkpoint_every(5);
  const std::string id = SubmitOk(spec);
  // The workers' default --checkpoint-root.
  const std::string checkpoints = absl::StrCat("/tmp/ringmaster-checkpoints/", id);
  auto placed = cluster_->WaitPlaced(id, 0);
  ASSERT_TRUE(placed.ok()) << placed.status();
  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED, 60s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.ShortDebugString();
  // The spec's checkpoint_every reached the trainer: steps 5 and 10 saved, the newest is 10 (the
  // trainer's default, 50, would have saved none of 12 steps).
  absl::StatusOr<CheckpointMetadata> meta = ReadCheckpointMetadata(checkpoints);
  std::filesystem::remove_all(checkpoints);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->step, 10);
  auto log = cluster_->RankLog(AgentOf(*placed, 0), id, 0);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_THAT(*log, HasSubstr("4 rank(s)"));
  EXPECT_THAT(*log, HasSubstr("total images/sec: "));
  WorkerProcess* launcher = cluster_->worker(placed->placement(0).worker_id());
  ASSERT_NE(launcher, nullptr);
  const std::string metrics = cluster_->Metrics(*launcher);
  EXPECT_THAT(metrics, HasSubstr(absl::StrCat("ringmaster_worker_rank_images_per_second{job_id=\"",
                                              id, "\",rank=\"0\"}")))
      << metrics;
}

TEST_F(WorkerE2eTest, CancelMidRunLeavesNoRankProcessOnAnyWorker) {
  // The shell also starts a grandchild in a session of its own, as a daemonizing rank would.
  const std::string id =
      SubmitOk(ShellSpec("sleepy", 4, "setsid sleep 600 & echo started; sleep 600"));
  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_RUNNING);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.ShortDebugString();
  // mpirun, rsh, orted, wrappers, shells and sleeps of all four ranks.
  ASSERT_TRUE(WaitFor([&] { return ProcessesWithEnv(JobTag(id)).size() >= 12; }, 10s));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(cluster_->Cancel(id).ok());
  EXPECT_THAT(WaitNoProcesses(JobTag(id)), IsEmpty());
  std::cerr << "cancel to no process left: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count()
            << " ms\n";
  EXPECT_EQ(cluster_->WaitState(id, v1::JOB_STATE_CANCELLED).state(), v1::JOB_STATE_CANCELLED);
}

TEST_F(WorkerE2eTest, KilledLauncherWorkerRestartsTheJobOnTheRemainingCapacity) {
  v1::JobSpec spec = ShellSpec("survivor", 4, "sleep 600");
  spec.set_restart_policy(v1::RESTART_POLICY_ON_FAILURE);
  spec.set_backoff_limit(3);
  const std::string id = SubmitOk(spec);
  ASSERT_EQ(cluster_->WaitState(id, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
  auto first = cluster_->GetJob(id);
  ASSERT_TRUE(first.ok());
  const std::string victim = first->placement(0).worker_id();  // the launcher
  WorkerProcess* w = cluster_->worker(victim);
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->process().Kill(SIGKILL).ok());

  // A later attempt runs on the two workers left. (Usually attempt 1; when the other ranks'
  // failure reaches the scheduler before the dead worker's stream does, attempt 1 may still
  // land on it and fail in turn.)
  v1::Job restarted;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto job = cluster_->GetJob(id);
        if (!job.ok()) return false;
        restarted = *job;
        return restarted.state() == v1::JOB_STATE_RUNNING && restarted.attempt() >= 1 &&
               WorkersOf(restarted).count(victim) == 0;
      },
      20s, 20ms))
      << restarted.ShortDebugString();
  EXPECT_THAT(WorkersOf(restarted), SizeIs(2));
  // Nothing of attempt 0 survived, not even the ranks of the dead worker.
  EXPECT_THAT(WaitNoProcesses({{"RINGMASTER_JOB_ID", id}, {"RINGMASTER_ATTEMPT", "0"}}), IsEmpty());

  ASSERT_TRUE(cluster_->Cancel(id).ok());
  EXPECT_THAT(WaitNoProcesses(JobTag(id)), IsEmpty());
  bool restarted_event = false;
  for (const v1::JobEvent& e : cluster_->Events(id)) {
    restarted_event = restarted_event || (e.state() == v1::JOB_STATE_PENDING && e.attempt() >= 1);
  }
  EXPECT_TRUE(restarted_event) << "no restart among the job's events";
  ASSERT_TRUE(cluster_->RestartWorker(victim).ok());
}

TEST_F(WorkerE2eTest, FailingRanksEndTheJobFailedWithTheirExitCodeAfterTheBackoffLimit) {
  v1::JobSpec spec = ShellSpec("doomed", 4, "echo trying; exit 3");
  spec.set_restart_policy(v1::RESTART_POLICY_ON_FAILURE);
  spec.set_backoff_limit(1);
  const std::string id = SubmitOk(spec);
  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_FAILED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.ShortDebugString();
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.exit_code(), 3);
  std::vector<v1::JobEvent> events = cluster_->Events(id);
  ASSERT_FALSE(events.empty());
  int failures_with_code = 0;
  for (const v1::JobEvent& e : events) {
    if (e.exit_code() == 3 && absl::StrContains(e.reason(), "exited with code 3")) {
      ++failures_with_code;
    }
  }
  EXPECT_EQ(failures_with_code, 2);  // attempt 0 (restarted) and attempt 1 (FAILED)
  EXPECT_EQ(events.back().state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(events.back().exit_code(), 3);
  EXPECT_THAT(WaitNoProcesses(JobTag(id)), IsEmpty());
}

TEST_F(WorkerE2eTest, OneFailedRankStopsTheWholeGangOnEveryWorker) {
  const std::string id = SubmitOk(
      ShellSpec("one-bad-apple", 4, "if [ \"$RANK\" = 3 ]; then sleep 0.5; exit 5; fi; sleep 600"));
  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_FAILED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.ShortDebugString();
  EXPECT_EQ(job.exit_code(), 5);
  EXPECT_THAT(job.message(), HasSubstr("rank 3 on "));
  EXPECT_THAT(WaitNoProcesses(JobTag(id)), IsEmpty());
}

TEST_F(WorkerE2eTest, RuntimeLimitStopsTheGang) {
  v1::JobSpec spec = ShellSpec("overrun", 4, "sleep 600");
  spec.set_max_runtime_seconds(1);
  const std::string id = SubmitOk(spec);
  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_FAILED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.ShortDebugString();
  EXPECT_THAT(job.message(), HasSubstr("max_runtime_seconds"));
  EXPECT_THAT(WaitNoProcesses(JobTag(id)), IsEmpty());
}

TEST_F(WorkerE2eTest, ExecRunsNothingWithoutTheAttemptsTokenOrACertificateOfTheCa) {
  const std::string id = SubmitOk(ShellSpec("target", 2, "sleep 600"));
  ASSERT_EQ(cluster_->WaitState(id, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
  auto job = cluster_->GetJob(id);
  ASSERT_TRUE(job.ok());
  const std::string agent = AgentOf(*job, 0);
  // The real token, as mpirun holds it: the positive control.
  std::string token;
  for (pid_t pid : ProcessesWithEnv(JobTag(id))) {
    token = EnvOfProcess(pid, "RINGMASTER_TOKEN");
    if (!token.empty()) break;
  }
  ASSERT_FALSE(token.empty());
  // The workload (a team's program) gets the CA but not the worker's certificate and key,
  // which ringmaster-rank and the launch processes hold. A rank is STARTED (and the job
  // RUNNING) when ringmaster-rank has its environment, just before it runs the workload: wait
  // for the workload's processes (a `sleep` under each rank's `sh`).
  auto comm_of = [](pid_t pid) {
    std::ifstream comm(absl::StrCat("/proc/", pid, "/comm"));
    std::string name;
    std::getline(comm, name);
    return name;
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        int sleeps = 0;
        for (pid_t pid : ProcessesWithEnv(JobTag(id))) sleeps += comm_of(pid) == "sleep";
        return sleeps >= 2;
      },
      10s));
  int workloads = 0;
  for (pid_t pid : ProcessesWithEnv(JobTag(id))) {
    const std::string name = comm_of(pid);
    if (name == "ringmaster-rank" || name == "orted" || name == "mpirun" ||
        name == "ringmaster-rsh") {
      EXPECT_NE(EnvOfProcess(pid, "RINGMASTER_TLS_KEY"), "") << name;
      continue;
    }
    ++workloads;
    EXPECT_EQ(EnvOfProcess(pid, "RINGMASTER_TLS_KEY"), "") << name;
    EXPECT_EQ(EnvOfProcess(pid, "RINGMASTER_TLS_CERT"), "") << name;
    EXPECT_NE(EnvOfProcess(pid, "RINGMASTER_TLS_CA"), "") << name;
  }
  EXPECT_GT(workloads, 0);

  // A peer worker's certificate, as ringmaster-rsh holds it.
  auto credentials = [](const TlsOptions& tls) {
    return *MakeChannelCredentials(tls, ServerName::kAnyOfTheCa);
  };
  worker::AgentClient client(agent, credentials(TestCerts::Get().Worker("w2").Options()));
  auto exec_as = [&](worker::AgentClient& as, const std::string& job_id,
                     const std::string& with_token, const std::string& marker) {
    v1::ExecRequest req;
    req.set_job_id(job_id);
    req.set_attempt(0);
    req.set_token(with_token);
    req.add_argv("touch");
    req.add_argv(marker);
    return as.Exec(req, [](bool, std::string_view) {});
  };
  auto exec = [&](const std::string& job_id, const std::string& with_token,
                  const std::string& marker) { return exec_as(client, job_id, with_token, marker); };
  auto exists = [](const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
  };
  const std::string dir = cluster_->dir();
  EXPECT_EQ(exec(id, "not-the-token", dir + "/wrong").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(exec(id, "", dir + "/missing").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(exec("j-000000000000", token, dir + "/elsewhere").status().code(),
            absl::StatusCode::kPermissionDenied);
  // A worker the job is not placed on refuses the right token too.
  for (auto& w : cluster_->workers()) {
    if (WorkersOf(*job).count(w->config().id)) continue;
    worker::AgentClient outsider(w->agent_addr(),
                                 credentials(TestCerts::Get().Worker("w2").Options()));
    v1::ExecRequest req;
    req.set_job_id(id);
    req.set_attempt(0);
    req.set_token(token);
    req.add_argv("touch " + dir + "/outsider");
    EXPECT_EQ(outsider.Exec(req, [](bool, std::string_view) {}).status().code(),
              absl::StatusCode::kPermissionDenied);
    break;  // one is enough: each waits for an assignment that never comes
  }
  // The right token from a peer without a certificate, or with one of another CA: refused in
  // the handshake (mutual TLS), so nothing runs.
  worker::AgentClient no_certificate(agent, credentials(TestCerts::Get().CaOnly()));
  EXPECT_EQ(exec_as(no_certificate, id, token, dir + "/no-certificate").status().code(),
            absl::StatusCode::kUnavailable);
  CertFiles foreign = TestCerts::Foreign().Worker("w2");
  worker::AgentClient foreign_ca(
      agent, credentials(TlsOptions{foreign.cert, foreign.key, TestCerts::Get().ca(), false}));
  EXPECT_EQ(exec_as(foreign_ca, id, token, dir + "/foreign-ca").status().code(),
            absl::StatusCode::kUnavailable);
  v1::ReportRankRequest report;
  report.set_job_id(id);
  report.set_attempt(0);
  report.set_token(token);
  report.set_kind(v1::ReportRankRequest::KIND_EXITED);
  EXPECT_EQ(no_certificate.ReportRank(report, std::chrono::seconds(1)).code(),
            absl::StatusCode::kUnavailable);
  auto plaintext = grpc::InsecureChannelCredentials();
  worker::AgentClient plain(agent, plaintext);
  EXPECT_EQ(exec_as(plain, id, token, dir + "/plaintext").status().code(),
            absl::StatusCode::kUnavailable);
  auto allowed = exec(id, token, dir + "/allowed");
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_EQ(allowed->exit_code(), 0);
  EXPECT_TRUE(exists(dir + "/allowed"));
  for (const char* name :
       {"wrong", "missing", "elsewhere", "outsider", "no-certificate", "foreign-ca", "plaintext"}) {
    EXPECT_FALSE(exists(absl::StrCat(dir, "/", name))) << name;
  }
  ASSERT_TRUE(cluster_->Cancel(id).ok());
  EXPECT_THAT(WaitNoProcesses(JobTag(id)), IsEmpty());
}

// The programs of a job's processes on this machine (/proc/PID/comm).
std::multiset<std::string> ProgramsOf(const std::string& job_id) {
  std::multiset<std::string> programs;
  for (pid_t pid : ProcessesWithEnv({{"RINGMASTER_JOB_ID", job_id}}, "")) {
    std::string comm = ReadProcFile(absl::StrCat("/proc/", pid, "/comm"));
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (!comm.empty()) programs.insert(comm);
  }
  return programs;
}

TEST_F(WorkerE2eTest, OneRankJobStartsWithoutMpirunAndGetsWhatEveryRankGets) {
  // An MPI program, a singleton: MPI_Init works without mpirun, the world is this rank.
  const std::string id = SubmitOk(
      CommandSpec("solo", 1,
                  {"/usr/bin/python3", "-c",
                   "from mpi4py import MPI\nimport os\nc = MPI.COMM_WORLD\ne = os.environ\n"
                   "print(f\"rank {c.rank} of {c.size} allreduce={c.allreduce(5)} RANK={e['RANK']} "
                   "WORLD_SIZE={e['WORLD_SIZE']} MASTER={e['MASTER_ADDR']}:{e['MASTER_PORT']} "
                   "CKPT={'RINGMASTER_CHECKPOINT_DIR' in e}\", flush=True)\n"}));
  auto placed = cluster_->WaitPlaced(id, 0);
  ASSERT_TRUE(placed.ok()) << placed.status();
  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.ShortDebugString();
  auto log = cluster_->RankLog(AgentOf(*placed, 0), id, 0);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_THAT(*log, HasSubstr(absl::StrCat("rank 0 of 1 allreduce=5 RANK=0 WORLD_SIZE=1 MASTER=",
                                           placed->placement(0).worker_address(), ":")));
  EXPECT_THAT(*log, HasSubstr("CKPT=True"));
  // The events say why there was no check; the launcher ran ringmaster-rank, not mpirun.
  bool said = false;
  for (const v1::JobEvent& e : cluster_->Events(id)) {
    for (const char* checked : {"pre-run check passed", "pre-run check failed", "could not run"}) {
      EXPECT_THAT(e.reason(), ::testing::Not(HasSubstr(checked)));
    }
    said = said || absl::StrContains(e.reason(), "started without mpirun: no pre-run check");
  }
  EXPECT_TRUE(said);
  WorkerProcess* w = cluster_->worker(placed->placement(0).worker_id());
  ASSERT_NE(w, nullptr);
  const std::string dir = absl::StrCat(w->log_dir(), "/", id, "/0");
  EXPECT_TRUE(std::filesystem::exists(dir + "/launcher.log"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/mpirun.log"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/hostfile"));
  EXPECT_THAT(
      cluster_->Metrics(*w),
      HasSubstr("ringmaster_worker_launches_total{launcher=\"direct\",result=\"started\"}"));
}

TEST_F(WorkerE2eTest, OneRankJobWithoutMpirunFailsWithItsExitCodeAndStopsOnCancel) {
  const std::string failing = SubmitOk(ShellSpec("solo-fails", 1, "echo failing; exit 7"));
  v1::Job job = cluster_->WaitState(failing, v1::JOB_STATE_FAILED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.ShortDebugString();
  EXPECT_EQ(job.exit_code(), 7);

  // Its processes: the wrapper, the shell and the sleep, and no launcher of MPI.
  const std::string id =
      SubmitOk(ShellSpec("solo-sleeps", 1, "setsid sleep 600 & echo started; sleep 600"));
  ASSERT_EQ(cluster_->WaitState(id, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
  std::multiset<std::string> programs;
  ASSERT_TRUE(WaitFor(
      [&] {
        programs = ProgramsOf(id);
        return programs.count("sleep") == 2;
      },
      10s));
  EXPECT_EQ(programs.count("ringmaster-rank"), 1u);
  EXPECT_EQ(programs.count("mpirun"), 0u);
  EXPECT_EQ(programs.count("orted"), 0u);
  ASSERT_TRUE(cluster_->Cancel(id).ok());
  EXPECT_THAT(WaitNoProcesses(JobTag(id)), IsEmpty());
  EXPECT_EQ(cluster_->WaitState(id, v1::JOB_STATE_CANCELLED).state(), v1::JOB_STATE_CANCELLED);
}

// A program that ends leaving a process in a session of its own: its rank's wrapper stops it
// before reporting the exit (found by the rank's tags; it started after the wrapper).
TEST_F(WorkerE2eTest, ARankThatEndsLeavingADaemonLeavesNothingRunning) {
  for (int replicas : {1, 2}) {
    const std::string id = SubmitOk(
        ShellSpec(absl::StrCat("daemonizes-", replicas), replicas, "setsid sleep 600 & echo ok"));
    v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED);
    EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.ShortDebugString();
    EXPECT_THAT(WaitNoProcesses(JobTag(id), "", 2s), IsEmpty()) << replicas << " rank(s)";
  }
}

// The same with a daemon that also dropped its environment (so no tag finds it): it came back to
// the wrapper, its subreaper, when its parent ended, and is stopped as the wrapper's child.
TEST_F(WorkerE2eTest, ARankThatEndsLeavingAnUntaggedDaemonLeavesNothingRunning) {
  auto daemons = [] {
    int n = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      std::ifstream in(entry.path() / "cmdline");
      std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (cmdline == std::string("/bin/sleep\0"
                                 "60017\0",
                                 17))
        ++n;
    }
    return n;
  };
  const std::string id =
      SubmitOk(ShellSpec("untagged", 1, "setsid env -i /bin/sleep 60017 & echo ok"));
  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.ShortDebugString();
  EXPECT_TRUE(WaitFor([&] { return daemons() == 0; }, 3s)) << "the untagged daemon still runs";
}

TEST_F(WorkerE2eTest, OneRankJobThatAsksForMpirunRunsUnderIt) {
  v1::JobSpec spec = ShellSpec("solo-mpirun", 1, "sleep 600");
  spec.set_use_mpirun(true);
  spec.set_health_check(false);
  const std::string id = SubmitOk(spec);
  ASSERT_EQ(cluster_->WaitState(id, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(WaitFor([&] { return ProgramsOf(id).count("mpirun") == 1; }, 10s));
  ASSERT_TRUE(cluster_->Cancel(id).ok());
  EXPECT_THAT(WaitNoProcesses(JobTag(id)), IsEmpty());
}

TEST_F(WorkerE2eTest, AJobAfterAnotherRunsWhenItSucceedsAndIsCancelledAtOnceWhenItFails) {
  const std::string first = SubmitOk(ShellSpec("first", 2, "sleep 1"));
  const std::string failing = SubmitOk(ShellSpec("failing", 1, "sleep 1; exit 4"));
  const std::string next =
      SubmitOk(After(ShellSpec("next", 2, "echo next"), first, v1::DEPENDENCY_CONDITION_SUCCEEDED));
  const std::string doomed = SubmitOk(
      After(ShellSpec("doomed", 1, "echo never"), failing, v1::DEPENDENCY_CONDITION_SUCCEEDED));
  const std::string cleanup = SubmitOk(
      After(ShellSpec("cleanup", 1, "echo cleanup"), failing, v1::DEPENDENCY_CONDITION_FAILED));
  // The reason is the first pass's (right after the submit there may have been none yet).
  v1::Job waiting;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto job = cluster_->GetJob(next);
        if (job.ok()) waiting = *job;
        return job.ok() && !job->pending_reason().empty();
      },
      5s, 5ms));
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(waiting.pending_reason(), absl::StrCat("waiting for ", first, " to succeed"));

  v1::Job ran = cluster_->WaitState(next, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(ran.state(), v1::JOB_STATE_SUCCEEDED) << ran.ShortDebugString();
  auto done = cluster_->GetJob(first);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_GE(ran.started_at_ms(), done->finished_at_ms());

  v1::Job cancelled = cluster_->WaitState(doomed, v1::JOB_STATE_CANCELLED);
  ASSERT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED) << cancelled.ShortDebugString();
  EXPECT_EQ(cancelled.started_at_ms(), 0) << "it never ran";
  EXPECT_THAT(cancelled.message(), HasSubstr(absl::StrCat(failing, " ended FAILED")));
  auto failed = cluster_->GetJob(failing);
  ASSERT_TRUE(failed.ok());
  std::cerr << "cancelled " << cancelled.finished_at_ms() - failed->finished_at_ms()
            << " ms after its dependency failed\n";
  EXPECT_LT(cancelled.finished_at_ms() - failed->finished_at_ms(), 2000);
  EXPECT_EQ(cluster_->WaitState(cleanup, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);

  // Only jobs that exist can be named.
  auto unknown = cluster_->Submit(
      After(ShellSpec("orphan", 1, "true"), "j-0123456789ab", v1::DEPENDENCY_CONDITION_ENDED));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
  auto bad = cluster_->Submit(
      After(ShellSpec("bad", 1, "true"), first, v1::DEPENDENCY_CONDITION_UNSPECIFIED));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("after[0].condition"));
}

// kill -9 of the scheduler while a job waits for another: the new leader loads it, still
// waiting, and runs it once the other succeeded; the one that waits for a failure is cancelled.
TEST_F(WorkerE2eTest, DependenciesSurviveAKilledScheduler) {
  const std::string first = SubmitOk(ShellSpec("first", 1, "sleep 2"));
  const std::string next =
      SubmitOk(After(ShellSpec("next", 1, "true"), first, v1::DEPENDENCY_CONDITION_SUCCEEDED));
  const std::string on_failure =
      SubmitOk(After(ShellSpec("on-failure", 1, "true"), first, v1::DEPENDENCY_CONDITION_FAILED));
  ASSERT_EQ(cluster_->WaitState(first, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(cluster_->scheduler().Restart(SIGKILL).ok());
  v1::Job ran = cluster_->WaitState(next, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(ran.state(), v1::JOB_STATE_SUCCEEDED) << ran.ShortDebugString();
  auto done = cluster_->GetJob(first);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_GE(ran.started_at_ms(), done->finished_at_ms());
  v1::Job cancelled = cluster_->WaitState(on_failure, v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED) << cancelled.ShortDebugString();
  EXPECT_THAT(cancelled.message(), HasSubstr("ended SUCCEEDED, and this job waits for it to fail"));
}

// `spec` as an array of `count` tasks, at most `parallelism` at once.
v1::JobSpec ArrayOf(v1::JobSpec spec, int count, int parallelism) {
  spec.mutable_array()->set_count(count);
  spec.mutable_array()->set_parallelism(parallelism);
  return spec;
}

// The log of rank 0 of `task`'s first attempt, read where its worker wrote it.
std::string TaskLog(Cluster& cluster, const std::string& task) {
  for (const auto& w : cluster.workers()) {
    std::ifstream in(absl::StrCat(w->log_dir(), "/", task, "/0/rank-0.log"));
    if (in) return std::string(std::istreambuf_iterator<char>(in), {});
  }
  return "";
}

// The most tasks of `array` (count tasks) that ran at the same time, from their start and end.
int MostAtOnce(Cluster& cluster, const std::string& array, int count) {
  std::vector<std::pair<int64_t, int>> edges;
  for (int i = 0; i < count; ++i) {
    auto task = cluster.GetJob(absl::StrCat(array, "-", i));
    if (!task.ok() || task->started_at_ms() == 0) continue;
    edges.emplace_back(task->started_at_ms(), 1);
    edges.emplace_back(task->finished_at_ms(), -1);
  }
  std::sort(edges.begin(), edges.end());  // an end before a start at the same ms
  int now = 0, most = 0;
  for (const auto& [t, d] : edges) most = std::max(most, now += d);
  return most;
}

TEST_F(WorkerE2eTest, AnArraysTasksReadTheirIndexAndAJobAfterItRunsWhenEveryTaskSucceeded) {
  const std::string array = SubmitOk(ArrayOf(
      ShellSpec("sweep", 1,
                "echo task $RINGMASTER_ARRAY_INDEX of $RINGMASTER_ARRAY_COUNT argv {index}; "
                "sleep 0.3"),
      6, 2));
  const std::string after =
      SubmitOk(After(ShellSpec("gather", 1, "true"), array, v1::DEPENDENCY_CONDITION_SUCCEEDED));
  v1::Job done = cluster_->WaitState(array, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.ShortDebugString();
  EXPECT_EQ(done.array_status().succeeded(), 6);
  EXPECT_EQ(done.message(), "all 6 tasks succeeded");
  for (int i = 0; i < 6; ++i) {
    const std::string task = absl::StrCat(array, "-", i);
    EXPECT_THAT(TaskLog(*cluster_, task), HasSubstr(absl::StrCat("task ", i, " of 6 argv ", i)))
        << task;
    auto job = cluster_->GetJob(task);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->array_id(), array);
    EXPECT_EQ(job->array_index(), i);
  }
  EXPECT_LE(MostAtOnce(*cluster_, array, 6), 2);
  v1::Job ran = cluster_->WaitState(after, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(ran.state(), v1::JOB_STATE_SUCCEEDED) << ran.ShortDebugString();
  EXPECT_GE(ran.started_at_ms(), done.finished_at_ms());
}

TEST_F(WorkerE2eTest, AJobAfterAnArrayIsCancelledAtOnceWhenOneOfItsTasksFails) {
  const std::string array = SubmitOk(ArrayOf(
      ShellSpec("sweep", 1, "sleep 0.2; [ {index} -ne 1 ] || exit 3"), 5, 1));
  const std::string doomed =
      SubmitOk(After(ShellSpec("gather", 1, "true"), array, v1::DEPENDENCY_CONDITION_SUCCEEDED));
  v1::Job cancelled = cluster_->WaitState(doomed, v1::JOB_STATE_CANCELLED);
  ASSERT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED) << cancelled.ShortDebugString();
  auto failed = cluster_->GetJob(absl::StrCat(array, "-1"));
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->state(), v1::JOB_STATE_FAILED);
  std::cerr << "cancelled " << cancelled.finished_at_ms() - failed->finished_at_ms()
            << " ms after task 1 failed\n";
  EXPECT_LT(cancelled.finished_at_ms() - failed->finished_at_ms(), 2000);
  auto array_now = cluster_->GetJob(array);
  ASSERT_TRUE(array_now.ok());
  EXPECT_EQ(array_now->state(), v1::JOB_STATE_RUNNING) << "three tasks still to run";
  v1::Job ended = cluster_->WaitState(array, v1::JOB_STATE_FAILED);
  ASSERT_EQ(ended.state(), v1::JOB_STATE_FAILED) << ended.ShortDebugString();
  EXPECT_EQ(ended.array_status().succeeded(), 4);
  EXPECT_THAT(ended.array_status().failed_indices(), ElementsAre(1));
}

// kill -9 of the scheduler in the middle of an array: every task runs, none twice. A task
// placed in the moment before the kill may never have reached its worker, which then does not
// hold it when it registers with the new leader: that attempt fails without having run (as any
// job's would), so the array restarts on failure here, and what is checked is what ran.
TEST_F(WorkerE2eTest, AnArraySurvivesAKilledSchedulerLosingNoTaskAndRunningNoneTwice) {
  const std::string ran = absl::StrCat(cluster_->dir(), "/array-ran");
  v1::JobSpec spec =
      ArrayOf(ShellSpec("sweep", 1, absl::StrCat("echo {index} >> ", ran, "; sleep 0.5")), 12, 3);
  spec.set_restart_policy(v1::RESTART_POLICY_ON_FAILURE);
  const std::string array = SubmitOk(spec);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto job = cluster_->GetJob(array);
        return job.ok() && job->array_status().succeeded() >= 3;
      },
      30s, 20ms));
  ASSERT_TRUE(cluster_->scheduler().Restart(SIGKILL).ok());
  v1::Job done = cluster_->WaitState(array, v1::JOB_STATE_SUCCEEDED, 60s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.ShortDebugString();
  std::ifstream in(ran);
  std::map<int, int> runs;
  for (std::string line; std::getline(in, line);) ++runs[std::stoi(line)];
  ASSERT_EQ(runs.size(), 12u);
  for (const auto& [index, n] : runs) EXPECT_EQ(n, 1) << "task " << index;
  for (int i = 0; i < 12; ++i) {
    auto task = cluster_->GetJob(absl::StrCat(array, "-", i));
    ASSERT_TRUE(task.ok()) << task.status();
    EXPECT_EQ(task->state(), v1::JOB_STATE_SUCCEEDED) << task->ShortDebugString();
    EXPECT_LE(task->attempt(), 1) << "at most the one undelivered attempt before";
  }
}

// A burst of one-rank jobs: every one succeeds, no mpirun is started for any, and every worker
// is still there afterwards.
TEST_F(WorkerE2eTest, BurstOfFiveHundredOneRankJobsSucceedsWithoutMpirun) {
  constexpr int kJobs = 500;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) {
    auto id = cluster_->Submit(CommandSpec(absl::StrCat("burst-", i), 1, {"true"}));
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  ASSERT_TRUE(WaitFor([&] { return cluster_->LiveJobs().empty(); }, 300s, 200ms))
      << cluster_->LiveJobs().size() << " jobs still live";
  std::cerr << kJobs << " one-rank jobs submitted and ended in " << MsSince(start) << " ms\n";
  int succeeded = 0;
  for (const std::string& id : ids) {
    auto job = cluster_->GetJob(id);
    ASSERT_TRUE(job.ok()) << job.status();
    if (job->state() == v1::JOB_STATE_SUCCEEDED) {
      ++succeeded;
    } else {
      ADD_FAILURE() << job->ShortDebugString();
    }
  }
  EXPECT_EQ(succeeded, kJobs);
  int direct = 0, mpirun = 0;
  for (const auto& w : cluster_->workers()) {
    EXPECT_TRUE(w->process().Running()) << w->config().id;
    for (const std::string& id : ids) {
      const std::string dir = absl::StrCat(w->log_dir(), "/", id, "/0");
      direct += std::filesystem::exists(dir + "/launcher.log") ? 1 : 0;
      mpirun += std::filesystem::exists(dir + "/mpirun.log") ? 1 : 0;
    }
  }
  EXPECT_EQ(direct, kJobs);
  EXPECT_EQ(mpirun, 0);
}

TEST_F(WorkerE2eTest, RanksSurviveASchedulerRestartAndTheJobStillSucceeds) {
  // Ranks 0..1 end while the scheduler is down or just back; ranks 2..3 a while later.
  const std::string id =
      SubmitOk(ShellSpec("steady", 4, "if [ \"$RANK\" -lt 2 ]; then sleep 1; else sleep 4; fi"));
  ASSERT_EQ(cluster_->WaitState(id, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(cluster_->scheduler().Restart(SIGKILL).ok());
  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.ShortDebugString();
  EXPECT_EQ(job.attempt(), 0);
  EXPECT_THAT(WaitNoProcesses(JobTag(id)), IsEmpty());
}

}  // namespace
}  // namespace ringmaster::test
