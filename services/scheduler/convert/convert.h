// Translation between the wire types (ringmaster.v1 protobuf) and the core structs. Used by the
// rpc adapters and by the stores that keep a spec as JSON. Pure functions.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CONVERT_CONVERT_H_
#define RINGMASTER_SERVICES_SCHEDULER_CONVERT_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "ringmaster/v1/job.pb.h"
#include "ringmaster/v1/worker.pb.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

// The wire spec as it came; defaults and range checks are core validation's. Fails only for
// what the core struct cannot hold (an unknown restart_policy value): INVALID_ARGUMENT.
absl::StatusOr<JobSpec> FromProto(const v1::JobSpec& spec);
v1::JobSpec ToProto(const JobSpec& spec);

v1::JobState ToProto(JobState state);
// UNSPECIFIED has no core value: nullopt.
std::optional<JobState> FromProto(v1::JobState state);

v1::RankPlacement ToProto(const RankPlacement& rank);
RankPlacement FromProto(const v1::RankPlacement& rank);
v1::Job ToProto(const Job& job);
v1::JobEvent ToProto(const JobEvent& event);
v1::Gpu ToProto(const Gpu& gpu);
Gpu FromProto(const v1::Gpu& gpu);

// A spec as compact protobuf JSON, the form the Postgres store keeps.
std::string SpecToJson(const JobSpec& spec);
absl::StatusOr<JobSpec> SpecFromJson(const std::string& json);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CONVERT_CONVERT_H_
