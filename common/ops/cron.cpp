#include "common/ops/cron.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <vector>

namespace aclaim::ops {

namespace {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::minutes;

struct Field {
    const char* name;
    int lo;
    int hi;
    const char* const* names;  ///< names[i] stands for lo + i, or nullptr
};

constexpr const char* kMonthNames[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",  "JUL",
                                       "AUG", "SEP", "OCT", "NOV", "DEC", nullptr};
constexpr const char* kDayNames[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", nullptr};

constexpr std::array<Field, 5> kFields{{{"minute", 0, 59, nullptr},
                                        {"hour", 0, 23, nullptr},
                                        {"day of month", 1, 31, nullptr},
                                        {"month", 1, 12, kMonthNames},
                                        {"day of week", 0, 7, kDayNames}}};

[[noreturn]] void refuse(const Field& f, std::string_view text, const std::string& why) {
    throw CronError(std::string(f.name) + " field '" + std::string(text) + "': " + why);
}

/// One value of a field: a number in range or a name.
int value(const Field& f, std::string_view item, std::string_view text) {
    if (item.empty()) refuse(f, text, "a value is missing");
    if (f.names != nullptr && std::isalpha(static_cast<unsigned char>(item.front())) != 0) {
        std::string upper(item);
        for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        for (int i = 0; f.names[i] != nullptr; ++i) {
            if (upper == f.names[i]) return f.lo + i;
        }
        refuse(f, text, "'" + std::string(item) + "' is not a name of this field");
    }
    int v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size())
        refuse(f, text, "'" + std::string(item) + "' is not a number");
    if (v < f.lo || v > f.hi)
        refuse(
            f, text,
            std::to_string(v) + " is outside " + std::to_string(f.lo) + "-" + std::to_string(f.hi));
    return v;
}

/// The values a field names, as bits lo..hi; `star` says whether it starts with `*`.
std::vector<bool> field_bits(const Field& f, std::string_view text, bool& star) {
    std::vector<bool> bits(static_cast<std::size_t>(f.hi) + 1, false);
    star = !text.empty() && text.front() == '*';
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto comma = std::min(text.find(',', start), text.size());
        const auto item = text.substr(start, comma - start);
        start = comma + 1;
        auto range = item;
        int step = 1;
        if (const auto slash = item.find('/'); slash != std::string_view::npos) {
            range = item.substr(0, slash);
            const auto s = item.substr(slash + 1);
            const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
            if (s.empty() || ec != std::errc() || end != s.data() + s.size() || step < 1 ||
                step > f.hi)
                refuse(
                    f, text,
                    "the step '" + std::string(s) + "' is not a number 1-" + std::to_string(f.hi));
        }
        int lo = f.lo;
        int hi = f.hi;
        if (range != "*") {
            const auto dash = range.find('-');
            lo = value(f, range.substr(0, dash), text);
            if (dash != std::string_view::npos) {
                hi = value(f, range.substr(dash + 1), text);
                if (hi < lo) refuse(f, text, "a range runs backwards");
            } else if (range.size() == item.size()) {
                hi = lo;  // a single value; `5/10` runs from 5 to the end
            }
        }
        for (int v = lo; v <= hi; v += step) bits[static_cast<std::size_t>(v)] = true;
        if (comma == text.size()) break;
    }
    return bits;
}

template <std::size_t N>
std::bitset<N> to_bitset(const std::vector<bool>& bits) {
    std::bitset<N> out;
    for (std::size_t i = 0; i < N && i < bits.size(); ++i) out[i] = bits[i];
    return out;
}

std::string_view macro(std::string_view text) {
    if (text == "@yearly" || text == "@annually") return "0 0 1 1 *";
    if (text == "@monthly") return "0 0 1 * *";
    if (text == "@weekly") return "0 0 * * 0";
    if (text == "@daily" || text == "@midnight") return "0 0 * * *";
    if (text == "@hourly") return "0 * * * *";
    return text;
}

base::Instant as_instant(Wall w) {
    return base::Instant(w.at.time_since_epoch());
}

/// The wall reading `w` as an instant at `offset`.
base::Instant at_offset(Wall w, base::Duration offset) {
    return as_instant(w) - offset;
}

/// The first minute t in (lo, hi] at which the offset is the one at `hi`: the instant of the
/// zone's shift between them. Both are whole minutes and their offsets differ.
base::Instant shift_between(ZoneOffsets& zone, base::Instant lo, base::Instant hi) {
    const auto after = zone.at(hi);
    while (hi - lo > minutes(1)) {
        const base::Instant mid = lo + std::chrono::floor<minutes>((hi - lo) / 2);
        if (zone.at(mid) == after) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return hi;
}

/// The instants a wall minute stands for: one, two (repeated by a fall-back shift) or none
/// (skipped by a spring-forward shift: then `skipped_until` is the shift's instant).
struct Resolved {
    std::vector<base::Instant> instants;
    base::Instant skipped_until{};
};

Resolved resolve(ZoneOffsets& zone, Wall w) {
    // The offsets a day either side of the wall's day (no zone is more than 14 hours off UTC),
    // read at day boundaries so that every wall minute of a day asks the same two instants.
    const auto day = std::chrono::floor<days>(as_instant(w));
    const auto before = zone.at(day - days(1));
    const auto after = zone.at(day + days(2));
    Resolved r;
    for (const auto offset : {before, after}) {
        const auto t = at_offset(w, offset);
        if (zone.wall(t) == w &&
            std::find(r.instants.begin(), r.instants.end(), t) == r.instants.end()) {
            r.instants.push_back(t);
        }
    }
    std::sort(r.instants.begin(), r.instants.end());
    if (r.instants.empty()) {
        r.skipped_until = shift_between(zone, at_offset(w, after), at_offset(w, before));
    }
    return r;
}

}  // namespace

Cron Cron::parse(std::string_view text) {
    text = macro(text);
    std::array<std::string_view, 5> parts;
    std::size_t n = 0;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) ++i;
        if (i == text.size()) break;
        const auto start = i;
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) == 0) ++i;
        if (n == parts.size())
            throw CronError("'" + std::string(text) + "' has more than five fields");
        parts[n++] = text.substr(start, i - start);
    }
    if (n != parts.size())
        throw CronError("'" + std::string(text) +
                        "' needs five fields: minute hour day-of-month month day-of-week");
    Cron c;
    bool star = false;
    c.minutes_ = to_bitset<60>(field_bits(kFields[0], parts[0], star));
    c.hours_ = to_bitset<24>(field_bits(kFields[1], parts[1], c.hour_star_));
    c.days_ = to_bitset<32>(field_bits(kFields[2], parts[2], c.dom_star_));
    c.months_ = to_bitset<13>(field_bits(kFields[3], parts[3], star));
    auto weekdays = field_bits(kFields[4], parts[4], c.dow_star_);
    if (weekdays[7]) weekdays[0] = true;
    c.weekdays_ = to_bitset<7>(weekdays);
    return c;
}

