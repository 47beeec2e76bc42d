#include "common/store/assignment.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "common/base/enum_names.hpp"
#include "common/store/job_states.hpp"

namespace aclaim::store {

namespace {

/// In Rejection's declaration order.
constexpr base::EnumNames<Rejection, 9> kRejections(
    {"unknown_job", "other_organization", "stale_generation", "lease_expired", "already_terminal",
     "not_assignee", "quarantined", "deadline_exceeded", "cancelled"});
static_assert(kRejections.covers(Rejection::Cancelled));

/// In ClaimOutcome::Status's declaration order.
constexpr base::EnumNames<ClaimOutcome::Status, 2> kClaimStatuses({"claimed", "no_work"});
static_assert(kClaimStatuses.covers(ClaimOutcome::Status::NoWork));

}  // namespace

bool is_terminal(JobState s) {
    return std::find(kFinishedStates.begin(), kFinishedStates.end(), s) != kFinishedStates.end();
}

std::string_view to_string(JobState s) {
    return state_name(s);
}
std::optional<JobState> parse_job_state(std::string_view s) {
    for (const auto& [state, name] : kJobStates) {
        if (name == s) return state;
    }
    return std::nullopt;
}
std::string_view to_string(Rejection r) {
    return kRejections(r);
}
std::optional<Rejection> parse_rejection(std::string_view s) {
    return kRejections.parse(s);
}
std::string_view to_string(ClaimOutcome::Status s) {
    return kClaimStatuses(s);
}

std::optional<Rejection> diagnose(const std::optional<RowAuthority>& row, Operation op,
                                  const TransitionRequest& request, base::Instant now,
                                  std::string* detail) {
    const OrgId org = request.org;
    const Generation generation = request.generation;
    const std::string_view worker = request.worker;
    const std::string_view result_ref = request.result_ref;
    auto say = [&](Rejection r, std::string text) -> std::optional<Rejection> {
        if (detail) *detail = std::move(text);
        return r;
    };
    const std::string gen = std::to_string(generation);
    if (!row) return say(Rejection::UnknownJob, "no such job");
    if (row->org_id != org)
        return say(Rejection::OtherOrganization, "job belongs to another organization");
    const std::string current = std::to_string(row->generation);
    switch (row->state) {
        case JobState::Quarantined:
            return say(Rejection::Quarantined, "job is quarantined for operator review");
        case JobState::Completed:
            if (op == Operation::Complete && row->generation == generation &&
                row->assignee == worker && row->result_ref == result_ref) {
                return std::nullopt;  // the same completion, already committed
            }
            if (row->generation != generation) {
                return say(
                    Rejection::StaleGeneration,
                    "generation " + gen + " is stale: job completed at generation " + current);
            }
            return say(Rejection::AlreadyTerminal, "job is already completed");
        case JobState::Failed:
        case JobState::Discarded: {
            const std::string ended = row->state == JobState::Failed ? "failed" : "was discarded";
            if (op == Operation::Fail && row->generation == generation && row->assignee == worker) {
                return std::nullopt;
            }
            if (row->generation != generation) {
                return say(Rejection::StaleGeneration, "generation " + gen + " is stale: job " +
                                                           ended + " at generation " + current);
            }
            if (row->deadline && *row->deadline <= now) {
                return say(Rejection::DeadlineExceeded,
                           "the attempt ran past its run deadline; "
                           "the job " +
                               ended);
            }
            return say(Rejection::AlreadyTerminal, "job " + ended + " already");
        }
        case JobState::Cancelled:
            return say(Rejection::Cancelled, "job was cancelled");
        case JobState::Scheduled:
        case JobState::Pending:
            // A reclaimed attempt keeps its deadline_at until the next claim: when the reaper took
            // the lease back at the run deadline (the lease never outlives it), say so, whichever
            // of the reaper and this request came first.
            if (row->generation == generation && row->deadline && *row->deadline <= now) {
                return say(Rejection::DeadlineExceeded, "the attempt of generation " + gen +
                                                            " ran past its run deadline; job is " +
                                                            std::string(to_string(row->state)) +
                                                            " again");
            }
            if (row->generation == generation) {
                return say(Rejection::LeaseExpired,
                           "lease of generation " + gen + " was taken back; job is " +
                               std::string(to_string(row->state)) + " again");
            }
            return say(Rejection::StaleGeneration,
                       "generation " + gen + " is stale: current generation is " + current);
        case JobState::Parked:
            // The holder handed the job to an outside system: its lease ended there, and only the
            // callback token finishes the job now.
            if (row->generation != generation) {
                return say(
                    Rejection::StaleGeneration,
                    "generation " + gen + " is stale: job is parked at generation " + current);
            }
            if (row->assignee != worker) {
                return say(Rejection::NotAssignee, "job is held by another worker");
            }
            if (row->deadline && *row->deadline <= now) {
                return say(Rejection::DeadlineExceeded,
                           "the park of generation " + gen + " ran past its deadline");
            }
            return say(Rejection::LeaseExpired,
                       "job of generation " + gen +
                           " is parked: the outside system finishes it with its callback token");
        case JobState::Waiting:
            // Never claimed while it waits: no generation of it holds a lease.
            return say(Rejection::StaleGeneration,
                       "generation " + gen + " is stale: job waits for its dependencies");
        case JobState::Assigned:
            if (row->generation != generation) {
                return say(Rejection::StaleGeneration,
                           "generation " + gen + " is stale: job was claimed again at generation " +
                               current);
            }
            if (row->assignee != worker) {
                return say(Rejection::NotAssignee, "job is held by another worker");
            }
            if (row->deadline && *row->deadline <= now) {
                return say(Rejection::DeadlineExceeded,
                           "the attempt of generation " + gen + " ran past its run deadline");
            }
            if (row->lease_expires_at && *row->lease_expires_at <= now) {
                return say(Rejection::LeaseExpired, "lease of generation " + gen + " has expired");
            }
            // The row now shows a live lease of this generation for this worker: the update lost a
            // race with a change that has since been undone. Refuse rather than guess.
            return say(Rejection::StaleGeneration, "job changed concurrently; retry");
    }
    return say(Rejection::UnknownJob, "unrecognised job state");
}

}  // namespace aclaim::store
