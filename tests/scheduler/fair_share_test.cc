// The fair-share policy on plain snapshots with a simulated clock.
#include "scheduler/core/fair_share.h"

#include <deque>
#include <map>
#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

Worker MakeWorker(const std::string& id, int gpus, const std::string& type = "t4") {
  Worker w;
  w.id = id;
  w.address = "10.0.0.1";
  w.port = 7071;
  for (int i = 0; i < gpus; ++i) w.gpus.push_back(Gpu{i, type, 16LL << 30, false});
  return w;
}

Queue MakeQueue(const std::string& name, const std::string& cohort, int64_t nominal,
                std::optional<int64_t> borrowing = std::nullopt,
                std::optional<int64_t> lending = std::nullopt) {
  Queue q;
  q.name = name;
  q.cohort = cohort;
  q.quotas["t4"] = ResourceQuota{nominal, borrowing, lending};
  return q;
}

// A small world: queues, workers, jobs, and a clock; passes are applied to it as the scheduler
// would (starts allocate, preemptions release at once).
class World {
 public:
  explicit World(int workers, int gpus_each = 8) {
    for (int i = 0; i < workers; ++i)
      cluster.UpsertWorker(MakeWorker("w" + std::to_string(i), gpus_each));
  }
  void AddQueue(Queue q) { queues[q.name] = std::move(q); }

  Job& Submit(const std::string& queue, int32_t replicas, int32_t gpus_per_replica,
              int32_t priority = 0, int64_t max_runtime_s = 0) {
    Job job;
    job.id = "j" + std::to_string(++seq);
    job.seq = seq;
    job.spec.queue = queue;
    job.spec.replicas = replicas;
    job.spec.gpus_per_replica = gpus_per_replica;
    job.spec.gpu_type = "t4";
    job.spec.priority = priority;
    job.spec.max_runtime_seconds = max_runtime_s;
    jobs[job.id] = job;
    return jobs[job.id];
  }

  PassResult Pass(const PolicyOptions& options = {}) {
    PassInput in;
    in.queues = &queues;
    in.now_ms = now_ms;
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
      ++preemptions[p.job_id];
    }
    for (const auto& s : r.starts) {
      Job& j = jobs[s.job_id];
      EXPECT_TRUE(cluster.Allocate(s.ranks).ok()) << s.job_id;
      j.placement = s.ranks;
      j.state = JobState::kRunning;
      j.started_at_ms = now_ms;
    }
    return r;
  }

  void Finish(const std::string& id) {
    Job& j = jobs[id];
    cluster.Release(j.placement);
    j.placement.clear();
    j.state = JobState::kSucceeded;
  }

  std::set<std::string> Running() const {
    std::set<std::string> out;
    for (const auto& [id, job] : jobs) {
      if (job.state == JobState::kRunning) out.insert(id);
    }
    return out;
  }

  std::map<std::string, Queue> queues;
  ClusterState cluster;
  std::map<std::string, Job> jobs;
  std::map<std::string, int> preemptions;
  int64_t seq = 0;
  int64_t now_ms = 1'700'000'000'000;
};

// Whole GPUs in the ledger's thousandths (QuotaScale).
constexpr int64_t G(int64_t gpus) { return gpus * kWholeGpuShare; }

