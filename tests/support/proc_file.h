// Reading /proc/PID/* of processes that may exit at any moment.
#ifndef RINGMASTER_TESTS_SUPPORT_PROC_FILE_H_
#define RINGMASTER_TESTS_SUPPORT_PROC_FILE_H_

#include <string>

namespace ringmaster::test {

// The whole file, or "" when it cannot be opened or read: the worker's ReadFileToString
// (host/file_io.h), for tests that only need the text. Not std::ifstream with
// istreambuf_iterator: libstdc++'s filebuf throws when read() fails (ESRCH: the process exited
// between open and read), whatever the stream's exception mask, and that ended test bodies
// with "basic_filebuf::underflow error reading the file: No such process".
std::string ReadProcFile(const std::string& path);

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_PROC_FILE_H_
