// ImagePuller with a team's registry credentials, against a fake runtime (a shell script that
// records its command line and the auth file it was given, and answers as a registry would).
#include "worker/image_puller.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "s3cret-t0ken";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ImagePullerAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("image-puller-", getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    // `pull`: records argv and the auth file's mode and content, then succeeds when the file
    // holds the right credentials (or fails as a registry that wants them). `image inspect`:
    // answers an id and a digest.
    runtime_ = (dir_ / "fake-podman").string();
    std::ofstream script(runtime_);
    script << "#!/bin/sh\n"
           << "D=" << dir_.string() << "\n"
           << "if [ \"$1\" = pull ]; then\n"
           << "  echo \"$@\" > $D/argv\n"
           << "  auth=''\n"
           << "  while [ $# -gt 0 ]; do\n"
           << "    if [ \"$1\" = --authfile ]; then auth=\"$2\"; fi\n"
           << "    shift\n"
           << "  done\n"
           << "  if [ -n \"$auth\" ]; then\n"
           << "    echo \"$auth\" > $D/auth-path\n"
           << "    stat -c %a \"$auth\" > $D/auth-mode\n"
           << "    cat \"$auth\" > $D/auth-content\n"
           << "    if grep -q " << absl::Base64Escape(absl::StrCat("robot:", kSecret))
           << " \"$auth\"; then exit 0; fi\n"
           << "  fi\n"
           << "  echo 'Error: initializing source docker://x: reading manifest 1 in x: "
              "unauthorized: authentication required' >&2\n"
           << "  exit 125\n"
           << "fi\n"
           << "if [ \"$1\" = image ] && [ \"$2\" = inspect ]; then\n"
           << "  echo \"abc sha256:" << std::string(64, 'a') << "\"; exit 0\n"
           << "fi\n"
           << "exit 1\n";
    script.close();
    std::filesystem::permissions(runtime_, std::filesystem::perms::owner_all);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ImagePullerOptions Options() {
    ImagePullerOptions options;
    options.runtime = runtime_;
    options.timeout = std::chrono::seconds(30);
    options.env = {{"PATH", "/usr/bin:/bin"}};
    options.auth_dir = (dir_ / "registry-auth").string();
    return options;
  }

  std::filesystem::path dir_;
  std::string runtime_;
};

TEST_F(ImagePullerAuthTest, ATeamsCredentialGoesInAPrivateAuthFileThatIsRemovedAfterThePull) {
  ImagePuller puller(Options());
  const std::string image = "registry.example.com:5000/team/train:1";
  auto digest = puller.Wait(image, "j-1", std::chrono::seconds(30),
                            RegistryAuth{"registry.example.com:5000", "robot", kSecret});
  ASSERT_TRUE(digest.ok()) << digest.status();
  const std::string argv = Read((dir_ / "argv").string());
  EXPECT_THAT(argv, HasSubstr("--authfile"));
  EXPECT_THAT(argv, Not(HasSubstr(kSecret)));
  EXPECT_THAT(argv, Not(HasSubstr("robot")));
  EXPECT_EQ(Read((dir_ / "auth-mode").string()), "600\n");
  EXPECT_EQ(Read((dir_ / "auth-content").string()),
            AuthFileContent("registry.example.com:5000",
                            RegistryAuth{"registry.example.com:5000", "robot", kSecret}));
  std::string path = Read((dir_ / "auth-path").string());
  path.pop_back();
  EXPECT_FALSE(std::filesystem::exists(path)) << path;
  struct stat st {};
  ASSERT_EQ(stat((dir_ / "registry-auth").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(ImagePullerAuthTest, ARefusedCredentialFailsNamingTheImageAndAuthenticationNotTheSecret) {
  ImagePuller puller(Options());
  const std::string image = "registry.example.com/team/train:1";
  auto refused = puller.Wait(image, "j-2", std::chrono::seconds(30),
                             RegistryAuth{"registry.example.com", "robot", "wrong-secret"});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  const std::string message(refused.status().message());
  EXPECT_THAT(message, HasSubstr(image));
  EXPECT_THAT(message, HasSubstr("authentication failed at registry registry.example.com"));
  EXPECT_THAT(message, HasSubstr("as user robot"));
  EXPECT_THAT(message, Not(HasSubstr("wrong-secret")));
  std::string path = Read((dir_ / "auth-path").string());
  path.pop_back();
  EXPECT_FALSE(std::filesystem::exists(path)) << path;
}

TEST_F(ImagePullerAuthTest, WithoutACredentialTheFailureSaysTheTeamHasNone) {
  ImagePuller puller(Options());
  const std::string image = "registry.example.com/team/train:1";
  auto refused = puller.Wait(image, "j-3", std::chrono::seconds(30));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("authentication failed: registry registry.example.com wants credentials, "
                        "and the job's team has none for it"));
  EXPECT_THAT(Read((dir_ / "argv").string()), Not(HasSubstr("--authfile")));
}

TEST_F(ImagePullerAuthTest, ACredentialForAnotherRegistryIsNotUsed) {
  ImagePuller puller(Options());
  auto refused = puller.Wait("ghcr.io/team/train:1", "j-4", std::chrono::seconds(30),
                             RegistryAuth{"registry.example.com", "robot", kSecret});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(Read((dir_ / "argv").string()), Not(HasSubstr("--authfile")));
}

// The scheduler could not read the team's credential (another secrets key, an altered value):
// the pull goes without one, and its failure says so, how to mend it, and never "has none".
TEST_F(ImagePullerAuthTest, ACredentialTheSchedulerCannotReadIsNamedInTheFailureNotUsed) {
  ImagePuller puller(Options());
  const std::string image = "registry.example.com/team/train:1";
  const std::string problem =
      "the stored secret cannot be read: the value was sealed with another secrets key (key id "
      "0badc0de; this scheduler's key id is 12345678)";
  auto refused = puller.Wait(image, "j-5", std::chrono::seconds(30),
                             RegistryAuth{.registry = "registry.example.com",
                                          .username = "robot",
                                          .secret = "",
                                          .problem = problem});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  const std::string message(refused.status().message());
  EXPECT_THAT(message, HasSubstr(image));
  EXPECT_THAT(message, HasSubstr("the job's team has a credential for registry "
                                 "registry.example.com (user robot), but the scheduler could not "
                                 "read it"));
  EXPECT_THAT(message, HasSubstr(problem));
  EXPECT_THAT(message, HasSubstr("setting it again with `ringctl registry set "
                                 "registry.example.com` mends it"));
  EXPECT_THAT(message, Not(HasSubstr("has none")));
  EXPECT_THAT(Read((dir_ / "argv").string()), Not(HasSubstr("--authfile")));
}

TEST(ImagePullerTest, TheRegistryOfAReferenceIsSpelledAsInIt) {
  EXPECT_EQ(RegistryOfReference("Registry.Example.com:5000/a/b:1"), "Registry.Example.com:5000");
  EXPECT_EQ(RegistryOfReference("localhost/a"), "localhost");
  EXPECT_EQ(RegistryOfReference("pytorch/pytorch"), "docker.io");
  EXPECT_EQ(RegistryOfReference("ubuntu:24.04"), "docker.io");
}

TEST(ImagePullerTest, TheAuthFileHasOneRegistryAndTheBase64OfUserAndSecret) {
  EXPECT_EQ(AuthFileContent("ghcr.io", RegistryAuth{"ghcr.io", "u", "p:w"}),
            "{\"auths\":{\"ghcr.io\":{\"auth\":\"dTpwOnc=\"}}}\n");
}

}  // namespace
}  // namespace ringmaster::worker
