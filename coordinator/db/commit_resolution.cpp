#include "coordinator/db/commit_resolution.hpp"

namespace aclaim::coordinator {

namespace {

using store::JobState;
using Verdict = CommitResolution::Verdict;

CommitResolution verdict(Verdict v, std::string detail) {
    CommitResolution r;
    r.verdict = v;
    r.detail = std::move(detail);
    return r;
}

}  // namespace

CommitResolution resolve_interrupted(const InterruptedTransition& t,
                                     const std::optional<store::RowAuthority>& row,
                                     base::Instant now) {
    std::string why;
    if (!store::diagnose(row, t.op, t.request, now, &why)) {
        CommitResolution r = verdict(Verdict::Applied, "the row shows the transition committed");
        r.state = row->state;
        return r;
    }
    if (!row || row->org_id != t.request.org) {
        return verdict(Verdict::NotApplied, "no such job in this organization");
    }
    if (row->state == JobState::Assigned && row->generation == t.request.generation &&
        row->assignee == t.request.worker) {
        why = "the job is still held at generation " + std::to_string(t.request.generation);
    }
    const bool ends_terminal = t.op == store::Operation::Complete ||
                               (t.op == store::Operation::Fail && !t.request.retryable);
    if (ends_terminal) {
        // Had it committed, the row would be terminal at this generation for good; only the
        // recovery tool moves a terminal row, and only to quarantined.
        if (row->state == JobState::Quarantined) {
            return verdict(Verdict::Unknown,
                           "job is quarantined; whether the commit happened "
                           "cannot be read from the row");
        }
        return verdict(Verdict::NotApplied, "the commit did not happen: " + why);
    }
    // RELEASE and retryable FAIL leave the job pending, scheduled (a backoff) or discarded (the
    // last attempt) at the same generation, which is also what a reclaim does; a cancel or the
    // recovery tool may move it on from there without a claim. Only a row still assigned or
    // completed at this generation proves the commit did not happen; a later claim moves the
    // row past this generation either way.
    if (row->generation == t.request.generation &&
        (row->state == JobState::Assigned || row->state == JobState::Completed)) {
        return verdict(Verdict::NotApplied, "the commit did not happen: " + why);
    }
    return verdict(Verdict::Unknown,
                   "the job is no longer held at this generation, but a release and a reclaim "
                   "leave the same row; it is not yours either way");
}

}  // namespace aclaim::coordinator
