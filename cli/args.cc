#include "args.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "common/bearer_token.h"
#include "common/net.h"
#include "common/status_macros.h"
#include "config.h"
#include "environment_flags.h"
#include "study.h"

namespace ringmaster::cli {
namespace {

struct VerbInfo {
  Verb verb;
  const char* name;
  const char* synopsis;
  const char* summary;
};

constexpr std::array<VerbInfo, 12> kVerbs = {{
    {Verb::kSubmit, "submit", "submit [-f FILE] [FLAGS] [--wait | --follow] [-- CMD ARGS...]",
     "Submit a job; prints its id. --wait/--follow: exit 0 only if it SUCCEEDED."},
    {Verb::kGet, "get", "get ID",
     "Show one job: state, placement, times, exit code; an array: its tasks' states."},
    {Verb::kList, "list", "list [--state S] [--queue Q] [-l SELECTOR] [--array ID] [--limit N]",
     "List jobs and arrays, newest first (all of them, fetched a page at a time); --array ID: "
     "the array's tasks."},
    {Verb::kCancel, "cancel", "cancel ID [--reason R]",
     "Cancel a job, stopping all of its ranks; an array: every task not ended."},
    {Verb::kWatch, "watch", "watch ID",
     "Stream a job's events until it ends; exit 0 only if it SUCCEEDED."},
    {Verb::kWorkers, "workers", "workers | workers clear WORKER",
     "List workers with their GPUs, CPU slots and health; `clear` puts a worker that a failed "
     "pre-run check marked unhealthy back into placement."},
    {Verb::kLogs, "logs", "logs ID [--index I] [--rank R] [--attempt N] [-f]",
     "Print a rank's output (--index I: of task I of the array ID), read from the worker it ran "
     "on; -f follows it."},
    {Verb::kQueue, "queue", "queue create -f FILE | get NAME | list | update -f FILE | delete NAME",
     "Manage queues: quotas per GPU type, cohort, weight, preemption settings."},
    {Verb::kStudy, "study",
     "study scaling --gpus 1,2,4,8 [FLAGS] [-- CMD ARGS...] | list | get ID | compare ID ID",
     "Run a scaling study (one job per size, images/sec, speedup, efficiency, chart); show or "
     "compare stored ones."},
    {Verb::kAdmin, "admin",
     "admin token create --team T --role R [--expires 30d] | token list [--all] | token revoke "
     "ID | audit [--limit N]",
     "Bearer tokens and the audit trail (needs an admin token)."},
    {Verb::kVolume, "volume",
     "volume create NAME --path P [--grant TEAM[:ro]]... [--description D] | update NAME ... | "
     "get NAME | list | delete NAME",
     "Cluster volumes that jobs mount (docs/environments.md); writes need an admin token."},
    {Verb::kRegistry, "registry",
     "registry set REGISTRY --username U (--password-stdin | --password-file F) [--team T] | "
     "list [--team T | --all] | delete REGISTRY [--team T]",
     "A team's credentials for a private image registry (docs/environments.md); the secret is "
     "read from stdin or a file and never shown again."},
}};

// `registry ACTION [REGISTRY]` from the positional arguments (consumed).
absl::Status ParseRegistryArgs(std::vector<std::string>& positional, Command* cmd) {
  constexpr const char* kUsage = "expected set, list or delete (see ringctl registry --help)";
  if (positional.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("missing registry action: ", kUsage));
  }
  const std::string action = positional.front();
  positional.erase(positional.begin());
  if (action == "set") cmd->registry_action = RegistryAction::kSet;
  if (action == "list") cmd->registry_action = RegistryAction::kList;
  if (action == "delete") cmd->registry_action = RegistryAction::kDelete;
  if (cmd->registry_action == RegistryAction::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown registry action '", action, "': ", kUsage));
  }
  if (cmd->registry_action != RegistryAction::kList) {
    if (positional.empty() || positional.front().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "missing REGISTRY, a HOST[:PORT] (usage: ringctl registry ", action, " REGISTRY)"));
    }
    cmd->registry = positional.front();
    positional.erase(positional.begin());
  }
  const bool set = cmd->registry_action == RegistryAction::kSet;
  if (set && (cmd->registry_username.empty() || cmd->registry_password_file.empty())) {
    return absl::InvalidArgumentError(
        "registry set needs --username U and the secret from --password-stdin or "
        "--password-file F (never from a flag's value, which shell history keeps)");
  }
  if (!set && (!cmd->registry_username.empty() || !cmd->registry_password_file.empty())) {
    return absl::InvalidArgumentError(
        "--username, --password-stdin and --password-file belong to registry set");
  }
  if (cmd->all_tokens && cmd->registry_action != RegistryAction::kList) {
    return absl::InvalidArgumentError("--all belongs to registry list");
  }
  if (cmd->all_tokens && !cmd->token_team.empty()) {
    return absl::InvalidArgumentError("registry list takes --team T or --all, not both");
  }
  return absl::OkStatus();
}

absl::Status ParseAdminArgs(std::vector<std::string>& positional, Command* cmd) {
  constexpr const char* kUsage =
      "expected token create, token list, token revoke ID or audit (see ringctl admin --help)";
  if (positional.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("missing admin action: ", kUsage));
  }
  const std::string first = positional.front();
  positional.erase(positional.begin());
  if (first == "audit") {
    cmd->admin_action = AdminAction::kAudit;
  } else if (first == "token" && !positional.empty()) {
    const std::string action = positional.front();
    positional.erase(positional.begin());
    if (action == "create") cmd->admin_action = AdminAction::kTokenCreate;
    if (action == "list") cmd->admin_action = AdminAction::kTokenList;
    if (action == "revoke") {
      if (positional.empty()) {
        return absl::InvalidArgumentError(
            "missing token ID (usage: ringctl admin token revoke ID)");
      }
      cmd->admin_action = AdminAction::kTokenRevoke;
      cmd->token_id = positional.front();
      positional.erase(positional.begin());
    }
  }
  if (cmd->admin_action == AdminAction::kNone) {
    return absl::InvalidArgumentError(absl::StrCat("unknown admin action: ", kUsage));
  }
  if (cmd->admin_action == AdminAction::kTokenCreate &&
      (cmd->token_team.empty() || cmd->token_role.empty())) {
    return absl::InvalidArgumentError(
        "admin token create needs --team T and --role R (admin, member or viewer)");
  }
  if (cmd->admin_action != AdminAction::kTokenCreate &&
      (!cmd->token_team.empty() || !cmd->token_role.empty() || !cmd->token_expires.empty() ||
       !cmd->token_description.empty())) {
    return absl::InvalidArgumentError(
        "--team, --role, --expires and --description belong to admin token create");
  }
  if (cmd->all_tokens && cmd->admin_action != AdminAction::kTokenList) {
    return absl::InvalidArgumentError("--all belongs to admin token list");
  }
  return absl::OkStatus();
}

