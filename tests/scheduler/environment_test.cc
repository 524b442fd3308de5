// A job's environment (core/environment.h): the spec fields' validation with hostile values,
// volumes' validation, the submit's mount rights and the placement's mount resolution.
#include "scheduler/core/environment.h"

#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/core/validation.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::HasSubstr;

JobSpec ImageSpec() {
  JobSpec spec;
  spec.name = "train";
  spec.replicas = 2;
  spec.trainer = TrainerWorkload{};
  spec.image = "registry.example.com:5000/team/pytorch:2.4-cuda12";
  return spec;
}

// INVALID_ARGUMENT whose message starts with "FIELD:" and contains `detail`.
void ExpectInvalid(const JobSpec& spec, const std::string& field, const std::string& detail) {
  auto result = ValidateJobSpec(spec);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_EQ(result.status().message().substr(0, field.size() + 1), field + ":")
      << result.status().message();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(detail));
}

TEST(EnvironmentTest, AcceptsTheReferenceForms) {
  const std::string digest(64, 'a');
  for (const std::string& good : std::vector<std::string>{
           "ubuntu", "ubuntu:24.04", "library/ubuntu", "nvcr.io/nvidia/pytorch:24.05-py3",
           "localhost/train", "localhost:5000/a/b/c:Tag_1", "10.0.0.1:443/x",
           "ghcr.io/org/img@sha256:" + digest, "img:v1@sha256:" + digest, "org/a.b_c-d__e",
           std::string(kMaxImageBytes, 'a')}) {
    JobSpec spec = ImageSpec();
    spec.image = good;
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << good << ": " << ValidateJobSpec(spec).status();
  }
}

TEST(EnvironmentTest, RefusesHostileImageReferences) {
  for (const std::string& bad : std::vector<std::string>{std::string(kMaxImageBytes + 1, 'a'),
                                                         "Ubuntu",
                                                         "ubuntu:",
                                                         ":latest",
                                                         "ubuntu:-x",
                                                         "ubuntu:" + std::string(129, 'a'),
                                                         "ubuntu@sha256:abc",
                                                         "ubuntu@sha256:" + std::string(64, 'A'),
                                                         "ubuntu@md5:" + std::string(64, 'a'),
                                                         "../etc/passwd",
                                                         "a//b",
                                                         "/abs",
                                                         "trailing/",
                                                         "-leading",
                                                         "x/..",
                                                         "reg.io:0/x",
                                                         "reg.io:99999/x",
                                                         "reg.io:http/x",
                                                         "-reg.io/x",
                                                         "ubuntu latest",
                                                         "ubuntu;rm -rf /",
                                                         "ub\nuntu",
                                                         std::string("ub\0untu", 7),
                                                         "ubuntu:tag@",
                                                         "a/b:c/d"}) {
    JobSpec spec = ImageSpec();
    spec.image = bad;
    ExpectInvalid(spec, "image", "");
  }
}

TEST(EnvironmentTest, MountsShmAndWorkdirNeedAnImage) {
  JobSpec spec = ImageSpec();
  spec.image.clear();
  spec.mounts = {{"data", "/data", false}};
  ExpectInvalid(spec, "mounts", "only with image");
  spec.mounts.clear();
  spec.shm_size_bytes = 8LL << 30;
  ExpectInvalid(spec, "shm_size_bytes", "only with image");
  spec.shm_size_bytes = 0;
  spec.workdir = "/work";
  ExpectInvalid(spec, "workdir", "only with image");
  spec.workdir.clear();
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(EnvironmentTest, AcceptsSixteenMountsAndRefusesSeventeen) {
  JobSpec spec = ImageSpec();
  for (int i = 0; i < 16; ++i) spec.mounts.push_back({"v", "/m" + std::to_string(i), i % 2 == 0});
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec).status();
  spec.mounts.push_back({"v", "/m16", false});
  ExpectInvalid(spec, "mounts", "at most 16");
}

