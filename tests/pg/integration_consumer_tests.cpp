// Verdicts to consumer groups (schema/baseline/tables.sql, clients/cpp/result_consumer.hpp): every
// terminal transition records its outcome in its own transaction, and a group receives each
// outcome at least once until it acknowledges it and never after, whatever order transactions
// commit in.

#include <atomic>
#include <barrier>
#include <catch2/catch.hpp>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "clients/cpp/result_consumer.hpp"
#include "common/ops/operator_store.hpp"
#include "common/ops/recovery_store.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/store_sql.hpp"
#include "coordinator/http/queue_metrics.hpp"
#include "tests/pg/integration_support.hpp"
#include "tests/support/process.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using clients::Outcome;
using clients::ResultConsumer;
using clients::Verdict;
using namespace std::chrono_literals;

namespace {

clients::ConsumerOptions for_org(store::OrgId org, int batch = 100) {
    clients::ConsumerOptions o;
    o.org = org;
    o.batch = batch;
    return o;
}

std::vector<store::JobId> job_ids(const std::vector<Verdict>& verdicts) {
    std::vector<store::JobId> out;
    for (const auto& v : verdicts) out.push_back(v.job_id);
    return out;
}

/// job id -> outcome, from the outcomes table directly.
std::map<store::JobId, std::string> recorded(pqxx::connection& c) {
    pqxx::read_transaction t(c);
    std::map<store::JobId, std::string> out;
    for (const auto& r : t.exec("SELECT job_id, outcome FROM job_outcomes ORDER BY id")) {
        out[r[0].as<store::JobId>()] = r[1].as<std::string>();
    }
    return out;
}

/// For TEST_CASE_METHOD: a fresh database and a store on it; the consumers' waits run on real
/// time.
struct ConsumerDatabase {
    TestDatabase db;
    base::SystemClock clock;
    store::AssignmentStore store{db.dsn()};
};

}  // namespace

TEST_CASE("Outcomes: every transition that ends a job records its outcome, in its transaction",
          "[integration][outcomes]") {
    TestDatabase db;
    store::AssignmentStore store(db.dsn());
    auto ops_conn = db.connect();
    ops::OperatorStore ops(*ops_conn);
    ops::RecoveryStore recovery(*ops_conn);
    // Nine jobs, claimed in id order; the fourth and fifth have a single attempt.
    std::vector<store::NewJob> jobs(9);
    jobs[3].max_attempts = 1;
    jobs[4].max_attempts = 1;
    store.enqueue(1, jobs, kT0);
    const auto l = store.claim(1, {"w", 9, {}}, std::chrono::seconds(60), kT0).leases;
    REQUIRE(l.size() == 9);
    const auto at = kT0 + std::chrono::seconds(1);

    CHECK(store.complete(completion(l[0], "ok-0"), at).accepted());
    CHECK(store.complete_batch(std::vector{completion(l[1], "ok-1")}, at)[0].accepted());
    auto final_fail = completion(l[2], "");
    final_fail.reason = "unreadable scan";
    CHECK(store.fail(final_fail, at).accepted());
    auto retryable = completion(l[3], "");
    retryable.reason = "scanner busy";
    retryable.retryable = true;
    CHECK(store.fail(retryable, at).state == store::JobState::Discarded);
    CHECK(ops.cancel({l[5].job_id}, "op", "withdrawn", at).size() == 1);
    CHECK(ops.fail(l[6].job_id, l[6].generation, "op", "stuck", at).result ==
          ops::OperatorOutcome::Result::Done);
    {
        pqxx::work txn(*ops_conn);
        txn.exec_params(
            "UPDATE jobs SET state = 'quarantined', quarantined_from = state, "
            "quarantine_reason = 'test' WHERE id = $1",
            l[7].job_id);
        txn.commit();
    }
    CHECK_FALSE(recovery.fail(l[7].job_id, "bad row", "op", at).refusal);
    // A completion whose transaction rolls back records nothing.
    {
        pqxx::work txn(*ops_conn);
        REQUIRE(txn.exec_params(store::sql::kComplete.text, 1, l[8].job_id, l[8].generation, "w",
                                "never", at)
                    .size() == 1);
        txn.abort();
    }
    // The reaper takes back what is left: l[4] on its last attempt (discarded), l[8] retried.
    CHECK(store.reclaim_expired(kT0 + std::chrono::minutes(5), 100).size() == 2);

    const auto outcomes = recorded(*ops_conn);
    CHECK(outcomes == std::map<store::JobId, std::string>{{l[0].job_id, "completed"},
                                                          {l[1].job_id, "completed"},
                                                          {l[2].job_id, "failed"},
                                                          {l[3].job_id, "discarded"},
                                                          {l[4].job_id, "discarded"},
                                                          {l[5].job_id, "cancelled"},
                                                          {l[6].job_id, "failed"},
                                                          {l[7].job_id, "failed"}});
    pqxx::read_transaction t(*ops_conn);
    CHECK(t.exec1("SELECT count(*) FROM jobs j WHERE state IN ('completed', 'failed', "
                  "'discarded', 'cancelled') AND (SELECT count(*) FROM job_outcomes o "
                  "WHERE o.job_id = j.id) <> 1")[0]
              .as<long>() == 0);
    CHECK(t.exec_params1("SELECT result_ref FROM job_outcomes WHERE job_id = $1", l[0].job_id)[0]
              .as<std::string>() == "ok-0");
    CHECK(t.exec_params1("SELECT error FROM job_outcomes WHERE job_id = $1", l[5].job_id)[0]
              .as<std::string>() == "cancelled by op: withdrawn");
}

