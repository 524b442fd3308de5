// Unit tests of the store module: the conformance suites on the in-memory implementations, the
// in-memory specifics, and the pure helpers of the Postgres and Redis adapters.
#include <atomic>
#include <chrono>
#include <thread>

#include "coordination_conformance.h"
#include "fault_injecting_job_store.h"
#include "gmock/gmock.h"
#include "job_store_conformance.h"
#include "scheduler/core/clock.h"
#include "scheduler/store/in_memory_coordination.h"
#include "scheduler/store/in_memory_job_store.h"
#include "scheduler/store/postgres_pool.h"
#include "scheduler/store/redis_coordination.h"
#include "support/status_test_util.h"
#include "support/wait_for.h"

namespace ringmaster::scheduler::store_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using test::StatusIs;
using test::WaitFor;

// One InMemoryJobStore; "new" stores are more handles on it. Each handle is a
// FaultInjectingJobStore without faults, so the suite also holds the wrapper to the contract.
class InMemoryJobStoreBackend : public JobStoreBackend {
 public:
  absl::StatusOr<std::unique_ptr<JobStore>> NewStore() override {
    return std::unique_ptr<JobStore>(new FaultInjectingJobStore(store_.get()));
  }

 private:
  std::unique_ptr<InMemoryJobStore> store_ = std::make_unique<InMemoryJobStore>();
};

INSTANTIATE_TEST_SUITE_P(InMemory, JobStoreConformanceTest,
                         ::testing::Values(JobStoreBackendParam{
                             "InMemory",
                             [] { return std::make_unique<InMemoryJobStoreBackend>(); }}),
                         JobStoreBackendName);

