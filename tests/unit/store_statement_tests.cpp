#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "clients/cpp/client_sql.hpp"
#include "common/ops/operator_sql.hpp"
#include "common/ops/recovery_sql.hpp"
#include "common/ops/retention_sql.hpp"
#include "common/ops/schedule_sql.hpp"
#include "common/store/claim_plan.hpp"
#include "common/store/park_sql.hpp"
#include "common/store/store_sql.hpp"

namespace sql = aclaim::store::sql;

TEST_CASE("Statements: each declares exactly the parameters its text uses", "[store]") {
    std::vector<const sql::Statement*> all = sql::kStatements;
    all.insert(all.end(), aclaim::ops::sql::kOperatorStatements.begin(),
               aclaim::ops::sql::kOperatorStatements.end());
    all.insert(all.end(), aclaim::ops::sql::kRecoveryStatements.begin(),
               aclaim::ops::sql::kRecoveryStatements.end());
    all.insert(all.end(), aclaim::clients::sql::kStatements.begin(),
               aclaim::clients::sql::kStatements.end());
    all.insert(all.end(), aclaim::ops::sql::kRetentionStatements.begin(),
               aclaim::ops::sql::kRetentionStatements.end());
    all.insert(all.end(), aclaim::ops::sql::kScheduleStatements.begin(),
               aclaim::ops::sql::kScheduleStatements.end());
    all.insert(all.end(), sql::kParkStatements.begin(), sql::kParkStatements.end());
    all.push_back(&sql::kFinishParked);
    all.push_back(&sql::kNotifyResults);
    all.push_back(&sql::kCancelledHolders);
    for (const auto& plan : aclaim::store::all_claim_plans()) {
        all.push_back(&sql::claim_statement(plan));
    }
    std::set<std::string> names;
    for (const sql::Statement* s : all) {
        INFO(s->name);
        CHECK(names.insert(s->name).second);
        // Composed to the end: no {SLOT} of a template is left for the server to choke on.
        CHECK_FALSE(std::regex_search(s->text, std::regex(R"(\{[A-Z][A-Z0-9_]*\})")));
        std::set<int> used;
        const std::regex param(R"(\$(\d+))");
        for (auto it = std::sregex_iterator(s->text.begin(), s->text.end(), param);
             it != std::sregex_iterator(); ++it) {
            used.insert(std::stoi((*it)[1].str()));
        }
        if (s->params.empty()) {
            CHECK(used.empty());
            continue;
        }
        REQUIRE_FALSE(used.empty());
        CHECK(*used.begin() == 1);
        CHECK(static_cast<std::size_t>(*used.rbegin()) == s->params.size());
        CHECK(used.size() == s->params.size());
    }
}

TEST_CASE("compose: fills every named slot, and refuses a slot left open or one never named",
          "[store]") {
    CHECK(sql::compose("SELECT {A} FROM t WHERE x = {A} AND y = {B_2}",
                       {{"A", "a"}, {"B_2", "b"}}) == "SELECT a FROM t WHERE x = a AND y = b");
    // A value is taken as it is: slots in it are not filled again.
    CHECK(sql::compose("{A}{B}", {{"A", "{B}"}, {"B", "x"}}) == "{B}x");
    // Braces around anything but a slot name are text: array literals, JSON, lower case.
    CHECK(sql::compose("SELECT '{}'::int[], '{default}', '{\"k\":1}', '{a}', '{A', {A}",
                       {{"A", "1"}}) ==
          "SELECT '{}'::int[], '{default}', '{\"k\":1}', '{a}', '{A', 1");
    CHECK(sql::compose("no slots", {}) == "no slots");
    // A slot the template names but no argument fills.
    CHECK_THROWS_WITH(sql::compose("SELECT {A}, {B}", {{"A", "a"}}),
                      Catch::Contains("{B}") && Catch::Contains("not filled"));
    // An argument for a slot the template never names.
    CHECK_THROWS_WITH(sql::compose("SELECT {A}", {{"A", "a"}, {"LOCK", "SKIP LOCKED"}}),
                      Catch::Contains("{LOCK}"));
}

