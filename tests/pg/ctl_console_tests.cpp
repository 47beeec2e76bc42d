// The operator's console as an operator runs it: the built aclaimctl against a real database,
// checked by its output, its exit code and the rows it leaves.

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/base/clock.hpp"
#include "common/ops/checker.hpp"
#include "common/ops/operator_sql.hpp"
#include "common/store/assignment_store.hpp"
#include "tests/pg/ctl_run.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using Json = nlohmann::json;

namespace {

constexpr base::Duration kHour = 3600 * base::kSeconds;

long count(pqxx::connection& c, const std::string& sql) {
    pqxx::read_transaction t(c);
    return t.exec1(sql)[0].as<long>();
}

/// "1, 2, 3": the ids of the jobs `where` selects, in order.
std::string ids_of(pqxx::connection& c, const std::string& where) {
    pqxx::read_transaction t(c);
    return t.exec1("SELECT string_agg(id::text, ', ' ORDER BY id) FROM jobs WHERE " + where)[0]
        .as<std::string>();
}

std::vector<std::string> payloads_of(pqxx::connection& c, store::OrgId org) {
    pqxx::read_transaction t(c);
    std::vector<std::string> out;
    for (const auto& r :
         t.exec_params("SELECT payload FROM jobs WHERE org_id = $1 ORDER BY id", org)) {
        out.push_back(r[0].as<std::string>());
    }
    return out;
}

std::vector<store::NewJob> jobs(int n, const std::string& prefix = "job") {
    std::vector<store::NewJob> out;
    for (int i = 0; i < n; ++i) out.push_back({0, prefix + "-" + std::to_string(i), 3});
    return out;
}

/// The subcommand names a --help text lists under "Subcommands:", in order.
std::vector<std::string> subcommands_in(const std::string& help) {
    std::vector<std::string> names;
    std::istringstream lines(help);
    bool in_list = false;
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("Subcommands:", 0) == 0) {
            in_list = true;
            continue;
        }
        if (!in_list) continue;
        if (line.empty() || line[0] != ' ') break;
        const auto from = line.find_first_not_of(' ');
        // A description continued on the next line is indented far deeper than a name.
        if (from != 2) continue;
        names.push_back(line.substr(from, line.find(' ', from) - from));
    }
    return names;
}

}  // namespace

TEST_CASE("aclaimctl: every command answers --help", "[ctl]") {
    // The commands come from the CLI itself, each level's help naming the next, so that a
    // subcommand added later is covered without anyone listing it here.
    std::vector<std::vector<std::string>> pending{{}};
    std::size_t answered = 0;
    std::vector<std::string> top;
    while (!pending.empty()) {
        auto command = pending.back();
        pending.pop_back();
        auto args = command;
        args.push_back("--help");
        const auto r = run_ctl("", args);
        std::string name = "aclaimctl";
        for (const auto& part : command) name += " " + part;
        INFO(name << ": " << r.err);
        CHECK(r.code == 0);
        CHECK(r.out.find("Usage:") != std::string::npos);
        ++answered;
        const auto children = subcommands_in(r.out);
        if (command.empty()) top = children;
        for (const auto& child : children) {
            auto next = command;
            next.push_back(child);
            pending.push_back(next);
        }
    }
    // The parse itself is checked: the top level names every command family, and the walk went
    // below it (jobs list, quarantine, keys, queue, results, retention ...).
    INFO("top-level: " << top.size() << " subcommands, " << answered << " helps read");
    CHECK(top.size() >= 17);
    for (const char* known : {"migrate", "enqueue", "status", "check", "keys", "queue", "results",
                              "producers", "retention", "cancel", "retry"}) {
        CHECK(std::find(top.begin(), top.end(), known) != top.end());
    }
    CHECK(answered > top.size() + 1);
    const auto list_help = run_ctl("", {"jobs", "list", "--help"}).out;
    for (const char* flag :
         {"--org", "--state", "--assignee", "--older-than", "--limit", "--after-id"}) {
        CHECK(list_help.find(flag) != std::string::npos);
    }
}

