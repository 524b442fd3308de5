// The worker's host layer: files, /proc and pipes read and written without exceptions, and
// the MASTER_PORT pool. Regressions of a worker that died of std::ios_base::failure while
// reading /proc of a process that had just exited.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/host/file_io.h"
#include "worker/host/ports.h"
#include "worker/host/process.h"
#include "worker/host/users.h"

namespace ringmaster::worker {
namespace {

using ::testing::HasSubstr;

// A child that waits to be killed.
pid_t StartSleeper() {
  const pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

std::string TempDir() {
  std::string templ = ::testing::TempDir() + "worker-host-XXXXXX";
  EXPECT_NE(mkdtemp(templ.data()), nullptr);
  return templ;
}

class FileIoTest : public ::testing::Test {
 protected:
  // Writes to a pipe without a reader must fail with EPIPE, not kill the test, as in the worker.
  void SetUp() override { previous_ = std::signal(SIGPIPE, SIG_IGN); }
  void TearDown() override { std::signal(SIGPIPE, previous_); }

 private:
  void (*previous_)(int) = SIG_DFL;
};

TEST_F(FileIoTest, ReadingProcOfAProcessThatExitedAfterOpenIsNotFoundNotAnException) {
  // The race that killed a worker: /proc/PID/stat opened, the process exits and is reaped,
  // then the read fails with ESRCH (std::ifstream threw on it).
  const pid_t pid = StartSleeper();
  ASSERT_GT(pid, 0);
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  kill(pid, SIGKILL);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  absl::StatusOr<std::string> read = ReadFd(fd, path, 4096);
  close(fd);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(path));
}

TEST_F(FileIoTest, StdIfstreamThrowsOnTheSameReadErrorWhichIsWhyTheWorkerDoesNotUseIt) {
  // Keeps the reason for file_io.h honest: libstdc++'s filebuf throws on a read error
  // (here EISDIR) although no exception was asked for in the stream's mask.
  std::ifstream in("/proc/self");
  ASSERT_TRUE(in.is_open());
  EXPECT_ANY_THROW({
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  });
}

TEST_F(FileIoTest, ReadErrorOfAFileIsAStatus) {
  absl::StatusOr<std::string> read = ReadFileToString("/proc/self");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("Is a directory"));
}

TEST_F(FileIoTest, RegularFileReadRefusesLinksFifosAndDevices) {
  const std::string path = TempDir() + "/result";
  ASSERT_EQ(symlink("/etc/passwd", path.c_str()), 0);
  absl::StatusOr<std::string> read = ReadRegularFile(path, 4096);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << read.status();
  ASSERT_EQ(unlink(path.c_str()), 0);
  ASSERT_EQ(mkfifo(path.c_str(), 0644), 0);  // no writer: a blocking open would never return
  EXPECT_EQ(ReadRegularFile(path, 4096).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(unlink(path.c_str()), 0);
  EXPECT_EQ(ReadRegularFile("/dev/zero", 4096).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::ofstream(path) << "busbw=1\n";
  read = ReadRegularFile(path, 4096);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "busbw=1\n");
}

TEST_F(FileIoTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadFileToString("/proc/999999999/stat").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadFileTail("/nonexistent/mpirun.log", 100).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(FileIoTest, ReadsAWholeFileAndCutsAtTheLimit) {
  const std::string dir = TempDir();
  const std::string path = dir + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "hello\nworld\n").ok());
  EXPECT_EQ(*ReadFileToString(path), "hello\nworld\n");
  EXPECT_EQ(*ReadFileToString(path, 5), "hello");
}

TEST_F(FileIoTest, TailStartsAtALineAndDropsTrailingNewlines) {
  const std::string dir = TempDir();
  const std::string path = dir + "/log";
  ASSERT_TRUE(WriteFileAtomically(path, "first line\nsecond line\nthird\n\n").ok());
  EXPECT_EQ(*ReadFileTail(path, 15), "third");
  EXPECT_EQ(*ReadFileTail(path, 1000), "first line\nsecond line\nthird");
}

TEST_F(FileIoTest, WriteToAClosedPipeIsFailedPreconditionNotSigpipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  absl::Status s = WriteAllToFd(fds[1], "data", "orted's pipe");
  close(fds[1]);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("orted's pipe"));
}

