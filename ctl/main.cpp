#include <iostream>

#include "common/base/cli_flags.hpp"
#include "common/base/program.hpp"
#include "common/proto/version.hpp"
#include "common/store/outage_exit.hpp"
#include "ctl/ctl.hpp"
#include "ctl/registry.hpp"

namespace {

int run(int argc, char** argv) {
    using namespace aclaim::ctl;
    namespace base = aclaim::base;
    namespace proto = aclaim::proto;
    namespace store = aclaim::store;
    CLI::App app{"aclaimctl: the aclaim operator's console"};
    app.require_subcommand(1);
    // Before any subcommand is added, so that every one inherits it: the global options are
    // accepted after the command too (`aclaimctl status --dsn X`), as operators write them.
    app.fallthrough();
    app.set_version_flag("--version", proto::version_line("aclaimctl"));
    const base::SystemClock clock;
    Global global(clock);
    base::add_dsn(app, global.dsn);
    app.add_option("--cells", global.cells,
                   "Cell map (JSON): status, check and recover run in every cell it names "
                   "(docs/scaling.md)")
        ->envname("ACLAIM_CELLS");
    app.add_option("--cell-timeout", global.cell_timeout,
                   "With --cells: a cell that has not answered in this long is reported down")
        ->envname("ACLAIM_CELL_TIMEOUT")
        ->capture_default_str();
    base::add_database_deadlines(app, global.deadlines);
    Action action;
    register_all_commands(app, global, action);
    if (const auto code = base::parse_command_line(app, "aclaimctl", argc, argv)) return *code;
    try {
        return store::exit_on_outage("aclaimctl", global.deadlines.statement_timeout_s,
                                     [&] { return action ? action() : base::kExitOk; });
    } catch (const UsageError& e) {
        std::cerr << "aclaimctl: " << e.what() << "\n";
        return base::kExitUsage;
    }
}

}  // namespace

int main(int argc, char** argv) {
    return aclaim::base::run_program("aclaimctl", run, argc, argv);
}