struct QueueActionInfo {
  QueueAction action;
  const char* name;
};

constexpr std::array<QueueActionInfo, 5> kQueueActions = {{
    {QueueAction::kCreate, "create"},
    {QueueAction::kGet, "get"},
    {QueueAction::kList, "list"},
    {QueueAction::kUpdate, "update"},
    {QueueAction::kDelete, "delete"},
}};

// `volume ACTION [NAME]` from the positional arguments (consumed).
absl::Status ParseVolumeArgs(std::vector<std::string>& positional, Command* cmd) {
  static constexpr std::array<std::pair<const char*, VolumeAction>, 5> kActions = {{
      {"create", VolumeAction::kCreate},
      {"get", VolumeAction::kGet},
      {"list", VolumeAction::kList},
      {"update", VolumeAction::kUpdate},
      {"delete", VolumeAction::kDelete},
  }};
  if (positional.empty()) {
    return absl::InvalidArgumentError(
        "missing volume action: create, get, list, update or delete (see ringctl volume --help)");
  }
  const std::string action = positional.front();
  positional.erase(positional.begin());
  for (const auto& [name, value] : kActions) {
    if (action == name) cmd->volume_action = value;
  }
  if (cmd->volume_action == VolumeAction::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown volume action '", action,
        "' (expected create, get, list, update or delete; see ringctl volume --help)"));
  }
  const bool writes = cmd->volume_action == VolumeAction::kCreate ||
                      cmd->volume_action == VolumeAction::kUpdate;
  if (cmd->volume_action != VolumeAction::kList) {
    if (positional.empty() || positional.front().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing volume NAME (usage: ringctl volume ", action, " NAME)"));
    }
    cmd->volume_name = positional.front();
    positional.erase(positional.begin());
  }
  if (writes && cmd->volume_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("volume ", action, " needs --path P"));
  }
  if (!writes && (!cmd->volume_path.empty() || !cmd->volume_grants.empty() ||
                  !cmd->token_description.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume ", action, " does not take --path, --grant or --description"));
  }
  return absl::OkStatus();
}

// `queue ACTION [NAME]` from the positional arguments (consumed).
absl::Status ParseQueueArgs(std::vector<std::string>& positional, Command* cmd) {
  if (positional.empty()) {
    return absl::InvalidArgumentError(
        "missing queue action: create, get, list, update or delete (see ringctl queue --help)");
  }
  const std::string action = positional.front();
  positional.erase(positional.begin());
  for (const QueueActionInfo& info : kQueueActions) {
    if (action == info.name) cmd->queue_action = info.action;
  }
  switch (cmd->queue_action) {
    case QueueAction::kNone:
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown queue action '", action,
          "' (expected create, get, list, update or delete; see ringctl queue --help)"));
    case QueueAction::kGet:
    case QueueAction::kDelete:
      if (positional.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("missing queue NAME (usage: ringctl queue ", action, " NAME)"));
      }
      cmd->queue_name = positional.front();
      positional.erase(positional.begin());
      break;
    case QueueAction::kCreate:
    case QueueAction::kUpdate:
      if (cmd->spec_file.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "queue ", action, " needs -f FILE (a YAML queue, see docs/examples/queue.yaml)"));
      }
      break;
    case QueueAction::kList:
      break;
  }
  if (!cmd->spec_file.empty() && cmd->queue_action != QueueAction::kCreate &&
      cmd->queue_action != QueueAction::kUpdate) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue ", action, " does not take -f (only create and update do)"));
  }
  return absl::OkStatus();
}

// `study ACTION [ID...]` from the positional arguments (consumed).
absl::Status ParseStudyArgs(std::vector<std::string>& positional, Command* cmd) {
  if (positional.empty()) {
    return absl::InvalidArgumentError(
        "missing study action: scaling, list, get or compare (see ringctl study --help)");
  }
  const std::string action = positional.front();
  positional.erase(positional.begin());
  size_t ids = 0;
  if (action == "scaling") {
    cmd->study_action = StudyAction::kScaling;
    if (cmd->study_sizes.empty()) {
      return absl::InvalidArgumentError("study scaling needs --gpus (such as --gpus 1,2,4,8)");
    }
  } else if (action == "list") {
    cmd->study_action = StudyAction::kList;
  } else if (action == "get") {
    cmd->study_action = StudyAction::kGet;
    ids = 1;
  } else if (action == "compare") {
    cmd->study_action = StudyAction::kCompare;
    ids = 2;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown study action '", action,
        "' (expected scaling, list, get or compare; see ringctl study --help)"));
  }
  if (positional.size() < ids) {
    return absl::InvalidArgumentError(absl::StrCat("missing study ID (usage: ringctl study ",
                                                   action, ids == 1 ? " ID)" : " ID ID)"));
  }
  cmd->study_ids.assign(positional.begin(), positional.begin() + static_cast<std::ptrdiff_t>(ids));
  positional.erase(positional.begin(), positional.begin() + static_cast<std::ptrdiff_t>(ids));
  if (cmd->study_action != StudyAction::kScaling &&
      (!cmd->study_sizes.empty() || cmd->study_parallel || cmd->study_cpu || !cmd->chart.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("study ", action, " takes no --gpus, --parallel, --cpu or --chart (only "
                                       "study scaling does)"));
  }
  return absl::OkStatus();
}

