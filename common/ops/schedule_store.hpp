#pragma once

// Schedules (schema/baseline/tables.sql): periodic jobs an organization enqueues at every tick of
// a cron expression in a time zone. The operator adds, pauses, resumes and removes them
// (aclaimctl schedule, audited in schedule_events); each coordinator's scheduler enqueues the
// ticks that came due (coordinator/db/scheduler.hpp), each once however many coordinators run.

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/base/clock.hpp"
#include "common/base/queue_name.hpp"
#include "common/ops/cron.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::ops {

/// What a scheduler does with the ticks missed while no coordinator ran.
enum class MissedTicks {
    Skip,     ///< enqueue the latest of them only
    CatchUp,  ///< enqueue every one, oldest first, at most kCatchUpPerPass a pass
};

std::string_view to_string(MissedTicks m);
/// "skip" or "catch_up" (also "catch-up"); nothing for anything else.
std::optional<MissedTicks> missed_ticks_from(std::string_view text);

/// The most ticks of one schedule a catch-up pass enqueues; the rest wait for the next pass.
inline constexpr int kCatchUpPerPass = 100;

/// How long a tick's record (schedule_ticks) is kept: what `aclaimctl check` can prove was
/// enqueued once.
inline constexpr base::Duration kTicksKept = std::chrono::days(31);

/// A schedule as the operator writes it.
struct ScheduleSpec {
    store::OrgId org_id = 0;
    std::string name;
    std::string cron;       ///< five fields (Cron)
    std::string time_zone;  ///< IANA name
    std::string queue{base::kDefaultQueue};
    std::string payload;  ///< {schedule}, {tick} and {tick_us} filled per tick (render_payload)
    int priority = 0;
    bool paused = false;
    MissedTicks missed = MissedTicks::Skip;
};

/// A schedule as stored.
struct Schedule : ScheduleSpec {
    std::int64_t id = 0;
    std::optional<base::Instant> last_tick;
    base::Instant next_tick{};
};

/// A schedule's job payload for one tick: {schedule} is its name, {tick} the tick in ISO 8601
/// (UTC, to the second), {tick_us} the tick in microseconds since the epoch.
std::string render_payload(const std::string& payload, const std::string& name, base::Instant tick);

/// "2026-03-29T01:00:00Z".
std::string iso_utc(base::Instant t);

/// The ticks one pass enqueues for a schedule whose next tick `due` came (due <= now), and the
/// next tick it leaves: skip takes the latest tick up to now, catch_up every tick from `due` up
/// to now (at most kCatchUpPerPass; `next` is then still due).
struct TickPlan {
    std::vector<base::Instant> ticks;
    base::Instant next{};
};
TickPlan plan_ticks(const Cron& cron, ZoneOffsets& zone, MissedTicks missed, base::Instant due,
                    base::Instant now);

/// A schedule name already taken in its organization.
class ScheduleExists : public std::invalid_argument {
  public:
    using std::invalid_argument::invalid_argument;
};
/// A schedule the organization does not have.
class UnknownSchedule : public std::invalid_argument {
  public:
    UnknownSchedule(store::OrgId org, const std::string& name)
        : std::invalid_argument("organization " + std::to_string(org) + " has no schedule '" +
                                name + "'") {}
};

/// What one scheduler pass did.
struct SchedulePass {
    /// Schedules ticked by this pass (another scheduler took the rest).
    int schedules = 0;
    /// Jobs made.
    int enqueued = 0;
    /// A schedule still has ticks due (a catch-up, or more due than one pass takes).
    bool more = false;
    /// Schedules whose tick the database refused; they stay due.
    int failed = 0;
    /// Why the last of them was refused.
    std::string error;
};

/// Schedules over one connection; time always comes from the caller.
class ScheduleStore {
  public:
    /// The most schedules one scheduler pass ticks.
    static constexpr int kSchedulesPerPass = 100;

    explicit ScheduleStore(pqxx::connection& conn) : conn_(conn) {}

    /// Adds a schedule; its first tick is the first after `now`. Throws CronError,
    /// ScheduleExists, or std::invalid_argument for an unknown zone or queue name.
    Schedule add(const ScheduleSpec& spec, const std::string& actor, base::Instant now);
    /// Pauses (no tick is enqueued while paused) or resumes a schedule, audited. A resumed
    /// schedule ticks next at its first tick after `now`: what fell due while paused is dropped.
    /// Throws UnknownSchedule.
    Schedule set_paused(store::OrgId org, const std::string& name, bool paused,
                        const std::string& actor, const std::string& reason, base::Instant now);
    /// Removes a schedule at `now`, audited with who and why; jobs it enqueued stay. Throws
    /// UnknownSchedule.
    void remove(store::OrgId org, const std::string& name, base::Instant now,
                const std::string& actor, const std::string& reason);
    /// The schedules of one organization, or of all, by organization and name.
    std::vector<Schedule> list(std::optional<store::OrgId> org);

    /// One scheduler pass: enqueues the ticks due at `now`, one transaction per schedule, each
    /// tick's job through aclaim_enqueue_job. Sees every organization (row security's "system"
    /// scope). Safe to run at once on any number of connections.
    SchedulePass run_due(base::Instant now);

  private:
    /// Ticks one due schedule; 0 when another scheduler took it.
    int tick(std::int64_t id, base::Instant now, bool& more);

    pqxx::connection& conn_;
};

}  // namespace aclaim::ops
