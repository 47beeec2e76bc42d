// The console's turn on a database connection: one request at a time, the others wait, bounded.

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <latch>
#include <stdexcept>
#include <thread>
#include <vector>

#include "console/turn.hpp"

using namespace std::chrono_literals;
using aclaim::console::DatabaseBusy;
using aclaim::console::Turn;

TEST_CASE("console turn: a request behind a held turn is refused once its wait is over",
          "[console]") {
    Turn turn;
    std::latch holding(1), done(1);
    auto holder = std::async(std::launch::async, [&] {
        return turn.run(std::nullopt, [&] {
            holding.count_down();
            done.wait();
            return 7;
        });
    });
    holding.wait();
    CHECK_THROWS_AS(turn.run(0ms, [] { return 1; }), DatabaseBusy);
    done.count_down();
    CHECK(holder.get() == 7);
    // Given back, so the next one runs at once, and a throwing one gives it back too.
    CHECK(turn.run(0ms, [] { return 2; }) == 2);
    CHECK_THROWS_AS(turn.run(0ms, []() -> int { throw std::runtime_error("statement failed"); }),
                    std::runtime_error);
    CHECK(turn.run(0ms, [] { return 3; }) == 3);
}

TEST_CASE("console turn: requests take turns, never two at once", "[console]") {
    Turn turn;
    std::atomic<int> inside{0}, most{0}, runs{0};
    constexpr int kThreads = 4, kEach = 200;
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            start.arrive_and_wait();
            for (int i = 0; i < kEach; ++i)
                turn.run(std::nullopt, [&] {
                    const int now = ++inside;
                    int seen = most.load();
                    while (now > seen && !most.compare_exchange_weak(seen, now)) {
                    }
                    ++runs;
                    --inside;
                });
        });
    for (auto& t : threads) t.join();
    CHECK(most.load() == 1);
    CHECK(runs.load() == kThreads * kEach);
}
