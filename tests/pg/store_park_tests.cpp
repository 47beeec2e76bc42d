// Jobs finished outside the fleet (protocol 1.6, schema/baseline/tables.sql): the holder parks its
// job under a callback token bound to the job and its generation; the outside system's callback
// (aclaim_finish_parked, the SQL API the coordinator's POST /v1/callback also calls) is accepted
// once, only while the job is parked at that generation and before the park's deadline; a
// replayed, stale or forged token is refused with its reason and audited; at the deadline the
// reaper's expire_parks applies the queue's retry policy; a parked job is cancellable.

#include <barrier>
#include <catch2/catch.hpp>
#include <pqxx/pqxx>
#include <thread>

#include "common/ops/checker.hpp"
#include "common/store/assignment_store.hpp"
#include "tests/support/checker_support.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using store::JobState;
using store::Rejection;
using store::TransitionRequest;

using namespace std::chrono_literals;

namespace {

/// Tokens as the coordinator draws them: 64 hex digits (here fixed, so a test can name them).
std::string token_of(char digit) {
    return std::string(64, digit);
}

TransitionRequest park_of(const store::Lease& l, const std::string& worker, base::Instant deadline,
                          const std::string& token, std::string note = "sent to the lab") {
    TransitionRequest q{1, l.job_id, l.generation, worker};
    q.park_deadline = deadline;
    q.token = token;
    q.note = std::move(note);
    return q;
}

/// What aclaim_finish_parked answered.
struct Finish {
    bool accepted = false;
    std::string reason;
    std::string state;
    std::string detail;
};

Finish finish(pqxx::connection& c, const std::string& token, const std::string& outcome,
              const std::string& result, base::Instant now) {
    pqxx::work t(c);
    const auto r = t.exec_params1(
        "SELECT accepted, reason, coalesce(state, '') AS state, detail "
        "FROM aclaim_finish_parked($1, $2, $3, now_us => $4, caller => 'test')",
        token, outcome, result, base::to_micros(now));
    t.commit();
    return {r["accepted"].as<bool>(), r["reason"].as<std::string>(), r["state"].as<std::string>(),
            r["detail"].as<std::string>()};
}

long count_of(pqxx::connection& c, const std::string& query) {
    pqxx::read_transaction t(c);
    return t.exec1(query)[0].as<long>();
}

/// The job's published results as "generation|result_ref", one per line.
std::string result_of(pqxx::connection& c, store::JobId id) {
    return read_one<std::string>(
        c,
        "SELECT coalesce(string_agg(generation || '|' || result_ref, E'\\n'), '') "
        "FROM job_results WHERE job_id = $1",
        id);
}

void check_history_clean(pqxx::connection& c) {
    check_clean(ops::check(ops::load_history(c)));
}

}  // namespace

TEST_CASE_METHOD(HeldByA,
                 "a parked job's callback is accepted once, and its replay refused and audited",
                 "[park][store]") {
    const auto token = token_of('a');

    const auto parked = store.park(park_of(held, "a", clock.now() + 10min, token), clock.now());
    REQUIRE(parked.accepted());
    CHECK(parked.state == JobState::Parked);
    CHECK(parked.lease_expires_at == clock.now() + 10min);
    CHECK(job_state(c, id) == "parked");
    CHECK(event_count(c, id, "parked") == 1);
    // Only the token's hash is kept.
    CHECK(count_of(c, "SELECT count(*) FROM job_parks WHERE token_hash = sha256(decode('" + token +
                          "', 'hex'))") == 1);
    CHECK(count_of(c, "SELECT count(*) FROM job_parks WHERE encode(token_hash, 'hex') = '" + token +
                          "'") == 0);

    // The holder handed the job over: its own completion is refused now.
    TransitionRequest complete{1, id, held.generation, "a", "ref-holder"};
    const auto late = store.complete(complete, clock.now());
    REQUIRE_FALSE(late.accepted());
    CHECK(*late.rejection == Rejection::LeaseExpired);
    CHECK_THAT(late.detail, Catch::Contains("parked"));

    clock.advance(1min);
    const auto first = finish(c, token, "completed", "ref-lab-7", clock.now());
    CHECK(first.accepted);
    CHECK(first.reason == "accepted");
    CHECK(first.state == "completed");
    CHECK(job_state(c, id) == "completed");
    CHECK(result_of(c, id) == "1|ref-lab-7");

    const auto replay = finish(c, token, "completed", "ref-lab-7", clock.now());
    CHECK_FALSE(replay.accepted);
    CHECK(replay.reason == "replayed");
    // A replay with another outcome changes nothing either.
    const auto other = finish(c, token, "failed", "changed my mind", clock.now());
    CHECK(other.reason == "replayed");
    CHECK(job_state(c, id) == "completed");
    CHECK(result_of(c, id) == "1|ref-lab-7");
    CHECK(event_count(c, id, "completed") == 1);
    CHECK(count_of(c, "SELECT count(*) FROM job_events WHERE job_id = " + std::to_string(id) +
                          " AND kind = 'rejected' AND detail LIKE '%(replayed)%'") == 2);
    check_history_clean(c);
}

