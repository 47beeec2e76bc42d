// Parked claims on a manual clock: a wait ends at its deadline and not before, a notification
// takes exactly its organization's claims, a departing connection takes its own.

#include <algorithm>
#include <catch2/catch.hpp>

#include "common/base/clock.hpp"
#include "coordinator/router/parked_claims.hpp"

using namespace aclaim;
using namespace aclaim::coordinator;
using namespace std::chrono_literals;

namespace {

RoutedRequest claim(const common::Clock& clock, common::OrgId org, std::uint64_t req,
                    std::chrono::milliseconds wait, std::string routing_id = "conn") {
    RoutedRequest r;
    r.reply.routing_id = std::move(routing_id);
    r.reply.req = req;
    r.db.ask.org_id = org;
    r.wait_ms = static_cast<int>(wait.count());
    r.wait_until = clock.monotonic_now() + wait;
    return r;
}

std::vector<std::uint64_t> reqs(const std::vector<RoutedRequest>& claims) {
    std::vector<std::uint64_t> out;
    for (const auto& c : claims) out.push_back(c.reply.req);
    return out;
}

/// Across organizations the order is unspecified.
std::vector<std::uint64_t> sorted_reqs(const std::vector<RoutedRequest>& claims) {
    auto out = reqs(claims);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("a parked claim's wait ends at its deadline, not before", "[parked_claims]") {
    common::ManualClock clock(common::instant_from_micros(1'000'000));
    ParkedClaims parked(clock);
    parked.park(claim(clock, 1, 1, 500ms));
    parked.park(claim(clock, 1, 2, 200ms));
    REQUIRE(parked.size() == 2);
    CHECK(parked.next_deadline() == clock.monotonic_now() + 200ms);

    clock.advance(199 * common::kMillis);
    CHECK(parked.take_expired().empty());

    clock.advance(1 * common::kMillis);
    CHECK(reqs(parked.take_expired()) == std::vector<std::uint64_t>{2});
    CHECK(parked.size() == 1);
    CHECK(parked.next_deadline() == clock.monotonic_now() + 300ms);

    clock.advance(300 * common::kMillis);
    CHECK(reqs(parked.take_expired()) == std::vector<std::uint64_t>{1});
    CHECK(parked.size() == 0);
    CHECK_FALSE(parked.next_deadline().has_value());
}

TEST_CASE("the next deadline is the earliest over every organization", "[parked_claims]") {
    common::ManualClock clock(common::instant_from_micros(0));
    ParkedClaims parked(clock);
    CHECK_FALSE(parked.next_deadline().has_value());
    parked.park(claim(clock, 1, 1, 900ms));
    parked.park(claim(clock, 2, 2, 300ms));
    parked.park(claim(clock, 3, 3, 600ms));
    CHECK(parked.next_deadline() == clock.monotonic_now() + 300ms);
    clock.advance(650 * common::kMillis);
    CHECK(sorted_reqs(parked.take_expired()) == std::vector<std::uint64_t>{2, 3});
    CHECK(parked.next_deadline() == clock.monotonic_now() + 250ms);
}

TEST_CASE("a notification wakes its organization's claims only, earliest deadline first",
          "[parked_claims]") {
    common::ManualClock clock(common::instant_from_micros(0));
    ParkedClaims parked(clock);
    parked.park(claim(clock, 1, 1, 900ms));
    parked.park(claim(clock, 2, 2, 500ms));
    parked.park(claim(clock, 1, 3, 100ms));
    CHECK(reqs(parked.take_org(1)) == std::vector<std::uint64_t>{3, 1});
    CHECK(parked.size() == 1);
    CHECK(parked.take_org(1).empty());
    CHECK(parked.take_org(7).empty());
    CHECK(reqs(parked.take_all()) == std::vector<std::uint64_t>{2});
    CHECK(parked.size() == 0);
}

TEST_CASE("a connection's claims are taken out across organizations", "[parked_claims]") {
    common::ManualClock clock(common::instant_from_micros(0));
    ParkedClaims parked(clock);
    parked.park(claim(clock, 1, 1, 500ms, "a"));
    parked.park(claim(clock, 2, 2, 500ms, "b"));
    parked.park(claim(clock, 2, 3, 700ms, "a"));
    CHECK(sorted_reqs(parked.take_connection("a")) == std::vector<std::uint64_t>{1, 3});
    CHECK(parked.size() == 1);
    CHECK(parked.take_connection("a").empty());
    clock.advance(500 * common::kMillis);
    CHECK(reqs(parked.take_expired()) == std::vector<std::uint64_t>{2});
}

TEST_CASE("a claim with no wait has already expired", "[parked_claims]") {
    common::ManualClock clock(common::instant_from_micros(0));
    ParkedClaims parked(clock);
    parked.park(claim(clock, 1, 1, 0ms));
    CHECK(reqs(parked.take_expired()) == std::vector<std::uint64_t>{1});
}

TEST_CASE("work in a queue wakes only the parked claims that serve it", "[parked_claims][queues]") {
    common::ManualClock clock(common::instant_from_micros(1'000'000));
    ParkedClaims parked(clock);
    auto serving = [&](std::uint64_t req, std::vector<std::string> queues) {
        auto c = claim(clock, 1, req, 500ms);
        c.db.ask.queues = std::move(queues);
        return c;
    };
    parked.park(serving(1, {"electrical"}));
    parked.park(serving(2, {"default", "plumbing"}));
    parked.park(serving(3, {"electrical", "plumbing"}));
    parked.park(claim(clock, 2, 4, 500ms));

    CHECK(sorted_reqs(parked.take_org(1, "plumbing")) == std::vector<std::uint64_t>{2, 3});
    CHECK(parked.take_org(1, "roofing").empty());
    CHECK(parked.size() == 2);
    // A notification that names no queue (an operator's release, a listener restart) wakes all.
    CHECK(reqs(parked.take_org(1)) == std::vector<std::uint64_t>{1});
    CHECK(parked.size() == 1);
}

TEST_CASE("parked claims are counted by connection and by organization",
          "[parked_claims][limits]") {
    common::ManualClock clock(common::instant_from_micros(0));
    ParkedClaims parked(clock);
    parked.park(claim(clock, 1, 1, 10s, "a"));
    parked.park(claim(clock, 1, 2, 20s, "a"));
    parked.park(claim(clock, 1, 3, 10s, "b"));
    parked.park(claim(clock, 2, 4, 10s, "c"));
    CHECK(parked.of_connection("a") == 2);
    CHECK(parked.of_connection("b") == 1);
    CHECK(parked.of_connection("z") == 0);
    CHECK(parked.of_org(1) == 3);
    CHECK(parked.of_org(2) == 1);
    CHECK(sorted_reqs(parked.take_connection("a")) == std::vector<std::uint64_t>{1, 2});
    CHECK(parked.of_connection("a") == 0);
    CHECK(parked.of_org(1) == 1);
    clock.advance(10s);
    CHECK(sorted_reqs(parked.take_expired()) == std::vector<std::uint64_t>{3, 4});
    CHECK(parked.of_connection("b") == 0);
    CHECK(parked.of_org(2) == 0);
    CHECK(parked.size() == 0);
}
