#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "common/base/clock.hpp"
#include "common/base/periodic_task.hpp"
#include "coordinator/db/connections.hpp"

namespace aclaim::coordinator {

/// What the scheduler and the ager have in common: a pass of work on a connection of its own
/// (acting as the row-security role), under the statement watchdog, repeated on a thread of its
/// own every interval, and at once again while a pass says work is left. A pass that fails (its
/// connection broken, its statement refused or cut at the watchdog's deadline) drops the
/// connection and is tried again at the next interval on a new one; the failure is logged once
/// until a pass succeeds again. The pace between passes is real time, so that a simulated clock
/// never stops the thread nor spins it.
class WatchedPass {
  public:
    /// The pass: true when it stopped with work left (a batch full), for another at once.
    using Pass = std::function<bool(pqxx::connection&)>;
    /// `name` prefixes its log lines; `application_name` names its connection; `resumed` is
    /// logged when a pass succeeds after failures. `connections` (and its watchdog) and `clock`
    /// must outlive it.
    WatchedPass(std::string name, std::string application_name, std::string resumed,
                const Connections& connections, const common::Clock& clock);

    /// Starts the thread, unless it runs already or `interval` is not positive (off).
    void start(std::chrono::milliseconds interval, Pass pass);
    /// Returns after the pass in progress, if any, ends.
    void stop() { task_.stop(); }

  private:
    common::PeriodicTask::Wait run_once(std::chrono::milliseconds interval, const Pass& pass);

    const std::string name_;
    const std::string application_name_;
    const std::string resumed_;
    const Connections& connections_;
    const common::Clock& clock_;
    std::shared_ptr<StatementWatchdog::Watch> watch_;
    std::unique_ptr<pqxx::connection> conn_;
    bool failing_ = false;
    common::PeriodicTask task_{common::real_time()};
};

}  // namespace aclaim::coordinator
