#pragma once

// The checker's rate_respected invariant (schema/baseline/tables.sql), apart from the
// checker's other queue checks because it replays each rate-limited queue's token bucket.

#include <functional>
#include <string>
#include <unordered_map>

#include "common/ops/checker.hpp"

namespace aclaim::ops {

/// Replays the bucket of every queue a 'configured' queue event gave a rate limit, as the claim
/// statement keeps it, over the queue's claims in event order (claims of a rate-limited queue
/// take turns under its lock, so id order is the order they spent in), and reports a claim that
/// found less than a whole token. A change of limit applies to the claims stamped at or after it
/// (a claim waits for the change under the organization's lock).
void check_rates(const History& h, const std::unordered_map<store::JobId, const JobRow*>& rows,
                 const std::function<void(Invariant, store::JobId, std::string)>& violate);

}  // namespace aclaim::ops
