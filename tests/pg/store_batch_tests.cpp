// Coalesced claims, renewals and completions: every request answered exactly as the single path
// answers it, rejected rows untouched, and no job handed out twice under concurrent claimers.

#include <barrier>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/ops/operator_store.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/claim_plan.hpp"
#include "common/store/store_sql.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"

using namespace aclaim;
using base::ManualClock;
using store::AssignmentStore;
using store::JobState;
using store::Rejection;
using store::TransitionRequest;
using testing::kLease;
using testing::kT0;

using namespace std::chrono_literals;

namespace {
constexpr store::JobId kUnknownJob = 999'999;

/// One database prepared with a job in each situation a coalesced statement must tell apart.
struct MixedScene : testing::StoreFixture {
    std::vector<TransitionRequest> requests;
    std::vector<store::JobId> jobs;  ///< every job the requests name, unknown one included

    MixedScene() {
        // B: claimed by a, reclaimed, claimed again by b; a still holds generation 1.
        const auto b = store.enqueue(1, {{0, "b", 3}}, clock.now()).at(0);
        const auto b1 = claim("a");
        clock.advance(kLease + 1us);
        REQUIRE(store.reclaim_expired(clock.now(), 10).size() == 1);
        REQUIRE(claim("b").job_id == b);
        // C: its lease will have run out (and not been reclaimed) when the requests arrive.
        const auto c = store.enqueue(1, {{0, "c", 3}}, clock.now()).at(0);
        const auto c1 = claim("a");
        clock.advance(5 * base::kSeconds);
        // A and D: live leases of a. E: another organization's job.
        const auto a = store.enqueue(1, {{0, "a", 3}}, clock.now()).at(0);
        const auto a1 = claim("a");
        const auto d = store.enqueue(1, {{0, "d", 3}}, clock.now()).at(0);
        const auto d1 = claim("a");
        const auto e = store.enqueue(2, {{0, "e", 3}}, clock.now()).at(0);
        const auto e1 = claim("a", 2);
        clock.advance(5 * base::kSeconds);
        REQUIRE(c1.job_id == c);
        requests = {
            {1, a1.job_id, a1.generation, "a", "ref-a"}, {1, b, b1.generation, "a", "ref-b"},
            {1, c, c1.generation, "a", "ref-c"},         {1, e, e1.generation, "a", "ref-e"},
            {1, kUnknownJob, 1, "a", "ref-x"},           {1, d, d1.generation, "a", "ref-d"},
            {1, d, d1.generation, "a", "ref-d"},
        };
        jobs = {a, b, c, d, e, kUnknownJob};
    }

    std::map<store::JobId, std::string> snapshots() {
        std::map<store::JobId, std::string> out;
        for (auto id : jobs) {
            out[id] = testing::job_snapshot(store.connection(), id) + "|" +
                      testing::results_snapshot(store.connection(), id) + "|" +
                      std::to_string(testing::event_count(store.connection(), id, "rejected")) +
                      "|" +
                      std::to_string(testing::event_count(store.connection(), id, "completed"));
        }
        return out;
    }
};

std::string describe(const store::Transition& t) {
    return (t.rejection ? std::string(store::to_string(*t.rejection)) : "applied") + "/" +
           std::string(store::to_string(t.state)) + "/" + (t.replayed ? "replayed" : "fresh") +
           "/" + std::to_string(base::to_micros(t.lease_expires_at)) + "/" + t.detail;
}
}  // namespace

