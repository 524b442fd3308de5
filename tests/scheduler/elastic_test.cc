// Elastic jobs in SchedulePass (core/elastic.h): start smaller, grow after the idle delay, shrink
// before preempting whole, chosen by the throughput a rank adds, at most so many resizes an hour.
#include "scheduler/core/elastic.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/core/fair_share.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr int64_t kSecond = 1000;

// Queues of one cohort on workers of t4 GPUs. A pass is applied as the scheduler would once the
// grace is over: starts and claims allocate, preempted jobs release, resized jobs move to their
// new ranks.
class ElasticWorld {
 public:
  ElasticWorld(int workers, int gpus_each) {
    for (int i = 0; i < workers; ++i) {
      Worker w;
      w.id = "w" + std::to_string(i);
      w.address = "10.0.0.1";
      for (int g = 0; g < gpus_each; ++g) w.gpus.push_back(Gpu{g, "t4", 0, false});
      cluster.UpsertWorker(w);
    }
  }
  void AddQueue(const std::string& name, int64_t nominal) {
    Queue q;
    q.name = name;
    q.cohort = "c";
    q.quotas["t4"] = ResourceQuota{nominal, std::nullopt, std::nullopt};
    q.reclaim_within_cohort = ReclaimWithinCohort::kAny;
    q.within_queue = PreemptWithinQueue::kLowerPriority;
    queues[name] = q;
  }
  // min/max 0: not elastic.
  Job& Submit(const std::string& queue, int32_t replicas, int32_t min = 0, int32_t max = 0,
              int32_t priority = 0) {
    Job job;
    job.id = "j" + std::to_string(++seq);
    job.seq = seq;
    job.spec.queue = queue;
    job.spec.replicas = replicas;
    job.spec.min_replicas = min;
    job.spec.max_replicas = max;
    job.spec.gpus_per_replica = 1;
    job.spec.gpu_type = "t4";
    job.spec.priority = priority;
    // Long enough that growing pays for its restart.
    job.spec.max_runtime_seconds = 10 * 3600;
    job.created_at_ms = now_ms;
    jobs[job.id] = job;
    return jobs[job.id];
  }

  PassResult Pass() {
    PassInput in;
    in.queues = &queues;
    in.now_ms = now_ms;
    in.elastic = &elastic;
    in.claims = claims;
    for (auto& [id, job] : jobs) {
      if (job.state == JobState::kPending) in.pending.push_back(&job);
      if (job.state == JobState::kRunning) in.placed.push_back(&job);
    }
    PassResult r = SchedulePass(in, cluster, options);
    for (const auto& p : r.preemptions) {
      Job& v = jobs[p.job_id];
      cluster.Release(v.placement);
      v.placement.clear();
      v.state = JobState::kPending;
    }
    for (const auto& z : r.resizes) {
      Job& v = jobs[z.job_id];
      cluster.Release(v.placement);
      EXPECT_TRUE(cluster.Allocate(z.ranks).ok()) << z.job_id;
      v.placement = z.ranks;
      v.started_at_ms = now_ms;
      elastic.resized_at_ms[z.job_id].push_back(now_ms);
    }
    claims.clear();
    for (const auto& s : r.starts) {
      Job& j = jobs[s.job_id];
      EXPECT_TRUE(cluster.Allocate(s.ranks).ok()) << s.job_id;
      j.placement = s.ranks;
      j.state = JobState::kRunning;
      j.started_at_ms = now_ms;
    }
    claims = r.claims;
    return r;
  }
  // Reports the idle GPUs now and sets what the next pass sees as idle for the delay (and for
  // the queues' own delays, as the scheduler does).
  void ObserveIdle() {
    const auto totals = cluster.GpuTotals();
    idle.Observe("t4", now_ms, totals.at("t4").total - totals.at("t4").allocated);
    elastic.settled_idle["t4"] = idle.Settled("t4", now_ms);
    for (const auto& [name, q] : queues) {
      const int64_t delay = IdleDelayMs(&q, options.elastic);
      if (delay != options.elastic.idle_delay_ms) {
        elastic.settled_idle_by_delay["t4"][delay] = idle.Settled("t4", now_ms, delay);
      }
    }
  }
  int64_t Size(const std::string& id) { return RunningReplicas(jobs[id]); }
  void Finish(const std::string& id) {
    cluster.Release(jobs[id].placement);
    jobs[id].placement.clear();
    jobs[id].state = JobState::kSucceeded;
  }

