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

RoutedRequest claim(const base::Clock& clock, store::OrgId org, std::uint64_t req,
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
    base::ManualClock clock(base::instant_from_micros(1'000'000));
    ParkedClaims parked(clock);
    parked.park(claim(clock, 1, 1, 500ms));
    parked.park(claim(clock, 1, 2, 200ms));
    REQUIRE(parked.size() == 2);
    CHECK(parked.next_deadline() == clock.monotonic_now() + 200ms);

    clock.advance(199 * base::kMillis);
    CHECK(parked.take_expired().empty());

    clock.advance(1 * base::kMillis);
    CHECK(reqs(parked.take_expired()) == std::vector<std::uint64_t>{2});
    CHECK(parked.size() == 1);
    CHECK(parked.next_deadline() == clock.monotonic_now() + 300ms);

    clock.advance(300 * base::kMillis);
    CHECK(reqs(parked.take_expired()) == std::vector<std::uint64_t>{1});
    CHECK(parked.size() == 0);
    CHECK_FALSE(parked.next_deadline().has_value());
}

TEST_CASE("the next deadline is the earliest over every organization", "[parked_claims]") {
    base::ManualClock clock(base::instant_from_micros(0));
    ParkedClaims parked(clock);
    CHECK_FALSE(parked.next_deadline().has_value());
    parked.park(claim(clock, 1, 1, 900ms));
    parked.park(claim(clock, 2, 2, 300ms));
    parked.park(claim(clock, 3, 3, 600ms));
    CHECK(parked.next_deadline() == clock.monotonic_now() + 300ms);
    clock.advance(650 * base::kMillis);
    CHECK(sorted_reqs(parked.take_expired()) == std::vector<std::uint64_t>{2, 3});
    CHECK(parked.next_deadline() == clock.monotonic_now() + 250ms);
}

TEST_CASE("a notification wakes its organization's claims only, earliest deadline first",
          "[parked_claims]") {
    base::ManualClock clock(base::instant_from_micros(0));
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
    base::ManualClock clock(base::instant_from_micros(0));
    ParkedClaims parked(clock);
    parked.park(claim(clock, 1, 1, 500ms, "a"));
    parked.park(claim(clock, 2, 2, 500ms, "b"));
    parked.park(claim(clock, 2, 3, 700ms, "a"));
    CHECK(sorted_reqs(parked.take_connection("a")) == std::vector<std::uint64_t>{1, 3});
    CHECK(parked.size() == 1);
    CHECK(parked.take_connection("a").empty());
    clock.advance(500 * base::kMillis);
    CHECK(reqs(parked.take_expired()) == std::vector<std::uint64_t>{2});
}

TEST_CASE("a claim with no wait has already expired", "[parked_claims]") {
    base::ManualClock clock(base::instant_from_micros(0));
    ParkedClaims parked(clock);
    parked.park(claim(clock, 1, 1, 0ms));
    CHECK(reqs(parked.take_expired()) == std::vector<std::uint64_t>{1});
}

TEST_CASE("work in a queue wakes only the parked claims that serve it", "[parked_claims][queues]") {
    base::ManualClock clock(base::instant_from_micros(1'000'000));
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
    base::ManualClock clock(base::instant_from_micros(0));
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

TEST_CASE("a freed slot takes one slot-bound claim of its queue, earliest deadline first",
          "[parked_claims][limits]") {
    base::ManualClock clock(base::instant_from_micros(0));
    ParkedClaims parked(clock);
    auto bound = [&](std::uint64_t req, std::chrono::milliseconds wait,
                     std::vector<std::string> queues, bool slot_bound) {
        auto c = claim(clock, 1, req, wait);
        c.db.ask.queues = std::move(queues);
        c.slot_bound = slot_bound;
        return c;
    };
    parked.park(bound(1, 900ms, {"electrical"}, true));
    parked.park(bound(2, 300ms, {"electrical", "plumbing"}, true));
    parked.park(bound(3, 100ms, {"electrical"}, false));  // waits for work, not for a slot
    parked.park(bound(4, 100ms, {"plumbing"}, true));

    // One slot, one claim: the slot-bound one that serves the queue and waits the shortest.
    auto first = parked.take_slot_bound(1, "electrical");
    REQUIRE(first.has_value());
    CHECK(first->reply.req == 2);
    auto second = parked.take_slot_bound(1, "electrical");
    REQUIRE(second.has_value());
    CHECK(second->reply.req == 1);
    // The claim without a limit on its queues is not woken by a slot, nor is another
    // organization's or another queue's.
    CHECK_FALSE(parked.take_slot_bound(1, "electrical").has_value());
    CHECK_FALSE(parked.take_slot_bound(2, "plumbing").has_value());
    CHECK_FALSE(parked.take_slot_bound(1, "roofing").has_value());
    CHECK(parked.size() == 2);
    CHECK(parked.of_connection("conn") == 2);

    // Taken by other means, a slot-bound claim is no longer found by a slot.
    CHECK(reqs(parked.take_org(1, "plumbing")) == std::vector<std::uint64_t>{4});
    CHECK_FALSE(parked.take_slot_bound(1, "plumbing").has_value());
    parked.park(bound(5, 200ms, {"plumbing"}, true));
    clock.advance(200 * base::kMillis);
    CHECK(sorted_reqs(parked.take_expired()) == std::vector<std::uint64_t>{3, 5});
    CHECK_FALSE(parked.take_slot_bound(1, "plumbing").has_value());
    CHECK(parked.size() == 0);
}

TEST_CASE("a connection's completion takes its own slot-bound claim", "[parked_claims][limits]") {
    base::ManualClock clock(base::instant_from_micros(0));
    ParkedClaims parked(clock);
    auto waiting = [&](std::uint64_t req, std::chrono::milliseconds wait, std::string routing_id,
                       bool slot_bound) {
        auto c = claim(clock, 1, req, wait, std::move(routing_id));
        c.db.ask.queues = {"electrical"};
        c.slot_bound = slot_bound;
        return c;
    };
    parked.park(waiting(1, 300ms, "a", false));
    parked.park(waiting(2, 900ms, "a", true));
    parked.park(waiting(3, 100ms, "b", true));
    CHECK_FALSE(parked.take_slot_bound_of(1, "c").has_value());
    CHECK_FALSE(parked.take_slot_bound_of(2, "a").has_value());
    const auto own = parked.take_slot_bound_of(1, "a");
    REQUIRE(own.has_value());
    CHECK(own->reply.req == 2);
    CHECK_FALSE(parked.take_slot_bound_of(1, "a").has_value());
    CHECK(parked.of_connection("a") == 1);
    // The other connection's claim still waits for a slot of its queue.
    const auto other = parked.take_slot_bound(1, "electrical");
    REQUIRE(other.has_value());
    CHECK(other->reply.req == 3);
    CHECK(parked.size() == 1);
}
