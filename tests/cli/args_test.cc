#include "args.h"

#include "environment_flags.h"
#include "volume_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "job_spec.h"

namespace ringmaster::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An environment with only the given variables.
GetEnvFn Env(std::map<std::string, std::string> vars = {}) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

Command Parse(const std::vector<std::string>& args, const GetEnvFn& env = Env()) {
  absl::StatusOr<Command> cmd = ParseArgs(args, env);
  EXPECT_TRUE(cmd.ok()) << cmd.status();
  return cmd.ok() ? *cmd : Command{};
}

std::string ErrorOf(const std::vector<std::string>& args) {
  absl::StatusOr<Command> cmd = ParseArgs(args, Env());
  EXPECT_FALSE(cmd.ok());
  if (cmd.ok()) return "";
  EXPECT_EQ(cmd.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(cmd.status().message());
}

TEST(ArgsTest, SubmitReadsEveryFlag) {
  Command cmd = Parse({"submit",
                       "-f",
                       "job.yaml",
                       "--name",
                       "resnet",
                       "--queue",
                       "vision",
                       "--priority",
                       "-7",
                       "--replicas",
                       "4",
                       "--gpus-per-replica=2",
                       "--gpu-type",
                       "t4",
                       "--model",
                       "mlp",
                       "--steps",
                       "500",
                       "--batch-size",
                       "32",
                       "--checkpoint-every",
                       "0",
                       "--restart-policy",
                       "ON_FAILURE",
                       "--backoff-limit",
                       "3",
                       "--max-runtime-seconds",
                       "60",
                       "--label",
                       "team=vision",
                       "--label",
                       "empty=",
                       "--request-id",
                       "abc-1"});
  EXPECT_EQ(cmd.verb, Verb::kSubmit);
  EXPECT_EQ(cmd.spec_file, "job.yaml");
  EXPECT_EQ(cmd.request_id, "abc-1");
  const SpecOverrides& o = cmd.overrides;
  EXPECT_EQ(o.name, "resnet");
  EXPECT_EQ(o.queue, "vision");
  EXPECT_EQ(o.priority, -7);
  EXPECT_EQ(o.replicas, 4);
  EXPECT_EQ(o.gpus_per_replica, 2);
  EXPECT_EQ(o.gpu_type, "t4");
  EXPECT_EQ(o.model, "mlp");
  EXPECT_EQ(o.steps, 500);
  EXPECT_EQ(o.batch_size, 32);
  EXPECT_EQ(o.checkpoint_every, 0);
  EXPECT_EQ(o.restart_policy, v1::RESTART_POLICY_ON_FAILURE);
  EXPECT_EQ(o.backoff_limit, 3);
  EXPECT_EQ(o.max_runtime_seconds, 60);
  EXPECT_EQ(o.labels, (std::map<std::string, std::string>{{"team", "vision"}, {"empty", ""}}));
  EXPECT_FALSE(o.command.has_value());
}

TEST(ArgsTest, SubmitReadsTheEnvironmentFlags) {
  Command cmd = Parse({"submit", "--image", "nvcr.io/nvidia/pytorch:24.05-py3", "--mount",
                       "imagenet:/data:ro", "--mount", "scratch:/scratch", "--mount",
                       "logs:/var/log/x:rw", "--shm-size", "8Gi", "--workdir", "/workspace", "--",
                       "torchrun", "train.py"});
  const SpecOverrides& o = cmd.overrides;
  EXPECT_EQ(o.image, "nvcr.io/nvidia/pytorch:24.05-py3");
  ASSERT_EQ(o.mounts.size(), 3u);
  EXPECT_EQ(o.mounts[0].volume(), "imagenet");
  EXPECT_EQ(o.mounts[0].path(), "/data");
  EXPECT_TRUE(o.mounts[0].read_only());
  EXPECT_EQ(o.mounts[1].path(), "/scratch");
  EXPECT_FALSE(o.mounts[1].read_only());
  EXPECT_EQ(o.mounts[2].path(), "/var/log/x");
  EXPECT_FALSE(o.mounts[2].read_only());
  EXPECT_EQ(o.shm_size_bytes, 8LL << 30);
  EXPECT_EQ(o.workdir, "/workspace");

  v1::JobSpec spec;
  spec.add_mounts()->set_volume("from-file");
  ASSERT_TRUE(ApplyOverrides(o, &spec).ok());
  EXPECT_EQ(spec.image(), "nvcr.io/nvidia/pytorch:24.05-py3");
  ASSERT_EQ(spec.mounts_size(), 3);  // the flags' mounts replace the file's
  EXPECT_EQ(spec.mounts(0).volume(), "imagenet");
  EXPECT_EQ(spec.shm_size_bytes(), 8LL << 30);
}

TEST(ArgsTest, SubmitReadsAGpuShareAndItsMemory) {
  Command cmd = Parse({"submit", "--gpu-share", "0.25", "--gpu-memory", "10Gi", "--", "eval"});
  EXPECT_EQ(cmd.overrides.gpu_share, 250);
  EXPECT_EQ(cmd.overrides.gpu_memory, 10LL << 30);
  v1::JobSpec spec;
  ASSERT_TRUE(ApplyOverrides(cmd.overrides, &spec).ok());
  EXPECT_EQ(spec.gpu_share(), 250);
  EXPECT_EQ(spec.gpus_per_replica(), 1);  // a share is of one GPU
  EXPECT_EQ(spec.gpu_memory(), 10LL << 30);
  EXPECT_EQ(*ParseGpuShare(".5", "x"), 500);
  EXPECT_EQ(*ParseGpuShare("1", "x"), 1000);
  EXPECT_EQ(*ParseGpuShare("0.001", "x"), 1);
  for (const char* bad : {"0", "0.0", "1.5", "0.0005", "abc", "", ".", "-0.25", "1/4", "25%"}) {
    EXPECT_THAT(ErrorOf({"submit", "--gpu-share", bad}),
                HasSubstr("--gpu-share: expected a fraction of one GPU in (0, 1]"))
        << bad;
  }
  EXPECT_THAT(ErrorOf({"submit", "--gpu-memory", "lots"}), HasSubstr("--gpu-memory"));
}

TEST(ArgsTest, SubmitReadsAfterAndUseMpirun) {
  Command cmd = Parse({"submit", "--after", "j-0123456789ab", "--after", "j-0123456789ac:failed",
                       "--after", "j-0123456789ad:ended", "--use-mpirun", "--", "true"});
  const SpecOverrides& o = cmd.overrides;
  EXPECT_TRUE(o.use_mpirun);
  ASSERT_EQ(o.after.size(), 3u);
  EXPECT_EQ(o.after[0].job_id(), "j-0123456789ab");
  EXPECT_EQ(o.after[0].condition(), v1::DEPENDENCY_CONDITION_SUCCEEDED);
  EXPECT_EQ(o.after[1].condition(), v1::DEPENDENCY_CONDITION_FAILED);
  EXPECT_EQ(o.after[2].condition(), v1::DEPENDENCY_CONDITION_ENDED);
  EXPECT_EQ(DependencyText(o.after[0]), "j-0123456789ab:succeeded");
  EXPECT_EQ(DependencyText(o.after[1]), "j-0123456789ac:failed");
  v1::JobSpec spec;
  spec.add_after()->set_job_id("j-from-file");
  ASSERT_TRUE(ApplyOverrides(o, &spec).ok());
  ASSERT_EQ(spec.after_size(), 3);  // the flags' list replaces the file's
  EXPECT_TRUE(spec.use_mpirun());
  EXPECT_THAT(ErrorOf({"submit", "--after", "j-1:afterok"}),
              HasSubstr("--after: expected JOB[:succeeded|ended|failed]"));
  EXPECT_THAT(ErrorOf({"submit", "--after", ":ended"}), HasSubstr("--after: expected"));
  EXPECT_THAT(ErrorOf({"submit", "--use-mpirun=yes"}), HasSubstr("--use-mpirun takes no value"));
}

TEST(ArgsTest, SubmitArrayTakesSlurmsSyntaxFromZero) {
  struct Case {
    const char* text;
    int32_t count;
    int32_t parallelism;
  };
  for (const Case& c :
       {Case{"0-999%50", 1000, 50}, Case{"10", 10, 0}, Case{"0-9%2", 10, 2}, Case{"0-0", 1, 0},
        Case{"1", 1, 0}, Case{"100000", 100000, 0}, Case{"0-99999%100000", 100000, 100000},
        Case{"0-9%10", 10, 10}, Case{"007", 7, 0}}) {
    SCOPED_TRACE(c.text);
    Command cmd = Parse({"submit", "--array", c.text, "--", "./task", "{index}"});
    ASSERT_TRUE(cmd.overrides.array.has_value());
    EXPECT_EQ(cmd.overrides.array->count(), c.count);
    EXPECT_EQ(cmd.overrides.array->parallelism(), c.parallelism);
  }
  EXPECT_FALSE(Parse({"submit", "--", "true"}).overrides.array.has_value());
  Command cmd = Parse({"submit", "--array=0-9%2", "--", "./task"});
  v1::JobSpec spec;
  spec.mutable_array()->set_count(500);  // from a file; the flag wins
  ASSERT_TRUE(ApplyOverrides(cmd.overrides, &spec).ok());
  EXPECT_EQ(spec.array().count(), 10);
  EXPECT_EQ(spec.array().parallelism(), 2);
  EXPECT_EQ(ArraySpecText(spec.array()), "0-9%2");
  spec.mutable_array()->set_parallelism(0);
  EXPECT_EQ(ArraySpecText(spec.array()), "0-9");
}

TEST(ArgsTest, BadArraySpecsNameTheFlagAndWhatIsAllowed) {
  const std::string shape =
      "--array: expected N (tasks 0..N-1) or 0-M (tasks 0..M), optionally followed by %P (at "
      "most P at once), e.g. 0-999%50; got ";
  EXPECT_EQ(ErrorOf({"submit", "--array", "5-10"}),
            "--array: a range starts at 0 (tasks are numbered 0..count-1), e.g. 0-10; got "
            "\"5-10\"");
  EXPECT_EQ(ErrorOf({"submit", "--array", "0"}),
            "--array: an array has 1..100000 tasks, got 0 (\"0\")");
  EXPECT_EQ(ErrorOf({"submit", "--array", "0-100000"}),
            "--array: an array has 1..100000 tasks, got 100001 (\"0-100000\")");
  EXPECT_EQ(ErrorOf({"submit", "--array", "100001%5"}),
            "--array: an array has 1..100000 tasks, got 100001 (\"100001%5\")");
  EXPECT_EQ(ErrorOf({"submit", "--array", "99999999999999999999999"}),
            "--array: an array has 1..100000 tasks, got more than 100000 "
            "(\"99999999999999999999999\")");
  EXPECT_EQ(ErrorOf({"submit", "--array", "0-9%0"}),
            "--array: %P (tasks at once) must be 1..10 for 10 tasks, got \"0-9%0\"");
  EXPECT_EQ(ErrorOf({"submit", "--array", "0-9%11"}),
            "--array: %P (tasks at once) must be 1..10 for 10 tasks, got \"0-9%11\"");
  EXPECT_EQ(ErrorOf({"submit", "--array", "1%2"}),
            "--array: %P (tasks at once) must be 1..1 for 1 task, got \"1%2\"");
  for (const char* text : {"ten", "", "0-9%", "-5", "0-", "+5", " 5", "0-9-3", "0:9", "0-9%%2",
                           "0-9%-1", "0x10", "1e3", "0-9%2%3"}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(ErrorOf({"submit", "--array", text}), absl::StrCat(shape, "\"", text, "\""));
  }
  EXPECT_EQ(ErrorOf({"submit", "--array"}), "--array needs a value");
  EXPECT_EQ(ErrorOf({"get", "j-1", "--array", "10"}),
            "get does not take --array (see ringctl get --help)");
}

TEST(ArgsTest, ListArrayAndLogsIndexPickAnArraysTasks) {
  Command list = Parse({"list", "--array", "j-3f9c2a41b7d0", "--state", "failed", "--limit", "5"});
  EXPECT_EQ(list.array_id, "j-3f9c2a41b7d0");
  EXPECT_EQ(list.state, v1::JOB_STATE_FAILED);
  EXPECT_FALSE(list.overrides.array.has_value()) << "list's --array is not submit's";
  EXPECT_EQ(Parse({"list"}).array_id, "");
  EXPECT_EQ(ErrorOf({"list", "--array="}), "--array: expected an array's job ID");

  Command logs = Parse({"logs", "j-3f9c2a41b7d0", "--index", "17", "-f"});
  EXPECT_EQ(logs.job_id, "j-3f9c2a41b7d0");
  EXPECT_EQ(logs.index, 17);
  EXPECT_TRUE(logs.follow);
  EXPECT_FALSE(Parse({"logs", "j-1"}).index.has_value());
  EXPECT_EQ(ErrorOf({"logs", "j-1", "--index", "-1"}), "--index: must not be negative, got -1");
  EXPECT_EQ(ErrorOf({"logs", "j-1", "--index", "x"}), "--index: expected an integer, got 'x'");
  EXPECT_EQ(ErrorOf({"get", "j-1", "--index", "1"}),
            "get does not take --index (see ringctl get --help)");

  EXPECT_THAT(Usage(Verb::kSubmit), HasSubstr("  --array N|0-M[%P]"));
  EXPECT_THAT(Usage(Verb::kList), HasSubstr("  --array ID                    only the tasks of"));
  EXPECT_THAT(Usage(Verb::kLogs), HasSubstr("  --index I"));
}

TEST(ArgsTest, BadEnvironmentFlagsSayWhatIsExpected) {
  EXPECT_THAT(ErrorOf({"submit", "--mount", "imagenet"}), HasSubstr("VOLUME:PATH[:ro|:rw]"));
  EXPECT_THAT(ErrorOf({"submit", "--mount", ":/data"}), HasSubstr("VOLUME:PATH"));
  EXPECT_THAT(ErrorOf({"submit", "--mount", "imagenet:"}), HasSubstr("VOLUME:PATH"));
  EXPECT_THAT(ErrorOf({"submit", "--shm-size", "8GB"}), HasSubstr("--shm-size: expected a size"));
  EXPECT_THAT(ErrorOf({"submit", "--shm-size", "99999999999Ti"}), HasSubstr("--shm-size"));
  EXPECT_EQ(*ParseByteSize("512Mi", "x"), 512LL << 20);
  EXPECT_EQ(*ParseByteSize("1G", "x"), 1'000'000'000);
  EXPECT_EQ(*ParseByteSize("64Ki", "x"), 65536);
  EXPECT_EQ(*ParseByteSize("1048576", "x"), 1048576);
  EXPECT_FALSE(ParseByteSize("", "x").ok());
  EXPECT_FALSE(ParseByteSize("Gi", "x").ok());
  EXPECT_FALSE(ParseByteSize("1.5Gi", "x").ok());
}

TEST(ArgsTest, VolumeActionsTakeANameAndTheirFlags) {
  Command create = Parse({"volume", "create", "imagenet", "--path", "/mnt/imagenet", "--grant",
                          "vision:ro", "--grant", "audio", "--description", "ImageNet"});
  EXPECT_EQ(create.verb, Verb::kVolume);
  EXPECT_EQ(create.volume_action, VolumeAction::kCreate);
  EXPECT_EQ(create.volume_name, "imagenet");
  absl::StatusOr<v1::Volume> volume = VolumeFromFlags(create);
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->host_path(), "/mnt/imagenet");
  ASSERT_EQ(volume->grants_size(), 2);
  EXPECT_EQ(volume->grants(0).team(), "vision");
  EXPECT_TRUE(volume->grants(0).read_only());
  EXPECT_EQ(volume->grants(1).team(), "audio");
  EXPECT_FALSE(volume->grants(1).read_only());
  EXPECT_EQ(volume->description(), "ImageNet");
  EXPECT_EQ(Parse({"volume", "list"}).volume_action, VolumeAction::kList);
  EXPECT_EQ(Parse({"volume", "delete", "x"}).volume_name, "x");
  EXPECT_THAT(ErrorOf({"volume", "create", "x"}), HasSubstr("needs --path"));
  EXPECT_THAT(ErrorOf({"volume", "get"}), HasSubstr("missing volume NAME"));
  EXPECT_THAT(ErrorOf({"volume", "get", "x", "--path", "/p"}), HasSubstr("does not take --path"));
  EXPECT_THAT(ErrorOf({"volume", "rename", "x"}), HasSubstr("unknown volume action 'rename'"));
  Command bad = Parse({"volume", "update", "x", "--path", "/p", "--grant", "a:rw"});
  EXPECT_EQ(VolumeFromFlags(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ArgsTest, EverythingAfterDashDashIsTheCommand) {
  Command cmd = Parse({"submit", "--name", "x", "--", "mpirun", "--np", "2", "-x", "--name"});
  ASSERT_TRUE(cmd.overrides.command.has_value());
  EXPECT_THAT(*cmd.overrides.command, ElementsAre("mpirun", "--np", "2", "-x", "--name"));
  EXPECT_EQ(cmd.overrides.name, "x");
}

TEST(ArgsTest, EmptyCommandAfterDashDashIsAnError) {
  EXPECT_EQ(ErrorOf({"submit", "--"}), "-- must be followed by a command (-- CMD ARGS...)");
  EXPECT_EQ(ErrorOf({"list", "--", "ls"}), "list does not take a command after --");
}

TEST(ArgsTest, GlobalFlagsGoBeforeOrAfterTheCommand) {
  Command before = Parse({"--scheduler", "sched:7000", "-o", "json", "list"});
  EXPECT_EQ(before.verb, Verb::kList);
  EXPECT_EQ(before.scheduler, "sched:7000");
  EXPECT_EQ(before.output, OutputFormat::kJson);
  Command after = Parse({"get", "j-1", "--scheduler=sched:7001", "--output=json"});
  EXPECT_EQ(after.verb, Verb::kGet);
  EXPECT_EQ(after.job_id, "j-1");
  EXPECT_EQ(after.scheduler, "sched:7001");
  EXPECT_EQ(after.output, OutputFormat::kJson);
  EXPECT_EQ(Parse({"-ojson", "workers"}).output, OutputFormat::kJson);
}

TEST(ArgsTest, SchedulerFlagThenEnvThenDefault) {
  EXPECT_EQ(Parse({"list"}).scheduler, "localhost:7070");
  EXPECT_EQ(Parse({"list"}, Env({{"RINGMASTER_SCHEDULER", "env-host:7171"}})).scheduler,
            "env-host:7171");
  EXPECT_EQ(Parse({"list"}, Env({{"RINGMASTER_SCHEDULER", ""}})).scheduler, "localhost:7070");
  EXPECT_EQ(Parse({"list", "--scheduler", "flag-host:7272"},
                  Env({{"RINGMASTER_SCHEDULER", "env-host:7171"}}))
                .scheduler,
            "flag-host:7272");
}

TEST(ArgsTest, TlsFlagsThenEnvironment) {
  Command flags = Parse({"list", "--tls-ca", "/f/ca.crt", "--tls-cert=/f/c.crt", "--tls-key",
                         "/f/c.key", "--insecure"},
                        Env({{"RINGMASTER_TLS_CA", "/env/ca.crt"}}));
  EXPECT_EQ(flags.tls.ca_file, "/f/ca.crt");
  EXPECT_EQ(flags.tls.cert_file, "/f/c.crt");
  EXPECT_EQ(flags.tls.key_file, "/f/c.key");
  EXPECT_TRUE(flags.tls.insecure);
  Command env = Parse({"list"}, Env({{"RINGMASTER_TLS_CA", "/env/ca.crt"},
                                     {"RINGMASTER_TLS_CERT", "/env/c.crt"},
                                     {"RINGMASTER_TLS_KEY", "/env/c.key"},
                                     {"RINGMASTER_INSECURE", "1"}}));
  EXPECT_EQ(env.tls.ca_file, "/env/ca.crt");
  EXPECT_EQ(env.tls.cert_file, "/env/c.crt");
  EXPECT_EQ(env.tls.key_file, "/env/c.key");
  EXPECT_TRUE(env.tls.insecure);
  // TLS is the default.
  EXPECT_FALSE(Parse({"list"}).tls.insecure);
  EXPECT_FALSE(Parse({"list"}, Env({{"RINGMASTER_INSECURE", "0"}})).tls.insecure);
}

TEST(ArgsTest, InsecureTakesNoValue) {
  absl::StatusOr<Command> cmd = ParseArgs({"list", "--insecure=yes"}, Env());
  ASSERT_FALSE(cmd.ok());
  EXPECT_EQ(cmd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cmd.status().message()), ::testing::HasSubstr("--insecure takes no value"));
}

TEST(ArgsTest, MalformedSchedulerAddressIsAUsageError) {
  EXPECT_EQ(ErrorOf({"list", "--scheduler", "localhost"}),
            "--scheduler must be HOST:PORT, got 'localhost'");
  EXPECT_EQ(Parse({"list", "--scheduler", "unix:/tmp/s.sock"}).scheduler, "unix:/tmp/s.sock");
}

TEST(ArgsTest, ListFilters) {
  Command cmd = Parse({"list", "--state", "running", "--queue", "vision", "--limit", "5"});
  EXPECT_EQ(cmd.state, v1::JOB_STATE_RUNNING);
  EXPECT_EQ(cmd.queue, "vision");
  EXPECT_EQ(cmd.limit, 5);
  EXPECT_EQ(Parse({"list", "--state", "JOB_STATE_FAILED"}).state, v1::JOB_STATE_FAILED);
  EXPECT_THAT(ErrorOf({"list", "--state", "done"}),
              HasSubstr("--state: expected pending, starting, running, succeeded, failed or "
                        "cancelled, got 'done'"));
}

TEST(ArgsTest, ListSelectorLimitAndPageSize) {
  Command cmd = Parse({"list", "-l", "team=vision,!spot", "--page-size", "50", "--limit", "7"});
  EXPECT_EQ(cmd.label_selector, "team=vision,!spot");
  EXPECT_EQ(cmd.page_size, 50);
  EXPECT_EQ(cmd.limit, 7);
  EXPECT_EQ(Parse({"list", "--selector=gpu"}).label_selector, "gpu");
  EXPECT_EQ(ErrorOf({"list", "--page-size", "-1"}), "--page-size: must not be negative, got -1");
  EXPECT_EQ(ErrorOf({"get", "j-1", "-l", "a=b"}), "get does not take -l (see ringctl get --help)");
}

TEST(ArgsTest, SubmitWaitAndFollowAreSwitches) {
  Command wait = Parse({"submit", "--wait", "--name", "x"});
  EXPECT_TRUE(wait.wait);
  EXPECT_FALSE(wait.follow);
  Command follow = Parse({"submit", "--follow", "-f", "job.yaml"});
  EXPECT_TRUE(follow.follow);
  EXPECT_EQ(follow.spec_file, "job.yaml") << "-f stays --file for submit";
  EXPECT_TRUE(Parse({"logs", "j-1", "-f"}).follow) << "-f stays --follow for logs";
  EXPECT_TRUE(Parse({"logs", "j-1", "--follow"}).follow);
  EXPECT_EQ(ErrorOf({"watch", "j-1", "--wait"}), "--wait is not a flag of watch");
}

// Every flag that `ringctl COMMAND --help` shows is offered by the bash and zsh completions of
// that command (cli/completion/ringctl.bash and _ringctl list them by hand).
TEST(ArgsTest, ShellCompletionsKnowEveryFlagOfEveryCommand) {
  for (const char* name : {"ringctl.bash", "_ringctl"}) {
    SCOPED_TRACE(name);
    std::ifstream file(absl::StrCat(RINGMASTER_SOURCE_DIR "/cli/completion/", name));
    ASSERT_TRUE(file.good());
    std::stringstream text;
    text << file.rdbuf();
    const std::string script = text.str();
    for (const char* verb :
         {"submit", "get", "list", "cancel", "watch", "workers", "logs", "queue", "volume",
          "study"}) {
      SCOPED_TRACE(verb);
      EXPECT_THAT(script, HasSubstr(absl::StrCat(" ", verb, " ")));  // in the command list
      const std::string start = absl::StrCat("    ", verb, ")");
      size_t at = script.find(start);
      ASSERT_NE(at, std::string::npos);
      std::string entry = script.substr(at, script.find(";;", at) - at) + " ";
      for (char& c : entry) {
        if (c == '\n' || c == '"' || c == '(' || c == ')') c = ' ';
      }
      Command cmd = Parse({verb, "--help"});
      std::istringstream usage(Usage(cmd.verb));
      std::string line;
      bool in_flags = false;
      while (std::getline(usage, line)) {
        if (line == "flags:") in_flags = true;
        if (line == "global flags:") in_flags = false;
        if (!in_flags || !absl::StartsWith(line, "  -")) continue;
        for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
          if (!absl::StartsWith(word, "-")) break;
          std::string flag(absl::StripSuffix(word, ","));
          EXPECT_THAT(entry, HasSubstr(absl::StrCat(" ", flag, " "))) << flag;
        }
      }
    }
  }
}

TEST(ArgsTest, CancelTakesIdAndReason) {
  Command cmd = Parse({"cancel", "j-9", "--reason", "wrong data"});
  EXPECT_EQ(cmd.verb, Verb::kCancel);
  EXPECT_EQ(cmd.job_id, "j-9");
  EXPECT_EQ(cmd.reason, "wrong data");
}

TEST(ArgsTest, ReplicasMinColonMaxMakesAnElasticJobAskingForMax) {
  Command cmd = Parse({"submit", "--replicas", "2:8", "--", "hostname"});
  EXPECT_EQ(cmd.overrides.min_replicas, 2);
  EXPECT_EQ(cmd.overrides.max_replicas, 8);
  EXPECT_EQ(cmd.overrides.replicas, 8);
  EXPECT_EQ(ErrorOf({"submit", "--replicas", "3:2"}),
            "--replicas: MIN:MAX needs 1 <= MIN <= MAX, got '3:2'");
  EXPECT_EQ(ErrorOf({"submit", "--replicas", "2:x"}), "--replicas: expected an integer, got 'x'");
}

TEST(ArgsTest, SizesDivideSetsTheNumberAnElasticJobsSizesDivide) {
  Command cmd = Parse({"submit", "--replicas", "2:8", "--sizes-divide", "256", "--", "hostname"});
  EXPECT_EQ(cmd.overrides.sizes_divide, 256);
  v1::JobSpec spec;
  ASSERT_TRUE(ApplyOverrides(cmd.overrides, &spec).ok());
  EXPECT_EQ(spec.sizes_divide(), 256);
  EXPECT_EQ(spec.min_replicas(), 2);
  EXPECT_EQ(ErrorOf({"submit", "--sizes-divide", "x"}),
            "--sizes-divide: expected an integer, got 'x'");
}

TEST(ArgsTest, BadNumbersNameTheFlag) {
  EXPECT_EQ(ErrorOf({"submit", "--replicas", "four"}),
            "--replicas: expected an integer, got 'four'");
  EXPECT_EQ(ErrorOf({"submit", "--replicas", "-1"}), "--replicas: must not be negative, got -1");
  EXPECT_EQ(ErrorOf({"submit", "--batch-size", "99999999999"}),
            "--batch-size: out of range for a 32-bit integer: 99999999999");
  EXPECT_EQ(ErrorOf({"list", "--limit", "x"}), "--limit: expected an integer, got 'x'");
}

TEST(ArgsTest, BadFlagValuesAreUsageErrors) {
  EXPECT_EQ(ErrorOf({"submit", "--restart-policy", "Always"}),
            "--restart-policy: expected Never or OnFailure, got 'Always'");
  EXPECT_EQ(ErrorOf({"submit", "--label", "novalue"}),
            "--label: expected KEY=VALUE, got 'novalue'");
  EXPECT_EQ(ErrorOf({"submit", "--label", "=v"}), "--label: expected KEY=VALUE, got '=v'");
  EXPECT_EQ(ErrorOf({"list", "-o", "yaml"}), "-o/--output: expected table or json, got 'yaml'");
  EXPECT_EQ(ErrorOf({"submit", "--name"}), "--name needs a value");
  EXPECT_EQ(ErrorOf({"submit", "--request-id=", "--name", "x"}),
            "--request-id: must not be empty");
}

TEST(ArgsTest, FlagsOfOtherCommandsAreRejected) {
  EXPECT_EQ(ErrorOf({"get", "j-1", "--queue", "q"}),
            "get does not take --queue (see ringctl get --help)");
  EXPECT_EQ(ErrorOf({"--name", "x", "submit"}),
            "--name belongs to a command; put it after the command name");
  EXPECT_EQ(ErrorOf({"list", "--bogus"}), "unknown flag --bogus (see ringctl list --help)");
}

TEST(ArgsTest, PositionalMistakes) {
  EXPECT_EQ(ErrorOf({}), "missing command (see ringctl --help)");
  EXPECT_EQ(ErrorOf({"launch"}), "unknown command 'launch' (see ringctl --help)");
  EXPECT_EQ(ErrorOf({"get"}), "missing job ID (usage: ringctl get ID)");
  EXPECT_EQ(ErrorOf({"watch", "j-1", "j-2"}), "unexpected argument 'j-2' for watch");
  EXPECT_THAT(ErrorOf({"submit", "python3"}),
              HasSubstr("unexpected argument 'python3' for submit (a command workload goes after"));
}

TEST(ArgsTest, HelpWinsOverOtherMistakes) {
  Command global = Parse({"--help"});
  EXPECT_TRUE(global.help);
  EXPECT_EQ(global.verb, Verb::kNone);
  Command submit = Parse({"submit", "--bogus", "-h"});
  EXPECT_TRUE(submit.help);
  EXPECT_EQ(submit.verb, Verb::kSubmit);
  Command help_verb = Parse({"help", "watch"});
  EXPECT_TRUE(help_verb.help);
  EXPECT_EQ(help_verb.verb, Verb::kWatch);
  EXPECT_EQ(ErrorOf({"help", "launch"}), "unknown command 'launch' (see ringctl --help)");
}

TEST(ArgsTest, UsageListsCommandsAndFlags) {
  const std::string global = Usage(Verb::kNone);
  for (const char* word : {"submit", "get ID", "list", "cancel ID", "watch ID", "workers",
                           "--scheduler", "RINGMASTER_SCHEDULER", "3 scheduler unreachable"}) {
    EXPECT_THAT(global, HasSubstr(word));
  }
  const std::string submit = Usage(Verb::kSubmit);
  for (const char* flag : {"--file", "--name", "--queue", "--priority", "--replicas",
                           "--gpus-per-replica", "--gpu-type", "--model", "--steps", "--batch-size",
                           "--checkpoint-every", "--restart-policy", "--backoff-limit",
                           "--max-runtime-seconds", "--label", "--request-id", "-- CMD ARGS"}) {
    EXPECT_THAT(submit, HasSubstr(flag));
  }
  EXPECT_THAT(Usage(Verb::kGet), ::testing::Not(HasSubstr("--replicas")));
}

TEST(JobSpecTest, FlagsOverrideTheFile) {
  v1::JobSpec spec;
  spec.set_name("from-file");
  spec.set_replicas(2);
  spec.set_queue("q");
  (*spec.mutable_labels())["team"] = "a";
  (*spec.mutable_labels())["keep"] = "yes";
  spec.mutable_trainer()->set_model("mlp");
  spec.mutable_trainer()->set_steps(10);
  SpecOverrides o;
  o.name = "from-flag";
  o.replicas = 8;
  o.labels = {{"team", "b"}};
  o.steps = 99;
  ASSERT_TRUE(ApplyOverrides(o, &spec).ok());
  EXPECT_EQ(spec.name(), "from-flag");
  EXPECT_EQ(spec.replicas(), 8);
  EXPECT_EQ(spec.queue(), "q");
  EXPECT_EQ(spec.labels().at("team"), "b");
  EXPECT_EQ(spec.labels().at("keep"), "yes");
  EXPECT_EQ(spec.trainer().model(), "mlp");
  EXPECT_EQ(spec.trainer().steps(), 99);
}

TEST(JobSpecTest, TheDefaultNameIsADnsLabelFromTheProgram) {
  v1::JobSpec spec;
  EXPECT_EQ(DefaultJobName(spec), "train");
  spec.mutable_trainer();
  EXPECT_EQ(DefaultJobName(spec), "train");
  auto named = [](const std::string& program) {
    v1::JobSpec command;
    command.mutable_command()->add_argv(program);
    return DefaultJobName(command);
  };
  EXPECT_EQ(named("./Train_Net"), "train-net");
  EXPECT_EQ(named("/usr/bin/python3.11"), "python3-11");
  EXPECT_EQ(named("42-run--it-"), "run-it");
  EXPECT_EQ(named("/opt/"), "job");
  EXPECT_EQ(named("___"), "job");
  EXPECT_EQ(named(std::string(100, 'a')), std::string(63, 'a'));
  EXPECT_EQ(named("\xc3\xa9t\xc3\xa9"), "t");
}

TEST(JobSpecTest, BackoffLimitFlagOverridesEvenWithZero) {
  v1::JobSpec spec;
  spec.set_backoff_limit(5);
  SpecOverrides o;
  o.backoff_limit = 0;
  ASSERT_TRUE(ApplyOverrides(o, &spec).ok());
  EXPECT_TRUE(spec.has_backoff_limit());
  EXPECT_EQ(spec.backoff_limit(), 0);
  v1::JobSpec untouched;
  ASSERT_TRUE(ApplyOverrides(SpecOverrides{}, &untouched).ok());
  EXPECT_FALSE(untouched.has_backoff_limit());
}

TEST(JobSpecTest, DashDashCommandReplacesArgvAndKeepsEnv) {
  v1::JobSpec spec;
  spec.mutable_command()->add_argv("old");
  (*spec.mutable_command()->mutable_env())["K"] = "V";
  SpecOverrides o;
  o.command = std::vector<std::string>{"new", "arg"};
  ASSERT_TRUE(ApplyOverrides(o, &spec).ok());
  EXPECT_THAT(spec.command().argv(), ElementsAre("new", "arg"));
  EXPECT_EQ(spec.command().env().at("K"), "V");

  v1::JobSpec trainer_spec;
  trainer_spec.mutable_trainer()->set_model("mlp");
  ASSERT_TRUE(ApplyOverrides(o, &trainer_spec).ok());
  EXPECT_TRUE(trainer_spec.has_command());
}

TEST(JobSpecTest, TrainerFlagsConflictWithACommand) {
  v1::JobSpec spec;
  spec.mutable_command()->add_argv("x");
  SpecOverrides o;
  o.model = "mlp";
  absl::Status status = ApplyOverrides(o, &spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("the job spec has a command workload"));

  v1::JobSpec empty;
  o.command = std::vector<std::string>{"x"};
  status = ApplyOverrides(o, &empty);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("cannot be combined with a command after --"));
}

TEST(JobSpecTest, NoFlagsLeaveTheWorkloadAlone) {
  v1::JobSpec spec;
  ASSERT_TRUE(ApplyOverrides(SpecOverrides{}, &spec).ok());
  EXPECT_EQ(spec.workload_case(), v1::JobSpec::WORKLOAD_NOT_SET);
}

}  // namespace
}  // namespace ringmaster::cli

namespace ringmaster::cli {
namespace {

TEST(ArgsTest, WorkersClearNamesTheWorker) {
  EXPECT_EQ(Parse({"workers"}).clear_worker, "");
  EXPECT_EQ(Parse({"workers", "clear", "w4"}).clear_worker, "w4");
  EXPECT_EQ(ErrorOf({"workers", "clear"}),
            "missing WORKER (usage: ringctl workers clear WORKER)");
  EXPECT_THAT(ErrorOf({"workers", "clear", "w4", "w5"}), HasSubstr("unexpected argument 'w5'"));
  EXPECT_THAT(ErrorOf({"workers", "w4"}), HasSubstr("unexpected argument 'w4'"));
}

}  // namespace
}  // namespace ringmaster::cli
