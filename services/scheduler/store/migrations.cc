#include "scheduler/store/migrations.h"

#include <set>

#include "common/log.h"
#include "common/status_macros.h"

namespace ringmaster::scheduler {
namespace {

// pg_advisory_xact_lock key shared by every scheduler that migrates this database
// ("rmmigrat" in ASCII).
constexpr const char* kMigrationLockSql = "SELECT pg_advisory_xact_lock(7885074168419721588)";

// APPEND-ONLY. A migration that has shipped is never edited, renumbered or removed: databases
// that applied it would not run it again, and would silently differ from new ones. To change the
// schema, add a migration with the next version at the end.
const std::vector<Migration> kMigrations = {
    {1, "jobs, job events, placements, workers", R"sql(
CREATE TABLE jobs (
  id              text PRIMARY KEY,
  seq             bigserial NOT NULL UNIQUE,  -- submit order; breaks priority ties
  request_id      text UNIQUE,                -- NULL when the client gave none
  name            text NOT NULL,
  queue           text NOT NULL,
  priority        integer NOT NULL,
  spec            jsonb NOT NULL,             -- ringmaster.v1.JobSpec as protobuf JSON
  state           text NOT NULL CHECK (state IN
                    ('PENDING', 'STARTING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
  attempt         integer NOT NULL DEFAULT 0,
  pending_reason  text NOT NULL DEFAULT '',
  token           text NOT NULL DEFAULT '',
  last_event_seq  bigint NOT NULL DEFAULT 0,
  created_at_ms   bigint NOT NULL,
  updated_at_ms   bigint NOT NULL,
  started_at_ms   bigint NOT NULL DEFAULT 0,
  finished_at_ms  bigint NOT NULL DEFAULT 0,
  exit_code       integer NOT NULL DEFAULT 0,
  message         text NOT NULL DEFAULT ''
);
-- ListJobs: newest first, optionally by state and/or queue (the seq index serves "all").
CREATE INDEX jobs_state_seq ON jobs (state, seq DESC);
CREATE INDEX jobs_queue_seq ON jobs (queue, seq DESC);
CREATE INDEX jobs_queue_state_seq ON jobs (queue, state, seq DESC);
-- ListActiveJobs at start-up: the few unfinished jobs among many finished ones.
CREATE INDEX jobs_active_seq ON jobs (seq) WHERE state IN ('PENDING', 'STARTING', 'RUNNING');

CREATE TABLE job_events (
  job_id     text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  seq        bigint NOT NULL,
  state      text NOT NULL CHECK (state IN
               ('PENDING', 'STARTING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
  attempt    integer NOT NULL,
  reason     text NOT NULL,
  exit_code  integer NOT NULL,
  time_ms    bigint NOT NULL,
  PRIMARY KEY (job_id, seq)
);

CREATE TABLE workers (
  id                 text PRIMARY KEY,
  address            text NOT NULL,
  port               integer NOT NULL,
  gpus               jsonb NOT NULL DEFAULT '[]',  -- [{index, type, memory_bytes, simulated}]
  cpu_slots          integer NOT NULL,
  state              text NOT NULL CHECK (state IN ('READY', 'LOST')),
  registered_at_ms   bigint NOT NULL,
  last_heartbeat_ms  bigint NOT NULL
);

CREATE TABLE placements (
  job_id          text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  rank            integer NOT NULL,
  worker_id       text NOT NULL,
  worker_address  text NOT NULL,
  gpu_indices     integer[] NOT NULL DEFAULT '{}',
  PRIMARY KEY (job_id, rank)
);
-- Which jobs hold ranks on a worker (a lost worker fails them).
CREATE INDEX placements_worker ON placements (worker_id);
)sql"},
    {2, "placements.worker_port (ringmaster-rsh reaches each worker's agent)", R"sql(
ALTER TABLE placements ADD COLUMN worker_port integer NOT NULL DEFAULT 0;
)sql"},
    {3, "leader_fence: the leader epoch that every scheduler write is checked against", R"sql(
CREATE TABLE leader_fence (
  id        integer PRIMARY KEY CHECK (id = 1),  -- one row
  epoch     bigint NOT NULL,                     -- the newest leader's; writes of older ones fail
  taken_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO leader_fence (id, epoch) VALUES (1, 0);
)sql"},
    {4, "queues and their quotas; the queue default exists from the first start", R"sql(
CREATE TABLE queues (
  name                   text PRIMARY KEY,
  cohort                 text NOT NULL DEFAULT '',  -- '' when the queue is in no cohort
  weight                 integer NOT NULL DEFAULT 1 CHECK (weight > 0),
  within_queue           text NOT NULL DEFAULT 'Never' CHECK (within_queue IN
                           ('Never', 'LowerPriority', 'LowerOrNewerEqualPriority')),
  reclaim_within_cohort  text NOT NULL DEFAULT 'Never' CHECK (reclaim_within_cohort IN
                           ('Never', 'LowerPriority', 'Any')),
  min_runtime_seconds    bigint NOT NULL DEFAULT 0 CHECK (min_runtime_seconds >= 0),
  created_at_ms          bigint NOT NULL,
  updated_at_ms          bigint NOT NULL
);

-- One row per resource of a queue (a GPU type, or 'cpu'); a queue without rows has no quota
-- limits. NULL limits are unset (borrow as far as the cohort lends; lend all unused nominal).
CREATE TABLE queue_quotas (
  queue            text NOT NULL REFERENCES queues (name) ON DELETE CASCADE,
  resource         text NOT NULL,
  nominal          bigint NOT NULL CHECK (nominal >= 0),
  borrowing_limit  bigint CHECK (borrowing_limit >= 0),
  lending_limit    bigint CHECK (lending_limit >= 0),
  PRIMARY KEY (queue, resource)
);

INSERT INTO queues (name, created_at_ms, updated_at_ms)
  VALUES ('default', (extract(epoch FROM now()) * 1000)::bigint,
          (extract(epoch FROM now()) * 1000)::bigint);
)sql"},
    {5, "jobs.preemptions: attempts ended by preemption, which backoff_limit does not count",
     R"sql(
ALTER TABLE jobs ADD COLUMN preemptions integer NOT NULL DEFAULT 0;
)sql"},
    {6, "queue_usage: resource-milliseconds each queue's ended attempts used (accounting)",
     R"sql(
-- Added to in the transaction that stores an attempt's end, so it survives restarts and counts
-- no attempt twice. No foreign key: a job of a queue that is not stored (older data) must not
-- make its batch fail. Deleting a queue deletes its rows.
CREATE TABLE queue_usage (
  queue     text NOT NULL,
  resource  text NOT NULL,  -- a GPU type, or 'cpu' (CPU slots)
  used_ms   bigint NOT NULL CHECK (used_ms >= 0),
  PRIMARY KEY (queue, resource)
);
)sql"},
    {7, "identity: api tokens (hashed), audit trail, the team of a job, the teams of a queue",
     R"sql(
-- A bearer token is "rmt_<id>_<secret>"; only SHA-256(secret) is stored (docs/security.md).
CREATE TABLE api_tokens (
  id             text PRIMARY KEY,
  secret_sha256  bytea NOT NULL CHECK (length(secret_sha256) = 32),
  team           text NOT NULL,
  role           text NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
  description    text NOT NULL DEFAULT '',
  created_by     text NOT NULL DEFAULT '',
  created_at_ms  bigint NOT NULL,
  expires_at_ms  bigint NOT NULL DEFAULT 0,  -- 0: never
  revoked        boolean NOT NULL DEFAULT false,
  revoked_at_ms  bigint NOT NULL DEFAULT 0
);

CREATE TABLE audit_log (
  seq        bigserial PRIMARY KEY,
  at_ms      bigint NOT NULL,
  principal  text NOT NULL,   -- token id, or "bootstrap"
  team       text NOT NULL,
  role       text NOT NULL,
  peer       text NOT NULL,   -- gRPC peer address
  action     text NOT NULL,   -- e.g. SubmitJob, RevokeToken
  resource   text NOT NULL,   -- job id, queue name, token id
  detail     text NOT NULL DEFAULT ''
);

-- The submitter's team; '' for jobs submitted before tokens (visible to admins only).
ALTER TABLE jobs ADD COLUMN team text NOT NULL DEFAULT '';
-- Teams allowed to submit to a queue; empty: every team.
ALTER TABLE queues ADD COLUMN teams text[] NOT NULL DEFAULT '{}';
)sql"},
    {8, "pre-run allreduce check: baselines per gang shape, unhealthy workers", R"sql(
-- Learned bus bandwidth of passing pre-run checks, per shape "WORKERSxRANKS/TRANSPORT".
CREATE TABLE check_baselines (
  shape          text PRIMARY KEY,
  busbw_gbps     double precision NOT NULL CHECK (busbw_gbps >= 0),
  samples        bigint NOT NULL CHECK (samples >= 1),
  updated_at_ms  bigint NOT NULL
);
-- Why a failed check took the worker out of placement; '' when healthy.
ALTER TABLE workers ADD COLUMN unhealthy_reason text NOT NULL DEFAULT '';
)sql"},
    {9, "queues: progress_timeout_seconds (NULL: the default) and idle_timeout_seconds", R"sql(
ALTER TABLE queues
  ADD COLUMN progress_timeout_seconds bigint CHECK (progress_timeout_seconds >= 0),
  ADD COLUMN idle_timeout_seconds bigint NOT NULL DEFAULT 0 CHECK (idle_timeout_seconds >= 0);
)sql"},
    {10, "jobs: the last checkpoint rank 0 reported (step, Unix ms); 0 when none", R"sql(
ALTER TABLE jobs
  ADD COLUMN last_checkpoint_step bigint NOT NULL DEFAULT 0 CHECK (last_checkpoint_step >= 0),
  ADD COLUMN last_checkpoint_time_ms bigint NOT NULL DEFAULT 0;
)sql"},
    {11, "jobs.placement: a gang's ranks in the job's row, not a row per rank", R"sql(
-- [{rank, worker_id, worker_address, worker_port, gpus}] by rank; [] while nothing is placed.
-- A row per rank cost Postgres most of its time while placing (a 22-rank gang: 22 inserts and
-- later 22 deletes, each with its index entries). json, not jsonb: written whole by the
-- scheduler, read whole, never searched, and json only checks the text. The placements table
-- stays, read where a job's placement is [] and emptied as placements change: it holds what
-- schedulers before this version wrote, including an old leader's during a rolling upgrade.
ALTER TABLE jobs ADD COLUMN placement json NOT NULL DEFAULT '[]';
)sql"},
    {12, "environments: the pinned image digest of a job, and volumes granted to teams", R"sql(
-- The digest the job's image resolved to at its first launch ('' until then, and for jobs
-- without an image); every later attempt runs it.
ALTER TABLE jobs ADD COLUMN image_digest text NOT NULL DEFAULT '';

-- Host paths that admins name and grant to teams, for jobs to mount (docs/environments.md).
-- grant_teams[i] may mount it, read-only where grant_read_only[i]; by team.
CREATE TABLE volumes (
  name             text PRIMARY KEY,
  host_path        text NOT NULL,
  grant_teams      text[] NOT NULL DEFAULT '{}',
  grant_read_only  boolean[] NOT NULL DEFAULT '{}'
                     CHECK (cardinality(grant_read_only) = cardinality(grant_teams)),
  description      text NOT NULL DEFAULT '',
  created_at_ms    bigint NOT NULL,
  updated_at_ms    bigint NOT NULL
);
)sql"},
    {13, "job arrays: the array and index of a task, derived from its id", R"sql(
-- A task of an array has the id "<array id>-<index>" (core/array.h); other jobs have NULL here.
-- Derived by Postgres, so no writer can store a task under the wrong array.
ALTER TABLE jobs ADD COLUMN array_id text
  GENERATED ALWAYS AS (substring(id from '^(j-[0-9a-f]+)-[0-9]+$')) STORED;
ALTER TABLE jobs ADD COLUMN array_index integer
  GENERATED ALWAYS AS (substring(id from '^j-[0-9a-f]+-([0-9]+)$')::integer) STORED;
-- ListJobs of one array's tasks, and TallyArray.
CREATE INDEX jobs_array_seq ON jobs (array_id, seq DESC) WHERE array_id IS NOT NULL;
-- ListJobs without an array: arrays are one line each, their tasks left out.
CREATE INDEX jobs_untasked_seq ON jobs (seq DESC) WHERE array_id IS NULL;
)sql"},
    {14, "registry credentials of teams, for pulling their jobs' images", R"sql(
-- One per team and registry (HOST[:PORT], lower-case). The secret (password or token) is sent
-- only to the worker that pulls a job's image, and never returned by an API
-- (docs/environments.md, "Private registries").
CREATE TABLE registry_credentials (
  team           text NOT NULL,
  registry       text NOT NULL,
  username       text NOT NULL,
  secret         text NOT NULL,
  updated_at_ms  bigint NOT NULL,
  PRIMARY KEY (team, registry)
);
)sql"},
    {15, "registry credentials: secrets sealed with AES-256-GCM", R"sql(
-- The secret is sealed by the scheduler (libs/common/secret_box.h: a versioned blob of key id,
-- nonce, ciphertext and tag, bound to the team and registry). A row of migration 14 keeps its
-- secret in plaintext_secret until the next scheduler start seals it (Scheduler::Start); no
-- row has both.
ALTER TABLE registry_credentials RENAME COLUMN secret TO plaintext_secret;
ALTER TABLE registry_credentials ALTER COLUMN plaintext_secret DROP NOT NULL;
ALTER TABLE registry_credentials ADD COLUMN sealed_secret bytea;
ALTER TABLE registry_credentials ADD CONSTRAINT registry_credentials_one_secret
  CHECK ((plaintext_secret IS NULL) <> (sealed_secret IS NULL));
)sql"},
    {16, "queues: elastic_idle_delay_seconds (NULL: the scheduler's --elastic-idle-delay-ms)",
     R"sql(
ALTER TABLE queues ADD COLUMN elastic_idle_delay_seconds bigint
  CHECK (elastic_idle_delay_seconds BETWEEN 1 AND 86400);
)sql"},
    {17, "jobs: last_replicas, the size an elastic job last ran at (0: none)", R"sql(
ALTER TABLE jobs ADD COLUMN last_replicas integer NOT NULL DEFAULT 0 CHECK (last_replicas >= 0);
)sql"},
};

// Strictly increasing from 1. Parallel branches reserve version numbers, so a gap may exist
// until they are merged and renumbered.
bool MigrationsAreOrdered() {
  int previous = 0;
  for (const Migration& migration : kMigrations) {
    if (migration.version <= previous) return false;
    previous = migration.version;
  }
  return !kMigrations.empty() && kMigrations.front().version == 1;
}

}  // namespace

const std::vector<Migration>& Migrations() { return kMigrations; }

int ApplyMigrations(pqxx::connection& conn) {
  RM_CHECK(MigrationsAreOrdered());
  std::set<int> applied;
  {
    pqxx::work tx(conn);
    tx.exec(kMigrationLockSql);
    tx.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "  version integer PRIMARY KEY,"
        "  applied_at timestamptz NOT NULL DEFAULT now())");
    for (const auto& row : tx.exec("SELECT version FROM schema_migrations")) {
      applied.insert(row[0].as<int>());
    }
    tx.commit();
  }
  if (!applied.empty() && *applied.rbegin() > kMigrations.back().version) {
    RM_LOG(kWarning) << "database schema is at version " << *applied.rbegin()
                     << ", newer than this binary's " << kMigrations.back().version;
  }
  int count = 0;
  for (const auto& migration : kMigrations) {
    if (applied.contains(migration.version)) continue;
    pqxx::work tx(conn);
    tx.exec(kMigrationLockSql);
    // Another starter may have applied it while we waited for the lock.
    if (!tx.exec_params("SELECT 1 FROM schema_migrations WHERE version = $1", migration.version)
             .empty()) {
      continue;
    }
    tx.exec(migration.sql);
    tx.exec_params("INSERT INTO schema_migrations (version) VALUES ($1)", migration.version);
    tx.commit();
    ++count;
    RM_LOG(kInfo) << "applied schema migration " << migration.version << " (" << migration.name
                  << ")";
  }
  return count;
}

}  // namespace ringmaster::scheduler
