#pragma once

// CURVE key pairs and every statement on worker_keys, shared by `aclaimctl keys`, the ZAP handler,
// the drills' own clients and the tests: one set of rules for what a registrable key is, and time
// passed in as everywhere else in the store (no now() in SQL).

#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/store/assignment.hpp"

namespace aclaim::ops {

/// One CURVE key pair, Z85 text (40 characters each).
struct CurveKeyPair {
    std::string public_key;
    std::string secret_key;
};

/// A fresh key pair from zmq_curve_keypair. Throws std::runtime_error when libzmq was built
/// without CURVE.
CurveKeyPair make_curve_key_pair();

/// Throws std::invalid_argument, saying what is wrong, unless `org` is positive, `name` is 1..128
/// bytes and `public_key` is 40 characters of valid Z85.
void check_worker_key(store::OrgId org, const std::string& name, const std::string& public_key);

/// Binds `public_key` to the worker `name` of `org`, after check_worker_key. A name may hold
/// several live keys (rotation); a public key is registered once, ever: false, and nothing
/// written, when it already was (revoked or not).
/// `queues`, when given, are the only queues the key's worker may serve.
bool register_worker_key(pqxx::work& txn, store::OrgId org, const std::string& name,
                         const std::string& public_key,
                         const std::optional<std::vector<std::string>>& queues = std::nullopt);

/// Whom a live (registered, not revoked) key speaks for.
struct WorkerKeyOwner {
    store::OrgId org_id = 0;
    std::string name;
    /// The only queues its worker may serve; nullopt: any.
    std::optional<std::vector<std::string>> queues;
};

/// "a,b,c" as {"a", "b", "c"} (queue names hold no comma).
std::vector<std::string> split_queues(std::string_view list);

/// The owners of those of `public_keys` that are live, in one query: a coordinator restarted under
/// thousands of workers authenticates their handshakes a batch at a time.
std::unordered_map<std::string, WorkerKeyOwner> live_worker_key_owners(
    pqxx::transaction_base& txn, const std::vector<std::string>& public_keys);

/// Which of `public_keys` are still live.
std::unordered_set<std::string> live_worker_keys(pqxx::transaction_base& txn,
                                                 const std::vector<std::string>& public_keys);

/// Revokes `public_key` at `now` (microseconds since the epoch) if it is live. Returns the keys
/// revoked: it, or nothing.
std::vector<std::string> revoke_worker_key(pqxx::work& txn, const std::string& public_key,
                                           base::Instant now);

/// Revokes every live key of the worker `name` (of `org`, or of every organization when org is
/// 0) at `now`. Returns the keys revoked.
std::vector<std::string> revoke_worker_keys_named(pqxx::work& txn, const std::string& name,
                                                  store::OrgId org, base::Instant now);

}  // namespace aclaim::ops
