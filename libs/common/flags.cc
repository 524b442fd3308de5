#include "common/flags.h"

#include <cstdlib>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"

namespace ringmaster {

Flags::Flags(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

std::string Flags::EnvName(const std::string& name) {
  return "RINGMASTER_" + absl::AsciiStrToUpper(absl::StrReplaceAll(name, {{"-", "_"}}));
}

void Flags::Add(const std::string& name, const std::string& default_value,
                const std::string& help) {
  RM_CHECK(flags_.count(name) == 0);
  flags_[name] = Flag{default_value, help, "", false};
  order_.push_back(name);
}

void Flags::AddSwitch(const std::string& name, const std::string& help) {
  Add(name, "false", help);
  flags_[name].is_switch = true;
}

absl::Status Flags::Parse(int argc, char** argv) {
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_positional || arg.size() < 3 || arg.rfind("--", 0) != 0) {
      if (arg == "--") {
        only_positional = true;
        continue;
      }
      if (arg == "-h") {
        help_requested_ = true;
        continue;
      }
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name == "help") {
      help_requested_ = true;
      continue;
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see ", program_, " --help)"));
    }
    if (!has_value && it->second.is_switch) {
      value = "true";
    } else if (!has_value) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    it->second.value = value;
    it->second.set = true;
  }
  for (auto& [name, flag] : flags_) {
    if (flag.set) continue;
    if (const char* env = std::getenv(EnvName(name).c_str()); env != nullptr) {
      flag.value = env;
      flag.set = true;
    } else {
      flag.value = flag.default_value;
    }
  }
  return absl::OkStatus();
}

const std::string& Flags::Get(const std::string& name) const {
  auto it = flags_.find(name);
  RM_CHECK(it != flags_.end());
  return it->second.set ? it->second.value : it->second.default_value;
}

absl::Status Flags::GetInt(const std::string& name, int64_t* out) const {
  if (!absl::SimpleAtoi(Get(name), out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " (or ", EnvName(name), ") must be an integer, got '", Get(name), "'"));
  }
  return absl::OkStatus();
}

absl::Status Flags::GetDouble(const std::string& name, double* out) const {
  if (!absl::SimpleAtod(Get(name), out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " (or ", EnvName(name), ") must be a number, got '", Get(name), "'"));
  }
  return absl::OkStatus();
}

absl::Status Flags::GetBool(const std::string& name, bool* out) const {
  if (!absl::SimpleAtob(Get(name), out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " (or ", EnvName(name), ") must be true or false, got '", Get(name), "'"));
  }
  return absl::OkStatus();
}

std::string Flags::Usage() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [flags]\n" << summary_ << "\n\nflags (environment fallback):\n";
  for (const auto& name : order_) {
    const Flag& flag = flags_.at(name);
    out << "  --" << name << " (" << EnvName(name) << ", default '" << flag.default_value
        << "')\n      " << flag.help << "\n";
  }
  return out.str();
}

std::vector<std::string> Flags::Names() const {
  std::vector<std::string> names;
  for (const auto& name : order_) {
    names.push_back("--" + name);
    names.push_back(EnvName(name));
  }
  return names;
}

}  // namespace ringmaster