struct FlagSpec {
  const char* name;
  char short_name;
  // Commands that accept the flag; empty for a global flag.
  std::vector<Verb> verbs;
  // Placeholder of the value in usage; nullptr for a flag without a value.
  const char* value_name;
  const char* help;
};

const std::vector<FlagSpec>& Flags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"scheduler",
       0,
       {},
       "ADDR",
       "scheduler host:port (env RINGMASTER_SCHEDULER; default localhost:7070)"},
      {"output", 'o', {}, "FORMAT", "table (default) or json (protobuf JSON, for scripts)"},
      {"tls-ca",
       0,
       {},
       "FILE",
       "CA bundle (PEM) the scheduler is verified against (env RINGMASTER_TLS_CA; default: the "
       "system's roots)"},
      {"tls-cert",
       0,
       {},
       "FILE",
       "client certificate (PEM) sent to the scheduler; no command needs one "
       "(env RINGMASTER_TLS_CERT)"},
      {"tls-key", 0, {}, "FILE", "key of --tls-cert (env RINGMASTER_TLS_KEY)"},
      {"token",
       0,
       {},
       "TOKEN",
       "bearer token (env RINGMASTER_TOKEN; default: the file "
       "${XDG_CONFIG_HOME:-~/.config}/ringmaster/token)"},
      {"insecure",
       0,
       {},
       nullptr,
       "plaintext gRPC, for a development cluster on loopback (env RINGMASTER_INSECURE=1)"},
      {"help", 'h', {}, nullptr, "print usage"},
      {"file",
       'f',
       {Verb::kSubmit, Verb::kQueue},
       "FILE",
       "YAML job spec, or queue for queue create/update ('-' reads stdin)"},
      {"name", 0, {Verb::kSubmit}, "NAME", "job name (default: train, or the program run)"},
      {"queue",
       0,
       {Verb::kSubmit, Verb::kList, Verb::kStudy},
       "QUEUE",
       "queue (list: only this queue)"},
      {"priority", 0, {Verb::kSubmit}, "N", "priority, higher runs first"},
      {"replicas",
       0,
       {Verb::kSubmit},
       "N|MIN:MAX",
       "number of ranks; MIN:MAX: an elastic job asking for MAX, run with MIN to MAX"},
      {"sizes-divide",
       0,
       {Verb::kSubmit},
       "N",
       "an elastic job runs only at sizes that divide N (e.g. its global batch)"},
      {"gpus-per-replica", 0, {Verb::kSubmit}, "N", "GPUs per rank (0: CPU ranks)"},
      {"gpu-share",
       0,
       {Verb::kSubmit},
       "FRACTION",
       "a share of one GPU per rank, e.g. 0.25 (docs/gpu-sharing.md; sets --gpus-per-replica 1)"},
      {"gpu-memory", 0, {Verb::kSubmit}, "SIZE", "device memory per shared rank, e.g. 10Gi"},
      {"gpu-type",
       0,
       {Verb::kSubmit, Verb::kStudy},
       "TYPE",
       "GPU type every rank needs (t4, v100, ...)"},
      {"model",
       0,
       {Verb::kSubmit, Verb::kStudy},
       "MODEL",
       "trainer model (mlp-small, mlp, mlp-large)"},
      {"steps", 0, {Verb::kSubmit, Verb::kStudy}, "N", "trainer SGD steps"},
      {"batch-size", 0, {Verb::kSubmit, Verb::kStudy}, "N", "trainer samples per rank per step"},
      {"checkpoint-every",
       0,
       {Verb::kSubmit},
       "N",
       "trainer checkpoint every N steps (0: only when stopped)"},
      {"restart-policy", 0, {Verb::kSubmit}, "POLICY", "Never or OnFailure"},
      {"backoff-limit", 0, {Verb::kSubmit}, "N", "restarts allowed under OnFailure"},
      {"max-runtime-seconds", 0, {Verb::kSubmit}, "N", "wall-clock limit per attempt (0: none)"},
      {"label", 0, {Verb::kSubmit, Verb::kStudy}, "K=V", "add a label (repeatable)"},
      {"image", 0, {Verb::kSubmit}, "REF", "OCI image every rank runs in (docs/environments.md)"},
      {"mount",
       0,
       {Verb::kSubmit},
       "VOL:PATH[:ro|:rw]",
       "mount a cluster volume into the containers (repeatable; needs --image)"},
      {"shm-size", 0, {Verb::kSubmit}, "SIZE", "size of /dev/shm, e.g. 8Gi (needs --image)"},
      {"workdir", 0, {Verb::kSubmit}, "PATH", "working directory in the container"},
      {"after",
       0,
       {Verb::kSubmit},
       "JOB[:COND]",
       "wait for JOB to end: COND succeeded (default), ended or failed; repeatable"},
      {"use-mpirun",
       0,
       {Verb::kSubmit},
       nullptr,
       "start a one-rank job under mpirun (default: directly, as an MPI singleton)"},
      // Two flags of one name: submit's makes an array, list's picks one (ApplyFlag).
      {"array",
       0,
       {Verb::kSubmit},
       "N|0-M[%P]",
       "an array of tasks 0..N-1 (or 0..M), at most P at once, e.g. 0-999%50 (command only)"},
      {"gpus",
       0,
       {Verb::kStudy},
       "N,N,...",
       "study scaling: the sizes, in GPUs (one job each, one GPU per rank)"},
      {"parallel",
       0,
       {Verb::kStudy},
       nullptr,
       "study scaling: submit every size at once (default: one after the other)"},
      {"cpu", 0, {Verb::kStudy}, nullptr, "study scaling: CPU ranks instead of GPUs"},
      {"chart",
       0,
       {Verb::kStudy},
       "FILE",
       "study scaling: write the SVG chart here (default: next to the stored study)"},
      {"request-id", 0, {Verb::kSubmit}, "ID", "idempotency key (default: random per invocation)"},
      {"retry-seconds",
       0,
       {Verb::kSubmit},
       "N",
       "keep retrying an unreachable scheduler for up to N s, same request id (default 30; 0: "
       "once)"},
      {"wait",
       0,
       {Verb::kSubmit},
       nullptr,
       "wait until the job ends; exit 0 if it SUCCEEDED, 5 if it FAILED or was CANCELLED"},
      {"follow",
       0,
       {Verb::kSubmit},
       nullptr,
       "like --wait, printing rank 0's output while the job runs"},
      {"state",
       0,
       {Verb::kList},
       "STATE",
       "only jobs in this state (pending, starting, running, succeeded, failed, cancelled)"},
      {"selector",
       'l',
       {Verb::kList},
       "SELECTOR",
       "only jobs whose labels match: team=vision,env!=prod,gpu,!spot (comma: and)"},
      {"limit",
       0,
       {Verb::kList, Verb::kAdmin},
       "N",
       "at most N jobs (default: all); admin audit: at most N entries (default 100)"},
      {"team",
       0,
       {Verb::kAdmin, Verb::kRegistry},
       "T",
       "admin token create: the token's team; registry: the team (default: the token's)"},
      {"username", 0, {Verb::kRegistry}, "U", "registry set: the user name at the registry"},
      {"password-stdin",
       0,
       {Verb::kRegistry},
       nullptr,
       "registry set: read the password or token from standard input"},
      {"password-file",
       0,
       {Verb::kRegistry},
       "FILE",
       "registry set: read the password or token from FILE (one trailing newline is dropped)"},
      {"role", 0, {Verb::kAdmin}, "R", "admin token create: admin, member or viewer"},
      {"expires",
       0,
       {Verb::kAdmin},
       "D",
       "admin token create: lifetime, e.g. 30d, 12h, 90m (default: never expires)"},
      {"description",
       0,
       {Verb::kAdmin, Verb::kVolume},
       "TEXT",
       "admin token create: what the token is for; volume create/update: what it holds"},
      {"path", 0, {Verb::kVolume}, "PATH", "volume create/update: the directory on the workers"},
      {"grant",
       0,
       {Verb::kVolume},
       "TEAM[:ro]",
       "volume create/update: a team that may mount it (:ro: read-only); repeatable"},
      {"all",
       0,
       {Verb::kAdmin, Verb::kRegistry},
       nullptr,
       "admin token list: revoked and expired tokens too; registry list: every team's (admin)"},
      {"array", 0, {Verb::kList}, "ID", "only the tasks of this array"},
      {"page-size", 0, {Verb::kList}, "N", "jobs per ListJobs call (default 500, at most 1000)"},
      {"reason", 0, {Verb::kCancel}, "TEXT", "reason kept in the job's events"},
      {"rank", 0, {Verb::kLogs}, "R", "the rank whose output to print (default 0)"},
      {"attempt", 0, {Verb::kLogs}, "N", "an earlier attempt (default: the current or last)"},
      {"index", 0, {Verb::kLogs}, "I", "ID is an array: read task I's log (job ID-I)"},
      {"follow", 'f', {Verb::kLogs}, nullptr, "keep printing new output until the rank ends"},
  };
  return *flags;
}