TEST_CASE_METHOD(ConsumerDatabase,
                 "Consumer: a completion that commits after later ones is delivered, not skipped",
                 "[integration][consumer]") {
    const auto leases = claimed_jobs(store, 1, 4);
    ResultConsumer consumer(db.dsn(), clock, "billing", for_org(1));

    // The first completion's transaction stays open (its outcome row already has the lowest id)
    // while the three after it commit.
    auto held_conn = db.connect();
    pqxx::work held(*held_conn);
    REQUIRE(held.exec_params(store::sql::kComplete.text, 1, leases[0].job_id, leases[0].generation,
                             "w", "late", kT0)
                .size() == 1);
    for (int i = 1; i < 4; ++i) {
        REQUIRE(store.complete(completion(leases[static_cast<std::size_t>(i)], "on time"), kT0)
                    .accepted());
    }
    const auto first = consumer.fetch();
    CHECK(job_ids(first) == std::vector{leases[1].job_id, leases[2].job_id, leases[3].job_id});
    REQUIRE(first.size() == 3);
    CHECK(first.back().seq == 3);
    consumer.ack(first.back());
    {
        // A reader trusting "the highest id seen" would now skip the held one for good.
        pqxx::read_transaction t(store.connection());
        CHECK(t.exec1("SELECT count(*) FROM job_outcomes")[0].as<long>() == 3);
    }
    held.commit();

    const auto late = consumer.next(std::chrono::seconds(10));
    REQUIRE(late.size() == 1);
    CHECK(late[0].job_id == leases[0].job_id);
    CHECK(late[0].result_ref == std::optional<std::string>("late"));
    CHECK(late[0].seq == 4);
    {
        pqxx::read_transaction t(store.connection());
        CHECK(t.exec1("SELECT min(id) FROM job_outcomes")[0].as<long>() ==
              t.exec_params1("SELECT id FROM job_outcomes WHERE job_id = $1", leases[0].job_id)[0]
                  .as<long>());
    }
    consumer.ack(late[0]);
    CHECK(consumer.fetch().empty());
    CHECK(consumer.status().lag == 0);
}

TEST_CASE_METHOD(
    ConsumerDatabase,
    "Consumer: what was fetched and not acknowledged comes again, what was acknowledged never",
    "[integration][consumer]") {
    const auto leases = claimed_jobs(store, 1, 5);
    { ResultConsumer setup(db.dsn(), clock, "g", for_org(1)); }
    for (const auto& l : leases) REQUIRE(store.complete(completion(l, "r"), kT0).accepted());

    std::vector<store::JobId> unacked;
    {
        // A consumer that dies between fetch and acknowledgement: its connection simply goes.
        ResultConsumer crashed(db.dsn(), clock, "g", for_org(1, 3));
        unacked = job_ids(crashed.fetch());
        REQUIRE(unacked.size() == 3);
    }
    ResultConsumer next(db.dsn(), clock, "g", for_org(1, 3));
    const auto again = next.fetch();
    CHECK(job_ids(again) == unacked);
    next.ack(again[1]);  // the first two
    const auto rest = next.fetch();
    REQUIRE(rest.size() == 3);
    CHECK(rest[0].job_id == unacked[2]);
    next.ack(rest.back());
    CHECK(next.fetch().empty());
    // Acknowledging again or an earlier position changes nothing; a position never given is
    // refused.
    CHECK(next.ack(2) == 5);
    CHECK(next.ack(5) == 5);
    CHECK_THROWS_WITH(next.ack(6), Catch::Contains("position 6 of organization 1 was never "
                                                   "delivered (the last given is 5)"));
    ResultConsumer later(db.dsn(), clock, "g", for_org(1));
    CHECK(later.fetch().empty());
}

