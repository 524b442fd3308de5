// `ringctl admin`: bearer tokens (create, list, revoke) and the audit trail, over the scheduler's
// AdminService (proto/ringmaster/v1/admin.proto), with the command's TLS options and token.
// A token is printed only by `token create`, once.
#ifndef RINGMASTER_CLI_ADMIN_COMMAND_H_
#define RINGMASTER_CLI_ADMIN_COMMAND_H_

#include <ostream>

#include "args.h"

namespace ringmaster::cli {

// Runs `cmd` (verb kAdmin). Results go to `out`; on failure one line to `err`. Returns the exit
// code (errors.h).
int RunAdminCommand(const Command& cmd, std::ostream& out, std::ostream& err);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_ADMIN_COMMAND_H_
