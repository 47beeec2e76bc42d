// Weighted queues and priority aging (schema/baseline/tables.sql). Weights: claims on queues
// that all have work hand each out in proportion to its weight, exactly under coalesced claims and
// whatever the number of claimers, and a claim on queues without a weight runs a claim plan
// without the weight dimension. Aging: a low-priority job under a flood of higher-priority ones is
// claimed within its documented bound, (highest - its priority) x the aging step + one pass
// interval after its run_at, where without aging it would wait for as long as the flood lasts.

#include <algorithm>
#include <barrier>
#include <catch2/catch.hpp>
#include <map>
#include <thread>

#include "common/ops/checker.hpp"
#include "common/ops/operator_store.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/claim_plan.hpp"
#include "coordinator/db/aging_store.hpp"
#include "tests/pg/ctl_run.hpp"
#include "tests/support/checker_support.hpp"
#include "tests/support/store_fixture.hpp"

using namespace aclaim;
using base::Instant;
using store::AssignmentStore;
using store::ClaimRequest;
using testing::enqueue_on;
using testing::kLease;
using testing::kT0;

using namespace std::chrono_literals;

namespace {

/// Sets a queue's weight and aging step (0 for none), as `aclaimctl queue set` does.
void configure(const testing::TestDatabase& db, const std::string& queue, int weight,
               base::Duration aging, Instant now) {
    ops::QueueSettings q;
    q.weight = weight;
    q.aging = aging;
    testing::configure_queue(db, 1, queue, q, now);
}

/// How many times the store's connection ran each claim statement it prepared, by name
/// (ClaimPlan::name).
std::map<std::string, long> claim_runs(AssignmentStore& store) {
    pqxx::read_transaction t(store.connection());
    std::map<std::string, long> out;
    for (const auto& r :
         t.exec("SELECT name, generic_plans + custom_plans FROM pg_prepared_statements "
                "WHERE name LIKE 'aclaim_claim%' AND name <> 'aclaim_claim_locks'")) {
        out[r[0].as<std::string>()] = r[1].as<long>();
    }
    return out;
}

/// For TEST_CASE_METHOD: queues a (weight 3) and b (weight 1), without aging.
struct ThreeToOne : testing::StoreFixture {
    ThreeToOne() {
        configure(db, "a", 3, base::Duration{0}, clock.now());
        configure(db, "b", 1, base::Duration{0}, clock.now());
    }
};

/// Queues a (weight 3) and b (weight 1), both with work: the first claims of one job settle a
/// queue new to weights in (it starts one unit behind), then every 4 claims give 3 of a and 1 of b.
void claims_go_three_to_one(AssignmentStore& store, const std::vector<std::string>& queues,
                            Instant now) {
    for (int i = 0; i < 4; ++i) store.claim(1, {"w", 1, queues}, kLease, now);
    for (int window = 0; window < 5; ++window) {
        std::map<std::string, int> n;
        for (int i = 0; i < 4; ++i) {
            const auto out = store.claim(1, {"w", 1, queues}, kLease, now);
            REQUIRE(out.leases.size() == 1);
            ++n[out.leases[0].queue];
        }
        CHECK(n["a"] == 3);
        CHECK(n["b"] == 1);
    }
}

}  // namespace

TEST_CASE("four claimers on two full queues weighted 3:1 get them within 10% of 3:1",
          "[store][weights]") {
    constexpr int kClaimers = 4;
    constexpr int kRounds = 40;  // each claimer's claims, of 1 or a coalesced 2 x 1
    testing::TestDatabase db;
    configure(db, "heavy", 3, base::Duration{0}, kT0);
    configure(db, "light", 1, base::Duration{0}, kT0);
    {
        AssignmentStore store(db.dsn());
        // Far more than is claimed: both queues have work from the first claim to the last.
        enqueue_on(store, "heavy", 600, kT0);
        enqueue_on(store, "light", 600, kT0);
    }
    std::vector<std::map<std::string, int>> got(kClaimers);
    std::barrier start(kClaimers);
    auto run = [&](int who) {
        AssignmentStore store(db.dsn());
        const std::string worker = "w" + std::to_string(who);
        start.arrive_and_wait();
        for (int i = 0; i < kRounds; ++i) {
            const std::vector<std::string> queues{"heavy", "light"};
            if (who % 2 == 0) {
                for (const auto& l : store.claim(1, {worker, 1, queues}, kLease, kT0).leases) {
                    ++got[who][l.queue];
                }
            } else {
                const std::vector<ClaimRequest> rq{{worker + "a", 1, queues},
                                                   {worker + "b", 1, queues}};
                for (const auto& o : store.claim_batch(1, rq, kLease, kT0)) {
                    for (const auto& l : o.leases) ++got[who][l.queue];
                }
            }
        }
    };
    std::vector<std::thread> threads;
    for (int who = 1; who < kClaimers; ++who) threads.emplace_back(run, who);
    run(0);
    for (auto& t : threads) t.join();
    int heavy = 0;
    int light = 0;
    for (auto& g : got) {
        heavy += g["heavy"];
        light += g["light"];
        CHECK(g["heavy"] + g["light"] > 0);  // every claimer had a share
    }
    const double total = heavy + light;
    REQUIRE(total == kRounds * (1 + 2 + 1 + 2));  // every claim found work
    INFO("heavy " << heavy << ", light " << light);
    CHECK(std::abs(heavy / total - 0.75) <= 0.075);
    CHECK(std::abs(light / total - 0.25) <= 0.025);
}

