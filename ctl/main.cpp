#include <iostream>
#include <pqxx/pqxx>

#include "common/base/program.hpp"
#include "ctl/ctl.hpp"
#include "ctl/registry.hpp"

namespace {

int run(int argc, char** argv) {
    using namespace aclaim::ctl;
    CLI::App app{"aclaimctl: the aclaim operator's console"};
    app.require_subcommand(1);
    Global global;
    app.add_option("--dsn", global.dsn, "PostgreSQL address (libpq conninfo or URI)")
        ->envname("ACLAIM_DSN");
    app.add_option("--cells", global.cells,
                   "Cell map (JSON): status, check and recover run in every cell it names "
                   "(docs/scaling.md)")
        ->envname("ACLAIM_CELLS");
    app.add_option("--cell-timeout", global.cell_timeout,
                   "With --cells: a cell that has not answered in this long is reported down")
        ->envname("ACLAIM_CELL_TIMEOUT")
        ->capture_default_str();
    Action action;
    register_all_commands(app, global, action);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        return action ? action() : 0;
    } catch (const UsageError& e) {
        std::cerr << "aclaimctl: " << e.what() << "\n";
        return 2;
    } catch (const pqxx::broken_connection& e) {
        std::cerr << "aclaimctl: cannot reach the database: " << e.what() << "\n";
        return 3;
    }
}

}  // namespace

int main(int argc, char** argv) {
    return aclaim::common::run_program("aclaimctl", run, argc, argv);
}
