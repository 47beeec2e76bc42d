// Workflows end to end, with real processes: a producer enqueues site visits that fan out into
// three inspections and fan in to an approval (and one approval through `aclaimctl enqueue
// --depends-on`), reviewers drain them, and no approval is claimed before its three inspections
// completed; the checker proves the history afterwards.

#include <signal.h>

#include <catch2/catch.hpp>

#include "tests/e2e/cluster.hpp"
#include "tests/pg/ctl_run.hpp"
#include "tests/support/new_jobs.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using namespace std::chrono_literals;

namespace {

store::NewJob job(const std::string& queue, const std::string& payload,
                  std::vector<store::JobId> depends_on = {}) {
    return workflow_job(queue, payload, std::move(depends_on));
}

}  // namespace

TEST_CASE("site visits fan out into three inspections and fan in to an approval",
          "[e2e][workflow]") {
    constexpr long kVisits = 20;
    Cluster c;
    INFO("logs in " << c.log_dir());
    store::JobId last_structural = 0;
    {
        store::AssignmentStore store(c.db().dsn());
        const auto now = base::SystemClock().now();
        for (int v = 0; v < kVisits; ++v) {
            const std::string visit = "visit-" + std::to_string(v);
            const auto ids = store.enqueue(
                1,
                {job("inspection", visit + " electrical"), job("inspection", visit + " plumbing"),
                 job("inspection", visit + " structural"),
                 job("approval", visit + " approval",
                     {store::job_of_this_call(1), store::job_of_this_call(2),
                      store::job_of_this_call(3)})},
                now);
            last_structural = ids[2];
        }
    }
    // One more approval from the operator's command line, waiting for the last visit's three.
    const auto ctl =
        run_ctl(c.db().dsn(),
                {"enqueue", "--org", "1", "--queue", "approval", "--new-queue", "--depends-on",
                 std::to_string(last_structural - 2) + "," + std::to_string(last_structural - 1) +
                     "," + std::to_string(last_structural),
                 "extra approval"});
    REQUIRE(ctl.code == 0);
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE state = 'waiting'") == kVisits + 1);

    c.start_coordinator({});
    auto& approver = c.start_worker(
        "approver", 1, {"--queues", "approval", "--review-ms", "5", "--concurrency", "2"});
    auto& i1 = c.start_worker(
        "inspector-1", 1, {"--queues", "inspection", "--review-ms", "20", "--concurrency", "2"});
    auto& i2 = c.start_worker(
        "inspector-2", 1, {"--queues", "inspection", "--review-ms", "20", "--concurrency", "2"});
    REQUIRE(eventually(
        [&] {
            return c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") ==
                   4 * kVisits + 1;
        },
        90s));

    // Every approval's first claim comes after the completion of each of its dependencies, in the
    // log's order, and each approval was unblocked exactly once.
    CHECK(c.scalar(R"SQL(
SELECT count(*) FROM job_dependencies d
 WHERE (SELECT min(id) FROM job_events WHERE job_id = d.job_id AND kind = 'claimed')
     < (SELECT min(id) FROM job_events WHERE job_id = d.depends_on AND kind = 'completed')
)SQL") == 0);
    CHECK(c.scalar("SELECT count(*) FROM job_dependencies") == 3 * (kVisits + 1));
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'unblocked'") == kVisits + 1);
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE queue = 'approval' AND assignee <> "
                   "'approver'") == 0);
    const auto report = c.check();
    check_clean(report);
    for (auto* w : {&approver, &i1, &i2}) w->signal(SIGTERM);
}

