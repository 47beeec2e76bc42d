#pragma once

// A worker without a worker library, for tests in every suite: a DEALER that speaks the protocol
// through common/proto/protocol.hpp, in either encoding, in plaintext or under CURVE. Every wait
// is bounded by a deadline; nothing sleeps in the hope that something has happened.

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/base/clock.hpp"
#include "common/proto/protocol.hpp"
#include "tests/support/eventually.hpp"

namespace aclaim::testing {

namespace proto = aclaim::proto;
using namespace std::chrono_literals;

/// The keys a RawWorker authenticates with under CURVE (Z85 text, as libzmq takes them).
struct CurveClient {
    std::string server_public_key;
    std::string public_key;
    std::string secret_key;
};

/// A worker without a worker library: frames in, frames out.
class RawWorker {
  public:
    RawWorker(zmq::context_t& context, const std::string& endpoint,
              proto::Encoding encoding = proto::Encoding::Binary,
              const std::optional<CurveClient>& curve = std::nullopt)
        : socket_(context, zmq::socket_type::dealer), encoding_(encoding) {
        socket_.set(zmq::sockopt::linger, 0);
        if (curve) {
            socket_.set(zmq::sockopt::curve_serverkey, curve->server_public_key);
            socket_.set(zmq::sockopt::curve_publickey, curve->public_key);
            socket_.set(zmq::sockopt::curve_secretkey, curve->secret_key);
        }
        socket_.connect(endpoint);
    }

    std::uint64_t next_req() { return ++req_; }

    /// Sends `m` under the next request id, which it returns.
    std::uint64_t request(proto::Message m) {
        const auto req = next_req();
        std::visit([req](auto& body) { body.req = req; }, m);
        send(m);
        return req;
    }

    void send(const proto::Message& m) {
        const proto::Frames f = proto::encode(m, encoding_);
        send_frames({f.tag, f.type, f.body});
    }

    void send_frames(const std::vector<std::string>& frames) {
        for (std::size_t i = 0; i < frames.size(); ++i) {
            const auto flags =
                i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
            REQUIRE(socket_.send(zmq::buffer(frames[i]), flags));
        }
    }

    /// The next message, decoded, or nothing within `limit`.
    std::optional<proto::Message> receive(std::chrono::milliseconds limit) {
        zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
        if (zmq::poll(&item, 1, limit) == 0) return std::nullopt;
        std::vector<zmq::message_t> parts;
        REQUIRE(zmq::recv_multipart(socket_, std::back_inserter(parts)));
        std::vector<std::string_view> frames;
        for (const auto& p : parts) frames.push_back(p.to_string_view());
        auto decoded = proto::decode(frames);
        if (auto* err = std::get_if<proto::DecodeError>(&decoded)) {
            FAIL("coordinator sent an undecodable message: " << err->code << ": " << err->text);
        }
        return std::get<proto::Decoded>(std::move(decoded)).message;
    }

