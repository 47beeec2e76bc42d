#pragma once

// The kinds of the audit logs' rows, declared once: job_events.kind and queue_events.kind hold
// these names, and the C++ that writes or reads a row names a kind through them. The database's
// CHECK on job_events.kind lists the same set; a test compares the two.

#include <initializer_list>
#include <string_view>

#include "common/base/enum_names.hpp"

namespace aclaim::store {

/// What a job_events row records.
enum class EventKind {
    Enqueued,
    Claimed,
    Renewed,
    Completed,
    Failed,
    Released,
    Reclaimed,
    Rejected,  ///< a refused transition; quotes what the caller claimed, changes nothing
    Quarantined,
    Unquarantined,  ///< an operator resolved a quarantine
    Due,            ///< a scheduled job came due
    Discarded,
    Cancelled,
    Retried,     ///< an operator revived a finished job
    Checkpoint,  ///< a PROGRESS that saved a checkpoint
    Parked,
    Unblocked,  ///< the job's last dependency ended
    Waiting,    ///< enqueued behind dependencies that had not all ended
};

inline constexpr base::EnumNames<EventKind, 18> kEventKinds{
    {"enqueued", "claimed", "renewed", "completed", "failed", "released", "reclaimed", "rejected",
     "quarantined", "unquarantined", "due", "discarded", "cancelled", "retried", "checkpoint",
     "parked", "unblocked", "waiting"}};
static_assert(kEventKinds.covers(EventKind::Waiting));

/// Whether a job_events row's kind, as stored, is `kind`.
constexpr bool is(std::string_view stored, EventKind kind) {
    return stored == kEventKinds(kind);
}

/// Whether a job_events row's kind, as stored, is one of `kinds`.
constexpr bool is_one_of(std::string_view stored, std::initializer_list<EventKind> kinds) {
    for (const EventKind k : kinds) {
        if (is(stored, k)) return true;
    }
    return false;
}

/// What a queue_events row records: an operator's pause, resume or settings change of a queue.
enum class QueueEventKind { Paused, Resumed, Configured };

inline constexpr base::EnumNames<QueueEventKind, 3> kQueueEventKinds{
    {"paused", "resumed", "configured"}};
static_assert(kQueueEventKinds.covers(QueueEventKind::Configured));

constexpr bool is(std::string_view stored, QueueEventKind kind) {
    return stored == kQueueEventKinds(kind);
}

}  // namespace aclaim::store
