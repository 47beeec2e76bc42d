#pragma once

// aclaimctl: each command family lives in its own file and registers its subcommands here.

#include <CLI/CLI.hpp>
#include <functional>
#include <stdexcept>
#include <string>

#include "common/base/cli_flags.hpp"

namespace aclaim::ctl {

/// Options every command shares.
struct Global {
    /// libpq conninfo or URI (--dsn, ACLAIM_DSN).
    std::string dsn;
    /// A cell map (--cells, ACLAIM_CELLS): status, check and recover then run in every cell.
    std::string cells;
    /// How long each cell may take to answer (--cell-timeout).
    std::string cell_timeout = "60s";
    /// How long each call may wait on the database (--connect-timeout, --statement-timeout): a
    /// server that accepts TCP and never answers fails the command with exit 3 instead of holding
    /// it forever.
    common::DatabaseDeadlines deadlines;
};

/// What a parsed command will do; returns the process exit code.
using Action = std::function<int()>;

/// An operator's mistake (bad argument, unknown job): printed as one line, exit code 2.
class UsageError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

void add_migrate_command(CLI::App& app, Global& global, Action& action);
void add_enqueue_command(CLI::App& app, Global& global, Action& action);
void add_status_command(CLI::App& app, Global& global, Action& action);
void add_recover_command(CLI::App& app, Global& global, Action& action);
void add_quarantine_command(CLI::App& app, Global& global, Action& action);
void add_check_command(CLI::App& app, Global& global, Action& action);
void add_inspect_command(CLI::App& app, Global& global, Action& action);
void add_jobs_command(CLI::App& app, Global& global, Action& action);
void add_assignment_commands(CLI::App& app, Global& global, Action& action);
void add_keys_command(CLI::App& app, Global& global, Action& action);
void add_lifecycle_commands(CLI::App& app, Global& global, Action& action);
void add_results_command(CLI::App& app, Global& global, Action& action);
void add_producers_command(CLI::App& app, Global& global, Action& action);
void add_retention_command(CLI::App& app, Global& global, Action& action);
void add_schedule_command(CLI::App& app, Global& global, Action& action);
void add_workflow_command(CLI::App& app, Global& global, Action& action);

/// The DSN with the command's deadlines (connect_timeout, statement_timeout, TCP keepalives) added
/// unless it or the PG* environment sets them itself; a UsageError if none was given or it is not
/// a conninfo or URI at all (a mistake in what was asked, not an unreachable database).
/// A command whose statements may rightly run long (migrate: an ALTER of a big table) passes
/// Statements::kUnbounded and gets the connect deadline only.
using common::Statements;
std::string require_dsn(const Global& global, Statements statements = Statements::kBounded);

}  // namespace aclaim::ctl
