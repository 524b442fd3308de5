#include "common/bearer_token.h"

#include <grpcpp/support/client_interceptor.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"

namespace ringmaster {
namespace {

// Adds `authorization: Bearer <token>` to the initial metadata of every call.
class BearerTokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class BearerTokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;  // lives as long as the channel that owns this factory
};

}  // namespace

std::string UserTokenFilePath() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/ringmaster/token";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return std::string(home) + "/.config/ringmaster/token";
  return "";
}

std::string ReadTokenFile(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return std::string(absl::StripAsciiWhitespace(line));
}

std::string ResolveBearerToken(const std::string& explicit_token) {
  if (!explicit_token.empty()) return explicit_token;
  const char* env = std::getenv(kTokenEnv);
  if (env != nullptr && *env != '\0') return std::string(absl::StripAsciiWhitespace(env));
  return ReadTokenFile(UserTokenFilePath());
}

std::shared_ptr<grpc::Channel> CreateChannelWithToken(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const std::string& token, const grpc::ChannelArguments& args) {
  if (token.empty()) return grpc::CreateCustomChannel(target, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<BearerTokenInterceptorFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args,
                                                                 std::move(factories));
}

}  // namespace ringmaster
