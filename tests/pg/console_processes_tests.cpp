// The built aclaim-console as real processes on a real database, as operators run it: several
// consoles (behind a load balancer, or one restarted) share the sessions; a taken port is refused
// at start with the address named; every database call has a deadline.

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>
#include <vector>

#include "console/operators.hpp"
#include "tests/pg/console_support.hpp"
#include "tests/support/process.hpp"
#include "tests/support/silent_listener.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using Json = nlohmann::json;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr const char* kPassword = "correct horse battery staple";

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), {}};
}

/// Tells the consoles' log files apart.
std::atomic<int> next_log{0};

/// One aclaim-console serve process, its output in a file of its own.
class ConsoleProcess {
  public:
    ConsoleProcess(const std::string& dsn, const std::string& listen,
                   const std::map<std::string, std::string>& env = {})
        : log_(std::filesystem::temp_directory_path() /
               ("aclaim-console-" + std::to_string(::getpid()) + "-" + std::to_string(next_log++) +
                ".txt")),
          process_({bin("aclaim-console"), "serve", "--dsn", dsn, "--listen", listen}, env,
                   log_.string()) {}
    ~ConsoleProcess() { std::filesystem::remove(log_); }
    ConsoleProcess(const ConsoleProcess&) = delete;
    ConsoleProcess& operator=(const ConsoleProcess&) = delete;

    /// The port from the line the console prints once it serves; 0 if it never did.
    int port() {
        int port = 0;
        eventually(
            [&] {
                std::smatch m;
                const auto text = log();
                if (std::regex_search(text, m,
                                      std::regex(R"(console: http://127\.0\.0\.1:(\d+)/)")))
                    port = std::stoi(m[1]);
                return port != 0 || !process_.running();
            },
            30000ms);
        return port;
    }
    std::string log() const { return read_file(log_); }
    Process& process() { return process_; }

  private:
    std::filesystem::path log_;
    Process process_;
};

/// A browser's side of one operator against one console: the cookie (which may come from a
/// sign-in at another console) and the CSRF token.
struct Browser {
    explicit Browser(int port) : client("127.0.0.1", port) { client.set_read_timeout(30s); }

    int login(const std::string& name, const std::string& password) {
        auto res = client.Post("/api/login", Json{{"name", name}, {"password", password}}.dump(),
                               "application/json");
        REQUIRE(res);
        if (res->status == 200) {
            const auto set = res->get_header_value("Set-Cookie");
            cookie = set.substr(0, set.find(';'));
        }
        return res->status;
    }
    /// The session as this console sees it: the operator's name, or "" when signed out.
    std::string who() {
        const auto res = client.Get("/api/session", {{"Cookie", cookie}});
        REQUIRE(res);
        REQUIRE(res->status == 200);
        const auto body = Json::parse(res->body);
        if (body["operator"].is_null()) return "";
        csrf = body["csrf"].get<std::string>();
        return body["operator"].get<std::string>();
    }
    int get(const std::string& path) {
        const auto res = client.Get(path.c_str(), {{"Cookie", cookie}});
        REQUIRE(res);
        return res->status;
    }
    int post(const std::string& path, bool with_csrf = true) {
        httplib::Headers h{{"Cookie", cookie}};
        if (with_csrf) h.emplace("X-CSRF-Token", csrf);
        const auto res = client.Post(path.c_str(), h, "{}", "application/json");
        REQUIRE(res);
        return res->status;
    }

    httplib::Client client;
    std::string cookie;
    std::string csrf;
};

}  // namespace