bool AppliesTo(const FlagSpec& flag, Verb verb) {
  return flag.verbs.empty() ||
         std::find(flag.verbs.begin(), flag.verbs.end(), verb) != flag.verbs.end();
}

// A short name may mean different flags for different commands (-f: submit's --file, logs'
// --follow); the one of `verb` wins.
const FlagSpec* FindFlag(absl::string_view name, bool is_short, Verb verb) {
  const FlagSpec* found = nullptr;
  for (const FlagSpec& flag : Flags()) {
    if (is_short ? (name.size() == 1 && flag.short_name == name[0]) : name == flag.name) {
      if (AppliesTo(flag, verb)) return &flag;
      if (found == nullptr) found = &flag;
    }
  }
  return found;
}

const char* VerbName(Verb verb) {
  for (const VerbInfo& info : kVerbs) {
    if (info.verb == verb) return info.name;
  }
  return "";
}

std::optional<Verb> FindVerb(absl::string_view name) {
  for (const VerbInfo& info : kVerbs) {
    if (name == info.name) return info.verb;
  }
  return std::nullopt;
}

absl::StatusOr<int64_t> ParseInteger(absl::string_view flag, const std::string& value,
                                     bool allow_negative, bool fits_int32) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": expected an integer, got '", value, "'"));
  }
  if (fits_int32 &&
      (n < std::numeric_limits<int32_t>::min() || n > std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": out of range for a 32-bit integer: ", value));
  }
  if (!allow_negative && n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": must not be negative, got ", value));
  }
  return n;
}

absl::StatusOr<int32_t> ParseInt32(absl::string_view flag, const std::string& value,
                                   bool allow_negative = false) {
  RM_ASSIGN_OR_RETURN(int64_t n, ParseInteger(flag, value, allow_negative, true));
  return static_cast<int32_t>(n);
}

