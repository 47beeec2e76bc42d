#include "common/store/migrations.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "common/store/migration_sql.hpp"
#include "common/store/pg_field.hpp"
#include "common/store/session_sql.hpp"

namespace aclaim::common {

namespace {
// An arbitrary constant that names "aclaim schema migration" among advisory locks.
constexpr long long kMigrationLockKey = 0x61636c61696d31LL;

// A migration applied under load (docs/operations.md, "Upgrades and migrations") queues for the
// locks of the tables it changes behind the transactions in flight, and holds up those that
// arrive meanwhile. One of those can hold a table the migration reaches later while it waits for
// one the migration already holds: PostgreSQL then rolls one side back (deadlock_detected),
// possibly the migration. A lock that does not come within the bound (kMigrationLockTimeout)
// rolls the migration back too, rather than stalling every claim and completion behind it.
// Either way the transaction changed nothing, so it is tried again after a pause, a bounded
// number of times; any other error ends the run.
constexpr int kAttempts = 20;

/// Says on stderr that a step was rolled back by the load and waits before its next attempt.
void retry_after(const std::string& name, const std::string& sqlstate, int attempt) {
    std::fprintf(stderr,
                 "migrate: %s rolled back (SQLSTATE %s, the load holds its tables), trying again "
                 "(attempt %d of %d)\n",
                 name.c_str(), sqlstate.c_str(), attempt + 1, kAttempts);
    std::this_thread::sleep_for(std::chrono::milliseconds(100 * attempt));
}

/// Runs `step` in a transaction of its own under the lock bound, committed, retried as above.
template <typename Step>
void in_retried_transaction(pqxx::connection& conn, const std::string& name, Step step) {
    for (int attempt = 1;; ++attempt) {
        try {
            pqxx::work txn(conn, "migrate");
            txn.exec(sql::kMigrationLockTimeout.text);
            step(txn);
            txn.commit();
            return;
        } catch (const pqxx::deadlock_detected&) {
            // libpqxx 6 throws a deadlock as a transaction_rollback, which is not an sql_error.
            if (attempt == kAttempts) throw;
            retry_after(name, "40P01", attempt);
        } catch (const pqxx::sql_error& e) {
            if (e.sqlstate() != "55P03" || attempt == kAttempts) throw;  // lock not available
            retry_after(name, e.sqlstate(), attempt);
        }
    }
}

bool has_migrations_table(pqxx::connection& conn) {
    pqxx::read_transaction txn(conn);
    return txn.exec1(sql::kMigrationsTableExists.text)[0].as<bool>();
}

/// Creates the ledger, or brings one written by an earlier release to this shape.
void prepare_ledger(pqxx::nontransaction& session) {
    session.exec(sql::kMigrationsCreateTable.text);
    if (!session.exec1(sql::kMigrationsHaveChecksum.text)[0].as<bool>()) {
        session.exec(sql::kMigrationsAddChecksum.text);
    }
    session.exec(sql::kDefinitionsCreateTable.text);
}

/// Applied versions and the checksum each was recorded with (none before checksums were kept).
using Recorded = std::map<int, std::optional<std::string>>;

Recorded recorded_migrations(pqxx::connection& conn) {
    pqxx::read_transaction txn(conn);
    Recorded out;
    for (const auto& row : txn.exec(sql::kMigrationsRecorded.text)) {
        out.emplace(row[0].as<int>(), optional_of<std::string>(row[1]));
    }
    return out;
}

void refuse_changed_migrations(const Recorded& recorded) {
    for (const auto& m : embedded_migrations()) {
        const auto it = recorded.find(m.version);
        if (it == recorded.end() || !it->second || *it->second == m.checksum) continue;
        throw ChecksumMismatch(
            "the database applied migration " + m.name + " with checksum " + *it->second +
            ", this binary carries it with checksum " + m.checksum +
            ": its text changed after it was applied there, or the database was migrated by "
            "another branch; nothing was applied (docs/operations.md, \"Upgrades and "
            "migrations\")");
    }
}

void apply_migrations(pqxx::connection& conn, const Recorded& recorded, MigrationReport& report) {
    for (const auto& m : embedded_migrations()) {
        if (recorded.count(m.version) != 0) continue;
        in_retried_transaction(conn, m.name, [&m](pqxx::work& txn) {
            txn.exec(m.sql);
            txn.exec_params(sql::kMigrationRecordChecksum.text, m.version, m.name, m.checksum);
        });
        report.applied.push_back(m.name);
    }
}

/// The definitions to apply: every one after a migration ran, otherwise those whose text the
/// database has not applied.
std::vector<const Definition*> definitions_due(pqxx::connection& conn, bool all) {
    std::vector<const Definition*> due;
    pqxx::read_transaction txn(conn);
    for (const auto& d : embedded_definitions()) {
        if (!all) {
            const auto row = txn.exec_params(sql::kDefinitionChecksum.text, d.name);
            if (!row.empty() && row[0][0].as<std::string>() == d.checksum) continue;
        }
        due.push_back(&d);
    }
    return due;
}

void apply_definitions(pqxx::connection& conn, const Recorded& recorded, MigrationReport& report) {
    const auto& all = embedded_migrations();
    if (!all.empty() && !recorded.empty() && recorded.rbegin()->first > all.back().version) {
        // A newer release migrated this database: its definitions are the ones its migrations
        // expect, and this binary's would put older texts back.
        report.notes.push_back("definitions left as they are: the database has migration " +
                               std::to_string(recorded.rbegin()->first) +
                               ", newer than this binary's " + std::to_string(all.back().version));
        return;
    }
    for (const Definition* d : definitions_due(conn, !report.applied.empty())) {
        in_retried_transaction(conn, d->name, [d](pqxx::work& txn) {
            txn.exec(sql::kDefinitionSearchPath.text);
            txn.exec(sql::kDefinitionBodiesUnchecked.text);
            txn.exec(d->sql);
            txn.exec_params(sql::kDefinitionRecord.text, d->name, d->checksum);
        });
        report.definitions.push_back(d->name);
    }
}

void unlock(pqxx::connection& conn) {
    pqxx::nontransaction session(conn);
    session.exec_params(sql::kAdvisoryUnlock.text, kMigrationLockKey);
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
    }
    try {
        {
            pqxx::nontransaction session(conn);
            prepare_ledger(session);
        }
        const auto recorded = recorded_migrations(conn);
        refuse_changed_migrations(recorded);
        apply_migrations(conn, recorded, report);
        apply_definitions(conn, recorded, report);
    } catch (...) {
        unlock(conn);
        throw;
    }
    unlock(conn);
    report.version = schema_version(conn);
    return report;
}

}  // namespace aclaim::common
