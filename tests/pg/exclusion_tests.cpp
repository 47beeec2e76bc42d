// Separation of duties (schema/baseline/tables.sql) on the store, with real threads claiming
// at once on their own connections: a job is never handed to a reviewer it excludes, by name or as
// the completer of a job it names, by a single or a coalesced claim, including the claims that
// race the enqueue that first flags a queue; a coalesced claim places it in a slot it allows; a
// job every claimer is excluded from stays pending; and a queue that never received a job with
// exclusions runs the claim plans without the exclusion dimension.

#include <array>
#include <barrier>
#include <catch2/catch.hpp>
#include <memory>
#include <thread>

#include "common/ops/checker.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/claim_plan.hpp"
#include "common/store/new_job_arrays.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/store_sql.hpp"
#include "tests/support/process.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using store::ClaimRequest;
using store::job_of_this_call;
using store::JobId;
using store::NewJob;

using testing::kLease;

namespace {

NewJob job(const std::string& payload, std::vector<std::string> exclude_keys = {},
           std::vector<JobId> exclude_completers_of = {}, const std::string& queue = "default") {
    NewJob j;
    j.payload = payload;
    j.queue = queue;
    j.exclude_keys = std::move(exclude_keys);
    j.exclude_completers_of = std::move(exclude_completers_of);
    return j;
}

struct Fixture : testing::StoreFixture {
    std::vector<JobId> enqueue(const std::vector<NewJob>& jobs) {
        return store.enqueue(1, jobs, clock.now());
    }
    std::vector<store::Lease> claim_as(const std::string& worker, int n = 10,
                                       std::vector<std::string> queues = {}) {
        return store.claim(1, {worker, n, std::move(queues)}, kLease, clock.now()).leases;
    }
    std::string state(JobId id) { return testing::job_state(store.connection(), id); }
    std::string assignee(JobId id) {
        pqxx::read_transaction t(store.connection());
        const auto r = t.exec_params1("SELECT coalesce(assignee, '') FROM jobs WHERE id = $1", id);
        return r[0].as<std::string>();
    }
    /// Jobs held or completed by a reviewer one of their exclusions names, or by the completer
    /// of a job one of them names.
    long violations() {
        pqxx::read_transaction t(store.connection());
        return t
            .exec1(R"SQL(
SELECT count(*) FROM jobs j JOIN job_exclusions x ON x.job_id = j.id
  LEFT JOIN jobs d ON d.id = x.completer_of
 WHERE j.assignee IS NOT NULL
   AND (j.assignee = x.excluded_key OR (d.state = 'completed' AND d.assignee = j.assignee))
)SQL")[0]
            .as<long>();
    }
    store::TransitionRequest done(const store::Lease& l, const std::string& worker) const {
        store::TransitionRequest q{l.org_id, l.job_id, l.generation, worker};
        q.result_ref = "ref-" + std::to_string(l.job_id);
        return q;
    }
    ops::CheckReport check() {
        auto conn = db.connect();
        return ops::check(ops::load_history(*conn));
    }
};

const std::vector<std::string> kKeys{"K1", "K2", "K3", "K4"};

}  // namespace

TEST_CASE("a job excluding reviewers is never handed to them by concurrent single claims",
          "[exclusions][claim]") {
    Fixture f;
    constexpr int kRounds = 25;
    std::vector<std::unique_ptr<store::AssignmentStore>> stores;
    for (std::size_t i = 0; i < kKeys.size(); ++i) {
        stores.push_back(std::make_unique<store::AssignmentStore>(f.db.dsn()));
    }
    std::vector<JobId> excluded;
    long taken_by_allowed = 0;
    for (int round = 0; round < kRounds; ++round) {
        // One job that excludes K1 and K2, ahead of two that exclude nobody.
        NewJob x = job("x", {"K1", "K2"});
        x.priority = 5;
        const auto ids = f.enqueue({x, job("a"), job("b")});
        excluded.push_back(ids[0]);
        std::barrier start(static_cast<std::ptrdiff_t>(kKeys.size()));
        std::vector<std::vector<JobId>> got(kKeys.size());
        std::vector<std::thread> threads;
        for (std::size_t i = 0; i < kKeys.size(); ++i) {
            threads.emplace_back([&, i] {
                start.arrive_and_wait();
                for (const auto& l :
                     stores[i]->claim(1, {kKeys[i], 1}, kLease, f.clock.now()).leases)
                    got[i].push_back(l.job_id);
            });
        }
        for (auto& t : threads) t.join();
        for (std::size_t i = 0; i < kKeys.size(); ++i) {
            for (const JobId id : got[i]) {
                if (id != ids[0]) continue;
                CHECK(kKeys[i] != "K1");
                CHECK(kKeys[i] != "K2");
                ++taken_by_allowed;
            }
        }
        // Whoever did not get it this round: K3 does now, if it is still pending.
        if (f.state(ids[0]) == "pending") {
            const auto k3 = f.claim_as("K3", 1);
            REQUIRE(k3.size() == 1);
            CHECK(k3[0].job_id == ids[0]);
        }
        CHECK(f.assignee(ids[0]) != "K1");
        CHECK(f.assignee(ids[0]) != "K2");
    }
    CHECK(f.violations() == 0);
    CHECK(std::string(stores[0]->last_claim_statement()) ==
          store::ClaimPlan{.excluding = true}.name());
    INFO("rounds in which K3 or K4 won the race: " << taken_by_allowed);
    CHECK(taken_by_allowed > 0);
}

