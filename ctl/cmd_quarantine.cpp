// quarantine list|show|release|fail: an operator resolves, one job at a time and on the record,
// what the recovery tool set aside. Release and fail are refused (exit 2) for a job that is not
// quarantined; each writes an 'unquarantined' event carrying the operator's reason.

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/ops/recovery_store.hpp"
#include "common/store/event_kinds.hpp"
#include "ctl/cmd_recover.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

namespace {

nlohmann::json opt_json(const std::optional<std::string>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
}

nlohmann::json opt_json(const std::optional<base::Instant>& v) {
    return v ? nlohmann::json(ops::format_instant(*v)) : nlohmann::json();
}

nlohmann::json row_json(const ops::JobRecord& r) {
    return {{"job_id", r.id},
            {"org_id", r.org_id},
            {"state", store::to_string(r.state)},
            {"generation", r.generation},
            {"assignee", opt_json(r.assignee)},
            {"claimed_at", opt_json(r.claimed_at)},
            {"lease_expires_at", opt_json(r.lease_expires_at)},
            {"attempts", r.attempts},
            {"max_attempts", r.max_attempts},
            {"completed_at", opt_json(r.completed_at)},
            {"result_ref", opt_json(r.result_ref)},
            {"last_error", opt_json(r.last_error)},
            {"quarantined_from", opt_json(r.quarantined_from)},
            {"quarantine_reason", opt_json(r.quarantine_reason)}};
}

std::string first_line(const std::optional<std::string>& text) {
    if (!text) return "";
    return text->substr(0, text->find('\n'));
}

int list(const Global& global, bool json) {
    pqxx::connection conn(require_dsn(global));
    const auto rows = ops::RecoveryStore(conn).quarantined();
    if (json) {
        nlohmann::json out = {{"quarantined", nlohmann::json::array()}};
        for (const auto& r : rows) out["quarantined"].push_back(row_json(r));
        std::cout << out.dump() << "\n";
        return 0;
    }
    std::printf("%-10s %-6s %-10s %-10s %s\n", "job", "org", "from", "generation", "reason");
    for (const auto& r : rows) {
        std::printf("%-10lld %-6lld %-10s %-10lld %s\n", static_cast<long long>(r.id),
                    static_cast<long long>(r.org_id), r.quarantined_from.value_or("?").c_str(),
                    static_cast<long long>(r.generation), first_line(r.quarantine_reason).c_str());
    }
    std::printf("%zu quarantined\n", rows.size());
    return 0;
}

int show(const Global& global, store::JobId job, bool json) {
    pqxx::connection conn(require_dsn(global));
    const auto d = ops::RecoveryStore(conn).dossier(job, global.clock.now());
    if (!d) throw UsageError("no job " + std::to_string(job));
    const auto& s = d->snapshot;
    if (json) {
        nlohmann::json events = nlohmann::json::array();
        for (const auto& e : d->events) {
            events.push_back({{"id", e.id},
                              {"org_id", e.org_id},
                              {"generation", e.generation},
                              {"kind", e.kind},
                              {"worker", e.worker},
                              {"at", ops::format_instant(e.at)},
                              {"detail", e.detail}});
        }
        nlohmann::json result;
        if (s.result) {
            result = {{"org_id", s.result->org_id},
                      {"generation", s.result->generation},
                      {"result_ref", s.result->result_ref},
                      {"published_at", ops::format_instant(s.result->published_at)}};
        }
        std::cout << nlohmann::json{{"job", row_json(s.row)},
                                    {"class", ops::to_string(s.classification.cls)},
                                    {"result", result},
                                    {"events", events}}
                         .dump()
                  << "\n";
        return 0;
    }
    std::printf("job %lld (org %lld): %s\n", static_cast<long long>(s.row.id),
                static_cast<long long>(s.row.org_id),
                std::string(store::to_string(s.row.state)).c_str());
    if (s.row.state == store::JobState::Quarantined) {
        std::printf("quarantined from: %s\nreason:\n  %s\n", s.row.quarantined_from->c_str(),
                    s.row.quarantine_reason->c_str());
    } else {
        std::printf("not quarantined; classified now as %s\n",
                    std::string(ops::to_string(s.classification.cls)).c_str());
    }
    std::printf("row:    %s\n", ops::describe(s.row).c_str());
    std::printf("result: %s\n", s.result ? ops::describe(*s.result).c_str() : "none");
    std::printf("events (%zu):\n", d->events.size());
    const store::AuditEvent* quarantined = nullptr;
    for (const auto& e : d->events) {
        std::printf("  %s\n", ops::describe(e).c_str());
        if (is(e.kind, store::EventKind::Quarantined)) quarantined = &e;
    }
    if (quarantined) {
        // The evidence as the recovery tool saw it at the moment it set the job aside.
        std::printf("evidence recorded by event #%lld:\n  ",
                    static_cast<long long>(quarantined->id));
        for (const char ch : quarantined->detail) {
            std::fputc(ch, stdout);
            if (ch == '\n') std::fputs("  ", stdout);
        }
        std::printf("\n");
    }
    return 0;
}

int resolve(const Global& global, store::JobId job, bool release, const std::string& reason,
            const std::string& actor) {
    if (reason.find_first_not_of(" \t\n") == std::string::npos) {
        throw UsageError("--reason must say why; it is recorded in job_events");
    }
    pqxx::connection conn(require_dsn(global));
    ops::RecoveryStore store(conn);
    const auto now = global.clock.now();
    const auto r =
        release ? store.release(job, reason, actor, now) : store.fail(job, reason, actor, now);
    if (r.refusal) throw UsageError(*r.refusal);
    std::printf("job %lld is %s at generation %lld (%s)\n", static_cast<long long>(job),
                std::string(store::to_string(r.state)).c_str(),
                static_cast<long long>(r.generation),
                release ? "the next claim gets a higher generation" : "final");
    return 0;
}

}  // namespace

void add_quarantine_command(CLI::App& app, Global& global, Action& action) {
    struct Args {
        bool json = false;
        store::JobId job = 0;
        std::string reason;
        std::string actor = default_actor();
    };
    auto args = std::make_shared<Args>();
    auto* cmd = add_group(app, "quarantine", "Review and resolve quarantined jobs");

    auto* ls = cmd->add_subcommand("list", "Quarantined jobs with their reasons");
    ls->add_flag("--json", args->json, "Print one JSON object");
    ls->callback([&global, &action, args] {
        action = [&global, args] { return list(global, args->json); };
    });

    auto* sh = cmd->add_subcommand("show", "One job: row, reason, result and every event");
    sh->add_option("job", args->job, "Job id")->required()->check(base::whole_number(1));
    sh->add_flag("--json", args->json, "Print one JSON object");
    sh->callback([&global, &action, args] {
        action = [&global, args] { return show(global, args->job, args->json); };
    });

    for (const bool release : {true, false}) {
        auto* sub = cmd->add_subcommand(
            release ? "release" : "fail",
            release ? "Return a quarantined job to pending; the next claim gets a higher generation"
                    : "Fail a quarantined job for good; a published result stays as it is");
        sub->add_option("job", args->job, "Job id")->required()->check(base::whole_number(1));
        sub->add_option("--reason", args->reason, "Why, recorded in job_events")->required();
        sub->add_option("--by", args->actor, "Who acts, as recorded in job_events");
        sub->callback([&global, &action, args, release] {
            action = [&global, args, release] {
                return resolve(global, args->job, release, args->reason, args->actor);
            };
        });
    }
}

}  // namespace aclaim::ctl