TEST_F(FileIoTest, WriteToAFullDiskIsResourceExhausted) {
  // /dev/full answers every write with ENOSPC.
  const int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  absl::Status s = WriteAllToFd(fd, "a log line\n", "rank-0.log");
  close(fd);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("rank-0.log"));
}

TEST_F(FileIoTest, AtomicWriteThatCannotCreateTheFileLeavesNothing) {
  const std::string dir = TempDir();
  absl::Status s = WriteFileAtomically(dir + "/missing/hostfile", "127.0.0.2 slots=1\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  ASSERT_TRUE(WriteFileAtomically(dir + "/hostfile", "old\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/hostfile", "new\n").ok());
  EXPECT_EQ(*ReadFileToString(dir + "/hostfile"), "new\n");
  EXPECT_EQ(access((dir + "/hostfile.tmp").c_str(), F_OK), -1);
}

TEST(ProcessTest, ParsesStatWhoseCommandNameHoldsSpacesAndParentheses) {
  char state = 0;
  pid_t session = 0;
  ASSERT_TRUE(ParseProcStat("42 (a) b (c)) S 1 40 39 0 -1 4194560", &state, &session));
  EXPECT_EQ(state, 'S');
  EXPECT_EQ(session, 39);
  EXPECT_FALSE(ParseProcStat("", &state, &session));
  EXPECT_FALSE(ParseProcStat("42 (cut", &state, &session));
  EXPECT_FALSE(ParseProcStat("42 (x) S 1 2", &state, &session));
  EXPECT_FALSE(ParseProcStat("42 (x) S 1 2 notanumber", &state, &session));
}

TEST(ProcessTest, ReadsTheStartTimeOfAStatLineAndOfThisProcess) {
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
  // cutime cstime priority nice threads itrealvalue starttime ...
  EXPECT_EQ(ProcStartTicks("7 (a) b) S 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 123456 999"), 123456u);
  EXPECT_EQ(ProcStartTicks("7 (a) S 1 7 7"), std::nullopt);
  EXPECT_EQ(ProcStartTicks(""), std::nullopt);
  std::ifstream self("/proc/self/stat");
  std::string line;
  std::getline(self, line);
  std::optional<uint64_t> mine = ProcStartTicks(line);
  ASSERT_TRUE(mine.has_value()) << line;
  EXPECT_GT(*mine, 0u);
  EXPECT_GE(BootTicksNow(), *mine) << "the same clock";
  // A process started after this one is not older than it, nor than the clock before its start
  // (within a tick of rounding).
  const uint64_t before = BootTicksNow();
  const pid_t child = StartSleeper();
  std::ifstream child_stat(absl::StrCat("/proc/", child, "/stat"));
  std::getline(child_stat, line);
  kill(child, SIGKILL);
  WaitForExit(child);
  EXPECT_GE(ProcStartTicks(line).value_or(0), *mine);
  EXPECT_GE(ProcStartTicks(line).value_or(0) + 1, before);
}

TEST(ProcessTest, ProcessAliveIsFalseForAZombieAndAReapedProcess) {
  const pid_t pid = StartSleeper();
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(ProcessAlive(pid));
  kill(pid, SIGKILL);
  // A zombie until reaped.
  for (int i = 0; i < 200 && ProcessAlive(pid); ++i) usleep(5000);
  EXPECT_FALSE(ProcessAlive(pid));
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  EXPECT_FALSE(ProcessAlive(pid));
}

TEST(ProcessTest, ChildrenOfThisProcessListsAChildUntilItIsReaped) {
  const pid_t pid = StartSleeper();
  ASSERT_GT(pid, 0);
  std::optional<std::vector<pid_t>> children = ChildrenOfThisProcess();
  ASSERT_TRUE(children.has_value()) << "this kernel cannot list children";
  EXPECT_THAT(*children, ::testing::Contains(pid));
  kill(pid, SIGKILL);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  EXPECT_THAT(ChildrenOfThisProcess().value_or(std::vector<pid_t>{}),
              ::testing::Not(::testing::Contains(pid)));
}

TEST(ProcessTest, FindProcessesSurvivesProcessesExitingDuringTheScan) {
  // Children that start and exit all the time while /proc is scanned by session and by
  // environment: every read of a vanishing entry must come back as "not ours".
  std::atomic<bool> stop{false};
  std::atomic<int> spawned{0};
  std::thread churn([&] {
    while (!stop) {
      SpawnOptions spawn;
      spawn.argv = {"/bin/true"};
      spawn.env = {{"RINGMASTER_JOB_ID", "churn"}};
      absl::StatusOr<Spawned> child = Spawn(spawn);
      if (!child.ok()) continue;
      WaitForExit(child->pid);
      ++spawned;
    }
  });
  ProcessSelector selector;
  selector.env_tags = {{"RINGMASTER_JOB_ID", "nobody-has-this"}};
  selector.sessions = {1};
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  int scans = 0;
  while (std::chrono::steady_clock::now() < until) {
    for (pid_t pid : FindProcesses(selector)) EXPECT_NE(pid, getpid());
    ++scans;
  }
  stop = true;
  churn.join();
  EXPECT_GT(scans, 0);
  EXPECT_GT(spawned.load(), 0);
}

// --- MASTER_PORT pool.

// A listening socket on 127.0.0.1:port; -1 when the port is taken.
int Listen(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A range of `n` ports nothing on this machine listens on (from below the ephemeral range).
int FreeRange(int n) {
  for (int first = 20000; first < 30000; first += n) {
    bool all = true;
    for (int p = first; p < first + n && all; ++p) {
      const int fd = Listen(p);
      all = fd >= 0;
      if (fd >= 0) close(fd);
    }
    if (all) return first;
  }
  return -1;
}

// Everything a spawned child printed on stdout, and how it ended.
std::pair<std::string, ExitInfo> RunToEnd(const SpawnOptions& spawn) {
  absl::StatusOr<Spawned> child = Spawn(spawn);
  if (!child.ok()) return {std::string(child.status().message()), ExitInfo{-1, 0}};
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(child->stdout_fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(child->stdout_fd);
  close(child->stderr_fd);
  return {out, WaitForExit(child->pid)};
}

TEST(UsersTest, BareUidNeedsNoPasswdEntryAndGetsItsOwnNumberAsGroup) {
  absl::StatusOr<UnixUser> user = ResolveUnixUser({"61001", ""}, "--run-as t");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_EQ(user->uid, 61001u);
  EXPECT_EQ(user->gid, 61001u);
  EXPECT_EQ(user->groups, std::vector<gid_t>{61001});
  user = ResolveUnixUser({"61001", "61005"}, "--run-as t");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_EQ(user->gid, 61005u);
  EXPECT_EQ(user->groups, std::vector<gid_t>{61005});
}

TEST(UsersTest, NamesMustExistAndRootIsRefused) {
  absl::StatusOr<UnixUser> user = ResolveUnixUser({"nobody", ""}, "--run-as t");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_EQ(user->name, "nobody");
  EXPECT_NE(user->uid, 0u);
  EXPECT_EQ(ResolveUnixUser({"no-such-user-rm", ""}, "--run-as t").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(
      std::string(ResolveUnixUser({"no-such-user-rm", ""}, "--run-as t").status().message()),
      HasSubstr("--run-as t: no user 'no-such-user-rm'"));
  EXPECT_EQ(ResolveUnixUser({"nobody", "no-such-group-rm"}, "--run-as t").status().code(),
            absl::StatusCode::kNotFound);
  for (const RunAsUser& root : {RunAsUser{"root", ""}, RunAsUser{"0", ""}, RunAsUser{"61001", "0"},
                                RunAsUser{"nobody", "root"}}) {
    absl::StatusOr<UnixUser> refused = ResolveUnixUser(root, "--run-as-default");
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << root.user << ":" << root.group;
  }
}

TEST(ProcessTest, SpawnAsAnotherUserSetsUidGidAndGroupsBeforeExec) {
  if (geteuid() != 0) GTEST_SKIP() << "changing the user needs root";
  SpawnOptions spawn;
  spawn.argv = {"sh", "-c", "id -u; id -g; id -G"};
  spawn.env = {{"PATH", "/usr/bin:/bin"}};
  spawn.pipe_output = true;
  spawn.parent_death_signal = SIGKILL;
  spawn.user = UnixUser{61001, 61002, {61002, 61003}, "", ""};
  auto [out, exit] = RunToEnd(spawn);
  EXPECT_EQ(exit.exit_code, 0) << out;
  EXPECT_THAT(out, ::testing::StartsWith("61001\n61002\n61002 61003\n")) << out;
  // Without a user: the worker's own.
  spawn.user.reset();
  std::tie(out, exit) = RunToEnd(spawn);
  EXPECT_THAT(out, ::testing::StartsWith("0\n0\n")) << out;
}

TEST(PortPoolTest, AttemptsNeverShareAPortAndTheRangeRunsOut) {
  const int first = FreeRange(4);
  ASSERT_GT(first, 0);
  PortPool pool(first, first + 3, "127.0.0.1");
  std::set<int> ports;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<int> port = pool.Acquire(absl::StrCat("j/", i));
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_GE(*port, first);
    EXPECT_LE(*port, first + 3);
    ports.insert(*port);
  }
  EXPECT_EQ(ports.size(), 4u);
  absl::StatusOr<int> none = pool.Acquire("j/4");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(none.status().message(), HasSubstr("--master-ports"));
  // The same owner asking again gets its own port back, not a second one.
  EXPECT_EQ(*pool.Acquire("j/2"), *pool.Acquire("j/2"));
  EXPECT_EQ(pool.held(), 4);
}

TEST(PortPoolTest, ReleasedPortIsHandedOutAgainOnlyAfterTheOthers) {
  const int first = FreeRange(3);
  ASSERT_GT(first, 0);
  PortPool pool(first, first + 2, "127.0.0.1");
  const int a = *pool.Acquire("a");
  pool.Release("a");
  const int b = *pool.Acquire("b");
  const int c = *pool.Acquire("c");
  EXPECT_NE(b, a);
  EXPECT_NE(c, a);
  EXPECT_EQ(*pool.Acquire("d"), a);
}

TEST(PortPoolTest, PortAnotherProgramListensOnIsSkipped) {
  const int first = FreeRange(2);
  ASSERT_GT(first, 0);
  const int taken = Listen(first);
  ASSERT_GE(taken, 0);
  PortPool pool(first, first + 1, "127.0.0.1");
  EXPECT_EQ(*pool.Acquire("a"), first + 1);
  absl::StatusOr<int> none = pool.Acquire("b");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(none.status().message(), HasSubstr("1 in use by other programs"));
  close(taken);
}

TEST(PortPoolTest, ConcurrentLaunchesGetDistinctPorts) {
  const int first = FreeRange(64);
  ASSERT_GT(first, 0);
  PortPool pool(first, first + 63, "127.0.0.1");
  std::vector<int> got(64, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < 64; i += 8) {
        absl::StatusOr<int> port = pool.Acquire(absl::StrCat("job-", i, "/0"));
        if (port.ok()) got[i] = *port;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<int> distinct(got.begin(), got.end());
  EXPECT_EQ(distinct.size(), 64u);
  EXPECT_EQ(distinct.count(-1), 0u);
}

TEST(PortPoolTest, ParsesRangesAndRejectsBadOnes) {
  EXPECT_EQ(*ParsePortRange("29500-29999"), std::make_pair(29500, 29999));
  for (const char* bad : {"", "29500", "0-10", "10-5", "1-70000", "a-b", "1-2-3"}) {
    EXPECT_EQ(ParsePortRange(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(PortPoolTest, TellsWhetherARangeMeetsTheKernelsEphemeralPorts) {
  absl::StatusOr<std::string> text = ReadFileToString("/proc/sys/net/ipv4/ip_local_port_range");
  ASSERT_TRUE(text.ok()) << text.status();
  int low = 0, high = 0;
  ASSERT_EQ(std::sscanf(text->c_str(), "%d %d", &low, &high), 2);
  ASSERT_GT(low, 2);
  EXPECT_FALSE(*RangeOverlapsEphemeral(1, low - 1));
  EXPECT_TRUE(*RangeOverlapsEphemeral(low - 1, low));
  EXPECT_TRUE(*RangeOverlapsEphemeral(high, 65535));
  EXPECT_TRUE(*RangeOverlapsEphemeral(1, 65535));
}

}  // namespace
}  // namespace ringmaster::worker
