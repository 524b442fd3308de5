#include "support/proc_file.h"

#include "worker/host/file_io.h"

namespace ringmaster::test {

std::string ReadProcFile(const std::string& path) {
  return worker::ReadFileToString(path).value_or("");
}

}  // namespace ringmaster::test
