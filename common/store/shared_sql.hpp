#pragma once

// What several statements share: the scope a row-security transaction sees, the outcome and the
// dependents every statement that can end a job records and settles, and how a job that lost an
// attempt goes on. Time arrives as $n microseconds since the epoch and is converted by
// aclaim_ts(); nothing here calls now().

#include <string>
#include <string_view>

#include "common/store/job_states.hpp"
#include "common/store/statement.hpp"

namespace aclaim::store::sql {

/// The role a row-security store acts as (schema/baseline/tables.sql): row-level security
/// applies to it, keyed on the transaction's aclaim.org_id.
inline constexpr const char* kRowSecurityRole = "aclaim_coordinator";
/// The aclaim.org_id value that sees every organization: the reaper, and the read of a row's
/// authority that diagnoses a refused transition.
inline constexpr const char* kAllOrganizations = "system";

/// $1 text: the organization (or kAllOrganizations) the rest of the transaction may see.
inline const Statement kScope{
    "aclaim_scope", "SELECT set_config('aclaim.org_id', $1::text, true)", {"org text"}};

/// What an UPDATE of `jobs j` that may end jobs returns for record_outcomes: the row afterwards.
inline constexpr const char* kOutcomeReturning =
    "j.id, j.org_id, j.queue, j.generation, j.attempts, j.state, j.result_ref, j.last_error, "
    "j.dedupe_key, j.completed_at, j.has_dependents";

/// The CTE body that records the outcome of each row of the CTE `from` (which returns
/// kOutcomeReturning) that ended its job: completed with its result, failed, discarded or
/// cancelled; rows that went back to a queue record nothing. Every statement that can end a job
/// includes it, so the outcome commits with the transition (schema/baseline/tables.sql, and
/// docs/integration.md for how consumer groups read it); a unit test holds every statement that
/// sets a terminal state to it. Each row of an organization that has a consumer group notifies
/// aclaim_outcomes with its organization only: PostgreSQL delivers one notification per payload
/// per transaction, and a consumer treats it as "look again", never as the outcome. Organizations
/// without a group have no consumer to wake, and their transitions skip NOTIFY, whose
/// cluster-wide commit lock is held through the WAL flush and makes notifying transactions commit
/// one at a time (docs/performance.md). A group created while a transition is under way is not
/// seen by it: that one outcome reaches the group's consumer at its next bounded look.
inline std::string record_outcomes(std::string_view from) {
    return compose(R"SQL(
    INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts, result_ref,
                              error, dedupe_key, at)
    SELECT org_id, id, state, queue, generation, attempts,
           CASE WHEN state = 'completed' THEN result_ref END,
           CASE WHEN state <> 'completed' THEN last_error END, dedupe_key, completed_at
      FROM {FROM} WHERE state IN ({FINISHED})
    RETURNING CASE WHEN EXISTS (SELECT 1 FROM result_groups g WHERE g.org_id = job_outcomes.org_id)
                   THEN pg_notify('aclaim_outcomes', org_id::text) END
)SQL",
                   {{"FROM", from}, {"FINISHED", sql_state_list(kFinishedStates)}});
}

/// The CTE body that settles the dependents (schema/baseline/tables.sql) of the rows of the
/// CTE `from` (which returns kOutcomeReturning) that ended their job, {NOW} being the parameter of
/// now: one call of aclaim_dependencies_settled for the statement, in its transaction, so that
/// the accepted completion of a job's last dependency makes it claimable when it commits and a
/// refused one (no row) unblocks nothing. Only rows with has_dependents are passed; when there are
/// none the arrays are NULL and the STRICT function is not called: a job that nothing depends on
/// reads and writes nothing more (docs/performance.md). The statement's result must name the CTE
/// (settled_column) so that it runs; every statement that includes record_outcomes includes this.
inline std::string settle_dependents(std::string_view from, std::string_view now) {
    return compose(R"SQL(
    SELECT aclaim_dependencies_settled({NOW}, array_agg(id), array_agg(state)) AS changed
      FROM {FROM} WHERE has_dependents AND state IN ({FINISHED})
)SQL",
                   {{"NOW", now}, {"FROM", from}, {"FINISHED", sql_state_list(kFinishedStates)}});
}

/// The result column that runs the CTE `settled` (settle_dependents): evaluated once, and only
/// when the statement returns a row.
inline constexpr const char* kSettledColumn = "(SELECT changed FROM settled) AS settled";

/// What follows `RETURNING ` in a CTE `from` that updates `jobs j` and may end its job: the
/// outcome columns (kOutcomeReturning), then the CTEs `recorded` (record_outcomes) and `settled`
/// (settle_dependents at `now`), up to the ", " before the statement's next CTE. The statement's
/// result names kSettledColumn.
inline std::string outcome_settled(std::string_view from, std::string_view now) {
    return std::string(kOutcomeReturning) + "\n), recorded AS (" + record_outcomes(from) +
           "), settled AS (" + settle_dependents(from, now) + "), ";
}

