// The console's workflow view (console/workflow_view.cpp) under row-level security: an operator
// sees the workflow of a job of an organization it may see, and nothing of another's.

#include <catch2/catch.hpp>

#include "common/store/assignment_store.hpp"
#include "console/views.hpp"
#include "tests/support/new_jobs.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

store::NewJob job(const std::string& payload, std::vector<store::JobId> depends_on = {}) {
    return workflow_job(base::kDefaultQueue, payload, std::move(depends_on));
}

}  // namespace

TEST_CASE("console workflow view: the workflow of a visible job, none of another organization's",
          "[console][workflow]") {
    StoreFixture f;
    const auto two = f.store.enqueue(
        2, {job("intake"), job("inspect", {store::job_of_this_call(1)})}, f.clock.now());
    const auto three = f.store.enqueue(
        3, {job("intake"), job("inspect", {store::job_of_this_call(1)})}, f.clock.now());
    const auto held = claim_one(f.store, f.clock.now(), "reviewer-2", 2);
    REQUIRE(held.job_id == two[0]);

    console::Views views(f.db.dsn(), "");
    const console::Operator all{"all", std::nullopt};
    const console::Operator of_two{"two", std::vector<store::OrgId>{2}};
    const console::Operator of_one_and_three{"one-three", std::vector<store::OrgId>{1, 3}};

    const auto w = views.workflow(of_two, two[1]);
    REQUIRE(w);
    CHECK((*w)["org_id"] == 2);
    REQUIRE((*w)["stages"].size() == 2);
    CHECK((*w)["stages"][0]["state"] == "assigned");
    CHECK((*w)["stages"][0]["reviewer"] == "reviewer-2");
    CHECK((*w)["stages"][1]["state"] == "waiting");
    CHECK((*w)["stages"][1]["waits_for"] == nlohmann::json::array({two[0]}));
    CHECK((*w)["edges"][0]["policy"] == "cancel");

    CHECK_FALSE(views.workflow(of_two, three[0]));
    CHECK_FALSE(views.workflow(of_two, 999999));
    const auto other = views.workflow(of_one_and_three, three[0]);
    REQUIRE(other);
    CHECK((*other)["org_id"] == 3);
    CHECK((*other)["stages"].size() == 2);
    CHECK_FALSE(views.workflow(of_one_and_three, two[0]));
    const auto every = views.workflow(all, two[0]);
    REQUIRE(every);
    CHECK((*every)["stages"].size() == 2);
}
