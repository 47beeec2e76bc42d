// Schedules against a real PostgreSQL: the coordinators' schedulers enqueue each tick once
// however many run, skip and catch_up after an outage, pause and resume, the zone's arithmetic
// from PostgreSQL, and the operator's commands audited.

#include <barrier>
#include <catch2/catch.hpp>
#include <thread>

#include "common/ops/checker.hpp"
#include "common/ops/schedule_store.hpp"
#include "coordinator/db/scheduler.hpp"
#include "coordinator/http/queue_metrics.hpp"
#include "tests/support/checker_support.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using namespace std::chrono_literals;
using base::Instant;
using ops::MissedTicks;

namespace {

/// 2026-06-01T10:00:00Z, a whole minute.
constexpr Instant kStart = base::instant_from_micros(1'780'308'000'000'000);

struct Fixture {
    testing::TestDatabase db;
    base::ManualClock clock{kStart + 30s};
    std::unique_ptr<pqxx::connection> ops_conn = db.connect();
    ops::ScheduleStore ops{*ops_conn};
    coordinator::ConnectionOptions options = [this] {
        coordinator::ConnectionOptions o;
        o.dsn = db.dsn();
        o.db_deadline_ms = 10000;
        return o;
    }();
    coordinator::Metrics metrics;
    coordinator::StatementWatchdog watchdog{clock};
    coordinator::Connections connections{options, watchdog};

    ops::Schedule add(const std::string& name, const std::string& cron,
                      MissedTicks missed = MissedTicks::Skip, const std::string& zone = "UTC") {
        ops::ScheduleSpec s;
        s.org_id = 1;
        s.name = name;
        s.cron = cron;
        s.time_zone = zone;
        s.queue = "nightly";
        s.payload = "{schedule} {tick}";
        s.priority = 5;
        s.missed = missed;
        return ops.add(s, "tester", clock.now());
    }
    std::int64_t scalar(const std::string& sql) {
        pqxx::read_transaction txn(*ops_conn);
        return txn.exec1(sql)[0].as<std::int64_t>();
    }
    ops::CheckReport check() const { return testing::check_database(db.dsn()); }
};

}  // namespace

TEST_CASE("two schedulers on one clock enqueue each tick of an every-minute schedule once",
          "[schedule][coordinator]") {
    Fixture f;
    f.add("every-minute", "* * * * *");
    // Two coordinators' schedulers: each its own connection under row security, its own thread.
    coordinator::Scheduler a({}, f.connections, f.clock, f.metrics);
    coordinator::Scheduler b({}, f.connections, f.clock, f.metrics);
    constexpr int kMinutes = 10;
    std::barrier step(3);
    std::atomic<int> ticked_by_a{0};
    std::atomic<int> ticked_by_b{0};
    auto run = [&](coordinator::Scheduler& s, std::atomic<int>& ticked) {
        auto conn =
            f.connections.open("test-scheduler", coordinator::Connections::Role::RowSecurity);
        for (int m = 0; m < kMinutes; ++m) {
            step.arrive_and_wait();  // the clock has moved on a minute
            // Three passes each in the same minute: the later ones find nothing due.
            for (int i = 0; i < 3; ++i) ticked += s.pass(*conn).enqueued;
            step.arrive_and_wait();
        }
    };
    std::thread ta(run, std::ref(a), std::ref(ticked_by_a));
    std::thread tb(run, std::ref(b), std::ref(ticked_by_b));
    for (int m = 0; m < kMinutes; ++m) {
        f.clock.advance(1min);
        step.arrive_and_wait();
        step.arrive_and_wait();
    }
    ta.join();
    tb.join();
    CHECK(ticked_by_a.load() + ticked_by_b.load() == kMinutes);
    CHECK(f.metrics.schedule_jobs.load() == static_cast<std::uint64_t>(kMinutes));
    CHECK(f.scalar("SELECT count(*) FROM jobs") == kMinutes);
    CHECK(f.scalar("SELECT count(DISTINCT payload) FROM jobs WHERE queue = 'nightly' AND "
                   "priority = 5 AND state = 'pending'") == kMinutes);
    CHECK(f.scalar("SELECT count(*) FROM schedule_ticks") == kMinutes);
    CHECK(f.scalar("SELECT count(*) FROM job_events WHERE kind = 'enqueued'") == kMinutes);
    // The ticks are the ten minutes, each once.
    CHECK(f.scalar("SELECT count(DISTINCT tick_at) FROM schedule_ticks WHERE extract(second FROM "
                   "tick_at) = 0 AND tick_at > aclaim_ts(" +
                   std::to_string(base::to_micros(kStart)) + ")") == kMinutes);
    const auto s = f.ops.list(1).at(0);
    CHECK(s.last_tick == kStart + 10min);
    CHECK(s.next_tick == kStart + 11min);
    testing::check_clean(f.check());
}

TEST_CASE("after an outage, skip enqueues the latest missed tick and catch_up every one",
          "[schedule]") {
    Fixture f;
    f.add("skipper", "*/5 * * * *", MissedTicks::Skip);
    f.add("catcher", "*/5 * * * *", MissedTicks::CatchUp);
    auto conn = f.db.connect();
    ops::ScheduleStore store(*conn);
    // No scheduler ran for 11 hours and 5 minutes: 133 ticks came due (10:05 .. 21:05).
    f.clock.advance(11h + 5min);
    const auto first = store.run_due(f.clock.now());
    CHECK(first.more);  // the catch-up has 33 ticks left
    CHECK(first.enqueued == 1 + ops::kCatchUpPerPass);
    const auto second = store.run_due(f.clock.now());
    CHECK_FALSE(second.more);
    CHECK(second.enqueued == 33);
    CHECK(store.run_due(f.clock.now()).enqueued == 0);
    CHECK(f.scalar("SELECT count(*) FROM jobs WHERE payload LIKE 'skipper %'") == 1);
    CHECK(f.scalar("SELECT count(*) FROM jobs WHERE payload = 'skipper 2026-06-01T21:05:00Z'") ==
          1);
    CHECK(f.scalar("SELECT count(*) FROM jobs WHERE payload LIKE 'catcher %'") == 133);
    CHECK(f.scalar("SELECT count(DISTINCT payload) FROM jobs WHERE payload LIKE 'catcher %'") ==
          133);
    for (const auto& s : f.ops.list(1)) {
        CHECK(s.last_tick == kStart + 11h + 5min);
        CHECK(s.next_tick == kStart + 11h + 10min);
    }
    testing::check_clean(f.check());
}

TEST_CASE("a paused schedule enqueues nothing, and resumes from the next tick after now",
          "[schedule]") {
    Fixture f;
    f.add("hourly", "0 * * * *");
    auto conn = f.db.connect();
    ops::ScheduleStore store(*conn);
    f.ops.set_paused(1, "hourly", true, "tester", "maintenance", f.clock.now());
    f.clock.advance(3h);
    CHECK(store.run_due(f.clock.now()).enqueued == 0);
    const auto resumed = f.ops.set_paused(1, "hourly", false, "tester", "done", f.clock.now());
    CHECK(resumed.next_tick == kStart + 4h);  // what fell due while paused is dropped
    CHECK(store.run_due(f.clock.now()).enqueued == 0);
    f.clock.advance(1h);
    CHECK(store.run_due(f.clock.now()).enqueued == 1);
    CHECK(f.scalar("SELECT count(*) FROM jobs") == 1);
    f.ops.remove(1, "hourly", f.clock.now(), "tester", "not needed");
    f.clock.advance(2h);
    CHECK(store.run_due(f.clock.now()).enqueued == 0);
    CHECK_THROWS_AS(f.ops.remove(1, "hourly", f.clock.now(), "tester", "again"),
                    ops::UnknownSchedule);
    // Every change is in the audit log, with who and why.
    CHECK(f.scalar("SELECT count(*) FROM schedule_events WHERE actor = 'tester'") == 4);
    CHECK(f.scalar("SELECT count(*) FROM schedule_events WHERE kind = 'paused' AND detail = "
                   "'maintenance'") == 1);
    CHECK(f.scalar("SELECT count(*) FROM schedule_events WHERE kind = 'removed'") == 1);
}

TEST_CASE("schedules refuse bad input and duplicate names", "[schedule]") {
    Fixture f;
    f.add("one", "0 3 * * *");
    CHECK_THROWS_AS(f.add("one", "0 4 * * *"), ops::ScheduleExists);
    CHECK_THROWS_AS(f.add("two", "0 25 * * *"), ops::CronError);
    CHECK_THROWS_AS(f.add("two", "0 3 * * *", MissedTicks::Skip, "Mars/Olympus"),
                    std::invalid_argument);
    CHECK_THROWS_AS(f.add("two", "0 0 30 2 *"), ops::CronError);
    CHECK(f.scalar("SELECT count(*) FROM schedules") == 1);
}

TEST_CASE("a schedule in Europe/Berlin ticks at its wall time across the shifts",
          "[schedule][dst]") {
    Fixture f;
    // 2026-03-28T12:00Z; the spring-forward shift is the next night, at 01:00 UTC.
    f.clock.set(base::instant_from_micros(1'774'699'200'000'000));
    f.add("berlin", "30 2 * * *", MissedTicks::Skip, "Europe/Berlin");
    f.add("nine", "0 9 * * *", MissedTicks::Skip, "Europe/Berlin");
    auto next = [&](const char* name) {
        for (const auto& s : f.ops.list(1))
            if (s.name == name) return ops::iso_utc(s.next_tick);
        return std::string();
    };
    auto conn = f.db.connect();
    ops::ScheduleStore store(*conn);
    CHECK(next("berlin") == "2026-03-29T01:00:00Z");  // 02:30 does not exist: at the shift
    CHECK(next("nine") == "2026-03-29T07:00:00Z");    // 09:00 CEST
    f.clock.advance(14h);
    CHECK(store.run_due(f.clock.now()).enqueued == 1);
    CHECK(next("berlin") == "2026-03-30T00:30:00Z");  // 02:30 CEST

    // 2026-10-25T00:10Z, 02:10 CEST; at 01:00 UTC the clock goes back to 02:00 CET.
    f.clock.set(base::instant_from_micros(1'792'887'000'000'000));
    f.add("half-hourly", "*/30 * * * *", MissedTicks::Skip, "Europe/Berlin");
    std::vector<std::string> ticks{next("half-hourly")};
    for (int i = 0; i < 3; ++i) {
        f.clock.advance(30min);
        REQUIRE(store.run_due(f.clock.now()).enqueued >= 1);
        ticks.push_back(next("half-hourly"));
    }
    // Every 30 real minutes through both passes of 02:xx.
    CHECK(ticks == std::vector<std::string>{"2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z",
                                            "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"});
    CHECK(next("berlin") == "2026-10-26T01:30:00Z");  // 02:30 CET, once on the 25th (00:30Z)
}

TEST_CASE("schedules and their ticks are scoped to the organization under row security",
          "[schedule][security]") {
    Fixture f;
    f.add("mine", "* * * * *");
    f.clock.advance(1min);
    auto conn = f.connections.open("test-rls", coordinator::Connections::Role::RowSecurity);
    REQUIRE(ops::ScheduleStore(*conn).run_due(f.clock.now()).enqueued == 1);
    auto visible = [&](const std::string& org, const char* table) {
        pqxx::work txn(*conn);
        txn.exec_params("SELECT set_config('aclaim.org_id', $1, true)", org);
        return txn.exec1(std::string("SELECT count(*) FROM ") + table)[0].as<int>();
    };
    for (const char* table : {"schedules", "schedule_ticks", "schedule_events"}) {
        INFO(table);
        CHECK(visible("1", table) == 1);
        CHECK(visible("2", table) == 0);
    }
    // The coordinator role advances schedules but does not add them: that is the operator's.
    pqxx::work txn(*conn);
    txn.exec_params("SELECT set_config('aclaim.org_id', '1', true)");
    CHECK_THROWS_AS(txn.exec("DELETE FROM schedules"), pqxx::insufficient_privilege);
}

TEST_CASE("a schedule the database refuses does not hold up the others", "[schedule]") {
    Fixture f;
    f.add("broken", "* * * * *");
    f.add("fine", "* * * * *");
    {
        pqxx::work txn(*f.ops_conn);
        txn.exec("UPDATE schedules SET cron = 'not a cron at all' WHERE name = 'broken'");
        txn.commit();
    }
    f.clock.advance(1min);
    auto conn = f.connections.open("test-scheduler", coordinator::Connections::Role::RowSecurity);
    ops::ScheduleStore store(*conn);
    const auto pass = store.run_due(f.clock.now());
    CHECK(pass.enqueued == 1);
    CHECK(pass.failed == 1);
    CHECK_THAT(pass.error, Catch::Contains("minute field"));
    CHECK(f.scalar("SELECT count(*) FROM jobs WHERE payload LIKE 'fine %'") == 1);
    // It stays due, and is tried again at the next pass.
    CHECK(store.run_due(f.clock.now()).failed == 1);
}

TEST_CASE("/metrics shows each schedule's last and next tick", "[schedule][http]") {
    Fixture f;
    f.add("every", "* * * * *");
    f.add("held", "0 3 * * *");
    f.ops.set_paused(1, "held", true, "tester", "not yet", f.clock.now());
    f.clock.advance(1min);
    REQUIRE(f.ops.run_due(f.clock.now()).enqueued == 1);
    coordinator::QueueMetrics metrics(f.db.dsn(), f.clock);
    const auto text = metrics.render();
    const auto seconds = [](Instant t) {
        return std::to_string(
            std::chrono::floor<std::chrono::seconds>(t).time_since_epoch().count());
    };
    for (const auto& line : std::vector<std::string>{
             "aclaim_schedule_stats_up 1\n",
             "aclaim_schedule_last_tick_seconds{org=\"1\",schedule=\"every\"} " +
                 seconds(kStart + 1min) + "\n",
             "aclaim_schedule_next_tick_seconds{org=\"1\",schedule=\"every\"} " +
                 seconds(kStart + 2min) + "\n",
             std::string("aclaim_schedule_paused{org=\"1\",schedule=\"held\"} 1\n"),
             std::string("aclaim_schedule_series_dropped 0\n")}) {
        INFO(line);
        CHECK(text.find(line) != std::string::npos);
    }
    // A paused schedule has no next tick, and one never ticked no last.
    CHECK(text.find("aclaim_schedule_next_tick_seconds{org=\"1\",schedule=\"held\"}") ==
          std::string::npos);
    CHECK(text.find("aclaim_schedule_last_tick_seconds{org=\"1\",schedule=\"held\"}") ==
          std::string::npos);
}