absl::Status ApplyFlag(const FlagSpec& flag, const std::string& value, Command* cmd) {
  const absl::string_view name = flag.name;
  SpecOverrides& o = cmd->overrides;
  if (name == "scheduler") {
    // gRPC target syntax (dns:///..., unix:...) passes through; a bare address must be
    // host:port so that a typo fails here and not as "unreachable".
    if (!absl::StrContains(value, "://") && !absl::StartsWith(value, "unix:")) {
      std::string host;
      int port = 0;
      RM_RETURN_IF_ERROR(SplitHostPort(value, "--scheduler", &host, &port));
    }
    cmd->scheduler = value;
  } else if (name == "token") {
    cmd->token = value;
  } else if (name == "tls-ca") {
    cmd->tls.ca_file = value;
  } else if (name == "tls-cert") {
    cmd->tls.cert_file = value;
  } else if (name == "tls-key") {
    cmd->tls.key_file = value;
  } else if (name == "output") {
    if (value == "table") {
      cmd->output = OutputFormat::kTable;
    } else if (value == "json") {
      cmd->output = OutputFormat::kJson;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("-o/--output: expected table or json, got '", value, "'"));
    }
  } else if (name == "file") {
    cmd->spec_file = value;
  } else if (name == "name") {
    o.name = value;
  } else if (name == "gpus") {
    RM_ASSIGN_OR_RETURN(cmd->study_sizes, ParseStudySizes(value));
  } else if (name == "chart") {
    if (value.empty()) return absl::InvalidArgumentError("--chart: must not be empty");
    cmd->chart = value;
  } else if (name == "queue") {
    if (cmd->verb == Verb::kSubmit || cmd->verb == Verb::kStudy) {
      o.queue = value;
    } else {
      cmd->queue = value;
    }
  } else if (name == "priority") {
    RM_ASSIGN_OR_RETURN(o.priority, ParseInt32(name, value, /*allow_negative=*/true));
  } else if (name == "replicas") {
    // MIN:MAX: an elastic job that asks for MAX ranks and may run with as few as MIN.
    if (auto colon = value.find(':'); colon != std::string::npos) {
      RM_ASSIGN_OR_RETURN(o.min_replicas, ParseInt32(name, value.substr(0, colon)));
      RM_ASSIGN_OR_RETURN(o.max_replicas, ParseInt32(name, value.substr(colon + 1)));
      if (*o.min_replicas < 1 || *o.min_replicas > *o.max_replicas) {
        return absl::InvalidArgumentError(
            absl::StrCat("--replicas: MIN:MAX needs 1 <= MIN <= MAX, got '", value, "'"));
      }
      o.replicas = o.max_replicas;
    } else {
      RM_ASSIGN_OR_RETURN(o.replicas, ParseInt32(name, value));
    }
  } else if (name == "sizes-divide") {
    RM_ASSIGN_OR_RETURN(o.sizes_divide, ParseInt32(name, value));
  } else if (name == "gpus-per-replica") {
    RM_ASSIGN_OR_RETURN(o.gpus_per_replica, ParseInt32(name, value));
  } else if (name == "gpu-share") {
    RM_ASSIGN_OR_RETURN(o.gpu_share, ParseGpuShare(value, "--gpu-share"));
  } else if (name == "gpu-memory") {
    RM_ASSIGN_OR_RETURN(o.gpu_memory, ParseByteSize(value, "--gpu-memory"));
  } else if (name == "gpu-type") {
    o.gpu_type = value;
  } else if (name == "model") {
    o.model = value;
  } else if (name == "steps") {
    RM_ASSIGN_OR_RETURN(o.steps, ParseInteger(name, value, false, false));
  } else if (name == "batch-size") {
    RM_ASSIGN_OR_RETURN(o.batch_size, ParseInt32(name, value));
  } else if (name == "checkpoint-every") {
    RM_ASSIGN_OR_RETURN(o.checkpoint_every, ParseInt32(name, value));
  } else if (name == "restart-policy") {
    o.restart_policy = ParseRestartPolicy(value);
    if (!o.restart_policy) {
      return absl::InvalidArgumentError(
          absl::StrCat("--restart-policy: expected Never or OnFailure, got '", value, "'"));
    }
  } else if (name == "backoff-limit") {
    RM_ASSIGN_OR_RETURN(o.backoff_limit, ParseInt32(name, value));
  } else if (name == "max-runtime-seconds") {
    RM_ASSIGN_OR_RETURN(o.max_runtime_seconds, ParseInteger(name, value, false, false));
  } else if (name == "label") {
    auto eq = value.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label: expected KEY=VALUE, got '", value, "'"));
    }
    o.labels[value.substr(0, eq)] = value.substr(eq + 1);
  } else if (name == "image") {
    o.image = value;
  } else if (name == "mount") {
    RM_ASSIGN_OR_RETURN(v1::Mount mount, ParseMountFlag(value));
    o.mounts.push_back(std::move(mount));
  } else if (name == "shm-size") {
    RM_ASSIGN_OR_RETURN(o.shm_size_bytes, ParseByteSize(value, "--shm-size"));
  } else if (name == "workdir") {
    o.workdir = value;
  } else if (name == "after") {
    RM_ASSIGN_OR_RETURN(v1::JobDependency dependency, ParseDependency(value, "--after"));
    o.after.push_back(std::move(dependency));
  } else if (name == "array") {
    if (cmd->verb == Verb::kSubmit) {
      RM_ASSIGN_OR_RETURN(o.array, ParseArraySpec(value, "--array"));
    } else {
      // An empty id would list jobs and arrays, not what --array asked for.
      if (value.empty()) return absl::InvalidArgumentError("--array: expected an array's job ID");
      cmd->array_id = value;
    }
  } else if (name == "request-id") {
    if (value.empty()) return absl::InvalidArgumentError("--request-id: must not be empty");
    cmd->request_id = value;
  } else if (name == "retry-seconds") {
    RM_ASSIGN_OR_RETURN(int64_t seconds, ParseInteger(name, value, false, false));
    if (seconds > 3600) {
      return absl::InvalidArgumentError(
          absl::StrCat("--retry-seconds: must be 0..3600, got ", seconds));
    }
    cmd->retry_seconds = seconds;
  } else if (name == "state") {
    std::optional<v1::JobState> state = ParseJobState(value);
    if (!state) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--state: expected pending, starting, running, succeeded, failed or cancelled, got '",
          value, "'"));
    }
    cmd->state = *state;
  } else if (name == "team") {
    cmd->token_team = value;
  } else if (name == "role") {
    cmd->token_role = value;
  } else if (name == "expires") {
    cmd->token_expires = value;
  } else if (name == "description") {
    cmd->token_description = value;
  } else if (name == "path") {
    cmd->volume_path = value;
  } else if (name == "grant") {
    cmd->volume_grants.push_back(value);
  } else if (name == "username") {
    cmd->registry_username = value;
  } else if (name == "password-file") {
    if (value.empty()) return absl::InvalidArgumentError("--password-file: expected a FILE");
    cmd->registry_password_file = value;
  } else if (name == "limit") {
    RM_ASSIGN_OR_RETURN(cmd->limit, ParseInt32(name, value));
  } else if (name == "selector") {
    // Checked by the scheduler, whose message names the requirement.
    cmd->label_selector = value;
  } else if (name == "page-size") {
    RM_ASSIGN_OR_RETURN(cmd->page_size, ParseInt32(name, value));
  } else if (name == "reason") {
    cmd->reason = value;
  } else if (name == "rank") {
    RM_ASSIGN_OR_RETURN(cmd->rank, ParseInt32(name, value));
  } else if (name == "attempt") {
    RM_ASSIGN_OR_RETURN(cmd->attempt, ParseInt32(name, value));
  } else if (name == "index") {
    RM_ASSIGN_OR_RETURN(cmd->index, ParseInt32(name, value));
  }
  return absl::OkStatus();
}

