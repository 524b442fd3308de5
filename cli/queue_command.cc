#include "queue_command.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "errors.h"
#include "format.h"
#include "queue_format.h"
#include "queue_yaml.h"

namespace ringmaster::cli {
namespace {

class QueueInvocation {
 public:
  QueueInvocation(const Command& cmd, SchedulerClient& client, std::ostream& out, std::ostream& err)
      : cmd_(cmd), client_(client), out_(out), err_(err) {}

  int Run() {
    switch (cmd_.queue_action) {
      case QueueAction::kCreate:
        return Write(/*create=*/true);
      case QueueAction::kUpdate:
        return Write(/*create=*/false);
      case QueueAction::kGet:
        return Get();
      case QueueAction::kList:
        return List();
      case QueueAction::kDelete:
        return Delete();
      case QueueAction::kNone:
        break;
    }
    return Fail({kExitUsage, "missing queue action (see ringctl queue --help)"});
  }

 private:
  int Write(bool create) {
    absl::StatusOr<v1::Queue> queue = LoadQueueFile(cmd_.spec_file);
    if (!queue.ok()) return Fail({kExitUsage, std::string(queue.status().message())});
    const std::string action = absl::StrCat(create ? "create" : "update", " queue ",
                                            queue->name().empty() ? "(unnamed)" : queue->name());
    absl::StatusOr<v1::QueueWithStatus> result;
    if (create) {
      v1::CreateQueueRequest request;
      *request.mutable_queue() = *queue;
      result = client_.CreateQueue(request);
    } else {
      v1::UpdateQueueRequest request;
      *request.mutable_queue() = *queue;
      result = client_.UpdateQueue(request);
    }
    if (!result.ok()) return RpcFailure(result.status(), action);
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*result);
    out_ << "queue " << result->queue().name() << (create ? " created" : " updated") << "\n";
    return kExitOk;
  }

  int Get() {
    v1::GetQueueRequest request;
    request.set_name(cmd_.queue_name);
    absl::StatusOr<v1::QueueWithStatus> result = client_.GetQueue(request);
    if (!result.ok()) return RpcFailure(result.status(), "get queue " + cmd_.queue_name);
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*result);
    out_ << FormatQueue(*result);
    return kExitOk;
  }

  int List() {
    absl::StatusOr<v1::ListQueuesResponse> result = client_.ListQueues(v1::ListQueuesRequest());
    if (!result.ok()) return RpcFailure(result.status(), "list queues");
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*result);
    out_ << FormatQueueList(*result);
    return kExitOk;
  }

  int Delete() {
    v1::DeleteQueueRequest request;
    request.set_name(cmd_.queue_name);
    absl::StatusOr<v1::DeleteQueueResponse> result = client_.DeleteQueue(request);
    if (!result.ok()) return RpcFailure(result.status(), "delete queue " + cmd_.queue_name);
    if (cmd_.output == OutputFormat::kJson) return PrintJson(*result);
    out_ << "queue " << cmd_.queue_name << " deleted\n";
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

int RunQueueCommand(const Command& cmd, SchedulerClient& client, std::ostream& out,
                    std::ostream& err) {
  return QueueInvocation(cmd, client, out, err).Run();
}

}  // namespace ringmaster::cli