TEST_CASE_METHOD(ConsumerDatabase,
                 "Consumer: independent groups, each with its own cursor, and organizations apart",
                 "[integration][consumer]") {
    ResultConsumer billing(db.dsn(), clock, "billing", for_org(1));
    ResultConsumer audit(db.dsn(), clock, "audit", for_org(1));
    ResultConsumer other(db.dsn(), clock, "billing", for_org(2));
    const auto one = claimed_jobs(store, 1, 3);
    const auto two = claimed_jobs(store, 2, 1);
    for (const auto& l : one) REQUIRE(store.complete(completion(l, "r"), kT0).accepted());
    REQUIRE(store.complete(completion(two[0], "r2"), kT0).accepted());

    const auto b = billing.fetch();
    billing.ack(b.back());
    CHECK(b.size() == 3);
    CHECK(billing.fetch().empty());
    // audit has acknowledged nothing: it still gets all three.
    CHECK(job_ids(audit.fetch()) == job_ids(b));
    CHECK(audit.status().lag == 3);
    CHECK(billing.status().lag == 0);
    const auto o = other.fetch();
    REQUIRE(o.size() == 1);
    CHECK(o[0].job_id == two[0].job_id);
    CHECK(o[0].seq == 1);  // positions are per organization

    // The retention rule: a job is kept while any group of its organization has not acknowledged
    // its outcome.
    pqxx::read_transaction t(store.connection());
    // billing acknowledged one[0], audit did not; org 2's only group has not acknowledged two[0].
    CHECK(t.exec_params1("SELECT aclaim_outcome_unacknowledged($1)", one[0].job_id)[0].as<bool>());
    CHECK(t.exec_params1("SELECT aclaim_outcome_unacknowledged($1)", two[0].job_id)[0].as<bool>());
    t.commit();
    audit.ack(b.back());
    other.ack(o.back());
    pqxx::read_transaction after(store.connection());
    CHECK_FALSE(after.exec_params1("SELECT aclaim_outcome_unacknowledged($1)", one[0].job_id)[0]
                    .as<bool>());
    CHECK_FALSE(after.exec_params1("SELECT aclaim_outcome_unacknowledged($1)", two[0].job_id)[0]
                    .as<bool>());
}

TEST_CASE_METHOD(ConsumerDatabase,
                 "Consumer: outcomes committed together and notified once are all delivered",
                 "[integration][consumer]") {
    const auto leases = claimed_jobs(store, 1, 7);
    ResultConsumer consumer(db.dsn(), clock, "g", for_org(1, 3));
    auto watcher_conn = db.connect();
    Notifications notified(*watcher_conn, "aclaim_outcomes");

    std::vector<store::TransitionRequest> batch;
    for (const auto& l : leases) batch.push_back(completion(l, "r"));
    for (const auto& t : store.complete_batch(batch, kT0)) REQUIRE(t.accepted());
    // One transaction, one organization: PostgreSQL delivers one notification for seven rows.
    CHECK(notified.wait_for(std::chrono::seconds(10)) == std::vector<std::string>{"1"});

    std::set<store::JobId> seen;
    for (int round = 0; round < 3; ++round) {
        const auto got = round == 0 ? consumer.next(std::chrono::seconds(10)) : consumer.fetch();
        for (const auto& v : got) CHECK(seen.insert(v.job_id).second);
        if (!got.empty()) consumer.ack(got.back());
    }
    CHECK(seen.size() == 7);
    CHECK(consumer.fetch().empty());
}