TEST_CASE("a job excluding reviewers is never handed to them by concurrent coalesced claims",
          "[exclusions][claim]") {
    Fixture f;
    constexpr int kRounds = 25;
    std::vector<std::unique_ptr<store::AssignmentStore>> stores;
    for (int i = 0; i < 2; ++i) {
        stores.push_back(std::make_unique<store::AssignmentStore>(f.db.dsn()));
    }
    // Two batches at once, each holding an excluded and an allowed slot, in both orders.
    const std::vector<std::vector<ClaimRequest>> batches{{{"K1", 1}, {"K3", 1}},
                                                         {{"K4", 1}, {"K2", 1}}};
    for (int round = 0; round < kRounds; ++round) {
        NewJob x = job("x", {"K1", "K2"});
        x.priority = 5;
        const auto ids = f.enqueue({x, job("a"), job("b"), job("c")});
        std::barrier start(2);
        std::vector<std::vector<store::ClaimOutcome>> got(2);
        std::vector<std::thread> threads;
        for (std::size_t i = 0; i < 2; ++i) {
            threads.emplace_back([&, i] {
                start.arrive_and_wait();
                got[i] = stores[i]->claim_batch(1, batches[i], kLease, f.clock.now());
            });
        }
        for (auto& t : threads) t.join();
        for (std::size_t i = 0; i < 2; ++i) {
            REQUIRE(got[i].size() == 2);
            for (std::size_t k = 0; k < 2; ++k) {
                for (const auto& l : got[i][k].leases) {
                    if (l.job_id == ids[0])
                        CHECK((batches[i][k].worker == "K3" || batches[i][k].worker == "K4"));
                }
            }
        }
        // The excluded job is the best one and each batch holds an allowed slot: one takes it.
        CHECK(f.state(ids[0]) == "assigned");
        const std::string holder = f.assignee(ids[0]);
        CHECK((holder == "K3" || holder == "K4"));
    }
    CHECK(f.violations() == 0);
    CHECK(std::string(stores[0]->last_claim_statement()) ==
          store::ClaimPlan{.excluding = true, .batch = true}.name());
}

TEST_CASE("a coalesced claim places an excluded job in a slot it allows", "[exclusions][claim]") {
    Fixture f;
    // The best job excludes K1, who holds the first slot; in claim order it would go there.
    NewJob x = job("x", {"K1"});
    x.priority = 9;
    const auto ids = f.enqueue({x, job("a")});
    const std::vector<ClaimRequest> batch{{"K1", 1}, {"K3", 1}};
    const auto out = f.store.claim_batch(1, batch, kLease, f.clock.now());
    REQUIRE(out.size() == 2);
    REQUIRE(out[0].leases.size() == 1);
    REQUIRE(out[1].leases.size() == 1);
    CHECK(out[0].leases[0].job_id == ids[1]);
    CHECK(out[1].leases[0].job_id == ids[0]);
    CHECK(f.assignee(ids[0]) == "K3");

    SECTION("and a job excluded for every slot of the batch is not taken") {
        const auto y = f.enqueue({job("y", {"K1", "K2"})});
        const auto again = f.store.claim_batch(1, std::vector<ClaimRequest>{{"K1", 2}, {"K2", 1}},
                                               kLease, f.clock.now());
        for (const auto& o : again) CHECK(o.leases.empty());
        CHECK(f.state(y[0]) == "pending");
    }
}