TEST(QuotaLedgerTest, FitsWithinNominalThenByBorrowingWithinTheCohortsPool) {
  std::map<std::string, Queue> queues{{"a", MakeQueue("a", "c", 8)}, {"b", MakeQueue("b", "c", 8)}};
  QuotaLedger ledger(queues);
  EXPECT_EQ(ledger.CanAdmit("a", {"t4", G(8)}).fit, Fit::kWithinNominal);
  EXPECT_EQ(ledger.CanAdmit("a", {"t4", G(12)}).fit, Fit::kBorrowing);
  EXPECT_EQ(ledger.CanAdmit("a", {"t4", G(16)}).fit, Fit::kBorrowing);
  auto no = ledger.CanAdmit("a", {"t4", G(17)});
  EXPECT_EQ(no.fit, Fit::kNo);
  EXPECT_THAT(no.reason, HasSubstr("queue a: needs 17 x t4, nominal 8, in use 0"));
  ledger.Add("b", {"t4", G(6)});
  EXPECT_EQ(ledger.CanAdmit("a", {"t4", G(10)}).fit, Fit::kBorrowing);
  EXPECT_EQ(ledger.CanAdmit("a", {"t4", G(11)}).fit, Fit::kNo);
  // b's own nominal is still b's, though a borrowed it: within nominal, refused, reclaimable.
  ledger.Add("a", {"t4", G(10)});
  auto b = ledger.CanAdmit("b", {"t4", G(2)});
  EXPECT_EQ(b.fit, Fit::kNo);
  EXPECT_TRUE(b.within_nominal);
  EXPECT_EQ(ledger.UsageOf("a")["t4"].borrowed, G(2));
  EXPECT_EQ(ledger.UsageOf("b")["t4"].lent, G(2));
}

TEST(QuotaLedgerTest, NoCohortMeansNoBorrowing) {
  std::map<std::string, Queue> queues{{"a", MakeQueue("a", "", 8)}, {"b", MakeQueue("b", "", 8)}};
  QuotaLedger ledger(queues);
  EXPECT_EQ(ledger.CanAdmit("a", {"t4", G(8)}).fit, Fit::kWithinNominal);
  EXPECT_EQ(ledger.CanAdmit("a", {"t4", G(9)}).fit, Fit::kNo);
  EXPECT_EQ(ledger.CanAdmit("a", {"v100", G(1)}).fit, Fit::kNo);  // no quota for it: nominal 0
}

TEST(QuotaLedgerTest, BorrowingAndLendingLimitsHold) {
  std::map<std::string, Queue> queues{{"a", MakeQueue("a", "c", 8, /*borrowing=*/4)},
                                      {"b", MakeQueue("b", "c", 8, std::nullopt, /*lending=*/2)},
                                      {"z", MakeQueue("z", "c", 8)}};
  QuotaLedger ledger(queues);
  EXPECT_EQ(ledger.CanAdmit("a", {"t4", G(12)}).fit, Fit::kBorrowing);
  EXPECT_EQ(ledger.CanAdmit("a", {"t4", G(13)}).fit, Fit::kNo);  // borrowing limit
  // z may take its 8, a's 8 and b's lendable 2, not b's guaranteed 6.
  EXPECT_EQ(ledger.CanAdmit("z", {"t4", G(18)}).fit, Fit::kBorrowing);
  EXPECT_EQ(ledger.CanAdmit("z", {"t4", G(19)}).fit, Fit::kNo);
  ledger.Add("z", {"t4", G(18)});
  EXPECT_EQ(ledger.CanAdmit("b", {"t4", G(6)}).fit, Fit::kWithinNominal);  // guaranteed part
  EXPECT_EQ(ledger.CanAdmit("b", {"t4", G(7)}).fit, Fit::kNo);
}

TEST(QuotaLedgerTest, UnlimitedQueueIsBoundOnlyByTheCluster) {
  Queue d;
  d.name = "default";
  std::map<std::string, Queue> queues{{"default", d}};
  QuotaLedger ledger(queues);
  EXPECT_EQ(ledger.CanAdmit("default", {"t4", G(100000)}).fit, Fit::kWithinNominal);
  EXPECT_EQ(ledger.Share("default"), 0);
}

