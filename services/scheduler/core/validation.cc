#include "scheduler/core/validation.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/core/array.h"
#include "scheduler/core/authz.h"
#include "scheduler/core/dependency.h"
#include "scheduler/core/environment.h"
#include "scheduler/core/placement.h"

namespace ringmaster::scheduler {
namespace {

constexpr size_t kMaxArgs = 256;
constexpr size_t kMaxArgBytes = 4096;
constexpr size_t kMaxArgvBytes = 64 * 1024;
constexpr size_t kMaxEnvValueBytes = 4096;
constexpr size_t kMaxEnvNameBytes = 256;
constexpr size_t kMaxLabelKey = 63;
constexpr size_t kMaxLabelValueBytes = 256;
constexpr size_t kMaxGpuType = 32;
constexpr size_t kMaxGpusPerWorker = 64;
constexpr int32_t kMaxCpuSlots = 1024;
const std::set<std::string>& KnownModels() {
  static const auto* models = new std::set<std::string>{"mlp-small", "mlp", "mlp-large"};
  return *models;
}
// Set by the worker for every rank; a job may not override them.
bool IsReservedEnv(const std::string& name) {
  static const auto* reserved = new std::set<std::string>{
      "CUDA_VISIBLE_DEVICES", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};
  return reserved->count(name) > 0 || absl::StartsWith(name, "RINGMASTER_") ||
         absl::StartsWith(name, "OMPI_");
}

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Quoted for messages, cut short so a hostile value cannot flood a log or terminal.
std::string Shown(const std::string& value) {
  constexpr size_t kShown = 64;
  std::string out;
  for (char c : value.substr(0, kShown)) {
    out += absl::ascii_isprint(static_cast<unsigned char>(c)) ? c : '?';
  }
  return absl::StrCat("'", out, value.size() > kShown ? "...'" : "'");
}

// A DNS label: what Kubernetes accepts as a name, so names carry over to pods and metrics.
absl::Status CheckDnsLabel(const std::string& field, const std::string& value) {
  const std::string allowed = "1..63 characters of a-z, 0-9 and '-', starting with a letter "
                              "and not ending with '-'";
  if (value.empty() || value.size() > 63) {
    return Invalid(field, absl::StrCat("must be ", allowed, "; got ", value.size(), " characters"));
  }
  bool ok = absl::ascii_islower(value.front()) && value.back() != '-';
  for (char c : value) ok = ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-');
  if (!ok) return Invalid(field, absl::StrCat("must be ", allowed, "; got ", Shown(value)));
  return absl::OkStatus();
}

absl::Status CheckRange(const std::string& field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return Invalid(field, absl::StrCat("must be ", lo, "..", hi, ", got ", value));
  }
  return absl::OkStatus();
}

bool IsEnvName(const std::string& name) {
  if (name.empty() || absl::ascii_isdigit(name.front())) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

// '.' for MIG profiles ("h100-1g.10gb"), never first.
bool IsGpuType(const std::string& type) {
  if (type.empty() || type.size() > kMaxGpuType || type.front() == '.') return false;
  for (char c : type) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-' && c != '.') return false;
  }
  return true;
}

absl::Status CheckTrainer(TrainerWorkload& trainer) {
  if (trainer.model.empty()) trainer.model = kDefaultModel;
  if (KnownModels().count(trainer.model) == 0) {
    return Invalid("trainer.model", absl::StrCat("must be one of ", absl::StrJoin(KnownModels(), ", "),
                                                 "; got ", Shown(trainer.model)));
  }
  if (trainer.batch_size == 0) trainer.batch_size = kDefaultBatchSize;
  if (auto s = CheckRange("trainer.batch_size", trainer.batch_size, 1, 65536); !s.ok()) return s;
  if (trainer.steps == 0) trainer.steps = kDefaultSteps;
  if (auto s = CheckRange("trainer.steps", trainer.steps, 1, 10'000'000); !s.ok()) return s;
  if (!trainer.checkpoint_every) return absl::OkStatus();
  return CheckRange("trainer.checkpoint_every", *trainer.checkpoint_every, 0, 10'000'000);
}

absl::Status CheckCommand(const CommandWorkload& command) {
  if (command.argv.empty() || command.argv.size() > kMaxArgs) {
    return Invalid("command.argv", absl::StrCat("must have 1..", kMaxArgs, " entries, got ",
                                                command.argv.size()));
  }
  if (command.argv.front().empty()) return Invalid("command.argv[0]", "must name a program");
  size_t total = 0;
  for (size_t i = 0; i < command.argv.size(); ++i) {
    const std::string& arg = command.argv[i];
    std::string field = absl::StrCat("command.argv[", i, "]");
    if (arg.size() > kMaxArgBytes) {
      return Invalid(field, absl::StrCat("must be at most ", kMaxArgBytes, " bytes, got ", arg.size()));
    }
    if (arg.find('\0') != std::string::npos) return Invalid(field, "must not contain NUL bytes");
    total += arg.size();
  }
  if (total > kMaxArgvBytes) {
    return Invalid("command.argv", absl::StrCat("must be at most ", kMaxArgvBytes,
                                                " bytes in all, got ", total));
  }
  if (command.env.size() > kMaxEnv) {
    return Invalid("command.env", absl::StrCat("must have at most ", kMaxEnv, " entries, got ",
                                               command.env.size()));
  }
  for (const auto& [name, value] : command.env) {
    // Before anything quotes the name in a field path: it is the caller's and may be huge.
    if (name.size() > kMaxEnvNameBytes) {
      return Invalid("command.env", absl::StrCat("names must be at most ", kMaxEnvNameBytes,
                                                 " bytes; got ", Shown(name), " (",
                                                 name.size(), " bytes)"));
    }
    if (!IsEnvName(name)) {
      return Invalid("command.env", absl::StrCat("names must match [A-Za-z_][A-Za-z0-9_]*; got ",
                                                 Shown(name)));
    }
    if (IsReservedEnv(name)) {
      return Invalid(absl::StrCat("command.env.", name),
                     "is set by the platform for every rank (CUDA_VISIBLE_DEVICES, RANK, "
                     "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, RINGMASTER_*, OMPI_*)");
    }
    if (value.size() > kMaxEnvValueBytes || value.find('\0') != std::string::npos) {
      return Invalid(absl::StrCat("command.env.", name),
                     absl::StrCat("value must be at most ", kMaxEnvValueBytes,
                                  " bytes without NUL, got ", value.size(), " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(const std::map<std::string, std::string>& labels) {
  if (labels.size() > kMaxLabels) {
    return Invalid("labels", absl::StrCat("at most ", kMaxLabels, " allowed, got ", labels.size()));
  }
  for (const auto& [key, value] : labels) {
    bool ok = !key.empty() && key.size() <= kMaxLabelKey;
    for (char c : key) {
      ok = ok && (absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '/' || c == '-');
    }
    if (!ok) {
      return Invalid("labels", absl::StrCat("keys must be 1..", kMaxLabelKey,
                                            " characters of [A-Za-z0-9._/-]; got ", Shown(key)));
    }
    if (value.size() > kMaxLabelValueBytes) {
      return Invalid(absl::StrCat("labels.", key),
                     absl::StrCat("value must be at most ", kMaxLabelValueBytes, " bytes, got ",
                                  value.size()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobSpec> ValidateJobSpec(const JobSpec& in) {
  JobSpec spec = in;
  if (auto s = CheckDnsLabel("name", spec.name); !s.ok()) return s;
  if (spec.queue.empty()) spec.queue = kDefaultQueue;
  if (auto s = CheckDnsLabel("queue", spec.queue); !s.ok()) return s;
  if (auto s = CheckRange("priority", spec.priority, -kMaxPriority, kMaxPriority); !s.ok()) return s;
  if (auto s = CheckRange("replicas", spec.replicas, 1, kMaxReplicas); !s.ok()) return s;
  if (spec.min_replicas != 0 || spec.max_replicas != 0) {
    // An elastic job: 1 <= min_replicas <= replicas <= max_replicas <= the bound of replicas.
    if (auto s = CheckRange("min_replicas", spec.min_replicas, 1, spec.replicas); !s.ok()) {
      return s;
    }
    if (auto s = CheckRange("max_replicas", spec.max_replicas, spec.replicas, kMaxReplicas);
        !s.ok()) {
      return s;
    }
  }
  if (spec.sizes_divide != 0) {
    // Every size the job runs at divides it: the size it starts at when there is room and its
    // floor must, so that both stay sizes it may run at.
    if (spec.min_replicas == 0) {
      return Invalid("sizes_divide",
                     "is only allowed for an elastic job (with min_replicas and max_replicas)");
    }
    if (auto s = CheckRange("sizes_divide", spec.sizes_divide, 1, kMaxSizesDivide); !s.ok()) {
      return s;
    }
    for (const auto& [field, n] : {std::pair<const char*, int32_t>{"replicas", spec.replicas},
                                   {"min_replicas", spec.min_replicas}}) {
      if (spec.sizes_divide % n != 0) {
        return Invalid("sizes_divide", absl::StrCat("must be a multiple of ", field, " (", n,
                                                    "), got ", spec.sizes_divide));
      }
    }
  }
  if (auto s = CheckRange("gpus_per_replica", spec.gpus_per_replica, 0, kMaxGpusPerReplica);
      !s.ok()) {
    return s;
  }
  if (spec.gpu_share != 0) {
    if (auto s = CheckRange("gpu_share", spec.gpu_share, 1, kWholeGpuShare); !s.ok()) return s;
    if (spec.gpus_per_replica != 1) {
      return Invalid("gpu_share", absl::StrCat("needs gpus_per_replica 1 (a share is of one GPU), "
                                               "got gpus_per_replica ",
                                               spec.gpus_per_replica));
    }
  }
  if (spec.gpu_memory != 0) {
    if (spec.gpu_share == 0) {
      return Invalid("gpu_memory",
                     "is only allowed with gpu_share (a whole GPU's memory is "
                     "all its own)");
    }
    if (auto s = CheckRange("gpu_memory", spec.gpu_memory, int64_t{1} << 20, kMaxGpuMemory);
        !s.ok()) {
      return s;
    }
  }
  if (!spec.gpu_type.empty()) {
    if (!IsGpuType(spec.gpu_type)) {
      return Invalid("gpu_type", absl::StrCat("must be 1..", kMaxGpuType,
                                              " characters of a-z, 0-9, '-' and '.' (e.g. t4, "
                                              "h100, h100-1g.10gb) or empty for any; got ",
                                              Shown(spec.gpu_type)));
    }
    if (spec.gpus_per_replica == 0) {
      return Invalid("gpu_type", "must be empty when gpus_per_replica is 0 (CPU ranks)");
    }
  }
  if (spec.trainer.has_value() == spec.command.has_value()) {
    return Invalid("workload", "set exactly one of trainer or command");
  }
  if (spec.trainer) {
    if (auto s = CheckTrainer(*spec.trainer); !s.ok()) return s;
  } else if (auto s = CheckCommand(*spec.command); !s.ok()) {
    return s;
  }
  if (!spec.backoff_limit) spec.backoff_limit = kDefaultBackoffLimit;
  if (auto s = CheckRange("backoff_limit", *spec.backoff_limit, 0, kMaxBackoffLimit); !s.ok()) {
    return s;
  }
  if (auto s = CheckRange("max_runtime_seconds", spec.max_runtime_seconds, 0, kMaxRuntimeSeconds);
      !s.ok()) {
    return s;
  }
  if (spec.progress_timeout_seconds) {
    if (auto s = CheckRange("progress_timeout_seconds", *spec.progress_timeout_seconds, 0,
                            kMaxRuntimeSeconds);
        !s.ok()) {
      return s;
    }
  }
  if (auto s = CheckLabels(spec.labels); !s.ok()) return s;
  if (auto s = CheckEnvironment(spec); !s.ok()) return s;
  if (auto s = ValidateDependencies(spec.after); !s.ok()) return s;
  if (auto s = ValidateArray(spec); !s.ok()) return s;
  return spec;
}

absl::Status ValidateQueueName(const std::string& queue, const std::string& field) {
  return CheckDnsLabel(field, queue);
}

absl::StatusOr<Queue> ValidateQueue(const Queue& in) {
  Queue queue = in;
  if (auto s = CheckDnsLabel("name", queue.name); !s.ok()) return s;
  if (!queue.cohort.empty()) {
    if (auto s = CheckDnsLabel("cohort", queue.cohort); !s.ok()) return s;
  }
  if (queue.weight == 0) queue.weight = 1;
  if (auto s = CheckRange("weight", queue.weight, 1, kMaxQueueWeight); !s.ok()) return s;
  if (queue.teams.size() > 64) {
    return Invalid("teams", absl::StrCat("at most 64 allowed, got ", queue.teams.size()));
  }
  for (size_t i = 0; i < queue.teams.size(); ++i) {
    if (auto s = ValidateTeamName(queue.teams[i], absl::StrCat("teams[", i, "]")); !s.ok()) {
      return s;
    }
  }
  std::sort(queue.teams.begin(), queue.teams.end());
  queue.teams.erase(std::unique(queue.teams.begin(), queue.teams.end()), queue.teams.end());
  if (queue.quotas.size() > kMaxQueueResources) {
    return Invalid("resources", absl::StrCat("at most ", kMaxQueueResources, " allowed, got ",
                                             queue.quotas.size()));
  }
  for (const auto& [resource, quota] : queue.quotas) {
    if (!IsGpuType(resource)) {
      return Invalid("resources",
                     absl::StrCat("names must be a GPU type (1..", kMaxGpuType,
                                  " characters of a-z, 0-9, '-' and '.', e.g. t4, "
                                  "v100) or \"",
                                  kCpuResource, "\" for CPU slots; got ", Shown(resource)));
    }
    const std::string field = absl::StrCat("resources.", resource);
    if (auto s = CheckRange(field + ".nominal", quota.nominal, 0, kMaxQuota); !s.ok()) return s;
    if (quota.borrowing_limit) {
      if (queue.cohort.empty()) {
        return Invalid(field + ".borrowing_limit",
                       "must be unset when the queue has no cohort (there is nobody to borrow "
                       "from)");
      }
      if (auto s = CheckRange(field + ".borrowing_limit", *quota.borrowing_limit, 0, kMaxQuota);
          !s.ok()) {
        return s;
      }
    }
    if (quota.lending_limit) {
      if (queue.cohort.empty()) {
        return Invalid(field + ".lending_limit",
                       "must be unset when the queue has no cohort (there is nobody to lend to)");
      }
      if (*quota.lending_limit < 0 || *quota.lending_limit > quota.nominal) {
        return Invalid(field + ".lending_limit", absl::StrCat("must be 0..nominal (", quota.nominal,
                                                              "), got ", *quota.lending_limit));
      }
    }
  }
  switch (queue.within_queue) {
    case PreemptWithinQueue::kNever:
    case PreemptWithinQueue::kLowerPriority:
    case PreemptWithinQueue::kLowerOrNewerEqualPriority:
      break;
    default:
      return Invalid("within_queue", absl::StrCat("must be Never, LowerPriority or "
                                                  "LowerOrNewerEqualPriority; got value ",
                                                  static_cast<int>(queue.within_queue)));
  }
  switch (queue.reclaim_within_cohort) {
    case ReclaimWithinCohort::kNever:
    case ReclaimWithinCohort::kLowerPriority:
    case ReclaimWithinCohort::kAny:
      break;
    default:
      return Invalid("reclaim_within_cohort",
                     absl::StrCat("must be Never, LowerPriority or Any; got value ",
                                  static_cast<int>(queue.reclaim_within_cohort)));
  }
  if (auto s =
          CheckRange("min_runtime_seconds", queue.min_runtime_seconds, 0, kMaxMinRuntimeSeconds);
      !s.ok()) {
    return s;
  }
  if (queue.progress_timeout_seconds) {
    if (auto s = CheckRange("progress_timeout_seconds", *queue.progress_timeout_seconds, 0,
                            kMaxMinRuntimeSeconds);
        !s.ok()) {
      return s;
    }
  }
  if (auto s =
          CheckRange("idle_timeout_seconds", queue.idle_timeout_seconds, 0, kMaxMinRuntimeSeconds);
      !s.ok()) {
    return s;
  }
  if (queue.elastic_idle_delay_seconds) {
    if (auto s = CheckRange("elastic_idle_delay_seconds", *queue.elastic_idle_delay_seconds,
                            kMinElasticIdleDelaySeconds, kMaxElasticIdleDelaySeconds);
        !s.ok()) {
      return s;
    }
  }
  return queue;
}

absl::Status ValidateRequestId(const std::string& request_id) {
  if (request_id.size() > 128) {
    return Invalid("request_id", absl::StrCat("must be at most 128 characters, got ", request_id.size()));
  }
  for (char c : request_id) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != ':' && c != '-') {
      return Invalid("request_id", absl::StrCat("must be characters of [A-Za-z0-9._:-]; got ",
                                                Shown(request_id)));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateJobId(const std::string& job_id, const std::string& field) {
  // "j-" and lower-case hex, or a task of an array: that, '-' and its index (core/array.h).
  const size_t dash = job_id.find('-', 2);
  const absl::string_view id = absl::string_view(job_id).substr(0, dash);
  bool ok = id.size() > 2 && job_id.size() <= 64 && absl::StartsWith(job_id, "j-");
  for (size_t i = 2; ok && i < id.size(); ++i) {
    ok = absl::ascii_isxdigit(id[i]) && !absl::ascii_isupper(id[i]);
  }
  if (ok && dash != std::string::npos) ok = ParseTaskId(job_id).has_value();
  if (!ok) {
    return Invalid(field, absl::StrCat("must be a job id like j-3f9c2a41b7d0 (or j-3f9c2a41b7d0-17 "
                                       "for task 17 of an array); got ",
                                       Shown(job_id)));
  }
  return absl::OkStatus();
}

absl::Status ValidateWorker(const Worker& worker) {
  bool id_ok = !worker.id.empty() && worker.id.size() <= 63;
  for (char c : worker.id) {
    id_ok = id_ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' || c == '-');
  }
  if (!id_ok) {
    return Invalid("worker_id", absl::StrCat("must be 1..63 characters of a-z, 0-9, '.' and '-'; got ",
                                             Shown(worker.id)));
  }
  bool addr_ok = !worker.address.empty() && worker.address.size() <= 253;
  for (char c : worker.address) {
    addr_ok = addr_ok && (absl::ascii_isalnum(c) || c == '.' || c == '-' || c == ':');
  }
  if (!addr_ok) {
    return Invalid("address", absl::StrCat("must be a host name or IP address; got ",
                                           Shown(worker.address)));
  }
  if (auto s = CheckRange("port", worker.port, 1, 65535); !s.ok()) return s;
  if (worker.gpus.size() > kMaxGpusPerWorker) {
    return Invalid("gpus", absl::StrCat("at most ", kMaxGpusPerWorker, " per worker, got ",
                                        worker.gpus.size()));
  }
  std::set<int32_t> seen;
  for (const Gpu& gpu : worker.gpus) {
    std::string field = absl::StrCat("gpus[", gpu.index, "]");
    if (auto s = CheckRange("gpus.index", gpu.index, 0, 1023); !s.ok()) return s;
    if (!seen.insert(gpu.index).second) return Invalid(field, "index appears twice");
    if (!IsGpuType(gpu.type)) {
      return Invalid(field + ".type",
                     absl::StrCat("must be 1..", kMaxGpuType,
                                  " characters of a-z, 0-9, '-' and '.'; got ", Shown(gpu.type)));
    }
    if (gpu.memory_bytes < 0) return Invalid(field + ".memory_bytes", "must not be negative");
  }
  return CheckRange("cpu_slots", worker.cpu_slots, 0, kMaxCpuSlots);
}

absl::Status CheckRequestIdReuse(const Job& existing, const Job& asked) {
  if (existing.team != asked.team) {
    return absl::AlreadyExistsError(
        absl::StrCat("request_id ", asked.request_id, " is already used; choose another"));
  }
  if (!(existing.spec == asked.spec)) {
    return absl::AlreadyExistsError(absl::StrCat("request_id ", asked.request_id,
                                                 " was already used for a different spec (job ",
                                                 existing.id, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckGpuMemoryFits(const JobSpec& spec, const std::vector<const Worker*>& workers) {
  if (spec.gpu_memory == 0) return absl::OkStatus();
  bool any = false;
  int64_t largest = 0;
  for (const Worker* worker : workers) {
    for (const Gpu& gpu : worker->gpus) {
      if (!spec.gpu_type.empty() && gpu.type != spec.gpu_type) continue;
      any = true;
      largest = std::max(largest, gpu.memory_bytes);
    }
  }
  if (!any || spec.gpu_memory <= largest) return absl::OkStatus();
  return Invalid("gpu_memory",
                 absl::StrCat("must be at most ", largest, " bytes, the memory of the largest ",
                              spec.gpu_type.empty() ? "GPU" : spec.gpu_type,
                              " in the cluster; got ", spec.gpu_memory));
}

}  // namespace ringmaster::scheduler
