// The JobStore conformance suite on PostgresJobStore, and what only Postgres has: migrations,
// the connection pool, an unreachable or vanished server, corrupt rows. Needs
// $RINGMASTER_TEST_PG_URL (scripts/test sets it); without it these tests fail.
#include "scheduler/store/postgres_job_store.h"

#include <atomic>
#include <pqxx/pqxx>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/secret_box.h"
#include "gmock/gmock.h"
#include "job_store_conformance.h"
#include "scheduler/convert/convert.h"
#include "scheduler/store/migrations.h"
#include "support/status_test_util.h"
#include "support/test_database.h"

namespace ringmaster::scheduler::store_test {
namespace {

using ::ringmaster::test::IsOkAndHolds;
using ::ringmaster::test::StatusIs;
using ::ringmaster::test::TestDatabase;
using ::testing::HasSubstr;

// Creating and dropping a database costs about a second (a checkpoint), so the conformance
// tests share one database per binary and empty its tables before each test.
class SharedDatabase : public ::testing::Environment {
 public:
  static absl::StatusOr<std::string> Url() {
    if (db_ == nullptr) {
      auto db = TestDatabase::Create();
      if (!db.ok()) return db.status();
      db_ = std::move(*db);
    }
    return db_->url();
  }
  void TearDown() override { db_.reset(); }

 private:
  static std::unique_ptr<TestDatabase> db_;
};
std::unique_ptr<TestDatabase> SharedDatabase::db_;
[[maybe_unused]] auto* const kSharedDatabase =
    ::testing::AddGlobalTestEnvironment(new SharedDatabase);

absl::Status Exec(const std::string& url, const std::string& sql) {
  try {
    pqxx::connection conn(url);
    pqxx::work tx(conn);
    tx.exec(sql);
    tx.commit();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(sql, ": ", e.what()));
  }
}

class PostgresJobStoreBackend : public JobStoreBackend {
 public:
  absl::StatusOr<std::unique_ptr<JobStore>> NewStore() override {
    auto url = SharedDatabase::Url();
    if (!url.ok()) return url.status();
    auto store = PostgresJobStore::Connect(*url, 4);
    if (!store.ok()) return store.status();
    if (!emptied_) {
      // Queues as the migration leaves them: only default.
      auto status = Exec(*url,
                         "TRUNCATE jobs, job_events, placements, workers, queues, queue_quotas, "
                         "queue_usage, volumes, registry_credentials "
                         "RESTART IDENTITY; "
                         "INSERT INTO queues (name, created_at_ms, updated_at_ms) "
                         "VALUES ('default', 0, 0)");
      if (!status.ok()) return status;
      emptied_ = true;
    }
    return std::unique_ptr<JobStore>(std::move(*store));
  }

 private:
  bool emptied_ = false;
};

INSTANTIATE_TEST_SUITE_P(Postgres, JobStoreConformanceTest,
                         ::testing::Values(JobStoreBackendParam{
                             "Postgres",
                             [] { return std::make_unique<PostgresJobStoreBackend>(); }}),
                         JobStoreBackendName);

// --- Postgres specifics ------------------------------------------------------------------

int64_t CountRows(const std::string& url, const std::string& sql) {
  pqxx::connection conn(url);
  pqxx::work tx(conn);
  return tx.exec1(sql)[0].as<int64_t>();
}

// Takes the database to the schema of a scheduler from before migration `version`, as that
// scheduler would have left it. Returns how many migrations it applied.
int ApplyMigrationsBefore(pqxx::work& tx, int version) {
  tx.exec(
      "CREATE TABLE schema_migrations (version integer PRIMARY KEY, "
      "applied_at timestamptz NOT NULL DEFAULT now())");
  int applied = 0;
  for (const Migration& m : Migrations()) {
    if (m.version >= version) break;
    tx.exec(m.sql);
    tx.exec_params("INSERT INTO schema_migrations (version) VALUES ($1)", m.version);
    ++applied;
  }
  return applied;
}

TEST(PostgresJobStoreTest, MigrationsAreAppliedOnceAndASecondStartAppliesNothing) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  RM_ASSERT_OK_AND_ASSIGN(auto first, PostgresJobStore::Connect(db->url(), 2));
  EXPECT_EQ(first->migrations_applied(), static_cast<int>(Migrations().size()));
  Job job = MakeJob("j-1", "default", 0, "req-1");
  RM_ASSERT_OK(first->CreateJob(job, FirstEvent(job)));

