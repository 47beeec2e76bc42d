// Two cells, each its own PostgreSQL server with its own coordinator, and one cell map: workers
// find their organization's coordinators in the map, aclaimctl runs status, check and recover in
// both cells, reports a cell that is down or frozen instead of hiding it, flags an organization
// whose rows sit in the wrong cell, and refuses a map that puts an organization in two cells.

#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/base/clock.hpp"
#include "common/store/assignment_store.hpp"
#include "tests/e2e/cluster.hpp"
#include "tests/pg/ctl_run.hpp"
#include "tests/support/pg_server.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::string write_map(const std::string& dir, const std::string& name, const json& map) {
    std::string path = dir + "/" + name;
    std::ofstream(path) << map.dump(2);
    return path;
}

json cell(const std::string& name, const std::string& dsn, const std::string& endpoint,
          std::vector<int> orgs) {
    return {{"name", name}, {"dsn", dsn}, {"coordinators", {endpoint}}, {"organizations", orgs}};
}

json parse_out(const CtlResult& r) {
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE_NOTHROW(json::parse(r.out));
    return json::parse(r.out);
}

const json& cell_of(const json& out, const std::string& name) {
    for (const auto& c : out.at("cells")) {
        if (c.at("name") == name) return c;
    }
    FAIL("no cell " << name << " in " << out.dump());
    return out;
}

}  // namespace

