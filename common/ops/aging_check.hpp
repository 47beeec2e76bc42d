#pragma once

// The checker's aging_bound_kept invariant (schema/baseline/tables.sql): a pending job of an
// aged queue reaches the priority of any job of its queue within (that priority - its own) x the
// aging step of its wait, and is then ahead of every younger one; so no younger job of the queue
// is claimed past that while it waits.

#include <functional>
#include <string>
#include <unordered_map>

#include "common/ops/checker.hpp"

namespace aclaim::ops {

/// What the aging bound allows beyond (p_K - p_J) x S: the ager's pass interval (1 s by default)
/// and the time a claim takes to commit.
inline constexpr base::Duration kAgingTolerance = std::chrono::seconds(10);

/// Replays each aged queue's first claims in event order (a 'configured' queue event with
/// "aging=" sets the step, in force from its time) and reports a job J that was waiting, in the
/// queue, when a younger job K of the queue was first claimed later than J's wait start + (K's
/// priority - J's enqueued priority) x S + kAgingTolerance, unless J itself was claimed within
/// kAgingTolerance of K (the two claims ran together, and SKIP LOCKED passed J over). Only each
/// job's first wait is replayed; K's priority is read from its row (aging never lowers it, so the
/// bound read is never tighter than the one that held).
void check_aging(const History& h, const std::unordered_map<store::JobId, const JobRow*>& rows,
                 const std::function<void(Invariant, store::JobId, std::string)>& violate);

}  // namespace aclaim::ops
