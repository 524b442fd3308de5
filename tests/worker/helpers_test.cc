// The worker's start-up check of its helper programs and libraries (host/helpers.h): the
// regression of a quickstart that did not build ringmaster-check, after which every command
// job failed with mpirun's banner instead of the worker saying what was missing.
#include "worker/host/helpers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

class HelpersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/ringmaster-helpers-XXXXXX";
    ASSERT_NE(mkdtemp(templ), nullptr);
    dir_ = templ;
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }

  std::string Make(const std::string& name, mode_t mode) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n";
    chmod(path.c_str(), mode);
    return path;
  }
  // Every helper of a worker whose binaries all sit in dir_ (as the platform's install puts
  // them), mpirun found on `dir_` as PATH.
  void MakeAll() {
    for (const char* program : {"mpirun", "ringmaster-rsh", "ringmaster-rank", "ringmaster-train",
                                "ringmaster-check", "ringmaster-progress"}) {
      Make(program, 0755);
    }
    Make("libringmaster_pmpi.so", 0644);
    Make("libringmaster_nccl.so", 0644);
  }
  std::vector<Helper> Helpers() {
    return WorkerHelpers("mpirun", dir_ + "/ringmaster-rsh", dir_ + "/ringmaster-rank",
                         dir_ + "/ringmaster-train", dir_ + "/ringmaster-check");
  }

  std::string dir_;
};

TEST_F(HelpersTest, AWorkerWithEveryHelperStarts) {
  MakeAll();
  EXPECT_TRUE(CheckHelpers(Helpers(), "/nonexistent:" + dir_).ok());
}

TEST_F(HelpersTest, AMissingCheckBinaryNamesItsPathAndFlag) {
  MakeAll();
  ASSERT_EQ(unlink((dir_ + "/ringmaster-check").c_str()), 0);
  absl::Status s = CheckHelpers(Helpers(), dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("1 is missing"), HasSubstr(dir_ + "/ringmaster-check"),
                    HasSubstr("No such file"), HasSubstr("--check-binary"),
                    HasSubstr("RINGMASTER_CHECK_BINARY"), Not(HasSubstr("ringmaster-train ("))));
}

TEST_F(HelpersTest, AProgramWithoutAnExecuteBitIsRefused) {
  MakeAll();
  Make("ringmaster-train", 0644);
  absl::Status s = CheckHelpers(Helpers(), dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(dir_ + "/ringmaster-train"), HasSubstr("not executable"),
                                 HasSubstr("--train-binary")));
}

TEST_F(HelpersTest, TheCountersAndProgressAreLookedForBesideTheRankWrapper) {
  MakeAll();
  ASSERT_EQ(unlink((dir_ + "/libringmaster_pmpi.so").c_str()), 0);
  ASSERT_EQ(unlink((dir_ + "/ringmaster-progress").c_str()), 0);
  absl::Status s = CheckHelpers(Helpers(), dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("2 are missing"), HasSubstr(dir_ + "/libringmaster_pmpi.so"),
                    HasSubstr(dir_ + "/ringmaster-progress"), HasSubstr("beside ringmaster-rank")));
}

TEST_F(HelpersTest, ABareNameIsLookedUpOnPath) {
  MakeAll();
  EXPECT_TRUE(CheckHelpers(Helpers(), dir_).ok());
  absl::Status s = CheckHelpers(Helpers(), "/nonexistent");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("mpirun (launches every job) at mpirun: not found on "
                                           "PATH"),
                                 HasSubstr("--mpirun")));
}

TEST_F(HelpersTest, ADirectoryIsNotAHelper) {
  MakeAll();
  ASSERT_EQ(unlink((dir_ + "/ringmaster-check").c_str()), 0);
  ASSERT_EQ(mkdir((dir_ + "/ringmaster-check").c_str(), 0755), 0);
  absl::Status s = CheckHelpers(Helpers(), dir_);
  EXPECT_THAT(s.message(), HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace ringmaster::worker
