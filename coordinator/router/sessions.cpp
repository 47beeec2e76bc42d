#include "coordinator/router/sessions.hpp"

namespace aclaim::coordinator {

Session& SessionTable::open(const std::string& routing_id, const std::string& worker_id,
                            store::OrgId org_id, proto::Encoding encoding) {
    auto [it, fresh] = by_routing_.try_emplace(routing_id);
    Session& s = it->second;
    if (!fresh) {
        // A connection that says HELLO as another worker serves nothing of the one it was until
        // serve() says what it serves now.
        if (s.org_id != org_id || s.worker_id != worker_id) {
            count_queues(WorkerKey{s.org_id, s.worker_id}, s.queues, -1);
            s.queues.clear();
        }
        forget_worker(s);
        count(s, -1);
    }
    s.routing_id = routing_id;
    s.worker_id = worker_id;
    s.org_id = org_id;
    count(s, +1);
    s.encoding = encoding;
    s.last_seen = clock_.monotonic_now();
    // The newest connection of a worker is the one to tell: an older one is most likely a
    // connection the worker abandoned when it reconnected.
    by_worker_.insert_or_assign(WorkerKey{org_id, worker_id}, routing_id);
    return s;
}

void SessionTable::serve(Session& s, std::vector<std::string> queues) {
    if (queues == s.queues) return;
    const WorkerKey key{s.org_id, s.worker_id};
    // The new ones counted before the old ones are dropped: a queue served before and after
    // neither leaves nor joins the worker's, and the membership moves only when those change.
    count_queues(key, queues, +1);
    count_queues(key, s.queues, -1);
    s.queues = std::move(queues);
}

void SessionTable::count_queues(const WorkerKey& key, const std::vector<std::string>& queues,
                                int delta) {
    if (queues.empty()) return;
    auto& served = serving_[key];
    for (const auto& q : queues) {
        if (delta > 0) {
            if (++served[q] == 1) ++membership_;
            continue;
        }
        const auto it = served.find(q);
        if (it != served.end() && --it->second == 0) {
            served.erase(it);
            ++membership_;
        }
    }
    if (served.empty()) serving_.erase(key);
}

Session* SessionTable::find(const std::string& routing_id) {
    const auto it = by_routing_.find(routing_id);
    return it == by_routing_.end() ? nullptr : &it->second;
}

Session* SessionTable::find_worker(store::OrgId org_id, const std::string& worker_id) {
    const auto it = by_worker_.find(WorkerKey{org_id, worker_id});
    return it == by_worker_.end() ? nullptr : find(it->second);
}

void SessionTable::forget_fd(const Session& s) {
    if (s.fd < 0) return;
    auto [from, to] = by_fd_.equal_range(s.fd);
    for (auto f = from; f != to; ++f) {
        if (f->second == s.routing_id) {
            by_fd_.erase(f);
            return;
        }
    }
}

void SessionTable::forget_worker(const Session& s) {
    const auto it = by_worker_.find(WorkerKey{s.org_id, s.worker_id});
    if (it != by_worker_.end() && it->second == s.routing_id) by_worker_.erase(it);
}

void SessionTable::count(const Session& s, int delta) {
    const auto step = [delta](std::size_t& n) { n = delta > 0 ? n + 1 : (n > 0 ? n - 1 : 0); };
    const auto key = per_key_.try_emplace(WorkerKey{s.org_id, s.worker_id}, 0).first;
    step(key->second);
    const bool first = delta > 0 && key->second == 1;
    if (key->second == 0) per_key_.erase(key);
    const bool last = delta < 0 && of_key(s.org_id, s.worker_id) == 0;
    if (first || last) {
        // A worker came or went: what workers_by_org answers changed.
        ++membership_;
        if (key_listener_) key_listener_(s.org_id, s.worker_id, first);
    }
    const auto org = per_org_.try_emplace(s.org_id, 0).first;
    step(org->second);
    if (org->second == 0) per_org_.erase(org);
}

std::unordered_map<std::string, Session>::iterator SessionTable::erase(
    std::unordered_map<std::string, Session>::iterator it) {
    Session& s = it->second;
    forget_worker(s);
    count(s, -1);
    count_queues(WorkerKey{s.org_id, s.worker_id}, s.queues, -1);
    forget_fd(s);
    return by_routing_.erase(it);
}

void SessionTable::close(const std::string& routing_id) {
    const auto it = by_routing_.find(routing_id);
    if (it == by_routing_.end()) return;
    erase(it);
}

void SessionTable::set_fd(Session& s, int fd) {
    if (s.fd == fd || fd < 0) return;
    forget_fd(s);
    s.fd = fd;
    by_fd_.emplace(fd, s.routing_id);
}

std::vector<std::string> SessionTable::close_fd(int fd) {
    std::vector<std::string> out;
    auto [from, to] = by_fd_.equal_range(fd);
    for (auto f = from; f != to; ++f) out.push_back(f->second);
    for (const auto& routing_id : out) close(routing_id);
    return out;
}

std::size_t SessionTable::of_key(store::OrgId org_id, const std::string& worker_id) const {
    const auto it = per_key_.find(WorkerKey{org_id, worker_id});
    return it == per_key_.end() ? 0 : it->second;
}

std::size_t SessionTable::of_org(store::OrgId org_id) const {
    const auto it = per_org_.find(org_id);
    return it == per_org_.end() ? 0 : it->second;
}

// The two limits, as the options name them.
// NOLINTBEGIN(bugprone-easily-swappable-parameters)
std::optional<SessionLimit> SessionTable::over_limit(const std::string& routing_id,
                                                     store::OrgId org_id,
                                                     const std::string& worker_id,
                                                     std::size_t per_key,
                                                     std::size_t per_org) const {
    // NOLINTEND(bugprone-easily-swappable-parameters)
    const auto it = by_routing_.find(routing_id);
    const bool same_key =
        it != by_routing_.end() && it->second.org_id == org_id && it->second.worker_id == worker_id;
    if (same_key) return std::nullopt;
    const bool same_org = it != by_routing_.end() && it->second.org_id == org_id;
    if (of_key(org_id, worker_id) >= per_key) return SessionLimit::PerKey;
    if (!same_org && of_org(org_id) >= per_org) return SessionLimit::PerOrg;
    return std::nullopt;
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
            it = erase(it);
            ++closed;
        } else {
            ++it;
        }
    }
    sweep_from_ = it == by_routing_.end() ? std::string() : it->first;
    return closed;
}

PresenceBoard::Workers SessionTable::workers_by_org() const {
    PresenceBoard::Workers out;
    for (const auto& [key, sessions] : per_key_) {
        auto& worker = out[key.first].emplace_back(ConnectedWorker{key.second, {}});
        if (const auto served = serving_.find(key); served != serving_.end()) {
            for (const auto& [queue, sessions] : served->second) worker.queues.push_back(queue);
        }
    }
    return out;
}

}  // namespace aclaim::coordinator
