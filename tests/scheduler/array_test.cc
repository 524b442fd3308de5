// Job arrays' core decisions (core/array.h): task ids, what a task runs, how many are created,
// how an array ends and what readers see.
#include "scheduler/core/array.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/core/validation.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::HasSubstr;

JobSpec ArraySpecOf(int32_t count, int32_t parallelism) {
  JobSpec spec;
  spec.name = "sweep";
  spec.queue = "default";
  spec.replicas = 1;
  spec.command =
      CommandWorkload{{"train", "--seed={index}", "--out=/d/{index}/{index}"}, {{"A", "1"}}};
  spec.array = ArraySpec{count, parallelism};
  spec.after = {{"j-0123456789ab", AfterCondition::kSucceeded}};
  return spec;
}

TEST(ArrayTest, TaskIdsNameTheirArrayAndIndexAndNothingElseParsesAsOne) {
  EXPECT_EQ(TaskId("j-0123456789ab", 17), "j-0123456789ab-17");
  auto task = ParseTaskId("j-0123456789ab-17");
  ASSERT_TRUE(task.has_value());
  EXPECT_EQ(task->first, "j-0123456789ab");
  EXPECT_EQ(task->second, 17);
  EXPECT_EQ(ParseTaskId("j-0123456789ab-0")->second, 0);
  EXPECT_EQ(ParseTaskId("j-0123456789ab-99999")->second, 99999);
  for (const char* id :
       {"j-0123456789ab", "j-0123456789ab-", "j-0123456789ab-017", "j-0123456789ab-100000",
        "j-0123456789ab-1x", "j--5", "x-12-3", "j-0123456789AB-3", "j-0123456789ab-3-4"}) {
    EXPECT_FALSE(ParseTaskId(id).has_value()) << id;
  }
  EXPECT_TRUE(ValidateJobId("j-0123456789ab-17", "job_id").ok());
  EXPECT_FALSE(ValidateJobId("j-0123456789ab-017", "job_id").ok());
  EXPECT_FALSE(ValidateJobId("j-0123456789ab-3-4", "job_id").ok());
}

TEST(ArrayTest, ATaskRunsTheArraysSpecToldItsIndex) {
  Job array;
  array.id = "j-0123456789ab";
  array.team = "vision";
  array.spec = ArraySpecOf(1000, 50);
  Job task = TaskOf(array, 17, 1234);
  EXPECT_EQ(task.id, "j-0123456789ab-17");
  EXPECT_EQ(task.team, "vision");
  EXPECT_EQ(task.state, JobState::kPending);
  EXPECT_EQ(task.created_at_ms, 1234);
  EXPECT_FALSE(task.spec.array.has_value());
  EXPECT_TRUE(task.spec.after.empty()) << "the array waited for them";
  EXPECT_EQ(task.spec.command->argv,
            (std::vector<std::string>{"train", "--seed=17", "--out=/d/17/17"}));
  EXPECT_EQ(task.spec.command->env.at("RINGMASTER_ARRAY_INDEX"), "17");
  EXPECT_EQ(task.spec.command->env.at("RINGMASTER_ARRAY_COUNT"), "1000");
  EXPECT_EQ(task.spec.command->env.at("RINGMASTER_ARRAY_ID"), "j-0123456789ab");
  EXPECT_EQ(task.spec.command->env.at("A"), "1");
  EXPECT_EQ(task.spec.labels.at(kArrayLabel), "j-0123456789ab");
}

TEST(ArrayTest, TasksAreCreatedUpToTheParallelismOrTheWindow) {
  ArrayProgress p = ProgressOf({10, 4}, {});
  EXPECT_EQ(TasksToCreate(p), 4);
  p.next = 4;
  p.live = 4;
  EXPECT_EQ(TasksToCreate(p), 0);
  TaskEnded(p, 1, JobState::kSucceeded);
  EXPECT_EQ(TasksToCreate(p), 1);
  p.next = 9;
  p.live = 0;
  EXPECT_EQ(TasksToCreate(p), 1) << "only one left to create";
  ArrayProgress unlimited = ProgressOf({kMaxArrayCount, 0}, {});
  EXPECT_EQ(TasksToCreate(unlimited), kArrayWindow);
}

TEST(ArrayTest, AnArrayEndsAfterItsLastTaskSucceededOnlyIfEveryOneDid) {
  ArrayProgress p = ProgressOf({3, 0}, {});
  p.next = 3;
  p.live = 3;
  TaskEnded(p, 0, JobState::kSucceeded);
  TaskEnded(p, 2, JobState::kFailed);
  EXPECT_FALSE(EndOf(p).has_value());
  TaskEnded(p, 1, JobState::kSucceeded);
  auto end = EndOf(p);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, JobState::kFailed);
  EXPECT_THAT(end->reason, HasSubstr("1 of 3 tasks did not succeed (1 failed, 0 cancelled)"));
  EXPECT_THAT(end->reason, HasSubstr("failed: 2"));

  ArrayProgress all = ProgressOf({2, 1}, {2, 0, 0, 2, 0, 0, {}});
  auto succeeded = EndOf(all);
  ASSERT_TRUE(succeeded.has_value());
  EXPECT_EQ(succeeded->state, JobState::kSucceeded);
  EXPECT_FALSE(EndOf(ProgressOf({2, 1}, {1, 0, 0, 1, 0, 0, {}})).has_value())
      << "one task not created yet";
}

