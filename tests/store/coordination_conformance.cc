#include "coordination_conformance.h"

#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "job_store_conformance.h"  // PrintTo for JobEvent
#include "support/status_test_util.h"
#include "support/wait_for.h"

namespace ringmaster::scheduler::store_test {
namespace {

using ::ringmaster::test::IsOkAndHolds;
using ::ringmaster::test::StatusIs;
using ::ringmaster::test::WaitFor;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

QueueEntry Entry(const std::string& id, int32_t priority, int64_t seq) {
  return QueueEntry{id, priority, seq};
}

}  // namespace

std::string CoordinationBackendName(
    const ::testing::TestParamInfo<CoordinationBackendParam>& info) {
  return info.param.name;
}

void CoordinationConformanceTest::SetUp() {
  backend_ = GetParam().make();
  ASSERT_NE(backend_, nullptr);
  RM_ASSERT_OK_AND_ASSIGN(queue_, backend_->NewQueue());
  RM_ASSERT_OK_AND_ASSIGN(liveness_, backend_->NewLiveness());
}

// --- PendingQueue ------------------------------------------------------------------------

TEST_P(CoordinationConformanceTest, QueueListsByPriorityThenSeq) {
  RM_ASSERT_OK(queue().Push(Entry("low-old", -5, 1)));
  RM_ASSERT_OK(queue().Push(Entry("high-new", 10, 9)));
  RM_ASSERT_OK(queue().Push(Entry("mid-new", 0, 8)));
  RM_ASSERT_OK(queue().Push(Entry("high-old", 10, 2)));
  RM_ASSERT_OK(queue().Push(Entry("mid-old", 0, 3)));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("high-old", "high-new", "mid-old", "mid-new", "low-old"));
}

TEST_P(CoordinationConformanceTest, QueueOrdersTheExtremesOfItsRanges) {
  constexpr int64_t kMaxSeq = (int64_t{1} << 40) - 1;
  RM_ASSERT_OK(queue().Push(Entry("min-prio", -1000, 0)));
  RM_ASSERT_OK(queue().Push(Entry("p999-first", 999, 0)));
  RM_ASSERT_OK(queue().Push(Entry("max-prio-last-seq", 1000, kMaxSeq)));
  RM_ASSERT_OK(queue().Push(Entry("max-prio-first-seq", 1000, 0)));
  RM_ASSERT_OK(queue().Push(Entry("max-prio-seq-1", 1000, kMaxSeq - 1)));
  RM_ASSERT_OK(queue().Push(Entry("min-prio-before-last", -1000, kMaxSeq - 1)));
  RM_ASSERT_OK(queue().Push(Entry("min-prio-last", -1000, kMaxSeq)));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("max-prio-first-seq", "max-prio-seq-1", "max-prio-last-seq",
                               "p999-first", "min-prio", "min-prio-before-last", "min-prio-last"));
}

TEST_P(CoordinationConformanceTest, PushIsIdempotentAndARePushMovesTheJob) {
  RM_ASSERT_OK(queue().Push(Entry("a", 0, 1)));
  RM_ASSERT_OK(queue().Push(Entry("b", 0, 2)));
  RM_ASSERT_OK(queue().Push(Entry("a", 0, 1)));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("a", "b"));
  RM_ASSERT_OK(queue().Push(Entry("a", -1, 1)));  // priority lowered
  RM_ASSERT_OK_AND_ASSIGN(ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("b", "a"));
}

TEST_P(CoordinationConformanceTest, RemoveTakesOnlyThatJobOut) {
  for (int i = 0; i < 4; ++i) RM_ASSERT_OK(queue().Push(Entry(absl::StrCat("j", i), 0, i)));
  RM_ASSERT_OK(queue().Remove("j2"));
  RM_ASSERT_OK(queue().Remove("never-queued"));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("j0", "j1", "j3"));
}

TEST_P(CoordinationConformanceTest, ApplyPushesAndRemovesInOneCall) {
  for (int i = 0; i < 3; ++i) RM_ASSERT_OK(queue().Push(Entry(absl::StrCat("j", i), 0, i)));
  PendingQueue::Changes changes;
  changes["j1"] = std::nullopt;
  changes["j0"] = Entry("j0", -1, 0);  // moves behind the others
  changes["j9"] = Entry("j9", 5, 9);
  changes["never-queued"] = std::nullopt;
  RM_ASSERT_OK(queue().Apply(changes));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("j9", "j2", "j0"));
  RM_ASSERT_OK(queue().Apply({}));
  RM_ASSERT_OK_AND_ASSIGN(ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("j9", "j2", "j0"));
}

TEST_P(CoordinationConformanceTest, ApplyWithAnEntryOutOfRangeAppliesNothing) {
  RM_ASSERT_OK(queue().Push(Entry("a", 0, 1)));
  PendingQueue::Changes changes;
  changes["a"] = std::nullopt;
  changes["b"] = Entry("b", 0, 2);
  changes["c"] = Entry("c", 1001, 3);
  EXPECT_THAT(queue().Apply(changes), StatusIs(absl::StatusCode::kInvalidArgument));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("a"));
}

