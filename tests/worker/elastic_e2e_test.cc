// End to end: an elastic job (2 to 4 ranks) on two workers x 2 simulated t4, shared by two
// teams through queues of one cohort. It starts at 2 while team B holds the other 2, grows to 4
// once they stayed idle for the delay, shrinks back to 2 when team B reclaims its nominal quota,
// and ends SUCCEEDED; every attempt's ranks see the size they run at and RINGMASTER_ELASTIC=1.
// The same with the built-in trainer (which resumes at each new size, keeping its global batch)
// and with docs/examples/elastic_mpi4py.py (whose final weights match a run never resized).
// Real scheduler, Postgres, Redis, workers and mpirun rings. Prints how long each resize took.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/cluster/cluster_test.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using namespace std::chrono_literals;

constexpr int kGraceMs = 5000;

// Each rank writes what it was told (attempt, rank, size, elastic) next to the job's checkpoints,
// then works until the test drops "finish" there; SIGTERM ends it as a checkpointing program
// would (saving is the trainer's business; here it only says it saw the signal).
constexpr const char* kElastic =
    "d=$RINGMASTER_CHECKPOINT_DIR; "
    "echo \"$WORLD_SIZE $RINGMASTER_ELASTIC\" > \"$d/seen-$RINGMASTER_ATTEMPT-$RANK\"; "
    "trap 'echo \"$RINGMASTER_ATTEMPT\" > \"$d/sigterm-$RINGMASTER_ATTEMPT-$RANK\"; exit 143' TERM; "
    "while [ ! -f \"$d/finish\" ]; do sleep 0.2; done";

v1::JobSpec Spec(const std::string& name, const std::string& queue, const std::string& script) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_queue(queue);
  spec.set_replicas(2);
  spec.set_gpus_per_replica(1);
  spec.set_gpu_type("t4");
  // A limit far ahead: what is left of it is what a growth is judged to save.
  spec.set_max_runtime_seconds(3600);
  for (const char* a : {"/bin/sh", "-c"}) spec.mutable_command()->add_argv(a);
  spec.mutable_command()->add_argv(script);
  return spec;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all;
}

