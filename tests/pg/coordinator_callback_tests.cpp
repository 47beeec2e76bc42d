// POST /v1/callback under a flood of forged tokens (docs/security.md, the threat model): a forger
// gets 429 with Retry-After once its address has spent its refusals, before the database is
// asked; the callbacks that do reach the database share a bounded, reused set of connections; a
// refusal is counted in one row per source, reason and hour, never a row per call; the counts
// are pruned by retention in bounded batches; and no answer carries the database's own text.

#include <httplib.h>

#include <atomic>
#include <barrier>
#include <catch2/catch.hpp>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "common/ops/retention_store.hpp"
#include "coordinator/http/callback.hpp"
#include "coordinator/http/http_server.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

using namespace std::chrono_literals;

namespace {

constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);

const std::string kForged = "Bearer " + std::string(64, 'f');
const std::string kBody = R"({"outcome": "completed", "result": "lab:forged"})";

long long scalar(const TestDatabase& db, const std::string& sql) {
    auto conn = db.connect();
    pqxx::read_transaction txn(*conn);
    const auto field = txn.exec1(sql)[0];
    return field.is_null() ? 0 : field.as<long long>();
}

/// Limits no test call reaches, for the tests that are about something else.
coordinator::CallbackLimits unlimited() {
    return {.burst = 1e9, .per_second = 1e9, .max_sources = 4096};
}

}  // namespace

TEST_CASE("forged callbacks share one reused connection and are counted in one row",
          "[callback][http]") {
    TestDatabase db;
    base::ManualClock clock(kT0);
    coordinator::ParkCallback callback(db.dsn(), clock, unlimited());
    constexpr int kCalls = 60;
    for (int i = 0; i < kCalls; ++i) {
        // A port of its own per call, as each new connection of one caller has.
        const auto r = callback.handle({kForged, kBody, "10.0.0.7:" + std::to_string(40000 + i)});
        REQUIRE(r.status == 401);
        CHECK_THAT(r.body, Catch::Contains("unknown_token"));
    }
    CHECK(callback.connections_opened() == 1);
    // The connection stays open between calls, for the next one.
    CHECK(scalar(db,
                 "SELECT count(*) FROM pg_stat_activity "
                 "WHERE application_name = 'aclaim-coordinator-callback'") == 1);
    CHECK(scalar(db, "SELECT count(*) FROM park_refusal_counts") == 1);
    CHECK(scalar(db,
                 "SELECT refusals FROM park_refusal_counts "
                 "WHERE source LIKE 'http 10.0.0.7 as %' AND reason = 'unknown_token'") == kCalls);
    // Another hour is another row.
    clock.advance(std::chrono::hours(1));
    REQUIRE(callback.handle({kForged, kBody, "10.0.0.7:1"}).status == 401);
    CHECK(scalar(db, "SELECT count(*) FROM park_refusal_counts") == 2);
}

TEST_CASE("concurrent callbacks never hold more connections than the bound", "[callback][http]") {
    TestDatabase db;
    base::ManualClock clock(kT0);
    coordinator::ParkCallback callback(db.dsn(), clock, unlimited());
    constexpr int kThreads = 6;
    constexpr int kPerThread = 20;
    constexpr long long kTotal = static_cast<long long>(kThreads) * kPerThread;
    std::vector<std::thread> threads;
    std::atomic<int> answered{0};
    // All at once, so that more callbacks want a connection than the bound allows.
    std::barrier start(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            start.arrive_and_wait();
            for (int i = 0; i < kPerThread; ++i) {
                const auto r = callback.handle(
                    {kForged, kBody, "10.0.1." + std::to_string(t) + ":" + std::to_string(i)});
                if (r.status == 401) answered.fetch_add(1);
            }
        });
    }
    for (auto& t : threads) t.join();
    CHECK(answered.load() == kTotal);
    CHECK(callback.connections_opened() <= coordinator::ParkCallback::kMaxConnections);
    CHECK(scalar(db, "SELECT sum(refusals) FROM park_refusal_counts") == kTotal);
    CHECK(scalar(db, "SELECT count(*) FROM park_refusal_counts") == kThreads);
}

TEST_CASE("a source that keeps guessing is made to wait; other sources are not",
          "[callback][http]") {
    TestDatabase db;
    base::ManualClock clock(kT0);
    coordinator::ParkCallback callback(db.dsn(), clock, {.burst = 5, .per_second = 1});
    for (int i = 0; i < 5; ++i) {
        CHECK(callback.handle({kForged, kBody, "10.0.0.7:1"}).status == 401);
    }
    const auto limited = callback.handle({kForged, kBody, "10.0.0.7:2"});
    CHECK(limited.status == 429);
    CHECK(limited.retry_after_s == 1);
    CHECK_THAT(limited.body, Catch::Contains("rate_limited"));
    // Refused before the database: still five refusals counted, however many more are sent.
    for (int i = 0; i < 50; ++i) callback.handle({kForged, kBody, "10.0.0.7:3"});
    CHECK(scalar(db, "SELECT sum(refusals) FROM park_refusal_counts") == 5);
    // A malformed request costs a refusal too, and is limited the same way.
    CHECK(callback.handle({"", kBody, "10.0.0.7:4"}).status == 429);
    // Another address is served.
    CHECK(callback.handle({kForged, kBody, "10.0.0.8:1"}).status == 401);
    // A second later the guesser has one refusal back, not more.
    clock.advance(1s);
    CHECK(callback.handle({kForged, kBody, "10.0.0.7:5"}).status == 401);
    CHECK(callback.handle({kForged, kBody, "10.0.0.7:6"}).status == 429);
}

