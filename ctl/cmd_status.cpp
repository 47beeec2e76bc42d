// status: every organization's queue at a glance, once or redrawn every second.

#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/base/clock.hpp"
#include "common/ops/job_json.hpp"
#include "common/ops/operator_store.hpp"
#include "common/ops/recovery.hpp"
#include "ctl/cells.hpp"
#include "ctl/ctl.hpp"
#include "ctl/terminal.hpp"

namespace aclaim::ctl {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_interrupt(int) {
    g_interrupted = 1;
}

struct StatusArgs {
    std::int64_t org = 0;
    bool json = false;
    bool watch = false;
    int count = 0;
    std::string interval = "1s";
};

/// One queue's backlog and how fast it drains.
struct QueueDrain {
    store::OrgId org_id = 0;
    std::string queue;
    ops::DrainRate rate;
};

/// What one round shows: the organizations' counts, then per queue the completion rate over the
/// last minute and the time left at it.
struct Snapshot {
    std::vector<ops::OrgStatus> orgs;
    std::vector<QueueDrain> queues;  ///< in organization and queue order
};

Snapshot read_snapshot(pqxx::connection& conn, base::Instant now, std::optional<store::OrgId> org) {
    Snapshot out;
    out.orgs = ops::OperatorStore(conn).status(now, org);
    std::vector<store::OrgId> ids;
    for (const auto& s : out.orgs) ids.push_back(s.org_id);
    if (ids.empty()) return out;
    pqxx::read_transaction txn(conn);
    ops::QueueQuery query;
    query.orgs = ids;
    query.states = {store::JobState::Pending};
    std::map<std::pair<store::OrgId, std::string>, ops::DrainRate> by_queue;
    for (const auto& q : ops::count_queues(txn, query)) {
        if (q.pending > 0) by_queue[{q.org_id, q.queue}].pending = q.pending;
    }
    for (const auto& [key, n] : ops::completions_last_minute(txn, ids, now)) {
        by_queue[key].completed_last_minute = n;
    }
    for (const auto& [key, rate] : by_queue) out.queues.push_back({key.first, key.second, rate});
    return out;
}

/// The organization's queues added up.
ops::DrainRate org_drain(const Snapshot& snap, store::OrgId org) {
    ops::DrainRate sum;
    for (const auto& q : snap.queues) {
        if (q.org_id == org) sum += q.rate;
    }
    return sum;
}

nlohmann::json to_json(const Snapshot& snap, base::Instant now) {
    nlohmann::json out{{"at", ops::format_instant(now)},
                       {"organizations", nlohmann::json::object()}};
    ops::DrainRate total;
    for (const auto& q : snap.queues) total += q.rate;
    out["drain"] = ops::drain_json(total);
    for (const auto& s : snap.orgs) {
        nlohmann::json queues = nlohmann::json::object();
        for (const auto& q : snap.queues) {
            if (q.org_id == s.org_id) queues[q.queue] = ops::drain_json(q.rate);
        }
        auto& org = out["organizations"][std::to_string(s.org_id)];
        org = ops::state_counts_json(s);
        org.update({{"drain", ops::drain_json(org_drain(snap, s.org_id))},
                    {"queues", queues},
                    {"live_leases", s.live_leases},
                    {"expired_leases", s.expired_leases},
                    {"completed_last_minute", s.completed_last_minute},
                    {"oldest_pending_age_ms",
                     s.oldest_pending_age
                         ? nlohmann::json(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              *s.oldest_pending_age)
                                              .count())
                         : nlohmann::json(nullptr)}});
    }
    return out;
}

/// "—" while nothing completed in the last minute: at a rate of 0 no time is left to tell.
std::string time_left_text(const ops::DrainRate& rate) {
    const auto left = rate.time_left();
    return left ? format_duration(*left) : "\u2014";
}

