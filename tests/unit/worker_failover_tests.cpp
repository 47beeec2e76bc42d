// The worker client with several coordinator endpoints: a coordinator that dies, or accepts the
// connection and never answers, is left for the next one, where the client says HELLO again and
// renews what it holds at once. Real sockets, every wait bounded by a deadline.

#include <map>
#include <optional>
#include <set>

#include "tests/support/silent_listener.hpp"
#include "tests/unit/fake_coordinator.hpp"

using namespace aclaim::testing;

namespace {

/// A seed that makes the client start at `first`: the order is the client's own, shuffled.
std::uint64_t seed_starting_at(zmq::context_t& ctx, worker::ClientOptions o,
                               const std::string& first) {
    for (std::uint64_t seed = 1; seed < 1000; ++seed) {
        o.seed = seed;
        if (worker::Client(ctx, o).endpoint() == first) return seed;
    }
    FAIL("no seed starts at " << first);
    return 0;
}

/// The options of a client that tries `endpoints`, starts at `first` and waits `reply_timeout`
/// for an answer.
worker::ClientOptions starting_at(zmq::context_t& ctx, std::vector<std::string> endpoints,
                                  const std::string& first, Millis reply_timeout) {
    auto o = options();
    o.endpoints = std::move(endpoints);
    o.reply_timeout = reply_timeout;
    o.seed = seed_starting_at(ctx, o, first);
    return o;
}

constexpr aclaim::base::Instant kT0 = aclaim::base::instant_from_micros(1'700'000'000'000'000);

/// Drives a client whose clock is a ManualClock: every poll moves it by `step` (zero freezes it),
/// so the times checked below are the client's own and a slow machine cannot fail them. Each
/// fake's requests of other types than the one awaited are kept apart, in `skipped`, so that one
/// coordinator's are never taken for another's and none goes unseen.
struct Driver {
    Driver(zmq::context_t& ctx, const worker::ClientOptions& o) : client(ctx, o, clock) {}

    aclaim::base::ManualClock clock{kT0};
    worker::Client client;
    Millis step{5};
    std::vector<worker::Event> events{};
    std::map<const FakeCoordinator*, std::vector<Request>> skipped{};

    void poll_once() {
        auto ev = client.poll(Millis(5));
        events.insert(events.end(), ev.begin(), ev.end());
        clock.advance(step);
    }

    /// The client's clock now; a deadline never depends on anything else.
    aclaim::base::MonotonicTime now() const { return clock.monotonic_now(); }

    template <class T>
    Request next_request(FakeCoordinator& fake) {
        return next_request_polling<T>(fake, skipped[&fake], [this] { poll_once(); });
    }

    template <class E>
    E next_event() {
        return next_event_polling<E>(events, [this] { poll_once(); });
    }

    /// A CLAIM of one job, answered by `fake` with `job` at `gen`, until the client has it.
    void assign(FakeCoordinator& fake, std::int64_t job, std::int64_t gen) {
        client.claim(1, 0);
        const auto claim = next_request<proto::Claim>(fake);
        fake.reply(claim, one_job(claim, job, gen, 3000));
        next_event<worker::JobAssigned>();
    }

    void welcome(FakeCoordinator& fake, const Request& hello) {
        fake.reply(hello, proto::Welcome{proto::request_id(hello.message), 7, 3000, 1000, 65536});
        next_event<worker::SessionReady>();
    }

    /// Everything `fake` was sent before a RELEASE submitted now: the DEALER delivers in order,
    /// so whatever the client sent so far is in the list once the RELEASE arrives.
    std::vector<Request> sent_so_far(FakeCoordinator& fake) {
        client.release({99, 1});
        next_request<proto::Release>(fake);
        return skipped[&fake];
    }
};

}  // namespace

TEST_CASE("client: a coordinator that dies is left for the next, where held jobs are renewed",
          "[worker][failover]") {
    zmq::context_t ctx;
    std::optional<FakeCoordinator> a(std::in_place, ctx);
    FakeCoordinator b(ctx);
    // Long enough that only the dropped connection can explain a quick failover.
    Driver d(ctx, starting_at(ctx, {b.endpoint(), a->endpoint()}, a->endpoint(), Millis(4000)));
    d.client.start();
    CHECK(d.client.endpoint() == a->endpoint());
    d.welcome(*a, d.next_request<proto::Hello>(*a));

    d.assign(*a, 21, 5);
    d.client.complete({21, 5}, "review:21:5");
    const auto lost_complete = d.next_request<proto::Complete>(*a);

    d.client.claim(1, 0);
    d.next_request<proto::Claim>(*a);

    const auto died = d.now();
    a.reset();  // SIGKILL, as the worker sees it: the connection drops

    const auto hello = d.next_request<proto::Hello>(b);
    // On the client's clock, well before its reply timeout could have noticed anything.
    CHECK(d.now() - died < Millis(2000));
    CHECK(d.client.endpoint() == b.endpoint());
    CHECK(std::get<proto::Hello>(hello.message).worker_id == "unit-worker");
    d.welcome(b, hello);
    // The lost COMPLETE is sent again under its request id; the lost CLAIM is not.
    const auto again = d.next_request<proto::Complete>(b);
    CHECK(proto::request_id(again.message) == proto::request_id(lost_complete.message));
    b.reply(again, proto::Accepted{proto::request_id(again.message), 21, 5, "completed", true});
    const auto v = d.next_event<worker::Verdict>();
    CHECK(v.accepted);
    CHECK(v.replayed);
    CHECK(d.client.stats().failovers == 1);
    const auto lost_claim = d.next_event<worker::ClaimEnded>();
    CHECK(lost_claim.why == worker::ClaimEnded::Why::ConnectionLost);
    for (const auto& r : d.sent_so_far(b)) {
        INFO("request " << proto::request_id(r.message) << " sent to the second coordinator");
        CHECK_FALSE(std::holds_alternative<proto::Claim>(r.message));
    }
    d.client.close();
}

TEST_CASE("client: a held lease is renewed at once through the coordinator it fails over to",
          "[worker][failover]") {
    zmq::context_t ctx;
    std::optional<FakeCoordinator> a(std::in_place, ctx);
    FakeCoordinator b(ctx);
    Driver d(ctx, starting_at(ctx, {a->endpoint(), b.endpoint()}, a->endpoint(), Millis(4000)));
    d.client.start();
    d.welcome(*a, d.next_request<proto::Hello>(*a));
    d.assign(*a, 31, 2);
    a.reset();

    d.welcome(b, d.next_request<proto::Hello>(b));
    // Not a heartbeat (1 s) later: at once, since the lease kept running while the worker moved.
    // The client's clock stands still from the WELCOME on, so only an immediate RENEW arrives.
    d.step = Millis(0);
    const auto welcomed = d.now();
    const auto renew = d.next_request<proto::Renew>(b);
    CHECK(d.now() == welcomed);
    CHECK(std::get<proto::Renew>(renew.message).job_id == 31);
    CHECK(std::get<proto::Renew>(renew.message).generation == 2);
    b.reply(renew, proto::LeaseMsg{proto::request_id(renew.message), 31, 2, 0, 3000});
    CHECK(d.client.held().holds({31, 2}));
    d.client.close();
}

TEST_CASE("client: a coordinator that accepts the connection and never answers is left",
          "[worker][failover]") {
    zmq::context_t ctx;
    SilentListener mute(SilentListener::Accept::Backlog);
    FakeCoordinator b(ctx);
    Driver d(ctx, starting_at(ctx, {mute.endpoint(), b.endpoint()}, mute.endpoint(), Millis(300)));
    const auto started = d.now();
    d.client.start();
    CHECK(d.client.endpoint() == mute.endpoint());
    // No WELCOME within the reply timeout: on to the next endpoint, once that time has passed on
    // the client's clock and not before.
    d.welcome(b, d.next_request<proto::Hello>(b));
    CHECK(d.now() - started >= Millis(300));
    CHECK(d.client.endpoint() == b.endpoint());
    CHECK(d.client.stats().failovers == 1);
    d.client.close();
}

TEST_CASE("client: an endpoint that refuses connections is skipped", "[worker][failover]") {
    zmq::context_t ctx;
    FakeCoordinator b(ctx);
    // A port nobody listens on: bound and released.
    std::string refused;
    {
        FakeCoordinator gone(ctx);
        refused = gone.endpoint();
    }
    Driver d(ctx, starting_at(ctx, {refused, b.endpoint()}, refused, Millis(4000)));
    d.client.start();
    const auto started = d.now();
    d.welcome(b, d.next_request<proto::Hello>(b));
    // On the client's clock: the refusal, not the 4 s reply timeout, moved it on.
    CHECK(d.now() - started < Millis(2000));
    d.client.close();
}

TEST_CASE("client: every worker keeps its own endpoint order", "[worker][failover]") {
    zmq::context_t ctx;
    auto o = options();
    o.endpoints = {"tcp://127.0.0.1:1", "tcp://127.0.0.1:2", "tcp://127.0.0.1:3"};
    std::set<std::string> firsts;
    for (std::uint64_t seed = 1; seed <= 60; ++seed) {
        o.seed = seed;
        firsts.insert(worker::Client(ctx, o).endpoint());
    }
    // Sixty workers do not all start at (or fail over to) the same coordinator.
    CHECK(firsts.size() == 3);
    o.endpoints.clear();
    CHECK_THROWS_AS(worker::Client(ctx, o), std::invalid_argument);
}