TEST_CASE("429 reaches the HTTP caller with Retry-After", "[callback][http]") {
    TestDatabase db;
    base::ManualClock clock(kT0);
    coordinator::CoordinatorOptions o;
    o.http.http_bind = "127.0.0.1:0";
    o.connection.dsn = db.dsn();
    coordinator::Metrics metrics;
    coordinator::HttpServer http(o.http_endpoint(), metrics, clock);
    http.start();
    httplib::Client client("127.0.0.1", http.port());
    const httplib::Headers auth{{"Authorization", kForged}};
    int refused = 0;
    int status = 0;
    std::string retry_after;
    for (int i = 0; i < 100 && status != 429; ++i) {
        const auto res = client.Post("/v1/callback", auth, kBody, "application/json");
        REQUIRE(res);
        status = res->status;
        retry_after = res->get_header_value("Retry-After");
        if (status == 401) ++refused;
    }
    CHECK(refused == static_cast<int>(coordinator::CallbackLimits{}.burst));
    CHECK(status == 429);
    CHECK(retry_after == "1");
    http.stop();
}

TEST_CASE("a callback's refusal never carries the database's own words", "[callback][http]") {
    TestDatabase db;
    base::ManualClock clock(kT0);
    coordinator::ParkCallback callback(db.dsn(), clock, unlimited());
    auto no_internals = [](const coordinator::CallbackReply& r) {
        for (const char* word : {"CONTEXT", "PL/pgSQL", "finish_parked", "ERROR:", "line "}) {
            if (r.body.find(word) != std::string::npos) return false;
        }
        return true;
    };
    const auto bad_outcome = callback.handle({kForged, R"({"outcome": "bogus"})", "10.0.0.7:1"});
    CHECK(bad_outcome.status == 400);
    CHECK_THAT(bad_outcome.body, Catch::Contains("outcome must be completed, failed or retry"));
    CHECK(no_internals(bad_outcome));
    const auto long_result = callback.handle(
        {kForged, R"({"outcome": "failed", "result": ")" + std::string(5000, 'x') + "\"}",
         "10.0.0.7:1"});
    CHECK(long_result.status == 400);
    CHECK_THAT(long_result.body, Catch::Contains("over the limit of 4096"));
    CHECK(no_internals(long_result));
    const auto deep =
        callback.handle({kForged, std::string(4000, '[') + std::string(4000, ']'), "10.0.0.7:1"});
    CHECK(deep.status == 400);
    // What the database itself refuses (here: the function is gone) is logged, not echoed.
    {
        auto owner = db.connect();
        pqxx::nontransaction txn(*owner);
        txn.exec("DROP FUNCTION aclaim_finish_parked(text, text, text, bigint, bigint, text)");
    }
    const auto gone = callback.handle({kForged, kBody, "10.0.0.7:1"});
    CHECK(gone.status == 503);
    CHECK(no_internals(gone));
    CHECK(gone.body.find("does not exist") == std::string::npos);
}

TEST_CASE("refusal counts are bounded per hour and pruned by retention in batches",
          "[callback][retention]") {
    TestDatabase db;
    auto conn = db.connect();
    auto refuse = [&](const std::string& caller, base::Instant at) {
        pqxx::work txn(*conn);
        txn.exec_params(
            "SELECT * FROM aclaim_finish_parked($1, 'completed', 'x', "
            "now_us => $2, caller => $3)",
            std::string(64, 'e'), base::to_micros(at), caller);
        txn.commit();
    };
    // 305 sources in one hour: 300 rows of their own, the rest counted together.
    for (int i = 0; i < 305; ++i) refuse("src-" + std::to_string(i), kT0);
    CHECK(scalar(db, "SELECT count(*) FROM park_refusal_counts") == 301);
    CHECK(scalar(db,
                 "SELECT refusals FROM park_refusal_counts "
                 "WHERE source = '(other sources)'") == 5);
    CHECK(scalar(db, "SELECT sum(refusals) FROM park_refusal_counts") == 305);

    // 30 days later nothing is old enough yet; past the keep, batches of 100 remove them all.
    CHECK(ops::prune_park_refusals(*conn, kT0 + std::chrono::hours(24 * 30), 100) == 0);
    const auto later = kT0 + std::chrono::hours(24 * 30 + 2);
    refuse("recent", later);
    CHECK(ops::prune_park_refusals(*conn, later, 100) == 100);
    CHECK(scalar(db, "SELECT count(*) FROM park_refusal_counts") == 202);
    CHECK(ops::prune_park_refusals(*conn, later, 1000) == 201);
    CHECK(scalar(db, "SELECT count(*) FROM park_refusal_counts") == 1);
    CHECK(scalar(db, "SELECT count(*) FROM park_refusal_counts WHERE source LIKE 'recent as %'") ==
          1);
}

TEST_CASE("the coordinator's role prunes refusal counts only through the function",
          "[callback][retention][security]") {
    TestDatabase db;
    auto conn = db.connect();
    {
        pqxx::work txn(*conn);
        txn.exec_params("SELECT * FROM aclaim_finish_parked($1, 'completed', 'x', now_us => $2)",
                        std::string(64, 'e'), base::to_micros(kT0));
        txn.commit();
    }
    {
        pqxx::work txn(*conn);
        txn.exec("SET LOCAL ROLE aclaim_coordinator");
        CHECK_THROWS_AS(txn.exec("DELETE FROM park_refusal_counts"), pqxx::insufficient_privilege);
    }
    pqxx::work txn(*conn);
    txn.exec("SET LOCAL ROLE aclaim_coordinator");
    CHECK(txn.exec_params1("SELECT aclaim_prune_park_refusals($1, 10)",
                           base::to_micros(kT0 + std::chrono::hours(24 * 40)))[0]
              .as<int>() == 1);
}

}  // namespace aclaim::testing
