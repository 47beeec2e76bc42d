#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/store/assignment.hpp"

namespace aclaim::coordinator {

/// Per organization, how many job notifications arrived; plus one epoch for every time the
/// listener started listening, when any notification may have been missed. A claim remembers the
/// count it was dispatched under, so that a notification that raced with an empty claim is not
/// lost. Router thread only.
///
/// The counts are kept in a fixed table indexed by the organization id modulo kBuckets, not keyed
/// by every id a notification names: any database login can NOTIFY aclaim_jobs with any id, and a
/// table keyed by them would grow with each one. Organizations whose ids share a bucket share its
/// count, so a wake of one makes an empty claim of the other look once more: one extra claim.
class WakeCounter {
  public:
    static constexpr std::size_t kBuckets = 4096;

    std::uint64_t seq(common::OrgId org) const { return listen_epoch_ + wakes_[bucket(org)]; }
    void org_woken(common::OrgId org) { ++wakes_[bucket(org)]; }
    void listener_ready() { ++listen_epoch_; }

  private:
    static std::size_t bucket(common::OrgId org) {
        return static_cast<std::size_t>(static_cast<std::uint64_t>(org) % kBuckets);
    }

    std::array<std::uint64_t, kBuckets> wakes_{};
    std::uint64_t listen_epoch_ = 0;
};

}  // namespace aclaim::coordinator
