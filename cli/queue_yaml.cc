#include "queue_yaml.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spec_yaml.h"
#include "yaml_fields.h"

namespace ringmaster::cli {
namespace {

constexpr std::array<absl::string_view, 11> kTopKeys = {"name",
                                                        "cohort",
                                                        "weight",
                                                        "resources",
                                                        "within_queue",
                                                        "reclaim_within_cohort",
                                                        "min_runtime_seconds",
                                                        "teams",
                                                        "progress_timeout_seconds",
                                                        "idle_timeout_seconds",
                                                        "elastic_idle_delay_seconds"};
constexpr std::array<absl::string_view, 3> kQuotaKeys = {"nominal", "borrowing_limit",
                                                         "lending_limit"};

// Walks one YAML document; the source's name and the key path prefix every error.
class QueueReader : private YamlFields {
 public:
  explicit QueueReader(absl::string_view source) : YamlFields(source) {}

  absl::Status Read(const YAML::Node& root, v1::Queue* queue) {
    RM_RETURN_IF_ERROR(ExpectMap(root, ""));
    RM_RETURN_IF_ERROR(CheckKeys(root, "", kTopKeys));
    for (const auto& entry : root) {
      const std::string key = entry.first.Scalar();
      const YAML::Node& value = entry.second;
      if (key == "name") {
        RM_ASSIGN_OR_RETURN(*queue->mutable_name(), String(value, key));
      } else if (key == "cohort") {
        RM_ASSIGN_OR_RETURN(*queue->mutable_cohort(), String(value, key));
      } else if (key == "weight") {
        // Past int32 is out of range; below zero, of any size, it is negative (Count).
        RM_ASSIGN_OR_RETURN(int64_t v, Count(value, key));
        if (v > std::numeric_limits<int32_t>::max()) {
          return Error(key, absl::StrCat("out of range for a 32-bit integer: ", v));
        }
        queue->set_weight(static_cast<int32_t>(v));
      } else if (key == "min_runtime_seconds") {
        RM_ASSIGN_OR_RETURN(int64_t v, Count(value, key));
        queue->set_min_runtime_seconds(v);
      } else if (key == "progress_timeout_seconds") {
        RM_ASSIGN_OR_RETURN(int64_t v, Count(value, key));
        queue->set_progress_timeout_seconds(v);
      } else if (key == "idle_timeout_seconds") {
        RM_ASSIGN_OR_RETURN(int64_t v, Count(value, key));
        queue->set_idle_timeout_seconds(v);
      } else if (key == "elastic_idle_delay_seconds") {
        RM_ASSIGN_OR_RETURN(int64_t v, Count(value, key));
        queue->set_elastic_idle_delay_seconds(v);
      } else if (key == "within_queue") {
        RM_ASSIGN_OR_RETURN(std::string text, String(value, key));
        std::optional<v1::PreemptWithinQueue> v = ParsePreemptWithinQueue(text);
        if (!v) {
          return Error(key, absl::StrCat("expected Never, LowerPriority or "
                                         "LowerOrNewerEqualPriority, got \"",
                                         text, "\""));
        }
        queue->set_within_queue(*v);
      } else if (key == "reclaim_within_cohort") {
        RM_ASSIGN_OR_RETURN(std::string text, String(value, key));
        std::optional<v1::ReclaimWithinCohort> v = ParseReclaimWithinCohort(text);
        if (!v) {
          return Error(key,
                       absl::StrCat("expected Never, LowerPriority or Any, got \"", text, "\""));
        }
        queue->set_reclaim_within_cohort(*v);
      } else if (key == "resources") {
        RM_RETURN_IF_ERROR(Resources(value, queue));
      } else if (key == "teams") {
        // A list of team names; the scheduler checks each (teams[i]).
        if (!value.IsSequence()) return Error(key, "expected a list of team names");
        for (size_t i = 0; i < value.size(); ++i) {
          RM_ASSIGN_OR_RETURN(*queue->add_teams(),
                              String(value[i], absl::StrCat(key, "[", i, "]")));
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  // Every integer of a queue is a count or a duration: never negative.
  absl::StatusOr<int64_t> Count(const YAML::Node& node, const std::string& path) const {
    return Integer(node, path, /*allow_negative=*/false, /*fits_int32=*/false);
  }

  absl::Status Resources(const YAML::Node& node, v1::Queue* queue) {
    if (node.IsNull()) return absl::OkStatus();  // `resources:` with nothing: no quotas
    RM_RETURN_IF_ERROR(ExpectMap(node, "resources"));
    RM_RETURN_IF_ERROR(CheckKeys(node, "resources", {}));
    for (const auto& entry : node) {
      const std::string resource = entry.first.Scalar();
      const std::string path = absl::StrCat("resources.", resource);
      RM_RETURN_IF_ERROR(ExpectMap(entry.second, path));
      RM_RETURN_IF_ERROR(CheckKeys(entry.second, path, kQuotaKeys));
      if (!entry.second["nominal"]) return Error(path, "nominal is required");
      v1::ResourceQuota& quota = (*queue->mutable_resources())[resource];
      for (const auto& field : entry.second) {
        const std::string key = field.first.Scalar();
        RM_ASSIGN_OR_RETURN(int64_t v, Count(field.second, absl::StrCat(path, ".", key)));
        if (key == "nominal") {
          quota.set_nominal(v);
        } else if (key == "borrowing_limit") {
          quota.set_borrowing_limit(v);
        } else if (key == "lending_limit") {
          quota.set_lending_limit(v);
        }
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::string PreemptWithinQueueName(v1::PreemptWithinQueue value) {
  switch (value) {
    case v1::PREEMPT_WITHIN_QUEUE_LOWER_PRIORITY:
      return "LowerPriority";
    case v1::PREEMPT_WITHIN_QUEUE_LOWER_OR_NEWER_EQUAL_PRIORITY:
      return "LowerOrNewerEqualPriority";
    default:
      return "Never";
  }
}

std::optional<v1::PreemptWithinQueue> ParsePreemptWithinQueue(const std::string& text) {
  for (auto v : {v1::PREEMPT_WITHIN_QUEUE_NEVER, v1::PREEMPT_WITHIN_QUEUE_LOWER_PRIORITY,
                 v1::PREEMPT_WITHIN_QUEUE_LOWER_OR_NEWER_EQUAL_PRIORITY}) {
    if (text == PreemptWithinQueueName(v)) return v;
  }
  return std::nullopt;
}

std::string ReclaimWithinCohortName(v1::ReclaimWithinCohort value) {
  switch (value) {
    case v1::RECLAIM_WITHIN_COHORT_LOWER_PRIORITY:
      return "LowerPriority";
    case v1::RECLAIM_WITHIN_COHORT_ANY:
      return "Any";
    default:
      return "Never";
  }
}

std::optional<v1::ReclaimWithinCohort> ParseReclaimWithinCohort(const std::string& text) {
  for (auto v : {v1::RECLAIM_WITHIN_COHORT_NEVER, v1::RECLAIM_WITHIN_COHORT_LOWER_PRIORITY,
                 v1::RECLAIM_WITHIN_COHORT_ANY}) {
    if (text == ReclaimWithinCohortName(v)) return v;
  }
  return std::nullopt;
}

absl::StatusOr<v1::Queue> ParseQueueYaml(absl::string_view text, absl::string_view source) {
  RM_ASSIGN_OR_RETURN(YAML::Node document, LoadOneYamlDocument(text, source, "queue"));
  v1::Queue queue;
  try {
    RM_RETURN_IF_ERROR(QueueReader(source).Read(document, &queue));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.msg));
  }
  return queue;
}

absl::StatusOr<v1::Queue> LoadQueueFile(const std::string& path) {
  std::string text, source;
  RM_RETURN_IF_ERROR(ReadInputFile(path, &text, &source));
  return ParseQueueYaml(text, source);
}

}  // namespace ringmaster::cli
