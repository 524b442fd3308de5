// Where `ringctl study` keeps its studies: one protobuf JSON file per study (STUDY_ID.json, and
// the chart STUDY_ID.svg) in $RINGMASTER_STUDY_DIR, else $XDG_DATA_HOME/ringmaster/studies,
// else ~/.local/share/ringmaster/studies. Files are written whole (temporary file, fsync,
// rename), so a study is either there complete or not at all.
#ifndef RINGMASTER_CLI_STUDY_STORE_H_
#define RINGMASTER_CLI_STUDY_STORE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "args.h"
#include "ringmaster/v1/study.pb.h"

namespace ringmaster::cli {

inline constexpr const char* kStudyDirEnv = "RINGMASTER_STUDY_DIR";

// FAILED_PRECONDITION when neither the variables above nor HOME are set.
absl::StatusOr<std::string> StudyDirectory(const GetEnvFn& getenv);

// Writes `content` to `path` whole (common/atomic_file.h), creating its directory.
absl::Status WriteFileWhole(const std::string& path, const std::string& content);

absl::Status SaveStudy(const std::string& dir, const v1::Study& study);
// NOT_FOUND naming the id; INVALID_ARGUMENT for an id that is not s-XXXXXXXX.
absl::StatusOr<v1::Study> LoadStudy(const std::string& dir, const std::string& id);
// Every study of `dir`, newest first; a missing directory has none. Unreadable files are skipped.
absl::StatusOr<std::vector<v1::Study>> ListStudies(const std::string& dir);

// "s-" and 8 lower-case hex digits.
bool IsStudyId(const std::string& id);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_STUDY_STORE_H_
