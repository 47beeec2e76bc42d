#include "common/store/migrations.hpp"

#include <chrono>
#include <cstdio>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "common/store/session_sql.hpp"

namespace aclaim::common {

namespace {
// An arbitrary constant that names "aclaim schema migration" among advisory locks.
constexpr long long kMigrationLockKey = 0x61636c61696d31LL;

// A migration applied under load (docs/operations.md, "Upgrades and migrations") queues for the
// locks of the tables it changes behind the transactions in flight, and holds up those that
// arrive meanwhile. One of those can hold a table the migration reaches later while it waits for
// one the migration already holds: PostgreSQL then rolls one side back (deadlock_detected), and
// that side may be the migration. A lock that does not come within the bound rolls the
// migration back too, rather than stalling every claim and completion behind it. Either way the
// migration's transaction changed nothing, so it is tried again after a pause, a bounded number
// of times; any other error ends the run.
constexpr int kAttempts = 20;
constexpr const char* kLockTimeout = "SET LOCAL lock_timeout = '5s'";

bool worth_retrying(const pqxx::sql_error& e) {
    return e.sqlstate() == "55P03";  // lock not available
}

/// Says on stderr that a migration was rolled back by the load and waits before its next attempt.
void retry_after(const std::string& name, const std::string& sqlstate, int attempt) {
    std::fprintf(stderr,
                 "migrate: %s rolled back (SQLSTATE %s, the load holds its tables), trying again "
                 "(attempt %d of %d)\n",
                 name.c_str(), sqlstate.c_str(), attempt + 1, kAttempts);
    std::this_thread::sleep_for(std::chrono::milliseconds(100 * attempt));
}

bool has_migrations_table(pqxx::connection& conn) {
    pqxx::read_transaction txn(conn);
    return txn.exec1(sql::kMigrationsTableExists.text)[0].as<bool>();
}
}  // namespace

int schema_version(pqxx::connection& conn) {
    if (!has_migrations_table(conn)) return 0;
    pqxx::read_transaction txn(conn);
    return txn.exec1(sql::kMigrationsVersion.text)[0].as<int>();
}

bool migrations_current(pqxx::connection& conn) {
    const auto& all = embedded_migrations();
    return !all.empty() && schema_version(conn) >= all.back().version;
}

MigrationReport migrate(pqxx::connection& conn) {
    MigrationReport report;
    {
        pqxx::nontransaction session(conn);
        session.exec_params(sql::kAdvisoryLock.text, kMigrationLockKey);
        session.exec(sql::kMigrationsCreateTable.text);
    }
    try {
        for (const auto& m : embedded_migrations()) {
            for (int attempt = 1;; ++attempt) {
                try {
                    pqxx::work txn(conn, "migrate");
                    const auto seen = txn.exec_params(sql::kMigrationApplied.text, m.version);
                    if (!seen.empty()) break;
                    txn.exec(kLockTimeout);
                    txn.exec(m.sql);
                    txn.exec_params(sql::kMigrationRecord.text, m.version, m.name);
                    txn.commit();
                    report.applied.push_back(m.name);
                    break;
                } catch (const pqxx::deadlock_detected&) {
                    // libpqxx 6 throws a deadlock as a transaction_rollback, which is not an
                    // sql_error, so the catch below would end the run instead of retrying it.
                    if (attempt == kAttempts) throw;
                    retry_after(m.name, "40P01", attempt);
                } catch (const pqxx::sql_error& e) {
                    if (!worth_retrying(e) || attempt == kAttempts) throw;
                    retry_after(m.name, e.sqlstate(), attempt);
                }
            }
        }
    } catch (...) {
        pqxx::nontransaction session(conn);
        session.exec_params(sql::kAdvisoryUnlock.text, kMigrationLockKey);
        throw;
    }
    {
        pqxx::nontransaction session(conn);
        session.exec_params(sql::kAdvisoryUnlock.text, kMigrationLockKey);
    }
    report.version = schema_version(conn);
    return report;
}

}  // namespace aclaim::common
