#pragma once

// Watches the ROUTER for connections it could not accept. libzmq retries a failed accept()
// silently: a coordinator at its descriptor limit would turn workers away with nothing said.
// Each failure is counted (aclaim_accept_failures_total) and a warning names the error, at most
// once per kReportEvery with the count since the last one. Router thread only.

#include <chrono>
#include <cstdint>
#include <zmq.hpp>

#include "common/base/clock.hpp"
#include "coordinator/metrics/metrics.hpp"

namespace aclaim::coordinator {

class AcceptMonitor {
  public:
    static constexpr auto kReportEvery = std::chrono::seconds(10);

    /// Starts monitoring `router` (bound or not) over an inproc pair in `context`.
    AcceptMonitor(zmq::context_t& context, zmq::socket_t& router, Metrics& metrics,
                  const common::Clock& clock);
    ~AcceptMonitor();
    AcceptMonitor(const AcceptMonitor&) = delete;
    AcceptMonitor& operator=(const AcceptMonitor&) = delete;

    /// The socket to poll for ZMQ_POLLIN.
    zmq::socket_t& socket() { return events_; }
    /// Reads every event waiting; counts and reports the failed accepts.
    void drain();
    /// Stops monitoring; call before the ROUTER is closed.
    void stop();

  private:
    zmq::socket_t& router_;
    Metrics& metrics_;
    const common::Clock& clock_;
    zmq::socket_t events_;
    bool monitoring_ = false;
    std::uint64_t unreported_ = 0;
    int last_errno_ = 0;
    common::MonotonicTime next_report_{};
};

}  // namespace aclaim::coordinator
