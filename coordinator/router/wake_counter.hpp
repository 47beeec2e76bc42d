#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/store/assignment.hpp"
#include "coordinator/router/routed_request.hpp"

namespace aclaim::coordinator {

/// Per organization, how many job notifications arrived; plus one epoch for every time the
/// listener started listening, when any notification may have been missed. A claim remembers the
/// count it was dispatched under, so that a notification that raced with an empty claim is not
/// lost. Likewise per organization and queue, how many leases ended here (completed, failed,
/// released, parked or reclaimed), each a slot of the queue's concurrency limit freed: a claim
/// that a limit may have held back looks again when the count of its queues moved while it ran.
/// Router thread only.
///
/// The counts are kept in fixed tables indexed by a hash modulo kBuckets, not keyed by every id a
/// notification names: any database login can NOTIFY aclaim_jobs with any id, and a table keyed
/// by them would grow with each one. Organizations (or queues) that share a bucket share its
/// count, so a wake of one makes an empty claim of the other look once more: one extra claim.
class WakeCounter {
  public:
    static constexpr std::size_t kBuckets = 4096;

    std::uint64_t seq(store::OrgId org) const { return listen_epoch_ + wakes_[bucket(org)]; }
    void org_woken(store::OrgId org) { ++wakes_[bucket(org)]; }
    void listener_ready() { ++listen_epoch_; }

    /// The leases ended on any of these queues of the organization, summed: it moves whenever one
    /// of their counts does.
    std::uint64_t slots(store::OrgId org, const std::vector<std::string>& queues) const {
        std::uint64_t sum = 0;
        for (const auto& q : queues) sum += slots_[bucket(org, q)];
        return sum;
    }
    void slot_freed(store::OrgId org, std::string_view queue) { ++slots_[bucket(org, queue)]; }

    /// Stamps a claim about to be dispatched with the counts it is judged by when it comes back
    /// empty (Outcomes::on_claim).
    void stamp(RoutedRequest& claim) const {
        claim.wake_seq = seq(claim.ask().org_id);
        claim.slot_seq = slots(claim.ask().org_id, claim.ask().queues);
    }

  private:
    static std::size_t bucket(store::OrgId org) {
        return static_cast<std::size_t>(static_cast<std::uint64_t>(org) % kBuckets);
    }
    static std::size_t bucket(store::OrgId org, std::string_view queue) {
        return (std::hash<std::string_view>{}(queue) ^ bucket(org)) % kBuckets;
    }

    std::array<std::uint64_t, kBuckets> wakes_{};
    std::array<std::uint64_t, kBuckets> slots_{};
    std::uint64_t listen_epoch_ = 0;
};

}  // namespace aclaim::coordinator
