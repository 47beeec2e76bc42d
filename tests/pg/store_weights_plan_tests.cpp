// The weighted claim stays index scans: each weighted queue is read through jobs_weighted_order
// (schema/baseline/tables.sql), which leads with the queue, in claim order, as far as the
// jobs it may give, an unweighted one through jobs_claim_order only when the weighted ones cannot
// fill the claim, and each claimed row is reached by primary key. And its cost against the flat
// claim on the same jobs, at 1,000,000 pending, interleaved and skewed (hidden: run it with
// "[weights_bench]"; docs/performance.md, "Weighted queues and the claim", has its figures).

#include <algorithm>
#include <catch2/catch.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/store/claim_plan.hpp"
#include "common/store/store_sql.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using nlohmann::json;

namespace {

constexpr const char* kNow = "1800000000000000";
constexpr const char* kLeaseUs = "10000000";

/// Pending jobs of organization 1 on queues a and b, three of a for one of b, interleaved in
/// run_at order, priorities 0-7; a weighted 3, b 1. The jobs are marked as the enqueue of a
/// weighted queue's job marks them (schema/baseline/tables.sql).
void load(pqxx::connection& conn, int jobs) {
    pqxx::nontransaction admin(conn);
    admin.exec(
        "INSERT INTO job_queues (org_id, queue, weight, updated_at) "
        "VALUES (1, 'a', 3, now()), (1, 'b', 1, now())");
    admin.exec(
        "INSERT INTO jobs (org_id, queue, state, priority, enqueued_at, run_at, payload, weighed) "
        "SELECT 1, CASE WHEN i % 4 = 0 THEN 'b' ELSE 'a' END, 'pending', hashint4(i) & 7, "
        "'2026-12-01'::timestamptz, '2026-12-01'::timestamptz + i * interval '1 millisecond', "
        "'payload ' || i, true FROM generate_series(1, " +
        std::to_string(jobs) + ") i");
    admin.exec("VACUUM ANALYZE jobs");
    admin.exec("VACUUM ANALYZE job_queues");
}

/// Every job of `low` ranks below every job of the other queue: `low` all priority 0, the other
/// 1-7 (its priority, at least 1).
void skew(pqxx::connection& conn, const std::string& low) {
    pqxx::nontransaction admin(conn);
    admin.exec("UPDATE jobs SET priority = CASE WHEN queue = " + admin.quote(low) +
               " THEN 0 ELSE greatest(hashint4(id::int) & 7, 1) END");
    admin.exec("VACUUM ANALYZE jobs");
}

/// Queue b without a weight, and its jobs unmarked, as if it never had one.
void unweigh_b(pqxx::connection& conn) {
    pqxx::nontransaction admin(conn);
    admin.exec("UPDATE job_queues SET weight = NULL, weight_pass = NULL WHERE queue = 'b'");
    admin.exec("UPDATE jobs SET weighed = NULL WHERE queue = 'b'");
    admin.exec("VACUUM ANALYZE jobs");
    admin.exec("VACUUM ANALYZE job_queues");
}

/// The four claim statements prepared on `conn`, on generic plans as the coordinator runs them.
void prepare(pqxx::connection& conn) {
    pqxx::nontransaction session(conn);
    session.exec("SET plan_cache_mode = force_generic_plan");
    session.exec("PREPARE flat AS " + store::sql::claim_statement(store::ClaimPlan{}).text);
    session.exec("PREPARE weighted AS " +
                 store::sql::claim_statement(store::ClaimPlan{.weighted = true}).text);
    session.exec("PREPARE flat_batch AS " +
                 store::sql::claim_statement(store::ClaimPlan{.batch = true}).text);
    session.exec(
        "PREPARE weighted_batch AS " +
        store::sql::claim_statement(store::ClaimPlan{.weighted = true, .batch = true}).text);
}

std::string single_args(int limit) {
    return std::string("1, 'w', ") + std::to_string(limit) + ", " + kNow + ", " + kLeaseUs +
           ", '{a,b}'";
}

std::string batch_args(int slots) {
    std::string workers = "'{";
    for (int i = 0; i < slots; ++i) workers += (i ? ",w" : "w") + std::to_string(i);
    return "1, " + workers + "}', " + kNow + ", " + kLeaseUs + ", '{a,b}'";
}

/// The analyzed plan of the prepared statement `name` run with `args`, rolled back.
json analyzed(pqxx::connection& conn, const std::string& name, const std::string& args) {
    pqxx::work txn(conn);
    const auto r =
        txn.exec("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE " + name + "(" + args + ")");
    txn.abort();
    return json::parse(r[0][0].as<std::string>()).at(0);
}

/// Every scan of jobs in the plan, as "node type on index (loops)".
void jobs_scans(const json& node, std::vector<std::string>& out) {
    if (node.value("Relation Name", "") == "jobs" && node.value("Node Type", "") != "ModifyTable" &&
        node.value("Actual Loops", 0) > 0) {
        out.push_back(node.value("Node Type", "?") + " on " + node.value("Index Name", "-") + " (" +
                      std::to_string(node.value("Actual Loops", 0)) + ")");
    }
    if (node.contains("Plans")) {
        for (const auto& child : node["Plans"]) jobs_scans(child, out);
    }
}

/// The index entries the scans of jobs read and threw away (Rows Removed by Filter, all loops).
long jobs_rows_removed(const json& node) {
    long removed = node.value("Relation Name", "") == "jobs"
                       ? node.value("Rows Removed by Filter", 0L) * node.value("Actual Loops", 0L)
                       : 0L;
    if (node.contains("Plans")) {
        for (const auto& child : node["Plans"]) removed += jobs_rows_removed(child);
    }
    return removed;
}

/// The most rows any scan of jobs returned in one loop.
long widest_jobs_scan(const json& node) {
    long most = node.value("Relation Name", "") == "jobs" ? node.value("Actual Rows", 0L) : 0L;
    if (node.contains("Plans")) {
        for (const auto& child : node["Plans"]) most = std::max(most, widest_jobs_scan(child));
    }
    return most;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

namespace {

/// The claims of 1 and 64 jobs and the coalesced one of 64 slots on {a,b}, each on its cached
/// generic plan: `scans` is what it reads of jobs, and no scan reads an entry it throws away.
void check_plans(pqxx::connection& conn, const std::vector<std::string>& first_scans) {
    for (const auto& [name, args, rows] :
         {std::tuple{std::string("weighted"), single_args(1), 1},
          std::tuple{std::string("weighted"), single_args(64), 64},
          std::tuple{std::string("weighted_batch"), batch_args(64), 64}}) {
        INFO(name << " " << rows);
        // The sixth run is on the cached generic plan; the first five settle it.
        for (int i = 0; i < 5; ++i) analyzed(conn, name, args);
        const json plan = analyzed(conn, name, args).at("Plan");
        CHECK(plan.value("Actual Rows", -1) == rows);
        std::vector<std::string> scans;
        jobs_scans(plan, scans);
        std::vector<std::string> expected = first_scans;
        expected.push_back("Index Scan on jobs_pkey (" + std::to_string(rows) + ")");
        CHECK(scans == expected);
        // Each queue's scan stops at what the claim may take from it, and reads nothing else.
        CHECK(widest_jobs_scan(plan) <= rows);
        CHECK(jobs_rows_removed(plan) == 0);
    }
}

}  // namespace

TEST_CASE("the weighted claim reads each weighted queue through the weighted order index",
          "[store][weights][plan]") {
    testing::TestDatabase db;
    auto conn = db.connect();
    load(*conn, 20000);
    prepare(*conn);
    // One scan of jobs_weighted_order per served queue, and the claimed rows by key.
    SECTION("interleaved") {
        check_plans(*conn, {"Index Scan on jobs_weighted_order (2)"});
    }
    // Every job of b below every job of a: b's scan starts at b's first entry all the same.
    SECTION("b ranked below a") {
        skew(*conn, "b");
        check_plans(*conn, {"Index Scan on jobs_weighted_order (2)"});
    }
    // An unweighted queue served with a weighted one is read only when the weighted ones cannot
    // fill the claim: here a always can, so b below a costs nothing.
    SECTION("b unweighted, ranked below a") {
        unweigh_b(*conn);
        skew(*conn, "b");
        check_plans(*conn, {"Index Scan on jobs_weighted_order (1)"});
    }
}

namespace {

/// The weighted claims against the flat one on the same jobs, 101 runs each, alternating: a
/// PASS or MISS line each against 1.5x the flat claim's median execution time.
void bench_layout(pqxx::connection& conn, const std::string& layout) {
    constexpr int kRuns = 101;
    for (const auto& [label, flat, weighted, args] :
         {std::tuple{"claim of 1", "flat", "weighted", single_args(1)},
          std::tuple{"claim of 64", "flat", "weighted", single_args(64)},
          std::tuple{"coalesced claim of 64 slots", "flat_batch", "weighted_batch",
                     batch_args(64)}}) {
        std::vector<double> flat_ms, weighted_ms;
        json flat_plan, weighted_plan;
        for (int i = 0; i < kRuns; ++i) {
            flat_plan = analyzed(conn, flat, args);
            weighted_plan = analyzed(conn, weighted, args);
            flat_ms.push_back(flat_plan.at("Execution Time").get<double>());
            weighted_ms.push_back(weighted_plan.at("Execution Time").get<double>());
        }
        const auto hits = [](const json& p) {
            return p.at("Plan").value("Shared Hit Blocks", 0L) +
                   p.at("Plan").value("Shared Read Blocks", 0L);
        };
        const double ratio = median(weighted_ms) / median(flat_ms);
        std::cout << (ratio <= 1.5 ? "PASS " : "MISS ") << layout << ", " << label << ": flat "
                  << median(flat_ms) << " ms (" << hits(flat_plan) << " buffers), weighted "
                  << median(weighted_ms) << " ms (" << hits(weighted_plan) << " buffers), ratio "
                  << ratio << " (target 1.5)\n";
        CHECK(ratio <= 1.5);
    }
}

void print_plan(pqxx::connection& conn, const std::string& layout, const std::string& args) {
    pqxx::work txn(conn);
    std::cout << "\n"
              << layout << ": EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE weighted(" << args
              << "):\n";
    for (const auto& row :
         txn.exec("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE weighted(" + args + ")")) {
        std::cout << row[0].as<std::string>() << "\n";
    }
    std::cout << "\n";
    txn.abort();
}

/// A claim of one job from b alone, the flat claim: what a worker serving only b pays.
void b_alone(pqxx::connection& conn, const std::string& layout) {
    std::vector<double> ms;
    const std::string args = "1, 'w', 1, " + std::string(kNow) + ", " + kLeaseUs + ", '{b}'";
    for (int i = 0; i < 5; ++i)
        ms.push_back(analyzed(conn, "flat", args).at("Execution Time").get<double>());
    std::cout << layout << ": flat claim of 1 from b alone " << median(ms) << " ms\n";
}

}  // namespace

TEST_CASE("the weighted claim against the flat one at 1,000,000 pending jobs",
          "[.][weights_bench]") {
    testing::TestDatabase db;
    auto conn = db.connect();
    load(*conn, 1'000'000);
    prepare(*conn);
    bench_layout(*conn, "interleaved");
    print_plan(*conn, "interleaved", single_args(64));
    // Every job of b ranks below every job of a (b all priority 0, a 1-7): through
    // jobs_claim_order the scan of b read past a's 750,000 entries at each claim.
    skew(*conn, "b");
    bench_layout(*conn, "b below a");
    print_plan(*conn, "b below a", single_args(1));
    // The other way round: a's scan starts at a's first entry.
    skew(*conn, "a");
    bench_layout(*conn, "a below b");
    print_plan(*conn, "a below b", single_args(64));
    // b without a weight and below a: read through jobs_claim_order, and only when a cannot fill
    // the claim. A claim serving b alone (flat) still reads past a's entries.
    unweigh_b(*conn);
    skew(*conn, "b");
    bench_layout(*conn, "b unweighted below a");
    print_plan(*conn, "b unweighted below a", single_args(64));
    b_alone(*conn, "b unweighted below a");
}