TEST_CASE("coalesced complete of a mixed batch answers each request as the single path does",
          "[store][batch][fencing]") {
    MixedScene single, batch;
    std::vector<std::string> expected, got;
    for (const auto& q : single.requests) {
        expected.push_back(describe(single.store.complete(
            {q.org, q.job, q.generation, q.worker, q.result_ref}, single.clock.now())));
    }
    const auto& q = batch.requests;
    const std::vector<store::JobId> rejected{q[1].job, q[2].job, q[3].job, q[4].job};
    auto& conn = batch.store.connection();
    std::vector<std::string> before;
    for (auto id : rejected) {
        before.push_back(testing::job_snapshot(conn, id) + testing::results_snapshot(conn, id));
    }
    const auto outcomes = batch.store.complete_batch(batch.requests, batch.clock.now());
    for (const auto& t : outcomes) got.push_back(describe(t));
    CHECK(got == expected);

    REQUIRE(outcomes.size() == 7);
    CHECK(outcomes[0].accepted());
    CHECK(outcomes[1].rejection == Rejection::StaleGeneration);
    CHECK(outcomes[2].rejection == Rejection::LeaseExpired);
    CHECK(outcomes[3].rejection == Rejection::OtherOrganization);
    CHECK(outcomes[4].rejection == Rejection::UnknownJob);
    CHECK((outcomes[5].accepted() && outcomes[6].accepted()));
    CHECK(outcomes[5].replayed != outcomes[6].replayed);

    // Both databases end in the same rows; the rejected jobs' rows and results did not move.
    CHECK(batch.snapshots() == single.snapshots());
    for (std::size_t i = 0; i < rejected.size(); ++i) {
        CHECK(testing::job_snapshot(conn, rejected[i]) +
                  testing::results_snapshot(conn, rejected[i]) ==
              before[i]);
    }
    CHECK(testing::event_count(conn, q[5].job, "completed") == 1);
}

TEST_CASE("coalesced renew of a mixed batch answers each request as the single path does",
          "[store][batch][fencing]") {
    MixedScene single, batch;
    std::vector<std::string> expected, got;
    for (const auto& q : single.requests) {
        expected.push_back(describe(single.store.renew({q.org, q.job, q.generation, q.worker},
                                                       kLease, single.clock.now())));
    }
    const auto outcomes = batch.store.renew_batch(batch.requests, kLease, batch.clock.now());
    for (const auto& t : outcomes) got.push_back(describe(t));
    CHECK(got == expected);
    REQUIRE(outcomes.size() == 7);
    CHECK(outcomes[0].lease_expires_at == batch.clock.now() + kLease);
    CHECK(outcomes[2].rejection == Rejection::LeaseExpired);
    CHECK((outcomes[5].accepted() && outcomes[6].accepted()));
    CHECK(batch.snapshots() == single.snapshots());
}

TEST_CASE("completions and claims in one transaction answer each as the two batches do",
          "[store][batch][mixed][fencing]") {
    MixedScene apart, together;
    for (auto* scene : {&apart, &together}) {
        scene->store.enqueue(1, {{5, "next-1", 3}, {4, "next-2", 3}, {3, "next-3", 3}},
                             scene->clock.now());
    }
    const std::vector<store::ClaimRequest> claims{{"w1", 1}, {"w2", 2}, {"w3", 1}};
    std::uint64_t sent_together = 0;
    SECTION("the first mixed transaction of its queues, statement by statement") {
        CHECK(together.store.sent_together() == 0);
    }
    SECTION("a later one, its statements sent together") {
        // An empty mixed transaction of the same queues teaches the store their claim variant.
        together.store.complete_and_claim({}, 1, {}, kLease, together.clock.now());
        REQUIRE(together.store.sent_together() == 0);
        sent_together = 1;
    }
    const auto completed = apart.store.complete_batch(apart.requests, apart.clock.now());
    const auto claimed = apart.store.claim_batch(1, claims, kLease, apart.clock.now());
    const auto both = together.store.complete_and_claim(together.requests, 1, claims, kLease,
                                                        together.clock.now());
    CHECK(together.store.sent_together() == sent_together);

    REQUIRE(both.completions.size() == completed.size());
    for (std::size_t i = 0; i < completed.size(); ++i) {
        CHECK(describe(both.completions[i]) == describe(completed[i]));
    }
    CHECK(both.completions[1].rejection == Rejection::StaleGeneration);
    CHECK(both.completions[2].rejection == Rejection::LeaseExpired);
    CHECK(both.completions[3].rejection == Rejection::OtherOrganization);
    CHECK(both.completions[4].rejection == Rejection::UnknownJob);
    const auto payloads = [](const std::vector<store::ClaimOutcome>& out) {
        std::vector<std::string> p;
        for (const auto& o : out) {
            std::string s = std::to_string(static_cast<int>(o.status)) + ":";
            for (const auto& l : o.leases) s += l.payload + ",";
            p.push_back(s);
        }
        return p;
    };
    CHECK(payloads(both.claims) == payloads(claimed));
    CHECK(payloads(both.claims) == std::vector<std::string>{"0:next-1,", "0:next-2,next-3,", "1:"});
    CHECK(together.snapshots() == apart.snapshots());

    // One transaction: the completed rows and the claimed ones are versions of the same xid.
    std::vector<store::JobId> written{together.requests[0].job, together.requests[5].job};
    for (const auto& o : both.claims) {
        for (const auto& l : o.leases) written.push_back(l.job_id);
    }
    pqxx::read_transaction t(together.store.connection());
    std::string list;
    for (auto id : written) list += (list.empty() ? "" : ",") + std::to_string(id);
    CHECK(t.exec1("SELECT count(DISTINCT xmin::text) FROM jobs WHERE id IN (" + list + ")")[0]
              .as<int>() == 1);
    CHECK(t.exec1("SELECT count(*) FROM jobs WHERE id IN (" + list + ")")[0].as<int>() == 5);
}

