// ringctl's config file: where the scheduler is and which CA to trust, so that a new shell
// needs no exports (as kubectl's kubeconfig). It is YAML of these keys, all optional:
//
//   scheduler: 127.0.0.1:7070          # as --scheduler
//   tls_ca: /tmp/ringmaster-quickstart/certs/ca.crt   # as --tls-ca
//   tls_cert: ...                      # as --tls-cert
//   tls_key: ...                       # as --tls-key
//   insecure: false                    # as --insecure
//
// A relative path is taken from the file's own directory. The file is $RINGMASTER_CONFIG, else
// ${XDG_CONFIG_HOME:-$HOME/.config}/ringmaster/config (beside the token); scripts/quickstart
// writes it. Each setting counts only where neither its flag nor its environment variable is
// given. The Python client reads the same file (python/ringmaster/config.py).
#ifndef RINGMASTER_CLI_CONFIG_H_
#define RINGMASTER_CLI_CONFIG_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "args.h"

namespace ringmaster::cli {

inline constexpr const char* kConfigEnv = "RINGMASTER_CONFIG";

struct ClientConfig {
  // The file it came from, for messages.
  std::string path;
  std::string scheduler;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::optional<bool> insecure;
};

// Parses the text of the config file at `path`. INVALID_ARGUMENT names the file and the key
// (an unknown key, a value that is not a string, an insecure that is not true or false).
absl::StatusOr<ClientConfig> ParseClientConfig(absl::string_view text, const std::string& path);

// The config file's path by the order above; empty when none of the variables is set.
std::string ClientConfigPath(const GetEnvFn& getenv);

// Reads and parses the config file. nullopt when there is none at the default path; NOT_FOUND
// when $RINGMASTER_CONFIG names a file that cannot be read.
absl::StatusOr<std::optional<ClientConfig>> LoadClientConfig(const GetEnvFn& getenv);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_CONFIG_H_
