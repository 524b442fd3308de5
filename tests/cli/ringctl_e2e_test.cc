// ringctl against a real cluster (PostgreSQL, Redis, the scheduler and two real workers on
// 127.0.0.2 and .3): submit --wait and --follow end with the job's status, and list pages
// through jobs picked by a label selector; a killed `logs -f` gives its relay back.
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/cluster/cluster_test.h"
#include "support/test_certs.h"
#include "support/subprocess.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using namespace std::chrono_literals;

struct Result {
  int code = -1;
  std::string output;  // stdout and stderr together
};

class RingctlE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(StartCluster({}, {.prefix = "cli", .cpu_slots = 2}));
  }

  void TearDown() override {
    if (cluster_ == nullptr) return;
    ClusterTest::TearDown();
    CancelLiveJobs();
  }

  // Runs ringctl with `args` against the cluster's scheduler.
  static Result Ringctl(std::vector<std::string> args,
                        std::map<std::string, std::string> env = {}) {
    std::vector<std::string> argv = {RINGMASTER_BINARY_DIR "/cli/ringctl", "--scheduler",
                                     cluster_->scheduler().addr()};
    // Only the CA: ringctl needs no certificate of its own, logs included (the scheduler
    // relays them).
    argv.push_back("--tls-ca=" + TestCerts::Get().ca());
    argv.insert(argv.end(), args.begin(), args.end());
    Result result;
    auto process = Subprocess::Start(argv, std::move(env));
    if (!process.ok()) {
      result.output = process.status().ToString();
      return result;
    }
    auto code = (*process)->Wait(120s);
    result.output = (*process)->Log();
    if (code.ok()) result.code = *code;
    return result;
  }
};

