#pragma once

// A request's turn on one of the console's database connections. Requests take turns (one
// statement at a time per connection), so behind a statement the database does not answer (a
// table locked by another session, a server frozen mid-statement) the others would queue, each
// waiting out the one before it: six requests behind a 60 s --statement-timeout, six minutes for
// the last. A request waits for its turn at most the statement timeout and is then answered 503,
// so that every page answers within twice --statement-timeout (docs/operations.md).

#include <condition_variable>
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

/// Who holds a connection: one request at a time, the others wait for it, for a bounded time.
/// A flag under a plain mutex and a condition variable, not std::timed_mutex: libstdc++ makes
/// try_lock_for a pthread_mutex_clocklock, which ThreadSanitizer does not see take the lock,
/// so it would report every release as an unlock of an unlocked mutex and stop the process.
class Turn {
  public:
    /// Runs `f` holding the turn, waiting for it at most `wait` (none: as long as it takes).
    template <typename F>
    auto run(std::optional<base::Duration> wait, F&& f) -> decltype(f()) {
        take(wait);
        struct Release {
            Turn& turn;
            ~Release() { turn.give_back(); }
        } release{*this};
        return f();
    }

  private:
    void take(std::optional<base::Duration> wait) {
        std::unique_lock lock(mutex_);
        const auto free = [&] { return !taken_; };
        if (!wait) {
            freed_.wait(lock, free);
        } else if (!freed_.wait_for(lock, *wait, free)) {
            throw DatabaseBusy(
                "another request's statement has held the console's database connection for the "
                "whole --statement-timeout");
        }
        taken_ = true;
    }
    void give_back() {
        {
            std::lock_guard lock(mutex_);
            taken_ = false;
        }
        freed_.notify_one();
    }

    std::mutex mutex_;
    std::condition_variable freed_;
    bool taken_ = false;
};

}  // namespace aclaim::console
