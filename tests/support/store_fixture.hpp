#pragma once

// The setup store tests begin with: a fresh database, a store on it and a manual clock at one
// fixed instant, so that every run computes the same leases and deadlines.

#include <catch2/catch.hpp>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/base/clock.hpp"
#include "common/ops/operator_store.hpp"
#include "common/store/assignment_store.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

/// The instant the store tests' clocks start at.
inline constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);

/// The lease StoreFixture claims with.
inline constexpr base::Duration kLease = 10 * base::kSeconds;

/// Claims one job for `worker` with a kLease lease and requires that exactly one was handed out.
inline store::Lease claim_one(store::AssignmentStore& store, base::Instant now,
                              const std::string& worker, store::OrgId org = 1) {
    auto out = store.claim(org, {worker, 1}, kLease, now);
    REQUIRE(out.leases.size() == 1);
    return out.leases[0];
}

/// Enqueues n jobs of `priority` on `queue` of organization `org`, payloads "job 0", "job 1", ...;
/// returns their ids in order.
inline std::vector<store::JobId> enqueue_on(store::AssignmentStore& store, const std::string& queue,
                                            int n, base::Instant now, int priority = 0,
                                            store::OrgId org = 1) {
    std::vector<store::NewJob> jobs;
    for (int i = 0; i < n; ++i) {
        store::NewJob job{priority, "job " + std::to_string(i), 3};
        job.queue = queue;
        jobs.push_back(job);
    }
    return store.enqueue(org, jobs, now);
}

/// Gives `queue` of `org` these settings as an operator would, on a connection of its own.
inline void configure_queue(const TestDatabase& db, store::OrgId org, const std::string& queue,
                            const ops::QueueSettings& settings, base::Instant now) {
    auto conn = db.connect();
    ops::OperatorStore(*conn).configure(org, queue, settings, "ops", now);
}

/// A migrated database of the test's own, a store on it and a clock at kT0.
struct StoreFixture {
    TestDatabase db;
    store::AssignmentStore store{db.dsn()};
    base::ManualClock clock{kT0};

    store::JobId enqueue_one(store::OrgId org = 1, int max_attempts = 3) {
        return store.enqueue(org, {{0, "review me", max_attempts}}, clock.now()).at(0);
    }
    store::Lease claim(const std::string& worker, store::OrgId org = 1) {
        return claim_one(store, clock.now(), worker, org);
    }
    /// FAIL of `job` at `generation` by `worker`, now.
    auto fail(store::JobId job, store::Generation generation, const std::string& worker,
              const std::string& reason, bool retryable) {
        return store.fail({.org = 1,
                           .job = job,
                           .generation = generation,
                           .worker = worker,
                           .reason = reason,
                           .retryable = retryable},
                          clock.now());
    }
    /// Gives `queue` these settings as an operator would, on a connection of its own.
    void configure_queue(store::OrgId org, const std::string& queue,
                         const ops::QueueSettings& settings) {
        testing::configure_queue(db, org, queue, settings, clock.now());
    }
};

/// For TEST_CASE_METHOD: StoreFixture with a job (`id`) claimed by worker "a" (`held`), and the
/// store's connection `c`.
struct HeldByA : StoreFixture {
    pqxx::connection& c = store.connection();
    const store::JobId id = enqueue_one();
    const store::Lease held = claim("a");
};

/// For TEST_CASE_METHOD: a fresh database, a connection to it, a store on it, and the system
/// clock's time read once at the start.
struct StoreAtNow {
    TestDatabase db;
    std::unique_ptr<pqxx::connection> conn = db.connect();
    store::AssignmentStore store{db.dsn()};
    const base::Instant now = base::SystemClock().now();
};

}  // namespace aclaim::testing
