// The decisions on what workers tell the scheduler (core/worker_protocol.h), the pre-run
// check's verdict (DecideCheck), the live-job bounds and a job's watch limits: tables of plain
// values, no thread, no clock.
#include "scheduler/core/worker_protocol.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/core/health_check.h"
#include "scheduler/core/live_bounds.h"
#include "scheduler/core/run_watch.h"
#include "scheduler/core/validation.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A job of `ranks` placed rank by rank on `workers`, in `state`, at attempt 2.
Job Placed(const std::string& id, std::vector<std::string> workers,
           JobState state = JobState::kRunning) {
  Job job;
  job.id = id;
  job.state = state;
  job.attempt = 2;
  for (size_t i = 0; i < workers.size(); ++i) {
    job.placement.push_back({static_cast<int32_t>(i), workers[i], workers[i] + "-addr", {}});
  }
  return job;
}

RankReport Report(const std::string& job, int32_t rank, RankReport::Kind kind,
                  int32_t attempt = 2) {
  RankReport r;
  r.job_id = job;
  r.attempt = attempt;
  r.rank = rank;
  r.kind = kind;
  return r;
}

TEST(RankReportTest, TheLastStartMakesTheJobRunningOnce) {
  Job job = Placed("j-1", {"w1", "w2"}, JobState::kStarting);
  RankTracker tracker(2);
  EXPECT_FALSE(InputOfRankReport(job, "w1", Report("j-1", 0, RankReport::Kind::kStarted), tracker));
  auto all = InputOfRankReport(job, "w2", Report("j-1", 1, RankReport::Kind::kStarted), tracker);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->kind, JobInput::Kind::kAllStarted);
  EXPECT_EQ(all->reason, "all 2 ranks started");
  // Started again (a replay after a re-registration): nothing more.
  EXPECT_FALSE(InputOfRankReport(job, "w2", Report("j-1", 1, RankReport::Kind::kStarted), tracker));
}

TEST(RankReportTest, TheLastCleanExitSucceedsTheJob) {
  Job job = Placed("j-1", {"w1", "w2"});
  RankTracker tracker(2);
  EXPECT_FALSE(InputOfRankReport(job, "w1", Report("j-1", 0, RankReport::Kind::kExited), tracker));
  auto done = InputOfRankReport(job, "w2", Report("j-1", 1, RankReport::Kind::kExited), tracker);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->kind, JobInput::Kind::kAllSucceeded);
  EXPECT_EQ(done->reason, "all 2 ranks exited 0");
}

TEST(RankReportTest, AFailedRankFailsTheJobSayingWhichWhereAndWhy) {
  Job job = Placed("j-1", {"w1", "w2"});
  RankTracker tracker(2);
  RankReport exited = Report("j-1", 1, RankReport::Kind::kExited);
  exited.exit_code = 3;
  exited.message = "cannot run ./train: No such file or directory";
  auto failed = InputOfRankReport(job, "w2", exited, tracker);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->kind, JobInput::Kind::kFailed);
  EXPECT_EQ(failed->exit_code, 3);
  EXPECT_EQ(failed->reason,
            "rank 1 on w2 exited with code 3: cannot run ./train: No such file or directory");

  RankReport killed = Report("j-1", 0, RankReport::Kind::kExited);
  killed.signal = 9;
  failed = InputOfRankReport(job, "w1", killed, tracker);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->exit_code, 128 + 9);
  EXPECT_EQ(failed->reason, "rank 0 on w1 was killed by signal 9");

  RankReport launch = Report("j-1", 0, RankReport::Kind::kLaunchFailed);
  launch.message = std::string(2000, 'x');
  failed = InputOfRankReport(job, "w1", launch, tracker);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->kind, JobInput::Kind::kFailed);
  EXPECT_THAT(failed->reason, HasSubstr("rank 0 could not start on w1: xxx"));
  EXPECT_LE(failed->reason.size(), 600u);  // the worker's message is cut at 512 bytes
}

TEST(RankReportTest, ProgressCheckpointsAndDigestsMakeNoInput) {
  Job job = Placed("j-1", {"w1"});
  RankTracker tracker(1);
  for (auto kind : {RankReport::Kind::kProgress, RankReport::Kind::kCheckpoint,
                    RankReport::Kind::kImageResolved}) {
    EXPECT_FALSE(InputOfRankReport(job, "w1", Report("j-1", 0, kind), tracker));
  }
}