class ElasticE2eTest : public TwoTeamsTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(
        StartTwoTeams({"--preemption-grace-ms", std::to_string(kGraceMs), "--elastic-idle-delay-ms",
                       "3000", "--elastic-restart-cost-ms", "0"},
                      "e"));
  }

  // Waits until every rank of `attempt` of `job` said what it saw, and returns each rank's line.
  std::vector<std::string> Seen(const std::string& job, int attempt, int ranks) {
    std::vector<std::string> seen;
    for (int rank = 0; rank < ranks; ++rank) {
      const std::string path = absl::StrCat(Dir(job), "/seen-", attempt, "-", rank);
      EXPECT_TRUE(WaitFor([&] { return absl::StrContains(Read(path), "\n"); }, 30s))
          << "rank " << rank << " of attempt " << attempt << " never started";
      seen.push_back(Read(path));
    }
    return seen;
  }

  // When the event whose reason starts with `prefix` happened, and when the job was next
  // RUNNING after it; 0 where not seen.
  std::pair<int64_t, int64_t> Resize(const std::string& job, const std::string& prefix) {
    int64_t decided = 0, running = 0;
    for (const v1::JobEvent& e : cluster_->Events(job)) {
      if (decided == 0 && absl::StartsWith(e.reason(), prefix)) decided = e.time_ms();
      if (decided != 0 && running == 0 && e.state() == v1::JOB_STATE_RUNNING) {
        running = e.time_ms();
      }
    }
    return {decided, running};
  }

  // Rank 0's log of one attempt, from whichever worker ran it ("" when none has it yet).
  std::string Rank0Log(const std::string& job, int attempt) {
    for (const auto& w : cluster_->workers()) {
      absl::StatusOr<std::string> log = cluster_->RankLog(w->agent_addr(), job, 0, attempt);
      if (log.ok() && !log->empty()) return *log;
    }
    return "";
  }

  // Whether the job runs attempt `attempt` (or has ended) within `timeout`.
  bool WaitAttempt(const std::string& job, int attempt, std::chrono::seconds timeout = 60s) {
    return WaitFor(
        [&] {
          absl::StatusOr<v1::Job> j = cluster_->GetJob(job);
          return j.ok() &&
                 (j->attempt() > attempt ||
                  (j->attempt() == attempt && j->state() == v1::JOB_STATE_RUNNING) ||
                  j->state() == v1::JOB_STATE_SUCCEEDED || j->state() == v1::JOB_STATE_FAILED);
        },
        timeout);
  }

  // Team B holds the other 2 GPUs for 4 s while `spec` (elastic 2:4 of team A) starts at 2; it
  // grows to 4 (attempt 1) once they stayed idle, and shrinks to 2 (attempt 2) when team B
  // submits again. `on_grown` is called with the job's id as soon as attempt 1 is placed and
  // returns once the program runs at 4 (a SIGTERM before it set its handler would just kill
  // it, losing the work since its last checkpoint). Returns the elastic job's id.
  std::string GrowAndShrink(const v1::JobSpec& spec,
                            const std::function<void(const std::string&)>& on_grown) {
    const std::string other = SubmitOk(Spec("b-first", "team-b", "sleep 4"));
    EXPECT_EQ(cluster_->WaitState(other, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
    const std::string elastic = SubmitOk(spec);
    EXPECT_EQ(cluster_->WaitState(elastic, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
    EXPECT_EQ(cluster_->GetJob(elastic)->placement_size(), 2);
    EXPECT_TRUE(WaitFor([&] { return cluster_->GetJob(elastic)->attempt() >= 1; }, 60s))
        << "it never grew";
    on_grown(elastic);
    EXPECT_TRUE(WaitAttempt(elastic, 1));
    v1::Job grown = *cluster_->GetJob(elastic);
    EXPECT_EQ(grown.attempt(), 1) << grown.ShortDebugString();
    EXPECT_EQ(grown.placement_size(), 4) << grown.ShortDebugString();
    const std::string reclaim = SubmitOk(Spec("b-again", "team-b", "sleep 1"));
    EXPECT_TRUE(WaitAttempt(elastic, 2));
    v1::Job shrunk = *cluster_->GetJob(elastic);
    EXPECT_EQ(shrunk.attempt(), 2) << shrunk.ShortDebugString();
    EXPECT_EQ(shrunk.placement_size(), 2) << shrunk.ShortDebugString();
    EXPECT_EQ(cluster_->WaitState(reclaim, v1::JOB_STATE_SUCCEEDED, 60s).state(),
              v1::JOB_STATE_SUCCEEDED);
    return elastic;
  }
};

TEST_F(ElasticE2eTest, StartsAt2GrowsTo4WhenGpusFreeShrinksTo2WhenATeamReclaimsAndSucceeds) {
  // Team B holds 2 of the 4 GPUs for a few seconds.
  const std::string other = SubmitOk(Spec("b-first", "team-b", "sleep 4"));
  ASSERT_EQ(cluster_->WaitState(other, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);

  v1::JobSpec spec = Spec("elastic", "team-a", kElastic);
  spec.set_replicas(4);
  spec.set_min_replicas(2);
  spec.set_max_replicas(4);
  const std::string elastic = SubmitOk(spec);
  // It starts at 2 rather than waiting for 4.
  ASSERT_EQ(cluster_->WaitState(elastic, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(Seen(elastic, 0, 2), ::testing::Each(std::string("2 1\n")));
  EXPECT_EQ(cluster_->GetJob(elastic)->placement_size(), 2);

  // B's job ends; its GPUs stay idle for the delay and the job grows to 4.
  ASSERT_EQ(cluster_->WaitState(other, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(Seen(elastic, 1, 4), ::testing::Each(std::string("4 1\n")));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(Read(absl::StrCat(Dir(elastic), "/sigterm-0-", rank)), "0\n")
        << "rank " << rank << " of the first attempt was not stopped with SIGTERM";
  }
  ASSERT_TRUE(WaitFor([&] { return cluster_->GetJob(elastic)->state() == v1::JOB_STATE_RUNNING; },
                      30s));
  EXPECT_EQ(cluster_->GetJob(elastic)->placement_size(), 4);
  const auto grow = Resize(elastic, "grown from 2 to 4 replicas: 2 x t4 idle in cohort lab");
  ASSERT_NE(grow.first, 0) << "no event says why it grew";

  // Team B comes back within its nominal quota: the job shrinks to 2 rather than stopping whole.
  const std::string reclaim = SubmitOk(Spec("b-again", "team-b", "sleep 1"));
  EXPECT_THAT(Seen(elastic, 2, 2), ::testing::Each(std::string("2 1\n")));
  EXPECT_EQ(cluster_->WaitState(reclaim, v1::JOB_STATE_SUCCEEDED, 60s).state(),
            v1::JOB_STATE_SUCCEEDED);
  const auto shrink = Resize(elastic, "shrunk from 4 to 2: queue team-b reclaims its nominal quota");
  ASSERT_NE(shrink.first, 0) << "no event says why it shrank";

  // It finishes at its size now, SUCCEEDED: the resizes were not failures.
  std::ofstream(absl::StrCat(Dir(elastic), "/finish")).put('\n');
  v1::Job done = cluster_->WaitState(elastic, v1::JOB_STATE_SUCCEEDED, 60s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.ShortDebugString();
  EXPECT_EQ(done.attempt(), 2);
  std::printf("resize of an elastic command job (SIGTERM, ranks exit, start at the new size): "
              "grow 2->4 %lld ms, shrink 4->2 %lld ms from the decision to every rank running\n",
              static_cast<long long>(grow.second - grow.first),
              static_cast<long long>(shrink.second - shrink.first));
}

TEST_F(ElasticE2eTest, TheTrainerResumesAtEachNewSizeKeepingItsGlobalBatch) {
  v1::JobSpec spec = Spec("elastic-train", "team-a", "");
  spec.clear_command();
  spec.mutable_trainer()->set_model("mlp-small");
  spec.mutable_trainer()->set_batch_size(16);  // x 2 ranks at the first start: 32 in all
  spec.mutable_trainer()->set_steps(4000);
  spec.set_replicas(4);
  spec.set_min_replicas(2);
  spec.set_max_replicas(4);
  // The resize's time, SIGTERM to the first step at the new size, as rank 0's log shows it.
  int64_t first_step_ms = 0;
  auto watch_first_step = [&](const std::string& elastic) {
    WaitFor(
        [&] {
          const std::string log = Rank0Log(elastic, 1);
          const size_t resumed = log.find("resumed from checkpoint");
          if (resumed == std::string::npos || log.find("\nstep ", resumed) == std::string::npos) {
            return false;
          }
          first_step_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
          return true;
        },
        60s, 20ms);
  };
  const std::string elastic = GrowAndShrink(spec, watch_first_step);
  v1::Job done = cluster_->WaitState(elastic, v1::JOB_STATE_SUCCEEDED, 180s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.ShortDebugString();
  EXPECT_EQ(done.attempt(), 2);
  // Each attempt resumed from the last one's checkpoint, at its own size, with the same global
  // batch, and the last reached the end.
  EXPECT_THAT(Rank0Log(elastic, 1),
              ::testing::HasSubstr("(written at 2 ranks; global batch 32 kept, 8 per rank now)"));
  EXPECT_THAT(Rank0Log(elastic, 2),
              ::testing::HasSubstr("(written at 4 ranks; global batch 32 kept, 16 per rank now)"));
  EXPECT_THAT(Rank0Log(elastic, 2), ::testing::HasSubstr("step 4000/4000"));
  const auto grow = Resize(elastic, "grown from 2 to 4 replicas");
  ASSERT_NE(grow.first, 0);
  ASSERT_NE(first_step_ms, 0) << "no step at 4 ranks seen in rank 0's log";
  std::printf(
      "resize of the trainer (mlp-small, 2 -> 4 ranks): %lld ms from the decision "
      "(SIGTERM) to the first step at the new size\n",
      static_cast<long long>(first_step_ms - grow.first));
  std::filesystem::remove_all(Dir(elastic));
}

TEST_F(ElasticE2eTest, AnMpi4pyProgramResumesAtEachNewSizeWithTheWeightsOfARunNeverResized) {
  const std::string program = RINGMASTER_SOURCE_DIR "/docs/examples/elastic_mpi4py.py";
  auto spec_of = [&](const std::string& name, const std::string& queue, double step_seconds) {
    v1::JobSpec spec = Spec(name, queue, "");
    spec.clear_command();
    for (const std::string& a :
         {std::string("/usr/bin/python3"), program, std::string("--steps"), std::string("400"),
          std::string("--step-seconds"), absl::StrCat(step_seconds)}) {
      spec.mutable_command()->add_argv(a);
    }
    return spec;
  };
  // The weights a run never resized ends with, on this cluster (fast: no pause per step).
  const std::string whole = SubmitOk(spec_of("whole", "team-a", 0));
  ASSERT_EQ(cluster_->WaitState(whole, v1::JOB_STATE_SUCCEEDED, 60s).state(),
            v1::JOB_STATE_SUCCEEDED);
  const std::regex weights("final weights: ([^\n]*)");
  std::smatch m;
  const std::string whole_log = Rank0Log(whole, 0);
  ASSERT_TRUE(std::regex_search(whole_log, m, weights)) << whole_log;
  const std::string expected = m[1].str();

  v1::JobSpec spec = spec_of("elastic-mpi4py", "team-a", 0.1);
  spec.set_replicas(4);
  spec.set_min_replicas(2);
  spec.set_max_replicas(4);
  const std::string elastic = GrowAndShrink(spec, [&](const std::string& id) {
    EXPECT_TRUE(
        WaitFor([&] { return absl::StrContains(Rank0Log(id, 1), "resumed at step"); }, 60s, 20ms));
  });
  v1::Job done = cluster_->WaitState(elastic, v1::JOB_STATE_SUCCEEDED, 120s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.ShortDebugString();
  EXPECT_EQ(done.attempt(), 2);
  EXPECT_THAT(Rank0Log(elastic, 1),
              ::testing::HasSubstr("(written at 2 rank(s)): global batch 12"));
  EXPECT_THAT(Rank0Log(elastic, 2),
              ::testing::HasSubstr("(written at 4 rank(s)): global batch 12"));
  const std::string last = Rank0Log(elastic, 2);
  ASSERT_TRUE(std::regex_search(last, m, weights)) << last;
  EXPECT_EQ(m[1].str(), expected) << "a resized run ended with other weights";
  std::filesystem::remove_all(Dir(elastic));
  std::filesystem::remove_all(Dir(whole));
}

}  // namespace
}  // namespace ringmaster::test
