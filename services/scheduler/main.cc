// ringmaster-scheduler: flags and wiring only. See scheduler.h for what it does.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <unistd.h>
#ifdef RINGMASTER_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

#include <csignal>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/net.h"
#include "common/secret_box.h"
#include "common/tls.h"
#include "core/clock.h"
#include "rpc/admin_service.h"
#include "rpc/authenticator.h"
#include "rpc/queue_service.h"
#include "rpc/registry_service.h"
#include "rpc/services.h"
#include "rpc/volume_service.h"
#include "scheduler.h"
#include "store/identity_store.h"
#include "store/postgres_job_store.h"
#include "store/redis_client.h"
#include "store/redis_coordination.h"

namespace {

// The allocator in use, for the startup log (CMakeLists.txt says why jemalloc).
std::string Allocator() {
#ifdef RINGMASTER_JEMALLOC
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl("version", &version, &size, nullptr, 0) == 0 && version != nullptr) {
    return std::string("jemalloc ") + version;
  }
  return "jemalloc";
#else
  return "the C library's malloc";
#endif
}

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

ringmaster::Flags MakeFlags() {
  ringmaster::Flags flags("ringmaster-scheduler",
                          "Job API, worker registry, queue and gang placement of Ringmaster.");
  flags.Add("listen", "0.0.0.0:7070", "gRPC address for clients and workers");
  flags.Add("metrics-listen", "0.0.0.0:9464", "address of the Prometheus /metrics endpoint");
  flags.Add("postgres-url", "postgresql://postgres@127.0.0.1:5432/ringmaster",
            "PostgreSQL connection URL (the system of record)");
  flags.Add("postgres-pool", "8", "PostgreSQL connections in the pool");
  flags.Add("redis-addr", "127.0.0.1:6379", "Redis HOST:PORT (queue, liveness, events)");
  flags.Add("redis-db", "0", "Redis database index");
  flags.Add("redis-prefix", "rm:", "prefix of every Redis key");
  flags.Add("heartbeat-timeout-ms", "10000", "a worker silent this long is marked lost");
  flags.Add("heartbeat-interval-ms", "2000", "how often workers are told to send heartbeats");
  flags.Add("pass-interval-ms", "500", "placement pass period (passes also run on every change)");
  flags.Add("connect-timeout-s", "60", "how long to wait for PostgreSQL at start");
  flags.Add("postgres-timeout-ms", "5000",
            "PostgreSQL statement timeout; a call (all its statements) is cut after twice this, "
            "even when the server answers nothing");
  flags.Add("submit-writers", "1",
            "threads that store new jobs in parallel, each with a PostgreSQL connection of the "
            "pool (changes of existing jobs are stored by one more, in order)");
  flags.Add("write-wait-ms", "10000",
            "how long SubmitJob and CancelJob wait for their write to be stored before "
            "UNAVAILABLE");
  flags.Add("lease-ttl-ms", "10000",
            "leader lease in Redis: one replica serves, others wait; a dead leader's lease "
            "passes on after this long");
  flags.Add("preemption-grace-ms", "30000",
            "a preempted job's ranks get SIGTERM, then SIGKILL after this long (time to "
            "checkpoint); its GPUs are held until then");
  flags.Add("health-check", "true",
            "run the pre-run allreduce check before every attempt of jobs that do not opt out "
            "(health_check: false); true or false");
  flags.Add("check-min-ratio", "0.5",
            "a pre-run check below this fraction of its shape's learned baseline bus bandwidth "
            "fails (0..1)");
  flags.Add("unhealthy-recheck-s", "600",
            "a worker a failed pre-run check marked unhealthy goes on probation after this "
            "long: it takes jobs that run a check, and the first that passes clears it "
            "(0: only ringctl workers clear)");
  flags.Add("reservations", "4",
            "waiting gangs that get a reservation; jobs behind them backfill only when their "
            "max_runtime_seconds ends before it (0: no reservations)");
  flags.Add("queue-order", "submit",
            "order of a queue's pending jobs of equal priority: submit, or shortest-limit "
            "(shortest max_runtime_seconds first, no limit last; docs/scheduler.md)");
  flags.Add("starve-hours", "6",
            "with --queue-order shortest-limit, a job pending this long goes first (0.01..8760)");
  flags.Add("reservation-window-hours", "168",
            "how far ahead a reservation may lie (1..8760); a gang that cannot start sooner "
            "waits without one");
  flags.Add("share-placement", "ringmaster",
            "where ranks with a gpu_share go: gpu-packing, fgd or ringmaster (FGD's measure of "
            "fragmentation with Ringmaster's tie-breaks; docs/gpu-sharing.md, Where shares go)");
  flags.Add("elastic-idle-delay-ms", "60000",
            "elastic jobs grow into GPUs that stayed idle this long (1000..86400000; "
            "docs/fair-share.md, Elastic jobs)");
  flags.Add("elastic-resizes-per-hour", "2",
            "an elastic job is resized at most this often in any hour (0..60; 0: never)");
  flags.Add("elastic-restart-cost-ms", "60000",
            "what a resize is reckoned to cost the job beyond its work since the last "
            "checkpoint; it grows only when that saves at least twice this (0..3600000)");
  flags.Add("admin-token-file", "",
            "bootstrap admin token (docs/security.md): when the file exists its token is "
            "registered as an admin token; when it does not and no admin token exists, a new "
            "one is made and written there (mode 0600). Empty: no bootstrap");
  flags.Add("secrets-key-file", "",
            "the key that seals teams' registry secrets in PostgreSQL (AES-256-GCM; "
            "docs/environments.md, \"Private registries\"): a file of 32 bytes or 64 hex "
            "digits, which must exist. Empty: $XDG_STATE_HOME/ringmaster/secrets.key, else "
            "$HOME/.local/state/ringmaster/secrets.key, made (mode 0600) at the first start. "
            "Every replica needs the same key");
  flags.Add("previous-secrets-key-file", "",
            "during a key rotation, the key --secrets-key-file replaces (a file that must "
            "exist): at start the leader reseals with the current key every registry secret "
            "the previous one sealed, and logs how many. Drop it once every replica runs with "
            "the new key (docs/environments.md, \"Secrets at rest\"). Empty: none");
  flags.AddSwitch("insecure-no-auth",
                  "with --insecure only (loopback): calls without a bearer token are served as "
                  "an admin of team 'anonymous'. For benchmark baselines; never in a shared "
                  "cluster");
  flags.Add("max-log-relays", "64",
            "rank logs relayed to clients at once (ReadJobLogs, ringctl logs; a followed log "
            "holds one while its rank runs); more are RESOURCE_EXHAUSTED. 1..10000");
  flags.Add("max-watchers", "2048",
            "WatchJob streams (ringctl run and watch) served at once (each holds its call's "
            "memory, no thread); more are RESOURCE_EXHAUSTED. 1..100000");
  flags.Add("max-cancels", "4096",
            "CancelJob calls waiting for their write (or their job's read) at once; more are "
            "RESOURCE_EXHAUSTED. 1..100000");
  flags.Add("max-rpc-threads", "4096",
            "threads for the calls that hold one (every call but SubmitJob, WatchJob, "
            "CancelJob and the workers' streams); a call finding none free is "
            "RESOURCE_EXHAUSTED at once. At least --max-log-relays + 64, so log relays cannot "
            "take them all");
  flags.Add("max-live-jobs", "100000",
            "live jobs (pending, starting or running) at most, each held in memory; a submit "
            "past it is RESOURCE_EXHAUSTED. 1..10000000");
  flags.Add("max-live-jobs-per-queue", "50000",
            "live jobs of one queue at most, so one team's backlog cannot fill "
            "--max-live-jobs for all. 1..10000000");
  flags.Add("max-live-spec-mib", "128",
            "MiB of the live jobs' argv, env, labels and names at most (a spec may carry about "
            "360 KiB); a submit past it is RESOURCE_EXHAUSTED. 1..65536");
  flags.Add("log-level", "info", "debug, info, warning or error");
  ringmaster::AddTlsFlags(flags);
  return flags;
}

