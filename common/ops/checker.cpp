#include "common/ops/checker.hpp"

#include <cstdlib>
#include <functional>
#include <set>
#include <unordered_map>
#include <utility>

#include "common/base/enum_names.hpp"
#include "common/ops/aging_check.hpp"
#include "common/ops/checker_sql.hpp"
#include "common/ops/rate_check.hpp"
#include "common/ops/schedule_sql.hpp"
#include "common/store/event_kinds.hpp"
#include "common/store/pg_time.hpp"

namespace aclaim::ops {

constexpr base::EnumNames<Invariant, 20> kInvariantNames{
    {"single_completion",     "completion_is_current",
     "generations_increase",  "leases_disjoint",
     "nothing_lost",          "result_matches_row",
     "same_organization",     "claim_after_run_at",
     "paused_queue_idle",     "limit_respected",
     "ended_stays_ended",     "pruned_is_absent",
     "pruned_was_finished",   "schedule_tick_once",
     "checkpoint_is_current", "rate_respected",
     "park_finished_once",    "aging_bound_kept",
     "dependencies_first",    "excluded_never_completed"}};
static_assert(kInvariantNames.covers(Invariant::ExcludedNeverCompleted));

std::string_view to_string(Invariant i) {
    return kInvariantNames(i);
}

namespace {

std::string describe(const store::AuditEvent& e) {
    return "event " + std::to_string(e.id) + " " + e.kind + " gen " + std::to_string(e.generation) +
           (e.worker.empty() ? "" : " by " + e.worker) + " at " +
           std::to_string(base::to_micros(e.at));
}

/// Events that end a lease: after one of them the job may be claimed again.
bool ends_lease(const store::AuditEvent& e) {
    using K = store::EventKind;
    return store::is_one_of(e.kind, {K::Reclaimed, K::Released, K::Completed, K::Failed,
                                     K::Quarantined, K::Unquarantined, K::Discarded, K::Cancelled});
}

/// The worker name aclaim_finish_parked (schema/definitions/functions/aclaim_finish_parked.sql)
/// logs the outside system's outcome under.
constexpr std::string_view kCallbackWorker = "callback";

/// An event that is the outcome of a parked job's callback (a refused token is 'rejected').
bool finishes_park(const store::AuditEvent& e) {
    return e.worker == kCallbackWorker && !store::is(e.kind, store::EventKind::Rejected);
}

/// Events after which the job waits for its run_at: an enqueue with a delay, or a retry with a
/// backoff (the enqueue functions of schema/definitions/functions/ and kRetryDetail of
/// common/store/shared_sql.hpp write these details).
bool schedules(const store::AuditEvent& e) {
    if (store::is(e.kind, store::EventKind::Enqueued))
        return e.detail.find("; run at ") != std::string::npos;
    return store::is_one_of(e.kind, {store::EventKind::Released, store::EventKind::Reclaimed}) &&
           e.detail.find("; retry ") != std::string::npos &&
           e.detail.find(" now") == std::string::npos;
}

/// Events that end a job for good, until an operator revives it.
bool ends_job(const store::AuditEvent& e) {
    return store::is_one_of(e.kind, {store::EventKind::Cancelled, store::EventKind::Discarded,
                                     store::EventKind::Failed});
}

/// The max_assigned a queue_events 'configured' detail sets: nullopt when it does not name it,
/// 0 when it clears the limit.
std::optional<int> configured_limit(const std::string& detail) {
    const std::string key = "max_assigned=";
    const auto at = detail.find(key);
    if (at == std::string::npos) return std::nullopt;
    return std::atoi(detail.c_str() + at + key.size());
}

/// Where the remaining history of a pruned job left it: "finished" unless its last event that
/// moves the job says it was pending, assigned or quarantined. An operator's resolution of a
/// quarantine ('unquarantined') may have failed it, so it counts as finished.
std::optional<std::string> unfinished_at_prune(
    const std::vector<const store::AuditEvent*>& events) {
    const store::AuditEvent* last = nullptr;
    for (const store::AuditEvent* e : events) {
        if (!store::is_one_of(e->kind, {store::EventKind::Rejected, store::EventKind::Renewed}))
            last = e;
    }
    if (!last) return std::nullopt;
    const std::string& k = last->kind;
    if (store::is_one_of(
            k, {store::EventKind::Completed, store::EventKind::Failed, store::EventKind::Discarded,
                store::EventKind::Cancelled, store::EventKind::Unquarantined}))
        return std::nullopt;
    if (store::is(k, store::EventKind::Claimed)) return "assigned";
    if (store::is(k, store::EventKind::Quarantined)) return "quarantined";
    return "waiting";
}

/// The queue checks that need the whole history in time order: no claim while the queue is
/// paused, and no more leases out than its limit at any claim.
void check_queues(const History& h, const std::unordered_map<store::JobId, const JobRow*>& rows,
                  const std::function<void(Invariant, store::JobId, std::string)>& violate) {
    using QueueKey = std::pair<store::OrgId, std::string>;
    std::map<QueueKey, std::vector<const QueueEvent*>> changes;
    for (const auto& q : h.queue_events) changes[{q.org_id, q.queue}].push_back(&q);
    // The queue's pause state and limit in force at `at`.
    auto state_at = [&](const QueueKey& key, base::Instant at, base::Duration resume_tolerance) {
        bool paused = false;
        int limit = 0;
        const auto found = changes.find(key);
        if (found == changes.end()) return std::pair{paused, limit};
        for (const QueueEvent* q : found->second) {
            // A pause covers the claims stamped after it (one stamped the same instant committed
            // before the pause took the queue lock); a resume, those up to the tolerance before.
            const bool resume = store::is(q->kind, store::QueueEventKind::Resumed);
            if (resume ? q->at > at + resume_tolerance : q->at >= at) break;
            if (store::is(q->kind, store::QueueEventKind::Paused)) paused = true;
            if (resume) paused = false;
            if (store::is(q->kind, store::QueueEventKind::Configured)) {
                if (const auto l = configured_limit(q->detail)) limit = *l;
            }
        }
        return std::pair{paused, limit};
    };
    std::map<QueueKey, int> out;  // leases out per queue, by event order
    std::unordered_map<store::JobId, store::Generation>
        holding;  // job -> generation of its open claim
    for (const auto& e : h.events) {
        const auto row = rows.find(e.job_id);
        if (row == rows.end()) continue;
        const QueueKey key{row->second->org_id, row->second->queue};
        if (store::is(e.kind, store::EventKind::Claimed)) {
            const auto [paused, limit] = state_at(key, e.at, kResumeTolerance);
            if (paused) {
                violate(Invariant::PausedQueueIdle, e.job_id,
                        describe(e) + " while queue " + key.second + " was paused");
            }
            const int now_out = ++out[key];
            holding[e.job_id] = e.generation;
            if (limit > 0 && now_out > limit) {
                violate(Invariant::LimitRespected, e.job_id,
                        describe(e) + " made " + std::to_string(now_out) + " leases out of queue " +
                            key.second + ", whose limit is " + std::to_string(limit));
            }
        } else if (ends_lease(e) || store::is(e.kind, store::EventKind::Parked)) {
            // A parked job holds no lease: it does not count against max_assigned (the claim's
            // limit counts assigned rows).
            const auto held = holding.find(e.job_id);
            if (held != holding.end() && held->second == e.generation) {
                holding.erase(held);
                --out[key];
            }
        }
    }
}

/// No job was claimed before each of its dependencies ended as its edge requires: completed, or
/// under the policy 'run', ended in any way. The first claim of the dependent must come after
/// (in log order: the claim's transaction began after the unblocking one committed, so its event
/// has the higher id) the first such ending of the dependency. A dependency whose whole history
/// is gone (pruned, or its partition archived) proves nothing either way and is passed over.
void check_dependencies(const History& h, const PrunedIds& pruned,
                        const std::function<void(Invariant, store::JobId, std::string)>& violate) {
    if (h.dependencies.empty()) return;
    std::unordered_map<store::JobId, const store::AuditEvent*> first_claim;
    std::unordered_map<store::JobId, const store::AuditEvent*> first_completion;
    std::unordered_map<store::JobId, const store::AuditEvent*> first_end;
    std::set<store::JobId> logged;
    for (const auto& e : h.events) {
        logged.insert(e.job_id);
        if (store::is(e.kind, store::EventKind::Claimed)) first_claim.emplace(e.job_id, &e);
        if (store::is(e.kind, store::EventKind::Completed)) first_completion.emplace(e.job_id, &e);
        if (store::is(e.kind, store::EventKind::Completed) || ends_job(e))
            first_end.emplace(e.job_id, &e);
    }
    for (const auto& d : h.dependencies) {
        const auto claim = first_claim.find(d.job_id);
        if (claim == first_claim.end()) continue;
        if (!logged.contains(d.depends_on) || pruned.contains(d.depends_on)) continue;
        const auto& ends = d.policy == "run" ? first_end : first_completion;
        const auto end = ends.find(d.depends_on);
        if (end == ends.end() || end->second->id > claim->second->id) {
            violate(Invariant::DependenciesFirst, d.job_id,
                    describe(*claim->second) + " but its dependency " +
                        std::to_string(d.depends_on) + " (policy " + d.policy + ") " +
                        (end == ends.end() ? std::string("never ended so")
                                           : "ended so only at " + describe(*end->second)));
        }
    }
}

/// No job was completed by a reviewer it excludes (job_exclusions, schema/baseline/tables.sql):
/// the accepted completions ('completed' events) of a job are by none of the reviewers it names,
/// and by nobody who has a 'completed' event on a job it names. A named job whose history is gone
/// proves nothing and is passed over (pruning wrote its completer as a named reviewer).
void check_exclusions(const History& h,
                      const std::function<void(Invariant, store::JobId, std::string)>& violate) {
    if (h.exclusions.empty()) return;
    std::unordered_map<store::JobId, std::vector<const store::AuditEvent*>> completions;
    for (const auto& e : h.events) {
        if (store::is(e.kind, store::EventKind::Completed)) completions[e.job_id].push_back(&e);
    }
    for (const auto& x : h.exclusions) {
        const auto done = completions.find(x.job_id);
        if (done == completions.end()) continue;
        std::vector<std::pair<std::string, std::string>> banned;  // reviewer, why
        if (!x.excluded_key.empty()) {
            banned.emplace_back(x.excluded_key, "it excludes reviewer " + x.excluded_key);
        } else if (const auto named = completions.find(x.completer_of);
                   named != completions.end()) {
            for (const store::AuditEvent* c : named->second) {
                banned.emplace_back(c->worker, "it excludes whoever completed job " +
                                                   std::to_string(x.completer_of) + ", and " +
                                                   describe(*c) + " there");
            }
        }
        for (const store::AuditEvent* c : done->second) {
            for (const auto& [reviewer, why] : banned) {
                if (c->worker == reviewer) {
                    violate(Invariant::ExcludedNeverCompleted, x.job_id,
                            describe(*c) + " but " + why);
                }
            }
        }
    }
}

}  // namespace

CheckReport check(const History& h) {
    CheckReport report;
    report.jobs = h.jobs.size();
    report.events = h.events.size();
    auto violate = [&](Invariant inv, store::JobId job, std::string evidence) {
        report.violations.push_back({inv, job, std::move(evidence)});
    };

    std::unordered_map<store::JobId, const JobRow*> rows;
    for (const auto& j : h.jobs) {
        rows[j.id] = &j;
        ++report.states[j.state];
    }
    std::unordered_map<store::JobId, std::vector<const store::AuditEvent*>> by_job;
    for (const auto& e : h.events) by_job[e.job_id].push_back(&e);
    std::unordered_map<store::JobId, std::vector<const ResultRecord*>> results;
    for (const auto& r : h.results) results[r.job_id].push_back(&r);
    const PrunedIds pruned(h.pruned);
    report.pruned = pruned.count();

    for (const auto& [job, events] : by_job) {
        const auto row_it = rows.find(job);
        const JobRow* row = row_it == rows.end() ? nullptr : row_it->second;
        const bool enqueued = store::is(events.front()->kind, store::EventKind::Enqueued);
        if (!row && pruned.contains(job)) {
            // Removed by retention: absent, not lost. Its history may be partial (older
            // partitions archived), so only how it ended is checked.
            ++report.pruned_with_history;
            if (const auto how = unfinished_at_prune(events)) {
                violate(Invariant::PrunedWasFinished, job,
                        "the prune ledger removed the job, but its history leaves it " + *how +
                            ": last " + describe(*events.back()));
            }
            continue;
        }
        if (!row) {
            // A refused request for a job that never existed is logged by nobody; any other event
            // names a job that must still be there.
            violate(Invariant::NothingLost, job,
                    "the log has " + describe(*events.front()) + " but the job row is missing");
            continue;
        }
        store::Generation last_claim = 0;
        const store::AuditEvent* open_claim = nullptr;  // the claim whose lease has not ended yet
        const store::AuditEvent* waiting = nullptr;    // the event that scheduled the job for later
        const store::AuditEvent* ended = nullptr;      // the event that ended the job
        const store::AuditEvent* open_park = nullptr;  // the park whose callback has not come yet
        std::vector<const store::AuditEvent*> completions;
        for (const store::AuditEvent* e : events) {
            if (e->org_id != row->org_id) {
                violate(Invariant::SameOrganization, job,
                        describe(*e) + " is in organization " + std::to_string(e->org_id) +
                            " but the job belongs to " + std::to_string(row->org_id));
            }
            if (store::is_one_of(e->kind,
                                 {store::EventKind::Claimed, store::EventKind::Completed}) &&
                ended) {
                violate(Invariant::EndedStaysEnded, job,
                        describe(*e) + " after " + describe(*ended) + " with no retry between");
            }
            if (store::is(e->kind, store::EventKind::Claimed) && waiting) {
                violate(Invariant::ClaimAfterRunAt, job,
                        describe(*e) + " but the job was scheduled for later by " +
                            describe(*waiting) + " and never came due");
            }
            if (schedules(*e)) waiting = e;
            if (store::is_one_of(e->kind, {store::EventKind::Due, store::EventKind::Retried,
                                           store::EventKind::Cancelled})) {
                waiting = nullptr;
            }
            if (ends_job(*e)) ended = e;
            if (store::is_one_of(e->kind,
                                 {store::EventKind::Retried, store::EventKind::Unquarantined}))
                ended = nullptr;
            if (store::is(e->kind, store::EventKind::Claimed)) {
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
            } else if (store::is(e->kind, store::EventKind::Completed)) {
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
            } else if (store::is(e->kind, store::EventKind::Checkpoint)) {
                // A checkpoint is fenced as a completion is: only the holder of the latest claim
                // may save one, while its lease lasts (schema/baseline/tables.sql).
                if (e->generation != last_claim || !open_claim) {
                    violate(
                        Invariant::CheckpointIsCurrent, job,
                        describe(*e) + " but " +
                            (e->generation != last_claim
                                 ? "the latest claim was generation " + std::to_string(last_claim)
                                 : "the lease of generation " + std::to_string(last_claim) +
                                       " had already ended"));
                }
            } else if (store::is(e->kind, store::EventKind::Parked)) {
                // Only the holder of the latest claim parks a job, while its lease lasts (a PARK
                // re-sent before the deadline parks it again: the same park).
                const bool reparked = open_park && open_park->generation == e->generation;
                if (!reparked && (e->generation != last_claim || !open_claim)) {
                    violate(Invariant::ParkFinishedOnce, job,
                            describe(*e) + " but the latest claim was generation " +
                                std::to_string(last_claim) +
                                (open_claim ? "" : ", whose lease had already ended"));
                }
                open_park = e;
            } else if (store::is(e->kind, store::EventKind::Rejected)) {
                ++report.rejections;
            } else if (store::is(e->kind, store::EventKind::Reclaimed)) {
                ++report.reclaims;
            }
            if (finishes_park(*e)) {
                if (!open_park || open_park->generation != e->generation) {
                    violate(Invariant::ParkFinishedOnce, job,
                            describe(*e) + (open_park
                                                ? " but the open park is of " + describe(*open_park)
                                                : " but no park of the job was open"));
                }
                open_park = nullptr;
            }
            if (ends_lease(*e) && open_claim && e->generation == open_claim->generation) {
                open_claim = nullptr;
                open_park = nullptr;
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
        if (pruned.contains(j.id)) {
            violate(
                Invariant::PrunedIsAbsent, j.id,
                "the prune ledger removed the job, but its row is still there (" + j.state + ")");
        }
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
        if (!rows.count(job) && pruned.contains(job)) {
            violate(Invariant::PrunedIsAbsent, job,
                    "the prune ledger removed the job, but its result is still published");
        } else if (!rows.count(job)) {
            violate(Invariant::NothingLost, job,
                    "a result is published for a job that does not exist");
        }
    }
    check_queues(h, rows, violate);
    check_rates(h, rows, violate);
    check_aging(h, rows, violate);
    check_dependencies(h, pruned, violate);
    check_exclusions(h, violate);
    // Each scheduler records the ticks it enqueued; two rows for one tick are two jobs for it.
    std::map<std::pair<std::int64_t, base::Instant>, store::JobId> ticks;
    for (const auto& t : h.schedule_ticks) {
        const auto [at, first] = ticks.emplace(std::pair{t.schedule_id, t.tick}, t.job_id);
        if (!first) {
            violate(Invariant::ScheduleTickOnce, t.job_id,
                    "tick " + std::to_string(base::to_micros(t.tick)) + " of schedule " +
                        std::to_string(t.schedule_id) + " was enqueued as job " +
                        std::to_string(at->second) + " already");
        }
    }
    return report;
}

History load_history(pqxx::connection& conn) {
    History h;
    // One snapshot for all three reads, so that a system still running is seen consistently.
    pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> txn(conn, "check");
    for (const auto& r : txn.exec(sql::kCheckJobs)) {
        JobRow j;
        j.id = r["id"].as<store::JobId>();
        j.org_id = r["org_id"].as<store::OrgId>();
        j.state = r["state"].as<std::string>();
        j.generation = r["generation"].as<store::Generation>();
        if (!r["result_ref"].is_null()) j.result_ref = r["result_ref"].as<std::string>();
        if (!r["quarantine_reason"].is_null())
            j.quarantine_reason = r["quarantine_reason"].as<std::string>();
        j.queue = r["queue"].as<std::string>();
        JobPriority& p = h.priorities[j.id];
        p.priority = r["priority"].as<int>();
        if (!r["base_priority"].is_null()) p.base_priority = r["base_priority"].as<int>();
        h.jobs.push_back(std::move(j));
    }
    for (const auto& r : txn.exec(sql::kCheckEvents)) {
        h.events.push_back({r["id"].as<std::int64_t>(), r["job_id"].as<store::JobId>(),
                            r["org_id"].as<store::OrgId>(), r["generation"].as<store::Generation>(),
                            r["kind"].as<std::string>(), r["worker"].as<std::string>(),
                            r["at_us"].as<base::Instant>(), r["detail"].as<std::string>()});
    }
    for (const auto& r : txn.exec(sql::kCheckResults)) {
        h.results.push_back(result_record_of(r));
    }
    for (const auto& r : txn.exec(sql::kCheckQueueEvents)) {
        h.queue_events.push_back({r["org_id"].as<store::OrgId>(), r["queue"].as<std::string>(),
                                  r["kind"].as<std::string>(), r["at_us"].as<base::Instant>(),
                                  r["detail"].as<std::string>()});
    }
    h.pruned = load_pruned(txn);
    for (const auto& r : txn.exec(sql::kCheckScheduleTicks)) {
        h.schedule_ticks.push_back(
            {r["org_id"].as<store::OrgId>(), r["schedule_id"].as<std::int64_t>(),
             r["tick_us"].as<base::Instant>(), r["job_id"].as<store::JobId>()});
    }
    for (const auto& r : txn.exec(sql::kCheckDependencies)) {
        h.dependencies.push_back({r["job_id"].as<store::JobId>(),
                                  r["depends_on"].as<store::JobId>(),
                                  r["policy"].as<std::string>()});
    }
    for (const auto& r : txn.exec(sql::kCheckExclusions)) {
        h.exclusions.push_back({r["job_id"].as<store::JobId>(), r["excluded_key"].as<std::string>(),
                                r["completer_of"].as<store::JobId>()});
    }
    return h;
}

}  // namespace aclaim::ops
