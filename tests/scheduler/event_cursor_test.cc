#include "scheduler/core/event_cursor.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::ElementsAre;

JobEvent Event(int64_t seq, JobState state = JobState::kPending) {
  JobEvent e;
  e.job_id = "j-000000000001";
  e.seq = seq;
  e.state = state;
  return e;
}

// A `take` that keeps the seq of every event it is given, and always wants more.
auto Recorder(std::vector<int64_t>* taken) {
  return [taken](const JobEvent& e) {
    taken->push_back(e.seq);
    return true;
  };
}

TEST(EventCursorTest, TakesEachEventOnceInOrderUpToTheJobsEnd) {
  EventCursor cursor;
  std::vector<int64_t> taken;
  auto take = Recorder(&taken);
  EXPECT_FALSE(cursor.Advance({Event(1), Event(2)}, /*stored=*/true, take));
  // Handed over again, and the next one: only the new one is taken.
  EXPECT_FALSE(cursor.Advance({Event(2), Event(3, JobState::kRunning)}, false, take));
  EXPECT_FALSE(cursor.Advance({Event(4, JobState::kSucceeded), Event(5)}, false, take));
  EXPECT_THAT(taken, ElementsAre(1, 2, 3, 4));
  EXPECT_TRUE(cursor.done());
  EXPECT_EQ(cursor.last(), 4);
}

TEST(EventCursorTest, AHandedOverEventPastTheNextOneIsAGapButAStoredOneIsNot) {
  EventCursor cursor;
  std::vector<int64_t> taken;
  auto take = Recorder(&taken);
  EXPECT_FALSE(cursor.Advance({Event(1)}, true, take));
  EXPECT_TRUE(cursor.Advance({Event(3), Event(4)}, false, take));
  EXPECT_EQ(cursor.last(), 1);
  EXPECT_FALSE(cursor.Advance({Event(3), Event(4)}, true, take));
  EXPECT_THAT(taken, ElementsAre(1, 3, 4));
  EXPECT_FALSE(cursor.done());
}

TEST(EventCursorTest, AWatcherThatIsGoneTakesNothingMore) {
  EventCursor cursor;
  int calls = 0;
  EXPECT_FALSE(cursor.Advance({Event(1), Event(2)}, true, [&](const JobEvent&) {
    ++calls;
    return false;
  }));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(cursor.done());
  EXPECT_EQ(cursor.last(), 0);
}

}  // namespace
}  // namespace ringmaster::scheduler