/// The SET clauses of a release, by its holder or an operator: back to pending, unheld, the
/// attempt given back.
inline constexpr const char* kReleaseSet =
    "state = 'pending', assignee = NULL, claimed_at = NULL, lease_expires_at = NULL,\n"
    "           attempts = attempts - 1";

/// How a job that lost an attempt goes on, as SET clauses over the row `j` being updated (its
/// values before the update) and the time parameter {NOW}: with attempts left it waits out its
/// backoff (scheduled, or pending again when the delay is zero), and with none left it is
/// discarded, keeping its last holder. {RETRY} is the condition that the attempt may be retried.
inline std::string retry_or_discard(std::string_view retry, std::string_view now) {
    return compose(R"SQL(
           state = CASE WHEN NOT ({RETRY}) THEN 'failed'
                        WHEN j.attempts >= j.max_attempts THEN 'discarded'
                        WHEN aclaim_retry_delay(j.id, j.attempts, j.backoff_base_us,
                                                j.backoff_cap_us) > 0 THEN 'scheduled'
                        ELSE 'pending' END,
           run_at = CASE WHEN ({RETRY}) AND j.attempts < j.max_attempts
                         THEN aclaim_ts({NOW} + aclaim_retry_delay(j.id, j.attempts,
                                                                   j.backoff_base_us,
                                                                   j.backoff_cap_us))
                         ELSE j.run_at END,
           assignee = CASE WHEN ({RETRY}) AND j.attempts < j.max_attempts THEN NULL
                           ELSE j.assignee END,
           claimed_at = CASE WHEN ({RETRY}) AND j.attempts < j.max_attempts THEN NULL
                             ELSE j.claimed_at END,
           completed_at = CASE WHEN ({RETRY}) AND j.attempts < j.max_attempts THEN NULL
                               ELSE aclaim_ts({NOW}) END,
           lease_expires_at = NULL)SQL",
                   {{"RETRY", retry}, {"NOW", now}});
}

/// The audit kind and the wake after retry_or_discard, for a CTE `r` returning id, org_id,
/// queue, generation, state and run_at_us: 'released' back to the queue (woken, or scheduled
/// for the promoters), 'discarded' or 'failed'.
inline constexpr const char* kRetryEventKind =
    "CASE state WHEN 'discarded' THEN 'discarded' WHEN 'failed' THEN 'failed' ELSE {BACK} END";
inline constexpr const char* kRetryWake =
    "CASE state WHEN 'pending' THEN aclaim_wake(org_id, queue) "
    "WHEN 'scheduled' THEN aclaim_scheduled(run_at_us) END";

inline std::string retry_event_kind(std::string_view back) {
    return compose(kRetryEventKind, {{"BACK", back}});
}

/// What the audit detail says of where the job went: "; retry 2 of 3 at <time>" (scheduled),
/// "; retry 2 of 3 now" (pending: no backoff) or "; attempt 3 of 3 was the last: discarded". The
/// checker reads the first form. For a CTE `r` as above with attempts and max_attempts.
inline constexpr const char* kRetryDetail =
    "CASE state WHEN 'discarded' THEN '; attempt ' || attempts || ' of ' || max_attempts || "
    "' was the last: discarded' WHEN 'failed' THEN '' WHEN 'scheduled' THEN '; retry ' || "
    "(attempts + 1) || ' of ' || max_attempts || ' at ' || aclaim_ts(run_at_us) ELSE "
    "'; retry ' || (attempts + 1) || ' of ' || max_attempts || ' now' END";

/// What follows `RETURNING ` in a CTE `r` that updates `jobs j` with retry_or_discard: the row's
/// outcome columns (kOutcomeReturning), then `extra` (empty, or columns each followed by ", "),
/// run_at_us and max_attempts; the outcome recorded and the dependents settled at `now`; and the
/// head of the audit event up to its kind, which says where the job went (`back`: back in a
/// queue). The statement goes on with the event's worker, time and detail.
inline std::string retried(std::string_view extra, std::string_view now, std::string_view back) {
    return std::string(kOutcomeReturning) + ", " + std::string(extra) +
           R"SQL(aclaim_us(j.run_at) AS run_at_us, j.max_attempts
), recorded AS ()SQL" +
           record_outcomes("r") + "), settled AS (" + settle_dependents("r", now) +
           R"SQL(), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, )SQL" +
           retry_event_kind(back) + ",";
}

}  // namespace aclaim::store::sql
