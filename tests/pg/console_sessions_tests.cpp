// The browser console's sessions in PostgreSQL (console/sessions.hpp, schema/baseline/tables.sql):
// what the cookie and the CSRF token rest on, shared by every console process on the database.

#include <catch2/catch.hpp>
#include <set>

#include "common/base/clock.hpp"
#include "console/operators.hpp"
#include "console/sessions.hpp"
#include "tests/pg/console_support.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

long long count(pqxx::connection& conn, const std::string& query) {
    pqxx::read_transaction t(conn);
    return t.exec1(query)[0].as<long long>();
}

void exec(pqxx::connection& conn, const std::string& statement) {
    pqxx::work t(conn);
    t.exec(statement);
    t.commit();
}

/// Operator alice, of every organization.
struct WithAlice : ConsoleDatabase {
    WithAlice() { console::put_operator(*conn, {"alice", std::nullopt}, "s3cret words"); }
};

/// Sessions of ten minutes on a manual clock, alice's among them.
struct AliceSessions : WithAlice {
    base::ManualClock clock{base::Instant{} + std::chrono::hours(24 * 365 * 50)};
    console::Sessions sessions{db.dsn(), clock, std::chrono::minutes(10)};
};

}  // namespace

TEST_CASE_METHOD(AliceSessions,
                 "console sessions: tokens are random, found while fresh, gone when closed",
                 "[console]") {
    const auto a = sessions.open({"alice", std::nullopt});
    const auto b = sessions.open({"alice", std::nullopt});
    CHECK(a != b);
    CHECK(a.size() == 64);
    const auto found = sessions.find(a);
    REQUIRE(found);
    CHECK(found->op.name == "alice");
    CHECK_FALSE(found->op.orgs);
    CHECK(found->csrf.size() == 64);
    CHECK(found->csrf != sessions.find(b)->csrf);
    CHECK_FALSE(sessions.find(a.substr(0, 63) + (a.back() == '0' ? "1" : "0")));
    CHECK_FALSE(sessions.find(a + "0"));
    CHECK_FALSE(sessions.find(""));
    sessions.close(a);
    CHECK_FALSE(sessions.find(a));
    CHECK(sessions.find(b));

    SECTION("only the token's SHA-256 is stored, never the token") {
        CHECK(count(*conn, "SELECT count(*) FROM console_sessions WHERE token_hash = '" + b +
                               "' OR csrf = '" + b + "'") == 0);
        CHECK(count(*conn, "SELECT count(*) FROM console_sessions WHERE token_hash = '" +
                               console::token_hash(b) + "'") == 1);
        // The SHA-256 of "abc" (FIPS 180-2's example): the hash is the standard one.
        CHECK(console::token_hash("abc") ==
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    SECTION("a session ends after the idle time without a request, not while it is used") {
        clock.advance(std::chrono::minutes(9));
        CHECK(sessions.find(b));  // used: the idle time starts again
        clock.advance(std::chrono::minutes(9));
        CHECK(sessions.find(b));
        clock.advance(std::chrono::minutes(10) + base::kMillis);
        CHECK_FALSE(sessions.find(b));
    }

    SECTION("a request within the touch step writes nothing; past it the deadline moves") {
        const auto expiry = [&] {
            return count(*conn,
                         "SELECT aclaim_us(expires_at) FROM console_sessions WHERE token_hash = '" +
                             console::token_hash(b) + "'");
        };
        const auto before = expiry();
        clock.advance(console::Sessions::kTouchStep / 2);
        REQUIRE(sessions.find(b));
        CHECK(expiry() == before);
        clock.advance(console::Sessions::kTouchStep);
        REQUIRE(sessions.find(b));
        CHECK(expiry() == base::to_micros(clock.now() + std::chrono::minutes(10)));
    }

    SECTION("a second set of sessions on the database (another console) knows every session") {
        console::Sessions other(db.dsn(), clock, std::chrono::minutes(10));
        const auto seen = other.find(b);
        REQUIRE(seen);
        CHECK(seen->csrf == sessions.find(b)->csrf);
        other.close(b);
        CHECK_FALSE(sessions.find(b));
    }
}

TEST_CASE_METHOD(ConsoleDatabase,
                 "console sessions: removing, disabling or resetting an operator ends its sessions",
                 "[console]") {
    console::put_operator(*conn, {"alice", std::nullopt}, "s3cret words");
    console::put_operator(*conn, {"bob", std::vector<store::OrgId>{3, 7}}, "other words");
    const base::SystemClock clock;
    console::Sessions sessions(db.dsn(), clock);
    const auto alice = sessions.open({"alice", std::nullopt});
    const auto bob = sessions.open({"bob", std::vector<store::OrgId>{3, 7}});
    REQUIRE(sessions.find(alice));
    REQUIRE(sessions.find(bob));
    CHECK(sessions.find(bob)->op.orgs == std::vector<store::OrgId>{3, 7});

    SECTION("removed: its sessions are deleted with it, another's stay") {
        CHECK(console::remove_operator(*conn, "alice"));
        CHECK_FALSE(console::remove_operator(*conn, "alice"));
        CHECK_FALSE(sessions.find(alice));
        CHECK(count(*conn, "SELECT count(*) FROM console_sessions WHERE operator = 'alice'") == 0);
        CHECK(sessions.find(bob));
    }
    SECTION("disabled: its sessions are found no more") {
        exec(*conn, "UPDATE console_operators SET disabled_at = now() WHERE name = 'alice'");
        CHECK_FALSE(sessions.find(alice));
        CHECK(sessions.find(bob));
    }
    SECTION("a new password or scope: signed out everywhere, and a new session has the scope") {
        console::put_operator(*conn, {"bob", std::vector<store::OrgId>{7}}, "new words");
        CHECK_FALSE(sessions.find(bob));
        CHECK(sessions.find(alice));
        const auto again = sessions.open({"bob", std::vector<store::OrgId>{7}});
        CHECK(sessions.find(again)->op.orgs == std::vector<store::OrgId>{7});
    }
    SECTION("a scope changed in the table applies to the live session at once") {
        exec(*conn, "UPDATE console_operators SET org_ids = '{7}' WHERE name = 'bob'");
        CHECK(sessions.find(bob)->op.orgs == std::vector<store::OrgId>{7});
    }
}

TEST_CASE_METHOD(AliceSessions,
                 "console sessions: each sign-in removes a bounded batch of expired sessions",
                 "[console]") {
    const int expired = console::Sessions::kPruneBatch + 20;
    std::set<std::string> tokens;
    for (int i = 0; i < expired; ++i) tokens.insert(sessions.open({"alice", std::nullopt}));
    CHECK(tokens.size() == static_cast<std::size_t>(expired));
    clock.advance(std::chrono::minutes(11));
    const auto live = sessions.open({"alice", std::nullopt});
    // One batch gone, the rest on the next sign-in; the live one stays.
    CHECK(count(*conn, "SELECT count(*) FROM console_sessions") ==
          expired + 1 - console::Sessions::kPruneBatch);
    sessions.open({"alice", std::nullopt});
    CHECK(count(*conn, "SELECT count(*) FROM console_sessions") == 2);
    CHECK(sessions.find(live));
}

TEST_CASE_METHOD(ConsoleDatabase,
                 "console sessions: the row-security role and producers cannot read them",
                 "[console]") {
    console::put_operator(*conn, {"alice", std::nullopt}, "s3cret words");
    const base::SystemClock clock;
    console::Sessions sessions(db.dsn(), clock);
    sessions.open({"alice", std::nullopt});
    for (const std::string role : {"aclaim_coordinator", "aclaim_producer"}) {
        pqxx::work t(*conn);
        t.exec("SET LOCAL ROLE " + role);
        CHECK_THROWS_AS(t.exec("SELECT * FROM console_sessions"), pqxx::insufficient_privilege);
    }
}
