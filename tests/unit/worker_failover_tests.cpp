// The worker client with several coordinator endpoints: a coordinator that dies, or accepts the
// connection and never answers, is left for the next one, where the client says HELLO again and
// renews what it holds at once. Real sockets, every wait bounded by a deadline.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

/// Polls the client and collects its events; each fake's requests of other types than the one
/// awaited are dropped, so that one coordinator's are never taken for another's.
struct Driver {
    worker::Client& client;
    std::vector<worker::Event> events;

    template <class T>
    Request next_request(FakeCoordinator& fake) {
        std::vector<Request> dropped;
        return aclaim::testing::next_request<T>(client, fake, events, dropped);
    }

    template <class E>
    E next_event() {
        return aclaim::testing::next_event<E>(client, events);
    }

    void welcome(FakeCoordinator& fake, const Request& hello) {
        fake.reply(hello, proto::Welcome{proto::request_id(hello.message), 7, 3000, 1000, 65536});
        next_event<worker::SessionReady>();
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
    worker::Client client(ctx, o);
    Driver d{client, {}};
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

    const auto died = SteadyClock::now();
    a.reset();  // SIGKILL, as the worker sees it: the connection drops

    const auto hello = d.next_request<proto::Hello>(b);
    CHECK(SteadyClock::now() - died < Millis(2000));
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
    worker::Client client(ctx, o);
    Driver d{client, {}};
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
    const auto welcomed = SteadyClock::now();
    const auto renew = d.next_request<proto::Renew>(b);
    CHECK(SteadyClock::now() - welcomed < Millis(500));
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
    worker::Client client(ctx, o);
    Driver d{client, {}};
    client.start();
    CHECK(client.endpoint() == mute.endpoint);
    // No WELCOME within the reply timeout: on to the next endpoint.
    d.welcome(b, d.next_request<proto::Hello>(b));
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
    worker::Client client(ctx, o);
    Driver d{client, {}};
    client.start();
    const auto started = SteadyClock::now();
    d.welcome(b, d.next_request<proto::Hello>(b));
    CHECK(SteadyClock::now() - started < Millis(2000));
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
