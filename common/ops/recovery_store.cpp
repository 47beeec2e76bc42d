#include "common/ops/recovery_store.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "common/base/enum_names.hpp"
#include "common/ops/pruned.hpp"
#include "common/ops/recovery_sql.hpp"
#include "common/store/pg_field.hpp"
#include "common/store/session_sql.hpp"

namespace aclaim::ops {

namespace {

constexpr const char* kLockNotAvailable = "55P03";

/// A reader template with its row filter filled in.
std::string fill(std::string_view tmpl, std::string_view filter) {
    return store::sql::compose(tmpl, {{"FILTER", filter}});
}

/// kReadJobs with its row filter, its rows locked or not.
std::string read_jobs(std::string_view filter, bool lock) {
    return store::sql::compose(
        sql::kReadJobs, {{"FILTER", filter}, {"LOCK", lock ? sql::kLockRead : sql::kNoLock}});
}

std::vector<std::int64_t> parse_ids(const std::string& text) {
    std::vector<std::int64_t> out;
    const char* p = text.data();
    const char* end = p + text.size();
    while (p < end) {
        std::int64_t v = 0;
        const auto [next, ec] = std::from_chars(p, end, v);
        if (ec != std::errc()) throw std::runtime_error("bad number list '" + text + "'");
        out.push_back(v);
        p = next < end ? next + 1 : next;
    }
    return out;
}

/// The event whose columns are named `prefix` + id, org_id, generation, kind, worker, at_us and
/// detail (see kReadEventSummaries and kReadEventsOfJob), of `job`; none when its id is NULL.
std::optional<store::AuditEvent> read_event(const pqxx::row& r, const std::string& prefix,
                                            store::JobId job) {
    const auto column = [&](const char* name) { return r[prefix + name]; };
    if (column("id").is_null()) return std::nullopt;
    return store::AuditEvent{
        column("id").as<std::int64_t>(),     job,
        column("org_id").as<store::OrgId>(), column("generation").as<store::Generation>(),
        column("kind").as<std::string>(),    column("worker").as<std::string>(),
        column("at_us").as<base::Instant>(), column("detail").as<std::string>()};
}

std::pair<store::JobId, EventSummary> read_summary(const pqxx::row& r) {
    EventSummary s;
    s.total = r["total"].as<std::int64_t>();
    s.max_generation = r["max_generation"].as<store::Generation>();
    s.completions = r["completions"].as<std::int64_t>();
    s.completion_generations = parse_ids(r["completed_at_gens"].as<std::string>());
    s.orgs = parse_ids(r["orgs"].as<std::string>());
    std::sort(s.orgs.begin(), s.orgs.end());
    const auto job = r["job_id"].as<store::JobId>();
    s.top = read_event(r, "top_", job);
    s.latest_claim = read_event(r, "claim_", job);
    s.resolution = read_event(r, "resolution_", job);
    s.latest_completion = read_event(r, "completion_", job);
    return {job, std::move(s)};
}

std::pair<store::JobId, ProgressMark> progress_mark_of(const pqxx::row& r) {
    return {r["job_id"].as<store::JobId>(),
            ProgressMark{r["generation"].as<store::Generation>(), r["org_id"].as<store::OrgId>()}};
}

/// Reads one job's row (locked when lock is set), result and event summary.
std::optional<JobSnapshot> read_one(pqxx::transaction_base& txn, store::JobId job, bool lock,
                                    base::Instant now) {
    const auto rows = txn.exec_params(read_jobs(sql::kJobsOne, lock), job);
    if (rows.empty()) return std::nullopt;
    JobSnapshot s;
    s.row = job_record_of(rows[0]);
    // Read after the lock: under read committed each statement sees what committed before it,
    // and nothing can add a result or a grant for this job while the row is locked.
    const auto results = txn.exec_params(fill(sql::kReadResults, sql::kLinkedOne), job);
    if (!results.empty()) s.result = result_record_of(results[0]);
    const auto summaries = txn.exec_params(fill(sql::kReadEventSummaries, sql::kLinkedOne), job);
    if (!summaries.empty()) s.events = read_summary(summaries[0]).second;
    const auto progress = txn.exec_params(fill(sql::kReadProgress, sql::kLinkedOne), job);
    if (!progress.empty()) s.progress = progress_mark_of(progress[0]).second;
    s.classification = classify(s.row, s.result, s.events, now, s.progress);
    return s;
}

}  // namespace

std::string_view to_string(ApplyAction a) {
    static constexpr base::EnumNames<ApplyAction, 6> kNames{
        {"reclaimed", "discarded", "quarantined", "unchanged", "busy", "vanished"}};
    static_assert(kNames.covers(ApplyAction::Vanished));
    return kNames(a);
}

RecoveryReport RecoveryStore::survey(base::Instant now, std::optional<store::OrgId> org) {
    RecoveryReport report;
    report.now = now;
    report.org = org;
    pqxx::result jobs, results, summaries, progress, buckets;
    PrunedIds pruned;
    {
        // One snapshot for the reads, so that a completion committing in between cannot
        // show up as a row without its result.
        pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> txn(conn_, "recover_survey");
        auto exec = [&](const std::string& text) {
            return org ? txn.exec_params(text, *org) : txn.exec(text);
        };
        auto run = [&](std::string_view tmpl, const char* all, const char* of_org) {
            return exec(fill(tmpl, org ? of_org : all));
        };
        jobs = exec(read_jobs(org ? sql::kJobsOfOrg : sql::kJobsAll, false));
        results = run(sql::kReadResults, sql::kLinkedAll, sql::kLinkedOfOrg);
        summaries = run(sql::kReadEventSummaries, sql::kLinkedAll, sql::kLinkedOfOrg);
        progress = run(sql::kReadProgress, sql::kLinkedAll, sql::kLinkedOfOrg);
        buckets = run(sql::kReadRateBuckets, sql::kRateBucketsAll, sql::kRateBucketsOfOrg);
        pruned = PrunedIds(load_pruned(txn));
        txn.commit();
    }
    std::map<store::JobId, ResultRecord> result_of;
    for (const auto& r : results) {
        auto rec = result_record_of(r);
        result_of.emplace(rec.job_id, std::move(rec));
    }
    std::map<store::JobId, EventSummary> events_of;
    for (const auto& r : summaries) events_of.insert(read_summary(r));
    for (const auto& r : buckets) {
        RateBucket b{r["org_id"].as<store::OrgId>(),
                     r["queue"].as<std::string>(),
                     r["rate"].as<double>(),
                     r["rate_burst"].as<std::int64_t>(),
                     std::nullopt,
                     std::nullopt};
        if (!r["tokens"].is_null()) b.tokens = r["tokens"].as<double>();
        if (!r["rate_refilled_us"].is_null())
            b.refilled_us = r["rate_refilled_us"].as<std::int64_t>();
        if (auto f = check_rate_bucket(b, now)) report.queues.push_back(std::move(*f));
    }
    std::map<store::JobId, ProgressMark> progress_of;
    for (const auto& r : progress) progress_of.insert(progress_mark_of(r));

    for (const auto& r : jobs) {
        JobSnapshot s;
        s.row = job_record_of(r);
        if (auto it = result_of.find(s.row.id); it != result_of.end()) {
            s.result = std::move(it->second);
            result_of.erase(it);
        }
        if (auto it = events_of.find(s.row.id); it != events_of.end()) {
            s.events = std::move(it->second);
            events_of.erase(it);
        }
        if (auto it = progress_of.find(s.row.id); it != progress_of.end()) s.progress = it->second;
        s.classification = classify(s.row, s.result, s.events, now, s.progress);
        const auto index = static_cast<std::size_t>(s.classification.cls);
        ++report.by_org[s.row.org_id][index];
        ++report.totals[index];
        if (s.classification.cls == RecoveryClass::Expired) report.expired.push_back(s.row.id);
        if (s.classification.cls == RecoveryClass::Inconsistent) {
            report.inconsistent.push_back(std::move(s));
        }
    }
    // What is left has no job row.
    std::map<store::JobId, bool> orphan_ids;
    for (const auto& [id, _] : result_of) orphan_ids[id] = true;
    for (const auto& [id, _] : events_of) orphan_ids[id] = true;
    for (const auto& [id, _] : orphan_ids) {
        std::optional<ResultRecord> result;
        std::optional<EventSummary> events;
        if (auto it = result_of.find(id); it != result_of.end()) result = it->second;
        if (auto it = events_of.find(id); it != events_of.end()) events = it->second;
        const bool was_pruned = pruned.contains(id);
        if (was_pruned && !result) ++report.pruned_with_events;
        if (auto o = orphan_of(id, result, events, was_pruned)) {
            report.orphans.push_back(std::move(*o));
        }
    }
    return report;
}

std::vector<ApplyOutcome> RecoveryStore::apply(const RecoveryReport& report,
                                               const std::string& actor) {
    std::map<store::JobId, RecoveryClass> todo;
    for (const auto id : report.expired) todo[id] = RecoveryClass::Expired;
    for (const auto& s : report.inconsistent) {
        // An already quarantined row waits for its operator; apply never touches it again.
        if (s.row.state != store::JobState::Quarantined)
            todo[s.row.id] = RecoveryClass::Inconsistent;
    }
    std::vector<ApplyOutcome> out;
    out.reserve(todo.size());
    for (const auto& [id, cls] : todo) out.push_back(apply_one(id, cls, report.now, actor));
    return out;
}

ApplyOutcome RecoveryStore::apply_one(store::JobId job, RecoveryClass surveyed, base::Instant now,
                                      const std::string& actor) {
    ApplyOutcome out;
    out.job_id = job;
    out.surveyed = surveyed;
    try {
        pqxx::work txn(conn_, "recover_apply");
        txn.exec(store::sql::kShortLockWait);
        const auto snap = read_one(txn, job, /*lock=*/true, now);
        if (!snap) {
            txn.commit();
            out.action = ApplyAction::Vanished;
            out.detail = "the job no longer exists";
            return out;
        }
        const auto& c = snap->classification;
        out.org_id = snap->row.org_id;
        out.locked = c.cls;
        if (c.cls == RecoveryClass::Expired) {
            const auto r = txn.exec_params(sql::kReclaimOne.text, now, job,
                                           "lease expired; reclaimed by recovery (" + actor + ")");
            const auto state = store::job_state_of(r.at(0)["state"]);
            out.action = state == store::JobState::Discarded ? ApplyAction::Discarded
                                                             : ApplyAction::Reclaimed;
            out.detail = "generation " + std::to_string(snap->row.generation) + " of " +
                         snap->row.assignee.value_or("?") + " lost its lease; now " +
                         std::string(to_string(state));
        } else if (c.cls == RecoveryClass::Inconsistent &&
                   snap->row.state != store::JobState::Quarantined) {
            txn.exec_params(sql::kQuarantine.text, job, c.explanation(), actor, now,
                            c.explanation() + "\n" + c.evidence);
            out.action = ApplyAction::Quarantined;
            out.detail = "from " + std::string(to_string(snap->row.state)) + ": " + c.reason();
        } else {
            out.action = ApplyAction::Unchanged;
            out.detail = "the locked row is " + std::string(to_string(c.cls)) +
                         (c.cls == RecoveryClass::Inconsistent ? " and already quarantined" : "");
        }
        txn.commit();
    } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != kLockNotAvailable) throw;
        out.action = ApplyAction::Busy;
        out.detail = "the row stayed locked by another transaction; nothing changed";
    }
    return out;
}

