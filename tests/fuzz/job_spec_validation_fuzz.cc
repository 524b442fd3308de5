// The scheduler's JobSpec validation (services/scheduler/core/validation.h) on any JobSpec a
// client can send: the bytes are a serialized v1::JobSpec, converted as SubmitJob converts it.
// Beyond "no crash, no leak": every refusal is INVALID_ARGUMENT; a spec that passes passes
// again unchanged (defaults are filled once), and survives the protobuf and the JSON form the
// job store keeps in Postgres.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "scheduler/convert/convert.h"
#include "scheduler/core/validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace scheduler = ringmaster::scheduler;
  ringmaster::v1::JobSpec proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<scheduler::JobSpec> spec = scheduler::FromProto(proto);
  if (!spec.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(spec.status()));
    return 0;
  }
  absl::StatusOr<scheduler::JobSpec> valid = scheduler::ValidateJobSpec(*spec);
  if (!valid.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(valid.status()));
    return 0;
  }
  absl::StatusOr<scheduler::JobSpec> again = scheduler::ValidateJobSpec(*valid);
  FUZZ_CHECK(again.ok() && *again == *valid);

  absl::StatusOr<scheduler::JobSpec> from_proto = scheduler::FromProto(scheduler::ToProto(*valid));
  FUZZ_CHECK(from_proto.ok() && *from_proto == *valid);
  absl::StatusOr<scheduler::JobSpec> from_json =
      scheduler::SpecFromJson(scheduler::SpecToJson(*valid));
  FUZZ_CHECK(from_json.ok() && *from_json == *valid);
  return 0;
}
