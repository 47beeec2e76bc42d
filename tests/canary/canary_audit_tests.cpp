// The canary's measurements against a real PostgreSQL: claim-order displacement read back from
// job_events, duplicate and stale events, the organization-scoped invariant check, and the lock
// sampler seeing a claim that waits on a held row lock.

#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>

#include "common/store/assignment_store.hpp"
#include "common/store/claim_plan.hpp"
#include "common/store/pg_time.hpp"
#include "drills/canary.d/audit.hpp"
#include "drills/canary.d/observers.hpp"
#include "tests/support/process.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using drills::AuditEvent;
using drills::AuditFollower;
using drills::AuditSlice;

using testing::kT0;

using namespace std::chrono_literals;

namespace {

constexpr base::Duration kLease = 60 * base::kSeconds;

std::vector<store::JobId> enqueue(store::AssignmentStore& store, store::OrgId org, int n) {
    std::vector<store::NewJob> jobs(static_cast<std::size_t>(n), {0, "canary-test", 3});
    return store.enqueue(org, jobs, kT0);
}

/// An audit event the way a broken coordinator would have written it.
void append_event(pqxx::connection& conn, store::JobId job, store::OrgId org,
                  store::Generation generation, const std::string& kind, base::Instant at) {
    pqxx::work txn(conn);
    txn.exec_params(
        "INSERT INTO job_events (job_id, org_id, generation, kind, worker, at) "
        "VALUES ($1, $2, $3, $4, 'forged', aclaim_ts($5))",
        job, org, generation, kind, base::to_micros(at));
    txn.commit();
}

/// Two passes: the first only learns how far the log goes, the second settles it.
AuditSlice settle(AuditFollower& follower, pqxx::connection& conn) {
    AuditSlice out = follower.advance(conn);
    out.add(follower.advance(conn));
    return out;
}

}  // namespace

TEST_CASE("canary audit: a claim past a locked better job is displaced by one", "[canary]") {
    testing::TestDatabase db;
    store::AssignmentStore store(db.dsn());
    const store::OrgId org = 11;
    const auto ids = enqueue(store, org, 3);

    // Another transaction holds the head job's row lock, as a concurrent claimer would.
    auto holder = db.connect();
    pqxx::work hold(*holder);
    hold.exec_params("SELECT id FROM jobs WHERE id = $1 FOR UPDATE", ids[0]);
    const auto first = store.claim(org, {"w1", 1}, kLease, kT0 + 1us);
    REQUIRE(first.status == store::ClaimOutcome::Status::Claimed);
    REQUIRE(first.leases[0].job_id == ids[1]);
    hold.abort();
    const auto second = store.claim(org, {"w2", 1}, kLease, kT0 + 2us);
    REQUIRE(second.leases[0].job_id == ids[0]);

    auto conn = db.connect();
    AuditFollower follower(org);
    const auto before = follower.advance(*conn);
    CHECK(before.displacement.empty());  // nothing is settled before a second pass
    const auto settled = follower.advance(*conn);
    CHECK(settled.displacement == std::vector<std::int64_t>{1, 0});
    CHECK(settled.duplicate_claims == 0);
    CHECK(settled.stale_acceptances == 0);
    CHECK(follower.advance(*conn).displacement.empty());  // each claim is settled once

    const auto summary = drills::summarize_displacement(settled.displacement);
    CHECK(summary.max == 1);
    CHECK(summary.displaced_share == Approx(0.5));
}

TEST_CASE("canary audit: claims of one statement do not displace each other", "[canary]") {
    AuditFollower follower(1);
    AuditSlice out;
    // Three jobs in claim order 1, 2, 3; one statement at time 50 takes 2 and 1 (its insert order
    // need not follow the rank), a later one takes 3.
    follower.apply({{1, 1, 0, "enqueued", 10, 0, 10},
                    {2, 2, 0, "enqueued", 10, 0, 10},
                    {3, 3, 0, "enqueued", 10, 0, 10},
                    {4, 2, 1, "claimed", 50, 0, 10},
                    {5, 1, 1, "claimed", 50, 0, 10},
                    {6, 3, 1, "claimed", 60, 0, 10}},
                   out);
    CHECK(out.displacement == std::vector<std::int64_t>{0, 0, 0});

    // A statement that passes over a pending better job is displaced, grouped or not.
    AuditFollower other(1);
    AuditSlice skipped;
    other.apply({{1, 1, 0, "enqueued", 10, 0, 10},
                 {2, 2, 0, "enqueued", 10, 0, 10},
                 {3, 3, 0, "enqueued", 10, 0, 10},
                 {4, 3, 1, "claimed", 50, 0, 10},
                 {5, 2, 1, "claimed", 50, 0, 10}},
                skipped);
    CHECK(skipped.displacement == std::vector<std::int64_t>{1, 1});
}

