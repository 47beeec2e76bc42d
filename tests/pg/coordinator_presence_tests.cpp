// A coordinator writes how many workers it serves per organization to coordinator_presence (what
// the browser console shows as connected workers per coordinator), and withdraws its rows when it
// stops cleanly.

#include <catch2/catch.hpp>
#include <map>

#include "tests/pg/coordinator_client.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

std::map<common::OrgId, int> presence(pqxx::connection& conn, const std::string& endpoint) {
    pqxx::read_transaction t(conn);
    std::map<common::OrgId, int> out;
    for (const auto& r : t.exec_params(
             "SELECT org_id, workers FROM coordinator_presence WHERE endpoint = $1", endpoint)) {
        out[r[0].as<common::OrgId>()] = r[1].as<int>();
    }
    return out;
}

/// Waits, up to a deadline, until the published rows are `want`; returns the last read.
std::map<common::OrgId, int> await_presence(pqxx::connection& conn, const std::string& endpoint,
                                            const std::map<common::OrgId, int>& want) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    auto seen = presence(conn, endpoint);
    while (seen != want && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(20ms);
        seen = presence(conn, endpoint);
    }
    return seen;
}

}  // namespace

TEST_CASE("a coordinator publishes its connected workers per organization and withdraws them",
          "[presence]") {
    common::SystemClock clock;
    CoordinatorHarness h(clock, [](auto& o) { o.presence.interval_ms = 100; });
    auto conn = h.db.connect();
    const auto endpoint = h.coordinator->endpoint();

    auto a = h.worker();
    auto b = h.worker();
    auto c = h.worker();
    a->hello("reviewer-a", 1);
    b->hello("reviewer-b", 1);
    c->hello("reviewer-c", 2);
    // A second connection of the same worker id is still one worker.
    auto a_again = h.greeted("reviewer-a", 1);
    CHECK(await_presence(*conn, endpoint, {{1, 2}, {2, 1}}) ==
          std::map<common::OrgId, int>{{1, 2}, {2, 1}});
    {
        pqxx::read_transaction t(*conn);
        const auto row = t.exec_params1(
            "SELECT coordinator, interval_ms, seen_at >= started_at FROM coordinator_presence "
            "WHERE endpoint = $1 AND org_id = 1",
            endpoint);
        CHECK(row[0].as<std::string>().find('/') != std::string::npos);
        CHECK(row[1].as<int>() == 100);
        CHECK(row[2].as<bool>());
    }

    h.coordinator->stop();
    CHECK(presence(*conn, endpoint).empty());
}