  std::map<std::string, Queue> queues;
  ClusterState cluster;
  std::map<std::string, Job> jobs;
  std::map<std::string, std::vector<RankPlacement>> claims;
  PolicyOptions options;
  ElasticInput elastic;
  IdleTracker idle{ElasticOptions{}.idle_delay_ms};
  int64_t seq = 0;
  int64_t now_ms = 1'700'000'000'000;
};

TEST(ElasticTest, StartsAtTheLargestSizeThatFitsInsteadOfWaiting) {
  ElasticWorld w(1, 4);
  w.AddQueue("a", 4);
  w.Submit("a", 2);  // holds 2 of the 4 GPUs
  w.Pass();
  const std::string rigid = w.Submit("a", 4).id;
  const std::string elastic = w.Submit("a", 4, 1, 8).id;
  PassResult r = w.Pass();
  ASSERT_THAT(r.starts, SizeIs(1));
  EXPECT_EQ(r.starts[0].job_id, elastic);
  EXPECT_THAT(r.starts[0].ranks, SizeIs(2));
  EXPECT_EQ(w.jobs[rigid].state, JobState::kPending);
  EXPECT_EQ(w.Size(elastic), 2);
}

TEST(ElasticTest, GrowsIntoIdleGpusAfterTheDelayNotBefore) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 4);
  w.AddQueue("b", 4);
  const std::string e = w.Submit("a", 2, 1, 6).id;
  w.Pass();
  w.ObserveIdle();  // 6 idle from now
  w.now_ms += 59 * kSecond;
  w.ObserveIdle();
  EXPECT_THAT(w.Pass().resizes, IsEmpty());
  w.now_ms += 1 * kSecond;
  w.ObserveIdle();
  PassResult r = w.Pass();
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].job_id, e);
  EXPECT_EQ(r.resizes[0].from, 2);
  EXPECT_EQ(r.resizes[0].to, 6);
  EXPECT_THAT(r.resizes[0].ranks, SizeIs(6));
  EXPECT_EQ(r.resizes[0].reason, "grown from 2 to 6 replicas: 6 x t4 idle in cohort c for 60 s");
  EXPECT_EQ(w.Size(e), 6);
}

TEST(ElasticTest, DoesNotGrowWhileAPendingJobWaitsForRoom) {
  ElasticWorld w(3, 4);
  w.AddQueue("a", 4);
  w.AddQueue("b", 8);
  const std::string e = w.Submit("a", 2, 1, 6).id;  // w0: 2 free
  w.Submit("b", 1).spec.gpus_per_replica = 3;       // w1: 1 free
  w.Submit("b", 1).spec.gpus_per_replica = 3;       // w2: 1 free
  w.Pass();
  // Its quota lets it borrow, but no worker has 4 GPUs free: it waits for room, and the 4 idle
  // GPUs are kept for it.
  Job& waiting = w.Submit("b", 1);
  waiting.spec.gpus_per_replica = 4;
  w.ObserveIdle();
  w.now_ms += 120 * kSecond;
  w.ObserveIdle();
  EXPECT_THAT(w.Pass().resizes, IsEmpty());
  EXPECT_EQ(waiting.state, JobState::kPending);
  w.jobs.erase(waiting.id);  // cancelled: now nobody pending could use them
  PassResult r = w.Pass();
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].job_id, e);
}

TEST(ElasticTest, AJobStartedSmallerGrowsBackToItsReplicasEvenWhileOthersWaitForRoom) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 2);
  w.AddQueue("b", 14);
  const std::string holder = w.Submit("a", 6).id;
  const std::string e = w.Submit("a", 4, 2, 8).id;
  w.Pass();
  ASSERT_EQ(w.Size(e), 2);
  w.Finish(holder);
  Job& waiting = w.Submit("a", 2);
  waiting.spec.gpus_per_replica = 4;  // needs both workers whole: waits for room
  w.options.reservations = 0;         // (a reservation would keep the idle GPUs for it)
  w.ObserveIdle();
  w.now_ms += 60 * kSecond;
  w.ObserveIdle();
  PassResult r = w.Pass();
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].to, 4) << "back to its replicas, no further while a job waits";
}

