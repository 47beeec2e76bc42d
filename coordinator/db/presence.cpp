#include "coordinator/db/presence.hpp"

#include <spdlog/spdlog.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <vector>

#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "coordinator/db/db_sql.hpp"

namespace aclaim::coordinator {

namespace {

/// Rows of a coordinator not seen for this long are removed by whichever publisher runs next.
constexpr base::Duration kForgetAfter = std::chrono::hours(1);

/// An organization's connected reviewers are published by name (coordinator_presence.reviewers)
/// with the queues each serves (coordinator_presence.serving), which the console reads to say
/// why a job with exclusions waits, up to this many; above, only their number, and the console
/// says it cannot tell.
constexpr std::size_t kReviewersPublished = 1000;

}  // namespace

void PresenceBoard::set(Workers workers) {
    std::shared_ptr<const Workers> next = std::make_shared<const Workers>(std::move(workers));
    {
        std::lock_guard lock(mutex_);
        workers_.swap(next);
    }
    // `next` now holds the previous list, freed here, outside the lock.
}

std::shared_ptr<const PresenceBoard::Workers> PresenceBoard::get() const {
    std::lock_guard lock(mutex_);
    return workers_;
}

struct PresencePublisher::Session {
    std::shared_ptr<StatementWatchdog::Watch> watch;
    base::Instant started;
    std::unique_ptr<pqxx::connection> conn;
    bool failing = false;
};

PresencePublisher::PresencePublisher(PresenceOptions options, const Connections& connections,
                                     std::string name, std::string endpoint,
                                     const base::Clock& clock, PresenceBoard& board)
    : options_(options),
      name_(std::move(name)),
      endpoint_(std::move(endpoint)),
      clock_(clock),
      board_(board),
      connections_(connections) {}

PresencePublisher::~PresencePublisher() = default;

void PresencePublisher::start() {
    if (options_.interval_ms <= 0 || task_.running()) return;
    session_ = std::make_unique<Session>();
    session_->watch = connections_.watch("aclaim-coordinator-presence");
    session_->started = clock_.now();
    // Publishes at once, then every interval; once stopped, withdraws this coordinator's rows.
    task_.start(
        base::PeriodicTask::Wait{0},
        [this] {
            pass(false);
            return std::chrono::milliseconds(options_.interval_ms);
        },
        [this] { pass(true); });
}

void PresencePublisher::pass(bool withdraw) {
    const auto deadline = connections_.deadline();
    auto& [watch, started, conn, failing] = *session_;
    // One transaction under the watchdog; a broken or cut connection is replaced at the next
    // pass rather than retried in a loop, since nothing waits for these rows.
    try {
        if (!conn) {
            conn = connections_.open("aclaim-coordinator-presence", Connections::Role::RowSecurity);
        }
        watch->arm(conn->sock(), clock_.monotonic_now() + deadline);
        pqxx::work txn(*conn, "presence");
        const auto now = clock_.now();
        if (withdraw) {
            txn.exec_params(sql::kWithdrawPresence.text, name_);
        } else {
            std::vector<store::OrgId> orgs;
            std::vector<int> workers;
            std::vector<std::optional<std::string>> reviewers;
            std::vector<std::optional<std::string>> serving;
            // Held for the loop: the router thread may set a new list meanwhile.
            const auto board = board_.get();
            for (const auto& [org, connected] : *board) {
                orgs.push_back(org);
                workers.push_back(static_cast<int>(connected.size()));
                if (connected.size() > kReviewersPublished) {
                    reviewers.emplace_back();
                    serving.emplace_back();
                    continue;
                }
                std::vector<std::string> names;
                auto queues = nlohmann::json::object();
                for (const auto& w : connected) {
                    names.push_back(w.name);
                    queues[w.name] = w.queues;
                }
                reviewers.emplace_back(store::pg_array(names));
                serving.emplace_back(queues.dump());
            }
            txn.exec_params(sql::kPublishPresence.text, name_, endpoint_, started, now,
                            store::pg_array(orgs), store::pg_array(workers), options_.interval_ms,
                            store::pg_array(reviewers), store::pg_array(serving));
            txn.exec_params(sql::kForgetGonePresence.text, now, kForgetAfter);
        }
        txn.commit();
        watch->disarm();
        if (failing) spdlog::info("presence: published again");
        failing = false;
    } catch (const std::exception& e) {
        const bool cut = watch->disarm();
        if (!failing) {
            spdlog::warn("presence: could not publish{}: {}", cut ? " (cut at its deadline)" : "",
                         e.what());
        }
        failing = true;
        conn.reset();
    }
}

}  // namespace aclaim::coordinator
