#include <catch2/catch.hpp>
#include <chrono>
#include <vector>

#include "common/ops/cron.hpp"
#include "common/ops/schedule_store.hpp"

using namespace aclaim::base;
using namespace aclaim::ops;
using namespace aclaim::store;
using namespace std::chrono;
using namespace std::chrono_literals;

namespace {

Instant utc(year_month_day d, minutes m) {
    return Instant(sys_days(d).time_since_epoch() + m);
}
Wall wall(year_month_day d, minutes m) {
    return Wall{sys_days(d) + m};
}

/// Europe/Berlin's offsets in 2025 and 2026, as the tz database has them: CET (+1) but CEST (+2)
/// from 01:00 UTC on the last Sunday of March to 01:00 UTC on the last Sunday of October.
Duration berlin(Instant t) {
    const auto in = [&](year_month_day from, year_month_day to) {
        return t >= utc(from, 60min) && t < utc(to, 60min);
    };
    if (in(2025y / March / 30, 2025y / October / 26) ||
        in(2026y / March / 29, 2026y / October / 25))
        return 2h;
    return 1h;
}

Duration utc_zone(Instant /*unused*/) {
    return Duration(0);
}

std::vector<Instant> ticks(const char* cron, ZoneOffsets& zone, Instant after, int n) {
    const auto c = Cron::parse(cron);
    std::vector<Instant> out;
    for (int i = 0; i < n; ++i) {
        const auto t = next_tick(c, zone, after);
        REQUIRE(t);
        out.push_back(*t);
        after = *t;
    }
    return out;
}

}  // namespace

TEST_CASE("cron: fields take values, lists, ranges, steps and names", "[cron]") {
    const auto c = Cron::parse("5,10-20/5 */6 1-7 JAN,jul mon-FRI");
    const auto d = 2026y / January / 5;  // a Monday
    CHECK(c.matches(wall(d, 0h + 5min)));
    CHECK(c.matches(wall(d, 6h + 10min)));
    CHECK(c.matches(wall(d, 18h + 20min)));
    CHECK_FALSE(c.matches(wall(d, 18h + 12min)));  // 12 is not on the step
    CHECK_FALSE(c.matches(wall(d, 7h + 5min)));    // 7 is not a multiple of 6
    CHECK_FALSE(c.matches(wall(2026y / February / 2, 5min)));
    CHECK(c.matches(wall(2026y / July / 1, 5min)));  // a Wednesday
    // `5/10` runs from 5 to the end of the field; 7 is Sunday as 0 is.
    const auto from = Cron::parse("5/20 * * * 7");
    CHECK(from.matches(wall(2026y / January / 4, 45min)));
    CHECK_FALSE(from.matches(wall(2026y / January / 4, 40min)));
    CHECK_FALSE(from.matches(wall(2026y / January / 5, 45min)));
    CHECK(Cron::parse("@daily").matches(wall(2026y / May / 17, 0min)));
    CHECK_FALSE(Cron::parse("@hourly").matches(wall(2026y / May / 17, 1min)));
}

TEST_CASE("cron: what cannot be read is refused with the field", "[cron]") {
    for (const char* bad : {"* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *",
                            "* * * 13 *", "* * * * 8", "10-5 * * * *", "*/0 * * * *",
                            "1,,2 * * * *", "x * * * *", "* * * FOO *", "*/61 * * * *", ""}) {
        INFO(bad);
        CHECK_THROWS_AS(Cron::parse(bad), CronError);
    }
    CHECK_THROWS_WITH(Cron::parse("* 25 * * *"), Catch::Contains("hour field"));
}

