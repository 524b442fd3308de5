#include "worker/core/launch.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

RankPlacement Rank(int32_t rank, const std::string& worker, std::vector<int32_t> gpus = {}) {
  const std::string n = worker.substr(1);
  return RankPlacement{rank, worker, "127.0.0." + n, 7070 + std::stoi(n), std::move(gpus)};
}

Assignment TwoWorkers() {
  Assignment a;
  a.job_id = "j-1";
  a.attempt = 2;
  a.token = "secret";
  a.placement = {Rank(0, "w2", {0}), Rank(1, "w2", {1}), Rank(2, "w3", {0}), Rank(3, "w3", {1})};
  a.command = CommandWorkload{{"python3", "train.py"}, {{"FOO", "bar"}, {"RANK", "99"}}};
  a.queue = "research";
  return a;
}

TEST(LaunchTest, HostfileListsEachWorkerOnceWithItsSlotsInRankOrder) {
  const auto hosts = GangHosts(TwoWorkers().placement);
  EXPECT_EQ(HostfileText(hosts), "127.0.0.2 slots=2\n127.0.0.3 slots=2\n");
  EXPECT_THAT(PlacedRankOfMpiRank(hosts), ElementsAre(0, 1, 2, 3));
}

TEST(LaunchTest, InterleavedPlacementMapsMpiRanksHostByHost) {
  std::vector<RankPlacement> p = {Rank(0, "w2"), Rank(1, "w3"), Rank(2, "w2"), Rank(3, "w3")};
  const auto hosts = GangHosts(p);
  EXPECT_EQ(HostfileText(hosts), "127.0.0.2 slots=2\n127.0.0.3 slots=2\n");
  // mpirun fills 127.0.0.2's two slots first: MPI ranks 0, 1 are placed ranks 0, 2.
  EXPECT_THAT(PlacedRankOfMpiRank(hosts), ElementsAre(0, 2, 1, 3));
}

TEST(LaunchTest, ValidatePlacementRejectsDuplicateRanksAndSharedAddresses) {
  EXPECT_TRUE(ValidatePlacement(TwoWorkers().placement).ok());
  EXPECT_EQ(ValidatePlacement({Rank(0, "w2"), Rank(0, "w3")}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePlacement({Rank(0, "w2"), Rank(2, "w3")}).code(),
            absl::StatusCode::kInvalidArgument);
  RankPlacement other = Rank(1, "w3");
  other.worker_address = "127.0.0.2";
  absl::Status shared = ValidatePlacement({Rank(0, "w2"), other});
  EXPECT_EQ(shared.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shared.message()), HasSubstr("share address 127.0.0.2"));
  EXPECT_EQ(ValidatePlacement({}).code(), absl::StatusCode::kInvalidArgument);
}

// Found by worker_request_fuzz: "254.0.0,r" broke the agents' port list, and a newline would
// add lines to the hostfile.
TEST(LaunchTest, ValidatePlacementRejectsAddressesThatAreNoHostName) {
  for (const char* bad : {"254.0.0,r", "127.0.0.2\n127.0.0.9 slots=64", "a b", "h\x01"}) {
    RankPlacement r = Rank(0, "w2");
    r.worker_address = bad;
    absl::Status s = ValidatePlacement({r});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("worker_address")) << bad;
  }
  RankPlacement named = Rank(0, "w2");
  named.worker_address = "gpu-node-7.example";
  EXPECT_TRUE(ValidatePlacement({named}).ok());
}

