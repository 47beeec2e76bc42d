#include "common/store/migrations.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "common/store/migration_sql.hpp"
#include "common/store/pg_field.hpp"
#include "common/store/session_sql.hpp"

namespace aclaim::store {

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

/// SQLSTATE undefined_function: a definition names a function not created yet.
constexpr const char* kUndefinedFunction = "42883";

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

/// Creates the ledger where the database has none. A database migrated by a release at or after
/// the baseline's version has this shape already (older ones are refused first).
void prepare_ledger(pqxx::nontransaction& session) {
    session.exec(sql::kMigrationsCreateTable.text);
    session.exec(sql::kDefinitionsCreateTable.text);
}

/// Refuses a database that stopped part way through the migrations the baseline replaced: the
/// release before the baseline carries their text, this one only their checksums.
void refuse_older_than_baseline(pqxx::connection& conn) {
    const int version = schema_version(conn);
    const int baseline = embedded_baseline().version;
    if (version == 0 || version >= baseline) return;
    throw SchemaTooOld(
        "the database is at schema version " + std::to_string(version) +
        ", before this release's baseline (version " + std::to_string(baseline) +
        "), whose migrations it no longer carries; nothing was applied. Run `aclaimctl migrate` "
        "of a release from before the baseline first (docs/operations.md, \"Upgrades and "
        "migrations\")");
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

/// The checksums a database may have recorded for a version: a migration's own, the one an
/// earlier release applied before the baseline replaced it, or the baseline's.
std::map<int, std::vector<const Migration*>> known_checksums() {
    std::map<int, std::vector<const Migration*>> out;
    for (const auto& m : embedded_history()) out[m.version].push_back(&m);
    for (const auto& m : embedded_migrations()) out[m.version].push_back(&m);
    return out;
}

void refuse_changed_migrations(const Recorded& recorded) {
    const auto known = known_checksums();
    const Baseline& baseline = embedded_baseline();
    for (const auto& [version, checksum] : recorded) {
        if (!checksum) continue;
        if (version == baseline.version && *checksum == baseline.checksum) continue;
        const auto it = known.find(version);
        if (it == known.end()) continue;  // a newer release's migration
        bool same = false;
        for (const Migration* m : it->second) same = same || m->checksum == *checksum;
        if (same) continue;
        const Migration& m = *it->second.back();
        throw ChecksumMismatch(
            "the database applied migration " + m.name + " with checksum " + *checksum +
            ", this binary carries it with checksum " + m.checksum +
            ": its text changed after it was applied there, or the database was migrated by "
            "another branch; nothing was applied (docs/operations.md, \"Upgrades and "
            "migrations\")");
    }
}

/// Applies the migrations the database lacks; true when it applied any.
bool apply_migrations(pqxx::connection& conn, const Recorded& recorded, MigrationReport& report) {
    bool ran = false;
    for (const auto& m : embedded_migrations()) {
        if (recorded.count(m.version) != 0) continue;
        in_retried_transaction(conn, m.name, [&m](pqxx::work& txn) {
            txn.exec(m.sql);
            txn.exec_params(sql::kMigrationRecordChecksum.text, m.version, m.name, m.checksum);
        });
        report.applied.push_back(m.name);
        ran = true;
    }
    return ran;
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

/// Applies `due` through `apply` (which runs one definition and records it), in the order given,
/// except that a definition naming a function not defined yet (an SQL-standard body is resolved
/// when it is created) is tried again after the others, until a round adds none.
template <typename Apply>
void apply_in_dependency_order(std::vector<const Definition*> due, MigrationReport& report,
                               Apply apply) {
    while (!due.empty()) {
        std::vector<const Definition*> later;
        std::exception_ptr last;
        for (const Definition* d : due) {
            try {
                apply(*d);
                report.definitions.push_back(d->name);
            } catch (const pqxx::sql_error& e) {
                if (e.sqlstate() != kUndefinedFunction) throw;
                later.push_back(d);
                last = std::current_exception();
            }
        }
        if (later.size() == due.size()) std::rethrow_exception(last);
        due = std::move(later);
    }
}

/// Runs one definition in `txn` as every definition runs: unqualified names in the schema, bodies
/// checked when called.
void run_definition(pqxx::transaction_base& txn, const Definition& d) {
    txn.exec(sql::kDefinitionSearchPath.text);
    txn.exec(sql::kDefinitionBodiesUnchecked.text);
    txn.exec(d.sql);
    txn.exec_params(sql::kDefinitionRecord.text, d.name, d.checksum);
}

/// An empty database, built from the baseline in one transaction: its tables, every definition,
/// its bindings, and the baseline's version in the ledger.
void apply_baseline(pqxx::connection& conn, MigrationReport& report) {
    const Baseline& baseline = embedded_baseline();
    const std::string name =
        (baseline.version < 1000 ? "00" : "") + std::to_string(baseline.version) + "_baseline";
    in_retried_transaction(conn, name, [&](pqxx::work& txn) {
        MigrationReport inner;
        txn.exec(baseline.tables);
        std::vector<const Definition*> all;
        for (const auto& d : embedded_definitions()) all.push_back(&d);
        apply_in_dependency_order(all, inner, [&txn](const Definition& d) {
            pqxx::subtransaction step(txn, "definition");
            run_definition(step, d);
            step.commit();
        });
        txn.exec(baseline.bindings);
        txn.exec_params(sql::kMigrationRecordChecksum.text, baseline.version, name,
                        baseline.checksum);
        report.definitions = std::move(inner.definitions);
    });
    report.applied.push_back(name);
}

void apply_definitions(pqxx::connection& conn, const Recorded& recorded, bool ran_migration,
                       MigrationReport& report) {
    if (!recorded.empty() && recorded.rbegin()->first > latest_schema_version()) {
        // A newer release migrated this database: its definitions are the ones its migrations
        // expect, and this binary's would put older texts back.
        report.notes.push_back("definitions left as they are: the database has migration " +
                               std::to_string(recorded.rbegin()->first) +
                               ", newer than this binary's " +
                               std::to_string(latest_schema_version()));
        return;
    }
    apply_in_dependency_order(
        definitions_due(conn, ran_migration), report, [&conn](const Definition& d) {
            in_retried_transaction(conn, d.name, [&d](pqxx::work& txn) { run_definition(txn, d); });
        });
}

void unlock(pqxx::connection& conn) {
    pqxx::nontransaction session(conn);
    session.exec_params(sql::kAdvisoryUnlock.text, kMigrationLockKey);
}
}  // namespace

int latest_schema_version() {
    const auto& all = embedded_migrations();
    return all.empty() ? embedded_baseline().version : all.back().version;
}

int schema_version(pqxx::connection& conn) {
    if (!has_migrations_table(conn)) return 0;
    pqxx::read_transaction txn(conn);
    return txn.exec1(sql::kMigrationsVersion.text)[0].as<int>();
}

bool migrations_current(pqxx::connection& conn) {
    return schema_version(conn) >= latest_schema_version();
}

MigrationReport migrate(pqxx::connection& conn) {
    MigrationReport report;
    {
        pqxx::nontransaction session(conn);
        session.exec_params(sql::kAdvisoryLock.text, kMigrationLockKey);
    }
    try {
        refuse_older_than_baseline(conn);
        {
            pqxx::nontransaction session(conn);
            prepare_ledger(session);
        }
        const auto recorded = recorded_migrations(conn);
        refuse_changed_migrations(recorded);
        if (recorded.empty()) apply_baseline(conn, report);
        const bool ran = apply_migrations(conn, recorded, report);
        apply_definitions(conn, recorded, ran, report);
    } catch (...) {
        unlock(conn);
        throw;
    }
    unlock(conn);
    report.version = schema_version(conn);
    return report;
}

}  // namespace aclaim::store
