// The per-source limit of POST /v1/callback's refusals (coordinator/http/callback_limiter.hpp),
// driven by a ManualClock: a burst, a steady refill, a bounded table of sources.

#include <catch2/catch.hpp>

#include "coordinator/http/callback_limiter.hpp"

using aclaim::base::ManualClock;
using aclaim::coordinator::callback_source;
using aclaim::coordinator::CallbackLimiter;
using aclaim::coordinator::CallbackLimits;
using namespace std::chrono_literals;

namespace {
constexpr auto kT0 = aclaim::base::instant_from_micros(1'700'000'000'000'000);
}  // namespace

TEST_CASE("callback limiter: a burst of refusals, then one per refill", "[callback][limiter]") {
    ManualClock clock(kT0);
    CallbackLimiter limiter({.burst = 3, .per_second = 0.5, .max_sources = 16}, clock);
    for (int i = 0; i < 3; ++i) {
        CHECK_FALSE(limiter.wait_for("a"));
        limiter.refused("a");
    }
    const auto wait = limiter.wait_for("a");
    REQUIRE(wait);
    CHECK(*wait == 2s);  // one refusal comes back every 2 s
    CHECK_FALSE(limiter.wait_for("b"));
    clock.advance(1s);
    CHECK(*limiter.wait_for("a") == 1s);
    clock.advance(1s);
    CHECK_FALSE(limiter.wait_for("a"));
    limiter.refused("a");
    CHECK(limiter.wait_for("a"));
    // Accepted callbacks cost nothing: only refused() charges.
    for (int i = 0; i < 100; ++i) CHECK_FALSE(limiter.wait_for("c"));
    // A full refill never exceeds the burst.
    clock.advance(1h);
    for (int i = 0; i < 3; ++i) limiter.refused("a");
    CHECK(limiter.wait_for("a"));
}

TEST_CASE("callback limiter: the table of sources is bounded", "[callback][limiter]") {
    ManualClock clock(kT0);
    CallbackLimiter limiter({.burst = 2, .per_second = 1, .max_sources = 4}, clock);
    for (int i = 0; i < 4; ++i) {
        limiter.refused("s" + std::to_string(i));
        limiter.refused("s" + std::to_string(i));
    }
    CHECK(limiter.sources() == 4);
    // Every new source beyond the bound shares one bucket: many addresses buy no more guesses.
    for (int i = 4; i < 100; ++i) limiter.refused("s" + std::to_string(i));
    CHECK(limiter.sources() == 5);
    CHECK(limiter.wait_for("s99"));
    CHECK(limiter.wait_for("someone-new"));
    // Buckets that refilled are forgotten to make room.
    clock.advance(10s);
    CHECK_FALSE(limiter.wait_for("someone-new"));
    CHECK(limiter.sources() <= 5);
}

TEST_CASE("callback limiter: a source is the peer's address without its port",
          "[callback][limiter]") {
    CHECK(callback_source("10.0.0.7:51234") == "10.0.0.7");
    CHECK(callback_source("::1:40000") == "::1");
    CHECK(callback_source("fe80::1%eth0:80") == "fe80::1%eth0");
    CHECK(callback_source("unix") == "unix");
}
