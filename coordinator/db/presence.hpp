#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/base/clock.hpp"
#include "common/base/periodic_task.hpp"
#include "common/store/assignment.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

/// A worker connected to this coordinator: its name and the queues its sessions serve (in name
/// order, each once).
struct ConnectedWorker {
    std::string name;
    std::vector<std::string> queues;
};

/// The workers connected to this coordinator, per organization: the router thread writes it
/// (it owns the sessions), the publisher reads it.
class PresenceBoard {
  public:
    using Workers = std::map<store::OrgId, std::vector<ConnectedWorker>>;
    /// The connected workers, in name order, per organization. Both sides only swap a
    /// pointer under the lock: the router thread that sets the list never waits on the
    /// publisher reading the last one, whatever their size.
    void set(Workers workers);
    std::shared_ptr<const Workers> get() const;

  private:
    mutable std::mutex mutex_;
    std::shared_ptr<const Workers> workers_ = std::make_shared<const Workers>();
};

/// Tells the database every interval how many workers are connected to this coordinator in each
/// organization (coordinator_presence, schema/baseline/tables.sql), so that the console can show
/// connected workers per coordinator although sessions live only in a coordinator's memory. A row
/// not refreshed for three intervals is a coordinator that is gone or cut off: readers leave it
/// out, any publisher removes it after an hour, and a coordinator that stops cleanly removes its
/// own. Nothing depends on these rows for correctness: a failed write is logged and tried again at
/// the next interval, on a new connection when the old one broke. Runs under the watchdog.
class PresencePublisher {
  public:
    /// `name` tells coordinators apart (host and process); `endpoint` is where workers reach it.
    /// `connections` (and its watchdog) must outlive it.
    PresencePublisher(PresenceOptions options, const Connections& connections, std::string name,
                      std::string endpoint, const base::Clock& clock, PresenceBoard& board);
    /// Out of line, where Session is complete.
    ~PresencePublisher();

    void start();
    /// Stops the thread and removes this coordinator's rows (within the deadline).
    void stop() { task_.stop(); }

  private:
    /// One publication (or, withdrawing, the removal of this coordinator's rows).
    void pass(bool withdraw);

    const PresenceOptions options_;
    const std::string name_;
    const std::string endpoint_;
    const base::Clock& clock_;
    PresenceBoard& board_;
    const Connections& connections_;
    /// The publisher thread's connection, opened at its first pass.
    struct Session;
    std::unique_ptr<Session> session_;
    /// The pace is real time, as the reaper's: a simulated clock never stops the thread.
    base::PeriodicTask task_{base::real_time()};
};

}  // namespace aclaim::coordinator
