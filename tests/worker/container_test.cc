// core/container.h: image references, volume paths, what enters a container, the runtime's
// command line.
#include "worker/core/container.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/core/image_cache.h"

namespace ringmaster::worker {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kDigest = "sha256:" + std::string(64, 'a');

TEST(ImageReferenceTest, SplitsRegistryNameTagAndDigest) {
  auto ref = ParseImageReference("registry.local:5000/team/pytorch:2.5");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->repository, "registry.local:5000/team/pytorch");
  EXPECT_EQ(ref->tag, "2.5");
  EXPECT_EQ(ref->digest, "");
  ref = ParseImageReference("127.0.0.1:5000/team/mpi@" + kDigest);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->repository, "127.0.0.1:5000/team/mpi");
  EXPECT_EQ(ref->digest, kDigest);
  EXPECT_EQ(PinnedImage(*ref, kDigest), "127.0.0.1:5000/team/mpi@" + kDigest);
  ref = ParseImageReference("ubuntu");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->repository, "ubuntu");
}

TEST(ImageReferenceTest, RefusesWhatIsNotAReferenceNamingTheField) {
  for (const std::string& bad :
       {std::string(""), std::string("UPPER/case"), std::string("team/x:"), std::string("a//b"),
        std::string("x:-tag"), std::string("x@sha256:abc"), std::string("x@md5:" + std::string(64, 'a')),
        std::string("reg:99999999/x"), std::string("-x"), std::string("x y"), std::string("x;rm"),
        std::string(513, 'a'), std::string("x:") + std::string(129, 't')}) {
    auto ref = ParseImageReference(bad, "spec.image");
    EXPECT_FALSE(ref.ok()) << bad;
    EXPECT_THAT(std::string(ref.status().message()), HasSubstr("spec.image")) << bad;
  }
}

TEST(ImageReferenceTest, PullsByDigestOncePinned) {
  JobImage image;
  image.reference = "r.local/team/py:1";
  EXPECT_EQ(ImageToPull(image), "r.local/team/py:1");
  image.digest = kDigest;
  EXPECT_EQ(ImageToPull(image), "r.local/team/py@" + kDigest);
}

TEST(VolumePathTest, AVolumeMayNotCoverOrLieInsideTheWorkersOwn) {
  const std::vector<std::string> kept = {"/var/log/ringmaster", "/etc/ringmaster/tls/key.pem"};
  EXPECT_TRUE(CheckVolumePath("data", "/srv/data", kept).ok());
  EXPECT_TRUE(CheckVolumePath("data", "/var/log/ringmaster2", kept).ok());
  auto covers = CheckVolumePath("data", "/var", kept);
  EXPECT_FALSE(covers.ok());
  EXPECT_THAT(std::string(covers.message()), HasSubstr("/var/log/ringmaster"));
  EXPECT_FALSE(CheckVolumePath("data", "/var/log/ringmaster/j-1", kept).ok());
  EXPECT_FALSE(CheckVolumePath("data", "/etc", kept).ok());
  EXPECT_FALSE(CheckVolumePath("root", "/", kept).ok());
}

TEST(ContainerEnvTest, PassesTheRanksAndMpisVariablesButNotTheHosts) {
  const std::map<std::string, std::string> env = {
      {"PATH", "/usr/bin"},         {"HOME", "/root"},          {"LD_LIBRARY_PATH", "/opt"},
      {"TMPDIR", "/tmp/s"},         {"OMPI_COMM_WORLD_RANK", "1"}, {"PMIX_RANK", "1"},
      {"RINGMASTER_JOB_ID", "j-1"}, {"RANK", "1"},              {"MY_SETTING", "x"},
      {"NCCL_DEBUG", "INFO"},       {"LD_PRELOAD", "/b/libringmaster_pmpi.so"},
      {"MASTER_PORT", "29500"},     {"WORLD_SIZE", "4"}};
  const std::map<std::string, std::string> rank_env = {{"RANK", "1"}, {"MY_SETTING", "x"}};
  EXPECT_THAT(ContainerEnvNames(env, rank_env),
              ElementsAre("LD_PRELOAD", "MASTER_PORT", "MY_SETTING", "NCCL_DEBUG",
                          "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "RANK", "RINGMASTER_JOB_ID",
                          "WORLD_SIZE"));
}

Assignment ImageAssignment() {
  Assignment a;
  a.job_id = "j-1";
  a.attempt = 2;
  a.placement = {{0, "w1", "127.0.0.2", 7071, {3, 5}}, {1, "w2", "127.0.0.3", 7071, {}}};
  JobImage image;
  image.reference = "r.local/team/py:1";
  image.mounts = {{"data", "/srv/data", "/data", true}};
  image.shm_size_bytes = 1 << 30;
  image.workdir = "/work";
  a.image = image;
  return a;
}