TEST_CASE("a job every claimer is excluded from stays pending", "[exclusions][claim]") {
    Fixture f;
    const auto ids = f.enqueue({job("x", {"K1", "K2"})});
    CHECK(f.claim_as("K1").empty());
    CHECK(f.claim_as("K2").empty());
    for (const auto& o : f.store.claim_batch(1, std::vector<ClaimRequest>{{"K1", 3}, {"K2", 3}},
                                             kLease, f.clock.now()))
        CHECK(o.leases.empty());
    CHECK(f.state(ids[0]) == "pending");
    const auto k3 = f.claim_as("K3");
    REQUIRE(k3.size() == 1);
    CHECK(k3[0].job_id == ids[0]);
}

TEST_CASE("not whoever completed job X: its completer never gets the job", "[exclusions][claim]") {
    Fixture f;
    // Job 2 is the review of job 1, in the same call; job 3 reviews job 1 too, enqueued later.
    const auto ids = f.enqueue({job("work"), job("review", {}, {job_of_this_call(1)})});
    const auto later = f.enqueue({job("second review", {}, {ids[0]})});

    // While job 1 has not ended, nobody gets its reviews (its completer is not known yet).
    const auto work = f.claim_as("K1", 1);
    REQUIRE(work.size() == 1);
    REQUIRE(work[0].job_id == ids[0]);
    CHECK(f.claim_as("K2").empty());
    CHECK(f.state(ids[1]) == "pending");

    REQUIRE(f.store.complete(f.done(work[0], "K1"), f.clock.now()).accepted());
    CHECK(f.claim_as("K1").empty());
    for (const auto& o :
         f.store.claim_batch(1, std::vector<ClaimRequest>{{"K1", 2}}, kLease, f.clock.now()))
        CHECK(o.leases.empty());
    const auto reviews = f.claim_as("K2");
    REQUIRE(reviews.size() == 2);
    CHECK(f.assignee(ids[1]) == "K2");
    CHECK(f.assignee(later[0]) == "K2");
    for (const auto& l : reviews) {
        REQUIRE(f.store.complete(f.done(l, "K2"), f.clock.now()).accepted());
    }
    CHECK(f.violations() == 0);
    const auto report = f.check();
    CHECK(report.ok());
}

TEST_CASE("claims racing the enqueue that first flags a queue never take an excluded job",
          "[exclusions][claim]") {
    Fixture f;
    // Two single claims and a coalesced one, each on its own connection, each of which has
    // claimed before: its epoch is known, and nothing it read says the queue has exclusions.
    constexpr int kClaimers = 3;
    const std::string queue = "review";
    std::vector<std::unique_ptr<store::AssignmentStore>> stores;
    std::vector<int> pids;
    for (int i = 0; i < kClaimers; ++i) {
        stores.push_back(std::make_unique<store::AssignmentStore>(f.db.dsn()));
        pids.push_back(stores.back()->connection().backendpid());
        (void)stores.back()->claim(1, {"K1", 1, {queue}}, kLease, f.clock.now());
    }
    const std::array<bool, kClaimers> batch{false, false, true};

    // The store's own enqueue statement, with the arrays the store binds, in a transaction held
    // open: it has flagged the queue and advanced the epoch under the organization's queue lock,
    // and its job is not visible yet.
    auto enqueuer = f.db.connect();
    const int enqueuer_pid = enqueuer->backendpid();
    pqxx::work enqueue(*enqueuer);
    const auto a = store::new_job_arrays({job("x", {"K1"}, {}, queue)});
    REQUIRE(a.exclude_n);
    const JobId excluded =
        enqueue
            .exec_params(store::sql::kEnqueueExcluding.text, 1, f.clock.now(), a.queues, a.payloads,
                         a.priorities, a.run_at_us, a.max_attempts, a.backoff_base_us,
                         a.backoff_cap_us, a.run_timeout_us, a.dedupe_keys, base::Duration{0},
                         a.depends_n, a.depends_on, a.on_failure, a.exclude_n, a.exclude_keys,
                         a.exclude_jobs)[0]["id"]
            .as<JobId>();

    // Catch's assertions are not thread-safe: the threads only record, the test checks.
    std::vector<std::size_t> taken(kClaimers, 99);
    std::vector<std::string> statement(kClaimers);
    std::vector<std::thread> threads;
    for (int i = 0; i < kClaimers; ++i) {
        threads.emplace_back([&, i] {
            auto& s = *stores[static_cast<std::size_t>(i)];
            const auto n = static_cast<std::size_t>(i);
            if (batch[n]) {
                const auto out = s.claim_batch(1, std::vector<ClaimRequest>{{"K1", 1, {queue}}},
                                               kLease, f.clock.now());
                taken[n] = out.at(0).leases.size();
            } else {
                taken[n] = s.claim(1, {"K1", 1, {queue}}, kLease, f.clock.now()).leases.size();
            }
            statement[n] = s.last_claim_statement();
        });
    }
    // The enqueue commits only once every claim is seen waiting on it, so that each claim's
    // first statement began before the flag committed and the claim itself runs after it.
    auto watcher = f.db.connect();
    int waiting = 0;
    const bool all_waiting = testing::eventually(
        [&] {
            pqxx::read_transaction t(*watcher);
            waiting = t.exec_params1(
                           "SELECT count(*) FROM pg_stat_activity "
                           "WHERE pid = ANY($1::int[]) "
                           "AND $2::int = ANY (pg_blocking_pids(pid))",
                           "{" + std::to_string(pids[0]) + "," + std::to_string(pids[1]) + "," +
                               std::to_string(pids[2]) + "}",
                           enqueuer_pid)[0]
                          .as<int>();
            return waiting == kClaimers;
        },
        std::chrono::seconds(10));
    enqueue.commit();
    for (auto& t : threads) t.join();
    INFO(waiting << " of " << kClaimers << " claims were seen waiting on the open enqueue");
    REQUIRE(all_waiting);

    for (int i = 0; i < kClaimers; ++i) {
        const auto n = static_cast<std::size_t>(i);
        INFO("claimer " << i << (batch[n] ? " (coalesced)" : " (single)"));
        CHECK(taken[n] == 0);
        // The epoch they read after the lock moved: each ran the exclusion-aware statement, though
        // its own snapshot of the queue's flag predates the commit.
        CHECK(statement[n] == (batch[n] ? store::ClaimPlan{.excluding = true, .batch = true}.name()
                                        : store::ClaimPlan{.excluding = true}.name()));
    }
    CHECK(f.state(excluded) == "pending");
    CHECK(f.violations() == 0);
    // The job was there to take for anyone it does not exclude.
    const auto k2 = f.claim_as("K2", 1, {queue});
    REQUIRE(k2.size() == 1);
    CHECK(k2[0].job_id == excluded);
}