void print_drains(std::FILE* out, const Snapshot& snap) {
    if (snap.queues.empty()) return;
    std::fprintf(out, "\n%-8s %-24s %9s %9s %8s %10s\n", "org", "queue", "pending", "last-min",
                 "rate/s", "time-left");
    auto line = [out](const std::string& org, const std::string& queue, const ops::DrainRate& r) {
        const auto left = time_left_text(r);
        // The dash is one column wide in three bytes: printf pads by bytes.
        const int width = r.time_left() ? 10 : 12;
        std::fprintf(out, "%-8s %-24s %9lld %9lld %8.2f %*s\n", org.c_str(),
                     one_line(queue, 24).c_str(), static_cast<long long>(r.pending),
                     static_cast<long long>(r.completed_last_minute), r.per_second(), width,
                     left.c_str());
    };
    ops::DrainRate total;
    for (const auto& q : snap.queues) {
        line(std::to_string(q.org_id), q.queue, q.rate);
        total += q.rate;
    }
    line("total", "", total);
}

void print_table(std::FILE* out, const Snapshot& snap) {
    const auto& rows = snap.orgs;
    std::fprintf(out, "%-8s %9s %10s %9s %9s %9s %9s %10s %9s %8s %9s %9s %12s %7s %8s\n", "org",
                 "pending", "oldest", "scheduled", "assigned", "live", "expired", "completed",
                 "last-min", "failed", "discarded", "cancelled", "quarantined", "parked",
                 "waiting");
    ops::OrgStatus total;
    auto line = [out](const char* org, const ops::OrgStatus& s) {
        const std::string oldest =
            s.oldest_pending_age ? format_duration(*s.oldest_pending_age) : "-";
        std::fprintf(
            out,
            "%-8s %9lld %10s %9lld %9lld %9lld %9lld %10lld %9lld %8lld %9lld %9lld %12lld %7lld "
            "%8lld\n",
            org, static_cast<long long>(s.pending), oldest.c_str(),
            static_cast<long long>(s.scheduled), static_cast<long long>(s.assigned),
            static_cast<long long>(s.live_leases), static_cast<long long>(s.expired_leases),
            static_cast<long long>(s.completed), static_cast<long long>(s.completed_last_minute),
            static_cast<long long>(s.failed), static_cast<long long>(s.discarded),
            static_cast<long long>(s.cancelled), static_cast<long long>(s.quarantined),
            static_cast<long long>(s.parked), static_cast<long long>(s.waiting));
    };
    for (const auto& s : rows) {
        line(std::to_string(s.org_id).c_str(), s);
        for (const auto count :
             {&ops::OrgStatus::pending, &ops::OrgStatus::scheduled, &ops::OrgStatus::discarded,
              &ops::OrgStatus::cancelled, &ops::OrgStatus::assigned, &ops::OrgStatus::live_leases,
              &ops::OrgStatus::expired_leases, &ops::OrgStatus::completed,
              &ops::OrgStatus::completed_last_minute, &ops::OrgStatus::failed,
              &ops::OrgStatus::quarantined, &ops::OrgStatus::parked, &ops::OrgStatus::waiting}) {
            total.*count += s.*count;
        }
        if (s.oldest_pending_age &&
            (!total.oldest_pending_age || *s.oldest_pending_age > *total.oldest_pending_age)) {
            total.oldest_pending_age = s.oldest_pending_age;
        }
    }
    if (rows.empty()) std::fprintf(out, "(no jobs)\n");
    if (rows.size() > 1) line("total", total);
    print_drains(out, snap);
}

