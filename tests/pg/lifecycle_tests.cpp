// The job lifecycle on the store, under a manual clock: queues, scheduled jobs, retries with
// backoff and the discarded state, run deadlines, cancellation, idempotent enqueue, per-queue
// limits and pause, and the in-place migration from the schema before it.

#include <barrier>
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "common/ops/checker.hpp"
#include "common/ops/operator_store.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/migrations.hpp"
#include "common/store/pg_time.hpp"
#include "tests/support/checker_support.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using base::Duration;
using base::Instant;
using base::ManualClock;
using store::AssignmentStore;
using store::JobState;
using store::NewJob;
using store::Rejection;

using testing::kLease;
using testing::kT0;

using namespace std::chrono_literals;

namespace {

NewJob job_in(const std::string& queue, const std::string& payload = "review", int priority = 0) {
    NewJob j;
    j.queue = queue;
    j.payload = payload;
    j.priority = priority;
    return j;
}

/// A job of the default queue with `max_attempts`, retried after 10 s doubling up to 25 s.
NewJob flaky(int max_attempts) {
    NewJob j = job_in("default", "flaky");
    j.max_attempts = max_attempts;
    j.backoff_base = 10s;
    j.backoff_cap = 25s;
    return j;
}

/// The store fixture with the operator's store beside it.
struct Fixture : testing::StoreFixture {
    std::unique_ptr<pqxx::connection> ops_conn = db.connect();
    ops::OperatorStore ops{*ops_conn};

    store::JobId enqueue(const NewJob& j, store::OrgId org = 1) {
        return store.enqueue(org, {j}, clock.now()).at(0);
    }
    store::ClaimOutcome claim(const std::string& worker, std::vector<std::string> queues,
                              int max_jobs = 1, store::OrgId org = 1) {
        return store.claim(org, {worker, max_jobs, std::move(queues)}, kLease, clock.now());
    }
    store::TransitionRequest fence(const store::Lease& l, const std::string& worker) const {
        return {l.org_id, l.job_id, l.generation, worker};
    }
    std::string state(store::JobId id) { return testing::job_state(store.connection(), id); }
    Instant run_at(store::JobId id) {
        pqxx::work txn(store.connection());
        return txn.exec_params1("SELECT aclaim_us(run_at) FROM jobs WHERE id = $1", id)[0]
            .as<Instant>();
    }
    /// aclaim_retry_delay for this job and attempt, as the schema computes it.
    Duration retry_delay(store::JobId id, int attempt, Duration base, Duration cap) {
        pqxx::work txn(store.connection());
        return txn
            .exec_params1("SELECT aclaim_retry_delay($1, $2, $3, $4)", id, attempt, base, cap)[0]
            .as<Duration>();
    }
    ops::CheckReport check() const { return testing::check_database(db.dsn()); }
};

}  // namespace

TEST_CASE("a claim takes only from the queues it serves, in claim order across them",
          "[store][lifecycle][queues]") {
    Fixture f;
    const auto plain = f.enqueue(job_in("default", "plain"));
    const auto electrical = f.enqueue(job_in("electrical", "wiring", 5));
    const auto plumbing = f.enqueue(job_in("plumbing", "pipes", 1));

    SECTION("a worker naming no queue serves default only") {
        auto out = f.claim("old-worker", {}, 10);
        REQUIRE(out.leases.size() == 1);
        CHECK(out.leases[0].job_id == plain);
        CHECK(out.leases[0].queue == "default");
    }
    SECTION("a skilled worker takes its queues by priority, and nothing else") {
        auto out = f.claim("sparky", {"electrical", "plumbing"}, 10);
        REQUIRE(out.leases.size() == 2);
        CHECK(out.leases[0].job_id == electrical);
        CHECK(out.leases[1].job_id == plumbing);
        CHECK(f.state(plain) == "pending");
    }
    SECTION("a queue nobody enqueued into yields no work") {
        CHECK(f.claim("roofer", {"roofing"}).status == store::ClaimOutcome::Status::NoWork);
    }
}

