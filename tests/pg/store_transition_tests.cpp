// Renew, complete, fail, release and reclaim: fencing, leases, organizations and atomicity.

#include <atomic>
#include <barrier>
#include <catch2/catch.hpp>
#include <pqxx/pqxx>
#include <thread>

#include "common/store/assignment_store.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"

using namespace aclaim;
using base::ManualClock;
using store::AssignmentStore;
using store::JobState;
using store::Rejection;
using testing::kLease;
using testing::kT0;

using namespace std::chrono_literals;

namespace {
using Fixture = testing::StoreFixture;
}  // namespace

TEST_CASE("generation strictly increases across claim, expiry, reclaim, claim",
          "[store][fencing]") {
    Fixture f;
    const auto id = f.enqueue_one();
    const auto first = f.claim("a");
    CHECK(first.generation == 1);
    f.clock.advance(kLease);
    const auto reclaimed = f.store.reclaim_expired(f.clock.now(), 100);
    REQUIRE(reclaimed.size() == 1);
    CHECK(reclaimed[0].job_id == id);
    CHECK(reclaimed[0].assignee == "a");
    CHECK(reclaimed[0].state == JobState::Pending);
    const auto second = f.claim("b");
    CHECK(second.job_id == id);
    CHECK(second.generation == 2);
    CHECK(second.attempts == 2);
    CHECK(testing::event_count(f.store.connection(), id, "reclaimed") == 1);
}

TEST_CASE("a stale completion is rejected with its reason and changes nothing",
          "[store][fencing]") {
    Fixture f;
    const auto id = f.enqueue_one();
    const auto old = f.claim("a");
    f.clock.advance(kLease + 1us);
    f.store.reclaim_expired(f.clock.now(), 100);
    const auto fresh = f.claim("b");
    auto& c = f.store.connection();
    const auto row = testing::job_snapshot(c, id);
    const auto results = testing::results_snapshot(c, id);

    auto t = f.store.complete({1, id, old.generation, "a", "late-result"}, f.clock.now());
    REQUIRE_FALSE(t.accepted());
    CHECK(*t.rejection == Rejection::StaleGeneration);
    CHECK_THAT(t.detail, Catch::Contains("claimed again at generation 2"));
    CHECK(testing::job_snapshot(c, id) == row);
    CHECK(testing::results_snapshot(c, id) == results);
    CHECK(testing::event_count(c, id, "completed") == 0);
    CHECK(testing::event_count(c, id, "rejected") == 1);

    // The current holder still completes.
    CHECK(f.store.complete({1, id, fresh.generation, "b", "good"}, f.clock.now()).accepted());
    CHECK(testing::results_snapshot(c, id).find("good") != std::string::npos);
}

TEST_CASE("rejection reasons", "[store][fencing]") {
    Fixture f;
    const auto id = f.enqueue_one();
    const auto l = f.claim("a");
    auto reason = [&](const store::Transition& t) {
        REQUIRE_FALSE(t.accepted());
        return *t.rejection;
    };
    CHECK(reason(f.store.complete({1, id + 1000, 1, "a", "r"}, f.clock.now())) ==
          Rejection::UnknownJob);
    CHECK(reason(f.store.complete({1, id, l.generation, "b", "r"}, f.clock.now())) ==
          Rejection::NotAssignee);
    CHECK(reason(f.store.complete({1, id, l.generation + 1, "a", "r"}, f.clock.now())) ==
          Rejection::StaleGeneration);
    f.clock.advance(kLease);
    CHECK(reason(f.store.complete({1, id, l.generation, "a", "r"}, f.clock.now())) ==
          Rejection::LeaseExpired);
    f.store.reclaim_expired(f.clock.now(), 10);
    CHECK(reason(f.store.complete({1, id, l.generation, "a", "r"}, f.clock.now())) ==
          Rejection::LeaseExpired);
    const auto l2 = f.claim("b");
    REQUIRE(f.store.complete({1, id, l2.generation, "b", "r2"}, f.clock.now()).accepted());
    CHECK(reason(f.store.complete({1, id, l2.generation, "b", "other"}, f.clock.now())) ==
          Rejection::AlreadyTerminal);

    SECTION("re-sending the same completion is answered as applied, not twice") {
        auto again = f.store.complete({1, id, l2.generation, "b", "r2"}, f.clock.now());
        CHECK(again.accepted());
        CHECK(again.replayed);
        CHECK(testing::event_count(f.store.connection(), id, "completed") == 1);
    }
}

