// The listener's parsers: what each channel's payload must look like before it wakes anything or
// is checked against a row, and how a dropped one is counted and logged. The check itself runs
// against PostgreSQL (tests/pg/coordinator_notify_tests.cpp).

#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

#include "coordinator/db/listener_checks.hpp"
#include "coordinator/router/wake_counter.hpp"

using namespace aclaim::coordinator;

TEST_CASE("aclaim_revoke: only org:job:generation:cancelled:worker asks for a check",
          "[listener][notify]") {
    const auto genuine = parse_revoke("2:352:1:cancelled:w2a");
    REQUIRE(genuine);
    CHECK(genuine->org == 2);
    CHECK(genuine->job == 352);
    CHECK(genuine->generation == 1);
    CHECK(genuine->worker == "w2a");
    // The worker is last and may hold ':'.
    const auto colons = parse_revoke("1:7:3:cancelled:host:9:w");
    REQUIRE(colons);
    CHECK(colons->worker == "host:9:w");

    for (const char* bad :
         {"", "garbage", "2:352:1", "2:352:1:cancelled",
          "2:352:1:cancelled:", "0:352:1:cancelled:w", "2:0:1:cancelled:w", "2:352:0:cancelled:w",
          "-2:352:1:cancelled:w", "+2:352:1:cancelled:w", " 2:352:1:cancelled:w",
          "2:352:1x:cancelled:w", "99999999999999999999:1:1:cancelled:w",
          // Reasons no row can bear out: aclaim_cancel_jobs sends only "cancelled".
          "2:352:1:reclaimed:w2a", "2:352:1:lease_expired:w2a", "2:352:1::w2a",
          "2:352:1:Cancelled:w2a"}) {
        INFO(bad);
        CHECK_FALSE(parse_revoke(bad));
    }
}

TEST_CASE("aclaim_jobs: org or org:queue wakes, anything else is dropped", "[listener][notify]") {
    const auto all = parse_wake("3");
    REQUIRE(all);
    CHECK(all->org_id == 3);
    CHECK(all->queue.empty());
    const auto one = parse_wake("3:electrical");
    REQUIRE(one);
    CHECK(one->queue == "electrical");
    for (const char* bad : {"", "0", "-1", "x", "3x", "3:", "3:bad queue", "3:\n", ":default",
                            "99999999999999999999"}) {
        INFO(bad);
        CHECK_FALSE(parse_wake(bad));
    }
    CHECK_FALSE(parse_wake("3:" + std::string(65, 'q')));
}

TEST_CASE("aclaim_schedule: a time in microseconds, or dropped", "[listener][notify]") {
    CHECK(valid_schedule_payload("1700000000000000"));
    CHECK(valid_schedule_payload("0"));
    for (const char* bad : {"", "soon", "1e9", "12 ", " 12", "99999999999999999999"}) {
        INFO(bad);
        CHECK_FALSE(valid_schedule_payload(bad));
    }
}

TEST_CASE("a dropped notification is counted on its channel and logged without forging lines",
          "[listener][notify]") {
    aclaim::coordinator::metrics::Registry registry;
    NotificationCounters counters(registry);
    Forgeries forgeries(counters);
    for (int i = 0; i < 5; ++i) forgeries.drop(NotificationCounters::Channel::Revoke, "x", "test");
    forgeries.drop(NotificationCounters::Channel::Jobs, "x", "test");
    CHECK(counters.forged[NotificationCounters::Channel::Revoke].load() == 5);
    CHECK(counters.forged[NotificationCounters::Channel::Jobs].load() == 1);
    CHECK(counters.forged[NotificationCounters::Channel::Schedule].load() == 0);

    CHECK(Forgeries::printable("1:2:3:cancelled:w\nINFO forged\\") ==
          "1:2:3:cancelled:w\\x0aINFO forged\\x5c");
    CHECK(Forgeries::printable("\xc3\xa9\x1b[31m") == "\\xc3\\xa9\\x1b[31m");
    const std::string shown = Forgeries::printable(std::string(5000, 'a'));
    CHECK(shown == std::string(Forgeries::kShownBytes, 'a') + "...");
}

TEST_CASE("a wake counts for its organization's claims, in a table that does not grow with ids",
          "[listener][notify]") {
    WakeCounter wakes;
    const auto one = wakes.seq(1);
    const auto two = wakes.seq(2);
    wakes.org_woken(1);
    CHECK(wakes.seq(1) == one + 1);
    CHECK(wakes.seq(2) == two);
    // Any id a notification names, however large or negative, lands in the fixed table; one that
    // shares organization 2's bucket makes its claims look once more, and no more than that.
    wakes.org_woken(2 + static_cast<aclaim::store::OrgId>(WakeCounter::kBuckets));
    CHECK(wakes.seq(2) == two + 1);
    wakes.org_woken(std::numeric_limits<aclaim::store::OrgId>::max());
    wakes.org_woken(std::numeric_limits<aclaim::store::OrgId>::min());
    // Two fixed tables (wakes, and slots freed) and the listener's epoch.
    CHECK(sizeof(WakeCounter) <= (2 * WakeCounter::kBuckets + 1) * sizeof(std::uint64_t));
    wakes.listener_ready();
    CHECK(wakes.seq(1) == one + 2);
}

TEST_CASE("a freed slot counts for the claims that serve its queue", "[listener][limits]") {
    WakeCounter wakes;
    const std::vector<std::string> electrical{"electrical"};
    const std::vector<std::string> both{"electrical", "plumbing"};
    const auto before = wakes.slots(1, electrical);
    const auto before_both = wakes.slots(1, both);
    wakes.slot_freed(1, "plumbing");
    CHECK(wakes.slots(1, both) == before_both + 1);
    CHECK(wakes.slots(1, electrical) == before);
    wakes.slot_freed(2, "electrical");
    CHECK(wakes.slots(1, electrical) == before);
    wakes.slot_freed(1, "electrical");
    CHECK(wakes.slots(1, electrical) == before + 1);
    CHECK(wakes.slots(1, both) == before_both + 2);
}