TEST_CASE("a refused completion whose job the claim beside it takes again reads as if alone",
          "[store][batch][mixed][fencing]") {
    // docs/protocol.md, COMPLETE with next: each is decided on its own row, as if sent alone. The
    // worker released the job and then completes it with the old generation, asking for the next
    // job in the same message; the claim takes that very job again.
    testing::StoreFixture f;
    std::uint64_t sent_together = 0;
    SECTION("statement by statement") {
        CHECK(f.store.sent_together() == 0);
    }
    SECTION("sent together") {
        // An empty mixed transaction of the same queues teaches the store their claim variant.
        f.store.complete_and_claim({}, 1, {}, kLease, f.clock.now());
        REQUIRE(f.store.sent_together() == 0);
        sent_together = 1;
    }
    const auto job = f.store.enqueue(1, {{0, "only", 3}}, f.clock.now()).at(0);
    const auto first = f.claim("a");
    REQUIRE(first.job_id == job);
    REQUIRE(f.store.release({1, job, first.generation, "a", ""}, f.clock.now()).accepted());
    const std::vector<TransitionRequest> late{{1, job, first.generation, "a", "ref-late"}};
    const std::vector<store::ClaimRequest> next{{"a", 1}};
    const auto both = f.store.complete_and_claim(late, 1, next, kLease, f.clock.now());
    CHECK(f.store.sent_together() == sent_together);
    REQUIRE(both.claims.at(0).leases.size() == 1);
    CHECK(both.claims[0].leases[0].job_id == job);
    CHECK(both.claims[0].leases[0].generation > first.generation);
    // The row before the claim: pending at the quoted generation, so rule 8, not rule 9.
    CHECK(both.completions.at(0).rejection == Rejection::LeaseExpired);
    CHECK(testing::event_count(f.store.connection(), job, "rejected") == 1);
}

TEST_CASE("the room a completion frees in a limited queue goes to the claims beside it",
          "[store][batch][mixed][limit]") {
    testing::StoreFixture f;
    ops::QueueSettings limit;
    limit.max_assigned = 1;
    f.configure_queue(1, "scarce", limit);
    store::NewJob job{0, "first", 3};
    job.queue = "scarce";
    f.store.enqueue(1, {job}, f.clock.now());
    job.payload = "second";
    f.store.enqueue(1, {job}, f.clock.now());
    const auto held = f.store.claim(1, {"a", 1, {"scarce"}}, kLease, f.clock.now());
    REQUIRE(held.leases.size() == 1);
    const auto& l = held.leases[0];
    // Apart, a claim run first finds no room; in the transaction the completion goes first.
    CHECK(f.store.claim(1, {"b", 1, {"scarce"}}, kLease, f.clock.now()).leases.empty());
    const std::vector<TransitionRequest> done{{1, l.job_id, l.generation, "a", "ref"}};
    const std::vector<store::ClaimRequest> next{{"b", 1, {"scarce"}}};
    const auto both = f.store.complete_and_claim(done, 1, next, kLease, f.clock.now());
    CHECK(both.completions.at(0).accepted());
    REQUIRE(both.claims.at(0).leases.size() == 1);
    CHECK(both.claims[0].leases[0].payload == "second");
}

