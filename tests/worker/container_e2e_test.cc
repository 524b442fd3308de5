// End to end: jobs that name an image run every rank in a Podman container of it. A real
// scheduler, Postgres, Redis, two workers (127.0.0.2, .3) with Podman, a local registry
// (Debian's docker-registry on loopback) holding the test image (docker/make-job-image.sh:
// Debian 12's python3, mpi4py and Open MPI), and real mpirun rings across the workers:
//   - a 4-rank mpi4py ring in the image across both workers (the hybrid model: mpirun and orted
//     on the hosts, the ranks in containers), pinned to the digest the tag resolved to;
//   - a torch.distributed-style program (plain sockets on MASTER_ADDR:MASTER_PORT, no MPI);
//   - an image that does not exist ends FAILED naming it, and both workers stay healthy;
//   - a volume granted to a team: read and written by its job (and refused writes where the
//     mount is read-only); another team's job is refused the volume at submit; a volume whose
//     host path leads (by a symlink) into a worker's own log directory fails the launch;
//   - a preempted containerized job gets SIGTERM in its container, saves in its grace into the
//     checkpoint directory (mounted from the host), and its next attempt resumes from it, in
//     the same digest;
//   - kill -9 of a worker in the middle of a containerized job leaves no container of it once
//     the worker restarts.
// Needs podman and docker-registry (scripts/setup installs both) and root; without them it is
// skipped, unless RINGMASTER_REQUIRE_CONTAINERS=1 (scripts/test sets it), where it fails.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/bearer_token.h"
#include "common/net.h"
#include "common/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/admin.grpc.pb.h"
#include "ringmaster/v1/registry.grpc.pb.h"
#include "ringmaster/v1/volume.grpc.pb.h"
#include "support/cluster/cluster_test.h"
#include "support/http_get.h"
#include "support/test_certs.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr const char* kLocalImage = "localhost/ringmaster/job:bookworm";

// Runs a shell command; its exit code and output.
std::pair<int, std::string> Sh(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

bool Have(const std::string& program) {
  return Sh(absl::StrCat("command -v ", program)).first == 0;
}

// Containers (running or not) labelled with worker `id`.
std::vector<std::string> ContainersOf(const std::string& id) {
  auto [code, out] =
      Sh(absl::StrCat("podman ps --all --format '{{.Names}}' --filter label=ringmaster.worker=", id));
  std::vector<std::string> names;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipWhitespace())) {
    names.emplace_back(absl::StripAsciiWhitespace(line));
  }
  return names;
}

