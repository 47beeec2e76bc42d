#pragma once

// A coordinator and reviewer workers as real processes against a fresh database, for the
// end-to-end tests. Logs go to a temporary folder that is kept when ACLAIM_KEEP_LOGS=1.

#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/ops/checker.hpp"
#include "common/ops/worker_keys.hpp"
#include "common/store/assignment_store.hpp"
#include "tests/support/checker_support.hpp"
#include "tests/support/process.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

/// Coordinator flags for leases that expire and are reclaimed within seconds.
inline const std::vector<std::string> kFastLeases{
    "--lease-ms", "1500", "--heartbeat-ms", "500", "--reap-interval-ms", "100"};

class Cluster {
  public:
    Cluster();
    ~Cluster();

    const TestDatabase& db() const { return db_; }
    const std::string& endpoint() const { return endpoint_; }
    const std::string& log_dir() const { return log_dir_; }

    /// Enqueues `count` jobs for an organization now.
    std::vector<store::JobId> enqueue(store::OrgId org, int count);

    /// Starts (or restarts, on the same endpoint) the coordinator with extra flags. It runs in
    /// plaintext mode unless use_curve() was called.
    Process& start_coordinator(std::vector<std::string> extra = {});
    /// Starts another coordinator of the same database on its own endpoint, as a cell runs
    /// several (see free_port for an endpoint).
    Process& start_coordinator_at(const std::string& endpoint, std::vector<std::string> extra = {});
    /// Starts a worker that knows these coordinator endpoints (comma-separated) instead of the
    /// cluster's one.
    Process& start_worker_at(const std::string& connect, const std::string& id, store::OrgId org,
                             std::vector<std::string> extra = {});
    /// Coordinators started from now on authenticate workers with CURVE, with the secret key in
    /// this file, instead of running with --plaintext.
    void use_curve(std::string secret_key_file) {
        curve_secret_key_file_ = std::move(secret_key_file);
    }
    /// A new coordinator key pair, the secret written to a 0600 file in the log folder the way an
    /// operator keeps it, and use_curve() with that file. Returns the pair.
    ops::CurveKeyPair use_new_curve_keys();
    /// Registers a worker key the way an operator does: `aclaimctl keys register`.
    void register_key(store::OrgId org, const std::string& name, const std::string& public_key);
    /// Starts a worker with the given id and organization, plus extra flags.
    Process& start_worker(const std::string& id, store::OrgId org,
                          std::vector<std::string> extra = {});

    /// One scalar from a query on this test's database.
    long scalar(const std::string& sql);
    std::string text(const std::string& sql);

    /// Runs the invariant checker over this test's database.
    ops::CheckReport check();

    /// The last lines of every log, for a failure message.
    std::string tail_logs() const;

  private:
    TestDatabase db_;
    std::unique_ptr<pqxx::connection> conn_;
    std::string endpoint_;
    std::string log_dir_;
    int coordinator_runs_ = 0;
    std::string curve_secret_key_file_;
    std::vector<std::unique_ptr<Process>> processes_;
};

}  // namespace aclaim::testing
