// The worker client's use of protocol 1.2's COMPLETE that carries the next CLAIM, against a
// scripted ROUTER: only where WELCOME grants it, one message then, two requests otherwise, and
// a claim lost with its connection never re-sent inside the re-sent COMPLETE.

#include <algorithm>

#include "tests/unit/fake_coordinator.hpp"

using namespace aclaim::testing;

namespace {

/// HELLO (which must ask for complete_claim and renew_held) answered with a WELCOME granting
/// `features`.
Request open_granting(Harness& h, std::vector<std::string> features) {
    auto hello = h.next_request<proto::Hello>();
    const auto& asked = std::get<proto::Hello>(hello.message).features;
    REQUIRE(std::find(asked.begin(), asked.end(), proto::kFeatureCompleteClaim) != asked.end());
    REQUIRE(std::find(asked.begin(), asked.end(), proto::kFeatureRenewHeld) != asked.end());
    proto::Welcome w{proto::request_id(hello.message), 7, 3000, 1000, 65536};
    w.features = std::move(features);
    h.fake.reply(hello, w);
    h.next_event<worker::SessionReady>();
    return hello;
}

}  // namespace

TEST_CASE("client: a granted COMPLETE carries the next CLAIM, answered in turn", "[worker]") {
    Harness h(options(GENERATE(proto::Encoding::Binary, proto::Encoding::Json)));
    h.client.start();
    open_granting(h, {std::string(proto::kFeatureCompleteClaim)});
    REQUIRE(h.client.granted(proto::kFeatureCompleteClaim));
    const auto job = h.assign_one(9, 4, 3000);

    const auto [done, next] = h.client.complete_then_claim(job, "review:9", 1, 500);
    const auto sent = h.next_request<proto::Complete>();
    const auto& complete = std::get<proto::Complete>(sent.message);
    CHECK(complete.req == done);
    REQUIRE(complete.next.size() == 1);
    CHECK(complete.next[0].req == next);
    CHECK(complete.next[0].max_jobs == 1);
    CHECK(complete.next[0].wait_ms == 500);
    CHECK(h.client.claim_pending());
    CHECK(h.client.in_flight() == 2);

    h.fake.reply(sent, proto::Accepted{done, 9, 4, "completed", false});
    h.fake.reply(sent, proto::Assigned{next, {{11, 1, 0, 3000, 1, 0, "p"}}});
    CHECK(h.next_event<worker::Verdict>().accepted);
    CHECK(h.next_event<worker::JobAssigned>().job.job_id == 11);
    CHECK(h.client.pending() == 0);
    // Nothing went out alone: the DEALER delivers in order, so a CLAIM sent before the RELEASE
    // would be among what the fake received.
    for (const auto& r : h.sent_so_far())
        CHECK_FALSE(std::holds_alternative<proto::Claim>(r.message));
}

TEST_CASE("client: without the grant, COMPLETE and CLAIM go as two requests", "[worker]") {
    Harness h(options());
    h.client.start();
    open_granting(h, {});
    CHECK_FALSE(h.client.granted(proto::kFeatureCompleteClaim));
    const auto job = h.assign_one(9, 4, 3000);
    const auto [done, next] = h.client.complete_then_claim(job, "review:9", 2, 0);
    const auto complete = h.next_request<proto::Complete>();
    CHECK(std::get<proto::Complete>(complete.message).next.empty());
    CHECK(proto::request_id(complete.message) == done);
    const auto claim = h.next_request<proto::Claim>();
    CHECK(proto::request_id(claim.message) == next);
    CHECK(std::get<proto::Claim>(claim.message).max_jobs == 2);
}

TEST_CASE("client: a lost COMPLETE is re-sent without the CLAIM it carried", "[worker]") {
    Harness h(options());
    h.client.start();
    const auto first = open_granting(h, {std::string(proto::kFeatureCompleteClaim)});
    const auto job = h.assign_one(9, 4, 3000);
    const auto [done, next] = h.client.complete_then_claim(job, "review:9", 1, 0);
    const auto lost = h.next_request<proto::Complete>();  // never answered
    CHECK(std::get<proto::Complete>(lost.message).next.size() == 1);

    // No reply within the reply timeout: the claim is reported lost, as a lost CLAIM is.
    const auto ended = h.next_event<worker::ClaimEnded>();
    CHECK(ended.why == worker::ClaimEnded::Why::ConnectionLost);
    const auto second = open_granting(h, {std::string(proto::kFeatureCompleteClaim)});
    CHECK(second.identity != first.identity);
    const auto again = h.next_request<proto::Complete>();
    CHECK(proto::request_id(again.message) == done);
    CHECK(std::get<proto::Complete>(again.message).next.empty());
    h.fake.reply(again, proto::Accepted{done, 9, 4, "completed", true});
    CHECK(h.next_event<worker::Verdict>().replayed);
    CHECK_FALSE(h.client.claim_pending());
    (void)next;
}

TEST_CASE("client: a coordinator that cannot read HELLO's features is greeted as 1.1", "[worker]") {
    Harness h(options());
    h.client.start();
    auto hello = h.next_request<proto::Hello>();
    CHECK_FALSE(std::get<proto::Hello>(hello.message).features.empty());
    h.fake.reply(hello, proto::Error{proto::request_id(hello.message), "undecodable",
                                     "HELLO body: 17 trailing bytes after the body"});
    auto plain = h.next_request<proto::Hello>();
    CHECK(std::get<proto::Hello>(plain.message).features.empty());
    h.fake.reply(plain, proto::Welcome{proto::request_id(plain.message), 7, 3000, 1000, 65536});
    CHECK_FALSE(h.next_event<worker::SessionReady>().reconnected);
    CHECK(h.client.ready());
}