TEST(ArrayTest, ReadersSeeUncreatedTasksAsWaitingOrCancelled) {
  ArrayProgress p = ProgressOf({100, 10}, {12, 1, 1, 9, 1, 0, {4}});
  ArrayStatus s = StatusOf(p, false);
  EXPECT_EQ(s, (ArrayStatus{100, 88, 1, 1, 9, 1, 0, {4}}));
  EXPECT_EQ(StatusOf(p, true).cancelled, 88);
  EXPECT_EQ(StatusOf(p, true).waiting, 0);
  EXPECT_EQ(ArraySummary(p),
            "1 running, 1 pending, 88 waiting; 9 succeeded, 1 failed, 0 cancelled (of 100 tasks; "
            "at most 10 at once)");
}

TEST(ArrayTest, FailedIndicesKeepTheLowestHundred) {
  ArrayProgress p = ProgressOf({1000, 0}, {});
  p.next = 1000;
  p.live = 1000;
  for (int32_t i = 999; i >= 0; --i) TaskEnded(p, i, JobState::kFailed);
  ASSERT_EQ(p.failed_indices.size(), kShownFailedIndices);
  EXPECT_EQ(p.failed_indices.front(), 0);
  EXPECT_EQ(p.failed_indices.back(), 99);
  EXPECT_EQ(p.failed, 1000);
}

TEST(ArrayTest, ValidationNamesTheField) {
  auto error = [](JobSpec spec) { return std::string(ValidateJobSpec(spec).status().message()); };
  EXPECT_TRUE(ValidateJobSpec(ArraySpecOf(100000, 0)).ok());
  EXPECT_THAT(error(ArraySpecOf(0, 0)), HasSubstr("array.count: must be 1..100000, got 0"));
  EXPECT_THAT(error(ArraySpecOf(100001, 0)), HasSubstr("array.count"));
  EXPECT_THAT(error(ArraySpecOf(10, 11)), HasSubstr("array.parallelism: must be 0"));
  EXPECT_THAT(error(ArraySpecOf(10, -1)), HasSubstr("array.parallelism"));
  JobSpec trainer = ArraySpecOf(10, 0);
  trainer.command.reset();
  trainer.trainer = TrainerWorkload{};
  EXPECT_THAT(error(trainer), HasSubstr("array: only with a command workload"));
  JobSpec reserved = ArraySpecOf(10, 0);
  reserved.command->env["RINGMASTER_ARRAY_INDEX"] = "3";
  EXPECT_THAT(error(reserved),
              HasSubstr("command.env.RINGMASTER_ARRAY_INDEX: is set by the platform"));
  JobSpec labelled = ArraySpecOf(10, 0);
  labelled.labels[kArrayLabel] = "x";
  EXPECT_THAT(error(labelled), HasSubstr("labels[ringmaster/array]"));
  JobSpec crowded = ArraySpecOf(10, 0);
  for (int i = 0; i < 62; ++i) crowded.command->env["E" + std::to_string(i)] = "v";
  EXPECT_THAT(error(crowded), HasSubstr("command.env: at most 61 entries in an array"));
}

}  // namespace
}  // namespace ringmaster::scheduler

namespace ringmaster::scheduler {
namespace {

TEST(JudgeWaitingTest, AnArrayThatCannotSucceedCancelsItsWaitersBeforeItEnds) {
  ArrayProgress p;
  p.count = 10;
  p.succeeded = 3;
  const std::vector<Dependency> after = {{"j-00000000000a", AfterCondition::kSucceeded}};
  auto array_of = [&](const std::string& id) -> const ArrayProgress* {
    return id == "j-00000000000a" ? &p : nullptr;
  };
  auto live = [](const std::string&) -> std::optional<JobState> { return JobState::kRunning; };
  DependencyVerdict v = JudgeWaiting(after, array_of, live);
  EXPECT_EQ(v.kind, DependencyVerdict::Kind::kWaiting);
  EXPECT_THAT(v.reason, ::testing::EndsWith("(7 of 10 tasks of the array left)"));
  p.failed = 1;
  v = JudgeWaiting(after, array_of, live);
  EXPECT_EQ(v.kind, DependencyVerdict::Kind::kNever);
  EXPECT_EQ(v.reason,
            "array j-00000000000a cannot succeed (failed: 1, cancelled: 0), but this job waits "
            "for it to succeed");
  // Waiting for it to end: a failed task changes nothing until it does.
  const std::vector<Dependency> ended = {{"j-00000000000a", AfterCondition::kEnded}};
  EXPECT_EQ(JudgeWaiting(ended, array_of, live).kind, DependencyVerdict::Kind::kWaiting);
  auto over = [](const std::string&) -> std::optional<JobState> { return JobState::kFailed; };
  EXPECT_EQ(JudgeWaiting(ended, array_of, over).kind, DependencyVerdict::Kind::kReady);
}

}  // namespace
}  // namespace ringmaster::scheduler
