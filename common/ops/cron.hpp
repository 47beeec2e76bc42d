#pragma once

// Cron expressions and the ticks they give in a time zone: the arithmetic of schedules
// (schedule_store.hpp). Pure: the zone's UTC offsets come from whoever knows them (PostgreSQL in
// the scheduler, a table in the unit tests), so every rule here is tested without a database.

#include <bitset>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "common/base/clock.hpp"

namespace aclaim::ops {

/// A wall-clock reading in some zone, to the minute, written as if it were UTC: 02:30 local is
/// the sys_time of 02:30. A type of its own so that a wall reading and an Instant never mix.
struct Wall {
    std::chrono::sys_time<std::chrono::minutes> at;
    auto operator<=>(const Wall&) const = default;
};

/// A cron expression that cannot be read, with the field and why.
class CronError : public std::invalid_argument {
  public:
    using std::invalid_argument::invalid_argument;
};

/// Five fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or JAN-DEC), day of
/// week (0-7 or SUN-SAT, 0 and 7 both Sunday). Each field is `*` or a comma list of values and
/// ranges (`a-b`), each with an optional step (`*/15`, `1-30/2`, `5/10` = 5 to the end by 10).
/// @yearly, @monthly, @weekly, @daily and @hourly stand for their usual expressions. As in
/// Vixie cron, when both day fields are restricted (neither starts with `*`) a day matches when
/// either does; otherwise the restricted one alone decides.
class Cron {
  public:
    /// Throws CronError naming the first field that cannot be read.
    static Cron parse(std::string_view text);

    bool matches(Wall w) const;
    /// The first matching wall minute after `after`, or nothing within ten years (30 February).
    std::optional<Wall> next_after(Wall after) const;
    /// The hour field is `*`: the schedule follows real time through an hour repeated by a
    /// fall-back shift (both passes tick); one with named hours ticks in the first pass only.
    bool every_hour() const { return hour_star_; }

  private:
    bool day_matches(std::chrono::year_month_day d) const;

    std::bitset<60> minutes_;
    std::bitset<24> hours_;
    std::bitset<32> days_;     ///< 1..31
    std::bitset<13> months_;   ///< 1..12
    std::bitset<7> weekdays_;  ///< 0 = Sunday
    bool hour_star_ = false;
    bool dom_star_ = false;
    bool dow_star_ = false;
};

/// A time zone's UTC offsets (local = UTC + offset), read through `source` and remembered: two
/// readings at most three days apart that agree stand for every instant between them, which
/// holds in every zone whose shifts are more than three days apart (all of them in the tz
/// database's rules of today).
class ZoneOffsets {
  public:
    using Source = std::function<base::Duration(base::Instant)>;
    explicit ZoneOffsets(Source source) : source_(std::move(source)) {}

    base::Duration at(base::Instant t);
    /// The wall minute at `t` (its seconds dropped).
    Wall wall(base::Instant t);
    /// How many times `source` was asked: a test holds the cache to its promise.
    int lookups() const { return lookups_; }

  private:
    Source source_;
    std::map<base::Instant, base::Duration> seen_;
    int lookups_ = 0;
};

/// The first tick of `cron` in the zone after the instant `after`, or nothing within ten years.
/// Daylight saving time: a wall minute skipped by a spring-forward shift ticks at the first
/// instant after the shift (once, however many skipped minutes match); a wall minute repeated by
/// a fall-back shift ticks in its first pass, and in its second too when the hour field is `*`
/// (every_hour), so that `*/5 * * * *` keeps ticking every five real minutes.
std::optional<base::Instant> next_tick(const Cron& cron, ZoneOffsets& zone, base::Instant after);

/// The latest tick t with after < t <= now, or nothing: what a schedule that skips missed ticks
/// enqueues after an outage. Costs a few next_tick calls however long the outage was.
std::optional<base::Instant> last_tick_until(const Cron& cron, ZoneOffsets& zone,
                                             base::Instant after, base::Instant now);

}  // namespace aclaim::ops
