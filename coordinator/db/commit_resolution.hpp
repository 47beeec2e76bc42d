#pragma once

#include <optional>
#include <string>

#include "common/store/assignment.hpp"

namespace aclaim::coordinator {

/// What the current row says about a transition whose commit was interrupted by a lost
/// connection. The row is the only authority: the transition is never simply retried, because a
/// retry after a commit that did happen would be judged against a row that has since moved on.
struct CommitResolution {
    enum class Verdict {
        Applied,     ///< the row shows this very transition: answer ACCEPTED, replayed
        NotApplied,  ///< the row shows it cannot have happened: safe for the worker to re-send
        Unknown,     ///< the row looks the same either way: say so rather than guess
    };
    Verdict verdict = Verdict::Unknown;
    store::JobState state = store::JobState::Pending;  ///< the row's state, when Applied
    std::string detail;
};

/// The interrupted request: the same TransitionRequest the store was given, and its operation.
struct InterruptedTransition {
    store::Operation op = store::Operation::Complete;
    store::TransitionRequest request;
};

/// Decides from the row read after reconnecting (nullopt: no such job).
CommitResolution resolve_interrupted(const InterruptedTransition& t,
                                     const std::optional<store::RowAuthority>& row,
                                     base::Instant now);

}  // namespace aclaim::coordinator