TEST_CASE("a scheduled job is not claimable before its run_at, then comes due and is claimed",
          "[store][lifecycle][schedule]") {
    Fixture f;
    NewJob later = job_in("default", "later");
    later.run_at = kT0 + 60s;
    const auto id = f.enqueue(later);
    const auto now_job = f.enqueue(job_in("default", "now"));
    CHECK(f.state(id) == "scheduled");
    CHECK(f.store.next_due() == kT0 + 60s);

    auto first = f.claim("w", {}, 10);
    REQUIRE(first.leases.size() == 1);
    CHECK(first.leases[0].job_id == now_job);

    f.clock.advance(59s);
    CHECK(f.store.promote_due(f.clock.now(), 100) == 0);
    CHECK(f.claim("w", {}).status == store::ClaimOutcome::Status::NoWork);

    f.clock.advance(1s);
    CHECK(f.store.promote_due(f.clock.now(), 100) == 1);
    CHECK(f.state(id) == "pending");
    CHECK(testing::event_count(f.store.connection(), id, "due") == 1);
    CHECK_FALSE(f.store.next_due().has_value());
    auto second = f.claim("w", {});
    REQUIRE(second.leases.size() == 1);
    CHECK(second.leases[0].job_id == id);
    testing::check_clean(f.check());
}

TEST_CASE(
    "retries wait out an exponential backoff with jitter and a cap, then the job is discarded",
    "[store][lifecycle][retry]") {
    Fixture f;
    const auto id = f.enqueue(flaky(4));
    std::vector<Duration> waited;
    for (int attempt = 1; attempt <= 4; ++attempt) {
        REQUIRE(f.store.promote_due(f.clock.now(), 100) <= 1);
        auto out = f.claim("w", {});
        REQUIRE(out.leases.size() == 1);
        const auto lease = out.leases[0];
        CHECK(lease.attempts == attempt);
        auto req = f.fence(lease, "w");
        req.reason = "scanner timeout " + std::to_string(attempt);
        req.retryable = true;
        const auto t = f.store.fail(req, f.clock.now());
        REQUIRE(t.accepted());
        if (attempt == 4) {
            CHECK(t.state == JobState::Discarded);
            break;
        }
        CHECK(t.state == JobState::Scheduled);
        const Duration delay = f.run_at(id) - f.clock.now();
        waited.push_back(delay);
        CHECK(delay == f.retry_delay(id, attempt, 10s, 25s));
        // Equal jitter: between half and all of min(cap, base * 2^(attempt-1)).
        const Duration full = std::min<Duration>(25s, Duration(10s) * (1 << (attempt - 1)));
        CHECK(delay >= full / 2);
        CHECK(delay <= full);
        // Not claimable until it comes due.
        CHECK(f.claim("w", {}).status == store::ClaimOutcome::Status::NoWork);
        f.clock.advance(delay - 1us);
        CHECK(f.store.promote_due(f.clock.now(), 100) == 0);
        f.clock.advance(1us);
    }
    CHECK(f.state(id) == "discarded");
    // Every attempt's error is kept in the audit log.
    const auto events = f.ops.events(id);
    int errors = 0;
    for (const auto& e : events) {
        if (e.detail.find("scanner timeout") != std::string::npos) ++errors;
    }
    CHECK(errors == 4);
    CHECK(testing::event_count(f.store.connection(), id, "discarded") == 1);
    // A discarded job is never retried silently; an operator revives it with a fresh budget.
    f.clock.advance(1h);
    CHECK(f.store.promote_due(f.clock.now(), 100) == 0);
    CHECK(f.claim("w", {}).status == store::ClaimOutcome::Status::NoWork);
    CHECK(f.ops.retry({id}, "operator", "scanner fixed", f.clock.now()) ==
          std::vector<store::JobId>{id});
    auto revived = f.claim("w", {});
    REQUIRE(revived.leases.size() == 1);
    CHECK(revived.leases[0].attempts == 1);
    CHECK(testing::event_count(f.store.connection(), id, "retried") == 1);
    testing::check_clean(f.check());
}