TEST_CASE("aclaimctl enqueue: arguments, CSV and JSON lines, in batches", "[ctl]") {
    TestDatabase db;
    auto conn = db.connect();

    auto r = run_ctl_ok(db.dsn(), {"enqueue", "--org", "1", "first", "second, with a comma"});
    // The ids are printed, so that the next command can name a job without listing first.
    CHECK(r.out == "enqueued 2 jobs for organization 1 in 1 transaction: jobs " +
                       ids_of(*conn, "org_id = 1") + "\n");
    CHECK(payloads_of(*conn, 1) == std::vector<std::string>{"first", "second, with a comma"});

    const std::string csv =
        "org,priority,payload,max_attempts\n"
        "2,5,plain,\n"
        "3,0,\"quoted, with \"\"quotes\"\"\nand a second line\",7\n"
        "2,-1,last,1\r\n";
    r = run_ctl_ok(db.dsn(), {"enqueue", "--csv", "-", "--batch", "2"}, csv);
    CHECK(r.out ==
          "enqueued 3 jobs (organization 2: 2, organization 3: 1) in 3 transactions: "
          "jobs " +
              ids_of(*conn, "org_id IN (2, 3)") + "\n");
    CHECK(payloads_of(*conn, 2) == std::vector<std::string>{"plain", "last"});
    CHECK(payloads_of(*conn, 3) ==
          std::vector<std::string>{"quoted, with \"quotes\"\nand a second line"});
    CHECK(count(*conn, "SELECT max_attempts FROM jobs WHERE payload = 'plain'") == 3);
    CHECK(count(*conn, "SELECT priority FROM jobs WHERE payload = 'plain'") == 5);
    CHECK(count(*conn, "SELECT max_attempts FROM jobs WHERE org_id = 3") == 7);

    const std::string lines =
        "{\"org\": 4, \"priority\": 2, \"payload\": \"a\"}\n"
        "\n"
        "{\"payload\": {\"doc\": 17}}\n";
    r = run_ctl_ok(db.dsn(), {"enqueue", "--jsonl", "-", "--org", "4"}, lines);
    CHECK(payloads_of(*conn, 4) == std::vector<std::string>{"a", "{\"doc\":17}"});
    // Every enqueued job has its audit event.
    CHECK(count(*conn, "SELECT count(*) FROM job_events WHERE kind = 'enqueued'") == 7);
}

TEST_CASE("aclaimctl enqueue: a bad record names its line and nothing is written", "[ctl]") {
    TestDatabase db;
    auto conn = db.connect();
    struct Case {
        std::string flag, input, expect;
    };
    const std::vector<Case> cases{
        {"--csv", "org,payload\n1,a\n1,b\nx,c\n", "<stdin>:4: org 'x' is not an organization id"},
        {"--csv", "org,payload,colour\n1,a,red\n", "unknown column 'colour'"},
        {"--csv", "org,payload\n1,a\n2\n", "<stdin>:3: has 1 fields, the header has 2"},
        {"--csv", "priority,payload\n1,a\n", "no org column"},
        {"--csv", "org,payload\n1,\"never closed\n", "<stdin>:2: a quoted field is never closed"},
        {"--jsonl", "{\"org\": 1, \"payload\": \"a\"}\n{\"org\": 1}\n", "<stdin>:2: no payload"},
        {"--jsonl", "{\"org\": 1, \"payload\": \"a\", \"prio\": 3}\n", "unknown field 'prio'"},
        {"--jsonl", "{\"org\": -1, \"payload\": \"a\"}\n",
         "<stdin>:1: org '-1' is not an organization id"},
        {"--jsonl", "not json\n", "<stdin>:1: not JSON"},
    };
    for (const auto& c : cases) {
        const auto r = run_ctl(db.dsn(), {"enqueue", c.flag, "-"}, c.input);
        INFO(c.input << " -> " << r.err);
        CHECK(r.code == 2);
        CHECK(r.err.find(c.expect) != std::string::npos);
    }
    CHECK(count(*conn, "SELECT count(*) FROM jobs") == 0);

    const auto missing = run_ctl(db.dsn(), {"enqueue", "--csv", "/nonexistent/jobs.csv"});
    CHECK(missing.code == 2);
    CHECK(missing.err.find("cannot open /nonexistent/jobs.csv") != std::string::npos);
    const auto no_org = run_ctl(db.dsn(), {"enqueue", "--count", "3"});
    CHECK(no_org.code == 2);
    CHECK(no_org.err.find("--org is required") != std::string::npos);
}

