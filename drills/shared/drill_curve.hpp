#pragma once

// CURVE for the drills' own clients (aclaim-canary's pollers, aclaim-bench's workers): key pairs
// made in-process and worker public keys registered in worker_keys with the columns and rules of
// `aclaimctl keys register`, so that a drill's clients reach the coordinator the way deployed
// workers do (docs/security.md). Secret keys stay in memory; only public keys reach the database.

#include <cstdint>
#include <string>
#include <vector>

#include "worker/client.hpp"

namespace aclaim::drills {

/// Registers each public key for organization `org` under the worker name at the same index, as
/// `aclaimctl keys register --org ORG --name NAME --public-key KEY` does (a name may hold several
/// live keys; a public key is registered once, ever), all in one transaction on `dsn`. Throws on
/// a bad name or key, a key already registered, or a database error; then nothing is registered.
void register_worker_keys(const std::string& dsn, std::int64_t org,
                          const std::vector<std::string>& names,
                          const std::vector<std::string>& public_keys);

/// For each worker name a fresh key pair, registered for `org`, as the worker client takes it
/// with the coordinator's public key `server_public`. Same order as `names`.
std::vector<worker::CurveKeys> make_registered_workers(const std::string& dsn, std::int64_t org,
                                                       const std::vector<std::string>& names,
                                                       const std::string& server_public);

}  // namespace aclaim::drills
