#include "scheduler/core/validation.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::HasSubstr;

JobSpec ValidSpec() {
  JobSpec spec;
  spec.name = "resnet-50";
  spec.replicas = 4;
  spec.gpus_per_replica = 1;
  spec.gpu_type = "t4";
  spec.trainer = TrainerWorkload{};
  return spec;
}

// Expects INVALID_ARGUMENT whose message starts with the field name and contains `detail`.
void ExpectInvalid(const JobSpec& spec, const std::string& field, const std::string& detail) {
  auto result = ValidateJobSpec(spec);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_EQ(result.status().message().substr(0, field.size() + 1), field + ":")
      << result.status().message();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(detail));
}

TEST(ValidationTest, AppliesDefaults) {
  auto spec = ValidateJobSpec(ValidSpec());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->queue, "default");
  EXPECT_EQ(spec->trainer->model, "mlp");
  EXPECT_EQ(spec->trainer->batch_size, 64);
  EXPECT_EQ(spec->trainer->steps, 100);
  EXPECT_EQ(spec->backoff_limit, 6);
}

TEST(ValidationTest, KeepsAnExplicitZeroBackoffLimit) {
  JobSpec spec = ValidSpec();
  spec.backoff_limit = 0;
  EXPECT_EQ(ValidateJobSpec(spec)->backoff_limit, 0);
}