TEST(ElasticTest, AGangWithinItsNominalWaitingForRoomStopsAllGrowth) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 2);
  w.AddQueue("b", 14);
  const std::string holder = w.Submit("a", 6).id;
  const std::string e = w.Submit("a", 4, 2, 8).id;
  w.Pass();
  w.Finish(holder);
  Job& owed = w.Submit("b", 2);
  owed.spec.gpus_per_replica = 4;  // within b's nominal; needs both workers whole
  w.options.reservations = 0;
  w.ObserveIdle();
  w.now_ms += 60 * kSecond;
  w.ObserveIdle();
  EXPECT_THAT(w.Pass().resizes, IsEmpty());
  EXPECT_EQ(w.Size(e), 2);
}

TEST(ElasticTest, ShrinksABorrowerBeforePreemptingAnyoneWhole) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 4);
  w.AddQueue("b", 4);
  const std::string e = w.Submit("a", 4, 2, 8).id;
  w.Pass();
  w.ObserveIdle();
  w.now_ms += 60 * kSecond;
  w.ObserveIdle();
  ASSERT_THAT(w.Pass().resizes, SizeIs(1));
  ASSERT_EQ(w.Size(e), 8);  // a borrows all of b's nominal
  w.now_ms += 60 * kSecond;
  const std::string reclaimer = w.Submit("b", 3).id;
  PassResult r = w.Pass();
  EXPECT_THAT(r.preemptions, IsEmpty());
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].job_id, e);
  EXPECT_EQ(r.resizes[0].to, 5);  // three ranks freed, no more
  EXPECT_EQ(r.resizes[0].by_job_id, reclaimer);
  EXPECT_EQ(r.resizes[0].reason, "shrunk from 8 to 5: queue b reclaims its nominal quota");
  ASSERT_EQ(r.claims.count(reclaimer), 1u);
  // Fairness: the queue within its nominal gets its GPUs on the next pass.
  PassResult next = w.Pass();
  ASSERT_THAT(next.starts, SizeIs(1));
  EXPECT_EQ(next.starts[0].job_id, reclaimer);
  EXPECT_EQ(next.ledger.Used("b", "t4"), 3 * kWholeGpuShare);
  EXPECT_EQ(w.Size(e), 5);
}

TEST(ElasticTest, PreemptsWholeWhenShrinkingToMinReplicasIsNotEnough) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 2);
  w.AddQueue("b", 6);
  const std::string e = w.Submit("a", 6, 5, 6).id;  // borrows 4 of b's 6
  w.Submit("b", 2);
  w.Pass();
  w.now_ms += 60 * kSecond;
  w.Submit("b", 4);  // needs all 4 borrowed GPUs: shrinking to 5 frees 1
  PassResult r = w.Pass();
  EXPECT_THAT(r.resizes, IsEmpty());
  ASSERT_THAT(r.preemptions, SizeIs(1));
  EXPECT_EQ(r.preemptions[0].job_id, e);
}

TEST(ElasticTest, GrowsTheJobWhoseNextRankAddsTheMostThroughput) {
  ElasticWorld w(1, 5);
  w.AddQueue("a", 5);
  const std::string flat = w.Submit("a", 2, 1, 4).id;
  const std::string linear = w.Submit("a", 2, 1, 4).id;
  // The first scales poorly past 2 ranks; the second has no curve (linear).
  w.elastic.throughput[flat] = {0, 100, 150, 160, 165};
  w.Pass();
  w.ObserveIdle();  // 1 idle
  w.now_ms += 60 * kSecond;
  w.ObserveIdle();
  PassResult r = w.Pass();
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].job_id, linear);
  EXPECT_EQ(r.resizes[0].to, 3);
}