  RM_ASSERT_OK_AND_ASSIGN(auto second, PostgresJobStore::Connect(db->url(), 2));
  EXPECT_EQ(second->migrations_applied(), 0);
  RM_ASSERT_OK_AND_ASSIGN(Job got, second->GetJob("j-1"));
  EXPECT_EQ(got.request_id, "req-1");
  EXPECT_EQ(CountRows(db->url(), "SELECT count(*) FROM schema_migrations"),
            static_cast<int64_t>(Migrations().size()));
}

// Schedulers before migration 11 stored a placement as a row per rank in `placements`, and an
// old leader still does during a rolling upgrade. Those rows are the job's placement while
// jobs.placement is [], and go when a newer placement is stored.
TEST(PostgresJobStoreTest, PlacementRowsFromBeforeMigration11AreReadUntilReplaced) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  int before = 0;
  {
    pqxx::connection conn(db->url());
    pqxx::work tx(conn);
    before = ApplyMigrationsBefore(tx, 11);
    // A running gang as a scheduler of schema version 10 wrote it.
    Job job = MakeJob("j-1");
    job.spec.replicas = 2;
    tx.exec_params(
        "INSERT INTO jobs (id, name, queue, priority, spec, state, attempt, token, "
        "last_event_seq, created_at_ms, updated_at_ms, started_at_ms) "
        "VALUES ('j-1', 'j-1', 'default', 0, $1::jsonb, 'RUNNING', 1, 'tok', 1, 1, 2, 2)",
        SpecToJson(job.spec));
    tx.exec(
        "INSERT INTO job_events (job_id, seq, state, attempt, reason, exit_code, time_ms) "
        "VALUES ('j-1', 1, 'RUNNING', 1, 'started', 0, 2)");
    tx.exec(
        "INSERT INTO placements (job_id, rank, worker_id, worker_address, gpu_indices, "
        "worker_port) VALUES ('j-1', 1, 'w2', '10.0.0.2', '{2,3}', 7001), "
        "('j-1', 0, 'w1', '10.0.0.1', '{0}', 7000)");
    tx.commit();
  }
  RM_ASSERT_OK_AND_ASSIGN(auto store, PostgresJobStore::Connect(db->url(), 1));
  EXPECT_EQ(store->migrations_applied(), static_cast<int>(Migrations().size()) - before);

  RM_ASSERT_OK_AND_ASSIGN(std::vector<Job> active, store->ListActiveJobs());
  ASSERT_EQ(active.size(), 1u);
  const std::vector<RankPlacement> old = {{0, "w1", "10.0.0.1", {0}, 7000},
                                          {1, "w2", "10.0.0.2", {2, 3}, 7001}};
  EXPECT_EQ(active[0].placement, old);
  RM_ASSERT_OK_AND_ASSIGN(Job got, store->GetJob("j-1"));
  EXPECT_EQ(got.placement, old);

  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store->TakeLeadership());
  // Preempted: back to pending without ranks. The old rows must not come back.
  Job pending = got;
  pending.state = JobState::kPending;
  pending.placement.clear();
  pending.last_event_seq = 2;
  WriteBatch batch;
  batch.jobs.push_back({JobWrite::Kind::kUpdate, pending,
                        JobEvent{"j-1", 2, JobState::kPending, 1, "preempted", 0, 3}, true,
                        std::nullopt, std::nullopt});
  RM_ASSERT_OK(store->Commit(batch, epoch));
  RM_ASSERT_OK_AND_ASSIGN(got, store->GetJob("j-1"));
  EXPECT_TRUE(got.placement.empty());
  EXPECT_EQ(CountRows(db->url(), "SELECT count(*) FROM placements"), 0);

  // Placed again: stored in the job's row.
  Job placed = got;
  placed.state = JobState::kStarting;
  placed.attempt = 2;
  placed.placement = {{0, "w3", "10.0.0.3", {1, 5}, 7002}};
  placed.last_event_seq = 3;
  batch.jobs = {{JobWrite::Kind::kUpdate, placed,
                 JobEvent{"j-1", 3, JobState::kStarting, 2, "placed", 0, 4}, true, std::nullopt,
                 std::nullopt}};
  RM_ASSERT_OK(store->Commit(batch, epoch));
  RM_ASSERT_OK_AND_ASSIGN(got, store->GetJob("j-1"));
  EXPECT_EQ(got.placement, placed.placement);
  EXPECT_EQ(CountRows(db->url(), "SELECT count(*) FROM placements"), 0);
}