// A name for this process as a lease holder: unique even for a restart on the same host.
std::string LeaseHolder() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::random_device random;
  return std::string(host) + ":" + std::to_string(getpid()) + ":" + std::to_string(random());
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ringmaster-scheduler: %s\n", std::string(status.message()).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringmaster;
  using namespace ringmaster::scheduler;
  ringmaster::TurnOffAbslDeadlockDetection();
  Flags flags = MakeFlags();
  if (auto s = flags.Parse(argc, argv); !s.ok()) return Fail(s);
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  const std::string& level = flags.Get("log-level");
  SetMinLogLevel(level == "debug" ? LogLevel::kDebug
                 : level == "warning" ? LogLevel::kWarning
                 : level == "error" ? LogLevel::kError
                                    : LogLevel::kInfo);
  // Transitions are logged under the scheduler's lock: a slow stderr must not hold it.
  StartAsyncLog();
  int64_t pool = 0, redis_db = 0, connect_timeout_s = 0, lease_ttl_ms = 0, pg_timeout_ms = 0,
          submit_writers = 0, reservations = 0, window_hours = 0, recheck_s = 0, max_log_relays = 0,
          max_watchers = 0, max_rpc_threads = 0, max_spec_mib = 0, max_cancels = 0,
          resizes_per_hour = 0;
  SchedulerOptions options;
  for (auto s : {flags.GetInt("postgres-pool", &pool),
                 flags.GetInt("redis-db", &redis_db),
                 flags.GetInt("heartbeat-timeout-ms", &options.heartbeat_timeout_ms),
                 flags.GetInt("heartbeat-interval-ms", &options.heartbeat_interval_ms),
                 flags.GetInt("pass-interval-ms", &options.pass_interval_ms),
                 flags.GetInt("connect-timeout-s", &connect_timeout_s),
                 flags.GetInt("lease-ttl-ms", &lease_ttl_ms),
                 flags.GetInt("postgres-timeout-ms", &pg_timeout_ms),
                 flags.GetInt("write-wait-ms", &options.write_wait_ms),
                 flags.GetInt("submit-writers", &submit_writers),
                 flags.GetInt("preemption-grace-ms", &options.preemption_grace_ms),
                 flags.GetInt("reservations", &reservations),
                 flags.GetInt("reservation-window-hours", &window_hours),
                 flags.GetInt("max-log-relays", &max_log_relays),
                 flags.GetInt("max-watchers", &max_watchers),
                 flags.GetInt("max-cancels", &max_cancels),
                 flags.GetInt("max-rpc-threads", &max_rpc_threads),
                 flags.GetInt("max-live-jobs", &options.max_live_jobs),
                 flags.GetInt("max-live-jobs-per-queue", &options.max_live_jobs_per_queue),
                 flags.GetInt("max-live-spec-mib", &max_spec_mib),
                 flags.GetBool("health-check", &options.health_check),
                 flags.GetDouble("check-min-ratio", &options.check_min_ratio),
                 flags.GetInt("unhealthy-recheck-s", &recheck_s),
                 flags.GetInt("elastic-idle-delay-ms", &options.elastic.idle_delay_ms),
                 flags.GetInt("elastic-resizes-per-hour", &resizes_per_hour),
                 flags.GetInt("elastic-restart-cost-ms", &options.elastic.restart_cost_ms)}) {
    if (!s.ok()) return Fail(s);
  }
  if (recheck_s < 0 || recheck_s > 30LL * 24 * 3600) {
    return Fail(absl::InvalidArgumentError(
        "--unhealthy-recheck-s must be 0..2592000 (30 days; 0: only an admin clears)"));
  }
  options.unhealthy_recheck_ms = recheck_s * 1000;
  if (options.elastic.idle_delay_ms < 1000 || options.elastic.idle_delay_ms > 86'400'000) {
    return Fail(absl::InvalidArgumentError("--elastic-idle-delay-ms must be 1000..86400000"));
  }
  if (resizes_per_hour < 0 || resizes_per_hour > 60) {
    return Fail(absl::InvalidArgumentError("--elastic-resizes-per-hour must be 0..60"));
  }
  options.elastic.max_resizes_per_hour = static_cast<int32_t>(resizes_per_hour);
  if (options.elastic.restart_cost_ms < 0 || options.elastic.restart_cost_ms > 3'600'000) {
    return Fail(absl::InvalidArgumentError("--elastic-restart-cost-ms must be 0..3600000"));
  }
  if (!(options.check_min_ratio >= 0 && options.check_min_ratio <= 1)) {
    return Fail(absl::InvalidArgumentError("--check-min-ratio must be 0..1"));
  }
  if (lease_ttl_ms < 300) {
    return Fail(absl::InvalidArgumentError(
        "--lease-ttl-ms (or RINGMASTER_LEASE_TTL_MS) must be at least 300"));
  }
  if (pg_timeout_ms < 100 || options.write_wait_ms < 100) {
    return Fail(absl::InvalidArgumentError(
        "--postgres-timeout-ms and --write-wait-ms must be at least 100"));
  }
  if (submit_writers < 1 || submit_writers > 64 || submit_writers + 2 > pool) {
    return Fail(absl::InvalidArgumentError(
        "--submit-writers must be 1..64 and leave at least 2 of --postgres-pool's connections "
        "for the ordered writer and reads"));
  }
  options.submit_writers = static_cast<int>(submit_writers);
  if (options.preemption_grace_ms < 0 || options.preemption_grace_ms > 3'600'000) {
    return Fail(absl::InvalidArgumentError("--preemption-grace-ms must be 0..3600000"));
  }
  if (reservations < 0 || reservations > 1000) {
    return Fail(absl::InvalidArgumentError("--reservations must be 0..1000"));
  }
  options.reservations = static_cast<int32_t>(reservations);
  if (flags.Get("queue-order") == "shortest-limit") {
    options.queue_order = PolicyOptions::Order::kShortestLimit;
  } else if (flags.Get("queue-order") != "submit") {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--queue-order must be submit or shortest-limit, got '", flags.Get("queue-order"), "'")));
  }
  if (auto share = LiveSharePolicy(flags.Get("share-placement"))) {
    options.share_policy = *share;
  } else {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--share-placement must be gpu-packing, fgd or ringmaster, got '",
                     flags.Get("share-placement"), "'")));
  }
  double starve_hours = 0;
  if (auto s = flags.GetDouble("starve-hours", &starve_hours); !s.ok()) return Fail(s);
  if (!(starve_hours >= 0.01 && starve_hours <= 8760)) {
    return Fail(absl::InvalidArgumentError("--starve-hours must be 0.01..8760"));
  }
  options.starve_after_ms = static_cast<int64_t>(starve_hours * 3600 * 1000);
  if (window_hours < 1 || window_hours > 8760) {
    return Fail(absl::InvalidArgumentError("--reservation-window-hours must be 1..8760"));
  }
  options.reservation_window_ms = window_hours * 3600 * 1000;
  if (max_log_relays < 1 || max_log_relays > 10000) {
    return Fail(absl::InvalidArgumentError("--max-log-relays must be 1..10000"));
  }
  if (max_watchers < 1 || max_watchers > 100000) {
    return Fail(absl::InvalidArgumentError("--max-watchers must be 1..100000"));
  }
  options.max_watchers = static_cast<int32_t>(max_watchers);
  if (max_cancels < 1 || max_cancels > 100000) {
    return Fail(absl::InvalidArgumentError("--max-cancels must be 1..100000"));
  }
  options.max_cancels = static_cast<int32_t>(max_cancels);
  if (max_rpc_threads < max_log_relays + 64 || max_rpc_threads > 1'000'000) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--max-rpc-threads must be at least --max-log-relays + 64 (",
                     max_log_relays + 64, ") and at most 1000000")));
  }
  if (options.max_live_jobs < 1 || options.max_live_jobs > 10'000'000 ||
      options.max_live_jobs_per_queue < 1 || options.max_live_jobs_per_queue > 10'000'000) {
    return Fail(absl::InvalidArgumentError(
        "--max-live-jobs and --max-live-jobs-per-queue must be 1..10000000"));
  }
  if (max_spec_mib < 1 || max_spec_mib > 65536) {
    return Fail(absl::InvalidArgumentError("--max-live-spec-mib must be 1..65536"));
  }
  options.max_live_spec_bytes = max_spec_mib << 20;
  // Checked before anything starts: a refused --insecure must not wait for Postgres first.
  absl::StatusOr<TlsOptions> tls = TlsOptionsFromFlags(flags);
  if (!tls.ok()) return Fail(tls.status());
  // Clients (people, ringctl) may come without a certificate; workers are checked by the name
  // in theirs (WorkerServiceImpl).
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_credentials =
      MakeServerCredentials(*tls, ClientCertificates::kVerifyIfPresent, "--listen",
                            flags.Get("listen"));
  if (!server_credentials.ok()) return Fail(server_credentials.status());
  // Rank logs are read from the agents with the scheduler's own certificate, which their
  // --log-reader-names must name; agents are reached by IP, so any certificate of the CA is
  // accepted from them (docs/security.md).
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> agent_credentials =
      MakeChannelCredentials(*tls, ServerName::kAnyOfTheCa);
  if (!agent_credentials.ok()) return Fail(agent_credentials.status());
  if (tls->insecure) {
    WarnInsecure("ringmaster-scheduler");
    RM_LOG(kWarning) << "--insecure: worker registrations are NOT checked against certificates";
  }
  // The secrets key before PostgreSQL: a scheduler without it could not read what it stores.
  {
    absl::StatusOr<SecretBox> key = absl::UnknownError("");
    if (!flags.Get("secrets-key-file").empty()) {
      key = LoadSecretsKey(flags.Get("secrets-key-file"));
      if (absl::IsNotFound(key.status())) {
        key = absl::FailedPreconditionError(absl::StrCat(
            flags.Get("secrets-key-file"),
            " does not exist; make one with `openssl rand -hex 32 > FILE` (mode 0600), or leave "
            "the flag out to have one made in the scheduler's state directory"));
      }
    } else {
      const std::string path = DefaultSecretsKeyFile();
      if (path.empty()) {
        return Fail(absl::FailedPreconditionError(
            "--secrets-key-file is not given, and neither $XDG_STATE_HOME nor $HOME says where "
            "to keep the key; give the flag"));
      }
      bool created = false;
      key = LoadOrCreateSecretsKey(path, &created);
      if (key.ok() && created) {
        RM_LOG(kInfo) << "made a new secrets key in " << path
                      << " (mode 0600; back it up: the registry secrets it seals cannot be "
                         "read without it)";
      }
    }
    if (!key.ok()) {
      return Fail(absl::Status(key.status().code(),
                               absl::StrCat("--secrets-key-file: ", key.status().message())));
    }
    RM_LOG(kInfo) << "secrets key id " << key->key_id();
    options.secrets = std::make_shared<const SecretBox>(*std::move(key));
  }
  if (const std::string path = flags.Get("previous-secrets-key-file"); !path.empty()) {
    absl::StatusOr<SecretBox> previous = LoadSecretsKey(path);
    if (absl::IsNotFound(previous.status())) {
      previous = absl::FailedPreconditionError(absl::StrCat(
          path,
          " does not exist; give the key that --secrets-key-file replaces, or leave the "
          "flag out"));
    }
    if (!previous.ok()) {
      return Fail(
          absl::Status(previous.status().code(),
                       absl::StrCat("--previous-secrets-key-file: ", previous.status().message())));
    }
    if (previous->key_id() == options.secrets->key_id()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "--previous-secrets-key-file holds the same key as --secrets-key-file (key id ",
          previous->key_id(), "); give the old key, or leave the flag out")));
    }
    RM_LOG(kInfo) << "previous secrets key id " << previous->key_id()
                  << ": registry secrets it sealed are resealed with key id "
                  << options.secrets->key_id() << " when this scheduler leads";
    options.previous_secrets = std::make_shared<const SecretBox>(*std::move(previous));
  }
  PostgresPoolOptions pool_options;
  pool_options.statement_timeout_ms = pg_timeout_ms;
  pool_options.acquire_timeout_ms = pg_timeout_ms;
  pool_options.call_timeout_ms = 2 * pg_timeout_ms;
  std::string redis_host;
  int redis_port = 0;
  if (auto s = SplitHostPort(flags.Get("redis-addr"), "--redis-addr", &redis_host, &redis_port);
      !s.ok()) {
    return Fail(s);
  }

  // Postgres may still be starting (compose, Kubernetes): retry for a while.
  absl::StatusOr<std::unique_ptr<PostgresJobStore>> store =
      absl::UnavailableError("not connected");
  SystemClock clock;
  const int64_t deadline = clock.NowMs() + connect_timeout_s * 1000;
  while (true) {
    store = PostgresJobStore::Connect(flags.Get("postgres-url"), static_cast<int>(pool),
                                      pool_options);
    if (store.ok() || store.status().code() != absl::StatusCode::kUnavailable ||
        clock.NowMs() > deadline) {
      break;
    }
    RM_LOG(kWarning) << "waiting for PostgreSQL: " << store.status();
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (!store.ok()) return Fail(store.status());
  // Tokens and the audit trail: two connections of their own (the schema is migrated above).
  absl::StatusOr<std::unique_ptr<PostgresIdentityStore>> identity =
      PostgresIdentityStore::Connect(flags.Get("postgres-url"), 2, pool_options);
  if (!identity.ok()) return Fail(identity.status());
  if (!flags.Get("admin-token-file").empty()) {
    if (auto s = EnsureBootstrapAdmin(identity->get(), clock, flags.Get("admin-token-file"));
        !s.ok()) {
      return Fail(s);
    }
  }
  Authenticator authenticator(identity->get(), &clock);
  bool no_auth = false;
  if (auto s = flags.GetBool("insecure-no-auth", &no_auth); !s.ok()) return Fail(s);
  if (no_auth) {
    if (!tls->insecure) {
      return Fail(absl::InvalidArgumentError(
          "--insecure-no-auth is allowed only together with --insecure (plaintext on loopback)"));
    }
    RM_LOG(kWarning) << "*** --insecure-no-auth: calls WITHOUT a token are served as an admin";
    authenticator.AllowAnonymous();
  }

  RedisOptions redis_options;
  redis_options.host = redis_host;
  redis_options.port = redis_port;
  redis_options.db = static_cast<int>(redis_db);
  redis_options.key_prefix = flags.Get("redis-prefix");
  // Connects on first use: Redis holds only what can be rebuilt, so the scheduler starts and
  // serves without it.
  auto redis = std::make_shared<RedisConnection>(redis_options);
  RedisPendingQueue queue(redis);
  RedisLiveness liveness(redis);
  RedisLeaderLease lease(redis);
  const std::string holder = LeaseHolder();
  const auto renew_every = std::chrono::milliseconds(lease_ttl_ms / 3);

  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(flags.Get("metrics-listen"));
    exposer->RegisterCollectable(registry);
  } catch (const std::exception& e) {
    return Fail(absl::UnavailableError(
        std::string("cannot serve /metrics on ") + flags.Get("metrics-listen") + ": " + e.what()));
  }

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  // Leader lease, the only thing a standby does:
  //  1. before loading any state, take the lease, retrying every ttl/3 while another replica
  //     holds it (or Redis is down: nobody can take it then);
  //  2. as leader, renew it every ttl/3; a failed renewal (Redis down) is only logged, since no
  //     replica can take the lease without Redis either;
  //  3. a renewal that finds another holder (this process stalled past the ttl) ends the
  //     process at once: two leaders would place the same capacity twice. The lease alone cannot
  //     stop a stalled leader's writes in flight; the Postgres fence does (Scheduler::Start takes
  //     a new epoch, every commit checks it, and a fenced scheduler exits through on_fenced);
  //  4. on SIGTERM release it, so a standby takes over without waiting for the ttl.
  bool standby_logged = false;
  while (!g_stop) {
    absl::StatusOr<bool> held = lease.Hold(holder, lease_ttl_ms);
    if (held.ok() && *held) break;
    if (!standby_logged) {
      RM_LOG(kInfo) << "standby: waiting for the leader lease ("
                    << (held.ok() ? "another scheduler holds it" : held.status().ToString())
                    << ")";
      standby_logged = true;
    }
    std::this_thread::sleep_for(renew_every);
  }
  if (g_stop) return 0;
  RM_LOG(kInfo) << "holding the leader lease as " << holder;

  // A newer leader fenced us off in Postgres: whatever this process still holds is stale.
  options.on_fenced = [](const absl::Status& s) {
    RM_LOG(kError) << "exiting: " << s;
    StopAsyncLog();  // _exit runs no atexit handler
    _exit(3);
  };
  Scheduler scheduler(store->get(), &queue, &liveness, &clock, options, registry.get());
  if (auto s = scheduler.Start(); !s.ok()) return Fail(s);

  GrpcAgentLogReader agent_logs(*agent_credentials);
  LogRelay log_relay(&agent_logs, static_cast<int>(max_log_relays));
  JobServiceImpl job_service(&scheduler, &authenticator, &log_relay);
  ClusterServiceImpl cluster_service(&scheduler, &authenticator);
  WorkerServiceImpl worker_service(&scheduler, /*verify_identity=*/!tls->insecure);
  QueueServiceImpl queue_service(&scheduler, &authenticator);
  VolumeServiceImpl volume_service(&scheduler, &authenticator);
  RegistryServiceImpl registry_service(&scheduler, &authenticator);
  AdminServiceImpl admin_service(&authenticator);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(flags.Get("listen"), *server_credentials, &bound_port);
  // gRPC's sync server ends a thread that finishes a call while MAX_POLLERS others wait for
  // calls (default 2), and starts one whenever none waits. SubmitJob (then on the sync API)
  // held its thread until the job was stored, so in a burst of submits nearly every call cost a
  // thread start and exit: about 30% of the scheduler's CPU in bench/submit_bench.sh. SubmitJob
  // is on the callback API now, but CancelJob still waits for its write and bursts of other
  // calls still come: up to this many idle threads are kept.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 64);
  // Without a bound gRPC starts a thread for every call that finds none idle: a flood of calls
  // while Postgres hangs (each waits up to --postgres-timeout-ms) would start thousands.
  grpc::ResourceQuota quota("ringmaster-scheduler");
  quota.SetMaxThreads(static_cast<int>(max_rpc_threads));
  builder.SetResourceQuota(quota);
  builder.RegisterService(&job_service);
  builder.RegisterService(&cluster_service);
  builder.RegisterService(&worker_service);
  builder.RegisterService(&queue_service);
  builder.RegisterService(&volume_service);
  builder.RegisterService(&registry_service);
  builder.RegisterService(&admin_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    return Fail(absl::UnavailableError("cannot listen on " + flags.Get("listen")));
  }
  RM_LOG(kInfo) << "ringmaster-scheduler serving gRPC"
                << (tls->insecure ? " in PLAINTEXT" : " over TLS") << " on " << flags.Get("listen")
                << ", /metrics on " << flags.Get("metrics-listen") << "; allocator "
                << Allocator();

  auto next_renewal = std::chrono::steady_clock::now() + renew_every;
  while (!g_stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (std::chrono::steady_clock::now() < next_renewal) continue;
    next_renewal = std::chrono::steady_clock::now() + renew_every;
    absl::StatusOr<bool> held = lease.Hold(holder, lease_ttl_ms);
    if (!held.ok()) {
      RM_LOG(kWarning) << "leader lease not renewed: " << held.status();
    } else if (!*held) {
      // At once, not after a graceful stop: every moment more is two leaders.
      RM_LOG(kError) << "another scheduler took the leader lease; exiting";
      StopAsyncLog();
      _exit(3);
    }
  }
  RM_LOG(kInfo) << "shutting down";
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  scheduler.Stop();
  if (auto s = lease.Release(holder); !s.ok()) RM_LOG(kWarning) << "leader lease: " << s;
  return 0;
}
