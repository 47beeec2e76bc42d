// Rate limits per queue (schema/baseline/tables.sql): a token bucket on the queue's row,
// spent by the claim statement under the queue's lock, so that two coordinators together never
// hand out more than the burst plus the rate times any window; a queue without a rate writes
// nothing for it.

#include <array>
#include <barrier>
#include <catch2/catch.hpp>
#include <map>
#include <numeric>
#include <thread>

#include "common/ops/checker.hpp"
#include "common/ops/operator_store.hpp"
#include "common/store/assignment_store.hpp"
#include "tests/pg/ctl_run.hpp"
#include "tests/support/checker_support.hpp"
#include "tests/support/store_fixture.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using store::AssignmentStore;

using namespace std::chrono_literals;

namespace {

/// Sets queue's rate limit (claims a second) and burst, as `aclaimctl queue set` does.
void limit_rate(const testing::TestDatabase& db, const std::string& queue, double rate, int burst,
                base::Instant now) {
    ops::QueueSettings q;
    q.rate_per_s = rate;
    q.rate_burst = burst;
    testing::configure_queue(db, 1, queue, q, now);
}

/// The xmin of every job_queues row: unchanged when nothing wrote to the table.
std::string queue_row_versions(AssignmentStore& store) {
    pqxx::read_transaction t(store.connection());
    return t
        .exec1(
            "SELECT coalesce(string_agg(queue || ':' || xmin::text, ',' ORDER BY queue), '') "
            "FROM job_queues")[0]
        .as<std::string>();
}

}  // namespace

TEST_CASE("two coordinators together never claim more than the burst plus the rate of any window",
          "[store][rate]") {
    constexpr int kRate = 2;   // claims a second
    constexpr int kBurst = 3;  // at once
    constexpr int kSteps = 100;
    constexpr auto kStep = 100ms;
    testing::TestDatabase db;
    AssignmentStore a(db.dsn());
    AssignmentStore b(db.dsn());
    limit_rate(db, "slow", kRate, kBurst, kT0);
    enqueue_on(a, "slow", 200, kT0);

    // Both claim at every step of a simulated 10 s, one through the single claim, the other
    // through the coalesced one. At even steps they claim at the same instant, released together
    // by the barrier. Which one wins such a race is the scheduler's choice, and under load (a
    // sanitizer build, say) one side can win every one and leave the other no share. So at odd
    // steps they take turns: a first at steps 1, 5, 9, ..., b first at steps 3, 7, 11, ....
    // A token comes whole every 5 steps; the odd ones among them, 5, 25, 45, ... fall to a and
    // 15, 35, 55, ... to b, so each side gets some whatever the races do.
    std::map<int, int> claimed_at;  // step -> jobs handed out at it, both coordinators together
    std::array<std::vector<int>, 2> got;
    std::barrier step_start(2);
    std::barrier first_done(2);
    auto run = [&](int who) {
        for (int s = 0; s < kSteps; ++s) {
            const base::Instant now = kT0 + s * kStep;
            const bool in_turn = s % 2 == 1;
            const int first = s % 4 == 1 ? 0 : 1;
            step_start.arrive_and_wait();
            if (in_turn && who != first) first_done.arrive_and_wait();
            int n = 0;
            if (who == 0) {
                n = static_cast<int>(a.claim(1, {"w0", 4, {"slow"}}, kLease, now).leases.size());
            } else {
                const std::vector<store::ClaimRequest> rq{{"w1", 2, {"slow"}}, {"w2", 2, {"slow"}}};
                for (const auto& o : b.claim_batch(1, rq, kLease, now)) {
                    n += static_cast<int>(o.leases.size());
                }
            }
            if (in_turn && who == first) first_done.arrive_and_wait();
            got.at(who).push_back(n);
        }
    };
    std::thread other(run, 1);
    run(0);
    other.join();
    int total = 0;
    for (int s = 0; s < kSteps; ++s) {
        claimed_at[s] = got[0].at(s) + got[1].at(s);
        total += claimed_at[s];
    }
    // Every window [i, j] of steps: no more than the burst plus the rate times its length.
    for (int i = 0; i < kSteps; ++i) {
        int sum = 0;
        for (int j = i; j < kSteps; ++j) {
            sum += claimed_at[j];
            const double window_s = (j - i) * 0.1;
            INFO("window from step " << i << " to " << j);
            REQUIRE(sum <= kBurst + kRate * window_s + 1e-9);
        }
    }
    // And the limit is not stricter than it says: claiming at every step takes all it allows,
    // floor(3 + 2 * 9.9) = 22 jobs over the run, both coordinators having had a share.
    CHECK(total == 22);
    CHECK(std::accumulate(got[0].begin(), got[0].end(), 0) > 0);
    CHECK(std::accumulate(got[1].begin(), got[1].end(), 0) > 0);
    {
        pqxx::read_transaction t(a.connection());
        CHECK(t.exec1("SELECT count(*) FROM jobs WHERE queue = 'slow' AND state = 'assigned'")[0]
                  .as<int>() == 22);
    }
    // The checker proves the same from the audit alone: every claim found a whole token.
    auto conn = db.connect();
    auto history = ops::load_history(*conn);
    testing::check_clean(ops::check(history));
    // And it would see one claim too many: the last claim moved 1 ms before the token it took.
    auto& last = history.events.back();
    REQUIRE(last.kind == "claimed");
    last.at -= 1ms;
    CHECK(testing::caught(history, ops::Invariant::RateRespected));
}

