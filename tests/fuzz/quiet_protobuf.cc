// Linked into every fuzz target: protobuf logs an ERROR line for each string field that is not
// UTF-8, which fuzz inputs are most of the time; at thousands of inputs a second that output
// is the run's main cost and buries the report that matters. Parse results are unaffected.
#include <google/protobuf/stubs/logging.h>

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}
