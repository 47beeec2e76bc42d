#include "coordinator/db/store_handle.hpp"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>
#include <thread>

namespace aclaim::coordinator {

StoreHandle::StoreHandle(std::string dsn, store::StoreOptions options, const base::Clock& clock)
    : dsn_(std::move(dsn)), clock_(clock), options_(std::move(options)) {}

bool StoreHandle::try_connect() {
    try {
        store_ = std::make_unique<store::AssignmentStore>(dsn_, options_);
        backoff_.reset();
        if (reported_down_) {
            spdlog::info("{}: database connection restored", options_.application_name);
        }
        reported_down_ = false;
        return true;
    } catch (const std::exception& e) {
        store_.reset();
        last_error_ = e.what();
        const auto delay = backoff_.next();
        next_attempt_ = clock_.monotonic_now() + delay;
        if (!reported_down_) {
            spdlog::warn("{}: cannot connect to the database ({}); retrying with backoff",
                         options_.application_name, last_error_);
        }
        reported_down_ = true;
        return false;
    }
}

store::AssignmentStore* StoreHandle::get() {
    if (store_) return store_.get();
    if (clock_.monotonic_now() < next_attempt_) return nullptr;
    return try_connect() ? store_.get() : nullptr;
}

store::AssignmentStore* StoreHandle::get_within(std::chrono::milliseconds budget) {
    if (store_) return store_.get();
    // Its own schedule, starting at once: the handle's backoff may have grown to seconds while
    // the database was down, and the answer to a worker is waiting on this.
    // The time slept counts against the budget too, so that the wait stays bounded under a
    // clock that tests move by hand.
    const auto deadline = clock_.monotonic_now() + budget;
    base::MonotonicTime::duration slept{0};
    base::Backoff backoff;
    while (!try_connect()) {
        const auto now = clock_.monotonic_now();
        if (now >= deadline || slept >= budget) return nullptr;
        const auto pause = std::min<base::MonotonicTime::duration>(
            {deadline - now, budget - slept, backoff.next()});
        std::this_thread::sleep_for(pause);
        slept += pause;
    }
    return store_.get();
}

void StoreHandle::drop(const std::string& why) {
    store_.reset();
    last_error_ = why;
    next_attempt_ = clock_.monotonic_now() + backoff_.next();
    if (!reported_down_) {
        spdlog::warn("{}: database connection lost ({}); reconnecting with backoff",
                     options_.application_name, why);
    }
    reported_down_ = true;
}

bool connection_lost(const std::exception& e, const store::AssignmentStore* store) {
    if (dynamic_cast<const pqxx::broken_connection*>(&e)) return true;
    if (dynamic_cast<const pqxx::in_doubt_error*>(&e)) return true;
    if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
        // Class 08 is a connection exception; 57P01..57P03 mean the server is shutting down or
        // not accepting sessions, so this connection is done for either way.
        const std::string& state = sql->sqlstate();
        if (state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0) return true;
        // 25006 (read_only_sql_transaction): the server became a standby or was fenced read-only
        // by an HA manager without ending its sessions. Nothing was written; a new connection
        // finds whichever host is writable now.
        if (state == "25006") return true;
    }
    return store == nullptr || !store->is_open();
}

}  // namespace aclaim::coordinator
