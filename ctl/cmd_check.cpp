// aclaimctl check: the invariant checker over the live database, or over every cell's.

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/ops/checker.hpp"
#include "common/ops/job_json.hpp"
#include "ctl/cells.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

namespace {

std::string report_text(const ops::CheckReport& report) {
    std::ostringstream out;
    out << "jobs " << report.jobs << ", events " << report.events << ", accepted completions "
        << report.accepted_completions << ", rejections " << report.rejections << ", reclaims "
        << report.reclaims << "\n";
    if (report.pruned > 0) {
        out << "pruned by retention " << report.pruned << " (absent, recorded in job_prunes; "
            << report.pruned_with_history << " still with events in job_events)\n";
    }
    for (const auto& [state, n] : report.states) out << "  " << state << ": " << n << "\n";
    for (const auto& v : report.violations) {
        out << "VIOLATION " << ops::to_string(v.invariant) << " job " << v.job_id << ": "
            << v.evidence << "\n";
    }
    out << (report.ok() ? "OK: every invariant holds\n"
                        : std::to_string(report.violations.size()) + " violations\n");
    return out.str();
}

int check_one(const Global& global, bool json) {
    // The whole history is read in a few statements, as long as the history is large.
    pqxx::connection conn(require_dsn(global, Statements::kUnbounded));
    const auto report = ops::check(ops::load_history(conn));
    std::cout << (json ? ops::check_report_json(report).dump(2) + "\n" : report_text(report));
    return report.ok() ? 0 : 1;
}

int check_cells(const Global& global, const base::CellMap& map, bool json) {
    const auto command = [](const base::Cell&, pqxx::connection& conn) {
        const auto history = ops::load_history(conn);
        const auto report = ops::check(history);
        CellReport out;
        for (const auto& job : history.jobs) out.organizations.insert(job.org_id);
        out.findings = !report.ok();
        out.json = ops::check_report_json(report).dump();
        out.text = report_text(report);
        return out;
    };
    return run_across_cells(global, map, map.cells(), command, json);
}

}  // namespace

void add_check_command(CLI::App& app, Global& global, Action& action) {
    auto json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand(
        "check", "Prove from the tables that no job was lost, completed twice or accepted stale");
    cmd->add_flag("--json", *json, "Print one JSON object");
    cmd->callback([&global, &action, json] {
        action = [&global, json] {
            if (const auto map = load_cells(global)) return check_cells(global, *map, *json);
            return check_one(global, *json);
        };
    });
}

}  // namespace aclaim::ctl
