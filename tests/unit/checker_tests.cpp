// The checker must catch every invariant broken in a corrupted history, and pass a clean one.

#include <catch2/catch.hpp>

#include "common/ops/checker.hpp"
#include "tests/support/checker_support.hpp"

using namespace aclaim::base;
using namespace aclaim::ops;
using namespace aclaim::store;
using aclaim::testing::caught;

namespace {

/// One job, reclaimed once and then completed by its second claim: a clean history.
History clean() {
    History h;
    h.jobs.push_back({7, 1, "completed", 2, std::string("ref-2"), std::nullopt});
    std::int64_t id = 0;
    auto ev = [&](const char* kind, Generation g, const char* worker, Micros at) {
        h.events.push_back({++id, 7, 1, g, kind, worker, instant_from_micros(at), ""});
    };
    ev("enqueued", 0, "", 100);
    ev("claimed", 1, "a", 200);
    ev("rejected", 1, "a", 250);
    ev("reclaimed", 1, "a", 300);
    ev("claimed", 2, "b", 400);
    ev("completed", 2, "b", 500);
    h.results.push_back({7, 1, 2, "ref-2"});
    return h;
}

}  // namespace

TEST_CASE("a clean history passes", "[checker]") {
    const auto r = check(clean());
    CHECK(r.ok());
    CHECK(r.accepted_completions == 1);
    CHECK(r.reclaims == 1);
    CHECK(r.rejections == 1);
}

TEST_CASE("each corrupted history is caught", "[checker]") {
    SECTION("two accepted completions") {
        auto h = clean();
        h.events.push_back({99, 7, 1, 2, "completed", "b", instant_from_micros(600), ""});
        CHECK(caught(h, Invariant::SingleCompletion));
    }
    SECTION("a completion by a stale generation") {
        auto h = clean();
        h.events[5].generation = 1;
        CHECK(caught(h, Invariant::CompletionIsCurrent));
    }
    SECTION("a completion after its own lease was reclaimed, before any new claim") {
        // The late completion of a stalled worker carries the latest generation; only the
        // reclaim before it in the log shows that the worker no longer held the job.
        auto h = clean();
        h.events.resize(4);  // enqueued, claimed 1, rejected 1, reclaimed 1
        h.events.push_back({5, 7, 1, 1, "completed", "a", instant_from_micros(450), ""});
        h.jobs[0].generation = 1;
        h.jobs[0].result_ref = "ref-1";
        h.results[0] = {7, 1, 1, "ref-1"};
        const auto r = check(h);
        REQUIRE(r.violations.size() == 1);
        CHECK(r.violations[0].invariant == Invariant::CompletionIsCurrent);
        CHECK_THAT(r.violations[0].evidence, Catch::Contains("had already ended"));
    }
    SECTION("checkpoints: of the holder pass; stale or after the lease ended are caught") {
        auto h = clean();
        // Saved by generation 1 while it held the job, and by generation 2 after the reclaim.
        h.events.insert(h.events.begin() + 2,
                        {20, 7, 1, 1, "checkpoint", "a", instant_from_micros(220), "60%"});
        h.events.insert(h.events.begin() + 6,
                        {21, 7, 1, 2, "checkpoint", "b", instant_from_micros(450), "90%"});
        CHECK(check(h).ok());
        auto stale = h;
        stale.events[6].generation = 1;
        CHECK(caught(stale, Invariant::CheckpointIsCurrent));
        auto late = clean();
        // After the reclaim of generation 1 and before the next claim.
        late.events.insert(late.events.begin() + 4,
                           {22, 7, 1, 1, "checkpoint", "a", instant_from_micros(350), "70%"});
        const auto r = check(late);
        REQUIRE(r.violations.size() == 1);
        CHECK(r.violations[0].invariant == Invariant::CheckpointIsCurrent);
        CHECK_THAT(r.violations[0].evidence, Catch::Contains("had already ended"));
    }
    SECTION("parks: finished once by the callback pass; a second or stale outcome is caught") {
        // Generation 2 parks the job and the outside system completes it.
        auto h = clean();
        h.events.insert(h.events.begin() + 5,
                        {30, 7, 1, 2, "parked", "b", instant_from_micros(450), "until ..."});
        h.events[6].worker = "callback";
        CHECK(check(h).ok());
        auto twice = h;
        twice.jobs[0].state = "failed";
        twice.events.push_back({31, 7, 1, 2, "failed", "callback", instant_from_micros(600), ""});
        CHECK(caught(twice, Invariant::ParkFinishedOnce));
        auto stale = h;
        stale.events[6].generation = 1;  // the outcome of a park that was not this generation's
        CHECK(caught(stale, Invariant::ParkFinishedOnce));
        auto unheld = clean();
        // Parked by generation 1 after its lease was reclaimed.
        unheld.events.insert(unheld.events.begin() + 4,
                             {32, 7, 1, 1, "parked", "a", instant_from_micros(350), ""});
        CHECK(caught(unheld, Invariant::ParkFinishedOnce));
    }
    SECTION("a completion after its lease was released") {
        auto h = clean();
        h.events[5].kind = "released";
        h.events.push_back({7, 7, 1, 2, "completed", "b", instant_from_micros(600), ""});
        CHECK(caught(h, Invariant::CompletionIsCurrent));
    }
    SECTION("a generation that does not increase") {
        auto h = clean();
        h.events[4].generation = 1;
        CHECK(caught(h, Invariant::GenerationsIncrease));
    }
    SECTION("a claim while the previous lease was live") {
        auto h = clean();
        h.events.erase(h.events.begin() + 3);  // drop the reclaim
        CHECK(caught(h, Invariant::LeasesDisjoint));
    }
    SECTION("a job row that disappeared") {
        auto h = clean();
        h.jobs.clear();
        CHECK(caught(h, Invariant::NothingLost));
    }
    SECTION("a job without its enqueue in the log") {
        auto h = clean();
        h.events.erase(h.events.begin());
        CHECK(caught(h, Invariant::NothingLost));
    }
    SECTION("a quarantined job without a reason") {
        auto h = clean();
        h.jobs[0].state = "quarantined";
        CHECK(caught(h, Invariant::NothingLost));
    }
    SECTION("a completed job whose result is missing or disagrees") {
        auto h = clean();
        h.results[0].result_ref = "other";
        CHECK(caught(h, Invariant::ResultMatchesRow));
        h.results.clear();
        CHECK(caught(h, Invariant::ResultMatchesRow));
    }
    SECTION("a result published for a job still assigned") {
        auto h = clean();
        h.jobs[0].state = "assigned";
        CHECK(caught(h, Invariant::ResultMatchesRow));
    }
    SECTION("an event in another organization") {
        auto h = clean();
        h.events[2].org_id = 2;
        CHECK(caught(h, Invariant::SameOrganization));
    }
}

