// The canary's contract rules, its back-off, its load shapes and its reading of the coordinator's
// histograms: pure functions, so every rule is shown to fire on exactly what it names.

#include <algorithm>
#include <catch2/catch.hpp>

#include "drills/canary.d/contract.hpp"
#include "drills/canary.d/metrics.hpp"
#include "drills/canary.d/shape.hpp"

using namespace aclaim;
using namespace aclaim::drills;

namespace {

ContractBounds bounds(bool coalesce = true) {
    CanaryOptions o;
    o.db_threads = 2;
    o.coalesce = coalesce;
    return contract_for(o);
}

/// A clean interval at `pollers` with some claims in strict order.
Interval clean(const ContractBounds& b, int pollers = 4) {
    Interval in;
    in.second = 3;
    in.pollers = pollers;
    in.displacement_bound = b.displacement_bound(pollers);
    in.seen.jobs_assigned = 20;
    in.audit.displacement.assign(20, 0);
    in.displacement = summarize_displacement(in.audit.displacement);
    return in;
}

std::vector<std::string> rules_of(const std::vector<Violation>& vs) {
    std::vector<std::string> out;
    for (const auto& v : vs) out.push_back(v.rule);
    return out;
}

}  // namespace

TEST_CASE("canary contract: the displacement bound is (k-1)*m", "[canary]") {
    CHECK(bounds().claimers() == 3);
    CHECK(bounds().displacement_bound(16) == 32);
    CHECK(bounds(false).displacement_bound(16) == 2);
}

TEST_CASE("canary contract: a clean interval passes", "[canary]") {
    for (const bool coalesce : {true, false}) {
        const auto b = bounds(coalesce);
        CHECK(judge(clean(b), b).empty());
    }
}

TEST_CASE("canary contract: each rule fires on what it names", "[canary]") {
    const auto skip = bounds();

    SECTION("displacement over the bound, and not at it") {
        auto in = clean(skip, 2);  // bound (3-1)*2 = 4
        in.audit.displacement.assign(10, 4);
        in.displacement = summarize_displacement(in.audit.displacement);
        CHECK(judge(in, skip).empty());
        in.audit.displacement.assign(10, 5);
        in.displacement = summarize_displacement(in.audit.displacement);
        const auto v = judge(in, skip);
        CHECK(rules_of(v) == std::vector<std::string>{"displacement_within_bound"});
        CHECK_FALSE(v[0].injected);
        CHECK(v[0].level == 2);
    }
    SECTION("duplicates from either side, and stale acceptances") {
        auto in = clean(skip);
        in.seen.duplicate_assignments = 1;
        in.seen.duplicate_evidence = {"job 5 generation 1 assigned to poller 0 and again to 1"};
        const auto v = judge(in, skip);
        REQUIRE(rules_of(v) == std::vector<std::string>{"no_duplicate_claim"});
        CHECK(v[0].evidence.find("job 5 generation 1") != std::string::npos);
        auto logged = clean(skip);
        logged.audit.duplicate_claims = 1;
        logged.audit.stale_acceptances = 1;
        CHECK(rules_of(judge(logged, skip)) ==
              std::vector<std::string>{"no_duplicate_claim", "no_stale_acceptance"});
    }
    SECTION("a claim seen waiting on a lock") {
        auto in = clean(skip);
        in.locks.claim_waits = 1;
        in.locks.claim_wait_max_ms = 40;
        CHECK(rules_of(judge(in, skip)) == std::vector<std::string>{"claims_never_wait_on_a_lock"});
    }
    SECTION("lock waits of other statements are measured, not judged") {
        auto in = clean(skip);
        in.locks.other_waits = 7;
        CHECK(judge(in, skip).empty());
    }
}

TEST_CASE("canary contract: an injected violation goes through the same rules", "[canary]") {
    const auto b = bounds();
    auto in = clean(b);
    in.injected = InjectedViolation::Kind::Displacement;
    auto v = judge(in, b);
    REQUIRE(rules_of(v) == std::vector<std::string>{"displacement_within_bound"});
    CHECK(v[0].injected);
    in.injected = InjectedViolation::Kind::Duplicate;
    v = judge(in, b);
    REQUIRE(rules_of(v) == std::vector<std::string>{"no_duplicate_claim"});
    CHECK(v[0].injected);

    CHECK(parse_injected_violation("displacement@3")->second == 3);
    CHECK(parse_injected_violation("duplicate@0")->kind == InjectedViolation::Kind::Duplicate);
    CHECK_FALSE(parse_injected_violation("duplicate"));
    CHECK_FALSE(parse_injected_violation("latency@2"));
    CHECK_FALSE(parse_injected_violation("duplicate@x"));
    CHECK_FALSE(parse_injected_violation("duplicate@-1"));
}

