// End to end: two teams share four GPUs (two workers x 2 simulated t4) through queues of one
// cohort. Team A borrows every GPU; team B submits within its nominal quota; A's newest gang is
// preempted whole (its program sees SIGTERM and can save to RINGMASTER_CHECKPOINT_DIR), B runs,
// and A's job runs again afterwards and succeeds, resuming from what it saved. Real scheduler,
// Postgres, Redis, workers and mpirun rings.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/cluster/cluster_test.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr int kGraceMs = 5000;

// A rank that runs until SIGTERM, saving "where it was" on the way out (slowly: 2 s, within
// the grace period, as a real checkpoint takes time); run again, it finds what it saved and
// finishes at once. ready-RANK says its trap is set (a SIGTERM before that would just end it).
// The times go to the rank's log.
constexpr const char* kResumable =
    "d=$RINGMASTER_CHECKPOINT_DIR; "
    "if [ -f \"$d/saved-$RANK\" ]; then echo \"resumed rank $RANK\"; exit 0; fi; "
    "trap 'echo \"SIGTERM in attempt $RINGMASTER_ATTEMPT\" > \"$d/sigterm-$RANK\"; "
    "echo \"SIGTERM at $(date +%T.%N)\"; sleep 2; touch \"$d/saved-$RANK\"; "
    "echo \"saved at $(date +%T.%N)\"; exit 143' TERM; "
    "echo \"rank $RANK started\"; touch \"$d/ready-$RANK\"; sleep 600 & wait";

v1::JobSpec Spec(const std::string& name, const std::string& queue, const std::string& script) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_queue(queue);
  spec.set_replicas(2);
  spec.set_gpus_per_replica(1);
  spec.set_gpu_type("t4");
  for (const char* a : {"/bin/sh", "-c"}) spec.mutable_command()->add_argv(a);
  spec.mutable_command()->add_argv(script);
  return spec;
}

bool FileHas(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return absl::StrContains(all, text);
}

class PreemptionE2eTest : public TwoTeamsTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(
        StartTwoTeams({"--preemption-grace-ms", std::to_string(kGraceMs)}, "p"));
  }

  // Team A fills the cluster (its second gang borrows team B's nominal); team B submits.
  void Crowd(std::string* a1, std::string* a2, std::string* b1) {
    *a1 = SubmitOk(Spec("a-first", "team-a", kResumable));
    ASSERT_EQ(cluster_->WaitState(*a1, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
    *a2 = SubmitOk(Spec("a-borrower", "team-a", kResumable));
    ASSERT_EQ(cluster_->WaitState(*a2, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
    // RUNNING says the ranks started, not that their shells set the trap yet.
    for (int rank = 0; rank < 2; ++rank) {
      ASSERT_TRUE(WaitFor(
          [&] { return std::filesystem::exists(absl::StrCat(Dir(*a2), "/ready-", rank)); }, 10s))
          << "rank " << rank << " of " << *a2 << " never set its trap";
    }
    *b1 = SubmitOk(Spec("b-own-share", "team-b", "echo \"b rank $RANK\"; sleep 1"));
  }
};

TEST_F(PreemptionE2eTest, AQueueWithinItsNominalReclaimsABorrowersWholeGang) {
  std::string a1, a2, b1;
  Crowd(&a1, &a2, &b1);

  // A's newest gang (the borrower) goes back to PENDING, naming who preempted it and why.
  v1::Job preempted = cluster_->WaitState(a2, v1::JOB_STATE_PENDING);
  ASSERT_EQ(preempted.state(), v1::JOB_STATE_PENDING) << preempted.ShortDebugString();
  bool named = false;
  for (const v1::JobEvent& e : cluster_->Events(a2)) {
    named = named || (absl::StrContains(e.reason(), absl::StrCat("preempted by ", b1)) &&
                      absl::StrContains(e.reason(), "team-b reclaims"));
  }
  EXPECT_TRUE(named) << "no event names " << b1;

  // Its program saw SIGTERM on every rank (and saved), then was gone.
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(WaitFor(
        [&] { return FileHas(absl::StrCat(Dir(a2), "/sigterm-", rank), "SIGTERM in attempt 0"); },
        10s))
        << "rank " << rank << " of " << a2 << " never saw SIGTERM";
  }

  // B runs within the grace period plus a pass, and succeeds.
  v1::Job b = cluster_->WaitState(b1, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(b.state(), v1::JOB_STATE_SUCCEEDED) << b.ShortDebugString();
  EXPECT_LT(b.started_at_ms() - b.created_at_ms(), kGraceMs + 5000) << b.ShortDebugString();

  // A's first gang (within A's nominal) was never touched.
  v1::Job first = *cluster_->GetJob(a1);
  EXPECT_EQ(first.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(first.attempt(), 0);

  // Then A's preempted job runs again, finds what it saved and succeeds.
  v1::Job again = cluster_->WaitState(a2, v1::JOB_STATE_SUCCEEDED, 30s);
  EXPECT_EQ(again.state(), v1::JOB_STATE_SUCCEEDED) << again.ShortDebugString();
  EXPECT_EQ(again.attempt(), 1);
  ASSERT_TRUE(cluster_->Cancel(a1).ok());
}

TEST_F(PreemptionE2eTest, NothingIsLostWhenTheSchedulerRestartsInTheMiddleOfAPreemption) {
  std::string a1, a2, b1;
  Crowd(&a1, &a2, &b1);
  ASSERT_EQ(cluster_->WaitState(a2, v1::JOB_STATE_PENDING).state(), v1::JOB_STATE_PENDING);
  ASSERT_TRUE(cluster_->scheduler().Restart(SIGKILL).ok());
  // B still gets its share, and A's job still finishes.
  EXPECT_EQ(cluster_->WaitState(b1, v1::JOB_STATE_SUCCEEDED, 60s).state(), v1::JOB_STATE_SUCCEEDED);
  // The new scheduler kept A's GPUs held while A's ranks were still saving: B was placed only
  // after both had saved and exited.
  int64_t saved_ms = 0;
  for (int rank = 0; rank < 2; ++rank) {
    struct stat st {};
    ASSERT_EQ(stat(absl::StrCat(Dir(a2), "/saved-", rank).c_str(), &st), 0) << "rank " << rank;
    saved_ms = std::max<int64_t>(saved_ms, st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000);
  }
  int64_t placed_ms = 0;
  for (const v1::JobEvent& e : cluster_->Events(b1)) {
    if (e.state() == v1::JOB_STATE_STARTING && placed_ms == 0) placed_ms = e.time_ms();
  }
  EXPECT_GE(placed_ms, saved_ms) << "B was placed on GPUs that A's ranks still held";
  v1::Job again = cluster_->WaitState(a2, v1::JOB_STATE_SUCCEEDED, 60s);
  EXPECT_EQ(again.state(), v1::JOB_STATE_SUCCEEDED) << again.ShortDebugString();
  EXPECT_EQ(cluster_->GetJob(a1)->attempt(), 0);
  ASSERT_TRUE(cluster_->Cancel(a1).ok());
}

}  // namespace
}  // namespace ringmaster::test
