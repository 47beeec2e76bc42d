#pragma once

// Watches the ROUTER's connections. libzmq retries a failed accept() silently: a coordinator at
// its descriptor limit would turn workers away with nothing said. Each failure is counted
// (aclaim_accept_failures_total) and a warning names the error, at most once per kReportEvery
// with the count since the last one. A ROUTER is not told either when a peer goes away: the
// monitor's disconnect events name the descriptor of each connection that closed, which the
// router thread matches to sessions (Session::fd), and its accepts and disconnects count the
// connections open, against the descriptor limit. Router thread only, but for the count, which
// the ZAP handler reads (ConnectionBudget).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/base/clock.hpp"
#include "common/store/assignment.hpp"
#include "coordinator/metrics/metrics.hpp"

namespace aclaim::coordinator {

/// How many worker connections are open against how many the descriptor limit allows, shared
/// between the router thread (which counts) and the ZAP handler (which, once the connections are
/// crowded, refuses handshakes of keys that already have a session, so that the descriptors left
/// are a reserve for keys that have none).
class ConnectionBudget {
  public:
    /// `capacity`: the connections the process can hold; `reserve`: how many of them are kept for
    /// keys without a session. Refusals are counted in `metrics` when given (which must outlive
    /// the budget).
    // The two counts are named in the comment above.
    // NOLINTNEXTLINE(bugprone-easily-swappable-parameters)
    ConnectionBudget(std::size_t capacity, std::size_t reserve, Metrics* metrics = nullptr)
        : capacity_(capacity), reserve_(reserve), metrics_(metrics) {}

    /// The capacity for a process at this descriptor limit: what the coordinator itself needs
    /// (its database connections, sockets, logs) is not for workers: kOwnDescriptors, or a quarter
    /// of a limit smaller than four times that.
    static std::size_t capacity_for(std::uint64_t descriptor_limit);
    /// The current process's RLIMIT_NOFILE soft limit.
    static std::uint64_t descriptor_limit();
    static constexpr std::uint64_t kOwnDescriptors = 256;

    void opened() { open_.fetch_add(1, std::memory_order_relaxed); }
    void closed() {
        // A disconnect whose accept was not seen (monitoring began after it) must not wrap.
        auto n = open_.load(std::memory_order_relaxed);
        while (n > 0 && !open_.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
        }
    }
    std::size_t open() const { return open_.load(std::memory_order_relaxed); }
    /// Whether only the reserve is left: then only keys without a session may connect.
    bool crowded() const { return open() + reserve_ >= capacity_; }

    /// The router thread: the key (a worker name of an organization) has a session now, or none.
    void set_has_sessions(store::OrgId org, const std::string& name, bool any);
    /// The ZAP handler: whether a handshake of this key may go on. Refused (and counted) only
    /// while crowded, and only when the key has a session already.
    bool admits(store::OrgId org, const std::string& name);

  private:
    const std::size_t capacity_;
    const std::size_t reserve_;
    Metrics* metrics_;
    std::atomic<std::size_t> open_{0};
    mutable std::mutex mutex_;
    std::set<std::pair<store::OrgId, std::string>> with_sessions_;  ///< under mutex_
};

class AcceptMonitor {
  public:
    static constexpr auto kReportEvery = std::chrono::seconds(10);

    /// Starts monitoring `router` (bound or not) over an inproc pair in `context`; `budget`
    /// (optional) is told of every connection opened and closed. All must outlive it.
    AcceptMonitor(zmq::context_t& context, zmq::socket_t& router, Metrics& metrics,
                  const base::Clock& clock, ConnectionBudget* budget = nullptr);
    ~AcceptMonitor();
    AcceptMonitor(const AcceptMonitor&) = delete;
    AcceptMonitor& operator=(const AcceptMonitor&) = delete;

    /// The socket to poll for ZMQ_POLLIN.
    zmq::socket_t& socket() { return events_; }
    /// Reads every event waiting; counts and reports the failed accepts, keeps the descriptors of
    /// the connections that closed for take_closed().
    void drain();
    /// Drains, then returns (and forgets) the descriptors of the connections closed since the
    /// last call. Called right before the ROUTER is read: a closed connection's descriptor can be
    /// given to a new connection only after its disconnect event was sent, so a message read
    /// after this call that carries the descriptor is the new connection's.
    std::vector<int> take_closed();
    /// Stops monitoring; call before the ROUTER is closed.
    void stop();

  private:
    zmq::socket_t& router_;
    Metrics& metrics_;
    const base::Clock& clock_;
    ConnectionBudget* budget_;
    zmq::socket_t events_;
    bool monitoring_ = false;
    std::uint64_t unreported_ = 0;
    int last_errno_ = 0;
    base::MonotonicTime next_report_{};
    std::vector<int> closed_;
};

}  // namespace aclaim::coordinator
