#include "scheduler/store/postgres_job_store.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "scheduler/convert/convert.h"
#include "scheduler/core/queue_names.h"
#include "scheduler/store/migrations.h"
#include "scheduler/store/store_checks.h"

namespace ringmaster::scheduler {
namespace {

using store_internal::CheckJobAndEvent;
using store_internal::SortedPlacement;

// Reads see one snapshot across their statements (a job and its placement agree).
using ReadTransaction = pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>;

constexpr int kDefaultListLimit = 100;

#define RM_JOB_COLUMNS                                                                    \
  "id, seq, coalesce(request_id, '') AS request_id, spec::text AS spec, state, attempt, " \
  "pending_reason, token, last_event_seq, created_at_ms, updated_at_ms, started_at_ms, "  \
  "finished_at_ms, exit_code, message, preemptions, team, last_checkpoint_step, "         \
  "last_checkpoint_time_ms, image_digest, last_replicas"

#define RM_QUEUE_SELECT                                                               \
  "SELECT q.name, q.cohort, q.weight, q.within_queue, q.reclaim_within_cohort, "      \
  "q.min_runtime_seconds, q.created_at_ms, q.updated_at_ms, r.resource, r.nominal, "  \
  "r.borrowing_limit, r.lending_limit, array_to_string(q.teams, ','), "               \
  "q.progress_timeout_seconds, q.idle_timeout_seconds, q.elastic_idle_delay_seconds " \
  "FROM queues q LEFT JOIN queue_quotas r ON r.queue = q.name"

#define RM_VOLUME_SELECT                                                                    \
  "SELECT name, host_path, array_to_string(grant_teams, ','), "                             \
  "array_to_string(grant_read_only, ','), description, created_at_ms, updated_at_ms "       \
  "FROM volumes"

// New jobs and their first events in one round trip, whatever their number; rows whose id or
// request id is taken are skipped (the caller finds out which from RETURNING). FENCE_FROM and
// FENCE_WHERE let the fenced variant insert only while this leader's epoch ($21) is current.
#define RM_INSERT_NEW_JOBS_BODY(FENCE_FROM, FENCE_WHERE)                                        \
  "v AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], "                 \
  "$5::integer[], $6::text[], $7::bigint[], $8::text[], $9::bigint[], $10::text[], "            \
  "$11::text[], $12::text[]) "                                                                  \
  "WITH ORDINALITY AS v(id, request_id, name, queue, priority, spec, created_at_ms, reason, "    \
  "time_ms, state, pending_reason, team, ord)), "                                               \
  "ins AS (INSERT INTO jobs (id, request_id, name, queue, priority, spec, state, attempt, "     \
  "pending_reason, token, last_event_seq, created_at_ms, updated_at_ms, started_at_ms, "        \
  "finished_at_ms, exit_code, message, team) "                                                  \
  "SELECT id, NULLIF(request_id, ''), name, queue, priority, spec::jsonb, state, 0, "           \
  "pending_reason, '', 1, "                                                                     \
  "created_at_ms, created_at_ms, 0, 0, 0, '', team FROM v" FENCE_FROM FENCE_WHERE               \
  " ORDER BY ord "                                                                              \
  "ON CONFLICT DO NOTHING RETURNING id, seq), "                                                 \
  "ev AS (INSERT INTO job_events (job_id, seq, state, attempt, reason, exit_code, time_ms) "    \
  "SELECT v.id, 1, v.state, 0, v.reason, 0, v.time_ms FROM v JOIN ins ON ins.id = v.id), "     \
  /* The submits' audit entries (JobWrite::audit), only for the jobs inserted here. */          \
  "au AS (INSERT INTO audit_log (at_ms, principal, team, role, peer, action, resource, "        \
  "detail) SELECT a.at_ms, a.principal, a.team, a.role, a.peer, a.action, a.resource, "         \
  "a.detail FROM unnest($13::bigint[], $14::text[], $15::text[], $16::text[], $17::text[], "    \
  "$18::text[], $19::text[], $20::text[]) AS a(at_ms, principal, team, role, peer, action, "    \
  "resource, detail) JOIN ins ON ins.id = a.resource)"
#define RM_INSERT_NEW_JOBS RM_INSERT_NEW_JOBS_BODY("", "")
#define RM_INSERT_NEW_JOBS_FENCED \
  RM_INSERT_NEW_JOBS_BODY(" CROSS JOIN fence", " WHERE fence.epoch = $21::bigint")

// Statements on hot paths, prepared on every connection of the pool.
const std::vector<std::pair<const char*, const char*>> kStatements = {
    {"insert_job",
     "INSERT INTO jobs (id, request_id, name, queue, priority, spec, state, attempt, "
     "pending_reason, token, last_event_seq, created_at_ms, updated_at_ms, started_at_ms, "
     "finished_at_ms, exit_code, message, team) "
     "VALUES ($1, NULLIF($2, ''), $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14, "
     "$15, $16, $17, $18) "
     "ON CONFLICT (request_id) DO NOTHING RETURNING seq"},
    {"select_job_by_request", "SELECT " RM_JOB_COLUMNS " FROM jobs WHERE request_id = $1"},
    {"select_job", "SELECT " RM_JOB_COLUMNS " FROM jobs WHERE id = $1"},
    {"select_active_jobs",
     "SELECT " RM_JOB_COLUMNS " FROM jobs WHERE state IN ('PENDING', 'STARTING', 'RUNNING') "
     "ORDER BY seq"},
    {"lock_job", "SELECT state FROM jobs WHERE id = $1 FOR UPDATE"},
    {"update_job",
     "UPDATE jobs SET state = $2, attempt = $3, pending_reason = $4, token = $5, "
     "last_event_seq = $6, updated_at_ms = $7, started_at_ms = $8, finished_at_ms = $9, "
     "exit_code = $10, message = $11, preemptions = $12, last_replicas = $13 WHERE id = $1"},
    // A job's placement is jobs.placement, or where that is [], its rows in the placements
    // table (written before migration 11, see there).
    {"select_placements",
     "SELECT j.id, p.rank, p.worker_id, p.worker_address, array_to_string(p.gpus, ','), "
     "p.worker_port FROM jobs j CROSS JOIN LATERAL json_to_recordset(j.placement) "
     "AS p(rank integer, worker_id text, worker_address text, worker_port integer, "
     "gpus integer[]) WHERE j.id = ANY($1::text[]) "
     "UNION ALL "
     "SELECT l.job_id, l.rank, l.worker_id, l.worker_address, "
     "array_to_string(l.gpu_indices, ','), l.worker_port FROM placements l "
     "JOIN jobs j ON j.id = l.job_id "
     "WHERE l.job_id = ANY($1::text[]) AND json_array_length(j.placement) = 0 ORDER BY 1, 2"},
    {"set_placement", "UPDATE jobs SET placement = $2::json WHERE id = $1"},
    {"delete_placements", "DELETE FROM placements WHERE job_id = $1"},
    {"insert_event",
     "INSERT INTO job_events (job_id, seq, state, attempt, reason, exit_code, time_ms) "
     "VALUES ($1, $2, $3, $4, $5, $6, $7)"},
    {"job_exists", "SELECT 1 FROM jobs WHERE id = $1"},
    // Batch commits: one statement per kind of row, whatever the batch's size. FOR SHARE keeps
    // a new leader's epoch update waiting until this transaction ends.
    {"check_fence", "SELECT epoch FROM leader_fence WHERE id = 1 FOR SHARE"},
    {"take_fence",
     "UPDATE leader_fence SET epoch = epoch + 1, taken_at = now() WHERE id = 1 "
     "RETURNING epoch"},
    // An array's tasks (core/array.h), by the columns Postgres derives from their ids.
    {"tally_array",
     "SELECT state, count(*)::integer, max(array_index) FROM jobs WHERE array_id = $1 "
     "GROUP BY state"},
    {"failed_array_tasks",
     "SELECT array_index FROM jobs WHERE array_id = $1 AND state = 'FAILED' "
     "ORDER BY array_index LIMIT $2::integer"},
    {"insert_new_jobs", "WITH " RM_INSERT_NEW_JOBS " SELECT id, seq FROM ins"},
    // The same as one statement of its own (no BEGIN, no COMMIT of its own round trip) for a
    // batch of new jobs only: the fence is checked in it, and its last row is the epoch found
    // (id NULL). A stale leader's statement inserts nothing.
    {"insert_new_jobs_fenced",
     "WITH fence AS MATERIALIZED (SELECT epoch FROM leader_fence WHERE id = 1 FOR "
     "SHARE), " RM_INSERT_NEW_JOBS_FENCED
     " SELECT id, seq FROM ins UNION ALL SELECT NULL, epoch FROM fence"},
    {"select_jobs_by_request_or_id",
     "SELECT " RM_JOB_COLUMNS " FROM jobs WHERE request_id = ANY($1::text[]) "
     "OR id = ANY($2::text[])"},
    {"lock_jobs", "SELECT id, state FROM jobs WHERE id = ANY($1::text[]) FOR UPDATE"},
    // $14: the new placement of each job whose placement changed (PlacementJson), '' where it
    // did not.
    {"update_jobs",
     "UPDATE jobs SET state = v.state, attempt = v.attempt, pending_reason = v.pending_reason, "
     "token = v.token, last_event_seq = v.last_event_seq, updated_at_ms = v.updated_at_ms, "
     "started_at_ms = v.started_at_ms, finished_at_ms = v.finished_at_ms, "
     "exit_code = v.exit_code, message = v.message, preemptions = v.preemptions, "
     "last_replicas = v.last_replicas, "
     "placement = CASE WHEN v.placement = '' THEN jobs.placement ELSE v.placement::json END "
     "FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[], $5::text[], $6::bigint[], "
     "$7::bigint[], $8::bigint[], $9::bigint[], $10::integer[], $11::text[], $12::integer[], "
     "$13::integer[], $14::text[]) AS v(id, state, attempt, pending_reason, token, "
     "last_event_seq, updated_at_ms, started_at_ms, finished_at_ms, exit_code, message, "
     "preemptions, last_replicas, placement) "
     "WHERE jobs.id = v.id"},
    {"delete_placements_of", "DELETE FROM placements WHERE job_id = ANY($1::text[])"},
    // A newer checkpoint only: reports of a preempted attempt may arrive after later ones.
    {"update_checkpoints",
     "UPDATE jobs SET last_checkpoint_step = v.step, last_checkpoint_time_ms = v.time_ms "
     "FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS v(id, step, time_ms) "
     "WHERE jobs.id = v.id AND v.time_ms >= jobs.last_checkpoint_time_ms"},
    // The first digest only: every attempt after it runs the bytes it named.
    {"update_image_digests",
     "UPDATE jobs SET image_digest = v.digest "
     "FROM unnest($1::text[], $2::text[]) AS v(id, digest) "
     "WHERE jobs.id = v.id AND jobs.image_digest = ''"},
    {"insert_events",
     "INSERT INTO job_events (job_id, seq, state, attempt, reason, exit_code, time_ms) "
     "SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::integer[], $5::text[], "
     "$6::integer[], $7::bigint[])"},
    {"select_events",
     "SELECT seq, state, attempt, reason, exit_code, time_ms FROM job_events "
     "WHERE job_id = $1 AND seq > $2 ORDER BY seq"},
    // A retried batch's events, and which of its jobs have ended (StoredBefore).
    {"select_batch_events",
     "SELECT e.job_id, e.seq, e.state, e.attempt, e.reason, e.exit_code, e.time_ms "
     "FROM job_events e JOIN unnest($1::text[], $2::bigint[]) AS k(job_id, seq) "
     "ON e.job_id = k.job_id AND e.seq = k.seq"},
    {"select_ended_of",
     "SELECT id FROM jobs WHERE id = ANY($1::text[]) "
     "AND state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')"},
    {"upsert_worker",
     "INSERT INTO workers (id, address, port, gpus, cpu_slots, state, registered_at_ms, "
     "last_heartbeat_ms, unhealthy_reason) VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9) "
     "ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address, port = EXCLUDED.port, "
     "gpus = EXCLUDED.gpus, cpu_slots = EXCLUDED.cpu_slots, state = EXCLUDED.state, "
     "registered_at_ms = EXCLUDED.registered_at_ms, "
     "last_heartbeat_ms = EXCLUDED.last_heartbeat_ms, "
     "unhealthy_reason = EXCLUDED.unhealthy_reason"},
    {"select_check_baselines",
     "SELECT shape, busbw_gbps, samples, updated_at_ms FROM check_baselines ORDER BY shape"},
    {"upsert_check_baseline",
     "INSERT INTO check_baselines (shape, busbw_gbps, samples, updated_at_ms) "
     "VALUES ($1, $2, $3, $4) ON CONFLICT (shape) DO UPDATE SET busbw_gbps = EXCLUDED.busbw_gbps, "
     "samples = EXCLUDED.samples, updated_at_ms = EXCLUDED.updated_at_ms"},
    // Queues: one row per quota (or one with NULL quota columns for a queue without any).
    {"select_queues", RM_QUEUE_SELECT " ORDER BY q.name, r.resource"},
    {"select_queue", RM_QUEUE_SELECT " WHERE q.name = $1 ORDER BY r.resource"},
    {"insert_queue",
     "INSERT INTO queues (name, cohort, weight, within_queue, reclaim_within_cohort, "
     "min_runtime_seconds, created_at_ms, updated_at_ms, teams, progress_timeout_seconds, "
     "idle_timeout_seconds, elastic_idle_delay_seconds) "
     "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::text[], NULLIF($10::bigint, -1), $11, "
     "NULLIF($12::bigint, -1))"},
    {"update_queue",
     "UPDATE queues SET cohort = $2, weight = $3, within_queue = $4, reclaim_within_cohort = $5, "
     "min_runtime_seconds = $6, updated_at_ms = $7, teams = $8::text[], progress_timeout_seconds = "
     "NULLIF($9::bigint, -1), idle_timeout_seconds = $10, elastic_idle_delay_seconds = "
     "NULLIF($11::bigint, -1) WHERE name = $1 RETURNING created_at_ms"},
    {"lock_queue", "SELECT 1 FROM queues WHERE name = $1 FOR UPDATE"},
    {"count_live_jobs_of_queue",
     "SELECT count(*) FROM jobs WHERE queue = $1 AND state IN ('PENDING', 'STARTING', 'RUNNING')"},
    {"delete_queue", "DELETE FROM queues WHERE name = $1"},
    {"delete_queue_usage", "DELETE FROM queue_usage WHERE queue = $1"},
    {"add_queue_usage",
     "INSERT INTO queue_usage (queue, resource, used_ms) "
     "SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) "
     "ON CONFLICT (queue, resource) DO UPDATE SET used_ms = queue_usage.used_ms + "
     "EXCLUDED.used_ms"},
    {"select_queue_usage",
     "SELECT queue, resource, used_ms FROM queue_usage ORDER BY queue, resource"},
    {"delete_queue_quotas", "DELETE FROM queue_quotas WHERE queue = $1"},
    {"insert_queue_quotas",
     "INSERT INTO queue_quotas (queue, resource, nominal, borrowing_limit, lending_limit) "
     "SELECT $1, v.resource, v.nominal, v.borrowing_limit, v.lending_limit "
     "FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) "
     "AS v(resource, nominal, borrowing_limit, lending_limit)"},
    // Volumes; grants as "team,team" and "t,f" (team names have no commas).
    {"select_volumes", RM_VOLUME_SELECT " ORDER BY name"},
    {"select_volume", RM_VOLUME_SELECT " WHERE name = $1"},
    {"insert_volume",
     "INSERT INTO volumes (name, host_path, grant_teams, grant_read_only, description, "
     "created_at_ms, updated_at_ms) VALUES ($1, $2, $3::text[], $4::boolean[], $5, $6, $7) "
     "ON CONFLICT (name) DO NOTHING"},
    {"update_volume",
     "UPDATE volumes SET host_path = $2, grant_teams = $3::text[], "
     "grant_read_only = $4::boolean[], description = $5, updated_at_ms = $6 "
     "WHERE name = $1 RETURNING created_at_ms"},
    {"lock_volume", "SELECT 1 FROM volumes WHERE name = $1 FOR UPDATE"},
    {"live_job_mounting",
     "SELECT id, state FROM jobs WHERE state IN ('PENDING', 'STARTING', 'RUNNING') "
     "AND spec->'mounts' @> jsonb_build_array(jsonb_build_object('volume', $1::text)) "
     "ORDER BY seq LIMIT 1"},
    {"delete_volume", "DELETE FROM volumes WHERE name = $1"},
    // Registry credentials: the sealed secret is read only to load the scheduler's memory. An
    // empty secret of either kind is stored as NULL (migration 15: exactly one is set).
    {"upsert_registry_credential",
     "INSERT INTO registry_credentials (team, registry, username, plaintext_secret, "
     "sealed_secret, updated_at_ms) VALUES ($1, $2, $3, NULLIF($4, ''), "
     "NULLIF($5::bytea, ''::bytea), $6) ON CONFLICT (team, registry) DO UPDATE SET "
     "username = EXCLUDED.username, plaintext_secret = EXCLUDED.plaintext_secret, "
     "sealed_secret = EXCLUDED.sealed_secret, updated_at_ms = EXCLUDED.updated_at_ms"},
    {"select_registry_credentials",
     "SELECT team, registry, username, plaintext_secret, sealed_secret, updated_at_ms "
     "FROM registry_credentials ORDER BY team, registry"},
    {"delete_registry_credential",
     "DELETE FROM registry_credentials WHERE team = $1 AND registry = $2"},
    // One row per GPU (or one with NULL GPU columns for a worker without any), in stored order.
    {"select_workers",
     "SELECT w.id, w.address, w.port, w.cpu_slots, w.state, w.registered_at_ms, "
     "w.last_heartbeat_ms, w.unhealthy_reason, g.ord, (g.gpu->>'index')::integer, g.gpu->>'type', "
     "(g.gpu->>'memory_bytes')::bigint, (g.gpu->>'simulated')::boolean "
     "FROM workers w LEFT JOIN LATERAL jsonb_array_elements(w.gpus) WITH ORDINALITY "
     "AS g(gpu, ord) ON true ORDER BY w.id, g.ord"},
};

void PrepareStatements(pqxx::connection& conn) {
  for (const auto& [name, sql] : kStatements) conn.prepare(name, sql);
}

// A Postgres array literal: {"a","b"} with quotes and backslashes escaped.
std::string TextArrayLiteral(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

// A JSON string literal.
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrCat("\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string GpusJson(const std::vector<Gpu>& gpus) {
  std::vector<std::string> items;
  items.reserve(gpus.size());
  for (const auto& gpu : gpus) {
    items.push_back(absl::StrCat("{\"index\":", gpu.index, ",\"type\":", JsonString(gpu.type),
                                 ",\"memory_bytes\":", gpu.memory_bytes,
                                 ",\"simulated\":", gpu.simulated ? "true" : "false", "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

absl::StatusOr<JobState> StateFromColumn(const pqxx::field& field, const std::string& what) {
  auto name = field.as<std::string>();
  auto state = ParseJobState(name);
  if (!state.has_value()) {
    return absl::DataLossError(absl::StrCat(what, " has unknown state '", name, "'"));
  }
  return *state;
}

absl::StatusOr<Job> JobFromRow(const pqxx::row& row) {
  Job job;
  job.id = row["id"].as<std::string>();
  job.seq = row["seq"].as<int64_t>();
  job.request_id = row["request_id"].as<std::string>();
  auto spec = SpecFromJson(row["spec"].as<std::string>());
  if (!spec.ok()) {
    return absl::DataLossError(absl::StrCat("job ", job.id, ": ", spec.status().message()));
  }
  job.spec = std::move(*spec);
  RM_ASSIGN_OR_RETURN(job.state, StateFromColumn(row["state"], absl::StrCat("job ", job.id)));
  job.attempt = row["attempt"].as<int32_t>();
  job.pending_reason = row["pending_reason"].as<std::string>();
  job.token = row["token"].as<std::string>();
  job.last_event_seq = row["last_event_seq"].as<int64_t>();
  job.created_at_ms = row["created_at_ms"].as<int64_t>();
  job.updated_at_ms = row["updated_at_ms"].as<int64_t>();
  job.started_at_ms = row["started_at_ms"].as<int64_t>();
  job.finished_at_ms = row["finished_at_ms"].as<int64_t>();
  job.exit_code = row["exit_code"].as<int32_t>();
  job.message = row["message"].as<std::string>();
  job.preemptions = row["preemptions"].as<int32_t>();
  job.team = row["team"].as<std::string>();
  job.last_checkpoint_step = row["last_checkpoint_step"].as<int64_t>();
  job.last_checkpoint_time_ms = row["last_checkpoint_time_ms"].as<int64_t>();
  job.image_digest = row["image_digest"].as<std::string>();
  job.last_replicas = row["last_replicas"].as<int32_t>();
  return job;
}

absl::StatusOr<std::vector<Job>> JobsFromResult(const pqxx::result& result) {
  std::vector<Job> jobs;
  jobs.reserve(result.size());
  for (const auto& row : result) {
    RM_ASSIGN_OR_RETURN(Job job, JobFromRow(row));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// Fills in the placement of every job, with one query.
absl::Status AttachPlacements(pqxx::transaction_base& tx, std::vector<Job>* jobs) {
  if (jobs->empty()) return absl::OkStatus();
  std::vector<std::string> ids;
  std::map<std::string, Job*> by_id;
  for (auto& job : *jobs) {
    ids.push_back(job.id);
    by_id[job.id] = &job;
  }
  for (const auto& row : tx.exec_prepared("select_placements", TextArrayLiteral(ids))) {
    RankPlacement rank;
    auto job_id = row[0].as<std::string>();
    rank.rank = row[1].as<int32_t>();
    rank.worker_id = row[2].as<std::string>();
    rank.worker_address = row[3].as<std::string>();
    rank.worker_port = row[5].as<int32_t>();
    for (absl::string_view gpu : absl::StrSplit(row[4].as<std::string>(), ',', absl::SkipEmpty())) {
      int32_t index;
      if (!absl::SimpleAtoi(gpu, &index)) {
        return absl::DataLossError(
            absl::StrCat("job ", job_id, " rank ", rank.rank, ": bad GPU index '", gpu, "'"));
      }
      rank.gpu_indices.push_back(index);
    }
    // What a rank holds of its GPU is the job's (every rank of a job holds the same share), and
    // a share's team is its job's.
    Job& job = *by_id.at(job_id);
    if (!rank.gpu_indices.empty()) {
      rank.gpu_share = job.spec.gpu_share;
      rank.gpu_memory = job.spec.gpu_memory;
      if (rank.gpu_share > 0) rank.team = job.team;
    }
    job.placement.push_back(std::move(rank));
  }
  return absl::OkStatus();
}

// Columns of many rows, sent as one array parameter each (see the unnest statements).
struct Columns {
  std::vector<std::vector<std::string>> text;
  explicit Columns(size_t n) : text(n) {}
  void Add(size_t column, std::string value) { text[column].push_back(std::move(value)); }
  std::string Array(size_t column) const { return TextArrayLiteral(text[column]); }
  bool empty() const { return text[0].empty(); }
};

// jobs.placement: [{"rank":0,"worker_id":"w1","worker_address":"10.0.0.1","worker_port":7000,
// "gpus":[0,1]}, ...], in the order given (by rank).
std::string PlacementJson(const std::vector<RankPlacement>& placement) {
  std::string out = "[";
  for (const RankPlacement& r : placement) {
    if (out.size() > 1) out += ',';
    absl::StrAppend(&out, "{\"rank\":", r.rank, ",\"worker_id\":", JsonString(r.worker_id),
                    ",\"worker_address\":", JsonString(r.worker_address),
                    ",\"worker_port\":", r.worker_port, ",\"gpus\":[",
                    absl::StrJoin(r.gpu_indices, ","), "]}");
  }
  out += ']';
  return out;
}

// Sets a job's placement, and empties its rows of before migration 11.
void SetPlacement(pqxx::work& tx, const std::string& job_id,
                  const std::vector<RankPlacement>& placement) {
  tx.exec_prepared("set_placement", job_id, PlacementJson(placement));
  tx.exec_prepared("delete_placements", job_id);
}

// Queues from select_queues rows (ordered by name).
absl::StatusOr<std::vector<Queue>> QueuesFromResult(const pqxx::result& result) {
  std::vector<Queue> queues;
  for (const auto& row : result) {
    auto name = row[0].as<std::string>();
    if (queues.empty() || queues.back().name != name) {
      Queue queue;
      queue.name = name;
      queue.cohort = row[1].as<std::string>();
      queue.weight = row[2].as<int32_t>();
      auto within = ParsePreemptWithinQueue(row[3].as<std::string>());
      auto reclaim = ParseReclaimWithinCohort(row[4].as<std::string>());
      if (!within || !reclaim) {
        return absl::DataLossError(absl::StrCat("queue ", name,
                                                " has unknown preemption settings '",
                                                row[3].c_str(), "', '", row[4].c_str(), "'"));
      }
      queue.within_queue = *within;
      queue.reclaim_within_cohort = *reclaim;
      queue.min_runtime_seconds = row[5].as<int64_t>();
      queue.created_at_ms = row[6].as<int64_t>();
      queue.updated_at_ms = row[7].as<int64_t>();
      const std::string teams = row[12].as<std::string>();
      if (!teams.empty()) queue.teams = absl::StrSplit(teams, ',');
      if (!row[13].is_null()) queue.progress_timeout_seconds = row[13].as<int64_t>();
      queue.idle_timeout_seconds = row[14].as<int64_t>();
      if (!row[15].is_null()) queue.elastic_idle_delay_seconds = row[15].as<int64_t>();
      queues.push_back(std::move(queue));
    }
    if (row[8].is_null()) continue;  // no quotas
    ResourceQuota quota;
    quota.nominal = row[9].as<int64_t>();
    if (!row[10].is_null()) quota.borrowing_limit = row[10].as<int64_t>();
    if (!row[11].is_null()) quota.lending_limit = row[11].as<int64_t>();
    queues.back().quotas[row[8].as<std::string>()] = quota;
  }
  return queues;
}

// A bigint[] literal with NULL for unset values.
std::string OptionalIntArrayLiteral(const std::vector<std::optional<int64_t>>& values) {
  std::vector<std::string> items;
  items.reserve(values.size());
  for (const auto& v : values) items.push_back(v ? std::to_string(*v) : "NULL");
  return absl::StrCat("{", absl::StrJoin(items, ","), "}");
}

void InsertQuotas(pqxx::work& tx, const Queue& queue) {
  if (queue.quotas.empty()) return;
  std::vector<std::string> resources;
  std::vector<std::optional<int64_t>> nominal, borrowing, lending;
  for (const auto& [resource, quota] : queue.quotas) {
    resources.push_back(resource);
    nominal.emplace_back(quota.nominal);
    borrowing.push_back(quota.borrowing_limit);
    lending.push_back(quota.lending_limit);
  }
  tx.exec_prepared("insert_queue_quotas", queue.name, TextArrayLiteral(resources),
                   OptionalIntArrayLiteral(nominal), OptionalIntArrayLiteral(borrowing),
                   OptionalIntArrayLiteral(lending));
}

// FencedError unless `epoch` is the newest leader's; the row lock holds off a new leader until
// the transaction ends.
absl::Status CheckFence(pqxx::work& tx, int64_t epoch) {
  pqxx::result fence = tx.exec_prepared("check_fence");
  if (fence.empty()) return absl::DataLossError("leader_fence has no row (schema migration 3)");
  const int64_t current = fence[0][0].as<int64_t>();
  if (current != epoch) return FencedError(epoch, current);
  return absl::OkStatus();
}

void InsertEvent(pqxx::work& tx, const std::string& job_id, const JobEvent& event) {
  tx.exec_prepared("insert_event", job_id, event.seq, JobStateName(event.state), event.attempt,
                   event.reason, event.exit_code, event.time_ms);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresJobStore>> PostgresJobStore::Connect(
    const std::string& url, int pool_size, PostgresPoolOptions options) {
  RM_ASSIGN_OR_RETURN(auto pool,
                      PostgresPool::Connect(url, pool_size, PrepareStatements, options));
  RM_ASSIGN_OR_RETURN(int applied,
                      pool->Run<int>([](pqxx::connection& conn) -> absl::StatusOr<int> {
                        return ApplyMigrations(conn);
                      }));
  RM_LOG(kInfo) << "job store: postgres at " << pool->database() << ", " << pool_size
                << " connections, " << applied << " migrations applied";
  return std::unique_ptr<PostgresJobStore>(new PostgresJobStore(std::move(pool), applied));
}

PostgresJobStore::PostgresJobStore(std::unique_ptr<PostgresPool> pool, int migrations_applied)
    : pool_(std::move(pool)), migrations_applied_(migrations_applied) {}

absl::StatusOr<CreateJobResult> PostgresJobStore::CreateJob(const Job& job, const JobEvent& event) {
  RM_RETURN_IF_ERROR(CheckJobAndEvent(job, &event));
  RM_ASSIGN_OR_RETURN(auto placement, SortedPlacement(job.placement));
  auto result =
      pool_->Run<CreateJobResult>([&](pqxx::connection& conn) -> absl::StatusOr<CreateJobResult> {
        pqxx::work tx(conn);
        // A concurrent insert with the same request id makes this one wait for its commit,
        // then do nothing; the SELECT below (a new snapshot) then sees the winner's row.
        pqxx::result inserted = tx.exec_prepared(
            "insert_job", job.id, job.request_id, job.spec.name, job.spec.queue, job.spec.priority,
            SpecToJson(job.spec), JobStateName(job.state), job.attempt, job.pending_reason,
            job.token, job.last_event_seq, job.created_at_ms, job.updated_at_ms, job.started_at_ms,
            job.finished_at_ms, job.exit_code, job.message, job.team);
        if (inserted.empty()) {
          pqxx::result existing = tx.exec_prepared("select_job_by_request", job.request_id);
          if (existing.empty()) {
            return absl::AbortedError(absl::StrCat("request id ", job.request_id,
                                                   " is taken by a job that is gone; retry"));
          }
          RM_ASSIGN_OR_RETURN(std::vector<Job> found, JobsFromResult(existing));
          RM_RETURN_IF_ERROR(AttachPlacements(tx, &found));
          tx.commit();
          return CreateJobResult{std::move(found.front()), true};
        }
        Job created = job;
        created.seq = inserted[0][0].as<int64_t>();
        created.placement = placement;
        if (!placement.empty()) SetPlacement(tx, job.id, placement);
        InsertEvent(tx, job.id, event);
        tx.commit();
        return CreateJobResult{std::move(created), false};
      });
  if (result.status().code() == absl::StatusCode::kAlreadyExists && !job.request_id.empty()) {
    // A concurrent call with the same request id and the same job id can trip the primary key
    // before the request id: the job is there all the same.
    auto existing = pool_->Run<std::vector<Job>>(
        [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<Job>> {
          ReadTransaction tx(conn);
          RM_ASSIGN_OR_RETURN(
              std::vector<Job> found,
              JobsFromResult(tx.exec_prepared("select_job_by_request", job.request_id)));
          RM_RETURN_IF_ERROR(AttachPlacements(tx, &found));
          tx.commit();
          return found;
        });
    if (existing.ok() && !existing->empty()) {
      return CreateJobResult{std::move(existing->front()), true};
    }
  }
  return result;
}

absl::StatusOr<Job> PostgresJobStore::GetJob(const std::string& id) {
  return pool_->Run<Job>([&](pqxx::connection& conn) -> absl::StatusOr<Job> {
    ReadTransaction tx(conn);
    pqxx::result rows = tx.exec_prepared("select_job", id);
    if (rows.empty()) return absl::NotFoundError(absl::StrCat("no job ", id));
    RM_ASSIGN_OR_RETURN(std::vector<Job> jobs, JobsFromResult(rows));
    RM_RETURN_IF_ERROR(AttachPlacements(tx, &jobs));
    tx.commit();
    return std::move(jobs.front());
  });
}

absl::StatusOr<std::vector<Job>> PostgresJobStore::ListJobs(const JobFilter& filter) {
  std::vector<std::string> params;
  std::vector<std::string> conditions;
  if (filter.state.has_value()) {
    params.emplace_back(JobStateName(*filter.state));
    conditions.push_back(absl::StrCat("state = $", params.size()));
  }
  if (!filter.queue.empty()) {
    params.push_back(filter.queue);
    conditions.push_back(absl::StrCat("queue = $", params.size()));
  }
  if (filter.team.has_value()) {
    params.push_back(*filter.team);
    conditions.push_back(absl::StrCat("team = $", params.size()));
  }
  if (filter.array_id.empty()) {
    conditions.push_back("array_id IS NULL");
  } else {
    params.push_back(filter.array_id);
    conditions.push_back(absl::StrCat("array_id = $", params.size()));
  }
  if (filter.before_seq.has_value()) {
    params.push_back(std::to_string(*filter.before_seq));
    conditions.push_back(absl::StrCat("seq < $", params.size(), "::bigint"));
  }
  // Labels live in the spec (protobuf JSON): spec->'labels'->>key is the value or NULL.
  for (const LabelRequirement& r : filter.labels) {
    params.push_back(r.key);
    const std::string label = absl::StrCat("(spec->'labels'->>$", params.size(), ")");
    switch (r.op) {
      case LabelRequirement::Op::kEquals:
        params.push_back(r.value);
        conditions.push_back(absl::StrCat(label, " = $", params.size()));
        break;
      case LabelRequirement::Op::kNotEquals:
        params.push_back(r.value);
        conditions.push_back(absl::StrCat(label, " IS DISTINCT FROM $", params.size()));
        break;
      case LabelRequirement::Op::kExists:
        conditions.push_back(absl::StrCat(label, " IS NOT NULL"));
        break;
      case LabelRequirement::Op::kNotExists:
        conditions.push_back(absl::StrCat(label, " IS NULL"));
        break;
    }
  }
  params.push_back(std::to_string(filter.limit > 0 ? filter.limit : kDefaultListLimit));
  std::string sql = absl::StrCat(
      "SELECT " RM_JOB_COLUMNS " FROM jobs", conditions.empty() ? "" : " WHERE ",
      absl::StrJoin(conditions, " AND "), " ORDER BY seq DESC LIMIT $", params.size(), "::integer");
  return pool_->Run<std::vector<Job>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<Job>> {
        ReadTransaction tx(conn);
        pqxx::result rows = tx.exec_params(sql, pqxx::prepare::make_dynamic_params(params));
        RM_ASSIGN_OR_RETURN(std::vector<Job> jobs, JobsFromResult(rows));
        RM_RETURN_IF_ERROR(AttachPlacements(tx, &jobs));
        tx.commit();
        return jobs;
      });
}

absl::StatusOr<std::vector<Job>> PostgresJobStore::ListActiveJobs() {
  return pool_->Run<std::vector<Job>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<Job>> {
        ReadTransaction tx(conn);
        RM_ASSIGN_OR_RETURN(std::vector<Job> jobs,
                            JobsFromResult(tx.exec_prepared("select_active_jobs")));
        RM_RETURN_IF_ERROR(AttachPlacements(tx, &jobs));
        tx.commit();
        return jobs;
      });
}

absl::StatusOr<ArrayTally> PostgresJobStore::TallyArray(const std::string& array_id) {
  return pool_->Run<ArrayTally>([&](pqxx::connection& conn) -> absl::StatusOr<ArrayTally> {
    ReadTransaction tx(conn);
    ArrayTally tally;
    for (const auto& row : tx.exec_prepared("tally_array", array_id)) {
      RM_ASSIGN_OR_RETURN(JobState state, StateFromColumn(row[0], "task of " + array_id));
      const int32_t n = row[1].as<int32_t>();
      tally.next = std::max(tally.next, row[2].as<int32_t>() + 1);
      if (state == JobState::kPending) tally.pending += n;
      if (IsPlaced(state)) tally.running += n;
      if (state == JobState::kSucceeded) tally.succeeded += n;
      if (state == JobState::kFailed) tally.failed += n;
      if (state == JobState::kCancelled) tally.cancelled += n;
    }
    if (tally.failed > 0) {
      for (const auto& row : tx.exec_prepared("failed_array_tasks", array_id,
                                              static_cast<int32_t>(kShownFailedIndices))) {
        tally.failed_indices.push_back(row[0].as<int32_t>());
      }
    }
    tx.commit();
    return tally;
  });
}

absl::Status PostgresJobStore::UpdateJob(const Job& job, const std::optional<JobEvent>& event) {
  RM_RETURN_IF_ERROR(CheckJobAndEvent(job, event.has_value() ? &*event : nullptr));
  RM_ASSIGN_OR_RETURN(auto placement, SortedPlacement(job.placement));
  return pool_->Run([&](pqxx::connection& conn) -> absl::Status {
    pqxx::work tx(conn);
    // The row lock orders concurrent updates of one job; the check sees the latest state.
    pqxx::result locked = tx.exec_prepared("lock_job", job.id);
    if (locked.empty()) return absl::NotFoundError(absl::StrCat("no job ", job.id));
    RM_ASSIGN_OR_RETURN(JobState stored,
                        StateFromColumn(locked[0][0], absl::StrCat("job ", job.id)));
    if (IsTerminal(stored)) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job.id, " is ", JobStateName(stored), " and can no longer change"));
    }
    tx.exec_prepared("update_job", job.id, JobStateName(job.state), job.attempt, job.pending_reason,
                     job.token, job.last_event_seq, job.updated_at_ms, job.started_at_ms,
                     job.finished_at_ms, job.exit_code, job.message, job.preemptions,
                     job.last_replicas);
    SetPlacement(tx, job.id, placement);
    if (event.has_value()) InsertEvent(tx, job.id, *event);
    tx.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<int64_t> PostgresJobStore::TakeLeadership() {
  return pool_->Run<int64_t>([&](pqxx::connection& conn) -> absl::StatusOr<int64_t> {
    pqxx::work tx(conn);
    pqxx::result r = tx.exec_prepared("take_fence");
    if (r.empty()) return absl::DataLossError("leader_fence has no row (schema migration 3)");
    int64_t epoch = r[0][0].as<int64_t>();
    tx.commit();
    return epoch;
  });
}

namespace {


// The 20 arrays of insert_new_jobs: the jobs' columns, then their audit entries'.
std::vector<std::string> CreateArrays(const std::vector<const JobWrite*>& creates) {
  Columns rows(12);
  Columns audit(8);
  for (const JobWrite* w : creates) {
    const Job& job = w->job;
    rows.Add(0, job.id);
    rows.Add(1, job.request_id);
    rows.Add(2, job.spec.name);
    rows.Add(3, job.spec.queue);
    rows.Add(4, absl::StrCat(job.spec.priority));
    rows.Add(5, SpecToJson(job.spec));
    rows.Add(6, absl::StrCat(job.created_at_ms));
    rows.Add(7, w->event.reason);
    rows.Add(8, absl::StrCat(w->event.time_ms));
    rows.Add(9, JobStateName(job.state));
    rows.Add(10, job.pending_reason);
    rows.Add(11, job.team);
    if (!w->audit) continue;
    const AuditRecord& a = *w->audit;
    audit.Add(0, absl::StrCat(a.at_ms));
    audit.Add(1, a.principal);
    audit.Add(2, a.team);
    audit.Add(3, a.role);
    audit.Add(4, a.peer);
    audit.Add(5, a.action);
    audit.Add(6, job.id);
    audit.Add(7, a.detail);
  }
  std::vector<std::string> arrays;
  for (size_t i = 0; i < 12; ++i) arrays.push_back(rows.Array(i));
  for (size_t i = 0; i < 8; ++i) arrays.push_back(audit.Array(i));
  return arrays;
}

// The jobs of these request ids or job ids, with their placements.
absl::StatusOr<std::vector<Job>> JobsByRequestOrId(pqxx::transaction_base& tx,
                                                   const std::vector<std::string>& request_ids,
                                                   const std::vector<std::string>& ids) {
  RM_ASSIGN_OR_RETURN(std::vector<Job> found,
                      JobsFromResult(tx.exec_prepared("select_jobs_by_request_or_id",
                                                      TextArrayLiteral(request_ids),
                                                      TextArrayLiteral(ids))));
  RM_RETURN_IF_ERROR(AttachPlacements(tx, &found));
  return found;
}

using ReadStored = std::function<absl::StatusOr<std::vector<Job>>(
    const std::vector<std::string>& request_ids, const std::vector<std::string>& ids)>;

// Each create's result from the rows insert_new_jobs returned (id, seq): its own row; or, for
// one not inserted (read by `read`, only when there is one), its own row stored by an earlier
// try whose answer was lost, the earlier job of its request id, or ABORTED for a taken job id.
absl::Status SettleCreates(const pqxx::result& returned,
                           const std::vector<const JobWrite*>& creates, const ReadStored& read,
                           CommitResult* result) {
  std::map<std::string, int64_t> inserted;
  for (const auto& row : returned) {
    if (!row[0].is_null()) inserted[row[0].as<std::string>()] = row[1].as<int64_t>();
  }
  std::vector<std::string> repeated;
  std::vector<std::string> taken;
  for (const JobWrite* w : creates) {
    if (inserted.contains(w->job.id)) continue;
    if (!w->job.request_id.empty()) repeated.push_back(w->job.request_id);
    taken.push_back(w->job.id);
  }
  std::map<std::string, Job> earlier;  // by request id
  std::map<std::string, Job> by_id;
  if (!taken.empty()) {
    RM_ASSIGN_OR_RETURN(std::vector<Job> found, read(repeated, taken));
    for (Job& job : found) {
      if (!job.request_id.empty()) earlier[job.request_id] = job;
      by_id[job.id] = std::move(job);
    }
  }
  for (const JobWrite* w : creates) {
    const Job& job = w->job;
    if (auto own = by_id.find(job.id);
        !inserted.contains(job.id) && own != by_id.end() &&
        store_internal::SameCreate(own->second, job)) {
      result->created.push_back(CreateJobResult{own->second, false});
      continue;
    }
    if (auto it = inserted.find(job.id); it != inserted.end()) {
      // Its own row, unless an earlier create of this batch took the request id first.
      auto e = earlier.find(job.request_id);
      if (e == earlier.end() || e->second.id == job.id) {
        Job created = job;
        created.seq = it->second;
        result->created.push_back(CreateJobResult{std::move(created), false});
        continue;
      }
    }
    if (auto e = earlier.find(job.request_id); !job.request_id.empty() && e != earlier.end()) {
      result->created.push_back(CreateJobResult{e->second, true});
      continue;
    }
    result->created.push_back(
        absl::AbortedError(absl::StrCat("job id ", job.id, " is taken; choose another")));
  }
  return absl::OkStatus();
}

}  // namespace

// A batch of new jobs only (the submit writers'): one statement, committed on its own, with
// the fence checked inside it: one round trip instead of four (BEGIN, the fence, the insert,
// COMMIT). The jobs not inserted (repeated request ids, taken ids) are then read in a read
// transaction of their own.
absl::StatusOr<CommitResult> PostgresJobStore::CommitCreates(
    const std::vector<const JobWrite*>& creates, int64_t epoch) {
  std::vector<std::string> a = CreateArrays(creates);
  return pool_->Run<CommitResult>([&](pqxx::connection& conn) -> absl::StatusOr<CommitResult> {
    pqxx::result returned;
    {
      pqxx::nontransaction tx(conn);
      returned = tx.exec_prepared("insert_new_jobs_fenced", a[0], a[1], a[2], a[3], a[4], a[5],
                                  a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
                                  a[15], a[16], a[17], a[18], a[19], epoch);
    }
    if (returned.empty() || !returned[returned.size() - 1][0].is_null()) {
      return absl::DataLossError("leader_fence has no row (schema migration 3)");
    }
    const int64_t current = returned[returned.size() - 1][1].as<int64_t>();
    if (current != epoch) return FencedError(epoch, current);
    CommitResult result;
    RM_RETURN_IF_ERROR(SettleCreates(
        returned, creates,
        [&](const std::vector<std::string>& request_ids, const std::vector<std::string>& ids) {
          ReadTransaction tx(conn);
          return JobsByRequestOrId(tx, request_ids, ids);
        },
        &result));
    return result;
  });
}

absl::StatusOr<CommitResult> PostgresJobStore::Commit(const WriteBatch& batch, int64_t epoch) {
  RM_RETURN_IF_ERROR(store_internal::CheckBatch(batch, epoch));
  // The newest write of each job gives its row; every write gives its event.
  std::map<std::string, const JobWrite*> last_update;
  std::set<std::string> placement_changed;
  for (const JobWrite& w : batch.jobs) {
    if (w.kind != JobWrite::Kind::kUpdate) continue;
    RM_RETURN_IF_ERROR(SortedPlacement(w.job.placement).status());
    last_update[w.job.id] = &w;
    if (w.placement_changed) placement_changed.insert(w.job.id);
  }
  std::vector<const JobWrite*> creates;
  for (const JobWrite& w : batch.jobs) {
    if (w.kind == JobWrite::Kind::kCreate) creates.push_back(&w);
  }
  if (!creates.empty() && creates.size() == batch.jobs.size() && batch.workers.empty()) {
    return CommitCreates(creates, epoch);
  }
  auto committed = CommitInTransaction(batch, epoch, last_update, placement_changed, creates);
  if (committed.status().code() != absl::StatusCode::kAlreadyExists || !creates.empty() ||
      last_update.empty()) {
    return committed;
  }
  // An event stored before: this batch's own, when an earlier try committed it and its answer
  // was lost (the connection broke after the commit), or a real conflict.
  auto before = pool_->Run<std::optional<CommitResult>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::optional<CommitResult>> {
        ReadTransaction tx(conn);
        Columns keys(2);
        std::vector<std::string> ids;
        for (const JobWrite& w : batch.jobs) {
          if (w.kind != JobWrite::Kind::kUpdate) continue;
          keys.Add(0, w.job.id);
          keys.Add(1, absl::StrCat(w.event.seq));
          ids.push_back(w.job.id);
        }
        std::map<std::pair<std::string, int64_t>, JobEvent> stored;
        for (const auto& row :
             tx.exec_prepared("select_batch_events", keys.Array(0), keys.Array(1))) {
          JobEvent event;
          event.job_id = row[0].as<std::string>();
          event.seq = row[1].as<int64_t>();
          RM_ASSIGN_OR_RETURN(event.state, StateFromColumn(row[2], "event of " + event.job_id));
          event.attempt = row[3].as<int32_t>();
          event.reason = row[4].as<std::string>();
          event.exit_code = row[5].as<int32_t>();
          event.time_ms = row[6].as<int64_t>();
          stored[{event.job_id, event.seq}] = std::move(event);
        }
        std::set<std::string> ended;
        for (const auto& row : tx.exec_prepared("select_ended_of", TextArrayLiteral(ids))) {
          ended.insert(row[0].as<std::string>());
        }
        return store_internal::StoredBefore(batch, stored, ended);
      });
  if (!before.ok() || !before->has_value()) return committed;
  return **before;
}

absl::StatusOr<CommitResult> PostgresJobStore::CommitInTransaction(
    const WriteBatch& batch, int64_t epoch,
    const std::map<std::string, const JobWrite*>& last_update,
    const std::set<std::string>& placement_changed, const std::vector<const JobWrite*>& creates) {
  return pool_->Run<CommitResult>([&](pqxx::connection& conn) -> absl::StatusOr<CommitResult> {
    pqxx::work tx(conn);
    pqxx::result fence = tx.exec_prepared("check_fence");
    if (fence.empty()) return absl::DataLossError("leader_fence has no row (schema migration 3)");
    const int64_t current = fence[0][0].as<int64_t>();
    if (current != epoch) return FencedError(epoch, current);

    CommitResult result;
    Columns events(7);
    auto add_event = [&](const std::string& job_id, const JobEvent& e) {
      events.Add(0, job_id);
      events.Add(1, absl::StrCat(e.seq));
      events.Add(2, JobStateName(e.state));
      events.Add(3, absl::StrCat(e.attempt));
      events.Add(4, e.reason);
      events.Add(5, absl::StrCat(e.exit_code));
      events.Add(6, absl::StrCat(e.time_ms));
    };
    if (!creates.empty()) {
      std::vector<std::string> a = CreateArrays(creates);
      RM_RETURN_IF_ERROR(SettleCreates(
          tx.exec_prepared("insert_new_jobs", a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                           a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17],
                           a[18], a[19]),
          creates,
          [&](const std::vector<std::string>& request_ids, const std::vector<std::string>& ids) {
            return JobsByRequestOrId(tx, request_ids, ids);
          },
          &result));
    }

    if (!last_update.empty()) {
      std::vector<std::string> ids;
      for (const auto& [id, w] : last_update) ids.push_back(id);
      std::map<std::string, JobState> stored;
      for (const auto& row : tx.exec_prepared("lock_jobs", TextArrayLiteral(ids))) {
        auto id = row[0].as<std::string>();
        RM_ASSIGN_OR_RETURN(stored[id], StateFromColumn(row[1], absl::StrCat("job ", id)));
      }
      Columns rows(14);
      std::vector<std::string> replaced;
      for (const auto& [id, w] : last_update) {
        auto it = stored.find(id);
        if (it == stored.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
        if (IsTerminal(it->second)) {
          result.skipped.push_back(id);
          continue;
        }
        const Job& job = w->job;
        rows.Add(0, id);
        rows.Add(1, JobStateName(job.state));
        rows.Add(2, absl::StrCat(job.attempt));
        rows.Add(3, job.pending_reason);
        rows.Add(4, job.token);
        rows.Add(5, absl::StrCat(job.last_event_seq));
        rows.Add(6, absl::StrCat(job.updated_at_ms));
        rows.Add(7, absl::StrCat(job.started_at_ms));
        rows.Add(8, absl::StrCat(job.finished_at_ms));
        rows.Add(9, absl::StrCat(job.exit_code));
        rows.Add(10, job.message);
        rows.Add(11, absl::StrCat(job.preemptions));
        rows.Add(12, absl::StrCat(job.last_replicas));
        if (!placement_changed.contains(id)) {
          rows.Add(13, "");
          continue;
        }
        rows.Add(13, PlacementJson(job.placement));
        replaced.push_back(id);
      }
      std::set<std::string> skipped(result.skipped.begin(), result.skipped.end());
      std::map<std::pair<std::string, std::string>, int64_t> usage;
      for (const JobWrite& w : batch.jobs) {
        if (w.kind == JobWrite::Kind::kUpdate && !skipped.contains(w.job.id)) {
          add_event(w.job.id, w.event);
          if (w.usage) usage[{w.usage->queue, w.usage->resource}] += w.usage->used_ms;
        }
      }
      if (!usage.empty()) {
        Columns sums(3);
        for (const auto& [key, ms] : usage) {
          sums.Add(0, key.first);
          sums.Add(1, key.second);
          sums.Add(2, absl::StrCat(ms));
        }
        tx.exec_prepared("add_queue_usage", sums.Array(0), sums.Array(1), sums.Array(2));
      }
      if (!rows.empty()) {
        tx.exec_prepared("update_jobs", rows.Array(0), rows.Array(1), rows.Array(2), rows.Array(3),
                         rows.Array(4), rows.Array(5), rows.Array(6), rows.Array(7), rows.Array(8),
                         rows.Array(9), rows.Array(10), rows.Array(11), rows.Array(12),
                         rows.Array(13));
      }
      // Rows of before migration 11 go with the placement they held.
      if (!replaced.empty()) {
        tx.exec_prepared("delete_placements_of", TextArrayLiteral(replaced));
      }
    }
    // One row per job (UPDATE ... FROM would apply one of several at random): its newest.
    std::map<std::string, const Job*> checkpoints;
    for (const JobWrite& w : batch.jobs) {
      if (w.kind != JobWrite::Kind::kCheckpoint) continue;
      auto [it, fresh] = checkpoints.try_emplace(w.job.id, &w.job);
      if (!fresh && w.job.last_checkpoint_time_ms >= it->second->last_checkpoint_time_ms) {
        it->second = &w.job;
      }
    }
    if (!checkpoints.empty()) {
      Columns rows(3);
      for (const auto& [id, job] : checkpoints) {
        rows.Add(0, id);
        rows.Add(1, absl::StrCat(job->last_checkpoint_step));
        rows.Add(2, absl::StrCat(job->last_checkpoint_time_ms));
      }
      tx.exec_prepared("update_checkpoints", rows.Array(0), rows.Array(1), rows.Array(2));
    }
    std::map<std::string, const Job*> digests;  // the first of each job's
    for (const JobWrite& w : batch.jobs) {
      if (w.kind == JobWrite::Kind::kImageDigest) digests.try_emplace(w.job.id, &w.job);
    }
    if (!digests.empty()) {
      Columns rows(2);
      for (const auto& [id, job] : digests) {
        rows.Add(0, id);
        rows.Add(1, job->image_digest);
      }
      tx.exec_prepared("update_image_digests", rows.Array(0), rows.Array(1));
    }
    if (!events.empty()) {
      tx.exec_prepared("insert_events", events.Array(0), events.Array(1), events.Array(2),
                       events.Array(3), events.Array(4), events.Array(5), events.Array(6));
    }
    for (const Worker& worker : batch.workers) {
      tx.exec_prepared("upsert_worker", worker.id, worker.address, worker.port,
                       GpusJson(worker.gpus), worker.cpu_slots, WorkerStateName(worker.state),
                       worker.registered_at_ms, worker.last_heartbeat_ms, worker.unhealthy_reason);
    }
    tx.commit();
    return result;
  });
}

absl::StatusOr<std::vector<JobEvent>> PostgresJobStore::ListEvents(const std::string& job_id,
                                                                   int64_t after_seq) {
  return pool_->Run<std::vector<JobEvent>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<JobEvent>> {
        ReadTransaction tx(conn);
        if (tx.exec_prepared("job_exists", job_id).empty()) {
          return absl::NotFoundError(absl::StrCat("no job ", job_id));
        }
        std::vector<JobEvent> events;
        for (const auto& row : tx.exec_prepared("select_events", job_id, after_seq)) {
          JobEvent event;
          event.job_id = job_id;
          event.seq = row[0].as<int64_t>();
          RM_ASSIGN_OR_RETURN(
              event.state,
              StateFromColumn(row[1], absl::StrCat("event ", event.seq, " of job ", job_id)));
          event.attempt = row[2].as<int32_t>();
          event.reason = row[3].as<std::string>();
          event.exit_code = row[4].as<int32_t>();
          event.time_ms = row[5].as<int64_t>();
          events.push_back(std::move(event));
        }
        tx.commit();
        return events;
      });
}

absl::Status PostgresJobStore::UpsertWorker(const Worker& worker) {
  if (worker.id.empty()) return absl::InvalidArgumentError("worker id is empty");
  return pool_->Run([&](pqxx::connection& conn) -> absl::Status {
    pqxx::work tx(conn);
    tx.exec_prepared("upsert_worker", worker.id, worker.address, worker.port, GpusJson(worker.gpus),
                     worker.cpu_slots, WorkerStateName(worker.state), worker.registered_at_ms,
                     worker.last_heartbeat_ms, worker.unhealthy_reason);
    tx.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<Worker>> PostgresJobStore::ListWorkers() {
  return pool_->Run<std::vector<Worker>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<Worker>> {
        ReadTransaction tx(conn);
        std::vector<Worker> workers;
        for (const auto& row : tx.exec_prepared("select_workers")) {
          auto id = row[0].as<std::string>();
          if (workers.empty() || workers.back().id != id) {
            Worker worker;
            worker.id = id;
            worker.address = row[1].as<std::string>();
            worker.port = row[2].as<int32_t>();
            worker.cpu_slots = row[3].as<int32_t>();
            auto state = row[4].as<std::string>();
            if (state == WorkerStateName(WorkerState::kReady)) {
              worker.state = WorkerState::kReady;
            } else if (state == WorkerStateName(WorkerState::kLost)) {
              worker.state = WorkerState::kLost;
            } else {
              return absl::DataLossError(
                  absl::StrCat("worker ", id, " has unknown state '", state, "'"));
            }
            worker.registered_at_ms = row[5].as<int64_t>();
            worker.last_heartbeat_ms = row[6].as<int64_t>();
            worker.unhealthy_reason = row[7].as<std::string>();
            workers.push_back(std::move(worker));
          }
          if (row[8].is_null()) continue;  // no GPUs
          if (row[9].is_null() || row[10].is_null() || row[11].is_null()) {
            return absl::DataLossError(absl::StrCat("worker ", id, ": GPU ", row[8].c_str(),
                                                    " lacks index, type or memory_bytes"));
          }
          Gpu gpu;
          gpu.index = row[9].as<int32_t>();
          gpu.type = row[10].as<std::string>();
          gpu.memory_bytes = row[11].as<int64_t>();
          gpu.simulated = !row[12].is_null() && row[12].as<bool>();
          workers.back().gpus.push_back(std::move(gpu));
        }
        tx.commit();
        return workers;
      });
}

absl::StatusOr<Queue> PostgresJobStore::CreateQueue(const Queue& queue, int64_t epoch) {
  return pool_->Run<Queue>([&](pqxx::connection& conn) -> absl::StatusOr<Queue> {
    pqxx::work tx(conn);
    RM_RETURN_IF_ERROR(CheckFence(tx, epoch));
    // A concurrent create of the same name trips the primary key instead: ALREADY_EXISTS too.
    if (!tx.exec_prepared("lock_queue", queue.name).empty()) {
      return absl::AlreadyExistsError(absl::StrCat("queue ", queue.name, " already exists"));
    }
    tx.exec_prepared("insert_queue", queue.name, queue.cohort, queue.weight,
                     PreemptWithinQueueName(queue.within_queue),
                     ReclaimWithinCohortName(queue.reclaim_within_cohort),
                     queue.min_runtime_seconds, queue.created_at_ms, queue.updated_at_ms,
                     TextArrayLiteral(queue.teams), queue.progress_timeout_seconds.value_or(-1),
                     queue.idle_timeout_seconds, queue.elastic_idle_delay_seconds.value_or(-1));
    InsertQuotas(tx, queue);
    tx.commit();
    return queue;
  });
}

absl::StatusOr<Queue> PostgresJobStore::UpdateQueue(const Queue& queue, int64_t epoch) {
  return pool_->Run<Queue>([&](pqxx::connection& conn) -> absl::StatusOr<Queue> {
    pqxx::work tx(conn);
    RM_RETURN_IF_ERROR(CheckFence(tx, epoch));
    pqxx::result updated =
        tx.exec_prepared("update_queue", queue.name, queue.cohort, queue.weight,
                         PreemptWithinQueueName(queue.within_queue),
                         ReclaimWithinCohortName(queue.reclaim_within_cohort),
                         queue.min_runtime_seconds, queue.updated_at_ms,
                         TextArrayLiteral(queue.teams), queue.progress_timeout_seconds.value_or(-1),
                         queue.idle_timeout_seconds, queue.elastic_idle_delay_seconds.value_or(-1));
    if (updated.empty()) return absl::NotFoundError(absl::StrCat("no queue ", queue.name));
    tx.exec_prepared("delete_queue_quotas", queue.name);
    InsertQuotas(tx, queue);
    tx.commit();
    Queue stored = queue;
    stored.created_at_ms = updated[0][0].as<int64_t>();
    return stored;
  });
}

absl::StatusOr<Queue> PostgresJobStore::GetQueue(const std::string& name) {
  return pool_->Run<Queue>([&](pqxx::connection& conn) -> absl::StatusOr<Queue> {
    ReadTransaction tx(conn);
    RM_ASSIGN_OR_RETURN(std::vector<Queue> queues,
                        QueuesFromResult(tx.exec_prepared("select_queue", name)));
    tx.commit();
    if (queues.empty()) return absl::NotFoundError(absl::StrCat("no queue ", name));
    return std::move(queues.front());
  });
}

absl::StatusOr<std::vector<Queue>> PostgresJobStore::ListQueues() {
  return pool_->Run<std::vector<Queue>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<Queue>> {
        ReadTransaction tx(conn);
        RM_ASSIGN_OR_RETURN(std::vector<Queue> queues,
                            QueuesFromResult(tx.exec_prepared("select_queues")));
        tx.commit();
        return queues;
      });
}

absl::Status PostgresJobStore::DeleteQueue(const std::string& name, int64_t epoch) {
  if (name == kDefaultQueue) {
    return absl::FailedPreconditionError("queue default cannot be deleted");
  }
  return pool_->Run([&](pqxx::connection& conn) -> absl::Status {
    pqxx::work tx(conn);
    RM_RETURN_IF_ERROR(CheckFence(tx, epoch));
    if (tx.exec_prepared("lock_queue", name).empty()) {
      return absl::NotFoundError(absl::StrCat("no queue ", name));
    }
    const auto live = tx.exec_prepared("count_live_jobs_of_queue", name)[0][0].as<int64_t>();
    if (live > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("queue ", name, " has ", live,
                       " live jobs (PENDING, STARTING or RUNNING); cancel them "
                       "or wait for them to end first"));
    }
    tx.exec_prepared("delete_queue", name);
    tx.exec_prepared("delete_queue_usage", name);
    tx.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<QueueUsage>> PostgresJobStore::ListQueueUsage() {
  return pool_->Run<std::vector<QueueUsage>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<QueueUsage>> {
        ReadTransaction tx(conn);
        std::vector<QueueUsage> out;
        for (const auto& row : tx.exec_prepared("select_queue_usage")) {
          out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int64_t>()});
        }
        tx.commit();
        return out;
      });
}

absl::StatusOr<std::vector<CheckBaseline>> PostgresJobStore::ListCheckBaselines() {
  return pool_->Run<std::vector<CheckBaseline>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<CheckBaseline>> {
        ReadTransaction tx(conn);
        std::vector<CheckBaseline> baselines;
        for (const auto& row : tx.exec_prepared("select_check_baselines")) {
          baselines.push_back({row[0].as<std::string>(), row[1].as<double>(), row[2].as<int64_t>(),
                               row[3].as<int64_t>()});
        }
        tx.commit();
        return baselines;
      });
}

absl::Status PostgresJobStore::PutCheckBaseline(const CheckBaseline& baseline) {
  if (baseline.shape.empty()) return absl::InvalidArgumentError("baseline shape is empty");
  return pool_->Run([&](pqxx::connection& conn) -> absl::Status {
    pqxx::work tx(conn);
    tx.exec_prepared("upsert_check_baseline", baseline.shape, baseline.busbw_gbps, baseline.samples,
                     baseline.updated_at_ms);
    tx.commit();
    return absl::OkStatus();
  });
}

namespace {

// The volume's grants as the two array columns.
std::pair<std::string, std::string> GrantArrays(const Volume& volume) {
  std::vector<std::string> teams;
  std::vector<std::string> read_only;
  for (const VolumeGrant& g : volume.grants) {
    teams.push_back(g.team);
    read_only.push_back(g.read_only ? "true" : "false");
  }
  return {TextArrayLiteral(teams), absl::StrCat("{", absl::StrJoin(read_only, ","), "}")};
}

absl::StatusOr<std::vector<Volume>> VolumesFromResult(const pqxx::result& result) {
  std::vector<Volume> volumes;
  for (const auto& row : result) {
    Volume v;
    v.name = row[0].as<std::string>();
    v.host_path = row[1].as<std::string>();
    std::vector<std::string> teams =
        absl::StrSplit(row[2].as<std::string>(), ',', absl::SkipEmpty());
    std::vector<std::string> read_only =
        absl::StrSplit(row[3].as<std::string>(), ',', absl::SkipEmpty());
    if (teams.size() != read_only.size()) {
      return absl::DataLossError(absl::StrCat("volume ", v.name, ": ", teams.size(),
                                              " granted teams but ", read_only.size(),
                                              " read-only flags"));
    }
    for (size_t i = 0; i < teams.size(); ++i) {
      v.grants.push_back({teams[i], read_only[i] == "t" || read_only[i] == "true"});
    }
    v.description = row[4].as<std::string>();
    v.created_at_ms = row[5].as<int64_t>();
    v.updated_at_ms = row[6].as<int64_t>();
    volumes.push_back(std::move(v));
  }
  return volumes;
}

}  // namespace

absl::StatusOr<Volume> PostgresJobStore::CreateVolume(const Volume& volume, int64_t epoch) {
  return pool_->Run<Volume>([&](pqxx::connection& conn) -> absl::StatusOr<Volume> {
    pqxx::work tx(conn);
    RM_RETURN_IF_ERROR(CheckFence(tx, epoch));
    auto [teams, read_only] = GrantArrays(volume);
    pqxx::result inserted =
        tx.exec_prepared("insert_volume", volume.name, volume.host_path, teams, read_only,
                         volume.description, volume.created_at_ms, volume.updated_at_ms);
    if (inserted.affected_rows() == 0) {
      return absl::AlreadyExistsError(absl::StrCat("volume ", volume.name, " already exists"));
    }
    tx.commit();
    return volume;
  });
}

absl::StatusOr<Volume> PostgresJobStore::UpdateVolume(const Volume& volume, int64_t epoch) {
  return pool_->Run<Volume>([&](pqxx::connection& conn) -> absl::StatusOr<Volume> {
    pqxx::work tx(conn);
    RM_RETURN_IF_ERROR(CheckFence(tx, epoch));
    auto [teams, read_only] = GrantArrays(volume);
    pqxx::result updated = tx.exec_prepared("update_volume", volume.name, volume.host_path, teams,
                                            read_only, volume.description, volume.updated_at_ms);
    if (updated.empty()) return absl::NotFoundError(absl::StrCat("no volume ", volume.name));
    tx.commit();
    Volume stored = volume;
    stored.created_at_ms = updated[0][0].as<int64_t>();
    return stored;
  });
}

absl::StatusOr<Volume> PostgresJobStore::GetVolume(const std::string& name) {
  return pool_->Run<Volume>([&](pqxx::connection& conn) -> absl::StatusOr<Volume> {
    ReadTransaction tx(conn);
    RM_ASSIGN_OR_RETURN(std::vector<Volume> volumes,
                        VolumesFromResult(tx.exec_prepared("select_volume", name)));
    tx.commit();
    if (volumes.empty()) return absl::NotFoundError(absl::StrCat("no volume ", name));
    return std::move(volumes.front());
  });
}

absl::StatusOr<std::vector<Volume>> PostgresJobStore::ListVolumes() {
  return pool_->Run<std::vector<Volume>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<Volume>> {
        ReadTransaction tx(conn);
        RM_ASSIGN_OR_RETURN(
            std::vector<Volume> volumes,
            VolumesFromResult(tx.exec_prepared("select_volumes")));
        tx.commit();
        return volumes;
      });
}

absl::Status PostgresJobStore::DeleteVolume(const std::string& name, int64_t epoch) {
  return pool_->Run([&](pqxx::connection& conn) -> absl::Status {
    pqxx::work tx(conn);
    RM_RETURN_IF_ERROR(CheckFence(tx, epoch));
    if (tx.exec_prepared("lock_volume", name).empty()) {
      return absl::NotFoundError(absl::StrCat("no volume ", name));
    }
    pqxx::result mounting = tx.exec_prepared("live_job_mounting", name);
    if (!mounting.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "volume ", name, " is mounted by job ", mounting[0][0].as<std::string>(), ", which is ",
          mounting[0][1].as<std::string>(), "; cancel it or wait for it to end first"));
    }
    tx.exec_prepared("delete_volume", name);
    tx.commit();
    return absl::OkStatus();
  });
}

absl::Status PostgresJobStore::SetRegistryCredential(const StoredRegistryCredential& credential,
                                                     int64_t epoch) {
  return pool_->Run([&](pqxx::connection& conn) -> absl::Status {
    pqxx::work tx(conn);
    RM_RETURN_IF_ERROR(CheckFence(tx, epoch));
    pqxx::binarystring sealed(credential.sealed_secret.data(), credential.sealed_secret.size());
    tx.exec_prepared("upsert_registry_credential", credential.team, credential.registry,
                     credential.username, credential.plaintext_secret, sealed,
                     credential.updated_at_ms);
    tx.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<StoredRegistryCredential>> PostgresJobStore::ListRegistryCredentials() {
  return pool_->Run<std::vector<StoredRegistryCredential>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<StoredRegistryCredential>> {
        ReadTransaction tx(conn);
        std::vector<StoredRegistryCredential> out;
        for (const auto& row : tx.exec_prepared("select_registry_credentials")) {
          StoredRegistryCredential c;
          c.team = row[0].as<std::string>();
          c.registry = row[1].as<std::string>();
          c.username = row[2].as<std::string>();
          if (!row[3].is_null()) c.plaintext_secret = row[3].as<std::string>();
          if (!row[4].is_null()) c.sealed_secret = pqxx::binarystring(row[4]).str();
          c.updated_at_ms = row[5].as<int64_t>();
          out.push_back(std::move(c));
        }
        tx.commit();
        return out;
      });
}

absl::Status PostgresJobStore::DeleteRegistryCredential(const std::string& team,
                                                        const std::string& registry,
                                                        int64_t epoch) {
  return pool_->Run([&](pqxx::connection& conn) -> absl::Status {
    pqxx::work tx(conn);
    RM_RETURN_IF_ERROR(CheckFence(tx, epoch));
    if (tx.exec_prepared("delete_registry_credential", team, registry).affected_rows() == 0) {
      return absl::NotFoundError(
          absl::StrCat("team ", team, " has no credentials for registry ", registry));
    }
    tx.commit();
    return absl::OkStatus();
  });
}

}  // namespace ringmaster::scheduler