// Queues stored before migration 16 had no elastic idle delay: they keep the scheduler's
// default (unset), and one set later is stored and read back.
TEST(PostgresJobStoreTest, QueuesFromBeforeMigration16KeepTheDefaultElasticIdleDelay) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  {
    pqxx::connection conn(db->url());
    pqxx::work tx(conn);
    ApplyMigrationsBefore(tx, 16);
    tx.exec(
        "INSERT INTO queues (name, cohort, weight, created_at_ms, updated_at_ms) "
        "VALUES ('vision', 'lab', 2, 1, 1)");
    tx.commit();
  }
  RM_ASSERT_OK_AND_ASSIGN(auto store, PostgresJobStore::Connect(db->url(), 1));
  RM_ASSERT_OK_AND_ASSIGN(Queue vision, store->GetQueue("vision"));
  EXPECT_EQ(vision.weight, 2);
  EXPECT_FALSE(vision.elastic_idle_delay_seconds);
  RM_ASSERT_OK_AND_ASSIGN(Queue fallback, store->GetQueue("default"));
  EXPECT_FALSE(fallback.elastic_idle_delay_seconds);

  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store->TakeLeadership());
  vision.elastic_idle_delay_seconds = 600;
  RM_ASSERT_OK(store->UpdateQueue(vision, epoch));
  RM_ASSERT_OK_AND_ASSIGN(Queue got, store->GetQueue("vision"));
  EXPECT_EQ(got.elastic_idle_delay_seconds, std::optional<int64_t>(600));
}

// Jobs stored before migration 17 have no last size: they read as 0 (a restart starts them up
// to their replicas, as before), and a size stored later is read back.
TEST(PostgresJobStoreTest, JobsFromBeforeMigration17HaveNoLastSize) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  Job job = MakeJob("j-1");
  job.spec.replicas = 2;
  job.spec.min_replicas = 1;
  job.spec.max_replicas = 4;
  {
    pqxx::connection conn(db->url());
    pqxx::work tx(conn);
    ApplyMigrationsBefore(tx, 17);
    tx.exec_params(
        "INSERT INTO jobs (id, name, queue, priority, spec, state, attempt, token, "
        "last_event_seq, created_at_ms, updated_at_ms, started_at_ms) "
        "VALUES ('j-1', 'j-1', 'default', 0, $1::jsonb, 'PENDING', 1, '', 1, 1, 2, 0)",
        SpecToJson(job.spec));
    tx.exec(
        "INSERT INTO job_events (job_id, seq, state, attempt, reason, exit_code, time_ms) "
        "VALUES ('j-1', 1, 'PENDING', 1, 'submitted', 0, 1)");
    tx.commit();
  }
  RM_ASSERT_OK_AND_ASSIGN(auto store, PostgresJobStore::Connect(db->url(), 1));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store->GetJob("j-1"));
  EXPECT_EQ(got.last_replicas, 0);
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store->TakeLeadership());
  got.last_replicas = 4;
  got.last_event_seq = 2;
  WriteBatch batch;
  batch.jobs.push_back({JobWrite::Kind::kUpdate, got,
                        JobEvent{"j-1", 2, JobState::kPending, 1, "grown", 0, 3}, false,
                        std::nullopt, std::nullopt});
  RM_ASSERT_OK(store->Commit(batch, epoch));
  RM_ASSERT_OK_AND_ASSIGN(got, store->GetJob("j-1"));
  EXPECT_EQ(got.last_replicas, 4);
}

