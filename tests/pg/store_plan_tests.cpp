// The store's multi-row statements reach each row they change by its primary key, whatever the
// planner's statistics say. Statistics taken while few jobs were out (an idle queue, or just after
// a bulk load) once made a coalesced completion scan the whole partial index of assigned rows for
// every request: 100-400 ms a batch instead of a few. The scene here reproduces such statistics,
// and each statement's plan must reach a row it handles per request by the primary key, and match
// each request with its row once rather than with every row of the batch; a reaper pass must read
// no more expired rows than it takes back.

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/store/assignment_store.hpp"
#include "common/store/claim_plan.hpp"
#include "common/store/store_sql.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using nlohmann::json;

using namespace std::chrono_literals;

namespace {

constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);
constexpr base::Duration kLease = 10 * base::kSeconds;
constexpr int kBatch = 64;

std::string array_of(const std::vector<std::string>& items) {
    std::string out = "'{";
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
    return out + "}'";
}

/// Scans of jobs that ran once per row (more than one loop) other than a primary-key lookup, as
/// "node type on index (loops)".
void per_row_scans_off_key(const json& node, std::vector<std::string>& out) {
    if (node.value("Relation Name", "") == "jobs" && node.value("Actual Loops", 0) > 1 &&
        !(node.value("Index Name", "") == "jobs_pkey" && node.contains("Index Cond"))) {
        out.push_back(node.value("Node Type", "?") + " on " + node.value("Index Name", "jobs") +
                      (node.contains("Index Cond") ? " by " + node["Index Cond"].get<std::string>()
                                                   : " without a condition") +
                      " (" + std::to_string(node.value("Actual Loops", 0)) + " loops)");
    }
    if (node.contains("Plans")) {
        for (const auto& child : node["Plans"]) per_row_scans_off_key(child, out);
    }
}

/// Scans of job_progress (schema/baseline/tables.sql) that ran more than once other than a lookup
/// by its primary key: a claim joins it to every job it hands out.
void per_row_progress_scans_off_key(const json& node, std::vector<std::string>& out) {
    if (node.value("Relation Name", "") == "job_progress" && node.value("Actual Loops", 0) > 1 &&
        !(node.value("Index Name", "") == "job_progress_pkey" && node.contains("Index Cond"))) {
        out.push_back(node.value("Node Type", "?") + " (" +
                      std::to_string(node.value("Actual Loops", 0)) + " loops)");
    }
    if (node.contains("Plans")) {
        for (const auto& child : node["Plans"]) per_row_progress_scans_off_key(child, out);
    }
}

/// The most rows any join discarded by its join filter: a nested loop that compares every
/// request of a batch with every row discards about the batch's square.
long most_rows_removed_by_join_filter(const json& node) {
    long most = node.value("Rows Removed by Join Filter", 0L);
    if (node.contains("Plans")) {
        for (const auto& child : node["Plans"]) {
            most = std::max(most, most_rows_removed_by_join_filter(child));
        }
    }
    return most;
}

/// The most rows any scan of jobs returned in one loop.
int widest_jobs_scan(const json& node) {
    int most = node.value("Relation Name", "") == "jobs" ? node.value("Actual Rows", 0) : 0;
    if (node.contains("Plans")) {
        for (const auto& child : node["Plans"]) most = std::max(most, widest_jobs_scan(child));
    }
    return most;
}

/// The times the plan's spend of rate limit tokens (the update of job_queues, claim_plan.cpp's
/// spend, in the rated claim statements only) read job_queues: each loop of a scan of it
/// under that update. -1 when the plan has no such update.
int bucket_reads(const json& node, bool in_spend = false) {
    const bool spend = node.value("Node Type", "") == "ModifyTable" &&
                       node.value("Relation Name", "") == "job_queues";
    int reads = 0;
    bool found = spend;
    if (in_spend && node.value("Relation Name", "") == "job_queues") {
        reads += node.value("Actual Loops", 0);
    }
    if (node.contains("Plans")) {
        for (const auto& child : node["Plans"]) {
            const int r = bucket_reads(child, in_spend || spend);
            if (r >= 0) {
                found = true;
                reads += r;
            }
        }
    }
    return found || in_spend ? reads : -1;
}

