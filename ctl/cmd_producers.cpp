// producers bind|unbind|list: the login roles a producer service connects as, each bound to one
// organization (docs/security.md, "Producer logins"). The login itself is created by whoever
// manages the database's roles, with the authentication method they use.

#include <cstdio>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "common/ops/operator_sql.hpp"
#include "common/ops/recovery.hpp"
#include "common/store/pg_time.hpp"
#include "ctl/cmd_recover.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

namespace {

struct ProducerArgs {
    std::string login;
    std::int64_t org = 0;
    bool json = false;
};

int run_bind(const Global& global, const ProducerArgs& a) {
    in_transaction(global, "producer_bind", [&](pqxx::work& txn) {
        return txn.exec_params(ops::sql::kProducerBind.text, a.login, a.org, default_actor(),
                               global.clock.now());
    });
    std::printf("login %s now acts for organization %lld only\n", a.login.c_str(),
                static_cast<long long>(a.org));
    return 0;
}

int run_unbind(const Global& global, const ProducerArgs& a) {
    const bool unbound = in_transaction(global, "producer_unbind", [&](pqxx::work& txn) {
        return txn.exec_params1(ops::sql::kProducerUnbind.text, a.login)[0].as<bool>();
    });
    if (!unbound) throw UsageError("login " + a.login + " is not bound to an organization");
    std::printf("login %s is no longer a producer\n", a.login.c_str());
    return 0;
}

int run_list(const Global& global, const ProducerArgs& a) {
    const auto rows = read_rows(global, "producer_list", ops::sql::kProducerList.text);
    if (a.json) {
        auto out = nlohmann::json::array();
        for (const auto& r : rows) {
            out.push_back({{"login", r["login"].as<std::string>()},
                           {"org", r["org_id"].as<long long>()},
                           {"bound_at", ops::format_instant(r["bound_us"].as<base::Instant>())},
                           {"bound_by", r["bound_by"].as<std::string>()},
                           {"can_login", r["can_login"].as<bool>()}});
        }
        std::printf("%s\n", out.dump().c_str());
        return 0;
    }
    std::printf("%-24s %-6s %-28s %s\n", "login", "org", "bound at", "by");
    for (const auto& r : rows) {
        std::printf("%-24s %-6lld %-28s %s%s\n", r["login"].c_str(), r["org_id"].as<long long>(),
                    ops::format_instant(r["bound_us"].as<base::Instant>()).c_str(),
                    r["bound_by"].c_str(), r["can_login"].as<bool>() ? "" : "  (cannot log in)");
    }
    return 0;
}

}  // namespace

void add_producers_command(CLI::App& app, Global& global, Action& action) {
    auto* producers = add_group(
        app, "producers", "Producer logins: the roles services enqueue and consume verdicts as");
    auto [b, bind] = add_command<ProducerArgs>(
        *producers, "bind",
        "Bind an existing login role to one organization (and make it a producer)", global, action,
        run_bind);
    b->add_option("--login", bind->login, "The login role")->required();
    base::add_org(*b, bind->org, "Its organization")->required();
    auto [u, unbind] = add_command<ProducerArgs>(
        *producers, "unbind", "Take a login's producer rights away", global, action, run_unbind);
    u->add_option("--login", unbind->login, "The login role")->required();
    auto [l, list] = add_command<ProducerArgs>(
        *producers, "list", "Bound logins and their organizations", global, action, run_list);
    l->add_flag("--json", list->json, "JSON");
}

}  // namespace aclaim::ctl