TEST(FaultInjectingJobStoreTest, AFailedCommitReachesNothingAndHealingLetsItThrough) {
  InMemoryJobStore memory;
  FaultInjectingJobStore store(&memory);
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store.TakeLeadership());
  WriteBatch batch;
  Job job = MakeJob("j-1");
  batch.jobs.push_back({JobWrite::Kind::kCreate, job, FirstEvent(job), false, std::nullopt,
                          std::nullopt});
  store.Fail(FaultInjectingJobStore::Call::kCommit, absl::UnavailableError("postgres gone"), 2);
  EXPECT_THAT(store.Commit(batch, epoch), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(store.Commit(batch, epoch), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(memory.GetJob("j-1"), StatusIs(absl::StatusCode::kNotFound));
  RM_ASSERT_OK(store.Commit(batch, epoch));  // the two failures are used up
  RM_ASSERT_OK(memory.GetJob("j-1"));
  EXPECT_EQ(store.calls(FaultInjectingJobStore::Call::kCommit), 3);
}

TEST(FaultInjectingJobStoreTest, AHungCallWaitsForHeal) {
  InMemoryJobStore memory;
  FaultInjectingJobStore store(&memory);
  store.Hang(FaultInjectingJobStore::Call::kListWorkers);
  std::atomic<bool> returned{false};
  std::thread caller([&] {
    (void)store.ListWorkers();
    returned = true;
  });
  ASSERT_TRUE(WaitFor([&] { return store.hung() == 1; }, std::chrono::seconds(5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned);
  store.Heal();
  caller.join();
  EXPECT_TRUE(returned);
}

// One in-memory queue, liveness and clock; "new" objects are handles on them.
class InMemoryCoordinationBackend : public CoordinationBackend {
 public:
  absl::StatusOr<std::unique_ptr<PendingQueue>> NewQueue() override {
    return std::unique_ptr<PendingQueue>(new QueueHandle(queue_));
  }
  absl::StatusOr<std::unique_ptr<Liveness>> NewLiveness() override {
    return std::unique_ptr<Liveness>(new LivenessHandle(liveness_));
  }
  absl::StatusOr<std::unique_ptr<LeaderLease>> NewLease() override {
    return std::unique_ptr<LeaderLease>(new LeaseHandle(lease_));
  }
  void LoseEverything() override { queue_->Lose(); }
  void AdvanceTime(int64_t ms) override { clock_.Advance(ms); }

 private:
  class QueueHandle : public PendingQueue {
   public:
    explicit QueueHandle(std::shared_ptr<InMemoryPendingQueue> q) : q_(std::move(q)) {}
    absl::Status Push(const QueueEntry& e) override { return q_->Push(e); }
    absl::Status Remove(const std::string& id) override { return q_->Remove(id); }
    absl::StatusOr<std::vector<std::string>> List() override { return q_->List(); }
    absl::Status Rebuild(const std::vector<QueueEntry>& e) override { return q_->Rebuild(e); }
    absl::StatusOr<bool> Intact() override { return q_->Intact(); }

   private:
    std::shared_ptr<InMemoryPendingQueue> q_;
  };
  class LivenessHandle : public Liveness {
   public:
    explicit LivenessHandle(std::shared_ptr<InMemoryLiveness> l) : l_(std::move(l)) {}
    absl::Status Beat(const std::string& id, int64_t ttl_ms) override {
      return l_->Beat(id, ttl_ms);
    }
    absl::StatusOr<std::set<std::string>> Alive(const std::vector<std::string>& ids) override {
      return l_->Alive(ids);
    }

   private:
    std::shared_ptr<InMemoryLiveness> l_;
  };

  class LeaseHandle : public LeaderLease {
   public:
    explicit LeaseHandle(std::shared_ptr<InMemoryLeaderLease> l) : l_(std::move(l)) {}
    absl::StatusOr<bool> Hold(const std::string& holder, int64_t ttl_ms) override {
      return l_->Hold(holder, ttl_ms);
    }
    absl::Status Release(const std::string& holder) override { return l_->Release(holder); }

   private:
    std::shared_ptr<InMemoryLeaderLease> l_;
  };

  FakeClock clock_;
  std::shared_ptr<InMemoryLeaderLease> lease_ = std::make_shared<InMemoryLeaderLease>(&clock_);
  std::shared_ptr<InMemoryPendingQueue> queue_ = std::make_shared<InMemoryPendingQueue>();
  std::shared_ptr<InMemoryLiveness> liveness_ = std::make_shared<InMemoryLiveness>(&clock_);
};

INSTANTIATE_TEST_SUITE_P(InMemory, CoordinationConformanceTest,
                         ::testing::Values(CoordinationBackendParam{
                             "InMemory",
                             [] { return std::make_unique<InMemoryCoordinationBackend>(); }}),
                         CoordinationBackendName);

// --- In-memory specifics -----------------------------------------------------------------

TEST(InMemoryPendingQueueTest, IsIntactFromTheStartUntilLost) {
  InMemoryPendingQueue queue;
  RM_ASSERT_OK_AND_ASSIGN(bool intact, queue.Intact());
  EXPECT_TRUE(intact);
  RM_ASSERT_OK(queue.Push({"a", 0, 1}));
  queue.Lose();
  RM_ASSERT_OK_AND_ASSIGN(intact, queue.Intact());
  EXPECT_FALSE(intact);
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue.List());
  EXPECT_THAT(ids, IsEmpty());
}

TEST(InMemoryLivenessTest, ExpiresExactlyWhenTheTtlHasPassed) {
  FakeClock clock;
  InMemoryLiveness liveness(&clock);
  RM_ASSERT_OK(liveness.Beat("w1", 100));
  clock.Advance(99);
  RM_ASSERT_OK_AND_ASSIGN(auto alive, liveness.Alive({"w1"}));
  EXPECT_THAT(alive, ElementsAre("w1"));
  clock.Advance(1);
  RM_ASSERT_OK_AND_ASSIGN(alive, liveness.Alive({"w1"}));
  EXPECT_THAT(alive, IsEmpty());
}

// --- Pure helpers of the adapters --------------------------------------------------------

TEST(RedisPendingQueueScoreTest, EncodesPriorityAboveSeqExactly) {
  constexpr int64_t kMaxSeq = (int64_t{1} << 40) - 1;
  EXPECT_EQ(RedisPendingQueue::Score({"a", 1000, 0}), 0.0);
  EXPECT_EQ(RedisPendingQueue::Score({"a", 1000, kMaxSeq}), static_cast<double>(kMaxSeq));
  EXPECT_EQ(RedisPendingQueue::Score({"a", 999, 0}), static_cast<double>(kMaxSeq + 1));
  // The largest score still tells seq apart: doubles hold integers below 2^53 exactly.
  double last = RedisPendingQueue::Score({"a", -1000, kMaxSeq});
  double before = RedisPendingQueue::Score({"a", -1000, kMaxSeq - 1});
  EXPECT_LT(last, 9007199254740992.0);
  EXPECT_EQ(last - before, 1.0);
  EXPECT_LT(RedisPendingQueue::Score({"a", 5, kMaxSeq}), RedisPendingQueue::Score({"a", 4, 0}));
}

TEST(DescribePostgresUrlTest, NamesHostPortAndDatabaseButNeverThePassword) {
  EXPECT_EQ(DescribePostgresUrl("postgresql://postgres@127.0.0.1:5544/postgres"),
            "127.0.0.1:5544/postgres");
  EXPECT_EQ(DescribePostgresUrl("postgres://user:secret@db.example:6000/rm?sslmode=disable"),
            "db.example:6000/rm");
  EXPECT_EQ(DescribePostgresUrl("postgresql://db/rm"), "db:5432/rm");
  EXPECT_EQ(DescribePostgresUrl("postgresql:///rm?host=/run/pg&port=7"), "/run/pg:7/rm");
  EXPECT_EQ(DescribePostgresUrl("host=h port=1 dbname=d password=secret"), "h:1/d");
  EXPECT_EQ(DescribePostgresUrl("postgresql://u:secret@[::1]:5/d"), "[::1]:5/d");
}

}  // namespace
}  // namespace ringmaster::scheduler::store_test