TEST_CASE("organizations are isolated for claim, renew, complete and fail", "[store][org]") {
    Fixture f;
    const auto id = f.enqueue_one(1);
    CHECK(f.store.claim(2, {"intruder", 5}, kLease, f.clock.now()).leases.empty());
    const auto l = f.claim("a", 1);
    auto& c = f.store.connection();
    const auto row = testing::job_snapshot(c, id);
    for (const auto& t : {f.store.renew({2, id, l.generation, "a"}, kLease, f.clock.now()),
                          f.store.complete({2, id, l.generation, "a", "r"}, f.clock.now()),
                          f.store.fail({.org = 2,
                          .job = id,
                          .generation = l.generation,
                          .worker = "a",
                          .reason = "x",
                          .retryable = false},
                                       f.clock.now()),
                          f.store.release({2, id, l.generation, "a"}, f.clock.now())}) {
        REQUIRE_FALSE(t.accepted());
        CHECK(*t.rejection == Rejection::OtherOrganization);
    }
    CHECK(testing::job_snapshot(c, id) == row);
    pqxx::read_transaction txn(c);
    CHECK(txn.exec1("SELECT count(*) FROM job_events WHERE org_id <> 1")[0].as<int>() == 0);
}

TEST_CASE("renewal extends only a live lease of the current generation", "[store][lease]") {
    Fixture f;
    auto& c = f.store.connection();

    SECTION("live lease is extended") {
        const auto id = f.enqueue_one();
        const auto l = f.claim("a");
        f.clock.advance(kLease / 2);
        auto t = f.store.renew({1, id, l.generation, "a"}, kLease, f.clock.now());
        REQUIRE(t.accepted());
        CHECK(t.lease_expires_at == f.clock.now() + kLease);
    }
    SECTION("completed") {
        const auto id = f.enqueue_one();
        const auto l = f.claim("a");
        REQUIRE(f.store.complete({1, id, l.generation, "a", "r"}, f.clock.now()).accepted());
        const auto row = testing::job_snapshot(c, id);
        CHECK(*f.store.renew({1, id, l.generation, "a"}, kLease, f.clock.now()).rejection ==
              Rejection::AlreadyTerminal);
        CHECK(testing::job_snapshot(c, id) == row);
    }
    SECTION("failed") {
        const auto id = f.enqueue_one();
        const auto l = f.claim("a");
        REQUIRE(f.fail(id, l.generation, "a", "broken", false).state == JobState::Failed);
        CHECK(*f.store.renew({1, id, l.generation, "a"}, kLease, f.clock.now()).rejection ==
              Rejection::AlreadyTerminal);
    }
    SECTION("expired, before and after the reaper") {
        const auto id = f.enqueue_one();
        const auto l = f.claim("a");
        f.clock.advance(kLease);
        CHECK(*f.store.renew({1, id, l.generation, "a"}, kLease, f.clock.now()).rejection ==
              Rejection::LeaseExpired);
        f.store.reclaim_expired(f.clock.now(), 10);
        CHECK(*f.store.renew({1, id, l.generation, "a"}, kLease, f.clock.now()).rejection ==
              Rejection::LeaseExpired);
        const auto l2 = f.claim("b");
        CHECK(*f.store.renew({1, id, l.generation, "a"}, kLease, f.clock.now()).rejection ==
              Rejection::StaleGeneration);
        CHECK(f.store.renew({1, id, l2.generation, "b"}, kLease, f.clock.now()).accepted());
    }
}

