#include "trainer/communicator.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/local_ranks.h"
#include "trainer/cpu_compute.h"
#include "trainer/host_collectives.h"
#include "trainer/local_communicator.h"

namespace ringmaster::trainer {
namespace {

using ::testing::HasSubstr;
using testing::RunOnLocalRanks;

TEST(LocalCommunicatorTest, AllreduceSumsEveryRanksBufferIntoAll) {
  std::vector<std::vector<float>> buffers(3);
  auto statuses = RunOnLocalRanks(3, [&](LocalCommunicator& comm) {
    std::vector<float>& data = buffers[comm.rank()];
    data = {1.0f * comm.rank(), 10.0f, -1.0f};
    return comm.AllreduceSum(data.data(), data.size());
  });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  for (const auto& data : buffers) EXPECT_EQ(data, (std::vector<float>{3.0f, 30.0f, -3.0f}));
}

TEST(LocalCommunicatorTest, StartedAllreducesCompleteInStartOrderOnWait) {
  std::vector<std::vector<float>> firsts(2), seconds(2);
  auto statuses = RunOnLocalRanks(2, [&](LocalCommunicator& comm) -> absl::Status {
    firsts[comm.rank()] = {1.0f};
    seconds[comm.rank()] = {2.0f, 2.0f};
    auto first = comm.StartAllreduceSum(firsts[comm.rank()].data(), 1);
    auto second = comm.StartAllreduceSum(seconds[comm.rank()].data(), 2);
    if (!first.ok()) return first.status();
    if (!second.ok()) return second.status();
    // Waiting on the second finishes the first too; waiting on the first again is a no-op.
    if (absl::Status s = comm.Wait(*second); !s.ok()) return s;
    return comm.Wait(*first);
  });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(firsts[0], std::vector<float>{2.0f});
  EXPECT_EQ(seconds[1], (std::vector<float>{4.0f, 4.0f}));
}

TEST(LocalCommunicatorTest, BroadcastCopiesRootsBytes) {
  std::vector<uint64_t> values = {0, 0, 0};
  auto statuses = RunOnLocalRanks(3, [&](LocalCommunicator& comm) {
    values[comm.rank()] = 100 + comm.rank();
    return comm.Broadcast(&values[comm.rank()], sizeof(uint64_t), /*root=*/2);
  });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(values, (std::vector<uint64_t>{102, 102, 102}));
}

TEST(LocalCommunicatorTest, MismatchedSizesFailOnEveryRank) {
  auto statuses = RunOnLocalRanks(2, [&](LocalCommunicator& comm) {
    std::vector<float> data(comm.rank() + 1, 1.0f);
    return comm.AllreduceSum(data.data(), data.size());
  });
  for (const absl::Status& status : statuses) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(LocalCommunicatorTest, WaitOnUnknownHandleIsInvalidArgument) {
  auto group = LocalCommunicator::CreateGroup(1);
  EXPECT_EQ(group[0]->Wait(42).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SelectCommunicatorTest, TakesTheFirstThatReducesTheTensorsMemory) {
  auto host_a = LocalCommunicator::CreateGroup(1);
  auto host_b = LocalCommunicator::CreateGroup(1);
  auto selected =
      SelectCommunicator({nullptr, host_a[0].get(), host_b[0].get()}, MemoryKind::kHost);
  ASSERT_TRUE(selected.ok()) << selected.status();
  EXPECT_EQ(*selected, host_a[0].get());
}

TEST(SelectCommunicatorTest, NoneForDeviceMemoryIsFailedPreconditionNamingCandidates) {
  auto host = LocalCommunicator::CreateGroup(1);
  auto selected = SelectCommunicator({host[0].get()}, MemoryKind::kCuda);
  EXPECT_EQ(selected.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(selected.status().message(), HasSubstr("local (host)"));
}

TEST(HostCollectivesTest, FingerprintChangesWithAnyBit) {
  std::vector<float> a = {1.0f, 2.0f, 3.0f};
  std::vector<float> b = a;
  EXPECT_EQ(Fingerprint(a), Fingerprint(b));
  b[1] = std::nextafter(b[1], 10.0f);
  EXPECT_NE(Fingerprint(a), Fingerprint(b));
}

TEST(HostCollectivesTest, CountsRanksWhoseFingerprintDiffersFromRoot) {
  std::vector<int> counts(4, -1);
  auto statuses = RunOnLocalRanks(4, [&](LocalCommunicator& comm) -> absl::Status {
    CpuCompute compute;
    const uint64_t fingerprint = comm.rank() == 2 ? 7 : 5;
    auto differing = CountRanksDifferingFromRoot(compute, comm, fingerprint);
    if (!differing.ok()) return differing.status();
    counts[comm.rank()] = *differing;
    return absl::OkStatus();
  });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(counts, (std::vector<int>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace ringmaster::trainer
