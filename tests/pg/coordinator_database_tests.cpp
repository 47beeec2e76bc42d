// The coordinator when PostgreSQL goes away: it keeps answering, reconnects, and never reports a
// transition as accepted unless its commit happened.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <future>

#include "common/base/clock.hpp"
#include "common/store/migrations.hpp"
#include "tests/pg/coordinator_client.hpp"
#include "tests/support/pg_server.hpp"
#include "tests/support/rows.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

/// Re-sends a COMPLETE until it is accepted, as a worker does; each refusal must be one that
/// promises nothing was committed, or outcome_unknown: a restart that outlasts the answer bound
/// (--db-deadline-ms) ends the wait for the row's verdict, and the re-send settles it.
proto::Accepted complete_until_accepted(RawWorker& w, const proto::AssignedJob& job,
                                        const std::string& ref) {
    const auto deadline = base::SystemClock().monotonic_now() + 20s;
    while (true) {
        const auto req = w.next_req();
        w.send(proto::Complete{req, job.job_id, job.generation, ref});
        auto m = w.receive(10s);
        REQUIRE(m);
        if (auto* a = std::get_if<proto::Accepted>(&*m)) return *a;
        INFO("COMPLETE answered " << proto::type_name(*m));
        if (auto* r = std::get_if<proto::Rejected>(&*m)) FAIL(r->reason << ": " << r->detail);
        REQUIRE(std::holds_alternative<proto::Error>(*m));
        const auto& code = std::get<proto::Error>(*m).code;
        INFO("COMPLETE answered ERROR " << code);
        REQUIRE((code == "database_unavailable" || code == "not_committed" ||
                 code == "outcome_unknown"));
        REQUIRE(base::SystemClock().monotonic_now() < deadline);
        std::this_thread::sleep_for(50ms);
    }
}

}  // namespace

TEST_CASE("without a database, claims get NO_WORK and transitions ERROR, and stop still works",
          "[coordinator]") {
    spdlog::set_level(spdlog::level::critical);
    base::SystemClock clock;
    coordinator::Coordinator c(
        plaintext_options("postgresql://postgres@127.0.0.1:1/aclaim?connect_timeout=2"), clock);
    c.start();
    GreetedWorker w(c.endpoint(), "w1", 1);
    CHECK(w.expect<proto::NoWork>(w.claim()).reason == "database unavailable");
    const auto req = w.next_req();
    w.send(proto::Complete{req, 1, 1, "r"});
    CHECK(w.expect<proto::Error>(req).code == "database_unavailable");
    auto stopped = std::async(std::launch::async, [&] { c.stop(); });
    REQUIRE(stopped.wait_for(10s) == std::future_status::ready);
}

TEST_CASE("a completion whose connection dies before the commit is not_committed, then accepted",
          "[coordinator]") {
    spdlog::set_level(spdlog::level::critical);
    base::SystemClock clock;
    // The verdict is read from the row after reconnecting; on a slow (sanitized) build that may
    // take longer than the default answer bound, which would answer outcome_unknown first.
    CoordinatorHarness h(clock, [](coordinator::CoordinatorOptions& o) {
        o.db_pool.db_threads = 1;
        o.connection.db_deadline_ms = 10000;
    });
    store::AssignmentStore store(h.db.dsn());
    store.enqueue(1, some_jobs(1), clock.now());
    auto w = h.greeted("w1", 1);
    const auto job = w->claim_one();

    // Hold the row so that the completion waits inside its transaction, then kill its backend.
    auto locker = h.db.connect();
    pqxx::work lock(*locker);
    lock.exec_params("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", job.job_id);
    const auto req = w->next_req();
    w->send(proto::Complete{req, job.job_id, job.generation, "review:w1"});
    auto admin = h.db.connect();
    const std::string waiting =
        "FROM pg_stat_activity WHERE application_name LIKE 'aclaim-coordinator-db-%' "
        "AND wait_event_type = 'Lock'";
    REQUIRE(eventually([&] {
        pqxx::nontransaction q(*admin);
        return q.exec1("SELECT count(*) " + waiting)[0].as<int>() == 1;
    }));
    {
        pqxx::nontransaction q(*admin);
        q.exec("SELECT pg_terminate_backend(pid) " + waiting);
    }
    const auto error = w->expect<proto::Error>(req);
    CHECK(error.code == "not_committed");
    lock.abort();
    CHECK(job_state(*admin, job.job_id) == "assigned");

    const auto accepted = complete_until_accepted(*w, job, "review:w1");
    CHECK(accepted.state == "completed");
    CHECK_FALSE(accepted.replayed);
    CHECK(event_count(*admin, job.job_id, "completed") == 1);
}

TEST_CASE("after PostgreSQL restarts the coordinator reconnects, completes and wakes claims",
          "[coordinator][slow]") {
    spdlog::set_level(spdlog::level::critical);
    ThrowawayServer server({.durable = true, .migrate = false});
    {
        pqxx::connection conn(server.dsn());
        store::migrate(conn);
    }
    base::SystemClock clock;
    auto o = plaintext_options(server.dsn());
    // A restart of a durable server on a busy machine can take seconds: the lease must outlast
    // it, or the completion is rightly refused as expired.
    o.router.lease_ms = 60000;
    coordinator::Coordinator c(o, clock);
    c.start();
    GreetedWorker w(c.endpoint(), "w1", 1);
    {
        store::AssignmentStore store(server.dsn());
        store.enqueue(1, some_jobs(1), clock.now());
    }
    const auto job = w.claim_one();

    server.restart();
    const auto accepted = complete_until_accepted(w, job, "review:w1");
    CHECK(accepted.state == "completed");

    // The listener must be listening again: a parked claim is woken by a new job.
    const auto parked = c.metrics().parked.load();
    const auto req = w.claim(1, 15000);
    REQUIRE(eventually([&] { return c.metrics().parked.load() > parked; }, 10s));
    store::AssignmentStore store(server.dsn());
    const auto ids = store.enqueue(1, some_jobs(1), clock.now());
    const auto assigned = w.expect<proto::Assigned>(req, 10s);
    CHECK(assigned.jobs.at(0).job_id == ids[0]);
    c.stop();
}
