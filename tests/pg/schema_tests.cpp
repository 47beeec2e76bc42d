// The schema in one place: a fresh migrate (the baseline, then what follows it), and a database the
// migrations before the baseline built, both print exactly schema/current.sql; definitions are
// re-applied when their text changes and only then; a database that applied a migration with
// another text, or that stopped before the baseline, is refused.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <string>

#include "common/store/migrations.hpp"
#include "tests/pg/ctl_run.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;

namespace {

const std::string kSchemaDir = std::string(ACLAIM_SOURCE_DIR) + "/schema";

/// schema/dump-schema of the database at `dsn`, and, when it differs from schema/current.sql,
/// the unified diff between them (empty when they agree).
std::string diff_from_current(const std::string& dsn) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("aclaim-schema-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string dumped = (dir / "migrated.sql").string();
    const std::string diff = (dir / "diff").string();
    const std::string dump = testing::shell_quote(kSchemaDir + "/dump-schema") + " " +
                             testing::shell_quote(dsn) + " >" + testing::shell_quote(dumped);
    REQUIRE(std::system(dump.c_str()) == 0);
    const std::string compare = "diff -u " + testing::shell_quote(kSchemaDir + "/current.sql") +
                                " " + testing::shell_quote(dumped) + " >" +
                                testing::shell_quote(diff);
    (void)std::system(compare.c_str());
    std::string out = testing::read_file(diff);
    std::filesystem::remove_all(dir);
    return out;
}

void check_matches_current(const std::string& dsn) {
    const std::string diff = diff_from_current(dsn);
    INFO("the migrated schema is not schema/current.sql (- the file, + the database):\n"
         << diff
         << "\nWhen the change is meant, run schema/regenerate-current and commit the file.");
    CHECK(diff.empty());
}

/// Rewrites the ledger as the releases before the baseline left it: each migration the baseline
/// replaced, recorded with its checksum, in place of the baseline's one row.
void record_history(pqxx::work& txn) {
    txn.exec("DELETE FROM schema_migrations");
    for (const auto& m : store::embedded_history()) {
        txn.exec_params(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            m.version, m.name, m.checksum);
    }
}

/// Records aclaim_wake's definition as applied with an older text, as after an older binary.
void record_older_wake(pqxx::work& txn) {
    txn.exec(
        "UPDATE schema_definitions SET checksum = 'older' WHERE name = 'functions/aclaim_wake'");
}

std::string function_source(pqxx::connection& conn, const std::string& name) {
    pqxx::read_transaction txn(conn);
    return txn.exec_params1("SELECT prosrc FROM pg_proc WHERE oid = $1::regprocedure", name)[0]
        .as<std::string>();
}

}  // namespace

TEST_CASE("a fresh migrate builds exactly schema/current.sql", "[schema]") {
    const testing::TestDatabase db;
    check_matches_current(db.dsn());
}

TEST_CASE("a database the migrations before the baseline built is at the baseline", "[schema]") {
    const auto& history = store::embedded_history();
    const auto& baseline = store::embedded_baseline();
    REQUIRE(!history.empty());
    CHECK(history.back().version == baseline.version);
    const testing::TestDatabase db;
    auto conn = db.connect();
    {
        // Its ledger as those releases left it: every migration the baseline replaced, with its
        // checksum, and a definition whose text an older release applied.
        pqxx::work txn(*conn);
        record_history(txn);
        record_older_wake(txn);
        txn.commit();
    }
    const auto report = store::migrate(*conn);
    CHECK(report.applied.empty());
    CHECK(report.definitions == std::vector<std::string>{"functions/aclaim_wake"});
    CHECK(report.version == baseline.version);
    check_matches_current(db.dsn());
}

