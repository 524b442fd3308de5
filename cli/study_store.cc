#include "study_store.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "google/protobuf/util/json_util.h"

namespace ringmaster::cli {

bool IsStudyId(const std::string& id) {
  if (id.size() != 10 || !absl::StartsWith(id, "s-")) return false;
  return std::all_of(id.begin() + 2, id.end(),
                     [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); });
}

absl::StatusOr<std::string> StudyDirectory(const GetEnvFn& getenv) {
  if (const char* dir = getenv(kStudyDirEnv); dir != nullptr && dir[0] != '\0') return dir;
  if (const char* data = getenv("XDG_DATA_HOME"); data != nullptr && data[0] != '\0') {
    return absl::StrCat(data, "/ringmaster/studies");
  }
  if (const char* home = getenv("HOME"); home != nullptr && home[0] != '\0') {
    return absl::StrCat(home, "/.local/share/ringmaster/studies");
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no place to keep studies: set ", kStudyDirEnv, ", XDG_DATA_HOME or HOME"));
}

absl::Status WriteFileWhole(const std::string& path, const std::string& content) {
  const std::filesystem::path target = std::filesystem::absolute(path);
  std::error_code ec;
  std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", target.parent_path().string(), ": ", ec.message()));
  }
  return WriteFileAtomically(target.parent_path().string(), target.filename().string(), content);
}

absl::Status SaveStudy(const std::string& dir, const v1::Study& study) {
  if (!IsStudyId(study.id())) {
    return absl::InvalidArgumentError(absl::StrCat("study id '", study.id(), "' is malformed"));
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  if (auto s = google::protobuf::util::MessageToJsonString(study, &json, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot encode study: ", s.ToString()));
  }
  return WriteFileWhole(absl::StrCat(dir, "/", study.id(), ".json"), json);
}

absl::StatusOr<v1::Study> LoadStudy(const std::string& dir, const std::string& id) {
  if (!IsStudyId(id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("study id '", id, "' is malformed: expected s- and 8 hex digits"));
  }
  const std::string path = absl::StrCat(dir, "/", id, ".json");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no study ", id, " in ", dir));
  std::stringstream text;
  text << in.rdbuf();
  v1::Study study;
  if (auto s = google::protobuf::util::JsonStringToMessage(text.str(), &study); !s.ok()) {
    return absl::DataLossError(absl::StrCat(path, " is not a study: ", s.ToString()));
  }
  return study;
}

absl::StatusOr<std::vector<v1::Study>> ListStudies(const std::string& dir) {
  std::vector<v1::Study> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::EndsWith(name, ".json")) continue;
    const std::string id = name.substr(0, name.size() - 5);
    if (!IsStudyId(id)) continue;
    if (absl::StatusOr<v1::Study> study = LoadStudy(dir, id); study.ok()) {
      out.push_back(*std::move(study));
    }
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  std::sort(out.begin(), out.end(), [](const v1::Study& a, const v1::Study& b) {
    return a.created_at_ms() != b.created_at_ms() ? a.created_at_ms() > b.created_at_ms()
                                                  : a.id() < b.id();
  });
  return out;
}

}  // namespace ringmaster::cli
