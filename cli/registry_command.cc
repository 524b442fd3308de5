#include "registry_command.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/bearer_token.h"
#include "common/grpc_status.h"
#include "common/tls.h"
#include "errors.h"
#include "format.h"
#include "ringmaster/v1/registry.grpc.pb.h"

namespace ringmaster::cli {
namespace {

// At most this much is read: the scheduler takes 4096 bytes, and a larger file is a mistake.
constexpr size_t kMaxSecretRead = 64 * 1024;

std::string Json(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message, /*pretty=*/true);
  return json.ok() ? std::string(absl::StripSuffix(*json, "\n")) : "{}";
}

}  // namespace

absl::StatusOr<std::string> ReadRegistrySecret(const std::string& path, std::istream& in) {
  std::string secret;
  const std::string source = path == "-" ? "standard input" : path;
  auto read = [&](std::istream& from) {
    std::vector<char> buffer(kMaxSecretRead + 1);
    from.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    secret.assign(buffer.data(), static_cast<size_t>(from.gcount()));
  };
  if (path == "-") {
    read(in);
  } else {
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      return absl::InvalidArgumentError(absl::StrCat("--password-file: cannot read ", path));
    }
    read(file);
  }
  if (secret.size() > kMaxSecretRead) {
    return absl::InvalidArgumentError(
        absl::StrCat("the secret from ", source, " is over ", kMaxSecretRead, " bytes"));
  }
  if (absl::EndsWith(secret, "\r\n")) {
    secret.resize(secret.size() - 2);
  } else if (absl::EndsWith(secret, "\n")) {
    secret.resize(secret.size() - 1);
  }
  if (secret.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the secret from ", source, " is empty"));
  }
  return secret;
}

int RunRegistryCommand(const Command& cmd, std::istream& in, std::ostream& out, std::ostream& err) {
  // The secret is read before anything else: a bad source fails without a call.
  std::string secret;
  if (cmd.registry_action == RegistryAction::kSet) {
    absl::StatusOr<std::string> read = ReadRegistrySecret(cmd.registry_password_file, in);
    if (!read.ok()) {
      err << "ringctl: " << SingleLine(read.status().message()) << "\n";
      return kExitUsage;
    }
    secret = *std::move(read);
  }
  auto credentials = MakeChannelCredentials(cmd.tls);
  if (!credentials.ok()) {
    err << "ringctl: " << SingleLine(credentials.status().message()) << "\n";
    return kExitUsage;
  }
  auto stub =
      v1::RegistryService::NewStub(CreateChannelWithToken(cmd.scheduler, *credentials, cmd.token));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto fail = [&](const grpc::Status& status, const std::string& action) {
    Failure f = DescribeRpcError(FromGrpcStatus(status), action, cmd.scheduler, "");
    err << "ringctl: " << SingleLine(f.message) << "\n";
    return f.exit_code;
  };
  const bool json = cmd.output == OutputFormat::kJson;
  switch (cmd.registry_action) {
    case RegistryAction::kSet: {
      v1::SetRegistryCredentialRequest req;
      req.set_team(cmd.token_team);
      req.set_registry(cmd.registry);
      req.set_username(cmd.registry_username);
      req.set_secret(secret);
      v1::RegistryCredential resp;
      grpc::Status s = stub->SetRegistryCredential(&ctx, req, &resp);
      if (!s.ok()) return fail(s, "set registry credentials for " + cmd.registry);
      if (json) {
        out << Json(resp) << "\n";
      } else {
        out << "registry credentials of team " << resp.team() << " for " << resp.registry()
            << " set (user " << resp.username() << ")\n";
      }
      return kExitOk;
    }
    case RegistryAction::kList: {
      v1::ListRegistryCredentialsRequest req;
      req.set_team(cmd.all_tokens ? "*" : cmd.token_team);
      v1::ListRegistryCredentialsResponse resp;
      grpc::Status s = stub->ListRegistryCredentials(&ctx, req, &resp);
      if (!s.ok()) return fail(s, "list registry credentials");
      if (json) {
        out << Json(resp) << "\n";
        return kExitOk;
      }
      std::vector<std::vector<std::string>> rows;
      for (const v1::RegistryCredential& c : resp.credentials()) {
        rows.push_back({c.team(), c.registry(), c.username(), FormatTimeMs(c.updated_at_ms())});
      }
      out << RenderTable({"TEAM", "REGISTRY", "USERNAME", "SET"}, rows);
      for (const v1::RegistryCredential& c : resp.credentials()) {
        if (!c.problem().empty()) {
          out << "team " << c.team() << ", " << c.registry() << ": " << c.problem() << "\n";
        }
      }
      return kExitOk;
    }
    case RegistryAction::kDelete: {
      v1::DeleteRegistryCredentialRequest req;
      req.set_team(cmd.token_team);
      req.set_registry(cmd.registry);
      v1::DeleteRegistryCredentialResponse resp;
      grpc::Status s = stub->DeleteRegistryCredential(&ctx, req, &resp);
      if (!s.ok()) return fail(s, "delete registry credentials for " + cmd.registry);
      if (json) {
        out << Json(resp) << "\n";
      } else {
        out << "registry credentials for " << cmd.registry << " deleted\n";
      }
      return kExitOk;
    }
    case RegistryAction::kNone:
      break;
  }
  err << "ringctl: missing registry action (see ringctl registry --help)\n";
  return kExitUsage;
}

}  // namespace ringmaster::cli
