#pragma once

// Drives an in-process Coordinator from tests: a fixture that starts one on a free port against a
// fresh database; workers are tests/support/raw_worker.hpp's RawWorker.
// Every wait is bounded by a deadline; nothing sleeps in the hope that something has happened.

#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/base/clock.hpp"
#include "common/proto/protocol.hpp"
#include "common/store/assignment_store.hpp"
#include "coordinator/router/coordinator.hpp"
#include "tests/support/raw_worker.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

namespace proto = aclaim::proto;
using namespace std::chrono_literals;

/// The answer bound of coordinators on a ManualClock: beyond any jump a test makes.
inline constexpr int kManualClockDbDeadlineMs = 3'600'000;

/// The options of a plaintext coordinator on a free port of 127.0.0.1, logging in with `dsn`.
inline coordinator::CoordinatorOptions plaintext_options(const std::string& dsn) {
    coordinator::CoordinatorOptions o;
    o.connection.dsn = dsn;
    o.router.bind = "tcp://127.0.0.1:*";
    o.router.plaintext = true;
    return o;
}

/// A fresh database, a coordinator on a free port serving it, and a store to enqueue with.
struct CoordinatorHarness {
    explicit CoordinatorHarness(
        const base::Clock& clock,
        const std::function<void(coordinator::CoordinatorOptions&)>& adjust = {}) {
        spdlog::set_level(spdlog::level::err);
        auto o = plaintext_options(db.dsn());
        o.router.lease_ms = 10000;
        o.reaper.reap_interval_ms = 20;
        o.db_pool.in_doubt_budget_ms = 1000;
        if (dynamic_cast<const base::ManualClock*>(&clock) != nullptr) {
            // The drain's quiet window is measured on the coordinator's clock; one that moves
            // only when told would hold stop() for good, so under it stopping ends the drain at
            // once. Its jumps (a lease's worth at a time) would also pass every database deadline
            // of a statement under way, so those are put out of their reach.
            o.router.drain_timeout_ms = 0;
            o.connection.db_deadline_ms = kManualClockDbDeadlineMs;
        }
        if (adjust) adjust(o);
        coordinator = std::make_unique<coordinator::Coordinator>(o, clock);
        coordinator->start();
    }

    ~CoordinatorHarness() { coordinator->stop(); }

    std::unique_ptr<RawWorker> worker(proto::Encoding enc = proto::Encoding::Binary) {
        return std::make_unique<RawWorker>(context, coordinator->endpoint(), enc);
    }

    /// A worker that has said HELLO as `worker_id` of `org`.
    std::unique_ptr<RawWorker> greeted(const std::string& worker_id, store::OrgId org,
                                       proto::Encoding enc = proto::Encoding::Binary) {
        auto w = worker(enc);
        w->hello(worker_id, org);
        return w;
    }

    TestDatabase db;
    zmq::context_t context;
    std::unique_ptr<coordinator::Coordinator> coordinator;
};

/// Where the manual clock of ManualCoordinator starts.
inline constexpr base::Instant kHarnessStart = base::instant_from_micros(1'700'000'000'000'000);

/// For TEST_CASE_METHOD: a coordinator on a manual clock, and a store to enqueue with.
struct ManualCoordinator {
    base::ManualClock clock{kHarnessStart};
    CoordinatorHarness h{clock};
    store::AssignmentStore store{h.db.dsn()};
};

/// For TEST_CASE_METHOD: a coordinator on the system clock.
struct SystemCoordinator {
    base::SystemClock clock;
    CoordinatorHarness h{clock};
};

inline std::vector<store::NewJob> some_jobs(int n) {
    std::vector<store::NewJob> out;
    for (int i = 0; i < n; ++i) out.push_back({0, "payload-" + std::to_string(i), 3});
    return out;
}

}  // namespace aclaim::testing
