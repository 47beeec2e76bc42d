// Sign-in throttling on a ManualClock: free failures, doubling waits, names and addresses apart,
// and a bounded number of records whatever the names tried.

#include <catch2/catch.hpp>

#include "common/base/clock.hpp"
#include "console/login_throttle.hpp"

using namespace aclaim;
using namespace std::chrono_literals;

TEST_CASE("login throttle: five free failures per name, then waits that double", "[console]") {
    base::ManualClock clock(base::Instant{});
    console::LoginThrottle throttle(clock);
    for (int i = 0; i < 5; ++i) CHECK_FALSE(throttle.admit("alice", "10.0.0.1"));
    // The fifth failure opened a wait of one second, for every address.
    CHECK(throttle.admit("alice", "10.0.0.1") == base::Duration(1s));
    CHECK(throttle.admit("alice", "10.0.0.2") == base::Duration(1s));
    CHECK_FALSE(throttle.admit("bob", "10.0.0.1"));
    clock.advance(400ms);
    CHECK(throttle.admit("alice", "10.0.0.1") == base::Duration(600ms));
    clock.advance(600ms);
    CHECK_FALSE(throttle.admit("alice", "10.0.0.1"));  // the sixth failure: two seconds
    CHECK(throttle.admit("alice", "10.0.0.1") == base::Duration(2s));
    clock.advance(2s);
    CHECK_FALSE(throttle.admit("alice", "10.0.0.1"));  // the seventh: four
    CHECK(throttle.admit("alice", "10.0.0.1") == base::Duration(4s));

    SECTION("a right password starts the name afresh") {
        clock.advance(4s);
        CHECK_FALSE(throttle.admit("alice", "10.0.0.1"));
        throttle.succeeded("alice", "10.0.0.1");
        for (int i = 0; i < 5; ++i) CHECK_FALSE(throttle.admit("alice", "10.0.0.1"));
        CHECK(throttle.admit("alice", "10.0.0.1"));
    }
    SECTION("the wait stops growing at its bound") {
        for (int i = 0; i < 40; ++i) {
            clock.advance(*throttle.admit("alice", "10.0.0.3"));
            CHECK_FALSE(throttle.admit("alice", "10.0.0.3"));
        }
        CHECK(throttle.admit("alice", "10.0.0.3") == base::Duration(15min));
    }
    SECTION("an hour without a failure is forgotten") {
        clock.advance(1h);
        for (int i = 0; i < 5; ++i) CHECK_FALSE(throttle.admit("alice", "10.0.0.4"));
    }
}

TEST_CASE("login throttle: an address spraying names is stopped after twenty failures",
          "[console]") {
    base::ManualClock clock(base::Instant{});
    console::LoginThrottle throttle(clock);
    for (int i = 0; i < 20; ++i)
        CHECK_FALSE(throttle.admit("name-" + std::to_string(i), "10.0.0.9"));
    CHECK(throttle.admit("name-20", "10.0.0.9") == base::Duration(1s));
    CHECK_FALSE(throttle.admit("name-20", "10.0.0.10"));
    // Signing in right is not charged to the address.
    console::LoginThrottle fresh(clock);
    for (int i = 0; i < 50; ++i) {
        REQUIRE_FALSE(fresh.admit("carol", "10.0.0.11"));
        fresh.succeeded("carol", "10.0.0.11");
    }
}

TEST_CASE("login throttle: records are bounded, the stalest dropped first", "[console]") {
    base::ManualClock clock(base::Instant{});
    console::LoginLimits limits;
    limits.names.max_records = 100;
    limits.addresses.max_records = 100;
    console::LoginThrottle throttle(clock, limits);
    for (int i = 0; i < 5; ++i) CHECK_FALSE(throttle.admit("alice", "10.0.0.1"));
    for (int i = 0; i < 10'000; ++i) {
        clock.advance(1ms);
        throttle.admit(std::string(1000, 'x') + std::to_string(i), "10.1." + std::to_string(i));
        REQUIRE(throttle.records() <= 200);
    }
}