TEST_CASE("200 visits, 8 reviewer keys, 2 coordinators: no approval by one of its inspectors",
          "[e2e][workflow][four-eyes]") {
    constexpr int kVisits = 200;
    constexpr int kReviewers = 8;
    constexpr long kJobs = 4L * kVisits;
    Cluster c;
    INFO("logs in " << c.log_dir());
    // Identities are the CURVE keys' registered names, as deployed.
    const auto server = c.use_new_curve_keys();
    std::vector<ops::CurveKeyPair> keys;
    for (int i = 0; i < kReviewers; ++i) {
        keys.push_back(ops::make_curve_key_pair());
        c.register_key(1, "reviewer-" + std::to_string(i), keys.back().public_key);
    }
    {
        store::AssignmentStore store(c.db().dsn());
        const auto now = base::SystemClock().now();
        for (int v = 0; v < kVisits; ++v) {
            const std::string visit = "visit-" + std::to_string(v);
            const std::vector<store::JobId> inspections{
                store::job_of_this_call(1), store::job_of_this_call(2), store::job_of_this_call(3)};
            // Four eyes: the approval waits for the three and goes to none of their reviewers.
            auto approval = job("approval", visit + " approval", inspections);
            approval.exclude_completers_of = inspections;
            store.enqueue(
                1,
                {job("inspection", visit + " electrical"), job("inspection", visit + " plumbing"),
                 job("inspection", visit + " structural"), approval},
                now);
        }
    }
    const std::string second = "tcp://127.0.0.1:" + std::to_string(free_port());
    const std::vector<std::string> coordinator_flags{"--lease-ms", "1500"};
    c.start_coordinator(coordinator_flags);
    auto& doomed = c.start_coordinator_at(second, coordinator_flags);
    const std::string both = c.endpoint() + "," + second;
    std::vector<Process*> reviewers;
    for (int i = 0; i < kReviewers; ++i) {
        std::vector<std::string> flags{"--queues",
                                       "inspection,approval",
                                       "--review-ms",
                                       "20",
                                       "--review-dist",
                                       "uniform",
                                       "--concurrency",
                                       "2",
                                       "--curve-server-key=" + server.public_key,
                                       "--curve-public-key=" + keys[i].public_key,
                                       "--curve-secret-key=" + keys[i].secret_key};
        // Reviewer 0 takes one more job after its twentieth and dies holding it.
        if (i == 0) flags.insert(flags.end(), {"--crash-after", "20"});
        reviewers.push_back(&c.start_worker_at(both, "reviewer-" + std::to_string(i), 1, flags));
    }
    const auto completed = [&] {
        return c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'");
    };
    // A quarter in, one coordinator dies; its workers go on with the other.
    REQUIRE(eventually([&] { return completed() >= kJobs / 4; }, 120s));
    doomed.signal(SIGKILL);
    REQUIRE(eventually([&] { return completed() == kJobs; }, 240s));

    // The reviewer that crashed did so mid-review (SIGKILL), and the job it held was taken back.
    CHECK(reviewers[0]->wait_for(5s) == std::optional<int>(128 + SIGKILL));
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'reclaimed'") >= 1);
    // No approval was claimed before its three inspections completed, ...
    CHECK(c.scalar(R"SQL(
SELECT count(*) FROM job_dependencies d
 WHERE (SELECT min(id) FROM job_events WHERE job_id = d.job_id AND kind = 'claimed')
     < (SELECT min(id) FROM job_events WHERE job_id = d.depends_on AND kind = 'completed')
)SQL") == 0);
    // ... and none was completed by a reviewer who completed one of its inspections.
    CHECK(c.scalar(R"SQL(
SELECT count(*) FROM jobs a
  JOIN job_events ea ON ea.job_id = a.id AND ea.kind = 'completed'
 WHERE a.queue = 'approval'
   AND EXISTS (SELECT 1 FROM job_dependencies d
                 JOIN job_events ei ON ei.job_id = d.depends_on AND ei.kind = 'completed'
                WHERE d.job_id = a.id AND ei.worker = ea.worker)
)SQL") == 0);
    CHECK(c.scalar("SELECT count(DISTINCT worker) FROM job_events e JOIN jobs j ON j.id = "
                   "e.job_id WHERE j.queue = 'approval' AND e.kind = 'completed'") >= 4);
    const auto report = c.check();
    check_clean(report);
    for (auto* w : reviewers) w->signal(SIGTERM);
}
