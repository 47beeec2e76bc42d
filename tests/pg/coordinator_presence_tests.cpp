// A coordinator writes how many workers it serves per organization to coordinator_presence (what
// the browser console shows as connected workers per coordinator), and withdraws its rows when it
// stops cleanly.

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/pg/coordinator_client.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

std::map<store::OrgId, int> presence(pqxx::connection& conn, const std::string& endpoint) {
    pqxx::read_transaction t(conn);
    std::map<store::OrgId, int> out;
    for (const auto& r : t.exec_params(
             "SELECT org_id, workers FROM coordinator_presence WHERE endpoint = $1", endpoint)) {
        out[r[0].as<store::OrgId>()] = r[1].as<int>();
    }
    return out;
}

/// Reads with `read` until it returns `want`, up to a deadline; returns the last read, for the
/// check to print.
template <typename Read>
auto await_read(Read read, const decltype(read())& want) {
    auto seen = read();
    eventually(
        [&] {
            seen = read();
            return seen == want;
        },
        10s);
    return seen;
}

/// Waits, up to a deadline, until the published rows are `want`; returns the last read.
std::map<store::OrgId, int> await_presence(pqxx::connection& conn, const std::string& endpoint,
                                           const std::map<store::OrgId, int>& want) {
    return await_read([&] { return presence(conn, endpoint); }, want);
}

/// The published queues of each reviewer of the organization (coordinator_presence.serving), once
/// they are `want` or at a deadline; the last read.
nlohmann::json await_serving(pqxx::connection& conn, const std::string& endpoint, store::OrgId org,
                             const nlohmann::json& want) {
    return await_read(
        [&] {
            pqxx::read_transaction t(conn);
            const auto r = t.exec_params(
                "SELECT serving::text FROM coordinator_presence WHERE endpoint = $1 AND org_id = "
                "$2",
                endpoint, org);
            return r.empty() || r[0][0].is_null()
                       ? nlohmann::json()
                       : nlohmann::json::parse(r[0][0].as<std::string>());
        },
        want);
}

}  // namespace

TEST_CASE("a coordinator publishes its connected workers per organization and withdraws them",
          "[presence]") {
    base::SystemClock clock;
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
          std::map<store::OrgId, int>{{1, 2}, {2, 1}});
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

TEST_CASE("a coordinator publishes the queues each connected reviewer serves", "[presence]") {
    base::SystemClock clock;
    CoordinatorHarness h(clock, [](auto& o) { o.presence.interval_ms = 100; });
    auto conn = h.db.connect();
    const auto endpoint = h.coordinator->endpoint();
    auto hello = [](RawWorker& w, const std::string& id, std::vector<std::string> queues) {
        w.expect<proto::Welcome>(w.request(proto::Hello{0, id, 1, std::move(queues)}));
    };
    using nlohmann::json;

    auto a = h.worker();
    auto b = h.worker();
    hello(*a, "reviewer-a", {"intake"});
    // None named is the default queue.
    hello(*b, "reviewer-b", {});
    const auto first = json{{"reviewer-a", {"intake"}}, {"reviewer-b", {"default"}}};
    CHECK(await_serving(*conn, endpoint, 1, first) == first);
    // A reviewer serves what any of its sessions serves: a second connection of reviewer-a adds
    // "inspect", though no reviewer came or went.
    auto a_again = h.worker();
    hello(*a_again, "reviewer-a", {"inspect", "intake"});
    const auto both = json{{"reviewer-a", {"inspect", "intake"}}, {"reviewer-b", {"default"}}};
    CHECK(await_serving(*conn, endpoint, 1, both) == both);
    // A HELLO that changes a session's queues is published.
    hello(*b, "reviewer-b", {"archive", "intake"});
    const auto changed =
        json{{"reviewer-a", {"inspect", "intake"}}, {"reviewer-b", {"archive", "intake"}}};
    CHECK(await_serving(*conn, endpoint, 1, changed) == changed);
    // The connection that served "inspect" closing takes it away.
    a_again.reset();
    const auto closed = json{{"reviewer-a", {"intake"}}, {"reviewer-b", {"archive", "intake"}}};
    CHECK(await_serving(*conn, endpoint, 1, closed) == closed);
}