TEST_CASE_METHOD(
    ConsoleDatabase,
    "console sessions: two consoles on one database keep an operator signed in across both "
    "and a restart; signing out in one ends it in the other",
    "[console]") {
    console::put_operator(*conn, {"alice", std::nullopt}, kPassword);
    conn.reset();
    auto one = std::make_unique<ConsoleProcess>(db.dsn(), "127.0.0.1:0");
    ConsoleProcess two(db.dsn(), "127.0.0.1:0");
    const int port_one = one->port();
    const int port_two = two.port();
    REQUIRE(port_one != 0);
    REQUIRE(port_two != 0);

    Browser at_one(port_one);
    REQUIRE(at_one.login("alice", kPassword) == 200);
    // The same cookie at the other console, as a load balancer would send it.
    Browser at_two(port_two);
    at_two.cookie = at_one.cookie;
    // Alternating, as a balancer's round robin does: every request is the operator's.
    for (int i = 0; i < 5; ++i) {
        CHECK(at_one.who() == "alice");
        CHECK(at_two.who() == "alice");
        CHECK(at_one.get("/api/overview") == 200);
        CHECK(at_two.get("/api/leases") == 200);
    }
    CHECK(at_one.csrf == at_two.csrf);
    // The CSRF check holds at either console: with the token, done; without, refused.
    CHECK(at_two.post("/api/check") == 200);
    CHECK(at_two.post("/api/check", false) == 403);

    // The first console restarts on its own port: the session is still there.
    one->process().signal(SIGTERM);
    REQUIRE(one->process().wait_for(20000ms) == 0);
    one = std::make_unique<ConsoleProcess>(db.dsn(), "127.0.0.1:" + std::to_string(port_one));
    REQUIRE(one->port() == port_one);
    Browser after(port_one);
    after.cookie = at_one.cookie;
    CHECK(after.who() == "alice");
    CHECK(after.get("/api/overview") == 200);

    // Signing out at the second ends the session at the restarted first.
    CHECK(at_two.post("/api/logout") == 200);
    CHECK(after.who().empty());
    CHECK(after.get("/api/overview") == 401);
    CHECK(at_two.get("/api/overview") == 401);
}

TEST_CASE("console: a second console on a taken port is refused at start, naming the address",
          "[console]") {
    TestDatabase db;
    ConsoleProcess first(db.dsn(), "127.0.0.1:0");
    const int port = first.port();
    REQUIRE(port != 0);
    const std::string address = "127.0.0.1:" + std::to_string(port);
    ConsoleProcess second(db.dsn(), address);
    // Exit 2, as for any setting the console cannot have (docs/operations.md, "Exit codes").
    const auto code = second.process().wait_for(15000ms);
    INFO(second.log());
    REQUIRE(code);
    CHECK(*code == 2);
    CHECK(second.log().find("cannot listen on " + address + ": Address already in use") !=
          std::string::npos);
    CHECK(second.log().find("--listen") != std::string::npos);
    // The first serves on, alone.
    Browser b(port);
    CHECK(b.who().empty());
    CHECK(first.process().running());
}

TEST_CASE(
    "console: a database that accepts and never answers fails the start with exit 3 within "
    "--connect-timeout",
    "[console]") {
    SilentListener silent;
    // Through the variable as a unit's environment file sets it, and through the flag.
    const std::vector<std::vector<std::string>> runs = {
        {bin("aclaim-console"), "serve", "--dsn", silent.dsn(), "--listen", "127.0.0.1:0"},
        {bin("aclaim-console"), "operator", "remove", "bob", "--dsn", silent.dsn(),
         "--connect-timeout", "2"},
    };
    for (const auto& argv : runs) {
        const auto log = std::filesystem::temp_directory_path() /
                         ("aclaim-console-silent-" + std::to_string(::getpid()) + ".txt");
        const auto started = SteadyClock::now();
        Process p(argv, {{"ACLAIM_CONNECT_TIMEOUT", "2"}}, log.string());
        // libpq's 2 s for the one address, and the process's start and end around it.
        const auto code = p.wait_for(10000ms);
        const auto took = SteadyClock::now() - started;
        const auto text = read_file(log);
        std::filesystem::remove(log);
        INFO(argv[1] << ": " << text);
        REQUIRE(code);
        CHECK(*code == 3);
        CHECK(text.find("cannot reach the database") != std::string::npos);
        CHECK(took >= 1500ms);
    }
    CHECK(silent.accepted() >= 2);
}