TEST(PlanRankContainerTest, PassesOnlyTheRanksOwnGpusNumberedFromZero) {
  ContainerHost host;
  host.worker_id = "w1";
  host.user = "1000:1000";
  host.control_devices = {"/dev/nvidiactl"};
  host.driver_mounts = {{"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                         "/usr/lib/x86_64-linux-gnu/libcuda.so.1", true}};
  host.session_dir = "/tmp/rm/j-1.2";
  host.platform_mounts = {{"/tmp/rm/j-1.2", "/tmp/rm/j-1.2", false}};
  auto run = PlanRankContainer(ImageAssignment(), 0, kDigest, host);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->image, "r.local/team/py@" + kDigest);
  EXPECT_EQ(run->name, "rm-j-1-2-0");
  EXPECT_THAT(run->devices, ElementsAre("/dev/nvidia3", "/dev/nvidia5", "/dev/nvidiactl"));
  EXPECT_EQ(run->env_values.at("CUDA_VISIBLE_DEVICES"), "0,1");
  // A private /dev/shm: Open MPI's shared memory moves to the session directory.
  EXPECT_EQ(run->env_values.at("OMPI_MCA_btl_vader_backing_directory"), "/tmp/rm/j-1.2");
  EXPECT_EQ(run->labels.at(kWorkerLabel), "w1");
  EXPECT_THAT(run->mounts, Contains(ContainerMount{"/srv/data", "/data", true}));

  // A CPU rank gets no device at all.
  auto cpu = PlanRankContainer(ImageAssignment(), 1, kDigest, host);
  ASSERT_TRUE(cpu.ok());
  EXPECT_TRUE(cpu->devices.empty());
  EXPECT_EQ(cpu->env_values.count("CUDA_VISIBLE_DEVICES"), 0u);

  EXPECT_FALSE(PlanRankContainer(ImageAssignment(), 0, "sha256:short", host).ok());

  // A MIG instance cannot be passed into a container yet: refused, naming it.
  host.mig_indices = {5};
  auto mig = PlanRankContainer(ImageAssignment(), 0, kDigest, host);
  EXPECT_EQ(mig.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(mig.status().message(), HasSubstr("GPU 5 of worker w1 is a MIG instance"));
}

TEST(OpenMpiVersionTest, ReadsMpirunsVersionLine) {
  EXPECT_EQ(OpenMpiVersion("mpirun (Open MPI) 4.1.4\n\nReport bugs to ..."), "4.1.4");
  EXPECT_EQ(OpenMpiVersion("HYDRA build details:"), "");
}

TEST(ContainerRunArgvTest, HostNamespacesNoPrivilegesAndTheProgramLast) {
  ContainerRun run;
  run.image = "r.local/team/py@" + kDigest;
  run.name = "rm-j-1-2-0";
  run.labels = {{"ringmaster.worker", "w1"}};
  run.mounts = {{"/srv/data", "/data", true}};
  run.user = "1000:1000";
  run.shm_size_bytes = 8 << 20;
  run.env_names = {"RANK", "CUDA_VISIBLE_DEVICES"};
  run.env_values = {{"CUDA_VISIBLE_DEVICES", "0"}};
  run.program = {"python3", "-c", "print(1)"};
  const std::vector<std::string> argv = ContainerRunArgv(run);
  EXPECT_THAT(argv, Contains("--network=host"));
  EXPECT_THAT(argv, Contains("--ipc=host"));
  EXPECT_THAT(argv, Contains("--pid=host"));
  EXPECT_THAT(argv, Contains("--cap-drop=all"));
  EXPECT_THAT(argv, Contains("--security-opt=no-new-privileges"));
  EXPECT_THAT(argv, Contains("--pull=never"));
  EXPECT_THAT(argv, Not(Contains("--privileged")));
  EXPECT_THAT(argv, Contains("--user=1000:1000"));
  EXPECT_THAT(argv, Contains("--mount=type=bind,source=/srv/data,destination=/data,ro=true"));
  EXPECT_THAT(argv, Contains("--mount=type=tmpfs,destination=/dev/shm,tmpfs-size=8388608"));
  EXPECT_THAT(argv, Contains("CUDA_VISIBLE_DEVICES=0"));
  // The value planned for the container wins over the rank's own.
  EXPECT_THAT(argv, Not(Contains("CUDA_VISIBLE_DEVICES")));
  const auto image = std::find(argv.begin(), argv.end(), run.image);
  ASSERT_NE(image, argv.end());
  EXPECT_EQ(std::vector<std::string>(image + 1, argv.end()), run.program);
}

TEST(ImageCacheTest, EvictsTheLeastRecentlyUsedUntilWithinTheBoundKeepingTheNewest) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  std::vector<CachedImage> images = {
      {"new", 400, t0 + std::chrono::seconds(30)},
      {"old", 300, t0},
      {"mid", 300, t0 + std::chrono::seconds(10)},
      {"unknown", 100, std::nullopt},
  };
  // 1100 bytes against a bound of 500: the image of unknown use goes first, then the oldest.
  EXPECT_THAT(ImagesToEvict(images, 500, {"new"}), ElementsAre("unknown", "old", "mid"));
  EXPECT_THAT(ImagesToEvict(images, 800, {"new"}), ElementsAre("unknown", "old"));
  EXPECT_THAT(ImagesToEvict(images, 2000, {}), ::testing::IsEmpty());
  // What is kept stays even when the bound cannot be met without it.
  EXPECT_THAT(ImagesToEvict(images, 0, {"new", "mid"}), ElementsAre("unknown", "old"));
}

}  // namespace
}  // namespace ringmaster::worker
