// ringctl queue: the YAML format, argument parsing, the tables, and the command flow against a
// fake scheduler.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "app.h"
#include "args.h"
#include "errors.h"
#include "fake_scheduler.h"
#include "queue_format.h"
#include "queue_yaml.h"

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;

constexpr char kQueueYaml[] = R"(name: vision
cohort: research
weight: 2
resources:
  t4:
    nominal: 16
    borrowing_limit: 8
    lending_limit: 4
  cpu:
    nominal: 64
within_queue: LowerPriority
reclaim_within_cohort: Any
min_runtime_seconds: 600
)";

std::string ErrorOf(const std::string& yaml) {
  return std::string(ParseQueueYaml(yaml, "queue.yaml").status().message());
}

TEST(QueueYamlTest, ReadsEveryField) {
  absl::StatusOr<v1::Queue> queue = ParseQueueYaml(kQueueYaml, "queue.yaml");
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_EQ(queue->name(), "vision");
  EXPECT_EQ(queue->cohort(), "research");
  EXPECT_EQ(queue->weight(), 2);
  ASSERT_EQ(queue->resources().size(), 2u);
  const v1::ResourceQuota& t4 = queue->resources().at("t4");
  EXPECT_EQ(t4.nominal(), 16);
  EXPECT_EQ(t4.borrowing_limit(), 8);
  EXPECT_EQ(t4.lending_limit(), 4);
  const v1::ResourceQuota& cpu = queue->resources().at("cpu");
  EXPECT_EQ(cpu.nominal(), 64);
  EXPECT_FALSE(cpu.has_borrowing_limit()) << "unset means unlimited, not 0";
  EXPECT_FALSE(cpu.has_lending_limit());
  EXPECT_EQ(queue->within_queue(), v1::PREEMPT_WITHIN_QUEUE_LOWER_PRIORITY);
  EXPECT_EQ(queue->reclaim_within_cohort(), v1::RECLAIM_WITHIN_COHORT_ANY);
  EXPECT_EQ(queue->min_runtime_seconds(), 600);
  EXPECT_FALSE(queue->has_elastic_idle_delay_seconds()) << "unset: the scheduler's default";
}

TEST(QueueYamlTest, ReadsTheElasticIdleDelay) {
  absl::StatusOr<v1::Queue> queue =
      ParseQueueYaml("name: vision\nelastic_idle_delay_seconds: 300\n", "queue.yaml");
  ASSERT_TRUE(queue.ok()) << queue.status();
  ASSERT_TRUE(queue->has_elastic_idle_delay_seconds());
  EXPECT_EQ(queue->elastic_idle_delay_seconds(), 300);
  EXPECT_EQ(ErrorOf("elastic_idle_delay_seconds: soon\n"),
            "queue.yaml: elastic_idle_delay_seconds: expected an integer, got \"soon\"");
}

TEST(QueueYamlTest, AQueueWithOnlyANameHasNoQuotas) {
  absl::StatusOr<v1::Queue> queue = ParseQueueYaml("name: scratch\n", "queue.yaml");
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_TRUE(queue->resources().empty());
  EXPECT_EQ(queue->within_queue(), v1::PREEMPT_WITHIN_QUEUE_UNSPECIFIED);
}

