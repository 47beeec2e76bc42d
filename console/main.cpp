// aclaim-console: the operator's console in the browser.
//   aclaim-console serve --dsn DSN [--listen 127.0.0.1:8090] [--reports DIR]
//   aclaim-console operator add NAME [--org N]... < password

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <pqxx/pqxx>

#include "common/base/program.hpp"
#include "common/store/migrations.hpp"
#include "console/operators.hpp"
#include "console/server.hpp"
#include "console/views.hpp"

namespace {

std::atomic<aclaim::console::ConsoleServer*> g_server{nullptr};

void on_signal(int /*signal*/) {
    // httplib's stop() only flips a flag and shuts the listening socket down.
    if (auto* s = g_server.load()) s->stop();
}

std::string dsn_or_env(const std::string& dsn) {
    if (!dsn.empty()) return dsn;
    const char* env = std::getenv("ACLAIM_DSN");
    if (env == nullptr || *env == '\0') throw CLI::ValidationError("--dsn", "or ACLAIM_DSN");
    return env;
}

int run(int argc, char** argv) {
    CLI::App app{"aclaim-console: the operator's console in the browser"};
    app.require_subcommand(1);
    std::string dsn;
    app.add_option("--dsn", dsn, "PostgreSQL connection string (default: $ACLAIM_DSN)");

    std::string listen = "127.0.0.1:8090";
    std::string reports;
    auto* serve = app.add_subcommand("serve", "Serve the console");
    // The last of a repeated option wins, so that a wrapper's defaults can be overridden.
    serve->add_option("--listen", listen, "host:port to bind (port 0: any free port)")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    serve->add_option("--reports", reports, "Directory of canary and bench reports (JSON, SVG)")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

    auto* ops = app.add_subcommand("operator", "Operator accounts");
    ops->require_subcommand(1);
    std::string name;
    std::vector<long long> orgs;
    auto* add = ops->add_subcommand(
        "add",
        "Create an operator, or reset one's password and scope; the password is read "
        "from the first line of standard input");
    add->add_option("name", name, "Operator name")->required();
    add->add_option("--org", orgs, "Organization the operator may see (repeat); none: all");

    CLI11_PARSE(app, argc, argv);
    try {
        aclaim::console::init_crypto();
        if (add->parsed()) {
            std::string password;
            std::getline(std::cin, password);
            pqxx::connection conn(dsn_or_env(dsn));
            aclaim::common::migrate(conn);
            aclaim::console::Operator op{name, std::nullopt};
            if (!orgs.empty()) {
                std::sort(orgs.begin(), orgs.end());
                op.orgs = std::vector<aclaim::common::OrgId>(orgs.begin(), orgs.end());
            }
            aclaim::console::put_operator(conn, op, password);
            std::cout << "operator " << name << " can sign in"
                      << (op.orgs
                              ? " (scoped to " + std::to_string(op.orgs->size()) + " organizations)"
                              : " (every organization)")
                      << "\n";
            return 0;
        }
        const auto colon = listen.rfind(':');
        if (colon == std::string::npos) throw CLI::ValidationError("--listen", "want host:port");
        const auto host = listen.substr(0, colon);
        const int port = std::stoi(listen.substr(colon + 1));
        aclaim::console::Views views(dsn_or_env(dsn), reports);
        views.migrate();
        aclaim::console::ConsoleServer server(views);
        const int bound = server.bind(host, port);
        g_server = &server;
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        // The line scripts wait for: the console is ready at this URL.
        std::cout << "console: http://" << host << ":" << bound << "/" << std::endl;
        spdlog::info("console listening on {}:{}", host, bound);
        server.run();
        g_server = nullptr;
        return 0;
    } catch (const CLI::Error& e) {
        return app.exit(e);
    }
}

}  // namespace

int main(int argc, char** argv) {
    return aclaim::common::run_program("aclaim-console", run, argc, argv);
}