TEST(ElasticTest, ShrinksTheJobWhoseLastRankAddsTheLeastThroughput) {
  ElasticWorld w(1, 8);
  w.AddQueue("a", 0);
  w.AddQueue("b", 8);
  const std::string linear = w.Submit("a", 4, 2, 4).id;
  const std::string flat = w.Submit("a", 4, 2, 4).id;
  w.elastic.throughput[flat] = {0, 100, 150, 160, 165};
  w.Pass();
  w.now_ms += 60 * kSecond;
  w.Submit("b", 2);
  PassResult r = w.Pass();
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].job_id, flat);
  EXPECT_EQ(r.resizes[0].to, 2);
  EXPECT_EQ(w.Size(linear), 4);
}

TEST(ElasticTest, NoMoreResizesAnHourThanTheLimit) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 4);
  w.AddQueue("b", 4);
  const std::string e = w.Submit("a", 2, 1, 8).id;
  w.Pass();
  w.elastic.resized_at_ms[e] = {w.now_ms - 50 * 60 * kSecond, w.now_ms - 10 * 60 * kSecond};
  w.ObserveIdle();
  w.now_ms += 60 * kSecond;
  w.ObserveIdle();
  EXPECT_THAT(w.Pass().resizes, IsEmpty()) << "two resizes in the last hour";
  w.now_ms += 10 * 60 * kSecond;  // the first is now older than an hour
  w.ObserveIdle();
  PassResult r = w.Pass();
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].to, 8);
  // At its limit again: a reclaim preempts it whole rather than shrinking it.
  w.now_ms += 60 * kSecond;
  w.Submit("b", 2);
  PassResult reclaim = w.Pass();
  EXPECT_THAT(reclaim.resizes, IsEmpty());
  ASSERT_THAT(reclaim.preemptions, SizeIs(1));
  EXPECT_EQ(reclaim.preemptions[0].job_id, e);
}

TEST(ElasticTest, TheResizeTimesOfAJobAreRebuiltFromItsEventsWithinTheHour) {
  const int64_t now = 1'700'000'000'000;
  auto event = [](int64_t seq, int64_t time_ms, const std::string& reason) {
    JobEvent e;
    e.job_id = "j1";
    e.seq = seq;
    e.time_ms = time_ms;
    e.reason = reason;
    return e;
  };
  const std::vector<JobEvent> events = {
      event(1, now - 90 * 60 * kSecond, "submitted"),
      event(2, now - 70 * 60 * kSecond, GrowReason(2, 4, 2, "t4", "c", 60 * kSecond)),
      event(3, now - 50 * 60 * kSecond, ShrinkReason(4, 2, "queue b reclaims its nominal quota")),
      event(4, now - 49 * 60 * kSecond, "placed on w1"),
      event(5, now - 10 * 60 * kSecond, GrowReason(2, 3, 1, "t4", "c", 60 * kSecond)),
      event(6, now - 60 * 60 * kSecond, "preempted")};
  // The grow of 70 minutes ago has left the window; the other two count, oldest first.
  EXPECT_THAT(RecentResizeTimes(events, now),
              ::testing::ElementsAre(now - 50 * 60 * kSecond, now - 10 * 60 * kSecond));
  ElasticInput input;
  input.resized_at_ms["j1"] = RecentResizeTimes(events, now);
  EXPECT_FALSE(MayResize(&input, "j1", now, 2));
  EXPECT_TRUE(MayResize(&input, "j1", now + 10 * 60 * kSecond, 2));
  EXPECT_THAT(RecentResizeTimes({}, now), IsEmpty());
}

TEST(ElasticTest, EachQueueWaitsForItsOwnIdleDelay) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 4);
  w.AddQueue("b", 4);
  w.queues["a"].elastic_idle_delay_seconds = 300;
  w.queues["b"].elastic_idle_delay_seconds = 10;
  w.idle.KeepWindow(300 * kSecond);
  const std::string patient = w.Submit("a", 2, 1, 4).id;
  const std::string eager = w.Submit("b", 2, 1, 4).id;
  w.Pass();
  w.ObserveIdle();  // 4 idle from now
  w.now_ms += 10 * kSecond;
  w.ObserveIdle();
  PassResult r = w.Pass();
  ASSERT_THAT(r.resizes, SizeIs(1)) << "only b's job: a waits for 300 s";
  EXPECT_EQ(r.resizes[0].job_id, eager);
  EXPECT_EQ(r.resizes[0].to, 4);
  EXPECT_EQ(r.resizes[0].reason, "grown from 2 to 4 replicas: 4 x t4 idle in cohort c for 10 s");
  w.ObserveIdle();           // 2 idle from 10 s on
  w.now_ms += 50 * kSecond;  // the scheduler's 60 s
  w.ObserveIdle();
  EXPECT_THAT(w.Pass().resizes, IsEmpty());
  w.now_ms += 239 * kSecond;
  w.ObserveIdle();
  EXPECT_THAT(w.Pass().resizes, IsEmpty()) << "299 s";
  w.now_ms += 1 * kSecond;
  w.ObserveIdle();
  r = w.Pass();
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].job_id, patient);
  EXPECT_EQ(r.resizes[0].reason, "grown from 2 to 4 replicas: 2 x t4 idle in cohort c for 300 s");
}