bool Cron::day_matches(std::chrono::year_month_day d) const {
    const bool dom = days_[static_cast<unsigned>(d.day())];
    const bool dow = weekdays_[std::chrono::weekday(std::chrono::sys_days(d)).c_encoding()];
    if (dom_star_ || dow_star_) return dom && dow;
    return dom || dow;
}

bool Cron::matches(Wall w) const {
    const auto day = std::chrono::floor<days>(w.at);
    const std::chrono::year_month_day ymd(day);
    const std::chrono::hh_mm_ss hms(w.at - day);
    return months_[static_cast<unsigned>(ymd.month())] && day_matches(ymd) &&
           hours_[static_cast<std::size_t>(hms.hours().count())] &&
           minutes_[static_cast<std::size_t>(hms.minutes().count())];
}

std::optional<Wall> Cron::next_after(Wall after) const {
    auto t = std::chrono::floor<minutes>(after.at) + minutes(1);
    const auto limit = t + days(3653);
    while (t < limit) {
        const auto day = std::chrono::floor<days>(t);
        const std::chrono::year_month_day ymd(day);
        if (!months_[static_cast<unsigned>(ymd.month())]) {
            const auto next = ymd.year() / ymd.month() / 1 + std::chrono::months(1);
            t = std::chrono::sys_days(next);
            continue;
        }
        if (!day_matches(ymd)) {
            t = day + days(1);
            continue;
        }
        const std::chrono::hh_mm_ss hms(t - day);
        const auto h = static_cast<std::size_t>(hms.hours().count());
        if (!hours_[h]) {
            t = std::chrono::floor<hours>(t) + hours(1);
            continue;
        }
        if (!minutes_[static_cast<std::size_t>(hms.minutes().count())]) {
            t += minutes(1);
            continue;
        }
        return Wall{t};
    }
    return std::nullopt;
}