TEST_CASE("the lifecycle invariants catch what the lifecycle forbids", "[checker][lifecycle]") {
    // Job 8 of queue q: scheduled for later, came due, claimed; the queue is limited to one lease.
    auto lifecycle = [] {
        History h;
        h.jobs.push_back({8, 1, "assigned", 1, std::nullopt, std::nullopt, "q"});
        h.jobs.push_back({9, 1, "pending", 0, std::nullopt, std::nullopt, "q"});
        h.events.push_back({1, 8, 1, 0, "enqueued", "", instant_from_micros(100),
                            "queue q; run at 2026-12-01 00:00:00+00"});
        h.events.push_back({2, 9, 1, 0, "enqueued", "", instant_from_micros(100), "queue q"});
        h.events.push_back({3, 8, 1, 0, "due", "", instant_from_micros(150), ""});
        h.events.push_back({4, 8, 1, 1, "claimed", "a", instant_from_micros(200), ""});
        h.queue_events.push_back({1, "q", "configured", instant_from_micros(50), "max_assigned=1"});
        return h;
    };
    CHECK(check(lifecycle()).ok());
    SECTION("a claim before the job came due") {
        auto h = lifecycle();
        h.events.erase(h.events.begin() + 2);
        CHECK(caught(h, Invariant::ClaimAfterRunAt));
    }
    SECTION("a claim while the queue was paused") {
        auto h = lifecycle();
        h.queue_events.push_back({1, "q", "paused", instant_from_micros(180), "ops"});
        CHECK(caught(h, Invariant::PausedQueueIdle));
    }
    SECTION("a claim just before a resume is within the tolerance") {
        auto h = lifecycle();
        h.queue_events.push_back({1, "q", "paused", instant_from_micros(120), "ops"});
        h.queue_events.push_back({1, "q", "resumed", instant_from_micros(300), "ops"});
        CHECK_FALSE(caught(h, Invariant::PausedQueueIdle));
    }
    SECTION("a second lease out of a queue limited to one") {
        auto h = lifecycle();
        h.jobs[1].state = "assigned";
        h.events.push_back({5, 9, 1, 1, "claimed", "b", instant_from_micros(250), ""});
        CHECK(caught(h, Invariant::LimitRespected));
    }
    SECTION("a completion after the job was cancelled") {
        auto h = lifecycle();
        h.events.push_back(
            {5, 8, 1, 1, "cancelled", "ops", instant_from_micros(250), "was assigned"});
        h.events.push_back({6, 8, 1, 1, "completed", "a", instant_from_micros(260), "ref"});
        CHECK(caught(h, Invariant::EndedStaysEnded));
    }
    SECTION("a claim after discarding, unless an operator retried it") {
        auto h = lifecycle();
        h.events.push_back({5, 8, 1, 1, "discarded", "a", instant_from_micros(250), ""});
        auto revived = h;
        h.events.push_back({6, 8, 1, 2, "claimed", "b", instant_from_micros(260), ""});
        CHECK(caught(h, Invariant::EndedStaysEnded));
        revived.events.push_back({6, 8, 1, 1, "retried", "ops", instant_from_micros(255), ""});
        revived.events.push_back({7, 8, 1, 2, "claimed", "b", instant_from_micros(260), ""});
        CHECK_FALSE(caught(revived, Invariant::EndedStaysEnded));
    }
}

