#pragma once

// What each page of the console shows, as JSON, read under row-level security: the data
// connection runs as the aclaim_coordinator role with aclaim.org_id set to the organization being
// read ('system' only for an operator scoped to every organization), so an operator scoped to
// some organizations cannot see or touch another's rows even through a forgotten filter. A second
// connection, as the login role, reads the operator accounts, the planner's estimates, and the
// overview's aggregates for an operator of every organization (whom the policy would not filter).
//
// One mutex serialises both connections: the console serves a few operators, not the workers. A
// request waits for its turn at most the statement timeout (console/turn.hpp).

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <semaphore>
#include <string>
#include <vector>

#include "common/base/clock.hpp"
#include "common/ops/operator_store.hpp"
#include "console/operators.hpp"
#include "console/turn.hpp"

namespace aclaim::console {

/// What an action did: done, refused with a reason, or not found (or not visible).
struct ActionResult {
    enum class Kind { Done, Refused, NotFound };
    Kind kind = Kind::NotFound;
    nlohmann::json body;
};

class Views {
  public:
    static constexpr std::ptrdiff_t kHashSlots = 2;

    /// `clock` (which must outlive the views) is the program's: actions that need a clock rather
    /// than an instant (pause) read it. `turn_wait`: how long a request waits for its turn on the
    /// connections (console/turn.hpp); none: as long as it takes.
    Views(std::string dsn, std::filesystem::path reports_dir, const base::Clock& clock,
          std::optional<base::Duration> turn_wait = std::nullopt);
    /// On the system clock.
    Views(std::string dsn, std::filesystem::path reports_dir);

    const base::Clock& clock() const { return clock_; }

    /// The database the views read, with the deadlines it was given.
    const std::string& dsn() const { return dsn_; }
    std::optional<base::Duration> turn_wait() const { return turn_wait_; }

    /// Reads the account under the connections' lock; checks the password (the slow part, tens
    /// of milliseconds of memory-hard hashing) outside it, so that sign-ins, right or wrong,
    /// never hold up another operator's page.
    std::optional<Operator> authenticate(const Credentials& who);
    /// How passwords are checked (libsodium's crypto_pwhash_str_verify); tests substitute one.
    void set_password_check(PasswordCheck check) { password_check_ = std::move(check); }

    nlohmann::json overview(const Operator& op, base::Instant now);
    nlohmann::json leases(const Operator& op, base::Instant now);
    nlohmann::json jobs(const Operator& op, const ops::JobFilter& q);
    std::optional<nlohmann::json> job(const Operator& op, store::JobId id, base::Instant now);
    nlohmann::json quarantine(const Operator& op);
    /// The workflow of a job the operator may see (ops::read_workflow,
    /// console/workflow_view.cpp): read in the job's organization's scope, so it never shows
    /// another organization's job.
    std::optional<nlohmann::json> workflow(const Operator& op, store::JobId id);
    /// Releases or fails a quarantined job through the recovery store, as aclaimctl quarantine
    /// does; the event's worker is "console:<operator>".
    ActionResult resolve_quarantined(const Operator& op, store::JobId id, bool release,
                                     const std::string& reason, base::Instant now);

    /// Takes a stuck assignment back (release: pending again, the attempt given back) or fails it
    /// for good, through the operator store as aclaimctl release/fail do, fenced on the
    /// generation the operator saw: a job claimed again since is refused, not touched.
    ActionResult resolve_lease(const Operator& op, store::JobId id, store::Generation seen,
                               bool release, const std::string& reason, base::Instant now);

