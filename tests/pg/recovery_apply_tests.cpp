// Recovery against a real PostgreSQL: the survey, --apply on locked current rows, idempotence, and
// the operator's quarantine resolutions.

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "common/ops/recovery_store.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/pg_time.hpp"
#include "tests/support/process.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"

using namespace aclaim;
using ops::ApplyAction;
using ops::RecoveryClass;
using store::JobState;
using testing::kLease;
using testing::kT0;
using testing::read_one;

using namespace std::chrono_literals;

namespace {

constexpr const char* kActor = "aclaimctl:test";

struct Fixture : testing::StoreFixture {
    std::unique_ptr<pqxx::connection> conn = db.connect();
    ops::RecoveryStore recovery{*conn};

    void sql(const std::string& text) {
        pqxx::work t(*conn);
        t.exec(text);
        t.commit();
    }
    /// Publishes a result the row never completed: the contradiction no CHECK can see.
    void forge_result(store::JobId id, store::Generation g) {
        sql("INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts, "
            "result_ref, at) VALUES (1, " +
            std::to_string(id) + ", 'completed', 'default', " + std::to_string(g) +
            ", 1, 'forged', aclaim_ts(" + std::to_string(base::to_micros(clock.now())) + "))");
    }
};

ops::ClassCounts counts(long terminal, long live, long expired, long pending, long inconsistent,
                        long parked = 0) {
    return {terminal, live, expired, pending, inconsistent, parked, 0};  // no waiting job here
}

/// Everything in the three tables, as text.
std::string everything(pqxx::connection& c) {
    pqxx::read_transaction t(c);
    return t
        .exec1(
            "SELECT (SELECT coalesce(string_agg(j::text, ';' ORDER BY id), '') FROM jobs j)"
            " || '|' || (SELECT coalesce(string_agg(r::text, ';' ORDER BY job_id), '')"
            " FROM job_results r) || '|' || (SELECT coalesce(string_agg(e::text, ';'"
            " ORDER BY id), '') FROM job_events e)")[0]
        .as<std::string>();
}

/// The row without the three columns a quarantine may change.
std::string row_except_quarantine(pqxx::connection& c, store::JobId id) {
    return read_one<std::string>(
        c,
        "SELECT (to_jsonb(j) - 'state' - 'quarantined_from' - 'quarantine_reason')::text "
        "FROM jobs j WHERE id = $1",
        id);
}

std::string text_of(pqxx::connection& c, const std::string& query) {
    pqxx::read_transaction t(c);
    const auto r = t.exec1(query);
    return r[0].is_null() ? "" : r[0].as<std::string>();
}

}  // namespace

TEST_CASE("the survey classifies every job and changes nothing", "[recovery]") {
    Fixture f;
    const auto done = f.enqueue_one();
    const auto failed = f.enqueue_one();
    const auto expired = f.enqueue_one();
    const auto forged = f.enqueue_one();
    f.enqueue_one();   // stays pending
    f.enqueue_one(2);  // organization 2: claimed live below
    f.enqueue_one(2);  // stays pending
    const auto a = f.claim("rev-a");
    REQUIRE(a.job_id == done);
    REQUIRE(f.store.complete({1, done, a.generation, "rev-a", "r/done"}, f.clock.now()).accepted());
    const auto b = f.claim("rev-b");
    REQUIRE(f.fail(failed, b.generation, "rev-b", "bad input", false).accepted());
    f.claim("rev-c");
    const auto d = f.claim("rev-d");
    f.forge_result(forged, d.generation);
    f.clock.advance(kLease);
    f.claim("rev-e", 2);
    const auto before = everything(*f.conn);

    const auto report = f.recovery.survey(f.clock.now());
    CHECK(report.totals == counts(2, 1, 1, 2, 1));
    CHECK(report.by_org.at(1) == counts(2, 0, 1, 1, 1));
    CHECK(report.by_org.at(2) == counts(0, 1, 0, 1, 0));
    CHECK(report.expired == std::vector<store::JobId>{expired});
    REQUIRE(report.inconsistent.size() == 1);
    CHECK(report.inconsistent[0].row.id == forged);
    CHECK(report.inconsistent[0].classification.reason() == "result_for_unfinished_row");
    CHECK(report.orphans.empty());
    CHECK(everything(*f.conn) == before);

    const auto org2 = f.recovery.survey(f.clock.now(), 2);
    CHECK(org2.totals == counts(0, 1, 0, 1, 0));
    CHECK(org2.by_org.count(1) == 0);
}

