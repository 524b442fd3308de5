// ringmaster-worker: flags and wiring only. See agent.h for what it does and docs/workers.md
// for how to run it.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/tls.h"
#include "core/container.h"
#include "core/gpu_share.h"
#include "core/inventory.h"
#include "gpu_metrics_collector.h"
#include "host/gpus.h"
#include "host/helpers.h"
#include "host/nvml_sampler.h"
#include "host/ports.h"
#include "host/runtime.h"
#include "host/users.h"
#include "rpc/agent_service.h"
#include "rpc/local_socket.h"
#include "rpc/scheduler_session.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

std::string Hostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// A worker id from the host name: [a-z0-9.-], at most 63 characters.
std::string IdFromHostname() {
  std::string id;
  for (char c : Hostname()) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    id.push_back((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ? c : '-');
  }
  return id.substr(0, 63);
}

// The installed binaries sit beside each other; in a build tree the trainer is two levels up.
std::string Sibling(const std::string& name, const std::vector<std::string>& also = {}) {
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  if (!ec) {
    // The error_code overloads: the throwing ones would end the worker on an unreadable dir.
    if (std::filesystem::exists(dir / name, ec)) return (dir / name).string();
    for (const std::string& rel : also) {
      if (!std::filesystem::exists(dir / rel, ec)) continue;
      std::filesystem::path found = std::filesystem::canonical(dir / rel, ec);
      if (!ec) return found.string();
    }
  }
  return name;
}

