// The worker's reading of an Assignment off the wire (rpc/convert.h).
#include "worker/rpc/convert.h"

#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

v1::Assignment OneRank() {
  v1::Assignment proto;
  proto.set_job_id("j-1");
  proto.set_attempt(1);
  proto.mutable_spec()->mutable_trainer()->set_model("mlp-small");
  v1::RankPlacement* rank = proto.add_placement();
  rank->set_worker_id("w1");
  rank->add_gpu_indices(2);
  return proto;
}

TEST(ConvertTest, AGpuShareAndItsMemoryReachTheWorkersAssignment) {
  v1::Assignment proto = OneRank();
  proto.mutable_spec()->set_gpu_share(250);
  proto.mutable_spec()->set_gpu_memory(int64_t{10} << 30);
  const Assignment a = FromProto(proto);
  EXPECT_EQ(a.gpu_share, 250);
  EXPECT_EQ(a.gpu_memory, int64_t{10} << 30);
}

TEST(ConvertTest, TheRegistrationSaysWhetherSharesMustBeOneTeams) {
  Inventory inventory;
  inventory.worker_id = "w1";
  EXPECT_FALSE(ToProto(inventory, {}).shares_one_team());
  inventory.shares_one_team = true;
  EXPECT_TRUE(ToProto(inventory, {}).shares_one_team());
}

TEST(ConvertTest, AWholeGpuJobHasNoShare) {
  const Assignment a = FromProto(OneRank());
  EXPECT_EQ(a.gpu_share, 0);
  EXPECT_EQ(a.gpu_memory, 0);
}

TEST(ConvertTest, AnUnreadableCredentialReachesTheWorkerAsItsProblemWithoutASecret) {
  v1::Assignment proto = OneRank();
  proto.mutable_spec()->set_image("ghcr.io/vision/train:1");
  proto.mutable_registry_auth()->set_registry("ghcr.io");
  proto.mutable_registry_auth()->set_username("robot");
  proto.mutable_registry_auth()->set_problem("the stored secret cannot be read: altered");
  const Assignment a = FromProto(proto);
  ASSERT_TRUE(a.image.has_value());
  ASSERT_TRUE(a.image->registry_auth.has_value());
  EXPECT_EQ(*a.image->registry_auth,
            (RegistryAuth{.registry = "ghcr.io",
                          .username = "robot",
                          .secret = "",
                          .problem = "the stored secret cannot be read: altered"}));
}

}  // namespace
}  // namespace ringmaster::worker
