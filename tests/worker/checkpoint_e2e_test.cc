// End to end: ringmaster-train under the platform, interrupted and resumed. A real scheduler,
// Postgres, Redis, two workers (127.0.0.2, .3) and mpirun rings run the trainer as a command
// workload (so the test picks every trainer flag it needs); every run must end with the weights
// checksum of the same training run never interrupted, and the steps lost are printed:
//   - one rank SIGKILLed mid-way, the job restarted by its OnFailure policy: at most
//     --checkpoint-every steps lost;
//   - the job preempted (SIGTERM to every rank, a grace period, as a reclaiming queue does):
//     the ranks agree on a step, checkpoint it and stop, so no step is lost.
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/checkpoint_metadata.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/cluster/cluster_test.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr int kSteps = 60;
constexpr int kCheckpointEvery = 10;
// The preempted trainer's run: long enough that its SIGTERM lands mid-run. At about 5 ms a step,
// 60 steps left a quarter of a second after step 10, which a loaded machine's preemption
// (a pass, two commits, the stop's way to the worker) missed once.
constexpr int kPreemptedSteps = 600;
// The worker's default --checkpoint-root, which the cluster's workers keep.
constexpr const char* kCheckpointRoot = "/tmp/ringmaster-checkpoints";

// Two ranks, one BLAS thread each: the same arithmetic wherever the ranks are placed.
v1::JobSpec TrainerSpec(const std::string& name, int checkpoint_every, int steps = kSteps) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_replicas(2);
  for (const std::string& a :
       {std::string(RINGMASTER_BINARY_DIR "/trainer/ringmaster-train"), std::string("--model"),
        std::string("mlp-small"), std::string("--device"), std::string("cpu"),
        std::string("--batch-size"), std::string("32"), std::string("--data-batches"),
        std::string("8"), std::string("--bucket-mb"), std::string("1"), std::string("--steps"),
        absl::StrCat(steps), std::string("--log-every"), std::string("1"),
        std::string("--checkpoint-every"), absl::StrCat(checkpoint_every)}) {
    spec.mutable_command()->add_argv(a);
  }
  (*spec.mutable_command()->mutable_env())["OPENBLAS_NUM_THREADS"] = "1";
  return spec;
}

// The last "step N/" progress line of a trainer log; 0 when none.
int LastStep(const std::string& log) {
  static const std::regex kStep("step ([0-9]+)/[0-9]+ loss");
  int last = 0;
  for (std::sregex_iterator it(log.begin(), log.end(), kStep), end; it != end; ++it) {
    last = std::stoi((*it)[1]);
  }
  return last;
}

std::string Match(const std::string& log, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(log, m, std::regex(pattern)) ? m[1].str() : "";
}

class CheckpointE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(StartCluster({"--preemption-grace-ms", "10000"},
                                         {.prefix = "ck", .cpu_slots = 2, .simulated_gpus = 2}));
  }

  static void TearDownTestSuite() {
    ClusterTest::TearDownTestSuite();
    // The checkpoints (6.8 MB each) would otherwise pile up in the workers' shared root.
    for (const std::string& id : submitted_) std::filesystem::remove_all(Dir(id));
  }

  void TearDown() override {
    if (cluster_ == nullptr) return;
    ClusterTest::TearDown();
    CancelLiveJobs();
  }

  static std::string SubmitOk(const v1::JobSpec& spec) {
    auto id = cluster_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    if (id.ok()) submitted_.push_back(*id);
    return id.ok() ? *id : "";
  }

  // Rank 0's log of one attempt, from whichever worker ran it.
  static std::string Rank0Log(const std::string& job, int attempt) {
    for (const auto& w : cluster_->workers()) {
      absl::StatusOr<std::string> log = cluster_->RankLog(w->agent_addr(), job, 0, attempt);
      if (log.ok()) return *log;
    }
    return "";
  }

  static std::string Checksum(const std::string& log) {
    return Match(log, "weights checksum: ([0-9a-f]{16})");
  }

  // The checksum of the run of `steps` never interrupted, computed once on this cluster.
  static std::string Baseline(int steps = kSteps) {
    static std::map<int, std::string> checksums;
    std::string& checksum = checksums[steps];
    if (!checksum.empty()) return checksum;
    // Checkpoints change no weights: the longer run saves none.
    const std::string id =
        SubmitOk(TrainerSpec("whole", steps == kSteps ? kCheckpointEvery : 0, steps));
    v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED, 60s);
    EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.ShortDebugString();
    checksum = Checksum(Rank0Log(id, 0));
    EXPECT_FALSE(checksum.empty()) << Rank0Log(id, 0);
    return checksum;
  }

  static std::string Dir(const std::string& job) { return absl::StrCat(kCheckpointRoot, "/", job); }

  static std::vector<std::string> submitted_;
};

std::vector<std::string> CheckpointE2eTest::submitted_;

// The pid of the trainer process (not its wrapper) of `rank` of `job`.
std::optional<pid_t> TrainerPid(const std::string& job, int rank) {
  for (pid_t pid : ProcessesWithEnv({{"RINGMASTER_JOB_ID", job}, {"RANK", absl::StrCat(rank)}})) {
    std::ifstream comm(absl::StrCat("/proc/", pid, "/comm"));
    std::string name;
    std::getline(comm, name);
    if (name == "ringmaster-trai") return pid;  // comm keeps 15 characters
  }
  return std::nullopt;
}

