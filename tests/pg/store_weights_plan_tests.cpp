// The weighted claim stays index scans: each served queue is read through jobs_claim_order in
// claim order, as far as the jobs it may give, and each claimed row is reached by primary key. And
// its cost against the flat claim on the same jobs, at 1,000,000 pending (hidden: run it with
// "[weights_bench]"; docs/performance.md, "Weighted queues and the claim", has its figures).

#include <algorithm>
#include <catch2/catch.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/store/store_sql.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using nlohmann::json;

namespace {

constexpr const char* kNow = "1800000000000000";
constexpr const char* kLeaseUs = "10000000";

std::string with_lock(std::string text) {
    text.replace(text.find("{LOCK}"), 6, "SKIP LOCKED");
    return text;
}

/// Pending jobs of organization 1 on queues a and b, three of a for one of b, interleaved in
/// run_at order, priorities 0-7; a weighted 3, b 1.
void load(pqxx::connection& conn, int jobs) {
    pqxx::nontransaction admin(conn);
    admin.exec(
        "INSERT INTO job_queues (org_id, queue, weight, updated_at) "
        "VALUES (1, 'a', 3, now()), (1, 'b', 1, now())");
    admin.exec(
        "INSERT INTO jobs (org_id, queue, state, priority, enqueued_at, run_at, payload) "
        "SELECT 1, CASE WHEN i % 4 = 0 THEN 'b' ELSE 'a' END, 'pending', hashint4(i) & 7, "
        "'2026-12-01'::timestamptz, '2026-12-01'::timestamptz + i * interval '1 millisecond', "
        "'payload ' || i FROM generate_series(1, " +
        std::to_string(jobs) + ") i");
    admin.exec("VACUUM ANALYZE jobs");
    admin.exec("VACUUM ANALYZE job_queues");
}

/// The four claim statements prepared on `conn`, on generic plans as the coordinator runs them.
void prepare(pqxx::connection& conn) {
    pqxx::nontransaction session(conn);
    session.exec("SET plan_cache_mode = force_generic_plan");
    session.exec("PREPARE flat AS " + with_lock(common::sql::kClaim.text));
    session.exec("PREPARE weighted AS " + with_lock(common::sql::kClaimWeighted.text));
    session.exec("PREPARE flat_batch AS " + with_lock(common::sql::kClaimBatch.text));
    session.exec("PREPARE weighted_batch AS " + with_lock(common::sql::kClaimBatchWeighted.text));
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

TEST_CASE("the weighted claim reads each served queue through the claim order index",
          "[store][weights][plan]") {
    testing::TestDatabase db;
    auto conn = db.connect();
    load(*conn, 20000);
    prepare(*conn);
    for (const auto& [name, args, rows] :
         {std::tuple{std::string("weighted"), single_args(1), 1},
          std::tuple{std::string("weighted"), single_args(64), 64},
          std::tuple{std::string("weighted_batch"), batch_args(64), 64}}) {
        INFO(name << " " << rows);
        // The sixth run is on the cached generic plan; the first five settle it.
        for (int i = 0; i < 5; ++i) analyzed(*conn, name, args);
        const json plan = analyzed(*conn, name, args).at("Plan");
        CHECK(plan.value("Actual Rows", -1) == rows);
        std::vector<std::string> scans;
        jobs_scans(plan, scans);
        // One scan of the claim order index per served queue, and the claimed rows by key.
        CHECK(scans ==
              std::vector<std::string>{"Index Scan on jobs_claim_order (2)",
                                       "Index Scan on jobs_pkey (" + std::to_string(rows) + ")"});
        // Each queue's scan stops at what the claim may take from it.
        CHECK(widest_jobs_scan(plan) <= rows);
    }
}

TEST_CASE("the weighted claim against the flat one at 1,000,000 pending jobs",
          "[.][weights_bench]") {
    constexpr int kRuns = 101;
    testing::TestDatabase db;
    auto conn = db.connect();
    load(*conn, 1'000'000);
    prepare(*conn);
    for (const auto& [label, flat, weighted, args] :
         {std::tuple{"claim of 1", "flat", "weighted", single_args(1)},
          std::tuple{"claim of 64", "flat", "weighted", single_args(64)},
          std::tuple{"coalesced claim of 64 slots", "flat_batch", "weighted_batch",
                     batch_args(64)}}) {
        std::vector<double> flat_ms, weighted_ms;
        json flat_plan, weighted_plan;
        for (int i = 0; i < kRuns; ++i) {
            flat_plan = analyzed(*conn, flat, args);
            weighted_plan = analyzed(*conn, weighted, args);
            flat_ms.push_back(flat_plan.at("Execution Time").get<double>());
            weighted_ms.push_back(weighted_plan.at("Execution Time").get<double>());
        }
        const auto hits = [](const json& p) {
            return p.at("Plan").value("Shared Hit Blocks", 0L) +
                   p.at("Plan").value("Shared Read Blocks", 0L);
        };
        std::cout << label << ": flat " << median(flat_ms) << " ms (" << hits(flat_plan)
                  << " buffers), weighted " << median(weighted_ms) << " ms (" << hits(weighted_plan)
                  << " buffers), ratio " << median(weighted_ms) / median(flat_ms) << "\n";
        CHECK(median(weighted_ms) <= 1.5 * median(flat_ms));
    }
    {
        pqxx::work txn(*conn);
        std::cout << "\nEXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE weighted(" << single_args(64)
                  << "):\n";
        for (const auto& row : txn.exec("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE weighted(" +
                                        single_args(64) + ")")) {
            std::cout << row[0].as<std::string>() << "\n";
        }
        txn.abort();
    }
    // The case the claim order index does not serve: every job of b ranks below every job of a
    // (b all priority 0, a 1-7). A claim serving b alone reads past a's 750,000 entries to find
    // b's first, and so does the weighted claim's scan of b, at each claim.
    {
        pqxx::nontransaction admin(*conn);
        admin.exec(
            "UPDATE jobs SET priority = CASE WHEN queue = 'b' THEN 0 ELSE greatest(priority, 1) "
            "END");
        admin.exec("VACUUM ANALYZE jobs");
    }
    std::vector<double> alone_ms, flat_ms, weighted_ms;
    const std::string b_alone = "1, 'w', 1, " + std::string(kNow) + ", " + kLeaseUs + ", '{b}'";
    for (int i = 0; i < 5; ++i) {
        alone_ms.push_back(analyzed(*conn, "flat", b_alone).at("Execution Time").get<double>());
        flat_ms.push_back(
            analyzed(*conn, "flat", single_args(1)).at("Execution Time").get<double>());
        weighted_ms.push_back(
            analyzed(*conn, "weighted", single_args(1)).at("Execution Time").get<double>());
    }
    std::cout << "b ranked below a: claim of 1 from b alone " << median(alone_ms)
              << " ms, flat on a and b " << median(flat_ms) << " ms, weighted "
              << median(weighted_ms) << " ms\n";
}
