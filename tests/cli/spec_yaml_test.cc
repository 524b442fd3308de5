#include "spec_yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;

// The message of a parse that must fail with INVALID_ARGUMENT.
std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(yaml, "job.yaml");
  EXPECT_FALSE(spec.ok()) << "parsed: " << (spec.ok() ? spec->DebugString() : "");
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST(SpecYamlTest, ParsesEveryFieldOfATrainerSpec) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(R"(
name: resnet
queue: vision
priority: -5
replicas: 4
gpus_per_replica: 2
gpu_type: t4
restart_policy: OnFailure
backoff_limit: 3
max_runtime_seconds: 3600
labels:
  team: vision
  run: "7"
trainer:
  model: mlp-large
  batch_size: 128
  steps: 20000000000
  checkpoint_every: 0
)",
                                                      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "resnet");
  EXPECT_EQ(spec->queue(), "vision");
  EXPECT_EQ(spec->priority(), -5);
  EXPECT_EQ(spec->replicas(), 4);
  EXPECT_EQ(spec->gpus_per_replica(), 2);
  EXPECT_EQ(spec->gpu_type(), "t4");
  EXPECT_EQ(spec->restart_policy(), v1::RESTART_POLICY_ON_FAILURE);
  EXPECT_EQ(spec->backoff_limit(), 3);
  EXPECT_EQ(spec->max_runtime_seconds(), 3600);
  EXPECT_EQ(spec->labels().size(), 2u);
  EXPECT_EQ(spec->labels().at("team"), "vision");
  EXPECT_EQ(spec->labels().at("run"), "7");
  ASSERT_TRUE(spec->has_trainer());
  EXPECT_EQ(spec->trainer().model(), "mlp-large");
  EXPECT_EQ(spec->trainer().batch_size(), 128);
  // steps is an int64 field: values past 2^31 are kept.
  EXPECT_EQ(spec->trainer().steps(), 20000000000);
  // 0 (only when stopped) is a value, not "unset".
  ASSERT_TRUE(spec->trainer().has_checkpoint_every());
  EXPECT_EQ(spec->trainer().checkpoint_every(), 0);
}

TEST(SpecYamlTest, ParsesACommandSpec) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(R"(
name: sweep
replicas: 2
command:
  argv: [python3, train.py, --lr, "0.1"]
  env: {OMP_NUM_THREADS: 4, MODE: fast}
  check_in_mpi_init: true
)",
                                                      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->has_command());
  EXPECT_THAT(spec->command().argv(), ::testing::ElementsAre("python3", "train.py", "--lr", "0.1"));
  EXPECT_EQ(spec->command().env().at("OMP_NUM_THREADS"), "4");
  EXPECT_EQ(spec->command().env().at("MODE"), "fast");
  EXPECT_TRUE(spec->command().check_in_mpi_init());
}

