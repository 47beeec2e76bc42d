#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/base/clock.hpp"
#include "coordinator/http/callback.hpp"
#include "coordinator/http/queue_metrics.hpp"
#include "coordinator/http/readiness.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::http {
class GuardedServer;
}

namespace aclaim::coordinator {

/// The operator's HTTP endpoint, on a thread pool of its own beside the coordinator:
///   /metrics  the Metrics atomics in the Prometheus text format;
///   /healthz  200 while the router thread keeps running its loop, 503 once it has stalled;
///   /readyz   200 when the database is reachable and its schema current, 503 with the reason;
///   POST /v1/callback  an outside system finishes a parked job with its callback token
///             (protocol 1.6, ParkCallback).
/// It only reads atomics and opens its own short-lived database connection, so a slow scrape or
/// probe never delays a worker's request. Its connections pass http::GuardedServer: a request
/// must arrive whole within a deadline before it takes a thread, and /healthz has threads of its
/// own, so slow or hostile clients cannot keep a liveness probe unanswered.
class HttpServer {
  public:
    /// /healthz fails once the router thread has not ticked for this long.
    static constexpr auto kStallLimit = std::chrono::seconds(10);

    /// Serves options.http_bind; `metrics` must outlive the server, and so must `clock`, whose
    /// monotonic time decides how long a readiness answer is reused.
    HttpServer(HttpOptions options, const Metrics& metrics);
    HttpServer(HttpOptions options, const Metrics& metrics, const base::Clock& clock);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    /// Binds and starts serving; returns once requests are accepted. Throws std::runtime_error
    /// naming the address when it cannot be bound.
    void start();
    /// Stops accepting, finishes the requests being served, joins the thread.
    void stop();

    /// The address actually bound, e.g. 127.0.0.1:40123 for a bind on port 0.
    const std::string& address() const { return address_; }
    int port() const { return port_; }

  private:
    void routes();

    HttpOptions options_;
    const Metrics& metrics_;
    /// Per-queue gauges appended to /metrics (none without a database).
    std::unique_ptr<QueueMetrics> queue_metrics_;
    ReadinessProbe readiness_;
    /// POST /v1/callback (none without a database).
    std::unique_ptr<ParkCallback> callback_;
    std::unique_ptr<http::GuardedServer> server_;
    std::thread thread_;
    std::atomic<bool> listening_done_{false};
    std::string address_;
    int port_ = 0;
};

}  // namespace aclaim::coordinator
