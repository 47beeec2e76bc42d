// The functions that run with their owner's rights (SECURITY DEFINER) and the SQL API's answers
// about jobs of another organization: every definer has a search_path of its own that no caller's
// schema or temporary table can stand in front of, no definer is executable by PUBLIC, and a
// producer cannot tell another organization's job from one that does not exist.

#include <catch2/catch.hpp>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/store/assignment_store.hpp"
#include "tests/pg/integration_support.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

namespace {

constexpr base::Instant kNow = base::instant_from_micros(1'700'000'000'000'000);

/// What is wrong with one definer function, or "" when nothing is.
std::vector<std::string> definer_findings(pqxx::connection& conn) {
    pqxx::read_transaction txn(conn);
    // proconfig holds "search_path=..." when the function sets one; a path that does not end with
    // pg_temp searches the caller's temporary schema first for tables. EXECUTE held by PUBLIC
    // shows as a NULL acl (the default) or an entry "=X/owner".
    const auto rows = txn.exec(R"SQL(
SELECT p.oid::regprocedure::text AS fn,
       (SELECT c FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%') AS path,
       p.proacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a
                                    WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
           AS public_execute
  FROM pg_proc p
 WHERE p.prosecdef AND p.pronamespace = current_schema()::regnamespace
 ORDER BY 1
)SQL");
    std::vector<std::string> out;
    for (const auto& r : rows) {
        const std::string fn = r["fn"].as<std::string>();
        const std::string path = r["path"].is_null() ? "" : r["path"].as<std::string>();
        // The schema, then pg_temp last (pg_catalog, not named, is searched first anyway; named
        // first it would also be where unqualified CREATEs land).
        const std::string fixed =
            "search_path=" + txn.exec1("SELECT current_schema()")[0].as<std::string>() +
            ", pg_temp";
        if (path != fixed) out.push_back(fn + ": search_path '" + path + "', not '" + fixed + "'");
        if (r["public_execute"].as<bool>()) out.push_back(fn + ": PUBLIC may execute it");
    }
    return out;
}

long long count_of(pqxx::connection& conn, const std::string& sql) {
    pqxx::read_transaction txn(conn);
    return txn.exec1(sql)[0].as<long long>();
}

/// The SQLSTATE and message of what `sql` raises as the login of `dsn`, with the dependency `id`
/// it names replaced by "<id>" so that two refusals can be compared.
std::pair<std::string, std::string> refusal_of(const std::string& dsn, const std::string& sql,
                                               long long id) {
    pqxx::connection conn(dsn);
    pqxx::work txn(conn);
    try {
        txn.exec(sql);
    } catch (const pqxx::sql_error& e) {
        std::string what = e.what();
        what = what.substr(0, what.find('\n'));
        const std::string named = "dependency " + std::to_string(id) + " ";
        if (const auto at = what.find(named); at != std::string::npos) {
            what.replace(at, named.size(), "dependency <id> ");
        }
        return {e.sqlstate(), what};
    }
    return {"", "accepted"};
}

}  // namespace

TEST_CASE("every SECURITY DEFINER function has a fixed search_path and no PUBLIC execute",
          "[security][definer]") {
    TestDatabase db;
    auto conn = db.connect();
    REQUIRE(count_of(*conn,
                     "SELECT count(*) FROM pg_proc WHERE prosecdef AND pronamespace = "
                     "current_schema()::regnamespace") > 10);
    const auto findings = definer_findings(*conn);
    for (const auto& f : findings) UNSCOPED_INFO(f);
    CHECK(findings.empty());
}

TEST_CASE("a login with no grants cannot run the scheduler's definer function",
          "[security][definer]") {
    TestDatabase db;
    // Named after the test's database, so that suites sharing the server never share it.
    const std::string nobody_login = db.name() + "_nobody";
    {
        auto owner = db.connect();
        pqxx::nontransaction txn(*owner);
        txn.exec("DROP ROLE IF EXISTS " + txn.quote_name(nobody_login));
        txn.exec("CREATE ROLE " + txn.quote_name(nobody_login) + " LOGIN");
    }
    pqxx::connection nobody(with_user(db.dsn(), nobody_login));
    {
        pqxx::work txn(nobody);
        CHECK_THROWS_AS(txn.exec("SELECT * FROM aclaim_schedules_due(0, 10)"),
                        pqxx::insufficient_privilege);
    }
    // The role that calls it still can.
    auto owner = db.connect();
    {
        pqxx::work txn(*owner);
        txn.exec("SET LOCAL ROLE aclaim_coordinator");
        CHECK(txn.exec("SELECT * FROM aclaim_schedules_due(0, 10)").empty());
    }
    nobody.disconnect();
    pqxx::nontransaction txn(*owner);
    txn.exec("DROP ROLE " + txn.quote_name(nobody_login));
}

TEST_CASE("a producer is told the same of another organization's job as of a missing one",
          "[security][definer][integration]") {
    TestDatabase db;
    store::AssignmentStore store(db.dsn());
    const auto theirs = store.enqueue(2, {{0, "theirs", 3}}, kNow).at(0);
    const long long missing = theirs + 1000;
    ProducerLogin producer(db, "oracle", 1);
    const std::string dsn = producer.dsn();
    auto depend_on = [&](long long id) {
        return refusal_of(dsn,
                          "SELECT * FROM aclaim_enqueue('mine', depends_on => ARRAY[" +
                              std::to_string(id) + "]::bigint[])",
                          id);
    };
    const auto foreign = depend_on(theirs);
    const auto absent = depend_on(missing);
    CHECK(foreign.first == "23503");
    CHECK_THAT(foreign.second, Catch::Contains("is not a job of organization 1"));
    CHECK(foreign == absent);
    // Nothing was enqueued, and the other organization's job is as it was.
    auto owner = db.connect();
    CHECK(count_of(*owner, "SELECT count(*) FROM jobs WHERE org_id = 1") == 0);
    CHECK(count_of(*owner, "SELECT count(*) FROM jobs WHERE org_id = 2 AND NOT has_dependents") ==
          1);
}

}  // namespace aclaim::testing
