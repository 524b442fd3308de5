// `ringctl registry set|list|delete`: a team's credentials for a private image registry, over
// the scheduler's RegistryService (proto/ringmaster/v1/registry.proto), with the command's TLS
// options and token. The secret comes from standard input (--password-stdin) or a file
// (--password-file), never from a flag's value, so that shell history and `ps` do not keep it;
// nothing prints it.
#ifndef RINGMASTER_CLI_REGISTRY_COMMAND_H_
#define RINGMASTER_CLI_REGISTRY_COMMAND_H_

#include <istream>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "args.h"

namespace ringmaster::cli {

// Runs `cmd` (verb kRegistry); `in` is read for --password-stdin. Results go to `out`; on
// failure one line to `err`. Returns the exit code (errors.h).
int RunRegistryCommand(const Command& cmd, std::istream& in, std::ostream& out, std::ostream& err);

// The secret as read from `in` or the file `path` ("-": `in`): the whole content less one
// trailing "\n" or "\r\n". INVALID_ARGUMENT for an empty one or an unreadable file (the
// message names the file, never its content).
absl::StatusOr<std::string> ReadRegistrySecret(const std::string& path, std::istream& in);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_REGISTRY_COMMAND_H_