TEST_F(CheckpointE2eTest, ARankKilledMidRunResumesFromItsCheckpointWithIdenticalWeights) {
  const std::string baseline = Baseline();
  ASSERT_FALSE(baseline.empty());
  v1::JobSpec spec = TrainerSpec("killed", kCheckpointEvery);
  spec.set_restart_policy(v1::RESTART_POLICY_ON_FAILURE);
  spec.set_backoff_limit(2);
  const std::string id = SubmitOk(spec);

  // Past the first checkpoint, SIGKILL rank 1 (no chance to save anything).
  std::optional<pid_t> victim;
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<CheckpointMetadata> meta = ReadCheckpointMetadata(Dir(id));
        if (!meta.ok() || meta->step < kCheckpointEvery) return false;
        // Half-way to the next one, so that work is lost.
        if (LastStep(Rank0Log(id, 0)) < kCheckpointEvery * 3 / 2) return false;
        victim = TrainerPid(id, 1);
        return victim.has_value();
      },
      30s, 10ms))
      << "no checkpoint of " << id << " at step " << kCheckpointEvery;
  ASSERT_EQ(::kill(*victim, SIGKILL), 0);
  // The scheduler saw the checkpoint through rank 0's worker (ringctl get shows it).
  v1::Job seen;
  EXPECT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::Job> job = cluster_->GetJob(id);
        if (job.ok()) seen = *job;
        return job.ok() && seen.last_checkpoint_step() >= kCheckpointEvery;
      },
      10s, 20ms))
      << seen.ShortDebugString();
  EXPECT_GT(seen.last_checkpoint_time_ms(), seen.created_at_ms());

  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED, 60s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.ShortDebugString();
  EXPECT_EQ(job.attempt(), 1);
  const std::string first = Rank0Log(id, 0);
  const std::string second = Rank0Log(id, 1);
  const int reached = LastStep(first);
  int resumed = -1;
  ASSERT_TRUE(
      absl::SimpleAtoi(Match(second, "resumed from checkpoint .* at step ([0-9]+)"), &resumed))
      << second;
  const int lost = reached - resumed;
  std::cerr << "SIGKILL of rank 1: attempt 0 reached step " << reached << ", attempt 1 resumed at "
            << resumed << ": " << lost << " step(s) lost (checkpoint every " << kCheckpointEvery
            << ")\n";
  EXPECT_GE(resumed, kCheckpointEvery);
  EXPECT_GE(lost, 0);
  EXPECT_LE(lost, kCheckpointEvery);
  EXPECT_EQ(Checksum(second), baseline) << second;
  EXPECT_THAT(second, HasSubstr("weights consistent across 2 ranks: yes"));
}

TEST_F(CheckpointE2eTest, APreemptedTrainerCheckpointsOnSigtermAndResumesWithIdenticalWeights) {
  const std::string baseline = Baseline(kPreemptedSteps);
  ASSERT_FALSE(baseline.empty());
  // Two teams of one cohort, 2 t4 each; team A fills all four GPUs, its trainer borrowing B's.
  absl::Status queues = cluster_->CreateCohortQueues({"team-a", "team-b"}, "lab", "t4", 2);
  ASSERT_TRUE(queues.ok()) << queues;
  auto on_t4 = [](v1::JobSpec spec, const std::string& queue) {
    spec.set_queue(queue);
    spec.set_gpus_per_replica(1);
    spec.set_gpu_type("t4");
    return spec;
  };
  v1::JobSpec sleeper;
  sleeper.set_name("a-first");
  sleeper.set_replicas(2);
  for (const char* a : {"/bin/sh", "-c", "sleep 600"}) sleeper.mutable_command()->add_argv(a);
  const std::string first = SubmitOk(on_t4(sleeper, "team-a"));
  ASSERT_EQ(cluster_->WaitState(first, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
  // Checkpoints on SIGTERM only: whatever it keeps, it kept because of the preemption.
  const std::string id = SubmitOk(on_t4(TrainerSpec("a-trainer", 0, kPreemptedSteps), "team-a"));
  ASSERT_TRUE(WaitFor([&] { return LastStep(Rank0Log(id, 0)) >= 10; }, 30s, 20ms))
      << Rank0Log(id, 0);

  v1::JobSpec claim = sleeper;
  claim.set_name("b-own-share");
  claim.mutable_command()->set_argv(2, "sleep 1");
  const std::string b = SubmitOk(on_t4(claim, "team-b"));

  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED, 60s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.ShortDebugString();
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(cluster_->WaitState(b, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  const std::string before = Rank0Log(id, 0);
  const std::string after = Rank0Log(id, 1);
  int stopped = -1;
  int resumed = -1;
  ASSERT_TRUE(absl::SimpleAtoi(
      Match(before, "stopping after step ([0-9]+) on SIGTERM \\(checkpoint saved\\)"), &stopped))
      << before;
  ASSERT_TRUE(
      absl::SimpleAtoi(Match(after, "resumed from checkpoint .* at step ([0-9]+)"), &resumed))
      << after;
  const int lost = LastStep(before) - resumed;
  std::cerr << "preemption (SIGTERM): attempt 0 stopped after step " << stopped
            << ", attempt 1 resumed at " << resumed << ": " << lost << " step(s) lost\n";
  EXPECT_EQ(resumed, stopped);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(Checksum(after), baseline) << after;
  ASSERT_TRUE(cluster_->Cancel(first).ok());
}

}  // namespace
}  // namespace ringmaster::test
