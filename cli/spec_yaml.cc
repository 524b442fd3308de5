#include "spec_yaml.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "environment_flags.h"
#include "job_spec.h"
#include "yaml_fields.h"

namespace ringmaster::cli {
namespace {

constexpr std::array<absl::string_view, 26> kTopKeys = {"name",
                                                        "queue",
                                                        "priority",
                                                        "replicas",
                                                        "min_replicas",
                                                        "max_replicas",
                                                        "sizes_divide",
                                                        "gpus_per_replica",
                                                        "gpu_type",
                                                        "gpu_share",
                                                        "gpu_memory",
                                                        "restart_policy",
                                                        "backoff_limit",
                                                        "max_runtime_seconds",
                                                        "progress_timeout_seconds",
                                                        "labels",
                                                        "health_check",
                                                        "use_mpirun",
                                                        "after",
                                                        "array",
                                                        "trainer",
                                                        "command",
                                                        "image",
                                                        "mounts",
                                                        "shm_size",
                                                        "workdir"};
constexpr std::array<absl::string_view, 4> kTrainerKeys = {"model", "batch_size", "steps",
                                                           "checkpoint_every"};
constexpr std::array<absl::string_view, 3> kCommandKeys = {"argv", "env", "check_in_mpi_init"};
constexpr std::array<absl::string_view, 3> kMountKeys = {"volume", "path", "read_only"};
constexpr std::array<absl::string_view, 2> kArrayKeys = {"count", "parallelism"};

// Past this many documents a YAML text is only "more than" that many.
constexpr int kMaxDocumentsCounted = 2;

// Parser events of a document, ignored: counting documents needs only HandleNextDocument.
class DocumentCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Walks one YAML document; the source's name and the key path prefix every error.
class SpecReader : private YamlFields {
 public:
  explicit SpecReader(absl::string_view source) : YamlFields(source) {}

