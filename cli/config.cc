#include "config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace ringmaster::cli {
namespace {

constexpr const char* kKeys = "scheduler, tls_ca, tls_cert, tls_key, insecure";

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status Invalid(const std::string& path, const YAML::Mark& mark, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("config file ", path, ", line ", mark.line + 1, ": ", what));
}

}  // namespace

absl::StatusOr<ClientConfig> ParseClientConfig(absl::string_view text, const std::string& path) {
  ClientConfig config;
  config.path = path;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Invalid(path, e.mark, e.msg);
  }
  if (root.IsNull()) return config;  // empty, or only comments
  if (!root.IsMap()) {
    return Invalid(path, root.Mark(), absl::StrCat("expected a mapping of ", kKeys));
  }
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    if (!value.IsScalar()) {
      return Invalid(path, value.Mark(), absl::StrCat(key, ": expected a single value"));
    }
    const std::string& text_value = value.Scalar();
    if (key == "insecure") {
      if (text_value == "true") {
        config.insecure = true;
      } else if (text_value == "false") {
        config.insecure = false;
      } else {
        return Invalid(path, value.Mark(),
                       absl::StrCat("insecure: expected true or false, got '", text_value, "'"));
      }
      continue;
    }
    std::string* field = key == "scheduler"  ? &config.scheduler
                         : key == "tls_ca"   ? &config.tls_ca
                         : key == "tls_cert" ? &config.tls_cert
                         : key == "tls_key"  ? &config.tls_key
                                             : nullptr;
    if (field == nullptr) {
      return Invalid(path, entry.first.Mark(),
                     absl::StrCat("unknown key '", key, "' (allowed: ", kKeys, ")"));
    }
    if (text_value.empty()) {
      return Invalid(path, value.Mark(), absl::StrCat(key, ": must not be empty"));
    }
    // Paths are relative to the file, as a kubeconfig's are.
    *field = key != "scheduler" && text_value[0] != '/'
                 ? absl::StrCat(Directory(path), "/", text_value)
                 : text_value;
  }
  return config;
}

std::string ClientConfigPath(const GetEnvFn& getenv) {
  if (const char* env = getenv(kConfigEnv); env != nullptr && env[0] != '\0') return env;
  if (const char* xdg = getenv("XDG_CONFIG_HOME"); xdg != nullptr && xdg[0] != '\0') {
    return absl::StrCat(xdg, "/ringmaster/config");
  }
  if (const char* home = getenv("HOME"); home != nullptr && home[0] != '\0') {
    return absl::StrCat(home, "/.config/ringmaster/config");
  }
  return "";
}

absl::StatusOr<std::optional<ClientConfig>> LoadClientConfig(const GetEnvFn& getenv) {
  const std::string path = ClientConfigPath(getenv);
  if (path.empty()) return std::nullopt;
  const char* named = getenv(kConfigEnv);
  const bool explicit_path = named != nullptr && named[0] != '\0';
  std::ifstream in(path);
  if (!in) {
    if (!explicit_path && errno == ENOENT) return std::nullopt;
    return absl::NotFoundError(absl::StrCat("config file ", path,
                                            " cannot be read: ", std::strerror(errno),
                                            explicit_path ? " (named by RINGMASTER_CONFIG)" : ""));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<ClientConfig> config = ParseClientConfig(text.str(), path);
  if (!config.ok()) return config.status();
  return std::optional<ClientConfig>(*std::move(config));
}

}  // namespace ringmaster::cli
