#include "admin_command.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/bearer_token.h"
#include "common/grpc_status.h"
#include "common/tls.h"
#include "errors.h"
#include "format.h"
#include "ringmaster/v1/admin.grpc.pb.h"

namespace ringmaster::cli {
namespace {

std::string Json(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

std::string Expiry(int64_t ms) { return ms == 0 ? "never" : FormatTimeMs(ms); }

}  // namespace

int RunAdminCommand(const Command& cmd, std::ostream& out, std::ostream& err) {
  auto credentials = MakeChannelCredentials(cmd.tls);
  if (!credentials.ok()) {
    err << "ringctl: " << SingleLine(credentials.status().message()) << "\n";
    return kExitUsage;
  }
  auto stub =
      v1::AdminService::NewStub(CreateChannelWithToken(cmd.scheduler, *credentials, cmd.token));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto fail = [&](const grpc::Status& status, const char* action) {
    Failure f = DescribeRpcError(FromGrpcStatus(status), action, cmd.scheduler, "");
    err << "ringctl: " << f.message << "\n";
    return f.exit_code;
  };
  const bool json = cmd.output == OutputFormat::kJson;
  switch (cmd.admin_action) {
    case AdminAction::kTokenCreate: {
      v1::CreateTokenRequest req;
      req.set_team(cmd.token_team);
      req.set_role(cmd.token_role);
      req.set_expires_in(cmd.token_expires);
      req.set_description(cmd.token_description);
      v1::CreateTokenResponse resp;
      grpc::Status s = stub->CreateToken(&ctx, req, &resp);
      if (!s.ok()) return fail(s, "create token");
      if (json) {
        out << Json(resp) << "\n";
      } else {
        out << resp.token() << "\n";
        err << "token " << resp.info().id() << ": " << resp.info().role() << " of team "
            << resp.info().team() << ", expires " << Expiry(resp.info().expires_at_ms())
            << ". It is shown only now; the scheduler keeps its hash alone.\n";
      }
      return kExitOk;
    }
    case AdminAction::kTokenList: {
      v1::ListTokensRequest req;
      req.set_all(cmd.all_tokens);
      v1::ListTokensResponse resp;
      grpc::Status s = stub->ListTokens(&ctx, req, &resp);
      if (!s.ok()) return fail(s, "list tokens");
      if (json) {
        out << Json(resp) << "\n";
        return kExitOk;
      }
      out << absl::StrFormat("%-16s  %-16s  %-6s  %-20s  %-20s  %-7s  %s\n", "ID", "TEAM", "ROLE",
                             "CREATED", "EXPIRES", "REVOKED", "DESCRIPTION");
      for (const v1::TokenInfo& t : resp.tokens()) {
        out << absl::StrFormat("%-16s  %-16s  %-6s  %-20s  %-20s  %-7s  %s\n", t.id(), t.team(),
                               t.role(), FormatTimeMs(t.created_at_ms()), Expiry(t.expires_at_ms()),
                               t.revoked() ? "yes" : "no", t.description());
      }
      return kExitOk;
    }
    case AdminAction::kTokenRevoke: {
      v1::RevokeTokenRequest req;
      req.set_id(cmd.token_id);
      v1::RevokeTokenResponse resp;
      grpc::Status s = stub->RevokeToken(&ctx, req, &resp);
      if (!s.ok()) return fail(s, "revoke token");
      if (json) {
        out << Json(resp) << "\n";
      } else {
        out << "revoked token " << resp.info().id() << " (" << resp.info().role() << " of team "
            << resp.info().team() << ")\n";
      }
      return kExitOk;
    }
    case AdminAction::kAudit: {
      v1::ListAuditRequest req;
      req.set_limit(cmd.limit);
      v1::ListAuditResponse resp;
      grpc::Status s = stub->ListAudit(&ctx, req, &resp);
      if (!s.ok()) return fail(s, "list audit");
      if (json) {
        out << Json(resp) << "\n";
        return kExitOk;
      }
      out << absl::StrFormat("%-6s  %-20s  %-16s  %-12s  %-6s  %-24s  %-12s  %-16s  %s\n", "SEQ",
                             "TIME", "WHO", "TEAM", "ROLE", "FROM", "ACTION", "RESOURCE", "DETAIL");
      for (const v1::AuditEntry& e : resp.entries()) {
        out << absl::StrFormat("%-6d  %-20s  %-16s  %-12s  %-6s  %-24s  %-12s  %-16s  %s\n",
                               e.seq(), FormatTimeMs(e.at_ms()), e.principal(), e.team(), e.role(),
                               e.peer(), e.action(), e.resource(), e.detail());
      }
      return kExitOk;
    }
    case AdminAction::kNone:
      break;
  }
  err << "ringctl: missing admin action (see ringctl admin --help)\n";
  return kExitUsage;
}

}  // namespace ringmaster::cli