    /// Cancels a pending, scheduled or assigned job as aclaimctl cancel does (its holder is told
    /// at once); refused for a job in any other state.
    ActionResult cancel(const Operator& op, store::JobId id, const std::string& reason,
                        base::Instant now);
    /// Gives a failed, discarded or cancelled job a fresh attempt budget, as aclaimctl retry
    /// does; refused for a job in any other state.
    ActionResult retry(const Operator& op, store::JobId id, const std::string& reason,
                       base::Instant now);
    /// Pauses or resumes one queue of an organization the operator may act in, audited in
    /// queue_events; leases already out continue.
    ActionResult pause(const Operator& op, store::OrgId org, const std::string& queue, bool paused,
                       const std::string& reason);

    /// The report files (JSON and SVG) under the reports directory, newest first, and the last
    /// check, as far as the operator may see them: the check and the drills' reports cover every
    /// organization, so an operator scoped to some sees no report, and of the check only when it
    /// ran and the violations on jobs of its organizations, no totals.
    nlohmann::json drills(const Operator& op);
    /// The file's bytes when `relative` names one of the listed reports and the operator may see
    /// reports (one of every organization).
    std::optional<std::string> report(const Operator& op, const std::string& relative);
    /// Runs the invariant checker over the whole history; only for an operator of every
    /// organization (the checker proves properties across organizations).
    std::optional<nlohmann::json> run_check(const Operator& op, base::Instant now);

  private:
    /// The per-queue rows of the overview for `orgs`, read on `txn`, with each organization's
    /// oldest claimable job (the oldest over its queues) folded into `by_org`.
    static void queue_overview(pqxx::transaction_base& txn, const std::vector<store::OrgId>& orgs,
                               base::Instant now, std::map<store::OrgId, nlohmann::json>& by_org);
    /// The job's organization when the operator may see it, trying each scope in turn; leaves
    /// the data connection scoped to it.
    std::optional<store::OrgId> find_job(const Operator& op, store::JobId id);
    /// `act()` with the data connection scoped to job `id`'s organization; NotFound when the
    /// operator may not see the job (console/actions.cpp).
    template <typename Act>
    ActionResult on_job(const Operator& op, store::JobId id, Act&& act);
    /// A job's exclusions (schema/baseline/tables.sql) for its page, or null when it has none: the
    /// reviewers and jobs it names, the reviewers of its queue connected now and which it excludes,
    /// and, for a pending job that every connected reviewer of its queue is excluded from, that
    /// this is why it waits.
    nlohmann::json exclusions_of(store::JobId id, const std::string& queue, bool pending,
                                 base::Instant now);
    pqxx::connection& data();
    pqxx::connection& meta();
    void scope(const std::string& org_or_system);
    /// One scope per organization the operator may see, or "system" for all of them.
    static std::vector<std::string> scopes_of(const Operator& op);
    std::vector<std::filesystem::path> report_files() const;
    /// The last check as an operator scoped to some organizations may see it.
    nlohmann::json scoped_check(const Operator& op);
    template <typename F>
    auto with_connections(F&& f) -> decltype(f());

    std::string dsn_;
    std::filesystem::path reports_dir_;
    const base::Clock& clock_;
    std::optional<base::Duration> turn_wait_;
    Turn turn_;
    std::unique_ptr<pqxx::connection> data_;
    std::unique_ptr<pqxx::connection> meta_;
    nlohmann::json last_check_;
    PasswordCheck password_check_ = verify_password;
    /// Password checks under way at once: each takes 64 MiB and a core for tens of milliseconds,
    /// and sign-ins come from anyone who reaches the port; pages never wait on these.
    std::counting_semaphore<> hash_slots_{kHashSlots};
};

/// The name every console action is recorded under in the audit log.
inline std::string actor_of(const Operator& op) {
    return "console:" + op.name;
}

template <typename F>
auto Views::with_connections(F&& f) -> decltype(f()) {
    return turn_.run(turn_wait_, [&]() -> decltype(f()) {
        try {
            return f();
        } catch (const pqxx::broken_connection&) {
            // Reconnect on the next request rather than serve from a dead connection forever.
            data_.reset();
            meta_.reset();
            throw;
        }
    });
}

}  // namespace aclaim::console
