// The forms ringctl accepts for a job's environment (docs/environments.md): sizes such as
// "8Gi" for --shm-size and a job file's shm_size, and "VOLUME:PATH[:ro|:rw]" for --mount.
// Only the form is checked here; names, paths and limits are the scheduler's to judge.
#ifndef RINGMASTER_CLI_ENVIRONMENT_FLAGS_H_
#define RINGMASTER_CLI_ENVIRONMENT_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ringmaster/v1/job.pb.h"

namespace ringmaster::cli {

// "8Gi", "512Mi", "64Ki", "1Ti" (binary), "8G", "500M", "1k", "1T" (decimal), or a plain number
// of bytes -> bytes. INVALID_ARGUMENT naming `field` for anything else, or past int64.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text, absl::string_view field);

// A share of one GPU: a decimal fraction in (0, 1] with at most three decimals ("0.25", ".5",
// "1") -> thousandths (250, 500, 1000). INVALID_ARGUMENT naming `field` for anything else.
absl::StatusOr<int32_t> ParseGpuShare(absl::string_view text, absl::string_view field);

// "imagenet:/data", "imagenet:/data:ro", "scratch:/tmp/s:rw" -> a Mount. The path is everything
// between the first ':' and an optional trailing ":ro" or ":rw".
absl::StatusOr<v1::Mount> ParseMountFlag(absl::string_view text);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_ENVIRONMENT_FLAGS_H_
