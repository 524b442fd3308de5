#include "trainer/config.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "common/flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::trainer {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<TrainerConfig> Parse(std::vector<std::string> args) {
  Flags flags("ringmaster-train", "test");
  AddTrainerFlags(&flags);
  args.insert(args.begin(), "ringmaster-train");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  if (absl::Status s = flags.Parse(static_cast<int>(argv.size()), argv.data()); !s.ok()) return s;
  return ConfigFromFlags(flags);
}

TEST(ConfigTest, DefaultsTrainTheMlpWith25MiBBuckets) {
  auto config = Parse({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->mode, Mode::kTrain);
  EXPECT_EQ(config->device, DeviceRequest::kAuto);
  EXPECT_EQ(config->model.name, "mlp");
  EXPECT_EQ(config->model.input_dim, 3072);
  EXPECT_EQ(config->bucket_bytes, size_t{25} << 20);
  EXPECT_EQ(config->max_bytes, size_t{256} << 20);
  EXPECT_EQ(config->min_bytes, 8u);
}

TEST(ConfigTest, FlagsSetEveryField) {
  auto config = Parse(
      {"--model=mlp-large", "--batch-size", "16", "--steps=7", "--lr=0.5", "--seed=3",
       "--device=gpu", "--bucket-mb=0.5", "--warmup-steps=1", "--input-dim=100", "--num-classes=4",
       "--benchmark=allreduce", "--min-bytes=1K", "--max-bytes=2M", "--iters=3", "--warmup-iters=0",
       "--metrics-addr=127.0.0.1:7072", "--global-batch-size=96", "--momentum=0.9"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.name, "mlp-large");
  EXPECT_EQ(config->model.input_dim, 100);
  EXPECT_EQ(config->model.num_classes, 4);
  EXPECT_EQ(config->batch_size, 16);
  EXPECT_EQ(config->global_batch_size, 96);
  EXPECT_EQ(config->steps, 7);
  EXPECT_DOUBLE_EQ(config->lr, 0.5);
  EXPECT_DOUBLE_EQ(config->momentum, 0.9);
  EXPECT_EQ(config->seed, 3u);
  EXPECT_EQ(config->device, DeviceRequest::kGpu);
  EXPECT_EQ(config->bucket_bytes, size_t{512} << 10);
  EXPECT_EQ(config->warmup_steps, 1);
  EXPECT_EQ(config->mode, Mode::kAllreduceBenchmark);
  EXPECT_EQ(config->min_bytes, 1024u);
  EXPECT_EQ(config->max_bytes, size_t{2} << 20);
  EXPECT_EQ(config->iters, 3);
  EXPECT_EQ(config->warmup_iters, 0);
  EXPECT_EQ(config->metrics_addr, "127.0.0.1:7072");
}

TEST(ConfigTest, EnvironmentIsTheFallback) {
  setenv("RINGMASTER_MODEL", "mlp-small", 1);
  setenv("RINGMASTER_BATCH_SIZE", "8", 1);
  auto config = Parse({"--batch-size=4"});
  unsetenv("RINGMASTER_MODEL");
  unsetenv("RINGMASTER_BATCH_SIZE");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.name, "mlp-small");
  EXPECT_EQ(config->batch_size, 4);  // the flag wins
}

TEST(ConfigTest, AGpuShareAndItsMemoryComeFromTheWorkersEnvironment) {
  auto whole = Parse({});
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->gpu_share, "");
  EXPECT_EQ(whole->gpu_memory, 0);
  setenv("RINGMASTER_GPU_SHARE", "0.25", 1);
  setenv("RINGMASTER_GPU_MEMORY", "1073741824", 1);
  auto shared = Parse({});
  unsetenv("RINGMASTER_GPU_SHARE");
  unsetenv("RINGMASTER_GPU_MEMORY");
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ(shared->gpu_share, "0.25");
  EXPECT_EQ(shared->gpu_memory, int64_t{1} << 30);
  auto by_flag = Parse({"--gpu-memory=512M", "--gpu-share=1"});
  ASSERT_TRUE(by_flag.ok()) << by_flag.status();
  EXPECT_EQ(by_flag->gpu_memory, int64_t{512} << 20);
}