    /// The answer to `req` within `limit`, or nothing; anything else is kept in `others`.
    std::optional<proto::Message> answer(std::uint64_t req, std::chrono::milliseconds limit) {
        const auto deadline = base::SystemClock().monotonic_now() + limit;
        while (true) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - base::SystemClock().monotonic_now());
            auto m = receive(std::max(left, 0ms));
            if (!m) return std::nullopt;
            if (proto::request_id(*m) == req) return m;
            others.push_back(std::move(*m));
        }
    }

    /// Receives until the answer to `req` arrives; anything else is kept in `others`. Fails the
    /// test on timeout, or when the answer to `req` is not a T.
    template <class T>
    T expect(std::uint64_t req, std::chrono::milliseconds limit = 10s) {
        auto m = answer(req, limit);
        if (!m) FAIL("no answer to request " << req << " within " << limit.count() << " ms");
        if (auto* t = std::get_if<T>(&*m)) return *t;
        std::string what(proto::type_name(*m));
        if (auto* e = std::get_if<proto::Error>(&*m)) what += " " + e->code + ": " + e->text;
        if (auto* n = std::get_if<proto::NoWork>(&*m)) what += " " + n->reason;
        if (auto* r = std::get_if<proto::Rejected>(&*m)) what += " " + r->reason;
        FAIL("request " << req << " answered with " << what);
        return T{};
    }

    /// Waits for an unprompted message of type T (req 0), looking at `others` first.
    template <class T>
    T expect_push(std::chrono::milliseconds limit = 10s) {
        for (auto it = others.begin(); it != others.end(); ++it) {
            if (auto* t = std::get_if<T>(&*it)) {
                T found = *t;
                others.erase(it);
                return found;
            }
        }
        return expect<T>(0, limit);
    }

    /// HELLO, asking for `features` (protocol 1.2 and later) when there are any.
    proto::Welcome hello(const std::string& worker_id, store::OrgId org,
                         std::vector<std::string> features = {}) {
        const auto req = next_req();
        proto::Hello hello{req, worker_id, org};
        hello.features = std::move(features);
        send(hello);
        return expect<proto::Welcome>(req);
    }

    /// Sends CLAIM and returns its request id.
    std::uint64_t claim(int max_jobs = 1, int wait_ms = 0) {
        const auto req = next_req();
        send(proto::Claim{req, max_jobs, wait_ms});
        return req;
    }

    proto::AssignedJob claim_one() {
        const auto a = expect<proto::Assigned>(claim());
        REQUIRE(a.jobs.size() == 1);
        return a.jobs[0];
    }

    /// COMPLETE of `job` at its generation, under the next request id; the answer, which must
    /// be ACCEPTED.
    proto::Accepted complete(const proto::AssignedJob& job, const std::string& result_ref) {
        const auto req = next_req();
        send(proto::Complete{req, job.job_id, job.generation, result_ref});
        return expect<proto::Accepted>(req);
    }

    std::vector<proto::Message> others;

  private:
    zmq::socket_t socket_;
    proto::Encoding encoding_;
    std::uint64_t req_ = 0;
};

/// A RawWorker with a ZeroMQ context of its own, that has said HELLO as `worker_id` of `org`: for
/// tests that start a coordinator themselves.
class GreetedWorker : private zmq::context_t, public RawWorker {
  public:
    GreetedWorker(const std::string& endpoint, const std::string& worker_id, store::OrgId org)
        : RawWorker(context(), endpoint) {
        hello(worker_id, org);
    }

  private:
    zmq::context_t& context() { return *this; }
};

/// A binary CLAIM body of exactly `size` bytes under request id `req`: the request id's eight
/// bytes after the version byte, then filler.
inline std::string claim_body_of_size(std::uint64_t req, std::size_t size) {
    std::string b(1, '\x01');
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>((req >> (8 * i)) & 0xff));
    b.resize(size, 'x');
    return b;
}

/// The transport's limit, at `w`'s coordinator: a CLAIM of exactly proto::kMaxTransportBytes is
/// answered `oversized` within `answer_within` (the protocol's own limit is lower); one byte more
/// and the transport drops the connection: ZeroMQ reconnects underneath, and the first answer of
/// all is no_session to a request sent after the drop.
inline void check_transport_limit(RawWorker& w, std::chrono::milliseconds answer_within) {
    const auto limit = static_cast<std::size_t>(proto::kMaxTransportBytes);
    const auto at_limit = w.next_req();
    w.send_frames({std::string(proto::kTagBinary), "CLAIM", claim_body_of_size(at_limit, limit)});
    const auto oversized = w.expect<proto::Error>(at_limit, answer_within);
    CHECK(oversized.code == "oversized");
    CHECK(oversized.text == "CLAIM body of 1048576 bytes exceeds the limit of 65536 bytes");
    const auto over = w.next_req();
    w.send_frames({std::string(proto::kTagBinary), "CLAIM", claim_body_of_size(over, limit + 1)});
    std::optional<proto::Message> first;
    for (int attempt = 0; attempt < 50 && !first; ++attempt) {
        w.request(proto::Renew{0, 1, 1});
        first = w.receive(200ms);
    }
    REQUIRE(first);
    INFO("answered with " << proto::type_name(*first));
    REQUIRE(std::holds_alternative<proto::Error>(*first));
    CHECK(std::get<proto::Error>(*first).code == "no_session");
}

}  // namespace aclaim::testing