TEST_CASE("Consumer: next() is woken by a commit, and returns empty at its deadline",
          "[integration][consumer]") {
    TestDatabase db;
    // The consumer's deadlines run on a manual clock that the test never advances before the
    // commit: a next() that returns did so for the notification, never for its deadline.
    base::ManualClock clock{kT0};
    store::AssignmentStore store(db.dsn());
    const auto leases = claimed_jobs(store, 1, 1);
    ResultConsumer consumer(db.dsn(), clock, "g", for_org(1));
    CHECK(consumer.next(std::chrono::milliseconds(0)).empty());

    std::barrier ready(2);
    std::vector<Verdict> got;
    std::atomic<bool> returned{false};
    const auto before = consumer.fetches();
    std::thread waiter([&] {
        ready.arrive_and_wait();
        got = consumer.next(std::chrono::seconds(20));
        returned = true;
    });
    ready.arrive_and_wait();
    // next() looks once, then waits. It must not look again without a notification: a quiet
    // 1.5 s shows a poll of 1 s (or any shorter one) as extra fetches, and the correct consumer
    // cannot fail this, however slow the machine. No REQUIRE while the waiter runs: it must be
    // joined whatever happens.
    CHECK(eventually([&] { return consumer.fetches() == before + 1; }, 10s));
    std::this_thread::sleep_for(1500ms);
    CHECK(consumer.fetches() == before + 1);
    CHECK_FALSE(returned.load());

    CHECK(store.complete(completion(leases[0], "r"), kT0).accepted());
    const bool woken = eventually([&] { return returned.load(); }, 20s);
    // A consumer that missed the notification would wait forever on this clock: end its wait.
    if (!woken) clock.advance(std::chrono::seconds(21));
    waiter.join();
    CHECK(woken);
    REQUIRE(got.size() == 1);
    CHECK(got[0].outcome == Outcome::Completed);
    // One look for the wake: the notification, not a poll nor the deadline, brought it.
    CHECK(consumer.fetches() == before + 2);

    // The deadline, on the same clock: with nothing new, the wait ends once time passes it and
    // one last look finds nothing.
    consumer.ack(got[0]);
    std::thread deadline_waiter([&] { got = consumer.next(std::chrono::seconds(5)); });
    CHECK(eventually([&] { return consumer.fetches() == before + 3; }, 10s));
    clock.advance(std::chrono::seconds(6));
    deadline_waiter.join();
    CHECK(got.empty());
    CHECK(consumer.fetches() == before + 4);
}

TEST_CASE("Consumer: concurrent completions and two groups, every verdict once per group",
          "[integration][consumer]") {
    TestDatabase db;
    base::SystemClock clock;
    constexpr int kProducers = 4;
    constexpr int kPerProducer = 40;
    constexpr auto kJobs = static_cast<std::size_t>(kProducers) * kPerProducer;
    std::vector<std::unique_ptr<store::AssignmentStore>> stores;
    std::vector<std::vector<store::Lease>> leases;
    for (int p = 0; p < kProducers; ++p) {
        stores.push_back(std::make_unique<store::AssignmentStore>(db.dsn()));
        leases.push_back(claimed_jobs(*stores.back(), 1, kPerProducer, "w" + std::to_string(p)));
    }
    ResultConsumer a(db.dsn(), clock, "a", for_org(1, 7));
    ResultConsumer b(db.dsn(), clock, "b", for_org(1, 5));

    std::barrier start(kProducers + 2);
    std::vector<std::thread> threads;
    for (int p = 0; p < kProducers; ++p) {
        threads.emplace_back([&, p] {
            start.arrive_and_wait();
            for (const auto& l : leases[static_cast<std::size_t>(p)]) {
                stores[static_cast<std::size_t>(p)]->complete(
                    completion(l, "r", "w" + std::to_string(p)), kT0);
            }
        });
    }
    // No assertions on these threads (Catch2 is not thread-safe): they record, the test checks.
    auto follow = [&](ResultConsumer& c, std::vector<store::JobId>& out,
                      std::vector<std::int64_t>& seqs) {
        start.arrive_and_wait();
        while (out.size() < kJobs) {
            const auto got = c.next(std::chrono::seconds(10));
            if (got.empty()) break;
            for (const auto& v : got) {
                seqs.push_back(v.seq);
                out.push_back(v.job_id);
            }
            c.ack(got.back());
        }
    };
    std::vector<store::JobId> seen_a, seen_b;
    std::vector<std::int64_t> seqs_a, seqs_b;
    threads.emplace_back([&] { follow(a, seen_a, seqs_a); });
    threads.emplace_back([&] { follow(b, seen_b, seqs_b); });
    for (auto& t : threads) t.join();
    CHECK(seen_a.size() == kJobs);
    CHECK(std::set(seen_a.begin(), seen_a.end()).size() == seen_a.size());
    CHECK(std::set(seen_b.begin(), seen_b.end()) == std::set(seen_a.begin(), seen_a.end()));
    CHECK(seen_b.size() == seen_a.size());
    // Positions came dense and in order to both groups: never a gap, never a repeat.
    for (const auto* seqs : {&seqs_a, &seqs_b}) {
        for (std::size_t i = 0; i < seqs->size(); ++i) {
            CHECK((*seqs)[i] == static_cast<std::int64_t>(i) + 1);
        }
    }
}

