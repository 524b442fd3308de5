// Reads a queue written in YAML (the format of docs/examples/queue.yaml) into a v1.Queue, for
// `ringctl queue create|update -f FILE`. Keys are the proto field names in snake_case;
// `resources` maps a resource name (a GPU type or "cpu") to its nominal, borrowing_limit and
// lending_limit; within_queue and reclaim_within_cohort take the names the docs use (Never,
// LowerPriority, ...). Every structural error is INVALID_ARGUMENT in the form
// "SOURCE: PATH: what is wrong", e.g. `queue.yaml: resources.t4.nominal: expected an integer,
// got "lots"`; ranges are the scheduler's to check. Stateless and thread-safe.
#ifndef RINGMASTER_CLI_QUEUE_YAML_H_
#define RINGMASTER_CLI_QUEUE_YAML_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ringmaster/v1/queue.pb.h"

namespace ringmaster::cli {

// Parses YAML text. `source` names the text in error messages (usually the file path).
absl::StatusOr<v1::Queue> ParseQueueYaml(absl::string_view text, absl::string_view source);

// Reads and parses the file at `path`; "-" reads standard input. An unreadable file is
// INVALID_ARGUMENT.
absl::StatusOr<v1::Queue> LoadQueueFile(const std::string& path);

// The YAML and table spellings of the preemption settings: "Never", "LowerPriority",
// "LowerOrNewerEqualPriority" / "Never", "LowerPriority", "Any" (UNSPECIFIED reads "Never").
std::string PreemptWithinQueueName(v1::PreemptWithinQueue value);
std::optional<v1::PreemptWithinQueue> ParsePreemptWithinQueue(const std::string& text);
std::string ReclaimWithinCohortName(v1::ReclaimWithinCohort value);
std::optional<v1::ReclaimWithinCohort> ParseReclaimWithinCohort(const std::string& text);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_QUEUE_YAML_H_
