// The queue part of the JobStore conformance suite (job_store_conformance.h): it runs on every
// implementation the suite is instantiated with.
#include <optional>

#include "gmock/gmock.h"
#include "job_store_conformance.h"
#include "support/status_test_util.h"

namespace ringmaster::scheduler {
namespace store_test {
namespace {

using ::ringmaster::test::StatusIs;
using ::testing::ElementsAre;

constexpr int64_t kT0 = 1'700'000'000'000;

Queue MakeQueue(const std::string& name) {
  Queue queue;
  queue.name = name;
  queue.cohort = "research";
  queue.weight = 3;
  queue.quotas["t4"] = ResourceQuota{16, 8, 4};
  queue.quotas["cpu"] = ResourceQuota{64, std::nullopt, std::nullopt};
  queue.quotas["v100"] = ResourceQuota{0, std::nullopt, 0};
  queue.within_queue = PreemptWithinQueue::kLowerOrNewerEqualPriority;
  queue.reclaim_within_cohort = ReclaimWithinCohort::kAny;
  queue.min_runtime_seconds = 900;
  queue.progress_timeout_seconds = 120;
  queue.idle_timeout_seconds = 1800;
  queue.elastic_idle_delay_seconds = 300;
  queue.created_at_ms = kT0;
  queue.updated_at_ms = kT0;
  return queue;
}

std::vector<std::string> Names(const std::vector<Queue>& queues) {
  std::vector<std::string> names;
  for (const Queue& q : queues) names.push_back(q.name);
  return names;
}

TEST_P(JobStoreConformanceTest, TheDefaultQueueExistsFromTheStartWithoutQuotaLimits) {
  RM_ASSERT_OK_AND_ASSIGN(Queue queue, store().GetQueue("default"));
  EXPECT_EQ(queue.name, "default");
  EXPECT_TRUE(queue.unlimited());
  EXPECT_EQ(queue.cohort, "");
  EXPECT_EQ(queue.weight, 1);
  EXPECT_EQ(queue.within_queue, PreemptWithinQueue::kNever);
  EXPECT_EQ(queue.reclaim_within_cohort, ReclaimWithinCohort::kNever);
  RM_ASSERT_OK_AND_ASSIGN(auto queues, store().ListQueues());
  EXPECT_THAT(Names(queues), ElementsAre("default"));
}

TEST_P(JobStoreConformanceTest, CreateQueueStoresEveryFieldAndListIsByName) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK_AND_ASSIGN(Queue created, store().CreateQueue(MakeQueue("vision"), epoch));
  EXPECT_EQ(created, MakeQueue("vision"));
  Queue bare;
  bare.name = "audio";
  bare.created_at_ms = bare.updated_at_ms = kT0;
  RM_ASSERT_OK(store().CreateQueue(bare, epoch));
  RM_ASSERT_OK_AND_ASSIGN(Queue got, store().GetQueue("vision"));
  EXPECT_EQ(got, MakeQueue("vision"));
  RM_ASSERT_OK_AND_ASSIGN(Queue got_bare, store().GetQueue("audio"));
  EXPECT_EQ(got_bare, bare);
  RM_ASSERT_OK_AND_ASSIGN(auto queues, store().ListQueues());
  EXPECT_THAT(Names(queues), ElementsAre("audio", "default", "vision"));
  EXPECT_EQ(queues[2], MakeQueue("vision"));
}

TEST_P(JobStoreConformanceTest, CreatingATakenQueueNameIsAlreadyExistsAndChangesNothing) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().CreateQueue(MakeQueue("vision"), epoch));
  Queue again = MakeQueue("vision");
  again.weight = 7;
  EXPECT_THAT(store().CreateQueue(again, epoch), StatusIs(absl::StatusCode::kAlreadyExists));
  Queue default_again;
  default_again.name = "default";
  EXPECT_THAT(store().CreateQueue(default_again, epoch),
              StatusIs(absl::StatusCode::kAlreadyExists));
  RM_ASSERT_OK_AND_ASSIGN(Queue got, store().GetQueue("vision"));
  EXPECT_EQ(got.weight, 3);
}

TEST_P(JobStoreConformanceTest, UpdateQueueReplacesEverythingButTheCreationTime) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().CreateQueue(MakeQueue("vision"), epoch));
  Queue next;
  next.name = "vision";
  next.cohort = "other";
  next.weight = 9;
  next.quotas["a100"] = ResourceQuota{2, std::nullopt, std::nullopt};
  next.reclaim_within_cohort = ReclaimWithinCohort::kLowerPriority;
  next.progress_timeout_seconds = 0;  // off, which is not unset
  next.created_at_ms = 1;             // ignored
  next.updated_at_ms = kT0 + 5;
  RM_ASSERT_OK_AND_ASSIGN(Queue updated, store().UpdateQueue(next, epoch));
  Queue expected = next;
  expected.created_at_ms = kT0;
  EXPECT_EQ(updated, expected);
  RM_ASSERT_OK_AND_ASSIGN(Queue got, store().GetQueue("vision"));
  EXPECT_EQ(got, expected);
  EXPECT_FALSE(got.elastic_idle_delay_seconds) << "unset again: back to the scheduler's default";

  Queue cleared = expected;
  cleared.quotas.clear();
  RM_ASSERT_OK(store().UpdateQueue(cleared, epoch));
  RM_ASSERT_OK_AND_ASSIGN(Queue got_cleared, store().GetQueue("vision"));
  EXPECT_TRUE(got_cleared.unlimited());
}