TEST(LaunchTest, AgentPortsNameEveryHostAndFindTheOneAsked) {
  const std::string ports = AgentPortsValue(GangHosts(TwoWorkers().placement));
  EXPECT_EQ(ports, "127.0.0.2:7072,127.0.0.3:7073");
  EXPECT_EQ(*AgentPortOf(ports, "127.0.0.3"), 7073);
  EXPECT_EQ(AgentPortOf(ports, "127.0.0.4").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(AgentPortOf("127.0.0.2", "127.0.0.2").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*AgentPortOf("[::1]:7071,::1:7072", "::1"), 7072);
}

TEST(LaunchTest, TrainerWorkloadPassesOnlyTheFieldsSet) {
  Assignment a = TwoWorkers();
  a.command.reset();
  a.trainer = TrainerWorkload{"mlp-small", 0, 20, std::nullopt};
  EXPECT_THAT(*WorkloadArgv(a, "/bin/ringmaster-train"),
              ElementsAre("/bin/ringmaster-train", "--model", "mlp-small", "--steps", "20"));
  a.trainer->checkpoint_every = 0;
  EXPECT_THAT(*WorkloadArgv(a, "t"),
              ElementsAre("t", "--model", "mlp-small", "--steps", "20", "--checkpoint-every", "0"));
  a.trainer = TrainerWorkload{};
  EXPECT_THAT(*WorkloadArgv(a, "t"), ElementsAre("t"));
  EXPECT_THAT(*WorkloadArgv(TwoWorkers(), "t"), ElementsAre("python3", "train.py"));
  a.trainer.reset();
  EXPECT_EQ(WorkloadArgv(a, "t").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LaunchTest, TheTrainerOfAJobWithAnImageIsTheImagesOwn) {
  Assignment a = TwoWorkers();
  a.command.reset();
  a.trainer = TrainerWorkload{"mlp-small", 0, 20, std::nullopt};
  a.image = JobImage{};
  a.image->reference = "registry.local:5000/team/train:1";
  EXPECT_THAT(*WorkloadArgv(a, "/opt/ringmaster/bin/ringmaster-train"),
              ElementsAre("ringmaster-train", "--model", "mlp-small", "--steps", "20"));
}

TEST(LaunchTest, MpirunOnLoopbackUsesTheRshAgentAndTcpOverLo) {
  MpirunOptions o;
  o.mpirun = "/usr/bin/mpirun";
  o.hostfile_path = "/logs/j-1/2/hostfile";
  o.rsh_agent = "/bin/ringmaster-rsh";
  o.rank_binary = "/bin/ringmaster-rank";
  o.mpi_interface = ResolveMpiInterface("auto", "127.0.0.2");
  o.allow_run_as_root = true;
  const std::vector<std::string> argv = MpirunArgv(o, 4, {"python3", "x.py"});
  const std::string line = JoinCommand(argv);
  EXPECT_EQ(argv.front(), "/usr/bin/mpirun");
  EXPECT_THAT(line, HasSubstr("--allow-run-as-root --hostfile /logs/j-1/2/hostfile -np 4"));
  EXPECT_THAT(line, HasSubstr("--bind-to none"));
  EXPECT_THAT(line, HasSubstr("--mca plm_rsh_agent /bin/ringmaster-rsh"));
  EXPECT_THAT(line, HasSubstr("--mca plm_rsh_no_tree_spawn 1"));
  EXPECT_THAT(line, HasSubstr("--mca orte_leave_session_attached 1"));
  EXPECT_THAT(line, Not(HasSubstr("orte_abort_on_non_zero_status")));
  o.abort_on_rank_failure = false;
  EXPECT_THAT(JoinCommand(MpirunArgv(o, 4, {"python3", "x.py"})),
              HasSubstr("--mca orte_leave_session_attached 1 "
                        "--mca orte_abort_on_non_zero_status 0"));
  o.abort_on_rank_failure = true;
  EXPECT_THAT(line, HasSubstr("--mca btl tcp,self --mca btl_tcp_if_include lo "
                              "--mca oob_tcp_if_include lo"));
  EXPECT_THAT(line, HasSubstr("-x RINGMASTER_TOKEN"));
  EXPECT_THAT(line, HasSubstr("/bin/ringmaster-rank -- python3 x.py"));
  EXPECT_EQ(argv.back(), "x.py");
}

TEST(LaunchTest, MpirunOnARealNetworkLeavesInterfacesToOpenMpiUnlessTold) {
  MpirunOptions o;
  o.mpi_interface = ResolveMpiInterface("auto", "10.1.2.3");
  EXPECT_EQ(o.mpi_interface, "");
  std::string line = JoinCommand(MpirunArgv(o, 2, {"a"}));
  EXPECT_THAT(line, Not(HasSubstr("btl")));
  EXPECT_THAT(line, Not(HasSubstr("--allow-run-as-root")));
  o.mpi_interface = ResolveMpiInterface("eth1", "10.1.2.3");
  line = JoinCommand(MpirunArgv(o, 2, {"a"}));
  EXPECT_THAT(line, HasSubstr("--mca btl_tcp_if_include eth1 --mca oob_tcp_if_include eth1"));
  EXPECT_THAT(line, Not(HasSubstr("tcp,self")));
}

TEST(LaunchTest, LauncherEnvironmentCarriesTheJobAndRankZerosAddress) {
  const Assignment a = TwoWorkers();
  auto env = LauncherEnvironment(a, GangHosts(a.placement), 29500);
  EXPECT_THAT(env, Contains(Pair("RINGMASTER_JOB_ID", "j-1")));
  EXPECT_THAT(env, Contains(Pair("RINGMASTER_ATTEMPT", "2")));
  EXPECT_THAT(env, Contains(Pair("RINGMASTER_TOKEN", "secret")));
  EXPECT_THAT(env, Contains(Pair("RINGMASTER_AGENT_PORTS", "127.0.0.2:7072,127.0.0.3:7073")));
  EXPECT_THAT(env, Contains(Pair("MASTER_ADDR", "127.0.0.2")));
  EXPECT_THAT(env, Contains(Pair("MASTER_PORT", "29500")));
  EXPECT_THAT(env, Contains(Pair("WORLD_SIZE", "4")));
  for (const std::string& name : ExportedToRanks()) EXPECT_EQ(env.count(name), 1u) << name;
  EXPECT_EQ(env.count("RINGMASTER_ELASTIC"), 0u);
  Assignment elastic = a;
  elastic.elastic = true;
  EXPECT_THAT(LauncherEnvironment(elastic, GangHosts(a.placement), 29500),
              Contains(Pair("RINGMASTER_ELASTIC", "1")));
}

TEST(LaunchTest, RankEnvironmentGivesEachRankItsOwnGpusAndLocalRank) {
  const Assignment a = TwoWorkers();
  RankHost host;
  host.gpu_types = {{0, "v100"}, {1, "a100"}};
  host.metrics_addr = "10.0.0.9:7072";
  host.job_token = "rmj1.signed";
  auto env = RankEnvironment(a, 3, host);
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.2");
  EXPECT_EQ(env["RINGMASTER_WORKER_ID"], "w3");
  EXPECT_EQ(env["RINGMASTER_WORKER_ADDRESS"], "127.0.0.3");
  EXPECT_EQ(env["RINGMASTER_JOB_ID"], "j-1");
  EXPECT_EQ(env["FOO"], "bar");  // the job's own env
  EXPECT_EQ(env.count("RINGMASTER_SIMULATED_GPUS"), 0u);
  EXPECT_EQ(env["RINGMASTER_GPU_TYPE"], "a100");
  EXPECT_EQ(env["RINGMASTER_QUEUE"], "research");
  EXPECT_EQ(env["RINGMASTER_METRICS_ADDR"], "10.0.0.9:7072");
  EXPECT_EQ(env["RINGMASTER_JOB_TOKEN"], "rmj1.signed");
}

TEST(LaunchTest, AMigInstanceIsNamedToCudaByItsUuid) {
  Assignment a = TwoWorkers();
  a.placement[3].gpu_indices = {8};  // the worker's number for a MIG instance
  RankHost host;
  host.gpu_types = {{8, "h100-1g.10gb"}};
  host.gpu_uuids = {{8, "MIG-4d3c2b1a-0000-1111-2222-333344445555"}};
  auto env = RankEnvironment(a, 3, host);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "MIG-4d3c2b1a-0000-1111-2222-333344445555");
  EXPECT_EQ(env["RINGMASTER_GPU_TYPE"], "h100-1g.10gb");
}

TEST(LaunchTest, SimulatedGpusAreHiddenFromCudaAndNamedSeparately) {
  Assignment a = TwoWorkers();
  a.placement[2].gpu_indices = {0, 1};
  RankHost host;
  host.simulated_gpus = true;
  host.gpu_types = {{0, "t4"}, {1, "t4"}};
  auto env = RankEnvironment(a, 2, host);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env["RINGMASTER_SIMULATED_GPUS"], "0,1");
  EXPECT_EQ(env.count("CUDA_DEVICE_ORDER"), 0u);
  EXPECT_EQ(env["RINGMASTER_GPU_TYPE"], "t4");
  EXPECT_EQ(env.count("RINGMASTER_METRICS_ADDR"), 0u);
  EXPECT_EQ(env.count("RINGMASTER_JOB_TOKEN"), 0u);  // plaintext: none
}