TEST(PostgresJobStoreTest, ANewDatabaseHasTheDefaultQueueWithoutQuotaLimits) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  RM_ASSERT_OK_AND_ASSIGN(auto store, PostgresJobStore::Connect(db->url(), 1));
  RM_ASSERT_OK_AND_ASSIGN(auto queues, store->ListQueues());
  ASSERT_EQ(queues.size(), 1u);
  EXPECT_EQ(queues[0].name, "default");
  EXPECT_TRUE(queues[0].unlimited());
  EXPECT_EQ(queues[0].weight, 1);
  EXPECT_GT(queues[0].created_at_ms, 0);
  EXPECT_EQ(CountRows(db->url(), "SELECT count(*) FROM queue_quotas"), 0);
}

TEST(PostgresJobStoreTest, SchedulersStartingTogetherApplyEachMigrationOnce) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  constexpr int kStarters = 4;
  std::vector<absl::StatusOr<std::unique_ptr<PostgresJobStore>>> stores;
  for (int i = 0; i < kStarters; ++i) stores.emplace_back(absl::UnknownError("not run"));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kStarters; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      stores[i] = PostgresJobStore::Connect(db->url(), 1);
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  int applied = 0;
  for (auto& store : stores) {
    RM_ASSERT_OK(store);
    applied += (*store)->migrations_applied();
  }
  EXPECT_EQ(applied, static_cast<int>(Migrations().size()));
}

// Strictly increasing from 1; a gap is allowed (branches take numbers ahead of their merge).
TEST(PostgresJobStoreTest, MigrationVersionsStrictlyIncreaseFromOne) {
  ASSERT_FALSE(Migrations().empty());
  EXPECT_EQ(Migrations()[0].version, 1);
  for (size_t i = 1; i < Migrations().size(); ++i) {
    EXPECT_GT(Migrations()[i].version, Migrations()[i - 1].version);
  }
}

TEST(PostgresJobStoreTest, UnreachablePostgresIsUnavailableNamingTheHost) {
  RM_ASSERT_OK_AND_ASSIGN(int port, PickFreePort());
  std::string url = absl::StrCat("postgresql://postgres:hunter2@127.0.0.1:", port, "/rm");
  auto store = PostgresJobStore::Connect(url, 2);
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr(absl::StrCat("127.0.0.1:", port, "/rm")));
  EXPECT_THAT(std::string(store.status().message()), ::testing::Not(HasSubstr("hunter2")));
}

TEST(PostgresJobStoreTest, AMissingDatabaseIsUnavailable) {
  RM_ASSERT_OK_AND_ASSIGN(std::string admin, TestDatabase::AdminUrl());
  auto store =
      PostgresJobStore::Connect(TestDatabase::UrlForDatabase(admin, "rm_no_such_database"), 1);
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("rm_no_such_database"));
}

TEST(PostgresJobStoreTest, PoolSizeBelowOneIsInvalidArgument) {
  RM_ASSERT_OK_AND_ASSIGN(std::string url, SharedDatabase::Url());
  EXPECT_THAT(PostgresJobStore::Connect(url, 0), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PostgresJobStoreTest, ABrokenConnectionIsUnavailableOnceThenReconnected) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  RM_ASSERT_OK_AND_ASSIGN(auto store, PostgresJobStore::Connect(db->url(), 1));
  Job job = MakeJob("j-1");
  RM_ASSERT_OK(store->CreateJob(job, FirstEvent(job)));
  // What a Postgres restart or failover does to open connections.
  RM_ASSERT_OK(
      Exec(db->admin_url(), absl::StrCat("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                         "WHERE datname = '",
                                         db->name(), "' AND pid <> pg_backend_pid()")));
  auto broken = store->GetJob("j-1");
  EXPECT_THAT(broken, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr(db->name()));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store->GetJob("j-1"));
  EXPECT_EQ(got.id, "j-1");
  // The prepared statements came back with the new connection.
  Job started = got;
  started.state = JobState::kStarting;
  RM_ASSERT_OK(store->UpdateJob(started, std::nullopt));
}

