#include "trainer/allreduce_benchmark.h"

#include <sstream>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/local_ranks.h"
#include "trainer/cpu_compute.h"
#include "trainer/local_communicator.h"

namespace ringmaster::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::RunOnLocalRanks;

TEST(AllreduceBusBandwidthTest, ScalesAlgbwByTwoTimesNMinusOneOverN) {
  EXPECT_DOUBLE_EQ(AllreduceBusBandwidth(10.0, 1), 0.0);
  EXPECT_DOUBLE_EQ(AllreduceBusBandwidth(10.0, 2), 10.0);
  EXPECT_DOUBLE_EQ(AllreduceBusBandwidth(10.0, 4), 15.0);
  EXPECT_DOUBLE_EQ(AllreduceBusBandwidth(10.0, 8), 17.5);
}

TEST(SweepSizesTest, DoublesFromMinToMax) {
  EXPECT_THAT(SweepSizes(8, 64), ElementsAre(8, 16, 32, 64));
  EXPECT_THAT(SweepSizes(8, 100), ElementsAre(8, 16, 32, 64));
  EXPECT_THAT(SweepSizes(1024, 1024), ElementsAre(1024));
  EXPECT_EQ(SweepSizes(8, size_t{256} << 20).size(), 26u);
  EXPECT_EQ(SweepSizes(8, size_t{256} << 20).back(), size_t{256} << 20);
}

TEST(SweepSizesTest, StopsBeforeOverflow) {
  const size_t max = ~size_t{0};
  std::vector<size_t> sizes = SweepSizes(size_t{1} << 62, max);
  EXPECT_THAT(sizes, ElementsAre(size_t{1} << 62, size_t{1} << 63));
}

TEST(AllreducePatternTest, SumOverRanksIsTheExpectedExactValue) {
  for (int ranks : {1, 2, 3, 8}) {
    for (size_t i : {0, 1, 12, 13, 1000001}) {
      float sum = 0;
      for (int r = 0; r < ranks; ++r) sum += AllreducePattern(r, i);
      EXPECT_EQ(sum, AllreduceExpectedSum(ranks, i)) << ranks << " ranks, element " << i;
    }
  }
}

TEST(RunAllreduceBenchmarkTest, ThreeLocalRanksReportNothingWrong) {
  std::vector<std::vector<AllreduceResult>> results(3);
  std::ostringstream table;
  auto statuses = RunOnLocalRanks(3, [&](LocalCommunicator& comm) -> absl::Status {
    CpuCompute compute;
    AllreduceBenchmarkOptions options;
    options.min_bytes = 8;
    options.max_bytes = 4096;
    options.iters = 2;
    options.warmup_iters = 1;
    auto run = RunAllreduceBenchmark(options, compute, comm, comm.rank() == 0 ? &table : nullptr);
    if (!run.ok()) return run.status();
    results[comm.rank()] = *run;
    return absl::OkStatus();
  });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(results[0].size(), 10u);
  for (const AllreduceResult& result : results[0]) {
    EXPECT_EQ(result.wrong, 0) << result.bytes;
    EXPECT_GT(result.time_us, 0) << result.bytes;
    EXPECT_DOUBLE_EQ(result.busbw_gbps, result.algbw_gbps * 4.0 / 3.0);
  }
  EXPECT_THAT(table.str(), HasSubstr("#wrong"));
  EXPECT_THAT(table.str(), HasSubstr("# Out of bounds values : 0 OK"));
}

// Adds one to the first element of every result: a backend that corrupts data.
class CorruptingCommunicator : public Communicator {
 public:
  explicit CorruptingCommunicator(Communicator& inner) : inner_(inner) {}
  absl::string_view name() const override { return "corrupting"; }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  MemoryKind memory() const override { return inner_.memory(); }
  absl::StatusOr<Handle> StartAllreduceSum(float* data, size_t count) override {
    last_ = count > 2 ? data : nullptr;  // leave the benchmark's own 2-float totals alone
    return inner_.StartAllreduceSum(data, count);
  }
  absl::Status Wait(Handle handle) override {
    absl::Status status = inner_.Wait(handle);
    if (last_ != nullptr) last_[0] += 1.0f;
    return status;
  }
  absl::Status Synchronize() override { return inner_.Synchronize(); }
  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    return inner_.Broadcast(data, bytes, root);
  }
  absl::Status Barrier() override { return inner_.Barrier(); }

 private:
  Communicator& inner_;
  float* last_ = nullptr;
};

TEST(RunAllreduceBenchmarkTest, CountsWrongValuesFromACorruptingBackend) {
  auto group = LocalCommunicator::CreateGroup(1);
  CorruptingCommunicator corrupting(*group[0]);
  CpuCompute compute(1);
  AllreduceBenchmarkOptions options;
  options.min_bytes = 16;
  options.max_bytes = 64;
  options.iters = 1;
  options.warmup_iters = 0;
  std::ostringstream table;
  auto results = RunAllreduceBenchmark(options, compute, corrupting, &table);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 3u);
  for (const AllreduceResult& result : *results) EXPECT_EQ(result.wrong, 1) << result.bytes;
  EXPECT_THAT(table.str(), HasSubstr("# Out of bounds values : 3 FAILED"));
}

}  // namespace
}  // namespace ringmaster::trainer
