#include "scheduler/core/job_state_machine.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::scheduler {
namespace {

using Kind = JobInput::Kind;

Job MakeJob(RestartPolicy policy = RestartPolicy::kNever, int32_t backoff = 0) {
  Job job;
  job.id = "j-1";
  job.spec.replicas = 2;
  job.spec.restart_policy = policy;
  job.spec.backoff_limit = backoff;
  return job;
}

std::vector<RankPlacement> TwoRanks() { return {{0, "w1", "a", {0}}, {1, "w2", "b", {0}}}; }

TEST(JobStateMachineTest, RunsToSuccess) {
  Job job = MakeJob();
  auto t = ApplyInput(job, {Kind::kPlaced, "placed", 0, TwoRanks(), "tok"}, 100);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(job.state, JobState::kStarting);
  EXPECT_EQ(job.token, "tok");
  EXPECT_EQ(t->event.seq, 1);
  ASSERT_TRUE(ApplyInput(job, {Kind::kAllStarted, "up"}, 200).ok());
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.started_at_ms, 200);
  t = ApplyInput(job, {Kind::kAllSucceeded, "done"}, 300);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.finished_at_ms, 300);
  EXPECT_TRUE(job.placement.empty());
  EXPECT_EQ(t->released.size(), 2u);
  EXPECT_FALSE(t->stop_ranks);  // ranks ended by themselves
  EXPECT_EQ(t->event.seq, 3);
  EXPECT_EQ(t->event.state, JobState::kSucceeded);
}

TEST(JobStateMachineTest, OnFailureRestartsUntilBackoffLimit) {
  Job job = MakeJob(RestartPolicy::kOnFailure, 2);
  for (int attempt = 0; attempt < 2; ++attempt) {
    ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
    auto t = ApplyInput(job, {Kind::kFailed, "rank 1 exited with code 3", 3}, 2);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(job.state, JobState::kPending);
    EXPECT_EQ(job.attempt, attempt + 1);
    EXPECT_TRUE(t->stop_ranks);
    EXPECT_TRUE(job.placement.empty());
    EXPECT_TRUE(job.token.empty());
  }
  ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
  auto t = ApplyInput(job, {Kind::kFailed, "rank 0 exited with code 7", 7}, 2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.attempt, 2);
  EXPECT_EQ(job.exit_code, 7);
  EXPECT_EQ(t->event.exit_code, 7);
}

TEST(JobStateMachineTest, PreemptionsDoNotCountAgainstTheBackoffLimit) {
  Job job = MakeJob(RestartPolicy::kOnFailure, 1);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
    auto t = ApplyInput(job, {Kind::kPreempted, "preempted by j-b (queue b reclaims)"}, 2);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(job.state, JobState::kPending);
    EXPECT_TRUE(t->stop_ranks);
    EXPECT_EQ(t->event.reason, "preempted by j-b (queue b reclaims)");
  }
  EXPECT_EQ(job.attempt, 3);
  EXPECT_EQ(job.preemptions, 3);
  // One restart is still allowed, then the next failure ends it.
  ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
  ASSERT_TRUE(ApplyInput(job, {Kind::kFailed, "rank 0 exited with code 1", 1}, 2).ok());
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_THAT(job.message, ::testing::HasSubstr("attempt 1 of at most 1"));
  ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
  ASSERT_TRUE(ApplyInput(job, {Kind::kFailed, "rank 0 exited with code 1", 1}, 2).ok());
  EXPECT_EQ(job.state, JobState::kFailed);
  // Only a placed job can be preempted.
  Job pending = MakeJob();
  EXPECT_FALSE(ApplyInput(pending, {Kind::kPreempted, "x"}, 1).ok());
}

