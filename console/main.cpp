// aclaim-console: the operator's console in the browser.
//   aclaim-console serve --dsn DSN [--listen 127.0.0.1:8090] [--reports DIR]
//   aclaim-console operator add NAME [--org N]... < password
//   aclaim-console operator remove NAME
// Exit codes follow aclaimctl's policy (common/base/exit_codes.hpp, docs/operations.md).

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <iostream>
#include <pqxx/pqxx>

#include "common/base/cli_flags.hpp"
#include "common/base/logging.hpp"
#include "common/base/program.hpp"
#include "common/base/stop_signals.hpp"
#include "common/proto/version.hpp"
#include "common/store/conninfo.hpp"
#include "common/store/migrations.hpp"
#include "common/store/outage_exit.hpp"
#include "console/operators.hpp"
#include "console/server.hpp"
#include "console/views.hpp"

namespace {

namespace base = aclaim::base;

namespace proto = aclaim::proto;

namespace store = aclaim::store;

/// A refusal of what was asked: one line, kExitUsage.
class UsageError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// What the command line asked for.
struct Args {
    std::string dsn;
    base::DatabaseDeadlines deadlines;
    std::string listen = "127.0.0.1:8090";
    std::string reports;
    std::string name;
    std::vector<long long> orgs;
};

/// The database with the deadlines of --connect-timeout and --statement-timeout; refused (exit 2)
/// when none was given or it is no conninfo or URI at all.
std::string require_dsn(const Args& a, base::Statements statements) {
    if (a.dsn.empty()) throw UsageError(base::missing_dsn_message());
    if (const auto why = store::conninfo_refusal(a.dsn))
        throw UsageError("--dsn (ACLAIM_DSN) is not a libpq conninfo or URI: " + *why);
    return store::bounded_dsn(a.dsn, a.deadlines, statements);
}

/// The migrations, on a connection of their own whose statements are not bounded: one may
/// rightly run long (an index built on a big table), as `aclaimctl migrate`'s may.
void migrate(const Args& a) {
    pqxx::connection conn(require_dsn(a, base::Statements::kUnbounded));
    store::migrate(conn);
}

int add_operator(const Args& a) {
    std::string password;
    std::getline(std::cin, password);
    migrate(a);
    pqxx::connection conn(require_dsn(a, base::Statements::kBounded));
    const std::string& name = a.name;
    aclaim::console::Operator op{name, std::nullopt};
    if (!a.orgs.empty()) {
        op.orgs = std::vector<store::OrgId>(a.orgs.begin(), a.orgs.end());
        std::sort(op.orgs->begin(), op.orgs->end());
    }
    aclaim::console::put_operator(conn, op, password);
    std::cout << "operator " << name << " can sign in"
              << (op.orgs ? " (scoped to " + std::to_string(op.orgs->size()) + " organizations)"
                          : " (every organization)")
              << "\n";
    return base::kExitOk;
}

int remove_operator(const Args& a) {
    migrate(a);
    pqxx::connection conn(require_dsn(a, base::Statements::kBounded));
    if (!aclaim::console::remove_operator(conn, a.name))
        throw UsageError("there is no operator " + a.name);
    std::cout << "operator " << a.name << " removed; its sessions are ended\n";
    return base::kExitOk;
}

int serve(const Args& a) {
    // --listen was checked when parsed: this cannot fail.
    const auto at = base::parse_host_port(a.listen).value();
    // The console's one clock: the views and the server read it.
    const base::SystemClock clock;
    // A request waits for its turn on a connection as long as a statement may run there.
    const auto turn_wait =
        a.deadlines.statement_timeout_s > 0
            ? std::optional<base::Duration>(std::chrono::seconds(a.deadlines.statement_timeout_s))
            : std::nullopt;
    aclaim::console::Views views(require_dsn(a, base::Statements::kBounded), a.reports, clock,
                                 turn_wait);
    // Before the server's threads start, so that only the waiter sees SIGINT and SIGTERM.
    const sigset_t set = base::block_stop_signals();
    aclaim::console::ConsoleServer server(views, clock);
    // The address first: a taken port is refused at once, whatever the database does.
    const int bound = server.bind(at.host, at.port);
    migrate(a);
    // The first signal stops the server (its accept loop ends, requests in flight finish).
    base::StopSignalWaiter signals(set, [&server](int sig) {
        spdlog::info("{}: stopping", strsignal(sig));
        server.stop();
    });
    // The line scripts wait for: the console is ready at this URL.
    std::cout << "console: http://" << at.host << ":" << bound << "/" << std::endl;
    spdlog::info("console listening on {}:{}", at.host, bound);
    server.run();
    return base::kExitOk;
}

int run(int argc, char** argv) {
    CLI::App app{"aclaim-console: the operator's console in the browser"};
    app.require_subcommand(1);
    // The database is accepted before or after the command, as in aclaimctl.
    app.fallthrough();
    app.set_version_flag("--version", proto::version_line("aclaim-console"));
    Args args;
    base::add_dsn(app, args.dsn);
    base::add_database_deadlines(app, args.deadlines);

    auto* serve_cmd = app.add_subcommand("serve", "Serve the console");
    // The last of a repeated option wins, so that a wrapper's defaults can be overridden.
    base::add_host_port(*serve_cmd, "--listen", args.listen,
                        "host:port to bind (port 0: any free port)")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    base::add_setting(*serve_cmd, "--reports", args.reports,
                      "Directory of canary and bench reports (JSON, SVG); empty: none")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

    auto* ops = app.add_subcommand("operator", "Operator accounts");
    ops->require_subcommand(1);
    auto* add = ops->add_subcommand(
        "add",
        "Create an operator, or reset one's password and scope; the password is read "
        "from the first line of standard input");
    add->add_option("name", args.name, "Operator name")->required();
    base::add_org(*add, args.orgs, "Organization the operator may see (repeat); none: all");
    auto* remove = ops->add_subcommand(
        "remove", "Remove an operator; its sessions end in every console at once");
    remove->add_option("name", args.name, "Operator name")->required();

    if (const auto code = base::parse_command_line(app, "aclaim-console", argc, argv)) return *code;
    try {
        return store::exit_on_outage("aclaim-console", args.deadlines.statement_timeout_s, [&] {
            // On stderr, one line per event: a client's text cannot forge a line
            // (logging.hpp).
            base::setup_logging("aclaim-console", "info");
            aclaim::console::init_crypto();
            if (add->parsed()) return add_operator(args);
            if (remove->parsed()) return remove_operator(args);
            return serve(args);
        });
    } catch (const UsageError& e) {
        std::cerr << "aclaim-console: " << e.what() << "\n";
        return base::kExitUsage;
    } catch (const aclaim::console::BindError& e) {
        // A --listen the console cannot have: refused like any other setting, so that a unit
        // stops instead of restarting into the same taken port every 2 s.
        std::cerr << "aclaim-console: --listen: " << e.what() << "\n";
        return base::kExitUsage;
    }
}

}  // namespace

int main(int argc, char** argv) {
    return aclaim::base::run_program("aclaim-console", run, argc, argv);
}
