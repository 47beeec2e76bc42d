// Row-level security on jobs, job_events and job_results: through the aclaim_coordinator role a
// statement without any org_id filter sees, changes and adds only rows of the organization the
// transaction's aclaim.org_id setting names; unset sees nothing; 'system' sees everything.

#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include "common/assignment_store.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

namespace {

constexpr common::Micros kNow = 1'700'000'000'000'000;

/// Jobs in organizations 1 (three), 2 (two); one org-2 job completed so job_results has a row.
void seed(const TestDatabase& db) {
    common::AssignmentStore store(db.dsn());
    store.enqueue(1, {{0, "a", 3}, {0, "b", 3}, {0, "c", 3}}, kNow);
    store.enqueue(2, {{0, "x", 3}, {0, "y", 3}}, kNow);
    const auto claimed = store.claim(2, "w2", 1, 10'000'000, kNow);
    const auto& lease = claimed.leases.at(0);
    store.complete(2, lease.job_id, lease.generation, "w2", "ref", kNow + 1);
}

/// Runs `sql` as aclaim_coordinator with aclaim.org_id = `scope` (nothing when empty), in a
/// transaction that is rolled back; returns the first column of the first row.
long long scoped(const TestDatabase& db, const std::string& scope, const std::string& sql) {
    auto conn = db.connect();
    pqxx::work txn(*conn);
    txn.exec("SET LOCAL ROLE aclaim_coordinator");
    if (!scope.empty()) txn.exec_params("SELECT set_config('aclaim.org_id', $1, true)", scope);
    return txn.exec1(sql)[0].as<long long>();
}

}  // namespace

TEST_CASE("RLS: an unscoped count through the coordinator role sees only its organization",
          "[security][rls]") {
    TestDatabase db;
    seed(db);
    // Five jobs in all, as the cross-organization setting shows.
    CHECK(scoped(db, "system", "SELECT count(*) FROM jobs") == 5);
    CHECK(scoped(db, "1", "SELECT count(*) FROM jobs") == 3);
    CHECK(scoped(db, "2", "SELECT count(*) FROM jobs") == 2);
    CHECK(scoped(db, "3", "SELECT count(*) FROM jobs") == 0);
    CHECK(scoped(db, "1", "SELECT count(*) FROM job_events") == 3);
    CHECK(scoped(db, "2", "SELECT count(*) FROM job_events") == 4);
    CHECK(scoped(db, "1", "SELECT count(*) FROM job_results") == 0);
    CHECK(scoped(db, "2", "SELECT count(*) FROM job_results") == 1);
}

TEST_CASE("RLS: without the setting nothing is visible, and a malformed one raises nothing",
          "[security][rls]") {
    TestDatabase db;
    seed(db);
    CHECK(scoped(db, "", "SELECT count(*) FROM jobs") == 0);
    CHECK(scoped(db, "", "SELECT count(*) FROM job_events") == 0);
    CHECK(scoped(db, "1 OR true", "SELECT count(*) FROM jobs") == 0);
    CHECK(scoped(db, "-1", "SELECT count(*) FROM jobs") == 0);
}

TEST_CASE("RLS: an unscoped UPDATE changes only the organization's rows", "[security][rls]") {
    TestDatabase db;
    seed(db);
    auto conn = db.connect();
    {
        pqxx::work txn(*conn);
        txn.exec("SET LOCAL ROLE aclaim_coordinator");
        txn.exec("SELECT set_config('aclaim.org_id', '1', true)");
        CHECK(txn.exec("UPDATE jobs SET priority = 9").affected_rows() == 3);
        txn.commit();
    }
    pqxx::read_transaction check(*conn);
    CHECK(check.exec1("SELECT count(*) FROM jobs WHERE priority = 9")[0].as<int>() == 3);
    CHECK(check.exec1("SELECT count(*) FROM jobs WHERE priority = 9 AND org_id <> 1")[0].as<int>() ==
          0);
}

TEST_CASE("RLS: a row of another organization cannot be written", "[security][rls]") {
    TestDatabase db;
    seed(db);
    auto conn = db.connect();
    pqxx::work txn(*conn);
    txn.exec("SET LOCAL ROLE aclaim_coordinator");
    txn.exec("SELECT set_config('aclaim.org_id', '1', true)");
    CHECK_THROWS_AS(txn.exec("INSERT INTO job_events (job_id, org_id, generation, kind, at) "
                             "VALUES (1, 2, 0, 'enqueued', now())"),
                    pqxx::sql_error);
}

TEST_CASE("RLS: the setting is per transaction and does not leak to the next",
          "[security][rls]") {
    TestDatabase db;
    seed(db);
    auto conn = db.connect();
    {
        pqxx::work txn(*conn);
        txn.exec("SELECT set_config('aclaim.org_id', '1', true)");
        txn.commit();
    }
    pqxx::work txn(*conn);
    txn.exec("SET LOCAL ROLE aclaim_coordinator");
    CHECK(txn.exec1("SELECT count(*) FROM jobs")[0].as<int>() == 0);
}

}  // namespace aclaim::testing
