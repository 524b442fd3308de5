// ringctl's YAML job spec reader (cli/spec_yaml.h) on arbitrary text. Beyond "no crash, no
// leak": every failure is INVALID_ARGUMENT (the reader's contract), and a spec it accepts
// survives a protobuf round trip unchanged.
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "spec_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ringmaster::v1::JobSpec> spec =
      ringmaster::cli::ParseJobSpecYaml(text, "fuzz.yaml");
  if (!spec.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(spec.status()));
    return 0;
  }
  ringmaster::v1::JobSpec again;
  FUZZ_CHECK(again.ParseFromString(spec->SerializeAsString()));
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(again, *spec));
  return 0;
}
