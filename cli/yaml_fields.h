// The checks ringctl's YAML readers (a job spec, spec_yaml.cc; a queue, queue_yaml.cc) make of
// each field: its type, its keys, its range. Every failure is INVALID_ARGUMENT in the form
// "SOURCE: PATH: what is wrong", PATH being the key path of the field (`trainer.steps`,
// `resources.t4.nominal`, `command.argv[2]`; none for the document itself). Stateless apart
// from the source's name; thread-compatible.
#ifndef RINGMASTER_CLI_YAML_FIELDS_H_
#define RINGMASTER_CLI_YAML_FIELDS_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ringmaster::cli {

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF). Protobuf string fields must be; a spec with other bytes would fail to parse on the
// scheduler's side as a transport error instead of naming its field.
bool IsValidUtf8(absl::string_view text);

class YamlFields {
 public:
  explicit YamlFields(absl::string_view source) : source_(source) {}

  // Every key must be a string, appear once and, when `known` is not empty, be one of them.
  absl::Status CheckKeys(const YAML::Node& map, const std::string& path,
                         absl::Span<const absl::string_view> known) const;
  absl::Status ExpectMap(const YAML::Node& node, const std::string& path) const;
  // A scalar of UTF-8 text.
  absl::StatusOr<std::string> String(const YAML::Node& node, const std::string& path) const;
  // `true` or `false`.
  absl::StatusOr<bool> Bool(const YAML::Node& node, const std::string& path) const;
  // Integers must fit the proto field (int32 where `fits_int32`); counts, sizes and limits that
  // can never be negative say so here rather than as a range error from the scheduler.
  absl::StatusOr<int64_t> Integer(const YAML::Node& node, const std::string& path,
                                  bool allow_negative, bool fits_int32) const;

  // How an error names a value: `"ten"`, `a list`, `a mapping`, `nothing (null)`.
  static std::string Describe(const YAML::Node& node);
  // INVALID_ARGUMENT "SOURCE: PATH: what" ("SOURCE: what" for an empty path).
  absl::Status Error(const std::string& path, const std::string& what) const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_YAML_FIELDS_H_