TEST(FairShareTest, LowerWeightedShareGoesFirst) {
  World w(2);  // 16 GPUs
  Queue a = MakeQueue("a", "c", 4);
  Queue b = MakeQueue("b", "c", 4);
  b.weight = 3;
  Queue idle = MakeQueue("idle", "c", 8);
  w.AddQueue(a);
  w.AddQueue(b);
  w.AddQueue(idle);
  for (int i = 0; i < 8; ++i) w.Submit("a", 1, 1);
  for (int i = 0; i < 8; ++i) w.Submit("b", 1, 1);
  PassResult r = w.Pass();
  ASSERT_EQ(r.starts.size(), 16u);
  // Both got their nominal 4; the 8 borrowed GPUs split by weight 1:3 as far as shares allow.
  int a_running = 0, b_running = 0;
  for (const auto& s : r.starts) (w.jobs[s.job_id].spec.queue == "a" ? a_running : b_running)++;
  EXPECT_EQ(a_running + b_running, 16);
  EXPECT_EQ(b_running, 8);  // all of b's jobs (4 nominal + 4 borrowed) ...
  EXPECT_EQ(a_running, 8);  // ... and a's, since there is room for all
  // With room for only part of the borrowing, the lower weighted share wins each step.
  World v(2);
  v.AddQueue(a);
  v.AddQueue(b);
  v.AddQueue(idle);
  for (int i = 0; i < 12; ++i) v.Submit("a", 1, 1);
  for (int i = 0; i < 12; ++i) v.Submit("b", 1, 1);
  r = v.Pass();
  a_running = b_running = 0;
  for (const auto& s : r.starts) (v.jobs[s.job_id].spec.queue == "a" ? a_running : b_running)++;
  // 8 to lend: a borrows 2 (share 2/8), b borrows 6 (share 6/8/3 = 0.25).
  EXPECT_EQ(a_running, 6);
  EXPECT_EQ(b_running, 10);
}

TEST(FairShareTest, JobsThatFitWithoutBorrowingGoFirst) {
  World w(1);  // 8 GPUs
  w.AddQueue(MakeQueue("a", "c", 4));
  w.AddQueue(MakeQueue("b", "c", 4));
  w.Submit("a", 1, 6, /*priority=*/100);  // would borrow 2
  Job& b = w.Submit("b", 1, 4);
  PassResult r = w.Pass();
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].job_id, b.id);
}

TEST(FairShareTest, AJobThatCannotFitDoesNotBlockTheJobsBehindIt) {
  World w(1);
  w.AddQueue(MakeQueue("a", "", 8));
  Job& big = w.Submit("a", 2, 8);
  Job& small = w.Submit("a", 1, 2);
  PassResult r = w.Pass();
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].job_id, small.id);
  EXPECT_THAT(r.WaitingReason(big.id), HasSubstr("needs 16 x t4"));
  // Helios' FIFO blocks instead.
  World f(1);
  f.AddQueue(MakeQueue("a", "", 8));
  f.Submit("a", 1, 8);
  f.Pass();
  f.Submit("a", 1, 4);
  Job& after = f.Submit("a", 1, 1);
  PolicyOptions fifo;
  fifo.strict_fifo = true;
  r = f.Pass(fifo);
  EXPECT_THAT(r.starts, IsEmpty());
  EXPECT_THAT(r.WaitingReason(after.id), HasSubstr("FIFO"));
}

TEST(FairShareTest, ReclaimPreemptsTheSmallestSetOfBorrowersNewestFirst) {
  World w(2);  // 16 GPUs
  Queue a = MakeQueue("a", "c", 8);
  Queue b = MakeQueue("b", "c", 8);
  b.reclaim_within_cohort = ReclaimWithinCohort::kAny;
  w.AddQueue(a);
  w.AddQueue(b);
  Job& a1 = w.Submit("a", 1, 8);
  w.Pass();
  w.now_ms += 1000;
  Job& a2 = w.Submit("a", 1, 4);  // borrowing
  w.Pass();
  w.now_ms += 1000;
  Job& a3 = w.Submit("a", 1, 2);  // borrowing, newest
  Job& a4 = w.Submit("a", 1, 2);
  w.Pass();
  ASSERT_EQ(w.Running().size(), 4u);
  w.now_ms += 1000;
  Job& b1 = w.Submit("b", 1, 4);  // b's own nominal: reclaim 4 GPUs
  PassResult r = w.Pass();
  // Borrowers only (a1 is within a's nominal); newest first until it fits, then the smallest
  // set: a3 and a4 (2 + 2) suffice, a2 stays.
  std::set<std::string> victims;
  for (const auto& p : r.preemptions) {
    victims.insert(p.job_id);
    EXPECT_EQ(p.by_job_id, b1.id);
    EXPECT_EQ(p.reason, "reclaim");
  }
  EXPECT_THAT(victims, UnorderedElementsAre(a3.id, a4.id));
  EXPECT_THAT(r.WaitingReason(b1.id), HasSubstr("preempting"));
  r = w.Pass();  // victims gone: b1 starts; a3/a4 must wait, they would borrow b's share
  EXPECT_TRUE(w.Running().count(b1.id));
  EXPECT_TRUE(w.Running().count(a1.id));
  EXPECT_TRUE(w.Running().count(a2.id));
  EXPECT_THAT(r.preemptions, IsEmpty());
  EXPECT_EQ(w.jobs[a3.id].state, JobState::kPending);
}

