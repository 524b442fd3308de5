#include "common/flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

std::string EnvNameWith(const std::string& prefix, const std::string& name) {
  return prefix + absl::AsciiStrToUpper(absl::StrReplaceAll(name, {{"-", "_"}}));
}

}  // namespace

Flags::Flags(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

std::string Flags::EnvName(const std::string& name) { return EnvNameWith("RINGMASTER_", name); }

void Flags::SetEnvPrefix(std::string prefix) {
  RM_CHECK(flags_.empty());
  env_prefix_ = std::move(prefix);
}

void Flags::SetArguments(std::string synopsis, std::string help, bool pass_through) {
  args_synopsis_ = std::move(synopsis);
  args_help_ = std::move(help);
  pass_through_ = pass_through;
}

void Flags::AddEnvironment(const std::string& name, const std::string& help) {
  environment_.emplace_back(name, help);
}

void Flags::Add(const std::string& name, const std::string& default_value,
                const std::string& help) {
  RM_CHECK(flags_.count(name) == 0 && name != "help");
  flags_[name] = Flag{default_value, help, EnvNameWith(env_prefix_, name), "", false, false};
  order_.push_back(name);
}

void Flags::AddSwitch(const std::string& name, const std::string& help) {
  Add(name, "false", help);
  flags_[name].is_switch = true;
}

absl::Status Flags::Parse(int argc, char** argv) {
  // CLI11 reads argv and the environment; the values stay strings, read by the typed getters
  // below so that a bad value names the flag and its variable the same way in every binary.
  CLI::App app(summary_, program_);
  app.set_help_flag();  // ours, so that help wins over unknown flags
  bool help = false;
  app.add_flag("-h,--help", help);
  // Unknown flags come back in remaining() and get our message; see below.
  app.allow_extras();
  if (pass_through_) app.prefix_command();
  std::map<std::string, CLI::Option*> options;
  for (const std::string& name : order_) {
    const Flag& flag = flags_.at(name);
    CLI::Option* option = flag.is_switch ? app.add_flag("--" + name) : app.add_option("--" + name);
    option->envname(flag.env)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    options[name] = option;
  }
  std::vector<std::string> positional;
  if (!pass_through_) app.add_option("args", positional);
  // CLI11 reads `--name=` (nothing after '=') as `--name` and takes the next argument as its
  // value; ours is the empty string, as before CLI11, so `--name=` becomes `--name ""`.
  std::vector<std::string> args;
  bool flags_end = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    flags_end |= arg == "--" || (pass_through_ && arg[0] != '-');
    auto flag = arg.size() > 3 && !flags_end && absl::EndsWith(arg, "=")
                    ? flags_.find(arg.substr(2, arg.size() - 3))
                    : flags_.end();
    if (absl::StartsWith(arg, "--") && flag != flags_.end() && !flag->second.is_switch) {
      args.insert(args.end(), {arg.substr(0, arg.size() - 1), ""});
      continue;
    }
    args.push_back(arg);
    auto valued = flags_.find(absl::StartsWith(arg, "--") ? arg.substr(2) : "");
    if (!flags_end && valued != flags_.end() && !valued->second.is_switch && i + 1 < argc) {
      args.push_back(argv[++i]);  // a value, even one that looks like a flag or a positional
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes argv back to front
  try {
    app.parse(args);
  } catch (const CLI::ArgumentMismatch& e) {
    // "--name: 1 required TEXT missing": the only way to miss a value is to end argv early.
    const std::string what = e.what();
    if (absl::EndsWith(what, " missing") && absl::StartsWith(what, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat(what.substr(0, what.find(':')), " needs a value"));
    }
    return absl::InvalidArgumentError(absl::StrCat(what, " (see ", program_, " --help)"));
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(absl::StrCat(e.what(), " (see ", program_, " --help)"));
  }
  help_requested_ = help;
  // Unknown flags, then (pass-through) the arguments from the first one that is not a flag.
  bool arguments = false;
  for (const std::string& arg : app.remaining()) {
    if (!arguments && arg == "--") {  // CLI11 hands the separator back here
      arguments = true;
      continue;
    }
    if (!arguments && arg.size() > 1 && arg[0] == '-') {
      if (help_requested_) continue;
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg.substr(0, arg.find('=')),
                                                     " (see ", program_, " --help)"));
    }
    arguments = true;
    positional.push_back(arg);
  }
  if (!positional.empty() && args_synopsis_.empty() && !help_requested_) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", positional.front(), "' (see ", program_, " --help)"));
  }
  positional_ = std::move(positional);
  for (auto& [name, flag] : flags_) {
    const CLI::Option* option = options.at(name);
    if (option->count() > 0 || !option->results().empty()) {
      flag.value = option->results().back();
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
    return absl::InvalidArgumentError(absl::StrCat("--", name, " (or ", flags_.at(name).env,
                                                   ") must be an integer, got '", Get(name), "'"));
  }
  return absl::OkStatus();
}

absl::Status Flags::GetDouble(const std::string& name, double* out) const {
  if (!absl::SimpleAtod(Get(name), out)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " (or ", flags_.at(name).env,
                                                   ") must be a number, got '", Get(name), "'"));
  }
  return absl::OkStatus();
}

absl::Status Flags::GetBool(const std::string& name, bool* out) const {
  if (!absl::SimpleAtob(Get(name), out)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " (or ", flags_.at(name).env,
                                                   ") must be true or false, got '", Get(name),
                                                   "'"));
  }
  return absl::OkStatus();
}

// The layout every binary's --help shares (tests/cli/help_test.cc checks it; the k8s manifest
// test reads the flag lines).
std::string Flags::Usage() const {
  std::ostringstream out;
  out << "Usage: " << program_ << " [flags]";
  if (!args_synopsis_.empty()) out << " " << args_synopsis_;
  out << "\n" << summary_ << "\n";
  if (!args_help_.empty()) out << "\n" << args_help_ << "\n";
  out << "\nFlags (environment fallback, default):\n";
  for (const auto& name : order_) {
    const Flag& flag = flags_.at(name);
    out << "  --" << name << " (" << flag.env << ", default '" << flag.default_value << "')\n      "
        << flag.help << "\n";
  }
  out << "  -h, --help\n      print this help and exit\n";
  if (!environment_.empty()) {
    out << "\nEnvironment:\n";
    for (const auto& [name, help] : environment_) out << "  " << name << "\n      " << help << "\n";
  }
  return out.str();
}

std::vector<std::string> Flags::Names() const {
  std::vector<std::string> names;
  for (const auto& name : order_) {
    names.push_back("--" + name);
    names.push_back(flags_.at(name).env);
  }
  return names;
}

}  // namespace ringmaster
