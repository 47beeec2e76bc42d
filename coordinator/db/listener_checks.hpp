#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/store/assignment.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/db/events.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/db/statement_watchdog.hpp"
#include "coordinator/metrics/metrics.hpp"

namespace aclaim::coordinator {

// PostgreSQL puts no access control on NOTIFY: any login that can connect to the database can
// send any payload on any channel. So what the listener hears may wake something up, or ask for
// a check, but never decides what a worker is told (docs/security.md, "Notifications wake, never
// decide"). These are the listener's parsers and its one check against the rows.

/// An aclaim_jobs payload, "org" or "org:queue": the parked claims it may wake. Nothing when
/// malformed.
std::optional<OrgWoken> parse_wake(std::string_view payload);

/// True when an aclaim_schedule payload is what aclaim_scheduled sends (a run_at in microseconds).
/// Its value is never used: the promoter re-reads the earliest run_at from the table.
bool valid_schedule_payload(std::string_view payload);

/// What an aclaim_revoke notification claims: that `generation` of `job`, of `org`, held by
/// `worker`, was cancelled.
struct RevokeClaim {
    store::OrgId org = 0;
    store::JobId job = 0;
    store::Generation generation = 0;
    std::string worker;
};

/// Parses "org:job:generation:reason:worker" (the worker last, as its name may hold ':'). Nothing
/// when malformed, or when the reason is not one a row can bear out: aclaim_cancel_jobs sends
/// only "cancelled".
std::optional<RevokeClaim> parse_revoke(std::string_view payload);

/// Drops and counts what a channel said that cannot be acted on. Logs the first drop of each
/// channel and then one at every power of two, with the payload clipped and its control
/// characters escaped: a spray must neither flood the log nor forge lines in it.
class Forgeries {
  public:
    explicit Forgeries(NotificationCounters& counters) : counters_(counters) {}

    void drop(NotificationCounters::Channel channel, std::string_view payload,
              std::string_view why);
    /// For logs: at most kShownBytes of `payload`, control characters and bytes past ASCII
    /// written as \xNN.
    static std::string printable(std::string_view payload);

    static constexpr std::size_t kShownBytes = 120;

  private:
    NotificationCounters& counters_;
};

/// aclaim_revoke notifications heard and not yet checked. check() reads their jobs' rows in one
/// statement per kBatch (store::sql::kCancelledHolders) and posts those the rows bear out as
/// Reclaimed, in the order heard; the others are dropped as forgeries. Listener thread only.
class RevokeChecks {
  public:
    /// The most notifications one statement checks.
    static constexpr std::size_t kBatch = 1000;
    /// Kept across a lost connection at most: a spray while the database is away must not grow
    /// without bound. Past it the oldest are dropped, uncounted as forged, and a warning logged.
    static constexpr std::size_t kMaxPending = 100'000;

    RevokeChecks(NotificationCounters& counters, Forgeries& forgeries)
        : counters_(counters), forgeries_(forgeries) {}

    void add(RevokeClaim claim, std::string payload);
    bool empty() const { return pending_.empty(); }
    std::size_t pending() const { return pending_.size(); }

    /// Prepares the statement on a new connection.
    static void prepare(pqxx::connection& conn);
    /// Checks every pending notification on `conn`, each statement under `watch` with the
    /// deadline of `connections`. Throws what libpqxx throws (or pqxx::broken_connection when the
    /// watchdog cut a statement); the notifications not yet checked then stay pending, for the
    /// next connection.
    void check(pqxx::connection& conn, const Connections& connections,
               StatementWatchdog::Watch& watch, Poster& poster);

  private:
    struct Pending {
        RevokeClaim claim;
        std::string payload;  ///< for the log of a forgery
    };

    NotificationCounters& counters_;
    Forgeries& forgeries_;
    std::vector<Pending> pending_;
};

}  // namespace aclaim::coordinator