TEST_CASE_METHOD(
    ConsoleDatabase,
    "console: a statement past --statement-timeout is answered 503, and the console serves "
    "on",
    "[console]") {
    console::put_operator(*conn, {"alice", std::nullopt}, kPassword);
    ConsoleProcess c(db.dsn(), "127.0.0.1:0", {{"ACLAIM_STATEMENT_TIMEOUT", "1"}});
    const int port = c.port();
    REQUIRE(port != 0);
    Browser b(port);
    REQUIRE(b.login("alice", kPassword) == 200);
    REQUIRE(b.get("/api/leases") == 200);
    {
        // An operation that holds the jobs table (an ALTER, a VACUUM FULL) while the page asks.
        pqxx::work hold(*conn);
        hold.exec("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE");
        const auto asked = SteadyClock::now();
        CHECK(b.get("/api/leases") == 503);
        const auto took = SteadyClock::now() - asked;
        CHECK(took >= 900ms);
        CHECK(took < 10s);
        hold.abort();
    }
    CHECK(b.get("/api/leases") == 200);
    CHECK(c.log().find("did not answer in time") != std::string::npos);
}

TEST_CASE(
    "console: behind a statement the database never answers, every page, the session check and "
    "sign-in answer within twice --statement-timeout, however many ask at once",
    "[console]") {
    console::init_crypto();
    TestDatabase db;
    auto conn = db.connect();
    console::put_operator(*conn, {"alice", std::nullopt}, kPassword);
    constexpr auto kTimeout = 2s;
    ConsoleProcess c(db.dsn(), "127.0.0.1:0", {{"ACLAIM_STATEMENT_TIMEOUT", "2"}});
    const int port = c.port();
    REQUIRE(port != 0);
    Browser b(port);
    REQUIRE(b.login("alice", kPassword) == 200);
    REQUIRE(b.get("/api/overview") == 200);

    // Each of `paths` asked at once, each on a connection of its own: the status and how long
    // each took.
    auto ask_at_once = [&](const std::vector<std::string>& paths) {
        std::vector<std::pair<int, SteadyClock::duration>> out(paths.size());
        std::vector<std::thread> threads;
        for (std::size_t i = 0; i < paths.size(); ++i) {
            threads.emplace_back([&, i] {
                httplib::Client client("127.0.0.1", port);
                client.set_read_timeout(60s);
                const auto asked = SteadyClock::now();
                const auto res =
                    paths[i] == "/api/login"
                        ? client.Post("/api/login",
                                      Json{{"name", "alice"}, {"password", kPassword}}.dump(),
                                      "application/json")
                        : client.Get(paths[i].c_str(), {{"Cookie", b.cookie}});
                out[i] = {res ? res->status : -1, SteadyClock::now() - asked};
            });
        }
        for (auto& t : threads) t.join();
        return out;
    };

    // Every one of `asks`, asked at once while `tables` are held locked by another session,
    // is answered 503 within twice the timeout.
    auto all_answered_in_time = [&](const std::string& tables,
                                    const std::vector<std::string>& asks) {
        pqxx::work hold(*conn);
        hold.exec("LOCK TABLE " + tables + " IN ACCESS EXCLUSIVE MODE");
        const auto answers = ask_at_once(asks);
        for (std::size_t i = 0; i < asks.size(); ++i) {
            INFO(asks[i]
                 << " answered " << answers[i].first << " after "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(answers[i].second).count()
                 << " ms");
            CHECK(answers[i].first == 503);
            CHECK(answers[i].second < 2 * kTimeout + 1500ms);
        }
        hold.abort();
    };
    SECTION("the jobs table held: every page") {
        all_answered_in_time("jobs", {"/api/overview", "/api/leases", "/api/jobs",
                                      "/api/quarantine", "/api/jobs/1", "/api/overview"});
    }
    SECTION("the sessions and the operators held: the session check and sign-in") {
        all_answered_in_time("console_sessions, console_operators",
                             {"/api/overview", "/api/session", "/api/login", "/api/leases",
                              "/api/session", "/api/login"});
    }
    // Served on once the lock is gone.
    CHECK(b.get("/api/overview") == 200);
    CHECK(b.who() == "alice");
}
