// The producer side of the integration surface (schema/baseline/tables.sql, clients/cpp): enqueue
// inside the caller's own transaction, the payload limit, and producer logins confined to their
// organization by the database.

#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include "clients/cpp/producer.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/pg_time.hpp"
#include "tests/pg/integration_support.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using store::NewJob;

namespace {

NewJob job(const std::string& payload, const std::string& queue = "default") {
    NewJob j;
    j.payload = payload;
    j.queue = queue;
    return j;
}

long count_jobs(pqxx::connection& c) {
    pqxx::read_transaction t(c);
    return t.exec1("SELECT count(*) FROM jobs")[0].as<long>();
}

/// For TEST_CASE_METHOD: a fresh database, a connection to it, and a producer for organization 1
/// on a manual clock.
struct ProducerOfOrg1 {
    TestDatabase db;
    base::ManualClock clock{kT0};
    const clients::Producer producer{clock, {.org = 1}};
    std::unique_ptr<pqxx::connection> conn = db.connect();
};

}  // namespace

TEST_CASE_METHOD(
    ProducerOfOrg1,
    "Producer: a rolled-back enqueue never existed; coordinators are woken at commit only",
    "[integration][producer]") {
    auto listener_conn = db.connect();
    Notifications woken(*listener_conn, "aclaim_jobs");

    {
        pqxx::work txn(*conn);
        const auto e = producer.enqueue(txn, job("rolled back"));
        CHECK(e.created);
        // Nothing is announced while the transaction is open: the job does not exist yet for
        // anyone else.
        CHECK(woken.wait_for(std::chrono::milliseconds(100)).empty());
        txn.abort();
    }
    CHECK(count_jobs(*conn) == 0);
    CHECK(woken.wait_for(std::chrono::milliseconds(100)).empty());

    store::JobId kept = 0;
    {
        pqxx::work txn(*conn);
        txn.exec("CREATE TABLE orders (id int PRIMARY KEY)");
        txn.exec("INSERT INTO orders VALUES (77)");
        kept = producer.enqueue(txn, job("order 77", "electrical")).id;
        CHECK(woken.wait_for(std::chrono::milliseconds(100)).empty());
        txn.commit();
    }
    const auto payloads = woken.wait_for(std::chrono::seconds(10));
    REQUIRE(payloads.size() == 1);
    CHECK(payloads[0] == "1:electrical");
    CHECK(count_jobs(*conn) == 1);
    pqxx::read_transaction t(*conn);
    CHECK(t.exec_params1("SELECT state FROM jobs WHERE id = $1", kept)[0].as<std::string>() ==
          "pending");
}

