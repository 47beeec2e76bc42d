// schedule: periodic jobs (schema/baseline/tables.sql). add, pause, resume and remove are audited
// in schedule_events with who acted and why, as the queue commands are in queue_events.

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/base/clock.hpp"
#include "common/ops/recovery.hpp"
#include "common/ops/schedule_store.hpp"
#include "ctl/cmd_recover.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

namespace {

struct ScheduleArgs {
    ops::ScheduleSpec spec;
    std::string missed = "skip";
    std::string reason;
    std::string actor = default_actor();
    bool json = false;
};

std::string tick_text(const std::optional<base::Instant>& t) {
    return t ? ops::iso_utc(*t) : "-";
}

int run_add(const Global& global, ScheduleArgs a) {
    const auto missed = ops::missed_ticks_from(a.missed);
    if (!missed) throw UsageError("--missed '" + a.missed + "' is neither skip nor catch_up");
    a.spec.missed = *missed;
    pqxx::connection conn(require_dsn(global));
    ops::Schedule s;
    try {
        s = ops::ScheduleStore(conn).add(a.spec, a.actor, global.clock.now());
    } catch (const std::invalid_argument& e) {  // CronError, ScheduleExists, zone, names
        throw UsageError(e.what());
    }
    std::printf("schedule %s of organization %lld added%s: first tick %s, jobs to queue %s\n",
                s.name.c_str(), static_cast<long long>(s.org_id), s.paused ? " paused" : "",
                ops::iso_utc(s.next_tick).c_str(), s.queue.c_str());
    return 0;
}

int run_pause(const Global& global, const ScheduleArgs& a, bool paused) {
    pqxx::connection conn(require_dsn(global));
    ops::Schedule s;
    try {
        s = ops::ScheduleStore(conn).set_paused(a.spec.org_id, a.spec.name, paused, a.actor,
                                                a.reason.empty() ? "no reason given" : a.reason,
                                                global.clock.now());
    } catch (const ops::UnknownSchedule& e) {
        throw UsageError(e.what());
    }
    if (paused) {
        std::printf("schedule %s of organization %lld paused: no tick is enqueued until resumed\n",
                    s.name.c_str(), static_cast<long long>(s.org_id));
    } else {
        std::printf(
            "schedule %s of organization %lld resumed: next tick %s (ticks due while paused "
            "are not enqueued)\n",
            s.name.c_str(), static_cast<long long>(s.org_id), ops::iso_utc(s.next_tick).c_str());
    }
    return 0;
}

int run_remove(const Global& global, const ScheduleArgs& a) {
    pqxx::connection conn(require_dsn(global));
    try {
        ops::ScheduleStore(conn).remove(a.spec.org_id, a.spec.name, global.clock.now(), a.actor,
                                        a.reason.empty() ? "no reason given" : a.reason);
    } catch (const ops::UnknownSchedule& e) {
        throw UsageError(e.what());
    }
    std::printf("schedule %s of organization %lld removed; the jobs it enqueued stay\n",
                a.spec.name.c_str(), static_cast<long long>(a.spec.org_id));
    return 0;
}

int run_list(const Global& global, const ScheduleArgs& a) {
    pqxx::connection conn(require_dsn(global));
    const auto all = ops::ScheduleStore(conn).list(
        a.spec.org_id > 0 ? std::optional<store::OrgId>(a.spec.org_id) : std::nullopt);
    if (a.json) {
        nlohmann::json out = {{"schedules", nlohmann::json::array()}};
        for (const auto& s : all) {
            out["schedules"].push_back(
                {{"org_id", s.org_id},
                 {"name", s.name},
                 {"paused", s.paused},
                 {"cron", s.cron},
                 {"time_zone", s.time_zone},
                 {"queue", s.queue},
                 {"missed", std::string(ops::to_string(s.missed))},
                 {"last_tick",
                  s.last_tick ? nlohmann::json(ops::format_instant(*s.last_tick)) : nullptr},
                 {"next_tick",
                  s.paused ? nlohmann::json() : nlohmann::json(ops::format_instant(s.next_tick))}});
        }
        std::cout << out.dump() << "\n";
        return 0;
    }
    std::printf("%6s %-20s %-7s %-20s %-18s %-16s %-8s %-20s %-20s\n", "org", "schedule", "state",
                "cron", "zone", "queue", "missed", "last tick", "next tick");
    for (const auto& s : all) {
        std::printf("%6lld %-20s %-7s %-20s %-18s %-16s %-8s %-20s %-20s\n",
                    static_cast<long long>(s.org_id), s.name.c_str(),
                    s.paused ? "paused" : "running", s.cron.c_str(), s.time_zone.c_str(),
                    s.queue.c_str(), std::string(ops::to_string(s.missed)).c_str(),
                    tick_text(s.last_tick).c_str(),
                    s.paused ? "-" : ops::iso_utc(s.next_tick).c_str());
    }
    return 0;
}

void add_named(CLI::App* cmd, ScheduleArgs& a) {
    cmd->add_option("name", a.spec.name, "Schedule name")->required();
    base::add_org(*cmd, a.spec.org_id, "Organization id")->required();
    cmd->add_option("--by", a.actor, "Who acts, as recorded")->capture_default_str();
}

}  // namespace

