// jobs list: find jobs by organization, state, holder or age, a page at a time.

#include <cstdio>
#include <iostream>

#include "common/base/clock.hpp"
#include "common/ops/job_json.hpp"
#include "common/ops/operator_store.hpp"
#include "common/store/job_states.hpp"
#include "ctl/ctl.hpp"
#include "ctl/terminal.hpp"

namespace aclaim::ctl {

namespace {

/// Every state's name, comma-separated, for the help and the usage error.
std::string state_names() {
    std::string out;
    for (const auto name : store::all_state_names()) {
        out += (out.empty() ? "" : ", ") + std::string(name);
    }
    return out;
}

struct ListArgs {
    std::int64_t org = 0;
    std::string queue;
    std::string state;
    std::string assignee;
    std::string older_than;
    std::int64_t after_id = 0;
    int limit = 50;
    bool json = false;
};

ops::JobFilter filter_of(const ListArgs& a, base::Instant now) {
    ops::JobFilter f;
    if (a.org > 0) f.org_id = a.org;
    if (!a.state.empty()) {
        if (!is_job_state(a.state)) {
            throw UsageError("--state '" + a.state + "' is not a state (" + state_names() + ")");
        }
        f.state = a.state;
    }
    if (!a.assignee.empty()) f.assignee = a.assignee;
    if (!a.queue.empty()) f.queue = a.queue;
    if (!a.older_than.empty()) {
        const auto d = parse_duration(a.older_than);
        if (!d) {
            throw UsageError("--older-than '" + a.older_than +
                             "' is not a duration such as 90s, 10m, 2h or 1d");
        }
        f.enqueued_before = now - *d;
    }
    f.after_id = a.after_id;
    f.limit = a.limit;
    return f;
}

/// The lease column: time left, or how long ago it ran out.
std::string lease_text(const ops::JobRecord& j, base::Instant now) {
    if (!j.lease_expires_at) return "-";
    const auto left = *j.lease_expires_at - now;
    return left > base::Duration::zero() ? format_duration(left)
                                         : "expired " + format_duration(-left);
}

int run_list(const Global& global, const ListArgs& a) {
    const auto now = global.clock.now();
    const auto filter = filter_of(a, now);
    pqxx::connection conn(require_dsn(global));
    const auto jobs = ops::OperatorStore(conn).list(filter);
    // A full page may have a successor; the last id is where it starts.
    const bool more = static_cast<int>(jobs.size()) == a.limit;
    const auto next = jobs.empty() ? a.after_id : jobs.back().id;
    if (a.json) {
        nlohmann::json out{
            {"jobs", nlohmann::json::array()},
            {"next_after_id", more ? nlohmann::json(next) : nlohmann::json(nullptr)}};
        for (const auto& j : jobs) out["jobs"].push_back(ops::job_json(j));
        std::cout << out.dump(2) << "\n";
        return 0;
    }
    std::printf("%-10s %-6s %-11s %5s %5s %8s %-20s %8s %-14s %s\n", "id", "org", "state", "prio",
                "gen", "attempts", "assignee", "age", "lease", "payload");
    for (const auto& j : jobs) {
        const std::string attempts =
            std::to_string(j.attempts) + "/" + std::to_string(j.max_attempts);
        std::printf("%-10lld %-6lld %-11s %5d %5lld %8s %-20s %8s %-14s %s\n",
                    static_cast<long long>(j.id), static_cast<long long>(j.org_id),
                    std::string(store::to_string(j.state)).c_str(), j.priority,
                    static_cast<long long>(j.generation), attempts.c_str(),
                    one_line(j.assignee.value_or("-"), 20).c_str(),
                    format_duration(now - j.enqueued_at).c_str(), lease_text(j, now).c_str(),
                    one_line(j.payload.value_or(""), 40).c_str());
    }
    if (jobs.empty()) std::printf("(no jobs match)\n");
    if (more)
        std::printf("more: add --after-id %lld for the next page\n", static_cast<long long>(next));
    return 0;
}

}  // namespace

void add_jobs_command(CLI::App& app, Global& global, Action& action) {
    auto args = std::make_shared<ListArgs>();
    auto* cmd = add_group(app, "jobs", "Find jobs");
    auto* ls = cmd->add_subcommand(
        "list", "Jobs matching every filter given, in id order, a page at a time");
    base::add_org(*ls, args->org, "Only this organization");
    ls->add_option("--queue", args->queue, "Only this queue");
    ls->add_option("--state", args->state, "Only this state: " + state_names());
    ls->add_option("--assignee", args->assignee, "Only jobs this worker holds or last held");
    ls->add_option("--older-than", args->older_than,
                   "Only jobs enqueued longer ago than this (90s, 10m, 2h, 1d)");
    ls->add_option("--limit", args->limit, "Jobs per page")
        ->check(CLI::Range(1, 10000))
        ->capture_default_str();
    ls->add_option("--after-id", args->after_id, "Start after this job id (the next page)")
        ->check(base::whole_number(0));
    ls->add_flag("--json", args->json, "Print one JSON object");
    bind_action(ls, global, action, args, run_list);
}

}  // namespace aclaim::ctl
