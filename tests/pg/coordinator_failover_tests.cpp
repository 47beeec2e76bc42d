// A coordinator on a multi-host DSN follows the writable primary: it skips a read-only server,
// and when the primary it uses is demoted (its sessions cut, or left open on a server that now
// refuses writes), it reconnects to the newly writable one, LISTENs there and re-runs the claims
// parked on the old one. /readyz follows. A real promotion of a standby, with and without lost
// commits, is in coordinator_promotion_tests.cpp.

#include <catch2/catch.hpp>

#include "common/base/clock.hpp"
#include "coordinator/http/readiness.hpp"
#include "tests/pg/coordinator_client.hpp"
#include "tests/pg/pg_member.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

/// Two members: `a` read-only, holding a job (`on_a`) a claim can get only from there, and `b`
/// writable; a plaintext coordinator on both (`dsn`) with leases of a minute.
struct TwoMembers {
    TwoMembers() {
        spdlog::set_level(spdlog::level::critical);
        a.set_writable(false);
        options.router.lease_ms = 60000;
    }

    /// A worker whose claim parked at `c`: the read-only member was skipped, and the writable
    /// one has nothing to claim. The claim's request id.
    std::uint64_t parked_claim(RawWorker& w, const coordinator::Coordinator& c) const {
        const auto req = w.claim(1, 30000);
        REQUIRE(eventually([&] { return c.metrics().parked.load() >= 1; }, 10s));
        return req;
    }

    base::SystemClock clock;
    PgMember a;
    PgMember b;
    const store::JobId on_a =
        store::AssignmentStore(a.dsn).enqueue(1, some_jobs(1), clock.now()).at(0);
    const std::string dsn = multi_host_dsn(a, b);
    coordinator::CoordinatorOptions options = plaintext_options(dsn);
};

}  // namespace

TEST_CASE_METHOD(TwoMembers, "on a multi-host DSN the coordinator follows the writable primary",
                 "[coordinator]") {
    coordinator::ReadinessProbe probe(dsn, clock, std::chrono::milliseconds(0));
    CHECK(probe.check().ready);

    coordinator::Coordinator c(options, clock);
    c.start();
    GreetedWorker w(c.endpoint(), "w1", 1);
    const auto req = parked_claim(w, c);
    CHECK(a.coordinator_sessions() == 0);
    CHECK(b.coordinator_sessions() >= 2);

    // Failover: the primary is demoted, for a moment nothing is writable, then the other member
    // is promoted and the old primary's sessions end.
    b.set_writable(false);
    CHECK_FALSE(probe.check().ready);
    a.set_writable(true);
    CHECK(probe.check().ready);
    b.cut_coordinator_sessions();

    // The listener comes back on the new primary, which had its job before anyone listened
    // there: only re-running the parked claim finds it.
    const auto assigned = w.expect<proto::Assigned>(req, 15s);
    REQUIRE(assigned.jobs.size() == 1);
    CHECK(assigned.jobs[0].job_id == on_a);
    // The other DB thread may still hold a session the demotion ended: its COMPLETE is resolved
    // from the row on the new primary (not_committed), and the re-send is accepted there.
    const auto accepted =
        send_until_accepted(w, proto::Complete{0, on_a, assigned.jobs[0].generation, "review:w1"});
    REQUIRE(accepted);
    CHECK(accepted->state == "completed");
    CHECK_FALSE(accepted->replayed);
    CHECK(a.job_state(on_a) == "completed");
    CHECK(eventually([&] { return b.coordinator_sessions() == 0; }, 10s));
    c.stop();
}

TEST_CASE_METHOD(TwoMembers,
                 "a primary fenced read-only without ending its sessions is left for the writable "
                 "one",
                 "[coordinator]") {
    coordinator::Coordinator c(options, clock);
    c.start();
    GreetedWorker w(c.endpoint(), "w1", 1);
    const auto req = parked_claim(w, c);
    // The listener connects on its own thread: a claim can park before it is up.
    REQUIRE(eventually([&] { return b.coordinator_sessions("aclaim-coordinator-listener") == 1; },
                       10s));

    // An HA manager fences the old primary read-only and keeps its sessions; the other member is
    // writable. Every statement on b now fails with read_only_sql_transaction, and the listener
    // finds at its next ping that b is no longer writable.
    b.set_writable(false);
    a.set_writable(true);
    const auto assigned = w.expect<proto::Assigned>(req, 20s);
    REQUIRE(assigned.jobs.size() == 1);
    CHECK(assigned.jobs[0].job_id == on_a);
    CHECK(a.coordinator_sessions("aclaim-coordinator-listener") == 1);
    CHECK(eventually([&] { return b.coordinator_sessions("aclaim-coordinator-listener") == 0; },
                     10s));
    // A transition that meets the fenced server is resolved from the row on the writable one.
    const auto accepted =
        send_until_accepted(w, proto::Complete{0, on_a, assigned.jobs[0].generation, "review:w1"});
    REQUIRE(accepted);
    CHECK(a.job_state(on_a) == "completed");
    c.stop();
}
