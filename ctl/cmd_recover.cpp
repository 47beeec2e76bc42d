// recover: classify every job after an outage and, with --apply, reclaim expired leases and
// quarantine contradictory rows. The decisions are the classifier's (common/ops/recovery.hpp).
//
// Exit codes: 0 no job is inconsistent; 1 at least one job is inconsistent (found by a dry run,
// quarantined by --apply, or quarantined earlier and still awaiting its operator), an orphan
// result or event exists, or --apply found a row locked past its timeout. So 1 always means "an
// operator has something to review"; 2 is a usage error, 3 an unreachable database.

#include "ctl/cmd_recover.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/base/clock.hpp"
#include "common/ops/recovery_store.hpp"
#include "ctl/cells.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

namespace {

using ops::ApplyAction;
using ops::ApplyOutcome;
using ops::RecoveryClass;
using ops::RecoveryReport;

struct RecoverArgs {
    std::string now;
    bool dry_run = false;
    bool apply = false;
    bool json = false;
    std::int64_t org = 0;
    std::string actor = default_actor();
};

/// How far --apply's clock may run ahead of this machine's: further, and it would take leases
/// that the coordinators still honour.
constexpr base::Duration kApplyClockSlack = base::kSeconds;

/// Continuation lines line up under the first: each line break is followed by the report's
/// twelve-column indent.
std::string indent(const std::string& text) {
    static const std::string pad(12, ' ');
    std::string out;
    for (char ch : text) {
        out += ch;
        if (ch == '\n') out += pad;
    }
    return out;
}

nlohmann::json counts_json(const ops::ClassCounts& counts) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto cls : ops::kRecoveryClasses) {
        o[std::string(ops::to_string(cls))] = counts[static_cast<std::size_t>(cls)];
    }
    return o;
}

nlohmann::json report_json(const RecoveryReport& report, bool apply,
                           const std::vector<ApplyOutcome>& outcomes) {
    nlohmann::json out;
    out["now"] = ops::format_instant(report.now);
    out["now_us"] = base::to_micros(report.now);
    out["mode"] = apply ? "apply" : "dry-run";
    out["org"] = report.org ? nlohmann::json(*report.org) : nlohmann::json();
    out["counts"] = counts_json(report.totals);
    out["by_org"] = nlohmann::json::object();
    for (const auto& [org, counts] : report.by_org)
        out["by_org"][std::to_string(org)] = counts_json(counts);
    out["inconsistent"] = nlohmann::json::array();
    for (const auto& s : report.inconsistent) {
        nlohmann::json findings = nlohmann::json::array();
        for (const auto& f : s.classification.findings) {
            findings.push_back({{"code", ops::to_string(f.code)}, {"what", f.what}});
        }
        out["inconsistent"].push_back({{"job_id", s.row.id},
                                       {"org_id", s.row.org_id},
                                       {"state", store::to_string(s.row.state)},
                                       {"reason", s.classification.reason()},
                                       {"findings", findings},
                                       {"evidence", s.classification.evidence}});
    }
    out["expired"] = report.expired;
    out["pruned_with_events"] = report.pruned_with_events;
    out["orphans"] = nlohmann::json::array();
    for (const auto& o : report.orphans) {
        out["orphans"].push_back({{"job_id", o.job_id},
                                  {"org_id", o.org_id},
                                  {"reason", o.reason},
                                  {"evidence", o.evidence}});
    }
    out["queues"] = nlohmann::json::array();
    for (const auto& q : report.queues) {
        out["queues"].push_back(
            {{"org_id", q.org_id}, {"queue", q.queue}, {"reason", q.reason}, {"what", q.what}});
    }
    out["actions"] = nlohmann::json::array();
    for (const auto& a : outcomes) {
        out["actions"].push_back({{"job_id", a.job_id},
                                  {"org_id", a.org_id},
                                  {"surveyed", ops::to_string(a.surveyed)},
                                  {"locked", ops::to_string(a.locked)},
                                  {"action", ops::to_string(a.action)},
                                  {"detail", a.detail}});
    }
    return out;
}