TEST_CASE("apply quarantines a contradiction and touches nothing else of it", "[recovery]") {
    Fixture f;
    const auto id = f.enqueue_one();
    const auto lease = f.claim("rev-a");
    f.forge_result(id, lease.generation);
    f.clock.advance(kLease + 1us);  // expired too: it must be quarantined, not reclaimed
    const auto row_before = row_except_quarantine(*f.conn, id);
    const auto results_before = testing::results_snapshot(*f.conn, id);

    const auto outcomes = f.recovery.apply(f.recovery.survey(f.clock.now()), kActor);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].action == ApplyAction::Quarantined);
    CHECK(testing::job_state(*f.conn, id) == "quarantined");
    CHECK(row_except_quarantine(*f.conn, id) == row_before);
    CHECK(testing::results_snapshot(*f.conn, id) == results_before);
    CHECK(text_of(*f.conn, "SELECT quarantined_from FROM jobs") == "assigned");
    CHECK_THAT(text_of(*f.conn, "SELECT quarantine_reason FROM jobs"),
               Catch::StartsWith("result_for_unfinished_row: "));
    CHECK(testing::event_count(*f.conn, id, "quarantined") == 1);
    CHECK_THAT(text_of(*f.conn, "SELECT detail FROM job_events WHERE kind = 'quarantined'"),
               Catch::Contains("\nresult: org=1 generation=1 ref='forged'"));
    CHECK(text_of(*f.conn, "SELECT worker FROM job_events WHERE kind = 'quarantined'") == kActor);

    // The holder's late completion meets the quarantine.
    const auto t = f.store.complete({1, id, lease.generation, "rev-a", "late"}, f.clock.now());
    REQUIRE_FALSE(t.accepted());
    CHECK(*t.rejection == store::Rejection::Quarantined);
}

TEST_CASE("apply reclaims an expired lease; the next claim outranks the old holder", "[recovery]") {
    Fixture f;
    const auto id = f.enqueue_one();
    const auto old = f.claim("rev-a");
    f.clock.advance(kLease);
    const auto outcomes = f.recovery.apply(f.recovery.survey(f.clock.now()), kActor);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].action == ApplyAction::Reclaimed);
    CHECK(testing::job_state(*f.conn, id) == "pending");
    CHECK(testing::event_count(*f.conn, id, "reclaimed") == 1);

    const auto fresh = f.claim("rev-b");
    CHECK(fresh.job_id == id);
    CHECK(fresh.generation == old.generation + 1);
    const auto stale = f.store.complete({1, id, old.generation, "rev-a", "late"}, f.clock.now());
    CHECK(*stale.rejection == store::Rejection::StaleGeneration);
    CHECK(f.store.complete({1, id, fresh.generation, "rev-b", "good"}, f.clock.now()).accepted());
}

TEST_CASE("recovery's reclaim is the reaper's reclaim", "[recovery]") {
    for (const int max_attempts : {3, 1}) {
        DYNAMIC_SECTION("max_attempts " << max_attempts) {
            Fixture f;
            const auto ids = f.store.enqueue(
                1, {{0, "same", max_attempts}, {0, "same", max_attempts}}, f.clock.now());
            REQUIRE(f.store.claim(1, {"rev-a", 2}, kLease, f.clock.now()).leases.size() == 2);
            f.clock.advance(kLease);
            const auto by_recovery =
                f.recovery.apply_one(ids[1], RecoveryClass::Expired, f.clock.now(), kActor);
            CHECK(by_recovery.action ==
                  (max_attempts == 1 ? ApplyAction::Discarded : ApplyAction::Reclaimed));
            REQUIRE(f.store.reclaim_expired(f.clock.now(), 100).size() == 1);  // only ids[0] left
            const std::string row = "SELECT (to_jsonb(j) - 'id')::text FROM jobs j WHERE id = ";
            CHECK(text_of(*f.conn, row + std::to_string(ids[0])) ==
                  text_of(*f.conn, row + std::to_string(ids[1])));
            const std::string last =
                "SELECT concat_ws(',', org_id, generation, kind, worker, at) "
                "FROM job_events WHERE job_id = ";
            const std::string order = " ORDER BY id DESC LIMIT 1";
            CHECK(text_of(*f.conn, last + std::to_string(ids[0]) + order) ==
                  text_of(*f.conn, last + std::to_string(ids[1]) + order));
        }
    }
}

