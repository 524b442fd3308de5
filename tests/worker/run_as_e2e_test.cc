// End to end: each team's ranks run as that team's Unix user (worker --run-as). A real
// scheduler, Postgres, Redis and two workers started as root with the mapping
// team-ua=61001, team-ub=61002 (bare uids: no passwd entries needed), jobs submitted with
// member tokens of those teams:
//   - a 3-rank job of team-ua spans both workers (so its orted is started through
//     ringmaster-rsh -> the local agent's socket -> the peer agent): every process of the job,
//     mpirun and orted included, runs as 61001, and none holds the worker's key path;
//   - a concurrent job of team-ub runs as 61002 and cannot read team-ua's rank environment,
//     checkpoint directory, rank log, mpirun.log or the worker's key;
//   - a job of a team with no mapping (and no default) fails naming the team and the flag;
//   - the local socket refuses a call with team-ua's token from uid 61002, and a forward to an
//     agent outside the placement; a signalled ringmaster-rsh stops the forwarded command;
//   - the pre-run check runs as the worker's user, not the team's;
//   - the worker refuses at start what it cannot honour (not root, bad items, a readable key);
//   - a mixed cluster (one worker with the mapping, one without) runs a job over both, each
//     rank as its worker says.
// Skipped when the test does not run as root (changing users needs it).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/bearer_token.h"
#include "common/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/admin.grpc.pb.h"
#include "support/cluster/cluster_test.h"
#include "support/proc_file.h"
#include "support/test_certs.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr int kUidA = 61001;
constexpr int kUidB = 61002;

v1::JobSpec ShellSpec(const std::string& name, int replicas, const std::string& script,
                      const std::map<std::string, std::string>& env = {}) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_replicas(replicas);
  spec.set_health_check(false);
  for (const char* a : {"/bin/sh", "-c"}) spec.mutable_command()->add_argv(a);
  spec.mutable_command()->add_argv(script);
  for (const auto& [k, v] : env) (*spec.mutable_command()->mutable_env())[k] = v;
  return spec;
}

// The real uid of a process (/proc/PID/status); -1 when it is gone.
int UidOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    int uid = -1;
    if (std::sscanf(line.c_str(), "Uid:\t%d", &uid) == 1) return uid;
  }
  return -1;
}

std::string Comm(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
  std::string name;
  std::getline(in, name);
  return name;
}

// Runs a shell command; its output (stdout and stderr) and exit status.
std::pair<std::string, int> Shell(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  return {out, pclose(p)};
}

class RunAsE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) return;
    // The pre-run check is on (the scheduler's --health-check) only for the job that asks.
    ASSERT_NO_FATAL_FAILURE(StartCluster({"--health-check", "true"}));
    // The team users traverse the cluster's directory to their logs and the agent's socket.
    chmod(cluster_->dir().c_str(), 0755);
    absl::Status ready = cluster_->AddWorkers(
        {.prefix = "ua",
         .cpu_slots = 2,
         .extra_args = {"--run-as", absl::StrCat("team-ua=", kUidA, ",team-ub=", kUidB, ":", kUidB),
                        "--checkpoint-root", cluster_->dir() + "/checkpoints"}});
    ASSERT_TRUE(ready.ok()) << ready << "\n" << cluster_->Logs();
    for (const char* team : {"team-ua", "team-ub", "team-uc"}) {
      v1::CreateTokenRequest req;
      req.set_team(team);
      req.set_role("member");
      v1::CreateTokenResponse resp;
      grpc::ClientContext ctx;
      grpc::Status s =
          v1::AdminService::NewStub(cluster_->scheduler().channel())->CreateToken(&ctx, req, &resp);
      ASSERT_TRUE(s.ok()) << s.error_message();
      (*jobs_)[team] = v1::JobService::NewStub(
          CreateChannelWithToken(cluster_->scheduler().addr(),
                                 *MakeChannelCredentials(TestCerts::Get().CaOnly()), resp.token()));
    }
  }

  static void TearDownTestSuite() {
    ClusterTest::TearDownTestSuite();
    jobs_->clear();
  }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "running ranks as other users needs root";
    ClusterTest::SetUp();
  }

  void TearDown() override {
    if (cluster_ == nullptr) return;
    ClusterTest::TearDown();
    CancelLiveJobs();
  }

  static absl::StatusOr<std::string> Submit(const std::string& team, const v1::JobSpec& spec) {
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    static int counter = 0;
    req.set_request_id(absl::StrCat("run-as-", getpid(), "-", ++counter));
    v1::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = (*jobs_)[team]->SubmitJob(&ctx, req, &resp);
    if (!s.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    }
    return resp.job().id();
  }

  // Submits a one-rank job of team-ua that waits until `release` exists (at most 60 s), and
  // waits until its processes that talk to the agent's socket run.
  static void SubmitWaiting(const std::string& name, const std::string& release,
                            absl::StatusOr<std::string>* id, std::vector<pid_t>* ranks) {
    *id = Submit("team-ua",
                 ShellSpec(name, 1,
                           absl::StrCat("i=0; while [ ! -e ", release,
                                        " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done")));
    ASSERT_TRUE(id->ok()) << id->status();
    ASSERT_TRUE(WaitFor(
        [&] {
          *ranks = ProcessesWithEnv({{"RINGMASTER_JOB_ID", **id}}, "RINGMASTER_AGENT_SOCKET");
          return !ranks->empty();
        },
        30s, 50ms));
  }

  // A rank's log, from whichever worker ran it.
  static std::string Log(const std::string& job, int rank) {
    for (const auto& w : cluster_->workers()) {
      absl::StatusOr<std::string> log = cluster_->RankLog(w->agent_addr(), job, rank, 0);
      if (log.ok()) return *log;
    }
    return "";
  }

  static std::map<std::string, std::unique_ptr<v1::JobService::Stub>>* jobs_;
};

