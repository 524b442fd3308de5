// Command-line flags with environment fallbacks, the one configuration mechanism of every
// binary: `--scheduler-addr=X` or `--scheduler-addr X`, else $RINGMASTER_SCHEDULER_ADDR, else
// the default. Not thread-safe; parse once in main().
#ifndef RINGMASTER_LIBS_COMMON_FLAGS_H_
#define RINGMASTER_LIBS_COMMON_FLAGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ringmaster {

class Flags {
 public:
  explicit Flags(std::string program, std::string summary);

  // Declares a flag. `name` is the long name without dashes ("scheduler-addr"); the
  // environment name is RINGMASTER_ + upper-cased name with '-' as '_'.
  void Add(const std::string& name, const std::string& default_value, const std::string& help);
  // Declares a boolean flag that takes no value: `--name` is true, `--name=false` false, and
  // the environment variable any value GetBool reads ("1", "true"). Default false.
  void AddSwitch(const std::string& name, const std::string& help);

  // Parses argv. Unknown flags and missing values are INVALID_ARGUMENT naming the flag.
  // `--help` sets help_requested(). Arguments that are not flags (and everything after `--`)
  // land in positional().
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
  static std::string EnvName(const std::string& name);

 private:
  struct Flag {
    std::string default_value;
    std::string help;
    std::string value;
    bool set = false;
    bool is_switch = false;
  };
  std::string program_;
  std::string summary_;
  std::map<std::string, Flag> flags_;
  std::vector<std::string> order_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
};

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_FLAGS_H_