TEST(QueueYamlTest, ErrorsNameTheYamlPath) {
  EXPECT_EQ(ErrorOf("name: a\ncolour: red\n"),
            "queue.yaml: colour: unknown key (expected one of: name, cohort, weight, resources, "
            "within_queue, reclaim_within_cohort, min_runtime_seconds, teams, "
            "progress_timeout_seconds, idle_timeout_seconds, elastic_idle_delay_seconds)");
  EXPECT_EQ(ErrorOf("resources:\n  t4:\n    nominal: lots\n"),
            "queue.yaml: resources.t4.nominal: expected an integer, got \"lots\"");
  EXPECT_EQ(ErrorOf("resources:\n  t4:\n    nominal: 1\n    lending: 2\n"),
            "queue.yaml: resources.t4.lending: unknown key (expected one of: nominal, "
            "borrowing_limit, lending_limit)");
  EXPECT_EQ(ErrorOf("resources:\n  t4:\n    borrowing_limit: 2\n"),
            "queue.yaml: resources.t4: nominal is required");
  EXPECT_EQ(ErrorOf("resources:\n  t4: 8\n"),
            "queue.yaml: resources.t4: expected a mapping, got \"8\"");
  EXPECT_EQ(ErrorOf("resources:\n  t4:\n    nominal: -1\n"),
            "queue.yaml: resources.t4.nominal: must not be negative, got -1");
  EXPECT_EQ(ErrorOf("weight: 3000000000\n"),
            "queue.yaml: weight: out of range for a 32-bit integer: 3000000000");
  EXPECT_EQ(ErrorOf("within_queue: Sometimes\n"),
            "queue.yaml: within_queue: expected Never, LowerPriority or "
            "LowerOrNewerEqualPriority, got \"Sometimes\"");
  EXPECT_EQ(ErrorOf("reclaim_within_cohort: All\n"),
            "queue.yaml: reclaim_within_cohort: expected Never, LowerPriority or Any, got \"All\"");
  EXPECT_EQ(ErrorOf("name: [a]\n"), "queue.yaml: name: expected a string, got a list");
  EXPECT_EQ(ErrorOf("name: a\nname: b\n"), "queue.yaml: name: duplicate key");
  EXPECT_EQ(ErrorOf("- a\n"), "queue.yaml: expected a mapping, got a list");
  EXPECT_EQ(ErrorOf("name: a\n---\nname: b\n"),
            "queue.yaml: expected one YAML document with the queue's fields, found 2");
  EXPECT_THAT(ErrorOf("name: [a\n"), ::testing::StartsWith("queue.yaml:"));
}

TEST(QueueYamlTest, TheExampleInTheDocsParses) {
  absl::StatusOr<v1::Queue> queue =
      LoadQueueFile(std::string(RINGMASTER_SOURCE_DIR) + "/docs/examples/queue.yaml");
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_EQ(queue->name(), "vision");
  EXPECT_FALSE(queue->resources().empty());
}

absl::StatusOr<Command> Parse(const std::vector<std::string>& args) {
  return ParseArgs(args, [](const char*) -> const char* { return nullptr; });
}

TEST(QueueArgsTest, ParsesEveryAction) {
  absl::StatusOr<Command> create = Parse({"queue", "create", "-f", "q.yaml"});
  ASSERT_TRUE(create.ok()) << create.status();
  EXPECT_EQ(create->verb, Verb::kQueue);
  EXPECT_EQ(create->queue_action, QueueAction::kCreate);
  EXPECT_EQ(create->spec_file, "q.yaml");
  absl::StatusOr<Command> update = Parse({"queue", "update", "--file=q.yaml", "-o", "json"});
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_EQ(update->queue_action, QueueAction::kUpdate);
  EXPECT_EQ(update->output, OutputFormat::kJson);
  absl::StatusOr<Command> get = Parse({"queue", "get", "vision"});
  ASSERT_TRUE(get.ok()) << get.status();
  EXPECT_EQ(get->queue_action, QueueAction::kGet);
  EXPECT_EQ(get->queue_name, "vision");
  absl::StatusOr<Command> list = Parse({"-o", "json", "queue", "list"});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->queue_action, QueueAction::kList);
  absl::StatusOr<Command> del = Parse({"queue", "delete", "vision"});
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_EQ(del->queue_action, QueueAction::kDelete);
  EXPECT_EQ(del->queue_name, "vision");
}

TEST(QueueArgsTest, MistakesAreUsageErrors) {
  auto error = [](const std::vector<std::string>& args) {
    return std::string(Parse(args).status().message());
  };
  EXPECT_EQ(error({"queue"}),
            "missing queue action: create, get, list, update or delete (see ringctl queue --help)");
  EXPECT_THAT(error({"queue", "drop", "x"}), HasSubstr("unknown queue action 'drop'"));
  EXPECT_EQ(error({"queue", "get"}), "missing queue NAME (usage: ringctl queue get NAME)");
  EXPECT_EQ(error({"queue", "create"}),
            "queue create needs -f FILE (a YAML queue, see docs/examples/queue.yaml)");
  EXPECT_EQ(error({"queue", "list", "-f", "q.yaml"}),
            "queue list does not take -f (only create and update do)");
  EXPECT_EQ(error({"queue", "get", "a", "b"}), "unexpected argument 'b' for queue");
  EXPECT_THAT(error({"queue", "list", "--state", "running"}), HasSubstr("does not take --state"));
}