TEST(ElasticTest, AJobGrowsOnlyIntoWhatStayedIdleForItsDelayLessWhatOthersTook) {
  ElasticWorld w(1, 6);
  w.AddQueue("a", 3);
  w.AddQueue("b", 3);
  w.queues["a"].elastic_idle_delay_seconds = 120;
  w.idle.KeepWindow(120 * kSecond);
  const std::string patient = w.Submit("a", 1, 1, 4).id;
  const std::string holder = w.Submit("a", 2).id;
  const std::string quick = w.Submit("b", 1, 1, 4).id;
  w.elastic.throughput[patient] = {0, 100, 150, 190, 220};  // b's job (linear) gains more
  w.Pass();
  w.ObserveIdle();  // 2 idle
  w.now_ms += 60 * kSecond;
  w.Finish(holder);
  w.ObserveIdle();  // 4 idle
  w.now_ms += 60 * kSecond;
  w.ObserveIdle();  // 4 idle for 60 s, 2 of them for a's 120 s
  PassResult r = w.Pass();
  // b's job takes 3 of the 4 by its larger gain; of the 2 idle for 120 s, none is left for a's.
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].job_id, quick);
  EXPECT_EQ(r.resizes[0].to, 4);
  EXPECT_EQ(w.Size(patient), 1);
}

// "Never below a size it ran at without its having been asked to": a pass shrinks a job only for
// a pending job that asks for its GPUs, never on its own (not even when the job's last ranks
// add nothing); a job that asks without a right to them (no reclaim of its nominal, no higher
// priority) gets back only the ranks the job grew into beyond its replicas, never more.
TEST(ElasticTest, AJobIsShrunkOnlyWhenAskedAndBelowItsReplicasOnlyByAJobWithARight) {
  ElasticWorld w(1, 4);
  w.AddQueue("a", 4);
  const std::string e = w.Submit("a", 2, 1, 4).id;
  w.Pass();
  w.ObserveIdle();
  w.now_ms += 60 * kSecond;
  w.ObserveIdle();
  ASSERT_THAT(w.Pass().resizes, SizeIs(1));
  ASSERT_EQ(w.Size(e), 4);
  // Its last two ranks turn out to add nothing: nobody asks, so nothing is taken.
  w.elastic.throughput[e] = {0, 100, 150, 150, 150};
  w.now_ms += 60 * kSecond;
  EXPECT_THAT(w.Pass().resizes, IsEmpty());
  // A job of the same queue and priority asks for 3: the 2 ranks grown into are not enough, and
  // it has no right to more (within_queue preempts only lower priorities).
  Job& three = w.Submit("a", 3);
  PassResult r = w.Pass();
  EXPECT_THAT(r.resizes, IsEmpty());
  EXPECT_THAT(r.preemptions, IsEmpty());
  EXPECT_EQ(w.Size(e), 4);
  w.jobs.erase(three.id);
  // One that asks for 2 gets the ranks grown into: back to its replicas, not below.
  const std::string two = w.Submit("a", 2).id;
  r = w.Pass();
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].to, 2);
  EXPECT_EQ(r.resizes[0].reason,
            absl::StrCat("shrunk from 4 to 2: ", two, " of queue a waits for GPUs it grew into"));
}

