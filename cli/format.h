// Human-readable tables and protobuf JSON for what the scheduler returns. Pure functions of
// their arguments (the current time is passed in), so output is tested byte for byte.
#ifndef RINGMASTER_CLI_FORMAT_H_
#define RINGMASTER_CLI_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "ringmaster/v1/job.pb.h"
#include "ringmaster/v1/worker.pb.h"

namespace ringmaster::cli {

// Columns left-aligned, separated by three spaces, no trailing spaces; one line per row.
std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

// "PENDING" for JOB_STATE_PENDING.
std::string JobStateName(v1::JobState state);
// "Never" | "OnFailure", the spelling of the YAML spec.
std::string RestartPolicyName(v1::RestartPolicy policy);
// UTC "2024-05-01T12:00:00Z"; "-" for 0 (not happened).
std::string FormatTimeMs(int64_t unix_ms);
// Coarse age for tables: "42s", "5m", "3h", "2d"; "-" when `then_ms` is 0.
std::string FormatAge(int64_t then_ms, int64_t now_ms);
// "8 x t4" (replicas x gpus_per_replica of gpu_type, "any" type when empty), "cpu" for 0 GPUs.
std::string FormatGpuRequest(const v1::JobSpec& spec);

// `ringctl list`: one row per job.
std::string FormatJobList(const v1::ListJobsResponse& response, int64_t now_ms);
// `ringctl get`: the job's fields, then its placement table.
std::string FormatJob(const v1::Job& job);
// `ringctl workers`: one row per worker, GPUs grouped by type as used/total, simulated GPUs
// shown as "TYPE(sim)", then the totals over READY workers.
std::string FormatWorkers(const v1::ListWorkersResponse& response, int64_t now_ms);
// `ringctl watch`: the header, then one line per event in the same fixed columns.
std::string WatchHeader();
std::string FormatEvent(const v1::JobEvent& event);

// Protobuf JSON with the proto field names, every field present (zeros too) so scripts need
// no defaults. `pretty` adds indentation; without it the message is one line (JSON Lines).
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message, bool pretty);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_FORMAT_H_