TEST_CASE("cron: day of month and day of week", "[cron]") {
    // Both restricted: either matches (Vixie cron). The 13th, or any Friday.
    const auto either = Cron::parse("0 0 13 * 5");
    CHECK(either.matches(wall(2026y / May / 13, 0min)));  // a Wednesday
    CHECK(either.matches(wall(2026y / May / 15, 0min)));  // a Friday
    CHECK_FALSE(either.matches(wall(2026y / May / 14, 0min)));
    // One restricted: it alone decides, `*/2` counting as unrestricted.
    CHECK_FALSE(Cron::parse("0 0 13 * *").matches(wall(2026y / May / 15, 0min)));
    CHECK_FALSE(Cron::parse("0 0 */2 * 5").matches(wall(2026y / May / 14, 0min)));
    CHECK(Cron::parse("0 0 */2 * 5").matches(wall(2026y / May / 15, 0min)));
    CHECK_FALSE(Cron::parse("0 0 */2 * 5").matches(wall(2026y / May / 22, 0min)));  // 22 is even
    // Months without the day are passed over; 29 February waits for a leap year.
    const auto d31 = Cron::parse("0 12 31 * *");
    CHECK(d31.next_after(wall(2026y / March / 31, 12h)) == wall(2026y / May / 31, 12h));
    CHECK(Cron::parse("0 0 29 2 *").next_after(wall(2026y / January / 1, 0min)) ==
          wall(2028y / February / 29, 0min));
    CHECK_FALSE(Cron::parse("0 0 30 2 *").next_after(wall(2026y / January / 1, 0min)));
}

TEST_CASE("cron: next tick in UTC walks minutes, hours, days and months", "[cron]") {
    ZoneOffsets zone(utc_zone);
    const auto t0 = utc(2026y / January / 31, 23h + 50min);
    CHECK(ticks("*/15 * * * *", zone, t0 + 20s, 3) ==
          std::vector<Instant>{t0 + 10min, t0 + 25min, t0 + 40min});
    CHECK(ticks("0 9-17/4 * * 1-5", zone, t0, 4) ==
          std::vector<Instant>{utc(2026y / February / 2, 9h), utc(2026y / February / 2, 13h),
                               utc(2026y / February / 2, 17h), utc(2026y / February / 3, 9h)});
    // A tick is strictly after: at exactly a tick, the next one.
    CHECK(ticks("0 * * * *", zone, utc(2026y / June / 1, 5h), 1) ==
          std::vector<Instant>{utc(2026y / June / 1, 6h)});
}

TEST_CASE("cron: a spring-forward shift in Europe/Berlin", "[cron][dst]") {
    ZoneOffsets zone(berlin);
    // 29 March 2026: 02:00 CET becomes 03:00 CEST at 01:00 UTC; 02:xx does not exist.
    const auto shift = utc(2026y / March / 29, 1h);
    SECTION("a skipped daily time ticks once, at the shift") {
        CHECK(ticks("30 2 * * *", zone, utc(2026y / March / 27, 12h), 3) ==
              std::vector<Instant>{utc(2026y / March / 28, 1h + 30min), shift,
                                   utc(2026y / March / 30, 30min)});
        CHECK(ticks("*/15 2 * * *", zone, utc(2026y / March / 28, 23h), 2) ==
              std::vector<Instant>{shift, utc(2026y / March / 30, 0h)});
    }
    SECTION("an every-minute schedule keeps every real minute") {
        CHECK(ticks("* * * * *", zone, shift - 2min, 4) ==
              std::vector<Instant>{shift - 1min, shift, shift + 1min, shift + 2min});
    }
    SECTION("a daily 09:00 moves an hour earlier in UTC") {
        CHECK(ticks("0 9 * * *", zone, utc(2026y / March / 28, 0h), 2) ==
              std::vector<Instant>{utc(2026y / March / 28, 8h), utc(2026y / March / 29, 7h)});
    }
}

