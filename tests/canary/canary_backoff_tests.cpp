// aclaim-canary as a real process against a real PostgreSQL and a real coordinator: a clean short
// run holds the contract and writes its report; an injected violation makes it back off to the
// documented level, keep running there, and exit non-zero.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/process.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using nlohmann::json;

namespace {

struct CanaryRun {
    int exit = -1;
    json report;
    std::string report_md;
    std::string chart;
    std::string output;
};

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// Runs aclaim-canary for six seconds with the given flags.
CanaryRun run_canary(const testing::TestDatabase& db, std::vector<std::string> extra) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "aclaim-canary-e2e.XXXXXX").string();
    const std::filesystem::path dir = ::mkdtemp(tmpl.data());
    std::vector<std::string> argv{testing::bin("aclaim-canary"),
                                  "--dsn",
                                  db.dsn(),
                                  "--out",
                                  (dir / "out").string(),
                                  "--coordinator",
                                  testing::bin("aclaim-coordinator"),
                                  "--seconds",
                                  "6"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    testing::Process canary(argv, {}, (dir / "canary.out").string());
    CanaryRun r;
    const auto status = canary.wait_for(std::chrono::seconds(120));
    r.exit = status ? *status : -1;
    r.output = slurp(dir / "canary.out");
    if (std::filesystem::exists(dir / "out" / "report.json")) {
        r.report = json::parse(slurp(dir / "out" / "report.json"));
        r.report_md = slurp(dir / "out" / "report.md");
        r.chart = slurp(dir / "out" / "chart.svg");
    }
    const char* keep = std::getenv("ACLAIM_KEEP_LOGS");
    if (!keep || std::string(keep) != "1") std::filesystem::remove_all(dir);
    return r;
}

/// Violations the canary measured rather than was told to see.
std::vector<json> measured_violations(const json& report) {
    std::vector<json> out;
    for (const auto& v : report["violations"]) {
        if (!v["injected"].get<bool>()) out.push_back(v);
    }
    return out;
}

}  // namespace

TEST_CASE("canary: a short constant run holds the contract and writes its report",
          "[e2e][canary]") {
    testing::TestDatabase db;
    const auto r = run_canary(db, {"--shape", "constant", "--max-pollers", "3"});
    INFO(r.output);
    REQUIRE(r.exit == 0);
    REQUIRE(r.report.is_object());
    CHECK(r.report["verdict"] == "contract held");
    CHECK(r.report["violations"].empty());
    CHECK(r.report["problems"].empty());
    REQUIRE(r.report["intervals"].size() == 6);
    for (const auto& in : r.report["intervals"]) CHECK(in["pollers"] == 3);
    const auto& totals = r.report["totals"];
    CHECK(totals["claims"].get<long>() > 0);
    CHECK(totals["completions"].get<long>() > 0);
    CHECK(totals["duplicate_claims"]["worker_side"] == 0);
    CHECK(totals["duplicate_claims"]["audit_log"] == 0);
    CHECK(totals["stale_acceptances"] == 0);
    CHECK(totals["coordinator_claim_timing"].is_object());
    CHECK(r.report["final_check"]["ok"] == true);
    // The report says in words that it is no throughput guarantee, in both forms.
    CHECK(r.report["no_throughput_guarantee"].get<std::string>().find(
              "makes no throughput guarantee") != std::string::npos);
    CHECK(r.report_md.find("makes no throughput guarantee") != std::string::npos);
    CHECK(r.report_md.find("![pollers, claims per second and claim p99 latency over time]"
                           "(chart.svg)") != std::string::npos);
    CHECK(r.chart.rfind("<svg", 0) == 0);
    CHECK(r.chart.find("claims per second") != std::string::npos);
}

TEST_CASE("canary: an injected displacement violation halves the pollers and fails the run",
          "[e2e][canary]") {
    testing::TestDatabase db;
    const auto r = run_canary(
        db, {"--shape", "constant", "--max-pollers", "4", "--inject-violation", "displacement@2"});
    INFO(r.output);
    REQUIRE(r.exit == 1);
    REQUIRE(r.report.is_object());
    CHECK(r.report["verdict"] == "contract violated");
    CHECK(measured_violations(r.report).empty());
    REQUIRE(r.report["violations"].size() == 1);
    const auto& v = r.report["violations"][0];
    CHECK(v["rule"] == "displacement_within_bound");
    CHECK(v["injected"] == true);
    CHECK(v["second"] == 2);
    CHECK(v["level"] == 4);
    CHECK(v["backed_off_to"] == 2);  // every earlier level was 4 too: halve
    // It keeps running, at the reduced level, until the end.
    const auto& intervals = r.report["intervals"];
    REQUIRE(intervals.size() == 6);
    for (int s = 0; s < 6; ++s) CHECK(intervals[s]["pollers"] == (s <= 2 ? 4 : 2));
    CHECK(intervals[5]["claims"].get<long>() > 0);
    CHECK(r.report["final_check"]["ok"] == true);
    CHECK(r.output.find("violation displacement_within_bound (injected) at second 2") !=
          std::string::npos);
}

TEST_CASE("canary: an injected duplicate claim backs off to the last good level of a ramp",
          "[e2e][canary]") {
    testing::TestDatabase db;
    // The ramp from 2 to 4 over 6 s runs 2, 2, 3, 3, 4, 4 pollers.
    const auto r = run_canary(
        db, {"--shape", "ramp", "--max-pollers", "4", "--inject-violation", "duplicate@2"});
    INFO(r.output);
    REQUIRE(r.exit == 1);
    REQUIRE(r.report.is_object());
    CHECK(measured_violations(r.report).empty());
    REQUIRE(r.report["violations"].size() == 1);
    const auto& v = r.report["violations"][0];
    CHECK(v["rule"] == "no_duplicate_claim");
    CHECK(v["injected"] == true);
    CHECK(v["level"] == 3);
    CHECK(v["backed_off_to"] == 2);  // the last level that passed
    const auto& intervals = r.report["intervals"];
    REQUIRE(intervals.size() == 6);
    const std::vector<int> expected{2, 2, 3, 2, 2, 2};
    for (int s = 0; s < 6; ++s) CHECK(intervals[s]["pollers"] == expected[s]);
    CHECK(intervals[2]["violations"].size() == 1);
    CHECK(r.report_md.find("| 2 | 3 | `no_duplicate_claim` |") != std::string::npos);
}