TEST(LaunchTest, CpuRanksSeeNoGpuAndOurRankWinsOverTheJobsEnv) {
  Assignment a = TwoWorkers();
  for (auto& r : a.placement) r.gpu_indices.clear();
  auto env = RankEnvironment(a, 0, RankHost{});
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env.count("RINGMASTER_GPU_TYPE"), 0u);
  EXPECT_EQ(env["RANK"], "0");  // the spec said RANK=99
}

TEST(LaunchTest, OnlyACheckedTrainerIsCheckedInsideItsMpiInitAndEveryRankIsTold) {
  Assignment a = TwoWorkers();
  RankHost host;
  host.check_result_path = "/logs/j-1/2/check.result";
  a.run_check = true;
  EXPECT_FALSE(ChecksInSession(a)) << "a command might never call MPI_Init";
  EXPECT_EQ(RankEnvironment(a, 0, host).count(kPrecheckResultEnv), 0u);
  a.command->check_in_mpi_init = true;
  EXPECT_TRUE(ChecksInSession(a)) << "its spec says it calls MPI_Init";
  EXPECT_EQ(RankEnvironment(a, 1, host)[kPrecheckResultEnv], "/logs/j-1/2/check.result");
  a.check_on_gpus = true;
  EXPECT_FALSE(ChecksInSession(a));
  a.check_on_gpus = false;
  a.check_separately = true;
  EXPECT_FALSE(ChecksInSession(a)) << "the scheduler asked for ringmaster-check";
  EXPECT_EQ(RankEnvironment(a, 1, host).count(kPrecheckResultEnv), 0u);
  a.check_separately = false;
  a.command.reset();
  a.trainer = TrainerWorkload{};
  EXPECT_TRUE(ChecksInSession(a));
  for (int32_t rank : {0, 3}) {
    EXPECT_EQ(RankEnvironment(a, rank, host)[kPrecheckResultEnv], "/logs/j-1/2/check.result");
  }
  a.check_on_gpus = true;
  EXPECT_FALSE(ChecksInSession(a)) << "real GPUs are checked with NCCL by ringmaster-check";
  EXPECT_EQ(RankEnvironment(a, 0, host).count(kPrecheckResultEnv), 0u);
  a.check_on_gpus = false;
  a.run_check = false;
  EXPECT_FALSE(ChecksInSession(a));
  EXPECT_EQ(RankEnvironment(a, 0, host).count(kPrecheckResultEnv), 0u);
}

