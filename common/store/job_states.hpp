#pragma once

// The job states, listed once: their names, their display order and the groups the programs show
// them in. The store's parsing, the operator statements' per-state counts and the browser
// console's JSON all read these lists, so a new state is one more entry here.

#include <array>
#include <string>
#include <string_view>

#include "common/store/assignment.hpp"

namespace aclaim::store {

struct JobStateName {
    JobState state;
    std::string_view name;
};

/// Every state with its name as the database stores it, in display order (the enum's order).
inline constexpr std::array<JobStateName, 10> kJobStates{{
    {JobState::Pending, "pending"},
    {JobState::Scheduled, "scheduled"},
    {JobState::Assigned, "assigned"},
    {JobState::Completed, "completed"},
    {JobState::Failed, "failed"},
    {JobState::Discarded, "discarded"},
    {JobState::Cancelled, "cancelled"},
    {JobState::Quarantined, "quarantined"},
    {JobState::Parked, "parked"},
    {JobState::Waiting, "waiting"},
}};

/// The states a job never leaves on its own (is_terminal): their counts only grow.
inline constexpr std::array<JobState, 4> kFinishedStates = {
    JobState::Completed, JobState::Failed, JobState::Discarded, JobState::Cancelled};

/// The states counted per queue where the finished rows would cost too much to count: the work
/// still to do, what an outside system holds and what waits for a person.
inline constexpr std::array<JobState, 6> kQueueStates = {JobState::Pending,   JobState::Scheduled,
                                                         JobState::Assigned,  JobState::Parked,
                                                         JobState::Discarded, JobState::Waiting};

/// The states `cancel` acts on (schema/baseline/tables.sql: a parked job too; its token is refused
/// from then on).
inline constexpr std::array<JobState, 5> kCancellableStates = {
    JobState::Pending, JobState::Scheduled, JobState::Assigned, JobState::Parked,
    JobState::Waiting};

/// The states `retry` revives.
inline constexpr std::array<JobState, 3> kRetryableStates = {JobState::Failed, JobState::Discarded,
                                                             JobState::Cancelled};

/// The database's name of a state.
constexpr std::string_view state_name(JobState s) {
    for (const auto& [state, name] : kJobStates) {
        if (state == s) return name;
    }
    return "unknown";
}

/// The index of a state in kJobStates.
constexpr std::size_t state_index(JobState s) {
    return static_cast<std::size_t>(s);
}
static_assert(state_index(JobState::Waiting) == kJobStates.size() - 1 &&
                  kJobStates[state_index(JobState::Discarded)].state == JobState::Discarded,
              "kJobStates follows the enum's order");

/// The names of `states`, in order.
template <std::size_t N>
std::array<std::string_view, N> state_names(const std::array<JobState, N>& states) {
    std::array<std::string_view, N> out{};
    for (std::size_t i = 0; i < N; ++i) out[i] = state_name(states[i]);
    return out;
}

/// Every state's name, in display order.
inline std::array<std::string_view, kJobStates.size()> all_state_names() {
    std::array<std::string_view, kJobStates.size()> out{};
    for (std::size_t i = 0; i < kJobStates.size(); ++i) out[i] = kJobStates[i].name;
    return out;
}

/// `states` as an SQL list of literals, "'completed', 'failed'", for a statement's IN (...).
template <std::size_t N>
std::string sql_state_list(const std::array<JobState, N>& states) {
    std::string out;
    for (const auto s : states) {
        if (!out.empty()) out += ", ";
        out += "'";
        out += state_name(s);
        out += "'";
    }
    return out;
}

}  // namespace aclaim::store
