#include "drills/canary.d/run.hpp"

#include <unistd.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <thread>
#include <zmq.hpp>

#include "common/base/clock.hpp"
#include "common/ops/worker_keys.hpp"
#include "common/store/migrations.hpp"
#include "drills/canary.d/metrics.hpp"
#include "drills/canary.d/poller.hpp"
#include "drills/canary.d/process.hpp"
#include "drills/shared/drill_curve.hpp"
#include "worker/client.hpp"

namespace aclaim::drills {

namespace {

using SteadyClock = std::chrono::steady_clock;

/// Fresh organizations start here, clear of the small numbers people type by hand.
constexpr store::OrgId kFirstCanaryOrg = 900000;
constexpr auto kReadyTimeout = std::chrono::seconds(20);
constexpr auto kCoordinatorGrace = std::chrono::seconds(15);
constexpr auto kLockSamplePeriod = std::chrono::milliseconds(100);
constexpr auto kBoundaryCheck = std::chrono::milliseconds(20);

store::OrgId pick_org(pqxx::connection& conn, store::OrgId wanted) {
    pqxx::read_transaction txn(conn);
    if (wanted == 0) {
        return txn
            .exec_params1("SELECT greatest(coalesce(max(org_id), 0) + 1, $1) FROM jobs",
                          kFirstCanaryOrg)[0]
            .as<store::OrgId>();
    }
    const auto jobs =
        txn.exec_params1("SELECT count(*) FROM jobs WHERE org_id = $1", wanted)[0].as<long>();
    if (jobs > 0) {
        throw std::runtime_error("organization " + std::to_string(wanted) + " already has " +
                                 std::to_string(jobs) +
                                 " jobs; the canary measures an organization of its own");
    }
    return wanted;
}

/// Where the canary's coordinator serves: its ROUTER endpoint and its HTTP port.
struct Listening {
    std::string endpoint;
    int http_port = 0;
};

std::vector<std::string> coordinator_argv(const CanaryOptions& o, const std::string& binary,
                                          const Listening& at) {
    std::vector<std::string> argv{binary};
    const std::string& endpoint = at.endpoint;
    const int http_port = at.http_port;
    // Under CURVE the secret key goes in the environment (see coordinator_env), not argv.
    if (o.plaintext) argv.push_back("--plaintext");
    const auto flag = [&argv](const char* name, std::string value) {
        argv.push_back(name);
        argv.push_back(std::move(value));
    };
    flag("--bind", endpoint);
    flag("--http-bind", "127.0.0.1:" + std::to_string(http_port));
    flag("--coalesce", o.coalesce ? "on" : "off");
    flag("--lease-ms", std::to_string(o.lease_ms));
    flag("--heartbeat-ms", std::to_string(o.heartbeat_ms));
    flag("--db-threads", std::to_string(o.db_threads));
    flag("--log-level", o.coordinator_log_level);
    return argv;
}

/// The coordinator's environment: the database, and its CURVE secret (empty for plaintext). The
/// other CURVE and plaintext variables are emptied, so that the caller's environment cannot
/// contradict the canary's flags (an empty variable counts as unset).
std::map<std::string, std::string> coordinator_env(const CanaryOptions& o,
                                                   const std::string& server_secret) {
    return {{"ACLAIM_DSN", o.dsn},
            {"ACLAIM_PLAINTEXT", ""},
            {"ACLAIM_CURVE_SECRET_KEY", server_secret},
            {"ACLAIM_CURVE_SECRET_KEY_FILE", ""}};
}

constexpr const char* kReadyCheckName = "canary-ready-check";

std::string poller_name(store::OrgId org, int index) {
    return "canary-" + std::to_string(org) + "-" + std::to_string(index);
}

/// Waits until the coordinator answers a HELLO: it is then bound and has its database threads.
void wait_until_serving(zmq::context_t& context, const std::string& endpoint, store::OrgId org,
                        const worker::CurveKeys& curve, ChildProcess& coordinator,
                        const std::string& log_path) {
    worker::ClientOptions opts;
    opts.endpoints = {endpoint};
    opts.worker_id = kReadyCheckName;
    opts.org_id = org;
    opts.curve = curve;
    worker::Client client(context, opts);
    client.start();
    const auto deadline = SteadyClock::now() + kReadyTimeout;
    while (SteadyClock::now() < deadline) {
        if (const auto status = coordinator.exited()) {
            throw std::runtime_error("aclaim-coordinator exited with status " +
                                     std::to_string(*status) + " before serving:\n" +
                                     tail_of(log_path, 20));
        }
        for (const auto& event : client.poll(std::chrono::milliseconds(100))) {
            if (std::holds_alternative<worker::SessionReady>(event)) {
                client.close();
                return;
            }
        }
    }
    throw std::runtime_error("aclaim-coordinator did not answer HELLO within 20 s:\n" +
                             tail_of(log_path, 20));
}

void note_thread_errors(RunResult& r, const std::string& what, const Periodic& thread) {
    if (thread.errors() == 0) return;
    r.problems.push_back(what + ": " + std::to_string(thread.errors()) +
                         " failed passes, the last: " + thread.last_error());
}

}  // namespace

int RunResult::exit_code() const {
    if (!violations.empty()) return 1;
    return problems.empty() ? 0 : 2;
}

std::string RunResult::verdict() const {
    if (!violations.empty()) return "contract violated";
    return problems.empty() ? "contract held" : "incomplete";
}

RunResult run_canary(const CanaryOptions& o, const std::atomic<bool>& stop,
                     const IntervalObserver& observer) {
    RunResult r;
    r.options = o;
    r.bounds = contract_for(o);
    pqxx::connection conn(o.dsn);
    store::migrate(conn);
    r.org = pick_org(conn, o.org);
    const std::string binary =
        o.coordinator.empty() ? own_directory() + "/aclaim-coordinator" : o.coordinator;
    if (::access(binary.c_str(), X_OK) != 0) {
        throw std::runtime_error(binary + " is not an executable; build aclaim-coordinator first");
    }
    const auto ports = free_local_ports(2);
    r.endpoint = "tcp://127.0.0.1:" + std::to_string(ports[0]);
    const int http_port = ports[1];

    const LoadShape load{o.shape, o.start_pollers, o.max_pollers, o.seconds};
    std::atomic<int> level{pollers_at(load, 0)};
    // Jobs are dealt over the queues; every poller serves them all.
    std::vector<std::string> queues;
    queues.reserve(static_cast<std::size_t>(o.queues));
    for (int q = 0; q < o.queues; ++q) queues.push_back("canary-" + std::to_string(q));
    // A poller takes at most one job per review plus a round trip.
    Backlog backlog(o.dsn, r.org, 1000.0 / (o.review_ms + 5), level, queues);
    backlog.fill();

    // CURVE: a key pair for the coordinator, and one registered for the organization for the
    // ready check and every poller the shape can ask for, all before the first measured second.
    ops::CurveKeyPair server;
    std::vector<worker::CurveKeys> client_keys(static_cast<std::size_t>(o.max_pollers) + 1);
    if (!o.plaintext) {
        server = ops::make_curve_key_pair();
        std::vector<std::string> names{kReadyCheckName};
        for (int i = 0; i < o.max_pollers; ++i) names.push_back(poller_name(r.org, i));
        client_keys = make_registered_workers(o.dsn, r.org, names, server.public_key);
    }

    const std::string coordinator_log = o.out + "/coordinator.log";
    ChildProcess coordinator(coordinator_argv(o, binary, {r.endpoint, http_port}),
                             coordinator_env(o, server.secret_key), coordinator_log);
    zmq::context_t context;
    wait_until_serving(context, r.endpoint, r.org, client_keys[0], coordinator, coordinator_log);

    LockSampler sampler(o.dsn, kLockSamplePeriod);
    ClaimProbe probe(o.dsn, r.org, queues);
    AuditFollower follower(r.org);
    Recorder recorder;
    std::atomic<bool> pollers_stop{false};
    std::vector<std::unique_ptr<Poller>> pollers;
    std::vector<std::thread> threads;
    const auto ensure_pollers = [&](int n) {
        while (static_cast<int>(pollers.size()) < n) {
            PollerSettings s;
            s.endpoint = r.endpoint;
            s.org = r.org;
            s.index = static_cast<int>(pollers.size());
            s.worker_id = poller_name(r.org, s.index);
            s.curve = client_keys.at(static_cast<std::size_t>(s.index) + 1);
            s.review_ms = o.review_ms;
            s.claim_wait_ms = o.claim_wait_ms;
            s.queues = queues;
            pollers.push_back(std::make_unique<Poller>(context, s, recorder, level, pollers_stop));
            threads.emplace_back([p = pollers.back().get()] { p->run(); });
        }
    };

    sampler.start();
    probe.start();
    backlog.start();
    backlog.take();
    BackOff backoff(o.max_pollers);
    int previous_level = 0;
    Scrape scraped;
    if (const auto text = fetch_metrics(http_port)) scraped = parse_histograms(*text);
    const Scrape first_scrape = scraped;
    int timing_missing = 0;
    r.started_at_us = base::to_micros(base::SystemClock{}.now());
    const auto t0 = SteadyClock::now();
    try {
        for (int s = 0; s < o.seconds; ++s) {
            const int want = std::min(pollers_at(load, s), backoff.cap());
            level.store(want);
            ensure_pollers(want);
            const auto boundary = t0 + std::chrono::seconds(s + 1);
            while (SteadyClock::now() < boundary && !stop.load() && !coordinator.exited()) {
                std::this_thread::sleep_for(
                    std::min<SteadyClock::duration>(kBoundaryCheck, boundary - SteadyClock::now()));
            }
            if (const auto status = coordinator.exited()) {
                r.problems.push_back("aclaim-coordinator exited with status " +
                                     std::to_string(*status) + " during second " +
                                     std::to_string(s) + ":\n" + tail_of(coordinator_log, 10));
                break;
            }
            if (stop.load()) {
                r.interrupted = true;
                r.problems.push_back("interrupted by a signal during second " + std::to_string(s));
                break;
            }
            Interval in;
            in.second = s;
            in.pollers = want;
            in.displacement_bound = r.bounds.displacement_bound(std::max(want, previous_level));
            previous_level = want;
            r.facts.max_pollers = std::max(r.facts.max_pollers, want);
            if (const auto text = fetch_metrics(http_port)) {
                auto now_scraped = parse_histograms(*text);
                in.coordinator = timing_between(scraped, now_scraped);
                scraped = std::move(now_scraped);
            }
            if (!in.coordinator.available) ++timing_missing;
            in.seen = recorder.take();
            in.claim_latency = summarize(in.seen.claim_ms);
            in.audit = follower.advance(conn);
            in.displacement = summarize_displacement(in.audit.displacement);
            in.locks = sampler.take();
            in.probe = probe.take();
            in.probe_latency = summarize(in.probe.claim_ms);
            in.backlog = backlog.take();
            if (o.inject && o.inject->second == s) in.injected = o.inject->kind;
            in.violations = judge(in, r.bounds);
            if (const auto cap = backoff.record(want, !in.violations.empty())) {
                for (auto& v : in.violations) v.backed_off_to = *cap;
            }
            r.seen_total.add(in.seen);
            r.locks_total.add(in.locks);
            r.probe_total.add(in.probe);
            r.enqueued_total += in.backlog.enqueued;
            r.violations.insert(r.violations.end(), in.violations.begin(), in.violations.end());
            r.intervals.push_back(std::move(in));
            if (observer) observer(r, r.intervals.back());
        }
    } catch (const std::exception& e) {
        r.problems.push_back("measurement failed after " + std::to_string(r.intervals.size()) +
                             " intervals: " + e.what());
    }
    r.seconds_run = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    r.coordinator_total = timing_between(first_scrape, scraped);
    if (timing_missing > 0) {
        r.problems.push_back(
            "the coordinator's /metrics on 127.0.0.1:" + std::to_string(http_port) +
            " gave no claim timing for " + std::to_string(timing_missing) + " intervals");
    }

    // Wind down in dependency order: pollers finish their jobs while the coordinator still
    // serves, then the canary's own sessions, then the coordinator.
    pollers_stop.store(true);
    for (auto& t : threads) t.join();
    for (const auto& p : pollers) {
        if (!p->failure().empty()) r.problems.push_back("poller failed: " + p->failure());
    }
    r.seen_total.add(recorder.take());
    probe.stop();
    sampler.stop();
    backlog.stop();
    r.probe_total.add(probe.take());
    note_thread_errors(r, "lock sampler", sampler.thread());
    note_thread_errors(r, "claim probe", probe.thread());
    note_thread_errors(r, "backlog", backlog.thread());
    const bool died_before = coordinator.exited().has_value();
    r.coordinator_exit = coordinator.stop(kCoordinatorGrace);
    if (!died_before && r.coordinator_exit != 0) {
        r.problems.push_back("aclaim-coordinator exited with status " +
                             std::to_string(r.coordinator_exit) + " when stopped:\n" +
                             tail_of(coordinator_log, 10));
    }
    r.claim_latency_total = summarize(r.seen_total.claim_ms);
    r.probe_latency_total = summarize(r.probe_total.claim_ms);

    try {
        AuditFollower whole(r.org);
        r.facts.audit = whole.drain(conn);
        r.facts.displacement = summarize_displacement(r.facts.audit.displacement);
        r.facts.duplicate_assignments = r.seen_total.duplicate_assignments;
        r.facts.check = check_organization(conn, r.org);
        const auto end = judge_run(r.facts, r.bounds);
        r.violations.insert(r.violations.end(), end.begin(), end.end());
    } catch (const std::exception& e) {
        r.problems.push_back(std::string("end-of-run check failed: ") + e.what());
    }
    return r;
}

}  // namespace aclaim::drills