TEST_CASE_METHOD(ThreeToOne,
                 "weighted queues take turns in their weights' proportion, single and coalesced",
                 "[store][weights]") {
    enqueue_on(store, "a", 100, clock.now());
    enqueue_on(store, "b", 100, clock.now());
    const std::vector<std::string> queues{"a", "b"};
    claims_go_three_to_one(store, queues, clock.now());
    // A coalesced claim of 8 slots takes 6 and 2, each queue's jobs in claim order.
    const std::vector<ClaimRequest> rq{{"x", 4, queues}, {"y", 4, queues}};
    std::map<std::string, int> n;
    std::map<std::string, store::JobId> last;
    for (const auto& o : store.claim_batch(1, rq, kLease, clock.now())) {
        for (const auto& l : o.leases) {
            ++n[l.queue];
            CHECK(l.job_id > last[l.queue]);
            last[l.queue] = l.job_id;
        }
    }
    CHECK(n["a"] == 6);
    CHECK(n["b"] == 2);
    CHECK(claim_runs(store)[store::ClaimPlan{}.name()] == 0);
}

TEST_CASE_METHOD(
    ThreeToOne,
    "a weighted queue without work gives its turns away and banks no more than its weight",
    "[store][weights]") {
    enqueue_on(store, "b", 200, clock.now());
    const std::vector<std::string> queues{"a", "b"};
    // a is empty: b gets every claim.
    for (int i = 0; i < 50; ++i) {
        const auto out = store.claim(1, {"w", 1, queues}, kLease, clock.now());
        REQUIRE(out.leases.size() == 1);
        CHECK(out.leases[0].queue == "b");
    }
    // a gets work back: it starts one unit behind b, so it takes its weight, 3 jobs, more than
    // its share before b has a turn again, not the 150 the turns it gave away would be worth;
    // then 3 to 1.
    enqueue_on(store, "a", 100, clock.now());
    std::string order;
    for (int i = 0; i < 15; ++i) {
        order += store.claim(1, {"w", 1, queues}, kLease, clock.now()).leases.at(0).queue;
    }
    CHECK(order == "aaaaaabaaabaaab");
}

TEST_CASE("a queue without a weight served with weighted ones gives when they have nothing",
          "[store][weights]") {
    testing::StoreFixture f;
    configure(f.db, "a", 2, base::Duration{0}, f.clock.now());
    enqueue_on(f.store, "a", 2, f.clock.now());
    enqueue_on(f.store, "plain", 3, f.clock.now(), 9);
    const auto out = f.store.claim(1, {"w", 5, {"a", "plain"}}, kLease, f.clock.now());
    REQUIRE(out.leases.size() == 5);
    std::string order;
    for (const auto& l : out.leases) order += l.queue.substr(0, 1);
    CHECK(order == "aappp");
}

/// How many jobs of `queues` in a state that can become pending carry no weighted-claim mark
/// (schema/baseline/tables.sql).
long unmarked(const testing::TestDatabase& db, const std::string& queues) {
    auto conn = db.connect();
    pqxx::read_transaction t(*conn);
    return t
        .exec1("SELECT count(*) FROM jobs WHERE queue = ANY(" + t.quote(queues) +
               "::text[]) AND weighed IS NULL "
               "AND state IN ('pending', 'scheduled', 'waiting', 'assigned', 'parked', "
               "'quarantined')")[0]
        .as<long>();
}