void add_schedule_command(CLI::App& app, Global& global, Action& action) {
    auto a = std::make_shared<ScheduleArgs>();
    auto* sc =
        add_group(app, "schedule", "Periodic jobs: add, list, pause, resume and remove schedules");

    auto* add = sc->add_subcommand(
        "add", "Add a schedule: a job enqueued at every tick of a cron expression in a time zone");
    add_named(add, *a);
    add->add_option("--cron", a->spec.cron,
                    "Five fields: minute hour day-of-month month day-of-week (*, lists, ranges, "
                    "steps; @daily and the like)")
        ->required();
    a->spec.time_zone = "UTC";
    add->add_option("--tz", a->spec.time_zone, "IANA time zone the cron is read in")
        ->capture_default_str();
    add->add_option("--queue", a->spec.queue, "Queue of the jobs")->capture_default_str();
    add->add_option("--payload", a->spec.payload,
                    "Job payload; {schedule}, {tick} (ISO 8601, UTC) and {tick_us} are filled in");
    add->add_option("--priority", a->spec.priority, "Job priority")->capture_default_str();
    add->add_option("--missed", a->missed,
                    "Ticks missed while no coordinator ran: skip (enqueue the latest only) or "
                    "catch_up (every one, 100 a pass)")
        ->check(CLI::IsMember({"skip", "catch_up", "catch-up"}))
        ->capture_default_str();
    add->add_flag("--paused", a->spec.paused, "Add it paused");
    bind_action(add, global, action, a, run_add);

    for (const bool paused : {true, false}) {
        auto* p = sc->add_subcommand(paused ? "pause" : "resume",
                                     paused ? "Enqueue no tick of the schedule until resumed"
                                            : "Tick again, from the next tick after now");
        add_named(p, *a);
        p->add_option("--reason", a->reason, "Why, recorded in schedule_events");
        p->callback([&global, &action, a, paused] {
            action = [&global, a, paused] { return run_pause(global, *a, paused); };
        });
    }

    auto* rm = sc->add_subcommand("remove", "Remove a schedule; the jobs it enqueued stay");
    add_named(rm, *a);
    rm->add_option("--reason", a->reason, "Why, recorded in schedule_events");
    bind_action(rm, global, action, a, run_remove);

    auto* ls = sc->add_subcommand("list", "Each schedule with its last and next tick (UTC)");
    base::add_org(*ls, a->spec.org_id, "Only this organization");
    ls->add_flag("--json", a->json, "One JSON document, for scripts");
    bind_action(ls, global, action, a, run_list);
}

}  // namespace aclaim::ctl
