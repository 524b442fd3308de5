// The command line of ringctl, parsed into a Command without touching the network:
//
//   ringctl [GLOBAL FLAGS] COMMAND [FLAGS] [ARGS] [-- CMD ARGS...]
//
// Global flags (--scheduler, -o/--output, --tls-*, --insecure, -h/--help) may come before or after
// the command. Flags take their value as `--flag value` or `--flag=value` (`-f value`, `-o value`
// for the short ones). CLI11 parses (a subcommand per command); the environment comes from the
// injected getenv, after parsing, so tests need no real environment. Stateless and thread-safe.
#ifndef RINGMASTER_CLI_ARGS_H_
#define RINGMASTER_CLI_ARGS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tls.h"
#include "job_spec.h"
#include "ringmaster/v1/job.pb.h"

namespace ringmaster::cli {

inline constexpr const char* kDefaultScheduler = "localhost:7070";
inline constexpr const char* kSchedulerEnv = "RINGMASTER_SCHEDULER";

enum class Verb {
  kNone, kSubmit, kGet, kList, kCancel, kWatch, kWorkers, kLogs, kQueue, kStudy, kAdmin, kVolume,
  kRegistry
};

// `ringctl registry ACTION`.
enum class RegistryAction { kNone, kSet, kList, kDelete };

// `ringctl admin ...`.
enum class AdminAction { kNone, kTokenCreate, kTokenList, kTokenRevoke, kAudit };

// `ringctl queue ACTION`.
enum class QueueAction { kNone, kCreate, kGet, kList, kUpdate, kDelete };

// `ringctl volume ACTION`.
enum class VolumeAction { kNone, kCreate, kGet, kList, kUpdate, kDelete };

// `ringctl study ACTION`.
enum class StudyAction { kNone, kScaling, kList, kGet, kCompare };

enum class OutputFormat { kTable, kJson };

struct Command {
  Verb verb = Verb::kNone;
  // --help, -h or `ringctl help [COMMAND]`: print the usage of `verb` (kNone: of ringctl).
  bool help = false;
  // From --scheduler, else $RINGMASTER_SCHEDULER, else the config file (config.h), else
  // kDefaultScheduler.
  std::string scheduler;
  OutputFormat output = OutputFormat::kTable;
  // --tls-ca, --tls-cert, --tls-key, --insecure, else RINGMASTER_TLS_*, RINGMASTER_INSECURE,
  // else the config file.
  TlsOptions tls;
  // Bearer token: --token, else RINGMASTER_TOKEN, else the file
  // ${XDG_CONFIG_HOME:-$HOME/.config}/ringmaster/token (common/bearer_token.h). Never printed.
  std::string token;
  // The config file that filled in settings; empty when none was read.
  std::string config_file;

  // get, cancel, watch, logs.
  std::string job_id;
  // cancel --reason.
  std::string reason;

  // list --state, --queue, -l/--selector, --array, --limit, --page-size (queue is shared with
  // submit's --queue). limit 0: every matching job (ringctl pages through them). array_id: only
  // the tasks of that array (empty: jobs and arrays, no tasks).
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  std::string queue;
  std::string label_selector;
  std::string array_id;
  int32_t limit = 0;
  int32_t page_size = 0;

  // logs --rank, --attempt, -f/--follow; --index: the task of the array `job_id` whose log to
  // read.
  int32_t rank = 0;
  std::optional<int32_t> attempt;
  std::optional<int32_t> index;
  // logs -f/--follow; submit --follow (streams rank 0's output, implies `wait`).
  bool follow = false;
  // submit --wait: wait until the job ends; the exit status is the job's.
  bool wait = false;

  // workers clear WORKER: put a worker a failed pre-run check marked unhealthy back into
  // placement. Empty: list the workers.
  std::string clear_worker;

  // queue ACTION [NAME] (-f FILE goes to spec_file).
  QueueAction queue_action = QueueAction::kNone;
  std::string queue_name;

  // volume create|update NAME --path P [--grant TEAM[:ro]]... [--description D] | get NAME |
  // list | delete NAME (--description goes to token_description).
  VolumeAction volume_action = VolumeAction::kNone;
  std::string volume_name;
  std::string volume_path;
  std::vector<std::string> volume_grants;

  // registry set REGISTRY --username U (--password-stdin | --password-file F) [--team T] |
  // list [--team T | --all] | delete REGISTRY [--team T] (--team goes to token_team, --all to
  // all_tokens). The secret is read by the command from registry_password_file ("-": stdin),
  // never taken from a flag's value.
  RegistryAction registry_action = RegistryAction::kNone;
  std::string registry;
  std::string registry_username;
  std::string registry_password_file;

  // study scaling --gpus, --parallel, --cpu, --chart (and the spec flags below); study get ID,
  // study compare A B.
  StudyAction study_action = StudyAction::kNone;
  std::vector<int32_t> study_sizes;
  bool study_parallel = false;
  bool study_cpu = false;
  std::string chart;
  std::vector<std::string> study_ids;
  // admin: token create --team --role [--expires] [--description] | token list [--all] |
  // token revoke ID | audit [--limit N].
  AdminAction admin_action = AdminAction::kNone;
  std::string token_team;
  std::string token_role;
  std::string token_expires;
  std::string token_description;
  std::string token_id;
  bool all_tokens = false;

  // submit -f, --request-id and the spec flags.
  std::string spec_file;
  std::string request_id;
  // --retry-seconds: how long a submit may keep retrying an unreachable scheduler.
  std::optional<int64_t> retry_seconds;
  SpecOverrides overrides;
};

// Reads an environment variable; nullptr when unset. Tests pass a fake.
using GetEnvFn = std::function<const char*(const char*)>;

// Parses argv without the program name. Errors are INVALID_ARGUMENT with a one-line message
// naming the flag or argument; help wins over errors so `ringctl submit --bad --help` helps.
absl::StatusOr<Command> ParseArgs(const std::vector<std::string>& args, const GetEnvFn& getenv);

// Usage text of ringctl (kNone) or of one command.
std::string Usage(Verb verb);

// "PENDING", "pending", "JOB_STATE_PENDING" -> JOB_STATE_PENDING.
std::optional<v1::JobState> ParseJobState(const std::string& text);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_ARGS_H_
