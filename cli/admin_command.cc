#include "admin_command.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/bearer_token.h"
#include "common/grpc_status.h"
#include "common/tls.h"
#include "errors.h"
#include "format.h"
#include "ringmaster/v1/admin.grpc.pb.h"

namespace ringmaster::cli {
namespace {

// As every other command prints JSON: protobuf field names, zeros printed.
std::string Json(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message, /*pretty=*/true);
  return json.ok() ? std::string(absl::StripSuffix(*json, "\n")) : "{}";
}

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

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
      std::vector<std::vector<std::string>> rows;
      for (const v1::TokenInfo& t : resp.tokens()) {
        rows.push_back({t.id(), t.team(), t.role(), FormatTimeMs(t.created_at_ms()),
                        Expiry(t.expires_at_ms()), t.revoked() ? "yes" : "no",
                        OrDash(t.description())});
      }
      out << RenderTable({"ID", "TEAM", "ROLE", "CREATED", "EXPIRES", "REVOKED", "DESCRIPTION"},
                         rows);
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
      std::vector<std::vector<std::string>> rows;
      for (const v1::AuditEntry& e : resp.entries()) {
        rows.push_back({absl::StrCat(e.seq()), FormatTimeMs(e.at_ms()), OrDash(e.principal()),
                        OrDash(e.team()), OrDash(e.role()), OrDash(e.peer()), e.action(),
                        OrDash(e.resource()), OrDash(e.detail())});
      }
      out << RenderTable(
          {"SEQ", "TIME", "WHO", "TEAM", "ROLE", "FROM", "ACTION", "RESOURCE", "DETAIL"}, rows);
      return kExitOk;
    }
    case AdminAction::kNone:
      break;
  }
  err << "ringctl: missing admin action (see ringctl admin --help)\n";
  return kExitUsage;
}

}  // namespace ringmaster::cli
