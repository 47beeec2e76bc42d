#include "tests/support/test_database.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <pqxx/pqxx>
#include <stdexcept>
#include <thread>

#include "common/store/migrations.hpp"

namespace aclaim::testing {

namespace {

std::string run(const std::string& cmd) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("cannot run: " + cmd);
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    if (::pclose(p) != 0) throw std::runtime_error("command failed: " + cmd);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}

/// A server this process started; stopped when the process exits normally.
struct OwnedServer {
    std::string dir;
    std::string dsn;
    OwnedServer() {
        char tmpl[] = "/tmp/aclaim-test-pg.XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        dir = tmpl;
        dsn = run(std::string(ACLAIM_SOURCE_DIR) + "/compose/pgtmp start " + dir + " --fast");
    }
    ~OwnedServer() {
        std::system((std::string(ACLAIM_SOURCE_DIR) + "/compose/pgtmp stop " + dir).c_str());
    }
};

std::string template_name() {
    return "aclaim_tmpl_" + std::to_string(::getpid());
}

void ensure_template() {
    static std::once_flag once;
    std::call_once(once, [] {
        {
            pqxx::connection admin(server_dsn());
            pqxx::nontransaction tx(admin);
            tx.exec("DROP DATABASE IF EXISTS " + template_name() + " WITH (FORCE)");
            tx.exec("CREATE DATABASE " + template_name());
        }
        pqxx::connection conn(with_database(server_dsn(), template_name()));
        store::migrate(conn);
    });
}

/// Drops a test's database, its sessions ended first; from a destructor, so it never throws.
void drop_database(const std::string& name) noexcept {
    try {
        pqxx::connection admin(server_dsn());
        pqxx::nontransaction tx(admin);
        tx.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    } catch (const std::exception&) {
        // The server may already be gone at process exit; the folder is removed with it.
    }
}

}  // namespace

const std::string& server_dsn() {
    static const std::string dsn = [] {
        if (const char* env = std::getenv("ACLAIM_TEST_DSN"); env && *env) return std::string(env);
        static OwnedServer server;
        return server.dsn;
    }();
    return dsn;
}

std::string with_database(const std::string& dsn, const std::string& db) {
    if (dsn.rfind("postgres://", 0) == 0 || dsn.rfind("postgresql://", 0) == 0) {
        const auto scheme_end = dsn.find("://") + 3;
        const auto slash = dsn.find('/', scheme_end);
        const auto query = dsn.find('?', scheme_end);
        const std::string head = dsn.substr(0, slash == std::string::npos ? query : slash);
        const std::string tail = query == std::string::npos ? "" : dsn.substr(query);
        return head + "/" + db + tail;
    }
    return dsn + " dbname=" + db;
}

std::string with_user(const std::string& dsn, const std::string& user) {
    const auto scheme = dsn.find("://");
    if (scheme == std::string::npos) return dsn + " user=" + user;
    const auto start = scheme + 3;
    const auto at = dsn.find('@', start);
    const auto slash = dsn.find('/', start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
        return dsn.substr(0, start) + user + dsn.substr(at);
    }
    return dsn.substr(0, start) + user + "@" + dsn.substr(start);
}

TestLogin::TestLogin(const TestDatabase& db, const std::string& prefix, const std::string& suffix,
                     const std::vector<std::string>& member_of)
    : name(prefix + "_" + std::to_string(::getpid()) + "_" + suffix),
      dsn(with_user(db.dsn(), name)),
      db_(db) {
    auto conn = db.connect();
    pqxx::nontransaction admin(*conn);
    admin.exec("CREATE ROLE " + name + " LOGIN");
    for (const auto& role : member_of) admin.exec("GRANT " + role + " TO " + name);
}

TestLogin::~TestLogin() {
    try {
        auto conn = db_.connect();
        pqxx::nontransaction admin(*conn);
        // Its connections may still be closing: DROP ROLE fails while one is open.
        admin.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = " +
                   admin.quote(name));
        for (int i = 0; i < 100; ++i) {
            try {
                admin.exec("DROP ROLE IF EXISTS " + name);
                return;
            } catch (const pqxx::sql_error&) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
    } catch (const std::exception&) {
        // A role left behind carries this process id: no later run reuses its name.
    }
}

TestDatabase::TestDatabase() {
    ensure_template();
    static std::atomic<int> counter{0};
    name_ = "aclaim_t" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
    {
        pqxx::connection admin(server_dsn());
        pqxx::nontransaction tx(admin);
        tx.exec("CREATE DATABASE " + name_ + " TEMPLATE " + template_name());
    }
    dsn_ = with_database(server_dsn(), name_);
}

TestDatabase::~TestDatabase() {
    drop_database(name_);
}

std::unique_ptr<pqxx::connection> TestDatabase::connect() const {
    return std::make_unique<pqxx::connection>(dsn_);
}

OlderSchemaDatabase::OlderSchemaDatabase(const std::string& tag, int version)
    : name_("aclaim_" + tag + "_" + std::to_string(::getpid())) {
    {
        pqxx::connection admin(server_dsn());
        pqxx::nontransaction tx(admin);
        tx.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
        tx.exec("CREATE DATABASE " + name_);
    }
    dsn_ = with_database(server_dsn(), name_);
    pqxx::connection conn(dsn_);
    pqxx::work txn(conn);
    txn.exec(
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())");
    for (const auto& m : store::embedded_history()) {
        if (m.version >= version) break;
        txn.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version,
                        m.name);
    }
    txn.commit();
}

OlderSchemaDatabase::~OlderSchemaDatabase() {
    drop_database(name_);
}

}  // namespace aclaim::testing
