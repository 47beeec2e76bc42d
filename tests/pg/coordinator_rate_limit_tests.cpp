// Rate limits through a coordinator in one process: a claim held back by an empty bucket parks
// and is dispatched again when the bucket has a token on the injected clock, not before, and is
// answered NO_WORK only when its wait ends.

#include <catch2/catch.hpp>

#include "common/ops/operator_store.hpp"
#include "coordinator/http/queue_metrics.hpp"
#include "tests/pg/coordinator_client.hpp"

using namespace aclaim;
using namespace aclaim::testing;

using namespace std::chrono_literals;

namespace {
constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);

/// Limits the default queue of organization 1 to `rate` claims a second, one at a time.
void limit_default(const TestDatabase& db, double rate, base::Instant now) {
    auto conn = db.connect();
    ops::QueueSettings q;
    q.rate_per_s = rate;
    q.rate_burst = 1;
    ops::OperatorStore(*conn).configure(1, "default", q, "ops", now, true);
}
}  // namespace

TEST_CASE("a claim parked on an empty bucket is assigned when the bucket refills",
          "[coordinator][rate]") {
    base::ManualClock clock(kT0);
    CoordinatorHarness h(clock);
    limit_default(h.db, 1, clock.now());
    store::AssignmentStore store(h.db.dsn());
    store.enqueue(1, some_jobs(3), clock.now());
    auto w = h.greeted("w1", 1);
    w->claim_one();  // the burst of one
    const auto req = w->claim(1, 20000);
    REQUIRE(eventually([&] { return h.coordinator->metrics().parked.load() >= 1; }, 5s));
    // Short of the refill by a microsecond: the router runs its timers several times (every
    // 100 ms of its poll) and the claim stays parked.
    clock.advance(999'999us);
    CHECK_FALSE(w->answer(req, 400ms).has_value());
    CHECK(h.coordinator->metrics().jobs_assigned.load() == 1);
    clock.advance(1us);
    const auto got = w->expect<proto::Assigned>(req, 10s);
    CHECK(got.jobs.size() == 1);
    CHECK(h.coordinator->metrics().jobs_assigned.load() == 2);
}

TEST_CASE("a claim parked on an empty bucket gets NO_WORK when its wait ends before the refill",
          "[coordinator][rate]") {
    base::ManualClock clock(kT0);
    CoordinatorHarness h(clock);
    limit_default(h.db, 0.1, clock.now());  // one token every 10 s
    store::AssignmentStore store(h.db.dsn());
    store.enqueue(1, some_jobs(2), clock.now());
    auto w = h.greeted("w1", 1);
    w->claim_one();
    const auto req = w->claim(1, 2000);
    REQUIRE(eventually([&] { return h.coordinator->metrics().parked.load() >= 1; }, 5s));
    clock.advance(2s);
    CHECK(w->expect<proto::NoWork>(req, 10s).reason == "wait ended");
    // The bucket refills at T0 + 10 s: a claim then gets the second job.
    clock.advance(8s);
    CHECK(w->claim_one().payload == "payload-1");
}

TEST_CASE("/metrics shows a rate-limited queue's rate, burst and tokens, and nothing for others",
          "[coordinator][rate][http]") {
    TestDatabase db;
    base::ManualClock clock(kT0);
    {
        auto conn = db.connect();
        ops::QueueSettings q;
        q.rate_per_s = 2.5;
        q.rate_burst = 4;
        ops::OperatorStore(*conn).configure(1, "slow", q, "ops", clock.now(), true);
        ops::QueueSettings plain;
        plain.max_attempts = 5;
        ops::OperatorStore(*conn).configure(1, "plain", plain, "ops", clock.now(), true);
    }
    store::AssignmentStore store(db.dsn());
    store::NewJob job{0, "p", 3};
    job.queue = "slow";
    store.enqueue(1, {job, job, job}, clock.now());
    REQUIRE(store.claim(1, {"w", 3, {"slow"}}, 10s, clock.now()).leases.size() == 3);
    clock.advance(200ms);  // 1 token left + 0.5 refilled: 1 whole token
    coordinator::QueueMetrics metrics(db.dsn(), clock);
    const auto text = metrics.render();
    for (const auto& line : {"aclaim_queue_rate_limit{org=\"1\",queue=\"slow\"} 2.5\n",
                             "aclaim_queue_rate_burst{org=\"1\",queue=\"slow\"} 4\n",
                             "aclaim_queue_rate_tokens{org=\"1\",queue=\"slow\"} 1\n"}) {
        INFO(line);
        CHECK(text.find(line) != std::string::npos);
    }
    CHECK(text.find("aclaim_queue_rate_limit{org=\"1\",queue=\"plain\"}") == std::string::npos);
}
