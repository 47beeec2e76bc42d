// The worker client's use of protocol 1.4's reconnect hints, against a scripted ROUTER and on a
// ManualClock, so that every wait checked is the client's own and no test sleeps through one:
// HELLO asks for them, a refusal's retry_after_ms is waited out (on a new connection after
// `draining`, on the same one after `overloaded`), and a worker with a job at stake comes back
// within a heartbeat whatever it was told.

#include <algorithm>

#include "tests/unit/fake_coordinator.hpp"

using namespace aclaim::testing;

namespace {

constexpr aclaim::base::Instant kT0 = aclaim::base::instant_from_micros(1'700'000'000'000'000);

/// HELLO (which must ask for reconnect_hints) answered with a WELCOME that grants them and
/// reports `sessions`.
Request open_hinted(Harness& h, std::int64_t sessions) {
    auto hello = h.next_request<proto::Hello>();
    const auto& asked = std::get<proto::Hello>(hello.message).features;
    REQUIRE(std::find(asked.begin(), asked.end(), proto::kFeatureReconnectHints) != asked.end());
    proto::Welcome w{proto::request_id(hello.message), 7, 3000, 1000, 65536};
    w.features = {std::string(proto::kFeatureReconnectHints)};
    w.sessions = sessions;
    h.fake.reply(hello, w);
    h.next_event<worker::SessionReady>();
    return hello;
}

/// Polls the client, its clock standing still, until it has taken `errors` ERROR replies: the
/// waits checked after it count from then.
void take_errors(Harness& h, std::int64_t errors) {
    const auto deadline = SteadyClock::now() + kLimit;
    while (h.client.stats().errors < errors && SteadyClock::now() < deadline) {
        auto ev = h.client.poll(Millis(5));
        h.events.insert(h.events.end(), ev.begin(), ev.end());
    }
    REQUIRE(h.client.stats().errors == errors);
}

/// Moves the client's clock `total` in steps, polling it, and fails if the fake hears a HELLO.
void no_hello_for(Harness& h, aclaim::base::ManualClock& clock, Millis total) {
    for (Millis done{0}; done < total; done += Millis(100)) {
        clock.advance(Millis(100));
        auto ev = h.client.poll(Millis(0));
        h.events.insert(h.events.end(), ev.begin(), ev.end());
        while (auto r = h.fake.receive()) {
            if (std::holds_alternative<proto::Hello>(r->message))
                FAIL("HELLO " << (done + Millis(100)).count() << " ms after the refusal");
            h.skipped.push_back(*r);
        }
    }
}

}  // namespace

TEST_CASE("client: a draining coordinator's retry_after_ms is waited out before reconnecting",
          "[worker][reconnect]") {
    aclaim::base::ManualClock clock(kT0);
    Harness h(options(), clock);
    h.client.start();
    open_hinted(h, 10000);
    h.client.claim(1, 30000);
    const auto claim = h.next_request<proto::Claim>();
    h.fake.reply(claim, proto::Error{proto::request_id(claim.message), "draining",
                                     "the coordinator is shutting down", 7000});
    take_errors(h, 1);
    // Its claim is given up with the connection; nothing until 7 s on the client's clock.
    no_hello_for(h, clock, Millis(6900));
    clock.advance(Millis(300));  // 7.2 s: past 7 s and the up to 100 ms the worker adds
    const auto again = h.next_request<proto::Hello>();
    CHECK(again.identity != claim.identity);  // a new connection
    CHECK(h.client.stats().reconnects == 1);
}

TEST_CASE(
    "client: a HELLO turned away overloaded is said again on the same connection after "
    "retry_after_ms",
    "[worker][reconnect]") {
    aclaim::base::ManualClock clock(kT0);
    Harness h(options(), clock);
    h.client.start();
    const auto first = h.next_request<proto::Hello>();
    h.fake.reply(first, proto::Error{proto::request_id(first.message), "overloaded",
                                     "2048 HELLOs are waiting", 3000});
    take_errors(h, 1);
    no_hello_for(h, clock, Millis(2900));
    clock.advance(Millis(300));
    const auto second = h.next_request<proto::Hello>();
    CHECK(second.identity == first.identity);  // no new handshake
    CHECK(proto::request_id(second.message) != proto::request_id(first.message));
    CHECK(h.client.stats().reconnects == 0);
}

TEST_CASE("client: a worker holding a job comes back within a heartbeat whatever it was told",
          "[worker][reconnect]") {
    aclaim::base::ManualClock clock(kT0);
    Harness h(options(), clock);
    h.client.start();
    open_hinted(h, 10000);  // heartbeat 1000 ms, lease 3000 ms
    h.assign_one(5, 1, 3000);
    h.client.claim(1, 30000);
    const auto claim = h.next_request<proto::Claim>();
    h.fake.reply(claim, proto::Error{proto::request_id(claim.message), "draining",
                                     "the coordinator is shutting down", 15000});
    take_errors(h, 1);
    clock.advance(Millis(1100));
    const auto again = h.next_request<proto::Hello>();
    CHECK(again.identity != claim.identity);
}