TEST_CASE("the backoff's jitter differs between jobs failed at the same instant",
          "[store][lifecycle][retry]") {
    // The test above compares a delay with the function that computed it; this one asks what
    // jitter is for: jobs failing together must not all come back at the same instant.
    Fixture f;
    constexpr int kJobs = 8;
    for (int i = 0; i < kJobs; ++i) f.enqueue(flaky(3));
    auto out = f.claim("w", {}, kJobs);
    REQUIRE(out.leases.size() == kJobs);
    std::set<Duration> delays;
    for (const auto& lease : out.leases) {
        auto req = f.fence(lease, "w");
        req.reason = "scanner timeout";
        req.retryable = true;
        REQUIRE(f.store.fail(req, f.clock.now()).state == JobState::Scheduled);
        const Duration delay = f.run_at(lease.job_id) - f.clock.now();
        CHECK(delay >= 5s);
        CHECK(delay <= 10s);
        delays.insert(delay);
    }
    // 1024 jitter steps over 5 s: eight jobs all but never share a step.
    INFO(delays.size() << " distinct delays among " << kJobs << " jobs");
    CHECK(delays.size() >= kJobs - 1);
}

TEST_CASE("an expired lease uses up an attempt: past the last one the job is discarded",
          "[store][lifecycle][retry]") {
    Fixture f;
    NewJob j = job_in("default", "poison");
    j.max_attempts = 2;
    const auto id = f.enqueue(j);
    for (int attempt = 1; attempt <= 2; ++attempt) {
        REQUIRE(f.claim("w" + std::to_string(attempt), {}).leases.size() == 1);
        f.clock.advance(kLease);
        const auto r = f.store.reclaim_expired(f.clock.now(), 100);
        REQUIRE(r.size() == 1);
        CHECK(r[0].state == (attempt == 2 ? JobState::Discarded : JobState::Pending));
    }
    CHECK(f.state(id) == "discarded");
    CHECK(f.claim("w3", {}).status == store::ClaimOutcome::Status::NoWork);
}

TEST_CASE("a run deadline caps the lease: renewals past it are refused and the attempt fails",
          "[store][lifecycle][deadline]") {
    Fixture f;
    NewJob j = job_in("default", "slow");
    j.run_timeout = 25s;
    j.max_attempts = 2;
    const auto id = f.enqueue(j);
    const auto lease = f.claim("w", {}).leases.at(0);
    REQUIRE(lease.deadline == kT0 + 25s);
    CHECK(lease.lease_expires_at == kT0 + kLease);
    const auto req = f.fence(lease, "w");
    f.clock.advance(9s);
    CHECK(f.store.renew(req, kLease, f.clock.now()).lease_expires_at == kT0 + 19s);
    f.clock.advance(9s);
    // The lease never runs past the deadline.
    CHECK(f.store.renew(req, kLease, f.clock.now()).lease_expires_at == kT0 + 25s);
    f.clock.advance(7s);
    const auto refused = f.store.renew(req, kLease, f.clock.now());
    REQUIRE(refused.rejection);
    CHECK(*refused.rejection == Rejection::DeadlineExceeded);
    auto done = req;
    done.result_ref = "late";
    const auto late = f.store.complete(done, f.clock.now());
    REQUIRE(late.rejection);
    CHECK(*late.rejection == Rejection::DeadlineExceeded);
    // The reaper takes it back as a failed attempt; the retry policy applies.
    const auto r = f.store.reclaim_expired(f.clock.now(), 100);
    REQUIRE(r.size() == 1);
    CHECK(r[0].state == JobState::Pending);
    CHECK(f.ops.events(id).back().detail.find("run deadline exceeded on attempt 1") !=
          std::string::npos);
    // A renewal that arrives after the reaper took the lease back still hears the real reason.
    const auto after_reclaim = f.store.renew(req, kLease, f.clock.now());
    REQUIRE(after_reclaim.rejection);
    CHECK(*after_reclaim.rejection == Rejection::DeadlineExceeded);
    const auto second = f.claim("w2", {}).leases.at(0);
    CHECK(second.attempts == 2);
    CHECK(second.deadline == f.clock.now() + 25s);
}

