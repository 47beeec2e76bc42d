// Row-level security on jobs, job_events and job_results: through the aclaim_coordinator role a
// statement without any org_id filter sees, changes and adds only rows of the organization the
// transaction's aclaim.org_id setting names; unset sees nothing; 'system' sees everything.

#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include "common/store/assignment_store.hpp"
#include "common/store/store_sql.hpp"
#include "tests/pg/coordinator_client.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

using namespace std::chrono_literals;

namespace {

constexpr base::Instant kNow = base::instant_from_micros(1'700'000'000'000'000);

/// Jobs in organizations 1 (three), 2 (two); one org-2 job completed so job_results has a row.
void seed(const TestDatabase& db) {
    store::AssignmentStore store(db.dsn());
    store.enqueue(1, {{0, "a", 3}, {0, "b", 3}, {0, "c", 3}}, kNow);
    store.enqueue(2, {{0, "x", 3}, {0, "y", 3}}, kNow);
    const auto claimed = store.claim(2, {"w2", 1}, 10'000'000us, kNow);
    const auto& lease = claimed.leases.at(0);
    store.complete({2, lease.job_id, lease.generation, "w2", "ref"}, kNow + 1us);
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

/// The rows of jobs, job_events and job_results `scope` sees through aclaim_coordinator.
using Visible = std::array<long long, 3>;
Visible visible(const TestDatabase& db, const std::string& scope) {
    return {scoped(db, scope, "SELECT count(*) FROM jobs"),
            scoped(db, scope, "SELECT count(*) FROM job_events"),
            scoped(db, scope, "SELECT count(*) FROM job_results")};
}

/// A transaction acting as aclaim_coordinator for organization `org`.
void act_for(pqxx::work& txn, const std::string& org) {
    txn.exec("SET LOCAL ROLE aclaim_coordinator");
    txn.exec_params("SELECT set_config('aclaim.org_id', $1, true)", org);
}

store::StoreOptions row_secure() {
    store::StoreOptions o;
    o.row_security = true;
    o.application_name = "aclaim-rls-test";
    return o;
}

/// A plaintext coordinator on a free port, logging in with `dsn`.
coordinator::CoordinatorOptions options_for(const std::string& dsn) {
    spdlog::set_level(spdlog::level::err);
    auto o = plaintext_options(dsn);
    // These coordinators run on a ManualClock, which the drain's quiet window would wait on for
    // good: stopping ends the drain at once instead. Database deadlines are put beyond its jumps.
    o.router.drain_timeout_ms = 0;
    o.connection.db_deadline_ms = kManualClockDbDeadlineMs;
    return o;
}

/// For TEST_CASE_METHOD: a database holding seed()'s rows.
struct Seeded {
    Seeded() { seed(db); }
    TestDatabase db;
};

}  // namespace

TEST_CASE_METHOD(Seeded,
                 "RLS: an unscoped count through the coordinator role sees only its organization",
                 "[security][rls]") {
    // Five jobs in all, as the cross-organization setting shows.
    CHECK(scoped(db, "system", "SELECT count(*) FROM jobs") == 5);
    // Jobs, events, results.
    CHECK(visible(db, "1") == Visible{3, 3, 0});
    CHECK(visible(db, "2") == Visible{2, 4, 1});
    CHECK(visible(db, "3")[0] == 0);
}

TEST_CASE_METHOD(Seeded,
                 "RLS: without the setting nothing is visible, and a malformed one raises nothing",
                 "[security][rls]") {
    const auto unset = visible(db, "");
    CHECK(unset[0] == 0);
    CHECK(unset[1] == 0);
    CHECK(scoped(db, "1 OR true", "SELECT count(*) FROM jobs") == 0);
    CHECK(scoped(db, "-1", "SELECT count(*) FROM jobs") == 0);
}

TEST_CASE_METHOD(Seeded, "RLS: an unscoped UPDATE changes only the organization's rows",
                 "[security][rls]") {
    auto conn = db.connect();
    {
        pqxx::work txn(*conn);
        act_for(txn, "1");
        CHECK(txn.exec("UPDATE jobs SET priority = 9").affected_rows() == 3);
        txn.commit();
    }
    pqxx::read_transaction check(*conn);
    CHECK(check.exec1("SELECT count(*) FROM jobs WHERE priority = 9")[0].as<int>() == 3);
    CHECK(
        check.exec1("SELECT count(*) FROM jobs WHERE priority = 9 AND org_id <> 1")[0].as<int>() ==
        0);
}

TEST_CASE_METHOD(Seeded, "RLS: a row of another organization cannot be written",
                 "[security][rls]") {
    auto conn = db.connect();
    pqxx::work txn(*conn);
    act_for(txn, "1");
    // The same row in the transaction's own organization goes in: what stops the other is the
    // policy, not a missing privilege.
    txn.exec("SAVEPOINT own");
    CHECK(txn.exec("INSERT INTO job_events (job_id, org_id, generation, kind, at) "
                   "VALUES (1, 1, 0, 'enqueued', now())")
              .affected_rows() == 1);
    txn.exec("ROLLBACK TO SAVEPOINT own");
    try {
        txn.exec(
            "INSERT INTO job_events (job_id, org_id, generation, kind, at) "
            "VALUES (1, 2, 0, 'enqueued', now())");
        FAIL("a job_events row of organization 2 was written in organization 1's scope");
    } catch (const pqxx::sql_error& e) {
        CHECK(std::string(e.what()).find("row-level security") != std::string::npos);
    }
}

TEST_CASE_METHOD(Seeded, "RLS: the setting is per transaction and does not leak to the next",
                 "[security][rls]") {
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

TEST_CASE("RLS: a row-security store answers every transition as the plain store does",
          "[security][rls]") {
    TestDatabase db;
    store::AssignmentStore owner(db.dsn());
    store::AssignmentStore store(db.dsn(), row_secure());
    const auto one = store.enqueue(1, {{0, "a", 3}, {0, "b", 3}, {0, "c", 3}}, kNow);
    const auto two = store.enqueue(2, {{0, "x", 3}, {0, "y", 3}}, kNow);
    REQUIRE(one.size() == 3);
    REQUIRE(two.size() == 2);

    const auto a = store.claim(1, {"w1", 1}, 10'000'000us, kNow);
    REQUIRE(a.status == store::ClaimOutcome::Status::Claimed);
    CHECK(a.leases.at(0).job_id == one[0]);
    const auto x = store.claim_batch(2, std::vector<store::ClaimRequest>{{"w2", 1}, {"w3", 1}},
                                     10'000'000us, kNow);
    REQUIRE(x.size() == 2);
    REQUIRE(x[0].leases.size() == 1);
    REQUIRE(x[1].leases.size() == 1);
    const auto& lx = x[0].leases[0];
    const auto& ly = x[1].leases[0];

    // Another organization's job: refused as such, and nothing is written.
    const auto foreign = store.complete({2, a.leases[0].job_id, 1, "w1", "r"}, kNow + 1us);
    REQUIRE(foreign.rejection);
    CHECK(*foreign.rejection == store::Rejection::OtherOrganization);
    CHECK_FALSE(store.complete({1, 999'999, 1, "w1", "r"}, kNow + 1us).accepted());
    CHECK(*store.complete({1, 999'999, 1, "w1", "r"}, kNow + 1us).rejection ==
          store::Rejection::UnknownJob);
    // A stale generation in its own organization: refused, and the refusal is audited there.
    const auto stale = store.complete({1, a.leases[0].job_id, 7, "w1", "r"}, kNow + 1us);
    REQUIRE(stale.rejection);
    CHECK(*stale.rejection == store::Rejection::StaleGeneration);
    CHECK(event_count(owner.connection(), a.leases[0].job_id, "rejected") == 1);

    // Coalesced renewals and completions across two organizations, one foreign request among them.
    const auto renewed = store.renew_batch(
        std::vector<store::TransitionRequest>{{1, a.leases[0].job_id, 1, "w1", ""},
                                              {2, lx.job_id, lx.generation, "w2", ""},
                                              {1, ly.job_id, ly.generation, "w3", ""}},
        20'000'000us, kNow + 2us);
    REQUIRE(renewed.size() == 3);
    CHECK(renewed[0].accepted());
    CHECK(renewed[1].accepted());
    CHECK(renewed[1].lease_expires_at == kNow + 2us + 20'000'000us);
    REQUIRE(renewed[2].rejection);
    CHECK(*renewed[2].rejection == store::Rejection::OtherOrganization);
    const auto done = store.complete_batch(
        std::vector<store::TransitionRequest>{{2, ly.job_id, ly.generation, "w3", "ry"},
                                              {1, a.leases[0].job_id, 1, "w1", "ra"},
                                              {2, lx.job_id, lx.generation, "w2", "rx"},
                                              {2, lx.job_id, lx.generation, "w2", "rx"}},
        kNow + 3us);
    REQUIRE(done.size() == 4);
    for (const auto& t : done) CHECK(t.accepted());
    CHECK(done[2].replayed != done[3].replayed);  // the duplicate is answered as a replay
    CHECK(job_state(owner.connection(), a.leases[0].job_id) == "completed");
    CHECK(job_state(owner.connection(), lx.job_id) == "completed");
    CHECK(job_state(owner.connection(), ly.job_id) == "completed");

    // The reaper's and the diagnosis's work spans organizations.
    const auto b = store.claim(1, {"w1", 1}, 1'000'000us, kNow + 4us);
    REQUIRE(b.leases.size() == 1);
    const auto auth = store.authority(lx.job_id);
    REQUIRE(auth);
    CHECK(auth->org_id == 2);
    const auto reclaimed = store.reclaim_expired(kNow + 4us + 2'000'000us, 10);
    REQUIRE(reclaimed.size() == 1);
    CHECK(reclaimed[0].job_id == b.leases[0].job_id);

    // Release and fail, in scope.
    const auto c = store.claim(1, {"w1", 2}, 10'000'000us, kNow + 5'000'000us);
    REQUIRE(c.leases.size() == 2);
    CHECK(store.release({1, c.leases[0].job_id, c.leases[0].generation, "w1"}, kNow + 5'000'001us)
              .accepted());
    CHECK(store
              .fail({.org = 1,
                     .job = c.leases[1].job_id,
                     .generation = c.leases[1].generation,
                     .worker = "w1",
                     .reason = "bad",
                     .retryable = false},
                    kNow + 5'000'001us)
              .state == store::JobState::Failed);
}

TEST_CASE(
    "RLS: a statement on a row-security store's connection that names no organization "
    "sees only the transaction's",
    "[security][rls]") {
    TestDatabase db;
    seed(db);
    store::AssignmentStore store(db.dsn(), row_secure());
    auto& conn = store.connection();
    CHECK(read_one<long long>(conn, "SELECT count(*) FROM jobs") == 0);
    {
        pqxx::work txn(conn);
        CHECK(txn.exec1("SELECT current_user")[0].as<std::string>() ==
              store::sql::kRowSecurityRole);
        txn.exec_prepared(store::sql::kScope.name, "1");
        CHECK(txn.exec1("SELECT count(*) FROM jobs")[0].as<int>() == 3);
        CHECK(txn.exec1("SELECT count(*) FROM job_results")[0].as<int>() == 0);
        CHECK(txn.exec("UPDATE jobs SET priority = 5").affected_rows() == 3);
        txn.exec_prepared(store::sql::kScope.name, "2");
        CHECK(txn.exec1("SELECT count(*) FROM job_results")[0].as<int>() == 1);
    }
    // The store's own transactions leave no scope behind them.
    store.claim(1, {"w1", 1}, 10'000'000us, kNow);
    CHECK(read_one<long long>(conn, "SELECT count(*) FROM jobs") == 0);
}

TEST_CASE("RLS: a coordinator whose login holds no table privilege serves through the role",
          "[security][rls]") {
    base::ManualClock clock(kNow);
    TestDatabase db;
    TestLogin login(db, "aclaim_login", "member", {store::sql::kRowSecurityRole});
    store::AssignmentStore owner(db.dsn());
    const auto ids = owner.enqueue(1, some_jobs(2), kNow);
    owner.enqueue(2, some_jobs(1), kNow);

    SECTION("row security on: each organization claims and completes its own jobs") {
        auto o = options_for(login.dsn);
        coordinator::Coordinator c(o, clock);
        c.start();
        zmq::context_t context;
        RawWorker w1(context, c.endpoint());
        RawWorker w2(context, c.endpoint());
        w1.hello("w1", 1);
        w2.hello("w2", 2);
        const auto job = w1.claim_one();
        CHECK(job.job_id == ids[0]);
        const auto theirs = w2.claim_one();
        CHECK(theirs.job_id != ids[0]);
        CHECK(theirs.job_id != ids[1]);

        auto req = w2.next_req();
        w2.send(proto::Complete{req, job.job_id, job.generation, "forged"});
        CHECK(w2.expect<proto::Rejected>(req).reason == "other_organization");
        req = w1.next_req();
        w1.send(proto::Complete{req, job.job_id, job.generation, "review"});
        CHECK(w1.expect<proto::Accepted>(req).state == "completed");
        c.stop();
        auto conn = db.connect();
        CHECK(job_state(*conn, job.job_id) == "completed");
        CHECK(event_count(*conn, job.job_id, "completed") == 1);
    }
    SECTION("row security off: the login inherits the policies and, unscoped, sees nothing") {
        auto o = options_for(login.dsn);
        o.connection.row_security = false;
        coordinator::Coordinator c(o, clock);
        c.start();
        GreetedWorker w1(c.endpoint(), "w1", 1);
        w1.expect<proto::NoWork>(w1.claim());
        c.stop();
        auto conn = db.connect();
        CHECK(job_state(*conn, ids[0]) == "pending");
    }
}

TEST_CASE("RLS: a coordinator whose login cannot act as the role refuses to start",
          "[security][rls]") {
    base::ManualClock clock(kNow);
    TestDatabase db;
    TestLogin login(db, "aclaim_login", "stranger");
    auto o = options_for(login.dsn);
    spdlog::set_level(spdlog::level::off);
    coordinator::Coordinator c(o, clock);
    CHECK_THROWS_WITH(c.start(), Catch::Contains("cannot act as aclaim_coordinator"));
}

}  // namespace aclaim::testing
