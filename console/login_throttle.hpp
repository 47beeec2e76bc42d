#pragma once

// Sign-in throttling, per operator name and per client address: a few failures are free, then
// each further attempt must wait, twice as long after each failure, before its password is even
// checked (a refused attempt costs the console no hash). Bounded memory: a fixed number of records
// per kind, the stalest dropped first. Its own small lock, never held while a password is hashed.

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/base/clock.hpp"

namespace aclaim::console {

struct ThrottleLimits {
    /// Failures allowed before attempts must wait.
    int free_failures = 5;
    /// The wait after the first failure past the free ones; it doubles with each further one.
    base::Duration first_wait = std::chrono::seconds(1);
    base::Duration max_wait = std::chrono::minutes(15);
    /// A record without a failure for this long is forgotten.
    base::Duration forget_after = std::chrono::hours(1);
    /// Records kept; past it the one failed least recently is dropped.
    std::size_t max_records = 10'000;
};

struct LoginLimits {
    /// A few guesses at one account.
    ThrottleLimits names;
    /// More, since several operators may sign in from one address (a proxy, a jump host), but a
    /// spray over many names from one place stops.
    ThrottleLimits addresses{.free_failures = 20};
};

/// Thread-safe.
class LoginThrottle {
  public:
    explicit LoginThrottle(const base::Clock& clock, LoginLimits limits = {});

    /// Admits one attempt as `name` from `address`, or says how long until one may come. An
    /// admitted attempt counts as a failure at once (so that guesses sent together count
    /// together) until succeeded() takes it back.
    std::optional<base::Duration> admit(const std::string& name, const std::string& address);
    /// The admitted attempt was right: the name starts afresh, the address is not charged.
    void succeeded(const std::string& name, const std::string& address);

    /// Records held, names and addresses together.
    std::size_t records() const;

  private:
    struct Record {
        int failures = 0;
        base::MonotonicTime last{};
        base::MonotonicTime open_at{};
    };
    class Table {
      public:
        explicit Table(ThrottleLimits limits) : limits_(limits) {}
        /// How long `key` must still wait, or nothing.
        std::optional<base::Duration> wait(const std::string& key, base::MonotonicTime now);
        void fail(const std::string& key, base::MonotonicTime now);
        void forget(const std::string& key) { by_key_.erase(key); }
        void take_back(const std::string& key);
        std::size_t size() const { return by_key_.size(); }

      private:
        void make_room(base::MonotonicTime now);
        ThrottleLimits limits_;
        std::unordered_map<std::string, Record> by_key_;
    };

    const base::Clock& clock_;
    mutable std::mutex mutex_;
    Table names_;
    Table addresses_;
};

}  // namespace aclaim::console
