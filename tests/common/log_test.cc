// The asynchronous log: every line written, in order, from several threads, and a stuck
// stderr (a pipe nobody reads) never blocks a caller.
#include "common/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

// Points stderr at `fd` while it lives.
class StderrTo {
 public:
  explicit StderrTo(int fd) : saved_(dup(STDERR_FILENO)) { dup2(fd, STDERR_FILENO); }
  ~StderrTo() {
    dup2(saved_, STDERR_FILENO);
    close(saved_);
  }

 private:
  int saved_;
};

std::string ReadAll(const std::string& path) {
  std::string out;
  int fd = open(path.c_str(), O_RDONLY);
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

TEST(AsyncLogTest, EveryLineIsWrittenInEachThreadsOrder) {
  const std::string path = ::testing::TempDir() + "/async_log_test.log";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  {
    StderrTo redirect(fd);
    StartAsyncLog();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([t] {
        for (int i = 0; i < 2000; ++i) RM_LOG(kInfo) << "thread " << t << " line " << i;
      });
    }
    for (auto& th : threads) th.join();
    StopAsyncLog();
  }
  close(fd);
  const std::string text = ReadAll(path);
  size_t lines = 0;
  std::vector<int> next(4, 0);
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    ASSERT_NE(end, std::string::npos);
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    int t = -1, i = -1;
    const size_t mark = line.find("] thread ");
    ASSERT_NE(mark, std::string::npos) << line;
    ASSERT_EQ(sscanf(line.c_str() + mark, "] thread %d line %d", &t, &i), 2) << line;
    ASSERT_EQ(i, next[t]) << "thread " << t << " out of order";
    ++next[t];
    ++lines;
  }
  EXPECT_EQ(lines, 8000u);
}

TEST(AsyncLogTest, AStuckStderrDropsLinesInsteadOfBlocking) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  {
    StderrTo redirect(pipe_fds[1]);
    StartAsyncLog();
    // Nobody reads the pipe: the writer blocks once it is full, and the callers must not.
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < kMaxQueuedLogLines + 50'000; ++i) RM_LOG(kInfo) << "line " << i;
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, std::chrono::seconds(30));
    // Unblock the writer so that StopAsyncLog can end it: read until the dropped count shows.
    std::string seen;
    char buf[65536];
    int flags = fcntl(pipe_fds[0], F_GETFL);
    fcntl(pipe_fds[0], F_SETFL, flags | O_NONBLOCK);
    std::thread stopper([] { StopAsyncLog(); });
    while (true) {
      ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
      if (n > 0) {
        seen.append(buf, n);
        continue;
      }
      if (seen.find("log lines dropped") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    stopper.join();
    EXPECT_THAT(seen, ::testing::HasSubstr("line 0\n"));
  }
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

}  // namespace
}  // namespace ringmaster
