// End to end through a coordinator: worker client threads (the aclaim_worker library) claim,
// hold each job for a while with heartbeats running, complete it, and count the accepted
// completions inside the measured window.

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <stdexcept>
#include <utility>

#include "drills/bench.d/fleet.hpp"
#include "worker/client.hpp"

namespace aclaim::drills {

namespace {

/// Every client must have its session within this; a refused CURVE handshake never gets one.
constexpr auto kWelcomeTimeout = std::chrono::seconds(30);

}  // namespace

/// A barrier the clients reach once they have their session, and that the driver opens when all
/// have arrived, or abandons when some never do (a refused handshake): std::barrier cannot be
/// waited on with a deadline.
class ClientFleet::StartLine {
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

ClientFleet::ClientFleet(const E2eOptions& o, const std::string& prefix)
    : o_(o),
      prefix_(prefix),
      context_(1),
      start_(std::make_unique<StartLine>()),
      reconnected_at_(static_cast<std::size_t>(o.clients)) {
    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(o.clients));
    for (int i = 0; i < o.clients; ++i) names.push_back(prefix_ + "-" + std::to_string(i));
    // Registered before any client connects, so that the measured window holds no key work.
    const auto keys = o.target.auth.keys_for(o.target.org, names);
    // One context, one I/O thread for every client, as one worker process holding many sessions
    // would: on a shared two-core machine an I/O thread per client would be load generator, not
    // coordinator.
    // Each client has its DEALER and its socket monitor, and a reconnecting client replaces both
    // while the closed ones still count until the context's reaper is done with them.
    context_.set(zmq::ctxopt::max_sockets, context_.get(zmq::ctxopt::socket_limit));
    threads_.reserve(static_cast<std::size_t>(o.clients));
    for (int i = 0; i < o.clients; ++i) {
        threads_.emplace_back(
            [this, i, curve = keys[static_cast<std::size_t>(i)]] { run_client(i, curve); });
    }
    const int arrived = start_->wait_for(o.clients, BenchClock::now() + kWelcomeTimeout);
    if (arrived < o.clients) {
        stop_.store(true);
        start_->abandon();
        for (auto& c : threads_) c.join();
        throw std::runtime_error(std::to_string(o.clients - arrived) + " of " +
                                 std::to_string(o.clients) +
                                 " clients got no session within 30 s (coordinator down, or "
                                 "their CURVE handshake refused)");
    }
    start_->open();
}

ClientFleet::~ClientFleet() {
    stop();
}

void ClientFleet::stop() {
    stop_.store(true);
    for (auto& c : threads_) {
        if (c.joinable()) c.join();
    }
}

std::optional<BenchClock::time_point> ClientFleet::all_reconnected_after(
    BenchClock::time_point since) {
    std::lock_guard lock(samples_mutex_);
    BenchClock::time_point last = since;
    for (const auto at : reconnected_at_) {
        if (at <= since) return std::nullopt;
        last = std::max(last, at);
    }
    return last;
}

std::map<std::string, long> ClientFleet::refusals() {
    std::lock_guard lock(samples_mutex_);
    return refusals_;
}

std::vector<ClaimSample> ClientFleet::take_samples() {
    std::lock_guard lock(samples_mutex_);
    return std::exchange(samples_, {});
}

void ClientFleet::run_client(int index, const worker::CurveKeys& curve) {
    worker::ClientOptions co;
    co.endpoints = {o_.target.endpoint};
    co.worker_id = prefix_ + "-" + std::to_string(index);
    co.org_id = o_.target.org;
    co.max_in_flight = 64;
    co.curve = curve;
    worker::Client client(context_, co);
    client.start();
    struct Held {
        worker::JobRef job;
        BenchClock::time_point due;
    };
    std::deque<Held> held;
    int claimed_slots = 0;  // jobs asked for by claims not yet answered
    int answering = 0;      // completions sent and not yet answered
    bool arrived = false;
    BenchClock::time_point claimed_at{};
    std::vector<ClaimSample> samples;
    while (!stop_.load()) {
        // Woken by the coordinator's next message or the next held job's end, as a reviewer
        // would be: a fixed short poll made 64 idle threads wake 32,000 times a second, load
        // generator CPU the coordinator and PostgreSQL then lacked. The stop flag is looked at
        // within 50 ms.
        auto wait = worker::Millis(50);
        if (!held.empty()) {
            wait =
                std::clamp(std::chrono::ceil<worker::Millis>(held.front().due - BenchClock::now()),
                           worker::Millis(0), wait);
        }
        for (auto& event : client.poll(wait)) {
            if (const auto* ready = std::get_if<worker::SessionReady>(&event)) {
                if (ready->reconnected) {
                    std::lock_guard lock(samples_mutex_);
                    reconnected_at_[static_cast<std::size_t>(index)] = BenchClock::now();
                }
                if (!arrived) {
                    arrived = true;
                    if (!start_->arrive_and_wait()) break;  // abandoned: stop is already set
                }
            } else if (const auto* a = std::get_if<worker::JobAssigned>(&event)) {
                claimed_slots = std::max(0, claimed_slots - 1);
                const auto now = BenchClock::now();
                if (o_.max_jobs == 1) {
                    samples.push_back(
                        {now, std::chrono::duration<double, std::milli>(now - claimed_at).count()});
                }
                held.push_back({{a->job.job_id, a->job.generation},
                                now + std::chrono::milliseconds(o_.hold_ms)});
            } else if (const auto* v = std::get_if<worker::Verdict>(&event)) {
                --answering;
                if (v->accepted && counting_.load()) counts_.completed.fetch_add(1);
                if (!v->accepted) {
                    counts_.errors.fetch_add(1);
                    std::lock_guard lock(samples_mutex_);
                    ++refusals_[v->reason];
                }
            } else if (std::holds_alternative<worker::JobLost>(event)) {
                counts_.lost.fetch_add(1);
            } else if (std::holds_alternative<worker::ClaimEnded>(event)) {
                counts_.claims_ended.fetch_add(1);
            }
        }
        if (!samples.empty()) {
            std::lock_guard lock(samples_mutex_);
            samples_.insert(samples_.end(), samples.begin(), samples.end());
            samples.clear();
        }
        // A claim may be answered with fewer jobs than asked for, and no event says so: once no
        // claim is outstanding, no slot is either.
        if (!client.claim_pending()) claimed_slots = 0;
        const auto now = BenchClock::now();
        while (!held.empty() && held.front().due <= now) {
            const worker::JobRef job = held.front().job;
            held.pop_front();
            // As a reviewer does: a finished job asks for the next one in the same message where
            // the coordinator grants it (protocol 1.2), and where there is room for it.
            const int busy = static_cast<int>(held.size()) + answering + claimed_slots;
            if (client.ready() && busy + o_.max_jobs <= o_.capacity && client.pending() < 60) {
                client.complete_then_claim(job, "bench", o_.max_jobs, 1000);
                claimed_at = now;
                claimed_slots += o_.max_jobs;
                if (counting_.load()) counts_.claims.fetch_add(1);
            } else {
                client.complete(job, "bench");
            }
            ++answering;
        }
        if (!client.ready()) continue;
        const int busy = static_cast<int>(held.size()) + answering + claimed_slots;
        if (busy + o_.max_jobs <= o_.capacity && client.pending() < 60) {
            client.claim(o_.max_jobs, 1000);
            claimed_at = BenchClock::now();
            claimed_slots += o_.max_jobs;
            if (counting_.load()) counts_.claims.fetch_add(1);
        }
    }
    counts_.renewals.fetch_add(client.stats().renewals);
    client.close();
}

double percentile(std::vector<double>& ms, double p) {
    if (ms.empty()) return 0;
    std::sort(ms.begin(), ms.end());
    return ms[std::min(ms.size() - 1,
                       static_cast<std::size_t>(p * static_cast<double>(ms.size())))];
}

nlohmann::json run_e2e(const E2eOptions& o) {
    ClientFleet fleet(o);
    // A short warm-up, so that the window measures the steady state.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    fleet.take_samples();
    fleet.set_counting(true);
    const auto began = BenchClock::now();
    const CpuSample cpu_began = sample_cpu(o.cpu);
    while (seconds_since(began) < o.seconds)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    FleetCounts& counts = fleet.counts();
    const long completed = counts.completed.load();
    const double elapsed = seconds_since(began);
    const CpuSample cpu_ended = sample_cpu(o.cpu);
    auto samples = fleet.take_samples();
    fleet.stop();
    nlohmann::json out;
    out["jobs_per_s"] = static_cast<double>(completed) / elapsed;
    out["claims_per_s"] = static_cast<double>(counts.claims.load()) / elapsed;
    out["renewals"] = counts.renewals.load();
    out["jobs_lost"] = counts.lost.load();
    out["refused"] = counts.errors.load();
    out["refused_by_reason"] = fleet.refusals();
    out["clients"] = o.clients;
    out["max_jobs"] = o.max_jobs;
    out["hold_ms"] = o.hold_ms;
    out["curve"] = !o.target.auth.plaintext;
    out["cpu"] = cpu_report(cpu_began, cpu_ended, static_cast<double>(completed));
    if (!samples.empty()) {
        std::vector<double> ms;
        ms.reserve(samples.size());
        for (const auto& s : samples) ms.push_back(s.ms);
        out["claim_p50_ms"] = percentile(ms, 0.50);
        out["claim_p99_ms"] = percentile(ms, 0.99);
    }
    return out;
}

}  // namespace aclaim::drills