TEST(LaunchTest, ExecCommandLimitsAndReservedNames) {
  EXPECT_TRUE(ValidateExecCommand({"orted", "-mca", "x"}, {{"PATH", "/bin"}}).ok());
  EXPECT_EQ(ValidateExecCommand({}, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateExecCommand({"x"}, {{"RINGMASTER_JOB_ID", "j"}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateExecCommand({"x"}, {{"1BAD", "v"}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateExecCommand({std::string(300 * 1024, 'a')}, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateExecCommand({std::string("a\0b", 3)}, {}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LaunchTest, JobIdsThatCouldLeaveTheLogDirectoryAreRejected) {
  EXPECT_TRUE(IsSafeJobId("j-3f9c2a41b7d0"));
  EXPECT_FALSE(IsSafeJobId(""));
  EXPECT_FALSE(IsSafeJobId(".."));
  EXPECT_FALSE(IsSafeJobId("a/../../etc"));
  EXPECT_FALSE(IsSafeJobId(".hidden"));
  EXPECT_EQ(RankLogRelativePath("j-1", 0, 3), "j-1/0/rank-3.log");
}

TEST(LaunchTest, LoopbackAddresses) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.4"));
  EXPECT_TRUE(IsLoopbackAddress("localhost"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("node-127"));
}

TEST(LaunchTest, TheLaunchLineNamesTheEnvironmentButNeverItsValues) {
  const std::string line =
      DescribeLaunch({"python3", "train.py", "--lr", "0.1\nfake line"},
                     {{"AWS_SECRET_ACCESS_KEY", "s3cr3t-value"}, {"RANK", "0"}});
  EXPECT_EQ(line,
            "argv: python3 train.py --lr 0.1\\nfake line; env names: AWS_SECRET_ACCESS_KEY RANK");
  EXPECT_THAT(line, Not(HasSubstr("s3cr3t")));
  EXPECT_THAT(DescribeLaunch({"true"}, {}), HasSubstr("env names: (none)"));
  EXPECT_LE(DescribeLaunch({std::string(5000, 'a')}, {}).size(), 2100u);
}

AttemptEnvOptions EnvOptions() {
  AttemptEnvOptions o;
  o.base = {{"PATH", "/usr/bin"}, {"USER", "root"}, {"LOGNAME", "root"}, {"HOME", "/root"}};
  o.worker_id = "w1";
  o.agent_addr = "10.0.0.1:7071";
  o.tls_env = {{"RINGMASTER_TLS_CERT", "/etc/w.crt"}, {"RINGMASTER_TLS_KEY", "/etc/w.key"},
               {"RINGMASTER_TLS_CA", "/etc/ca.crt"}};
  o.team_tls_env = {{"RINGMASTER_TLS_CA", "/etc/ca.crt"}};
  o.agent_socket = "/run/agent.sock";
  return o;
}

TEST(AttemptEnvironmentTest, EveryProcessOfAnAttemptCarriesItsTagsAndTheWorkersTls) {
  const std::map<std::string, std::string> env =
      AttemptEnvironment(EnvOptions(), "j-1", 2, std::nullopt);
  EXPECT_THAT(env, Contains(Pair("PATH", "/usr/bin")));
  EXPECT_THAT(env, Contains(Pair(kWorkerIdEnv, "w1")));
  EXPECT_THAT(env, Contains(Pair(kJobIdEnv, "j-1")));
  EXPECT_THAT(env, Contains(Pair(kAttemptEnv, "2")));
  EXPECT_THAT(env, Contains(Pair(kAgentAddrEnv, "10.0.0.1:7071")));
  EXPECT_THAT(env, Contains(Pair("RINGMASTER_TLS_KEY", "/etc/w.key")));
  EXPECT_THAT(env, Contains(Pair("PMIX_MCA_gds", "hash")));
  EXPECT_EQ(env.count(kAgentSocketEnv), 0u);
  EXPECT_EQ(env.count("RINGMASTER_CHECK_DELAY_MS"), 0u);
}

TEST(AttemptEnvironmentTest, ATeamsUserGetsTheCaAndTheSocketButNeverTheWorkersKey) {
  const std::map<std::string, std::string> env =
      AttemptEnvironment(EnvOptions(), "j-1", 2, EnvUser{"alice", "/home/alice"});
  EXPECT_EQ(env.count("RINGMASTER_TLS_KEY"), 0u);
  EXPECT_EQ(env.count("RINGMASTER_TLS_CERT"), 0u);
  EXPECT_THAT(env, Contains(Pair("RINGMASTER_TLS_CA", "/etc/ca.crt")));
  EXPECT_THAT(env, Contains(Pair(kAgentSocketEnv, "/run/agent.sock")));
  EXPECT_THAT(env, Contains(Pair("HOME", "/home/alice")));
  EXPECT_THAT(env, Contains(Pair("USER", "alice")));
  EXPECT_THAT(env, Contains(Pair("LOGNAME", "alice")));
}

TEST(AttemptEnvironmentTest, AUidWithoutAPasswdEntryHasNoUserNameAndRootAsHome) {
  const std::map<std::string, std::string> env =
      AttemptEnvironment(EnvOptions(), "j-1", 2, EnvUser{"", ""});
  EXPECT_THAT(env, Contains(Pair("HOME", "/")));
  EXPECT_EQ(env.count("USER"), 0u);
  EXPECT_EQ(env.count("LOGNAME"), 0u);
}

TEST(AttemptEnvironmentTest, MpirunGetsTheLauncherEnvironmentAndYieldsUnlessTold) {
  const Assignment a = TwoWorkers();
  std::map<std::string, std::string> env =
      MpirunEnvironment(AttemptEnvironment(EnvOptions(), a.job_id, a.attempt, std::nullopt), a,
                        GangHosts(a.placement), 29500);
  EXPECT_THAT(env, Contains(Pair("MASTER_PORT", "29500")));
  EXPECT_THAT(env, Contains(Pair(kTokenEnv, "secret")));
  EXPECT_THAT(env, Contains(Pair("OMPI_MCA_mpi_yield_when_idle", "1")));
  AttemptEnvOptions told = EnvOptions();
  told.base["OMPI_MCA_mpi_yield_when_idle"] = "0";
  env = MpirunEnvironment(AttemptEnvironment(told, a.job_id, a.attempt, std::nullopt), a,
                          GangHosts(a.placement), 29500);
  EXPECT_THAT(env, Contains(Pair("OMPI_MCA_mpi_yield_when_idle", "0")));
}

TEST(DirectStartTest, TheWrapperRunsTheWorkloadItselfAsAnMpiSingletonWithoutADaemon) {
  EXPECT_THAT(DirectRankArgv("/opt/rm/ringmaster-rank", {"python3", "eval.py", "--"}),
              ElementsAre("/opt/rm/ringmaster-rank", "--", "python3", "eval.py", "--"));
  const Assignment a = TwoWorkers();
  std::map<std::string, std::string> env = DirectRankEnvironment(
      MpirunEnvironment(AttemptEnvironment(EnvOptions(), a.job_id, a.attempt, std::nullopt), a,
                        GangHosts(a.placement), 29500));
  EXPECT_THAT(env, Contains(Pair(kDirectStartEnv, "1")));
  EXPECT_THAT(env, Contains(Pair("OMPI_MCA_ess_singleton_isolated", "1")));
  EXPECT_THAT(env, Contains(Pair("MASTER_PORT", "29500")));
  EXPECT_THAT(env, Contains(Pair(kTokenEnv, "secret")));
  // The operator's environment still decides.
  env["OMPI_MCA_ess_singleton_isolated"] = "0";
  EXPECT_THAT(DirectRankEnvironment(env), Contains(Pair("OMPI_MCA_ess_singleton_isolated", "0")));
}

}  // namespace
}  // namespace ringmaster::worker
