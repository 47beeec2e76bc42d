// End to end through a coordinator: worker client threads (the aclaim_worker library) claim,
// hold each job for a while with heartbeats running, complete it, and count the accepted
// completions inside the measured window.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "drills/bench.d/bench.hpp"
#include "worker/client.hpp"

namespace aclaim::drills {

namespace {

/// Every client must have its session within this; a refused CURVE handshake never gets one.
constexpr auto kWelcomeTimeout = std::chrono::seconds(30);

/// A barrier the clients reach once they have their session, and that the driver opens when all
/// have arrived, or abandons when some never do (a refused handshake): std::barrier cannot be
/// waited on with a deadline.
class StartLine {
  public:
    /// Counts this client in and blocks until the line opens (true) or is abandoned (false).
    bool arrive_and_wait() {
        std::unique_lock lock(mutex_);
        ++arrived_;
        changed_.notify_all();
        changed_.wait(lock, [this] { return state_ != State::Waiting; });
        return state_ == State::Open;
    }
    /// Waits until `n` clients have arrived or `deadline` passes; returns how many arrived.
    int wait_for(int n, BenchClock::time_point deadline) {
        std::unique_lock lock(mutex_);
        changed_.wait_until(lock, deadline, [&] { return arrived_ >= n; });
        return arrived_;
    }
    void open() { settle(State::Open); }
    void abandon() { settle(State::Abandoned); }

  private:
    enum class State { Waiting, Open, Abandoned };
    void settle(State s) {
        std::lock_guard lock(mutex_);
        state_ = s;
        changed_.notify_all();
    }
    std::mutex mutex_;
    std::condition_variable changed_;
    int arrived_ = 0;
    State state_ = State::Waiting;
};

struct Counts {
    std::atomic<long> completed{0};
    std::atomic<long> claims{0};
    std::atomic<long> renewals{0};
    std::atomic<long> lost{0};
    std::atomic<long> errors{0};
};

std::string client_name(int index) {
    return "bench-" + std::to_string(index);
}

void run_client(const E2eOptions& o, int index, const worker::CurveKeys& curve, StartLine& start,
                const std::atomic<bool>& stop, const std::atomic<bool>& counting, Counts& counts) {
    zmq::context_t context(1);
    worker::ClientOptions co;
    co.endpoints = {o.target.endpoint};
    co.worker_id = client_name(index);
    co.org_id = o.target.org;
    co.max_in_flight = 64;
    co.curve = curve;
    worker::Client client(context, co);
    client.start();
    struct Held {
        worker::JobRef job;
        BenchClock::time_point due;
    };
    std::deque<Held> held;
    int claimed_slots = 0;  // jobs asked for by claims not yet answered
    int answering = 0;      // completions sent and not yet answered
    bool arrived = false;
    while (!stop.load()) {
        for (auto& event : client.poll(worker::Millis(2))) {
            if (std::holds_alternative<worker::SessionReady>(event) && !arrived) {
                arrived = true;
                if (!start.arrive_and_wait()) break;  // abandoned: stop is already set
            } else if (const auto* a = std::get_if<worker::JobAssigned>(&event)) {
                claimed_slots = std::max(0, claimed_slots - 1);
                held.push_back({{a->job.job_id, a->job.generation},
                                BenchClock::now() + std::chrono::milliseconds(o.hold_ms)});
            } else if (const auto* v = std::get_if<worker::Verdict>(&event)) {
                --answering;
                if (v->accepted && counting.load()) counts.completed.fetch_add(1);
                if (!v->accepted) counts.errors.fetch_add(1);
            } else if (std::holds_alternative<worker::JobLost>(event)) {
                counts.lost.fetch_add(1);
            }
        }
        // A claim may be answered with fewer jobs than asked for, and no event says so: once no
        // claim is outstanding, no slot is either.
        if (!client.claim_pending()) claimed_slots = 0;
        const auto now = BenchClock::now();
        while (!held.empty() && held.front().due <= now) {
            client.complete(held.front().job, "bench");
            held.pop_front();
            ++answering;
        }
        if (!client.ready()) continue;
        const int busy = static_cast<int>(held.size()) + answering + claimed_slots;
        if (busy + o.max_jobs <= o.capacity && client.pending() < 60) {
            client.claim(o.max_jobs, 1000);
            claimed_slots += o.max_jobs;
            if (counting.load()) counts.claims.fetch_add(1);
        }
    }
    counts.renewals.fetch_add(client.stats().renewals);
    client.close();
}

}  // namespace

nlohmann::json run_e2e(const E2eOptions& o) {
    Counts counts;
    std::atomic<bool> stop{false}, counting{false};
    StartLine start;
    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(o.clients));
    for (int i = 0; i < o.clients; ++i) names.push_back(client_name(i));
    // Registered before any client connects, so that the measured window holds no key work.
    const auto keys = o.target.auth.keys_for(o.target.org, names);
    std::vector<std::thread> clients;
    clients.reserve(static_cast<std::size_t>(o.clients));
    for (int i = 0; i < o.clients; ++i) {
        clients.emplace_back([&, i] {
            run_client(o, i, keys[static_cast<std::size_t>(i)], start, stop, counting, counts);
        });
    }
    const int arrived = start.wait_for(o.clients, BenchClock::now() + kWelcomeTimeout);
    if (arrived < o.clients) {
        stop.store(true);
        start.abandon();
        for (auto& c : clients) c.join();
        throw std::runtime_error("e2e: " + std::to_string(o.clients - arrived) + " of " +
                                 std::to_string(o.clients) +
                                 " clients got no session within 30 s (coordinator down, or "
                                 "their CURVE handshake refused)");
    }
    start.open();
    // A short warm-up, so that the window measures the steady state.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    counting.store(true);
    const auto began = BenchClock::now();
    while (seconds_since(began) < o.seconds)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const long completed = counts.completed.load();
    const double elapsed = seconds_since(began);
    stop.store(true);
    for (auto& c : clients) c.join();
    nlohmann::json out;
    out["jobs_per_s"] = static_cast<double>(completed) / elapsed;
    out["claims_per_s"] = static_cast<double>(counts.claims.load()) / elapsed;
    out["renewals"] = counts.renewals.load();
    out["jobs_lost"] = counts.lost.load();
    out["refused"] = counts.errors.load();
    out["clients"] = o.clients;
    out["max_jobs"] = o.max_jobs;
    out["hold_ms"] = o.hold_ms;
    out["curve"] = !o.target.auth.plaintext;
    return out;
}

}  // namespace aclaim::drills
