#include "common/checkpoint_metadata.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster {

absl::StatusOr<CheckpointMetadata> ParseCheckpointMetadata(absl::string_view text) {
  CheckpointMetadata metadata;
  bool have_step = false;
  bool have_time = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint metadata: line '", line, "' is not key=value"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(eq + 1));
    if (key == "step") {
      if (!absl::SimpleAtoi(value, &metadata.step) || metadata.step < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint metadata: step must be an integer >= 0, got '", value, "'"));
      }
      have_step = true;
    } else if (key == "time_ms") {
      if (!absl::SimpleAtoi(value, &metadata.time_ms) || metadata.time_ms <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint metadata: time_ms must be Unix milliseconds > 0, got '", value, "'"));
      }
      have_time = true;
    } else if (key == "file") {
      metadata.file = std::string(value);
    }
  }
  if (!have_step) return absl::InvalidArgumentError("checkpoint metadata: no step= line");
  if (!have_time) return absl::InvalidArgumentError("checkpoint metadata: no time_ms= line");
  return metadata;
}

std::string FormatCheckpointMetadata(const CheckpointMetadata& metadata) {
  std::string text = absl::StrCat("step=", metadata.step, "\ntime_ms=", metadata.time_ms, "\n");
  if (!metadata.file.empty()) absl::StrAppend(&text, "file=", metadata.file, "\n");
  return text;
}

absl::StatusOr<CheckpointMetadata> ReadCheckpointMetadata(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kCheckpointMetadataFile);
  // The directory may belong to a team's Unix user (worker --run-as) while the worker reads
  // it as root: no symlink is followed, and only a small regular file is read (a FIFO or
  // /dev/zero planted there must not block or fill the worker).
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat("no checkpoint metadata at ", path));
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  constexpr off_t kMaxBytes = 4096;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxBytes) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file of at most ", kMaxBytes, " bytes"));
  }
  std::string text(static_cast<size_t>(kMaxBytes), '\0');
  size_t have = 0;
  while (have < text.size()) {
    const ssize_t n = read(fd, text.data() + have, text.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(have);
  return ParseCheckpointMetadata(text);
}

}  // namespace ringmaster
