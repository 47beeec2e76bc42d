#pragma once

// The consumer side of the client library: the verdicts of one consumer group, at least once until
// acknowledged and never again after, over the SQL API (schema/definitions/functions/). Waiting is
// driven by LISTEN/NOTIFY on aclaim_outcomes; every wait has a deadline.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/clock.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::clients {

/// A job's terminal outcome.
enum class Outcome { Completed, Failed, Discarded, Cancelled };

std::string_view to_string(Outcome o);
std::optional<Outcome> parse_outcome(std::string_view s);

/// One terminal outcome of a job, as a consumer group receives it.
struct Verdict {
    /// Position in the organization's delivery order: dense, increasing, what ack() takes.
    std::int64_t seq = 0;
    store::JobId job_id = 0;
    Outcome outcome = Outcome::Completed;
    std::string queue;
    store::Generation generation = 0;
    int attempts = 0;
    std::optional<std::string> result_ref;  ///< completed
    std::optional<std::string> error;       ///< failed, discarded, cancelled: why
    std::optional<std::string> dedupe_key;  ///< the key it was enqueued with, to find the order
    base::Instant at{};                     ///< when the job ended
};

/// Where a group this consumer creates begins.
enum class GroupStart {
    Latest,    ///< outcomes committed from its creation on
    Earliest,  ///< every outcome still kept
};

struct ConsumerOptions {
    /// The organization, for a trusted login; unset for a producer login (bound to one).
    std::optional<store::OrgId> org;
    /// Create the group when it does not exist (otherwise the constructor throws).
    bool create_group = true;
    GroupStart start = GroupStart::Latest;
    /// Outcomes per fetch, 1..10000.
    int batch = 100;
    /// Bound on every statement and on connecting.
    std::chrono::milliseconds statement_timeout{5000};
    std::string application_name = "aclaim-consumer";
};

/// A consumer group's progress.
struct GroupStatus {
    store::OrgId org_id = 0;
    std::string name;
    std::int64_t acked = 0;  ///< every position up to this one is acknowledged
    std::int64_t head = 0;   ///< the last position given in the organization
    std::int64_t lag = 0;    ///< outcomes not acknowledged yet, those without a position included
};

/// One consumer of a group, on a connection of its own (a LISTEN needs one). A group may have
/// several consumers at once; each sees every unacknowledged outcome, so a group's consumers
/// should split the work between them by other means or run one at a time. Not thread-safe.
class ResultConsumer {
  public:
    /// Connects, LISTENs on aclaim_outcomes and creates the group if asked to.
    ResultConsumer(const std::string& dsn, const base::Clock& clock, std::string group,
                   ConsumerOptions options = {});
    ~ResultConsumer();
    ResultConsumer(const ResultConsumer&) = delete;
    ResultConsumer& operator=(const ResultConsumer&) = delete;

    const std::string& group() const { return group_; }
    store::OrgId org() const { return org_; }

    /// The oldest outcomes the group has not acknowledged (up to options.batch), in position
    /// order. The same ones again on the next call until they are acknowledged.
    std::vector<Verdict> fetch();
    /// As fetch(), but when there is nothing yet, waits until an outcome of the organization is
    /// committed or `wait` has passed (then returns what a last fetch finds, maybe nothing).
    std::vector<Verdict> next(base::Duration wait);
    /// Acknowledges every outcome up to and including position `seq`: none of them is returned
    /// again, to any consumer of the group. Returns the group's cursor.
    std::int64_t ack(std::int64_t seq);
    std::int64_t ack(const Verdict& v) { return ack(v.seq); }
    GroupStatus status();
    /// How many fetch queries this consumer has run. Tells a wait woken by a notification from
    /// one that polls (the tests read it from another thread, hence atomic).
    std::int64_t fetches() const { return fetches_.load(); }

    /// Removes a group of the organization (nullopt: the login's); true when it existed.
    static bool drop_group(pqxx::transaction_base& txn, const std::string& group,
                           std::optional<store::OrgId> org = std::nullopt);

  private:
    class Receiver;

    std::string group_;
    const base::Clock& clock_;
    ConsumerOptions options_;
    store::OrgId org_ = 0;
    std::unique_ptr<pqxx::connection> conn_;
    std::unique_ptr<Receiver> receiver_;
    std::atomic<std::int64_t> fetches_{0};
};

}  // namespace aclaim::clients