TEST(EnvironmentTest, EachBadMountIsNamedByItsIndex) {
  const std::vector<std::pair<std::string, std::string>> bad_paths = {
      {"", "1..1024 bytes"},
      {"relative/path", "absolute"},
      {"/", "must not be '/'"},
      {"/data/", "end with '/'"},
      {"/data//x", "'//'"},
      {"/data/./x", "'.' or '..'"},
      {"/data/..", "'.' or '..'"},
      {"/../etc", "'.' or '..'"},
      {"/proc", "/proc"},
      {"/proc/self/root", "/proc"},
      {"/sys/fs/cgroup", "/sys"},
      {"/dev/shm", "/dev"},
      {"/da\tta", "control characters"},
      {std::string("/da\0ta", 6), "control characters"},
      {"/" + std::string(1024, 'a'), "1..1024 bytes"},
  };
  for (const auto& [path, detail] : bad_paths) {
    JobSpec spec = ImageSpec();
    spec.mounts = {{"a", "/a", false}, {"b", "/b", false}, {"c", path, false}};
    ExpectInvalid(spec, "mounts[2].path", detail);
  }
  for (const std::string& name :
       std::vector<std::string>{"", "Data", "9data", "da_ta", "da/ta", std::string(64, 'a')}) {
    JobSpec spec = ImageSpec();
    spec.mounts = {{"a", "/a", false}, {name, "/b", false}};
    ExpectInvalid(spec, "mounts[1].volume", "volume name");
  }
  // Not below /proc: a sibling that only shares the prefix is fine.
  JobSpec spec = ImageSpec();
  spec.mounts = {{"a", "/processed", false}, {"b", "/devices", false}, {"c", "/system", true}};
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec).status();
}

TEST(EnvironmentTest, TwoMountsCannotShareAPath) {
  JobSpec spec = ImageSpec();
  spec.mounts = {{"a", "/data", false}, {"b", "/other", false}, {"c", "/data", true}};
  ExpectInvalid(spec, "mounts[2].path", "mounts[0]");
}

TEST(EnvironmentTest, ShmSizeIsZeroOrOneMibToSixtyFourGib) {
  for (int64_t good : {int64_t{0}, kMinShmBytes, int64_t{8} << 30, kMaxShmBytes}) {
    JobSpec spec = ImageSpec();
    spec.shm_size_bytes = good;
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << good;
  }
  for (int64_t bad : {int64_t{-1}, int64_t{1}, kMinShmBytes - 1, kMaxShmBytes + 1,
                      std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    JobSpec spec = ImageSpec();
    spec.shm_size_bytes = bad;
    ExpectInvalid(spec, "shm_size_bytes", "1 MiB..64 GiB");
  }
}

TEST(EnvironmentTest, WorkdirIsAContainerPath) {
  JobSpec spec = ImageSpec();
  spec.workdir = "/workspace/run";
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  for (const std::string& bad :
       std::vector<std::string>{"work", "/", "/w/", "/w/../x", "/proc/1"}) {
    spec.workdir = bad;
    ExpectInvalid(spec, "workdir", "");
  }
}

TEST(EnvironmentTest, ImageDigestIsSha256AndLowerCaseHex) {
  EXPECT_TRUE(ValidateImageDigest("sha256:" + std::string(64, 'f'), "d").ok());
  for (const std::string& bad : std::vector<std::string>{
           "", "sha256:", "sha256:" + std::string(63, 'a'), "sha256:" + std::string(65, 'a'),
           "sha256:" + std::string(64, 'A'), "sha512:" + std::string(64, 'a'),
           "sha256:" + std::string(64, 'g'), std::string(71, 'a')}) {
    EXPECT_EQ(ValidateImageDigest(bad, "image_digest").code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

Volume MakeVolume() {
  Volume v;
  v.name = "imagenet";
  v.host_path = "/mnt/datasets/imagenet";
  v.grants = {{"vision", true}, {"audio", false}};
  v.description = "ImageNet 2012, read-only";
  return v;
}

void ExpectVolumeInvalid(const Volume& v, const std::string& field, const std::string& detail) {
  auto result = ValidateVolume(v);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_EQ(result.status().message().substr(0, field.size() + 1), field + ":")
      << result.status().message();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(detail));
}

TEST(EnvironmentTest, ValidVolumeHasItsGrantsSortedByTeam) {
  auto v = ValidateVolume(MakeVolume());
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->grants.size(), 2u);
  EXPECT_EQ(v->grants[0].team, "audio");
  EXPECT_EQ(v->grants[1].team, "vision");
  EXPECT_TRUE(v->grants[1].read_only);
}

TEST(EnvironmentTest, RefusesHostileVolumes) {
  for (const std::string& name : std::vector<std::string>{"", "Imagenet", "1net", "a.b", "a b"}) {
    Volume v = MakeVolume();
    v.name = name;
    ExpectVolumeInvalid(v, "name", "volume name");
  }
  for (const std::string& path :
       std::vector<std::string>{"", "data", "/", "/mnt/", "/mnt//x", "/mnt/../etc", "/etc",
                                "/etc/ssl", "/boot", "/run/secrets", "/var/lib/ringmaster",
                                "/var/lib/ringmaster/certs", "/proc/1", "/sys", "/dev/sda"}) {
    Volume v = MakeVolume();
    v.host_path = path;
    ExpectVolumeInvalid(v, "host_path", "");
  }
  Volume ok = MakeVolume();
  ok.host_path = "/var/lib/ringmaster-data";  // a sibling, not below
  EXPECT_TRUE(ValidateVolume(ok).ok());

  Volume v = MakeVolume();
  v.grants = {{"vision", false}, {"Bad Team", false}};
  ExpectVolumeInvalid(v, "grants[1].team", "");
  v.grants = {{"vision", false}, {"audio", false}, {"vision", true}};
  ExpectVolumeInvalid(v, "grants[2].team", "grants[0]");
  v.grants.clear();
  for (int i = 0; i < 65; ++i) v.grants.push_back({"t" + std::to_string(i), false});
  ExpectVolumeInvalid(v, "grants", "at most 64");
  v = MakeVolume();
  v.description = std::string(257, 'x');
  ExpectVolumeInvalid(v, "description", "at most 256");
}

TEST(EnvironmentTest, MountRightsFollowTheGrants) {
  std::map<std::string, Volume> volumes = {{"imagenet", MakeVolume()}};
  JobSpec spec = ImageSpec();
  spec.mounts = {{"imagenet", "/data", false}};
  EXPECT_TRUE(CheckMountRights(spec, volumes, "audio", false).ok());

  // Granted read-only: must be mounted read-only.
  absl::Status rw = CheckMountRights(spec, volumes, "vision", false);
  EXPECT_EQ(rw.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(rw.message()), HasSubstr("read-only"));
  spec.mounts[0].read_only = true;
  EXPECT_TRUE(CheckMountRights(spec, volumes, "vision", false).ok());

  // Not granted and unknown read the same.
  absl::Status other = CheckMountRights(spec, volumes, "speech", false);
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(other.message()), HasSubstr("mounts[0].volume: volume 'imagenet'"));
  spec.mounts.push_back({"secret", "/secret", true});
  absl::Status unknown = CheckMountRights(spec, volumes, "vision", false);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("mounts[1].volume: volume 'secret' is not "
                                                        "granted to team 'vision'"));

  // Admins mount any volume that exists.
  spec.mounts = {{"imagenet", "/data", false}};
  EXPECT_TRUE(CheckMountRights(spec, volumes, "ops", true).ok());
  spec.mounts.push_back({"secret", "/secret", true});
  EXPECT_EQ(CheckMountRights(spec, volumes, "ops", true).code(), absl::StatusCode::kNotFound);
}