TEST(ElasticTest, JobsThatAreNotElasticNeitherStartSmallerNorResize) {
  ElasticWorld w(1, 4);
  w.AddQueue("a", 4);
  const std::string small = w.Submit("a", 2).id;
  w.Pass();
  w.ObserveIdle();
  w.now_ms += 600 * kSecond;
  w.ObserveIdle();
  w.Submit("a", 4);
  PassResult r = w.Pass();
  EXPECT_THAT(r.starts, IsEmpty());
  EXPECT_THAT(r.resizes, IsEmpty());
  EXPECT_EQ(w.Size(small), 2);
}

// sizes_divide: every size the policy picks divides it.
TEST(ElasticTest, StartsAtTheLargestFittingSizeThatDividesSizesDivide) {
  ElasticWorld w(1, 8);
  w.AddQueue("a", 8);
  w.Submit("a", 2);  // 6 of the 8 GPUs free
  w.Pass();
  Job& e = w.Submit("a", 8, 2, 8);
  e.spec.sizes_divide = 8;
  PassResult r = w.Pass();
  ASSERT_THAT(r.starts, SizeIs(1));
  EXPECT_EQ(r.starts[0].job_id, e.id);
  EXPECT_THAT(r.starts[0].ranks, SizeIs(4)) << "6 fits but does not divide 8; 4 does";
}

TEST(ElasticTest, GrowsOnlyToASizeThatDividesSizesDivide) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 8);
  w.Submit("a", 1);  // holds 1: 5 of the other 7 are left to grow into
  Job& e = w.Submit("a", 2, 2, 8);
  e.spec.sizes_divide = 8;
  w.Pass();
  ASSERT_EQ(w.Size(e.id), 2);
  w.ObserveIdle();
  w.now_ms += 60 * kSecond;
  w.ObserveIdle();
  PassResult r = w.Pass();
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].from, 2);
  EXPECT_EQ(r.resizes[0].to, 4) << "7 would fit; 4 is the largest size dividing 8 that does";
  EXPECT_THAT(r.resizes[0].ranks, SizeIs(4));
  EXPECT_EQ(w.Size(e.id), 4);
}

TEST(ElasticTest, ShrinksOnlyToASizeThatDividesSizesDivide) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 2);
  w.AddQueue("b", 6);
  Job& e = w.Submit("a", 8, 2, 8);  // borrows 6 of b's nominal
  e.spec.sizes_divide = 8;
  w.Pass();
  ASSERT_EQ(w.Size(e.id), 8);
  w.now_ms += 60 * kSecond;
  const std::string reclaimer = w.Submit("b", 3).id;
  PassResult r = w.Pass();
  EXPECT_THAT(r.preemptions, IsEmpty());
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].to, 4) << "5 would free enough; 4 is the next size dividing 8";
  EXPECT_THAT(r.resizes[0].ranks, SizeIs(4));
  EXPECT_EQ(r.resizes[0].reason, "shrunk from 8 to 4: queue b reclaims its nominal quota");
  PassResult next = w.Pass();
  ASSERT_THAT(next.starts, SizeIs(1));
  EXPECT_EQ(next.starts[0].job_id, reclaimer);
  EXPECT_EQ(w.Size(e.id), 4);
}

TEST(ElasticTest, ShrinksInStepsOfDivisorsDownToWhatFrees) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 2);
  w.AddQueue("b", 6);
  Job& e = w.Submit("a", 8, 2, 8);
  e.spec.sizes_divide = 8;
  w.Pass();
  w.now_ms += 60 * kSecond;
  w.Submit("b", 5);  // 8 -> 4 frees 4, not enough; 4 -> 2 frees 2 more
  PassResult r = w.Pass();
  EXPECT_THAT(r.preemptions, IsEmpty());
  ASSERT_THAT(r.resizes, SizeIs(1));
  EXPECT_EQ(r.resizes[0].to, 2);
}