TEST_CASE("jobs enqueued before their queues had weights are served in proportion once set",
          "[store][weights]") {
    testing::StoreFixture f;
    const std::vector<std::string> queues{"a", "b"};
    // Before any weight: b's jobs all rank below a's, as the weighted claim's scan of b would have
    // to read past a's entries without the queue-led index.
    enqueue_on(f.store, "a", 100, f.clock.now(), 5);
    enqueue_on(f.store, "b", 100, f.clock.now(), 0);
    // A job of a that failed for good before the weight, retried after it.
    const auto early = f.store.claim(1, {"early", 1, {"a"}}, kLease, f.clock.now());
    REQUIRE(early.leases.size() == 1);
    const store::Lease held = early.leases[0];
    {
        auto conn = f.db.connect();
        ops::OperatorStore ops(*conn);
        CHECK(
            ops.fail(held.job_id, held.generation, "ops", "early failure", f.clock.now()).result ==
            ops::OperatorOutcome::Result::Done);
    }
    CHECK(unmarked(f.db, "{a,b}") == 199);

    configure(f.db, "a", 3, base::Duration{0}, f.clock.now());
    configure(f.db, "b", 1, base::Duration{0}, f.clock.now());
    CHECK(unmarked(f.db, "{a,b}") == 0);
    {
        auto conn = f.db.connect();
        CHECK(ops::OperatorStore(*conn).retry({held.job_id}, "ops", "again", f.clock.now()) ==
              std::vector<store::JobId>{held.job_id});
    }
    CHECK(unmarked(f.db, "{a,b}") == 0);

    claims_go_three_to_one(f.store, queues, f.clock.now());
    // Every job is claimable through the marks: 200 in all, the retried one among them.
    std::size_t rest = 0;
    for (int i = 0; i < 20; ++i) {
        rest += f.store.claim(1, {"w", 64, queues}, kLease, f.clock.now()).leases.size();
    }
    CHECK(rest == 200 - 4 - 20);
    // The retried job was claimed in the windows or in the rest.
    auto conn = f.db.connect();
    pqxx::read_transaction t(*conn);
    CHECK(t.exec1("SELECT state FROM jobs WHERE id = " + std::to_string(held.job_id))[0]
              .as<std::string>() == "assigned");
}

TEST_CASE("a weight set while producers enqueue into the queue leaves none of its jobs unmarked",
          "[store][weights]") {
    constexpr int kProducers = 3;
    constexpr int kRounds = 60;  // each producer's enqueues, of 5 jobs
    constexpr int kSetAfter = 10;
    testing::TestDatabase db;
    std::barrier start(kProducers + 1);
    std::barrier mid(kProducers + 1);
    auto produce = [&] {
        AssignmentStore store(db.dsn());
        start.arrive_and_wait();
        for (int i = 0; i < kRounds; ++i) {
            // The setter starts when every producer has enqueued kSetAfter times, and races the
            // rest.
            if (i == kSetAfter) (void)mid.arrive();
            enqueue_on(store, "c", 5, kT0);
        }
    };
    std::vector<std::thread> threads;
    for (int who = 0; who < kProducers; ++who) threads.emplace_back(produce);
    start.arrive_and_wait();
    mid.arrive_and_wait();
    configure(db, "c", 2, base::Duration{0}, kT0);
    for (auto& t : threads) t.join();
    CHECK(unmarked(db, "{c}") == 0);
    // And the weighted claim finds every one of them.
    AssignmentStore store(db.dsn());
    int claimed = 0;
    for (int i = 0; i < 20; ++i) {
        claimed +=
            static_cast<int>(store.claim(1, {"w", 64, {"c", "other"}}, kLease, kT0).leases.size());
    }
    CHECK(claimed == kProducers * kRounds * 5);
}

TEST_CASE("a claim on queues without a weight runs the claim statement of before weights",
          "[store][weights][hot]") {
    testing::StoreFixture f;
    configure(f.db, "weighted", 3, base::Duration{0}, f.clock.now());
    configure(f.db, "aged", 0, 30 * base::kSeconds, f.clock.now());
    enqueue_on(f.store, "free", 3, f.clock.now());
    enqueue_on(f.store, "aged", 3, f.clock.now());
    f.store.claim(1, {"w", 1, {"free"}}, kLease, f.clock.now());
    f.store.claim(1, {"w", 1, {"aged", "free"}}, kLease, f.clock.now());
    f.store.claim_batch(1, std::vector<ClaimRequest>{{"w", 1, {"free"}}}, kLease, f.clock.now());
    auto runs = claim_runs(f.store);
    CHECK(runs[store::ClaimPlan{}.name()] == 2);
    CHECK(runs[store::ClaimPlan{.batch = true}.name()] == 1);
    CHECK(runs[store::ClaimPlan{.weighted = true}.name()] == 0);
    CHECK(runs[store::ClaimPlan{.weighted = true, .batch = true}.name()] == 0);
    // Aging adds nothing to a job that was never aged.
    pqxx::read_transaction t(f.store.connection());
    CHECK(t.exec1("SELECT count(*) FROM jobs WHERE base_priority IS NOT NULL")[0].as<int>() == 0);
}

