#include "volume_command.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "errors.h"
#include "format.h"

namespace ringmaster::cli {
namespace {

std::string GrantsText(const v1::Volume& volume) {
  std::vector<std::string> grants;
  for (const v1::VolumeGrant& g : volume.grants()) {
    grants.push_back(g.read_only() ? absl::StrCat(g.team(), ":ro") : g.team());
  }
  return grants.empty() ? "-" : absl::StrJoin(grants, ",");
}

class VolumeInvocation {
 public:
  VolumeInvocation(const Command& cmd, SchedulerClient& client, std::ostream& out,
                   std::ostream& err)
      : cmd_(cmd), client_(client), out_(out), err_(err) {}

  int Run() {
    switch (cmd_.volume_action) {
      case VolumeAction::kCreate:
        return Write(/*create=*/true);
      case VolumeAction::kUpdate:
        return Write(/*create=*/false);
      case VolumeAction::kGet:
        return Get();
      case VolumeAction::kList:
        return List();
      case VolumeAction::kDelete:
        return Delete();
      case VolumeAction::kNone:
        break;
    }
    return Fail({kExitUsage, "missing volume action (see ringctl volume --help)"});
  }

 private:
  int Write(bool create) {
    absl::StatusOr<v1::Volume> volume = VolumeFromFlags(cmd_);
    if (!volume.ok()) return Fail({kExitUsage, std::string(volume.status().message())});
    const std::string action =
        absl::StrCat(create ? "create" : "update", " volume ", cmd_.volume_name);
    absl::StatusOr<v1::Volume> result;
    if (create) {
      v1::CreateVolumeRequest request;
      *request.mutable_volume() = *volume;
      result = client_.CreateVolume(request);
    } else {
      v1::UpdateVolumeRequest request;
      *request.mutable_volume() = *volume;
      result = client_.UpdateVolume(request);
    }
    if (!result.ok()) return RpcFailure(result.status(), action);
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*result);
    out_ << "volume " << result->name() << (create ? " created" : " updated") << "\n";
    return kExitOk;
  }

  int Get() {
    v1::GetVolumeRequest request;
    request.set_name(cmd_.volume_name);
    absl::StatusOr<v1::Volume> result = client_.GetVolume(request);
    if (!result.ok()) return RpcFailure(result.status(), "get volume " + cmd_.volume_name);
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*result);
    const std::vector<std::pair<std::string, std::string>> fields = {
        {"Name:", result->name()},
        {"Host path:", result->host_path()},
        {"Grants:", GrantsText(*result)},
        {"Description:", result->description().empty() ? "-" : result->description()},
        {"Created:", FormatTimeMs(result->created_at_ms())},
        {"Updated:", FormatTimeMs(result->updated_at_ms())},
    };
    for (const auto& [label, value] : fields) {
      out_ << label << std::string(14 - label.size(), ' ') << SingleLine(value) << "\n";
    }
    return kExitOk;
  }

  int List() {
    absl::StatusOr<v1::ListVolumesResponse> result = client_.ListVolumes(v1::ListVolumesRequest());
    if (!result.ok()) return RpcFailure(result.status(), "list volumes");
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*result);
    std::vector<std::vector<std::string>> rows;
    for (const v1::Volume& v : result->volumes()) {
      rows.push_back({v.name(), v.host_path(), GrantsText(v),
                      v.description().empty() ? "-" : SingleLine(v.description())});
    }
    out_ << RenderTable({"NAME", "HOST PATH", "GRANTS", "DESCRIPTION"}, rows);
    return kExitOk;
  }

  int Delete() {
    v1::DeleteVolumeRequest request;
    request.set_name(cmd_.volume_name);
    absl::StatusOr<v1::DeleteVolumeResponse> result = client_.DeleteVolume(request);
    if (!result.ok()) return RpcFailure(result.status(), "delete volume " + cmd_.volume_name);
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*result);
    out_ << "volume " << cmd_.volume_name << " deleted\n";
    return kExitOk;
  }

  int PrintJson(const google::protobuf::Message& message) {
    absl::StatusOr<std::string> json = ToJson(message, /*pretty=*/true);
    if (!json.ok()) return Fail({kExitError, std::string(json.status().message())});
    out_ << *json;
    return kExitOk;
  }

  int RpcFailure(const absl::Status& status, const std::string& action) {
    return Fail(DescribeRpcError(status, action, cmd_.scheduler, ""));
  }

  int Fail(const Failure& failure) {
    err_ << "ringctl: " << SingleLine(failure.message) << "\n";
    return failure.exit_code;
  }

  const Command& cmd_;
  SchedulerClient& client_;
  std::ostream& out_;
  std::ostream& err_;
};

}  // namespace

absl::StatusOr<v1::Volume> VolumeFromFlags(const Command& cmd) {
  v1::Volume volume;
  volume.set_name(cmd.volume_name);
  volume.set_host_path(cmd.volume_path);
  volume.set_description(cmd.token_description);
  for (const std::string& grant : cmd.volume_grants) {
    v1::VolumeGrant* g = volume.add_grants();
    std::string team = grant;
    if (absl::EndsWith(team, ":ro")) {
      team.resize(team.size() - 3);
      g->set_read_only(true);
    }
    if (team.empty() || absl::StrContains(team, ':')) {
      return absl::InvalidArgumentError(
          absl::StrCat("--grant: expected TEAM or TEAM:ro, got '", grant, "'"));
    }
    g->set_team(team);
  }
  return volume;
}

int RunVolumeCommand(const Command& cmd, SchedulerClient& client, std::ostream& out,
                     std::ostream& err) {
  return VolumeInvocation(cmd, client, out, err).Run();
}

}  // namespace ringmaster::cli