class ContainerE2eTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    const bool required = std::getenv("RINGMASTER_REQUIRE_CONTAINERS") != nullptr &&
                          std::string(std::getenv("RINGMASTER_REQUIRE_CONTAINERS")) == "1";
    std::string missing;
    if (geteuid() != 0) missing = "root";
    for (const char* program : {"podman", "docker-registry", "debootstrap"}) {
      if (!Have(program)) missing = program;
    }
    if (!missing.empty()) {
      skip_ = absl::StrCat("containers need ", missing, " (scripts/setup installs it)");
      if (required) FAIL() << skip_ << " and RINGMASTER_REQUIRE_CONTAINERS=1";
      return;
    }
    auto [made, made_out] =
        Sh(absl::StrCat(RINGMASTER_SOURCE_DIR "/docker/make-job-image.sh ", kLocalImage));
    ASSERT_EQ(made, 0) << made_out;

    // The registry: loopback only, plain HTTP (the workers pull with --tls-verify=false).
    dir_ = new std::string(
        std::filesystem::path(absl::StrCat(::testing::TempDir(), "/container-e2e-", getpid()))
            .lexically_normal()
            .string());
    std::filesystem::create_directories(*dir_ + "/registry");
    auto port = PickFreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    registry_ = new std::string(absl::StrCat("127.0.0.1:", *port));
    {
      std::ofstream config(*dir_ + "/registry.yml");
      config << "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: "
             << *dir_ << "/registry\nhttp:\n  addr: " << *registry_ << "\n";
    }
    auto registry = Subprocess::Start({"docker-registry", "serve", *dir_ + "/registry.yml"});
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_process_ = registry->release();
    const int registry_port = *port;
    ASSERT_TRUE(WaitFor([&] { return !HttpGet(registry_port, "/v2/").empty(); }, 15s))
        << registry_process_->LogTail();
    image_ = new std::string(absl::StrCat(*registry_, "/team/mpi:1"));
    auto [pushed, push_out] =
        Sh(absl::StrCat("podman push --quiet --tls-verify=false ", kLocalImage, " ", *image_));
    ASSERT_EQ(pushed, 0) << push_out;

    ASSERT_NO_FATAL_FAILURE(
        StartCluster({}, {.prefix = "ct",
                          .cpu_slots = 2,
                          .simulated_gpus = 2,
                          .extra_args = {"--image-pull-args", "--tls-verify=false"}}));
  }

  static void TearDownTestSuite() {
    ClusterTest::TearDownTestSuite();
    delete registry_process_;
    registry_process_ = nullptr;
    if (dir_ != nullptr) {
      std::error_code ignored;
      std::filesystem::remove_all(*dir_, ignored);
    }
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ClusterTest::SetUp();
  }

  static v1::JobSpec ImageJob(const std::string& name, int replicas,
                              std::vector<std::string> argv) {
    v1::JobSpec spec;
    spec.set_name(name);
    spec.set_replicas(replicas);
    spec.set_image(*image_);
    for (const std::string& a : argv) spec.mutable_command()->add_argv(a);
    return spec;
  }

  // Every rank's log of the job's latest attempt, from whichever worker ran it (an ended job's
  // placement is cleared, so every worker is asked).
  static std::string AllLogs(const v1::Job& job) {
    std::string logs;
    for (int rank = 0; rank < job.spec().replicas(); ++rank) {
      for (auto& w : cluster_->workers()) {
        auto log = cluster_->RankLog(w->agent_addr(), job.id(), rank, job.attempt());
        if (log.ok()) logs += *log;
      }
    }
    return logs;
  }

  // The workers the job's latest placement named, from its events.
  static std::set<std::string> PlacedOn(const std::string& id) {
    std::set<std::string> workers;
    for (const v1::JobEvent& e : cluster_->Events(id)) {
      const size_t at = e.reason().find("placed on ");
      if (at == std::string::npos) continue;
      workers.clear();
      for (absl::string_view w : absl::StrSplit(e.reason().substr(at + 10), absl::ByAnyChar(", "),
                                                absl::SkipEmpty())) {
        if (absl::StartsWith(w, "ct")) workers.insert(std::string(w));
      }
    }
    return workers;
  }

  static inline Subprocess* registry_process_ = nullptr;
  static inline std::string* dir_ = nullptr;
  static inline std::string* registry_ = nullptr;
  static inline std::string* image_ = nullptr;
  static inline std::string skip_;
};

