// A noisy neighbour: one organization's one-job workers claim beside another organization that
// floods the coordinator: sessions that keep CLAIMs of max_jobs 100 outstanding without ever
// completing a job, and a crowd of sessions opened on one key. Measured: the quiet organization's
// claim latency without the flood and with it, in the same run against the same coordinator, and
// whether a new worker of the quiet organization is still answered when it says HELLO.

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "common/proto/wire_errors.hpp"
#include "drills/bench.d/fleet.hpp"
#include "drills/bench.d/wire.hpp"

namespace aclaim::drills {

namespace proto = aclaim::proto;

namespace {

/// A HELLO unanswered this long counts as not answered.
constexpr auto kHelloTimeout = std::chrono::seconds(5);
/// The idle crowd's long poll.
constexpr std::int32_t kIdleWaitMs = 60'000;

/// What the flooding organization's sessions were told, by reply type or ERROR code.
class Tally {
  public:
    void add(const std::string& what) {
        std::lock_guard lock(mutex_);
        ++counts_[what];
    }
    nlohmann::json json() const {
        std::lock_guard lock(mutex_);
        nlohmann::json out = nlohmann::json::object();
        for (const auto& [what, n] : counts_) out[what] = n;
        return out;
    }

  private:
    mutable std::mutex mutex_;
    std::map<std::string, long> counts_;
};

/// Sessions on raw DEALERs, served by one thread: each says HELLO and, once welcomed, keeps
/// `claims` CLAIMs outstanding, each sent again as soon as it is answered with jobs or NO_WORK. A
/// refusal is waited out as the protocol asks (retry_after_ms, granted with reconnect hints; 200 ms
/// without), a HELLO turned away then said again: the flood is heavy, not broken, so that what it
/// measures is the share the coordinator gives it, not a loop of refusals on two cores.
class Flood {
  public:
    struct Shape {
        std::string endpoint;
        std::int64_t org = 2;
        std::vector<std::string> names;   ///< HELLO's worker id, one per session
        std::vector<std::string> queues;  ///< served (HELLO); none: the default queue
        std::vector<worker::CurveKeys> keys;
        int claims = 1;
        std::int32_t max_jobs = 100;
        std::int32_t wait_ms = 0;
    };

    Flood(Shape shape, Tally& tally) : shape_(std::move(shape)), tally_(tally) {
        context_.set(zmq::ctxopt::max_sockets, context_.get(zmq::ctxopt::socket_limit));
        thread_ = std::thread([this] { run(); });
    }
    ~Flood() { stop(); }
    Flood(const Flood&) = delete;
    Flood& operator=(const Flood&) = delete;

    void stop() {
        stop_.store(true);
        if (thread_.joinable()) thread_.join();
    }
    /// Sessions that have had a WELCOME, now.
    int welcomed() const { return welcomed_.load(); }

  private:
    struct Session {
        std::unique_ptr<zmq::socket_t> socket;
        bool open = false;
        BenchClock::time_point again{};  ///< when turned away: when to say HELLO or CLAIM again
        bool waiting = false;            ///< turned away, waiting for `again`
        int refused_claims = 0;          ///< claims refused and not yet sent again
    };

    void claim(Session& s) {
        send(*s.socket, proto::Claim{next_req_++, shape_.max_jobs, shape_.wait_ms});
    }

    void hello(std::size_t i) {
        proto::Hello h{next_req_++, shape_.names[i], shape_.org};
        h.features.emplace_back(proto::kFeatureReconnectHints);
        h.queues = shape_.queues;
        send(*sessions_[i].socket, h);
    }

    void run() {
        sessions_.resize(shape_.names.size());
        std::vector<zmq::pollitem_t> items;
        for (std::size_t i = 0; i < sessions_.size(); ++i) {
            sessions_[i].socket = connect(context_, shape_.endpoint, shape_.keys[i]);
            items.push_back({sessions_[i].socket->handle(), 0, ZMQ_POLLIN, 0});
            hello(i);
        }
        while (!stop_.load()) {
            zmq::poll(items.data(), items.size(), std::chrono::milliseconds(50));
            const auto now = BenchClock::now();
            for (std::size_t i = 0; i < sessions_.size(); ++i) {
                Session& s = sessions_[i];
                if (s.waiting && now >= s.again) {
                    s.waiting = false;
                    if (!s.open) hello(i);
                    for (; s.refused_claims > 0; --s.refused_claims) claim(s);
                }
                if ((items[i].revents & ZMQ_POLLIN) == 0) continue;
                while (auto m = receive(*s.socket)) {
                    if (std::holds_alternative<proto::Welcome>(*m)) {
                        tally_.add("WELCOME");
                        if (!s.open) {
                            s.open = true;
                            welcomed_.fetch_add(1);
                            for (int c = 0; c < shape_.claims; ++c) claim(s);
                        }
                    } else if (const auto* e = std::get_if<proto::Error>(&*m)) {
                        tally_.add("ERROR " + e->code);
                        s.waiting = true;
                        s.again = now + std::chrono::milliseconds(e->retry_after_ms.value_or(200));
                        if (s.open) ++s.refused_claims;
                    } else {
                        tally_.add(std::string(proto::type_name(*m)));
                        // Only a claim's answer frees a place; REVOKED (a lapsed lease of a job it
                        // never completed) is pushed unasked.
                        const bool answer = std::holds_alternative<proto::Assigned>(*m) ||
                                            std::holds_alternative<proto::NoWork>(*m);
                        if (s.open && answer) claim(s);
                    }
                }
            }
        }
    }