TEST_CASE("two cells: workers find their cell, aclaimctl sees both and reports a cell down",
          "[e2e][cells]") {
    Cluster east;             // cell "east": the cluster's database and coordinator
    ThrowawayServer west_db;  // cell "west": a server of its own, so that it can go down alone
    INFO("logs in " << east.log_dir());
    const std::string west = "tcp://127.0.0.1:" + std::to_string(free_port());
    const auto map_path = write_map(east.log_dir(), "cells.json",
                                    {{"cells",
                                      {cell("east", east.db().dsn(), east.endpoint(), {1}),
                                       cell("west", west_db.dsn(), west, {2})}}});

    constexpr int kJobs = 40;
    east.enqueue(1, kJobs);
    {
        store::AssignmentStore store(west_db.dsn());
        std::vector<store::NewJob> jobs;
        for (int i = 0; i < kJobs; ++i) jobs.push_back({0, "west-" + std::to_string(i), 3});
        store.enqueue(2, jobs, base::SystemClock().now());
    }
    east.start_coordinator();
    Process west_coordinator({bin("aclaim-coordinator"), "--dsn", west_db.dsn(), "--bind", west,
                              "--plaintext", "--log-level", "info"},
                             {}, east.log_dir() + "/west-coordinator.log");
    std::vector<std::unique_ptr<Process>> workers;
    for (const auto org : {1, 2}) {
        const auto id = "reviewer-" + std::to_string(org);
        workers.push_back(std::make_unique<Process>(
            std::vector<std::string>{bin("aclaim-worker"), "--cells", map_path, "--org",
                                     std::to_string(org), "--id", id, "--jobs",
                                     std::to_string(kJobs), "--review-ms", "5"},
            std::map<std::string, std::string>{}, east.log_dir() + "/" + id + ".log"));
    }
    for (auto& w : workers) CHECK(w->wait_for(60s) == std::optional<int>(0));

    // Each organization's work was done in its own cell, and nowhere else.
    CHECK(east.scalar("SELECT count(*) FROM jobs WHERE state = 'completed' AND org_id = 1") ==
          kJobs);
    CHECK(east.scalar("SELECT count(*) FROM jobs WHERE org_id <> 1") == 0);
    {
        pqxx::connection conn(west_db.dsn());
        pqxx::read_transaction t(conn);
        CHECK(t.exec1("SELECT count(*) FROM jobs WHERE state = 'completed' AND org_id = 2")[0]
                  .as<int>() == kJobs);
    }

    auto check = run_aclaimctl({"--cells", map_path, "check", "--json"});
    auto out = parse_out(check);
    CHECK(check.code == 0);
    CHECK(out.at("ok") == true);
    CHECK(cell_of(out, "east").at("verdict") == "ok");
    CHECK(cell_of(out, "east").at("report").at("jobs") == kJobs);
    CHECK(cell_of(out, "west").at("report").at("accepted_completions") == kJobs);

    auto status = run_aclaimctl({"--cells", map_path, "status", "--json"});
    out = parse_out(status);
    CHECK(status.code == 0);
    CHECK(cell_of(out, "east").at("report").at("organizations").contains("1"));
    CHECK(cell_of(out, "west").at("report").at("organizations").at("2").at("completed") == kJobs);

    // --org goes to the organization's cell only.
    status = run_aclaimctl({"--cells", map_path, "status", "--org", "2"});
    CHECK(status.code == 0);
    CHECK_THAT(status.out, Catch::Contains("== cell west: ok"));
    CHECK_THAT(status.out, !Catch::Contains("cell east"));

    auto recover = run_aclaimctl({"--cells", map_path, "recover"});
    CHECK(recover.code == 0);
    CHECK_THAT(recover.out, Catch::Contains("== cell east: ok"));
    CHECK_THAT(recover.out, Catch::Contains("== cell west: ok"));
    CHECK_THAT(recover.out, Catch::Contains("cells: 2 ok, 0 with findings, 0 down: OK"));

    // Rows of an organization in a cell the map does not put it in are a finding.
    east.enqueue(3, 1);
    status = run_aclaimctl({"--cells", map_path, "status"});
    CHECK(status.code == 1);
    CHECK_THAT(
        status.out,
        Catch::Contains("organization 3 has rows in cell 'east' but the map puts it in no cell"));

    // A map that puts an organization in two cells is refused before anything runs.
    const auto split = write_map(east.log_dir(), "split.json",
                                 {{"cells",
                                   {cell("east", east.db().dsn(), east.endpoint(), {1, 2}),
                                    cell("west", west_db.dsn(), west, {2})}}});
    const auto refused = run_aclaimctl({"--cells", split, "check"});
    CHECK(refused.code == 2);
    CHECK_THAT(refused.err, Catch::Contains("organization 2 is mapped to two cells"));

    // A frozen cell (every PostgreSQL process stopped; TCP stays up) is reported at the deadline.
    const auto frozen = west_db.processes();
    for (const auto pid : frozen) ::kill(pid, SIGSTOP);
    const auto started = base::SystemClock().monotonic_now();
    check = run_aclaimctl({"--cells", map_path, "--cell-timeout", "2s", "check", "--json"});
    const auto took = base::SystemClock().monotonic_now() - started;
    for (const auto pid : frozen) ::kill(pid, SIGCONT);
    out = parse_out(check);
    CHECK(check.code == 3);
    CHECK(cell_of(out, "west").at("verdict") == "down");
    CHECK_THAT(cell_of(out, "west").at("error").get<std::string>(),
               Catch::Contains("no answer within 2s"));
    CHECK(cell_of(out, "east").at("verdict") == "findings");  // organization 3, above
    CHECK(took < 15s);

    // A cell whose server is gone is reported, and the other cell still answers.
    west_coordinator.signal(SIGTERM);
    CHECK(west_coordinator.wait_for(15s).has_value());
    west_db.stop();
    check = run_aclaimctl({"--cells", map_path, "check"});
    CHECK(check.code == 3);
    CHECK_THAT(check.out, Catch::Contains("== cell west: down: unreachable"));
    CHECK_THAT(check.out, Catch::Contains("== cell east: findings"));
    CHECK_THAT(check.out, Catch::Contains("OK: every invariant holds"));
    CHECK_THAT(check.out, Catch::Contains("cells: 0 ok, 1 with findings, 1 down: NOT OK"));
}
