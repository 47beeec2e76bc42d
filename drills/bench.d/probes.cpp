// Raw DEALER sockets speaking the wire protocol: open-loop paced claims for latency, and many
// idle sessions for the coordinator's memory.

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/proto/protocol.hpp"
#include "drills/bench.d/bench.hpp"
#include "drills/bench.d/wire.hpp"

namespace aclaim::drills {

namespace proto = aclaim::proto;

namespace {

long vm_hwm_kb(int pid) {
    return proc_status_kb(pid, "VmHWM");
}

/// One DEALER per name, connected to the target with that name's key, each having sent HELLO.
std::vector<std::unique_ptr<zmq::socket_t>> say_hello(
    zmq::context_t& ctx, const CoordinatorTarget& target, const std::vector<std::string>& names,
    const std::vector<std::string>& features = {}) {
    const auto keys = target.auth.keys_for(target.org, names);
    std::vector<std::unique_ptr<zmq::socket_t>> sockets;
    for (std::size_t i = 0; i < names.size(); ++i) {
        sockets.push_back(connect(ctx, target.endpoint, keys[i]));
        send(*sockets.back(), proto::Hello{1, names[i], target.org, {}, features});
    }
    return sockets;
}

}  // namespace

nlohmann::json run_latency(const LatencyOptions& o) {
    zmq::context_t ctx(1);
    std::vector<std::unique_ptr<zmq::socket_t>> sockets;
    std::vector<zmq::pollitem_t> items;
    const auto names = session_names("latency", o.sessions);
    sockets = say_hello(ctx, o.target, names, {std::string(proto::kFeatureCompleteClaim)});
    items.reserve(sockets.size());
    for (auto& s : sockets) items.push_back({s->handle(), 0, ZMQ_POLLIN, 0});
    int welcomed = 0;
    bool fused = true;  ///< every session was granted complete_claim
    const auto hello_deadline = BenchClock::now() + std::chrono::seconds(10);
    while (welcomed < o.sessions && BenchClock::now() < hello_deadline) {
        zmq::poll(items.data(), items.size(), std::chrono::milliseconds(10));
        for (auto& s : sockets) {
            while (auto m = receive(*s)) {
                if (const auto* w = std::get_if<proto::Welcome>(&*m)) {
                    ++welcomed;
                    fused = fused && std::ranges::find(w->features, proto::kFeatureCompleteClaim) !=
                                         w->features.end();
                }
            }
        }
    }
    if (welcomed < o.sessions) throw std::runtime_error("latency: not every session was welcomed");

    /// What became of the claims of one period (warm-up, or measured).
    struct Tally {
        std::vector<double> ms;  ///< send to ASSIGNED
        long sent = 0, no_work = 0, errors = 0;
        std::map<std::string, long> refusals;  ///< by error code
    };
    Tally warmup, measured;
    std::map<std::uint64_t, std::pair<BenchClock::time_point, Tally*>> sent;
    std::uint64_t next_req = 2;
    // Every assigned job is completed, as a reviewer that is done with it would: claims that are
    // never completed pile up leases (each a row the reaper's pass reads) and lapse into reclaims
    // during the run, which is not the shape the figure describes. A session completes its job in
    // the message of its next claim (protocol 1.2, as the worker library does when offered), or
    // alone when it is given a second job first or the run is over.
    struct Completions {
        long sent = 0, accepted = 0, refused = 0;
    } completions;
    std::set<std::uint64_t> completing;  ///< COMPLETE request ids awaiting an answer
    std::vector<std::optional<std::pair<std::int64_t, std::int64_t>>> holding(sockets.size());
    auto complete = [&](std::size_t session, std::vector<proto::Claim> next) {
        const auto [job, generation] = *holding[session];
        holding[session].reset();
        const std::uint64_t req = next_req++;
        send(*sockets[session], proto::Complete{req, job, generation, "latency", std::move(next)});
        completing.insert(req);
        ++completions.sent;
    };
    const auto interval = std::chrono::duration<double>(1.0 / o.rate);
    const auto began = BenchClock::now();
    const auto measured_from = began + std::chrono::duration_cast<BenchClock::duration>(
                                           std::chrono::duration<double>(o.warmup_seconds));
    const auto end = measured_from + std::chrono::duration_cast<BenchClock::duration>(
                                         std::chrono::duration<double>(o.seconds));
    long issued = 0;
    CpuSample cpu_began, cpu_ended;
    std::string metrics_began;
    bool cpu_began_taken = false, cpu_ended_taken = false;
    // Replies to claims sent before the end are still awaited, for a bounded while.
    while (BenchClock::now() < end + std::chrono::seconds(2) &&
           (BenchClock::now() < end || !sent.empty() || !completing.empty())) {
        const auto now = BenchClock::now();
        if (!cpu_began_taken && now >= measured_from) {
            cpu_began = sample_cpu(o.cpu);
            cpu_began_taken = true;
            if (!o.metrics.empty()) metrics_began = get_metrics(o.metrics).value_or("");
        }
        if (!cpu_ended_taken && now >= end) {
            cpu_ended = sample_cpu(o.cpu);
            cpu_ended_taken = true;
        }
        while (now < end &&
               began + std::chrono::duration_cast<BenchClock::duration>(interval * issued) <= now) {
            // The schedule is fixed: a late reply never delays the next claim.
            const std::uint64_t req = next_req++;
            const auto session = static_cast<std::size_t>(issued) % sockets.size();
            if (fused && holding[session]) {
                complete(session, {proto::Claim{req, 1, 0}});
            } else {
                send(*sockets[session], proto::Claim{req, 1, 0});
            }
            const auto at = BenchClock::now();
            Tally* period = at < measured_from ? &warmup : &measured;
            ++period->sent;
            sent[req] = {at, period};
            ++issued;
        }
        if (now >= end) {
            for (std::size_t session = 0; session < holding.size(); ++session) {
                if (holding[session]) complete(session, {});
            }
        }
        zmq::poll(items.data(), items.size(), std::chrono::milliseconds(1));
        for (std::size_t session = 0; session < sockets.size(); ++session) {
            auto& s = sockets[session];
            while (auto m = receive(*s)) {
                const auto id = proto::request_id(*m);
                if (completing.erase(id) != 0) {
                    ++(std::holds_alternative<proto::Accepted>(*m) ? completions.accepted
                                                                   : completions.refused);
                    continue;
                }
                const auto it = sent.find(id);
                if (it == sent.end()) continue;
                auto& [at, period] = it->second;
                if (const auto* assigned = std::get_if<proto::Assigned>(&*m)) {
                    period->ms.push_back(
                        std::chrono::duration<double, std::milli>(BenchClock::now() - at).count());
                    for (const auto& job : assigned->jobs) {
                        if (holding[session]) complete(session, {});
                        holding[session] = std::pair{job.job_id, job.generation};
                        if (!fused) complete(session, {});
                    }
                } else if (std::holds_alternative<proto::NoWork>(*m)) {
                    ++period->no_work;
                } else {
                    ++period->errors;
                    if (const auto* e = std::get_if<proto::Error>(&*m)) ++period->refusals[e->code];
                }
                sent.erase(it);
            }
        }
    }
    auto pct = [](std::vector<double>& ms, double p) {
        std::sort(ms.begin(), ms.end());
        return ms.empty()
                   ? 0.0
                   : ms[std::min(ms.size() - 1,
                                 static_cast<std::size_t>(p * static_cast<double>(ms.size())))];
    };
    nlohmann::json out;
    out["claim_p50_ms"] = pct(measured.ms, 0.50);
    out["claim_p99_ms"] = pct(measured.ms, 0.99);
    out["claims_sent"] = measured.sent;
    out["claims_assigned"] = measured.ms.size();
    out["claims_no_work"] = measured.no_work;
    out["claims_refused"] = measured.errors;
    out["claims_refused_by_code"] = measured.refusals;
    out["claims_unanswered"] = sent.size();
    out["completions_sent"] = completions.sent;
    out["completions_accepted"] = completions.accepted;
    out["completions_refused"] = completions.refused;
    out["completions_unanswered"] = completing.size();
    out["completion_with_next_claim"] = fused;
    out["warmup_seconds"] = o.warmup_seconds;
    out["warmup_claims_sent"] = warmup.sent;
    out["warmup_claim_p99_ms"] = pct(warmup.ms, 0.99);
    out["warmup_claims_refused"] = warmup.errors;
    out["warmup_claims_refused_by_code"] = warmup.refusals;
    if (!cpu_ended_taken) cpu_ended = sample_cpu(o.cpu);
    if (!o.metrics.empty()) {
        // The coordinator's claim stage histograms over the measured window (and the replies
        // still awaited after it): the report takes the difference.
        out["metrics_began"] = metrics_began;
        out["metrics_ended"] = get_metrics(o.metrics).value_or("");
    }
    out["cpu"] = cpu_report(cpu_began, cpu_ended, static_cast<double>(measured.ms.size()));
    out["rate_per_s"] = o.rate;
    out["sessions"] = o.sessions;
    out["curve"] = !o.target.auth.plaintext;
    return out;
}

nlohmann::json run_idle(const IdleOptions& o) {
    zmq::context_t ctx(1);
    ctx.set(zmq::ctxopt::max_sockets, o.workers + 64);
    std::vector<std::unique_ptr<zmq::socket_t>> sockets;
    std::vector<zmq::pollitem_t> items;
    const auto names = session_names("idle", o.workers);
    const long before_kb = vm_hwm_kb(o.pid);
    sockets = say_hello(ctx, o.target, names);
    items.reserve(sockets.size());
    for (auto& s : sockets) items.push_back({s->handle(), 0, ZMQ_POLLIN, 0});
    std::vector<bool> welcomed(sockets.size(), false);
    int count = 0;
    const auto began = BenchClock::now();
    while (count < o.workers && seconds_since(began) < o.timeout_s) {
        zmq::poll(items.data(), items.size(), std::chrono::milliseconds(50));
        for (std::size_t i = 0; i < sockets.size(); ++i) {
            while (auto m = receive(*sockets[i])) {
                if (std::holds_alternative<proto::Welcome>(*m) && !welcomed[i]) {
                    welcomed[i] = true;
                    ++count;
                }
            }
        }
    }
    // Let the sessions sit idle a moment so that anything the coordinator does per session
    // (housekeeping, buffers) has happened.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    nlohmann::json out;
    out["workers_welcomed"] = count;
    out["coordinator_rss_before_mb"] = static_cast<double>(before_kb) / 1024.0;
    out["coordinator_peak_rss_mb"] = static_cast<double>(vm_hwm_kb(o.pid)) / 1024.0;
    out["seconds_to_welcome_all"] = seconds_since(began);
    out["curve"] = !o.target.auth.plaintext;
    return out;
}

}  // namespace aclaim::drills