TEST_CASE_METHOD(ProducerOfOrg1,
                 "Producer: many jobs in one call, a held dedupe key returns its holder",
                 "[integration][producer]") {
    pqxx::work txn(*conn);
    NewJob keyed = job("order 5");
    keyed.dedupe_key = "order-5";
    keyed.priority = 4;
    keyed.max_attempts = 7;
    keyed.run_timeout = base::Duration(std::chrono::minutes(3));
    NewJob later = job("follow-up");
    later.run_at = kT0 + std::chrono::minutes(10);
    const auto first = producer.enqueue_many(txn, {job("a"), keyed, later, keyed});
    REQUIRE(first.size() == 4);
    CHECK(first[0].created);
    CHECK(first[1].created);
    CHECK(first[2].state == store::JobState::Scheduled);
    CHECK_FALSE(first[3].created);
    CHECK(first[3].id == first[1].id);
    txn.commit();

    pqxx::work again(*conn);
    const auto second = producer.enqueue(again, keyed);
    CHECK_FALSE(second.created);
    CHECK(second.id == first[1].id);
    const auto status = producer.status(again, {first[0].id}, {"order-5"});
    REQUIRE(status.size() == 2);
    CHECK(status[1].dedupe_key == std::optional<std::string>("order-5"));
    CHECK(status[1].priority == 4);
    CHECK(status[1].max_attempts == 7);
    CHECK(status[1].enqueued_at == kT0);
    const auto cancelled = producer.cancel(again, {first[2].id, 999'999}, "not needed");
    REQUIRE(cancelled.size() == 1);
    CHECK(cancelled[0].was == store::JobState::Scheduled);
    again.commit();
}

TEST_CASE_METHOD(
    ProducerOfOrg1,
    "Producer: a payload over the limit is refused with a clear error, nothing enqueued",
    "[integration][producer]") {
    {
        pqxx::work txn(*conn);
        const auto limit = txn.exec1("SELECT aclaim_max_payload_bytes()")[0].as<std::size_t>();
        try {
            producer.enqueue_many(txn, {job("small"), job(std::string(limit + 1, 'x'))});
            FAIL("the oversized payload was accepted");
        } catch (const pqxx::sql_error& e) {
            CHECK(e.sqlstate() == "54000");
            CHECK_THAT(e.what(), Catch::Contains("payload of job 2 of this call is 131073 bytes") &&
                                     Catch::Contains("limit of 131072 bytes") &&
                                     Catch::Contains("nothing was enqueued"));
        }
    }
    CHECK(count_jobs(*conn) == 0);
    // The store's own enqueue (aclaimctl enqueue) goes through the same check.
    store::AssignmentStore store(db.dsn());
    CHECK_THROWS_WITH(store.enqueue(1, {job(std::string(200'000, 'y'))}, kT0),
                      Catch::Contains("over the limit"));
    // Exactly the limit is fine.
    pqxx::work txn(*conn);
    CHECK(producer.enqueue(txn, job(std::string(131'072, 'z'))).created);
    txn.commit();
    CHECK(count_jobs(*conn) == 1);
}

TEST_CASE("Producer: arrays of different lengths are refused before anything is written",
          "[integration][producer]") {
    TestDatabase db;
    auto conn = db.connect();
    pqxx::work txn(*conn);
    CHECK_THROWS_WITH(
        txn.exec("SELECT * FROM aclaim_enqueue_many(ARRAY['a','b'], queues => ARRAY['q'], "
                 "org => 1)"),
        Catch::Contains("2 payloads, but the other arrays hold 1 queues"));
}

TEST_CASE("Producer login: confined to its own organization by the database",
          "[integration][producer][security]") {
    TestDatabase db;
    ProducerLogin one(db, "p1", 1);
    ProducerLogin two(db, "p2", 2);
    base::ManualClock clock(kT0);
    const clients::Producer as_login(clock);  // no organization: the login's is taken

    store::AssignmentStore store(db.dsn());
    const auto foreign = store.enqueue(2, {job("org 2's")}, kT0).at(0);
    {
        pqxx::work admin(store.connection());
        admin.exec("SELECT aclaim_results_group_create('audit', org => 1)");
        admin.exec("SELECT aclaim_results_group_create('audit', org => 2)");
        admin.commit();
    }

    pqxx::connection p1(one.dsn());
    {
        pqxx::work txn(p1);
        const auto mine = as_login.enqueue(txn, job("org 1's"));
        CHECK(mine.created);
        txn.commit();
        pqxx::read_transaction read(store.connection());
        CHECK(read.exec_params1("SELECT org_id FROM jobs WHERE id = $1", mine.id)[0].as<long>() ==
              1);
    }
    // Naming another organization is refused, whatever the call.
    for (const std::string sql : {"SELECT * FROM aclaim_enqueue('x', org => 2)",
                                  "SELECT * FROM aclaim_cancel(ARRAY[1]::bigint[], 'r', org => 2)",
                                  "SELECT * FROM aclaim_job_status(ARRAY[1]::bigint[], org => 2)",
                                  "SELECT * FROM aclaim_results_fetch('audit', org => 2)",
                                  "SELECT aclaim_results_ack('audit', 0, org => 2)",
                                  "SELECT * FROM aclaim_results_groups(2)"}) {
        INFO(sql);
        pqxx::work txn(p1);
        CHECK_THROWS_WITH(txn.exec(sql),
                          Catch::Contains("acts for organization 1 only, not for 2"));
    }
    {
        // Organization 2's job cannot be cancelled or read, and stays pending.
        pqxx::work txn(p1);
        CHECK(as_login.cancel(txn, {foreign}, "hostile").empty());
        CHECK(as_login.status(txn, {foreign}).empty());
        txn.commit();
    }
    CHECK(job_state(store.connection(), foreign) == "pending");
    {
        // Unscoped reads see its own organization's rows only; a setting changes nothing.
        pqxx::work txn(p1);
        txn.exec("SELECT set_config('aclaim.org_id', 'system', true)");
        CHECK(txn.exec1("SELECT count(*) FROM jobs")[0].as<long>() == 1);
        CHECK(txn.exec1("SELECT count(*) FROM jobs WHERE org_id = 2")[0].as<long>() == 0);
        CHECK(txn.exec1("SELECT count(*) FROM result_groups")[0].as<long>() == 1);
        CHECK(txn.exec1("SELECT count(*) FROM job_events WHERE org_id = 2")[0].as<long>() == 0);
    }
    // No table can be written directly, nor through the store's own functions.
    for (const std::string sql :
         {"INSERT INTO jobs (org_id, enqueued_at, run_at) VALUES (1, now(), now())",
          "UPDATE jobs SET priority = 9", "DELETE FROM job_outcomes",
          "INSERT INTO job_events (job_id, org_id, generation, kind, at) "
          "VALUES (1, 1, 0, 'completed', now())",
          "UPDATE result_groups SET acked = 0",
          "SELECT * FROM aclaim_enqueue_job(2, 0, 'default', 'x', 0, NULL, NULL, NULL, NULL, "
          "NULL, NULL, NULL)",
          "SELECT * FROM aclaim_cancel_jobs(NULL, ARRAY[1]::bigint[], 'a', 'r', 0)",
          "SELECT aclaim_producer_bind('p1', 2, 'me', 0)"}) {
        INFO(sql);
        pqxx::work txn(p1);
        CHECK_THROWS_WITH(txn.exec(sql), Catch::Contains("permission denied"));
    }
    {
        // A temporary table named like the real one does not catch the API's writes.
        pqxx::work txn(p1);
        txn.exec("CREATE TEMP TABLE jobs (id bigint, org_id bigint)");
        CHECK(as_login.enqueue(txn, job("past the decoy")).created);
        CHECK(txn.exec1("SELECT count(*) FROM pg_temp.jobs")[0].as<long>() == 0);
        txn.commit();
    }
    // The other login sees its own organization, with its job and its own group's verdicts.
    pqxx::connection p2(two.dsn());
    pqxx::work txn(p2);
    CHECK(txn.exec1("SELECT count(*) FROM jobs")[0].as<long>() == 1);
    CHECK(as_login.status(txn, {foreign}).size() == 1);
}

TEST_CASE("Producer login: unbound members, superusers and the coordinator role are refused",
          "[integration][producer][security]") {
    TestDatabase db;
    ProducerLogin bound(db, "p", 1);
    auto admin = db.connect();
    {
        pqxx::work txn(*admin);
        txn.exec("SELECT aclaim_producer_unbind(" + txn.quote(bound.login()) + ")");
        txn.exec("GRANT aclaim_producer TO " + txn.quote_name(bound.login()));
        txn.commit();
    }
    {
        pqxx::connection p(bound.dsn());
        pqxx::work txn(p);
        CHECK_THROWS_WITH(txn.exec("SELECT * FROM aclaim_enqueue('x')"),
                          Catch::Contains("is a producer not bound to an organization"));
    }
    {
        pqxx::connection p(bound.dsn());
        pqxx::work txn(p);
        CHECK(txn.exec1("SELECT count(*) FROM jobs")[0].as<long>() == 0);
    }
    pqxx::work txn(*admin);
    // The suite's own login is a superuser or owns the tables: either way, nothing to confine.
    CHECK_THROWS_WITH(txn.exec("SELECT aclaim_producer_bind(current_user, 1, 'me', 0)"),
                      Catch::Contains("cannot be confined") || Catch::Contains("owns the tables"));
}

TEST_CASE("Producer: a trusted login must name the organization", "[integration][producer]") {
    TestDatabase db;
    base::ManualClock clock(kT0);
    const clients::Producer unnamed(clock);
    auto conn = db.connect();
    pqxx::work txn(*conn);
    CHECK_THROWS_WITH(unnamed.enqueue(txn, job("where to?")),
                      Catch::Contains("name the organization"));
}

TEST_CASE("Producer login: a fan-in in the caller's transaction, and no edge to another's job",
          "[integration][producer][workflow]") {
    TestDatabase db;
    ProducerLogin one(db, "p1", 1);
    base::ManualClock clock(kT0);
    const clients::Producer as_login(clock);
    store::AssignmentStore store(db.dsn());
    const auto foreign = store.enqueue(2, {job("org 2's")}, kT0).at(0);

    pqxx::connection p1(one.dsn());
    std::vector<store::Enqueued> flow;
    {
        pqxx::work txn(p1);
        NewJob approval = job("approval");
        approval.depends_on = {store::job_of_this_call(1), store::job_of_this_call(2)};
        NewJob notify = job("notify");
        notify.depends_on = {store::job_of_this_call(3)};
        notify.on_failure = store::DependencyPolicy::Run;
        flow = as_login.enqueue_many(txn, {job("electrical"), job("plumbing"), approval, notify});
        txn.commit();
    }
    REQUIRE(flow.size() == 4);
    CHECK(flow[2].state == store::JobState::Waiting);
    CHECK(flow[3].state == store::JobState::Waiting);
    {
        pqxx::read_transaction t(p1);  // a producer reads its own organization's edges
        CHECK(t.exec1("SELECT count(*) FROM job_dependencies")[0].as<long>() == 3);
    }
    {
        pqxx::work txn(p1);
        REQUIRE(as_login.cancel(txn, {flow[2].id}, "visit withdrawn").size() == 1);
        txn.commit();
    }
    CHECK(job_state(store.connection(), flow[3].id) == "pending");  // policy run

    const long before = count_jobs(store.connection());
    pqxx::work txn(p1);
    NewJob theirs = job("theirs");
    theirs.depends_on = {foreign};
    CHECK_THROWS_WITH(as_login.enqueue(txn, theirs),
                      Catch::Contains("is not a job of organization 1"));
    txn.abort();
    CHECK(count_jobs(store.connection()) == before);
}
