#include "common/ops/schedule_store.hpp"

#include <cstdio>

#include "common/ops/schedule_sql.hpp"

namespace aclaim::ops {

namespace {

using std::chrono::days;

/// A zone's offsets read in `txn`.
ZoneOffsets zone_in(pqxx::transaction_base& txn, const std::string& zone) {
    return ZoneOffsets([&txn, zone](base::Instant t) {
        return base::Duration(
            txn.exec_params1(sql::kScheduleZoneOffset.text, base::to_micros(t), zone)[0]
                .as<base::Micros>());
    });
}

Schedule schedule_of(const pqxx::row& r) {
    Schedule s;
    s.id = r["id"].as<std::int64_t>();
    s.org_id = r["org_id"].as<store::OrgId>();
    s.name = r["name"].as<std::string>();
    s.cron = r["cron"].as<std::string>();
    s.time_zone = r["time_zone"].as<std::string>();
    s.queue = r["queue"].as<std::string>();
    s.payload = r["payload"].as<std::string>();
    s.priority = r["priority"].as<int>();
    s.paused = r["paused"].as<bool>();
    s.missed = missed_ticks_from(r["missed"].as<std::string>()).value_or(MissedTicks::Skip);
    if (!r["last_tick_us"].is_null())
        s.last_tick = base::instant_from_micros(r["last_tick_us"].as<base::Micros>());
    s.next_tick = base::instant_from_micros(r["next_tick_us"].as<base::Micros>());
    return s;
}

/// The first tick after `now`; a schedule that has none within ten years is refused when added,
/// so this is the far bound only for one whose zone's rules changed since.
base::Instant first_tick_after(const Cron& cron, ZoneOffsets& zone, base::Instant now) {
    return next_tick(cron, zone, now).value_or(now + days(3653));
}

std::string replace_all(std::string text, const std::string& key, const std::string& value) {
    for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
        text.replace(at, key.size(), value);
    return text;
}

void scope_all(pqxx::transaction_base& txn) {
    txn.exec_params(store::sql::kScope.text, store::sql::kAllOrganizations);
}

}  // namespace

std::string_view to_string(MissedTicks m) {
    return m == MissedTicks::CatchUp ? "catch_up" : "skip";
}

std::optional<MissedTicks> missed_ticks_from(std::string_view text) {
    if (text == "skip") return MissedTicks::Skip;
    if (text == "catch_up" || text == "catch-up") return MissedTicks::CatchUp;
    return std::nullopt;
}

std::string iso_utc(base::Instant t) {
    const auto secs = std::chrono::floor<std::chrono::seconds>(t);
    const auto day = std::chrono::floor<days>(secs);
    const std::chrono::year_month_day ymd(day);
    const std::chrono::hh_mm_ss hms(secs - day);
    char out[32];
    std::snprintf(out, sizeof out, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                  static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                  static_cast<int>(hms.seconds().count()));
    return out;
}

std::string render_payload(const std::string& payload, const std::string& name,
                           base::Instant tick) {
    auto out = replace_all(payload, "{schedule}", name);
    out = replace_all(out, "{tick_us}", std::to_string(base::to_micros(tick)));
    return replace_all(out, "{tick}", iso_utc(tick));
}

TickPlan plan_ticks(const Cron& cron, ZoneOffsets& zone, MissedTicks missed, base::Instant due,
                    base::Instant now) {
    TickPlan plan;
    if (missed == MissedTicks::Skip) {
        // `due` is a tick at or before now, so there is a latest one.
        plan.ticks.push_back(
            last_tick_until(cron, zone, due - base::Duration(1), now).value_or(due));
        plan.next = first_tick_after(cron, zone, now);
        return plan;
    }
    auto t = due;
    while (t <= now && plan.ticks.size() < static_cast<std::size_t>(kCatchUpPerPass)) {
        plan.ticks.push_back(t);
        t = first_tick_after(cron, zone, t);
    }
    plan.next = t;
    return plan;
}

Schedule ScheduleStore::add(const ScheduleSpec& spec, const std::string& actor, base::Instant now) {
    const auto cron = Cron::parse(spec.cron);
    if (!base::valid_queue_name(spec.queue))
        throw std::invalid_argument("'" + spec.queue + "' is not a queue name");
    if (!base::valid_queue_name(spec.name))
        throw std::invalid_argument(
            "'" + spec.name +
            "' is not a schedule name: 1..64 of A-Z a-z 0-9 _ . : -, starting with a letter or "
            "digit");
    pqxx::work txn(conn_, "schedule_add");
    if (!txn.exec_params1(sql::kScheduleZoneKnown.text, spec.time_zone)[0].as<bool>())
        throw std::invalid_argument("'" + spec.time_zone +
                                    "' is not a time zone PostgreSQL knows (an IANA name such as "
                                    "Europe/Berlin or UTC)");
    auto zone = zone_in(txn, spec.time_zone);
    const auto next = next_tick(cron, zone, now);
    if (!next) throw CronError("'" + spec.cron + "' has no tick in the next ten years");
    const std::string detail = "cron '" + spec.cron + "' in " + spec.time_zone + ", queue " +
                               spec.queue +
                               ", missed ticks: " + std::string(to_string(spec.missed));
    const auto r = txn.exec_params(sql::kScheduleAdd.text, spec.org_id, spec.name, spec.cron,
                                   spec.time_zone, spec.queue, spec.payload, spec.priority,
                                   spec.paused, std::string(to_string(spec.missed)),
                                   base::to_micros(*next), base::to_micros(now), actor, detail);
    if (r.empty())
        throw ScheduleExists("organization " + std::to_string(spec.org_id) +
                             " already has a schedule '" + spec.name + "'");
    txn.commit();
    Schedule s;
    static_cast<ScheduleSpec&>(s) = spec;
    s.id = r[0][0].as<std::int64_t>();
    s.next_tick = *next;
    return s;
}

Schedule ScheduleStore::set_paused(store::OrgId org, const std::string& name, bool paused,
                                   const std::string& actor, const std::string& reason,
                                   base::Instant now) {
    pqxx::work txn(conn_, "schedule_pause");
    const auto r = txn.exec_params(sql::kScheduleLock.text, org, name);
    if (r.empty()) throw UnknownSchedule(org, name);
    auto s = schedule_of(r[0]);
    std::optional<base::Micros> next;
    if (!paused) {
        auto zone = zone_in(txn, s.time_zone);
        s.next_tick = first_tick_after(Cron::parse(s.cron), zone, now);
        next = base::to_micros(s.next_tick);
    }
    txn.exec_params(sql::kSchedulePause.text, s.id, paused, next, base::to_micros(now), actor,
                    reason);
    txn.commit();
    s.paused = paused;
    return s;
}

void ScheduleStore::remove(store::OrgId org, const std::string& name, base::Instant now,
                           const std::string& actor, const std::string& reason) {
    pqxx::work txn(conn_, "schedule_remove");
    const auto r = txn.exec_params(sql::kScheduleLock.text, org, name);
    if (r.empty()) throw UnknownSchedule(org, name);
    txn.exec_params(sql::kScheduleRemove.text, r[0]["id"].as<std::int64_t>(), base::to_micros(now),
                    actor, reason);
    txn.commit();
}

std::vector<Schedule> ScheduleStore::list(std::optional<store::OrgId> org) {
    pqxx::read_transaction txn(conn_, "schedule_list");
    std::vector<Schedule> out;
    for (const auto& r : txn.exec_params(sql::kScheduleList.text, org))
        out.push_back(schedule_of(r));
    return out;
}

SchedulePass ScheduleStore::run_due(base::Instant now) {
    std::vector<std::int64_t> due;
    {
        pqxx::nontransaction read(conn_, "schedule_due");
        for (const auto& r :
             read.exec_params(sql::kScheduleDue.text, base::to_micros(now), kSchedulesPerPass)) {
            due.push_back(r[0].as<std::int64_t>());
        }
    }
    SchedulePass pass;
    pass.more = due.size() == static_cast<std::size_t>(kSchedulesPerPass);
    for (const auto id : due) {
        int made = 0;
        try {
            made = tick(id, now, pass.more);
        } catch (const pqxx::broken_connection&) {
            throw;
        } catch (const std::exception& e) {
            // One schedule the database refuses (its queue or payload written by hand, say)
            // must not hold up the others; it stays due and is tried again next pass.
            ++pass.failed;
            pass.error = "schedule " + std::to_string(id) + ": " + e.what();
            continue;
        }
        if (made >= 0) ++pass.schedules;
        pass.enqueued += std::max(made, 0);
    }
    return pass;
}

int ScheduleStore::tick(std::int64_t id, base::Instant now, bool& more) {
    pqxx::work txn(conn_, "schedule_tick");
    scope_all(txn);
    const auto r = txn.exec_params(sql::kScheduleClaimDue.text, id, base::to_micros(now));
    if (r.empty()) return -1;  // another scheduler holds it or ticked it already
    const auto s = schedule_of(r[0]);
    auto zone = zone_in(txn, s.time_zone);
    const auto plan = plan_ticks(Cron::parse(s.cron), zone, s.missed, s.next_tick, now);
    int made = 0;
    for (const auto t : plan.ticks) {
        const std::string key =
            "schedule:" + std::to_string(s.id) + ":" + std::to_string(base::to_micros(t));
        const auto e = txn.exec_params1(
            sql::kScheduleEnqueueTick.text, s.org_id, base::to_micros(now), s.queue,
            render_payload(s.payload, s.name, t), s.priority, key, s.id, base::to_micros(t));
        if (e["created"].as<bool>()) ++made;
    }
    if (made > 0)
        txn.exec_params(sql::kScheduleForgetTicks.text, s.id, base::to_micros(now - kTicksKept));
    const std::optional<base::Micros> last =
        plan.ticks.empty() ? std::nullopt
                           : std::optional<base::Micros>(base::to_micros(plan.ticks.back()));
    const auto moved =
        txn.exec_params(sql::kScheduleAdvance.text, s.id, base::to_micros(s.next_tick), last,
                        base::to_micros(plan.next));
    // The row is locked, so the fence holds unless the lock was lost: then nothing commits.
    if (moved.affected_rows() != 1)
        throw std::logic_error("schedule " + std::to_string(s.id) + " moved under its lock");
    txn.commit();
    if (plan.next <= now) more = true;
    return made;
}

}  // namespace aclaim::ops