TEST_CASE("two callbacks with one token at once: exactly one is accepted", "[park][store]") {
    StoreFixture f;
    const auto id = f.enqueue_one();
    const auto held = f.claim("a");
    const auto token = token_of('b');
    REQUIRE(
        f.store.park(park_of(held, "a", f.clock.now() + 10min, token), f.clock.now()).accepted());
    std::barrier start(2);
    std::array<Finish, 2> got;
    std::vector<std::thread> callers;
    for (int i = 0; i < 2; ++i) {
        callers.emplace_back([&, i] {
            pqxx::connection conn(f.db.dsn());
            start.arrive_and_wait();
            got[i] = finish(conn, token, i == 0 ? "completed" : "failed",
                            i == 0 ? "ref-0" : "failed by caller 1", f.clock.now());
        });
    }
    for (auto& t : callers) t.join();
    CHECK(got[0].accepted != got[1].accepted);
    const auto& loser = got[0].accepted ? got[1] : got[0];
    CHECK(loser.reason == "replayed");
    auto& c = f.store.connection();
    CHECK(event_count(c, id, "completed") + event_count(c, id, "failed") == 1);
    check_history_clean(c);
}

TEST_CASE(
    "the park's deadline is a failed attempt: the retry policy applies and the token is stale",
    "[park][store][reaper]") {
    StoreFixture f;
    auto& c = f.store.connection();
    const auto id = f.enqueue_one(1, 2);
    const auto first = f.claim("a");
    const auto t1 = token_of('c');
    REQUIRE(f.store.park(park_of(first, "a", f.clock.now() + 30s, t1), f.clock.now()).accepted());

    // Not yet due: the reaper leaves it.
    f.clock.advance(29s);
    CHECK(f.store.expire_parks(f.clock.now(), 10).empty());
    CHECK(job_state(c, id) == "parked");

    // Past the deadline, before the reaper ran: refused, and the job stays for the reaper.
    f.clock.advance(2s);
    const auto early = finish(c, t1, "completed", "ref-late", f.clock.now());
    CHECK_FALSE(early.accepted);
    CHECK(early.reason == "deadline_passed");
    CHECK(job_state(c, id) == "parked");

    const auto expired = f.store.expire_parks(f.clock.now(), 10);
    REQUIRE(expired.size() == 1);
    CHECK(expired[0].job_id == id);
    CHECK(expired[0].generation == first.generation);
    CHECK(expired[0].state == JobState::Pending);  // no backoff: claimable again at once
    CHECK(count_of(c, "SELECT count(*) FROM job_events WHERE job_id = " + std::to_string(id) +
                          " AND kind = 'reclaimed' AND detail LIKE '%park deadline passed%'") == 1);

    const auto stale = finish(c, t1, "completed", "ref-late", f.clock.now());
    CHECK_FALSE(stale.accepted);
    CHECK(stale.reason == "stale");
    CHECK(job_state(c, id) == "pending");

    // The next holder parks it again under a new token; the old one stays stale.
    const auto second = f.claim("b");
    CHECK(second.generation > first.generation);
    const auto t2 = token_of('d');
    REQUIRE(f.store.park(park_of(second, "b", f.clock.now() + 30s, t2), f.clock.now()).accepted());
    CHECK(finish(c, t1, "completed", "ref-old", f.clock.now()).reason == "stale");

    // The last attempt's park expiring discards the job.
    f.clock.advance(31s);
    const auto last = f.store.expire_parks(f.clock.now(), 10);
    REQUIRE(last.size() == 1);
    CHECK(last[0].state == JobState::Discarded);
    CHECK(job_state(c, id) == "discarded");
    CHECK(finish(c, t2, "completed", "ref-2", f.clock.now()).reason == "stale");
    check_history_clean(c);
}

