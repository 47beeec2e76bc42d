// Progress and checkpoints end to end (protocol 1.5), with real processes: a reviewer that saves
// a checkpoint after each tenth of its review is SIGKILLed at 60%, its lease is reclaimed, and
// the next reviewer gets the checkpoint in ASSIGNED and does only the rest of the review.

#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/e2e/cluster.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using namespace std::chrono_literals;

namespace {

/// A review of 10 steps of 400 ms, a checkpoint after each but the last.
std::vector<std::string> reviewer(std::vector<std::string> more = {}) {
    std::vector<std::string> flags{"--review-ms",     "4000", "--checkpoint-steps", "10",
                                   "--claim-wait-ms", "500"};
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
}

}  // namespace

TEST_CASE("a reviewer SIGKILLed at 60% is succeeded by one that resumes from its checkpoint",
          "[e2e][progress]") {
    Cluster c;
    INFO("logs in " << c.log_dir());
    c.start_coordinator(kFastLeases);
    const auto job = c.enqueue(1, 1).at(0);
    const auto id = std::to_string(job);
    auto& first = c.start_worker("reviewer-a", 1, reviewer());

    // The first reviewer's checkpoints arrive one by one; it dies once 60% is saved.
    REQUIRE(eventually(
        [&] { return c.scalar("SELECT coalesce(max(percent), 0) FROM job_progress") >= 60; }, 30s));
    first.signal(SIGKILL);
    REQUIRE(first.wait_for(5s).value_or(0) == 128 + SIGKILL);
    const long saved_percent = c.scalar("SELECT percent FROM job_progress WHERE job_id = " + id);
    const std::string saved = c.text("SELECT checkpoint FROM job_progress WHERE job_id = " + id);
    const long saved_step = saved_percent / 10;
    INFO("checkpoint at the kill: " << saved << " (" << saved_percent << "%)");
    CHECK(saved_percent >= 60);
    CHECK(saved == "step=" + std::to_string(saved_step));
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE job_id = " + id +
                   " AND kind = 'checkpoint' AND generation = 1") == saved_step);

    // The reaper takes the lease back; the next reviewer resumes where the first stopped.
    auto& second = c.start_worker("reviewer-b", 1, reviewer({"--jobs", "1"}));
    REQUIRE(second.wait_for(60s).value_or(-1) == 0);
    INFO(c.tail_logs());
    CHECK(c.text("SELECT state || ' ' || generation || ' ' || assignee FROM jobs WHERE id = " +
                 id) == "completed 2 reviewer-b");
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE job_id = " + id +
                   " AND kind = 'reclaimed' AND generation = 1") == 1);
    const auto resumed = line_with(c.log_dir() + "/reviewer-b.log", "resume org=1 job=" + id);
    REQUIRE_FALSE(resumed.empty());
    CHECK_THAT(resumed, Catch::Contains("checkpoint='" + saved + "'"));
    CHECK_THAT(resumed, Catch::Contains("saved_by_generation=1"));
    // Only the rest of the review was done: the second reviewer saved the steps after the one it
    // resumed from, and none before.
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE job_id = " + id +
                   " AND kind = 'checkpoint' AND generation = 2") == 9 - saved_step);
    if (saved_step < 9) {
        CHECK(c.scalar("SELECT min(split_part(detail, '%', 1)::int) FROM job_events "
                       "WHERE job_id = " +
                       id + " AND kind = 'checkpoint' AND generation = 2") ==
              (saved_step + 1) * 10);
        CHECK(c.text("SELECT generation || ' ' || checkpoint FROM job_progress WHERE job_id = " +
                     id) == "2 step=9");
    }

    const auto report = c.check();
    INFO(report.violations.size() << " violations");
    CHECK(report.ok());
}
