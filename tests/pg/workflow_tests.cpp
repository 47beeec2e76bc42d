// Workflow dependencies (schema/baseline/tables.sql) on the store, under a manual clock: a
// job waits until every dependency completed, the accepted completion of the last one unblocks
// it in its own transaction (a stale one unblocks nothing), failure policies cascade, bad edges
// are refused, and the checker proves no job ran before its dependencies.

#include <algorithm>
#include <barrier>
#include <catch2/catch.hpp>
#include <thread>

#include "common/ops/checker.hpp"
#include "common/ops/operator_store.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/store_sql.hpp"
#include "tests/support/new_jobs.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using store::DependencyPolicy;
using store::job_of_this_call;
using store::JobId;
using store::JobState;
using store::NewJob;

using testing::kLease;

namespace {

NewJob job(const std::string& payload, std::vector<JobId> depends_on = {},
           DependencyPolicy policy = DependencyPolicy::Cancel) {
    return testing::workflow_job(base::kDefaultQueue, payload, std::move(depends_on), policy);
}

struct Fixture : testing::StoreFixture {
    std::unique_ptr<pqxx::connection> ops_conn = db.connect();
    ops::OperatorStore ops{*ops_conn};

    std::vector<JobId> enqueue(const std::vector<NewJob>& jobs, store::OrgId org = 1) {
        return store.enqueue(org, jobs, clock.now());
    }
    std::string state(JobId id) { return testing::job_state(store.connection(), id); }
    long events(JobId id, const std::string& kind) {
        return testing::event_count(store.connection(), id, kind);
    }
    std::vector<store::Lease> claim_all(const std::string& worker, store::OrgId org = 1) {
        return store.claim(org, {worker, 50}, kLease, clock.now()).leases;
    }
    store::TransitionRequest done(const store::Lease& l, const std::string& worker) const {
        store::TransitionRequest q{l.org_id, l.job_id, l.generation, worker};
        q.result_ref = "ref-" + std::to_string(l.job_id);
        return q;
    }
    long count(const std::string& query) {
        pqxx::read_transaction t(store.connection());
        return t.exec1(query)[0].as<long>();
    }
    ops::CheckReport check() {
        auto conn = db.connect();
        return ops::check(ops::load_history(*conn));
    }
    /// The enqueue's error message, or "" when it was accepted.
    std::string refusal(const std::vector<NewJob>& jobs, store::OrgId org = 1) {
        try {
            enqueue(jobs, org);
        } catch (const pqxx::sql_error& e) {
            return e.what();
        }
        return "";
    }
};

std::vector<JobId> ids_of(const std::vector<store::Lease>& leases) {
    std::vector<JobId> out;
    for (const auto& l : leases) out.push_back(l.job_id);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("a fan-in job waits until all three of its dependencies completed, then is claimable",
          "[pg][workflow]") {
    Fixture f;
    const auto ids = f.enqueue(
        {job("electrical"), job("plumbing"), job("structural"),
         job("approval", {job_of_this_call(1), job_of_this_call(2), job_of_this_call(3)})});
    const JobId approval = ids[3];
    CHECK(f.state(approval) == "waiting");

    // Only the three inspections are handed out, however many jobs the claim asks for.
    const auto leases = f.claim_all("w1");
    CHECK(ids_of(leases) == std::vector<JobId>{ids[0], ids[1], ids[2]});

    f.clock.advance(base::kSeconds);
    REQUIRE(f.store.complete(f.done(leases[0], "w1"), f.clock.now()).accepted());
    REQUIRE(f.store.complete(f.done(leases[1], "w1"), f.clock.now()).accepted());
    CHECK(f.state(approval) == "waiting");
    CHECK(f.claim_all("w2").empty());

    // The third completion, in a coalesced batch, unblocks it.
    const std::vector<store::TransitionRequest> last{f.done(leases[2], "w1")};
    REQUIRE(f.store.complete_batch(last, f.clock.now()).at(0).accepted());
    CHECK(f.state(approval) == "pending");
    CHECK(f.events(approval, "unblocked") == 1);

    const auto next = f.claim_all("w2");
    REQUIRE(next.size() == 1);
    CHECK(next[0].job_id == approval);
    REQUIRE(f.store.complete(f.done(next[0], "w2"), f.clock.now()).accepted());
    const auto report = f.check();
    INFO((report.violations.empty() ? "" : report.violations[0].evidence));
    CHECK(report.ok());
}

TEST_CASE("a stale completion of the last dependency unblocks nothing; the current one does",
          "[pg][workflow]") {
    Fixture f;
    const auto ids = f.enqueue({job("inspection"), job("approval", {job_of_this_call(1)})});
    const auto first = f.claim_all("w1");
    REQUIRE(first.size() == 1);
    // The lease runs out and the reaper takes it back: the next claim holds a newer generation.
    f.clock.advance(kLease + base::kSeconds);
    REQUIRE(f.store.reclaim_expired(f.clock.now(), 10).size() == 1);
    const auto second = f.claim_all("w2");
    REQUIRE(second.size() == 1);
    REQUIRE(second[0].generation > first[0].generation);

    const auto stale = f.store.complete(f.done(first[0], "w1"), f.clock.now());
    CHECK_FALSE(stale.accepted());
    CHECK(f.state(ids[1]) == "waiting");
    CHECK(f.events(ids[1], "unblocked") == 0);

    REQUIRE(f.store.complete(f.done(second[0], "w2"), f.clock.now()).accepted());
    CHECK(f.state(ids[1]) == "pending");
}

TEST_CASE("no claimer sees the dependent before the unblocking completion commits",
          "[pg][workflow]") {
    Fixture f;
    const auto ids = f.enqueue({job("inspection"), job("approval", {job_of_this_call(1)})});
    const auto lease = f.claim_all("w1").at(0);

    // The completion runs in a transaction of its own that stays open.
    auto conn = f.db.connect();
    pqxx::work completing(*conn);
    const auto done = completing.exec_params(store::sql::kComplete.text, lease.org_id, lease.job_id,
                                             lease.generation, "w1", "ref", f.clock.now());
    REQUIRE(done.size() == 1);
    CHECK(done[0]["settled"].as<int>() == 1);
    CHECK(f.claim_all("w2").empty());
    CHECK(f.state(ids[1]) == "waiting");
    completing.commit();

    const auto next = f.claim_all("w2");
    REQUIRE(next.size() == 1);
    CHECK(next[0].job_id == ids[1]);
}

TEST_CASE("dependencies completed concurrently unblock their dependent exactly once",
          "[pg][workflow]") {
    Fixture f;
    store::AssignmentStore other{f.db.dsn()};
    for (int round = 0; round < 10; ++round) {
        const auto ids = f.enqueue(
            {job("a"), job("b"), job("fan-in", {job_of_this_call(1), job_of_this_call(2)})});
        auto leases = f.claim_all("w");
        REQUIRE(leases.size() == 2);
        std::barrier start(2);
        std::array<bool, 2> accepted{};
        std::array<store::AssignmentStore*, 2> stores{&f.store, &other};
        std::vector<std::thread> threads;
        for (int i = 0; i < 2; ++i) {
            threads.emplace_back([&, i] {
                const auto q = f.done(leases[static_cast<std::size_t>(i)], "w");
                start.arrive_and_wait();
                accepted[static_cast<std::size_t>(i)] =
                    stores[static_cast<std::size_t>(i)]->complete(q, f.clock.now()).accepted();
            });
        }
        for (auto& t : threads) t.join();
        REQUIRE(accepted[0]);
        REQUIRE(accepted[1]);
        CHECK(f.state(ids[2]) == "pending");
        CHECK(f.events(ids[2], "unblocked") == 1);
        const auto next = f.claim_all("w");
        REQUIRE(next.size() == 1);
        REQUIRE(f.store.complete(f.done(next[0], "w"), f.clock.now()).accepted());
    }
    CHECK(f.check().ok());
}

TEST_CASE("a failed dependency cancels its dependents in cascade, or runs those with policy run",
          "[pg][workflow]") {
    Fixture f;
    const auto ids = f.enqueue({job("inspection"), job("approval", {job_of_this_call(1)}),
                                job("archive", {job_of_this_call(2)}),
                                job("notify", {job_of_this_call(1)}, DependencyPolicy::Run)});
    const auto lease = f.claim_all("w1").at(0);
    store::TransitionRequest q{lease.org_id, lease.job_id, lease.generation, "w1"};
    q.reason = "site closed";
    q.retryable = false;
    REQUIRE(f.store.fail(q, f.clock.now()).accepted());

    CHECK(f.state(ids[0]) == "failed");
    CHECK(f.state(ids[1]) == "cancelled");
    CHECK(f.state(ids[2]) == "cancelled");  // the dependent of a cancelled dependent
    CHECK(f.state(ids[3]) == "pending");    // run anyway
    CHECK(f.count("SELECT count(*) FROM job_outcomes WHERE outcome = 'cancelled'") == 2);
    {
        pqxx::read_transaction t(f.store.connection());
        CHECK(t.exec_params1("SELECT worker FROM job_events WHERE job_id = $1 AND kind = "
                             "'cancelled'",
                             ids[2])[0]
                  .as<std::string>() == "dependency " + std::to_string(ids[1]));
    }
    CHECK(f.check().ok());
}

TEST_CASE("the reaper's discard and an operator's cancel apply the dependents' policies",
          "[pg][workflow]") {
    Fixture f;
    NewJob once = job("flaky");
    once.max_attempts = 1;
    const auto ids = f.enqueue({once, job("after-flaky", {job_of_this_call(1)}), job("manual"),
                                job("after-manual", {job_of_this_call(3)})});
    const auto leases = f.claim_all("w1");
    REQUIRE(leases.size() == 2);
    f.clock.advance(kLease + base::kSeconds);
    f.store.reclaim_expired(f.clock.now(), 10);
    CHECK(f.state(ids[0]) == "discarded");
    CHECK(f.state(ids[1]) == "cancelled");

    // The manual job went back to pending (attempts left); the operator cancels it.
    REQUIRE(f.state(ids[2]) == "pending");
    f.ops.cancel({ids[2]}, "ops-alice", "duplicate visit", f.clock.now());
    CHECK(f.state(ids[3]) == "cancelled");

    // A waiting job is cancellable itself, and its dependency is left alone.
    const auto more = f.enqueue({job("x"), job("y", {job_of_this_call(1)})});
    const auto cancelled = f.ops.cancel({more[1]}, "ops-alice", "not needed", f.clock.now());
    REQUIRE(cancelled.size() == 1);
    CHECK(f.state(more[1]) == "cancelled");
    CHECK(f.state(more[0]) == "pending");
}

TEST_CASE("a dependency that already ended when the dependent is enqueued settles at once",
          "[pg][workflow]") {
    Fixture f;
    const JobId a = f.enqueue({job("a")}).at(0);
    const auto lease = f.claim_all("w1").at(0);
    REQUIRE(f.store.complete(f.done(lease, "w1"), f.clock.now()).accepted());
    const JobId b = f.enqueue({job("b", {a})}).at(0);
    CHECK(f.state(b) == "pending");
    f.ops.cancel({f.enqueue({job("c")}).at(0)}, "ops", "gone", f.clock.now());
    const JobId c = f.count("SELECT max(id) FROM jobs");
    CHECK(f.state(f.enqueue({job("d", {c})}).at(0)) == "cancelled");
    CHECK(f.state(f.enqueue({job("e", {c}, DependencyPolicy::Run)}).at(0)) == "pending");
}

TEST_CASE("cycles, unknown jobs and another organization's jobs are refused, enqueueing nothing",
          "[pg][workflow]") {
    Fixture f;
    const JobId other_org = f.enqueue({job("theirs")}, 2).at(0);
    const long before = f.count("SELECT count(*) FROM jobs");

    CHECK_THAT(f.refusal({job("a", {job_of_this_call(2)}), job("b", {job_of_this_call(1)})}),
               Catch::Contains("form a cycle"));
    CHECK_THAT(f.refusal({job("self", {job_of_this_call(1)})}), Catch::Contains("cycle"));
    CHECK_THAT(f.refusal({job("a", {999999})}),
               Catch::Contains("dependency 999999 is not a job of organization 1 (no such job"));
    CHECK_THAT(f.refusal({job("a", {other_org})}),
               Catch::Contains("is not a job of organization 1"));
    CHECK_THAT(f.refusal({job("a", {job_of_this_call(5)})}), Catch::Contains("is invalid"));
    CHECK(f.count("SELECT count(*) FROM jobs") == before);
    CHECK(f.count("SELECT count(*) FROM job_dependencies") == 0);
}

TEST_CASE("a job nothing depends on is completed without touching job_dependencies",
          "[pg][workflow]") {
    Fixture f;
    const auto ids = f.enqueue({job("plain"), job("parent"), job("child", {job_of_this_call(2)})});
    const auto leases = f.claim_all("w1");
    REQUIRE(leases.size() == 2);
    // The completion statement in a transaction of its own, and the reads and writes of
    // job_dependencies that transaction made so far (pg_stat_xact_user_tables).
    auto touched = [&](const store::Lease& l) {
        auto conn = f.db.connect();
        pqxx::work t(*conn);
        REQUIRE(t.exec_params(store::sql::kComplete.text, l.org_id, l.job_id, l.generation, "w1",
                              "ref", f.clock.now())
                    .size() == 1);
        const long n = t.exec1(
                            "SELECT seq_scan + coalesce(idx_scan, 0) + n_tup_upd + n_tup_ins "
                            "FROM pg_stat_xact_user_tables WHERE relname = 'job_dependencies'")[0]
                           .as<long>();
        t.commit();
        return n;
    };
    REQUIRE(leases[0].job_id == ids[0]);
    CHECK(touched(leases[0]) == 0);
    CHECK(touched(leases[1]) > 0);  // the control: a job with a dependent does read and write it
    CHECK(f.state(ids[2]) == "pending");
}

TEST_CASE("the checker flags a job claimed before its dependency completed", "[pg][workflow]") {
    Fixture f;
    const auto ids = f.enqueue({job("a"), job("b")});
    const auto leases = f.claim_all("w1");
    REQUIRE(leases.size() == 2);
    REQUIRE(f.check().ok());
    // Forged: b is recorded as depending on a, which never completed before b's claim.
    {
        pqxx::work t(f.store.connection());
        t.exec_params(
            "INSERT INTO job_dependencies (org_id, job_id, depends_on) VALUES (1, $1, $2)", ids[1],
            ids[0]);
        t.commit();
    }
    const auto report = f.check();
    REQUIRE(report.violations.size() == 1);
    CHECK(report.violations[0].invariant == ops::Invariant::DependenciesFirst);
    CHECK(report.violations[0].job_id == ids[1]);
}

TEST_CASE("a parked dependency finished by its callback unblocks its dependent; a refusal does not",
          "[pg][workflow][park]") {
    Fixture f;
    const auto ids = f.enqueue({job("lab test"), job("approval", {job_of_this_call(1)})});
    const auto held = f.claim_all("w1");
    REQUIRE(held.size() == 1);
    store::TransitionRequest park{1, held[0].job_id, held[0].generation, "w1"};
    park.park_deadline = f.clock.now() + std::chrono::minutes(10);
    park.token = std::string(64, 'c');
    park.note = "sent to the lab";
    REQUIRE(f.store.park(park, f.clock.now()).accepted());
    auto finish = [&](const std::string& token) {
        pqxx::work t(f.store.connection());
        const auto accepted = t.exec_params1(
                                   "SELECT accepted FROM aclaim_finish_parked($1, "
                                   "'completed', 'ref-lab', now_us => $2)",
                                   token, base::to_micros(f.clock.now()))[0]
                                  .as<bool>();
        t.commit();
        return accepted;
    };
    CHECK_FALSE(finish(std::string(64, 'd')));  // forged: names no job
    CHECK(f.state(ids[1]) == "waiting");
    CHECK(finish(park.token));
    CHECK(f.state(ids[0]) == "completed");
    CHECK(f.state(ids[1]) == "pending");
    CHECK(f.events(ids[1], "unblocked") == 1);
    CHECK_FALSE(finish(park.token));  // the replay unblocks nothing more
    CHECK(f.events(ids[1], "unblocked") == 1);
    const auto next = f.claim_all("w2");
    REQUIRE(next.size() == 1);
    CHECK(next[0].job_id == ids[1]);
    CHECK(f.check().ok());
}