// The CLI11 application of ringctl: one subcommand per verb with the flags of that verb and
// the global ones (so those go before or after the command), plus `help [COMMAND]`. Every flag
// is a plain option whose values ParseArgs reads back in argv order and checks with ApplyFlag,
// so the messages name the flag the same way whatever CLI11's own wording. Unknown flags are
// left to ParseArgs (allow_extras), which knows whether they belong to another command.
struct CliApp {
  CLI::App app{"Command-line client of the Ringmaster scheduler.", "ringctl"};
  CLI::App* help = nullptr;
  std::vector<std::string> help_args;
  std::map<Verb, CLI::App*> verbs;
  std::map<Verb, std::vector<std::string>> positional;
  std::map<const CLI::Option*, const FlagSpec*> specs;

  CliApp() {
    AddFlags(&app, Verb::kNone);
    // One command: after it, a word such as `get` in `queue get NAME` is the command's argument.
    app.require_subcommand(0, 1);
    help = app.add_subcommand("help", "Print the usage of ringctl or of one command.");
    AddFlags(help, Verb::kNone);
    help->add_option("command", help_args);
    for (const VerbInfo& info : kVerbs) {
      CLI::App* sub = app.add_subcommand(info.name, info.summary);
      AddFlags(sub, info.verb);
      sub->add_option("args", positional[info.verb]);
      verbs[info.verb] = sub;
    }
  }

  void AddFlags(CLI::App* to, Verb verb) {
    to->set_help_flag();  // -h/--help is a FlagSpec: help wins over errors (ParseArgs)
    to->allow_extras();
    for (const FlagSpec& flag : Flags()) {
      if (verb == Verb::kNone ? !flag.verbs.empty() : !AppliesTo(flag, verb)) continue;
      std::string names = absl::StrCat("--", flag.name);
      if (flag.short_name != 0)
        names = absl::StrCat("-", std::string(1, flag.short_name), ",", names);
      CLI::Option* option = flag.value_name == nullptr ? to->add_flag(names, flag.help)
                                                       : to->add_option(names, flag.help);
      option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      specs[option] = &flag;
    }
  }
};

// The message for a flag CLI11 did not know in `verb` (kNone: before the command).
absl::Status UnknownFlag(const std::string& arg, Verb verb) {
  const bool is_short = arg[1] != '-';
  const std::string name = is_short ? arg.substr(1, 1) : arg.substr(2, arg.find('=') - 2);
  const std::string shown = is_short ? "-" + name : "--" + name;
  const FlagSpec* flag = FindFlag(name, is_short, verb);
  if (flag == nullptr) {
    const std::string help = verb == Verb::kNone
                                 ? "ringctl --help"
                                 : absl::StrCat("ringctl ", VerbName(verb), " --help");
    return absl::InvalidArgumentError(absl::StrCat("unknown flag ", shown, " (see ", help, ")"));
  }
  if (verb == Verb::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, " belongs to a command; put it after the command name"));
  }
  if (flag->value_name == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(shown, " is not a flag of ", VerbName(verb)));
  }
  return absl::InvalidArgumentError(absl::StrCat(VerbName(verb), " does not take ", shown,
                                                 " (see ringctl ", VerbName(verb), " --help)"));
}

}  // namespace

std::optional<v1::JobState> ParseJobState(const std::string& text) {
  std::string key = absl::AsciiStrToUpper(text);
  if (absl::StartsWith(key, "JOB_STATE_")) key = key.substr(10);
  for (int i = v1::JobState_MIN; i <= v1::JobState_MAX; ++i) {
    if (!v1::JobState_IsValid(i) || i == v1::JOB_STATE_UNSPECIFIED) continue;
    auto state = static_cast<v1::JobState>(i);
    if ("JOB_STATE_" + key == v1::JobState_Name(state)) return state;
  }
  return std::nullopt;
}