base::Duration ZoneOffsets::at(base::Instant t) {
    constexpr auto kTrusted = days(3);
    auto hi = seen_.lower_bound(t);
    if (hi != seen_.end() && hi->first == t) return hi->second;
    if (hi != seen_.end() && hi != seen_.begin()) {
        const auto lo = std::prev(hi);
        if (lo->second == hi->second && hi->first - lo->first <= kTrusted) return lo->second;
    }
    ++lookups_;
    const auto offset = source_(t);
    seen_.emplace(t, offset);
    return offset;
}

Wall ZoneOffsets::wall(base::Instant t) {
    return Wall{std::chrono::floor<minutes>(t + at(t))};
}

std::optional<base::Instant> next_tick(const Cron& cron, ZoneOffsets& zone, base::Instant after) {
    // Bounds the walk through wall minutes whose instants are all at or before `after`: a
    // schedule with named hours steps through the second pass of a repeated hour (60 at most).
    constexpr int kMaxSteps = 1000;
    Wall w = zone.wall(after);
    for (int step = 0; step < kMaxSteps; ++step) {
        const auto next = cron.next_after(w);
        if (!next) return std::nullopt;
        w = *next;
        const auto r = resolve(zone, w);
        std::optional<base::Instant> pick;
        if (r.instants.empty()) {
            if (r.skipped_until > after) pick = r.skipped_until;
        } else if (r.instants.size() == 2 && !cron.every_hour()) {
            if (r.instants.front() > after) pick = r.instants.front();
        } else {
            for (const auto t : r.instants) {
                if (t > after) {
                    pick = t;
                    break;
                }
            }
        }
        if (!pick) continue;
        // The walk went forward on the wall clock; a fall-back shift between `after` and the
        // pick turned the clock back, and the wall minutes it repeats tick again for a schedule
        // that follows real time.
        if (cron.every_hour() && zone.at(after) > zone.at(*pick)) {
            const auto shift = shift_between(zone, std::chrono::floor<minutes>(after), *pick);
            if (const auto again = cron.next_after(Wall{zone.wall(shift).at - minutes(1)})) {
                const auto t = at_offset(*again, zone.at(shift));
                if (t > after && t < *pick && zone.wall(t) == *again) pick = t;
            }
        }
        return pick;
    }
    return std::nullopt;
}

std::optional<base::Instant> last_tick_until(const Cron& cron, ZoneOffsets& zone,
                                             base::Instant after, base::Instant now) {
    // Looks back a growing window from `now`, so that an every-minute schedule after a week's
    // outage walks an hour of ticks, not a week of them.
    constexpr int kMaxWalk = 100000;
    for (const base::Duration window :
         {base::Duration(hours(1)), base::Duration(days(1)), base::Duration(days(32)),
          base::Duration(days(366)), base::Duration(days(3653))}) {
        const auto from = std::max(after, now - window);
        auto t = next_tick(cron, zone, from);
        if (!t || *t > now) {
            if (from == after) return std::nullopt;
            continue;
        }
        for (int i = 0; i < kMaxWalk; ++i) {
            const auto n = next_tick(cron, zone, *t);
            if (!n || *n > now) return t;
            t = n;
        }
        return t;
    }
    return std::nullopt;
}

}  // namespace aclaim::ops