TEST(PostgresJobStoreTest, ACorruptStoredSpecIsDataLoss) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  RM_ASSERT_OK_AND_ASSIGN(auto store, PostgresJobStore::Connect(db->url(), 1));
  Job job = MakeJob("j-1");
  RM_ASSERT_OK(store->CreateJob(job, FirstEvent(job)));
  RM_ASSERT_OK(Exec(db->url(), "UPDATE jobs SET spec = '{\"no_such_field\": 1}' WHERE id = 'j-1'"));
  EXPECT_THAT(store->GetJob("j-1"), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(store->ListActiveJobs(), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(PostgresJobStoreTest, SpecIsStoredAsQueryableJsonbAndIndexedColumns) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  RM_ASSERT_OK_AND_ASSIGN(auto store, PostgresJobStore::Connect(db->url(), 1));
  Job job = MakeJob("j-1", "research", 7, "req-1");
  RM_ASSERT_OK(store->CreateJob(job, FirstEvent(job)));
  EXPECT_EQ(CountRows(db->url(),
                      "SELECT count(*) FROM jobs WHERE spec->>'name' = 'train-j-1' AND "
                      "queue = 'research' AND priority = 7 AND name = 'train-j-1' AND "
                      "state = 'PENDING' AND request_id = 'req-1'"),
            1);
  // An unknown state cannot be written, whatever the caller does.
  EXPECT_FALSE(Exec(db->url(), "UPDATE jobs SET state = 'BOGUS'").ok());
}

// A submit's audit entry is stored in the job's own transaction, and only for a job the commit
// created: a request id that names an earlier job adds none.
TEST(PostgresJobStoreTest, ASubmitsAuditEntryIsStoredWithTheJobItCreated) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  RM_ASSERT_OK_AND_ASSIGN(auto store, PostgresJobStore::Connect(db->url(), 1));
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store->TakeLeadership());
  auto create = [&](const std::string& id, const std::string& request_id) {
    Job job = MakeJob(id, "default", 0, request_id);
    AuditRecord audit;
    audit.at_ms = 1234;
    audit.principal = "tok-1";
    audit.team = "team-a";
    audit.role = "member";
    audit.peer = "ipv4:127.0.0.1:5555";
    audit.action = "SubmitJob";
    audit.resource = id;
    audit.detail = "queue=default";
    WriteBatch batch;
    batch.jobs.push_back(
        {JobWrite::Kind::kCreate, job, FirstEvent(job), false, std::nullopt, audit});
    return store->Commit(batch, epoch);
  };
  RM_ASSERT_OK_AND_ASSIGN(CommitResult first, create("j-1", "req-1"));
  ASSERT_TRUE(first.created.at(0).ok());
  EXPECT_FALSE(first.created[0]->existing);
  RM_ASSERT_OK_AND_ASSIGN(CommitResult again, create("j-2", "req-1"));
  ASSERT_TRUE(again.created.at(0).ok());
  EXPECT_TRUE(again.created[0]->existing);
  EXPECT_EQ(CountRows(db->url(),
                      "SELECT count(*) FROM audit_log WHERE resource = 'j-1' AND action = "
                      "'SubmitJob' AND principal = 'tok-1' AND team = 'team-a' AND role = "
                      "'member' AND detail = 'queue=default' AND at_ms = 1234"),
            1);
  EXPECT_EQ(CountRows(db->url(), "SELECT count(*) FROM audit_log"), 1)
      << "the repeated request id must add no entry";
}

