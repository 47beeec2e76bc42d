// The queue name's pattern, checked where a name is written (schema/baseline/tables.sql): an insert
// or an update of the queue with a bad name is refused with a constraint's SQLSTATE, and claims and
// completions, which never write the queue, never evaluate the check.

#include <catch2/catch.hpp>

#include "common/store/assignment_store.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"

using namespace aclaim;

TEST_CASE("a bad queue name is refused on insert and on update, as check_violation",
          "[store][queues]") {
    testing::StoreFixture f;
    const auto job = f.enqueue_one();
    auto conn = f.db.connect();
    const auto refused = [&](const std::string& sql) {
        try {
            pqxx::work t(*conn);
            t.exec(sql);
            t.commit();
        } catch (const pqxx::check_violation& e) {
            CHECK(std::string(e.what()).find("queue_name") != std::string::npos);
            return true;
        }
        return false;
    };
    CHECK(refused("INSERT INTO jobs (org_id, enqueued_at, queue) VALUES (1, now(), '-bad')"));
    CHECK(refused("INSERT INTO jobs (org_id, enqueued_at, queue) VALUES (1, now(), '')"));
    CHECK(refused("UPDATE jobs SET queue = 'bad name' WHERE id = " + std::to_string(job)));
    CHECK_FALSE(
        refused("UPDATE jobs SET queue = 'electrical.v2:a-b_c' WHERE id = " + std::to_string(job)));
    CHECK_FALSE(refused("UPDATE jobs SET queue = 'default' WHERE id = " + std::to_string(job)));

    // The row's own transitions write no queue and are not held up.
    const auto lease = f.claim("w");
    CHECK(lease.job_id == job);
    CHECK(f.store.complete({1, job, lease.generation, "w", "r"}, f.clock.now()).accepted());
    CHECK(testing::job_state(*conn, job) == "completed");
}