TEST_CASE("fail and release", "[store][lease]") {
    Fixture f;
    SECTION("a retryable failure with attempts left returns the job to pending") {
        const auto id = f.enqueue_one(1, 2);
        auto l = f.claim("a");
        CHECK(f.fail(id, l.generation, "a", "flaky", true).state == JobState::Pending);
        l = f.claim("b");
        CHECK(l.generation == 2);
        CHECK(f.fail(id, l.generation, "b", "flaky", true).state == JobState::Discarded);
    }
    SECTION("release gives the job back without using an attempt") {
        const auto id = f.enqueue_one(1, 1);
        auto l = f.claim("a");
        CHECK(f.store.release({1, id, l.generation, "a"}, f.clock.now()).accepted());
        l = f.claim("b");
        CHECK(l.attempts == 1);
        CHECK(l.generation == 2);
    }
}

TEST_CASE("completion and its result commit together or not at all", "[store][atomic]") {
    Fixture f;
    const auto id = f.enqueue_one();
    const auto l = f.claim("a");
    auto& c = f.store.connection();
    {
        // A result the job already has makes the result insert fail inside the completion.
        pqxx::work t(c);
        t.exec_params(
            "INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, "
            "attempts, result_ref, at) VALUES (1, $1, 'completed', 'default', 99, 1, "
            "'squatter', now())",
            id);
        t.commit();
    }
    CHECK_THROWS(f.store.complete({1, id, l.generation, "a", "r"}, f.clock.now()));
    CHECK(testing::job_state(c, id) == "assigned");
    CHECK(testing::event_count(c, id, "completed") == 0);
    {
        pqxx::work t(c);
        t.exec_params("DELETE FROM job_outcomes WHERE job_id = $1", id);
        t.commit();
    }
    CHECK(f.store.complete({1, id, l.generation, "a", "r"}, f.clock.now()).accepted());
    CHECK(testing::results_snapshot(c, id).find(",r,") != std::string::npos);
    CHECK(testing::job_state(c, id) == "completed");
}

TEST_CASE("reclaim takes exactly the expired leases", "[store][reclaim]") {
    Fixture f;
    std::vector<store::JobId> ids;
    for (int i = 0; i < 4; ++i) ids.push_back(f.enqueue_one(1, i == 3 ? 1 : 3));
    // Claimed one second apart: leases end at T+10s, T+11s, T+12s, T+13s.
    std::map<store::JobId, store::Lease> leases;
    for (int i = 0; i < 4; ++i) {
        auto l = f.claim("w" + std::to_string(i));
        leases[l.job_id] = l;
        f.clock.advance(base::kSeconds);
    }
    const auto done = leases.begin()->second;
    REQUIRE(
        f.store.complete({1, done.job_id, done.generation, "w0", "r"}, f.clock.now()).accepted());
    f.clock.set(kT0 + kLease + 2 * base::kSeconds);  // second and third leases end now or before
    auto r = f.store.reclaim_expired(f.clock.now(), 100);
    REQUIRE(r.size() == 2);
    CHECK(r[0].job_id == ids[1]);
    CHECK(r[1].job_id == ids[2]);
    CHECK(testing::job_state(f.store.connection(), ids[0]) == "completed");
    CHECK(testing::job_state(f.store.connection(), ids[3]) == "assigned");
    CHECK(f.store.reclaim_expired(f.clock.now(), 100).empty());
    f.clock.advance(base::kSeconds);
    r = f.store.reclaim_expired(f.clock.now(), 100);
    REQUIRE(r.size() == 1);
    CHECK(r[0].state == JobState::Discarded);  // its single attempt is used up
}

