#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/base/clock.hpp"
#include "common/base/periodic_task.hpp"

namespace aclaim::coordinator {

/// Gives every database call a deadline the server cannot miss by hanging. A server that is
/// frozen (SIGSTOP, a stalled disk, a paused VM) or sits behind a route that stopped forwarding
/// still acknowledges TCP, so neither statement_timeout nor keepalives ever fire and the calling
/// thread waits in libpq for good. A thread arms its Watch around each call; one sweeping thread
/// shuts down the socket of every call past its deadline, so that libpq's wait ends with a broken
/// connection, which the caller drops and replaces. The socket is shut down, never closed, so its
/// descriptor cannot be reused under the thread that still holds it.
class StatementWatchdog {
  public:
    /// One connection-owning thread's slot.
    class Watch {
      public:
        /// Makes the watchdog cut `socket` once the clock's monotonic time reaches `deadline`.
        void arm(int socket, base::MonotonicTime deadline);
        /// Ends the watch. True when the watchdog cut the connection while armed: the call's
        /// failure is the deadline's doing.
        bool disarm();

      private:
        friend class StatementWatchdog;
        /// Cuts the connection when armed and past the deadline; true when it did.
        bool cut_if_due(base::MonotonicTime now);

        std::mutex mutex_;
        int socket_ = -1;
        base::MonotonicTime deadline_{};
        bool cut_ = false;
        std::string name_;
    };

    /// `clock` decides when a deadline has passed; `step` is how often the sweeping thread looks.
    explicit StatementWatchdog(const base::Clock& clock,
                               std::chrono::milliseconds step = std::chrono::milliseconds(50));

    /// A new slot, named in the log when it is cut. Thread-safe.
    std::shared_ptr<Watch> watch(std::string name);

    /// The clock the deadlines are on.
    const base::Clock& clock() const { return clock_; }

    void start();
    void stop() { task_.stop(); }

    /// One pass over every slot; returns how many connections it cut. The sweeping thread calls
    /// it every step; tests call it directly.
    int sweep();

    /// Connections cut since start.
    std::uint64_t cuts() const;

  private:
    const base::Clock& clock_;
    const std::chrono::milliseconds step_;
    mutable std::mutex mutex_;
    std::vector<std::shared_ptr<Watch>> watches_;
    std::uint64_t cuts_ = 0;
    /// Sweeps in real time: under a simulated clock the deadlines move only when it is advanced,
    /// and a sweep finds them then.
    base::PeriodicTask task_{base::real_time()};
};

/// Arms a watch for one scope.
class ArmedWatch {
  public:
    ArmedWatch(StatementWatchdog::Watch& watch, int socket, base::MonotonicTime deadline)
        : watch_(watch) {
        watch_.arm(socket, deadline);
    }
    ~ArmedWatch() { release(); }
    ArmedWatch(const ArmedWatch&) = delete;
    ArmedWatch& operator=(const ArmedWatch&) = delete;

    /// Ends the watch early; true when the watchdog cut the connection.
    bool release() {
        if (released_) return cut_;
        released_ = true;
        cut_ = watch_.disarm();
        return cut_;
    }

  private:
    StatementWatchdog::Watch& watch_;
    bool released_ = false;
    bool cut_ = false;
};

}  // namespace aclaim::coordinator