// What an operator, a backup or a replica of the database sees of a registry secret: sealed
// bytes that hold no trace of it, in a row whose plaintext column is empty.
TEST(PostgresJobStoreTest, TheStoredBytesOfARegistryCredentialDoNotContainItsSecret) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  RM_ASSERT_OK_AND_ASSIGN(auto store, PostgresJobStore::Connect(db->url(), 1));
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store->TakeLeadership());
  RM_ASSERT_OK_AND_ASSIGN(SecretBox box, SecretBox::FromKey(std::string(kSecretKeyBytes, 'k')));
  const std::string secret = "hunter2-registry-password";
  RM_ASSERT_OK_AND_ASSIGN(std::string sealed,
                          box.Seal(secret, SealingContext("vision", "ghcr.io")));
  RM_ASSERT_OK(store->SetRegistryCredential({.team = "vision",
                                             .registry = "ghcr.io",
                                             .username = "robot",
                                             .sealed_secret = sealed,
                                             .updated_at_ms = 1},
                                            epoch));
  pqxx::connection conn(db->url());
  pqxx::work tx(conn);
  // Every column as text, the bytea in hex and as escaped bytes, and its raw bytes.
  const std::string row = tx.exec1(
                                "SELECT t::text || encode(sealed_secret, 'escape') FROM "
                                "registry_credentials t")[0]
                              .as<std::string>();
  const pqxx::row raw =
      tx.exec1("SELECT sealed_secret, plaintext_secret IS NULL FROM registry_credentials");
  const std::string bytes = pqxx::binarystring(raw[0]).str();
  EXPECT_THAT(row, HasSubstr("robot"));
  EXPECT_THAT(row, ::testing::Not(HasSubstr(secret)));
  EXPECT_THAT(row, ::testing::Not(HasSubstr("hunter2")));
  EXPECT_THAT(bytes, ::testing::Not(HasSubstr("hunter2")));
  EXPECT_EQ(bytes, sealed);
  EXPECT_TRUE(raw[1].as<bool>());
  EXPECT_THAT(box.Open(bytes, SealingContext("vision", "ghcr.io")), IsOkAndHolds(secret));
}

// A database of schema 14 held registry secrets in plaintext: migration 15 keeps them (the
// scheduler seals them at its next start), and a sealed write clears the plaintext.
TEST(PostgresJobStoreTest, PlaintextRegistrySecretsFromMigration14AreKeptUntilSealed) {
  RM_ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
  {
    pqxx::connection conn(db->url());
    pqxx::work tx(conn);
    ApplyMigrationsBefore(tx, 15);
    tx.exec(
        "INSERT INTO registry_credentials (team, registry, username, secret, updated_at_ms) "
        "VALUES ('vision', 'ghcr.io', 'robot', 'old-plain', 7)");
    tx.commit();
  }
  RM_ASSERT_OK_AND_ASSIGN(auto store, PostgresJobStore::Connect(db->url(), 1));
  RM_ASSERT_OK_AND_ASSIGN(auto credentials, store->ListRegistryCredentials());
  const StoredRegistryCredential old{.team = "vision",
                                     .registry = "ghcr.io",
                                     .username = "robot",
                                     .plaintext_secret = "old-plain",
                                     .updated_at_ms = 7};
  EXPECT_THAT(credentials, ::testing::ElementsAre(old));

  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store->TakeLeadership());
  StoredRegistryCredential sealed = old;
  sealed.plaintext_secret.clear();
  sealed.sealed_secret = std::string("\x01sealed\0", 8);
  RM_ASSERT_OK(store->SetRegistryCredential(sealed, epoch));
  EXPECT_EQ(CountRows(db->url(),
                      "SELECT count(*) FROM registry_credentials WHERE plaintext_secret IS NULL "
                      "AND length(sealed_secret) = 8"),
            1);
  // The schema itself refuses a row with both, or neither.
  EXPECT_FALSE(Exec(db->url(), "UPDATE registry_credentials SET plaintext_secret = 'x'").ok());
  EXPECT_FALSE(Exec(db->url(), "UPDATE registry_credentials SET sealed_secret = NULL").ok());
}

}  // namespace
}  // namespace ringmaster::scheduler::store_test
