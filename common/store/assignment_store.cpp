#include "common/store/assignment_store.hpp"

#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/store/new_job_arrays.hpp"
#include "common/store/park_sql.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/session_sql.hpp"
#include "common/store/store_internal.hpp"
#include "common/store/store_sql.hpp"

// The store's connection, enqueue, and the work across organizations: the sweeps (reclaim,
// park expiry, promotion) and retention. The claim is in claim_store.cpp, the fenced transitions
// in fenced_transitions.cpp.

namespace aclaim::store {

namespace detail {

JobState state_of(const pqxx::field& f) {
    auto s = parse_job_state(f.as<std::string>());
    if (!s) throw std::runtime_error("unexpected job state '" + f.as<std::string>() + "'");
    return *s;
}

void Scope::all() {
    set(sql::kAllOrganizations);
}

void Scope::set(const std::string& value) {
    if (!enabled_ || value == current_) return;
    txn_.exec_prepared(sql::kScope.name, value);
    current_ = value;
}

}  // namespace detail

using detail::Scope;

void act_as_row_security_role(pqxx::connection& conn) {
    try {
        pqxx::nontransaction session(conn);
        session.exec(sql::kActAsRowSecurityRole.text);
    } catch (const pqxx::broken_connection&) {
        throw;
    } catch (const pqxx::sql_error& e) {
        throw std::runtime_error(std::string("row security is on but this login cannot act as ") +
                                 sql::kRowSecurityRole +
                                 " (migrate the schema, GRANT the role to the login, or pass "
                                 "--row-security off): " +
                                 e.what());
    }
}

AssignmentStore::AssignmentStore(const std::string& dsn, StoreOptions options)
    : options_(std::move(options)), conn_(std::make_unique<pqxx::connection>(dsn)) {
    {
        pqxx::nontransaction session(*conn_);
        session.exec_params(sql::kSetApplicationName.text, options_.application_name);
        // Every statement here runs in milliseconds; a JIT compile costs tens of them. A claim
        // batch forced past jit_above_cost took 50-72 ms against 5-7 ms without (drills/bench
        // found no statement past it, the highest plan cost 52k of 100k, but a large batch on a
        // large table under a generic plan can get there, and would pay it every execution).
        session.exec(sql::kJitOff.text);
    }
    if (options_.row_security) act_as_row_security_role(*conn_);
    for (const auto* list : {&sql::kStatements, &sql::kParkStatements}) {
        for (const sql::Statement* statement : *list) {
            conn_->prepare(statement->name, statement->text);
        }
    }
}

AssignmentStore::~AssignmentStore() = default;

void AssignmentStore::plan_for(std::size_t jobs) {
    const bool generic = jobs < options_.generic_plans_below;
    if (generic == generic_plans_) return;
    pqxx::nontransaction session(*conn_);
    session.exec(generic ? sql::kGenericPlans.text : sql::kPlannerChoosesPlans.text);
    generic_plans_ = generic;
}

bool AssignmentStore::is_open() const {
    return conn_ && conn_->is_open();
}

pqxx::connection& AssignmentStore::connection() {
    return *conn_;
}

void AssignmentStore::commit(pqxx::work& txn) {
    static const base::SystemClock system_clock;
    const base::Clock& clock = options_.clock != nullptr ? *options_.clock : system_clock;
    const auto began = clock.monotonic_now();
    txn.commit();
    last_commit_ = clock.monotonic_now() - began;
}

std::vector<JobId> AssignmentStore::enqueue(OrgId org, const std::vector<NewJob>& jobs,
                                            base::Instant now) {
    std::vector<JobId> ids;
    ids.reserve(jobs.size());
    for (const auto& e : enqueue_each(org, jobs, now)) ids.push_back(e.id);
    return ids;
}

std::vector<Enqueued> AssignmentStore::enqueue_each(OrgId org, const std::vector<NewJob>& jobs,
                                                    base::Instant now,
                                                    base::Duration dedupe_window) {
    const NewJobArrays a = new_job_arrays(jobs);
    pqxx::work txn(*conn_, "enqueue");
    Scope(txn, options_.row_security).to(org);
    // Only a call with exclusions runs the statement that adds them (schema/baseline/tables.sql).
    const pqxx::result r =
        a.exclude_n
            ? txn.exec_prepared(sql::kEnqueueExcluding.name, org, now, a.queues, a.payloads,
                                a.priorities, a.run_at_us, a.max_attempts, a.backoff_base_us,
                                a.backoff_cap_us, a.run_timeout_us, a.dedupe_keys, dedupe_window,
                                a.depends_n, a.depends_on, a.on_failure, a.exclude_n,
                                a.exclude_keys, a.exclude_jobs)
            : txn.exec_prepared(sql::kEnqueue.name, org, now, a.queues, a.payloads, a.priorities,
                                a.run_at_us, a.max_attempts, a.backoff_base_us, a.backoff_cap_us,
                                a.run_timeout_us, a.dedupe_keys, dedupe_window, a.depends_n,
                                a.depends_on, a.on_failure);
    txn.commit();
    std::vector<Enqueued> out;
    out.reserve(r.size());
    for (const auto& row : r) {
        out.push_back(
            {row["id"].as<JobId>(), row["created"].as<bool>(), detail::state_of(row["state"])});
    }
    return out;
}

std::vector<Reclaimed> AssignmentStore::reclaim_expired(base::Instant now, int limit) {
    return reclaim_with(sql::kReclaim, "reclaim", now, limit);
}

std::vector<Reclaimed> AssignmentStore::expire_parks(base::Instant now, int limit) {
    return reclaim_with(sql::kExpireParks, "expire_parks", now, limit);
}

std::vector<Reclaimed> AssignmentStore::reclaim_with(const sql::Statement& statement,
                                                     const char* name, base::Instant now,
                                                     int limit) {
    pqxx::work txn(*conn_, name);
    Scope(txn, options_.row_security).all();
    const pqxx::result r = txn.exec_prepared(statement.name, now, limit);
    txn.commit();
    std::vector<Reclaimed> out;
    out.reserve(r.size());
    for (const auto& row : r) {
        Reclaimed rc;
        rc.job_id = row["id"].as<JobId>();
        rc.org_id = row["org_id"].as<OrgId>();
        rc.generation = row["generation"].as<Generation>();
        rc.assignee = row["assignee"].is_null() ? "" : row["assignee"].as<std::string>();
        rc.queue = row["queue"].as<std::string>();
        rc.state = detail::state_of(row["state"]);
        out.push_back(std::move(rc));
    }
    return out;
}

int AssignmentStore::promote_due(base::Instant now, int limit) {
    pqxx::work txn(*conn_, "promote_due");
    Scope(txn, options_.row_security).all();
    const pqxx::row r = txn.exec_prepared1(sql::kPromoteDue.name, now, limit);
    txn.commit();
    return r["promoted"].as<int>();
}

std::optional<base::Instant> AssignmentStore::next_due() {
    pqxx::work txn(*conn_, "next_due");
    Scope(txn, options_.row_security).all();
    const pqxx::row r = txn.exec_prepared1(sql::kNextDue.name);
    txn.commit();
    if (r["run_at_us"].is_null()) return std::nullopt;
    return r["run_at_us"].as<base::Instant>();
}

bool AssignmentStore::try_retention_lock() {
    pqxx::nontransaction session(*conn_);
    return session.exec_prepared1(sql::kRetentionTryLock.name)["held"].as<bool>();
}

Pruned pruned_of(const pqxx::row& r) {
    Pruned p;
    p.org_id = r["org_id"].as<OrgId>();
    p.completed = r["completed"].as<std::int64_t>();
    p.failed = r["failed"].as<std::int64_t>();
    p.discarded = r["discarded"].as<std::int64_t>();
    p.cancelled = r["cancelled"].as<std::int64_t>();
    p.results = r["results"].as<std::int64_t>();
    return p;
}

void AssignmentStore::release_retention_lock() {
    pqxx::nontransaction session(*conn_);
    session.exec_prepared(sql::kRetentionUnlock.name);
}

std::vector<Pruned> AssignmentStore::prune_finished(base::Instant now, int limit) {
    pqxx::work txn(*conn_, "prune_finished");
    Scope(txn, options_.row_security).all();
    std::vector<Pruned> out;
    for (const auto& r : txn.exec_prepared(sql::kPruneJobs.name, now, limit)) {
        out.push_back(pruned_of(r));
    }
    txn.commit();
    return out;
}

std::vector<std::string> AssignmentStore::ensure_event_partitions(base::Instant now,
                                                                  int months_ahead) {
    pqxx::work txn(*conn_, "ensure_event_partitions");
    Scope(txn, options_.row_security).all();
    std::vector<std::string> out;
    for (const auto& r : txn.exec_prepared(sql::kEnsurePartitions.name, now, months_ahead)) {
        out.push_back(r["name"].as<std::string>());
    }
    txn.commit();
    return out;
}

PartitionSummary AssignmentStore::partition_summary() {
    pqxx::work txn(*conn_, "partition_summary");
    Scope(txn, options_.row_security).all();
    const pqxx::row r = txn.exec_prepared1(sql::kPartitionSummary.name);
    txn.commit();
    PartitionSummary s;
    s.attached = r["attached"].as<std::int64_t>();
    s.detaching = r["detaching"].as<std::int64_t>();
    s.archived = r["archived"].as<std::int64_t>();
    s.dropped = r["dropped"].as<std::int64_t>();
    if (!r["covered_until_us"].is_null())
        s.covered_until = r["covered_until_us"].as<base::Instant>();
    return s;
}

}  // namespace aclaim::store
