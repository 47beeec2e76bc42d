// The browser console's sessions: what the cookie and the CSRF token rest on.

#include <catch2/catch.hpp>

#include "common/base/clock.hpp"
#include "console/operators.hpp"

using namespace aclaim;

TEST_CASE("console sessions: tokens are random, found while fresh, gone when closed", "[console]") {
    console::init_crypto();
    common::ManualClock clock(common::Instant{});
    console::Sessions sessions(clock, std::chrono::minutes(10));
    const auto a = sessions.open({"alice", std::nullopt});
    const auto b = sessions.open({"alice", std::nullopt});
    CHECK(a != b);
    CHECK(a.size() == 64);
    const auto found = sessions.find(a);
    REQUIRE(found);
    CHECK(found->op.name == "alice");
    CHECK(found->csrf.size() == 64);
    CHECK(found->csrf != sessions.find(b)->csrf);
    CHECK_FALSE(sessions.find(a + "0"));
    sessions.close(a);
    CHECK_FALSE(sessions.find(a));
    CHECK(sessions.find(b));

    SECTION("a session ends after the idle time without a request, not while it is used") {
        clock.advance(std::chrono::minutes(9));
        CHECK(sessions.find(b));  // used: the idle time starts again
        clock.advance(std::chrono::minutes(9));
        CHECK(sessions.find(b));
        clock.advance(std::chrono::minutes(10) + common::kMillis);
        CHECK_FALSE(sessions.find(b));
    }
}
