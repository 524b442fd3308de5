// `ringctl volume create|update|get|list|delete` (docs/environments.md, "Volumes"): one
// VolumeService call, its result printed as text or (-o json) protobuf JSON.
#ifndef RINGMASTER_CLI_VOLUME_COMMAND_H_
#define RINGMASTER_CLI_VOLUME_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "args.h"
#include "client.h"
#include "ringmaster/v1/volume.pb.h"

namespace ringmaster::cli {

// Runs the volume command `cmd` (verb kVolume) against `client`. Results go to `out`; on
// failure exactly one line "ringctl: ..." goes to `err`. Returns the exit code (errors.h).
int RunVolumeCommand(const Command& cmd, SchedulerClient& client, std::ostream& out,
                     std::ostream& err);

// The volume create/update sends: name, --path, --grant TEAM[:ro] (repeatable) and
// --description. INVALID_ARGUMENT for a grant that is not TEAM or TEAM:ro.
absl::StatusOr<v1::Volume> VolumeFromFlags(const Command& cmd);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_VOLUME_COMMAND_H_