    Shape shape_;
    Tally& tally_;
    zmq::context_t context_{1};
    std::vector<Session> sessions_;
    std::uint64_t next_req_ = 1;
    std::atomic<bool> stop_{false};
    std::atomic<int> welcomed_{0};
    std::thread thread_;
};

/// One HELLO on a fresh connection of a fresh key: how long until its WELCOME; nothing when it
/// was refused or not answered within kHelloTimeout.
std::optional<double> time_hello(const NeighbourOptions& o, const std::string& name,
                                 std::string& answer) {
    zmq::context_t ctx(1);
    const auto keys = o.active.target.auth.keys_for(o.active.target.org, {name});
    auto socket = connect(ctx, o.active.target.endpoint, keys.front());
    const auto sent = BenchClock::now();
    send(*socket, proto::Hello{1, name, o.active.target.org});
    while (BenchClock::now() - sent < kHelloTimeout) {
        zmq::pollitem_t item{socket->handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, std::chrono::milliseconds(50));
        auto m = receive(*socket);
        if (!m) continue;
        const double ms =
            std::chrono::duration<double, std::milli>(BenchClock::now() - sent).count();
        if (std::holds_alternative<proto::Welcome>(*m)) {
            answer = "WELCOME";
            return ms;
        }
        const auto* e = std::get_if<proto::Error>(&*m);
        answer = e != nullptr ? "ERROR " + e->code : std::string(proto::type_name(*m));
        return std::nullopt;
    }
    answer = "no answer";
    return std::nullopt;
}

/// The claim samples of a window: count, p50, p99, max.
nlohmann::json claim_figures(const std::vector<ClaimSample>& samples, double seconds) {
    std::vector<double> ms;
    ms.reserve(samples.size());
    for (const auto& s : samples) ms.push_back(s.ms);
    nlohmann::json out;
    out["claims"] = ms.size();
    out["claims_per_s"] = seconds > 0 ? static_cast<double>(ms.size()) / seconds : 0.0;
    out["claim_p50_ms"] = percentile(ms, 0.50);
    out["claim_p99_ms"] = percentile(ms, 0.99);
    out["claim_max_ms"] = ms.empty() ? 0.0 : ms.back();
    return out;
}

}  // namespace

nlohmann::json run_neighbour(const NeighbourOptions& o) {
    raise_fd_limit();
    nlohmann::json out;
    out["curve"] = !o.active.target.auth.plaintext;
    out["active_workers"] = o.active.clients;
    out["flood_sessions"] = o.flood_sessions;
    out["flood_max_jobs"] = o.flood_max_jobs;
    out["idle_sessions_one_key"] = o.idle_sessions;

    ClientFleet fleet(o.active, "neighbour");
    // Warm: the first claims of a fresh coordinator are not the steady state.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    fleet.take_samples();
    const auto quiet_from = BenchClock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
    out["quiet"] = claim_figures(fleet.take_samples(), seconds_since(quiet_from));

    // The flood: its sessions' keys registered first, so that the window holds no key work.
    Tally flood_tally;
    Tally idle_tally;
    Flood::Shape flood;
    const std::string flood_endpoint =
        o.flood_endpoint.empty() ? o.active.target.endpoint : o.flood_endpoint;
    out["flood_endpoint_shared"] = o.flood_endpoint.empty();
    flood.endpoint = flood_endpoint;
    flood.org = o.flood_org;
    flood.names = session_names("flood", o.flood_sessions);
    flood.keys = o.active.target.auth.keys_for(o.flood_org, flood.names);
    flood.claims = o.flood_claims;
    flood.max_jobs = o.flood_max_jobs;
    Flood::Shape idle;
    idle.endpoint = flood_endpoint;
    idle.org = o.flood_org;
    // Every idle session says HELLO as the one worker its one key is registered for.
    idle.names.assign(static_cast<std::size_t>(o.idle_sessions), "crowd-one-key");
    idle.keys.assign(static_cast<std::size_t>(o.idle_sessions),
                     o.active.target.auth.keys_for(o.flood_org, {"crowd-one-key"}).front());
    idle.claims = 1;
    idle.max_jobs = 1;
    idle.wait_ms = kIdleWaitMs;
    // A queue without jobs: idle sessions long-poll, as idle reviewers do, and take none of the
    // flood's jobs.
    idle.queues = {"neighbour-idle"};
    const auto flood_began = BenchClock::now();
    Flood floods(std::move(flood), flood_tally);
    Flood idlers(std::move(idle), idle_tally);
    // Until the flood is up: every flooding session has had its WELCOME (or it stops waiting).
    while (floods.welcomed() < o.flood_sessions && seconds_since(flood_began) < 20) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    out["seconds_to_flood"] = seconds_since(flood_began);
    fleet.take_samples();
    const auto flood_from = BenchClock::now();
    // Half way through, a worker of the quiet organization that has never connected.
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds / 2));
    std::string answer;
    const auto hello_ms = time_hello(o, "neighbour-new", answer);
    out["new_worker_hello"] = answer;
    out["new_worker_hello_ms"] = hello_ms.value_or(-1.0);
    const double left = o.seconds - seconds_since(flood_from);
    if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double>(left));
    out["flood"] = claim_figures(fleet.take_samples(), seconds_since(flood_from));
    out["flood_welcomed"] = floods.welcomed();
    out["idle_welcomed"] = idlers.welcomed();
    idlers.stop();
    floods.stop();
    out["flood_replies"] = flood_tally.json();
    out["idle_replies"] = idle_tally.json();
    const double quiet = out["quiet"]["claim_p99_ms"].get<double>();
    const double loud = out["flood"]["claim_p99_ms"].get<double>();
    out["p99_ratio"] = quiet > 0 ? loud / quiet : 0.0;
    fleet.stop();
    return out;
}

}  // namespace aclaim::drills