TEST(ElasticSizesTest, TheSizesAJobMayRunAtDivideSizesDivide) {
  JobSpec spec;
  spec.replicas = 4;
  spec.min_replicas = 2;
  spec.max_replicas = 12;
  EXPECT_EQ(NextElasticSize(spec, 4, 12), 5);
  EXPECT_EQ(PreviousElasticSize(spec, 4, 2), 3);
  spec.sizes_divide = 24;  // 2, 3, 4, 6, 8, 12
  EXPECT_FALSE(IsElasticSize(spec, 5));
  EXPECT_TRUE(IsElasticSize(spec, 6));
  EXPECT_FALSE(IsElasticSize(spec, 24)) << "above max_replicas";
  EXPECT_FALSE(IsElasticSize(spec, 1)) << "below min_replicas";
  EXPECT_EQ(NextElasticSize(spec, 4, 12), 6);
  EXPECT_EQ(NextElasticSize(spec, 8, 11), 0);
  EXPECT_EQ(PreviousElasticSize(spec, 12, 2), 8);
  EXPECT_EQ(PreviousElasticSize(spec, 3, 3), 0);
  // A step's gain is the mean of its ranks' gains.
  const std::vector<double> curve = {0, 100, 190, 270, 340};
  EXPECT_DOUBLE_EQ(StepGain(&curve, 2, 3), RankGain(&curve, 2));
  EXPECT_DOUBLE_EQ(StepGain(&curve, 2, 4), (340.0 - 190.0) / 100 / 2);
}

// A restart nobody asked for (a failure under OnFailure, a scheduler restart) brings an elastic
// job back at the largest size that fits up to the one it last ran at, not only up to its
// replicas; never above max_replicas and, with sizes_divide, at a size dividing it.
TEST(ElasticTest, ARestartedJobComesBackAtUpToTheSizeItLastRanAt) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 8);
  Job& e = w.Submit("a", 4, 2, 8);
  e.last_replicas = 6;  // it had grown to 6, then a rank failed
  PassResult r = w.Pass();
  ASSERT_THAT(r.starts, SizeIs(1));
  EXPECT_THAT(r.starts[0].ranks, SizeIs(6)) << "8 are free, but it never ran at 8";
}

TEST(ElasticTest, ARestartedJobComesBackAtTheLargestSizeThatFitsDownToItsReplicas) {
  ElasticWorld w(2, 4);
  w.AddQueue("a", 8);
  w.Submit("a", 3);  // 5 free
  w.Pass();
  Job& e = w.Submit("a", 4, 2, 8);
  e.last_replicas = 8;
  PassResult r = w.Pass();
  ASSERT_THAT(r.starts, SizeIs(1));
  EXPECT_THAT(r.starts[0].ranks, SizeIs(5));
  // With sizes_divide, the largest size dividing it: 5 fits but does not divide 8.
  ElasticWorld d(2, 4);
  d.AddQueue("a", 8);
  d.Submit("a", 3);
  d.Pass();
  Job& f = d.Submit("a", 2, 2, 8);
  f.spec.sizes_divide = 8;
  f.last_replicas = 8;
  r = d.Pass();
  ASSERT_THAT(r.starts, SizeIs(1));
  EXPECT_THAT(r.starts[0].ranks, SizeIs(4));
}

TEST(ElasticTest, ARestartedJobWhoseLastSizeIsBeyondItsRangeComesBackAtMostAtMaxReplicas) {
  Job job;
  job.spec.replicas = 4;
  job.spec.min_replicas = 2;
  job.spec.max_replicas = 6;
  EXPECT_EQ(StartSize(job), 4) << "never ran: its replicas";
  job.last_replicas = 3;
  EXPECT_EQ(StartSize(job), 4) << "below its replicas: its replicas";
  job.last_replicas = 9;
  EXPECT_EQ(StartSize(job), 6);
  job.spec.sizes_divide = 20;  // 2, 4, 5
  EXPECT_EQ(StartSize(job), 5);
  Job rigid;
  rigid.spec.replicas = 3;
  rigid.last_replicas = 8;
  EXPECT_EQ(StartSize(rigid), 3);
}

TEST(IdleTrackerTest, SettledIsTheFewestIdleOverTheWholeDelay) {
  IdleTracker idle(60 * kSecond);
  const int64_t t0 = 1'000'000;
  idle.Observe("t4", t0, 4);
  EXPECT_EQ(idle.Settled("t4", t0 + 59 * kSecond), 0) << "not observed for the delay yet";
  EXPECT_EQ(idle.NextRise("t4", t0), t0 + 60 * kSecond);
  EXPECT_EQ(idle.Settled("t4", t0 + 60 * kSecond), 4);
  idle.Observe("t4", t0 + 70 * kSecond, 1);  // a job took 3
  idle.Observe("t4", t0 + 80 * kSecond, 5);  // one ended
  EXPECT_EQ(idle.Settled("t4", t0 + 80 * kSecond), 1);
  EXPECT_EQ(idle.NextRise("t4", t0 + 80 * kSecond), t0 + 130 * kSecond);
  EXPECT_EQ(idle.Settled("t4", t0 + 140 * kSecond), 5);
  EXPECT_EQ(idle.Settled("v100", t0), 0);
}

