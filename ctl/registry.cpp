#include "ctl/registry.hpp"

#include <string>

#include "common/base/cli_flags.hpp"
#include "common/store/conninfo.hpp"

namespace aclaim::ctl {

std::string require_dsn(const Global& global, Statements statements) {
    if (global.dsn.empty()) throw UsageError(base::missing_dsn_message());
    if (const auto why = store::conninfo_refusal(global.dsn))
        throw UsageError("--dsn (ACLAIM_DSN) is not a libpq conninfo or URI: " + *why);
    return store::bounded_dsn(global.dsn, global.deadlines, statements);
}

void register_all_commands(CLI::App& app, Global& global, Action& action) {
    add_migrate_command(app, global, action);
    add_enqueue_command(app, global, action);
    add_status_command(app, global, action);
    add_recover_command(app, global, action);
    add_quarantine_command(app, global, action);
    add_check_command(app, global, action);
    add_inspect_command(app, global, action);
    add_jobs_command(app, global, action);
    add_assignment_commands(app, global, action);
    add_keys_command(app, global, action);
    add_lifecycle_commands(app, global, action);
    add_results_command(app, global, action);
    add_producers_command(app, global, action);
    add_retention_command(app, global, action);
    add_schedule_command(app, global, action);
    add_workflow_command(app, global, action);
}

}  // namespace aclaim::ctl
