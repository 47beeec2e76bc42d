#include <iostream>
#include <pqxx/pqxx>

#include "common/base/cli_flags.hpp"
#include "common/base/program.hpp"
#include "common/proto/version.hpp"
#include "ctl/ctl.hpp"
#include "ctl/registry.hpp"

namespace {

int run(int argc, char** argv) {
    using namespace aclaim::ctl;
    namespace common = aclaim::common;
    CLI::App app{"aclaimctl: the aclaim operator's console"};
    app.require_subcommand(1);
    // Before any subcommand is added, so that every one inherits it: the global options are
    // accepted after the command too (`aclaimctl status --dsn X`), as operators write them.
    app.fallthrough();
    app.set_version_flag("--version", common::proto::version_line("aclaimctl"));
    Global global;
    common::add_dsn(app, global.dsn);
    app.add_option("--cells", global.cells,
                   "Cell map (JSON): status, check and recover run in every cell it names "
                   "(docs/scaling.md)")
        ->envname("ACLAIM_CELLS");
    app.add_option("--cell-timeout", global.cell_timeout,
                   "With --cells: a cell that has not answered in this long is reported down")
        ->envname("ACLAIM_CELL_TIMEOUT")
        ->capture_default_str();
    common::add_database_deadlines(app, global.deadlines);
    Action action;
    register_all_commands(app, global, action);
    if (const auto code = common::parse_command_line(app, "aclaimctl", argc, argv)) return *code;
    try {
        return action ? action() : common::kExitOk;
    } catch (const UsageError& e) {
        std::cerr << "aclaimctl: " << e.what() << "\n";
        return common::kExitUsage;
    } catch (const pqxx::broken_connection& e) {
        std::cerr << "aclaimctl: cannot reach the database: " << e.what() << "\n";
        return common::kExitUnreachable;
    } catch (const pqxx::sql_error& e) {
        // 57014: the statement ran past --statement-timeout; the database is there but not
        // answering in time, which is an outage to a script, not a failure of the command.
        if (e.sqlstate() != "57014") throw;
        std::cerr << "aclaimctl: the database did not answer within --statement-timeout ("
                  << global.deadlines.statement_timeout_s << " s): " << e.what();
        return common::kExitUnreachable;
    }
}

}  // namespace

int main(int argc, char** argv) {
    return aclaim::common::run_program("aclaimctl", run, argc, argv);
}