TEST(ConfigTest, BadValuesAreInvalidArgumentNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string mention;
  };
  const std::vector<Case> cases = {
      {{"--model=resnet"}, "unknown model 'resnet'"},
      {{"--batch-size=0"}, "--batch-size"},
      {{"--steps=ten"}, "--steps"},
      {{"--steps=5", "--warmup-steps=5"}, "--warmup-steps"},
      {{"--lr=-1"}, "--lr"},
      {{"--momentum=1"}, "--momentum"},
      {{"--momentum=-0.5"}, "--momentum"},
      {{"--global-batch-size=-2"}, "--global-batch-size"},
      {{"--device=tpu"}, "--device"},
      {{"--bucket-mb=0"}, "--bucket-mb"},
      {{"--benchmark=broadcast"}, "--benchmark"},
      {{"--min-bytes=6"}, "--min-bytes"},
      {{"--max-bytes=lots"}, "--max-bytes"},
      {{"--min-bytes=1M", "--max-bytes=1K"}, "--min-bytes"},
      {{"--num-classes=1"}, "--num-classes"},
      {{"--gpu-memory=lots"}, "--gpu-memory"},
      {{"--gpu-share=0"}, "--gpu-share"},
      {{"--gpu-share=1.5"}, "--gpu-share"},
      {{"--gpu-share=quarter"}, "--gpu-share"},
  };
  for (const Case& c : cases) {
    auto config = Parse(c.args);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << c.args[0];
    EXPECT_THAT(config.status().message(), HasSubstr(c.mention)) << c.args[0];
  }
}

TEST(ParseByteSizeTest, AcceptsPowerOfTwoSuffixes) {
  EXPECT_EQ(*ParseByteSize("8"), 8u);
  EXPECT_EQ(*ParseByteSize("4k"), 4096u);
  EXPECT_EQ(*ParseByteSize("256M"), size_t{256} << 20);
  EXPECT_EQ(*ParseByteSize("1G"), size_t{1} << 30);
  EXPECT_EQ(ParseByteSize("M").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("-1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("99999999999999999999G").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ResolveDeviceTest, AutoTakesTheGpuOnlyWhenBuiltAndEveryRankHasOne) {
  EXPECT_EQ(*ResolveDevice(DeviceRequest::kAuto, true, true, ""), DeviceKind::kGpu);
  EXPECT_EQ(*ResolveDevice(DeviceRequest::kAuto, true, false, "no driver"), DeviceKind::kCpu);
  EXPECT_EQ(*ResolveDevice(DeviceRequest::kAuto, false, true, ""), DeviceKind::kCpu);
  EXPECT_EQ(*ResolveDevice(DeviceRequest::kCpu, true, true, ""), DeviceKind::kCpu);
}

TEST(ResolveDeviceTest, DemandedGpuThatIsMissingIsFailedPreconditionWithTheReason) {
  auto none = ResolveDevice(DeviceRequest::kGpu, true, false,
                            "CUDA driver version is insufficient for CUDA runtime version");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("driver version is insufficient"));
  auto unbuilt = ResolveDevice(DeviceRequest::kGpu, false, true, "");
  EXPECT_EQ(unbuilt.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unbuilt.status().message(), HasSubstr("built without CUDA"));
}

TEST(GlobalBatchPerRankTest, SplitsEvenlyOrRefusesNamingBothSizes) {
  EXPECT_EQ(*GlobalBatchPerRank(96, 4), 24);
  EXPECT_EQ(*GlobalBatchPerRank(96, 1), 96);
  auto odd = GlobalBatchPerRank(96, 5);
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(odd.status().message(),
              HasSubstr("a global batch of 96 does not split evenly over 5 rank(s)"));
  EXPECT_THAT(odd.status().message(), HasSubstr("--global-batch-size"));
  EXPECT_EQ(GlobalBatchPerRank(8, 16).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringmaster::trainer
