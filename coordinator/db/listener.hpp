#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/base/backoff.hpp"
#include "common/base/periodic_task.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/db/statement_watchdog.hpp"

namespace aclaim::coordinator {

/// LISTENs with a connection of its own on three channels:
///   aclaim_jobs      "org:queue" (or "org": every queue) for every committed enqueue, promotion,
///                    reclaim, release or retry: posts OrgWoken, so that parked claims retry
///                    exactly when work may have appeared in a queue they serve, instead of
///                    polling the table;
///   aclaim_schedule  a job was scheduled for later: calls on_schedule, which makes the promoter
///                    re-read the earliest run_at;
///   aclaim_revoke    "org:job:generation:reason:worker" for an assigned job cancelled: posts a
///                    Reclaimed with that reason, so that its holder is told at once.
/// Whenever it starts listening (first connect or reconnect) it posts ListenerReady and calls
/// on_schedule, because notifications sent while it was not listening are lost.
///
/// A server that hangs sends no notifications and no error either, and a frozen process's kernel
/// still answers keepalives, so the listener also runs a trivial statement under the watchdog
/// every kPingEvery: a connection that does not answer it by the deadline is cut and the listener
/// reconnects, to whichever host a multi-host DSN now finds writable.
class Listener {
  public:
    static constexpr const char* kChannel = "aclaim_jobs";
    static constexpr const char* kScheduleChannel = "aclaim_schedule";
    static constexpr const char* kRevokeChannel = "aclaim_revoke";
    static constexpr std::chrono::seconds kPingEvery{5};

    /// `connections` (and its watchdog, whose clock times the pings) must outlive the listener.
    Listener(const Connections& connections, Mailbox& mailbox,
             std::function<void()> on_schedule = {});
    ~Listener();
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    void start();
    /// Returns within about one wait step (100 ms) plus any connection attempt in progress.
    void stop();

  private:
    void listen_once(Poster& poster, common::Backoff& backoff, StatementWatchdog::Watch& watch);

    const Connections& connections_;
    Mailbox& mailbox_;
    std::function<void()> on_schedule_;
    bool down_reported_ = false;  ///< listener thread only
    /// One step listens until the connection fails or a stop is asked; the next comes after the
    /// reconnection backoff, in real time.
    common::PeriodicTask task_{common::real_time()};
};

}  // namespace aclaim::coordinator