TEST_CASE("a queue without exclusions runs the claim statements that ran before them",
          "[exclusions][claim]") {
    Fixture f;
    // A job with exclusions in another queue flags that queue only.
    f.enqueue({job("x", {"K1"}, {}, "reviews"), job("a", {}, {}, "plain"),
               job("b", {}, {}, "plain"), job("c", {}, {}, "plain")});
    // The first claim of a connection does not know the epoch yet and runs the aware variant.
    (void)f.claim_as("K1", 1, {"plain"});
    CHECK(std::string(f.store.last_claim_statement()) ==
          store::ClaimPlan{.excluding = true}.name());
    REQUIRE(f.claim_as("K1", 1, {"plain"}).size() == 1);
    CHECK(std::string(f.store.last_claim_statement()) == store::ClaimPlan{}.name());
    const auto batch = f.store.claim_batch(1, std::vector<ClaimRequest>{{"K1", 1, {"plain"}}},
                                           kLease, f.clock.now());
    REQUIRE(batch.at(0).leases.size() == 1);
    CHECK(std::string(f.store.last_claim_statement()) == store::ClaimPlan{.batch = true}.name());

    // The flagged queue runs the aware ones; so does the next claim after any queue is flagged.
    (void)f.claim_as("K2", 1, {"reviews"});
    CHECK(std::string(f.store.last_claim_statement()) ==
          store::ClaimPlan{.excluding = true}.name());
    f.enqueue({job("y", {"K1"}, {}, "more-reviews"), job("d", {}, {}, "plain")});
    (void)f.claim_as("K1", 1, {"plain"});
    CHECK(std::string(f.store.last_claim_statement()) ==
          store::ClaimPlan{.excluding = true}.name());
    (void)f.claim_as("K1", 1, {"plain"});
    CHECK(std::string(f.store.last_claim_statement()) == store::ClaimPlan{}.name());
    pqxx::read_transaction t(f.store.connection());
    CHECK(t.exec1("SELECT string_agg(queue, ',' ORDER BY queue) FROM job_queues "
                  "WHERE has_exclusions")[0]
              .as<std::string>() == "more-reviews,reviews");
}

TEST_CASE("exclusions that name a job of another organization, or themselves, are refused",
          "[exclusions]") {
    Fixture f;
    const auto other = f.store.enqueue(2, {job("theirs")}, f.clock.now());
    CHECK_THROWS_AS(f.enqueue({job("x", {}, {other[0]})}), pqxx::sql_error);
    CHECK_THROWS_AS(f.enqueue({job("x", {}, {job_of_this_call(1)})}), pqxx::sql_error);
    CHECK_THROWS_AS(f.enqueue({job("x", {""})}), pqxx::sql_error);
    pqxx::read_transaction t(f.store.connection());
    CHECK(t.exec1("SELECT count(*) FROM jobs WHERE org_id = 1")[0].as<long>() == 0);
}