TEST_CASE("cancel: pending at once, assigned with its completion refused, both revivable",
          "[store][lifecycle][cancel]") {
    Fixture f;
    const auto waiting = f.enqueue(job_in("default", "a"));
    const auto held_id = f.enqueue(job_in("default", "b", 9));
    const auto lease = f.claim("w", {}).leases.at(0);
    REQUIRE(lease.job_id == held_id);

    const auto cancelled =
        f.ops.cancel({waiting, held_id, 999999}, "ops-alice", "duplicate order", f.clock.now());
    REQUIRE(cancelled.size() == 2);
    CHECK(cancelled[0].was == "pending");
    CHECK(cancelled[1].was == "assigned");
    CHECK(cancelled[1].holder == "w");
    CHECK(f.state(waiting) == "cancelled");
    CHECK(f.state(held_id) == "cancelled");

    auto done = f.fence(lease, "w");
    done.result_ref = "verdict";
    const auto refused = f.store.complete(done, f.clock.now());
    REQUIRE(refused.rejection);
    CHECK(*refused.rejection == Rejection::Cancelled);
    const auto renew = f.store.renew(f.fence(lease, "w"), kLease, f.clock.now());
    REQUIRE(renew.rejection);
    CHECK(*renew.rejection == Rejection::Cancelled);
    // Who and why are on the record.
    const auto events = f.ops.events(held_id);
    const auto it = std::find_if(events.begin(), events.end(),
                                 [](const auto& e) { return e.kind == "cancelled"; });
    REQUIRE(it != events.end());
    CHECK(it->worker == "ops-alice");
    CHECK(it->detail == "was assigned, held by w: duplicate order");
    // Cancelling again changes nothing.
    CHECK(f.ops.cancel({held_id}, "ops-alice", "again", f.clock.now()).empty());
    testing::check_clean(f.check());
}

TEST_CASE("idempotent enqueue: a held dedupe key returns its job, a finished one frees it",
          "[store][lifecycle][dedupe]") {
    Fixture f;
    NewJob j = job_in("default", "inspection 77");
    j.dedupe_key = "order-77";
    const auto first = f.store.enqueue_each(1, {j}, f.clock.now());
    REQUIRE(first.at(0).created);
    const auto again = f.store.enqueue_each(1, {j}, f.clock.now());
    CHECK_FALSE(again.at(0).created);
    CHECK(again.at(0).id == first.at(0).id);
    // Another organization has keys of its own.
    CHECK(f.store.enqueue_each(2, {j}, f.clock.now()).at(0).created);

    auto lease = f.claim("w", {}).leases.at(0);
    auto done = f.fence(lease, "w");
    done.result_ref = "ok";
    REQUIRE(f.store.complete(done, f.clock.now()).accepted());
    f.clock.advance(30s);
    SECTION("with a window, the finished job keeps its key until the window passes") {
        const auto held = f.store.enqueue_each(1, {j}, f.clock.now(), 60s);
        CHECK_FALSE(held.at(0).created);
        CHECK(held.at(0).state == JobState::Completed);
        f.clock.advance(31s);
        const auto fresh = f.store.enqueue_each(1, {j}, f.clock.now(), 60s);
        CHECK(fresh.at(0).created);
        CHECK(fresh.at(0).id != first.at(0).id);
    }
    SECTION("without a window, a finished job holds no key") {
        const auto fresh = f.store.enqueue_each(1, {j}, f.clock.now());
        CHECK(fresh.at(0).created);
    }
}

