#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "coordinator/metrics/metrics.hpp"
#include "coordinator/router/parked_claims.hpp"
#include "coordinator/router/replier.hpp"
#include "coordinator/router/sessions.hpp"

namespace aclaim::coordinator {

/// The keys of open connections that are no longer live, and cutting off the sessions opened
/// under them. Empty in plaintext mode. Router thread only.
class Revocations {
  public:
    Revocations(SessionTable& sessions, ParkedClaims& parked, Replier& replier, Metrics& metrics)
        : sessions_(sessions), parked_(parked), replier_(replier), metrics_(metrics) {}

    /// True when the ZAP handler's latest re-check found this key no longer live.
    bool revoked(const std::string& public_key) const {
        return !public_key.empty() && !keys_.empty() && keys_.count(public_key) != 0;
    }

    /// Takes the latest re-check's set and cuts off at once every session opened under it,
    /// rather than at its next request: a silent session must not be told of reclaims, nor look
    /// connected in /metrics.
    void replace(const std::vector<std::string>& keys);

    /// Closes the session of a connection whose key was revoked; its parked claims are answered
    /// ERROR key_revoked. Its leases are left alone: they expire and are reclaimed.
    void cut_off(const std::string& routing_id);

  private:
    SessionTable& sessions_;
    ParkedClaims& parked_;
    Replier& replier_;
    Metrics& metrics_;
    std::unordered_set<std::string> keys_;
};

}  // namespace aclaim::coordinator
