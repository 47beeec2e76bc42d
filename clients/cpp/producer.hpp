#pragma once

// The producer side of the client library: enqueue, cancel and read status inside the service's
// own transaction, over the SQL API (schema/definitions/functions/). A job enqueued in a
// transaction that rolls back never existed, and the coordinators are woken when it commits.

#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/base/clock.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::clients {

struct ProducerOptions {
    /// The organization to act in, for a trusted login (the schema's owner). Leave it unset for a
    /// producer login: the database takes the organization from the login and refuses any other.
    std::optional<store::OrgId> org;
    /// How long a finished job still holds its dedupe key (default: not at all).
    base::Duration dedupe_window{0};
};

/// One job cancelled by Producer::cancel and the state it was in.
struct CancelledJob {
    store::JobId id = 0;
    store::JobState was = store::JobState::Pending;
};

/// A job's status as its producer sees it.
struct JobStatus {
    store::JobId id = 0;
    std::string queue;
    store::JobState state = store::JobState::Pending;
    int priority = 0;
    int attempts = 0;
    int max_attempts = 0;
    std::optional<std::string> dedupe_key;
    base::Instant enqueued_at{};
    base::Instant run_at{};
    std::optional<base::Instant> finished_at;
    std::optional<std::string> result_ref;  ///< completed jobs
    std::optional<std::string> last_error;  ///< failed, discarded and cancelled jobs, or a retry's
};

/// Enqueues, cancels and reads jobs in a transaction the caller owns; it never commits or rolls
/// back. Cheap to copy; holds no connection. Errors from the database (a payload over the limit,
/// another organization, bad arguments) arrive as pqxx::sql_error with the server's message, and
/// leave the caller's transaction aborted, as any failed statement does.
class Producer {
  public:
    explicit Producer(const base::Clock& clock, ProducerOptions options = {})
        : clock_(&clock), options_(options) {}

    /// One job. For a dedupe key still held, the holder's id with created = false.
    store::Enqueued enqueue(pqxx::transaction_base& txn, const store::NewJob& job) const;
    /// Many jobs in one statement, results in the same order.
    std::vector<store::Enqueued> enqueue_many(pqxx::transaction_base& txn,
                                              const std::vector<store::NewJob>& jobs) const;
    /// Cancels the listed jobs that are pending, scheduled or assigned; a holder is told at once.
    /// Jobs already finished, unknown or of another organization are not returned.
    std::vector<CancelledJob> cancel(pqxx::transaction_base& txn,
                                     const std::vector<store::JobId>& ids,
                                     const std::string& reason) const;
    /// The jobs named by id or by dedupe key, of the producer's organization only, in id order.
    std::vector<JobStatus> status(pqxx::transaction_base& txn, const std::vector<store::JobId>& ids,
                                  const std::vector<std::string>& dedupe_keys = {}) const;

  private:
    const base::Clock* clock_;
    ProducerOptions options_;
};

}  // namespace aclaim::clients