TEST(QueueArgsTest, HelpDescribesTheCommand) {
  absl::StatusOr<Command> help = Parse({"queue", "--help"});
  ASSERT_TRUE(help.ok()) << help.status();
  EXPECT_TRUE(help->help);
  const std::string usage = Usage(Verb::kQueue);
  EXPECT_THAT(usage, HasSubstr("Usage: ringctl queue create -f FILE | get NAME | list"));
  EXPECT_THAT(Usage(Verb::kNone), HasSubstr("queue create -f FILE"));
}

v1::QueueWithStatus VisionWithStatus() {
  v1::QueueWithStatus q;
  v1::Queue* queue = q.mutable_queue();
  queue->set_name("vision");
  queue->set_cohort("research");
  queue->set_weight(2);
  (*queue->mutable_resources())["t4"].set_nominal(16);
  (*queue->mutable_resources())["t4"].set_borrowing_limit(8);
  (*queue->mutable_resources())["cpu"].set_nominal(64);
  queue->set_within_queue(v1::PREEMPT_WITHIN_QUEUE_LOWER_PRIORITY);
  queue->set_min_runtime_seconds(600);
  queue->set_created_at_ms(1714564800000);
  queue->set_updated_at_ms(1714564800000);
  v1::ResourceStatus& t4 = (*q.mutable_status()->mutable_resources())["t4"];
  t4.set_in_use(20);
  t4.set_borrowed(4);
  t4.set_used_seconds(9'000);
  q.mutable_status()->set_pending_jobs(3);
  q.mutable_status()->set_weighted_share(0.125);
  return q;
}

v1::QueueWithStatus DefaultQueue() {
  v1::QueueWithStatus q;
  q.mutable_queue()->set_name("default");
  q.mutable_queue()->set_weight(1);
  return q;
}

TEST(QueueFormatTest, ListShowsQuotasAndStatusPerQueue) {
  v1::ListQueuesResponse response;
  *response.add_queues() = DefaultQueue();
  *response.add_queues() = VisionWithStatus();
  EXPECT_EQ(FormatQueueList(response),
            "NAME      COHORT     WEIGHT   NOMINAL        IN USE   BORROWED   LENT   PENDING   "
            "SHARE\n"
            "default   -          1        unlimited      0        0          0      0         "
            "0.00\n"
            "vision    research   2        cpu:64 t4:16   t4:20    t4:4       0      3         "
            "0.12\n");
  EXPECT_EQ(FormatQueueList(v1::ListQueuesResponse()), "No queues.\n");
}

TEST(QueueFormatTest, GetShowsTheSettingsThenOneRowPerResource) {
  EXPECT_EQ(FormatQueue(VisionWithStatus()),
            "Name:          vision\n"
            "Cohort:        research\n"
            "Weight:        2\n"
            "Within queue:  LowerPriority\n"
            "Reclaim:       Never\n"
            "Min runtime:   600s\n"
            "Teams:         - (every team)\n"
            "Hang timeout:  600s (default)\n"
            "Idle timeout:  off\n"
            "Elastic delay: the scheduler's (--elastic-idle-delay-ms)\n"
            "Pending jobs:  3\n"
            "Share:         0.12\n"
            "Created:       2024-05-01T12:00:00Z\n"
            "Updated:       2024-05-01T12:00:00Z\n"
            "\n"
            "RESOURCE   NOMINAL   BORROWING LIMIT   LENDING LIMIT   IN USE   BORROWED   LENT   "
            "USED (HOURS)\n"
            "cpu        64        unlimited         all             0        0          0      "
            "0.00\n"
            "t4         16        8                 all             20       4          0      "
            "2.50\n");
  EXPECT_THAT(FormatQueue(DefaultQueue()),
              HasSubstr("No quotas: only the cluster's capacity bounds this queue."));
  v1::QueueWithStatus patient = VisionWithStatus();
  patient.mutable_queue()->set_elastic_idle_delay_seconds(300);
  EXPECT_THAT(FormatQueue(patient), HasSubstr("\nElastic delay: 300s idle\n"));
}

class QueueCommandTest : public ::testing::Test {
 protected:
  QueueCommandTest() {
    runtime_.getenv = [](const char*) -> const char* { return nullptr; };
    runtime_.now_ms = [] { return int64_t{1714564800000}; };
    runtime_.sleep = [](std::chrono::milliseconds) {};
    runtime_.new_request_id = [] { return std::string("id"); };
    runtime_.connect = [this](const std::string&, std::shared_ptr<grpc::ChannelCredentials>,
                              const std::string&) -> std::unique_ptr<SchedulerClient> {
      return std::make_unique<ForwardingClient>(&fake_);
    };
  }

  int Run(const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return RunCli(args, runtime_, out_, err_);
  }

  std::string WriteYaml(const std::string& text) {
    const std::string path = ::testing::TempDir() + "/queue-test.yaml";
    std::ofstream(path) << text;
    return path;
  }

  FakeScheduler fake_;
  Runtime runtime_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(QueueCommandTest, CreateSendsTheFileAndSaysWhatItDid) {
  fake_.queue_results.push_back(VisionWithStatus());
  EXPECT_EQ(Run({"queue", "create", "-f", WriteYaml(kQueueYaml)}), kExitOk) << err_.str();
  ASSERT_EQ(fake_.queue_creates.size(), 1u);
  EXPECT_EQ(fake_.queue_creates[0].queue().name(), "vision");
  EXPECT_EQ(fake_.queue_creates[0].queue().resources().at("t4").nominal(), 16);
  EXPECT_EQ(out_.str(), "queue vision created\n");
}

TEST_F(QueueCommandTest, UpdateWithJsonOutputPrintsTheStoredQueue) {
  fake_.queue_results.push_back(VisionWithStatus());
  EXPECT_EQ(Run({"queue", "update", "-f", WriteYaml(kQueueYaml), "-o", "json"}), kExitOk)
      << err_.str();
  ASSERT_EQ(fake_.queue_updates.size(), 1u);
  EXPECT_THAT(out_.str(), HasSubstr("\"name\": \"vision\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"pending_jobs\": \"3\""));
}

TEST_F(QueueCommandTest, ABadFileIsAUsageErrorAndNothingIsSent) {
  EXPECT_EQ(Run({"queue", "create", "-f", WriteYaml("weight: heavy\n")}), kExitUsage);
  EXPECT_EQ(err_.str(), "ringctl: " + ::testing::TempDir() +
                            "/queue-test.yaml: weight: expected an integer, got \"heavy\"\n");
  EXPECT_TRUE(fake_.queue_creates.empty());
}

TEST_F(QueueCommandTest, TheSchedulersRefusalIsShownWithItsExitCode) {
  fake_.queue_results.push_back(absl::InvalidArgumentError("weight: must be 1..1000, got 2000"));
  EXPECT_EQ(Run({"queue", "create", "-f", WriteYaml(kQueueYaml)}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "ringctl: create queue vision: invalid argument: weight: must be 1..1000, got 2000\n");
  fake_.queue_results.push_back(absl::NotFoundError("no queue 'audio'"));
  EXPECT_EQ(Run({"queue", "get", "audio"}), kExitNotFound);
  EXPECT_EQ(err_.str(), "ringctl: get queue audio: not found: no queue 'audio'\n");
  fake_.queue_delete_results.push_back(
      absl::FailedPreconditionError("queue vision has 1 live jobs"));
  EXPECT_EQ(Run({"queue", "delete", "vision"}), kExitError);
  EXPECT_EQ(err_.str(), "ringctl: cannot delete queue vision: queue vision has 1 live jobs\n");
}

TEST_F(QueueCommandTest, GetListAndDelete) {
  fake_.queue_results.push_back(VisionWithStatus());
  EXPECT_EQ(Run({"queue", "get", "vision"}), kExitOk) << err_.str();
  ASSERT_EQ(fake_.queue_gets.size(), 1u);
  EXPECT_EQ(fake_.queue_gets[0].name(), "vision");
  EXPECT_EQ(out_.str(), FormatQueue(VisionWithStatus()));

  v1::ListQueuesResponse list;
  *list.add_queues() = DefaultQueue();
  fake_.queue_list_results.push_back(list);
  EXPECT_EQ(Run({"queue", "list"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), FormatQueueList(list));
  fake_.queue_list_results.push_back(list);
  EXPECT_EQ(Run({"queue", "list", "-o", "json"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"queues\": ["));

  fake_.queue_delete_results.push_back(absl::OkStatus());
  EXPECT_EQ(Run({"queue", "delete", "vision"}), kExitOk) << err_.str();
  ASSERT_EQ(fake_.queue_deletes.size(), 1u);
  EXPECT_EQ(fake_.queue_deletes[0].name(), "vision");
  EXPECT_EQ(out_.str(), "queue vision deleted\n");
}

}  // namespace
}  // namespace ringmaster::cli