TEST_CASE("a mixed transaction sent together whose queues gained a rate runs as one that knew",
          "[store][batch][mixed][rate]") {
    testing::StoreFixture f;
    for (const char* payload : {"j1", "j2", "j3", "j4", "j5"}) {
        store::NewJob job{0, payload, 3};
        job.queue = "metered";
        f.store.enqueue(1, {job}, f.clock.now());
    }
    const std::vector<store::ClaimRequest> one{{"a", 1, {"metered"}}};
    const auto first = f.store.complete_and_claim({}, 1, one, kLease, f.clock.now());
    REQUIRE(first.claims.at(0).leases.size() == 1);
    CHECK(f.store.sent_together() == 0);

    // The store last saw the queue without a rate, and sends the statement for that; the locks
    // answer that it has one now, so nothing sent stays and the transaction runs again.
    ops::QueueSettings metered;
    metered.rate_per_s = 1.0;
    metered.rate_burst = 1;
    f.configure_queue(1, "metered", metered);
    const auto& held = first.claims[0].leases[0];
    const std::vector<TransitionRequest> done{{1, held.job_id, held.generation, "a", "ref"}};
    const std::vector<store::ClaimRequest> three{
        {"b", 1, {"metered"}}, {"c", 1, {"metered"}}, {"d", 1, {"metered"}}};
    const auto second = f.store.complete_and_claim(done, 1, three, kLease, f.clock.now());
    CHECK(f.store.sent_together() == 0);
    CHECK(second.completions.at(0).accepted());
    std::size_t granted = 0;
    for (const auto& c : second.claims) granted += c.leases.size();
    CHECK(granted == 1);  // the burst
    CHECK(second.claims.at(2).refill_at.has_value());
    CHECK(testing::event_count(f.store.connection(), held.job_id, "completed") == 1);

    // Now the store knows the rate, and the next one goes together under it.
    f.clock.advance(1 * base::kSeconds);
    const auto third = f.store.complete_and_claim({}, 1, three, kLease, f.clock.now());
    CHECK(f.store.sent_together() == 1);
    granted = 0;
    for (const auto& c : third.claims) granted += c.leases.size();
    CHECK(granted == 1);
    // Read after its COMMIT: when the bucket holds the short requesters back to.
    REQUIRE(third.claims.at(2).leases.empty());
    REQUIRE(third.claims.at(2).refill_at.has_value());
    CHECK(*third.claims[2].refill_at > f.clock.now());
}

TEST_CASE("each organization's queue of a name keeps its own claim statement in one message",
          "[store][batch][mixed][rate]") {
    testing::StoreFixture f;
    // Organization 1's "shared" queue has a rate; organization 2's queue of the same name has not.
    ops::QueueSettings metered;
    metered.rate_per_s = 1.0;
    metered.rate_burst = 1;
    f.configure_queue(1, "shared", metered);
    for (const store::OrgId org : {1, 2}) {
        for (const char* payload : {"j1", "j2", "j3", "j4"}) {
            store::NewJob job{0, payload, 3};
            job.queue = "shared";
            f.store.enqueue(org, {job}, f.clock.now());
        }
    }
    const std::vector<store::ClaimRequest> two{{"a", 1, {"shared"}}, {"b", 1, {"shared"}}};
    const auto granted = [](const store::CompletedAndClaimed& out) {
        std::size_t n = 0;
        for (const auto& c : out.claims) n += c.leases.size();
        return n;
    };
    // Each organization's first mixed transaction runs statement by statement and teaches the
    // store its variant; alternating, each later one goes in one message with its own.
    CHECK(granted(f.store.complete_and_claim({}, 1, two, kLease, f.clock.now())) == 1);
    CHECK(granted(f.store.complete_and_claim({}, 2, two, kLease, f.clock.now())) == 2);
    REQUIRE(f.store.sent_together() == 0);
    f.clock.advance(1 * base::kSeconds);
    CHECK(granted(f.store.complete_and_claim({}, 1, two, kLease, f.clock.now())) == 1);
    CHECK(granted(f.store.complete_and_claim({}, 2, two, kLease, f.clock.now())) == 2);
    CHECK(f.store.sent_together() == 2);
    CHECK(f.store.last_claim_statement() == (store::ClaimPlan{.batch = true}.name()));
}

