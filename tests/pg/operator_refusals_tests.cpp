// A misspelt queue is refused, not made: the store's check that aclaimctl and the console share
// (aclaimctl's side runs as a process in tests/operator/ctl_exit_codes_test.py).

#include <catch2/catch.hpp>

#include "common/base/clock.hpp"
#include "common/ops/operator_store.hpp"
#include "common/store/assignment_store.hpp"
#include "console/views.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

long queue_rows(pqxx::connection& conn) {
    pqxx::read_transaction t(conn);
    return t.exec1("SELECT count(*) FROM job_queues")[0].as<long>();
}

}  // namespace

TEST_CASE("pause, resume and set refuse a queue the organization has never had", "[console][ctl]") {
    TestDatabase db;
    auto conn = db.connect();
    store::AssignmentStore store(db.dsn());
    const base::SystemClock clock;
    store::NewJob job{0, "panel 12", 3};
    job.queue = "electrical";
    store.enqueue(1, {job}, clock.now());
    ops::OperatorStore ops(*conn);

    CHECK_THROWS_AS(ops.pause(1, "electrcal", true, "ops", "typo", clock, false),
                    ops::UnknownQueue);
    CHECK_THROWS_AS(ops.configure(1, "electrcal", {}, "ops", clock.now(), false),
                    ops::UnknownQueue);
    // Another organization's queue is not this one's.
    CHECK_THROWS_AS(ops.pause(2, "electrical", true, "ops", "elsewhere", clock, false),
                    ops::UnknownQueue);
    CHECK(queue_rows(*conn) == 0);
    ops.pause(1, "electrical", true, "ops", "known", clock, false);
    // Asked for on purpose, a new queue is made; and one with settings is known from then on.
    ops.configure(1, "welding", {}, "ops", clock.now(), true);
    ops.pause(1, "welding", true, "ops", "known now", clock, false);
    CHECK(queue_rows(*conn) == 2);

    console::Views views(db.dsn(), "");
    const console::Operator all{"all", std::nullopt};
    using Kind = console::ActionResult::Kind;
    const auto refused = views.pause(all, 1, "electrcal", true, "typo");
    CHECK(refused.kind == Kind::NotFound);
    CHECK(refused.body["error"].get<std::string>().find("no queue 'electrcal'") !=
          std::string::npos);
    CHECK(views.pause(all, 1, "electrical", false, "back").kind == Kind::Done);
    CHECK(queue_rows(*conn) == 2);
}
