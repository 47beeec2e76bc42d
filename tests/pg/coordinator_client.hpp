#pragma once

// Drives an in-process Coordinator from tests: a fixture that starts one on a free port against a
// fresh database, and a raw DEALER that speaks the protocol through common/proto/protocol.hpp.
// Every wait is bounded by a deadline; nothing sleeps in the hope that something has happened.

#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/base/clock.hpp"
#include "common/proto/protocol.hpp"
#include "common/store/assignment_store.hpp"
#include "coordinator/router/coordinator.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

namespace proto = common::proto;
using namespace std::chrono_literals;

/// Polls `done` until it holds or `limit` passes; for state that has no message to wait on.
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    const auto deadline = common::SystemClock().monotonic_now() + limit;
    while (!done()) {
        if (common::SystemClock().monotonic_now() >= deadline) return false;
        std::this_thread::sleep_for(2ms);
    }
    return true;
}

/// A worker without a worker library: frames in, frames out.
class RawWorker {
  public:
    RawWorker(zmq::context_t& context, const std::string& endpoint,
              proto::Encoding encoding = proto::Encoding::Binary)
        : socket_(context, zmq::socket_type::dealer), encoding_(encoding) {
        socket_.set(zmq::sockopt::linger, 0);
        socket_.connect(endpoint);
    }

    std::uint64_t next_req() { return ++req_; }

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

    /// Receives until a T answering `req` arrives; anything else is kept in `others`. Fails the
    /// test on timeout, or when the answer to `req` is of another type.
    template <class T>
    T expect(std::uint64_t req, std::chrono::milliseconds limit = 10s) {
        const auto deadline = common::SystemClock().monotonic_now() + limit;
        while (true) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - common::SystemClock().monotonic_now());
            auto m = receive(std::max(left, 0ms));
            if (!m) FAIL("no answer to request " << req << " within " << limit.count() << " ms");
            if (proto::request_id(*m) == req) {
                if (auto* t = std::get_if<T>(&*m)) return *t;
                std::string what(proto::type_name(*m));
                if (auto* e = std::get_if<proto::Error>(&*m)) {
                    what += " " + e->code + ": " + e->text;
                }
                if (auto* n = std::get_if<proto::NoWork>(&*m)) what += " " + n->reason;
                if (auto* r = std::get_if<proto::Rejected>(&*m)) what += " " + r->reason;
                FAIL("request " << req << " answered with " << what);
            }
            others.push_back(std::move(*m));
        }
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

    proto::Welcome hello(const std::string& worker_id, common::OrgId org) {
        const auto req = next_req();
        send(proto::Hello{req, worker_id, org});
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

    std::vector<proto::Message> others;

  private:
    zmq::socket_t socket_;
    proto::Encoding encoding_;
    std::uint64_t req_ = 0;
};

/// A fresh database, a coordinator on a free port serving it, and a store to enqueue with.
struct CoordinatorHarness {
    explicit CoordinatorHarness(
        const common::Clock& clock,
        const std::function<void(coordinator::CoordinatorOptions&)>& adjust = {}) {
        spdlog::set_level(spdlog::level::err);
        coordinator::CoordinatorOptions o;
        o.dsn = db.dsn();
        o.bind = "tcp://127.0.0.1:*";
        o.plaintext = true;
        o.lease_ms = 10000;
        o.reap_interval_ms = 20;
        o.in_doubt_budget_ms = 1000;
        if (adjust) adjust(o);
        coordinator = std::make_unique<coordinator::Coordinator>(o, clock);
        coordinator->start();
    }

    ~CoordinatorHarness() { coordinator->stop(); }

    std::unique_ptr<RawWorker> worker(proto::Encoding enc = proto::Encoding::Binary) {
        return std::make_unique<RawWorker>(context, coordinator->endpoint(), enc);
    }

    TestDatabase db;
    zmq::context_t context;
    std::unique_ptr<coordinator::Coordinator> coordinator;
};

inline std::vector<common::NewJob> some_jobs(int n) {
    std::vector<common::NewJob> out;
    for (int i = 0; i < n; ++i) out.push_back({0, "payload-" + std::to_string(i), 3});
    return out;
}

}  // namespace aclaim::testing
