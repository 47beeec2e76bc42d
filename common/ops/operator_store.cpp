#include "common/ops/operator_store.hpp"

#include "common/ops/operator_sql.hpp"
#include "common/ops/recovery_sql.hpp"

namespace aclaim::common {

namespace {

template <class T>
std::optional<T> opt(const pqxx::field& f) {
    if (f.is_null()) return std::nullopt;
    return f.as<T>();
}

std::string with_columns(const char* text) {
    std::string out(text);
    const std::string key = "{COLUMNS}";
    out.replace(out.find(key), key.size(), sql::kOperatorJobColumns);
    return out;
}

JobView read_job(const pqxx::row& r) {
    JobView j;
    j.id = r[0].as<JobId>();
    j.org_id = r[1].as<OrgId>();
    j.state = r[2].as<std::string>();
    j.priority = r[3].as<int>();
    j.generation = r[4].as<Generation>();
    j.attempts = r[5].as<int>();
    j.max_attempts = r[6].as<int>();
    j.assignee = r[7].as<std::string>();
    j.enqueued_at = r[8].as<Micros>();
    j.claimed_at = opt<Micros>(r[9]);
    j.lease_expires_at = opt<Micros>(r[10]);
    j.completed_at = opt<Micros>(r[11]);
    j.result_ref = opt<std::string>(r[12]);
    j.last_error = opt<std::string>(r[13]);
    j.quarantined_from = opt<std::string>(r[14]);
    j.quarantine_reason = opt<std::string>(r[15]);
    j.payload = r[16].as<std::string>();
    return j;
}

std::optional<JobView> read_one(pqxx::transaction_base& txn, JobId id) {
    const auto rows = txn.exec_params(with_columns(sql::kOperatorJob), id);
    if (rows.empty()) return std::nullopt;
    return read_job(rows[0]);
}

bool is_lock_timeout(const pqxx::sql_error& e) {
    return e.sqlstate() == "55P03";
}

}  // namespace

std::vector<OrgStatus> OperatorStore::status(Micros now, std::optional<OrgId> org) {
    pqxx::read_transaction txn(conn_);
    std::vector<OrgStatus> out;
    for (const auto& r : txn.exec_params(sql::kOperatorStatus.text, now, org.value_or(0))) {
        OrgStatus s;
        s.org_id = r[0].as<OrgId>();
        s.pending = r[1].as<std::int64_t>();
        s.assigned = r[2].as<std::int64_t>();
        s.completed = r[3].as<std::int64_t>();
        s.failed = r[4].as<std::int64_t>();
        s.quarantined = r[5].as<std::int64_t>();
        s.live_leases = r[6].as<std::int64_t>();
        s.expired_leases = r[7].as<std::int64_t>();
        s.completed_last_minute = r[8].as<std::int64_t>();
        if (!r[9].is_null()) s.oldest_pending_age = now - r[9].as<Micros>();
        out.push_back(s);
    }
    return out;
}

std::optional<JobView> OperatorStore::job(JobId id) {
    pqxx::read_transaction txn(conn_);
    return read_one(txn, id);
}

std::vector<AuditEvent> OperatorStore::events(JobId id) {
    pqxx::read_transaction txn(conn_);
    std::vector<AuditEvent> out;
    for (const auto& r : txn.exec_params(sql::kReadEventsOfJob, id)) {
        out.push_back({r[0].as<std::int64_t>(), id, r[1].as<OrgId>(), r[2].as<Generation>(),
                       r[3].as<std::string>(), r[4].as<std::string>(), r[5].as<Micros>(),
                       r[6].as<std::string>()});
    }
    return out;
}

std::vector<JobView> OperatorStore::list(const JobFilter& f) {
    pqxx::read_transaction txn(conn_);
    std::vector<JobView> out;
    for (const auto& r : txn.exec_params(with_columns(sql::kOperatorList), f.org_id, f.state,
                                         f.assignee, f.enqueued_before, f.after_id, f.limit)) {
        out.push_back(read_job(r));
    }
    return out;
}

OperatorOutcome OperatorStore::release(JobId id, std::optional<Generation> expected,
                                       const std::string& actor, const std::string& reason,
                                       Micros now) {
    return act(true, id, expected, actor, reason, now);
}

OperatorOutcome OperatorStore::fail(JobId id, std::optional<Generation> expected,
                                    const std::string& actor, const std::string& reason,
                                    Micros now) {
    return act(false, id, expected, actor, reason, now);
}

OperatorOutcome OperatorStore::act(bool release, JobId id, std::optional<Generation> expected,
                                   const std::string& actor, const std::string& reason,
                                   Micros now) {
    OperatorOutcome out;
    try {
        pqxx::work txn(conn_, release ? "operator_release" : "operator_fail");
        txn.exec(sql::kOperatorLockTimeout);
        out.job = read_one(txn, id);
        if (!out.job) {
            out.result = OperatorOutcome::Result::NotFound;
            return out;
        }
        if (out.job->state != "assigned") {
            out.result = OperatorOutcome::Result::NotAssigned;
            return out;
        }
        const Generation g = out.job->generation;
        if (expected && *expected != g) {
            out.result = OperatorOutcome::Result::Moved;
            return out;
        }
        out.held_by = out.job->assignee;
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