TEST_CASE("under a flood of high-priority jobs a low-priority one is claimed within its bound",
          "[store][aging]") {
    constexpr auto kStep = 10 * base::kSeconds;     // the aging step S
    constexpr auto kInterval = 1 * base::kSeconds;  // the pass interval I
    constexpr int kHigh = 5;
    testing::StoreFixture f;
    configure(f.db, "aged", 0, kStep, f.clock.now());
    const Instant t0 = f.clock.now();
    const auto low = enqueue_on(f.store, "aged", 1, t0, 0).at(0);
    // The same scene on a queue without aging: its low job waits as long as the flood lasts.
    const auto control = enqueue_on(f.store, "plain", 1, t0, 0).at(0);
    coordinator::AgingStore ager(f.store.connection());
    std::optional<Instant> claimed;
    std::optional<Instant> control_claimed;
    // 120 s of flood: each second 6 new high-priority jobs on each queue, and claims for 5 of
    // each, so the high-priority backlog only grows; the aging pass runs every interval.
    for (Instant now = t0; now < t0 + 120 * base::kSeconds; now += kInterval) {
        f.clock.set(now);
        enqueue_on(f.store, "aged", 6, now, kHigh);
        enqueue_on(f.store, "plain", 6, now, kHigh);
        const auto pass = ager.run(now, 1000);
        REQUIRE(pass.held);
        for (const auto* queue : {"aged", "plain"}) {
            for (const auto& l : f.store.claim(1, {"w", 5, {queue}}, kLease, now).leases) {
                if (l.job_id == low) {
                    claimed = now;
                    CHECK(l.priority == kHigh);  // aged up to the flood's, not above it
                }
                if (l.job_id == control) control_claimed = now;
            }
        }
    }
    const auto bound = (kHigh - 0) * kStep + kInterval;
    REQUIRE(claimed.has_value());
    CHECK(*claimed - t0 <= bound);
    // Not earlier than aging allows either: it reached the flood's priority at 5 x 10 s.
    CHECK(*claimed - t0 >= kHigh * kStep);
    CHECK_FALSE(control_claimed.has_value());
    // The job keeps the priority it was enqueued with for the console and inspect.
    {
        pqxx::read_transaction t(f.store.connection());
        const auto row =
            t.exec_params1("SELECT priority, base_priority FROM jobs WHERE id = $1", low);
        CHECK(row[0].as<int>() == kHigh);
        CHECK(row[1].as<int>() == 0);
    }
    // aclaimctl check proves the bound from the history alone; and it would catch the low job
    // still waiting while younger ones were claimed past its bound: its claim moved to the end.
    auto conn = f.db.connect();
    auto history = ops::load_history(*conn);
    testing::check_clean(ops::check(history));
    const auto claim = std::find_if(history.events.begin(), history.events.end(), [&](auto& e) {
        return e.job_id == low && e.kind == "claimed";
    });
    REQUIRE(claim != history.events.end());
    auto late = *claim;
    history.events.erase(claim);
    late.at = t0 + 120 * base::kSeconds;
    history.events.push_back(late);
    CHECK(testing::caught(history, ops::Invariant::AgingBoundKept));
}

TEST_CASE("aging raises one step per interval waited, no higher than the highest pending",
          "[store][aging]") {
    testing::StoreFixture f;
    configure(f.db, "aged", 0, 30 * base::kSeconds, f.clock.now());
    const Instant t0 = f.clock.now();
    const auto low = enqueue_on(f.store, "aged", 1, t0, -2).at(0);
    enqueue_on(f.store, "other", 1, t0, 3);
    coordinator::AgingStore ager(f.store.connection());
    auto priority = [&] {
        pqxx::read_transaction t(f.store.connection());
        return t.exec_params1("SELECT priority FROM jobs WHERE id = $1", low)[0].as<int>();
    };
    CHECK(ager.run(t0 + 29 * base::kSeconds, 100).raised == 0);
    CHECK(priority() == -2);
    CHECK(ager.run(t0 + 30 * base::kSeconds, 100).raised == 1);
    CHECK(priority() == -1);
    CHECK(ager.run(t0 + 30 * base::kSeconds, 100).raised == 0);  // nothing twice
    CHECK(ager.run(t0 + 121 * base::kSeconds, 100).raised == 1);
    CHECK(priority() == 2);
    CHECK(ager.run(t0 + 3600 * base::kSeconds, 100).raised == 1);
    CHECK(priority() == 3);  // the highest pending priority of the organization, not above
    CHECK(ager.run(t0 + 7200 * base::kSeconds, 100).raised == 0);
}

