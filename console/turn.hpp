#pragma once

// A request's turn on one of the console's database connections. Requests take turns (one
// statement at a time per connection), so behind a statement the database does not answer (a
// table locked by another session, a server frozen mid-statement) the others would queue, each
// waiting out the one before it: six requests behind a 60 s --statement-timeout, six minutes for
// the last. A request waits for its turn at most the statement timeout and is then answered 503,
// so that every page answers within twice --statement-timeout (docs/operations.md).

#include <mutex>
#include <optional>
#include <stdexcept>

#include "common/base/clock.hpp"

namespace aclaim::console {

/// The connection stayed taken for the whole wait: the database is not answering it.
class DatabaseBusy : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// Runs `f` holding `mutex`, waiting for it at most `wait` (none: as long as it takes).
template <typename F>
auto with_turn(std::timed_mutex& mutex, std::optional<common::Duration> wait, F&& f)
    -> decltype(f()) {
    std::unique_lock lock(mutex, std::defer_lock);
    if (!wait) {
        lock.lock();
    } else if (!lock.try_lock_for(*wait)) {
        throw DatabaseBusy(
            "another request's statement has held the console's database connection for the "
            "whole --statement-timeout");
    }
    return f();
}

}  // namespace aclaim::console