ringmaster::Flags MakeFlags() {
  ringmaster::Flags flags("ringmaster-worker",
                          "Worker agent of Ringmaster: offers this machine's GPUs (or CPU slots) "
                          "to the scheduler, launches and supervises the ranks placed here.");
  flags.Add("worker-id", IdFromHostname(), "stable id of this worker ([a-z0-9.-], 1..63)");
  flags.Add("address", Hostname(),
            "host or IP the other workers and mpirun reach this worker at (e.g. 127.0.0.2)");
  flags.Add("listen", "", "gRPC address of the agent service (default ADDRESS:7071)");
  flags.Add("scheduler", "127.0.0.1:7070", "scheduler HOST:PORT");
  flags.Add("metrics-listen", "",
            "address of the Prometheus /metrics endpoint (default "
            "ADDRESS:9465)");
  flags.Add("cpu-slots", "-1", "CPU ranks offered; -1: one per core without GPUs, else none");
  flags.Add("simulate-gpus", "0", "offer N simulated GPUs backed by the CPU instead of real ones");
  flags.Add("simulate-gpu-type", "t4", "type of the simulated GPUs");
  flags.Add("simulate-gpu-memory-bytes", "17179869184", "memory reported per simulated GPU");
  flags.Add("metrics-service", "",
            "ringmaster-metrics ingest HOST:PORT, given to ranks as RINGMASTER_METRICS_ADDR "
            "(ringmaster-train streams its samples there); empty: none");
  flags.Add("log-dir", "/tmp/ringmaster-logs", "rank logs go to LOG_DIR/JOB/ATTEMPT/rank-R.log");
  flags.Add("mpirun", "mpirun", "mpirun to launch jobs with (Open MPI 4)");
  flags.Add("mpirun-args", "", "extra mpirun arguments, space-separated");
  flags.Add("mpi-tmpdir", "",
            "parent of Open MPI's per-job session directories (short: they hold sockets); "
            "empty: /tmp/ringmaster-mpi-UID");
  flags.Add("mpi-if", "auto",
            "network interface of MPI traffic; auto: lo when ADDRESS is a loopback address, "
            "else Open MPI's choice; empty: Open MPI's choice");
  flags.Add("train-binary", Sibling("ringmaster-train", {"../../trainer/ringmaster-train"}),
            "path of ringmaster-train (trainer workloads)");
  flags.Add("rsh-binary", Sibling("ringmaster-rsh"),
            "path of ringmaster-rsh (same on every worker)");
  flags.Add("rank-binary", Sibling("ringmaster-rank"),
            "path of ringmaster-rank (same on every worker)");
  flags.Add("check-binary", Sibling("ringmaster-check", {"../../trainer/ringmaster-check"}),
            "path of ringmaster-check, the pre-run allreduce check (same on every worker)");
  flags.Add("check-timeout-ms", "10000", "bound on one pre-run check; past it the check fails");
  flags.Add("check-delay-ms", "0",
            "testing: this worker's check ranks wait this long before every allreduce of the "
            "pre-run check (a slow host on purpose); 0..10000");
  flags.Add("container-runtime", "podman",
            "the OCI runtime that runs the ranks of jobs with an image (docs/environments.md), "
            "looked up on PATH; empty: none, and such jobs fail to launch here");
  flags.Add("container-args", "",
            "extra arguments of every rank container's `run`, space-separated (e.g. "
            "--security-opt=seccomp=PROFILE)");
  flags.Add("image-pull-args", "",
            "extra arguments of every image `pull`, space-separated (e.g. --tls-verify=false "
            "for a plain-HTTP registry on loopback)");
  flags.Add("image-pull-timeout-s", "600", "time limit of one image pull, 1..86400");
  flags.Add("image-cache-gib", "100",
            "disk bound of the image store: after a pull, the least recently used images are "
            "removed until it is within it; 0: no bound");
  flags.Add("mps-control", "nvidia-cuda-mps-control",
            "NVIDIA's MPS control program, looked up on PATH: run as this worker's own daemon "
            "to enforce GPU shares on real GPUs (docs/gpu-sharing.md)");
  flags.Add("kill-grace-ms", "5000", "SIGTERM to SIGKILL when stopping a job's processes");
  flags.Add("checkpoint-root", "/tmp/ringmaster-checkpoints",
            "ranks get RINGMASTER_CHECKPOINT_DIR=<this>/<job id>, kept across attempts (a "
            "shared filesystem in a multi-machine cluster; empty: not set)");
  flags.Add("exec-wait-ms", "10000", "how long Exec waits for an assignment it has not seen yet");
  flags.Add("max-exec-waiters", "16",
            "how many Exec calls may wait for an assignment at once (more: RESOURCE_EXHAUSTED)");
  flags.Add("clean-exit-wait-ms", "5000",
            "after a job's ranks here all exited 0, how long mpirun and orted get to exit by "
            "themselves before they are signalled");
  flags.Add("master-ports", "29500-29999",
            "MASTER_PORTs for the jobs this worker launches, A-B; keep it outside the kernel's "
            "ephemeral range, and give workers that share a host and address ranges of their own");
  flags.Add("log-reader-names", "ringmaster-scheduler",
            "comma-separated DNS names (subjectAltName) of the certificates whose holders may "
            "read rank logs here (ReadLogs): the scheduler's, which relays them to clients after "
            "checking their right; ignored with --insecure");
  flags.Add("run-as", "",
            "TEAM=USER[:GROUP],...: run each team's job processes as that Unix user (names or "
            "numeric uid[:gid]); needs the worker to run as root. Empty (and no "
            "--run-as-default): everything runs as the worker's own user");
  flags.Add("run-as-default", "",
            "USER[:GROUP] for teams --run-as does not list; empty: their jobs fail to launch");
  flags.Add("agent-socket", "",
            "with --run-as: the Unix socket the job processes call this agent on (default "
            "LOG_DIR/agent.sock)");
  flags.Add("log-level", "info", "debug, info, warning or error");
  ringmaster::AddTlsFlags(flags);
  return flags;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ringmaster-worker: %s\n", std::string(status.message()).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringmaster;
  using namespace ringmaster::worker;
  ringmaster::TurnOffAbslDeadlockDetection();
  // A write to a pipe whose reader is gone (our stderr after the supervisor died, a peer's
  // socket) must come back as EPIPE, not end the worker. gRPC does this for its own sockets;
  // this covers the log lines on stderr. Children get SIGPIPE back (see Spawn).
  std::signal(SIGPIPE, SIG_IGN);
  Flags flags = MakeFlags();
  if (auto s = flags.Parse(argc, argv); !s.ok()) return Fail(s);
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  const std::string& level = flags.Get("log-level");
  SetMinLogLevel(level == "debug"     ? LogLevel::kDebug
                 : level == "warning" ? LogLevel::kWarning
                 : level == "error"   ? LogLevel::kError
                                      : LogLevel::kInfo);
  int64_t cpu_slots = 0, simulate = 0, sim_memory = 0, grace = 0, exec_wait = 0, waiters = 0,
          clean_exit_wait = 0, check_timeout = 0, check_delay = 0;
  for (auto s : {flags.GetInt("cpu-slots", &cpu_slots), flags.GetInt("simulate-gpus", &simulate),
                 flags.GetInt("simulate-gpu-memory-bytes", &sim_memory),
                 flags.GetInt("kill-grace-ms", &grace), flags.GetInt("exec-wait-ms", &exec_wait),
                 flags.GetInt("max-exec-waiters", &waiters),
                 flags.GetInt("clean-exit-wait-ms", &clean_exit_wait),
                 flags.GetInt("check-timeout-ms", &check_timeout),
                 flags.GetInt("check-delay-ms", &check_delay)}) {
    if (!s.ok()) return Fail(s);
  }
  if (check_timeout < 100 || check_timeout > 600'000) {
    return Fail(absl::InvalidArgumentError("--check-timeout-ms must be 100..600000"));
  }
  if (check_delay < 0 || check_delay > 10'000) {
    return Fail(absl::InvalidArgumentError("--check-delay-ms must be 0..10000"));
  }
  if (waiters < 0 || waiters > 1024) {
    return Fail(absl::InvalidArgumentError("--max-exec-waiters must be 0..1024"));
  }
  if (clean_exit_wait < 0) {
    return Fail(absl::InvalidArgumentError("--clean-exit-wait-ms must not be negative"));
  }
  absl::StatusOr<std::pair<int, int>> master_ports = ParsePortRange(flags.Get("master-ports"));
  if (!master_ports.ok()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--master-ports: ", master_ports.status().message())));
  }
  if (absl::StatusOr<bool> overlap =
          RangeOverlapsEphemeral(master_ports->first, master_ports->second);
      overlap.ok() && *overlap) {
    RM_LOG(kWarning) << "--master-ports " << flags.Get("master-ports")
                     << " overlaps the kernel's ephemeral port range "
                        "(/proc/sys/net/ipv4/ip_local_port_range): any connection on this host "
                        "may take a MASTER_PORT before rank 0 binds it";
  }
  if (simulate < 0 || simulate > 64) {
    return Fail(absl::InvalidArgumentError("--simulate-gpus must be 0..64"));
  }

  AgentOptions options;
  Inventory& inv = options.inventory;
  inv.worker_id = flags.Get("worker-id");
  inv.address = flags.Get("address");
  if (simulate > 0) {
    options.simulated_gpus = true;
    for (int i = 0; i < simulate; ++i) {
      inv.gpus.push_back(Gpu{i, flags.Get("simulate-gpu-type"), sim_memory, true, ""});
    }
  } else {
    GpuDiscovery found = DiscoverGpus();
    inv.gpus = found.gpus;
    if (inv.gpus.empty()) RM_LOG(kInfo) << "no GPU: " << found.why_none;
  }
  inv.cpu_slots = CpuSlots(cpu_slots, static_cast<int32_t>(std::thread::hardware_concurrency()),
                           static_cast<int32_t>(inv.gpus.size()));
  options.log_dir = flags.Get("log-dir");
  options.mpirun = flags.Get("mpirun");
  options.mpirun_args = absl::StrSplit(flags.Get("mpirun-args"), ' ', absl::SkipEmpty());
  options.mpi_interface = flags.Get("mpi-if");
  options.metrics_service = flags.Get("metrics-service");
  options.checkpoint_root = flags.Get("checkpoint-root");
  options.mpi_tmpdir = flags.Get("mpi-tmpdir");
  options.train_binary = flags.Get("train-binary");
  options.rsh_agent = flags.Get("rsh-binary");
  options.rank_binary = flags.Get("rank-binary");
  options.check_binary = flags.Get("check-binary");
  options.container_runtime = flags.Get("container-runtime");
  options.mps_control = flags.Get("mps-control");
  options.container_args =
      absl::StrSplit(flags.Get("container-args"), ' ', absl::SkipEmpty());
  options.image_pull_args =
      absl::StrSplit(flags.Get("image-pull-args"), ' ', absl::SkipEmpty());
  int64_t pull_timeout = 0;
  if (!absl::SimpleAtoi(flags.Get("image-pull-timeout-s"), &pull_timeout) || pull_timeout < 1 ||
      pull_timeout > 86400) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--image-pull-timeout-s: must be 1..86400 seconds, got \"",
        flags.Get("image-pull-timeout-s"), "\"")));
  }
  options.image_pull_timeout = std::chrono::seconds(pull_timeout);
  int64_t cache_gib = 0;
  if (!absl::SimpleAtoi(flags.Get("image-cache-gib"), &cache_gib) || cache_gib < 0 ||
      cache_gib > (int64_t{1} << 20)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--image-cache-gib: must be 0..1048576, got \"", flags.Get("image-cache-gib"), "\"")));
  }
  options.image_cache_bytes = cache_gib << 30;
  for (auto& [name, value] : CurrentEnvironment()) {
    if (name.rfind("RINGMASTER_", 0) != 0) options.runtime_env.emplace(name, value);
  }
  if (!options.container_runtime.empty()) {
    const CapturedRun version = RunCaptured({options.mpirun, "--version"}, options.runtime_env,
                                            std::chrono::steady_clock::now() + std::chrono::seconds(10));
    options.host_open_mpi = OpenMpiVersion(version.text);
  }
  // Optional, unlike the helpers: a worker without a runtime still runs jobs on the host.
  if (!options.container_runtime.empty()) {
    const Helper runtime{"the container runtime (jobs with an image)", options.container_runtime,
                         "--container-runtime (RINGMASTER_CONTAINER_RUNTIME)"};
    if (absl::Status s = CheckHelpers({runtime}, options.runtime_env["PATH"]); !s.ok()) {
      RM_LOG(kWarning) << s.message() << "; jobs with an image cannot run on this worker";
      options.container_runtime.clear();
    }
  }
  options.check_timeout = std::chrono::milliseconds(check_timeout);
  options.check_delay_ms = static_cast<int>(check_delay);
  options.kill_grace = std::chrono::milliseconds(grace);
  options.exec_wait = std::chrono::milliseconds(exec_wait);
  options.max_exec_waiters = static_cast<int>(waiters);
  options.clean_exit_wait = std::chrono::milliseconds(clean_exit_wait);
  options.master_port_first = master_ports->first;
  options.master_port_last = master_ports->second;
  absl::StatusOr<RunAsConfig> run_as = ParseRunAs(flags.Get("run-as"), flags.Get("run-as-default"));
  if (!run_as.ok()) return Fail(run_as.status());
  if (!run_as->empty()) {
    if (geteuid() != 0) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat("--run-as/--run-as-default need the worker to run as root (it runs as uid ",
                       geteuid(), "); without them every job runs as the worker's own user")));
    }
    for (const auto& [team, user] : run_as->teams) {
      absl::StatusOr<UnixUser> resolved = ResolveUnixUser(user, "--run-as " + team);
      if (!resolved.ok()) return Fail(resolved.status());
      options.team_users[team] = *resolved;
    }
    if (run_as->fallback) {
      absl::StatusOr<UnixUser> resolved = ResolveUnixUser(*run_as->fallback, "--run-as-default");
      if (!resolved.ok()) return Fail(resolved.status());
      options.default_user = *resolved;
    }
    // The worker (root) creates and hands out files under these: no one else may write them.
    for (const auto& [dir, flag] :
         {std::pair{options.log_dir, "--log-dir"},
          {options.checkpoint_root, "--checkpoint-root"},
          {options.mpi_tmpdir.empty() ? "/tmp/ringmaster-mpi-0" : options.mpi_tmpdir,
           "--mpi-tmpdir"}}) {
      if (dir.empty()) continue;
      if (auto s = EnsurePrivateDirectory(dir, flag); !s.ok()) return Fail(s);
    }
    options.agent_socket = flags.Get("agent-socket").empty() ? options.log_dir + "/agent.sock"
                                                             : flags.Get("agent-socket");
  }
  inv.shares_one_team = SharesOneTeam(!run_as->empty(), options.simulated_gpus, !inv.gpus.empty());
  const std::string listen =
      flags.Get("listen").empty() ? inv.address + ":7071" : flags.Get("listen");
  absl::StatusOr<TlsOptions> tls = TlsOptionsFromFlags(flags);
  if (!tls.ok()) return Fail(tls.status());
  // Only services call the agent (ringmaster-rsh, ringmaster-rank, peer workers): mutual TLS.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_credentials =
      MakeServerCredentials(*tls, ClientCertificates::kRequire, "--listen", listen);
  if (!server_credentials.ok()) return Fail(server_credentials.status());
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials =
      MakeChannelCredentials(*tls);
  if (!channel_credentials.ok()) return Fail(channel_credentials.status());
  if (tls->insecure) {
    WarnInsecure("ringmaster-worker");
    RM_LOG(kWarning) << "--insecure: Exec, StartRank and ReportRank are accepted from any peer "
                        "that holds a job token, and ReadLogs from any peer";
  }
  options.tls_env = TlsEnvironment(*tls, /*with_identity=*/true);
  std::vector<std::string> log_readers;
  for (absl::string_view name :
       absl::StrSplit(flags.Get("log-reader-names"), ',', absl::SkipWhitespace())) {
    log_readers.emplace_back(absl::StripAsciiWhitespace(name));
  }
  if (log_readers.empty()) {
    return Fail(absl::InvalidArgumentError(
        "--log-reader-names: needs at least one DNS name (the scheduler's certificate's, e.g. "
        "ringmaster-scheduler)"));
  }
  if (!tls->key_file.empty()) {
    std::vector<UnixUser> users;
    for (const auto& [team, user] : options.team_users) users.push_back(user);
    if (options.default_user) users.push_back(*options.default_user);
    for (const UnixUser& user : users) {
      if (auto s = CheckUnreadableBy(tls->key_file, user, "--tls-key"); !s.ok()) return Fail(s);
    }
  }
  // Every job needs these; a missing one is found here, not by the first job that fails.
  if (auto s = CheckHelpers(WorkerHelpers(options.mpirun, options.rsh_agent, options.rank_binary,
                                          options.train_binary, options.check_binary),
                            getenv("PATH") != nullptr ? getenv("PATH") : "");
      !s.ok()) {
    return Fail(s);
  }
  const std::string metrics_listen =
      flags.Get("metrics-listen").empty() ? inv.address + ":9465" : flags.Get("metrics-listen");

  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(metrics_listen);
    exposer->RegisterCollectable(registry);
  } catch (const std::exception& e) {
    return Fail(absl::UnavailableError(
        absl::StrCat("cannot serve /metrics on ", metrics_listen, ": ", e.what())));
  }

  // Real GPUs: their utilisation, memory and temperature under dcgm-exporter's names, read
  // through NVML at every scrape (docs/health.md). Skipped without GPUs or NVML.
  std::unique_ptr<NvmlSampler> nvml;
  std::shared_ptr<GpuMetricsCollector> gpu_metrics;
  if (!options.simulated_gpus && !inv.gpus.empty()) {
    absl::StatusOr<std::unique_ptr<NvmlSampler>> opened = NvmlSampler::Open();
    if (opened.ok()) {
      nvml = std::move(*opened);
      char host[256] = {0};
      gethostname(host, sizeof(host) - 1);
      gpu_metrics = std::make_shared<GpuMetricsCollector>(
          [sampler = nvml.get()] { return sampler->Read(); }, host);
      exposer->RegisterCollectable(gpu_metrics);
    } else {
      RM_LOG(kWarning) << "GPU metrics not exported: " << opened.status();
    }
  }

  // The agent service listens before we register: its port goes into the registration.
  Agent agent(options, registry.get());
  AgentServiceImpl service(&agent, /*verify_peers=*/!tls->insecure, log_readers);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(listen, *server_credentials, &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    return Fail(absl::UnavailableError("cannot listen on " + listen));
  }
  agent.SetPort(bound_port);
  // Teams' users call on the local socket; forwarded Execs go out with this worker's certificate.
  std::unique_ptr<AgentServiceImpl> local_service;
  std::unique_ptr<LocalSocketServer> local_socket;
  if (!options.agent_socket.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> peer_credentials =
        MakeChannelCredentials(*tls, ServerName::kAnyOfTheCa);
    if (!peer_credentials.ok()) return Fail(peer_credentials.status());
    local_service = AgentServiceImpl::ForLocalSocket(&agent, *peer_credentials);
    absl::StatusOr<std::unique_ptr<LocalSocketServer>> started =
        LocalSocketServer::Start(options.agent_socket, local_service.get());
    if (!started.ok()) return Fail(started.status());
    local_socket = *std::move(started);
    RM_LOG(kInfo) << "teams run as their Unix users; their processes call " << options.agent_socket;
  }
  agent.Start();
  SchedulerSession session(flags.Get("scheduler"), *channel_credentials, &agent);
  session.Start();
  RM_LOG(kInfo) << "ringmaster-worker " << inv.worker_id << " at " << inv.address << ":"
                << bound_port << " (gRPC on " << listen << ", /metrics on " << metrics_listen
                << "): " << inv.gpus.size() << (options.simulated_gpus ? " simulated" : "")
                << " GPUs" << (inv.gpus.empty() ? "" : " of type " + inv.gpus[0].type) << ", "
                << inv.cpu_slots << " CPU slots; scheduler " << flags.Get("scheduler");

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  RM_LOG(kInfo) << "shutting down: stopping every job process on this worker";
  // Processes first: their Exec calls then end by themselves.
  agent.Shutdown();
  if (local_socket) local_socket->Shutdown();
  session.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  // Everything that matters has stopped; the library teardown that would follow (civetweb's
  // threads, gRPC's timers) takes seconds and keeps nothing consistent that is not already.
  std::fflush(nullptr);
  std::_Exit(0);
}
