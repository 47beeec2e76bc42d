#pragma once

// aclaimctl: each command family lives in its own file and registers its subcommands here.

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/base/cli_flags.hpp"
#include "common/base/clock.hpp"

namespace aclaim::ctl {

/// What every command is given: the program's clock and the options every command shares.
struct Global {
    /// `clock` must outlive every command: main's.
    explicit Global(const base::Clock& program_clock) : clock(program_clock) {}

    /// The one clock of aclaimctl: every instant a command takes or passes on is read from it.
    const base::Clock& clock;
    /// libpq conninfo or URI (--dsn, ACLAIM_DSN).
    std::string dsn;
    /// A cell map (--cells, ACLAIM_CELLS): status, check and recover then run in every cell.
    std::string cells;
    /// How long each cell may take to answer (--cell-timeout).
    std::string cell_timeout = "60s";
    /// How long each call may wait on the database (--connect-timeout, --statement-timeout): a
    /// server that accepts TCP and never answers fails the command with exit 3 instead of holding
    /// it forever.
    base::DatabaseDeadlines deadlines;
};

/// What a parsed command will do; returns the process exit code.
using Action = std::function<int()>;

/// Makes `cmd`, once parsed, the action: `run(global, *args)`, the shape of most commands.
template <typename Args, typename Run>
void bind_action(CLI::App* cmd, const Global& global, Action& action, std::shared_ptr<Args> args,
                 Run run) {
    cmd->callback([&global, &action, args, run] {
        action = [&global, args, run] { return run(global, *args); };
    });
}

/// A subcommand `name` of `parent` whose options fill a fresh Args, and once parsed the action:
/// `run(global, args)`. Returns the subcommand, for its options, and its Args.
template <typename Args, typename Run>
std::pair<CLI::App*, std::shared_ptr<Args>> add_command(CLI::App& parent, const std::string& name,
                                                        const std::string& description,
                                                        const Global& global, Action& action,
                                                        Run run) {
    auto args = std::make_shared<Args>();
    auto* cmd = parent.add_subcommand(name, description);
    bind_action(cmd, global, action, args, run);
    return {cmd, args};
}

/// A subcommand `name` of `parent` that groups others, one of which must be given.
inline CLI::App* add_group(CLI::App& parent, const std::string& name,
                           const std::string& description) {
    auto* group = parent.add_subcommand(name, description);
    group->require_subcommand(1);
    return group;
}

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
using base::Statements;
std::string require_dsn(const Global& global, Statements statements = Statements::kBounded);

/// Runs `change(txn)` in one transaction named `name` on the command's database and commits it;
/// returns what `change` returns. A throw from `change` rolls the transaction back.
template <typename Change>
auto in_transaction(const Global& global, const char* name, Change&& change) {
    pqxx::connection conn(require_dsn(global));
    pqxx::work txn(conn, name);
    auto result = change(txn);
    txn.commit();
    return result;
}

/// The rows of one query, `text` with `params`, run in a read-only transaction named `name` on
/// the command's database: what the list commands print.
template <typename... Params>
pqxx::result read_rows(const Global& global, const char* name, const std::string& text,
                       Params&&... params) {
    pqxx::connection conn(require_dsn(global));
    pqxx::read_transaction txn(conn, name);
    return txn.exec_params(text, std::forward<Params>(params)...);
}

}  // namespace aclaim::ctl
