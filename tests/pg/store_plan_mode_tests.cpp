// StoreOptions::generic_plans_below: a transaction for a few jobs runs its statements on their
// generic plans, a large batch on the plans PostgreSQL chooses, and the setting is changed only
// when the choice changes.

#include <catch2/catch.hpp>

#include "common/store/assignment_store.hpp"
#include "tests/support/store_fixture.hpp"

using namespace aclaim;
using store::AssignmentStore;
using store::ClaimRequest;
using testing::kLease;
using testing::kT0;

namespace {

std::string plan_mode(AssignmentStore& store) {
    pqxx::nontransaction t(store.connection());
    return t.exec1("SHOW plan_cache_mode")[0].as<std::string>();
}

}  // namespace

TEST_CASE("small transactions run on generic plans, large batches on the planner's choice",
          "[store][plans]") {
    testing::TestDatabase db;
    store::StoreOptions options;
    options.generic_plans_below = 8;
    AssignmentStore store(db.dsn(), options);
    base::ManualClock clock(kT0);
    std::vector<store::NewJob> jobs(20, store::NewJob{0, "p", 3});
    store.enqueue(1, jobs, clock.now());
    CHECK(plan_mode(store) == "auto");

    // One job: generic plans.
    const auto one = store.claim(1, {"w", 1}, kLease, clock.now());
    REQUIRE(one.leases.size() == 1);
    CHECK(plan_mode(store) == "force_generic_plan");

    // Twelve jobs in one batch: the planner chooses again.
    const std::vector<ClaimRequest> many(3, ClaimRequest{"w", 4});
    const auto claimed = store.claim_batch(1, many, kLease, clock.now());
    CHECK(claimed.at(0).leases.size() == 4);
    CHECK(plan_mode(store) == "auto");

    // Back to a small one, and the answer is the same either way.
    const auto lease = one.leases[0];
    const auto done = store.complete({1, lease.job_id, lease.generation, "w", "r"}, clock.now());
    CHECK(done.accepted());
    CHECK(plan_mode(store) == "force_generic_plan");

    // Left at 0, the store never touches the setting.
    AssignmentStore plain(db.dsn());
    REQUIRE(plain.claim(1, {"x", 1}, kLease, clock.now()).leases.size() == 1);
    CHECK(plan_mode(plain) == "auto");
}
