// Ten thousand connected workers on one coordinator: idle sessions held by child processes (each
// DEALER costs a descriptor for its connection and one for its mailbox, so one process would run
// out of descriptors), each long-polling a CLAIM on an organization without jobs as an idle
// reviewer does; beside them a fleet of active workers claiming and completing. Measured: the
// coordinator's resident memory per connection, the active workers' claim latency meanwhile, and
// after a coordinator restart how long until every idle worker has a session on the new one, and
// what the active workers saw in that time.

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include "common/base/backoff.hpp"
#include "common/base/reconnect_spread.hpp"
#include "common/proto/wire_errors.hpp"
#include "drills/bench.d/fleet.hpp"
#include "drills/bench.d/wire.hpp"

extern char** environ;

namespace aclaim::drills {

namespace proto = aclaim::proto;

void raise_fd_limit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}

namespace {

/// Each idle worker's long poll: the protocol's longest, as an idle reviewer would ask.
constexpr std::int32_t kIdleWaitMs = 60'000;
/// A HELLO or CLAIM unanswered this long (beyond the claim's wait) means the session is gone.
constexpr auto kReplyTimeout = std::chrono::seconds(5);

std::atomic<bool> g_stop{false};
/// SIGUSR1: the coordinator is about to be restarted; count the workers back from now.
std::atomic<bool> g_mark{false};

void on_signal(int) {
    g_stop.store(true);
}

void on_mark(int) {
    g_mark.store(true);
}

/// One idle worker: HELLO, then a long-poll CLAIM renewed whenever it ends; on draining,
/// no_session, any other ERROR or silence, a new connection after the wait the worker library
/// takes (common/base/reconnect_spread.hpp): the first attempt after a session a uniform share of
/// a window sized by WELCOME's `sessions`, later ones a jittered back-off (100 ms doubling to
/// 5 s), never sooner than a refusal's retry_after_ms. An idle worker has no work at stake, so it
/// takes the whole window.
struct IdleWorker {
    enum class State { Greeting, Claiming, BackingOff };
    std::unique_ptr<zmq::socket_t> socket;
    State state = State::BackingOff;
    BenchClock::time_point due{};  ///< reply deadline, or when to reconnect
    base::Backoff backoff{std::chrono::milliseconds(100), std::chrono::milliseconds(5000)};
    /// The sessions the last WELCOME reported.
    std::optional<std::int64_t> fleet;
    bool welcomed_once = false;
};

/// A child process running `aclaim-bench crowd-idle`, its stdout read line by line.
struct Child {
    pid_t pid = 0;
    FILE* out = nullptr;
};

Child spawn_idle(const CrowdOptions& o, int count, int first) {
    std::vector<std::string> args{"/proc/self/exe", "crowd-idle",
                                  "--endpoint",     o.target.endpoint,
                                  "--org",          std::to_string(o.target.org),
                                  "--count",        std::to_string(count),
                                  "--first",        std::to_string(first)};
    if (o.target.auth.plaintext) {
        args.emplace_back("--plaintext");
    } else {
        args.insert(args.end(),
                    {"--curve-server-key", o.target.auth.server_key, "--dsn", o.target.auth.dsn});
    }
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) throw std::runtime_error("crowd: pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    Child c;
    const int rc = posix_spawn(&c.pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    if (rc != 0) {
        close(pipe_fds[0]);
        throw std::runtime_error("crowd: cannot start an idle-worker process");
    }
    c.out = fdopen(pipe_fds[0], "r");
    return c;
}

/// Waits for a line from every child that starts with `word`; false after `timeout`.
bool await_all(std::vector<Child>& children, const std::string& word,
               std::chrono::seconds timeout) {
    const auto deadline = BenchClock::now() + timeout;
    for (auto& c : children) {
        char line[256];
        while (true) {
            if (BenchClock::now() >= deadline) return false;
            pollfd p{fileno(c.out), POLLIN, 0};
            if (poll(&p, 1, 200) <= 0) continue;
            if (fgets(line, sizeof line, c.out) == nullptr) return false;  // the child ended
            if (std::string(line).rfind(word, 0) == 0) break;
        }
    }
    return true;
}

void end_children(std::vector<Child>& children) {
    for (auto& c : children) {
        if (c.pid > 0) kill(c.pid, SIGTERM);
    }
    for (auto& c : children) {
        if (c.pid > 0) waitpid(c.pid, nullptr, 0);
        if (c.out != nullptr) fclose(c.out);
        c = Child{};
    }
}

/// Latency figures of claim samples inside [from, to).
nlohmann::json claims_between(const std::vector<ClaimSample>& samples, BenchClock::time_point from,
                              BenchClock::time_point to) {
    std::vector<double> ms;
    std::vector<BenchClock::time_point> at;
    for (const auto& s : samples) {
        if (s.at < from || s.at >= to) continue;
        ms.push_back(s.ms);
        at.push_back(s.at);
    }
    std::sort(at.begin(), at.end());
    // The longest stretch in which no active worker got a job: starvation shows here even when
    // the few claims that were answered were quick.
    double gap = at.empty() ? std::chrono::duration<double, std::milli>(to - from).count() : 0;
    for (std::size_t i = 0; i <= at.size() && !at.empty(); ++i) {
        const auto a = i == 0 ? from : at[i - 1];
        const auto b = i == at.size() ? to : at[i];
        gap = std::max(gap, std::chrono::duration<double, std::milli>(b - a).count());
    }
    nlohmann::json out;
    out["claims"] = ms.size();
    out["seconds"] = std::chrono::duration<double>(to - from).count();
    out["claim_p50_ms"] = percentile(ms, 0.50);
    out["claim_p99_ms"] = percentile(ms, 0.99);
    out["claim_max_ms"] = ms.empty() ? 0.0 : ms.back();
    out["longest_gap_without_assignment_ms"] = gap;
    return out;
}

long tcp_memory_pages() {
    std::ifstream f("/proc/net/sockstat");
    std::string word;
    while (f >> word) {
        if (word == "TCP:") {
            std::string key;
            long value = 0;
            while (f >> key >> value) {
                if (key == "mem") return value;
            }
        }
    }
    return 0;
}

}  // namespace

int run_crowd_idle(const CrowdIdleOptions& o) {
    raise_fd_limit();
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGUSR1, on_mark);
    const auto names = session_names("idle", o.count, o.first);
    const auto keys = o.target.auth.keys_for(o.target.org, names);
    zmq::context_t ctx(1);
    // A closed socket counts against the limit until the context's reaper has finished with it,
    // and workers that reconnect replace theirs: room for every one to be replaced at once.
    ctx.set(zmq::ctxopt::max_sockets, ctx.get(zmq::ctxopt::socket_limit));
    std::vector<IdleWorker> workers(names.size());
    std::mt19937 jitter(static_cast<std::uint32_t>(getpid()));
    std::uint64_t next_req = 1;
    int welcomed = 0;
    bool reported = false;
    // After SIGUSR1: which workers have had a WELCOME since, and when the mark was set.
    std::vector<bool> back(workers.size(), false);
    int back_count = -1;
    BenchClock::time_point marked_at{};
    bool sockets_changed = true;
    // The earliest deadline of any worker: the loop sleeps in its poll until a message comes or
    // then, never on a fixed tick. A tick of 50 ms cost each process a zmq_poll over its 1,250
    // sockets (a system call each) twenty times a second: a quarter of the two cores for a crowd
    // that was doing nothing, taken from the active workers it stands beside.
    auto next_timers = BenchClock::now();
    const auto set_due = [&](IdleWorker& w, BenchClock::time_point due) {
        w.due = due;
        next_timers = std::min(next_timers, due);
    };
    const auto hello = [&](std::size_t i, BenchClock::time_point now) {
        IdleWorker& w = workers[i];
        proto::Hello h{next_req++, names[i], o.target.org};
        h.features.emplace_back(proto::kFeatureReconnectHints);
        send(*w.socket, h);
        w.state = IdleWorker::State::Greeting;
        set_due(w, now + kReplyTimeout);
    };
    const auto open = [&](std::size_t i, BenchClock::time_point now) {
        IdleWorker& w = workers[i];
        w.socket = connect(ctx, o.target.endpoint, keys[i]);
        hello(i, now);
        sockets_changed = true;
    };
    const auto wait_for = [&](IdleWorker& w, std::optional<std::chrono::milliseconds> after) {
        return base::ReconnectSpread::next_wait(w.backoff, base::ReconnectSpread::window(w.fleet),
                                                after, jitter);
    };
    const auto back_off = [&](std::size_t i, BenchClock::time_point now,
                              std::optional<std::chrono::milliseconds> after = std::nullopt) {
        IdleWorker& w = workers[i];
        w.socket.reset();
        w.state = IdleWorker::State::BackingOff;
        set_due(w, now + wait_for(w, after));
        sockets_changed = true;
    };
    const auto claim = [&](std::size_t i, BenchClock::time_point now) {
        IdleWorker& w = workers[i];
        send(*w.socket, proto::Claim{next_req++, 1, kIdleWaitMs});
        w.state = IdleWorker::State::Claiming;
        set_due(w, now + std::chrono::milliseconds(kIdleWaitMs) + kReplyTimeout);
    };
    const auto start = BenchClock::now();
    for (std::size_t i = 0; i < workers.size(); ++i) open(i, start);
    std::vector<zmq::pollitem_t> items;
    std::vector<std::size_t> owner;
    while (!g_stop.load()) {
        if (g_mark.exchange(false)) {
            std::fill(back.begin(), back.end(), false);
            back_count = 0;
            marked_at = BenchClock::now();
        }
        // The poll set changes only when a worker replaces its socket; rebuilding it for every
        // message would cost the load generator O(workers) per message.
        if (sockets_changed) {
            items.clear();
            owner.clear();
            for (std::size_t i = 0; i < workers.size(); ++i) {
                if (!workers[i].socket) continue;
                items.push_back({workers[i].socket->handle(), 0, ZMQ_POLLIN, 0});
                owner.push_back(i);
            }
            sockets_changed = false;
        }
        try {
            const auto until_timers =
                std::chrono::ceil<std::chrono::milliseconds>(next_timers - BenchClock::now());
            zmq::poll(items.data(), items.size(),
                      std::clamp(until_timers, std::chrono::milliseconds(0),
                                 std::chrono::milliseconds(1000)));
        } catch (const zmq::error_t& e) {
            if (e.num() != EINTR) throw;
            continue;  // a signal: the loop's condition or the mark takes it
        }
        auto now = BenchClock::now();
        for (std::size_t k = 0; k < items.size(); ++k) {
            if ((items[k].revents & ZMQ_POLLIN) == 0) continue;
            const std::size_t i = owner[k];
            IdleWorker& w = workers[i];
            while (w.socket) {
                auto m = receive(*w.socket);
                if (!m) break;
                if (const auto* welcome = std::get_if<proto::Welcome>(&*m)) {
                    w.backoff.reset();
                    if (welcome->sessions) w.fleet = welcome->sessions;
                    if (!w.welcomed_once) {
                        w.welcomed_once = true;
                        ++welcomed;
                    }
                    if (back_count >= 0 && !back[i]) {
                        back[i] = true;
                        if (++back_count == o.count) {
                            std::printf("back %d %.3f\n", back_count, seconds_since(marked_at));
                            std::fflush(stdout);
                        }
                    }
                    claim(i, now);
                } else if (const auto* nw = std::get_if<proto::NoWork>(&*m)) {
                    if (nw->reason == proto::errors::kDraining) {
                        back_off(i, now);
                    } else {
                        claim(i, now);
                    }
                } else if (const auto* e = std::get_if<proto::Error>(&*m)) {
                    std::optional<std::chrono::milliseconds> after;
                    if (e->retry_after_ms) after = std::chrono::milliseconds(*e->retry_after_ms);
                    if (after && w.state == IdleWorker::State::Greeting &&
                        (e->code == proto::errors::kOverloaded ||
                         e->code == proto::errors::kTooManyRequests)) {
                        // Turned away for now: the connection is kept and HELLO said again.
                        w.state = IdleWorker::State::BackingOff;
                        set_due(w, now + wait_for(w, after));
                        break;
                    }
                    back_off(i, now, after);
                }
            }
        }
        now = BenchClock::now();
        if (now >= next_timers) {
            next_timers = now + std::chrono::milliseconds(1000);
            for (std::size_t i = 0; i < workers.size(); ++i) {
                IdleWorker& w = workers[i];
                if (w.due > now) {
                    next_timers = std::min(next_timers, w.due);
                    continue;
                }
                if (w.state == IdleWorker::State::BackingOff) {
                    if (w.socket) {
                        hello(i, now);
                    } else {
                        open(i, now);
                    }
                } else {
                    back_off(i, now);
                }
            }
        }
        if (!reported && welcomed == o.count) {
            std::printf("ready %d %.3f\n", welcomed, seconds_since(start));
            std::fflush(stdout);
            reported = true;
        }
    }
    return 0;
}

