#include "common/ops/operator_store.hpp"

#include "common/ops/operator_sql.hpp"
#include "common/ops/recovery_sql.hpp"
#include "common/store/pg_time.hpp"

namespace aclaim::common {

namespace {

std::string with_columns(const char* text) {
    std::string out(text);
    const std::string key = "{COLUMNS}";
    out.replace(out.find(key), key.size(), sql::kJobColumnsWithPayload);
    return out;
}

std::optional<JobRecord> read_one(pqxx::transaction_base& txn, JobId id) {
    const auto rows = txn.exec_params(with_columns(sql::kOperatorJob), id);
    if (rows.empty()) return std::nullopt;
    return job_record_of(rows[0]);
}

bool is_lock_timeout(const pqxx::sql_error& e) {
    return e.sqlstate() == "55P03";
}

}  // namespace

std::vector<OrgStatus> OperatorStore::status(Instant now, std::optional<OrgId> org) {
    pqxx::read_transaction txn(conn_);
    std::vector<OrgStatus> out;
    for (const auto& r : txn.exec_params(sql::kOperatorStatus.text, now, org.value_or(0))) {
        OrgStatus s;
        s.org_id = r["org_id"].as<OrgId>();
        s.pending = r["pending"].as<std::int64_t>();
        s.assigned = r["assigned"].as<std::int64_t>();
        s.completed = r["completed"].as<std::int64_t>();
        s.failed = r["failed"].as<std::int64_t>();
        s.quarantined = r["quarantined"].as<std::int64_t>();
        s.live_leases = r["live_leases"].as<std::int64_t>();
        s.expired_leases = r["expired_leases"].as<std::int64_t>();
        s.completed_last_minute = r["completed_last_minute"].as<std::int64_t>();
        if (!r["oldest_pending_us"].is_null())
            s.oldest_pending_age = now - r["oldest_pending_us"].as<Instant>();
        out.push_back(s);
    }
    return out;
}

std::optional<JobRecord> OperatorStore::job(JobId id) {
    pqxx::read_transaction txn(conn_);
    return read_one(txn, id);
}

std::vector<AuditEvent> OperatorStore::events(JobId id) {
    pqxx::read_transaction txn(conn_);
    std::vector<AuditEvent> out;
    for (const auto& r : txn.exec_params(sql::kReadEventsOfJob, id)) {
        out.push_back({r["id"].as<std::int64_t>(), id, r["org_id"].as<OrgId>(),
                       r["generation"].as<Generation>(), r["kind"].as<std::string>(),
                       r["worker"].as<std::string>(), r["at_us"].as<Instant>(),
                       r["detail"].as<std::string>()});
    }
    return out;
}

std::vector<JobRecord> OperatorStore::list(const JobFilter& f) {
    pqxx::read_transaction txn(conn_);
    std::vector<JobRecord> out;
    for (const auto& r : txn.exec_params(with_columns(sql::kOperatorList), f.org_id, f.state,
                                         f.assignee, f.enqueued_before, f.after_id, f.limit)) {
        out.push_back(job_record_of(r));
    }
    return out;
}

OperatorOutcome OperatorStore::release(JobId id, std::optional<Generation> expected,
                                       const std::string& actor, const std::string& reason,
                                       Instant now) {
    return act(true, id, expected, actor, reason, now);
}

OperatorOutcome OperatorStore::fail(JobId id, std::optional<Generation> expected,
                                    const std::string& actor, const std::string& reason,
                                    Instant now) {
    return act(false, id, expected, actor, reason, now);
}

OperatorOutcome OperatorStore::act(bool release, JobId id, std::optional<Generation> expected,
                                   const std::string& actor, const std::string& reason,
                                   Instant now) {
    OperatorOutcome out;
    try {
        pqxx::work txn(conn_, release ? "operator_release" : "operator_fail");
        txn.exec(sql::kOperatorLockTimeout);
        out.job = read_one(txn, id);
        if (!out.job) {
            out.result = OperatorOutcome::Result::NotFound;
            return out;
        }
        if (out.job->state != JobState::Assigned) {
            out.result = OperatorOutcome::Result::NotAssigned;
            return out;
        }
        const Generation g = out.job->generation;
        if (expected && *expected != g) {
            out.result = OperatorOutcome::Result::Moved;
            return out;
        }
        out.held_by = out.job->assignee.value_or("");
        out.generation = g;
        const std::string detail = std::string(release ? "operator release" : "operator fail") +
                                   " of the assignment held by " + out.held_by + ": " + reason;
        // Fenced on the generation just read: a claim that slipped in between matches nothing.
        const auto changed =
            release ? txn.exec_params(sql::kOperatorRelease.text, id, g, actor, now, detail)
                    : txn.exec_params(sql::kOperatorFail.text, id, g, actor, now, detail,
                                      "failed by operator " + actor + ": " + reason);
        if (changed.empty()) {
            out.result = OperatorOutcome::Result::Moved;
            out.job = read_one(txn, id);
            return out;
        }
        out.job = read_one(txn, id);
        txn.commit();
        out.result = OperatorOutcome::Result::Done;
    } catch (const pqxx::sql_error& e) {
        if (!is_lock_timeout(e)) throw;
        out.result = OperatorOutcome::Result::Busy;
    }
    return out;
}

}  // namespace aclaim::common