// More members than one command carries.
TEST_P(CoordinationConformanceTest, ApplyOfThousandsKeepsPolicyOrder) {
  PendingQueue::Changes changes;
  for (int i = 0; i < 2500; ++i) {
    changes[absl::StrCat("j", i)] = Entry(absl::StrCat("j", i), 0, i);
  }
  RM_ASSERT_OK(queue().Apply(changes));
  PendingQueue::Changes removals;
  for (int i = 0; i < 2500; i += 2) removals[absl::StrCat("j", i)] = std::nullopt;
  RM_ASSERT_OK(queue().Apply(removals));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  ASSERT_THAT(ids, SizeIs(1250));
  EXPECT_EQ(ids.front(), "j1");
  EXPECT_EQ(ids.back(), "j2499");
}

TEST_P(CoordinationConformanceTest, RebuildReplacesTheQueueAndMarksItIntact) {
  RM_ASSERT_OK(queue().Push(Entry("stale", 0, 1)));
  RM_ASSERT_OK(queue().Rebuild({Entry("c", 0, 30), Entry("a", 5, 10), Entry("b", 0, 20)}));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("a", "b", "c"));
  RM_ASSERT_OK_AND_ASSIGN(bool intact, queue().Intact());
  EXPECT_TRUE(intact);
  RM_ASSERT_OK(queue().Rebuild({}));
  RM_ASSERT_OK_AND_ASSIGN(ids, queue().List());
  EXPECT_THAT(ids, IsEmpty());
  RM_ASSERT_OK_AND_ASSIGN(intact, queue().Intact());
  EXPECT_TRUE(intact);
}

TEST_P(CoordinationConformanceTest, RebuildKeepsPolicyOrderForManyJobs) {
  std::vector<QueueEntry> entries;
  std::vector<std::string> expected;
  for (int i = 0; i < 2500; ++i) {
    // Pushed newest first, in three priorities.
    entries.push_back(Entry(absl::StrCat("j", i), i % 3, 2500 - i));
  }
  for (int priority = 2; priority >= 0; --priority) {
    for (int i = 2499; i >= 0; --i) {
      if (i % 3 == priority) expected.push_back(absl::StrCat("j", i));
    }
  }
  RM_ASSERT_OK(queue().Rebuild(entries));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_EQ(ids, expected);
}

TEST_P(CoordinationConformanceTest, QueueIsNotIntactAfterItsStoreLostEverything) {
  RM_ASSERT_OK(queue().Rebuild({Entry("a", 0, 1), Entry("b", 0, 2)}));
  backend().LoseEverything();
  RM_ASSERT_OK_AND_ASSIGN(bool intact, queue().Intact());
  EXPECT_FALSE(intact);
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_THAT(ids, IsEmpty());
  // A push before the rebuild does not make the queue look intact.
  RM_ASSERT_OK(queue().Push(Entry("c", 0, 3)));
  RM_ASSERT_OK_AND_ASSIGN(intact, queue().Intact());
  EXPECT_FALSE(intact);
  RM_ASSERT_OK(queue().Rebuild({Entry("a", 0, 1), Entry("b", 0, 2), Entry("c", 0, 3)}));
  RM_ASSERT_OK_AND_ASSIGN(intact, queue().Intact());
  EXPECT_TRUE(intact);
  RM_ASSERT_OK_AND_ASSIGN(ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("a", "b", "c"));
}

TEST_P(CoordinationConformanceTest, QueuesShareTheirBackingState) {
  RM_ASSERT_OK_AND_ASSIGN(auto other, backend().NewQueue());
  RM_ASSERT_OK(queue().Rebuild({Entry("a", 0, 1)}));
  RM_ASSERT_OK(other->Push(Entry("b", 1, 2)));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("b", "a"));
  RM_ASSERT_OK_AND_ASSIGN(bool intact, other->Intact());
  EXPECT_TRUE(intact);
}