TEST_CASE_METHOD(
    HeldByA, "a forged or malformed token names no job: refused and counted in park_refusal_counts",
    "[park][store]") {
    REQUIRE(
        store.park(park_of(held, "a", clock.now() + 10min, token_of('e')), clock.now()).accepted());
    const auto before = job_snapshot(c, id);

    const auto forged = finish(c, token_of('f'), "completed", "ref-forged", clock.now());
    CHECK_FALSE(forged.accepted);
    CHECK(forged.reason == "unknown_token");
    const auto malformed = finish(c, "not-a-token", "completed", "ref-forged", clock.now());
    CHECK(malformed.reason == "unknown_token");
    // Upper-case hex is not the wire's form either.
    CHECK(finish(c, std::string(64, 'E'), "completed", "x", clock.now()).reason == "unknown_token");

    CHECK(job_snapshot(c, id) == before);
    // Counted, not logged a row each: one row per source, reason and hour
    // (schema/baseline/tables.sql).
    CHECK(count_of(c,
                   "SELECT sum(refusals) FROM park_refusal_counts "
                   "WHERE reason = 'unknown_token'") == 1);
    CHECK(count_of(c, "SELECT sum(refusals) FROM park_refusal_counts WHERE reason = 'malformed'") ==
          2);
    CHECK(count_of(c, "SELECT count(*) FROM park_refusal_counts WHERE source LIKE 'test as %'") ==
          2);
    // Nothing in the job's own log: the forger named no job.
    CHECK(event_count(c, id, "rejected") == 0);

    // Bad arguments are errors of the call, with the token never looked at.
    pqxx::work t(c);
    CHECK_THROWS_AS(
        t.exec("SELECT * FROM aclaim_finish_parked('" + token_of('e') + "', 'done', 'x')"),
        pqxx::data_exception);
}

TEST_CASE_METHOD(HeldByA, "a parked job is cancellable, and its token is stale from then on",
                 "[park][store]") {
    const auto token = token_of('1');
    REQUIRE(store.park(park_of(held, "a", clock.now() + 10min, token), clock.now()).accepted());
    {
        pqxx::work t(c);
        const auto r = t.exec_params(
            "SELECT was FROM aclaim_cancel_jobs(1, ARRAY[$1::bigint], 'operator x', 'not needed', "
            "$2)",
            id, base::to_micros(clock.now()));
        t.commit();
        REQUIRE(r.size() == 1);
        CHECK(r[0][0].as<std::string>() == "parked");
    }
    CHECK(job_state(c, id) == "cancelled");
    const auto stale = finish(c, token, "completed", "ref", clock.now());
    CHECK_FALSE(stale.accepted);
    CHECK(stale.reason == "stale");
    CHECK_THAT(stale.detail, Catch::Contains("cancelled"));
    // The reaper finds nothing to end.
    clock.advance(11min);
    CHECK(store.expire_parks(clock.now(), 10).empty());
    check_history_clean(c);
}

TEST_CASE_METHOD(HeldByA, "PARK is fenced like a completion; a re-sent PARK replaces the token",
                 "[park][store][fencing]") {
    auto stale = park_of(held, "a", clock.now() + 1min, token_of('2'));
    stale.generation = held.generation + 1;
    const auto r1 = store.park(stale, clock.now());
    REQUIRE_FALSE(r1.accepted());
    CHECK(*r1.rejection == Rejection::StaleGeneration);
    const auto r2 = store.park(park_of(held, "b", clock.now() + 1min, token_of('2')), clock.now());
    REQUIRE_FALSE(r2.accepted());
    CHECK(*r2.rejection == Rejection::NotAssignee);
    CHECK(job_state(c, id) == "assigned");
    CHECK(event_count(c, id, "rejected") == 2);

    REQUIRE(
        store.park(park_of(held, "a", clock.now() + 1min, token_of('3')), clock.now()).accepted());
    // The reply was lost; the holder parks again: the latest token is the one that works.
    REQUIRE(
        store.park(park_of(held, "a", clock.now() + 1min, token_of('4')), clock.now()).accepted());
    CHECK(finish(c, token_of('3'), "completed", "ref", clock.now()).reason == "unknown_token");
    const auto retried = finish(c, token_of('4'), "retry", "lab busy", clock.now());
    CHECK(retried.accepted);
    CHECK(retried.state == "pending");
    CHECK(event_count(c, id, "released") == 1);

    // A lease that ran out cannot be parked.
    const auto again = claim("c");
    clock.advance(testing::kLease + 1s);
    const auto r3 = store.park(park_of(again, "c", clock.now() + 1min, token_of('5')), clock.now());
    REQUIRE_FALSE(r3.accepted());
    CHECK(*r3.rejection == Rejection::LeaseExpired);
    check_history_clean(c);
}