TEST(JobStateMachineTest, AnUnrunnableJobFailsWithoutRestartFromPendingOrPlaced) {
  Job pending = MakeJob(RestartPolicy::kOnFailure, 5);
  auto t = ApplyInput(pending, {Kind::kUnrunnable, "volume 'data' no longer exists"}, 100);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(pending.state, JobState::kFailed);
  EXPECT_EQ(pending.message, "volume 'data' no longer exists");
  EXPECT_FALSE(t->stop_ranks);

  Job placed = MakeJob(RestartPolicy::kOnFailure, 5);
  ASSERT_TRUE(ApplyInput(placed, {Kind::kPlaced, "placed", 0, TwoRanks(), "tok"}, 100).ok());
  t = ApplyInput(placed, {Kind::kUnrunnable, "gone"}, 200);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(placed.state, JobState::kFailed);
  EXPECT_EQ(placed.attempt, 0);
  EXPECT_TRUE(t->stop_ranks);
  EXPECT_EQ(ApplyInput(placed, {Kind::kUnrunnable, "again"}, 300).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// An elastic job keeps the size it last ran at across restarts nobody asked for; a resize sets
// the new size, and a preemption (the scheduler stopped it on purpose) forgets it.
TEST(JobStateMachineTest, AnElasticJobKeepsItsLastSizeUnlessResizedOrPreempted) {
  Job job = MakeJob(RestartPolicy::kOnFailure, 3);
  job.spec.min_replicas = 1;
  job.spec.max_replicas = 4;
  ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
  EXPECT_EQ(job.last_replicas, 2);
  ASSERT_TRUE(
      ApplyInput(job, {.kind = Kind::kResized, .reason = "grown", .resized_to = 4}, 2).ok());
  EXPECT_EQ(job.last_replicas, 4);
  ASSERT_TRUE(
      ApplyInput(
          job,
          {Kind::kPlaced,
           "",
           0,
           {{0, "w1", "a", {0}}, {1, "w1", "a", {1}}, {2, "w2", "b", {0}}, {3, "w2", "b", {1}}},
           "t"},
          3)
          .ok());
  ASSERT_TRUE(ApplyInput(job, {Kind::kFailed, "rank 1 exited with code 3", 3}, 4).ok());
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.last_replicas, 4) << "a failure keeps it";
  ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 5).ok());
  ASSERT_TRUE(ApplyInput(job, {Kind::kNotDelivered, "lost"}, 6).ok());
  EXPECT_EQ(job.last_replicas, 2);
  ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 7).ok());
  ASSERT_TRUE(ApplyInput(job, {Kind::kPreempted, "preempted"}, 8).ok());
  EXPECT_EQ(job.last_replicas, 0);
  // A job that is not elastic never has one.
  Job rigid = MakeJob();
  ASSERT_TRUE(ApplyInput(rigid, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
  EXPECT_EQ(rigid.last_replicas, 0);
}

TEST(JobStateMachineTest, NeverPolicyFailsAtFirstFailure) {
  Job job = MakeJob(RestartPolicy::kNever, 5);
  ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
  ASSERT_TRUE(ApplyInput(job, {Kind::kFailed, "worker w2 lost"}, 2).ok());
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.message, "worker w2 lost");
}

TEST(JobStateMachineTest, DeadlineFailsWithoutRestart) {
  Job job = MakeJob(RestartPolicy::kOnFailure, 5);
  ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
  auto t = ApplyInput(job, {Kind::kDeadlineExceeded, "ran past max_runtime_seconds"}, 2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_TRUE(t->stop_ranks);
}

TEST(JobStateMachineTest, CancelStopsRanksOnlyWhenPlaced) {
  Job pending = MakeJob();
  auto t = ApplyInput(pending, {Kind::kCancel, "by user"}, 1);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(pending.state, JobState::kCancelled);
  EXPECT_FALSE(t->stop_ranks);

  Job running = MakeJob();
  ASSERT_TRUE(ApplyInput(running, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
  t = ApplyInput(running, {Kind::kCancel, "by user"}, 2);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->stop_ranks);
  EXPECT_EQ(t->released.size(), 2u);
}

TEST(JobStateMachineTest, NothingLeavesATerminalState) {
  for (Kind end : {Kind::kAllSucceeded, Kind::kCancel}) {
    Job job = MakeJob(RestartPolicy::kOnFailure, 3);
    ASSERT_TRUE(ApplyInput(job, {Kind::kPlaced, "", 0, TwoRanks(), "t"}, 1).ok());
    ASSERT_TRUE(ApplyInput(job, {end, ""}, 2).ok());
    Job before = job;
    for (Kind k : {Kind::kPlaced, Kind::kAllStarted, Kind::kAllSucceeded, Kind::kFailed,
                   Kind::kDeadlineExceeded, Kind::kCancel}) {
      auto t = ApplyInput(job, {k, "", 0, TwoRanks(), "t"}, 3);
      EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_EQ(job.state, before.state);
      EXPECT_EQ(job.last_event_seq, before.last_event_seq);
    }
  }
}

TEST(JobStateMachineTest, RejectsOutOfOrderInputsWithoutChange) {
  Job job = MakeJob();
  EXPECT_EQ(ApplyInput(job, {Kind::kAllStarted, ""}, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ApplyInput(job, {Kind::kFailed, ""}, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.last_event_seq, 0);
}

TEST(RankTrackerTest, CompletesOnceDespiteDuplicates) {
  RankTracker tracker(2);
  EXPECT_FALSE(tracker.OnStarted(0));
  EXPECT_FALSE(tracker.OnStarted(0));
  EXPECT_TRUE(tracker.OnStarted(1));
  EXPECT_FALSE(tracker.OnStarted(1));
  EXPECT_FALSE(tracker.OnSucceeded(1));
  EXPECT_TRUE(tracker.OnSucceeded(0));
  EXPECT_FALSE(tracker.OnSucceeded(0));
}

}  // namespace
}  // namespace ringmaster::scheduler
