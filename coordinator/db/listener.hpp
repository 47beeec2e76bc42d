#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "common/base/backoff.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/db/statement_watchdog.hpp"

namespace aclaim::coordinator {

/// LISTENs on the aclaim_jobs channel with a connection of its own and posts an OrgWoken event
/// for every committed enqueue, reclaim, release or retryable failure, so that parked claims
/// retry exactly when work may have appeared instead of polling the table. Whenever it starts
/// listening (first connect or reconnect) it posts ListenerReady, because notifications sent
/// while it was not listening are lost.
///
/// A server that hangs sends no notifications and no error either, and a frozen process's kernel
/// still answers keepalives, so the listener also runs a trivial statement under the watchdog
/// every kPingEvery: a connection that does not answer it by the deadline is cut and the listener
/// reconnects, to whichever host a multi-host DSN now finds writable.
class Listener {
  public:
    static constexpr const char* kChannel = "aclaim_jobs";
    static constexpr std::chrono::seconds kPingEvery{5};

    /// The watchdog (whose clock times the pings) must outlive the listener.
    Listener(std::string dsn, Mailbox& mailbox, StatementWatchdog& watchdog,
             std::chrono::milliseconds deadline);
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
    std::atomic<bool> stop_{false};
    /// Ends a pause as soon as stop() is asked, without reading any clock.
    mutable std::mutex pause_mutex_;
    mutable std::condition_variable pause_wake_;
    bool down_reported_ = false;  ///< listener thread only
    std::thread thread_;
};

}  // namespace aclaim::coordinator
