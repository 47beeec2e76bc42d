// A coordinator on a multi-host DSN follows the writable primary: it skips a read-only server,
// and when the primary it uses is demoted and its sessions cut, it reconnects to the newly
// writable one, LISTENs there and re-runs the claims parked on the old one. /readyz follows.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "common/base/clock.hpp"
#include "common/store/migrations.hpp"
#include "coordinator/http/readiness.hpp"
#include "tests/pg/coordinator_client.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

std::string run(const std::string& cmd) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p);
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    REQUIRE(::pclose(p) == 0);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

/// A throwaway PostgreSQL standing in for one member of an HA cluster; "demoted" means
/// default_transaction_read_only, which libpq's target_session_attrs=read-write refuses as it
/// refuses a standby.
struct Member {
    Member() {
        char tmpl[] = "/tmp/aclaim-failover-pg.XXXXXX";
        REQUIRE(::mkdtemp(tmpl));
        dir = tmpl;
        dsn = run(std::string(ACLAIM_SOURCE_DIR) + "/compose/pgtmp start " + dir + " --fast");
        std::ifstream in(dir + "/port");
        in >> port;
        REQUIRE(port > 0);
        pqxx::connection conn(dsn);
        common::migrate(conn);
    }
    ~Member() {
        std::system((std::string(ACLAIM_SOURCE_DIR) + "/compose/pgtmp stop " + dir).c_str());
    }

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
                pqxx::connection conn(dsn);
                pqxx::nontransaction q(conn);
                const auto v = q.exec1("SHOW default_transaction_read_only")[0].as<std::string>();
                return v == (writable ? "off" : "on");
            },
            10s));
    }

    /// Ends every coordinator session, as a demotion or a restart does.
    void cut_coordinator_sessions() {
        pqxx::connection conn(dsn);
        pqxx::nontransaction q(conn);
        q.exec(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name LIKE 'aclaim-coordinator%'");
    }

    long coordinator_sessions() {
        pqxx::connection conn(dsn);
        pqxx::nontransaction q(conn);
        return q
            .exec1(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name LIKE 'aclaim-coordinator%'")[0]
            .as<long>();
    }

    std::string job_state(common::JobId id) {
        pqxx::connection conn(dsn);
        pqxx::nontransaction q(conn);
        return q.exec1("SELECT state FROM jobs WHERE id = " + std::to_string(id))[0]
            .as<std::string>();
    }

    std::string dir;
    std::string dsn;
    int port = 0;
};

}  // namespace

TEST_CASE("on a multi-host DSN the coordinator follows the writable primary", "[coordinator]") {
    spdlog::set_level(spdlog::level::critical);
    common::SystemClock clock;
    Member a;
    Member b;
    // A job only the first member holds: a claim can get it only from there.
    const auto on_a = common::AssignmentStore(a.dsn).enqueue(1, some_jobs(1), clock.now()).at(0);
    a.set_writable(false);

    const std::string dsn = "host=127.0.0.1,127.0.0.1 port=" + std::to_string(a.port) + "," +
                            std::to_string(b.port) +
                            " user=postgres dbname=aclaim target_session_attrs=read-write";
    coordinator::ReadinessProbe probe(dsn, clock, std::chrono::milliseconds(0));
    CHECK(probe.check().ready);

    coordinator::CoordinatorOptions o;
    o.dsn = dsn;
    o.bind = "tcp://127.0.0.1:*";
    o.plaintext = true;
    o.lease_ms = 60000;
    coordinator::Coordinator c(o, clock);
    c.start();
    zmq::context_t context;
    RawWorker w(context, c.endpoint());
    w.hello("w1", 1);
    // The read-only member was skipped: nothing to claim on the writable one, so the claim parks.
    const auto req = w.claim(1, 30000);
    REQUIRE(eventually([&] { return c.metrics().parked.load() >= 1; }, 10s));
    CHECK(a.coordinator_sessions() == 0);
    CHECK(b.coordinator_sessions() >= 2);

    // Failover: the primary is demoted, for a moment nothing is writable, then the other member
    // is promoted and the old primary's sessions end.
    b.set_writable(false);
    CHECK_FALSE(probe.check().ready);
    a.set_writable(true);
    CHECK(probe.check().ready);
    b.cut_coordinator_sessions();

    // The listener comes back on the new primary, which had its job before anyone listened
    // there: only re-running the parked claim finds it.
    const auto assigned = w.expect<proto::Assigned>(req, 15s);
    REQUIRE(assigned.jobs.size() == 1);
    CHECK(assigned.jobs[0].job_id == on_a);
    // The other DB thread may still hold a session the demotion ended: its COMPLETE is resolved
    // from the row on the new primary (not_committed), and the re-send is accepted there.
    std::optional<proto::Accepted> accepted;
    for (int attempt = 0; attempt < 5 && !accepted; ++attempt) {
        const auto done = w.next_req();
        w.send(proto::Complete{done, on_a, assigned.jobs[0].generation, "review:w1"});
        auto m = w.answer(done, 10s);
        REQUIRE(m);
        if (auto* yes = std::get_if<proto::Accepted>(&*m)) {
            accepted = *yes;
        } else {
            REQUIRE(std::holds_alternative<proto::Error>(*m));
            CHECK(std::get<proto::Error>(*m).code == "not_committed");
        }
    }
    REQUIRE(accepted);
    CHECK(accepted->state == "completed");
    CHECK_FALSE(accepted->replayed);
    CHECK(a.job_state(on_a) == "completed");
    CHECK(b.coordinator_sessions() == 0);
    c.stop();
}