/// The analyzed plan of the statement prepared as `name`, run on its cached plan with `args`
/// (rolled back).
json run_cached(pqxx::connection& conn, const std::string& name, const std::string& args) {
    pqxx::work txn(conn);
    const auto r = txn.exec("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE " + name + "(" + args + ")");
    txn.abort();
    return json::parse(r[0][0].as<std::string>()).at(0).at("Plan");
}

}  // namespace

TEST_CASE("multi-row statements reach each row by primary key under stale statistics",
          "[store][plan]") {
    testing::TestDatabase db;
    {
        const auto conn = db.connect();
        pqxx::nontransaction admin(*conn);
        // The statistics must stay what the scene makes them.
        admin.exec("ALTER TABLE jobs SET (autovacuum_enabled = off)");
        admin.exec(
            "INSERT INTO jobs (org_id, enqueued_at, payload) "
            "SELECT 1, now() + g * interval '1 microsecond', 'p' "
            "FROM generate_series(1, 20000) g");
        admin.exec("VACUUM ANALYZE jobs");  // pending jobs, no lease out
        // Some of them reported progress in an earlier attempt (protocol 1.5).
        admin.exec(
            "INSERT INTO job_progress (job_id, org_id, generation, percent, updated_at) "
            "SELECT id, org_id, 1, 50, now() FROM jobs WHERE id % 10 = 0");
        admin.exec("ANALYZE job_progress");
    }
    // Then the queue gets busy, unknown to the statistics: 3,000 leases out and 1,000 of them
    // finished, which leaves dead entries in the partial index of assigned rows.
    store::AssignmentStore store(db.dsn());
    std::vector<store::Lease> leases;
    for (int i = 0; i < 3; ++i) {
        auto out = store.claim(1, {"w", 1000}, kLease, kT0);
        REQUIRE(out.leases.size() == 1000);
        leases.insert(leases.end(), out.leases.begin(), out.leases.end());
    }
    std::vector<store::TransitionRequest> done;
    for (int i = 0; i < 1000; ++i) {
        done.push_back({1, leases[i].job_id, leases[i].generation, "w", "r"});
    }
    int rejected = 0;
    for (const auto& t : store.complete_batch(done, kT0 + 1us)) rejected += t.rejection ? 1 : 0;
    REQUIRE(rejected == 0);

    // The coordinator's connection, under row-level security, on generic plans (as a prepared
    // statement runs from its sixth execution on).
    auto coordinator = db.connect();
    store::act_as_row_security_role(*coordinator);
    {
        pqxx::nontransaction session(*coordinator);
        session.exec("SELECT set_config('aclaim.org_id', '1', false)");
        session.exec("SET plan_cache_mode = force_generic_plan");
        const std::map<std::string, std::string> statements = {
            {"renew_batch", store::sql::kRenewBatch.text},
            {"complete_batch", store::sql::kCompleteBatch.text},
            {"claim_batch", store::sql::claim_statement(store::ClaimPlan{.batch = true}).text},
            {"claim", store::sql::claim_statement(store::ClaimPlan{}).text},
            {"claim_rated", store::sql::claim_statement(store::ClaimPlan{.rated = true}).text},
            {"reclaim", store::sql::kReclaim.text},
        };
        for (const auto& [name, text] : statements) session.exec("PREPARE " + name + " AS " + text);
    }
    std::vector<std::string> orgs, jobs, generations, workers, refs;
    for (int i = 1000; i < 1000 + kBatch; ++i) {
        orgs.push_back("1");
        jobs.push_back(std::to_string(leases[i].job_id));
        generations.push_back(std::to_string(leases[i].generation));
        workers.push_back("w");
        refs.push_back("r");
    }
    const std::string now = std::to_string(base::to_micros(kT0 + 2us));
    const std::string lease = std::to_string(kLease.count());
    const std::string transition = array_of(orgs) + "," + array_of(jobs) + "," +
                                   array_of(generations) + "," + array_of(workers);
    const std::map<std::string, std::pair<std::string, int>> busy = {
        {"renew_batch", {transition + "," + now + "," + lease, kBatch}},
        {"complete_batch", {transition + "," + array_of(refs) + "," + now, kBatch}},
        {"claim_batch",
         {"1," + array_of(workers) + "," + now + "," + lease + ", '{default}'", kBatch}},
        {"claim",
         {"1, 'w', " + std::to_string(kBatch) + "," + now + "," + lease + ", '{default}'", kBatch}},
        // An hour later every lease has run out.
        {"reclaim", {std::to_string(base::to_micros(kT0 + 3600 * base::kSeconds)) + ", 500", 500}},
    };
    for (const auto& [name, call] : busy) {
        INFO(name);
        const auto& [args, rows] = call;
        const json plan = run_cached(*coordinator, name, args);
        CHECK(plan.value("Actual Rows", -1) == rows);  // the plan ran over real rows
        std::vector<std::string> rescans;
        per_row_scans_off_key(plan, rescans);
        CHECK(rescans == std::vector<std::string>{});
        // A claim finds the saved progress of each job it hands out by primary key, if at all.
        std::vector<std::string> progress_rescans;
        per_row_progress_scans_off_key(plan, progress_rescans);
        CHECK(progress_rescans == std::vector<std::string>{});
        // Each request is matched with its row once, not compared with every row of the batch.
        CHECK(most_rows_removed_by_join_filter(plan) < kBatch);
        // A claim whose queues have no rate limit runs the statement without the spend.
        if (name == "claim" || name == "claim_batch") CHECK(bucket_reads(plan) == -1);
    }
    // The rated claim on queues without a rate stops at its spend's one-time gate; with a rate
    // limit on the queue, the same cached plan reads and spends the bucket.
    CHECK(bucket_reads(run_cached(*coordinator, "claim_rated", busy.at("claim").first)) == 0);
    {
        const auto conn = db.connect();
        pqxx::nontransaction admin(*conn);
        admin.exec(
            "INSERT INTO job_queues (org_id, queue, rate_per_s, rate_burst, updated_at) "
            "VALUES (1, 'default', 1000, 1000, now())");
    }
    CHECK(bucket_reads(run_cached(*coordinator, "claim_rated", busy.at("claim").first)) > 0);
    // A reaper pass reads as many expired rows as it takes back, not all of them: 2,000 leases
    // have run out, the pass takes 500.
    CHECK(widest_jobs_scan(run_cached(*coordinator, "reclaim", busy.at("reclaim").first)) == 500);
}