absl::StatusOr<Command> ParseArgs(const std::vector<std::string>& args, const GetEnvFn& getenv) {
  Command cmd;
  absl::Status first_error;
  auto fail = [&first_error](absl::Status status) {
    if (first_error.ok()) first_error = std::move(status);
  };
  // Everything after the first `--` is the command of a command workload, never flags.
  auto dash_dash = std::find(args.begin(), args.end(), "--");
  const bool saw_dash_dash = dash_dash != args.end();
  if (saw_dash_dash) cmd.overrides.command = std::vector<std::string>(dash_dash + 1, args.end());

  CliApp cli;
  // CLI11 reads `--name=` as `--name` and takes the next argument as the value; here it is the
  // empty value (which ApplyFlag may refuse by name), so `--name=` becomes `--name ""`.
  std::vector<std::string> reversed;
  for (auto arg = args.begin(); arg != dash_dash; ++arg) {
    if (arg->size() > 3 && absl::StartsWith(*arg, "--") && absl::EndsWith(*arg, "=")) {
      const std::string name = arg->substr(2, arg->size() - 3);
      if (std::any_of(Flags().begin(), Flags().end(), [&name](const FlagSpec& flag) {
            return flag.value_name != nullptr && name == flag.name;
          })) {
        reversed.insert(reversed.end(), {"--" + name, ""});
        continue;
      }
    }
    reversed.push_back(*arg);
  }
  std::reverse(reversed.begin(), reversed.end());  // CLI11 takes argv back to front
  try {
    cli.app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    // "--name: 1 required TEXT missing": argv ended where a value was due.
    const std::string what = e.what();
    if (absl::EndsWith(what, " missing")) {
      return absl::InvalidArgumentError(
          absl::StrCat(what.substr(0, what.find(':')), " needs a value"));
    }
    return absl::InvalidArgumentError(absl::StrCat(what, " (see ringctl --help)"));
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(absl::StrCat(e.what(), " (see ringctl --help)"));
  }

  // Which command, from the subcommand CLI11 entered; `help COMMAND` names one too.
  CLI::App* sub = nullptr;
  absl::Status command_error;
  for (const auto& [verb, app] : cli.verbs) {
    if (app->parsed()) {
      cmd.verb = verb;
      sub = app;
    }
  }
  if (cli.help->parsed()) {
    cmd.help = true;
    if (!cli.help_args.empty()) {
      if (std::optional<Verb> verb = FindVerb(cli.help_args.front()); verb) {
        cmd.verb = *verb;
      } else {
        command_error = absl::InvalidArgumentError(
            absl::StrCat("unknown command '", cli.help_args.front(), "' (see ringctl --help)"));
      }
    }
  }
  // What CLI11 did not recognise before the command: flags of some command, or a word that is
  // no command.
  for (const std::string& arg : cli.app.remaining()) {
    if (arg.size() >= 2 && arg[0] == '-') {
      fail(UnknownFlag(arg, Verb::kNone));
    } else if (command_error.ok() && !cli.help->parsed()) {
      command_error = absl::InvalidArgumentError(
          absl::StrCat("unknown command '", arg, "' (see ringctl --help)"));
      fail(command_error);
    }
  }
  std::vector<std::string> positional;
  if (sub != nullptr) {
    positional = cli.positional[cmd.verb];
    for (const std::string& arg : sub->remaining()) {
      if (arg.size() >= 2 && arg[0] == '-') {
        fail(UnknownFlag(arg, cmd.verb));
      } else {
        positional.push_back(arg);
      }
    }
  }

  // The flags' values in argv order: the global ones before the command, then the command's.
  for (CLI::App* app : {&cli.app, cli.help, sub}) {
    if (app == nullptr) continue;
    std::map<const CLI::Option*, size_t> next;
    for (const CLI::Option* option : app->parse_order()) {
      auto spec = cli.specs.find(option);
      if (spec == cli.specs.end()) continue;
      const FlagSpec& flag = *spec->second;
      const std::string& value = option->results()[next[option]++];
      const std::string name = flag.name;
      if (flag.value_name != nullptr) {
        if (absl::Status status = ApplyFlag(flag, value, &cmd); !status.ok()) fail(status);
      } else if (value != "true") {
        // `--wait=yes`: CLI11 hands a switch's value through.
        fail(absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value")));
      } else if (name == "help") {
        cmd.help = true;
      } else if (name == "wait") {
        cmd.wait = true;
      } else if (name == "insecure") {
        cmd.tls.insecure = true;
      } else if (name == "parallel") {
        cmd.study_parallel = true;
      } else if (name == "cpu") {
        cmd.study_cpu = true;
      } else if (name == "all") {
        cmd.all_tokens = true;
      } else if (name == "password-stdin") {
        cmd.registry_password_file = "-";
      } else if (name == "use-mpirun") {
        cmd.overrides.use_mpirun = true;
      } else {
        cmd.follow = true;
      }
    }
  }

  // Help is what a confused user asks for, so flag errors do not stand in its way; an unknown
  // command does, as there is no usage to show for it.
  if (cmd.help) {
    RM_RETURN_IF_ERROR(command_error);
    return cmd;
  }
  RM_RETURN_IF_ERROR(first_error);
  if (cmd.verb == Verb::kNone) {
    return absl::InvalidArgumentError("missing command (see ringctl --help)");
  }

  const std::string verb_name = VerbName(cmd.verb);
  switch (cmd.verb) {
    case Verb::kGet:
    case Verb::kCancel:
    case Verb::kWatch:
    case Verb::kLogs:
      if (positional.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("missing job ID (usage: ringctl ", verb_name, " ID)"));
      }
      cmd.job_id = positional.front();
      positional.erase(positional.begin());
      break;
    case Verb::kQueue:
      RM_RETURN_IF_ERROR(ParseQueueArgs(positional, &cmd));
      break;
    case Verb::kVolume:
      RM_RETURN_IF_ERROR(ParseVolumeArgs(positional, &cmd));
      break;
    case Verb::kRegistry:
      RM_RETURN_IF_ERROR(ParseRegistryArgs(positional, &cmd));
      break;
    case Verb::kStudy:
      RM_RETURN_IF_ERROR(ParseStudyArgs(positional, &cmd));
      break;
    case Verb::kAdmin:
      RM_RETURN_IF_ERROR(ParseAdminArgs(positional, &cmd));
      break;
    case Verb::kWorkers:
      if (!positional.empty() && positional.front() == "clear") {
        if (positional.size() < 2 || positional[1].empty()) {
          return absl::InvalidArgumentError("missing WORKER (usage: ringctl workers clear WORKER)");
        }
        cmd.clear_worker = positional[1];
        positional.erase(positional.begin(), positional.begin() + 2);
      }
      break;
    default:
      break;
  }
  if (!positional.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unexpected argument '", positional.front(), "' for ", verb_name,
        cmd.verb == Verb::kSubmit ? " (a command workload goes after --: ringctl submit -- CMD)"
                                  : ""));
  }
  if (saw_dash_dash) {
    if (cmd.verb != Verb::kSubmit && cmd.study_action != StudyAction::kScaling) {
      return absl::InvalidArgumentError(
          absl::StrCat(verb_name, " does not take a command after --"));
    }
    if (cmd.overrides.command->empty()) {
      return absl::InvalidArgumentError("-- must be followed by a command (-- CMD ARGS...)");
    }
  }

  const bool scheduler_set = !cmd.scheduler.empty();
  const bool insecure_set = cmd.tls.insecure;
  if (cmd.scheduler.empty()) {
    const char* env = getenv(kSchedulerEnv);
    cmd.scheduler = (env != nullptr && env[0] != '\0') ? env : kDefaultScheduler;
  }
  // Flags win over the environment, as for the services (common/tls.h).
  for (auto [name, field] : {std::pair{kTlsCaEnv, &cmd.tls.ca_file},
                             std::pair{kTlsCertEnv, &cmd.tls.cert_file},
                             std::pair{kTlsKeyEnv, &cmd.tls.key_file}}) {
    const char* env = getenv(name);
    if (field->empty() && env != nullptr) *field = env;
  }
  if (const char* env = getenv(kInsecureEnv); !cmd.tls.insecure && env != nullptr) {
    bool insecure = false;
    cmd.tls.insecure = absl::SimpleAtob(env, &insecure) && insecure;
  }
  // The config file fills in what neither a flag nor the environment gave.
  absl::StatusOr<std::optional<ClientConfig>> config = LoadClientConfig(getenv);
  if (!config.ok()) return config.status();
  if (config->has_value()) {
    const ClientConfig& file = **config;
    cmd.config_file = file.path;
    const char* scheduler_env = getenv(kSchedulerEnv);
    if (!scheduler_set && (scheduler_env == nullptr || scheduler_env[0] == '\0') &&
        !file.scheduler.empty()) {
      if (!absl::StrContains(file.scheduler, "://") && !absl::StartsWith(file.scheduler, "unix:")) {
        std::string host;
        int port = 0;
        RM_RETURN_IF_ERROR(
            SplitHostPort(file.scheduler, "scheduler in config file " + file.path, &host, &port));
      }
      cmd.scheduler = file.scheduler;
    }
    for (auto [value, field] :
         {std::pair{&file.tls_ca, &cmd.tls.ca_file}, std::pair{&file.tls_cert, &cmd.tls.cert_file},
          std::pair{&file.tls_key, &cmd.tls.key_file}}) {
      if (field->empty()) *field = *value;
    }
    if (file.insecure.has_value() && !insecure_set && getenv(kInsecureEnv) == nullptr) {
      cmd.tls.insecure = *file.insecure;
    }
  }
  if (cmd.token.empty()) {
    if (const char* env = getenv(kTokenEnv); env != nullptr && env[0] != '\0') {
      cmd.token = std::string(absl::StripAsciiWhitespace(env));
    } else {
      const char* xdg = getenv("XDG_CONFIG_HOME");
      const char* home = getenv("HOME");
      if (xdg != nullptr && xdg[0] != '\0') {
        cmd.token = ReadTokenFile(std::string(xdg) + "/ringmaster/token");
      } else if (home != nullptr && home[0] != '\0') {
        cmd.token = ReadTokenFile(std::string(home) + "/.config/ringmaster/token");
      }
    }
  }
  return cmd;
}

