// End to end with real processes: eight workers drain two organizations; a Python worker speaks
// the JSON encoding.

#include <signal.h>

#include <catch2/catch.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/proto/protocol.hpp"
#include "tests/e2e/cluster.hpp"
#include "tests/support/raw_worker.hpp"

using namespace aclaim::testing;
using namespace std::chrono_literals;
namespace proto = aclaim::proto;

TEST_CASE("eight workers drain 2,000 jobs of two organizations exactly once", "[e2e]") {
    Cluster c;
    c.enqueue(1, 1000);
    c.enqueue(2, 1000);
    auto& coordinator = c.start_coordinator({"--lease-ms", "5000"});
    std::vector<Process*> workers;
    for (int i = 0; i < 8; ++i) {
        const int org = 1 + i % 2;
        workers.push_back(&c.start_worker("org" + std::to_string(org) + "-w" + std::to_string(i),
                                          org, {"--review-ms", "2", "--concurrency", "4"}));
    }
    INFO("logs in " << c.log_dir());
    const bool drained = eventually(
        [&] { return c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == 2000; },
        120s);
    if (!drained) FAIL(c.tail_logs());
    // Exactly one accepted completion per job, carrying the job's latest generation.
    CHECK(c.scalar("SELECT count(*) FROM (SELECT job_id FROM job_events WHERE kind = 'completed' "
                   "GROUP BY job_id HAVING count(*) = 1) s") == 2000);
    CHECK(c.scalar("SELECT count(*) FROM job_events e JOIN jobs j ON j.id = e.job_id "
                   "WHERE e.kind = 'completed' AND e.generation <> (SELECT max(generation) FROM "
                   "job_events c WHERE c.job_id = e.job_id AND c.kind = 'claimed')") == 0);
    // No job crossed organizations: events match their job, and each job went to its own org's
    // workers.
    CHECK(c.scalar("SELECT count(*) FROM job_events e JOIN jobs j ON j.id = e.job_id WHERE "
                   "e.org_id <> j.org_id") == 0);
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE assignee NOT LIKE 'org' || org_id || '-%'") ==
          0);
    for (auto* w : workers) w->signal(SIGTERM);
    for (auto* w : workers) CHECK(w->wait_for(15s) == std::optional<int>(0));
    coordinator.signal(SIGTERM);
    CHECK(coordinator.wait_for(15s) == std::optional<int>(0));
    const auto report = c.check();
    for (const auto& v : report.violations) UNSCOPED_INFO(v.evidence);
    CHECK(report.ok());
}

TEST_CASE("a Python worker speaking JSON claims, renews and completes a job", "[e2e][json]") {
    Cluster c;
    const auto job = c.enqueue(1, 1).at(0);
    c.start_coordinator({"--lease-ms", "3000", "--heartbeat-ms", "1000"});
    Process py({"/usr/bin/python3", std::string(ACLAIM_SOURCE_DIR) + "/tests/e2e/py_worker.py",
                "--connect", c.endpoint(), "--org", "1", "--id", "py-reviewer"},
               {}, c.log_dir() + "/py.log");
    INFO("logs in " << c.log_dir());
    const auto status = py.wait_for(30s);
    if (status != std::optional<int>(0)) FAIL(c.tail_logs());
    const std::string id = std::to_string(job);
    CHECK(c.text("SELECT state FROM jobs WHERE id = " + id) == "completed");
    CHECK(c.text("SELECT assignee FROM jobs WHERE id = " + id) == "py-reviewer");
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'completed' AND worker = "
                   "'py-reviewer'") == 1);
}

TEST_CASE("after SIGTERM a COMPLETE sent during the drain is answered and the job completed",
          "[e2e][drain]") {
    Cluster c;
    const auto job = c.enqueue(1, 1).at(0);
    auto& coordinator = c.start_coordinator({"--drain-timeout-ms", "5000"});
    INFO("logs in " << c.log_dir());
    zmq::context_t context;
    RawWorker w(context, c.endpoint(), proto::Encoding::Json);
    w.expect<proto::Welcome>(w.request(proto::Hello{0, "drainer", 1}));
    const auto assigned = w.expect<proto::Assigned>(w.request(proto::Claim{0, 1, 0}));
    REQUIRE(assigned.jobs.size() == 1);
    const auto held = assigned.jobs[0];
    REQUIRE(held.job_id == job);
    const auto parked = w.request(proto::Claim{0, 1, 30000});
    // The claim is parked once a RENEW sent after it has been answered: one connection's
    // requests are read in order.
    w.expect<proto::LeaseMsg>(w.request(proto::Renew{0, held.job_id, held.generation}));
    coordinator.signal(SIGTERM);
    CHECK(w.expect<proto::NoWork>(parked).reason == "draining");
    // The client's finding: this COMPLETE, sent right after the draining answer, got no reply
    // and the process exited with the job still assigned.
    const auto done = w.expect<proto::Accepted>(
        w.request(proto::Complete{0, held.job_id, held.generation, "r:drain"}));
    CHECK(done.state == "completed");
    CHECK(coordinator.wait_for(15s) == std::optional<int>(0));
    CHECK(c.text("SELECT state FROM jobs WHERE id = " + std::to_string(job)) == "completed");
}