TEST(FairShareTest, AmongEqualVictimsTheOneThatLosesTheLeastWorkSinceItsCheckpointGoes) {
  World w(1);  // 8 GPUs
  Queue a = MakeQueue("a", "c", 0);
  Queue b = MakeQueue("b", "c", 8);
  b.reclaim_within_cohort = ReclaimWithinCohort::kAny;
  w.AddQueue(a);
  w.AddQueue(b);
  // Three equal borrowers (same queue, same priority), started in this order.
  Job& old_fresh_checkpoint = w.Submit("a", 1, 4);
  w.Pass();
  w.now_ms += 60'000;
  Job& newest_no_checkpoint = w.Submit("a", 1, 4);
  w.Pass();
  ASSERT_EQ(w.Running().size(), 2u);
  w.now_ms += 600'000;
  // The older job checkpointed a second ago; the newer one never did (10 minutes of work).
  w.jobs[old_fresh_checkpoint.id].last_checkpoint_step = 900;
  w.jobs[old_fresh_checkpoint.id].last_checkpoint_time_ms = w.now_ms - 1000;
  Job& b1 = w.Submit("b", 1, 4);
  PassResult r = w.Pass();
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].job_id, old_fresh_checkpoint.id);
  EXPECT_EQ(r.preemptions[0].by_job_id, b1.id);
  EXPECT_TRUE(w.Running().count(newest_no_checkpoint.id));

  // Without checkpoints, the work lost is the time since the start: the newest goes, as before.
  World v(1);
  v.AddQueue(a);
  v.AddQueue(b);
  Job& older = v.Submit("a", 1, 4);
  v.Pass();
  v.now_ms += 60'000;
  Job& newer = v.Submit("a", 1, 4);
  v.Pass();
  v.now_ms += 1000;
  // A checkpoint from before this attempt started (the one it resumed from) saves nothing now.
  v.jobs[older.id].last_checkpoint_time_ms = v.now_ms - 3'600'000;
  v.Submit("b", 1, 4);
  r = v.Pass();
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].job_id, newer.id);
}

TEST(FairShareTest, NoReclaimWhenTheQueueSaysNever) {
  World w(1);
  w.AddQueue(MakeQueue("a", "c", 4));
  w.AddQueue(MakeQueue("b", "c", 4));  // reclaim_within_cohort: Never
  w.Submit("a", 1, 8);
  w.Pass();
  Job& b1 = w.Submit("b", 1, 4);
  PassResult r = w.Pass();
  EXPECT_THAT(r.preemptions, IsEmpty());
  EXPECT_THAT(r.WaitingReason(b1.id), HasSubstr("lent to borrowers"));
}

