#include "worker/core/launch.h"

#include <algorithm>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/job_token.h"
#include "worker/core/gpu_share.h"

namespace ringmaster::worker {
namespace {

constexpr size_t kMaxExecWords = 4096;
constexpr size_t kMaxExecBytes = 256 * 1024;
constexpr size_t kMaxExecEnv = 256;

bool IsEnvName(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

absl::Status ValidatePlacement(const std::vector<RankPlacement>& placement) {
  if (placement.empty()) return absl::InvalidArgumentError("placement: no ranks");
  std::vector<bool> seen(placement.size(), false);
  std::map<std::string, std::pair<std::string, int32_t>> where;  // worker -> (address, port)
  std::map<std::string, std::string> owner;                      // address -> worker
  for (const RankPlacement& r : placement) {
    if (r.rank < 0 || static_cast<size_t>(r.rank) >= placement.size() || seen[r.rank]) {
      return absl::InvalidArgumentError(absl::StrCat("placement: rank ", r.rank,
                                                     " is out of range or placed twice (",
                                                     placement.size(), " ranks)"));
    }
    seen[r.rank] = true;
    if (r.worker_id.empty() || r.worker_address.empty() || r.worker_port <= 0 ||
        r.worker_port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement: rank ", r.rank, " has no worker id, address or port"));
    }
    // The address goes into the hostfile (a line per host) and the agents' port list (comma
    // separated): nothing but host-name and IP characters may reach them.
    if (!std::all_of(r.worker_address.begin(), r.worker_address.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-' || c == ':';
        })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement: rank ", r.rank, ": worker_address must be a host name or IP address"));
    }
    auto [it, fresh] = where.try_emplace(r.worker_id, r.worker_address, r.worker_port);
    if (!fresh && it->second != std::make_pair(r.worker_address, r.worker_port)) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement: worker ", r.worker_id, " appears with two addresses"));
    }
    auto [o, new_address] = owner.try_emplace(r.worker_address, r.worker_id);
    if (!new_address && o->second != r.worker_id) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement: workers ", o->second, " and ", r.worker_id, " share address ",
                       r.worker_address, "; MPI needs one address per worker"));
    }
  }
  return absl::OkStatus();
}

std::vector<GangHost> GangHosts(const std::vector<RankPlacement>& placement) {
  std::vector<const RankPlacement*> by_rank;
  for (const RankPlacement& r : placement) by_rank.push_back(&r);
  std::sort(by_rank.begin(), by_rank.end(),
            [](const RankPlacement* a, const RankPlacement* b) { return a->rank < b->rank; });
  std::vector<GangHost> hosts;
  std::map<std::string, size_t> index;
  for (const RankPlacement* r : by_rank) {
    auto [it, fresh] = index.try_emplace(r->worker_id, hosts.size());
    if (fresh) hosts.push_back({r->worker_id, r->worker_address, r->worker_port, {}});
    hosts[it->second].ranks.push_back(r->rank);
  }
  return hosts;
}

std::vector<int32_t> PlacedRankOfMpiRank(const std::vector<GangHost>& hosts) {
  std::vector<int32_t> order;
  for (const GangHost& h : hosts) order.insert(order.end(), h.ranks.begin(), h.ranks.end());
  return order;
}

std::string HostfileText(const std::vector<GangHost>& hosts) {
  std::string text;
  for (const GangHost& h : hosts)
    absl::StrAppend(&text, h.address, " slots=", h.ranks.size(), "\n");
  return text;
}

std::string AgentPortsValue(const std::vector<GangHost>& hosts) {
  std::vector<std::string> parts;
  for (const GangHost& h : hosts) parts.push_back(absl::StrCat(h.address, ":", h.port));
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<int32_t> AgentPortOf(const std::string& agent_ports, const std::string& host) {
  for (absl::string_view entry : absl::StrSplit(agent_ports, ',', absl::SkipEmpty())) {
    auto colon = entry.rfind(':');
    int32_t port = 0;
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(entry.substr(colon + 1), &port)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kAgentPortsEnv, ": expected ADDRESS:PORT entries, got '", entry, "'"));
    }
    if (entry.substr(0, colon) == host) return port;
  }
  return absl::NotFoundError(absl::StrCat("host ", host, " is not a worker of this job (",
                                          kAgentPortsEnv, "=", agent_ports, ")"));
}