TEST_CASE("cron: a fall-back shift in Europe/Berlin", "[cron][dst]") {
    ZoneOffsets zone(berlin);
    // 25 October 2026: 03:00 CEST becomes 02:00 CET at 01:00 UTC; 02:xx happens twice.
    SECTION("a repeated daily time ticks once, in the first pass") {
        CHECK(ticks("30 2 * * *", zone, utc(2026y / October / 24, 12h), 2) ==
              std::vector<Instant>{utc(2026y / October / 25, 30min),
                                   utc(2026y / October / 26, 1h + 30min)});
        CHECK(
            ticks("* 2 * * *", zone, utc(2026y / October / 25, 58min), 2) ==
            std::vector<Instant>{utc(2026y / October / 25, 59min), utc(2026y / October / 26, 1h)});
    }
    SECTION("a schedule whose hour is * ticks through both passes") {
        CHECK(ticks("*/30 * * * *", zone, utc(2026y / October / 24, 23h + 10min), 6) ==
              std::vector<Instant>{
                  utc(2026y / October / 24, 23h + 30min), utc(2026y / October / 25, 0h),
                  utc(2026y / October / 25, 30min), utc(2026y / October / 25, 1h),
                  utc(2026y / October / 25, 1h + 30min), utc(2026y / October / 25, 2h)});
        const auto start = utc(2026y / October / 25, 55min);
        const auto every = ticks("* * * * *", zone, start, 10);
        for (std::size_t i = 0; i < every.size(); ++i) {
            CHECK(every[i] == start + minutes(i + 1));
        }
    }
}

TEST_CASE("cron: the zone is asked a few times, not once a tick", "[cron]") {
    int asked = 0;
    ZoneOffsets zone([&asked](Instant t) {
        ++asked;
        return berlin(t);
    });
    ticks("* * * * *", zone, utc(2026y / June / 1, 0h), 120);
    CHECK(asked == zone.lookups());
    CHECK(asked < 12);
}

TEST_CASE("cron: the latest tick up to now, however long the outage", "[cron]") {
    ZoneOffsets zone(berlin);
    const auto every = Cron::parse("* * * * *");
    const auto t0 = utc(2026y / June / 1, 0h);
    CHECK(last_tick_until(every, zone, t0, t0 + 7 * 24h + 30s) == t0 + 7 * 24h);
    CHECK(last_tick_until(every, zone, t0, t0 + 30s) == std::nullopt);
    const auto monthly = Cron::parse("0 0 1 * *");  // midnight in Berlin: 22:00 UTC the day before
    CHECK(last_tick_until(monthly, zone, t0 - 24h, utc(2026y / September / 15, 0h)) ==
          utc(2026y / August / 31, 22h));
}

TEST_CASE("schedules: skip takes the latest missed tick, catch_up each, bounded", "[cron]") {
    ZoneOffsets zone(utc_zone);
    const auto every = Cron::parse("* * * * *");
    const auto due = utc(2026y / June / 1, 10h);
    const auto now = due + 3h + 30s;
    const auto skip = plan_ticks(every, zone, MissedTicks::Skip, due, now);
    CHECK(skip.ticks == std::vector<Instant>{due + 3h});
    CHECK(skip.next == due + 3h + 1min);
    const auto catch_up = plan_ticks(every, zone, MissedTicks::CatchUp, due, now);
    REQUIRE(catch_up.ticks.size() == static_cast<std::size_t>(kCatchUpPerPass));
    CHECK(catch_up.ticks.front() == due);
    CHECK(catch_up.ticks.back() == due + minutes(kCatchUpPerPass - 1));
    CHECK(catch_up.next == due + minutes(kCatchUpPerPass));
    // On time, both enqueue the one tick due.
    CHECK(plan_ticks(every, zone, MissedTicks::Skip, due, due + 1s).ticks ==
          std::vector<Instant>{due});
    CHECK(plan_ticks(every, zone, MissedTicks::CatchUp, due, due + 1s).ticks ==
          std::vector<Instant>{due});
}

TEST_CASE("schedules: the payload names the schedule and the tick", "[cron]") {
    const auto tick = utc(2026y / March / 29, 1h);
    CHECK(render_payload("{schedule} at {tick} ({tick_us}) {tick}", "nightly", tick) ==
          "nightly at 2026-03-29T01:00:00Z (" + std::to_string(to_micros(tick)) +
              ") 2026-03-29T01:00:00Z");
    CHECK(render_payload("plain", "nightly", tick) == "plain");
    CHECK(missed_ticks_from("catch-up") == MissedTicks::CatchUp);
    CHECK_FALSE(missed_ticks_from("all"));
}
