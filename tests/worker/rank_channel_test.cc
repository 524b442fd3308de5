// The rank channel between a rank's processes and its wrapper, the LD_PRELOAD rule, and the
// PMPI library's promise to be harmless in programs that do not use MPI.
#include "worker/host/rank_channel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "rank/rank_env.h"
#include "worker/core/container.h"

namespace ringmaster::worker {
namespace {

TEST(RankChannelTest, WritersInOtherMappingsAreSeenByTheWrapper) {
  auto channel = RankChannelFile::Create(::testing::TempDir(), "test");
  ASSERT_TRUE(channel.ok()) << channel.status();
  // A second mapping, as ringmaster-progress or the PMPI library opens it.
  rm_rank_channel* writer = rm_rank_channel_open((*channel)->path().c_str());
  ASSERT_NE(writer, nullptr);
  __atomic_fetch_add(&writer->collectives_entered, 3, __ATOMIC_RELAXED);
  __atomic_fetch_add(&writer->collectives_completed, 2, __ATOMIC_RELAXED);
  rm_rank_channel_report_progress(writer, 42, 1, 123.5);
  rm_rank_snapshot s = (*channel)->Read();
  EXPECT_EQ(s.collectives_entered, 3u);
  EXPECT_EQ(s.collectives_completed, 2u);
  EXPECT_EQ(s.progress_step, 42u);
  EXPECT_EQ(s.progress_reports, 1u);
  EXPECT_TRUE(s.has_images_per_second);
  EXPECT_DOUBLE_EQ(s.images_per_second, 123.5);
}

TEST(RankChannelTest, FileIsRemovedWithTheWrapper) {
  std::string path;
  {
    auto channel = RankChannelFile::Create(::testing::TempDir(), "gone");
    ASSERT_TRUE(channel.ok()) << channel.status();
    path = (*channel)->path();
    EXPECT_EQ(access(path.c_str(), F_OK), 0);
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST(RankChannelTest, OpeningAFileThatIsNoChannelFails) {
  const std::string path = ::testing::TempDir() + "/not-a-channel";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(std::string(4096, 'x').c_str(), f);
  std::fclose(f);
  EXPECT_EQ(rm_rank_channel_open(path.c_str()), nullptr);
  EXPECT_EQ(rm_rank_channel_open("/nonexistent/channel"), nullptr);
}

TEST(RankChannelTest, EachChannelGetsItsOwnPrivateFile) {
  auto a = RankChannelFile::Create(::testing::TempDir(), "same");
  auto b = RankChannelFile::Create(::testing::TempDir(), "same");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE((*a)->path(), (*b)->path()) << "a name nobody can guess or plant beforehand";
  struct stat st {};
  ASSERT_EQ(lstat((*a)->path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(RankChannelTest, OpeningASymlinkOrAShortFileFailsInsteadOfFaulting) {
  auto channel = RankChannelFile::Create(::testing::TempDir(), "target");
  ASSERT_TRUE(channel.ok()) << channel.status();
  const std::string link = ::testing::TempDir() + "/channel-link";
  unlink(link.c_str());
  ASSERT_EQ(symlink((*channel)->path().c_str(), link.c_str()), 0);
  EXPECT_EQ(rm_rank_channel_open(link.c_str()), nullptr);
  unlink(link.c_str());
  // Empty: mapping it would succeed and the first read would be SIGBUS.
  const std::string empty = ::testing::TempDir() + "/empty-channel";
  FILE* f = std::fopen(empty.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  EXPECT_EQ(rm_rank_channel_open(empty.c_str()), nullptr);
  EXPECT_EQ(rm_rank_channel_open("/dev/null"), nullptr);
}

TEST(AppendPreloadTest, AppendsAfterWhatTheUserPreloadsAndOnlyOnce) {
  EXPECT_EQ(AppendPreload("", "/x/libpmpi.so"), "/x/libpmpi.so");
  EXPECT_EQ(AppendPreload("/a/libjemalloc.so", "/x/libpmpi.so"), "/a/libjemalloc.so /x/libpmpi.so");
  EXPECT_EQ(AppendPreload("/x/libpmpi.so:/b.so", "/x/libpmpi.so"), "/x/libpmpi.so:/b.so");
}

#ifdef RINGMASTER_PMPI_LIBRARY
// Every symbol bound at load (LD_BIND_NOW): an unresolved MPI reference would fail here.
TEST(PmpiLibraryTest, LoadsIntoAProgramWithoutMpi) {
  const std::string command = std::string("LD_BIND_NOW=1 LD_PRELOAD=") + RINGMASTER_PMPI_LIBRARY +
                              " /bin/sh -c 'echo preloaded' > /dev/null 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Runs tests/worker/programs' nonblocking_collectives as one rank under mpirun with the PMPI
// library preloaded and reporting into `channel_path`; returns its exit status. As root, as the
// CI machine runs it, with mpirun's consent. In a sanitizer build the program links
// AddressSanitizer's runtime, which refuses a library preloaded ahead of it unless told (as the
// rank wrapper tells it), and would count Open MPI's leaks as failures.
int RunNonblockingCollectives(const std::string& channel_path, int in_flight, int rounds,
                              std::string* command) {
  *command = absl::StrCat(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun -np 1 -x ",
      "LD_PRELOAD=", RINGMASTER_PMPI_LIBRARY,
      " -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 -x ", RM_RANK_CHANNEL_ENV, "=",
      channel_path, " ", RINGMASTER_NONBLOCKING_COLLECTIVES, " ", in_flight, " ", rounds,
      " > /dev/null 2>&1");
  return std::system(command->c_str());
}

// Every nonblocking collective a Waitall completes counts as completed, however many it waits
// on: with room for 64 only, a Waitall of 100 left 36 counted as never completed (and their
// requests in the library's table for good).
TEST(PmpiLibraryTest, AWaitallOfManyNonblockingCollectivesCompletesEveryOne) {
  auto channel = RankChannelFile::Create(::testing::TempDir(), "nbc");
  ASSERT_TRUE(channel.ok()) << channel.status();
  constexpr int kInFlight = 100, kRounds = 3;
  std::string command;
  const int status = RunNonblockingCollectives((*channel)->path(), kInFlight, kRounds, &command);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << command;
  const rm_rank_snapshot s = (*channel)->Read();
  EXPECT_EQ(s.collectives_entered, static_cast<uint64_t>(kInFlight * kRounds + 1));
  EXPECT_EQ(s.collectives_completed, s.collectives_entered);
}

// The MPI position: each blocking call (here the Waitall of every round and the final Barrier)
// is counted as entered, and after the last one returns the rank shows as out of MPI, having
// left MPI_Barrier. The nonblocking collectives themselves are not blocking calls.
TEST(PmpiLibraryTest, BlockingCallsAreCountedAndTheLastOneShowsAsLeft) {
  auto channel = RankChannelFile::Create(::testing::TempDir(), "position");
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ((*channel)->MpiState(), 0u);
  constexpr int kInFlight = 2, kRounds = 3;
  std::string command;
  const int status = RunNonblockingCollectives((*channel)->path(), kInFlight, kRounds, &command);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << command;
  const uint64_t state = (*channel)->MpiState();
  EXPECT_EQ(rm_mpi_state_inside(state), 0u);
  EXPECT_EQ(rm_mpi_state_call(state), static_cast<unsigned>(RM_CALL_MPI_Barrier));
  EXPECT_EQ(rm_mpi_state_calls(state), static_cast<uint64_t>(kRounds + 1));
  char unknown[32];
  EXPECT_STREQ(rm_mpi_call_name(rm_mpi_state_call(state), unknown, sizeof(unknown)), "MPI_Barrier");
  EXPECT_STREQ(rm_mpi_call_name(99, unknown, sizeof(unknown)), "MPI call 99");
}

// A rank in a container whose MPI is of another Open MPI release series than the workers'
// mpirun is stopped in MPI_Init with a message that says so; the same series passes.
TEST(PmpiLibraryTest, AnMpiInitOfAnotherOpenMpiSeriesThanTheWorkersIsRefusedSayingSo) {
  auto run = [](const std::string& host_version) {
    const std::string out = absl::StrCat(::testing::TempDir(), "/series.out");
    const std::string command = absl::StrCat(
        "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun -np 1 -x ",
        "LD_PRELOAD=", RINGMASTER_PMPI_LIBRARY,
        " -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 -x ", RM_ENV_HOST_OPEN_MPI, "=",
        host_version, " ", RINGMASTER_NONBLOCKING_COLLECTIVES, " 1 1 > ", out, " 2>&1");
    const int status = std::system(command.c_str());
    std::ifstream in(out);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return std::pair<int, std::string>{WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
  };
  auto [other, other_text] = run("3.1.6");
  EXPECT_NE(other, 0) << other_text;
  EXPECT_THAT(other_text, ::testing::HasSubstr("cannot join the workers' mpirun (Open MPI 3.1.6)"));
  EXPECT_THAT(other_text, ::testing::HasSubstr("needs Open MPI 3.1.x in its image"));
  // The machine's own version (what the workers' mpirun says) passes.
  FILE* p = popen("mpirun --version 2>&1", "r");
  ASSERT_NE(p, nullptr);
  char line[256] = "";
  ASSERT_NE(fgets(line, sizeof(line), p), nullptr);
  pclose(p);
  const std::string own = OpenMpiVersion(line);
  ASSERT_FALSE(own.empty()) << line;
  auto [same, same_text] = run(own);
  EXPECT_EQ(same, 0) << same_text;
}
#endif

}  // namespace
}  // namespace ringmaster::worker
