// results follow|group: the verdicts of a consumer group, and the groups themselves. follow is
// driven by LISTEN/NOTIFY (clients/cpp/result_consumer.hpp), with a deadline on every wait, and
// acknowledges what it has written and flushed, so a follower killed at any point loses nothing:
// what it had not acknowledged is delivered again to the group's next follower.

#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <thread>

#include "clients/cpp/client_sql.hpp"
#include "clients/cpp/result_consumer.hpp"
#include "common/base/backoff.hpp"
#include "common/ops/recovery.hpp"
#include "common/store/pg_time.hpp"
#include "ctl/ctl.hpp"
#include "ctl/terminal.hpp"

namespace aclaim::ctl {

namespace {

struct GroupArgs {
    std::string group;
    std::int64_t org = 0;
    std::string from = "latest";
    bool json = false;
};

struct FollowArgs {
    GroupArgs g;
    bool no_ack = false;
    bool no_create = false;
    std::int64_t max = 0;
    std::string idle_exit;
    std::string wait = "30s";
    int batch = 100;
};

std::optional<store::OrgId> org_option(std::int64_t org) {
    if (org <= 0) return std::nullopt;
    return org;
}

nlohmann::json verdict_json(const clients::Verdict& v, store::OrgId org, const std::string& g) {
    auto nullable = [](const std::optional<std::string>& s) -> nlohmann::json {
        if (!s) return nullptr;
        return *s;
    };
    return {{"group", g},
            {"org", org},
            {"seq", v.seq},
            {"job_id", v.job_id},
            {"outcome", std::string(to_string(v.outcome))},
            {"queue", v.queue},
            {"generation", v.generation},
            {"attempts", v.attempts},
            {"result_ref", nullable(v.result_ref)},
            {"error", nullable(v.error)},
            {"dedupe_key", nullable(v.dedupe_key)},
            {"at_us", base::to_micros(v.at)}};
}

std::string verdict_line(const clients::Verdict& v) {
    std::string line = "seq " + std::to_string(v.seq) + "  job " + std::to_string(v.job_id) + " " +
                       std::string(to_string(v.outcome)) + "  queue " + v.queue + "  attempts " +
                       std::to_string(v.attempts);
    if (v.result_ref) line += "  result " + one_line(*v.result_ref, 80);
    if (v.error) line += "  error " + one_line(*v.error, 80);
    if (v.dedupe_key) line += "  key " + *v.dedupe_key;
    return line + "  at " + ops::format_instant(v.at);
}

std::optional<base::Duration> duration_flag(const std::string& text, const char* flag) {
    if (text.empty()) return std::nullopt;
    const auto d = parse_duration(text);
    if (!d || d->count() <= 0)
        throw UsageError(std::string(flag) + " '" + text + "' is not a duration like 30s or 5m");
    return d;
}

clients::ConsumerOptions consumer_options(const FollowArgs& a) {
    if (a.g.from != "latest" && a.g.from != "earliest")
        throw UsageError("--from is latest or earliest, not '" + a.g.from + "'");
    clients::ConsumerOptions o;
    o.org = org_option(a.g.org);
    o.create_group = !a.no_create;
    o.start = a.g.from == "latest" ? clients::GroupStart::Latest : clients::GroupStart::Earliest;
    o.batch = a.batch;
    o.application_name = "aclaimctl results follow";
    return o;
}

/// Writes and flushes the verdicts, then acknowledges the last of them: a line is acknowledged
/// only once it has left the process. Returns how many were written.
std::int64_t deliver(clients::ResultConsumer& consumer, std::vector<clients::Verdict> verdicts,
                     const FollowArgs& a, std::int64_t room) {
    if (room > 0 && static_cast<std::int64_t>(verdicts.size()) > room)
        verdicts.resize(static_cast<std::size_t>(room));
    for (const auto& v : verdicts) {
        const std::string line =
            a.g.json ? verdict_json(v, consumer.org(), a.g.group).dump() : verdict_line(v);
        std::fputs(line.c_str(), stdout);
        std::fputc('\n', stdout);
    }
    if (std::fflush(stdout) != 0 || std::ferror(stdout))
        throw std::runtime_error("standard output closed: the last verdicts stay unacknowledged");
    if (!verdicts.empty() && !a.no_ack) consumer.ack(verdicts.back());
    return static_cast<std::int64_t>(verdicts.size());
}

/// Creates the group if it is missing and says so when a group made at `latest` leaves verdicts
/// already decided behind: a follower that prints nothing must not leave the operator guessing.
void create_group(const Global& global, const FollowArgs& a) {
    const auto r = in_transaction(global, "results_follow_create", [&](pqxx::work& txn) {
        return txn.exec_params1(clients::sql::kGroupCreate.text, a.g.group, a.g.from,
                                org_option(a.g.org), global.clock.now());
    });
    const auto at = r["acked"].as<long long>();
    if (!r["created"].as<bool>() || at == 0) return;
    const std::string left = at == 1 ? "the verdict before it is"
                                     : "the " + std::to_string(at) + " verdicts before it are";
    std::fprintf(stderr,
                 "aclaimctl: created group %s of organization %lld at position %lld (--from "
                 "latest): %s not delivered to it; a group created with --from earliest begins "
                 "at the first verdict kept\n",
                 a.g.group.c_str(), r["org_id"].as<long long>(), at, left.c_str());
}

int run_follow(const Global& global, const FollowArgs& a) {
    if (a.g.group.empty()) throw UsageError("--group names the consumer group");
    const auto wait = duration_flag(a.wait, "--wait").value_or(std::chrono::seconds(30));
    const auto idle_exit = duration_flag(a.idle_exit, "--idle-exit");
    const auto options = consumer_options(a);
    if (!a.no_create) create_group(global, a);
    const base::Clock& clock = global.clock;
    base::Backoff backoff;
    std::int64_t written = 0;
    auto idle_since = clock.monotonic_now();
    while (a.max == 0 || written < a.max) {
        try {
            clients::ResultConsumer consumer(require_dsn(global), clock, a.g.group, options);
            backoff.reset();
            while (a.max == 0 || written < a.max) {
                auto step = wait;
                if (idle_exit) {
                    const auto left = *idle_exit - (clock.monotonic_now() - idle_since);
                    if (left.count() <= 0) return 0;
                    step = std::min(step, std::chrono::duration_cast<base::Duration>(left));
                }
                auto verdicts = consumer.next(step);
                if (verdicts.empty()) continue;
                written += deliver(consumer, std::move(verdicts), a, a.max - written);
                idle_since = clock.monotonic_now();
            }
        } catch (const pqxx::broken_connection& e) {
            const auto pause = backoff.next();
            std::cerr << "aclaimctl: lost the database (" << e.what() << "); again in "
                      << pause.count() << " ms\n";
            std::this_thread::sleep_for(pause);
        }
    }
    return 0;
}

int run_group_add(const Global& global, const GroupArgs& a) {
    if (a.from != "latest" && a.from != "earliest")
        throw UsageError("--from is latest or earliest, not '" + a.from + "'");
    const auto r = in_transaction(global, "results_group_add", [&](pqxx::work& txn) {
        return txn.exec_params1(clients::sql::kGroupCreate.text, a.group, a.from, org_option(a.org),
                                global.clock.now());
    });
    std::printf("%s group %s of organization %lld at position %lld\n",
                r["created"].as<bool>() ? "created" : "kept existing", a.group.c_str(),
                r["org_id"].as<long long>(), r["acked"].as<long long>());
    return 0;
}

int run_group_drop(const Global& global, const GroupArgs& a) {
    const bool dropped = in_transaction(global, "results_group_drop", [&](pqxx::work& txn) {
        return clients::ResultConsumer::drop_group(txn, a.group, org_option(a.org));
    });
    if (!dropped) throw UsageError("no consumer group '" + a.group + "' in that organization");
    std::printf("dropped group %s\n", a.group.c_str());
    return 0;
}

int run_group_list(const Global& global, const GroupArgs& a) {
    const auto rows =
        read_rows(global, "results_group_list", clients::sql::kGroups.text, org_option(a.org));
    if (a.json) {
        auto out = nlohmann::json::array();
        for (const auto& r : rows) {
            out.push_back({{"org", r["org_id"].as<long long>()},
                           {"group", r["name"].as<std::string>()},
                           {"acked", r["acked"].as<long long>()},
                           {"head", r["head"].as<long long>()},
                           {"lag", r["lag"].as<long long>()}});
        }
        std::cout << out.dump() << "\n";
        return 0;
    }
    std::printf("%-6s %-24s %10s %10s %10s\n", "org", "group", "acked", "head", "lag");
    for (const auto& r : rows) {
        std::printf("%-6lld %-24s %10lld %10lld %10lld\n", r["org_id"].as<long long>(),
                    r["name"].c_str(), r["acked"].as<long long>(), r["head"].as<long long>(),
                    r["lag"].as<long long>());
    }
    return 0;
}

void add_group_options(CLI::App* cmd, GroupArgs& a) {
    base::add_org(*cmd, a.org,
                  "Organization (leave out when connecting as a producer login bound to one)");
}

}  // namespace

void add_results_command(CLI::App& app, Global& global, Action& action) {
    auto* results = add_group(app, "results",
                              "Verdicts of jobs to consumer groups: follow a group, manage groups");

    auto [f, follow] = add_command<FollowArgs>(
        *results, "follow",
        "Print each verdict of the group as it is committed, and acknowledge it once written",
        global, action, run_follow);
    f->add_option("--group", follow->g.group, "Consumer group")->required();
    add_group_options(f, follow->g);
    f->add_flag("--json", follow->g.json, "One JSON object per line");
    f->add_option("--from", follow->g.from,
                  "Where a group this creates begins: latest (from now on) or earliest")
        ->capture_default_str();
    f->add_flag("--no-ack", follow->no_ack, "Print without acknowledging (a peek)");
    f->add_flag("--no-create", follow->no_create, "Refuse a group that does not exist");
    f->add_option("--max", follow->max, "Stop after this many verdicts")
        ->check(base::whole_number(1));
    f->add_option("--idle-exit", follow->idle_exit,
                  "Stop when nothing arrived for this long, e.g. 10s (default: never)");
    f->add_option("--wait", follow->wait, "Longest wait for a notification before looking again")
        ->capture_default_str();
    f->add_option("--batch", follow->batch, "Verdicts per fetch")
        ->check(CLI::Range(1, 10000))
        ->capture_default_str();

    auto* group = add_group(*results, "group", "Consumer groups: add, drop, list");
    auto [a, add] = add_command<GroupArgs>(*group, "add",
                                           "Create a consumer group (kept as it is if it exists)",
                                           global, action, run_group_add);
    a->add_option("group", add->group, "Group name")->required();
    add_group_options(a, *add);
    a->add_option("--from", add->from, "latest (from now on) or earliest (everything kept)")
        ->capture_default_str();
    auto [d, drop] = add_command<GroupArgs>(
        *group, "drop", "Remove a consumer group and its cursor", global, action, run_group_drop);
    d->add_option("group", drop->group, "Group name")->required();
    add_group_options(d, *drop);
    auto [l, list] =
        add_command<GroupArgs>(*group, "list", "Consumer groups with their cursor and lag", global,
                               action, run_group_list);
    add_group_options(l, *list);
    l->add_flag("--json", list->json, "JSON");
}

}  // namespace aclaim::ctl
