// How a worker spaces its reconnections (common/base/reconnect_spread.hpp): the first attempt
// after a session is spread over a window sized by the fleet, later ones back off with jitter,
// and a coordinator's retry_after_ms is waited out. Pure arithmetic over a seeded engine: a
// thousand simulated workers in microseconds, no sockets, no clocks, no sleeps.

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <optional>
#include <random>
#include <vector>

#include "common/base/reconnect_spread.hpp"

using aclaim::base::Backoff;
using aclaim::base::ReconnectSpread;
using Millis = std::chrono::milliseconds;

namespace {

/// The first reconnection of each of `workers` simulated workers, each with its own engine.
std::vector<Millis> first_attempts(int workers, Millis window,
                                   std::optional<Millis> retry_after = std::nullopt) {
    std::vector<Millis> out;
    for (int i = 0; i < workers; ++i) {
        std::seed_seq seed{i, 7};
        std::minstd_rand rng(seed);
        Backoff backoff(Millis(100), Millis(5000));
        out.push_back(ReconnectSpread::next_wait(backoff, window, retry_after, rng));
    }
    return out;
}

}  // namespace

TEST_CASE("the window grows with the fleet the coordinator reported, within its bounds",
          "[reconnect]") {
    CHECK(ReconnectSpread::window(std::nullopt) == Millis(100));
    CHECK(ReconnectSpread::window(0) == Millis(100));
    CHECK(ReconnectSpread::window(16) == Millis(100));
    CHECK(ReconnectSpread::window(1000) == Millis(2000));
    CHECK(ReconnectSpread::window(10000) == Millis(20000));
    CHECK(ReconnectSpread::window(1'000'000'000'000) == Millis(60000));
}

TEST_CASE("a thousand workers' first reconnections cover the window evenly", "[reconnect]") {
    const Millis window = ReconnectSpread::window(10000);
    const auto waits = first_attempts(1000, window);
    std::array<int, 10> bins{};
    double sum = 0;
    for (const auto w : waits) {
        REQUIRE(w >= Millis(0));
        REQUIRE(w <= window);
        sum += static_cast<double>(w.count());
        ++bins[std::min<std::size_t>(9, static_cast<std::size_t>(w * 10 / window))];
    }
    // 100 a bin expected; the standard deviation is about 9.5, so 60..140 fails only on a
    // distribution that is not uniform.
    for (const int n : bins) {
        CHECK(n >= 60);
        CHECK(n <= 140);
    }
    const double mean = sum / static_cast<double>(waits.size());
    CHECK(mean > 0.45 * static_cast<double>(window.count()));
    CHECK(mean < 0.55 * static_cast<double>(window.count()));
    // Nobody comes back in the first or last 2% all together: the arrival rate stays near
    // 1000 / 20 s everywhere.
    const auto early =
        std::count_if(waits.begin(), waits.end(), [&](Millis w) { return w < window / 50; });
    CHECK(early < 50);
}

TEST_CASE("later attempts back off with jitter, and a WELCOME starts over", "[reconnect]") {
    std::minstd_rand rng(3);
    Backoff backoff(Millis(100), Millis(5000));
    const Millis window(20000);
    (void)ReconnectSpread::next_wait(backoff, window, std::nullopt, rng);  // the first: spread
    Millis nominal(200);
    for (int i = 0; i < 8; ++i) {
        const auto w = ReconnectSpread::next_wait(backoff, window, std::nullopt, rng);
        CHECK(w >= nominal / 2);
        CHECK(w <= nominal);
        nominal = std::min(nominal * 2, Millis(5000));
    }
    backoff.reset();
    const auto again = ReconnectSpread::next_wait(backoff, Millis(100), std::nullopt, rng);
    CHECK(again <= Millis(100));
}

TEST_CASE("a coordinator's retry_after is honoured", "[reconnect]") {
    // Whatever the worker's own draw, never before retry_after, and at most a blur after it (the
    // coordinator spread the figures it gave).
    for (const auto window : {Millis(100), Millis(20000)}) {
        const auto waits = first_attempts(1000, window, Millis(3000));
        for (const auto w : waits) {
            CHECK(w >= Millis(3000));
            CHECK(w <= std::max(window, Millis(3000) + ReconnectSpread::kRetryJitter));
        }
    }
    // A draining coordinator's figures, a uniform share of its window each, keep their spread.
    std::minstd_rand coordinator(11);
    std::uniform_int_distribution<Millis::rep> share(0, 20000);
    std::vector<Millis> told;
    for (int i = 0; i < 1000; ++i) told.push_back(Millis(1000 + share(coordinator)));
    std::array<int, 10> bins{};
    for (int i = 0; i < 1000; ++i) {
        std::minstd_rand rng(static_cast<unsigned>(i) + 1);
        Backoff backoff(Millis(100), Millis(5000));
        const auto w = ReconnectSpread::next_wait(backoff, Millis(100), told[i], rng);
        CHECK(w >= told[i]);
        ++bins[std::min<std::size_t>(
            9, static_cast<std::size_t>((w - Millis(1000)) * 10 / Millis(20100)))];
    }
    for (const int n : bins) {
        CHECK(n >= 60);
        CHECK(n <= 140);
    }
    // A later attempt too; and an absurd one is capped at a minute.
    std::minstd_rand rng(5);
    Backoff backoff(Millis(100), Millis(5000));
    (void)backoff.next();
    CHECK(ReconnectSpread::next_wait(backoff, Millis(100), Millis(700), rng) >= Millis(700));
    CHECK(ReconnectSpread::next_wait(backoff, Millis(100), Millis(10'000'000), rng) <=
          Millis(90000));
}
