// migrate, enqueue and status: the first things an operator runs.

#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/assignment_store.hpp"
#include "common/clock.hpp"
#include "common/migrations.hpp"
#include "coordinator/ctl/ctl.hpp"

namespace aclaim::ctl {

void add_migrate_command(CLI::App& app, Global& global, Action& action) {
    auto* cmd = app.add_subcommand("migrate", "Apply the schema migrations this binary carries");
    cmd->callback([&global, &action] {
        action = [&global] {
            pqxx::connection conn(require_dsn(global));
            const auto report = common::migrate(conn);
            for (const auto& name : report.applied) std::cout << "applied " << name << "\n";
            std::cout << "schema version " << report.version << "\n";
            return 0;
        };
    });
}

void add_enqueue_command(CLI::App& app, Global& global, Action& action) {
    struct Args {
        std::int64_t org = 0;
        int count = 1;
        int priority = 0;
        int max_attempts = 3;
        std::string payload = "review";
        int batch = 1000;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand("enqueue", "Add synthetic pending jobs to an organization");
    cmd->add_option("--org", args->org, "Organization id")->required()->check(CLI::PositiveNumber);
    cmd->add_option("--count", args->count, "How many jobs")->check(CLI::Range(1, 10000000));
    cmd->add_option("--priority", args->priority, "Higher is claimed first");
    cmd->add_option("--max-attempts", args->max_attempts, "Claims allowed before the job fails")
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--payload", args->payload, "Payload prefix; each job gets '<prefix>-<n>'");
    cmd->add_option("--batch", args->batch, "Jobs per transaction")->check(CLI::Range(1, 100000));
    cmd->callback([&global, &action, args] {
        action = [&global, args] {
            common::AssignmentStore store(require_dsn(global));
            common::SystemClock clock;
            int done = 0;
            while (done < args->count) {
                std::vector<common::NewJob> jobs;
                for (int i = 0; i < args->batch && done + i < args->count; ++i) {
                    jobs.push_back({args->priority, args->payload + "-" + std::to_string(done + i),
                                    args->max_attempts});
                }
                store.enqueue(args->org, jobs, clock.now());
                done += static_cast<int>(jobs.size());
            }
            std::cout << "enqueued " << done << " jobs for organization " << args->org << "\n";
            return 0;
        };
    });
}

void add_status_command(CLI::App& app, Global& global, Action& action) {
    auto json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("status", "Jobs by organization and state");
    cmd->add_flag("--json", *json, "Print one JSON object");
    cmd->callback([&global, &action, json] {
        action = [&global, json] {
            pqxx::connection conn(require_dsn(global));
            pqxx::read_transaction txn(conn);
            const auto rows = txn.exec(
                "SELECT org_id, state, count(*) FROM jobs GROUP BY org_id, state ORDER BY 1, 2");
            std::map<std::int64_t, std::map<std::string, std::int64_t>> counts;
            for (const auto& r : rows) {
                counts[r[0].as<std::int64_t>()][r[1].as<std::string>()] = r[2].as<std::int64_t>();
            }
            const char* states[] = {"pending", "assigned", "completed", "failed", "quarantined"};
            if (*json) {
                nlohmann::json out = nlohmann::json::object();
                for (const auto& [org, by_state] : counts) {
                    auto& o = out["organizations"][std::to_string(org)];
                    for (const char* s : states) o[s] = by_state.count(s) ? by_state.at(s) : 0;
                }
                if (counts.empty()) out["organizations"] = nlohmann::json::object();
                std::cout << out.dump() << "\n";
                return 0;
            }
            std::printf("%-8s %10s %10s %10s %10s %12s\n", "org", "pending", "assigned",
                        "completed", "failed", "quarantined");
            for (const auto& [org, by_state] : counts) {
                auto get = [&](const char* s) { return by_state.count(s) ? by_state.at(s) : 0; };
                std::printf("%-8lld %10lld %10lld %10lld %10lld %12lld\n",
                            static_cast<long long>(org), static_cast<long long>(get("pending")),
                            static_cast<long long>(get("assigned")),
                            static_cast<long long>(get("completed")),
                            static_cast<long long>(get("failed")),
                            static_cast<long long>(get("quarantined")));
            }
            return 0;
        };
    });
}

}  // namespace aclaim::ctl