void print_counts_row(std::FILE* out, const std::string& label, const ops::ClassCounts& counts) {
    std::fprintf(out, "%-8s", label.c_str());
    for (const auto cls : ops::kRecoveryClasses) {
        std::fprintf(out, " %12lld", static_cast<long long>(counts[static_cast<std::size_t>(cls)]));
    }
    std::fprintf(out, "\n");
}

void print_report(std::FILE* out, const RecoveryReport& report, bool apply) {
    std::fprintf(out, "recovery survey as of %s%s (%s)\n\n",
                 ops::format_instant(report.now).c_str(),
                 report.org ? (" for organization " + std::to_string(*report.org)).c_str() : "",
                 apply ? "apply: acting on expired and inconsistent jobs below"
                       : "dry run: nothing was changed");
    std::fprintf(out, "%-8s", "org");
    for (const auto cls : ops::kRecoveryClasses) {
        std::fprintf(out, " %12s", std::string(ops::to_string(cls)).c_str());
    }
    std::fprintf(out, "\n");
    for (const auto& [org, counts] : report.by_org)
        print_counts_row(out, std::to_string(org), counts);
    print_counts_row(out, "total", report.totals);

    std::fprintf(out, "\ninconsistent jobs: %zu\n", report.inconsistent.size());
    for (const auto& s : report.inconsistent) {
        std::fprintf(out, "job %lld (org %lld, %s): %s\n", static_cast<long long>(s.row.id),
                     static_cast<long long>(s.row.org_id),
                     std::string(store::to_string(s.row.state)).c_str(),
                     s.classification.reason().c_str());
        std::fprintf(out, "  what:     %s\n", indent(s.classification.explanation()).c_str());
        std::fprintf(out, "  evidence: %s\n", indent(s.classification.evidence).c_str());
    }
    if (report.pruned_with_events > 0) {
        std::fprintf(out, "\npruned by retention (absent; events still attached): %zu\n",
                     report.pruned_with_events);
    }
    if (!report.orphans.empty()) {
        std::fprintf(out, "\norphans (results or events without a job row; never acted on): %zu\n",
                     report.orphans.size());
        for (const auto& o : report.orphans) {
            std::fprintf(out, "job %lld (org %lld): %s\n  evidence: %s\n",
                         static_cast<long long>(o.job_id), static_cast<long long>(o.org_id),
                         o.reason.c_str(), indent(o.evidence).c_str());
        }
    }
    if (!report.queues.empty()) {
        std::fprintf(out, "\nqueues (rate buckets that will not do as set; never acted on): %zu\n",
                     report.queues.size());
        for (const auto& q : report.queues) {
            std::fprintf(out, "queue %s (org %lld): %s\n  what: %s\n", q.queue.c_str(),
                         static_cast<long long>(q.org_id), q.reason.c_str(), q.what.c_str());
        }
    }
    std::fprintf(out, "\nexpired leases to reclaim: %zu", report.expired.size());
    for (std::size_t i = 0; i < report.expired.size(); ++i) {
        std::fprintf(out, "%s%lld", i == 0 ? " (jobs " : " ",
                     static_cast<long long>(report.expired[i]));
    }
    std::fprintf(out, "%s\n", report.expired.empty() ? "" : ")");
}

void print_outcomes(std::FILE* out, const std::vector<ApplyOutcome>& outcomes) {
    std::fprintf(out, "\nactions, each decided on the locked current row:\n");
    std::map<ApplyAction, int> tally;
    for (const auto& a : outcomes) {
        ++tally[a.action];
        std::fprintf(out, "  job %lld (org %lld): %s -> %s: %s\n", static_cast<long long>(a.job_id),
                     static_cast<long long>(a.org_id),
                     std::string(ops::to_string(a.surveyed)).c_str(),
                     std::string(ops::to_string(a.action)).c_str(), a.detail.c_str());
    }
    if (outcomes.empty()) std::fprintf(out, "  none: nothing to reclaim or quarantine\n");
    std::fprintf(out,
                 "applied: %d reclaimed, %d discarded, %d quarantined, %d unchanged, %d busy, "
                 "%d vanished\n",
                 tally[ApplyAction::Reclaimed], tally[ApplyAction::Discarded],
                 tally[ApplyAction::Quarantined], tally[ApplyAction::Unchanged],
                 tally[ApplyAction::Busy], tally[ApplyAction::Vanished]);
}