TEST_CASE("a second apply changes nothing", "[recovery]") {
    Fixture f;
    const auto forged = f.enqueue_one();
    f.enqueue_one();
    f.enqueue_one(2);
    f.forge_result(forged, f.claim("rev-a").generation);
    f.claim("rev-b");
    f.claim("rev-c", 2);
    f.clock.advance(kLease);
    const auto first = f.recovery.apply(f.recovery.survey(f.clock.now()), kActor);
    CHECK(first.size() == 3);
    const auto after_first = everything(*f.conn);

    const auto report = f.recovery.survey(f.clock.now());
    CHECK(report.totals == counts(0, 0, 0, 2, 1));  // the quarantined row stays inconsistent
    CHECK(report.inconsistent.at(0).classification.reason() == "already_quarantined");
    const auto second = f.recovery.apply(report, kActor);
    CHECK(second.empty());
    CHECK(everything(*f.conn) == after_first);
}

TEST_CASE("apply decides on the current row, not on the survey", "[recovery]") {
    Fixture f;
    const auto id = f.enqueue_one();
    f.claim("rev-a");
    f.clock.advance(kLease);
    const auto report = f.recovery.survey(f.clock.now());
    REQUIRE(report.expired == std::vector<store::JobId>{id});

    SECTION("the reaper reclaimed it and another worker claimed it meanwhile") {
        f.store.reclaim_expired(f.clock.now(), 100);
        const auto fresh = f.claim("rev-b");
        const auto row = testing::job_snapshot(*f.conn, id);
        const auto outcomes = f.recovery.apply(report, kActor);
        REQUIRE(outcomes.size() == 1);
        CHECK(outcomes[0].surveyed == RecoveryClass::Expired);
        CHECK(outcomes[0].locked == RecoveryClass::Live);
        CHECK(outcomes[0].action == ApplyAction::Unchanged);
        CHECK(testing::job_snapshot(*f.conn, id) == row);
        CHECK(
            f.store.complete({1, id, fresh.generation, "rev-b", "good"}, f.clock.now()).accepted());
    }
    SECTION("a result appeared meanwhile: quarantined instead of reclaimed") {
        f.forge_result(id, 1);
        const auto outcomes = f.recovery.apply(report, kActor);
        REQUIRE(outcomes.size() == 1);
        CHECK(outcomes[0].locked == RecoveryClass::Inconsistent);
        CHECK(outcomes[0].action == ApplyAction::Quarantined);
        CHECK(testing::event_count(*f.conn, id, "reclaimed") == 0);
    }
    SECTION("a holder of the row lock commits first; apply waits and sees its change") {
        auto holder_conn = f.db.connect();
        const int holder_pid = holder_conn->backendpid();
        pqxx::work holder(*holder_conn);
        holder.exec_params("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", id);
        // Catch's assertions are not thread-safe: the thread only records, the test checks.
        ops::ApplyOutcome outcome;
        std::thread apply([&] {
            outcome = f.recovery.apply_one(id, RecoveryClass::Expired, f.clock.now(), kActor);
        });
        // Commit only once apply is seen waiting for the row lock, so that it really races it.
        auto watcher = f.db.connect();
        REQUIRE(testing::eventually(
            [&] {
                pqxx::read_transaction t(*watcher);
                // This holder's own waiter: other suites share the server and wait on theirs.
                return t.exec_params1(
                            "SELECT count(*) FROM pg_stat_activity "
                            "WHERE $1::int = ANY (pg_blocking_pids(pid))",
                            holder_pid)[0]
                           .as<int>() > 0;
            },
            std::chrono::seconds(10)));
        // What a renewal racing the outage would look like, had the lease not yet run out.
        holder.exec_params("UPDATE jobs SET lease_expires_at = aclaim_ts($2) WHERE id = $1", id,
                           f.clock.now() + kLease);
        holder.commit();
        apply.join();
        CHECK(outcome.locked == RecoveryClass::Live);
        CHECK(outcome.action == ApplyAction::Unchanged);
        CHECK(testing::job_state(*f.conn, id) == "assigned");
    }
}

