// Reads a job spec written in YAML (the format of docs/examples/job.yaml) into a JobSpec.
// Keys are the proto field names in snake_case; the workload is a `trainer:` or a `command:`
// mapping. Every structural error (unknown key, wrong type, a negative count) is
// INVALID_ARGUMENT in the form "SOURCE: PATH: what is wrong", e.g.
// `job.yaml: trainer.steps: expected an integer, got "ten"`. Stateless and thread-safe.
#ifndef RINGMASTER_CLI_SPEC_YAML_H_
#define RINGMASTER_CLI_SPEC_YAML_H_

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ringmaster/v1/job.pb.h"

namespace ringmaster::cli {

// Parses YAML text. `source` names the text in error messages (usually the file path).
absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(absl::string_view text, absl::string_view source);

// Reads and parses the file at `path`; "-" reads standard input. An unreadable file is
// INVALID_ARGUMENT too: like a bad flag, it is the caller's input to fix.
absl::StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path);

// The one YAML document of `text` (ringctl's files hold one: a job spec or a queue). Errors
// name `source`, and say "one YAML document with the WHAT's fields" when there are more.
absl::StatusOr<YAML::Node> LoadOneYamlDocument(absl::string_view text, absl::string_view source,
                                               absl::string_view what);

// The text of the file at `path` ("-": standard input) and the name errors should give it.
absl::Status ReadInputFile(const std::string& path, std::string* text, std::string* source);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_SPEC_YAML_H_