TEST_F(RingctlE2eTest, SubmitWaitExitsZeroWhenTheJobSucceeds) {
  Result r = Ringctl(
      {"submit", "--name", "ok", "--replicas", "2", "--wait", "--", "/bin/sh", "-c", "sleep 0.5"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, MatchesRegex("j-[0-9a-f]+\n")) << "only the job id";
  std::string id(absl::StripSuffix(r.output, "\n"));
  auto job = cluster_->GetJob(id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << "ringctl returned before the job ended";
}

TEST_F(RingctlE2eTest, SubmitWaitExitsFiveWithTheJobsMessageWhenARankFails) {
  Result r = Ringctl(
      {"submit", "--name", "bad", "--replicas", "1", "--wait", "--", "/bin/sh", "-c", "exit 3"});
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output,
              MatchesRegex("j-[0-9a-f]+\nringctl: job j-[0-9a-f]+ ended FAILED: .*3.*\n"));
}

TEST_F(RingctlE2eTest, SubmitFollowStreamsRankZerosOutputThenExitsWithTheJobsStatus) {
  Result r = Ringctl({"submit", "--name", "follow", "--replicas", "2", "--follow", "--", "/bin/sh",
                      "-c", "for i in 1 2 3; do echo \"tick $i rank $RANK\"; sleep 0.3; done"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("following rank 0's output\n"));
  EXPECT_THAT(r.output, HasSubstr("tick 1 rank 0\ntick 2 rank 0\ntick 3 rank 0\n"));
  EXPECT_THAT(r.output, Not(HasSubstr("rank 1")));

  r = Ringctl({"submit", "--name", "follow-fail", "--replicas", "1", "--follow", "--", "/bin/sh",
               "-c", "echo about to fail; exit 7"});
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, HasSubstr("about to fail\n"));
  EXPECT_THAT(r.output, HasSubstr("ended FAILED"));
}

// --after: the job waits, saying for what, and `ringctl get` shows what it waits for and how it
// starts; a job after a failure of one that succeeds ends CANCELLED (exit 5), and a job no one
// can see cannot be named.
TEST_F(RingctlE2eTest, SubmitAfterWaitsForTheJobItNamesAndGetShowsIt) {
  Result first = Ringctl({"submit", "--name", "first", "--", "/bin/sh", "-c", "sleep 1"});
  ASSERT_EQ(first.code, 0) << first.output;
  const std::string id(absl::StripSuffix(first.output, "\n"));
  Result next = Ringctl({"submit", "--name", "next", "--after", id, "--", "true"});
  ASSERT_EQ(next.code, 0) << next.output;
  const std::string next_id(absl::StripSuffix(next.output, "\n"));
  Result shown = Ringctl({"get", next_id});
  EXPECT_THAT(shown.output, HasSubstr(absl::StrCat("After:           ", id, ":succeeded\n")));
  EXPECT_THAT(shown.output, HasSubstr("Launch:          directly (one rank, no mpirun)\n"));
  Result on_failure = Ringctl(
      {"submit", "--name", "on-failure", "--after", id + ":failed", "--wait", "--", "true"});
  EXPECT_EQ(on_failure.code, 5) << on_failure.output;
  EXPECT_THAT(on_failure.output, HasSubstr("ended CANCELLED"));
  EXPECT_THAT(on_failure.output, HasSubstr("dependency never satisfied"));
  EXPECT_EQ(cluster_->WaitState(next_id, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  Result unknown = Ringctl({"submit", "--after", "j-0123456789ab", "--", "true"});
  EXPECT_NE(unknown.code, 0);
  EXPECT_THAT(unknown.output, HasSubstr("after: no job j-0123456789ab"));
}

// --array: tasks told their index, `get` counts them, `list` shows the array as one line and
// `list --array` its tasks, `logs --index` reads a task's output, `cancel` ends the array.
TEST_F(RingctlE2eTest, AnArrayIsSubmittedListedReadAndCancelledAsOne) {
  Result submitted = Ringctl({"submit", "--name", "sweep", "--array", "0-3%2", "--wait", "--",
                              "/bin/sh", "-c", "echo task $RINGMASTER_ARRAY_INDEX argv {index}"});
  ASSERT_EQ(submitted.code, 0) << submitted.output;
  const std::string id(absl::StripSuffix(submitted.output, "\n"));
  Result shown = Ringctl({"get", id});
  EXPECT_THAT(shown.output, HasSubstr("Tasks:           4 (parallelism 2)\n"));
  EXPECT_THAT(shown.output, HasSubstr("succeeded 4"));
  Result listed = Ringctl({"list"});
  EXPECT_THAT(listed.output, HasSubstr(id));
  EXPECT_THAT(listed.output, Not(HasSubstr(id + "-0")));
  Result tasks = Ringctl({"list", "--array", id});
  for (int i = 0; i < 4; ++i) EXPECT_THAT(tasks.output, HasSubstr(absl::StrCat(id, "-", i)));
  Result log = Ringctl({"logs", id, "--index", "2"});
  EXPECT_EQ(log.code, 0) << log.output;
  EXPECT_THAT(log.output, HasSubstr("task 2 argv 2"));
  Result bad = Ringctl({"submit", "--array", "5-10", "--", "true"});
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("--array: a range starts at 0"));

  Result big = Ringctl({"submit", "--name", "big", "--array", "100000", "--", "sleep", "60"});
  ASSERT_EQ(big.code, 0) << big.output;
  const std::string big_id(absl::StripSuffix(big.output, "\n"));
  Result cancelled = Ringctl({"cancel", big_id});
  EXPECT_EQ(cancelled.code, 0) << cancelled.output;
  EXPECT_THAT(cancelled.output, HasSubstr("CANCELLED"));
  EXPECT_EQ(cluster_->WaitState(big_id, v1::JOB_STATE_CANCELLED).state(), v1::JOB_STATE_CANCELLED);
}

TEST_F(RingctlE2eTest, SubmitWaitOfACancelledJobExitsFive) {
  std::vector<std::string> argv = {RINGMASTER_BINARY_DIR "/cli/ringctl",
                                   "--scheduler",
                                   cluster_->scheduler().addr()};
  for (const std::string& flag : TestCerts::Get().Client().Flags()) argv.push_back(flag);
  for (const char* word :
       {"submit", "--name", "cancel-me", "--replicas", "1", "--wait", "--", "sleep", "300"}) {
    argv.push_back(word);
  }
  auto process = Subprocess::Start(argv);
  ASSERT_TRUE(process.ok()) << process.status();
  std::string id;
  for (int i = 0; i < 100 && id.empty(); ++i) {
    std::this_thread::sleep_for(100ms);
    std::string log = (*process)->Log();
    if (log.find('\n') != std::string::npos) id = log.substr(0, log.find('\n'));
  }
  ASSERT_FALSE(id.empty()) << (*process)->Log();
  cluster_->WaitState(id, v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(cluster_->Cancel(id).ok());
  auto code = (*process)->Wait(30s);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 5) << (*process)->Log();
  EXPECT_THAT((*process)->Log(), HasSubstr(absl::StrCat("ringctl: job ", id, " ended CANCELLED")));
}

TEST_F(RingctlE2eTest, ListPagesThroughTheJobsALabelSelectorPicks) {
  const std::string batch = absl::StrCat("b", getpid());
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    Result r = Ringctl({"submit", "--name", absl::StrCat("page-", i), "--replicas", "1", "--label",
                        absl::StrCat("batch=", batch), "--label", i % 2 ? "odd=1" : "even=1", "--",
                        "true"});
    ASSERT_EQ(r.code, 0) << r.output;
    ids.emplace_back(absl::StripSuffix(r.output, "\n"));
  }
  // Three pages of two; the table lists all five, newest first.
  Result all = Ringctl({"list", "-l", absl::StrCat("batch=", batch), "--page-size", "2"});
  ASSERT_EQ(all.code, 0) << all.output;
  std::vector<std::string> lines = absl::StrSplit(all.output, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u) << all.output;
  for (int i = 0; i < 5; ++i) EXPECT_THAT(lines[i + 1], HasSubstr(ids[4 - i])) << all.output;

  Result odd = Ringctl({"list", "-l", absl::StrCat("batch=", batch, ",odd,!even"), "--page-size",
                        "1", "-o", "json"});
  ASSERT_EQ(odd.code, 0) << odd.output;
  EXPECT_THAT(odd.output, HasSubstr(ids[3]));
  EXPECT_THAT(odd.output, HasSubstr(ids[1]));
  EXPECT_THAT(odd.output, Not(HasSubstr(ids[0])));

  Result limited = Ringctl({"list", "--selector", absl::StrCat("batch=", batch), "--limit", "2"});
  ASSERT_EQ(limited.code, 0) << limited.output;
  EXPECT_THAT(limited.output, HasSubstr(ids[4]));
  EXPECT_THAT(limited.output, HasSubstr(ids[3]));
  EXPECT_THAT(limited.output, Not(HasSubstr(ids[2])));

  Result bad = Ringctl({"list", "-l", "a=b=c"});
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("label_selector: \"a=b=c\""));
}

}  // namespace
}  // namespace ringmaster::test