TEST_CASE("canary audit: a duplicate claim and a stale completion in the log are found",
          "[canary]") {
    testing::TestDatabase db;
    store::AssignmentStore store(db.dsn());
    const store::OrgId org = 12;
    const auto ids = enqueue(store, org, 2);
    const auto claimed = store.claim(org, {"w1", 1}, kLease, kT0 + 1us);
    REQUIRE(claimed.leases.at(0).job_id == ids[0]);

    auto conn = db.connect();
    // A second claim of the held job, then a completion of its first, superseded generation.
    append_event(*conn, ids[0], org, 2, "claimed", kT0 + 2us);
    append_event(*conn, ids[0], org, 1, "completed", kT0 + 3us);

    AuditFollower follower(org);
    const auto out = settle(follower, *conn);
    CHECK(out.duplicate_claims == 1);
    CHECK(out.stale_acceptances == 1);
    REQUIRE(out.evidence.size() == 2);
    CHECK(out.evidence[0].find("duplicate claim: job " + std::to_string(ids[0])) == 0);
    CHECK(out.evidence[1].find("stale acceptance") == 0);
}

TEST_CASE("canary check: the invariant checker judges the canary's organization only", "[canary]") {
    testing::TestDatabase db;
    store::AssignmentStore store(db.dsn());
    const store::OrgId mine = 13, other = 14;
    for (const store::OrgId org : {mine, other}) {
        enqueue(store, org, 1);
        const auto c = store.claim(org, {"w", 1}, kLease, kT0 + 1us);
        REQUIRE(
            store
                .complete({org, c.leases.at(0).job_id, c.leases[0].generation, "w", "r"}, kT0 + 2us)
                .accepted());
    }
    auto conn = db.connect();
    const auto other_job = pqxx::read_transaction(*conn)
                               .exec_params1("SELECT id FROM jobs WHERE org_id = $1", other)[0]
                               .as<store::JobId>();
    append_event(*conn, other_job, other, 1, "completed", kT0 + 3us);

    CHECK(drills::check_organization(*conn, mine).ok());
    const auto report = drills::check_organization(*conn, other);
    REQUIRE_FALSE(report.ok());
    CHECK(std::any_of(report.violations.begin(), report.violations.end(), [](const auto& v) {
        return v.invariant == ops::Invariant::SingleCompletion;
    }));
    CHECK(report.jobs == 1);
}

TEST_CASE("canary lock sampler: a claim waiting on a held row is seen with its lock wait",
          "[canary]") {
    testing::TestDatabase db;
    store::AssignmentStore store(db.dsn());
    const store::OrgId org = 15;
    const auto ids = enqueue(store, org, 2);

    auto holder = db.connect();
    const auto held_from = std::chrono::steady_clock::now();
    pqxx::work hold(*holder);
    hold.exec_params("SELECT id FROM jobs WHERE id = $1 FOR UPDATE", ids[0]);

    drills::LockSampler sampler(db.dsn(), std::chrono::milliseconds(20));
    sampler.start();
    std::vector<store::JobId> claimed;
    std::thread waiter([&] {
        // The store's claim statement with its candidates locked FOR UPDATE alone, so that it
        // waits for the held row instead of passing over it: a claim's lock wait to be seen.
        std::string text = store::sql::claim_statement(store::ClaimPlan{}).text;
        const std::string skip = "FOR UPDATE SKIP LOCKED";
        text.replace(text.find(skip), skip.size(), "FOR UPDATE");
        pqxx::connection conn(db.dsn());
        conn.prepare("canary_test_waiting_claim", text);
        pqxx::work txn(conn);
        for (const auto& row : txn.exec_prepared("canary_test_waiting_claim", org, "waiter", 1,
                                                 kT0 + 1us, kLease, "{default}")) {
            claimed.push_back(row["id"].as<store::JobId>());
        }
        txn.commit();
    });
    drills::LockSlice seen;
    const bool waited = testing::eventually(
        [&] {
            seen.add(sampler.take());
            return seen.claim_waits > 0;
        },
        std::chrono::seconds(10));
    // The claim has waited since before it was first seen. Keep the row locked until a sample
    // taken 300 ms later: that sample must report a wait of about 300 ms, so a wait measured
    // in the wrong unit, from the wrong instant or not at all cannot pass.
    const auto seen_waiting_at = std::chrono::steady_clock::now();
    std::this_thread::sleep_until(seen_waiting_at + 300ms);
    seen.add(sampler.take());
    const auto samples_before = seen.samples;
    testing::eventually(
        [&] {
            seen.add(sampler.take());
            return seen.samples > samples_before;
        },
        std::chrono::seconds(10));
    hold.abort();
    const auto held_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - held_from)
            .count();
    waiter.join();
    sampler.stop();

    REQUIRE(waited);
    CHECK(seen.other_waits == 0);
    CHECK(seen.waiting_max >= 1);
    CHECK(seen.claim_wait_max_ms >= 250);  // less a sample already under way at 300 ms
    // Nor longer than the row was held.
    CHECK(seen.claim_wait_max_ms <= held_ms);
    CHECK(seen.by_lock_type.size() >= 1);
    CHECK(sampler.thread().errors() == 0);
    REQUIRE(claimed.size() == 1);
    CHECK(claimed.at(0) == ids[0]);  // strict order: it waited for the head job
}
