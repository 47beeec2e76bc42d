#pragma once

// A TCP relay between a client and a server that can stop forwarding without resetting anything,
// as a route does whose far end stopped answering: every connection stays open, the kernel still
// acknowledges what is sent, and nothing comes back until forwarding resumes.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace aclaim::testing {

class StallRelay {
  public:
    /// Listens on a free 127.0.0.1 port and relays each connection to 127.0.0.1:upstream_port.
    explicit StallRelay(int upstream_port);
    ~StallRelay();
    StallRelay(const StallRelay&) = delete;
    StallRelay& operator=(const StallRelay&) = delete;

    int port() const { return port_; }
    /// Stops forwarding in both directions; connections made meanwhile are accepted and held.
    void stall();
    void resume();

  private:
    struct Pair {
        int client = -1;
        int server = -1;
    };
    void run();
    void accept_one();
    /// Moves what is readable on `from` to `to`; false when either side is finished.
    static bool forward(int from, int to);
    void wake();

    int upstream_port_;
    int listener_ = -1;
    int port_ = 0;
    int wake_[2] = {-1, -1};
    std::atomic<bool> stalled_{false};
    std::atomic<bool> stop_{false};
    std::vector<Pair> pairs_;  ///< relay thread only
    std::thread thread_;
};

}  // namespace aclaim::testing