TEST(SpecYamlTest, ParsesAnElasticRange) {
  absl::StatusOr<v1::JobSpec> spec =
      ParseJobSpecYaml("name: e\nreplicas: 4\nmin_replicas: 2\nmax_replicas: 8\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->min_replicas(), 2);
  EXPECT_EQ(spec->max_replicas(), 8);
}

TEST(SpecYamlTest, ParsesSizesDivide) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(
      "name: e\nreplicas: 4\nmin_replicas: 2\nmax_replicas: 8\nsizes_divide: 256\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->sizes_divide(), 256);
  spec = ParseJobSpecYaml("sizes_divide: many\n", "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("sizes_divide"));
}

TEST(SpecYamlTest, AcceptsEveryRestartPolicySpelling) {
  for (const char* text : {"Never", "NEVER", "never"}) {
    auto spec = ParseJobSpecYaml(std::string("restart_policy: ") + text, "job.yaml");
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(spec->restart_policy(), v1::RESTART_POLICY_NEVER) << text;
  }
  for (const char* text : {"OnFailure", "ON_FAILURE", "onfailure"}) {
    auto spec = ParseJobSpecYaml(std::string("restart_policy: ") + text, "job.yaml");
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(spec->restart_policy(), v1::RESTART_POLICY_ON_FAILURE) << text;
  }
}

TEST(SpecYamlTest, BackoffLimitKeepsPresence) {
  // Unset means the scheduler's default; an explicit 0 means "never restart".
  auto unset = ParseJobSpecYaml("name: a\n", "job.yaml");
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_FALSE(unset->has_backoff_limit());
  auto zero = ParseJobSpecYaml("backoff_limit: 0\n", "job.yaml");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_TRUE(zero->has_backoff_limit());
  EXPECT_EQ(zero->backoff_limit(), 0);
}

TEST(SpecYamlTest, LeavesRangeChecksToTheScheduler) {
  // 5000 replicas is past the scheduler's limit, but only the scheduler says so.
  auto spec = ParseJobSpecYaml("name: BAD_NAME\nreplicas: 5000\npriority: 99999\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->replicas(), 5000);
}

TEST(SpecYamlTest, NonIntegerNamesItsPath) {
  EXPECT_EQ(ErrorOf("trainer:\n  steps: ten\n"),
            "job.yaml: trainer.steps: expected an integer, got \"ten\"");
  EXPECT_EQ(ErrorOf("replicas: 1.5\n"), "job.yaml: replicas: expected an integer, got \"1.5\"");
  EXPECT_EQ(ErrorOf("priority: [1]\n"), "job.yaml: priority: expected an integer, got a list");
  EXPECT_EQ(ErrorOf("trainer: {batch_size: {a: 1}}\n"),
            "job.yaml: trainer.batch_size: expected an integer, got a mapping");
}

TEST(SpecYamlTest, NegativeCountsNameTheirKey) {
  EXPECT_EQ(ErrorOf("replicas: -1\n"), "job.yaml: replicas: must not be negative, got -1");
  EXPECT_EQ(ErrorOf("gpus_per_replica: -2\n"),
            "job.yaml: gpus_per_replica: must not be negative, got -2");
  EXPECT_EQ(ErrorOf("backoff_limit: -3\n"),
            "job.yaml: backoff_limit: must not be negative, got -3");
  EXPECT_EQ(ErrorOf("max_runtime_seconds: -4\n"),
            "job.yaml: max_runtime_seconds: must not be negative, got -4");
  EXPECT_EQ(ErrorOf("trainer: {batch_size: -5}\n"),
            "job.yaml: trainer.batch_size: must not be negative, got -5");
  EXPECT_EQ(ErrorOf("trainer: {steps: -6}\n"),
            "job.yaml: trainer.steps: must not be negative, got -6");
  EXPECT_EQ(ErrorOf("trainer: {checkpoint_every: -7}\n"),
            "job.yaml: trainer.checkpoint_every: must not be negative, got -7");
}

TEST(SpecYamlTest, Int32OverflowNamesItsKey) {
  EXPECT_EQ(ErrorOf("replicas: 3000000000\n"),
            "job.yaml: replicas: out of range for a 32-bit integer: 3000000000");
}

TEST(SpecYamlTest, UnknownKeysNameTheirPath) {
  EXPECT_THAT(ErrorOf("name: a\nreplica: 2\n"),
              HasSubstr("job.yaml: replica: unknown key (expected one of: name, queue,"));
  EXPECT_EQ(ErrorOf("trainer: {model: mlp, epochs: 3}\n"),
            "job.yaml: trainer.epochs: unknown key (expected one of: model, batch_size, steps, "
            "checkpoint_every)");
  EXPECT_EQ(ErrorOf("command: {argv: [a], cwd: /tmp}\n"),
            "job.yaml: command.cwd: unknown key (expected one of: argv, env, check_in_mpi_init)");
}

TEST(SpecYamlTest, WrongShapesNameTheirPath) {
  EXPECT_EQ(ErrorOf("name: [a, b]\n"), "job.yaml: name: expected a string, got a list");
  EXPECT_EQ(ErrorOf("queue:\n"), "job.yaml: queue: expected a string, got nothing (null)");
  EXPECT_EQ(ErrorOf("labels: [a]\n"), "job.yaml: labels: expected a mapping, got a list");
  EXPECT_EQ(ErrorOf("labels: {team: {x: 1}}\n"),
            "job.yaml: labels.team: expected a string, got a mapping");
  EXPECT_EQ(ErrorOf("trainer: mlp\n"), "job.yaml: trainer: expected a mapping, got \"mlp\"");
  EXPECT_EQ(ErrorOf("command: {argv: python3}\n"),
            "job.yaml: command.argv: expected a list of strings, got \"python3\"");
  EXPECT_EQ(ErrorOf("command: {argv: [a, [b]]}\n"),
            "job.yaml: command.argv[1]: expected a string, got a list");
  EXPECT_EQ(ErrorOf("command: {argv: [a], env: {K: [v]}}\n"),
            "job.yaml: command.env.K: expected a string, got a list");
  EXPECT_EQ(ErrorOf("command: {argv: [a], check_in_mpi_init: yes}\n"),
            "job.yaml: command.check_in_mpi_init: expected true or false, got \"yes\"");
}

TEST(SpecYamlTest, BadRestartPolicyIsNamed) {
  EXPECT_EQ(ErrorOf("restart_policy: Always\n"),
            "job.yaml: restart_policy: expected Never or OnFailure, got \"Always\"");
}

TEST(SpecYamlTest, TwoWorkloadsAreRejected) {
  EXPECT_EQ(ErrorOf("trainer: {}\ncommand: {argv: [a]}\n"),
            "job.yaml: give one workload, trainer or command, not both");
}

TEST(SpecYamlTest, DuplicateKeyIsRejected) {
  EXPECT_EQ(ErrorOf("name: a\nname: b\n"), "job.yaml: name: duplicate key");
}

// Found by tests/fuzz/job_spec_yaml_fuzz: yaml-cpp passes bytes that are not UTF-8 through,
// and a protobuf string holding them does not survive the trip to the scheduler.
TEST(SpecYamlTest, TextThatIsNotUtf8IsRejected) {
  EXPECT_EQ(ErrorOf("name: res\xe0net\n"), "job.yaml: name: expected UTF-8 text");
  EXPECT_EQ(ErrorOf("command: {argv: [\"a\xc0\xaf\"]}\n"),
            "job.yaml: command.argv[0]: expected UTF-8 text");
  EXPECT_EQ(ErrorOf("labels: {\"\xed\xa0\x80\": x}\n"),
            "job.yaml: labels: keys must be UTF-8 text");
  absl::StatusOr<v1::JobSpec> spec =
      ParseJobSpecYaml("name: caf\xc3\xa9-\xf0\x9f\x9a\x80\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "caf\xc3\xa9-\xf0\x9f\x9a\x80");
}

TEST(SpecYamlTest, DocumentMustBeOneMapping) {
  EXPECT_EQ(ErrorOf("- name: a\n"), "job.yaml: expected a mapping, got a list");
  EXPECT_EQ(ErrorOf(""), "job.yaml: expected one YAML document with the job's fields, found 0");
  EXPECT_EQ(ErrorOf("name: a\n---\nname: b\n"),
            "job.yaml: expected one YAML document with the job's fields, found 2");
  EXPECT_EQ(ErrorOf("? [a]\n: b\n"), "job.yaml: keys must be strings, got a list");
}

// Found by tests/fuzz/job_spec_yaml_fuzz: YAML::LoadAll of yaml-cpp 0.7 never returns on a
// stray ',' and grows until memory runs out.
TEST(SpecYamlTest, StrayCommaIsRefusedInsteadOfLoopingForever) {
  EXPECT_EQ(ErrorOf(","),
            "job.yaml: expected one YAML document with the job's fields, found more than 2");
  EXPECT_EQ(ErrorOf(",name: a\nr\n"),
            "job.yaml: expected one YAML document with the job's fields, found more than 2");
}

TEST(SpecYamlTest, SyntaxErrorsCarryLineAndColumn) {
  EXPECT_THAT(ErrorOf("name: a\nlabels: {team: x\n"), ::testing::StartsWith("job.yaml:"));
  EXPECT_THAT(ErrorOf("name: a\n  bad: [\n"),
              ::testing::MatchesRegex("job\\.yaml:[0-9]+:[0-9]+: .+"));
}

TEST(SpecYamlTest, MissingFileIsAnInputError) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile("/nonexistent/job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            "cannot read /nonexistent/job.yaml: No such file or directory");
}

TEST(SpecYamlTest, FileErrorsNameTheFile) {
  const std::string path = ::testing::TempDir() + "/bad-job.yaml";
  std::ofstream(path) << "trainer:\n  steps: ten\n";
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile(path);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(), path + ": trainer.steps: expected an integer, got \"ten\"");
}

TEST(SpecYamlTest, DocumentedExamplesParse) {
  absl::StatusOr<v1::JobSpec> job =
      LoadJobSpecFile(RINGMASTER_SOURCE_DIR "/docs/examples/job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->has_trainer());
  EXPECT_EQ(job->restart_policy(), v1::RESTART_POLICY_ON_FAILURE);
  absl::StatusOr<v1::JobSpec> mpi =
      LoadJobSpecFile(RINGMASTER_SOURCE_DIR "/docs/examples/mpi-command.yaml");
  ASSERT_TRUE(mpi.ok()) << mpi.status();
  ASSERT_TRUE(mpi->has_command());
  EXPECT_EQ(mpi->command().argv(0), "ringmaster-train");
}

}  // namespace
}  // namespace ringmaster::cli

namespace ringmaster::cli {
namespace {

TEST(SpecYamlTest, HealthCheckIsABooleanThatStaysUnsetWhenAbsent) {
  absl::StatusOr<v1::JobSpec> off = ParseJobSpecYaml(
      "name: x\nreplicas: 2\nhealth_check: false\ncommand:\n  argv: [true]\n", "job.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_TRUE(off->has_health_check());
  EXPECT_FALSE(off->health_check());
  absl::StatusOr<v1::JobSpec> absent = ParseJobSpecYaml("name: x\n", "job.yaml");
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(absent->has_health_check());
  absl::StatusOr<v1::JobSpec> bad = ParseJobSpecYaml("name: x\nhealth_check: maybe\n", "job.yaml");
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("health_check: expected true or false"));
}

TEST(SpecYamlTest, ReadsAfterAndUseMpirun) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(
      "name: x\nuse_mpirun: true\nafter: [j-0123456789ab, \"j-0123456789ac:ended\"]\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->use_mpirun());
  ASSERT_EQ(spec->after_size(), 2);
  EXPECT_EQ(spec->after(0).condition(), v1::DEPENDENCY_CONDITION_SUCCEEDED);
  EXPECT_EQ(spec->after(1).job_id(), "j-0123456789ac");
  EXPECT_EQ(spec->after(1).condition(), v1::DEPENDENCY_CONDITION_ENDED);
  absl::StatusOr<v1::JobSpec> bad = ParseJobSpecYaml("name: x\nafter: [\"j-1:ok\"]\n", "job.yaml");
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("after[0]: expected JOB[:succeeded|ended|failed]"));
  bad = ParseJobSpecYaml("name: x\nafter: j-1\n", "job.yaml");
  EXPECT_THAT(bad.status().message(), HasSubstr("after: expected a list"));
  bad = ParseJobSpecYaml("name: x\nuse_mpirun: 1\n", "job.yaml");
  EXPECT_THAT(bad.status().message(), HasSubstr("use_mpirun: expected true or false"));
}

TEST(SpecYamlTest, ReadsAnArrayAsAMappingOrInSlurmsForm) {
  struct Case {
    const char* yaml;
    int32_t count;
    int32_t parallelism;
  };
  for (const Case& c : {Case{"array: {count: 1000, parallelism: 50}", 1000, 50},
                        Case{"array: {count: 7}", 7, 0}, Case{"array: \"0-999%50\"", 1000, 50},
                        Case{"array: 0-9", 10, 0}, Case{"array: 10", 10, 0}}) {
    SCOPED_TRACE(c.yaml);
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(
        absl::StrCat("name: sweep\n", c.yaml, "\ncommand: {argv: [./task, \"{index}\"]}\n"),
        "job.yaml");
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(spec->has_array());
    EXPECT_EQ(spec->array().count(), c.count);
    EXPECT_EQ(spec->array().parallelism(), c.parallelism);
  }
  absl::StatusOr<v1::JobSpec> plain = ParseJobSpecYaml("name: x\n", "job.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_array());
}

TEST(SpecYamlTest, BadArraysNameTheKeyAndWhatIsAllowed) {
  struct Case {
    const char* yaml;
    const char* message;
  };
  for (const Case& c : {
           Case{"array: 5-10",
                "job.yaml: array: a range starts at 0 (tasks are numbered 0..count-1), e.g. 0-10; "
                "got \"5-10\""},
           Case{"array: \"0-9%0\"",
                "job.yaml: array: %P (tasks at once) must be 1..10 for 10 tasks, got \"0-9%0\""},
           Case{"array: 0-100000",
                "job.yaml: array: an array has 1..100000 tasks, got 100001 (\"0-100000\")"},
           Case{"array: ten",
                "job.yaml: array: expected N (tasks 0..N-1) or 0-M (tasks 0..M), optionally "
                "followed by %P (at most P at once), e.g. 0-999%50; got \"ten\""},
           Case{"array: [0, 9]",
                "job.yaml: array: expected {count: N, parallelism: P} or a range such as "
                "\"0-999%50\", got a list"},
           Case{"array: {count: 10, limit: 2}",
                "job.yaml: array.limit: unknown key (expected one of: count, parallelism)"},
           Case{"array: {count: ten}", "job.yaml: array.count: expected an integer, got \"ten\""},
           Case{"array: {count: 10, parallelism: -1}",
                "job.yaml: array.parallelism: must not be negative, got -1"},
       }) {
    SCOPED_TRACE(c.yaml);
    absl::StatusOr<v1::JobSpec> spec =
        ParseJobSpecYaml(absl::StrCat("name: x\n", c.yaml, "\n"), "job.yaml");
    ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(spec.status().message(), c.message);
  }
}

TEST(SpecYamlTest, ReadsTheEnvironmentKeys) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(R"(
name: torch
replicas: 2
image: nvcr.io/nvidia/pytorch:24.05-py3
mounts:
  - {volume: imagenet, path: /data, read_only: true}
  - volume: scratch
    path: /scratch
shm_size: 8Gi
workdir: /workspace
command: {argv: [torchrun, train.py]}
)",
                                                      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->image(), "nvcr.io/nvidia/pytorch:24.05-py3");
  ASSERT_EQ(spec->mounts_size(), 2);
  EXPECT_EQ(spec->mounts(0).volume(), "imagenet");
  EXPECT_EQ(spec->mounts(0).path(), "/data");
  EXPECT_TRUE(spec->mounts(0).read_only());
  EXPECT_EQ(spec->mounts(1).volume(), "scratch");
  EXPECT_FALSE(spec->mounts(1).read_only());
  EXPECT_EQ(spec->shm_size_bytes(), 8LL << 30);
  EXPECT_EQ(spec->workdir(), "/workspace");

  absl::StatusOr<v1::JobSpec> bytes =
      ParseJobSpecYaml("name: x\nimage: a\nshm_size: 1048576\ncommand: {argv: [a]}\n", "j");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->shm_size_bytes(), 1048576);
}

TEST(SpecYamlTest, AGpuShareAndItsMemoryAreRead) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(
      "name: eval\ngpus_per_replica: 1\ngpu_share: 0.25\ngpu_memory: 4Gi\n"
      "command: {argv: [a]}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->gpu_share(), 250);
  EXPECT_EQ(spec->gpu_memory(), 4LL << 30);
  EXPECT_THAT(ErrorOf("gpu_share: 2\n"),
              HasSubstr("job.yaml: gpu_share: expected a fraction of one GPU in (0, 1]"));
  EXPECT_THAT(ErrorOf("gpu_share: [1]\n"), HasSubstr("job.yaml: gpu_share: expected"));
  EXPECT_THAT(ErrorOf("gpu_memory: much\n"), HasSubstr("job.yaml: gpu_memory: expected a size"));
}

TEST(SpecYamlTest, BadEnvironmentKeysNameTheirPath) {
  EXPECT_THAT(ErrorOf("image: a\nshm_size: eight\n"), HasSubstr("job.yaml: shm_size: expected a size"));
  EXPECT_THAT(ErrorOf("image: a\nshm_size: -1Gi\n"), HasSubstr("shm_size"));
  EXPECT_THAT(ErrorOf("image: a\nmounts: {volume: x}\n"), HasSubstr("mounts: expected a list"));
  EXPECT_THAT(ErrorOf("image: a\nmounts: [{volume: x, size: 3}]\n"),
              HasSubstr("mounts[0].size: unknown key"));
  EXPECT_THAT(ErrorOf("image: a\nmounts: [{volume: x, path: /d, read_only: yes}]\n"),
              HasSubstr("mounts[0].read_only: expected true or false"));
  EXPECT_THAT(ErrorOf("image: [a]\n"), HasSubstr("image: expected a string"));
}

}  // namespace
}  // namespace ringmaster::cli