std::string Usage(Verb verb) {
  std::ostringstream out;
  auto print_flags = [&out](Verb v, bool global) {
    for (const FlagSpec& flag : Flags()) {
      if (global != flag.verbs.empty()) continue;
      if (!global && !AppliesTo(flag, v)) continue;
      std::string left = flag.short_name != 0
                             ? absl::StrCat("-", std::string(1, flag.short_name), ", --", flag.name)
                             : absl::StrCat("--", flag.name);
      if (flag.value_name != nullptr) absl::StrAppend(&left, " ", flag.value_name);
      out << "  " << left << std::string(left.size() < 30 ? 30 - left.size() : 1, ' ') << flag.help
          << "\n";
    }
  };
  if (verb == Verb::kNone) {
    out << "Usage: ringctl [GLOBAL FLAGS] COMMAND [FLAGS] [ARGS]\n"
        << "Command-line client of the Ringmaster scheduler.\n\ncommands:\n";
    for (const VerbInfo& info : kVerbs) {
      out << "  " << info.synopsis << "\n      " << info.summary << "\n";
    }
    out << "\nglobal flags (before or after the command):\n";
    print_flags(verb, true);
    out << "\nexit status: 0 ok, 1 error, 2 usage or invalid spec, 3 scheduler unreachable,\n"
        << "4 job not found, 5 watched job ended FAILED or CANCELLED.\n"
        << "Run 'ringctl COMMAND --help' for a command's flags; see docs/ringctl.md.\n";
    return out.str();
  }
  for (const VerbInfo& info : kVerbs) {
    if (info.verb != verb) continue;
    out << "Usage: ringctl " << info.synopsis << "\n" << info.summary << "\n";
  }
  if (verb == Verb::kQueue) {
    out << "\nA queue is a team's share of the cluster: per resource (a GPU type, or cpu) a\n"
        << "nominal quota and optional borrowing and lending limits, a cohort whose queues lend\n"
        << "to each other, a weight, and preemption settings. The YAML format is that of\n"
        << "docs/examples/queue.yaml; update replaces every field. The queue default always\n"
        << "exists and cannot be deleted; a queue with live jobs cannot be deleted either.\n";
  }
  if (verb == Verb::kStudy) {
    out << "\nscaling submits one job per size (replicas = GPUs, one GPU each), labelled\n"
        << "study=ID, waits for each, reads rank 0's 'total images/sec', and prints GPUs,\n"
        << "images/sec, speedup over the smallest size and scaling efficiency. Without -- the\n"
        << "built-in trainer runs; a command after -- must print 'total images/sec: N' on rank 0.\n"
        << "Studies and their SVG charts are kept in $RINGMASTER_STUDY_DIR (default\n"
        << "~/.local/share/ringmaster/studies): list, get ID and compare ID ID read them.\n";
  }
  if (verb == Verb::kSubmit) {
    out << "\nThe spec comes from -f FILE (YAML, see docs/examples/job.yaml) and the flags below;\n"
        << "a flag overrides the file's field. A command after -- makes a command workload;\n"
        << "without -f and without --, the built-in trainer runs. Retries on UNAVAILABLE and\n"
        << "DEADLINE_EXCEEDED reuse the same request id, so a retried submit never makes a\n"
        << "second job.\n";
  }
  bool has_own = false;
  for (const FlagSpec& flag : Flags()) has_own |= !flag.verbs.empty() && AppliesTo(flag, verb);
  if (has_own) {
    out << "\nflags:\n";
    print_flags(verb, false);
  }
  out << "\nglobal flags:\n";
  print_flags(verb, true);
  return out.str();
}

}  // namespace ringmaster::cli
