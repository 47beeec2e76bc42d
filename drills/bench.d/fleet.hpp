#pragma once

// Worker client threads (the aclaim_worker library) that claim, hold each job for a while with
// heartbeats running and complete it: what `aclaim-bench e2e` measures, and the active workers
// of `aclaim-bench crowd`.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "drills/bench.d/bench.hpp"

namespace aclaim::drills {

/// What the fleet's clients saw; completions and claims only while counting.
struct FleetCounts {
    std::atomic<long> completed{0};
    std::atomic<long> claims{0};
    std::atomic<long> renewals{0};
    std::atomic<long> lost{0};
    std::atomic<long> errors{0};
    /// Claims answered without a job (NO_WORK, an ERROR, or lost with the connection).
    std::atomic<long> claims_ended{0};
};

/// One claim's latency, send to ASSIGNED (one-job claims only), and when it was answered.
struct ClaimSample {
    BenchClock::time_point at;
    double ms = 0;
};

class ClientFleet {
  public:
    /// Registers the clients' keys (names "<prefix>-<i>"), starts them and waits until every
    /// one has its session; throws when some have none within 30 s.
    ClientFleet(const E2eOptions& o, const std::string& prefix = "bench");
    ~ClientFleet();
    ClientFleet(const ClientFleet&) = delete;
    ClientFleet& operator=(const ClientFleet&) = delete;

    void set_counting(bool on) { counting_.store(on); }
    FleetCounts& counts() { return counts_; }
    /// Refused completions by reason, so far.
    std::map<std::string, long> refusals();
    /// The claim samples gathered since the last call.
    std::vector<ClaimSample> take_samples();
    /// When the last client got its session back after `since`, once every one has.
    std::optional<BenchClock::time_point> all_reconnected_after(BenchClock::time_point since);
    /// Stops every client and waits for them.
    void stop();

  private:
    void run_client(int index, const worker::CurveKeys& curve);

    class StartLine;
    const E2eOptions o_;
    const std::string prefix_;
    zmq::context_t context_;
    std::unique_ptr<StartLine> start_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> counting_{false};
    FleetCounts counts_;
    std::mutex samples_mutex_;
    std::vector<ClaimSample> samples_;
    std::vector<BenchClock::time_point> reconnected_at_;  ///< by client, under samples_mutex_
    std::map<std::string, long> refusals_;                ///< under samples_mutex_
    std::vector<std::thread> threads_;
};

/// Raises this process's soft limit of open descriptors to the hard one: a crowd of sessions
/// holds a socket each.
void raise_fd_limit();

/// The p-quantile (0..1) of `ms`, sorting it; 0 when empty.
double percentile(std::vector<double>& ms, double p);

}  // namespace aclaim::drills
