#include "coordinator/db/result_notifier.hpp"

#include <spdlog/spdlog.h>

#include <memory>
#include <pqxx/pqxx>
#include <vector>

#include "common/base/backoff.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/store_sql.hpp"

namespace aclaim::coordinator {

namespace {

std::unique_ptr<pqxx::connection> connect(const std::string& dsn) {
    auto conn = std::make_unique<pqxx::connection>(dsn);
    pqxx::nontransaction session(*conn);
    session.exec("SET application_name = 'aclaim-coordinator-notifier'");
    // The notification's own commit need not reach the disk before it is delivered: it announces
    // commits that already did, and a crash of the server ends every listener's session anyway.
    // Without waiting for its flush, the cluster-wide notify lock is held for microseconds.
    session.exec("SET synchronous_commit = off");
    conn->prepare(common::sql::kNotifyResults.name, common::sql::kNotifyResults.text);
    return conn;
}

}  // namespace

ResultNotifier::ResultNotifier(std::string dsn, StatementWatchdog& watchdog,
                               std::chrono::milliseconds deadline,
                               metrics::ResultNotifierCounters& counters)
    : dsn_(std::move(dsn)), watchdog_(watchdog), deadline_(deadline), counters_(counters) {}

ResultNotifier::~ResultNotifier() {
    stop();
}

void ResultNotifier::start() {
    thread_ = std::thread([this] { run(); });
}

void ResultNotifier::stop() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void ResultNotifier::committed(common::OrgId org) {
    {
        std::lock_guard lock(mutex_);
        if (!pending_.insert(org).second) return;
    }
    wake_.notify_one();
}

void ResultNotifier::run() {
    const auto watch = watchdog_.watch("aclaim-coordinator-notifier");
    const common::Clock& clock = watchdog_.clock();
    common::Backoff backoff;
    std::unique_ptr<pqxx::connection> conn;
    bool down_reported = false;
    while (true) {
        std::vector<std::int64_t> orgs;
        bool stopping = false;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return stop_ || !pending_.empty(); });
            if (pending_.empty()) return;
            orgs.assign(pending_.begin(), pending_.end());
            pending_.clear();
            stopping = stop_;
        }
        try {
            if (!conn) conn = connect(dsn_);
            ArmedWatch armed(*watch, conn->sock(), clock.monotonic_now() + deadline_);
            pqxx::nontransaction txn(*conn);
            txn.exec_prepared(common::sql::kNotifyResults.name, kChannel, common::pg_array(orgs));
            // Sent just as the deadline cut the connection: the notifications stand.
            if (armed.release()) conn.reset();
            backoff.reset();
            down_reported = false;
            counters_.sent.fetch_add(orgs.size(), std::memory_order_relaxed);
        } catch (const std::exception& e) {
            conn.reset();
            if (!down_reported) {
                spdlog::warn("result notifier: cannot notify {} ({}); retrying with backoff",
                             kChannel, e.what());
            }
            down_reported = true;
            std::unique_lock lock(mutex_);
            counters_.failed_rounds.fetch_add(1, std::memory_order_relaxed);
            if (stopping) return;
            // Nothing is lost: the organizations wait for the next round, with any that came since.
            pending_.insert(orgs.begin(), orgs.end());
            wake_.wait_for(lock, backoff.next(), [this] { return stop_; });
            if (stop_) return;
        }
    }
}

}  // namespace aclaim::coordinator
