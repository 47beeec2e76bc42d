#pragma once

#include <cstdint>
#include <unordered_map>

#include "common/store/assignment.hpp"

namespace aclaim::coordinator {

/// Per organization, how many job notifications arrived; plus one epoch for every time the
/// listener started listening, when any notification may have been missed. A claim remembers the
/// count it was dispatched under, so that a notification that raced with an empty claim is not
/// lost. Router thread only.
class WakeCounter {
  public:
    std::uint64_t seq(common::OrgId org) const {
        const auto it = wakes_.find(org);
        return listen_epoch_ + (it == wakes_.end() ? 0 : it->second);
    }
    void org_woken(common::OrgId org) { ++wakes_[org]; }
    void listener_ready() { ++listen_epoch_; }

  private:
    std::unordered_map<common::OrgId, std::uint64_t> wakes_;
    std::uint64_t listen_epoch_ = 0;
};

}  // namespace aclaim::coordinator
