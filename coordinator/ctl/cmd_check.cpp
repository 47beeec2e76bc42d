// aclaimctl check: the invariant checker over the live database.

#include <iostream>
#include <nlohmann/json.hpp>

#include "common/ops/checker.hpp"
#include "coordinator/ctl/ctl.hpp"

namespace aclaim::ctl {

void add_check_command(CLI::App& app, Global& global, Action& action) {
    auto json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand(
        "check", "Prove from the tables that no job was lost, completed twice or accepted stale");
    cmd->add_flag("--json", *json, "Print one JSON object");
    cmd->callback([&global, &action, json] {
        action = [&global, json] {
            pqxx::connection conn(require_dsn(global));
            const auto report = common::check(common::load_history(conn));
            if (*json) {
                nlohmann::json out{{"ok", report.ok()},
                                   {"jobs", report.jobs},
                                   {"events", report.events},
                                   {"states", report.states},
                                   {"accepted_completions", report.accepted_completions},
                                   {"rejections", report.rejections},
                                   {"reclaims", report.reclaims},
                                   {"pruned", report.pruned},
                                   {"pruned_with_history", report.pruned_with_history},
                                   {"violations", nlohmann::json::array()}};
                for (const auto& v : report.violations) {
                    out["violations"].push_back({{"invariant", common::to_string(v.invariant)},
                                                 {"job_id", v.job_id},
                                                 {"evidence", v.evidence}});
                }
                std::cout << out.dump(2) << "\n";
            } else {
                std::cout << "jobs " << report.jobs << ", events " << report.events
                          << ", accepted completions " << report.accepted_completions
                          << ", rejections " << report.rejections << ", reclaims "
                          << report.reclaims << "\n";
                if (report.pruned > 0) {
                    std::cout << "pruned by retention " << report.pruned
                              << " (absent, recorded in job_prunes; " << report.pruned_with_history
                              << " still with events in job_events)\n";
                }
                for (const auto& [state, n] : report.states) {
                    std::cout << "  " << state << ": " << n << "\n";
                }
                for (const auto& v : report.violations) {
                    std::cout << "VIOLATION " << common::to_string(v.invariant) << " job "
                              << v.job_id << ": " << v.evidence << "\n";
                }
                std::cout << (report.ok()
                                  ? "OK: every invariant holds\n"
                                  : std::to_string(report.violations.size()) + " violations\n");
            }
            return report.ok() ? 0 : 1;
        };
    });
}

}  // namespace aclaim::ctl
