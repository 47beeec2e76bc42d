#include "common/ops/checker.hpp"

#include <unordered_map>

#include "common/store/pg_time.hpp"

namespace aclaim::common {

std::string_view to_string(Invariant i) {
    switch (i) {
        case Invariant::SingleCompletion:
            return "single_completion";
        case Invariant::CompletionIsCurrent:
            return "completion_is_current";
        case Invariant::GenerationsIncrease:
            return "generations_increase";
        case Invariant::LeasesDisjoint:
            return "leases_disjoint";
        case Invariant::NothingLost:
            return "nothing_lost";
        case Invariant::ResultMatchesRow:
            return "result_matches_row";
        case Invariant::SameOrganization:
            return "same_organization";
    }
    return "unknown";
}

namespace {

/// Events that end a lease: after one of them the job may be claimed again.
bool ends_lease(const AuditEvent& e) {
    return e.kind == "reclaimed" || e.kind == "released" || e.kind == "completed" ||
           e.kind == "failed" || e.kind == "quarantined" || e.kind == "unquarantined";
}

std::string describe(const AuditEvent& e) {
    return "event " + std::to_string(e.id) + " " + e.kind + " gen " + std::to_string(e.generation) +
           (e.worker.empty() ? "" : " by " + e.worker) + " at " + std::to_string(to_micros(e.at));
}

}  // namespace

CheckReport check(const History& h) {
    CheckReport report;
    report.jobs = h.jobs.size();
    report.events = h.events.size();
    auto violate = [&](Invariant inv, JobId job, std::string evidence) {
        report.violations.push_back({inv, job, std::move(evidence)});
    };

    std::unordered_map<JobId, const JobRow*> rows;
    for (const auto& j : h.jobs) {
        rows[j.id] = &j;
        ++report.states[j.state];
    }
    std::unordered_map<JobId, std::vector<const AuditEvent*>> by_job;
    for (const auto& e : h.events) by_job[e.job_id].push_back(&e);
    std::unordered_map<JobId, std::vector<const ResultRecord*>> results;
    for (const auto& r : h.results) results[r.job_id].push_back(&r);

    for (const auto& [job, events] : by_job) {
        const auto row_it = rows.find(job);
        const JobRow* row = row_it == rows.end() ? nullptr : row_it->second;
        const bool enqueued = events.front()->kind == "enqueued";
        if (!row) {
            // A refused request for a job that never existed is logged by nobody; any other event
            // names a job that must still be there.
            violate(Invariant::NothingLost, job,
                    "the log has " + describe(*events.front()) + " but the job row is missing");
            continue;
        }
        Generation last_claim = 0;
        const AuditEvent* open_claim = nullptr;  // the claim whose lease has not ended yet
        std::vector<const AuditEvent*> completions;
        for (const AuditEvent* e : events) {
            if (e->org_id != row->org_id) {
                violate(Invariant::SameOrganization, job,
                        describe(*e) + " is in organization " + std::to_string(e->org_id) +
                            " but the job belongs to " + std::to_string(row->org_id));
            }
            if (e->kind == "claimed") {
                if (e->generation <= last_claim) {
                    violate(Invariant::GenerationsIncrease, job,
                            describe(*e) + " follows a claim at generation " +
                                std::to_string(last_claim));
                }
                if (open_claim) {
                    violate(Invariant::LeasesDisjoint, job,
                            describe(*e) + " while the lease of " + describe(*open_claim) +
                                " had not ended");
                }
                last_claim = std::max(last_claim, e->generation);
                open_claim = e;
            } else if (e->kind == "completed") {
                ++report.accepted_completions;
                completions.push_back(e);
                if (e->generation != last_claim) {
                    violate(Invariant::CompletionIsCurrent, job,
                            describe(*e) + " but the latest claim was generation " +
                                std::to_string(last_claim));
                } else if (!open_claim) {
                    // The latest claim, but its lease had already been reclaimed, released or
                    // failed: a late completion from a holder that lost the job before anyone
                    // claimed it again, which the generation alone cannot tell from a live one.
                    violate(Invariant::CompletionIsCurrent, job,
                            describe(*e) + " but the lease of generation " +
                                std::to_string(last_claim) + " had already ended");
                }
            } else if (e->kind == "rejected") {
                ++report.rejections;
            } else if (e->kind == "reclaimed") {
                ++report.reclaims;
            }
            if (ends_lease(*e) && open_claim && e->generation == open_claim->generation) {
                open_claim = nullptr;
            }
        }
        if (completions.size() > 1) {
            violate(Invariant::SingleCompletion, job,
                    std::to_string(completions.size()) + " accepted completions: " +
                        describe(*completions[0]) + "; " + describe(*completions[1]));
        }
        if (!enqueued && row) {
            violate(Invariant::NothingLost, job,
                    "the job's history does not begin with its enqueue: first is " +
                        describe(*events.front()));
        }
    }

    for (const auto& j : h.jobs) {
        if (!by_job.count(j.id)) {
            violate(Invariant::NothingLost, j.id, "job row has no history in job_events");
        }
        if (j.state == "quarantined" && (!j.quarantine_reason || j.quarantine_reason->empty())) {
            violate(Invariant::NothingLost, j.id, "quarantined without a recorded reason");
        }
        const auto rs = results.find(j.id);
        if (j.state == "completed") {
            if (rs == results.end()) {
                violate(Invariant::ResultMatchesRow, j.id, "completed but no result was published");
            } else if (rs->second[0]->generation != j.generation ||
                       rs->second[0]->result_ref != j.result_ref.value_or("")) {
                violate(Invariant::ResultMatchesRow, j.id,
                        "row completed at generation " + std::to_string(j.generation) + " with '" +
                            j.result_ref.value_or("") + "' but the result says generation " +
                            std::to_string(rs->second[0]->generation) + " '" +
                            rs->second[0]->result_ref + "'");
            }
        } else if (rs != results.end() && j.state != "quarantined") {
            violate(Invariant::ResultMatchesRow, j.id,
                    "a result is published at generation " +
                        std::to_string(rs->second[0]->generation) + " but the job is " + j.state);
        }
        if (rs != results.end() && rs->second[0]->org_id != j.org_id) {
            violate(Invariant::SameOrganization, j.id,
                    "result published in organization " + std::to_string(rs->second[0]->org_id) +
                        " for a job of organization " + std::to_string(j.org_id));
        }
    }
    for (const auto& [job, rs] : results) {
        if (!rows.count(job)) {
            violate(Invariant::NothingLost, job,
                    "a result is published for a job that does not exist");
        }
    }
    return report;
}

History load_history(pqxx::connection& conn) {
    History h;
    // One snapshot for all three reads, so that a system still running is seen consistently.
    pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> txn(conn, "check");
    for (const auto& r : txn.exec("SELECT id, org_id, state, generation, result_ref, "
                                  "quarantine_reason FROM jobs ORDER BY id")) {
        JobRow j;
        j.id = r["id"].as<JobId>();
        j.org_id = r["org_id"].as<OrgId>();
        j.state = r["state"].as<std::string>();
        j.generation = r["generation"].as<Generation>();
        if (!r["result_ref"].is_null()) j.result_ref = r["result_ref"].as<std::string>();
        if (!r["quarantine_reason"].is_null())
            j.quarantine_reason = r["quarantine_reason"].as<std::string>();
        h.jobs.push_back(std::move(j));
    }
    for (const auto& r :
         txn.exec("SELECT id, job_id, org_id, generation, kind, coalesce(worker, '') AS worker, "
                  "aclaim_us(at) AS at_us, detail FROM job_events ORDER BY id")) {
        h.events.push_back({r["id"].as<std::int64_t>(), r["job_id"].as<JobId>(),
                            r["org_id"].as<OrgId>(), r["generation"].as<Generation>(),
                            r["kind"].as<std::string>(), r["worker"].as<std::string>(),
                            r["at_us"].as<Instant>(), r["detail"].as<std::string>()});
    }
    for (const auto& r :
         txn.exec(std::string("SELECT ") + sql::kResultColumns + " FROM job_results")) {
        h.results.push_back(result_record_of(r));
    }
    return h;
}

}  // namespace aclaim::common
