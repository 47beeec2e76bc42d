#include "coordinator/router/parked_claims.hpp"

#include <algorithm>

namespace aclaim::coordinator {

namespace {

bool serves(const RoutedRequest& claim, std::string_view queue) {
    const auto& served = claim.ask().queues;
    return std::find(served.begin(), served.end(), queue) != served.end();
}

}  // namespace

void ParkedClaims::park(RoutedRequest claim) {
    const auto org = claim.ask().org_id;
    auto until = claim.wait_until;
    if (claim.retry_at && *claim.retry_at < until) until = *claim.retry_at;
    ++per_connection_[claim.reply.routing_id];
    if (claim.slot_bound) {
        auto& queues = slot_bound_[org];
        for (const auto& q : claim.ask().queues) ++queues[q];
    }
    by_org_[org].emplace(until, std::move(claim));
    ++count_;
}

void ParkedClaims::taken(const std::vector<RoutedRequest>& out) {
    count_ -= out.size();
    for (const auto& c : out) {
        if (c.slot_bound) {
            const auto org = slot_bound_.find(c.ask().org_id);
            for (const auto& q : c.ask().queues) {
                const auto n = org->second.find(q);
                if (--n->second == 0) org->second.erase(n);
            }
            if (org->second.empty()) slot_bound_.erase(org);
        }
        const auto it = per_connection_.find(c.reply.routing_id);
        if (it == per_connection_.end()) continue;
        if (--it->second == 0) per_connection_.erase(it);
    }
}

std::size_t ParkedClaims::of_connection(const std::string& routing_id) const {
    const auto it = per_connection_.find(routing_id);
    return it == per_connection_.end() ? 0 : it->second;
}

std::size_t ParkedClaims::of_org(store::OrgId org) const {
    const auto it = by_org_.find(org);
    return it == by_org_.end() ? 0 : it->second.size();
}

std::vector<RoutedRequest> ParkedClaims::take_org(store::OrgId org, std::string_view queue) {
    std::vector<RoutedRequest> out;
    const auto it = by_org_.find(org);
    if (it == by_org_.end()) return out;
    auto& claims = it->second;
    for (auto c = claims.begin(); c != claims.end();) {
        if (queue.empty() || serves(c->second, queue)) {
            out.push_back(std::move(c->second));
            c = claims.erase(c);
        } else {
            ++c;
        }
    }
    taken(out);
    if (claims.empty()) by_org_.erase(it);
    return out;
}

std::optional<RoutedRequest> ParkedClaims::take_slot_bound(store::OrgId org,
                                                           std::string_view queue) {
    const auto waiting = slot_bound_.find(org);
    if (waiting == slot_bound_.end() || !waiting->second.contains(queue)) return std::nullopt;
    return take_first_slot_bound(org, [queue](const RoutedRequest& c) { return serves(c, queue); });
}

std::optional<RoutedRequest> ParkedClaims::take_slot_bound_of(store::OrgId org,
                                                              const std::string& routing_id) {
    if (of_connection(routing_id) == 0 || !slot_bound_.contains(org)) return std::nullopt;
    return take_first_slot_bound(
        org, [&routing_id](const RoutedRequest& c) { return c.reply.routing_id == routing_id; });
}

template <class Wanted>
std::optional<RoutedRequest> ParkedClaims::take_first_slot_bound(store::OrgId org, Wanted wanted) {
    const auto it = by_org_.find(org);
    if (it == by_org_.end()) return std::nullopt;
    auto& claims = it->second;
    for (auto c = claims.begin(); c != claims.end(); ++c) {
        if (!c->second.slot_bound || !wanted(c->second)) continue;
        std::vector<RoutedRequest> out;
        out.push_back(std::move(c->second));
        claims.erase(c);
        taken(out);
        if (claims.empty()) by_org_.erase(it);
        return std::move(out.front());
    }
    return std::nullopt;
}

std::vector<RoutedRequest> ParkedClaims::take_all() {
    std::vector<RoutedRequest> out;
    for (auto& [org, claims] : by_org_) {
        for (auto& [until, claim] : claims) out.push_back(std::move(claim));
    }
    by_org_.clear();
    per_connection_.clear();
    slot_bound_.clear();
    count_ = 0;
    return out;
}

template <class Goes>
std::vector<RoutedRequest> ParkedClaims::take_where(SteadyClock::time_point until, Goes goes) {
    std::vector<RoutedRequest> out;
    for (auto it = by_org_.begin(); it != by_org_.end();) {
        auto& claims = it->second;
        // Each organization's claims are in key order: none past `until` can go.
        for (auto c = claims.begin(); c != claims.end() && c->first <= until;) {
            if (goes(c->second)) {
                out.push_back(std::move(c->second));
                c = claims.erase(c);
            } else {
                ++c;
            }
        }
        it = claims.empty() ? by_org_.erase(it) : std::next(it);
    }
    taken(out);
    return out;
}

template <class Ended>
std::vector<RoutedRequest> ParkedClaims::take_due(Ended ended) {
    const auto now = clock_.monotonic_now();
    return take_where(now, [&](const RoutedRequest& c) { return ended(c, now); });
}

std::vector<RoutedRequest> ParkedClaims::take_expired() {
    return take_due(
        [](const RoutedRequest& c, SteadyClock::time_point now) { return c.wait_until <= now; });
}

std::vector<RoutedRequest> ParkedClaims::take_refilled() {
    return take_due(
        [](const RoutedRequest& c, SteadyClock::time_point now) { return c.wait_until > now; });
}

std::vector<RoutedRequest> ParkedClaims::take_connection(const std::string& routing_id) {
    // Every closed connection asks; most have nothing parked, and the scan is of every claim.
    if (of_connection(routing_id) == 0) return {};
    return take_where(SteadyClock::time_point::max(),
                      [&](const RoutedRequest& c) { return c.reply.routing_id == routing_id; });
}

std::optional<SteadyClock::time_point> ParkedClaims::next_deadline() const {
    std::optional<SteadyClock::time_point> next;
    for (const auto& [org, claims] : by_org_) {
        if (!claims.empty() && (!next || claims.begin()->first < *next)) {
            next = claims.begin()->first;
        }
    }
    return next;
}

}  // namespace aclaim::coordinator
