// The schema in one place: a fresh migrate, and a database upgraded from an older release, both
// print exactly schema/current.sql; definitions are re-applied when their text changes and only
// then; a database that applied a migration with another text is refused.

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

TEST_CASE("a database upgraded from an older release ends at schema/current.sql", "[schema]") {
    const auto& all = common::embedded_migrations();
    REQUIRE(!all.empty());
    // The release before repeatable definitions (every numbered migration, no definitions
    // ledger, no checksums), and one from before the later functions were redefined.
    const int from = GENERATE_COPY(all.back().version + 1, 20);
    const testing::OlderSchemaDatabase older("upgrade", from);
    pqxx::connection conn(older.dsn());
    const auto report = common::migrate(conn);
    CHECK(report.version == all.back().version);
    CHECK(report.definitions.size() == common::embedded_definitions().size());
    check_matches_current(older.dsn());
}

TEST_CASE("a definition is applied again when its text changes, and only then", "[schema]") {
    const testing::TestDatabase db;
    auto conn = db.connect();
    const std::string wake = "aclaim_wake(bigint,text)";
    const std::string defined = function_source(*conn, wake);
    {
        CHECK(common::migrate(*conn).definitions.empty());
        // The database's definition differs from the binary's: replaced by hand here, recorded
        // with another checksum, as after an older binary applied its text.
        pqxx::work txn(*conn);
        txn.exec(
            "CREATE OR REPLACE FUNCTION aclaim_wake(org bigint, queue_name text) RETURNS boolean "
            "LANGUAGE sql AS $$ SELECT false $$");
        txn.exec(
            "UPDATE schema_definitions SET checksum = 'older' WHERE name = "
            "'functions/aclaim_wake'");
        txn.commit();
    }
    const auto report = common::migrate(*conn);
    CHECK(report.applied.empty());
    CHECK(report.definitions == std::vector<std::string>{"functions/aclaim_wake"});
    CHECK(function_source(*conn, wake) == defined);
    CHECK(common::migrate(*conn).definitions.empty());
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
    const auto report = common::migrate(*conn);
    CHECK(report.applied.empty());
    CHECK(report.definitions.empty());
    REQUIRE(report.notes.size() == 1);
    CHECK(report.notes[0].find("9999") != std::string::npos);
}

TEST_CASE("migrate refuses a database that applied a migration with another text", "[schema]") {
    const testing::TestDatabase db;
    const auto& first = common::embedded_migrations().front();
    {
        auto conn = db.connect();
        pqxx::work txn(*conn);
        txn.exec_params("UPDATE schema_migrations SET checksum = 'edited' WHERE version = $1",
                        first.version);
        // A definition due, so that "nothing was applied" can be seen.
        txn.exec("DELETE FROM schema_definitions WHERE name = 'functions/aclaim_wake'");
        txn.commit();
    }
    {
        auto conn = db.connect();
        CHECK_THROWS_AS(common::migrate(*conn), common::ChecksumMismatch);
    }
    const auto r = testing::run_aclaimctl({"--dsn", db.dsn(), "migrate"});
    CHECK(r.code == 2);
    CHECK(r.err.find(first.name) != std::string::npos);
    CHECK(r.err.find("edited") != std::string::npos);
    auto conn = db.connect();
    pqxx::read_transaction txn(*conn);
    CHECK(
        txn.exec("SELECT 1 FROM schema_definitions WHERE name = 'functions/aclaim_wake'").empty());
}

TEST_CASE("migrate records the checksum of every migration it applies", "[schema]") {
    const testing::TestDatabase db;
    auto conn = db.connect();
    pqxx::read_transaction txn(*conn);
    for (const auto& m : common::embedded_migrations()) {
        const auto row = txn.exec_params1(
            "SELECT checksum FROM schema_migrations WHERE version = $1", m.version);
        CHECK(row[0].as<std::string>() == m.checksum);
    }
}
