#include "common/ops/operator_store.hpp"

#include <array>
#include <iomanip>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>

#include "common/ops/operator_sql.hpp"
#include "common/ops/recovery_sql.hpp"
#include "common/store/job_states.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/session_sql.hpp"

namespace aclaim::ops {

namespace {

/// The field of `q` (an OrgStatus or a QueueStatus, const or not) that counts state `s`.
template <typename Q>
auto& count_in(Q& q, store::JobState s) {
    // In kJobStates' order, which is the enum's (job_states.hpp holds them to it).
    const std::array<decltype(&q.pending), store::kJobStates.size()> fields = {
        &q.pending,   &q.scheduled, &q.assigned,    &q.completed, &q.failed,
        &q.discarded, &q.cancelled, &q.quarantined, &q.parked,    &q.waiting};
    return *fields.at(store::state_index(s));
}

std::optional<JobRecord> read_one(pqxx::transaction_base& txn, store::JobId id) {
    const auto rows = txn.exec_params(sql::kOperatorJob, id);
    if (rows.empty()) return std::nullopt;
    return job_record_of(rows[0]);
}

std::string value_text(int v) {
    return std::to_string(v);
}
/// A rate as its shortest decimal text (6 significant digits), which the statement reads as an
/// exact numeric: "0.1", not 0.1000000000000000055...
std::string value_text(double v) {
    std::ostringstream out;
    out << std::setprecision(6) << v;
    return out.str();
}
std::string value_text(base::Duration d) {
    if (d == kRetainForever) return "forever";
    return std::to_string(d.count() / 1000) + "ms";
}

bool is_lock_timeout(const pqxx::sql_error& e) {
    return e.sqlstate() == "55P03";
}

}  // namespace

std::vector<OrgStatus> OperatorStore::status(base::Instant now, std::optional<store::OrgId> org) {
    pqxx::read_transaction txn(conn_);
    std::vector<OrgStatus> out;
    for (const auto& r : txn.exec_params(sql::kOperatorStatus.text, now, org.value_or(0))) {
        OrgStatus s;
        s.org_id = r["org_id"].as<store::OrgId>();
        for (const auto& state : store::kJobStates) {
            count_in(s, state.state) = r[std::string(state.name)].as<std::int64_t>();
        }
        s.live_leases = r["live_leases"].as<std::int64_t>();
        s.expired_leases = r["expired_leases"].as<std::int64_t>();
        s.completed_last_minute = r["completed_last_minute"].as<std::int64_t>();
        if (!r["oldest_pending_us"].is_null())
            s.oldest_pending_age = now - r["oldest_pending_us"].as<base::Instant>();
        out.push_back(s);
    }
    return out;
}

std::optional<JobRecord> OperatorStore::job(store::JobId id) {
    pqxx::read_transaction txn(conn_);
    return read_one(txn, id);
}

std::optional<ProgressRecord> OperatorStore::progress(store::JobId id) {
    pqxx::read_transaction txn(conn_);
    const auto r = txn.exec_params(sql::kOperatorProgress, id);
    if (r.empty()) return std::nullopt;
    return ProgressRecord{r[0]["generation"].as<store::Generation>(), r[0]["percent"].as<int>(),
                          r[0]["note"].as<std::string>(),
                          r[0]["checkpoint_bytes"].as<std::size_t>(),
                          r[0]["updated_us"].as<base::Instant>()};
}

namespace {

std::optional<std::string> text_of(const pqxx::field& f) {
    return f.is_null() ? std::nullopt : std::optional<std::string>(f.as<std::string>());
}

std::vector<DependencyRecord> dependencies_of(const pqxx::result& rows) {
    std::vector<DependencyRecord> out;
    for (const auto& r : rows) {
        out.push_back({r["job"].as<store::JobId>(), r["policy"].as<std::string>(),
                       text_of(r["resolved"]), text_of(r["state"])});
    }
    return out;
}

}  // namespace

std::vector<ExclusionRecord> read_exclusions(pqxx::transaction_base& txn, store::JobId id) {
    std::vector<ExclusionRecord> out;
    for (const auto& r : txn.exec_params(sql::kOperatorExclusions, id)) {
        ExclusionRecord x;
        x.reviewer = text_of(r["excluded_key"]);
        if (!r["completer_of"].is_null()) x.completer_of = r["completer_of"].as<store::JobId>();
        x.named_state = text_of(r["named_state"]);
        x.completer = text_of(r["completer"]);
        out.push_back(std::move(x));
    }
    return out;
}

JobLinks OperatorStore::links(store::JobId id) {
    pqxx::read_transaction txn(conn_);
    JobLinks out;
    // One more than shown: whether there are more.
    constexpr auto kShown = static_cast<std::size_t>(JobLinks::kEdgesShown);
    auto side = [&](const std::string& statement, bool& more) {
        auto edges = dependencies_of(txn.exec_params(statement, id, JobLinks::kEdgesShown + 1));
        more = edges.size() > kShown;
        if (more) edges.resize(kShown);
        return edges;
    };
    out.depends_on = side(sql::kOperatorDependencies, out.more_depends_on);
    out.dependents = side(sql::kOperatorDependents, out.more_dependents);
    out.exclusions = read_exclusions(txn, id);
    return out;
}

std::optional<ParkRecord> OperatorStore::park(store::JobId id) {
    pqxx::read_transaction txn(conn_);
    const auto r = txn.exec_params(sql::kOperatorPark, id);
    if (r.empty()) return std::nullopt;
    ParkRecord p;
    p.generation = r[0]["generation"].as<store::Generation>();
    p.parked_by = r[0]["parked_by"].as<std::string>();
    p.note = r[0]["note"].as<std::string>();
    p.parked_at = r[0]["parked_us"].as<base::Instant>();
    p.deadline = r[0]["deadline_us"].as<base::Instant>();
    if (!r[0]["used_us"].is_null()) p.used_at = r[0]["used_us"].as<base::Instant>();
    p.used_by = r[0]["used_by"].as<std::string>();
    p.outcome = r[0]["outcome"].as<std::string>();
    return p;
}

std::vector<store::AuditEvent> OperatorStore::events(store::JobId id) {
    pqxx::read_transaction txn(conn_);
    std::vector<store::AuditEvent> out;
    for (const auto& r : txn.exec_params(sql::kReadEventsOfJob, id)) {
        out.push_back({r["id"].as<std::int64_t>(), id, r["org_id"].as<store::OrgId>(),
                       r["generation"].as<store::Generation>(), r["kind"].as<std::string>(),
                       r["worker"].as<std::string>(), r["at_us"].as<base::Instant>(),
                       r["detail"].as<std::string>()});
    }
    return out;
}

std::vector<JobRecord> OperatorStore::list(const JobFilter& f) {
    pqxx::read_transaction txn(conn_);
    std::vector<JobRecord> out;
    for (const auto& r : txn.exec_params(sql::kOperatorList, f.org_id, f.state, f.assignee,
                                         f.enqueued_before, f.after_id, f.limit, f.queue)) {
        out.push_back(job_record_of(r));
    }
    return out;
}

OperatorOutcome OperatorStore::release(store::JobId id, std::optional<store::Generation> expected,
                                       const std::string& actor, const std::string& reason,
                                       base::Instant now) {
    return act(true, id, expected, actor, reason, now);
}

OperatorOutcome OperatorStore::fail(store::JobId id, std::optional<store::Generation> expected,
                                    const std::string& actor, const std::string& reason,
                                    base::Instant now) {
    return act(false, id, expected, actor, reason, now);
}

OperatorOutcome OperatorStore::act(bool release, store::JobId id,
                                   std::optional<store::Generation> expected,
                                   const std::string& actor, const std::string& reason,
                                   base::Instant now) {
    OperatorOutcome out;
    try {
        pqxx::work txn(conn_, release ? "operator_release" : "operator_fail");
        txn.exec(store::sql::kShortLockWait);
        out.job = read_one(txn, id);
        if (!out.job) {
            out.result = OperatorOutcome::Result::NotFound;
            return out;
        }
        if (out.job->state != store::JobState::Assigned) {
            out.result = OperatorOutcome::Result::NotAssigned;
            return out;
        }
        const store::Generation g = out.job->generation;
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

namespace {

std::optional<base::Duration> duration_of(const pqxx::field& f) {
    if (f.is_null()) return std::nullopt;
    return f.as<base::Duration>();
}

std::optional<int> int_of(const pqxx::field& f) {
    if (f.is_null()) return std::nullopt;
    return f.as<int>();
}

std::optional<std::int64_t> micros_of(const std::optional<base::Duration>& d) {
    if (!d) return std::nullopt;
    return d->count();
}

}  // namespace

std::vector<Cancelled> OperatorStore::cancel(const std::vector<store::JobId>& ids,
                                             const std::string& actor, const std::string& reason,
                                             base::Instant now) {
    pqxx::work txn(conn_, "operator_cancel");
    txn.exec(store::sql::kShortLockWait);
    std::vector<Cancelled> out;
    for (const auto& r :
         txn.exec_params(sql::kOperatorCancel.text, store::pg_array(ids), actor, reason, now)) {
        out.push_back({r["id"].as<store::JobId>(), r["org_id"].as<store::OrgId>(),
                       r["generation"].as<store::Generation>(), r["was"].as<std::string>(),
                       r["holder"].as<std::string>()});
    }
    txn.commit();
    return out;
}

std::vector<store::JobId> OperatorStore::retry(const std::vector<store::JobId>& ids,
                                               const std::string& actor, const std::string& reason,
                                               base::Instant now) {
    pqxx::work txn(conn_, "operator_retry");
    txn.exec(store::sql::kShortLockWait);
    txn.exec_params(sql::kOperatorRetryLocks.text, store::pg_array(ids));
    std::vector<store::JobId> out;
    for (const auto& r :
         txn.exec_params(sql::kOperatorRetry.text, store::pg_array(ids), actor, now, reason)) {
        out.push_back(r["id"].as<store::JobId>());
    }
    txn.commit();
    return out;
}

std::vector<store::JobId> OperatorStore::matching(JobFilter filter) {
    std::vector<store::JobId> out;
    filter.limit = 1000;
    while (true) {
        const auto page = list(filter);
        for (const auto& j : page) out.push_back(j.id);
        if (page.size() < static_cast<std::size_t>(filter.limit)) return out;
        filter.after_id = page.back().id;
    }
}

namespace {

/// Under the organization's queue lock, so that the answer holds until the commit.
void require_queue(pqxx::work& txn, store::OrgId org, const std::string& queue, bool allow_new) {
    if (allow_new) return;
    if (!txn.exec_params1(sql::kOperatorQueueKnown.text, org, queue)[0].as<bool>())
        throw UnknownQueue(org, queue);
}

}  // namespace

void OperatorStore::pause(store::OrgId org, const std::string& queue, bool paused,
                          const std::string& actor, const std::string& reason,
                          const base::Clock& clock, bool allow_new) {
    pqxx::work txn(conn_, "operator_pause");
    txn.exec(store::sql::kShortLockWait);
    txn.exec_params(sql::kOperatorQueueLock, org);
    require_queue(txn, org, queue, allow_new);
    txn.exec_params(sql::kOperatorPause.text, org, queue, paused, actor, clock.now(), reason);
    txn.commit();
}

void OperatorStore::configure(store::OrgId org, const std::string& queue, const QueueSettings& q,
                              const std::string& actor, base::Instant now, bool allow_new) {
    std::string detail;
    auto say = [&](const char* name, const auto& value) {
        if (value)
            detail += (detail.empty() ? "" : ", ") + std::string(name) + "=" + value_text(*value);
    };
    // Every setting given, by the name the event records it under, in the parameters' order.
    constexpr std::array kNames{"max_assigned",
                                "max_attempts",
                                "backoff_base",
                                "backoff_cap",
                                "run_timeout",
                                "retain_completed",
                                "retain_failed",
                                "retain_discarded",
                                "retain_cancelled",
                                "rate",
                                "burst",
                                "weight",
                                "aging"};
    std::size_t named = 0;
    std::apply([&](const auto&... value) { (say(kNames[named++], value), ...); },
               std::tie(q.max_assigned, q.max_attempts, q.backoff_base, q.backoff_cap,
                        q.run_timeout, q.retain_completed, q.retain_failed, q.retain_discarded,
                        q.retain_cancelled, q.rate_per_s, q.rate_burst, q.weight, q.aging));
    std::optional<std::string> rate;
    if (q.rate_per_s) rate = value_text(*q.rate_per_s);
    pqxx::work txn(conn_, "operator_configure");
    txn.exec(store::sql::kShortLockWait);
    txn.exec_params(sql::kOperatorQueueLock, org);
    require_queue(txn, org, queue, allow_new);
    txn.exec_params(sql::kOperatorConfigure.text, org, queue, q.max_assigned, q.max_attempts,
                    micros_of(q.backoff_base), micros_of(q.backoff_cap), micros_of(q.run_timeout),
                    actor, now, detail.empty() ? "nothing changed" : detail,
                    micros_of(q.retain_completed), micros_of(q.retain_failed),
                    micros_of(q.retain_discarded), micros_of(q.retain_cancelled), rate,
                    q.rate_burst, q.weight, micros_of(q.aging));
    txn.commit();
}

namespace {

/// A bigint[] as PostgreSQL writes it: "{1,2,3}".
std::vector<std::int64_t> bigints_of(const pqxx::field& f) {
    std::vector<std::int64_t> out;
    std::string_view text = f.c_str();
    if (text.size() < 2) return out;
    text = text.substr(1, text.size() - 2);
    while (!text.empty()) {
        const auto comma = text.find(',');
        out.push_back(std::stoll(std::string(text.substr(0, comma))));
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    return out;
}

}  // namespace

std::int64_t OrgStatus::count(store::JobState s) const {
    return count_in(*this, s);
}

std::int64_t& QueueStatus::count(store::JobState s) {
    return count_in(*this, s);
}
std::int64_t QueueStatus::count(store::JobState s) const {
    return count_in(*this, s);
}

std::vector<QueueStatus> count_queues(pqxx::transaction_base& txn, const QueueQuery& query) {
    std::vector<std::string> states;
    for (const auto s : query.states) states.emplace_back(store::state_name(s));
    std::optional<std::string> orgs;
    if (query.orgs) orgs = store::pg_array(*query.orgs);
    std::vector<QueueStatus> out;
    txn.exec(sql::kOperatorQueuesNoJit);
    for (const auto& r : txn.exec_params(sql::kOperatorQueues.text, orgs, store::pg_array(states),
                                         query.cap, query.queues_per_state, query.now)) {
        QueueStatus q;
        q.org_id = r["org_id"].as<store::OrgId>();
        q.queue = r["queue"].as<std::string>();
        const auto counts = bigints_of(r["counts"]);
        for (std::size_t i = 0; i < counts.size() && i < query.states.size(); ++i) {
            q.count(query.states[i]) = counts[i];
        }
        if (!r["oldest_pending_us"].is_null()) {
            q.oldest_pending_us = r["oldest_pending_us"].as<base::Micros>();
        }
        q.paused = r["paused"].as<bool>();
        q.max_assigned = int_of(r["max_assigned"]);
        if (!r["rate_per_s"].is_null()) q.rate_per_s = r["rate_per_s"].as<std::string>();
        q.rate_burst = int_of(r["rate_burst"]);
        q.rate_tokens = int_of(r["rate_tokens"]);
        q.weight = int_of(r["weight"]);
        q.aging = duration_of(r["aging_us"]);
        q.max_attempts = int_of(r["max_attempts"]);
        q.backoff_base = duration_of(r["backoff_base_us"]);
        q.backoff_cap = duration_of(r["backoff_cap_us"]);
        q.run_timeout = duration_of(r["run_timeout_us"]);
        q.retain_completed = base::Duration(r["retain_completed_us"].as<std::int64_t>());
        q.retain_failed = base::Duration(r["retain_failed_us"].as<std::int64_t>());
        q.retain_discarded = base::Duration(r["retain_discarded_us"].as<std::int64_t>());
        q.retain_cancelled = base::Duration(r["retain_cancelled_us"].as<std::int64_t>());
        out.push_back(std::move(q));
    }
    return out;
}

std::optional<base::Duration> DrainRate::time_left() const {
    if (completed_last_minute <= 0) return std::nullopt;
    return std::chrono::duration_cast<base::Duration>(std::chrono::minutes(1)) * pending /
           completed_last_minute;
}

DrainRate& DrainRate::operator+=(const DrainRate& other) {
    pending += other.pending;
    completed_last_minute += other.completed_last_minute;
    return *this;
}

std::map<std::pair<store::OrgId, std::string>, std::int64_t> completions_last_minute(
    pqxx::transaction_base& txn, const std::vector<store::OrgId>& orgs, base::Instant now) {
    std::map<std::pair<store::OrgId, std::string>, std::int64_t> out;
    for (const auto& r : txn.exec_params(sql::kQueueCompletions.text, now, store::pg_array(orgs))) {
        out[{r["org_id"].as<store::OrgId>(), r["queue"].as<std::string>()}] =
            r["n"].as<std::int64_t>();
    }
    return out;
}

std::vector<QueueStatus> OperatorStore::queues(std::optional<store::OrgId> org) {
    pqxx::read_transaction txn(conn_);
    QueueQuery query;
    if (org) query.orgs = std::vector<store::OrgId>{*org};
    for (const auto& s : store::kJobStates) query.states.push_back(s.state);
    query.now = base::SystemClock().now();
    return count_queues(txn, query);
}

}  // namespace aclaim::ops