TEST_CASE("canary contract: the whole run is judged from the complete log and the checker",
          "[canary]") {
    const auto b = bounds();
    RunFacts f;
    f.max_pollers = 2;
    f.audit.displacement.assign(100, 0);
    f.displacement = summarize_displacement(f.audit.displacement);
    CHECK(judge_run(f, b).empty());
    f.audit.displacement.assign(100, 5);
    f.displacement = summarize_displacement(f.audit.displacement);
    f.check.violations.push_back({ops::Invariant::SingleCompletion, 9, "completed twice"});
    const auto v = judge_run(f, b);
    CHECK(rules_of(v) == std::vector<std::string>{"displacement_within_bound", "invariants_hold"});
    CHECK(v[0].second == -1);
}

TEST_CASE("canary back-off: to the last good level when lower, else half", "[canary]") {
    BackOff b(16);
    CHECK_FALSE(b.record(2, false));
    CHECK_FALSE(b.record(4, false));
    CHECK(b.record(8, true) == 4);  // the last level that passed
    CHECK(b.cap() == 4);
    CHECK_FALSE(b.record(4, false));
    CHECK(b.record(4, true) == 2);  // it failed at the last good level itself: halve
    CHECK(b.record(2, true) == 1);
    CHECK(b.record(1, true) == 1);  // never below one poller
    CHECK(b.cap() == 1);

    BackOff first(16);
    CHECK(first.record(16, true) == 8);  // nothing passed yet: halve
    CHECK_FALSE(first.record(8, false));
    CHECK(first.cap() == 8);  // a clean interval does not raise the cap again
}

TEST_CASE("canary shapes: every shape starts where it should and stays in range", "[canary]") {
    const auto series = [](Shape s, int start, int max, int seconds) {
        std::vector<int> out;
        for (int t = 0; t < seconds; ++t) out.push_back(pollers_at({s, start, max, seconds}, t));
        return out;
    };
    const auto ramp = series(Shape::Ramp, 2, 16, 20);
    CHECK(ramp.front() == 2);
    CHECK(ramp.back() == 16);
    CHECK(std::is_sorted(ramp.begin(), ramp.end()));

    CHECK(series(Shape::Step, 2, 16, 8) == std::vector<int>{2, 2, 4, 4, 8, 8, 16, 16});
    CHECK(series(Shape::Step, 2, 12, 8) == std::vector<int>{2, 2, 4, 4, 8, 8, 12, 12});
    CHECK(series(Shape::Spike, 2, 16, 10) == std::vector<int>{2, 2, 2, 2, 16, 16, 2, 2, 2, 2});
    CHECK(series(Shape::Constant, 2, 4, 3) == std::vector<int>{4, 4, 4});
    CHECK(series(Shape::Ramp, 4, 4, 5) == std::vector<int>{4, 4, 4, 4, 4});
}

TEST_CASE("canary metrics: two scrapes give the interval's claim statement percentiles",
          "[canary]") {
    const std::string before = R"(# TYPE aclaim_statement_duration_seconds histogram
aclaim_statement_duration_seconds_bucket{statement="claim",le="0.001"} 10
aclaim_statement_duration_seconds_bucket{statement="claim",le="0.01"} 10
aclaim_statement_duration_seconds_bucket{statement="claim",le="+Inf"} 10
aclaim_statement_duration_seconds_bucket{statement="renew",le="0.001"} 4
aclaim_statement_duration_seconds_bucket{statement="renew",le="0.01"} 4
aclaim_statement_duration_seconds_bucket{statement="renew",le="+Inf"} 4
aclaim_claim_duration_seconds_bucket{le="0.001"} 10
aclaim_claim_duration_seconds_bucket{le="0.01"} 10
aclaim_claim_duration_seconds_bucket{le="+Inf"} 10
aclaim_claims_total 10
)";
    const std::string after =
        R"(aclaim_statement_duration_seconds_bucket{statement="claim",le="0.001"} 60
aclaim_statement_duration_seconds_bucket{statement="claim",le="0.01"} 109
aclaim_statement_duration_seconds_bucket{statement="claim",le="+Inf"} 110
aclaim_claim_duration_seconds_bucket{le="0.001"} 10
aclaim_claim_duration_seconds_bucket{le="0.01"} 110
aclaim_claim_duration_seconds_bucket{le="+Inf"} 110
)";
    const auto t = timing_between(parse_histograms(before), parse_histograms(after));
    REQUIRE(t.available);
    CHECK(t.statements == 100);
    CHECK(t.statement_p50_ms == Approx(1));   // 50 of 100 within 1 ms
    CHECK(t.statement_p99_ms == Approx(10));  // the 99th within 10 ms
    CHECK(t.service_p50_ms == Approx(10));
    CHECK_FALSE(timing_between(parse_histograms(before), {}).available);
    CHECK(parse_histograms(before).count(kClaimStatementSeries) == 1);
}
