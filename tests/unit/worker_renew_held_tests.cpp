// The worker client's use of protocol 1.3's RENEW that names every held job, against a scripted
// ROUTER and on a ManualClock, so that each heartbeat is the client's own timer and no test waits
// for one: one RENEW per heartbeat where WELCOME grants it, each job answered on its own; one
// RENEW per job otherwise, and after the coordinator refused a RENEW that named several.

#include <algorithm>

#include "tests/unit/fake_coordinator.hpp"

using namespace aclaim::testing;

namespace {

constexpr aclaim::base::Instant kT0 = aclaim::base::instant_from_micros(1'700'000'000'000'000);
constexpr Millis kHeartbeat{100};

/// HELLO answered with a WELCOME (heartbeat kHeartbeat) granting `features`.
void open_granting(Harness& h, std::vector<std::string> features) {
    auto hello = h.next_request<proto::Hello>();
    const auto& asked = std::get<proto::Hello>(hello.message).features;
    REQUIRE(std::find(asked.begin(), asked.end(), proto::kFeatureRenewHeld) != asked.end());
    proto::Welcome w{proto::request_id(hello.message), 7, 3000,
                     static_cast<std::int32_t>(kHeartbeat.count()), 65536};
    w.features = std::move(features);
    h.fake.reply(hello, w);
    h.next_event<worker::SessionReady>();
}

/// One CLAIM answered with `jobs` (generation 1 each); returns when all are assigned.
void assign(Harness& h, const std::vector<std::int64_t>& jobs) {
    h.client.claim(static_cast<std::int32_t>(jobs.size()), 0);
    const auto claim = h.next_request<proto::Claim>();
    proto::Assigned a{proto::request_id(claim.message), {}};
    for (const auto id : jobs) a.jobs.push_back({id, 1, 0, 3000, 1, 0, "p"});
    h.fake.reply(claim, a);
    for (std::size_t i = 0; i < jobs.size(); ++i) h.next_event<worker::JobAssigned>();
}

/// Moves the client's clock by `by` and lets it act on it. The client issues a renewal inside
/// poll(), as a pending request, so pending() tells whether it decided to renew by then.
void advance(Harness& h, aclaim::base::ManualClock& clock, Millis by) {
    clock.advance(by);
    auto ev = h.client.poll(Millis(0));
    h.events.insert(h.events.end(), ev.begin(), ev.end());
}

/// The jobs a RENEW names, its own first, with the req each is answered under.
std::vector<std::pair<std::uint64_t, std::int64_t>> named(const proto::Renew& r) {
    std::vector<std::pair<std::uint64_t, std::int64_t>> out{{r.req, r.job_id}};
    for (const auto& h : r.held) out.emplace_back(h.req, h.job_id);
    return out;
}

}  // namespace

TEST_CASE("client: a granted session renews every held job with one RENEW", "[worker]") {
    const auto enc = GENERATE(proto::Encoding::Binary, proto::Encoding::Json);
    aclaim::base::ManualClock clock(kT0);
    Harness h(options(enc), clock);
    h.client.start();
    open_granting(h, {std::string(proto::kFeatureRenewHeld)});
    REQUIRE(h.client.granted(proto::kFeatureRenewHeld));
    assign(h, {21, 22, 23});
    // Job 24 comes 30 ms later: due within half a heartbeat of the others, it goes with them.
    advance(h, clock, Millis(30));
    assign(h, {24});

    // Nothing is renewed before the first heartbeat of the first three is up.
    advance(h, clock, kHeartbeat - Millis(31));
    CHECK(h.client.pending() == 0);
    advance(h, clock, Millis(1));
    const auto sent = h.next_request<proto::Renew>();
    const auto& renew = std::get<proto::Renew>(sent.message);
    auto jobs = named(renew);
    REQUIRE(jobs.size() == 4);
    std::vector<std::int64_t> ids;
    for (const auto& [req, id] : jobs) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    CHECK(ids == std::vector<std::int64_t>{21, 22, 23, 24});
    // One place under max_in_flight, as at the coordinator.
    CHECK(h.client.in_flight() == 1);
    CHECK(h.client.pending() == 4);

    // Each job is answered on its own under its own req: three leases and one revocation.
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const auto [req, id] = jobs[i];
        if (id == 23) {
            h.fake.reply(sent, proto::Revoked{req, id, 1, "stale_generation", "generation 2"});
        } else {
            h.fake.reply(sent, proto::LeaseMsg{req, id, 1, 0, 3000});
        }
    }
    const auto lost = h.next_event<worker::JobLost>();
    CHECK(lost.job.job_id == 23);
    CHECK(lost.reason == "stale_generation");
    const auto deadline = SteadyClock::now() + kLimit;
    while (h.client.pending() > 0 && SteadyClock::now() < deadline) h.client.poll(Millis(5));
    CHECK(h.client.pending() == 0);
    CHECK(h.client.stats().renewals == 3);
    CHECK(h.client.held().size() == 3);

    // The next heartbeat, one heartbeat after this one and not before, names the three still
    // held, again in one RENEW.
    advance(h, clock, kHeartbeat - Millis(1));
    CHECK(h.client.pending() == 0);
    advance(h, clock, Millis(1));
    const auto again = h.next_request<proto::Renew>();
    CHECK(named(std::get<proto::Renew>(again.message)).size() == 3);
}

TEST_CASE("client: without the grant, each held job has its own RENEW", "[worker]") {
    aclaim::base::ManualClock clock(kT0);
    Harness h(options(), clock);
    h.client.start();
    open_granting(h, {});
    assign(h, {31, 32});
    advance(h, clock, kHeartbeat - Millis(1));
    CHECK(h.client.pending() == 0);
    advance(h, clock, Millis(1));
    CHECK(h.client.pending() == 2);
    std::vector<std::int64_t> ids;
    for (int i = 0; i < 2; ++i) {
        const auto r = h.next_request<proto::Renew>();
        const auto& renew = std::get<proto::Renew>(r.message);
        CHECK(renew.held.empty());
        ids.push_back(renew.job_id);
    }
    std::sort(ids.begin(), ids.end());
    CHECK(ids == std::vector<std::int64_t>{31, 32});
}

TEST_CASE("client: a RENEW of several jobs refused as a message is not sent again", "[worker]") {
    aclaim::base::ManualClock clock(kT0);
    Harness h(options(), clock);
    h.client.start();
    open_granting(h, {std::string(proto::kFeatureRenewHeld)});
    assign(h, {41, 42});
    advance(h, clock, kHeartbeat);
    const auto sent = h.next_request<proto::Renew>();
    const auto& renew = std::get<proto::Renew>(sent.message);
    REQUIRE(renew.held.size() == 1);
    // One ERROR for the whole message: the held job's renewal is abandoned with it, no wait for
    // an answer that will not come, and from now on every job is renewed alone.
    h.fake.reply(sent, proto::Error{renew.req, "invalid", "RENEW: field 'held' is wrong"});
    const auto deadline = SteadyClock::now() + kLimit;
    while (h.client.pending() > 0 && SteadyClock::now() < deadline) h.client.poll(Millis(5));
    CHECK(h.client.pending() == 0);
    // The abandoned renewals are due again at the next heartbeat, each on its own.
    advance(h, clock, kHeartbeat);
    CHECK(h.client.pending() == 2);
    for (int i = 0; i < 2; ++i) {
        const auto r = h.next_request<proto::Renew>();
        CHECK(std::get<proto::Renew>(r.message).held.empty());
    }
    CHECK(h.client.held().size() == 2);
}
