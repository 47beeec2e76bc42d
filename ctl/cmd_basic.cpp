// migrate: the first thing an operator runs. enqueue and status have files of their own.

#include <iostream>

#include "common/base/exit_codes.hpp"
#include "common/store/migrations.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

void add_migrate_command(CLI::App& app, Global& global, Action& action) {
    auto* cmd = app.add_subcommand(
        "migrate",
        "Apply the schema migrations and definitions this binary carries; refuse (exit 2) a "
        "database that applied one of its migrations with another text, or one that stopped "
        "before the baseline");
    cmd->callback([&global, &action] {
        action = [&global] {
            pqxx::connection conn(require_dsn(global, Statements::kUnbounded));
            try {
                const auto report = store::migrate(conn);
                for (const auto& name : report.applied) std::cout << "applied " << name << "\n";
                for (const auto& name : report.definitions) {
                    std::cout << "defined " << name << "\n";
                }
                for (const auto& note : report.notes) std::cerr << "aclaimctl: " << note << "\n";
                std::cout << "schema version " << report.version << "\n";
                return base::kExitOk;
            } catch (const store::MigrationRefused& e) {
                std::cerr << "aclaimctl: " << e.what() << "\n";
                return base::kExitUsage;
            }
        };
    });
}

}  // namespace aclaim::ctl
