// The bearer token of a person or automation, client side: where ringctl, the benchmarks and
// the test harness find it, and a channel that sends it as `authorization: Bearer <token>`
// metadata on every call. The token itself is never logged or printed here.
//
// Where a token comes from, first found wins:
//   1. an explicit value (ringctl --token);
//   2. RINGMASTER_TOKEN;
//   3. the file ${XDG_CONFIG_HOME:-$HOME/.config}/ringmaster/token (surrounding whitespace is
//      dropped).
// Thread-safe.
#ifndef RINGMASTER_LIBS_COMMON_BEARER_TOKEN_H_
#define RINGMASTER_LIBS_COMMON_BEARER_TOKEN_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace ringmaster {

inline constexpr const char* kTokenEnv = "RINGMASTER_TOKEN";

// The path of the user's token file (step 3 above); empty when neither XDG_CONFIG_HOME nor
// HOME is set.
std::string UserTokenFilePath();

// The token by the order above; empty when none is found.
std::string ResolveBearerToken(const std::string& explicit_token);

// Reads a token file (first line, whitespace dropped); empty when it cannot be read.
std::string ReadTokenFile(const std::string& path);

// A channel to `target` that adds the token to every call's metadata (nothing when empty).
std::shared_ptr<grpc::Channel> CreateChannelWithToken(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const std::string& token, const grpc::ChannelArguments& args = grpc::ChannelArguments());

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_BEARER_TOKEN_H_
