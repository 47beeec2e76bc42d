// A queue's concurrency limit end to end: one reviewer with more slots than the queue's limit
// keeps every slot of the limit busy, because a lease that ends dispatches at once the claim that
// waits for its slot, instead of leaving the slot idle until the claim's wait ends.

#include <catch2/catch.hpp>

#include "tests/e2e/cluster.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using namespace std::chrono_literals;

TEST_CASE("a ten-slot reviewer on a queue limited to four keeps the four busy",
          "[e2e][limits][park]") {
    constexpr int kJobs = 120;
    constexpr int kLimit = 4;
    Cluster c;
    INFO("logs in " << c.log_dir());
    c.start_coordinator();
    c.enqueue(1, kJobs);
    Process limit({bin("aclaimctl"), "--dsn", c.db().dsn(), "queue", "set", "default", "--org", "1",
                   "--max-assigned", std::to_string(kLimit)},
                  {}, c.log_dir() + "/queue-set.log");
    REQUIRE(limit.wait_for(30s) == 0);

    // 100 ms reviews, four at a time: 40 jobs a second at best. A slot left idle until the
    // waiting claim's wait (1 s) ends makes it 4.
    auto& reviewer = c.start_worker("reviewer", 1,
                                    {"--concurrency", "10", "--review-ms", "100", "--review-dist",
                                     "fixed", "--jobs", std::to_string(kJobs)});
    REQUIRE(reviewer.wait_for(120s) == 0);
    INFO(c.tail_logs());
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == kJobs);

    // From the first claim to the last completion, by the audit log's clock.
    const long span_ms = c.scalar(
        "SELECT (extract(epoch FROM max(at) FILTER (WHERE kind = 'completed') - "
        "min(at) FILTER (WHERE kind = 'claimed')) * 1000)::bigint FROM job_events");
    const double per_second = kJobs * 1000.0 / static_cast<double>(span_ms);
    INFO(kJobs << " jobs in " << span_ms << " ms: " << per_second << " a second");
    CHECK(per_second >= 30.0);

    // Never more than the limit out at once: the checker replays every claim and every end of a
    // lease against the limit the queue had. Each job was claimed once: no lease ran out.
    const auto report = c.check();
    for (const auto& v : report.violations) UNSCOPED_INFO(v.evidence);
    CHECK(report.ok());
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'claimed'") == kJobs);
}