TEST_CASE("past the claim variants it keeps, a store forgets the least recently used ones",
          "[store][batch][mixed]") {
    testing::StoreFixture f;
    const std::vector<store::ClaimRequest> one{{"a", 1}};
    const auto mixed = [&](store::OrgId org) {
        f.store.complete_and_claim({}, org, one, kLease, f.clock.now());
    };
    // 1,024 organizations' queues known (the bound), the first used again since.
    constexpr store::OrgId kKept = 1024;
    for (store::OrgId org = 1; org <= kKept; ++org) mixed(org);
    REQUIRE(f.store.sent_together() == 0);
    mixed(1);
    REQUIRE(f.store.sent_together() == 1);
    // One more: the least recently used half goes, organization 1 stays, and so does the newest.
    mixed(kKept + 1);
    mixed(1);
    CHECK(f.store.sent_together() == 2);
    mixed(kKept);
    CHECK(f.store.sent_together() == 3);
    mixed(2);
    CHECK(f.store.sent_together() == 3);
}

TEST_CASE("a coalesced claim hands out the best jobs to its requesters in order",
          "[store][batch][claim]") {
    testing::TestDatabase db;
    AssignmentStore store(db.dsn());
    ManualClock clock(kT0);
    store.enqueue(1, {{1, "low", 3}, {5, "high", 3}, {3, "mid", 3}}, clock.now());
    const auto out = store.claim_batch(
        1, std::vector<store::ClaimRequest>{{"w1", 1}, {"w2", 1}, {"w3", 2}}, kLease, clock.now());
    REQUIRE(out.size() == 3);
    REQUIRE(out[0].leases.size() == 1);
    REQUIRE(out[1].leases.size() == 1);
    REQUIRE(out[2].leases.size() == 1);
    CHECK(out[0].leases[0].payload == "high");
    CHECK(out[1].leases[0].payload == "mid");
    CHECK(out[2].leases[0].payload == "low");
    CHECK(out[2].status == store::ClaimOutcome::Status::Claimed);
    {
        pqxx::read_transaction t(store.connection());
        CHECK(t.exec_params1("SELECT assignee FROM jobs WHERE id = $1", out[1].leases[0].job_id)[0]
                  .as<std::string>() == "w2");
    }
    const auto none =
        store.claim_batch(1, std::vector<store::ClaimRequest>{{"w4", 2}}, kLease, clock.now());
    CHECK(none.at(0).status == store::ClaimOutcome::Status::NoWork);
}

TEST_CASE("coalesced claims from many concurrent requesters never hand out a job twice",
          "[store][batch][claim]") {
    constexpr int kThreads = 6;
    constexpr int kJobs = 600;
    testing::TestDatabase db;
    {
        AssignmentStore store(db.dsn());
        std::vector<store::NewJob> jobs(kJobs, store::NewJob{0, "j", 3});
        store.enqueue(1, jobs, kT0);
    }
    std::mutex mutex;
    std::vector<std::pair<store::JobId, std::string>> granted;  // job, requester
    std::barrier start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            AssignmentStore store(db.dsn());
            const ManualClock clock(kT0);
            start.arrive_and_wait();
            while (true) {
                std::vector<store::ClaimRequest> requests;
                for (int r = 0; r < 5; ++r) {
                    requests.push_back(
                        {"t" + std::to_string(t) + "r" + std::to_string(r), r % 3 + 1});
                }
                const auto out = store.claim_batch(1, requests, kLease, clock.now());
                int got = 0;
                std::lock_guard lock(mutex);
                for (std::size_t i = 0; i < out.size(); ++i) {
                    for (const auto& l : out[i].leases)
                        granted.emplace_back(l.job_id, requests[i].worker);
                    got += static_cast<int>(out[i].leases.size());
                }
                if (got == 0) return;
            }
        });
    }
    for (auto& th : threads) th.join();
    std::set<store::JobId> distinct;
    for (const auto& g : granted) distinct.insert(g.first);
    CHECK(granted.size() == static_cast<std::size_t>(kJobs));
    CHECK(distinct.size() == granted.size());
    auto conn = db.connect();
    pqxx::read_transaction txn(*conn);
    CHECK(txn.exec1("SELECT count(*) FROM jobs WHERE state = 'assigned' AND generation = 1")[0]
              .as<int>() == kJobs);
    // Each lease went to the requester whose slot it filled.
    int mismatched = 0;
    for (const auto& [job, worker] : granted) {
        if (txn.exec_params1("SELECT assignee FROM jobs WHERE id = $1", job)[0].as<std::string>() !=
            worker) {
            ++mismatched;
        }
    }
    CHECK(mismatched == 0);
}
