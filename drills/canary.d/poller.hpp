#pragma once

// One synthetic poller: a real aclaim::worker::Client over ZeroMQ that claims one job at a time
// with a short long-poll, holds it for the review time (the client renews it as it does for any
// reviewer), completes it, and reports what it saw to the Recorder. It works while its index is
// below the current level and idles with its session open otherwise.

#include <atomic>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "drills/canary.d/stats.hpp"
#include "worker/client.hpp"

namespace aclaim::drills {

struct PollerSettings {
    std::string endpoint;
    std::int64_t org = 0;
    std::string worker_id;
    int index = 0;  ///< works while index < level
    int review_ms = 200;
    int claim_wait_ms = 200;
    /// The queues served (HELLO's queues).
    std::vector<std::string> queues;
    /// The coordinator's public key and this poller's registered pair; empty for plaintext.
    worker::CurveKeys curve;
};

class Poller {
  public:
    Poller(zmq::context_t& context, PollerSettings settings, Recorder& recorder,
           const std::atomic<int>& level, const std::atomic<bool>& stop);

    /// The thread body: runs until `stop` is set and the held job is finished, or a bounded
    /// wind-down passes.
    void run();

    /// What ended run() abnormally (a refused session, an unanswered wind-down); empty if nothing.
    /// Read after the thread is joined.
    const std::string& failure() const { return failure_; }

  private:
    void handle(const worker::Event& event, worker::TimePoint now);

    PollerSettings settings_;
    Recorder& recorder_;
    const std::atomic<int>& level_;
    const std::atomic<bool>& stop_;
    worker::Client client_;
    std::optional<worker::JobRef> held_;
    worker::TimePoint hold_until_{};
    bool completing_ = false;
    worker::TimePoint claim_sent_{};
    worker::TimePoint claim_not_before_{};
    std::int64_t renewals_seen_ = 0;
    std::string failure_;
};

}  // namespace aclaim::drills
