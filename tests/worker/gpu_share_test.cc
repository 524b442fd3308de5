#include "worker/core/gpu_share.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/core/container.h"
#include "worker/core/launch.h"
#include "worker/core/layout.h"

namespace ringmaster::worker {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Key;
using ::testing::Not;
using ::testing::Pair;

constexpr char kPipe[] = "/tmp/ringmaster-mpi-0/mps.0badf00d/pipe";

// Two ranks of a quarter-GPU job with 1 GiB each, both on w1's GPU 2.
Assignment QuarterGpuJob() {
  Assignment a;
  a.job_id = "j-share";
  a.attempt = 1;
  a.token = "secret";
  a.trainer = TrainerWorkload{"mlp-small", 16, 10, std::nullopt};
  a.placement = {RankPlacement{0, "w1", "127.0.0.1", 7071, {2}},
                 RankPlacement{1, "w1", "127.0.0.1", 7071, {2}}};
  a.gpu_share = 250;
  a.gpu_memory = int64_t{1} << 30;
  return a;
}

RankHost RealGpus(const std::string& pipe) {
  RankHost host;
  host.gpu_types = {{2, "h100"}};
  host.mps_pipe_directory = pipe;
  return host;
}

const std::vector<std::string> kMpsNames = {kMpsPipeDirectoryEnv, kMpsActiveThreadPercentageEnv,
                                            kMpsPinnedDeviceMemLimitEnv};

TEST(GpuShareTest, OnlyAWorkerOfTeamsUsersWithRealGpusKeepsItsSharesToOneTeam) {
  EXPECT_TRUE(SharesOneTeam(/*runs_teams_as_users=*/true, /*simulated_gpus=*/false, true));
  EXPECT_FALSE(SharesOneTeam(true, /*simulated_gpus=*/true, true));  // no MPS daemon
  EXPECT_FALSE(SharesOneTeam(/*runs_teams_as_users=*/false, false, true));
  EXPECT_FALSE(SharesOneTeam(true, false, /*has_gpus=*/false));
}

TEST(GpuShareTest, ThreadPercentageRoundsTheShareUpWithinOneToHundred) {
  EXPECT_EQ(MpsActiveThreadPercentage(250), 25);
  EXPECT_EQ(MpsActiveThreadPercentage(125), 13);  // 12.5% of the SMs, rounded up
  EXPECT_EQ(MpsActiveThreadPercentage(1), 1);
  EXPECT_EQ(MpsActiveThreadPercentage(9), 1);
  EXPECT_EQ(MpsActiveThreadPercentage(11), 2);
  EXPECT_EQ(MpsActiveThreadPercentage(1000), 100);
}

TEST(GpuShareTest, PinnedMemLimitIsWholeMibOnDeviceZeroRoundedDown) {
  EXPECT_EQ(MpsPinnedDeviceMemLimit(int64_t{1} << 30), "0=1024M");
  EXPECT_EQ(MpsPinnedDeviceMemLimit(int64_t{10} << 30), "0=10240M");
  EXPECT_EQ(MpsPinnedDeviceMemLimit((int64_t{3} << 20) + 12345), "0=3M");  // never above
  EXPECT_EQ(MpsPinnedDeviceMemLimit(int64_t{1} << 20), "0=1M");
  EXPECT_EQ(MpsPinnedDeviceMemLimit(1000), "0=1M");  // below the 1 MiB the spec allows
}

TEST(GpuShareTest, SharedRankOnASimulatedGpuIsToldItsShareAndMemoryButNoMps) {
  RankHost host;
  host.simulated_gpus = true;
  host.mps_pipe_directory = kPipe;  // ignored: nothing real for MPS to enforce
  const auto env = RankEnvironment(QuarterGpuJob(), 1, host);
  EXPECT_THAT(env, Contains(Pair(kGpuShareEnv, "0.25")));
  EXPECT_THAT(env, Contains(Pair(kGpuMemoryEnv, "1073741824")));
  EXPECT_THAT(env, Contains(Pair("RINGMASTER_SIMULATED_GPUS", "2")));
  for (const std::string& name : kMpsNames) EXPECT_THAT(env, Not(Contains(Key(name)))) << name;
}

TEST(GpuShareTest, SharedRankOnARealGpuIsAnMpsClientWithItsLimits) {
  const auto env = RankEnvironment(QuarterGpuJob(), 0, RealGpus(kPipe));
  EXPECT_THAT(env, Contains(Pair(kGpuShareEnv, "0.25")));
  EXPECT_THAT(env, Contains(Pair(kGpuMemoryEnv, "1073741824")));
  EXPECT_THAT(env, Contains(Pair("CUDA_VISIBLE_DEVICES", "2")));
  EXPECT_THAT(env, Contains(Pair("CUDA_MPS_PIPE_DIRECTORY", kPipe)));
  EXPECT_THAT(env, Contains(Pair("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25")));
  EXPECT_THAT(env, Contains(Pair("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=1024M")));
}

TEST(GpuShareTest, SharedRankWithoutMemoryLimitGetsNoMemoryVariables) {
  Assignment a = QuarterGpuJob();
  a.gpu_share = 125;
  a.gpu_memory = 0;
  const auto env = RankEnvironment(a, 0, RealGpus(kPipe));
  EXPECT_THAT(env, Contains(Pair(kGpuShareEnv, "0.125")));
  EXPECT_THAT(env, Contains(Pair("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "13")));
  EXPECT_THAT(env, Not(Contains(Key(kGpuMemoryEnv))));
  EXPECT_THAT(env, Not(Contains(Key(kMpsPinnedDeviceMemLimitEnv))));
}

TEST(GpuShareTest, WholeGpuRankGetsNeitherShareNorMps) {
  Assignment a = QuarterGpuJob();
  a.gpu_share = 0;
  a.gpu_memory = 0;
  // Even with the daemon running for other jobs: without the pipe directory it is no client.
  const auto env = RankEnvironment(a, 0, RealGpus(kPipe));
  EXPECT_THAT(env, Not(Contains(Key(kGpuShareEnv))));
  EXPECT_THAT(env, Not(Contains(Key(kGpuMemoryEnv))));
  for (const std::string& name : kMpsNames) EXPECT_THAT(env, Not(Contains(Key(name)))) << name;
  EXPECT_THAT(env, Contains(Pair("CUDA_VISIBLE_DEVICES", "2")));
}

TEST(GpuShareTest, OnlyAttemptsWithASharedGpuRankHereNeedTheDaemon) {
  Assignment a = QuarterGpuJob();
  EXPECT_TRUE(PlacesSharedRankOn(a, "w1"));
  EXPECT_FALSE(PlacesSharedRankOn(a, "w2"));
  a.gpu_share = 0;
  EXPECT_FALSE(PlacesSharedRankOn(a, "w1"));
}

TEST(GpuShareTest, DaemonSeesEveryDeviceWithItsOwnDirectories) {
  const MpsDirectories dirs = MpsDirectoriesUnder("/tmp/ringmaster-mpi-0/mps.0badf00d");
  EXPECT_EQ(dirs.pipe, kPipe);
  EXPECT_EQ(dirs.log, "/tmp/ringmaster-mpi-0/mps.0badf00d/log");
  const auto env = MpsDaemonEnvironment(
      {{"PATH", "/usr/bin"}, {"CUDA_VISIBLE_DEVICES", "1"}, {"CUDA_MPS_PIPE_DIRECTORY", "/x"}},
      dirs);
  EXPECT_THAT(
      env,
      ElementsAre(Pair("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), Pair("CUDA_MPS_LOG_DIRECTORY", dirs.log),
                  Pair("CUDA_MPS_PIPE_DIRECTORY", dirs.pipe), Pair("PATH", "/usr/bin")));
  EXPECT_THAT(MpsStartArgv("nvidia-cuda-mps-control"),
              ElementsAre("nvidia-cuda-mps-control", "-d"));
  EXPECT_THAT(MpsQuitArgv("/opt/bin/mps-control"),
              ElementsAre("/bin/sh", "-c", "echo quit | exec \"$0\"", "/opt/bin/mps-control"));
}

TEST(GpuShareTest, MpsDirectoryIsTheWorkersOwnAndGoesWithAnEarlierLifesSessions) {
  WorkerLayout layout{.log_dir = "/logs",
                      .session_root = "/tmp/ringmaster-mpi-0",
                      .session_suffix = SessionSuffix("w1"),
                      .checkpoint_root = ""};
  EXPECT_EQ(layout.MpsDir(), "/tmp/ringmaster-mpi-0/mps" + SessionSuffix("w1"));
  EXPECT_NE(layout.MpsDir(), (WorkerLayout{.log_dir = "/logs",
                                           .session_root = "/tmp/ringmaster-mpi-0",
                                           .session_suffix = SessionSuffix("w2"),
                                           .checkpoint_root = ""})
                                 .MpsDir());
  EXPECT_TRUE(layout.IsOwnSessionBase("mps" + SessionSuffix("w1")));
}

TEST(GpuShareTest, SharedRankContainerMountsThePipesAndPassesItsVariables) {
  Assignment a = QuarterGpuJob();
  a.image = JobImage();
  a.image->reference = "registry.local:5000/train:1";
  const std::string digest = "sha256:" + std::string(64, 'a');
  ContainerHost host;
  host.worker_id = "w1";
  host.mps_pipe_directory = kPipe;
  absl::StatusOr<ContainerRun> run = PlanRankContainer(a, 0, digest, host);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->mounts, Contains(ContainerMount{kPipe, kPipe, false}));
  const auto rank_env = RankEnvironment(a, 0, RealGpus(kPipe));
  const std::vector<std::string> names = ContainerEnvNames(rank_env, rank_env);
  for (const char* name : {kGpuShareEnv, kGpuMemoryEnv, kMpsPipeDirectoryEnv,
                           kMpsActiveThreadPercentageEnv, kMpsPinnedDeviceMemLimitEnv}) {
    EXPECT_THAT(names, Contains(std::string(name)));
  }
  // A whole-GPU job's container is no MPS client: no pipes inside.
  a.gpu_share = 0;
  run = PlanRankContainer(a, 0, digest, host);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->mounts, Not(Contains(ContainerMount{kPipe, kPipe, false})));
  // Nor is one on simulated GPUs.
  a.gpu_share = 250;
  host.simulated_gpus = true;
  run = PlanRankContainer(a, 0, digest, host);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->mounts, IsEmpty());
}

}  // namespace
}  // namespace ringmaster::worker
