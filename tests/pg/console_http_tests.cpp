// The console's HTTP side against a real database, as a browser or an attacker reaches it: sign-in
// throttling, what the drills page shows an operator scoped to some organizations, and the log
// lines a hostile sign-in name leaves (the built aclaim-console as a process).

#include <httplib.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/base/clock.hpp"
#include "common/store/assignment_store.hpp"
#include "console/operators.hpp"
#include "console/server.hpp"
#include "console/views.hpp"
#include "tests/pg/console_support.hpp"
#include "tests/support/process.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using Json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr const char* kPassword = "correct horse battery staple";
const base::SystemClock kSystem;

std::vector<store::NewJob> some_jobs(int n) {
    std::vector<store::NewJob> out;
    for (int i = 0; i < n; ++i) out.push_back({0, "review-" + std::to_string(i), 3});
    return out;
}

/// The console served in this process on 127.0.0.1:<any port>.
struct Console {
    Console(const std::string& dsn, const std::string& reports, const base::Clock& clock = kSystem)
        : views(dsn, reports), server(views, clock) {
        port = server.bind("127.0.0.1", 0);
        thread = std::thread([this] { server.run(); });
    }
    ~Console() {
        server.stop();
        thread.join();
    }
    console::Views views;
    console::ConsoleServer server;
    int port = 0;
    std::thread thread;
};

/// A browser's side of one operator: the session cookie and the CSRF token.
struct Browser {
    explicit Browser(int port) : client("127.0.0.1", port) { client.set_read_timeout(30s); }

    httplib::Result login(const std::string& name, const std::string& password) {
        auto res = client.Post("/api/login", Json{{"name", name}, {"password", password}}.dump(),
                               "application/json");
        if (res && res->status == 200) {
            const auto cookie = res->get_header_value("Set-Cookie");
            headers = {{"Cookie", cookie.substr(0, cookie.find(';'))}};
            auto session = client.Get("/api/session", headers);
            REQUIRE(session);
            headers.emplace("X-CSRF-Token", Json::parse(session->body)["csrf"].get<std::string>());
        }
        return res;
    }

    httplib::Result get(const std::string& path) { return client.Get(path.c_str(), headers); }
    httplib::Result post(const std::string& path) {
        return client.Post(path.c_str(), headers, "{}", "application/json");
    }

    httplib::Client client;
    httplib::Headers headers;
};

}  // namespace

TEST_CASE_METHOD(ConsoleDatabase,
                 "console sign-in: forty wrong passwords, then the right one is told to wait",
                 "[console]") {
    console::put_operator(*conn, {"alice", std::nullopt}, kPassword);
    console::put_operator(*conn, {"bob", std::nullopt}, kPassword);
    // Time stands still: every wait is still running when the next attempt comes.
    base::ManualClock clock(base::SystemClock().now());
    Console c(db.dsn(), "", clock);
    Browser guesser(c.port);

    int wrong = 0;
    int throttled = 0;
    for (int i = 0; i < 40; ++i) {
        const auto res = guesser.login("alice", "guess " + std::to_string(i));
        REQUIRE(res);
        if (res->status == 401) ++wrong;
        if (res->status == 429) {
            ++throttled;
            CHECK(std::stoi(res->get_header_value("Retry-After")) >= 1);
        }
    }
    CHECK(wrong == 5);
    CHECK(throttled == 35);
    const auto right = guesser.login("alice", kPassword);
    REQUIRE(right);
    CHECK(right->status == 429);
    CHECK(right->has_header("Retry-After"));
    CHECK(right->get_header_value("Set-Cookie").empty());

    // Another operator from the same address is not held up by guesses at alice's name.
    Browser other(c.port);
    const auto bob = other.login("bob", kPassword);
    REQUIRE(bob);
    CHECK(bob->status == 200);

    SECTION("a spray over many names from one address stops too") {
        int sprayed = 0;
        int stopped = 0;
        for (int i = 0; i < 25; ++i) {
            const auto res = guesser.login("name-" + std::to_string(i), "guess");
            REQUIRE(res);
            (res->status == 429 ? stopped : sprayed)++;
        }
        // alice's five and these fifteen: the address's twenty free failures.
        CHECK(sprayed == 15);
        CHECK(stopped == 10);
    }
}