TEST_CASE("migrate refuses a database that stopped before the baseline and applies nothing",
          "[schema]") {
    // Migrations 0001 to 0020 recorded, in the ledger's shape of those releases (no checksums).
    const testing::OlderSchemaDatabase older("old", 21);
    {
        pqxx::connection conn(older.dsn());
        CHECK_THROWS_AS(store::migrate(conn), store::SchemaTooOld);
    }
    const auto r = testing::run_aclaimctl({"--dsn", older.dsn(), "migrate"});
    CHECK(r.code == 2);
    CHECK(r.err.find("schema version 20") != std::string::npos);
    CHECK(r.err.find("baseline (version " + std::to_string(store::embedded_baseline().version)) !=
          std::string::npos);
    pqxx::connection conn(older.dsn());
    pqxx::read_transaction txn(conn);
    CHECK(txn.exec1("SELECT to_regclass('jobs') IS NULL AND to_regclass('schema_definitions') IS "
                    "NULL")[0]
              .as<bool>());
    long below = 0;
    for (const auto& m : store::embedded_history()) below += m.version < 21 ? 1 : 0;
    CHECK(txn.exec1("SELECT count(*) FROM schema_migrations")[0].as<long>() == below);
}

TEST_CASE("a definition is applied again when its text changes, and only then", "[schema]") {
    const testing::TestDatabase db;
    auto conn = db.connect();
    const std::string wake = "aclaim_wake(bigint,text)";
    const std::string defined = function_source(*conn, wake);
    {
        CHECK(store::migrate(*conn).definitions.empty());
        // The database's definition differs from the binary's: replaced by hand here, recorded
        // with another checksum, as after an older binary applied its text.
        pqxx::work txn(*conn);
        txn.exec(
            "CREATE OR REPLACE FUNCTION aclaim_wake(org bigint, queue_name text) RETURNS boolean "
            "LANGUAGE sql AS $$ SELECT false $$");
        record_older_wake(txn);
        txn.commit();
    }
    const auto report = store::migrate(*conn);
    CHECK(report.applied.empty());
    CHECK(report.definitions == std::vector<std::string>{"functions/aclaim_wake"});
    CHECK(function_source(*conn, wake) == defined);
    CHECK(store::migrate(*conn).definitions.empty());
}

TEST_CASE("definitions are left alone on a database a newer release migrated", "[schema]") {
    const testing::TestDatabase db;
    auto conn = db.connect();
    {
        pqxx::work txn(*conn);
        txn.exec(
            "INSERT INTO schema_migrations (version, name, checksum) "
            "VALUES (9999, '9999_from_the_future', 'newer')");
        txn.exec("UPDATE schema_definitions SET checksum = 'newer'");
        txn.commit();
    }
    const auto report = store::migrate(*conn);
    CHECK(report.applied.empty());
    CHECK(report.definitions.empty());
    REQUIRE(report.notes.size() == 1);
    CHECK(report.notes[0].find("9999") != std::string::npos);
}

TEST_CASE("migrate refuses a database that applied a migration with another text", "[schema]") {
    const testing::TestDatabase db;
    const auto& edited = store::embedded_history().at(4);
    {
        auto conn = db.connect();
        pqxx::work txn(*conn);
        record_history(txn);
        txn.exec_params("UPDATE schema_migrations SET checksum = 'edited' WHERE version = $1",
                        edited.version);
        // A definition due, so that "nothing was applied" can be seen.
        txn.exec("DELETE FROM schema_definitions WHERE name = 'functions/aclaim_wake'");
        txn.commit();
    }
    {
        auto conn = db.connect();
        CHECK_THROWS_AS(store::migrate(*conn), store::ChecksumMismatch);
    }
    const auto r = testing::run_aclaimctl({"--dsn", db.dsn(), "migrate"});
    CHECK(r.code == 2);
    CHECK(r.err.find(edited.name) != std::string::npos);
    CHECK(r.err.find("edited") != std::string::npos);
    auto conn = db.connect();
    pqxx::read_transaction txn(*conn);
    CHECK(
        txn.exec("SELECT 1 FROM schema_definitions WHERE name = 'functions/aclaim_wake'").empty());
}

TEST_CASE("migrate records the baseline and every migration it applies with its checksum",
          "[schema]") {
    const testing::TestDatabase db;
    auto conn = db.connect();
    pqxx::read_transaction txn(*conn);
    const auto& baseline = store::embedded_baseline();
    CHECK(txn.exec_params1("SELECT checksum FROM schema_migrations WHERE version = $1",
                           baseline.version)[0]
              .as<std::string>() == baseline.checksum);
    for (const auto& m : store::embedded_migrations()) {
        const auto row = txn.exec_params1(
            "SELECT checksum FROM schema_migrations WHERE version = $1", m.version);
        CHECK(row[0].as<std::string>() == m.checksum);
    }
}
