// Fair share between tenants on an in-process coordinator (plaintext: a key is a worker name of an
// organization): sessions per key and per organization, parked claims per session and per
// organization, each refused `overloaded` with retry_after_ms while other keys and organizations
// are still served; and a closed connection's session and parked claims gone with it.

#include <catch2/catch.hpp>

#include "common/proto/wire_errors.hpp"
#include "tests/pg/coordinator_client.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

const std::vector<std::string> kHints{std::string(proto::kFeatureReconnectHints)};

/// HELLO asking for reconnect hints; its answer, whatever it is.
proto::Message hello(RawWorker& w, const std::string& worker_id, store::OrgId org) {
    proto::Hello h{w.next_req(), worker_id, org};
    h.features = kHints;
    w.send(h);
    const auto answer = w.answer(h.req, 5s);
    REQUIRE(answer);
    return *answer;
}

/// Fails unless `m` is ERROR overloaded with a retry_after_ms.
void check_overloaded(const proto::Message& m) {
    const auto* e = std::get_if<proto::Error>(&m);
    REQUIRE(e != nullptr);
    CHECK(e->code == proto::errors::kOverloaded);
    REQUIRE(e->retry_after_ms);
    CHECK(*e->retry_after_ms >= 1000);
    CHECK(*e->retry_after_ms <= proto::kMaxRetryAfterMs);
}

std::int64_t sessions(const CoordinatorHarness& h) {
    return h.coordinator->metrics().connected_sessions.load();
}

/// One job more for `org`.
void enqueue_one(const CoordinatorHarness& h, const base::Clock& clock, store::OrgId org) {
    store::AssignmentStore(h.db.dsn()).enqueue(org, some_jobs(1), clock.now());
}

/// A coordinator on the system clock that parks one claim per organization at most.
struct OneParkedClaimPerOrg {
    base::SystemClock clock;
    CoordinatorHarness h{
        clock, [](coordinator::CoordinatorOptions& o) { o.router.max_parked_per_org = 1; }};
};

}  // namespace

TEST_CASE("a key at its session limit is refused overloaded; other keys and orgs are served",
          "[coordinator][limits]") {
    base::SystemClock clock;
    CoordinatorHarness h(clock, [](coordinator::CoordinatorOptions& o) {
        o.router.max_sessions_per_key = 2;
        o.router.max_sessions_per_org = 4;
    });
    std::vector<std::unique_ptr<RawWorker>> held;
    for (int i = 0; i < 2; ++i) {
        held.push_back(h.worker());
        CHECK(std::holds_alternative<proto::Welcome>(hello(*held.back(), "w", 1)));
    }
    auto third = h.worker();
    check_overloaded(hello(*third, "w", 1));
    // Another key of the organization, and another organization, are still served.
    held.push_back(h.worker());
    CHECK(std::holds_alternative<proto::Welcome>(hello(*held.back(), "v", 1)));
    held.push_back(h.worker());
    CHECK(std::holds_alternative<proto::Welcome>(hello(*held.back(), "u", 1)));
    // The organization holds four: a fifth key of it is refused, organization 2 is not.
    auto fifth = h.worker();
    check_overloaded(hello(*fifth, "t", 1));
    auto other = h.worker();
    CHECK(std::holds_alternative<proto::Welcome>(hello(*other, "w", 2)));
    // A refused HELLO keeps its connection: once a place is free it is welcomed.
    held.front()->send(proto::Bye{held.front()->next_req()});
    REQUIRE(eventually([&] { return sessions(h) == 4; }));
    CHECK(std::holds_alternative<proto::Welcome>(hello(*third, "w", 1)));
    CHECK(h.coordinator->metrics()
              .tenant_limit_refusals[coordinator::Metrics::TenantLimit::SessionsPerKey]
              .load() == 1);
    CHECK(h.coordinator->metrics()
              .tenant_limit_refusals[coordinator::Metrics::TenantLimit::SessionsPerOrg]
              .load() == 1);
}

