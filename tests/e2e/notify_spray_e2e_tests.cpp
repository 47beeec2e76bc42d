// Forged revocations (docs/security.md, "Notifications wake, never decide"), end to end with
// real processes: reviewers of two organizations hold jobs that allow one attempt each, while a
// login with no grants sprays pg_notify on every channel the coordinator LISTENs on, several
// times a second, over guessed job ids, generations and the real worker names. A reviewer that
// believed a forged REVOKED would stop its review and its job would be discarded at lease expiry;
// instead every job is completed by its first holder, nothing is reclaimed or discarded, and
// /metrics counts the forgeries.

#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/cluster.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using namespace std::chrono_literals;

namespace {

constexpr long kJobsPerOrg = 6;
const std::vector<std::string> kWorkers{"w1a", "w1b", "w2a", "w2b"};

double sample(int port, const std::string& series) {
    httplib::Client client("127.0.0.1", port);
    auto res = client.Get("/metrics");
    if (!res || res->status != 200) return -1;
    std::istringstream lines(res->body);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    }
    return -1;
}

std::size_t lines_with(const std::string& path, const std::string& needle) {
    std::ifstream in(path);
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
    return n;
}

}  // namespace

TEST_CASE("a spray of forged notifications from a login with no grants discards no job",
          "[e2e][notify][security]") {
    Cluster c;
    INFO("logs in " << c.log_dir());
    {
        store::AssignmentStore store(c.db().dsn());
        const auto now = base::SystemClock().now();
        for (store::OrgId org : {1, 2}) {
            std::vector<store::NewJob> jobs;
            for (int i = 0; i < kJobsPerOrg; ++i)
                jobs.push_back({0, "review-" + std::to_string(i), 1});
            store.enqueue(org, jobs, now);
        }
    }
    const int http_port = free_port();
    c.start_coordinator({"--lease-ms", "1500", "--heartbeat-ms", "500", "--reap-interval-ms", "100",
                         "--http-bind", "127.0.0.1:" + std::to_string(http_port)});
    for (const auto& name : kWorkers) {
        c.start_worker(name, name[1] == '1' ? 1 : 2,
                       {"--review-ms", "1500", "--concurrency", "1", "--claim-wait-ms", "500"});
    }
    REQUIRE(eventually(
        [&] {
            return c.scalar("SELECT count(*) FROM jobs WHERE state = 'assigned'") ==
                   static_cast<long>(kWorkers.size());
        },
        20s));

    TestLogin login(c.db(), "aclaim_nogrants", "e2e");
    // Four sprays a second until every job is done: each one transaction over every job id that
    // exists and some that do not, generations 1 and 2, every worker's name.
    std::atomic<bool> done{false};
    std::atomic<long> revokes_sent{0};
    std::exception_ptr failed;
    std::thread sprayer([&] {
        try {
            pqxx::connection conn(login.dsn);
            while (!done.load()) {
                pqxx::work txn(conn);
                const auto n = txn.exec1(
                                      "SELECT count(pg_notify('aclaim_revoke', org || ':' || job "
                                      "|| ':' || g || "
                                      "':cancelled:' || w)) FROM generate_series(1, 2) org, "
                                      "generate_series(1, 16) job, generate_series(1, 2) g, "
                                      "unnest(ARRAY['w1a', 'w1b', 'w2a', 'w2b']) w")[0]
                                   .as<long>();
                txn.exec(
                    "SELECT pg_notify('aclaim_jobs', p) FROM unnest(ARRAY['1', '2', "
                    "'1:default', 'x', '']) p");
                txn.exec(
                    "SELECT pg_notify('aclaim_schedule', p) FROM unnest(ARRAY['0', "
                    "'soon']) p");
                txn.commit();
                revokes_sent += n;
                std::this_thread::sleep_for(250ms);
            }
        } catch (...) {
            failed = std::current_exception();
        }
    });
    const bool all_done = eventually(
        [&] {
            return c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") ==
                   2 * kJobsPerOrg;
        },
        90s);
    done = true;
    sprayer.join();
    if (failed) std::rethrow_exception(failed);
    INFO(c.tail_logs());
    CHECK(all_done);
    CHECK(revokes_sent.load() > 0);

    // Every job completed on its one attempt, by the worker that first claimed it.
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE state <> 'completed'") == 0);
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE generation <> 1") == 0);
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind IN ('reclaimed', 'discarded', "
                   "'cancelled', 'released')") == 0);
    for (const auto& name : kWorkers) {
        INFO(name);
        CHECK(lines_with(c.log_dir() + "/" + name + ".log", "revoked") == 0);
    }
    const auto report = c.check();
    CHECK(report.ok());
    // Every forged revocation was heard, checked against the rows and counted; none passed on.
    CHECK(eventually(
        [&] {
            return sample(http_port,
                          "aclaim_forged_notifications_total{channel=\"aclaim_revoke\"}") ==
                   static_cast<double>(revokes_sent.load());
        },
        20s));
    CHECK(sample(http_port, "aclaim_forged_notifications_total{channel=\"aclaim_jobs\"}") > 0);
    CHECK(sample(http_port, "aclaim_forged_notifications_total{channel=\"aclaim_schedule\"}") > 0);
    CHECK(sample(http_port, "aclaim_revoke_notifications_verified_total") == 0);
}
