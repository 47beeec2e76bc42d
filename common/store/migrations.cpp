#include "common/store/migrations.hpp"

#include <pqxx/pqxx>

#include "common/store/session_sql.hpp"

namespace aclaim::common {

namespace {
// An arbitrary constant that names "aclaim schema migration" among advisory locks.
constexpr long long kMigrationLockKey = 0x61636c61696d31LL;

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
            pqxx::work txn(conn, "migrate");
            const auto seen = txn.exec_params(sql::kMigrationApplied.text, m.version);
            if (!seen.empty()) continue;
            txn.exec(m.sql);
            txn.exec_params(sql::kMigrationRecord.text, m.version, m.name);
            txn.commit();
            report.applied.push_back(m.name);
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
