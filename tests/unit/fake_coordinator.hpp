#pragma once

// A scripted ROUTER standing in for the coordinator, and a harness that drives a worker client
// against it from one thread: real sockets on an ephemeral port, every wait bounded by a deadline.

#include <catch2/catch.hpp>
#include <typeinfo>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/proto/protocol.hpp"
#include "worker/client.hpp"

namespace aclaim::testing {

namespace proto = aclaim::proto;
namespace worker = aclaim::worker;
using worker::Millis;
using worker::SteadyClock;

inline constexpr Millis kLimit{5000};

struct Request {
    std::string identity;
    proto::Encoding encoding = proto::Encoding::Binary;
    proto::Message message;
};

class FakeCoordinator {
  public:
    explicit FakeCoordinator(zmq::context_t& ctx) : router_(ctx, zmq::socket_type::router) {
        router_.set(zmq::sockopt::linger, 0);
        router_.bind("tcp://127.0.0.1:*");
        endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    }

    const std::string& endpoint() const { return endpoint_; }

    std::optional<Request> receive() {
        std::vector<zmq::message_t> parts;
        if (!zmq::recv_multipart(router_, std::back_inserter(parts), zmq::recv_flags::dontwait))
            return std::nullopt;
        REQUIRE(parts.size() == 4);
        std::vector<std::string_view> frames;
        for (std::size_t i = 1; i < parts.size(); ++i)
            frames.emplace_back(parts[i].data<char>(), parts[i].size());
        auto decoded = proto::decode(frames);
        REQUIRE(std::holds_alternative<proto::Decoded>(decoded));
        auto& d = std::get<proto::Decoded>(decoded);
        return Request{parts[0].to_string(), d.encoding, d.message};
    }

    void reply(const Request& to, const proto::Message& m) {
        const auto f = proto::encode(m, to.encoding);
        std::array<zmq::const_buffer, 4> parts{zmq::buffer(to.identity), zmq::buffer(f.tag),
                                               zmq::buffer(f.type), zmq::buffer(f.body)};
        REQUIRE(zmq::send_multipart(router_, parts));
    }

  private:
    zmq::socket_t router_;
    std::string endpoint_;
};

/// The next request of type T that `fake` receives, calling `poll` (which polls the client)
/// before each look; requests of other types are kept in `skipped` and looked at first next time.
/// kLimit bounds the test's real run time.
template <class T, class Poll>
Request next_request_polling(FakeCoordinator& fake, std::vector<Request>& skipped,
                             const Poll& poll) {
    for (auto it = skipped.begin(); it != skipped.end(); ++it) {
        if (std::holds_alternative<T>(it->message)) {
            Request r = *it;
            skipped.erase(it);
            return r;
        }
    }
    const auto deadline = SteadyClock::now() + kLimit;
    while (SteadyClock::now() < deadline) {
        poll();
        while (auto r = fake.receive()) {
            if (std::holds_alternative<T>(r->message)) return *r;
            skipped.push_back(*r);
        }
    }
    FAIL("no " << typeid(T).name() << " within the deadline");
    return {};
}

/// The next client event of type E in `events`, calling `poll` (which adds the client's events
/// to them) until one is there.
template <class E, class Poll>
E next_event_polling(std::vector<worker::Event>& events, const Poll& poll) {
    const auto deadline = SteadyClock::now() + kLimit;
    while (SteadyClock::now() < deadline) {
        for (auto it = events.begin(); it != events.end(); ++it) {
            if (auto* e = std::get_if<E>(&*it)) {
                E out = *e;
                events.erase(it);
                return out;
            }
        }
        poll();
    }
    FAIL("no " << typeid(E).name() << " event within the deadline");
    return {};
}

/// The next request of type T that `fake` receives, polling `client` meanwhile (its events go
/// to `events`); requests of other types are kept in `skipped` and looked at first next time.
template <class T>
Request next_request(worker::Client& client, FakeCoordinator& fake,
                     std::vector<worker::Event>& events, std::vector<Request>& skipped) {
    return next_request_polling<T>(fake, skipped, [&] {
        auto ev = client.poll(Millis(5));
        events.insert(events.end(), ev.begin(), ev.end());
    });
}

/// The next client event of type E, from `events` or by polling `client`; what `fake` receives
/// meanwhile (when given) is kept in `skipped`.
template <class E>
E next_event(worker::Client& client, std::vector<worker::Event>& events,
             FakeCoordinator* fake = nullptr, std::vector<Request>* skipped = nullptr) {
    return next_event_polling<E>(events, [&] {
        auto ev = client.poll(Millis(5));
        events.insert(events.end(), ev.begin(), ev.end());
        if (fake && skipped) {
            while (auto r = fake->receive()) skipped->push_back(*r);
        }
    });
}

/// The answer to `claim` that hands out one job, `job` at `gen`, for `lease_ms`.
inline proto::Assigned one_job(const Request& claim, std::int64_t job, std::int64_t gen,
                               std::int32_t lease_ms) {
    return proto::Assigned{proto::request_id(claim.message),
                           {{job, gen, 0, lease_ms, 1, 0, "payload"}}};
}

/// Drives client and fake from one thread: next_request returns the next request of a type
/// (others are kept for later), next_event the next client event of a type.
struct Harness {
    zmq::context_t ctx;
    FakeCoordinator fake{ctx};
    worker::Client client;
    std::vector<worker::Event> events;
    std::vector<Request> skipped;

