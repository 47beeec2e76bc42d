#include "coordinator/router/sessions.hpp"

namespace aclaim::coordinator {

Session& SessionTable::open(const std::string& routing_id, const std::string& worker_id,
                            common::OrgId org_id, proto::Encoding encoding) {
    auto [it, fresh] = by_routing_.try_emplace(routing_id);
    Session& s = it->second;
    if (!fresh) forget_worker(s);
    s.routing_id = routing_id;
    s.worker_id = worker_id;
    s.org_id = org_id;
    s.encoding = encoding;
    s.last_seen = clock_.monotonic_now();
    // The newest connection of a worker is the one to tell: an older one is most likely a
    // connection the worker abandoned when it reconnected.
    if (by_worker_.insert_or_assign(WorkerKey{org_id, worker_id}, routing_id).second) {
        ++membership_;
    }
    return s;
}

Session* SessionTable::find(const std::string& routing_id) {
    const auto it = by_routing_.find(routing_id);
    return it == by_routing_.end() ? nullptr : &it->second;
}

Session* SessionTable::find_worker(common::OrgId org_id, const std::string& worker_id) {
    const auto it = by_worker_.find(WorkerKey{org_id, worker_id});
    return it == by_worker_.end() ? nullptr : find(it->second);
}

void SessionTable::forget_worker(const Session& s) {
    const auto it = by_worker_.find(WorkerKey{s.org_id, s.worker_id});
    if (it != by_worker_.end() && it->second == s.routing_id) {
        by_worker_.erase(it);
        ++membership_;
    }
}

void SessionTable::close(const std::string& routing_id) {
    const auto it = by_routing_.find(routing_id);
    if (it == by_routing_.end()) return;
    forget_worker(it->second);
    by_routing_.erase(it);
}

std::vector<std::string> SessionTable::opened_with(
    const std::unordered_set<std::string>& keys) const {
    std::vector<std::string> out;
    if (keys.empty()) return out;
    for (const auto& [routing_id, s] : by_routing_) {
        if (!s.public_key.empty() && keys.count(s.public_key) != 0) out.push_back(routing_id);
    }
    return out;
}

std::size_t SessionTable::expire_idle(SteadyClock::duration idle_limit, std::size_t budget) {
    const auto cutoff = clock_.monotonic_now() - idle_limit;
    std::size_t closed = 0;
    const bool whole = budget == static_cast<std::size_t>(-1);
    auto it = whole || sweep_from_.empty() ? by_routing_.end() : by_routing_.find(sweep_from_);
    if (it == by_routing_.end()) it = by_routing_.begin();
    for (std::size_t seen = 0; it != by_routing_.end() && seen < budget; ++seen) {
        if (it->second.outstanding == 0 && it->second.last_seen < cutoff) {
            forget_worker(it->second);
            it = by_routing_.erase(it);
            ++closed;
        } else {
            ++it;
        }
    }
    sweep_from_ = it == by_routing_.end() ? std::string() : it->first;
    return closed;
}

std::map<common::OrgId, std::vector<std::string>> SessionTable::workers_by_org() const {
    std::map<common::OrgId, std::vector<std::string>> out;
    for (const auto& [key, routing_id] : by_worker_) out[key.first].push_back(key.second);
    return out;
}

}  // namespace aclaim::coordinator
