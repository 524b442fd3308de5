#include "common/thousandths.h"

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

// The one text of a GPU share: exact, without trailing zeros (RINGMASTER_GPU_SHARE, ringctl,
// the scheduler's reasons).
TEST(ThousandthsTextTest, IsTheExactDecimalWithoutTrailingZeros) {
  EXPECT_EQ(ThousandthsText(250), "0.25");
  EXPECT_EQ(ThousandthsText(125), "0.125");
  EXPECT_EQ(ThousandthsText(500), "0.5");
  EXPECT_EQ(ThousandthsText(1), "0.001");
  EXPECT_EQ(ThousandthsText(10), "0.01");
  EXPECT_EQ(ThousandthsText(999), "0.999");
  EXPECT_EQ(ThousandthsText(1000), "1");
  EXPECT_EQ(ThousandthsText(2500), "2.5");
}

}  // namespace
}  // namespace ringmaster
