// Parking rehearsed with the simulator (protocol 1.6): `aclaim-worker --park-every 2` parks every
// second review instead of completing it and writes each callback token to its result file; the
// outside completion is then the documented SQL call, once, and a second use of a token is refused.

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/e2e/cluster.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using namespace std::chrono_literals;

TEST_CASE("aclaim-worker --park-every parks every Nth review and hands its token on",
          "[e2e][park]") {
    Cluster c;
    INFO("logs in " << c.log_dir());
    c.start_coordinator();
    c.enqueue(1, 6);
    const std::string results = c.log_dir() + "/results.jsonl";
    auto& worker = c.start_worker("reviewer-park", 1,
                                  {"--park-every", "2", "--park-timeout-ms", "600000", "--jobs",
                                   "6", "--review-ms", "10", "--result-file", results});
    REQUIRE(worker.wait_for(60s) == std::optional<int>(0));
    INFO(c.tail_logs());

    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == 3);
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE state = 'parked'") == 3);
    std::vector<std::pair<long, std::string>> tokens;
    std::ifstream in(results);
    for (std::string line; std::getline(in, line);) {
        const auto j = nlohmann::json::parse(line);
        if (j["op"] != "park") continue;
        CHECK(j["verdict"] == "accepted");
        tokens.emplace_back(j["job_id"].get<long>(), j["detail"].get<std::string>());
    }
    REQUIRE(tokens.size() == 3);
    for (const auto& [job, token] : tokens) CHECK(token.size() == 64);

    // The outside system's side, as docs/integration.md shows it.
    auto finish = [&](const std::string& token) {
        pqxx::connection conn(c.db().dsn());
        pqxx::work t(conn);
        const auto r = t.exec_params1(
            "SELECT accepted, job_id, reason FROM aclaim_finish_parked(token => $1, "
            "outcome => 'completed', result => 'lab://runs/1', org => 1)",
            token);
        t.commit();
        return std::make_tuple(r[0].as<bool>(), r[1].as<long>(), r[2].as<std::string>());
    };
    for (const auto& [job, token] : tokens) {
        CHECK(finish(token) == std::make_tuple(true, job, std::string("accepted")));
    }
    CHECK(std::get<2>(finish(tokens[0].second)) == "replayed");
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == 6);
    CHECK(c.check().ok());
}

TEST_CASE("aclaim-worker --park-every without --result-file is refused", "[e2e][park]") {
    Process p({bin("aclaim-worker"), "--park-every", "2"});
    CHECK(p.wait_for(10s) == std::optional<int>(2));
}
