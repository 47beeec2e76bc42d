#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <utility>

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
                const Connections& connections, const base::Clock& clock);

    /// Starts the thread, unless it runs already or `interval` is not positive (off).
    void start(std::chrono::milliseconds interval, Pass pass);
    /// Returns after the pass in progress, if any, ends.
    void stop() { task_.stop(); }

  private:
    base::PeriodicTask::Wait run_once(std::chrono::milliseconds interval, const Pass& pass);

    const std::string name_;
    const std::string application_name_;
    const std::string resumed_;
    const Connections& connections_;
    const base::Clock& clock_;
    std::shared_ptr<StatementWatchdog::Watch> watch_;
    std::unique_ptr<pqxx::connection> conn_;
    bool failing_ = false;
    base::PeriodicTask task_{base::real_time()};
};

/// A background service built on a WatchedPass: `Self` (which derives from it) has
/// `pass(pqxx::connection&)`, returning what the pass did with `more` true when it stopped with
/// work left, and `Options` has `interval_ms`, the pause between passes (0: off). The scheduler
/// and the ager are such services; each reads its options and decides what is due on the
/// injected clock (a test moves a ManualClock and calls pass()).
template <class Self, class Options>
class WatchedService {
  public:
    void start() {
        task_.start(std::chrono::milliseconds(options_.interval_ms),
                    [this](pqxx::connection& conn) { return self().pass(conn).more; });
    }
    /// Returns after the pass in progress, if any, ends. `Self`'s destructor calls it, so that no
    /// pass runs on a service partly destroyed.
    void stop() { task_.stop(); }

  protected:
    /// `name`, `application_name` and `resumed` as WatchedPass takes them. `connections` (and its
    /// watchdog) and `clock` must outlive it.
    WatchedService(Options options, std::string name, std::string application_name,
                   std::string resumed, const Connections& connections, const base::Clock& clock)
        : options_(options),
          clock_(clock),
          task_(std::move(name), std::move(application_name), std::move(resumed), connections,
                clock) {}
    ~WatchedService() = default;
    WatchedService(const WatchedService&) = delete;
    WatchedService& operator=(const WatchedService&) = delete;

    const Options options_;
    const base::Clock& clock_;

  private:
    Self& self() { return static_cast<Self&>(*this); }

    WatchedPass task_;
};

}  // namespace aclaim::coordinator
