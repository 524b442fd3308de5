#include "worker/core/inventory.h"

#include <chrono>

#include "gtest/gtest.h"
#include "worker/core/auth.h"
#include "worker/core/backoff.h"

namespace ringmaster::worker {
namespace {

using std::chrono::milliseconds;

TEST(InventoryTest, KnownGpuModelsGetTheirShortNames) {
  EXPECT_EQ(GpuTypeFromName("Tesla T4"), "t4");
  EXPECT_EQ(GpuTypeFromName("Tesla V100-SXM2-16GB"), "v100");
  EXPECT_EQ(GpuTypeFromName("NVIDIA A100-SXM4-80GB"), "a100");
  EXPECT_EQ(GpuTypeFromName("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(GpuTypeFromName("NVIDIA H200"), "h200");
  EXPECT_EQ(GpuTypeFromName("NVIDIA A10G"), "a10g");
}

TEST(InventoryTest, OtherGpusGetASanitizedName) {
  EXPECT_EQ(GpuTypeFromName("NVIDIA GeForce RTX 4090"), "geforce-rtx-4090");
  EXPECT_EQ(GpuTypeFromName("Quadro RTX 8000 (rev b)"), "quadro-rtx-8000-rev-b");
  EXPECT_EQ(GpuTypeFromName(""), "gpu");
  EXPECT_EQ(GpuTypeFromName("NVIDIA"), "gpu");
  const std::string longest = GpuTypeFromName(std::string(40, 'x') + " y");
  EXPECT_EQ(longest.size(), 32u);
  EXPECT_EQ(GpuTypeFromName("NVIDIA " + std::string(31, 'a') + " b"), std::string(31, 'a'));
}

TEST(InventoryTest, AMigInstanceIsTypedByItsGpuAndProfile) {
  EXPECT_EQ(MigGpuType("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 MIG 1g.10gb"),
            "h100-1g.10gb");
  EXPECT_EQ(MigGpuType("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB MIG 3g.20gb"),
            "a100-3g.20gb");
  EXPECT_EQ(MigGpuType("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 MIG 1g.10gb+me"),
            "h100-1g.10gb-me");
  EXPECT_EQ(MigGpuType("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"), "h100-mig");
  // At most the scheduler's 32 characters, the profile kept.
  const std::string type = MigGpuType("NVIDIA " + std::string(40, 'x'), "x MIG 7g.80gb");
  EXPECT_EQ(type.size(), 32u);
  EXPECT_EQ(type.substr(type.size() - 8), "-7g.80gb");
}

TEST(InventoryTest, CpuSlotsDefaultToCoresOnlyWithoutGpus) {
  EXPECT_EQ(CpuSlots(-1, 8, 0), 8);
  EXPECT_EQ(CpuSlots(-1, 8, 2), 0);
  EXPECT_EQ(CpuSlots(-1, 0, 0), 1);
  EXPECT_EQ(CpuSlots(3, 8, 2), 3);
  EXPECT_EQ(CpuSlots(5000, 8, 0), 1024);
}

TEST(BackoffTest, DoublesUpToTheCeilingWithJitterAndResets) {
  Backoff b(milliseconds(100), milliseconds(400));
  EXPECT_EQ(b.Next(1.0), milliseconds(100));
  EXPECT_EQ(b.Next(0.0), milliseconds(100));  // step 200, half of it
  EXPECT_EQ(b.Next(1.0), milliseconds(400));
  EXPECT_EQ(b.Next(1.0), milliseconds(400));
  b.Reset();
  EXPECT_EQ(b.Next(0.5), milliseconds(75));
}

TEST(AuthTest, SecretsCompareWhole) {
  EXPECT_TRUE(SecretsEqual("abc", "abc"));
  EXPECT_FALSE(SecretsEqual("abc", "abd"));
  EXPECT_FALSE(SecretsEqual("abc", "ab"));
  EXPECT_FALSE(SecretsEqual("", "x"));
}

}  // namespace
}  // namespace ringmaster::worker