TEST(FairShareTest, PreemptionsNeverCycle) {
  // Two queues that both reclaim, and priority preemption inside each; jobs keep arriving and
  // finishing. No pair of jobs may ever preempt each other.
  World w(4);  // 32 GPUs
  for (const char* name : {"a", "b"}) {
    Queue q = MakeQueue(name, "c", 16);
    q.reclaim_within_cohort = ReclaimWithinCohort::kAny;
    q.within_queue = PreemptWithinQueue::kLowerOrNewerEqualPriority;
    w.AddQueue(q);
  }
  std::set<std::pair<std::string, std::string>> edges;
  uint64_t rng = 42;
  auto next = [&rng](int n) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((rng >> 33) % n);
  };
  for (int step = 0; step < 300; ++step) {
    w.now_ms += 60'000;
    w.Submit(next(2) ? "a" : "b", 1, 1 << next(4), next(3));
    if (auto running = w.Running(); !running.empty() && next(3) == 0) {
      auto it = running.begin();
      std::advance(it, next(static_cast<int>(running.size())));
      w.Finish(*it);
    }
    PassResult r = w.Pass();
    for (const auto& p : r.preemptions) {
      EXPECT_FALSE(edges.count({p.job_id, p.by_job_id}))
          << p.by_job_id << " preempted " << p.job_id << " which had preempted it";
      edges.insert({p.by_job_id, p.job_id});
    }
    // Never more GPUs than the cluster has, and every gang whole.
    int64_t used = 0;
    for (const auto& [id, job] : w.jobs) {
      if (job.state != JobState::kRunning) continue;
      EXPECT_EQ(static_cast<int32_t>(job.placement.size()), job.spec.replicas) << id;
      used += job.spec.replicas * job.spec.gpus_per_replica;
    }
    EXPECT_LE(used, 32);
  }
  EXPECT_FALSE(edges.empty()) << "the scenario never preempted: it tests nothing";
}

TEST(FairShareTest, WithinQueuePriorityPreemptsLowerPriorityOnly) {
  World w(1);
  Queue a = MakeQueue("a", "", 8);
  a.within_queue = PreemptWithinQueue::kLowerPriority;
  w.AddQueue(a);
  Job& low = w.Submit("a", 1, 4, 0);
  Job& same = w.Submit("a", 1, 4, 5);
  w.Pass();
  Job& high = w.Submit("a", 1, 4, 5);
  PassResult r = w.Pass();
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].job_id, low.id);
  EXPECT_EQ(r.preemptions[0].reason, "priority");
  EXPECT_TRUE(w.Running().count(same.id));
  w.Pass();
  EXPECT_TRUE(w.Running().count(high.id));
}

TEST(FairShareTest, MinimumRuntimeProtectsFreshJobs) {
  World w(1);
  Queue a = MakeQueue("a", "", 8);
  a.within_queue = PreemptWithinQueue::kLowerPriority;
  a.min_runtime_seconds = 600;
  w.AddQueue(a);
  w.Submit("a", 1, 8, 0);
  w.Pass();
  w.now_ms += 599'000;
  w.Submit("a", 1, 8, 9);
  EXPECT_THAT(w.Pass().preemptions, IsEmpty());
  w.now_ms += 1'000;
  EXPECT_EQ(w.Pass().preemptions.size(), 1u);
}

TEST(FairShareTest, BackfillHonoursReservations) {
  World w(2);  // 16 GPUs
  Queue q;
  q.name = "default";
  w.AddQueue(q);
  Job& r1 = w.Submit("default", 1, 8, 0, /*max_runtime_s=*/3600);
  w.Submit("default", 1, 4, 0, 7200);
  w.Pass();                                                // w0 full until +1h, w1 half until +2h
  Job& gang = w.Submit("default", 2, 8);                   // needs both workers: reserved at +2h
  Job& short_job = w.Submit("default", 1, 4, 0, 3600);     // ends at +1h, before: backfills
  Job& long_job = w.Submit("default", 1, 2, 0, 3 * 3600);  // would overlap: waits
  Job& unlimited = w.Submit("default", 1, 2);              // no runtime limit: waits
  PassResult r = w.Pass();
  ASSERT_EQ(r.reservations.size(), 1u);
  EXPECT_EQ(r.reservations[0].job_id, gang.id);
  EXPECT_EQ(r.reservations[0].start_ms, w.now_ms + 7200 * 1000);
  EXPECT_THAT(r.WaitingReason(gang.id), HasSubstr("reserved: starts by"));
  std::set<std::string> started;
  for (const auto& s : r.starts) started.insert(s.job_id);
  EXPECT_THAT(started, UnorderedElementsAre(short_job.id));
  EXPECT_TRUE(r.starts[0].backfilled);
  EXPECT_THAT(r.WaitingReason(long_job.id), HasSubstr("outside reservations"));
  EXPECT_FALSE(r.WaitingReason(unlimited.id).empty());
  (void)r1;
}

