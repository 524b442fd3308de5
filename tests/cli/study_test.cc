// ringctl study: sizes, the figure read from a log, speedup and efficiency, the tables, the
// chart, the files studies are kept in, and the command line. No scheduler needed.
#include "study.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "study_store.h"
#include "support/status_test_util.h"

namespace ringmaster::cli {
namespace {

using ::ringmaster::test::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// `result` failed with `code` and a message containing `text`.
template <typename T>
void ExpectError(const absl::StatusOr<T>& result, absl::StatusCode code, const std::string& text) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(text));
}

v1::Study MakeStudy(const std::string& id, int64_t created,
                    std::vector<std::pair<int32_t, double>> points) {
  v1::Study study;
  study.set_id(id);
  study.set_created_at_ms(created);
  study.set_scheduler("localhost:7070");
  study.set_gpu_type("t4");
  study.set_model("mlp");
  study.set_steps(100);
  for (auto [gpus, ips] : points) {
    v1::StudyPoint* p = study.add_points();
    p->set_gpus(gpus);
    p->set_job_id("j-" + std::to_string(gpus));
    p->set_state(ips > 0 ? v1::JOB_STATE_SUCCEEDED : v1::JOB_STATE_FAILED);
    p->set_images_per_second(ips);
    if (ips <= 0) p->set_message("job j-x ended FAILED: rank 1 exited 1");
  }
  ComputeScaling(&study);
  return study;
}