TEST_CASE("console sign-in: the password hash holds no lock another operator's page needs",
          "[console]") {
    TestDatabase db;
    auto conn = db.connect();
    console::put_operator(*conn, {"alice", std::nullopt}, kPassword);
    console::Views views(db.dsn(), "");
    std::promise<void> hashing;
    std::promise<void> finish;
    std::shared_future<void> finish_hash = finish.get_future().share();
    // A password check that stays inside the "hash" until the test lets it out.
    views.set_password_check([&](const std::string&, const std::string&) {
        hashing.set_value();
        finish_hash.wait();
        return false;
    });
    auto login = std::async(std::launch::async, [&] {
        return views.authenticate({"alice", "a guess"});
    });
    hashing.get_future().wait();
    const console::Operator all{"all", std::nullopt};
    auto page = std::async(std::launch::async,
                           [&] { return views.overview(all, base::SystemClock().now()); });
    const bool answered = page.wait_for(20s) == std::future_status::ready;
    finish.set_value();
    CHECK(answered);
    CHECK_FALSE(login.get());
    CHECK(page.get()["organizations"].is_array());
}

TEST_CASE_METHOD(ConsoleStore,
                 "console drills: a scoped operator sees of the check only its organizations' "
                 "violations",
                 "[console]") {
    const auto org1 = store.enqueue(1, some_jobs(2), now);
    const auto org2 = store.enqueue(2, some_jobs(2), now);
    {
        // A completion in the audit log of a job never claimed: a violation in each organization,
        // whose evidence names the worker.
        pqxx::work t(*conn);
        for (const auto& [id, org, worker] :
             {std::tuple{org1[0], 1, "w1-secret"}, std::tuple{org2[0], 2, "w2-own"}}) {
            t.exec_params(
                "INSERT INTO job_events (job_id, org_id, generation, kind, worker, at) "
                "VALUES ($1, $2, 1, 'completed', $3, now())",
                id, org, worker);
        }
        t.commit();
    }
    console::put_operator(*conn, {"all", std::nullopt}, kPassword);
    console::put_operator(*conn, {"two", std::vector<store::OrgId>{2}}, kPassword);
    const auto reports = std::filesystem::temp_directory_path() /
                         ("aclaim-console-reports-" + std::to_string(::getpid()));
    std::filesystem::create_directories(reports / "bench");
    std::ofstream(reports / "bench" / "report.json") << R"({"org_id": 1, "worker": "w1-secret"})";
    Console c(db.dsn(), reports.string());

    Browser all(c.port);
    REQUIRE(all.login("all", kPassword)->status == 200);
    const auto ran = all.post("/api/check");
    REQUIRE(ran);
    REQUIRE(ran->status == 200);
    std::set<store::JobId> everywhere;
    const auto checked = Json::parse(ran->body);
    for (const auto& v : checked["violations"]) everywhere.insert(v["job_id"].get<store::JobId>());
    // The setup holds: the system-wide check names both organizations' jobs.
    REQUIRE(everywhere.count(org1[0]) == 1);
    REQUIRE(everywhere.count(org2[0]) == 1);
    const auto full = Json::parse(all.get("/api/drills")->body);
    CHECK(full["last_check"]["jobs"] == 4);
    CHECK(full["reports"].size() == 1);
    CHECK(all.get("/reports/bench/report.json")->status == 200);

    Browser two(c.port);
    REQUIRE(two.login("two", kPassword)->status == 200);
    const auto res = two.get("/api/drills");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    const auto seen = Json::parse(res->body);
    const auto& check = seen["last_check"];
    REQUIRE(check.is_object());
    CHECK_FALSE(check.contains("jobs"));
    CHECK_FALSE(check.contains("events"));
    CHECK_FALSE(check.contains("states"));
    CHECK(check["ok"] == false);
    REQUIRE(check["violations"].is_array());
    REQUIRE_FALSE(check["violations"].empty());
    for (const auto& v : check["violations"]) CHECK(v["job_id"] == org2[0]);
    CHECK(seen["reports"].empty());
    CHECK(res->body.find("w1-secret") == std::string::npos);
    CHECK(two.get("/reports/bench/report.json")->status == 404);
    std::filesystem::remove_all(reports);
}

