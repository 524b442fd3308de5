// The worker's MPS control daemon (host/mps_daemon.h) driven against a stand-in for
// nvidia-cuda-mps-control (a shell script that logs its calls and writes the pid file), as no
// GPU is at hand: started once, stopped with `quit`, and the attempt's failure when it cannot
// start.
#include "worker/host/mps_daemon.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/host/file_io.h"
#include "worker/host/process.h"

namespace ringmaster::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string TempDir() {
  std::string templ = ::testing::TempDir() + "worker-mps-XXXXXX";
  EXPECT_NE(mkdtemp(templ.data()), nullptr);
  return templ;
}

// `-d` records its environment's directories and writes the pid file as the daemon does; a
// command on stdin is recorded, and `quit` removes the pid file. `start_exit` != 0: `-d` fails.
std::string WriteFakeControl(const std::string& dir, int start_exit = 0) {
  const std::string path = dir + "/fake-mps-control";
  std::ofstream out(path);
  out << "#!/bin/sh\n"
      << "calls=\"$CUDA_MPS_LOG_DIRECTORY/calls\"\n"
      << "if [ \"$1\" = -d ]; then\n"
      << "  echo \"start pipe=$CUDA_MPS_PIPE_DIRECTORY visible=${CUDA_VISIBLE_DEVICES-unset}\" "
         ">> \"$calls\"\n"
      << "  if [ " << start_exit << " -ne 0 ]; then echo 'no NVIDIA driver' >&2; exit "
      << start_exit << "; fi\n"
      << "  echo $$ > \"$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid\"\n"
      << "  exit 0\n"
      << "fi\n"
      << "read command\n"
      << "echo \"$command\" >> \"$calls\"\n"
      << "[ \"$command\" = quit ] && rm -f "
         "\"$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid\"\n"
      << "exit 0\n";
  out.close();
  chmod(path.c_str(), 0755);
  return path;
}

MpsDaemonOptions Options(const std::string& dir, const std::string& control) {
  MpsDaemonOptions options;
  options.control_binary = control;
  options.dir = dir + "/mps.w1";
  options.env = CurrentEnvironment();
  options.env["CUDA_VISIBLE_DEVICES"] = "3";
  options.worker_id = "w1";
  options.start_timeout = std::chrono::milliseconds(5000);
  return options;
}

std::string Calls(const std::string& dir) {
  absl::StatusOr<std::string> text = ReadFileToString(dir + "/mps.w1/log/calls", 1 << 16);
  return text.ok() ? *text : "";
}

TEST(MpsDaemonTest, StartsOnceWithItsOwnPipesAndEveryDeviceThenQuitsAtStop) {
  const std::string dir = TempDir();
  MpsDaemon daemon(Options(dir, WriteFakeControl(dir)));
  EXPECT_EQ(daemon.PipeDirectory(), "");
  absl::StatusOr<std::string> pipe = daemon.Ensure();
  ASSERT_TRUE(pipe.ok()) << pipe.status();
  EXPECT_EQ(*pipe, dir + "/mps.w1/pipe");
  EXPECT_EQ(daemon.PipeDirectory(), *pipe);
  ASSERT_TRUE(daemon.Ensure().ok());  // running: not started again
  daemon.Stop();
  EXPECT_EQ(daemon.PipeDirectory(), "");
  daemon.Stop();  // once only
  EXPECT_EQ(Calls(dir), "start pipe=" + *pipe + " visible=unset\nquit\n");
}

TEST(MpsDaemonTest, AMissingBinaryFailsNamingTheWorkerAndTheProgram) {
  const std::string dir = TempDir();
  MpsDaemon daemon(Options(dir, dir + "/no-such-mps-control"));
  absl::StatusOr<std::string> pipe = daemon.Ensure();
  EXPECT_EQ(pipe.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(pipe.status().message(), HasSubstr("worker w1"));
  EXPECT_THAT(pipe.status().message(), HasSubstr("no-such-mps-control"));
  EXPECT_THAT(pipe.status().message(), HasSubstr("GPU shares"));
  EXPECT_EQ(daemon.PipeDirectory(), "");
}

TEST(MpsDaemonTest, AFailedStartFailsWithTheDaemonsWordsAndIsTriedAgain) {
  const std::string dir = TempDir();
  MpsDaemon daemon(Options(dir, WriteFakeControl(dir, /*start_exit=*/3)));
  absl::StatusOr<std::string> pipe = daemon.Ensure();
  EXPECT_EQ(pipe.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(pipe.status().message(), HasSubstr("worker w1"));
  EXPECT_THAT(pipe.status().message(), HasSubstr("exited with 3"));
  EXPECT_THAT(pipe.status().message(), HasSubstr("no NVIDIA driver"));
  EXPECT_FALSE(daemon.Ensure().ok());
  daemon.Stop();  // nothing started: no quit
  const std::string calls = Calls(dir);
  EXPECT_EQ(std::count(calls.begin(), calls.end(), '\n'), 2) << calls;
  EXPECT_THAT(calls, Not(HasSubstr("quit")));
}

TEST(MpsDaemonTest, ALeftoverDaemonOfAnEarlierLifeIsToldToQuit) {
  const std::string dir = TempDir();
  const std::string control = WriteFakeControl(dir);
  {
    MpsDaemon earlier(Options(dir, control));
    ASSERT_TRUE(earlier.Ensure().ok());
    // Killed before its Stop: the daemon and its pid file stay.
  }
  MpsDaemon now(Options(dir, control));
  now.StopLeftover();
  EXPECT_THAT(Calls(dir), HasSubstr("quit\n"));
  now.StopLeftover();  // gone now: nothing more
  const std::string calls = Calls(dir);
  EXPECT_EQ(calls.find("quit"), calls.rfind("quit"));
}

}  // namespace
}  // namespace ringmaster::worker