TEST(StudySizesTest, AreDistinctPositiveAndSorted) {
  RM_ASSERT_OK_AND_ASSIGN(auto sizes, ParseStudySizes("8, 1,4,2"));
  EXPECT_THAT(sizes, ElementsAre(1, 2, 4, 8));
  ExpectError(ParseStudySizes("1,0"), absl::StatusCode::kInvalidArgument,
              "--gpus: expected a comma-separated");
  EXPECT_THAT(ParseStudySizes("1,x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseStudySizes("1,,2"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseStudySizes("5000"), StatusIs(absl::StatusCode::kInvalidArgument));
  ExpectError(ParseStudySizes("2,2"), absl::StatusCode::kInvalidArgument, "2 appears twice");
  ExpectError(ParseStudySizes("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"),
              absl::StatusCode::kInvalidArgument, "at most 16");
}

TEST(StudyLogTest, TheLastTotalImagesPerSecondLineCounts) {
  EXPECT_EQ(TotalImagesPerSecond("step 10 images/sec: 10.0\ntotal images/sec: 1234.50\n"), 1234.5);
  EXPECT_EQ(TotalImagesPerSecond("total images/sec: 1\ntotal images/sec: 2.25\n"), 2.25);
  EXPECT_EQ(TotalImagesPerSecond("images/sec: 99\n"), std::nullopt);
  EXPECT_EQ(TotalImagesPerSecond(""), std::nullopt);
}

TEST(StudyScalingTest, SpeedupAndEfficiencyAreAgainstTheSmallestSizeWithAFigure) {
  v1::Study study = MakeStudy("s-00000001", 0, {{1, 0}, {2, 200}, {4, 360}, {8, 0}});
  // 1 GPU failed: 2 GPUs is the base.
  EXPECT_EQ(study.points(0).speedup(), 0);
  EXPECT_DOUBLE_EQ(study.points(1).speedup(), 1.0);
  EXPECT_DOUBLE_EQ(study.points(1).efficiency(), 1.0);
  EXPECT_DOUBLE_EQ(study.points(2).speedup(), 1.8);
  EXPECT_DOUBLE_EQ(study.points(2).efficiency(), 0.9);
  EXPECT_EQ(study.points(3).efficiency(), 0);
}

TEST(StudyFormatTest, TheTableHasOneRowPerSizeAndSaysWhyAFigureIsMissing) {
  const std::string table = FormatStudy(MakeStudy("s-0000000a", 0, {{1, 100}, {2, 190}, {4, 0}}));
  EXPECT_THAT(table, HasSubstr("Study:      s-0000000a\n"));
  EXPECT_THAT(table, HasSubstr("Workload:   trainer, model mlp, 100 steps\n"));
  EXPECT_THAT(table, HasSubstr("GPUS   IMAGES/SEC   SPEEDUP   EFFICIENCY   JOB   STATE\n"));
  EXPECT_THAT(table, HasSubstr("1      100.00       1.00x     100.0%       j-1   SUCCEEDED\n"));
  EXPECT_THAT(table, HasSubstr("2      190.00       1.90x     95.0%        j-2   SUCCEEDED\n"));
  EXPECT_THAT(table, HasSubstr("4      -            -         -            j-4   FAILED\n"));
  EXPECT_THAT(table, HasSubstr("4 GPUs: job j-x ended FAILED: rank 1 exited 1\n"));
}

TEST(StudyFormatTest, ComparisonIsSideBySidePerSize) {
  v1::Study a = MakeStudy("s-0000000a", 0, {{1, 100}, {2, 190}});
  v1::Study b = MakeStudy("s-0000000b", 0, {{1, 50}, {2, 95}, {4, 170}});
  b.set_gpu_type("v100");
  const std::string out = FormatStudyComparison(a, b);
  EXPECT_THAT(out, HasSubstr("A: s-0000000a  t4, trainer, model mlp, 100 steps\n"));
  EXPECT_THAT(out, HasSubstr("B: s-0000000b  v100,"));
  EXPECT_THAT(out, HasSubstr("1      100.00         100.0%         50.00          100.0%"
                             "         0.50\n"));
  EXPECT_THAT(out, HasSubstr("4      -              -              170.00         85.0%"
                             "          -\n"));
}

TEST(StudyChartTest, DrawsMeasuredIdealAndEfficiencyLines) {
  const std::string svg = ScalingChartSvg(MakeStudy("s-0000000a", 0, {{1, 100}, {2, 190}, {4, 0}}));
  EXPECT_THAT(svg, HasSubstr("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_THAT(svg, HasSubstr("stroke-dasharray=\"2,4\" points=\""));  // the ideal line
  // Measured: two points (the failed size has none); ideal: one per size.
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 10, true);
  EXPECT_THAT(svg, HasSubstr("<circle"));
  EXPECT_THAT(svg, HasSubstr(">images/sec</text>"));
  EXPECT_THAT(svg, HasSubstr("</svg>\n"));
  // Names are escaped.
  v1::Study odd = MakeStudy("s-0000000c", 0, {{1, 1}});
  odd.add_command("echo");
  odd.add_command("<b>&");
  EXPECT_THAT(ScalingChartSvg(odd), HasSubstr("echo &lt;b&gt;&amp;"));
  EXPECT_THAT(ScalingChartSvg(odd), Not(HasSubstr("<b>&")));
}

class StudyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ringctl-study-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(StudyStoreTest, SavedStudiesAreReadBackWholeAndListedNewestFirst) {
  v1::Study older = MakeStudy("s-00000001", 1'000, {{1, 100}, {2, 180}});
  v1::Study newer = MakeStudy("s-00000002", 2'000, {{1, 10}});
  RM_ASSERT_OK(SaveStudy(dir_ + "/nested", older));
  RM_ASSERT_OK(SaveStudy(dir_ + "/nested", newer));
  RM_ASSERT_OK_AND_ASSIGN(v1::Study got, LoadStudy(dir_ + "/nested", "s-00000001"));
  EXPECT_EQ(got.SerializeAsString(), older.SerializeAsString());
  std::ofstream(dir_ + "/nested/notes.json") << "{}";
  std::ofstream(dir_ + "/nested/s-00000003.json") << "not json";
  RM_ASSERT_OK_AND_ASSIGN(auto all, ListStudies(dir_ + "/nested"));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id(), "s-00000002");
  EXPECT_EQ(all[1].id(), "s-00000001");
  EXPECT_THAT(FormatStudyList(all), HasSubstr("s-00000001   1970-01-01T00:00:01Z   1,2"));
  EXPECT_THAT(LoadStudy(dir_ + "/nested", "s-00000003"), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(LoadStudy(dir_, "s-0000000f"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(LoadStudy(dir_, "../etc/passwd"), StatusIs(absl::StatusCode::kInvalidArgument));
  RM_ASSERT_OK_AND_ASSIGN(auto none, ListStudies(dir_ + "/missing"));
  EXPECT_TRUE(none.empty());
}

TEST(StudyStoreDirTest, FollowsTheEnvironment) {
  std::map<std::string, std::string> env;
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_THAT(StudyDirectory(getenv), StatusIs(absl::StatusCode::kFailedPrecondition));
  env["HOME"] = "/home/ada";
  EXPECT_EQ(*StudyDirectory(getenv), "/home/ada/.local/share/ringmaster/studies");
  env["XDG_DATA_HOME"] = "/data";
  EXPECT_EQ(*StudyDirectory(getenv), "/data/ringmaster/studies");
  env["RINGMASTER_STUDY_DIR"] = "/studies";
  EXPECT_EQ(*StudyDirectory(getenv), "/studies");
}

const char* NoEnv(const char*) { return nullptr; }

TEST(StudyArgsTest, ScalingTakesSizesSpecFlagsAndACommand) {
  RM_ASSERT_OK_AND_ASSIGN(
      Command cmd,
      ParseArgs({"study", "scaling", "--gpus", "4,1,2", "--gpu-type", "t4", "--model", "mlp",
                 "--steps", "50", "--parallel", "--chart", "out.svg", "--", "python3", "train.py"},
                NoEnv));
  EXPECT_EQ(cmd.verb, Verb::kStudy);
  EXPECT_EQ(cmd.study_action, StudyAction::kScaling);
  EXPECT_THAT(cmd.study_sizes, ElementsAre(1, 2, 4));
  EXPECT_TRUE(cmd.study_parallel);
  EXPECT_FALSE(cmd.study_cpu);
  EXPECT_EQ(cmd.chart, "out.svg");
  EXPECT_EQ(cmd.overrides.gpu_type, "t4");
  EXPECT_EQ(cmd.overrides.steps, 50);
  EXPECT_THAT(*cmd.overrides.command, ElementsAre("python3", "train.py"));
}

TEST(StudyArgsTest, ActionsAndTheirArgumentsAreChecked) {
  RM_ASSERT_OK_AND_ASSIGN(Command get, ParseArgs({"study", "get", "s-0000000a"}, NoEnv));
  EXPECT_EQ(get.study_action, StudyAction::kGet);
  EXPECT_THAT(get.study_ids, ElementsAre("s-0000000a"));
  RM_ASSERT_OK_AND_ASSIGN(Command cmp, ParseArgs({"study", "compare", "s-1", "s-2"}, NoEnv));
  EXPECT_THAT(cmp.study_ids, ElementsAre("s-1", "s-2"));
  ExpectError(ParseArgs({"study"}, NoEnv), absl::StatusCode::kInvalidArgument,
              "missing study action");
  ExpectError(ParseArgs({"study", "scaling"}, NoEnv), absl::StatusCode::kInvalidArgument,
              "needs --gpus");
  ExpectError(ParseArgs({"study", "compare", "s-1"}, NoEnv), absl::StatusCode::kInvalidArgument,
              "missing study ID");
  ExpectError(ParseArgs({"study", "list", "--gpus", "1"}, NoEnv),
              absl::StatusCode::kInvalidArgument, "only study scaling");
  ExpectError(ParseArgs({"study", "get", "s-1", "--", "ls"}, NoEnv),
              absl::StatusCode::kInvalidArgument, "does not take a command");
  ExpectError(ParseArgs({"study", "bake"}, NoEnv), absl::StatusCode::kInvalidArgument,
              "unknown study action");
  EXPECT_THAT(ParseArgs({"submit", "--gpus", "1"}, NoEnv),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Usage(Verb::kStudy), HasSubstr("--parallel"));
}

}  // namespace
}  // namespace ringmaster::cli