TEST_F(ContainerE2eTest, AnMpi4pyRingRunsInTheImageAcrossTwoWorkers) {
  // Each rank prints its rank, the ring's size, the image's Python and whether it is in a
  // container (Podman's /run/.containerenv): the host has no mpi4py of this version to fake it.
  auto id = cluster_->Submit(ImageJob(
      "ring", 4,
      {"python3", "-c",
       "import os\nfrom mpi4py import MPI\nc = MPI.COMM_WORLD\n"
       "s = c.allreduce(c.Get_rank(), op=MPI.SUM)\n"
       "print('rank', c.Get_rank(), 'of', c.Get_size(), 'sum', s, 'container',"
       " os.path.exists('/run/.containerenv'), flush=True)\n"}));
  ASSERT_TRUE(id.ok()) << id.status();
  v1::Job job = cluster_->WaitState(*id, v1::JOB_STATE_SUCCEEDED, 180s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.message() << cluster_->Logs();
  EXPECT_EQ(PlacedOn(*id).size(), 2u) << "the ring must span both workers";
  const std::string logs = AllLogs(job);
  for (int r = 0; r < 4; ++r) {
    EXPECT_THAT(logs, HasSubstr(absl::StrCat("rank ", r, " of 4 sum 6 container True"))) << logs;
  }
  for (auto& w : cluster_->workers()) EXPECT_THAT(ContainersOf(w->config().id), ::testing::IsEmpty());
}

// A job of one rank with an image starts without mpirun, its container as any rank's: the
// image's MPI initialises as a singleton, and the image is pinned as for a ring.
TEST_F(ContainerE2eTest, AOneRankJobRunsInItsImageWithoutMpirun) {
  auto id =
      cluster_->Submit(ImageJob("solo", 1,
                                {"python3", "-c",
                                 "import os\nfrom mpi4py import MPI\nc = MPI.COMM_WORLD\n"
                                 "print('rank', c.Get_rank(), 'of', c.Get_size(), 'container',"
                                 " os.path.exists('/run/.containerenv'), flush=True)\n"}));
  ASSERT_TRUE(id.ok()) << id.status();
  v1::Job job = cluster_->WaitState(*id, v1::JOB_STATE_SUCCEEDED, 180s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.message() << AllLogs(job);
  EXPECT_THAT(AllLogs(job), HasSubstr("rank 0 of 1 container True"));
  EXPECT_THAT(job.image_digest(), ::testing::StartsWith("sha256:"));
  for (const v1::JobEvent& e : cluster_->Events(*id)) {
    EXPECT_THAT(e.reason(), ::testing::Not(HasSubstr("pre-run check passed")));
  }
  for (auto& w : cluster_->workers())
    EXPECT_THAT(ContainersOf(w->config().id), ::testing::IsEmpty());
}

TEST_F(ContainerE2eTest, ATorchStyleProgramRendezvousesWithoutMpi) {
  // Rank 0 listens on MASTER_ADDR:MASTER_PORT; every other rank connects and sends its RANK;
  // rank 0 checks it heard from WORLD_SIZE - 1 distinct ranks. No MPI is imported.
  const std::string program =
      "import os, socket, sys, time\n"
      "rank, world = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])\n"
      "addr, port = os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT'])\n"
      "assert 'mpi4py' not in sys.modules\n"
      "if rank == 0:\n"
      "    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "    s.bind((addr, port)); s.listen(world)\n"
      "    seen = set()\n"
      "    while len(seen) < world - 1:\n"
      "        c, _ = s.accept(); seen.add(int(c.recv(16))); c.close()\n"
      "    print('rendezvous of', world, 'ranks:', sorted(seen), flush=True)\n"
      "else:\n"
      "    for _ in range(300):\n"
      "        try:\n"
      "            c = socket.create_connection((addr, port)); break\n"
      "        except OSError:\n"
      "            time.sleep(0.1)\n"
      "    c.sendall(str(rank).encode()); c.close()\n"
      "    print('rank', rank, 'joined', addr, port, flush=True)\n";
  auto id = cluster_->Submit(ImageJob("torch-style", 3, {"python3", "-c", program}));
  ASSERT_TRUE(id.ok()) << id.status();
  v1::Job job = cluster_->WaitState(*id, v1::JOB_STATE_SUCCEEDED, 180s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.message() << AllLogs(job);
  EXPECT_THAT(AllLogs(job), HasSubstr("rendezvous of 3 ranks: [1, 2]"));
}

TEST_F(ContainerE2eTest, AnImageThatDoesNotExistFailsNamingItAndNoWorkerIsBlamed) {
  v1::JobSpec spec = ImageJob("no-image", 2, {"true"});
  const std::string missing = absl::StrCat(*registry_, "/team/nothing-here:1");
  spec.set_image(missing);
  auto id = cluster_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  v1::Job job = cluster_->WaitState(*id, v1::JOB_STATE_FAILED, 120s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.message();
  EXPECT_THAT(job.message(), HasSubstr(missing));
  // Both workers still take jobs: the next image job runs.
  auto next = cluster_->Submit(ImageJob("after-missing", 4, {"true"}));
  ASSERT_TRUE(next.ok()) << next.status();
  v1::Job after = cluster_->WaitState(*next, v1::JOB_STATE_SUCCEEDED, 180s);
  EXPECT_EQ(after.state(), v1::JOB_STATE_SUCCEEDED) << after.message() << cluster_->Logs();
}

// A token of role member of `team`, made by the admin.
std::string MemberToken(Cluster& cluster, const std::string& team) {
  v1::CreateTokenRequest req;
  req.set_team(team);
  req.set_role("member");
  v1::CreateTokenResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s =
      v1::AdminService::NewStub(cluster.scheduler().channel())->CreateToken(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp.token();
}

// A JobService stub that calls as a member of `team`.
std::unique_ptr<v1::JobService::Stub> JobsOfTeam(Cluster& cluster, const std::string& team) {
  return v1::JobService::NewStub(CreateChannelWithToken(
      cluster.scheduler().addr(), *MakeChannelCredentials(TestCerts::Get().CaOnly()),
      MemberToken(cluster, team)));
}

grpc::Status SubmitAs(v1::JobService::Stub& jobs, const v1::JobSpec& spec, std::string* id) {
  static int counter = 0;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  req.set_request_id(absl::StrCat("container-e2e-", getpid(), "-", ++counter));
  v1::SubmitJobResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = jobs.SubmitJob(&ctx, req, &resp);
  *id = resp.job().id();
  return s;
}

TEST_F(ContainerE2eTest, AVolumeIsReadAndWrittenByItsTeamAndRefusedToAnother) {
  const std::string host = *dir_ + "/volume-data";
  std::filesystem::create_directories(host);
  std::ofstream(host + "/input.txt") << "hello from the host\n";
  auto volumes = v1::VolumeService::NewStub(cluster_->scheduler().channel());
  {
    v1::CreateVolumeRequest req;
    req.mutable_volume()->set_name("ct-data");
    req.mutable_volume()->set_host_path(host);
    v1::VolumeGrant* grant = req.mutable_volume()->add_grants();
    grant->set_team("team-vol-a");
    v1::Volume resp;
    grpc::ClientContext ctx;
    grpc::Status s = volumes->CreateVolume(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  auto team_a = JobsOfTeam(*cluster_, "team-vol-a");
  auto team_b = JobsOfTeam(*cluster_, "team-vol-b");
  auto with_volume = [&](const std::string& name, bool read_only, const std::string& program) {
    v1::JobSpec spec = ImageJob(name, 2, {"python3", "-c", program});
    v1::Mount* mount = spec.add_mounts();
    mount->set_volume("ct-data");
    mount->set_path("/data");
    mount->set_read_only(read_only);
    return spec;
  };

  std::string id;
  grpc::Status s = SubmitAs(*team_a, with_volume("vol-rw", false,
      "import os\nr = os.environ['RANK']\n"
      "text = open('/data/input.txt').read().strip()\n"
      "open('/data/out-' + r + '.txt', 'w').write(text + ' and back from rank ' + r)\n"), &id);
  ASSERT_TRUE(s.ok()) << s.error_message();
  v1::Job job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED, 120s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.message() << AllLogs(job);
  for (int r = 0; r < 2; ++r) {
    std::ifstream out(absl::StrCat(host, "/out-", r, ".txt"));
    std::string line;
    std::getline(out, line);
    EXPECT_EQ(line, absl::StrCat("hello from the host and back from rank ", r));
  }

  s = SubmitAs(*team_a, with_volume("vol-ro", true,
      "import errno\ntry:\n    open('/data/x', 'w')\nexcept OSError as e:\n"
      "    assert e.errno == errno.EROFS, e\n    print('read-only: refused', flush=True)\n"
      "else:\n    raise SystemExit('a read-only mount took a write')\n"), &id);
  ASSERT_TRUE(s.ok()) << s.error_message();
  job = cluster_->WaitState(id, v1::JOB_STATE_SUCCEEDED, 120s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.message() << AllLogs(job);
  EXPECT_THAT(AllLogs(job), HasSubstr("read-only: refused"));
  EXPECT_FALSE(std::filesystem::exists(host + "/x"));

  s = SubmitAs(*team_b, with_volume("vol-other-team", false, "pass"), &id);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("ct-data"));

  // A volume whose path is a symlink into a worker's own log directory: the worker resolves it
  // and refuses the launch, naming the volume.
  const std::string escape = *dir_ + "/escape";
  std::filesystem::create_directory_symlink(cluster_->workers().front()->log_dir(), escape);
  {
    v1::CreateVolumeRequest req;
    req.mutable_volume()->set_name("ct-escape");
    req.mutable_volume()->set_host_path(escape);
    req.mutable_volume()->add_grants()->set_team("team-vol-a");
    v1::Volume resp;
    grpc::ClientContext ctx;
    grpc::Status created = volumes->CreateVolume(&ctx, req, &resp);
    ASSERT_TRUE(created.ok()) << created.error_message();
  }
  v1::JobSpec escaping = ImageJob("vol-escape", 4, {"true"});
  v1::Mount* mount = escaping.add_mounts();
  mount->set_volume("ct-escape");
  mount->set_path("/logs");
  s = SubmitAs(*team_a, escaping, &id);
  ASSERT_TRUE(s.ok()) << s.error_message();
  job = cluster_->WaitState(id, v1::JOB_STATE_FAILED, 120s);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.message();
  EXPECT_THAT(job.message(), HasSubstr("volume ct-escape"));
  EXPECT_THAT(job.message(), HasSubstr("keeps for itself"));
}

TEST_F(ContainerE2eTest, APreemptedJobSavesOnSigtermInItsContainerAndResumes) {
  // Two teams of one cohort, 2 t4 each; team A fills all four GPUs, its image job borrowing B's.
  absl::Status queues = cluster_->CreateCohortQueues({"ct-a", "ct-b"}, "ct-lab", "t4", 2);
  ASSERT_TRUE(queues.ok()) << queues;
  auto on_t4 = [](v1::JobSpec spec, const std::string& queue) {
    spec.set_queue(queue);
    spec.set_gpus_per_replica(1);
    spec.set_gpu_type("t4");
    return spec;
  };
  v1::JobSpec sleeper;
  sleeper.set_name("a-first");
  sleeper.set_replicas(2);
  for (const char* a : {"/bin/sh", "-c", "sleep 600"}) sleeper.mutable_command()->add_argv(a);
  auto first = cluster_->Submit(on_t4(sleeper, "ct-a"));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(cluster_->WaitState(*first, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);

  // A first attempt steps until SIGTERM, when rank 0 saves its step in the checkpoint
  // directory; an attempt that finds a checkpoint resumes from it and ends after 5 more steps.
  const std::string program =
      "import os, signal, sys, time\n"
      "path = os.path.join(os.environ['RINGMASTER_CHECKPOINT_DIR'], 'step')\n"
      "rank = int(os.environ['RANK'])\n"
      "step, resumed = 0, os.path.exists(path)\n"
      "if resumed:\n"
      "    step = int(open(path).read()); print('resumed at step', step, flush=True)\n"
      "stop = []\n"
      "signal.signal(signal.SIGTERM, lambda *_: stop.append(1))\n"
      "while not stop and (not resumed or step < int(open(path).read()) + 5):\n"
      "    step += 1; print('step', step, flush=True); time.sleep(0.05)\n"
      "if stop:\n"
      "    if rank == 0:\n"
      "        open(path + '.tmp', 'w').write(str(step)); os.rename(path + '.tmp', path)\n"
      "    print('saved step', step, 'on SIGTERM', flush=True); sys.exit(143)\n";
  auto id = cluster_->Submit(on_t4(ImageJob("a-image", 2, {"python3", "-c", program}), "ct-a"));
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(cluster_->WaitState(*id, v1::JOB_STATE_RUNNING, 120s).state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto j = cluster_->GetJob(*id);
        return j.ok() && absl::StrContains(AllLogs(*j), "step 10\n");
      },
      60s));

  v1::JobSpec claim = sleeper;
  claim.set_name("b-own-share");
  claim.mutable_command()->set_argv(2, "sleep 1");
  auto b = cluster_->Submit(on_t4(claim, "ct-b"));
  ASSERT_TRUE(b.ok()) << b.status();

  v1::Job job = cluster_->WaitState(*id, v1::JOB_STATE_SUCCEEDED, 180s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.ShortDebugString() << cluster_->Logs();
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.image_digest().rfind("sha256:", 0), 0u) << job.ShortDebugString();
  std::string before, after;
  for (auto& w : cluster_->workers()) {
    if (auto log = cluster_->RankLog(w->agent_addr(), *id, 0, 0); log.ok()) before = *log;
    if (auto log = cluster_->RankLog(w->agent_addr(), *id, 0, 1); log.ok()) after = *log;
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(before, m, std::regex("saved step ([0-9]+) on SIGTERM"))) << before;
  const int saved_step = std::stoi(m[1].str());
  EXPECT_THAT(after, HasSubstr(absl::StrCat("resumed at step ", saved_step, "\n"))) << after;
  EXPECT_EQ(cluster_->WaitState(*b, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(cluster_->Cancel(*first).ok());
}

TEST_F(ContainerE2eTest, AWorkerKilledMidJobLeavesNoContainerAfterItRestarts) {
  auto id = cluster_->Submit(ImageJob("long", 4, {"sleep", "600"}));
  ASSERT_TRUE(id.ok()) << id.status();
  v1::Job job = cluster_->WaitState(*id, v1::JOB_STATE_RUNNING, 180s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.message() << cluster_->Logs();
  WorkerProcess* victim = cluster_->workers().front().get();
  const std::string victim_id = victim->config().id;
  ASSERT_TRUE(WaitFor([&] { return ContainersOf(victim_id).size() == 2; }, 30s))
      << absl::StrJoin(ContainersOf(victim_id), ",") << " "
      << Sh("podman ps --all --format '{{.Names}} {{.Labels}}'").second;
  ASSERT_TRUE(victim->process().Kill(SIGKILL).ok());
  ASSERT_TRUE(victim->process().Wait(10s).ok());
  ASSERT_TRUE(cluster_->RestartWorker(victim_id).ok()) << cluster_->Logs();
  EXPECT_TRUE(WaitFor([&] { return ContainersOf(victim_id).empty(); }, 60s))
      << absl::StrJoin(ContainersOf(victim_id), ",") << cluster_->Logs();
  // The job failed with its lost worker (restart_policy NEVER) or is still running elsewhere.
  (void)cluster_->Cancel(*id);
  for (auto& w : cluster_->workers()) {
    const std::string wid = w->config().id;
    EXPECT_TRUE(WaitFor([&] { return ContainersOf(wid).empty(); }, 60s))
        << wid << ": " << absl::StrJoin(ContainersOf(wid), ",");
  }
}

// A registry that wants a password (docker-registry's htpasswd auth, a bcrypt line made with
// python3's crypt): a team that set its credentials with `RegistryService` runs its job from
// it; a team without fails naming the image and the refused authentication, and no message,
// log or answer carries the secret.
TEST_F(ContainerE2eTest, APrivateRegistrysImageRunsForTheTeamWithCredentialsOnly) {
  constexpr char kSecret[] = "s3cret-registry-pass";
  auto [hashed, htpasswd] =
      Sh(absl::StrCat("python3 -W ignore -c \"import crypt; print('robot:' + crypt.crypt('",
                      kSecret, "', crypt.mksalt(crypt.METHOD_BLOWFISH)))\""));
  ASSERT_EQ(hashed, 0) << htpasswd;
  ASSERT_THAT(htpasswd, ::testing::StartsWith("robot:$2"));
  std::ofstream(*dir_ + "/htpasswd") << htpasswd;
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string registry = absl::StrCat("127.0.0.1:", *port);
  {
    std::ofstream config(*dir_ + "/private.yml");
    config << "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: "
           << *dir_ << "/private\nhttp:\n  addr: " << registry
           << "\nauth:\n  htpasswd:\n    realm: ringmaster-test\n    path: " << *dir_
           << "/htpasswd\n";
  }
  auto started = Subprocess::Start({"docker-registry", "serve", *dir_ + "/private.yml"});
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<Subprocess> private_registry = *std::move(started);
  ASSERT_TRUE(WaitFor(
      [&] { return Sh("curl -s -o /dev/null http://" + registry + "/v2/").first == 0; }, 15s))
      << private_registry->LogTail();
  const std::string image = absl::StrCat(registry, "/vision/private:1");
  auto [pushed, push_out] =
      Sh(absl::StrCat("podman push --quiet --tls-verify=false --creds robot:", kSecret, " ",
                      kLocalImage, " ", image));
  ASSERT_EQ(pushed, 0) << push_out;
  // No worker may have it already from the push.
  Sh(absl::StrCat("podman rmi --force ", image));

  const std::string token = MemberToken(*cluster_, "team-reg-a");
  auto channel = CreateChannelWithToken(cluster_->scheduler().addr(),
                                        *MakeChannelCredentials(TestCerts::Get().CaOnly()), token);
  auto registries = v1::RegistryService::NewStub(channel);
  {
    v1::SetRegistryCredentialRequest req;
    req.set_registry(registry);
    req.set_username("robot");
    req.set_secret(kSecret);
    v1::RegistryCredential resp;
    grpc::ClientContext ctx;
    grpc::Status s = registries->SetRegistryCredential(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.team(), "team-reg-a");
    EXPECT_THAT(resp.DebugString(), ::testing::Not(HasSubstr(kSecret)));
  }
  {
    v1::ListRegistryCredentialsRequest req;
    v1::ListRegistryCredentialsResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = registries->ListRegistryCredentials(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.credentials_size(), 1);
    EXPECT_EQ(resp.credentials(0).registry(), registry);
    EXPECT_THAT(resp.DebugString(), ::testing::Not(HasSubstr(kSecret)));
  }

  v1::JobSpec spec =
      ImageJob("private", 2, {"python3", "-c", "print('ran from the private registry')"});
  spec.set_image(image);
  auto team_a = v1::JobService::NewStub(channel);
  auto team_b = JobsOfTeam(*cluster_, "team-reg-b");
  std::string with_id, without_id;
  ASSERT_TRUE(SubmitAs(*team_a, spec, &with_id).ok());
  v1::Job with = cluster_->WaitState(with_id, v1::JOB_STATE_SUCCEEDED, 180s);
  ASSERT_EQ(with.state(), v1::JOB_STATE_SUCCEEDED) << with.message() << cluster_->Logs();
  EXPECT_THAT(AllLogs(with), HasSubstr("ran from the private registry"));

  Sh(absl::StrCat("podman rmi --force ", image));
  spec.set_name("private-no-creds");
  ASSERT_TRUE(SubmitAs(*team_b, spec, &without_id).ok());
  v1::Job without = cluster_->WaitState(without_id, v1::JOB_STATE_FAILED, 120s);
  ASSERT_EQ(without.state(), v1::JOB_STATE_FAILED) << without.message();
  EXPECT_THAT(without.message(), HasSubstr(image));
  EXPECT_THAT(without.message(), HasSubstr("authentication failed"));
  std::cout << "without credentials: " << without.message() << "\n";

  // A team whose credentials the registry refuses: the message says so and names the user.
  const std::string token_c = MemberToken(*cluster_, "team-reg-c");
  auto channel_c = CreateChannelWithToken(
      cluster_->scheduler().addr(), *MakeChannelCredentials(TestCerts::Get().CaOnly()), token_c);
  {
    v1::SetRegistryCredentialRequest req;
    req.set_registry(registry);
    req.set_username("robot");
    req.set_secret("not-the-password");
    v1::RegistryCredential resp;
    grpc::ClientContext ctx;
    grpc::Status s =
        v1::RegistryService::NewStub(channel_c)->SetRegistryCredential(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  std::string wrong_id;
  spec.set_name("private-wrong-creds");
  ASSERT_TRUE(SubmitAs(*v1::JobService::NewStub(channel_c), spec, &wrong_id).ok());
  v1::Job wrong = cluster_->WaitState(wrong_id, v1::JOB_STATE_FAILED, 120s);
  ASSERT_EQ(wrong.state(), v1::JOB_STATE_FAILED) << wrong.message();
  EXPECT_THAT(wrong.message(), HasSubstr(image));
  EXPECT_THAT(wrong.message(),
              HasSubstr("authentication failed at registry " + registry + " as user robot"));
  EXPECT_THAT(wrong.message(), ::testing::Not(HasSubstr("not-the-password")));
  std::cout << "wrong credentials: " << wrong.message() << "\n";
  // Every auth file is gone once its pull ended.
  for (auto& w : cluster_->workers()) {
    const std::filesystem::path auth_dir = w->log_dir() + "/registry-auth";
    if (!std::filesystem::exists(auth_dir)) continue;
    EXPECT_TRUE(std::filesystem::is_empty(auth_dir)) << auth_dir;
    EXPECT_EQ(std::filesystem::status(auth_dir).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_all);
  }
  EXPECT_THAT(cluster_->Logs(), ::testing::Not(HasSubstr(kSecret)));
}

}  // namespace
}  // namespace ringmaster::test