absl::StatusOr<std::vector<std::string>> WorkloadArgv(const Assignment& assignment,
                                                      const std::string& train_binary) {
  if (assignment.trainer) {
    std::vector<std::string> argv = {assignment.image ? kImageTrainBinary : train_binary};
    const TrainerWorkload& t = *assignment.trainer;
    if (!t.model.empty()) argv.insert(argv.end(), {"--model", t.model});
    if (t.batch_size > 0) argv.insert(argv.end(), {"--batch-size", absl::StrCat(t.batch_size)});
    if (t.steps > 0) argv.insert(argv.end(), {"--steps", absl::StrCat(t.steps)});
    if (t.checkpoint_every && *t.checkpoint_every >= 0) {
      argv.insert(argv.end(), {"--checkpoint-every", absl::StrCat(*t.checkpoint_every)});
    }
    return argv;
  }
  if (assignment.command && !assignment.command->argv.empty()) return assignment.command->argv;
  return absl::InvalidArgumentError(
      absl::StrCat("job ", assignment.job_id, " has neither a trainer nor a command workload"));
}

bool IsLoopbackAddress(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1" || address == "localhost";
}

std::string ResolveMpiInterface(const std::string& flag, const std::string& launcher_address) {
  if (flag == "auto") return IsLoopbackAddress(launcher_address) ? "lo" : "";
  return flag;
}

std::vector<std::string> ExportedToRanks() {
  return {kJobIdEnv,          kAttemptEnv,       kTokenEnv,     RM_ENV_MASTER_ADDR,
          RM_ENV_MASTER_PORT, RM_ENV_WORLD_SIZE, "PMIX_MCA_gds"};
}

std::vector<std::string> MpirunArgv(const MpirunOptions& options, int32_t world_size,
                                    const std::vector<std::string>& workload) {
  std::vector<std::string> argv = {options.mpirun};
  if (options.allow_run_as_root) argv.push_back("--allow-run-as-root");
  argv.insert(argv.end(),
              {"--hostfile", options.hostfile_path, "-np", absl::StrCat(world_size),
               // Several fake hosts share this machine's cores; the packer, not
               // MPI, decides how many ranks a worker takes.
               "--bind-to", "none", "--oversubscribe", "--mca", "plm_rsh_agent", options.rsh_agent,
               // Only mpirun holds the job token and the agents' ports: no orted
               // may launch further orteds.
               "--mca", "plm_rsh_no_tree_spawn", "1",
               // Without it orted daemonizes and leaves the session the worker
               // tracks (and the Exec call would end at once).
               "--mca", "orte_leave_session_attached", "1"});
  if (!options.abort_on_rank_failure) {
    argv.insert(argv.end(), {"--mca", "orte_abort_on_non_zero_status", "0"});
  }
  if (options.mpi_interface == "lo") {
    // Open MPI excludes 127.0.0.0/8 by default; the fake hosts only have loopback.
    argv.insert(argv.end(), {"--mca", "btl", "tcp,self"});
  }
  if (!options.mpi_interface.empty()) {
    argv.insert(argv.end(), {"--mca", "btl_tcp_if_include", options.mpi_interface, "--mca",
                             "oob_tcp_if_include", options.mpi_interface});
  }
  for (const std::string& name : ExportedToRanks()) argv.insert(argv.end(), {"-x", name});
  for (const std::string& name : options.extra_exports) argv.insert(argv.end(), {"-x", name});
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  argv.push_back(options.rank_binary);
  argv.push_back("--");
  argv.insert(argv.end(), workload.begin(), workload.end());
  return argv;
}

std::map<std::string, std::string> LauncherEnvironment(const Assignment& assignment,
                                                       const std::vector<GangHost>& hosts,
                                                       int32_t master_port) {
  std::string master_addr;
  for (const RankPlacement& r : assignment.placement) {
    if (r.rank == 0) master_addr = r.worker_address;
  }
  std::map<std::string, std::string> env = {
      {kJobIdEnv, assignment.job_id},
      {kAttemptEnv, absl::StrCat(assignment.attempt)},
      {kTokenEnv, assignment.token},
      {kAgentPortsEnv, AgentPortsValue(hosts)},
      {RM_ENV_MASTER_ADDR, master_addr},
      {RM_ENV_MASTER_PORT, absl::StrCat(master_port)},
      {RM_ENV_WORLD_SIZE, absl::StrCat(assignment.placement.size())},
      // Debian's Open MPI 4.1 prints "PMIX ERROR ... dstore_base.c" from every orted with the
      // shared-memory store; the hash store is silent and fast enough for a bootstrap.
      {"PMIX_MCA_gds", "hash"},
  };
  if (assignment.elastic) env[kElasticEnv] = "1";
  return env;
}