// Reserved GPUs freed by a running job's end are taken again before the next gang's search
// goes on: the second gang is reserved on the workers the first one's reservation leaves.
TEST(FairShareTest, ASecondReservationWaitsForWorkersTheFirstDoesNotHold) {
  World w(4);  // 32 GPUs
  Queue q;
  q.name = "default";
  w.AddQueue(q);
  for (int hours = 1; hours <= 4; ++hours) w.Submit("default", 1, 8, 0, hours * 3600);
  w.Pass();  // w0..w3 full, their jobs ending at +1h, +2h, +3h and +4h
  Job& first = w.Submit("default", 2, 8);
  Job& second = w.Submit("default", 2, 8);
  PassResult r = w.Pass();
  ASSERT_EQ(r.reservations.size(), 2u);
  EXPECT_EQ(r.reservations[0].job_id, first.id);
  EXPECT_EQ(r.reservations[0].start_ms, w.now_ms + 2 * 3600 * 1000);
  EXPECT_EQ(r.reservations[1].job_id, second.id);
  EXPECT_EQ(r.reservations[1].start_ms, w.now_ms + 4 * 3600 * 1000);
  std::set<std::string> first_workers, second_workers;
  for (const auto& rank : r.reservations[0].ranks) first_workers.insert(rank.worker_id);
  for (const auto& rank : r.reservations[1].ranks) second_workers.insert(rank.worker_id);
  EXPECT_THAT(first_workers, UnorderedElementsAre("w0", "w1"));
  EXPECT_THAT(second_workers, UnorderedElementsAre("w2", "w3"));
}

// Minutes until a gang of the whole cluster (4 x 8) starts while 1-GPU jobs of 10 to 54 min
// (limit 1 h) arrive faster than they finish; -1: not within 8 hours.
int64_t MinutesUntilGangStarts(const PolicyOptions& options) {
  World w(4);
  Queue q;
  q.name = "default";
  w.AddQueue(q);
  std::map<std::string, int64_t> ends;
  const std::string gang = w.Submit("default", 4, 8).id;
  const int64_t t0 = w.now_ms;
  for (int minute = 0; minute < 8 * 60; ++minute) {
    w.now_ms = t0 + minute * 60'000LL;
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second <= w.now_ms) {
        w.Finish(it->first);
        it = ends.erase(it);
      } else {
        ++it;
      }
    }
    for (int k = 0; k < 2; ++k) w.Submit("default", 1, 1, 0, 3600);
    if (minute == 0) {
      // Fill the cluster before the gang's first pass sees it free.
      for (int k = 0; k < 32; ++k) w.Submit("default", 1, 1, 5, 3600);
    }
    PassResult r = w.Pass(options);
    for (const auto& s : r.starts) {
      if (s.job_id == gang) return minute;
      // 10 to 54 minutes, staggered so that GPUs free up one at a time.
      ends[s.job_id] = w.now_ms + (10 + (ends.size() * 17) % 45) * 60'000;
    }
  }
  return -1;
}

TEST(FairShareTest, ALargeGangIsNotStarvedByAStreamOfSmallJobs) {
  PolicyOptions no_backfill;
  no_backfill.backfill = false;
  EXPECT_EQ(MinutesUntilGangStarts(no_backfill), -1) << "the stream never starves it: no test";
  const int64_t minutes = MinutesUntilGangStarts(PolicyOptions{});
  EXPECT_GE(minutes, 0) << "the gang never started in 8 hours";
  EXPECT_LE(minutes, 60);  // the reservation: every small job ends within its 1 h limit
}

