#include "ctl/registry.hpp"

#include <libpq-fe.h>

#include <cstdlib>
#include <string>

#include "common/base/cli_flags.hpp"
#include "common/store/conninfo.hpp"

namespace aclaim::ctl {

namespace {

bool is_uri(const std::string& dsn) {
    return dsn.rfind("postgresql://", 0) == 0 || dsn.rfind("postgres://", 0) == 0;
}

bool environment_sets(const char* variable) {
    const char* value = std::getenv(variable);
    return value != nullptr && *value != '\0';
}

}  // namespace

std::string require_dsn(const Global& global, Statements statements) {
    if (global.dsn.empty()) throw UsageError(common::missing_dsn_message());
    char* error = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(global.dsn.c_str(), &error);
    if (parsed == nullptr) {
        std::string why = error != nullptr ? error : "cannot be parsed";
        PQfreemem(error);
        while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
        throw UsageError("--dsn (ACLAIM_DSN) is not a libpq conninfo or URI: " + why);
    }
    PQconninfoFree(parsed);
    std::string dsn = global.dsn;
    if (!environment_sets("PGCONNECT_TIMEOUT"))
        dsn =
            common::with_setting(dsn, "connect_timeout", std::to_string(global.connect_timeout_s));
    if (statements == Statements::kBounded && global.statement_timeout_s > 0 &&
        !environment_sets("PGOPTIONS")) {
        const std::string ms = std::to_string(global.statement_timeout_s * 1000);
        dsn = common::with_setting(
            dsn, "options",
            is_uri(dsn) ? "-c%20statement_timeout%3D" + ms : "'-c statement_timeout=" + ms + "'");
    }
    dsn = common::with_setting(dsn, "keepalives", "1");
    dsn = common::with_setting(dsn, "keepalives_idle", "5");
    dsn = common::with_setting(dsn, "keepalives_interval", "2");
    dsn = common::with_setting(dsn, "keepalives_count", "3");
    return dsn;
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
