#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/base/backoff.hpp"
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

    /// The watchdog (whose clock times the pings) must outlive the listener.
    Listener(std::string dsn, Mailbox& mailbox, StatementWatchdog& watchdog,
             std::chrono::milliseconds deadline, std::function<void()> on_schedule = {});
    ~Listener();
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    void start();
    /// Returns within about one wait step (100 ms) plus any connection attempt in progress.
    void stop();

  private:
    void run();
    void listen_once(Poster& poster, common::Backoff& backoff, StatementWatchdog::Watch& watch);
    void pause(std::chrono::milliseconds d) const;

    std::string dsn_;
    Mailbox& mailbox_;
    StatementWatchdog& watchdog_;
    const std::chrono::milliseconds deadline_;
    std::function<void()> on_schedule_;
    std::atomic<bool> stop_{false};
    /// Ends a pause as soon as stop() is asked, without reading any clock.
    mutable std::mutex pause_mutex_;
    mutable std::condition_variable pause_wake_;
    bool down_reported_ = false;  ///< listener thread only
    std::thread thread_;
};

}  // namespace aclaim::coordinator