TEST_CASE("one aging pass at a time: a second ager passes while the first holds the lock",
          "[store][aging]") {
    testing::StoreFixture f;
    configure(f.db, "aged", 0, 10 * base::kSeconds, f.clock.now());
    enqueue_on(f.store, "aged", 3, f.clock.now());
    enqueue_on(f.store, "urgent", 1, f.clock.now(), 9);
    auto holder = f.db.connect();
    pqxx::work held(*holder);
    REQUIRE(held.exec1("SELECT pg_try_advisory_xact_lock(hashtextextended('aclaim aging', 0))")[0]
                .as<bool>());
    coordinator::AgingStore ager(f.store.connection());
    const auto passed = ager.run(f.clock.now() + 60 * base::kSeconds, 100);
    CHECK_FALSE(passed.held);
    CHECK(passed.raised == 0);
    held.abort();
    const auto ran = ager.run(f.clock.now() + 60 * base::kSeconds, 2);
    CHECK(ran.held);
    CHECK(ran.raised == 2);
    CHECK(ran.more);  // stopped at its batch
}

TEST_CASE("aclaimctl queue set --weight and --aging set, list and remove them, audited",
          "[ctl][weights][aging]") {
    testing::TestDatabase db;
    auto r = testing::run_ctl(db.dsn(), {"queue", "set", "bulk", "--org", "1", "--create",
                                         "--weight", "3", "--aging", "30s", "--by", "alice"});
    REQUIRE(r.code == 0);
    r = testing::run_ctl(db.dsn(), {"queue", "list", "--org", "1"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("w3 +1/30s") != std::string::npos);
    r = testing::run_ctl(db.dsn(), {"queue", "set", "bulk", "--org", "1", "--aging", "500ms"});
    CHECK(r.code == 2);  // shorter than a second
    r = testing::run_ctl(db.dsn(), {"queue", "set", "bulk", "--org", "1", "--weight", "1001"});
    CHECK(r.code != 0);
    r = testing::run_ctl(db.dsn(),
                         {"queue", "set", "bulk", "--org", "1", "--weight", "0", "--aging", "0"});
    REQUIRE(r.code == 0);
    r = testing::run_ctl(db.dsn(), {"queue", "list", "--org", "1"});
    CHECK(r.out.find("w3") == std::string::npos);
    CHECK(r.out.find("+1/") == std::string::npos);
    testing::check_settings_log(db, "bulk", "weight=3, aging=30000ms", "weight=0, aging=0ms");
}

TEST_CASE("a weighted queue's rate limit holds, its turns passing to the others",
          "[store][weights][rate]") {
    testing::StoreFixture f;
    {
        auto conn = f.db.connect();
        ops::QueueSettings q;
        q.weight = 3;
        q.rate_per_s = 1;
        q.rate_burst = 2;
        ops::OperatorStore(*conn).configure(1, "a", q, "ops", f.clock.now(), true);
    }
    configure(f.db, "b", 1, base::Duration{0}, f.clock.now());
    enqueue_on(f.store, "a", 20, f.clock.now());
    enqueue_on(f.store, "b", 20, f.clock.now());
    std::map<std::string, int> n;
    for (int i = 0; i < 6; ++i) {
        for (const auto& l : f.store.claim(1, {"w", 1, {"a", "b"}}, kLease, f.clock.now()).leases) {
            ++n[l.queue];
        }
    }
    CHECK(n["a"] == 2);  // its burst, spent in the same update as its pass
    CHECK(n["b"] == 4);
    pqxx::read_transaction t(f.store.connection());
    const auto row = t.exec1(
        "SELECT rate_tokens::float8, weight_pass IS NOT NULL FROM job_queues WHERE queue = 'a'");
    CHECK(row[0].as<double>() == 0);
    CHECK(row[1].as<bool>());
}
