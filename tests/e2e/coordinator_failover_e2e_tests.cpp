// Workers that know two coordinators of one database, under load, while one coordinator is
// SIGKILLed: they fail over to the survivor and keep their leases there, and afterwards every job
// is completed exactly once and the checker holds.

#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "tests/e2e/cluster.hpp"

using namespace aclaim::testing;
using namespace std::chrono_literals;

namespace {

std::string contents(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// The job's lease end as the database prints it (microseconds kept).
std::string lease_end(Cluster& c, const std::string& job) {
    return c.text("SELECT lease_expires_at::text FROM jobs WHERE id = " + job);
}

/// Whether, within 5 s (several heartbeats), the job's lease is extended past `since` while it
/// stays the same generation-1 claim of `holder`.
bool renewed_after(Cluster& c, const std::string& job, const std::string& holder,
                   const std::string& since) {
    return eventually(
        [&] {
            return c.text("SELECT (state = 'assigned' AND generation = 1 AND assignee = '" +
                          holder + "' AND lease_expires_at > '" + since +
                          "'::timestamptz)::text FROM jobs WHERE id = " + job) == "true";
        },
        5s);
}

}  // namespace

TEST_CASE("workers fail over to the surviving coordinator and keep their leases",
          "[e2e][failover]") {
    Cluster c;
    INFO("logs in " << c.log_dir());
    const std::string a = c.endpoint();
    const std::string b = "tcp://127.0.0.1:" + std::to_string(free_port());
    const std::string both = a + "," + b;

    // The holder takes its job through A (B is not up yet: wherever its own order starts, it
    // ends up at A) and reviews it far longer than a lease.
    const auto held = std::to_string(c.enqueue(1, 1).at(0));
    auto* coordinator_a = &c.start_coordinator(kFastLeases);
    auto& holder = c.start_worker_at(
        both, "holder", 1,
        {"--review-ms", "15000", "--review-dist", "fixed", "--concurrency", "1", "--jobs", "1"});
    REQUIRE(eventually(
        [&] { return c.text("SELECT assignee FROM jobs WHERE id = " + held) == "holder"; }, 20s));

    auto& coordinator_b = c.start_coordinator_at(b, kFastLeases);
    constexpr int kLoad = 600;
    c.enqueue(1, kLoad);
    std::vector<Process*> workers;
    for (int i = 0; i < 4; ++i) {
        workers.push_back(&c.start_worker_at(both, "w" + std::to_string(i), 1,
                                             {"--review-ms", "15", "--concurrency", "2"}));
    }
    REQUIRE(eventually(
        [&] {
            return c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") >= kLoad / 4;
        },
        60s));

    coordinator_a->signal(SIGKILL);
    REQUIRE(coordinator_a->wait_for(5s).value_or(0) == 128 + SIGKILL);
    // The holder's review has seconds to run: the job is still its own.
    REQUIRE(c.text("SELECT state || ':' || generation || ':' || assignee FROM jobs WHERE id = " +
                   held) == "assigned:1:holder");

    // The lease moves past where A last left it, with the same generation and holder: only a
    // renewal through B can have done that.
    const auto left_by_a = lease_end(c, held);
    CHECK(renewed_after(c, held, "holder", left_by_a));

    const bool drained = eventually(
        [&] {
            return c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == kLoad + 1;
        },
        90s);
    if (!drained) FAIL(c.tail_logs());
    CHECK(holder.wait_for(20s) == std::optional<int>(0));
    CHECK(c.text("SELECT generation || ':' || assignee FROM jobs WHERE id = " + held) ==
          "1:holder");
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'reclaimed' AND job_id = " +
                   held) == 0);
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'completed'") == kLoad + 1);
    CHECK(c.scalar("SELECT count(DISTINCT job_id) FROM job_results") == kLoad + 1);
    CHECK_THAT(contents(holder.log_path()), Catch::Contains("failing over from " + a + " to " + b));

    for (auto* w : workers) {
        w->signal(SIGTERM);
        CHECK(w->wait_for(15s) == std::optional<int>(0));
    }
    coordinator_b.signal(SIGTERM);
    CHECK(coordinator_b.wait_for(15s) == std::optional<int>(0));
    const auto report = c.check();
    INFO(violations(report));
    REQUIRE(report.ok());
    CHECK(report.accepted_completions == static_cast<std::size_t>(kLoad + 1));
}

TEST_CASE("a coordinator that hangs with its connections up is left within the silence bound",
          "[e2e][failover]") {
    Cluster c;
    INFO("logs in " << c.log_dir());
    const std::string a = c.endpoint();
    const std::string b = "tcp://127.0.0.1:" + std::to_string(free_port());
    const std::vector<std::string> leases{"--lease-ms",         "3000", "--heartbeat-ms", "1000",
                                          "--reap-interval-ms", "100"};
    const auto held = std::to_string(c.enqueue(1, 1).at(0));
    auto& coordinator_a = c.start_coordinator(leases);
    // The transport's heartbeat, not a request's reply timeout, must notice the hang.
    auto& holder =
        c.start_worker_at(a + "," + b, "holder", 1,
                          {"--review-ms", "9000", "--review-dist", "fixed", "--jobs", "1",
                           "--silence-timeout-ms", "900", "--reply-timeout-ms", "20000"});
    REQUIRE(eventually(
        [&] { return c.text("SELECT assignee FROM jobs WHERE id = " + held) == "holder"; }, 20s));
    auto& coordinator_b = c.start_coordinator_at(b, leases);

    // Every thread of A stops; the kernel keeps its sockets open and acknowledges TCP.
    coordinator_a.signal(SIGSTOP);
    const auto stopped = std::chrono::steady_clock::now();
    const bool moved = eventually(
        [&] {
            return contents(holder.log_path()).find("failing over from " + a) != std::string::npos;
        },
        10s);
    const auto took = std::chrono::steady_clock::now() - stopped;
    if (!moved) {
        coordinator_a.signal(SIGCONT);
        FAIL(c.tail_logs());
    }
    // 900 ms of silence after a PING, plus up to 300 ms until the PING, plus the scheduling of a
    // loaded machine: far below the 20 s reply timeout that would otherwise have been the bound.
    CHECK(took < 5s);
    // A is stopped: a lease end later than the one read now was written through B.
    const auto left_by_a = lease_end(c, held);
    CHECK(renewed_after(c, held, "holder", left_by_a));
    CHECK(holder.wait_for(30s) == std::optional<int>(0));
    CHECK(c.text("SELECT state || ':' || generation || ':' || assignee FROM jobs WHERE id = " +
                 held) == "completed:1:holder");
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'reclaimed'") == 0);
    coordinator_a.signal(SIGCONT);
    coordinator_a.signal(SIGTERM);
    coordinator_b.signal(SIGTERM);
    CHECK(coordinator_a.wait_for(15s).has_value());
    CHECK(coordinator_b.wait_for(15s) == std::optional<int>(0));
    REQUIRE(c.check().ok());
}
