// inspect: one job's row, what ties it to other jobs (dependencies both ways, exclusions) and its
// whole audit history, for a person or as JSON.

#include <cstdio>
#include <iostream>

#include "common/base/clock.hpp"
#include "common/ops/job_json.hpp"
#include "common/ops/operator_store.hpp"
#include "common/ops/recovery.hpp"
#include "common/ops/retention_store.hpp"
#include "ctl/ctl.hpp"
#include "ctl/terminal.hpp"

namespace aclaim::ctl {

namespace {

/// "2026-03-01T12:00:00.250000Z (3m05s ago)".
std::string when(base::Instant t, base::Instant now) {
    const auto d = now - t;
    return ops::format_instant(t) + " (" +
           (d >= base::Duration::zero() ? format_duration(d) + " ago"
                                        : "in " + format_duration(-d)) +
           ")";
}

void field(const char* name, const std::string& value) {
    std::printf("  %-17s %s\n", name, value.c_str());
}

void print_job(const ops::JobRecord& j, base::Instant now) {
    std::printf("job %lld  organization %lld  %s\n", static_cast<long long>(j.id),
                static_cast<long long>(j.org_id), std::string(store::to_string(j.state)).c_str());
    field("queue", j.queue);
    field("priority",
          std::to_string(j.priority) +
              (j.base_priority ? " (aged from " + std::to_string(*j.base_priority) + ")" : ""));
    field("generation", std::to_string(j.generation));
    field("attempts", std::to_string(j.attempts) + " of " + std::to_string(j.max_attempts) +
                          " (each attempt's error is in the history below)");
    field("enqueued", when(j.enqueued_at, now));
    if (j.run_at != j.enqueued_at) {
        // run_at is when the job became (or becomes) claimable, not when it ran: a job scheduled
        // and cancelled before its time never ran at all.
        field("claimable from", when(j.run_at, now));
    }
    if (j.deadline) field("run deadline", when(*j.deadline, now));
    if (j.dedupe_key) field("dedupe key", *j.dedupe_key);
    if (j.assignee) {
        field(j.state == store::JobState::Assigned ? "held by" : "last held by", *j.assignee);
    }
    if (j.claimed_at) field("claimed", when(*j.claimed_at, now));
    if (j.lease_expires_at) {
        const bool live = *j.lease_expires_at > now;
        field("lease", std::string(live ? "live, " : "EXPIRED, not yet reclaimed, ") + "ends " +
                           when(*j.lease_expires_at, now));
    }
    if (j.completed_at) field("finished", when(*j.completed_at, now));
    if (j.result_ref) field("result", *j.result_ref);
    if (j.last_error) field("last error", one_line(*j.last_error, 200));
    if (j.quarantined_from) field("quarantined from", *j.quarantined_from);
    if (j.quarantine_reason) field("quarantine reason", one_line(*j.quarantine_reason, 200));
    const std::string payload = j.payload.value_or("");
    field("payload",
          one_line(payload, 200) + (payload.size() > 200 ? " (" + std::to_string(payload.size()) +
                                                               " bytes; --json shows it whole)"
                                                         : ""));
}

void print_progress(const ops::ProgressRecord& p, base::Instant now) {
    field("progress", std::to_string(p.percent) + "% reported by generation " +
                          std::to_string(p.generation) + " " + when(p.updated_at, now));
    if (!p.note.empty()) field("progress note", one_line(p.note, 200));
    field("checkpoint", p.checkpoint_bytes == 0
                            ? std::string("none")
                            : std::to_string(p.checkpoint_bytes) +
                                  " bytes (the job's next holder resumes from it)");
}

void print_park(const ops::ParkRecord& p, base::Instant now) {
    field("parked", "by " + p.parked_by + " at generation " + std::to_string(p.generation) + " " +
                        when(p.parked_at, now));
    field("park deadline", when(p.deadline, now));
    if (!p.note.empty()) field("park note", one_line(p.note, 200));
    field("callback", p.used_at ? p.outcome + " by " + p.used_by + " " + when(*p.used_at, now)
                                : std::string("not yet (the token is not stored: only its hash)"));
}

/// "#12 completed (run: completed)": the job at the edge's other end, its state now, and the
/// edge's policy with how the dependency ended.
std::string edge_text(const ops::DependencyRecord& d) {
    return "#" + std::to_string(d.job) + " " + d.state.value_or("pruned") + " (" + d.policy +
           (d.resolved ? ": " + *d.resolved : std::string(", not ended")) + ")";
}

void print_links(const ops::JobLinks& links) {
    const std::string more = "... more (aclaimctl workflow show lists them all)";
    for (const auto& d : links.depends_on) field("depends on", edge_text(d));
    if (links.more_depends_on) field("depends on", more);
    for (const auto& d : links.dependents) field("depended on by", edge_text(d));
    if (links.more_dependents) field("depended on by", more);
    for (const auto& x : links.exclusions) {
        if (x.reviewer) {
            field("excludes", "reviewer " + *x.reviewer);
        } else if (x.completer_of) {
            field("excludes", "the completer of #" + std::to_string(*x.completer_of) + " (" +
                                  x.named_state.value_or("pruned") +
                                  (x.completer ? ", completed by " + *x.completer : "") + ")");
        }
    }
}

void print_events(const std::vector<store::AuditEvent>& events, base::Instant enqueued_at) {
    std::printf("\nhistory (%zu events)\n", events.size());
    std::printf("  %-8s %-28s %9s  %-13s %5s  %-20s %s\n", "event", "at", "+since", "kind", "gen",
                "by", "detail");
    for (const auto& e : events) {
        std::printf("  #%-7lld %-28s %9s  %-13s %5lld  %-20s %s\n", static_cast<long long>(e.id),
                    ops::format_instant(e.at).c_str(), format_duration(e.at - enqueued_at).c_str(),
                    e.kind.c_str(), static_cast<long long>(e.generation),
                    one_line(e.worker.empty() ? "-" : e.worker, 20).c_str(),
                    one_line(e.detail, 120).c_str());
    }
}

}  // namespace

void add_inspect_command(CLI::App& app, Global& global, Action& action) {
    struct Args {
        store::JobId job = 0;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    auto* cmd =
        app.add_subcommand("inspect", "One job: its row and its whole history from job_events");
    cmd->add_option("job", args->job, "Job id")->required()->check(base::whole_number(1));
    cmd->add_flag("--json", args->json, "Print one JSON object");
    cmd->callback([&global, &action, args] {
        action = [&global, args] {
            pqxx::connection conn(require_dsn(global));
            ops::OperatorStore store(conn);
            const auto job = store.job(args->job);
            if (!job) {
                if (const auto pruned = ops::RetentionStore(conn).pruned(args->job)) {
                    throw UsageError("job " + std::to_string(args->job) + " of organization " +
                                     std::to_string(pruned->first) +
                                     " was removed by retention at " +
                                     ops::format_instant(pruned->second) +
                                     " (recorded in job_prunes); its events stay in job_events "
                                     "until their month is archived");
                }
                throw UsageError("job " + std::to_string(args->job) + " does not exist");
            }
            const auto events = store.events(args->job);
            const auto progress = store.progress(args->job);
            const auto park = store.park(args->job);
            const auto links = store.links(args->job);
            const auto now = global.clock.now();
            if (args->json) {
                nlohmann::json out{{"job", ops::job_json(*job)},
                                   {"events", nlohmann::json::array()}};
                for (const auto& e : events) out["events"].push_back(ops::event_json(e));
                if (progress) out["progress"] = ops::progress_json(*progress);
                if (park) out["park"] = ops::park_json(*park);
                out.update(ops::links_json(links));
                std::cout << out.dump(2) << "\n";
            } else {
                print_job(*job, now);
                if (progress) print_progress(*progress, now);
                if (park) print_park(*park, now);
                print_links(links);
                print_events(events, job->enqueued_at);
            }
            return 0;
        };
    });
}

}  // namespace aclaim::ctl
