// cancel, retry and queue: an operator's hold on the job lifecycle. Every action is audited with
// who acted and why: job_events for cancel and retry, queue_events for the queue commands.

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "common/base/clock.hpp"
#include "common/ops/job_json.hpp"
#include "common/ops/operator_store.hpp"
#include "ctl/cmd_recover.hpp"
#include "ctl/ctl.hpp"
#include "ctl/terminal.hpp"

namespace aclaim::ctl {

namespace {

/// Jobs named by id, or by a filter (organization, queue, state); never both, never neither.
struct Selection {
    std::vector<store::JobId> ids;
    std::int64_t org = 0;
    std::string queue;
    std::string state;
};

void add_selection(CLI::App* cmd, Selection& s, const char* what) {
    cmd->add_option("jobs", s.ids, std::string("Job ids to ") + what);
    base::add_org(*cmd, s.org, "Filter: organization");
    cmd->add_option("--queue", s.queue, "Filter: queue");
    cmd->add_option("--state", s.state, "Filter: state");
}

std::vector<store::JobId> select(ops::OperatorStore& store, const Selection& s) {
    const bool filtered = s.org > 0 || !s.queue.empty() || !s.state.empty();
    if (!s.ids.empty() && filtered) throw UsageError("give job ids or a filter, not both");
    if (!s.ids.empty()) return s.ids;
    if (s.org <= 0) throw UsageError("give job ids, or a filter with --org (and --queue, --state)");
    if (!s.state.empty() && !is_job_state(s.state))
        throw UsageError("--state '" + s.state + "' is not a job state");
    ops::JobFilter f;
    f.org_id = s.org;
    if (!s.queue.empty()) f.queue = s.queue;
    if (!s.state.empty()) f.state = s.state;
    return store.matching(f);
}

/// The exit code of a command on a selection (exit_codes.hpp). Jobs named by id are what was
/// asked: one left untouched is said on standard error and the exit code is kExitUsage, never a
/// silent 0. A filter asks for whatever matches; matching nothing is said, and is no mistake.
int outcome(const Selection& s, const std::vector<store::JobId>& selected,
            const std::set<store::JobId>& acted, const char* why_not) {
    if (selected.empty()) {
        std::fprintf(stderr, "aclaimctl: no job of organization %lld matches the filter\n",
                     static_cast<long long>(s.org));
        return base::kExitOk;
    }
    if (s.ids.empty()) return base::kExitOk;
    std::string untouched;
    for (const auto id : selected) {
        if (acted.count(id) > 0) continue;
        if (!untouched.empty()) untouched += ' ';
        untouched += std::to_string(id);
    }
    if (untouched.empty()) return base::kExitOk;
    std::fprintf(stderr, "aclaimctl: nothing done to job%s %s: %s\n",
                 untouched.find(' ') == std::string::npos ? "" : "s", untouched.c_str(), why_not);
    return base::kExitUsage;
}

struct CancelArgs {
    Selection selection;
    std::string reason;
    std::string actor = default_actor();
};

int run_cancel(const Global& global, const CancelArgs& a) {
    if (a.reason.find_first_not_of(" \t\n") == std::string::npos)
        throw UsageError("--reason must say why; it is recorded in job_events");
    pqxx::connection conn(require_dsn(global));
    ops::OperatorStore store(conn);
    const auto ids = select(store, a.selection);
    const auto done = store.cancel(ids, a.actor, a.reason, global.clock.now());
    for (const auto& c : done) {
        std::printf("job %lld cancelled (was %s%s)\n", static_cast<long long>(c.job_id),
                    c.was.c_str(),
                    c.holder.empty() ? ""
                                     : (", held by " + c.holder + " at generation " +
                                        std::to_string(c.generation) + ", who is told now")
                                           .c_str());
    }
    std::printf("cancelled %zu of %zu jobs\n", done.size(), ids.size());
    std::set<store::JobId> acted;
    for (const auto& c : done) acted.insert(c.job_id);
    return outcome(a.selection, ids, acted, "already finished, quarantined or unknown");
}

struct RetryArgs {
    Selection selection;
    std::string reason = "revived by an operator";
    std::string actor = default_actor();
};

int run_retry(const Global& global, const RetryArgs& a) {
    pqxx::connection conn(require_dsn(global));
    ops::OperatorStore store(conn);
    const auto ids = select(store, a.selection);
    const auto done = store.retry(ids, a.actor, a.reason, global.clock.now());
    for (const auto id : done) {
        std::printf("job %lld pending again with a fresh attempt budget\n",
                    static_cast<long long>(id));
    }
    std::printf("revived %zu of %zu jobs\n", done.size(), ids.size());
    return outcome(a.selection, ids, std::set<store::JobId>(done.begin(), done.end()),
                   "not failed, discarded or cancelled, or unknown");
}

struct QueueArgs {
    std::int64_t org = 0;
    std::string queue;
    std::string reason;
    std::string actor = default_actor();
    std::optional<int> max_assigned;
    std::optional<int> max_attempts;
    std::optional<double> rate;
    std::optional<int> burst;
    std::optional<int> weight;
    std::string aging;
    std::string backoff_base, backoff_cap, run_timeout;
    std::string retain_completed, retain_failed, retain_discarded, retain_cancelled;
    bool json = false;
    bool create = false;
};

void check_queue(const QueueArgs& a) {
    if (!base::valid_queue_name(a.queue)) throw UsageError("'" + a.queue + "' is not a queue name");
}

/// The refusal of a queue the organization does not have, with the ones it has: most often the
/// name was misspelt.
std::string unknown_queue(pqxx::connection& conn, const QueueArgs& a, const ops::UnknownQueue& e) {
    std::string known;
    for (const auto& q : ops::OperatorStore(conn).queues(a.org)) {
        if (!known.empty()) known += ", ";
        known += q.queue;
    }
    return std::string(e.what()) + "; its queues: " + (known.empty() ? "none" : known) +
           ". Add --create if a new queue is meant";
}

int run_pause(const Global& global, const QueueArgs& a, bool paused) {
    check_queue(a);
    pqxx::connection conn(require_dsn(global));
    try {
        ops::OperatorStore(conn).pause(a.org, a.queue, paused, a.actor,
                                       a.reason.empty() ? "no reason given" : a.reason,
                                       global.clock, a.create);
    } catch (const ops::UnknownQueue& e) {
        throw UsageError(unknown_queue(conn, a, e));
    }
    std::printf("queue %s of organization %lld %s\n", a.queue.c_str(),
                static_cast<long long>(a.org),
                paused ? "paused: it hands out nothing; leases already out continue"
                       : "resumed: its parked claims are woken");
    return 0;
}

/// "" for unset, or the duration for people; "0" sets a setting back.
std::optional<base::Duration> setting(const std::string& text, const char* flag) {
    if (text.empty()) return std::nullopt;
    if (text == "0") return base::Duration{0};
    const auto d = parse_duration(text);
    if (!d) throw UsageError(std::string(flag) + " '" + text + "' is not a duration like 30s");
    return d;
}

/// A retention: a duration, "forever", or "0" for the built-in default.
std::optional<base::Duration> retention(const std::string& text, const char* flag) {
    if (text == "forever") return ops::kRetainForever;
    const auto d = setting(text, flag);
    if (d && *d != base::Duration{0} && *d < std::chrono::seconds(1))
        throw UsageError(std::string(flag) + " '" + text + "' is shorter than a second");
    return d;
}

std::string retention_text(base::Duration d) {
    return d == ops::kRetainForever ? "forever" : format_duration(d);
}

int run_set(const Global& global, const QueueArgs& a) {
    check_queue(a);
    ops::QueueSettings q;
    q.max_assigned = a.max_assigned;
    q.max_attempts = a.max_attempts;
    q.backoff_base = setting(a.backoff_base, "--backoff-base");
    q.backoff_cap = setting(a.backoff_cap, "--backoff-cap");
    q.run_timeout = setting(a.run_timeout, "--run-timeout");
    q.retain_completed = retention(a.retain_completed, "--retain-completed");
    q.retain_failed = retention(a.retain_failed, "--retain-failed");
    q.retain_discarded = retention(a.retain_discarded, "--retain-discarded");
    q.retain_cancelled = retention(a.retain_cancelled, "--retain-cancelled");
    q.rate_per_s = a.rate;
    q.rate_burst = a.burst;
    q.weight = a.weight;
    q.aging = setting(a.aging, "--aging");
    if (q.aging && *q.aging != base::Duration{0} && *q.aging < std::chrono::seconds(1))
        throw UsageError("--aging '" + a.aging + "' is shorter than a second");
    if (a.burst && a.rate && *a.rate == 0)
        throw UsageError("--burst has no meaning with --rate 0, which removes the limit");
    pqxx::connection conn(require_dsn(global));
    try {
        ops::OperatorStore(conn).configure(a.org, a.queue, q, a.actor, global.clock.now(),
                                           a.create);
    } catch (const ops::UnknownQueue& e) {
        throw UsageError(unknown_queue(conn, a, e));
    }
    std::printf(
        "queue %s of organization %lld configured; jobs enqueued from now on take its "
        "retry policy and deadline, and its limits and retention hold at once\n",
        a.queue.c_str(), static_cast<long long>(a.org));
    return 0;
}

std::string opt_text(const std::optional<int>& v) {
    return v ? std::to_string(*v) : "-";
}
std::string opt_text(const std::optional<base::Duration>& d) {
    return d ? format_duration(*d) : "-";
}

/// "-" for no rate limit, else "R/s" with its burst and the whole tokens its bucket holds now.
std::string rate_text(const ops::QueueStatus& q) {
    if (!q.rate_per_s) return "-";
    return *q.rate_per_s + "/s b" + opt_text(q.rate_burst) + " t" + opt_text(q.rate_tokens);
}

/// "-" for neither, else "wW" for a weight and "+1/S" for aging one priority per S waited.
std::string share_text(const ops::QueueStatus& q) {
    std::string out;
    if (q.weight) out = "w" + std::to_string(*q.weight);
    if (q.aging) out += (out.empty() ? "" : " ") + std::string("+1/") + format_duration(*q.aging);
    return out.empty() ? "-" : out;
}

int run_list(const Global& global, const QueueArgs& a) {
    pqxx::connection conn(require_dsn(global));
    const auto queues = ops::OperatorStore(conn).queues(
        a.org > 0 ? std::optional<store::OrgId>(a.org) : std::nullopt);
    if (a.json) {
        // Durations in milliseconds, a setting left unset as null (the built-in default holds).
        const auto ms = [](const std::optional<base::Duration>& d) {
            return d ? nlohmann::json(
                           std::chrono::duration_cast<std::chrono::milliseconds>(*d).count())
                     : nlohmann::json();
        };
        const auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
        const auto kept = [](base::Duration d) {
            return d == ops::kRetainForever
                       ? nlohmann::json("forever")
                       : nlohmann::json(
                             std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
        };
        nlohmann::json out = {{"queues", nlohmann::json::array()}};
        for (const auto& q : queues) {
            auto row = ops::state_counts_json(q);
            row.update({{"org_id", q.org_id},
                        {"queue", q.queue},
                        {"paused", q.paused},
                        {"max_assigned", opt(q.max_assigned)},
                        {"rate_per_s", opt(q.rate_per_s)},
                        {"rate_burst", opt(q.rate_burst)},
                        {"weight", opt(q.weight)},
                        {"aging_ms", ms(q.aging)},
                        {"max_attempts", opt(q.max_attempts)},
                        {"backoff_base_ms", ms(q.backoff_base)},
                        {"backoff_cap_ms", ms(q.backoff_cap)},
                        {"run_timeout_ms", ms(q.run_timeout)},
                        {"retain_completed_ms", kept(q.retain_completed)},
                        {"retain_failed_ms", kept(q.retain_failed)},
                        {"retain_discarded_ms", kept(q.retain_discarded)},
                        {"retain_cancelled_ms", kept(q.retain_cancelled)}});
            out["queues"].push_back(std::move(row));
        }
        std::cout << out.dump() << "\n";
        return 0;
    }
    std::printf(
        "%6s %-20s %-7s %8s %9s %8s %7s %7s %9s %9s %6s %9s %6s %-18s %-14s %8s %7s %7s  %s\n",
        "org", "queue", "state", "pending", "scheduled", "assigned", "parked", "waiting",
        "completed", "discarded", "failed", "cancelled", "limit", "rate", "share", "attempts",
        "backoff", "timeout", "kept completed/failed/discarded/cancelled");
    for (const auto& q : queues) {
        const std::string kept =
            retention_text(q.retain_completed) + "/" + retention_text(q.retain_failed) + "/" +
            retention_text(q.retain_discarded) + "/" + retention_text(q.retain_cancelled);
        std::printf(
            "%6lld %-20s %-7s %8lld %9lld %8lld %7lld %7lld %9lld %9lld %6lld %9lld %6s %-18s "
            "%-14s "
            "%8s %7s %7s  %s\n",
            static_cast<long long>(q.org_id), q.queue.c_str(), q.paused ? "paused" : "running",
            static_cast<long long>(q.pending), static_cast<long long>(q.scheduled),
            static_cast<long long>(q.assigned), static_cast<long long>(q.parked),
            static_cast<long long>(q.waiting), static_cast<long long>(q.completed),
            static_cast<long long>(q.discarded), static_cast<long long>(q.failed),
            static_cast<long long>(q.cancelled), opt_text(q.max_assigned).c_str(),
            rate_text(q).c_str(), share_text(q).c_str(), opt_text(q.max_attempts).c_str(),
            opt_text(q.backoff_base).c_str(), opt_text(q.run_timeout).c_str(), kept.c_str());
    }
    return 0;
}

}  // namespace

void add_lifecycle_commands(CLI::App& app, Global& global, Action& action) {
    auto [c, cancel] = add_command<CancelArgs>(
        app, "cancel",
        "Cancel jobs: pending and scheduled ones at once; an assigned one's holder is told at "
        "once and its completion is refused",
        global, action, run_cancel);
    add_selection(c, cancel->selection, "cancel");
    c->add_option("--reason", cancel->reason, "Why, recorded in job_events")->required();
    c->add_option("--by", cancel->actor, "Who acts, as recorded")->capture_default_str();

    auto [r, retry] = add_command<RetryArgs>(
        app, "retry", "Revive failed, discarded or cancelled jobs with a fresh attempt budget",
        global, action, run_retry);
    add_selection(r, retry->selection, "revive");
    r->add_option("--reason", retry->reason, "Why, recorded in job_events")->capture_default_str();
    r->add_option("--by", retry->actor, "Who acts, as recorded")->capture_default_str();

    auto qa = std::make_shared<QueueArgs>();
    auto* q = add_group(app, "queue", "Pause, resume, configure and list queues");
    for (const bool paused : {true, false}) {
        auto* p = q->add_subcommand(paused ? "pause" : "resume",
                                    paused ? "Hand out nothing from the queue (leases already out "
                                             "continue)"
                                           : "Hand out work from the queue again");
        p->add_option("queue", qa->queue, "Queue name")->required();
        base::add_org(*p, qa->org, "Organization id")->required();
        p->add_option("--reason", qa->reason, "Why, recorded in queue_events");
        p->add_option("--by", qa->actor, "Who acts, as recorded")->capture_default_str();
        p->add_flag("--create", qa->create,
                    "Accept a queue the organization has no job or settings in yet");
        p->callback([&global, &action, qa, paused] {
            action = [&global, qa, paused] { return run_pause(global, *qa, paused); };
        });
    }
    auto* s =
        q->add_subcommand("set", "Set a queue's limit, retry policy, run deadline and retention");
    s->add_option("queue", qa->queue, "Queue name")->required();
    base::add_org(*s, qa->org, "Organization id")->required();
    s->add_option("--max-assigned", qa->max_assigned,
                  "Most jobs of the queue assigned at once (0: no limit)")
        ->check(CLI::Range(0, 1000000));
    s->add_option("--rate", qa->rate,
                  "Most claims a second from the queue on average, across every coordinator, "
                  "e.g. 5 or 0.5 (0: no limit); a claim that finds none left waits for the next")
        ->check(CLI::Range(0.0, 1000000.0));
    s->add_option("--burst", qa->burst,
                  "Most claims of the rate limit at once (default: the rate rounded up)")
        ->check(CLI::Range(1, 1000000));
    s->add_option("--weight", qa->weight,
                  "The queue's share of a claim that serves it with other weighted queues, when "
                  "all have work, e.g. 3 against 1 (0: none)")
        ->check(CLI::Range(0, 1000));
    s->add_option("--aging", qa->aging,
                  "Raise the priority of the queue's pending jobs by one per this much waited, "
                  "e.g. 30s, up to the highest pending (0: no aging)");
    s->add_option("--max-attempts", qa->max_attempts,
                  "Attempts before a job is discarded (0: the default, 3)")
        ->check(CLI::Range(0, 1000));
    s->add_option("--backoff-base", qa->backoff_base,
                  "First retry's wait, doubling per attempt (0: the default, none)");
    s->add_option("--backoff-cap", qa->backoff_cap, "Longest retry wait (0: the default, 5m)");
    s->add_option("--run-timeout", qa->run_timeout, "Run deadline of each attempt (0: none)");
    for (auto [flag, field, fallback] :
         {std::tuple{"--retain-completed", &qa->retain_completed, "7d"},
          std::tuple{"--retain-failed", &qa->retain_failed, "30d"},
          std::tuple{"--retain-discarded", &qa->retain_discarded, "30d"},
          std::tuple{"--retain-cancelled", &qa->retain_cancelled, "7d"}}) {
        s->add_option(flag, *field,
                      std::string("How long a finished job in this state is kept before retention "
                                  "removes it with its result, e.g. 12h, 14d, forever (0: the "
                                  "default, ") +
                          fallback + ")");
    }
    s->add_option("--by", qa->actor, "Who acts, as recorded")->capture_default_str();
    s->add_flag("--create", qa->create,
                "Accept a queue the organization has no job or settings in yet");
    bind_action(s, global, action, qa, run_set);
    auto* l = q->add_subcommand("list", "Each queue's counts by state and its settings");
    base::add_org(*l, qa->org, "Only this organization");
    l->add_flag("--json", qa->json, "One JSON document, for scripts");
    bind_action(l, global, action, qa, run_list);
}

}  // namespace aclaim::ctl
