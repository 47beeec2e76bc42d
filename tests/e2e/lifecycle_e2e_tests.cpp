// The job lifecycle end to end, with real processes: skilled workers drain mixed queues while a
// poison job ends discarded, a running job is cancelled and a queue is paused and resumed; the
// checker proves the history afterwards.

#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/e2e/cluster.hpp"
#include "tests/pg/ctl_run.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using namespace std::chrono_literals;

namespace {
store::NewJob job(const std::string& queue, const std::string& payload, int max_attempts = 3) {
    store::NewJob j;
    j.queue = queue;
    j.payload = payload;
    j.max_attempts = max_attempts;
    return j;
}

std::vector<std::string> worker_flags(const std::string& queues, std::vector<std::string> more) {
    std::vector<std::string> flags{"--queues",        queues,   "--review-ms",   "20",
                                   "--poison",        "POISON", "--concurrency", "2",
                                   "--claim-wait-ms", "500"};
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
}
}  // namespace

TEST_CASE(
    "skilled workers drain mixed queues; a poison job is discarded, a running job "
    "cancelled, a paused queue waits",
    "[e2e][lifecycle]") {
    Cluster c;
    INFO("logs in " << c.log_dir());
    {
        store::AssignmentStore store(c.db().dsn());
        const auto now = base::SystemClock().now();
        store.enqueue(1, std::vector<store::NewJob>(15, job("electrical", "wiring")), now);
        store.enqueue(1, std::vector<store::NewJob>(15, job("plumbing", "pipes")), now);
        store.enqueue(1, std::vector<store::NewJob>(10, job("default", "general")), now);
        store.enqueue(1, {job("electrical", "POISON", 2)}, now);
        store.enqueue(1, {job("slow", "long review")}, now);
    }
    REQUIRE(run_ctl(c.db().dsn(), {"queue", "pause", "plumbing", "--org", "1", "--reason",
                                   "plumbing inspectors in training"})
                .code == 0);
    c.start_coordinator(kFastLeases);
    // Two electricians take the poison job in turn, and each dies of it.
    auto& e1 = c.start_worker("electrician-1", 1, worker_flags("electrical,default", {}));
    auto& e2 = c.start_worker("electrician-2", 1, worker_flags("electrical,default", {}));
    auto& plumber = c.start_worker("plumber", 1, worker_flags("plumbing", {}));
    auto& slowpoke = c.start_worker(
        "slowpoke", 1, {"--queues", "slow", "--review-ms", "600000", "--concurrency", "1"});

    REQUIRE(eventually(
        [&] { return c.text("SELECT state FROM jobs WHERE queue = 'slow'") == "assigned"; }, 20s));
    const auto slow_job = c.scalar("SELECT id FROM jobs WHERE queue = 'slow'");
    const auto cancel = run_ctl(c.db().dsn(), {"cancel", std::to_string(slow_job), "--reason",
                                               "order withdrawn", "--by", "ops-test"});
    REQUIRE(cancel.code == 0);
    CHECK(cancel.out.find("held by slowpoke") != std::string::npos);
    CHECK(c.text("SELECT state FROM jobs WHERE queue = 'slow'") == "cancelled");
    // The holder is told at once: the coordinator pushes REVOKED cancelled (a push it could not
    // deliver is logged with outcome=undeliverable) and the holder stops its review on it.
    const auto job = "org=1 job=" + std::to_string(slow_job) + " ";
    std::string pushed;
    std::string heard;
    REQUIRE(eventually(
        [&] {
            pushed = line_with(c.log_dir() + "/coordinator-1.log", "revoke " + job);
            heard = line_with(c.log_dir() + "/slowpoke.log", "revoked " + job);
            return !pushed.empty() && !heard.empty();
        },
        10s));
    CHECK_THAT(pushed, Catch::Contains("outcome=pushed"));
    CHECK_THAT(heard, Catch::Contains("reason=cancelled"));
    CHECK_THAT(heard, Catch::Contains("review stopped"));

    // The poison job kills both electricians, then is discarded after its two attempts.
    REQUIRE(eventually(
        [&] { return c.text("SELECT state FROM jobs WHERE payload = 'POISON'") == "discarded"; },
        40s));
    CHECK(e1.wait_for(5s).value_or(0) == 128 + SIGKILL);
    CHECK(e2.wait_for(5s).value_or(0) == 128 + SIGKILL);
    auto& e3 = c.start_worker("electrician-3", 1, worker_flags("electrical,default", {}));
    REQUIRE(eventually(
        [&] {
            return c.scalar(
                       "SELECT count(*) FROM jobs WHERE queue IN ('electrical', 'default') "
                       "AND state = 'completed'") == 25;
        },
        60s));
    // Plumbing was paused the whole time: its worker was connected and asking, and got nothing.
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE queue = 'plumbing' AND state = 'pending'") ==
          15);
    REQUIRE(run_ctl(c.db().dsn(), {"queue", "resume", "plumbing", "--org", "1"}).code == 0);
    REQUIRE(eventually(
        [&] {
            return c.scalar(
                       "SELECT count(*) FROM jobs WHERE queue = 'plumbing' AND state = "
                       "'completed'") == 15;
        },
        60s));

    // Every job went to a worker with its skill.
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed' AND queue = 'plumbing' "
                   "AND assignee <> 'plumber'") == 0);
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed' AND queue <> 'plumbing' "
                   "AND assignee NOT LIKE 'electrician-%'") == 0);
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'completed' AND job_id = " +
                   std::to_string(slow_job)) == 0);
    const auto inspect = run_ctl(
        c.db().dsn(),
        {"inspect", std::to_string(c.scalar("SELECT id FROM jobs WHERE payload = 'POISON'"))});
    CHECK(inspect.out.find("discarded") != std::string::npos);
    const auto report = c.check();
    check_clean(report);
    e3.signal(SIGTERM);
    plumber.signal(SIGTERM);
    slowpoke.signal(SIGTERM);
}