/// The survey (and with --apply the actions) in one database, as the command reports it.
CellReport recover_one(pqxx::connection& conn, base::Instant now, std::optional<store::OrgId> org,
                       const RecoverArgs& args) {
    ops::RecoveryStore store(conn);
    const auto report = store.survey(now, org);
    std::vector<ApplyOutcome> outcomes;
    if (args.apply) outcomes = store.apply(report, args.actor);
    CellReport out;
    for (const auto& [o, counts] : report.by_org) out.organizations.insert(o);
    if (args.json) {
        out.json = report_json(report, args.apply, outcomes).dump();
    } else {
        TextBuffer text;
        print_report(text.file(), report, args.apply);
        if (args.apply) print_outcomes(text.file(), outcomes);
        out.text = text.text();
    }
    bool busy = false;
    for (const auto& a : outcomes) busy = busy || a.action == ApplyAction::Busy;
    const auto inconsistent = report.totals[static_cast<std::size_t>(RecoveryClass::Inconsistent)];
    out.findings = inconsistent > 0 || !report.orphans.empty() || busy;
    return out;
}

}  // namespace

std::string default_actor() {
    const char* user = std::getenv("USER");
    return std::string("aclaimctl:") + (user && *user ? user : "operator");
}

base::Instant parse_now_option(const std::string& text, const base::Clock& clock) {
    if (text.empty()) return clock.now();
    const auto t = ops::parse_instant(text);
    if (!t) {
        throw UsageError("--now '" + text +
                         "' is neither ISO 8601 with a zone (2026-03-01T12:00:00Z) nor "
                         "@<microseconds since the epoch>");
    }
    return *t;
}

void add_recover_command(CLI::App& app, Global& global, Action& action) {
    auto args = std::make_shared<RecoverArgs>();
    auto* cmd = app.add_subcommand(
        "recover",
        "Classify every job after an outage; --apply reclaims expired leases and "
        "quarantines contradictory rows");
    cmd->add_option("--now", args->now,
                    "The clock to classify at: ISO 8601 with a zone or @unix_us (default: now)");
    auto* dry = cmd->add_flag("--dry-run", args->dry_run, "Change nothing (the default)");
    cmd->add_flag("--apply", args->apply, "Reclaim expired leases and quarantine inconsistent jobs")
        ->excludes(dry);
    cmd->add_flag("--json", args->json, "Print one JSON object");
    base::add_org(*cmd, args->org, "Only this organization");
    cmd->add_option("--by", args->actor, "Who acts, as recorded in job_events");
    cmd->callback([&global, &action, args] {
        action = [&global, args] {
            const auto now = parse_now_option(args->now, global.clock);
            if (args->apply && now > global.clock.now() + kApplyClockSlack) {
                throw UsageError("--apply with --now " + ops::format_instant(now) +
                                 " ahead of this machine's clock would take leases that are still "
                                 "live; apply at the real time or earlier");
            }
            const auto org = args->org > 0 ? std::optional<store::OrgId>(args->org) : std::nullopt;
            const auto map = load_cells(global);
            if (!map) {
                pqxx::connection conn(require_dsn(global));
                const auto result = recover_one(conn, now, org, *args);
                std::cout << (args->json ? result.json + "\n" : result.text);
                return result.findings ? 1 : 0;
            }
            const auto command = [now, org, args](const base::Cell&, pqxx::connection& conn) {
                return recover_one(conn, now, org, *args);
            };
            return run_across_cells(global, *map, target_cells(*map, org), command, args->json);
        };
    });
}

}  // namespace aclaim::ctl