TEST(IdleTrackerTest, ALongerDelayOfAQueueNeedsTheWindowKeptForIt) {
  const int64_t t0 = 1'000'000;
  IdleTracker plain(60 * kSecond);
  IdleTracker idle(60 * kSecond);
  idle.KeepWindow(300 * kSecond);
  for (IdleTracker* t : {&plain, &idle}) {
    t->Observe("t4", t0, 4);
    t->Observe("t4", t0 + 100 * kSecond, 2);
    t->Observe("t4", t0 + 300 * kSecond, 3);
  }
  EXPECT_EQ(idle.Settled("t4", t0 + 299 * kSecond, 300 * kSecond), 0) << "not observed so long";
  EXPECT_EQ(idle.Settled("t4", t0 + 300 * kSecond, 300 * kSecond), 2);
  EXPECT_EQ(idle.Settled("t4", t0 + 300 * kSecond), 2);
  EXPECT_EQ(idle.Settled("t4", t0 + 360 * kSecond), 3) << "the scheduler's 60 s";
  EXPECT_EQ(idle.Settled("t4", t0 + 360 * kSecond, 300 * kSecond), 2);
  EXPECT_EQ(plain.Settled("t4", t0 + 360 * kSecond, 300 * kSecond), 0)
      << "a window not kept for the delay knows nothing of it";
  EXPECT_EQ(plain.Settled("t4", t0 + 360 * kSecond), 3);
}

TEST(ElasticModelTest, RankGainIsTheNextRanksThroughputOverOneRanks) {
  const std::vector<double> curve = {0, 100, 180, 240};
  EXPECT_DOUBLE_EQ(RankGain(&curve, 1), 0.8);
  EXPECT_DOUBLE_EQ(RankGain(&curve, 2), 0.6);
  EXPECT_DOUBLE_EQ(RankGain(&curve, 3), 0.8) << "past the curve: linear from its last size";
  EXPECT_DOUBLE_EQ(RankGain(nullptr, 7), 1.0);
}

TEST(ElasticTest, AThroughputCurveIsDrawnThroughTheSizesMeasured) {
  EXPECT_TRUE(ThroughputCurve({}).empty());
  // Measured at 2 and 4: linear below 2, on the line between 2 and 4, linear past 4.
  const std::vector<double> curve = ThroughputCurve({{2, 100.0}, {4, 160.0}});
  EXPECT_THAT(curve, ::testing::ElementsAre(0.0, 50.0, 100.0, 130.0, 160.0));
  EXPECT_DOUBLE_EQ(Throughput(&curve, 8), 320.0);
  // The gain of a rank falls where scaling flattens: 2 -> 3 adds 30/50 of a rank at one.
  EXPECT_DOUBLE_EQ(RankGain(&curve, 2), 0.6);
}

TEST(ElasticTest, AJobThatSavesWhenStoppedLosesOnlyTheRestartAndGrowsSooner) {
  // Ten minutes in, no runtime limit and no checkpoint: a restart would lose all ten minutes,
  // unless the job saves when stopped (the live service's contract).
  for (bool saves : {false, true}) {
    ElasticWorld w(2, 4);
    w.options.elastic.saves_on_stop = saves;
    w.AddQueue("a", 4);
    w.AddQueue("b", 4);
    Job& job = w.Submit("a", 2, 1, 6);
    job.spec.max_runtime_seconds = 0;
    w.Pass();
    w.ObserveIdle();
    w.now_ms += 10 * 60 * kSecond;
    w.ObserveIdle();
    EXPECT_THAT(w.Pass().resizes, SizeIs(saves ? 1 : 0)) << "saves_on_stop " << saves;
  }
}

}  // namespace
}  // namespace ringmaster::scheduler
