#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/base/clock.hpp"
#include "coordinator/router/routed_request.hpp"

namespace aclaim::coordinator {

/// CLAIMs that found no work and wait for a notification, the end of their wait, held back by a
/// rate limit, the instant its bucket refills, or held back by a concurrency limit
/// (RoutedRequest::slot_bound), a slot freed on one of their queues; by organization and the
/// earlier of the first two instants. Router thread only.
class ParkedClaims {
  public:
    /// A claim's wait ends at its wait_until on the clock's monotonic time; the clock must
    /// outlive the claims.
    explicit ParkedClaims(const base::Clock& clock) : clock_(clock) {}

    void park(RoutedRequest claim);

    /// Removes and returns the organization's parked claims that serve `queue` (all of them
    /// when it is empty), oldest deadline first.
    std::vector<RoutedRequest> take_org(store::OrgId org, std::string_view queue = {});
    /// Removes and returns the organization's slot-bound claim that serves `queue` with the
    /// earliest deadline, if any: one slot freed there, one claim to take it. A queue without a
    /// slot-bound claim parked costs one lookup.
    std::optional<RoutedRequest> take_slot_bound(store::OrgId org, std::string_view queue);
    /// Removes and returns the slot-bound claim of one connection of the organization with the
    /// earliest deadline, if any: a completion it sends frees a slot that claim may take.
    std::optional<RoutedRequest> take_slot_bound_of(store::OrgId org,
                                                    const std::string& routing_id);
    std::vector<RoutedRequest> take_all();
    /// Removes and returns the claims whose wait has ended by now.
    std::vector<RoutedRequest> take_expired();
    /// Removes and returns the claims whose retry_at has come while their wait goes on.
    std::vector<RoutedRequest> take_refilled();
    /// Removes and returns the claims of one connection.
    std::vector<RoutedRequest> take_connection(const std::string& routing_id);

    /// The earliest end of a wait or retry_at, if any claim is parked.
    std::optional<SteadyClock::time_point> next_deadline() const;
    std::size_t size() const { return count_; }
    /// Claims parked by one connection, and by one organization (for the parked-claim limits).
    std::size_t of_connection(const std::string& routing_id) const;
    std::size_t of_org(store::OrgId org) const;

  private:
    /// The parked claims whose key has come by now and of which `ended` says that they go.
    template <class Ended>
    std::vector<RoutedRequest> take_due(Ended ended);
    /// The parked claims keyed no later than `until` of which `goes` says that they go; counted
    /// as taken.
    template <class Goes>
    std::vector<RoutedRequest> take_where(SteadyClock::time_point until, Goes goes);
    /// The organization's slot-bound claim of earliest deadline of which `wanted` says yes,
    /// removed.
    template <class Wanted>
    std::optional<RoutedRequest> take_first_slot_bound(store::OrgId org, Wanted wanted);
    /// Counts the claims of `out` as gone, from count_, their connections' and slot_bound_.
    void taken(const std::vector<RoutedRequest>& out);

    const base::Clock& clock_;
    using ByDeadline = std::multimap<SteadyClock::time_point, RoutedRequest>;
    std::unordered_map<store::OrgId, ByDeadline> by_org_;
    std::size_t count_ = 0;
    std::unordered_map<std::string, std::size_t> per_connection_;
    /// The slot-bound claims parked, per organization and served queue.
    std::unordered_map<store::OrgId, std::map<std::string, std::size_t, std::less<>>> slot_bound_;
};

}  // namespace aclaim::coordinator
