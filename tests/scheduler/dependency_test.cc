#include "scheduler/core/dependency.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using Kind = DependencyVerdict::Kind;

// States as the scheduler would know them; absent: not known.
DependencyVerdict Judge(const std::vector<Dependency>& after,
                        const std::map<std::string, JobState>& known) {
  return JudgeDependencies(after, [&](const std::string& id) -> std::optional<JobState> {
    auto it = known.find(id);
    return it == known.end() ? std::nullopt : std::optional(it->second);
  });
}

TEST(DependencyTest, EachConditionIsMetByItsEndsAndNeverByTheOthers) {
  const std::vector<JobState> ends = {JobState::kSucceeded, JobState::kFailed,
                                      JobState::kCancelled};
  for (JobState end : ends) {
    EXPECT_EQ(Satisfies(AfterCondition::kSucceeded, end), end == JobState::kSucceeded);
    EXPECT_TRUE(Satisfies(AfterCondition::kEnded, end));
    EXPECT_EQ(Satisfies(AfterCondition::kFailed, end), end != JobState::kSucceeded);
  }
  for (JobState live : {JobState::kPending, JobState::kStarting, JobState::kRunning}) {
    for (AfterCondition c :
         {AfterCondition::kSucceeded, AfterCondition::kEnded, AfterCondition::kFailed}) {
      EXPECT_FALSE(Satisfies(c, live));
    }
  }
}

TEST(DependencyTest, AJobWaitsWhileWhatItNamesRunsAndSaysForWhat) {
  const std::vector<Dependency> after = {{"j-1", AfterCondition::kSucceeded},
                                         {"j-2", AfterCondition::kEnded},
                                         {"j-3", AfterCondition::kFailed}};
  DependencyVerdict v = Judge(after, {{"j-1", JobState::kRunning}, {"j-2", JobState::kPending}});
  EXPECT_EQ(v.kind, Kind::kWaiting);
  EXPECT_EQ(v.reason, "waiting for j-1 to succeed (3 of 3 left)");
  v = Judge(after, {{"j-1", JobState::kSucceeded}, {"j-2", JobState::kRunning}});
  EXPECT_EQ(v.reason, "waiting for j-2 to end (2 of 3 left)");
  v = Judge(after, {{"j-1", JobState::kSucceeded}, {"j-2", JobState::kFailed}});
  EXPECT_EQ(v.kind, Kind::kWaiting);
  EXPECT_EQ(v.reason, "waiting for j-3 to fail") << "the last one left";
  v = Judge(
      after,
      {{"j-1", JobState::kSucceeded}, {"j-2", JobState::kFailed}, {"j-3", JobState::kCancelled}});
  EXPECT_EQ(v.kind, Kind::kReady);
  EXPECT_EQ(Judge({}, {}).kind, Kind::kReady);
}

TEST(DependencyTest, AnEndThatCanNoLongerSatisfyCancelsWhateverElseIsWaitedFor) {
  const std::vector<Dependency> after = {{"j-1", AfterCondition::kEnded},
                                         {"j-2", AfterCondition::kSucceeded}};
  DependencyVerdict v = Judge(after, {{"j-1", JobState::kRunning}, {"j-2", JobState::kFailed}});
  EXPECT_EQ(v.kind, Kind::kNever);
  EXPECT_EQ(v.reason,
            "dependency never satisfied: j-2 ended FAILED, and this job waits for it to succeed");
  v = Judge({{"j-4", AfterCondition::kFailed}}, {{"j-4", JobState::kSucceeded}});
  EXPECT_EQ(v.kind, Kind::kNever);
  EXPECT_THAT(v.reason, HasSubstr("j-4 ended SUCCEEDED, and this job waits for it to fail"));
}

TEST(DependencyTest, ValidationNamesTheFieldAndRefusesDuplicatesAndBadIds) {
  EXPECT_TRUE(ValidateDependencies({{"j-0123456789ab", AfterCondition::kEnded}}).ok());
  absl::Status s = ValidateDependencies({{"nope", AfterCondition::kEnded}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("after[0].job_id"));
  s = ValidateDependencies(
      {{"j-0123456789ab", AfterCondition::kEnded}, {"j-0123456789ab", AfterCondition::kFailed}});
  EXPECT_THAT(s.message(), HasSubstr("after[1].job_id: j-0123456789ab is named twice"));
  std::vector<Dependency> many(kMaxDependencies + 1, {"j-0123456789ab", AfterCondition::kEnded});
  EXPECT_THAT(ValidateDependencies(many).message(), HasSubstr("after: at most 64"));
}

TEST(DependencyBookTest, KeepsTheEndsOfNamedJobsAndForgetsThemWithTheirLastDependent) {
  DependencyBook book;
  const std::vector<Dependency> after = {{"j-1", AfterCondition::kSucceeded}};
  book.Add("j-9", after);
  book.Add("j-8", after);
  EXPECT_THAT(book.Ended("j-1", JobState::kSucceeded), UnorderedElementsAre("j-9", "j-8"));
  EXPECT_THAT(book.Ended("j-5", JobState::kFailed), IsEmpty()) << "nobody waits for it";
  // Named ends outlive the recent ones.
  for (int i = 0; i < static_cast<int>(DependencyBook::kRecentEnds) + 10; ++i) {
    book.Ended("j-x" + std::to_string(i), JobState::kSucceeded);
  }
  EXPECT_EQ(book.EndOf("j-1"), JobState::kSucceeded);
  EXPECT_EQ(book.EndOf("j-5"), std::nullopt) << "pushed out of the recent ends";
  book.Remove("j-9", after);
  EXPECT_EQ(book.EndOf("j-1"), JobState::kSucceeded);
  book.Remove("j-8", after);
  EXPECT_EQ(book.EndOf("j-1"), std::nullopt);
  EXPECT_EQ(book.named(), 0u);
}

TEST(DependencyBookTest, AJobNamedAfterItEndedFindsItsEndAmongTheRecentOnes) {
  DependencyBook book;
  book.Remember("j-1", JobState::kCancelled);  // read from Postgres for a submit
  book.Add("j-2", {{"j-1", AfterCondition::kFailed}});
  for (int i = 0; i < static_cast<int>(DependencyBook::kRecentEnds) + 10; ++i) {
    book.Ended("j-x" + std::to_string(i), JobState::kSucceeded);
  }
  EXPECT_EQ(book.EndOf("j-1"), JobState::kCancelled);
}

}  // namespace
}  // namespace ringmaster::scheduler
