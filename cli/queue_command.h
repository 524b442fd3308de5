// `ringctl queue create|get|list|update|delete`: one QueueService call, its result printed as a
// table or (-o json) protobuf JSON.
#ifndef RINGMASTER_CLI_QUEUE_COMMAND_H_
#define RINGMASTER_CLI_QUEUE_COMMAND_H_

#include <ostream>

#include "args.h"
#include "client.h"

namespace ringmaster::cli {

// Runs the queue command `cmd` (verb kQueue) against `client`. Results go to `out`; on failure
// exactly one line "ringctl: ..." goes to `err`. Returns the exit code (errors.h).
int RunQueueCommand(const Command& cmd, SchedulerClient& client, std::ostream& out,
                    std::ostream& err);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_QUEUE_COMMAND_H_
