// The worker client with several coordinator endpoints: a coordinator that dies, or accepts the
// connection and never answers, is left for the next one, where the client says HELLO again and
// renews what it holds at once. Real sockets, every wait bounded by a deadline.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <set>

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

/// A TCP port that accepts connections (the kernel's backlog does) and never says a word: a
/// coordinator whose process hangs.
struct MuteListener {
    int fd = -1;
    std::string endpoint;
    MuteListener() {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(fd >= 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        REQUIRE(::listen(fd, 16) == 0);
        socklen_t len = sizeof addr;
        REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
        endpoint = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    }
    ~MuteListener() { ::close(fd); }
};

constexpr aclaim::common::Instant kT0 = aclaim::common::instant_from_micros(1'700'000'000'000'000);

/// Drives a client whose clock is a ManualClock: every poll moves it by `step` (zero freezes it),
/// so the times checked below are the client's own and a slow machine cannot fail them. Each
/// fake's requests of other types than the one awaited are kept apart, in `skipped`, so that one
/// coordinator's are never taken for another's and none goes unseen.
struct Driver {
    worker::Client& client;
    aclaim::common::ManualClock& clock;
    Millis step{5};
    std::vector<worker::Event> events{};
    std::map<const FakeCoordinator*, std::vector<Request>> skipped{};

    void poll_once() {
        auto ev = client.poll(Millis(5));
        events.insert(events.end(), ev.begin(), ev.end());
        clock.advance(step);
    }

    /// The client's clock now; a deadline never depends on anything else.
    aclaim::common::MonotonicTime now() const { return clock.monotonic_now(); }

    template <class T>
    Request next_request(FakeCoordinator& fake) {
        auto& kept = skipped[&fake];
        for (auto it = kept.begin(); it != kept.end(); ++it) {
            if (std::holds_alternative<T>(it->message)) {
                Request r = *it;
                kept.erase(it);
                return r;
            }
        }
        // A bound on the test's real run time only.
        const auto deadline = SteadyClock::now() + kLimit;
        while (SteadyClock::now() < deadline) {
            poll_once();
            while (auto r = fake.receive()) {
                if (std::holds_alternative<T>(r->message)) return *r;
                kept.push_back(*r);
            }
        }
        FAIL("no " << typeid(T).name() << " within the deadline");
        return {};
    }

    template <class E>
    E next_event() {
        const auto deadline = SteadyClock::now() + kLimit;
        while (SteadyClock::now() < deadline) {
            for (auto it = events.begin(); it != events.end(); ++it) {
                if (auto* e = std::get_if<E>(&*it)) {
                    E out = *e;
                    events.erase(it);
                    return out;
                }
            }
            poll_once();
        }
        FAIL("no " << typeid(E).name() << " event within the deadline");
        return {};
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
    auto o = options();
    o.endpoints = {b.endpoint(), a->endpoint()};
    // Long enough that only the dropped connection can explain a quick failover.
    o.reply_timeout = Millis(4000);
    o.seed = seed_starting_at(ctx, o, a->endpoint());
    aclaim::common::ManualClock clock(kT0);
    worker::Client client(ctx, o, clock);
    Driver d{client, clock};
    client.start();
    CHECK(client.endpoint() == a->endpoint());
    d.welcome(*a, d.next_request<proto::Hello>(*a));

    client.claim(1, 0);
    const auto claim = d.next_request<proto::Claim>(*a);
    a->reply(claim, proto::Assigned{proto::request_id(claim.message),
                                    {{21, 5, 0, 3000, 1, 0, "payload"}}});
    d.next_event<worker::JobAssigned>();
    client.complete({21, 5}, "review:21:5");
    const auto lost_complete = d.next_request<proto::Complete>(*a);

    client.claim(1, 0);
    d.next_request<proto::Claim>(*a);

    const auto died = d.now();
    a.reset();  // SIGKILL, as the worker sees it: the connection drops

    const auto hello = d.next_request<proto::Hello>(b);
    // On the client's clock, well before its reply timeout could have noticed anything.
    CHECK(d.now() - died < Millis(2000));
    CHECK(client.endpoint() == b.endpoint());
    CHECK(std::get<proto::Hello>(hello.message).worker_id == "unit-worker");
    d.welcome(b, hello);
    // The lost COMPLETE is sent again under its request id; the lost CLAIM is not.
    const auto again = d.next_request<proto::Complete>(b);
    CHECK(proto::request_id(again.message) == proto::request_id(lost_complete.message));
    b.reply(again, proto::Accepted{proto::request_id(again.message), 21, 5, "completed", true});
    const auto v = d.next_event<worker::Verdict>();
    CHECK(v.accepted);
    CHECK(v.replayed);
    CHECK(client.stats().failovers == 1);
    const auto lost_claim = d.next_event<worker::ClaimEnded>();
    CHECK(lost_claim.why == worker::ClaimEnded::Why::ConnectionLost);
    for (const auto& r : d.sent_so_far(b)) {
        INFO("request " << proto::request_id(r.message) << " sent to the second coordinator");
        CHECK_FALSE(std::holds_alternative<proto::Claim>(r.message));
    }
    client.close();
}

TEST_CASE("client: a held lease is renewed at once through the coordinator it fails over to",
          "[worker][failover]") {
    zmq::context_t ctx;
    std::optional<FakeCoordinator> a(std::in_place, ctx);
    FakeCoordinator b(ctx);
    auto o = options();
    o.endpoints = {a->endpoint(), b.endpoint()};
    o.reply_timeout = Millis(4000);
    o.seed = seed_starting_at(ctx, o, a->endpoint());
    aclaim::common::ManualClock clock(kT0);
    worker::Client client(ctx, o, clock);
    Driver d{client, clock};
    client.start();
    d.welcome(*a, d.next_request<proto::Hello>(*a));
    client.claim(1, 0);
    const auto claim = d.next_request<proto::Claim>(*a);
    a->reply(claim, proto::Assigned{proto::request_id(claim.message),
                                    {{31, 2, 0, 3000, 1, 0, "payload"}}});
    d.next_event<worker::JobAssigned>();
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
    CHECK(client.held().holds({31, 2}));
    client.close();
}

TEST_CASE("client: a coordinator that accepts the connection and never answers is left",
          "[worker][failover]") {
    zmq::context_t ctx;
    MuteListener mute;
    FakeCoordinator b(ctx);
    auto o = options();
    o.endpoints = {mute.endpoint, b.endpoint()};
    o.reply_timeout = Millis(300);
    o.seed = seed_starting_at(ctx, o, mute.endpoint);
    aclaim::common::ManualClock clock(kT0);
    worker::Client client(ctx, o, clock);
    Driver d{client, clock};
    const auto started = d.now();
    client.start();
    CHECK(client.endpoint() == mute.endpoint);
    // No WELCOME within the reply timeout: on to the next endpoint, once that time has passed on
    // the client's clock and not before.
    d.welcome(b, d.next_request<proto::Hello>(b));
    CHECK(d.now() - started >= Millis(300));
    CHECK(client.endpoint() == b.endpoint());
    CHECK(client.stats().failovers == 1);
    client.close();
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
    auto o = options();
    o.endpoints = {refused, b.endpoint()};
    o.reply_timeout = Millis(4000);
    o.seed = seed_starting_at(ctx, o, refused);
    aclaim::common::ManualClock clock(kT0);
    worker::Client client(ctx, o, clock);
    Driver d{client, clock};
    client.start();
    const auto started = d.now();
    d.welcome(b, d.next_request<proto::Hello>(b));
    // On the client's clock: the refusal, not the 4 s reply timeout, moved it on.
    CHECK(d.now() - started < Millis(2000));
    client.close();
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
