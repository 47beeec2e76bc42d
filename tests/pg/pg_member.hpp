#pragma once

// A throwaway PostgreSQL of its own (compose/pgtmp) standing in for one member of an HA cluster:
// a primary, or a streaming standby of one that can be cut off and promoted, and killed as when
// its machine dies. For the tests of a coordinator that follows a failover.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "common/store/assignment.hpp"
#include "common/store/migrations.hpp"
#include "tests/support/raw_worker.hpp"

namespace aclaim::testing {

/// Runs a shell command and returns its standard output without the last newline; fails the
/// test when it does not exit 0.
inline std::string run_command(const std::string& cmd) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p);
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    const int status = ::pclose(p);
    INFO(cmd << ": " << out);
    REQUIRE(status == 0);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

class PgMember {
  public:
    /// A new primary with the schema migrated.
    PgMember() {
        make_dir();
        dsn = pgtmp("start " + dir + " --fast");
        read_port();
        pqxx::connection conn(dsn);
        store::migrate(conn);
    }

    /// A streaming standby of `primary`, caught up. With `synchronous`, the primary waits for it
    /// on every commit.
    PgMember(const PgMember& primary, bool synchronous) {
        make_dir();
        dsn = pgtmp("standby " + primary.dir + " " + dir + (synchronous ? " --sync" : ""));
        read_port();
    }

    PgMember(const PgMember&) = delete;
    PgMember& operator=(const PgMember&) = delete;

    ~PgMember() {
        std::system((std::string(ACLAIM_SOURCE_DIR) + "/compose/pgtmp stop " + dir).c_str());
    }

    /// The standby stops receiving WAL and keeps what it has.
    void detach() { pgtmp("detach " + dir); }
    /// The standby becomes a primary on a new timeline.
    void promote() { pgtmp("promote " + dir); }
    /// SIGKILL of the server and all its processes.
    void kill() { pgtmp("kill " + dir); }

    /// Waits until this standby has replayed everything `primary` has written: up to its insert
    /// position, since with synchronous_commit off a commit already answered may not be written
    /// out yet.
    void catch_up(const PgMember& primary) {
        const auto target = scalar(primary.dsn, "SELECT pg_current_wal_insert_lsn()::text");
        REQUIRE(eventually(
            [&] {
                return scalar(dsn, "SELECT pg_last_wal_replay_lsn() >= '" + target + "'::pg_lsn") ==
                       "t";
            },
            30s));
    }

    /// "Demoted" by default_transaction_read_only, which libpq's target_session_attrs=read-write
    /// refuses as it refuses a standby. Existing sessions see it from their next transaction on.
    void set_writable(bool writable) {
        {
            pqxx::connection conn(dsn);
            pqxx::nontransaction q(conn);
            q.exec(writable ? "ALTER SYSTEM RESET default_transaction_read_only"
                            : "ALTER SYSTEM SET default_transaction_read_only = on");
            q.exec("SELECT pg_reload_conf()");
        }
        // The reload is asynchronous: wait until a new session sees it.
        REQUIRE(eventually(
            [&] {
                return scalar(dsn, "SHOW default_transaction_read_only") ==
                       (writable ? "off" : "on");
            },
            10s));
    }

    /// Ends every coordinator session, as a demotion or a restart does.
    void cut_coordinator_sessions() {
        scalar(dsn,
               "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
               "WHERE application_name LIKE 'aclaim-coordinator%'");
    }

    long coordinator_sessions(const std::string& name = "aclaim-coordinator%") {
        return std::stol(scalar(dsn,
                                "SELECT count(*) FROM pg_stat_activity WHERE application_name "
                                "LIKE '" +
                                    name + "'"));
    }

    std::string job_state(store::JobId id) {
        return scalar(dsn, "SELECT state FROM jobs WHERE id = " + std::to_string(id));
    }

    /// One value of a one-row query on a connection of its own.
    static std::string scalar(const std::string& dsn, const std::string& sql) {
        pqxx::connection conn(dsn);
        pqxx::nontransaction q(conn);
        const auto row = q.exec1(sql);
        return row[0].is_null() ? std::string() : row[0].as<std::string>();
    }

    std::string dir;
    std::string dsn;
    int port = 0;

  private:
    void make_dir() {
        char tmpl[] = "/tmp/aclaim-member-pg.XXXXXX";
        REQUIRE(::mkdtemp(tmpl));
        dir = tmpl;
    }
    void read_port() {
        std::ifstream in(dir + "/port");
        in >> port;
        REQUIRE(port > 0);
    }
    static std::string pgtmp(const std::string& args) {
        return run_command(std::string(ACLAIM_SOURCE_DIR) + "/compose/pgtmp " + args);
    }
};

/// Sends `request` (a COMPLETE, FAIL or RELEASE) under a fresh request id until it is ACCEPTED,
/// at most `attempts` times. Across a failover a send may meet a connection the failover ended:
/// its commit is resolved from the row on the new primary, and `not_committed` says that nothing
/// changed and the re-send is safe.
template <class Request>
std::optional<proto::Accepted> send_until_accepted(RawWorker& w, Request request,
                                                   int attempts = 5) {
    for (int attempt = 0; attempt < attempts; ++attempt) {
        request.req = w.next_req();
        w.send(request);
        auto m = w.answer(request.req, 20s);
        REQUIRE(m);
        if (auto* yes = std::get_if<proto::Accepted>(&*m)) return *yes;
        if (auto* no = std::get_if<proto::Rejected>(&*m)) {
            FAIL("REJECTED " << no->reason << ": " << no->detail);
        }
        REQUIRE(std::holds_alternative<proto::Error>(*m));
        CHECK(std::get<proto::Error>(*m).code == "not_committed");
    }
    return std::nullopt;
}

/// The multi-host DSN of a cluster of these members, as an HA deployment gives coordinators.
inline std::string multi_host_dsn(const PgMember& a, const PgMember& b) {
    return "host=127.0.0.1,127.0.0.1 port=" + std::to_string(a.port) + "," +
           std::to_string(b.port) + " user=postgres dbname=aclaim target_session_attrs=read-write";
}

}  // namespace aclaim::testing