TEST_P(JobStoreConformanceTest, UnknownQueuesAreNotFound) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  EXPECT_THAT(store().GetQueue("ghost"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store().UpdateQueue(MakeQueue("ghost"), epoch),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store().DeleteQueue("ghost", epoch), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store().GetQueue("ghost"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(JobStoreConformanceTest, DeleteQueueRemovesItAndItsQuotas) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().CreateQueue(MakeQueue("vision"), epoch));
  RM_ASSERT_OK(store().DeleteQueue("vision", epoch));
  EXPECT_THAT(store().GetQueue("vision"), StatusIs(absl::StatusCode::kNotFound));
  // A queue of the same name starts afresh.
  Queue bare;
  bare.name = "vision";
  RM_ASSERT_OK(store().CreateQueue(bare, epoch));
  RM_ASSERT_OK_AND_ASSIGN(Queue got, store().GetQueue("vision"));
  EXPECT_TRUE(got.unlimited());
}

TEST_P(JobStoreConformanceTest, TheDefaultQueueCannotBeDeleted) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  EXPECT_THAT(store().DeleteQueue("default", epoch),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  RM_EXPECT_OK(store().GetQueue("default").status());
}

TEST_P(JobStoreConformanceTest, AQueueWithALiveJobCannotBeDeletedUntilTheJobEnds) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().CreateQueue(MakeQueue("vision"), epoch));
  Job job = MakeJob("j-1", "vision");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
  EXPECT_THAT(store().DeleteQueue("vision", epoch),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  RM_EXPECT_OK(store().GetQueue("vision").status());

  Job done = created.job;
  done.state = JobState::kSucceeded;
  done.last_event_seq = 2;
  JobEvent end = FirstEvent(job);
  end.seq = 2;
  end.state = JobState::kSucceeded;
  RM_ASSERT_OK(store().UpdateJob(done, end));
  RM_ASSERT_OK(store().DeleteQueue("vision", epoch));
  // The ended job keeps its queue's name.
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_EQ(got.spec.queue, "vision");
}

TEST_P(JobStoreConformanceTest, DeletingAQueueDeletesItsUsage) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().CreateQueue(MakeQueue("vision"), epoch));
  RM_ASSERT_OK(store().CreateQueue(MakeQueue("audio"), epoch));
  Job job = MakeJob("j-1", "vision");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  Job other = MakeJob("j-2", "audio");
  RM_ASSERT_OK(store().CreateJob(other, FirstEvent(other)));
  WriteBatch batch;
  for (const Job* j : {&job, &other}) {
    Job done = *j;
    done.state = JobState::kSucceeded;
    done.last_event_seq = 2;
    JobEvent end = FirstEvent(*j);
    end.seq = 2;
    end.state = JobState::kSucceeded;
    batch.jobs.push_back({JobWrite::Kind::kUpdate, done, end, false, std::nullopt, std::nullopt});
    batch.jobs.back().usage = QueueUsage{j->spec.queue, "t4", 1'000};
  }
  RM_ASSERT_OK(store().Commit(batch, epoch));
  RM_ASSERT_OK(store().DeleteQueue("vision", epoch));
  RM_ASSERT_OK_AND_ASSIGN(auto usage, store().ListQueueUsage());
  EXPECT_THAT(usage, ElementsAre(QueueUsage{"audio", "t4", 1'000}));
}

TEST_P(JobStoreConformanceTest, QueueWritesUnderAnOlderEpochAreFencedAndWriteNothing) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t old_epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().CreateQueue(MakeQueue("vision"), old_epoch));
  RM_ASSERT_OK_AND_ASSIGN(auto successor, backend().NewStore());
  RM_ASSERT_OK_AND_ASSIGN(int64_t new_epoch, successor->TakeLeadership());

  auto created = store().CreateQueue(MakeQueue("audio"), old_epoch);
  EXPECT_TRUE(IsFenced(created.status())) << created.status();
  Queue changed = MakeQueue("vision");
  changed.weight = 50;
  auto updated = store().UpdateQueue(changed, old_epoch);
  EXPECT_TRUE(IsFenced(updated.status())) << updated.status();
  EXPECT_TRUE(IsFenced(store().DeleteQueue("vision", old_epoch)));

  RM_ASSERT_OK_AND_ASSIGN(auto queues, successor->ListQueues());
  EXPECT_THAT(Names(queues), ElementsAre("default", "vision"));
  EXPECT_EQ(queues[1].weight, 3);
  RM_EXPECT_OK(successor->DeleteQueue("vision", new_epoch));
}

}  // namespace
}  // namespace store_test
}  // namespace ringmaster::scheduler
