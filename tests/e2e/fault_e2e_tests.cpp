// End to end with real processes: a killed worker, a frozen worker, a restarted coordinator.

#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "tests/e2e/cluster.hpp"

using namespace aclaim::testing;
using namespace std::chrono_literals;

namespace {
/// A short lease so that faults resolve in seconds; the reaper runs often enough to notice.
const std::vector<std::string> kFastLeases{"--lease-ms",         "1500", "--heartbeat-ms", "500",
                                           "--reap-interval-ms", "100"};

void require_invariants(Cluster& c) {
    const auto report = c.check();
    for (const auto& v : report.violations) {
        UNSCOPED_INFO(aclaim::common::to_string(v.invariant)
                      << " job " << v.job_id << ": " << v.evidence);
    }
    REQUIRE(report.ok());
}

/// Whether the process's log holds `text` yet.
bool log_holds(const Process& p, const std::string& text) {
    std::ifstream in(p.log_path());
    std::stringstream all;
    all << in.rdbuf();
    return all.str().find(text) != std::string::npos;
}
}  // namespace

TEST_CASE("a SIGKILLed worker's job is reclaimed and completed once by another", "[e2e]") {
    Cluster c;
    const auto job = c.enqueue(1, 1).at(0);
    const std::string id = std::to_string(job);
    c.start_coordinator(kFastLeases);
    auto& a = c.start_worker(
        "holder", 1, {"--review-ms", "600000", "--review-dist", "fixed", "--concurrency", "1"});
    INFO("logs in " << c.log_dir());
    REQUIRE(eventually(
        [&] { return c.text("SELECT assignee FROM jobs WHERE id = " + id) == "holder"; }, 20s));
    a.signal(SIGKILL);
    REQUIRE(a.wait_for(5s).value_or(0) == 128 + SIGKILL);

    auto& b = c.start_worker("finisher", 1, {"--jobs", "1", "--review-ms", "10"});
    REQUIRE(eventually(
        [&] { return c.text("SELECT state FROM jobs WHERE id = " + id) == "completed"; }, 30s));
    CHECK(b.wait_for(10s) == std::optional<int>(0));
    CHECK(c.scalar("SELECT generation FROM jobs WHERE id = " + id) == 2);
    CHECK(c.text("SELECT assignee FROM jobs WHERE id = " + id) == "finisher");
    CHECK(c.scalar(
              "SELECT count(*) FROM job_events WHERE kind = 'reclaimed' AND worker = 'holder'") ==
          1);
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'completed'") == 1);
    require_invariants(c);
}

TEST_CASE("a worker frozen past its lease has its late completion rejected", "[e2e]") {
    Cluster c;
    const auto job = c.enqueue(1, 1).at(0);
    const std::string id = std::to_string(job);
    c.start_coordinator(kFastLeases);
    auto& a = c.start_worker(
        "sleeper", 1, {"--review-ms", "1200", "--review-dist", "fixed", "--concurrency", "1"});
    INFO("logs in " << c.log_dir());
    REQUIRE(eventually(
        [&] { return c.text("SELECT assignee FROM jobs WHERE id = " + id) == "sleeper"; }, 20s));
    // Frozen once its review has begun, not merely once the claim committed: a worker frozen
    // before it read its ASSIGNED would start the review on waking, find the job taken back
    // meanwhile and stop it unsubmitted, and the late completion this test is about would never
    // be sent (seen on a loaded machine).
    REQUIRE(eventually([&] { return log_holds(a, "assigned org=1 job=" + id + " "); }, 20s));
    a.signal(SIGSTOP);
    REQUIRE(eventually(
        [&] { return c.scalar("SELECT count(*) FROM job_events WHERE kind = 'reclaimed'") == 1; },
        20s));

    auto& b = c.start_worker("awake", 1, {"--jobs", "1", "--review-ms", "10"});
    REQUIRE(eventually(
        [&] { return c.text("SELECT state FROM jobs WHERE id = " + id) == "completed"; }, 30s));
    CHECK(b.wait_for(10s) == std::optional<int>(0));

    a.signal(SIGCONT);
    // The frozen worker's review is long finished: it submits, and is refused.
    REQUIRE(eventually(
        [&] {
            return c.scalar(
                       "SELECT count(*) FROM job_events WHERE kind = 'rejected' AND worker = "
                       "'sleeper'") >= 1;
        },
        20s));
    CHECK_THAT(
        c.text("SELECT detail FROM job_events WHERE kind = 'rejected' AND worker = 'sleeper'"),
        Catch::StartsWith("stale_generation"));
    CHECK(c.scalar("SELECT generation FROM job_results WHERE job_id = " + id) == 2);
    CHECK_THAT(c.text("SELECT result_ref FROM job_results WHERE job_id = " + id),
               Catch::Contains("awake"));
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'completed'") == 1);
    a.signal(SIGTERM);
    CHECK(a.wait_for(10s).has_value());
    require_invariants(c);
}

TEST_CASE("restarting the coordinator mid-run loses nothing and completes nothing twice", "[e2e]") {
    Cluster c;
    constexpr int kJobs = 400;
    c.enqueue(1, kJobs);
    auto* coordinator = &c.start_coordinator({"--lease-ms", "3000"});
    std::vector<Process*> workers;
    for (int i = 0; i < 4; ++i) {
        workers.push_back(&c.start_worker("w" + std::to_string(i), 1,
                                          {"--review-ms", "20", "--concurrency", "2"}));
    }
    INFO("logs in " << c.log_dir());
    for (int restart = 0; restart < 2; ++restart) {
        const long target = (restart + 1) * kJobs / 4;
        REQUIRE(eventually(
            [&] {
                return c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") >= target;
            },
            60s));
        coordinator->signal(SIGKILL);
        REQUIRE(coordinator->wait_for(5s).has_value());
        coordinator = &c.start_coordinator({"--lease-ms", "3000"});
    }
    const bool drained = eventually(
        [&] { return c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == kJobs; },
        90s);
    if (!drained) FAIL(c.tail_logs());
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'completed'") == kJobs);
    for (auto* w : workers) {
        w->signal(SIGTERM);
        CHECK(w->wait_for(15s) == std::optional<int>(0));
    }
    coordinator->signal(SIGTERM);
    CHECK(coordinator->wait_for(15s) == std::optional<int>(0));
    require_invariants(c);
}
