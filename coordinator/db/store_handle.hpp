#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/base/backoff.hpp"
#include "common/base/clock.hpp"
#include "common/store/assignment_store.hpp"

namespace aclaim::coordinator {

/// One thread's AssignmentStore that survives the database going away: a broken connection is
/// dropped and rebuilt (fresh session settings and prepared statements) with exponential
/// backoff, while requests in between are answered at once instead of waiting.
class StoreHandle {
  public:
    StoreHandle(std::string dsn, store::StoreOptions options, const base::Clock& clock);

    /// The store, connecting first when a reconnection attempt is due; nullptr while the
    /// database is unreachable.
    store::AssignmentStore* get();

    /// Keeps trying to connect, sleeping between attempts, until connected or `budget` has
    /// passed. For learning the outcome of an interrupted commit.
    store::AssignmentStore* get_within(std::chrono::milliseconds budget);

    /// Forgets a connection found broken; the next attempt comes after the backoff delay.
    void drop(const std::string& why);

    /// Why the last connection attempt failed or the last connection was dropped.
    const std::string& last_error() const { return last_error_; }

  private:
    bool try_connect();

    std::string dsn_;
    const base::Clock& clock_;
    store::StoreOptions options_;
    std::unique_ptr<store::AssignmentStore> store_;
    base::Backoff backoff_;
    base::MonotonicTime next_attempt_{};
    std::string last_error_;
    bool reported_down_ = false;
};

/// True when an exception from a store call means the connection is gone, as opposed to the
/// database refusing one statement on a healthy connection.
bool connection_lost(const std::exception& e, const store::AssignmentStore* store);

}  // namespace aclaim::coordinator
