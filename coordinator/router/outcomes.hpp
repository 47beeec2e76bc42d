#pragma once

#include <deque>
#include <vector>

#include "common/base/clock.hpp"
#include "coordinator/db/events.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"
#include "coordinator/router/dispatcher.hpp"
#include "coordinator/router/parked_claims.hpp"
#include "coordinator/router/replier.hpp"
#include "coordinator/router/revocations.hpp"
#include "coordinator/router/routed_request.hpp"
#include "coordinator/router/sessions.hpp"
#include "coordinator/router/wake_counter.hpp"

namespace aclaim::coordinator {

/// The router thread's side of what comes back: store outcomes become replies (or parked claims,
/// or claims dispatched again), reclaims become REVOKED pushes, job notifications wake parked
/// claims, and a key re-check cuts off connections. Router thread only.
class Outcomes {
  public:
    /// Everything it is handed must outlive it.
    struct Parts {
        const base::Clock& clock;
        SessionTable& sessions;
        ParkedClaims& parked;
        Revocations& revocations;
        WakeCounter& wakes;
        Dispatcher& dispatcher;
        Replier& replier;
        Metrics& metrics;
    };

    Outcomes(const RouterOptions& options, Parts parts) : options_(options), p_(parts) {}

    /// Handles the events collected from the mailbox, in order.
    void process(std::deque<Event> events);
    /// Dispatches again the parked claims whose rate-limited queue's bucket has refilled.
    void refilled(std::vector<RoutedRequest> claims);

  private:
    void on_outcome(RequestOutcome& outcome);
    void on_claim(RoutedRequest& request, const RequestOutcome::Result& result);
    /// Adds a granted claim's stages to Metrics::claim_stages.
    void observe_stages(const DbRequest& request);
    void on_transition(const RoutedRequest& request, const RequestOutcome::Result& result);
    void on_internal(const StoreRequest& request, const RequestOutcome::Result& result);
    /// An outcome of a request already answered at its deadline.
    void on_late(const StoreRequest& request, const RequestOutcome::Result& result);
    /// Pushes REVOKED to the holder, when it has a session here. Every Reclaimed was read from a
    /// row: the reaper's reclaim statement returned it, or the listener's check bore out an
    /// aclaim_revoke notification against the job's row (listener_checks.hpp); a notification
    /// alone never gets here.
    void on_reclaimed(const store::Reclaimed& reclaimed);
    void wake(std::vector<RoutedRequest> claims);
    /// A lease of the organization's queue ended (completed, failed, released, parked or
    /// reclaimed), freeing a slot of the queue's concurrency limit, if it has one: the earliest
    /// parked claim held back by such a limit on that queue is dispatched again, and a claim of
    /// it still at the database looks again if it comes back empty. A queue without a limit has
    /// no such claim and costs a lookup.
    void slot_freed(store::OrgId org, const std::string& queue);
    /// Gives back leases claimed for `claim` that its worker will not hear of.
    void release_undelivered(const StoreRequest& claim, const store::ClaimOutcome& outcome);

    const RouterOptions& options_;
    Parts p_;
};

}  // namespace aclaim::coordinator