TEST_CASE_METHOD(StoreAtNow, "aclaimctl status: states, leases, oldest pending and the last minute",
                 "[ctl]") {
    // Organization 1: four jobs enqueued ten minutes ago and two now. The claims below take the
    // oldest first, so one old job stays pending.
    store.enqueue(1, jobs(4, "old"), now - 600 * base::kSeconds);
    store.enqueue(1, jobs(2, "new"), now);
    // One live lease, one that ran out five seconds ago, one completed just now.
    REQUIRE(store.claim(1, {"w-live", 1}, kHour, now).leases.size() == 1);
    REQUIRE(store.claim(1, {"w-expired", 1}, 5 * base::kSeconds, now - 10 * base::kSeconds)
                .leases.size() == 1);
    const auto done = store.claim(1, {"w-done", 1}, kHour, now).leases.at(0);
    REQUIRE(store.complete({1, done.job_id, done.generation, "w-done", "r"}, now).accepted());
    // Organization 2: one job, set aside by the recovery tool, and one waiting for it.
    const auto q = store.enqueue(2, jobs(1), now).at(0);
    {
        auto dependent = jobs(1, "after");
        dependent[0].depends_on = {q};
        REQUIRE(store.enqueue(2, dependent, now).size() == 1);
    }
    {
        pqxx::work t(*conn);
        t.exec_params(
            "UPDATE jobs SET state = 'quarantined', quarantined_from = 'pending', "
            "quarantine_reason = 'test' WHERE id = $1",
            q);
        t.commit();
    }

    auto r = run_ctl_ok(db.dsn(), {"status", "--json"});
    const auto all = Json::parse(r.out);
    const auto& o1 = all["organizations"]["1"];
    CHECK(o1["pending"] == 3);
    CHECK(o1["assigned"] == 2);
    CHECK(o1["live_leases"] == 1);
    CHECK(o1["expired_leases"] == 1);
    CHECK(o1["completed"] == 1);
    CHECK(o1["completed_last_minute"] == 1);
    CHECK(o1["quarantined"] == 0);
    // The oldest pending job is the fourth old one, enqueued ten minutes before `now`.
    CHECK(o1["oldest_pending_age_ms"].get<long>() >= 600'000);
    CHECK(o1["oldest_pending_age_ms"].get<long>() < 660'000);
    const auto& o2 = all["organizations"]["2"];
    CHECK(o2["quarantined"] == 1);
    CHECK(o2["waiting"] == 1);
    CHECK(o1["waiting"] == 0);
    CHECK(o2["oldest_pending_age_ms"].is_null());

    r = run_ctl(db.dsn(), {"status", "--org", "2", "--json"});
    REQUIRE(r.code == 0);
    CHECK(Json::parse(r.out)["organizations"].size() == 1);

    r = run_ctl(db.dsn(), {"status"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("expired") != std::string::npos);
    CHECK(r.out.find("waiting") != std::string::npos);
    CHECK(r.out.find("\ntotal ") != std::string::npos);
    // The queue list counts the waiting job in its own column, beside parked ones.
    r = run_ctl(db.dsn(), {"queue", "list", "--org", "2"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find(" parked waiting ") != std::string::npos);
    r = run_ctl(db.dsn(), {"jobs", "list", "--state", "resting"});
    CHECK(r.code == 2);
    CHECK(r.err.find("parked, waiting") != std::string::npos);

    // Watching without a terminal: one plain block per round, bounded by --count.
    r = run_ctl(db.dsn(), {"status", "--watch", "--count", "3", "--interval", "100ms"});
    REQUIRE(r.code == 0);
    std::size_t rounds = 0;
    for (auto at = r.out.find("aclaim status at"); at != std::string::npos;
         at = r.out.find("aclaim status at", at + 1)) {
        ++rounds;
    }
    CHECK(rounds == 3);
    CHECK(r.out.find("\033[") == std::string::npos);
    r = run_ctl(db.dsn(), {"status", "--watch", "--json", "--count", "2", "--interval", "100ms"});
    REQUIRE(r.code == 0);
    std::istringstream lines(r.out);
    std::string line;
    int objects = 0;
    while (std::getline(lines, line)) {
        CHECK(Json::parse(line)["organizations"]["1"]["pending"] == 3);
        ++objects;
    }
    CHECK(objects == 2);

    CHECK(run_ctl(db.dsn(), {"status", "--count", "2"}).code == 2);
    CHECK(run_ctl(db.dsn(), {"status", "--watch", "--interval", "soon"}).code == 2);
}

TEST_CASE("aclaimctl status: per queue and in total, the last minute's rate and the time left",
          "[ctl]") {
    TestDatabase db;
    store::AssignmentStore store(db.dsn());
    const auto now = base::SystemClock().now();
    auto in_queue = [](int n, const std::string& queue) {
        auto out = jobs(n, queue);
        for (auto& j : out) j.queue = queue;
        return out;
    };
    // Queue "intake": 11 jobs, 3 completed within the last minute and 2 five minutes ago (those
    // are no part of the rate), 6 left. Queue "archive": 4 pending, nothing completed.
    store.enqueue(1, in_queue(11, "intake"), now - 600 * base::kSeconds);
    store.enqueue(1, in_queue(4, "archive"), now - 600 * base::kSeconds);
    auto complete = [&](int n, base::Instant at) {
        const auto leases = store.claim(1, {"w", n, {"intake"}}, kHour, at).leases;
        REQUIRE(leases.size() == static_cast<std::size_t>(n));
        for (const auto& l : leases) {
            REQUIRE(store.complete({1, l.job_id, l.generation, "w", "r"}, at).accepted());
        }
    };
    complete(2, now - 300 * base::kSeconds);
    complete(3, now - 5 * base::kSeconds);

    auto r = run_ctl(db.dsn(), {"status", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto all = Json::parse(r.out);
    const auto& queues = all["organizations"]["1"]["queues"];
    CHECK(queues["intake"]["pending"] == 6);
    CHECK(queues["intake"]["completed_last_minute"] == 3);
    CHECK(queues["intake"]["rate_per_s"].get<double>() == Approx(0.05));
    CHECK(queues["intake"]["time_left_ms"] == 120'000);
    CHECK(queues["archive"]["pending"] == 4);
    CHECK(queues["archive"]["completed_last_minute"] == 0);
    CHECK(queues["archive"]["time_left_ms"].is_null());
    CHECK(all["organizations"]["1"]["drain"]["time_left_ms"] == 200'000);
    CHECK(all["drain"]["pending"] == 10);
    CHECK(all["drain"]["completed_last_minute"] == 3);

    r = run_ctl(db.dsn(), {"status"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("time-left") != std::string::npos);
    CHECK(r.out.find("intake                           6         3     0.05      2m00s") !=
          std::string::npos);
    CHECK(r.out.find("archive                          4         0     0.00") != std::string::npos);
    CHECK(r.out.find("\u2014") != std::string::npos);
    r = run_ctl(db.dsn(), {"status", "--watch", "--count", "1", "--interval", "100ms"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("time-left") != std::string::npos);
}

TEST_CASE("aclaimctl status: the rate's statement reads an index, not the table", "[ctl]") {
    TestDatabase db;
    auto conn = db.connect();
    {
        // Enough finished jobs in two queues that a sequential scan would be the planner's
        // choice for any predicate it could not take to an index.
        pqxx::work t(*conn);
        t.exec(
            "INSERT INTO jobs (org_id, queue, payload, state, enqueued_at, run_at, completed_at, "
            "generation, attempts, assignee, result_ref) "
            "SELECT 1 + i % 3, 'q' || (i % 2), 'p', 'completed', now() - interval '1 day', "
            "now() - interval '1 day', now() - (i || ' seconds')::interval, 1, 1, 'w', 'r' "
            "FROM generate_series(1, 50000) i");
        t.exec("ANALYZE jobs");
        t.commit();
    }
    pqxx::nontransaction t(*conn);
    t.exec("PREPARE rates(bigint, bigint[]) AS " + ops::sql::kQueueCompletions.text);
    std::string plan;
    for (const auto& row : t.exec("EXPLAIN EXECUTE rates(aclaim_us(now()), '{1,2,3}')")) {
        plan += row[0].as<std::string>() + "\n";
    }
    INFO(plan);
    CHECK(plan.find("Seq Scan") == std::string::npos);
    CHECK(plan.find("jobs_finished") != std::string::npos);
    // Each organization's two queues completed a job about every six seconds in the last minute.
    const auto rows = t.exec("EXECUTE rates(aclaim_us(now()), '{1,2,3}')");
    CHECK(rows.size() == 6);
}

TEST_CASE("aclaimctl status: an unreachable database is named and exits 3", "[ctl]") {
    const int port = free_port();
    const auto r =
        run_ctl("postgresql://127.0.0.1:" + std::to_string(port) + "/nothing", {"status"});
    CHECK(r.code == 3);
    CHECK(r.err.find("cannot reach the database") != std::string::npos);
}

TEST_CASE("aclaimctl inspect: the row and its whole history", "[ctl]") {
    TestDatabase db;
    store::AssignmentStore store(db.dsn());
    const auto now = base::SystemClock().now();
    const auto id = store.enqueue(7, jobs(1), now - 30 * base::kSeconds).at(0);
    const auto first =
        store.claim(7, {"w1", 1}, base::kSeconds, now - 20 * base::kSeconds).leases.at(0);
    REQUIRE(store.reclaim_expired(now - 10 * base::kSeconds, 10).size() == 1);
    const auto second = store.claim(7, {"w2", 1}, kHour, now).leases.at(0);
    REQUIRE(store.complete({7, id, second.generation, "w2", "review:w2"}, now).accepted());
    CHECK_FALSE(store.complete({7, id, first.generation, "w1", "review:w1"}, now).accepted());

    auto r = run_ctl_ok(db.dsn(), {"inspect", std::to_string(id), "--json"});
    const auto j = Json::parse(r.out);
    CHECK(j["job"]["state"] == "completed");
    CHECK(j["job"]["generation"] == 2);
    CHECK(j["job"]["result_ref"] == "review:w2");
    std::vector<std::string> kinds;
    for (const auto& e : j["events"]) kinds.push_back(e["kind"]);
    CHECK(kinds == std::vector<std::string>{"enqueued", "claimed", "reclaimed", "claimed",
                                            "completed", "rejected"});
    CHECK(j["events"][5]["worker"] == "w1");

    r = run_ctl(db.dsn(), {"inspect", std::to_string(id)});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("history (6 events)") != std::string::npos);
    CHECK(r.out.find("last held by") != std::string::npos);
    CHECK(r.out.find("review:w2") != std::string::npos);

    r = run_ctl(db.dsn(), {"inspect", "999999"});
    CHECK(r.code == 2);
    CHECK(r.err.find("job 999999 does not exist") != std::string::npos);
    CHECK(run_ctl(db.dsn(), {"inspect", "abc"}).code != 0);
}

TEST_CASE("aclaimctl inspect: what a job depends on, what depends on it, whom it excludes",
          "[ctl]") {
    TestDatabase db;
    store::AssignmentStore store(db.dsn());
    const auto now = base::SystemClock().now();
    const auto a = store.enqueue(4, jobs(1, "intake"), now).at(0);
    auto second = jobs(1, "inspection");
    second[0].depends_on = {a};
    second[0].exclude_keys = {"w-trainee"};
    second[0].exclude_completers_of = {a};
    const auto b = store.enqueue(4, second, now).at(0);
    auto third = jobs(1, "approval");
    third[0].depends_on = {b};
    third[0].on_failure = store::DependencyPolicy::Run;
    const auto c = store.enqueue(4, third, now).at(0);

    auto r = run_ctl(db.dsn(), {"inspect", std::to_string(b), "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = Json::parse(r.out);
    CHECK(j["depends_on"] == Json::parse(R"([{"job": )" + std::to_string(a) +
                                         R"(, "policy": "cancel", "resolved": null,
                                            "state": "pending"}])"));
    CHECK(j["dependents"] == Json::parse(R"([{"job": )" + std::to_string(c) +
                                         R"(, "policy": "run", "resolved": null,
                                            "state": "waiting"}])"));
    CHECK(j["more_dependents"] == false);
    CHECK(j["more_depends_on"] == false);
    CHECK(j["exclusions"]["reviewers"] == Json::parse(R"(["w-trainee"])"));
    CHECK(j["exclusions"]["completers_of"] ==
          Json::parse(R"([{"job": )" + std::to_string(a) +
                      R"(, "state": "pending", "completer": null}])"));

    r = run_ctl(db.dsn(), {"inspect", std::to_string(b)});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("depends on        #" + std::to_string(a) + " pending (cancel, not ended)") !=
          std::string::npos);
    CHECK(r.out.find("depended on by    #" + std::to_string(c) + " waiting (run, not ended)") !=
          std::string::npos);
    CHECK(r.out.find("excludes          reviewer w-trainee") != std::string::npos);
    CHECK(r.out.find("excludes          the completer of #" + std::to_string(a) + " (pending)") !=
          std::string::npos);
    // A job tied to nothing shows empty lists, not missing keys.
    r = run_ctl(db.dsn(), {"inspect", std::to_string(c), "--json"});
    REQUIRE(r.code == 0);
    CHECK(Json::parse(r.out)["exclusions"]["reviewers"].empty());
    CHECK(Json::parse(r.out)["dependents"].empty());
}

TEST_CASE("aclaimctl jobs list: filters and pages that add up to the whole", "[ctl]") {
    TestDatabase db;
    store::AssignmentStore store(db.dsn());
    const auto now = base::SystemClock().now();
    store.enqueue(1, jobs(3, "old"), now - 2 * kHour);
    store.enqueue(1, jobs(4, "new"), now);
    store.enqueue(2, jobs(2, "other"), now);
    const auto held = store.claim(1, {"w1", 2}, kHour, now).leases;
    REQUIRE(held.size() == 2);

    auto list = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"jobs", "list", "--json"});
        const auto r = run_ctl_ok(db.dsn(), args);
        return Json::parse(r.out);
    };
    // Pages of three over organization 1 visit its seven jobs once each, in id order.
    std::vector<long> seen;
    long after = 0;
    for (int page = 0; page < 5; ++page) {
        const auto j = list({"--org", "1", "--limit", "3", "--after-id", std::to_string(after)});
        for (const auto& job : j["jobs"]) {
            CHECK(job["org_id"] == 1);
            seen.push_back(job["id"]);
        }
        if (j["next_after_id"].is_null()) break;
        after = j["next_after_id"];
    }
    CHECK(seen.size() == 7);
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());

    const auto assigned = list({"--state", "assigned", "--assignee", "w1"});
    REQUIRE(assigned["jobs"].size() == 2);
    CHECK(assigned["jobs"][0]["id"] == held[0].job_id);
    CHECK(list({"--state", "assigned", "--assignee", "w2"})["jobs"].empty());
    const auto old = list({"--older-than", "1h"});
    CHECK(old["jobs"].size() == 3);
    for (const auto& job : old["jobs"]) {
        CHECK(job["payload"].get<std::string>().rfind("old-", 0) == 0);
    }
    CHECK(list({"--org", "2", "--state", "pending"})["jobs"].size() == 2);

    const auto text = run_ctl(db.dsn(), {"jobs", "list", "--org", "1", "--limit", "2"});
    REQUIRE(text.code == 0);
    CHECK(text.out.find("more: add --after-id") != std::string::npos);

    auto bad = run_ctl(db.dsn(), {"jobs", "list", "--state", "done"});
    CHECK(bad.code == 2);
    CHECK(bad.err.find("--state 'done' is not a state") != std::string::npos);
    bad = run_ctl(db.dsn(), {"jobs", "list", "--older-than", "10"});
    CHECK(bad.code == 2);
    CHECK(bad.err.find("--older-than '10' is not a duration") != std::string::npos);
}

TEST_CASE_METHOD(StoreAtNow,
                 "aclaimctl release and fail: a stuck assignment taken back, audited and fenced",
                 "[ctl]") {
    const auto ids = store.enqueue(1, jobs(3), now);
    const auto stuck = store.claim(1, {"w-stuck", 1}, kHour, now).leases.at(0);

    // A generation that is not the current one is refused and changes nothing.
    const auto before = job_snapshot(*conn, stuck.job_id);
    auto r = run_ctl(db.dsn(), {"release", std::to_string(stuck.job_id), "--generation", "9"});
    CHECK(r.code == 2);
    CHECK(r.err.find("not the generation 9 given") != std::string::npos);
    CHECK(job_snapshot(*conn, stuck.job_id) == before);

    r = run_ctl_ok(db.dsn(),
                   {"release", std::to_string(stuck.job_id), "--reason", "worker hung", "--by",
                    "ops:alice", "--generation", std::to_string(stuck.generation)});
    CHECK(r.out.find("taken from w-stuck at generation 1") != std::string::npos);
    CHECK(job_state(*conn, stuck.job_id) == "pending");
    CHECK(count(*conn, "SELECT attempts FROM jobs WHERE id = " + std::to_string(stuck.job_id)) ==
          0);
    {
        pqxx::read_transaction t(*conn);
        const auto e = t.exec_params1(
            "SELECT worker, detail, generation FROM job_events WHERE job_id = $1 AND kind = "
            "'released'",
            stuck.job_id);
        CHECK(e[0].as<std::string>() == "ops:alice");
        CHECK(e[1].as<std::string>().find("held by w-stuck: worker hung") != std::string::npos);
        CHECK(e[2].as<long>() == stuck.generation);
    }
    // The worker that lost it cannot finish it, and the next claim outranks it.
    const auto late = store.complete({1, stuck.job_id, stuck.generation, "w-stuck", "late"}, now);
    CHECK_FALSE(late.accepted());
    const auto again = store.claim(1, {"w2", 1}, kHour, now).leases.at(0);
    CHECK(again.job_id == stuck.job_id);
    CHECK(again.generation == stuck.generation + 1);

    // fail needs a reason, then fails the holder's job for good.
    r = run_ctl(db.dsn(), {"fail", std::to_string(again.job_id)});
    CHECK(r.code != 0);
    CHECK(r.err.find("--reason") != std::string::npos);
    r = run_ctl_ok(db.dsn(), {"fail", std::to_string(again.job_id), "--reason", "poison payload"});
    CHECK(job_state(*conn, again.job_id) == "failed");
    CHECK(event_count(*conn, again.job_id, "failed") == 1);
    {
        pqxx::read_transaction t(*conn);
        CHECK(t.exec_params1("SELECT last_error FROM jobs WHERE id = $1", again.job_id)[0]
                  .as<std::string>()
                  .find("poison payload") != std::string::npos);
    }

    // Neither acts on a job that nothing holds.
    r = run_ctl(db.dsn(), {"release", std::to_string(again.job_id)});
    CHECK(r.code == 2);
    CHECK(r.err.find("is failed, not assigned") != std::string::npos);
    r = run_ctl(db.dsn(), {"fail", std::to_string(ids[2]), "--reason", "x"});
    CHECK(r.code == 2);
    CHECK(r.err.find("is pending, not assigned") != std::string::npos);
    CHECK(run_ctl(db.dsn(), {"release", "424242"}).err.find("does not exist") != std::string::npos);

    // The history still proves every invariant.
    const auto report = ops::check(ops::load_history(*conn));
    for (const auto& v : report.violations) FAIL_CHECK(v.evidence);
    CHECK(report.ok());
}