std::map<std::string, std::string> AttemptEnvironment(const AttemptEnvOptions& options,
                                                      const std::string& job_id, int32_t attempt,
                                                      const std::optional<EnvUser>& user) {
  std::map<std::string, std::string> env = options.base;
  env[kWorkerIdEnv] = options.worker_id;
  env[kJobIdEnv] = job_id;
  env[kAttemptEnv] = absl::StrCat(attempt);
  env[kAgentAddrEnv] = options.agent_addr;
  if (options.check_delay_ms > 0) {
    env[RM_ENV_CHECK_DELAY_MS] = absl::StrCat(options.check_delay_ms);
  }
  env.try_emplace("PMIX_MCA_gds", "hash");  // see LauncherEnvironment
  if (!user) {
    for (const auto& [name, value] : options.tls_env) env[name] = value;
    return env;
  }
  for (const auto& [name, value] : options.team_tls_env) env[name] = value;
  env[kAgentSocketEnv] = options.agent_socket;
  env["HOME"] = user->home.empty() ? "/" : user->home;
  if (!user->name.empty()) {
    env["USER"] = user->name;
    env["LOGNAME"] = user->name;
  } else {
    env.erase("USER");
    env.erase("LOGNAME");
  }
  return env;
}

std::map<std::string, std::string> MpirunEnvironment(std::map<std::string, std::string> attempt_env,
                                                     const Assignment& assignment,
                                                     const std::vector<GangHost>& hosts,
                                                     int32_t master_port) {
  std::map<std::string, std::string> env = std::move(attempt_env);
  for (auto& [k, v] : LauncherEnvironment(assignment, hosts, master_port)) env[k] = v;
  // A rank waiting in MPI spins on its core unless Open MPI sees more ranks than slots, and it
  // cannot see the other workers (or the agents) sharing this machine: spinning ranks then
  // halve a CPU job's throughput. Yielding costs nothing measurable on cores of its own. The
  // operator's environment or `--mpirun-args "--mca mpi_yield_when_idle 0"` still decides.
  env.try_emplace("OMPI_MCA_mpi_yield_when_idle", "1");
  return env;
}

std::vector<std::string> DirectRankArgv(const std::string& rank_binary,
                                        const std::vector<std::string>& workload) {
  std::vector<std::string> argv = {rank_binary, "--"};
  argv.insert(argv.end(), workload.begin(), workload.end());
  return argv;
}

std::map<std::string, std::string> DirectRankEnvironment(
    std::map<std::string, std::string> mpirun_env) {
  mpirun_env[kDirectStartEnv] = "1";
  mpirun_env.try_emplace("OMPI_MCA_ess_singleton_isolated", "1");
  return mpirun_env;
}

bool ChecksInSession(const Assignment& assignment) {
  const bool calls_mpi_init = assignment.trainer.has_value() ||
                              (assignment.command && assignment.command->check_in_mpi_init);
  return assignment.run_check && calls_mpi_init && !assignment.check_on_gpus &&
         !assignment.check_separately && !assignment.image;
}

