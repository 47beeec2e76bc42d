#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "common/base/clock.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/db/events.hpp"
#include "coordinator/db/presence.hpp"
#include "coordinator/db/statement_watchdog.hpp"
#include "coordinator/db/work_queue.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"
#include "coordinator/router/accept_monitor.hpp"
#include "coordinator/router/dispatcher.hpp"
#include "coordinator/router/inbound.hpp"
#include "coordinator/router/outcomes.hpp"
#include "coordinator/router/parked_claims.hpp"
#include "coordinator/router/replier.hpp"
#include "coordinator/router/revocations.hpp"
#include "coordinator/router/sessions.hpp"
#include "coordinator/router/wake_counter.hpp"

namespace aclaim::coordinator {

class DbPool;
class Listener;
class Mailbox;
class Reaper;
class ResultNotifier;
class Retention;
class Scheduler;
class Ager;
class ZapHandler;

/// The ZeroMQ front end: one ROUTER socket served by one thread, which alone sends on it, in
/// front of the DB threads, the lease reaper and the job notification listener. Holds no
/// authority of its own: every decision is a store statement, so coordinators can be restarted
/// or run side by side on one database.
class Coordinator {
  public:
    /// The clock decides lease times; it must outlive the coordinator.
    Coordinator(CoordinatorOptions options, const base::Clock& clock);
    ~Coordinator();
    Coordinator(const Coordinator&) = delete;
    Coordinator& operator=(const Coordinator&) = delete;

    /// Binds, then serves in a thread of its own. Throws if the options are unusable, the bind
    /// fails or requested migrations cannot be applied.
    void start();
    /// Binds if not yet bound, then serves in the calling thread until stopped and drained.
    void run();
    /// Asks the serving thread to drain and return. Safe from any thread; does not wait.
    void request_stop();
    /// request_stop(), then waits for the thread start() created.
    void stop();

    /// The endpoint actually bound, e.g. tcp://127.0.0.1:41234 for a bind on port *.
    const std::string& endpoint() const { return endpoint_; }
    const Metrics& metrics() const { return metrics_; }
    /// CURVE handshakes accepted and refused; nothing in plaintext mode.
    const AuthCounters* auth_counters() const;
    const CoordinatorOptions& options() const { return options_; }

  private:
    void bind();
    void serve();
    void shutdown();
    std::chrono::milliseconds poll_timeout(SteadyClock::time_point now) const;
    /// How long a drain waits for requests once nothing is at the database.
    std::chrono::milliseconds drain_quiet() const;
    void begin_drain();
    void housekeeping(SteadyClock::time_point now);
    /// Closes the sessions of the connections that closed, dropping their parked claims.
    void close_connections();

    /// Before inbound_ and outcomes_, which keep a reference to its router slice.
    CoordinatorOptions options_;
    const base::Clock& clock_;
    Metrics metrics_;
    /// Before the DB threads, the reaper and the listener, whose statements it watches.
    StatementWatchdog watchdog_;
    /// How every thread below opens its connections.
    Connections connections_;

    zmq::context_t context_;
    /// Open connections against the descriptor limit: counted by accept_monitor_, read by zap_.
    std::unique_ptr<ConnectionBudget> connection_budget_;
    std::unique_ptr<ZapHandler> zap_;  ///< before router_: it must outlive the ROUTER's handshakes
    zmq::socket_t router_;
    /// After router_: it stops monitoring the ROUTER before the ROUTER is closed.
    std::unique_ptr<AcceptMonitor> accept_monitor_;
    std::unique_ptr<Mailbox> mailbox_;
    WorkQueue queue_;
    /// Before pool_, whose threads tell it of committed completions.
    std::unique_ptr<ResultNotifier> results_;
    std::unique_ptr<DbPool> pool_;
    std::unique_ptr<Reaper> reaper_;
    std::unique_ptr<Retention> retention_;
    std::unique_ptr<Scheduler> scheduler_;
    std::unique_ptr<Ager> ager_;
    std::unique_ptr<Listener> listener_;
    PresenceBoard presence_board_;
    std::unique_ptr<PresencePublisher> presence_;
    std::string endpoint_;
    bool bound_ = false;

    // Router thread only. Each part calls only those declared before it.
    SessionTable sessions_;
    ParkedClaims parked_;
    WakeCounter wakes_;
    Replier replier_;
    Dispatcher dispatcher_;
    Revocations revocations_;
    Inbound inbound_;
    Outcomes outcomes_;
    SteadyClock::time_point drain_until_{};
    /// The drain may end once nothing is at the database and this has passed.
    base::MonotonicTime drain_quiet_until_{};
    SteadyClock::time_point next_housekeeping_{};
    /// SessionTable::membership() when the presence board was last set.
    std::uint64_t published_membership_ = 0;

    std::atomic<bool> stop_requested_{false};
    std::thread thread_;
};

}  // namespace aclaim::coordinator