TEST_CASE_METHOD(ConsumerDatabase, "Consumer: fetch needs READ COMMITTED and an existing group",
                 "[integration][consumer]") {
    auto opts = for_org(1);
    opts.create_group = false;
    CHECK_THROWS_WITH(ResultConsumer(db.dsn(), clock, "missing", opts),
                      Catch::Contains("no consumer group 'missing'"));
    ResultConsumer g(db.dsn(), clock, "g", for_org(1));
    // The same name in another organization: without an organization, the name is ambiguous.
    { ResultConsumer other(db.dsn(), clock, "g", for_org(2)); }
    clients::ConsumerOptions any_org;
    any_org.create_group = false;
    CHECK_THROWS_WITH(ResultConsumer(db.dsn(), clock, "g", any_org),
                      Catch::Contains("exists in several organizations"));
    opts.org = 2;
    CHECK(ResultConsumer(db.dsn(), clock, "g", opts).status().org_id == 2);
    REQUIRE(store.complete(completion(claimed_jobs(store, 1, 1)[0], "r"), kT0).accepted());
    auto conn = db.connect();
    pqxx::work txn(*conn);
    txn.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    CHECK_THROWS_WITH(txn.exec("SELECT * FROM aclaim_results_fetch('g', org => 1)"),
                      Catch::Contains("READ COMMITTED transactions only"));
}

TEST_CASE_METHOD(ConsumerDatabase, "Consumer: each group's lag on /metrics",
                 "[integration][consumer][http]") {
    ResultConsumer behind(db.dsn(), clock, "behind", for_org(1));
    ResultConsumer current(db.dsn(), clock, "current", for_org(1));
    const auto leases = claimed_jobs(store, 1, 3);
    for (const auto& l : leases) REQUIRE(store.complete(completion(l, "r"), kT0).accepted());
    current.ack(current.fetch().back());

    base::ManualClock scrape_clock(kT0 + std::chrono::seconds(90));
    coordinator::QueueMetrics metrics(db.dsn(), scrape_clock);
    const auto text = metrics.render();
    CHECK_THAT(text, Catch::Contains("aclaim_result_group_lag{org=\"1\",group=\"behind\"} 3\n"));
    CHECK_THAT(text, Catch::Contains("aclaim_result_group_lag{org=\"1\",group=\"current\"} 0\n"));
    CHECK_THAT(text, Catch::Contains(
                         "aclaim_result_group_oldest_unacked_seconds{org=\"1\",group=\"behind\"} "
                         "90\n"));
    CHECK_THAT(text, Catch::Contains("aclaim_result_group_series_dropped 0\n"));
    CHECK_THAT(text, Catch::Contains("aclaim_result_group_stats_up 1\n"));
    CHECK_THAT(text, Catch::Contains("aclaim_queue_stats_up 1\n"));

    // The groups' statement failing leaves the queue gauges standing, and says so (the next
    // scrape past the refresh interval reads again).
    auto conn = db.connect();
    pqxx::nontransaction(*conn).exec("ALTER TABLE result_groups RENAME TO result_groups_hidden");
    scrape_clock.advance(std::chrono::minutes(1));
    const auto without = metrics.render();
    pqxx::nontransaction(*conn).exec("ALTER TABLE result_groups_hidden RENAME TO result_groups");
    CHECK_THAT(without, Catch::Contains("aclaim_result_group_stats_up 0\n"));
    CHECK_THAT(without, Catch::Contains("aclaim_queue_stats_up 1\n"));
    CHECK_THAT(without, Catch::Contains("aclaim_queue_series_dropped "));
    CHECK_THAT(without, !Catch::Contains("aclaim_result_group_lag{"));
}
