// The descriptor reserve: once the worker connections leave only the reserve, a handshake of a
// key that is connected already is refused and counted, and one of a key that is not goes on.

#include <catch2/catch.hpp>
#include <latch>
#include <thread>

#include "coordinator/metrics/metrics.hpp"
#include "coordinator/router/accept_monitor.hpp"

using namespace aclaim;
using namespace aclaim::coordinator;

namespace {
std::uint64_t refused(const Metrics& m) {
    return m.tenant_limit_refusals[Metrics::TenantLimit::FdReserve].load();
}
}  // namespace

TEST_CASE("the descriptor reserve is kept for keys without a session", "[limits][fd_reserve]") {
    Metrics metrics;
    ConnectionBudget budget(10, 3, &metrics);
    budget.set_has_sessions(1, "hog", true);
    for (int i = 0; i < 6; ++i) budget.opened();
    // Below the reserve anyone connects.
    CHECK_FALSE(budget.crowded());
    CHECK(budget.admits(1, "hog"));
    budget.opened();
    // Seven of ten open, three in reserve: only keys that hold no session yet.
    CHECK(budget.crowded());
    CHECK_FALSE(budget.admits(1, "hog"));
    CHECK(budget.admits(1, "new"));
    CHECK(budget.admits(2, "hog"));
    CHECK(refused(metrics) == 1);
    // A key whose last session closed is a new key again; a closed connection frees a place.
    budget.set_has_sessions(1, "hog", false);
    CHECK(budget.admits(1, "hog"));
    budget.set_has_sessions(1, "hog", true);
    budget.closed();
    CHECK(budget.admits(1, "hog"));
    CHECK(refused(metrics) == 1);
}

TEST_CASE("the connection count never wraps below zero", "[limits][fd_reserve]") {
    ConnectionBudget budget(10, 0);
    budget.closed();
    CHECK(budget.open() == 0);
    // The router thread counts while the ZAP thread asks: both at once, on real threads.
    std::latch go(2);
    std::thread counter([&] {
        go.arrive_and_wait();
        for (int i = 0; i < 1000; ++i) budget.opened();
        for (int i = 0; i < 1000; ++i) budget.closed();
    });
    std::thread asker([&] {
        go.arrive_and_wait();
        for (int i = 0; i < 1000; ++i) (void)budget.admits(1, "k");
    });
    counter.join();
    asker.join();
    CHECK(budget.open() == 0);
}

TEST_CASE("a small descriptor limit keeps a quarter for the coordinator itself",
          "[limits][fd_reserve]") {
    CHECK(ConnectionBudget::capacity_for(256) == 192);
    CHECK(ConnectionBudget::capacity_for(20000) == 20000 - 256);
}