TEST_P(CoordinationConformanceTest, EntriesOutsideTheRangesAreInvalidArgument) {
  RM_ASSERT_OK(queue().Rebuild({Entry("ok", 0, 1)}));
  for (const QueueEntry& bad :
       {Entry("p-high", 1001, 1), Entry("p-low", -1001, 1), Entry("seq-neg", 0, -1),
        Entry("seq-big", 0, int64_t{1} << 40), Entry("", 0, 1)}) {
    EXPECT_THAT(queue().Push(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad.job_id;
    EXPECT_THAT(queue().Rebuild({Entry("fine", 0, 2), bad}),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << bad.job_id;
  }
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue().List());
  EXPECT_THAT(ids, ElementsAre("ok"));
}

// --- Liveness ----------------------------------------------------------------------------

TEST_P(CoordinationConformanceTest, ABeatKeepsAWorkerAliveUntilItsTtlPasses) {
  RM_ASSERT_OK(liveness().Beat("w1", 1000));
  RM_ASSERT_OK_AND_ASSIGN(auto alive, liveness().Alive({"w1", "w2"}));
  EXPECT_THAT(alive, UnorderedElementsAre("w1"));
  backend().AdvanceTime(1500);
  RM_ASSERT_OK_AND_ASSIGN(alive, liveness().Alive({"w1", "w2"}));
  EXPECT_THAT(alive, IsEmpty());
}

TEST_P(CoordinationConformanceTest, ANewBeatExtendsTheTtl) {
  RM_ASSERT_OK(liveness().Beat("w1", 1000));
  RM_ASSERT_OK(liveness().Beat("w2", 1000));
  backend().AdvanceTime(600);
  RM_ASSERT_OK(liveness().Beat("w1", 1000));
  backend().AdvanceTime(600);
  RM_ASSERT_OK_AND_ASSIGN(auto alive, liveness().Alive({"w1", "w2", "w3"}));
  EXPECT_THAT(alive, UnorderedElementsAre("w1"));
}

TEST_P(CoordinationConformanceTest, AliveOfNoWorkersIsEmpty) {
  RM_ASSERT_OK_AND_ASSIGN(auto alive, liveness().Alive({}));
  EXPECT_THAT(alive, IsEmpty());
}

TEST_P(CoordinationConformanceTest, LivenessIsSharedAndSeesManyWorkersAtOnce) {
  RM_ASSERT_OK_AND_ASSIGN(auto other, backend().NewLiveness());
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    ids.push_back(absl::StrCat("w", i));
    if (i % 2 == 0) RM_ASSERT_OK(liveness().Beat(ids.back(), 60'000));
  }
  RM_ASSERT_OK_AND_ASSIGN(auto alive, other->Alive(ids));
  EXPECT_EQ(alive.size(), 25u);
  EXPECT_EQ(alive.count("w48"), 1u);
  EXPECT_EQ(alive.count("w49"), 0u);
}

TEST_P(CoordinationConformanceTest, BadHeartbeatsAreInvalidArgument) {
  EXPECT_THAT(liveness().Beat("w1", 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(liveness().Beat("w1", -5), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(liveness().Beat("", 1000), StatusIs(absl::StatusCode::kInvalidArgument));
}

// --- LeaderLease -------------------------------------------------------------------------

TEST_P(CoordinationConformanceTest, TheLeaseHasOneHolderAtATime) {
  RM_ASSERT_OK_AND_ASSIGN(auto a, backend().NewLease());
  RM_ASSERT_OK_AND_ASSIGN(auto b, backend().NewLease());
  EXPECT_THAT(a->Hold("s1", 60'000), IsOkAndHolds(true));
  EXPECT_THAT(b->Hold("s2", 60'000), IsOkAndHolds(false));
  EXPECT_THAT(a->Hold("s1", 60'000), IsOkAndHolds(true));  // a renewal
  EXPECT_THAT(b->Hold("s1", 60'000), IsOkAndHolds(true));  // the holder, not the handle, counts
}

TEST_P(CoordinationConformanceTest, RenewalsKeepTheLeaseAndExpiryPassesItOn) {
  RM_ASSERT_OK_AND_ASSIGN(auto a, backend().NewLease());
  RM_ASSERT_OK_AND_ASSIGN(auto b, backend().NewLease());
  ASSERT_THAT(a->Hold("s1", 1000), IsOkAndHolds(true));
  backend().AdvanceTime(600);
  ASSERT_THAT(a->Hold("s1", 1000), IsOkAndHolds(true));
  backend().AdvanceTime(600);
  EXPECT_THAT(b->Hold("s2", 1000), IsOkAndHolds(false));
  backend().AdvanceTime(600);
  EXPECT_THAT(b->Hold("s2", 1000), IsOkAndHolds(true));
  EXPECT_THAT(a->Hold("s1", 1000), IsOkAndHolds(false));
}

TEST_P(CoordinationConformanceTest, ReleaseHandsTheLeaseOverAndOnlyTheHolderCanRelease) {
  RM_ASSERT_OK_AND_ASSIGN(auto a, backend().NewLease());
  RM_ASSERT_OK_AND_ASSIGN(auto b, backend().NewLease());
  ASSERT_THAT(a->Hold("s1", 60'000), IsOkAndHolds(true));
  RM_ASSERT_OK(b->Release("s2"));
  EXPECT_THAT(b->Hold("s2", 60'000), IsOkAndHolds(false));
  RM_ASSERT_OK(a->Release("s1"));
  EXPECT_THAT(b->Hold("s2", 60'000), IsOkAndHolds(true));
}

TEST_P(CoordinationConformanceTest, BadLeaseArgumentsAreInvalidArgument) {
  RM_ASSERT_OK_AND_ASSIGN(auto a, backend().NewLease());
  EXPECT_THAT(a->Hold("", 1000), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(a->Hold("s1", 0), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace ringmaster::scheduler::store_test