TEST(RankReportTest, PlacedOnIsRankAndWorkerTogether) {
  Job job = Placed("j-1", {"w1", "w2"});
  EXPECT_TRUE(PlacedOn(job, 1, "w2"));
  EXPECT_FALSE(PlacedOn(job, 1, "w1"));
  EXPECT_FALSE(PlacedOn(job, 2, "w2"));
}

TEST(CheckpointTest, OnlyRankZeroOfThisOrAnEarlierAttemptNotAheadAndNotOlder) {
  Job job = Placed("j-1", {"w1", "w2"});
  job.last_checkpoint_time_ms = 1'000;
  const int64_t now = 100'000;
  auto at = [](int32_t rank, int32_t attempt, int64_t time_ms) {
    RankReport r = Report("j-1", rank, RankReport::Kind::kCheckpoint, attempt);
    r.checkpoint_time_ms = time_ms;
    return r;
  };
  EXPECT_TRUE(AcceptsCheckpoint(job, at(0, 2, 50'000), now));
  EXPECT_TRUE(AcceptsCheckpoint(job, at(0, 1, 50'000), now));   // the preempted attempt's last
  EXPECT_FALSE(AcceptsCheckpoint(job, at(0, 3, 50'000), now));  // a later attempt than the job's
  EXPECT_FALSE(AcceptsCheckpoint(job, at(1, 2, 50'000), now));  // not rank 0
  EXPECT_FALSE(AcceptsCheckpoint(job, at(0, 2, 999), now));     // older than the last
  EXPECT_TRUE(AcceptsCheckpoint(job, at(0, 2, now + 5 * 60 * 1000), now));
  EXPECT_FALSE(AcceptsCheckpoint(job, at(0, 2, now + 5 * 60 * 1000 + 1), now));  // far ahead
}

TEST(ImageDigestTest, OnlyTheCurrentLauncherPinsAnUnpinnedImage) {
  Job job = Placed("j-1", {"w1", "w2"});
  job.spec.image = "registry.local:5000/team/pytorch:2.5";
  RankReport r = Report("j-1", 0, RankReport::Kind::kImageResolved);
  EXPECT_EQ(JudgeImageDigest(job, "w1", r), DigestVerdict::kPin);
  EXPECT_EQ(JudgeImageDigest(job, "w2", r), DigestVerdict::kNotLauncher);
  r.attempt = 1;
  EXPECT_EQ(JudgeImageDigest(job, "w1", r), DigestVerdict::kIgnore);
  r.attempt = 2;
  job.image_digest = "sha256:abc";
  EXPECT_EQ(JudgeImageDigest(job, "w1", r), DigestVerdict::kIgnore);
  job.image_digest.clear();
  job.spec.image.clear();
  EXPECT_EQ(JudgeImageDigest(job, "w1", r), DigestVerdict::kIgnore);
}

// Live jobs by id, the placed ones, and which ranks were heard to start.
struct Live {
  std::map<std::string, Job> jobs;
  std::set<std::pair<std::string, int32_t>> started;

  Reconciliation Reconcile(const std::string& worker, const std::vector<HeldRank>& held) const {
    std::vector<const Job*> placed;
    for (const auto& [id, job] : jobs) placed.push_back(&job);
    return ReconcileWorker(
        worker, held,
        [this](const std::string& id) -> const Job* {
          auto it = jobs.find(id);
          return it == jobs.end() ? nullptr : &it->second;
        },
        placed,
        [this](const std::string& id, int32_t rank) {
          return started.contains({id, rank});
        });
  }
};

HeldRank Held(const std::string& job, int32_t attempt, int32_t rank) {
  HeldRank h;
  h.job_id = job;
  h.attempt = attempt;
  h.rank = rank;
  return h;
}

TEST(ReconcileTest, HeldRanksOfLiveAttemptsAreReplayedAndTheRestStopped) {
  Live live;
  live.jobs["j-a"] = Placed("j-a", {"w1", "w2"});
  HeldRank exited = Held("j-a", 2, 0);
  exited.exited = true;
  exited.exit_code = 4;
  HeldRank old = Held("j-a", 1, 0);        // an earlier attempt
  HeldRank gone = Held("j-gone", 1, 0);    // a job no longer live
  HeldRank elsewhere = Held("j-a", 2, 1);  // placed on w2, not here
  Reconciliation r = live.Reconcile("w1", {exited, old, gone, elsewhere});
  ASSERT_EQ(r.orphans.size(), 3u);
  EXPECT_EQ(r.orphans[0].attempt, 1);
  EXPECT_EQ(r.orphans[1].job_id, "j-gone");
  EXPECT_EQ(r.orphans[2].rank, 1);
  EXPECT_THAT(r.ends, IsEmpty());
  ASSERT_EQ(r.replay.size(), 2u);
  EXPECT_EQ(r.replay[0].kind, RankReport::Kind::kStarted);
  EXPECT_EQ(r.replay[1].kind, RankReport::Kind::kExited);
  EXPECT_EQ(r.replay[1].exit_code, 4);
}

TEST(ReconcileTest, ARunningRankNotHeldFailsItsAttempt) {
  Live live;
  live.jobs["j-a"] = Placed("j-a", {"w1", "w1", "w2"});
  live.started = {{"j-a", 0}, {"j-a", 1}, {"j-a", 2}};
  Reconciliation r = live.Reconcile("w1", {Held("j-a", 2, 0)});
  ASSERT_EQ(r.ends.size(), 1u);
  EXPECT_EQ(r.ends[0].input.kind, JobInput::Kind::kFailed);
  EXPECT_EQ(r.ends[0].input.reason, "worker w1 re-registered: rank 1 is gone");
  // Replayed all the same: the failure comes first and moves the attempt on.
  EXPECT_EQ(r.replay.size(), 1u);
}

// A scheduler killed between storing a placement and sending it: the worker never heard of
// the attempt. It is placed again, not failed and not counted.
TEST(ReconcileTest, AnAssignmentThatNeverArrivedIsPlacedAgainNotFailed) {
  Live live;
  live.jobs["j-a"] = Placed("j-a", {"w1", "w2"}, JobState::kStarting);
  Reconciliation r = live.Reconcile("w1", {});
  ASSERT_EQ(r.ends.size(), 1u);
  EXPECT_EQ(r.ends[0].job_id, "j-a");
  EXPECT_EQ(r.ends[0].input.kind, JobInput::Kind::kNotDelivered);
  EXPECT_THAT(r.ends[0].input.reason, HasSubstr("worker w1 re-registered without attempt 2"));
  EXPECT_THAT(r.ends[0].input.reason, HasSubstr("not counted against backoff_limit"));
}

TEST(ReconcileTest, AStartingAttemptThatReachedTheWorkerStillFails) {
  Live live;
  // One of its ranks here is held: the assignment arrived, and the other rank is gone.
  live.jobs["j-a"] = Placed("j-a", {"w1", "w1"}, JobState::kStarting);
  Reconciliation r = live.Reconcile("w1", {Held("j-a", 2, 0)});
  ASSERT_EQ(r.ends.size(), 1u);
  EXPECT_EQ(r.ends[0].input.kind, JobInput::Kind::kFailed);
  // None held, but a rank here was heard to start: it ran, and is gone.
  live.started = {{"j-a", 1}};
  r = live.Reconcile("w1", {});
  ASSERT_EQ(r.ends.size(), 1u);
  EXPECT_EQ(r.ends[0].input.kind, JobInput::Kind::kFailed);
  // A RUNNING attempt with nothing held failed too: its ranks did run.
  live.started.clear();
  live.jobs["j-a"].state = JobState::kRunning;
  r = live.Reconcile("w1", {});
  ASSERT_EQ(r.ends.size(), 1u);
  EXPECT_EQ(r.ends[0].input.kind, JobInput::Kind::kFailed);
}

TEST(ReconcileTest, JobsNotPlacedHereAreLeftAlone) {
  Live live;
  live.jobs["j-a"] = Placed("j-a", {"w2"}, JobState::kStarting);
  Reconciliation r = live.Reconcile("w1", {});
  EXPECT_THAT(r.ends, IsEmpty());
  EXPECT_THAT(r.orphans, IsEmpty());
  EXPECT_THAT(r.replay, IsEmpty());
}

TEST(NotDeliveredTest, PlacesTheJobAgainWithoutCountingIt) {
  Job job = Placed("j-a", {"w1"}, JobState::kStarting);
  job.spec.backoff_limit = 0;
  auto t = ApplyInput(job, {JobInput::Kind::kNotDelivered, "never reached w1"}, 5);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.attempt, 3);
  EXPECT_EQ(job.attempt - job.preemptions, 2);  // what backoff_limit counts did not move
  EXPECT_TRUE(job.placement.empty());
  EXPECT_EQ(t->released.size(), 1u);
  EXPECT_EQ(job.message, "never reached w1");
}

TEST(SweepTest, SilentWorkersHeardWithinTheTimeoutAreAliveTheRestLost) {
  std::map<std::string, Worker> workers;
  auto add = [&](const std::string& id, WorkerState state, int64_t beat) {
    Worker w;
    w.id = id;
    w.state = state;
    w.last_heartbeat_ms = beat;
    workers[id] = w;
  };
  add("w-alive", WorkerState::kReady, 0);
  add("w-heard", WorkerState::kReady, 95'000);
  add("w-silent", WorkerState::kReady, 80'000);
  add("w-lost", WorkerState::kLost, 0);
  SilentWorkers s = SweepSilentWorkers(workers, {"w-alive"}, 100'000, 10'000);
  EXPECT_THAT(s.beats, ElementsAre("w-heard"));
  EXPECT_THAT(s.lost, ElementsAre("w-silent"));
}

CheckOutcome Outcome(bool completed, bool passed, const std::string& culprit = "",
                     bool in_session = false) {
  CheckOutcome o;
  o.job_id = "j-a";
  o.attempt = 2;
  o.completed = completed;
  o.passed = passed;
  o.busbw_gbps = 1.0;
  o.culprit_worker_id = culprit;
  o.message = "slow ring";
  o.in_session = in_session;
  return o;
}

CheckDecision Decide(const Job& job, const std::string& from, const CheckOutcome& o,
                     std::set<std::string> probation = {}) {
  return DecideCheck(
      job, from, o, [](const std::string& key) { return key == "2x1/cpu" ? 2.0 : 0.0; },
      [&](const std::string& id) { return probation.contains(id); },
      [](const std::string& id) { return id == "w1" || id == "w2"; });
}

TEST(DecideCheckTest, OnlyTheLauncherIsHeard) {
  Job job = Placed("j-a", {"w1", "w2"}, JobState::kStarting);
  EXPECT_TRUE(Decide(job, "w2", Outcome(true, true)).ignored);
  EXPECT_FALSE(Decide(job, "w1", Outcome(true, true)).ignored);
}

TEST(DecideCheckTest, APassLearnsAndClearsWorkersOnProbation) {
  Job job = Placed("j-a", {"w1", "w2"}, JobState::kStarting);
  CheckDecision d = Decide(job, "w1", Outcome(true, true), {"w2"});
  EXPECT_TRUE(d.learn);
  EXPECT_EQ(d.baseline_gbps, 2.0);
  EXPECT_THAT(d.cleared, ElementsAre("w2"));
  EXPECT_THAT(d.text, HasSubstr("; worker w2 passed it on probation and is healthy again"));
  EXPECT_EQ(d.blame, CheckDecision::Blame::kNone);
  // Inside the job's MPI_Init: its own word clears nobody.
  d = Decide(job, "w1", Outcome(true, true, "", true), {"w2"});
  EXPECT_THAT(d.cleared, IsEmpty());
}

TEST(DecideCheckTest, ABlameMarksTheWorkerOrIsVerifiedFirst) {
  Job job = Placed("j-a", {"w1", "w2"}, JobState::kStarting);
  CheckDecision d = Decide(job, "w1", Outcome(true, false, "w2"));
  EXPECT_FALSE(d.learn);
  EXPECT_EQ(d.blame, CheckDecision::Blame::kMark);
  EXPECT_EQ(d.culprit, "w2");
  EXPECT_EQ(d.unhealthy_reason, "pre-run check of job j-a attempt 2 failed: slow ring");
  EXPECT_EQ(d.replace_reason,
            "re-placing without unhealthy worker w2 (not counted against backoff_limit): slow "
            "ring");
  d = Decide(job, "w1", Outcome(true, false, "w2", true));
  EXPECT_EQ(d.blame, CheckDecision::Blame::kVerify);
  EXPECT_THAT(d.replace_reason, HasSubstr("to verify the blame of worker w2"));
  // A culprit outside the placement, or unknown, is nobody's fault here.
  EXPECT_EQ(Decide(job, "w1", Outcome(true, false, "w3")).blame, CheckDecision::Blame::kNone);
  Job elsewhere = Placed("j-a", {"w1", "w3"}, JobState::kStarting);
  EXPECT_EQ(Decide(elsewhere, "w1", Outcome(true, false, "w3")).blame, CheckDecision::Blame::kNone);
}

TEST(LiveBoundsTest, EachBoundIsNamedWhenPassed) {
  const LiveBounds bounds{10, 4, 1000};
  EXPECT_TRUE(CheckLiveBounds({9, 3, 900}, bounds, "q", 100).ok());
  absl::Status s = CheckLiveBounds({10, 0, 0}, bounds, "q", 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("--max-live-jobs 10"));
  s = CheckLiveBounds({5, 4, 0}, bounds, "q", 1);
  EXPECT_THAT(s.message(), HasSubstr("queue 'q' holds 4 live jobs"));
  EXPECT_THAT(s.message(), HasSubstr("--max-live-jobs-per-queue 4"));
  s = CheckLiveBounds({5, 3, 950}, bounds, "q", 51);
  EXPECT_THAT(s.message(), HasSubstr("this one's 51 would pass their bound of 1000 bytes"));
}

TEST(WatchLimitsTest, TheJobsOwnTimeoutThenItsQueuesThenTheDefault) {
  JobSpec spec;
  EXPECT_EQ(WatchLimitsOf(spec, nullptr).progress_timeout_ms,
            kDefaultProgressTimeoutSeconds * 1000);
  EXPECT_EQ(WatchLimitsOf(spec, nullptr).idle_timeout_ms, 0);
  Queue queue;
  queue.progress_timeout_seconds = 60;
  queue.idle_timeout_seconds = 300;
  EXPECT_EQ(WatchLimitsOf(spec, &queue).progress_timeout_ms, 60'000);
  EXPECT_EQ(WatchLimitsOf(spec, &queue).idle_timeout_ms, 300'000);
  spec.progress_timeout_seconds = 30;
  EXPECT_EQ(WatchLimitsOf(spec, &queue).progress_timeout_ms, 30'000);
}

}  // namespace
}  // namespace ringmaster::scheduler

namespace ringmaster::scheduler {
namespace {

TEST(PlanCheckTest, OnePlanForTheGangSeparateWhenVerifyingOrOnProbation) {
  Job job;
  job.attempt = 3;
  job.spec.command = CommandWorkload{{"./train"}, {}};
  job.placement = {{0, "w1", "", {}}, {1, "w2", "", {}}};
  auto none = [](const std::string&) { return false; };
  auto baseline_of = [](const std::string& key) { return key == "2x1/cpu" ? 1.5 : 0.0; };
  CheckPlan plan = PlanCheck(job, true, 0.6, "cpu", none, baseline_of);
  EXPECT_TRUE(plan.run);
  EXPECT_FALSE(plan.separately);
  EXPECT_EQ(plan.min_ratio, 0.6);
  EXPECT_EQ(plan.baseline_gbps, 1.5);
  EXPECT_TRUE(plan.token.empty());  // the caller mints it
  EXPECT_FALSE(PlanCheck(job, false, 0.6, "cpu", none, baseline_of).run);
  // A worker on probation, or a blame to verify this attempt: ringmaster-check apart.
  auto w2 = [](const std::string& id) { return id == "w2"; };
  EXPECT_TRUE(PlanCheck(job, true, 0.6, "cpu", w2, baseline_of).separately);
  job.separate_check_attempt = 3;
  EXPECT_TRUE(PlanCheck(job, true, 0.6, "cpu", none, baseline_of).separately);
}

TEST(RequestIdReuseTest, TheSameTeamsSameSpecIsTheEarlierJobAnythingElseIsTaken) {
  Job existing;
  existing.id = "j-1";
  existing.team = "a";
  existing.request_id = "r-1";
  existing.spec.name = "train";
  Job asked = existing;
  asked.id.clear();
  EXPECT_TRUE(CheckRequestIdReuse(existing, asked).ok());
  asked.spec.name = "other";
  absl::Status s = CheckRequestIdReuse(existing, asked);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(), "request_id r-1 was already used for a different spec (job j-1)");
  asked = existing;
  asked.team = "b";
  s = CheckRequestIdReuse(existing, asked);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(), "request_id r-1 is already used; choose another");  // nothing of a's
}

}  // namespace
}  // namespace ringmaster::scheduler
