// migrate: the first thing an operator runs. enqueue and status have files of their own.

#include <iostream>

#include "common/store/migrations.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

void add_migrate_command(CLI::App& app, Global& global, Action& action) {
    auto* cmd = app.add_subcommand("migrate", "Apply the schema migrations this binary carries");
    cmd->callback([&global, &action] {
        action = [&global] {
            pqxx::connection conn(require_dsn(global, Statements::kUnbounded));
            const auto report = common::migrate(conn);
            for (const auto& name : report.applied) std::cout << "applied " << name << "\n";
            std::cout << "schema version " << report.version << "\n";
            return 0;
        };
    });
}

}  // namespace aclaim::ctl
