#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "common/base/clock.hpp"

namespace aclaim::coordinator {

/// What /readyz answers.
struct Readiness {
    bool ready = false;
    std::string detail;  ///< one line: what was checked, or what is wrong
};

/// Whether the database can be reached and carries every migration this binary knows, asked on
/// a short-lived connection of its own so that a probe never waits behind a DB thread's work. A
/// result is reused for `cache_for`, so that probes arriving together cost one connection.
class ReadinessProbe {
  public:
    /// Bounds each check: connecting, and each statement of it.
    static constexpr int kTimeoutSeconds = 2;

    /// `clock` (whose monotonic time ages a result) must outlive the probe.
    ReadinessProbe(const std::string& dsn, const base::Clock& clock,
                   std::chrono::milliseconds cache_for = std::chrono::seconds(1));

    /// Thread-safe; concurrent callers wait for one check instead of each opening a connection.
    Readiness check();

  private:
    Readiness check_now() const;

    std::string dsn_;
    const base::Clock& clock_;
    std::chrono::milliseconds cache_for_;
    std::mutex mutex_;
    Readiness last_;
    std::chrono::steady_clock::time_point checked_at_{};
    bool checked_ = false;
};

/// The DSN with libpq's connect_timeout set, in whichever form (URI or key=value) it came,
/// unless it already names one.
std::string with_connect_timeout(const std::string& dsn, int seconds);

}  // namespace aclaim::coordinator
