#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/base/backoff.hpp"
#include "common/base/periodic_task.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/db/listener_checks.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/db/statement_watchdog.hpp"
#include "coordinator/metrics/metrics.hpp"

namespace aclaim::coordinator {

/// LISTENs with a connection of its own on three channels. Any database login can NOTIFY on any
/// channel (PostgreSQL has no access control on it), so a notification wakes or asks for a check
/// and never decides what a worker is told (docs/security.md, "Notifications wake, never decide"):
///   aclaim_jobs      "org:queue" (or "org": every queue) for every committed enqueue, promotion,
///                    reclaim, release or retry: posts OrgWoken, so that parked claims retry
///                    exactly when work may have appeared in a queue they serve, instead of
///                    polling the table. A wake only: the claims it sets off are each decided by
///                    the claim statement, for the claim's own organization; the worst a forged
///                    one does is one extra claim attempt of each parked claim of that queue (a
///                    flood of them is load on the DB threads, not a decision);
///   aclaim_schedule  a job was scheduled for later: calls on_schedule, which makes the promoter
///                    re-read the earliest run_at from the table (the payload is not used);
///   aclaim_revoke    "org:job:generation:reason:worker" for an assigned job cancelled. Decides
///                    what a worker is told, so it is checked first: every notification heard in
///                    one wait is read against its job's row in one statement on this
///                    connection (RevokeChecks), and only those whose row shows that generation
///                    cancelled while that worker held it are posted, as Reclaimed, so that the
///                    holder is told at once.
/// A malformed payload, or a revocation its row does not bear out, is dropped and counted in
/// aclaim_forged_notifications_total{channel}.
/// Whenever it starts listening (first connect or reconnect) it posts ListenerReady and calls
/// on_schedule, because notifications sent while it was not listening are lost; revocations
/// heard and not yet checked when a connection is lost are checked on the next one.
///
/// A server that hangs sends no notifications and no error either, and a frozen process's kernel
/// still answers keepalives, so the listener also runs a trivial statement under the watchdog
/// every kPingEvery: a connection that does not answer it by the deadline is cut and the listener
/// reconnects, to whichever host a multi-host DSN now finds writable. The revoke check runs under
/// the same watchdog.
class Listener {
  public:
    static constexpr const char* kChannel = "aclaim_jobs";
    static constexpr const char* kScheduleChannel = "aclaim_schedule";
    static constexpr const char* kRevokeChannel = "aclaim_revoke";
    static constexpr std::chrono::seconds kPingEvery{5};

    /// `connections` (and its watchdog, whose clock times the pings) and `counters` must outlive
    /// the listener.
    Listener(const Connections& connections, Mailbox& mailbox, NotificationCounters& counters,
             std::function<void()> on_schedule = {});

    void start();
    /// Returns within about one wait step (100 ms) plus any connection attempt in progress.
    void stop() { task_.stop(); }

  private:
    void listen_once(Poster& poster, base::Backoff& backoff, StatementWatchdog::Watch& watch);

    const Connections& connections_;
    Mailbox& mailbox_;
    Forgeries forgeries_;
    RevokeChecks revokes_;  ///< listener thread only
    std::function<void()> on_schedule_;
    bool down_reported_ = false;  ///< listener thread only
    /// One step listens until the connection fails or a stop is asked; the next comes after the
    /// reconnection backoff, in real time.
    base::PeriodicTask task_{base::real_time()};
};

}  // namespace aclaim::coordinator