TEST_CASE("the checker catches a schedule tick enqueued twice", "[checker][schedule]") {
    const Instant t0 = instant_from_micros(1'780'308'000'000'000);
    History h;
    h.schedule_ticks = {{1, 7, t0, 10}, {1, 7, t0 + std::chrono::minutes(1), 11}, {1, 8, t0, 12}};
    CHECK_FALSE(caught(h, Invariant::ScheduleTickOnce));
    h.schedule_ticks.push_back({1, 7, t0, 13});
    CHECK(caught(h, Invariant::ScheduleTickOnce));
}

TEST_CASE("rate_respected replays each rate-limited queue's bucket over its claims",
          "[checker][rate]") {
    // Queue r limited to one claim a second, one at a time, from 50 us; three jobs claimed.
    auto rated = [](Micros second, Micros third) {
        History h;
        for (JobId j = 1; j <= 3; ++j) {
            h.jobs.push_back({j, 1, "assigned", 1, std::nullopt, std::nullopt, "r"});
            h.events.push_back({j, j, 1, 0, "enqueued", "", instant_from_micros(10), "queue r"});
        }
        h.queue_events.push_back(
            {1, "r", "configured", instant_from_micros(50), "max_attempts=3, rate=1, burst=1"});
        h.events.push_back({4, 1, 1, 1, "claimed", "a", instant_from_micros(100), ""});
        h.events.push_back({5, 2, 1, 1, "claimed", "b", instant_from_micros(second), ""});
        h.events.push_back({6, 3, 1, 1, "claimed", "c", instant_from_micros(third), ""});
        return h;
    };
    CHECK(check(rated(1'000'100, 2'000'100)).ok());
    CHECK(caught(rated(1'000'099, 2'000'100), Invariant::RateRespected));  // 1 us short
    // A burst of two: the first two may go at once, the third waits for a token.
    auto burst = rated(100, 1'000'100);
    burst.queue_events[0].detail = "rate=1, burst=2";
    CHECK_FALSE(caught(burst, Invariant::RateRespected));
    auto early = rated(100, 1'000'000);
    early.queue_events[0].detail = "rate=1, burst=2";
    CHECK(caught(early, Invariant::RateRespected));
    // A larger burst set later keeps the tokens the bucket holds: it does not fill it.
    auto raised = rated(100, 2'000'100);
    raised.queue_events.push_back({1, "r", "configured", instant_from_micros(60), "burst=2"});
    CHECK(caught(raised, Invariant::RateRespected));
    // The limit removed: anything goes.
    auto removed = rated(100, 100);
    removed.queue_events.push_back({1, "r", "configured", instant_from_micros(60), "rate=0"});
    CHECK(check(removed).ok());
}

TEST_CASE("aging_bound_kept: no younger job of an aged queue is claimed past an older one's bound",
          "[checker][aging]") {
    // Queue q aged one priority per 10 s. Job 1 (priority 0) waits from 0; job 2 (priority 5) is
    // enqueued at 1 s and claimed at `claimed_at`; job 1 is claimed at 200 s.
    auto scene = [](Micros claimed_at, int k_priority) {
        History h;
        h.jobs.push_back({1, 1, "assigned", 1, std::nullopt, std::nullopt, "q"});
        h.jobs.push_back({2, 1, "assigned", 1, std::nullopt, std::nullopt, "q"});
        h.priorities[1] = {5, 0};
        h.priorities[2] = {k_priority, std::nullopt};
        h.queue_events.push_back({1, "q", "configured", instant_from_micros(0), "aging=10000ms"});
        h.events.push_back({1, 1, 1, 0, "enqueued", "", instant_from_micros(0), "queue q"});
        h.events.push_back({2, 2, 1, 0, "enqueued", "", instant_from_micros(1'000'000), "queue q"});
        h.events.push_back({3, 2, 1, 1, "claimed", "a", instant_from_micros(claimed_at), ""});
        h.events.push_back({4, 1, 1, 1, "claimed", "b", instant_from_micros(200'000'000), ""});
        return h;
    };
    // The bound for job 1 behind priority 5: 5 x 10 s + the 10 s tolerance.
    CHECK(check(scene(60'000'000, 5)).ok());
    CHECK(caught(scene(60'000'001, 5), Invariant::AgingBoundKept));
    // Behind priority 7 the bound is 20 s longer.
    CHECK(check(scene(80'000'000, 7)).ok());
    // Not aged: nothing is promised.
    auto plain = scene(150'000'000, 5);
    plain.queue_events.clear();
    CHECK(check(plain).ok());
    // Aging removed before the claim.
    auto removed = scene(150'000'000, 5);
    removed.queue_events.push_back({1, "q", "configured", instant_from_micros(5), "aging=0ms"});
    CHECK(check(removed).ok());
    // The older job claimed with it (SKIP LOCKED passed it over): not a violation.
    auto together = scene(150'000'000, 5);
    together.events[3].at = instant_from_micros(155'000'000);
    CHECK(check(together).ok());
}

TEST_CASE("excluded_never_completed: no job is completed by a reviewer it excludes",
          "[checker][exclusions]") {
    // Job 7 (clean(): completed by b at generation 2); job 8, completed by c, is a job 7 names.
    auto h = clean();
    h.jobs.push_back({8, 1, "completed", 1, std::string("ref-8"), std::nullopt});
    h.events.push_back({10, 8, 1, 0, "enqueued", "", instant_from_micros(50), ""});
    h.events.push_back({11, 8, 1, 1, "claimed", "c", instant_from_micros(60), ""});
    h.events.push_back({12, 8, 1, 1, "completed", "c", instant_from_micros(70), ""});
    h.results.push_back({8, 1, 1, "ref-8"});

    SECTION("exclusions that the history respects pass") {
        h.exclusions.push_back({7, "a", 0});  // a claimed job 7 once but never completed it
        h.exclusions.push_back({7, "", 8});   // job 8 was completed by c, not b
        CHECK(check(h).ok());
    }
    SECTION("a completion by a reviewer named") {
        h.exclusions.push_back({7, "b", 0});
        CHECK(caught(h, Invariant::ExcludedNeverCompleted));
    }
    SECTION("a completion by the reviewer who completed a job named") {
        h.events[7].worker = "b";  // job 8's claim and completion, by b as well
        h.events[8].worker = "b";
        h.exclusions.push_back({7, "", 8});
        const auto r = check(h);
        REQUIRE(r.violations.size() == 1);
        CHECK(r.violations[0].invariant == Invariant::ExcludedNeverCompleted);
        CHECK(r.violations[0].job_id == 7);
    }
}