TEST_CASE("a completion racing a reclaim on the same row: exactly one wins",
          "[store][reclaim][concurrency]") {
    testing::TestDatabase db;
    AssignmentStore seed(db.dsn()), worker(db.dsn()), reaper(db.dsn());
    constexpr int kRounds = 100;
    std::barrier sync(2);
    int completions = 0, reclaims = 0;
    for (int round = 0; round < kRounds; ++round) {
        const auto id = seed.enqueue(1, {{0, "x", 3}}, kT0).at(0);
        const auto l = seed.claim(1, {"w", 1}, kLease, kT0).leases.at(0);
        const base::Instant deadline = l.lease_expires_at;
        bool completed = false;
        std::size_t reclaimed = 0;
        // The worker's clock says the lease is still live; the reaper's says it just expired.
        std::thread tw([&] {
            sync.arrive_and_wait();
            completed = worker.complete({1, id, l.generation, "w", "r"}, deadline - 1us).accepted();
        });
        std::thread tr([&] {
            sync.arrive_and_wait();
            reclaimed = reaper.reclaim_expired(deadline, 10).size();
        });
        tw.join();
        tr.join();
        INFO("round " << round);
        REQUIRE(int(completed) + int(reclaimed) == 1);
        const auto state = testing::job_state(seed.connection(), id);
        CHECK(state == (completed ? "completed" : "pending"));
        completions += completed;
        reclaims += static_cast<int>(reclaimed);
        if (!completed) {  // drain the reclaimed job so the next round starts clean
            auto again = seed.claim(1, {"w", 1}, kLease, kT0).leases.at(0);
            REQUIRE(seed.complete({1, id, again.generation, "w", "r"}, kT0).accepted());
        }
    }
    CHECK(completions + reclaims == kRounds);
    // Both sides must have won some rounds, or the rounds were no race: a reclaim that never
    // took a lease (or a completion that never landed) would pass every round above.
    INFO(completions << " completions and " << reclaims << " reclaims won");
    CHECK(completions > 0);
    CHECK(reclaims > 0);
}

// A commit still in flight on the job's row (one waiting for a synchronous standby after a
// switchover, whose coordinator gave up on it at its deadline) is not visible yet, but holds the
// row. A re-sent completion whose lease ran out meanwhile must not be judged from the version it
// replaces: it waits for the commit to end and is then answered from the row it left (found by
// the nemesis on the HA cluster: REJECTED lease_expired for a completion that had committed).
TEST_CASE("a refused completion is judged after the commit in flight on its row",
          "[store][fencing]") {
    Fixture f;
    const auto id = f.enqueue_one();
    const auto l = f.claim("a");
    f.clock.advance(kLease + 1us);

    // The first attempt's transaction: the completion written, not yet committed.
    pqxx::connection first(f.db.dsn());
    pqxx::work in_flight(first);
    in_flight.exec_params(
        "UPDATE jobs SET state = 'completed', completed_at = now(), result_ref = 'r1', "
        "lease_expires_at = NULL WHERE id = $1 AND generation = $2",
        id, l.generation);

    std::atomic<bool> answered{false};
    store::Transition resent;
    std::thread worker([&] {
        resent = f.store.complete({1, id, l.generation, "a", "r1"}, f.clock.now());
        answered = true;
    });
    // The re-send must be seen waiting for the row before the first attempt commits.
    pqxx::connection watcher(f.db.dsn());
    bool waiting = false;
    for (int i = 0; i < 1000 && !waiting && !answered; ++i) {
        pqxx::nontransaction q(watcher);
        waiting = q.exec1("SELECT count(*) FROM pg_locks WHERE NOT granted")[0].as<int>() > 0;
        if (!waiting) std::this_thread::sleep_for(10ms);
    }
    const bool answered_early = answered.load();
    in_flight.commit();
    worker.join();
    INFO("the re-send " << (answered_early ? "was answered before the first attempt committed"
                                           : "waited for the first attempt"));
    REQUIRE_FALSE(answered_early);
    REQUIRE(waiting);
    CHECK(resent.accepted());
    CHECK(resent.replayed);
    CHECK(resent.state == JobState::Completed);
}
