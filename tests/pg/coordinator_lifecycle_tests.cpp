// The lifecycle through a coordinator in one process: skills declared in HELLO, a scheduled job
// handed to a parked claim when the manual clock reaches its run_at (the promoter's timer, not a
// poll), a run deadline refused at renewal, and a cancellation pushed to its holder at once.

#include <catch2/catch.hpp>

#include "common/ops/operator_store.hpp"
#include "tests/pg/coordinator_client.hpp"
#include "tests/support/process.hpp"
#include "tests/support/rows.hpp"

using namespace aclaim;
using namespace aclaim::testing;

using namespace std::chrono_literals;

namespace {
constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);

store::NewJob in_queue(const std::string& queue, const std::string& payload) {
    store::NewJob j;
    j.queue = queue;
    j.payload = payload;
    return j;
}
}  // namespace

TEST_CASE_METHOD(ManualCoordinator,
                 "HELLO's queues decide what a session claims, and a new HELLO changes them",
                 "[coordinator][lifecycle]") {
    store.enqueue(1, {in_queue("electrical", "wiring"), in_queue("default", "general")},
                  clock.now());
    auto w = h.greeted("w1", 1);
    CHECK(w->claim_one().payload == "general");
    CHECK(w->expect<proto::NoWork>(w->claim()).reason == "no pending jobs");
    w->expect<proto::Welcome>(w->request(proto::Hello{0, "w1", 1, {"electrical"}}));
    CHECK(w->claim_one().payload == "wiring");
}

TEST_CASE_METHOD(ManualCoordinator, "a parked claim gets a scheduled job when its run_at arrives",
                 "[coordinator][lifecycle]") {
    auto later = in_queue("default", "later");
    later.run_at = kT0 + 10s;
    const auto id = store.enqueue(1, {later}, clock.now()).at(0);
    auto w = h.greeted("w1", 1);
    // The claim's wait ends well after the job comes due: a clock jump to the very end of the wait
    // would race the parked claim's expiry against the promotion.
    const auto req = w->claim(1, 20000);
    // Parked: nothing is claimable yet.
    REQUIRE(eventually([&] { return h.coordinator->metrics().parked.load() >= 1; }, 5s));
    CHECK(h.coordinator->metrics().jobs_assigned.load() == 0);
    clock.advance(10s);
    const auto got = w->expect<proto::Assigned>(req, 10s);
    REQUIRE(got.jobs.size() == 1);
    CHECK(got.jobs[0].job_id == id);
    auto conn = h.db.connect();
    CHECK(event_count(*conn, id, "due") == 1);
}

TEST_CASE_METHOD(
    ManualCoordinator,
    "a renewal past the run deadline is refused deadline_exceeded, and the attempt fails",
    "[coordinator][lifecycle]") {
    auto slow = in_queue("default", "slow");
    slow.run_timeout = 15s;
    const auto id = store.enqueue(1, {slow}, clock.now()).at(0);
    auto w = h.greeted("w1", 1);
    const auto job = w->claim_one();
    CHECK(job.lease_expires_at_us == base::to_micros(kT0 + 10s));
    clock.advance(8s);
    const auto renewed =
        w->expect<proto::LeaseMsg>(w->request(proto::Renew{0, job.job_id, job.generation}));
    CHECK(renewed.lease_expires_at_us == base::to_micros(kT0 + 15s));
    clock.advance(7s);
    const auto refused =
        w->expect<proto::Revoked>(w->request(proto::Renew{0, job.job_id, job.generation}));
    CHECK(refused.reason == "deadline_exceeded");
    const auto late = w->expect<proto::Rejected>(
        w->request(proto::Complete{0, job.job_id, job.generation, "late"}));
    CHECK((late.reason == "deadline_exceeded" || late.reason == "lease_expired"));
    auto conn = h.db.connect();
    REQUIRE(eventually([&] { return event_count(*conn, id, "reclaimed") == 1; }, 5s));
    CHECK(job_state(*conn, id) == "pending");
}

TEST_CASE_METHOD(ManualCoordinator,
                 "cancelling an assigned job pushes REVOKED cancelled to its holder at once",
                 "[coordinator][lifecycle]") {
    auto conn = h.db.connect();
    const auto id = store.enqueue(1, some_jobs(1), clock.now()).at(0);
    auto w = h.greeted("w1", 1);
    const auto job = w->claim_one();
    REQUIRE(ops::OperatorStore(*conn).cancel({id}, "ops", "withdrawn", clock.now()).size() == 1);
    const auto pushed = w->expect_push<proto::Revoked>(10s);
    CHECK(pushed.job_id == id);
    CHECK(pushed.generation == job.generation);
    CHECK(pushed.reason == "cancelled");
    const auto refused = w->expect<proto::Rejected>(
        w->request(proto::Complete{0, job.job_id, job.generation, "verdict"}));
    CHECK(refused.reason == "cancelled");
    CHECK(job_state(*conn, id) == "cancelled");
}
