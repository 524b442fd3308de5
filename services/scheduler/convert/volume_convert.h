// Translation between the wire volume (ringmaster.v1.Volume) and the core Volume. Pure functions.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CONVERT_VOLUME_CONVERT_H_
#define RINGMASTER_SERVICES_SCHEDULER_CONVERT_VOLUME_CONVERT_H_

#include "ringmaster/v1/volume.pb.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

// The wire volume as it came (times included); checks are ValidateVolume's.
Volume FromProto(const v1::Volume& volume);
v1::Volume ToProto(const Volume& volume);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CONVERT_VOLUME_CONVERT_H_