// Shortest runtime limit first within a queue (no durations needed), but a job that has waited
// past starve_after_ms goes first of all; submit order is the default.
TEST(FairShareTest, ShortestLimitOrderRunsShortJobsFirstUntilALongOneStarves) {
  auto run = [](PolicyOptions options, int64_t waited_ms) {
    World w(1, 1);  // one GPU
    w.AddQueue(MakeQueue("a", "", 1));
    Job& long_job = w.Submit("a", 1, 1, 0, 36000);
    long_job.created_at_ms = w.now_ms - waited_ms;
    Job& unlimited = w.Submit("a", 1, 1, 0, 0);
    unlimited.created_at_ms = w.now_ms;
    Job& short_job = w.Submit("a", 1, 1, 0, 600);
    short_job.created_at_ms = w.now_ms;
    PassResult r = w.Pass(options);
    EXPECT_EQ(r.starts.size(), 1u);
    return r.starts.empty() ? std::string() : r.starts[0].job_id;
  };
  PolicyOptions submit;
  EXPECT_EQ(run(submit, 0), "j1") << "submit order is the default";
  PolicyOptions by_limit;
  by_limit.order = PolicyOptions::Order::kShortestLimit;
  by_limit.starve_after_ms = 3600'000;
  EXPECT_EQ(run(by_limit, 0), "j3") << "the shortest limit first";
  EXPECT_EQ(run(by_limit, 3599'000), "j3");
  EXPECT_EQ(run(by_limit, 3600'000), "j1") << "a job pending past starve_after_ms goes first";
}

// explain = false: the same decisions, no reasons written.
TEST(FairShareTest, WithoutExplainTheDecisionsAreTheSameAndNoReasonIsWritten) {
  World w(1, 2);
  w.AddQueue(MakeQueue("a", "", 2));
  for (int i = 0; i < 5; ++i) w.Submit("a", 1, 1);
  PassInput in;
  in.queues = &w.queues;
  in.now_ms = w.now_ms;
  for (auto& [id, job] : w.jobs) in.pending.push_back(&job);
  PolicyOptions quiet;
  quiet.explain = false;
  PassResult a = SchedulePass(in, w.cluster, {});
  PassResult b = SchedulePass(in, w.cluster, quiet);
  ASSERT_EQ(a.starts.size(), 2u);
  ASSERT_EQ(b.starts.size(), 2u);
  for (size_t i = 0; i < a.starts.size(); ++i) EXPECT_EQ(a.starts[i].job_id, b.starts[i].job_id);
  EXPECT_EQ(a.waiting.size(), 3u);
  EXPECT_TRUE(b.waiting.empty());
}

// A worker that runs teams as their own users takes one team's shares at a time. A share of
// another team that waits does not make the pass skip the same shape of the first team's.
TEST(FairShareTest, AWorkerOfOneTeamAtATimeStartsOnlyThatTeamsSharesInAPass) {
  for (bool explain : {true, false}) {
    SCOPED_TRACE(explain ? "explain" : "quiet");
    World w(1, 2);
    Worker one_team = MakeWorker("w0", 2);
    one_team.shares_one_team = true;
    w.cluster.UpsertWorker(one_team);
    w.AddQueue(MakeQueue("q", "", 2));
    std::vector<std::string> ids;
    for (const char* team : {"a", "b", "a"}) {
      Job& job = w.Submit("q", 1, 1);
      job.team = team;
      job.spec.gpu_share = 250;
      ids.push_back(job.id);
    }
    PolicyOptions options;
    options.explain = explain;
    PassResult r = w.Pass(options);
    EXPECT_EQ(w.Running(), (std::set<std::string>{ids[0], ids[2]}));
    if (explain) {
      EXPECT_EQ(r.waiting.size(), 1u);
      EXPECT_THAT(r.WaitingReason(ids[1]), HasSubstr("hold one team's shares at a time"));
    }
    w.Finish(ids[0]);
    w.Pass(options);
    EXPECT_EQ(w.Running(), std::set<std::string>{ids[2]});  // team a's share still runs
    w.Finish(ids[2]);
    w.Pass(options);
    EXPECT_EQ(w.Running(), std::set<std::string>{ids[1]});
  }
}

// Without reasons the pass skips jobs whose shape already waited this pass: on random backlogs
// with borrowing, reclaim, priorities and reservations, the decisions are exactly the same.
TEST(FairShareTest, SkippingRepeatedWaitsChangesNoDecision) {
  std::mt19937 rng(11);
  size_t preemptions = 0, reservations = 0;
  for (int round = 0; round < 30; ++round) {
    World w(4, 8);
    for (const char* name : {"a", "b", "c"}) {
      Queue q = MakeQueue(name, "c", 8 + static_cast<int64_t>(rng() % 9));
      q.reclaim_within_cohort = ReclaimWithinCohort::kAny;
      q.within_queue = PreemptWithinQueue::kLowerPriority;
      w.AddQueue(q);
    }
    const char* names[] = {"a", "b", "c"};
    for (int i = 0; i < 12; ++i) {
      w.Submit(names[rng() % 3], 1 + static_cast<int32_t>(rng() % 2), 1 + rng() % 4, 0,
               3600 * (1 + rng() % 4));
    }
    w.Pass();  // some run, some borrowing
    w.now_ms += 600'000;
    for (int i = 0; i < 200; ++i) {
      w.Submit(names[rng() % 3], 1 + static_cast<int32_t>(rng() % 4), 1 + rng() % 8,
               static_cast<int32_t>(rng() % 3), 3600 * static_cast<int64_t>(rng() % 3));
    }
    PassInput in;
    in.queues = &w.queues;
    in.now_ms = w.now_ms;
    for (auto& [id, job] : w.jobs) {
      if (job.state == JobState::kPending) in.pending.push_back(&job);
      if (job.state == JobState::kRunning) in.placed.push_back(&job);
    }
    for (PolicyOptions::Order order :
         {PolicyOptions::Order::kSubmit, PolicyOptions::Order::kShortestLimit}) {
      PolicyOptions loud, quiet;
      loud.order = quiet.order = order;
      quiet.explain = false;
      PassResult a = SchedulePass(in, w.cluster, loud);
      PassResult b = SchedulePass(in, w.cluster, quiet);
      ASSERT_EQ(a.starts.size(), b.starts.size()) << "round " << round;
      for (size_t i = 0; i < a.starts.size(); ++i) {
        EXPECT_EQ(a.starts[i].job_id, b.starts[i].job_id) << "round " << round;
      }
      ASSERT_EQ(a.preemptions.size(), b.preemptions.size()) << "round " << round;
      for (size_t i = 0; i < a.preemptions.size(); ++i) {
        EXPECT_EQ(a.preemptions[i].job_id, b.preemptions[i].job_id) << "round " << round;
      }
      ASSERT_EQ(a.reservations.size(), b.reservations.size()) << "round " << round;
      for (size_t i = 0; i < a.reservations.size(); ++i) {
        EXPECT_EQ(a.reservations[i].job_id, b.reservations[i].job_id) << "round " << round;
      }
      EXPECT_EQ(a.claims.size(), b.claims.size()) << "round " << round;
      preemptions += a.preemptions.size();
      reservations += a.reservations.size();
    }
  }
  EXPECT_GT(preemptions, 0u) << "the backlogs never preempted: the test compares little";
  EXPECT_GT(reservations, 0u) << "the backlogs never reserved: the test compares little";
}

}  // namespace
}  // namespace ringmaster::scheduler

namespace ringmaster::scheduler {
namespace {

TEST(DecisionTextTest, PreemptionAndPlacementSayWhy) {
  Job by;
  by.spec.queue = "b";
  by.spec.priority = 5;
  EXPECT_EQ(PreemptionReason({"j-1", "j-2", "reclaim"}, &by),
            "preempted by j-2 (queue b reclaims its nominal quota)");
  EXPECT_EQ(PreemptionReason({"j-1", "j-2", "priority"}, &by),
            "preempted by j-2 (priority 5 in queue b)");
  EXPECT_EQ(PreemptionReason({"j-1", "j-2", "priority"}, nullptr), "preempted by j-2");
  PassResult::Start start{"j-1", {{0, "w2", "", {}}, {1, "w1", "", {}}, {2, "w1", "", {}}}};
  EXPECT_EQ(PlacementReason(start, false), "placed on w1,w2");
  start.borrowing = true;
  start.backfilled = true;
  EXPECT_EQ(PlacementReason(start, true),
            "placed on w1,w2, borrowing from the cohort, backfilled before a reservation; one "
            "rank, started without mpirun: no pre-run check");
}

}  // namespace
}  // namespace ringmaster::scheduler