TEST_CASE(
    "Statements: every one that can end a job records its outcome and settles its "
    "dependents in the same statement",
    "[store][outcomes]") {
    std::vector<const sql::Statement*> all = sql::kStatements;
    all.insert(all.end(), aclaim::ops::sql::kOperatorStatements.begin(),
               aclaim::ops::sql::kOperatorStatements.end());
    all.insert(all.end(), aclaim::ops::sql::kRecoveryStatements.begin(),
               aclaim::ops::sql::kRecoveryStatements.end());
    all.insert(all.end(), sql::kParkStatements.begin(), sql::kParkStatements.end());
    // A SET of state to a terminal value, or to a CASE that may pick one (retry_or_discard).
    const std::regex ends_jobs(
        R"(SET\s+state\s*=\s*('completed'|'failed'|'discarded'|'cancelled'|CASE)|,\s*state\s*=\s*CASE)",
        std::regex::icase);
    int ending = 0;
    for (const sql::Statement* s : all) {
        INFO(s->name);
        const bool ends = std::regex_search(s->text, ends_jobs);
        if (!ends) continue;
        ++ending;
        CHECK(s->text.find("INSERT INTO job_outcomes") != std::string::npos);
        CHECK(s->text.find("pg_notify('aclaim_outcomes'") != std::string::npos);
        // ... and settles the dependents of what it ended (schema/baseline/tables.sql), in a CTE
        // its result runs.
        CHECK(s->text.find("aclaim_dependencies_settled(") != std::string::npos);
        CHECK(s->text.find(sql::kSettledColumn) != std::string::npos);
    }
    // complete, complete batch, fail, reclaim, reclaim one, operator fail, quarantine fail, the
    // end of expired parks (cancel and a parked job's callback are aclaim_cancel_jobs and
    // aclaim_finish_parked in the schema, covered by the pg tests).
    CHECK(ending == 8);
}

TEST_CASE("Claim plans: each dimension adds its own fragments and nothing else",
          "[store][claim][plans]") {
    using aclaim::store::ClaimPlan;
    std::set<std::string> names;
    std::set<std::string> texts;
    for (const ClaimPlan& plan : aclaim::store::all_claim_plans()) {
        const sql::Statement& statement = sql::claim_statement(plan);
        const std::string& text = statement.text;
        INFO(plan.name());
        CHECK(statement.name == plan.name());
        // Composed once: every call answers the same statement.
        CHECK(&sql::claim_statement(plan) == &statement);
        CHECK(ClaimPlan::of_bits(plan.dimension_bits(), plan.batch) == plan);
        names.insert(statement.name);
        texts.insert(text);
        CHECK((text.find("aclaim_rate_tokens(") != std::string::npos) == plan.rated);
        CHECK((text.find("rate_tokens =") != std::string::npos) == plan.rated);
        CHECK((text.find("weight_pass =") != std::string::npos) == plan.weighted);
        CHECK((text.find("AND weighed AND") != std::string::npos) == plan.weighted);
        CHECK((text.find("aclaim_excluded") != std::string::npos) == plan.excluding);
        CHECK((text.find("aclaim_exclusion_slots") != std::string::npos) ==
              (plan.excluding && plan.batch));
        CHECK((text.find("$2::text[]") != std::string::npos) == plan.batch);
        CHECK((text.find("$6::text[]") != std::string::npos) == !plan.batch);
        // Every plan claims the same way: one update of the picked rows, audited, passing over
        // rows another transaction holds.
        CHECK(text.find("UPDATE jobs j") != std::string::npos);
        CHECK(text.find("'claimed'") != std::string::npos);
        CHECK(text.find("FOR UPDATE SKIP LOCKED") != std::string::npos);
    }
    CHECK(names.size() == aclaim::store::kClaimPlanCount);
    CHECK(texts.size() == aclaim::store::kClaimPlanCount);
}
