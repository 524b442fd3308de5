// The Postgres schema of the scheduler as numbered migrations, and the code that applies them
// at start-up.
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_MIGRATIONS_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_MIGRATIONS_H_

#include <pqxx/pqxx>
#include <vector>

namespace ringmaster::scheduler {

struct Migration {
  int version;       // 1, 2, 3, ... in order
  const char* name;  // a few words, for logs
  const char* sql;   // one or more statements
};

// Every migration, in version order. Append-only (see migrations.cc).
const std::vector<Migration>& Migrations();

// Brings the database up to the newest migration:
//  1. In a transaction holding the advisory lock below, create schema_migrations if missing.
//  2. For each migration, in order, in its own transaction: take the advisory lock (so that
//     scheduler replicas starting together apply each migration once, the others waiting),
//     skip it if schema_migrations already lists its version, else run its SQL and record it.
// Returns how many migrations it applied (0 when the schema was current). Throws libpqxx
// exceptions; run it through PostgresPool::Run, which turns them into a Status.
int ApplyMigrations(pqxx::connection& conn);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_MIGRATIONS_H_