    explicit Harness(worker::ClientOptions o)
        : client(ctx, [&] {
              o.endpoints = {fake.endpoint()};
              return o;
          }()) {}
    /// A client on `clock` (a ManualClock in the tests of its timers), which must outlive it.
    Harness(worker::ClientOptions o, const aclaim::base::Clock& clock)
        : client(
              ctx,
              [&] {
                  o.endpoints = {fake.endpoint()};
                  return o;
              }(),
              clock) {}

    ~Harness() { client.close(); }

    template <class T>
    Request next_request() {
        return testing::next_request<T>(client, fake, events, skipped);
    }

    template <class E>
    E next_event() {
        return testing::next_event<E>(client, events, &fake, &skipped);
    }

    /// HELLO answered with WELCOME; returns the request for its identity.
    Request open_session(std::int32_t lease_ms = 3000, std::int32_t heartbeat_ms = 1000) {
        auto hello = next_request<proto::Hello>();
        fake.reply(hello, proto::Welcome{proto::request_id(hello.message), 7, lease_ms,
                                         heartbeat_ms, 65536});
        next_event<worker::SessionReady>();
        return hello;
    }

    /// Everything the fake was sent before a RELEASE submitted now, as far as next_request has
    /// not taken it: the DEALER delivers in order, so once the RELEASE arrives nothing the client
    /// sent earlier is still on its way.
    const std::vector<Request>& sent_so_far() {
        client.release({99, 1});
        next_request<proto::Release>();
        return skipped;
    }

    worker::JobRef assign_one(std::int64_t job, std::int64_t gen, std::int32_t lease_ms) {
        client.claim(1, 0);
        const auto claim = next_request<proto::Claim>();
        fake.reply(claim, one_job(claim, job, gen, lease_ms));
        const auto a = next_event<worker::JobAssigned>();
        return {a.job.job_id, a.job.generation};
    }
};

inline worker::ClientOptions options(proto::Encoding enc = proto::Encoding::Binary) {
    worker::ClientOptions o;
    o.worker_id = "unit-worker";
    o.org_id = 7;
    o.encoding = enc;
    o.reply_timeout = Millis(300);
    o.backoff_first = Millis(20);
    o.backoff_cap = Millis(100);
    o.retry_delay = Millis(20);
    return o;
}

}  // namespace aclaim::testing
