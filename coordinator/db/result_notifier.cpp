#include "coordinator/db/result_notifier.hpp"

#include <spdlog/spdlog.h>

#include <memory>
#include <pqxx/pqxx>
#include <vector>

#include "common/base/backoff.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/session_sql.hpp"
#include "common/store/store_sql.hpp"

namespace aclaim::coordinator {

namespace {

std::unique_ptr<pqxx::connection> connect(const Connections& connections) {
    auto conn = connections.open("aclaim-coordinator-notifier", Connections::Role::Login);
    pqxx::nontransaction session(*conn);
    // The notification's own commit need not reach the disk before it is delivered: it announces
    // commits that already did, and a crash of the server ends every listener's session anyway.
    // Without waiting for its flush, the cluster-wide notify lock is held for microseconds.
    session.exec(store::sql::kAsyncCommit.text);
    conn->prepare(store::sql::kNotifyResults.name, store::sql::kNotifyResults.text);
    return conn;
}

}  // namespace

struct ResultNotifier::Session {
    std::shared_ptr<StatementWatchdog::Watch> watch;
    std::unique_ptr<pqxx::connection> conn;
    base::Backoff backoff;
    bool down_reported = false;
};

ResultNotifier::ResultNotifier(const Connections& connections,
                               metrics::ResultNotifierCounters& counters, const base::Clock& clock)
    : connections_(connections),
      counters_(counters),
      session_(std::make_unique<Session>()),
      task_(clock) {}

ResultNotifier::~ResultNotifier() = default;

void ResultNotifier::start() {
    session_->watch = connections_.watch("aclaim-coordinator-notifier");
    // Each round waits for committed(), and for kPace after the round before it (a committed()
    // meanwhile is kept and ends the wait that follows at once); a failed one retries after its
    // backoff, with whatever came meanwhile. Once stopped, what is pending is sent once more
    // unless the database was already failing: stopping does not wait for one that is down.
    task_.start(
        base::PeriodicTask::kUntilWoken,
        [this]() -> base::PeriodicTask::Wait {
            if (!round()) return session_->backoff.next();
            task_.pause(kPace);
            return base::PeriodicTask::kUntilWoken;
        },
        [this] {
            if (!session_->down_reported) round();
        });
}

void ResultNotifier::committed(store::OrgId org) {
    {
        std::lock_guard lock(mutex_);
        if (!pending_.insert(org).second) return;
    }
    task_.wake();
}

bool ResultNotifier::round() {
    std::vector<std::int64_t> orgs;
    {
        std::lock_guard lock(mutex_);
        if (pending_.empty()) return true;
        orgs.assign(pending_.begin(), pending_.end());
        pending_.clear();
    }
    Session& s = *session_;
    try {
        if (!s.conn) s.conn = connect(connections_);
        ArmedWatch armed(*s.watch, s.conn->sock(), connections_.deadline_from_now());
        pqxx::nontransaction txn(*s.conn);
        txn.exec_prepared(store::sql::kNotifyResults.name, kChannel, store::pg_array(orgs));
        // Sent just as the deadline cut the connection: the notifications stand.
        if (armed.release()) s.conn.reset();
        s.backoff.reset();
        s.down_reported = false;
        counters_.sent.fetch_add(orgs.size(), std::memory_order_relaxed);
        return true;
    } catch (const std::exception& e) {
        s.conn.reset();
        if (!s.down_reported) {
            spdlog::warn("result notifier: cannot notify {} ({}); retrying with backoff", kChannel,
                         e.what());
        }
        s.down_reported = true;
        counters_.failed_rounds.fetch_add(1, std::memory_order_relaxed);
        std::lock_guard lock(mutex_);
        // Nothing is lost: the organizations wait for the next round, with any that came since.
        pending_.insert(orgs.begin(), orgs.end());
        return false;
    }
}

}  // namespace aclaim::coordinator