TEST_CASE("parked claims beyond a session's or an organization's limit are refused overloaded",
          "[coordinator][limits]") {
    base::SystemClock clock;
    CoordinatorHarness h(clock, [](coordinator::CoordinatorOptions& o) {
        o.router.max_parked_per_session = 2;
        o.router.max_parked_per_org = 3;
    });
    // The listener's start sends every parked claim back to the database, where for a moment it
    // counts against no limit: the claims below park after it, and each step waits until the
    // router holds exactly the claims it parked (not for a count of parks, which a claim sent
    // back and parked again would also raise).
    REQUIRE(eventually([&] { return h.coordinator->metrics().listener_starts.load() >= 1; }, 15s));
    const auto waiting_now = [&] { return h.coordinator->metrics().claims_waiting.load(); };
    auto a = h.worker();
    REQUIRE(std::holds_alternative<proto::Welcome>(hello(*a, "a", 1)));
    a->claim(1, 60000);
    a->claim(1, 60000);
    REQUIRE(eventually([&] { return waiting_now() == 2; }, 15s));
    const auto refused = a->answer(a->claim(1, 60000), 5s);
    REQUIRE(refused);
    check_overloaded(*refused);
    // A claim that does not wait cannot park, and is served.
    const auto served = a->answer(a->claim(1, 0), 5s);
    REQUIRE(served);
    CHECK(std::holds_alternative<proto::NoWork>(*served));
    // Another session of the organization parks one more; then the organization is full.
    auto b = h.worker();
    REQUIRE(std::holds_alternative<proto::Welcome>(hello(*b, "b", 1)));
    b->claim(1, 60000);
    REQUIRE(eventually([&] { return waiting_now() == 3; }, 15s));
    const auto full = b->answer(b->claim(1, 60000), 5s);
    REQUIRE(full);
    check_overloaded(*full);
    // Organization 2 parks beside it.
    auto c = h.worker();
    REQUIRE(std::holds_alternative<proto::Welcome>(hello(*c, "c", 2)));
    const auto waiting = c->claim(1, 60000);
    REQUIRE(eventually([&] { return waiting_now() == 4; }, 15s));
    // Its parked claim is still woken by work, as every parked claim is.
    enqueue_one(h, clock, 2);
    CHECK(c->expect<proto::Assigned>(waiting, 6s).jobs.size() == 1);
}

TEST_CASE_METHOD(OneParkedClaimPerOrg,
                 "a closed connection takes its session and parked claims with it",
                 "[coordinator][limits]") {
    REQUIRE(eventually([&] { return h.coordinator->metrics().listener_starts.load() >= 1; }, 15s));
    const auto waiting_now = [&] { return h.coordinator->metrics().claims_waiting.load(); };
    auto gone = h.worker();
    REQUIRE(std::holds_alternative<proto::Welcome>(hello(*gone, "gone", 1)));
    gone->claim(1, 60000);
    REQUIRE(eventually([&] { return waiting_now() == 1; }, 15s));
    REQUIRE(sessions(h) == 1);
    // The worker goes away without BYE, its claim still waiting: closing the socket closes the
    // connection. Neither the session nor the claim waits for the idle sweep or the claim's wait.
    gone.reset();
    CHECK(eventually([&] { return sessions(h) == 0; }));
    CHECK(eventually([&] { return waiting_now() == 0; }));
    // The organization's one place for a parked claim is free again.
    auto next = h.worker();
    REQUIRE(std::holds_alternative<proto::Welcome>(hello(*next, "next", 1)));
    const auto req = next->claim(1, 60000);
    CHECK(eventually([&] { return waiting_now() == 1; }, 15s));
    CHECK_FALSE(next->answer(req, 200ms));
    // Parked, not refused: the work that comes is its.
    enqueue_one(h, clock, 1);
    CHECK(next->expect<proto::Assigned>(req, 6s).jobs.size() == 1);
}

TEST_CASE_METHOD(OneParkedClaimPerOrg,
                 "a claim at the database when its connection closes is not parked afterwards",
                 "[coordinator][limits]") {
    // The organization's claim lock, held exclusively, stops the claim at the database.
    auto admin = h.db.connect();
    pqxx::nontransaction lock(*admin);
    lock.exec("SELECT pg_advisory_lock(aclaim_org_lock(1))");
    auto gone = h.worker();
    REQUIRE(std::holds_alternative<proto::Welcome>(hello(*gone, "gone", 1)));
    gone->claim(1, 60000);
    REQUIRE(eventually(
        [&] {
            return lock.exec1(
                           "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                           "'Lock' AND wait_event = 'advisory'")[0]
                       .as<int>() == 1;
        },
        5s));
    gone.reset();
    REQUIRE(eventually([&] { return sessions(h) == 0; }));
    lock.exec("SELECT pg_advisory_unlock(aclaim_org_lock(1))");
    REQUIRE(eventually([&] { return h.coordinator->metrics().db_in_flight.load() == 0; }));
    // The claim comes back with no work for a connection that is gone: dropped, so the
    // organization's one place for a parked claim is free for the next worker.
    auto next = h.worker();
    REQUIRE(std::holds_alternative<proto::Welcome>(hello(*next, "next", 1)));
    const auto req = next->claim(1, 60000);
    CHECK_FALSE(next->answer(req, 300ms));
    enqueue_one(h, clock, 1);
    CHECK(next->expect<proto::Assigned>(req, 6s).jobs.size() == 1);
}
