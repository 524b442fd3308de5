// Text that goes into protobuf `string` fields and PostgreSQL `text` columns must be valid
// UTF-8: protobuf refuses to parse a message that is not (the peer's whole stream breaks), and
// PostgreSQL refuses the statement (the scheduler's batch with it). Program output and byte-cut
// messages are not, so every message cut to a length goes through here.
#ifndef RINGMASTER_LIBS_COMMON_UTF8_H_
#define RINGMASTER_LIBS_COMMON_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace ringmaster {

// At most `max_bytes` bytes of `text`, never cutting a character, with each byte that does
// not start a valid UTF-8 sequence (stray, overlong, surrogate, past U+10FFFF) replaced by '?'.
std::string Utf8Prefix(std::string_view text, size_t max_bytes);

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_UTF8_H_