TEST_CASE("operators resolve quarantined jobs on the record", "[recovery]") {
    Fixture f;
    const auto id = f.enqueue_one();
    const auto lease = f.claim("rev-a");
    const auto other = f.enqueue_one();

    SECTION("release and fail are refused for a job that is not quarantined") {
        const auto r = f.recovery.release(other, "looks fine", kActor, f.clock.now());
        REQUIRE(r.refusal);
        CHECK_THAT(*r.refusal, Catch::Contains("is pending, not quarantined"));
        CHECK(f.recovery.fail(9999, "gone", kActor, f.clock.now()).refusal == "no job 9999");
        CHECK(testing::event_count(*f.conn, other, "unquarantined") == 0);
    }
    SECTION("a job with a published result cannot be released, but can be failed") {
        f.forge_result(id, lease.generation);
        f.recovery.apply(f.recovery.survey(f.clock.now()), kActor);
        REQUIRE(testing::job_state(*f.conn, id) == "quarantined");
        const auto results = testing::results_snapshot(*f.conn, id);
        const auto refused = f.recovery.release(id, "retry it", kActor, f.clock.now());
        REQUIRE(refused.refusal);
        CHECK_THAT(*refused.refusal, Catch::Contains("has a published result"));
        CHECK(testing::job_state(*f.conn, id) == "quarantined");

        const auto failed = f.recovery.fail(id, "result unverifiable", kActor, f.clock.now());
        REQUIRE_FALSE(failed.refusal);
        CHECK(failed.state == JobState::Failed);
        CHECK(testing::job_state(*f.conn, id) == "failed");
        CHECK(testing::results_snapshot(*f.conn, id) == results);
        CHECK_THAT(text_of(*f.conn, "SELECT detail FROM job_events WHERE kind = 'unquarantined'"),
                   Catch::Contains("result unverifiable"));
        // The decision stands: the job is terminal now, and apply leaves it alone.
        const auto report = f.recovery.survey(f.clock.now());
        CHECK(report.inconsistent.empty());
        CHECK(f.recovery.apply(report, kActor).empty());
    }
    SECTION("release raises the generation above everything the log granted") {
        // The row fell behind its log: a claim at generation 3 that the row never shows.
        f.sql("INSERT INTO job_events (job_id, org_id, generation, kind, worker, at) VALUES (" +
              std::to_string(id) + ", 1, 3, 'claimed', 'rev-x', aclaim_ts(" +
              std::to_string(base::to_micros(f.clock.now())) + "))");
        f.recovery.apply(f.recovery.survey(f.clock.now()), kActor);
        REQUIRE(testing::job_state(*f.conn, id) == "quarantined");
        const auto released =
            f.recovery.release(id, "holder confirmed gone", kActor, f.clock.now());
        REQUIRE_FALSE(released.refusal);
        CHECK(released.generation == 3);
        CHECK(testing::job_state(*f.conn, id) == "pending");
        CHECK(f.recovery.survey(f.clock.now()).inconsistent.empty());
        f.claim("rev-b");  // `other` was enqueued later, so this is id again
        CHECK(testing::job_generation(*f.conn, id) == 4);
        const auto stale =
            f.store.complete({1, id, lease.generation, "rev-a", "late"}, f.clock.now());
        CHECK(*stale.rejection == store::Rejection::StaleGeneration);
    }
}

TEST_CASE("the survey is not fooled by rejected requests and reports orphans", "[recovery]") {
    Fixture f;
    const auto id = f.enqueue_one();
    f.claim("rev-a");
    // A rejected request records the generation the caller quoted, not one that was granted.
    CHECK_FALSE(f.store.complete({1, id, 99, "rev-a", "bogus"}, f.clock.now()).accepted());
    REQUIRE(testing::event_count(*f.conn, id, "rejected") == 1);
    f.sql(
        "INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts, "
        "result_ref, at) VALUES (1, 777, 'completed', 'default', 1, 1, 'lost', aclaim_ts(0))");
    const auto report = f.recovery.survey(f.clock.now());
    CHECK(report.totals == counts(0, 1, 0, 0, 0));
    REQUIRE(report.orphans.size() == 1);
    CHECK(report.orphans[0].job_id == 777);
    CHECK(report.orphans[0].reason == "orphan_result");
    CHECK(f.recovery.apply(report, kActor).empty());
}

