#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/base/clock.hpp"
#include "common/proto/protocol.hpp"
#include "coordinator/db/events.hpp"
#include "coordinator/db/presence.hpp"

namespace aclaim::coordinator {

/// One connected worker, known by the routing id its connection got from the ROUTER socket.
struct Session {
    std::string routing_id;
    std::string worker_id;
    store::OrgId org_id = 0;  ///< the organization every request of this session acts for
    std::string user_id;      ///< the CURVE identity it was opened under; empty in plaintext
    std::string public_key;   ///< its connection's CURVE key (Z85); empty in plaintext
    std::vector<std::string> queues{};  ///< served, sorted, each once; SessionTable::serve
    proto::Encoding encoding = proto::Encoding::Binary;  ///< of its latest request, for pushes
    int outstanding = 0;  ///< requests not answered yet, parked claims included
    /// Granted proto::kFeatureReconnectHints: its `draining` and `overloaded` carry retry_after_ms.
    bool reconnect_hints = false;
    /// Granted proto::kFeatureProgress: its ASSIGNED carries the progress earlier holders saved.
    bool progress = false;
    SteadyClock::time_point last_seen{};
    /// The descriptor of its connection in the coordinator (ZMQ_SRCFD), for closing it when the
    /// connection goes; -1 while unknown.
    int fd = -1;
};

/// Which of the session limits a HELLO would pass (SessionTable::over_limit).
enum class SessionLimit { PerKey, PerOrg };

/// Sessions by routing id, and the connection currently speaking for each worker so that a
/// reclaim can be pushed to it. Router thread only.
class SessionTable {
  public:
    /// The clock's monotonic time stamps when each session was last heard from; it must outlive
    /// the table.
    explicit SessionTable(const base::Clock& clock) : clock_(clock) {}

    /// Told whenever a key (a worker of an organization) gains its first session or loses its
    /// last: the ZAP handler's view of which keys are connected (ConnectionBudget).
    using KeyListener = std::function<void(store::OrgId, const std::string&, bool has_sessions)>;
    void set_key_listener(KeyListener listener) { key_listener_ = std::move(listener); }

    /// Opens the connection's session, or re-identifies it; outstanding requests carry over.
    Session& open(const std::string& routing_id, const std::string& worker_id, store::OrgId org_id,
                  proto::Encoding encoding);

    /// Sets the queues the session serves (sorted, each once), as every HELLO does.
    void serve(Session& s, std::vector<std::string> queues);

    /// The session was heard from now.
    void touch(Session& s) const { s.last_seen = clock_.monotonic_now(); }

    Session* find(const std::string& routing_id);

    /// The session through which the worker of this organization last said HELLO, if open.
    Session* find_worker(store::OrgId org_id, const std::string& worker_id);

    void close(const std::string& routing_id);

    /// Records the descriptor of the session's connection (Session::fd).
    void set_fd(Session& s, int fd);
    /// Closes the sessions whose connection had this descriptor, which has just closed; returns
    /// their routing ids.
    std::vector<std::string> close_fd(int fd);

    /// Which limit a HELLO on `routing_id` for this worker would pass, if any: a key (a worker of
    /// an organization: under CURVE the worker id is its key's name) holding `per_key` sessions
    /// already, or an organization `per_org`. A HELLO that re-identifies its own session as the
    /// same worker takes no new place.
    std::optional<SessionLimit> over_limit(const std::string& routing_id, store::OrgId org_id,
                                           const std::string& worker_id, std::size_t per_key,
                                           std::size_t per_org) const;
    std::size_t of_key(store::OrgId org_id, const std::string& worker_id) const;
    std::size_t of_org(store::OrgId org_id) const;
    /// Whether this worker of this organization has any session here.
    bool has_session(store::OrgId org_id, const std::string& worker_id) const {
        return of_key(org_id, worker_id) > 0;
    }

    /// The routing ids of the sessions opened under any of these CURVE keys.
    std::vector<std::string> opened_with(const std::unordered_set<std::string>& keys) const;

    /// Closes sessions silent for longer than `idle_limit` with nothing outstanding: a ROUTER is
    /// not told when a peer goes away, and the table must not grow with every connection ever
    /// made. Returns how many it closed. With `budget`, looks at no more than that many sessions,
    /// going on from where the previous call stopped, so that a table of ten thousand idle
    /// connections is swept in slices rather than in one stall of the router thread; a session
    /// the table reordered behind the cursor (it grew meanwhile) is found by a later pass.
    std::size_t expire_idle(SteadyClock::duration idle_limit,
                            std::size_t budget = static_cast<std::size_t>(-1));

    std::size_t size() const { return by_routing_.size(); }

    /// The workers (distinct worker ids, in name order) that have a session, any of theirs, per
    /// organization, each with the queues its sessions serve.
    PresenceBoard::Workers workers_by_org() const;

    /// Moves whenever a worker gains or loses its session or the queues its sessions serve
    /// change (what workers_by_org answers), so that the list is built again only when it changed.
    std::uint64_t membership() const { return membership_; }

  private:
    using WorkerKey = std::pair<store::OrgId, std::string>;

    void forget_worker(const Session& s);
    /// Drops the session's entry from the fd index, if it has one.
    void forget_fd(const Session& s);
    /// Every way a session leaves the table goes through here (the counts and the fd index).
    std::unordered_map<std::string, Session>::iterator erase(
        std::unordered_map<std::string, Session>::iterator it);
    void count(const Session& s, int delta);
    /// Adds (+1) or removes (-1) these queues, served by one session, to or from the worker's.
    void count_queues(const WorkerKey& key, const std::vector<std::string>& queues, int delta);

    const base::Clock& clock_;
    std::unordered_map<std::string, Session> by_routing_;
    std::map<WorkerKey, std::string> by_worker_;
    std::uint64_t membership_ = 0;
    /// Sessions per worker (the key's name) and per organization, for the limits.
    std::map<WorkerKey, std::size_t> per_key_;
    std::unordered_map<store::OrgId, std::size_t> per_org_;
    /// Per worker, each queue its sessions serve and by how many of them.
    std::map<WorkerKey, std::map<std::string, std::size_t>> serving_;
    /// Routing ids by the descriptor of their connection.
    std::unordered_multimap<int, std::string> by_fd_;
    KeyListener key_listener_;
    /// Where a budgeted expire_idle goes on: the routing id it stopped before (none: the start).
    std::string sweep_from_;
};

}  // namespace aclaim::coordinator