std::map<std::string, std::unique_ptr<v1::JobService::Stub>>* RunAsE2eTest::jobs_ =
    new std::map<std::string, std::unique_ptr<v1::JobService::Stub>>();

TEST_F(RunAsE2eTest, EachTeamsRanksRunAsItsUserAndCannotReadAnotherTeams) {
  const std::string release = cluster_->dir() + "/release-a";
  // Three ranks on two workers of two slots: the gang spans both.
  const std::string script_a = absl::StrCat(
      "echo \"rank=$RANK uid=$(id -u) gid=$(id -g)\"; echo secret > "
      "\"$RINGMASTER_CHECKPOINT_DIR/secret-$RANK\" && echo wrote; i=0; while [ ! -e ",
      release, " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done");
  absl::StatusOr<std::string> a = Submit("team-ua", ShellSpec("ua-job", 3, script_a));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(cluster_->WaitState(*a, v1::JOB_STATE_RUNNING, 60s).state(), v1::JOB_STATE_RUNNING)
      << cluster_->GetJob(*a)->message();
  // Every rank's workload, then every process of the job.
  // The shells (their `sleep` children come and go).
  std::vector<pid_t> ranks;
  ASSERT_TRUE(WaitFor(
      [&] {
        ranks.clear();
        for (pid_t pid :
             ProcessesWithEnv({{"RINGMASTER_JOB_ID", *a}}, "RINGMASTER_CHECKPOINT_DIR")) {
          if (Comm(pid) == "sh") ranks.push_back(pid);
        }
        return ranks.size() >= 3;
      },
      30s, 50ms));
  const std::vector<pid_t> all = ProcessesWithEnv({{"RINGMASTER_JOB_ID", *a}});
  std::set<std::string> kinds;
  for (pid_t pid : all) {
    const std::string name = Comm(pid);
    const int uid = UidOf(pid);
    if (uid < 0) continue;  // exited meanwhile
    kinds.insert(name);
    EXPECT_EQ(uid, kUidA) << "pid " << pid << " (" << name << ") of team-ua's job";
    EXPECT_EQ(EnvOfProcess(pid, "RINGMASTER_TLS_KEY"), "") << "pid " << pid << " (" << name << ")";
    EXPECT_EQ(EnvOfProcess(pid, "RINGMASTER_TLS_CERT"), "") << "pid " << pid << " (" << name << ")";
  }
  EXPECT_TRUE(kinds.count("mpirun")) << ::testing::PrintToString(kinds);
  EXPECT_TRUE(kinds.count("orted"))
      << "the remote worker's orted: " << ::testing::PrintToString(kinds);

  // Team-ub's job, at the same time, pokes at team-ua's things.
  const std::string ckpt_a = absl::StrCat(cluster_->dir(), "/checkpoints/", *a);
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(ckpt_a + "/secret-0"); }, 20s, 50ms));
  std::string log_a, mpirun_log_a;
  for (const auto& w : cluster_->workers()) {
    const std::string dir = absl::StrCat(w->log_dir(), "/", *a, "/0");
    if (std::filesystem::exists(dir + "/mpirun.log")) mpirun_log_a = dir + "/mpirun.log";
    if (std::filesystem::exists(dir + "/rank-0.log")) log_a = dir + "/rank-0.log";
  }
  ASSERT_FALSE(log_a.empty());
  ASSERT_FALSE(mpirun_log_a.empty());
  const std::string script_b =
      "echo \"uid=$(id -u) gid=$(id -g)\"; "
      "for what in \"environ /proc/$A_PID/environ\" \"checkpoint $A_CKPT/secret-0\" "
      "\"rank-log $A_LOG\" \"mpirun-log $A_MPIRUN_LOG\" \"worker-key $W_KEY\"; do set -- $what; "
      "if cat \"$2\" > /dev/null 2>&1; then echo \"$1=read\"; else echo \"$1=denied\"; fi; done; "
      "if ls \"$A_CKPT\" > /dev/null 2>&1; then echo list=read; else echo list=denied; fi";
  absl::StatusOr<std::string> b = Submit(
      "team-ub",
      ShellSpec("ub-job", 1, script_b,
                {{"A_PID", absl::StrCat(ranks[0])},
                 {"A_CKPT", ckpt_a},
                 {"A_LOG", log_a},
                 {"A_MPIRUN_LOG", mpirun_log_a},
                 {"W_KEY", TestCerts::Get().Worker(cluster_->workers()[0]->config().id).key}}));
  ASSERT_TRUE(b.ok()) << b.status();
  const v1::Job done_b = cluster_->WaitState(*b, v1::JOB_STATE_SUCCEEDED, 60s);
  ASSERT_EQ(done_b.state(), v1::JOB_STATE_SUCCEEDED) << done_b.message();
  const std::string out_b = Log(*b, 0);
  EXPECT_THAT(out_b, HasSubstr(absl::StrCat("uid=", kUidB, " gid=", kUidB)));
  for (const char* what :
       {"environ", "checkpoint", "rank-log", "mpirun-log", "worker-key", "list"}) {
    EXPECT_THAT(out_b, HasSubstr(absl::StrCat("\n", what, "=denied\n"))) << out_b;
  }
  // The control: root (the test) reads them all, so "denied" was the user's doing.
  EXPECT_EQ(Shell(absl::StrCat("cat /proc/", ranks[0], "/environ > /dev/null")).second, 0);

  std::ofstream(release).put('x');
  const v1::Job done_a = cluster_->WaitState(*a, v1::JOB_STATE_SUCCEEDED, 60s);
  ASSERT_EQ(done_a.state(), v1::JOB_STATE_SUCCEEDED) << done_a.message();
  for (int rank = 0; rank < 3; ++rank) {
    const std::string out = Log(*a, rank);
    EXPECT_THAT(out, HasSubstr(absl::StrCat("rank=", rank, " uid=", kUidA, " gid=", kUidA))) << out;
    EXPECT_THAT(out, HasSubstr("wrote")) << out;
  }
  struct stat st;
  ASSERT_EQ(stat(ckpt_a.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(kUidA));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(RunAsE2eTest, TeamWithoutAUserFailsNamingTheTeamAndTheFlag) {
  absl::StatusOr<std::string> c = Submit("team-uc", ShellSpec("uc-job", 1, "id -u"));
  ASSERT_TRUE(c.ok()) << c.status();
  const v1::Job done = cluster_->WaitState(*c, v1::JOB_STATE_FAILED, 30s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_FAILED) << done.message();
  EXPECT_THAT(done.message(), HasSubstr("team 'team-uc' has no Unix user on worker ua"));
  EXPECT_THAT(done.message(), HasSubstr("--run-as team-uc=USER or set --run-as-default"));
  EXPECT_TRUE(ProcessesWithEnv({{"RINGMASTER_JOB_ID", *c}}).empty());
}

TEST_F(RunAsE2eTest, LocalSocketRefusesATokenOfAnotherUsersAttempt) {
  const std::string release = cluster_->dir() + "/release-socket";
  absl::StatusOr<std::string> a;
  std::vector<pid_t> ranks;
  ASSERT_NO_FATAL_FAILURE(SubmitWaiting("ua-wait", release, &a, &ranks));
  const std::string token = EnvOfProcess(ranks[0], "RINGMASTER_TOKEN");
  const std::string socket = EnvOfProcess(ranks[0], "RINGMASTER_AGENT_SOCKET");
  ASSERT_FALSE(token.empty());
  ASSERT_FALSE(socket.empty());
  // ringmaster-rank as a client of the socket, with team-ua's token, as either user. MPI rank
  // 99 does not exist: the user who passes the uid check still starts nothing.
  auto call_as = [&](int uid) {
    return Shell(absl::StrCat("setpriv --reuid=", uid, " --regid=", uid, " --clear-groups env -i ",
                              "RINGMASTER_AGENT_SOCKET=", socket,
                              " RINGMASTER_AGENT_ADDR=unused RINGMASTER_JOB_ID=", *a,
                              " RINGMASTER_ATTEMPT=0 RINGMASTER_TOKEN=", token,
                              " OMPI_COMM_WORLD_RANK=99 " RINGMASTER_BINARY_DIR
                              "/services/worker/ringmaster-rank -- "
                              "/bin/true"));
  };
  auto [denied, denied_rc] = call_as(kUidB);
  EXPECT_NE(denied_rc, 0);
  EXPECT_THAT(denied, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(denied, HasSubstr(absl::StrCat("the caller runs as uid ", kUidB, ", but job ", *a,
                                             " attempt 0 runs as uid ", kUidA)));
  auto [passed, passed_rc] = call_as(kUidA);
  EXPECT_NE(passed_rc, 0);
  EXPECT_THAT(passed, HasSubstr("INVALID_ARGUMENT: mpi_rank 99 is out of range")) << passed;
  EXPECT_THAT(passed, Not(HasSubstr("PERMISSION_DENIED")));
  // A forward to an agent outside the placement is refused too.
  auto [forward, forward_rc] = Shell(absl::StrCat(
      "setpriv --reuid=", kUidA, " --regid=", kUidA, " --clear-groups env -i ",
      "RINGMASTER_AGENT_SOCKET=", socket, " RINGMASTER_AGENT_PORTS=127.0.0.9:7071 ",
      "RINGMASTER_JOB_ID=", *a, " RINGMASTER_ATTEMPT=0 RINGMASTER_TOKEN=", token,
      " " RINGMASTER_BINARY_DIR "/services/worker/ringmaster-rsh 127.0.0.9 /bin/true"));
  EXPECT_EQ(forward_rc >> 8, 255) << forward;
  EXPECT_THAT(forward, HasSubstr("127.0.0.9:7071 is not the agent of a worker of job")) << forward;

  std::ofstream(release).put('x');
  const v1::Job done = cluster_->WaitState(*a, v1::JOB_STATE_SUCCEEDED, 60s);
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
}

// ringmaster-rsh signalled (as mpirun does when it aborts) cancels its call on the local
// socket, which cancels the forwarded call, which stops the command on the peer.
TEST_F(RunAsE2eTest, ForwardedExecStopsWhenRshIsSignalled) {
  const std::string release = cluster_->dir() + "/release-forward";
  absl::StatusOr<std::string> a;
  std::vector<pid_t> ranks;
  ASSERT_NO_FATAL_FAILURE(SubmitWaiting("ua-forward", release, &a, &ranks));
  const std::string agent = EnvOfProcess(ranks[0], "RINGMASTER_AGENT_ADDR");  // HOST:PORT
  const std::string host = agent.substr(0, agent.rfind(':'));
  auto [started, rc] = Shell(absl::StrCat(
      "setpriv --reuid=", kUidA, " --regid=", kUidA, " --clear-groups env -i ",
      "RINGMASTER_AGENT_SOCKET=", EnvOfProcess(ranks[0], "RINGMASTER_AGENT_SOCKET"),
      " RINGMASTER_AGENT_PORTS=", agent, " RINGMASTER_JOB_ID=", *a,
      " RINGMASTER_ATTEMPT=0 RINGMASTER_TOKEN=", EnvOfProcess(ranks[0], "RINGMASTER_TOKEN"),
      " " RINGMASTER_BINARY_DIR "/services/worker/ringmaster-rsh ", host,
      " sleep 37 > /dev/null 2>&1 & echo $!"));
  const pid_t rsh = std::atoi(started.c_str());
  ASSERT_GT(rsh, 0) << started;
  auto sleepers = [&] {
    std::vector<pid_t> found;
    for (pid_t pid : ProcessesWithEnv({{"RINGMASTER_JOB_ID", *a}})) {
      const std::string cmdline = ReadProcFile(absl::StrCat("/proc/", pid, "/cmdline"));
      if (Comm(pid) == "sleep" && absl::StrContains(cmdline, "37")) found.push_back(pid);
    }
    return found;
  };
  ASSERT_TRUE(WaitFor([&] { return !sleepers().empty(); }, 20s, 50ms))
      << "the forwarded command never started";
  for (pid_t pid : sleepers()) EXPECT_EQ(UidOf(pid), kUidA);
  kill(rsh, SIGTERM);
  EXPECT_TRUE(WaitFor([&] { return sleepers().empty(); }, 10s, 50ms))
      << "the peer's command outlived the cancelled call";
  waitpid(rsh, nullptr, WNOHANG);
  // The worker counts an Exec'd command that died of a signal as the attempt's failure, as it
  // would a lost orted.
  std::ofstream(release).put('x');
  const v1::Job done = cluster_->WaitState(*a, v1::JOB_STATE_FAILED, 60s);
  EXPECT_EQ(done.state(), v1::JOB_STATE_FAILED) << done.message();
}

// The pre-run check (ringmaster-check's own mpirun) runs as the worker's user, not the team's:
// the team's other processes cannot tamper with it, nor with its result, which lands in the
// attempt's directory (root's). The job's own ranks still run as the team's user.
TEST_F(RunAsE2eTest, PreRunCheckRunsAsTheWorkersUserNotTheTeams) {
  v1::JobSpec spec = ShellSpec("ua-checked", 3, "id -u");
  spec.set_health_check(true);
  absl::StatusOr<std::string> a = Submit("team-ua", spec);
  ASSERT_TRUE(a.ok()) << a.status();
  const v1::Job done = cluster_->WaitState(*a, v1::JOB_STATE_SUCCEEDED, 90s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
  bool checked = false;
  for (const auto& w : cluster_->workers()) {
    const std::string dir = absl::StrCat(w->log_dir(), "/", *a, "/0");
    EXPECT_FALSE(std::filesystem::exists(dir + "/check")) << "a directory of the team's user";
    struct stat st;
    if (stat((dir + "/check.result").c_str(), &st) != 0) continue;
    checked = true;
    EXPECT_EQ(st.st_uid, geteuid()) << dir << "/check.result";
  }
  EXPECT_TRUE(checked) << "no check result written by the worker's user";
  // 3 ranks on two workers: the check's orted on the peer came through Exec, as the worker's
  // user, with the check's own token.
  EXPECT_THAT(cluster_->Logs(), HasSubstr("the pre-run check's)"));
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_THAT(Log(*a, rank), HasSubstr(absl::StrCat(kUidA))) << "rank " << rank;
  }
}

// The worker's own refusals at start: each names the flag, and nothing is served.
TEST_F(RunAsE2eTest, WorkerRefusesAMappingItCannotHonour) {
  const std::string worker = RINGMASTER_BINARY_DIR "/services/worker/ringmaster-worker";
  const std::string rest = absl::StrCat(" --insecure --address 127.0.0.1 --listen 127.0.0.1:0 ",
                                        "--log-dir ", cluster_->dir(), "/refused");
  struct Case {
    std::string prefix, flags, message;
  };
  // A key file the team's user could read (mode 0644 in a directory it can enter).
  const CertFiles certs = TestCerts::Get().Worker("refused");
  const std::string readable_key = cluster_->dir() + "/readable.key";
  std::filesystem::copy_file(certs.key, readable_key,
                             std::filesystem::copy_options::overwrite_existing);
  chmod(readable_key.c_str(), 0644);
  const std::string tls = absl::StrCat(" --tls-cert ", certs.cert, " --tls-ca ", certs.ca,
                                       " --worker-id refused --address 127.0.0.1 --listen "
                                       "127.0.0.1:0 --log-dir ",
                                       cluster_->dir(), "/refused --tls-key ");
  {
    auto [out, rc] = Shell(absl::StrCat(worker, " --run-as team-ua=", kUidA, tls, readable_key));
    EXPECT_EQ(rc >> 8, 2) << out;
    EXPECT_THAT(out, HasSubstr(absl::StrCat("--tls-key: ", readable_key, " is readable by uid ",
                                            kUidA, ", which runs a team's jobs")));
  }
  for (const Case& c : std::vector<Case>{
           {absl::StrCat("setpriv --reuid=", kUidA, " --regid=", kUidA, " --clear-groups "),
            "--run-as team-ua=61002",
            absl::StrCat("--run-as/--run-as-default need the worker to run as root (it runs as "
                         "uid ",
                         kUidA, ")")},
           {"", "--run-as team-ua", "--run-as: 'team-ua' has no '='"},
           {"", "--run-as team-ua=no-such-user-rm", "--run-as team-ua: no user 'no-such-user-rm'"},
           {"", "--run-as-default root", "--run-as-default: 'root' is root"},
       }) {
    auto [out, rc] = Shell(c.prefix + worker + " " + c.flags + rest);
    EXPECT_EQ(rc >> 8, 2) << c.flags << ": " << out;
    EXPECT_THAT(out, HasSubstr(c.message)) << c.flags;
  }
}

// A mixed cluster: one worker maps team-ua to its user, the other has no --run-as, so its
// ranks run as the worker's own user (root here). A 2-rank job of team-ua on the one slot of
// each forms its ring across both (mpirun on one, orted started through the other's agent),
// and each rank runs as its own worker says.
TEST(MixedRunAsE2eTest, AJobOverAMappingAndAPlainWorkerRunsEachRankAsItsWorkerSays) {
  if (geteuid() != 0) GTEST_SKIP() << "running ranks as other users needs root";
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  Cluster& c = **cluster;
  chmod(c.dir().c_str(), 0755);  // team-ua's ranks reach their logs and the agent's socket
  WorkerConfig mapped;
  mapped.id = absl::StrCat("mx-ua-", getpid());
  mapped.address = "127.0.0.2";
  mapped.cpu_slots = 1;
  mapped.extra_args = {"--run-as", absl::StrCat("team-ua=", kUidA)};
  WorkerConfig plain;
  plain.id = absl::StrCat("mx-plain-", getpid());
  plain.address = "127.0.0.3";
  plain.cpu_slots = 1;
  ASSERT_TRUE(c.AddWorker(mapped).ok());
  ASSERT_TRUE(c.AddWorker(plain).ok());
  absl::Status ready = c.WaitWorkersReady(2);
  ASSERT_TRUE(ready.ok()) << ready << "\n" << c.Logs();

  v1::CreateTokenRequest token_req;
  token_req.set_team("team-ua");
  token_req.set_role("member");
  v1::CreateTokenResponse token;
  {
    grpc::ClientContext ctx;
    grpc::Status s =
        v1::AdminService::NewStub(c.scheduler().channel())->CreateToken(&ctx, token_req, &token);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  auto jobs = v1::JobService::NewStub(CreateChannelWithToken(
      c.scheduler().addr(), *MakeChannelCredentials(TestCerts::Get().CaOnly()), token.token()));
  v1::SubmitJobRequest req;
  *req.mutable_spec() = ShellSpec("mixed", 2, "echo \"rank=$RANK uid=$(id -u)\"");
  req.set_request_id(absl::StrCat("mixed-", getpid()));
  v1::SubmitJobResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = jobs->SubmitJob(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  const std::string id = resp.job().id();
  const v1::Job done = c.WaitState(id, v1::JOB_STATE_SUCCEEDED, 60s);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message() << "\n" << c.Logs();
  // An ended job has no placement left: each worker's log of whichever rank it ran.
  std::map<std::string, std::string> uid_by_worker;  // worker id -> "uid=N" its rank printed
  std::set<int> ranks_seen;
  for (const auto& w : c.workers()) {
    for (int rank = 0; rank < 2; ++rank) {
      absl::StatusOr<std::string> log = c.RankLog(w->agent_addr(), id, rank, 0);
      const size_t at = log.ok() ? log->find("uid=") : std::string::npos;
      if (at == std::string::npos) continue;
      EXPECT_THAT(*log, HasSubstr(absl::StrCat("rank=", rank, " ")));
      uid_by_worker[w->config().id] = log->substr(at, log->find_first_of("\n", at) - at);
      ranks_seen.insert(rank);
    }
  }
  EXPECT_EQ(ranks_seen.size(), 2u) << "both ranks' logs, one on each worker";
  EXPECT_EQ(uid_by_worker[mapped.id], absl::StrCat("uid=", kUidA));
  EXPECT_EQ(uid_by_worker[plain.id], "uid=0");
}

}  // namespace
}  // namespace ringmaster::test