TEST(ValidationTest, Name) {
  for (const std::string& bad : std::vector<std::string>{"", "Upper", "9lives", "ends-", "has_underscore", std::string(64, 'a')}) {
    JobSpec spec = ValidSpec();
    spec.name = bad;
    ExpectInvalid(spec, "name", "a-z, 0-9 and '-'");
  }
  JobSpec spec = ValidSpec();
  spec.name = std::string(63, 'a');
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(ValidationTest, Queue) {
  JobSpec spec = ValidSpec();
  spec.queue = "Team A";
  ExpectInvalid(spec, "queue", "got 'Team A'");
}

TEST(ValidationTest, Priority) {
  JobSpec spec = ValidSpec();
  spec.priority = 1001;
  ExpectInvalid(spec, "priority", "must be -1000..1000, got 1001");
}

TEST(ValidationTest, Replicas) {
  for (int bad : {0, -1, 4097}) {
    JobSpec spec = ValidSpec();
    spec.replicas = bad;
    ExpectInvalid(spec, "replicas", "must be 1..4096");
  }
}

TEST(ValidationTest, ElasticRangeNamesTheFieldOutOfOrder) {
  JobSpec spec = ValidSpec();
  spec.min_replicas = 2;
  spec.max_replicas = 8;
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.min_replicas = 5;
  ExpectInvalid(spec, "min_replicas", "must be 1..4, got 5");
  spec.min_replicas = 0;
  ExpectInvalid(spec, "min_replicas", "must be 1..4, got 0");
  spec = ValidSpec();
  spec.min_replicas = 1;
  spec.max_replicas = 3;
  ExpectInvalid(spec, "max_replicas", "must be 4..4096, got 3");
  spec.max_replicas = 4097;
  ExpectInvalid(spec, "max_replicas", "must be 4..4096, got 4097");
}

TEST(ValidationTest, SizesDivideNeedsAnElasticRangeThatItsStartAndFloorDivide) {
  JobSpec spec = ValidSpec();  // replicas 4
  spec.sizes_divide = 256;
  ExpectInvalid(spec, "sizes_divide", "only allowed for an elastic job");
  spec.min_replicas = 2;
  spec.max_replicas = 16;
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.sizes_divide = -4;
  ExpectInvalid(spec, "sizes_divide", "must be 1..1000000, got -4");
  spec.sizes_divide = 1'000'001;
  ExpectInvalid(spec, "sizes_divide", "must be 1..1000000, got 1000001");
  spec.sizes_divide = 6;  // 2 divides it, 4 does not
  ExpectInvalid(spec, "sizes_divide", "must be a multiple of replicas (4), got 6");
  spec.replicas = 6;
  spec.min_replicas = 4;  // replicas 6 divides 6; min_replicas 4 does not
  ExpectInvalid(spec, "sizes_divide", "must be a multiple of min_replicas (4), got 6");
  spec.min_replicas = 3;
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  // 0 is unset: any size in the range.
  spec.sizes_divide = 0;
  spec.min_replicas = 4;
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(ValidationTest, GpusPerReplica) {
  JobSpec spec = ValidSpec();
  spec.gpus_per_replica = 17;
  ExpectInvalid(spec, "gpus_per_replica", "must be 0..16, got 17");
}

TEST(ValidationTest, GpuType) {
  JobSpec spec = ValidSpec();
  spec.gpu_type = "T4!";
  ExpectInvalid(spec, "gpu_type", "a-z, 0-9, '-' and '.'");
  spec.gpu_type = ".10gb";
  ExpectInvalid(spec, "gpu_type", "a-z, 0-9, '-' and '.'");
  spec.gpu_type = "h100-1g.10gb";  // a MIG instance's type
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec = ValidSpec();
  spec.gpus_per_replica = 0;
  ExpectInvalid(spec, "gpu_type", "must be empty when gpus_per_replica is 0");
}

TEST(ValidationTest, Workload) {
  JobSpec spec = ValidSpec();
  spec.trainer.reset();
  ExpectInvalid(spec, "workload", "exactly one of trainer or command");
  spec = ValidSpec();
  spec.command = CommandWorkload{{"true"}, {}};
  ExpectInvalid(spec, "workload", "exactly one");
}

TEST(ValidationTest, Trainer) {
  JobSpec spec = ValidSpec();
  spec.trainer->model = "gpt-9";
  ExpectInvalid(spec, "trainer.model", "must be one of mlp, mlp-large, mlp-small");
  spec = ValidSpec();
  spec.trainer->batch_size = -1;
  ExpectInvalid(spec, "trainer.batch_size", "must be 1..65536");
  spec = ValidSpec();
  spec.trainer->steps = 10'000'001;
  ExpectInvalid(spec, "trainer.steps", "must be 1..10000000");
  spec = ValidSpec();
  spec.trainer->checkpoint_every = -1;
  ExpectInvalid(spec, "trainer.checkpoint_every", "must be 0..10000000");
  spec.trainer->checkpoint_every = 0;  // only when stopped
  auto valid = ValidateJobSpec(spec);
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ(valid->trainer->checkpoint_every, 0);
  spec.trainer->checkpoint_every.reset();  // the trainer's default, left to the trainer
  valid = ValidateJobSpec(spec);
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_FALSE(valid->trainer->checkpoint_every.has_value());
}

JobSpec CommandSpec(std::vector<std::string> argv) {
  JobSpec spec = ValidSpec();
  spec.trainer.reset();
  spec.command = CommandWorkload{std::move(argv), {}};
  return spec;
}

TEST(ValidationTest, CommandArgv) {
  EXPECT_TRUE(ValidateJobSpec(CommandSpec({"python3", "train.py"})).ok());
  ExpectInvalid(CommandSpec({}), "command.argv", "must have 1..256 entries, got 0");
  ExpectInvalid(CommandSpec(std::vector<std::string>(257, "x")), "command.argv", "got 257");
  ExpectInvalid(CommandSpec({""}), "command.argv[0]", "must name a program");
  ExpectInvalid(CommandSpec({"x", std::string(4097, 'a')}), "command.argv[1]",
                "at most 4096 bytes");
  ExpectInvalid(CommandSpec({"x", std::string("a\0b", 3)}), "command.argv[1]", "NUL");
  ExpectInvalid(CommandSpec(std::vector<std::string>(20, std::string(4000, 'a'))), "command.argv",
                "at most 65536 bytes in all");
}

TEST(ValidationTest, CommandEnv) {
  JobSpec spec = CommandSpec({"x"});
  spec.command->env["1BAD"] = "v";
  ExpectInvalid(spec, "command.env", "[A-Za-z_][A-Za-z0-9_]*");
  spec = CommandSpec({"x"});
  spec.command->env["CUDA_VISIBLE_DEVICES"] = "0";
  ExpectInvalid(spec, "command.env.CUDA_VISIBLE_DEVICES", "set by the platform");
  spec = CommandSpec({"x"});
  spec.command->env["BIG"] = std::string(4097, 'v');
  ExpectInvalid(spec, "command.env.BIG", "at most 4096 bytes");
  // A name is well-formed at any length: its own bound, and the error quotes only its start.
  spec = CommandSpec({"x"});
  spec.command->env[std::string(1 << 20, 'N')] = "v";
  ExpectInvalid(spec, "command.env", "names must be at most 256 bytes");
  EXPECT_LT(ValidateJobSpec(spec).status().message().size(), 400u);
  spec = CommandSpec({"x"});
  spec.command->env[std::string(256, 'N')] = "v";
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(ValidationTest, BackoffLimitAndRuntime) {
  JobSpec spec = ValidSpec();
  spec.backoff_limit = 101;
  ExpectInvalid(spec, "backoff_limit", "must be 0..100, got 101");
  spec = ValidSpec();
  spec.max_runtime_seconds = -5;
  ExpectInvalid(spec, "max_runtime_seconds", "must be 0..2592000, got -5");
}

TEST(ValidationTest, Labels) {
  JobSpec spec = ValidSpec();
  spec.labels["team/owner"] = "vision";
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.labels["bad key"] = "x";
  ExpectInvalid(spec, "labels", "keys must be 1..63 characters");
  spec = ValidSpec();
  spec.labels["k"] = std::string(257, 'v');
  ExpectInvalid(spec, "labels.k", "at most 256 bytes, got 257");
  spec = ValidSpec();
  for (int i = 0; i < 65; ++i) spec.labels["k" + std::to_string(i)] = "v";
  ExpectInvalid(spec, "labels", "at most 64 allowed, got 65");
}

TEST(ValidationTest, HostileValuesAreCutShortInMessages) {
  JobSpec spec = ValidSpec();
  spec.name = std::string(100000, 'X');
  auto result = ValidateJobSpec(spec);
  EXPECT_LT(result.status().message().size(), 300u);
}

TEST(ValidationTest, RequestAndJobIds) {
  EXPECT_TRUE(ValidateRequestId("").ok());
  EXPECT_TRUE(ValidateRequestId("abc-123:x.y_z").ok());
  EXPECT_EQ(ValidateRequestId(std::string(129, 'a')).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateRequestId("a b").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateJobId("j-0123abcd").ok());
  EXPECT_EQ(ValidateJobId("j-XYZ").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateJobId("").code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidationTest, Worker) {
  Worker w;
  w.id = "w1";
  w.address = "127.0.0.2";
  w.port = 7071;
  w.gpus = {{0, "t4", 1, true}, {1, "t4", 1, true}};
  EXPECT_TRUE(ValidateWorker(w).ok());
  Worker dup = w;
  dup.gpus[1].index = 0;
  EXPECT_THAT(std::string(ValidateWorker(dup).message()), HasSubstr("index appears twice"));
  Worker port = w;
  port.port = 0;
  EXPECT_EQ(ValidateWorker(port).code(), absl::StatusCode::kInvalidArgument);
  Worker type = w;
  type.gpus[0].type = "";
  EXPECT_THAT(std::string(ValidateWorker(type).message()), HasSubstr("gpus[0].type"));
  Worker id = w;
  id.id = "W 1";
  EXPECT_THAT(std::string(ValidateWorker(id).message()), HasSubstr("worker_id"));
}

Queue ValidQueue() {
  Queue queue;
  queue.name = "vision";
  queue.cohort = "research";
  queue.weight = 2;
  queue.quotas["t4"] = ResourceQuota{16, 8, 4};
  queue.quotas["cpu"] = ResourceQuota{64, std::nullopt, std::nullopt};
  queue.within_queue = PreemptWithinQueue::kLowerPriority;
  queue.reclaim_within_cohort = ReclaimWithinCohort::kAny;
  queue.min_runtime_seconds = 600;
  return queue;
}

// Expects INVALID_ARGUMENT whose message starts with the field name and contains `detail`.
void ExpectInvalidQueue(const Queue& queue, const std::string& field, const std::string& detail) {
  auto result = ValidateQueue(queue);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_EQ(result.status().message().substr(0, field.size() + 1), field + ":")
      << result.status().message();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(detail));
}

TEST(QueueValidationTest, AcceptsAValidQueueUnchanged) {
  auto queue = ValidateQueue(ValidQueue());
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_EQ(*queue, ValidQueue());
}

TEST(QueueValidationTest, WeightZeroMeansOne) {
  Queue queue = ValidQueue();
  queue.weight = 0;
  EXPECT_EQ(ValidateQueue(queue)->weight, 1);
}

TEST(QueueValidationTest, AcceptsTheDefaultQueueShape) {
  Queue queue;
  queue.name = kDefaultQueue;
  auto valid = ValidateQueue(queue);
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_TRUE(valid->unlimited());
  EXPECT_TRUE(valid->cohort.empty());
}

TEST(QueueValidationTest, Name) {
  for (const std::string& bad : std::vector<std::string>{"", "Team-A", "9lives", "ends-",
                                                         "has_underscore", std::string(64, 'a')}) {
    Queue queue = ValidQueue();
    queue.name = bad;
    ExpectInvalidQueue(queue, "name", "1..63 characters of a-z, 0-9 and '-'");
  }
  Queue queue = ValidQueue();
  queue.name = std::string(63, 'a');
  EXPECT_TRUE(ValidateQueue(queue).ok());
}

TEST(QueueValidationTest, CohortIsEmptyOrALabel) {
  Queue queue = ValidQueue();
  queue.cohort = "Research Org";
  ExpectInvalidQueue(queue, "cohort", "got 'Research Org'");
  queue.cohort = std::string(64, 'c');
  ExpectInvalidQueue(queue, "cohort", "got 64 characters");
}

TEST(QueueValidationTest, Weight) {
  for (int bad : {-1, 1001}) {
    Queue queue = ValidQueue();
    queue.weight = bad;
    ExpectInvalidQueue(queue, "weight", "must be 1..1000");
  }
  Queue queue = ValidQueue();
  queue.weight = 1000;
  EXPECT_TRUE(ValidateQueue(queue).ok());
}

TEST(QueueValidationTest, ResourceNames) {
  for (const std::string& bad :
       std::vector<std::string>{"", "T4", "nvidia a100", std::string(33, 'g')}) {
    Queue queue = ValidQueue();
    queue.quotas[bad] = ResourceQuota{1, std::nullopt, std::nullopt};
    ExpectInvalidQueue(queue, "resources", "a GPU type");
  }
  Queue many = ValidQueue();
  for (int i = 0; i < 63; ++i) {  // two already
    many.quotas["g" + std::to_string(i)] = ResourceQuota{1, std::nullopt, std::nullopt};
  }
  ExpectInvalidQueue(many, "resources", "at most 64 allowed, got 65");
}

TEST(QueueValidationTest, NominalIsBounded) {
  for (int64_t bad : {int64_t{-1}, int64_t{1'000'001}}) {
    Queue queue = ValidQueue();
    queue.quotas["t4"].nominal = bad;
    ExpectInvalidQueue(queue, "resources.t4.nominal", "must be 0..1000000");
  }
  Queue queue = ValidQueue();
  queue.quotas["t4"] = ResourceQuota{1'000'000, std::nullopt, std::nullopt};
  EXPECT_TRUE(ValidateQueue(queue).ok());
}

TEST(QueueValidationTest, BorrowingLimitIsBoundedAndNeedsACohort) {
  for (int64_t bad : {int64_t{-1}, int64_t{1'000'001}}) {
    Queue queue = ValidQueue();
    queue.quotas["t4"].borrowing_limit = bad;
    ExpectInvalidQueue(queue, "resources.t4.borrowing_limit", "must be 0..1000000");
  }
  Queue alone = ValidQueue();
  alone.cohort.clear();
  alone.quotas["t4"].lending_limit.reset();
  ExpectInvalidQueue(alone, "resources.t4.borrowing_limit", "no cohort");
}

TEST(QueueValidationTest, LendingLimitIsAtMostNominalAndNeedsACohort) {
  for (int64_t bad : {int64_t{-1}, int64_t{17}}) {
    Queue queue = ValidQueue();
    queue.quotas["t4"].lending_limit = bad;
    ExpectInvalidQueue(queue, "resources.t4.lending_limit", "must be 0..nominal (16)");
  }
  Queue queue = ValidQueue();
  queue.quotas["t4"].lending_limit = 16;
  EXPECT_TRUE(ValidateQueue(queue).ok());
  Queue alone = ValidQueue();
  alone.cohort.clear();
  alone.quotas["t4"].borrowing_limit.reset();
  ExpectInvalidQueue(alone, "resources.t4.lending_limit", "no cohort");
}

TEST(QueueValidationTest, ElasticIdleDelayIsUnsetOrOneSecondToADay) {
  for (int64_t bad : {int64_t{0}, int64_t{-5}, int64_t{86'401}}) {
    Queue queue = ValidQueue();
    queue.elastic_idle_delay_seconds = bad;
    ExpectInvalidQueue(queue, "elastic_idle_delay_seconds", "must be 1..86400");
  }
  for (int64_t good : {int64_t{1}, int64_t{300}, int64_t{86'400}}) {
    Queue queue = ValidQueue();
    queue.elastic_idle_delay_seconds = good;
    auto valid = ValidateQueue(queue);
    ASSERT_TRUE(valid.ok()) << valid.status();
    EXPECT_EQ(valid->elastic_idle_delay_seconds, std::optional<int64_t>(good));
  }
  EXPECT_FALSE(ValidateQueue(ValidQueue())->elastic_idle_delay_seconds) << "unset stays unset";
}

TEST(QueueValidationTest, PreemptionSettingsAreKnownValues) {
  Queue within = ValidQueue();
  within.within_queue = static_cast<PreemptWithinQueue>(7);
  ExpectInvalidQueue(within, "within_queue", "Never, LowerPriority or LowerOrNewerEqualPriority");
  Queue reclaim = ValidQueue();
  reclaim.reclaim_within_cohort = static_cast<ReclaimWithinCohort>(-1);
  ExpectInvalidQueue(reclaim, "reclaim_within_cohort", "Never, LowerPriority or Any");
}

TEST(QueueValidationTest, MinRuntimeIsAtMostThirtyDays) {
  for (int64_t bad : {int64_t{-1}, int64_t{30} * 24 * 3600 + 1}) {
    Queue queue = ValidQueue();
    queue.min_runtime_seconds = bad;
    ExpectInvalidQueue(queue, "min_runtime_seconds", "must be 0..2592000");
  }
}

}  // namespace
}  // namespace ringmaster::scheduler