TEST_CASE("the time helpers are exact in any session time zone and inlined into plans",
          "[store][plan]") {
    testing::TestDatabase db;
    auto conn = db.connect();
    pqxx::work txn(*conn);
    txn.exec("SET LOCAL timezone = 'America/New_York'");  // a zone with daylight saving
    const auto exact = txn.exec(
        "SELECT count(*) FROM (SELECT 1700000000000000 + g * 7919 AS us "
        "FROM generate_series(-100000::bigint, 100000) g UNION ALL VALUES (0), (-1), (1)) v "
        "WHERE aclaim_us(aclaim_ts(us)) <> us "
        "OR aclaim_ts(us) <> 'epoch'::timestamptz + us * interval '1 microsecond'");
    CHECK(exact[0][0].as<long>() == 0);
    CHECK(txn.exec("SELECT aclaim_us('2024-03-10 02:30:00.000001-05')")[0][0].as<long>() ==
          1710055800000001);
    // A function the planner cannot inline runs the SQL-function executor for every row.
    const auto plan = txn.exec("EXPLAIN VERBOSE SELECT aclaim_us(aclaim_ts(id)) FROM jobs");
    std::string text;
    for (const auto& row : plan) text += row[0].as<std::string>() + "\n";
    CHECK(text.find("aclaim_ts(") == std::string::npos);
    CHECK(text.find("aclaim_us(") == std::string::npos);
}