/// Sleeps up to `d`, returning early when Ctrl-C arrives.
void pause(const base::Clock& clock, base::Duration d) {
    const auto until = clock.monotonic_now() + d;
    while (!g_interrupted && clock.monotonic_now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

/// One round in every cell (or in the organization's cell): no --watch, which follows one
/// database.
int status_cells(const Global& global, const base::CellMap& map, const StatusArgs& a,
                 std::optional<store::OrgId> org) {
    if (a.watch)
        throw UsageError(
            "--watch follows one database: pass --dsn with the cell's DSN instead of "
            "--cells");
    // The program's clock outlives every cell's thread, as it does the program's other threads.
    const auto command = [org, json = a.json, clock = &global.clock](const base::Cell&,
                                                                     pqxx::connection& conn) {
        const auto now = clock->now();
        const auto snap = read_snapshot(conn, now, org);
        CellReport out;
        for (const auto& r : snap.orgs) out.organizations.insert(r.org_id);
        out.json = to_json(snap, now).dump();
        if (!json) {
            TextBuffer text;
            print_table(text.file(), snap);
            out.text = text.text();
        }
        return out;
    };
    return run_across_cells(global, map, target_cells(map, org), command, a.json);
}

int run_status(const Global& global, const StatusArgs& a) {
    const auto interval = parse_duration(a.interval);
    if (!interval || *interval < std::chrono::milliseconds(100)) {
        throw UsageError("--interval '" + a.interval + "' must be a duration of at least 100ms");
    }
    if (a.count > 0 && !a.watch) throw UsageError("--count bounds --watch; add --watch");
    const auto org = a.org > 0 ? std::optional<store::OrgId>(a.org) : std::nullopt;
    if (const auto map = load_cells(global)) return status_cells(global, *map, a, org);
    const std::string& dsn = require_dsn(global);
    const bool tty = is_terminal(1);
    if (a.watch) std::signal(SIGINT, on_interrupt);
    std::unique_ptr<pqxx::connection> conn;
    const base::Clock& clock = global.clock;
    for (int round = 1; !g_interrupted; ++round) {
        const auto now = clock.now();
        Snapshot snap;
        std::string trouble;
        try {
            if (!conn) conn = std::make_unique<pqxx::connection>(dsn);
            snap = read_snapshot(*conn, now, org);
        } catch (const pqxx::broken_connection& e) {
            // Watching is how an operator follows an outage: say so and keep looking.
            if (!a.watch) throw;
            conn.reset();
            trouble = std::string("database unreachable: ") + e.what();
        }
        if (a.json) {
            auto out = to_json(snap, now);
            if (!trouble.empty()) out["error"] = trouble;
            std::cout << (a.watch ? out.dump() : out.dump(2)) << std::endl;
        } else {
            if (a.watch && tty) std::printf("\033[H\033[2J");
            if (a.watch) {
                const std::string hint = tty ? "   (every " + a.interval + "; Ctrl-C to stop)" : "";
                std::printf("aclaim status at %s%s\n", ops::format_instant(now).c_str(),
                            hint.c_str());
            }
            if (trouble.empty()) {
                print_table(stdout, snap);
            } else {
                std::printf("%s\n", one_line(trouble, 200).c_str());
            }
            if (a.watch && !tty) std::printf("\n");
            std::fflush(stdout);
        }
        if (!a.watch || (a.count > 0 && round >= a.count)) break;
        pause(clock, *interval);
    }
    return 0;
}

}  // namespace

void add_status_command(CLI::App& app, Global& global, Action& action) {
    auto [cmd, args] = add_command<StatusArgs>(
        app, "status",
        "Per organization: jobs by state, oldest pending age, live and expired leases, "
        "quarantined, completions in the last minute; per queue and in total: the completion "
        "rate over the last minute and the time the pending jobs take at it",
        global, action, run_status);
    base::add_org(*cmd, args->org, "Only this organization");
    cmd->add_flag("--json", args->json, "Print JSON (with --watch: one object per line)");
    cmd->add_flag("--watch", args->watch, "Redraw every --interval until Ctrl-C");
    cmd->add_option("--count", args->count, "With --watch: stop after this many rounds")
        ->check(base::whole_number(1));
    cmd->add_option("--interval", args->interval, "With --watch: pause between rounds")
        ->capture_default_str();
}

}  // namespace aclaim::ctl