std::vector<JobRecord> RecoveryStore::quarantined() {
    pqxx::read_transaction txn(conn_, "quarantine_list");
    const auto rows = txn.exec(read_jobs(sql::kJobsQuarantined, false));
    txn.commit();
    std::vector<JobRecord> out;
    out.reserve(rows.size());
    for (const auto& r : rows) out.push_back(job_record_of(r));
    return out;
}

std::optional<JobDossier> RecoveryStore::dossier(store::JobId job, base::Instant now) {
    pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> txn(conn_, "quarantine_show");
    auto snap = read_one(txn, job, /*lock=*/false, now);
    if (!snap) return std::nullopt;
    JobDossier d;
    d.snapshot = std::move(*snap);
    for (const auto& r : txn.exec_params(sql::kReadEventsOfJob, job))
        d.events.push_back(*read_event(r, "", job));
    txn.commit();
    return d;
}

QuarantineResolution RecoveryStore::release(store::JobId job, const std::string& reason,
                                            const std::string& actor, base::Instant now) {
    return resolve(job, true, reason, actor, now);
}

QuarantineResolution RecoveryStore::fail(store::JobId job, const std::string& reason,
                                         const std::string& actor, base::Instant now) {
    return resolve(job, false, reason, actor, now);
}

QuarantineResolution RecoveryStore::resolve(store::JobId job, bool release,
                                            const std::string& reason, const std::string& actor,
                                            base::Instant now) {
    const std::string verb = release ? "released" : "failed";
    QuarantineResolution out;
    pqxx::work txn(conn_, release ? "quarantine_release" : "quarantine_fail");
    txn.exec(store::sql::kShortLockWait);
    const auto snap = read_one(txn, job, /*lock=*/true, now);
    if (!snap) {
        out.refusal = "no job " + std::to_string(job);
        return out;
    }
    const auto& row = snap->row;
    out.state = row.state;
    out.generation = row.generation;
    if (row.state != store::JobState::Quarantined) {
        out.refusal = "job " + std::to_string(job) + " is " + std::string(to_string(row.state)) +
                      ", not quarantined: only a job the recovery tool quarantined can be " + verb;
        return out;
    }
    if (release && snap->result) {
        out.refusal = "job " + std::to_string(job) + " has a published result (" +
                      describe(*snap->result) +
                      "): a pending job would be completed again and its result could not be "
                      "published beside this one; keep it quarantined or resolve it with "
                      "`quarantine fail`";
        return out;
    }
    // The highest generation the job ever reached, in the row, its log or its result: the
    // resolution is recorded at it, so that the next claim outranks every earlier holder.
    store::Generation g = std::max(row.generation, snap->events.max_generation);
    if (snap->result) g = std::max(g, snap->result->generation);
    const std::string detail = verb + " by operator: " + reason + " (was quarantined from " +
                               row.quarantined_from.value_or("?") + ": " +
                               row.quarantine_reason.value_or("") + ")";
    if (release) {
        const pqxx::result r =
            txn.exec_params(sql::kReleaseQuarantined.text, job, g, actor, now, detail);
        out.state = !r.empty() && r[0]["state"].as<std::string>() == "waiting"
                        ? store::JobState::Waiting
                        : store::JobState::Pending;
    } else {
        txn.exec_params(sql::kFailQuarantined.text, job, g, actor, now, detail,
                        "failed by operator: " + reason);
        out.state = store::JobState::Failed;
    }
    txn.commit();
    out.generation = g;
    return out;
}

}  // namespace aclaim::ops
