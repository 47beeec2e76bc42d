// A worker that fails over keeps its leases: the authority is the row, so a job claimed through
// one coordinator is renewed and completed through another, on a new session, as long as the
// worker and the generation are the lease's. Fencing is unchanged: another worker, or a stale
// generation, is refused there as anywhere.

#include <catch2/catch.hpp>

#include "common/base/clock.hpp"
#include "common/store/assignment_store.hpp"
#include "tests/pg/coordinator_client.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);

/// A second coordinator on the harness's database, configured as the harness configures its own.
std::unique_ptr<coordinator::Coordinator> second_coordinator(const CoordinatorHarness& h,
                                                             const base::Clock& clock) {
    coordinator::CoordinatorOptions o;
    o.connection.dsn = h.db.dsn();
    o.router.bind = "tcp://127.0.0.1:*";
    o.router.plaintext = true;
    o.router.lease_ms = 10000;
    o.reaper.reap_interval_ms = 20;
    o.db_pool.in_doubt_budget_ms = 1000;
    o.router.drain_timeout_ms = 0;
    o.connection.db_deadline_ms = kManualClockDbDeadlineMs;
    auto c = std::make_unique<coordinator::Coordinator>(o, clock);
    c->start();
    return c;
}

std::string scalar_text(const TestDatabase& db, const std::string& sql) {
    auto conn = db.connect();
    pqxx::read_transaction t(*conn);
    const auto r = t.exec(sql);
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
}

}  // namespace

TEST_CASE("a lease granted through one coordinator is renewed and completed through another",
          "[coordinator][handover]") {
    base::ManualClock clock(kT0);
    CoordinatorHarness a(clock);
    auto b = second_coordinator(a, clock);
    store::AssignmentStore store(a.db.dsn());
    store.enqueue(1, some_jobs(1), clock.now());

    RawWorker on_a(a.context, a.coordinator->endpoint());
    on_a.hello("w1", 1);
    const auto job = on_a.claim_one();

    // The worker fails over: a new connection, a new session, another coordinator.
    RawWorker on_b(a.context, b->endpoint());
    on_b.hello("w1", 1);
    clock.advance(5 * base::kSeconds);
    auto req = on_b.request(proto::Renew{0, job.job_id, job.generation});
    const auto lease = on_b.expect<proto::LeaseMsg>(req);
    CHECK(lease.lease_expires_at_us == base::to_micros(kT0 + 15 * base::kSeconds));

    // Past the lease as first granted: only the renewal through the second coordinator keeps it.
    clock.advance(7 * base::kSeconds);

    // Fencing holds on the new coordinator as on the old: another worker, a stale generation.
    RawWorker intruder(a.context, b->endpoint());
    intruder.hello("w2", 1);
    req = intruder.request(proto::Renew{0, job.job_id, job.generation});
    CHECK(intruder.expect<proto::Revoked>(req).reason == "not_assignee");
    req = intruder.request(proto::Complete{0, job.job_id, job.generation, "review:w2"});
    CHECK(intruder.expect<proto::Rejected>(req).reason == "not_assignee");
    req = on_b.request(proto::Complete{0, job.job_id, job.generation - 1, "review:w1:old"});
    CHECK(on_b.expect<proto::Rejected>(req).reason == "stale_generation");

    req = on_b.request(proto::Complete{0, job.job_id, job.generation, "review:w1"});
    const auto accepted = on_b.expect<proto::Accepted>(req);
    CHECK(accepted.state == "completed");
    CHECK_FALSE(accepted.replayed);
    const auto id = std::to_string(job.job_id);
    CHECK(scalar_text(a.db, "SELECT state FROM jobs WHERE id = " + id) == "completed");
    CHECK(scalar_text(a.db, "SELECT worker FROM job_events WHERE kind = 'completed' AND job_id = " +
                                id) == "w1");
    CHECK(scalar_text(a.db, "SELECT count(*) FROM job_events WHERE kind = 'reclaimed'") == "0");

    // The same COMPLETE re-sent to the first coordinator (its reply was lost) is a replay.
    req = on_a.request(proto::Complete{0, job.job_id, job.generation, "review:w1"});
    CHECK(on_a.expect<proto::Accepted>(req).replayed);
    b->stop();
}