  absl::Status Read(const YAML::Node& root, v1::JobSpec* spec) {
    RM_RETURN_IF_ERROR(ExpectMap(root, ""));
    RM_RETURN_IF_ERROR(CheckKeys(root, "", kTopKeys));
    if (root["trainer"] && root["command"]) {
      return Error("", "give one workload, trainer or command, not both");
    }
    for (const auto& entry : root) {
      const std::string key = entry.first.Scalar();
      const YAML::Node& value = entry.second;
      if (key == "name") {
        RM_ASSIGN_OR_RETURN(*spec->mutable_name(), String(value, key));
      } else if (key == "queue") {
        RM_ASSIGN_OR_RETURN(*spec->mutable_queue(), String(value, key));
      } else if (key == "gpu_type") {
        RM_ASSIGN_OR_RETURN(*spec->mutable_gpu_type(), String(value, key));
      } else if (key == "priority") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(value, key, /*allow_negative=*/true, true));
        spec->set_priority(static_cast<int32_t>(v));
      } else if (key == "replicas") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(value, key, false, true));
        spec->set_replicas(static_cast<int32_t>(v));
      } else if (key == "min_replicas") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(value, key, false, true));
        spec->set_min_replicas(static_cast<int32_t>(v));
      } else if (key == "max_replicas") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(value, key, false, true));
        spec->set_max_replicas(static_cast<int32_t>(v));
      } else if (key == "sizes_divide") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(value, key, false, true));
        spec->set_sizes_divide(static_cast<int32_t>(v));
      } else if (key == "gpus_per_replica") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(value, key, false, true));
        spec->set_gpus_per_replica(static_cast<int32_t>(v));
      } else if (key == "backoff_limit") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(value, key, false, true));
        spec->set_backoff_limit(static_cast<int32_t>(v));
      } else if (key == "max_runtime_seconds") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(value, key, false, false));
        spec->set_max_runtime_seconds(v);
      } else if (key == "progress_timeout_seconds") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(value, key, false, false));
        spec->set_progress_timeout_seconds(v);
      } else if (key == "restart_policy") {
        RM_ASSIGN_OR_RETURN(std::string text, String(value, key));
        std::optional<v1::RestartPolicy> policy = ParseRestartPolicy(text);
        if (!policy) {
          return Error(key, absl::StrCat("expected Never or OnFailure, got \"", text, "\""));
        }
        spec->set_restart_policy(*policy);
      } else if (key == "labels") {
        RM_RETURN_IF_ERROR(StringMap(value, key, spec->mutable_labels()));
      } else if (key == "health_check") {
        RM_ASSIGN_OR_RETURN(bool v, Bool(value, key));
        spec->set_health_check(v);
      } else if (key == "use_mpirun") {
        RM_ASSIGN_OR_RETURN(bool v, Bool(value, key));
        spec->set_use_mpirun(v);
      } else if (key == "image") {
        RM_ASSIGN_OR_RETURN(*spec->mutable_image(), String(value, key));
      } else if (key == "workdir") {
        RM_ASSIGN_OR_RETURN(*spec->mutable_workdir(), String(value, key));
      } else if (key == "gpu_share") {
        // A fraction of one GPU: 0.25 (a YAML number or string).
        RM_ASSIGN_OR_RETURN(std::string text, String(value, key));
        auto share = ParseGpuShare(text, key);
        if (!share.ok()) {
          return Error(key, absl::StrCat("expected a fraction of one GPU in (0, 1] with at most 3 "
                                         "decimals, such as 0.25, got ",
                                         Describe(value)));
        }
        spec->set_gpu_share(*share);
      } else if (key == "gpu_memory") {
        RM_ASSIGN_OR_RETURN(std::string text, String(value, key));
        auto bytes = ParseByteSize(text, key);
        if (!bytes.ok()) {
          return Error(key, absl::StrCat("expected a size such as 10Gi, 512Mi or a number of "
                                         "bytes, got ",
                                         Describe(value)));
        }
        spec->set_gpu_memory(*bytes);
      } else if (key == "shm_size") {
        // "8Gi" or a number of bytes.
        RM_ASSIGN_OR_RETURN(std::string text, String(value, key));
        auto bytes = ParseByteSize(text, key);
        if (!bytes.ok()) {
          return Error(key, absl::StrCat("expected a size such as 8Gi, 512Mi, 1G or a number of "
                                         "bytes, got ",
                                         Describe(value)));
        }
        spec->set_shm_size_bytes(*bytes);
      } else if (key == "mounts") {
        RM_RETURN_IF_ERROR(Mounts(value, spec));
      } else if (key == "after") {
        RM_RETURN_IF_ERROR(After(value, spec));
      } else if (key == "array") {
        RM_RETURN_IF_ERROR(Array(value, spec->mutable_array()));
      } else if (key == "trainer") {
        RM_RETURN_IF_ERROR(Trainer(value, spec->mutable_trainer()));
      } else if (key == "command") {
        RM_RETURN_IF_ERROR(Command(value, spec->mutable_command()));
      }
    }
    return absl::OkStatus();
  }

 private:
  // mounts: [{volume: imagenet, path: /data, read_only: true}, ...]
  absl::Status Mounts(const YAML::Node& node, v1::JobSpec* spec) {
    if (!node.IsSequence()) {
      return Error("mounts", absl::StrCat("expected a list, got ", Describe(node)));
    }
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string path = absl::StrCat("mounts[", i, "]");
      const YAML::Node& item = node[i];
      RM_RETURN_IF_ERROR(ExpectMap(item, path));
      RM_RETURN_IF_ERROR(CheckKeys(item, path, kMountKeys));
      v1::Mount* mount = spec->add_mounts();
      for (const auto& entry : item) {
        const std::string key = entry.first.Scalar();
        const std::string key_path = absl::StrCat(path, ".", key);
        if (key == "volume") {
          RM_ASSIGN_OR_RETURN(*mount->mutable_volume(), String(entry.second, key_path));
        } else if (key == "path") {
          RM_ASSIGN_OR_RETURN(*mount->mutable_path(), String(entry.second, key_path));
        } else if (key == "read_only") {
          RM_ASSIGN_OR_RETURN(bool v, Bool(entry.second, key_path));
          mount->set_read_only(v);
        }
      }
    }
    return absl::OkStatus();
  }

  // after: ["j-3f9c2a41b7d0:succeeded", "j-0123456789ab"]  (as ringctl's --after)
  absl::Status After(const YAML::Node& node, v1::JobSpec* spec) {
    if (!node.IsSequence()) {
      return Error("after",
                   absl::StrCat("expected a list of JOB[:CONDITION], got ", Describe(node)));
    }
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string path = absl::StrCat("after[", i, "]");
      RM_ASSIGN_OR_RETURN(std::string text, String(node[i], path));
      absl::StatusOr<v1::JobDependency> dependency = ParseDependency(text, path);
      if (!dependency.ok()) {
        return Error(path,
                     absl::StrCat("expected JOB[:succeeded|ended|failed], got \"", text, "\""));
      }
      *spec->add_after() = *std::move(dependency);
    }
    return absl::OkStatus();
  }

  // array: {count: 1000, parallelism: 50}, or as ringctl's --array: "0-999%50", 1000.
  absl::Status Array(const YAML::Node& node, v1::JobArray* array) {
    if (node.IsScalar()) {
      absl::StatusOr<v1::JobArray> parsed = ParseArraySpec(node.Scalar(), "array");
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(source(), ": ", parsed.status().message()));
      }
      *array = *std::move(parsed);
      return absl::OkStatus();
    }
    if (!node.IsMap()) {
      return Error("array", absl::StrCat("expected {count: N, parallelism: P} or a range such as "
                                         "\"0-999%50\", got ",
                                         Describe(node)));
    }
    RM_RETURN_IF_ERROR(CheckKeys(node, "array", kArrayKeys));
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      RM_ASSIGN_OR_RETURN(int64_t v, Integer(entry.second, "array." + key, false, true));
      if (key == "count") {
        array->set_count(static_cast<int32_t>(v));
      } else {
        array->set_parallelism(static_cast<int32_t>(v));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Trainer(const YAML::Node& node, v1::TrainerWorkload* trainer) {
    RM_RETURN_IF_ERROR(ExpectMap(node, "trainer"));
    RM_RETURN_IF_ERROR(CheckKeys(node, "trainer", kTrainerKeys));
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      const std::string path = "trainer." + key;
      if (key == "model") {
        RM_ASSIGN_OR_RETURN(*trainer->mutable_model(), String(entry.second, path));
      } else if (key == "batch_size") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(entry.second, path, false, true));
        trainer->set_batch_size(static_cast<int32_t>(v));
      } else if (key == "steps") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(entry.second, path, false, false));
        trainer->set_steps(v);
      } else if (key == "checkpoint_every") {
        RM_ASSIGN_OR_RETURN(int64_t v, Integer(entry.second, path, false, true));
        trainer->set_checkpoint_every(static_cast<int32_t>(v));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Command(const YAML::Node& node, v1::CommandWorkload* command) {
    RM_RETURN_IF_ERROR(ExpectMap(node, "command"));
    RM_RETURN_IF_ERROR(CheckKeys(node, "command", kCommandKeys));
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      if (key == "argv") {
        const YAML::Node& argv = entry.second;
        if (!argv.IsSequence()) {
          return Error("command.argv",
                       absl::StrCat("expected a list of strings, got ", Describe(argv)));
        }
        for (size_t i = 0; i < argv.size(); ++i) {
          RM_ASSIGN_OR_RETURN(*command->add_argv(),
                              String(argv[i], absl::StrCat("command.argv[", i, "]")));
        }
      } else if (key == "env") {
        RM_RETURN_IF_ERROR(StringMap(entry.second, "command.env", command->mutable_env()));
      } else if (key == "check_in_mpi_init") {
        RM_ASSIGN_OR_RETURN(bool v, Bool(entry.second, "command.check_in_mpi_init"));
        command->set_check_in_mpi_init(v);
      }
    }
    return absl::OkStatus();
  }

  absl::Status StringMap(const YAML::Node& node, const std::string& path,
                         google::protobuf::Map<std::string, std::string>* out) {
    RM_RETURN_IF_ERROR(ExpectMap(node, path));
    RM_RETURN_IF_ERROR(CheckKeys(node, path, {}));
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      RM_ASSIGN_OR_RETURN((*out)[key], String(entry.second, absl::StrCat(path, ".", key)));
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<YAML::Node> LoadOneYamlDocument(absl::string_view text, absl::string_view source,
                                               absl::string_view what) {
  try {
    // Count the documents without YAML::LoadAll: on some malformed input (a stray ',') the
    // parser of yaml-cpp 0.7 reports an empty document forever and LoadAll collects them until
    // memory runs out (yaml-cpp issue 1040, found by tests/fuzz/job_spec_yaml_fuzz).
    std::istringstream stream{std::string(text)};
    YAML::Parser parser(stream);
    DocumentCounter counter;
    int documents = 0;
    while (documents <= kMaxDocumentsCounted && parser.HandleNextDocument(counter)) ++documents;
    if (documents != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": expected one YAML document with the ", what, "'s fields, found ",
                       documents > kMaxDocumentsCounted ? "more than " : "",
                       std::min(documents, kMaxDocumentsCounted)));
    }
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    // Syntax errors carry a position; yaml-cpp counts lines and columns from 0.
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
}

absl::Status ReadInputFile(const std::string& path, std::string* text, std::string* source) {
  std::ostringstream buffer;
  if (path == "-") {
    buffer << std::cin.rdbuf();
    *source = "<stdin>";
  } else {
    std::ifstream file(path);
    if (!file) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    buffer << file.rdbuf();
    *source = path;
  }
  *text = buffer.str();
  return absl::OkStatus();
}

absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(absl::string_view text, absl::string_view source) {
  RM_ASSIGN_OR_RETURN(YAML::Node document, LoadOneYamlDocument(text, source, "job"));
  v1::JobSpec spec;
  try {
    RM_RETURN_IF_ERROR(SpecReader(source).Read(document, &spec));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.msg));
  }
  return spec;
}

absl::StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path) {
  std::string text, source;
  RM_RETURN_IF_ERROR(ReadInputFile(path, &text, &source));
  return ParseJobSpecYaml(text, source);
}

}  // namespace ringmaster::cli
