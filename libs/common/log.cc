#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <thread>

#include "common/mutex.h"

namespace ringmaster {
namespace {
std::atomic<LogLevel> g_min_level{LogLevel::kInfo};
Mutex g_mu;  // one write to stderr at a time

// The queue of StartAsyncLog. Allocated once and never freed: threads may log during exit.
struct AsyncLog {
  Mutex mu;
  CondVar cv;
  std::deque<std::string> lines ABSL_GUARDED_BY(mu);
  size_t dropped ABSL_GUARDED_BY(mu) = 0;
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::thread writer;
};
AsyncLog* g_async = nullptr;  // set once, under g_start_mu
Mutex g_start_mu;
std::atomic<bool> g_async_on{false};

void Write(const std::string& text) {
  MutexLock lock(&g_mu);
  std::fwrite(text.data(), 1, text.size(), stderr);
}

void WriterLoop(AsyncLog* log) {
  MutexLock lock(&log->mu);
  while (true) {
    log->cv.Wait(&log->mu, [log]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(log->mu) {
      return log->stop || !log->lines.empty();
    });
    if (log->lines.empty() && log->stop) return;
    std::deque<std::string> batch;
    batch.swap(log->lines);
    const size_t dropped = log->dropped;
    log->dropped = 0;
    lock.Unlock();
    std::string text;
    for (const std::string& line : batch) text += line;
    if (dropped > 0) text += std::to_string(dropped) + " log lines dropped (stderr too slow)\n";
    Write(text);
    lock.Lock();
  }
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarning: return "W";
    case LogLevel::kError: return "E";
  }
  return "?";
}
}  // namespace

void SetMinLogLevel(LogLevel level) { g_min_level = level; }
LogLevel MinLogLevel() { return g_min_level; }

void LogLine(LogLevel level, const char* file, int line, const std::string& message) {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  char head[96];
  std::snprintf(head, sizeof(head), "%s%s.%03dZ %s:%d] ", LevelName(level), stamp, ms, base, line);
  std::string text = head;
  text += message;
  text += '\n';
  if (g_async_on.load(std::memory_order_acquire)) {
    AsyncLog& log = *g_async;
    bool queued = false;
    bool was_empty = false;
    {
      MutexLock lock(&log.mu);
      if (!log.stop) {
        if (log.lines.size() >= kMaxQueuedLogLines) {
          ++log.dropped;
          return;
        }
        was_empty = log.lines.empty();
        log.lines.push_back(std::move(text));
        queued = true;
      }
    }
    if (queued) {
      // Only an empty queue has a writer waiting for it.
      if (was_empty) log.cv.NotifyOne();
      return;
    }
  }
  Write(text);
}

void StartAsyncLog() {
  MutexLock start(&g_start_mu);
  if (g_async_on.load()) return;
  if (g_async == nullptr) {
    g_async = new AsyncLog();
    std::atexit(StopAsyncLog);
  }
  {
    MutexLock lock(&g_async->mu);
    g_async->stop = false;
  }
  g_async->writer = std::thread(WriterLoop, g_async);
  g_async_on.store(true, std::memory_order_release);
}

void StopAsyncLog() {
  MutexLock start(&g_start_mu);
  if (!g_async_on.load()) return;
  {
    MutexLock lock(&g_async->mu);
    g_async->stop = true;
  }
  g_async->cv.NotifyOne();
  g_async->writer.join();
  g_async_on.store(false, std::memory_order_release);
}

}  // namespace ringmaster
