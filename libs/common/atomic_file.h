// Whole-file writes that a crash never leaves torn (checkpoints, their metadata, ringctl's
// studies and charts).
#ifndef RINGMASTER_LIBS_COMMON_ATOMIC_FILE_H_
#define RINGMASTER_LIBS_COMMON_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringmaster {

// Writes `bytes` to DIR/NAME atomically and durably: a temp file in DIR, fsync, rename over
// NAME, fsync of DIR. A reader sees the old file or the new one, never a torn one.
absl::Status WriteFileAtomically(const std::string& dir, const std::string& name,
                                 absl::string_view bytes);

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_ATOMIC_FILE_H_
