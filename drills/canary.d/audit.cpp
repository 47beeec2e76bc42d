#include "drills/canary.d/audit.hpp"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "common/store/event_kinds.hpp"
#include "drills/canary.d/stats.hpp"

namespace aclaim::drills {

using store::EventKind;

namespace {

constexpr const char* kEventsAfter = R"SQL(
SELECT e.id, e.job_id, e.generation, e.kind, aclaim_us(e.at), j.priority,
       aclaim_us(j.enqueued_at)
  FROM job_events e JOIN jobs j ON j.id = e.job_id
 WHERE e.org_id = $1 AND e.id > $2
 ORDER BY e.id
)SQL";

std::string job_text(const AuditEvent& e) {
    return "job " + std::to_string(e.job_id) + " generation " + std::to_string(e.generation);
}

}  // namespace

void AuditSlice::add(const AuditSlice& o) {
    displacement.insert(displacement.end(), o.displacement.begin(), o.displacement.end());
    duplicate_claims += o.duplicate_claims;
    stale_acceptances += o.stale_acceptances;
    returned += o.returned;
    unknown_jobs += o.unknown_jobs;
    evidence.insert(evidence.end(), o.evidence.begin(), o.evidence.end());
}

DisplacementSummary summarize_displacement(std::vector<std::int64_t> d) {
    DisplacementSummary s;
    if (d.empty()) return s;
    std::sort(d.begin(), d.end());
    s.claims = d.size();
    double sum = 0;
    std::size_t displaced = 0;
    for (auto x : d) {
        sum += static_cast<double>(x);
        displaced += x > 0;
    }
    s.mean = sum / static_cast<double>(d.size());
    s.p50 = quantile(d, 0.50);
    s.p99 = quantile(d, 0.99);
    s.max = d.back();
    s.displaced_share = static_cast<double>(displaced) / static_cast<double>(d.size());
    return s;
}

std::vector<AuditEvent> AuditFollower::read_after(pqxx::connection& conn, std::int64_t after) {
    pqxx::read_transaction txn(conn);
    std::vector<AuditEvent> events;
    for (const auto& row : txn.exec_params(kEventsAfter, org_, after)) {
        AuditEvent e;
        e.id = row[0].as<std::int64_t>();
        e.job_id = row[1].as<store::JobId>();
        e.generation = row[2].as<store::Generation>();
        e.kind = row[3].as<std::string>();
        e.at_us = row[4].as<base::Micros>();
        e.priority = row[5].as<int>();
        e.enqueued_us = row[6].as<base::Micros>();
        events.push_back(std::move(e));
    }
    return events;
}

AuditSlice AuditFollower::advance(pqxx::connection& conn) {
    AuditSlice out;
    const auto events = read_after(conn, settled_);
    std::int64_t seen = horizon_;
    std::vector<AuditEvent> settled;
    for (const auto& e : events) {
        seen = std::max(seen, e.id);
        if (e.id <= horizon_) settled.push_back(e);
    }
    horizon_ = seen;
    apply(settled, out);
    return out;
}

AuditSlice AuditFollower::drain(pqxx::connection& conn) {
    horizon_ = std::numeric_limits<std::int64_t>::max();
    return advance(conn);
}

void AuditFollower::apply(const std::vector<AuditEvent>& events, AuditSlice& out) {
    // The jobs each statement time claimed, so that a statement's claims leave the pending set
    // together, before any of them is measured.
    std::unordered_map<base::Micros, std::vector<store::JobId>> by_statement;
    for (const auto& e : events) {
        if (is(e.kind, EventKind::Claimed)) by_statement[e.at_us].push_back(e.job_id);
    }
    for (const auto& e : events) {
        if (is(e.kind, EventKind::Claimed)) {
            const auto group = by_statement.find(e.at_us);
            if (group != by_statement.end()) {
                for (const auto job : group->second) {
                    const auto it = jobs_.find(job);
                    if (it != jobs_.end() && it->second.state == State::Pending) {
                        pending_.erase(it->second.rank);
                    }
                }
                by_statement.erase(group);
            }
        }
        apply_one(e, out);
    }
}

void AuditFollower::apply_one(const AuditEvent& e, AuditSlice& out) {
    settled_ = std::max(settled_, e.id);
    if (is(e.kind, EventKind::Enqueued)) {
        Track t{Rank{-e.priority, e.enqueued_us, e.job_id}, State::Pending, 0};
        jobs_[e.job_id] = t;
        pending_.insert(t.rank);
        return;
    }
    const auto it = jobs_.find(e.job_id);
    if (it == jobs_.end()) {
        ++out.unknown_jobs;
        out.evidence.push_back(e.kind + " of " + job_text(e) + " whose enqueue is not in the log");
        return;
    }
    Track& t = it->second;
    const auto leave_pending = [&] {
        if (t.state == State::Pending) pending_.erase(t.rank);
    };
    if (is(e.kind, EventKind::Claimed)) {
        out.displacement.push_back(static_cast<std::int64_t>(pending_.order_of_key(t.rank)));
        if (t.state == State::Assigned) {
            ++out.duplicate_claims;
            out.evidence.push_back("duplicate claim: " + job_text(e) + " while generation " +
                                   std::to_string(t.generation) + " still held it");
        } else if (t.state == State::Done) {
            ++out.duplicate_claims;
            out.evidence.push_back("claim of a finished job: " + job_text(e));
        }
        leave_pending();
        t.state = State::Assigned;
        t.generation = e.generation;
    } else if (is(e.kind, EventKind::Completed)) {
        if (t.state != State::Assigned || e.generation != t.generation) {
            ++out.stale_acceptances;
            out.evidence.push_back(
                "stale acceptance: completion of " + job_text(e) +
                (t.state == State::Assigned
                     ? " while generation " + std::to_string(t.generation) + " held it"
                     : " that no lease held"));
        }
        leave_pending();
        t.state = State::Done;
    } else if (store::is_one_of(e.kind, {EventKind::Failed, EventKind::Discarded,
                                         EventKind::Cancelled, EventKind::Quarantined})) {
        leave_pending();
        t.state = State::Done;
    } else if (store::is_one_of(e.kind, {EventKind::Released, EventKind::Reclaimed,
                                         EventKind::Unquarantined, EventKind::Retried})) {
        if (t.state != State::Pending) pending_.insert(t.rank);
        t.state = State::Pending;
        ++out.returned;
    }
}

ops::CheckReport check_organization(pqxx::connection& conn, store::OrgId org) {
    ops::History all = ops::load_history(conn);
    ops::History mine;
    std::unordered_set<store::JobId> ours;
    for (auto& j : all.jobs) {
        if (j.org_id != org) continue;
        ours.insert(j.id);
        mine.jobs.push_back(std::move(j));
    }
    // An event or result of one of our jobs filed under another organization is exactly what the
    // SameOrganization invariant looks for, so those are kept too.
    for (auto& e : all.events) {
        if (e.org_id == org || ours.count(e.job_id)) mine.events.push_back(std::move(e));
    }
    for (auto& r : all.results) {
        if (r.org_id == org || ours.count(r.job_id)) mine.results.push_back(std::move(r));
    }
    return ops::check(mine);
}

}  // namespace aclaim::drills
