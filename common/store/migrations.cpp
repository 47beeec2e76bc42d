#include "common/store/migrations.hpp"

#include <pqxx/pqxx>

namespace aclaim::common {

namespace {
// An arbitrary constant that names "aclaim schema migration" among advisory locks.
constexpr long long kMigrationLockKey = 0x61636c61696d31LL;

bool has_migrations_table(pqxx::connection& conn) {
    pqxx::read_transaction txn(conn);
    return txn.exec1("SELECT to_regclass('schema_migrations') IS NOT NULL")[0].as<bool>();
}
}  // namespace

int schema_version(pqxx::connection& conn) {
    if (!has_migrations_table(conn)) return 0;
    pqxx::read_transaction txn(conn);
    return txn.exec1("SELECT coalesce(max(version), 0) FROM schema_migrations")[0].as<int>();
}

bool migrations_current(pqxx::connection& conn) {
    const auto& all = embedded_migrations();
    return !all.empty() && schema_version(conn) >= all.back().version;
}

MigrationReport migrate(pqxx::connection& conn) {
    MigrationReport report;
    {
        pqxx::nontransaction session(conn);
        session.exec("SELECT pg_advisory_lock(" + std::to_string(kMigrationLockKey) + ")");
        session.exec(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())");
    }
    try {
        for (const auto& m : embedded_migrations()) {
            pqxx::work txn(conn, "migrate");
            const auto seen =
                txn.exec_params("SELECT 1 FROM schema_migrations WHERE version = $1", m.version);
            if (!seen.empty()) continue;
            txn.exec(m.sql);
            txn.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                            m.version, m.name);
            txn.commit();
            report.applied.push_back(m.name);
        }
    } catch (...) {
        pqxx::nontransaction session(conn);
        session.exec("SELECT pg_advisory_unlock(" + std::to_string(kMigrationLockKey) + ")");
        throw;
    }
    {
        pqxx::nontransaction session(conn);
        session.exec("SELECT pg_advisory_unlock(" + std::to_string(kMigrationLockKey) + ")");
    }
    report.version = schema_version(conn);
    return report;
}

}  // namespace aclaim::common
