// Minimal leveled logging to stderr: one line per call, with a UTC timestamp.
#ifndef RINGMASTER_LIBS_COMMON_LOG_H_
#define RINGMASTER_LIBS_COMMON_LOG_H_

#include <sstream>
#include <string>

namespace ringmaster {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Thread-safe; lines from different threads never interleave.
void LogLine(LogLevel level, const char* file, int line, const std::string& message);
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();

// From here on a log line is queued and written by a thread of its own, so that a caller
// never waits on stderr (a full pipe, a slow terminal): the services log state changes under
// their locks. Lines keep their order. Past kMaxQueuedLogLines waiting, new lines are dropped
// and counted ("N log lines dropped" follows when the writer catches up): a stuck stderr must
// not stop a scheduler. Everything queued is written at exit (atexit) or by StopAsyncLog.
inline constexpr size_t kMaxQueuedLogLines = 100'000;
void StartAsyncLog();
// Writes what is queued and goes back to writing on the caller's thread.
void StopAsyncLog();

namespace internal {
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  ~LogMessage() { LogLine(level_, file_, line_, stream_.str()); }
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};
// Lets RM_LOG be one expression, so it is safe in an unbraced if/else.
struct Voidify {
  void operator&(std::ostream&) {}
};
}  // namespace internal

}  // namespace ringmaster

#define RM_LOG(level)                                                                 \
  (::ringmaster::LogLevel::level < ::ringmaster::MinLogLevel())                       \
      ? (void)0                                                                       \
      : ::ringmaster::internal::Voidify() &                                           \
            ::ringmaster::internal::LogMessage(::ringmaster::LogLevel::level, __FILE__, \
                                               __LINE__)                              \
                .stream()

#endif  // RINGMASTER_LIBS_COMMON_LOG_H_