TEST(EnvironmentTest, ResolvesMountsInSpecOrderWithCurrentHostPaths) {
  std::map<std::string, Volume> volumes = {{"imagenet", MakeVolume()}};
  Volume scratch;
  scratch.name = "scratch";
  scratch.host_path = "/scratch";
  volumes["scratch"] = scratch;
  JobSpec spec = ImageSpec();
  spec.mounts = {{"scratch", "/tmp/s", false}, {"imagenet", "/data", true}};
  auto resolved = ResolveMounts(spec, volumes);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  ASSERT_EQ(resolved->size(), 2u);
  EXPECT_EQ((*resolved)[0], (ResolvedMount{"scratch", "/scratch", "/tmp/s", false}));
  EXPECT_EQ((*resolved)[1], (ResolvedMount{"imagenet", "/mnt/datasets/imagenet", "/data", true}));

  volumes.erase("imagenet");
  auto gone = ResolveMounts(spec, volumes);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr("imagenet"));
}

TEST(EnvironmentTest, VolumesAreVisibleToTheirTeamsAndAdmins) {
  const Volume v = MakeVolume();
  EXPECT_TRUE(VolumeVisibleTo(v, "vision", false));
  EXPECT_TRUE(VolumeVisibleTo(v, "ops", true));
  EXPECT_FALSE(VolumeVisibleTo(v, "speech", false));
  JobSpec spec = ImageSpec();
  spec.mounts = {{"imagenet", "/data", true}};
  EXPECT_TRUE(MountsVolume(spec, "imagenet"));
  EXPECT_FALSE(MountsVolume(spec, "scratch"));
}

}  // namespace
}  // namespace ringmaster::scheduler