/// The built aclaim-console serving `db` on 127.0.0.1:<any port>, its log in a file of its own.
struct ConsoleProcess {
    explicit ConsoleProcess(const TestDatabase& db)
        : log(std::filesystem::temp_directory_path() /
              ("aclaim-console-log-" + std::to_string(::getpid()) + ".txt")),
          process({bin("aclaim-console"), "serve", "--dsn", db.dsn(), "--listen", "127.0.0.1:0"},
                  {}, log.string()) {
        REQUIRE(eventually(
            [&] {
                std::smatch m;
                const auto text = read_log();
                if (!std::regex_search(text, m,
                                       std::regex(R"(console: http://127\.0\.0\.1:(\d+)/)")))
                    return false;
                port = std::stoi(m[1]);
                return true;
            },
            30000ms));
    }
    ~ConsoleProcess() { std::filesystem::remove(log); }
    ConsoleProcess(const ConsoleProcess&) = delete;
    ConsoleProcess& operator=(const ConsoleProcess&) = delete;

    std::string read_log() const {
        std::ifstream in(log);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    std::vector<std::string> log_lines() const {
        std::istringstream in(read_log());
        std::vector<std::string> out;
        for (std::string line; std::getline(in, line);) out.push_back(line);
        return out;
    }
    /// Stops the console as a unit manager would and waits for it.
    void stop() {
        process.signal(SIGTERM);
        REQUIRE(process.wait_for(20000ms));
    }

    std::filesystem::path log;
    Process process;
    int port = 0;
};

TEST_CASE("console log: a sign-in name with a newline cannot forge a line", "[console]") {
    TestDatabase db;
    ConsoleProcess console(db);
    const int port = console.port;
    const std::string forged =
        "2031-01-01T00:00:00.000 info [aclaim-console] console: root signed in";
    Browser b(port);
    const auto res = b.login("mallory\n" + forged + "\r\n\x1b[2K", "guess");
    REQUIRE(res);
    CHECK(res->status == 401);
    console.stop();

    INFO(console.read_log());
    int failed_lines = 0;
    for (const auto& line : console.log_lines()) {
        CHECK(line.rfind("2031-01-01", 0) == std::string::npos);
        CHECK(line.find('\x1b') == std::string::npos);
        if (line.find("failed sign-in as 'mallory\\n2031-01-01") != std::string::npos)
            ++failed_lines;
    }
    CHECK(failed_lines == 1);
}

TEST_CASE("console failure: a 500 tells the browser nothing of the server's internals",
          "[console]") {
    TestDatabase db;
    // Serving, so migrated: the operator can be put in.
    ConsoleProcess console(db);
    console::init_crypto();
    auto conn = db.connect();
    console::put_operator(*conn, {"alice", std::nullopt}, kPassword);
    Browser b(console.port);
    REQUIRE(b.login("alice", kPassword)->status == 200);
    REQUIRE(b.get("/api/jobs")->status == 200);
    // A table gone from under the console: the database's error names it, the statement and
    // where it failed, on several lines.
    {
        pqxx::work rename(*conn);
        rename.exec("ALTER TABLE jobs RENAME TO jobs_moved_away");
        rename.commit();
    }
    const auto res = b.get("/api/jobs");
    REQUIRE(res);
    CHECK(res->status == 500);
    INFO(res->body);
    CHECK(Json::parse(res->body) ==
          Json{{"error", "the console failed to answer; its log says why"}});
    for (const char* internal : {"jobs", "relation", "ERROR", "LINE", "SELECT", "pqxx"})
        CHECK(res->body.find(internal) == std::string::npos);
    console.stop();

    // The detail is in the log, on one line of its own, escaped.
    INFO(console.read_log());
    int detailed = 0;
    for (const auto& line : console.log_lines()) {
        if (line.find("console: GET /api/jobs: ") == std::string::npos) continue;
        ++detailed;
        CHECK(line.find("\"jobs\" does not exist") != std::string::npos);
        CHECK(line.find("\\n") != std::string::npos);
    }
    CHECK(detailed == 1);
}