std::map<std::string, std::string> RankEnvironment(const Assignment& assignment, int32_t rank,
                                                   const RankHost& host) {
  std::map<std::string, std::string> env;
  if (assignment.command) env = assignment.command->env;
  const RankPlacement* self = nullptr;
  std::string master_addr;
  for (const RankPlacement& r : assignment.placement) {
    if (r.rank == rank) self = &r;
    if (r.rank == 0) master_addr = r.worker_address;
  }
  if (self == nullptr) return env;
  int32_t local_rank = 0, local_size = 0;
  for (const RankPlacement& r : assignment.placement) {
    if (r.worker_id != self->worker_id) continue;
    ++local_size;
    if (r.rank < rank) ++local_rank;
  }
  const std::string gpus = absl::StrJoin(self->gpu_indices, ",");
  env[RM_ENV_RANK] = absl::StrCat(rank);
  env[RM_ENV_WORLD_SIZE] = absl::StrCat(assignment.placement.size());
  env[RM_ENV_LOCAL_RANK] = absl::StrCat(local_rank);
  env[RM_ENV_LOCAL_WORLD_SIZE] = absl::StrCat(local_size);
  env[RM_ENV_MASTER_ADDR] = master_addr;
  env[kJobIdEnv] = assignment.job_id;
  env[kAttemptEnv] = absl::StrCat(assignment.attempt);
  env[kWorkerIdEnv] = self->worker_id;
  env[RM_ENV_WORKER_ADDRESS] = self->worker_address;
  env[RM_ENV_RINGMASTER_RANK] = absl::StrCat(rank);
  // Labels ringmaster-train's samples carry (its flags fall back to these variables).
  env[RM_ENV_QUEUE] = assignment.queue;
  if (!self->gpu_indices.empty()) {
    auto type = host.gpu_types.find(self->gpu_indices.front());
    if (type != host.gpu_types.end()) env[RM_ENV_GPU_TYPE] = type->second;
  }
  if (!host.metrics_addr.empty()) env[RM_ENV_METRICS_ADDR] = host.metrics_addr;
  if (!host.job_token.empty()) env[kJobTokenEnv] = host.job_token;
  if (!host.checkpoint_dir.empty()) env[RM_ENV_CHECKPOINT_DIR] = host.checkpoint_dir;
  if (ChecksInSession(assignment) && !host.check_result_path.empty()) {
    env[kPrecheckResultEnv] = host.check_result_path;
  }
  if (host.simulated_gpus) {
    // Nothing real to show to CUDA; the indices stay visible for programs that care.
    env["CUDA_VISIBLE_DEVICES"] = "";
    env[RM_ENV_SIMULATED_GPUS] = gpus;
  } else {
    // Empty for a CPU rank: it must not touch the GPUs placed for other jobs. A MIG instance
    // by its UUID.
    std::vector<std::string> visible;
    for (int32_t index : self->gpu_indices) {
      auto uuid = host.gpu_uuids.find(index);
      visible.push_back(uuid != host.gpu_uuids.end() ? uuid->second : absl::StrCat(index));
    }
    env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(visible, ",");
    // The worker numbers GPUs in PCI bus order (NVML); CUDA must agree.
    if (!gpus.empty()) env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  }
  for (auto& [name, value] :
       GpuShareEnvironment(assignment, *self, host.simulated_gpus ? "" : host.mps_pipe_directory)) {
    env[name] = std::move(value);
  }
  return env;
}

std::string JoinCommand(const std::vector<std::string>& words) { return absl::StrJoin(words, " "); }

std::string DescribeLaunch(const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& env) {
  constexpr size_t kMaxArgvText = 2000;
  std::string text = absl::CHexEscape(JoinCommand(argv));
  if (text.size() > kMaxArgvText) text = absl::StrCat(text.substr(0, kMaxArgvText), "...");
  std::vector<std::string> names;
  names.reserve(env.size());
  for (const auto& [name, value] : env) names.push_back(absl::CHexEscape(name));
  return absl::StrCat("argv: ", text, "; env names: ",
                      names.empty() ? "(none)" : absl::StrJoin(names, " "));
}

absl::Status ValidateExecCommand(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::string>& env) {
  if (argv.empty() || argv.size() > kMaxExecWords) {
    return absl::InvalidArgumentError(
        absl::StrCat("argv: 1..", kMaxExecWords, " words allowed, got ", argv.size()));
  }
  size_t bytes = 0;
  for (const std::string& word : argv) {
    bytes += word.size() + 1;
    if (word.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError("argv: words must not contain NUL bytes");
    }
  }
  if (bytes > kMaxExecBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("argv: at most ", kMaxExecBytes, " bytes allowed, got ", bytes));
  }
  if (env.size() > kMaxExecEnv) {
    return absl::InvalidArgumentError(
        absl::StrCat("env: at most ", kMaxExecEnv, " entries allowed, got ", env.size()));
  }
  for (const auto& [name, value] : env) {
    if (!IsEnvName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("env: '", name, "' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"));
    }
    if (name.rfind("RINGMASTER_", 0) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("env: ", name, " is reserved (RINGMASTER_* is set by the worker)"));
    }
    if (value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("env: value of ", name, " contains NUL"));
    }
  }
  return absl::OkStatus();
}

bool IsSafeJobId(const std::string& job_id) {
  if (job_id.empty() || job_id.size() > 128 || job_id[0] == '.') return false;
  return std::all_of(job_id.begin(), job_id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

std::string RankLogRelativePath(const std::string& job_id, int32_t attempt, int32_t rank) {
  return absl::StrCat(job_id, "/", attempt, "/rank-", rank, ".log");
}

}  // namespace ringmaster::worker
