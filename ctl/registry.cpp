#include "ctl/registry.hpp"

#include "common/base/cli_flags.hpp"

namespace aclaim::ctl {

const std::string& require_dsn(const Global& global) {
    if (global.dsn.empty()) throw UsageError(common::missing_dsn_message());
    return global.dsn;
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
