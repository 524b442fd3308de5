#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "common/mutex.h"

namespace ringmaster {
namespace {
std::atomic<LogLevel> g_min_level{LogLevel::kInfo};
Mutex g_mu;  // one line at a time on stderr

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
  MutexLock lock(&g_mu);
  std::fprintf(stderr, "%s%s.%03dZ %s:%d] %s\n", LevelName(level), stamp, ms, base, line,
               message.c_str());
}

}  // namespace ringmaster
