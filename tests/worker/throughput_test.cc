#include "worker/core/throughput.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

using ::testing::ElementsAre;

TEST(ThroughputTest, TotalLineOfTfCnnBenchmarks) {
  auto s = ParseThroughputLine("total images/sec: 12881.34");
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->images_per_second, 12881.34);
  EXPECT_TRUE(s->total);
}

TEST(ThroughputTest, ProgressLineOfTfCnnBenchmarks) {
  auto s = ParseThroughputLine("10\timages/sec: 170.3 +/- 0.0 (jitter = 0.0)\t7.594");
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->images_per_second, 170.3);
  EXPECT_FALSE(s->total);
}

TEST(ThroughputTest, ProgressLineOfRingmasterTrain) {
  auto s = ParseThroughputLine("step 10/100 loss 0.5213 images/sec 812.4");
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->images_per_second, 812.4);
}

TEST(ThroughputTest, LinesWithoutANumberAreNotSamples) {
  EXPECT_FALSE(ParseThroughputLine("hello").has_value());
  EXPECT_FALSE(ParseThroughputLine("images/sec").has_value());
  EXPECT_FALSE(ParseThroughputLine("images/sec: n/a").has_value());
  EXPECT_FALSE(ParseThroughputLine("images/sec: -5").has_value());
  EXPECT_FALSE(ParseThroughputLine("images/sec: .").has_value());
  EXPECT_FALSE(ParseThroughputLine("total images/sec: 1e999").has_value());
}

TEST(ThroughputTest, SplitterJoinsChunksAndCutsOverlongLines) {
  LineSplitter splitter(8);
  std::vector<std::string> lines;
  auto on_line = [&](std::string_view l) { lines.emplace_back(l); };
  splitter.Feed("total ima", on_line);
  splitter.Feed("ges/sec: 1\nab\n\n", on_line);
  splitter.Feed("0123456789", on_line);
  splitter.Flush(on_line);
  EXPECT_THAT(lines, ElementsAre("total im", "ages/sec", ": 1", "ab", "", "01234567", "89"));
}

TEST(ThroughputTest, SplitterKeepsShortLinesWhole) {
  LineSplitter splitter;
  std::vector<std::string> lines;
  auto on_line = [&](std::string_view l) { lines.emplace_back(l); };
  splitter.Feed("total images/sec: 1", on_line);
  splitter.Feed("2.5\nnext", on_line);
  splitter.Flush(on_line);
  ASSERT_THAT(lines, ElementsAre("total images/sec: 12.5", "next"));
  EXPECT_DOUBLE_EQ(ParseThroughputLine(lines[0])->images_per_second, 12.5);
}

}  // namespace
}  // namespace ringmaster::worker