TEST_CASE("idempotent enqueue is race-free: 16 producers enqueue the same keys at a barrier",
          "[store][lifecycle][dedupe][concurrency]") {
    Fixture f;
    constexpr int kProducers = 16;
    constexpr int kKeys = 40;
    std::barrier start(kProducers);
    std::vector<std::vector<store::Enqueued>> got(kProducers);
    std::vector<std::thread> threads;
    for (int p = 0; p < kProducers; ++p) {
        threads.emplace_back([&, p] {
            AssignmentStore store(f.db.dsn());
            std::vector<NewJob> jobs;
            for (int k = 0; k < kKeys; ++k) {
                // Each producer walks the keys from a different place, so that they collide.
                NewJob j = job_in("default", "job");
                j.dedupe_key = "key-" + std::to_string((k + p * 7) % kKeys);
                jobs.push_back(j);
            }
            start.arrive_and_wait();
            got[p] = store.enqueue_each(1, jobs, kT0);
        });
    }
    for (auto& t : threads) t.join();
    std::map<std::string, std::set<store::JobId>> ids_by_key;
    int created = 0;
    for (int p = 0; p < kProducers; ++p) {
        REQUIRE(got[p].size() == kKeys);
        for (int k = 0; k < kKeys; ++k) {
            ids_by_key["key-" + std::to_string((k + p * 7) % kKeys)].insert(got[p][k].id);
            created += got[p][k].created ? 1 : 0;
        }
    }
    CHECK(created == kKeys);
    for (const auto& [key, ids] : ids_by_key) {
        INFO(key);
        CHECK(ids.size() == 1);
    }
    pqxx::work txn(f.store.connection());
    CHECK(txn.exec1("SELECT count(*) FROM jobs")[0].as<int>() == kKeys);
}

TEST_CASE("a queue's concurrency limit holds with three stores claiming at once",
          "[store][lifecycle][limit][concurrency]") {
    Fixture f;
    ops::QueueSettings limit;
    limit.max_assigned = 3;
    f.ops.configure(1, "scarce", limit, "ops", f.clock.now());
    std::vector<NewJob> jobs(30, job_in("scarce", "s"));
    f.store.enqueue(1, jobs, f.clock.now());
    f.store.enqueue(1, std::vector<NewJob>(5, job_in("plenty", "p")), f.clock.now());

    constexpr int kClaimers = 3;
    constexpr int kRounds = 5;
    std::barrier round(kClaimers);
    std::atomic<int> granted{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < kClaimers; ++c) {
        threads.emplace_back([&, c] {
            AssignmentStore store(f.db.dsn());
            for (int r = 0; r < kRounds; ++r) {
                round.arrive_and_wait();
                const auto out =
                    store.claim(1, {"c" + std::to_string(c), 4, {"scarce"}}, kLease, kT0);
                granted += static_cast<int>(out.leases.size());
            }
        });
    }
    for (auto& t : threads) t.join();
    CHECK(granted.load() == 3);
    // Another queue of the organization is not limited by it.
    CHECK(f.claim("other", {"plenty", "scarce"}, 10).leases.size() == 5);
    testing::check_clean(f.check());
}

TEST_CASE("a paused queue hands out nothing, leases already out continue, resume wakes it",
          "[store][lifecycle][pause]") {
    Fixture f;
    f.store.enqueue(1, std::vector<NewJob>(3, job_in("night", "n")), f.clock.now());
    const auto held = f.claim("w", {"night"}).leases.at(0);
    f.ops.pause(1, "night", true, "ops", "maintenance", f.clock);
    f.clock.advance(1s);
    CHECK(f.claim("w2", {"night"}, 5).status == store::ClaimOutcome::Status::NoWork);
    CHECK(f.store.renew(f.fence(held, "w"), kLease, f.clock.now()).accepted());
    const auto queues = f.ops.queues(1);
    REQUIRE(queues.size() == 1);
    CHECK(queues[0].paused);
    CHECK(queues[0].pending == 2);
    f.clock.advance(1s);
    f.ops.pause(1, "night", false, "ops", "done", f.clock);
    f.clock.advance(2s);
    CHECK(f.claim("w2", {"night"}, 5).leases.size() == 2);
    testing::check_clean(f.check());
}
