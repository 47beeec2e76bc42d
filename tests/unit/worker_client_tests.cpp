// The worker client against a scripted ROUTER standing in for the coordinator: real sockets on an
// ephemeral port, both driven from this thread, every wait bounded by a deadline.

#include <optional>
#include <string>

#include "tests/unit/fake_coordinator.hpp"

using namespace aclaim::testing;

namespace {

/// Polls the client until it throws, within kLimit: what it said, or nothing if it did not.
std::optional<std::string> poll_until_thrown(Harness& h) {
    const auto deadline = SteadyClock::now() + kLimit;
    while (SteadyClock::now() < deadline) {
        try {
            h.client.poll(Millis(5));
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE("client: session, claim, heartbeat and an accepted completion", "[worker]") {
    for (const auto enc : {proto::Encoding::Binary, proto::Encoding::Json}) {
        Harness h(options(enc));
        h.client.start();
        const auto hello = h.open_session(3000, 50);
        CHECK(hello.encoding == enc);
        CHECK(std::get<proto::Hello>(hello.message).worker_id == "unit-worker");
        CHECK(h.client.ready());

        const auto job = h.assign_one(41, 3, 3000);
        const auto renew = h.next_request<proto::Renew>();
        CHECK(std::get<proto::Renew>(renew.message).job_id == 41);
        CHECK(std::get<proto::Renew>(renew.message).generation == 3);
        h.fake.reply(renew, proto::LeaseMsg{proto::request_id(renew.message), 41, 3, 0, 3000});

        h.client.complete(job, "review:unit-worker:41:3");
        const auto complete = h.next_request<proto::Complete>();
        CHECK(std::get<proto::Complete>(complete.message).result_ref == "review:unit-worker:41:3");
        h.fake.reply(complete, proto::Accepted{proto::request_id(complete.message), 41, 3,
                                               "completed", false});
        const auto v = h.next_event<worker::Verdict>();
        CHECK(v.accepted);
        CHECK(v.op == worker::Verdict::Op::Complete);
        CHECK(v.state == "completed");
        CHECK(h.client.held().size() == 0);
        CHECK(h.client.pending() == 0);
    }
}

TEST_CASE("client: a pushed REVOKED stops the job's renewals", "[worker]") {
    Harness h(options());
    h.client.start();
    const auto hello = h.open_session(3000, 30);
    h.assign_one(5, 2, 3000);
    h.fake.reply(hello, proto::Revoked{0, 5, 2, "reclaimed", "lease expired"});
    const auto lost = h.next_event<worker::JobLost>();
    CHECK(lost.job == worker::JobRef{5, 2});
    CHECK(lost.reason == "reclaimed");
    CHECK(h.client.held().size() == 0);
    CHECK_FALSE(h.client.held().next_due().has_value());
}

TEST_CASE("client: a silent coordinator means reconnect, renew, and re-send the completion",
          "[worker]") {
    Harness h(options());
    h.client.start();
    const auto first = h.open_session(3000, 1000);
    const auto job = h.assign_one(9, 4, 3000);
    h.assign_one(10, 1, 3000);
    h.client.claim(1, 0);
    h.next_request<proto::Claim>();  // never answered
    h.client.complete(job, "review:unit-worker:9:4");
    const auto lost_complete = h.next_request<proto::Complete>();  // never answered either

    // No reply within reply_timeout: a new connection says HELLO again.
    const auto lost_claim = h.next_event<worker::ClaimEnded>();
    CHECK(lost_claim.why == worker::ClaimEnded::Why::ConnectionLost);
    const auto second = h.open_session(3000, 1000);
    CHECK(second.identity != first.identity);
    auto ready_again = std::get_if<proto::Hello>(&second.message);
    REQUIRE(ready_again != nullptr);

    // The held job is renewed at once and the completion re-sent with its request id; the lost
    // CLAIM is not re-sent.
    const auto renew = h.next_request<proto::Renew>();
    CHECK(std::get<proto::Renew>(renew.message).job_id == 10);
    const auto again = h.next_request<proto::Complete>();
    CHECK(again.identity == second.identity);
    CHECK(proto::request_id(again.message) == proto::request_id(lost_complete.message));
    h.fake.reply(again, proto::Accepted{proto::request_id(again.message), 9, 4, "completed", true});
    const auto v = h.next_event<worker::Verdict>();
    CHECK(v.accepted);
    CHECK(v.replayed);
    CHECK(h.client.stats().reconnects == 1);
    CHECK(h.client.stats().resent == 1);
    for (const auto& r : h.sent_so_far()) {
        INFO("request " << proto::request_id(r.message) << " sent on the second connection");
        CHECK_FALSE(std::holds_alternative<proto::Claim>(r.message));
    }
}

TEST_CASE("client: ERROR outcome_unknown re-sends; a rejection is final", "[worker]") {
    Harness h(options());
    h.client.start();
    h.open_session();
    const auto job = h.assign_one(12, 6, 3000);
    h.client.complete(job, "r");
    const auto first = h.next_request<proto::Complete>();
    h.fake.reply(first, proto::Error{proto::request_id(first.message), "outcome_unknown",
                                     "connection lost during commit"});
    const auto second = h.next_request<proto::Complete>();
    CHECK(proto::request_id(second.message) == proto::request_id(first.message));
    h.fake.reply(second, proto::Rejected{proto::request_id(second.message), 12, 6,
                                         "stale_generation", "current generation is 7"});
    const auto v = h.next_event<worker::Verdict>();
    CHECK_FALSE(v.accepted);
    CHECK(v.reason == "stale_generation");
    CHECK(h.client.stats().reconnects == 0);
}

TEST_CASE("client: no_session (coordinator restarted underneath) means HELLO again", "[worker]") {
    Harness h(options());
    h.client.start();
    h.open_session();
    h.client.claim(1, 0);
    const auto claim = h.next_request<proto::Claim>();
    h.fake.reply(claim, proto::Error{proto::request_id(claim.message), "no_session", "send HELLO"});
    CHECK(h.next_event<worker::ClaimEnded>().why == worker::ClaimEnded::Why::ConnectionLost);
    const auto hello = h.open_session();
    CHECK(std::holds_alternative<proto::Hello>(hello.message));
    CHECK(h.client.stats().reconnects == 1);
}

TEST_CASE("client: a HELLO refused for good is an exception", "[worker]") {
    Harness h(options());
    h.client.start();
    const auto hello = h.next_request<proto::Hello>();
    h.fake.reply(hello, proto::Error{proto::request_id(hello.message), "invalid", "org_id"});
    const auto thrown = poll_until_thrown(h);
    CHECK(thrown.has_value());
    CHECK(thrown.value_or("").find("invalid") != std::string::npos);
}

TEST_CASE("client: ERROR key_revoked on any request ends the client", "[worker]") {
    Harness h(options());
    h.client.start();
    h.open_session(3000, 30);
    h.assign_one(14, 2, 3000);
    const auto renew = h.next_request<proto::Renew>();
    h.fake.reply(renew, proto::Error{proto::request_id(renew.message), "key_revoked",
                                     "this connection's key has been revoked"});
    const auto thrown = poll_until_thrown(h);
    CHECK(thrown.has_value());
    CHECK(thrown.value_or("").find("key_revoked") != std::string::npos);
    CHECK(h.client.stats().reconnects == 0);
}

TEST_CASE("client: no more than max_in_flight requests await replies at once", "[worker]") {
    auto o = options();
    o.max_in_flight = 2;
    o.reply_timeout = Millis(3000);
    aclaim::base::ManualClock clock(aclaim::base::instant_from_micros(1'700'000'000'000'000));
    Harness h(o, clock);
    h.client.start();
    h.open_session();
    for (int i = 1; i <= 3; ++i) h.client.release({i, 1});
    const auto first = h.next_request<proto::Release>();
    const auto second = h.next_request<proto::Release>();
    // The third waits for a slot, not for time: on the client's clock almost all of the reply
    // timeout passes with both unanswered, and the third is still not sent.
    for (int step = 0; step < 29; ++step) {
        clock.advance(std::chrono::milliseconds(100));
        h.client.poll(Millis(0));
        CHECK(h.client.in_flight() == 2);
        CHECK(h.client.pending() == 3);
    }
    if (auto r = h.fake.receive()) FAIL("a third request was sent early");
    h.fake.reply(first, proto::Accepted{proto::request_id(first.message), 1, 1, "pending", false});
    const auto third = h.next_request<proto::Release>();
    CHECK(std::get<proto::Release>(third.message).job_id == 3);
    CHECK(std::get<proto::Release>(second.message).job_id == 2);
}