namespace ringmaster::test {
namespace {

// Starts ringctl against the scheduler of a cluster of the test's own, with the client
// certificate.
absl::StatusOr<std::unique_ptr<Subprocess>> StartRingctl(Cluster& cluster,
                                                         std::vector<std::string> args) {
  std::vector<std::string> argv = {RINGMASTER_BINARY_DIR "/cli/ringctl", "--scheduler",
                                   cluster.scheduler().addr()};
  for (const std::string& flag : TestCerts::Get().Client().Flags()) argv.push_back(flag);
  argv.insert(argv.end(), args.begin(), args.end());
  return Subprocess::Start(argv);
}

// Runs it to its end (30 s at most): its exit code and output.
Result RunRingctl(Cluster& cluster, std::vector<std::string> args) {
  Result result;
  auto process = StartRingctl(cluster, std::move(args));
  if (!process.ok()) return result;
  if (auto code = (*process)->Wait(30s); code.ok()) result.code = *code;
  result.output = (*process)->Log();
  return result;
}

TEST_F(RingctlE2eTest, StudyScalingRunsOneTrainerJobPerSizeAndKeepsTheStudy) {
  char pattern[] = "/tmp/ringctl-studies-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  const std::map<std::string, std::string> env = {{"RINGMASTER_STUDY_DIR", dir}};
  Result r = Ringctl({"study", "scaling", "--gpus", "1,2", "--cpu", "--model", "mlp-small",
                      "--steps", "30"},
                     env);
  ASSERT_EQ(r.code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("Study: +(s-[0-9a-f]{8})"))) << r.output;
  const std::string id = m[1];
  // One row per size: the smallest is the base (1.00x, 100%), the other has a figure.
  EXPECT_TRUE(std::regex_search(r.output,
                                std::regex("\n1 +[0-9]+\\.[0-9]{2} +1\\.00x +100\\.0% +j-")))
      << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("\n2 +[0-9]+\\.[0-9]{2} +[0-9]+\\.[0-9]{2}x +[0-9.]+% +j-")))
      << r.output;
  // The chart and the stored study.
  std::ifstream svg(dir + "/" + id + ".svg");
  std::stringstream chart;
  chart << svg.rdbuf();
  EXPECT_THAT(chart.str(), HasSubstr("<polyline"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/" + id + ".json"));
  // The jobs carry the study's label.
  Result jobs = Ringctl({"list", "-l", "study=" + id});
  EXPECT_EQ(jobs.code, 0) << jobs.output;
  EXPECT_EQ(std::count(jobs.output.begin(), jobs.output.end(), '\n'), 3) << jobs.output;
  // Read back: list, get, compare.
  Result list = Ringctl({"study", "list"}, env);
  EXPECT_EQ(list.code, 0) << list.output;
  EXPECT_THAT(list.output, HasSubstr(id));
  Result get = Ringctl({"study", "get", id}, env);
  EXPECT_EQ(get.code, 0) << get.output;
  EXPECT_THAT(get.output, HasSubstr("GPUS   IMAGES/SEC"));
  Result compare = Ringctl({"study", "compare", id, id}, env);
  EXPECT_EQ(compare.code, 0) << compare.output;
  EXPECT_THAT(compare.output, HasSubstr("1.00\n"));
  Result missing = Ringctl({"study", "get", "s-00000000"}, env);
  EXPECT_EQ(missing.code, 4) << missing.output;
  std::filesystem::remove_all(dir);
}

// A followed log holds one of the scheduler's relays for as long as it is read; a client that
// goes away (killed: no goodbye on the wire) must give it back. With --max-log-relays 1, a
// second read is refused while the first follows, and succeeds once the follower was killed.
TEST(RingctlLogRelayE2eTest, AKilledFollowerGivesItsRelayBack) {
  absl::StatusOr<std::unique_ptr<Cluster>> started =
      Cluster::Start("", {"--max-log-relays", "1"});
  ASSERT_TRUE(started.ok()) << started.status();
  Cluster& cluster = **started;
  WorkerConfig config;
  config.id = absl::StrCat("relay-", getpid());
  config.address = "127.0.0.2";
  config.cpu_slots = 1;
  ASSERT_TRUE(cluster.AddWorker(config).ok());
  absl::Status ready = cluster.WaitWorkersReady(1);
  ASSERT_TRUE(ready.ok()) << ready << "\n" << cluster.Logs();
  v1::JobSpec spec;
  spec.set_name("ticking");
  spec.set_replicas(1);
  for (const char* word : {"/bin/sh", "-c",
                           "i=0; while [ $i -lt 600 ]; do echo tick $i; sleep 0.1; i=$((i+1)); done"}) {
    spec.mutable_command()->add_argv(word);
  }
  absl::StatusOr<std::string> id = cluster.Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(cluster.WaitState(*id, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);

  auto read_once = [&] { return RunRingctl(cluster, {"logs", *id, "--rank", "0"}); };

  auto follower = StartRingctl(cluster, {"logs", *id, "--rank", "0", "-f"});
  ASSERT_TRUE(follower.ok()) << follower.status();
  ASSERT_TRUE(WaitFor([&] { return (*follower)->Log().find("tick") != std::string::npos; }, 20s,
                      50ms))
      << (*follower)->Log();
  Result refused = read_once();
  EXPECT_NE(refused.code, 0) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("--max-log-relays")) << "the bound must hold first";

  ASSERT_TRUE((*follower)->Kill(SIGKILL).ok());
  (void)(*follower)->Wait(10s);
  Result after;
  ASSERT_TRUE(WaitFor(
      [&] {
        after = read_once();
        return after.code == 0;
      },
      10s, 200ms))
      << "the killed follower's relay was not given back: " << after.output;
  EXPECT_THAT(after.output, HasSubstr("tick 0"));
  ASSERT_TRUE(cluster.Cancel(*id).ok());
}

// The scheduler's bounds as a user meets them through ringctl: a submit past --max-live-jobs
// and a watch past --max-watchers are refused naming the flag, and there is room again once
// the job has ended.
TEST(RingctlBoundsE2eTest, ASubmitAndAWatchPastTheirBoundsAreRefusedUntilTheJobEnds) {
  absl::StatusOr<std::unique_ptr<Cluster>> started =
      Cluster::Start("", {"--max-live-jobs", "1", "--max-watchers", "1"});
  ASSERT_TRUE(started.ok()) << started.status();
  Cluster& cluster = **started;
  // No worker: the job stays PENDING.
  v1::JobSpec spec;
  spec.set_name("waiting");
  spec.set_replicas(1);
  spec.mutable_command()->add_argv("/bin/true");
  absl::StatusOr<std::string> id = cluster.Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();

  Result second = RunRingctl(cluster, {"submit", "--name", "second", "--replicas", "1", "--", "/bin/true"});
  EXPECT_NE(second.code, 0) << second.output;
  EXPECT_THAT(second.output, HasSubstr("RESOURCE_EXHAUSTED")) << second.output;
  EXPECT_THAT(second.output, HasSubstr("--max-live-jobs 1")) << second.output;

  auto watcher = StartRingctl(cluster, {"watch", *id});
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  ASSERT_TRUE(WaitFor([&] { return (*watcher)->Log().find("PENDING") != std::string::npos; },
                      20s, 50ms))
      << (*watcher)->Log();
  Result refused = RunRingctl(cluster, {"watch", *id});
  EXPECT_NE(refused.code, 0) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("--max-watchers")) << refused.output;

  ASSERT_TRUE(cluster.Cancel(*id).ok());
  absl::StatusOr<int> watched = (*watcher)->Wait(20s);
  ASSERT_TRUE(watched.ok()) << watched.status();
  EXPECT_EQ(*watched, 5) << (*watcher)->Log();  // the watched job ended CANCELLED
  Result after = RunRingctl(cluster, {"submit", "--name", "after", "--replicas", "1", "--", "/bin/true"});
  EXPECT_EQ(after.code, 0) << after.output;
  for (const v1::Job& job : cluster.LiveJobs()) (void)cluster.Cancel(job.id());
}

}  // namespace
}  // namespace ringmaster::test