TEST_CASE("a claim on queues without a rate limit writes nothing to job_queues",
          "[store][rate][hot]") {
    testing::StoreFixture f;
    limit_rate(f.db, "slow", 1, 1, f.clock.now());
    {
        auto conn = f.db.connect();
        ops::QueueSettings q;
        q.max_attempts = 5;
        ops::OperatorStore(*conn).configure(1, "free", q, "ops", f.clock.now(), true);
    }
    enqueue_on(f.store, "free", 3, f.clock.now());
    const std::string before = queue_row_versions(f.store);
    const auto one = f.store.claim(1, {"w", 2, {"free"}}, kLease, f.clock.now());
    CHECK(one.leases.size() == 2);
    const auto batch = f.store.claim_batch(1, std::vector<store::ClaimRequest>{{"w", 2, {"free"}}},
                                           kLease, f.clock.now());
    CHECK(batch.at(0).leases.size() == 1);
    // Short, and no rate limit served: no refill instant is looked for.
    CHECK_FALSE(batch.at(0).refill_at.has_value());
    CHECK(queue_row_versions(f.store) == before);
}

TEST_CASE("a claim short of tokens says when the bucket has one again", "[store][rate]") {
    testing::StoreFixture f;
    limit_rate(f.db, "slow", 2, 2, f.clock.now());
    enqueue_on(f.store, "slow", 5, f.clock.now());
    const auto first = f.store.claim(1, {"w", 5, {"slow"}}, kLease, f.clock.now());
    CHECK(first.leases.size() == 2);
    // Two tokens spent at T0, refilling at 2 a second: the next whole one at T0 + 500 ms.
    REQUIRE(first.refill_at.has_value());
    CHECK(*first.refill_at == kT0 + 500ms);
    f.clock.advance(499ms);
    const auto early = f.store.claim(1, {"w", 1, {"slow"}}, kLease, f.clock.now());
    CHECK(early.leases.empty());
    REQUIRE(early.refill_at.has_value());
    CHECK(*early.refill_at == kT0 + 500ms);
    f.clock.advance(1ms);
    CHECK(f.store.claim(1, {"w", 3, {"slow"}}, kLease, f.clock.now()).leases.size() == 1);
    // A paused queue is held back by its pause, not its bucket: no refill instant.
    {
        auto conn = f.db.connect();
        ops::OperatorStore(*conn).pause(1, "slow", true, "ops", "test", f.clock, false);
    }
    CHECK_FALSE(f.store.claim(1, {"w", 1, {"slow"}}, kLease, f.clock.now()).refill_at.has_value());
}

TEST_CASE("a rate limit is set, changed and removed by an audited operator action",
          "[store][rate][ops]") {
    testing::StoreFixture f;
    auto conn = f.db.connect();
    ops::OperatorStore ops(*conn);
    ops::QueueSettings q;
    q.rate_per_s = 0.5;
    ops.configure(1, "slow", q, "alice", f.clock.now(), true);
    auto listed = ops.queues(1);
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].rate_per_s == "0.5");
    CHECK(listed[0].rate_burst == 1);  // the rate rounded up
    CHECK(listed[0].rate_tokens == 1);
    q.rate_per_s = std::nullopt;
    q.rate_burst = 4;
    ops.configure(1, "slow", q, "bob", f.clock.now(), false);
    listed = ops.queues(1);
    CHECK(listed[0].rate_per_s == "0.5");
    CHECK(listed[0].rate_burst == 4);
    q.rate_per_s = 0;
    q.rate_burst = std::nullopt;
    ops.configure(1, "slow", q, "carol", f.clock.now(), false);
    listed = ops.queues(1);
    CHECK_FALSE(listed[0].rate_per_s.has_value());
    CHECK_FALSE(listed[0].rate_burst.has_value());
    pqxx::read_transaction t(*conn);
    const auto events = t.exec(
        "SELECT actor, detail FROM queue_events WHERE queue = 'slow' AND kind = 'configured' "
        "ORDER BY id");
    REQUIRE(events.size() == 3);
    CHECK(events[0][0].as<std::string>() == "alice");
    CHECK(events[0][1].as<std::string>() == "rate=0.5");
    CHECK(events[1][1].as<std::string>() == "burst=4");
    CHECK(events[2][0].as<std::string>() == "carol");
    CHECK(events[2][1].as<std::string>() == "rate=0");
}

TEST_CASE("aclaimctl queue set --rate sets, lists and removes a rate limit, audited with --by",
          "[ctl][rate]") {
    testing::TestDatabase db;
    auto r = testing::run_ctl(db.dsn(), {"queue", "set", "slow", "--org", "1", "--create", "--rate",
                                         "0.5", "--burst", "3", "--by", "alice"});
    REQUIRE(r.code == 0);
    r = testing::run_ctl(db.dsn(), {"queue", "list", "--org", "1"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("0.5/s b3 t3") != std::string::npos);
    r = testing::run_ctl(db.dsn(),
                         {"queue", "set", "slow", "--org", "1", "--rate", "0", "--burst", "2"});
    CHECK(r.code == 2);  // a burst without a limit means nothing
    r = testing::run_ctl(db.dsn(), {"queue", "set", "slow", "--org", "1", "--rate", "0"});
    REQUIRE(r.code == 0);
    r = testing::run_ctl(db.dsn(), {"queue", "list", "--org", "1"});
    CHECK(r.out.find("/s b") == std::string::npos);
    testing::check_settings_log(db, "slow", "rate=0.5, burst=3", "rate=0");
}