TEST_CASE("weighted and rate-limited queues with exclusions run the aware variants",
          "[exclusions][claim][weights][rate]") {
    Fixture f;
    const auto ids = f.enqueue({job("x", {"K1"}, {}, "w"), job("y", {"K1"}, {}, "r")});
    {
        pqxx::work t(f.store.connection());
        t.exec("UPDATE job_queues SET weight = 2 WHERE org_id = 1 AND queue = 'w'");
        t.exec(
            "UPDATE job_queues SET rate_per_s = 100, rate_burst = 10 "
            "WHERE org_id = 1 AND queue = 'r'");
        t.commit();
    }
    CHECK(f.claim_as("K1", 5, {"w"}).empty());
    CHECK(std::string(f.store.last_claim_statement()) ==
          store::ClaimPlan{.weighted = true, .excluding = true}.name());
    CHECK(f.claim_as("K1", 5, {"r"}).empty());
    CHECK(std::string(f.store.last_claim_statement()) ==
          store::ClaimPlan{.rated = true, .excluding = true}.name());
    const auto weighted = f.store.claim_batch(
        1, std::vector<ClaimRequest>{{"K1", 1, {"w"}}, {"K3", 1, {"w"}}}, kLease, f.clock.now());
    CHECK(std::string(f.store.last_claim_statement()) ==
          store::ClaimPlan{.weighted = true, .excluding = true, .batch = true}.name());
    REQUIRE(weighted.size() == 2);
    CHECK(weighted[0].leases.empty());
    REQUIRE(weighted[1].leases.size() == 1);
    CHECK(weighted[1].leases[0].job_id == ids[0]);
    const auto rated = f.store.claim_batch(
        1, std::vector<ClaimRequest>{{"K1", 1, {"r"}}, {"K3", 1, {"r"}}}, kLease, f.clock.now());
    CHECK(std::string(f.store.last_claim_statement()) ==
          store::ClaimPlan{.rated = true, .excluding = true, .batch = true}.name());
    REQUIRE(rated.size() == 2);
    CHECK(rated[0].leases.empty());
    REQUIRE(rated[1].leases.size() == 1);
    CHECK(rated[1].leases[0].job_id == ids[1]);
    CHECK(f.violations() == 0);
}

TEST_CASE(
    "a mixed transaction sent in one message, whose queue was flagged since, never hands a job "
    "to a reviewer it excludes",
    "[exclusions][batch][mixed]") {
    Fixture f;
    f.enqueue({job("plain-1"), job("plain-2")});
    // A first mixed transaction of the default queue teaches the store its claim statement: the
    // one for queues without exclusions.
    const std::vector<ClaimRequest> k3{{"K3", 1}}, k1{{"K1", 1}}, k2{{"K2", 1}};
    const auto first = f.store.complete_and_claim({}, 1, k3, kLease, f.clock.now());
    REQUIRE(first.claims.at(0).leases.size() == 1);
    REQUIRE(f.store.sent_together() == 0);

    // The first job with exclusions in that queue, enqueued on another connection, ranked first.
    store::AssignmentStore other(f.db.dsn());
    NewJob x = job("x", {"K1"});
    x.priority = 9;
    const JobId excluded = other.enqueue(1, {x}, f.clock.now()).at(0);

    // The store sends the statement it knows, which would hand x to K1; the claim's locks refuse
    // it, nothing sent stays, and the transaction runs again with the exclusion-aware statement.
    const auto held = first.claims[0].leases[0];
    const std::vector<store::TransitionRequest> done(1, f.done(held, "K3"));
    const auto second = f.store.complete_and_claim(done, 1, k1, kLease, f.clock.now());
    CHECK(f.store.sent_together() == 0);
    CHECK(second.completions.at(0).accepted());
    REQUIRE(second.claims.at(0).leases.size() == 1);
    CHECK(second.claims[0].leases[0].job_id != excluded);
    CHECK(f.state(excluded) == "pending");
    CHECK(testing::event_count(f.store.connection(), held.job_id, "completed") == 1);

    // The next one goes in one message with the statement the queue now calls for.
    const auto third = f.store.complete_and_claim({}, 1, k2, kLease, f.clock.now());
    CHECK(f.store.sent_together() == 1);
    REQUIRE(third.claims.at(0).leases.size() == 1);
    CHECK(third.claims[0].leases[0].job_id == excluded);
    CHECK(f.violations() == 0);
}
