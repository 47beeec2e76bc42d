// The worker client's use of protocol 1.6's PARK, against a scripted ROUTER: HELLO asks for park
// only when told to; park() sends PARK, stops renewing the job and reports PARKED's token and
// deadline (the client then no longer holds the job), and a REJECTED or ERROR as a refusal:
// after REJECTED the job is lost, after an ERROR it is still held and renewed again at once.

#include <algorithm>

#include "tests/unit/fake_coordinator.hpp"

using namespace aclaim::testing;

namespace {

bool asks_park(const Request& hello) {
    const auto& asked = std::get<proto::Hello>(hello.message).features;
    return std::find(asked.begin(), asked.end(), proto::kFeaturePark) != asked.end();
}

}  // namespace

TEST_CASE("client: HELLO asks for park only when the options say so", "[worker][park]") {
    for (const bool park : {false, true}) {
        auto o = options();
        o.park = park;
        Harness h(o);
        h.client.start();
        CHECK(asks_park(h.next_request<proto::Hello>()) == park);
    }
}

TEST_CASE("client: park() is answered with the token, and the job is no longer held",
          "[worker][park]") {
    auto o = options(proto::Encoding::Json);
    o.park = true;
    Harness h(o);
    h.client.start();
    h.open_session();
    const auto job = h.assign_one(41, 3, 3000);
    CHECK(h.client.held().size() == 1);
    const auto req = h.client.park(job, 86'400'000, "sent to the lab");
    const auto sent = h.next_request<proto::Park>();
    const auto& park = std::get<proto::Park>(sent.message);
    CHECK(park.req == req);
    CHECK((park.job_id == 41 && park.generation == 3 && park.timeout_ms == 86'400'000));
    CHECK(park.note == "sent to the lab");
    const std::string token(proto::kParkTokenChars, 'c');
    h.fake.reply(sent, proto::Parked{req, 41, 3, token, 1700086400123456});
    const auto parked = h.next_event<worker::JobParked>();
    CHECK(parked.accepted);
    CHECK(parked.token == token);
    CHECK(parked.deadline_us == 1700086400123456);
    CHECK(h.client.held().size() == 0);

    // A second job's PARK refused: reported with the reason, nothing parked.
    const auto other = h.assign_one(42, 1, 3000);
    const auto req2 = h.client.park(other, 1000);
    const auto sent2 = h.next_request<proto::Park>();
    h.fake.reply(sent2, proto::Rejected{req2, 42, 1, "lease_expired", "the lease ran out"});
    const auto refused = h.next_event<worker::JobParked>();
    CHECK_FALSE(refused.accepted);
    CHECK(refused.reason == "lease_expired");
    CHECK(refused.token.empty());
    CHECK(h.client.held().size() == 0);

    // A third job's PARK answered ERROR: nothing was parked, so the worker still holds the job
    // and its lease must not lapse: its renewal goes out at once.
    const auto third = h.assign_one(43, 2, 3000);
    const auto req3 = h.client.park(third, 1000);
    const auto sent3 = h.next_request<proto::Park>();
    h.fake.reply(sent3, proto::Error{req3, "invalid", "timeout_ms: out of range"});
    const auto errored = h.next_event<worker::JobParked>();
    CHECK_FALSE(errored.accepted);
    CHECK(errored.reason == "error:invalid");
    CHECK(h.client.held().size() == 1);
    const auto renewal = h.next_request<proto::Renew>();
    const auto& renew = std::get<proto::Renew>(renewal.message);
    CHECK((renew.job_id == 43 && renew.generation == 2));
}