TEST_CASE("recovery reads saved progress: its own holder's is history, a forged one is quarantined",
          "[recovery][progress]") {
    Fixture f;
    const auto honest = f.enqueue_one();
    const auto forged = f.enqueue_one();
    const auto a = f.claim("rev-a");
    REQUIRE(a.job_id == honest);
    store::TransitionRequest report{1, honest, a.generation, "rev-a"};
    report.percent = 60;
    report.checkpoint = "page=12";
    REQUIRE(f.store.progress(report, f.clock.now()).accepted());
    const auto b = f.claim("rev-b");
    REQUIRE(b.job_id == forged);
    // A report of a generation no claim granted: written beside the store, as a partial restore
    // or a manual repair could.
    f.sql("INSERT INTO job_progress (job_id, org_id, generation, percent, updated_at) VALUES (" +
          std::to_string(forged) + ", 1, " + std::to_string(b.generation + 1) + ", 90, aclaim_ts(" +
          std::to_string(base::to_micros(f.clock.now())) + "))");

    const auto survey = f.recovery.survey(f.clock.now());
    CHECK(survey.totals == counts(0, 1, 0, 0, 1));
    REQUIRE(survey.inconsistent.size() == 1);
    CHECK(survey.inconsistent[0].row.id == forged);
    REQUIRE(survey.inconsistent[0].progress);
    CHECK(survey.inconsistent[0].progress->generation == b.generation + 1);
    CHECK(survey.inconsistent[0].classification.reason() == "progress_of_ungranted_generation");

    const auto outcomes = f.recovery.apply(survey, kActor);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].job_id == forged);
    CHECK(outcomes[0].action == ApplyAction::Quarantined);
    CHECK(testing::job_state(*f.conn, forged) == "quarantined");
    CHECK(testing::job_state(*f.conn, honest) == "assigned");
    CHECK_THAT(
        text_of(*f.conn, "SELECT quarantine_reason FROM jobs WHERE id = " + std::to_string(forged)),
        Catch::StartsWith("progress_of_ungranted_generation: "));
    // The holder's checkpoint and the forged report both stay as they were: recovery reports,
    // it does not normalize.
    CHECK(text_of(*f.conn, "SELECT count(*) FROM job_progress") == "2");
    CHECK(text_of(*f.conn, "SELECT checkpoint FROM job_progress WHERE job_id = " +
                               std::to_string(honest)) == "page=12");
}

TEST_CASE("the survey reports a rate bucket ahead of the clock and leaves it as it is",
          "[recovery][rate]") {
    Fixture f;
    const auto now_us = base::to_micros(f.clock.now());
    f.sql(
        "INSERT INTO job_queues (org_id, queue, rate_per_s, rate_burst, rate_tokens, "
        "rate_refilled_us, updated_at) VALUES "
        "(1, 'exports', 2, 10, 0, " +
        std::to_string(now_us + 3'600'000'000LL) +
        ", now()), "
        "(1, 'sound', 2, 10, 3, " +
        std::to_string(now_us) +
        ", now()), "
        "(2, 'exports', 2, 10, 0, " +
        std::to_string(now_us + 7'200'000'000LL) + ", now())");
    const auto before = text_of(*f.conn,
                                "SELECT string_agg(q::text, ';' ORDER BY org_id, queue) "
                                "FROM job_queues q");
    const auto report = f.recovery.survey(f.clock.now());
    REQUIRE(report.queues.size() == 2);
    CHECK(report.queues[0].org_id == 1);
    CHECK(report.queues[0].queue == "exports");
    CHECK(report.queues[0].reason == "rate_bucket_ahead_of_clock");
    CHECK_THAT(report.queues[0].what, Catch::Contains("3600 s after now"));
    CHECK(report.queues[1].org_id == 2);
    CHECK(f.recovery.survey(f.clock.now(), 2).queues.size() == 1);
    CHECK(f.recovery.apply(report, kActor).empty());
    CHECK(text_of(*f.conn,
                  "SELECT string_agg(q::text, ';' ORDER BY org_id, queue) "
                  "FROM job_queues q") == before);
}
