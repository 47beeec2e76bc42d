#include "coordinator/db/presence.hpp"

#include <spdlog/spdlog.h>

#include <memory>
#include <pqxx/pqxx>
#include <vector>

#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "coordinator/db/presence_sql.hpp"

namespace aclaim::coordinator {

namespace {

/// Rows of a coordinator not seen for this long are removed by whichever publisher runs next.
constexpr common::Duration kForgetAfter = std::chrono::hours(1);

}  // namespace

void PresenceBoard::set(std::map<common::OrgId, int> workers) {
    std::lock_guard lock(mutex_);
    workers_ = std::move(workers);
}

std::map<common::OrgId, int> PresenceBoard::get() const {
    std::lock_guard lock(mutex_);
    return workers_;
}

PresencePublisher::PresencePublisher(PresenceOptions options, std::string name,
                                     std::string endpoint, const common::Clock& clock,
                                     PresenceBoard& board, StatementWatchdog& watchdog)
    : options_(std::move(options)),
      name_(std::move(name)),
      endpoint_(std::move(endpoint)),
      clock_(clock),
      board_(board),
      watchdog_(watchdog) {}

PresencePublisher::~PresencePublisher() {
    stop();
}

void PresencePublisher::start() {
    if (options_.interval_ms <= 0 || thread_.joinable()) return;
    thread_ = std::thread([this] { run(); });
}

void PresencePublisher::stop() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void PresencePublisher::run() {
    const auto watch = watchdog_.watch("aclaim-coordinator-presence");
    const auto deadline = std::chrono::milliseconds(options_.db_deadline_ms);
    const auto started = clock_.now();
    std::unique_ptr<pqxx::connection> conn;
    bool failing = false;
    // Each pass: one transaction under the watchdog; a broken or cut connection is replaced at
    // the next pass rather than retried in a loop, since nothing waits for these rows.
    auto pass = [&](bool withdraw) {
        try {
            if (!conn) {
                conn = std::make_unique<pqxx::connection>(options_.dsn);
                pqxx::nontransaction session(*conn);
                session.exec("SET application_name = 'aclaim-coordinator-presence'");
                if (options_.row_security) {
                    session.exec(std::string("SET ROLE ") + common::sql::kRowSecurityRole);
                    session.exec_params("SELECT set_config('aclaim.org_id', $1, false)",
                                        common::sql::kAllOrganizations);
                }
            }
            watch->arm(conn->sock(), clock_.monotonic_now() + deadline);
            pqxx::work txn(*conn, "presence");
            const auto now = clock_.now();
            if (withdraw) {
                txn.exec_params(sql::kWithdrawPresence.text, name_);
            } else {
                std::vector<common::OrgId> orgs;
                std::vector<int> workers;
                for (const auto& [org, n] : board_.get()) {
                    orgs.push_back(org);
                    workers.push_back(n);
                }
                txn.exec_params(sql::kPublishPresence.text, name_, endpoint_, started, now,
                                common::pg_array(orgs), common::pg_array(workers),
                                options_.interval_ms);
                txn.exec_params(sql::kForgetGonePresence.text, now, kForgetAfter);
            }
            txn.commit();
            watch->disarm();
            if (failing) spdlog::info("presence: published again");
            failing = false;
        } catch (const std::exception& e) {
            const bool cut = watch->disarm();
            if (!failing) {
                spdlog::warn("presence: could not publish{}: {}",
                             cut ? " (cut at its deadline)" : "", e.what());
            }
            failing = true;
            conn.reset();
        }
    };
    const auto interval = std::chrono::milliseconds(options_.interval_ms);
    while (true) {
        pass(false);
        std::unique_lock lock(mutex_);
        // The pace is real time, as the reaper's: a simulated clock never stops the thread.
        if (wake_.wait_for(lock, interval, [this] { return stop_; })) break;
    }
    pass(true);
}

}  // namespace aclaim::coordinator
