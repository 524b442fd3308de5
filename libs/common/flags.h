// Command-line flags with environment fallbacks, the one configuration mechanism of every
// binary: `--scheduler-addr=X` or `--scheduler-addr X`, else $RINGMASTER_SCHEDULER_ADDR, else
// the default (an empty variable counts as unset). CLI11 does the parsing; this class keeps the
// flags as strings with typed readers, so that every binary names its flags and variables the
// same way in errors and in --help. Not thread-safe; parse once in main().
#ifndef RINGMASTER_LIBS_COMMON_FLAGS_H_
#define RINGMASTER_LIBS_COMMON_FLAGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace ringmaster {

class Flags {
 public:
  explicit Flags(std::string program, std::string summary);

  // Environment names are PREFIX + upper-cased name (default "RINGMASTER_"). Call before Add.
  void SetEnvPrefix(std::string prefix);
  // Names the arguments that are not flags in the usage line ("HOST COMMAND..."). With
  // `pass_through`, flags are read only before the first argument: it and everything after it
  // land in positional() as given (a command line to run, such as ringmaster-rsh's).
  void SetArguments(std::string synopsis, std::string help, bool pass_through);
  // Documents an environment variable that is not a flag's fallback (read by the program itself).
  void AddEnvironment(const std::string& name, const std::string& help);

  // Declares a flag. `name` is the long name without dashes ("scheduler-addr"); the
  // environment name is RINGMASTER_ + upper-cased name with '-' as '_'.
  void Add(const std::string& name, const std::string& default_value, const std::string& help);
  // Declares a boolean flag that takes no value: `--name` is true, `--name=false` false, and
  // the environment variable any value GetBool reads ("1", "true"). Default false.
  void AddSwitch(const std::string& name, const std::string& help);

  // Parses argv. Unknown flags and missing values are INVALID_ARGUMENT naming the flag.
  // `--help` or `-h` sets help_requested() and wins over unknown flags. Arguments that are not
  // flags (and everything after `--`) land in positional(); they are INVALID_ARGUMENT unless
  // SetArguments named them.
  absl::Status Parse(int argc, char** argv);

  const std::string& Get(const std::string& name) const;
  // Typed readers: INVALID_ARGUMENT naming the flag when the value does not parse.
  absl::Status GetInt(const std::string& name, int64_t* out) const;
  absl::Status GetDouble(const std::string& name, double* out) const;
  absl::Status GetBool(const std::string& name, bool* out) const;

  bool help_requested() const { return help_requested_; }
  std::string Usage() const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Every flag name and environment variable this program accepts (checked by the k8s tests).
  std::vector<std::string> Names() const;
  // The default environment name of a flag: RINGMASTER_ + upper-cased name, '-' as '_'.
  static std::string EnvName(const std::string& name);

 private:
  struct Flag {
    std::string default_value;
    std::string help;
    std::string env;
    std::string value;
    bool set = false;
    bool is_switch = false;
  };
  std::string program_;
  std::string summary_;
  std::string env_prefix_ = "RINGMASTER_";
  std::string args_synopsis_;
  std::string args_help_;
  bool pass_through_ = false;
  std::vector<std::pair<std::string, std::string>> environment_;
  std::map<std::string, Flag> flags_;
  std::vector<std::string> order_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
};

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_FLAGS_H_