nlohmann::json run_crowd(const CrowdOptions& o) {
    raise_fd_limit();
    nlohmann::json out;
    out["idle_workers"] = o.idle;
    out["active_workers"] = o.active.clients;
    out["curve"] = !o.target.auth.plaintext;
    const long rss_before = proc_status_kb(o.pid, "VmRSS");
    const long tcp_before = tcp_memory_pages();
    out["coordinator_rss_before_mb"] = static_cast<double>(rss_before) / 1024.0;

    std::vector<Child> children;
    const int per = (o.idle + o.processes - 1) / o.processes;
    const auto connect_began = BenchClock::now();
    try {
        for (int first = 0; first < o.idle; first += per) {
            children.push_back(spawn_idle(o, std::min(per, o.idle - first), first));
        }
        if (!await_all(children, "ready", std::chrono::seconds(o.connect_timeout_s))) {
            throw std::runtime_error("not every idle worker had a session within " +
                                     std::to_string(o.connect_timeout_s) + " s");
        }
        out["seconds_to_connect_all"] = seconds_since(connect_began);
        // Idle a moment, so that whatever the coordinator does per session has happened.
        std::this_thread::sleep_for(std::chrono::seconds(2));
        const long rss_connected = proc_status_kb(o.pid, "VmRSS");
        const long tcp_connected = tcp_memory_pages();
        out["coordinator_rss_connected_mb"] = static_cast<double>(rss_connected) / 1024.0;
        out["rss_per_connection_kb"] =
            static_cast<double>(rss_connected - rss_before) / static_cast<double>(o.idle);
        out["coordinator_anon_connected_mb"] =
            static_cast<double>(proc_status_kb(o.pid, "RssAnon")) / 1024.0;
        // The kernel's socket buffers are not in any process's RSS: both ends of each loopback
        // connection, in pages of the whole machine.
        out["kernel_tcp_kb_per_connection"] =
            static_cast<double>(tcp_connected - tcp_before) * 4.0 / static_cast<double>(o.idle);
        out["sessions_connected"] = gauge(o.metrics, "aclaim_connected_workers").value_or(-1);

        ClientFleet fleet(o.active, "active");
        std::this_thread::sleep_for(std::chrono::seconds(1));
        fleet.take_samples();
        const auto steady_from = BenchClock::now();
        const CpuSample cpu_began = sample_cpu(o.active.cpu);
        fleet.set_counting(true);
        std::this_thread::sleep_for(std::chrono::duration<double>(o.steady_seconds));
        const auto steady_to = BenchClock::now();
        const long steady_jobs = fleet.counts().completed.load();
        const CpuSample cpu_ended = sample_cpu(o.active.cpu);
        auto samples = fleet.take_samples();
        out["steady"] = claims_between(samples, steady_from, steady_to);
        out["steady"]["jobs_per_s"] =
            static_cast<double>(steady_jobs) /
            std::chrono::duration<double>(steady_to - steady_from).count();
        out["steady"]["cpu"] = cpu_report(cpu_began, cpu_ended, static_cast<double>(steady_jobs));

        // The restart: this process stops the coordinator, the bench starts the next one on the
        // same endpoint and writes its process id to new_pid_file.
        std::remove(o.new_pid_file.c_str());
        const long errors_before = fleet.counts().errors.load();
        const long ended_before = fleet.counts().claims_ended.load();
        for (auto& c : children) kill(c.pid, SIGUSR1);
        // Let the mark land before the coordinator begins to drain.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const auto restart_at = BenchClock::now();
        kill(o.pid, SIGTERM);
        int new_pid = 0;
        while (new_pid == 0 && seconds_since(restart_at) < 60) {
            std::ifstream f(o.new_pid_file);
            if (!(f >> new_pid)) new_pid = 0;
            if (new_pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (new_pid == 0) throw std::runtime_error("no new coordinator within 60 s of the restart");
        std::optional<BenchClock::time_point> up;
        std::optional<BenchClock::time_point> all;
        std::atomic<bool> storm_over{false};
        // Sessions on the new coordinator at 5, 10, 20 and 30 s after SIGTERM and every 30 s
        // after that, printed as they are taken: a storm that does not end says how far it got.
        nlohmann::json back_at = nlohmann::json::object();
        // The first answer of the new coordinator's /metrics, then every idle worker's WELCOME
        // from it, as each process reports once all of its workers have had one since the mark.
        std::thread watch_up([&] {
            while (!up && !storm_over.load() && seconds_since(restart_at) < o.connect_timeout_s) {
                if (gauge(o.metrics, "aclaim_connected_workers")) {
                    up = BenchClock::now();
                } else {
                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                }
            }
            int mark = 5;
            while (!storm_over.load() && seconds_since(restart_at) < o.connect_timeout_s) {
                if (seconds_since(restart_at) < mark) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
                    continue;
                }
                const double n = gauge(o.metrics, "aclaim_connected_workers").value_or(0);
                back_at[std::to_string(mark)] = n;
                std::fprintf(stderr,
                             "crowd restart: %.0f of %d sessions on the new coordinator %d s after "
                             "SIGTERM\n",
                             n, o.idle + o.active.clients, mark);
                mark = mark < 10 ? 10 : mark < 20 ? 20 : mark + 10 * (mark < 30 ? 1 : 3);
            }
        });
        if (await_all(children, "back",
                      std::chrono::seconds(o.connect_timeout_s) -
                          std::chrono::duration_cast<std::chrono::seconds>(BenchClock::now() -
                                                                           restart_at))) {
            all = BenchClock::now();
        }
        storm_over.store(true);
        watch_up.join();
        if (!all) {
            std::fprintf(stderr,
                         "crowd restart: not every idle worker was back within %d s of SIGTERM\n",
                         o.connect_timeout_s);
        }
        const double sessions = gauge(o.metrics, "aclaim_connected_workers").value_or(-1);
        const auto storm_to = all.value_or(BenchClock::now());
        // The active workers' view a little past the storm, so that its last claims are in.
        std::this_thread::sleep_for(std::chrono::seconds(1));
        samples = fleet.take_samples();
        nlohmann::json r = claims_between(samples, restart_at, storm_to);
        // Each active worker is away while it reconnects on its own backoff; what the idle crowd
        // can take from them shows once all of them are back. When they were not all back before
        // the crowd, there was no such stretch: the figures are null, never a wait of 0 ms, and
        // the report counts that as a miss (active workers kept out of the storm are starved).
        const auto active_back = fleet.all_reconnected_after(restart_at);
        r["seconds_to_active_back"] =
            active_back ? std::chrono::duration<double>(*active_back - restart_at).count() : -1.0;
        r["active_back_amid_crowd"] = active_back && *active_back < storm_to;
        r["longest_gap_after_active_back_ms"] = nullptr;
        r["claims_after_active_back"] = nullptr;
        if (active_back && *active_back < storm_to) {
            const auto after = claims_between(samples, *active_back, storm_to);
            r["longest_gap_after_active_back_ms"] = after["longest_gap_without_assignment_ms"];
            r["claims_after_active_back"] = after["claims"];
        }
        r["all_reconnected"] = all.has_value();
        r["sessions_back_at_seconds"] = back_at;
        r["sessions_at_end"] = sessions;
        r["seconds_to_reconnect_all"] =
            std::chrono::duration<double>(storm_to - restart_at).count();
        r["seconds_from_new_coordinator_up"] =
            up ? std::chrono::duration<double>(storm_to - *up).count() : 0.0;
        r["active_refusals"] = fleet.counts().errors.load() - errors_before;
        r["active_refusals_by_reason"] = fleet.refusals();
        r["active_claims_ended_without_job"] = fleet.counts().claims_ended.load() - ended_before;
        const long rss_after = proc_status_kb(new_pid, "VmRSS");
        r["coordinator_rss_mb"] = static_cast<double>(rss_after) / 1024.0;
        out["restart"] = r;
        fleet.stop();
    } catch (...) {
        end_children(children);
        throw;
    }
    end_children(children);
    return out;
}

}  // namespace aclaim::drills
